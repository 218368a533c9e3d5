/* Description: the disk tier's I/O layer (store/disk/io.h). One contract suite
 * runs against the posix, io_uring and mem backends (posix and io_uring in
 * a fresh directory under /tmp): open/create/excl/rdonly, size, allocate,
 * truncate, rename replacing its target, unlink, list, O_DIRECT multi-iovec
 * round trips with more requests in flight than the ring holds, reap's
 * min/max rules, sync, the advisory lock, errors as negative errno, and
 * directory operations racing the data path from another thread. The mem
 * backend's own suite covers fault injection at every kind of operation,
 * short writes, simulated crashes (keep everything, keep nothing, units
 * never mixed, directory changes, determinism, shared handles), and
 * thousands of seeded write/sync/truncate/fault/crash sequences checked
 * against a shadow model. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#include "io.h"

#define UNIT 4096u
#define FX_DEPTH 8u /* io_uring ring size: small, so tests overrun it */

enum { K_POSIX, K_URING, K_MEM };
static const int kind_posix = K_POSIX, kind_uring = K_URING, kind_mem = K_MEM;

/* One backend under test. */
typedef struct fx {
    int kind;           /* K_* */
    char dir[64];       /* scratch directory (posix, io_uring) */
    sb_io *io;          /* NULL when the backend is unavailable here */
} fx;

/* ---- helpers ------------------------------------------------------------- */

static sb_io *fx_open_io(fx *f)
{
    sb_io *io = NULL;
    int r;
    switch (f->kind) {
    case K_POSIX:
        r = sb_io_posix_new(f->dir, &io);
        break;
    case K_URING:
        r = sb_io_uring_new(f->dir, FX_DEPTH, &io);
        break;
    default:
        r = f->io ? sb_io_mem_share(f->io, &io) : sb_io_mem_new(&io);
        break;
    }
    if (r == -ENOSYS || r == -EPERM)
        return NULL;                /* io_uring disabled on this machine */
    assert_int_equal(r, 0);
    assert_non_null(io);
    return io;
}

static int fx_setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->kind = *(const int *)*state;
    if (f->kind != K_MEM) {
        strcpy(f->dir, "/tmp/sb-io-XXXXXX");
        assert_non_null(mkdtemp(f->dir));
    }
    f->io = fx_open_io(f);
    *state = f;
    return 0;
}

static int fx_teardown(void **state)
{
    fx *f = *state;
    sb_io_destroy(f->io);
    if (f->kind != K_MEM) {
        DIR *d = opendir(f->dir);
        struct dirent *e;
        char path[512];
        while (d && (e = readdir(d))) {
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(path, sizeof path, "%s/%s", f->dir, e->d_name);
                unlink(path);
            }
        }
        if (d)
            closedir(d);
        rmdir(f->dir);
    }
    free(f);
    return 0;
}

static fx *fx_get(void **state)
{
    fx *f = *state;
    if (!f->io)
        skip();
    return f;
}

static uint8_t *abuf(size_t n)
{
    void *p = NULL;
    assert_int_equal(posix_memalign(&p, UNIT, n ? n : UNIT), 0);
    memset(p, 0, n);
    return p;
}

static void fill(uint8_t *p, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = tu_rand(&seed);
        memcpy(p + i, &v, n - i < 8 ? n - i : 8);
    }
}

/* Open name with SB_IO_DIRECT, skipping the test where the file system
 * refuses O_DIRECT (tmpfs before Linux 6.6). */
static int open_direct(fx *f, const char *name)
{
    int fd = sb_io_open(f->io, name, SB_IO_CREATE | SB_IO_DIRECT);
    if (fd == -EINVAL && f->kind != K_MEM)
        skip();
    assert_true(fd >= 0);
    return fd;
}

static int xopen(sb_io *io, const char *name, unsigned flags)
{
    int fd = sb_io_open(io, name, flags);
    assert_true(fd >= 0);
    return fd;
}

static void xwrite(sb_io *io, int fd, const void *buf, size_t len, uint64_t off)
{
    assert_int_equal(sb_io_pwrite(io, fd, buf, len, off), (int64_t)len);
}

static uint64_t xsize(sb_io *io, int fd)
{
    uint64_t n = 0;
    assert_int_equal(io->ops->size(io, fd, &n), 0);
    return n;
}

/* Write a small file name holding s (not synced). */
static void put_file(sb_io *io, const char *name, const char *s)
{
    int fd = xopen(io, name, SB_IO_CREATE);
    assert_int_equal(io->ops->truncate(io, fd, 0), 0);
    xwrite(io, fd, s, strlen(s), 0);
    assert_int_equal(sb_io_close(io, fd), 0);
}

/* True when name holds exactly s. */
static bool file_is(sb_io *io, const char *name, const char *s)
{
    int fd = sb_io_open(io, name, SB_IO_RDONLY);
    if (fd < 0)
        return false;
    char buf[256] = { 0 };
    int64_t n = sb_io_pread(io, fd, buf, sizeof buf - 1, 0);
    assert_int_equal(sb_io_close(io, fd), 0);
    return n == (int64_t)strlen(s) && memcmp(buf, s, strlen(s)) == 0;
}

static bool exists(sb_io *io, const char *name)
{
    int fd = sb_io_open(io, name, SB_IO_RDONLY);
    if (fd == -ENOENT)
        return false;
    assert_true(fd >= 0);
    assert_int_equal(sb_io_close(io, fd), 0);
    return true;
}

/* What sb_io_list reported. */
typedef struct names {
    char v[64][32];
    int n;
} names;

static void names_add(void *ctx, const char *name)
{
    names *l = ctx;
    assert_true(l->n < 64);
    snprintf(l->v[l->n++], sizeof l->v[0], "%s", name);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(a, b);
}

static void list_sorted(sb_io *io, names *l)
{
    memset(l, 0, sizeof *l);
    assert_int_equal(io->ops->list(io, names_add, l), 0);
    qsort(l->v, (size_t)l->n, sizeof l->v[0], cmp_str);
}

/* Reap until every one of n requests came back exactly once. */
static void reap_all(sb_io *io, sb_io_req *reqs, size_t n)
{
    bool *seen = calloc(n, sizeof *seen);
    assert_non_null(seen);
    sb_io_req *done[16];
    for (size_t got = 0; got < n;) {
        int k = sb_io_reap(io, 1, done, 16);
        assert_true(k >= 1 && k <= 16);
        for (int i = 0; i < k; i++) {
            size_t idx = (size_t)(done[i] - reqs);
            assert_true(idx < n);
            assert_false(seen[idx]);
            assert_ptr_equal(done[i]->user, &reqs[idx]);
            seen[idx] = true;
        }
        got += (size_t)k;
    }
    assert_int_equal(io->in_flight, 0);
    free(seen);
}

/* ---- the contract suite (every backend) ------------------------------------ */

