/* test_reclaim.c -- the disk tier under its cap and out of space, on the
 * in-memory file system of store/disk/io.h.
 *
 *   random     seeded random workloads (puts of sequences that share
 *              prefixes, restores, TTL pins, flushes) under a cap of a few
 *              segments and a small RAM budget, so segments are reclaimed
 *              over and over: the segment files never exceed the cap;
 *              every restore is bit-exact and the store's invariants hold;
 *              pinned sequences restore whole throughout; device bytes
 *              equal their breakdown (reinsertion included); a reopen
 *              serves nothing wrong (records after a dropped page are
 *              orphans, dropped again).
 *   hot        a sequence matched between rounds of writes survives many
 *              reclamations of its segment (read back, written again); one
 *              never matched is gone. (Rounds of random where the write
 *              budget runs dry cover denied reinsertion.)
 *   resident   sequences resident in RAM stay indexed when their segments
 *              are reclaimed (RAM only): all match from RAM, bit-exact;
 *              only the RAM tier's eviction takes them later.
 *   cut        such a page before a page still on disk (data dropped) can
 *              still be evicted: RAM filled with held pages empties.
 *   nospc      a file system that fills: the writer stops (denials
 *              "capacity", disk_nospc), the store serves everything from
 *              RAM, a flush says SB_ERR_NOSPC; once space returns (and a
 *              second has passed) writes resume and a reopen finds them
 *              (flushes keep saying SB_ERR_NOSPC: the pages denied before
 *              are not on disk).
 *   floor      the free-space floor stops new segments before the file
 *              system is full, and lifting it lets writes resume.
 *   ticket     a durable ticket whose record reclamation took (left in
 *              RAM only) answers SB_ERR_RECLAIMED, and the reopen agrees;
 *              a hot one written again still answers SB_OK (before the
 *              fix every such ticket kept answering SB_OK).
 *   small_fs   the default cap on an 8 MiB file system with 1 MiB
 *              segments: 120 values acknowledged durable after 80 older
 *              ones; reclamation takes the older first and a reopen
 *              restores all 120 (before the fix a cap of two segments
 *              reclaimed the segment just sealed: fresh values gone).
 *
 * SB_RECLAIM_ROUNDS overrides the random rounds (default 40).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "disk.h"
#include "io.h"
#include "testutil.h"
#include "tu_io.h"

/* 4 tokens x 1 KiB: 4 KiB pages, 8 KiB records; 64 KiB segments hold 7. */
static const tu_layout LA = { .page_tokens = 4, .n_tensors = 1, .bpt = { 1024 },
                              .point_bytes = 32, .model = "reclaim" };

#define SEG (64u << 10)
#define MAX_SEQ 48
#define MAX_TOK 40

static uint64_t g_now = 1000000000ull;

static uint64_t fake_clock(void *ctx)
{
    (void)ctx;
    return __atomic_load_n(&g_now, __ATOMIC_SEQ_CST);
}

static void advance(uint64_t ns)
{
    __atomic_add_fetch(&g_now, ns, __ATOMIC_SEQ_CST);
}

static sb_config config(uint64_t cap_segs, uint64_t ram_pages)
{
    sb_config c;
    sb_config_default(&c);
    c.min_prefix_tokens = 1; /* short test sequences are written too */
    c.segment_bytes = SEG;
    c.disk_bytes = cap_segs * SEG;
    c.ram_bytes = ram_pages * 4096 + (64u << 10);
    c.queue_depth = 4;
    c.durability = SB_DURABILITY_PERIODIC;
    c.sync_interval_ms = 5;
    c.clock_ns = fake_clock;
    return c;
}

/* Bytes of segment files in the file system. */
typedef struct seg_count {
    sb_io *io;
    uint64_t bytes;
    int files;
} seg_count;

