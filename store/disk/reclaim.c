/* reclaim.c -- segment reclamation: the writer makes room under the disk
 * cap by taking back the oldest sealed segment, keeping what is hot.
 *
 * The writer keeps a reserve of one free segment under the cap: once it
 * opens a segment into the reserve, it starts draining the oldest one
 * (copies: hot blocks on disk only are copied out into the open segment,
 * through writer buffers, outside the RAM budget, and the segment is freed
 * once the copies are written and synced). At the cap itself (a cap of one
 * segment, or copies that did not fit) it reclaims at once instead: hot
 * blocks on disk only are read into RAM where the RAM budget allows, and
 * written again from there.
 *
 *   1. Under st->mu: the victim V is the sealed segment with the lowest id
 *      (the oldest: ids only grow) not already draining (at once: and that
 *      no match or read holds). A walk of every namespace's tree, parents
 *      before children, collects the indexed blocks whose record is in V,
 *      each with a reference so none goes away meanwhile. A block
 *      is hot when someone besides the index holds it (a match, a pin, a
 *      runtime) or it was matched since its record was written (hit); the
 *      pages before a hot block on its path that are in V are hot too, as
 *      nothing after them restores without them.
 *   2. (At once only.) Unlocked: hot blocks on disk only are read back
 *      into RAM (checked like any restore; a bad record leaves the index
 *      with what depends on it). Where the RAM budget refuses, they count
 *      as cold.
 *   3. Under st->mu, in the walk's order: a hot block whose parent record
 *      is on disk outside V or is being written again, and that the write
 *      budget admits, is written again (reinsert bytes), up to 3/4 of a
 *      segment of records (so each reclamation frees room however much is
 *      hot; past it the denial reason is capacity): resident, it is
 *      queued at the front of the writer's queue; on disk only (draining),
 *      it joins the copy list and stays CLEAN in V until its copy is
 *      written (writer.c). Any other resident block stays in the index,
 *      dirty again: in RAM only until a commit through it offers it again
 *      (write-through) or its eviction writes it (write-back), and lost
 *      only through the RAM tier's eviction (records after it in newer
 *      segments are orphans to a recovery meanwhile). Such a page that is
 *      not a leaf page is marked cut: pages after it may be on disk only,
 *      with no data the RAM tier could free, so eviction takes it with
 *      everything after it instead of waiting for it to become a leaf
 *      (evict.c). Blocks on disk only leave the index with every page and
 *      point state after them (a match holding one still restores it: its
 *      bytes, or its segment, stay until the match is released).
 *      A durable ticket the store still watches that needs a block left
 *      in RAM only or dropped here (or whose copy, or whose write again,
 *      fails) answers SB_ERR_RECLAIMED from then on (ticket.c).
 *   Tombstones (tomb.c): one in V still needed -- another segment holds a
 *      record older than its removal sequence, which it removes -- is
 *      written again (a copy, queued at step 3 before any block), and V
 *      drains until the copy is synced; the others of V go with it. An
 *      at-once reclamation never picks a V holding a needed one.
 *   4. With no copies pending and nobody holding V (at once, or when the
 *      last copy is written and synced and the last match or read let
 *      go): under rd_mu and st->mu V's slot is freed and its reader fd
 *      closed; then the superblock is written without V and V's files are
 *      deleted. Blocks record their segment's id, so a block still naming
 *      V (a dropped one) is never read from the slot's next segment.
 *
 * A crash before the resident blocks queued again are written loses them
 * (pages after them in newer segments are then orphans at recovery): the
 * cache loses some of what it chose to keep; it never serves wrong bytes.
 * A draining segment stays listed until its copies are durable.
 *
 * Cost: one walk of every tree per reclaimed segment, and the hot pages'
 * reads.
 */
#include <stdlib.h>
#include <string.h>

#include "disk_int.h"
#include "host.h"
#include "internal.h"

typedef struct victims {
    sb_tomb *tcopies;          /* copies of V's tombstones still needed
                                  (through qnext), queued at step 3 */
    sb_blk **b;                /* (n) collected blocks, one reference each */
    uint8_t *hot;              /* (n) */
    size_t n, cap;
    sb_ns **ns;                /* (n_ns) namespaces held (sb_host_ns_hold) */
    size_t n_ns, ns_cap;
    uint32_t v;                /* the victim segment */
    bool nomem;
} victims;

static bool push(void **p, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return true;
    size_t c = *cap ? *cap * 2 : 64;
    void *q = realloc(*p, c * size);
    if (!q)
        return false;
    *p = q;
    *cap = c;
    return true;
}

