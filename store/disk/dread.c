/* dread.c -- the disk tier's read path: bring disk-only blocks back into
 * RAM for a restore, reading adjacent records together and checking every
 * one, and cut the index where a record turns out bad.
 *
 * sb_disk_load, step by step:
 *
 *   1. Under st->mu: reserve RAM budget for each block that has no data
 *      (in order; eviction may run; a block the budget cannot hold ends
 *      the load there), taking a spare pool buffer of its size where the
 *      pool has one, and copy out where each record is.
 *   2. Unlocked: new pool memory for the blocks that got no spare (one
 *      chunk, populated at once) and a buffer per compressed record. Then
 *      the reads (under rd_mu): records that are adjacent in one segment --
 *      a sequence's pages are written one after the other -- are read by
 *      one vectored read of up to SB_DISK_READ_MAX bytes whose iovecs
 *      alternate between each record's head (into the tier's heads scratch,
 *      kept faulted in between loads up to SB_DISK_HEADS_KEEP) and its
 *      payload (straight into the pool buffer that becomes the block's
 *      data, or the compressed record's buffer): the only copy is the
 *      device's, and with spares from a prefaulted or recycled pool no
 *      memory is touched for the first time. Every read of the load is in
 *      flight at once (up to queue_depth).
 *   3. Check each record as its read completes, while the others are still
 *      in flight: the whole record read; the head decodes at its offset
 *      (magic, version, head hash over segment id, generation and offset);
 *      it is the record of this block (kind, namespace, content key or
 *      position, size); the payload hash matches. A compressed record is
 *      decompressed into the pool buffer, which must come out exactly the
 *      block's size. A read that fails or comes back short is read again
 *      record by record, so one bad record costs only itself, exactly as
 *      when every record had its own read.
 *   4. Under st->mu: install the good buffers in order up to the first bad
 *      record; the rest go back to the pool as spares. A bad record's block
 *      leaves the index with everything that depends on it (deepest leaf
 *      pages first, so the tree stays valid at every step).
 *
 * No byte of a recycled buffer reaches a restore: a buffer is installed
 * only when its record was read whole and its payload hash covers every
 * byte of the block (a point state's padding is zeroed).
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "compress.h"
#include "disk_int.h"
#include "host.h"
#include "internal.h"
#include "io_int.h"

typedef struct rgrp rgrp;

/* One record to read. */
typedef struct rd {
    sb_blk *b;
    size_t idx;                /* its index in the caller's blocks */
    uint32_t seg, seg_id, gen, head_bytes;
    uint64_t off;
    uint32_t stored;           /* the payload's stored size if compressed */
    uint8_t zflags;            /* ...and the record's flags */
    uint8_t *zbuf;             /* ...read here, padded, then decompressed */
    sb_pbuf buf;               /* becomes b's data */
    uint8_t *head;             /* its head, in the heads' scratch */
    uint64_t pay;              /* bytes read after the head */
    rgrp *g;                   /* the read it is in */
    int err;                   /* SB_OK, SB_ERR_IO, SB_ERR_CORRUPT */
    bool installed;            /* data and reservation went to the block */
    bool checked;              /* err is set */
} rd;

/* One read request: records x[first, first + n), adjacent in one segment. */
struct rgrp {
    size_t first, n;
    uint64_t bytes;            /* heads and payloads */
    sb_io_req req;
};

/* A page cut with b (ctx) leaves for b's reason. */
static void cut_why(void *ctx, sb_blk *page)
{
    sb_drec_of(page)->why = sb_drec_of(ctx)->why; /* why the pages after b go too (ctx: b) */
}

void sb_disk_drop(sb_ns *ns, sb_blk *b)
{
    sb_host_index_cut(ns, b, cut_why, b);
}

/* Open segment index seg (segment id id) for reading. A load holds the
 * segment, and reclamation closes a slot's fd when it frees it, so the fd
 * is always for the slot's present segment. [rd] */
