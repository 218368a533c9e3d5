/* disk.h -- the disk tier's operations: open and recovery, the write
 * queue and durability, and reading records back.
 *
 * The RAM index reaches these only through the tier table (store/core/
 * tier.h): disk.c fills an sb_tier_ops with them, and sb_disk_open (the
 * constructor, which store/open calls) attaches it to the store. The disk
 * tier's own files call them directly.
 *
 * sb_disk_open recovers the index from the directory (recover.c) and
 * starts the writer thread (writer.c). Committed blocks reach the writer
 * through sb_disk_committed (write-through, write-only) or eviction
 * (write-back); the writer holds a reference to each block it has queued
 * or in flight and turns it CLEAN (or FAILED) when its record is written.
 * Restores make disk-only blocks resident with sb_disk_load (dread.c).
 *
 * Every function here is a no-op or returns the RAM-only answer when the
 * store has no disk tier (sb_disk_of(st) NULL), so callers need not check.
 *
 * Thread safety: functions marked [mu] expect st->mu held (some wait on a
 * condition variable, releasing it meanwhile); the others take what they
 * need.
 */
#ifndef SB_DISK_H
#define SB_DISK_H

#include <stdbool.h>
#include <stdint.h>

#include "host.h"
#include "io.h"
#include "tier_ops.h"

struct sb_disk; /* disk_int.h */

/* ---- the constructor (called by store/open) ---- */

/* sb_disk_config_check -- the disk tier's options in cfg (compress_level),
 * checked for every store, with a directory or without, so a bad option
 * is refused the same way either way.
 * Returns: SB_OK; SB_ERR_INVAL. */
int sb_disk_config_check(const sb_config *cfg);

/* sb_disk_open -- the disk tier's constructor: set up st's tier on
 * cfg->dir, or, for tests, on an in-memory file system (io, a mem sb_io
 * the store takes handles on with sb_io_mem_share; borrowed): lock the
 * directory, create or recover the store in it, start the writer, and set
 * st->tier (already while it recovers, so what recovery indexes is
 * counted). Called by sb_store_open (store/open) before the store is
 * published (mu not held).
 * Returns: SB_OK; SB_ERR_LOCKED (another process holds the directory: a
 * message naming its pid goes to stderr); SB_ERR_VERSION (an unknown
 * format version: nothing was changed); SB_ERR_SUPERBLOCK (without
 * cfg->open_flags SB_OPEN_SALVAGE: a superblock that cannot be used, or
 * none beside segment files; nothing was changed); SB_ERR_IO;
 * SB_ERR_NOSPC; SB_ERR_NOMEM; SB_ERR_INVAL (a path that is not a
 * directory). On failure st->tier is cleared and nothing is left running
 * (recovery may have indexed blocks: the caller frees the index). */
int sb_disk_open(sb_store *st, const sb_config *cfg, sb_io *io);

/* sb_disk_close -- stop the disk tier and free it. crash false: drain the
 * queue (under write-back, every dirty block queued first), write every
 * queued block, seal the open segment with its summary, sync, update the
 * superblock. crash true (tests): stop at once, writing nothing more, as
 * if the process died. Called by sb_store_close before the index is freed
 * (mu not held).
 * Returns: SB_OK (everything the close wrote is written and synced; also
 * for a crash, and without a disk tier); the first error of the close's
 * own writes, syncs, seal and superblock: SB_ERR_IO, SB_ERR_NOSPC (what it
 * did not write is lost; what was durable before stays); SB_ERR_NOMEM
 * (write-back: the dirty blocks could not all be found). */
int sb_disk_close(sb_store *st, bool crash);

/* sb_disk_committed -- [mu] b (a page or point state just indexed, or
 * indexed earlier by a commit too short to offer it) is offered for
 * writing in write-through and write-only modes: queued when the pool is
 * empty and the budget and backlog take it, else put in the priority pool
 * (admit.c); denied (SB_DENY_PARENT) when parent (the page before it on
 * its path; NULL for the first) is neither written nor pooled. */
void sb_disk_committed(sb_store *st, sb_blk *b, const sb_blk *parent);

