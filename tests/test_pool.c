/* Description: the page pool (store/core/pool.h) and the coalesced reads of
 * restores (store/disk/dread.c).
 *
 * The pool keeps freed page buffers as spares and hands them to the next
 * block of their size; spares count against the RAM budgets beside the
 * blocks and give way before anything is evicted; sb_ns_prefault makes
 * them ahead of need. Restores read adjacent records with one vectored
 * read, into recycled buffers.
 *
 *   spares_recycled          freed pages come back as spares; allocating
 *                            again maps nothing new; the gauges add up.
 *   spares_give_way          spares of one page size fill the budget; pages
 *                            of another size still fit, by trimming the
 *                            spares, with no eviction.
 *   eviction_recycles        under a full budget (the store's, or a
 *                            namespace's) each new page takes the buffer
 *                            of the page it evicted: nothing is mapped or
 *                            given back, for puts and zero-copy pages.
 *   prefault                 sb_ns_prefault makes spares up to the budget's
 *                            room, never evicts, and the pages taken later
 *                            map nothing new.
 *   check_sees_spare_drift   sb_store_check fails when the spare gauges do
 *                            not match the spare stacks.
 *   restore_no_stale_bytes   pages and point states restored (copy mode and
 *                            zero-copy, compressed or not) into recycled
 *                            buffers that were filled with a poison byte
 *                            come back bit-exact.
 *   coalesced_reads          a sequence's records are read with fewer reads
 *                            than records, and restore bit-exact.
 *   coalesced_bad_record     one record damaged in the middle of a coalesced
 *                            read: the match shrinks to the records before
 *                            it, exactly as a read per record did, and one
 *                            checksum failure is counted.
 *   coalesced_read_error     a coalesced read that fails (EIO) is read
 *                            again record by record: the restore is whole.
 *   load_with_point          sb_match_load reads the pages and the point
 *                            state (the record after the last page's) in
 *                            one read; restore and point read nothing more;
 *                            its refusals (INVAL, RANGE, NO_POINT).
 *   load_bad_point           the point's record damaged in that read: every
 *                            page served bit-exact, the point is the miss.
 *   coalesced_damage_anywhere  a record damaged at the start, middle or end
 *                            of a read or of the run (head, payload, another
 *                            record copied in its place, the file cut short;
 *                            compressed or not): the restore stops at exactly
 *                            that record, bit-exact before it; its region of
 *                            the buffers is never written, later ones only
 *                            with their own checked state.
 *   chunks_whole_huge_pages  the chunks sb_pool_grow maps are of equal
 *                            size and end on a huge page's end (no tail
 *                            of 4 KiB pages) where that wastes at most an
 *                            eighth; sb_pool_plan fills a chunk's last
 *                            huge page with slots.
 *   heads_scratch            sb_ns_prefault readies the disk tier's heads
 *                            scratch for its pages, in whole huge pages;
 *                            a restore that fits
 *                            reuses it (no growth); one past its cap reads
 *                            its heads into its own buffer, exactly.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "disk.h"
#include "disk_int.h"
#include "format.h"
#include "internal.h"
#include "io.h"
#include "open.h"
#include "testutil.h"

/* 4 KiB pages (page_tokens 8, 2 tensors), point states. */
static const tu_layout LP = { .page_tokens = 8, .n_tensors = 2, .bpt = { 256, 192 },
                              .point_bytes = 40, .model = "pool-a" };
/* 8 KiB pages. */
static const tu_layout LQ = { .page_tokens = 8, .n_tensors = 1, .bpt = { 1024 },
                              .model = "pool-b" };

static sb_store *ram_store(uint64_t ram_bytes)
{
    sb_config c;
    sb_config_default(&c);
    c.min_prefix_tokens = 1;
    c.ram_bytes = ram_bytes;
    sb_store *st = NULL;
    assert_int_equal(sb_store_open(&c, &st), SB_OK);
    return st;
}

static void alloc_pages(sb_ns *ns, sb_page **p, size_t n, int fill)
{
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(sb_ns_page_alloc(ns, &p[i]), SB_OK);
        sb_ns_info info;
        assert_int_equal(sb_ns_get_info(ns, &info), SB_OK);
        if (fill >= 0)
            memset(sb_page_data(p[i]), fill, info.page_bytes);
    }
}

static void unref_pages(sb_page **p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        sb_page_unref(p[i]);
}

