/* test_durable.c -- durability per call (issue 15): the outcome of
 * sb_ns_put_ex and sb_ns_commit_ex and its ticket, on the in-memory file
 * system, whose power cut here drops every byte not synced.
 *
 *   commit_write_back  COMMIT under write-back writes at once: every put
 *                      returns durable, and a power cut right after loses
 *                      nothing (before the fix write-back queued nothing
 *                      at commit and the state was gone)
 *   commit_short       COMMIT with the default min_prefix_tokens (512): a
 *                      100-token put returns SB_OK, durable 0, denied
 *                      "short", and its ticket answers NOT_DURABLE at once;
 *                      after close and reopen it is gone (a 600-token put
 *                      is durable)
 *   ticket_wait        PERIODIC with the next sync an hour away, and NONE:
 *                      a put's ticket is pending; a wait makes it durable;
 *                      a power cut then loses nothing
 *   write_back_dirty   write-back: pages dirty, a wait writes them
 *   write_only         write-only under NONE, PERIODIC and COMMIT: never
 *                      durable (durable 0, write_only 1, the ticket
 *                      SB_ERR_WRITE_ONLY once synced); a write-only reopen
 *                      restores nothing, a write-through one everything,
 *                      after a close and after a power cut (before the fix:
 *                      durable 1 and SB_OK, and the reopen restored nothing)
 *   budget_never       a record the write budget can never take: denied
 *                      "budget", NOT_DURABLE at once (not a timeout)
 *   budget_deferred    pages past the budget wait in the pool: PENDING;
 *                      once the store clock refills the budget the pool
 *                      writes them and the ticket turns durable
 *   deferred_evicted   a page that leaves RAM while it waits in the pool
 *                      fails its ticket
 *   supersede          a partial page superseded before it was written:
 *                      the first put's ticket waits for the longer page
 *   commit_ex          zero-copy commits report the same outcome
 *   hurry              NONE durability: past 1024 pending tickets the
 *                      oldest is made durable without anyone waiting
 *   forget             past 4096 runs of failed tickets the oldest tickets
 *                      answer SB_ERR_RANGE; recent ones still answer
 *   faults             EIO, ENOSPC or a short write at every I/O operation,
 *                      under PERIODIC and COMMIT: puts return SB_OK (RAM
 *                      keeps the state), and every ticket that says durable
 *                      survives a power cut, bit-exact
 *   nomem              an allocation failing anywhere in a put_ex on a disk
 *                      store: SB_ERR_NOMEM, nothing changed, zeroed outcome
 *   ram_only           tickets 0, NOT_DURABLE; RANGE for tickets never
 *                      handed out
 */
#define _DEFAULT_SOURCE /* usleep */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "disk.h"
#include "io.h"
#include "testutil.h"
#include "tu_io.h"

/* 4 tokens of 112 bytes: 4 KiB pages, 8 KiB records. */
static const tu_layout LA = { .page_tokens = 4, .n_tensors = 2, .bpt = { 64, 48 },
                              .point_bytes = 40, .model = "durable-a" };

static sb_config config(sb_durability dur, sb_write_mode mode)
{
    sb_config c;
    sb_config_default(&c);
    c.min_prefix_tokens = 1;
    c.segment_bytes = 256 << 10;
    c.disk_bytes = 64 << 20;
    c.queue_depth = 4;
    c.durability = dur;
    c.write_mode = mode;
    c.sync_interval_ms = 3600u * 1000u; /* no periodic sync while a test runs */
    return c;
}

/* A power cut that keeps nothing unsynced, and the store dropped as a
 * killed process leaves it; then a reopen (write-through: serve the disk). */
static sb_store *power_cut(sb_io *io, sb_store *st, sb_config c)
{
    assert_int_equal(sb_io_mem_crash(io, 1, 0.0, 0.0), 0);
    sb_store_crash(st);
    c.write_mode = SB_WRITE_THROUGH;
    return tu_open_io(&c, io);
}

/* Restore tok[0, n) as far as it matches: bit-exact, with its point when
 * whole and point. Returns the tokens restored. */
static size_t restored(sb_ns *ns, const uint32_t *tok, size_t n, bool point)
{
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, tok, n, &m), SB_OK);
    sb_match_info info;
    assert_int_equal(sb_match_get_info(m, &info), SB_OK);
    size_t L = info.n_tokens;
    void **bufs = tu_bufs(&LA, L ? L : 1);
    uint8_t pt[64];
    bool want_point = point && L == n && info.has_point;
    int rc = sb_match_restore(m, L, bufs, want_point ? pt : NULL);
    if (rc != SB_OK) {
        assert_true(rc == SB_ERR_CORRUPT || rc == SB_ERR_IO);
        assert_int_equal(sb_match_get_info(m, &info), SB_OK);
        L = info.n_tokens;
        want_point = false;
    }
    assert_true(tu_state_equal(&LA, tok, L, bufs));
    if (want_point) {
        void *w = tu_point(&LA, tok, n);
        assert_memory_equal(pt, w, LA.point_bytes);
        free(w);
    } else if (point && L == n) {
        L = n - 1; /* whole, but without its point: not what was stored */
    }
    tu_free_state(&LA, bufs);
    sb_match_release(m);
    return L;
}