/* sb_disk_short -- [mu] b, new, is not offered: its commit is shorter than
 * min_prefix_tokens (counted as SB_DENY_SHORT; b stays unwritten, not
 * FAILED, so a longer commit through it offers it). */
void sb_disk_short(sb_store *st, sb_blk *b);

/* sb_disk_pool_drain -- [mu] queue pooled blocks, best first (parents
 * before children), while the budget and the backlog admit them.
 * Returns: how many were queued. */
size_t sb_disk_pool_drain(sb_store *st);

/* sb_disk_pool_fix -- [mu] b's uses changed: reorder it if pooled (a no-op
 * otherwise).
 * sb_disk_pool_leave -- [mu] b leaves the index: out of the pool, denied
 * for the reason it waited for, and the tickets waiting for it (ticket.c)
 * fail, as it will not be written. */
void sb_disk_pool_fix(sb_store *st, sb_blk *b);
void sb_disk_pool_leave(sb_store *st, sb_blk *b);

/* sb_disk_prefault -- have the disk tier ready to restore n page records
 * of ns and a point state without touching fresh memory: its heads
 * scratch grown (and faulted in) for their heads, up to
 * SB_DISK_HEADS_KEEP. Best effort: when memory is short the restore grows
 * it as it goes. The tier table's prefault (sb_tier_prefault). Unlocked. */
void sb_disk_prefault(sb_store *st, const sb_ns *ns, size_t n);

/* sb_disk_rec_bytes -- [mu] the bytes of b's record (head and payload),
 * what admission reserves in the write budget (writer.c). */
uint64_t sb_disk_rec_bytes(const sb_blk *b);

/* sb_disk_debit -- [mu] bytes were written to the device: take them from
 * the write budget's bucket. */
void sb_disk_debit(struct sb_disk *d, uint64_t bytes);

/* sb_disk_deny -- [mu] count block b not written, for reason why (sb_deny,
 * kept in its sb_drec, why); the tickets waiting for it fail. */
void sb_disk_deny(struct sb_disk *d, int why, sb_blk *b);

/* sb_disk_enqueue -- [mu] queue indexed block b for writing now (b
 * NONE; write-back's eviction and flush, a ticket's wait): the writer
 * takes a reference and b becomes QUEUED, or b is denied (FAILED: budget,
 * backlog, short). A block waiting in the pool leaves it first. */
void sb_disk_enqueue(sb_store *st, sb_blk *b);

/* sb_disk_write_back / sb_disk_write_only -- [mu] the tier is in that mode
 * and still writing. */
bool sb_disk_write_back(const sb_store *st);
bool sb_disk_write_only(const sb_store *st);

/* sb_disk_pending -- [mu] resident bytes queued or in flight, which turn
 * evictable once written. 0 without a disk tier. */
uint64_t sb_disk_pending(const sb_store *st);

/* sb_disk_foreground_over -- [mu] the last foreground mark ended: wake the
 * writer if it is holding back. No-op without a disk tier. */
void sb_disk_foreground_over(sb_store *st);

/* sb_disk_wait_progress -- [mu] wait until the writer finished at least one
 * more write. Returns false at once when nothing is pending. */
bool sb_disk_wait_progress(sb_store *st);

/* ---- durability tickets (ticket.c) ---------------------------------------------
 *
 * A put or commit that reports its outcome, or runs under
 * SB_DURABILITY_COMMIT, takes sb_disk_ticket before it commits (the first
 * block ticket it can queue), a write set for its state's blocks before it
 * locks (sb_disk_wset_new: an allocation that fails changes nothing) and
 * room for it in the pending table (sb_disk_wset_reserve), and, once its
 * state is indexed, hands the set to sb_disk_outcome. */

/* sb_disk_ticket -- [mu] the next block ticket the writer's queue hands
 * out: blocks queued from now on have this one or a later one. 0 without
 * a disk tier. */
uint64_t sb_disk_ticket(const sb_store *st);

typedef struct sb_wset sb_wset;

/* sb_disk_wset_new -- unlocked: a write set for a state of up to n blocks.
 * Returns NULL when out of memory, or when st has no disk tier (none is
 * needed). sb_disk_wset_free -- free one never handed to sb_disk_outcome
 * (NULL is a no-op). */
