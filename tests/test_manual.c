/* test_manual.c -- the store against sentences of its manual that it once
 * broke (issue 31: found by a stateful random test of the public API; the
 * project's own is tests/test_model.c). One case per defect, each named
 * after what broke, each failing before its fix. On the in-memory file
 * system of store/disk/io.h, whose power cut drops what was not synced.
 *
 *   point_past_limit     a durable point state at L with L + L % page_tokens
 *                        > max_seq_tokens came back from a reopen as an
 *                        orphan (recovery counted the point's tail twice)
 *   wait_after_denial    a ticket wait that queued a write-back block the
 *                        tier denied read the freed write set's ticket
 *                        (heap use-after-free: fails under ASan)
 *   reinsert_ticket      reclamation queued a hot block again with a block
 *                        ticket it never issued: a COMMIT put through it
 *                        waited for a sync that never covers it (hangs)
 *   commit_reclaimed     a COMMIT put whose earlier pages reclamation took
 *                        during the call said durable (with "short"
 *                        denials), and a kill after it lost them
 *   ticket_reclaimed     the same under PERIODIC durability: the ticket
 *                        turned durable though the pages were in RAM only
 *   write_only_evicted   under SB_WRITE_ONLY, a match over pages the RAM
 *                        tier had evicted matched more than it restored
 *                        (miss no_point on a layout without point states)
 *   write_only_put_again under SB_WRITE_ONLY, a put over tokens indexed on
 *                        disk only (after a reopen) said n_stored == n and
 *                        left them unrestorable for good
 *   pin_on_disk          a pin (no TTL) over pages on disk only after a
 *                        reopen did not keep them: reclamation took them
 *                        and the pinned prefix stopped matching
 *   commit_over_unsynced a commit whose own page took the place of an
 *                        index page on disk only, written but not yet
 *                        synced, said durable at once (the page took the
 *                        record without its block ticket), and a power
 *                        cut then lost it (fuzz_api, loose mode)
 *   put_then_close       a put just before a clean close was not on disk
 *                        after it: the writer decided to leave on a look
 *                        at its queues taken before the put (fuzz_api,
 *                        exact mode; ordered here with a writer hook)
 */
#define _DEFAULT_SOURCE /* usleep */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "disk.h"
#include "io.h"
#include "tier.h"
#include "testutil.h"
#include "tu_io.h"

/* 4 tokens x 1 KiB: 4 KiB pages, 8 KiB records; a 64 KiB segment holds a
 * namespace record and 7 page records. */
static const tu_layout LA = { .page_tokens = 4, .n_tensors = 1, .bpt = { 1024 },
                              .model = "manual-a" };

static void test_point_past_limit(void **state)
{
    (void)state;
    static const tu_layout LP = { .page_tokens = 32, .n_tensors = 1, .bpt = { 16 },
                                  .point_bytes = 24, .model = "manual-p" };
    sb_io *io = tu_mem_fs();
    sb_config c = tu_small_disk_config();
    c.max_seq_tokens = 40;
    sb_store *st = tu_open_io(&c, io);
    sb_ns *ns = tu_ns(st, &LP, "s");
    uint32_t tok[39];
    tu_seq(tok, 39, 1, 1000u);
    tu_put(ns, &LP, tok, 39, true, SB_OK); /* 39 + 39 % 32 = 46 > 40 */
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);

    st = tu_open_io(&c, io);
    sb_stats s = tu_stats(st);
    assert_int_equal(s.recovery_orphans, 0);
    assert_int_equal(s.recovered_points, 1);
    ns = tu_ns(st, &LP, "s");
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, tok, 39, &m), SB_OK);
    sb_match_info info;
    assert_int_equal(sb_match_get_info(m, &info), SB_OK);
    assert_int_equal(info.n_tokens, 39);
    assert_int_equal(info.has_point, 1);
    sb_match_release(m);
    assert_int_equal(tu_restore_exact(ns, &LP, tok, 39, NULL), 39);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
}

