/* Description: asynchronous loads (sb_match_load_start, sb_load_poll,
 * sb_load_wait, sb_load_fd, sb_load_cancel, sb_load_free). On the
 * in-memory file system, a 200-page sequence is put, the store reopened
 * (every page on disk only) and its match loaded in the background:
 * - a load held by the test hook after its first run of 64 pages: those
 *   pages restore beside it (byte for byte), a call that needs more is
 *   SB_ERR_BUSY, poll and a timed wait say pending, the descriptor is not
 *   readable; let go, the load ends SB_OK, the descriptor is readable and
 *   every page is resident;
 * - a cancel ends it SB_ERR_CANCELED with the first run resident, and a
 *   restore then reads the rest itself;
 * - a damaged record (a payload byte flipped on the in-memory file
 *   system) shrinks the match exactly as the blocking sb_match_load does;
 *   an I/O error in the middle of a load (the I/O fault backend) ends it
 *   by the same rule;
 * - a release while the load runs cancels it and waits;
 * - loads on four threads at once, each restoring its growing prefix as it
 *   arrives (run under TSan in CI);
 * - a RAM-only store's load is done at the start; argument refusals;
 *   allocation failure starts nothing. */
#include <stdio.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "io.h"
#include "match.h"
#include "tu_io.h"

#define PT 16u
#define NPAGES 200u
#define NTOK (NPAGES * PT)
#define RUN 64u /* aload.c's run of pages for this page size */

static const tu_layout LAY = { .page_tokens = PT, .n_tensors = 4, .bpt = { 64, 64, 64, 64 },
                               .point_bytes = 40, .model = "aload" };

static sb_config disk_config(void)
{
    sb_config c = tu_small_disk_config();
    c.segment_bytes = 1 << 20;
    c.ram_bytes = 64 << 20;
    c.max_seq_tokens = NTOK;
    return c;
}

/* A store on io holding sequences 1..n_seq of NTOK tokens (with a point
 * state at the end), reopened so every page is on disk only. */
static sb_store *stored(sb_io *io, int n_seq)
{
    sb_config c = disk_config();
    sb_store *st = tu_open_io(&c, io);
    sb_ns *ns = tu_ns(st, &LAY, "s");
    uint32_t *tok = malloc(NTOK * sizeof *tok);
    for (int s = 1; s <= n_seq; s++) {
        tu_seq(tok, NTOK, (uint32_t)s, 100000u);
        tu_put(ns, &LAY, tok, NTOK, true, SB_OK);
    }
    free(tok);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    return tu_open_io(&c, io);
}

static sb_match *match_seq(sb_ns *ns, uint32_t *tok, uint32_t s)
{
    tu_seq(tok, NTOK, s, 100000u);
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, tok, NTOK, &m), SB_OK);
    sb_match_info info;
    assert_int_equal(sb_match_get_info(m, &info), SB_OK);
    assert_int_equal(info.n_tokens, NTOK);
    assert_int_equal(info.n_pages_disk, NPAGES);
    return m;
}

static sb_match *match_any(sb_ns *ns, const uint32_t *tok)
{
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, tok, NTOK, &m), SB_OK);
    return m;
}

/* Restore tokens [0, n) of m and check them. Returns the call's code. */
static int restore_check(sb_match *m, const uint32_t *tok, size_t n)
{
    void **bufs = tu_bufs(&LAY, n ? n : 1);
    int rc = sb_match_restore(m, n, bufs, NULL);
    if (rc == SB_OK)
        assert_true(tu_state_equal(&LAY, tok, n, bufs));
    tu_free_state(&LAY, bufs);
    return rc;
}

static bool readable(int fd)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };
    return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* The hook: the loader stops before the run that starts at page `at`
 * until the test lets it go. */
typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t at;
    bool arrived, open;
} gate;

static void gate_hook(void *ctx, size_t ready)
{
    gate *g = ctx;
    pthread_mutex_lock(&g->mu);
    if (ready == g->at) {
        g->arrived = true;
        pthread_cond_broadcast(&g->cv);
        while (!g->open)
            pthread_cond_wait(&g->cv, &g->mu);
    }
    pthread_mutex_unlock(&g->mu);
}

static void gate_init(gate *g, size_t at)
{
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->at = at;
    g->arrived = g->open = false;
}

