/* apimodel.h -- a reference model of store/include/snapbank.h, and the
 * operations that hold the store to it: shared by the model-based test
 * (tests/test_model.c, operations drawn from a seed) and the API-sequence
 * fuzzer (fuzz/fuzz_api.c, operations decoded from the input).
 *
 * Written from the manual, through the public API (plus two test hooks of
 * the disk tier: the in-memory file system, whose power cut drops what was
 * not synced, and sb_store_crash, a store dropped as a killed process
 * leaves it). docs/contract.md lists every promise of the manual and the
 * check below that holds the store to it (the AM_CHECK messages name the
 * promise).
 *
 * The world. From its first draws a run picks a mode, layouts for up to
 * three model identities and up to three scopes (the empty one included),
 * budgets and disk settings:
 *
 *   AM_RAM    RAM only, small budgets, allocation faults injected
 *             (sb_store_fault_alloc): a failed call changed nothing.
 *   AM_EXACT  a disk tier where the manual promises nothing is dropped
 *             (no cap in reach, a budget and backlog no test fills, every
 *             length written): every match restores the longest common
 *             prefix with what was stored, also after every clean reopen;
 *             after a power cut, what its ticket said was durable.
 *   AM_LOOSE  caps that reclaim, small write budgets and backlogs,
 *             min_prefix_tokens, write-only mode: upper bounds, plus what
 *             holds whatever the cache decides (pins, held matches, a
 *             put's n_stored when nothing was dropped since, durable
 *             tickets when nothing was reclaimed since).
 *
 * The model. For every namespace, every sequence ever stored (a put's
 * n_stored prefix, a commit's tokens) and whether its point state was
 * stored. A match may restore no more than the longest prefix some stored
 * sequence shares with the request (and, under SB_LAYOUT_POINT_REQUIRED,
 * only a length where a point state was stored); it must restore at least
 * what a sequence that is still guaranteed shares (guaranteed: stored and
 * nothing dropped since, see am_entry). Every restored byte is checked
 * against a deterministic function of (namespace, prefix, tensor, byte).
 * Puts and restores go now and then through shuffled block tables
 * (sb_ns_put_blocks from a length a lookup says the index holds, the
 * engine's rows before it garbage; sb_match_restore_blocks, a layer at a
 * time), under the same checks; every match is preceded by a batched
 * lookup (sb_ns_lookup) that must find what the match then finds.
 *
 * Failure: am_fail prints the seed, the operation number and what broke,
 * dumps every namespace's tree, and aborts. Replay one run with its seed
 * (tests/test_model.c --seed S --trace) or its input (fuzz_api_replay).
 *
 * Thread safety: one am world per thread, except in the threaded variant
 * (test_model.c), which shares one store and one model behind z->mu and
 * uses only am_* functions marked "shared" below.
 */
#ifndef SB_APIMODEL_H
#define SB_APIMODEL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snapbank.h"

typedef struct sb_io sb_io;

enum {
    AM_MAX_SEQ = 160,      /* longest sequence an operation builds */
    AM_MAX_TENSORS = 3,
    AM_MAX_BPT = 40,       /* largest bytes per token of a tensor */
    AM_MAX_POINT = 72,     /* largest point state */
    AM_MAX_MODELS = 3,     /* model identities */
    AM_MAX_SCOPES = 3,     /* scopes (the first may be the empty one) */
    AM_MAX_NS = AM_MAX_MODELS * AM_MAX_SCOPES,
    AM_MATCHES = 6,        /* matches held across operations */
    AM_PAGES = 24,         /* page references held */
    AM_PINS = 8,           /* pin records */
    AM_RECENT = 16,        /* recent sequences per namespace, to derive from */
    AM_TICKETS = 64,       /* tickets followed */
    AM_RING = 256,         /* trace lines kept for a failure's report */
    AM_RING_LINE = 400,
};

typedef enum am_mode { AM_RAM = 0, AM_EXACT = 1, AM_LOOSE = 2 } am_mode;

typedef struct am_seq {
    uint32_t n;
    uint32_t tok[AM_MAX_SEQ];
} am_seq;

/* One stored sequence. It is guaranteed (a match must restore what it
 * shares with a request) while must is set and, outside AM_EXACT, nothing
 * was dropped since (z->drops == since). */
