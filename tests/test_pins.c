/* Description: pins and protection under eviction pressure, on an injected
 * fake clock and a small RAM budget. A pinned prefix (a system prompt)
 * survives many other puts and still restores exactly while unpinned data
 * is evicted (stats.evictions grows); once its TTL has passed on the store
 * clock it is evictable and goes under pressure; a pin with TTL 0 lasts
 * until sb_ns_unpin; unpinning an unknown, removed, expired or other
 * namespace's id is SB_ERR_NOT_FOUND; stats.pins follows the live pins.
 * Pinned pages are never evicted, even when a put then has to stop short
 * (SB_ERR_BUDGET with the prefix that fit stored). The newest page of a
 * namespace's latest commit is protected: pressure from another namespace
 * takes the older sequences and leaves the latest whole, and protection
 * yields, rather than a put failing, when nothing else can be evicted. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* 16 tokens of 2 x 64 bytes: 2 KiB of slices, one 4 KiB page. */
static const tu_layout LAYOUT = { .page_tokens = 16, .n_tensors = 2, .bpt = { 64, 64 } };
#define PAGE 4096u
#define PT 16u

typedef struct fake_clock {
    uint64_t now_ns;
} fake_clock;

static uint64_t fake_now(void *ctx)
{
    return ((fake_clock *)ctx)->now_ns;
}

static const uint64_t MS = 1000000ull;

/* A RAM-only store of `pages` pages on the fake clock c. */
static sb_store *clock_store(fake_clock *c, uint64_t pages)
{
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.ram_bytes = pages * PAGE;
    cfg.clock_ns = fake_now;
    cfg.clock_ctx = c;
    sb_store *st = NULL;
    assert_int_equal(sb_store_open(&cfg, &st), SB_OK);
    return st;
}

/* n_pages pages' worth of new sequences of 3 pages each, put into ns; their
 * first tokens count up from *first so no two share a prefix (nor one with
 * anything from tu_tokens, whose tokens are < 1000). */
static void pressure(sb_store *st, sb_ns *ns, uint64_t *rng, uint32_t *first, int n_pages)
{
    uint32_t tok[3 * PT];
    for (int done = 0; done < n_pages; done += 3) {
        tu_tokens(rng, tok, 3 * PT, 1000);
        tok[0] = (*first)++;
        tu_put(ns, &LAYOUT, tok, 3 * PT, false, SB_OK);
        tu_check(st);
    }
}

/* ---- pins ------------------------------------------------------------------------- */

static void test_pins_survive_pressure(void **state)
{
    (void)state;
    fake_clock c = { 5 * MS };
    sb_store *st = clock_store(&c, 24);
    sb_ns *ns = tu_ns(st, &LAYOUT, "chat");
    uint64_t rng = 41;
    uint32_t first = 10000;

    /* The system prompt: 4 pages. */
    uint32_t sys[4 * PT];
    tu_tokens(&rng, sys, 4 * PT, 1000);
    tu_put(ns, &LAYOUT, sys, 4 * PT, false, SB_OK);
    uint64_t id = 0;
    size_t n_pinned = 0;
    assert_int_equal(sb_ns_pin(ns, sys, 4 * PT, 0, &id, &n_pinned), SB_OK);
    assert_int_equal(n_pinned, 4 * PT);
    sb_stats s0 = tu_stats(st);
    assert_int_equal(s0.pins, 1);
    assert_int_equal(s0.pinned_pages, 4);

    /* An early sequence, then conversations: the prompt plus a question
     * (their tails are evictable, the prompt is shared and pinned), and
     * unrelated sequences, four budgets' worth in all. */
    uint32_t early[3 * PT];
    tu_tokens(&rng, early, 3 * PT, 1000);
    early[0] = first++;
    tu_put(ns, &LAYOUT, early, 3 * PT, false, SB_OK);
    uint32_t conv[6 * PT];
    memcpy(conv, sys, sizeof sys);
    for (int i = 0; i < 16; i++) {
        tu_tokens(&rng, conv + 4 * PT, 2 * PT, 1000);
        tu_put(ns, &LAYOUT, conv, 6 * PT, false, SB_OK);
        pressure(st, ns, &rng, &first, 3);
        assert_true(tu_stats(st).ram_bytes <= 24 * PAGE);
    }
    sb_stats s1 = tu_stats(st);
    assert_true(s1.evictions >= 48);
    assert_int_equal(tu_match_len(ns, early, 3 * PT), 0);
    assert_int_equal(tu_match_verify(ns, &LAYOUT, sys, 4 * PT), 4 * PT);
    assert_int_equal(s1.pins, 1);
    assert_int_equal(sb_ns_unpin(ns, id), SB_OK);
    assert_int_equal(tu_stats(st).pins, 0);
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
}

