/* tier.h -- the interface between the RAM index and the tier below it.
 *
 * The index (store/core) keeps every block it has committed in RAM until
 * eviction; a tier below it (store/disk today) may keep a copy of a block
 * (its record), so the index can drop the block's data and read it back
 * later. The index reaches that tier only through this header: a table of
 * operations (sb_tier_ops) and the tier's own state, both hanging off the
 * store (st->tier), and the inline wrappers below, one per operation.
 *
 *     sb_store
 *       tier.ops ----> sb_tier_ops (const, the tier's code)
 *       tier.state --> the tier's own state (store/disk: struct sb_disk),
 *                      opaque to core; the tier finds it from st
 *
 * Each wrapper gives the RAM-only answer when the store has no tier below
 * (st->tier.ops NULL), so core code never asks whether there is one; its
 * comment says what that answer is. Every operation takes the store (or a
 * namespace of it) rather than the tier's state: a tier works under the
 * store's mutex, on the store's blocks and counters.
 *
 * The operations, grouped by what they mean to the index:
 *   - life:    close, flush, stats, foreground_over (sb_store_*);
 *   - offers:  a committed block is offered for keeping (offer,
 *              offer_short, supersede, enqueue), and the tier's write
 *              pool and backlog (reorder, leave, write_back, write_only,
 *              pending, wait_progress);
 *   - records: blocks the tier keeps a record of, by content key: a match
 *              holding one (match), the index taking or leaving one
 *              (count, held), whether a record may be taken over and
 *              taking it (record_stays, take_record, unclean);
 *   - reads:   records read back into pages (load), readied ahead of a
 *              restore (prefault), and a long put streamed through the
 *              backlog (stream_pages, stream_wait);
 *   - forget:  a cut block leaves the index with what depends on it (drop);
 *              a prefix the caller removed is recorded as removed, durably
 *              (remove, remove_wait);
 *   - tickets: durability outcomes of a put or commit (ticket, wset_new,
 *              wset_free, wset_reserve, wset_unreserve, outcome).
 *
 * A block's state in the tier below is the tier's own, in its area of the
 * block (tier_ops.h blk_bytes; store/disk: struct sb_drec). The index sees
 * of it only b->below, the SB_BELOW_* flags of host.h the tier sets:
 * none until the tier takes the block; then OFFERED, with KEPT when the
 * tier keeps a record of it or QUEUED while it writes it; POOLED while it
 * waits in the tier's pool; CUT. Without a tier every block's flags stay
 * 0.
 *
 * Thread safety: operations marked [mu] expect st->mu held (some wait on a
 * condition variable, releasing it meanwhile); the others take what they
 * need. st->tier is [const]: set by the tier's constructor (store/disk/
 * disk.h, called by store/open) before the store is published (and while
 * it recovers), cleared by its close.
 */
#ifndef SB_TIER_H
#define SB_TIER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "store.h"
#include "tier_ops.h"

/* ---- life ------------------------------------------------------------------- */

/* sb_tier_below -- is there a tier below the RAM index? (Only for work the
 * index does on a tier's behalf, such as tracking what a restore copied
 * while reads are in flight; every operation answers for itself.) */
static inline bool sb_tier_below(const sb_store *st)
{
    return st->tier.ops != NULL;
}

/* sb_tier_blk_bytes -- bytes of the tier's area in each block, allocated
 * after the block's header (internal.h tier_area). RAM only: 0. */
static inline size_t sb_tier_blk_bytes(const sb_store *st)
{
    return st->tier.ops ? st->tier.ops->blk_bytes : 0;
}

/* sb_tier_data_align -- the alignment (and padding) the tier needs of a
 * block's data. RAM only: 0 (none). */
static inline size_t sb_tier_data_align(const sb_store *st)
{
    return st->tier.ops ? st->tier.ops->data_align : 0;
}

/* sb_tier_close -- stop the tier and free it; st->tier is cleared. crash
 * false: everything the tier holds queued is written and synced first
 * (under write-back, every dirty block). crash true (tests): stop at once,
 * writing nothing more, as if the process died. Called by sb_store_close
 * before the index is freed (mu not held).
 * Returns: SB_OK (everything the close wrote is written and synced; also
 * for a crash); the first error of the close's own writes: SB_ERR_IO,
 * SB_ERR_NOSPC (what it did not write is lost; what was durable before
 * stays); SB_ERR_NOMEM. RAM only: SB_OK. */
