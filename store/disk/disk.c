/* disk.c -- the disk tier's frame: opening a store directory (lock, create or
 * recover, start the writer), closing it, the superblock and the segment
 * life cycle (create, note records, seal with a summary), and the small
 * calls the RAM tier makes into the tier (queueing, durability, gauges).
 *
 * A store directory holds LOCK, superblock and seg-<id>.dat / .sum files
 * (format.h draws them). A segment is created preallocated, listed OPEN in
 * the superblock (synced) before any record is written to it, and sealed
 * when full, when a write to it failed, or at close: synced, its summary
 * written under a temporary name, synced and renamed, and listed SEALED.
 * A new segment's generation is the superblock's write count at its
 * creation, so it differs from every earlier life of a file with its name.
 */
#define _GNU_SOURCE /* keeps mkdir & co. visible */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "compress.h"
#include "disk_int.h"
#include "host.h"
#include "internal.h"

static void disk_attach(sb_store *st, sb_disk *d);

int sb_disk_errno(int64_t err)
{
    switch (-err) {
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
        return SB_ERR_NOSPC;
    case ENOMEM:
        return SB_ERR_NOMEM;
    default:
        return SB_ERR_IO;
    }
}

void sb_disk_seg_name(char *buf, uint32_t id, const char *ext)
{
    snprintf(buf, 32, "seg-%08u.%s", id, ext);
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- superblock --------------------------------------------------------------- */

int sb_disk_super_write(sb_disk *d)
{
    sb_super_seg *segs = calloc(d->n_segs ? d->n_segs : 1, sizeof *segs);
    uint8_t *buf = aligned_alloc(4096, d->slot_bytes);
    if (!segs || !buf) {
        free(segs);
        free(buf);
        return SB_ERR_NOMEM;
    }
    pthread_mutex_lock(&d->st->mu);
    for (uint32_t i = 0; i < d->n_segs; i++)
        segs[i] = (sb_super_seg){ d->segs[i].id, d->segs[i].gen, d->segs[i].state,
                                  d->segs[i].state == SB_SEG_SEALED ? d->segs[i].data_end : 0 };
    uint64_t durable = d->durable_seq;
    uint64_t wear_write = d->wear_write0 + d->write_bytes + d->slot_bytes;
    uint64_t wear_logical = d->wear_logical0 + d->wa_logical;
    uint64_t wear_reinsert = d->wear_reinsert0 + d->wa_reinsert;
    bool tombstones = d->tomb_mark;
    pthread_mutex_unlock(&d->st->mu);
    d->write_count++;
    sb_super s = {
        .slot = (uint16_t)(d->write_count & 1),
        .slot_bytes = d->slot_bytes,
        .write_count = d->write_count,
        .store_id = d->store_id,
        .segment_bytes = d->seg_bytes,
        .durable_seq = durable,
        .n_segments = d->n_segs,
        .segments = segs,
        .wear_write = wear_write, /* this write included */
        .wear_logical = wear_logical,
        .wear_reinsert = wear_reinsert,
        .tombstones = tombstones, /* version 3 */
    };
    int rc = sb_super_encode(&s, buf);
    if (rc == SB_OK) {
        int64_t n = sb_io_pwrite(d->wio, d->sb_fd, buf, d->slot_bytes,
                                 (uint64_t)s.slot * d->slot_bytes);
        if (n < 0)
            rc = sb_disk_errno(n);
        else if ((uint64_t)n != d->slot_bytes)
            rc = SB_ERR_IO;
        else if ((n = sb_io_fdatasync(d->wio, d->sb_fd)) < 0)
            rc = sb_disk_errno(n);
    }
    pthread_mutex_lock(&d->st->mu);
    d->write_bytes += d->slot_bytes;
    d->wa_super += d->slot_bytes;
    sb_disk_debit(d, d->slot_bytes);
    pthread_mutex_unlock(&d->st->mu);
    free(segs);
    free(buf);
    return rc;
}

int sb_disk_read_super(sb_io *io, int fd, uint64_t size, sb_super *s, sb_super_seg *segs,
                       uint32_t max_segs)
{
    if (size < 2 * SB_FMT_BLOCK || size % (2 * SB_FMT_BLOCK) || size / 2 > UINT32_MAX)
        return SB_ERR_FORMAT;
    uint32_t slot = (uint32_t)(size / 2);
    uint8_t *buf = aligned_alloc(4096, slot);
    sb_super_seg *tmp = calloc(max_segs ? max_segs : 1, sizeof *tmp);
    if (!buf || !tmp) {
        free(buf);
        free(tmp);
        return SB_ERR_NOMEM;
    }
    int best = SB_ERR_FORMAT, found = 0;
    for (uint32_t k = 0; k < 2; k++) {
        int64_t n = sb_io_pread(io, fd, buf, slot, (uint64_t)k * slot);
        if (n < 0) {
            best = SB_ERR_IO;
            continue;
        }
        if ((uint64_t)n != slot)
            continue;
        sb_super c;
        int rc = sb_super_decode(buf, slot, &c, tmp, max_segs);
        if (rc == SB_ERR_VERSION && !sb_super_other_version(buf, slot))
            rc = SB_ERR_CORRUPT; /* a damaged version field, not another version */
        if (rc == SB_OK && c.slot_bytes == slot && c.slot == k) {
            if (!found || c.write_count > s->write_count) {
                *s = c;
                memcpy(segs, tmp, (size_t)c.n_segments * sizeof *segs);
                s->segments = segs;
            }
            found = 1;
        } else if (!found && rc != SB_OK && (best == SB_ERR_FORMAT || rc == SB_ERR_VERSION)) {
            best = rc == SB_ERR_RANGE ? SB_ERR_FORMAT : rc;
        }
    }
    free(buf);
    free(tmp);
    return found ? SB_OK : best;
}

/* ---- segments ------------------------------------------------------------------ */

int sb_disk_seg_note(sb_disk *d, uint32_t i, uint64_t off, const sb_rec_head *h,
                     const uint32_t *tokens, const void *extra)
{
    sb_seg *s = &d->segs[i];
    uint32_t bytes = sb_sum_entry_size(h->n_tokens, h->extra_bytes);
    if (s->sum_len + bytes > s->sum_cap) {
        size_t cap = s->sum_cap ? s->sum_cap * 2 : 65536;
        while (cap < s->sum_len + bytes)
            cap *= 2;
        uint8_t *p = realloc(s->sum, cap);
        if (!p)
            return SB_ERR_NOMEM;
        s->sum = p;
        s->sum_cap = cap;
    }
    if (s->n_ent == s->ent_cap) {
        size_t cap = s->ent_cap ? s->ent_cap * 2 : 256;
        sb_seg_ent *p = realloc(s->ent, cap * sizeof *p);
        if (!p)
            return SB_ERR_NOMEM;
        s->ent = p;
        s->ent_cap = cap;
    }
    sb_sum_put_entry(s->sum + s->sum_len, off, h, tokens, extra);
    s->ent[s->n_ent++] = (sb_seg_ent){ off, s->sum_len, bytes };
    s->sum_len += bytes;
    if (!s->first_seq || h->seq < s->first_seq)
        s->first_seq = h->seq;
    if (h->seq > s->last_seq)
        s->last_seq = h->seq;
    return SB_OK;
}

void sb_disk_seg_free(sb_disk *d, sb_seg *s)
{
    if (s->wfd >= 0)
        sb_io_close(d->wio, s->wfd);
    s->wfd = -1;
    free(s->sum);
    free(s->ent);
    free(s->ns_ids);
    s->sum = NULL;
    s->ent = NULL;
    s->ns_ids = NULL;
    s->sum_len = s->sum_cap = s->n_ent = s->ent_cap = s->n_ns = s->ns_cap = 0;
}

static int ent_cmp(const void *a, const void *b)
{
    uint64_t x = ((const sb_seg_ent *)a)->off, y = ((const sb_seg_ent *)b)->off;
    return x < y ? -1 : x > y;
}

/* Write segment s's summary file (entries sorted by offset), atomically. */
static int write_summary(sb_disk *d, sb_seg *s, uint64_t data_end)
{
    if (s->n_ent)
        qsort(s->ent, s->n_ent, sizeof *s->ent, ent_cmp);
    size_t total = SB_SUM_FIXED + s->sum_len + 8;
    uint8_t *buf = malloc(total);
    if (!buf)
        return SB_ERR_NOMEM;
    size_t pos = SB_SUM_FIXED;
    for (size_t k = 0; k < s->n_ent; k++) {
        memcpy(buf + pos, s->sum + s->ent[k].pos, s->ent[k].bytes);
        pos += s->ent[k].bytes;
    }
    sb_sum_info info = {
        .segment_id = s->id, .generation = s->gen, .n_entries = (uint32_t)s->n_ent,
        .data_end = data_end, .first_seq = s->first_seq, .last_seq = s->last_seq,
        .body_bytes = s->sum_len,
    };
    size_t n = sb_sum_finish(buf, &info);
    char tmp[40], name[32];
    sb_disk_seg_name(name, s->id, "sum");
    snprintf(tmp, sizeof tmp, "%s.tmp", name);
    int rc = SB_OK;
    int fd = sb_io_open(d->wio, tmp, SB_IO_CREATE);
    if (fd < 0) {
        rc = sb_disk_errno(fd);
    } else {
        int64_t r = d->wio->ops->truncate(d->wio, fd, 0);
        if (r >= 0)
            r = sb_io_pwrite(d->wio, fd, buf, n, 0);
        if (r >= 0 && (size_t)r != n)
            r = -EIO;
        if (r >= 0)
            r = sb_io_fdatasync(d->wio, fd);
        sb_io_close(d->wio, fd);
        if (r >= 0)
            r = d->wio->ops->rename(d->wio, tmp, name);
        if (r >= 0)
            r = d->wio->ops->sync_dir(d->wio);
        if (r < 0)
            rc = sb_disk_errno(r);
    }
    pthread_mutex_lock(&d->st->mu);
    d->write_bytes += sb_fmt_pad(n);
    d->wa_sum += sb_fmt_pad(n);
    sb_disk_debit(d, sb_fmt_pad(n));
    pthread_mutex_unlock(&d->st->mu);
    free(buf);
    return rc;
}

int sb_disk_seg_write_summary(sb_disk *d, uint32_t i)
{
    return write_summary(d, &d->segs[i], d->segs[i].data_end);
}

int sb_disk_seg_seal(sb_disk *d, uint32_t i)
{
    sb_seg *s = &d->segs[i];
    int rc = SB_OK;
    if (s->wfd >= 0) {
        int r = sb_io_fdatasync(d->wio, s->wfd);
        if (r < 0)
            rc = sb_disk_errno(r);
    }
    pthread_mutex_lock(&d->st->mu);
    uint64_t end = s->data_end;
    pthread_mutex_unlock(&d->st->mu);
    int r2 = write_summary(d, s, end);
    if (rc == SB_OK)
        rc = r2;
    pthread_mutex_lock(&d->st->mu);
    s->state = SB_SEG_SEALED;
    if (d->cur == i)
        d->cur = UINT32_MAX;
    pthread_mutex_unlock(&d->st->mu);
    r2 = sb_disk_super_write(d);
    if (rc == SB_OK)
        rc = r2;
    sb_disk_seg_free(d, s);
    return rc;
}

/* Open (creating) segment file id for writing, O_DIRECT where the file
 * system takes it. */
static int seg_open_file(sb_disk *d, uint32_t id, unsigned flags)
{
    char name[32];
    sb_disk_seg_name(name, id, "dat");
    int fd = sb_io_open(d->wio, name, flags | (d->direct ? SB_IO_DIRECT : 0));
    if (fd == -EINVAL && d->direct) { /* no O_DIRECT here (tmpfs) */
        d->direct = false;
        fd = sb_io_open(d->wio, name, flags);
    }
    return fd;
}

uint32_t sb_disk_live_segs(const sb_disk *d)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < d->n_segs; i++)
        n += d->segs[i].state != SB_SEG_FREE;
    return n;
}

