/* bench_index.c -- the index benchmark: snapbank's token radix index against
 * a vLLM-style chained block-hash table, side by side in one run.
 *
 * Description: three sections, one table each (see bench/README.md).
 *
 *   1. Match cost per prompt token. The bank holds the prompt; one
 *      iteration is sb_ns_match + sb_match_release of the whole prompt (the
 *      match pins every page it covers, and that is part of the cost). The
 *      baseline finds the same prefix the way vLLM's automatic prefix
 *      caching does: hash the prompt block by block, each block hash
 *      chained from its parent's, and probe a hash table until the first
 *      miss; it pins the blocks it found (a refcount each) and unpins them.
 *      Cases: the full prompt, a prompt that diverges from the stored
 *      sequence halfway, and many sessions branching off a shared system
 *      prompt. Goal: snapbank <= 2 ns per prompt token at 131,072 tokens.
 *   2. Commit throughput, in the steady state of a full RAM budget (every
 *      new page evicts an old one): zero-copy commits (sb_ns_page_alloc +
 *      sb_ns_commit + the caller's unref) and copy-mode puts (sb_ns_put) of
 *      new sequences, against the baseline's hash + insert (+ one eviction)
 *      per block and against a plain memcpy of the same bytes.
 *   3. Index bytes per cached token (sb_stats.index_bytes / index_tokens)
 *      for several tree shapes, against the baseline table's real
 *      allocation (entry size x capacity / cached tokens).
 *
 * Method: every point is warmed up (which also calibrates the iteration
 * count), then timed in `reps` repetitions of at least `min_ms` each with
 * CLOCK_MONOTONIC; snapbank's and the baseline's repetitions alternate so
 * both see the same machine noise; the table shows the median and the
 * spread ((max - min) / median) of the repetitions.
 *
 * Dependency rule: this file uses only the public header snapbank.h (and
 * xxhash.h for the baseline). It exits 1 when a call fails or a match finds
 * other than the expected prefix, so the --quick smoke test catches rot.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "snapbank.h"

#define BENCH_NAME "bench_index"
#include "bench_util.h"

#ifndef SB_BENCH_BUILD_TYPE
#define SB_BENCH_BUILD_TYPE "unknown"
#endif
#ifndef SB_BENCH_SANITIZE
#define SB_BENCH_SANITIZE 0
#endif
#ifndef SB_BENCH_JEMALLOC
#define SB_BENCH_JEMALLOC 0
#endif

#define GOAL_TOKENS 131072u
#define GOAL_NS_PER_TOKEN 2.0
#define REPS_MAX 64
#define VOCAB 151936u /* a large modern vocabulary (Qwen2) */

/* ---- parameters -------------------------------------------------------------- */

typedef struct bench_opts {
    uint32_t page_tokens;      /* tokens per page / block, both systems */
    uint32_t reps;             /* timed repetitions per point */
    uint64_t min_rep_ns;       /* shortest repetition */
    size_t max_tokens;         /* longest prompt of section 1 */
    uint32_t n_sessions;       /* sessions sharing the system prompt */
    uint32_t system_tokens;    /* shared system prompt length */
    uint32_t session_tokens;   /* each session's own tokens after it */
    uint32_t commit_tokens;    /* sequence length of section 2 */
    uint64_t commit_budget;    /* section 2 RAM budget, bytes (minimum) */
    uint32_t n_short;          /* section 3: short independent sequences */
    uint32_t short_tokens;     /* ...of this length */
    size_t long_tokens;        /* section 3: the one long sequence */
    uint32_t turn_tokens;      /* section 3: growth step of the long sequence */
    unsigned sections;         /* bit s - 1: run section s */
    bool quick;
} bench_opts;

/* ---- helpers ------------------------------------------------------------------- */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* splitmix64 */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void fill_tokens(uint64_t *rng, uint32_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = (uint32_t)(rng_next(rng) % VOCAB);
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "bench_index: %s failed: %s (%d)\n", what,
            rc < 0 ? sb_strerror(rc) : "unexpected result", rc);
    exit(1);
}