static int reader_fd(sb_disk *d, uint32_t seg, uint32_t id)
{
    sb_seg *s = &d->segs[seg];
    if (s->rfd >= 0)
        return s->rfd;
    char name[32];
    sb_disk_seg_name(name, id, "dat");
    int fd = sb_io_open(d->rio, name, SB_IO_RDONLY | (d->direct ? SB_IO_DIRECT : 0));
    if (fd == -EINVAL)
        fd = sb_io_open(d->rio, name, SB_IO_RDONLY);
    if (fd >= 0)
        s->rfd = fd;
    return fd;
}

/* Step 2 for one record: where its payload lands (iov[1]). Returns false
 * when out of memory for a compressed record's buffer. */
static bool rd_payload(rd *x, struct iovec iov[2])
{
    x->pay = x->stored ? sb_fmt_pad(x->stored) : sb_host_blk_data_bytes(x->b->ns, x->b->kind);
    x->zbuf = x->stored ? aligned_alloc(4096, x->pay) : NULL;
    if (x->stored && !x->zbuf)
        return false;
    iov[1] = (struct iovec){ x->stored ? x->zbuf : x->buf.data, x->pay };
    return true;
}

/* Step 2 for x[0, n): their heads, one after the other from heads (iov[0]
 * of each). */
static void rd_heads(rd *x, size_t n, uint8_t *heads, struct iovec *iov)
{
    for (size_t i = 0; i < n; i++) {
        x[i].head = heads;
        iov[2 * i] = (struct iovec){ heads, x[i].head_bytes };
        heads += x[i].head_bytes;
    }
}

/* Grow the tier's heads scratch to bytes (<= SB_DISK_HEADS_KEEP), in whole
 * huge pages populated once (sb_host_map): no restore faults it in, and
 * on the development VM the first read of a 4 KiB page the device had
 * just written cost about 6 us, of a huge page's 4 KiB far less. [rd] */
static bool heads_grow(sb_disk *d, size_t bytes)
{
    if (bytes <= d->rd_heads_cap)
        return true;
    size_t mapped;
    uint8_t *h = sb_host_map(bytes, &mapped);
    if (!h)
        return false;
    if (d->rd_heads)
        munmap(d->rd_heads, d->rd_heads_cap);
    d->rd_heads = h;
    d->rd_heads_cap = mapped;
    return true;
}

/* Room for bytes of heads: the tier's scratch (grown up to
 * SB_DISK_HEADS_KEEP), else a buffer of the load's own (*own, which the
 * caller frees). NULL when out of memory. [rd] */
static uint8_t *heads_for(sb_disk *d, size_t bytes, uint8_t **own)
{
    *own = NULL;
    if (bytes <= SB_DISK_HEADS_KEEP)
        return heads_grow(d, bytes) ? d->rd_heads : NULL;
    *own = aligned_alloc(4096, bytes);
    return *own;
}

void sb_disk_prefault(sb_store *st, const sb_ns *ns, size_t n)
{
    (void)sb_disk_heads_ready(sb_disk_of(st), (n + 1) * sb_rec_head_size(ns->page_tokens, 0));
}

int sb_disk_heads_ready(sb_disk *d, size_t bytes)
{
    pthread_mutex_lock(&d->rd_mu);
    bool ok = heads_grow(d, bytes < SB_DISK_HEADS_KEEP ? bytes : SB_DISK_HEADS_KEEP);
    pthread_mutex_unlock(&d->rd_mu);
    return ok ? SB_OK : SB_ERR_NOMEM;
}