bool sb_disk_cap_ok(const sb_disk *d)
{
    return (uint64_t)sb_disk_live_segs(d) + 1 <= d->cap_bytes / d->seg_bytes;
}

bool sb_disk_floor_ok(sb_disk *d)
{
    uint64_t avail = 0;
    if (!d->floor_bytes || d->wio->ops->space(d->wio, &avail) < 0)
        return true; /* no floor, or the file system will not say */
    return avail >= d->floor_bytes + d->seg_bytes;
}

/* The first free slot of the superblock's list, or max_segs when full. */
static uint32_t free_slot(const sb_disk *d)
{
    for (uint32_t i = 0; i < d->n_segs; i++)
        if (d->segs[i].state == SB_SEG_FREE)
            return i;
    return d->n_segs < d->max_segs ? d->n_segs : d->max_segs;
}

int sb_disk_seg_open_new(sb_disk *d)
{
    uint32_t slot = free_slot(d);
    if (slot == d->max_segs || !sb_disk_cap_ok(d) || !sb_disk_floor_ok(d))
        return SB_ERR_NOSPC;
    uint32_t id = d->next_seg_id;
    if (id == 0 || id > 99999999u) /* the name has 8 digits; never wrap */
        return SB_ERR_NOSPC;
    /* EXCL: a file of that name is never written over. */
    int fd = seg_open_file(d, id, SB_IO_CREATE | SB_IO_EXCL);
    if (fd < 0)
        return sb_disk_errno(fd);
    d->next_seg_id = id + 1; /* the name is taken, whatever follows */
    int r = d->wio->ops->allocate(d->wio, fd, d->seg_bytes);
    if (r >= 0)
        r = d->wio->ops->sync_dir(d->wio);
    if (r < 0) { /* no room (ENOSPC): give the space back */
        char name[32];
        sb_disk_seg_name(name, id, "dat");
        sb_io_close(d->wio, fd);
        d->wio->ops->unlink(d->wio, name);
        return sb_disk_errno(r);
    }
    /* A reused slot's reader fd was closed when it was freed (reclaim.c). */
    sb_seg *s = &d->segs[slot];
    memset(s, 0, sizeof *s);
    s->wfd = fd;
    s->rfd = -1;
    pthread_mutex_lock(&d->st->mu);
    s->id = id;
    s->gen = (uint32_t)(d->write_count + 1); /* the write below's count */
    s->state = SB_SEG_OPEN;
    s->data_end = 0;
    if (slot == d->n_segs)
        d->n_segs++;
    pthread_mutex_unlock(&d->st->mu);
    int rc = sb_disk_super_write(d);
    if (rc != SB_OK) {
        /* Not listed durably: never write records to it. */
        pthread_mutex_lock(&d->st->mu);
        s->state = SB_SEG_FREE;
        pthread_mutex_unlock(&d->st->mu);
        sb_disk_seg_free(d, s);
        return rc;
    }
    d->cur = slot;
    return SB_OK;
}

