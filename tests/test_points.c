/* Description: point states. With SB_LAYOUT_POINT_REQUIRED a match restores
 * to the longest position <= the request that has a point state recorded
 * (by put or commit; at page boundaries, mid-page, at sequence ends) and
 * whose pages are all there: has_point is set, sb_match_point and the point
 * argument of sb_match_restore give exactly that position's point bytes, and
 * the miss reason is SB_MISS_NO_POINT when the pages cover more than the last
 * point. Without the flag but with point_bytes, L is the plain match and
 * has_point is set only when L lands exactly on a recorded point. A point for
 * a layout with point_bytes 0 is SB_ERR_INVAL; a restore with a point when
 * n_tokens != L, or when the match has none, is SB_ERR_NO_POINT. Point states
 * that go with evicted pages count in stats.point_evictions. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define OFF_VOCAB 0x40000000u

static size_t lcp(const uint32_t *a, size_t na, const uint32_t *b, size_t nb)
{
    size_t c = 0;
    while (c < na && c < nb && a[c] == b[c])
        c++;
    return c;
}

/* The reference model: stored sequences, and points recorded at position
 * pos of a stored sequence (valid for every request sharing its first pos
 * tokens). */
typedef struct model {
    const uint32_t *seq[4];
    size_t len[4];
    int n_seq;
    struct {
        int seq;
        size_t pos;
    } pt[16];
    int n_pt;
} model;

/* The expected match of req[0, n): matched tokens, and L (point rule). */
static void model_expect(const model *md, const uint32_t *req, size_t n, bool required,
                         size_t *matched, size_t *L, bool *has_point)
{
    size_t m = 0;
    for (int i = 0; i < md->n_seq; i++) {
        size_t c = lcp(req, n, md->seq[i], md->len[i]);
        m = c > m ? c : m;
    }
    size_t best = 0;
    bool at_m = false;
    for (int i = 0; i < md->n_pt; i++) {
        size_t p = md->pt[i].pos;
        if (p > m || lcp(req, n, md->seq[md->pt[i].seq], p) < p)
            continue;
        best = p > best ? p : best;
        at_m |= p == m;
    }
    *matched = m;
    *L = required ? best : m;
    *has_point = required ? best > 0 : at_m;
}

/* Match req[0, n) and check L, n_matched_tokens, has_point, the miss reason,
 * the bytes of the restore and of the point state (both ways), and the
 * SB_ERR_NO_POINT refusals. */
static void check(sb_ns *ns, const tu_layout *l, const uint32_t *req, size_t n, size_t want_m,
                  size_t want_L, bool want_point, sb_miss want_miss)
{
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, req, n, &m), SB_OK);
    sb_match_info info;
    assert_int_equal(sb_match_get_info(m, &info), SB_OK);
    assert_int_equal(info.n_matched_tokens, want_m);
    assert_int_equal(info.n_tokens, want_L);
    assert_int_equal(info.n_pages, (want_L + l->page_tokens - 1) / l->page_tokens);
    assert_int_equal(!!info.has_point, want_point);
    assert_int_equal(info.miss, want_miss);

    size_t L = info.n_tokens;
    void **bufs = tu_bufs(l, L + 1);
    uint8_t *pbuf = malloc(l->point_bytes + 1);
    assert_non_null(pbuf);
    if (want_point) {
        void *want = tu_point(l, req, L);
        const void *mp = sb_match_point(m);
        assert_non_null(mp);
        assert_memory_equal(mp, want, l->point_bytes);
        memset(pbuf, 0, l->point_bytes);
        assert_int_equal(sb_match_restore(m, L, bufs, pbuf), SB_OK);
        assert_memory_equal(pbuf, want, l->point_bytes);
        assert_true(tu_state_equal(l, req, L, bufs));
        free(want);
        if (L > 0)
            assert_int_equal(sb_match_restore(m, L - 1, bufs, pbuf), SB_ERR_NO_POINT);
    } else {
        assert_null(sb_match_point(m));
        assert_int_equal(sb_match_restore(m, L, bufs, pbuf), SB_ERR_NO_POINT);
    }
    assert_int_equal(sb_match_restore(m, L, bufs, NULL), SB_OK);
    assert_true(tu_state_equal(l, req, L, bufs));
    free(pbuf);
    tu_free_state(l, bufs);
    sb_match_release(m);
}

