/* writer.c -- the disk tier's writer thread: takes queued blocks, writes
 * each as a record straight from pool memory (a head block, then the page
 * itself, in one vectored O_DIRECT write; up to queue_depth in flight),
 * seals full segments, syncs as the durability mode says, and turns each
 * block CLEAN or FAILED.
 *
 * One turn of the loop:
 *
 *   1. Under st->mu: wait for work (a queued block, a sync that is due, a
 *      flush, close, a copy out of a draining segment, a tombstone).
 *      Tombstones before anything (tomb.c: one is placed before any block
 *      queued after it; the superblock says version 3 before the first
 *      one, written with nothing in flight). Copies next: read
 *      and check their records unlocked (fetch_copies), then place them.
 *      Take blocks while a slot is free: skip those no
 *      longer indexed (superseded or evicted: nothing to write), place the
 *      others at the open segment's end, a namespace record before the
 *      first page of a namespace in the segment, and copy what the head
 *      needs (tokens, keys) out of the tree. A block that does not fit
 *      ends the batch: the segment is sealed once nothing is in flight.
 *   2. Unlocked: hash each payload, encode each head, submit the batch.
 *   3. Reap at least one completion; under st->mu mark each block CLEAN
 *      (or FAILED: it stays RAM-only, the error is counted) and drop the
 *      writer's reference, so it can be evicted.
 *   4. With nothing in flight: seal a full or damaged segment, open the
 *      next one (reclaiming to stay under the cap: reclaim.c), free the
 *      segments that finished draining, or sync when due (a flush or commit
 *      waits, a tombstone was written, or the periodic limits passed); a
 *      sync publishes the tickets and tombstones it covers.
 *
 * Partial pages (a sequence's tail) wait in their own queue and are taken
 * only when a sync is due, a flush or a budget waiter asks, or at close:
 * the next commit usually supersedes them, and a superseded page is
 * skipped, not written.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compress.h"
#include "disk_int.h"
#include "host.h"
#include "internal.h"

typedef struct wslot {
    sb_io_req req;
    struct iovec iov[2];
    sb_blk *b;                 /* the block (a reference), or NULL: a
                                  namespace record or a tombstone */
    sb_ns *ns;                 /* namespace record: whose */
    sb_tomb *t;                /* a tombstone (t->queued while here) */
    uint32_t seg;              /* segment index */
    sb_rec_head h;
    uint8_t *head;             /* aligned, head_cap bytes */
    size_t head_cap;
    uint32_t *tok;             /* tokens of the head, tok_cap */
    size_t tok_cap;
    uint8_t *extra;            /* namespace description */
    uint8_t *own;              /* a copy's payload (writer buffer), or NULL:
                                  the block's data */
    uint8_t *zown;             /* a compressed payload (writer buffer), or
                                  NULL */
    uint64_t rec_bytes;        /* bytes of the record in the segment */
    uint64_t pay_bytes;        /* bytes written after the head */
    bool busy;
} wslot;

/* A copy out of a draining segment: where its record is, then its payload
 * read and checked, waiting for a slot. */
typedef struct wcopy {
    sb_blk *b;
    sb_disk_loc at;
    uint8_t *buf;              /* its payload, sb_host_blk_data_bytes */
    int rc;                    /* how reading it went */
} wcopy;

/* A queued block compressed ahead of its placement (compress_level > 0):
 * its payload as it will be stored, or buf NULL to store it as it is. */
typedef struct wzip {
    sb_blk *b;
    uint8_t *buf;              /* 4 KiB aligned, zero padded to 4 KiB */
    size_t stored;
    uint8_t flags;
} wzip;

#define ZIP_AHEAD 8u           /* blocks compressed ahead of placement */

typedef struct wstate {
    sb_disk *d;
    sb_store *st;
    wslot *slots;
    unsigned n_slots;
    unsigned in_flight;
    sb_io_req **reap;          /* (n_slots) completions */
    sb_io_req **sub;           /* (n_slots) submissions */
    uint64_t unsynced;         /* bytes written since the last sync */
    uint64_t last_sync;        /* store clock (real) of the last sync */
    bool need_seal, need_open;
    bool just_held;            /* the last round was a hold: write next */
    wcopy *ready;              /* (n_slots) copies read, not yet placed */
    unsigned n_ready;
    wcopy *fetch;              /* (n_slots) scratch for fetch_copies */
    sb_zctx *z;                /* compression, or NULL: off */
    wzip zip[ZIP_AHEAD];       /* the first queued blocks, compressed */
    unsigned n_zip;
} wstate;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static wslot *free_slot(wstate *w)
{
    for (unsigned i = 0; i < w->n_slots; i++)
        if (!w->slots[i].busy)
            return &w->slots[i];
    return NULL;
}

static unsigned free_slots(const wstate *w)
{
    unsigned n = 0;
    for (unsigned i = 0; i < w->n_slots; i++)
        n += !w->slots[i].busy;
    return n;
}

static bool grow(void **p, size_t *cap, size_t want, size_t align)
{
    if (*cap >= want)
        return true;
    size_t n = *cap ? *cap : 4096;
    while (n < want)
        n *= 2;
    void *q = align ? aligned_alloc(align, n) : malloc(n);
    if (!q)
        return false;
    free(*p);
    *p = q;
    *cap = n;
    return true;
}

/* ---- the queue [mu] ----------------------------------------------------------- */

static bool tails_due(const sb_disk *d, const wstate *w)
{
    if (!d->t_head)
        return false;
    if (d->stop || d->flush_ticket >= sb_drec_of(d->t_head)->ticket)
        return true;
    return d->durability == SB_DURABILITY_PERIODIC && w->unsynced &&
           now_ns() - w->last_sync >= d->sync_ns;
}

/* The next block to write, unlinked; NULL when none is due. */
static sb_blk *pop(sb_disk *d, const wstate *w)
{
    sb_blk **head = &d->q_head, **tail = &d->q_tail;
    if (!d->q_head) {
        if (!tails_due(d, w))
            return NULL;
        head = &d->t_head;
        tail = &d->t_tail;
    }
    sb_blk *b = *head;
    *head = sb_drec_of(b)->wq_next;
    if (!*head)
        *tail = NULL;
    sb_drec_of(b)->wq_next = NULL;
    return b;
}

/* The lowest ticket not yet resolved, or next_ticket. */
static uint64_t first_open_ticket(const sb_disk *d, const wstate *w)
{
    uint64_t t = d->next_ticket;
    if (d->q_head && sb_drec_of(d->q_head)->ticket < t)
        t = sb_drec_of(d->q_head)->ticket;
    for (const sb_blk *b = d->t_head; b; b = sb_drec_of(b)->wq_next)
        if (sb_drec_of(b)->ticket < t)
            t = sb_drec_of(b)->ticket;
    for (unsigned i = 0; i < w->n_slots; i++)
        if (w->slots[i].busy && w->slots[i].b && sb_drec_of(w->slots[i].b)->ticket < t)
            t = sb_drec_of(w->slots[i].b)->ticket;
    return t;
}