/* ---- open and close -------------------------------------------------------------- */

int sb_disk_super_create(sb_disk *d, int n_writes)
{
    d->slot_bytes = sb_super_slot_size(d->max_segs);
    int fd = sb_io_open(d->wio, "superblock.tmp", SB_IO_CREATE);
    if (fd < 0)
        return sb_disk_errno(fd);
    if (d->sb_fd >= 0) /* a damaged superblock's, which this one replaces */
        sb_io_close(d->wio, d->sb_fd);
    d->sb_fd = fd;
    int r = d->wio->ops->truncate(d->wio, fd, 0);
    if (r >= 0)
        r = d->wio->ops->allocate(d->wio, fd, 2ull * d->slot_bytes);
    if (r < 0)
        return sb_disk_errno(r);
    uint64_t seed = mono_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)d;
    d->store_id = seed * 0x9E3779B97F4A7C15ull | 1;
    int rc = SB_OK;
    for (int k = 0; k < n_writes && rc == SB_OK; k++)
        rc = sb_disk_super_write(d);
    if (rc == SB_OK && (r = d->wio->ops->rename(d->wio, "superblock.tmp", "superblock")) < 0)
        rc = sb_disk_errno(r);
    if (rc == SB_OK && (r = d->wio->ops->sync_dir(d->wio)) < 0)
        rc = sb_disk_errno(r);
    return rc;
}