/* check() with the expectation from the model. */
static void check_model(sb_ns *ns, const tu_layout *l, const model *md, const uint32_t *req,
                        size_t n)
{
    bool required = l->flags & SB_LAYOUT_POINT_REQUIRED;
    size_t m, L;
    bool hp;
    model_expect(md, req, n, required, &m, &L, &hp);
    sb_miss miss = L == n ? SB_MISS_NONE : m > L ? SB_MISS_NO_POINT : SB_MISS_NO_PREFIX;
    check(ns, l, req, n, m, L, hp, miss);
}

/* Every prefix of every stored sequence, and a request leaving each one at
 * every position. */
static void check_all(sb_ns *ns, const tu_layout *l, const model *md)
{
    uint32_t req[128];
    for (int i = 0; i < md->n_seq; i++) {
        for (size_t d = 0; d <= md->len[i]; d++) {
            if (d)
                check_model(ns, l, md, md->seq[i], d);
            memcpy(req, md->seq[i], d * sizeof *req);
            req[d] = OFF_VOCAB;
            req[d + 1] = 1;
            check_model(ns, l, md, req, d + 2);
        }
    }
}

/* Record a point at pos of sequence i, by put (copy mode). */
static void put_point(sb_ns *ns, const tu_layout *l, model *md, int i, size_t pos)
{
    tu_put(ns, l, md->seq[i], pos, true, SB_OK);
    md->pt[md->n_pt].seq = i;
    md->pt[md->n_pt].pos = pos;
    md->n_pt++;
}

/* ---- SB_LAYOUT_POINT_REQUIRED ------------------------------------------------------- */

static void test_points_required(void **state)
{
    (void)state;
    tu_layout l = { .page_tokens = 8, .n_tensors = 2, .bpt = { 16, 8 }, .point_bytes = 40,
                    .flags = SB_LAYOUT_POINT_REQUIRED, .model = "recurrent" };
    sb_store *st = tu_store(0);
    sb_ns *ns = tu_ns(st, &l, "pts");
    uint64_t rng = 31;
    /* s: 37 tokens; t: s's first 20, then its own (30 tokens). */
    uint32_t s[37], t[30];
    tu_tokens(&rng, s, 37, 1000);
    memcpy(t, s, 20 * sizeof *t);
    tu_tokens(&rng, t + 20, 10, 1000);
    t[20] = s[20] + 1000;
    model md = { .seq = { s, t }, .len = { 37, 30 }, .n_seq = 1 }; /* t: later */

    /* Pages without any point: nothing is restorable, for want of a point. */
    tu_put(ns, &l, s, 37, false, SB_OK);
    md.n_pt = 0;
    check(ns, &l, s, 37, 37, 0, false, SB_MISS_NO_POINT);
    assert_int_equal(tu_stats(st).misses[SB_MISS_NO_POINT], 1);
    check_all(ns, &l, &md);

    /* Points at the end, mid-page, on page boundaries; out of order, so
     * later ones split edges that earlier ones made. */
    put_point(ns, &l, &md, 0, 37);
    check_all(ns, &l, &md);
    put_point(ns, &l, &md, 0, 13);
    put_point(ns, &l, &md, 0, 8);
    put_point(ns, &l, &md, 0, 24);
    tu_check(st);
    check_all(ns, &l, &md);
    assert_int_equal(tu_stats(st).points, 4);

    /* The branch t, with points at its end and at the branch point. */
    md.n_seq = 2;
    put_point(ns, &l, &md, 1, 30);
    put_point(ns, &l, &md, 1, 20);
    tu_check(st);
    check_all(ns, &l, &md);
    assert_int_equal(tu_stats(st).points, 6);

    /* A point put again at the same position changes nothing. */
    put_point(ns, &l, &md, 0, 13);
    assert_int_equal(tu_stats(st).points, 6);
    check_all(ns, &l, &md);

    /* Spot checks of the model's verdicts. */
    check(ns, &l, s, 23, 23, 20, true, SB_MISS_NO_POINT);
    check(ns, &l, s, 24, 24, 24, true, SB_MISS_NONE);
    check(ns, &l, s, 12, 12, 8, true, SB_MISS_NO_POINT);
    check(ns, &l, s, 7, 7, 0, false, SB_MISS_NO_POINT);
    uint32_t req[16];
    memcpy(req, s, 5 * sizeof *req);
    req[5] = OFF_VOCAB;
    check(ns, &l, req, 6, 5, 0, false, SB_MISS_NO_POINT); /* pages cover 5 */
    memcpy(req, s, 15 * sizeof *req);
    req[15] = OFF_VOCAB;
    check(ns, &l, req, 16, 15, 13, true, SB_MISS_NO_POINT);
    sb_ns_close(ns);
    sb_store_close(st);
}

