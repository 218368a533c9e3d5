/* io_mem.c -- the in-memory I/O backend for tests: a small file system with
 * a durable and a current state, fault injection at the Nth operation, and
 * a simulated power cut.
 *
 * Model. A file (mem_file, an inode) holds two byte arrays: cur, what reads
 * see, and dur, what its last SB_IO_SYNC made durable. The directory is two
 * name tables: cur (names now) and dur (names as of the last sync_dir), and
 * a log of the creations, renames and unlinks done since that sync_dir.
 * Reads, writes and syncs are queued at submit and run at reap, in
 * submission order (so a SYNC covers every write submitted before it, and a
 * crash drops what was not reaped).
 *
 * A crash (sb_io_mem_crash), from two splitmix64 streams seeded by the
 * seed (one for file contents, one for the directory):
 *   0. Reserve every allocation the crash needs, so one that runs out of
 *      memory changes nothing.
 *   1. Each file, in creation order: if cur and dur differ in size, its size
 *      becomes cur's with probability keep, else dur's (one draw). Then
 *      every 4 KiB unit inside that size whose cur and dur bytes differ
 *      (bytes past a size read as zeros) independently keeps cur's bytes
 *      (probability keep), gets random bytes (garble) or dur's (the rest).
 *      The result is both cur and dur.
 *   2. The directory: starting from the dur names, each logged change since
 *      the last sync_dir is replayed with probability keep, oldest first. A
 *      replayed rename moves its file even when its creation was not
 *      replayed (the same end state as both kept).
 *   3. Every handle on the file system loses its fds (later calls with them
 *      return -EBADF: fd numbers are not reused after a crash) and its
 *      queued requests; every lock is released. Every handle but the one
 *      the crash came through is fenced: like the process that held it,
 *      it changes nothing more (every call returns -EIO), so a store's
 *      threads still running between the crash and sb_store_crash cannot
 *      unlink or create files on the disk that survived. Handles shared
 *      from the crashing one afterwards (a reopened store's) are not.
 *   4. Files no name, fd or log entry refers to are freed.
 *
 * Several handles may share one file system (sb_io_mem_share): like
 * processes over one disk, each with its own fds, requests and locks; the
 * operation counter, the fault and a crash are the file system's.
 *
 * Thread safety: mem_fs.mu guards everything here, including each handle's
 * fds and queue (a crash reaches every handle); n_ops is atomic so
 * sb_io_mem_ops_count can read it through a const handle.
 */
#include "io_int.h"

#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MEM_UNIT 4096u  /* crash granularity and O_DIRECT alignment */
#define MEM_SHORT 1     /* fault: a write completes short (tick's result) */
#define MEM_NAME_MAX 255
#define MEM_FD_BASE 3   /* first fd number, as if stdio were open */

/* A byte array: contents in [0, size), zeros in [size, cap). */
typedef struct mem_bytes {
    uint8_t *p;     /* cap bytes, malloc'd; NULL when cap == 0 */
    uint64_t size;  /* bytes of contents */
    uint64_t cap;   /* bytes allocated, a multiple of MEM_UNIT */
} mem_bytes;

typedef struct mem_file {
    mem_bytes cur;      /* what reads see */
    mem_bytes dur;      /* the contents at the last SB_IO_SYNC */
    uint64_t dirty_lo;  /* bytes in [dirty_lo, dirty_hi) may differ between */
    uint64_t dirty_hi;  /*   cur and dur (zeros past either size count) */
    bool mark;          /* scratch for mem_gc */
} mem_file;

typedef struct mem_dirent {
    char *name;         /* malloc'd */
    mem_file *f;
} mem_dirent;

typedef struct mem_dir {
    mem_dirent *e;      /* n entries, in the order they were added */
    size_t n, cap;
} mem_dir;

enum { MEM_CREATE = 1, MEM_RENAME = 2, MEM_UNLINK = 3 };

/* A directory change since the last sync_dir. */
typedef struct mem_dirop {
    int kind;           /* MEM_CREATE / RENAME / UNLINK */
    char *name;         /* created, renamed from, or unlinked; malloc'd */
    char *to;           /* RENAME: the new name, malloc'd; else NULL */
    mem_file *f;        /* the file the change was about */
} mem_dirop;

typedef struct mem_held {
    char *name;                 /* malloc'd */
    struct sb_io_mem *owner;    /* the handle holding it */
} mem_held;

typedef struct mem_fd {
    mem_file *f;        /* NULL: slot free */
    unsigned flags;     /* SB_IO_* open flags */
} mem_fd;

typedef struct mem_req {
    sb_io_req *req;
    int fault;          /* 0, a negative errno to inject, or MEM_SHORT */
} mem_req;

