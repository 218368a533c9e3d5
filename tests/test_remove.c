/* test_remove.c -- sb_ns_remove: a prefix's subtree out of the index and
 * the disk tier (the shared tier's part is in test_shared.c).
 *
 * RAM: what goes and what stays, page-aligned and mid-page cuts (a point
 * state left without cover goes with the pages), point states at the cut
 * and past it, a live match that keeps its bytes while the next match
 * misses, pages the caller holds committed again, pins that let go, bad
 * arguments. Disk (the in-memory file system): a clean restart and a power
 * cut after SB_OK bring nothing back and lose nothing else; the same
 * prefix put again after the removal survives both; a live match reads
 * disk-only pages the removal took; queued and dirty blocks of the
 * removed states are never written and their tickets fail; write-only
 * mode; a salvage; the superblock says version 3; fault and power-cut
 * sweeps through the call itself (the removal is whole or absent after
 * the crash, and nothing else is lost); reclamation keeps a tombstone
 * (copies it) while an older segment may hold what it removes and drops
 * it when none may; fsck accepts a store with tombstones.
 */
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "disk.h"
#include "disk_int.h"
#include "io.h"
#include "snapbank_fsck.h"
#include "testutil.h"
#include "tu_io.h"

/* 4 tokens x 1 KiB: 4 KiB pages; a point state of 32 bytes (optional). */
static const tu_layout LA = { .page_tokens = 4, .n_tensors = 1, .bpt = { 1024 },
                              .point_bytes = 32, .model = "remove-a" };
/* The same with point states required (a hybrid model's boundaries). */
static const tu_layout LP = { .page_tokens = 4, .n_tensors = 2, .bpt = { 64, 48 },
                              .point_bytes = 24, .flags = SB_LAYOUT_POINT_REQUIRED,
                              .model = "remove-p" };

/* What a match of tok[0, n) finds: L and the tokens matched. */
static void found(sb_ns *ns, const uint32_t *tok, size_t n, size_t *L, size_t *matched)
{
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, tok, n, &m), SB_OK);
    sb_match_info info;
    assert_int_equal(sb_match_get_info(m, &info), SB_OK);
    sb_match_release(m);
    if (L)
        *L = info.n_tokens;
    if (matched)
        *matched = info.n_matched_tokens;
}

static size_t matched_of(sb_ns *ns, const uint32_t *tok, size_t n)
{
    size_t m = 0;
    found(ns, tok, n, NULL, &m);
    return m;
}

static size_t remove_ok(sb_ns *ns, const uint32_t *tok, size_t n)
{
    size_t removed = 12345;
    assert_int_equal(sb_ns_remove(ns, tok, n, &removed), SB_OK);
    return removed;
}

/* ---- RAM: what goes ------------------------------------------------------------ */

/* A = P + 10 more (24 tokens, a point at 24), B leaves P at 13 (20, a
 * point), C = P[0, 6) (a point), D elsewhere. Removing P[0, 14) (r 3:
 * pages from depth 12 on) takes A's pages 3..5 and its point; B's page 3
 * does not start with P[12, 14) and stays, so A's path stays matched to
 * 13 (B covers it); C and D stay whole. */
static void test_ram_subtree(void **state)
{
    (void)state;
    sb_store *st = tu_store(0);
    sb_ns *ns = tu_ns(st, &LA, "s");
    uint32_t a[24], b[20], c[6], d[10];
    tu_seq(a, 24, 1, 1000u);
    memcpy(b, a, 13 * sizeof *a);
    tu_seq(b + 13, 7, 2, 1000u);
    memcpy(c, a, sizeof c);
    tu_seq(d, 10, 3, 1000u);
    tu_put(ns, &LA, a, 24, true, SB_OK);
    tu_put(ns, &LA, b, 20, true, SB_OK);
    tu_put(ns, &LA, c, 6, true, SB_OK);
    tu_put(ns, &LA, d, 10, true, SB_OK);
    sb_stats s0 = tu_stats(st);
    assert_int_equal(remove_ok(ns, a, 14), 4);
    sb_stats s1 = tu_stats(st);
    assert_int_equal(s1.removes, s0.removes + 1);
    assert_int_equal(s1.removed_pages, s0.removed_pages + 3);
    assert_int_equal(s1.removed_points, s0.removed_points + 1);
    assert_int_equal(s1.indexed_pages, s0.indexed_pages - 3);
    assert_int_equal(s1.points, s0.points - 1);
    assert_int_equal(s1.evictions, s0.evictions);
    assert_int_equal(s1.disk_tombstones, 0);
    assert_int_equal(matched_of(ns, a, 24), 13);
    assert_int_equal(tu_restore_exact(ns, &LA, a, 24, NULL), 13);
    assert_int_equal(tu_restore_exact(ns, &LA, b, 20, NULL), 20);
    assert_int_equal(tu_restore_exact(ns, &LA, c, 6, NULL), 6);
    assert_int_equal(tu_restore_exact(ns, &LA, d, 10, NULL), 10);
    tu_check(st);
    /* Nothing left under it: SB_OK, nothing removed. */
    assert_int_equal(remove_ok(ns, a, 14), 0);
    assert_int_equal(remove_ok(ns, a, 24), 0);
    /* Put again, it is all back. */
    tu_put(ns, &LA, a, 24, true, SB_OK);
    assert_int_equal(tu_restore_exact(ns, &LA, a, 24, NULL), 24);
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
}

/* pt 4: S = "abcdefgh" (a point at 8), C = "abcde" (a point at 5), E =
 * "abcdxyz" (leaves at 4). Removing "abcdef" (6: mid-page, r 1) takes
 * S's page 1 (it starts with "ef") and its point; C's own partial page was
 * superseded by that page, so C's point at 5 has no cover left and goes
 * too. Depth 4 stays (page 0), E stays whole. */
