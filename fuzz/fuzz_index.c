/* fuzz_index.c -- libFuzzer harness: the token index and RAM tier of
 * libsnapbank, checked against a reference model.
 *
 * Property. For any sequence of puts (copy mode), zero-copy commits,
 * matches, restores, releases, pins, unpins, clock advances, page holds,
 * copy-on-write and namespace reopens on a store with 1-3 tiny namespaces
 * under tight RAM budgets:
 *
 *   P1  sb_store_check passes after every operation, and the budgets hold
 *       (stats.ram_bytes <= ram_bytes, stats.ram_pages <= ram_pages, each
 *       namespace's bytes <= ns_ram_bytes). Stats counters never go back;
 *       lookups, hits, hit and miss tokens, puts, commits and cow_copies
 *       move by exactly what the call did.
 *   P2  every restore returns exactly the state of the requested prefix.
 *       State is a function of the token prefix (fz_chain), so every byte
 *       a restore, a page or a point state holds can be checked.
 *   P3  L never exceeds what the model allows: the longest common prefix of
 *       the request with a stored sequence, and for SB_LAYOUT_POINT_REQUIRED
 *       layouts a length at which a point state was stored. While nothing
 *       has been evicted (stats.evictions and stats.point_evictions both 0)
 *       L, n_matched_tokens, has_point and the miss reason are exactly the
 *       model's answer.
 *   P4  what is held stays: a held match restores the same bytes until
 *       released, a held page keeps its bytes, a live pin's prefix stays
 *       restorable to at least the length it had when pinned.
 *   P5  documented errors: a put that runs out of budget stores a prefix
 *       and says how long (what is restorable when it returns: a match
 *       right after finds exactly that); a commit that fails changes
 *       nothing (the caller's page array included); SB_ERR_BUDGET with
 *       nothing held outside the index means the request could not fit in
 *       an empty store; foreign pages, wrong or duplicated pages,
 *       out-of-range restores, unknown pins and over-long sequences get
 *       their codes; an injected allocation failure (sb_store_fault_alloc)
 *       gives SB_ERR_NOMEM and changes nothing but evictions, or is
 *       absorbed (an unmerged node is legal) and every property above
 *       still holds.
 *   P6  with nothing held outside the index, every allocated byte is
 *       indexed: ram_pages == indexed_pages, ram_bytes == indexed_bytes +
 *       point_bytes, pinned_pages == 0.
 *
 * Any violation prints the operation, what broke and a dump of every
 * namespace's tree, then abort()s. Everything is freed per input.
 * Set SB_FUZZ_TRACE=1 to print each operation as it runs.
 *
 * Input format (bytes past the end read as 0; fuzz/gen_index_seeds.py
 * writes seeds in it, keep the two in step):
 *
 *   OFFSET SIZE FIELD
 *   0      1    h0: n_ns = 1 + h0 % 3; bit 2: all namespaces share one scope;
 *               bit 3: the last namespace has the empty scope
 *   1      3    layout byte b of namespace 0, 1, 2:
 *                 page_tokens = 1 + b % 5
 *                 points      = b / 5 % 3   0 none, 1 optional,
 *                                           2 SB_LAYOUT_POINT_REQUIRED
 *                 n_tensors   = 1 + b / 15 % 2
 *                 vocab       = 2 + b / 30 % 4   token IDs from
 *                               { 0, 0xffffffff, 1, 1000, 7 } ("abcde")
 *   4      1    ram_pages:    v = b % 40; v >= 32: none, else 2 + v
 *   5      1    ram_bytes:    v = b % 40; v >= 32: 1 GiB,
 *                             else (2 + v) * 4096 + b / 40 * 16
 *   6      1    ns_ram_bytes: v = b % 40; v >= 24: none,
 *                             else (2 + v) * 4096 + b / 40 * 16
 *   7      1    max_seq_tokens: b >= 224: b - 223 (1..32), else 2^24
 *   8      ...  operations, until the input ends
 *
 * Every page is 4096 bytes (tensors are a few bytes per token), so the
 * budgets above hold 2..33 pages and eviction is the common case.
 *
 * An operation is one byte o: kind = o % 16, flags f = o / 16, then its
 * arguments. NS is one byte (namespace NS % n_ns). SEQ is a token sequence:
 *
 *   s: len = 1 + s % 32, mode = s / 32
 *     mode 0-4  fresh: len token bytes follow (token = ids[byte % vocab])
 *     mode 5-7  derived (fresh when the namespace has no recent sequence):
 *               byte i picks recent sequence i % n_recent of the namespace,
 *               its first min(len, its length) tokens are kept; byte e
 *               follows and then e % 8 fresh token bytes are appended
 *
 *   kind      args         what (flags f)
 *   0, 1 PUT   NS SEQ      sb_ns_put of the synthetic state; f&1 with a point
 *                          state; f&2 match it right after (restorable now);
 *                          f&4 on a layout without points pass one anyway
 *                          (SB_ERR_INVAL)
 *   2, 3 COMMIT NS SEQ x   zero-copy: f&2 match first and reuse the matched
 *                          pages (sb_match_pages, sb_page_writable on a
 *                          partial tail), else fresh pages for every region
 *                          (the index dedups them); fill, sb_ns_commit;
 *                          f&1 with a point; f&4 keep the page references
 *                          as held pages; f&8 release the match only after
 *                          the commit; x&7 == 7: replace region (x/8) % n
 *                          with held page (x/8) % n_held, x&7 == 6: with
 *                          the page of the next region (both must fail);
 *                          otherwise x&8 match it right after
 *   4 MATCH    NS SEQ      sb_ns_match, checked; held (f&1: released at once)
 *   5 RESTORE  i k         restore k % (L+1) tokens of held match i; f&1 with
 *                          the point when k == L; f&2 error paths
 *   6 RELEASE  i           release held match i
 *   7 PIN      NS SEQ t    sb_ns_pin, ttl_ms = t % 16, forever (0) when
 *                          t & 0x30 == 0x30
 *   8 UNPIN    i           unpin pin i (i == n_pins: an id never issued);
 *                          f&1 through another namespace (SB_ERR_NOT_FOUND)
 *   9 CLOCK    d           advance the store clock d % 32 ms; d / 32 > 0:
 *                          the next operation's first allocating call
 *                          (put, commit, match, pin, page alloc, writable)
 *                          runs with its (d / 32)-th allocation failing
 *   10 ALLOC   NS          hold a fresh page (sb_ns_page_alloc)
 *   11 UNREF   i           drop held page i
 *   12 MPAGES  i           hold every page of held match i (sb_match_pages);
 *                          f&1 also ask one past the end (SB_ERR_RANGE)
 *   13 WRITABLE i k        sb_page_writable(held page i, n_keep = k % (pt+2));
 *                          f&1 through another namespace (FOREIGN_PAGE)
 *   14 REOPEN  NS          close and reopen the namespace handle; a
 *                          mismatched layout is refused meanwhile
 *   15 CHECK               match and restore every stored sequence (the last
 *                          32 per namespace) and the stats
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snapbank.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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

static const char *const fz_op_names[16] = {
    "put", "put", "commit", "commit", "match", "restore", "release", "pin",
    "unpin", "clock", "alloc", "unref", "mpages", "writable", "reopen", "check",
};

/* The token IDs a vocabulary draws from, in order: the extremes of uint32
 * and a few in between, so child arrays sort and search over all of them. */
static const uint32_t fz_ids[5] = { 0, UINT32_MAX, 1, 1000, 7 };

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

/* ---- failure ------------------------------------------------------------- */

static void fz_fail(fz *z, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));

static void fz_fail(fz *z, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "fuzz_index: op %u (%s): ", z->op_no, z->op_name ? z->op_name : "setup");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fprintf(stderr, "fuzz_index: evictions so far: %s\n", z->evicted ? "yes" : "none");
    for (int i = 0; i < z->n_ns; i++) {
        if (!z->ns[i].h)
            continue;
        fprintf(stderr, "namespace %d (page_tokens %u, %s):\n", i, z->ns[i].pt,
                z->ns[i].required ? "point required"
                                  : z->ns[i].point_bytes ? "points" : "no points");
        sb_ns_dump(z->ns[i].h, stderr);
    }
    abort();
}

#define FZ_CHECK(z, cond, ...)                                                 \
    do {                                                                       \
        if (!(cond))                                                           \
            fz_fail((z), __VA_ARGS__);                                         \
    } while (0)

/* Tokens as letters: the vocabulary index of each ID ("abcde"). */
static const char *fz_str(const uint32_t *tok, size_t n, char *buf, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 2 < cap; i++) {
        char c = '?';
        for (int v = 0; v < 5; v++)
            if (fz_ids[v] == tok[i])
                c = (char)('a' + v);
        buf[o++] = c;
    }
    buf[o] = 0;
    return buf;
}

#define FZ_S(tok, n) fz_str((tok), (n), (char[FZ_MAX_SEQ + 2]){ 0 }, FZ_MAX_SEQ + 2)

/* ---- input --------------------------------------------------------------- */