static void test_open_flags(void **state)
{
    fx *f = fx_get(state);
    sb_io *io = f->io;
    assert_int_equal(sb_io_open(io, "a", 0), -ENOENT);
    assert_int_equal(sb_io_open(io, "a", SB_IO_RDONLY), -ENOENT);
    assert_int_equal(sb_io_open(io, "a", SB_IO_EXCL), -ENOENT); /* EXCL needs CREATE */
    int fd = xopen(io, "a", SB_IO_CREATE | SB_IO_EXCL);
    assert_int_equal(sb_io_open(io, "a", SB_IO_CREATE | SB_IO_EXCL), -EEXIST);
    int fd2 = xopen(io, "a", 0);
    int fd3 = xopen(io, "a", SB_IO_CREATE);
    xwrite(io, fd, "hello", 5, 0);
    char buf[8] = { 0 };
    assert_int_equal(sb_io_pread(io, fd2, buf, sizeof buf, 0), 5);
    assert_memory_equal(buf, "hello", 5);

    /* Read-only: reads work; writes, allocate and truncate do not (with
     * the errors Linux gives: pwrite and fallocate EBADF, ftruncate EINVAL). */
    int rd = xopen(io, "a", SB_IO_RDONLY);
    assert_int_equal(sb_io_pwrite(io, rd, "x", 1, 0), -EBADF);
    assert_int_equal(io->ops->allocate(io, rd, 8192), -EBADF);
    assert_int_equal(io->ops->allocate(io, rd, 0), -EBADF);
    assert_int_equal(io->ops->truncate(io, rd, 0), -EINVAL);
    memset(buf, 0, sizeof buf);
    assert_int_equal(sb_io_pread(io, rd, buf, 5, 0), 5);
    assert_memory_equal(buf, "hello", 5);
    assert_int_equal(sb_io_fdatasync(io, rd), 0);

    assert_int_equal(sb_io_open(io, "b", 0x100), -EINVAL);
    assert_int_equal(sb_io_close(io, rd), 0);
    assert_int_equal(sb_io_close(io, fd3), 0);
    assert_int_equal(sb_io_close(io, fd2), 0);
    assert_int_equal(sb_io_close(io, fd), 0);
    assert_int_equal(sb_io_close(io, fd), -EBADF);
    assert_int_equal(sb_io_pread(io, fd, buf, 1, 0), -EBADF);
    fd = xopen(io, "a", SB_IO_CREATE);
    assert_int_equal(xsize(io, fd), 5);
    assert_int_equal(sb_io_close(io, fd), 0);
}

static void test_size_allocate_truncate(void **state)
{
    fx *f = fx_get(state);
    sb_io *io = f->io;
    int fd = xopen(io, "s", SB_IO_CREATE);
    assert_int_equal(xsize(io, fd), 0);
    uint8_t data[100], buf[8192];
    fill(data, sizeof data, 1);
    xwrite(io, fd, data, sizeof data, 0);
    assert_int_equal(xsize(io, fd), 100);

    assert_int_equal(io->ops->allocate(io, fd, 1 << 20), 0);
    assert_int_equal(xsize(io, fd), 1 << 20);
    assert_int_equal(sb_io_pread(io, fd, buf, sizeof buf, 0), (int64_t)sizeof buf);
    assert_memory_equal(buf, data, sizeof data);
    for (size_t i = sizeof data; i < sizeof buf; i++)
        assert_int_equal(buf[i], 0);
    assert_int_equal(io->ops->allocate(io, fd, 4096), 0);       /* never shrinks */
    assert_int_equal(xsize(io, fd), 1 << 20);
    assert_int_equal(io->ops->allocate(io, fd, 0), 0);

    assert_int_equal(io->ops->truncate(io, fd, 5000), 0);
    assert_int_equal(xsize(io, fd), 5000);
    assert_int_equal(sb_io_pread(io, fd, buf, sizeof buf, 4096), 904); /* short at EOF */
    assert_int_equal(sb_io_pread(io, fd, buf, sizeof buf, 5000), 0);
    assert_int_equal(io->ops->truncate(io, fd, 10000), 0);      /* grows with zeros */
    assert_int_equal(sb_io_pread(io, fd, buf, 5000, 5000), 5000);
    for (size_t i = 0; i < 5000; i++)
        assert_int_equal(buf[i], 0);
    assert_int_equal(io->ops->truncate(io, fd, 0), 0);
    assert_int_equal(xsize(io, fd), 0);
    assert_int_equal(sb_io_pread(io, fd, buf, 10, 0), 0);
    assert_int_equal(sb_io_close(io, fd), 0);
}

static void test_rename_unlink_list(void **state)
{
    fx *f = fx_get(state);
    sb_io *io = f->io;
    put_file(io, "A", "aaaa");
    put_file(io, "B", "bbbb");
    int old_b = xopen(io, "B", SB_IO_RDONLY);
    /* Atomic replace: B now names A's file; the replaced file lives on
     * through its open fd. */
    assert_int_equal(io->ops->rename(io, "A", "B"), 0);
    assert_int_equal(sb_io_open(io, "A", 0), -ENOENT);
    assert_true(file_is(io, "B", "aaaa"));
    char buf[8] = { 0 };
    assert_int_equal(sb_io_pread(io, old_b, buf, 4, 0), 4);
    assert_memory_equal(buf, "bbbb", 4);
    assert_int_equal(sb_io_close(io, old_b), 0);
    assert_int_equal(io->ops->rename(io, "nope", "C"), -ENOENT);
    assert_int_equal(io->ops->rename(io, "B", "B"), 0);
    assert_true(file_is(io, "B", "aaaa"));

    /* Unlink: the name goes, an open fd still reads the file. */
    int keep = xopen(io, "B", 0);
    assert_int_equal(io->ops->unlink(io, "B"), 0);
    assert_int_equal(sb_io_open(io, "B", 0), -ENOENT);
    assert_int_equal(sb_io_pread(io, keep, buf, 4, 0), 4);
    assert_memory_equal(buf, "aaaa", 4);
    assert_int_equal(sb_io_close(io, keep), 0);
    assert_int_equal(io->ops->unlink(io, "B"), -ENOENT);

    names l;
    list_sorted(io, &l);
    assert_int_equal(l.n, 0);
    for (int i = 9; i >= 0; i--) {
        char name[16];
        snprintf(name, sizeof name, "seg.%d", i);
        put_file(io, name, "x");
    }
    list_sorted(io, &l);
    assert_int_equal(l.n, 10);
    for (int i = 0; i < 10; i++) {
        char name[16];
        snprintf(name, sizeof name, "seg.%d", i);
        assert_string_equal(l.v[i], name);
    }
    assert_int_equal(io->ops->list(io, NULL, NULL), -EINVAL);
    assert_int_equal(io->ops->sync_dir(io), 0);
}

/* O_DIRECT: n_req writes of three iovecs (4 + 8 + 4 KiB, from three
 * separate arrays) submitted in batches of 7 without reaping, so the
 * io_uring ring (FX_DEPTH) fills many times over; then the file is read
 * back with n_req two-iovec reads submitted in one call. */
static void test_direct_many_in_flight(void **state)
{
    fx *f = fx_get(state);
    sb_io *io = f->io;
    enum { n_req = 100, rec = 4 * UNIT };
    uint8_t *a = abuf(n_req * UNIT), *b = abuf(n_req * 2 * UNIT), *c = abuf(n_req * UNIT);
    fill(a, n_req * UNIT, 11);
    fill(b, n_req * 2 * UNIT, 12);
    fill(c, n_req * UNIT, 13);
    int fd = open_direct(f, "dio");
    assert_int_equal(io->ops->allocate(io, fd, (uint64_t)n_req * rec), 0);

    static struct iovec wv[n_req][3];
    static sb_io_req w[n_req];
    sb_io_req *ptrs[n_req];
    for (int i = 0; i < n_req; i++) {
        wv[i][0] = (struct iovec){ a + (size_t)i * UNIT, UNIT };
        wv[i][1] = (struct iovec){ b + (size_t)i * 2 * UNIT, 2 * UNIT };
        wv[i][2] = (struct iovec){ c + (size_t)i * UNIT, UNIT };
        w[i] = (sb_io_req){ .op = SB_IO_WRITE, .fd = fd, .off = (uint64_t)i * rec,
                            .iov = wv[i], .iovcnt = 3, .user = &w[i], .result = -1 };
        ptrs[i] = &w[i];
    }
    for (int i = 0; i < n_req;) {
        unsigned k = n_req - i < 7 ? (unsigned)(n_req - i) : 7;
        int r = sb_io_submit(io, ptrs + i, k);
        assert_true(r >= 1 && r <= (int)k);
        i += r;
    }
    assert_int_equal(io->in_flight, n_req);
    reap_all(io, w, n_req);
    for (int i = 0; i < n_req; i++)
        assert_int_equal(w[i].result, rec);
    assert_int_equal(sb_io_fdatasync(io, fd), 0);

    uint8_t *back = abuf((size_t)n_req * rec);
    static struct iovec rv[n_req][2];
    static sb_io_req r[n_req];
    for (int i = 0; i < n_req; i++) {
        uint8_t *p = back + (size_t)i * rec;
        rv[i][0] = (struct iovec){ p, 2 * UNIT };
        rv[i][1] = (struct iovec){ p + 2 * UNIT, 2 * UNIT };
        r[i] = (sb_io_req){ .op = SB_IO_READ, .fd = fd, .off = (uint64_t)i * rec,
                            .iov = rv[i], .iovcnt = 2, .user = &r[i], .result = -1 };
        ptrs[i] = &r[i];
    }
    assert_int_equal(sb_io_submit(io, ptrs, n_req), n_req);
    sb_io_req *done[n_req];
    assert_int_equal(sb_io_reap(io, n_req, done, n_req), n_req); /* min = all */
    assert_int_equal(io->in_flight, 0);
    for (int i = 0; i < n_req; i++) {
        assert_int_equal(r[i].result, rec);
        uint8_t *p = back + (size_t)i * rec;
        assert_memory_equal(p, a + (size_t)i * UNIT, UNIT);
        assert_memory_equal(p + UNIT, b + (size_t)i * 2 * UNIT, 2 * UNIT);
        assert_memory_equal(p + 3 * UNIT, c + (size_t)i * UNIT, UNIT);
    }
    assert_int_equal(sb_io_close(io, fd), 0);
    free(a);
    free(b);
    free(c);
    free(back);
}