static void test_ram_mid_page(void **state)
{
    (void)state;
    sb_store *st = tu_store(0);
    sb_ns *ns = tu_ns(st, &LA, "s");
    uint32_t s8[8], c5[5], e7[7];
    tu_seq(s8, 8, 4, 1000u);
    memcpy(c5, s8, sizeof c5);
    memcpy(e7, s8, 4 * sizeof *s8);
    tu_seq(e7 + 4, 3, 5, 1000u);
    tu_put(ns, &LA, s8, 8, true, SB_OK);
    tu_put(ns, &LA, c5, 5, true, SB_OK);
    tu_put(ns, &LA, e7, 7, true, SB_OK);
    assert_int_equal(remove_ok(ns, s8, 6), 3); /* page 1, points at 8 and 5 */
    size_t L, m;
    found(ns, s8, 8, &L, &m);
    assert_int_equal(m, 4);
    found(ns, c5, 5, &L, &m);
    assert_int_equal(m, 4);
    assert_int_equal(tu_restore_exact(ns, &LA, e7, 7, NULL), 7);
    assert_int_equal(tu_restore_exact(ns, &LA, s8, 8, NULL), 4);
    tu_check(st);
    /* A cut at a page boundary keeps the page before it; the point
     * state at exactly the cut goes, and so does E, which starts with
     * the 4 tokens too. */
    tu_put(ns, &LA, s8, 8, true, SB_OK);
    uint32_t s4[4];
    memcpy(s4, s8, sizeof s4);
    tu_put(ns, &LA, s4, 4, true, SB_OK); /* a point at 4 */
    /* S's page 1 and point, E's page 1 and point, the point at 4 */
    assert_int_equal(remove_ok(ns, s8, 4), 5);
    found(ns, s8, 8, &L, &m);
    assert_int_equal(m, 4);
    found(ns, e7, 7, &L, &m);
    assert_int_equal(m, 4);
    sb_match *mt = NULL;
    assert_int_equal(sb_ns_match(ns, s4, 4, &mt), SB_OK);
    sb_match_info info;
    assert_int_equal(sb_match_get_info(mt, &info), SB_OK);
    assert_int_equal(info.n_tokens, 4);
    assert_int_equal(info.has_point, 0);
    sb_match_release(mt);
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
}

/* Under SB_LAYOUT_POINT_REQUIRED a match ends on the deepest point state:
 * after the removal, on the deepest one before the cut. */
static void test_ram_points_required(void **state)
{
    (void)state;
    sb_store *st = tu_store(0);
    sb_ns *ns = tu_ns(st, &LP, "s");
    uint32_t a[20];
    tu_seq(a, 20, 6, 1000u);
    tu_put(ns, &LP, a, 8, true, SB_OK);
    tu_put(ns, &LP, a, 13, true, SB_OK);
    tu_put(ns, &LP, a, 20, true, SB_OK);
    assert_int_equal(tu_restore_exact(ns, &LP, a, 20, NULL), 20);
    /* Cut at 13: the point at 13 and the pages of region 3 on go (the
     * one at 8 and pages 0, 1 stay; page 2 too: it ends at 12). */
    assert_int_equal(remove_ok(ns, a, 13), 2 + 2); /* pages 3, 4; points at 13, 20 */
    assert_int_equal(tu_restore_exact(ns, &LP, a, 20, NULL), 8);
    size_t m = matched_of(ns, a, 20);
    assert_int_equal(m, 12);
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
}

/* The namespace scopes a removal: the same tokens elsewhere stay. */
static void test_ram_scope(void **state)
{
    (void)state;
    sb_store *st = tu_store(0);
    sb_ns *x = tu_ns(st, &LA, "x"), *y = tu_ns(st, &LA, "y");
    uint32_t a[12];
    tu_seq(a, 12, 7, 1000u);
    tu_put(x, &LA, a, 12, false, SB_OK);
    tu_put(y, &LA, a, 12, false, SB_OK);
    assert_int_equal(remove_ok(x, a, 1), 3);
    assert_int_equal(matched_of(x, a, 12), 0);
    assert_int_equal(tu_restore_exact(y, &LA, a, 12, NULL), 12);
    tu_check(st);
    sb_ns_close(x);
    sb_ns_close(y);
    sb_store_close(st);
}

/* ---- RAM: holders ------------------------------------------------------------------- */

/* A live match restores the same bytes after the removal, and its pages
 * stay valid; the next match misses; the held pages committed again are
 * the state again. */
static void test_ram_live_match(void **state)
{
    (void)state;
    sb_store *st = tu_store(0);
    sb_ns *ns = tu_ns(st, &LA, "s");
    uint32_t a[18];
    tu_seq(a, 18, 8, 1000u);
    tu_put(ns, &LA, a, 18, true, SB_OK);
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, a, 18, &m), SB_OK);
    sb_page *pages[5];
    assert_int_equal(sb_match_pages(m, 0, 5, pages), SB_OK);
    assert_int_equal(remove_ok(ns, a, 6), 4 + 1); /* pages 1..4, the point */
    assert_int_equal(matched_of(ns, a, 18), 4);
    /* The held match. */
    void **bufs = tu_bufs(&LA, 18);
    uint8_t point[32];
    assert_int_equal(sb_match_restore(m, 18, bufs, point), SB_OK);
    assert_true(tu_state_equal(&LA, a, 18, bufs));
    void *want = tu_point(&LA, a, 18);
    assert_memory_equal(point, want, 32);
    assert_non_null(sb_match_point(m));
    assert_memory_equal(sb_match_point(m), want, 32);
    free(want);
    tu_free_state(&LA, bufs);
    sb_match_release(m);
    for (size_t r = 0; r < 5; r++)
        assert_true(tu_page_holds(ns, &LA, pages[r], a, r, r < 4 ? 4 : 2));
    tu_check(st);
    /* Committed again, the held pages are the state of a again. */
    assert_int_equal(sb_ns_commit(ns, a, 18, pages, NULL), SB_OK);
    assert_int_equal(tu_restore_exact(ns, &LA, a, 18, NULL), 18);
    for (size_t r = 0; r < 5; r++)
        sb_page_unref(pages[r]);
    tu_check(st);
    sb_stats s = tu_stats(st);
    assert_int_equal(s.ram_pages, s.indexed_pages);
    sb_ns_close(ns);
    sb_store_close(st);
}

