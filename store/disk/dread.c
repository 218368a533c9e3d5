/* dread.c -- the disk tier's read path: bring disk-only blocks back into
 * RAM for a restore, checking every record, and cut the index where a
 * record turns out bad.
 *
 * sb_disk_load, step by step:
 *
 *   1. Under st->mu: reserve RAM budget for each block that has no data
 *      (in order; eviction may run; a block the budget cannot hold ends
 *      the load there), and copy out where each record is.
 *   2. Unlocked: allocate a bounce buffer per block (a fresh 4 KiB-aligned
 *      pool buffer that becomes the block's data) and a head buffer, and
 *      under rd_mu submit one read per record (head and payload in one
 *      vectored read, O_DIRECT) with many in flight, then reap them all.
 *   3. Check each: the whole record read; the head decodes at its offset
 *      (magic, version, head hash over segment id, generation and offset);
 *      it is the record of this block (kind, namespace, content key or
 *      position, size); the payload hash matches. A compressed record is
 *      read into a buffer of its stored size and decompressed into the
 *      bounce buffer, which must come out exactly the block's size.
 *   4. Under st->mu: install the good buffers in order up to the first bad
 *      record; give the rest back. A bad record's block leaves the index
 *      with everything that depends on it (deepest leaf pages first, so the
 *      tree stays valid at every step).
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "compress.h"
#include "disk_int.h"
#include "internal.h"
#include "radix.h"

typedef struct rd {
    sb_blk *b;
    size_t idx;                /* its index in the caller's blocks */
    uint32_t seg, seg_id, gen, head_bytes;
    uint64_t off;
    uint32_t stored;           /* the payload's stored size if compressed */
    uint8_t zflags;            /* ...and the record's flags */
    uint8_t *zbuf;             /* ...read here, padded, then decompressed */
    uint8_t *data;             /* bounce: becomes b->data */
    uint8_t *head;
    sb_io_req req;
    struct iovec iov[2];
    int err;                   /* SB_OK, SB_ERR_IO, SB_ERR_CORRUPT */
    bool installed;            /* data and reservation went to the block */
    bool checked;              /* err is set */
} rd;

void sb_disk_drop(sb_ns *ns, sb_blk *b)
{
    if (!b->indexed)
        return;
    if (b->kind == SB_BLK_POINT) {
        if (b->node->point == b)
            sb_radix_drop_point(ns, b->node);
        return;
    }
    sb_blk *prev = sb_radix_prev_page(ns, b);
    while (b->indexed) {
        sb_node *x = b->node;
        while (x->n_kids)
            x = x->kids[0].node;
        sb_radix_evict_page(ns, x->pages[x->n_pages - 1]);
    }
    if (prev && prev->indexed && sb_radix_is_leaf_page(prev))
        sb_blk_candidate(prev);
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

/* Step 2 for one read: its head buffer and, for a compressed record, the
 * buffer its stored payload is read into (else it lands in x->data, pay
 * bytes); the two iovecs. Returns false when out of memory (what was
 * allocated stays for the caller to free). */
static bool rd_buffers(rd *x, size_t pay)
{
    size_t zpay = sb_fmt_pad(x->stored);
    x->head = aligned_alloc(4096, x->head_bytes);
    x->zbuf = x->head && x->stored ? aligned_alloc(4096, zpay) : NULL;
    if (!x->head || (x->stored && !x->zbuf))
        return false;
    x->iov[0] = (struct iovec){ x->head, x->head_bytes };
    x->iov[1] = x->stored ? (struct iovec){ x->zbuf, zpay } : (struct iovec){ x->data, pay };
    return true;
}

/* Step 3 for one read. */
static int check(const sb_ns *ns, rd *x)
{
    const sb_blk *b = x->b;
    uint64_t pay = sb_blk_alloc_bytes(ns, b->kind);
    uint64_t want = x->stored ? sb_fmt_pad(x->stored) : pay;
    if (x->req.result != (int64_t)(x->head_bytes + want))
        return x->req.result < 0 ? SB_ERR_IO : SB_ERR_CORRUPT;
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
    if (sb_rec_payload_hash(x->stored ? x->zbuf : x->data, h.payload_bytes) != h.payload_hash)
        return SB_ERR_CORRUPT;
    if (x->stored) {
        int rc = sb_zdecompress(x->zbuf, x->stored, x->zflags, x->data, b->bytes);
        if (rc != SB_OK)
            return rc == SB_ERR_NOMEM ? SB_ERR_IO : rc;
    }
    if (pay > b->bytes) /* the padding of a point state */
        memset(x->data + b->bytes, 0, pay - b->bytes);
    return SB_OK;
}

/* Steps 2 and 3: submit every read, and check each as it completes while
 * the others are still in flight; a read that never completed failed. [rd] */
static void read_all(sb_disk *d, const sb_ns *ns, rd *x, size_t n, sb_disk_ready_fn ready,
                     void *ctx)
{
    sb_io_req **reqs = malloc(n * sizeof *reqs);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        x[i].req.result = -EIO;
        x[i].checked = false;
        int fd = reqs ? reader_fd(d, x[i].seg, x[i].seg_id) : -ENOMEM;
        if (fd < 0) {
            x[i].req.result = fd;
            continue;
        }
        x[i].req = (sb_io_req){ .op = SB_IO_READ, .fd = fd, .off = x[i].off,
                                .iov = x[i].iov, .iovcnt = 2, .user = &x[i],
                                .result = -EIO /* until it completes */ };
        reqs[m++] = &x[i].req;
    }
    /* Keep queue_depth reads in flight, checking each as it completes. */
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
        }
        if (got == sent)
            break;
        sb_io_req *done[64];
        int r = sb_io_reap(d->rio, 1, done, 64);
        if (r <= 0)
            break; /* the backend lost them: they failed */
        for (int k = 0; k < r; k++) {
            rd *one = done[k]->user;
            one->err = check(ns, one);
            one->checked = true;
            if (one->err == SB_OK && ready)
                ready(ctx, one->idx, one->data);
        }
        got += (size_t)r;
    }
    for (size_t i = 0; i < n; i++)
        if (!x[i].checked) {
            x[i].err = check(ns, &x[i]);
            x[i].checked = true;
        }
    free(reqs);
}