static void test_pool_spares_recycled(void **state)
{
    (void)state;
    sb_store *st = ram_store(64 << 20);
    sb_ns *ns = tu_ns(st, &LP, "a");
    enum { N = 100 };
    sb_page *p[N];
    alloc_pages(ns, p, N, 1);
    sb_stats s = tu_stats(st);
    assert_int_equal(s.ram_pages, N);
    uint64_t grown = s.pool_grown_bytes;
    assert_true(grown >= N * 4096ull);
    unref_pages(p, N);
    tu_check(st);
    s = tu_stats(st);
    assert_int_equal(s.ram_pages, 0);
    assert_int_equal(s.ram_bytes, 0);
    assert_true(s.pool_spare_pages >= N);
    assert_int_equal(s.pool_spare_bytes, s.pool_spare_pages * 4096);
    /* Taking them again maps nothing new. */
    alloc_pages(ns, p, N, 2);
    tu_check(st);
    s = tu_stats(st);
    assert_int_equal(s.pool_grown_bytes, grown);
    assert_int_equal(s.ram_pages, N);
    unref_pages(p, N);
    sb_ns_close(ns);
    sb_store_close(st);
}

static void test_pool_spares_give_way(void **state)
{
    (void)state;
    enum { BUDGET = 64 };
    sb_store *st = ram_store(BUDGET * 4096); /* 64 pages of 4 KiB */
    sb_ns *a = tu_ns(st, &LP, "a"), *b = tu_ns(st, &LQ, "b");
    sb_page *p[BUDGET];
    alloc_pages(a, p, BUDGET, 1);
    unref_pages(p, BUDGET);
    sb_stats s = tu_stats(st);
    assert_int_equal(s.pool_spare_bytes, BUDGET * 4096);
    tu_check(st);
    /* 8 KiB pages: every one needs two spares of 4 KiB given back. */
    for (int i = 0; i < BUDGET / 2; i++) {
        assert_int_equal(sb_ns_page_alloc(b, &p[i]), SB_OK);
        tu_check(st);
    }
    s = tu_stats(st);
    assert_int_equal(s.evictions, 0);
    assert_int_equal(s.ram_bytes, BUDGET * 4096);
    assert_int_equal(s.pool_spare_bytes, 0);
    assert_int_equal(s.pool_trimmed_bytes, BUDGET * 4096);
    /* The budget is now full of blocks: one more is refused. */
    sb_page *q;
    assert_int_equal(sb_ns_page_alloc(b, &q), SB_ERR_BUDGET);
    unref_pages(p, BUDGET / 2);
    tu_check(st);
    sb_ns_close(a);
    sb_ns_close(b);
    sb_store_close(st);
}

/* Under a full budget every new page evicts an old one: its buffer is the
 * new page's (the pool maps nothing new and gives nothing back), for
 * puts and zero-copy pages alike, and under a namespace's own budget. */
static void test_pool_eviction_recycles(void **state)
{
    (void)state;
    enum { BUDGET = 64, SEQ = 4 * 8 }; /* 64 pages of 4 KiB; sequences of 4 pages */
    for (int ns_budget = 0; ns_budget < 2; ns_budget++) {
        sb_config c;
        sb_config_default(&c);
        c.ram_bytes = (ns_budget ? 2 : 1) * BUDGET * 4096ull;
        if (ns_budget)
            c.ns_ram_bytes = BUDGET * 4096ull; /* the namespace's fills first */
        sb_store *st = NULL;
        assert_int_equal(sb_store_open(&c, &st), SB_OK);
        sb_ns *ns = tu_ns(st, &LP, "a");
        uint64_t rng = 77;
        uint32_t tok[SEQ];
        uint32_t next = 2000;
        sb_stats s0 = { 0 };
        for (int i = 0; i < 3 * BUDGET / 4; i++) { /* three budgets' worth */
            tu_tokens(&rng, tok, SEQ, 1000);
            tok[0] = next++;
            if (i % 2) {
                tu_put(ns, &LP, tok, SEQ, false, SB_OK);
            } else {
                sb_page *p[4];
                alloc_pages(ns, p, 4, -1);
                tu_fill_range(ns, &LP, tok, 0, SEQ, p);
                assert_int_equal(sb_ns_commit(ns, tok, SEQ, p, NULL), SB_OK);
                unref_pages(p, 4);
            }
            if (i == BUDGET / 4) /* full from here on */
                s0 = tu_stats(st);
        }
        tu_check(st);
        sb_stats s1 = tu_stats(st);
        assert_true(s1.evictions > s0.evictions + BUDGET);
        assert_int_equal(s1.pool_grown_bytes, s0.pool_grown_bytes);
        assert_int_equal(s1.pool_trimmed_bytes, s0.pool_trimmed_bytes);
        assert_int_equal(tu_restore_exact(ns, &LP, tok, SEQ, NULL), SEQ);
        sb_ns_close(ns);
        sb_store_close(st);
    }
}

