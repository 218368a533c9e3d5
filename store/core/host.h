/* host.h -- what the RAM index offers the tiers below it: the only part of
 * store/core that store/disk and store/remote call.
 *
 * The index reaches a tier through the tier's table (tier.h, shared.h);
 * a tier reaches the index back only through the functions here, named by
 * what they mean to the index, as a SQLite VFS reaches nothing of the
 * pager. Each is a function of core (host.c), so the calls between the
 * folders can be read from the objects' symbols:
 *
 *     store/open ──► store/disk, store/remote ──► store/core (host.h)
 *          │                  ▲                        │   ▲
 *          │                  └─ tier.h, shared.h ─────┘   │
 *          │                     (function pointers on     │
 *          │                      the store)               │
 *          └──────────────── store.h (the bare store) ─────┘
 *
 * The functions, grouped by what they are for:
 *   - the store:   its clock, its allocator (with the fault hook), huge-page
 *                  scratch, content keys;
 *   - namespaces:  open and close a handle (recovery), hold one (a walk
 *                  over many), free one nothing holds;
 *   - blocks:      references, a fresh page (a fetch), a new block for a
 *                  record, data sizes, whether
 *                  a block may be evicted now, the flags the index reads of
 *                  a block's state in the tier (SB_BELOW_*), whether a
 *                  removal took it since its last record;
 *   - the index:   the block a block's record chains from, the tokens of its
 *                  path, a visit of a namespace's blocks, whether a block
 *                  reaches a length, cutting a block out with what depends on
 *                  it, adopting recovered records, holding a request's
 *                  prefix and adding fetched pages after it;
 *   - reads:       room in the page pool for records read back, in the
 *                  order load uses it: reserve, plan spares, fill, install.
 *
 * A tier keeps its per-block state in its own area of each block (tier_ops.h
 * blk_bytes, internal.h tier_area); of it the index sees only the flags
 * the tier sets here (sb_host_blk_mark). The tiers still read fields of
 * sb_blk, sb_ns and sb_store (internal.h) and write those of sb_store that
 * are theirs (docs/design.md).
 *
 * Thread safety: functions marked [mu] expect st->mu held (the store of the
 * block or namespace); "unlocked" ones take what they need and must be
 * called without it.
 */
#ifndef SB_HOST_H
#define SB_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snapbank.h"
#include "pool.h"

typedef struct sb_page sb_blk; /* a block (internal.h) */

/* A 128-bit content key (XXH3-128), stored as two little-endian words. */
typedef struct sb_key {
    uint64_t lo, hi;
} sb_key;

static inline bool sb_key_eq(const sb_key *a, const sb_key *b)
{
    return a->lo == b->lo && a->hi == b->hi;
}

/* ---- the store -------------------------------------------------------------- */

/* sb_host_now -- the store clock in nanoseconds (the configured clock hook,
 * or CLOCK_MONOTONIC). Unlocked; takes nothing. */
uint64_t sb_host_now(sb_store *st);

/* sb_host_malloc / sb_host_realloc -- memory from the store's allocator,
 * which counts it and fails the Nth allocation when a test armed it.
 * Owned by the caller, free with sb_host_free (NULL is a no-op). Unlocked.
 * Returns NULL when out of memory (realloc: p is unchanged). */
void *sb_host_malloc(sb_store *st, size_t n);
void *sb_host_realloc(sb_store *st, void *p, size_t n);
void sb_host_free(void *p);

/* sb_host_map -- unlocked: map len bytes rounded up to whole huge pages,
 * 2 MiB aligned, populated, as a pool chunk is: scratch a device writes
 * into. *mapped receives the length mapped (0 on failure); the caller owns
 * the mapping and unmaps it with munmap(p, *mapped). NULL when the system
 * refuses. */
void *sb_host_map(size_t len, size_t *mapped);

/* sb_host_key_chain -- the content key of a page: XXH3-128 of its parent's
 * key and its n tokens (little-endian uint32). Pure; takes nothing. */
sb_key sb_host_key_chain(const sb_key *parent, const uint32_t *tokens, size_t n);

