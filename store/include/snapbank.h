/* snapbank.h -- public API of libsnapbank, a key-value store for LLM tensor
 * snapshots keyed by token-ID prefixes.
 *
 * This header is the manual.
 *
 * ============================================================================
 * Introduction
 * ============================================================================
 *
 * An inference engine computes, for every prompt token, per-layer state (the
 * K and V rows of the KV cache, and for hybrid models a recurrent state).
 * snapbank keeps that state keyed by the token IDs that produced it, so the
 * next request that starts with a token sequence the bank has seen can
 * restore the state of that prefix instead of recomputing it.
 *
 *   store      sb_store: one bank. A RAM tier of pages under byte and page
 *              budgets; a disk tier below it when a directory is configured.
 *   namespace  sb_ns: one model identity (a digest of everything that
 *              changes the state bytes) plus one scope (tenant or session).
 *              Nothing is ever shared between two namespaces.
 *   layout     sb_layout: what one token's state is. A list of sequence
 *              tensors, each with a size in bytes per token, and optionally
 *              a point state (recurrent state, last logits) that belongs to
 *              one position and cannot be sliced.
 *   page       sb_page: the state of up to page_tokens consecutive tokens,
 *              one 4 KiB-aligned block holding a slice of every sequence
 *              tensor. Pages are refcounted; a page the bank indexes is
 *              immutable.
 *   match      sb_match: the longest restorable prefix of a request, with
 *              every page it needs pinned until sb_match_release.
 *
 * Two ways to move bytes:
 *
 *   copy mode       sb_ns_put() copies the state of tokens [0, n) from caller
 *                   buffers; sb_match_restore() copies a matched prefix back.
 *   zero-copy mode  a runtime allocates pages from the bank (sb_ns_page_alloc),
 *                   keeps its KV cache in them, commits a token sequence with
 *                   its pages by reference (sb_ns_commit), and maps matched
 *                   pages straight into its page table (sb_match_pages).
 *
 * Page layout. A page of a namespace whose layout has tensors t = 0..T-1 with
 * bpt[t] bytes per token is page_bytes long:
 *
 *     offset 0                   tensor_off[1]              tensor_off[T-1]
 *     +--------------------------+--------------------------+-- ... --+------+
 *     | tensor 0: page_tokens    | tensor 1: page_tokens    |         | zero |
 *     | slices of bpt[0] bytes   | slices of bpt[1] bytes   |         | pad  |
 *     +--------------------------+--------------------------+-- ... --+------+
 *
 * tensor_off[t] = sum over u < t of round_up(page_tokens * bpt[u], 64), and
 * page_bytes is the total rounded up to 4096. Token j of the page (j counted
 * from the page's first token) of tensor t is at tensor_off[t] + j * bpt[t].
 * Page i of a sequence holds tokens [i * page_tokens, (i + 1) * page_tokens);
 * the last page of a sequence may be partial.
 *
 * A short example (copy mode, error handling trimmed):
 *
 *     sb_config cfg;
 *     sb_config_default(&cfg);
 *     cfg.ram_bytes = 1ull << 30;
 *     sb_store *st;
 *     sb_store_open(&cfg, &st);
 *
 *     uint32_t bpt[2] = { 4096, 4096 };          // K and V, bytes per token
 *     sb_layout lay = { .model_id = digest, .model_id_bytes = 32,
 *                       .page_tokens = 16, .n_tensors = 2,
 *                       .bytes_per_token = bpt };
 *     sb_ns *ns;
 *     sb_ns_open(st, &lay, "tenant-a", 8, &ns);
 *     sb_ns_prefault(ns, 4096, NULL);            // buffers faulted in now, not
 *                                                // by the first puts
 *
 *     const void *src[2] = { k_rows, v_rows };   // n * 4096 bytes each
 *     size_t stored;
 *     sb_ns_put(ns, tokens, n, src, NULL, &stored);
 *
 *     sb_match *m;
 *     sb_ns_match(ns, prompt, n_prompt, &m);
 *     sb_match_info info;
 *     sb_match_get_info(m, &info);               // info.n_tokens restorable
 *     void *dst[2] = { k_out, v_out };
 *     sb_match_restore(m, info.n_tokens, dst, NULL);
 *     sb_match_release(m);
 *
 *     sb_ns_close(ns);
 *     sb_store_close(st);
 *
 * With a disk tier (cfg.dir), sequences shorter than cfg.min_prefix_tokens
 * (default 512) stay in RAM only (their write outcome says SB_DENY_SHORT):
 * set it to 1 to keep every sequence across a restart.
 *
 * ============================================================================
 * Conventions
 * ============================================================================
 *
 * Errors. Every call that can fail returns int: 0 (SB_OK) on success or a
 * negative value of enum sb_err. errno is never the interface.
 * sb_strerror() names each code. A negative code means the call failed;
 * each call's Returns lists every code it can return and what is true
 * after each, and unless it says otherwise a call that fails has changed
 * nothing. What a call did that is not a failure is a result, not a code:
 * a put or commit whose state the disk tier did not write (denied, or a
 * write error) returns SB_OK, its state in RAM, and says so in its
 * sb_write_outcome (sb_ns_put_ex, sb_ns_commit_ex). Two codes report part
 * of a call done, each stating exactly what: SB_ERR_BUDGET from a put (a
 * prefix stored), SB_ERR_CORRUPT and SB_ERR_IO from a restore (the match
 * shrank to what could be read).
 *
 * Ownership. "Owned by the caller" means the caller frees it with the named
 * function. "Borrowed until X" means valid until X is called. sb_*_close(NULL),
 * sb_*_release(NULL) and sb_page_unref(NULL) are no-ops.
 *
 * Thread safety. A store and every handle derived from it may be used from
 * several threads at once: put, commit, match, restore, pin and stats may run
 * concurrently on the same or different namespaces. Index and budget state
 * is guarded by one mutex per store, held only for index work (walking and
 * linking the radix tree, refcounts, eviction); the bulk byte copies of
 * put, restore and copy-on-write run outside it. The one exception is
 * sb_store_close, which must not race with any other call on that store.
 * A page returned by sb_ns_page_alloc is private to the caller until it is
 * committed; writing it from several threads is the caller's business.
 *
 * Budgets. Every page and point state allocated from the bank's pool counts
 * against the store's RAM budgets (ram_bytes, ram_pages) and its namespace's
 * budget (ns_ram_bytes) for as long as anyone holds it: the index, a match,
 * a pin or a runtime. When an allocation would exceed a budget the bank
 * evicts unpinned pages, least recently used first and leaves of the radix
 * tree first, so what stays restorable is always prefix-closed; a page held
 * by anyone but the index is never evicted. When evicting every page held by
 * the index alone still would not make room, the allocation fails with
 * SB_ERR_BUDGET before evicting anything. (A caller that holds a deep page
 * but releases the pages before it -- matches and pins never do -- can make
 * pages evictable by count that the tree order still protects; then a
 * refusal may come after some evictions.)
 */
#ifndef SNAPBANK_H
#define SNAPBANK_H

/* The API in parts, each a header of its own (each includes the parts it
 * needs, so any one of them may be included alone):
 *
 *   snapbank_store.h     version, errors, the store and its configuration
 *                        and counters, durability of one call, namespaces
 *   snapbank_put.h       copy mode, storing: block tables, puts, layered puts
 *   snapbank_match.h     copy mode, finding and restoring: matches, lookups,
 *                        restores, loads, asynchronous loads
 *   snapbank_shared.h    the shared tier
 *   snapbank_zerocopy.h  zero-copy mode: pages
 *   snapbank_prefix.h    pins, removal, the index dump
 */
#include "snapbank_store.h"
#include "snapbank_put.h"
#include "snapbank_match.h"
#include "snapbank_shared.h"
#include "snapbank_zerocopy.h"
#include "snapbank_prefix.h"

#endif /* SNAPBANK_H */
