/* fuzz_index.h -- the index fuzzer's shared parts: its state (the store
 * under test, the reference model, what the harness holds), the checks run
 * against the model, and the operations the input decodes into. The
 * property, the input format and the entry point are in fuzz_index.c; the
 * model and checks in fuzz_index_model.c; the operations in
 * fuzz_index_ops.c.
 */
#ifndef SB_FUZZ_INDEX_H
#define SB_FUZZ_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snapbank.h"

enum {
    FZ_HEADER = 8,          /* header bytes */
    FZ_MAX_NS = 3,
    FZ_MAX_TENSORS = 2,
    FZ_MAX_SEQ = 40,        /* longest sequence the decoder builds: 32 + 7 */
    FZ_MAX_BPT = 16,        /* largest bytes per token of any tensor */
    FZ_MAX_POINT = 48,      /* largest point state */
    FZ_MATCHES = 8,         /* held matches */
    FZ_PAGES = 32,          /* held page references */
    FZ_PINS = 8,            /* pin records (live, expired or unpinned) */
    FZ_RECENT = 16,         /* recent sequences per namespace, for SEQ mode 5-7 */
    FZ_CHECK_LAST = 32,     /* CHECK verifies this many newest model entries */
};

enum {
    OP_PUT = 0,             /* and 1 */
    OP_COMMIT = 2,          /* and 3 */
    OP_MATCH = 4,
    OP_RESTORE = 5,
    OP_RELEASE = 6,
    OP_PIN = 7,
    OP_UNPIN = 8,
    OP_CLOCK = 9,
    OP_ALLOC = 10,
    OP_UNREF = 11,
    OP_MPAGES = 12,
    OP_WRITABLE = 13,
    OP_REOPEN = 14,
    OP_CHECK = 15,
};

typedef struct fz_seq {
    uint32_t n;                  /* tokens */
    uint32_t tok[FZ_MAX_SEQ];    /* (n) */
} fz_seq;

/* One sequence the model holds: stored through put or commit. */
typedef struct fz_entry {
    fz_seq s;
    bool point;                  /* a point state was stored at s.n */
} fz_entry;

typedef struct fz_ns {
    sb_ns *h;                    /* open handle (NULL only inside REOPEN) */
    char model_id[32];           /* model identity "model-<i>" */
    char scope[32];
    size_t scope_bytes;
    uint32_t bpt[FZ_MAX_TENSORS];
    sb_layout lay;               /* points at model_id, bpt */
    uint32_t pt;                 /* page_tokens */
    uint32_t n_tensors;
    uint32_t point_bytes;        /* 0: no point states */
    uint32_t vocab;              /* 2..5 */
    bool required;               /* SB_LAYOUT_POINT_REQUIRED */
    size_t off[FZ_MAX_TENSORS];  /* tensor offsets inside a page */
    size_t page_bytes;
    uint64_t seed;               /* state seed: differs per namespace */
    fz_entry *model;             /* (n_model) every sequence ever stored */
    size_t n_model, cap_model;
    fz_seq recent[FZ_RECENT];    /* ring of sequences used lately */
    unsigned n_recent, recent_next;
} fz_ns;

typedef struct fz_match {
    sb_match *m;
    int xi;                      /* namespace */
    fz_seq req;                  /* the request */
    size_t L;
    bool has_point;
} fz_match;

/* A page reference the harness holds, and what it knows of its bytes. */
typedef struct fz_page {
    sb_page *p;
    int xi;
    bool committed;              /* committed once: immutable, sb_page_tokens > 0 */
    uint32_t region;             /* page index in its sequence */
    uint32_t kv;                 /* leading token slices whose state is known */
    fz_seq pre;                  /* tokens [0, region * pt + kv) */
} fz_page;

typedef struct fz_pin {
    uint64_t id;
    int xi;
    fz_seq s;                    /* the pinned request */
    size_t L0;                   /* restorable length right after pinning */
    uint64_t expiry_ns;          /* 0: no TTL */
} fz_pin;

typedef struct fz {
    const uint8_t *in;
    size_t n_in, pos;
    sb_store *st;
    sb_config cfg;
    uint64_t now_ns;             /* the fake store clock */
    int n_ns;
    fz_ns ns[FZ_MAX_NS];
    fz_match match[FZ_MATCHES];
    int n_match;
    fz_page page[FZ_PAGES];
    int n_page;
    fz_pin pin[FZ_PINS];
    int n_pin;
    uint64_t last_pin_id;
    sb_stats last;               /* stats after the previous operation */
    bool evicted;                /* a page or point state was ever evicted */
    uint8_t fault_nth;           /* CLOCK armed an allocation fault: the next
                                    call through fault_arm fails its
                                    fault_nth-th allocation; 0: none */
    unsigned op_no;
    const char *op_name;
    bool trace;
    uint8_t buf[FZ_MAX_TENSORS][FZ_MAX_SEQ * FZ_MAX_BPT];      /* put source */
    uint8_t out[FZ_MAX_TENSORS][FZ_MAX_SEQ * FZ_MAX_BPT + 64]; /* restore target */
} fz;

