/* Description: errors. Every error that snapbank.h documents for a call and
 * that a RAM-only store can reach is triggered here, and every failing call
 * is shown to change nothing: sb_store_check passes, the store's gauges
 * (ram_bytes, ram_pages, indexed_pages, points, pins, namespaces,
 * index_nodes and their neighbours) and each namespace's figures are as
 * before, nothing was evicted, and every probe prefix restores the same
 * length with the same bytes (and the same point state) as before.
 *
 * Then allocation failure: each call that allocates is run with its 1st,
 * 2nd, 3rd, ... allocation failing (sb_store_fault_alloc, and
 * sb_config.fault_alloc_nth for sb_store_open) until it succeeds. Every
 * failing attempt returns SB_ERR_NOMEM and changes nothing; the attempt that
 * succeeds does what the call promises. The budgets are ample, so no attempt
 * may evict anything. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

/* ---- the world: a store, three namespaces, stored sequences, probes ------- */

#define W_NS 3
#define W_PROBES 64
#define W_TOK 64

/* A: plain pages with optional point states. B: a recurrent layout (a
 * restore needs a point at exactly L). C: one token per page, no points. */
static const tu_layout LAY_A = { .page_tokens = 4, .n_tensors = 2, .bpt = { 8, 24 },
                                 .point_bytes = 32, .model = "errors-a" };
static const tu_layout LAY_B = { .page_tokens = 3, .n_tensors = 1, .bpt = { 16 },
                                 .point_bytes = 24, .flags = SB_LAYOUT_POINT_REQUIRED,
                                 .model = "errors-b" };
static const tu_layout LAY_C = { .page_tokens = 1, .n_tensors = 3, .bpt = { 4, 12, 4 },
                                 .model = "errors-c" };
/* Same page geometry as A, another scope (for foreign pages). */
#define SCOPE_A "scope-a"
#define SCOPE_A2 "scope-a2"

enum { NA = 0, NB = 1, NC = 2 };

typedef struct probe {
    int ns;                 /* index into world.ns */
    size_t n;
    uint32_t tok[W_TOK];
} probe;

typedef struct world {
    sb_store *st;
    sb_ns *ns[W_NS];
    const tu_layout *lay[W_NS];
    uint64_t clock_ns;      /* the store clock (fake) */
    size_t n_probes;
    probe probes[W_PROBES];
    /* Sequences of the standard content (world_fill). */
    uint32_t a1[W_TOK], a2[W_TOK], a3[W_TOK], b1[W_TOK], c1[W_TOK];
} world;

/* What "nothing changed" compares. */
typedef struct snap {
    sb_stats s;
    sb_ns_info info[W_NS];
    size_t L[W_PROBES];
    int has_point[W_PROBES];
} snap;

static uint64_t fake_clock(void *ctx)
{
    return *(const uint64_t *)ctx;
}

static world *world_open(const sb_config *cfg_in)
{
    world *w = calloc(1, sizeof *w);
    assert_non_null(w);
    sb_config cfg;
    if (cfg_in)
        cfg = *cfg_in;
    else
        sb_config_default(&cfg);
    w->clock_ns = 1000000000ull;
    cfg.clock_ns = fake_clock;
    cfg.clock_ctx = &w->clock_ns;
    assert_int_equal(sb_store_open(&cfg, &w->st), SB_OK);
    w->lay[NA] = &LAY_A;
    w->lay[NB] = &LAY_B;
    w->lay[NC] = &LAY_C;
    w->ns[NA] = tu_ns(w->st, &LAY_A, SCOPE_A);
    w->ns[NB] = tu_ns(w->st, &LAY_B, "scope-b");
    w->ns[NC] = tu_ns(w->st, &LAY_C, "scope-c");
    return w;
}

static void world_free(world *w)
{
    for (int i = 0; i < W_NS; i++)
        sb_ns_close(w->ns[i]);
    assert_int_equal(sb_store_close(w->st), SB_OK);
    free(w);
}

static void world_close(world *w)
{
    tu_check(w->st);
    world_free(w);
}

static void w_probe(world *w, int ns, const uint32_t *tok, size_t n)
{
    assert_true(w->n_probes < W_PROBES);
    assert_true(n > 0 && n <= W_TOK);
    probe *p = &w->probes[w->n_probes++];
    p->ns = ns;
    p->n = n;
    memcpy(p->tok, tok, n * sizeof *tok);
}

/* Match tokens[0, n), restore L tokens (and the point when there is one)
 * and compare with the synthetic state. Returns L. */
static size_t verify_match(sb_ns *ns, const tu_layout *l, const uint32_t *tok, size_t n,
                           int *has_point)
{
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, tok, n, &m), SB_OK);
    assert_non_null(m);
    sb_match_info info;
    assert_int_equal(sb_match_get_info(m, &info), SB_OK);
    size_t L = info.n_tokens;
    assert_true(L <= n);
    assert_true(info.n_matched_tokens >= L);
    assert_int_equal(info.n_pages, (L + l->page_tokens - 1) / l->page_tokens);
    void **bufs = tu_bufs(l, L ? L : 1);
    void *pbuf = NULL;
    if (info.has_point) {
        pbuf = malloc(l->point_bytes);
        assert_non_null(pbuf);
    }
    assert_int_equal(sb_match_restore(m, L, bufs, pbuf), SB_OK);
    assert_true(tu_state_equal(l, tok, L, bufs));
    if (info.has_point) {
        void *want = tu_point(l, tok, L);
        assert_memory_equal(pbuf, want, l->point_bytes);
        assert_non_null(sb_match_point(m));
        assert_memory_equal(sb_match_point(m), want, l->point_bytes);
        free(want);
    } else {
        assert_null(sb_match_point(m));
    }
    free(pbuf);
    tu_free_state(l, bufs);
    sb_match_release(m);
    if (has_point)
        *has_point = info.has_point;
    return L;
}

static size_t w_len(world *w, int ns, const uint32_t *tok, size_t n)
{
    return verify_match(w->ns[ns], w->lay[ns], tok, n, NULL);
}

static void w_snap(world *w, snap *s)
{
    memset(s, 0, sizeof *s);
    assert_int_equal(sb_store_stats(w->st, &s->s), SB_OK);
    for (int i = 0; i < W_NS; i++)
        assert_int_equal(sb_ns_get_info(w->ns[i], &s->info[i]), SB_OK);
    for (size_t i = 0; i < w->n_probes; i++) {
        const probe *p = &w->probes[i];
        s->L[i] = verify_match(w->ns[p->ns], w->lay[p->ns], p->tok, p->n, &s->has_point[i]);
    }
}

#define SAME_FIELD(what, a, b)                                                        \
    do {                                                                              \
        if ((a) != (b)) {                                                             \
            print_error("%s changed: %llu before, %llu after\n", what,                \
                        (unsigned long long)(b), (unsigned long long)(a));            \
            fail();                                                                   \
        }                                                                             \
    } while (0)
#define SAME_GAUGE(f) SAME_FIELD(#f, now.s.f, before->s.f)

/* Disarm the fault hook, then assert that nothing changed since *before. */
static void w_same(world *w, const snap *before)
{
    assert_int_equal(sb_store_fault_alloc(w->st, 0), SB_OK);
    tu_check(w->st);
    snap now;
    w_snap(w, &now);
    SAME_GAUGE(ram_bytes);
    SAME_GAUGE(ram_pages);
    SAME_GAUGE(indexed_pages);
    SAME_GAUGE(indexed_bytes);
    SAME_GAUGE(pinned_pages);
    SAME_GAUGE(points);
    SAME_GAUGE(point_bytes);
    SAME_GAUGE(pins);
    SAME_GAUGE(namespaces);
    SAME_GAUGE(index_tokens);
    SAME_GAUGE(index_nodes);
    SAME_GAUGE(evictions);
    SAME_GAUGE(point_evictions);
    for (int i = 0; i < W_NS; i++) {
        SAME_FIELD("ns ram_bytes", now.info[i].ram_bytes, before->info[i].ram_bytes);
        SAME_FIELD("ns indexed_pages", now.info[i].indexed_pages,
                   before->info[i].indexed_pages);
        SAME_FIELD("ns index_tokens", now.info[i].index_tokens, before->info[i].index_tokens);
    }
    for (size_t i = 0; i < w->n_probes; i++) {
        SAME_FIELD("probe restorable length", now.L[i], before->L[i]);
        SAME_FIELD("probe point state", now.has_point[i], before->has_point[i]);
    }
}

/* The standard content:
 *   A: a1 (30 tokens, point at 30), a2 (24 tokens, shares a1[0, 10)),
 *      a3 (7 tokens, own first token: a leaf with a partial page)
 *   B: b1 with points at 9 and 20
 *   C: c1 (12 tokens)
 * and probes around all of them. */
static void world_fill(world *w)
{
    uint64_t rng = 0x5eedull;
    tu_tokens(&rng, w->a1, W_TOK, 5);
    memcpy(w->a2, w->a1, 10 * sizeof *w->a2);
    tu_tokens(&rng, w->a2 + 10, W_TOK - 10, 5);
    w->a2[10] = (w->a1[10] + 1) % 5;
    tu_tokens(&rng, w->a3, W_TOK, 5);
    w->a3[0] = 7;
    tu_tokens(&rng, w->b1, W_TOK, 5);
    tu_tokens(&rng, w->c1, W_TOK, 5);

    tu_put(w->ns[NA], &LAY_A, w->a1, 30, true, SB_OK);
    tu_put(w->ns[NA], &LAY_A, w->a2, 24, false, SB_OK);
    tu_put(w->ns[NA], &LAY_A, w->a3, 7, false, SB_OK);
    tu_put(w->ns[NB], &LAY_B, w->b1, 20, true, SB_OK);
    tu_put(w->ns[NB], &LAY_B, w->b1, 9, true, SB_OK);
    tu_put(w->ns[NC], &LAY_C, w->c1, 12, false, SB_OK);

    static const size_t a1n[] = { 30, 29, 15, 14, 6, 40 };
    static const size_t a2n[] = { 24, 11, 10, 40 };
    static const size_t a3n[] = { 7, 3, 20 };
    static const size_t b1n[] = { 20, 15, 12, 9, 8, 30 };
    static const size_t c1n[] = { 12, 5, 1, 20 };
    for (size_t i = 0; i < sizeof a1n / sizeof *a1n; i++)
        w_probe(w, NA, w->a1, a1n[i]);
    for (size_t i = 0; i < sizeof a2n / sizeof *a2n; i++)
        w_probe(w, NA, w->a2, a2n[i]);
    for (size_t i = 0; i < sizeof a3n / sizeof *a3n; i++)
        w_probe(w, NA, w->a3, a3n[i]);
    for (size_t i = 0; i < sizeof b1n / sizeof *b1n; i++)
        w_probe(w, NB, w->b1, b1n[i]);
    for (size_t i = 0; i < sizeof c1n / sizeof *c1n; i++)
        w_probe(w, NC, w->c1, c1n[i]);
    for (int k = 0; k < W_NS; k++) {
        uint32_t r[20];
        tu_tokens(&rng, r, 20, 5);
        w_probe(w, k, r, 20);
    }
    tu_check(w->st);
    /* The content is what it should be. */
    assert_int_equal(w_len(w, NA, w->a1, 40), 30);
    assert_int_equal(w_len(w, NA, w->a2, 40), 24);
    assert_int_equal(w_len(w, NB, w->b1, 15), 9);
    assert_int_equal(w_len(w, NB, w->b1, 30), 20);
    assert_int_equal(w_len(w, NC, w->c1, 20), 12);
}