static void test_wait_after_denial(void **state)
{
    (void)state;
    sb_io *io = tu_mem_fs();
    sb_config c = tu_small_disk_config();
    c.write_mode = SB_WRITE_BACK;
    c.min_prefix_tokens = 512; /* the default: 100 tokens are short */
    sb_store *st = tu_open_io(&c, io);
    sb_ns *ns = tu_ns(st, &LA, "s");
    uint32_t tok[100];
    tu_seq(tok, 100, 2, 1000u);
    size_t stored = 0;
    sb_write_outcome oc;
    assert_int_equal(tu_put_ex(ns, &LA, tok, 100, false, &stored, &oc), SB_OK);
    assert_int_equal(stored, 100);
    assert_int_equal(oc.durable, 0);
    assert_int_not_equal(oc.ticket, 0);
    /* Dirty, so pending; the wait queues its blocks, which are denied
     * (short): the set is freed and the ticket fails. */
    assert_int_equal(sb_store_wait_durable(st, oc.ticket, 1000), SB_ERR_NOT_DURABLE);
    assert_int_equal(sb_store_is_durable(st, oc.ticket), SB_ERR_NOT_DURABLE);
    assert_int_equal(tu_restore_exact(ns, &LA, tok, 100, NULL), 100);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
}

static void test_reinsert_ticket(void **state)
{
    (void)state;
    sb_io *io = tu_mem_fs();
    sb_config c = tu_small_disk_config(); /* 64 KiB segments: 7 records */
    c.disk_bytes = 4 * c.segment_bytes;
    c.durability = SB_DURABILITY_COMMIT;
    sb_store *st = tu_open_io(&c, io);
    sb_ns *ns = tu_ns(st, &LA, "s");
    uint32_t p[28];
    tu_seq(p, 28, 3, 1000u);
    size_t stored = 0;
    sb_write_outcome oc;
    assert_int_equal(tu_put_ex(ns, &LA, p, 28, false, &stored, &oc), SB_OK);
    assert_int_equal(oc.durable, 1);
    /* One partial page per put: a partial page that does not fit waits
     * on its own list while the writer seals and opens a segment, so the
     * queue is empty when the reclamation that follows queues P's pages
     * again (P is hot: matched each round). P's put again must come back
     * durable, not wait for good. */
    for (uint32_t i = 0; i < 40; i++) {
        assert_int_equal(tu_match_len(ns, p, 28), 28);
        uint32_t f[3];
        tu_seq(f, 3, 100 + i, 1000u);
        assert_int_equal(tu_put_ex(ns, &LA, f, 3, false, &stored, &oc), SB_OK);
        assert_int_equal(tu_put_ex(ns, &LA, p, 28, false, &stored, &oc), SB_OK);
        assert_int_equal(stored, 28);
        assert_int_equal(oc.durable, 1);
        assert_int_equal(sb_store_wait_durable(st, oc.ticket, SB_WAIT_FOREVER), SB_OK);
    }
    sb_stats s = tu_stats(st);
    assert_true(s.disk_reclaimed_segments >= 4);
    assert_true(s.disk_reclaim_kept >= 7);
    assert_int_equal(tu_restore_exact(ns, &LA, p, 28, NULL), 28);
    tu_check(st);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
}

/* A store of 4 segments of 64 KiB (a namespace record and 7 pages each)
 * whose first segment holds P (7 pages) and the next two other sequences
 * of 7 pages: the next segment opened is the last under the cap, and the
 * writer starts draining the first (P: not hot, all resident, so its
 * pages stay in RAM only). Returns the store; P is tok[0, 28). */
static sb_store *p_first(sb_io *io, sb_durability dur, sb_ns **ns, const tu_layout *l,
                         const uint32_t *p)
{
    sb_config c = tu_small_disk_config();
    c.disk_bytes = 4 * c.segment_bytes;
    c.durability = dur;
    sb_store *st = tu_open_io(&c, io);
    *ns = tu_ns(st, l, "s");
    tu_put(*ns, l, p, 28, false, SB_OK);
    for (uint32_t i = 0; i < 2; i++) {
        uint32_t f[28];
        tu_seq(f, 28, 200 + i, 1000u);
        tu_put(*ns, l, f, 28, false, SB_OK);
    }
    assert_int_equal(sb_store_flush(st), SB_OK);
    sb_stats s = tu_stats(st);
    assert_int_equal(s.disk_segments, 3);
    assert_int_equal(s.disk_reclaimed_segments, 0);
    return st;
}

/* What a kill leaves of tok[0, n): the tokens a reopen restores. */
static size_t after_kill(sb_store *st, sb_ns *ns, sb_io *io, const tu_layout *l,
                         const uint32_t *tok, size_t n)
{
    sb_ns_close(ns);
    sb_store_crash(st);
    sb_config c = tu_small_disk_config();
    c.disk_bytes = 4 * c.segment_bytes;
    st = tu_open_io(&c, io);
    ns = tu_ns(st, l, "s");
    size_t got = tu_restore_exact(ns, l, tok, n, NULL);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    return got;
}

