/* test_budget.c -- the disk tier's hourly write budget (sb_config
 * write_budget_*, backlog_bytes) on a fake clock, on a real directory.
 *
 * Description:
 *   - a simulated day: 12 hours of demand at twice the budget, then 12 at
 *     half of it, a minute at a time (puts, a flush, the clock advanced).
 *     Every sliding hour of device bytes (records, padding, summaries,
 *     superblock) stays within budget + burst, every clock hour within the
 *     budget (the hour window); every hour of excess demand uses at least
 *     95 % of the budget; pages the budget could not take
 *     wait in the pool and are written during the low demand until it is
 *     empty, after which nothing more is denied; denials (pages that left
 *     RAM still waiting) are "budget" or "parent"; the newest sequences
 *     restore bit-exact; a reopen finds no orphan (no page was written
 *     without its parent).
 *   - the soft controller: ten minutes of demand far above the budget
 *     write half the burst and then the rate, not the whole burst first.
 *   - the pool: a page the bucket cannot take waits and is written once it
 *     has refilled, before what comes after it.
 *   - the parent rule: a page whose record the bucket can never hold is
 *     denied ("budget") and the page after it too ("parent"), even once
 *     the budget has refilled.
 *   - the backlog: a zero-copy commit larger than backlog_bytes queues up
 *     to the backlog; the rest waits in the pool ("backlog") and a flush
 *     writes it all as the writer catches up.
 *   - the minimum prefix: a sequence shorter than min_prefix_tokens writes
 *     nothing (denial "short"); a longer one through it later writes its
 *     pages, the earlier ones first.
 *   - spill: a put 16x the backlog streams out whole through a queue that
 *     never exceeds the backlog, with a RAM budget of a quarter of it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static char g_dir[128];
static _Atomic uint64_t g_now; /* the fake clock, ns (the writer reads it too) */
static uint64_t g_burst; /* write_budget_burst_bytes; 0: the default */
static uint32_t g_min_prefix; /* min_prefix_tokens */

static int setup(void **state)
{
    (void)state;
    tu_scratch_dir(g_dir, sizeof g_dir, "budget");
    g_now = 1000000000ull;
    g_burst = 0;
    g_min_prefix = 1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_remove_dir(g_dir);
    return 0;
}

#define MIN_NS (60ull * 1000000000ull)
#define BUDGET (16ull << 20) /* bytes per hour */

/* 16 tokens x 4 KiB: 64 KiB pages, records of about 68 KiB. */
static const tu_layout L = { .page_tokens = 16, .n_tensors = 1, .bpt = { 4096 },
                             .model = "budget" };

static sb_store *open_store(uint64_t budget, uint64_t backlog)
{
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.min_prefix_tokens = g_min_prefix;
    cfg.dir = g_dir;
    cfg.ram_bytes = 64u << 20;
    cfg.segment_bytes = 4u << 20;
    cfg.disk_bytes = 2ull << 30;
    cfg.write_budget_bytes_per_hour = budget;
    cfg.write_budget_burst_bytes = g_burst;
    cfg.backlog_bytes = backlog;
    cfg.clock_ns = tu_fake_clock;
    cfg.clock_ctx = &g_now;
    sb_store *st = NULL;
    assert_int_equal(sb_store_open(&cfg, &st), SB_OK);
    return st;
}

static void put_seq(sb_ns *ns, uint64_t *rng, uint32_t *tok, size_t n)
{
    tu_tokens(rng, tok, n, 1u << 30);
    tu_put(ns, &L, tok, n, false, SB_OK);
}