static world *world_std(void)
{
    world *w = world_open(NULL);
    world_fill(w);
    return w;
}


/* Fresh pages of ns holding the synthetic state of tok[0, n). */
static void alloc_pages(sb_ns *ns, const tu_layout *l, const uint32_t *tok, size_t n,
                        sb_page **pages)
{
    size_t n_reg = (n + l->page_tokens - 1) / l->page_tokens;
    for (size_t r = 0; r < n_reg; r++)
        assert_int_equal(sb_ns_page_alloc(ns, &pages[r]), SB_OK);
    tu_fill_range(ns, l, tok, 0, n, pages);
}


/* ---- names -------------------------------------------------------------------- */

static void test_strerror_every_code(void **state)
{
    (void)state;
    const char *seen[21];
    for (int code = 0; code >= SB_ERR_NO_POINT; code--) {
        const char *s = sb_strerror(code);
        assert_non_null(s);
        assert_true(strlen(s) > 0);
        assert_string_not_equal(s, "unknown error");
        for (int j = 0; j < -code; j++)
            assert_string_not_equal(s, seen[j]);
        seen[-code] = s;
    }
    static const int unknown[] = { 1, 2, 100, SB_ERR_NO_POINT - 1, -100, INT_MIN, INT_MAX };
    for (size_t i = 0; i < sizeof unknown / sizeof *unknown; i++)
        assert_string_equal(sb_strerror(unknown[i]), "unknown error");
}

static void test_miss_names(void **state)
{
    (void)state;
    static const char *const names[SB_MISS__COUNT] = { "none", "no_prefix", "evicted",
                                                       "model_mismatch", "no_point",
                                                       "corrupt", "io" };
    for (int i = 0; i < SB_MISS__COUNT; i++)
        assert_string_equal(sb_miss_name(i), names[i]);
    static const int bad[] = { -1, SB_MISS__COUNT, 100, INT_MIN, INT_MAX };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_string_equal(sb_miss_name(bad[i]), "unknown");
}

/* ---- store ------------------------------------------------------------------------ */

static int open_rc(const sb_config *cfg)
{
    sb_store *st = (sb_store *)&st; /* not NULL: the call must clear it */
    int rc = sb_store_open(cfg, &st);
    if (rc == SB_OK) {
        tu_check(st);
        sb_store_close(st);
    } else {
        assert_null(st);
    }
    return rc;
}

static void test_store_open_inval(void **state)
{
    (void)state;
    sb_config cfg;
    sb_config_default(&cfg);
    sb_store *st = (sb_store *)&st;
    assert_int_equal(sb_store_open(NULL, &st), SB_ERR_INVAL);
    assert_null(st);
    assert_int_equal(sb_store_open(&cfg, NULL), SB_ERR_INVAL);

    sb_config c;
    c = cfg, c.ram_bytes = 0;
    assert_int_equal(open_rc(&c), SB_ERR_INVAL);
    c = cfg, c.ram_pages = 0;
    assert_int_equal(open_rc(&c), SB_ERR_INVAL);
    c = cfg, c.ns_ram_bytes = 0;
    assert_int_equal(open_rc(&c), SB_ERR_INVAL);
    c = cfg, c.reserved0 = 1;
    assert_int_equal(open_rc(&c), SB_ERR_INVAL);
    c = cfg, c.reserved1 = 0x80000000u;
    assert_int_equal(open_rc(&c), SB_ERR_INVAL);
    c = cfg, c.max_seq_tokens = 0;
    assert_int_equal(open_rc(&c), SB_ERR_INVAL);
    c = cfg, c.max_seq_tokens = 0x80000000u; /* 2^31 */
    assert_int_equal(open_rc(&c), SB_ERR_INVAL);
    c = cfg, c.max_seq_tokens = UINT32_MAX;
    assert_int_equal(open_rc(&c), SB_ERR_INVAL);
    /* The boundaries are accepted. */
    c = cfg, c.max_seq_tokens = 0x7fffffffu;
    assert_int_equal(open_rc(&c), SB_OK);
    c = cfg, c.max_seq_tokens = 1, c.ram_bytes = 1, c.ram_pages = 1, c.ns_ram_bytes = 1;
    assert_int_equal(open_rc(&c), SB_OK);
}

static void test_store_open_unsupported_dir(void **state)
{
    (void)state;
    char dir[128];
    snprintf(dir, sizeof dir, "/tmp/snapbank-test-errors-%ld", (long)getpid());
    struct stat sb;
    assert_int_equal(stat(dir, &sb), -1);
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.dir = dir;
    assert_int_equal(open_rc(&cfg), SB_ERR_UNSUPPORTED);
    /* Nothing changed: the directory was not created. */
    errno = 0;
    assert_int_equal(stat(dir, &sb), -1);
    assert_int_equal(errno, ENOENT);
    cfg.dir = "";
    assert_int_equal(open_rc(&cfg), SB_OK); /* "" means RAM only */
}

static void test_store_calls_inval(void **state)
{
    (void)state;
    world *w = world_std();
    snap before;
    w_snap(w, &before);
    sb_stats s;
    assert_int_equal(sb_store_fault_alloc(NULL, 1), SB_ERR_INVAL);
    assert_int_equal(sb_store_stats(NULL, &s), SB_ERR_INVAL);
    assert_int_equal(sb_store_stats(w->st, NULL), SB_ERR_INVAL);
    assert_int_equal(sb_store_check(NULL), SB_ERR_INVAL);
    assert_int_equal(sb_store_close(NULL), SB_OK);
    sb_ns_close(NULL);
    sb_match_release(NULL);
    sb_page_unref(NULL);
    assert_null(sb_page_data(NULL));
    assert_int_equal(sb_page_tokens(NULL), 0);
    assert_null(sb_match_point(NULL));
    w_same(w, &before);
    world_close(w);
}

/* ---- namespaces ------------------------------------------------------------------ */

static int ns_open_rc(world *w, const sb_layout *lay, const char *scope, size_t scope_bytes)
{
    sb_ns *ns = NULL;
    int rc = sb_ns_open(w->st, lay, scope, scope_bytes, &ns);
    if (rc == SB_OK) {
        assert_non_null(ns);
        sb_ns_close(ns);
    }
    return rc;
}

static sb_layout base_layout(const uint32_t *bpt, uint32_t n_tensors)
{
    return (sb_layout){ .model_id = "layout-model", .model_id_bytes = 12, .page_tokens = 16,
                        .n_tensors = n_tensors, .bytes_per_token = bpt };
}

static void test_ns_open_inval(void **state)
{
    (void)state;
    world *w = world_std();
    snap before;
    w_snap(w, &before);
    uint32_t bpt[2] = { 8, 8 };
    sb_layout lay = base_layout(bpt, 2);
    sb_ns *ns = NULL;
    assert_int_equal(sb_ns_open(NULL, &lay, "s", 1, &ns), SB_ERR_INVAL);
    assert_int_equal(sb_ns_open(w->st, NULL, "s", 1, &ns), SB_ERR_INVAL);
    assert_int_equal(sb_ns_open(w->st, &lay, "s", 1, NULL), SB_ERR_INVAL);
    assert_int_equal(sb_ns_open(w->st, &lay, NULL, 1, &ns), SB_ERR_INVAL);
    char *big = malloc(SB_SCOPE_MAX + 1);
    assert_non_null(big);
    memset(big, 's', SB_SCOPE_MAX + 1);
    assert_int_equal(ns_open_rc(w, &lay, big, SB_SCOPE_MAX + 1), SB_ERR_INVAL);
    w_same(w, &before);
    /* The boundaries: the longest scope, and the empty scope as NULL. */
    assert_int_equal(ns_open_rc(w, &lay, big, SB_SCOPE_MAX), SB_OK);
    assert_int_equal(ns_open_rc(w, &lay, NULL, 0), SB_OK);
    free(big);
    world_close(w);
}

static void test_ns_open_layout(void **state)
{
    (void)state;
    world *w = world_std();
    snap before;
    w_snap(w, &before);
    uint32_t bpt[2] = { 8, 8 };
    uint32_t bpt0[2] = { 8, 0 };
    sb_layout l;

    l = base_layout(bpt, 2), l.model_id = NULL;
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_ERR_LAYOUT);
    l = base_layout(bpt, 2), l.model_id_bytes = 0;
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_ERR_LAYOUT);
    char *id = calloc(1, SB_MODEL_ID_MAX + 1);
    assert_non_null(id);
    l = base_layout(bpt, 2), l.model_id = id, l.model_id_bytes = SB_MODEL_ID_MAX + 1;
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_ERR_LAYOUT);
    l = base_layout(bpt, 0);
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_ERR_LAYOUT);
    uint32_t *many = malloc((SB_TENSORS_MAX + 1) * sizeof *many);
    assert_non_null(many);
    for (uint32_t t = 0; t <= SB_TENSORS_MAX; t++)
        many[t] = 1;
    l = base_layout(many, SB_TENSORS_MAX + 1);
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_ERR_LAYOUT);
    l = base_layout(bpt0, 2); /* the second tensor has 0 bytes per token */
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_ERR_LAYOUT);
    l = base_layout(NULL, 2);
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_ERR_LAYOUT);
    l = base_layout(bpt, 2), l.flags = 2;
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_ERR_LAYOUT);
    l = base_layout(bpt, 2), l.flags = 0x80000000u | SB_LAYOUT_POINT_REQUIRED, l.point_bytes = 8;
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_ERR_LAYOUT);
    l = base_layout(bpt, 2), l.flags = SB_LAYOUT_POINT_REQUIRED, l.point_bytes = 0;
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_ERR_LAYOUT);
    l = base_layout(bpt, 2), l.point_bytes = SB_POINT_BYTES_MAX + 1;
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_ERR_LAYOUT);
    w_same(w, &before);

    /* Each boundary is accepted (no page or point is allocated at open). */
    l = base_layout(bpt, 2), l.model_id = id, l.model_id_bytes = SB_MODEL_ID_MAX;
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_OK);
    l = base_layout(many, SB_TENSORS_MAX);
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_OK);
    l = base_layout(bpt, 2), l.flags = SB_LAYOUT_POINT_REQUIRED,
    l.point_bytes = SB_POINT_BYTES_MAX;
    assert_int_equal(ns_open_rc(w, &l, "s2", 2), SB_OK);
    free(many);
    free(id);
    world_close(w);
}