static inline int sb_tier_close(sb_store *st, bool crash)
{
    return st->tier.ops ? st->tier.ops->close(st, crash) : SB_OK;
}

/* sb_tier_flush -- wait until every block offered before the call is kept
 * by the tier, durably (under write-back, every dirty block is offered
 * first). Unlocked.
 * Returns: SB_OK; SB_ERR_IO (a write failed since the store opened; the
 * blocks stay RAM-only); SB_ERR_NOSPC (the tier is full and takes no
 * more). RAM only: SB_OK. */
static inline int sb_tier_flush(sb_store *st)
{
    return st->tier.ops ? st->tier.ops->flush(st) : SB_OK;
}

/* sb_tier_stats -- [mu] fill the tier's fields of *out. RAM only: they
 * stay as they are (zero). */
static inline void sb_tier_stats(const sb_store *st, sb_stats *out)
{
    if (st->tier.ops)
        st->tier.ops->stats(st, out);
}

/* sb_tier_foreground_over -- [mu] the last foreground mark ended: the tier
 * may resume background work it held back. RAM only: nothing. */
static inline void sb_tier_foreground_over(sb_store *st)
{
    if (st->tier.ops)
        st->tier.ops->foreground_over(st);
}

/* ---- offers ----------------------------------------------------------------- */

/* sb_tier_offer -- [mu] b (a page or point state just indexed, or indexed
 * earlier by a commit too short to offer it) is offered to the tier in
 * write-through and write-only modes: taken now, pooled, or denied (b
 * OFFERED alone) when parent (the page before it on its path; NULL for the first)
 * is neither kept nor pooled. RAM only: nothing (b's flags stay 0). */
static inline void sb_tier_offer(sb_store *st, sb_blk *b, const sb_blk *parent)
{
    if (st->tier.ops)
        st->tier.ops->offer(st, b, parent);
}

/* sb_tier_offer_short -- [mu] b, new, is not offered: its commit is shorter
 * than min_prefix_tokens (counted; b stays not OFFERED, so a longer commit
 * through it offers it). RAM only: nothing. */
static inline void sb_tier_offer_short(sb_store *st, sb_blk *b)
{
    if (st->tier.ops)
        st->tier.ops->offer_short(st, b);
}

/* sb_tier_supersede -- [mu] page old leaves the index for repl, of the
 * same tokens (a longer partial page, or a commit's own copy of it):
 * whatever waits for old (tickets) waits for repl; nothing when nothing
 * waits. RAM only: nothing. */
static inline void sb_tier_supersede(sb_store *st, sb_blk *old, sb_blk *repl)
{
    if (st->tier.ops)
        st->tier.ops->supersede(st, old, repl);
}

/* sb_tier_enqueue -- [mu] write indexed block b (not OFFERED) now:
 * write-back's eviction and flush. The tier takes a reference and b
 * becomes QUEUED, or b is refused (OFFERED alone). RAM only: nothing (b's
 * flags stay 0). */
static inline void sb_tier_enqueue(sb_store *st, sb_blk *b)
{
    if (st->tier.ops)
        st->tier.ops->enqueue(st, b);
}

/* sb_blk_used -- [mu] a commit or a match went through b: one more use
 * (saturating), the tier's priority for b while b waits in its pool (the
 * tier reorders it). */
static inline void sb_blk_used(sb_store *st, sb_blk *b)
{
    if (b->uses != UINT32_MAX)
        b->uses++;
    if ((b->below & SB_BELOW_POOLED) && st->tier.ops) /* (only a tier pools a block) */
        st->tier.ops->reorder(st, b);
}

/* sb_tier_leave -- [mu] b leaves the index: out of the tier's pool, and
 * whatever waits for b to be kept (tickets) fails, as it will not be.
 * RAM only: nothing. */
static inline void sb_tier_leave(sb_store *st, sb_blk *b)
{
    if (st->tier.ops)
        st->tier.ops->leave(st, b);
}