typedef struct mem_fs {
    pthread_mutex_t mu;             /* guards everything below and the handles */
    unsigned refs;                  /* handles open on this file system */
    struct sb_io_mem **handles;     /* the refs handles */
    mem_file **files;               /* n_files live files, creation order */
    size_t n_files, cap_files;
    mem_dir cur;                    /* names now */
    mem_dir dur;                    /* names at the last sync_dir */
    mem_dirop *log;                 /* n_log changes since then, oldest first */
    size_t n_log, cap_log;
    mem_held *locks;                /* n_locks held locks */
    size_t n_locks, cap_locks;
    atomic_uint_fast64_t n_ops;     /* operations counted so far */
    uint64_t fail_at;               /* op number that faults; 0: none */
    int fail_err;                   /* its error, or 0: a short write */
    uint64_t space;                 /* file system size (sb_io_mem_set_space);
                                       0: as much as memory allows */
} mem_fs;

typedef struct sb_io_mem {
    sb_io base;         /* ops, in_flight */
    mem_fs *fs;         /* shared with sb_io_mem_share's handles */
    mem_fd *fds;        /* [fs->mu] n_fds slots; fd = fd_base + index */
    size_t n_fds;
    int fd_base;        /* [fs->mu] raised at each crash */
    bool fenced;        /* [fs->mu] a crash through another handle ended
                           this one: every call that begins returns -EIO */
    mem_req *q;         /* [fs->mu] ring of q_n queued requests from q_head */
    size_t q_head, q_n, q_cap;
} sb_io_mem;

static const sb_io_ops mem_ops;

static sb_io_mem *mem_of(sb_io *io)
{
    return (sb_io_mem *)io;
}

/* ---- randomness: splitmix64 ------------------------------------------- */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static double rng_unit(uint64_t *s)
{
    return (double)(rng_next(s) >> 11) * 0x1.0p-53;
}

/* ---- byte arrays -------------------------------------------------------- */

/* Returns: 0; -ENOSPC when memory runs out (the in-memory disk is full). */
static int bytes_reserve(mem_bytes *b, uint64_t want)
{
    if (want <= b->cap)
        return 0;
    if (want > (uint64_t)SIZE_MAX / 4)
        return -ENOSPC;
    uint64_t cap = b->cap ? b->cap : MEM_UNIT;
    while (cap < want)
        cap *= 2;
    uint8_t *p = realloc(b->p, (size_t)cap);
    if (!p)
        return -ENOSPC;
    memset(p + b->cap, 0, (size_t)(cap - b->cap));
    b->p = p;
    b->cap = cap;
    return 0;
}

/* Set the size, zero-filling growth. Returns: 0; -ENOSPC, b unchanged. */
static int bytes_resize(mem_bytes *b, uint64_t size)
{
    if (size > b->size) {
        int err = bytes_reserve(b, size);
        if (err)
            return err;
    } else if (b->size > size) {
        memset(b->p + size, 0, (size_t)(b->size - size));
    }
    b->size = size;
    return 0;
}

static void file_dirty(mem_file *f, uint64_t lo, uint64_t hi)
{
    if (lo >= hi)
        return;
    if (f->dirty_lo >= f->dirty_hi) {
        f->dirty_lo = lo;
        f->dirty_hi = hi;
        return;
    }
    if (lo < f->dirty_lo)
        f->dirty_lo = lo;
    if (hi > f->dirty_hi)
        f->dirty_hi = hi;
}

/* Change a file's current size. Returns: 0; -ENOSPC, nothing changed. */
static int file_resize(mem_file *f, uint64_t size)
{
    uint64_t old = f->cur.size;
    int err = bytes_resize(&f->cur, size);
    if (!err)
        file_dirty(f, old < size ? old : size, old < size ? size : old);
    return err;
}

static uint64_t units(uint64_t bytes)
{
    return (bytes + MEM_UNIT - 1) / MEM_UNIT * MEM_UNIT;
}

/* Bytes the live files take, in whole units. [fs->mu] */
static uint64_t space_used(const mem_fs *fs)
{
    uint64_t used = 0;
    for (size_t i = 0; i < fs->n_files; i++)
        used += units(fs->files[i]->cur.size);
    return used;
}

/* May f grow to size under the file system's size? Returns: 0; -ENOSPC. */
static int space_check(const mem_fs *fs, const mem_file *f, uint64_t size)
{
    if (!fs->space || size <= f->cur.size)
        return 0;
    uint64_t used = space_used(fs) - units(f->cur.size) + units(size);
    return used > fs->space ? -ENOSPC : 0;
}

static void file_free(mem_file *f)
{
    free(f->cur.p);
    free(f->dur.p);
    free(f);
}

/* ---- directory tables --------------------------------------------------- */

static mem_dirent *dir_find(mem_dir *d, const char *name)
{
    for (size_t i = 0; i < d->n; i++)
        if (strcmp(d->e[i].name, name) == 0)
            return &d->e[i];
    return NULL;
}

static int dir_reserve(mem_dir *d, size_t want)
{
    if (want <= d->cap)
        return 0;
    size_t cap = d->cap ? d->cap * 2 : 8;
    while (cap < want)
        cap *= 2;
    mem_dirent *e = realloc(d->e, cap * sizeof *e);
    if (!e)
        return -ENOMEM;
    d->e = e;
    d->cap = cap;
    return 0;
}

