/* test_budget.c -- the disk tier's hourly write budget (sb_config
 * write_budget_*, backlog_bytes) on a fake clock, on a real directory.
 *
 * Description:
 *   - a simulated day: 12 hours of demand at twice the budget, then 12 at
 *     half of it, a minute at a time (puts, a flush, the clock advanced).
 *     Every sliding hour of device bytes (records, padding, summaries,
 *     superblock) stays within budget + burst; every hour of excess demand
 *     uses at least 95 % of the budget; after the first hour of low demand
 *     nothing is denied; denials are all "budget"; the newest sequences
 *     restore bit-exact (denied pages stay in RAM); a reopen finds no
 *     orphan (no page was written without its parent).
 *   - the soft controller: ten minutes of demand far above the budget
 *     write half the burst and then the rate, not the whole burst first.
 *   - the parent rule: a page whose parent was denied is denied too
 *     ("parent"), even once the budget has refilled.
 *   - the backlog: a zero-copy commit larger than backlog_bytes is written
 *     up to the backlog, the next page denied ("backlog") and those after
 *     it for their parent; a flush still succeeds.
 *   - spill: a put 16x the backlog streams out whole through a queue that
 *     never exceeds the backlog, with a RAM budget of a quarter of it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static char g_dir[128];
static uint64_t g_now;   /* the fake clock, ns */
static uint64_t g_burst; /* write_budget_burst_bytes; 0: the default */

static uint64_t fake_clock(void *ctx)
{
    (void)ctx;
    return g_now;
}

static int setup(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/var/tmp/snapbank-test-budget-XXXXXX");
    assert_non_null(mkdtemp(g_dir));
    g_now = 1000000000ull;
    g_burst = 0;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    assert_int_equal(system(cmd), 0);
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
    cfg.dir = g_dir;
    cfg.ram_bytes = 64u << 20;
    cfg.segment_bytes = 4u << 20;
    cfg.disk_bytes = 2ull << 30;
    cfg.write_budget_bytes_per_hour = budget;
    cfg.write_budget_burst_bytes = g_burst;
    cfg.backlog_bytes = backlog;
    cfg.clock_ns = fake_clock;
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
    static uint64_t w[MINUTES + 1], denied[MINUTES + 1];
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
        g_now += MIN_NS;
    }
    for (int m = 0; m + 60 <= MINUTES; m++)
        if (w[m + 60] - w[m] > BUDGET + (uint64_t)depth)
            fail_msg("minutes %d-%d: %llu bytes written, budget %llu + burst %llu", m, m + 60,
                     (unsigned long long)(w[m + 60] - w[m]), (unsigned long long)BUDGET,
                     (unsigned long long)depth);
    for (int h = 0; h < 12; h++) {
        uint64_t b = w[60 * h + 60] - w[60 * h];
        if (b < BUDGET * 95 / 100)
            fail_msg("hour %d (demand 2x the budget): %llu bytes, under 95%% of %llu", h,
                     (unsigned long long)b, (unsigned long long)BUDGET);
    }
    assert_int_equal(denied[MINUTES], denied[13 * 60]); /* low demand: all written */
    assert_true(denied[12 * 60] > 0);
    s = tu_stats(st);
    /* a sequence's second page is denied for its parent when its first was */
    assert_int_equal(s.disk_denials[SB_DENY_BUDGET] + s.disk_denials[SB_DENY_PARENT],
                     s.disk_write_denials);
    assert_true(s.disk_denials[SB_DENY_BUDGET] > 0);
    print_message("budget day: %llu pages denied, %llu bytes written, hour 0 %llu, hour 6 "
                  "%llu, hour 18 %llu (budget %llu)\n",
                  (unsigned long long)s.disk_write_denials,
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

static void test_budget_parent_rule(void **state)
{
    (void)state;
    /* 3 MiB an hour: a 256 KiB bucket, half of it the metadata reserve
     * (open writes 28 KiB of superblock), so room for one 68 KiB record */
    sb_store *st = open_store(3u << 20, 4ull << 30);
    sb_ns *ns = tu_ns(st, &L, "parent");
    uint64_t rng = 7;
    uint32_t a[16], b[16], c[16];
    tu_tokens(&rng, a, 16, 1u << 30);
    tu_tokens(&rng, b, 16, 1u << 30);
    tu_tokens(&rng, c, 16, 1u << 30);
    tu_put(ns, &L, c, 16, false, SB_OK); /* written: the bucket is full */
    assert_int_equal(sb_store_flush(st), SB_OK);
    tu_put(ns, &L, b, 16, false, SB_OK); /* denied: the bucket holds too little */
    sb_stats s = tu_stats(st);
    assert_int_equal(s.disk_denials[SB_DENY_BUDGET], 1);
    g_now += 24 * 60 * MIN_NS; /* a full bucket again */
    tu_put(ns, &L, a, 16, false, SB_OK);
    assert_int_equal(sb_store_flush(st), SB_OK);
    s = tu_stats(st);
    assert_int_equal(s.disk_denials[SB_DENY_BUDGET], 1);
    assert_int_equal(s.disk_pages, 2);
    /* b grows: its first page was never written, so neither is the next */
    uint32_t bb[32];
    memcpy(bb, b, sizeof b);
    tu_tokens(&rng, bb + 16, 16, 1u << 30);
    g_now += 24 * 60 * MIN_NS;
    tu_put(ns, &L, bb, 32, false, SB_OK);
    s = tu_stats(st);
    assert_int_equal(s.disk_denials[SB_DENY_PARENT], 1);
    assert_int_equal(tu_match_verify(ns, &L, bb, 32), 32); /* served from RAM */
    assert_int_equal(sb_store_flush(st), SB_OK);
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
    st = open_store(3u << 20, 4ull << 30);
    s = tu_stats(st);
    assert_int_equal(s.recovery_orphans, 0);
    assert_int_equal(s.recovered_pages, 2); /* c and a, not b's two */
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
    assert_int_equal(sb_store_flush(st), SB_OK);
    sb_stats s = tu_stats(st);
    /* the commit queues 4 pages (256 KiB), the fifth is denied for the
     * backlog, the rest for their parent */
    assert_int_equal(s.disk_denials[SB_DENY_BACKLOG], 1);
    assert_int_equal(s.disk_pages, 4);
    assert_int_equal(s.disk_pages + s.disk_denials[SB_DENY_BACKLOG] +
                         s.disk_denials[SB_DENY_PARENT], 10);
    assert_int_equal(tu_match_verify(ns, &L, tok, 160), 160);
    tu_check(st);
    sb_ns_close(ns);
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
    cfg.dir = g_dir;
    cfg.ram_bytes = 1u << 20;      /* 16 pages */
    cfg.segment_bytes = 4u << 20;
    cfg.disk_bytes = 1ull << 30;
    cfg.backlog_bytes = 256u << 10; /* 4 pages */
    cfg.clock_ns = fake_clock;
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
        cmocka_unit_test_setup_teardown(test_budget_parent_rule, setup, teardown),
        cmocka_unit_test_setup_teardown(test_budget_backlog, setup, teardown),
        cmocka_unit_test_setup_teardown(test_budget_spill, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