#define FZ_CHECK(z, cond, ...)                                                 \
    do {                                                                       \
        if (!(cond))                                                           \
            fz_fail((z), __VA_ARGS__);                                         \
    } while (0)

/* Failure: print the operation, what broke and every namespace's tree,
 * then abort(). */
void fz_fail(fz *z, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));

/* Tokens as letters, the vocabulary index of each ID ("abcde"): FZ_S. */
const char *fz_str(const uint32_t *tok, size_t n, char *buf, size_t cap);
#define FZ_S(tok, n) fz_str((tok), (n), (char[FZ_MAX_SEQ + 2]){ 0 }, FZ_MAX_SEQ + 2)

/* Input: the next byte (0 past the end), a namespace, a SEQ. */
uint8_t fz_rd(fz *z);
int fz_rd_ns(fz *z);
void fz_rd_seq(fz *z, fz_ns *x, fz_seq *s);

/* Synthetic state: h[i] digests tokens[0, i) (fz_chain); each slice and
 * point state is drawn from it, so every byte can be checked. */
void fz_chain(const fz_ns *x, const uint32_t *tok, size_t n, uint64_t *h);
void fz_point(const fz_ns *x, const uint64_t *h, size_t n, uint8_t *dst);
void fz_fill_buf(fz *z, const fz_ns *x, const uint32_t *tok, size_t n);
size_t fz_regions(const fz_ns *x, size_t n);
uint32_t fz_region_tokens(const fz_ns *x, size_t n, size_t r);
void fz_fill_page(const fz_ns *x, sb_page *p, const uint32_t *tok, size_t r, uint32_t from,
                  uint32_t to);
bool fz_page_ok(const fz_ns *x, sb_page *p, const uint32_t *tok, size_t r, uint32_t k);

/* The reference model: every sequence stored, and what a match may return. */
size_t fz_lcp(const uint32_t *a, size_t na, const uint32_t *b, size_t nb);
size_t fz_model_lcp(const fz_ns *x, const uint32_t *tok, size_t n);
void fz_model_add(fz *z, fz_ns *x, const uint32_t *tok, size_t n, bool point);
bool fz_fits(const fz *z, const fz_ns *x, uint64_t pages, uint64_t points);
bool fz_pin_live(const fz *z, const fz_pin *p);
bool fz_nothing_held(const fz *z);
void fz_stats(fz *z, sb_stats *s);
bool fz_fault_arm(fz *z);
void fz_fault_disarm(fz *z);

/* Matches and held pages, checked against the model. */
void fz_check_restore(fz *z, const fz_ns *x, sb_match *m, const uint32_t *tok, size_t n,
                      bool with_point, const char *what);
sb_match *fz_match_checked(fz *z, int xi, const fz_seq *s, size_t n, sb_match_info *info);
size_t fz_match_len(fz *z, int xi, const fz_seq *s, size_t n, sb_match_info *info);
void fz_hold_match(fz *z, sb_match *m, int xi, const fz_seq *s, size_t n,
                   const sb_match_info *info);
void fz_drop_match(fz *z, int i);
void fz_drop_page(fz *z, int i);
void fz_hold_page(fz *z, sb_page *p, int xi, bool committed, uint32_t region, uint32_t kv,
                  const uint32_t *tok);
void fz_check_held_page(fz *z, const fz_page *hp, const char *what);
void fz_after_op(fz *z);

/* Operations (fuzz_index_ops.c): one per kind of the input format. */
void fz_op_put(fz *z, uint8_t fl);
void fz_op_commit(fz *z, uint8_t fl);
void fz_op_match(fz *z, uint8_t fl);
void fz_op_restore(fz *z, uint8_t fl);
void fz_op_release(fz *z);
void fz_op_pin(fz *z);
void fz_op_unpin(fz *z, uint8_t fl);
void fz_op_alloc(fz *z);
void fz_op_unref(fz *z);
void fz_op_mpages(fz *z, uint8_t fl);
void fz_op_writable(fz *z, uint8_t fl);
int fz_open_ns(fz *z, fz_ns *x, const sb_layout *lay, sb_ns **out);
void fz_op_reopen(fz *z);
void fz_check_all(fz *z);

#endif /* SB_FUZZ_INDEX_H */
