/* Description: allocation failure. Each call that allocates is run with
 * its 1st, 2nd, 3rd, ... allocation failing (sb_store_fault_alloc, and
 * sb_config.fault_alloc_nth for sb_store_open) until it succeeds. Every
 * failing attempt returns SB_ERR_NOMEM and changes nothing (as
 * test_errors.c defines it, through errworld.h); the attempt that succeeds
 * does what the call promises. The budgets are ample, so no attempt may
 * evict anything. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errworld.h"

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
