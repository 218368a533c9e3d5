/* Description: namespace isolation. The same tokens under two scopes, or
 * under two model identities, share nothing: a put in one is not matched in
 * the other (L == 0), each restores its own bytes from its own pages (the
 * sb_page pointers differ), and closing the handles of one leaves the other
 * alone. Reopening an (identity, scope) with the same layout finds what was
 * put; with another layout it fails with SB_ERR_LAYOUT_MISMATCH. A lookup
 * that restores nothing while the same scope under another model identity
 * holds the prefix reports SB_MISS_MODEL_MISMATCH (and counts it in
 * stats.misses); another scope holding it does not. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* Open (model, scope[0, scope_bytes)) with l's geometry; assert rc. */
static sb_ns *open_raw(sb_store *st, const tu_layout *l, const void *model, size_t model_bytes,
                       const void *scope, size_t scope_bytes, int want)
{
    sb_layout lay = { .model_id = model, .model_id_bytes = model_bytes,
                      .page_tokens = l->page_tokens, .n_tensors = l->n_tensors,
                      .bytes_per_token = l->bpt, .point_bytes = l->point_bytes,
                      .flags = l->flags };
    sb_ns *ns = (sb_ns *)1;
    assert_int_equal(sb_ns_open(st, &lay, scope, scope_bytes, &ns), want);
    if (want != SB_OK)
        assert_null(ns);
    return ns;
}

static uint64_t ns_id(sb_ns *ns)
{
    sb_ns_info info;
    assert_int_equal(sb_ns_get_info(ns, &info), SB_OK);
    return info.ns_id;
}

static sb_ns_info ns_info(sb_ns *ns)
{
    sb_ns_info info;
    assert_int_equal(sb_ns_get_info(ns, &info), SB_OK);
    return info;
}

/* Match tokens[0, n): L into *L, the miss reason returned. */
static sb_miss match_miss(sb_ns *ns, const uint32_t *tokens, size_t n, size_t *L)
{
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, tokens, n, &m), SB_OK);
    sb_match_info info;
    assert_int_equal(sb_match_get_info(m, &info), SB_OK);
    sb_match_release(m);
    *L = info.n_tokens;
    return info.miss;
}

/* Restore the full match of tokens[0, n) (asserting L == n) into fresh
 * buffers, owned by the caller (tu_free_state). */
static void **restore_all(sb_ns *ns, const tu_layout *l, const uint32_t *tokens, size_t n)
{
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, tokens, n, &m), SB_OK);
    sb_match_info info;
    assert_int_equal(sb_match_get_info(m, &info), SB_OK);
    assert_int_equal(info.n_tokens, n);
    void **bufs = tu_bufs(l, n);
    assert_int_equal(sb_match_restore(m, n, bufs, NULL), SB_OK);
    sb_match_release(m);
    return bufs;
}

/* The pages of the full match of tokens[0, n): new references in out. */
static size_t match_pages(sb_ns *ns, const uint32_t *tokens, size_t n, sb_page **out)
{
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, tokens, n, &m), SB_OK);
    sb_match_info info;
    assert_int_equal(sb_match_get_info(m, &info), SB_OK);
    assert_int_equal(sb_match_pages(m, 0, info.n_pages, out), SB_OK);
    sb_match_release(m);
    return info.n_pages;
}

/* Each namespace restores its own bytes, and not the other's (which proves
 * the two state generators really differ). */
static void own_bytes(sb_ns *a, const tu_layout *la, sb_ns *b, const tu_layout *lb,
                      const uint32_t *tok, size_t n)
{
    void **ra = restore_all(a, la, tok, n);
    void **rb = restore_all(b, lb, tok, n);
    assert_true(tu_state_equal(la, tok, n, ra));
    assert_true(tu_state_equal(lb, tok, n, rb));
    assert_false(tu_state_equal(lb, tok, n, ra));
    assert_false(tu_state_equal(la, tok, n, rb));
    tu_free_state(la, ra);
    tu_free_state(lb, rb);
}