static void count_seg(void *ctx, const char *name)
{
    seg_count *c = ctx;
    size_t n = strlen(name);
    if (strncmp(name, "seg-", 4) != 0 || n < 4 || strcmp(name + n - 4, ".dat") != 0)
        return;
    int fd = sb_io_open(c->io, name, SB_IO_RDONLY);
    if (fd == -ENOENT) /* reclaimed meanwhile */
        return;
    assert_true(fd >= 0);
    uint64_t size = 0;
    assert_int_equal(c->io->ops->size(c->io, fd, &size), 0);
    sb_io_close(c->io, fd);
    c->bytes += size;
    c->files++;
}

static uint64_t seg_bytes_on_disk(sb_io *io)
{
    seg_count c = { .io = io };
    assert_int_equal(io->ops->list(io, count_seg, &c), 0);
    return c.bytes;
}

/* Device bytes add up to their breakdown. */
static void check_wa(sb_store *st)
{
    sb_stats s = tu_stats(st);
    assert_int_equal(s.disk_write_bytes,
                     s.disk_logical_bytes + s.disk_head_bytes + s.disk_padding_bytes +
                         s.disk_summary_bytes + s.disk_superblock_bytes +
                         s.disk_ns_record_bytes + s.disk_reinsert_bytes);
}

/* Restore s as far as it matches; whatever comes back is bit-exact.
 * Returns the tokens restored. */
static size_t restore(sb_ns *ns, const uint32_t *tok, size_t n)
{
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, tok, n, &m), SB_OK);
    sb_match_info info;
    assert_int_equal(sb_match_get_info(m, &info), SB_OK);
    size_t L = info.n_tokens;
    void **bufs = tu_bufs(&LA, L ? L : 1);
    int rc = sb_match_restore(m, L, bufs, NULL);
    if (rc != SB_OK) {
        fprintf(stderr, "restore of %zu tokens: %s\n", L, sb_strerror(rc));
        fail();
    }
    assert_true(tu_state_equal(&LA, tok, L, bufs));
    tu_free_state(&LA, bufs);
    sb_match_release(m);
    return L;
}

typedef struct seq {
    uint32_t tok[MAX_TOK];
    size_t n;
    uint64_t pin;              /* pin id, 0: not pinned */
} seq;

