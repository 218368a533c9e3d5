/* test_nospc.c -- the disk tier on a real file system that runs out of
 * space: a small tmpfs mounted in a private mount namespace.
 *
 * Description: the process enters a mount namespace of its own
 * (unshare(CLONE_NEWNS), mounts private) and mounts an 8 MiB tmpfs; where
 * that is refused (no CAP_SYS_ADMIN, a container without it) the test is
 * skipped with a message. A filler file takes 3 MiB; the store gets the
 * rest, with a cap far above it and no free-space floor, so the file
 * system itself says ENOSPC. Sequences are put and flushed until a flush
 * reports SB_ERR_NOSPC; then:
 *   - disk_nospc and capacity denials count it, and every sequence put so
 *     far restores bit-exact (RAM serves what the disk could not take);
 *   - sb_store_check passes: the store is consistent;
 *   - the filler is deleted, the store clock moves on a second, and a new
 *     sequence is written to disk (disk_pages grows);
 *   - after a close and a reopen, that sequence restores from disk, and
 *     every other sequence restores bit-exact for whatever it has.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

static char g_mnt[128];
static bool g_mounted;
static _Atomic uint64_t g_now = 1000000000ull; /* the writer reads it too */

static int setup(void **state)
{
    (void)state;
    tu_scratch_dir(g_mnt, sizeof g_mnt, "nospc");
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("snapbank-nospc", g_mnt, "tmpfs", 0, "size=8m") != 0) {
        fprintf(stderr, "test_nospc: skipped: cannot mount a tmpfs in a private mount "
                        "namespace here (%s)\n",
                strerror(errno));
        return 0;
    }
    g_mounted = true;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (g_mounted)
        umount2(g_mnt, MNT_DETACH);
    rmdir(g_mnt);
    return 0;
}

/* 16 tokens x 4 KiB: 64 KiB pages. */
static const tu_layout L = { .page_tokens = 16, .n_tensors = 1, .bpt = { 4096 },
                             .model = "nospc" };

static sb_store *open_store(const char *dir)
{
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.dir = dir;
    cfg.min_prefix_tokens = 1;
    cfg.ram_bytes = 64u << 20;
    cfg.segment_bytes = 1u << 20;
    cfg.disk_bytes = 64u << 20;     /* not what stops it */
    cfg.disk_free_floor_bytes = 0;  /* nor this: ENOSPC itself */
    cfg.clock_ns = tu_fake_clock;
    cfg.clock_ctx = &g_now;
    sb_store *st = NULL;
    assert_int_equal(sb_store_open(&cfg, &st), SB_OK);
    return st;
}

static void fill_file(const char *path, size_t bytes)
{
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
    assert_true(fd >= 0);
    static char chunk[1 << 16];
    memset(chunk, 0x5a, sizeof chunk);
    for (size_t done = 0; done < bytes; done += sizeof chunk)
        assert_int_equal(write(fd, chunk, sizeof chunk), (ssize_t)sizeof chunk);
    close(fd);
}

enum { SEQ = 48, MAX_SEQS = 160 };

static void test_nospc_tmpfs(void **state)
{
    (void)state;
    if (!g_mounted)
        skip();
    char dir[192], filler[192];
    snprintf(dir, sizeof dir, "%s/store", g_mnt);
    snprintf(filler, sizeof filler, "%s/filler", g_mnt);
    fill_file(filler, 3u << 20);
    sb_store *st = open_store(dir);
    sb_ns *ns = tu_ns(st, &L, "n");
    static uint32_t tok[MAX_SEQS][SEQ];
    uint64_t rng = 17;
    int n = 0, rc = SB_OK;
    while (n < MAX_SEQS && rc == SB_OK) {
        tu_tokens(&rng, tok[n], SEQ, 1u << 30);
        tu_put(ns, &L, tok[n], SEQ, false, SB_OK);
        n++;
        rc = sb_store_flush(st);
    }
    assert_int_equal(rc, SB_ERR_NOSPC);
    sb_stats s = tu_stats(st);
    print_message("nospc: the file system filled after %d sequences: %llu pages on disk, "
                  "%llu segments, %llu capacity denials, %llu ENOSPC\n",
                  n, (unsigned long long)s.disk_pages, (unsigned long long)s.disk_segments,
                  (unsigned long long)s.disk_denials[SB_DENY_CAPACITY],
                  (unsigned long long)s.disk_nospc);
    assert_true(s.disk_nospc > 0);
    assert_true(s.disk_denials[SB_DENY_CAPACITY] > 0);
    assert_true(s.disk_pages > 0);
    for (int i = 0; i < n; i++) /* RAM serves what the disk did not take */
        assert_int_equal(tu_match_verify(ns, &L, tok[i], SEQ), SEQ);
    tu_check(st);

    /* Space returns; a second later the writer tries again. */
    assert_int_equal(unlink(filler), 0);
    g_now += 2000000000ull;
    uint64_t pages = s.disk_pages;
    uint32_t more[SEQ];
    tu_tokens(&rng, more, SEQ, 1u << 30);
    tu_put(ns, &L, more, SEQ, false, SB_OK);
    rc = sb_store_flush(st); /* may still report the pages denied before */
    assert_true(rc == SB_OK || rc == SB_ERR_NOSPC);
    s = tu_stats(st);
    assert_true(s.disk_pages >= pages + SEQ / 16);
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);

    st = open_store(dir);
    ns = tu_ns(st, &L, "n");
    s = tu_stats(st);
    assert_int_equal(s.recovery_orphans, 0);
    assert_int_equal(tu_match_verify(ns, &L, more, SEQ), SEQ);
    for (int i = 0; i < n; i++) /* bit-exact for whatever reached the disk */
        (void)tu_match_verify(ns, &L, tok[i], SEQ);
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_nospc_tmpfs, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
