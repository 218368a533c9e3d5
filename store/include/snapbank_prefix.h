/* snapbank_prefix.h -- what a caller decides about a stored prefix: pins
 * (keep it from eviction, with a TTL), removal from every tier, and a dump
 * of the index for debugging.
 *
 * One part of libsnapbank's public API. snapbank.h is the manual (its
 * first pages: concepts, page layout, ownership, thread safety, budgets)
 * and includes every part. */
#ifndef SNAPBANK_PREFIX_H
#define SNAPBANK_PREFIX_H

#include "snapbank_store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ============================================================================
 * Pins
 * ========================================================================== */

/* sb_ns_pin -- pin the longest stored prefix of tokens[0, n_tokens) (a system
 * prompt, say) so eviction cannot take it, for ttl_ms milliseconds of the
 * store clock (0: until sb_ns_unpin). The pin holds the pages that cover the
 * prefix now; it does not grow with later puts, except that when a longer
 * page of the same tokens supersedes a partial page it holds, the pin holds
 * that page instead (so the pinned tokens stay restorable from the index).
 * Pinned pages are kept in RAM: pages on disk only are read first (as a
 * restore reads them), so the disk tier's reclamation cannot take them
 * either; no room for one in the budgets ends the pin before it. Pinned
 * pages count against the budgets.
 *
 * *pin_id receives an id for sb_ns_unpin; *n_pinned (when not NULL) the
 * number of tokens pinned (0 is not an error: the pin then holds nothing).
 * Returns: SB_OK; SB_ERR_INVAL; SB_ERR_NO_TOKENS; SB_ERR_TOO_MANY_TOKENS;
 * SB_ERR_NOMEM; SB_ERR_CORRUPT, SB_ERR_IO (a page on disk failed its
 * read: it left the index with every page after it, as in
 * sb_match_restore, and nothing was pinned; a second call pins what is
 * left). */
SB_API int sb_ns_pin(sb_ns *ns, const uint32_t *tokens, size_t n_tokens,
                     uint64_t ttl_ms, uint64_t *pin_id, size_t *n_pinned);

/* sb_ns_unpin -- remove a pin before its TTL expires.
 * Returns: SB_OK; SB_ERR_INVAL; SB_ERR_NOT_FOUND (no live pin with this id
 * in this namespace: never made, removed, or expired). */
SB_API int sb_ns_unpin(sb_ns *ns, uint64_t pin_id);

/* ============================================================================
 * Removal
 * ============================================================================
 *
 * sb_ns_remove forgets a conversation (or any prefix): every state whose
 * token sequence starts with the prefix leaves the index, the disk tier
 * and the shared tier, for good.
 */