/* Is b's record no longer the one r read (reclamation moved it)? [mu] */
static bool moved(const sb_blk *b, const rd *r)
{
    return b->disk != SB_DISK_CLEAN || b->seg != r->seg || b->rec_off != r->off ||
           b->seg_id != r->seg_id;
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
    size_t nx = 0, limit = n;
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
    for (size_t i = 0; i < n && nx < need; i++) {
        sb_blk *b = blocks[i];
        if (b->data)
            continue;
        int e = sb_blk_reserve(ns, b->kind); /* may wait: look at b after */
        if (e != SB_OK) {
            rc = e;
            limit = i;
            break;
        }
        if (b->data) {
            sb_blk_unreserve(ns, b->kind);
            continue;
        }
        if (b->disk != SB_DISK_CLEAN || !sb_disk_record_live(d, b)) {
            sb_blk_unreserve(ns, b->kind); /* its segment was reclaimed */
            rc = SB_ERR_IO;
            limit = i;
            break;
        }
        sb_seg *s = &d->segs[b->seg];
        s->holds++; /* the segment stays until the read is done */
        x[nx++] = (rd){ .b = b, .idx = i, .seg = b->seg, .seg_id = s->id, .gen = s->gen,
                        .head_bytes = b->head_bytes, .off = b->rec_off, .stored = b->stored,
                        .zflags = b->zflags };
    }
    pthread_mutex_unlock(&st->mu);

    /* 2 */
    size_t ready = 0;
    for (; ready < nx; ready++) {
        rd *r = &x[ready];
        size_t pay = sb_blk_alloc_bytes(ns, r->b->kind);
        r->data = sb_pool_alloc(&st->mem, pay, 4096);
        if (!r->data || !rd_buffers(r, pay))
            break;
    }
    if (ready < nx) {
        rc = SB_ERR_NOMEM;
        for (size_t i = 0; i < n; i++)
            if (blocks[i] == x[ready].b) {
                limit = i;
                break;
            }
    }
    if (ready) {
        pthread_mutex_lock(&d->rd_mu);
        read_all(d, ns, x, ready, ready_fn, ctx);
        pthread_mutex_unlock(&d->rd_mu);
    }
    /* 3 */
    uint64_t bytes = 0;
    for (size_t i = 0; i < ready; i++) {
        if (x[i].req.result > 0)
            bytes += (uint64_t)x[i].req.result;
    }

    /* 4 */
    pthread_mutex_lock(&st->mu);
    if (d)
        d->read_bytes += bytes;
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
            *again = b->indexed && b->disk == SB_DISK_CLEAN;
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
        sb_blk_install(b, r->data); /* frees it if b got data meanwhile */
        r->data = NULL;
        r->installed = true;
    }
    for (size_t i = 0; i < nx; i++) {
        if (!x[i].installed) {
            if (x[i].data)
                sb_pool_free(&st->mem, x[i].data, sb_blk_alloc_bytes(ns, x[i].b->kind));
            sb_blk_unreserve(ns, x[i].b->kind);
        }
        free(x[i].head);
        free(x[i].zbuf);
        sb_disk_unhold(st, x[i].seg);
    }
    if (bad)
        sb_disk_drop(ns, bad);
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
             .zflags = at->zflags, .data = payload };
    if (!rd_buffers(&x, sb_blk_alloc_bytes(ns, b->kind))) {
        free(x.head);
        free(x.zbuf);
        return SB_ERR_NOMEM;
    }
    pthread_mutex_lock(&d->rd_mu);
    read_all(d, ns, &x, 1, NULL, NULL);
    pthread_mutex_unlock(&d->rd_mu);
    free(x.head);
    free(x.zbuf);
    pthread_mutex_lock(&d->st->mu);
    if (x.req.result > 0)
        d->read_bytes += (uint64_t)x.req.result;
    if (x.err == SB_ERR_CORRUPT)
        d->checksum_failures++;
    else if (x.err != SB_OK)
        d->read_errors++;
    pthread_mutex_unlock(&d->st->mu);
    return x.err;
}