/* CLEAN block b's record is the one slot s wrote: it joins the gauges and
 * its matches hold that segment; not hit since. [mu] */
static void written_at(sb_store *st, sb_blk *b, const wslot *s)
{
    sb_drec *r = sb_drec_of(b);
    r->seg = s->seg;
    r->seg_id = s->h.segment_id;
    r->rec_off = s->req.off;
    r->head_bytes = s->h.head_bytes;
    r->stored = s->h.flags ? (uint32_t)s->h.payload_bytes : 0;
    r->zflags = s->h.flags;
    r->hit = 0;
    sb_disk_held(st, b, 1);
    if (b->indexed)
        sb_disk_count(st, b, 1);
}

/* A block leaves the writer: written (ok) or not, or skipped (counted
 * neither way). */
static void resolve(sb_disk *d, sb_blk *b, int how, const wslot *s)
{
    sb_store *st = d->st;
    d->pending_bytes -= b->bytes;
    d->reserved -= sb_disk_rec_bytes(b); /* its admission's reservation */
    d->progress++;
    sb_drec_of(b)->reinsert = 0;
    bool dead = false;
    if (how > 0 && sb_host_blk_removed(b)) {
        /* A removal took b: a record placed before its tombstone is dead
         * (recovery drops it), one placed after is b's own again. */
        if (s->h.seq < d->removal_mark)
            dead = true, how = 0; /* not written */
        else
            sb_host_blk_fresh(b);
    }
    if (how > 0) {
        sb_disk_state_set(b, SB_DISK_CLEAN);
        written_at(st, b, s);
    } else {
        sb_disk_state_set(b, how < 0 ? SB_DISK_FAILED : SB_DISK_NONE);
        if (how < 0 && sb_drec_of(b)->ticket > d->err_ticket)
            d->err_ticket = sb_drec_of(b)->ticket;
        if (how < 0) {
            d->err_rc = d->broken == SB_ERR_NOSPC ? SB_ERR_NOSPC : SB_ERR_IO;
            sb_disk_fault(d, d->err_rc);
        }
    }
    if (dead && b->indexed && b->data) {
        /* Committed again since the removal took it: written again (after
         * the tombstone), the tickets that need it waiting on (or failing
         * if it is denied now). */
        sb_disk_enqueue(st, b);
    } else if (sb_drec_of(b)->waits) { /* the durability tickets waiting for it */
        sb_tkt_resolved(d, b, how > 0);
    }
    bool offer = b->indexed && b->data &&
                 (how > 0 || b->kind == SB_BLK_POINT || sb_host_blk_leaf(b));
    sb_host_blk_unref(b);
    if (offer)
        sb_host_blk_evictable(b);
}

/* ---- records [mu] --------------------------------------------------------------- */

static bool seg_has_ns(const sb_seg *s, uint64_t id)
{
    for (size_t i = 0; i < s->n_ns; i++)
        if (s->ns_ids[i] == id)
            return true;
    return false;
}

/* The key of the last full page before point state b on its path (the
 * namespace's root key when there is none): what a point record names as
 * its parent. */
static sb_key point_parent(const sb_ns *ns, const sb_blk *b)
{
    const sb_blk *p = sb_host_index_parent(b);
    return p ? p->key : ns->root_key;
}

/* Fill slot s with block b's record at the open segment's end, or with b's
 * namespace record (ns_rec). Returns false when the slot's buffers cannot
 * grow (the block is then FAILED). */
static bool prepare(sb_disk *d, wslot *s, sb_blk *b, bool ns_rec)
{
    sb_ns *ns = b->ns;
    sb_seg *seg = &d->segs[d->cur];
    memset(&s->h, 0, sizeof s->h);
    s->b = ns_rec ? NULL : b;
    s->ns = ns;
    s->t = NULL;
    s->seg = d->cur;
    sb_rec_head *h = &s->h;
    h->segment_id = seg->id;
    h->generation = seg->gen;
    h->ns_id = ns->id;
    if (ns_rec) {
        sb_layout l = { .model_id = ns->model_id, .model_id_bytes = ns->model_id_bytes,
                        .page_tokens = ns->page_tokens, .n_tensors = ns->n_tensors,
                        .bytes_per_token = ns->bpt, .point_bytes = ns->point_bytes,
                        .flags = ns->flags };
        h->kind = SB_REC_NAMESPACE;
        h->key[0] = ns->root_key.lo;
        h->key[1] = ns->root_key.hi;
        h->extra_bytes = sb_rec_ns_size(&l, ns->scope_bytes);
        free(s->extra);
        s->extra = malloc(h->extra_bytes);
        if (!s->extra)
            return false;
        sb_rec_ns_encode(&l, ns->scope, ns->scope_bytes, s->extra);
        s->pay_bytes = 0;
    } else if (b->kind == SB_BLK_PAGE) {
        uint32_t pt = ns->page_tokens;
        h->kind = SB_REC_PAGE;
        h->key[0] = b->key.lo;
        h->key[1] = b->key.hi;
        h->parent_key[0] = b->parent_key.lo;
        h->parent_key[1] = b->parent_key.hi;
        h->position = b->region * pt;
        h->n_tokens = b->n_tokens;
        h->payload_bytes = b->bytes;
        s->pay_bytes = b->bytes;
    } else {
        uint32_t L = b->n_tokens, pt = ns->page_tokens;
        sb_key parent = point_parent(ns, b);
        h->kind = SB_REC_POINT;
        h->parent_key[0] = parent.lo;
        h->parent_key[1] = parent.hi;
        h->position = L;
        h->n_tokens = L % pt;
        h->payload_bytes = ns->point_bytes;
        s->pay_bytes = sb_host_blk_data_bytes(ns, SB_BLK_POINT);
    }
    if (h->n_tokens) {
        size_t want = (size_t)h->n_tokens * sizeof *s->tok;
        if (!grow((void **)&s->tok, &s->tok_cap, want, 0))
            return false;
        /* A page's tokens start at its position; a point's end at it. */
        uint32_t from = h->kind == SB_REC_PAGE ? h->position : h->position - h->n_tokens;
        sb_host_index_tokens(b, from, from + h->n_tokens, s->tok);
    }
    if (h->kind == SB_REC_POINT) {
        sb_key pk = { h->parent_key[0], h->parent_key[1] };
        sb_key k = h->n_tokens ? sb_host_key_chain(&pk, s->tok, h->n_tokens) : pk;
        h->key[0] = k.lo;
        h->key[1] = k.hi;
    }
    h->head_bytes = sb_rec_head_size(h->n_tokens, h->extra_bytes);
    if (!h->head_bytes || !grow((void **)&s->head, &s->head_cap, h->head_bytes, 4096))
        return false;
    s->rec_bytes = h->head_bytes + sb_fmt_pad(s->pay_bytes);
    return true;
}

