/* admit.c -- what the disk tier writes, and when: the write budget (a hard
 * token bucket and a pacing bucket), the backlog, the minimum prefix
 * length, and the priority pool of pages waiting for the budget.
 *
 * A committed page or point state (write-through, write-only) is offered
 * once (sb_disk_committed). It is written at once when the pool is empty
 * and the budget and the backlog take it. Otherwise it waits in the pool:
 * a binary max-heap of resident, indexed, unwritten blocks ordered by the
 * recompute a record saves per byte it writes,
 *
 *     value = uses * tokens / record bytes
 *
 * where uses counts the commits and matches that went through the block
 * (a shared system prompt's pages gather one per conversation, a page
 * with hits one per hit) and tokens is what it saves: a page's token
 * slices; a point state's whole prefix where the layout needs one
 * (SB_LAYOUT_POINT_REQUIRED: without it nothing is restored), else one
 * token (the last one, computed again). Ties go to the shallower block,
 * then the newer. Waiting blocks before a valuable one on its path are
 * written with it, so it pulls its parents forward.
 * Full pages of one layout all cost the same bytes, so among them uses
 * alone decides; a partial page is worth less per byte. (Attention makes a
 * deep token dearer to recompute than a shallow one; the store does not
 * know the model, and a child is useless without its parent, so depth
 * only breaks ties.)
 *
 * The pool drains (sb_disk_pool_drain) whenever a block is offered, when
 * a flush starts, and from the writer every 50 ms while it is not empty:
 * best first, while the budget and the backlog admit. A block is written
 * only after the block before it on its path (its parent page; for a
 * point state, the last full page before it): a pooled parent is taken
 * first whatever its place, a parent that will never be written denies
 * its children ("parent"). A pooled block leaves the pool unwritten when
 * it leaves the index (evicted, superseded, dropped) or the tier stops;
 * that, not the wait, is a denial, counted under the reason it waited
 * for (budget or backlog).
 *
 * A commit of fewer than min_prefix_tokens tokens offers nothing: its new
 * blocks stay RAM-only (denial "short") but unmarked, so a longer commit
 * through them later offers them, parents first. Write-back applies the
 * same rule when eviction or a flush queues a page: it is short when no
 * sequence through it reaches min_prefix_tokens.
 *
 * Everything here runs with st->mu held.
 */
#include <stdlib.h>

#include "disk_int.h"
#include "host.h"
#include "internal.h"

/* Are blocks offered when committed? Write-through and write-only: yes;
 * write-back: when evicted or flushed instead, except under COMMIT
 * durability (the caller asked for the state on disk before the call
 * returns, so it is written now whatever the mode). */
static bool at_commit(const sb_disk *d)
{
    return d->mode != SB_WRITE_BACK || d->durability == SB_DURABILITY_COMMIT;
}

/* ---- the backlog and streaming ---------------------------------------------------- */

size_t sb_disk_stream_pages(const sb_store *st, size_t page_bytes, size_t pages)
{
    const sb_disk *d = sb_disk_of(st);
    if (!d || !at_commit(d) || (uint64_t)pages * page_bytes <= d->backlog)
        return 0;
    size_t per = (size_t)(d->backlog / 2 / page_bytes);
    return per ? per : 1;
}

void sb_disk_stream_wait(sb_store *st)
{
    sb_disk *d = sb_disk_of(st);
    while (d && d->pending_bytes > d->backlog / 2 && sb_disk_wait_progress(st))
        ;
}

uint64_t sb_disk_pending(const sb_store *st)
{
    return sb_disk_of(st) ? sb_disk_of(st)->pending_bytes : 0;
}

/* ---- the write budget -------------------------------------------------------------- *
 *
 * Three checks, all on the store clock. The hard bucket (depth: the burst)
 * refills at the hourly rate and pays for every byte written, metadata
 * included: any sliding hour stays under budget + burst. The pacing
 * bucket holds a minute of the rate: once the hard bucket is under half
 * full, a page must pass it too, so demand above the budget is written at
 * the budget's rate instead of in a first burst. The hour window counts
 * the bytes written in each of the last 60 minutes: a page is admitted
 * only while they, what is admitted and not yet written, and the page stay
 * under 99 % of the budget, so an hour that starts with a full bucket does
 * not write the budget and the burst. */

static void budget_refill(sb_disk *d)
{
    uint64_t now = sb_host_now(d->st);
    if (now > d->bucket_t) { /* a clock that steps back refills nothing */
        double add = (double)(now - d->bucket_t) * d->rate;
        d->bucket = d->bucket + add > d->depth ? d->depth : d->bucket + add;
        d->pace = d->pace + add > d->pace_depth ? d->pace_depth : d->pace + add;
    }
    d->bucket_t = now;
}