static void test_reap_rules(void **state)
{
    fx *f = fx_get(state);
    sb_io *io = f->io;
    sb_io_req *done[64];
    assert_int_equal(sb_io_reap(io, 0, NULL, 0), 0);
    assert_int_equal(sb_io_reap(io, 2, done, 1), -EINVAL);         /* min > max */
    assert_int_equal(sb_io_reap(io, 0, NULL, 1), -EINVAL);
    assert_int_equal(sb_io_reap(io, 1, done, 4), 0);  /* min capped: nothing in flight */

    int fd = xopen(io, "r", SB_IO_CREATE);
    uint8_t data[10 * UNIT], got[10][UNIT];
    fill(data, sizeof data, 5);
    xwrite(io, fd, data, sizeof data, 0);
    struct iovec v[10];
    sb_io_req q[10], *ptrs[10];
    for (int i = 0; i < 10; i++) {
        v[i] = (struct iovec){ got[i], UNIT };
        q[i] = (sb_io_req){ .op = SB_IO_READ, .fd = fd, .off = (uint64_t)i * UNIT,
                            .iov = &v[i], .iovcnt = 1, .user = &q[i] };
        ptrs[i] = &q[i];
    }
    assert_int_equal(sb_io_submit(io, ptrs, 0), 0);
    assert_int_equal(sb_io_submit(io, NULL, 1), -EINVAL);
    sb_io_req *with_null[2] = { &q[0], NULL };
    assert_int_equal(sb_io_submit(io, with_null, 2), -EINVAL);   /* none queued */
    assert_int_equal(io->in_flight, 0);

    assert_int_equal(sb_io_submit(io, ptrs, 10), 10);
    assert_int_equal(io->in_flight, 10);
    int seen = 0;
    int n = sb_io_reap(io, 0, done, 3);                /* max bounds, min 0 */
    assert_true(n >= 0 && n <= 3);
    seen += n;
    n = sb_io_reap(io, 2, done + seen, 2);             /* exactly 2 */
    assert_int_equal(n, 2);
    seen += n;
    unsigned rest = io->in_flight;
    assert_int_equal(rest, 10 - seen);
    n = sb_io_reap(io, 64, done + seen, 64);           /* min capped at rest */
    assert_int_equal(n, (int)rest);
    seen += n;
    assert_int_equal(io->in_flight, 0);
    for (int i = 0; i < seen; i++) {
        sb_io_req *x = done[i];
        int idx = (int)(x - q);
        assert_true(idx >= 0 && idx < 10);
        assert_int_equal(x->result, UNIT);
        assert_memory_equal(got[idx], data + (size_t)idx * UNIT, UNIT);
        for (int j = 0; j < i; j++)
            assert_ptr_not_equal(done[j], x);
    }

    /* Bad requests complete with the error; they are not submit errors. */
    sb_io_req bad[4] = {
        { .op = 99, .fd = fd },
        { .op = SB_IO_READ, .fd = fd, .iov = v, .iovcnt = -1 },
        { .op = SB_IO_READ, .fd = -1, .iov = v, .iovcnt = 1 },
        { .op = SB_IO_READ, .fd = fd, .iov = NULL, .iovcnt = 1 },
    };
    sb_io_req *bp[4] = { &bad[0], &bad[1], &bad[2], &bad[3] };
    assert_int_equal(sb_io_submit(io, bp, 4), 4);
    assert_int_equal(sb_io_reap(io, 4, done, 4), 4);
    assert_int_equal(bad[0].result, -EINVAL);
    assert_int_equal(bad[1].result, -EINVAL);
    assert_int_equal(bad[2].result, -EBADF);
    assert_int_equal(bad[3].result, -EINVAL);
    assert_int_equal(sb_io_close(io, fd), 0);
}

static void test_sync(void **state)
{
    fx *f = fx_get(state);
    sb_io *io = f->io;
    int fd = xopen(io, "y", SB_IO_CREATE);
    uint8_t d1[UNIT], d2[UNIT], d3[UNIT];
    fill(d1, UNIT, 1);
    fill(d2, UNIT, 2);
    fill(d3, UNIT, 3);
    /* A batch: two writes, the SYNC barrier, a write after it. */
    struct iovec v[3] = { { d1, UNIT }, { d2, UNIT }, { d3, UNIT } };
    sb_io_req q[4] = {
        { .op = SB_IO_WRITE, .fd = fd, .off = 0, .iov = &v[0], .iovcnt = 1 },
        { .op = SB_IO_WRITE, .fd = fd, .off = UNIT, .iov = &v[1], .iovcnt = 1 },
        { .op = SB_IO_SYNC, .fd = fd },
        { .op = SB_IO_WRITE, .fd = fd, .off = 2 * UNIT, .iov = &v[2], .iovcnt = 1 },
    };
    sb_io_req *p[4] = { &q[0], &q[1], &q[2], &q[3] }, *done[4];
    assert_int_equal(sb_io_submit(io, p, 4), 4);
    assert_int_equal(sb_io_reap(io, 4, done, 4), 4);
    assert_int_equal(q[0].result, UNIT);
    assert_int_equal(q[1].result, UNIT);
    assert_int_equal(q[2].result, 0);
    assert_int_equal(q[3].result, UNIT);
    assert_int_equal(sb_io_fdatasync(io, fd), 0);
    assert_int_equal(sb_io_fdatasync(io, -1), -EBADF);
    assert_int_equal(io->ops->sync_dir(io), 0);
    assert_int_equal(sb_io_close(io, fd), 0);
    assert_int_equal(sb_io_fdatasync(io, fd), -EBADF);
}

static void test_lock(void **state)
{
    fx *f = fx_get(state);
    long pid = -1;
    assert_int_equal(f->io->ops->lock(f->io, "LOCK", &pid), 0);
    char want[32];
    snprintf(want, sizeof want, "%ld\n", (long)getpid());
    assert_true(file_is(f->io, "LOCK", want));
    assert_int_equal(f->io->ops->lock(f->io, "LOCK", &pid), -EWOULDBLOCK);
    assert_int_equal(pid, (long)getpid());

    /* A second handle on the same directory is another holder. */
    sb_io *other = fx_open_io(f);
    pid = -1;
    assert_int_equal(other->ops->lock(other, "LOCK", &pid), -EWOULDBLOCK);
    assert_int_equal(pid, (long)getpid());
    assert_int_equal(other->ops->lock(other, "LOCK", NULL), -EWOULDBLOCK);
    assert_int_equal(f->io->ops->lock(f->io, "OTHER", NULL), 0);
    /* Destroying the holder releases its locks. */
    sb_io_destroy(f->io);
    f->io = other;
    assert_int_equal(other->ops->lock(other, "LOCK", &pid), 0);
    assert_int_equal(other->ops->lock(other, "OTHER", &pid), 0);
    assert_int_equal(other->ops->lock(other, NULL, &pid), -EINVAL);
}

