/* snapbank_match.h -- copy mode, finding and restoring: matches, batched
 * lookups, restores (contiguous or through block tables, a layer at a time),
 * loads, and asynchronous loads.
 *
 * One part of libsnapbank's public API. snapbank.h is the manual (its
 * first pages: concepts, page layout, ownership, thread safety, budgets)
 * and includes every part. */
#ifndef SNAPBANK_MATCH_H
#define SNAPBANK_MATCH_H

#include "snapbank_put.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sb_match sb_match;

/* sb_ns_match -- find the longest restorable prefix of tokens[0, n_tokens).
 *
 * Restorable: pages cover [0, L) and, when the layout has
 * SB_LAYOUT_POINT_REQUIRED, a point state is recorded at exactly L. L may
 * be 0. Every page covering [0, L) (and the point state at L) is pinned by
 * the returned handle: nothing it holds is evicted or changed until
 * sb_match_release(). The walk compares token IDs, never only hashes, so a
 * hash collision cannot restore wrong state. Counts toward the store stats.
 * tokens is read during the call only.
 *
 * On success *out is owned by the caller: release it with sb_match_release().
 * Returns: SB_OK; SB_ERR_INVAL (NULL argument); SB_ERR_NO_TOKENS;
 * SB_ERR_TOO_MANY_TOKENS; SB_ERR_NOMEM. On failure *out is NULL. */
SB_API int sb_ns_match(sb_ns *ns, const uint32_t *tokens, size_t n_tokens,
                       sb_match **out);

/* What a match found. */
typedef struct sb_match_info {
    size_t n_tokens;          /* L: restorable prefix length */
    size_t n_pages;           /* ceil(L / page_tokens) pages cover it */
    size_t n_pages_ram;       /* ...of which in RAM */
    size_t n_pages_disk;      /* ...of which on disk (zero while RAM only) */
    size_t n_matched_tokens;  /* tokens the index matched before the
                                 point-state rule; >= n_tokens */
    int has_point;            /* a point state at L is pinned */
    sb_miss miss;             /* why L < the request length (SB_MISS_NONE if equal) */
} sb_match_info;

/* sb_match_get_info -- describe a match. Returns: SB_OK; SB_ERR_INVAL. */
SB_API int sb_match_get_info(const sb_match *m, sb_match_info *out);

/* One request of a batched lookup (sb_ns_lookup). */
typedef struct sb_lookup {
    const uint32_t *tokens;   /* in: the request's token IDs (read during
                                 the call only) */
    size_t n_tokens;          /* in: how many */
    sb_match_info info;       /* out: what sb_ns_match would find now */
} sb_lookup;

/* sb_ns_lookup -- how much of each of n requests the bank holds, without
 * pinning: reqs[i].info receives what sb_ns_match(reqs[i].tokens) would
 * find at the moment of the call (the restorable prefix L, its pages in
 * RAM and on disk, the point state, the miss reason), every request
 * answered under one hold of the store's lock, so the answers agree with
 * one another. Nothing is pinned or read from disk, the pages' eviction
 * order is unchanged (a lookup is not a use), and the match statistics
 * (lookups, hits, misses) do not move. An answer is a snapshot: pages may
 * be evicted or written before a later sb_ns_match, which is the call that
 * holds them. The pages a request shares with the shared tier are not
 * asked for (sb_ns_fetch_shared). The lock is held for one index walk per
 * request (a fraction of a nanosecond per token: bench_index).
 * Returns: SB_OK (every info written); SB_ERR_INVAL (NULL ns, NULL reqs
 * with n > 0, NULL tokens); SB_ERR_NO_TOKENS (a request of zero tokens);
 * SB_ERR_TOO_MANY_TOKENS; SB_ERR_NOMEM. On failure no info was written.
 * n == 0 is SB_OK. */
SB_API int sb_ns_lookup(sb_ns *ns, sb_lookup *reqs, size_t n);