/* b's record head bytes. */
static uint64_t head_size(const sb_blk *b)
{
    uint32_t pt = b->ns->page_tokens;
    return sb_rec_head_size(b->kind == SB_BLK_PAGE ? b->n_tokens : b->n_tokens % pt, 0);
}

uint64_t sb_disk_rec_bytes(const sb_blk *b)
{
    return head_size(b) + sb_host_blk_data_bytes(b->ns, b->kind);
}

/* Bytes the record of b (payload compressed as z says, when z) and its
 * namespace record, when the open segment lacks one, take. */
static uint64_t record_bytes(const sb_disk *d, const sb_blk *b, const wzip *z, bool *need_ns)
{
    const sb_ns *ns = b->ns;
    uint64_t bytes = z && z->buf ? head_size(b) + sb_fmt_pad(z->stored) : sb_disk_rec_bytes(b);
    *need_ns = d->cur == UINT32_MAX || !seg_has_ns(&d->segs[d->cur], ns->id);
    if (*need_ns) {
        sb_layout l = { .n_tensors = ns->n_tensors, .model_id_bytes = ns->model_id_bytes };
        bytes += sb_rec_head_size(0, sb_rec_ns_size(&l, ns->scope_bytes));
    }
    return bytes;
}

/* Remember that segment seg holds namespace id's record. */
static bool ns_note(sb_seg *seg, uint64_t id)
{
    if (seg->n_ns == seg->ns_cap) {
        size_t cap = seg->ns_cap * 2 + 8;
        uint64_t *p = realloc(seg->ns_ids, cap * sizeof *p);
        if (!p)
            return false;
        seg->ns_ids = p;
        seg->ns_cap = cap;
    }
    seg->ns_ids[seg->n_ns++] = id;
    return true;
}

/* Prepare b's record (or its namespace record) in a free slot at the end of
 * the open segment seg; z: its compressed payload (the slot takes the
 * buffer), or NULL. Returns the slot, or NULL when out of memory. */
static wslot *place(sb_disk *d, wstate *w, sb_seg *seg, sb_blk *b, bool ns_rec, wzip *z)
{
    wslot *s = free_slot(w);
    if (!prepare(d, s, b, ns_rec) || (ns_rec && !ns_note(seg, b->ns->id)))
        return NULL;
    s->zown = NULL;
    if (z && z->buf) {
        s->h.flags = z->flags;
        s->h.payload_bytes = z->stored;
        s->pay_bytes = sb_fmt_pad(z->stored);
        s->rec_bytes = s->h.head_bytes + s->pay_bytes;
        s->zown = z->buf;
        z->buf = NULL;
    }
    s->h.seq = d->next_seq++;
    s->req.off = seg->data_end;
    seg->data_end += s->rec_bytes;
    s->own = NULL;
    s->busy = true;
    return s;
}

/* ---- tombstones (tomb.c) [mu] ----------------------------------------------------- */

/* Bytes of tombstone t's record (a head, no payload). */
static uint64_t tomb_bytes(const sb_tomb *t)
{
    return sb_rec_head_size(t->n_rest, SB_TOMB_EXTRA);
}

/* Place tombstone t in a free slot at the end of the open segment seg.
 * A new one's removal sequence is its seq. Returns the slot, or NULL
 * when the slot's buffers cannot grow. */
static wslot *place_tomb(sb_disk *d, wstate *w, sb_seg *seg, sb_tomb *t)
{
    wslot *s = free_slot(w);
    if (!s)
        return NULL; /* (not reached: take() keeps two free) */
    memset(&s->h, 0, sizeof s->h);
    s->b = NULL;
    s->ns = NULL;
    s->t = t;
    s->seg = d->cur;
    sb_rec_head *h = &s->h;
    h->kind = SB_REC_TOMBSTONE;
    h->segment_id = seg->id;
    h->generation = seg->gen;
    h->ns_id = t->ns_id;
    h->key[0] = t->key.lo;
    h->key[1] = t->key.hi;
    h->parent_key[0] = t->parent.lo;
    h->parent_key[1] = t->parent.hi;
    h->position = t->position;
    h->n_tokens = t->n_rest;
    h->extra_bytes = SB_TOMB_EXTRA;
    h->head_bytes = (uint32_t)tomb_bytes(t);
    if (t->n_rest &&
        !grow((void **)&s->tok, &s->tok_cap, (size_t)t->n_rest * sizeof *s->tok, 0))
        return NULL;
    if (!h->head_bytes || !grow((void **)&s->head, &s->head_cap, h->head_bytes, 4096))
        return NULL;
    free(s->extra);
    if (!(s->extra = malloc(SB_TOMB_EXTRA)))
        return NULL;
    if (t->n_rest)
        memcpy(s->tok, t->rest, (size_t)t->n_rest * sizeof *s->tok);
    s->pay_bytes = 0;
    s->rec_bytes = h->head_bytes;
    h->seq = d->next_seq++;
    if (!t->removal_seq)
        t->removal_seq = h->seq;
    sb_rec_tomb_put(s->extra, t->removal_seq);
    s->zown = NULL;
    s->own = NULL;
    s->req.off = seg->data_end;
    seg->data_end += s->rec_bytes;
    s->busy = true;
    return s;
}

/* Fail every tombstone waiting for a sync: a write or a sync of their
 * segment failed since its last good sync (what was written may not be
 * on the device). A new one stays live: its record may be there. */
static void tombs_unsynced(sb_disk *d)
{
    while (d->tpend) {
        sb_tomb *t = d->tpend;
        d->tpend = t->qnext;
        t->pend = false;
        sb_tomb_fail(d, t, SB_ERR_IO);
    }
}

/* A good sync: every tombstone written before it is durable; a copy
 * takes the place of the tombstone it copies (whose segment may go now). */
static void tombs_synced(sb_disk *d)
{
    while (d->tpend) {
        sb_tomb *t = d->tpend;
        d->tpend = t->qnext;
        t->pend = false;
        if (t->copy_of) {
            sb_tomb *o = t->copy_of;
            t->copy_of = NULL;
            d->segs[t->from].copies--;
            sb_tomb_live_remove(d, o);
            sb_tomb_release(d, o);
            sb_tomb_live_add(d, t);
        }
        t->state = SB_TOMB_DURABLE;
        if (t->waited)
            pthread_cond_broadcast(&d->done_cv);
        sb_tomb_release(d, t);
    }
}

/* Tombstone t's write (slot s) finished, ok or not. */
static void tomb_done(sb_disk *d, wslot *s, bool ok)
{
    sb_tomb *t = s->t;
    sb_seg *seg = &d->segs[s->seg];
    t->queued = false;
    s->t = NULL;
    if (!ok) {
        sb_tomb_fail(d, t, SB_ERR_IO);
        return;
    }
    t->placed = true;
    t->seg = s->seg;
    t->seg_id = s->h.segment_id;
    t->rec_off = s->req.off;
    t->rec_seq = s->h.seq;
    t->rec_bytes = (uint32_t)s->rec_bytes;
    if (!t->copy_of)
        sb_tomb_live_add(d, t); /* its record may be on disk from now on */
    if (seg->suspect && s->req.off >= seg->suspect_from) {
        /* written after a hole or a failed sync: never counted durable
         * (as ticket.c's suspect()) */
        sb_tomb_fail(d, t, SB_ERR_IO);
        return;
    }
    t->pend = true;
    t->qnext = d->tpend;
    d->tpend = t;
}

