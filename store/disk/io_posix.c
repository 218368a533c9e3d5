/* io_posix.c -- the plain-syscall I/O backend, and the directory operations
 * it shares with the io_uring backend: every path is resolved with the *at
 * calls against a directory fd opened at creation, so renaming or
 * replacing the store directory's path later does not redirect us. */
#define _GNU_SOURCE /* O_DIRECT, fallocate, preadv, flock */
#include "io_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* ---- directory operations (shared with io_uring.c) -------------------- */

static sb_io_sys *sys_of(sb_io *io)
{
    return (sb_io_sys *)io;
}

int sb_io_sys_init(sb_io_sys *s, const sb_io_ops *ops, const char *dir)
{
    memset(s, 0, sizeof *s);
    s->base.ops = ops;
    s->dir_fd = -1;
    if (!dir)
        return -EINVAL;
    int err = pthread_mutex_init(&s->lock_mu, NULL);
    if (err)
        return -err;
    s->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s->dir_fd < 0) {
        err = -errno;
        pthread_mutex_destroy(&s->lock_mu);
        return err;
    }
    return 0;
}

void sb_io_sys_fini(sb_io_sys *s)
{
    for (unsigned i = 0; i < s->n_locks; i++)
        close(s->lock_fds[i]);          /* closing drops the flock */
    s->n_locks = 0;
    if (s->dir_fd >= 0)
        close(s->dir_fd);
    s->dir_fd = -1;
    pthread_mutex_destroy(&s->lock_mu);
    sb_io_fifo_free(&s->done);
}

/* True when fd is one of ours that callers must not touch (the directory or
 * a lock file): closing it would silently drop the lock. */
static bool private_fd(sb_io_sys *s, int fd)
{
    if (fd == s->dir_fd)
        return true;
    bool hit = false;
    pthread_mutex_lock(&s->lock_mu);
    for (unsigned i = 0; i < s->n_locks; i++)
        hit |= s->lock_fds[i] == fd;
    pthread_mutex_unlock(&s->lock_mu);
    return hit;
}

int sb_io_sys_open(sb_io *io, const char *name, unsigned flags)
{
    sb_io_sys *s = sys_of(io);
    if (!name || (flags & ~(SB_IO_RDONLY | SB_IO_CREATE | SB_IO_EXCL | SB_IO_DIRECT)))
        return -EINVAL;
    int of = O_CLOEXEC | ((flags & SB_IO_RDONLY) ? O_RDONLY : O_RDWR);
    if (flags & SB_IO_CREATE)
        of |= O_CREAT | ((flags & SB_IO_EXCL) ? O_EXCL : 0);
    if (flags & SB_IO_DIRECT)
        of |= O_DIRECT;
    int fd;
    do
        fd = openat(s->dir_fd, name, of, 0600);
    while (fd < 0 && errno == EINTR);
    return fd < 0 ? -errno : fd;
}

int sb_io_sys_close(sb_io *io, int fd)
{
    if (fd < 0 || private_fd(sys_of(io), fd))
        return -EBADF;
    /* Linux frees the descriptor even when close fails with EINTR: never
     * retry (the number may already belong to another open). */
    if (close(fd) < 0 && errno != EINTR)
        return -errno;
    return 0;
}

int sb_io_sys_size(sb_io *io, int fd, uint64_t *bytes)
{
    (void)io;
    struct stat st;
    if (!bytes)
        return -EINVAL;
    if (fstat(fd, &st) < 0)
        return -errno;
    *bytes = (uint64_t)st.st_size;
    return 0;
}