/* No page of a's match of tok is a page of b's. */
static void distinct_pages(sb_ns *a, sb_ns *b, const uint32_t *tok, size_t n)
{
    sb_page *pa[16], *pb[16];
    size_t na = match_pages(a, tok, n, pa), nb = match_pages(b, tok, n, pb);
    assert_true(na > 0 && na <= 16 && na == nb);
    for (size_t i = 0; i < na; i++)
        for (size_t j = 0; j < nb; j++)
            assert_ptr_not_equal(pa[i], pb[j]);
    for (size_t i = 0; i < na; i++) {
        sb_page_unref(pa[i]);
        sb_page_unref(pb[i]);
    }
}

/* Two scopes under one model. The store holds one model identity for both,
 * so the bytes put are made different on purpose: scope a gets the state of
 * "state-a", scope b that of "state-b". */
static void test_isolation_scopes(void **state)
{
    (void)state;
    tu_layout l = { .page_tokens = 4, .n_tensors = 2, .bpt = { 16, 8 }, .model = "iso" };
    tu_layout la = l, lb = l;
    la.model = "state-a";
    lb.model = "state-b";
    sb_store *st = tu_store(0);
    sb_ns *a = tu_ns(st, &l, "tenant-a");
    sb_ns *b = tu_ns(st, &l, "tenant-b");
    assert_int_not_equal(ns_id(a), ns_id(b));
    assert_int_equal(tu_stats(st).namespaces, 2);
    uint64_t rng = 5;
    uint32_t tok[30];
    tu_tokens(&rng, tok, 30, 1000);

    /* A put in a is not matched in b. */
    tu_put(a, &la, tok, 30, false, SB_OK);
    size_t L;
    assert_int_equal(match_miss(b, tok, 30, &L), SB_MISS_NO_PREFIX);
    assert_int_equal(L, 0);
    assert_int_equal(ns_info(b).indexed_pages, 0);
    assert_int_equal(ns_info(b).ram_bytes, 0);
    assert_int_equal(ns_info(a).indexed_pages, 8);

    /* The same tokens put in b are new pages, not deduplicated with a's. */
    sb_stats s0 = tu_stats(st);
    tu_put(b, &lb, tok, 30, false, SB_OK);
    sb_stats s1 = tu_stats(st);
    assert_int_equal(s1.pages_new - s0.pages_new, 8);
    assert_int_equal(s1.pages_dedup, s0.pages_dedup);
    assert_int_equal(s1.indexed_pages, 16);
    tu_check(st);
    own_bytes(a, &la, b, &lb, tok, 30);
    distinct_pages(a, b, tok, 30);

    /* Close every handle of a while b holds a match and page references:
     * b is undisturbed, and a's data outlives its handles. */
    sb_match *mb = NULL;
    assert_int_equal(sb_ns_match(b, tok, 30, &mb), SB_OK);
    sb_page *held = NULL;
    assert_int_equal(sb_match_pages(mb, 7, 1, &held), SB_OK);
    uint64_t id_a = ns_id(a);
    sb_ns_close(a);
    a = NULL;
    tu_check(st);
    void **bufs = tu_bufs(&lb, 30);
    assert_int_equal(sb_match_restore(mb, 30, bufs, NULL), SB_OK);
    assert_true(tu_state_equal(&lb, tok, 30, bufs));
    tu_free_state(&lb, bufs);
    sb_match_release(mb);
    assert_int_equal(tu_match_verify(b, &lb, tok, 30), 30);
    assert_int_equal(tu_stats(st).namespaces, 2);

    /* Reopen a: the same namespace, its own bytes still there. */
    a = tu_ns(st, &l, "tenant-a");
    assert_int_equal(ns_id(a), id_a);
    own_bytes(a, &la, b, &lb, tok, 30);

    /* Closing b (with a page reference outstanding) leaves a alone. */
    sb_ns_close(b);
    assert_int_equal(tu_match_verify(a, &la, tok, 30), 30);
    sb_page_unref(held);
    tu_check(st);
    b = tu_ns(st, &l, "tenant-b");
    own_bytes(a, &la, b, &lb, tok, 30);
    sb_ns_close(a);
    sb_ns_close(b);
    sb_store_close(st);
}