static void test_budget_day(void **state)
{
    (void)state;
    sb_store *st = open_store(BUDGET, 4ull << 30);
    sb_ns *ns = tu_ns(st, &L, "day");
    const double depth = BUDGET / 12.0;
    enum { MINUTES = 24 * 60 };
    static uint64_t w[MINUTES + 1], denied[MINUTES + 1], pooled[MINUTES + 1];
    uint64_t rng = 42;
    uint32_t tok[32];
    sb_stats s = tu_stats(st);
    w[0] = s.disk_write_bytes;
    denied[0] = s.disk_write_denials;
    for (int m = 0; m < MINUTES; m++) {
        /* 32-token sequences (2 pages, ~136 KiB): 4 a minute is twice the
         * budget's 273 KiB a minute, 1 a minute is half */
        int k = m < 12 * 60 ? 4 : 1;
        for (int i = 0; i < k; i++)
            put_seq(ns, &rng, tok, 32);
        assert_int_equal(sb_store_flush(st), SB_OK);
        s = tu_stats(st);
        w[m + 1] = s.disk_write_bytes;
        denied[m + 1] = s.disk_write_denials;
        pooled[m + 1] = s.disk_pool_blocks;
        g_now += MIN_NS;
    }
    for (int m = 0; m + 60 <= MINUTES; m++)
        if (w[m + 60] - w[m] > BUDGET + (uint64_t)depth)
            fail_msg("minutes %d-%d: %llu bytes written, budget %llu + burst %llu", m, m + 60,
                     (unsigned long long)(w[m + 60] - w[m]), (unsigned long long)BUDGET,
                     (unsigned long long)depth);
    for (int h = 0; h < 24; h++) /* the hour window: no hour writes the burst too */
        if (w[60 * h + 60] - w[60 * h] > BUDGET)
            fail_msg("hour %d: %llu bytes, over the budget %llu", h,
                     (unsigned long long)(w[60 * h + 60] - w[60 * h]),
                     (unsigned long long)BUDGET);
    for (int h = 0; h < 12; h++) {
        uint64_t b = w[60 * h + 60] - w[60 * h];
        if (b < BUDGET * 95 / 100)
            fail_msg("hour %d (demand 2x the budget): %llu bytes, under 95%% of %llu", h,
                     (unsigned long long)b, (unsigned long long)BUDGET);
    }
    /* Low demand: the pool drains with the half of the budget new pages
     * leave, and from then on every page is written. */
    int empty = 12 * 60;
    while (empty < MINUTES && pooled[empty])
        empty++;
    if (empty >= 23 * 60)
        fail_msg("the pool still held %llu blocks at minute %d", (unsigned long long)pooled[empty],
                 empty);
    assert_int_equal(denied[MINUTES], denied[empty]);
    assert_true(denied[12 * 60] > 0);
    s = tu_stats(st);
    assert_int_equal(s.disk_pool_blocks, 0);
    assert_true(s.disk_pool_written > 0);
    /* pages left RAM still waiting (budget), and pages after them (parent) */
    assert_int_equal(s.disk_denials[SB_DENY_BUDGET] + s.disk_denials[SB_DENY_PARENT],
                     s.disk_write_denials);
    assert_true(s.disk_denials[SB_DENY_BUDGET] > 0);
    print_message("budget day: %llu blocks waited in the pool, %llu written from it, %llu "
                  "denied; the pool empty at minute %d; %llu bytes written, hour 0 %llu, "
                  "hour 6 %llu, hour 18 %llu (budget %llu)\n",
                  (unsigned long long)s.disk_deferred, (unsigned long long)s.disk_pool_written,
                  (unsigned long long)s.disk_write_denials, empty,
                  (unsigned long long)s.disk_write_bytes,
                  (unsigned long long)(w[60] - w[0]), (unsigned long long)(w[420] - w[360]),
                  (unsigned long long)(w[1140] - w[1080]), (unsigned long long)BUDGET);
    assert_int_equal(tu_match_verify(ns, &L, tok, 32), 32); /* the newest, from RAM or disk */
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
    st = open_store(BUDGET, 4ull << 30);
    s = tu_stats(st);
    assert_int_equal(s.recovery_orphans, 0);
    assert_true(s.recovered_pages > 0);
    sb_store_close(st);
}