/* sb_tier_write_back / sb_tier_write_only -- [mu] the tier is in that mode
 * and still writing. RAM only: false. */
static inline bool sb_tier_write_back(const sb_store *st)
{
    return st->tier.ops && st->tier.ops->write_back(st);
}
static inline bool sb_tier_write_only(const sb_store *st)
{
    return st->tier.ops && st->tier.ops->write_only(st);
}

/* sb_tier_pending -- [mu] resident bytes queued or in flight, which turn
 * evictable once written. RAM only: 0. */
static inline uint64_t sb_tier_pending(const sb_store *st)
{
    return st->tier.ops ? st->tier.ops->pending(st) : 0;
}

/* sb_tier_wait_progress -- [mu] wait (st->mu released meanwhile) until
 * the tier finished at least one more write. Returns false at once when
 * nothing is pending (or the caller is the tier's own thread). RAM only:
 * false. */
static inline bool sb_tier_wait_progress(sb_store *st)
{
    return st->tier.ops && st->tier.ops->wait_progress(st);
}

/* ---- records ---------------------------------------------------------------- */

/* sb_tier_match -- [mu] a match takes (sign 1) or lets go of (-1) block b:
 * b->matched counts it, and while any match holds b and b is KEPT the
 * tier keeps its record readable (reclamation waits), so a match can
 * always read what it matched; a take is a hit of b for the tier
 * (reclamation keeps what was matched). RAM only: the count alone. */
static inline void sb_tier_match(sb_store *st, sb_blk *b, int sign)
{
    if (sign > 0)
        b->matched++;
    else
        b->matched--;
    if (st->tier.ops)
        st->tier.ops->match(st, b, sign);
}

/* sb_tier_count -- [mu] an indexed block with a record (KEPT) joins (sign
 * 1) or leaves (sign -1) the index: the tier's live-bytes gauges.
 * sb_tier_forget is sign -1. RAM only: nothing. */
static inline void sb_tier_count(sb_store *st, const sb_blk *b, int sign)
{
    if (st->tier.ops)
        st->tier.ops->count(st, b, sign);
}
static inline void sb_tier_forget(sb_store *st, const sb_blk *b)
{
    sb_tier_count(st, b, -1);
}

/* sb_tier_held -- [mu] b became KEPT (sign 1) or stops being KEPT (-1)
 * where its record is: the holds of its matches move along. RAM only:
 * nothing. */
static inline void sb_tier_held(sb_store *st, const sb_blk *b, int sign)
{
    if (st->tier.ops)
        st->tier.ops->held(st, b, sign);
}

/* sb_tier_record_stays -- [mu] is KEPT block b's record still where b
 * says, and staying there, so another block of the same content key may
 * take it over (a block that left the index may outlive its record)? RAM
 * only: false. */
static inline bool sb_tier_record_stays(const sb_store *st, const sb_blk *b)
{
    return st->tier.ops && st->tier.ops->record_stays(st, b);
}

/* sb_tier_take_record -- [mu] resident page nu, just indexed in the place
 * of KEPT page old (same tokens, key and region; old has no data), takes
 * over old's record when it stays (sb_tier_record_stays): nu becomes KEPT
 * with old's record and ticket, joining the tier's gauges and holds; else
 * nu is refused (OFFERED alone: RAM only, as the record is being
 * reclaimed). RAM only: nu is refused (no block is KEPT without a tier,
 * so this is not reached). */
static inline void sb_tier_take_record(sb_store *st, const sb_blk *old, sb_blk *nu)
{
    if (st->tier.ops)
        st->tier.ops->take_record(st, old, nu);
    else
        nu->below = (uint8_t)((nu->below & ~(SB_BELOW_KEPT | SB_BELOW_QUEUED)) |
                              SB_BELOW_OFFERED);
}

/* sb_tier_unclean -- [mu] KEPT block b stops naming its record and is
 * offered anew (not OFFERED: it is written again), leaving the tier's
 * gauges (when indexed) and taking its matches' holds off the record. RAM
 * only: b's flags are cleared but for POOLED and CUT (no block is KEPT
 * without a tier, so this is not reached). */
