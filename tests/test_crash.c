/* test_crash.c -- the disk tier under simulated power cuts and I/O faults,
 * on the in-memory file system of store/disk/io.h.
 *
 * crash: seeded rounds of random puts (sequences sharing prefixes, partial
 * tails, point states, two layouts, several scopes), flushes and commits
 * under every durability and write mode, then a power cut at a random
 * moment (the writer still running) that keeps, garbles or drops each
 * unsynced 4 KiB unit, and a reopen. After each: the open succeeds, every
 * sequence acknowledged durable (put before a flush that returned SB_OK,
 * a put whose outcome said durable, a ticket whose wait said SB_OK; in a
 * write-only cycle, which is never durable, a put synced under COMMIT or a
 * ticket that said SB_ERR_WRITE_ONLY, for the next cycle that reads the
 * tier) restores in full, and whatever any sequence restores is bit-exact (a
 * restore that meets a damaged page returns the shorter valid prefix).
 *
 * faults: EIO, ENOSPC and a short write at the Nth I/O operation, for every
 * N a clean run performs: the store keeps serving every sequence from RAM,
 * bit-exact; a reopen serves the durable ones in full and nothing wrong.
 *
 * close: EIO and a short write at every I/O operation of sb_store_close
 * (under write-back, so the close writes everything): it returns the
 * error, or SB_OK and then a power cut loses nothing. (ENOSPC takes the
 * same paths as EIO there.)
 *
 * SB_CRASH_ROUNDS overrides the number of crash rounds (default 1000, each a
 * chain of reopen cycles).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "disk.h"
#include "io.h"
#include "open.h"
#include "testutil.h"

static const tu_layout LA = { .page_tokens = 4, .n_tensors = 2, .bpt = { 64, 48 },
                              .point_bytes = 40, .model = "crash-a" };
static const tu_layout LB = { .page_tokens = 8, .n_tensors = 1, .bpt = { 200 },
                              .point_bytes = 24, .flags = SB_LAYOUT_POINT_REQUIRED,
                              .model = "crash-b" };

#define MAX_SEQ 64
#define MAX_TOK 96

typedef struct seq {
    uint32_t tok[MAX_TOK];
    size_t n;
    int layout;
    int scope;
    bool durable;              /* acknowledged durable */
} seq;

typedef struct world {
    seq s[MAX_SEQ];
    int n;
    uint64_t rng;
} world;

static const tu_layout *lay_of(const seq *s)
{
    return s->layout ? &LB : &LA;
}

static sb_ns *ns_of(sb_store *st, const seq *s)
{
    char scope[16];
    snprintf(scope, sizeof scope, "s%d", s->scope);
    return tu_ns(st, lay_of(s), scope);
}

static void new_seq(world *w)
{
    seq *s = &w->s[w->n % MAX_SEQ];
    if (w->n >= MAX_SEQ)
        return; /* a full world only re-puts */
    memset(s, 0, sizeof *s);
    s->layout = (int)(tu_rand(&w->rng) % 2);
    s->scope = (int)(tu_rand(&w->rng) % 3);
    s->n = 1 + tu_rand(&w->rng) % (MAX_TOK - 1);
    tu_tokens(&w->rng, s->tok, s->n, 20);
    if (w->n && tu_rand(&w->rng) % 2) { /* extend or branch from another */
        const seq *o = &w->s[tu_rand(&w->rng) % (uint64_t)w->n];
        if (o->layout == s->layout && o->scope == s->scope) {
            size_t k = o->n < s->n ? o->n : s->n;
            k = tu_rand(&w->rng) % (k + 1);
            memcpy(s->tok, o->tok, k * sizeof *s->tok);
        }
    }
    w->n++;
}

/* Put sequence s (with its point state); its outcome in *oc (may be
 * NULL). Returns the put's code. */
static int put_oc(sb_store *st, seq *s, sb_write_outcome *oc)
{
    const tu_layout *l = lay_of(s);
    sb_ns *ns = ns_of(st, s);
    void **state = tu_state(l, s->tok, s->n);
    void *point = tu_point(l, s->tok, s->n);
    size_t stored = 0;
    int rc = sb_ns_put_ex(ns, s->tok, s->n, (const void *const *)state, point, &stored, oc);
    free(point);
    tu_free_state(l, state);
    sb_ns_close(ns);
    return rc;
}

static int put(sb_store *st, seq *s)
{
    return put_oc(st, s, NULL);
}

/* Match and restore s: whatever comes back is bit-exact; a durable
 * sequence (when must) comes back whole. Returns the tokens restored. */