static void random_round(uint64_t seed)
{
    sb_io *io = NULL;
    assert_int_equal(sb_io_mem_new(&io), 0);
    uint64_t rng = seed * 0x9E3779B97F4A7C15ull + 7;
    uint64_t cap_segs = 2 + seed % 4;
    sb_config c = config(cap_segs, 12 + seed % 24);
    /* Every third round the write budget runs dry: reinsertion is denied
     * too, and even pinned pages may leave the disk (and, not being
     * leaves, the index). */
    bool starved = seed % 3 == 0;
    if (starved) {
        c.write_budget_bytes_per_hour = 1u << 20;
        c.write_budget_burst_bytes = (256u << 10) + (seed % 5) * SEG;
    }
    sb_store *st = tu_open_io(&c, io);
    sb_ns *ns = tu_ns(st, &LA, "r");
    static seq s[MAX_SEQ];
    memset(s, 0, sizeof s);
    int n = 0, pins = 0;
    for (int op = 0; op < 400; op++) {
        uint64_t r = tu_rand(&rng) % 16;
        if (r < 9 || n == 0) {
            seq *q = &s[n < MAX_SEQ ? n++ : (int)(tu_rand(&rng) % MAX_SEQ)];
            if (q->pin) { /* replaced: unpin it first */
                assert_int_equal(sb_ns_unpin(ns, q->pin), SB_OK);
                pins--;
            }
            memset(q, 0, sizeof *q);
            q->n = 1 + tu_rand(&rng) % MAX_TOK;
            tu_tokens(&rng, q->tok, q->n, 6);
            if (n > 1 && tu_rand(&rng) % 2) { /* share a prefix */
                const seq *o = &s[tu_rand(&rng) % (uint64_t)n];
                size_t k = o->n < q->n ? o->n : q->n;
                memcpy(q->tok, o->tok, tu_rand(&rng) % (k + 1) * sizeof *q->tok);
            }
            /* A RAM budget this small may refuse part of it (pins, the
             * writer's queue): SB_ERR_BUDGET, a prefix stored. */
            void **state = tu_state(&LA, q->tok, q->n);
            size_t stored = 0;
            int rc = sb_ns_put(ns, q->tok, q->n, (const void *const *)state, NULL, &stored);
            assert_true(rc == SB_OK || rc == SB_ERR_BUDGET);
            assert_true(rc != SB_OK || stored == q->n);
            tu_free_state(&LA, state);
        } else if (r < 13) {
            seq *q = &s[tu_rand(&rng) % (uint64_t)n];
            restore(ns, q->tok, q->n);
        } else if (r < 14 && pins < 2) {
            /* Pin a short sequence that is whole and resident (a match
             * holds it resident meanwhile): a pinned page in RAM is never
             * dropped, at worst kept in RAM only. */
            seq *q = &s[tu_rand(&rng) % (uint64_t)n];
            size_t got = 0;
            sb_match *m = NULL;
            sb_match_info info;
            if (!q->pin && q->n <= 20 && restore(ns, q->tok, q->n) == q->n &&
                sb_ns_match(ns, q->tok, q->n, &m) == SB_OK &&
                sb_match_get_info(m, &info) == SB_OK && info.n_tokens == q->n &&
                info.n_pages_disk == 0 &&
                sb_ns_pin(ns, q->tok, q->n, 0, &q->pin, &got) == SB_OK) {
                assert_int_equal(got, q->n);
                pins++;
            }
            sb_match_release(m);
        } else {
            /* (No room: with a cap of a few segments, a restore in
             * flight can hold every one of them for a moment.) */
            int rc = sb_store_flush(st);
            assert_true(rc == SB_OK || rc == SB_ERR_BUDGET || rc == SB_ERR_NOSPC);
        }
        if (op % 50 == 49) {
            sb_store_flush(st);
            tu_check(st);
            assert_true(seg_bytes_on_disk(io) <= c.disk_bytes);
            for (int i = 0; i < n && !starved; i++)
                if (s[i].pin) { /* pinned: whole, whatever was reclaimed */
                    size_t L = restore(ns, s[i].tok, s[i].n);
                    assert_int_equal(L, s[i].n);
                }
        }
    }
    int frc = sb_store_flush(st);
    assert_true(frc == SB_OK || frc == SB_ERR_NOSPC || (starved && frc == SB_ERR_BUDGET));
    sb_stats stats = tu_stats(st);
    if (stats.disk_reclaimed_segments == 0 && !starved) {
        fprintf(stderr, "seed %llu: nothing reclaimed\n", (unsigned long long)seed);
        fail();
    }
    if (starved)
        assert_true(stats.disk_denials[SB_DENY_BUDGET] > 0);
    assert_true(stats.disk_segments * SEG <= c.disk_bytes);
    assert_int_equal(stats.disk_checksum_failures, 0);
    check_wa(st);
    for (int i = 0; i < n; i++)
        restore(ns, s[i].tok, s[i].n);
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);

    /* Reopen: what is on disk restores bit-exact; nothing was written
     * without its parent surviving beside it. */
    uint64_t dropped = stats.disk_reclaim_dropped + stats.disk_reclaim_ram_only;
    st = tu_open_io(&c, io);
    stats = tu_stats(st);
    /* Records after a page whose record reclamation took (dropped, or
     * kept in RAM only) are orphans now, found and dropped. */
    assert_true(stats.recovery_orphans == 0 || dropped > 0);
    assert_int_equal(stats.recovery_torn, 0);
    assert_true(seg_bytes_on_disk(io) <= c.disk_bytes);
    ns = tu_ns(st, &LA, "r");
    for (int i = 0; i < n; i++)
        restore(ns, s[i].tok, s[i].n);
    assert_int_equal(tu_stats(st).disk_checksum_failures, 0);
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
    sb_io_destroy(io);
}

static void test_reclaim_random(void **state)
{
    (void)state;
    const char *env = getenv("SB_RECLAIM_ROUNDS");
    uint64_t rounds = env ? strtoull(env, NULL, 10) : 40;
    for (uint64_t seed = 1; seed <= rounds; seed++)
        random_round(seed);
}