/* Pages and point state of a sequence of n tokens (with a point). */
static uint32_t blocks_of(size_t n, bool point)
{
    return (uint32_t)((n + LA.page_tokens - 1) / LA.page_tokens) + (point ? 1 : 0);
}

static void test_durable_commit_write_back(void **state)
{
    (void)state;
    sb_io *io = NULL;
    assert_int_equal(sb_io_mem_new(&io), 0);
    sb_config c = config(SB_DURABILITY_COMMIT, SB_WRITE_BACK);
    sb_store *st = tu_open_io(&c, io);
    sb_ns *ns = tu_ns(st, &LA, "cwb");
    uint64_t rng = 3;
    uint32_t tok[6][40];
    for (int i = 0; i < 6; i++) {
        tu_tokens(&rng, tok[i], 40, 50);
        if (i % 2) /* every other one extends the one before */
            memcpy(tok[i], tok[i - 1], 20 * sizeof **tok);
        sb_write_outcome oc;
        size_t stored = 0;
        assert_int_equal(tu_put_ex(ns, &LA, tok[i], 37, true, &stored, &oc), SB_OK);
        assert_int_equal(stored, 37);
        assert_true(oc.ticket > 0);
        assert_int_equal(oc.durable, 1);
        assert_int_equal(oc.denied, 0);
        assert_int_equal(oc.dirty, 0);
        assert_true(oc.queued > 0 && oc.written == oc.queued);
        assert_int_equal(oc.points_new, 1);
        assert_int_equal(sb_store_is_durable(st, oc.ticket), SB_OK);
        tu_check(st);
    }
    sb_ns_close(ns);
    st = power_cut(io, st, c);
    ns = tu_ns(st, &LA, "cwb");
    for (int i = 0; i < 6; i++)
        assert_int_equal(restored(ns, tok[i], 37, true), 37);
    tu_check(st);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
}

static void test_durable_commit_short(void **state)
{
    (void)state;
    sb_io *io = NULL;
    assert_int_equal(sb_io_mem_new(&io), 0);
    sb_config c = config(SB_DURABILITY_COMMIT, SB_WRITE_THROUGH);
    c.min_prefix_tokens = 512; /* the default */
    sb_store *st = tu_open_io(&c, io);
    sb_ns *ns = tu_ns(st, &LA, "short");
    uint64_t rng = 4;
    static uint32_t a[100], b[600];
    tu_tokens(&rng, a, 100, 1000);
    tu_tokens(&rng, b, 600, 1000);
    sb_write_outcome oc;
    size_t stored = 0;
    assert_int_equal(tu_put_ex(ns, &LA, a, 100, true, &stored, &oc), SB_OK);
    assert_int_equal(stored, 100);
    assert_int_equal(oc.durable, 0);
    assert_true(oc.ticket > 0);
    assert_int_equal(oc.pages_new, 25);
    assert_int_equal(oc.queued, 0);
    assert_int_equal(oc.denied_by[SB_DENY_SHORT], blocks_of(100, true));
    assert_int_equal(oc.denied, blocks_of(100, true));
    /* Never durable, and said at once, not after the wait's time. */
    assert_int_equal(sb_store_wait_durable(st, oc.ticket, SB_WAIT_FOREVER), SB_ERR_NOT_DURABLE);
    assert_int_equal(sb_store_is_durable(st, oc.ticket), SB_ERR_NOT_DURABLE);
    /* The old call says SB_OK all the same (it has no outcome to say it). */
    tu_put(ns, &LA, a, 90, false, SB_OK);
    sb_write_outcome ob;
    assert_int_equal(tu_put_ex(ns, &LA, b, 600, false, &stored, &ob), SB_OK);
    assert_int_equal(ob.durable, 1);
    assert_int_equal(ob.denied, 0);
    assert_int_equal(ob.queued, blocks_of(600, false));
    assert_int_equal(sb_store_is_durable(st, ob.ticket), SB_OK);
    assert_int_equal(sb_store_is_durable(st, oc.ticket), SB_ERR_NOT_DURABLE);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    st = tu_open_io(&c, io);
    ns = tu_ns(st, &LA, "short");
    assert_int_equal(restored(ns, a, 100, false), 0);
    assert_int_equal(restored(ns, b, 600, false), 600);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
}

/* Put three sequences (the last two sharing a prefix) under c; their
 * tickets pending until a wait; then a power cut loses none of them. */
