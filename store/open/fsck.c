/* fsck.c -- sb_store_fsck: offline verification of a store directory
 * (snapbank_fsck.h says what is checked and what counts as damage); and
 * sb_store_fsck_repair: a salvaging open (sb_store_open with SB_OPEN_SALVAGE:
 * store/disk/salvage.c), then the check. It sits in store/open, above the
 * disk tier, because the repair opens a whole store.
 *
 * sb_store_fsck is read-only: the one call that writes is the lock. Every
 * read goes through a posix sb_io and scan.h's 1 MiB window (segments are
 * never read whole; a payload is hashed as it streams through the window),
 * so memory stays at the window plus the superblock and one summary.
 *
 * The walk:
 *
 *   1. Read the superblock unlocked and classify it: no store (FORMAT: no
 *      superblock file and no segment files) or another version (VERSION)
 *      return before anything is touched; a superblock that cannot be
 *      used is damage, reported with nothing more checked.
 *   2. Take DIR/LOCK when it exists (a store open on DIR: LOCKED).
 *   3. Read the superblock again under the lock and pick the slot.
 *   4. Per segment: load the summary (sealed), scan the records (sealed:
 *      [0, data_end), resynchronising after a bad head; open: up to the
 *      tail), match the summary's entries against what the scan found.
 */
#include "snapbank_fsck.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "io.h"
#include "scan.h"

#define PROGRESS_STEP (4ull << 20)  /* progress calls at least this far apart */
#define SLOT_MAX (256u << 20)       /* a larger superblock slot is damage */


/* The state of one check. */
typedef struct fsck {
    sb_io *io;                   /* posix backend on DIR */
    sb_scan sc;                  /* the read window (sc.win NULL until a
                                    segment is checked) */
    uint64_t segment_bytes;      /* from the superblock */
    sb_fsck_progress_fn progress;
    void *ctx;
    uint64_t done, total;        /* progress: bytes */
    uint64_t reported;           /* done at the last progress call */
    uint64_t seg_base;           /* done when the current segment started */
    uint64_t seg_share;          /* the current segment's part of total */
} fsck;

static uint64_t le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static int from_errno(int64_t err)
{
    return err == -ENOMEM ? SB_ERR_NOMEM : SB_ERR_IO;
}

/* ---- progress --------------------------------------------------------------- */

static void report_progress(fsck *f, bool force)
{
    if (f->progress && (force || f->done - f->reported >= PROGRESS_STEP)) {
        f->reported = f->done;
        f->progress(f->ctx, f->done, f->total);
    }
}

/* The scan of the current segment has reached pos. */
static void tick(fsck *f, uint64_t pos)
{
    f->done = f->seg_base + (pos < f->seg_share ? pos : f->seg_share);
    report_progress(f, false);
}

/* The payload hash of a record has reached file offset pos (scan.h). */
static void scan_tick(void *ctx, uint64_t pos)
{
    tick(ctx, pos);
}

/* ---- superblock ------------------------------------------------------------------ */

/* The superblock as read. */
typedef struct slots {
    int rc[2];                   /* sb_super_decode's result per slot */
    int best;                    /* the slot used; -1: none valid */
    sb_super sup;                /* the slot used */
    sb_super_seg *segs;          /* (sup.n_segments) malloc'd, sup's table */
    int damage;                  /* no slot valid though one has the magic:
                                    SB_ERR_CORRUPT or SB_ERR_FORMAT */
} slots;

/* Decode slot s (slot_bytes at p) into out->rc[s]; keep it when it is the
 * newest valid slot so far. Returns: SB_OK; SB_ERR_NOMEM. */
static int decode_slot(const uint8_t *p, uint32_t slot_bytes, int s, slots *out)
{
    /* The table is sized from the slot's own count, which decode bounds. */
    uint32_t n = (uint32_t)le(p + 48, 4), need = sb_super_slot_size(n);
    sb_super sup;
    sb_super_seg *segs = NULL;
    if (n && need && need <= slot_bytes && !(segs = malloc((size_t)n * sizeof *segs)))
        return SB_ERR_NOMEM;
    out->rc[s] = sb_super_decode(p, slot_bytes, &sup, segs, segs ? n : 0);
    if (out->rc[s] == SB_ERR_VERSION && !sb_super_other_version(p, slot_bytes))
        out->rc[s] = SB_ERR_CORRUPT;        /* a damaged version field */
    if (out->rc[s] == SB_OK && sup.slot != s)
        out->rc[s] = SB_ERR_FORMAT;         /* a slot written at the other's place */
    if (out->rc[s] == SB_OK && (out->best < 0 || sup.write_count > out->sup.write_count)) {
        free(out->segs);
        out->best = s;
        out->sup = sup;
        out->segs = segs;
    } else {
        free(segs);
    }
    return SB_OK;
}