/* Put P and the 7 pages after it (tok[0, 56)) through one call: writing
 * them opens the fourth segment, and reclamation takes P's records (before
 * the call returns under COMMIT). Returns the call's outcome. */
static sb_write_outcome put_past_p(sb_ns *ns, const tu_layout *l, const uint32_t *tok)
{
    size_t stored = 0;
    sb_write_outcome oc;
    assert_int_equal(tu_put_ex(ns, l, tok, 56, false, &stored, &oc), SB_OK);
    assert_int_equal(stored, 56);
    assert_int_not_equal(oc.ticket, 0);
    return oc;
}

static void test_commit_reclaimed(void **state)
{
    (void)state;
    sb_io *io = tu_mem_fs();
    uint32_t tok[56];
    tu_seq(tok, 56, 4, 1000u);
    sb_ns *ns = NULL;
    sb_store *st = p_first(io, SB_DURABILITY_COMMIT, &ns, &LA, tok);
    sb_write_outcome oc = put_past_p(ns, &LA, tok);
    /* P's pages are hot when the call holds them by then (written again,
     * up to 3/4 of a segment: 6 of 7), cold when it does not yet (in RAM
     * only): either way some stay in RAM only, denied for capacity, and
     * pages after them may be denied too (parent). */
    sb_stats s = tu_stats(st);
    fprintf(stderr, "kept %llu ram-only %llu; outcome: durable %u denied %u (capacity %u, "
                    "parent %u, short %u)\n",
            (unsigned long long)s.disk_reclaim_kept, (unsigned long long)s.disk_reclaim_ram_only,
            oc.durable, oc.denied, oc.denied_by[SB_DENY_CAPACITY], oc.denied_by[SB_DENY_PARENT],
            oc.denied_by[SB_DENY_SHORT]);
    assert_true(s.disk_reclaim_ram_only >= 1);
    assert_int_equal(oc.durable, 0);
    assert_true(oc.denied_by[SB_DENY_CAPACITY] >= 1);
    assert_int_equal(oc.denied_by[SB_DENY_SHORT], 0);
    assert_int_equal(sb_store_wait_durable(st, oc.ticket, SB_WAIT_FOREVER), SB_ERR_NOT_DURABLE);
    assert_int_equal(tu_restore_exact(ns, &LA, tok, 56, NULL), 56); /* from RAM */
    /* A kill keeps at most what was written again, before the first page
     * left in RAM. */
    assert_true(after_kill(st, ns, io, &LA, tok, 56) <= 24);
    sb_io_destroy(io);
}

static void test_ticket_reclaimed(void **state)
{
    (void)state;
    sb_io *io = tu_mem_fs();
    uint32_t tok[56];
    tu_seq(tok, 56, 5, 1000u);
    sb_ns *ns = NULL;
    sb_store *st = p_first(io, SB_DURABILITY_PERIODIC, &ns, &LA, tok);
    sb_write_outcome oc = put_past_p(ns, &LA, tok);
    /* Whenever the reclamation runs, before the wait or during it, P's
     * pages are in RAM only after it: the ticket is never durable. */
    assert_int_equal(sb_store_wait_durable(st, oc.ticket, SB_WAIT_FOREVER), SB_ERR_NOT_DURABLE);
    assert_int_equal(sb_store_flush(st), SB_OK);
    sb_stats s = tu_stats(st);
    assert_int_equal(s.disk_reclaim_ram_only, 7);
    assert_int_equal(after_kill(st, ns, io, &LA, tok, 56), 0);
    sb_io_destroy(io);
}

static void test_write_only_evicted(void **state)
{
    (void)state;
    sb_io *io = tu_mem_fs();
    sb_config c = tu_small_disk_config();
    c.write_mode = SB_WRITE_ONLY;
    c.ram_pages = 24;
    sb_store *st = tu_open_io(&c, io);
    sb_ns *ns = tu_ns(st, &LA, "s");
    uint32_t a[32];
    tu_seq(a, 32, 6, 1000u);
    tu_put(ns, &LA, a, 32, false, SB_OK);
    assert_int_equal(sb_store_flush(st), SB_OK);
    for (uint32_t i = 0; i < 3; i++) { /* 24 pages more: A's go */
        uint32_t f[32];
        tu_seq(f, 32, 300 + i, 1000u);
        tu_put(ns, &LA, f, 32, false, SB_OK);
        assert_int_equal(sb_store_flush(st), SB_OK);
    }
    assert_true(tu_stats(st).evictions > 0);
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, a, 32, &m), SB_OK);
    sb_match_info info;
    assert_int_equal(sb_match_get_info(m, &info), SB_OK);
    sb_match_release(m);
    assert_true(info.n_tokens < 32);
    assert_int_equal(info.n_matched_tokens, info.n_tokens);
    assert_int_equal(info.n_pages_disk, 0);
    assert_int_equal(info.miss, SB_MISS_EVICTED);
    assert_int_equal(tu_restore_exact(ns, &LA, a, 32, NULL), info.n_tokens);
    /* Stored again, it is restorable again. */
    size_t stored = 0;
    sb_write_outcome oc;
    assert_int_equal(tu_put_ex(ns, &LA, a, 32, false, &stored, &oc), SB_OK);
    assert_int_equal(stored, 32);
    assert_int_equal(tu_restore_exact(ns, &LA, a, 32, NULL), 32);
    tu_check(st);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
}