/* Two model identities under one scope: the synthetic state differs by the
 * model string, so each namespace's own bytes are checked directly. */
static void test_isolation_models(void **state)
{
    (void)state;
    tu_layout lx = { .page_tokens = 8, .n_tensors = 3, .bpt = { 8, 24, 5 }, .model = "model-x" };
    tu_layout ly = lx;
    ly.model = "model-y";
    sb_store *st = tu_store(0);
    sb_ns *x = tu_ns(st, &lx, "shared-scope");
    sb_ns *y = tu_ns(st, &ly, "shared-scope");
    assert_int_not_equal(ns_id(x), ns_id(y));
    uint64_t rng = 6;
    uint32_t tok[50];
    tu_tokens(&rng, tok, 50, 1000);

    tu_put(x, &lx, tok, 50, false, SB_OK);
    size_t L;
    assert_int_equal(match_miss(y, tok, 50, &L), SB_MISS_MODEL_MISMATCH);
    assert_int_equal(L, 0);
    sb_stats s0 = tu_stats(st);
    tu_put(y, &ly, tok, 50, false, SB_OK);
    sb_stats s1 = tu_stats(st);
    assert_int_equal(s1.pages_new - s0.pages_new, 7);
    assert_int_equal(s1.pages_dedup, s0.pages_dedup);
    tu_check(st);
    own_bytes(x, &lx, y, &ly, tok, 50);
    distinct_pages(x, y, tok, 50);
    /* Every prefix restores its own model's bytes. */
    for (size_t n = 1; n <= 50; n += 7) {
        assert_int_equal(tu_match_verify(x, &lx, tok, n), n);
        assert_int_equal(tu_match_verify(y, &ly, tok, n), n);
    }

    /* Closing x's handle leaves y alone; reopening x finds x. */
    uint64_t id_x = ns_id(x);
    sb_ns_close(x);
    assert_int_equal(tu_match_verify(y, &ly, tok, 50), 50);
    x = tu_ns(st, &lx, "shared-scope");
    assert_int_equal(ns_id(x), id_x);
    own_bytes(x, &lx, y, &ly, tok, 50);
    tu_check(st);
    sb_ns_close(x);
    sb_ns_close(y);
    sb_store_close(st);
}

/* Identity and scope are compared as whole byte strings: no concatenation
 * ambiguity, embedded zero bytes count, and NULL is the same empty scope as
 * a zero-length non-NULL one. */
static void test_isolation_identity_bytes(void **state)
{
    (void)state;
    tu_layout l = { .page_tokens = 4, .n_tensors = 1, .bpt = { 32 } };
    sb_store *st = tu_store(0);
    uint32_t tok[10] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };

    sb_ns *ab_c = open_raw(st, &l, "ab", 2, "c", 1, SB_OK);
    sb_ns *a_bc = open_raw(st, &l, "a", 1, "bc", 2, SB_OK);
    assert_int_not_equal(ns_id(ab_c), ns_id(a_bc));
    tu_put(ab_c, &l, tok, 10, false, SB_OK);
    assert_int_equal(tu_match_len(a_bc, tok, 10), 0);

    sb_ns *z1 = open_raw(st, &l, "m", 1, "x\0y", 3, SB_OK);
    sb_ns *z2 = open_raw(st, &l, "m", 1, "x\0z", 3, SB_OK);
    sb_ns *z3 = open_raw(st, &l, "m", 1, "x", 1, SB_OK);
    tu_put(z1, &l, tok, 10, false, SB_OK);
    assert_int_equal(tu_match_len(z2, tok, 10), 0);
    assert_int_equal(tu_match_len(z3, tok, 10), 0);
    sb_ns *m1 = open_raw(st, &l, "m\0a", 3, "s", 1, SB_OK);
    sb_ns *m2 = open_raw(st, &l, "m\0b", 3, "s", 1, SB_OK);
    tu_put(m1, &l, tok, 10, false, SB_OK);
    assert_int_equal(tu_match_len(m2, tok, 10), 0);

    sb_ns *e1 = open_raw(st, &l, "m", 1, NULL, 0, SB_OK);
    sb_ns *e2 = open_raw(st, &l, "m", 1, "", 0, SB_OK);
    assert_int_equal(ns_id(e1), ns_id(e2));
    tu_put(e1, &l, tok, 10, false, SB_OK);
    assert_int_equal(tu_match_verify(e2, &l, tok, 10), 10);
    tu_check(st);

    sb_ns *all[] = { ab_c, a_bc, z1, z2, z3, m1, m2, e1, e2 };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        sb_ns_close(all[i]);
    sb_store_close(st);
}