/* Read DIR/superblock -- both slots, or only slot A's fixed part when the
 * file size does not split into two slots of a multiple of 4096 (to tell a
 * damaged store from none) -- and pick the valid slot with the larger
 * write_count, as the store's open does (store/disk/disk.c: a slot must also
 * name its own position). A slot of an unknown version is another
 * version's only when its hash holds (sb_super_other_version; in a file
 * that does not split, slot A's own size places the slots); else it is
 * damage. Returns: SB_OK (out->best >= 0, or out->damage set; with best >=
 * 0, out->segs is the caller's to free); SB_ERR_FORMAT (no superblock file,
 * or no slot has the magic); SB_ERR_VERSION (no valid slot, one of another
 * version); SB_ERR_IO; SB_ERR_NOMEM. */
static int read_super(sb_io *io, slots *out)
{
    memset(out, 0, sizeof *out);
    out->best = -1;
    out->rc[0] = out->rc[1] = SB_ERR_FORMAT;
    int fd = sb_io_open(io, "superblock", SB_IO_RDONLY);
    if (fd < 0)
        return fd == -ENOENT ? SB_ERR_FORMAT : from_errno(fd);
    uint64_t size = 0;
    int64_t n = io->ops->size(io, fd, &size);
    bool split = size >= 2 * SB_FMT_BLOCK && size % (2 * SB_FMT_BLOCK) == 0 &&
                 size / 2 <= SLOT_MAX;
    size_t want = split ? (size_t)size : SB_SUPER_FIXED, slot = split ? want / 2 : 0;
    uint8_t *buf = malloc(want);
    if (n == 0)
        n = buf ? sb_scan_read(io, fd, buf, want, 0) : -ENOMEM;
    bool foreign = n >= 0 && !split && sb_scan_super_foreign(io, fd, size);
    sb_io_close(io, fd);
    int rc = n < 0 ? from_errno(n) : SB_OK;
    bool whole = split && (size_t)n == want;    /* else the file shrank under us */
    bool magic = rc == SB_OK && ((n >= 10 && le(buf, 8) == SB_SUPER_MAGIC) ||
                                 (whole && le(buf + slot, 8) == SB_SUPER_MAGIC));
    if (rc == SB_OK && whole)
        for (int s = 0; s < 2 && rc == SB_OK; s++)
            rc = decode_slot(buf + s * slot, (uint32_t)slot, s, out);
    else if (foreign)
        out->rc[0] = SB_ERR_VERSION;
    free(buf);
    if (rc == SB_OK && out->best < 0) {
        if (out->rc[0] == SB_ERR_VERSION || out->rc[1] == SB_ERR_VERSION)
            rc = SB_ERR_VERSION;
        else if (magic)
            out->damage = out->rc[0] == SB_ERR_CORRUPT || out->rc[1] == SB_ERR_CORRUPT
                              ? SB_ERR_CORRUPT : SB_ERR_FORMAT;
        else
            rc = SB_ERR_FORMAT;
    }
    if (rc != SB_OK) {
        free(out->segs);
        out->segs = NULL;
        out->best = -1;
    }
    return rc;
}

/* Segment files in a directory: seg-*.dat, and whether there is any seg-*. */
typedef struct seg_files {
    uint32_t dat;
    bool any;
} seg_files;

static void count_seg(void *ctx, const char *name)
{
    seg_files *c = ctx;
    c->any |= !strncmp(name, "seg-", 4);
    c->dat += sb_seg_file_id(name, "dat") != 0;
}

/* Read the superblock (read_super) and tell whether DIR holds a store: a
 * superblock file or segment files. Returns: SB_OK (sl->best >= 0, or
 * sl->damage set: SB_ERR_CORRUPT, SB_ERR_FORMAT -- also a superblock file
 * without the magic -- or SB_ERR_NOT_FOUND, no superblock file but segment
 * files); SB_ERR_FORMAT (no store); SB_ERR_VERSION; SB_ERR_IO;
 * SB_ERR_NOMEM. *n_files receives the seg-*.dat files counted. */