static size_t check_seq(sb_store *st, const seq *s, bool must)
{
    const tu_layout *l = lay_of(s);
    sb_ns *ns = ns_of(st, s);
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, s->tok, s->n, &m), SB_OK);
    sb_match_info info;
    assert_int_equal(sb_match_get_info(m, &info), SB_OK);
    size_t L = info.n_tokens;
    if (must && L != s->n) {
        fprintf(stderr, "durable sequence of %zu tokens restores %zu (miss %s)\n", s->n, L,
                sb_miss_name(info.miss));
        fail();
    }
    void **bufs = tu_bufs(l, L ? L : 1);
    uint8_t point[64];
    int rc = sb_match_restore(m, L, bufs, L == s->n && info.has_point ? point : NULL);
    if (rc != SB_OK) {
        assert_false(must);
        assert_true(rc == SB_ERR_CORRUPT || rc == SB_ERR_IO);
        assert_int_equal(sb_match_get_info(m, &info), SB_OK);
        /* The match shrank, or (a layout whose point state is optional)
         * only its point state could not be read: L stands without it. */
        assert_true(info.n_tokens < L || (info.n_tokens == L && !info.has_point));
        assert_true(info.miss == SB_MISS_CORRUPT || info.miss == SB_MISS_IO);
        L = info.n_tokens;
    } else if (L == s->n && info.has_point) {
        void *want = tu_point(l, s->tok, s->n);
        assert_memory_equal(point, want, l->point_bytes);
        free(want);
    }
    assert_true(tu_state_equal(l, s->tok, L, bufs));
    tu_free_state(l, bufs);
    sb_match_release(m);
    sb_ns_close(ns);
    return L;
}

/* Every sequence bit-exact; the durable ones whole unless the store serves
 * RAM only (write-only). */
static void check_world(sb_store *st, const world *w, bool ram_only)
{
    for (int i = 0; i < w->n && i < MAX_SEQ; i++)
        check_seq(st, &w->s[i], w->s[i].durable && !ram_only);
    tu_check(st);
}

static sb_config config(uint64_t seed)
{
    sb_config c;
    sb_config_default(&c);
    c.min_prefix_tokens = 1; /* short test sequences are written too */
    c.segment_bytes = 64 << 10;
    c.disk_bytes = 64 << 20;
    c.queue_depth = 1 + (uint32_t)(seed % 8);
    c.durability = (sb_durability)(seed % 3);
    c.write_mode = (sb_write_mode)(seed / 3 % 3);
    c.sync_bytes = 32 << 10;
    c.sync_interval_ms = 1 + (uint32_t)(seed % 5);
    c.ram_bytes = seed % 4 == 0 ? 160 << 10 : 16 << 20;
    return c;
}

/* One round: a chain of (open, random work, power cut) cycles on one file
 * system, each reopen checked. */
static void crash_round(uint64_t seed)
{
    sb_io *io = NULL;
    assert_int_equal(sb_io_mem_new(&io), 0);
    static world w;
    memset(&w, 0, sizeof w);
    w.rng = seed * 7919 + 1;
    sb_config c = config(seed);
    for (int cycle = 0; cycle < 3; cycle++) {
        sb_store *st = NULL;
        int rc = sb_store_open_io(&c, io, &st);
        if (rc != SB_OK) {
            fprintf(stderr, "seed %llu cycle %d: open failed: %s\n", (unsigned long long)seed,
                    cycle, sb_strerror(rc));
            fail();
        }
        check_world(st, &w, c.write_mode == SB_WRITE_ONLY);
        int ops = 1 + (int)(tu_rand(&w.rng) % 12);
        for (int k = 0; k < ops; k++) {
            uint64_t r = tu_rand(&w.rng) % 8;
            if (r < 5 || w.n == 0) {
                new_seq(&w);
                seq *s = &w.s[(w.n - 1) % MAX_SEQ];
                sb_write_outcome oc;
                rc = put_oc(st, s, &oc);
                assert_true(rc == SB_OK || rc == SB_ERR_BUDGET);
                /* COMMIT: durable on return, in every write mode but
                 * write-only (unless the outcome says why not); else now
                 * and then a wait on the ticket makes it so. Write-only is
                 * never durable: its synced state (SB_ERR_WRITE_ONLY)
                 * survives for a later open that reads the tier. */
                bool wo = c.write_mode == SB_WRITE_ONLY;
                int synced_rc = wo ? SB_ERR_WRITE_ONLY : SB_OK;
                bool synced = rc == SB_OK && oc.durable;
                if (rc == SB_OK) {
                    assert_int_equal(oc.write_only, wo);
                    if (wo)
                        assert_int_equal(oc.durable, 0);
                }
                if (rc == SB_OK && c.durability == SB_DURABILITY_COMMIT && !oc.denied &&
                    !oc.deferred) {
                    assert_int_equal(oc.durable, !wo);
                    assert_int_equal(sb_store_is_durable(st, oc.ticket), synced_rc);
                    synced = true;
                }
                if (rc == SB_OK && !synced && tu_rand(&w.rng) % 4 == 0)
                    synced = sb_store_wait_durable(st, oc.ticket, SB_WAIT_FOREVER) == synced_rc;
                if (synced)
                    s->durable = true;
            } else if (r < 7) {
                /* Everything put so far survives once a flush succeeds,
                 * unless the budget refused part of it (not durable then). */
                int n_before = w.n;
                if (sb_store_flush(st) == SB_OK)
                    for (int i = 0; i < n_before && i < MAX_SEQ; i++)
                        if (check_seq(st, &w.s[i], false) == w.s[i].n)
                            w.s[i].durable = c.write_mode != SB_WRITE_ONLY ||
                                             w.s[i].durable;
            } else {
                check_seq(st, &w.s[tu_rand(&w.rng) % (uint64_t)w.n], false);
            }
        }
        /* Power cut, the writer still running. */
        double keep = (double)(tu_rand(&w.rng) % 100) / 100.0;
        double garble = (double)(tu_rand(&w.rng) % 30) / 100.0;
        assert_int_equal(sb_io_mem_crash(io, tu_rand(&w.rng), keep, garble), 0);
        sb_store_crash(st);
    }
    c.write_mode = SB_WRITE_THROUGH; /* serve what is on disk */
    sb_store *st = NULL;
    assert_int_equal(sb_store_open_io(&c, io, &st), SB_OK);
    check_world(st, &w, false);
    sb_store_close(st);
    sb_io_destroy(io);
}