static void test_pins_ttl_expiry(void **state)
{
    (void)state;
    fake_clock c = { 1000 * MS };
    sb_store *st = clock_store(&c, 24);
    sb_ns *ns = tu_ns(st, &LAYOUT, "ttl");
    uint64_t rng = 42;
    uint32_t first = 20000;
    uint32_t sys[4 * PT];
    tu_tokens(&rng, sys, 4 * PT, 1000);
    tu_put(ns, &LAYOUT, sys, 4 * PT, false, SB_OK);
    uint64_t id = 0;
    assert_int_equal(sb_ns_pin(ns, sys, 4 * PT, 100, &id, NULL), SB_OK);

    /* Before the TTL: pressure does not take it. */
    c.now_ns += 50 * MS;
    pressure(st, ns, &rng, &first, 48);
    c.now_ns += 50 * MS - 1; /* 1 ns short of 100 ms */
    pressure(st, ns, &rng, &first, 48);
    assert_int_equal(tu_stats(st).pins, 1);
    assert_int_equal(tu_match_verify(ns, &LAYOUT, sys, 4 * PT), 4 * PT);

    /* Past the TTL, with no other call in between: the allocations of the
     * next puts find the pin expired, and two budgets of newer data evict
     * every page of the prompt. */
    c.now_ns += 2;
    pressure(st, ns, &rng, &first, 48);
    sb_stats s = tu_stats(st);
    assert_int_equal(s.pins, 0);
    assert_int_equal(tu_match_len(ns, sys, 4 * PT), 0);
    assert_int_equal(sb_ns_unpin(ns, id), SB_ERR_NOT_FOUND);
    tu_check(st);

    /* An expired pin is also gone for sb_ns_unpin without any pressure. */
    tu_put(ns, &LAYOUT, sys, 4 * PT, false, SB_OK);
    uint64_t id2 = 0;
    assert_int_equal(sb_ns_pin(ns, sys, 4 * PT, 1, &id2, NULL), SB_OK);
    assert_int_not_equal(id2, id);
    c.now_ns += 1 * MS;
    assert_int_equal(sb_ns_unpin(ns, id2), SB_ERR_NOT_FOUND);
    assert_int_equal(tu_stats(st).pins, 0);
    sb_ns_close(ns);
    sb_store_close(st);
}

static void test_pins_ttl_zero_until_unpin(void **state)
{
    (void)state;
    fake_clock c = { 0 };
    sb_store *st = clock_store(&c, 24);
    sb_ns *ns = tu_ns(st, &LAYOUT, "forever");
    sb_ns *other = tu_ns(st, &LAYOUT, "other");
    uint64_t rng = 43;
    uint32_t first = 30000;
    uint32_t sys[4 * PT];
    tu_tokens(&rng, sys, 4 * PT, 1000);
    tu_put(ns, &LAYOUT, sys, 4 * PT, false, SB_OK);
    uint64_t id = 0;
    assert_int_equal(sb_ns_pin(ns, sys, 4 * PT, 0, &id, NULL), SB_OK);

    /* A million seconds later, after pressure: still there. */
    c.now_ns += 1000000ull * 1000 * MS;
    pressure(st, ns, &rng, &first, 48);
    assert_int_equal(tu_stats(st).pins, 1);
    assert_int_equal(tu_match_verify(ns, &LAYOUT, sys, 4 * PT), 4 * PT);

    /* Unknown ids, and a live id through another namespace: not found, and
     * the pin stays. */
    assert_int_equal(sb_ns_unpin(ns, id + 1000), SB_ERR_NOT_FOUND);
    assert_int_equal(sb_ns_unpin(ns, 0), SB_ERR_NOT_FOUND);
    assert_int_equal(sb_ns_unpin(other, id), SB_ERR_NOT_FOUND);
    assert_int_equal(sb_ns_unpin(NULL, id), SB_ERR_INVAL);
    assert_int_equal(tu_stats(st).pins, 1);
    /* Another handle on the same namespace can remove it. */
    sb_ns *again = tu_ns(st, &LAYOUT, "forever");
    assert_int_equal(sb_ns_unpin(again, id), SB_OK);
    sb_ns_close(again);
    assert_int_equal(sb_ns_unpin(ns, id), SB_ERR_NOT_FOUND);
    assert_int_equal(tu_stats(st).pins, 0);
    assert_int_equal(tu_stats(st).pinned_pages, 0);

    /* Unpinned, it goes under pressure like anything else. */
    pressure(st, ns, &rng, &first, 48);
    assert_int_equal(tu_match_len(ns, sys, 4 * PT), 0);
    tu_check(st);
    sb_ns_close(other);
    sb_ns_close(ns);
    sb_store_close(st);
}