/* Give up the queued copies of tombstones (a drain stops): their
 * segments stay, the originals in them. */
static void tombs_abandon(sb_disk *d)
{
    sb_tomb **pp = &d->tq_head, *last = NULL;
    while (*pp) {
        sb_tomb *t = *pp;
        if (!t->copy_of) {
            last = t;
            pp = &t->qnext;
            continue;
        }
        *pp = t->qnext;
        t->queued = false;
        sb_tomb_fail(d, t, SB_ERR_IO);
    }
    d->tq_tail = last;
}

/* The tier writes nothing more (broken): every queued tombstone fails. */
static void tombs_deny(sb_disk *d)
{
    int rc = d->broken == SB_ERR_NOSPC ? SB_ERR_NOSPC : SB_ERR_IO;
    while (d->tq_head) {
        sb_tomb *t = d->tq_head;
        d->tq_head = t->qnext;
        t->queued = false;
        sb_tomb_fail(d, t, rc);
    }
    d->tq_tail = NULL;
}

/* ---- compression ahead of placement ------------------------------------------------ */

/* The compressed entry of b, or NULL. [mu] */
static wzip *zip_of(wstate *w, const sb_blk *b)
{
    for (unsigned i = 0; i < w->n_zip; i++)
        if (w->zip[i].b == b)
            return &w->zip[i];
    return NULL;
}

/* b left the queue: forget its entry (freeing what the slot did not take). */
static void zip_drop(wstate *w, const sb_blk *b)
{
    wzip *z = zip_of(w, b);
    if (!z)
        return;
    free(z->buf);
    *z = w->zip[--w->n_zip];
}

/* Compress the first queued full pages and point states not yet done (up
 * to ZIP_AHEAD), with st->mu released meanwhile: a queued block's data
 * stays and does not change, and only this thread takes blocks off the
 * queue. [mu] */
static void zip_ahead(wstate *w)
{
    sb_disk *d = w->d;
    unsigned n0 = w->n_zip;
    for (sb_blk *b = d->q_head; b && w->n_zip < ZIP_AHEAD; b = sb_drec_of(b)->wq_next)
        if (b->indexed && !zip_of(w, b))
            w->zip[w->n_zip++] = (wzip){ .b = b };
    if (w->n_zip == n0)
        return;
    unsigned skipped = 0;
    pthread_mutex_unlock(&d->st->mu);
    for (unsigned i = n0; i < w->n_zip; i++) {
        wzip *z = &w->zip[i];
        const sb_ns *ns = z->b->ns;
        size_t raw = z->b->bytes, cap = sb_fmt_pad(raw);
        int shuffle = z->b->kind == SB_BLK_PAGE && (ns->flags & SB_LAYOUT_ELEM16);
        z->buf = aligned_alloc(4096, cap);
        z->stored = z->buf ? sb_zcompress(w->z, z->b->data, raw, shuffle, z->buf, cap,
                                          &z->flags)
                           : 0;
        if (!z->stored) {
            free(z->buf);
            z->buf = NULL;
            skipped++;
            continue;
        }
        memset(z->buf + z->stored, 0, sb_fmt_pad(z->stored) - z->stored);
    }
    pthread_mutex_lock(&d->st->mu);
    d->z_skipped += skipped;
}

/* ---- copies out of a draining segment (reclaim.c) [mu] ----------------------------- */

/* Is copy block b still CLEAN where it was when it was listed? */
static bool copy_valid(const sb_blk *b)
{
    return b->indexed && sb_disk_state(b) == SB_DISK_CLEAN && sb_drec_of(b)->reinsert;
}

/* Copy block b leaves the writer. written: its new record is at slot s
 * (NULL: not written; lost: its record in the draining segment is bad, or
 * will be gone, so it leaves the index with what depends on it). */
static void copy_done(sb_disk *d, sb_blk *b, const wslot *s, bool lost)
{
    sb_store *st = d->st;
    sb_seg *from = &d->segs[sb_drec_of(b)->seg];
    from->copies--;
    d->reserved -= sb_disk_rec_bytes(b);
    if (copy_valid(b)) {
        if (s) {
            sb_disk_unclean(st, b, SB_DISK_CLEAN); /* leaves the old record */
            written_at(st, b, s);
        } else if (lost) {
            d->reclaiming = true; /* (durable tickets that need it: reclaimed) */
            sb_disk_drop(b->ns, b);
            d->reclaiming = false;
            d->rc_dropped++;
        }
    }
    sb_drec_of(b)->reinsert = 0;
    sb_host_blk_unref(b);
}

/* Read and check the next copies (as many as free slots could take),
 * unlocking st->mu meanwhile. A copy whose record is bad leaves the
 * index. [mu] */
static void fetch_copies(wstate *w)
{
    sb_disk *d = w->d;
    unsigned room = free_slots(w), n = 0;
    room = room > w->n_ready ? room - w->n_ready : 0;
    while (n < room && d->c_head) {
        sb_blk *b = d->c_head;
        d->c_head = sb_drec_of(b)->wq_next;
        if (!d->c_head)
            d->c_tail = NULL;
        sb_drec_of(b)->wq_next = NULL;
        if (!copy_valid(b)) {
            copy_done(d, b, NULL, false);
            continue;
        }
        const sb_drec *r = sb_drec_of(b);
        const sb_seg *g = &d->segs[r->seg];
        w->fetch[n++] = (wcopy){ .b = b,
                                 .at = { r->seg, g->id, g->gen, r->head_bytes, r->rec_off,
                                         r->stored, r->zflags } };
    }
    if (!n)
        return;
    pthread_mutex_unlock(&d->st->mu);
    for (unsigned i = 0; i < n; i++) {
        wcopy *c = &w->fetch[i];
        c->buf = aligned_alloc(4096, sb_host_blk_data_bytes(c->b->ns, c->b->kind));
        c->rc = c->buf ? sb_disk_read_record(d, c->b->ns, c->b, &c->at, c->buf) : SB_ERR_NOMEM;
    }
    pthread_mutex_lock(&d->st->mu);
    for (unsigned i = 0; i < n; i++) {
        wcopy *c = &w->fetch[i];
        if (c->rc == SB_OK && copy_valid(c->b)) {
            w->ready[w->n_ready++] = *c;
            continue;
        }
        /* Not read (a bad record, no memory): its record goes with the
         * segment, so it leaves the index (unless it left already). */
        free(c->buf);
        copy_done(d, c->b, NULL, true);
    }
}