/* A pin lets go of the pages the removal took, keeps those before the
 * cut, and its id stays valid. */
static void test_ram_pin(void **state)
{
    (void)state;
    sb_store *st = tu_store(0);
    sb_ns *ns = tu_ns(st, &LA, "s");
    uint32_t a[20];
    tu_seq(a, 20, 9, 1000u);
    tu_put(ns, &LA, a, 20, true, SB_OK);
    uint64_t id = 0;
    size_t np = 0;
    assert_int_equal(sb_ns_pin(ns, a, 20, 0, &id, &np), SB_OK);
    assert_int_equal(np, 20);
    assert_int_equal(tu_stats(st).pinned_pages, 5);
    assert_int_equal(remove_ok(ns, a, 9), 3 + 1); /* pages 2..4, the point */
    sb_stats s = tu_stats(st);
    assert_int_equal(s.pins, 1);
    assert_int_equal(s.pinned_pages, 2);
    assert_int_equal(s.ram_pages, s.indexed_pages); /* nothing held off the index */
    assert_int_equal(sb_ns_unpin(ns, id), SB_OK);
    assert_int_equal(tu_stats(st).pinned_pages, 0);
    assert_int_equal(tu_restore_exact(ns, &LA, a, 20, NULL), 8);
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
}

static void test_args(void **state)
{
    (void)state;
    sb_config c;
    sb_config_default(&c);
    c.max_seq_tokens = 64;
    sb_store *st = NULL;
    assert_int_equal(sb_store_open(&c, &st), SB_OK);
    sb_ns *ns = tu_ns(st, &LA, "s");
    uint32_t a[80];
    tu_seq(a, 80, 10, 1000u);
    tu_put(ns, &LA, a, 12, false, SB_OK);
    size_t n = 99;
    assert_int_equal(sb_ns_remove(NULL, a, 4, &n), SB_ERR_INVAL);
    assert_int_equal(n, 0);
    n = 99;
    assert_int_equal(sb_ns_remove(ns, NULL, 4, &n), SB_ERR_INVAL);
    assert_int_equal(n, 0);
    assert_int_equal(sb_ns_remove(ns, a, 0, &n), SB_ERR_NO_TOKENS);
    assert_int_equal(sb_ns_remove(ns, NULL, 0, &n), SB_ERR_NO_TOKENS);
    assert_int_equal(sb_ns_remove(ns, a, 65, &n), SB_ERR_TOO_MANY_TOKENS);
    assert_int_equal(n, 0);
    assert_int_equal(sb_ns_remove(ns, a, 64, NULL), SB_OK); /* n_removed may be NULL */
    assert_int_equal(tu_restore_exact(ns, &LA, a, 12, NULL), 12);
    assert_int_equal(tu_stats(st).removes, 1);
    sb_ns_close(ns);
    sb_store_close(st);
}

/* ---- disk ------------------------------------------------------------------------ */

/* The world of the disk cases: A = P + 9 (a point), B leaves P before the
 * cut (a point), D elsewhere. P is a[0, 11) (mid-page: r 2). */
typedef struct dworld {
    uint32_t a[20], b[16], d[12];
} dworld;

static void dworld_make(dworld *w, uint32_t seed)
{
    tu_seq(w->a, 20, seed, 1000u);
    memcpy(w->b, w->a, 10 * sizeof *w->a);
    tu_seq(w->b + 10, 6, seed + 1, 1000u);
    tu_seq(w->d, 12, seed + 2, 1000u);
}

static void dworld_put(sb_ns *ns, const dworld *w)
{
    tu_put(ns, &LA, w->a, 20, true, SB_OK);
    tu_put(ns, &LA, w->b, 16, true, SB_OK);
    tu_put(ns, &LA, w->d, 12, true, SB_OK);
}

/* After the removal of a[0, 11): A's path matched to 10 (B covers it),
 * restorable to 10; B and D whole, bit-exact. */
static void dworld_check_removed(sb_ns *ns, const dworld *w)
{
    size_t L, m;
    found(ns, w->a, 20, &L, &m);
    assert_int_equal(m, 10);
    assert_int_equal(tu_restore_exact(ns, &LA, w->a, 20, NULL), 10);
    assert_int_equal(tu_restore_exact(ns, &LA, w->b, 16, NULL), 16);
    assert_int_equal(tu_restore_exact(ns, &LA, w->d, 12, NULL), 12);
}

static void test_disk_restart(void **state)
{
    (void)state;
    for (int crash = 0; crash < 2; crash++) {
        sb_io *io = tu_mem_fs();
        sb_config c = tu_small_disk_config();
        sb_store *st = tu_open_io(&c, io);
        sb_ns *ns = tu_ns(st, &LA, "s");
        dworld w;
        dworld_make(&w, 20);
        dworld_put(ns, &w);
        assert_int_equal(sb_store_flush(st), SB_OK);
        assert_int_equal(remove_ok(ns, w.a, 11), 3 + 1); /* pages 2..4, the point at 20 */
        sb_stats s = tu_stats(st);
        assert_int_equal(s.disk_tombstones, 1);
        assert_true(s.disk_tombstone_bytes >= 4096);
        assert_int_equal(s.disk_tombstones_live, 1);
        dworld_check_removed(ns, &w);
        sb_ns_close(ns);
        if (crash) { /* right after SB_OK: what was not synced is lost */
            assert_int_equal(sb_io_mem_crash(io, 7, 0.0, 0.0), 0);
            sb_store_crash(st);
        } else {
            assert_int_equal(sb_store_close(st), SB_OK);
        }
        st = tu_open_io(&c, io);
        s = tu_stats(st);
        assert_int_equal(s.recovered_tombstones, 1);
        assert_int_equal(s.recovery_removed, 4); /* A's pages 2..4 and its point */
        assert_int_equal(s.recovery_orphans, 0);
        assert_int_equal(s.disk_tombstones_live, 1);
        ns = tu_ns(st, &LA, "s");
        dworld_check_removed(ns, &w);
        tu_check(st);
        sb_ns_close(ns);
        assert_int_equal(sb_store_close(st), SB_OK);
        sb_io_destroy(io);
    }
}