static int classify(sb_io *io, slots *sl, uint32_t *n_files)
{
    seg_files sf = { 0, false };
    int r = io->ops->list(io, count_seg, &sf);
    *n_files = sf.dat;
    int rc = read_super(io, sl);
    if (rc != SB_ERR_FORMAT)
        return rc;
    if (r < 0)
        return from_errno(r);
    int fd = sb_io_open(io, "superblock", SB_IO_RDONLY);
    if (fd >= 0)
        sb_io_close(io, fd);
    else if (fd != -ENOENT)
        return from_errno(fd);
    if (fd < 0 && !sf.any)
        return SB_ERR_FORMAT;
    sl->damage = fd >= 0 ? SB_ERR_FORMAT : SB_ERR_NOT_FOUND;
    return SB_OK;
}

/* ---- the lock --------------------------------------------------------------------- */

/* Take DIR/LOCK when it exists. (If LOCK vanishes between the two calls,
 * sb_io's lock creates it again: a window fsck cannot close through sb_io.)
 * Returns: SB_OK (*locked says whether it is held); SB_ERR_LOCKED; SB_ERR_IO. */
static int take_lock(sb_io *io, int *locked, long *holder_pid)
{
    *locked = 0;
    int fd = sb_io_open(io, "LOCK", SB_IO_RDONLY);
    if (fd == -ENOENT || fd == -EACCES)
        return SB_OK;
    if (fd < 0)
        return from_errno(fd);
    sb_io_close(io, fd);
    long pid = 0;
    int rc = io->ops->lock(io, "LOCK", &pid);
    if (rc == -EWOULDBLOCK) {
        if (holder_pid)
            *holder_pid = pid;
        return SB_ERR_LOCKED;
    }
    if (rc == -EACCES || rc == -EROFS || rc == -EPERM)
        return SB_OK;                       /* read-only to us: check unlocked */
    if (rc < 0)
        return from_errno(rc);
    *locked = 1;
    return SB_OK;
}

/* ---- records ------------------------------------------------------------------------ */

enum { REC_OK, REC_BAD_HEAD, REC_BAD_PAYLOAD, REC_SHORT, REC_IO };

/* Check the record at off of segment g, which must end by limit: its head
 * decodes for this offset, segment and generation (and a namespace
 * record's description decodes), then its payload hash (scan.h). *h and
 * *bytes (its extent) are set from REC_BAD_PAYLOAD on; the head is sound
 * then. A head of another format version is a bad head here.
 * Returns: REC_OK; REC_BAD_HEAD (its length cannot be trusted);
 * REC_BAD_PAYLOAD; REC_SHORT (the file ends inside it); REC_IO. */
static int check_record(fsck *f, int fd, const sb_super_seg *g, uint64_t off, uint64_t limit,
                        sb_rec_head *h, uint64_t *bytes)
{
    int st = sb_scan_head(&f->sc, fd, g->segment_id, g->generation, off, limit, h, NULL, NULL);
    if (st == SB_SCAN_OK) {
        *bytes = sb_rec_record_bytes(h);
        st = sb_scan_payload(&f->sc, fd, h, off);
    }
    switch (st) {
    case SB_SCAN_OK:
        return REC_OK;
    case SB_SCAN_BAD_PAYLOAD:
        return REC_BAD_PAYLOAD;
    case SB_SCAN_SHORT:
        return REC_SHORT;
    case SB_SCAN_IO:
        return REC_IO;
    default:
        return REC_BAD_HEAD;
    }
}

static void note_bad(sb_fsck_segment *s, uint64_t off)
{
    if (off < s->first_bad_offset)
        s->first_bad_offset = off;
}

static void count_record(sb_fsck_segment *s, const sb_rec_head *h)
{
    s->records++;
    s->namespaces += h->kind == SB_REC_NAMESPACE;
    s->pages += h->kind == SB_REC_PAGE;
    s->points += h->kind == SB_REC_POINT;
    s->tombstones += h->kind == SB_REC_TOMBSTONE;
}

/* ---- summaries ----------------------------------------------------------------------- */

/* One summary entry, as much of it as fsck compares. */
typedef struct sum_entry {
    uint64_t off, seq, key[2], payload_hash;
    bool seen;                   /* matched a record, or inside a bad run */
} sum_entry;

