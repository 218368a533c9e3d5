/* salvage.c -- rebuilding a store's superblock from its segment files, when
 * the superblock cannot be used and sb_config.open_flags has
 * SB_OPEN_SALVAGE (recover.c calls sb_disk_salvage at its step 1).
 *
 * The segments describe themselves: a file's name is its segment id, every
 * record head names its segment, generation and sequence number and checks
 * at its own offset, and a sealed segment's summary lists its record heads
 * with its generation and data_end. What the superblock held, and where
 * salvage gets it:
 *
 *   FIELD          REBUILT FROM
 *   segment list   every seg-NNNNNNNN.dat with a record (or a sound
 *                  summary) of its own, by id; all sealed
 *   segment_id     the file's name
 *   generation     the newest one its summary or its record heads name:
 *                  records of an older one are an older life of the file,
 *                  stale, and dropped
 *   data_end       a sound summary's; for a file read record by record,
 *                  the end of its last record kept
 *   segment_bytes  the size most segment files have (they are preallocated
 *                  to it and never grown); sb_config.segment_bytes if none
 *                  has a valid one
 *   slot_bytes     sized as a new store's (SB_SEGS_MIN..SB_SEGS_MAX
 *                  entries for the cap) and at least 16 more than the files
 *   write_count    the newest generation adopted (+2, for the two slot
 *                  writes), so every later segment's generation is newer
 *   store_id       new, random
 *   durable_seq    the newest sequence number kept (every kept record is in
 *                  a synced file)
 *   wear block     zero: the tier's write history before the salvage is
 *                  lost (counting what the files hold would make write
 *                  amplification wrong, not merely unknown)
 *   free slots     none: a reclaimed segment's slot goes with the old
 *                  superblock; if its files remain it is adopted again (its
 *                  records are correct, and older, by sequence number,
 *                  than any copy reclamation made of them, which recovery
 *                  prefers)
 *   namespaces     not in the superblock: every segment holds the
 *                  description of each namespace it has records of
 *
 * Step by step:
 *
 *   1. List the segment files; segment_bytes from their sizes; room for
 *      them in d->segs.
 *   2. Per file, by id:
 *      a. A summary that decodes, names the file's id, whose data_end the
 *         file holds, whose generation is not older than the one a record
 *         head at offset 0 names, and whose entries check (as recovery
 *         reads a sealed segment's) gives the segment: sealed, its records.
 *      b. Else the file is read from offset 0 to its end through a window
 *         (scan.h). At each 4 KiB block where a record may start, a head
 *         that checks at that offset for the segment (any generation) is
 *         a record: its payload is hashed, and it is kept when the hash
 *         holds (dropped when not), and the scan jumps its length, which
 *         the head hash covers. A block where no head checks is skipped
 *         alone, so a damaged run ends at the next block that checks; an
 *         all-zero block is free space, not damage. No length is ever
 *         taken from bytes that did not check. Then records of a
 *         generation older than the file's newest are dropped (stale).
 *      A record head of another format version (its head hash holds)
 *      stops the salvage: SB_ERR_VERSION, nothing written; so does a read
 *      that fails (SB_ERR_IO: a retry may read what this one could not,
 *      and a file sealed short of it would hide it for good).
 *   3. Each file of step 2b is synced and sealed with a summary of what it
 *      kept (temporary name, sync, rename), before any superblock lists
 *      it: a cut here leaves the damaged superblock, and sound summaries a
 *      later salvage reads at step 2a.
 *   4. A fresh superblock listing every adopted segment, both slots
 *      written, renamed over the damaged one (sb_disk_super_create).
 *   recover.c then rebuilds the index from the records (its step 3 on).
 *
 * Cost: the files of step 2b are read whole, once; the others only their
 * summary and first block.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "recover_int.h"
#include "scan.h"

/* One segment file and what step 2 made of it. */
typedef struct sfile {
    uint32_t id;
    uint64_t size;             /* bytes of the file (0: gone since listed) */
    uint32_t seg;              /* its segment index; UINT32_MAX: not adopted */
    bool scanned;              /* read record by record (step 2b) */
    size_t first, end;         /* its records, c->r[first, end) */
} sfile;