typedef struct am_entry {
    am_seq s;
    bool point;            /* its point state was stored (at s.n) */
    bool must;
    uint64_t since;        /* z->drops when it was stored */
    uint64_t ticket;       /* its call's ticket (0: none) */
    bool durable;          /* its ticket said durable */
    uint64_t disk_since;   /* disk drops (am_disk_drops) before the call that
                              stored it: a power cut finds it whole if its
                              ticket said durable and nothing was reclaimed
                              since (a durable answer does not say when it
                              became so; what was durable may be reclaimed) */
} am_entry;

/* A model identity: its layout, shared by its scopes. */
typedef struct am_model {
    char id[24];
    uint32_t pt;           /* page_tokens */
    uint32_t n_tensors;
    uint32_t bpt[AM_MAX_TENSORS];
    uint32_t point_bytes;  /* 0: no point states */
    uint32_t flags;        /* SB_LAYOUT_* */
    uint32_t vocab;        /* 2..5 token IDs */
    size_t off[AM_MAX_TENSORS]; /* tensor offsets, from the manual's formula */
    size_t page_bytes;
} am_model;

typedef struct am_ns {
    int model;             /* index into z->model */
    int scope;             /* index into z->scope */
    sb_ns *h;              /* open handle (NULL while closed) */
    uint64_t seed;         /* state seed: (identity, scope) */
    uint64_t ns_id;        /* sb_ns_info.ns_id, stable across reopen */
    am_entry *e;           /* (n_e) */
    size_t n_e, cap_e;
    am_seq recent[AM_RECENT];
    unsigned n_recent, recent_next;
    /* Removal (sb_ns_remove): sequences a removal left without cover in
     * RAM though they were not removed (a proper prefix of the removed
     * prefix ending inside its cut page: that page held their tail); a
     * reopen may find them again (their own superseded page records), so
     * they join e, not guaranteed, at the next reopen (disk modes). */
    am_entry *lat;         /* (n_lat) */
    size_t n_lat, cap_lat;
    bool loose;            /* such a sequence came back to the model: what a
                              match finds is no longer exactly the model's */
} am_ns;

typedef struct am_match {
    sb_match *m;
    int xi;
    am_seq req;
    size_t L;
    bool has_point;
} am_match;

/* A page reference the harness holds and what it knows of its bytes. */
typedef struct am_page {
    sb_page *p;
    int xi;
    uint32_t region;       /* its region in pre */
    uint32_t kv;           /* leading slices known: the state of pre */
    am_seq pre;            /* tokens [0, region * pt + kv) */
} am_page;

typedef struct am_pin {
    uint64_t id;
    int xi;
    am_seq s;
    size_t L0;             /* restorable right after pinning */
    uint64_t expiry_ns;    /* 0: none */
    bool live;
} am_pin;

/* A ticket and what was said of it (answers move one way only). */
typedef struct am_ticket {
    uint64_t t;
    int state;             /* last answer: SB_OK, SB_ERR_PENDING,
                              SB_ERR_NOT_DURABLE */
    int xi;                /* the entry it stands for */
    size_t ei;
    uint64_t bad;          /* damaged reads (checksum failures, read
                              errors) when it was handed out: a damaged
                              record met later may be one of its pages */
    uint64_t removes;      /* removals made when it was handed out: a
                              later one may take a page it needs before
                              it is written (it fails then) */
} am_ticket;

/* Where the draws come from: a seeded generator (the test), or the input
 * bytes (the fuzzer; past their end every draw is 0 and z->done is set). */
typedef struct am_src {
    uint64_t rng;          /* generator state (bytes NULL) */
    const uint8_t *bytes;
    size_t n_bytes, pos;
} am_src;