static void test_crash_power_cut(void **state)
{
    (void)state;
    const char *env = getenv("SB_CRASH_ROUNDS");
    uint64_t rounds = env ? strtoull(env, NULL, 10) : 1000;
    for (uint64_t seed = 1; seed <= rounds; seed++)
        crash_round(seed);
}

/* ---- faults at the Nth operation --------------------------------------------------- */

/* A fixed workload: 12 sequences; flush after the 6th and at the end.
 * Returns the I/O operations it performed (open to close). */
static uint64_t fault_run(sb_io *io, const sb_config *c, world *w, uint64_t nth, int err)
{
    uint64_t before = sb_io_mem_ops_count(io);
    if (nth)
        sb_io_mem_fail_at(io, nth, err);
    sb_store *st = NULL;
    int rc = sb_store_open_io(c, io, &st);
    if (rc != SB_OK) { /* a fault during open: a clean refusal */
        assert_true(rc == SB_ERR_IO || rc == SB_ERR_NOSPC || rc == SB_ERR_SUPERBLOCK);
        sb_io_mem_fail_at(io, 0, 0);
        return sb_io_mem_ops_count(io) - before;
    }
    for (int i = 0; i < w->n; i++) {
        assert_int_equal(put(st, &w->s[i]), SB_OK);
        if (i == w->n / 2 || i == w->n - 1) {
            rc = sb_store_flush(st);
            assert_true(rc == SB_OK || rc == SB_ERR_IO || rc == SB_ERR_NOSPC);
            if (rc == SB_OK)
                for (int k = 0; k <= i; k++)
                    w->s[k].durable = true;
            else
                for (int k = 0; k <= i; k++) /* only an earlier flush counts */
                    w->s[k].durable = w->s[k].durable;
        }
    }
    /* Whatever failed on disk, RAM serves everything. */
    for (int i = 0; i < w->n; i++)
        assert_int_equal(check_seq(st, &w->s[i], true), w->s[i].n);
    tu_check(st);
    sb_store_close(st);
    sb_io_mem_fail_at(io, 0, 0);
    return sb_io_mem_ops_count(io) - before;
}

static void fault_sweep(int err)
{
    sb_config c;
    sb_config_default(&c);
    c.min_prefix_tokens = 1; /* short test sequences are written too */
    c.segment_bytes = 64 << 10;
    c.disk_bytes = 64 << 20;
    c.queue_depth = 4;
    static world w0;
    memset(&w0, 0, sizeof w0);
    w0.rng = 99;
    for (int i = 0; i < 12; i++)
        new_seq(&w0);
    sb_io *io = NULL;
    assert_int_equal(sb_io_mem_new(&io), 0);
    static world w;
    w = w0;
    uint64_t total = fault_run(io, &c, &w, 0, 0);
    sb_io_destroy(io);
    assert_true(total > 20);
    for (uint64_t n = 1; n <= total + 2; n++) {
        assert_int_equal(sb_io_mem_new(&io), 0);
        w = w0;
        fault_run(io, &c, &w, n, err);
        /* Reopen without faults: durable sequences whole, all bit-exact. */
        sb_store *st = NULL;
        int rc = sb_store_open_io(&c, io, &st);
        if (rc != SB_OK) {
            fprintf(stderr, "fault %d at op %llu: reopen failed: %s\n", err,
                    (unsigned long long)n, sb_strerror(rc));
            fail();
        }
        check_world(st, &w, false);
        sb_store_close(st);
        sb_io_destroy(io);
    }
}