/* Points through zero-copy commits: the point argument of sb_ns_commit,
 * also on a commit whose pages are all deduplicated. */
static void test_points_commit(void **state)
{
    (void)state;
    tu_layout l = { .page_tokens = 4, .n_tensors = 1, .bpt = { 24 }, .point_bytes = 17,
                    .flags = SB_LAYOUT_POINT_REQUIRED, .model = "recurrent-zc" };
    sb_store *st = tu_store(0);
    sb_ns *ns = tu_ns(st, &l, "zc");
    uint64_t rng = 32;
    uint32_t u[20];
    tu_tokens(&rng, u, 20, 1000);
    model md = { .seq = { u }, .len = { 20 }, .n_seq = 1 };

    for (int pass = 0; pass < 2; pass++) {
        size_t n = pass == 0 ? 20 : 11;
        void **state_u = tu_state(&l, u, n);
        sb_page *pages[5];
        size_t np = (n + 3) / 4;
        for (size_t r = 0; r < np; r++) {
            assert_int_equal(sb_ns_page_alloc(ns, &pages[r]), SB_OK);
            size_t k = n - r * 4 < 4 ? n - r * 4 : 4;
            memcpy((uint8_t *)sb_page_data(pages[r]) + sb_ns_tensor_offset(ns, 0),
                   (uint8_t *)state_u[0] + r * 4 * 24, k * 24);
        }
        void *pt = tu_point(&l, u, n);
        assert_int_equal(sb_ns_commit(ns, u, n, pages, pt), SB_OK);
        free(pt);
        for (size_t r = 0; r < np; r++)
            sb_page_unref(pages[r]);
        tu_free_state(&l, state_u);
        md.pt[md.n_pt].seq = 0;
        md.pt[md.n_pt].pos = n;
        md.n_pt++;
        tu_check(st);
        check_all(ns, &l, &md);
    }
    check(ns, &l, u, 15, 15, 11, true, SB_MISS_NO_POINT);
    assert_int_equal(tu_stats(st).points, 2);
    sb_ns_close(ns);
    sb_store_close(st);
}

/* ---- point_bytes without the flag ---------------------------------------------------- */