/* Step 3 for one record: res is what its read returned for it. */
static int check(const sb_ns *ns, rd *x, int64_t res)
{
    const sb_blk *b = x->b;
    uint64_t pay = sb_host_blk_data_bytes(ns, b->kind);
    if (res != (int64_t)(x->head_bytes + x->pay))
        return res < 0 ? SB_ERR_IO : SB_ERR_CORRUPT;
    sb_rec_head h;
    const uint32_t *tok;
    const void *extra;
    if (sb_rec_decode(x->head, x->head_bytes, x->off, &h, &tok, &extra) != SB_OK)
        return SB_ERR_CORRUPT;
    if (h.segment_id != x->seg_id || h.generation != x->gen || h.ns_id != ns->id ||
        h.flags != x->zflags || h.payload_bytes != (x->stored ? x->stored : b->bytes))
        return SB_ERR_CORRUPT;
    if (b->kind == SB_BLK_PAGE) {
        if (h.kind != SB_REC_PAGE || h.key[0] != b->key.lo || h.key[1] != b->key.hi ||
            h.n_tokens != b->n_tokens)
            return SB_ERR_CORRUPT;
    } else if (h.kind != SB_REC_POINT || h.position != b->n_tokens) {
        return SB_ERR_CORRUPT;
    }
    uint8_t *data = x->buf.data;
    if (sb_rec_payload_hash(x->stored ? x->zbuf : data, h.payload_bytes) != h.payload_hash)
        return SB_ERR_CORRUPT;
    if (x->stored) {
        int rc = sb_zdecompress(x->zbuf, x->stored, x->zflags, data, b->bytes);
        if (rc != SB_OK)
            return rc == SB_ERR_NOMEM ? SB_ERR_IO : rc;
    }
    if (pay > b->bytes) /* the padding of a point state */
        memset(data + b->bytes, 0, pay - b->bytes);
    return SB_OK;
}

/* Group records x[0, n) (their iovecs at iov[2i], iov[2i + 1]) into reads
 * of adjacent records, at most SB_DISK_READ_MAX bytes and SB_IO_IOV_MAX
 * iovecs each (a record alone may be larger), into g. Returns the number
 * of groups. */
static size_t group(rd *x, size_t n, struct iovec *iov, rgrp *g)
{
    size_t ng = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t rec = x[i].head_bytes + x[i].pay;
        rgrp *last = ng ? &g[ng - 1] : NULL;
        const rd *prev = i ? &x[i - 1] : NULL;
        if (!last || prev->seg != x[i].seg || prev->seg_id != x[i].seg_id ||
            prev->off + prev->head_bytes + prev->pay != x[i].off ||
            last->bytes + rec > SB_DISK_READ_MAX || 2 * (last->n + 1) > SB_IO_IOV_MAX) {
            g[ng++] = (rgrp){ .first = i, .n = 0, .bytes = 0 };
            last = &g[ng - 1];
            last->req.iov = &iov[2 * i];
            last->req.off = x[i].off;
        }
        last->n++;
        last->bytes += rec;
        last->req.iovcnt = (int)(2 * last->n);
        x[i].g = last;
    }
    return ng;
}

/* A read of group g completed: check its records. false when a read of
 * several records came back short or failed: they are read again one by
 * one. */
static bool reap_one(const sb_ns *ns, rd *x, rgrp *g, sb_disk_ready_fn ready, void *ctx)
{
    int64_t res = g->req.result;
    if (res != (int64_t)g->bytes && g->n > 1)
        return false;
    for (size_t i = g->first; i < g->first + g->n; i++) {
        /* A whole read brought each record whole; a record alone is as
         * its read came back. */
        int64_t mine = g->n > 1 ? (int64_t)(x[i].head_bytes + x[i].pay) : res;
        x[i].err = check(ns, &x[i], mine);
        x[i].checked = true;
        if (x[i].err == SB_OK && ready)
            ready(ctx, x[i].idx, x[i].buf.data);
    }
    return true;
}

/* Submit the reads of g[0, ng) and check each as it completes, queue_depth
 * in flight. A group that came back short or failed is left unchecked and
 * its records listed in *again (single-record groups, for another round);
 * a read that never completed failed. [rd] */