/* Write `count` fresh sequences of 32 tokens (8 pages each), flushing. */
static void fill(sb_store *st, sb_ns *ns, uint64_t *rng, int count)
{
    uint32_t tok[32];
    for (int i = 0; i < count; i++) {
        tu_tokens(rng, tok, 32, 1u << 30);
        tu_put(ns, &LA, tok, 32, false, SB_OK);
    }
    assert_int_equal(sb_store_flush(st), SB_OK);
}

static void test_reclaim_hot(void **state)
{
    (void)state;
    sb_io *io = NULL;
    assert_int_equal(sb_io_mem_new(&io), 0);
    /* 4 segments of 15 records (one held back as the reserve); RAM for 3
     * sequences. */
    sb_config c = config(4, 8);
    c.segment_bytes = 2 * SEG;
    c.disk_bytes = 4 * c.segment_bytes;
    sb_store *st = tu_open_io(&c, io);
    sb_ns *ns = tu_ns(st, &LA, "h");
    uint64_t rng = 11;
    uint32_t hot[32], cold[32];
    tu_tokens(&rng, hot, 32, 1u << 30);
    tu_tokens(&rng, cold, 32, 1u << 30);
    tu_put(ns, &LA, hot, 32, false, SB_OK);
    tu_put(ns, &LA, cold, 32, false, SB_OK);
    assert_int_equal(sb_store_flush(st), SB_OK);
    for (int round = 0; round < 16; round++) {
        assert_int_equal(restore(ns, hot, 32), 32); /* a hit: keep it */
        fill(st, ns, &rng, 1); /* 8 records, and 8 written again */
    }
    sb_stats s = tu_stats(st);
    assert_true(s.disk_reclaimed_segments >= 8);
    assert_true(s.disk_reclaim_kept >= 16); /* kept at least twice */
    assert_true(s.disk_reinsert_bytes > 0);
    assert_true(s.disk_reclaim_dropped > 0);
    assert_int_equal(s.disk_denials[SB_DENY_BUDGET], 0);
    assert_int_equal(restore(ns, hot, 32), 32);
    assert_true(restore(ns, cold, 32) < 32); /* never matched: reclaimed */
    check_wa(st);
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
    sb_io_destroy(io);
}

/* The match of tok[0, n): its length and how many of its pages are on
 * disk only (released). */
static size_t match_ram(sb_ns *ns, const uint32_t *tok, size_t n, size_t *on_disk)
{
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, tok, n, &m), SB_OK);
    sb_match_info info;
    assert_int_equal(sb_match_get_info(m, &info), SB_OK);
    sb_match_release(m);
    *on_disk = info.n_pages_disk;
    return info.n_tokens;
}

/* Issue 15: with everything resident, reclaiming segments under a small
 * cap used to drop the sequences from the index (119 of 120 gone) though
 * the RAM budget had room. A resident page now stays indexed, in RAM only,
 * and is lost only through the RAM tier's own eviction: every sequence
 * still matches from RAM, bit-exact. Then filling RAM past its budget
 * evicts them as any other (puts never fail for RAM-only pages stuck
 * behind pages on disk). */