static void test_pool_prefault(void **state)
{
    (void)state;
    enum { BUDGET = 40 };
    sb_store *st = ram_store(BUDGET * 4096);
    sb_ns *ns = tu_ns(st, &LP, "a");
    uint64_t rng = 7;
    uint32_t tok[80];
    tu_tokens(&rng, tok, 80, 1000);
    tu_put(ns, &LP, tok, 80, false, SB_OK); /* 10 pages, indexed */
    size_t ready = 0;
    assert_int_equal(sb_ns_prefault(ns, 100, &ready), SB_OK);
    tu_check(st);
    sb_stats s = tu_stats(st);
    assert_int_equal(ready, BUDGET - 10); /* the room, no more */
    assert_int_equal(s.pool_spare_pages, BUDGET - 10);
    assert_int_equal(s.evictions, 0);
    assert_int_equal(s.indexed_pages, 10);
    uint64_t grown = s.pool_grown_bytes;
    /* Asking again changes nothing; the pages taken map nothing new. */
    assert_int_equal(sb_ns_prefault(ns, 20, &ready), SB_OK);
    assert_int_equal(ready, BUDGET - 10);
    sb_page *p[BUDGET - 10];
    alloc_pages(ns, p, BUDGET - 10, 3);
    s = tu_stats(st);
    assert_int_equal(s.pool_grown_bytes, grown);
    assert_int_equal(s.pool_spare_pages, 0);
    assert_int_equal(sb_ns_prefault(ns, 5, &ready), SB_OK);
    assert_int_equal(ready, 0); /* full: nothing evicted for spares */
    unref_pages(p, BUDGET - 10);
    assert_int_equal(sb_ns_prefault(NULL, 5, &ready), SB_ERR_INVAL);
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
}

static void test_pool_check_sees_spare_drift(void **state)
{
    (void)state;
    sb_store *st = ram_store(16 << 20);
    sb_ns *ns = tu_ns(st, &LP, "a");
    sb_page *p[4];
    alloc_pages(ns, p, 4, 0);
    unref_pages(p, 4);
    tu_check(st);
    st->pool.spare_bytes += 4096; /* a spare counted that is not there */
    st->ram_bytes += 4096;
    assert_int_equal(sb_store_check(st), SB_ERR_CORRUPT);
    st->pool.spare_bytes -= 4096;
    st->ram_bytes -= 4096;
    st->pool.spare_pages++;
    st->ram_pages++;
    assert_int_equal(sb_store_check(st), SB_ERR_CORRUPT);
    st->pool.spare_pages--;
    st->ram_pages--;
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
}

/* ---- restores on the in-memory file system -------------------------------------- */

static sb_config disk_config(uint32_t zlevel)
{
    sb_config c;
    sb_config_default(&c);
    c.min_prefix_tokens = 1;
    c.segment_bytes = 4 << 20;
    c.disk_bytes = 256 << 20;
    c.queue_depth = 8;
    c.ram_bytes = 32 << 20;
    c.compress_level = zlevel;
    return c;
}

static sb_store *mem_open(sb_io *io, const sb_config *c)
{
    sb_store *st = NULL;
    assert_int_equal(sb_store_open_io(c, io, &st), SB_OK);
    return st;
}

/* Fill the pool with spares of ns's page size holding poison. */
static void poison_spares(sb_ns *ns, size_t n)
{
    sb_page **p = calloc(n, sizeof *p);
    assert_non_null(p);
    alloc_pages(ns, p, n, 0xEE);
    unref_pages(p, n);
    free(p);
}

/* Restore s[0, n) of tokens tok (copy mode and zero-copy), bit-exact. */
static void restore_exact(sb_ns *ns, const tu_layout *l, const uint32_t *tok, size_t n,
                          bool point, bool zero_copy)
{
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, tok, n, &m), SB_OK);
    sb_match_info info;
    assert_int_equal(sb_match_get_info(m, &info), SB_OK);
    assert_int_equal(info.n_tokens, n);
    assert_true(info.n_pages_disk > 0);
    if (zero_copy) {
        sb_page **p = calloc(info.n_pages, sizeof *p);
        assert_int_equal(sb_match_pages(m, 0, info.n_pages, p), SB_OK);
        for (size_t r = 0; r < info.n_pages; r++) {
            size_t k = n - r * l->page_tokens;
            k = k < l->page_tokens ? k : l->page_tokens;
            assert_true(tu_page_holds(ns, l, p[r], tok, r, k));
            sb_page_unref(p[r]);
        }
        free(p);
    }
    void **bufs = tu_bufs(l, n);
    uint8_t pt[64];
    assert_int_equal(sb_match_restore(m, n, bufs, point ? pt : NULL), SB_OK);
    assert_true(tu_state_equal(l, tok, n, bufs));
    if (point) {
        void *want = tu_point(l, tok, n);
        assert_memory_equal(pt, want, l->point_bytes);
        free(want);
    }
    tu_free_state(l, bufs);
    sb_match_release(m);
}