int sb_io_sys_allocate(sb_io *io, int fd, uint64_t bytes)
{
    (void)io;
    if (bytes > (uint64_t)INT64_MAX)
        return -EFBIG;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0)
        return -errno;
    if ((fl & O_ACCMODE) == O_RDONLY)
        return -EBADF;                  /* what fallocate(2) says, even for 0 */
    if (bytes == 0)
        return 0;                       /* fallocate(2) refuses a 0 length */
    int r;
    do
        r = fallocate(fd, 0, 0, (off_t)bytes);
    while (r < 0 && errno == EINTR);
    if (r == 0)
        return 0;
    if (errno != EOPNOTSUPP)
        return -errno;
    /* The file system cannot preallocate (e.g. some FUSE or NFS mounts):
     * grow the size at least, leaving a sparse file. */
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    if ((uint64_t)st.st_size >= bytes)
        return 0;
    return ftruncate(fd, (off_t)bytes) < 0 ? -errno : 0;
}

int sb_io_sys_truncate(sb_io *io, int fd, uint64_t bytes)
{
    (void)io;
    if (bytes > (uint64_t)INT64_MAX)
        return -EFBIG;
    int r;
    do
        r = ftruncate(fd, (off_t)bytes);
    while (r < 0 && errno == EINTR);
    return r < 0 ? -errno : 0;
}

int sb_io_sys_rename(sb_io *io, const char *from, const char *to)
{
    sb_io_sys *s = sys_of(io);
    if (!from || !to)
        return -EINVAL;
    return renameat(s->dir_fd, from, s->dir_fd, to) < 0 ? -errno : 0;
}

int sb_io_sys_unlink(sb_io *io, const char *name)
{
    sb_io_sys *s = sys_of(io);
    if (!name)
        return -EINVAL;
    return unlinkat(s->dir_fd, name, 0) < 0 ? -errno : 0;
}

int sb_io_sys_list(sb_io *io, sb_io_list_fn fn, void *ctx)
{
    sb_io_sys *s = sys_of(io);
    if (!fn)
        return -EINVAL;
    /* fdopendir owns the fd it is given: list through a fresh one, so
     * concurrent lists do not share a directory offset either. */
    int fd = openat(s->dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    DIR *d = fdopendir(fd);
    if (!d) {
        int err = -errno;
        close(fd);
        return err;
    }
    int err = 0;
    for (;;) {
        errno = 0;
        struct dirent *e = readdir(d);
        if (!e) {
            err = -errno;           /* 0 at the end of the directory */
            break;
        }
        bool file = e->d_type == DT_REG;
        if (e->d_type == DT_UNKNOWN) {
            struct stat st;
            file = fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
        }
        if (file)
            fn(ctx, e->d_name);
    }
    closedir(d);
    return err;
}

int sb_io_sys_sync_dir(sb_io *io)
{
    sb_io_sys *s = sys_of(io);
    int r;
    do
        r = fsync(s->dir_fd);
    while (r < 0 && errno == EINTR);
    return r < 0 ? -errno : 0;
}

int sb_io_sys_space(sb_io *io, uint64_t *avail)
{
    struct statvfs v;
    if (fstatvfs(sys_of(io)->dir_fd, &v) < 0)
        return -errno;
    *avail = (uint64_t)v.f_bavail * v.f_frsize;
    return 0;
}

/* Read the pid written in a lock file; 0 when there is none. */
static long read_holder(int fd)
{
    char buf[32];
    ssize_t n = pread(fd, buf, sizeof buf, 0);
    return n > 0 ? sb_io_parse_pid(buf, (size_t)n) : 0;
}

int sb_io_sys_lock(sb_io *io, const char *name, long *holder_pid)
{
    sb_io_sys *s = sys_of(io);
    if (holder_pid)
        *holder_pid = 0;
    if (!name)
        return -EINVAL;
    pthread_mutex_lock(&s->lock_mu);
    int err = 0;
    int fd = -1;
    if (s->n_locks == SB_IO_MAX_LOCKS) {
        err = -EMFILE;
        goto out;
    }
    fd = openat(s->dir_fd, name, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        err = -errno;
        goto out;
    }
    /* flock locks belong to the open file description: a second open of
     * the same file conflicts even within this process. */
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        err = -errno;
        if (err == -EWOULDBLOCK && holder_pid)
            *holder_pid = read_holder(fd);
        goto out;
    }
    char buf[32];
    int len = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) < 0) {
        err = -errno;
        goto out;
    }
    ssize_t w = pwrite(fd, buf, (size_t)len, 0);
    if (w != len) {
        err = w < 0 ? -errno : -EIO;
        goto out;
    }
    s->lock_fds[s->n_locks++] = fd;
    fd = -1;
