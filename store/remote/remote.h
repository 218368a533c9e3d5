/* remote.h -- the shared tier: full pages published to a Redis Cluster
 * under content-addressed keys, found and fetched by any node that holds
 * the same prompt prefix, every fetched value checked before it is used.
 *
 * Keys. A page of namespace (model identity, scope) is stored under
 *
 *     sb1:<scope tag>:<ns id>:<content key>
 *
 * all lower-case hex: the scope tag is XXH3-64 of the scope bytes (16
 * digits), the ns id XXH3-64 of (identity, scope) as on disk (16), the
 * content key the page's XXH3-128 chain key (32, high word first). A node
 * computes, from a prompt's tokens alone, the keys of the pages it would
 * need (the chain starts at the namespace's root key), so one pipelined
 * EXISTS probe tells how far the pool extends a local match. The scope tag
 * leads so that one ACL key pattern per tenant (~sb1:<tag>:*) confines it
 * to its own pages whatever models it runs. With the deployment's secret
 * (seal.h) keys are sb2:<keyed tag>:<keyed hash>, the same length, and the
 * pattern ~sb2:<keyed tag>:*. `snapbank remote-acl --scope S` prints the
 * whole rule of a scope (sb_shared_key_pattern): the pattern, and the
 * commands this tier sends -- GET, SET, EXISTS, DEL, EVAL (a bad value's
 * replacement), CLUSTER SLOTS, READONLY, ASKING.
 *
 * Values. A value is a page record in the disk tier's format (format.h):
 * the head (fixed fields, the page's token IDs) without the zero padding
 * the disk aligns it with, then the payload, optionally zstd-compressed
 * (a version 2 record):
 *
 *     OFFSET        SIZE        FIELD
 *     0             128         the record's fixed head (format.h), with
 *                               segment_id 0, generation 0, seq 0 and the
 *                               head hash seeded with offset 0
 *     128           4*n         the page's token IDs (n = page_tokens)
 *     128+4n        P           the payload as stored (payload_bytes of the
 *                               head): the page block, or its zstd frame(s)
 *
 * A value is used only when all of these hold: it parses as a record of a
 * known version; its head hash and payload hash hold; it is a page of this
 * namespace (ns id) at the position asked; its content key is the key
 * asked and equals the chain of the parent key asked over its tokens; its
 * tokens are the request's tokens; its payload (decompressed) is exactly
 * page_bytes. Anything else is a bad value: a miss, counted, never served.
 *
 * What the checks do not prevent: anyone who can write the pool's keys
 * (the password or ACL user of a tenant, or any client without ACLs) can
 * store a value with a correct head and checksums over wrong state for a
 * key it can compute (it only needs the tokens). The checks catch damage,
 * truncation, a value under the wrong key, other models' and tenants'
 * values and hash collisions; they do not authenticate the writer. Give
 * write access only to nodes that run the same trusted runtime, one ACL
 * user per tenant confined to its key pattern.
 *
 * Publishing. Offers are queued (never blocking the caller: the queue is
 * bounded in bytes, beyond it an offer is denied) and a background thread
 * writes them, shallowest pages first (shared prefixes before the turns
 * that follow them), within a bytes-per-second budget of its own: first a
 * pipelined EXISTS for a batch, then SET ... NX EX ttl for the pages the
 * pool lacks, so a page already published by any node costs one probe,
 * not a second upload. A page whose value a fetch of this handle refused
 * (a bad value: it would otherwise stay in the pool for good, every node
 * fetching and refusing it) is instead written with one atomic compare
 * (EVAL: SET only if the key still holds the value with the bad one's
 * SHA-1, or nothing), so a good value another node wrote meanwhile is
 * never overwritten; counted as replaced. Sequences shorter than min_prefix_tokens are not
 * offered (the caller's check). Only full pages are published: a partial
 * tail page's key depends on how many tokens it holds, which another node
 * cannot guess, so a restore from the pool ends at a page boundary.
 *
 * Thread safety: every call may come from any thread; fetches and probes
 * share one connection set under a mutex, the publisher has its own.
 */
#ifndef SB_REMOTE_H
#define SB_REMOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snapbank.h"

#define SB_REMOTE_KEY_LEN 70u /* "sb1:" 16 ":" 16 ":" 32 */

typedef struct sb_remote sb_remote;