/* sb_match_restore -- copy the state of tokens [0, n_tokens) of the match
 * into caller buffers laid out as in sb_ns_put (tensors[t] receives
 * n_tokens * bytes_per_token[t] bytes). n_tokens may be less than the
 * match's L. point, when not NULL, receives the point state at L; it needs
 * n_tokens == L and a match that has one.
 *
 * Pages on disk (sb_match_info.n_pages_disk) are read first, all in flight
 * together, each record's checksums verified; they then stay in RAM as
 * clean pages. A page that fails is removed from the index with every page
 * after it on its path, and the match shrinks to the valid prefix before it:
 * the call restores that prefix and returns SB_ERR_CORRUPT or SB_ERR_IO,
 * and sb_match_get_info then gives the new L (miss SB_MISS_CORRUPT or
 * SB_MISS_IO). Bytes past it in the buffers are unspecified; no wrong
 * state is ever restored. When only the point state fails to read, it is
 * dropped: a layout that requires point states loses the whole match
 * (L = 0); otherwise L stands, the tensors are restored, has_point turns 0,
 * point is left unwritten and the call still returns the error.
 *
 * Returns: SB_OK; SB_ERR_INVAL (NULL m or tensors, a NULL tensor pointer);
 * SB_ERR_RANGE (n_tokens > L); SB_ERR_NO_POINT (point asked and the match
 * has none at n_tokens); SB_ERR_CORRUPT, SB_ERR_IO (the match shrank, see
 * above); SB_ERR_BUDGET, SB_ERR_NOMEM (no RAM to read disk pages into:
 * nothing restored, the match unchanged). On failure the buffers may be
 * partly written. */
SB_API int sb_match_restore(sb_match *m, size_t n_tokens,
                            void *const *tensors, void *point);


/* sb_match_restore_blocks -- copy the state of positions [from, from +
 * n_tokens) of tensors [first_tensor, first_tensor + n_tensors) of the
 * match straight into the engine's memory: dst[i] places tensor
 * first_tensor + i (see sb_block_table). One copy, no staging buffer.
 * Only the pages covering the range are read from disk (all in flight
 * together; each copied out as its record is checked), so a restore can go
 * a layer (its K and V tensors) at a time, or a range at a time: the match
 * keeps its pages pinned until sb_match_release, whatever was taken. A
 * page that fails shrinks the match as in sb_match_restore (the range's
 * valid part is copied, the call returns the error).
 * Returns: SB_OK (also for n_tokens 0); SB_ERR_INVAL (NULL m or dst, a
 * NULL base, a token_stride below the tensor's bytes per token, tensors out
 * of range or n_tensors 0); SB_ERR_RANGE (from + n_tokens > L, or a table
 * whose first_pos is after from); SB_ERR_CORRUPT, SB_ERR_IO (the match
 * shrank); SB_ERR_BUDGET, SB_ERR_NOMEM (no RAM to read disk pages into:
 * nothing copied from them, the match unchanged). */
SB_API int sb_match_restore_blocks(sb_match *m, size_t from, size_t n_tokens,
                                   uint32_t first_tensor, uint32_t n_tensors,
                                   const sb_block_table *dst);

/* sb_match_point -- the point state at L, borrowed until sb_match_release().
 * A point state on disk is read first (the match shrinks as in
 * sb_match_restore when it fails).
 * Returns: a pointer to point_bytes bytes, or NULL when the match has none
 * or it could not be read. */
SB_API const void *sb_match_point(const sb_match *m);

/* sb_match_load -- make pages [0, n_pages) of the match resident and, with
 * point nonzero, its point state too, reading whatever is on disk with
 * every read in flight at once (the point state's record usually follows
 * the last page's, and is read with it). sb_match_restore, sb_match_pages
 * and sb_match_point read what they need themselves; this call lets a
 * caller that will want both the pages and the point state have them read
 * together. A failed read shrinks the match as in sb_match_restore.
 * Returns: SB_OK; SB_ERR_INVAL (NULL m); SB_ERR_RANGE (n_pages beyond the
 * match's pages); SB_ERR_NO_POINT (point asked with fewer than all the
 * match's pages, or the match has none); SB_ERR_CORRUPT, SB_ERR_IO (the
 * match shrank: what it still holds is resident); SB_ERR_BUDGET,
 * SB_ERR_NOMEM (no RAM to read into: the match unchanged, some of the
 * pages may be resident). */
SB_API int sb_match_load(sb_match *m, size_t n_pages, int point);