static void wait_round(sb_config c, bool dirty)
{
    sb_io *io = NULL;
    assert_int_equal(sb_io_mem_new(&io), 0);
    sb_store *st = tu_open_io(&c, io);
    sb_ns *ns = tu_ns(st, &LA, "w");
    uint64_t rng = 5;
    uint32_t tok[3][30];
    uint64_t ticket[3];
    for (int i = 0; i < 3; i++) {
        tu_tokens(&rng, tok[i], 30, 50);
        if (i == 2)
            memcpy(tok[2], tok[1], 16 * sizeof **tok);
        sb_write_outcome oc;
        assert_int_equal(tu_put_ex(ns, &LA, tok[i], 30, true, NULL, &oc), SB_OK);
        assert_int_equal(oc.durable, 0); /* nothing is synced before a wait */
        assert_int_equal(oc.denied, 0);
        if (dirty) { /* every block of the state (the shared pages too) */
            assert_int_equal(oc.dirty, blocks_of(30, true));
            assert_int_equal(oc.queued, 0);
        } else {
            assert_int_equal(oc.queued, oc.pages_new + oc.points_new);
            assert_int_equal(oc.written, 0);
        }
        assert_int_equal(sb_store_is_durable(st, oc.ticket), SB_ERR_PENDING);
        assert_int_equal(sb_store_wait_durable(st, oc.ticket, 0), SB_ERR_PENDING);
        ticket[i] = oc.ticket;
    }
    /* The third needs the second's shared pages too: waiting for it
     * writes them. Under write-back the first is still pending then (the
     * wait wrote only what its ticket needed). */
    /* (Write-only: written and synced, never durable.) */
    int want = c.write_mode == SB_WRITE_ONLY ? SB_ERR_WRITE_ONLY : SB_OK;
    assert_int_equal(sb_store_wait_durable(st, ticket[2], SB_WAIT_FOREVER), want);
    if (dirty)
        assert_int_equal(sb_store_is_durable(st, ticket[0]), SB_ERR_PENDING);
    for (int i = 0; i < 3; i++)
        assert_int_equal(sb_store_wait_durable(st, ticket[i], SB_WAIT_FOREVER), want);
    for (int i = 0; i < 3; i++)
        assert_int_equal(sb_store_is_durable(st, ticket[i]), want);
    tu_check(st);
    sb_ns_close(ns);
    st = power_cut(io, st, c);
    ns = tu_ns(st, &LA, "w");
    for (int i = 0; i < 3; i++)
        assert_int_equal(restored(ns, tok[i], 30, true), 30);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
}

static void test_durable_ticket_wait(void **state)
{
    (void)state;
    wait_round(config(SB_DURABILITY_PERIODIC, SB_WRITE_THROUGH), false);
    wait_round(config(SB_DURABILITY_NONE, SB_WRITE_THROUGH), false);
    wait_round(config(SB_DURABILITY_NONE, SB_WRITE_ONLY), false);
}

static void test_durable_write_back_dirty(void **state)
{
    (void)state;
    wait_round(config(SB_DURABILITY_PERIODIC, SB_WRITE_BACK), true);
    wait_round(config(SB_DURABILITY_NONE, SB_WRITE_BACK), true);
}

/* Write-only, under each durability: a put is never durable (outcome
 * durable 0, write_only 1; its ticket SB_ERR_WRITE_ONLY once synced, never
 * SB_OK), flush and close say SB_OK ("written and synced"); reopened
 * write-only the store restores none of it (what "not durable" warns
 * of), reopened write-through all of it, after a clean close and after a
 * power cut. Before the fix every such put said durable 1 and its ticket
 * SB_OK while the reopen restored nothing (issue 29). */