static int u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int sfile_cmp(const void *a, const void *b)
{
    uint32_t x = ((const sfile *)a)->id, y = ((const sfile *)b)->id;
    return x < y ? -1 : x > y;
}

/* Step 1: the size most files have among the valid segment sizes (ties:
 * the larger), or fallback. Returns 0 when out of memory. */
static uint64_t common_size(const sfile *f, size_t n, uint64_t fallback)
{
    uint64_t *v = malloc((n ? n : 1) * sizeof *v);
    if (!v)
        return 0;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (f[i].size >= (64u << 10) && f[i].size % SB_FMT_BLOCK == 0 &&
            f[i].size <= (1ull << 40))
            v[m++] = f[i].size;
    qsort(v, m, sizeof *v, u64_cmp);
    uint64_t best = fallback;
    size_t best_n = 0;
    for (size_t i = 0, j; i < m; i = j) {
        for (j = i; j < m && v[j] == v[i]; j++)
            ;
        if (j - i >= best_n) { /* ascending: a tie goes to the larger */
            best = v[i];
            best_n = j - i;
        }
    }
    free(v);
    return best;
}

/* Take back the last record added (its head h). */
static void unadd(rctx *c, const sb_rec_head *h)
{
    c->n--;
    c->ntok -= h->n_tokens;
    c->nb -= ((size_t)h->extra_bytes + 7) / 8 * 8;
}

/* A dropped record (or damaged run) of bytes. */
static void dropped(sb_disk *d, uint64_t bytes)
{
    d->salv_dropped++;
    d->salv_dropped_bytes += bytes;
}

/* Step 2b for segment index i, file fd, up to limit. sum_gen: the
 * generation a summary of the file names (0: none decoded). *found
 * receives whether any record head of the segment checked. Sets the
 * segment's generation and data_end.
 * Returns: SB_OK; SB_ERR_VERSION; SB_ERR_IO (a read failed); SB_ERR_NOMEM. */
static int scan_file(rctx *c, sb_scan *sc, uint32_t i, int fd, uint64_t limit, uint32_t sum_gen,
                     bool *found)
{
    sb_disk *d = c->d;
    sb_seg *g = &d->segs[i];
    size_t first = c->n;
    uint32_t gen = sum_gen;
    bool run = false;          /* inside a damaged run */
    *found = false;
    for (uint64_t off = 0; off + SB_FMT_BLOCK <= limit;) {
        sb_rec_head h;
        const uint32_t *tok = NULL;
        const void *extra = NULL;
        int st = sb_scan_head(sc, fd, g->id, 0, off, limit, &h, &tok, &extra);
        if (st == SB_SCAN_VERSION)
            return SB_ERR_VERSION;
        if (st == SB_SCAN_BAD_HEAD) {
            if (sb_scan_zero(sc, fd, off)) {
                run = false;
            } else {
                if (!run)
                    dropped(d, 0);
                run = true;
                d->salv_dropped_bytes += SB_FMT_BLOCK;
            }
            off += SB_FMT_BLOCK;
            continue;
        }
        run = false;
        if (st == SB_SCAN_OK) {
            *found = true;
            uint64_t bytes = sb_rec_record_bytes(&h);
            /* Recovery takes a seq of 0 or past SB_REC_SEQ_MAX as damage. */
            bool seq_ok = h.seq && h.seq <= SB_REC_SEQ_MAX;
            int rc = seq_ok ? sb_recover_add(c, i, off, &h, tok, extra) : SB_OK;
            if (rc != SB_OK)
                return rc;
            st = sb_scan_payload(sc, fd, &h, off);
            if (st == SB_SCAN_OK && seq_ok) {
                gen = h.generation > gen ? h.generation : gen;
                off += bytes;
                continue;
            }
            if (seq_ok)
                unadd(c, &h);
            if (st == SB_SCAN_OK || st == SB_SCAN_BAD_PAYLOAD) {
                dropped(d, bytes);
                off += bytes;
                continue;
            }
        }
        /* A read failed, or the file shrank under the scan: stop with
         * nothing written, rather than seal the file short of records a
         * retry could read. */
        d->read_errors++;
        return SB_ERR_IO;
    }
    /* Records of an older life of the file are stale. */
    size_t k = first;
    uint64_t end = 0;
    for (size_t j = first; j < c->n; j++) {
        const rrec *r = &c->r[j];
        uint64_t bytes = sb_rec_record_bytes(&r->h);
        if (r->h.generation != gen) {
            dropped(d, bytes);
            continue;
        }
        end = r->off + bytes > end ? r->off + bytes : end;
        c->r[k++] = *r;
    }
    c->n = k;
    g->gen = gen;
    g->data_end = end;
    return SB_OK;
}