static void test_errors(void **state)
{
    fx *f = fx_get(state);
    sb_io *io = f->io;
    uint64_t n;
    /* -ENOENT */
    assert_int_equal(sb_io_open(io, "missing", 0), -ENOENT);
    assert_int_equal(io->ops->rename(io, "missing", "x"), -ENOENT);
    assert_int_equal(io->ops->unlink(io, "missing"), -ENOENT);
    /* -EBADF */
    assert_int_equal(sb_io_close(io, -1), -EBADF);
    assert_int_equal(sb_io_close(io, 12345), -EBADF);
    assert_int_equal(io->ops->size(io, -1, &n), -EBADF);
    assert_int_equal(io->ops->allocate(io, -1, 4096), -EBADF);
    assert_int_equal(io->ops->truncate(io, -1, 0), -EBADF);
    uint8_t *buf = abuf(2 * UNIT);
    assert_int_equal(sb_io_pread(io, 12345, buf, UNIT, 0), -EBADF);
    assert_int_equal(sb_io_pwrite(io, -1, buf, UNIT, 0), -EBADF);

    /* -EINVAL: unaligned O_DIRECT offset, length or buffer, and nothing
     * written by the refused writes. The reads go over written blocks:
     * Linux zero-fills an unwritten (fallocated) extent without checking
     * alignment. */
    int fd = open_direct(f, "dio");
    assert_int_equal(io->ops->allocate(io, fd, 4 * UNIT), 0);
    uint8_t *back = abuf(4 * UNIT);
    fill(back, 2 * UNIT, 8);
    assert_int_equal(sb_io_pwrite(io, fd, back, 2 * UNIT, 0), 2 * UNIT);
    fill(buf, 2 * UNIT, 9);
    assert_int_equal(sb_io_pwrite(io, fd, buf, UNIT, 100), -EINVAL);
    assert_int_equal(sb_io_pwrite(io, fd, buf, 100, 0), -EINVAL);
    assert_int_equal(sb_io_pwrite(io, fd, buf + 1, UNIT, 0), -EINVAL);
    assert_int_equal(sb_io_pread(io, fd, buf, UNIT, 100), -EINVAL);
    assert_int_equal(sb_io_pread(io, fd, buf, 100, 0), -EINVAL);
    assert_int_equal(sb_io_pread(io, fd, buf + 1, UNIT, 0), -EINVAL);
    memset(buf, 0, 2 * UNIT);
    assert_int_equal(sb_io_pread(io, fd, buf, 2 * UNIT, 0), 2 * UNIT);
    assert_memory_equal(buf, back, 2 * UNIT);

    /* The one-request helpers refuse to run beside other requests. */
    struct iovec v = { back, UNIT };
    sb_io_req q = { .op = SB_IO_READ, .fd = fd, .iov = &v, .iovcnt = 1 }, *qp = &q, *done;
    assert_int_equal(sb_io_submit(io, &qp, 1), 1);
    assert_int_equal(sb_io_pread(io, fd, buf, UNIT, 0), -EBUSY);
    assert_int_equal(sb_io_fdatasync(io, fd), -EBUSY);
    assert_int_equal(sb_io_reap(io, 1, &done, 1), 1);
    assert_int_equal(q.result, UNIT);
    assert_int_equal(sb_io_close(io, fd), 0);
    free(buf);
    free(back);
}

/* Directory operations on one thread while another submits and reaps:
 * io.h lets them come from any thread. */
typedef struct race {
    sb_io *io;
    int fd;
} race;

static void *race_dir_ops(void *arg)
{
    race *r = arg;
    for (int i = 0; i < 150; i++) {
        char a[16], b[16];
        snprintf(a, sizeof a, "t%d", i % 5);
        snprintf(b, sizeof b, "u%d", i % 5);
        int fd = sb_io_open(r->io, a, SB_IO_CREATE);
        if (fd < 0)
            return (void *)1;
        uint64_t n;
        if (r->io->ops->size(r->io, fd, &n) || r->io->ops->truncate(r->io, fd, 100) ||
            sb_io_close(r->io, fd) || r->io->ops->rename(r->io, a, b))
            return (void *)1;
        names l = { .n = 0 };
        if (r->io->ops->list(r->io, names_add, &l) || r->io->ops->unlink(r->io, b))
            return (void *)1;
    }
    return NULL;
}

static void test_threads_dir_ops_beside_data(void **state)
{
    fx *f = fx_get(state);
    sb_io *io = f->io;
    race r = { .io = io, .fd = xopen(io, "data", SB_IO_CREATE) };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, race_dir_ops, &r), 0);
    uint8_t w[4][UNIT], got[4][UNIT];
    for (int round = 0; round < 100; round++) {
        struct iovec v[4];
        sb_io_req q[4], *p[4], *done[4];
        for (int i = 0; i < 4; i++) {
            fill(w[i], UNIT, (uint64_t)(round * 4 + i));
            v[i] = (struct iovec){ w[i], UNIT };
            q[i] = (sb_io_req){ .op = SB_IO_WRITE, .fd = r.fd, .off = (uint64_t)i * UNIT,
                                .iov = &v[i], .iovcnt = 1 };
            p[i] = &q[i];
        }
        assert_int_equal(sb_io_submit(io, p, 4), 4);
        assert_int_equal(sb_io_reap(io, 4, done, 4), 4);
        for (int i = 0; i < 4; i++) {
            assert_int_equal(q[i].result, UNIT);
            assert_int_equal(sb_io_pread(io, r.fd, got[i], UNIT, (uint64_t)i * UNIT), UNIT);
            assert_memory_equal(got[i], w[i], UNIT);
        }
    }
    void *ret;
    assert_int_equal(pthread_join(t, &ret), 0);
    assert_null(ret);
    assert_int_equal(sb_io_close(io, r.fd), 0);
}

#define CONTRACT_TESTS(k)                                                                 \
    {                                                                                     \
        cmocka_unit_test_prestate_setup_teardown(test_open_flags, fx_setup, fx_teardown, k), \
        cmocka_unit_test_prestate_setup_teardown(test_size_allocate_truncate, fx_setup,   \
                                                 fx_teardown, k),                         \
        cmocka_unit_test_prestate_setup_teardown(test_rename_unlink_list, fx_setup,       \
                                                 fx_teardown, k),                         \
        cmocka_unit_test_prestate_setup_teardown(test_direct_many_in_flight, fx_setup,    \
                                                 fx_teardown, k),                         \
        cmocka_unit_test_prestate_setup_teardown(test_reap_rules, fx_setup, fx_teardown, k), \
        cmocka_unit_test_prestate_setup_teardown(test_sync, fx_setup, fx_teardown, k),    \
        cmocka_unit_test_prestate_setup_teardown(test_lock, fx_setup, fx_teardown, k),    \
        cmocka_unit_test_prestate_setup_teardown(test_errors, fx_setup, fx_teardown, k),  \
        cmocka_unit_test_prestate_setup_teardown(test_threads_dir_ops_beside_data,        \
                                                 fx_setup, fx_teardown, k),               \
    }

/* ---- the mem backend: faults ------------------------------------------------ */

static sb_io *mem_new(void)
{
    sb_io *io = NULL;
    assert_int_equal(sb_io_mem_new(&io), 0);
    return io;
}

/* A mem file system holding "f" (8 KiB of seed-1 bytes) and "g" ("gg"),
 * everything durable; *fd is "f" opened read-write. */