static void test_reclaim_keeps_resident(void **state)
{
    (void)state;
    sb_io *io = NULL;
    assert_int_equal(sb_io_mem_new(&io), 0);
    /* 4 segments of 7 records; RAM for 600 pages (75 sequences). */
    sb_config c = config(4, 600);
    sb_store *st = tu_open_io(&c, io);
    sb_ns *ns = tu_ns(st, &LA, "k");
    uint64_t rng = 15;
    enum { N1 = 60, N2 = 60 };
    static uint32_t tok[N1 + N2][32];
    for (int i = 0; i < N1; i++) {
        tu_tokens(&rng, tok[i], 32, 1u << 30);
        tu_put(ns, &LA, tok[i], 32, false, SB_OK);
        assert_int_equal(sb_store_flush(st), SB_OK);
        tu_check(st);
    }
    sb_stats s = tu_stats(st);
    assert_true(s.disk_reclaimed_segments >= 10); /* 480 records, 28 under the cap */
    assert_int_equal(s.disk_reclaim_dropped, 0);  /* nothing was on disk only */
    assert_true(s.disk_reclaim_ram_only > 0);
    assert_true(s.disk_segments * SEG <= c.disk_bytes);
    for (int i = 0; i < N1; i++) {
        size_t on_disk = 0;
        assert_int_equal(match_ram(ns, tok[i], 32, &on_disk), 32);
        assert_int_equal(on_disk, 0); /* every page in RAM */
        assert_int_equal(restore(ns, tok[i], 32), 32);
    }
    tu_check(st);

    /* Twice what RAM holds: eviction makes room, pages of the first
     * sequences that reclamation left RAM-only included (some sit before
     * pages still on disk). */
    for (int i = N1; i < N1 + N2; i++) {
        tu_tokens(&rng, tok[i], 32, 1u << 30);
        tu_put(ns, &LA, tok[i], 32, false, SB_OK);
        assert_int_equal(sb_store_flush(st), SB_OK);
        tu_check(st);
    }
    s = tu_stats(st);
    assert_true(s.evictions > 0);
    assert_true(s.ram_bytes <= c.ram_bytes);
    for (int i = 0; i < N1 + N2; i++) /* whatever is left is bit-exact */
        restore(ns, tok[i], 32);
    assert_int_equal(restore(ns, tok[N1 + N2 - 1], 32), 32);
    check_wa(st);
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
    sb_io_destroy(io);
}

/* A page reclamation left in RAM only, before a page whose record is still
 * on disk (and whose data the RAM tier dropped): the RAM tier can still
 * evict it (with the page after it). Without that it would hold RAM until
 * the later page's segment went too, and a budget full of such pages
 * refuses allocations. */
static void test_reclaim_cut_evictable(void **state)
{
    (void)state;
    sb_io *io = NULL;
    assert_int_equal(sb_io_mem_new(&io), 0);
    sb_config c = config(4, 64); /* RAM: 64 + 16 pages */
    uint64_t budget_pages = c.ram_bytes / 4096;
    sb_store *st = tu_open_io(&c, io);
    sb_ns *ns = tu_ns(st, &LA, "cut");
    uint64_t rng = 21;
    /* P fills the first segment (a namespace record and 7 page records);
     * P + 4 tokens puts its 8th page in the second. */
    uint32_t p[32];
    tu_tokens(&rng, p, 32, 1u << 30);
    tu_put(ns, &LA, p, 28, false, SB_OK);
    assert_int_equal(sb_store_flush(st), SB_OK);
    tu_put(ns, &LA, p, 32, false, SB_OK);
    assert_int_equal(sb_store_flush(st), SB_OK);
    /* Unrelated puts until the first segment is reclaimed. */
    for (int i = 0; tu_stats(st).disk_reclaimed_segments == 0; i++) {
        assert_true(i < 64);
        uint32_t f[16];
        tu_tokens(&rng, f, 16, 1u << 30);
        tu_put(ns, &LA, f, 16, false, SB_OK);
        assert_int_equal(sb_store_flush(st), SB_OK);
    }
    sb_stats s = tu_stats(st);
    assert_int_equal(s.disk_reclaimed_segments, 1);
    assert_int_equal(s.disk_reclaim_ram_only, 7); /* P's pages, in RAM only */
    assert_int_equal(restore(ns, p, 32), 32);
    tu_check(st);
    /* Fill RAM with pages the caller holds: every indexed page must go. */
    sb_page **held = calloc(budget_pages, sizeof *held);
    assert_non_null(held);
    for (uint64_t i = 0; i < budget_pages; i++) {
        int rc = sb_ns_page_alloc(ns, &held[i]);
        if (rc != SB_OK)
            fprintf(stderr, "allocation %llu of %llu: %s\n", (unsigned long long)i,
                    (unsigned long long)budget_pages, sb_strerror(rc));
        assert_int_equal(rc, SB_OK);
    }
    tu_check(st);
    assert_int_equal(tu_stats(st).indexed_pages - tu_stats(st).disk_pages, 0);
    assert_true(restore(ns, p, 32) < 28); /* P went with its eviction */
    for (uint64_t i = 0; i < budget_pages; i++)
        sb_page_unref(held[i]);
    free(held);
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
    sb_io_destroy(io);
}