/* Step 2 for file f, as segment index d->n_segs if adopted.
 * Returns: SB_OK; SB_ERR_VERSION; SB_ERR_IO; SB_ERR_NOMEM. */
static int salvage_file(rctx *c, sb_scan *sc, sfile *f)
{
    sb_disk *d = c->d;
    uint32_t i = d->n_segs;
    sb_seg *g = &d->segs[i];
    memset(g, 0, sizeof *g);
    g->id = f->id;
    g->wfd = g->rfd = -1;
    f->seg = UINT32_MAX;
    f->first = c->n;
    char name[32];
    sb_disk_seg_name(name, f->id, "dat");
    int fd = sb_io_open(d->rio, name, SB_IO_RDONLY);
    if (fd == -ENOENT) { /* gone since the listing */
        d->salv_skipped++;
        return SB_OK;
    }
    if (fd < 0)
        return sb_disk_errno(fd);
    uint64_t limit = f->size / SB_FMT_BLOCK * SB_FMT_BLOCK;
    /* 2a: the summary, unless a record head at offset 0 names a newer
     * generation (the summary is then of an older life of the file). */
    sb_rec_head h0;
    int st0 = sb_scan_head(sc, fd, f->id, 0, 0, limit, &h0, NULL, NULL);
    uint32_t gen0 = st0 == SB_SCAN_OK ? h0.generation : 0;
    size_t n0 = c->n, t0 = c->ntok, b0 = c->nb;
    uint64_t dropped0 = d->salv_dropped, dropped_bytes0 = d->salv_dropped_bytes;
    sb_sum_info seen = { 0 };
    int rc = st0 == SB_SCAN_VERSION ? SB_ERR_VERSION
                                    : sb_recover_read_summary(c, i, limit, &seen);
    bool found = rc == SB_OK && g->gen && g->gen >= gen0;
    if (found) {
        d->salv_segments++;
    } else if (rc != SB_ERR_NOMEM && rc != SB_ERR_VERSION) { /* 2b */
        c->n = n0; /* all or nothing: what the summary added goes */
        c->ntok = t0;
        c->nb = b0;
        g->gen = 0;
        g->data_end = 0;
        f->scanned = true;
        rc = scan_file(c, sc, i, fd, limit, seen.segment_id ? seen.generation : 0, &found);
        found = found || (seen.segment_id && seen.generation);
    }
    sb_scan_forget(sc);
    sb_io_close(d->rio, fd);
    if (rc != SB_OK)
        return rc;
    if (!found) { /* nothing of its own: left as it is, unlisted */
        d->salv_skipped++;
        d->salv_dropped = dropped0; /* what it holds is not the store's */
        d->salv_dropped_bytes = dropped_bytes0;
        return SB_OK;
    }
    g->state = f->scanned ? SB_SEG_OPEN : SB_SEG_SEALED;
    f->seg = i;
    f->end = c->n;
    d->n_segs++;
    return SB_OK;
}

/* Step 3 for file f: make what it holds durable, and seal it with a
 * summary of the records kept. Returns: SB_OK; SB_ERR_IO; SB_ERR_NOSPC;
 * SB_ERR_NOMEM. */
static int seal_scanned(rctx *c, const sfile *f)
{
    sb_disk *d = c->d;
    sb_seg *g = &d->segs[f->seg];
    char name[32];
    sb_disk_seg_name(name, f->id, "dat");
    int fd = sb_io_open(d->wio, name, 0);
    int64_t r = fd < 0 ? fd : sb_io_fdatasync(d->wio, fd);
    if (fd >= 0)
        sb_io_close(d->wio, fd);
    if (r < 0)
        return sb_disk_errno(r);
    int rc = SB_OK;
    for (size_t k = f->first; k < f->end && rc == SB_OK; k++) {
        const rrec *x = &c->r[k];
        rc = sb_disk_seg_note(d, f->seg, x->off, &x->h, x->h.n_tokens ? c->tok + x->tok : NULL,
                              x->h.extra_bytes ? c->bytes + x->extra : NULL);
    }
    if (rc == SB_OK)
        rc = sb_disk_seg_write_summary(d, f->seg);
    g->state = SB_SEG_SEALED;
    sb_disk_seg_free(d, g);
    d->salv_segments++;
    d->salv_scanned++;
    return rc;
}