/* The soft controller: ten minutes of demand at four times the budget, with
 * a burst of a quarter hour. The hard bucket alone would write ten minutes
 * of the rate plus the whole burst (less the metadata reserve) at once; the
 * controller lets half the burst go, then paces pages at the rate. */
static void test_budget_pace(void **state)
{
    (void)state;
    g_burst = BUDGET / 4;
    sb_store *st = open_store(BUDGET, 4ull << 30);
    sb_ns *ns = tu_ns(st, &L, "pace");
    uint64_t rng = 3, w[11];
    uint32_t tok[32];
    w[0] = tu_stats(st).disk_write_bytes;
    for (int m = 0; m < 10; m++) {
        for (int i = 0; i < 8; i++)
            put_seq(ns, &rng, tok, 32);
        assert_int_equal(sb_store_flush(st), SB_OK);
        w[m + 1] = tu_stats(st).disk_write_bytes;
        g_now += MIN_NS;
    }
    double rate = BUDGET / 60.0, burst = (double)g_burst, rec = 70e3;
    double paced = 10 * rate + burst / 2 + rate + 2 * rec; /* the controller's bound */
    print_message("pace: 10 minutes at 4x the budget wrote %llu bytes (rate %.0f a minute, "
                  "burst %.0f; bound %.0f)\n",
                  (unsigned long long)(w[10] - w[0]), rate, burst, paced);
    assert_true((double)(w[10] - w[0]) <= paced);
    for (int m = 3; m < 10; m++) /* after the first half of the burst: the rate */
        assert_true((double)(w[m + 1] - w[m]) <= rate + 2 * rec);
    assert_true((double)(w[10] - w[0]) >= 10 * rate * 0.95);
    sb_ns_close(ns);
    sb_store_close(st);
}

/* A page the bucket cannot take now waits in the pool, in RAM, and is
 * written once the bucket has refilled (a flush drains the pool). */
static void test_budget_pool(void **state)
{
    (void)state;
    /* 3 MiB an hour: a 256 KiB bucket, half of it the metadata reserve
     * (open writes 28 KiB of superblock), so room for one 68 KiB record */
    sb_store *st = open_store(3u << 20, 4ull << 30);
    sb_ns *ns = tu_ns(st, &L, "pool");
    uint64_t rng = 7;
    uint32_t a[16], b[32];
    tu_tokens(&rng, a, 16, 1u << 30);
    tu_tokens(&rng, b, 32, 1u << 30);
    tu_put(ns, &L, a, 16, false, SB_OK); /* written: the bucket is full */
    assert_int_equal(sb_store_flush(st), SB_OK);
    tu_put(ns, &L, b, 32, false, SB_OK); /* both wait: the bucket holds too little */
    assert_int_equal(sb_store_flush(st), SB_OK);
    sb_stats s = tu_stats(st);
    assert_int_equal(s.disk_pages, 1);
    assert_int_equal(s.disk_deferred, 2);
    assert_int_equal(s.disk_pool_blocks, 2);
    assert_int_equal(s.disk_write_denials, 0);
    assert_int_equal(tu_match_verify(ns, &L, b, 32), 32); /* served from RAM */
    g_now += 24 * 60 * MIN_NS; /* a full bucket again: room for one, b's first */
    assert_int_equal(sb_store_flush(st), SB_OK);
    s = tu_stats(st);
    assert_int_equal(s.disk_pages, 2);
    assert_int_equal(s.disk_pool_blocks, 1);
    g_now += 24 * 60 * MIN_NS; /* and then its second */
    assert_int_equal(sb_store_flush(st), SB_OK);
    s = tu_stats(st);
    assert_int_equal(s.disk_pages, 3);
    assert_int_equal(s.disk_pool_written, 2);
    assert_int_equal(s.disk_pool_blocks, 0);
    assert_int_equal(s.disk_write_denials, 0);
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
    st = open_store(3u << 20, 4ull << 30);
    s = tu_stats(st);
    assert_int_equal(s.recovery_orphans, 0);
    assert_int_equal(s.recovered_pages, 3);
    sb_store_close(st);
}