/* Move the hour window to the minute of now: slots of minutes that left
 * the last hour are emptied. */
static uint64_t window_advance(sb_disk *d)
{
    uint64_t minute = sb_host_now(d->st) / 60000000000ull;
    if (minute > d->win_min) {
        uint64_t gone = minute - d->win_min < 60 ? minute - d->win_min : 60;
        for (uint64_t k = 1; k <= gone; k++) {
            uint64_t *slot = &d->win[(d->win_min + k) % 60];
            d->win_sum -= *slot;
            *slot = 0;
        }
        d->win_min = minute;
    }
    return d->win_min; /* a clock that steps back writes into the newest */
}

void sb_disk_debit(sb_disk *d, uint64_t bytes)
{
    budget_refill(d);
    d->bucket -= (double)bytes;
    d->win[window_advance(d) % 60] += bytes;
    d->win_sum += bytes;
}

void sb_disk_deny(sb_disk *d, int why, sb_blk *b)
{
    d->denials++;
    d->deny[why]++;
    d->deny_bytes[why] += b->bytes;
    sb_drec_of(b)->why = (uint8_t)why;
    if (sb_drec_of(b)->waits) /* the tickets that need it will never be durable */
        sb_tkt_resolved(d, b, false);
}

int sb_disk_admit(sb_disk *d, const sb_blk *b)
{
    if (d->pending_bytes + b->bytes > d->backlog)
        return SB_DENY_BACKLOG;
    uint64_t rec = sb_disk_rec_bytes(b);
    budget_refill(d);
    double left = d->bucket - (double)d->reserved;
    if (left - (double)d->meta_reserve < (double)rec)
        return SB_DENY_BUDGET;
    /* The soft controller: past the first half of the burst, a page also
     * takes pace (a minute's worth of the rate at most), so a demand above
     * the budget is written at the budget's rate, not in a first burst. */
    if (d->pace < (double)rec && left - (double)rec < d->depth / 2)
        return SB_DENY_BUDGET;
    /* ...and the last hour, minute by minute, stays under the budget (less
     * 1 % for metadata): the burst serves what the hour has not used. */
    window_advance(d);
    if (d->win_sum + d->reserved + rec > d->hour_cap)
        return SB_DENY_BUDGET;
    if (d->pace >= (double)rec)
        d->pace -= (double)rec;
    d->reserved += rec;
    return -1;
}

/* Could b ever be admitted? A record the bucket cannot hold, or a block
 * the backlog cannot, waits for nothing. */
static bool admissible(const sb_disk *d, const sb_blk *b)
{
    uint64_t rec = sb_disk_rec_bytes(b);
    return (double)rec <= d->depth - (double)d->meta_reserve && b->bytes <= d->backlog;
}

/* ---- the queue --------------------------------------------------------------------- */

/* Put admitted block b at the tail of its queue (partial pages wait in
 * their own, written late); the writer takes a reference. */
static void queue_block(sb_disk *d, sb_blk *b)
{
    sb_host_blk_ref(b);
    sb_disk_state_set(b, SB_DISK_QUEUED);
    sb_drec_of(b)->ticket = d->next_ticket++;
    sb_drec_of(b)->wq_next = NULL;
    bool tail = b->kind == SB_BLK_PAGE && b->n_tokens < b->ns->page_tokens;
    sb_blk **head = tail ? &d->t_head : &d->q_head, **last = tail ? &d->t_tail : &d->q_tail;
    if (*last)
        sb_drec_of(*last)->wq_next = b;
    else
        *head = b;
    *last = b;
    sb_disk_pending_add(d, b->bytes);
    if (sb_drec_of(b)->waits)
        sb_tkt_queued(d, b);
    if (!tail)
        pthread_cond_signal(&d->work_cv);
}

/* Is the tier writing nothing now (an I/O error, no space, closing)? Then b
 * is marked FAILED and counted, and a flush reports it. */
static bool stopped(sb_store *st, sb_blk *b)
{
    sb_disk *d = sb_disk_of(st);
    if (d->broken == SB_ERR_NOSPC && sb_host_now(st) >= d->retry_ns)
        d->broken = 0; /* space may have returned: the writer tries again */
    if (!d->broken && !d->stop)
        return false;
    sb_disk_state_set(b, SB_DISK_FAILED);
    sb_disk_deny(d, d->broken == SB_ERR_NOSPC ? SB_DENY_CAPACITY : SB_DENY_ERROR, b);
    d->err_ticket = d->next_ticket++; /* a flush reports it */
    d->err_rc = d->broken == SB_ERR_NOSPC ? SB_ERR_NOSPC : SB_ERR_IO;
    if (d->broken)
        sb_disk_fault(d, d->err_rc);
    return true;
}

