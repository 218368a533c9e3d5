/* snapbank_zerocopy.h -- zero-copy mode: pages a runtime allocates from the
 * bank, writes, commits by reference and maps back from a match.
 *
 * One part of libsnapbank's public API. snapbank.h is the manual (its
 * first pages: concepts, page layout, ownership, thread safety, budgets)
 * and includes every part. */
#ifndef SNAPBANK_ZEROCOPY_H
#define SNAPBANK_ZEROCOPY_H

#include "snapbank_match.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ============================================================================
 * Zero-copy mode
 * ========================================================================== */

typedef struct sb_page sb_page;

/* sb_ns_page_alloc -- take a fresh page from the bank's pool.
 *
 * The page is page_bytes long (see sb_ns_get_info), 4096-aligned, private
 * and writable, with unspecified contents. It counts against the budgets
 * at once (evicting unpinned pages if needed).
 * On success *out is owned by the caller: one reference, dropped with
 * sb_page_unref() (or kept after sb_ns_commit, which takes its own); on
 * failure *out is NULL (when out is not NULL).
 * Returns: SB_OK; SB_ERR_INVAL (NULL argument); SB_ERR_BUDGET (the budgets
 * are full of pinned pages: pages evicted to look for room stay evicted,
 * see Budgets); SB_ERR_NOMEM. */
SB_API int sb_ns_page_alloc(sb_ns *ns, sb_page **out);

/* sb_ns_prefault -- have page buffers of ns's size ready in the bank's
 * pool before they are needed, as an inference engine allocates its KV
 * cache when it starts: up to n_pages of them, mapped and faulted in, so
 * that the pages a later restore reads into, or sb_ns_page_alloc hands
 * out, cost no page faults then.
 *
 * They are spares: they count against the budgets (sb_config.ram_bytes
 * and ram_pages; stats.pool_spare_bytes and pool_spare_pages, not
 * stats.ram_bytes) and are the first memory the bank gives back
 * when blocks need room. Spares the pool already holds count towards
 * n_pages; nothing is evicted to make more: with the budgets full, fewer
 * (or none) are made. Spares of a page size are shared by every namespace
 * of that size.
 * With a disk tier, the scratch a restore of n_pages pages reads their
 * record heads into is made ready too (best effort, outside the budgets:
 * 4 KiB a page, at most 8 MiB per bank).
 * *n_ready (may be NULL) receives how many spare pages of ns's size the
 * pool holds on return.
 * Returns: SB_OK (also when the budgets allowed fewer than n_pages);
 * SB_ERR_INVAL (NULL ns); SB_ERR_NOMEM (the system refused the memory:
 * no spare was made by this call). */
SB_API int sb_ns_prefault(sb_ns *ns, size_t n_pages, size_t *n_ready);

/* sb_page_data -- the page's bytes. Borrowed while the caller holds a
 * reference. A page the bank indexes (committed) must not be written: use
 * sb_page_writable() first.
 * Returns: the data pointer, or NULL for NULL. */
SB_API void *sb_page_data(sb_page *p);

/* sb_page_tokens -- how many leading token slices of the page are committed
 * state (0 for a fresh page). Returns: the count; 0 for NULL. */
SB_API uint32_t sb_page_tokens(const sb_page *p);

/* sb_page_ref -- take another reference. Returns: p (NULL for NULL). */
SB_API sb_page *sb_page_ref(sb_page *p);

/* sb_page_unref -- drop a reference; the page is freed with the last one.
 * NULL is a no-op. */
SB_API void sb_page_unref(sb_page *p);