/* ---- namespaces --------------------------------------------------------------- */

/* sb_host_ns_open / sb_host_ns_close -- open and close a handle on a
 * namespace of st, as sb_ns_open and sb_ns_close (snapbank.h) do: a tier
 * recovering the index opens the namespaces its records name. Unlocked.
 * Returns: as sb_ns_open. */
int sb_host_ns_open(sb_store *st, const sb_layout *layout, const void *scope,
                    size_t scope_bytes, sb_ns **out);
void sb_host_ns_close(sb_ns *ns);

/* sb_host_ns_hold -- [mu] keep ns from being freed (a walk that lets go
 * of mu holds the namespaces it collected from); sb_host_ns_unhold lets
 * go of one hold and frees ns when nothing holds it any more (no handle,
 * match, pin or block). */
void sb_host_ns_hold(sb_ns *ns);
void sb_host_ns_unhold(sb_ns *ns);

/* sb_host_ns_maybe_free -- [mu] ns was kept by a block reference the
 * caller just dropped: free it when nothing holds it any more. */
void sb_host_ns_maybe_free(sb_ns *ns);

/* ---- blocks ------------------------------------------------------------------- */

/* sb_host_blk_ref / sb_host_blk_unref -- [mu] take / drop a reference to
 * b. The last one frees b and returns its budget (the index holds one
 * while b is indexed). */
void sb_host_blk_ref(sb_blk *b);
void sb_host_blk_unref(sb_blk *b);

/* sb_host_blk_new_record -- [mu] a block of ns of kind (SB_BLK_PAGE,
 * SB_BLK_POINT) with no data, for a record the tier keeps (recovery); one
 * reference, the caller's. Returns NULL when out of memory. */
sb_blk *sb_host_blk_new_record(sb_ns *ns, int kind);

/* sb_host_blk_alloc -- unlocked: a fresh page of ns (kind SB_BLK_PAGE) or
 * point state, resident and private, counted against the budgets at once
 * (evicting to make room), with one reference, the caller's; for state a
 * tier brings in (a fetch) and then adds (sb_host_index_add).
 * Returns: SB_OK; SB_ERR_BUDGET; SB_ERR_NOMEM (*out NULL). Evictions made
 * to find room stay made. */
int sb_host_blk_alloc(sb_ns *ns, int kind, sb_blk **out);

/* sb_host_blk_data_bytes -- bytes of the data of a block of ns of kind:
 * the page, or a point state padded to the tier's data_align (tier.h).
 * [const fields only] */
size_t sb_host_blk_data_bytes(const sb_ns *ns, int kind);

/* sb_host_blk_leaf -- [mu] b is the last page of a leaf of its tree: the
 * index may evict it without first evicting pages after it. */
bool sb_host_blk_leaf(const sb_blk *b);

/* What the index reads of a block's state in the tier below (sb_blk.below),
 * on its hot paths, without a call: the tier sets them, the index only
 * tests them. 0 (none) until the tier takes the block, and always without
 * a tier. Bit values are internal (not stored on disk). */
enum {
    SB_BELOW_OFFERED = 1 << 0, /* the tier answered an offer of it: it is
                                  queued, kept, or refused (RAM only);
                                  the index offers it no more */
    SB_BELOW_KEPT = 1 << 1,    /* the tier keeps a record of it (with
                                  OFFERED): the index may drop its data
                                  and read it back later */
    SB_BELOW_QUEUED = 1 << 2,  /* (with OFFERED) queued or being written:
                                  the tier holds a reference */
    SB_BELOW_POOLED = 1 << 3,  /* waits in the tier's pool: a use
                                  reorders it there (sb_blk_used) */
    SB_BELOW_CUT = 1 << 4,     /* the tier took its record while it was
                                  resident: it may sit before blocks kept
                                  only below, so eviction may take it
                                  when it is not a leaf page, with every
                                  page after it (sb_tier_drop) */
};

/* sb_host_blk_mark -- [mu] set b's SB_BELOW_* flags in mask to those of
 * bits (the others stay). Only the tier below calls it. */