static sb_io *mem_base(int *fd, uint8_t *data)
{
    sb_io *io = mem_new();
    fill(data, 2 * UNIT, 1);
    *fd = xopen(io, "f", SB_IO_CREATE);
    xwrite(io, *fd, data, 2 * UNIT, 0);
    put_file(io, "g", "gg");
    assert_int_equal(sb_io_fdatasync(io, *fd), 0);
    int g = xopen(io, "g", 0);
    assert_int_equal(sb_io_fdatasync(io, g), 0);
    assert_int_equal(sb_io_close(io, g), 0);
    assert_int_equal(io->ops->sync_dir(io), 0);
    return io;
}

static void never_called(void *ctx, const char *name)
{
    (void)ctx;
    (void)name;
    fail();
}

/* Every kind of operation, failed as the next one: it returns the error
 * and changes nothing. */
static void test_mem_fail_each_op(void **state)
{
    (void)state;
    uint8_t data[2 * UNIT], buf[2 * UNIT];
    uint64_t n = 77;
    long pid;
    int fd;
    sb_io *io = mem_base(&fd, data);

    sb_io_mem_fail_at(io, 1, -EIO);
    assert_int_equal(sb_io_open(io, "new", SB_IO_CREATE), -EIO);
    assert_int_equal(sb_io_open(io, "new", 0), -ENOENT);
    sb_io_mem_fail_at(io, 1, -EIO);
    assert_int_equal(sb_io_open(io, "f", 0), -EIO);

    sb_io_mem_fail_at(io, 1, -EIO);
    assert_int_equal(sb_io_close(io, fd), -EIO);
    assert_int_equal(xsize(io, fd), 2 * UNIT);          /* still open */

    sb_io_mem_fail_at(io, 1, -EIO);
    assert_int_equal(io->ops->size(io, fd, &n), -EIO);
    assert_int_equal(n, 77);
    sb_io_mem_fail_at(io, 1, ENOSPC);                  /* a positive errno is negated */
    assert_int_equal(io->ops->allocate(io, fd, 1 << 20), -ENOSPC);
    assert_int_equal(xsize(io, fd), 2 * UNIT);
    sb_io_mem_fail_at(io, 1, -EIO);
    assert_int_equal(io->ops->truncate(io, fd, 0), -EIO);
    assert_int_equal(xsize(io, fd), 2 * UNIT);

    sb_io_mem_fail_at(io, 1, -EIO);
    assert_int_equal(io->ops->rename(io, "g", "h"), -EIO);
    assert_true(file_is(io, "g", "gg"));
    assert_false(exists(io, "h"));
    sb_io_mem_fail_at(io, 1, -EIO);
    assert_int_equal(io->ops->unlink(io, "g"), -EIO);
    assert_true(exists(io, "g"));
    sb_io_mem_fail_at(io, 1, -EIO);
    assert_int_equal(io->ops->list(io, never_called, NULL), -EIO);

    sb_io_mem_fail_at(io, 1, -EIO);
    assert_int_equal(io->ops->lock(io, "L", &pid), -EIO);
    assert_int_equal(io->ops->lock(io, "L", &pid), 0);  /* not held by the failure */

    /* Data requests: the error arrives in the result, nothing happens. */
    memset(buf, 0xEE, sizeof buf);
    sb_io_mem_fail_at(io, 1, -EIO);
    assert_int_equal(sb_io_pread(io, fd, buf, UNIT, 0), -EIO);
    for (size_t i = 0; i < UNIT; i++)
        assert_int_equal(buf[i], 0xEE);
    uint8_t other[UNIT];
    fill(other, UNIT, 2);
    sb_io_mem_fail_at(io, 1, -EIO);
    assert_int_equal(sb_io_pwrite(io, fd, other, UNIT, 0), -EIO);
    assert_int_equal(sb_io_pread(io, fd, buf, 2 * UNIT, 0), 2 * UNIT);
    assert_memory_equal(buf, data, 2 * UNIT);

    /* A failed sync makes nothing durable; a failed sync_dir neither. */
    xwrite(io, fd, other, UNIT, 0);
    sb_io_mem_fail_at(io, 1, -EIO);
    assert_int_equal(sb_io_fdatasync(io, fd), -EIO);
    put_file(io, "fresh", "x");
    sb_io_mem_fail_at(io, 1, -EIO);
    assert_int_equal(io->ops->sync_dir(io), -EIO);
    assert_int_equal(sb_io_mem_crash(io, 1, 0.0, 0.0), 0);
    fd = xopen(io, "f", 0);
    assert_int_equal(sb_io_pread(io, fd, buf, 2 * UNIT, 0), 2 * UNIT);
    assert_memory_equal(buf, data, 2 * UNIT);
    assert_false(exists(io, "fresh"));
    assert_false(exists(io, "L"));      /* created after the last sync_dir */
    sb_io_destroy(io);
}

/* Counting: the nth operation fails, once; 0 disarms. */
static void test_mem_fail_counting(void **state)
{
    (void)state;
    sb_io *io = mem_new();
    uint64_t n0 = sb_io_mem_ops_count(io);
    int fd = xopen(io, "c", SB_IO_CREATE);
    assert_int_equal(sb_io_mem_ops_count(io), n0 + 1);
    sb_io_mem_fail_at(io, 3, -EIO);
    uint64_t n;
    assert_int_equal(io->ops->size(io, fd, &n), 0);
    assert_int_equal(io->ops->size(io, fd, &n), 0);
    assert_int_equal(io->ops->size(io, fd, &n), -EIO);
    assert_int_equal(io->ops->size(io, fd, &n), 0);     /* fired once */
    assert_int_equal(sb_io_mem_ops_count(io), n0 + 5);
    sb_io_mem_fail_at(io, 2, -EIO);
    sb_io_mem_fail_at(io, 0, 0);                        /* disarmed */
    for (int i = 0; i < 4; i++)
        assert_int_equal(io->ops->size(io, fd, &n), 0);
    /* Each request of a batch counts once, at submit. */
    uint8_t b[3][UNIT] = { { 0 } };
    struct iovec v[3] = { { b[0], UNIT }, { b[1], UNIT }, { b[2], UNIT } };
    sb_io_req q[3], *p[3], *done[3];
    for (int i = 0; i < 3; i++) {
        q[i] = (sb_io_req){ .op = SB_IO_WRITE, .fd = fd, .off = (uint64_t)i * UNIT, .iov = &v[i],
                            .iovcnt = 1 };
        p[i] = &q[i];
    }
    sb_io_mem_fail_at(io, 2, -ENOSPC);
    uint64_t before = sb_io_mem_ops_count(io);
    assert_int_equal(sb_io_submit(io, p, 3), 3);
    assert_int_equal(sb_io_mem_ops_count(io), before + 3);
    assert_int_equal(sb_io_reap(io, 3, done, 3), 3);
    assert_int_equal(sb_io_mem_ops_count(io), before + 3);     /* reap does not count */
    assert_int_equal(q[0].result, UNIT);
    assert_int_equal(q[1].result, -ENOSPC);
    assert_int_equal(q[2].result, UNIT);
    assert_int_equal(xsize(io, fd), 3 * UNIT);
    sb_io_destroy(io);
}