static uint8_t rd(fz *z)
{
    return z->pos < z->n_in ? z->in[z->pos++] : 0;
}

static int rd_ns(fz *z)
{
    return rd(z) % z->n_ns;
}

static void remember(fz_ns *x, const fz_seq *s)
{
    x->recent[x->recent_next] = *s;
    x->recent_next = (x->recent_next + 1) % FZ_RECENT;
    if (x->n_recent < FZ_RECENT)
        x->n_recent++;
}

static uint32_t rd_tok(fz *z, const fz_ns *x)
{
    return fz_ids[rd(z) % x->vocab];
}

/* SEQ (see the format at the top). */
static void rd_seq(fz *z, fz_ns *x, fz_seq *s)
{
    uint8_t b = rd(z);
    uint32_t len = 1 + (b & 31u);
    s->n = 0;
    if ((b >> 5) >= 5 && x->n_recent) {
        const fz_seq *base = &x->recent[rd(z) % x->n_recent];
        uint32_t keep = len < base->n ? len : base->n;
        memcpy(s->tok, base->tok, keep * sizeof *s->tok);
        s->n = keep;
        len = rd(z) % 8;
    }
    while (len-- && s->n < FZ_MAX_SEQ)
        s->tok[s->n++] = rd_tok(z, x);
    remember(x, s);
}

/* ---- synthetic state ----------------------------------------------------- */

static uint64_t fz_mix(uint64_t *s)
{
    uint64_t v = (*s += 0x9E3779B97F4A7C15ull);
    v = (v ^ (v >> 30)) * 0xBF58476D1CE4E5B9ull;
    v = (v ^ (v >> 27)) * 0x94D049BB133111EBull;
    return v ^ (v >> 31);
}

/* h[i] is a digest of tokens[0, i) and the namespace: h[0] = seed, and the
 * state of token i is drawn from h[i + 1]. */
static void fz_chain(const fz_ns *x, const uint32_t *tok, size_t n, uint64_t *h)
{
    h[0] = x->seed;
    for (size_t i = 0; i < n; i++) {
        uint64_t s = h[i] ^ ((uint64_t)tok[i] * 0xD6E8FEB86659FD93ull) ^ i;
        h[i + 1] = fz_mix(&s);
    }
}

static void fz_bytes(uint8_t *dst, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = fz_mix(&seed);
        memcpy(dst + i, &v, n - i < 8 ? n - i : 8);
    }
}

/* The slice of token i of tensor t. */
static void fz_slice(const fz_ns *x, const uint64_t *h, size_t i, uint32_t t, uint8_t *dst)
{
    fz_bytes(dst, x->bpt[t], h[i + 1] ^ (0xA24BAED4963EE407ull * (t + 1)));
}

/* The point state at position n. */
static void fz_point(const fz_ns *x, const uint64_t *h, size_t n, uint8_t *dst)
{
    fz_bytes(dst, x->point_bytes, h[n] ^ 0x706f696e74ull ^ ((uint64_t)n << 48));
}

/* State of tokens[0, n) into z->buf, laid out as sb_ns_put wants it. */
static void fz_fill_buf(fz *z, const fz_ns *x, const uint32_t *tok, size_t n)
{
    uint64_t h[FZ_MAX_SEQ + 1];
    fz_chain(x, tok, n, h);
    for (size_t i = 0; i < n; i++)
        for (uint32_t t = 0; t < x->n_tensors; t++)
            fz_slice(x, h, i, t, z->buf[t] + i * x->bpt[t]);
}

/* Do bufs (as sb_match_restore fills them) hold the state of tokens[0, n)?
 * Returns the first bad token, or n when all are right. */
static size_t fz_bad_token(const fz_ns *x, const uint32_t *tok, size_t n,
                           uint8_t (*bufs)[FZ_MAX_SEQ * FZ_MAX_BPT + 64])
{
    uint64_t h[FZ_MAX_SEQ + 1];
    uint8_t want[FZ_MAX_BPT];
    fz_chain(x, tok, n, h);
    for (size_t i = 0; i < n; i++)
        for (uint32_t t = 0; t < x->n_tensors; t++) {
            fz_slice(x, h, i, t, want);
            if (memcmp(want, bufs[t] + i * x->bpt[t], x->bpt[t]))
                return i;
        }
    return n;
}

static uint32_t region_tokens(const fz_ns *x, size_t n, size_t r)
{
    size_t rest = n - r * x->pt;
    return rest < x->pt ? (uint32_t)rest : x->pt;
}

static size_t regions(const fz_ns *x, size_t n)
{
    return (n + x->pt - 1) / x->pt;
}

/* Write the state of token slices [from, to) of region r of tok into p. */
static void fz_fill_page(const fz_ns *x, sb_page *p, const uint32_t *tok, size_t r,
                         uint32_t from, uint32_t to)
{
    uint64_t h[FZ_MAX_SEQ + 1];
    size_t first = r * x->pt;
    fz_chain(x, tok, first + to, h);
    uint8_t *d = sb_page_data(p);
    for (uint32_t j = from; j < to; j++)
        for (uint32_t t = 0; t < x->n_tensors; t++)
            fz_slice(x, h, first + j, t, d + x->off[t] + (size_t)j * x->bpt[t]);
}

/* Do slices [0, k) of page p hold the state of region r of tok? */
static bool fz_page_ok(const fz_ns *x, sb_page *p, const uint32_t *tok, size_t r, uint32_t k)
{
    uint64_t h[FZ_MAX_SEQ + 1];
    uint8_t want[FZ_MAX_BPT];
    size_t first = r * x->pt;
    fz_chain(x, tok, first + k, h);
    const uint8_t *d = sb_page_data(p);
    for (uint32_t j = 0; j < k; j++)
        for (uint32_t t = 0; t < x->n_tensors; t++) {
            fz_slice(x, h, first + j, t, want);
            if (memcmp(want, d + x->off[t] + (size_t)j * x->bpt[t], x->bpt[t]))
                return false;
        }
    return true;
}

/* ---- the model ------------------------------------------------------------ */

static size_t lcp(const uint32_t *a, size_t na, const uint32_t *b, size_t nb)
{
    size_t n = na < nb ? na : nb, i = 0;
    while (i < n && a[i] == b[i])
        i++;
    return i;
}

/* Longest prefix of tok[0, n) that some stored sequence shares. */
static size_t model_lcp(const fz_ns *x, const uint32_t *tok, size_t n)
{
    size_t best = 0;
    for (size_t i = 0; i < x->n_model && best < n; i++) {
        size_t c = lcp(x->model[i].s.tok, x->model[i].s.n, tok, n);
        if (c > best)
            best = c;
    }
    return best;
}

/* Was a point state stored at position p of the prefix tok[0, p)? */
static bool model_point_at(const fz_ns *x, const uint32_t *tok, size_t n, size_t p)
{
    if (p == 0 || p > n)
        return false;
    for (size_t i = 0; i < x->n_model; i++) {
        const fz_entry *e = &x->model[i];
        if (e->point && e->s.n == p && lcp(e->s.tok, e->s.n, tok, n) >= p)
            return true;
    }
    return false;
}

/* Longest p <= n with a stored point state at p of tok's prefix; 0 if none. */
static size_t model_point_bound(const fz_ns *x, const uint32_t *tok, size_t n)
{
    size_t best = 0;
    for (size_t i = 0; i < x->n_model; i++) {
        const fz_entry *e = &x->model[i];
        if (e->point && e->s.n <= n && e->s.n > best &&
            lcp(e->s.tok, e->s.n, tok, n) >= e->s.n)
            best = e->s.n;
    }
    return best;
}

static void model_add(fz *z, fz_ns *x, const uint32_t *tok, size_t n, bool point)
{
    for (size_t i = 0; i < x->n_model; i++) {
        fz_entry *e = &x->model[i];
        if (e->s.n == n && e->point == point && !memcmp(e->s.tok, tok, n * sizeof *tok))
            return;
    }
    if (x->n_model == x->cap_model) {
        size_t cap = x->cap_model ? 2 * x->cap_model : 16;
        fz_entry *m = realloc(x->model, cap * sizeof *m);
        FZ_CHECK(z, m, "out of memory (model)");
        x->model = m;
        x->cap_model = cap;
    }
    fz_entry *e = &x->model[x->n_model++];
    e->s.n = (uint32_t)n;
    memcpy(e->s.tok, tok, n * sizeof *tok);
    e->point = point;
}

/* Could pages pages and points point states of x fit into an empty store? */
static bool fits(const fz *z, const fz_ns *x, uint64_t pages, uint64_t points)
{
    uint64_t bytes = pages * x->page_bytes + points * x->point_bytes;
    return pages <= z->cfg.ram_pages && bytes <= z->cfg.ram_bytes &&
           bytes <= z->cfg.ns_ram_bytes;
}

static bool pin_live(const fz *z, const fz_pin *p)
{
    return p->expiry_ns == 0 || z->now_ns < p->expiry_ns;
}

/* Nothing held outside the index: no match, page reference or live pin. */
static bool nothing_held(const fz *z)
{
    if (z->n_match || z->n_page)
        return false;
    for (int i = 0; i < z->n_pin; i++)
        if (pin_live(z, &z->pin[i]))
            return false;
    return true;
}