static void test_ns_open_page_size(void **state)
{
    (void)state;
    world *w = world_std();
    snap before;
    w_snap(w, &before);
    uint32_t bpt[2] = { 8, 8 };
    sb_layout l;
    l = base_layout(bpt, 2), l.page_tokens = 0;
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_ERR_PAGE_SIZE);
    l = base_layout(bpt, 2), l.page_tokens = SB_PAGE_TOKENS_MAX + 1;
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_ERR_PAGE_SIZE);
    /* One tensor over SB_PAGE_BYTES_MAX by itself (64 KiB tokens x 4097 B). */
    uint32_t one[1] = { 4097 };
    l = base_layout(one, 1), l.page_tokens = SB_PAGE_TOKENS_MAX;
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_ERR_PAGE_SIZE);
    /* A huge per-token size with one token per page. */
    uint32_t huge[1] = { UINT32_MAX };
    l = base_layout(huge, 1), l.page_tokens = 1;
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_ERR_PAGE_SIZE);
    /* Two tensors, each under the limit, together over it by 64 KiB. */
    uint32_t two[2] = { 2048, 2048 + 1 };
    l = base_layout(two, 2), l.page_tokens = SB_PAGE_TOKENS_MAX;
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_ERR_PAGE_SIZE);
    w_same(w, &before);
    /* Exactly SB_PAGE_BYTES_MAX, and the largest page_tokens, are accepted. */
    uint32_t exact[1] = { 4096 };
    l = base_layout(exact, 1), l.page_tokens = SB_PAGE_TOKENS_MAX;
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_OK);
    uint32_t split[2] = { 2048, 2048 };
    l = base_layout(split, 2), l.page_tokens = SB_PAGE_TOKENS_MAX;
    assert_int_equal(ns_open_rc(w, &l, "s2", 2), SB_OK);
    world_close(w);
}

static void test_ns_open_layout_mismatch(void **state)
{
    (void)state;
    world *w = world_std();
    snap before;
    w_snap(w, &before);
    /* The identity and scope of namespace A with one layout field changed. */
    const char *model = LAY_A.model;
    uint32_t bpt[3] = { 8, 24, 8 };
    sb_layout a = { .model_id = model, .model_id_bytes = strlen(model), .page_tokens = 4,
                    .n_tensors = 2, .bytes_per_token = bpt, .point_bytes = 32 };
    sb_layout l;
    l = a, l.page_tokens = 8;
    assert_int_equal(ns_open_rc(w, &l, SCOPE_A, strlen(SCOPE_A)), SB_ERR_LAYOUT_MISMATCH);
    l = a, l.n_tensors = 3;
    assert_int_equal(ns_open_rc(w, &l, SCOPE_A, strlen(SCOPE_A)), SB_ERR_LAYOUT_MISMATCH);
    uint32_t bpt2[2] = { 8, 25 };
    l = a, l.bytes_per_token = bpt2;
    assert_int_equal(ns_open_rc(w, &l, SCOPE_A, strlen(SCOPE_A)), SB_ERR_LAYOUT_MISMATCH);
    l = a, l.point_bytes = 0;
    assert_int_equal(ns_open_rc(w, &l, SCOPE_A, strlen(SCOPE_A)), SB_ERR_LAYOUT_MISMATCH);
    l = a, l.point_bytes = 33;
    assert_int_equal(ns_open_rc(w, &l, SCOPE_A, strlen(SCOPE_A)), SB_ERR_LAYOUT_MISMATCH);
    l = a, l.flags = SB_LAYOUT_POINT_REQUIRED;
    assert_int_equal(ns_open_rc(w, &l, SCOPE_A, strlen(SCOPE_A)), SB_ERR_LAYOUT_MISMATCH);
    w_same(w, &before);

    /* The same layout opens the same namespace; another scope is another. */
    sb_ns *same = NULL;
    assert_int_equal(sb_ns_open(w->st, &a, SCOPE_A, strlen(SCOPE_A), &same), SB_OK);
    sb_ns_info i1, i2;
    assert_int_equal(sb_ns_get_info(same, &i1), SB_OK);
    assert_int_equal(sb_ns_get_info(w->ns[NA], &i2), SB_OK);
    assert_int_equal(i1.ns_id, i2.ns_id);
    assert_int_equal(w_len(w, NA, w->a1, 30), 30);
    sb_ns_close(same);
    l = a, l.page_tokens = 8;
    assert_int_equal(ns_open_rc(w, &l, "other", 5), SB_OK);

    /* With every handle closed, a namespace that still holds pages still
     * exists: a mismatching layout is refused. */
    sb_ns_close(w->ns[NA]);
    l = a, l.page_tokens = 8;
    assert_int_equal(ns_open_rc(w, &l, SCOPE_A, strlen(SCOPE_A)), SB_ERR_LAYOUT_MISMATCH);
    w->ns[NA] = tu_ns(w->st, &LAY_A, SCOPE_A);
    w_same(w, &before);
    world_close(w);
}

static void test_ns_info_inval(void **state)
{
    (void)state;
    world *w = world_std();
    snap before;
    w_snap(w, &before);
    sb_ns_info info;
    assert_int_equal(sb_ns_get_info(NULL, &info), SB_ERR_INVAL);
    assert_int_equal(sb_ns_get_info(w->ns[NA], NULL), SB_ERR_INVAL);
    assert_int_equal(sb_ns_tensor_offset(NULL, 0), (size_t)-1);
    assert_int_equal(sb_ns_tensor_offset(w->ns[NA], 2), (size_t)-1);
    assert_int_equal(sb_ns_tensor_offset(w->ns[NA], UINT32_MAX), (size_t)-1);
    assert_int_equal(sb_ns_tensor_offset(w->ns[NA], 0), 0);
    assert_int_equal(sb_ns_tensor_offset(w->ns[NA], 1), 64); /* round_up(4 * 8, 64) */
    assert_int_equal(sb_ns_dump(NULL, stderr), SB_ERR_INVAL);
    assert_int_equal(sb_ns_dump(w->ns[NA], NULL), SB_ERR_INVAL);
    w_same(w, &before);
    world_close(w);
}

/* ---- copy mode ------------------------------------------------------------------- */

static int put_rc(world *w, int k, const uint32_t *tok, size_t n, const void *const *tensors,
                  const void *point, size_t *stored)
{
    *stored = 12345;
    return sb_ns_put(w->ns[k], tok, n, tensors, point, stored);
}

static void test_put_errors(void **state)
{
    (void)state;
    world *w = world_std();
    snap before;
    w_snap(w, &before);
    uint32_t tok[16];
    uint64_t rng = 3;
    tu_tokens(&rng, tok, 16, 9);
    void **st_a = tu_state(&LAY_A, tok, 16);
    void **st_c = tu_state(&LAY_C, tok, 16);
    void *pt_a = tu_point(&LAY_A, tok, 16);
    size_t stored;

    stored = 12345;
    assert_int_equal(sb_ns_put(NULL, tok, 16, (const void *const *)st_a, NULL, &stored),
                     SB_ERR_INVAL);
    assert_int_equal(stored, 0);
    assert_int_equal(put_rc(w, NA, NULL, 16, (const void *const *)st_a, NULL, &stored),
                     SB_ERR_INVAL);
    assert_int_equal(stored, 0);
    assert_int_equal(put_rc(w, NA, tok, 16, NULL, NULL, &stored), SB_ERR_INVAL);
    assert_int_equal(stored, 0);
    const void *holes[2] = { st_a[0], NULL };
    assert_int_equal(put_rc(w, NA, tok, 16, holes, NULL, &stored), SB_ERR_INVAL);
    assert_int_equal(stored, 0);
    const void *holes0[2] = { NULL, st_a[1] };
    assert_int_equal(put_rc(w, NA, tok, 16, holes0, NULL, &stored), SB_ERR_INVAL);
    /* A point for a layout without point states. */
    assert_int_equal(put_rc(w, NC, tok, 16, (const void *const *)st_c, pt_a, &stored),
                     SB_ERR_INVAL);
    assert_int_equal(stored, 0);
    assert_int_equal(put_rc(w, NA, tok, 0, (const void *const *)st_a, NULL, &stored),
                     SB_ERR_NO_TOKENS);
    assert_int_equal(stored, 0);
    assert_int_equal(put_rc(w, NA, tok, 0, (const void *const *)st_a, pt_a, &stored),
                     SB_ERR_NO_TOKENS);
    /* n_stored may be NULL. */
    assert_int_equal(sb_ns_put(w->ns[NA], tok, 0, (const void *const *)st_a, NULL, NULL),
                     SB_ERR_NO_TOKENS);
    w_same(w, &before);
    free(pt_a);
    tu_free_state(&LAY_A, st_a);
    tu_free_state(&LAY_C, st_c);
    world_close(w);
}

static void test_too_many_tokens(void **state)
{
    (void)state;
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.max_seq_tokens = 16;
    world *w = world_open(&cfg);
    uint32_t tok[17];
    uint64_t rng = 11;
    tu_tokens(&rng, tok, 17, 4);
    tu_put(w->ns[NA], &LAY_A, tok, 10, true, SB_OK);
    w_probe(w, NA, tok, 10);
    w_probe(w, NA, tok, 16);
    snap before;
    w_snap(w, &before);

    void **st = tu_state(&LAY_A, tok, 17);
    void *pt = tu_point(&LAY_A, tok, 17);
    size_t stored = 12345;
    assert_int_equal(sb_ns_put(w->ns[NA], tok, 17, (const void *const *)st, NULL, &stored),
                     SB_ERR_TOO_MANY_TOKENS);
    assert_int_equal(stored, 0);
    assert_int_equal(sb_ns_put(w->ns[NA], tok, 17, (const void *const *)st, pt, &stored),
                     SB_ERR_TOO_MANY_TOKENS);
    sb_match *m = (sb_match *)&m;
    assert_int_equal(sb_ns_match(w->ns[NA], tok, 17, &m), SB_ERR_TOO_MANY_TOKENS);
    assert_null(m);
    uint64_t id = 0;
    size_t n_pinned = 12345;
    assert_int_equal(sb_ns_pin(w->ns[NA], tok, 17, 0, &id, &n_pinned),
                     SB_ERR_TOO_MANY_TOKENS);
    free(pt);
    tu_free_state(&LAY_A, st);
    w_same(w, &before);

    /* Commit: five fresh pages for 17 tokens. */
    sb_page *pages[5];
    alloc_pages(w->ns[NA], &LAY_A, tok, 17, pages);
    w_snap(w, &before);
    assert_int_equal(sb_ns_commit(w->ns[NA], tok, 17, pages, NULL), SB_ERR_TOO_MANY_TOKENS);
    for (int i = 0; i < 5; i++)
        assert_int_equal(sb_page_tokens(pages[i]), 0);
    w_same(w, &before);
    /* 16 tokens is the limit and is accepted. */
    assert_int_equal(sb_ns_commit(w->ns[NA], tok, 16, pages, NULL), SB_OK);
    for (int i = 0; i < 5; i++)
        sb_page_unref(pages[i]);
    assert_int_equal(w_len(w, NA, tok, 16), 16);
    world_close(w);
}

