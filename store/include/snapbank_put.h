/* snapbank_put.h -- copy mode, storing: block tables over an engine's own
 * memory, puts from contiguous buffers or from a paged pool, and layered
 * puts (a layer at a time).
 *
 * One part of libsnapbank's public API. snapbank.h is the manual (its
 * first pages: concepts, page layout, ownership, thread safety, budgets)
 * and includes every part. */
#ifndef SNAPBANK_PUT_H
#define SNAPBANK_PUT_H

#include "snapbank_store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ============================================================================
 * Copy mode
 * ========================================================================== */

/* Where one tensor's token slices are in an engine's own memory, for the
 * scatter/gather transfers (sb_match_restore_blocks, sb_ns_put_blocks).
 * Position p of the sequence (its p-th token, p >= first_pos; q = p -
 * first_pos) lives at
 *
 *     base + block_ids[q / block_tokens] * block_stride
 *          + (q % block_tokens) * token_stride
 *
 * (block_ids NULL: block i is block_ids[i] = i), bytes_per_token[t]
 * contiguous bytes there. So a paged pool is one table per tensor: vLLM's
 * block table (block_tokens the block size, block_stride the bytes of a
 * block in that layer's K or V cache, token_stride one token's row);
 * SGLang's host indices or llama.cpp's cells (block_tokens 1, block_ids
 * the slot of each position, block_stride one row). block_tokens 0 is one
 * contiguous buffer: position p at base + q * token_stride. token_stride 0
 * means bytes_per_token[t] (rows packed). A layout where one token's slice
 * is not contiguous (heads outermost within a block, llama.cpp's
 * transposed V) is a table per head: declare each head a tensor of the
 * namespace. The memory is the caller's; a put only reads it. */
typedef struct sb_block_table {
    void *base;                 /* the pool (or buffer) of this tensor */
    const uint32_t *block_ids;  /* block of each run of block_tokens
                                   positions, from first_pos; NULL: 0, 1, ... */
    uint64_t first_pos;         /* the position the table starts at */
    uint32_t block_tokens;      /* positions per block; 0: one buffer */
    size_t block_stride;        /* bytes between block i and block i + 1 */
    size_t token_stride;        /* bytes between positions in a block; 0:
                                   bytes_per_token */
} sb_block_table;

/* sb_ns_put_ex -- store the state of tokens[0, n_tokens) from caller
 * buffers, and say what became of it on the disk tier.
 *
 * tensors[t] points at n_tokens * bytes_per_token[t] bytes: the slice of
 * token i of tensor t at tensors[t] + i * bytes_per_token[t]. point, when
 * not NULL, is the point state at position n_tokens (point_bytes long); it is
 * an error to pass one for a layout without point states. Pages the index
 * already holds for a prefix of tokens are kept, not copied again. All
 * buffers are read during the call only.
 *
 * When the RAM budgets cannot hold every new page (everything else is pinned),
 * the longest prefix whose pages fit is stored. *n_stored (when not NULL)
 * receives, on SB_OK and SB_ERR_BUDGET, the length of the prefix of tokens
 * that is restorable from the index when the call returns, point-state
 * requirements aside (n_tokens on SB_OK); 0 on other errors.
 *
 * With a disk tier the new pages (and the point) are offered to it as the
 * write mode says; under SB_DURABILITY_COMMIT the call waits until they
 * are written and synced. What the tier does not write stays in RAM: that
 * is an outcome, not an error. *out (when not NULL) receives, on SB_OK and
 * SB_ERR_BUDGET, the outcome for the state of the *n_stored tokens (and
 * the point when it was stored; ticket 0 when *n_stored is 0); zeroes on
 * other errors. Thread-safe.
 *
 * Returns: SB_OK (everything restorable, the point stored; on disk or not,
 * as *out says); SB_ERR_BUDGET (the budgets could not hold every new page
 * or the point state: *n_stored tokens are restorable -- fewer than
 * n_tokens, or all of them when only the point was refused -- and the
 * point, if any, was not stored; nothing else changed); SB_ERR_INVAL
 * (NULL ns, tokens or tensors, a NULL tensor pointer, a point for a layout
 * without points); SB_ERR_NO_TOKENS; SB_ERR_TOO_MANY_TOKENS; SB_ERR_NOMEM
 * (nothing stored, except that a put larger than the disk tier's backlog,
 * which streams out a chunk at a time, keeps the chunks it committed
 * before: *n_stored is 0 all the same, and a match finds them). Write and
 * sync failures of the disk tier are never returned: they show in *out
 * (denied, SB_DENY_ERROR) and in the ticket. */