static void gate_arrival(gate *g)
{
    pthread_mutex_lock(&g->mu);
    while (!g->arrived)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static void gate_open(gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = true;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* A reopened store's match of sequence 1, every page on disk, with the
 * loader hook stopping a load at the run after the first. */
typedef struct held {
    sb_io *io;
    sb_store *st;
    sb_ns *ns;
    uint32_t *tok;
    sb_match *m;               /* NULL once the test released it */
    gate g;
} held;

static void held_open(held *h)
{
    h->io = tu_mem_fs();
    h->st = stored(h->io, 1);
    h->ns = tu_ns(h->st, &LAY, "s");
    h->tok = malloc(NTOK * sizeof *h->tok);
    h->m = match_seq(h->ns, h->tok, 1);
    gate_init(&h->g, RUN);
    sb_load_hook(h->st, gate_hook, &h->g);
}

/* Start the load of every page (and the point, with point) and return it
 * once the hook holds it, the first run resident. */
static sb_load *held_load(held *h, int point)
{
    sb_load *ld = NULL;
    assert_int_equal(sb_match_load_start(h->m, NPAGES, point, &ld), SB_OK);
    gate_arrival(&h->g);
    return ld;
}

static void held_close(held *h)
{
    sb_load_hook(h->st, NULL, NULL);
    sb_match_release(h->m);
    tu_check(h->st);
    sb_ns_close(h->ns);
    assert_int_equal(sb_store_close(h->st), SB_OK);
    sb_io_destroy(h->io);
    free(h->tok);
}

static void test_aload_beside(void **state)
{
    (void)state;
    held h;
    held_open(&h);
    sb_match *m = h.m;
    uint32_t *tok = h.tok;
    sb_load *ld = held_load(&h, 1);
    int fd = sb_load_fd(ld);
    assert_true(fd >= 0);
    size_t ready = 0;
    assert_int_equal(sb_load_wait(ld, RUN, -1, &ready), SB_OK);
    assert_int_equal(ready, RUN);

    /* Beside the held load. */
    assert_int_equal(sb_load_poll(ld, &ready), SB_ERR_PENDING);
    assert_int_equal(ready, RUN);
    assert_int_equal(sb_load_wait(ld, NPAGES, 20, &ready), SB_ERR_PENDING);
    assert_false(readable(fd));
    assert_int_equal(restore_check(m, tok, RUN * PT), SB_OK);
    assert_int_equal(restore_check(m, tok, RUN * PT - 5), SB_OK);
    assert_int_equal(restore_check(m, tok, RUN * PT + 1), SB_ERR_BUSY);
    void **bufs = tu_bufs(&LAY, NTOK);
    uint8_t point[40];
    assert_int_equal(sb_match_restore(m, NTOK, bufs, point), SB_ERR_BUSY);
    sb_block_table bt[4];
    for (uint32_t t = 0; t < 4; t++)
        bt[t] = (sb_block_table){ .base = bufs[t], .token_stride = 64 };
    assert_int_equal(sb_match_restore_blocks(m, 100, RUN * PT - 100, 1, 3, bt + 1), SB_OK);
    assert_int_equal(sb_match_restore_blocks(m, 100, RUN * PT - 99, 0, 4, bt), SB_ERR_BUSY);
    sb_page *pg[RUN + 1];
    assert_int_equal(sb_match_pages(m, 0, RUN, pg), SB_OK);
    for (size_t i = 0; i < RUN; i++)
        sb_page_unref(pg[i]);
    assert_int_equal(sb_match_pages(m, RUN, 1, pg), SB_ERR_BUSY);
    assert_null(sb_match_point(m));
    assert_int_equal(sb_match_load(m, 1, 0), SB_ERR_BUSY);
    sb_load *two = NULL;
    assert_int_equal(sb_match_load_start(m, 1, 0, &two), SB_ERR_BUSY);
    assert_null(two);
    sb_match_info info;
    assert_int_equal(sb_match_get_info(m, &info), SB_OK);
    assert_int_equal(info.n_pages_disk, NPAGES - RUN);

    gate_open(&h.g);
    assert_int_equal(sb_load_wait(ld, SIZE_MAX, -1, &ready), SB_OK);
    assert_int_equal(ready, NPAGES);
    assert_true(readable(fd));
    assert_int_equal(sb_load_poll(ld, NULL), SB_OK);
    sb_load_free(ld);
    assert_int_equal(sb_match_get_info(m, &info), SB_OK);
    assert_int_equal(info.n_pages_disk, 0);
    assert_int_equal(sb_match_restore(m, NTOK, bufs, point), SB_OK);
    assert_true(tu_state_equal(&LAY, tok, NTOK, bufs));
    void *want = tu_point(&LAY, tok, NTOK);
    assert_memory_equal(point, want, 40);
    free(want);
    tu_free_state(&LAY, bufs);
    held_close(&h);
}

static void test_aload_cancel(void **state)
{
    (void)state;
    held h;
    held_open(&h);
    sb_load *ld = held_load(&h, 0);
    sb_load_cancel(ld);
    sb_load_cancel(ld); /* twice is once */
    gate_open(&h.g);
    size_t ready = 0;
    assert_int_equal(sb_load_wait(ld, SIZE_MAX, -1, &ready), SB_ERR_CANCELED);
    assert_int_equal(ready, RUN);
    assert_true(readable(sb_load_fd(ld))); /* made after the end: readable */
    /* A prefix it made resident is there whatever the end. */
    assert_int_equal(sb_load_wait(ld, RUN, 0, NULL), SB_OK);
    assert_int_equal(sb_load_wait(ld, RUN + 1, 0, NULL), SB_ERR_CANCELED);
    sb_load_free(ld);
    sb_match_info info;
    assert_int_equal(sb_match_get_info(h.m, &info), SB_OK);
    assert_int_equal(info.n_pages_disk, NPAGES - RUN);
    assert_int_equal(restore_check(h.m, h.tok, NTOK), SB_OK); /* reads the rest */
    held_close(&h);
}

/* Flip a payload byte of the record of page `page` of sequence 1 in the
 * segment files on io (the store closed): a record that fails its
 * checksum at every read. */
static void damage_page(sb_io *io, uint32_t page)
{
    for (uint32_t id = 1; id < 64; id++) {
        char name[40];
        snprintf(name, sizeof name, "seg-%08u.dat", id);
        int fd = sb_io_open(io, name, 0);
        if (fd < 0)
            continue;
        uint64_t size = 0;
        assert_int_equal(io->ops->size(io, fd, &size), 0);
        uint8_t *buf = malloc(size);
        assert_int_equal(sb_io_pread(io, fd, buf, size, 0), (int64_t)size);
        for (uint64_t at = 0; at + 128 <= size; at += 4096) {
            uint32_t magic, pos, head;
            memcpy(&magic, buf + at, 4);
            memcpy(&pos, buf + at + 64, 4);
            memcpy(&head, buf + at + 72, 4);
            if (magic != 0x43524253u || buf[at + 6] != 2 || pos != page * PT)
                continue;
            uint8_t byte = buf[at + head + 100] ^ 0x5a;
            assert_int_equal(sb_io_pwrite(io, fd, &byte, 1, at + head + 100), 1);
            assert_int_equal(sb_io_fdatasync(io, fd), 0);
            sb_io_close(io, fd);
            free(buf);
            return;
        }
        sb_io_close(io, fd);
        free(buf);
    }
    fail_msg("no record of page %u", page);
}

/* The match after a load of every page, blocking or not, in a reopened
 * store. */
static sb_match_info loaded(sb_io *io, bool async, int *rc)
{
    sb_config c = disk_config();
    sb_store *st = tu_open_io(&c, io);
    sb_ns *ns = tu_ns(st, &LAY, "s");
    uint32_t *tok = malloc(NTOK * sizeof *tok);
    sb_match *m = match_seq(ns, tok, 1);
    if (async) {
        sb_load *ld = NULL;
        assert_int_equal(sb_match_load_start(m, NPAGES, 1, &ld), SB_OK);
        *rc = sb_load_wait(ld, SIZE_MAX, -1, NULL);
        sb_load_free(ld);
    } else {
        *rc = sb_match_load(m, NPAGES, 1);
    }
    sb_match_info info;
    assert_int_equal(sb_match_get_info(m, &info), SB_OK);
    assert_int_equal(restore_check(m, tok, info.n_tokens), SB_OK);
    sb_match_release(m);
    sb_ns_close(ns);
    sb_store_close(st);
    free(tok);
    return info;
}

static void test_aload_damaged(void **state)
{
    (void)state;
    uint32_t pages[] = { 0, 70, 150 };
    for (size_t i = 0; i < sizeof pages / sizeof *pages; i++) {
        sb_io *io = tu_mem_fs();
        sb_store_close(stored(io, 1));
        damage_page(io, pages[i]);
        int rc_block, rc_async;
        sb_match_info b = loaded(io, false, &rc_block);
        sb_match_info a = loaded(io, true, &rc_async);
        print_message("page %u damaged: blocking %s, L %zu; async %s, L %zu\n", pages[i],
                      sb_strerror(rc_block), b.n_tokens, sb_strerror(rc_async), a.n_tokens);
        assert_int_equal(rc_block, SB_ERR_CORRUPT);
        assert_int_equal(rc_async, SB_ERR_CORRUPT);
        assert_int_equal(b.n_tokens, (size_t)pages[i] * PT);
        assert_int_equal(a.n_tokens, b.n_tokens);
        assert_int_equal(a.n_pages, b.n_pages);
        assert_int_equal(a.miss, SB_MISS_CORRUPT);
        assert_int_equal(b.miss, SB_MISS_CORRUPT);
        assert_int_equal(a.has_point, 0);
        assert_int_equal(b.has_point, 0);
        assert_int_equal(a.n_pages_disk, 0);
        sb_io_destroy(io);
    }
}

/* An I/O error in the middle of a load (the mem backend's fault, armed
 * while the hook holds the load after its first run, so it hits the next
 * run's first read): the disk tier reads a failed read of several records
 * again record by record, and a record whose own read fails is an I/O
 * error. Either way the load ends by the blocking load's rule: SB_OK with
 * every page resident, or SB_ERR_IO with the match shrunk to the pages
 * before the failed one (at least the first run), all resident, and every
 * byte of what it holds right. */
static void test_aload_io_fault(void **state)
{
    (void)state;
    held h;
    held_open(&h);
    sb_load *ld = held_load(&h, 0);
    uint64_t ops = sb_io_mem_ops_count(h.io);
    sb_io_mem_fail_at(h.io, 1, -EIO);
    gate_open(&h.g);
    size_t ready = 0;
    int rc = sb_load_wait(ld, SIZE_MAX, -1, &ready);
    sb_load_free(ld);
    sb_io_mem_fail_at(h.io, 0, 0);
    ops = sb_io_mem_ops_count(h.io) - ops;
    sb_match_info info;
    assert_int_equal(sb_match_get_info(h.m, &info), SB_OK);
    print_message("a read failing after %u pages: %s after %llu operations, L %zu\n", RUN,
                  sb_strerror(rc), (unsigned long long)ops, info.n_tokens);
    assert_true(ops >= 1); /* the fault was met */
    assert_true(rc == SB_OK || rc == SB_ERR_IO);
    if (rc == SB_OK) {
        assert_int_equal(info.n_tokens, NTOK);
    } else {
        assert_int_equal(info.miss, SB_MISS_IO);
        assert_true(info.n_tokens >= RUN * PT && info.n_tokens < NTOK);
        assert_int_equal(info.n_tokens % PT, 0);
    }
    assert_int_equal(ready, info.n_pages);
    assert_int_equal(info.n_pages_disk, 0);
    assert_int_equal(restore_check(h.m, h.tok, info.n_tokens), SB_OK);
    held_close(&h);
}

typedef struct releaser {
    sb_match *m;
} releaser;

static void *release_main(void *arg)
{
    sb_match_release(((releaser *)arg)->m);
    return NULL;
}

static void test_aload_release_running(void **state)
{
    (void)state;
    held h;
    held_open(&h);
    sb_load *ld = held_load(&h, 0);
    releaser r = { h.m };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, release_main, &r), 0);
    gate_open(&h.g);
    pthread_join(th, NULL);
    size_t ready = 0;
    int rc = sb_load_poll(ld, &ready);
    assert_true(rc == SB_ERR_CANCELED || rc == SB_OK); /* the release may come after the end */
    assert_true(ready >= RUN);
    sb_load_free(ld);
    /* Nothing pinned: the pages still on disk only count as pinned. */
    h.m = match_any(h.ns, h.tok);
    sb_match_info info;
    assert_int_equal(sb_match_get_info(h.m, &info), SB_OK);
    assert_int_equal(tu_stats(h.st).pinned_pages, info.n_pages);
    assert_true(info.n_pages_disk <= NPAGES - RUN);
    held_close(&h);
}