static void stale_round(uint32_t zlevel)
{
    sb_io *io = NULL;
    assert_int_equal(sb_io_mem_new(&io), 0);
    sb_config c = disk_config(zlevel);
    enum { NSEQ = 6, LEN = 203 };
    uint32_t tok[NSEQ][LEN];
    uint64_t rng = 11 + zlevel;
    sb_store *st = mem_open(io, &c);
    sb_ns *ns = tu_ns(st, &LP, "s");
    for (int i = 0; i < NSEQ; i++) {
        tu_tokens(&rng, tok[i], LEN, 500);
        tu_put(ns, &LP, tok[i], LEN, true, SB_OK);
    }
    assert_int_equal(sb_store_flush(st), SB_OK);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);

    st = mem_open(io, &c);
    ns = tu_ns(st, &LP, "s");
    for (int i = 0; i < NSEQ; i++) {
        poison_spares(ns, 64); /* every read lands in a poisoned buffer */
        restore_exact(ns, &LP, tok[i], LEN, true, i % 2);
        tu_check(st);
    }
    sb_stats s = tu_stats(st);
    assert_int_equal(s.disk_checksum_failures, 0);
    assert_true(s.pool_spare_pages > 0);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
}

static void test_pool_restore_no_stale_bytes(void **state)
{
    (void)state;
    stale_round(0);
    stale_round(3);
}

/* The offset of the record of kind (SB_REC_PAGE, SB_REC_POINT) at token
 * position pos in segment file name, or -1; *head_bytes its head's size. */
static long record_at(sb_io *io, const char *name, int kind, uint32_t pos,
                      uint32_t *head_bytes)
{
    int fd = sb_io_open(io, name, SB_IO_RDONLY);
    assert_true(fd >= 0);
    uint64_t size = 0;
    assert_int_equal(io->ops->size(io, fd, &size), 0);
    uint8_t *buf = malloc(size);
    assert_int_equal(sb_io_pread(io, fd, buf, size, 0), (int64_t)size);
    sb_io_close(io, fd);
    long at = -1;
    for (uint64_t off = 0; off + 4096 <= size && at < 0; off += 4096) {
        sb_rec_head h;
        const uint32_t *t;
        const void *x;
        if (sb_rec_decode(buf + off, size - off, off, &h, &t, &x) == SB_OK &&
            h.kind == kind && h.position == pos) {
            at = (long)off;
            *head_bytes = h.head_bytes;
        }
    }
    free(buf);
    return at;
}

static long page_record_at(sb_io *io, const char *name, uint32_t pos, uint32_t *head_bytes)
{
    return record_at(io, name, SB_REC_PAGE, pos, head_bytes);
}

/* Flip one byte of file name at off. */
static void flip(sb_io *io, const char *name, uint64_t off)
{
    int fd = sb_io_open(io, name, 0);
    assert_true(fd >= 0);
    uint8_t b;
    assert_int_equal(sb_io_pread(io, fd, &b, 1, off), 1);
    b ^= 0x40;
    assert_int_equal(sb_io_pwrite(io, fd, &b, 1, off), 1);
    assert_int_equal(sb_io_fdatasync(io, fd), 0);
    sb_io_close(io, fd);
}

enum { CO_PAGES = 40, CO_LEN = CO_PAGES * 8 };

/* One sequence of len tokens (8 per page; with its point state when
 * point) on the mem file system, compression level zlevel, the store
 * closed. */
static void world(sb_io **io, sb_config *c, uint32_t *tok, size_t len, uint32_t zlevel,
                  bool point)
{
    assert_int_equal(sb_io_mem_new(io), 0);
    *c = disk_config(zlevel);
    c->segment_bytes = 16 << 20; /* the whole sequence in one segment */
    uint64_t rng = 5;
    tu_tokens(&rng, tok, len, 1000);
    sb_store *st = mem_open(*io, c);
    sb_ns *ns = tu_ns(st, &LP, "c");
    tu_put(ns, &LP, tok, len, point, SB_OK);
    assert_int_equal(sb_store_flush(st), SB_OK);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
}

/* One sequence of CO_PAGES pages, no point state, uncompressed. */
static void coalesce_world(sb_io **io, sb_config *c, uint32_t *tok)
{
    world(io, c, tok, CO_LEN, 0, false);
}

static void test_pool_coalesced_reads(void **state)
{
    (void)state;
    sb_io *io;
    sb_config c;
    uint32_t tok[CO_LEN];
    coalesce_world(&io, &c, tok);
    sb_store *st = mem_open(io, &c);
    sb_ns *ns = tu_ns(st, &LP, "c");
    sb_stats s0 = tu_stats(st);
    restore_exact(ns, &LP, tok, CO_LEN, false, true);
    sb_stats s = tu_stats(st);
    /* 40 records of 8 KiB: one read of 320 KiB (the match's other reads:
     * none, every page was on disk). */
    assert_true(s.disk_read_ios - s0.disk_read_ios < CO_PAGES / 4);
    assert_int_equal(s.disk_read_bytes - s0.disk_read_bytes, CO_PAGES * 8192ull);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
}

