/* ticket.c -- durability tickets: what the state one put or commit stored
 * needs from the disk tier, and when that state is durable.
 *
 * A put or commit that asks (sb_ns_put_ex, sb_ns_commit_ex), and every one
 * under SB_DURABILITY_COMMIT, takes a ticket once its state is indexed
 * (sb_disk_outcome). The state is the pages covering the tokens it left
 * restorable and the point state it stored, earlier calls' pages
 * included. Each of its blocks is, at that moment:
 *
 *   durable           CLEAN, its block ticket covered by the last sync
 *   written           CLEAN, written since: the ticket waits for a sync
 *                     that covers the highest such block ticket (max_t)
 *   queued            QUEUED: in the writer's queue or in flight
 *   deferred          in the priority pool, waiting for the budget
 *   dirty             write-back (not COMMIT): written when evicted or
 *                     flushed
 *   not written       FAILED (denied, or its write failed), or left
 *                     unwritten by a commit shorter than min_prefix_tokens
 *
 * A block not written makes the ticket fail at once. For every other
 * block the ticket's write set hangs a node on the block's list
 * (sb_blk.waits), so what happens to the block reaches every ticket that
 * needs it (several may: a chat's next turn needs the pages its previous
 * turn is still writing). A node on a queued, deferred or dirty block
 * waits (counted in ws->waiting); a node on a written block watches: the
 * record may still be taken (reclamation) before the ticket is durable,
 * and the ticket must not then say durable for a state in RAM only.
 *
 * Once durable, a handed-out set is not freed at once: it joins the watch
 * list (d->wdur_head, oldest first; at most SB_TKT_WATCH_MAX sets and
 * SB_TKT_WATCH_NODES nodes, the oldest let go beyond), its nodes still
 * watching its blocks. When reclamation (d->reclaiming: reclaim.c's
 * step 3, a failed copy in writer.c) takes one of them off the disk --
 * in RAM only, or dropped from the index -- or a block it writes again
 * (node moving) fails, the ticket joins d->rtickets, runs of reclaimed
 * tickets, answered SB_ERR_RECLAIMED. Other losses of a durable state
 * (removal, a damaged record) are decisions the manual leaves to the
 * cache: the node lets go and the ticket stays durable, as does one let
 * go from the watch list. A write-only store's tickets are never durable
 * (SB_ERR_WRITE_ONLY once synced): never watched.
 *
 *   queued (admit.c)          counted, for a COMMIT call's wait
 *   written (writer.c)        the node watches now, max_t raised
 *   its record taken (reclaim.c, sb_tkt_unclean)
 *                             queued again: the node waits again; dirty
 *                             again under write-back: the same; in RAM
 *                             only: the ticket fails
 *   denied, its write failed, or it left the index (unwritten, or its
 *   record dropped)           the ticket fails
 *   superseded (radix.c, index.c)
 *                             a partial page replaced by a longer one of
 *                             the same tokens, or a commit's own copy put
 *                             in its place: the nodes move to it
 *   a sync (writer.c)         tickets with no waiting node left and max_t
 *                             covered are durable and leave the table
 *                             (their watching nodes with them); a failed
 *                             sync fails every ticket with a block written
 *                             since the last good one (what was written
 *                             may not be on the device)
 *   a failed write (writer.c) the same, and what its segment took since
 *                             its last good sync is suspect: a scan stops
 *                             at the hole until a summary describes what
 *                             follows, so no ticket counts those records
 *                             durable (suspect()) until the segment is
 *                             sealed (after a failed sync: for good)
 *
 * A wait (sb_store_wait_durable) hurries the writer for what its ticket
 * needs (push): its queue written now, partial pages too, a sync after,
 * and under write-back its dirty blocks queued. Past SB_TKT_PENDING_MAX
 * pending tickets the oldest is hurried the same way, so a store whose
 * durability syncs rarely (NONE) does not hold tickets for good. A call
 * that asked for no outcome (sb_ns_put and sb_ns_commit under COMMIT,
 * for their own wait) gets a hidden ticket, SB_TKT_HIDDEN + n: numbered
 * apart, so the tickets handed out stay 1, 2, 3... and one never handed
 * out answers SB_ERR_RANGE; its set sits in the table only while the
 * call runs, which then frees it.
 *
 * Pending write sets sit in d->wsets in ticket order (a ticket is handed
 * out when its set enters, so appending keeps the order). A failed set
 * leaves at once: its ticket joins d->failed, runs of failed tickets
 * (consecutive failures share one), at most SB_TKT_RUNS_MAX of them; when
 * the oldest run must go, every ticket up to it is forgotten (forgot:
 * answered SB_ERR_RANGE). d->rtickets keeps reclaimed tickets the same
 * way. An issued ticket neither pending, failed nor reclaimed is durable
 * (SB_ERR_WRITE_ONLY in a write-only store).
 *
 * Thread safety: everything here runs with st->mu held, except
 * sb_disk_wset_new and sb_disk_wset_free (unlocked) and the public calls
 * sb_store_wait_durable and sb_store_is_durable, which take it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "disk_int.h"
#include "host.h"
#include "internal.h"

#define SB_TKT_RUNS_MAX 4096u  /* runs of failed tickets remembered */
#define SB_TKT_PENDING_MAX 1024u /* pending tickets before the oldest is
                                    hurried */