/* SB_MISS_MODEL_MISMATCH: only for a lookup that restores nothing while the
 * same scope under another identity holds a prefix of the request. */
static void test_isolation_model_mismatch_reason(void **state)
{
    (void)state;
    tu_layout lx = { .page_tokens = 4, .n_tensors = 2, .bpt = { 8, 8 }, .model = "model-x" };
    tu_layout ly = lx, lz = lx;
    ly.model = "model-y";
    lz.model = "model-z";
    lz.page_tokens = 16; /* another identity may have another geometry */
    sb_store *st = tu_store(0);
    sb_ns *xs = tu_ns(st, &lx, "s");
    sb_ns *ys = tu_ns(st, &ly, "s");
    sb_ns *xt = tu_ns(st, &lx, "t");
    sb_ns *yt = tu_ns(st, &ly, "t");
    sb_ns *xe = tu_ns(st, &lx, NULL);
    sb_ns *ye = tu_ns(st, &ly, "");
    sb_ns *zs = tu_ns(st, &lz, "s");
    uint64_t rng = 8;
    uint32_t s[20], t[20], u[20], req[24];
    tu_tokens(&rng, s, 20, 1000);
    tu_tokens(&rng, t, 20, 1000);
    tu_tokens(&rng, u, 20, 1000);
    t[0] = s[0] + 1000;
    u[0] = s[0] + 2000;
    tu_put(xs, &lx, s, 20, false, SB_OK);
    tu_put(xe, &lx, t, 20, false, SB_OK);
    tu_put(zs, &lz, u, 20, false, SB_OK);

    sb_stats s0 = tu_stats(st);
    size_t L;
    uint64_t want_mm = 0, want_np = 0, want_mm_tokens = 0;
    /* Same scope, other model holds the whole request, or a prefix of it. */
    assert_int_equal(match_miss(ys, s, 20, &L), SB_MISS_MODEL_MISMATCH);
    want_mm++, want_mm_tokens += 20;
    memcpy(req, s, 5 * sizeof *req);
    tu_tokens(&rng, req + 5, 19, 1000);
    req[5] = 5000;
    assert_int_equal(match_miss(ys, req, 24, &L), SB_MISS_MODEL_MISMATCH);
    want_mm++, want_mm_tokens += 24;
    assert_int_equal(match_miss(ys, s, 1, &L), SB_MISS_MODEL_MISMATCH);
    want_mm++, want_mm_tokens += 1;
    /* A model with another page size holds it. */
    assert_int_equal(match_miss(ys, u, 20, &L), SB_MISS_MODEL_MISMATCH);
    want_mm++, want_mm_tokens += 20;
    assert_int_equal(match_miss(xs, u, 20, &L), SB_MISS_MODEL_MISMATCH);
    want_mm++, want_mm_tokens += 20;
    /* The empty scope, spelled NULL by the holder and "" by the asker. */
    assert_int_equal(match_miss(ye, t, 20, &L), SB_MISS_MODEL_MISMATCH);
    want_mm++, want_mm_tokens += 20;

    /* Nobody in the scope holds it: no prefix. */
    req[0] = 7777;
    assert_int_equal(match_miss(ys, req, 24, &L), SB_MISS_NO_PREFIX);
    want_np++;
    /* Another scope holds it, under the same or another model: no prefix. */
    assert_int_equal(match_miss(xt, s, 20, &L), SB_MISS_NO_PREFIX);
    want_np++;
    assert_int_equal(match_miss(yt, s, 20, &L), SB_MISS_NO_PREFIX);
    want_np++;
    assert_int_equal(match_miss(ys, t, 20, &L), SB_MISS_NO_PREFIX); /* t is in scope "" */
    want_np++;
    assert_int_equal(match_miss(ye, s, 20, &L), SB_MISS_NO_PREFIX); /* s is in scope "s" */
    want_np++;
    assert_int_equal(L, 0);

    sb_stats s1 = tu_stats(st);
    assert_int_equal(s1.misses[SB_MISS_MODEL_MISMATCH] - s0.misses[SB_MISS_MODEL_MISMATCH],
                     want_mm);
    assert_int_equal(s1.miss_tokens_by_reason[SB_MISS_MODEL_MISMATCH] -
                         s0.miss_tokens_by_reason[SB_MISS_MODEL_MISMATCH],
                     want_mm_tokens);
    assert_int_equal(s1.misses[SB_MISS_NO_PREFIX] - s0.misses[SB_MISS_NO_PREFIX], want_np);
    assert_int_equal(s1.hits, s0.hits);

    /* Once ys restores something, the lookup is a hit, not a miss by model
     * (misses[] counts lookups restoring nothing). */
    tu_put(ys, &ly, s, 6, false, SB_OK);
    assert_int_equal(tu_match_verify(ys, &ly, s, 20), 6);
    sb_stats s2 = tu_stats(st);
    assert_int_equal(s2.misses[SB_MISS_MODEL_MISMATCH], s1.misses[SB_MISS_MODEL_MISMATCH]);
    assert_int_equal(s2.hits, s1.hits + 1);
    tu_check(st);

    sb_ns *all[] = { xs, ys, xt, yt, xe, ye, zs };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        sb_ns_close(all[i]);
    sb_store_close(st);
}