/* Place the oldest ready copy in a free slot of the open segment seg.
 * Returns false when it does not fit (seal first). [mu] */
static bool place_copy(sb_disk *d, wstate *w, sb_seg *seg)
{
    wcopy c = w->ready[0];
    memmove(w->ready, w->ready + 1, --w->n_ready * sizeof *w->ready);
    if (!copy_valid(c.b)) {
        free(c.buf);
        copy_done(d, c.b, NULL, false);
        return true;
    }
    bool need_ns;
    uint64_t bytes = record_bytes(d, c.b, NULL, &need_ns);
    if (seg->data_end + bytes > d->seg_bytes && seg->data_end) {
        memmove(w->ready + 1, w->ready, w->n_ready++ * sizeof *w->ready);
        w->ready[0] = c;
        return false;
    }
    wslot *s = NULL;
    if (seg->data_end + bytes > d->seg_bytes || (need_ns && !place(d, w, seg, c.b, true, NULL)) ||
        !(s = place(d, w, seg, c.b, false, NULL))) {
        free(c.buf); /* never fits, or no memory: its record goes with V */
        copy_done(d, c.b, NULL, true);
        return true;
    }
    s->own = c.buf;
    return true;
}

/* Give up copy b: its segment stops draining and stays, sealed and whole,
 * b's record in it. [mu] */
static void give_up(sb_disk *d, sb_blk *b)
{
    sb_seg *from = &d->segs[sb_drec_of(b)->seg];
    from->draining = from->going = false;
    copy_done(d, b, NULL, false);
}

/* Stop draining: the copies not yet placed are given up (the tier stops
 * writing, closes, or needs room at once). Copies in flight finish as
 * they will. [mu] */
static void abandon_drain(sb_disk *d, wstate *w)
{
    while (w->n_ready) {
        wcopy c = w->ready[--w->n_ready];
        free(c.buf);
        give_up(d, c.b);
    }
    while (d->c_head) {
        sb_blk *b = d->c_head;
        d->c_head = sb_drec_of(b)->wq_next;
        sb_drec_of(b)->wq_next = NULL;
        give_up(d, b);
    }
    d->c_tail = NULL;
    tombs_abandon(d);
}

/* Take blocks into free slots (step 1). */
static void take(wstate *w)
{
    sb_disk *d = w->d;
    for (;;) {
        if (d->broken) { /* deny everything queued */
            if (w->n_ready || d->c_head)
                abandon_drain(d, w);
            tombs_deny(d);
            sb_blk *b = pop(d, w);
            if (!b)
                break;
            zip_drop(w, b);
            sb_disk_deny(d, d->broken == SB_ERR_NOSPC ? SB_DENY_CAPACITY : SB_DENY_ERROR, b);
            resolve(d, b, -1, NULL);
            continue;
        }
        if (w->need_seal || w->need_open || free_slots(w) < 2)
            break;
        if (d->tq_head) {
            /* Tombstones first: one is placed before any block queued
             * after it (the removal's order, tomb.c), once the
             * superblock says version 3 (the loop writes it, nothing in
             * flight). */
            if (!d->super_tomb)
                break;
            if (d->cur == UINT32_MAX) {
                w->need_open = true;
                break;
            }
            sb_tomb *t = d->tq_head;
            sb_seg *seg = &d->segs[d->cur];
            uint64_t bytes = tomb_bytes(t);
            if (seg->data_end + bytes > d->seg_bytes && seg->data_end && bytes <= d->seg_bytes) {
                w->need_seal = true;
                break;
            }
            d->tq_head = t->qnext;
            if (!d->tq_head)
                d->tq_tail = NULL;
            t->qnext = NULL;
            if (!bytes || bytes > d->seg_bytes) { /* never fits */
                t->queued = false;
                sb_tomb_fail(d, t, SB_ERR_NOSPC);
            } else if (!place_tomb(d, w, seg, t)) { /* no memory for the slot */
                t->queued = false;
                sb_tomb_fail(d, t, SB_ERR_IO);
            }
            continue;
        }
        if (w->n_ready) { /* copies go first: their segment waits on them */
            if (d->cur == UINT32_MAX) {
                w->need_open = true;
                break;
            }
            if (!place_copy(d, w, &d->segs[d->cur])) {
                w->need_seal = true;
                break;
            }
            continue;
        }
        if (!d->q_head && !tails_due(d, w))
            break;
        if (d->cur == UINT32_MAX) {
            w->need_open = true;
            break;
        }
        if (w->z && d->q_head && d->q_head->indexed && !zip_of(w, d->q_head) &&
            w->n_zip < ZIP_AHEAD)
            break; /* compress it first (zip_ahead) */
        sb_blk *b = pop(d, w);
        if (!b->indexed) {
            zip_drop(w, b);
            resolve(d, b, 0, NULL);
            continue;
        }
        bool need_ns;
        wzip *z = zip_of(w, b);
        uint64_t bytes = record_bytes(d, b, z, &need_ns);
        sb_seg *seg = &d->segs[d->cur];
        if (seg->data_end + bytes > d->seg_bytes) {
            if (seg->data_end == 0 || bytes > d->seg_bytes) { /* never fits */
                zip_drop(w, b);
                sb_disk_deny(d, SB_DENY_CAPACITY, b);
                resolve(d, b, -1, NULL);
                continue;
            }
            /* Put it back at the front; seal first. */
            bool tail = b->kind == SB_BLK_PAGE && b->n_tokens < b->ns->page_tokens;
            sb_blk **head = tail ? &d->t_head : &d->q_head;
            sb_blk **last = tail ? &d->t_tail : &d->q_tail;
            sb_drec_of(b)->wq_next = *head;
            *head = b;
            if (!*last)
                *last = b;
            w->need_seal = true;
            break;
        }
        bool ok = (!need_ns || place(d, w, seg, b, true, NULL)) && place(d, w, seg, b, false, z);
        zip_drop(w, b); /* the slot took its buffer */
        if (!ok) {
            sb_disk_deny(d, SB_DENY_ERROR, b); /* out of memory for the slot's buffers */
            resolve(d, b, -1, NULL);
        }
    }
}

/* ---- I/O (unlocked) --------------------------------------------------------------- */

/* Encode and submit every prepared slot not yet submitted (step 2). A
 * request the backend refuses to queue is marked (op -1) and finished by
 * reap() with the error. */