static void write_only_round(sb_durability dur, bool cut)
{
    sb_io *io = tu_mem_fs();
    sb_config c = config(dur, SB_WRITE_ONLY);
    sb_store *st = tu_open_io(&c, io);
    sb_ns *ns = tu_ns(st, &LA, "wo");
    uint64_t rng = 29;
    enum { N = 12, T = 22 };
    uint32_t tok[N][T];
    uint64_t ticket[N];
    for (int i = 0; i < N; i++) {
        tu_tokens(&rng, tok[i], T, 1000);
        if (i % 3 == 2) /* some share a prefix with the one before */
            memcpy(tok[i], tok[i - 1], 8 * sizeof **tok);
        sb_write_outcome oc;
        size_t stored = 0;
        assert_int_equal(tu_put_ex(ns, &LA, tok[i], T, true, &stored, &oc), SB_OK);
        assert_int_equal(stored, T);
        assert_true(oc.ticket > 0);
        assert_int_equal(oc.durable, 0);
        assert_int_equal(oc.write_only, 1);
        assert_int_equal(oc.denied, 0);
        if (dur == SB_DURABILITY_COMMIT) /* written and synced all the same */
            assert_true(oc.queued > 0 && oc.written == oc.queued);
        int rc = sb_store_is_durable(st, oc.ticket);
        assert_true(rc == (dur == SB_DURABILITY_COMMIT ? SB_ERR_WRITE_ONLY : SB_ERR_PENDING) ||
                    (dur == SB_DURABILITY_PERIODIC && rc == SB_ERR_WRITE_ONLY));
        ticket[i] = oc.ticket;
    }
    for (int i = 0; i < N; i++)
        assert_int_equal(sb_store_wait_durable(st, ticket[i], SB_WAIT_FOREVER),
                         SB_ERR_WRITE_ONLY);
    assert_int_equal(sb_store_flush(st), SB_OK);
    for (int i = 0; i < N; i++)
        assert_int_equal(sb_store_is_durable(st, ticket[i]), SB_ERR_WRITE_ONLY);
    tu_check(st);
    sb_ns_close(ns);
    if (cut) {
        assert_int_equal(sb_io_mem_crash(io, 1, 0.0, 0.0), 0);
        sb_store_crash(st);
    } else {
        assert_int_equal(sb_store_close(st), SB_OK);
    }
    /* The same store reopened as it was: nothing comes back. */
    st = tu_open_io(&c, io);
    ns = tu_ns(st, &LA, "wo");
    for (int i = 0; i < N; i++)
        assert_int_equal(restored(ns, tok[i], T, true), 0);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    /* An open that reads the tier finds every state whole. */
    c.write_mode = SB_WRITE_THROUGH;
    st = tu_open_io(&c, io);
    ns = tu_ns(st, &LA, "wo");
    for (int i = 0; i < N; i++)
        assert_int_equal(restored(ns, tok[i], T, true), T);
    tu_check(st);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
}

static void test_durable_write_only(void **state)
{
    (void)state;
    for (int cut = 0; cut < 2; cut++) {
        write_only_round(SB_DURABILITY_NONE, cut);
        write_only_round(SB_DURABILITY_PERIODIC, cut);
        write_only_round(SB_DURABILITY_COMMIT, cut);
    }
}

/* 4 tokens of 16 KiB: 64 KiB pages, records of 68 KiB. */
static const tu_layout LBIG = { .page_tokens = 4, .n_tensors = 1, .bpt = { 16384 },
                                .model = "durable-big" };