/* Many scopes, so that namespaces of different scopes share the store's
 * hash buckets: a lookup under model y in scope a<i> must not take model x
 * in scope o<j> (holding the prefix) for its own scope, whatever the
 * bucket; nor see o<j>'s data. Then each a<i> gets its own x twin, and
 * the reason turns to SB_MISS_MODEL_MISMATCH. */
static void test_isolation_many_scopes(void **state)
{
    (void)state;
    enum { N = 64 };
    tu_layout lx = { .page_tokens = 4, .n_tensors = 1, .bpt = { 8 }, .model = "model-x" };
    tu_layout ly = lx;
    ly.model = "model-y";
    sb_store *st = tu_store(0);
    sb_ns *own[N], *ask[N];
    uint32_t s[9] = { 3, 1, 4, 1, 5, 9, 2, 6, 5 };
    char name[16];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "o%d", i);
        own[i] = tu_ns(st, &lx, name);
        tu_put(own[i], &lx, s, 9, false, SB_OK);
        snprintf(name, sizeof name, "a%d", i);
        ask[i] = tu_ns(st, &ly, name);
    }
    assert_int_equal(tu_stats(st).namespaces, 2 * N);
    sb_stats s0 = tu_stats(st);
    size_t L;
    for (int i = 0; i < N; i++) {
        assert_int_equal(match_miss(ask[i], s, 9, &L), SB_MISS_NO_PREFIX);
        assert_int_equal(L, 0);
    }
    sb_stats s1 = tu_stats(st);
    assert_int_equal(s1.misses[SB_MISS_MODEL_MISMATCH], s0.misses[SB_MISS_MODEL_MISMATCH]);
    assert_int_equal(s1.misses[SB_MISS_NO_PREFIX] - s0.misses[SB_MISS_NO_PREFIX], N);
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "a%d", i);
        sb_ns *twin = tu_ns(st, &lx, name);
        tu_put(twin, &lx, s, 4, false, SB_OK);
        assert_int_equal(match_miss(ask[i], s, 9, &L), SB_MISS_MODEL_MISMATCH);
        sb_ns_close(twin);
    }
    tu_check(st);
    for (int i = 0; i < N; i++) {
        sb_ns_close(own[i]);
        sb_ns_close(ask[i]);
    }
    sb_store_close(st);
}

/* The same identity and scope with another layout is refused, whether a
 * handle is open or only the namespace's pages remain; the namespace is
 * untouched by the refusal. Other identities or scopes may use any layout. */
