/* io_uring.c -- the io_uring I/O backend: reads, writes and syncs go through
 * one ring (no SQPOLL, no registered files or buffers); the directory
 * operations are io_posix.c's.
 *
 * Requests in the ring. in_ring counts requests that have an SQE (submitted
 * to the kernel or only prepared) and whose CQE we have not harvested; it
 * never exceeds depth, so the completion queue (twice the submission
 * queue) can never overflow. Harvested completions wait in sys.done until
 * the caller reaps them: the caller may submit any number of requests
 * without reaping and never sees -EBUSY.
 *
 * Submitting a batch of n requests:
 *   1. Reserve room in sys.done for every request in flight plus n, so
 *      harvesting later can never fail to allocate.
 *   2. For each request: if the ring holds depth requests, submit what is
 *      prepared and wait for one completion, harvesting everything that
 *      has completed into sys.done (the full-ring path).
 *   3. Prepare its SQE; a SYNC carries IOSQE_IO_DRAIN so it starts after
 *      every earlier request has completed and later ones start after it
 *      (io_uring otherwise runs requests in any order).
 *   4. One io_uring_submit for whatever the batch left prepared.
 */
#define _GNU_SOURCE /* liburing.h uses cpu_set_t and O_* flags */
#include "io_int.h"

#include <errno.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>

#define URING_MAX_DEPTH 32768u /* the kernel's IORING_MAX_ENTRIES */

typedef struct sb_io_uring {
    sb_io_sys sys;          /* first: base, directory fd, done FIFO */
    struct io_uring ring;   /* [submitter] the ring */
    unsigned depth;         /* [const] most requests in the ring at once */
    unsigned in_ring;       /* [submitter] SQE given, CQE not yet harvested */
} sb_io_uring;

static sb_io_uring *uring_of(sb_io *io)
{
    return (sb_io_uring *)io;
}

/* Move every available CQE's request to sys.done (room was reserved). */
static void harvest(sb_io_uring *u)
{
    struct io_uring_cqe *cqe;
    unsigned head, n = 0;
    io_uring_for_each_cqe(&u->ring, head, cqe)
    {
        sb_io_req *r = io_uring_cqe_get_data(cqe);
        r->result = cqe->res;   /* bytes, or -errno: io_uring's convention */
        sb_io_fifo_push(&u->sys.done, r);
        n++;
    }
    io_uring_cq_advance(&u->ring, n);
    u->in_ring -= n;
}

/* Submit every prepared SQE and harvest until at least wait_nr completions
 * have been moved to sys.done (wait_nr <= in_ring). Returns 0 or the
 * negative errno of io_uring_enter; on failure the unsubmitted SQEs stay
 * prepared and the next call submits them. */
static int enter(sb_io_uring *u, unsigned wait_nr)
{
    unsigned got = 0;
    for (;;) {
        size_t before = u->sys.done.n;
        harvest(u);
        got += (unsigned)(u->sys.done.n - before);
        unsigned pending = io_uring_sq_ready(&u->ring);
        if (got >= wait_nr && pending == 0)
            return 0;
        unsigned want = got >= wait_nr ? 0 : wait_nr - got;
        int r = io_uring_submit_and_wait(&u->ring, want);
        if (r == -EINTR)
            continue;
        if (r == -EAGAIN || r == -EBUSY) {
            /* The kernel is short of resources: wait for one of ours to
             * finish, then try again. With nothing of ours in the kernel
             * waiting would never end. */
            if (u->in_ring == pending)
                return r;
            struct io_uring_cqe *cqe;
            r = io_uring_wait_cqe(&u->ring, &cqe);
            if (r < 0 && r != -EINTR)
                return r;
            continue;
        }
        if (r < 0)
            return r;
        if (r == 0 && pending > 0 && want == 0)
            return -EAGAIN;     /* the kernel took none of them: try later */
    }
}