static void test_durable_budget_never(void **state)
{
    (void)state;
    sb_io *io = NULL;
    assert_int_equal(sb_io_mem_new(&io), 0);
    sb_config c = config(SB_DURABILITY_COMMIT, SB_WRITE_THROUGH);
    c.write_budget_bytes_per_hour = 1u << 20;
    c.write_budget_burst_bytes = 64u << 10; /* a 68 KiB record never fits */
    sb_store *st = tu_open_io(&c, io);
    sb_ns *ns = tu_ns(st, &LBIG, "never");
    uint32_t tok[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
    void **s = tu_state(&LBIG, tok, 8);
    sb_write_outcome oc;
    assert_int_equal(sb_ns_put_ex(ns, tok, 8, (const void *const *)s, NULL, NULL, &oc), SB_OK);
    tu_free_state(&LBIG, s);
    assert_int_equal(oc.durable, 0);
    assert_int_equal(oc.denied_by[SB_DENY_BUDGET], 1);     /* the first page */
    assert_int_equal(oc.denied_by[SB_DENY_PARENT], 1);     /* and its child */
    assert_int_equal(oc.denied, 2);
    assert_int_equal(sb_store_wait_durable(st, oc.ticket, SB_WAIT_FOREVER), SB_ERR_NOT_DURABLE);
    assert_int_equal(tu_match_verify(ns, &LBIG, tok, 8), 8); /* in RAM */
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
}

static _Atomic uint64_t g_clock = 1000000000ull;

static void test_durable_budget_deferred(void **state)
{
    (void)state;
    sb_io *io = NULL;
    assert_int_equal(sb_io_mem_new(&io), 0);
    sb_config c = config(SB_DURABILITY_COMMIT, SB_WRITE_THROUGH);
    c.write_budget_bytes_per_hour = 1u << 20;
    c.write_budget_burst_bytes = 256u << 10; /* 128 KiB for pages: 16 records */
    c.clock_ns = tu_fake_clock;
    c.clock_ctx = &g_clock;
    sb_store *st = tu_open_io(&c, io);
    sb_ns *ns = tu_ns(st, &LA, "def");
    uint64_t rng = 6;
    uint32_t tok[96];
    tu_tokens(&rng, tok, 96, 1000);
    sb_write_outcome oc;
    assert_int_equal(tu_put_ex(ns, &LA, tok, 96, false, NULL, &oc), SB_OK);
    assert_int_equal(oc.durable, 0);
    assert_int_equal(oc.denied, 0);
    assert_true(oc.queued > 0 && oc.deferred > 0);
    assert_int_equal(oc.queued + oc.deferred, 24);
    assert_int_equal(oc.written, oc.queued); /* COMMIT waited for those */
    assert_int_equal(sb_store_is_durable(st, oc.ticket), SB_ERR_PENDING);
    /* Two store-clock hours refill the budget: the pool writes the rest
     * (the writer looks at it every 50 ms) and the ticket turns durable. */
    atomic_fetch_add(&g_clock, 2 * 3600000000000ull);
    assert_int_equal(sb_store_wait_durable(st, oc.ticket, SB_WAIT_FOREVER), SB_OK);
    sb_stats s = tu_stats(st);
    assert_true(s.disk_pool_written >= oc.deferred);
    sb_ns_close(ns);
    st = power_cut(io, st, c);
    ns = tu_ns(st, &LA, "def");
    assert_int_equal(restored(ns, tok, 96, false), 96);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
}

static void test_durable_deferred_evicted(void **state)
{
    (void)state;
    sb_io *io = NULL;
    assert_int_equal(sb_io_mem_new(&io), 0);
    sb_config c = config(SB_DURABILITY_PERIODIC, SB_WRITE_THROUGH);
    c.write_budget_bytes_per_hour = 1u << 20;
    c.write_budget_burst_bytes = 256u << 10;
    c.clock_ns = tu_fake_clock; /* it never moves: the budget never refills */
    c.clock_ctx = &g_clock;
    c.ram_pages = 48;
    sb_store *st = tu_open_io(&c, io);
    sb_ns *ns = tu_ns(st, &LA, "ev");
    uint64_t rng = 7;
    uint32_t a[96], b[40];
    tu_tokens(&rng, a, 96, 1000);
    sb_write_outcome oc;
    assert_int_equal(tu_put_ex(ns, &LA, a, 96, false, NULL, &oc), SB_OK);
    assert_true(oc.deferred > 0);
    assert_int_equal(sb_store_is_durable(st, oc.ticket), SB_ERR_PENDING);
    /* Other sequences push a's waiting pages out of RAM. */
    for (int i = 0; i < 8 && sb_store_is_durable(st, oc.ticket) == SB_ERR_PENDING; i++) {
        tu_tokens(&rng, b, 40, 1000);
        size_t stored = 0;
        int rc = tu_put_ex(ns, &LA, b, 40, false, &stored, NULL);
        assert_true(rc == SB_OK || rc == SB_ERR_BUDGET);
    }
    assert_int_equal(sb_store_wait_durable(st, oc.ticket, SB_WAIT_FOREVER), SB_ERR_NOT_DURABLE);
    assert_true(tu_stats(st).disk_denials[SB_DENY_BUDGET] > 0);
    tu_check(st);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
}

static void test_durable_supersede(void **state)
{
    (void)state;
    sb_io *io = NULL;
    assert_int_equal(sb_io_mem_new(&io), 0);
    sb_config c = config(SB_DURABILITY_PERIODIC, SB_WRITE_THROUGH);
    sb_store *st = tu_open_io(&c, io);
    sb_ns *ns = tu_ns(st, &LA, "sup");
    uint32_t tok[13] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13 };
    sb_write_outcome a, b;
    /* 10 tokens: a partial page of 2, written late (when a sync is due). */
    assert_int_equal(tu_put_ex(ns, &LA, tok, 10, false, NULL, &a), SB_OK);
    assert_int_equal(sb_store_is_durable(st, a.ticket), SB_ERR_PENDING);
    /* 13 tokens: a full page supersedes it before it was written. */
    assert_int_equal(tu_put_ex(ns, &LA, tok, 13, false, NULL, &b), SB_OK);
    assert_int_equal(tu_stats(st).pages_superseded, 1);
    assert_int_equal(sb_store_is_durable(st, a.ticket), SB_ERR_PENDING);
    assert_int_equal(sb_store_wait_durable(st, a.ticket, SB_WAIT_FOREVER), SB_OK);
    assert_int_equal(sb_store_wait_durable(st, b.ticket, SB_WAIT_FOREVER), SB_OK);
    sb_ns_close(ns);
    st = power_cut(io, st, c);
    ns = tu_ns(st, &LA, "sup");
    assert_int_equal(restored(ns, tok, 10, false), 10);
    assert_int_equal(restored(ns, tok, 13, false), 13);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
}

