/* tomb.c -- tombstones: how the disk tier records a removal (sb_ns_remove)
 * so that no reopen brings the removed states back (format.h and
 * docs/format.md draw the record; disk_int.h sb_tomb its life).
 *
 * A removal, step by step:
 *
 *   1. Under st->mu (sb_disk_remove, the tier table's remove): a
 *      tombstone for the cut is queued; the index takes the subtree out
 *      under the same hold, so every block the writer takes from then on
 *      is either not removed or indexed again later. removal_mark notes
 *      next_seq: a record of a removed block with a smaller seq was
 *      placed before the tombstone, hence dead.
 *   2. The writer (writer.c) first has the superblock say version 3 (once
 *      per store, synced, before its first tombstone), then takes the
 *      tombstone before any block: its seq is larger than every record
 *      of the removed states already placed and smaller than any placed
 *      after it. A new tombstone's removal sequence is that seq.
 *   3. Written, it is live (d->tombs, where its record is) and pending
 *      (d->tpend); a sync is due at once, whatever the durability mode: a
 *      good one makes it durable, a failed one (or a failed write in its
 *      segment before the sync) fails it -- its caller's wait then says
 *      SB_ERR_IO, and it stays live, since its record may be on disk.
 *   4. The caller's wait (sb_disk_remove_wait) returns when it is durable
 *      or failed.
 *
 * Reclamation (reclaim.c) keeps a live tombstone while a segment other
 * than its own may hold a record it removes (one with a seq below its
 * removal sequence: sb_tomb_needed): when its segment goes, a copy with
 * the same removal sequence is written first (the segment drains until
 * the copy is synced); when none may, it is dropped with its segment.
 * Recovery (recover.c) rebuilds the live list from the records it finds.
 *
 * Thread safety: [mu] unless said otherwise.
 */
#include <stdlib.h>
#include <string.h>

#include "disk_int.h"
#include "host.h"
#include "internal.h"

sb_tomb *sb_tomb_new(sb_store *st, uint64_t ns_id, const sb_key *parent, uint32_t n,
                     const uint32_t *rest, uint32_t n_rest)
{
    sb_tomb *t = sb_host_malloc(st, sizeof *t + (size_t)n_rest * sizeof *t->rest);
    if (!t)
        return NULL;
    memset(t, 0, sizeof *t);
    t->ns_id = ns_id;
    t->parent = *parent;
    t->position = n;
    t->n_rest = n_rest;
    if (n_rest)
        memcpy(t->rest, rest, (size_t)n_rest * sizeof *rest);
    t->key = n_rest ? sb_host_key_chain(parent, rest, n_rest) : *parent;
    t->from = UINT32_MAX;
    return t;
}

sb_tomb *sb_tomb_copy(sb_disk *d, sb_tomb *t)
{
    sb_tomb *c = sb_tomb_new(d->st, t->ns_id, &t->parent, t->position, t->rest, t->n_rest);
    if (!c)
        return NULL;
    c->removal_seq = t->removal_seq;
    c->copy_of = t;
    c->from = t->seg;
    return c;
}

void sb_tomb_queue(sb_disk *d, sb_tomb *t)
{
    t->qnext = NULL;
    t->queued = true;
    if (d->tq_tail)
        d->tq_tail->qnext = t;
    else
        d->tq_head = t;
    d->tq_tail = t;
}

void sb_tomb_release(sb_disk *d, sb_tomb *t)
{
    (void)d;
    if (!t->queued && !t->pend && !t->live && !t->waited)
        sb_host_free(t);
}

void sb_tomb_live_add(sb_disk *d, sb_tomb *t)
{
    if (t->live)
        return;
    t->live = true;
    t->prev = NULL;
    t->next = d->tombs;
    if (d->tombs)
        d->tombs->prev = t;
    d->tombs = t;
    d->n_tombs++;
}