/* Create a fresh store in an empty directory: the superblock with its
 * first slot written (the other is zeros until the next write). */
static int create_store(sb_disk *d)
{
    d->write_count = 0;
    return sb_disk_super_create(d, 1);
}

static void has_store_file(void *ctx, const char *name)
{
    if (!strncmp(name, "seg-", 4))
        *(bool *)ctx = true;
}

/* Open the I/O handles: on the directory (made 0700 when absent), or on
 * shares of a test's in-memory file system. */
static int open_io(sb_disk *d, const sb_config *cfg, sb_io *mem)
{
    int r;
    if (mem) {
        if ((r = sb_io_mem_share(mem, &d->wio)) < 0 || (r = sb_io_mem_share(mem, &d->rio)) < 0)
            return sb_disk_errno(r);
        d->direct = false;
        return SB_OK;
    }
    if (mkdir(cfg->dir, 0700) != 0 && errno != EEXIST)
        return errno == ENOSPC ? SB_ERR_NOSPC : errno == ENOTDIR ? SB_ERR_INVAL : SB_ERR_IO;
    struct stat sbuf;
    if (stat(cfg->dir, &sbuf) != 0 || !S_ISDIR(sbuf.st_mode))
        return SB_ERR_INVAL;
    if ((r = sb_io_uring_new(cfg->dir, cfg->queue_depth, &d->wio)) < 0 &&
        (r = sb_io_posix_new(cfg->dir, &d->wio)) < 0)
        return sb_disk_errno(r);
    if ((r = sb_io_uring_new(cfg->dir, cfg->queue_depth, &d->rio)) < 0 &&
        (r = sb_io_posix_new(cfg->dir, &d->rio)) < 0)
        return sb_disk_errno(r);
    d->direct = true;
    return SB_OK;
}

static void disk_free(sb_disk *d)
{
    for (uint32_t i = 0; d->segs && i < d->n_segs; i++) {
        sb_disk_seg_free(d, &d->segs[i]);
        if (d->segs[i].rfd >= 0)
            sb_io_close(d->rio, d->segs[i].rfd);
    }
    if (d->sb_fd >= 0 && d->wio)
        sb_io_close(d->wio, d->sb_fd);
    sb_io_destroy(d->rio);
    sb_io_destroy(d->wio);
    sb_tkt_free_all(d); /* (every block a ticket waited for is let go) */
    sb_tomb_free_all(d);
    free(d->segs);
    free(d->pool);
    pthread_cond_destroy(&d->work_cv);
    pthread_cond_destroy(&d->done_cv);
    pthread_mutex_destroy(&d->rd_mu);
    if (d->rd_heads)
        munmap(d->rd_heads, d->rd_heads_cap);
    free(d);
}