static inline void sb_tier_unclean(sb_store *st, sb_blk *b)
{
    if (st->tier.ops)
        st->tier.ops->unclean(st, b);
    else
        b->below &= (uint8_t)~(SB_BELOW_OFFERED | SB_BELOW_KEPT | SB_BELOW_QUEUED);
}

/* ---- reads ------------------------------------------------------------------ */

/* sb_tier_load -- make blocks[0, n) of ns resident (every one held by the
 * caller; those with data are skipped), reading their records with many
 * reads in flight and checking each one. Unlocked. *n_ok receives how many
 * leading blocks are resident. When block i fails, it is removed from the
 * index with every page and point state that depends on it, and *n_ok = i.
 * ready (may be NULL) sees every block read and checked, in completion
 * order.
 * Returns: SB_OK (*n_ok = n); SB_ERR_CORRUPT (a checksum, key or size did
 * not match); SB_ERR_IO (a read failed); SB_ERR_BUDGET, SB_ERR_NOMEM (no
 * room for the data: *n_ok blocks were made resident, the index
 * unchanged). RAM only: every held block is resident (SB_OK, *n_ok = n);
 * one without data would be SB_ERR_IO at its place, as with a tier that
 * lost it. */
static inline int sb_tier_load(struct sb_ns *ns, sb_blk **blocks, size_t n, size_t *n_ok,
                               sb_tier_ready_fn ready, void *ctx)
{
    if (ns->st->tier.ops)
        return ns->st->tier.ops->load(ns, blocks, n, n_ok, ready, ctx);
    size_t i = 0;
    while (i < n && blocks[i]->data)
        i++;
    *n_ok = i;
    return i == n ? SB_OK : SB_ERR_IO;
}

/* sb_tier_prefault -- have the tier ready to restore n page records of ns
 * and a point state without touching fresh memory (the disk tier: its
 * record heads' scratch grown and faulted in). Best effort; unlocked.
 * RAM only: nothing. */
static inline void sb_tier_prefault(sb_store *st, const struct sb_ns *ns, size_t n)
{
    if (st->tier.ops)
        st->tier.ops->prefault(st, ns, n);
}

/* sb_tier_stream_pages -- a put of `pages` new pages of page_bytes each
 * streams out when they are more than the tier's backlog takes: the pages
 * per chunk, else 0 (one commit). [unlocked reads of const fields] RAM
 * only: 0. */
static inline size_t sb_tier_stream_pages(const sb_store *st, size_t page_bytes, size_t pages)
{
    return st->tier.ops ? st->tier.ops->stream_pages(st, page_bytes, pages) : 0;
}

/* sb_tier_stream_wait -- [mu] wait until the tier drained its backlog to
 * half (or can drain no more). RAM only: nothing. */
static inline void sb_tier_stream_wait(sb_store *st)
{
    if (st->tier.ops)
        st->tier.ops->stream_wait(st);
}

/* ---- forget ----------------------------------------------------------------- */

/* sb_tier_drop -- [mu] remove cut block b (SB_BELOW_CUT: the tier took its
 * record while it was resident, evict.c) from the index with every page
 * and point state that depends on it (deepest leaf pages first). The
 * caller holds a reference to b besides the index's. RAM only: nothing
 * (only a tier cuts a block). */
static inline void sb_tier_drop(struct sb_ns *ns, sb_blk *b)
{
    if (ns->st->tier.ops)
        ns->st->tier.ops->drop(ns, b);
}

/* sb_tier_remove -- [mu] sb_ns_remove is taking every state of ns whose
 * tokens start with a prefix of n tokens out of the index, under this
 * same hold of st->mu: record the removal in the tier, so that nothing
 * the tier keeps of those states comes back (the disk tier: a tombstone,
 * queued now and written before any block queued after it). parent is
 * the content key of the prefix's last full page (page n / pt - 1; the
 * namespace's root key when n < pt), rest[0, n_rest) its tokens after
 * that page (n_rest = n mod pt), read during the call only. Blocks the
 * tier holds for writing that left the index (the caller unindexes them
 * before letting go of st->mu) are never written. *req receives what
 * sb_tier_remove_wait waits for (NULL: nothing to wait for).
 * Returns: SB_OK; SB_ERR_NOMEM (nothing recorded: the caller changes
 * nothing). RAM only: SB_OK, *req NULL. */