/* The prefix put again after the removal is newer than its tombstone and
 * survives a restart and a power cut; its own records do, the old ones
 * stay removed (a shorter put again shows which). */
static void test_disk_put_again(void **state)
{
    (void)state;
    for (int crash = 0; crash < 2; crash++) {
        sb_io *io = tu_mem_fs();
        sb_config c = tu_small_disk_config();
        sb_store *st = tu_open_io(&c, io);
        sb_ns *ns = tu_ns(st, &LA, "s");
        dworld w;
        dworld_make(&w, 30);
        dworld_put(ns, &w);
        assert_int_equal(sb_store_flush(st), SB_OK);
        remove_ok(ns, w.a, 11);
        /* A again, up to 15 only: its page 3 (12..15) is new, page 4 and
         * the point at 20 are not put again. */
        tu_put(ns, &LA, w.a, 15, true, SB_OK);
        assert_int_equal(sb_store_flush(st), SB_OK);
        sb_ns_close(ns);
        if (crash) {
            assert_int_equal(sb_io_mem_crash(io, 9, 0.0, 0.0), 0);
            sb_store_crash(st);
        } else {
            assert_int_equal(sb_store_close(st), SB_OK);
        }
        st = tu_open_io(&c, io);
        ns = tu_ns(st, &LA, "s");
        size_t L, m;
        found(ns, w.a, 20, &L, &m);
        assert_int_equal(m, 15);
        assert_int_equal(tu_restore_exact(ns, &LA, w.a, 20, NULL), 15);
        sb_match *mt = NULL;
        assert_int_equal(sb_ns_match(ns, w.a, 15, &mt), SB_OK);
        sb_match_info info;
        assert_int_equal(sb_match_get_info(mt, &info), SB_OK);
        assert_int_equal(info.has_point, 1);
        sb_match_release(mt);
        assert_int_equal(tu_restore_exact(ns, &LA, w.b, 16, NULL), 16);
        assert_int_equal(tu_restore_exact(ns, &LA, w.d, 12, NULL), 12);
        /* The whole of A again: restart, still all there. */
        tu_put(ns, &LA, w.a, 20, true, SB_OK);
        sb_ns_close(ns);
        assert_int_equal(sb_store_close(st), SB_OK);
        st = tu_open_io(&c, io);
        ns = tu_ns(st, &LA, "s");
        assert_int_equal(tu_restore_exact(ns, &LA, w.a, 20, NULL), 20);
        tu_check(st);
        sb_ns_close(ns);
        assert_int_equal(sb_store_close(st), SB_OK);
        sb_io_destroy(io);
    }
}

/* A live match over pages on disk only restores them after the removal
 * (their records stay until it is released); a new match misses. */
static void test_disk_live_match(void **state)
{
    (void)state;
    sb_io *io = tu_mem_fs();
    sb_config c = tu_small_disk_config();
    sb_store *st = tu_open_io(&c, io);
    sb_ns *ns = tu_ns(st, &LA, "s");
    dworld w;
    dworld_make(&w, 40);
    dworld_put(ns, &w);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    st = tu_open_io(&c, io); /* every page on disk only now */
    ns = tu_ns(st, &LA, "s");
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, w.a, 20, &m), SB_OK);
    sb_match_info info;
    assert_int_equal(sb_match_get_info(m, &info), SB_OK);
    assert_int_equal(info.n_tokens, 20);
    assert_int_equal(info.n_pages_disk, 5);
    remove_ok(ns, w.a, 11);
    dworld_check_removed(ns, &w);
    void **bufs = tu_bufs(&LA, 20);
    uint8_t point[32];
    assert_int_equal(sb_match_restore(m, 20, bufs, point), SB_OK);
    assert_true(tu_state_equal(&LA, w.a, 20, bufs));
    tu_free_state(&LA, bufs);
    sb_match_release(m);
    tu_check(st);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    st = tu_open_io(&c, io);
    ns = tu_ns(st, &LA, "s");
    dworld_check_removed(ns, &w);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
}

/* Pages the caller holds (sb_match_pages) committed again after the
 * removal are written anew: their old records are dead, and a power cut
 * after a flush keeps the state. */
static void test_disk_commit_again(void **state)
{
    (void)state;
    sb_io *io = tu_mem_fs();
    sb_config c = tu_small_disk_config();
    sb_store *st = tu_open_io(&c, io);
    sb_ns *ns = tu_ns(st, &LA, "s");
    dworld w;
    dworld_make(&w, 50);
    dworld_put(ns, &w);
    assert_int_equal(sb_store_flush(st), SB_OK);
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, w.a, 20, &m), SB_OK);
    sb_page *pages[5];
    assert_int_equal(sb_match_pages(m, 0, 5, pages), SB_OK);
    sb_match_release(m);
    remove_ok(ns, w.a, 11);
    sb_write_outcome oc;
    assert_int_equal(sb_ns_commit_ex(ns, w.a, 20, pages, NULL, &oc), SB_OK);
    for (size_t r = 0; r < 5; r++)
        sb_page_unref(pages[r]);
    assert_int_equal(sb_store_flush(st), SB_OK);
    assert_int_equal(sb_store_wait_durable(st, oc.ticket, SB_WAIT_FOREVER), SB_OK);
    sb_ns_close(ns);
    assert_int_equal(sb_io_mem_crash(io, 11, 0.0, 0.0), 0);
    sb_store_crash(st);
    st = tu_open_io(&c, io);
    ns = tu_ns(st, &LA, "s");
    assert_int_equal(tu_restore_exact(ns, &LA, w.a, 20, NULL), 20);
    tu_check(st);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
}

/* Write-back, durability NONE: the removed states' dirty pages are never
 * written (the state bytes written do not grow by theirs), and a ticket
 * that needed them fails. */