static void test_points_optional(void **state)
{
    (void)state;
    tu_layout l = { .page_tokens = 8, .n_tensors = 2, .bpt = { 8, 5 }, .point_bytes = 24,
                    .model = "logits" };
    sb_store *st = tu_store(0);
    sb_ns *ns = tu_ns(st, &l, "opt");
    uint64_t rng = 33;
    uint32_t s[29];
    tu_tokens(&rng, s, 29, 1000);
    model md = { .seq = { s }, .len = { 29 }, .n_seq = 1 };

    put_point(ns, &l, &md, 0, 13);
    tu_put(ns, &l, s, 29, false, SB_OK); /* extends a node with a point */
    put_point(ns, &l, &md, 0, 8);        /* splits mid-edge */
    put_point(ns, &l, &md, 0, 29);
    tu_check(st);
    check_all(ns, &l, &md);
    /* Spot checks: L is the plain match; the point only where L lands. */
    check(ns, &l, s, 13, 13, 13, true, SB_MISS_NONE);
    check(ns, &l, s, 14, 14, 14, false, SB_MISS_NONE);
    check(ns, &l, s, 12, 12, 12, false, SB_MISS_NONE);
    uint32_t req[32];
    memcpy(req, s, 29 * sizeof *req);
    req[29] = OFF_VOCAB;
    check(ns, &l, req, 30, 29, 29, true, SB_MISS_NO_PREFIX);
    memcpy(req, s, 8 * sizeof *req);
    req[8] = OFF_VOCAB;
    check(ns, &l, req, 9, 8, 8, true, SB_MISS_NO_PREFIX);
    sb_ns_close(ns);
    sb_store_close(st);
}

/* ---- errors ------------------------------------------------------------------------------ */

static void test_points_errors(void **state)
{
    (void)state;
    sb_store *st = tu_store(0);
    uint32_t s[12] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 };

    /* point_bytes 0: no point may be given, and nothing is stored. */
    tu_layout l0 = { .page_tokens = 4, .n_tensors = 1, .bpt = { 16 } };
    sb_ns *ns0 = tu_ns(st, &l0, "nopoint");
    void **st0 = tu_state(&l0, s, 12);
    uint8_t junk[64] = { 0 };
    size_t stored = 99;
    assert_int_equal(sb_ns_put(ns0, s, 12, (const void *const *)st0, junk, &stored),
                     SB_ERR_INVAL);
    assert_int_equal(stored, 0);
    assert_int_equal(tu_match_len(ns0, s, 12), 0);
    sb_page *p = NULL;
    assert_int_equal(sb_ns_page_alloc(ns0, &p), SB_OK);
    assert_int_equal(sb_ns_commit(ns0, s, 4, &p, junk), SB_ERR_INVAL);
    assert_int_equal(sb_page_tokens(p), 0);
    sb_page_unref(p);
    sb_stats s0 = tu_stats(st);
    assert_int_equal(s0.puts, 0);
    assert_int_equal(s0.commits, 0);
    assert_int_equal(s0.indexed_pages, 0);
    assert_int_equal(s0.ram_bytes, 0);
    tu_free_state(&l0, st0);

    /* Layout checks: the flag needs point_bytes; unknown flags. */
    uint32_t bpt[1] = { 16 };
    sb_layout bad = { .model_id = "m", .model_id_bytes = 1, .page_tokens = 4, .n_tensors = 1,
                      .bytes_per_token = bpt, .point_bytes = 0,
                      .flags = SB_LAYOUT_POINT_REQUIRED };
    sb_ns *x = NULL;
    assert_int_equal(sb_ns_open(st, &bad, "b", 1, &x), SB_ERR_LAYOUT);
    bad.point_bytes = 8;
    bad.flags = 4;
    assert_int_equal(sb_ns_open(st, &bad, "b", 1, &x), SB_ERR_LAYOUT);
    assert_null(x);

    /* A point asked with n_tokens != L (shorter), and where there is none. */
    tu_layout lr = { .page_tokens = 4, .n_tensors = 1, .bpt = { 16 }, .point_bytes = 8,
                     .flags = SB_LAYOUT_POINT_REQUIRED };
    sb_ns *nr = tu_ns(st, &lr, "req");
    tu_put(nr, &lr, s, 12, false, SB_OK);
    tu_put(nr, &lr, s, 6, true, SB_OK);
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(nr, s, 12, &m), SB_OK);
    void **bufs = tu_bufs(&lr, 12);
    uint8_t pbuf[8];
    assert_int_equal(sb_match_restore(m, 5, bufs, pbuf), SB_ERR_NO_POINT);
    assert_int_equal(sb_match_restore(m, 0, bufs, pbuf), SB_ERR_NO_POINT);
    assert_int_equal(sb_match_restore(m, 7, bufs, pbuf), SB_ERR_RANGE);
    assert_int_equal(sb_match_restore(m, 6, bufs, pbuf), SB_OK);
    void *want = tu_point(&lr, s, 6);
    assert_memory_equal(pbuf, want, 8);
    free(want);
    sb_match_release(m);
    tu_free_state(&lr, bufs);
    tu_check(st);
    sb_ns_close(nr);
    sb_ns_close(ns0);
    sb_store_close(st);
}