static void stats(fz *z, sb_stats *s)
{
    FZ_CHECK(z, sb_store_stats(z->st, s) == SB_OK, "sb_store_stats failed");
    if (s->evictions || s->point_evictions)
        z->evicted = true;
}

/* Arm the allocation fault CLOCK asked for, around one library call. The
 * caller then accepts SB_ERR_NOMEM. Returns whether one was armed. */
static bool fault_arm(fz *z)
{
    if (!z->fault_nth)
        return false;
    FZ_CHECK(z, sb_store_fault_alloc(z->st, z->fault_nth) == SB_OK, "sb_store_fault_alloc");
    return true;
}

/* Disarm it (it may not have fired): one call per operation gets it. */
static void fault_disarm(fz *z)
{
    if (!z->fault_nth)
        return;
    FZ_CHECK(z, sb_store_fault_alloc(z->st, 0) == SB_OK, "sb_store_fault_alloc");
    z->fault_nth = 0;
}

/* ---- matches -------------------------------------------------------------- */

/* Restore n tokens (and the point when with_point) of match m on tok and
 * check every byte. */
static void check_restore(fz *z, const fz_ns *x, sb_match *m, const uint32_t *tok,
                          size_t n, bool with_point, const char *what)
{
    void *dst[FZ_MAX_TENSORS];
    uint8_t pt[FZ_MAX_POINT];
    for (uint32_t t = 0; t < x->n_tensors; t++) {
        memset(z->out[t], 0xEE, sizeof z->out[t]);
        dst[t] = z->out[t];
    }
    int rc = sb_match_restore(m, n, dst, with_point ? pt : NULL);
    FZ_CHECK(z, rc == SB_OK, "%s: restore of %zu tokens of %s: %s", what, n, FZ_S(tok, n),
             sb_strerror(rc));
    size_t bad = fz_bad_token(x, tok, n, z->out);
    FZ_CHECK(z, bad == n, "%s: restore of %s: token %zu holds the wrong state", what,
             FZ_S(tok, n), bad);
    for (uint32_t t = 0; t < x->n_tensors; t++)
        FZ_CHECK(z, z->out[t][n * x->bpt[t]] == 0xEE,
                 "%s: restore of %zu tokens wrote past them", what, n);
    if (with_point) {
        uint64_t h[FZ_MAX_SEQ + 1];
        uint8_t want[FZ_MAX_POINT];
        fz_chain(x, tok, n, h);
        fz_point(x, h, n, want);
        FZ_CHECK(z, !memcmp(want, pt, x->point_bytes), "%s: point state at %zu of %s is wrong",
                 what, n, FZ_S(tok, n));
        const void *p = sb_match_point(m);
        FZ_CHECK(z, p && !memcmp(want, p, x->point_bytes),
                 "%s: sb_match_point at %zu of %s is wrong", what, n, FZ_S(tok, n));
    }
}

/* Match tok[0, n) of s on namespace xi and check the answer against the
 * model (P2, P3). Returns the match (the caller releases it), or NULL when
 * n is over max_seq_tokens or an injected allocation failure hit (then
 * *info is zeroed). */
static sb_match *match_checked(fz *z, int xi, const fz_seq *s, size_t n, sb_match_info *info)
{
    fz_ns *x = &z->ns[xi];
    const uint32_t *tok = s->tok;
    sb_match *m = (sb_match *)&m; /* must be overwritten */
    sb_stats s0;
    stats(z, &s0);
    bool armed = fault_arm(z);
    int rc = sb_ns_match(x->h, tok, n, &m);
    fault_disarm(z);
    memset(info, 0, sizeof *info);
    if (n > z->cfg.max_seq_tokens) {
        FZ_CHECK(z, rc == SB_ERR_TOO_MANY_TOKENS && !m, "match of %zu tokens over the limit: %s",
                 n, sb_strerror(rc));
        return NULL;
    }
    if (armed && rc == SB_ERR_NOMEM) {
        FZ_CHECK(z, !m, "failed match left a handle");
        return NULL;
    }
    FZ_CHECK(z, rc == SB_OK && m, "match of %s: %s", FZ_S(tok, n), sb_strerror(rc));
    FZ_CHECK(z, sb_match_get_info(m, info) == SB_OK, "sb_match_get_info failed");
    sb_stats s1;
    stats(z, &s1);

    size_t L = info->n_tokens, M = info->n_matched_tokens;
    /* The lookup counters move by exactly this lookup. */
    int why = info->miss;
    FZ_CHECK(z, why >= 0 && why < SB_MISS__COUNT, "miss %d out of range", why);
    FZ_CHECK(z, s1.lookups == s0.lookups + 1 && s1.hits == s0.hits + (L > 0) &&
                    s1.hit_tokens == s0.hit_tokens + L &&
                    s1.miss_tokens == s0.miss_tokens + (n - L) &&
                    s1.misses[why] == s0.misses[why] + (L == 0) &&
                    s1.miss_tokens_by_reason[why] == s0.miss_tokens_by_reason[why] + (n - L),
             "match of %s: lookup counters moved wrong (L %zu of %zu, miss %s)",
             FZ_S(tok, n), L, n, sb_miss_name(why));
    size_t bound = model_lcp(x, tok, n);
    const char *q = FZ_S(tok, n);
    FZ_CHECK(z, L <= M && M <= n, "match of %s: L %zu, matched %zu", q, L, M);
    FZ_CHECK(z, info->n_pages == regions(x, L) && info->n_pages_ram == info->n_pages &&
                    info->n_pages_disk == 0,
             "match of %s: L %zu with %zu pages (%zu in RAM)", q, L, info->n_pages,
             info->n_pages_ram);
    FZ_CHECK(z, M <= bound, "match of %s: matched %zu tokens, but no stored sequence shares "
             "more than %zu", q, M, bound);
    if (x->required) {
        FZ_CHECK(z, L == 0 || model_point_at(x, tok, n, L),
                 "match of %s: L %zu, but no point state was ever stored there", q, L);
        FZ_CHECK(z, (L > 0) == (info->has_point != 0),
                 "match of %s: point-required L %zu with has_point %d", q, L, info->has_point);
    } else {
        FZ_CHECK(z, L == M, "match of %s: L %zu below matched %zu without a point rule", q, L,
                 M);
    }
    if (info->has_point)
        FZ_CHECK(z, model_point_at(x, tok, n, L),
                 "match of %s: has a point at %zu, none was stored there", q, L);
    else
        FZ_CHECK(z, sb_match_point(m) == NULL, "match of %s: sb_match_point without has_point",
                 q);
    if (!z->evicted) {
        FZ_CHECK(z, M == bound, "match of %s: matched %zu tokens, the model says %zu "
                 "(nothing evicted)", q, M, bound);
        if (x->required) {
            size_t pb = model_point_bound(x, tok, n);
            FZ_CHECK(z, L == pb, "match of %s: L %zu, the model says %zu (nothing evicted)", q,
                     L, pb);
        } else if (x->point_bytes) {
            FZ_CHECK(z, (info->has_point != 0) == model_point_at(x, tok, n, L),
                     "match of %s: has_point %d at %zu, the model disagrees (nothing "
                     "evicted)", q, info->has_point, L);
        }
    }

    /* The miss reason (best effort, but these follow from the definitions). */
    int miss = info->miss;
    bool other = false; /* a namespace of the same scope holds a prefix */
    for (int i = 0; i < z->n_ns; i++)
        if (i != xi && z->ns[i].scope_bytes == x->scope_bytes &&
            !memcmp(z->ns[i].scope, x->scope, x->scope_bytes) &&
            model_lcp(&z->ns[i], tok, n) > 0)
            other = true;
    FZ_CHECK(z, (miss == SB_MISS_NONE) == (L == n), "match of %s: L %zu/%zu, miss %s", q, L, n,
             sb_miss_name(miss));
    FZ_CHECK(z, (miss == SB_MISS_NO_POINT) == (L < n && M > L),
             "match of %s: L %zu, matched %zu, miss %s", q, L, M, sb_miss_name(miss));
    FZ_CHECK(z, miss != SB_MISS_MODEL_MISMATCH || (L == 0 && other),
             "match of %s: model_mismatch, but no other model of the scope holds it", q);
    FZ_CHECK(z, miss != SB_MISS_EVICTED || z->evicted,
             "match of %s: miss evicted, but nothing was ever evicted", q);
    FZ_CHECK(z, miss == SB_MISS_NONE || miss == SB_MISS_NO_PREFIX || miss == SB_MISS_EVICTED ||
                    miss == SB_MISS_NO_POINT || miss == SB_MISS_MODEL_MISMATCH,
             "match of %s: miss %d from a RAM-only store", q, miss);
    if (!z->evicted && L < n && M == L)
        FZ_CHECK(z, miss == (L == 0 && other ? SB_MISS_MODEL_MISMATCH : SB_MISS_NO_PREFIX),
                 "match of %s: L %zu, miss %s (nothing evicted, other model %d)", q, L,
                 sb_miss_name(miss), other);

    /* The bytes, and the error paths of restore. */
    check_restore(z, x, m, tok, L, info->has_point, "match");
    void *dst[FZ_MAX_TENSORS];
    for (uint32_t t = 0; t < x->n_tensors; t++)
        dst[t] = z->out[t];
    uint8_t pt[FZ_MAX_POINT];
    rc = sb_match_restore(m, L + 1, dst, NULL);
    FZ_CHECK(z, rc == SB_ERR_RANGE, "restore of L + 1 tokens: %s", sb_strerror(rc));
    if (x->point_bytes && !info->has_point) {
        rc = sb_match_restore(m, L, dst, pt);
        FZ_CHECK(z, rc == SB_ERR_NO_POINT, "restore with a point of a match without one: %s",
                 sb_strerror(rc));
    }
    if (info->has_point && L > 0) {
        rc = sb_match_restore(m, L - 1, dst, pt);
        FZ_CHECK(z, rc == SB_ERR_NO_POINT, "restore with a point short of L: %s",
                 sb_strerror(rc));
    }
    return m;
}