/* What a pin holds: the longest stored prefix at pin time. */
static void test_pins_extent(void **state)
{
    (void)state;
    fake_clock c = { 0 };
    sb_store *st = clock_store(&c, 24);
    sb_ns *ns = tu_ns(st, &LAYOUT, "extent");
    uint64_t rng = 44;
    uint32_t first = 40000;
    uint32_t sys[4 * PT], junk[8] = { 99999, 1, 2, 3, 4, 5, 6, 7 };
    tu_tokens(&rng, sys, 4 * PT, 1000);
    /* Stored: 40 tokens (2.5 pages). A pin on all 64 holds those 40. */
    tu_put(ns, &LAYOUT, sys, 40, false, SB_OK);
    uint64_t id = 0, id0 = 0;
    size_t n_pinned = 0;
    assert_int_equal(sb_ns_pin(ns, sys, 4 * PT, 0, &id, &n_pinned), SB_OK);
    assert_int_equal(n_pinned, 40);
    /* Nothing stored: a pin that holds nothing, still a pin. */
    assert_int_equal(sb_ns_pin(ns, junk, 8, 0, &id0, &n_pinned), SB_OK);
    assert_int_equal(n_pinned, 0);
    assert_int_equal(tu_stats(st).pins, 2);
    assert_int_equal(tu_stats(st).pinned_pages, 3);
    /* A later put extends the sequence; the pin does not grow with it,
     * except that the longer page superseding its partial page (tokens
     * 32..40 -> 32..48) is pinned in the old one's place, so exactly that
     * page's tokens stay restorable: 48, not 64. */
    tu_put(ns, &LAYOUT, sys, 4 * PT, false, SB_OK);
    pressure(st, ns, &rng, &first, 72);
    assert_int_equal(tu_match_verify(ns, &LAYOUT, sys, 4 * PT), 48);
    assert_int_equal(sb_ns_unpin(ns, id0), SB_OK);
    assert_int_equal(sb_ns_unpin(ns, id), SB_OK);
    assert_int_equal(tu_stats(st).pins, 0);
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
}

/* Pinned pages are never evicted: a put that needs more than the rest of
 * the budget stores the longest page-aligned prefix that fits and returns
 * SB_ERR_BUDGET. Budget 24 pages, 4 pinned: a 30-page put stores 20. */
static void test_pins_budget_denial(void **state)
{
    (void)state;
    fake_clock c = { 0 };
    sb_store *st = clock_store(&c, 24);
    sb_ns *ns = tu_ns(st, &LAYOUT, "deny");
    uint64_t rng = 45;
    uint32_t first = 50000;
    uint32_t sys[4 * PT];
    tu_tokens(&rng, sys, 4 * PT, 1000);
    tu_put(ns, &LAYOUT, sys, 4 * PT, false, SB_OK);
    uint64_t id = 0;
    assert_int_equal(sb_ns_pin(ns, sys, 4 * PT, 0, &id, NULL), SB_OK);
    pressure(st, ns, &rng, &first, 18);

    enum { N = 30 * PT };
    uint32_t *big = malloc(N * sizeof *big);
    assert_non_null(big);
    tu_tokens(&rng, big, N, 1000);
    big[0] = first++;
    void **src = tu_state(&LAYOUT, big, N);
    sb_stats s0 = tu_stats(st);
    size_t stored = 0;
    assert_int_equal(sb_ns_put(ns, big, N, (const void *const *)src, NULL, &stored),
                     SB_ERR_BUDGET);
    assert_int_equal(stored, 20 * PT);
    sb_stats s1 = tu_stats(st);
    assert_true(s1.budget_denials > s0.budget_denials);
    assert_int_equal(s1.ram_bytes, 24 * PAGE);
    tu_check(st);
    assert_int_equal(tu_match_verify(ns, &LAYOUT, big, N), 20 * PT);
    assert_int_equal(tu_match_verify(ns, &LAYOUT, sys, 4 * PT), 4 * PT);
    tu_free_state(&LAYOUT, src);
    free(big);
    assert_int_equal(sb_ns_unpin(ns, id), SB_OK);
    sb_ns_close(ns);
    sb_store_close(st);
}