static void test_match_errors(void **state)
{
    (void)state;
    world *w = world_std();
    snap before;
    w_snap(w, &before);
    sb_match *m = (sb_match *)&m;
    assert_int_equal(sb_ns_match(NULL, w->a1, 10, &m), SB_ERR_INVAL);
    assert_null(m);
    m = (sb_match *)&m;
    assert_int_equal(sb_ns_match(w->ns[NA], NULL, 10, &m), SB_ERR_INVAL);
    assert_null(m);
    assert_int_equal(sb_ns_match(w->ns[NA], w->a1, 10, NULL), SB_ERR_INVAL);
    m = (sb_match *)&m;
    assert_int_equal(sb_ns_match(w->ns[NA], w->a1, 0, &m), SB_ERR_NO_TOKENS);
    assert_null(m);
    sb_match_info info;
    assert_int_equal(sb_match_get_info(NULL, &info), SB_ERR_INVAL);
    w_same(w, &before);
    assert_int_equal(sb_ns_match(w->ns[NA], w->a1, 10, &m), SB_OK);
    assert_int_equal(sb_match_get_info(m, NULL), SB_ERR_INVAL);
    sb_match_release(m);
    w_same(w, &before);
    world_close(w);
}

static void test_restore_errors(void **state)
{
    (void)state;
    world *w = world_std();
    snap before;
    w_snap(w, &before);

    /* A match of a1 (30 tokens, point at 30) and one of a2 (no point). */
    sb_match *m1 = NULL, *m2 = NULL;
    assert_int_equal(sb_ns_match(w->ns[NA], w->a1, 30, &m1), SB_OK);
    assert_int_equal(sb_ns_match(w->ns[NA], w->a2, 40, &m2), SB_OK);
    sb_match_info i1, i2;
    assert_int_equal(sb_match_get_info(m1, &i1), SB_OK);
    assert_int_equal(sb_match_get_info(m2, &i2), SB_OK);
    assert_int_equal(i1.n_tokens, 30);
    assert_true(i1.has_point);
    assert_int_equal(i2.n_tokens, 24);
    assert_false(i2.has_point);
    assert_int_equal(i2.miss, SB_MISS_NO_PREFIX);

    void **bufs = tu_bufs(&LAY_A, 41);
    uint8_t point[32];
    void *holes[2] = { bufs[0], NULL };
    assert_int_equal(sb_match_restore(NULL, 10, bufs, NULL), SB_ERR_INVAL);
    assert_int_equal(sb_match_restore(m1, 10, NULL, NULL), SB_ERR_INVAL);
    assert_int_equal(sb_match_restore(m1, 10, holes, NULL), SB_ERR_INVAL);
    assert_int_equal(sb_match_restore(m1, 31, bufs, NULL), SB_ERR_RANGE);
    assert_int_equal(sb_match_restore(m2, 25, bufs, NULL), SB_ERR_RANGE);
    assert_int_equal(sb_match_restore(m2, SIZE_MAX, bufs, NULL), SB_ERR_RANGE);
    /* A point asked for: none at all, or not at n_tokens. */
    assert_int_equal(sb_match_restore(m2, 24, bufs, point), SB_ERR_NO_POINT);
    assert_int_equal(sb_match_restore(m1, 29, bufs, point), SB_ERR_NO_POINT);
    assert_int_equal(sb_match_restore(m1, 0, bufs, point), SB_ERR_NO_POINT);
    /* The boundaries work and are exact. */
    assert_int_equal(sb_match_restore(m1, 30, bufs, point), SB_OK);
    assert_true(tu_state_equal(&LAY_A, w->a1, 30, bufs));
    void *want = tu_point(&LAY_A, w->a1, 30);
    assert_memory_equal(point, want, sizeof point);
    free(want);
    assert_int_equal(sb_match_restore(m2, 24, bufs, NULL), SB_OK);
    assert_true(tu_state_equal(&LAY_A, w->a2, 24, bufs));
    tu_free_state(&LAY_A, bufs);

    /* A layout without point states: any point buffer is NO_POINT. */
    sb_match *m3 = NULL;
    assert_int_equal(sb_ns_match(w->ns[NC], w->c1, 12, &m3), SB_OK);
    void **cb = tu_bufs(&LAY_C, 12);
    assert_int_equal(sb_match_restore(m3, 12, cb, point), SB_ERR_NO_POINT);
    assert_null(sb_match_point(m3));
    tu_free_state(&LAY_C, cb);

    /* The recurrent layout: L is the point at 9; asking 8 with a point is
     * NO_POINT, 9 works. */
    sb_match *m4 = NULL;
    assert_int_equal(sb_ns_match(w->ns[NB], w->b1, 15, &m4), SB_OK);
    sb_match_info i4;
    assert_int_equal(sb_match_get_info(m4, &i4), SB_OK);
    assert_int_equal(i4.n_tokens, 9);
    assert_int_equal(i4.n_matched_tokens, 15);
    assert_int_equal(i4.miss, SB_MISS_NO_POINT);
    void **bb = tu_bufs(&LAY_B, 15);
    uint8_t bpoint[24];
    assert_int_equal(sb_match_restore(m4, 8, bb, bpoint), SB_ERR_NO_POINT);
    assert_int_equal(sb_match_restore(m4, 10, bb, NULL), SB_ERR_RANGE);
    assert_int_equal(sb_match_restore(m4, 9, bb, bpoint), SB_OK);
    assert_true(tu_state_equal(&LAY_B, w->b1, 9, bb));
    tu_free_state(&LAY_B, bb);

    sb_match_release(m1);
    sb_match_release(m2);
    sb_match_release(m3);
    sb_match_release(m4);
    w_same(w, &before);
    world_close(w);
}

/* ---- zero-copy ----------------------------------------------------------------- */

static void test_match_pages_errors(void **state)
{
    (void)state;
    world *w = world_std();
    snap before;
    w_snap(w, &before);
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(w->ns[NA], w->a1, 30, &m), SB_OK); /* 8 pages */
    sb_page *out[10] = { 0 };
    assert_int_equal(sb_match_pages(NULL, 0, 1, out), SB_ERR_INVAL);
    assert_int_equal(sb_match_pages(m, 0, 1, NULL), SB_ERR_INVAL);
    assert_int_equal(sb_match_pages(m, 9, 0, out), SB_ERR_RANGE);
    assert_int_equal(sb_match_pages(m, 0, 9, out), SB_ERR_RANGE);
    assert_int_equal(sb_match_pages(m, 7, 2, out), SB_ERR_RANGE);
    assert_int_equal(sb_match_pages(m, SIZE_MAX, 2, out), SB_ERR_RANGE);
    assert_int_equal(sb_match_pages(m, 1, SIZE_MAX, out), SB_ERR_RANGE);
    for (int i = 0; i < 10; i++)
        assert_null(out[i]);
    /* The boundaries: an empty range at the end, the whole range. */
    assert_int_equal(sb_match_pages(m, 8, 0, out), SB_OK);
    assert_int_equal(sb_match_pages(m, 0, 8, out), SB_OK);
    for (int i = 0; i < 8; i++) {
        assert_true(tu_page_holds(w->ns[NA], &LAY_A, out[i], w->a1, (size_t)i, i < 7 ? 4 : 2));
        sb_page_unref(out[i]);
    }
    sb_match_release(m);
    w_same(w, &before);
    world_close(w);
}

static void test_page_alloc_errors(void **state)
{
    (void)state;
    world *w = world_std();
    snap before;
    w_snap(w, &before);
    sb_page *p = NULL;
    assert_int_equal(sb_ns_page_alloc(NULL, &p), SB_ERR_INVAL);
    assert_int_equal(sb_ns_page_alloc(w->ns[NA], NULL), SB_ERR_INVAL);
    w_same(w, &before);
    world_close(w);
}

static void test_page_writable_errors(void **state)
{
    (void)state;
    world *w = world_std();
    sb_ns *a2 = tu_ns(w->st, &LAY_A, SCOPE_A2); /* same geometry, another namespace */
    sb_page *fresh = NULL;
    assert_int_equal(sb_ns_page_alloc(w->ns[NA], &fresh), SB_OK);
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(w->ns[NA], w->a1, 30, &m), SB_OK);
    sb_page *mp[8];
    assert_int_equal(sb_match_pages(m, 0, 8, mp), SB_OK);
    snap before;
    w_snap(w, &before);

    sb_page *p = fresh, *null_page = NULL;
    assert_int_equal(sb_page_writable(NULL, &p, 0), SB_ERR_INVAL);
    assert_int_equal(sb_page_writable(w->ns[NA], NULL, 0), SB_ERR_INVAL);
    assert_int_equal(sb_page_writable(w->ns[NA], &null_page, 0), SB_ERR_INVAL);
    assert_null(null_page);
    assert_int_equal(sb_page_writable(w->ns[NA], &p, 5), SB_ERR_INVAL); /* > page_tokens */
    assert_ptr_equal(p, fresh);
    /* Committed pages: n_keep beyond the tokens the page holds. */
    sb_page *q = mp[7]; /* a1's last page: 2 tokens */
    assert_int_equal(sb_page_tokens(q), 2);
    assert_int_equal(sb_page_writable(w->ns[NA], &q, 3), SB_ERR_INVAL);
    assert_ptr_equal(q, mp[7]);
    assert_int_equal(sb_page_writable(w->ns[NA], &q, UINT32_MAX), SB_ERR_INVAL);
    assert_ptr_equal(q, mp[7]);
    /* Foreign pages: of a namespace with the same geometry, of another. */
    assert_int_equal(sb_page_writable(a2, &p, 0), SB_ERR_FOREIGN_PAGE);
    assert_ptr_equal(p, fresh);
    q = mp[3];
    assert_int_equal(sb_page_writable(a2, &q, 4), SB_ERR_FOREIGN_PAGE);
    assert_int_equal(sb_page_writable(w->ns[NC], &q, 1), SB_ERR_FOREIGN_PAGE);
    assert_ptr_equal(q, mp[3]);
    w_same(w, &before);

    /* The boundaries work: a fresh private page is left as it is; a
     * committed page with n_keep == its tokens is copied exactly. */
    assert_int_equal(sb_page_writable(w->ns[NA], &p, 4), SB_OK);
    assert_ptr_equal(p, fresh);
    assert_int_equal(sb_page_writable(w->ns[NA], &mp[7], 2), SB_OK);
    assert_int_equal(sb_page_tokens(mp[7]), 0);
    assert_true(tu_page_holds(w->ns[NA], &LAY_A, mp[7], w->a1, 7, 2));
    for (int i = 0; i < 8; i++)
        sb_page_unref(mp[i]);
    sb_page_unref(fresh);
    sb_match_release(m);
    sb_ns_close(a2);
    world_close(w);
}