/* Match and release: the restorable length of tok[0, n). */
static size_t match_len(fz *z, int xi, const fz_seq *s, size_t n, sb_match_info *info)
{
    sb_match *m = match_checked(z, xi, s, n, info);
    sb_match_release(m);
    return m ? info->n_tokens : 0;
}

static void hold_match(fz *z, sb_match *m, int xi, const fz_seq *s, size_t n,
                       const sb_match_info *info)
{
    if (z->n_match == FZ_MATCHES) {
        sb_match_release(z->match[0].m);
        memmove(&z->match[0], &z->match[1], (FZ_MATCHES - 1) * sizeof z->match[0]);
        z->n_match--;
    }
    fz_match *fm = &z->match[z->n_match++];
    fm->m = m;
    fm->xi = xi;
    fm->req = *s;
    fm->req.n = (uint32_t)n;
    fm->L = info->n_tokens;
    fm->has_point = info->has_point != 0;
}

static void drop_match(fz *z, int i)
{
    sb_match_release(z->match[i].m);
    memmove(&z->match[i], &z->match[i + 1], (size_t)(z->n_match - i - 1) * sizeof z->match[0]);
    z->n_match--;
}

/* ---- held pages ----------------------------------------------------------- */

static void drop_page(fz *z, int i)
{
    sb_page_unref(z->page[i].p);
    memmove(&z->page[i], &z->page[i + 1], (size_t)(z->n_page - i - 1) * sizeof z->page[0]);
    z->n_page--;
}

/* Hold reference p (the caller's reference moves to the list). */
static void hold_page(fz *z, sb_page *p, int xi, bool committed, uint32_t region, uint32_t kv,
                      const uint32_t *tok)
{
    if (z->n_page == FZ_PAGES)
        drop_page(z, 0);
    fz_page *hp = &z->page[z->n_page++];
    const fz_ns *x = &z->ns[xi];
    hp->p = p;
    hp->xi = xi;
    hp->committed = committed;
    hp->region = region;
    hp->kv = kv;
    hp->pre.n = region * x->pt + kv;
    if (tok)
        memcpy(hp->pre.tok, tok, hp->pre.n * sizeof *tok);
}

static void check_held_page(fz *z, const fz_page *hp, const char *what)
{
    const fz_ns *x = &z->ns[hp->xi];
    uint32_t k = sb_page_tokens(hp->p);
    if (hp->committed)
        FZ_CHECK(z, k >= hp->kv && k > 0 && k <= x->pt,
                 "%s: committed page of region %u holds %u tokens, %u known", what, hp->region,
                 k, hp->kv);
    else
        FZ_CHECK(z, k == 0, "%s: fresh page holds %u committed tokens", what, k);
    FZ_CHECK(z, fz_page_ok(x, hp->p, hp->pre.tok, hp->region, hp->kv),
             "%s: page of region %u of %s changed its bytes", what, hp->region,
             FZ_S(hp->pre.tok, hp->pre.n));
}

/* ---- operations ----------------------------------------------------------- */

static void op_put(fz *z, uint8_t fl)
{
    int xi = rd_ns(z);
    fz_ns *x = &z->ns[xi];
    fz_seq s;
    rd_seq(z, x, &s);
    size_t n = s.n;
    if (z->trace)
        fprintf(stderr, "  put ns %d %s%s\n", xi, FZ_S(s.tok, n), fl & 1 ? " +point" : "");
    fz_fill_buf(z, x, s.tok, n);
    const void *src[FZ_MAX_TENSORS];
    for (uint32_t t = 0; t < x->n_tensors; t++)
        src[t] = z->buf[t];
    uint8_t pbuf[FZ_MAX_POINT] = { 0 };
    size_t stored = 777;
    if ((fl & 4) && !x->point_bytes && n <= z->cfg.max_seq_tokens) {
        int rc = sb_ns_put(x->h, s.tok, n, src, pbuf, &stored);
        FZ_CHECK(z, rc == SB_ERR_INVAL && stored == 0,
                 "put with a point on a layout without points: %s, %zu stored",
                 sb_strerror(rc), stored);
        return;
    }
    const void *point = NULL;
    if ((fl & 1) && x->point_bytes) {
        uint64_t h[FZ_MAX_SEQ + 1];
        fz_chain(x, s.tok, n, h);
        fz_point(x, h, n, pbuf);
        point = pbuf;
    }
    bool quiet = nothing_held(z);
    sb_stats s0, s1;
    stats(z, &s0);
    bool armed = fault_arm(z);
    int rc = sb_ns_put(x->h, s.tok, n, src, point, &stored);
    fault_disarm(z);
    stats(z, &s1);
    FZ_CHECK(z, s1.puts == s0.puts + (rc == SB_OK || (rc == SB_ERR_BUDGET && stored > 0)),
             "put: puts counter moved %" PRIu64 " (%s, %zu stored)", s1.puts - s0.puts,
             sb_strerror(rc), stored);
    FZ_CHECK(z, rc != SB_ERR_BUDGET || s1.budget_denials > s0.budget_denials,
             "put: SB_ERR_BUDGET without a budget denial counted");
    if (n > z->cfg.max_seq_tokens) {
        FZ_CHECK(z, rc == SB_ERR_TOO_MANY_TOKENS && stored == 0,
                 "put of %zu tokens over the limit: %s", n, sb_strerror(rc));
        return;
    }
    if (armed && rc == SB_ERR_NOMEM) {
        /* "nothing stored, nothing changed but pages evicted to make room" */
        FZ_CHECK(z, stored == 0, "put of %s: SB_ERR_NOMEM with %zu stored", FZ_S(s.tok, n),
                 stored);
        return;
    }
    if (rc == SB_OK) {
        FZ_CHECK(z, stored == n, "put of %s: OK with %zu stored", FZ_S(s.tok, n), stored);
        model_add(z, x, s.tok, n, point != NULL);
    } else if (rc == SB_ERR_BUDGET) {
        /* Every token may be restorable when only the point found no room
         * ("the point, if any, was not stored"). */
        FZ_CHECK(z, stored < n || (point && stored == n),
                 "put of %s: SB_ERR_BUDGET with %zu of %zu tokens stored", FZ_S(s.tok, n),
                 stored, n);
        FZ_CHECK(z, !quiet || !fits(z, x, regions(x, n), point ? 1 : 0),
                 "put of %s: SB_ERR_BUDGET with nothing held, and it fits an empty store",
                 FZ_S(s.tok, n));
        if (stored)
            model_add(z, x, s.tok, stored, false);
    } else {
        fz_fail(z, "put of %s: %s", FZ_S(s.tok, n), sb_strerror(rc));
    }
    if ((fl & 2) && stored) {
        /* "restorable from the index when the call returns" */
        sb_match_info info;
        match_len(z, xi, &s, stored, &info);
        FZ_CHECK(z, info.n_matched_tokens == stored,
                 "put of %s stored %zu, a match right after finds %zu", FZ_S(s.tok, n), stored,
                 info.n_matched_tokens);
        if (x->required && point && rc == SB_OK)
            FZ_CHECK(z, info.n_tokens == n && info.has_point,
                     "put of %s with a point: a match right after restores %zu", FZ_S(s.tok, n),
                     info.n_tokens);
        if (!x->required)
            FZ_CHECK(z, info.n_tokens == stored, "put of %s: restorable %zu of %zu stored",
                     FZ_S(s.tok, n), info.n_tokens, stored);
        if (point && rc == SB_OK)
            FZ_CHECK(z, info.has_point, "put of %s with a point: match right after has none",
                     FZ_S(s.tok, n));
    }
}

static void unref_all(sb_page **pages, size_t n)
{
    for (size_t r = 0; r < n; r++)
        sb_page_unref(pages[r]);
}