#define SB_TKT_HIDDEN (1ull << 63) /* hidden tickets: SB_TKT_HIDDEN + n */
#define SB_TKT_WATCH_MAX 1024u /* durable tickets watched for reclamation */
#define SB_TKT_WATCH_NODES (1u << 18) /* ...and their blocks together, at
                                    most (the newest is watched whatever
                                    its size) */

/* A block a ticket waits for: one node on the block's list. */
typedef struct sb_wnode {
    struct sb_wset *ws;        /* the set it belongs to */
    sb_blk *b;                 /* the block, NULL once detached */
    struct sb_wnode *prev, *next; /* sb_drec_of(b)->waits */
    bool q;                    /* counted in ws->queued */
    bool clean;                /* watched: b is written (CLEAN); not counted
                                  in ws->waiting */
    bool moving;               /* ws durable and watched: reclamation is
                                  writing b again elsewhere (a failure of
                                  that write reclaims ws) */
} sb_wnode;

/* The blocks one ticket waits for. */
struct sb_wset {
    uint64_t id;               /* the ticket (0 until it is handed out) */
    bool hidden;               /* a call that asked for no outcome: its
                                  ticket is never handed out, and the set
                                  belongs to the call (it frees it) */
    uint32_t cap;              /* nodes allocated: the state's blocks */
    uint32_t used;             /* nodes handed out */
    uint32_t waiting;          /* nodes attached to blocks not yet written */
    uint32_t queued;           /* ...of them on QUEUED blocks */
    uint64_t max_t;            /* the highest block ticket written for it
                                  and not known synced when it was (0: none) */
    bool failed;
    bool watched;              /* durable, on d's watch list (wprev, wnext) */
    struct sb_wset *wprev, *wnext;
    sb_wnode nodes[];          /* (cap) */
};

/* A run of failed tickets [lo, hi]. */
struct sb_wrun {
    uint64_t lo, hi;
};

/* ---- the pending table ----------------------------------------------------------- */