typedef struct am {
    am_src src;
    uint64_t seed;         /* for messages */
    bool done;             /* the input ran out */
    bool trace;            /* print every operation */
    unsigned op_no;
    const char *op_name;
    am_mode mode;
    sb_config cfg;
    sb_io *io;             /* the in-memory file system (disk modes) */
    sb_store *st;
    _Atomic uint64_t clock_ns; /* the store clock (shared with the writer) */
    int n_model, n_scope, n_ns;
    am_model model[AM_MAX_MODELS];
    char scope[AM_MAX_SCOPES][16];
    size_t scope_bytes[AM_MAX_SCOPES];
    am_ns ns[AM_MAX_NS];
    am_match match[AM_MATCHES];
    int n_match;
    am_page page[AM_PAGES];
    int n_page;
    am_pin pin[AM_PINS];
    int n_pin;
    am_ticket tk[AM_TICKETS];
    int n_tk;
    uint64_t max_ticket;   /* highest ticket handed out by this open store */
    uint64_t drops;        /* events that may drop stored state, this store */
    uint64_t base_drops;   /* ...summed over earlier opens */
    bool ever_dropped;     /* an eviction or a reclamation in this open store */
    bool crashed;          /* a power cut since the store was made: damaged
                              records may be met (restores may shrink) */
    uint64_t removes;      /* sb_ns_remove calls made (the model's count) */
    bool orphans_ok;       /* a removal took something: a reopen may count
                              records of it orphans (their parent was never
                              written), or a point state it left without
                              cover */
    bool fault;            /* the next call is armed to fail an allocation */
    int fg;                /* foreground marks held */
    sb_stats last;         /* stats after the previous operation */
    pthread_mutex_t mu;    /* the threaded variant's model lock */
    /* The last AM_RING trace lines, printed by am_fail when the run was not
     * traced (a disk mode's run may not replay the same way: the writer's
     * timing steers it). */
    char ring[AM_RING][AM_RING_LINE];
    unsigned ring_n;
    /* scratch */
    uint8_t buf[AM_MAX_TENSORS][AM_MAX_SEQ * AM_MAX_BPT];
    uint8_t out[AM_MAX_TENSORS][AM_MAX_SEQ * AM_MAX_BPT + 64];
} am;

#define AM_CHECK(z, cond, ...)                                                 \
    do {                                                                       \
        if (!(cond))                                                           \
            am_fail((z), __VA_ARGS__);                                         \
    } while (0)

/* ---- the world --------------------------------------------------------- */

/* am_init -- draw a world from src and open its store and namespaces.
 * force_mode >= 0 picks the mode instead of drawing it; flags AM_ROOMY
 * sizes the RAM budgets so nothing is ever evicted (the threaded
 * variant). Returns false when the world could not be made (the fuzzer's
 * input ran out). */
#define AM_ROOMY 1u
bool am_init(am *z, const am_src *src, uint64_t seed, int force_mode, unsigned flags,
             bool trace);

/* am_step -- draw and run one operation, then check everything. */
void am_step(am *z);

/* am_finish -- release what the harness holds, check, close the store
 * (checking what the mode promises of a close and a reopen) and free the
 * world. */
void am_finish(am *z);

/* am_fail -- print seed, operation and message, the last trace lines (when
 * not tracing), dump the trees, abort. */
void am_fail(am *z, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

/* ---- pieces the threaded variant shares (shared: z->mu held or not, as
 * each says) ------------------------------------------------------------- */

/* A draw in [0, n) (n >= 1). */
uint64_t am_draw(am *z, uint64_t n);

/* State: slices of tokens[0, n) into z->buf, laid out for sb_ns_put. */
void am_fill_buf(const am *z, const am_ns *x, const uint32_t *tok, size_t n,
                 uint8_t (*buf)[AM_MAX_SEQ * AM_MAX_BPT]);
/* The point state at n. */
void am_point(const am *z, const am_ns *x, const uint32_t *tok, size_t n, uint8_t *dst);
/* First bad token of bufs (restored tokens[0, n)), or n. */
size_t am_bad_token(const am *z, const am_ns *x, const uint32_t *tok, size_t n,
                    uint8_t (*bufs)[AM_MAX_SEQ * AM_MAX_BPT + 64]);
/* Write slices [from, to) of region r of tok into page p; check them. */
void am_fill_page(const am *z, const am_ns *x, sb_page *p, const uint32_t *tok, size_t r,
                  uint32_t from, uint32_t to);
bool am_page_ok(const am *z, const am_ns *x, sb_page *p, const uint32_t *tok, size_t r,
                uint32_t k);

/* A sequence for namespace x (new, or derived from a recent one). */
void am_draw_seq(am *z, am_ns *x, am_seq *s);

/* Longest prefix of tok[0, n) some stored sequence shares (upper bound);
 * ...that a guaranteed one shares (lower bound). [mu] */
size_t am_lcp_any(const am *z, const am_ns *x, const uint32_t *tok, size_t n);
size_t am_lcp_must(const am *z, const am_ns *x, const uint32_t *tok, size_t n);

/* Record a stored sequence. [mu] */
am_entry *am_add(am *z, am_ns *x, const uint32_t *tok, size_t n, bool point);

/* sb_store_stats, asserted. */
void am_stats(am *z, sb_stats *s);

/* The threaded variant (model_threads.c): T threads on one store, ops
 * operations each. Returns 0 (a failure aborts). */
int am_threads_run(uint64_t seed, unsigned threads, unsigned ops);

#endif /* SB_APIMODEL_H */