/* 16 tokens x 16 KiB: records of 260 KiB, more than a 3 MiB budget's
 * bucket can ever hold for pages. */
static const tu_layout BIG = { .page_tokens = 16, .n_tensors = 1, .bpt = { 16384 },
                               .model = "budget-big" };

static void test_budget_parent_rule(void **state)
{
    (void)state;
    sb_store *st = open_store(3u << 20, 4ull << 30);
    sb_ns *ns = tu_ns(st, &BIG, "parent");
    uint64_t rng = 8;
    uint32_t a[32];
    tu_tokens(&rng, a, 32, 1u << 30);
    tu_put(ns, &BIG, a, 32, false, SB_OK);
    sb_stats s = tu_stats(st);
    /* the first can never be written, so neither can the second */
    assert_int_equal(s.disk_denials[SB_DENY_BUDGET], 1);
    assert_int_equal(s.disk_denials[SB_DENY_PARENT], 1);
    assert_int_equal(s.disk_denied_bytes[SB_DENY_BUDGET], 16 * 16384); /* a page each */
    assert_int_equal(s.disk_denied_bytes[SB_DENY_PARENT], 16 * 16384);
    assert_int_equal(s.disk_pool_blocks, 0);
    g_now += 24 * 60 * MIN_NS;
    assert_int_equal(sb_store_flush(st), SB_OK);
    s = tu_stats(st);
    assert_int_equal(s.disk_pages, 0);
    assert_int_equal(tu_match_verify(ns, &BIG, a, 32), 32); /* served from RAM */
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
}

static void test_budget_backlog(void **state)
{
    (void)state;
    sb_store *st = open_store(1ull << 40, 256u << 10); /* a 256 KiB queue */
    sb_ns *ns = tu_ns(st, &L, "backlog");
    uint64_t rng = 9;
    uint32_t tok[160]; /* 10 pages, 640 KiB in one zero-copy commit */
    tu_tokens(&rng, tok, 160, 1u << 30);
    sb_page *pages[10];
    for (int r = 0; r < 10; r++)
        assert_int_equal(sb_ns_page_alloc(ns, &pages[r]), SB_OK);
    tu_fill_range(ns, &L, tok, 0, 160, pages);
    assert_int_equal(sb_ns_commit(ns, tok, 160, pages, NULL), SB_OK);
    for (int r = 0; r < 10; r++)
        sb_page_unref(pages[r]);
    sb_stats s = tu_stats(st);
    /* the commit queues up to 4 pages (256 KiB); the others wait */
    assert_true(s.disk_deferred >= 6);
    assert_true(s.disk_queued_peak_bytes <= 256u << 10);
    assert_int_equal(sb_store_flush(st), SB_OK);
    s = tu_stats(st);
    assert_int_equal(s.disk_pages, 10);
    assert_int_equal(s.disk_pool_written, s.disk_deferred);
    assert_int_equal(s.disk_write_denials, 0);
    assert_true(s.disk_queued_peak_bytes <= 256u << 10);
    assert_int_equal(tu_match_verify(ns, &L, tok, 160), 160);
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
}

/* min_prefix_tokens 64 (4 pages): a 32-token sequence and its point state
 * write nothing; a 96-token sequence through it writes all six pages, its
 * first two first. */