static void test_reclaim_nospc(void **state)
{
    (void)state;
    sb_io *io = NULL;
    assert_int_equal(sb_io_mem_new(&io), 0);
    sb_config c = config(64, 256); /* the cap is not what stops it */
    c.disk_free_floor_bytes = 0;
    sb_store *st = tu_open_io(&c, io);
    sb_ns *ns = tu_ns(st, &LA, "n");
    /* Room for what is there (the superblock), three segments and their
     * summaries. */
    uint64_t avail = 0;
    sb_io_mem_set_space(io, 1ull << 40);
    assert_int_equal(io->ops->space(io, &avail), 0);
    sb_io_mem_set_space(io, (1ull << 40) - avail + 3 * SEG + (16u << 10));
    uint64_t rng = 5;
    uint32_t tok[12][32];
    int rc = SB_OK;
    for (int i = 0; i < 12; i++) {
        tu_tokens(&rng, tok[i], 32, 1u << 30);
        tu_put(ns, &LA, tok[i], 32, false, SB_OK);
        rc = sb_store_flush(st);
        assert_true(rc == SB_OK || rc == SB_ERR_NOSPC);
    }
    assert_int_equal(rc, SB_ERR_NOSPC);
    sb_stats s = tu_stats(st);
    assert_true(s.disk_nospc > 0);
    assert_true(s.disk_denials[SB_DENY_CAPACITY] > 0);
    for (int i = 0; i < 12; i++) /* RAM serves it all */
        assert_int_equal(restore(ns, tok[i], 32), 32);
    tu_check(st);

    /* Space returns; a second later the writer tries again. */
    sb_io_mem_set_space(io, 0);
    advance(2000000000ull);
    uint64_t pages = tu_stats(st).disk_pages;
    uint32_t more[32];
    tu_tokens(&rng, more, 32, 1u << 30);
    tu_put(ns, &LA, more, 32, false, SB_OK);
    /* (A flush still reports the pages denied before: they are not on
     * disk and never will be.) */
    assert_int_equal(sb_store_flush(st), SB_ERR_NOSPC);
    assert_int_equal(tu_stats(st).disk_pages, pages + 8);
    sb_ns_close(ns);
    sb_store_close(st);
    st = tu_open_io(&c, io);
    ns = tu_ns(st, &LA, "n");
    assert_int_equal(restore(ns, more, 32), 32);
    for (int i = 0; i < 12; i++)
        restore(ns, tok[i], 32);
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
    sb_io_destroy(io);
}