static void test_disk_dirty_not_written(void **state)
{
    (void)state;
    sb_io *io = tu_mem_fs();
    sb_config c = tu_small_disk_config();
    c.write_mode = SB_WRITE_BACK;
    c.durability = SB_DURABILITY_NONE;
    sb_store *st = tu_open_io(&c, io);
    sb_ns *ns = tu_ns(st, &LA, "s");
    uint32_t a[20], d[8];
    tu_seq(a, 20, 60, 1000u);
    tu_seq(d, 8, 61, 1000u);
    size_t stored = 0;
    sb_write_outcome oc;
    assert_int_equal(tu_put_ex(ns, &LA, a, 20, false, &stored, &oc), SB_OK);
    assert_int_equal(oc.dirty, 5);
    tu_put(ns, &LA, d, 8, false, SB_OK);
    assert_int_equal(remove_ok(ns, a, 2), 5);
    assert_int_equal(sb_store_wait_durable(st, oc.ticket, 1000), SB_ERR_NOT_DURABLE);
    assert_int_equal(sb_store_flush(st), SB_OK);
    sb_stats s = tu_stats(st);
    assert_int_equal(s.disk_logical_bytes, 8 * 1024); /* d's pages only */
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    st = tu_open_io(&c, io);
    ns = tu_ns(st, &LA, "s");
    assert_int_equal(matched_of(ns, a, 20), 0);
    assert_int_equal(tu_restore_exact(ns, &LA, d, 8, NULL), 8);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
}

/* Write-only mode writes the tombstone too: its index holds RAM only,
 * the records serve a later open. */
static void test_disk_write_only(void **state)
{
    (void)state;
    sb_io *io = tu_mem_fs();
    sb_config c = tu_small_disk_config();
    c.write_mode = SB_WRITE_ONLY;
    sb_store *st = tu_open_io(&c, io);
    sb_ns *ns = tu_ns(st, &LA, "s");
    dworld w;
    dworld_make(&w, 70);
    dworld_put(ns, &w);
    assert_int_equal(sb_store_flush(st), SB_OK);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    st = tu_open_io(&c, io); /* write-only: empty */
    ns = tu_ns(st, &LA, "s");
    assert_int_equal(matched_of(ns, w.a, 20), 0);
    assert_int_equal(remove_ok(ns, w.a, 11), 0);
    assert_int_equal(tu_stats(st).disk_tombstones, 1);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    c.write_mode = SB_WRITE_THROUGH;
    st = tu_open_io(&c, io);
    ns = tu_ns(st, &LA, "s");
    dworld_check_removed(ns, &w);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
}

/* Read the newest superblock slot of the store on io. */
static sb_super read_super(sb_io *io, sb_super_seg *segs, uint32_t max)
{
    int fd = sb_io_open(io, "superblock", 0);
    assert_true(fd >= 0);
    uint64_t size = 0;
    assert_int_equal(io->ops->size(io, fd, &size), 0);
    sb_super s;
    assert_int_equal(sb_disk_read_super(io, fd, size, &s, segs, max), SB_OK);
    sb_io_close(io, fd);
    return s;
}

/* A store says superblock version 3 from its first tombstone on (a build
 * without removal refuses it), and only then. */
static void test_disk_super_version(void **state)
{
    (void)state;
    sb_io *io = tu_mem_fs();
    sb_config c = tu_small_disk_config();
    sb_store *st = tu_open_io(&c, io);
    sb_ns *ns = tu_ns(st, &LA, "s");
    dworld w;
    dworld_make(&w, 80);
    dworld_put(ns, &w);
    assert_int_equal(sb_store_flush(st), SB_OK);
    static sb_super_seg segs[4096];
    assert_false(read_super(io, segs, 4096).tombstones);
    remove_ok(ns, w.a, 11);
    assert_true(read_super(io, segs, 4096).tombstones);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    assert_true(read_super(io, segs, 4096).tombstones);
    /* The version field itself: 3 in both slots now (the close wrote). */
    int fd = sb_io_open(io, "superblock", 0);
    uint64_t size = 0;
    assert_int_equal(io->ops->size(io, fd, &size), 0);
    uint8_t v[2];
    assert_int_equal(sb_io_pread(io, fd, v, 2, 8), 2);
    assert_int_equal(v[0] | v[1] << 8, 3);
    assert_int_equal(sb_io_pread(io, fd, v, 2, size / 2 + 8), 2);
    assert_int_equal(v[0] | v[1] << 8, 3);
    sb_io_close(io, fd);
    /* And it opens, keeps its tombstone, and still says so. */
    st = tu_open_io(&c, io);
    assert_int_equal(tu_stats(st).disk_tombstones_live, 1);
    assert_int_equal(sb_store_close(st), SB_OK);
    assert_true(read_super(io, segs, 4096).tombstones);
    sb_io_destroy(io);
}

/* A superblock lost after a removal: the salvage finds the tombstone in
 * the segment files, and the removed states stay removed. */
static void test_disk_salvage(void **state)
{
    (void)state;
    sb_io *io = tu_mem_fs();
    sb_config c = tu_small_disk_config();
    sb_store *st = tu_open_io(&c, io);
    sb_ns *ns = tu_ns(st, &LA, "s");
    dworld w;
    dworld_make(&w, 90);
    dworld_put(ns, &w);
    assert_int_equal(sb_store_flush(st), SB_OK);
    remove_ok(ns, w.a, 11);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    assert_int_equal(io->ops->unlink(io, "superblock"), 0);
    sb_store *bad = NULL;
    assert_int_equal(sb_store_open_io(&c, io, &bad), SB_ERR_SUPERBLOCK);
    c.open_flags = SB_OPEN_SALVAGE;
    st = tu_open_io(&c, io);
    sb_stats s = tu_stats(st);
    assert_int_equal(s.salvaged, 1);
    assert_int_equal(s.recovered_tombstones, 1);
    assert_int_equal(s.recovery_removed, 4);
    ns = tu_ns(st, &LA, "s");
    dworld_check_removed(ns, &w);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    static sb_super_seg segs[4096];
    assert_true(read_super(io, segs, 4096).tombstones);
    sb_io_destroy(io);
}