int sb_disk_open(sb_store *st, const sb_config *cfg, sb_io *mem)
{
    if (cfg->queue_depth == 0 || cfg->queue_depth > 4096 || cfg->segment_bytes % 4096 ||
        cfg->segment_bytes < (64u << 10) || cfg->segment_bytes > (1ull << 40) ||
        cfg->sync_interval_ms == 0 ||
        (cfg->disk_bytes && cfg->disk_bytes < cfg->segment_bytes) ||
        cfg->write_budget_bytes_per_hour < (1u << 20) || cfg->backlog_bytes == 0)
        return SB_ERR_INVAL;
    sb_disk *d = calloc(1, sizeof *d);
    if (!d)
        return SB_ERR_NOMEM;
    d->st = st;
    d->sb_fd = -1;
    d->cur = UINT32_MAX;
    d->next_ticket = 1;
    d->next_wt = 1;
    d->next_seq = 1;
    d->next_seg_id = 1;
    d->qd = cfg->queue_depth;
    d->durability = cfg->durability;
    d->mode = cfg->write_mode;
    d->sync_bytes = cfg->sync_bytes ? cfg->sync_bytes : UINT64_MAX;
    d->sync_ns = (uint64_t)cfg->sync_interval_ms * 1000000ull;
    d->hold_ns = (uint64_t)(cfg->foreground_hold_ms ? cfg->foreground_hold_ms : 20) * 1000000ull;
    d->seg_bytes = cfg->segment_bytes;
    /* The write budget: a full bucket at open (the budget is not carried
     * across restarts). Metadata is paid from a reserve pages cannot take:
     * a segment's summary (well under a sixteenth of its records), two
     * superblock slots and namespace records. */
    d->rate = (double)cfg->write_budget_bytes_per_hour / 3.6e12;
    d->depth = (double)(cfg->write_budget_burst_bytes ? cfg->write_budget_burst_bytes
                                                      : cfg->write_budget_bytes_per_hour / 12);
    d->bucket = d->depth;
    d->pace_depth = d->rate * 60e9;
    d->pace = d->pace_depth;
    d->hour_cap = cfg->write_budget_bytes_per_hour - cfg->write_budget_bytes_per_hour / 100;
    d->zlevel = cfg->compress_level;
    d->salvage = cfg->open_flags & SB_OPEN_SALVAGE;
    d->bucket_t = sb_host_now(st);
    d->backlog = cfg->backlog_bytes;
    pthread_mutex_init(&d->rd_mu, NULL);
    pthread_cond_init(&d->work_cv, NULL);
    pthread_cond_init(&d->done_cv, NULL);

    int rc = open_io(d, cfg, mem);
    if (rc != SB_OK)
        goto fail;
    uint64_t meta = d->seg_bytes / 16 + 2 * d->slot_bytes + (64u << 10);
    d->meta_reserve = (double)meta < d->depth / 2 ? meta : (uint64_t)(d->depth / 2);
    long holder = 0;
    int r = d->wio->ops->lock(d->wio, "LOCK", &holder);
    if (r == -EWOULDBLOCK) {
        fprintf(stderr, "snapbank: store directory %s is in use by process %ld\n",
                cfg->dir ? cfg->dir : "(memory)", holder);
        rc = SB_ERR_LOCKED;
        goto fail;
    }
    if (r < 0) {
        rc = sb_disk_errno(r);
        goto fail;
    }

    /* The cap: configured, or a quarter of the free space now (plus what
     * the store holds already, once recovery has found it; an in-memory
     * file system without a size: 1 GiB). */
    d->cap_bytes = cfg->disk_bytes;
    d->floor_bytes = cfg->disk_free_floor_bytes;
    uint64_t quarter = 0; /* the default cap before it is raised to a segment */
    if (!d->cap_bytes) {
        uint64_t avail = 0;
        if (d->wio->ops->space(d->wio, &avail) == 0 && avail < (1ull << 50))
            d->cap_bytes = avail / 4;
        else
            d->cap_bytes = 1ull << 30;
        quarter = d->cap_bytes;
        if (d->cap_bytes < d->seg_bytes)
            d->cap_bytes = d->seg_bytes;
    }

    int fd = sb_io_open(d->wio, "superblock", 0);
    bool fresh = false;
    if (fd == -ENOENT) {
        bool any = false;
        if ((r = d->wio->ops->list(d->wio, has_store_file, &any)) < 0) {
            rc = sb_disk_errno(r);
            goto fail;
        }
        /* Segments without a superblock: a store that lost it, refused
         * (nothing overwritten) unless salvaging. */
        if (any && !d->salvage) {
            rc = SB_ERR_SUPERBLOCK;
            goto fail;
        }
        fresh = !any;
    } else if (fd < 0) {
        rc = sb_disk_errno(fd);
        goto fail;
    }
    if (fresh && !cfg->disk_bytes && quarter / d->seg_bytes < SB_CAP_SEGS_MIN) {
        /* The default cap on a small file system: a cap of one or two
         * segments reclaims the segment just sealed (the freshest data,
         * maybe all there is) as soon as the next one opens, so its
         * segments are made smaller instead, SB_CAP_SEGS_MIN to the cap
         * (at least 64 KiB), and reclamation takes the oldest of many. */
        uint64_t seg = quarter / SB_CAP_SEGS_MIN / 4096 * 4096;
        d->seg_bytes = seg < (64u << 10) ? (64u << 10) : seg;
        d->cap_bytes = quarter < d->seg_bytes ? d->seg_bytes : quarter;
        meta = d->seg_bytes / 16 + 2 * d->slot_bytes + (64u << 10);
        d->meta_reserve = (double)meta < d->depth / 2 ? meta : (uint64_t)(d->depth / 2);
    }
    if (fresh) {
        uint64_t want = d->cap_bytes / d->seg_bytes + 16;
        d->max_segs = want < SB_SEGS_MIN ? SB_SEGS_MIN : want > SB_SEGS_MAX ? SB_SEGS_MAX
                                                                             : (uint32_t)want;
        d->segs = calloc(d->max_segs, sizeof *d->segs);
        if (!d->segs) {
            rc = SB_ERR_NOMEM;
            goto fail;
        }
        if ((rc = create_store(d)) != SB_OK)
            goto fail;
    } else {
        d->sb_fd = fd >= 0 ? fd : -1; /* -1: there is none (salvaging) */
        uint64_t t0 = mono_ns();
        disk_attach(st, d); /* recovery counts what it indexes */
        if ((rc = sb_disk_recover(d)) != SB_OK)
            goto fail;
        d->rec_ns_time = mono_ns() - t0;
        if (!cfg->disk_bytes)
            d->cap_bytes += (uint64_t)sb_disk_live_segs(d) * d->seg_bytes;
    }

    disk_attach(st, d);
    if (pthread_create(&d->thread, NULL, sb_writer_main, d) != 0) {
        disk_attach(st, NULL);
        rc = SB_ERR_NOMEM;
        goto fail;
    }
    d->running = true;
    return SB_OK;
fail:
    disk_attach(st, NULL);
    /* Recovery may have indexed blocks: the caller frees the index. */
    disk_free(d);
    return rc;
}