/* ---- points and eviction --------------------------------------------------------------- */


/* The point at L must have its pages: when the tail pages of s go, the
 * match falls back to the last point whose pages remain. Budget: 8 pages.
 * s has 37 tokens (5 pages, pt 8) and points at 16 and 37; a small commit
 * after it takes the namespace's protection; a match of s[0, 20) makes the
 * point at 16 and pages 0-1 recent. Another namespace then needs 4 pages
 * with 2 free: by LRU and leaves first, s's last page (with the point at
 * 37) and then page 3 go. */
static void test_points_evicted_pages(void **state)
{
    (void)state;
    tu_layout l = { .page_tokens = 8, .n_tensors = 1, .bpt = { 32 }, .point_bytes = 40,
                    .flags = SB_LAYOUT_POINT_REQUIRED, .model = "rec-evict" };
    sb_store *st = tu_store_pages(8);
    sb_ns *ns = tu_ns(st, &l, "a");
    sb_ns *other = tu_ns(st, &l, "b");
    uint64_t rng = 34;
    uint32_t s[37], r[8], q[32];
    tu_tokens(&rng, s, 37, 1000);
    tu_put(ns, &l, s, 16, true, SB_OK);
    tu_put(ns, &l, s, 37, true, SB_OK);
    tu_tokens(&rng, r, 8, 1000);
    r[0] = 5000;
    tu_put(ns, &l, r, 8, true, SB_OK);
    check(ns, &l, s, 20, 20, 16, true, SB_MISS_NO_POINT);
    sb_stats s0 = tu_stats(st);
    assert_int_equal(s0.points, 3);
    assert_int_equal(s0.ram_pages, 6);

    tu_tokens(&rng, q, 32, 1000);
    q[0] = 6000;
    tu_put(other, &l, q, 32, false, SB_OK);
    tu_check(st);
    sb_stats s1 = tu_stats(st);
    assert_int_equal(s1.evictions - s0.evictions, 2);
    assert_int_equal(s1.points, 2);
    /* Every point state that left the index was evicted. */
    assert_int_equal(s1.point_evictions - s0.point_evictions, 1);

    check(ns, &l, s, 37, 24, 16, true, SB_MISS_NO_POINT);
    check(ns, &l, r, 8, 8, 8, true, SB_MISS_NONE);
    sb_ns_close(ns);
    sb_ns_close(other);
    sb_store_close(st);
}

/* A point state that leaves the index with the page under it was evicted
 * too, and counts in stats.point_evictions. Budget: 2 pages. a holds s (16
 * tokens, pt 8) with a point at 16: its last page and point are the
 * namespace's newest, both protected. b's put of one page finds nothing
 * else to evict, so protection yields: s's last page goes, and with it the
 * point at 16 (nothing covers depth 16 any more). */
static void test_points_evicted_with_page_counted(void **state)
{
    (void)state;
    tu_layout l = { .page_tokens = 8, .n_tensors = 1, .bpt = { 32 }, .point_bytes = 16,
                    .flags = SB_LAYOUT_POINT_REQUIRED, .model = "rec-count" };
    sb_store *st = tu_store_pages(2);
    sb_ns *a = tu_ns(st, &l, "a");
    sb_ns *b = tu_ns(st, &l, "b");
    uint32_t s[16], t[8];
    for (uint32_t i = 0; i < 16; i++)
        s[i] = i + 1;
    for (uint32_t i = 0; i < 8; i++)
        t[i] = 100 + i;
    tu_put(a, &l, s, 16, true, SB_OK);
    sb_stats s0 = tu_stats(st);
    assert_int_equal(s0.points, 1);
    tu_put(b, &l, t, 8, false, SB_OK);
    tu_check(st);
    sb_stats s1 = tu_stats(st);
    assert_int_equal(s1.evictions - s0.evictions, 1);
    assert_int_equal(s1.points, 0);
    check(a, &l, s, 16, 8, 0, false, SB_MISS_NO_POINT);
    assert_int_equal(s1.point_evictions - s0.point_evictions, 1);
    sb_ns_close(a);
    sb_ns_close(b);
    sb_store_close(st);
}