/* No memory for the tombstone: nothing changed. */
static void test_disk_nomem(void **state)
{
    (void)state;
    sb_io *io = tu_mem_fs();
    sb_config c = tu_small_disk_config();
    sb_store *st = tu_open_io(&c, io);
    sb_ns *ns = tu_ns(st, &LA, "s");
    dworld w;
    dworld_make(&w, 100);
    dworld_put(ns, &w);
    assert_int_equal(sb_store_fault_alloc(st, 1), SB_OK);
    size_t n = 99;
    assert_int_equal(sb_ns_remove(ns, w.a, 11, &n), SB_ERR_NOMEM);
    assert_int_equal(n, 0);
    assert_int_equal(sb_store_fault_alloc(st, 0), SB_OK);
    assert_int_equal(tu_restore_exact(ns, &LA, w.a, 20, NULL), 20);
    sb_stats s = tu_stats(st);
    assert_int_equal(s.removes, 0);
    assert_int_equal(s.disk_tombstones, 0);
    tu_check(st);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
}

/* ---- crashes during the call ------------------------------------------------------------- */

/* After a crash during sb_ns_remove that returned rc: B and D (durable,
 * not removed) whole; A's removed states gone when rc was SB_OK, else
 * gone or back whole (the tombstone is one record), never in part. */
static void check_after_crash(sb_io *io, const sb_config *c, const dworld *w, int rc,
                              const char *what, uint64_t k)
{
    sb_store *st = NULL;
    int orc = sb_store_open_io(c, io, &st);
    if (orc != SB_OK) {
        fprintf(stderr, "%s %llu: reopen: %s\n", what, (unsigned long long)k, sb_strerror(orc));
        fail();
    }
    sb_ns *ns = tu_ns(st, &LA, "s");
    assert_int_equal(tu_restore_exact(ns, &LA, w->b, 16, NULL), 16);
    assert_int_equal(tu_restore_exact(ns, &LA, w->d, 12, NULL), 12);
    size_t L, m;
    found(ns, w->a, 20, &L, &m);
    if (rc == SB_OK || m != 20) {
        if (m != 10) {
            fprintf(stderr, "%s %llu: remove said %s, A matches %zu tokens after the crash\n",
                    what, (unsigned long long)k, sb_strerror(rc), m);
            fail();
        }
        assert_int_equal(tu_restore_exact(ns, &LA, w->a, 20, NULL), 10);
    } else {
        assert_int_equal(tu_restore_exact(ns, &LA, w->a, 20, NULL), 20);
    }
    tu_check(st);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
}

/* A store with the world durable and the call about to be made. */
static sb_store *crash_setup(sb_io *io, const sb_config *c, dworld *w, sb_ns **ns)
{
    sb_store *st = tu_open_io(c, io);
    *ns = tu_ns(st, &LA, "s");
    dworld_make(w, 110);
    dworld_put(*ns, w);
    assert_int_equal(sb_store_flush(st), SB_OK);
    return st;
}

/* EIO (then a short write) at every I/O operation the call makes, then a
 * power cut that keeps a random part of what was not synced. */
static void test_crash_fault_sweep(void **state)
{
    (void)state;
    sb_config c = tu_small_disk_config();
    /* How many operations a clean call makes. */
    sb_io *io = tu_mem_fs();
    dworld w;
    sb_ns *ns;
    sb_store *st = crash_setup(io, &c, &w, &ns);
    uint64_t before = sb_io_mem_ops_count(io);
    remove_ok(ns, w.a, 11);
    uint64_t total = sb_io_mem_ops_count(io) - before;
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
    assert_true(total >= 3); /* the superblock (version 3), the record, a sync */
    int failed = 0;
    for (int err = 0; err < 2; err++)
        for (uint64_t k = 1; k <= total + 2; k++) {
            io = tu_mem_fs();
            st = crash_setup(io, &c, &w, &ns);
            sb_io_mem_fail_at(io, k, err ? 0 : -5 /* EIO, or a short write */);
            size_t n = 0;
            int rc = sb_ns_remove(ns, w.a, 11, &n);
            sb_io_mem_fail_at(io, 0, 0);
            if (rc != SB_OK) {
                assert_int_equal(rc, SB_ERR_IO);
                failed++;
            }
            assert_int_equal(n, 4); /* out of the index either way */
            dworld_check_removed(ns, &w);
            sb_ns_close(ns);
            assert_int_equal(sb_io_mem_crash(io, k * 31 + (uint64_t)err, 0.5, 0.1), 0);
            sb_store_crash(st);
            check_after_crash(io, &c, &w, rc, err ? "short write at op" : "EIO at op", k);
            sb_io_destroy(io);
        }
    print_message("remove: %d of %llu faults made it fail\n", failed,
                  (unsigned long long)(2 * (total + 2)));
    assert_true(failed > 0);
}

/* A power cut at each point the writer pauses (its gap hook) while the
 * call runs: the call says SB_OK (then nothing removed comes back) or
 * SB_ERR_IO. */
typedef struct cut_at {
    sb_io *io;
    _Atomic int left;          /* gaps to let pass; the next one cuts */
    _Atomic int cut;
} cut_at;

static void cut_hook(void *ctx)
{
    cut_at *c = ctx;
    if (atomic_load(&c->cut) || atomic_fetch_sub(&c->left, 1) > 0)
        return;
    atomic_store(&c->cut, 1);
    sb_io_mem_crash(c->io, 5, 0.5, 0.0);
}