/* sb_page_writable -- make *page safe to write (copy on write).
 *
 * A fresh page the caller alone holds is left as is. Otherwise (the page is
 * committed or shared) *page is replaced by a fresh private page holding a
 * copy of the first n_keep token slices of every tensor, and the caller's
 * reference to the old page is dropped. Runtimes call this before writing
 * into a partial tail page they committed or obtained from a match.
 *
 * Returns: SB_OK; SB_ERR_INVAL (NULL argument, n_keep > page_tokens,
 * n_keep > the tokens the page holds when it is committed);
 * SB_ERR_FOREIGN_PAGE (a page of another namespace, or a point state);
 * SB_ERR_BUDGET; SB_ERR_NOMEM. On failure *page is unchanged and the
 * caller keeps its reference. */
SB_API int sb_page_writable(sb_ns *ns, sb_page **page, uint32_t n_keep);

/* sb_ns_commit -- index tokens[0, n_tokens) with the caller's pages.
 *
 * pages has ceil(n_tokens / page_tokens) entries: pages[i] holds the state
 * of tokens [i * page_tokens, min(n_tokens, (i + 1) * page_tokens)). The
 * index takes its own reference to every page it keeps; the caller keeps
 * its references. A page for a prefix the index already holds is
 * deduplicated: pages[i] is replaced by the index's page covering the same
 * tokens (for a partial last page it may hold more tokens after them), the
 * caller's reference moving to it (the reference to the caller's page is
 * dropped) -- except when that page is on disk only and holds more tokens
 * than the caller's: the caller then keeps its own page, still private.
 * Committed pages are immutable. point, when not NULL, is copied
 * as the point state at n_tokens.
 *
 * With a disk tier the new pages (and the point) are offered to it as the
 * write mode says; under SB_DURABILITY_COMMIT the call waits until they
 * are written and synced (see sb_ns_put_ex: what the tier does not write
 * is an outcome, not an error). Thread-safe (pages aside: see
 * Conventions).
 *
 * Returns: SB_OK (the tokens are restorable, on disk or not as the
 * outcome of sb_ns_commit_ex says); SB_ERR_INVAL (NULL argument or page,
 * one page given for two regions, a point for a layout without points);
 * SB_ERR_NO_TOKENS; SB_ERR_TOO_MANY_TOKENS;
 * SB_ERR_FOREIGN_PAGE (a page of another namespace); SB_ERR_PAGE_STATE (a
 * committed page given for tokens other than its own: call
 * sb_page_writable first); SB_ERR_BUDGET, SB_ERR_NOMEM (no room for the
 * point state or index nodes). On failure nothing changed: no page was
 * indexed or replaced. */
SB_API int sb_ns_commit(sb_ns *ns, const uint32_t *tokens, size_t n_tokens,
                        sb_page **pages, const void *point);

/* sb_ns_commit_ex -- sb_ns_commit, and *out (when not NULL) receives what
 * became of the state of tokens[0, n_tokens) (and the point) on the disk
 * tier (sb_write_outcome; zeroes on failure).
 * Returns: as sb_ns_commit. */
SB_API int sb_ns_commit_ex(sb_ns *ns, const uint32_t *tokens, size_t n_tokens,
                           sb_page **pages, const void *point, sb_write_outcome *out);

/* sb_match_pages -- new references to pages [first, first + count) of a
 * match, for a runtime's page table. The last page of a match may hold more
 * tokens than the match covers: make it writable before appending to it.
 * Each out[i] is owned by the caller (sb_page_unref). Pages on disk among
 * pages [0, first + count) are read first, as in sb_match_restore.
 * Returns: SB_OK; SB_ERR_INVAL (NULL argument); SB_ERR_RANGE (beyond
 * n_pages); SB_ERR_CORRUPT, SB_ERR_IO (a page failed: the match shrank,
 * no reference was taken; ask sb_match_get_info and call again with what
 * is left); SB_ERR_BUDGET, SB_ERR_NOMEM (no RAM to read into). */
SB_API int sb_match_pages(sb_match *m, size_t first, size_t count,
                          sb_page **out);

#ifdef __cplusplus
}
#endif

#endif /* SNAPBANK_ZEROCOPY_H */