/* sb_ns_remove -- drop every state of ns whose token sequence starts with
 * tokens[0, n_tokens) from every tier.
 *
 * What goes. Let pt be page_tokens and r = n_tokens / pt (rounded down):
 * page r is the page holding the prefix's last tokens when n_tokens is
 * not a multiple of pt, else the first page after the prefix. Every page
 * of region r or later on a path through tokens[0, n_tokens) goes -- the
 * pages after the prefix, and, when the prefix ends inside page r, the
 * pages of region r whose tokens begin with tokens[r * pt, n_tokens) (they
 * hold state of the prefix's last tokens, and of the tokens after) -- and
 * every point state at a position >= n_tokens on those paths, including
 * one at exactly n_tokens. Nothing else is a target: the pages of regions
 * before r (the state of tokens[0, r * pt)), point states at positions
 * below n_tokens, and every path that leaves the prefix before its end
 * stay. A prefix ending inside a page has one consequence beyond that:
 * positions r * pt .. n_tokens - 1 of the prefix were held by pages of
 * region r that began with the whole rest of it; they stay restorable
 * where a stored sequence that leaves the prefix before n_tokens covers
 * them, and a point state at such a position goes with the pages when
 * nothing else covers it (counted in *n_removed). Afterwards, until the
 * prefix is put again, a match of any request that starts with
 * tokens[0, n_tokens) covers at most the prefix (n_matched_tokens <=
 * n_tokens: its pages before the cut), fewer tokens when n_tokens is not
 * a multiple of pt, and never with a point state at n_tokens. (To forget
 * a conversation that left a shared prompt at token k, remove its tokens
 * [0, k + 1): the conversation goes whole, and the shared prompt stays
 * restorable as far as the other conversations through it hold it.)
 *
 * Holders. Removed pages and point states leave the index at once: no
 * later match, lookup, pin, put or commit finds them, and they stop
 * counting as indexed. Their memory goes with the last holder:
 *   - a live match keeps every page and point state it holds: its
 *     restores, sb_match_pages and sb_match_point give the same bytes as
 *     before (a page on disk only is read from its record, which stays
 *     until the match is released);
 *   - a page reference (sb_match_pages, a committed sb_ns_page_alloc
 *     page) stays valid with its bytes; committing it again indexes it as
 *     new state (written to the disk tier again, never served from its old
 *     record);
 *   - a pin lets go of the removed pages at once and keeps the pages
 *     before the cut (its id stays valid for sb_ns_unpin): a pin keeps
 *     state in the index, and these left it;
 *   - blocks queued for the disk tier's writer, or waiting in its priority
 *     pool, are not written; a durability ticket that needs one fails
 *     (SB_ERR_NOT_DURABLE), as for any block that leaves the index
 *     unwritten. A ticket already durable stays durable (it said the
 *     state was on disk; the removal took it off later).
 *
 * Disk tier. Records are never rewritten, so the call writes a tombstone
 * record (docs/format.md: the namespace, the key of page r - 1 on the
 * prefix's path, the tokens after it, and its sequence number) and waits
 * until it is synced, whatever the durability mode, before it returns
 * SB_OK. From then on no reopen -- after a clean close, a crash or a power
 * cut, with or without SB_OPEN_SALVAGE -- brings back a removed state:
 * recovery drops every record older than the tombstone whose path passes
 * through the cut (recovery_removed), and reclamation keeps the tombstone
 * (writing it again) while a segment that may hold such a record remains.
 * A put or commit of the same prefix after the call returns is newer than
 * the tombstone and survives restarts as any put does. A tombstone is
 * written on every call when the store has a disk tier (write-only mode
 * included), even when the index held nothing under the prefix: records
 * may be on disk that the index does not hold (write-only mode, an
 * earlier call whose tombstone failed). From its first tombstone on, a
 * store says superblock version 3, which builds without removal refuse
 * (SB_ERR_VERSION) instead of opening it without its tombstones.
 *
 * A crash during the call. The tombstone is one record: after a crash it
 * is either found whole or not at all. Not found (the call had not
 * returned SB_OK): the removed states come back as far as the crash would
 * have left them without the call -- what was durable is restored --
 * except that blocks of the removed states the writer had not begun to
 * write when the call took them out are never written. Found: nothing
 * removed comes back. Either way the crash loses nothing the call did not
 * take out of the index (the removed states, and the tail of a shorter
 * prefix left without cover, above; a reopen may find such a tail again
 * in its own older record).
 *
 * Shared tier. The keys of the removed full pages the index held are
 * deleted from the pool (one pipelined DEL, waiting at most about twice
 * shared_timeout_ms), whether this store published the page, fetched it,
 * or neither (another node may have published the same tokens), and their
 * publications still queued are dropped. Best effort, counted
 * (shared_forgotten, shared_forget_failed), never an error of the call:
 * a node that does not answer keeps its keys until their TTL; pages the
 * pool holds under the prefix that this store's index never held stay
 * (their keys need tokens it does not have); other nodes' RAM and disk
 * copies are not touched (call sb_ns_remove on every node).
 *
 * tokens is read during the call only. *n_removed (may be NULL) receives
 * the pages and point states that left the index (0 when the call fails
 * with an error other than SB_ERR_IO or SB_ERR_NOSPC). Thread-safe: put,
 * commit and match may run at once on the same namespace, and one that
 * starts after the call returns sees the removal. A put or commit racing
 * with it lands before it (removed with the rest) or after it (kept), on
 * disk as in RAM; a put that streams its pages in chunks (more than the
 * backlog) may have its first chunks removed and then stop short
 * (SB_ERR_BUDGET, *n_stored saying what is restorable).
 *
 * Returns: SB_OK (also when nothing matched: the tombstone is durable);
 * SB_ERR_INVAL (NULL ns, NULL tokens); SB_ERR_NO_TOKENS;
 * SB_ERR_TOO_MANY_TOKENS; SB_ERR_NOMEM (nothing changed); SB_ERR_IO,
 * SB_ERR_NOSPC: the states left the index (*n_removed of them) and no
 * match of this store finds them, but the removal is not durable: the
 * tombstone's write or sync failed (SB_ERR_IO), or the disk tier writes
 * nothing more since a write failed (SB_ERR_IO) or its cap or file system
 * is full (SB_ERR_NOSPC); a reopen may bring the states back as a crash
 * during the call would (above). Calling again writes a new tombstone
 * (and removes nothing more from RAM) once the tier writes again (a full
 * one tries again when a put offers it a block, a second or more after it
 * stopped; a removal alone does not make it try). */
SB_API int sb_ns_remove(sb_ns *ns, const uint32_t *tokens, size_t n_tokens, size_t *n_removed);

/* ============================================================================
 * Debugging
 * ========================================================================== */

/* sb_ns_dump -- print the namespace's radix tree to a stdio stream (a FILE *,
 * passed as void * so this header needs no <stdio.h>): one line per node with
 * its depth range, tokens, pages and point state.
 * Returns: SB_OK; SB_ERR_INVAL; SB_ERR_NOMEM (no memory for the walk). */
SB_API int sb_ns_dump(sb_ns *ns, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* SNAPBANK_PREFIX_H */