void sb_tomb_live_remove(sb_disk *d, sb_tomb *t)
{
    if (!t->live)
        return;
    if (t->prev)
        t->prev->next = t->next;
    else
        d->tombs = t->next;
    if (t->next)
        t->next->prev = t->prev;
    t->next = t->prev = NULL;
    t->live = false;
    d->n_tombs--;
}

void sb_tomb_fail(sb_disk *d, sb_tomb *t, int rc)
{
    t->state = SB_TOMB_FAILED;
    t->rc = rc;
    if (t->waited) /* (the writer may fail it where nothing else wakes) */
        pthread_cond_broadcast(&d->done_cv);
    if (t->copy_of) {
        /* The segment stays, sealed and whole, the original in it (as a
         * block's copy gives up: writer.c give_up). */
        sb_seg *v = &d->segs[t->from];
        v->copies--;
        v->draining = v->going = false;
        t->copy_of = NULL;
    }
    sb_tomb_release(d, t);
}

bool sb_tomb_needed(const sb_disk *d, const sb_tomb *t, uint32_t v)
{
    if (d->stale_seq && d->stale_seq < t->removal_seq)
        return true;
    for (uint32_t i = 0; i < d->n_segs; i++) {
        const sb_seg *s = &d->segs[i];
        if (i != v && s->state != SB_SEG_FREE && s->first_seq && s->first_seq < t->removal_seq)
            return true;
    }
    return false;
}

void sb_tomb_free_all(sb_disk *d)
{
    for (sb_tomb *t = d->tq_head, *next; t; t = next) {
        next = t->qnext;
        t->queued = false;
        t->waited = false;
        sb_tomb_release(d, t);
    }
    d->tq_head = d->tq_tail = NULL;
    for (sb_tomb *t = d->tpend, *next; t; t = next) {
        next = t->qnext;
        t->pend = false;
        t->waited = false;
        sb_tomb_release(d, t);
    }
    d->tpend = NULL;
    while (d->tombs) {
        sb_tomb *t = d->tombs;
        sb_tomb_live_remove(d, t);
        t->waited = false;
        sb_tomb_release(d, t);
    }
}

/* ---- the tier table's remove ------------------------------------------------- */

int sb_disk_remove(sb_ns *ns, const sb_key *parent, uint32_t n, const uint32_t *rest,
                   uint32_t n_rest, void **req)
{
    sb_store *st = ns->st;
    sb_disk *d = sb_disk_of(st);
    sb_tomb *t = sb_tomb_new(st, ns->id, parent, n, rest, n_rest);
    if (!t)
        return SB_ERR_NOMEM;
    t->waited = true;
    *req = t;
    d->removal_mark = d->next_seq;
    /* A tier stopped for lack of space stays stopped here: only a block
     * offered (admit.c) makes it try again, as the RAM tier's eviction
     * heaps follow that (pages it cannot drop while the tier writes nothing
     * left them). */
    if (d->broken || d->stop || !d->running) {
        sb_tomb_fail(d, t, d->broken == SB_ERR_NOSPC ? SB_ERR_NOSPC : SB_ERR_IO);
        return SB_OK;
    }
    sb_tomb_queue(d, t);
    pthread_cond_signal(&d->work_cv);
    return SB_OK;
}

int sb_disk_remove_wait(sb_store *st, void *req)
{
    sb_tomb *t = req;
    sb_disk *d = sb_disk_of(st);
    pthread_mutex_lock(&st->mu);
    while (t->state == SB_TOMB_PENDING && !d->abort) {
        pthread_cond_signal(&d->work_cv);
        pthread_cond_wait(&d->done_cv, &st->mu);
    }
    int rc = t->state == SB_TOMB_DURABLE ? SB_OK : t->rc ? t->rc : SB_ERR_IO;
    t->waited = false;
    sb_tomb_release(d, t);
    pthread_mutex_unlock(&st->mu);
    return rc;
}