SB_API int sb_ns_put_ex(sb_ns *ns, const uint32_t *tokens, size_t n_tokens,
                        const void *const *tensors, const void *point,
                        size_t *n_stored, sb_write_outcome *out);

/* sb_ns_put -- sb_ns_put_ex without the outcome (out NULL): the same
 * effects and the same returns. SB_OK does not say the state reached the
 * disk tier: ask sb_ns_put_ex for that. */
SB_API int sb_ns_put(sb_ns *ns, const uint32_t *tokens, size_t n_tokens,
                     const void *const *tensors, const void *point,
                     size_t *n_stored);

/* sb_ns_put_blocks -- sb_ns_put_ex from the engine's own memory: src has
 * one table per tensor (see sb_block_table), and names only positions
 * [from, n_tokens). The index must already hold tokens[0, from) (a
 * previous put or commit of this prefix: a chat's earlier turns); their
 * pages are kept, and when from falls inside a page the bank's page gives
 * the positions before it (read from disk if it is there only). So a turn
 * that grew the sequence puts only its new tokens, gathered from the
 * engine's block table with one copy and no staging buffer. Pages, point,
 * budgets, durability, *n_stored and *out as sb_ns_put_ex.
 * Returns: as sb_ns_put_ex, and SB_ERR_RANGE (from > n_tokens, a table
 * whose first_pos is after from, or the index holds fewer than from tokens
 * of the sequence: nothing stored, *n_stored receives how many it holds, so
 * a caller can put again from there); SB_ERR_INVAL also for a NULL src or
 * base or a token_stride below the tensor's bytes per token;
 * SB_ERR_CORRUPT, SB_ERR_IO (the page holding the positions before from
 * failed to read: it left the index; nothing stored, *n_stored 0);
 * SB_ERR_BUDGET also when there was no RAM to read that page (nothing
 * stored, *n_stored 0). */
SB_API int sb_ns_put_blocks(sb_ns *ns, const uint32_t *tokens, size_t n_tokens, size_t from,
                            const sb_block_table *src, const void *point, size_t *n_stored,
                            sb_write_outcome *out);

/* A layered put: sb_ns_put_blocks with its tensors given over several calls,
 * as an engine saves each layer's KV when that layer finishes (vLLM's
 * save_kv_layer, then wait_for_save):
 *
 *     sb_put *p;
 *     sb_ns_put_begin(ns, tokens, n, from, &p);     // pages taken
 *     for (each layer l as it finishes)             // its K and V tables
 *         sb_put_tensors(p, 2 * l, 2, &tables[2 * l]);
 *     sb_put_finish(p, NULL, &n_stored, &outcome);  // indexed; p freed
 *
 * Each call gathers its tensors straight into the bank's pages (one copy,
 * no staging buffer); nothing is visible to a match until sb_put_finish,
 * which indexes the pages exactly as sb_ns_put_blocks would with the same
 * tables, and its bytes are the same. Owned by the caller from
 * sb_ns_put_begin until sb_put_finish or sb_put_abort, which free it;
 * one put is used by one thread at a time, and several puts, on one
 * namespace or several, may be in flight from different threads. A put
 * keeps its namespace: sb_ns_close may come before its end. Finish or
 * abort every put before sb_store_close. */
typedef struct sb_put sb_put;