static bool in_victim(const sb_blk *b, uint32_t v)
{
    return b->indexed && sb_disk_state(b) == SB_DISK_CLEAN && sb_drec_of(b)->seg == v;
}

/* Step 1 for one block: take it when its record is in V. [mu] */
static void collect_one(void *ctx, sb_blk *b)
{
    victims *out = ctx;
    if (out->nomem || !in_victim(b, out->v))
        return;
    if (!push((void **)&out->b, &out->cap, out->n, sizeof *out->b)) {
        out->nomem = true;
        return;
    }
    sb_host_blk_ref(b);
    out->b[out->n++] = b;
}

/* Step 1 for one namespace: collect its blocks in V, parents first. [mu] */
static void collect(sb_ns *ns, victims *out)
{
    size_t first = out->n;
    if (sb_host_index_visit(ns, collect_one, out) != SB_OK)
        out->nomem = true;
    if (out->n > first) {
        if (push((void **)&out->ns, &out->ns_cap, out->n_ns, sizeof *out->ns)) {
            sb_host_ns_hold(ns);
            out->ns[out->n_ns++] = ns;
        } else {
            out->nomem = true; /* ns is held by its blocks' references only */
            while (out->n > first)
                sb_host_blk_unref(out->b[--out->n]);
        }
    }
}

/* Step 1's hot marks: own heat, then carried up the path within V. The
 * blocks' scratch mark holds it while the lock is held. [mu] */
static void mark_hot(victims *vs, uint32_t v)
{
    for (size_t i = 0; i < vs->n; i++) {
        sb_blk *b = vs->b[i];
        if (b->refs <= 2 && !sb_drec_of(b)->hit) /* the index's reference and ours */
            continue;
        /* Through ancestors outside V too: one re-appended earlier sits in
         * a newer segment, its own parent may still be in V. */
        for (sb_blk *x = b; x; x = sb_host_index_parent(x)) {
            if (!in_victim(x, v))
                continue;
            if (x->mark)
                break; /* and so are its ancestors */
            x->mark = 1;
        }
    }
    vs->hot = malloc(vs->n ? vs->n : 1);
    for (size_t i = 0; i < vs->n; i++) {
        if (vs->hot)
            vs->hot[i] = vs->b[i]->mark;
        vs->b[i]->mark = 0;
    }
}

/* Does segment v hold a tombstone still needed elsewhere (a segment
 * other than v may hold a record it removes)? [mu] */
static bool tombs_keep(const sb_disk *d, uint32_t v)
{
    for (const sb_tomb *t = d->tombs; t; t = t->next)
        if (t->placed && t->seg == v && t->seg_id == d->segs[v].id && sb_tomb_needed(d, t, v))
            return true;
    return false;
}

/* Step 1's tombstones: a copy of each of V's still needed (none in an
 * at-once reclamation: its victim has none). Returns false when out of
 * memory (no copy made). [mu] */
static bool tombs_plan(sb_disk *d, victims *vs, uint32_t v)
{
    for (sb_tomb *t = d->tombs; t; t = t->next) {
        if (!t->placed || t->seg != v || t->seg_id != d->segs[v].id ||
            !sb_tomb_needed(d, t, v))
            continue;
        sb_tomb *c = sb_tomb_copy(d, t);
        if (!c) {
            while (vs->tcopies) {
                sb_tomb *x = vs->tcopies;
                vs->tcopies = x->qnext;
                sb_tomb_release(d, x);
            }
            return false;
        }
        c->qnext = vs->tcopies;
        vs->tcopies = c;
    }
    return true;
}

/* Step 3's tombstones: the copies are queued (V drains until they are
 * synced), the others of V dropped. [mu] */
static void tombs_settle(sb_disk *d, victims *vs, uint32_t v)
{
    while (vs->tcopies) {
        sb_tomb *c = vs->tcopies;
        vs->tcopies = c->qnext;
        d->segs[v].copies++;
        sb_tomb_queue(d, c);
    }
    for (sb_tomb *t = d->tombs, *next; t; t = next) {
        next = t->next;
        if (t->placed && t->seg == v && t->seg_id == d->segs[v].id && !sb_tomb_needed(d, t, v)) {
            sb_tomb_live_remove(d, t);
            sb_tomb_release(d, t);
        }
    }
}

/* Step 2: read hot disk-only blocks into RAM, one namespace's run at a
 * time; a block that cannot be read is skipped (it counts as cold). */