static void test_reclaim_floor(void **state)
{
    (void)state;
    sb_io *io = NULL;
    assert_int_equal(sb_io_mem_new(&io), 0);
    sb_io_mem_set_space(io, 64u << 20);
    sb_config c = config(64, 256);
    uint64_t avail = 0;
    sb_store *st = tu_open_io(&c, io); /* creates the superblock */
    sb_store_close(st);
    assert_int_equal(io->ops->space(io, &avail), 0);
    /* Three segments fit above the floor, a fourth does not. */
    c.disk_free_floor_bytes = avail - 3 * SEG - SEG / 2;
    st = tu_open_io(&c, io);
    sb_ns *ns = tu_ns(st, &LA, "f");
    uint64_t rng = 9;
    uint32_t tok[32];
    for (int i = 0; i < 8; i++) {
        tu_tokens(&rng, tok, 32, 1u << 30);
        tu_put(ns, &LA, tok, 32, false, SB_OK);
        int rc = sb_store_flush(st);
        assert_true(rc == SB_OK || rc == SB_ERR_NOSPC);
    }
    sb_stats s = tu_stats(st);
    assert_true(s.disk_nospc > 0);
    assert_int_equal(s.disk_segments, 3);
    assert_true(s.disk_denials[SB_DENY_CAPACITY] > 0);
    assert_int_equal(io->ops->space(io, &avail), 0);
    assert_true(avail >= c.disk_free_floor_bytes);
    assert_int_equal(restore(ns, tok, 32), 32); /* from RAM */

    /* The file system grows: a second later writing resumes. */
    sb_io_mem_set_space(io, 128u << 20);
    advance(2000000000ull);
    uint64_t pages = tu_stats(st).disk_pages;
    tu_tokens(&rng, tok, 32, 1u << 30);
    tu_put(ns, &LA, tok, 32, false, SB_OK);
    assert_int_equal(sb_store_flush(st), SB_ERR_NOSPC); /* the denied ones */
    assert_true(tu_stats(st).disk_segments >= 4);
    assert_int_equal(tu_stats(st).disk_pages, pages + 8);
    sb_ns_close(ns);
    sb_store_close(st);
    sb_io_destroy(io);
}

/* Put n sequences of 8 tokens (two pages, no point), each starting at a
 * token of its own (first + i: none shares a page), under COMMIT: each
 * durable when put returns; their tickets go to tickets[] (may be NULL). */
static void put_values(sb_ns *ns, uint32_t first, int n, uint64_t *tickets)
{
    for (int i = 0; i < n; i++) {
        uint32_t tok[8];
        for (int k = 0; k < 8; k++)
            tok[k] = (first + (uint32_t)i) * 16u + (uint32_t)k;
        sb_write_outcome oc;
        size_t stored = 0;
        assert_int_equal(tu_put_ex(ns, &LA, tok, 8, false, &stored, &oc), SB_OK);
        assert_int_equal(stored, 8);
        assert_int_equal(oc.durable, 1);
        if (tickets)
            tickets[i] = oc.ticket;
    }
}

/* How many of those n sequences a match restores whole. */
static int restored_values(sb_ns *ns, uint32_t first, int n)
{
    int whole = 0;
    for (int i = 0; i < n; i++) {
        uint32_t tok[8];
        for (int k = 0; k < 8; k++)
            tok[k] = (first + (uint32_t)i) * 16u + (uint32_t)k;
        whole += restore(ns, tok, 8) == 8;
    }
    return whole;
}

/* A durable ticket whose records reclamation takes says so: under a cap
 * of four segments, A (never matched) and B (matched: hot) are put under
 * COMMIT, durable; 40 more values fill ten segments. A's segment was
 * reclaimed and A left the disk (in RAM only now): its ticket answers
 * SB_ERR_RECLAIMED, before and after a flush, and a reopen does not
 * restore A. B was written again, so its ticket still answers SB_OK and
 * a reopen restores it; so does the last value's. Before the fix A's
 * ticket kept answering SB_OK (issue 29). */
static void test_reclaim_ticket(void **state)
{
    (void)state;
    sb_io *io = tu_mem_fs();
    sb_config c = config(4, 4096);
    c.durability = SB_DURABILITY_COMMIT;
    sb_store *st = tu_open_io(&c, io);
    sb_ns *ns = tu_ns(st, &LA, "tk");
    uint64_t a = 0, b = 0, last = 0;
    put_values(ns, 1, 1, &a);
    put_values(ns, 2, 1, &b);
    assert_int_equal(sb_store_is_durable(st, a), SB_OK);
    assert_int_equal(sb_store_is_durable(st, b), SB_OK);
    uint32_t tb[8];
    for (int k = 0; k < 8; k++)
        tb[k] = 2u * 16u + (uint32_t)k;
    for (int i = 0; i < 40; i++) {
        assert_int_equal(restore(ns, tb, 8), 8); /* B stays hot */
        put_values(ns, 100 + (uint32_t)i, 1, &last);
    }
    assert_int_equal(sb_store_flush(st), SB_OK);
    sb_stats s = tu_stats(st);
    assert_true(s.disk_reclaimed_segments >= 2);
    assert_true(s.disk_reclaim_kept > 0);
    assert_int_equal(sb_store_is_durable(st, a), SB_ERR_RECLAIMED);
    assert_int_equal(sb_store_wait_durable(st, a, SB_WAIT_FOREVER), SB_ERR_RECLAIMED);
    assert_int_equal(sb_store_is_durable(st, b), SB_OK);
    assert_int_equal(sb_store_is_durable(st, last), SB_OK);
    tu_check(st);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    st = tu_open_io(&c, io);
    ns = tu_ns(st, &LA, "tk");
    assert_int_equal(restored_values(ns, 1, 1), 0);
    assert_int_equal(restored_values(ns, 2, 1), 1);
    assert_int_equal(restored_values(ns, 139, 1), 1);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
}