static void test_commit_errors(void **state)
{
    (void)state;
    world *w = world_std();
    sb_ns *ns = w->ns[NA];
    sb_ns *a2 = tu_ns(w->st, &LAY_A, SCOPE_A2);
    uint32_t tok[12];
    uint64_t rng = 99;
    tu_tokens(&rng, tok, 12, 5);
    tok[0] = 8; /* a new first token: a new branch of A */
    sb_page *pages[3], *orig[3];
    alloc_pages(ns, &LAY_A, tok, 12, pages);
    memcpy(orig, pages, sizeof pages);
    sb_page *foreign = NULL;
    assert_int_equal(sb_ns_page_alloc(a2, &foreign), SB_OK);
    w_probe(w, NA, tok, 12);
    uint8_t point[32] = { 1 };
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, w->a1, 30, &m), SB_OK);
    sb_page *mp[8];
    assert_int_equal(sb_match_pages(m, 0, 8, mp), SB_OK);
    sb_match *m2 = NULL;
    assert_int_equal(sb_ns_match(ns, w->a2, 24, &m2), SB_OK);
    sb_page *mq[6];
    assert_int_equal(sb_match_pages(m2, 0, 6, mq), SB_OK);
    snap before;
    w_snap(w, &before);

    assert_int_equal(sb_ns_commit(NULL, tok, 12, pages, NULL), SB_ERR_INVAL);
    assert_int_equal(sb_ns_commit(ns, NULL, 12, pages, NULL), SB_ERR_INVAL);
    assert_int_equal(sb_ns_commit(ns, tok, 12, NULL, NULL), SB_ERR_INVAL);
    sb_page *with_null[3] = { pages[0], NULL, pages[2] };
    assert_int_equal(sb_ns_commit(ns, tok, 12, with_null, NULL), SB_ERR_INVAL);
    sb_page *cpage = NULL;
    assert_int_equal(sb_ns_page_alloc(w->ns[NC], &cpage), SB_OK);
    assert_int_equal(sb_ns_commit(w->ns[NC], w->c1, 1, &cpage, point), SB_ERR_INVAL);
    assert_int_equal(sb_page_tokens(cpage), 0);
    sb_page_unref(cpage);
    /* The same page for two regions is no valid page list either. */
    sb_page *twice[3] = { pages[0], pages[1], pages[1] };
    assert_int_equal(sb_ns_commit(ns, tok, 12, twice, NULL), SB_ERR_INVAL);
    assert_int_equal(sb_ns_commit(ns, tok, 0, pages, NULL), SB_ERR_NO_TOKENS);
    /* A page of another namespace (same geometry). */
    sb_page *mixed[3] = { pages[0], foreign, pages[2] };
    assert_int_equal(sb_ns_commit(ns, tok, 12, mixed, NULL), SB_ERR_FOREIGN_PAGE);
    assert_int_equal(sb_ns_commit(a2, tok, 12, pages, NULL), SB_ERR_FOREIGN_PAGE);
    /* Committed pages given for tokens other than their own. */
    sb_page *wrong0[3] = { mp[0], pages[1], pages[2] }; /* a1's region 0 as tok's */
    assert_int_equal(sb_ns_commit(ns, tok, 12, wrong0, NULL), SB_ERR_PAGE_STATE);
    sb_page *wrong1[3] = { pages[0], mp[1], pages[2] };
    assert_int_equal(sb_ns_commit(ns, tok, 12, wrong1, point), SB_ERR_PAGE_STATE);
    /* a1's own prefix, with a1's region-3 page given as region 2. */
    sb_page *wrong2[3] = { mp[0], mp[1], mp[3] };
    assert_int_equal(sb_ns_commit(ns, w->a1, 12, wrong2, NULL), SB_ERR_PAGE_STATE);
    /* a2's region 0 page is a1's (shared prefix); a2's region 2 page for a1. */
    assert_ptr_equal(mq[0], mp[0]);
    sb_page *wrong3[3] = { mp[0], mp[1], mq[2] };
    assert_int_equal(sb_ns_commit(ns, w->a1, 12, wrong3, NULL), SB_ERR_PAGE_STATE);
    for (int i = 0; i < 3; i++) {
        assert_ptr_equal(pages[i], orig[i]);
        assert_int_equal(sb_page_tokens(pages[i]), 0);
    }
    w_same(w, &before);

    /* A committed page the index no longer holds (a superseded partial
     * page) is still bound to its tokens. */
    uint32_t s[8];
    tu_tokens(&rng, s, 8, 5);
    s[0] = 9;
    sb_page *sp[2], *sx[2];
    alloc_pages(ns, &LAY_A, s, 6, sp);
    assert_int_equal(sb_ns_commit(ns, s, 6, sp, NULL), SB_OK);
    assert_int_equal(sb_page_tokens(sp[1]), 2);
    alloc_pages(ns, &LAY_A, s, 8, sx);
    assert_int_equal(sb_ns_commit(ns, s, 8, sx, NULL), SB_OK); /* supersedes sp[1] */
    assert_ptr_equal(sx[0], sp[0]); /* deduplicated */
    w_probe(w, NA, s, 8);
    w_snap(w, &before);
    sb_page *wrong4[3] = { pages[0], sp[1], pages[2] };
    assert_int_equal(sb_ns_commit(ns, tok, 12, wrong4, NULL), SB_ERR_PAGE_STATE);
    sb_page *wrong5[2] = { sp[0], sp[1] }; /* right region, other tokens */
    uint32_t s2[6];
    memcpy(s2, s, sizeof s2);
    s2[5] = (s[5] + 1) % 5;
    assert_int_equal(sb_ns_commit(ns, s2, 6, wrong5, NULL), SB_ERR_PAGE_STATE);
    w_same(w, &before);
    /* With its own tokens it is accepted (deduplicated to the index's page). */
    assert_int_equal(sb_ns_commit(ns, s, 6, sp, NULL), SB_OK);
    assert_ptr_equal(sp[1], sx[1]);

    /* Finally the valid commit of tok. */
    assert_int_equal(sb_ns_commit(ns, tok, 12, pages, NULL), SB_OK);
    assert_int_equal(w_len(w, NA, tok, 12), 12);
    for (int i = 0; i < 3; i++)
        sb_page_unref(pages[i]);
    for (int i = 0; i < 2; i++) {
        sb_page_unref(sp[i]);
        sb_page_unref(sx[i]);
    }
    for (int i = 0; i < 8; i++)
        sb_page_unref(mp[i]);
    for (int i = 0; i < 6; i++)
        sb_page_unref(mq[i]);
    sb_page_unref(foreign);
    sb_match_release(m);
    sb_match_release(m2);
    sb_ns_close(a2);
    world_close(w);
}

/* ---- pins ---------------------------------------------------------------------- */

static void test_pin_errors(void **state)
{
    (void)state;
    world *w = world_std();
    sb_ns *ns = w->ns[NA];
    snap before;
    w_snap(w, &before);
    uint64_t id = 777;
    size_t n_pinned = 12345;
    assert_int_equal(sb_ns_pin(NULL, w->a1, 30, 0, &id, &n_pinned), SB_ERR_INVAL);
    assert_int_equal(sb_ns_pin(ns, NULL, 30, 0, &id, &n_pinned), SB_ERR_INVAL);
    assert_int_equal(sb_ns_pin(ns, w->a1, 30, 0, NULL, &n_pinned), SB_ERR_INVAL);
    assert_int_equal(sb_ns_pin(ns, w->a1, 0, 0, &id, &n_pinned), SB_ERR_NO_TOKENS);
    assert_int_equal(sb_ns_unpin(NULL, 1), SB_ERR_INVAL);
    /* No pin was ever made with these ids. */
    assert_int_equal(sb_ns_unpin(ns, 0), SB_ERR_NOT_FOUND);
    assert_int_equal(sb_ns_unpin(ns, 1), SB_ERR_NOT_FOUND);
    assert_int_equal(sb_ns_unpin(ns, UINT64_MAX), SB_ERR_NOT_FOUND);
    w_same(w, &before);

    /* A live pin, unpinned through another namespace: not found there, and
     * still live. */
    assert_int_equal(sb_ns_pin(ns, w->a1, 40, 0, &id, &n_pinned), SB_OK);
    assert_int_equal(n_pinned, 30);
    w_snap(w, &before);
    assert_int_equal(before.s.pins, 1);
    assert_int_equal(sb_ns_unpin(w->ns[NC], id), SB_ERR_NOT_FOUND);
    assert_int_equal(sb_ns_unpin(w->ns[NB], id), SB_ERR_NOT_FOUND);
    w_same(w, &before);
    /* Removed, then removed again. */
    assert_int_equal(sb_ns_unpin(ns, id), SB_OK);
    w_snap(w, &before);
    assert_int_equal(before.s.pins, 0);
    assert_int_equal(sb_ns_unpin(ns, id), SB_ERR_NOT_FOUND);
    w_same(w, &before);
    /* Expired: live 1 ns before its TTL runs out, gone after. */
    uint64_t id2 = 0;
    assert_int_equal(sb_ns_pin(ns, w->a2, 24, 5, &id2, &n_pinned), SB_OK);
    assert_int_equal(n_pinned, 24);
    assert_int_not_equal(id2, id);
    w->clock_ns += 5 * 1000000ull - 1;
    sb_stats s;
    assert_int_equal(sb_store_stats(w->st, &s), SB_OK);
    assert_int_equal(s.pins, 1);
    w->clock_ns += 1;
    w_snap(w, &before);
    assert_int_equal(before.s.pins, 0);
    assert_int_equal(sb_ns_unpin(ns, id2), SB_ERR_NOT_FOUND);
    w_same(w, &before);
    /* A pin of nothing is no error. */
    uint32_t none[3] = { 42, 42, 42 };
    assert_int_equal(sb_ns_pin(ns, none, 3, 0, &id, &n_pinned), SB_OK);
    assert_int_equal(n_pinned, 0);
    assert_int_equal(sb_ns_unpin(ns, id), SB_OK);
    world_close(w);
}

/* ---- budgets --------------------------------------------------------------------- */

/* Put tokens[0, n) into namespace k and return *n_stored; rc must be want. */
static size_t put_n(world *w, int k, const uint32_t *tok, size_t n, bool point, int want)
{
    const tu_layout *l = w->lay[k];
    void **st = tu_state(l, tok, n);
    void *pt = point ? tu_point(l, tok, n) : NULL;
    size_t stored = 12345;
    assert_int_equal(sb_ns_put(w->ns[k], tok, n, (const void *const *)st, pt, &stored), want);
    free(pt);
    tu_free_state(l, st);
    return stored;
}

/* A budget full of pages pinned by matches: a put stores the page-aligned
 * prefix that fits and says how long it is; then nothing fits and nothing
 * changes; released, the pages can go again. */