static void test_pool_coalesced_bad_record(void **state)
{
    (void)state;
    sb_io *io;
    sb_config c;
    uint32_t tok[CO_LEN];
    coalesce_world(&io, &c, tok);
    /* Damage the payload of page 17 (tokens 136..143). */
    enum { BAD = 17 };
    uint32_t hb = 0;
    long at = page_record_at(io, "seg-00000001.dat", BAD * 8, &hb);
    assert_true(at >= 0);
    flip(io, "seg-00000001.dat", (uint64_t)at + hb + 100);
    sb_store *st = mem_open(io, &c);
    sb_ns *ns = tu_ns(st, &LP, "c");
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, tok, CO_LEN, &m), SB_OK);
    void **bufs = tu_bufs(&LP, CO_LEN);
    assert_int_equal(sb_match_restore(m, CO_LEN, bufs, NULL), SB_ERR_CORRUPT);
    sb_match_info info;
    assert_int_equal(sb_match_get_info(m, &info), SB_OK);
    /* Exactly the records before the bad one, as one read each gave. */
    assert_int_equal(info.n_tokens, BAD * 8);
    assert_int_equal(info.n_pages, BAD);
    assert_int_equal(info.n_pages_disk, 0); /* the rest are resident */
    assert_int_equal(info.miss, SB_MISS_CORRUPT);
    assert_true(tu_state_equal(&LP, tok, BAD * 8, bufs));
    tu_free_state(&LP, bufs);
    sb_match_release(m);
    sb_stats s = tu_stats(st);
    assert_int_equal(s.disk_checksum_failures, 1);
    assert_int_equal(s.disk_read_errors, 0);
    assert_true(s.disk_read_ios < CO_PAGES / 4);
    assert_int_equal(tu_match_len(ns, tok, CO_LEN), BAD * 8);
    tu_check(st);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
}

static void test_pool_coalesced_read_error(void **state)
{
    (void)state;
    sb_io *io;
    sb_config c;
    uint32_t tok[CO_LEN];
    coalesce_world(&io, &c, tok);
    sb_store *st = mem_open(io, &c);
    sb_ns *ns = tu_ns(st, &LP, "c");
    sb_stats s0 = tu_stats(st);
    /* The restore's first operation opens the segment, its second is the
     * coalesced read: it fails once. */
    sb_io_mem_fail_at(io, 2, -5 /* EIO */);
    restore_exact(ns, &LP, tok, CO_LEN, false, false);
    sb_io_mem_fail_at(io, 0, 0);
    sb_stats s = tu_stats(st);
    assert_int_equal(s.disk_read_errors, 0);
    assert_int_equal(s.disk_checksum_failures, 0);
    /* The failed read, then one per record of it. */
    assert_true(s.disk_read_ios - s0.disk_read_ios > CO_PAGES);
    tu_check(st);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
}


/* The record at page position pos of the segment: [*at, *at + *bytes)
 * (its head and its payload padded to 4 KiB); *last (may be NULL) the
 * offset of its payload's last byte. */
static void page_record_span(sb_io *io, uint32_t pos, uint64_t *at, uint64_t *bytes,
                             uint64_t *last)
{
    uint32_t hb = 0;
    long a = page_record_at(io, "seg-00000001.dat", pos, &hb);
    assert_true(a >= 0);
    int fd = sb_io_open(io, "seg-00000001.dat", SB_IO_RDONLY);
    assert_true(fd >= 0);
    uint8_t *head = malloc(hb);
    assert_int_equal(sb_io_pread(io, fd, head, hb, (uint64_t)a), (int64_t)hb);
    sb_io_close(io, fd);
    sb_rec_head h;
    const uint32_t *t;
    const void *x;
    assert_int_equal(sb_rec_decode(head, hb, (uint64_t)a, &h, &t, &x), SB_OK);
    free(head);
    *at = (uint64_t)a;
    *bytes = hb + ((h.payload_bytes + 4095ull) & ~4095ull);
    if (last)
        *last = (uint64_t)a + hb + h.payload_bytes - 1;
}

/* Copy bytes [from, from + n) of file name over [to, to + n). */
static void copy_within(sb_io *io, const char *name, uint64_t from, uint64_t to, uint64_t n)
{
    int fd = sb_io_open(io, name, 0);
    assert_true(fd >= 0);
    uint8_t *buf = malloc(n);
    assert_non_null(buf);
    assert_int_equal(sb_io_pread(io, fd, buf, n, from), (int64_t)n);
    assert_int_equal(sb_io_pwrite(io, fd, buf, n, to), (int64_t)n);
    assert_int_equal(sb_io_fdatasync(io, fd), 0);
    sb_io_close(io, fd);
    free(buf);
}

/* sb_match_load reads the pages and the point state together: the point's
 * record follows the last page's, so the whole match is one read; the
 * restore and the point that follow read nothing more. */
