/* snapbank_shared.h -- the shared tier: pages shared across stores through a
 * Redis Cluster, and fetching them (blocking or on a loader thread).
 *
 * One part of libsnapbank's public API. snapbank.h is the manual (its
 * first pages: concepts, page layout, ownership, thread safety, budgets)
 * and includes every part. */
#ifndef SNAPBANK_SHARED_H
#define SNAPBANK_SHARED_H

#include "snapbank_match.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ============================================================================
 * Shared tier
 * ============================================================================
 *
 * A store opened with sb_config.shared_seeds shares full pages with every
 * other store (on this machine or others) configured with the same Redis
 * Cluster. Each page is kept under a key computed from its namespace
 * (model identity and scope) and its content key, so a store finds, from a
 * request's tokens alone, the pages another store published.
 *
 * Publishing. When a commit or put leaves a sequence of at least
 * min_prefix_tokens indexed, its full pages not yet offered are queued
 * for the pool (never blocking the call: a background thread writes them,
 * shallowest first, within shared_publish_bytes_per_s, with SET NX so a
 * page the pool holds costs one probe, not a second upload). A queued
 * page is held (it is not evicted) until it is written or dropped; the
 * queue holds at most a quarter of ram_bytes (and 256 MiB), beyond that an
 * offer is denied (shared_denied). Partial pages and point states are not
 * published: a page from the pool ends a restore at a page boundary, and
 * a namespace whose layout needs point states publishes nothing.
 *
 * Restore order. sb_ns_match finds what RAM and the local disk hold;
 * sb_ns_fetch_shared extends the index with the pages the pool holds
 * past that, which later matches then find like any committed page.
 *
 * What is checked. A fetched value is used only when it is a page record
 * of this namespace, at the position asked, with the content key asked
 * (recomputed over its tokens), holding the request's tokens, with its
 * checksums intact: anything else is a miss, counted (shared_bad_values),
 * never served. The checks do not authenticate the writer: a client that
 * may write the pool's keys can store a well-formed page of wrong state
 * for tokens it knows. Give write access only to trusted nodes (one ACL
 * user per tenant, confined to its key pattern sb1:<scope tag>:*).
 */

/* sb_ns_fetch_shared -- extend the index with pages of tokens[0, n_tokens)
 * from the shared tier.
 *
 * The index (RAM and disk) is walked for the request: past its last full
 * page that covers a prefix of the request, the keys of the request's
 * following full pages are computed and probed in the pool (one pipelined
 * EXISTS); the run of pages it holds is fetched (one pipelined GET),
 * every value checked (see "Shared tier"), and the good run is indexed as
 * if committed (they count against the RAM budgets, may go to the disk
 * tier and are evicted like any page; they are not offered to the pool
 * again). A layout that needs point states (SB_LAYOUT_POINT_REQUIRED)
 * cannot restore from pages alone and is refused. tokens is read during
 * the call only. *n_added (may be NULL) receives the tokens added to the
 * restorable prefix (a multiple of page_tokens; 0 on every error).
 * Thread-safe; it waits at most about twice shared_timeout_ms on the
 * network.
 *
 * Returns: SB_OK (what the pool held past the index, possibly nothing, is
 * indexed); SB_ERR_CORRUPT (a value failed its checks: the good pages
 * before it are indexed, *n_added says how many tokens; the bad one is
 * counted); SB_ERR_IO (no node answered in time -- the cluster is down,
 * hung or unreachable: what came before is indexed, as above; the call
 * can be retried and the tier reconnects by itself); SB_ERR_BUDGET (no
 * RAM for the pages: those that fit are indexed, as above);
 * SB_ERR_UNSUPPORTED (the store has no shared tier, or the layout needs
 * point states: nothing changed); SB_ERR_INVAL (NULL ns);
 * SB_ERR_NO_TOKENS; SB_ERR_TOO_MANY_TOKENS; SB_ERR_NOMEM (nothing
 * changed). A page that expired between probe and fetch ends the run
 * without an error. */
SB_API int sb_ns_fetch_shared(sb_ns *ns, const uint32_t *tokens, size_t n_tokens,
                              size_t *n_added);

/* sb_ns_fetch_shared_start -- sb_ns_fetch_shared on one of the store's
 * loader threads (see "asynchronous loads"), returning at once: the load
 * ends with sb_ns_fetch_shared's code, and its n_ready (sb_load_poll,
 * sb_load_wait) is then the tokens added (*n_added), 0 before. A wait
 * for any number of pages waits for the end. A cancel stops a fetch not
 * yet begun (SB_ERR_CANCELED); one under way finishes. tokens is copied;
 * the namespace stays valid for the load even if closed meanwhile.
 * On success *out is owned by the caller (sb_load_free, before
 * sb_store_close).
 * Returns: SB_OK (started); SB_ERR_INVAL (NULL ns, tokens or out);
 * SB_ERR_NO_TOKENS; SB_ERR_TOO_MANY_TOKENS; SB_ERR_UNSUPPORTED (as
 * sb_ns_fetch_shared); SB_ERR_NOMEM (nothing started). On failure *out
 * is NULL. */
SB_API int sb_ns_fetch_shared_start(sb_ns *ns, const uint32_t *tokens, size_t n_tokens,
                                    sb_load **out);

/* sb_store_has_shared -- whether st was opened with a shared tier.
 * Returns: 1 or 0 (0 for NULL). */
SB_API int sb_store_has_shared(const sb_store *st);

#ifdef __cplusplus
}
#endif

#endif /* SNAPBANK_SHARED_H */