static void op_commit(fz *z, uint8_t fl)
{
    int xi = rd_ns(z);
    fz_ns *x = &z->ns[xi];
    fz_seq s;
    rd_seq(z, x, &s);
    uint8_t xb = rd(z);
    size_t n = s.n, pt = x->pt, n_reg = regions(x, n);
    bool want_point = (fl & 1) && x->point_bytes;
    bool reuse = fl & 2, keep = fl & 4, late_release = fl & 8;
    bool poison = (xb & 7) == 7;
    if (z->trace)
        fprintf(stderr, "  commit ns %d %s%s%s%s\n", xi, FZ_S(s.tok, n),
                want_point ? " +point" : "", reuse ? " reuse" : " fresh",
                poison ? " poison" : "");
    sb_page *pages[FZ_MAX_SEQ] = { 0 };
    if (n > z->cfg.max_seq_tokens) {
        int rc = sb_ns_commit(x->h, s.tok, n, pages, NULL);
        FZ_CHECK(z, rc == SB_ERR_TOO_MANY_TOKENS, "commit of %zu tokens over the limit: %s", n,
                 sb_strerror(rc));
        return;
    }
    bool quiet = nothing_held(z);
    /* Worst case held at once: every region, a copy-on-write source, the
     * match's point and the new point. */
    bool fit = fits(z, x, n_reg + 1, 2);
    bool fresh[FZ_MAX_SEQ] = { 0 };
    size_t have = 0;
    sb_match *m = NULL;
    uint8_t pbuf[FZ_MAX_POINT];
    int rc;

    if (reuse) {
        sb_match_info info;
        m = match_checked(z, xi, &s, n, &info);
        size_t L = info.n_tokens, full = L / pt; /* 0 when the match failed */
        if (full) {
            rc = sb_match_pages(m, 0, full, pages);
            FZ_CHECK(z, rc == SB_OK, "sb_match_pages(0, %zu): %s", full, sb_strerror(rc));
            have = full;
        }
        if (L % pt) {
            sb_page *q = NULL;
            rc = sb_match_pages(m, full, 1, &q);
            FZ_CHECK(z, rc == SB_OK && q, "sb_match_pages(%zu, 1): %s", full, sb_strerror(rc));
            uint32_t keep_n = (uint32_t)(L % pt), k = region_tokens(x, n, full);
            uint32_t qt = sb_page_tokens(q);
            FZ_CHECK(z, qt >= keep_n, "matched tail page holds %u tokens, L %% pt is %u", qt,
                     keep_n);
            if (!(L == n && qt == k)) {
                /* The runtime appends to a matched partial page: copy on write. */
                sb_page *old = q;
                bool armed = fault_arm(z);
                rc = sb_page_writable(x->h, &q, keep_n);
                fault_disarm(z);
                if (rc == SB_ERR_BUDGET || (armed && rc == SB_ERR_NOMEM)) {
                    FZ_CHECK(z, rc == SB_ERR_NOMEM || !quiet || !fit,
                             "sb_page_writable: SB_ERR_BUDGET with nothing else held");
                    FZ_CHECK(z, q == old, "failed sb_page_writable replaced the page");
                    sb_page_unref(q);
                    goto abandon;
                }
                FZ_CHECK(z, rc == SB_OK, "sb_page_writable(%u): %s", keep_n, sb_strerror(rc));
                FZ_CHECK(z, q != old && sb_page_tokens(q) == 0,
                         "sb_page_writable of a committed page gave no fresh copy");
                FZ_CHECK(z, fz_page_ok(x, q, s.tok, full, keep_n),
                         "sb_page_writable lost the first %u slices", keep_n);
                fz_fill_page(x, q, s.tok, full, keep_n, k);
                fresh[full] = true;
            }
            pages[full] = q;
            have = full + 1;
        }
        if (!late_release) {
            sb_match_release(m);
            m = NULL;
        }
    }
    for (size_t r = have; r < n_reg; r++) {
        bool armed = fault_arm(z);
        rc = sb_ns_page_alloc(x->h, &pages[r]);
        fault_disarm(z);
        if (rc == SB_ERR_BUDGET || (armed && rc == SB_ERR_NOMEM)) {
            FZ_CHECK(z, !pages[r], "failed sb_ns_page_alloc left a page");
            FZ_CHECK(z, rc == SB_ERR_NOMEM || !quiet || !fit, "sb_ns_page_alloc: "
                     "SB_ERR_BUDGET with %zu pages held by this commit only", r);
            have = r;
            goto abandon;
        }
        FZ_CHECK(z, rc == SB_OK && pages[r], "sb_ns_page_alloc: %s", sb_strerror(rc));
        FZ_CHECK(z, ((uintptr_t)sb_page_data(pages[r]) & 4095) == 0,
                 "page data not 4096-aligned");
        FZ_CHECK(z, sb_page_tokens(pages[r]) == 0, "fresh page has committed tokens");
        fz_fill_page(x, pages[r], s.tok, r, 0, region_tokens(x, n, r));
        fresh[r] = true;
        have = r + 1;
    }
    if (want_point) {
        uint64_t h[FZ_MAX_SEQ + 1];
        fz_chain(x, s.tok, n, h);
        fz_point(x, h, n, pbuf);
    }
    sb_page *before[FZ_MAX_SEQ];
    memcpy(before, pages, n_reg * sizeof *pages);

    /* A wrong page in region pr must make the commit fail and change nothing. */
    int expect = SB_OK;
    size_t pr = 0;
    sb_page *wrong = NULL;
    if ((xb & 7) == 6 && n_reg > 1) {
        /* The same page for two regions. */
        pr = (size_t)(xb >> 3) % n_reg;
        wrong = pages[(pr + 1) % n_reg];
        expect = SB_ERR_INVAL;
    } else if (poison && z->n_page) {
        const fz_page *hp = &z->page[(xb >> 3) % z->n_page];
        pr = (size_t)(xb >> 3) % n_reg;
        uint32_t k = region_tokens(x, n, pr);
        size_t upto = pr * pt + k;
        size_t known = hp->pre.n < upto ? hp->pre.n : upto;
        if (hp->p == pages[pr]) {
            expect = SB_OK;
        } else if (hp->xi != xi) {
            expect = SB_ERR_FOREIGN_PAGE;
        } else if (hp->committed &&
                   (hp->region != pr || lcp(hp->pre.tok, known, s.tok, known) < known)) {
            /* Certainly not this region's page: another region, or tokens
             * it is known to hold differ. (A page of this region with the
             * same known tokens may be the index's own: not a wrong page.) */
            expect = SB_ERR_PAGE_STATE;
        }
        if (expect != SB_OK)
            wrong = hp->p;
    }
    if (wrong)
        pages[pr] = wrong;

    sb_stats s0, s1;
    stats(z, &s0);
    bool armed = fault_arm(z);
    rc = sb_ns_commit(x->h, s.tok, n, pages, want_point ? pbuf : NULL);
    fault_disarm(z);
    stats(z, &s1);
    FZ_CHECK(z, s1.commits == s0.commits + (rc == SB_OK), "commit (%s): commits counter moved "
             "%" PRIu64, sb_strerror(rc), s1.commits - s0.commits);
    if (expect != SB_OK || (armed && rc == SB_ERR_NOMEM)) {
        /* The page checks come first; then the point's allocation; then
         * index work, which allocates before it validates. */
        bool ok = expect == SB_ERR_FOREIGN_PAGE
                      ? rc == SB_ERR_FOREIGN_PAGE
                      : rc == SB_ERR_PAGE_STATE || rc == SB_ERR_INVAL ||
                            (want_point && rc == SB_ERR_BUDGET) ||
                            (armed && rc == SB_ERR_NOMEM);
        FZ_CHECK(z, ok, "commit of %s with a wrong page in region %zu: %s, want %s",
                 FZ_S(s.tok, n), pr, sb_strerror(rc), sb_strerror(expect));
        for (size_t r = 0; r < n_reg; r++)
            FZ_CHECK(z, pages[r] == (wrong && r == pr ? wrong : before[r]),
                     "failed commit replaced the page of region %zu", r);
        pages[pr] = before[pr];
        for (size_t r = 0; r < n_reg; r++)
            if (fresh[r])
                FZ_CHECK(z, sb_page_tokens(pages[r]) == 0,
                         "failed commit committed the page of region %zu", r);
        goto abandon;
    }
    if (rc == SB_ERR_BUDGET && want_point) {
        FZ_CHECK(z, !quiet || !fit, "commit: SB_ERR_BUDGET for the point with nothing else "
                 "held");
        for (size_t r = 0; r < n_reg; r++)
            FZ_CHECK(z, pages[r] == before[r], "failed commit replaced region %zu", r);
        goto abandon;
    }
    FZ_CHECK(z, rc == SB_OK, "commit of %s: %s", FZ_S(s.tok, n), sb_strerror(rc));
    model_add(z, x, s.tok, n, want_point);
    for (size_t r = 0; r < n_reg; r++) {
        uint32_t k = region_tokens(x, n, r), cur = sb_page_tokens(pages[r]);
        if (fresh[r] && pages[r] == before[r])
            FZ_CHECK(z, cur == k, "committed page of region %zu holds %u tokens, not %u", r,
                     cur, k);
        else
            FZ_CHECK(z, cur >= k, "page of region %zu after commit holds %u < %u tokens", r,
                     cur, k);
        FZ_CHECK(z, fz_page_ok(x, pages[r], s.tok, r, k),
                 "page of region %zu after commit of %s has wrong bytes%s", r, FZ_S(s.tok, n),
                 pages[r] != before[r] ? " (deduplicated)" : "");
    }
    if (xb & 8) {
        sb_match_info info;
        match_len(z, xi, &s, n, &info);
        FZ_CHECK(z, info.n_matched_tokens == n, "commit of %s: a match right after finds %zu",
                 FZ_S(s.tok, n), info.n_matched_tokens);
        if (!x->required || want_point)
            FZ_CHECK(z, info.n_tokens == n, "commit of %s: a match right after restores %zu",
                     FZ_S(s.tok, n), info.n_tokens);
    }
    if (keep) {
        for (size_t r = 0; r < n_reg; r++)
            hold_page(z, pages[r], xi, true, (uint32_t)r, region_tokens(x, n, r), s.tok);
        have = 0;
    } else {
        have = n_reg;
    }
abandon:
    unref_all(pages, have);
    sb_match_release(m);
}