static void test_mem_short_write(void **state)
{
    (void)state;
    sb_io *io = mem_new();
    int fd = xopen(io, "s", SB_IO_CREATE);
    uint8_t d[4 * UNIT], got[4 * UNIT];
    fill(d, sizeof d, 3);
    sb_io_mem_fail_at(io, 1, 0);
    assert_int_equal(sb_io_pwrite(io, fd, d, 3 * UNIT + 100, 0), UNIT); /* 6194 -> 4096 */
    assert_int_equal(xsize(io, fd), UNIT);
    assert_int_equal(sb_io_pread(io, fd, got, sizeof got, 0), UNIT);
    assert_memory_equal(got, d, UNIT);
    sb_io_mem_fail_at(io, 1, 0);
    assert_int_equal(sb_io_pwrite(io, fd, d, 6000, UNIT), 0);          /* 3000 -> 0 */
    assert_int_equal(xsize(io, fd), UNIT);
    /* Not a write: runs normally, and the fault is spent. */
    sb_io_mem_fail_at(io, 1, 0);
    assert_int_equal(xsize(io, fd), UNIT);
    assert_int_equal(sb_io_pwrite(io, fd, d, 3 * UNIT, 0), 3 * UNIT);
    /* Across iovecs: 4 + 8 + 4 KiB short is 8 KiB, the first iovec and
     * half the second. */
    uint8_t z[4 * UNIT] = { 0 };
    assert_int_equal(sb_io_pwrite(io, fd, z, sizeof z, 0), sizeof z);
    struct iovec v[3] = { { d, UNIT }, { d + UNIT, 2 * UNIT }, { d + 3 * UNIT, UNIT } };
    sb_io_req q = { .op = SB_IO_WRITE, .fd = fd, .iov = v, .iovcnt = 3 }, *qp = &q, *done;
    sb_io_mem_fail_at(io, 1, 0);
    assert_int_equal(sb_io_submit(io, &qp, 1), 1);
    assert_int_equal(sb_io_reap(io, 1, &done, 1), 1);
    assert_int_equal(q.result, 2 * UNIT);
    assert_int_equal(sb_io_pread(io, fd, got, sizeof got, 0), sizeof got);
    assert_memory_equal(got, d, 2 * UNIT);
    assert_memory_equal(got + 2 * UNIT, z, 2 * UNIT);
    sb_io_destroy(io);
}

static void test_mem_direct_alignment(void **state)
{
    (void)state;
    sb_io *io = mem_new();
    uint8_t *b = abuf(2 * UNIT);
    int d = xopen(io, "d", SB_IO_CREATE | SB_IO_DIRECT);
    int p = xopen(io, "d", 0);
    assert_int_equal(sb_io_pwrite(io, d, b, UNIT, 512), -EINVAL);
    assert_int_equal(sb_io_pwrite(io, d, b, 512, 0), -EINVAL);
    assert_int_equal(sb_io_pwrite(io, d, b + 512, UNIT, 0), -EINVAL);
    assert_int_equal(sb_io_pread(io, d, b + 8, UNIT, 0), -EINVAL);
    struct iovec v[2] = { { b, UNIT }, { b + UNIT, 100 } };   /* one bad iovec */
    sb_io_req q = { .op = SB_IO_WRITE, .fd = d, .iov = v, .iovcnt = 2 }, *qp = &q, *done;
    assert_int_equal(sb_io_submit(io, &qp, 1), 1);
    assert_int_equal(sb_io_reap(io, 1, &done, 1), 1);
    assert_int_equal(q.result, -EINVAL);
    assert_int_equal(xsize(io, d), 0);
    /* The same file without SB_IO_DIRECT takes any alignment. */
    assert_int_equal(sb_io_pwrite(io, p, b + 1, 100, 3), 100);
    assert_int_equal(sb_io_pwrite(io, d, b, UNIT, UNIT), UNIT);
    free(b);
    sb_io_destroy(io);
}

/* ---- the mem backend: crashes ------------------------------------------------ */

static void test_mem_crash_keep_all(void **state)
{
    (void)state;
    sb_io *io = mem_new();
    put_file(io, "old", "durable");
    int fd = xopen(io, "old", 0);
    assert_int_equal(sb_io_fdatasync(io, fd), 0);
    assert_int_equal(io->ops->sync_dir(io), 0);

    uint8_t d[3 * UNIT + 10], late[UNIT], got[4 * UNIT];
    fill(d, sizeof d, 4);
    fill(late, sizeof late, 5);
    int a = xopen(io, "a", SB_IO_CREATE);
    xwrite(io, a, d, sizeof d, 0);
    put_file(io, "b", "bee");
    assert_int_equal(io->ops->rename(io, "b", "c"), 0);
    assert_int_equal(io->ops->unlink(io, "old"), 0);
    long pid;
    assert_int_equal(io->ops->lock(io, "LOCK", &pid), 0);
    /* In flight at the crash: lost. */
    struct iovec v = { late, UNIT };
    sb_io_req q = { .op = SB_IO_WRITE, .fd = a, .off = 8 * UNIT, .iov = &v, .iovcnt = 1 },
              *qp = &q, *done;
    assert_int_equal(sb_io_submit(io, &qp, 1), 1);

    assert_int_equal(sb_io_mem_crash(io, 42, 1.0, 0.0), 0);
    assert_int_equal(io->in_flight, 0);
    assert_int_equal(sb_io_reap(io, 1, &done, 1), 0);
    uint64_t n;
    assert_int_equal(io->ops->size(io, a, &n), -EBADF);    /* fds are gone */
    assert_int_equal(sb_io_close(io, fd), -EBADF);
    assert_int_equal(sb_io_pread(io, a, got, 1, 0), -EBADF);
    assert_int_equal(io->ops->lock(io, "LOCK", &pid), 0);   /* released */

    a = xopen(io, "a", 0);
    assert_int_equal(xsize(io, a), sizeof d);
    assert_int_equal(sb_io_pread(io, a, got, sizeof got, 0), sizeof d);
    assert_memory_equal(got, d, sizeof d);
    assert_true(file_is(io, "c", "bee"));
    assert_false(exists(io, "b"));
    assert_false(exists(io, "old"));
    sb_io_destroy(io);
}

static void test_mem_crash_keep_none(void **state)
{
    (void)state;
    sb_io *io = mem_new();
    uint8_t d1[2 * UNIT], d2[3 * UNIT], got[4 * UNIT];
    fill(d1, sizeof d1, 6);
    fill(d2, sizeof d2, 7);
    int a = xopen(io, "a", SB_IO_CREATE);
    xwrite(io, a, d1, sizeof d1, 0);
    assert_int_equal(sb_io_fdatasync(io, a), 0);
    put_file(io, "old2", "two");
    int o = xopen(io, "old2", 0);
    assert_int_equal(sb_io_fdatasync(io, o), 0);
    assert_int_equal(io->ops->sync_dir(io), 0);

    xwrite(io, a, d2, sizeof d2, 100);                  /* overwrite and grow */
    int n = xopen(io, "n", SB_IO_CREATE);               /* synced data, dir not */
    xwrite(io, n, "new", 3, 0);
    assert_int_equal(sb_io_fdatasync(io, n), 0);
    assert_int_equal(io->ops->rename(io, "a", "z"), 0);
    assert_int_equal(io->ops->unlink(io, "old2"), 0);
    assert_int_equal(io->ops->truncate(io, o, 1), 0);

    assert_int_equal(sb_io_mem_crash(io, 9, 0.0, 0.0), 0);
    a = xopen(io, "a", 0);
    assert_int_equal(xsize(io, a), sizeof d1);
    assert_int_equal(sb_io_pread(io, a, got, sizeof got, 0), sizeof d1);
    assert_memory_equal(got, d1, sizeof d1);
    assert_false(exists(io, "z"));
    assert_false(exists(io, "n"));
    assert_true(file_is(io, "old2", "two"));
    names l;
    list_sorted(io, &l);
    assert_int_equal(l.n, 2);
    sb_io_destroy(io);
}

/* Units: old durable contents, then new bytes over part of every unit and
 * a sync of only some. After a crash every synced unit is new, every
 * unsynced one is old or new entirely, or with garble something that is
 * not a mix of the two. Across seeds both outcomes occur. */