static void test_write_only_put_again(void **state)
{
    (void)state;
    sb_io *io = tu_mem_fs();
    sb_config c = tu_small_disk_config();
    c.write_mode = SB_WRITE_ONLY;
    sb_store *st = tu_open_io(&c, io);
    sb_ns *ns = tu_ns(st, &LA, "s");
    uint32_t a[32];
    tu_seq(a, 32, 7, 1000u);
    tu_put(ns, &LA, a, 32, false, SB_OK);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    /* Reopened write-only: nothing is read back, so nothing matches... */
    st = tu_open_io(&c, io);
    ns = tu_ns(st, &LA, "s");
    assert_int_equal(tu_match_len(ns, a, 32), 0);
    /* ...and a put stores the tokens again, restorable at once. */
    size_t stored = 0;
    sb_write_outcome oc;
    assert_int_equal(tu_put_ex(ns, &LA, a, 32, false, &stored, &oc), SB_OK);
    assert_int_equal(stored, 32);
    assert_int_equal(tu_restore_exact(ns, &LA, a, 32, NULL), 32);
    tu_check(st);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    /* The records serve an open that reads the tier. */
    c.write_mode = SB_WRITE_THROUGH;
    st = tu_open_io(&c, io);
    ns = tu_ns(st, &LA, "s");
    assert_int_equal(tu_restore_exact(ns, &LA, a, 32, NULL), 32);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
}

static void test_pin_on_disk(void **state)
{
    (void)state;
    sb_io *io = tu_mem_fs();
    sb_config c = tu_small_disk_config();
    c.disk_bytes = 4 * c.segment_bytes;
    sb_store *st = tu_open_io(&c, io);
    sb_ns *ns = tu_ns(st, &LA, "s");
    uint32_t p[28];
    tu_seq(p, 28, 8, 1000u);
    tu_put(ns, &LA, p, 28, false, SB_OK); /* the first segment */
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);

    st = tu_open_io(&c, io);
    ns = tu_ns(st, &LA, "s");
    uint64_t pin = 0;
    size_t n_pinned = 0;
    assert_int_equal(sb_ns_pin(ns, p, 28, 0, &pin, &n_pinned), SB_OK);
    assert_int_equal(n_pinned, 28);
    /* Sequences enough to reclaim every segment several times over. */
    for (uint32_t i = 0; i < 12; i++) {
        uint32_t f[28];
        tu_seq(f, 28, 400 + i, 1000u);
        tu_put(ns, &LA, f, 28, false, SB_OK);
        assert_int_equal(sb_store_flush(st), SB_OK);
    }
    assert_true(tu_stats(st).disk_reclaimed_segments >= 4);
    assert_int_equal(tu_restore_exact(ns, &LA, p, 28, NULL), 28);
    uint32_t q[28]; /* shares P's first 4 tokens only */
    tu_seq(q, 28, 9, 1000u);
    memcpy(q, p, 4 * sizeof *q);
    assert_int_equal(tu_match_len(ns, q, 28), 4);
    tu_check(st);
    assert_int_equal(sb_ns_unpin(ns, pin), SB_OK);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
}

/* Until the disk tier has written `pages` page records: polled, since a
 * wait would sync them; ten minutes bound a writer slow to be scheduled. */
static void written(sb_store *st, uint64_t pages)
{
    for (int k = 0; k < 600000 && tu_stats(st).disk_pages < pages; k++)
        usleep(1000);
    assert_int_equal(tu_stats(st).disk_pages, pages);
}