static void test_durable_commit_ex(void **state)
{
    (void)state;
    sb_io *io = NULL;
    assert_int_equal(sb_io_mem_new(&io), 0);
    sb_config c = config(SB_DURABILITY_COMMIT, SB_WRITE_BACK);
    sb_store *st = tu_open_io(&c, io);
    sb_ns *ns = tu_ns(st, &LA, "zc");
    uint32_t tok[18];
    uint64_t rng = 8;
    tu_tokens(&rng, tok, 18, 1000);
    sb_page *pages[5];
    for (int i = 0; i < 5; i++)
        assert_int_equal(sb_ns_page_alloc(ns, &pages[i]), SB_OK);
    tu_fill_range(ns, &LA, tok, 0, 18, pages);
    void *point = tu_point(&LA, tok, 18);
    sb_write_outcome oc;
    assert_int_equal(sb_ns_commit_ex(ns, tok, 18, pages, point, &oc), SB_OK);
    assert_int_equal(oc.pages_new, 5);
    assert_int_equal(oc.points_new, 1);
    assert_int_equal(oc.queued, 6);
    assert_int_equal(oc.written, 6);
    assert_int_equal(oc.durable, 1);
    /* Committed again: nothing new, durable already. */
    assert_int_equal(sb_ns_commit_ex(ns, tok, 18, pages, point, &oc), SB_OK);
    assert_int_equal(oc.pages_new, 0);
    assert_int_equal(oc.queued, 0);
    assert_int_equal(oc.durable, 1);
    /* A failed commit zeroes the outcome. */
    assert_int_equal(sb_ns_commit_ex(ns, tok, 0, pages, NULL, &oc), SB_ERR_NO_TOKENS);
    assert_int_equal(oc.ticket, 0);
    assert_int_equal(oc.durable, 0);
    free(point);
    for (int i = 0; i < 5; i++)
        sb_page_unref(pages[i]);
    sb_ns_close(ns);
    st = power_cut(io, st, c);
    ns = tu_ns(st, &LA, "zc");
    assert_int_equal(restored(ns, tok, 18, true), 18);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
}

/* Under NONE durability nothing syncs before a flush, so tickets would
 * wait (and hold memory) for good: past 1024 pending ones the oldest is
 * hurried, and turns durable with nobody waiting on it. */
static void test_durable_hurry(void **state)
{
    (void)state;
    sb_io *io = NULL;
    assert_int_equal(sb_io_mem_new(&io), 0);
    sb_config c = config(SB_DURABILITY_NONE, SB_WRITE_THROUGH);
    c.segment_bytes = 32 << 20; /* no seal (it syncs) in 1100 records */
    c.disk_bytes = 256 << 20;
    sb_store *st = tu_open_io(&c, io);
    sb_ns *ns = tu_ns(st, &LA, "hurry");
    uint64_t first = 0;
    for (uint32_t i = 0; i < 1100; i++) {
        uint32_t tok[4] = { i, i + 1, i + 2, i + 3 };
        sb_write_outcome oc;
        assert_int_equal(tu_put_ex(ns, &LA, tok, 4, false, NULL, &oc), SB_OK);
        if (!i)
            first = oc.ticket;
    }
    /* Polled, not waited on (a wait would hurry it itself); ten minutes
     * bound a writer that is slow to be scheduled, nothing else. */
    int rc = SB_ERR_PENDING;
    for (int k = 0; k < 600000 && rc == SB_ERR_PENDING; k++) {
        rc = sb_store_is_durable(st, first);
        if (rc == SB_ERR_PENDING)
            usleep(1000);
    }
    assert_int_equal(rc, SB_OK);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
}

/* Failed tickets are remembered as runs, 4096 at most: past that the
 * oldest are forgotten (SB_ERR_RANGE, durable and failed alike), the
 * recent ones still answered. Short puts (failed) alternate with durable
 * ones, so no two failures share a run. */
static void test_durable_forget(void **state)
{
    (void)state;
    sb_io *io = NULL;
    assert_int_equal(sb_io_mem_new(&io), 0);
    sb_config c = config(SB_DURABILITY_COMMIT, SB_WRITE_THROUGH);
    c.min_prefix_tokens = 8;
    c.segment_bytes = 1 << 20;
    c.disk_bytes = 1ull << 30;
    sb_store *st = tu_open_io(&c, io);
    sb_ns *ns = tu_ns(st, &LA, "forget");
    uint64_t first_short = 0, first_long = 0, last_short = 0, last_long = 0;
    for (uint32_t i = 0; i < 4200; i++) {
        uint32_t tok[8] = { i, 7, 7, 7, 1, 2, 3, 4 };
        sb_write_outcome a, b;
        assert_int_equal(tu_put_ex(ns, &LA, tok, 4, false, NULL, &a), SB_OK); /* short */
        assert_int_equal(a.durable, 0);
        tok[1] = 9; /* another sequence */
        assert_int_equal(tu_put_ex(ns, &LA, tok, 8, false, NULL, &b), SB_OK);
        assert_int_equal(b.durable, 1);
        first_short = first_short ? first_short : a.ticket;
        first_long = first_long ? first_long : b.ticket;
        last_short = a.ticket;
        last_long = b.ticket;
    }
    assert_int_equal(sb_store_is_durable(st, last_short), SB_ERR_NOT_DURABLE);
    assert_int_equal(sb_store_is_durable(st, last_long), SB_OK);
    assert_int_equal(sb_store_is_durable(st, first_short), SB_ERR_RANGE);
    assert_int_equal(sb_store_is_durable(st, first_long), SB_ERR_RANGE);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
}