void sb_host_blk_mark(sb_blk *b, unsigned mask, unsigned bits);

/* sb_host_blk_shared / sb_host_blk_set_shared -- [mu] what the shared
 * tier made of b (SB_SHARED_*, shared.h), and the shared tier's change of
 * it: SB_SHARED_WAITING when its queue had no room for b, SB_SHARED_OFFERED
 * when it offers a waiting b again. Only the shared tier sets it. */
int sb_host_blk_shared(const sb_blk *b);
void sb_host_blk_set_shared(sb_blk *b, int state);

/* sb_host_blk_removed -- [mu] did sb_ns_remove take b out of the index
 * since b's last record written after it (internal.h sb_blk.removed)? A
 * record of b written before that removal's tombstone is dead.
 * sb_host_blk_fresh -- [mu] a record of b was written after every
 * tombstone placed so far: b->removed clears. Only the tier below calls
 * it. */
bool sb_host_blk_removed(const sb_blk *b);
void sb_host_blk_fresh(sb_blk *b);

/* sb_host_blk_evictable -- [mu] indexed block b may be evicted now (it was
 * written, or a cut left it first on its path): it joins the eviction
 * candidates where it is not one already. */
void sb_host_blk_evictable(sb_blk *b);

/* ---- the index ---------------------------------------------------------------- */

/* sb_host_index_parent -- [mu] the block indexed block b's record chains
 * from: for a page, the page of the region before it; for a point state,
 * the last full page before it on its path. NULL for the first (the
 * namespace's root key). */
sb_blk *sb_host_index_parent(const sb_blk *b);

/* sb_host_index_tokens -- [mu] copy the tokens at depths [from, to) of
 * indexed block b's path (to at most b's end depth) into out (to - from
 * entries, the caller's). */
void sb_host_index_tokens(const sb_blk *b, uint32_t from, uint32_t to, uint32_t *out);

/* sb_host_index_reaches -- [mu] does some sequence through block b reach
 * min tokens? True for a block not indexed, and for a subtree too bushy
 * to search (over 64 branches pending). */
bool sb_host_index_reaches(const sb_blk *b, uint32_t min);

/* sb_host_index_visit -- [mu] call fn on every block ns indexes, depth
 * first, each node's pages in order and then its point state, so a block
 * comes after every block before it on its path. fn must not change the
 * index.
 * Returns: SB_OK; SB_ERR_NOMEM (no room for the walk's stack: some blocks
 * were not visited). */
int sb_host_index_visit(sb_ns *ns, void (*fn)(void *ctx, sb_blk *b), void *ctx);

/* sb_host_index_cut -- [mu] remove b from the index with every page and
 * point state that depends on it: a point state alone; a page with every
 * page after it on every path through it, leaf pages one at a time,
 * deepest first, each passed to gone(ctx, page) (may be NULL) just before
 * it goes (b last; point states on the way go with the pages they sit
 * on, unreported). The page before b becomes an eviction candidate if it
 * is a leaf page now. Nothing when b is not indexed. The caller holds a
 * reference to b besides the index's. */
void sb_host_index_cut(sb_ns *ns, sb_blk *b, void (*gone)(void *ctx, sb_blk *page),
                       void *ctx);

/* sb_host_index_prefix -- [mu] how many leading tokens of tokens[0, n)
 * the index of ns holds. */
size_t sb_host_index_prefix(sb_ns *ns, const uint32_t *tokens, size_t n);

/* sb_host_index_adopt -- [mu] index tokens[0, n) of ns with pages[] (NULL
 * where the index holds the page already) and point (may be NULL): blocks
 * the tier made for its records (sb_host_blk_new_record) join the index
 * as a copy-mode commit would add them (recovery). Blocks the index
 * already holds stay; the index takes its own reference on each one it
 * adds (the caller keeps and drops its own).
 * Returns: SB_OK; SB_ERR_INVAL; SB_ERR_PAGE_STATE; SB_ERR_RANGE (no page
 * for a region the index lacks); SB_ERR_NOMEM. On failure nothing
 * changed. */