static void submit(wstate *w)
{
    sb_disk *d = w->d;
    unsigned n = 0;
    for (unsigned i = 0; i < w->n_slots; i++) {
        wslot *s = &w->slots[i];
        if (!s->busy || s->req.op)
            continue;
        const void *pay = s->own ? s->own : s->zown ? s->zown : s->b ? s->b->data : NULL;
        s->h.payload_hash = sb_rec_payload_hash(pay, s->h.payload_bytes);
        memset(s->head, 0, s->h.head_bytes);
        sb_rec_encode(&s->h, s->tok, s->extra, s->req.off, s->head);
        s->iov[0] = (struct iovec){ s->head, s->h.head_bytes };
        s->iov[1] = (struct iovec){ (void *)pay, s->pay_bytes };
        s->req.op = SB_IO_WRITE;
        s->req.fd = d->segs[s->seg].wfd;
        s->req.iov = s->iov;
        s->req.iovcnt = s->b ? 2 : 1;
        s->req.user = s;
        s->req.result = 0;
        w->sub[n++] = &s->req;
        w->in_flight++;
    }
    unsigned done = 0;
    while (done < n) {
        int r = sb_io_submit(d->wio, w->sub + done, n - done);
        if (r <= 0) {
            for (unsigned k = done; k < n; k++) {
                w->sub[k]->result = r < 0 ? r : -EIO;
                w->sub[k]->op = -1;
            }
            break;
        }
        done += (unsigned)r;
    }
}

/* Add a written record to the write-amplification breakdown. [mu] */
static void account(sb_disk *d, const wslot *s)
{
    if (s->t) {
        d->wa_tomb += s->rec_bytes;
        d->tombs_written++;
        return;
    }
    if (!s->b) {
        d->wa_ns += s->rec_bytes;
        return;
    }
    if (sb_drec_of(s->b)->reinsert) { /* its state was counted when first written */
        d->wa_reinsert += s->rec_bytes;
        return;
    }
    const sb_ns *ns = s->ns;
    uint64_t state;
    if (s->b->kind == SB_BLK_PAGE) {
        uint64_t per_token = 0;
        for (uint32_t t = 0; t < ns->n_tensors; t++)
            per_token += ns->bpt[t];
        state = per_token * s->h.n_tokens;
    } else {
        state = ns->point_bytes;
    }
    uint64_t head = SB_REC_FIXED + 4ull * s->h.n_tokens + s->h.extra_bytes;
    d->wa_logical += state;
    d->wa_head += head;
    if (s->h.flags & SB_REC_F_COMPRESSED) { /* it may write less than its state */
        d->z_records++;
        d->z_raw += s->b->bytes;
        d->z_stored += s->h.payload_bytes;
        if (s->rec_bytes >= state + head)
            d->wa_pad += s->rec_bytes - state - head;
        else
            d->z_saved += state + head - s->rec_bytes;
        return;
    }
    d->wa_pad += s->rec_bytes - state - head;
}

/* A write or a sync of segment s failed: what it holds since its last good
 * sync is suspect (ticket.c counts none of it durable). [mu] */
static void suspect(sb_seg *s)
{
    if (!s->suspect)
        s->suspect_from = s->synced_end;
    s->suspect = true;
}

/* Finish slot s after its write (step 3). [mu] */
static void finish(wstate *w, wslot *s)
{
    sb_disk *d = w->d;
    uint64_t want = s->h.head_bytes + s->pay_bytes;
    bool ok = s->req.result == (int64_t)want;
    sb_seg *seg = &d->segs[s->seg];
    d->write_ios++;
    if (ok) {
        d->write_bytes += s->rec_bytes;
        sb_disk_debit(d, s->rec_bytes);
        account(d, s);
        w->unsynced += s->rec_bytes;
        if (sb_disk_seg_note(d, s->seg, s->req.off, &s->h, s->tok, s->extra) != SB_OK)
            seg->damaged = true; /* the summary would miss it: seal early */
    } else {
        d->write_errors++;
        sb_disk_fault(d, s->req.result < 0 ? sb_disk_errno(s->req.result) : SB_ERR_IO);
        seg->damaged = true;
        /* Records after the hole are found only once a summary describes
         * them: what this segment took since its last sync is suspect, and
         * the tickets with writes since then fail. */
        suspect(seg);
        sb_tkt_synced(d, d->synced_ticket, false);
        tombs_unsynced(d);
        if (!s->b && !s->t) /* the namespace record is missing: write it again */
            for (size_t i = 0; i < seg->n_ns; i++)
                if (seg->ns_ids[i] == s->ns->id)
                    seg->ns_ids[i] = seg->ns_ids[--seg->n_ns];
    }
    free(s->zown);
    s->zown = NULL;
    if (s->t) {
        tomb_done(d, s, ok);
    } else if (s->own) { /* a copy: written, or its record goes with its segment */
        copy_done(d, s->b, ok ? s : NULL, !ok);
        free(s->own);
        s->own = NULL;
    } else if (s->b) {
        if (!ok)
            sb_drec_of(s->b)->why = SB_DENY_ERROR;
        resolve(d, s->b, ok ? 1 : -1, s);
    }
    s->b = NULL;
    s->busy = false;
    s->req.op = 0;
    w->in_flight--;
}

/* Reap at least one completion and finish what came back. */
static void reap(wstate *w, bool locked_after)
{
    sb_disk *d = w->d;
    unsigned n = 0;
    /* Requests the backend refused were never queued there. */
    for (unsigned i = 0; i < w->n_slots; i++)
        if (w->slots[i].busy && w->slots[i].req.op == -1)
            w->reap[n++] = &w->slots[i].req;
    if (!n) {
        int r = sb_io_reap(d->wio, 1, w->reap, w->n_slots);
        n = r > 0 ? (unsigned)r : 0;
        if (r <= 0) /* the backend lost them (a crash) or failed: they failed */
            for (unsigned i = 0; i < w->n_slots; i++)
                if (w->slots[i].busy && w->slots[i].req.op == SB_IO_WRITE) {
                    w->slots[i].req.result = r < 0 ? r : -EIO;
                    w->reap[n++] = &w->slots[i].req;
                }
    }
    pthread_mutex_lock(&d->st->mu);
    for (unsigned i = 0; i < n; i++)
        finish(w, (wslot *)w->reap[i]->user);
    pthread_cond_broadcast(&d->done_cv);
    if (!locked_after)
        pthread_mutex_unlock(&d->st->mu);
}

/* Sync the open segment and publish the tickets resolved before it. */
static void do_sync(wstate *w)
{
    sb_disk *d = w->d;
    pthread_mutex_lock(&d->st->mu);
    uint64_t upto = first_open_ticket(d, w) - 1;
    uint64_t seq = d->next_seq - 1;
    uint32_t cur = d->cur;
    uint64_t end = cur != UINT32_MAX ? d->segs[cur].data_end : 0;
    pthread_mutex_unlock(&d->st->mu);
    int r = 0;
    if (cur != UINT32_MAX && w->unsynced)
        r = sb_io_fdatasync(d->wio, d->segs[cur].wfd);
    pthread_mutex_lock(&d->st->mu);
    uint64_t before = d->synced_ticket;
    if (r < 0) {
        d->write_errors++;
        sb_disk_fault(d, SB_ERR_IO);
        d->err_ticket = upto > d->err_ticket ? upto : d->err_ticket;
        d->err_rc = SB_ERR_IO;
        if (cur != UINT32_MAX) {
            d->segs[cur].damaged = true;
            d->segs[cur].sync_failed = true;
            suspect(&d->segs[cur]);
        }
    } else {
        d->durable_seq = seq;
        if (cur != UINT32_MAX)
            d->segs[cur].synced_end = end;
    }
    if (upto > d->synced_ticket)
        d->synced_ticket = upto;
    sb_tkt_synced(d, before, r >= 0);
    if (r < 0)
        tombs_unsynced(d);
    else
        tombs_synced(d);
    pthread_cond_broadcast(&d->done_cv);
    pthread_mutex_unlock(&d->st->mu);
    w->unsynced = 0;
    w->last_sync = now_ns();
}