static void read_hot(sb_disk *d, victims *vs, uint32_t v)
{
    sb_blk **run = malloc((vs->n ? vs->n : 1) * sizeof *run);
    if (!run)
        return;
    for (size_t i = 0; i < vs->n;) {
        sb_ns *ns = vs->b[i]->ns;
        size_t n = 0;
        pthread_mutex_lock(&d->st->mu);
        for (; i < vs->n && vs->b[i]->ns == ns; i++)
            if (vs->hot[i] && !vs->b[i]->data && in_victim(vs->b[i], v))
                run[n++] = vs->b[i];
        pthread_mutex_unlock(&d->st->mu);
        for (size_t at = 0; at < n;) {
            size_t ok = 0;
            if (sb_disk_load(ns, run + at, n - at, &ok, NULL, NULL) == SB_OK)
                break;
            at += ok + 1;
        }
    }
    free(run);
}

/* May b's record be written again: is the record its own names as parent
 * on disk outside V, queued again, or to be copied? [mu] */
static bool parent_kept(const sb_blk *b, uint32_t v)
{
    const sb_blk *p = sb_host_index_parent(b);
    return !p || sb_disk_state(p) == SB_DISK_QUEUED ||
           (sb_disk_state(p) == SB_DISK_CLEAN &&
            (sb_drec_of(p)->seg != v || sb_drec_of(p)->reinsert));
}

/* Append b to the list (head, tail) through wq_next. */
static void link(sb_blk **head, sb_blk **tail, sb_blk *b)
{
    sb_drec_of(b)->wq_next = NULL;
    if (*tail)
        sb_drec_of(*tail)->wq_next = b;
    else
        *head = b;
    *tail = b;
}

/* Step 3. Blocks written again keep their reference from step 1 as the
 * writer's. [mu] */
static void settle(sb_disk *d, victims *vs, uint32_t v, bool copies)
{
    sb_store *st = d->st;
    sb_blk *head = NULL, *tail = NULL, *c_head = NULL, *c_tail = NULL;
    uint64_t ticket = 0; /* the block ticket the rewritten blocks share */
    /* At most 3/4 of a segment is written again per segment reclaimed, so
     * every reclamation frees room, however much is hot. */
    uint64_t keep = d->seg_bytes / 4 * 3;
    d->reclaiming = true; /* durable tickets losing a block here are reclaimed */
    for (size_t i = 0; i < vs->n; i++) {
        sb_blk *b = vs->b[i];
        vs->b[i] = NULL;
        if (!in_victim(b, v)) { /* gone or moved meanwhile */
            sb_host_blk_unref(b);
            continue;
        }
        sb_ns *ns = b->ns;
        bool denied = false;
        if (vs->hot[i] && (b->data || copies) && parent_kept(b, v)) {
            uint64_t rec = sb_disk_rec_bytes(b);
            int why = rec > keep ? SB_DENY_CAPACITY : sb_disk_admit(d, b);
            if (why >= 0) {
                sb_disk_deny(d, why, b);
                denied = true;
            } else if ((keep -= rec, b->data)) {
                /* The queue stays in ticket order: a ticket no later than
                 * any queued, or, the queue empty, a ticket issued now (a
                 * sync covers only issued tickets: a block holding
                 * next_ticket unissued was never counted synced, and a
                 * commit waiting for it waited for good). */
                if (!ticket)
                    ticket = d->q_head ? sb_drec_of(d->q_head)->ticket : d->next_ticket++;
                sb_drec_of(b)->ticket = ticket;
                sb_disk_unclean(st, b, SB_DISK_QUEUED);
                sb_drec_of(b)->reinsert = 1;
                link(&head, &tail, b);
                sb_disk_pending_add(d, b->bytes);
                d->rc_kept++;
                continue;
            } else {
                sb_drec_of(b)->reinsert = 1; /* CLEAN in V until its copy is written */
                link(&c_head, &c_tail, b);
                d->segs[v].copies++;
                d->rc_kept++;
                continue;
            }
        }
        /* Resident: it stays indexed, dirty again (RAM only until a
         * commit through it offers it again, or, under write-back, its
         * eviction writes it). Pages after it may stay on disk only, so
         * it may not wait to become a leaf page: eviction may take it
         * with them (cut). On disk only: it leaves the index with every
         * page after it (a match holding one keeps its bytes or its
         * segment). A ticket that needs it counts it unwritten for want
         * of capacity. */
        if (!denied)
            sb_drec_of(b)->why = SB_DENY_CAPACITY;
        if (b->data) {
            sb_disk_unclean(st, b, SB_DISK_NONE);
            if (b->kind == SB_BLK_PAGE && !sb_host_blk_leaf(b)) {
                sb_host_blk_mark(b, SB_BELOW_CUT, SB_BELOW_CUT);
                sb_host_blk_evictable(b);
            }
            d->rc_ram++;
        } else {
            sb_disk_drop(ns, b);
            d->rc_dropped++;
        }
        sb_host_blk_unref(b);
    }
    d->reclaiming = false;
    if (tail) {
        sb_drec_of(tail)->wq_next = d->q_head;
        if (!d->q_head)
            d->q_tail = tail;
        d->q_head = head;
    }
    if (c_tail) {
        if (d->c_tail)
            sb_drec_of(d->c_tail)->wq_next = c_head;
        else
            d->c_head = c_head;
        d->c_tail = c_tail;
    }
}