static void test_crash_power_cut_sweep(void **state)
{
    (void)state;
    sb_config c = tu_small_disk_config();
    int said_ok = 0, cuts = 0;
    for (int k = 0; k < 12; k++) {
        sb_io *io = tu_mem_fs();
        dworld w;
        sb_ns *ns;
        sb_store *st = crash_setup(io, &c, &w, &ns);
        static cut_at at;
        at.io = io;
        atomic_store(&at.left, k);
        atomic_store(&at.cut, 0);
        sb_disk_writer_hook(st, cut_hook, &at);
        size_t n = 0;
        int rc = sb_ns_remove(ns, w.a, 11, &n);
        assert_true(rc == SB_OK || rc == SB_ERR_IO);
        said_ok += rc == SB_OK;
        cuts += atomic_load(&at.cut);
        sb_ns_close(ns);
        if (!atomic_load(&at.cut)) /* the call ended first: cut now */
            assert_int_equal(sb_io_mem_crash(io, 5, 0.5, 0.0), 0);
        sb_store_crash(st);
        check_after_crash(io, &c, &w, rc, "power cut at gap", (uint64_t)k);
        sb_io_destroy(io);
    }
    print_message("power cut sweep: %d calls said SB_OK, %d cut during the call\n", said_ok,
                  cuts);
    assert_true(said_ok > 0 && cuts > 0);
}

/* ---- reclamation -------------------------------------------------------------------------- */

/* 64 KiB segments hold a namespace record and 7 pages of 4 KiB (8 KiB
 * records). P's records are in the first segment; a match holds them (the
 * segment cannot go while it does), P is removed, and puts push the
 * tombstone's own segment to reclamation while the first is still there:
 * the tombstone is written again (a copy), and nothing of P comes back
 * after a power cut. Once the first segment is gone too, the tombstone is
 * dropped with its segment. */
static void test_reclaim_keeps_tombstone(void **state)
{
    (void)state;
    sb_io *io = tu_mem_fs();
    sb_config c = tu_small_disk_config();
    c.disk_bytes = 6 * c.segment_bytes;
    c.durability = SB_DURABILITY_COMMIT;
    sb_store *st = tu_open_io(&c, io);
    sb_ns *ns = tu_ns(st, &LA, "s");
    uint32_t p[28];
    tu_seq(p, 28, 120, 1000u);
    tu_put(ns, &LA, p, 28, false, SB_OK);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    st = tu_open_io(&c, io); /* P on disk only: a match holds its segment */
    ns = tu_ns(st, &LA, "s");
    sb_match *held = NULL;
    assert_int_equal(sb_ns_match(ns, p, 28, &held), SB_OK);
    remove_ok(ns, p, 2);
    assert_int_equal(matched_of(ns, p, 28), 0);
    uint64_t tomb_seg = 0;
    for (uint32_t i = 0; i < 60; i++) {
        uint32_t f[28];
        tu_seq(f, 28, 200 + i, 1000u);
        tu_put(ns, &LA, f, 28, false, SB_OK);
        sb_stats s = tu_stats(st);
        if (s.disk_tombstones >= 2 && !tomb_seg)
            tomb_seg = i;
    }
    sb_stats s = tu_stats(st);
    print_message("reclaimed %llu segments, %llu tombstones written, %llu live\n",
                  (unsigned long long)s.disk_reclaimed_segments,
                  (unsigned long long)s.disk_tombstones,
                  (unsigned long long)s.disk_tombstones_live);
    assert_true(s.disk_reclaimed_segments >= 6);
    assert_true(s.disk_tombstones >= 2); /* copied at least once */
    assert_int_equal(s.disk_tombstones_live, 1);
    /* The held match still restores P's bytes. */
    void **bufs = tu_bufs(&LA, 28);
    assert_int_equal(sb_match_restore(held, 28, bufs, NULL), SB_OK);
    assert_true(tu_state_equal(&LA, p, 28, bufs));
    tu_free_state(&LA, bufs);
    /* A power cut now: P's segment is still there, held; the tombstone's
     * copy keeps P removed. */
    sb_match_release(held);
    sb_ns_close(ns);
    assert_int_equal(sb_io_mem_crash(io, 13, 0.0, 0.0), 0);
    sb_store_crash(st);
    st = tu_open_io(&c, io);
    ns = tu_ns(st, &LA, "s");
    assert_int_equal(matched_of(ns, p, 28), 0);
    /* Now nothing holds P's segment: puts reclaim it, and then the
     * tombstone's segment in turn: it goes with it. */
    for (uint32_t i = 0; i < 60; i++) {
        uint32_t f[28];
        tu_seq(f, 28, 400 + i, 1000u);
        tu_put(ns, &LA, f, 28, false, SB_OK);
    }
    s = tu_stats(st);
    assert_int_equal(s.disk_tombstones_live, 0);
    assert_int_equal(matched_of(ns, p, 28), 0);
    tu_check(st);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    st = tu_open_io(&c, io);
    ns = tu_ns(st, &LA, "s");
    assert_int_equal(matched_of(ns, p, 28), 0);
    assert_int_equal(tu_stats(st).recovered_tombstones, 0);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
}

/* ---- threads ------------------------------------------------------------------------------ */

/* Puts, matches with every restored byte checked, and removals of shared
 * prefixes, from three threads on one disk store (the writer and its
 * tombstones running beside them): only documented codes, never a wrong
 * byte, the store's invariants after, and a reopen that serves bit-exact.
 * Runs under TSan in CI. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define TR_STEPS 300
#else
#define TR_STEPS 1500
#endif

typedef struct tworker {
    sb_store *st;
    uint64_t rng;
    uint64_t failures, removes, restores;
    char first[160];
} tworker;

static void tfail(tworker *w, const char *what, int rc)
{
    if (!w->failures++)
        snprintf(w->first, sizeof w->first, "%s: %s", what, sb_strerror(rc));
}

/* A sequence of family f: 6 tokens every thread shares, then a tail from
 * a small vocabulary (so sequences branch and share pages). */
static size_t tseq(tworker *w, uint32_t *tok)
{
    uint32_t f = (uint32_t)(tu_rand(&w->rng) % 3);
    tu_seq(tok, 6, 500 + f, 1000u);
    size_t n = 6 + tu_rand(&w->rng) % 20;
    for (size_t i = 6; i < n; i++)
        tok[i] = (uint32_t)(tu_rand(&w->rng) % 3);
    return n;
}