static void test_budget_short(void **state)
{
    (void)state;
    g_min_prefix = 64;
    sb_store *st = open_store(1ull << 40, 4ull << 30);
    sb_ns *ns = tu_ns(st, &L, "short");
    uint64_t rng = 10;
    uint32_t tok[96];
    tu_tokens(&rng, tok, 96, 1u << 30);
    tu_put(ns, &L, tok, 32, false, SB_OK);
    assert_int_equal(sb_store_flush(st), SB_OK);
    sb_stats s = tu_stats(st);
    assert_int_equal(s.disk_pages, 0);
    assert_int_equal(s.disk_denials[SB_DENY_SHORT], 2);
    tu_put(ns, &L, tok, 63, false, SB_OK); /* one short of it */
    assert_int_equal(sb_store_flush(st), SB_OK);
    s = tu_stats(st);
    assert_int_equal(s.disk_pages, 0);
    assert_int_equal(s.disk_denials[SB_DENY_SHORT], 4);
    tu_put(ns, &L, tok, 96, false, SB_OK);
    assert_int_equal(sb_store_flush(st), SB_OK);
    s = tu_stats(st);
    assert_int_equal(s.disk_pages, 6);
    assert_int_equal(s.disk_write_denials, 4); /* the short ones, counted then */
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
    st = open_store(1ull << 40, 4ull << 30);
    s = tu_stats(st);
    assert_int_equal(s.recovery_orphans, 0);
    assert_int_equal(s.recovered_pages, 6);
    sb_ns *again = tu_ns(st, &L, "short");
    assert_int_equal(tu_match_verify(again, &L, tok, 96), 96);
    sb_ns_close(again);
    sb_store_close(st);
}

/* A put 16x the backlog streams out: written whole, no denial, the queue
 * never over the backlog, and a RAM budget of a quarter of the put is
 * enough (pages leave RAM as they reach the disk). */
static void test_budget_spill(void **state)
{
    (void)state;
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.min_prefix_tokens = 1; /* short test sequences are written too */
    cfg.dir = g_dir;
    cfg.ram_bytes = 1u << 20;      /* 16 pages */
    cfg.segment_bytes = 4u << 20;
    cfg.disk_bytes = 1ull << 30;
    cfg.backlog_bytes = 256u << 10; /* 4 pages */
    cfg.clock_ns = tu_fake_clock;
    cfg.clock_ctx = &g_now;
    sb_store *st = NULL;
    assert_int_equal(sb_store_open(&cfg, &st), SB_OK);
    sb_ns *ns = tu_ns(st, &L, "spill");
    uint64_t rng = 11;
    uint32_t tok[1024]; /* 64 pages, 4 MiB */
    tu_tokens(&rng, tok, 1024, 1u << 30);
    tu_put(ns, &L, tok, 1024, false, SB_OK);
    assert_int_equal(sb_store_flush(st), SB_OK);
    sb_stats s = tu_stats(st);
    print_message("spill: 4 MiB put through a 256 KiB backlog: %llu pages on disk, queue "
                  "peak %llu bytes, RAM peak within %llu bytes\n",
                  (unsigned long long)s.disk_pages,
                  (unsigned long long)s.disk_queued_peak_bytes,
                  (unsigned long long)cfg.ram_bytes);
    assert_int_equal(s.disk_pages, 64);
    assert_int_equal(s.disk_write_denials, 0);
    assert_true(s.disk_queued_peak_bytes <= cfg.backlog_bytes);
    assert_true(s.ram_bytes <= cfg.ram_bytes);
    /* A restore reads its pages into RAM at once: 12 fit this budget. */
    assert_int_equal(tu_match_verify(ns, &L, tok, 192), 192);
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
    cfg.ram_bytes = 64u << 20; /* all of it, after a restart */
    assert_int_equal(sb_store_open(&cfg, &st), SB_OK);
    ns = tu_ns(st, &L, "spill");
    assert_int_equal(tu_match_verify(ns, &L, tok, 1024), 1024);
    sb_ns_close(ns);
    sb_store_close(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_budget_day, setup, teardown),
        cmocka_unit_test_setup_teardown(test_budget_pace, setup, teardown),
        cmocka_unit_test_setup_teardown(test_budget_pool, setup, teardown),
        cmocka_unit_test_setup_teardown(test_budget_parent_rule, setup, teardown),
        cmocka_unit_test_setup_teardown(test_budget_backlog, setup, teardown),
        cmocka_unit_test_setup_teardown(test_budget_spill, setup, teardown),
        cmocka_unit_test_setup_teardown(test_budget_short, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