static void test_budget_put_partial(void **state)
{
    (void)state;
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.ram_pages = 6;
    world *w = world_open(&cfg);
    uint32_t x[16], y[16], z[4];
    uint64_t rng = 5;
    tu_tokens(&rng, x, 16, 4);
    tu_tokens(&rng, y, 16, 4);
    tu_tokens(&rng, z, 4, 4);
    x[0] = 10, y[0] = 11, z[0] = 12;
    put_n(w, NA, x, 16, false, SB_OK);
    sb_match *mx = NULL;
    assert_int_equal(sb_ns_match(w->ns[NA], x, 16, &mx), SB_OK);
    w_probe(w, NA, x, 16);

    /* Two of y's four pages fit. */
    assert_int_equal(put_n(w, NA, y, 16, false, SB_ERR_BUDGET), 8);
    for (size_t p = 1; p <= 16; p++)
        assert_int_equal(w_len(w, NA, y, p), p < 8 ? p : 8);
    assert_int_equal(w_len(w, NA, x, 16), 16);
    sb_stats s;
    assert_int_equal(sb_store_stats(w->st, &s), SB_OK);
    assert_int_equal(s.ram_pages, 6);
    assert_int_equal(s.indexed_pages, 6);
    assert_true(s.budget_denials >= 1);

    /* Pin y too: now nothing can go. */
    sb_match *my = NULL;
    assert_int_equal(sb_ns_match(w->ns[NA], y, 16, &my), SB_OK);
    w_probe(w, NA, y, 16);
    w_probe(w, NA, z, 4);
    snap before;
    w_snap(w, &before);
    assert_int_equal(put_n(w, NA, z, 4, false, SB_ERR_BUDGET), 0);
    w_same(w, &before);
    assert_int_equal(put_n(w, NA, z, 4, true, SB_ERR_BUDGET), 0);
    w_same(w, &before);
    /* y again: its stored half is what this put leaves restorable. */
    assert_int_equal(put_n(w, NA, y, 16, false, SB_ERR_BUDGET), 8);
    w_same(w, &before);
    sb_page *p = (sb_page *)&p;
    assert_int_equal(sb_ns_page_alloc(w->ns[NA], &p), SB_ERR_BUDGET);
    w_same(w, &before);

    /* Released, x's leaf page is the least recently used: z takes its room. */
    sb_match_release(mx);
    assert_int_equal(put_n(w, NA, z, 4, false, SB_OK), 4);
    assert_int_equal(w_len(w, NA, z, 4), 4);
    assert_int_equal(w_len(w, NA, x, 16), 12);
    assert_int_equal(w_len(w, NA, y, 16), 8);
    sb_match_release(my);
    world_close(w);
}

/* A budget full of pages the caller holds: put, page_alloc, a copy on
 * write and a commit with a point state all fail with SB_ERR_BUDGET and
 * change nothing. */
static void test_budget_held_pages(void **state)
{
    (void)state;
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.ram_bytes = 4 * 4096;
    world *w = world_open(&cfg);
    sb_ns *ns = w->ns[NA];
    uint32_t t[16], u[4];
    uint64_t rng = 6;
    tu_tokens(&rng, t, 16, 4);
    tu_tokens(&rng, u, 4, 4);
    u[0] = 13;
    sb_page *pages[4];
    alloc_pages(ns, &LAY_A, t, 16, pages);
    w_probe(w, NA, t, 16);
    w_probe(w, NA, u, 4);
    snap before;
    w_snap(w, &before);
    assert_int_equal(before.s.ram_bytes, 4 * 4096);

    assert_int_equal(put_n(w, NA, u, 4, false, SB_ERR_BUDGET), 0);
    w_same(w, &before);
    sb_page *p = NULL;
    assert_int_equal(sb_ns_page_alloc(ns, &p), SB_ERR_BUDGET);
    w_same(w, &before);
    /* A shared fresh page needs a copy, and there is no room for one. */
    sb_page *shared = sb_page_ref(pages[1]);
    assert_int_equal(sb_page_writable(ns, &shared, 4), SB_ERR_BUDGET);
    assert_ptr_equal(shared, pages[1]);
    sb_page_unref(shared);
    w_same(w, &before);
    /* The pages fit; their point state does not. */
    uint8_t *point = tu_point(&LAY_A, t, 16);
    assert_int_equal(sb_ns_commit(ns, t, 16, pages, point), SB_ERR_BUDGET);
    for (int i = 0; i < 4; i++)
        assert_int_equal(sb_page_tokens(pages[i]), 0);
    w_same(w, &before);

    /* Without the point the commit goes through. */
    assert_int_equal(sb_ns_commit(ns, t, 16, pages, NULL), SB_OK);
    assert_int_equal(w_len(w, NA, t, 16), 16);
    w_snap(w, &before);
    /* Committed, held by us and by a match: a copy has no room. */
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, t, 16, &m), SB_OK);
    sb_page *last = NULL;
    assert_int_equal(sb_match_pages(m, 3, 1, &last), SB_OK);
    sb_page *old = last;
    assert_int_equal(sb_page_writable(ns, &last, 2), SB_ERR_BUDGET);
    assert_ptr_equal(last, old);
    sb_page_unref(last);
    sb_match_release(m);
    w_same(w, &before);

    /* Let go of the last page: it can be evicted to make room. */
    sb_page_unref(pages[3]);
    assert_int_equal(sb_ns_page_alloc(ns, &p), SB_OK);
    assert_int_equal(w_len(w, NA, t, 16), 12);
    sb_page_unref(p);
    for (int i = 0; i < 3; i++)
        sb_page_unref(pages[i]);
    free(point);
    world_close(w);
}