/* A sealed segment's summary. */
typedef struct sum_view {
    int rc;                      /* what sb_fsck_segment.summary will say */
    sum_entry *e;                /* (n) by offset; NULL when rc != 0 */
    uint32_t n;
} sum_view;

static int entry_cmp(const void *a, const void *b)
{
    uint64_t x = ((const sum_entry *)a)->off, y = ((const sum_entry *)b)->off;
    return x < y ? -1 : x > y;
}

/* Decode a summary file held in buf[0, len) into sv. Returns: SB_OK (the
 * verdict in sv->rc); SB_ERR_NOMEM. */
static int parse_summary(const uint8_t *buf, size_t len, const sb_super_seg *g, sum_view *sv)
{
    sb_sum_info info;
    sv->rc = sb_sum_decode(buf, len, &info);
    if (sv->rc != SB_OK)
        return SB_OK;
    if (info.segment_id != g->segment_id || info.generation != g->generation ||
        info.data_end != g->data_end) {
        sv->rc = SB_ERR_CORRUPT;
        return SB_OK;
    }
    if (info.n_entries > info.body_bytes / (16 + SB_REC_FIXED)) {
        sv->rc = SB_ERR_FORMAT;
        return SB_OK;
    }
    sv->e = calloc(info.n_entries ? info.n_entries : 1, sizeof *sv->e);
    if (!sv->e)
        return SB_ERR_NOMEM;
    size_t pos = SB_SUM_FIXED;
    uint64_t min_seq = UINT64_MAX, max_seq = 0, off;
    sb_rec_head h;
    int rc;
    while ((rc = sb_sum_next(buf, &info, &pos, &off, &h, NULL, NULL)) == SB_OK) {
        if (sv->n == info.n_entries)
            break;                          /* more entries than it says */
        sv->e[sv->n++] = (sum_entry){ .off = off, .seq = h.seq, .key = { h.key[0], h.key[1] },
                                      .payload_hash = h.payload_hash };
        min_seq = h.seq < min_seq ? h.seq : min_seq;
        max_seq = h.seq > max_seq ? h.seq : max_seq;
    }
    if (rc != SB_ERR_RANGE || sv->n != info.n_entries) {
        sv->rc = SB_ERR_FORMAT;
    } else if (sv->n && (min_seq != info.first_seq || max_seq != info.last_seq)) {
        sv->rc = SB_ERR_CORRUPT;
    } else {
        qsort(sv->e, sv->n, sizeof *sv->e, entry_cmp);
        for (uint32_t i = 1; i < sv->n; i++)
            if (sv->e[i].off == sv->e[i - 1].off)
                sv->rc = SB_ERR_FORMAT;     /* two entries for one record */
    }
    if (sv->rc != SB_OK) {
        free(sv->e);
        sv->e = NULL;
        sv->n = 0;
    }
    return SB_OK;
}

/* Load seg-NNNNNNNN.sum of sealed segment g. An entry is at most its
 * record's head plus 23 bytes, and there is at most one record per 4 KiB of
 * data_end, so a summary larger than data_end * (1 + 1/128) plus its header
 * (data_end capped at segment_bytes) is refused unread.
 * Returns: SB_OK (the verdict in sv->rc); SB_ERR_NOMEM. */
static int load_summary(fsck *f, const sb_super_seg *g, sum_view *sv)
{
    char name[32];
    snprintf(name, sizeof name, "seg-%08u.sum", g->segment_id);
    int fd = sb_io_open(f->io, name, SB_IO_RDONLY);
    if (fd < 0) {
        sv->rc = fd == -ENOENT ? SB_ERR_NOT_FOUND : SB_ERR_IO;
        return SB_OK;
    }
    uint64_t end = g->data_end < f->segment_bytes ? g->data_end : f->segment_bytes;
    uint64_t size, cap = SB_SUM_FIXED + 8 + end + end / 128;
    uint8_t *buf = NULL;
    int rc = SB_OK;
    if (f->io->ops->size(f->io, fd, &size) < 0) {
        sv->rc = SB_ERR_IO;
    } else if (size > cap) {
        sv->rc = SB_ERR_FORMAT;
    } else if (!(buf = malloc(size ? (size_t)size : 1))) {
        rc = SB_ERR_NOMEM;
    } else {
        int64_t n = sb_scan_read(f->io, fd, buf, (size_t)size, 0);
        if (n < 0)
            sv->rc = SB_ERR_IO;
        else
            rc = parse_summary(buf, (size_t)n, g, sv);
    }
    free(buf);
    sb_io_close(f->io, fd);
    return rc;
}