static void test_pool_load_with_point(void **state)
{
    (void)state;
    sb_io *io;
    sb_config c;
    uint32_t tok[CO_LEN];
    world(&io, &c, tok, CO_LEN, 0, true);
    sb_store *st = mem_open(io, &c);
    sb_ns *ns = tu_ns(st, &LP, "c");
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, tok, CO_LEN, &m), SB_OK);
    /* Its refusals change nothing. */
    assert_int_equal(sb_match_load(NULL, 0, 0), SB_ERR_INVAL);
    assert_int_equal(sb_match_load(m, CO_PAGES + 1, 0), SB_ERR_RANGE);
    assert_int_equal(sb_match_load(m, CO_PAGES - 1, 1), SB_ERR_NO_POINT);
    sb_stats s0 = tu_stats(st);
    assert_int_equal(s0.disk_read_ios, 0);
    assert_int_equal(sb_match_load(m, CO_PAGES, 1), SB_OK);
    sb_stats s1 = tu_stats(st);
    assert_int_equal(s1.disk_read_ios, 1);
    sb_match_info info;
    assert_int_equal(sb_match_get_info(m, &info), SB_OK);
    assert_int_equal(info.n_tokens, CO_LEN);
    assert_int_equal(info.n_pages_disk, 0);
    assert_true(info.has_point);
    void **bufs = tu_bufs(&LP, CO_LEN);
    uint8_t pt[64];
    assert_int_equal(sb_match_restore(m, CO_LEN, bufs, pt), SB_OK);
    assert_true(tu_state_equal(&LP, tok, CO_LEN, bufs));
    void *want = tu_point(&LP, tok, CO_LEN);
    assert_memory_equal(pt, want, LP.point_bytes);
    assert_memory_equal(sb_match_point(m), want, LP.point_bytes);
    free(want);
    tu_free_state(&LP, bufs);
    sb_stats s2 = tu_stats(st);
    assert_int_equal(s2.disk_read_ios, s1.disk_read_ios); /* nothing more read */
    sb_match_release(m);
    tu_check(st);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
}

/* The point state's record damaged, read in the same read as the pages: it
 * alone is the miss (the layout does not require points): every page is
 * served, bit-exact, and the point is gone. */
static void test_pool_load_bad_point(void **state)
{
    (void)state;
    sb_io *io;
    sb_config c;
    uint32_t tok[CO_LEN];
    world(&io, &c, tok, CO_LEN, 0, true);
    uint32_t hb = 0;
    long at = record_at(io, "seg-00000001.dat", SB_REC_POINT, CO_LEN, &hb);
    assert_true(at >= 0);
    flip(io, "seg-00000001.dat", (uint64_t)at + hb + 3);
    sb_store *st = mem_open(io, &c);
    sb_ns *ns = tu_ns(st, &LP, "c");
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, tok, CO_LEN, &m), SB_OK);
    assert_int_equal(sb_match_load(m, CO_PAGES, 1), SB_ERR_CORRUPT);
    sb_match_info info;
    assert_int_equal(sb_match_get_info(m, &info), SB_OK);
    assert_int_equal(info.n_tokens, CO_LEN);
    assert_int_equal(info.n_pages_disk, 0);
    assert_false(info.has_point);
    assert_int_equal(info.miss, SB_MISS_CORRUPT);
    assert_null(sb_match_point(m));
    void **bufs = tu_bufs(&LP, CO_LEN);
    assert_int_equal(sb_match_restore(m, CO_LEN, bufs, NULL), SB_OK);
    assert_true(tu_state_equal(&LP, tok, CO_LEN, bufs));
    tu_free_state(&LP, bufs);
    sb_match_release(m);
    sb_stats s = tu_stats(st);
    assert_int_equal(s.disk_checksum_failures, 1);
    assert_int_equal(s.disk_read_ios, 1);
    tu_check(st);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
}

/* How a record of a coalesced run is damaged. */
enum damage { DMG_HEAD, DMG_PAYLOAD, DMG_MOVED, DMG_CUT };

/* BIG_PAGES pages of 12 KiB records (head and page): more than one
 * SB_DISK_READ_MAX read. */
enum { BIG_PAGES = 400, BIG_LEN = BIG_PAGES * 8 };

/* Damage record bad of a BIG_PAGES sequence (compression zlevel) one way,
 * then restore it all: the restore is the miss at exactly that record --
 * the records before it served bit-exact, nothing of it or after it -- as
 * when every record had its own read. */
