/* io.h -- the disk tier's I/O interface: directory and file operations plus
 * asynchronous reads, writes and syncs, behind swappable backends.
 *
 * The disk tier never calls the OS directly: it calls an sb_io. Backends:
 *
 *   sb_io_posix_new   plain syscalls; reads, writes and syncs complete
 *                     inside sb_io_submit (pread/pwritev/fdatasync).
 *   sb_io_uring_new   io_uring for reads, writes and syncs (batched
 *                     submissions, a configurable queue depth, no SQPOLL);
 *                     plain syscalls for the rest.
 *   sb_io_mem_new     an in-memory file system for tests: deterministic,
 *                     with fault injection (EIO, ENOSPC or a short write at
 *                     the Nth operation) and a simulated crash that keeps a
 *                     random subset of the 4 KiB units written since the
 *                     last sync, garbles some and drops the rest.
 *
 * Conventions (liburing's): every call returns 0 or a positive count on
 * success and a negative errno value on failure; errno itself is never the
 * interface. Paths are relative to the directory the backend was created
 * for (the store directory); file handles are small non-negative ints that
 * mean something only to their backend.
 *
 * Asynchronous requests. The caller owns sb_io_req structs and keeps them
 * alive until they complete. sb_io_submit queues up to n of them (a backend
 * may complete some at once); sb_io_reap waits for at least min completions
 * and returns up to max completed requests, with req->result set to the
 * bytes transferred or a negative errno. A short read or write is a
 * completion with fewer bytes than asked, never retried by the backend.
 * O_DIRECT files need 4096-aligned offsets, lengths and buffers.
 *
 * Order. Requests in flight together may run in any order (io_uring's
 * rule), so writes in flight together must not overlap, and a READ does not
 * see a WRITE still in flight. A SYNC is a barrier: it starts after every
 * request submitted before it has completed (so it covers every write
 * submitted before it, reaped or not) and requests submitted after it start
 * after it completes (io_uring: IOSQE_IO_DRAIN). A request that is invalid
 * (unknown op, bad iovcnt, negative fd) is not a submit error: it completes
 * with -EINVAL or -EBADF in its result.
 *
 * Thread safety: one thread submits and reaps on an sb_io at a time (the
 * disk tier's writer thread, or a reader holding its own sb_io); the other
 * calls may come from any thread.
 */
#ifndef SB_IO_H
#define SB_IO_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

typedef struct sb_io sb_io;

/* sb_io_open flags */
#define SB_IO_RDONLY 0x1u /* read only (default: read and write) */
#define SB_IO_CREATE 0x2u /* create if absent (mode 0600) */
#define SB_IO_EXCL 0x4u   /* with CREATE: fail with -EEXIST if present */
#define SB_IO_DIRECT 0x8u /* O_DIRECT: bypass the page cache */

/* Request kinds. */
enum { SB_IO_READ = 1, SB_IO_WRITE = 2, SB_IO_SYNC = 3 /* fdatasync */ };

typedef struct sb_io_req {
    int op;                  /* SB_IO_READ / WRITE / SYNC */
    int fd;                  /* file handle from sb_io_open */
    uint64_t off;            /* file offset (READ, WRITE) */
    const struct iovec *iov; /* buffers (READ, WRITE); borrowed until done */
    int iovcnt;
    void *user;              /* the caller's cookie, untouched */
    int64_t result;          /* set on completion: bytes, or -errno */
} sb_io_req;

/* What sb_io_list returns: one name per entry. */
typedef void (*sb_io_list_fn)(void *ctx, const char *name);

typedef struct sb_io_ops {
    /* Directory operations, relative to the store directory. */
    int (*open)(sb_io *io, const char *name, unsigned flags);  /* -> fd */
    int (*close)(sb_io *io, int fd);
    int (*size)(sb_io *io, int fd, uint64_t *bytes);
    int (*allocate)(sb_io *io, int fd, uint64_t bytes);        /* grow to at
                                   least bytes, preallocating (fallocate) */
    int (*truncate)(sb_io *io, int fd, uint64_t bytes);
    int (*rename)(sb_io *io, const char *from, const char *to); /* atomic */
    int (*unlink)(sb_io *io, const char *name);
    int (*list)(sb_io *io, sb_io_list_fn fn, void *ctx);       /* every file */
    int (*sync_dir)(sb_io *io);                                /* fsync(dir) */
    int (*space)(sb_io *io, uint64_t *avail); /* bytes the file system has
                                   free for an unprivileged user (statvfs:
                                   f_bavail * f_frsize) */
    /* Take an exclusive advisory lock on file name (created 0600), held
     * until destroy, and write our pid into it. Another holder: -EWOULDBLOCK
     * and *holder_pid = the pid written in the file (0 if unreadable). A
     * second sb_io on the same directory is another holder, even in this
     * process (flock locks belong to the open file). At most 4 locks per
     * sb_io (-EMFILE); holder_pid may be NULL. */
    int (*lock)(sb_io *io, const char *name, long *holder_pid);
    /* Asynchronous data path. submit returns how many of reqs[0, n) it
     * queued (all of them unless it fails part way; the caller resubmits
     * the rest), or -EINVAL (n > INT_MAX, a NULL entry), -ENOMEM with none
     * queued. reap caps min at the requests in flight (it never waits for
     * requests not submitted); -EINVAL when min > max. */
    int (*submit)(sb_io *io, sb_io_req **reqs, unsigned n);    /* -> queued */
    int (*reap)(sb_io *io, unsigned min, sb_io_req **done, unsigned max); /* -> n */
    /* destroy waits for requests still in flight (the kernel may be using
     * their buffers) and drops their completions; it releases the locks. */
    void (*destroy)(sb_io *io);
} sb_io_ops;