sb_wset *sb_disk_wset_new(sb_store *st, size_t n);
void sb_disk_wset_free(sb_wset *ws);

/* sb_disk_wset_reserve -- [mu] a place in the pending table for one more
 * set, kept until sb_disk_outcome takes it or sb_disk_wset_unreserve
 * gives it back. Returns: SB_OK (also without a disk tier); SB_ERR_NOMEM
 * (nothing changed). */
int sb_disk_wset_reserve(sb_store *st);
void sb_disk_wset_unreserve(sb_store *st);

/* sb_disk_outcome -- [mu] the ticket of the state blocks[0, n) (the pages
 * of a call's restorable tokens and its point state, indexed now) with
 * write set ws (taken, with its reserved place; may be NULL, or n 0: no
 * ticket). Under SB_DURABILITY_COMMIT it waits (st->mu released
 * meanwhile) until what the state has queued is written and synced. Fills
 * oc's ticket, durable, queued, written, deferred, dirty and denied fields
 * (pages_new and points_new are the commits'); t0 is the call's
 * sb_disk_ticket. keep false: nobody will ask for the ticket (the caller
 * passed no outcome), so it is not kept pending. */
void sb_disk_outcome(sb_store *st, sb_wset *ws, sb_blk **blocks, size_t n, uint64_t t0,
                     sb_write_outcome *oc, bool keep);

/* sb_disk_supersede -- [mu] partial page old leaves the index for repl, a
 * longer page of the same tokens (radix.c): the tickets waiting for old
 * wait for repl. */
void sb_disk_supersede(sb_store *st, sb_blk *old, sb_blk *repl);

/* sb_disk_blk_gone -- [mu] b will not be written (it leaves the index
 * unwritten): the tickets waiting for it fail. */
void sb_disk_blk_gone(sb_store *st, sb_blk *b);

/* sb_disk_stream_pages -- a put of `pages` new pages of page_bytes each
 * streams out when they are more than the backlog budget takes (write-
 * through and write-only modes): it returns the pages per chunk (half the
 * backlog's worth, at least 1), else 0 (one commit). [unlocked reads of
 * const fields] */
size_t sb_disk_stream_pages(const sb_store *st, size_t page_bytes, size_t pages);

/* sb_disk_stream_wait -- wait until the writer has drained the queue to half
 * the backlog budget (or can drain no more). [mu] */
void sb_disk_stream_wait(sb_store *st);

/* sb_disk_match -- a match took (sign 1) or let go of (-1) block b
 * (b->matched, counted by sb_tier_match, already says so): while any match
 * holds b and b is CLEAN, the segment its record is in is not deleted
 * (reclamation waits), so a match can always read what it matched, even
 * once reclamation moved or dropped it. A take is a hit: reclamation keeps
 * b's record (reclaim.c). [mu] */
void sb_disk_match(sb_store *st, sb_blk *b, int sign);

/* sb_disk_held -- b became CLEAN in its segment (sign 1) or stops being
 * CLEAN there (-1): move the holds of its matches along. [mu] */
void sb_disk_held(sb_store *st, const sb_blk *b, int sign);

/* sb_disk_unhold -- drop one hold on segment seg (a read finished). [mu] */
void sb_disk_unhold(sb_store *st, uint32_t seg);

/* sb_disk_unclean -- CLEAN block b stops naming its record: it becomes
 * state (SB_DISK_*), leaving the live-bytes gauges (when indexed) and
 * taking its matches' holds off the segment. [mu] */
void sb_disk_unclean(sb_store *st, sb_blk *b, int state);

/* sb_disk_record_stays -- is CLEAN block b's record still where b says, in
 * a segment not being reclaimed, so another block may take it over (a
 * block that left the index may outlive its record)? [mu] */
bool sb_disk_record_stays(const sb_store *st, const sb_blk *b);

/* sb_disk_take_record -- resident page nu, just indexed in the place of
 * CLEAN page old (same tokens, key and region; old has no data), takes
 * over old's record when it stays (sb_disk_record_stays): nu becomes CLEAN
 * with old's record location and ticket (its record is synced when old's
 * is) and joins the gauges and holds; else nu is FAILED (RAM only: the
 * record is being reclaimed). [mu] */