typedef struct worker {
    sb_ns *ns;
    uint32_t seed;
    int steps;                 /* restores made beside the load */
} worker;

static void *worker_main(void *arg)
{
    worker *w = arg;
    uint32_t *tok = malloc(NTOK * sizeof *tok);
    sb_match *m = match_seq(w->ns, tok, w->seed);
    sb_load *ld = NULL;
    assert_int_equal(sb_match_load_start(m, NPAGES, 1, &ld), SB_OK);
    size_t have = 0, ready = 0;
    int rc;
    while ((rc = sb_load_wait(ld, have + 1, -1, &ready)) == SB_OK && have < NPAGES) {
        assert_true(ready > have);
        have = ready;
        assert_int_equal(restore_check(m, tok, have * PT), SB_OK);
        w->steps++;
    }
    assert_int_equal(sb_load_wait(ld, SIZE_MAX, -1, &ready), SB_OK);
    assert_int_equal(ready, NPAGES);
    sb_load_free(ld);
    assert_non_null(sb_match_point(m));
    sb_match_release(m);
    free(tok);
    return NULL;
}

static void test_aload_threads(void **state)
{
    (void)state;
    sb_io *io = tu_mem_fs();
    sb_store *st = stored(io, 4);
    sb_ns *ns = tu_ns(st, &LAY, "s");
    worker w[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (worker){ ns, (uint32_t)i + 1, 0 };
        assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_true(w[i].steps >= 1);
    }
    tu_check(st);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    sb_io_destroy(io);
}