static void test_mem_crash_units(void **state)
{
    (void)state;
    enum { units = 16, bytes = units * UNIT };
    static uint8_t old[bytes], neu[bytes], got[bytes];
    fill(old, bytes, 20);
    memcpy(neu, old, bytes);
    for (int u = 0; u < units; u++)
        fill(neu + u * UNIT + 1000, 2000, (uint64_t)(100 + u)); /* middle of each unit */
    int n_old = 0, n_new = 0, n_garbled = 0;
    for (uint64_t seed = 1; seed <= 60; seed++) {
        double garble = seed % 2 ? 0.0 : 0.3;
        sb_io *io = mem_new();
        int fd = xopen(io, "u", SB_IO_CREATE);
        xwrite(io, fd, old, bytes, 0);
        assert_int_equal(sb_io_fdatasync(io, fd), 0);
        assert_int_equal(io->ops->sync_dir(io), 0);
        xwrite(io, fd, neu, 4 * UNIT, 0);               /* units 0-3, then synced */
        assert_int_equal(sb_io_fdatasync(io, fd), 0);
        xwrite(io, fd, neu + 4 * UNIT, bytes - 4 * UNIT, 4 * UNIT);
        assert_int_equal(sb_io_mem_crash(io, seed, 0.5, garble), 0);
        fd = xopen(io, "u", 0);
        assert_int_equal(sb_io_pread(io, fd, got, bytes, 0), bytes);
        for (int u = 0; u < units; u++) {
            const uint8_t *g = got + u * UNIT, *o = old + u * UNIT, *w = neu + u * UNIT;
            if (u < 4) {
                assert_memory_equal(g, w, UNIT);
            } else if (memcmp(g, o, UNIT) == 0) {
                n_old++;
            } else if (memcmp(g, w, UNIT) == 0) {
                n_new++;
            } else {
                assert_true(garble > 0);
                int agree = 0;
                for (size_t i = 0; i < UNIT; i++)
                    agree += g[i] == o[i] || g[i] == w[i];
                assert_true(agree < (int)UNIT / 8);     /* random, not a mix */
                n_garbled++;
            }
        }
        sb_io_destroy(io);
    }
    assert_true(n_old > 0 && n_new > 0 && n_garbled > 0);
}

/* Regression: a crash garbled a unit in the durable copy but copied back
 * to the live one only up to the end of the dirty range, so reads saw a
 * unit half garbage and half old bytes. */
static void test_mem_crash_garbles_whole_unit_past_dirty_end(void **state)
{
    (void)state;
    uint8_t old[2 * UNIT], got[2 * UNIT];
    fill(old, sizeof old, 40);
    sb_io *io = mem_new();
    int fd = xopen(io, "g", SB_IO_CREATE);
    xwrite(io, fd, old, sizeof old, 0);
    assert_int_equal(sb_io_fdatasync(io, fd), 0);
    assert_int_equal(io->ops->sync_dir(io), 0);
    xwrite(io, fd, "0123456789", 10, 5000);            /* dirty: [5000, 5010) */
    assert_int_equal(sb_io_mem_crash(io, 3, 0.0, 1.0), 0);
    fd = xopen(io, "g", 0);
    assert_int_equal(sb_io_pread(io, fd, got, sizeof got, 0), sizeof got);
    assert_memory_equal(got, old, UNIT);                /* unit 0: clean */
    size_t agree = 0;
    for (size_t i = UNIT; i < 2 * UNIT; i++)
        agree += got[i] == old[i];
    assert_true(agree < UNIT / 8);                      /* unit 1: garbled whole */
    sb_io_destroy(io);
}

/* Directory changes after the last sync_dir: each created name may be lost
 * or kept, independently; a rename is atomic (exactly one of the two names
 * survives); synced names always survive. */
static void test_mem_crash_dir(void **state)
{
    (void)state;
    int kept[6] = { 0 }, renamed = 0;
    for (uint64_t seed = 1; seed <= 64; seed++) {
        sb_io *io = mem_new();
        put_file(io, "base", "b");
        put_file(io, "x", "xx");
        int x = xopen(io, "x", 0);
        assert_int_equal(sb_io_fdatasync(io, x), 0);
        assert_int_equal(io->ops->sync_dir(io), 0);
        for (int i = 0; i < 6; i++) {
            char name[8];
            snprintf(name, sizeof name, "n%d", i);
            put_file(io, name, "n");
        }
        assert_int_equal(io->ops->rename(io, "x", "y"), 0);
        assert_int_equal(sb_io_mem_crash(io, seed, 0.5, 0.0), 0);
        assert_true(exists(io, "base"));
        for (int i = 0; i < 6; i++) {
            char name[8];
            snprintf(name, sizeof name, "n%d", i);
            kept[i] += exists(io, name);
        }
        bool has_x = exists(io, "x"), has_y = exists(io, "y");
        assert_true(has_x != has_y);
        assert_true(file_is(io, has_x ? "x" : "y", "xx"));
        renamed += has_y;
        sb_io_destroy(io);
    }
    for (int i = 0; i < 6; i++)
        assert_true(kept[i] > 0 && kept[i] < 64);
    assert_true(renamed > 0 && renamed < 64);
}

/* The same history and seed give the same files; another seed differs. */
static uint64_t crash_digest(uint64_t seed)
{
    sb_io *io = mem_new();
    static uint8_t d[16 * UNIT], got[16 * UNIT];
    fill(d, sizeof d, 30);
    int fd = xopen(io, "f", SB_IO_CREATE);
    assert_int_equal(io->ops->sync_dir(io), 0);
    xwrite(io, fd, d, sizeof d, 0);
    for (int i = 0; i < 4; i++) {
        char name[8];
        snprintf(name, sizeof name, "d%d", i);
        put_file(io, name, "d");
    }
    assert_int_equal(sb_io_mem_crash(io, seed, 0.4, 0.3), 0);
    uint64_t h = 1469598103934665603ull;
    fd = xopen(io, "f", 0);
    int64_t n = sb_io_pread(io, fd, got, sizeof got, 0);
    for (int64_t i = 0; i < n; i++)
        h = (h ^ got[i]) * 1099511628211ull;
    names l;
    list_sorted(io, &l);
    for (int i = 0; i < l.n; i++)
        for (const char *c = l.v[i]; *c; c++)
            h = (h ^ (uint8_t)*c) * 1099511628211ull;
    sb_io_destroy(io);
    return h;
}

static void test_mem_crash_deterministic(void **state)
{
    (void)state;
    int differ = 0;
    for (uint64_t seed = 1; seed <= 8; seed++) {
        uint64_t h = crash_digest(seed);
        assert_true(crash_digest(seed) == h);
        differ += crash_digest(seed + 1000) != h;
    }
    assert_true(differ >= 6);
}

/* Two handles on one file system: shared files, separate fds and locks; a
 * crash through one invalidates the other's fds too. */
static void test_mem_share(void **state)
{
    (void)state;
    sb_io *a = mem_new(), *b = NULL;
    assert_int_equal(sb_io_mem_share(a, &b), 0);
    sb_io *none = a;
    assert_int_equal(sb_io_mem_share(NULL, &none), -EINVAL);
    assert_null(none);
    put_file(a, "f", "shared");
    assert_true(file_is(b, "f", "shared"));
    int fb = xopen(b, "f", 0);
    assert_int_equal(sb_io_close(a, fb), -EBADF);       /* fds are per handle */
    assert_int_equal(sb_io_mem_crash(b, 1, 1.0, 0.0), 0);
    uint64_t n;
    assert_int_equal(b->ops->size(b, fb, &n), -EBADF);
    /* The crash came through b: a is fenced (its process is gone), b and
     * handles shared from it later go on. */
    assert_int_equal(sb_io_open(a, "f", 0), -EIO);
    assert_int_equal(a->ops->unlink(a, "f"), -EIO);
    sb_io *c = NULL;
    assert_int_equal(sb_io_mem_share(b, &c), 0);
    assert_true(file_is(c, "f", "shared"));
    sb_io_destroy(c);
    sb_io_destroy(a);
    assert_true(file_is(b, "f", "shared"));
    sb_io_destroy(b);
}

/* ---- the mem backend: random histories against a shadow model --------------- */