/* Under random eviction pressure, whatever a match restores is sound: L is
 * a recorded point on the request's path, L <= the request, the bytes and
 * the point are exact; every point state recorded is either still indexed
 * (stats.points) or counted in stats.point_evictions. */
static void test_points_pressure(void **state)
{
    (void)state;
    tu_layout l = { .page_tokens = 4, .n_tensors = 2, .bpt = { 32, 16 }, .point_bytes = 24,
                    .flags = SB_LAYOUT_POINT_REQUIRED, .model = "rec-pressure" };
    sb_store *st = tu_store_pages(24);
    sb_ns *ns = tu_ns(st, &l, "p");
    uint64_t rng = 35;
    enum { N = 30, LEN = 24 };
    uint32_t seqs[N][LEN];
    size_t points_put = 0;
    for (int i = 0; i < N; i++) {
        tu_tokens(&rng, seqs[i], LEN, 50);
        if (i && tu_rand(&rng) % 2) /* share a prefix with an earlier one */
            memcpy(seqs[i], seqs[tu_rand(&rng) % i], (1 + tu_rand(&rng) % 12) * sizeof(uint32_t));
        for (int k = 0; k < 3; k++) {
            /* Whether this put adds a point state: a match of the prefix
             * finds one at pos, or not; held during the put, it keeps that
             * one from being evicted meanwhile. */
            size_t pos = 1 + tu_rand(&rng) % LEN;
            sb_match *hold = NULL;
            assert_int_equal(sb_ns_match(ns, seqs[i], pos, &hold), SB_OK);
            sb_match_info hi;
            assert_int_equal(sb_match_get_info(hold, &hi), SB_OK);
            tu_put(ns, &l, seqs[i], pos, true, SB_OK);
            points_put += hi.n_tokens == pos ? 0 : 1;
            sb_match_release(hold);
        }
        tu_check(st);
        /* Check the sequences so far: L is a point on the path, exact. */
        for (int j = 0; j <= i; j++) {
            sb_match *m = NULL;
            assert_int_equal(sb_ns_match(ns, seqs[j], LEN, &m), SB_OK);
            sb_match_info info;
            assert_int_equal(sb_match_get_info(m, &info), SB_OK);
            size_t L = info.n_tokens;
            assert_true(L <= info.n_matched_tokens);
            assert_int_equal(!!info.has_point, L > 0);
            if (L) {
                void *want = tu_point(&l, seqs[j], L);
                assert_memory_equal(sb_match_point(m), want, l.point_bytes);
                free(want);
                void **bufs = tu_bufs(&l, L);
                assert_int_equal(sb_match_restore(m, L, bufs, NULL), SB_OK);
                assert_true(tu_state_equal(&l, seqs[j], L, bufs));
                tu_free_state(&l, bufs);
            }
            sb_match_release(m);
        }
    }
    sb_stats s = tu_stats(st);
    assert_true(s.evictions > 0);
    assert_true(s.ram_pages <= 24);
    /* Every point state recorded is still indexed or counted as evicted. */
    assert_int_equal(s.points + s.point_evictions, points_put);
    sb_ns_close(ns);
    sb_store_close(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_points_required),
        cmocka_unit_test(test_points_commit),
        cmocka_unit_test(test_points_optional),
        cmocka_unit_test(test_points_errors),
        cmocka_unit_test(test_points_evicted_pages),
        cmocka_unit_test(test_points_evicted_with_page_counted),
        cmocka_unit_test(test_points_pressure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