static void op_match(fz *z, uint8_t fl)
{
    int xi = rd_ns(z);
    fz_seq s;
    rd_seq(z, &z->ns[xi], &s);
    if (z->trace)
        fprintf(stderr, "  match ns %d %s\n", xi, FZ_S(s.tok, s.n));
    sb_match_info info;
    sb_match *m = match_checked(z, xi, &s, s.n, &info);
    if (!m)
        return;
    if (fl & 1)
        sb_match_release(m);
    else
        hold_match(z, m, xi, &s, s.n, &info);
}

static void op_restore(fz *z, uint8_t fl)
{
    uint8_t i = rd(z), k = rd(z);
    if (!z->n_match)
        return;
    fz_match *fm = &z->match[i % z->n_match];
    const fz_ns *x = &z->ns[fm->xi];
    size_t n = k % (fm->L + 1);
    bool with_point = (fl & 1) && n == fm->L && fm->has_point;
    if (z->trace)
        fprintf(stderr, "  restore match %d: %zu of %zu\n", i % z->n_match, n, fm->L);
    check_restore(z, x, fm->m, fm->req.tok, n, with_point, "restore");
    if (fl & 2) {
        sb_page *p = NULL;
        int rc = sb_match_pages(fm->m, regions(x, fm->L), 1, &p);
        FZ_CHECK(z, rc == SB_ERR_RANGE && !p, "sb_match_pages past the end: %s",
                 sb_strerror(rc));
        sb_match_info info;
        FZ_CHECK(z, sb_match_get_info(fm->m, &info) == SB_OK && info.n_tokens == fm->L,
                 "held match changed its length");
    }
}

static void op_release(fz *z)
{
    uint8_t i = rd(z);
    if (z->n_match)
        drop_match(z, i % z->n_match);
}

static void op_pin(fz *z)
{
    int xi = rd_ns(z);
    fz_ns *x = &z->ns[xi];
    fz_seq s;
    rd_seq(z, x, &s);
    uint8_t t = rd(z);
    uint64_t ttl = (t & 0x30) == 0x30 ? 0 : t % 16;
    size_t n = s.n;
    if (z->trace)
        fprintf(stderr, "  pin ns %d %s ttl %" PRIu64 " ms\n", xi, FZ_S(s.tok, n), ttl);
    uint64_t id = 0;
    size_t np = 777;
    if (n > z->cfg.max_seq_tokens) {
        int rc = sb_ns_pin(x->h, s.tok, n, ttl, &id, &np);
        FZ_CHECK(z, rc == SB_ERR_TOO_MANY_TOKENS && np == 0, "pin over the limit: %s",
                 sb_strerror(rc));
        return;
    }
    if (z->n_pin == FZ_PINS) {
        /* Forget expired records first, then unpin the oldest. */
        for (int i = 0; i < z->n_pin;) {
            if (!pin_live(z, &z->pin[i])) {
                memmove(&z->pin[i], &z->pin[i + 1], (size_t)(z->n_pin - i - 1) * sizeof z->pin[0]);
                z->n_pin--;
            } else {
                i++;
            }
        }
        if (z->n_pin == FZ_PINS) {
            int rc = sb_ns_unpin(z->ns[z->pin[0].xi].h, z->pin[0].id);
            FZ_CHECK(z, rc == SB_OK, "unpin of a live pin: %s", sb_strerror(rc));
            memmove(&z->pin[0], &z->pin[1], (FZ_PINS - 1) * sizeof z->pin[0]);
            z->n_pin--;
        }
    }
    bool armed = fault_arm(z);
    int rc = sb_ns_pin(x->h, s.tok, n, ttl, &id, &np);
    fault_disarm(z);
    if (armed && rc == SB_ERR_NOMEM) {
        FZ_CHECK(z, np == 0, "failed pin pinned %zu tokens", np);
        return;
    }
    FZ_CHECK(z, rc == SB_OK, "pin of %s: %s", FZ_S(s.tok, n), sb_strerror(rc));
    FZ_CHECK(z, id > z->last_pin_id, "pin id %" PRIu64 " reused", id);
    z->last_pin_id = id;
    size_t bound = model_lcp(x, s.tok, n);
    FZ_CHECK(z, np <= bound, "pin of %s pinned %zu tokens, the model allows %zu",
             FZ_S(s.tok, n), np, bound);
    FZ_CHECK(z, z->evicted || np == bound, "pin of %s pinned %zu tokens, the model says %zu",
             FZ_S(s.tok, n), np, bound);
    sb_match_info info;
    size_t L0 = match_len(z, xi, &s, n, &info);
    FZ_CHECK(z, info.n_matched_tokens == np, "pin of %s pinned %zu, a match finds %zu",
             FZ_S(s.tok, n), np, info.n_matched_tokens);
    fz_pin *p = &z->pin[z->n_pin++];
    p->id = id;
    p->xi = xi;
    p->s = s;
    p->L0 = L0;
    p->expiry_ns = ttl ? z->now_ns + ttl * 1000000ull : 0;
}

static void op_unpin(fz *z, uint8_t fl)
{
    uint8_t b = rd(z);
    int i = b % (z->n_pin + 1);
    if (i == z->n_pin) {
        int rc = sb_ns_unpin(z->ns[0].h, z->last_pin_id + 1000);
        FZ_CHECK(z, rc == SB_ERR_NOT_FOUND, "unpin of an id never issued: %s", sb_strerror(rc));
        return;
    }
    fz_pin *p = &z->pin[i];
    if ((fl & 1) && z->n_ns > 1) {
        int rc = sb_ns_unpin(z->ns[(p->xi + 1) % z->n_ns].h, p->id);
        FZ_CHECK(z, rc == SB_ERR_NOT_FOUND, "unpin through another namespace: %s",
                 sb_strerror(rc));
        return;
    }
    bool live = pin_live(z, p);
    if (z->trace)
        fprintf(stderr, "  unpin %" PRIu64 " (%s)\n", p->id, live ? "live" : "expired");
    int rc = sb_ns_unpin(z->ns[p->xi].h, p->id);
    FZ_CHECK(z, rc == (live ? SB_OK : SB_ERR_NOT_FOUND), "unpin of a%s pin: %s",
             live ? " live" : "n expired", sb_strerror(rc));
    rc = sb_ns_unpin(z->ns[p->xi].h, p->id);
    FZ_CHECK(z, rc == SB_ERR_NOT_FOUND, "second unpin: %s", sb_strerror(rc));
    memmove(&z->pin[i], &z->pin[i + 1], (size_t)(z->n_pin - i - 1) * sizeof z->pin[0]);
    z->n_pin--;
}

static void op_alloc(fz *z)
{
    int xi = rd_ns(z);
    fz_ns *x = &z->ns[xi];
    bool quiet = nothing_held(z);
    sb_page *p = (sb_page *)&p;
    bool armed = fault_arm(z);
    int rc = sb_ns_page_alloc(x->h, &p);
    fault_disarm(z);
    if (rc == SB_ERR_BUDGET || (armed && rc == SB_ERR_NOMEM)) {
        FZ_CHECK(z, !p, "failed sb_ns_page_alloc left a page");
        FZ_CHECK(z, rc == SB_ERR_NOMEM || !quiet || !fits(z, x, 1, 0),
                 "sb_ns_page_alloc: SB_ERR_BUDGET with nothing held");
        return;
    }
    FZ_CHECK(z, rc == SB_OK && p, "sb_ns_page_alloc: %s", sb_strerror(rc));
    FZ_CHECK(z, sb_page_tokens(p) == 0, "fresh page has committed tokens");
    /* Scribble over it: a fresh page is the caller's to write. */
    memset(sb_page_data(p), 0x5A, x->page_bytes);
    hold_page(z, p, xi, false, 0, 0, NULL);
}

static void op_unref(fz *z)
{
    uint8_t i = rd(z);
    if (z->n_page)
        drop_page(z, i % z->n_page);
}