int sb_disk_close(sb_store *st, bool crash)
{
    sb_disk *d = sb_disk_of(st);
    if (!d)
        return SB_OK;
    pthread_mutex_lock(&st->mu);
    d->closing = true;
    pthread_mutex_unlock(&st->mu);
    int rc = SB_OK;
    if (d->running && !crash && d->mode == SB_WRITE_BACK)
        rc = sb_disk_flush(st); /* the dirty pages too, not only the queue */
    /* (Its write and sync errors are in close_rc; an earlier life's are
     * not this close's.) */
    rc = rc == SB_ERR_NOMEM ? rc : SB_OK;
    if (d->running) {
        pthread_mutex_lock(&st->mu);
        if (!crash) /* what the budget takes now, then the rest is denied */
            sb_disk_pool_drain(st);
        sb_disk_pool_clear(d);
        d->stop = true;
        d->abort = crash;
        pthread_cond_broadcast(&d->work_cv);
        pthread_mutex_unlock(&st->mu);
        pthread_join(d->thread, NULL);
    }
    if (rc == SB_OK && !crash)
        rc = d->close_rc; /* the writer has stopped: no lock needed */
    disk_attach(st, NULL);
    disk_free(d);
    return rc;
}

void sb_disk_writer_hook(sb_store *st, void (*fn)(void *ctx), void *ctx)
{
    pthread_mutex_lock(&st->mu);
    sb_disk *d = sb_disk_of(st);
    if (d) {
        d->gap_hook = fn;
        d->gap_ctx = ctx;
    }
    pthread_mutex_unlock(&st->mu);
}

bool sb_disk_stopping(sb_store *st)
{
    pthread_mutex_lock(&st->mu);
    bool stop = sb_disk_of(st) && sb_disk_of(st)->stop;
    pthread_mutex_unlock(&st->mu);
    return stop;
}

/* ---- the RAM tier's calls ----------------------------------------------------------- */

bool sb_disk_write_back(const sb_store *st)
{
    const sb_disk *d = sb_disk_of(st);
    return d && d->mode == SB_WRITE_BACK && !d->broken && !d->stop;
}

bool sb_disk_write_only(const sb_store *st)
{
    return sb_disk_of(st) && sb_disk_of(st)->mode == SB_WRITE_ONLY;
}

bool sb_disk_wait_progress(sb_store *st)
{
    sb_disk *d = sb_disk_of(st);
    if (!d || !d->pending_bytes || !d->running)
        return false;
    if (pthread_equal(pthread_self(), d->thread))
        return false; /* the writer itself (reclaim.c reading pages in) */
    uint64_t seen = d->progress;
    /* Partial pages wait to be written late; a waiter cannot. */
    if (d->flush_ticket < d->next_ticket - 1)
        d->flush_ticket = d->next_ticket - 1;
    pthread_cond_signal(&d->work_cv);
    while (d->progress == seen && d->pending_bytes && !d->abort)
        pthread_cond_wait(&d->done_cv, &st->mu);
    return true;
}

void sb_disk_foreground_over(sb_store *st)
{
    if (sb_disk_of(st) && sb_disk_of(st)->running)
        pthread_cond_signal(&sb_disk_of(st)->work_cv);
}

uint64_t sb_disk_ticket(const sb_store *st)
{
    return sb_disk_of(st) ? sb_disk_of(st)->next_ticket : 0;
}

/* Wait until every ticket up to last is written and synced. [mu] */
static int wait_synced(sb_store *st, uint64_t first, uint64_t last)
{
    sb_disk *d = sb_disk_of(st);
    if (last < first || !d->running)
        return SB_OK;
    if (d->flush_ticket < last)
        d->flush_ticket = last;
    pthread_cond_signal(&d->work_cv);
    while (d->synced_ticket < last && !d->abort)
        pthread_cond_wait(&d->done_cv, &st->mu);
    if (d->err_ticket < first)
        return SB_OK;
    return d->err_rc ? d->err_rc : SB_ERR_IO;
}

/* Write-back: queue a dirty resident block (sb_host_index_visit's order puts
 * parents before children; one waiting in the pool under COMMIT waits on
 * for the budget). [mu] */
static void queue_dirty(void *ctx, sb_blk *b)
{
    if (sb_disk_state(b) == SB_DISK_NONE && !sb_drec_of(b)->pool_at)
        sb_disk_enqueue(ctx, b);
}

int sb_disk_flush(sb_store *st)
{
    sb_disk *d = sb_disk_of(st);
    if (!d)
        return SB_OK;
    pthread_mutex_lock(&st->mu);
    int qrc = SB_OK;
    if (d->mode == SB_WRITE_BACK)
        for (size_t i = 0; i < st->n_buckets; i++)
            for (sb_ns *ns = st->buckets[i]; ns; ns = ns->next)
                if (sb_host_index_visit(ns, queue_dirty, st) != SB_OK)
                    qrc = SB_ERR_NOMEM;
    /* Pooled blocks the budget takes now are written too (each round of
     * writes frees backlog for more; the writer may have queued some). */
    int rc;
    do
        rc = wait_synced(st, 1, d->next_ticket - 1);
    while (rc == SB_OK && (sb_disk_pool_drain(st) || d->synced_ticket < d->next_ticket - 1));
    if (rc == SB_OK)
        rc = qrc;
    pthread_mutex_unlock(&st->mu);
    return rc;
}

