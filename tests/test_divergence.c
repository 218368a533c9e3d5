/* Description: divergence. A request that follows a stored sequence for d
 * tokens and then leaves it restores exactly d tokens: never more, and with
 * exactly the bytes of that prefix (the synthetic state of token i depends on
 * tokens[0..i], so bytes of another prefix fail the compare). Checked for
 * every d over random stored sequences and page sizes from 1 to 65536 tokens;
 * for divergence inside a page, on a page boundary, inside a partial tail
 * page and at the first token; for requests that leave one of two stored
 * branches which themselves part mid-page (the restore is exact from either
 * branch's page of the shared region); and against a reference model (L is
 * the longest common prefix with any stored sequence). Every match also
 * reports n_matched_tokens == L and the miss reason SB_MISS_NO_PREFIX when
 * L is short of the request, hands out pages whose slices are the state of
 * their tokens, and refuses to restore a token more. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* Token IDs no stored sequence uses: a request continues with one of these
 * where it must leave every stored sequence. */
#define OFF_VOCAB 0x40000000u

/* Canary bytes after the restored tokens: a restore must not write there. */
#define CANARY 0xA5
#define CANARY_TOKENS 64

static size_t min_sz(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* Buffers for a restore of n tokens followed by a canary tail. */
static void **canary_bufs(const tu_layout *l, size_t n)
{
    void **bufs = calloc(l->n_tensors, sizeof *bufs);
    assert_non_null(bufs);
    for (uint32_t t = 0; t < l->n_tensors; t++) {
        size_t bytes = (n + CANARY_TOKENS) * l->bpt[t];
        bufs[t] = malloc(bytes);
        assert_non_null(bufs[t]);
        memset(bufs[t], CANARY, bytes);
    }
    return bufs;
}

/* True when nothing past token n of bufs was written. */
static bool canary_intact(const tu_layout *l, void **bufs, size_t n)
{
    for (uint32_t t = 0; t < l->n_tensors; t++) {
        const uint8_t *p = (const uint8_t *)bufs[t] + n * l->bpt[t];
        for (size_t i = 0; i < (size_t)CANARY_TOKENS * l->bpt[t]; i++)
            if (p[i] != CANARY)
                return false;
    }
    return true;
}

static void free_bufs(const tu_layout *l, void **bufs)
{
    for (uint32_t t = 0; t < l->n_tensors; t++)
        free(bufs[t]);
    free(bufs);
}

/* True when bufs hold the first n tokens of want (a tu_state of >= n tokens). */
static bool bufs_equal(const tu_layout *l, void **want, void **bufs, size_t n)
{
    for (uint32_t t = 0; t < l->n_tensors; t++)
        if (memcmp(want[t], bufs[t], n * l->bpt[t]) != 0)
            return false;
    return true;
}

/* Restore k tokens of m into canary buffers and check them against want. */
static void restore_exact(sb_match *m, const tu_layout *l, void **want, size_t k)
{
    void **bufs = canary_bufs(l, k);
    assert_int_equal(sb_match_restore(m, k, bufs, NULL), SB_OK);
    assert_true(bufs_equal(l, want, bufs, k));
    assert_true(canary_intact(l, bufs, k));
    free_bufs(l, bufs);
}

/* Match req[0, n) and check that exactly `want` tokens are restorable, with
 * miss reason want_miss, and that everything the match hands out is exact:
 * the restore of L tokens and of a shorter prefix (nothing written past
 * them), the slices of every page (through the documented page layout), and
 * SB_ERR_RANGE one token or one page further. Returns the page that covers
 * token L - 1, as an identity for comparisons only (NULL when L is 0); the
 * caller holds no reference to it. */
static const void *check_match(sb_ns *ns, const tu_layout *l, const uint32_t *req, size_t n,
                               size_t want, sb_miss want_miss)
{
    uint32_t pt = l->page_tokens;
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, req, n, &m), SB_OK);
    sb_match_info info;
    assert_int_equal(sb_match_get_info(m, &info), SB_OK);
    assert_int_equal(info.n_tokens, want);
    assert_int_equal(info.n_matched_tokens, want);
    assert_int_equal(info.n_pages, (want + pt - 1) / pt);
    assert_int_equal(info.n_pages_ram, info.n_pages);
    assert_int_equal(info.miss, want_miss);
    assert_false(info.has_point);
    assert_null(sb_match_point(m));

    void **state = tu_state(l, req, want);
    restore_exact(m, l, state, want);
    if (want > 1)
        restore_exact(m, l, state, want / 2);
    void **scratch = canary_bufs(l, want + 1);
    assert_int_equal(sb_match_restore(m, want + 1, scratch, NULL), SB_ERR_RANGE);
    free_bufs(l, scratch);

    /* The pages themselves: slice j of page r, tensor t is token r*pt + j. */
    size_t np = info.n_pages;
    sb_page **pages = calloc(np + 1, sizeof *pages);
    assert_non_null(pages);
    sb_page *extra[1] = { NULL };
    assert_int_equal(sb_match_pages(m, np, 1, extra), SB_ERR_RANGE);
    assert_int_equal(sb_match_pages(m, 0, np, pages), SB_OK);
    const void *last = NULL;
    for (size_t r = 0; r < np; r++) {
        uint32_t k = (uint32_t)min_sz(pt, want - r * pt);
        assert_true(sb_page_tokens(pages[r]) >= k);
        const uint8_t *d = sb_page_data(pages[r]);
        assert_non_null(d);
        for (uint32_t t = 0; t < l->n_tensors; t++) {
            size_t off = sb_ns_tensor_offset(ns, t);
            const uint8_t *src = (const uint8_t *)state[t] + r * pt * l->bpt[t];
            assert_memory_equal(d + off, src, (size_t)k * l->bpt[t]);
        }
        last = pages[r];
        sb_page_unref(pages[r]);
    }
    free(pages);
    tu_free_state(l, state);
    sb_match_release(m);
    return last;
}