static void pool_remove(sb_disk *d, sb_blk *b);

void sb_disk_enqueue(sb_store *st, sb_blk *b)
{
    sb_disk *d = sb_disk_of(st);
    if (!d || sb_disk_state(b) != SB_DISK_NONE || !b->data)
        return;
    if (sb_drec_of(b)->pool_at) /* (write-back under COMMIT: evicted while waiting) */
        pool_remove(d, b);
    if (stopped(st, b))
        return;
    int why = -1;
    if (d->mode == SB_WRITE_BACK && !sb_host_index_reaches(b, st->cfg.min_prefix_tokens))
        why = SB_DENY_SHORT;
    if (why < 0)
        why = sb_disk_admit(d, b);
    if (why >= 0) { /* RAM-only; not an error a flush reports */
        sb_disk_state_set(b, SB_DISK_FAILED);
        sb_disk_deny(d, why, b);
        return;
    }
    queue_block(d, b);
}

/* ---- the priority pool ------------------------------------------------------------ */

static double pool_value(const sb_blk *b)
{
    double tokens = b->n_tokens;
    if (b->kind == SB_BLK_POINT && !(b->ns->flags & SB_LAYOUT_POINT_REQUIRED))
        tokens = 1; /* without it, the last token is computed again */
    return (double)b->uses * tokens / (double)sb_disk_rec_bytes(b);
}

/* The first token a block covers: its depth, the tie-break. */
static uint64_t pool_depth(const sb_blk *b)
{
    return b->kind == SB_BLK_PAGE ? (uint64_t)b->region * b->ns->page_tokens : b->n_tokens;
}

/* Does pool entry a go before b? */
static bool pool_before(const sb_pool_ent *a, const sb_pool_ent *b)
{
    if (a->value != b->value)
        return a->value > b->value;
    if (a->depth != b->depth)
        return a->depth < b->depth;
    return a->stamp > b->stamp;
}

static void pool_set(sb_disk *d, size_t i, sb_pool_ent e)
{
    d->pool[i] = e;
    sb_drec_of(e.b)->pool_at = (uint32_t)(i + 1);
}