/* Take n holds off segment seg; when none are left it may go. [mu] */
static void unhold(sb_disk *d, uint32_t seg, uint32_t n)
{
    if (d->segs[seg].holds -= n)
        return;
    if (d->segs[seg].draining)
        pthread_cond_signal(&d->work_cv); /* it may go now */
    if (d->broken == SB_ERR_NOSPC)
        d->retry_ns = 0; /* it may be reclaimed now: the next block retries */
}

void sb_disk_unhold(sb_store *st, uint32_t seg)
{
    if (sb_disk_of(st)) /* (else the tier closed first) */
        unhold(sb_disk_of(st), seg, 1);
}

void sb_disk_held(sb_store *st, const sb_blk *b, int sign)
{
    sb_disk *d = sb_disk_of(st);
    if (!d || sb_disk_state(b) != SB_DISK_CLEAN || !b->matched)
        return;
    if (sign > 0)
        d->segs[sb_drec_of(b)->seg].holds += b->matched;
    else
        unhold(d, sb_drec_of(b)->seg, b->matched);
}

void sb_disk_unclean(sb_store *st, sb_blk *b, int state)
{
    if (b->indexed)
        sb_disk_count(st, b, -1);
    sb_disk_held(st, b, -1);
    sb_disk_state_set(b, state);
    if (sb_drec_of(b)->waits) /* tickets watching its record (ticket.c) */
        sb_tkt_unclean(sb_disk_of(st), b);
}

void sb_disk_match(sb_store *st, sb_blk *b, int sign)
{
    if (sign > 0) {
        sb_drec_of(b)->hit = 1;
        if (sb_disk_of(st) && sb_disk_state(b) == SB_DISK_CLEAN)
            sb_disk_of(st)->segs[sb_drec_of(b)->seg].holds++;
        return;
    }
    if (sb_disk_state(b) == SB_DISK_CLEAN)
        sb_disk_unhold(st, sb_drec_of(b)->seg);
}

bool sb_disk_record_stays(const sb_store *st, const sb_blk *b)
{
    const sb_disk *d = sb_disk_of(st);
    return d && sb_disk_record_live(d, b) && !d->segs[sb_drec_of(b)->seg].going;
}

void sb_disk_take_record(sb_store *st, const sb_blk *old, sb_blk *nu)
{
    if (!sb_disk_record_stays(st, old)) {
        sb_disk_state_set(nu, SB_DISK_FAILED); /* the record is being reclaimed */
        return;
    }
    const sb_drec *o = sb_drec_of(old);
    sb_drec *r = sb_drec_of(nu);
    sb_disk_state_set(nu, SB_DISK_CLEAN);
    r->ticket = o->ticket; /* its record is synced when old's is */
    r->seg = o->seg;
    r->seg_id = o->seg_id;
    r->rec_off = o->rec_off;
    r->head_bytes = o->head_bytes;
    r->stored = o->stored; /* a compressed record is read, and counted, */
    r->zflags = o->zflags; /* at its stored size */
    sb_disk_count(st, nu, 1);
    sb_disk_held(st, nu, 1);
}

void sb_disk_count(sb_store *st, const sb_blk *b, int sign)
{
    sb_disk *d = sb_disk_of(st);
    if (!d)
        return;
    uint64_t bytes = sb_drec_of(b)->head_bytes + sb_disk_payload_read(b);
    if (sign > 0) {
        st->disk_live_bytes += bytes;
        d->segs[sb_drec_of(b)->seg].live_bytes += bytes;
        if (b->kind == SB_BLK_PAGE)
            st->disk_pages++;
    } else {
        st->disk_live_bytes -= bytes;
        d->segs[sb_drec_of(b)->seg].live_bytes -= bytes;
        if (b->kind == SB_BLK_PAGE)
            st->disk_pages--;
    }
}