static void damage_round(uint32_t zlevel, uint32_t bad, enum damage how)
{
    sb_io *io;
    sb_config c;
    static uint32_t tok[BIG_LEN];
    world(&io, &c, tok, BIG_LEN, zlevel, false);
    const char *seg = "seg-00000001.dat";
    uint64_t at, bytes, last;
    page_record_span(io, bad * 8, &at, &bytes, &last);
    if (how == DMG_HEAD) {
        flip(io, seg, at + 200); /* the head's token list */
    } else if (how == DMG_PAYLOAD) {
        flip(io, seg, last); /* the payload's last byte */
    } else if (how == DMG_MOVED) {
        uint64_t at2, bytes2; /* the next record, whole, in its place */
        page_record_span(io, (bad + 1) * 8, &at2, &bytes2, NULL);
        copy_within(io, seg, at2, at, bytes2 < bytes ? bytes2 : bytes);
    }
    sb_store *st = mem_open(io, &c);
    sb_ns *ns = tu_ns(st, &LP, "c");
    if (how == DMG_CUT) { /* the file ends inside the record (after open) */
        int fd = sb_io_open(io, seg, 0);
        assert_true(fd >= 0);
        assert_int_equal(io->ops->truncate(io, fd, at + bytes / 2), 0);
        sb_io_close(io, fd);
    }
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, tok, BIG_LEN, &m), SB_OK);
    void **bufs = tu_bufs(&LP, BIG_LEN);
    assert_int_equal(sb_match_restore(m, BIG_LEN, bufs, NULL), SB_ERR_CORRUPT);
    sb_match_info info;
    assert_int_equal(sb_match_get_info(m, &info), SB_OK);
    assert_int_equal(info.n_tokens, bad * 8);
    assert_int_equal(info.n_pages, bad);
    assert_int_equal(info.miss, SB_MISS_CORRUPT);
    assert_true(tu_state_equal(&LP, tok, bad * 8, bufs));
    /* Past the miss the bytes are unspecified, but never wrong: the bad
     * record's region was never written, and every later region is either
     * untouched or exactly its state (good records of the same reads). */
    void **want = tu_state(&LP, tok, BIG_LEN);
    for (uint32_t r = bad; r < BIG_PAGES; r++) {
        for (uint32_t t = 0; t < LP.n_tensors; t++) {
            size_t len = 8 * (size_t)LP.bpt[t], off = (size_t)r * len;
            const uint8_t *got = (const uint8_t *)bufs[t] + off;
            bool zero = true;
            for (size_t i = 0; i < len && zero; i++)
                zero = got[i] == 0;
            assert_true(zero || (r != bad && !memcmp(got, (uint8_t *)want[t] + off, len)));
        }
    }
    tu_free_state(&LP, want);
    tu_free_state(&LP, bufs);
    sb_match_release(m);
    sb_stats s = tu_stats(st);
    assert_int_equal(s.disk_checksum_failures, 1);
    assert_int_equal(s.disk_read_errors, 0);
    if (how != DMG_CUT) /* (a cut read is read again record by record) */
        assert_true(s.disk_read_ios <= 4); /* the 4.7 MiB: two reads */
    /* The bad record left the index with what followed it. */
    assert_int_equal(tu_match_len(ns, tok, BIG_LEN), bad * 8);
    if (bad)
        assert_int_equal(tu_match_verify(ns, &LP, tok, BIG_LEN), bad * 8);
    tu_check(st);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
}

/* Damage anywhere in a coalesced run -- its first record, the middle, the
 * last record of one read and the first of the next, the run's last --
 * and of any kind (head, payload, a record from elsewhere in the segment,
 * the file cut short), compressed or not: caught per record, a miss at
 * exactly that record, never a wrong byte. */
static void test_pool_coalesced_damage_anywhere(void **state)
{
    (void)state;
    /* 12 KiB records: a 4 MiB read holds 341 of them. */
    const uint32_t where[] = { 0, 17, 340, 341, BIG_PAGES - 1 };
    for (size_t i = 0; i < sizeof where / sizeof *where; i++) {
        damage_round(0, where[i], DMG_HEAD);
        damage_round(0, where[i], DMG_PAYLOAD);
        if (where[i] + 1 < BIG_PAGES) /* (the next record copied over it) */
            damage_round(0, where[i], DMG_MOVED);
    }
    damage_round(0, 200, DMG_CUT);
    damage_round(3, 17, DMG_PAYLOAD);
    damage_round(3, 341, DMG_HEAD);
}

/* Chunks: n slots of 192 KiB (a page of 16 tokens of 12 KiB) split into
 * equal chunks of whole huge pages; the plan fills the last huge page. */