/* Point name at f; takes ownership of name. Needs room for one entry. */
static void dir_set(mem_dir *d, char *name, mem_file *f)
{
    mem_dirent *e = dir_find(d, name);
    if (e) {
        e->f = f;
        free(name);
        return;
    }
    d->e[d->n++] = (mem_dirent){ .name = name, .f = f };
}

static void dir_remove(mem_dir *d, mem_dirent *e)
{
    size_t i = (size_t)(e - d->e);
    free(e->name);
    memmove(&d->e[i], &d->e[i + 1], (d->n - i - 1) * sizeof *e);
    d->n--;
}

static void dir_free(mem_dir *d)
{
    for (size_t i = 0; i < d->n; i++)
        free(d->e[i].name);
    free(d->e);
    memset(d, 0, sizeof *d);
}

/* dst = a copy of src. Returns: 0; -ENOMEM, dst empty. */
static int dir_copy(mem_dir *dst, const mem_dir *src)
{
    memset(dst, 0, sizeof *dst);
    if (dir_reserve(dst, src->n ? src->n : 1))
        return -ENOMEM;
    for (size_t i = 0; i < src->n; i++) {
        char *name = strdup(src->e[i].name);
        if (!name) {
            dir_free(dst);
            return -ENOMEM;
        }
        dst->e[dst->n++] = (mem_dirent){ .name = name, .f = src->e[i].f };
    }
    return 0;
}

static void log_clear(mem_fs *fs)
{
    for (size_t i = 0; i < fs->n_log; i++) {
        free(fs->log[i].name);
        free(fs->log[i].to);
    }
    fs->n_log = 0;
}

static int log_reserve(mem_fs *fs)
{
    if (fs->n_log < fs->cap_log)
        return 0;
    size_t cap = fs->cap_log ? fs->cap_log * 2 : 16;
    mem_dirop *l = realloc(fs->log, cap * sizeof *l);
    if (!l)
        return -ENOMEM;
    fs->log = l;
    fs->cap_log = cap;
    return 0;
}

/* Replay one logged change onto d (crash step 2). Returns: 0; -ENOMEM. */
static int dirop_apply(mem_dir *d, const mem_dirop *op)
{
    const char *target = op->kind == MEM_RENAME ? op->to : op->name;
    mem_dirent *e = dir_find(d, op->name);
    if (op->kind != MEM_CREATE && e && e->f == op->f)
        dir_remove(d, e);
    if (op->kind == MEM_UNLINK)
        return 0;
    char *name = strdup(target);
    if (!name || dir_reserve(d, d->n + 1)) {
        free(name);
        return -ENOMEM;
    }
    dir_set(d, name, op->f);
    return 0;
}

/* ---- file system -------------------------------------------------------- */

/* Free the files nothing refers to any more (crash step 4), keeping the
 * creation order of the rest (a crash's draws follow it). */
static void mem_gc(mem_fs *fs)
{
    for (size_t i = 0; i < fs->n_files; i++)
        fs->files[i]->mark = false;
    for (size_t i = 0; i < fs->cur.n; i++)
        fs->cur.e[i].f->mark = true;
    for (size_t i = 0; i < fs->dur.n; i++)
        fs->dur.e[i].f->mark = true;
    for (size_t i = 0; i < fs->n_log; i++)
        fs->log[i].f->mark = true;
    for (unsigned h = 0; h < fs->refs; h++)
        for (size_t i = 0; i < fs->handles[h]->n_fds; i++)
            if (fs->handles[h]->fds[i].f)
                fs->handles[h]->fds[i].f->mark = true;
    size_t n = 0;
    for (size_t i = 0; i < fs->n_files; i++) {
        if (fs->files[i]->mark)
            fs->files[n++] = fs->files[i];
        else
            file_free(fs->files[i]);
    }
    fs->n_files = n;
}

/* Count one operation. Returns the fault it must suffer: 0, a negative
 * errno, or MEM_SHORT (only writes act on it). */
static int tick(mem_fs *fs)
{
    uint64_t n = atomic_fetch_add(&fs->n_ops, 1) + 1;
    if (fs->fail_at == 0 || n != fs->fail_at)
        return 0;
    fs->fail_at = 0;
    return fs->fail_err ? fs->fail_err : MEM_SHORT;
}

/* Lock the file system and count the operation. Returns its fault as in
 * tick, MEM_SHORT folded to 0 (for operations that are not writes). */
static int begin(sb_io_mem *m)
{
    pthread_mutex_lock(&m->fs->mu);
    if (m->fenced)
        return -EIO; /* a crashed process's handle: it changes nothing more */
    int fault = tick(m->fs);
    return fault == MEM_SHORT ? 0 : fault;
}

static int end(sb_io_mem *m, int ret)
{
    pthread_mutex_unlock(&m->fs->mu);
    return ret;
}

/* Names are flat: no directories. Returns: 0; -EINVAL (NULL, ".", "..");
 * -ENOENT (empty, or with a '/': no such directory); -ENAMETOOLONG. */