static inline int sb_tier_remove(struct sb_ns *ns, const sb_key *parent, uint32_t n,
                                 const uint32_t *rest, uint32_t n_rest, void **req)
{
    *req = NULL;
    if (ns->st->tier.ops)
        return ns->st->tier.ops->remove(ns, parent, n, rest, n_rest, req);
    return SB_OK;
}

/* sb_tier_remove_wait -- unlocked: wait until the removal req records is
 * durable (the disk tier: the tombstone written and synced, whatever the
 * durability mode), or known not to be; frees req (NULL: SB_OK).
 * Returns: SB_OK (no restart brings the removed states back); SB_ERR_IO
 * (a write or sync of it failed, or the tier stopped writing after an
 * I/O error); SB_ERR_NOSPC (the tier's cap or file system is full): not
 * durable, and a restart may bring the states back as a crash before the
 * call would (snapbank.h sb_ns_remove). RAM only: not called. */
static inline int sb_tier_remove_wait(sb_store *st, void *req)
{
    if (!req || !st->tier.ops)
        return SB_OK;
    return st->tier.ops->remove_wait(st, req);
}

/* ---- tickets ---------------------------------------------------------------- *
 *
 * A put or commit that reports its outcome, or runs under
 * SB_DURABILITY_COMMIT, takes sb_tier_ticket before it commits, a write set
 * for its state's blocks before it locks (sb_tier_wset_new: an allocation
 * that fails changes nothing) and room for it (sb_tier_wset_reserve), and,
 * once its state is indexed, hands the set to sb_tier_outcome. */

/* sb_tier_ticket -- [mu] the next block ticket the tier hands out: blocks
 * queued from now on have this one or a later one. RAM only: 0. */
static inline uint64_t sb_tier_ticket(const sb_store *st)
{
    return st->tier.ops ? st->tier.ops->ticket(st) : 0;
}

/* sb_tier_wset_new -- unlocked: a write set for a state of up to n blocks.
 * Returns NULL when out of memory. RAM only: NULL (none is needed; callers
 * ask only with sb_tier_below). sb_tier_wset_free -- free one never handed
 * to sb_tier_outcome (NULL is a no-op). */
static inline sb_wset *sb_tier_wset_new(sb_store *st, size_t n)
{
    return st->tier.ops ? st->tier.ops->wset_new(st, n) : NULL;
}
static inline void sb_tier_wset_free(sb_store *st, sb_wset *ws)
{
    if (ws && st->tier.ops) /* (only a tier makes one) */
        st->tier.ops->wset_free(ws);
}

/* sb_tier_wset_reserve -- [mu] a place for one more set, kept until
 * sb_tier_outcome takes it or sb_tier_wset_unreserve gives it back.
 * Returns: SB_OK; SB_ERR_NOMEM (nothing changed). RAM only: SB_OK. */
static inline int sb_tier_wset_reserve(sb_store *st)
{
    return st->tier.ops ? st->tier.ops->wset_reserve(st) : SB_OK;
}
static inline void sb_tier_wset_unreserve(sb_store *st)
{
    if (st->tier.ops)
        st->tier.ops->wset_unreserve(st);
}

/* sb_tier_outcome -- [mu] the ticket of the state blocks[0, n) with write
 * set ws (taken, with its reserved place; may be NULL, or n 0: no ticket).
 * Under SB_DURABILITY_COMMIT it waits (st->mu released meanwhile) until
 * what the state has queued is written and synced. Fills oc's ticket,
 * durable, queued, written, deferred, dirty and denied fields; t0 is the
 * call's sb_tier_ticket. keep false: nobody will ask for the ticket. RAM
 * only: oc->ticket and oc->durable 0. */
static inline void sb_tier_outcome(sb_store *st, sb_wset *ws, sb_blk **blocks, size_t n,
                                   uint64_t t0, sb_write_outcome *oc, bool keep)
{
    if (st->tier.ops) {
        st->tier.ops->outcome(st, ws, blocks, n, t0, oc, keep);
        return;
    }
    oc->ticket = 0;
    oc->durable = 0;
}

#endif /* SB_TIER_H */