static void test_isolation_layout_mismatch(void **state)
{
    (void)state;
    tu_layout l = { .page_tokens = 4, .n_tensors = 2, .bpt = { 8, 16 }, .point_bytes = 32,
                    .model = "lay" };
    sb_store *st = tu_store(0);
    sb_ns *ns = tu_ns(st, &l, "s");
    uint32_t tok[10] = { 10, 20, 30, 40, 50, 60, 70, 80, 90, 100 };
    tu_put(ns, &l, tok, 10, true, SB_OK);

    tu_layout bad[5] = { l, l, l, l, l };
    bad[0].page_tokens = 8;
    bad[1].bpt[1] = 17;
    bad[2].n_tensors = 3;
    bad[2].bpt[2] = 16;
    bad[3].point_bytes = 0;
    bad[4].flags = SB_LAYOUT_POINT_REQUIRED;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < 5; i++)
            open_raw(st, &bad[i], "lay", 3, "s", 1, SB_ERR_LAYOUT_MISMATCH);
        assert_int_equal(tu_stats(st).namespaces, 1);
        tu_check(st);
        if (pass == 0)
            sb_ns_close(ns); /* second pass: no handle, the pages remain */
    }

    /* The same layout reopens it, with its contents. */
    ns = tu_ns(st, &l, "s");
    assert_int_equal(tu_match_verify(ns, &l, tok, 10), 10);
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, tok, 10, &m), SB_OK);
    assert_non_null(sb_match_point(m));
    sb_match_release(m);

    /* Another scope, or another identity, with another layout: fine. */
    sb_ns *o1 = open_raw(st, &bad[0], "lay", 3, "s2", 2, SB_OK);
    sb_ns *o2 = open_raw(st, &bad[1], "lay2", 4, "s", 1, SB_OK);
    assert_int_equal(tu_match_len(o1, tok, 10), 0);
    assert_int_equal(tu_match_len(o2, tok, 10), 0);
    assert_int_equal(tu_stats(st).namespaces, 3);
    tu_check(st);
    sb_ns_close(o1);
    sb_ns_close(o2);
    sb_ns_close(ns);
    sb_store_close(st);
}

/* Several handles on one namespace are one namespace: a put through one is
 * seen through the other, and closing one leaves the other working. */
static void test_isolation_reopen_handles(void **state)
{
    (void)state;
    tu_layout l = { .page_tokens = 3, .n_tensors = 2, .bpt = { 8, 4 } };
    sb_store *st = tu_store(0);
    sb_ns *h1 = tu_ns(st, &l, "same");
    sb_ns *h2 = tu_ns(st, &l, "same");
    assert_int_equal(ns_id(h1), ns_id(h2));
    assert_int_equal(tu_stats(st).namespaces, 1);
    uint64_t rng = 3;
    uint32_t tok[40];
    tu_tokens(&rng, tok, 40, 100);
    tu_put(h1, &l, tok, 20, false, SB_OK);
    assert_int_equal(tu_match_verify(h2, &l, tok, 40), 20);
    tu_put(h2, &l, tok, 40, false, SB_OK);
    sb_ns_close(h1);
    assert_int_equal(tu_match_verify(h2, &l, tok, 40), 40);
    for (int i = 0; i < 3; i++) {
        sb_ns_close(h2);
        assert_int_equal(tu_stats(st).namespaces, 1);
        h2 = tu_ns(st, &l, "same");
        assert_int_equal(tu_match_verify(h2, &l, tok, 40), 40);
    }
    assert_int_equal(ns_info(h2).indexed_pages, 14);
    tu_check(st);
    sb_ns_close(h2);
    sb_store_close(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_isolation_scopes),
        cmocka_unit_test(test_isolation_models),
        cmocka_unit_test(test_isolation_identity_bytes),
        cmocka_unit_test(test_isolation_model_mismatch_reason),
        cmocka_unit_test(test_isolation_many_scopes),
        cmocka_unit_test(test_isolation_layout_mismatch),
        cmocka_unit_test(test_isolation_reopen_handles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