/* The default cap (disk_bytes 0: a quarter of the free space) on a file
 * system of 8 MiB with segments of 1 MiB (as the default 256 MiB are to a
 * disk of 2 GiB): before the fix the cap held two segments, so the tier
 * reclaimed the segment it had just sealed to open the next, and values
 * acknowledged durable were gone before the store was closed (issue 29:
 * 119 of 120). Now a fresh store's segments shrink to an eighth of that
 * cap: 80 older values, then 120 fresh ones acknowledged durable that
 * fit the cap beside part of the old; reclamation takes the older ones
 * first, and a reopen restores every fresh one. */
static void test_reclaim_small_fs(void **state)
{
    (void)state;
    sb_io *io = tu_mem_fs();
    sb_io_mem_set_space(io, 8u << 20);
    sb_config c;
    sb_config_default(&c);
    c.min_prefix_tokens = 1;
    c.segment_bytes = 1u << 20;
    c.disk_free_floor_bytes = 0; /* the floor is for a shared disk's other users */
    c.durability = SB_DURABILITY_COMMIT;
    c.queue_depth = 4;
    sb_store *st = tu_open_io(&c, io);
    sb_stats s = tu_stats(st);
    assert_true(s.disk_bytes_limit >= 8 * (64u << 10));
    sb_ns *ns = tu_ns(st, &LA, "small");
    put_values(ns, 1000, 80, NULL); /* 16 KiB each: 1.25 MiB */
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);

    st = tu_open_io(&c, io);
    ns = tu_ns(st, &LA, "small");
    assert_int_equal(tu_stats(st).recovered_pages, 160); /* (not matched: cold) */
    enum { N = 120 };
    uint64_t tickets[N];
    put_values(ns, 1, N, tickets); /* 1.9 MiB */
    assert_int_equal(sb_store_flush(st), SB_OK);
    s = tu_stats(st);
    assert_true(s.disk_reclaimed_segments > 0); /* room was made */
    fprintf(stderr, "small_fs: cap %llu KiB, %llu segments, %llu reclaimed\n",
            (unsigned long long)(s.disk_bytes_limit >> 10), (unsigned long long)s.disk_segments,
            (unsigned long long)s.disk_reclaimed_segments);
    for (int i = 0; i < N; i++)
        assert_int_equal(sb_store_is_durable(st, tickets[i]), SB_OK);
    assert_int_equal(restored_values(ns, 1, N), N);
    tu_check(st);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);

    st = tu_open_io(&c, io);
    ns = tu_ns(st, &LA, "small");
    assert_int_equal(restored_values(ns, 1, N), N);
    assert_true(restored_values(ns, 1000, 80) < 80); /* the room was the old's */
    tu_check(st);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reclaim_random),
        cmocka_unit_test(test_reclaim_hot),
        cmocka_unit_test(test_reclaim_keeps_resident),
        cmocka_unit_test(test_reclaim_cut_evictable),
        cmocka_unit_test(test_reclaim_nospc),
        cmocka_unit_test(test_reclaim_floor),
        cmocka_unit_test(test_reclaim_small_fs),
        cmocka_unit_test(test_reclaim_ticket),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