static void read_groups(sb_disk *d, const sb_ns *ns, rd *x, rgrp *g, size_t ng,
                        sb_io_req **reqs, sb_disk_ready_fn ready, void *ctx, uint64_t io[2])
{
    size_t m = 0;
    for (size_t k = 0; k < ng; k++) {
        rd *first = &x[g[k].first];
        int fd = reader_fd(d, first->seg, first->seg_id);
        g[k].req.op = SB_IO_READ;
        g[k].req.fd = fd;
        g[k].req.user = &g[k];
        g[k].req.result = fd < 0 ? fd : -EIO; /* until it completes */
        if (fd >= 0)
            reqs[m++] = &g[k].req;
    }
    size_t sent = 0, got = 0;
    bool failed = false;
    while (got < sent || (sent < m && !failed)) {
        while (sent < m && !failed && sent - got < d->qd) {
            size_t want = m - sent < d->qd - (sent - got) ? m - sent : d->qd - (sent - got);
            int r = sb_io_submit(d->rio, reqs + sent, (unsigned)want);
            if (r <= 0) { /* the rest fail */
                for (size_t k = sent; k < m; k++)
                    reqs[k]->result = r < 0 ? r : -EIO;
                failed = true;
                break;
            }
            sent += (size_t)r;
            io[0] += (uint64_t)r;
        }
        if (got == sent)
            break;
        sb_io_req *done[64];
        int r = sb_io_reap(d->rio, 1, done, 64);
        if (r <= 0)
            break; /* the backend lost them: they failed */
        for (int k = 0; k < r; k++) {
            if (done[k]->result > 0)
                io[1] += (uint64_t)done[k]->result;
            reap_one(ns, x, done[k]->user, ready, ctx);
        }
        got += (size_t)r;
    }
    for (size_t k = 0; k < ng; k++) /* never submitted, or lost */
        if (!x[g[k].first].checked && g[k].n == 1)
            reap_one(ns, x, &g[k], NULL, NULL);
}

/* Steps 2 and 3 for x[0, n) (buffers and scratch set up): read, check,
 * and read again record by record what a group read did not bring. Adds
 * the reads submitted to io[0] and the bytes they brought to io[1]. [rd] */
static void read_all(sb_disk *d, const sb_ns *ns, rd *x, size_t n, struct iovec *iov,
                     sb_disk_ready_fn ready, void *ctx, uint64_t io[2])
{
    rgrp *g = malloc(2 * n * sizeof *g);
    sb_io_req **reqs = malloc(n * sizeof *reqs);
    size_t ng = g && reqs ? group(x, n, iov, g) : 0;
    if (ng)
        read_groups(d, ns, x, g, ng, reqs, ready, ctx, io);
    /* Records of groups that came back short or failed: alone now. */
    size_t n2 = 0;
    for (size_t i = 0; ng && i < n; i++) {
        if (x[i].checked)
            continue;
        g[ng + n2] = (rgrp){ .first = i, .n = 1, .bytes = x[i].head_bytes + x[i].pay };
        g[ng + n2].req.iov = &iov[2 * i];
        g[ng + n2].req.iovcnt = 2;
        g[ng + n2].req.off = x[i].off;
        x[i].g = &g[ng + n2];
        n2++;
    }
    if (n2)
        read_groups(d, ns, x, g + ng, n2, reqs, ready, ctx, io);
    for (size_t i = 0; i < n; i++)
        if (!x[i].checked) { /* out of memory for the reads: they failed */
            x[i].err = SB_ERR_IO;
            x[i].checked = true;
        }
    free(g);
    free(reqs);
}

/* Is b's record no longer the one r read (reclamation moved it)? [mu] */
static bool moved(const sb_blk *b, const rd *r)
{
    const sb_drec *at = sb_drec_of(b);
    return sb_disk_state(b) != SB_DISK_CLEAN || at->seg != r->seg || at->rec_off != r->off ||
           at->seg_id != r->seg_id;
}

/* Step 2's memory for x[0, n): pool buffers for the records that got no
 * spare (extra[kind] spares planned in step 1 ride along), the iovecs and
 * compressed records' buffers (the heads' room comes under rd_mu). Returns
 * how many leading records are ready to read. */