/* req = s[0, d), then an off-vocabulary token and a few more: it diverges
 * from every stored sequence at d. Returns its length. */
static size_t diverge_at(uint32_t *req, const uint32_t *s, size_t d, uint64_t *rng)
{
    memcpy(req, s, d * sizeof *req);
    req[d] = OFF_VOCAB + (uint32_t)d;
    tu_tokens(rng, req + d + 1, 3, 1000);
    return d + 4;
}

/* ---- every position ---------------------------------------------------------- */

#define N_SEQ 4

static void every_position(uint32_t pt, size_t max_len, uint64_t seed)
{
    tu_layout l = { .page_tokens = pt, .n_tensors = 3, .bpt = { 8, 24, 5 } };
    sb_store *st = tu_store(0);
    sb_ns *ns = tu_ns(st, &l, "div");
    uint64_t rng = seed;

    /* seq 0 random; seq 1 shares a random prefix of it; seq 2 extends it
     * (superseding its partial tail page); seq 3 is unrelated. */
    uint32_t *seq[N_SEQ];
    size_t len[N_SEQ];
    for (int i = 0; i < N_SEQ; i++) {
        seq[i] = malloc((2 * max_len + 8) * sizeof *seq[i]);
        assert_non_null(seq[i]);
    }
    len[0] = 1 + tu_rand(&rng) % max_len;
    tu_tokens(&rng, seq[0], len[0], 1000);
    size_t p = tu_rand(&rng) % (len[0] + 1);
    len[1] = p + 1 + tu_rand(&rng) % max_len;
    memcpy(seq[1], seq[0], p * sizeof *seq[1]);
    tu_tokens(&rng, seq[1] + p, len[1] - p, 1000);
    len[2] = len[0] + 1 + tu_rand(&rng) % max_len;
    memcpy(seq[2], seq[0], len[0] * sizeof *seq[2]);
    tu_tokens(&rng, seq[2] + len[0], len[2] - len[0], 1000);
    len[3] = 1 + tu_rand(&rng) % max_len;
    tu_tokens(&rng, seq[3], len[3], 1000);
    for (int i = 0; i < N_SEQ; i++) {
        tu_put(ns, &l, seq[i], len[i], false, SB_OK);
        tu_check(st);
    }

    sb_stats before;
    assert_int_equal(sb_store_stats(st, &before), SB_OK);
    uint32_t *req = malloc((2 * max_len + 16) * sizeof *req);
    assert_non_null(req);
    uint64_t lookups = 0, zero = 0;
    for (int i = 0; i < N_SEQ; i++) {
        for (size_t d = 0; d <= len[i]; d++) {
            size_t n = diverge_at(req, seq[i], d, &rng);
            check_match(ns, &l, req, n, d, SB_MISS_NO_PREFIX);
            lookups++;
            zero += d == 0;
            if (d > 0) {
                check_match(ns, &l, seq[i], d, d, SB_MISS_NONE);
                lookups++;
            }
        }
    }
    sb_stats after;
    assert_int_equal(sb_store_stats(st, &after), SB_OK);
    assert_int_equal(after.lookups - before.lookups, lookups);
    assert_int_equal(after.hits - before.hits, lookups - zero);
    assert_int_equal(after.misses[SB_MISS_NO_PREFIX] - before.misses[SB_MISS_NO_PREFIX], zero);
    tu_check(st);

    free(req);
    for (int i = 0; i < N_SEQ; i++)
        free(seq[i]);
    sb_ns_close(ns);
    sb_store_close(st);
}