/* ---- faults ---------------------------------------------------------------------- */

#define F_SEQ 8

/* Open, put F_SEQ sequences (sharing prefixes), wait on every ticket.
 * durable[i] receives whether sequence i's ticket said SB_OK. Returns the
 * I/O operations it performed. */
static uint64_t fault_run(sb_io *io, const sb_config *c, uint32_t tok[F_SEQ][24],
                          bool durable[F_SEQ], uint64_t nth, int err)
{
    uint64_t before = sb_io_mem_ops_count(io);
    if (nth)
        sb_io_mem_fail_at(io, nth, err);
    sb_store *st = NULL;
    int rc = sb_store_open_io(c, io, &st);
    if (rc != SB_OK) {
        sb_io_mem_fail_at(io, 0, 0);
        for (int i = 0; i < F_SEQ; i++)
            durable[i] = false;
        return sb_io_mem_ops_count(io) - before;
    }
    sb_ns *ns = tu_ns(st, &LA, "f");
    sb_write_outcome oc[F_SEQ];
    for (int i = 0; i < F_SEQ; i++) {
        /* A write the tier could not make is an outcome, never an error. */
        assert_int_equal(tu_put_ex(ns, &LA, tok[i], 24, true, NULL, &oc[i]), SB_OK);
        if (c->durability == SB_DURABILITY_COMMIT)
            assert_int_equal(oc[i].durable, sb_store_is_durable(st, oc[i].ticket) == SB_OK);
    }
    for (int i = 0; i < F_SEQ; i++) {
        rc = sb_store_wait_durable(st, oc[i].ticket, SB_WAIT_FOREVER);
        assert_true(rc == SB_OK || rc == SB_ERR_NOT_DURABLE);
        durable[i] = rc == SB_OK;
        assert_true(!oc[i].durable || durable[i]); /* durable stays durable */
    }
    for (int i = 0; i < F_SEQ; i++) /* RAM serves everything */
        assert_int_equal(restored(ns, tok[i], 24, true), 24);
    tu_check(st);
    sb_ns_close(ns);
    sb_io_mem_fail_at(io, 0, 0);
    uint64_t ops = sb_io_mem_ops_count(io) - before;
    assert_int_equal(sb_io_mem_crash(io, nth, 0.0, 0.0), 0);
    sb_store_crash(st);
    return ops;
}

static void fault_sweep(sb_durability dur, int err)
{
    sb_config c = config(dur, SB_WRITE_THROUGH);
    c.segment_bytes = 64 << 10; /* a few segments: seals and opens too */
    uint32_t tok[F_SEQ][24];
    uint64_t rng = 9;
    for (int i = 0; i < F_SEQ; i++) {
        tu_tokens(&rng, tok[i], 24, 40);
        if (i % 2)
            memcpy(tok[i], tok[i - 1], 12 * sizeof **tok);
    }
    bool durable[F_SEQ];
    sb_io *io = NULL;
    assert_int_equal(sb_io_mem_new(&io), 0);
    uint64_t total = fault_run(io, &c, tok, durable, 0, 0);
    sb_io_destroy(io);
    for (int i = 0; i < F_SEQ; i++)
        assert_true(durable[i]);
    int lost = 0;
    for (uint64_t n = 1; n <= total; n++) {
        assert_int_equal(sb_io_mem_new(&io), 0);
        fault_run(io, &c, tok, durable, n, err);
        sb_store *st = tu_open_io(&c, io);
        sb_ns *ns = tu_ns(st, &LA, "f");
        for (int i = 0; i < F_SEQ; i++) {
            size_t L = restored(ns, tok[i], 24, true);
            if (durable[i] && L != 24) {
                fprintf(stderr, "fault %d at op %llu (durability %d): durable sequence %d "
                        "restores %zu of 24\n", err, (unsigned long long)n, (int)dur, i, L);
                fail();
            }
            lost += !durable[i];
        }
        tu_check(st);
        sb_ns_close(ns);
        sb_store_close(st);
        sb_io_destroy(io);
    }
    print_message("durability %d, fault %d: %llu operations, %d tickets not durable\n",
                  (int)dur, err, (unsigned long long)total, lost);
    assert_true(lost > 0); /* the faults did reach tickets */
}