#define CHECK(call)                       \
    do {                                  \
        int rc_ = (call);                 \
        if (rc_ != SB_OK)                 \
            die(#call, rc_);              \
    } while (0)

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "bench_index: out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

static void *xcalloc(size_t count, size_t size)
{
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) {
        fprintf(stderr, "bench_index: out of memory (%zu x %zu bytes)\n", count, size);
        exit(1);
    }
    return p;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---- the timing harness ---------------------------------------------------------- */

/* One iteration of a benchmark. Returns the nanoseconds of an inner phase
 * it timed itself (reported separately), or 0. */
typedef uint64_t (*bench_fn)(void *ctx);

typedef struct bench_res {
    double med;                /* median ns per iteration over the repetitions */
    double spread;             /* (max - min) / median of the repetitions */
    double inner_med;          /* median inner-phase ns per iteration */
    uint64_t iters;            /* iterations per repetition */
} bench_res;

/* Warm up for about a quarter of a repetition and return the iteration
 * count that makes one repetition last at least min_rep_ns. */
static uint64_t bench_calibrate(const bench_opts *o, bench_fn f, void *ctx)
{
    uint64_t warm = o->min_rep_ns / 4, n = 0, t0 = now_ns(), t;
    do {
        f(ctx);
        n++;
    } while ((t = now_ns() - t0) < warm);
    uint64_t per = t / n ? t / n : 1;
    uint64_t k = (o->min_rep_ns + per - 1) / per;
    return k ? k : 1;
}

static void bench_rep(bench_fn f, void *ctx, uint64_t k, double *ns, double *inner)
{
    uint64_t in = 0, t0 = now_ns();
    for (uint64_t i = 0; i < k; i++)
        in += f(ctx);
    *ns = (double)(now_ns() - t0) / (double)k;
    *inner = (double)in / (double)k;
}

static void bench_summarize(double *v, double *in, uint32_t n, uint64_t k, bench_res *r)
{
    qsort(v, n, sizeof *v, cmp_double);
    qsort(in, n, sizeof *in, cmp_double);
    r->med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    r->inner_med = n % 2 ? in[n / 2] : (in[n / 2 - 1] + in[n / 2]) / 2;
    r->spread = r->med > 0 ? (v[n - 1] - v[0]) / r->med : 0;
    r->iters = k;
}

/* Time fa (and fb when not NULL), alternating their repetitions. */
static void bench_pair(const bench_opts *o, bench_fn fa, void *ca, bench_res *ra,
                       bench_fn fb, void *cb, bench_res *rb)
{
    double va[REPS_MAX], ia[REPS_MAX], vb[REPS_MAX], ib[REPS_MAX];
    uint64_t ka = bench_calibrate(o, fa, ca);
    uint64_t kb = fb ? bench_calibrate(o, fb, cb) : 0;
    for (uint32_t r = 0; r < o->reps; r++) {
        bench_rep(fa, ca, ka, &va[r], &ia[r]);
        if (fb)
            bench_rep(fb, cb, kb, &vb[r], &ib[r]);
    }
    bench_summarize(va, ia, o->reps, ka, ra);
    if (fb)
        bench_summarize(vb, ib, o->reps, kb, rb);
}

/* ---- the baseline: vLLM-style chained block hashes ---------------------------------
 *
 * What vLLM's automatic prefix caching does, in C: only full blocks are
 * cached; block i's hash is XXH3-128(hash of block i - 1 || tokens of block
 * i) (block 0 chains from a fixed root), so one hash names a whole prefix;
 * a table maps hash -> block id. A lookup hashes the prompt block by block
 * and probes until the first miss, pinning (ref++) each block it finds.
 *
 * The table is open addressing with linear probing (power-of-two capacity,
 * grown x2 above 3/4 load, backward-shift deletion). One entry:
 *
 *     offset  size  field
 *          0     8  hash, low 64 bits (also the probe start)
 *          8     8  hash, high 64 bits
 *         16     4  block id (0: empty slot)
 *         20     4  padding
 *
 * Block metadata (refcount, LRU stamp) lives in a separate array indexed by
 * block id, like vLLM's KVCacheBlock pool; section 3 counts the table only,
 * as snapbank's index_bytes counts its tree but not its page structs. The
 * baseline trusts the 128-bit hash: it never compares tokens.
 */

typedef struct bl_key {
    uint64_t lo, hi;
} bl_key;

typedef struct bl_entry {
    uint64_t lo, hi;           /* block hash */
    uint32_t block;            /* block id; 0: empty */
    uint32_t pad;
} bl_entry;
_Static_assert(sizeof(bl_entry) == 24, "bl_entry is 24 bytes");

typedef struct bl_block {
    uint32_t ref;              /* pins by lookups */
    uint32_t pad;
    uint64_t stamp;            /* last use, for an LRU */
} bl_block;

typedef struct bl_table {
    uint32_t pt;               /* tokens per block */
    bl_entry *slots;           /* (cap) */
    size_t cap;                /* power of two */
    size_t n;                  /* occupied slots */
    bl_block *blocks;          /* (blocks_cap) by id; id 0 unused */
    size_t blocks_cap;
    uint32_t next_id;          /* ids handed out so far + 1 */
    uint32_t *free_ids;        /* (blocks_cap) recycled ids */
    size_t n_free;
    uint8_t *scratch;          /* (16 + pt * 4) parent hash || block tokens */
    uint64_t tick;
} bl_table;

static const bl_key bl_root = { 0x243F6A8885A308D3ull, 0x13198A2E03707344ull };

static void bl_init(bl_table *t, uint32_t pt)
{
    memset(t, 0, sizeof *t);
    t->pt = pt;
    t->cap = 16;
    t->slots = xcalloc(t->cap, sizeof *t->slots);
    t->blocks_cap = 16;
    t->blocks = xcalloc(t->blocks_cap, sizeof *t->blocks);
    t->free_ids = xcalloc(t->blocks_cap, sizeof *t->free_ids);
    t->next_id = 1;
    t->scratch = xmalloc(16 + (size_t)pt * 4);
}

static void bl_free(bl_table *t)
{
    free(t->slots);
    free(t->blocks);
    free(t->free_ids);
    free(t->scratch);
    memset(t, 0, sizeof *t);
}

static bl_key bl_hash(bl_table *t, const bl_key *parent, const uint32_t *tok)
{
    memcpy(t->scratch, parent, 16);
    memcpy(t->scratch + 16, tok, (size_t)t->pt * 4);
    XXH128_hash_t h = XXH3_128bits(t->scratch, 16 + (size_t)t->pt * 4);
    return (bl_key){ h.low64, h.high64 };
}

/* The slot holding key k, or the empty slot where the probe ended. */
static size_t bl_slot(const bl_table *t, const bl_key *k)
{
    size_t mask = t->cap - 1, i = (size_t)k->lo & mask;
    while (t->slots[i].block && (t->slots[i].lo != k->lo || t->slots[i].hi != k->hi))
        i = (i + 1) & mask;
    return i;
}

static void bl_grow(bl_table *t)
{
    bl_entry *old = t->slots;
    size_t old_cap = t->cap;
    t->cap *= 2;
    t->slots = xcalloc(t->cap, sizeof *t->slots);
    for (size_t i = 0; i < old_cap; i++) {
        if (!old[i].block)
            continue;
        bl_key k = { old[i].lo, old[i].hi };
        t->slots[bl_slot(t, &k)] = old[i];
    }
    free(old);
}

static uint32_t bl_new_block(bl_table *t)
{
    if (t->n_free)
        return t->free_ids[--t->n_free];
    if (t->next_id >= t->blocks_cap) {
        size_t c = t->blocks_cap * 2;
        bl_block *b = realloc(t->blocks, c * sizeof *b);
        uint32_t *f = realloc(t->free_ids, c * sizeof *f);
        if (!b || !f) {
            fprintf(stderr, "bench_index: out of memory\n");
            exit(1);
        }
        memset(b + t->blocks_cap, 0, (c - t->blocks_cap) * sizeof *b);
        t->blocks = b;
        t->free_ids = f;
        t->blocks_cap = c;
    }
    return t->next_id++;
}

/* Insert the full blocks of tokens[0, n). Newly inserted block hashes go to
 * added (when not NULL) in order. Returns the number of new blocks. */
static size_t bl_insert(bl_table *t, const uint32_t *tok, size_t n, bl_key *added)
{
    bl_key parent = bl_root;
    size_t n_new = 0;
    for (size_t b = 0; b < n / t->pt; b++) {
        bl_key h = bl_hash(t, &parent, tok + b * t->pt);
        if ((t->n + 1) * 4 > t->cap * 3)
            bl_grow(t);
        size_t i = bl_slot(t, &h);
        if (!t->slots[i].block) {
            uint32_t id = bl_new_block(t);
            t->slots[i] = (bl_entry){ h.lo, h.hi, id, 0 };
            t->blocks[id] = (bl_block){ 0, 0, ++t->tick };
            t->n++;
            if (added)
                added[n_new] = h;
            n_new++;
        }
        parent = h;
    }
    return n_new;
}

/* Remove block hash k (backward-shift deletion keeps probes tombstone-free). */
static void bl_delete(bl_table *t, const bl_key *k)
{
    size_t mask = t->cap - 1, i = bl_slot(t, k);
    if (!t->slots[i].block)
        return;
    t->free_ids[t->n_free++] = t->slots[i].block;
    for (size_t j = i;;) {
        j = (j + 1) & mask;
        if (!t->slots[j].block)
            break;
        size_t home = (size_t)t->slots[j].lo & mask;
        /* The entry at j may move back to i unless its home lies in (i, j]. */
        bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (!stays) {
            t->slots[i] = t->slots[j];
            i = j;
        }
    }
    t->slots[i].block = 0;
    t->n--;
}

/* Look up the longest cached full-block prefix of tokens[0, n), pinning its
 * blocks. *out receives their ids (malloc'd; free with bl_release). Returns
 * the number of blocks. */
static size_t bl_match(bl_table *t, const uint32_t *tok, size_t n, uint32_t **out)
{
    size_t nb = n / t->pt, b;
    uint32_t *ids = xmalloc(nb * sizeof *ids);
    bl_key parent = bl_root;
    for (b = 0; b < nb; b++) {
        bl_key h = bl_hash(t, &parent, tok + b * t->pt);
        size_t i = bl_slot(t, &h);
        uint32_t id = t->slots[i].block;
        if (!id)
            break;
        ids[b] = id;
        t->blocks[id].ref++;
        t->blocks[id].stamp = ++t->tick;
        parent = h;
    }
    *out = ids;
    return b;
}

static void bl_release(bl_table *t, uint32_t *ids, size_t n)
{
    for (size_t b = 0; b < n; b++)
        t->blocks[ids[b]].ref--;
    free(ids);
}

static uint64_t bl_table_bytes(const bl_table *t)
{
    return (uint64_t)t->cap * sizeof(bl_entry);
}

/* ---- snapbank helpers --------------------------------------------------------------- */

static const char bench_model[] = "bench-model-digest";

static sb_store *bank_open(uint64_t ram_bytes)
{
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.ram_bytes = ram_bytes;
    sb_store *st = NULL;
    CHECK(sb_store_open(&cfg, &st));
    return st;
}

static sb_ns *bank_ns(sb_store *st, uint32_t pt, uint32_t n_tensors, const uint32_t *bpt)
{
    sb_layout lay = { .model_id = bench_model, .model_id_bytes = sizeof bench_model - 1,
                      .page_tokens = pt, .n_tensors = n_tensors,
                      .bytes_per_token = bpt };
    sb_ns *ns = NULL;
    CHECK(sb_ns_open(st, &lay, "bench", 5, &ns));
    return ns;
}

/* The index-only layout of sections 1 and 3: one tensor of 4 bytes per
 * token, so a page is the 4 KiB minimum and setup stays cheap. */
static const uint32_t tiny_bpt[1] = { 4 };

/* Store tokens[0, n) in copy mode from a zero buffer of n * 4 bytes. */
static void bank_put(sb_ns *ns, const uint32_t *tok, size_t n, const void *zeros)
{
    const void *src[1] = { zeros };
    size_t stored = 0;
    CHECK(sb_ns_put(ns, tok, n, src, NULL, &stored));
    if (stored != n)
        die("sb_ns_put stored count", (int)stored);
}

static size_t bank_match_len(sb_ns *ns, const uint32_t *tok, size_t n)
{
    sb_match *m = NULL;
    sb_match_info info;
    CHECK(sb_ns_match(ns, tok, n, &m));
    CHECK(sb_match_get_info(m, &info));
    sb_match_release(m);
    return info.n_tokens;
}

/* ---- section 1: match cost ------------------------------------------------------------ */

typedef struct match_ctx {
    sb_ns *ns;                 /* snapbank side */
    bl_table *bl;              /* baseline side */
    const uint32_t *const *prompts; /* (n_prompts), each n_tokens long */
    size_t n_prompts, next, n_tokens;
} match_ctx;

static const uint32_t *next_prompt(match_ctx *c)
{
    const uint32_t *p = c->prompts[c->next];
    if (++c->next == c->n_prompts)
        c->next = 0;
    return p;
}

static uint64_t bank_match_once(void *p)
{
    match_ctx *c = p;
    sb_match *m = NULL;
    int rc = sb_ns_match(c->ns, next_prompt(c), c->n_tokens, &m);
    if (rc != SB_OK)
        die("sb_ns_match", rc);
    sb_match_release(m);
    return 0;
}

static uint64_t base_match_once(void *p)
{
    match_ctx *c = p;
    uint32_t *ids;
    size_t nb = bl_match(c->bl, next_prompt(c), c->n_tokens, &ids);
    bl_release(c->bl, ids, nb);
    return 0;
}

typedef struct match_row {
    const char *name;
    size_t n_tokens;           /* prompt length */
    size_t bank_matched;       /* tokens snapbank restores */
    size_t base_matched;       /* tokens the baseline restores (full blocks) */
    bench_res bank, base;
} match_row;

/* Time matching prompts[0, n_prompts) (n tokens each) against a bank and a
 * baseline that hold them, checking both find the expected prefix first. */
static void match_point(const bench_opts *o, sb_ns *ns, bl_table *bl,
                        const uint32_t *const *prompts, size_t n_prompts, size_t n,
                        size_t expect, match_row *row)
{
    size_t expect_base = expect / o->page_tokens * o->page_tokens;
    for (size_t i = 0; i < n_prompts; i++) {
        size_t got = bank_match_len(ns, prompts[i], n);
        if (got != expect) {
            fprintf(stderr, "bench_index: %s n=%zu: snapbank matched %zu, want %zu\n",
                    row->name, n, got, expect);
            exit(1);
        }
        uint32_t *ids;
        size_t nb = bl_match(bl, prompts[i], n, &ids);
        bl_release(bl, ids, nb);
        if (nb * o->page_tokens != expect_base) {
            fprintf(stderr, "bench_index: %s n=%zu: baseline matched %zu, want %zu\n",
                    row->name, n, nb * o->page_tokens, expect_base);
            exit(1);
        }
    }
    row->n_tokens = n;
    row->bank_matched = expect;
    row->base_matched = expect_base;
    match_ctx cb = { .ns = ns, .prompts = prompts, .n_prompts = n_prompts, .n_tokens = n };
    match_ctx cl = { .bl = bl, .prompts = prompts, .n_prompts = n_prompts, .n_tokens = n };
    bench_pair(o, bank_match_once, &cb, &row->bank, base_match_once, &cl, &row->base);
}

/* One stored sequence of n tokens; match it whole and diverging halfway. */
static void match_single(const bench_opts *o, size_t n, match_row *full, match_row *div)
{
    uint64_t rng = 0x5EED0000u + n;
    uint32_t *tok = xmalloc(n * sizeof *tok);
    uint32_t *alt = xmalloc(n * sizeof *alt);
    void *zeros = xcalloc(n, 4);
    fill_tokens(&rng, tok, n);
    memcpy(alt, tok, n * sizeof *tok);
    for (size_t i = n / 2; i < n; i++)
        alt[i] = (tok[i] + 1) % VOCAB; /* differs from tok at every later position */

    sb_store *st = bank_open(64ull << 30);
    sb_ns *ns = bank_ns(st, o->page_tokens, 1, tiny_bpt);
    bank_put(ns, tok, n, zeros);
    bl_table bl;
    bl_init(&bl, o->page_tokens);
    bl_insert(&bl, tok, n, NULL);

    const uint32_t *pf[1] = { tok }, *pd[1] = { alt };
    full->name = "full";
    match_point(o, ns, &bl, pf, 1, n, n, full);
    div->name = "diverge@1/2";
    match_point(o, ns, &bl, pd, 1, n, n / 2, div);

    bl_free(&bl);
    sb_ns_close(ns);
    CHECK(sb_store_close(st));
    free(zeros);
    free(alt);
    free(tok);
}

/* n_sessions sequences = one shared system prompt + own tokens each; every
 * iteration matches the next session's whole sequence. */
static void match_sessions(const bench_opts *o, match_row *row)
{
    size_t sys = o->system_tokens, own = o->session_tokens, n = sys + own;
    size_t ns_count = o->n_sessions;
    uint64_t rng = 0xC0FFEEu;
    uint32_t *all = xmalloc(ns_count * n * sizeof *all);
    const uint32_t **prompts = xmalloc(ns_count * sizeof *prompts);
    void *zeros = xcalloc(n, 4);
    fill_tokens(&rng, all, sys);
    for (size_t s = 0; s < ns_count; s++) {
        uint32_t *p = all + s * n;
        if (s)
            memcpy(p, all, sys * sizeof *p);
        fill_tokens(&rng, p + sys, own);
        prompts[s] = p;
    }

    sb_store *st = bank_open(64ull << 30);
    sb_ns *ns = bank_ns(st, o->page_tokens, 1, tiny_bpt);
    bl_table bl;
    bl_init(&bl, o->page_tokens);
    for (size_t s = 0; s < ns_count; s++) {
        bank_put(ns, prompts[s], n, zeros);
        bl_insert(&bl, prompts[s], n, NULL);
    }
    row->name = "sessions";
    match_point(o, ns, &bl, prompts, ns_count, n, n, row);

    bl_free(&bl);
    sb_ns_close(ns);
    CHECK(sb_store_close(st));
    free(zeros);
    free(prompts);
    free(all);
}

/* ---- section 1b: batched lookups ---------------------------------------------------- */

typedef struct lookup_ctx {
    sb_ns *ns;
    sb_lookup *reqs;           /* (n) */
    size_t n;
} lookup_ctx;

static uint64_t bank_lookup_batch(void *p)
{
    lookup_ctx *c = p;
    int rc = sb_ns_lookup(c->ns, c->reqs, c->n);
    if (rc != SB_OK)
        die("sb_ns_lookup", rc);
    return 0;
}

static uint64_t bank_match_each(void *p)
{
    lookup_ctx *c = p;
    for (size_t i = 0; i < c->n; i++) {
        sb_match *m = NULL;
        int rc = sb_ns_match(c->ns, c->reqs[i].tokens, c->reqs[i].n_tokens, &m);
        if (rc != SB_OK)
            die("sb_ns_match", rc);
        sb_match_release(m);
    }
    return 0;
}

/* n_req requests of n tokens (a shared first quarter, then their own),
 * every one stored: one sb_ns_lookup of them all against a match and
 * release of each, alternated. */
static void section_lookup(const bench_opts *o)
{
    size_t n_req = o->quick ? 100 : 1000, n = o->quick ? 2048 : 8000, sys = n / 4;
    uint64_t rng = 0x100C0u;
    uint32_t *all = xmalloc(n_req * n * sizeof *all);
    sb_lookup *reqs = xcalloc(n_req, sizeof *reqs);
    void *zeros = xcalloc(n, 4);
    fill_tokens(&rng, all, sys);
    sb_store *st = bank_open(64ull << 30);
    sb_ns *ns = bank_ns(st, o->page_tokens, 1, tiny_bpt);
    for (size_t r = 0; r < n_req; r++) {
        uint32_t *p = all + r * n;
        if (r)
            memcpy(p, all, sys * sizeof *p);
        fill_tokens(&rng, p + sys, n - sys);
        bank_put(ns, p, n, zeros);
        reqs[r].tokens = p;
        reqs[r].n_tokens = n;
    }
    lookup_ctx c = { .ns = ns, .reqs = reqs, .n = n_req };
    bank_lookup_batch(&c);
    for (size_t r = 0; r < n_req; r++)
        if (reqs[r].info.n_tokens != n || bank_match_len(ns, reqs[r].tokens, n) != n) {
            fprintf(stderr, "bench_index: lookup of request %zu found %zu of %zu tokens\n", r,
                    reqs[r].info.n_tokens, n);
            exit(1);
        }
    bench_res rl, rm;
    bench_pair(o, bank_lookup_batch, &c, &rl, bank_match_each, &c, &rm);
    double tok = (double)(n_req * n), lt = rl.med / tok, mt = rm.med / tok;
    printf("\n== 1b. Batched lookup (sb_ns_lookup) of %zu requests of %zu tokens ==\n", n_req,
           n);
    printf("one sb_ns_lookup of them all (no pins, one lock hold) against sb_ns_match +\n"
           "sb_match_release of each, alternated; ns/tok = median ns / (requests x tokens).\n\n");
    printf("%-22s %10s %12s %s\n", "call", "ns/tok", "ms/batch", "spread");
    printf("%-22s %10.3f %12.3f %5.0f%%\n", "sb_ns_lookup (batch)", lt, rl.med / 1e6,
           rl.spread * 100);
    printf("%-22s %10.3f %12.3f %5.0f%%\n", "sb_ns_match each", mt, rm.med / 1e6,
           rm.spread * 100);
    printf("\nGOAL: batched lookup <= the single-request match cost per token: %.3f vs "
           "%.3f ns/token (%.2fx) -- %s\n", lt, mt, mt / lt, lt <= mt ? "MET" : "MISSED");
    sb_ns_close(ns);
    CHECK(sb_store_close(st));
    free(zeros);
    free(reqs);
    free(all);
}

static void print_match_row(const match_row *r)
{
    double n = (double)r->n_tokens;
    double bt = r->bank.med / n, lt = r->base.med / n;
    printf("%-12s %8zu %10.3f %10.3f %8.2fx %11.2f %11.2f %8zu %8zu %6.0f%%/%.0f%%\n",
           r->name, r->n_tokens, bt, lt, lt / bt, r->bank.med / 1000, r->base.med / 1000,
           r->bank_matched, r->base_matched, r->bank.spread * 100, r->base.spread * 100);
}

static void section_match(const bench_opts *o)
{
    static const size_t sizes[] = { 16, 64, 256, 1024, 4096, 16384, 65536, 131072 };
    static const size_t quick_sizes[] = { 16, 256, 4096 };
    const size_t *sz = o->quick ? quick_sizes : sizes;
    size_t n_sz = o->quick ? sizeof quick_sizes / sizeof *quick_sizes
                           : sizeof sizes / sizeof *sizes;
    match_row full[8], div[8], sess;
    size_t n_run = 0;

    printf("\n== 1. Match cost per prompt token (page_tokens %u) ==\n", o->page_tokens);
    printf("snapbank: sb_ns_match + sb_match_release of the whole prompt (pins every page).\n"
           "baseline: chained XXH3-128 block hashes, probe until the first miss, "
           "ref/unref each block.\n"
           "ns/tok = median ns per iteration / prompt tokens; matched = tokens "
           "restorable; spread = (max-min)/median over %u reps.\n\n", o->reps);
    printf("%-12s %8s %10s %10s %9s %11s %11s %8s %8s %s\n", "case", "tokens",
           "sb ns/tok", "base ns/tok", "base/sb", "sb us/op", "base us/op",
           "sb match", "base mt", "spread sb/base");
    for (size_t i = 0; i < n_sz && sz[i] <= o->max_tokens; i++) {
        match_single(o, sz[i], &full[n_run], &div[n_run]);
        print_match_row(&full[n_run]);
        fflush(stdout);
        n_run++;
    }
    for (size_t i = 0; i < n_run; i++)
        print_match_row(&div[i]);
    match_sessions(o, &sess);
    print_match_row(&sess);
    printf("(sessions: %u sessions of %u shared + %u own tokens; each iteration "
           "matches the next session's whole sequence)\n",
           o->n_sessions, o->system_tokens, o->session_tokens);

    bool goal_seen = false;
    for (size_t i = 0; i < n_run; i++) {
        if (full[i].n_tokens != GOAL_TOKENS)
            continue;
        double v = full[i].bank.med / (double)full[i].n_tokens;
        printf("\nGOAL: snapbank match <= %.1f ns/prompt token at %u tokens "
               "(page_tokens %u): %.3f ns/token -- %s\n",
               GOAL_NS_PER_TOKEN, GOAL_TOKENS, o->page_tokens, v,
               v <= GOAL_NS_PER_TOKEN ? "MET" : "MISSED");
        goal_seen = true;
    }
    if (!goal_seen)
        printf("\nGOAL: not measured in this run (needs a %u-token prompt)\n", GOAL_TOKENS);
}

/* ---- section 2: commit throughput ------------------------------------------------------- */

/* The KV layout of section 2: K and V of a small model, 6 KiB per token
 * each (24 layers x 2 KV heads x 64 dims x 2 bytes of fp16 = 6144), so a
 * 16-token page is 192 KiB. */
static const uint32_t kv_bpt[2] = { 6144, 6144 };
#define KV_BYTES_PER_TOKEN 12288u

typedef struct commit_ctx {
    sb_ns *ns;
    uint32_t *tok;             /* (n) tok[0] is rewritten to a fresh id each time */
    size_t n, n_pages;
    sb_page **pages;           /* (n_pages) */
    const void *src[2];        /* copy mode: (n, 6144) each */
    uint32_t seq;              /* sequences made so far */
    bl_table *bl;              /* baseline */
    bl_key *ring;              /* baseline FIFO of resident block hashes */
    size_t ring_cap, ring_head, ring_n, resident_limit;
    bl_key *added;             /* (n_pages) scratch */
    uint8_t *dst;              /* memcpy ceiling: (dst_slots, n, 12288) */
    size_t dst_slots, dst_next;
} commit_ctx;

/* A token sequence no earlier one shares a prefix with: the first token is
 * outside the vocabulary and unique. */
static void fresh_sequence(commit_ctx *c)
{
    c->tok[0] = 0x80000000u + c->seq++;
}

static uint64_t bank_commit_once(void *p)
{
    commit_ctx *c = p;
    fresh_sequence(c);
    for (size_t r = 0; r < c->n_pages; r++) {
        int rc = sb_ns_page_alloc(c->ns, &c->pages[r]);
        if (rc != SB_OK)
            die("sb_ns_page_alloc", rc);
    }
    uint64_t t0 = now_ns();
    int rc = sb_ns_commit(c->ns, c->tok, c->n, c->pages, NULL);
    uint64_t t1 = now_ns();
    if (rc != SB_OK)
        die("sb_ns_commit", rc);
    for (size_t r = 0; r < c->n_pages; r++)
        sb_page_unref(c->pages[r]);
    return t1 - t0;
}

static uint64_t bank_put_once(void *p)
{
    commit_ctx *c = p;
    fresh_sequence(c);
    size_t stored = 0;
    int rc = sb_ns_put(c->ns, c->tok, c->n, c->src, NULL, &stored);
    if (rc != SB_OK || stored != c->n)
        die("sb_ns_put", rc);
    return 0;
}

/* Baseline insert: hash + insert every block of a new sequence; past the
 * resident limit each new block evicts the oldest one (FIFO), as the bank's
 * full budget evicts one page per new page. */
static uint64_t base_insert_once(void *p)
{
    commit_ctx *c = p;
    fresh_sequence(c);
    size_t k = bl_insert(c->bl, c->tok, c->n, c->added);
    for (size_t i = 0; i < k; i++) {
        if (c->ring_n == c->resident_limit) {
            bl_delete(c->bl, &c->ring[c->ring_head]);
            c->ring_head = (c->ring_head + 1) % c->ring_cap;
            c->ring_n--;
        }
        c->ring[(c->ring_head + c->ring_n) % c->ring_cap] = c->added[i];
        c->ring_n++;
    }
    return 0;
}

/* The copy ceiling: the same bytes into the next slot of a pre-faulted
 * ring as large as the bank's budget, so the destination is as cold in the
 * caches as the recycled pages a put writes. */
static uint64_t memcpy_once(void *p)
{
    commit_ctx *c = p;
    size_t half = c->n * kv_bpt[0];
    uint8_t *d = c->dst + c->dst_next * 2 * half;
    if (++c->dst_next == c->dst_slots)
        c->dst_next = 0;
    memcpy(d, c->src[0], half);
    memcpy(d + half, c->src[1], half);
    return 0;
}

static void print_tput(const char *name, const bench_res *r, double inner, size_t tokens,
                       size_t pages, double bytes)
{
    double ns = inner > 0 ? inner : r->med;
    char gbs[32] = "-";
    if (bytes > 0)
        snprintf(gbs, sizeof gbs, "%.2f", bytes / ns);
    printf("%-40s %12.3f %12.1f %9s %7.0f%%\n", name, (double)tokens / ns * 1e3,
           (double)pages / ns * 1e6, gbs, r->spread * 100);
}

/* ---- section 2b: scatter/gather against memcpy ------------------------------------ */

#define SG_BLOCK 16u           /* the engine's block size, tokens */

typedef struct sg_ctx {
    sb_ns *ns;
    sb_match *m;               /* the stored sequence, matched */
    uint32_t *tok;             /* (n) */
    size_t n, n_pages, n_blocks;
    uint32_t *ids;             /* (n_blocks) the engine's shuffled block table */
    uint8_t *pool[2];          /* (n_blocks * SG_BLOCK * 6144) K and V pools */
    sb_block_table tab[2];
    void *flat[2];             /* (n * 6144) contiguous K and V */
    const uint8_t **page;      /* (n_pages) the bank's page data, pinned */
    uint8_t *ring;             /* (ring_slots * n * 12288) a cold destination */
    size_t ring_slots, ring_next;
    size_t off[2];             /* the tensors' offsets in a page */
    uint32_t seq;              /* fresh sequences put so far */
} sg_ctx;

static uint64_t sg_restore_blocks(void *p)
{
    sg_ctx *c = p;
    CHECK(sb_match_restore_blocks(c->m, 0, c->n, 0, 2, c->tab));
    return 0;
}

static uint64_t sg_restore_flat(void *p)
{
    sg_ctx *c = p;
    CHECK(sb_match_restore(c->m, c->n, c->flat, NULL));
    return 0;
}

/* The least a scatter does: the same bytes from the bank's pages into the
 * same blocks, one memcpy per page and tensor (page and block are both 16
 * tokens). */
static uint64_t sg_memcpy_out(void *p)
{
    sg_ctx *c = p;
    size_t bytes = SG_BLOCK * (size_t)kv_bpt[0];
    for (size_t r = 0; r < c->n_pages; r++)
        for (int t = 0; t < 2; t++)
            memcpy(c->pool[t] + (size_t)c->ids[r] * bytes, c->page[r] + c->off[t], bytes);
    return 0;
}

/* The put's ceiling: the same bytes from the same blocks into the next
 * slot of a pre-faulted ring as large as the budget (as cold as the
 * recycled pages a put writes), one memcpy per block and tensor. */
static uint64_t sg_memcpy_in(void *p)
{
    sg_ctx *c = p;
    size_t bytes = SG_BLOCK * (size_t)kv_bpt[0];
    uint8_t *d = c->ring + c->ring_next * c->n * KV_BYTES_PER_TOKEN;
    if (++c->ring_next == c->ring_slots)
        c->ring_next = 0;
    for (size_t r = 0; r < c->n_blocks; r++)
        for (int t = 0; t < 2; t++)
            memcpy(d + (2 * r + (size_t)t) * bytes, c->pool[t] + (size_t)c->ids[r] * bytes, bytes);
    return 0;
}

static uint64_t sg_put_blocks(void *p)
{
    sg_ctx *c = p;
    c->tok[0] = 0x90000000u + c->seq++;
    size_t stored = 0;
    CHECK(sb_ns_put_blocks(c->ns, c->tok, c->n, 0, c->tab, NULL, &stored, NULL));
    return 0;
}

/* The same put as a layered one, a tensor per call (K, then V), as an
 * engine saves each layer's KV when it finishes. */
static uint64_t sg_put_layers(void *p)
{
    sg_ctx *c = p;
    c->tok[0] = 0x90000000u + c->seq++;
    sb_put *put = NULL;
    CHECK(sb_ns_put_begin(c->ns, c->tok, c->n, 0, &put));
    for (uint32_t t = 0; t < 2; t++)
        CHECK(sb_put_tensors(put, t, 1, &c->tab[t]));
    size_t stored = 0;
    CHECK(sb_put_finish(put, NULL, &stored, NULL));
    return 0;
}

static uint64_t sg_put_flat(void *p)
{
    sg_ctx *c = p;
    c->tok[0] = 0x90000000u + c->seq++;
    size_t stored = 0;
    CHECK(sb_ns_put(c->ns, c->tok, c->n, (const void *const *)c->flat, NULL, &stored));
    return 0;
}

/* Scatter/gather of a 2,048-token KV sequence (12 KiB a token, 24 MiB)
 * between the bank and an engine's pool of 16-token blocks in shuffled
 * order, beside memcpy of the same bytes and the contiguous calls,
 * alternated. */
static void section_scatter(const bench_opts *o)
{
    sg_ctx c = { .n = o->quick ? 256 : 2048 };
    c.n_pages = c.n / 16;
    c.n_blocks = c.n / SG_BLOCK;
    sb_store *st = bank_open(1ull << 30);
    c.ns = bank_ns(st, 16, 2, kv_bpt);
    c.tok = xmalloc(c.n * sizeof *c.tok);
    c.ids = xmalloc(c.n_blocks * sizeof *c.ids);
    c.page = xmalloc(c.n_pages * sizeof *c.page);
    uint64_t rng = 0x5CA77E4u;
    fill_tokens(&rng, c.tok, c.n);
    for (size_t i = 0; i < c.n_blocks; i++)
        c.ids[i] = (uint32_t)i;
    for (size_t i = c.n_blocks - 1; i > 0; i--) {
        size_t j = rng_next(&rng) % (i + 1);
        uint32_t v = c.ids[i];
        c.ids[i] = c.ids[j];
        c.ids[j] = v;
    }
    for (int t = 0; t < 2; t++) {
        c.pool[t] = xmalloc(c.n_blocks * SG_BLOCK * (size_t)kv_bpt[t]);
        c.flat[t] = xmalloc(c.n * (size_t)kv_bpt[t]);
        for (size_t i = 0; i < c.n * kv_bpt[t]; i++) /* faulted in, not zero pages */
            c.pool[t][i] = ((uint8_t *)c.flat[t])[i] = (uint8_t)(i * 131 + (size_t)t);
        c.tab[t] = (sb_block_table){ .base = c.pool[t], .block_ids = c.ids,
                                     .block_tokens = SG_BLOCK,
                                     .block_stride = SG_BLOCK * (size_t)kv_bpt[t] };
        c.off[t] = sb_ns_tensor_offset(c.ns, (uint32_t)t);
    }
    CHECK(sb_ns_prefault(c.ns, (1ull << 30) / (16 * KV_BYTES_PER_TOKEN), NULL));
    c.ring_slots = (1ull << 30) / (c.n * KV_BYTES_PER_TOKEN);
    c.ring = xmalloc(c.ring_slots * c.n * KV_BYTES_PER_TOKEN);
    memset(c.ring, 1, c.ring_slots * c.n * KV_BYTES_PER_TOKEN);
    CHECK(sb_ns_put_blocks(c.ns, c.tok, c.n, 0, c.tab, NULL, NULL, NULL));
    CHECK(sb_ns_match(c.ns, c.tok, c.n, &c.m));
    sb_page **pg = xmalloc(c.n_pages * sizeof *pg);
    CHECK(sb_match_pages(c.m, 0, c.n_pages, pg));
    for (size_t r = 0; r < c.n_pages; r++)
        c.page[r] = sb_page_data(pg[r]);
    /* The round trip is exact before anything is timed. */
    memset(c.flat[0], 0, c.n * kv_bpt[0]);
    CHECK(sb_match_restore(c.m, c.n, c.flat, NULL));
    for (size_t q = 0; q < c.n; q++)
        if (memcmp((uint8_t *)c.flat[0] + q * kv_bpt[0],
                   c.pool[0] + ((size_t)c.ids[q / SG_BLOCK] * SG_BLOCK + q % SG_BLOCK) * kv_bpt[0],
                   kv_bpt[0])) {
            fprintf(stderr, "bench_index: scatter/gather round trip differs at %zu\n", q);
            exit(1);
        }

    double bytes = (double)c.n * KV_BYTES_PER_TOKEN;
    bench_res rb, rm, rf, pb, pm, pf, pl, plm;
    bench_pair(o, sg_restore_blocks, &c, &rb, sg_memcpy_out, &c, &rm);
    bench_pair(o, sg_restore_flat, &c, &rf, NULL, NULL, NULL);
    bench_pair(o, sg_put_blocks, &c, &pb, sg_memcpy_in, &c, &pm);
    bench_pair(o, sg_put_flat, &c, &pf, NULL, NULL, NULL);
    bench_pair(o, sg_put_layers, &c, &pl, sg_memcpy_in, &c, &plm);
    printf("\n== 2b. Scatter/gather: %zu tokens of K and V (%.0f MiB) and an engine's pool of "
           "%u-token blocks in shuffled order ==\n", c.n, bytes / (1 << 20), SG_BLOCK);
    printf("restore: the match resident; memcpy = the same bytes from the bank's pages into "
           "the same blocks.\nput: a new sequence each time under a 1 GiB budget (its pages "
           "recycled once full); memcpy = the same bytes from the same blocks into a\n"
           "pre-faulted ring as large as the budget; the layered put (sb_ns_put_begin,\n"
           "sb_put_tensors a tensor at a time, sb_put_finish) against its own memcpy run.\n"
           "vs memcpy: time ratio to its memcpy row.\n\n");
    printf("%-40s %9s %9s %s\n", "call", "GiB/s", "vs memcpy", "spread");
    const struct { const char *name; const bench_res *r, *ref; } rows[] = {
        { "sb_match_restore_blocks (pool)", &rb, &rm }, { "memcpy pages -> blocks", &rm, &rm },
        { "sb_match_restore (contiguous)", &rf, &rm }, { "sb_ns_put_blocks (pool)", &pb, &pm },
        { "sb_put_tensors, a tensor a call (pool)", &pl, &plm },
        { "memcpy blocks -> cold ring", &pm, &pm }, { "sb_ns_put (contiguous)", &pf, &pm },
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        double g = bytes / rows[i].r->med * 1e9 / (1 << 30);
        printf("%-40s %9.2f %8.2fx %5.0f%%\n", rows[i].name, g, rows[i].ref->med / rows[i].r->med,
               rows[i].r->spread * 100);
    }
    double ratio = rm.med / rb.med, pratio = pm.med / pb.med;
    printf("\nGOAL: scatter restore >= 0.9 of memcpy: %.2f -- %s\n", ratio,
           ratio >= 0.9 ? "MET" : "MISSED");
    printf("GOAL: gather put >= 0.9 of memcpy into a cold ring: %.2f -- %s\n", pratio,
           pratio >= 0.9 ? "MET" : "MISSED");
    for (size_t r = 0; r < c.n_pages; r++)
        sb_page_unref(pg[r]);
    free(pg);
    sb_match_release(c.m);
    sb_ns_close(c.ns);
    CHECK(sb_store_close(st));
    for (int t = 0; t < 2; t++) {
        free(c.pool[t]);
        free(c.flat[t]);
    }
    free(c.ring);
    free(c.page);
    free(c.ids);
    free(c.tok);
}

static void section_commit(const bench_opts *o)
{
    uint32_t pt = o->page_tokens;
    size_t n = o->commit_tokens, n_pages = (n + pt - 1) / pt;
    uint64_t page_bytes_est = (uint64_t)pt * KV_BYTES_PER_TOKEN;
    printf("\n== 2. Commit throughput (page_tokens %u) ==\n", pt);
    if (page_bytes_est > SB_PAGE_BYTES_MAX) {
        printf("skipped: a page of %u tokens x %u bytes exceeds SB_PAGE_BYTES_MAX\n", pt,
               KV_BYTES_PER_TOKEN);
        return;
    }
    /* The budget holds at least 8 sequences. */
    uint64_t budget = o->commit_budget;
    if (budget < 8 * n_pages * page_bytes_est)
        budget = 8 * n_pages * page_bytes_est;

    uint64_t rng = 0xBEEFu;
    commit_ctx c;
    memset(&c, 0, sizeof c);
    c.n = n;
    c.n_pages = n_pages;
    c.tok = xmalloc(n * sizeof *c.tok);
    fill_tokens(&rng, c.tok, n);
    c.pages = xcalloc(n_pages, sizeof *c.pages);
    uint8_t *src = xmalloc(n * (size_t)KV_BYTES_PER_TOKEN);
    for (size_t i = 0; i < n * (size_t)KV_BYTES_PER_TOKEN; i += 8) {
        uint64_t v = rng_next(&rng);
        memcpy(src + i, &v, 8);
    }
    c.src[0] = src;
    c.src[1] = src + n * (size_t)kv_bpt[0];

    sb_store *st = bank_open(budget);
    c.ns = bank_ns(st, pt, 2, kv_bpt);
    sb_ns_info info;
    CHECK(sb_ns_get_info(c.ns, &info));
    size_t budget_pages = (size_t)(budget / info.page_bytes);
    printf("layout: K, V of %u bytes/token each (%u bytes/token), page %zu bytes; "
           "sequences of %zu tokens (%zu pages);\n"
           "RAM budget %.0f MiB = %zu pages, filled before timing: every new page "
           "evicts an old one.\n\n",
           kv_bpt[0], KV_BYTES_PER_TOKEN, info.page_bytes, n, n_pages,
           (double)budget / (1 << 20), budget_pages);

    /* Fill the budget so the timed phase is the steady state. */
    sb_stats s;
    do {
        bank_commit_once(&c);
        CHECK(sb_store_stats(st, &s));
    } while (s.evictions == 0);
    bench_res zc, zc_dummy;
    bench_pair(o, bank_commit_once, &c, &zc, NULL, NULL, &zc_dummy);

    /* Copy mode in a fresh store, filled the same way. */
    sb_ns_close(c.ns);
    CHECK(sb_store_close(st));
    st = bank_open(budget);
    c.ns = bank_ns(st, pt, 2, kv_bpt);
    do {
        bank_put_once(&c);
        CHECK(sb_store_stats(st, &s));
    } while (s.evictions == 0);
    c.dst_slots = (size_t)(budget / (n * (uint64_t)KV_BYTES_PER_TOKEN));
    c.dst = xmalloc(c.dst_slots * n * (size_t)KV_BYTES_PER_TOKEN);
    memset(c.dst, 1, c.dst_slots * n * (size_t)KV_BYTES_PER_TOKEN); /* fault it in */
    bench_res put, cpy;
    bench_pair(o, bank_put_once, &c, &put, memcpy_once, &c, &cpy);
    sb_ns_close(c.ns);
    CHECK(sb_store_close(st));
    c.ns = NULL;

    /* Baseline: the same number of resident blocks. */
    bl_table bl;
    bl_init(&bl, pt);
    c.bl = &bl;
    c.resident_limit = budget_pages;
    c.ring_cap = budget_pages + n_pages + 1;
    c.ring = xmalloc(c.ring_cap * sizeof *c.ring);
    c.added = xmalloc(n_pages * sizeof *c.added);
    while (c.ring_n < c.resident_limit)
        base_insert_once(&c);
    bench_res bins, bins_dummy;
    bench_pair(o, base_insert_once, &c, &bins, NULL, NULL, &bins_dummy);

    size_t full_pages = n / pt; /* the baseline caches full blocks only */
    double kv_bytes = (double)n * KV_BYTES_PER_TOKEN;
    printf("%-40s %12s %12s %9s %8s\n", "operation", "Mtokens/s", "kpages/s", "GB/s",
           "spread");
    print_tput("snapbank alloc+commit+unref (zero-copy)", &zc, 0, n, n_pages, 0);
    print_tput("  of which sb_ns_commit alone", &zc, zc.inner_med, n, n_pages, 0);
    print_tput("baseline hash+insert+evict per block", &bins, 0, full_pages * pt,
               full_pages, 0);
    print_tput("snapbank sb_ns_put (copy mode)", &put, 0, n, n_pages, kv_bytes);
    print_tput("memcpy, same bytes, cold ring (ceiling)", &cpy, 0, n, n_pages, kv_bytes);
    printf("\ntime ratios (>1: the first is slower): baseline insert / sb_ns_commit "
           "%.2fx; zero-copy cycle / baseline insert %.2fx; put / memcpy %.2fx\n",
           bins.med / zc.inner_med, zc.med / bins.med, put.med / cpy.med);
    printf("(the zero-copy cycle includes the evictions that make room; sb_ns_commit "
           "alone does not; the baseline includes one FIFO eviction per new block;\n"
           " the pages' KV bytes are not written, as a runtime's forward pass would)\n");
    printf("per sequence: zero-copy cycle %.1f us (commit %.1f us), put %.1f us, "
           "memcpy %.1f us, baseline %.1f us\n",
           zc.med / 1000, zc.inner_med / 1000, put.med / 1000, cpy.med / 1000,
           bins.med / 1000);

    bl_free(&bl);
    free(c.ring);
    free(c.added);
    free(c.dst);
    free(src);
    free(c.pages);
    free(c.tok);
}

/* ---- section 3: index bytes per cached token ------------------------------------------- */

typedef struct mem_row {
    const char *name;
    uint64_t bank_bytes, bank_tokens, bank_nodes;
    uint64_t base_bytes, base_tokens, base_cap, base_n;
} mem_row;

static void mem_finish(sb_store *st, bl_table *bl, mem_row *r)
{
    sb_stats s;
    CHECK(sb_store_check(st));
    CHECK(sb_store_stats(st, &s));
    r->bank_bytes = s.index_bytes;
    r->bank_tokens = s.index_tokens;
    r->bank_nodes = s.index_nodes;
    r->base_bytes = bl_table_bytes(bl);
    r->base_tokens = (uint64_t)bl->n * bl->pt;
    r->base_cap = bl->cap;
    r->base_n = bl->n;
}

static void print_mem_row(const mem_row *r)
{
    double b = (double)r->bank_bytes / (double)r->bank_tokens;
    double l = (double)r->base_bytes / (double)r->base_tokens;
    printf("%-34s %9" PRIu64 " %7" PRIu64 " %8.2f %9" PRIu64 " %8.2f %5.0f%% %8.2fx\n",
           r->name, r->bank_tokens, r->bank_nodes, b, r->base_tokens, l,
           100.0 * (double)r->base_n / (double)r->base_cap, b / l);
}

/* A bank and a baseline table fed the same sequences, for section 3. */
typedef struct mem_pair {
    sb_store *st;
    sb_ns *ns;
    bl_table bl;
} mem_pair;

static void mem_open(mem_pair *mp, uint32_t pt)
{
    mp->st = bank_open(64ull << 30);
    mp->ns = bank_ns(mp->st, pt, 1, tiny_bpt);
    bl_init(&mp->bl, pt);
}

static void mem_add(mem_pair *mp, const uint32_t *tok, size_t n, const void *zeros)
{
    bank_put(mp->ns, tok, n, zeros);
    bl_insert(&mp->bl, tok, n, NULL);
}

/* Measure both into row (named name), then free both. */
static void mem_close(mem_pair *mp, const char *name, mem_row *row)
{
    row->name = name;
    mem_finish(mp->st, &mp->bl, row);
    bl_free(&mp->bl);
    sb_ns_close(mp->ns);
    CHECK(sb_store_close(mp->st));
}

static void section_memory(const bench_opts *o)
{
    uint32_t pt = o->page_tokens;
    size_t longest = o->long_tokens;
    size_t sys = o->system_tokens, own = o->session_tokens;
    size_t zero_len = longest > sys + own ? longest : sys + own;
    void *zeros = xcalloc(zero_len, 4);
    uint64_t rng = 0xA11CEu;
    mem_row rows[4];
    char name_long[64], name_turns[64], name_sess[64], name_short[64];

    printf("\n== 3. Index bytes per cached token (page_tokens %u) ==\n", pt);
    printf("snapbank: stats.index_bytes / stats.index_tokens (radix nodes, token and "
           "page arrays, with growth slack).\n"
           "baseline: %zu-byte entries x table capacity / cached tokens (full blocks "
           "only; grows x2 above 3/4 load).\n"
           "Neither counts per-page metadata (sb_page structs / block pool).\n\n",
           sizeof(bl_entry));

    /* a. one long sequence, committed at once */
    uint32_t *tok = xmalloc(longest * sizeof *tok);
    fill_tokens(&rng, tok, longest);
    mem_pair mp;
    mem_open(&mp, pt);
    mem_add(&mp, tok, longest, zeros);
    snprintf(name_long, sizeof name_long, "one sequence of %zu, one put", longest);
    mem_close(&mp, name_long, &rows[0]);

    /* b. the same sequence grown turn by turn (a conversation) */
    mem_open(&mp, pt);
    for (size_t end = o->turn_tokens;; end += o->turn_tokens) {
        if (end > longest)
            end = longest;
        mem_add(&mp, tok, end, zeros);
        if (end == longest)
            break;
    }
    snprintf(name_turns, sizeof name_turns, "same, grown in %u-token turns", o->turn_tokens);
    mem_close(&mp, name_turns, &rows[1]);

    /* c. sessions sharing a system prompt */
    size_t n = sys + own;
    uint32_t *seq = xmalloc((n > o->short_tokens ? n : o->short_tokens) * sizeof *seq);
    mem_open(&mp, pt);
    fill_tokens(&rng, seq, sys);
    for (uint32_t s = 0; s < o->n_sessions; s++) {
        fill_tokens(&rng, seq + sys, own);
        mem_add(&mp, seq, n, zeros);
    }
    snprintf(name_sess, sizeof name_sess, "%u sessions, %zu shared + %zu own", o->n_sessions,
             sys, own);
    mem_close(&mp, name_sess, &rows[2]);

    /* d. many short independent sequences */
    mem_open(&mp, pt);
    for (uint32_t s = 0; s < o->n_short; s++) {
        fill_tokens(&rng, seq, o->short_tokens);
        mem_add(&mp, seq, o->short_tokens, zeros);
    }
    snprintf(name_short, sizeof name_short, "%u independent x %u tokens", o->n_short,
             o->short_tokens);
    mem_close(&mp, name_short, &rows[3]);
    free(seq);

    printf("%-34s %9s %7s %8s %9s %8s %6s %9s\n", "workload", "sb tokens", "nodes",
           "sb B/tok", "base tok", "base B/t", "load", "sb/base");
    for (int i = 0; i < 4; i++)
        print_mem_row(&rows[i]);
    printf("(baseline at 100%% load would be %.3f B/token: %zu bytes per %u-token block;"
           " snapbank keeps every token id, 4 B/token, to compare tokens exactly)\n",
           (double)sizeof(bl_entry) / pt, sizeof(bl_entry), pt);
    free(tok);
    free(zeros);
}

/* ---- machine and main ------------------------------------------------------------------- */

static void print_machine(const bench_opts *o)
{
    char line[512], model[256] = "unknown", cache[64] = "?";
    unsigned cpus = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        while (fgets(line, sizeof line, f)) {
            char *colon = strchr(line, ':');
            if (!colon)
                continue;
            char *v = colon + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            v[strcspn(v, "\n")] = 0;
            if (strncmp(line, "processor", 9) == 0)
                cpus++;
            else if (strncmp(line, "model name", 10) == 0 && cpus == 1)
                snprintf(model, sizeof model, "%s", v);
            else if (strncmp(line, "cache size", 10) == 0 && cpus == 1)
                snprintf(cache, sizeof cache, "%s", v);
        }
        fclose(f);
    }
    printf("bench_index -- snapbank %u.%u.%u (library %u)\n", SB_VERSION_MAJOR,
           SB_VERSION_MINOR, SB_VERSION_PATCH, sb_version());
    printf("machine: %s, %u logical CPUs online, cache %s, load average %.2f at start\n",
           model, cpus, cache, load_average());
    printf("build: %s%s, heap malloc %s, compiler %s\n", SB_BENCH_BUILD_TYPE,
           SB_BENCH_SANITIZE ? " + ASan/UBSan" : "",
           SB_BENCH_JEMALLOC ? "jemalloc" : "libc", __VERSION__);
    printf("parameters: page_tokens %u, reps %u x >= %.1f ms, max prompt %zu tokens, "
           "%u sessions (%u + %u tokens), commit %u tokens, %s\n",
           o->page_tokens, o->reps, (double)o->min_rep_ns / 1e6, o->max_tokens,
           o->n_sessions, o->system_tokens, o->session_tokens, o->commit_tokens,
           o->quick ? "QUICK (smoke run, numbers not meaningful)" : "full run");
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bench_index [options]\n"
            "  --page-tokens N   tokens per page and per baseline block (default 16)\n"
            "  --quick           sub-second smoke run (small sizes, short reps)\n"
            "  --section S       run section S only (1 match, 2 commit, 3 memory);\n"
            "                    repeatable\n"
            "  --reps N          timed repetitions per point (default 5)\n"
            "  --min-ms N        shortest repetition, ms (default 50)\n"
            "  --max-tokens N    longest prompt of section 1 (default 131072)\n"
            "  --sessions N      sessions sharing the system prompt (default 1000)\n"
            "  --help            this text\n");
}