int sb_host_index_adopt(sb_ns *ns, const uint32_t *tokens, size_t n, sb_blk **pages,
                        sb_blk *point);

/* ---- reads: room for records read back into pages ------------------------------ *
 *
 * A load of k blocks without data: under mu, sb_host_read_reserve for each
 * (budget, and a spare buffer when the pool has one), then
 * sb_host_read_plan for those that got none; unlocked, sb_host_read_fill
 * maps the chunks; under mu again, sb_host_read_install gives each block
 * its buffer (or sb_host_read_unreserve gives it back). */

/* sb_host_read_reserve -- [mu] take the budget for the data of one block
 * of ns of kind (evicting if needed, spares first), and a spare buffer
 * when the pool has one (buf->data NULL when not). May wait for an
 * eviction (mu released meanwhile): look at the block again after.
 * Returns: SB_OK; SB_ERR_BUDGET (nothing reserved, *buf empty). */
int sb_host_read_reserve(sb_ns *ns, int kind, sb_pbuf *buf);

/* sb_host_read_unreserve -- [mu] give back one reservation of
 * sb_host_read_reserve and its buffer, if it got one (the buffer goes
 * back to the pool as a spare). */
void sb_host_read_unreserve(sb_ns *ns, int kind, sb_pbuf buf);

/* sb_host_read_plan -- [mu] need reservations of ns's kind got no buffer:
 * reserve, in transit, the extra spares the next chunk should carry (as
 * many as the budgets have room for without evicting). Returns how many;
 * pass it to sb_host_read_fill, or give them back with
 * sb_host_read_plan_cancel. */
size_t sb_host_read_plan(sb_ns *ns, int kind, size_t need);
void sb_host_read_plan_cancel(sb_ns *ns, int kind, size_t extra);

/* sb_host_read_fill -- unlocked (takes mu to publish): map chunks for
 * bufs[0, need) plus extra spares (sb_host_read_plan's), which join the
 * pool.
 * Returns: SB_OK; SB_ERR_NOMEM (bufs untouched, the extra spares given
 * back; the callers' own reservations stay theirs to give back). */
int sb_host_read_fill(sb_ns *ns, int kind, sb_pbuf *bufs, size_t need, size_t extra);

/* sb_host_read_install -- [mu] give block b (no data) the buffer buf,
 * reserved with sb_host_read_reserve and read into; a block that gained
 * data meanwhile keeps its own and buf goes back with its reservation. A
 * clean, indexed block becomes an eviction candidate. */
void sb_host_read_install(sb_blk *b, sb_pbuf buf);

/* sb_host_index_hold -- [mu] walk the index of ns for tokens[0, n) (n a
 * multiple of page_tokens) and take a reference on each page of the
 * longest run of whole pages it holds from the first: pages[0, r) (the
 * caller's references, dropped with sb_host_blk_unref), so they stay while
 * the caller works unlocked. *parent receives the content key a page after
 * them chains from (page r-1's, or the namespace's root key). Counts as a
 * use of the index (the clock that orders eviction moves).
 * Returns: r. */
size_t sb_host_index_hold(sb_ns *ns, const uint32_t *tokens, size_t n, sb_blk **pages,
                          sb_key *parent);

/* sb_host_index_add -- [mu] index tokens[0, n) (n a multiple of
 * page_tokens) with pages[], as a copy-mode commit would (the index takes
 * its own reference on each page it adds; new pages are offered to the
 * tier below like any commit's), where pages [from, n / page_tokens) are
 * fresh pages a tier filled from the shared pool (sb_host_blk_alloc): they
 * are marked as come from the pool, so they are never offered back to it.
 * pages[0, from) are the index's own (sb_host_index_hold). Counts as a use
 * of the index.
 * Returns: SB_OK; SB_ERR_NOMEM (nothing changed); SB_ERR_RANGE,
 * SB_ERR_PAGE_STATE (the held prefix left the index meanwhile: nothing
 * added). */
int sb_host_index_add(sb_ns *ns, const uint32_t *tokens, size_t n, sb_blk **pages,
                      size_t from);

#endif /* SB_HOST_H */