typedef struct sb_remote_config {
    const char *seeds;            /* "host:port[,host:port...]" */
    const char *user, *password;  /* AUTH; NULL: none (copied) */
    uint32_t timeout_ms;          /* bound on one probe, fetch or publish
                                     batch; 0: 200 */
    uint64_t publish_bytes_per_s; /* the publisher's budget in page bytes
                                     (a token bucket one second deep, on
                                     the clock below); 0: 64 MiB/s */
    uint64_t queue_bytes;         /* most bytes waiting to publish; 0: 256 MiB */
    uint32_t ttl_s;               /* expiry of each published key; 0: none */
    uint32_t compress_level;      /* zstd level for published payloads; 0: raw */
    const struct sb_seal *seal;   /* the deployment's secret (seal.h): keys
                                     keyed, values sealed; NULL: plain sb1
                                     keys and values (copied) */
    /* Monotonic clock in ns (NULL: CLOCK_MONOTONIC), for the budget. */
    uint64_t (*clock_ns)(void *ctx);
    void *clock_ctx;
    /* Called by the publisher, from its thread, holding no lock, once a
     * batch leaves the queue at most half full after an offer was denied
     * (queue full) since the last call: room to offer the denied pages
     * again. It may call sb_remote_offer. NULL: never called. */
    void (*room)(void *ctx);
    void *room_ctx;
} sb_remote_config;

/* The namespace a page belongs to, as the keys and checks need it. */
typedef struct sb_remote_ns {
    uint64_t ns_id;
    uint64_t scope_tag;   /* XXH3-64 of the scope bytes */
    uint32_t page_tokens;
    uint32_t page_bytes;
    bool elem16;          /* SB_LAYOUT_ELEM16: shuffle before compressing */
} sb_remote_ns;

/* A page to publish. data stays valid until release(ctx) is called (by the
 * publisher, from its thread, once it is done with the page or drops it).
 * live(ctx), when set, is asked just before the page is published: false
 * (a removal took the page since it was offered) drops it unpublished.
 * Both are called without the pool's lock held. */
typedef struct sb_remote_page {
    sb_remote_ns ns;
    uint64_t key[2], parent_key[2]; /* lo, hi */
    uint32_t position;              /* first token index */
    const uint32_t *tokens;         /* page_tokens IDs; copied at offer */
    const void *data;               /* page_bytes */
    void (*release)(void *ctx);
    bool (*live)(void *ctx);
    void *ctx;
} sb_remote_page;

/* A page to fetch: what it must be, and where its bytes go. */
typedef struct sb_remote_want {
    uint64_t key[2], parent_key[2];
    uint32_t position;
    const uint32_t *tokens;         /* page_tokens IDs the page must hold */
    void *dst;                      /* page_bytes: the page on success;
                                       anything after a failure (a value
                                       may be read there to be checked) */
} sb_remote_want;

typedef struct sb_remote_stats {
    uint64_t offered, published, published_bytes; /* pages; bytes sent */
    uint64_t dedup;              /* offers the pool held already */
    uint64_t denied_queue;       /* offers refused: the queue was full */
    uint64_t publish_failed;     /* pages the cluster did not take */
    uint64_t probes, probe_keys, probe_hits; /* EXISTS batches and keys */
    uint64_t fetched, fetched_bytes; /* pages fetched and checked good */
    uint64_t bad_values;         /* values refused by the checks */
    uint64_t down;               /* operations that met no node in time */
    uint64_t fetch_ns;           /* time spent in fetches */
    uint64_t queued_bytes;       /* gauge: waiting to publish */
    uint64_t forgotten;          /* keys sb_remote_forget deleted (DEL found
                                    them), the publisher's second DELs too */
    uint64_t forget_failed;      /* ...DELs no node answered (or refused) */
    uint64_t faults[SB_SHARED_FAULT__COUNT]; /* keys an operation failed,
                                    by reason (enum sb_shared_fault);
                                    [BAD_VALUE] is bad_values */
    uint64_t replaced;           /* bad values the publisher replaced */
    uint64_t forged;             /* ...of bad_values: sealed values that
                                    did not open (no tag or a wrong one) */
} sb_remote_stats;

/* A fetch's bounds (snapbank_shared.h, sb_fetch_shared_opts). */
typedef struct sb_remote_fetch_opts {
    uint32_t stall_ms;           /* 0: timeout_ms */
    double page_recompute_ns;    /* recomputing one page; 0: unknown */
    uint32_t max_ms;             /* 0: 50 x stall_ms */
} sb_remote_fetch_opts;

/* What ended an operation short (snapbank_shared.h, "sb_shared_fault"). */
typedef struct sb_remote_fault_info {
    int fault;                   /* enum sb_shared_fault; 0: none */
    char detail[128];            /* the server's words, or a bad value's key */
    uint32_t n_bad;              /* values refused by the checks */
} sb_remote_fault_info;

/* sb_remote_open -- connect to the cluster (see rcluster.h: it opens even
 * when no node answers yet) and start the publisher thread.
 * On success *out is owned by the caller (sb_remote_close).
 * Returns: SB_OK; SB_ERR_INVAL (no seeds, a bad seed, compress_level out
 * of range; err says which); SB_ERR_NOMEM. */
int sb_remote_open(const sb_remote_config *cfg, sb_remote **out, char *err, size_t err_len);

/* sb_remote_close -- stop the publisher (pages still queued are released
 * unpublished: the pool is a cache) and disconnect. NULL is a no-op. */
void sb_remote_close(sb_remote *r);

