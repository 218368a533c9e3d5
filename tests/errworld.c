/* errworld.c -- the error tests' world: see errworld.h. */
#include "errworld.h"

#include <stdlib.h>
#include <string.h>

/* A: plain pages with optional point states. B: a recurrent layout (a
 * restore needs a point at exactly L). C: one token per page, no points. */
const tu_layout LAY_A = { .page_tokens = 4, .n_tensors = 2, .bpt = { 8, 24 },
                                 .point_bytes = 32, .model = "errors-a" };
const tu_layout LAY_B = { .page_tokens = 3, .n_tensors = 1, .bpt = { 16 },
                                 .point_bytes = 24, .flags = SB_LAYOUT_POINT_REQUIRED,
                                 .model = "errors-b" };
const tu_layout LAY_C = { .page_tokens = 1, .n_tensors = 3, .bpt = { 4, 12, 4 },
                                 .model = "errors-c" };

static uint64_t fake_clock(void *ctx)
{
    return *(const uint64_t *)ctx;
}

world *world_open(const sb_config *cfg_in)
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

void world_free(world *w)
{
    for (int i = 0; i < W_NS; i++)
        sb_ns_close(w->ns[i]);
    assert_int_equal(sb_store_close(w->st), SB_OK);
    free(w);
}

void world_close(world *w)
{
    tu_check(w->st);
    world_free(w);
}

void w_probe(world *w, int ns, const uint32_t *tok, size_t n)
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
size_t verify_match(sb_ns *ns, const tu_layout *l, const uint32_t *tok, size_t n,
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

size_t w_len(world *w, int ns, const uint32_t *tok, size_t n)
{
    return verify_match(w->ns[ns], w->lay[ns], tok, n, NULL);
}

void w_snap(world *w, snap *s)
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
void w_same(world *w, const snap *before)
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

world *world_std(void)
{
    world *w = world_open(NULL);
    world_fill(w);
    return w;
}


/* Fresh pages of ns holding the synthetic state of tok[0, n). */
void alloc_pages(sb_ns *ns, const tu_layout *l, const uint32_t *tok, size_t n,
                        sb_page **pages)
{
    size_t n_reg = (n + l->page_tokens - 1) / l->page_tokens;
    for (size_t r = 0; r < n_reg; r++)
        assert_int_equal(sb_ns_page_alloc(ns, &pages[r]), SB_OK);
    tu_fill_range(ns, l, tok, 0, n, pages);
}

sb_layout base_layout(const uint32_t *bpt, uint32_t n_tensors)
{
    return (sb_layout){ .model_id = "layout-model", .model_id_bytes = 12, .page_tokens = 16,
                        .n_tensors = n_tensors, .bytes_per_token = bpt };
}
