/* io_int.h -- what the I/O backends share: request checks, the FIFO of
 * completed requests, and the directory operations of the two syscall
 * backends (posix, io_uring), which live in io_posix.c.
 *
 * A syscall backend's handle starts with sb_io_sys (which starts with
 * sb_io), so the shared operations take the sb_io and cast it.
 *
 * Thread safety: sb_io_sys.done and sb_io.in_flight belong to the one thread
 * that submits and reaps; lock_fds is guarded by lock_mu; dir_fd is
 * [const]. The FIFO functions are not locked.
 */
#ifndef SB_IO_INT_H
#define SB_IO_INT_H

#include <pthread.h>

#include "io.h"

#define SB_IO_ALIGN 4096u   /* O_DIRECT alignment of offsets, lengths, buffers */
#define SB_IO_IOV_MAX 1024  /* Linux UIO_MAXIOV: most iovecs in one request */
#define SB_IO_MAX_LOCKS 4   /* locks one handle may hold (sb_io_ops.lock) */

/* sb_io_req_check -- the checks every backend makes before running a
 * request, so they agree on what is invalid. Sets *bytes to the request's
 * total length (0 for SYNC).
 * Returns: 0; -EBADF for a negative fd; -EINVAL for an unknown op, iovcnt
 * outside [0, SB_IO_IOV_MAX], a NULL iov with iovcnt > 0, off past
 * INT64_MAX or a total length past SSIZE_MAX. */
int sb_io_req_check(const sb_io_req *r, uint64_t *bytes);

/* sb_io_submit_args -- the argument checks of every backend's submit:
 * -EINVAL when n > INT_MAX, reqs is NULL with n > 0, or an entry is NULL;
 * else 0. (A bad request itself is not a submit error: it completes with
 * the error in its result.) */
int sb_io_submit_args(sb_io_req *const *reqs, unsigned n);

/* sb_io_reap_args -- the argument checks of every backend's reap: -EINVAL
 * when min > max or done is NULL with max > 0; else 0. */
int sb_io_reap_args(unsigned min, sb_io_req **done, unsigned max);

/* A FIFO of completed, not yet reaped requests: a ring buffer that grows.
 *
 *   a: [ . . . h0 h1 h2 . . ]   head = index of h0, n = 3, cap = len(a)
 */
typedef struct sb_io_fifo {
    sb_io_req **a;  /* cap slots, malloc'd */
    size_t cap;     /* slots in a */
    size_t head;    /* index of the oldest entry */
    size_t n;       /* entries */
} sb_io_fifo;

/* sb_io_fifo_reserve -- make room for want entries in all (so that much
 * pushing cannot fail). Returns: 0; -ENOMEM, the FIFO unchanged. */
int sb_io_fifo_reserve(sb_io_fifo *f, size_t want);
/* sb_io_fifo_push -- append r; there must be room (reserve first). */
void sb_io_fifo_push(sb_io_fifo *f, sb_io_req *r);
/* sb_io_fifo_pop -- the oldest entry, removed; NULL when empty. */
sb_io_req *sb_io_fifo_pop(sb_io_fifo *f);
/* sb_io_fifo_free -- release the slots (the requests are the caller's). */
void sb_io_fifo_free(sb_io_fifo *f);

/* The part of the posix and io_uring handles that is the same. */
typedef struct sb_io_sys {
    sb_io base;                      /* ops, in_flight */
    int dir_fd;                      /* [const] the store directory, O_RDONLY */
    pthread_mutex_t lock_mu;         /* guards lock_fds, n_locks */
    int lock_fds[SB_IO_MAX_LOCKS];   /* [lock_mu] flock'ed files, held to fini */
    unsigned n_locks;                /* [lock_mu] entries of lock_fds in use */
    sb_io_fifo done;                 /* completed requests waiting for reap */
} sb_io_sys;

/* sb_io_sys_init -- open dir and set up s with ops.
 * Returns: 0; -EINVAL (dir NULL); -ENOMEM; open(2)'s errors (-ENOENT,
 * -ENOTDIR, -EACCES, ...). On failure nothing is left to free. */
int sb_io_sys_init(sb_io_sys *s, const sb_io_ops *ops, const char *dir);
/* sb_io_sys_fini -- close the directory and the lock files, free done. */
void sb_io_sys_fini(sb_io_sys *s);

/* The shared directory operations (sb_io_ops members; see io.h). */
int sb_io_sys_open(sb_io *io, const char *name, unsigned flags);
int sb_io_sys_close(sb_io *io, int fd);
int sb_io_sys_size(sb_io *io, int fd, uint64_t *bytes);
int sb_io_sys_allocate(sb_io *io, int fd, uint64_t bytes);
int sb_io_sys_truncate(sb_io *io, int fd, uint64_t bytes);
int sb_io_sys_rename(sb_io *io, const char *from, const char *to);
int sb_io_sys_unlink(sb_io *io, const char *name);
int sb_io_sys_list(sb_io *io, sb_io_list_fn fn, void *ctx);
int sb_io_sys_sync_dir(sb_io *io);
int sb_io_sys_space(sb_io *io, uint64_t *avail);
int sb_io_sys_lock(sb_io *io, const char *name, long *holder_pid);

/* sb_io_sys_reap_done -- pop up to max entries of s->done into done[] and
 * account them in in_flight; returns how many. */
unsigned sb_io_sys_reap_done(sb_io_sys *s, sb_io_req **done, unsigned max);

/* sb_io_parse_pid -- the decimal pid at the start of buf[0, n); 0 if none. */
long sb_io_parse_pid(const char *buf, size_t n);

#endif /* SB_IO_INT_H */