static void *tmain(void *arg)
{
    tworker *w = arg;
    sb_ns *ns = NULL;
    int rc = sb_ns_open(w->st,
                        &(sb_layout){ .model_id = LA.model, .model_id_bytes = strlen(LA.model),
                                      .page_tokens = LA.page_tokens, .n_tensors = 1,
                                      .bytes_per_token = LA.bpt, .point_bytes = LA.point_bytes },
                        "t", 1, &ns);
    if (rc != SB_OK) {
        tfail(w, "sb_ns_open", rc);
        return NULL;
    }
    for (int step = 0; step < TR_STEPS; step++) {
        uint32_t tok[32];
        size_t n = tseq(w, tok);
        unsigned op = (unsigned)(tu_rand(&w->rng) % 10);
        if (op < 4) {
            void **state = tu_state(&LA, tok, n);
            void *point = tu_point(&LA, tok, n);
            size_t stored = 0;
            rc = sb_ns_put(ns, tok, n, (const void *const *)state, point, &stored);
            if (rc != SB_OK && rc != SB_ERR_BUDGET)
                tfail(w, "put", rc);
            free(point);
            tu_free_state(&LA, state);
        } else if (op < 8) {
            sb_match *m = NULL;
            if ((rc = sb_ns_match(ns, tok, n, &m)) != SB_OK) {
                tfail(w, "match", rc);
                continue;
            }
            sb_match_info info;
            sb_match_get_info(m, &info);
            void **bufs = tu_bufs(&LA, info.n_tokens ? info.n_tokens : 1);
            rc = sb_match_restore(m, info.n_tokens, bufs, NULL);
            if (rc != SB_OK && rc != SB_ERR_BUDGET)
                tfail(w, "restore", rc);
            if (rc == SB_OK && !tu_state_equal(&LA, tok, info.n_tokens, bufs))
                tfail(w, "a restore's bytes", SB_ERR_CORRUPT);
            w->restores += rc == SB_OK;
            tu_free_state(&LA, bufs);
            sb_match_release(m);
        } else {
            size_t k = 1 + tu_rand(&w->rng) % n, removed = 0;
            if ((rc = sb_ns_remove(ns, tok, k, &removed)) != SB_OK)
                tfail(w, "remove", rc);
            w->removes++;
            /* Nothing past the cut on its paths, until another thread puts. */
        }
    }
    sb_ns_close(ns);
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    sb_io *io = tu_mem_fs();
    sb_config c = tu_small_disk_config();
    c.ram_bytes = 2 << 20;
    sb_store *st = tu_open_io(&c, io);
    tworker w[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].st = st;
        w[i].rng = 1000 + (uint64_t)i;
        assert_int_equal(pthread_create(&th[i], NULL, tmain, &w[i]), 0);
    }
    uint64_t failures = 0, removes = 0, restores = 0;
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        if (w[i].failures)
            fprintf(stderr, "thread %d: %s (%llu failures)\n", i, w[i].first,
                    (unsigned long long)w[i].failures);
        failures += w[i].failures;
        removes += w[i].removes;
        restores += w[i].restores;
    }
    assert_int_equal(failures, 0);
    assert_true(removes > 0 && restores > 0);
    tu_check(st);
    sb_stats s = tu_stats(st);
    assert_int_equal(s.removes, removes);
    assert_int_equal(s.disk_tombstones >= removes, 1);
    assert_int_equal(sb_store_close(st), SB_OK);
    st = tu_open_io(&c, io);
    tu_check(st);
    sb_ns *ns = tu_ns(st, &LA, "t");
    tworker r = { .rng = 77 };
    for (int i = 0; i < 50; i++) {
        uint32_t tok[32];
        size_t n = tseq(&r, tok);
        tu_restore_exact(ns, &LA, tok, n, NULL);
    }
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
}

/* ---- fsck --------------------------------------------------------------------------------- */

static void test_fsck(void **state)
{
    (void)state;
    char dir[128];
    tu_scratch_dir(dir, sizeof dir, "remove-fsck");
    sb_config c = tu_small_disk_config();
    c.dir = dir;
    sb_store *st = NULL;
    assert_int_equal(sb_store_open(&c, &st), SB_OK);
    sb_ns *ns = tu_ns(st, &LA, "s");
    dworld w;
    dworld_make(&w, 130);
    dworld_put(ns, &w);
    remove_ok(ns, w.a, 11);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_fsck_report *r = NULL;
    long pid = 0;
    assert_int_equal(sb_store_fsck(dir, NULL, NULL, &r, &pid), SB_OK);
    assert_int_equal(r->superblock, 0);
    assert_int_equal(r->n_damaged, 0);
    uint64_t tombs = 0;
    for (uint32_t i = 0; i < r->n_segments; i++)
        tombs += r->segments[i].tombstones;
    assert_int_equal(tombs, 1);
    sb_fsck_report_free(r);
    tu_remove_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ram_subtree),
        cmocka_unit_test(test_ram_mid_page),
        cmocka_unit_test(test_ram_points_required),
        cmocka_unit_test(test_ram_scope),
        cmocka_unit_test(test_ram_live_match),
        cmocka_unit_test(test_ram_pin),
        cmocka_unit_test(test_args),
        cmocka_unit_test(test_disk_restart),
        cmocka_unit_test(test_disk_put_again),
        cmocka_unit_test(test_disk_live_match),
        cmocka_unit_test(test_disk_commit_again),
        cmocka_unit_test(test_disk_dirty_not_written),
        cmocka_unit_test(test_disk_write_only),
        cmocka_unit_test(test_disk_super_version),
        cmocka_unit_test(test_disk_salvage),
        cmocka_unit_test(test_disk_nomem),
        cmocka_unit_test(test_crash_fault_sweep),
        cmocka_unit_test(test_crash_power_cut_sweep),
        cmocka_unit_test(test_reclaim_keeps_tombstone),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_fsck),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