/* ---- asynchronous loads ------------------------------------------------------
 *
 * An engine that wants a match's disk pages read while it does other work
 * (schedules, computes other requests, restores the first layers) starts a
 * load and learns of its progress by polling, by waiting with a timeout
 * for a prefix of the pages or the whole, or through a file descriptor its
 * event loop watches. The reads run on the store's loader threads (two,
 * started by the first load), in runs of pages (at most 64 pages or 8 MiB
 * at a time, every read of a run in flight together), so pages [0, k)
 * become resident, and usable, while the pages after them are still read.
 * A failure shrinks the match exactly as the blocking sb_match_load does.
 *
 *     sb_load *ld;
 *     sb_match_load_start(m, info.n_pages, 0, &ld);
 *     ...                                   // other work
 *     size_t ready;
 *     int rc = sb_load_wait(ld, k, -1, &ready);   // pages [0, k) resident?
 *     if (rc == SB_OK)
 *         sb_match_restore_blocks(m, 0, k * page_tokens, 0, n_tensors, pool);
 *     ...
 *     sb_load_free(ld);                     // before sb_match_release
 *
 * While a load runs, the match's calls that need only pages [0, ready)
 * (sb_match_restore and sb_match_restore_blocks of tokens inside them, no
 * point state; sb_match_pages of them) work alongside it; a call that needs
 * more, or the point state, returns SB_ERR_BUSY (sb_match_point returns
 * NULL); sb_match_get_info always answers. Once the load is done, the
 * match is as after sb_match_load. */

typedef struct sb_load sb_load;

/* sb_match_load_start -- start making pages [0, n_pages) of the match and,
 * with point nonzero, its point state resident, as sb_match_load does,
 * without waiting. Pages already resident count at once; a RAM-only store,
 * or a match with nothing on disk, gives a load that is already done.
 * On success *out is owned by the caller: free it with sb_load_free,
 * before sb_match_release (which otherwise cancels the load, waits for its
 * reads and leaves the handle only to be freed). One load at a time per
 * match.
 * Returns: SB_OK (started: the outcome comes from poll or wait);
 * SB_ERR_INVAL (NULL m or out); SB_ERR_RANGE (n_pages beyond the match's
 * pages); SB_ERR_NO_POINT (as sb_match_load); SB_ERR_BUSY (a load of this
 * match is running); SB_ERR_NOMEM (no memory or no loader thread: nothing
 * started). On failure *out is NULL. */
SB_API int sb_match_load_start(sb_match *m, size_t n_pages, int point, sb_load **out);

/* sb_load_poll -- how far the load is, without blocking. *n_ready (may be
 * NULL) receives k: pages [0, k) of the match are resident (and stay so
 * until sb_match_release).
 * Returns: SB_ERR_PENDING (still running); SB_OK (done: every page asked
 * for, and the point state when asked for, is resident); else the load's
 * outcome as sb_match_load's: SB_ERR_CORRUPT, SB_ERR_IO (the match shrank:
 * k is its new page count, all resident), SB_ERR_BUDGET, SB_ERR_NOMEM (no
 * RAM to read into: the match unchanged, k pages resident); or
 * SB_ERR_CANCELED (sb_load_cancel or sb_match_release stopped it: k pages
 * resident, the rest are read by the calls that need them);
 * SB_ERR_INVAL (NULL ld). */
SB_API int sb_load_poll(sb_load *ld, size_t *n_ready);

/* sb_load_wait -- wait until pages [0, n_pages) of the load are resident
 * (n_pages at or past the load's pages, (size_t)-1 for example: until the
 * load is done), until the load ends short of them, or until timeout_ms
 * milliseconds passed (negative: no limit; 0: a poll). *n_ready as in
 * sb_load_poll.
 * Returns: SB_OK (those pages are resident; the load may still be
 * running); SB_ERR_PENDING (the time passed first); the load's outcome as
 * sb_load_poll's when it ended before they were resident; SB_ERR_INVAL. */
SB_API int sb_load_wait(sb_load *ld, size_t n_pages, int64_t timeout_ms, size_t *n_ready);

/* sb_load_fd -- a file descriptor that becomes readable when the load is
 * done (whatever its outcome), for poll(2), epoll or select; it stays
 * readable. Owned by the load: do not read or close it; it is closed by
 * sb_load_free.
 * Returns: the descriptor; SB_ERR_INVAL (NULL ld); SB_ERR_NOMEM (no
 * descriptor could be made: poll or wait instead). */
SB_API int sb_load_fd(sb_load *ld);

/* sb_load_cancel -- ask the load to stop: the runs of reads in flight
 * finish (what they read stays resident), no further run starts, and the
 * load ends SB_ERR_CANCELED unless it had already ended. Returns at once;
 * wait for the end with sb_load_wait. NULL is a no-op. */
SB_API void sb_load_cancel(sb_load *ld);

/* sb_load_free -- cancel the load if it runs, wait for its reads, and free
 * it. The match stays valid with everything it holds. NULL is a no-op. */
SB_API void sb_load_free(sb_load *ld);

/* sb_match_release -- unpin everything the match holds and free it.
 * NULL is a no-op. */
SB_API void sb_match_release(sb_match *m);

#ifdef __cplusplus
}
#endif

#endif /* SNAPBANK_MATCH_H */
