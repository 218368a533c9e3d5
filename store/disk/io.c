/* io.c -- what every I/O backend shares: request checks, the completed-
 * request FIFO, and the one-request helpers sb_io_pread / sb_io_pwrite /
 * sb_io_fdatasync. */
#include "io_int.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

int sb_io_req_check(const sb_io_req *r, uint64_t *bytes)
{
    *bytes = 0;
    if (r->op != SB_IO_READ && r->op != SB_IO_WRITE && r->op != SB_IO_SYNC)
        return -EINVAL;
    if (r->fd < 0)
        return -EBADF;
    if (r->op == SB_IO_SYNC)
        return 0;
    if (r->iovcnt < 0 || r->iovcnt > SB_IO_IOV_MAX || (r->iovcnt > 0 && !r->iov) ||
        r->off > (uint64_t)INT64_MAX)
        return -EINVAL;
    uint64_t total = 0;
    for (int i = 0; i < r->iovcnt; i++) {
        if (r->iov[i].iov_len > (uint64_t)INT64_MAX - total)
            return -EINVAL;
        total += r->iov[i].iov_len;
    }
    *bytes = total;
    return 0;
}

int sb_io_submit_args(sb_io_req *const *reqs, unsigned n)
{
    if (n > INT_MAX || (n > 0 && !reqs))
        return -EINVAL;
    for (unsigned i = 0; i < n; i++)
        if (!reqs[i])
            return -EINVAL;
    return 0;
}

int sb_io_reap_args(unsigned min, sb_io_req **done, unsigned max)
{
    if (min > max || (max > 0 && !done))
        return -EINVAL;
    return 0;
}

int sb_io_fifo_reserve(sb_io_fifo *f, size_t want)
{
    if (want <= f->cap)
        return 0;
    size_t cap = f->cap ? f->cap : 16;
    while (cap < want)
        cap *= 2;
    sb_io_req **a = malloc(cap * sizeof *a);
    if (!a)
        return -ENOMEM;
    /* Unwrap the ring into the new array, oldest first. */
    for (size_t i = 0; i < f->n; i++)
        a[i] = f->a[(f->head + i) % f->cap];
    free(f->a);
    f->a = a;
    f->cap = cap;
    f->head = 0;
    return 0;
}

void sb_io_fifo_push(sb_io_fifo *f, sb_io_req *r)
{
    f->a[(f->head + f->n) % f->cap] = r;
    f->n++;
}

sb_io_req *sb_io_fifo_pop(sb_io_fifo *f)
{
    if (f->n == 0)
        return NULL;
    sb_io_req *r = f->a[f->head];
    f->head = (f->head + 1) % f->cap;
    f->n--;
    return r;
}

void sb_io_fifo_free(sb_io_fifo *f)
{
    free(f->a);
    memset(f, 0, sizeof *f);
}

long sb_io_parse_pid(const char *buf, size_t n)
{
    long pid = 0;
    for (size_t i = 0; i < n && buf[i] >= '0' && buf[i] <= '9'; i++) {
        if (pid > 100000000L)
            return 0;             /* no pid is that long: not ours */
        pid = pid * 10 + (buf[i] - '0');
    }
    return pid;
}

/* Submit one request and wait for it. The request lives on our stack, so
 * once it is submitted we must not return before it is reaped, unless
 * reaping itself fails (then the backend is broken anyway) or the backend
 * no longer holds it (a simulated crash dropped it). */
static int64_t one_request(sb_io *io, int op, int fd, void *buf, size_t len, uint64_t off)
{
    if (io->in_flight)
        return -EBUSY;
    struct iovec v = { .iov_base = buf, .iov_len = len };
    sb_io_req r = { .op = op, .fd = fd, .off = off, .iov = &v, .iovcnt = op == SB_IO_SYNC ? 0 : 1 };
    sb_io_req *rp = &r;
    int n = sb_io_submit(io, &rp, 1);
    if (n < 0)
        return n;
    if (n == 0)
        return -EAGAIN;
    sb_io_req *done = NULL;
    do
        n = sb_io_reap(io, 1, &done, 1);
    while (n == 0 && io->in_flight);
    if (n < 0)
        return n;
    if (n == 0) /* the backend dropped it (the mem backend's crash) */
        return -EIO;
    return r.result;
}

int64_t sb_io_pread(sb_io *io, int fd, void *buf, size_t len, uint64_t off)
{
    return one_request(io, SB_IO_READ, fd, buf, len, off);
}

int64_t sb_io_pwrite(sb_io *io, int fd, const void *buf, size_t len, uint64_t off)
{
    /* iovec's base is not const; a WRITE only reads through it. */
    void *p;
    memcpy(&p, &buf, sizeof p);
    return one_request(io, SB_IO_WRITE, fd, p, len, off);
}

int sb_io_fdatasync(sb_io *io, int fd)
{
    return (int)one_request(io, SB_IO_SYNC, fd, NULL, 0, 0);
}