static void test_divergence_every_position(void **state)
{
    (void)state;
    static const uint32_t pts[] = { 1, 2, 3, 8, 16 };
    uint64_t rng = 0xd1e5;
    for (size_t i = 0; i < sizeof pts / sizeof pts[0]; i++)
        for (int rep = 0; rep < 3; rep++)
            every_position(pts[i], 90, tu_rand(&rng));
}

/* One page holds whole sequences (4096), or the largest page there is. */
static void test_divergence_large_pages(void **state)
{
    (void)state;
    every_position(4096, 150, 11);
    every_position(SB_PAGE_TOKENS_MAX, 60, 12);
}

/* ---- first token, page edges, partial tail ------------------------------------- */

static void test_divergence_first_token(void **state)
{
    (void)state;
    tu_layout l = { .page_tokens = 4, .n_tensors = 2, .bpt = { 16, 4 } };
    sb_store *st = tu_store(0);
    sb_ns *ns = tu_ns(st, &l, "first");
    uint32_t req[8] = { 7, 1, 2, 3, 4, 5, 6, 7 };

    /* Empty namespace. */
    check_match(ns, &l, req, 8, 0, SB_MISS_NO_PREFIX);
    uint32_t s[9] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };
    tu_put(ns, &l, s, 9, false, SB_OK);
    /* The first token differs (in and out of the stored vocabulary). */
    check_match(ns, &l, req, 8, 0, SB_MISS_NO_PREFIX);
    req[0] = OFF_VOCAB;
    check_match(ns, &l, req, 1, 0, SB_MISS_NO_PREFIX);

    sb_stats s0;
    assert_int_equal(sb_store_stats(st, &s0), SB_OK);
    assert_int_equal(s0.lookups, 3);
    assert_int_equal(s0.hits, 0);
    assert_int_equal(s0.misses[SB_MISS_NO_PREFIX], 3);
    assert_int_equal(s0.hit_tokens, 0);
    assert_int_equal(s0.miss_tokens, 17);
    assert_int_equal(s0.miss_tokens_by_reason[SB_MISS_NO_PREFIX], 17);

    /* A zero-length restore of an empty match is fine; a page is not there. */
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, req, 8, &m), SB_OK);
    void **bufs = canary_bufs(&l, 0);
    assert_int_equal(sb_match_restore(m, 0, bufs, NULL), SB_OK);
    assert_true(canary_intact(&l, bufs, 0));
    free_bufs(&l, bufs);
    sb_page *p = NULL;
    assert_int_equal(sb_match_pages(m, 0, 0, &p), SB_OK);
    assert_int_equal(sb_match_pages(m, 0, 1, &p), SB_ERR_RANGE);
    sb_match_release(m);
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
}

/* pt = 8, S of 29 tokens: pages [0,8) [8,16) [16,24) [24,29). Divergence
 * one before, on and one after each boundary, inside the partial tail, and
 * a request longer than S: L is 29, never the 32 the tail page has room for. */