static size_t rd_setup(sb_ns *ns, rd *x, size_t n, const size_t extra[2], struct iovec **iov)
{
    size_t need[2] = { 0, 0 }, ready = n;
    for (size_t i = 0; i < n; i++)
        need[x[i].b->kind == SB_BLK_PAGE ? 0 : 1] += !x[i].buf.data;
    for (int k = 0; k < 2; k++) {
        int kind = k == 0 ? SB_BLK_PAGE : SB_BLK_POINT;
        if (!need[k] && !extra[k])
            continue;
        sb_pbuf *bufs = need[k] ? malloc(need[k] * sizeof *bufs) : NULL;
        if (need[k] && !bufs) {
            pthread_mutex_lock(&ns->st->mu);
            sb_host_read_plan_cancel(ns, kind, extra[k]);
            pthread_mutex_unlock(&ns->st->mu);
        }
        if ((need[k] && !bufs) || sb_host_read_fill(ns, kind, bufs, need[k], extra[k]) != SB_OK) {
            free(bufs);
            for (size_t i = 0; i < n; i++) /* the first without memory ends it */
                if (x[i].b->kind == kind && !x[i].buf.data) {
                    ready = i < ready ? i : ready;
                    break;
                }
            continue;
        }
        for (size_t i = 0, j = 0; i < n && j < need[k]; i++)
            if (x[i].b->kind == kind && !x[i].buf.data)
                x[i].buf = bufs[j++];
        free(bufs);
    }
    *iov = ready ? malloc(2 * ready * sizeof **iov) : NULL;
    if (!*iov)
        return 0;
    for (size_t i = 0; i < ready; i++)
        if (!rd_payload(&x[i], &(*iov)[2 * i]))
            return i;
    return ready;
}

/* One pass of sb_disk_load; *again: a block's record moved (reclamation
 * copied it) while it was read, and it is still on disk: read it anew. */
static int load_once(sb_ns *ns, sb_blk **blocks, size_t n, size_t *n_ok,
                     sb_disk_ready_fn ready_fn, void *ctx, bool *again)
{
    sb_store *st = ns->st;
    sb_disk *d = sb_disk_of(st);
    *n_ok = 0;
    rd *x = NULL;
    size_t nx = 0, limit = n, extra[2] = { 0, 0 };
    int rc = SB_OK;

    /* 1 */
    pthread_mutex_lock(&st->mu);
    size_t need = 0;
    for (size_t i = 0; i < n; i++)
        need += !blocks[i]->data;
    if (need && !d) {
        rc = SB_ERR_IO; /* disk blocks outlived their tier: cannot happen */
        need = 0;
        for (limit = 0; limit < n && blocks[limit]->data; limit++)
            ;
    }
    if (need && !(x = calloc(need, sizeof *x)))
        rc = SB_ERR_NOMEM, need = 0, limit = 0;
    size_t fresh[2] = { 0, 0 }; /* reservations that got no spare, by kind */
    for (size_t i = 0; i < n && nx < need; i++) {
        sb_blk *b = blocks[i];
        if (b->data)
            continue;
        sb_pbuf buf;
        int e = sb_host_read_reserve(ns, b->kind, &buf); /* may wait: look at b after */
        if (e != SB_OK) {
            rc = e;
            limit = i;
            break;
        }
        if (b->data) {
            sb_host_read_unreserve(ns, b->kind, buf);
            continue;
        }
        if (sb_disk_state(b) != SB_DISK_CLEAN || !sb_disk_record_live(d, b)) {
            sb_host_read_unreserve(ns, b->kind, buf); /* its segment was reclaimed */
            rc = SB_ERR_IO;
            limit = i;
            break;
        }
        const sb_drec *at = sb_drec_of(b);
        sb_seg *s = &d->segs[at->seg];
        s->holds++; /* the segment stays until the read is done */
        fresh[b->kind == SB_BLK_PAGE ? 0 : 1] += !buf.data;
        x[nx++] = (rd){ .b = b, .idx = i, .seg = at->seg, .seg_id = s->id, .gen = s->gen,
                        .head_bytes = at->head_bytes, .off = at->rec_off, .stored = at->stored,
                        .zflags = at->zflags, .buf = buf };
    }
    for (int k = 0; k < 2; k++)
        if (fresh[k])
            extra[k] = sb_host_read_plan(ns, k == 0 ? SB_BLK_PAGE : SB_BLK_POINT, fresh[k]);
    pthread_mutex_unlock(&st->mu);

    /* 2 */
    struct iovec *iov = NULL;
    size_t ready = nx ? rd_setup(ns, x, nx, extra, &iov) : 0;
    uint64_t io[2] = { 0, 0 }; /* reads, bytes */
    if (ready) {
        pthread_mutex_lock(&d->rd_mu);
        size_t heads = 0;
        for (size_t i = 0; i < ready; i++)
            heads += x[i].head_bytes;
        uint8_t *own, *at = heads_for(d, heads, &own);
        if (at) {
            rd_heads(x, ready, at, iov);
            read_all(d, ns, x, ready, iov, ready_fn, ctx, io);
        } else {
            ready = 0; /* no room for the heads: nothing read */
        }
        pthread_mutex_unlock(&d->rd_mu);
        free(own);
    }
    free(iov);
    if (ready < nx) {
        rc = SB_ERR_NOMEM;
        for (size_t i = 0; i < n; i++)
            if (blocks[i] == x[ready].b) {
                limit = i;
                break;
            }
    }

    /* 4 */
    pthread_mutex_lock(&st->mu);
    if (d) {
        d->read_bytes += io[1];
        d->read_ios += io[0];
    }
    sb_blk *bad = NULL;
    size_t j = 0;
    for (size_t i = 0; i < limit; i++) {
        sb_blk *b = blocks[i];
        rd *r = j < nx && x[j].b == b ? &x[j++] : NULL;
        if (!r && b->data)
            continue;
        if (!r || r - x >= (ptrdiff_t)ready) {
            limit = i; /* not reserved, or no buffer */
            break;
        }
        if (r->err != SB_OK && moved(b, r)) {
            /* Reclamation moved the record meanwhile: the block is
             * resident now (being written again), on disk elsewhere (read
             * again), or left the index. */
            if (b->data)
                continue;
            *again = b->indexed && sb_disk_state(b) == SB_DISK_CLEAN;
            rc = SB_ERR_IO;
            limit = i;
            break;
        }
        if (r->err != SB_OK) {
            rc = r->err;
            bad = b;
            if (r->err == SB_ERR_CORRUPT)
                d->checksum_failures++;
            else
                d->read_errors++;
            limit = i;
            break;
        }
        sb_host_read_install(b, r->buf); /* goes back to the pool if b got data meanwhile */
        r->installed = true;
    }
    for (size_t i = 0; i < nx; i++) {
        if (!x[i].installed)
            sb_host_read_unreserve(ns, x[i].b->kind, x[i].buf);
        free(x[i].zbuf);
        sb_disk_unhold(st, x[i].seg);
    }
    if (bad) {
        sb_drec_of(bad)->why = SB_DENY_ERROR; /* a ticket counts it (and what follows) unwritten */
        sb_disk_drop(ns, bad);
    }
    pthread_mutex_unlock(&st->mu);
    free(x);
    *n_ok = limit;
    return rc;
}