static size_t find_at(const sb_disk *d, uint64_t id)
{
    size_t lo = 0, hi = d->n_wsets;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (d->wsets[mid]->id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static sb_wset *find(const sb_disk *d, uint64_t id)
{
    size_t i = find_at(d, id);
    return i < d->n_wsets && d->wsets[i]->id == id ? d->wsets[i] : NULL;
}

static void table_remove(sb_disk *d, const sb_wset *ws)
{
    size_t i = find_at(d, ws->id);
    if (i < d->n_wsets && d->wsets[i] == ws) {
        memmove(d->wsets + i, d->wsets + i + 1, (d->n_wsets - i - 1) * sizeof *d->wsets);
        d->n_wsets--;
    }
}

/* The first run of rs that ends at id or later (rs->n: none). */
static size_t runs_at(const sb_truns *rs, uint64_t id)
{
    size_t lo = 0, hi = rs->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (rs->r[mid].hi < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static bool runs_has(const sb_truns *rs, uint64_t id)
{
    size_t i = runs_at(rs, id);
    return i < rs->n && rs->r[i].lo <= id;
}

/* Remember ticket id in rs. */
static void runs_add(sb_truns *rs, uint64_t id)
{
    size_t lo = runs_at(rs, id);
    if (lo < rs->n && rs->r[lo].lo <= id)
        return; /* in it already */
    if (lo > 0 && rs->r[lo - 1].hi + 1 == id) { /* extends the run before */
        rs->r[lo - 1].hi = id;
        if (lo < rs->n && rs->r[lo].lo == id + 1) { /* and meets the next */
            rs->r[lo - 1].hi = rs->r[lo].hi;
            memmove(rs->r + lo, rs->r + lo + 1, (rs->n - lo - 1) * sizeof *rs->r);
            rs->n--;
        }
        return;
    }
    if (lo < rs->n && rs->r[lo].lo == id + 1) {
        rs->r[lo].lo = id;
        return;
    }
    if (rs->n == rs->cap) {
        size_t cap = rs->cap ? 2 * rs->cap : 64;
        sb_wrun *p = cap <= SB_TKT_RUNS_MAX ? realloc(rs->r, cap * sizeof *p) : NULL;
        if (p) {
            rs->r = p;
            rs->cap = cap;
        } else { /* full (or no memory): forget the oldest run and what preceded it */
            if (!rs->n || lo == 0) {
                rs->forgot = rs->forgot > id ? rs->forgot : id;
                return;
            }
            rs->forgot = rs->r[0].hi;
            memmove(rs->r, rs->r + 1, --rs->n * sizeof *rs->r);
            lo--;
        }
    }
    memmove(rs->r + lo + 1, rs->r + lo, (rs->n - lo) * sizeof *rs->r);
    rs->r[lo] = (sb_wrun){ id, id };
    rs->n++;
}

/* ---- nodes ------------------------------------------------------------------------ */

static void detach(sb_wnode *x)
{
    sb_blk *b = x->b;
    if (x->prev)
        x->prev->next = x->next;
    else
        sb_drec_of(b)->waits = x->next;
    if (x->next)
        x->next->prev = x->prev;
    if (!x->clean)
        x->ws->waiting--;
    if (x->q)
        x->ws->queued--;
    x->b = NULL;
    x->prev = x->next = NULL;
    x->q = false;
    x->clean = false;
}

static void link_node(sb_wset *ws, sb_wnode *x, sb_blk *b)
{
    x->ws = ws;
    x->b = b;
    x->moving = false;
    x->prev = NULL;
    x->next = sb_drec_of(b)->waits;
    if (sb_drec_of(b)->waits)
        sb_drec_of(b)->waits->prev = x;
    sb_drec_of(b)->waits = x;
}

/* x waits for b, not yet written. */
static void attach(sb_wset *ws, sb_wnode *x, sb_blk *b)
{
    link_node(ws, x, b);
    x->clean = false;
    x->q = sb_disk_state(b) == SB_DISK_QUEUED;
    ws->waiting++;
    ws->queued += x->q;
}

/* x watches b, CLEAN: ws needs a sync that covers b's ticket, and learns
 * when b's record is lost before ws is durable. */
static void watch(const sb_disk *d, sb_wset *ws, sb_wnode *x, sb_blk *b)
{
    link_node(ws, x, b);
    x->clean = true;
    x->q = false;
    if (sb_drec_of(b)->ticket > d->synced_ticket && sb_drec_of(b)->ticket > ws->max_t)
        ws->max_t = sb_drec_of(b)->ticket;
}

static void detach_all(sb_wset *ws)
{
    for (uint32_t i = 0; i < ws->used; i++)
        if (ws->nodes[i].b)
            detach(&ws->nodes[i]);
}

/* ws's state is durable now (not yet swept). */
static bool ws_durable(const sb_disk *d, const sb_wset *ws)
{
    return !ws->waiting && ws->max_t <= d->synced_ticket;
}

/* ws will never be durable: its nodes go, and (when it was handed out)
 * its ticket joins the failed runs and the set is freed. */
static void fail(sb_disk *d, sb_wset *ws)
{
    detach_all(ws);
    ws->failed = true;
    if (!ws->id)
        return; /* still being built: sb_disk_outcome finishes it */
    table_remove(d, ws);
    if (!ws->hidden) {
        runs_add(&d->failed, ws->id);
        sb_host_free(ws);
    }
    pthread_cond_broadcast(&d->done_cv);
}

/* Handed-out ws is durable: it leaves the table (its ticket answers
 * SB_OK from now on). */
static void release(sb_disk *d, sb_wset *ws)
{
    detach_all(ws);
    table_remove(d, ws);
    if (!ws->hidden)
        sb_host_free(ws);
    pthread_cond_broadcast(&d->done_cv);
}

/* ---- durable tickets watched for reclamation ---------------------------------------- */

/* Durable ws leaves the watch list; free_it: its nodes go and it is
 * freed (its ticket answers SB_OK for good). */
static void unwatch(sb_disk *d, sb_wset *ws, bool free_it)
{
    if (ws->wprev)
        ws->wprev->wnext = ws->wnext;
    else
        d->wdur_head = ws->wnext;
    if (ws->wnext)
        ws->wnext->wprev = ws->wprev;
    else
        d->wdur_tail = ws->wprev;
    ws->wprev = ws->wnext = NULL;
    ws->watched = false;
    d->n_wdur--;
    d->wdur_nodes -= ws->used;
    if (free_it) {
        detach_all(ws);
        sb_host_free(ws);
    }
}

/* Handed-out ws (not hidden, out of the pending table) is durable: its
 * nodes keep watching its blocks, so that reclamation taking one makes
 * the ticket reclaimed; the oldest watched go past the bounds. A
 * write-only store's tickets are never durable: not watched. Takes ws. */
static void watch_durable(sb_disk *d, sb_wset *ws)
{
    if (d->mode == SB_WRITE_ONLY || !ws->used) {
        detach_all(ws);
        sb_host_free(ws);
        return;
    }
    ws->watched = true;
    ws->wnext = NULL;
    ws->wprev = d->wdur_tail;
    if (d->wdur_tail)
        d->wdur_tail->wnext = ws;
    else
        d->wdur_head = ws;
    d->wdur_tail = ws;
    d->n_wdur++;
    d->wdur_nodes += ws->used;
    while (d->wdur_head != ws &&
           (d->n_wdur > SB_TKT_WATCH_MAX || d->wdur_nodes > SB_TKT_WATCH_NODES))
        unwatch(d, d->wdur_head, true);
}

/* Durable ws lost a block to reclamation: its ticket answers
 * SB_ERR_RECLAIMED from now on. */
static void reclaimed(sb_disk *d, sb_wset *ws)
{
    if (ws->watched)
        unwatch(d, ws, false);
    detach_all(ws);
    table_remove(d, ws); /* (durable and not yet swept: still there) */
    runs_add(&d->rtickets, ws->id);
    sb_host_free(ws);
    pthread_cond_broadcast(&d->done_cv);
}

/* The block x waits for or watches will not be on disk (denied, its write
 * failed, it left the index unwritten, or its record was taken): x's set
 * fails, unless it is durable already: then, when reclamation took the
 * record (d->reclaiming, or a write again that failed), the ticket is
 * reclaimed; else (removal, a damaged record, eviction from a store that
 * reads nothing back) it stays durable, and a watched set stops watching
 * that block. */
static void lost(sb_disk *d, sb_wnode *x)
{
    sb_wset *ws = x->ws;
    bool reclaim = d->reclaiming || x->moving;
    if (ws->watched) {
        if (reclaim)
            reclaimed(d, ws);
        else
            detach(x);
        return;
    }
    if (ws->id && ws_durable(d, ws)) {
        if (reclaim && !ws->hidden && d->mode != SB_WRITE_ONLY)
            reclaimed(d, ws);
        else
            release(d, ws);
    } else {
        fail(d, ws);
    }
}

/* Does a block not offered at its commit wait to be written (write-back
 * without COMMIT: when evicted or flushed)? Under COMMIT every block is
 * offered at commit, so one left unwritten was short. */
static bool dirty_ok(const sb_disk *d)
{
    return d->mode == SB_WRITE_BACK && d->durability != SB_DURABILITY_COMMIT && !d->broken &&
           !d->stop;
}

/* Is CLEAN block b's record past the point a failed sync of its segment
 * covered? (After a failed fdatasync a later one may succeed without the
 * data reaching the device: such a record is never counted durable.) */
static bool suspect(const sb_disk *d, const sb_blk *b)
{
    const sb_drec *r = sb_drec_of(b);
    const sb_seg *s = &d->segs[r->seg];
    return s->suspect && s->id == r->seg_id && r->rec_off >= s->suspect_from;
}

/* Add block b of the state to ws (being built). */
static void add(sb_disk *d, sb_wset *ws, sb_blk *b)
{
    switch (sb_disk_state(b)) {
    case SB_DISK_CLEAN:
        if (suspect(d, b))
            fail(d, ws);
        else if (ws->used < ws->cap)
            watch(d, ws, &ws->nodes[ws->used++], b);
        else
            fail(d, ws); /* (not reached: a set has a node per block) */
        return;
    case SB_DISK_FAILED:
        fail(d, ws);
        return;
    case SB_DISK_NONE:
        /* Neither pooled nor dirty: its commit was too short to offer it. */
        if (!sb_drec_of(b)->pool_at && !dirty_ok(d)) {
            fail(d, ws);
            return;
        }
        break;
    default:
        break;
    }
    if (ws->used < ws->cap)
        attach(ws, &ws->nodes[ws->used++], b);
    else
        fail(d, ws); /* (not reached: a set has a node per block) */
}

/* ---- hooks from the tier ----------------------------------------------------------- */

void sb_tkt_queued(sb_disk *d, sb_blk *b)
{
    (void)d;
    for (sb_wnode *x = sb_drec_of(b)->waits; x; x = x->next)
        if (!x->q && !x->ws->watched) {
            x->q = true;
            x->ws->queued++;
        }
}

void sb_tkt_resolved(sb_disk *d, sb_blk *b, bool ok)
{
    if (ok && sb_disk_state(b) == SB_DISK_CLEAN && suspect(d, b))
        ok = false; /* written after a hole or a failed sync */
    for (sb_wnode *x = sb_drec_of(b)->waits, *next; x; x = next) {
        next = x->next;
        sb_wset *ws = x->ws;
        if (!ok) {
            lost(d, x);
            continue;
        }
        x->moving = false; /* (written again: its record is in place) */
        if (!x->clean) { /* written: watched from now on */
            x->clean = true;
            ws->waiting--;
            if (x->q)
                ws->queued--;
            x->q = false;
        }
        if (sb_drec_of(b)->ticket > ws->max_t)
            ws->max_t = sb_drec_of(b)->ticket;
    }
}

void sb_tkt_unclean(sb_disk *d, sb_blk *b)
{
    for (sb_wnode *x = sb_drec_of(b)->waits, *next; x; x = next) {
        next = x->next;
        if (!x->clean || sb_disk_state(b) == SB_DISK_CLEAN)
            continue;
        int state = sb_disk_state(b);
        if (x->ws->watched) { /* durable: written again, or reclaimed */
            if (state == SB_DISK_QUEUED)
                x->moving = true;
            else
                lost(d, x);
            continue;
        }
        if (state == SB_DISK_QUEUED || (state == SB_DISK_NONE && dirty_ok(d))) {
            /* written again (reclamation), or dirty again under
             * write-back: waited for like any unwritten block */
            x->clean = false;
            x->q = sb_disk_state(b) == SB_DISK_QUEUED;
            x->ws->waiting++;
            x->ws->queued += x->q;
        } else {
            lost(d, x); /* in RAM only now */
        }
    }
}

void sb_tkt_synced(sb_disk *d, uint64_t before, bool ok)
{
    size_t k = 0;
    for (size_t i = 0; i < d->n_wsets; i++) {
        sb_wset *ws = d->wsets[i];
        if (!ok && ws->max_t > before) { /* written, and the sync failed */
            detach_all(ws);
            ws->failed = true;
            if (!ws->hidden) {
                runs_add(&d->failed, ws->id);
                sb_host_free(ws);
            }
        } else if (ws_durable(d, ws)) {
            if (ws->hidden)
                detach_all(ws); /* (the call's: it frees it) */
            else
                watch_durable(d, ws);
        } else {
            d->wsets[k++] = ws;
        }
    }
    d->n_wsets = k;
}

void sb_tkt_free_all(sb_disk *d)
{
    for (size_t i = 0; i < d->n_wsets; i++) {
        detach_all(d->wsets[i]);
        sb_host_free(d->wsets[i]);
    }
    sb_host_free(d->wsets);
    while (d->wdur_head)
        unwatch(d, d->wdur_head, true);
    free(d->failed.r);
    free(d->rtickets.r);
    d->wsets = NULL;
    d->n_wsets = d->wsets_cap = 0;
    memset(&d->failed, 0, sizeof d->failed);
    memset(&d->rtickets, 0, sizeof d->rtickets);
}

void sb_disk_blk_gone(sb_store *st, sb_blk *b)
{
    if (sb_disk_of(st))
        sb_tkt_resolved(sb_disk_of(st), b, false);
}

void sb_tkt_short(sb_disk *d, sb_blk *b)
{
    if (sb_drec_of(b)->waits && !dirty_ok(d))
        sb_tkt_resolved(d, b, false);
}

void sb_disk_supersede(sb_store *st, sb_blk *old, sb_blk *repl)
{
    sb_disk *d = sb_disk_of(st);
    if (!d)
        return;
    for (sb_wnode *x = sb_drec_of(old)->waits, *next; x; x = next) {
        next = x->next;
        sb_wset *ws = x->ws;
        detach(x);
        if (ws->watched) { /* durable: repl is watched when it is written */
            if (sb_disk_state(repl) == SB_DISK_CLEAN && !suspect(d, repl))
                watch(d, ws, x, repl);
            continue;
        }
        /* The node is free again: repl takes it (ws stays the size of
         * its state). A new repl is offered by the commit under way right
         * after (sb_disk_short fails the ticket if that commit is too
         * short to offer it). */
        if (sb_disk_state(repl) == SB_DISK_CLEAN && !suspect(d, repl)) {
            watch(d, ws, x, repl);
        } else if (sb_disk_state(repl) == SB_DISK_QUEUED || sb_disk_state(repl) == SB_DISK_NONE) {
            attach(ws, x, repl);
        } else {
            x->ws = ws;
            lost(d, x);
        }
    }
}

/* ---- a call's ticket ------------------------------------------------------------- */

sb_wset *sb_disk_wset_new(sb_store *st, size_t n)
{
    if (!sb_disk_of(st) || n > UINT32_MAX)
        return NULL;
    sb_wset *ws = sb_host_malloc(st, sizeof *ws + n * sizeof(sb_wnode));
    if (ws) {
        memset(ws, 0, sizeof *ws);
        ws->cap = (uint32_t)n;
    }
    return ws;
}

void sb_disk_wset_free(sb_wset *ws)
{
    sb_host_free(ws);
}

int sb_disk_wset_reserve(sb_store *st)
{
    sb_disk *d = sb_disk_of(st);
    if (!d)
        return SB_OK;
    if (d->n_wsets + d->wsets_reserved >= d->wsets_cap) {
        size_t cap = d->wsets_cap ? 2 * d->wsets_cap : 64;
        sb_wset **p = sb_host_realloc(st, d->wsets, cap * sizeof *p);
        if (!p)
            return SB_ERR_NOMEM;
        d->wsets = p;
        d->wsets_cap = cap;
    }
    d->wsets_reserved++;
    return SB_OK;
}

void sb_disk_wset_unreserve(sb_store *st)
{
    if (sb_disk_of(st))
        sb_disk_of(st)->wsets_reserved--;
}

/* What ticket id stands at, the write mode aside: SB_OK (written and
 * synced), SB_ERR_PENDING, SB_ERR_NOT_DURABLE, SB_ERR_RANGE (not handed
 * out, or forgotten). */
static int synced_answer(const sb_disk *d, uint64_t id)
{
    if (!id)
        return SB_ERR_NOT_DURABLE;
    if (id >= d->next_wt)
        return SB_ERR_RANGE;
    const sb_wset *ws = find(d, id);
    if (ws)
        return ws_durable(d, ws) ? SB_OK : SB_ERR_PENDING;
    if (runs_has(&d->failed, id))
        return SB_ERR_NOT_DURABLE;
    if (runs_has(&d->rtickets, id))
        return SB_ERR_RECLAIMED;
    return id <= d->failed.forgot || id <= d->rtickets.forgot ? SB_ERR_RANGE : SB_OK;
}

/* What ticket id answers: synced_answer, where a write-only store's
 * synced state is SB_ERR_WRITE_ONLY (never durable: the manual's
 * "Write-only"). */
static int answer(const sb_disk *d, uint64_t id)
{
    int rc = synced_answer(d, id);
    return rc == SB_OK && d->mode == SB_WRITE_ONLY ? SB_ERR_WRITE_ONLY : rc;
}

/* Ask the writer for what ws waits on: its queue written now (partial
 * pages too) and a sync after; under write-back, dirty blocks queued
 * (parents first: nodes are in path order). The pool is not hurried: it
 * waits for the budget. */
static void push(sb_disk *d, sb_wset *ws)
{
    sb_store *st = d->st;
    uint64_t id = ws ? ws->id : 0; /* ws may be freed below: keep its ticket */
    for (uint32_t i = 0; ws && i < ws->used; i++) {
        sb_blk *b = ws->nodes[i].b;
        if (b && sb_disk_state(b) == SB_DISK_NONE && !sb_drec_of(b)->pool_at &&
            sb_disk_write_back(st)) {
            sb_disk_enqueue(st, b); /* may fail and free ws (denied): look it up again */
            ws = find(d, id);
        }
    }
    if (d->flush_ticket < d->next_ticket - 1)
        d->flush_ticket = d->next_ticket - 1;
    pthread_cond_signal(&d->work_cv);
}

/* Count block b of a call's state into oc (t0: the first block ticket the
 * call could have queued; durable: the call's ticket is). */
static void tally(const sb_disk *d, const sb_blk *b, uint64_t t0, bool durable,
                  sb_write_outcome *oc)
{
    uint8_t why = sb_drec_of(b)->why; /* why it waits or was not written */
    if (!b->indexed) {
        /* Superseded meanwhile: a longer page holds its tokens (its
         * tickets moved there). Dropped (its record taken or found bad)
         * before the state was durable: it will not be written. */
        if (!b->superseded && !durable)
            oc->denied_by[why < SB_DENY__COUNT ? why : SB_DENY_ERROR]++;
        return;
    }
    if (durable && (sb_disk_state(b) == SB_DISK_NONE || sb_disk_state(b) == SB_DISK_FAILED))
        return; /* its record taken after the state was durable: not the call's */
    switch (sb_disk_state(b)) {
    case SB_DISK_CLEAN:
        if (suspect(d, b))
            oc->denied_by[SB_DENY_ERROR]++;
        else if (sb_drec_of(b)->ticket >= t0) {
            oc->queued++;
            oc->written += sb_drec_of(b)->ticket <= d->synced_ticket;
        }
        break;
    case SB_DISK_QUEUED:
        oc->queued += sb_drec_of(b)->ticket >= t0;
        break;
    case SB_DISK_NONE:
        if (sb_drec_of(b)->pool_at)
            oc->deferred++;
        else if (dirty_ok(d))
            oc->dirty++;
        else /* never offered (short), or reclamation left it in RAM */
            oc->denied_by[why == SB_DENY_CAPACITY ? SB_DENY_CAPACITY : SB_DENY_SHORT]++;
        break;
    default:
        oc->denied_by[why < SB_DENY__COUNT ? why : SB_DENY_ERROR]++;
        break;
    }
}

/* Drop pending ws without an answer (nobody holds its ticket). */
static void discard(sb_disk *d, sb_wset *ws)
{
    detach_all(ws);
    table_remove(d, ws);
    sb_host_free(ws);
}

void sb_disk_outcome(sb_store *st, sb_wset *ws, sb_blk **blocks, size_t n, uint64_t t0,
                     sb_write_outcome *oc, bool keep)
{
    sb_disk *d = sb_disk_of(st);
    oc->ticket = 0;
    oc->durable = 0;
    oc->write_only = d && d->mode == SB_WRITE_ONLY;
    if (!d || !ws)
        return;
    d->wsets_reserved--; /* its place: taken now, or not needed */
    if (!n) { /* nothing stored: no ticket */
        sb_host_free(ws);
        return;
    }
    for (size_t i = 0; i < n && !ws->failed; i++)
        add(d, ws, blocks[i]);
    ws->hidden = !keep;
    uint64_t id = keep ? d->next_wt++ : SB_TKT_HIDDEN + d->next_hidden++;
    ws->id = id;
    oc->ticket = keep ? id : 0;
    if (ws->failed) {
        if (keep)
            runs_add(&d->failed, id);
    } else if (ws_durable(d, ws)) {
        if (!keep)
            detach_all(ws); /* (its watched blocks) */
    } else {
        /* Its place was reserved. Hidden tickets number after every
         * handed-out one, so the table stays in ticket order. */
        size_t at = find_at(d, id);
        memmove(d->wsets + at + 1, d->wsets + at, (d->n_wsets - at) * sizeof *d->wsets);
        d->wsets[at] = ws;
        d->n_wsets++;
        /* Pending tickets cost memory until their writes are made (under
         * NONE durability until a sync, under write-back until evicted):
         * past SB_TKT_PENDING_MAX the oldest is hurried, as a wait would. */
        if (d->n_wsets > SB_TKT_PENDING_MAX)
            push(d, d->wsets[0]);
    }
    bool pending = find(d, id) == ws;
    if (!pending && keep) {
        /* Failed (remembered) or durable (watched): the ticket says so. */
        if (ws->failed)
            sb_host_free(ws);
        else
            watch_durable(d, ws);
        ws = NULL;
    }
    /* COMMIT: wait until what the state has queued is written and synced
     * (not for the pool: it waits for the budget, maybe an hour). The
     * blocks are held meanwhile, to count them after. */
    if (d->durability == SB_DURABILITY_COMMIT && d->running) {
        for (size_t i = 0; i < n; i++)
            sb_host_blk_ref(blocks[i]);
        sb_wset *w;
        while (!d->abort && (w = find(d, id)) && (w->queued || w->max_t > d->synced_ticket)) {
            push(d, w);
            pthread_cond_wait(&d->done_cv, &st->mu);
        }
    }
    bool synced; /* every block written and synced */
    if (keep) {
        synced = synced_answer(d, id) == SB_OK;
    } else { /* the set is the call's: pending, or out of the table */
        pending = find(d, id) == ws;
        synced = pending ? ws_durable(d, ws) : !ws->failed;
    }
    /* A write-only store's state is never durable (its ticket answers
     * SB_ERR_WRITE_ONLY once synced). */
    oc->durable = synced && !oc->write_only;
    for (size_t i = 0; i < n; i++)
        tally(d, blocks[i], t0, synced, oc);
    for (int r = 0; r < SB_DENY__COUNT; r++)
        oc->denied += oc->denied_by[r];
    if (d->durability == SB_DURABILITY_COMMIT && d->running)
        for (size_t i = 0; i < n; i++)
            sb_host_blk_unref(blocks[i]);
    if (!keep) { /* nobody can ask for a hidden ticket: it goes */
        if (pending)
            discard(d, ws);
        else
            sb_host_free(ws);
    }
}

/* ---- the public calls --------------------------------------------------------------- */

int sb_store_is_durable(sb_store *st, uint64_t ticket)
{
    return sb_store_wait_durable(st, ticket, 0);
}

int sb_store_wait_durable(sb_store *st, uint64_t ticket, uint32_t timeout_ms)
{
    if (!st)
        return SB_ERR_INVAL;
    pthread_mutex_lock(&st->mu);
    sb_disk *d = sb_disk_of(st);
    if (!d) {
        pthread_mutex_unlock(&st->mu);
        return SB_ERR_NOT_DURABLE; /* RAM only: nothing ever is */
    }
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    uint64_t ns = (uint64_t)until.tv_nsec + (uint64_t)(timeout_ms % 1000) * 1000000u;
    until.tv_sec += (time_t)(timeout_ms / 1000 + ns / 1000000000u);
    until.tv_nsec = (long)(ns % 1000000000u);
    int rc;
    while ((rc = answer(d, ticket)) == SB_ERR_PENDING && timeout_ms && d->running && !d->abort) {
        push(d, find(d, ticket));
        if (timeout_ms == SB_WAIT_FOREVER)
            pthread_cond_wait(&d->done_cv, &st->mu);
        else if (pthread_cond_timedwait(&d->done_cv, &st->mu, &until) == ETIMEDOUT) {
            rc = answer(d, ticket);
            break;
        }
    }
    pthread_mutex_unlock(&st->mu);
    return rc;
}
