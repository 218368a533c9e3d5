/* Description: round trip. For random sequence lengths n and page sizes,
 * after putting tokens[0, n), every prefix m <= n matches exactly m tokens
 * and restores exactly the bytes of the first m tokens; a longer request
 * restores exactly n. */
#include <stdlib.h>

#include "testutil.h"

static void roundtrip_one(uint32_t pt, size_t n, uint64_t seed)
{
    tu_layout l = { .page_tokens = pt, .n_tensors = 3, .bpt = { 8, 24, 5 } };
    sb_store *st = tu_store(0);
    sb_ns *ns = tu_ns(st, &l, "scope");
    uint64_t rng = seed;
    uint32_t *tok = malloc((n + 7) * sizeof *tok);
    assert_non_null(tok);
    tu_tokens(&rng, tok, n + 7, 1000);

    tu_put(ns, &l, tok, n, false, SB_OK);
    tu_check(st);
    for (size_t m = 1; m <= n; m++)
        assert_int_equal(tu_match_verify(ns, &l, tok, m), m);
    /* Longer than what was stored: exactly n. */
    assert_int_equal(tu_match_verify(ns, &l, tok, n + 7), n);
    /* Restoring fewer tokens than matched is exact too. */
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, tok, n, &m), SB_OK);
    size_t part = n / 2;
    void **bufs = tu_bufs(&l, part + 1);
    assert_int_equal(sb_match_restore(m, part, bufs, NULL), SB_OK);
    assert_true(tu_state_equal(&l, tok, part, bufs));
    tu_free_state(&l, bufs);
    sb_match_release(m);

    tu_check(st);
    free(tok);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
}

static void test_roundtrip_random(void **state)
{
    (void)state;
    static const uint32_t pts[] = { 1, 2, 3, 7, 16, 64 };
    uint64_t rng = 42;
    for (int i = 0; i < 24; i++) {
        uint32_t pt = pts[tu_rand(&rng) % 6];
        size_t n = 1 + tu_rand(&rng) % 300;
        roundtrip_one(pt, n, tu_rand(&rng));
    }
}

static void test_roundtrip_exact_pages(void **state)
{
    (void)state;
    roundtrip_one(16, 16, 1);  /* exactly one page */
    roundtrip_one(16, 64, 2);  /* page-aligned */
    roundtrip_one(16, 65, 3);  /* one token into a page */
    roundtrip_one(1, 50, 4);   /* one token per page */
}

/* A put of a sequence that extends a stored one, then one in between: all
 * prefixes stay exact, pages are shared. */
static void test_roundtrip_extend(void **state)
{
    (void)state;
    tu_layout l = { .page_tokens = 4, .n_tensors = 2, .bpt = { 4, 12 } };
    sb_store *st = tu_store(0);
    sb_ns *ns = tu_ns(st, &l, NULL);
    uint32_t tok[100];
    uint64_t rng = 7;
    tu_tokens(&rng, tok, 100, 50);
    tu_put(ns, &l, tok, 30, false, SB_OK);
    tu_put(ns, &l, tok, 100, false, SB_OK);
    tu_put(ns, &l, tok, 57, false, SB_OK);
    tu_check(st);
    for (size_t m = 1; m <= 100; m++)
        assert_int_equal(tu_match_verify(ns, &l, tok, m), m);
    sb_stats s;
    assert_int_equal(sb_store_stats(st, &s), SB_OK);
    assert_int_equal(s.indexed_pages, 25); /* one chain of 100 tokens */
    sb_ns_close(ns);
    sb_store_close(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_random),
        cmocka_unit_test(test_roundtrip_exact_pages),
        cmocka_unit_test(test_roundtrip_extend),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