void sb_disk_take_record(sb_store *st, const sb_blk *old, sb_blk *nu);

/* sb_disk_count -- [mu] an indexed block with a record on disk joins
 * (sign 1) or leaves (sign -1) the index: the live-bytes gauges. */
void sb_disk_count(sb_store *st, const sb_blk *b, int sign);

/* Called by sb_disk_load for block i as soon as its record is read and
 * checked (tier.h). */
typedef sb_tier_ready_fn sb_disk_ready_fn;

/* sb_disk_load -- make blocks[0, n) of ns resident (every one held by the
 * caller; those with data are skipped), reading their records with many
 * reads in flight and checking each record's head and payload checksum.
 * Unlocked. *n_ok receives how many leading blocks are resident.
 * When block i fails, it is removed from the index with every page and
 * point state that depends on it, and *n_ok = i. ready (may be NULL) sees
 * every block read and checked, in completion order.
 * Returns: SB_OK (*n_ok = n); SB_ERR_CORRUPT (a checksum, key or size did
 * not match: counted in disk_checksum_failures); SB_ERR_IO (a read failed);
 * SB_ERR_BUDGET, SB_ERR_NOMEM (no room for the data: *n_ok blocks were
 * made resident, the index unchanged). */
int sb_disk_load(struct sb_ns *ns, sb_blk **blocks, size_t n, size_t *n_ok,
                 sb_disk_ready_fn ready, void *ctx);

/* sb_disk_drop -- remove b from the index with every page and point state
 * that depends on it (deepest leaf pages first): a record that failed, a
 * segment reclaimed, a cut page evicted (evict.c). The caller holds a
 * reference to b besides the index's. [mu] (dread.c) */
void sb_disk_drop(struct sb_ns *ns, sb_blk *b);

/* sb_disk_remove -- [mu] the tier table's remove (tier.h sb_tier_remove):
 * queue a tombstone for the removal of the prefix of n tokens of ns whose
 * last full page has key parent, rest[0, n_rest) after it; *req receives
 * it, for sb_disk_remove_wait. A tier that writes nothing more (stopped
 * by an I/O error or a full cap) fails it at once. (tomb.c)
 * Returns: SB_OK; SB_ERR_NOMEM (nothing queued). */
int sb_disk_remove(struct sb_ns *ns, const sb_key *parent, uint32_t n, const uint32_t *rest,
                   uint32_t n_rest, void **req);

/* sb_disk_remove_wait -- unlocked: the tier table's remove_wait: hurry
 * the writer (the tombstone is written and synced whatever the
 * durability mode) and wait until req is durable or failed; let go of it.
 * Returns: SB_OK; SB_ERR_IO; SB_ERR_NOSPC (tier.h). (tomb.c) */
int sb_disk_remove_wait(sb_store *st, void *req);

/* sb_disk_flush -- wait until every block queued before the call is written
 * and synced (under write-back, every dirty block is queued first).
 * Unlocked.
 * Returns: SB_OK; SB_ERR_IO (a write failed since the store opened; the
 * blocks stay RAM-only); SB_ERR_NOSPC (the tier is full and writes no
 * more). */
int sb_disk_flush(sb_store *st);

/* sb_disk_stats -- [mu] fill the disk tier's fields of *out. */
void sb_disk_stats(const sb_store *st, sb_stats *out);

/* ---- test hooks (the store's own: tier.h) ---- */

/* sb_disk_writer_hook -- fn(ctx) is called by st's writer thread each time
 * it has nothing in flight, between its look at the store and what it
 * does next (seal, open, sync or leave), with st->mu not held: a test
 * holds the writer there to order a race. fn NULL removes it. A no-op on
 * a store without a disk tier. Locks st->mu. */
void sb_disk_writer_hook(sb_store *st, void (*fn)(void *ctx), void *ctx);

/* sb_disk_stopping -- whether a close has told st's writer to stop (false
 * without a disk tier). Locks st->mu. */
bool sb_disk_stopping(sb_store *st);

/* The test hooks sb_store_open_io and sb_store_crash: store/open/open.h. */

#endif /* SB_DISK_H */