/* Every backend's handle starts with this. */
struct sb_io {
    const sb_io_ops *ops;
    _Atomic unsigned in_flight; /* submitted, not yet reaped; atomic because
                                   the mem backend's crash, run from another
                                   thread, zeroes it */
};

/* Backends. Each creates an sb_io for directory dir (which must exist; the
 * mem backend ignores dir) and returns 0 or a negative errno; *out is owned
 * by the caller and freed with sb_io_destroy. queue_depth (1..32768, else
 * -EINVAL) bounds the requests the kernel holds at once (io_uring: the
 * ring size); callers may have more in flight: when the ring is full,
 * sb_io_submit waits for a completion and keeps it for sb_io_reap. io_uring
 * errors: io_uring_queue_init's (-ENOMEM, -EPERM or -ENOSYS where io_uring
 * is disabled). */
int sb_io_posix_new(const char *dir, sb_io **out);
int sb_io_uring_new(const char *dir, unsigned queue_depth, sb_io **out);
int sb_io_mem_new(sb_io **out);

/* The mem backend's test controls. */

/* sb_io_mem_fail_at -- make the nth data or directory operation from now
 * (1 = the next) fail with err (-EIO, -ENOSPC; a positive errno is
 * negated), or, for a write with err == 0, complete short (half its bytes,
 * rounded down to 4096; 0 if that rounds to 0). 0 disarms. It fires once.
 * Every call counts: open, close, size, allocate, truncate, rename, unlink,
 * list, sync_dir, lock, and each request at sb_io_submit (its error shows
 * in its result at reap); space, reap, destroy and these controls do not. A
 * failed operation has no effect (a failed close leaves the fd open). With
 * err == 0, an nth operation that is not a WRITE runs normally and the
 * fault is spent. The fault belongs to the file system: a crash keeps it
 * armed. */
void sb_io_mem_fail_at(sb_io *io, uint64_t nth, int err);

/* sb_io_mem_crash -- simulate a power cut: every file's contents return to
 * what its last sync made durable, except that each 4 KiB unit written
 * since then independently survives (probability keep), is garbled
 * (probability garble: random bytes) or is lost; a file whose size changed
 * since its last sync gets its new size with probability keep, else the
 * old. Each creation, rename or unlink since the last sync_dir is kept
 * with probability keep, else undone. Requests in flight (submitted, not
 * reaped) are lost. seed makes it repeatable. Open handles become invalid
 * (later calls with them return -EBADF) and every lock is released: the
 * caller drops the store without closing it and reopens with the same
 * sb_io. Applies to every handle sharing the file system; every handle but
 * io is fenced besides (every later call returns -EIO), as a process the
 * power cut stopped does nothing more: a store's threads still running
 * until sb_store_crash change nothing on the file system that survived.
 * Returns: 0; -EINVAL (not a mem sb_io); -ENOMEM, nothing changed. */
int sb_io_mem_crash(sb_io *io, uint64_t seed, double keep, double garble);

/* sb_io_mem_share -- another handle on io's in-memory file system, like a
 * second sb_io on the same directory (a reader's, next to the writer's):
 * its own fds, requests and locks; the operation count, the fault and a
 * crash are shared. Free with sb_io_destroy; the file system goes with its
 * last handle. Returns: 0; -EINVAL (not a mem sb_io); -ENOMEM. */
int sb_io_mem_share(sb_io *io, sb_io **out);

/* sb_io_mem_set_space -- give the file system a size: a write, allocate
 * or truncate that would make the live files (whole 4 KiB units) exceed it
 * fails with -ENOSPC and has no effect; space reports what is left. 0
 * (the default) lifts the limit. Shrinking it below what is used only
 * stops growth. */
void sb_io_mem_set_space(sb_io *io, uint64_t bytes);

/* sb_io_mem_ops_count -- operations performed so far (for fault loops);
 * 0 for an sb_io that is not a mem one. */
uint64_t sb_io_mem_ops_count(const sb_io *io);

/* Convenience wrappers over the ops. */
static inline int sb_io_open(sb_io *io, const char *name, unsigned flags)
{
    return io->ops->open(io, name, flags);
}
static inline int sb_io_close(sb_io *io, int fd)
{
    return io->ops->close(io, fd);
}
static inline int sb_io_submit(sb_io *io, sb_io_req **reqs, unsigned n)
{
    return io->ops->submit(io, reqs, n);
}
static inline int sb_io_reap(sb_io *io, unsigned min, sb_io_req **done, unsigned max)
{
    return io->ops->reap(io, min, done, max);
}
static inline void sb_io_destroy(sb_io *io)
{
    if (io)
        io->ops->destroy(io);
}

/* sb_io_pread / sb_io_pwrite / sb_io_fdatasync -- one request, submitted
 * and waited for (other requests must not be in flight: -EBUSY if any
 * are). Returns: bytes (pread, pwrite; a short count is not an error) or 0
 * (fdatasync); a negative errno. */
int64_t sb_io_pread(sb_io *io, int fd, void *buf, size_t len, uint64_t off);
int64_t sb_io_pwrite(sb_io *io, int fd, const void *buf, size_t len, uint64_t off);
int sb_io_fdatasync(sb_io *io, int fd);

#endif /* SB_IO_H */