out:
    if (fd >= 0)
        close(fd);                      /* releases the flock, if taken */
    pthread_mutex_unlock(&s->lock_mu);
    return err;
}

unsigned sb_io_sys_reap_done(sb_io_sys *s, sb_io_req **done, unsigned max)
{
    unsigned n = 0;
    while (n < max && s->done.n > 0)
        done[n++] = sb_io_fifo_pop(&s->done);
    s->base.in_flight -= n;
    return n;
}

/* ---- the posix data path: run at submit, hand back at reap ------------ */

/* Run one request now; the result is bytes or -errno. EINTR means nothing
 * was transferred yet, so it is retried; a short count is returned as is. */
static int64_t run(const sb_io_req *r)
{
    ssize_t n;
    do {
        switch (r->op) {
        case SB_IO_READ:
            n = preadv(r->fd, r->iov, r->iovcnt, (off_t)r->off);
            break;
        case SB_IO_WRITE:
            n = pwritev(r->fd, r->iov, r->iovcnt, (off_t)r->off);
            break;
        default:
            n = fdatasync(r->fd);
            break;
        }
    } while (n < 0 && errno == EINTR);
    return n < 0 ? -errno : (int64_t)n;
}

static int posix_submit(sb_io *io, sb_io_req **reqs, unsigned n)
{
    sb_io_sys *s = sys_of(io);
    int err = sb_io_submit_args(reqs, n);
    if (err)
        return err;
    err = sb_io_fifo_reserve(&s->done, (size_t)io->in_flight + n);
    if (err)
        return err;
    for (unsigned i = 0; i < n; i++) {
        sb_io_req *r = reqs[i];
        uint64_t bytes;
        int bad = sb_io_req_check(r, &bytes);
        r->result = bad ? bad : run(r);
        sb_io_fifo_push(&s->done, r);
        io->in_flight++;
    }
    return (int)n;
}

static int posix_reap(sb_io *io, unsigned min, sb_io_req **done, unsigned max)
{
    int err = sb_io_reap_args(min, done, max);
    if (err)
        return err;
    /* Everything in flight is already complete: min is always met. */
    return (int)sb_io_sys_reap_done(sys_of(io), done, max);
}

static void posix_destroy(sb_io *io)
{
    sb_io_sys_fini(sys_of(io));
    free(io);
}

static const sb_io_ops posix_ops = {
    .open = sb_io_sys_open,
    .close = sb_io_sys_close,
    .size = sb_io_sys_size,
    .allocate = sb_io_sys_allocate,
    .truncate = sb_io_sys_truncate,
    .rename = sb_io_sys_rename,
    .unlink = sb_io_sys_unlink,
    .list = sb_io_sys_list,
    .sync_dir = sb_io_sys_sync_dir,
    .space = sb_io_sys_space,
    .lock = sb_io_sys_lock,
    .submit = posix_submit,
    .reap = posix_reap,
    .destroy = posix_destroy,
};

int sb_io_posix_new(const char *dir, sb_io **out)
{
    if (!out)
        return -EINVAL;
    *out = NULL;
    sb_io_sys *s = malloc(sizeof *s);
    if (!s)
        return -ENOMEM;
    int err = sb_io_sys_init(s, &posix_ops, dir);
    if (err) {
        free(s);
        return err;
    }
    *out = &s->base;
    return 0;
}