static void test_divergence_page_edges(void **state)
{
    (void)state;
    tu_layout l = { .page_tokens = 8, .n_tensors = 2, .bpt = { 12, 40 } };
    sb_store *st = tu_store(0);
    sb_ns *ns = tu_ns(st, &l, "edges");
    uint64_t rng = 99;
    uint32_t s[29], req[64];
    tu_tokens(&rng, s, 29, 1000);

    /* S[0, 27) first, then S: the 3-token tail page is superseded by a
     * 5-token one; the old tail must not leak into either length. */
    tu_put(ns, &l, s, 27, false, SB_OK);
    check_match(ns, &l, s, 29, 27, SB_MISS_NO_PREFIX);
    size_t n = diverge_at(req, s, 27, &rng);
    check_match(ns, &l, req, n, 27, SB_MISS_NO_PREFIX);
    tu_put(ns, &l, s, 29, false, SB_OK);
    tu_check(st);

    static const size_t ds[] = { 1, 7, 8, 9, 15, 16, 17, 23, 24, 25, 27, 28, 29 };
    for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++) {
        n = diverge_at(req, s, ds[i], &rng);
        check_match(ns, &l, req, n, ds[i], SB_MISS_NO_PREFIX);
        check_match(ns, &l, s, ds[i], ds[i], SB_MISS_NONE);
    }

    /* A second sequence that leaves S inside S's partial tail page (at 26):
     * both stay exact to the token, and so does a request leaving at 26. */
    uint32_t t[40];
    memcpy(t, s, 26 * sizeof *t);
    tu_tokens(&rng, t + 26, 14, 1000);
    t[26] = s[26] + 1000;
    tu_put(ns, &l, t, 40, false, SB_OK);
    tu_check(st);
    check_match(ns, &l, s, 29, 29, SB_MISS_NONE);
    check_match(ns, &l, t, 40, 40, SB_MISS_NONE);
    for (size_t d = 20; d <= 29; d++) {
        n = diverge_at(req, s, d, &rng);
        check_match(ns, &l, req, n, d, SB_MISS_NO_PREFIX);
    }
    for (size_t d = 20; d <= 40; d++) {
        n = diverge_at(req, t, d, &rng);
        check_match(ns, &l, req, n, d, SB_MISS_NO_PREFIX);
    }
    sb_ns_close(ns);
    sb_store_close(st);
}

/* ---- two branches that part mid-page --------------------------------------------- */

/* Region `r`'s page of the full match of s[0, n), as an identity. */
static const void *page_of(sb_ns *ns, const uint32_t *s, size_t n, size_t r)
{
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, s, n, &m), SB_OK);
    sb_page *p = NULL;
    assert_int_equal(sb_match_pages(m, r, 1, &p), SB_OK);
    sb_page_unref(p);
    sb_match_release(m);
    return p;
}

/* A (40 tokens) and B part at depth 13 (pt 8: inside region 1, [8, 16)).
 * Each branch holds its own page of region 1; a request that stops at or
 * before 13 restores the shared tokens from one of them, and must be exact
 * whichever. The variants change which branch sorts first and which was
 * stored first, so that each branch's page gets to serve such a request. */