void sb_disk_release(sb_disk *d, uint32_t v)
{
    sb_seg *s = &d->segs[v];
    pthread_mutex_lock(&d->rd_mu);
    pthread_mutex_lock(&d->st->mu);
    uint32_t id = s->id;
    uint64_t first_seq = s->first_seq;
    if (s->rfd >= 0)
        sb_io_close(d->rio, s->rfd);
    s->rfd = -1;
    s->state = SB_SEG_FREE;
    s->draining = false;
    s->going = false;
    s->data_end = 0;
    s->live_bytes = 0;
    d->reclaimed++;
    pthread_mutex_unlock(&d->st->mu);
    pthread_mutex_unlock(&d->rd_mu);
    int rc = sb_disk_super_write(d);
    char name[32];
    sb_disk_seg_name(name, id, "sum");
    d->wio->ops->unlink(d->wio, name); /* a missing summary is no fault */
    sb_disk_seg_name(name, id, "dat");
    int r = d->wio->ops->unlink(d->wio, name);
    if (r >= 0)
        r = d->wio->ops->sync_dir(d->wio);
    if (rc == SB_OK && r < 0)
        rc = sb_disk_errno(r);
    if (rc != SB_OK) { /* the space may stay taken; nothing is inconsistent */
        pthread_mutex_lock(&d->st->mu);
        d->write_errors++;
        sb_disk_fault(d, rc);
        /* Its files may remain, and a later open adopts them: tombstones
         * must outlive what they remove there too (sb_tomb_needed). */
        if (first_seq && (!d->stale_seq || first_seq < d->stale_seq))
            d->stale_seq = first_seq;
        pthread_mutex_unlock(&d->st->mu);
    }
}

int sb_disk_reclaim(sb_disk *d, bool copies)
{
    sb_store *st = d->st;
    pthread_mutex_lock(&st->mu);
    uint32_t v = UINT32_MAX;
    for (uint32_t i = 0; i < d->n_segs; i++)
        if (d->segs[i].state == SB_SEG_SEALED && i != d->cur && !d->segs[i].draining &&
            (copies || (!d->segs[i].holds && !tombs_keep(d, i))) &&
            (v == UINT32_MAX || d->segs[i].id < d->segs[v].id))
            v = i;
    if (v == UINT32_MAX) {
        pthread_mutex_unlock(&st->mu);
        return SB_ERR_NOSPC;
    }
    d->segs[v].going = true;
    victims vs = { .v = v };
    for (size_t b = 0; b < st->n_buckets && !vs.nomem; b++)
        for (sb_ns *ns = st->buckets[b]; ns && !vs.nomem; ns = ns->next)
            collect(ns, &vs);
    if (!vs.nomem)
        mark_hot(&vs, v);
    if (!vs.nomem && !tombs_plan(d, &vs, v))
        vs.nomem = true;
    int rc = vs.nomem || !vs.hot ? SB_ERR_NOMEM : SB_OK;
    pthread_mutex_unlock(&st->mu);

    if (rc == SB_OK && !copies)
        read_hot(d, &vs, v);

    pthread_mutex_lock(&st->mu);
    if (rc == SB_OK) {
        settle(d, &vs, v, copies);
        tombs_settle(d, &vs, v);
    }
    while (vs.tcopies) { /* (not settled: no memory) */
        sb_tomb *c = vs.tcopies;
        vs.tcopies = c->qnext;
        sb_tomb_release(d, c);
    }
    bool drain = rc == SB_OK && (d->segs[v].copies > 0 || d->segs[v].holds > 0);
    d->segs[v].draining = drain;
    d->segs[v].going = rc == SB_OK;
    for (size_t i = 0; i < vs.n; i++) /* what settle did not take */
        if (vs.b[i])
            sb_host_blk_unref(vs.b[i]);
    for (size_t i = 0; i < vs.n_ns; i++)
        sb_host_ns_unhold(vs.ns[i]);
    pthread_mutex_unlock(&st->mu);
    free(vs.b);
    free(vs.hot);
    free(vs.ns);
    if (rc == SB_OK && !drain)
        sb_disk_release(d, v);
    return rc;
}