/* sb_remote_key -- the key of a page (SB_REMOTE_KEY_LEN chars, no NUL). */
void sb_remote_key(char out[SB_REMOTE_KEY_LEN], const sb_remote_ns *ns, const uint64_t key[2]);

/* sb_remote_key_of -- the key of a page as r names it: keyed (seal.h)
 * when r has a secret, else sb_remote_key's. */
void sb_remote_key_of(const sb_remote *r, char out[SB_REMOTE_KEY_LEN], const sb_remote_ns *ns,
                      const uint64_t key[2]);

/* sb_remote_offer -- queue a full page for publishing. Never blocks.
 * Returns: SB_OK (queued: release is called later); SB_ERR_BUDGET (the
 * queue is full, or the pool is closing: denied, release was called; the
 * config's room callback says when the queue has room again);
 * SB_ERR_NOMEM (release was called). */
int sb_remote_offer(sb_remote *r, const sb_remote_page *pg);

/* sb_remote_probe -- how many of the pages named by keys[0, n) the pool
 * holds as a run from the first: *n_present. One pipelined EXISTS batch.
 * Returns: SB_OK; SB_ERR_IO (no node answered for the first missing
 * key: *n_present is the run before it). */
int sb_remote_probe(sb_remote *r, const sb_remote_ns *ns, const uint64_t (*keys)[2], size_t n,
                    size_t *n_present);

/* sb_remote_probe_ex -- sb_remote_probe, saying in *info (may be NULL)
 * why the run ended short when a key had no answer or was refused. */
int sb_remote_probe_ex(sb_remote *r, const sb_remote_ns *ns, const uint64_t (*keys)[2], size_t n,
                       size_t *n_present, sb_remote_fault_info *info);

/* sb_remote_fetch -- GET want[0, n), check each value (see the top of this
 * file) and write the good ones' page bytes to their dst. *n_ok receives
 * the length of the run of good pages from the first. A plain value of an
 * uncompressed page is read off the socket into its dst and checked there
 * (sb_rc_exec_sink); a sealed or compressed one is read whole first.
 * Returns: SB_OK (*n_ok == n); SB_ERR_NOT_FOUND (a page is missing: it
 * expired or was evicted); SB_ERR_CORRUPT (a bad value, counted);
 * SB_ERR_IO (no node answered in time); SB_ERR_NOMEM. The code is for the
 * first page that was not good; dst of pages after *n_ok is unspecified. */
int sb_remote_fetch(sb_remote *r, const sb_remote_ns *ns, const sb_remote_want *want, size_t n,
                    size_t *n_ok);

/* sb_remote_fetch_ex -- sb_remote_fetch bounded by *opts (NULL: the
 * defaults) instead of one timeout_ms: it waits while values arrive, at
 * most stall_ms without one; with page_recompute_ns, the values still to
 * come must arrive within the time recomputing them would take (from the
 * last arrival; before the first, the whole run's plus stall_ms); never
 * past max_ms. *info (may be NULL) says what ended it short. A bad value
 * is remembered (its key and SHA-1): when this handle publishes that page
 * later, it replaces the bad value (see Publishing).
 * Returns as sb_remote_fetch (SB_ERR_IO for every network fault). */
int sb_remote_fetch_ex(sb_remote *r, const sb_remote_ns *ns, const sb_remote_want *want,
                       size_t n, const sb_remote_fetch_opts *opts, size_t *n_ok,
                       sb_remote_fault_info *info);

/* sb_remote_forget -- delete the pages of ns named by keys[0, n) from the
 * pool (a removal: sb_ns_remove). Their publications still queued are
 * dropped (released unpublished); the keys are deleted with one pipelined
 * DEL batch, bounded by the timeout; a page among them that the publisher
 * is writing at that moment is deleted again when its batch ends, so no
 * publication started before the call outlives it. Counted in the stats
 * (forgotten, forget_failed, down). Never call it holding a lock a
 * release callback takes.
 * Returns: SB_OK; SB_ERR_IO (some key had no answer in time, or the
 * server refused a DEL: it may stay until its TTL); SB_ERR_NOMEM (nothing
 * deleted). */
int sb_remote_forget(sb_remote *r, const sb_remote_ns *ns, const uint64_t (*keys)[2], size_t n);

/* sb_remote_flush -- wait until the publish queue is empty (or the
 * cluster is unreachable: then what waited is dropped). For tests and
 * orderly shutdown. */
void sb_remote_flush(sb_remote *r);

/* sb_remote_get_stats -- the counters. */
void sb_remote_get_stats(sb_remote *r, sb_remote_stats *out);

/* sb_remote_encode_value -- the value of a page (see above) into a
 * malloc'd buffer *out of *len bytes (caller frees). compress: a zstd
 * level, 0 for raw. Exposed for tests that poison the pool.
 * Returns: SB_OK; SB_ERR_NOMEM. */
int sb_remote_encode_value(const sb_remote_page *pg, int compress, void **out, size_t *len);

#endif /* SB_REMOTE_H */