static bool parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    char *end;
    if (!s || !*s)
        return false;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

int main(int argc, char **argv)
{
    bench_opts o = {
        .page_tokens = 16, .reps = 5, .min_rep_ns = 50000000ull, .max_tokens = 131072,
        .n_sessions = 1000, .system_tokens = 2048, .session_tokens = 512,
        .commit_tokens = 1024, .commit_budget = 512ull << 20,
        .n_short = 4000, .short_tokens = 128, .long_tokens = 131072, .turn_tokens = 512,
    };
    unsigned sections = 0;
    bool set_reps = false, set_min = false, set_max = false, set_sess = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t x;
        if (!strcmp(a, "--quick")) {
            o.quick = true;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--page-tokens") && parse_u64(v, 1, SB_PAGE_TOKENS_MAX, &x)) {
            o.page_tokens = (uint32_t)x;
            i++;
        } else if (!strcmp(a, "--section") && parse_u64(v, 1, 3, &x)) {
            sections |= 1u << (x - 1);
            i++;
        } else if (!strcmp(a, "--reps") && parse_u64(v, 1, REPS_MAX, &x)) {
            o.reps = (uint32_t)x;
            set_reps = true;
            i++;
        } else if (!strcmp(a, "--min-ms") && parse_u64(v, 1, 60000, &x)) {
            o.min_rep_ns = x * 1000000ull;
            set_min = true;
            i++;
        } else if (!strcmp(a, "--max-tokens") && parse_u64(v, 16, 1u << 24, &x)) {
            o.max_tokens = (size_t)x;
            set_max = true;
            i++;
        } else if (!strcmp(a, "--sessions") && parse_u64(v, 1, 1000000, &x)) {
            o.n_sessions = (uint32_t)x;
            set_sess = true;
            i++;
        } else {
            fprintf(stderr, "bench_index: bad argument '%s'%s%s\n", a, v ? " " : "",
                    v ? v : "");
            usage(stderr);
            return 2;
        }
    }
    o.sections = sections ? sections : 7u;
    if (o.quick) {
        if (!set_reps)
            o.reps = 2;
        if (!set_min)
            o.min_rep_ns = 1000000ull;
        if (!set_max)
            o.max_tokens = 4096;
        if (!set_sess)
            o.n_sessions = 20;
        o.commit_tokens = 256;
        o.commit_budget = 8ull << 20;
        o.n_short = 200;
        o.long_tokens = 8192;
    }

    print_machine(&o);
    uint64_t t0 = now_ns();
    if (o.sections & 1u) {
        section_match(&o);
        section_lookup(&o);
    }
    if (o.sections & 2u) {
        section_commit(&o);
        section_scatter(&o);
    }
    if (o.sections & 4u)
        section_memory(&o);
    printf("\ntotal run time %.1f s, load average %.2f at the end\n",
           (double)(now_ns() - t0) / 1e9, load_average());
    return 0;
}