/* ---- protection of the latest commit --------------------------------------------- */

/* Budget 12 pages. Namespace a commits x1 then x2 (3 pages each); x2 is its
 * latest. Namespace b then puts 2-page sequences, 4 budgets' worth: x1 goes,
 * x2 stays whole (its last page is protected, and the pages before it are
 * not leaves). */
static void test_pins_newest_protected(void **state)
{
    (void)state;
    fake_clock c = { 0 };
    sb_store *st = clock_store(&c, 12);
    sb_ns *a = tu_ns(st, &LAYOUT, "a");
    sb_ns *b = tu_ns(st, &LAYOUT, "b");
    uint64_t rng = 46;
    uint32_t x1[3 * PT], x2[3 * PT], y[2 * PT];
    tu_tokens(&rng, x1, 3 * PT, 1000);
    tu_tokens(&rng, x2, 3 * PT, 1000);
    x1[0] = 60000;
    x2[0] = 60001;
    tu_put(a, &LAYOUT, x1, 3 * PT, false, SB_OK);
    tu_put(a, &LAYOUT, x2, 3 * PT, false, SB_OK);
    sb_stats s0 = tu_stats(st);
    for (uint32_t i = 0; i < 24; i++) {
        tu_tokens(&rng, y, 2 * PT, 1000);
        y[0] = 61000 + i;
        tu_put(b, &LAYOUT, y, 2 * PT, false, SB_OK);
        tu_check(st);
    }
    sb_stats s1 = tu_stats(st);
    assert_true(s1.evictions - s0.evictions >= 36);
    assert_int_equal(tu_match_len(a, x1, 3 * PT), 0);
    assert_int_equal(tu_match_verify(a, &LAYOUT, x2, 3 * PT), 3 * PT);
    assert_int_equal(tu_match_verify(b, &LAYOUT, y, 2 * PT), 2 * PT);
    sb_ns_close(a);
    sb_ns_close(b);
    sb_store_close(st);
}

/* Protection yields rather than failing a put. Budget 8 pages: a's latest
 * commit x (3 pages) is all that is evictable. b puts 6 pages (5 free): x's
 * protected last page goes, no more. Then b puts 8 pages: all of x goes. */
static void test_pins_protection_yields(void **state)
{
    (void)state;
    fake_clock c = { 0 };
    sb_store *st = clock_store(&c, 8);
    sb_ns *a = tu_ns(st, &LAYOUT, "a");
    sb_ns *b = tu_ns(st, &LAYOUT, "b");
    uint64_t rng = 47;
    uint32_t x[3 * PT], y6[6 * PT], y8[8 * PT];
    tu_tokens(&rng, x, 3 * PT, 1000);
    tu_tokens(&rng, y6, 6 * PT, 1000);
    tu_tokens(&rng, y8, 8 * PT, 1000);
    x[0] = 70000;
    y6[0] = 70001;
    y8[0] = 70002;
    tu_put(a, &LAYOUT, x, 3 * PT, false, SB_OK);

    sb_stats s0 = tu_stats(st);
    tu_put(b, &LAYOUT, y6, 6 * PT, false, SB_OK);
    tu_check(st);
    sb_stats s1 = tu_stats(st);
    assert_int_equal(s1.evictions - s0.evictions, 1);
    assert_int_equal(s1.budget_denials, s0.budget_denials);
    assert_int_equal(tu_match_verify(a, &LAYOUT, x, 3 * PT), 2 * PT);

    tu_put(b, &LAYOUT, y8, 8 * PT, false, SB_OK);
    tu_check(st);
    sb_stats s2 = tu_stats(st);
    assert_int_equal(s2.budget_denials, s0.budget_denials);
    assert_int_equal(tu_match_len(a, x, 3 * PT), 0);
    assert_int_equal(tu_match_len(b, y6, 6 * PT), 0);
    assert_int_equal(tu_match_verify(b, &LAYOUT, y8, 8 * PT), 8 * PT);
    assert_int_equal(s2.ram_bytes, 8 * PAGE);
    sb_ns_close(a);
    sb_ns_close(b);
    sb_store_close(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pins_survive_pressure),
        cmocka_unit_test(test_pins_ttl_expiry),
        cmocka_unit_test(test_pins_ttl_zero_until_unpin),
        cmocka_unit_test(test_pins_extent),
        cmocka_unit_test(test_pins_budget_denial),
        cmocka_unit_test(test_pins_newest_protected),
        cmocka_unit_test(test_pins_protection_yields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