static void op_mpages(fz *z, uint8_t fl)
{
    uint8_t i = rd(z);
    if (!z->n_match)
        return;
    fz_match *fm = &z->match[i % z->n_match];
    const fz_ns *x = &z->ns[fm->xi];
    size_t np = regions(x, fm->L);
    sb_page *pages[FZ_MAX_SEQ];
    int rc = sb_match_pages(fm->m, 0, np, pages);
    FZ_CHECK(z, rc == SB_OK, "sb_match_pages(0, %zu): %s", np, sb_strerror(rc));
    for (size_t r = 0; r < np; r++) {
        uint32_t kv = region_tokens(x, fm->L, r);
        hold_page(z, pages[r], fm->xi, true, (uint32_t)r, kv, fm->req.tok);
        check_held_page(z, &z->page[z->n_page - 1], "sb_match_pages");
    }
    if (fl & 1) {
        sb_page *p = NULL;
        rc = sb_match_pages(fm->m, np, 1, &p);
        FZ_CHECK(z, rc == SB_ERR_RANGE && !p, "sb_match_pages past the end: %s",
                 sb_strerror(rc));
    }
}

static void op_writable(fz *z, uint8_t fl)
{
    uint8_t i = rd(z), k = rd(z);
    if (!z->n_page)
        return;
    fz_page *hp = &z->page[i % z->n_page];
    fz_ns *x = &z->ns[hp->xi];
    uint32_t n_keep = k % (x->pt + 2);
    sb_page *p = hp->p;
    if (z->trace)
        fprintf(stderr, "  writable page %d keep %u\n", i % z->n_page, n_keep);
    if ((fl & 1) && z->n_ns > 1) {
        int rc = sb_page_writable(z->ns[(hp->xi + 1) % z->n_ns].h, &p, n_keep);
        FZ_CHECK(z, rc == SB_ERR_FOREIGN_PAGE && p == hp->p,
                 "sb_page_writable through another namespace: %s", sb_strerror(rc));
        return;
    }
    uint32_t cur = sb_page_tokens(p);
    sb_stats s0, s1;
    stats(z, &s0);
    bool armed = fault_arm(z);
    int rc = sb_page_writable(x->h, &p, n_keep);
    fault_disarm(z);
    stats(z, &s1);
    FZ_CHECK(z, s1.cow_copies == s0.cow_copies + (rc == SB_OK && p != hp->p),
             "sb_page_writable (%s): cow_copies moved %" PRIu64, sb_strerror(rc),
             s1.cow_copies - s0.cow_copies);
    if (n_keep > x->pt || (hp->committed && n_keep > cur)) {
        FZ_CHECK(z, rc == SB_ERR_INVAL && p == hp->p, "sb_page_writable(n_keep %u, page "
                 "holds %u of %u): %s", n_keep, cur, x->pt, sb_strerror(rc));
        return;
    }
    if (!hp->committed) {
        /* Fresh and held by us alone: left as is. */
        FZ_CHECK(z, rc == SB_OK && p == hp->p, "sb_page_writable of a private fresh page: %s",
                 sb_strerror(rc));
        return;
    }
    if (rc == SB_ERR_BUDGET || (armed && rc == SB_ERR_NOMEM)) {
        FZ_CHECK(z, p == hp->p, "failed sb_page_writable replaced the page");
        return;
    }
    FZ_CHECK(z, rc == SB_OK && p != hp->p && sb_page_tokens(p) == 0,
             "sb_page_writable of a committed page: %s", sb_strerror(rc));
    hp->p = p; /* our reference to the old page was dropped */
    hp->committed = false;
    if (hp->kv > n_keep)
        hp->kv = n_keep;
    hp->pre.n = hp->region * x->pt + hp->kv;
    check_held_page(z, hp, "sb_page_writable");
}

static int open_ns(fz *z, fz_ns *x, const sb_layout *lay, sb_ns **out)
{
    return sb_ns_open(z->st, lay, x->scope_bytes ? x->scope : NULL, x->scope_bytes, out);
}

static void op_reopen(fz *z)
{
    int xi = rd_ns(z);
    fz_ns *x = &z->ns[xi];
    sb_ns_info info;
    FZ_CHECK(z, sb_ns_get_info(x->h, &info) == SB_OK, "sb_ns_get_info failed");
    bool holds = info.ram_bytes > 0;
    for (int i = 0; i < z->n_match; i++)
        holds |= z->match[i].xi == xi;
    for (int i = 0; i < z->n_pin; i++)
        holds |= z->pin[i].xi == xi && pin_live(z, &z->pin[i]);
    sb_ns_close(x->h);
    x->h = NULL;

    /* Same identity and scope, another page size: refused while the
     * namespace exists; after an empty namespace was freed it is new. */
    sb_layout other = x->lay;
    other.page_tokens = x->pt + 1;
    sb_ns *h = NULL;
    int rc = open_ns(z, x, &other, &h);
    if (rc == SB_OK) {
        FZ_CHECK(z, !holds, "namespace holding %" PRIu64 " bytes reopened with another layout",
                 info.ram_bytes);
        sb_ns_close(h);
    } else {
        FZ_CHECK(z, rc == SB_ERR_LAYOUT_MISMATCH && !h, "open with another layout: %s",
                 sb_strerror(rc));
    }
    rc = open_ns(z, x, &x->lay, &x->h);
    FZ_CHECK(z, rc == SB_OK && x->h, "reopen: %s", sb_strerror(rc));
    sb_ns_info again;
    FZ_CHECK(z, sb_ns_get_info(x->h, &again) == SB_OK && again.ns_id == info.ns_id &&
                    again.page_tokens == x->pt,
             "reopened namespace differs");
    if (holds)
        FZ_CHECK(z, again.indexed_pages == info.indexed_pages &&
                        again.index_tokens == info.index_tokens,
                 "closing a handle changed the namespace's index");
}

static void check_all(fz *z)
{
    for (int xi = 0; xi < z->n_ns; xi++) {
        fz_ns *x = &z->ns[xi];
        size_t from = x->n_model > FZ_CHECK_LAST ? x->n_model - FZ_CHECK_LAST : 0;
        for (size_t i = from; i < x->n_model; i++) {
            sb_match_info info;
            fz_seq s = x->model[i].s; /* match may not grow the model, but copy anyway */
            match_len(z, xi, &s, s.n, &info);
        }
    }
}

/* ---- after every operation ------------------------------------------------ */

static void after_op(fz *z)
{
    /* A fault CLOCK armed is for the next operation, not for these checks. */
    uint8_t fault_nth = z->fault_nth;
    z->fault_nth = 0;
    int rc = sb_store_check(z->st);
    FZ_CHECK(z, rc == SB_OK, "sb_store_check: %s", sb_strerror(rc));
    sb_stats s;
    stats(z, &s);

    /* P1: budgets. */
    FZ_CHECK(z, s.ram_bytes <= z->cfg.ram_bytes && s.ram_pages <= z->cfg.ram_pages,
             "over budget: %" PRIu64 " bytes, %" PRIu64 " pages", s.ram_bytes, s.ram_pages);
    FZ_CHECK(z, s.ram_bytes_limit == z->cfg.ram_bytes && s.ram_pages_limit == z->cfg.ram_pages,
             "stats report other limits");
    uint64_t ns_bytes = 0, ns_pages = 0, ns_tokens = 0;
    for (int i = 0; i < z->n_ns; i++) {
        sb_ns_info info;
        FZ_CHECK(z, sb_ns_get_info(z->ns[i].h, &info) == SB_OK, "sb_ns_get_info failed");
        FZ_CHECK(z, info.ram_bytes <= z->cfg.ns_ram_bytes,
                 "namespace %d over its budget: %" PRIu64 " bytes", i, info.ram_bytes);
        ns_bytes += info.ram_bytes;
        ns_pages += info.indexed_pages;
        ns_tokens += info.index_tokens;
    }
    FZ_CHECK(z, s.namespaces == (uint64_t)z->n_ns, "%" PRIu64 " namespaces, %d open",
             s.namespaces, z->n_ns);
    FZ_CHECK(z, ns_bytes == s.ram_bytes && ns_pages == s.indexed_pages &&
                    ns_tokens == s.index_tokens,
             "namespaces' bytes, pages and tokens do not add up to the store's");
    FZ_CHECK(z, s.ram_pages >= s.indexed_pages && s.indexed_pages >= s.pinned_pages,
             "ram_pages %" PRIu64 " < indexed %" PRIu64 " or pinned %" PRIu64 " above it",
             s.ram_pages, s.indexed_pages, s.pinned_pages);

    /* Pins: the store's count is the live ones (stats expire the rest). */
    uint64_t live = 0;
    for (int i = 0; i < z->n_pin; i++)
        live += pin_live(z, &z->pin[i]);
    FZ_CHECK(z, s.pins == live, "%" PRIu64 " pins, %" PRIu64 " live", s.pins, live);

    /* Counters only grow. */
    const sb_stats *o = &z->last;
    FZ_CHECK(z, s.lookups >= o->lookups && s.hits >= o->hits && s.puts >= o->puts &&
                    s.commits >= o->commits && s.pages_new >= o->pages_new &&
                    s.evictions >= o->evictions && s.point_evictions >= o->point_evictions &&
                    s.budget_denials >= o->budget_denials && s.cow_copies >= o->cow_copies &&
                    s.pages_dedup >= o->pages_dedup && s.hit_tokens >= o->hit_tokens &&
                    s.miss_tokens >= o->miss_tokens,
             "a counter went backwards");
    FZ_CHECK(z, s.hits == s.hits_ram && s.hits_disk == 0 && s.misses[SB_MISS_NONE] == 0,
             "hit counters inconsistent");

    /* P6: nothing held outside the index, every allocated byte is indexed. */
    if (nothing_held(z))
        FZ_CHECK(z, s.pinned_pages == 0 && s.ram_pages == s.indexed_pages &&
                        s.ram_bytes == s.indexed_bytes + s.point_bytes,
                 "nothing held, yet %" PRIu64 " pages / %" PRIu64 " bytes allocated for %" PRIu64
                 " indexed pages / %" PRIu64 " bytes (%" PRIu64 " pinned)",
                 s.ram_pages, s.ram_bytes, s.indexed_pages, s.indexed_bytes + s.point_bytes,
                 s.pinned_pages);
    z->last = s;

    /* P4: held matches, held pages, live pins. */
    for (int i = 0; i < z->n_match; i++) {
        fz_match *fm = &z->match[i];
        check_restore(z, &z->ns[fm->xi], fm->m, fm->req.tok, fm->L, fm->has_point,
                      "held match");
    }
    for (int i = 0; i < z->n_page; i++)
        check_held_page(z, &z->page[i], "held page");
    for (int i = 0; i < z->n_pin; i++) {
        fz_pin *p = &z->pin[i];
        if (!pin_live(z, p))
            continue;
        sb_match_info info;
        size_t L = match_len(z, p->xi, &p->s, p->s.n, &info);
        FZ_CHECK(z, L >= p->L0, "pinned %s (restorable %zu when pinned) restores %zu",
                 FZ_S(p->s.tok, p->s.n), p->L0, L);
    }
    z->fault_nth = fault_nth;
}