static void test_crash_fault_eio(void **state)
{
    (void)state;
    fault_sweep(-5 /* EIO */);
}

static void test_crash_fault_enospc(void **state)
{
    (void)state;
    fault_sweep(-28 /* ENOSPC */);
}

static void test_crash_fault_short_write(void **state)
{
    (void)state;
    fault_sweep(0);
}

/* ---- the close's own faults ---------------------------------------------------------- */

/* Puts under write-back and no periodic syncs (nothing is written before
 * the close), then a close with the nth of its I/O operations failing
 * (err; 0: a short write). Returns the close's code; the operations the
 * close performed in *ops. */
static int close_run(sb_io *io, const sb_config *c, world *w, uint64_t nth, int err,
                     uint64_t *ops)
{
    sb_store *st = NULL;
    assert_int_equal(sb_store_open_io(c, io, &st), SB_OK);
    for (int i = 0; i < w->n; i++)
        assert_int_equal(put(st, &w->s[i]), SB_OK);
    uint64_t before = sb_io_mem_ops_count(io);
    if (nth)
        sb_io_mem_fail_at(io, nth, err);
    int rc = sb_store_close(st);
    sb_io_mem_fail_at(io, 0, 0);
    *ops = sb_io_mem_ops_count(io) - before;
    return rc;
}

/* sb_store_close returns the first error of its final flush: for a fault
 * at every I/O operation the close performs, either it says SB_OK and a
 * power cut right after it loses nothing, or it returns the error the
 * fault maps to. A fault on a record's write always makes it fail. */
static void close_sweep(int err, int want)
{
    sb_config c;
    sb_config_default(&c);
    c.min_prefix_tokens = 1;
    c.segment_bytes = 64 << 10;
    c.disk_bytes = 64 << 20;
    c.queue_depth = 4;
    c.write_mode = SB_WRITE_BACK;
    c.durability = SB_DURABILITY_NONE;
    static world w0, w;
    memset(&w0, 0, sizeof w0);
    w0.rng = 77;
    for (int i = 0; i < 6; i++)
        new_seq(&w0);
    for (int i = 0; i < w0.n; i++)
        w0.s[i].durable = true; /* what a close that says SB_OK promises */
    sb_io *io = NULL;
    assert_int_equal(sb_io_mem_new(&io), 0);
    w = w0;
    uint64_t total = 0;
    assert_int_equal(close_run(io, &c, &w, 0, 0, &total), SB_OK);
    sb_io_destroy(io);
    assert_true(total > 10);
    int failed = 0;
    for (uint64_t n = 1; n <= total; n++) {
        assert_int_equal(sb_io_mem_new(&io), 0);
        w = w0;
        uint64_t ops = 0;
        int rc = close_run(io, &c, &w, n, err, &ops);
        if (rc != SB_OK) {
            if (rc != want && rc != SB_ERR_IO) {
                fprintf(stderr, "fault %d at close op %llu: %s\n", err, (unsigned long long)n,
                        sb_strerror(rc));
                fail();
            }
            failed++;
        } else {
            /* SB_OK: everything is durable, a power cut loses nothing. */
            assert_int_equal(sb_io_mem_crash(io, n, 0.0, 0.0), 0);
            sb_store *st = NULL;
            assert_int_equal(sb_store_open_io(&c, io, &st), SB_OK);
            check_world(st, &w, false);
            sb_store_close(st);
        }
        sb_io_destroy(io);
    }
    print_message("close fault %d: %d of %llu operations made it fail\n", err, failed,
                  (unsigned long long)total);
    /* The records' writes (6 sequences: more than 6 records) at least;
     * with EIO and ENOSPC also the syncs, the summary, the superblock. */
    assert_true(failed > (err ? (int)total / 2 : 6));
}

static void test_crash_close_eio(void **state)
{
    (void)state;
    close_sweep(-5 /* EIO */, SB_ERR_IO);
}

static void test_crash_close_short_write(void **state)
{
    (void)state;
    close_sweep(0, SB_ERR_IO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crash_close_eio),
        cmocka_unit_test(test_crash_close_short_write),
        cmocka_unit_test(test_crash_fault_eio),
        cmocka_unit_test(test_crash_fault_enospc),
        cmocka_unit_test(test_crash_fault_short_write),
        cmocka_unit_test(test_crash_power_cut),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