/* Is a sync due? [mu] */
static bool sync_due(const wstate *w)
{
    const sb_disk *d = w->d;
    if (d->tpend) /* a removal waits for its tombstone, whatever the mode */
        return true;
    if (d->flush_ticket > d->synced_ticket)
        return !d->q_head && !(d->t_head && d->flush_ticket >= sb_drec_of(d->t_head)->ticket);
    if (!w->unsynced)
        return false;
    if (d->durability == SB_DURABILITY_PERIODIC)
        return w->unsynced >= d->sync_bytes || now_ns() - w->last_sync >= d->sync_ns;
    return false;
}

/* A draining segment whose copies are all written and that nobody reads
 * (a sync then frees it), else UINT32_MAX. [mu] */
static uint32_t drain_done(const wstate *w)
{
    const sb_disk *d = w->d;
    for (uint32_t i = 0; i < d->n_segs; i++) {
        const sb_seg *s = &d->segs[i];
        if (s->state == SB_SEG_SEALED && s->draining && !s->copies && !s->holds)
            return i;
    }
    return UINT32_MAX;
}

/* Is a sealed segment held by a match or a read (it may be reclaimed once
 * let go)? [mu] */
static bool any_held(const sb_disk *d)
{
    for (uint32_t i = 0; i < d->n_segs; i++)
        if (d->segs[i].state == SB_SEG_SEALED && d->segs[i].holds)
            return true;
    return false;
}

static bool has_work(const wstate *w)
{
    const sb_disk *d = w->d;
    return d->q_head || tails_due(d, w) || sync_due(w) || d->stop || w->need_seal ||
           w->need_open || d->c_head || w->n_ready || drain_done(w) != UINT32_MAX ||
           d->tq_head;
}

/* Hold new writes back while the store is in a foreground phase
 * (sb_store_foreground): wait up to hold_ns, or until the phase ends, a
 * waiter needs the writer (flush, durable commit, RAM budget: they raise
 * flush_ticket), or close. After a wait the next round always writes, so a
 * long phase slows the writer but never stops it. Returns whether it waited
 * (the caller re-checks its work). [mu] */
static bool hold_back(wstate *w)
{
    sb_disk *d = w->d;
    sb_store *st = w->st;
    bool needed = d->flush_ticket > d->synced_ticket || d->stop || d->abort || d->tq_head ||
                  d->tpend;
    if (!st->fg || needed || w->in_flight || w->just_held) {
        w->just_held = false;
        return false;
    }
    uint64_t t0 = now_ns(), end = t0 + d->hold_ns;
    d->holds++;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t t = (uint64_t)ts.tv_nsec + d->hold_ns;
    ts.tv_sec += (time_t)(t / 1000000000ull);
    ts.tv_nsec = (long)(t % 1000000000ull);
    while (st->fg && d->flush_ticket <= d->synced_ticket && !d->stop && !d->abort &&
           !d->tq_head && now_ns() < end)
        pthread_cond_timedwait(&d->work_cv, &st->mu, &ts);
    d->held_ns += now_ns() - t0;
    w->just_held = true;
    return true;
}

/* Seal the open segment (nothing in flight). */
static void seal(wstate *w)
{
    sb_disk *d = w->d;
    uint32_t cur = d->cur;
    if (cur == UINT32_MAX)
        return;
    do_sync(w);
    int rc = sb_disk_seg_seal(d, cur);
    pthread_mutex_lock(&d->st->mu);
    if (rc == SB_OK && !d->segs[cur].sync_failed)
        d->segs[cur].suspect = false; /* its summary lists what follows a hole */
    if (rc != SB_OK) {
        d->write_errors++;
        sb_disk_fault(d, rc);
        if (rc == SB_ERR_NOSPC || rc == SB_ERR_IO)
            d->broken = d->broken ? d->broken : rc;
    }
    pthread_cond_broadcast(&d->done_cv);
    pthread_mutex_unlock(&d->st->mu);
}

/* Free every drained segment; one sync first makes its copies durable. */
static void release_drained(wstate *w)
{
    sb_disk *d = w->d;
    for (bool synced = false;;) {
        pthread_mutex_lock(&d->st->mu);
        uint32_t v = drain_done(w);
        pthread_mutex_unlock(&d->st->mu);
        if (v == UINT32_MAX)
            return;
        if (!synced)
            do_sync(w);
        synced = true;
        sb_disk_release(d, v);
    }
}

/* Have the superblock say version 3 (its segments may hold tombstones)
 * before the first tombstone is written, synced, so a build without
 * removal refuses the store rather than open it without them. A failure
 * stops the tier, as a seal's does: what is queued is denied (tombstones
 * fail). Nothing in flight. */
static void super_tomb(wstate *w)
{
    sb_disk *d = w->d;
    pthread_mutex_lock(&d->st->mu);
    d->tomb_mark = true;
    pthread_mutex_unlock(&d->st->mu);
    int rc = sb_disk_super_write(d);
    pthread_mutex_lock(&d->st->mu);
    if (rc == SB_OK) {
        d->super_tomb = true;
    } else {
        d->write_errors++;
        sb_disk_fault(d, rc);
        d->broken = d->broken ? d->broken : rc == SB_ERR_NOSPC ? SB_ERR_NOSPC : SB_ERR_IO;
        tombs_deny(d);
    }
    pthread_cond_broadcast(&d->done_cv);
    pthread_mutex_unlock(&d->st->mu);
}

/* Open the next segment, reclaiming the oldest ones while the tier is at
 * its cap (reclaim.c). When it cannot (nothing left to reclaim, the file
 * system under its floor or out of space) the tier stops writing: queued
 * blocks are denied (reason capacity), and a block offered a second later,
 * or once a segment a restore held is let go, makes it try again. Then, if
 * this segment was the last under the cap, the oldest starts draining. */