/* The namespace budget binds even when the store has room. */
static void test_budget_namespace(void **state)
{
    (void)state;
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.ns_ram_bytes = 3 * 4096;
    world *w = world_open(&cfg);
    sb_ns *ns = w->ns[NA];
    sb_page *held[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(sb_ns_page_alloc(ns, &held[i]), SB_OK);
    uint32_t u[4] = { 1, 2, 3, 4 };
    w_probe(w, NA, u, 4);
    w_probe(w, NC, u, 4);
    snap before;
    w_snap(w, &before);
    sb_page *p = NULL;
    assert_int_equal(sb_ns_page_alloc(ns, &p), SB_ERR_BUDGET);
    w_same(w, &before);
    assert_int_equal(put_n(w, NA, u, 4, false, SB_ERR_BUDGET), 0);
    w_same(w, &before);
    /* Another namespace has its own budget (C has one token per page). */
    assert_int_equal(put_n(w, NC, u, 3, false, SB_OK), 3);
    assert_int_equal(w_len(w, NC, u, 4), 3);
    for (int i = 0; i < 3; i++)
        sb_page_unref(held[i]);
    assert_int_equal(put_n(w, NA, u, 4, false, SB_OK), 4);
    world_close(w);
}

/* A page larger than the whole budget can never be had. */
static void test_budget_page_over_budget(void **state)
{
    (void)state;
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.ram_bytes = 4096;
    world *w = world_open(&cfg);
    static const tu_layout big = { .page_tokens = 4, .n_tensors = 2, .bpt = { 1024, 1024 },
                                   .model = "errors-big" };
    sb_ns *ns = tu_ns(w->st, &big, "big");
    sb_ns_info info;
    assert_int_equal(sb_ns_get_info(ns, &info), SB_OK);
    assert_int_equal(info.page_bytes, 8192);
    uint32_t u[4] = { 1, 2, 3, 4 };
    snap before;
    w_snap(w, &before);
    sb_page *p = NULL;
    assert_int_equal(sb_ns_page_alloc(ns, &p), SB_ERR_BUDGET);
    void **st = tu_state(&big, u, 4);
    size_t stored = 12345;
    assert_int_equal(sb_ns_put(ns, u, 4, (const void *const *)st, NULL, &stored),
                     SB_ERR_BUDGET);
    assert_int_equal(stored, 0);
    tu_free_state(&big, st);
    w_same(w, &before);
    /* One 4 KiB page fits. */
    assert_int_equal(put_n(w, NA, u, 4, false, SB_OK), 4);
    sb_ns_close(ns);
    world_close(w);
}

/* Regression: a refused allocation must not evict. When the unpinned pages
 * cannot make room anyway (here: an 8 KiB page of one namespace, 4 KiB
 * unpinned in another, the rest pinned), the call fails with SB_ERR_BUDGET
 * and, by the header's default promise ("a call that fails has changed
 * nothing"; for sb_ns_put: "nothing else changed"), must leave the
 * unpinned page restorable. */
typedef struct refusal {
    world *w;
    sb_ns *big;                  /* 8 KiB pages */
    sb_match *m;                 /* pins x */
} refusal;

static const tu_layout LAY_BIG = { .page_tokens = 4, .n_tensors = 2, .bpt = { 1024, 1024 },
                                   .model = "errors-big" };

/* 12 KiB budget: x's two pages pinned by a match, y's page unpinned. */
static refusal *refusal_setup(void **state)
{
    refusal *r = calloc(1, sizeof *r);
    assert_non_null(r);
    *state = r;
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.ram_bytes = 3 * 4096;
    world *w = r->w = world_open(&cfg);
    r->big = tu_ns(w->st, &LAY_BIG, "big");
    uint32_t x[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, y[4] = { 9, 9, 9, 9 };
    put_n(w, NA, x, 8, false, SB_OK);
    assert_int_equal(sb_ns_match(w->ns[NA], x, 8, &r->m), SB_OK);
    put_n(w, NA, y, 4, false, SB_OK);
    put_n(w, NA, x, 4, false, SB_OK); /* the newest commit is x's again */
    w_probe(w, NA, x, 8);
    w_probe(w, NA, y, 4);
    return r;
}

/* Runs even when the test failed, so a failure leaks nothing. */
static int refusal_teardown(void **state)
{
    refusal *r = *state;
    if (r) {
        sb_match_release(r->m);
        sb_ns_close(r->big);
        world_free(r->w);
        free(r);
        *state = NULL;
    }
    return 0;
}

static void test_budget_refusal_evicts_nothing_page_alloc(void **state)
{
    refusal *r = refusal_setup(state);
    snap before;
    w_snap(r->w, &before);
    assert_int_equal(before.s.ram_bytes, 3 * 4096);
    sb_page *p = NULL;
    assert_int_equal(sb_ns_page_alloc(r->big, &p), SB_ERR_BUDGET);
    w_same(r->w, &before); /* fails while y's page is evicted for nothing */
}

static void test_budget_refusal_evicts_nothing_put(void **state)
{
    refusal *r = refusal_setup(state);
    snap before;
    w_snap(r->w, &before);
    uint32_t u[4] = { 5, 5, 5, 5 };
    void **st = tu_state(&LAY_BIG, u, 4);
    size_t stored = 12345;
    int rc = sb_ns_put(r->big, u, 4, (const void *const *)st, NULL, &stored);
    tu_free_state(&LAY_BIG, st);
    assert_int_equal(rc, SB_ERR_BUDGET);
    assert_int_equal(stored, 0);
    w_same(r->w, &before); /* fails while y's page is evicted for nothing */
}

/* ---- allocation failure ------------------------------------------------------------ */

typedef int (*fault_op)(world *w, void *ctx);

/* Run op with its 1st, 2nd, ... allocation failing until it succeeds. Every
 * failing attempt must return SB_ERR_NOMEM, pass check_fail (when given) and
 * leave the world as it was. Each nth is tried up to three times: a failed
 * attempt may keep capacity it grew (radix arrays, heaps, the namespace
 * table), which moves the later allocations one step earlier, and the
 * retry fails the allocation the shift would otherwise skip. Returns the
 * number of failed attempts. */
static uint64_t fault_loop(world *w, fault_op op, void *ctx,
                           void (*check_fail)(world *w, void *ctx), const char *what)
{
    snap before;
    w_snap(w, &before);
    uint64_t nth, failed = 0;
    for (nth = 1;; nth++) {
        assert_true(nth < 1000);
        int rc = SB_ERR_NOMEM;
        for (int rep = 0; rep < 3 && rc != SB_OK; rep++) {
            assert_int_equal(sb_store_fault_alloc(w->st, nth), SB_OK);
            rc = op(w, ctx);
            assert_int_equal(sb_store_fault_alloc(w->st, 0), SB_OK);
            if (rc == SB_OK)
                break;
            if (rc != SB_ERR_NOMEM) {
                print_error("%s: allocation %llu failed: %s, want SB_ERR_NOMEM\n", what,
                            (unsigned long long)nth, sb_strerror(rc));
                fail();
            }
            failed++;
            if (check_fail)
                check_fail(w, ctx);
            w_same(w, &before);
        }
        if (rc == SB_OK)
            break;
    }
    print_message("%s: %llu failing attempts (allocations 1..%llu), each changed nothing\n",
                  what, (unsigned long long)failed, (unsigned long long)(nth - 1));
    assert_true(failed > 0); /* the call allocates: at least one attempt failed */
    tu_check(w->st);
    return failed;
}

static void test_fault_store_open(void **state)
{
    (void)state;
    sb_config cfg;
    sb_config_default(&cfg);
    sb_store *st = NULL;
    uint64_t nth;
    for (nth = 1;; nth++) {
        assert_true(nth < 100);
        cfg.fault_alloc_nth = nth;
        st = (sb_store *)&st;
        int rc = sb_store_open(&cfg, &st);
        if (rc == SB_OK)
            break;
        assert_int_equal(rc, SB_ERR_NOMEM);
        assert_null(st);
    }
    assert_true(nth > 1);
    print_message("sb_store_open: %llu allocations failed in turn\n",
                  (unsigned long long)(nth - 1));
    /* The open used nth - 1 allocations, so the nth counted from the open
     * is the next one: the first allocation of the next namespace fails. */
    sb_ns *ns = NULL;
    uint32_t bpt[1] = { 8 };
    sb_layout lay = base_layout(bpt, 1);
    assert_int_equal(sb_ns_open(st, &lay, "s", 1, &ns), SB_ERR_NOMEM);
    /* It fired once: the store works. */
    tu_check(st);
    tu_layout l = { .page_tokens = 4, .n_tensors = 1, .bpt = { 8 } };
    ns = tu_ns(st, &l, "s");
    uint32_t tok[9] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };
    tu_put(ns, &l, tok, 9, false, SB_OK);
    assert_int_equal(tu_match_verify(ns, &l, tok, 9), 9);
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
}

typedef struct ns_open_ctx {
    const tu_layout *l;
    const char *scope;
    sb_ns *out;
} ns_open_ctx;

static int op_ns_open(world *w, void *vctx)
{
    ns_open_ctx *c = vctx;
    const char *model = c->l->model;
    sb_layout lay = { .model_id = model, .model_id_bytes = strlen(model),
                      .page_tokens = c->l->page_tokens, .n_tensors = c->l->n_tensors,
                      .bytes_per_token = c->l->bpt, .point_bytes = c->l->point_bytes,
                      .flags = c->l->flags };
    c->out = NULL;
    return sb_ns_open(w->st, &lay, c->scope, strlen(c->scope), &c->out);
}

static void check_ns_open_fail(world *w, void *vctx)
{
    (void)w;
    ns_open_ctx *c = vctx;
    assert_null(c->out);
}

/* The new namespace works: a put restores exactly, and the others kept
 * their content. */
static void ns_works(world *w, sb_ns *ns, const tu_layout *l)
{
    uint32_t tok[10] = { 3, 1, 4, 1, 5, 9, 2, 6, 5, 3 };
    tu_put(ns, l, tok, 10, false, SB_OK);
    assert_int_equal(tu_match_verify(ns, l, tok, 10), 10);
    assert_int_equal(w_len(w, NA, w->a1, 40), 30);
    tu_check(w->st);
}

static void test_fault_ns_open(void **state)
{
    (void)state;
    world *w = world_std();
    static const tu_layout l = { .page_tokens = 2, .n_tensors = 2, .bpt = { 4, 4 },
                                 .point_bytes = 8, .model = "fault-ns" };
    ns_open_ctx c = { .l = &l, .scope = "fresh" };
    fault_loop(w, op_ns_open, &c, check_ns_open_fail, "sb_ns_open");
    assert_non_null(c.out);
    sb_stats s;
    assert_int_equal(sb_store_stats(w->st, &s), SB_OK);
    assert_int_equal(s.namespaces, 4);
    ns_works(w, c.out, &l);
    sb_ns_close(c.out);

    /* With 16 namespaces the next one grows the namespace table first. */
    sb_ns *more[13];
    char scope[32];
    for (int i = 0; i < 12; i++) {
        snprintf(scope, sizeof scope, "more-%d", i);
        more[i] = tu_ns(w->st, &l, scope);
    }
    assert_int_equal(sb_store_stats(w->st, &s), SB_OK);
    assert_int_equal(s.namespaces, 16);
    ns_open_ctx c2 = { .l = &l, .scope = "seventeenth" };
    fault_loop(w, op_ns_open, &c2, check_ns_open_fail, "sb_ns_open (table growth)");
    assert_int_equal(sb_store_stats(w->st, &s), SB_OK);
    assert_int_equal(s.namespaces, 17);
    ns_works(w, c2.out, &l);
    more[12] = c2.out;
    /* Every namespace is still found by its scope. */
    for (int i = 0; i < 12; i++) {
        snprintf(scope, sizeof scope, "more-%d", i);
        sb_ns *again = tu_ns(w->st, &l, scope);
        assert_ptr_equal(again, more[i]);
        sb_ns_close(again);
    }
    for (int i = 0; i < 13; i++)
        sb_ns_close(more[i]);
    world_close(w);
}

typedef struct put_ctx {
    int ns;
    const uint32_t *tok;
    size_t n;
    void **state;
    void *point;
    size_t stored;
} put_ctx;

static int op_put(world *w, void *vctx)
{
    put_ctx *c = vctx;
    c->stored = 12345;
    return sb_ns_put(w->ns[c->ns], c->tok, c->n, (const void *const *)c->state, c->point,
                     &c->stored);
}

static void check_put_fail(world *w, void *vctx)
{
    (void)w;
    put_ctx *c = vctx;
    assert_int_equal(c->stored, 0); /* NOMEM: nothing stored */
}

/* Put tok[0, n) into namespace k under allocation failure; afterwards it
 * restores exactly (with its point when given) and every probe restores at
 * least what it did. */
static void fault_put(world *w, int k, const uint32_t *tok, size_t n, bool point,
                      const char *what)
{
    const tu_layout *l = w->lay[k];
    w_probe(w, k, tok, n);
    if (n > 2)
        w_probe(w, k, tok, n - 1);
    snap before;
    w_snap(w, &before);
    put_ctx c = { .ns = k, .tok = tok, .n = n, .state = tu_state(l, tok, n),
                  .point = point ? tu_point(l, tok, n) : NULL };
    fault_loop(w, op_put, &c, check_put_fail, what);
    assert_int_equal(c.stored, n);
    int has_point = 0;
    assert_int_equal(verify_match(w->ns[k], l, tok, n, &has_point), n);
    assert_int_equal(has_point, point);
    snap after;
    w_snap(w, &after);
    for (size_t i = 0; i < w->n_probes; i++)
        assert_true(after.L[i] >= before.L[i]);
    assert_int_equal(after.s.evictions, before.s.evictions);
    free(c.point);
    tu_free_state(l, c.state);
}

static void test_fault_put_new(void **state)
{
    (void)state;
    world *w = world_std();
    uint32_t tok[W_TOK];
    uint64_t rng = 21;
    tu_tokens(&rng, tok, W_TOK, 5);
    tok[0] = 9;
    fault_put(w, NA, tok, 21, false, "sb_ns_put new sequence");
    tok[0] = 10;
    fault_put(w, NA, tok, 21, true, "sb_ns_put new sequence with point");
    tok[0] = 11;
    fault_put(w, NC, tok, 5, false, "sb_ns_put new sequence (page_tokens 1)");
    world_close(w);
}

static void test_fault_put_extend(void **state)
{
    (void)state;
    world *w = world_std();
    uint32_t tok[W_TOK];
    uint64_t rng = 22;
    /* a3 is a leaf without a point ending in a partial page: it grows in
     * place and the partial page is superseded. */
    memcpy(tok, w->a3, sizeof tok);
    tu_tokens(&rng, tok + 7, W_TOK - 7, 5);
    fault_put(w, NA, tok, 19, false, "sb_ns_put extension (leaf grows)");
    /* a1 ends in a point: the extension is a new child. */
    memcpy(tok, w->a1, sizeof tok);
    tu_tokens(&rng, tok + 30, W_TOK - 30, 5);
    fault_put(w, NA, tok, 37, true, "sb_ns_put extension (new child, point)");
    /* The recurrent layout, extended past its last point. */
    memcpy(tok, w->b1, sizeof tok);
    tu_tokens(&rng, tok + 20, W_TOK - 20, 5);
    fault_put(w, NB, tok, 26, true, "sb_ns_put extension (recurrent layout)");
    world_close(w);
}

static void test_fault_put_split(void **state)
{
    (void)state;
    world *w = world_std();
    uint32_t tok[W_TOK];
    uint64_t rng = 23;
    /* Diverge from a1 at 17, inside its edge [10, 30) and inside a page. */
    memcpy(tok, w->a1, sizeof tok);
    tu_tokens(&rng, tok + 17, W_TOK - 17, 5);
    tok[17] = (w->a1[17] + 1) % 5;
    fault_put(w, NA, tok, 28, false, "sb_ns_put divergent branch (split)");
    /* Diverge from a2 at 20, a page boundary, with a point. */
    memcpy(tok, w->a2, sizeof tok);
    tu_tokens(&rng, tok + 20, W_TOK - 20, 5);
    tok[20] = (w->a2[20] + 1) % 5;
    fault_put(w, NA, tok, 26, true, "sb_ns_put divergent branch (split, point)");
    /* A stored prefix ending mid-edge gets a point: a split, no new page. */
    fault_put(w, NA, w->a1, 14, true, "sb_ns_put point mid-edge (split)");
    fault_put(w, NB, w->b1, 15, true, "sb_ns_put point mid-edge (recurrent)");
    world_close(w);
}

typedef struct commit_ctx {
    int ns;
    const uint32_t *tok;
    size_t n;
    size_t n_pages;
    sb_page *pages[16];
    sb_page *orig[16];
    const void *point;
} commit_ctx;

static int op_commit(world *w, void *vctx)
{
    commit_ctx *c = vctx;
    return sb_ns_commit(w->ns[c->ns], c->tok, c->n, c->pages, c->point);
}

static void check_commit_fail(world *w, void *vctx)
{
    (void)w;
    commit_ctx *c = vctx;
    for (size_t i = 0; i < c->n_pages; i++) {
        assert_ptr_equal(c->pages[i], c->orig[i]); /* none replaced */
        assert_int_equal(sb_page_tokens(c->pages[i]), 0); /* none committed */
    }
}

static void fault_commit(world *w, int k, const uint32_t *tok, size_t n, bool point,
                         size_t n_known, const char *what)
{
    const tu_layout *l = w->lay[k];
    uint32_t pt = l->page_tokens;
    commit_ctx c = { .ns = k, .tok = tok, .n = n, .n_pages = (n + pt - 1) / pt };
    assert_true(c.n_pages <= 16);
    alloc_pages(w->ns[k], l, tok, n, c.pages);
    memcpy(c.orig, c.pages, sizeof c.pages);
    void *pbuf = point ? tu_point(l, tok, n) : NULL;
    c.point = pbuf;
    w_probe(w, k, tok, n);
    fault_loop(w, op_commit, &c, check_commit_fail, what);
    int has_point = 0;
    assert_int_equal(verify_match(w->ns[k], l, tok, n, &has_point), n);
    assert_int_equal(has_point, point);
    /* Regions the index held already were deduplicated: the caller's page
     * was replaced by the index's; the rest are the caller's, committed. */
    for (size_t r = 0; r < c.n_pages; r++) {
        size_t k_tok = n - r * pt < pt ? n - r * pt : pt;
        if (r < n_known)
            assert_ptr_not_equal(c.pages[r], c.orig[r]);
        else
            assert_ptr_equal(c.pages[r], c.orig[r]);
        assert_true(sb_page_tokens(c.pages[r]) >= k_tok);
        assert_true(tu_page_holds(w->ns[k], l, c.pages[r], tok, r, k_tok));
        sb_page_unref(c.pages[r]);
    }
    free(pbuf);
    tu_check(w->st);
}

static void test_fault_commit(void **state)
{
    (void)state;
    world *w = world_std();
    uint32_t tok[W_TOK];
    uint64_t rng = 24;
    tu_tokens(&rng, tok, W_TOK, 5);
    tok[0] = 9;
    fault_commit(w, NA, tok, 10, false, 0, "sb_ns_commit new sequence");
    /* a1's first two pages are indexed: deduplicated; then a new tail. */
    uint32_t ext[W_TOK];
    memcpy(ext, w->a1, sizeof ext);
    tu_tokens(&rng, ext + 8, W_TOK - 8, 5);
    ext[8] = (w->a1[8] + 1) % 5;
    fault_commit(w, NA, ext, 18, true, 2, "sb_ns_commit dedup + split + point");
    /* Only known pages, a point mid-edge. */
    fault_commit(w, NA, w->a2, 22, true, 6, "sb_ns_commit known prefix + point");
    memcpy(ext, w->c1, sizeof ext);
    tu_tokens(&rng, ext + 12, W_TOK - 12, 5);
    fault_commit(w, NC, ext, 15, false, 12, "sb_ns_commit extension (page_tokens 1)");
    world_close(w);
}

typedef struct match_ctx {
    int ns;
    const uint32_t *tok;
    size_t n;
    sb_match *m;
} match_ctx;

static int op_match(world *w, void *vctx)
{
    match_ctx *c = vctx;
    c->m = (sb_match *)&c->m;
    return sb_ns_match(w->ns[c->ns], c->tok, c->n, &c->m);
}

static void check_match_fail(world *w, void *vctx)
{
    (void)w;
    match_ctx *c = vctx;
    assert_null(c->m);
}

static void test_fault_match(void **state)
{
    (void)state;
    world *w = world_std();
    match_ctx c = { .ns = NA, .tok = w->a1, .n = 40 };
    fault_loop(w, op_match, &c, check_match_fail, "sb_ns_match");
    sb_match_info info;
    assert_int_equal(sb_match_get_info(c.m, &info), SB_OK);
    assert_int_equal(info.n_tokens, 30);
    assert_true(info.has_point);
    void **bufs = tu_bufs(&LAY_A, 30);
    assert_int_equal(sb_match_restore(c.m, 30, bufs, NULL), SB_OK);
    assert_true(tu_state_equal(&LAY_A, w->a1, 30, bufs));
    tu_free_state(&LAY_A, bufs);
    sb_match_release(c.m);
    match_ctx cb = { .ns = NB, .tok = w->b1, .n = 15 };
    fault_loop(w, op_match, &cb, check_match_fail, "sb_ns_match (recurrent)");
    assert_int_equal(sb_match_get_info(cb.m, &info), SB_OK);
    assert_int_equal(info.n_tokens, 9);
    sb_match_release(cb.m);
    world_close(w);
}

typedef struct pin_ctx {
    int ns;
    const uint32_t *tok;
    size_t n;
    uint64_t ttl;
    uint64_t id;
    size_t n_pinned;
} pin_ctx;

static int op_pin(world *w, void *vctx)
{
    pin_ctx *c = vctx;
    c->n_pinned = 12345;
    return sb_ns_pin(w->ns[c->ns], c->tok, c->n, c->ttl, &c->id, &c->n_pinned);
}

static void test_fault_pin(void **state)
{
    (void)state;
    world *w = world_std();
    snap before;
    w_snap(w, &before);
    pin_ctx c = { .ns = NA, .tok = w->a1, .n = 40, .ttl = 0 };
    fault_loop(w, op_pin, &c, NULL, "sb_ns_pin");
    assert_int_equal(c.n_pinned, 30);
    sb_stats s;
    assert_int_equal(sb_store_stats(w->st, &s), SB_OK);
    assert_int_equal(s.pins, 1);
    assert_int_equal(s.pinned_pages, before.s.pinned_pages + 8);
    pin_ctx c2 = { .ns = NB, .tok = w->b1, .n = 20, .ttl = 1000 };
    fault_loop(w, op_pin, &c2, NULL, "sb_ns_pin (ttl)");
    assert_int_equal(c2.n_pinned, 20);
    assert_int_equal(sb_store_stats(w->st, &s), SB_OK);
    assert_int_equal(s.pins, 2);
    assert_int_equal(sb_ns_unpin(w->ns[NA], c.id), SB_OK);
    assert_int_equal(sb_ns_unpin(w->ns[NB], c2.id), SB_OK);
    w_same(w, &before);
    world_close(w);
}

typedef struct page_ctx {
    int ns;
    sb_page *page;
    sb_page *orig;
    uint32_t n_keep;
} page_ctx;

static int op_page_alloc(world *w, void *vctx)
{
    page_ctx *c = vctx;
    c->page = NULL;
    return sb_ns_page_alloc(w->ns[c->ns], &c->page);
}

static void test_fault_page_alloc(void **state)
{
    (void)state;
    world *w = world_std();
    snap before;
    w_snap(w, &before);
    page_ctx c = { .ns = NA };
    fault_loop(w, op_page_alloc, &c, NULL, "sb_ns_page_alloc");
    assert_non_null(c.page);
    assert_int_equal(sb_page_tokens(c.page), 0);
    uint8_t *d = sb_page_data(c.page);
    assert_int_equal((uintptr_t)d % 4096, 0);
    memset(d, 0xab, 4096); /* all of it is ours */
    sb_stats s;
    assert_int_equal(sb_store_stats(w->st, &s), SB_OK);
    assert_int_equal(s.ram_pages, before.s.ram_pages + 1);
    assert_int_equal(s.ram_bytes, before.s.ram_bytes + 4096);
    sb_page_unref(c.page);
    w_same(w, &before);
    world_close(w);
}

static int op_page_writable(world *w, void *vctx)
{
    page_ctx *c = vctx;
    return sb_page_writable(w->ns[c->ns], &c->page, c->n_keep);
}

static void check_writable_fail(world *w, void *vctx)
{
    (void)w;
    page_ctx *c = vctx;
    assert_ptr_equal(c->page, c->orig);
}

static void test_fault_page_writable(void **state)
{
    (void)state;
    world *w = world_std();
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(w->ns[NA], w->a1, 30, &m), SB_OK);
    static const struct { size_t region; uint32_t keep; } cases[] = { { 7, 2 }, { 3, 4 },
                                                                       { 0, 1 } };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        page_ctx c = { .ns = NA, .n_keep = cases[i].keep };
        assert_int_equal(sb_match_pages(m, cases[i].region, 1, &c.page), SB_OK);
        c.orig = c.page;
        snap before;
        w_snap(w, &before);
        fault_loop(w, op_page_writable, &c, check_writable_fail, "sb_page_writable");
        assert_ptr_not_equal(c.page, c.orig);
        assert_int_equal(sb_page_tokens(c.page), 0);
        assert_true(tu_page_holds(w->ns[NA], &LAY_A, c.page, w->a1, cases[i].region, c.n_keep));
        sb_stats s;
        assert_int_equal(sb_store_stats(w->st, &s), SB_OK);
        assert_int_equal(s.ram_pages, before.s.ram_pages + 1);
        sb_page_unref(c.page);
        w_same(w, &before); /* the reference to the old page was dropped */
    }
    sb_match_release(m);
    world_close(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strerror_every_code),
        cmocka_unit_test(test_miss_names),
        cmocka_unit_test(test_store_open_inval),
        cmocka_unit_test(test_store_open_unsupported_dir),
        cmocka_unit_test(test_store_calls_inval),
        cmocka_unit_test(test_ns_open_inval),
        cmocka_unit_test(test_ns_open_layout),
        cmocka_unit_test(test_ns_open_page_size),
        cmocka_unit_test(test_ns_open_layout_mismatch),
        cmocka_unit_test(test_ns_info_inval),
        cmocka_unit_test(test_put_errors),
        cmocka_unit_test(test_too_many_tokens),
        cmocka_unit_test(test_match_errors),
        cmocka_unit_test(test_restore_errors),
        cmocka_unit_test(test_match_pages_errors),
        cmocka_unit_test(test_page_alloc_errors),
        cmocka_unit_test(test_page_writable_errors),
        cmocka_unit_test(test_commit_errors),
        cmocka_unit_test(test_pin_errors),
        cmocka_unit_test(test_budget_put_partial),
        cmocka_unit_test(test_budget_held_pages),
        cmocka_unit_test(test_budget_namespace),
        cmocka_unit_test(test_budget_page_over_budget),
        cmocka_unit_test_teardown(test_budget_refusal_evicts_nothing_page_alloc,
                                  refusal_teardown),
        cmocka_unit_test_teardown(test_budget_refusal_evicts_nothing_put, refusal_teardown),
        cmocka_unit_test(test_fault_store_open),
        cmocka_unit_test(test_fault_ns_open),
        cmocka_unit_test(test_fault_put_new),
        cmocka_unit_test(test_fault_put_extend),
        cmocka_unit_test(test_fault_put_split),
        cmocka_unit_test(test_fault_commit),
        cmocka_unit_test(test_fault_match),
        cmocka_unit_test(test_fault_pin),
        cmocka_unit_test(test_fault_page_alloc),
        cmocka_unit_test(test_fault_page_writable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