/* sb_ns_put_begin -- start a layered put of the state of
 * tokens[0, n_tokens), of which the engine gives positions [from,
 * n_tokens) (sb_put_tensors); the index must already hold tokens[0, from),
 * as for sb_ns_put_blocks. The tokens are copied (read during the call
 * only).
 *
 * The put takes now, and holds until it ends, everything it needs: a pin
 * on each page the index holds for a prefix of tokens (those pages are
 * not evicted while the put is in flight), the page holding the positions
 * of from's page before from (read from disk if it is there only, its
 * bytes copied into the put's page now), and RAM for a new page for each
 * further page of the sequence, against the budgets like any page. When
 * the budgets cannot hold every new page (everything else pinned), it
 * takes the pages of the longest prefix that fit and still returns SB_OK:
 * sb_put_tensors fills those, and sb_put_finish stores that prefix and
 * returns SB_ERR_BUDGET, as sb_ns_put_blocks would. Unlike
 * sb_ns_put_blocks, a put larger than the disk tier's backlog does not
 * stream out a page chunk at a time: all its pages stay in RAM until
 * sb_put_finish offers them together.
 *
 * What the index does meanwhile: another put or commit that stores some
 * of these tokens before sb_put_finish wins: finish keeps the index's
 * pages for them (this put's copies are dropped), indexes the rest, and
 * reports only what it added (as two sb_ns_put_blocks calls in that order
 * would). A page the index held for a prefix cannot be evicted meanwhile
 * (it is pinned); one that leaves the index otherwise is indexed again by
 * finish from the pin.
 *
 * On success *out is owned by the caller: end it with sb_put_finish or
 * sb_put_abort. Thread-safe.
 * Returns: SB_OK; SB_ERR_INVAL (NULL ns, tokens or out); SB_ERR_NO_TOKENS;
 * SB_ERR_TOO_MANY_TOKENS; SB_ERR_RANGE (from > n_tokens, or the index
 * holds fewer than from tokens of the sequence: sb_ns_lookup says how
 * many); SB_ERR_CORRUPT, SB_ERR_IO (the page holding the positions before
 * from failed to read: it left the index); SB_ERR_BUDGET (no RAM to read
 * that page); SB_ERR_NOMEM. On failure *out is NULL and nothing is held
 * or changed (but a page that failed to read left the index). */
SB_API int sb_ns_put_begin(sb_ns *ns, const uint32_t *tokens, size_t n_tokens, size_t from,
                           sb_put **out);

/* sb_put_tensors -- gather tensors [first_tensor, first_tensor +
 * n_tensors) of positions [from, n_tokens) into the put's pages: src[i]
 * is the table of tensor first_tensor + i (see sb_block_table; its
 * first_pos at most the put's from). The engine's memory is read during
 * the call only. A tensor may be given again: the last call's bytes win
 * (a tensor recomputed, or a table corrected). Not thread-safe on one
 * put: one thread at a time.
 * Returns: SB_OK; SB_ERR_INVAL (NULL p or src, n_tensors 0, tensors past
 * the layout's, a NULL base, a token_stride below the tensor's bytes per
 * token); SB_ERR_RANGE (a table whose first_pos is after from). On failure
 * nothing was copied and the put is as it was. */
SB_API int sb_put_tensors(sb_put *p, uint32_t first_tensor, uint32_t n_tensors,
                          const sb_block_table *src);

/* sb_put_finish -- end a layered put: index its state, and the point
 * state at n_tokens when point is not NULL (point_bytes, read during the
 * call only), exactly as sb_ns_put_blocks with the same tokens, from and
 * tables would: pages, point, budgets, durability, *n_stored and *out as
 * sb_ns_put_ex. The point's RAM is taken now (the pages' at
 * sb_ns_put_begin). p is freed whatever this returns: every page it
 * holds is let go and counts against no budget any more.
 * Returns: SB_OK; SB_ERR_BUDGET (sb_ns_put_begin could not take every
 * page, or there is no RAM for the point: as sb_ns_put_ex, *n_stored
 * tokens restorable, the point not stored); SB_ERR_INCOMPLETE (a tensor
 * was never given: nothing stored); SB_ERR_INVAL (NULL p, nothing done; a
 * point for a layout without points: nothing stored); SB_ERR_NOMEM
 * (nothing stored). On an error other than SB_ERR_BUDGET *n_stored is 0
 * and *out zeroes. */
SB_API int sb_put_finish(sb_put *p, const void *point, size_t *n_stored,
                         sb_write_outcome *out);

/* sb_put_abort -- end a layered put without storing anything: every page
 * it holds is let go (the budgets are as before sb_ns_put_begin, but for
 * pages a read brought into RAM) and p is freed. NULL: a no-op.
 * Thread-safe as sb_put_finish. */
SB_API void sb_put_abort(sb_put *p);

#ifdef __cplusplus
}
#endif

#endif /* SNAPBANK_PUT_H */