static void open_segment(wstate *w)
{
    sb_disk *d = w->d;
    bool abandoned = false;
    int waits = 0;
    release_drained(w);
    /* (A cap under one segment can never be met: reclaiming would only
     * lose what is stored.) */
    while (d->cap_bytes >= d->seg_bytes && !sb_disk_cap_ok(d)) {
        if (sb_disk_reclaim(d, false) == SB_OK)
            continue;
        pthread_mutex_lock(&d->st->mu);
        bool held = any_held(d);
        bool copying = !abandoned && (d->c_head || w->n_ready);
        pthread_mutex_unlock(&d->st->mu);
        /* Nothing to reclaim at once. A segment a restore is reading goes
         * when it is let go: wait a little (never long: the reader may be
         * waiting on this writer for RAM). */
        if (held && waits < 10) {
            struct timespec ts = { 0, 10000000 };
            nanosleep(&ts, NULL);
            waits++;
            release_drained(w);
            continue;
        }
        /* A drain still copying gives way (its segment is then reclaimed
         * at once). */
        if (!copying)
            break;
        pthread_mutex_lock(&d->st->mu);
        abandon_drain(d, w);
        pthread_mutex_unlock(&d->st->mu);
        abandoned = true;
    }
    int rc = sb_disk_seg_open_new(d);
    /* The last segment under the cap is taken: drain the oldest, so a
     * free one is ready when this one is full. */
    uint64_t cap_segs = d->cap_bytes / d->seg_bytes;
    pthread_mutex_lock(&d->st->mu);
    bool drain = rc == SB_OK && cap_segs >= 2 && sb_disk_live_segs(d) >= cap_segs &&
                 !d->c_head && !w->n_ready;
    pthread_mutex_unlock(&d->st->mu);
    if (drain)
        sb_disk_reclaim(d, true);
    pthread_mutex_lock(&d->st->mu);
    if (rc == SB_ERR_NOSPC) {
        d->nospc++;
        d->retry_ns = sb_host_now(d->st) + 1000000000ull;
    }
    if (rc != SB_OK) {
        d->broken = rc;
        d->write_errors += rc != SB_ERR_NOSPC;
        sb_disk_fault(d, rc);
    }
    pthread_mutex_unlock(&d->st->mu);
}

void *sb_writer_main(void *arg)
{
    sb_disk *d = arg;
    sb_store *st = d->st;
    wstate w = { .d = d, .st = st, .n_slots = d->qd < 2 ? 2 : d->qd };
    w.slots = calloc(w.n_slots, sizeof *w.slots);
    w.reap = calloc(w.n_slots, sizeof *w.reap);
    w.sub = calloc(w.n_slots, sizeof *w.sub);
    w.ready = calloc(w.n_slots, sizeof *w.ready);
    w.fetch = calloc(w.n_slots, sizeof *w.fetch);
    w.last_sync = now_ns();
    w.z = d->zlevel ? sb_zctx_new((int)d->zlevel) : NULL; /* NULL: stored as they are */
    pthread_mutex_lock(&st->mu);
    if (!w.slots || !w.reap || !w.sub || !w.ready || !w.fetch) {
        w.n_slots = 0;
        d->broken = SB_ERR_NOMEM;
    }
    for (;;) {
        if (d->abort)
            break;
        while (!has_work(&w) && !w.in_flight) {
            /* The pool drains as the budget refills: look every 50 ms. */
            if (d->pool_n && !d->stop && sb_disk_pool_drain(st))
                continue;
            bool sync_wait = d->durability == SB_DURABILITY_PERIODIC && (w.unsynced || d->t_head);
            if (sync_wait || d->pool_n) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                uint64_t wait = sync_wait ? d->sync_ns / 4 + 1000000 : 50000000;
                if (d->pool_n && wait > 50000000)
                    wait = 50000000;
                uint64_t t = (uint64_t)ts.tv_nsec + wait;
                ts.tv_sec += (time_t)(t / 1000000000ull);
                ts.tv_nsec = (long)(t % 1000000000ull);
                pthread_cond_timedwait(&d->work_cv, &st->mu, &ts);
                if (!has_work(&w))
                    continue;
            } else {
                pthread_cond_wait(&d->work_cv, &st->mu);
            }
        }
        if (d->abort)
            break;
        if (hold_back(&w))
            continue;
        if (d->c_head && !d->broken)
            fetch_copies(&w);
        if (w.z && d->q_head && !d->broken)
            zip_ahead(&w);
        take(&w);
        pthread_mutex_unlock(&st->mu);
        submit(&w);
        if (w.in_flight) {
            reap(&w, true);
            continue;
        }
        /* Nothing in flight. */
        pthread_mutex_lock(&st->mu);
        bool damaged = d->cur != UINT32_MAX && d->segs[d->cur].damaged;
        bool tomb_super = d->tq_head && !d->super_tomb && !d->broken;
        uint32_t v = drain_done(&w);
        void (*hook)(void *) = d->gap_hook;
        void *hook_ctx = d->gap_ctx;
        pthread_mutex_unlock(&st->mu);
        if (hook)
            hook(hook_ctx);
        if (w.need_seal || damaged) {
            seal(&w);
            w.need_seal = false;
        } else if (w.need_open) {
            open_segment(&w);
            w.need_open = false;
        } else if (tomb_super) {
            super_tomb(&w);
        } else if (v != UINT32_MAX) {
            release_drained(&w); /* its copies are durable before it goes */
        } else {
            /* The queues are looked at under the same hold as stop: a put
             * just before close queues blocks and then close sets stop, so
             * a look at the queues taken before that hold could leave
             * them unwritten. (Once stop is set nothing more is queued.) */
            pthread_mutex_lock(&st->mu);
            bool leave = d->stop && !d->q_head && !d->t_head && !d->tq_head;
            bool due = sync_due(&w) || leave;
            pthread_mutex_unlock(&st->mu);
            if (due)
                do_sync(&w);
            if (leave) {
                pthread_mutex_lock(&st->mu);
                break;
            }
        }
        pthread_mutex_lock(&st->mu);
    }
    /* Leaving, with st->mu held. */
    bool crash = d->abort;
    pthread_mutex_unlock(&st->mu);
    while (w.in_flight)
        reap(&w, false); /* the kernel may still use the buffers */
    pthread_mutex_lock(&st->mu);
    abandon_drain(d, &w); /* the draining segment stays whole */
    sb_blk *b;
    d->stop = true;
    /* Queued blocks are left only by a crash (a clean stop writes them
     * all); were one left at a clean stop it would fail, and close say so,
     * rather than go unwritten in silence. */
    while ((b = d->q_head) || (b = d->t_head)) {
        sb_blk **head = d->q_head ? &d->q_head : &d->t_head;
        *head = sb_drec_of(b)->wq_next;
        resolve(d, b, crash ? 0 : -1, NULL);
    }
    d->q_tail = d->t_tail = NULL;
    pthread_cond_broadcast(&d->done_cv);
    pthread_mutex_unlock(&st->mu);
    if (!crash && d->cur != UINT32_MAX)
        seal(&w);
    for (unsigned i = 0; i < w.n_zip; i++)
        free(w.zip[i].buf);
    sb_zctx_free(w.z);
    for (unsigned i = 0; w.slots && i < w.n_slots; i++) {
        free(w.slots[i].head);
        free(w.slots[i].tok);
        free(w.slots[i].extra);
    }
    free(w.slots);
    free(w.reap);
    free(w.sub);
    free(w.ready);
    free(w.fetch);
    return NULL;
}