static void pool_sift(sb_disk *d, size_t i)
{
    sb_pool_ent e = d->pool[i];
    while (i > 0 && pool_before(&e, &d->pool[(i - 1) / 2])) {
        pool_set(d, i, d->pool[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= d->pool_n)
            break;
        if (c + 1 < d->pool_n && pool_before(&d->pool[c + 1], &d->pool[c]))
            c++;
        if (!pool_before(&d->pool[c], &e))
            break;
        pool_set(d, i, d->pool[c]);
        i = c;
    }
    pool_set(d, i, e);
}

static sb_pool_ent pool_ent(const sb_blk *b)
{
    return (sb_pool_ent){ .b = (sb_blk *)b, .value = pool_value(b), .depth = pool_depth(b),
                          .stamp = b->stamp };
}

/* Put b in the pool, waiting for why. Returns false when out of memory. */
static bool pool_push(sb_disk *d, sb_blk *b, int why)
{
    if (d->pool_n == d->pool_cap) {
        size_t cap = d->pool_cap ? 2 * d->pool_cap : 256;
        sb_pool_ent *p = cap < UINT32_MAX ? realloc(d->pool, cap * sizeof *p) : NULL;
        if (!p)
            return false;
        d->pool = p;
        d->pool_cap = cap;
    }
    sb_drec_of(b)->why = (uint8_t)why;
    sb_host_blk_mark(b, SB_BELOW_POOLED, SB_BELOW_POOLED); /* a use reorders it */
    d->pool[d->pool_n++] = pool_ent(b);
    pool_sift(d, d->pool_n - 1);
    d->deferred++;
    return true;
}

/* Take b out of the pool (it is in it). */
static void pool_remove(sb_disk *d, sb_blk *b)
{
    size_t i = sb_drec_of(b)->pool_at - 1;
    sb_drec_of(b)->pool_at = 0;
    sb_host_blk_mark(b, SB_BELOW_POOLED, 0);
    sb_pool_ent last = d->pool[--d->pool_n];
    if (i < d->pool_n) {
        pool_set(d, i, last);
        pool_sift(d, i);
    }
}

void sb_disk_pool_fix(sb_store *st, sb_blk *b)
{
    sb_disk *d = sb_disk_of(st);
    if (!d || !sb_drec_of(b)->pool_at)
        return;
    d->pool[sb_drec_of(b)->pool_at - 1] = pool_ent(b);
    pool_sift(d, sb_drec_of(b)->pool_at - 1);
}

void sb_disk_pool_leave(sb_store *st, sb_blk *b)
{
    sb_disk *d = sb_disk_of(st);
    if (!d)
        return;
    if (sb_drec_of(b)->pool_at) {
        pool_remove(d, b);
        sb_disk_deny(d, sb_drec_of(b)->why, b);
    }
    if (sb_drec_of(b)->waits) /* it leaves the index unwritten */
        sb_tkt_resolved(d, b, false);
}

void sb_disk_pool_clear(sb_disk *d)
{
    for (size_t i = 0; i < d->pool_n; i++) {
        sb_drec_of(d->pool[i].b)->pool_at = 0;
        sb_host_blk_mark(d->pool[i].b, SB_BELOW_POOLED, 0);
        sb_disk_deny(d, sb_drec_of(d->pool[i].b)->why, d->pool[i].b);
    }
    d->pool_n = 0;
    free(d->pool);
    d->pool = NULL;
    d->pool_cap = 0;
}


static bool written(const sb_blk *p)
{
    return sb_disk_state(p) == SB_DISK_QUEUED || sb_disk_state(p) == SB_DISK_CLEAN;
}

size_t sb_disk_pool_drain(sb_store *st)
{
    sb_disk *d = sb_disk_of(st);
    size_t n = 0;
    while (d && d->pool_n) {
        /* The best block, or the first pooled block before it on its path
         * whose own parent is written: parents go first. */
        sb_blk *x = d->pool[0].b, *p;
        while ((p = sb_host_index_parent(x)) && !written(p) && sb_drec_of(p)->pool_at)
            x = p;
        if (p && !written(p)) { /* a parent that will never be written */
            pool_remove(d, x);
            sb_disk_state_set(x, SB_DISK_FAILED);
            sb_disk_deny(d, SB_DENY_PARENT, x);
            continue;
        }
        if (d->broken || d->stop) {
            pool_remove(d, x);
            stopped(st, x);
            continue;
        }
        if (sb_disk_admit(d, x) >= 0)
            break; /* the budget or the backlog: wait for it */
        pool_remove(d, x);
        queue_block(d, x);
        d->pool_written++;
        n++;
    }
    return n;
}

void sb_disk_committed(sb_store *st, sb_blk *b, const sb_blk *parent)
{
    sb_disk *d = sb_disk_of(st);
    if (!d || !at_commit(d) || sb_disk_state(b) != SB_DISK_NONE || !b->data ||
        sb_drec_of(b)->pool_at)
        return;
    /* A child is never written without its parent (recovery could not
     * reach it). */
    if (parent && (sb_disk_state(parent) == SB_DISK_FAILED ||
                   (sb_disk_state(parent) == SB_DISK_NONE && !sb_drec_of(parent)->pool_at))) {
        sb_disk_state_set(b, SB_DISK_FAILED);
        sb_disk_deny(d, SB_DENY_PARENT, b);
        return;
    }
    if (stopped(st, b))
        return;
    int why = SB_DENY_BUDGET;
    if (!d->pool_n) {
        why = sb_disk_admit(d, b);
        if (why < 0) {
            queue_block(d, b);
            return;
        }
    }
    bool fits = admissible(d, b);
    if (!fits)
        why = b->bytes > d->backlog ? SB_DENY_BACKLOG : SB_DENY_BUDGET; /* never will */
    if (!fits || !pool_push(d, b, why)) {
        sb_disk_state_set(b, SB_DISK_FAILED);
        sb_disk_deny(d, why, b);
        return;
    }
    sb_disk_pool_drain(st);
}

void sb_disk_short(sb_store *st, sb_blk *b)
{
    sb_disk *d = sb_disk_of(st);
    if (!d || sb_disk_state(b) != SB_DISK_NONE)
        return;
    /* (Write-back counts a short page when eviction or a flush would
     * write it; under COMMIT too, so it is counted once.) */
    if (d->mode != SB_WRITE_BACK) {
        sb_disk_deny(d, SB_DENY_SHORT, b);
    } else {
        sb_drec_of(b)->why = SB_DENY_SHORT; /* should a ticket count it unwritten */
        sb_tkt_short(d, b);
    }
}