static void test_durable_faults(void **state)
{
    (void)state;
    const int errs[3] = { -5 /* EIO */, -28 /* ENOSPC */, 0 /* a short write */ };
    for (int e = 0; e < 3; e++) {
        fault_sweep(SB_DURABILITY_PERIODIC, errs[e]);
        fault_sweep(SB_DURABILITY_COMMIT, errs[e]);
    }
}

/* ---- failure atomicity, RAM only ----------------------------------------------------- */

static void test_durable_nomem(void **state)
{
    (void)state;
    sb_io *io = NULL;
    assert_int_equal(sb_io_mem_new(&io), 0);
    sb_config c = config(SB_DURABILITY_COMMIT, SB_WRITE_THROUGH);
    sb_store *st = tu_open_io(&c, io);
    sb_ns *ns = tu_ns(st, &LA, "nm");
    uint32_t tok[30];
    uint64_t rng = 10;
    tu_tokens(&rng, tok, 30, 1000);
    tu_put(ns, &LA, tok, 12, false, SB_OK);
    for (uint64_t k = 1;; k++) {
        sb_stats before = tu_stats(st);
        assert_int_equal(sb_store_fault_alloc(st, k), SB_OK);
        sb_write_outcome oc;
        memset(&oc, 0xAB, sizeof oc);
        size_t stored = 99;
        int rc = tu_put_ex(ns, &LA, tok, 30, true, &stored, &oc);
        assert_int_equal(sb_store_fault_alloc(st, 0), SB_OK);
        if (rc == SB_OK) {
            assert_int_equal(oc.durable, 1);
            break;
        }
        assert_int_equal(rc, SB_ERR_NOMEM);
        assert_int_equal(stored, 0);
        assert_int_equal(oc.ticket, 0);
        assert_int_equal(oc.queued, 0);
        assert_int_equal(tu_stats(st).indexed_pages, before.indexed_pages);
        assert_int_equal(tu_match_len(ns, tok, 30), 12);
        tu_check(st);
        assert_true(k < 100);
    }
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
}

static void test_durable_ram_only(void **state)
{
    (void)state;
    sb_store *st = tu_store(0);
    sb_ns *ns = tu_ns(st, &LA, "ram");
    uint32_t tok[9] = { 9, 8, 7, 6, 5, 4, 3, 2, 1 };
    sb_write_outcome oc;
    assert_int_equal(tu_put_ex(ns, &LA, tok, 9, true, NULL, &oc), SB_OK);
    assert_int_equal(oc.ticket, 0);
    assert_int_equal(oc.durable, 0);
    assert_int_equal(oc.pages_new, 3);
    assert_int_equal(oc.points_new, 1);
    assert_int_equal(oc.queued + oc.deferred + oc.dirty + oc.denied, 0);
    assert_int_equal(sb_store_wait_durable(st, 0, SB_WAIT_FOREVER), SB_ERR_NOT_DURABLE);
    assert_int_equal(sb_store_is_durable(st, 1), SB_ERR_NOT_DURABLE);
    assert_int_equal(sb_store_is_durable(NULL, 1), SB_ERR_INVAL);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);

    /* With a disk tier: 0 is never durable, tickets not handed out are
     * out of range. */
    sb_io *io = NULL;
    assert_int_equal(sb_io_mem_new(&io), 0);
    sb_config c = config(SB_DURABILITY_PERIODIC, SB_WRITE_THROUGH);
    st = tu_open_io(&c, io);
    ns = tu_ns(st, &LA, "ram");
    assert_int_equal(sb_store_is_durable(st, 0), SB_ERR_NOT_DURABLE);
    assert_int_equal(sb_store_is_durable(st, 1), SB_ERR_RANGE);
    assert_int_equal(tu_put_ex(ns, &LA, tok, 9, true, NULL, &oc), SB_OK);
    assert_int_equal(oc.ticket, 1);
    assert_int_equal(sb_store_is_durable(st, 2), SB_ERR_RANGE);
    assert_int_equal(sb_store_wait_durable(st, 1, SB_WAIT_FOREVER), SB_OK);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_durable_commit_write_back),
        cmocka_unit_test(test_durable_commit_short),
        cmocka_unit_test(test_durable_ticket_wait),
        cmocka_unit_test(test_durable_write_back_dirty),
        cmocka_unit_test(test_durable_write_only),
        cmocka_unit_test(test_durable_budget_never),
        cmocka_unit_test(test_durable_budget_deferred),
        cmocka_unit_test(test_durable_deferred_evicted),
        cmocka_unit_test(test_durable_supersede),
        cmocka_unit_test(test_durable_commit_ex),
        cmocka_unit_test(test_durable_hurry),
        cmocka_unit_test(test_durable_forget),
        cmocka_unit_test(test_durable_nomem),
        cmocka_unit_test(test_durable_ram_only),
        cmocka_unit_test(test_durable_faults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