static void test_aload_ram_and_refusals(void **state)
{
    (void)state;
    sb_store *st = tu_store(0);
    sb_ns *ns = tu_ns(st, &LAY, "s");
    uint32_t tok[100];
    tu_seq(tok, 100, 9, 100000u);
    tu_put(ns, &LAY, tok, 100, true, SB_OK);
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, tok, 100, &m), SB_OK);
    sb_load *ld = (sb_load *)&ld;
    assert_int_equal(sb_match_load_start(NULL, 1, 0, &ld), SB_ERR_INVAL);
    assert_null(ld);
    assert_int_equal(sb_match_load_start(m, 1, 0, NULL), SB_ERR_INVAL);
    assert_int_equal(sb_match_load_start(m, 8, 0, &ld), SB_ERR_RANGE);
    assert_int_equal(sb_match_load_start(m, 6, 1, &ld), SB_ERR_NO_POINT);
    assert_int_equal(sb_load_poll(NULL, NULL), SB_ERR_INVAL);
    assert_int_equal(sb_load_wait(NULL, 1, 0, NULL), SB_ERR_INVAL);
    assert_int_equal(sb_load_fd(NULL), SB_ERR_INVAL);
    sb_load_cancel(NULL);
    sb_load_free(NULL);
    /* Allocation failure: nothing started. */
    assert_int_equal(sb_store_fault_alloc(st, 1), SB_OK);
    assert_int_equal(sb_match_load_start(m, 7, 1, &ld), SB_ERR_NOMEM);
    assert_int_equal(sb_store_fault_alloc(st, 0), SB_OK);
    assert_null(ld);
    /* RAM only: done at the start, nothing queued. */
    assert_int_equal(sb_match_load_start(m, 7, 1, &ld), SB_OK);
    size_t ready = 0;
    assert_int_equal(sb_load_poll(ld, &ready), SB_OK);
    assert_int_equal(ready, 7);
    assert_true(readable(sb_load_fd(ld)));
    sb_load_cancel(ld); /* after the end: changes nothing */
    assert_int_equal(sb_load_wait(ld, SIZE_MAX, -1, NULL), SB_OK);
    sb_load_free(ld);
    /* A load of no pages and no point is done too. */
    assert_int_equal(sb_match_load_start(m, 0, 0, &ld), SB_OK);
    assert_int_equal(sb_load_poll(ld, &ready), SB_OK);
    assert_int_equal(ready, 0);
    sb_load_free(ld);
    sb_match_release(m);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    assert_string_equal(sb_strerror(SB_ERR_BUSY),
                        "the match is loading: what the call needs is not resident yet");
    assert_string_equal(sb_strerror(SB_ERR_CANCELED), "the load was canceled before it finished");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_aload_beside),
        cmocka_unit_test(test_aload_cancel),
        cmocka_unit_test(test_aload_damaged),
        cmocka_unit_test(test_aload_io_fault),
        cmocka_unit_test(test_aload_release_running),
        cmocka_unit_test(test_aload_threads),
        cmocka_unit_test(test_aload_ram_and_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