void sb_disk_stats(const sb_store *st, sb_stats *out)
{
    const sb_disk *d = sb_disk_of(st);
    if (!d)
        return;
    out->disk_bytes = st->disk_live_bytes;
    out->disk_bytes_limit = d->cap_bytes;
    out->disk_pages = st->disk_pages;
    out->disk_write_bytes = d->write_bytes;
    out->disk_read_bytes = d->read_bytes;
    out->disk_read_ios = d->read_ios;
    out->disk_write_ios = d->write_ios;
    out->disk_write_denials = d->denials;
    for (int i = 0; i < SB_DENY__COUNT; i++) {
        out->disk_denials[i] = d->deny[i];
        out->disk_denied_bytes[i] = d->deny_bytes[i];
    }
    out->disk_budget_bytes = d->bucket > 0 ? (uint64_t)d->bucket : 0;
    out->disk_logical_bytes = d->wa_logical;
    out->disk_head_bytes = d->wa_head;
    out->disk_padding_bytes = d->wa_pad;
    out->disk_summary_bytes = d->wa_sum;
    out->disk_superblock_bytes = d->wa_super;
    out->disk_ns_record_bytes = d->wa_ns;
    out->disk_reinsert_bytes = d->wa_reinsert;
    out->disk_life_write_bytes = d->wear_write0 + d->write_bytes;
    out->disk_life_logical_bytes = d->wear_logical0 + d->wa_logical;
    out->disk_life_reinsert_bytes = d->wear_reinsert0 + d->wa_reinsert;
    out->disk_write_amplification =
        d->wa_logical ? (double)d->write_bytes / (double)d->wa_logical : 0;
    out->disk_checksum_failures = d->checksum_failures;
    out->durable_seq = d->durable_seq;
    out->disk_write_errors = d->write_errors;
    out->disk_read_errors = d->read_errors;
    out->disk_segments = sb_disk_live_segs(d);
    out->disk_reclaimed_segments = d->reclaimed;
    out->disk_reclaim_kept = d->rc_kept;
    out->disk_reclaim_ram_only = d->rc_ram;
    out->disk_reclaim_dropped = d->rc_dropped;
    out->disk_nospc = d->nospc;
    out->disk_deferred = d->deferred;
    out->disk_pool_written = d->pool_written;
    out->disk_pool_blocks = d->pool_n;
    out->disk_compressed_records = d->z_records;
    out->disk_compress_skipped = d->z_skipped;
    out->disk_compress_raw_bytes = d->z_raw;
    out->disk_compress_stored_bytes = d->z_stored;
    out->disk_compress_saved_bytes = d->z_saved;
    out->disk_queued_bytes = d->pending_bytes;
    out->disk_queued_peak_bytes = d->pending_peak;
    out->disk_holdback_ns = d->held_ns;
    out->disk_holdbacks = d->holds;
    out->recovered_records = d->rec_records;
    out->recovered_pages = d->rec_pages;
    out->recovered_points = d->rec_points;
    out->recovered_namespaces = d->rec_ns;
    out->recovery_orphans = d->rec_orphans;
    out->recovery_bad_summaries = d->rec_bad_summaries;
    out->recovery_torn = d->rec_torn;
    out->recovery_unlisted = d->rec_unlisted;
    out->recovery_ns = d->rec_ns_time;
    out->salvaged = d->salvaged;
    out->salvaged_segments = d->salv_segments;
    out->salvage_scanned_segments = d->salv_scanned;
    out->salvage_skipped_files = d->salv_skipped;
    out->salvage_dropped_records = d->salv_dropped;
    out->salvage_dropped_bytes = d->salv_dropped_bytes;
    out->disk_tombstones = d->tombs_written;
    out->disk_tombstone_bytes = d->wa_tomb;
    out->disk_tombstones_live = d->n_tombs;
    out->recovered_tombstones = d->rec_tombs;
    out->recovery_removed = d->rec_removed;
}

/* ---- the tier table ------------------------------------------------------------------ */

int sb_disk_config_check(const sb_config *cfg)
{
    return cfg->compress_level > (uint32_t)sb_zlevel_max() ? SB_ERR_INVAL : SB_OK;
}

/* The disk tier as the RAM index sees it (tier.h): its own functions, so
 * a call through the table is one indirect call and nothing more. */
/* The index's sb_tier_unclean: the block is written anew (NONE). */
static void disk_unclean(sb_store *st, sb_blk *b)
{
    sb_disk_unclean(st, b, SB_DISK_NONE);
}

static const sb_tier_ops disk_tier_ops = {
    .name = "disk",
    .data_align = 4096, /* O_DIRECT writes a block's data as it is */
    .blk_bytes = sizeof(sb_drec),
    .close = sb_disk_close,
    .flush = sb_disk_flush,
    .stats = sb_disk_stats,
    .foreground_over = sb_disk_foreground_over,
    .offer = sb_disk_committed,
    .offer_short = sb_disk_short,
    .supersede = sb_disk_supersede,
    .enqueue = sb_disk_enqueue,
    .reorder = sb_disk_pool_fix,
    .leave = sb_disk_pool_leave,
    .write_back = sb_disk_write_back,
    .write_only = sb_disk_write_only,
    .pending = sb_disk_pending,
    .wait_progress = sb_disk_wait_progress,
    .match = sb_disk_match,
    .count = sb_disk_count,
    .held = sb_disk_held,
    .record_stays = sb_disk_record_stays,
    .take_record = sb_disk_take_record,
    .unclean = disk_unclean,
    .load = sb_disk_load,
    .prefault = sb_disk_prefault,
    .stream_pages = sb_disk_stream_pages,
    .stream_wait = sb_disk_stream_wait,
    .drop = sb_disk_drop,
    .remove = sb_disk_remove,
    .remove_wait = sb_disk_remove_wait,
    .ticket = sb_disk_ticket,
    .wset_new = sb_disk_wset_new,
    .wset_free = sb_disk_wset_free,
    .wset_reserve = sb_disk_wset_reserve,
    .wset_unreserve = sb_disk_wset_unreserve,
    .outcome = sb_disk_outcome,
};

/* The store's tier is d (NULL: none). */
static void disk_attach(sb_store *st, sb_disk *d)
{
    st->tier.ops = d ? &disk_tier_ops : NULL;
    st->tier.state = d;
}