enum { M_FILES = 3, M_MAX = 8 * UNIT };

/* What each file must hold: cur (current) and old (durable) contents,
 * zeros past each size. */
typedef struct shadow {
    uint8_t cur[M_MAX + 3 * UNIT], old[M_MAX + 3 * UNIT];
    uint64_t cur_size, old_size;
} shadow;

/* The bytes that can be nonzero in either copy. */
static uint64_t shadow_span(const shadow *m)
{
    return m->cur_size > m->old_size ? m->cur_size : m->old_size;
}

static bool unit_eq(const uint8_t *a, const uint8_t *b, size_t len)
{
    return memcmp(a, b, len) == 0;
}

static const char model_name[M_FILES][4] = { "f0", "f1", "f2" };

/* One history: random writes (some faulted or short), syncs, truncates and
 * crashes; after each crash every file must be one the model allows. The
 * file system outlives the history (it starts by emptying the files), so
 * it also lives through thousands of crashes; fd[] is reopened after each. */
static void model_history(sb_io *io, int *fd, uint64_t seed, shadow *sh, uint8_t *got,
                          uint8_t *src)
{
    uint64_t rng = seed;
    for (int k = 0; k < M_FILES; k++) {                /* empty, durably */
        assert_int_equal(io->ops->truncate(io, fd[k], 0), 0);
        assert_int_equal(sb_io_fdatasync(io, fd[k]), 0);
        uint64_t span = shadow_span(&sh[k]);
        memset(sh[k].cur, 0, (size_t)span);
        memset(sh[k].old, 0, (size_t)span);
        sh[k].cur_size = sh[k].old_size = 0;
    }
    int steps = 10 + (int)(tu_rand(&rng) % 30);
    for (int s = 0; s < steps; s++) {
        int k = (int)(tu_rand(&rng) % M_FILES);
        shadow *m = &sh[k];
        uint64_t what = tu_rand(&rng) % 16;
        if (what < 9) {                                 /* write, maybe faulted */
            uint64_t len = 1 + tu_rand(&rng) % (3 * UNIT);
            uint64_t off = tu_rand(&rng) % M_MAX;
            fill(src, (size_t)len, tu_rand(&rng));
            uint64_t fault = tu_rand(&rng) % 10;
            if (fault == 0)
                sb_io_mem_fail_at(io, 1, -EIO);
            else if (fault == 1)
                sb_io_mem_fail_at(io, 1, 0);
            int64_t r = sb_io_pwrite(io, fd[k], src, (size_t)len, off);
            uint64_t want = fault == 0 ? 0 : fault == 1 ? len / 2 / UNIT * UNIT : len;
            assert_int_equal(r, fault == 0 ? -EIO : (int64_t)want);
            if (want) {
                memcpy(m->cur + off, src, (size_t)want);
                if (off + want > m->cur_size)
                    m->cur_size = off + want;
            }
        } else if (what < 12) {                         /* sync */
            assert_int_equal(sb_io_fdatasync(io, fd[k]), 0);
            memcpy(m->old, m->cur, (size_t)shadow_span(m));
            m->old_size = m->cur_size;
        } else if (what < 14) {                         /* truncate */
            uint64_t size = tu_rand(&rng) % M_MAX;
            assert_int_equal(io->ops->truncate(io, fd[k], size), 0);
            if (size < m->cur_size)
                memset(m->cur + size, 0, (size_t)(m->cur_size - size));
            m->cur_size = size;
        } else {                                        /* crash */
            static const double keeps[4] = { 0.0, 0.3, 0.7, 1.0 };
            double keep = keeps[tu_rand(&rng) % 4];
            double garble = tu_rand(&rng) % 2 ? 0.0 : 0.25;
            if (keep == 1.0)
                garble = 0.0;
            assert_int_equal(sb_io_mem_crash(io, tu_rand(&rng), keep, garble), 0);
            for (int j = 0; j < M_FILES; j++) {
                shadow *x = &sh[j];
                fd[j] = xopen(io, model_name[j], 0);    /* the names were synced */
                uint64_t size = xsize(io, fd[j]);
                if (keep == 1.0)
                    assert_true(size == x->cur_size);
                else if (keep == 0.0)
                    assert_true(size == x->old_size);
                else
                    assert_true(size == x->cur_size || size == x->old_size);
                uint64_t span = shadow_span(x);
                assert_int_equal(sb_io_pread(io, fd[j], got, M_MAX + 3 * UNIT, 0), (int64_t)size);
                memset(got + size, 0, (size_t)(span - size));
                for (uint64_t off = 0; off < size; off += UNIT) {
                    size_t len = (size_t)(size - off < UNIT ? size - off : UNIT);
                    const uint8_t *g = got + off, *o = x->old + off, *c = x->cur + off;
                    if (unit_eq(o, c, len)) {
                        assert_true(unit_eq(g, o, len));    /* durable: survives */
                    } else if (keep == 0.0 && garble == 0.0) {
                        assert_true(unit_eq(g, o, len));
                    } else if (keep == 1.0) {
                        assert_true(unit_eq(g, c, len));
                    } else if (!unit_eq(g, o, len) && !unit_eq(g, c, len)) {
                        assert_true(garble > 0);
                        if (len >= 256) {
                            size_t agree = 0;
                            for (size_t i = 0; i < len; i++)
                                agree += g[i] == o[i] || g[i] == c[i];
                            assert_true(agree < len / 8);
                        }
                    }
                }
                memcpy(x->cur, got, (size_t)span);
                memcpy(x->old, got, (size_t)span);
                x->cur_size = x->old_size = size;
            }
        }
    }
}

static void test_mem_model(void **state)
{
    (void)state;
    shadow *sh = calloc(M_FILES, sizeof *sh);
    uint8_t *got = malloc(M_MAX + 3 * UNIT), *src = malloc(3 * UNIT);
    assert_non_null(sh);
    assert_non_null(got);
    assert_non_null(src);
    sb_io *io = mem_new();
    int fd[M_FILES];
    for (int k = 0; k < M_FILES; k++)
        fd[k] = xopen(io, model_name[k], SB_IO_CREATE);
    assert_int_equal(io->ops->sync_dir(io), 0);
    for (uint64_t seed = 1; seed <= 3000; seed++)
        model_history(io, fd, seed * 0x9E3779B97F4A7C15ull, sh, got, src);
    sb_io_destroy(io);
    free(sh);
    free(got);
    free(src);
}

int main(void)
{
    const struct CMUnitTest posix[] = CONTRACT_TESTS((void *)&kind_posix);
    const struct CMUnitTest uring[] = CONTRACT_TESTS((void *)&kind_uring);
    const struct CMUnitTest mem[] = CONTRACT_TESTS((void *)&kind_mem);
    const struct CMUnitTest mem_only[] = {
        cmocka_unit_test(test_mem_fail_each_op),
        cmocka_unit_test(test_mem_fail_counting),
        cmocka_unit_test(test_mem_short_write),
        cmocka_unit_test(test_mem_direct_alignment),
        cmocka_unit_test(test_mem_crash_keep_all),
        cmocka_unit_test(test_mem_crash_keep_none),
        cmocka_unit_test(test_mem_crash_units),
        cmocka_unit_test(test_mem_crash_garbles_whole_unit_past_dirty_end),
        cmocka_unit_test(test_mem_crash_dir),
        cmocka_unit_test(test_mem_crash_deterministic),
        cmocka_unit_test(test_mem_share),
        cmocka_unit_test(test_mem_model),
    };
    int failed = 0;
    failed += cmocka_run_group_tests_name("io_posix", posix, NULL, NULL);
    failed += cmocka_run_group_tests_name("io_uring", uring, NULL, NULL);
    failed += cmocka_run_group_tests_name("io_mem", mem, NULL, NULL);
    failed += cmocka_run_group_tests_name("io_mem_faults_and_crashes", mem_only, NULL, NULL);
    return failed;
}
