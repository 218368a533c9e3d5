/* test_priority.c -- the order in which the disk tier writes what waits for
 * the write budget (store/disk/admit.c's priority pool), on a fake clock.
 *
 * Description: the budget's bucket is emptied with filler pages, then
 * eight conversations share a two-page system prompt and each adds a
 * three-page tail of its own; one conversation is matched three times
 * more (hits), one has a point state. Everything waits in the pool. The
 * clock then advances in small steps, a flush after each, until the pool
 * is empty. The write queue's tickets give the order every page was
 * queued in:
 *   - every page is written, none denied, and a reopen finds no orphan;
 *   - along every path each page is queued after the page before it
 *     (parents first);
 *   - the shared system prompt is queued before every tail page (shared
 *     shallow pages before deep unshared ones);
 *   - the tails of the conversation with hits are queued before the other
 *     tails.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "disk_int.h" /* sb_drec_of, sb_disk_state: the disk tier's state of a block */
#include "internal.h"
#include "testutil.h"

static char g_dir[128];
static _Atomic uint64_t g_now; /* the fake clock, ns (the writer reads it too) */

static int setup(void **state)
{
    (void)state;
    tu_scratch_dir(g_dir, sizeof g_dir, "priority");
    g_now = 1000000000ull;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_remove_dir(g_dir);
    return 0;
}

/* 16 tokens x 4 KiB: 64 KiB pages; 8 KiB point states. */
static const tu_layout L = { .page_tokens = 16, .n_tensors = 1, .bpt = { 4096 },
                             .point_bytes = 8192, .model = "priority" };

enum { CONVS = 8, SYS = 32, TAIL = 48, N = SYS + TAIL, PAGES = N / 16, HOT = 3, WITH_POINT = 5 };

static sb_store *open_store(void)
{
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.dir = g_dir;
    cfg.min_prefix_tokens = 1;
    cfg.ram_bytes = 256u << 20;
    cfg.segment_bytes = 4u << 20;
    cfg.disk_bytes = 1ull << 30;
    cfg.write_budget_bytes_per_hour = 16u << 20;
    cfg.clock_ns = tu_fake_clock;
    cfg.clock_ctx = &g_now;
    sb_store *st = NULL;
    assert_int_equal(sb_store_open(&cfg, &st), SB_OK);
    return st;
}

/* The write-queue tickets of conversation tok's pages (all written). */
static void tickets(sb_ns *ns, const uint32_t *tok, uint64_t *out)
{
    sb_match *m;
    assert_int_equal(sb_ns_match(ns, tok, N, &m), SB_OK);
    sb_page *pages[PAGES];
    assert_int_equal(sb_match_pages(m, 0, PAGES, pages), SB_OK);
    for (int r = 0; r < PAGES; r++) {
        sb_blk *b = pages[r];
        if (sb_disk_state(b) != SB_DISK_CLEAN)
            fail_msg("page %d not written (disk state %d)", r, sb_disk_state(b));
        out[r] = sb_drec_of(b)->ticket;
        sb_page_unref(pages[r]);
    }
    sb_match_release(m);
}

static void test_priority_order(void **state)
{
    (void)state;
    sb_store *st = open_store();
    sb_ns *fill = tu_ns(st, &L, "filler"), *ns = tu_ns(st, &L, "chat");
    uint64_t rng = 11;
    uint32_t tok[N];
    /* Empty the bucket: one-page sequences until one has to wait. */
    for (int i = 0; i < 400 && tu_stats(st).disk_deferred == 0; i++) {
        tu_tokens(&rng, tok, 16, 1u << 30);
        tu_put(fill, &L, tok, 16, false, SB_OK);
    }
    assert_true(tu_stats(st).disk_deferred > 0);

    static uint32_t conv[CONVS][N];
    tu_tokens(&rng, conv[0], SYS, 1u << 30);
    for (int c = 0; c < CONVS; c++) {
        memcpy(conv[c], conv[0], SYS * sizeof(uint32_t));
        tu_tokens(&rng, conv[c] + SYS, TAIL, 1u << 30);
        tu_put(ns, &L, conv[c], N, c == WITH_POINT, SB_OK);
    }
    for (int k = 0; k < 3; k++)
        assert_int_equal(tu_match_len(ns, conv[HOT], N), N);
    sb_stats s = tu_stats(st);
    uint64_t waiting = s.disk_pool_blocks;
    assert_true(waiting >= CONVS * PAGES - (CONVS - 1) * 2 + 1); /* the chat's blocks */

    /* The budget refills: 16 MiB an hour is about 4.7 KB a second, a
     * 68 KiB record every 15 s; steps of 5 s. */
    int steps = 0;
    while (tu_stats(st).disk_pool_blocks && steps < 20000) {
        g_now += 5000000000ull;
        assert_int_equal(sb_store_flush(st), SB_OK);
        steps++;
    }
    s = tu_stats(st);
    assert_int_equal(s.disk_pool_blocks, 0);
    assert_int_equal(s.disk_write_denials, 0);
    assert_true(s.disk_pool_written >= waiting);

    static uint64_t t[CONVS][PAGES];
    for (int c = 0; c < CONVS; c++)
        tickets(ns, conv[c], t[c]);
    uint64_t sys_last = t[0][1], hot_last = 0, cold_first = UINT64_MAX;
    for (int c = 0; c < CONVS; c++) {
        assert_int_equal(t[c][0], t[0][0]); /* the same shared pages */
        assert_int_equal(t[c][1], t[0][1]);
        for (int r = 1; r < PAGES; r++) /* parents first */
            if (t[c][r] <= t[c][r - 1])
                fail_msg("conversation %d: page %d queued (ticket %llu) before page %d (%llu)",
                         c, r, (unsigned long long)t[c][r], r - 1,
                         (unsigned long long)t[c][r - 1]);
        for (int r = SYS / 16; r < PAGES; r++) {
            if (t[c][r] <= sys_last) /* shared shallow pages first */
                fail_msg("conversation %d: tail page %d queued before the system prompt", c, r);
            if (c == HOT && t[c][r] > hot_last)
                hot_last = t[c][r];
            if (c != HOT && t[c][r] < cold_first)
                cold_first = t[c][r];
        }
    }
    if (hot_last >= cold_first) /* pages with hits first */
        fail_msg("the matched conversation's tail (last ticket %llu) was not queued before the "
                 "other tails (first %llu)",
                 (unsigned long long)hot_last, (unsigned long long)cold_first);
    print_message("priority: %llu blocks waited, written over %d steps of 5 s; system prompt "
                  "tickets %llu %llu, matched tail up to %llu, other tails from %llu\n",
                  (unsigned long long)waiting, steps, (unsigned long long)t[0][0],
                  (unsigned long long)sys_last, (unsigned long long)hot_last,
                  (unsigned long long)cold_first);
    tu_check(st);
    sb_ns_close(fill);
    sb_ns_close(ns);
    sb_store_close(st);

    st = open_store();
    s = tu_stats(st);
    assert_int_equal(s.recovery_orphans, 0);
    assert_int_equal(s.recovered_points, 1);
    ns = tu_ns(st, &L, "chat");
    for (int c = 0; c < CONVS; c++)
        assert_int_equal(tu_match_verify(ns, &L, conv[c], N), N);
    sb_ns_close(ns);
    sb_store_close(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_priority_order, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