static void branches_one(bool b_low, bool b_first, bool *seen_a, bool *seen_b)
{
    tu_layout l = { .page_tokens = 8, .n_tensors = 3, .bpt = { 8, 24, 5 } };
    sb_store *st = tu_store(0);
    sb_ns *ns = tu_ns(st, &l, "branches");
    uint64_t rng = 1234 + b_low * 2 + b_first;
    const size_t p = 13, na = 40, nb = 31;
    uint32_t a[40], b[31], req[64];
    for (size_t i = 0; i < na; i++)
        a[i] = 100 + (uint32_t)(tu_rand(&rng) % 900);
    memcpy(b, a, p * sizeof *b);
    tu_tokens(&rng, b + p, nb - p, 1000);
    b[p] = b_low ? 7 : 5000; /* below or above every token of a */
    if (b_first) {
        tu_put(ns, &l, b, nb, false, SB_OK);
        tu_put(ns, &l, a, na, false, SB_OK);
    } else {
        tu_put(ns, &l, a, na, false, SB_OK);
        tu_put(ns, &l, b, nb, false, SB_OK);
    }
    tu_check(st);

    const void *pa0 = page_of(ns, a, na, 0), *pb0 = page_of(ns, b, nb, 0);
    const void *pa1 = page_of(ns, a, na, 1), *pb1 = page_of(ns, b, nb, 1);
    assert_ptr_equal(pa0, pb0); /* region 0 is shared */
    assert_ptr_not_equal(pa1, pb1); /* region 1 differs after depth 13 */

    for (size_t d = 0; d <= na; d++) {
        size_t n = diverge_at(req, a, d, &rng);
        const void *last = check_match(ns, &l, req, n, d, SB_MISS_NO_PREFIX);
        if (d > 8 && d <= p) {
            assert_true(last == pa1 || last == pb1);
            *seen_a |= last == pa1;
            *seen_b |= last == pb1;
        } else if (d > p && d <= 16) {
            assert_ptr_equal(last, pa1); /* past the split only A's page fits */
        }
    }
    for (size_t d = 0; d <= nb; d++) {
        size_t n = diverge_at(req, b, d, &rng);
        const void *last = check_match(ns, &l, req, n, d, SB_MISS_NO_PREFIX);
        if (d > p && d <= 16)
            assert_ptr_equal(last, pb1);
    }
    /* The shared prefix itself, exactly. */
    check_match(ns, &l, a, p, p, SB_MISS_NONE);
    check_match(ns, &l, b, p + 1, p + 1, SB_MISS_NONE);
    check_match(ns, &l, a, p + 1, p + 1, SB_MISS_NONE);
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
}

static void test_divergence_branches_mid_page(void **state)
{
    (void)state;
    bool seen_a = false, seen_b = false;
    for (int v = 0; v < 4; v++)
        branches_one(v & 1, v & 2, &seen_a, &seen_b);
    /* Not a property of the store but of this test: if the store always
     * serves the shared tokens from the same branch, the test no longer
     * proves that the other branch's page is exact too. */
    assert_true(seen_a);
    assert_true(seen_b);
}

/* ---- reference model --------------------------------------------------------------- */

/* A small vocabulary makes many branch points at every offset in a page;
 * L must be the longest common prefix of the request with a stored sequence. */
static void test_divergence_reference_model(void **state)
{
    (void)state;
    static const uint32_t pts[] = { 1, 2, 4, 5 };
    uint64_t rng = 77;
    for (size_t k = 0; k < sizeof pts / sizeof pts[0]; k++) {
        tu_layout l = { .page_tokens = pts[k], .n_tensors = 2, .bpt = { 8, 3 } };
        sb_store *st = tu_store(0);
        sb_ns *ns = tu_ns(st, &l, "model");
        enum { N = 40, MAX = 30 };
        uint32_t seqs[N][MAX];
        size_t lens[N];
        for (int i = 0; i < N; i++) {
            lens[i] = 1 + tu_rand(&rng) % MAX;
            tu_tokens(&rng, seqs[i], lens[i], 3);
            tu_put(ns, &l, seqs[i], lens[i], false, SB_OK);
        }
        tu_check(st);
        for (int q = 0; q < 300; q++) {
            uint32_t req[MAX + 6];
            size_t n = 1 + tu_rand(&rng) % (MAX + 6);
            tu_tokens(&rng, req, n, 3);
            if (tu_rand(&rng) % 8 == 0)
                req[tu_rand(&rng) % n] = OFF_VOCAB;
            size_t want = 0;
            for (int i = 0; i < N; i++) {
                size_t c = 0, lim = min_sz(n, lens[i]);
                while (c < lim && seqs[i][c] == req[c])
                    c++;
                if (c > want)
                    want = c;
            }
            check_match(ns, &l, req, n, want, want == n ? SB_MISS_NONE : SB_MISS_NO_PREFIX);
        }
        tu_check(st);
        sb_ns_close(ns);
        sb_store_close(st);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_divergence_every_position),
        cmocka_unit_test(test_divergence_large_pages),
        cmocka_unit_test(test_divergence_first_token),
        cmocka_unit_test(test_divergence_page_edges),
        cmocka_unit_test(test_divergence_branches_mid_page),
        cmocka_unit_test(test_divergence_reference_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