int sb_disk_load(sb_ns *ns, sb_blk **blocks, size_t n, size_t *n_ok,
                 sb_disk_ready_fn ready_fn, void *ctx)
{
    int rc;
    bool again = true;
    for (int tries = 0; again && tries < 4; tries++) {
        again = false;
        rc = load_once(ns, blocks, n, n_ok, ready_fn, ctx, &again);
    }
    return rc;
}

int sb_disk_read_record(sb_disk *d, sb_ns *ns, sb_blk *b, const sb_disk_loc *at,
                        uint8_t *payload)
{
    rd x = { .b = b, .seg = at->seg, .seg_id = at->seg_id, .gen = at->gen,
             .head_bytes = at->head_bytes, .off = at->off, .stored = at->stored,
             .zflags = at->zflags, .buf = { payload, NULL } };
    struct iovec iov[2];
    uint8_t *scratch = aligned_alloc(4096, at->head_bytes);
    if (!scratch || !rd_payload(&x, iov)) {
        free(scratch);
        free(x.zbuf);
        return SB_ERR_NOMEM;
    }
    rd_heads(&x, 1, scratch, iov);
    uint64_t io[2] = { 0, 0 };
    pthread_mutex_lock(&d->rd_mu);
    read_all(d, ns, &x, 1, iov, NULL, NULL, io);
    pthread_mutex_unlock(&d->rd_mu);
    free(scratch);
    free(x.zbuf);
    pthread_mutex_lock(&d->st->mu);
    d->read_bytes += io[1];
    d->read_ios += io[0];
    if (x.err == SB_ERR_CORRUPT)
        d->checksum_failures++;
    else if (x.err != SB_OK)
        d->read_errors++;
    pthread_mutex_unlock(&d->st->mu);
    return x.err;
}