/* The first entry at or after off. */
static uint32_t entry_at(const sum_view *sv, uint64_t off)
{
    uint32_t lo = 0, hi = sv->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (sv->e[mid].off < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* A record with a sound head is at off: the summary must list it alike --
 * unless its payload is bad (listed is optional): a summary written by a
 * salvage leaves out the records it dropped. */
static void sum_match(sum_view *sv, uint64_t off, const sb_rec_head *h, bool optional)
{
    if (!sv->e)
        return;
    uint32_t i = entry_at(sv, off);
    if (optional && (i == sv->n || sv->e[i].off != off))
        return;
    if (i == sv->n || sv->e[i].off != off || sv->e[i].seq != h->seq ||
        sv->e[i].key[0] != h->key[0] || sv->e[i].key[1] != h->key[1] ||
        sv->e[i].payload_hash != h->payload_hash) {
        sv->rc = SB_ERR_CORRUPT;
        return;
    }
    sv->e[i].seen = true;
}

/* [from, to) held no sound record: entries there are excused. */
static void sum_excuse(sum_view *sv, uint64_t from, uint64_t to)
{
    if (!sv->e)
        return;
    for (uint32_t i = entry_at(sv, from); i < sv->n && sv->e[i].off < to; i++)
        sv->e[i].seen = true;
}

/* The verdict once the scan is done: an entry for no record is a mismatch. */
static int sum_finish(const sum_view *sv)
{
    for (uint32_t i = 0; i < sv->n && sv->rc == SB_OK; i++)
        if (!sv->e[i].seen)
            return SB_ERR_CORRUPT;
    return sv->rc;
}

/* ---- segments -------------------------------------------------------------------------- */

/* A bad run [run, to) of a sealed segment ends: one bad head. */
static void end_run(sb_fsck_segment *s, sum_view *sv, uint64_t run, uint64_t to)
{
    s->bad_heads++;
    note_bad(s, run);
    sum_excuse(sv, run, to);
}

/* Scan a sealed segment's [0, data_end). A bad head starts a bad run; the
 * scan probes each following 4 KiB boundary until a record decodes there
 * (records start on boundaries, and a head decodes only at its own offset),
 * and the run counts as one bad head. */
static void scan_sealed(fsck *f, int fd, const sb_super_seg *g, sum_view *sv,
                        sb_fsck_segment *s)
{
    uint64_t off = 0, end = g->data_end, run = UINT64_MAX;
    while (off < end) {
        sb_rec_head h;
        uint64_t bytes = 0;
        int st = check_record(f, fd, g, off, end, &h, &bytes);
        if (st == REC_BAD_HEAD) {
            if (run == UINT64_MAX)
                run = off;
            off += SB_FMT_BLOCK;
            tick(f, off);
            continue;
        }
        if (run != UINT64_MAX)
            end_run(s, sv, run, off);
        run = UINT64_MAX;
        if (st == REC_SHORT || st == REC_IO) {
            s->file = st == REC_SHORT ? SB_ERR_FORMAT : SB_ERR_IO;
            note_bad(s, off);
            sum_excuse(sv, off, end);
            break;
        }
        if (st == REC_BAD_PAYLOAD) {
            s->bad_payloads++;
            note_bad(s, off);
        } else {
            count_record(s, &h);
        }
        sum_match(sv, off, &h, st == REC_BAD_PAYLOAD);
        off += bytes;
        tick(f, off);
    }
    if (run != UINT64_MAX)
        end_run(s, sv, run, end);
    s->bytes_checked = off < end ? off : end;
}

/* Scan an open segment from 0 to its tail (snapbank_fsck.h: what ends it). */
static void scan_open(fsck *f, int fd, const sb_super_seg *g, uint64_t durable_seq,
                      sb_fsck_segment *s)
{
    uint64_t off = 0;
    while (off < f->segment_bytes) {
        sb_rec_head h;
        uint64_t bytes = 0;
        int st = check_record(f, fd, g, off, f->segment_bytes, &h, &bytes);
        if (st == REC_IO) {
            s->file = SB_ERR_IO;
            note_bad(s, off);
            break;
        }
        if (st == REC_BAD_HEAD || st == REC_SHORT ||
            (st == REC_BAD_PAYLOAD && h.seq > durable_seq))
            break;                          /* the tail */
        if (st == REC_BAD_PAYLOAD) {
            s->bad_payloads++;
            note_bad(s, off);
        } else {
            count_record(s, &h);
        }
        off += bytes;
        tick(f, off);
    }
    s->data_end = off;
    s->bytes_checked = off;
}

/* Check one segment the superblock lists into s. Returns: SB_OK (findings
 * in s); SB_ERR_NOMEM. */
static int check_segment(fsck *f, const sb_super *sup, const sb_super_seg *g,
                         sb_fsck_segment *s)
{
    s->segment_id = g->segment_id;
    s->generation = g->generation;
    s->state = g->state;
    s->data_end = g->data_end;
    s->first_bad_offset = UINT64_MAX;
    if (g->state == SB_SEG_FREE)
        return SB_OK;
    sum_view sv = { 0 };
    if (g->state == SB_SEG_SEALED) {
        int rc = load_summary(f, g, &sv);
        if (rc != SB_OK)
            return rc;
    }
    char name[32];
    snprintf(name, sizeof name, "seg-%08u.dat", g->segment_id);
    int fd = sb_io_open(f->io, name, SB_IO_RDONLY);
    if (fd < 0) {
        s->file = fd == -ENOENT ? SB_ERR_NOT_FOUND : SB_ERR_IO;
        note_bad(s, 0);
        sum_excuse(&sv, 0, UINT64_MAX);     /* nothing to match it against */
    } else {
        if (g->state == SB_SEG_SEALED)
            scan_sealed(f, fd, g, &sv, s);
        else
            scan_open(f, fd, g, sup->durable_seq, s);
        sb_scan_forget(&f->sc);             /* the number may be reused */
        sb_io_close(f->io, fd);
    }
    s->summary = g->state == SB_SEG_SEALED ? sum_finish(&sv) : 0;
    free(sv.e);
    return SB_OK;
}

/* A segment's part of the progress total: the bytes its scan may cover. */
static uint64_t share(const sb_super *sup, const sb_super_seg *g)
{
    return g->state == SB_SEG_SEALED ? g->data_end
           : g->state == SB_SEG_OPEN ? sup->segment_bytes : 0;
}

/* Fill r from the superblock in sl and check every segment. */
static int check_store(fsck *f, const slots *sl, sb_fsck_report *r)
{
    const sb_super *sup = &sl->sup;
    r->superblock_slot = (uint32_t)sl->best;
    r->other_slot = sl->rc[1 - sl->best];
    r->write_count = sup->write_count;
    r->segment_bytes = f->segment_bytes = sup->segment_bytes;
    r->durable_seq = sup->durable_seq;
    r->segments = calloc(sup->n_segments ? sup->n_segments : 1, sizeof *r->segments);
    if (!r->segments || sb_scan_init(&f->sc, f->io) != SB_OK)
        return SB_ERR_NOMEM;
    f->sc.tick = scan_tick;
    f->sc.ctx = f;
    r->n_segments = sup->n_segments;
    for (uint32_t i = 0; i < sup->n_segments; i++)
        f->total += share(sup, &sup->segments[i]);
    report_progress(f, true);
    for (uint32_t i = 0; i < sup->n_segments; i++) {
        const sb_super_seg *g = &sup->segments[i];
        sb_fsck_segment *s = &r->segments[i];
        f->seg_share = share(sup, g);
        int rc = check_segment(f, sup, g, s);
        if (rc != SB_OK)
            return rc;
        f->seg_base += f->seg_share;
        tick(f, 0);
        r->records += s->records;
        r->bad_records += s->bad_heads + s->bad_payloads;
        r->bytes_checked += s->bytes_checked;
        r->n_damaged += s->bad_heads || s->bad_payloads || s->summary || s->file;
    }
    f->done = f->total;
    if (f->reported != f->total)
        report_progress(f, true);
    return SB_OK;
}

/* Steps 1-3: a posix sb_io on dir (*io, the caller's to destroy, which
 * releases the lock), the superblock classified before anything is
 * touched, DIR/LOCK taken, the superblock read again under it (sl->segs
 * the caller's to free). Returns: SB_OK; classify's errors, SB_ERR_LOCKED
 * (nothing left to free). */
static int open_dir(const char *dir, sb_io **io, slots *sl, uint32_t *n_files, int *locked,
                    long *holder_pid)
{
    int rc = sb_io_posix_new(dir, io);
    if (rc < 0)
        return rc == -ENOENT || rc == -ENOTDIR ? SB_ERR_FORMAT : from_errno(rc);
    rc = classify(*io, sl, n_files);
    free(sl->segs);
    if (rc == SB_OK)
        rc = take_lock(*io, locked, holder_pid);
    if (rc == SB_OK)
        rc = classify(*io, sl, n_files);
    if (rc != SB_OK) {
        sb_io_destroy(*io);
        *io = NULL;
    }
    return rc;
}

int sb_store_fsck(const char *dir, sb_fsck_progress_fn progress, void *ctx,
                  sb_fsck_report **out, long *holder_pid)
{
    if (holder_pid)
        *holder_pid = 0;
    if (out)
        *out = NULL;
    if (!dir || !out)
        return SB_ERR_INVAL;
    fsck f = { .progress = progress, .ctx = ctx };
    sb_fsck_report *r = NULL;
    slots sl;
    uint32_t n_files = 0;
    int locked = 0;
    int rc = open_dir(dir, &f.io, &sl, &n_files, &locked, holder_pid);
    if (rc != SB_OK)
        return rc;
    r = calloc(1, sizeof *r);
    if (!r) {
        rc = SB_ERR_NOMEM;
    } else {
        r->locked = locked;
        r->superblock = sl.damage;
        r->n_segment_files = n_files;
        if (sl.best >= 0)
            rc = check_store(&f, &sl, r);
    }
    free(sl.segs);
    sb_scan_fini(&f.sc);
    sb_io_destroy(f.io);                    /* releases the lock */
    if (rc != SB_OK) {
        sb_fsck_report_free(r);
        return rc;
    }
    *out = r;
    return SB_OK;
}

int sb_store_fsck_repair(const char *dir, sb_fsck_progress_fn progress, void *ctx,
                         sb_fsck_report **out, long *holder_pid)
{
    if (holder_pid)
        *holder_pid = 0;
    if (out)
        *out = NULL;
    if (!dir || !out)
        return SB_ERR_INVAL;
    /* 1. What is there, touching nothing (no store, another version); a
     * store open on dir is named by its holder, as a check names it. */
    sb_io *io = NULL;
    slots sl;
    uint32_t n_files = 0;
    int locked = 0;
    int rc = open_dir(dir, &io, &sl, &n_files, &locked, holder_pid);
    if (rc != SB_OK)
        return rc;
    free(sl.segs);
    sb_io_destroy(io); /* releases the lock for the open */
    sb_fsck_repair rep = { .superblock = sl.damage };

    /* 2. The salvaging open (a sound superblock: an open as any), then a
     * close that leaves every segment sealed. It reads no page: a small
     * RAM budget; no sequence length is refused. */
    sb_config c;
    sb_config_default(&c);
    c.dir = dir;
    c.open_flags = SB_OPEN_SALVAGE;
    c.ram_bytes = 64ull << 20;
    c.max_seq_tokens = INT32_MAX;
    sb_store *st = NULL;
    if ((rc = sb_store_open(&c, &st)) != SB_OK)
        return rc;
    sb_stats s;
    sb_store_stats(st, &s);
    if ((rc = sb_store_close(st)) != SB_OK)
        return rc;
    rep.salvaged = s.salvaged != 0;
    rep.segments = s.disk_segments;
    rep.scanned_segments = s.salvage_scanned_segments;
    rep.skipped_files = s.salvage_skipped_files;
    rep.records = s.recovered_records;
    rep.pages = s.recovered_pages;
    rep.points = s.recovered_points;
    rep.namespaces = s.recovered_namespaces;
    rep.orphans = s.recovery_orphans;
    rep.dropped_records = s.salvage_dropped_records;
    rep.dropped_bytes = s.salvage_dropped_bytes;

    /* 3. The check. */
    if ((rc = sb_store_fsck(dir, progress, ctx, out, holder_pid)) != SB_OK)
        return rc;
    (*out)->repaired = 1;
    (*out)->repair = rep;
    return SB_OK;
}

void sb_fsck_report_free(sb_fsck_report *r)
{
    if (!r)
        return;
    free(r->segments);
    free(r);
}