static int uring_submit(sb_io *io, sb_io_req **reqs, unsigned n)
{
    sb_io_uring *u = uring_of(io);
    int err = sb_io_submit_args(reqs, n);
    if (err)
        return err;
    /* Step 1. */
    err = sb_io_fifo_reserve(&u->sys.done, (size_t)io->in_flight + n);
    if (err)
        return err;
    for (unsigned i = 0; i < n; i++) {
        sb_io_req *r = reqs[i];
        uint64_t bytes;
        int bad = sb_io_req_check(r, &bytes);
        if (bad) {
            r->result = bad;
            sb_io_fifo_push(&u->sys.done, r);
            io->in_flight++;
            continue;
        }
        /* Step 2. */
        if (u->in_ring == u->depth) {
            err = enter(u, 1);
            if (err)
                return i > 0 ? (int)i : err;
        }
        struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
        if (!sqe) {
            /* Cannot happen (prepared <= in_ring < depth <= SQ size);
             * flush and retry rather than trust that. */
            err = enter(u, 0);
            sqe = err ? NULL : io_uring_get_sqe(&u->ring);
            if (!sqe)
                return i > 0 ? (int)i : (err ? err : -EAGAIN);
        }
        /* Step 3. */
        switch (r->op) {
        case SB_IO_READ:
            io_uring_prep_readv(sqe, r->fd, r->iov, (unsigned)r->iovcnt, r->off);
            break;
        case SB_IO_WRITE:
            io_uring_prep_writev(sqe, r->fd, r->iov, (unsigned)r->iovcnt, r->off);
            break;
        default:
            io_uring_prep_fsync(sqe, r->fd, IORING_FSYNC_DATASYNC);
            io_uring_sqe_set_flags(sqe, IOSQE_IO_DRAIN);
            break;
        }
        io_uring_sqe_set_data(sqe, r);
        u->in_ring++;
        io->in_flight++;
    }
    /* Step 4. A failure here leaves the SQEs prepared: they are queued,
     * and the next submit or reap hands them to the kernel. */
    (void)enter(u, 0);
    return (int)n;
}

static int uring_reap(sb_io *io, unsigned min, sb_io_req **done, unsigned max)
{
    sb_io_uring *u = uring_of(io);
    int err = sb_io_reap_args(min, done, max);
    if (err)
        return err;
    if (min > io->in_flight)
        min = io->in_flight;
    size_t have = u->sys.done.n;
    err = enter(u, have >= min ? 0 : (unsigned)(min - have));
    if (err && u->sys.done.n < min)
        return err;
    return (int)sb_io_sys_reap_done(&u->sys, done, max);
}

static void uring_destroy(sb_io *io)
{
    sb_io_uring *u = uring_of(io);
    /* The kernel may still be reading into or writing from the caller's
     * buffers: wait for every request before the ring goes. */
    while (u->in_ring > 0)
        if (enter(u, 1) < 0)
            break;
    io_uring_queue_exit(&u->ring);
    sb_io_sys_fini(&u->sys);
    free(u);
}

static const sb_io_ops uring_ops = {
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
    .submit = uring_submit,
    .reap = uring_reap,
    .destroy = uring_destroy,
};

int sb_io_uring_new(const char *dir, unsigned queue_depth, sb_io **out)
{
    if (!out)
        return -EINVAL;
    *out = NULL;
    if (queue_depth == 0 || queue_depth > URING_MAX_DEPTH)
        return -EINVAL;
    sb_io_uring *u = malloc(sizeof *u);
    if (!u)
        return -ENOMEM;
    int err = sb_io_sys_init(&u->sys, &uring_ops, dir);
    if (err) {
        free(u);
        return err;
    }
    /* SUBMIT_ALL (5.18+): a request that fails at submission does not stop
     * the rest of the batch. Older kernels refuse the flag; enter() copes
     * without it by resubmitting what is left. */
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    p.flags = IORING_SETUP_SUBMIT_ALL;
    err = io_uring_queue_init_params(queue_depth, &u->ring, &p);
    if (err == -EINVAL) {
        memset(&p, 0, sizeof p);
        err = io_uring_queue_init_params(queue_depth, &u->ring, &p);
    }
    if (err) {
        sb_io_sys_fini(&u->sys);
        free(u);
        return err;
    }
    u->depth = queue_depth;
    u->in_ring = 0;
    *out = &u->sys.base;
    return 0;
}