int sb_disk_salvage(rctx *c)
{
    sb_disk *d = c->d;
    /* 1. The files, by id, and their sizes. */
    sb_id_list l;
    int rc = sb_recover_list_ids(d, &l);
    if (rc != SB_OK)
        return rc;
    sfile *f = calloc(l.n ? l.n : 1, sizeof *f);
    if (!f) {
        free(l.id);
        return SB_ERR_NOMEM;
    }
    uint32_t max_id = 0;
    for (size_t k = 0; k < l.n; k++) {
        f[k].id = l.id[k];
        max_id = l.id[k] > max_id ? l.id[k] : max_id;
        char name[32];
        sb_disk_seg_name(name, l.id[k], "dat");
        int fd = sb_io_open(d->rio, name, SB_IO_RDONLY);
        int r = fd < 0 ? fd : d->rio->ops->size(d->rio, fd, &f[k].size);
        if (fd >= 0)
            sb_io_close(d->rio, fd);
        if (r < 0 && r != -ENOENT && rc == SB_OK)
            rc = sb_disk_errno(r);
    }
    qsort(f, l.n, sizeof *f, sfile_cmp);
    size_t n = l.n;
    free(l.id);
    if (rc != SB_OK) {
        free(f);
        return rc;
    }
    d->next_seg_id = max_id + 1; /* new segments never take a file's name */
    uint64_t seg_bytes = common_size(f, n, d->seg_bytes);
    uint64_t want = d->cap_bytes / (seg_bytes ? seg_bytes : 1) + 16;
    want = want < SB_SEGS_MIN ? SB_SEGS_MIN : want > SB_SEGS_MAX ? SB_SEGS_MAX : want;
    want = n + 16 > want ? n + 16 : want;
    d->max_segs = want > 1u << 20 ? 1u << 20 : (uint32_t)want;
    free(d->segs);
    d->segs = calloc(d->max_segs, sizeof *d->segs);
    sb_scan sc;
    if (!seg_bytes || !d->segs || sb_scan_init(&sc, d->rio) != SB_OK) {
        free(f);
        return SB_ERR_NOMEM;
    }
    d->seg_bytes = seg_bytes;
    d->n_segs = 0;

    /* 2. Every file's records. */
    for (size_t k = 0; k < n && rc == SB_OK; k++) {
        if (d->n_segs == d->max_segs) { /* more files than a superblock lists */
            d->salv_skipped++;
            f[k].seg = UINT32_MAX;
            continue;
        }
        rc = salvage_file(c, &sc, &f[k]);
    }
    sb_scan_fini(&sc);

    /* 3. Seal what was read record by record. */
    for (size_t k = 0; k < n && rc == SB_OK; k++)
        if (f[k].seg != UINT32_MAX && f[k].scanned)
            rc = seal_scanned(c, &f[k]);
    free(f);
    if (rc != SB_OK)
        return rc;

    /* 4. The superblock. */
    uint32_t max_gen = 0;
    for (uint32_t i = 0; i < d->n_segs; i++)
        max_gen = d->segs[i].gen > max_gen ? d->segs[i].gen : max_gen;
    uint64_t max_seq = 0;
    for (size_t k = 0; k < c->n; k++)
        max_seq = c->r[k].h.seq > max_seq ? c->r[k].h.seq : max_seq;
    d->write_count = max_gen;
    d->durable_seq = max_seq;
    d->wear_write0 = d->wear_logical0 = d->wear_reinsert0 = 0;
    for (size_t k = 0; k < c->n && !d->tomb_mark; k++)
        d->tomb_mark = c->r[k].h.kind == SB_REC_TOMBSTONE; /* superblock version 3 */
    if ((rc = sb_disk_super_create(d, 2)) != SB_OK)
        return rc;
    d->super_tomb = d->tomb_mark;
    d->salvaged = 1;
    return SB_OK;
}