static int name_check(const char *name)
{
    if (!name || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return -EINVAL;
    if (!name[0] || strchr(name, '/'))
        return -ENOENT;
    if (strlen(name) > MEM_NAME_MAX)
        return -ENAMETOOLONG;
    return 0;
}

static mem_fd *fd_get(sb_io_mem *m, int fd)
{
    if (fd < m->fd_base || (size_t)(fd - m->fd_base) >= m->n_fds)
        return NULL;
    mem_fd *s = &m->fds[fd - m->fd_base];
    return s->f ? s : NULL;
}

/* A free fd slot's index, growing the table. Returns: index; -ENOMEM;
 * -EMFILE when fd numbers would pass INT_MAX. */
static int fd_slot(sb_io_mem *m)
{
    for (size_t i = 0; i < m->n_fds; i++)
        if (!m->fds[i].f)
            return (int)i;
    size_t n = m->n_fds ? m->n_fds * 2 : 8;
    if (n > (size_t)(INT_MAX - m->fd_base))
        return -EMFILE;
    mem_fd *fds = realloc(m->fds, n * sizeof *fds);
    if (!fds)
        return -ENOMEM;
    memset(fds + m->n_fds, 0, (n - m->n_fds) * sizeof *fds);
    int slot = (int)m->n_fds;
    m->fds = fds;
    m->n_fds = n;
    return slot;
}

/* Create name (absent from cur) as a new empty file, logging the creation.
 * Returns: 0 with *out set; -ENOMEM, nothing changed. */
static int file_create(mem_fs *fs, const char *name, mem_file **out)
{
    mem_file *f = calloc(1, sizeof *f);
    char *dname = strdup(name), *lname = strdup(name);
    if (!f || !dname || !lname || dir_reserve(&fs->cur, fs->cur.n + 1) || log_reserve(fs))
        goto nomem;
    if (fs->n_files == fs->cap_files) {
        size_t cap = fs->cap_files ? fs->cap_files * 2 : 16;
        mem_file **files = realloc(fs->files, cap * sizeof *files);
        if (!files)
            goto nomem;
        fs->files = files;
        fs->cap_files = cap;
    }
    fs->files[fs->n_files++] = f;
    dir_set(&fs->cur, dname, f);
    fs->log[fs->n_log++] = (mem_dirop){ .kind = MEM_CREATE, .name = lname, .f = f };
    *out = f;
    return 0;
nomem:
    free(f);
    free(dname);
    free(lname);
    return -ENOMEM;
}

/* ---- directory operations ----------------------------------------------- */

static int mem_open(sb_io *io, const char *name, unsigned flags)
{
    sb_io_mem *m = mem_of(io);
    mem_fs *fs = m->fs;
    int err = begin(m);
    if (err)
        return end(m, err);
    if (flags & ~(SB_IO_RDONLY | SB_IO_CREATE | SB_IO_EXCL | SB_IO_DIRECT))
        return end(m, -EINVAL);
    if ((err = name_check(name)))
        return end(m, err);
    int slot = fd_slot(m);
    if (slot < 0)
        return end(m, slot);
    mem_dirent *e = dir_find(&fs->cur, name);
    mem_file *f;
    if (e) {
        if ((flags & SB_IO_CREATE) && (flags & SB_IO_EXCL))
            return end(m, -EEXIST);
        f = e->f;
    } else {
        if (!(flags & SB_IO_CREATE))
            return end(m, -ENOENT);
        if ((err = file_create(fs, name, &f)))
            return end(m, err);
    }
    m->fds[slot] = (mem_fd){ .f = f, .flags = flags };
    return end(m, m->fd_base + slot);
}

static int mem_close(sb_io *io, int fd)
{
    sb_io_mem *m = mem_of(io);
    int err = begin(m);
    if (err)
        return end(m, err);
    mem_fd *s = fd_get(m, fd);
    if (!s)
        return end(m, -EBADF);
    s->f = NULL;
    mem_gc(m->fs);
    return end(m, 0);
}

static int mem_size(sb_io *io, int fd, uint64_t *bytes)
{
    sb_io_mem *m = mem_of(io);
    int err = begin(m);
    if (err)
        return end(m, err);
    if (!bytes)
        return end(m, -EINVAL);
    mem_fd *s = fd_get(m, fd);
    if (!s)
        return end(m, -EBADF);
    *bytes = s->f->cur.size;
    return end(m, 0);
}

static int mem_allocate(sb_io *io, int fd, uint64_t bytes)
{
    sb_io_mem *m = mem_of(io);
    int err = begin(m);
    if (err)
        return end(m, err);
    mem_fd *s = fd_get(m, fd);
    if (!s || (s->flags & SB_IO_RDONLY))
        return end(m, -EBADF);          /* fallocate(2) on a read-only fd */
    if (bytes > (uint64_t)INT64_MAX)
        return end(m, -EFBIG);
    if (bytes <= s->f->cur.size)
        return end(m, 0);
    if ((err = space_check(m->fs, s->f, bytes)))
        return end(m, err);
    return end(m, file_resize(s->f, bytes));
}

static int mem_truncate(sb_io *io, int fd, uint64_t bytes)
{
    sb_io_mem *m = mem_of(io);
    int err = begin(m);
    if (err)
        return end(m, err);
    mem_fd *s = fd_get(m, fd);
    if (!s)
        return end(m, -EBADF);
    if (s->flags & SB_IO_RDONLY)
        return end(m, -EINVAL);         /* ftruncate(2) on a read-only fd */
    if (bytes > (uint64_t)INT64_MAX)
        return end(m, -EFBIG);
    if ((err = space_check(m->fs, s->f, bytes)))
        return end(m, err);
    return end(m, file_resize(s->f, bytes));
}

static int mem_rename(sb_io *io, const char *from, const char *to)
{
    sb_io_mem *m = mem_of(io);
    mem_fs *fs = m->fs;
    int err = begin(m);
    if (err)
        return end(m, err);
    if ((err = name_check(from)) || (err = name_check(to)))
        return end(m, err);
    mem_dirent *e = dir_find(&fs->cur, from);
    if (!e)
        return end(m, -ENOENT);
    if (strcmp(from, to) == 0)
        return end(m, 0);               /* rename(2): same link, no-op */
    mem_file *f = e->f;
    char *dname = strdup(to), *lfrom = strdup(from), *lto = strdup(to);
    if (!dname || !lfrom || !lto || dir_reserve(&fs->cur, fs->cur.n + 1) || log_reserve(fs)) {
        free(dname);
        free(lfrom);
        free(lto);
        return end(m, -ENOMEM);
    }
    dir_set(&fs->cur, dname, f);        /* replaces what `to` named */
    dir_remove(&fs->cur, dir_find(&fs->cur, from));
    fs->log[fs->n_log++] = (mem_dirop){ .kind = MEM_RENAME, .name = lfrom, .to = lto, .f = f };
    mem_gc(fs);
    return end(m, 0);
}

static int mem_unlink(sb_io *io, const char *name)
{
    sb_io_mem *m = mem_of(io);
    mem_fs *fs = m->fs;
    int err = begin(m);
    if (err)
        return end(m, err);
    if ((err = name_check(name)))
        return end(m, err);
    mem_dirent *e = dir_find(&fs->cur, name);
    if (!e)
        return end(m, -ENOENT);
    char *lname = strdup(name);
    if (!lname || log_reserve(fs)) {
        free(lname);
        return end(m, -ENOMEM);
    }
    fs->log[fs->n_log++] = (mem_dirop){ .kind = MEM_UNLINK, .name = lname, .f = e->f };
    dir_remove(&fs->cur, e);
    mem_gc(fs);                         /* an open fd keeps the file alive */
    return end(m, 0);
}

static int mem_list(sb_io *io, sb_io_list_fn fn, void *ctx)
{
    sb_io_mem *m = mem_of(io);
    mem_fs *fs = m->fs;
    int err = begin(m);
    if (err)
        return end(m, err);
    if (!fn)
        return end(m, -EINVAL);
    /* Call fn without the lock held, so it may call back into io. */
    size_t n = fs->cur.n;
    char **names = calloc(n ? n : 1, sizeof *names);
    for (size_t i = 0; names && i < n; i++) {
        if (!(names[i] = strdup(fs->cur.e[i].name))) {
            for (size_t j = 0; j < i; j++)
                free(names[j]);
            free(names);
            names = NULL;
        }
    }
    if (!names)
        return end(m, -ENOMEM);
    end(m, 0);
    for (size_t i = 0; i < n; i++) {
        fn(ctx, names[i]);
        free(names[i]);
    }
    free(names);
    return 0;
}

static int mem_sync_dir(sb_io *io)
{
    sb_io_mem *m = mem_of(io);
    mem_fs *fs = m->fs;
    int err = begin(m);
    if (err)
        return end(m, err);
    mem_dir d;
    if (dir_copy(&d, &fs->cur))
        return end(m, -ENOMEM);
    dir_free(&fs->dur);
    fs->dur = d;
    log_clear(fs);
    mem_gc(fs);
    return end(m, 0);
}

/* Not counted as an operation, and never faulted. */
static int mem_space(sb_io *io, uint64_t *avail)
{
    mem_fs *fs = mem_of(io)->fs;
    pthread_mutex_lock(&fs->mu);
    uint64_t used = space_used(fs);
    *avail = !fs->space ? (1ull << 50) : used < fs->space ? fs->space - used : 0;
    pthread_mutex_unlock(&fs->mu);
    return 0;
}

static int mem_lock(sb_io *io, const char *name, long *holder_pid)
{
    sb_io_mem *m = mem_of(io);
    mem_fs *fs = m->fs;
    if (holder_pid)
        *holder_pid = 0;
    int err = begin(m);
    if (err)
        return end(m, err);
    if ((err = name_check(name)))
        return end(m, err);
    mem_dirent *e = dir_find(&fs->cur, name);
    for (size_t i = 0; i < fs->n_locks; i++) {
        if (strcmp(fs->locks[i].name, name) != 0)
            continue;
        if (holder_pid && e)
            *holder_pid = sb_io_parse_pid((const char *)e->f->cur.p, (size_t)e->f->cur.size);
        return end(m, -EWOULDBLOCK);
    }
    if (fs->n_locks == fs->cap_locks) {
        size_t cap = fs->cap_locks ? fs->cap_locks * 2 : 4;
        mem_held *l = realloc(fs->locks, cap * sizeof *l);
        if (!l)
            return end(m, -ENOMEM);
        fs->locks = l;
        fs->cap_locks = cap;
    }
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    char *lname = strdup(name);
    mem_file *f = e ? e->f : NULL;
    if (!lname || (!f && (err = file_create(fs, name, &f)))) {
        free(lname);
        return end(m, -ENOMEM);
    }
    /* The file stays (created if need be) even if writing the pid fails,
     * as with the posix backend. */
    if ((err = bytes_reserve(&f->cur, (uint64_t)len))) {
        free(lname);
        return end(m, err);
    }
    file_resize(f, 0);
    file_resize(f, (uint64_t)len);      /* cannot fail: reserved */
    memcpy(f->cur.p, pid, (size_t)len);
    fs->locks[fs->n_locks++] = (mem_held){ .name = lname, .owner = m };
    return end(m, 0);
}

/* Release every lock owner holds (all when owner is NULL). */
static void locks_release(mem_fs *fs, const sb_io_mem *owner)
{
    size_t n = 0;
    for (size_t i = 0; i < fs->n_locks; i++) {
        if (!owner || fs->locks[i].owner == owner)
            free(fs->locks[i].name);
        else
            fs->locks[n++] = fs->locks[i];
    }
    fs->n_locks = n;
}

/* ---- data path: queued at submit, run at reap ----------------------------- */

static bool direct_ok(const sb_io_req *r)
{
    if (r->off % MEM_UNIT)
        return false;
    for (int i = 0; i < r->iovcnt; i++)
        if ((uintptr_t)r->iov[i].iov_base % MEM_UNIT || r->iov[i].iov_len % MEM_UNIT)
            return false;
    return true;
}

/* Run one request; its result is bytes or -errno. */
static int64_t run(sb_io_mem *m, const sb_io_req *r, int fault)
{
    uint64_t bytes;
    int err = sb_io_req_check(r, &bytes);
    if (fault < 0)
        return fault;                   /* injected: no effect */
    if (err)
        return err;
    mem_fd *s = fd_get(m, r->fd);
    if (!s)
        return -EBADF;
    mem_file *f = s->f;
    if (r->op == SB_IO_SYNC) {
        if ((err = bytes_reserve(&f->dur, f->cur.size)))
            return err;
        uint64_t lo = f->dirty_lo, hi = f->dirty_hi;
        if (hi > f->cur.size)
            hi = f->cur.size;
        if (lo < hi)
            memcpy(f->dur.p + lo, f->cur.p + lo, (size_t)(hi - lo));
        bytes_resize(&f->dur, f->cur.size); /* cannot fail: reserved */
        f->dirty_lo = f->dirty_hi = 0;
        return 0;
    }
    if ((s->flags & SB_IO_DIRECT) && !direct_ok(r))
        return -EINVAL;
    uint64_t pos = r->off;
    if (r->op == SB_IO_READ) {
        uint64_t got = 0;
        for (int i = 0; i < r->iovcnt && pos < f->cur.size; i++) {
            uint64_t n = r->iov[i].iov_len;
            if (n > f->cur.size - pos)
                n = f->cur.size - pos;
            if (n)
                memcpy(r->iov[i].iov_base, f->cur.p + pos, (size_t)n);
            pos += n;
            got += n;
        }
        return (int64_t)got;
    }
    if (s->flags & SB_IO_RDONLY)
        return -EBADF;
    if (fault == MEM_SHORT)
        bytes = bytes / 2 / MEM_UNIT * MEM_UNIT;
    if (bytes == 0)
        return 0;
    if (bytes > (uint64_t)INT64_MAX - pos)
        return -EFBIG;
    if (pos + bytes > f->cur.size &&
        ((err = space_check(m->fs, f, pos + bytes)) || (err = file_resize(f, pos + bytes))))
        return err;
    file_dirty(f, pos, pos + bytes);
    uint64_t left = bytes;
    for (int i = 0; i < r->iovcnt && left > 0; i++) {
        uint64_t n = r->iov[i].iov_len < left ? r->iov[i].iov_len : left;
        if (n)
            memcpy(f->cur.p + pos, r->iov[i].iov_base, (size_t)n);
        pos += n;
        left -= n;
    }
    return (int64_t)bytes;
}

static int mem_submit(sb_io *io, sb_io_req **reqs, unsigned n)
{
    sb_io_mem *m = mem_of(io);
    int err = sb_io_submit_args(reqs, n);
    if (err)
        return err;
    pthread_mutex_lock(&m->fs->mu);
    if (m->q_n + n > m->q_cap) {
        size_t cap = m->q_cap ? m->q_cap : 16;
        while (cap < m->q_n + n)
            cap *= 2;
        mem_req *q = malloc(cap * sizeof *q);
        if (!q)
            return end(m, -ENOMEM);
        for (size_t i = 0; i < m->q_n; i++)
            q[i] = m->q[(m->q_head + i) % m->q_cap];
        free(m->q);
        m->q = q;
        m->q_cap = cap;
        m->q_head = 0;
    }
    for (unsigned i = 0; i < n; i++) {
        m->q[(m->q_head + m->q_n) % m->q_cap] = (mem_req){ .req = reqs[i], .fault = tick(m->fs) };
        m->q_n++;
        io->in_flight++;
    }
    return end(m, (int)n);
}

static int mem_reap(sb_io *io, unsigned min, sb_io_req **done, unsigned max)
{
    sb_io_mem *m = mem_of(io);
    int err = sb_io_reap_args(min, done, max);
    if (err)
        return err;
    pthread_mutex_lock(&m->fs->mu);
    /* Every queued request can run now, so min is always met. */
    unsigned k = 0;
    while (k < max && m->q_n > 0) {
        mem_req q = m->q[m->q_head];
        m->q_head = (m->q_head + 1) % m->q_cap;
        m->q_n--;
        q.req->result = run(m, q.req, q.fault);
        done[k++] = q.req;
    }
    io->in_flight -= k;
    return end(m, (int)k);
}

/* ---- crash ---------------------------------------------------------------- */

/* Step 1 for one file, in place (both buffers hold at least the larger
 * size: step 0). The new contents are built in dur, then copied to cur;
 * outside [dirty_lo, dirty_hi) the two are already equal. */
static void crash_file(mem_file *f, uint64_t *rng, double keep, double garble)
{
    uint64_t size = f->dur.size;
    if (f->cur.size != f->dur.size && rng_unit(rng) < keep)
        size = f->cur.size;
    /* The dirty range widened to whole units (a garbled unit is garbled
     * whole), within the new size. */
    uint64_t lo = f->dirty_lo / MEM_UNIT * MEM_UNIT;
    uint64_t hi = (f->dirty_hi + MEM_UNIT - 1) / MEM_UNIT * MEM_UNIT;
    if (hi > size)
        hi = size;
    if (f->dirty_lo >= f->dirty_hi || lo > hi)
        hi = lo;
    /* Past its size each buffer is zero up to its capacity, so the units
     * compare in place. */
    for (uint64_t off = lo; off < hi; off += MEM_UNIT) {
        size_t len = (size_t)(size - off < MEM_UNIT ? size - off : MEM_UNIT);
        uint8_t *c = f->cur.p + off, *d = f->dur.p + off;
        if (memcmp(c, d, len) == 0)
            continue;
        double x = rng_unit(rng);
        if (x < keep) {
            memcpy(d, c, len);
        } else if (x < keep + garble) {
            for (size_t i = 0; i < len; i += 8) {
                uint64_t v = rng_next(rng);
                memcpy(d + i, &v, len - i < 8 ? len - i : 8);
            }
        }                               /* else: dur's bytes stay */
    }
    bytes_resize(&f->dur, size);        /* cannot fail: step 0 reserved */
    if (lo < hi)
        memcpy(f->cur.p + lo, f->dur.p + lo, (size_t)(hi - lo));
    bytes_resize(&f->cur, size);
    f->dirty_lo = f->dirty_hi = 0;
}

/* Drop a handle's fds and queued requests (step 3). */
static void handle_reset(sb_io_mem *m)
{
    int next = m->fd_base + (int)m->n_fds + 1;
    m->fd_base = next > INT_MAX / 2 ? MEM_FD_BASE : next;
    if (m->n_fds)
        memset(m->fds, 0, m->n_fds * sizeof *m->fds);
    m->q_head = m->q_n = 0;
    m->base.in_flight = 0;
}

int sb_io_mem_crash(sb_io *io, uint64_t seed, double keep, double garble)
{
    if (!io || io->ops != &mem_ops)
        return -EINVAL;
    mem_fs *fs = mem_of(io)->fs;
    pthread_mutex_lock(&fs->mu);
    uint64_t file_rng = seed, dir_rng = seed ^ 0xD1B54A32D192ED03ull;
    int err = 0;
    mem_dir d = { 0 }, d2 = { 0 };
    /* Step 0: every allocation the crash needs. Growing a buffer's
     * capacity changes no contents, so failing here changes nothing. */
    for (size_t i = 0; i < fs->n_files && !err; i++) {
        mem_file *f = fs->files[i];
        uint64_t big = f->cur.size > f->dur.size ? f->cur.size : f->dur.size;
        err = bytes_reserve(&f->cur, big);
        if (!err)
            err = bytes_reserve(&f->dur, big);
    }
    /* Step 2, computed now (it allocates) from its own stream. */
    if (!err)
        err = dir_copy(&d, &fs->dur);
    for (size_t i = 0; i < fs->n_log && !err; i++)
        if (rng_unit(&dir_rng) < keep)
            err = dirop_apply(&d, &fs->log[i]);
    if (!err)
        err = dir_copy(&d2, &d);
    if (err) {
        dir_free(&d);
        dir_free(&d2);
        pthread_mutex_unlock(&fs->mu);
        return -ENOMEM;
    }
    /* Step 1. */
    for (size_t i = 0; i < fs->n_files; i++)
        crash_file(fs->files[i], &file_rng, keep, garble);
    dir_free(&fs->cur);
    dir_free(&fs->dur);
    fs->cur = d;
    fs->dur = d2;
    log_clear(fs);
    /* Step 3. */
    for (unsigned h = 0; h < fs->refs; h++) {
        handle_reset(fs->handles[h]);
        fs->handles[h]->fenced = fs->handles[h] != mem_of(io);
    }
    locks_release(fs, NULL);
    /* Step 4. */
    mem_gc(fs);
    pthread_mutex_unlock(&fs->mu);
    return 0;
}

/* ---- handles -------------------------------------------------------------- */

void sb_io_mem_fail_at(sb_io *io, uint64_t nth, int err)
{
    if (!io || io->ops != &mem_ops)
        return;
    mem_fs *fs = mem_of(io)->fs;
    pthread_mutex_lock(&fs->mu);
    fs->fail_at = nth ? atomic_load(&fs->n_ops) + nth : 0;
    fs->fail_err = err > 0 ? -err : err;
    pthread_mutex_unlock(&fs->mu);
}

void sb_io_mem_set_space(sb_io *io, uint64_t bytes)
{
    if (!io || io->ops != &mem_ops)
        return;
    mem_fs *fs = mem_of(io)->fs;
    pthread_mutex_lock(&fs->mu);
    fs->space = bytes;
    pthread_mutex_unlock(&fs->mu);
}

uint64_t sb_io_mem_ops_count(const sb_io *io)
{
    if (!io || io->ops != &mem_ops)
        return 0;
    return atomic_load(&((const sb_io_mem *)io)->fs->n_ops);
}

static void fs_free(mem_fs *fs)
{
    for (size_t i = 0; i < fs->n_files; i++)
        file_free(fs->files[i]);
    free(fs->files);
    dir_free(&fs->cur);
    dir_free(&fs->dur);
    log_clear(fs);
    free(fs->log);
    locks_release(fs, NULL);
    free(fs->locks);
    free(fs->handles);
    pthread_mutex_destroy(&fs->mu);
    free(fs);
}

static void mem_destroy(sb_io *io)
{
    sb_io_mem *m = mem_of(io);
    mem_fs *fs = m->fs;
    pthread_mutex_lock(&fs->mu);
    for (unsigned h = 0; h < fs->refs; h++) {
        if (fs->handles[h] == m) {
            fs->handles[h] = fs->handles[--fs->refs];
            break;
        }
    }
    locks_release(fs, m);
    bool last = fs->refs == 0;
    if (!last)
        mem_gc(fs);                     /* m's fds no longer count */
    pthread_mutex_unlock(&fs->mu);
    if (last)
        fs_free(fs);
    free(m->fds);
    free(m->q);
    free(m);
}

static const sb_io_ops mem_ops = {
    .open = mem_open,
    .close = mem_close,
    .size = mem_size,
    .allocate = mem_allocate,
    .truncate = mem_truncate,
    .rename = mem_rename,
    .unlink = mem_unlink,
    .list = mem_list,
    .sync_dir = mem_sync_dir,
    .space = mem_space,
    .lock = mem_lock,
    .submit = mem_submit,
    .reap = mem_reap,
    .destroy = mem_destroy,
};

/* A new handle on fs (fs->mu held, or fs not yet shared). */
static int handle_new(mem_fs *fs, sb_io **out)
{
    sb_io_mem *m = calloc(1, sizeof *m);
    sb_io_mem **hs = m ? realloc(fs->handles, (fs->refs + 1) * sizeof *hs) : NULL;
    if (!hs) {
        free(m);
        return -ENOMEM;
    }
    fs->handles = hs;
    fs->handles[fs->refs++] = m;
    m->base.ops = &mem_ops;
    m->fs = fs;
    m->fd_base = MEM_FD_BASE;
    *out = &m->base;
    return 0;
}

int sb_io_mem_new(sb_io **out)
{
    if (!out)
        return -EINVAL;
    *out = NULL;
    mem_fs *fs = calloc(1, sizeof *fs);
    if (!fs)
        return -ENOMEM;
    int err = pthread_mutex_init(&fs->mu, NULL);
    if (err) {
        free(fs);
        return -err;
    }
    atomic_init(&fs->n_ops, 0);
    if ((err = handle_new(fs, out))) {
        fs_free(fs);
        return err;
    }
    return 0;
}

int sb_io_mem_share(sb_io *io, sb_io **out)
{
    if (!out)
        return -EINVAL;
    *out = NULL;
    if (!io || io->ops != &mem_ops)
        return -EINVAL;
    mem_fs *fs = mem_of(io)->fs;
    pthread_mutex_lock(&fs->mu);
    int err = handle_new(fs, out);
    pthread_mutex_unlock(&fs->mu);
    return err;
}