static void test_commit_over_unsynced(void **state)
{
    (void)state;
    sb_io *io = tu_mem_fs();
    sb_config c = tu_small_disk_config();
    c.durability = SB_DURABILITY_NONE; /* synced at a flush, a wait, a close */
    c.ram_pages = 4;
    sb_store *st = tu_open_io(&c, io);
    sb_ns *ns = tu_ns(st, &LA, "s");
    uint32_t a[8];
    tu_seq(a, 8, 10, 1000u);
    tu_put(ns, &LA, a, 8, false, SB_OK);
    written(st, 2);
    /* Two sequences more, each written before the next: A, the least
     * recently used, leaves RAM for the last. The segment (a namespace
     * record and 7 pages) is not full: nothing sealed it, nothing synced. */
    for (uint32_t i = 0; i < 2; i++) {
        uint32_t f[8];
        tu_seq(f, 8, 500 + i, 1000u);
        tu_put(ns, &LA, f, 8, false, SB_OK);
        written(st, 4 + 2 * i);
    }
    sb_match *m = NULL;
    sb_match_info info;
    assert_int_equal(sb_ns_match(ns, a, 8, &m), SB_OK);
    assert_int_equal(sb_match_get_info(m, &info), SB_OK);
    sb_match_release(m);
    assert_int_equal(info.n_tokens, 8);
    assert_int_equal(info.n_pages_disk, 2);
    /* A committed again from the caller's pages: they take the records of
     * the pages on disk, which no sync has covered yet. */
    sb_page *pages[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(sb_ns_page_alloc(ns, &pages[i]), SB_OK);
    tu_fill_range(ns, &LA, a, 0, 8, pages);
    sb_write_outcome oc;
    assert_int_equal(sb_ns_commit_ex(ns, a, 8, pages, NULL, &oc), SB_OK);
    for (int i = 0; i < 2; i++)
        sb_page_unref(pages[i]);
    assert_int_equal(oc.pages_new, 0);
    assert_int_equal(oc.durable, 0);
    assert_int_equal(sb_store_is_durable(st, oc.ticket), SB_ERR_PENDING);
    assert_int_equal(sb_store_wait_durable(st, oc.ticket, SB_WAIT_FOREVER), SB_OK);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
}

/* The writer hook of put_then_close: armed, the first time the writer
 * stops between its look at the store and its decision (queues empty:
 * only full pages here, and a segment with room), it says so and waits
 * there until close has told it to stop. */
typedef struct gap {
    sb_store *st;
    atomic_int armed, entered;
} gap;

static void gap_hold(void *ctx)
{
    gap *g = ctx;
    if (!atomic_exchange(&g->armed, 0))
        return;
    atomic_store(&g->entered, 1);
    while (!sb_disk_stopping(g->st))
        usleep(1000);
}

static void test_put_then_close(void **state)
{
    (void)state;
    sb_io *io = tu_mem_fs();
    sb_config c = tu_small_disk_config(); /* PERIODIC: a sync is due 5 ms
                                             after a write */
    sb_store *st = tu_open_io(&c, io);
    sb_ns *ns = tu_ns(st, &LA, "s");
    uint32_t p[4], p2[4], q[4];
    tu_seq(p, 4, 11, 1000u);
    tu_seq(p2, 4, 12, 1000u);
    tu_seq(q, 4, 13, 1000u);
    tu_put(ns, &LA, p, 4, false, SB_OK); /* opens the segment */
    written(st, 1);
    gap g = { .st = st };
    atomic_store(&g.armed, 1);
    sb_disk_writer_hook(st, gap_hold, &g);
    /* P2's write leaves a sync due: the writer comes round with its queues
     * empty and waits in the hook. */
    tu_put(ns, &LA, p2, 4, false, SB_OK);
    while (!atomic_load(&g.entered))
        usleep(1000);
    /* Q is queued while it waits, then close tells it to stop. */
    tu_put(ns, &LA, q, 4, false, SB_OK);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);

    st = tu_open_io(&c, io);
    ns = tu_ns(st, &LA, "s");
    assert_int_equal(tu_restore_exact(ns, &LA, p2, 4, NULL), 4);
    assert_int_equal(tu_restore_exact(ns, &LA, q, 4, NULL), 4);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]); /* one case: test_manual test_pin_on_disk */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_point_past_limit),
        cmocka_unit_test(test_wait_after_denial),
        cmocka_unit_test(test_reinsert_ticket),
        cmocka_unit_test(test_commit_reclaimed),
        cmocka_unit_test(test_ticket_reclaimed),
        cmocka_unit_test(test_write_only_evicted),
        cmocka_unit_test(test_write_only_put_again),
        cmocka_unit_test(test_pin_on_disk),
        cmocka_unit_test(test_commit_over_unsynced),
        cmocka_unit_test(test_put_then_close),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
