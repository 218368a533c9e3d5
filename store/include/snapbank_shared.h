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
 * queue holds at most a quarter of ram_bytes (and 256 MiB). A page beyond
 * that is denied (shared_denied) and waits, not held: once the queue has
 * drained to half, and at sb_store_flush, the waiting pages still in RAM
 * are offered again (shared_requeued), so a sequence longer than the
 * queue is published whole while it stays in RAM. A page whose value a fetch of this
 * store refused is published by replacing that value: written only if the
 * key still holds the bad value (its SHA-1, compared by the server in one
 * EVAL) or nothing, so a good value another node wrote is never
 * overwritten (shared_replaced). Partial pages and point states are not
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
 * never served. Without a secret the checks do not authenticate the
 * writer: a client that may write the pool's keys can store a
 * well-formed page of wrong state for tokens it knows. Give write access
 * only to trusted nodes (one ACL user per tenant, confined to its key
 * pattern: sb_shared_key_pattern, `snapbank remote-acl`).
 *
 * Secrecy. With sb_config.shared_secret_file the pool reveals nothing to
 * a reader without the secret: keys are keyed hashes (BLAKE2b) of the
 * scope and the page, so no key can be computed from tokens; values are
 * sealed per scope (XChaCha20-Poly1305 with a key derived from the
 * secret and the scope, the value's key authenticated with it), so no
 * token ID or state can be read, and a value that does not open -- a
 * forged one with correct checksums, another deployment's -- is refused
 * and counted (shared_forged). Stores with another secret, or none, use
 * other keys: they miss, without errors. A holder of the secret can do
 * all a node can: compute every scope's keys, read and decrypt every
 * scope's pages, write values every node accepts. The cluster still sees
 * value sizes, timing and which keys are read together. The key and value
 * formats: store/remote/seal.h.
 */

/* Why the shared tier failed an operation (a fetch, a probe, a publish,
 * a delete). sb_ns_fetch_shared_ex says which ended a fetch short, the
 * store's counters (sb_stats.shared_err_*) count every key each one
 * failed, and sb_shared_fault_name names them. The numbers are pinned.
 *
 *   fault          name          what happened
 *   AUTH           auth          WRONGPASS / NOAUTH: the password or ACL
 *                                user is wrong, or AUTH was not sent
 *   NOPERM         noperm        NOPERM: the ACL user lacks the command
 *                                or the key pattern (see "ACL rule")
 *   WRONGTYPE      wrongtype     WRONGTYPE: the key holds another type
 *                                (something else writes the pool's keys)
 *   REFUSED        refused       another error reply (OOM, READONLY, ...)
 *   TIMEOUT        timeout       a node did not answer for the stall bound
 *                                (hung or overloaded): marked down
 *   CONNECT        connect       a connection refused, reset or closed
 *   CLUSTERDOWN    clusterdown   CLUSTERDOWN / TRYAGAIN / MASTERDOWN, or
 *                                slots without a master
 *   DEADLINE       deadline      the fetch's budget ran out while values
 *                                were still arriving: recomputing the
 *                                rest was estimated faster (nodes are not
 *                                marked down)
 *   BAD_VALUE      bad_value     a value failed its checks (see "What is
 *                                checked"): a miss, never served
 */
enum sb_shared_fault {
    SB_SHARED_FAULT_NONE = 0,
    SB_SHARED_FAULT_AUTH = 1,
    SB_SHARED_FAULT_NOPERM = 2,
    SB_SHARED_FAULT_WRONGTYPE = 3,
    SB_SHARED_FAULT_REFUSED = 4,
    SB_SHARED_FAULT_TIMEOUT = 5,
    SB_SHARED_FAULT_CONNECT = 6,
    SB_SHARED_FAULT_CLUSTERDOWN = 7,
    SB_SHARED_FAULT_DEADLINE = 8,
    SB_SHARED_FAULT_BAD_VALUE = 9,
    SB_SHARED_FAULT__COUNT
};

/* sb_shared_fault_name -- "none", "auth", "noperm", "wrongtype",
 * "refused", "timeout", "connect", "clusterdown", "deadline",
 * "bad_value"; "unknown" for any other number. Static storage. */
SB_API const char *sb_shared_fault_name(int fault);

/* How long a fetch may go on (sb_ns_fetch_shared_ex). A fetch is not cut
 * at a fixed time: it waits while values keep arriving, and stops when
 *   - no node has answered for stall_ms (a hung node: TIMEOUT, the node
 *     marked down), or
 *   - with recompute_s_per_token set, the values still to come have not
 *     arrived within the time recomputing their tokens would take,
 *     counted from the last value that arrived (before the first: the
 *     whole run's recompute time plus stall_ms) (DEADLINE: recomputing
 *     the rest is then the faster way; nodes are not marked down), or
 *   - max_ms passed (DEADLINE).
 * The probe before the fetch waits the same way, bounded by stall_ms and
 * 50 x shared_timeout_ms.
 * The pages that arrived good before the stop are kept. */
typedef struct sb_fetch_shared_opts {
    uint32_t stall_ms;            /* 0: the store's shared_timeout_ms */
    double recompute_s_per_token; /* the caller's cost of computing one
                                     token (its cost model); 0: unknown,
                                     only stall_ms and max_ms bound it */
    uint32_t max_ms;              /* 0: 50 x stall_ms */
} sb_fetch_shared_opts;

/* What a fetch did (sb_ns_fetch_shared_ex). */
typedef struct sb_fetch_shared_info {
    size_t n_added;      /* tokens added to the restorable prefix */
    int fault;           /* enum sb_shared_fault that ended it short; 0 */
    char detail[128];    /* the server's error line for AUTH, NOPERM,
                            WRONGTYPE, REFUSED, CLUSTERDOWN; the key for
                            BAD_VALUE; "" otherwise */
    uint32_t n_bad;      /* values refused by the checks */
    uint32_t n_pages;    /* pages the probe found past the index */
} sb_fetch_shared_info;

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
 * Thread-safe; the probe waits at most shared_timeout_ms, the fetch as
 * sb_fetch_shared_opts says (with the defaults: while some node answers
 * within shared_timeout_ms, at most 50 times it).
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

/* sb_ns_fetch_shared_ex -- sb_ns_fetch_shared bounded by *opts (NULL: all
 * defaults; see sb_fetch_shared_opts), saying in *info (may be NULL;
 * zeroed first, filled on every return) what it added and what ended it
 * short. sb_ns_fetch_shared is this call with opts NULL.
 * Returns as sb_ns_fetch_shared; SB_ERR_IO covers every network fault
 * (info->fault says which), also DEADLINE; SB_ERR_INVAL also for a
 * negative or NaN recompute_s_per_token (nothing changed). */
SB_API int sb_ns_fetch_shared_ex(sb_ns *ns, const uint32_t *tokens, size_t n_tokens,
                                 const sb_fetch_shared_opts *opts, sb_fetch_shared_info *info);

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

/* sb_shared_key_pattern -- the key pattern of every pool key of a scope
 * (all its models' pages), for an ACL rule that confines a tenant's user
 * to it: "sb1:<tag>:*" without a secret, "sb2:<keyed tag>:*" with the
 * deployment's secret file (NULL: none). scope is read during the call.
 * `snapbank remote-acl` prints a whole rule with it. out receives the
 * pattern and a NUL (SB_SHARED_PATTERN_LEN bytes suffice).
 * Returns: SB_OK; SB_ERR_INVAL (NULL out, out_len too small, scope NULL
 * with scope_bytes > 0, scope_bytes over SB_SCOPE_MAX, a secret file
 * refused: a message goes to stderr). */
#define SB_SHARED_PATTERN_LEN 23u /* "sb1:" 16 hex ":*" NUL */
SB_API int sb_shared_key_pattern(const char *secret_file, const void *scope, size_t scope_bytes,
                                 char *out, size_t out_len);

/* sb_store_has_shared -- whether st was opened with a shared tier.
 * Returns: 1 or 0 (0 for NULL). */
SB_API int sb_store_has_shared(const sb_store *st);

#ifdef __cplusplus
}
#endif

#endif /* SNAPBANK_SHARED_H */