static void test_pool_chunks_whole_huge_pages(void **state)
{
    (void)state;
    enum { STRIDE = 192 << 10, HUGE = 2 << 20 };
    sb_mem mem;
    assert_int_equal(sb_mem_init(&mem, 0), SB_OK);
    sb_pool p;
    sb_pool_init(&p);
    sb_pool_cls *c = sb_pool_class(&p, &mem, STRIDE, 4096, STRIDE, true);
    assert_non_null(c);
    /* 512 slots: 170 fit in SB_POOL_CHUNK_MAX, so 4 chunks of 128, each
     * 24 MiB, no slack; 171: 2 chunks of 86 and 85, each rounded up to
     * whole huge pages (slack under an eighth); 5: 960 KiB, under a huge
     * page: 4 KiB pages, no slack. */
    const size_t ns[] = { 512, 171, 5 };
    for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
        size_t n = ns[t];
        sb_pbuf *out = calloc(n, sizeof *out);
        assert_non_null(out);
        assert_int_equal(sb_pool_grow(&mem, c, n, out), SB_OK);
        size_t chunks = 0, slots = 0, first = 0;
        for (size_t i = 0; i < n; i++) {
            if (i && out[i].chunk == out[i - 1].chunk)
                continue;
            sb_chunk *k = out[i].chunk;
            size_t used = (size_t)k->n_slots * STRIDE;
            assert_true(k->map_bytes >= used);
            if (used >= HUGE) {
                assert_int_equal(k->map_bytes % HUGE, 0);
                assert_int_equal((uintptr_t)k->base % HUGE, 0);
                assert_true(k->map_bytes - used <= used / 8);
            } else {
                assert_int_equal(k->map_bytes, used);
            }
            if (!chunks)
                first = k->n_slots;
            assert_true(k->n_slots == first || k->n_slots + 1 == first); /* equal */
            chunks++;
            slots += k->n_slots;
            memset(out[i].data, 0xA5, used); /* the whole chunk is ours */
        }
        assert_int_equal(slots, n);
        assert_int_equal(chunks, n == 512 ? 4 : n == 171 ? 2 : 1);
        sb_pool_unmap(out, n);
        free(out);
    }
    /* The plan: a class of 11 slots asks for 11 more (2 MiB + 64 KiB),
     * filled to the end of the second huge page: 21 slots (4,032 KiB). */
    c->n_slots = 11;
    assert_int_equal(sb_pool_plan(c, 1), 21);
    c->n_slots = 0;
    assert_int_equal(sb_pool_plan(c, 3), 3); /* under a huge page: as asked */
    sb_pool_fini(&p);
    sb_mem_fini(&mem);
}

/* The record heads of a restore land in the disk tier's scratch, which
 * sb_ns_prefault makes ready and restores reuse (no fresh memory touched
 * for them); a restore whose heads exceed SB_DISK_HEADS_KEEP takes a
 * buffer of its own and is as exact. */
static void test_pool_heads_scratch(void **state)
{
    (void)state;
    enum { PAGES = SB_DISK_HEADS_KEEP / 4096 + 60, LEN = PAGES * 8 };
    sb_io *io;
    sb_config c;
    uint32_t *tok = malloc(LEN * sizeof *tok);
    assert_non_null(tok);
    world(&io, &c, tok, LEN, 0, false);
    sb_store *st = mem_open(io, &c);
    sb_ns *ns = tu_ns(st, &LP, "c");
    sb_disk *d = sb_disk_of(st);
    assert_null(d->rd_heads);
    size_t ready = 0;
    assert_int_equal(sb_ns_prefault(ns, 64, &ready), SB_OK);
    assert_int_equal(ready, 64);
    assert_non_null(d->rd_heads);
    /* 64 pages and a point, in whole huge pages */
    assert_true(d->rd_heads_cap >= 65 * 4096);
    assert_int_equal(d->rd_heads_cap % (2u << 20), 0);
    size_t cap = d->rd_heads_cap;
    uint8_t *heads = d->rd_heads;
    restore_exact(ns, &LP, tok, 64 * 8, false, false); /* its heads fit */
    assert_ptr_equal(d->rd_heads, heads);
    assert_int_equal(d->rd_heads_cap, cap);
    restore_exact(ns, &LP, tok, LEN, false, true); /* beyond the scratch's cap */
    assert_true(d->rd_heads_cap <= SB_DISK_HEADS_KEEP);
    sb_stats s = tu_stats(st);
    assert_int_equal(s.disk_checksum_failures, 0);
    tu_check(st);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
    free(tok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_spares_recycled),
        cmocka_unit_test(test_pool_spares_give_way),
        cmocka_unit_test(test_pool_eviction_recycles),
        cmocka_unit_test(test_pool_prefault),
        cmocka_unit_test(test_pool_check_sees_spare_drift),
        cmocka_unit_test(test_pool_restore_no_stale_bytes),
        cmocka_unit_test(test_pool_coalesced_reads),
        cmocka_unit_test(test_pool_coalesced_bad_record),
        cmocka_unit_test(test_pool_coalesced_read_error),
        cmocka_unit_test(test_pool_load_with_point),
        cmocka_unit_test(test_pool_load_bad_point),
        cmocka_unit_test(test_pool_coalesced_damage_anywhere),
        cmocka_unit_test(test_pool_chunks_whole_huge_pages),
        cmocka_unit_test(test_pool_heads_scratch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