/* ---- one input ------------------------------------------------------------ */

static uint64_t fz_clock(void *ctx)
{
    return ((const fz *)ctx)->now_ns;
}

static void setup(fz *z)
{
    uint8_t h[FZ_HEADER];
    for (int i = 0; i < FZ_HEADER; i++)
        h[i] = rd(z);
    z->n_ns = 1 + h[0] % 3;
    sb_config_default(&z->cfg);
    unsigned v = h[4] % 40;
    z->cfg.ram_pages = v >= 32 ? UINT64_MAX : 2 + v;
    v = h[5] % 40;
    z->cfg.ram_bytes = v >= 32 ? 1ull << 30 : (2 + v) * 4096ull + h[5] / 40 * 16;
    v = h[6] % 40;
    z->cfg.ns_ram_bytes = v >= 24 ? UINT64_MAX : (2 + v) * 4096ull + h[6] / 40 * 16;
    if (h[7] >= 224)
        z->cfg.max_seq_tokens = h[7] - 223u;
    z->cfg.clock_ns = fz_clock;
    z->cfg.clock_ctx = z;
    z->now_ns = 1000000000ull;
    int rc = sb_store_open(&z->cfg, &z->st);
    FZ_CHECK(z, rc == SB_OK && z->st, "sb_store_open: %s", sb_strerror(rc));

    for (int i = 0; i < z->n_ns; i++) {
        fz_ns *x = &z->ns[i];
        uint8_t b = h[1 + i];
        x->pt = 1 + b % 5;
        int points = b / 5 % 3;
        x->n_tensors = 1 + b / 15 % 2;
        x->vocab = 2 + b / 30 % 4;
        x->bpt[0] = 3 + 4 * (uint32_t)i;  /* 3, 7, 11 */
        x->bpt[1] = 16 - 5 * (uint32_t)i; /* 16, 11, 6 */
        x->point_bytes = points ? 24 + 8 * (uint32_t)i : 0;
        x->required = points == 2;
        x->seed = 0x5EED000000000000ull + (uint64_t)i * 0x1000193ull;
        snprintf(x->model_id, sizeof x->model_id, "model-%d", i);
        if ((h[0] & 8) && i == z->n_ns - 1)
            x->scope_bytes = 0;
        else if (h[0] & 4)
            x->scope_bytes = (size_t)snprintf(x->scope, sizeof x->scope, "tenant");
        else
            x->scope_bytes = (size_t)snprintf(x->scope, sizeof x->scope, "tenant-%d", i);
        x->lay = (sb_layout){ .model_id = x->model_id, .model_id_bytes = strlen(x->model_id),
                              .page_tokens = x->pt, .n_tensors = x->n_tensors,
                              .bytes_per_token = x->bpt, .point_bytes = x->point_bytes,
                              .flags = x->required ? SB_LAYOUT_POINT_REQUIRED : 0 };
        rc = open_ns(z, x, &x->lay, &x->h);
        FZ_CHECK(z, rc == SB_OK && x->h, "sb_ns_open %d: %s", i, sb_strerror(rc));

        /* The page layout of snapbank.h. */
        size_t off = 0;
        for (uint32_t t = 0; t < x->n_tensors; t++) {
            x->off[t] = off;
            off += ((size_t)x->pt * x->bpt[t] + 63) / 64 * 64;
            FZ_CHECK(z, sb_ns_tensor_offset(x->h, t) == x->off[t], "tensor %u offset %zu, "
                     "want %zu", t, sb_ns_tensor_offset(x->h, t), x->off[t]);
        }
        x->page_bytes = (off + 4095) / 4096 * 4096;
        FZ_CHECK(z, sb_ns_tensor_offset(x->h, x->n_tensors) == (size_t)-1,
                 "offset of a tensor past the last");
        sb_ns_info info;
        FZ_CHECK(z, sb_ns_get_info(x->h, &info) == SB_OK && info.page_bytes == x->page_bytes &&
                        info.point_bytes == x->point_bytes && info.page_tokens == x->pt &&
                        info.n_tensors == x->n_tensors && info.flags == x->lay.flags,
                 "namespace %d geometry differs from the layout", i);
    }
    stats(z, &z->last);
}

static void teardown(fz *z)
{
    z->op_name = "teardown";
    z->fault_nth = 0;
    while (z->n_match)
        drop_match(z, z->n_match - 1);
    while (z->n_page)
        drop_page(z, z->n_page - 1);
    for (int i = 0; i < z->n_pin; i++) {
        int rc = sb_ns_unpin(z->ns[z->pin[i].xi].h, z->pin[i].id);
        FZ_CHECK(z, rc == (pin_live(z, &z->pin[i]) ? SB_OK : SB_ERR_NOT_FOUND),
                 "unpin at the end: %s", sb_strerror(rc));
    }
    z->n_pin = 0;
    after_op(z);
    check_all(z);
    for (int i = 0; i < z->n_ns; i++) {
        sb_ns_close(z->ns[i].h);
        free(z->ns[i].model);
    }
    sb_ns_close(NULL);
    sb_match_release(NULL);
    sb_page_unref(NULL);
    FZ_CHECK(z, sb_store_close(z->st) == SB_OK, "sb_store_close failed");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz *z = calloc(1, sizeof *z);
    if (!z)
        return 0;
    z->in = data;
    z->n_in = size;
    const char *tr = getenv("SB_FUZZ_TRACE");
    z->trace = tr && *tr && *tr != '0';
    setup(z);
    while (z->pos < z->n_in) {
        uint8_t o = rd(z);
        int kind = o & 15;
        uint8_t fl = o >> 4;
        z->op_no++;
        z->op_name = fz_op_names[kind];
        if (z->trace)
            fprintf(stderr, "op %u: %s flags %x\n", z->op_no, z->op_name, fl);
        switch (kind) {
        case OP_PUT:
        case OP_PUT + 1:
            op_put(z, fl);
            break;
        case OP_COMMIT:
        case OP_COMMIT + 1:
            op_commit(z, fl);
            break;
        case OP_MATCH:
            op_match(z, fl);
            break;
        case OP_RESTORE:
            op_restore(z, fl);
            break;
        case OP_RELEASE:
            op_release(z);
            break;
        case OP_PIN:
            op_pin(z);
            break;
        case OP_UNPIN:
            op_unpin(z, fl);
            break;
        case OP_CLOCK: {
            uint8_t d = rd(z);
            z->now_ns += (uint64_t)(d % 32) * 1000000ull;
            z->fault_nth = d / 32;
            break;
        }
        case OP_ALLOC:
            op_alloc(z);
            break;
        case OP_UNREF:
            op_unref(z);
            break;
        case OP_MPAGES:
            op_mpages(z, fl);
            break;
        case OP_WRITABLE:
            op_writable(z, fl);
            break;
        case OP_REOPEN:
            op_reopen(z);
            break;
        case OP_CHECK:
            check_all(z);
            break;
        }
        if (kind != OP_CLOCK)
            fault_disarm(z);
        after_op(z);
    }
    teardown(z);
    free(z);
    return 0;
}
