/* rcluster.h -- a Redis Cluster client: slot map, per-node pipelines,
 * MOVED / ASK redirections, failover, and a deadline on every batch.
 *
 * libhiredis 0.14 (the only Redis client Debian 12 packages) speaks to one
 * server and knows nothing of clusters; this module adds what a cluster
 * needs on top of its protocol reader and non-blocking connections:
 *
 *   - The slot map. A key's slot is CRC16-XMODEM(key) mod 16384 (or of the
 *     part between the first '{' and the next '}' when that part is not
 *     empty: a hash tag). CLUSTER SLOTS, asked of any reachable node (the
 *     seeds at first), says which master and replicas serve each range.
 *   - Pipelines. sb_rc_exec sends a batch: every operation to its slot's
 *     master, one node's operations written back to back, every node's
 *     socket serviced by one poll() loop, so a batch over three masters
 *     costs about one round trip, not one per key. A node owes at most
 *     SB_RC_WINDOW replies at a time, and past its first two operations
 *     at most SB_RC_WINDOW_BYTES of values (a GET counts the length its
 *     caller expects, op->hint; a SET its value); each reply read makes
 *     room for the next operation. Why: a server executes every command
 *     it has read before it writes a reply, so a batch of 85 GETs of 192
 *     KiB pages sent at once came back as 16 MiB built whole first (110
 *     ms to the first byte, measured); a window keeps the server writing
 *     while the client reads and checks. Why in bytes: with 8 such GETs
 *     owed per node (1.5 MiB) a fetch moved 0.58-0.75 of what
 *     redis-benchmark GET moves on the same 2-core machine, with 2-3 of
 *     them about as much (bench/README.md); a window counted in replies
 *     alone would also hold only a few small ones (EXISTS) at a time.
 *   - Redirections. `-MOVED slot host:port` updates that slot's owner and
 *     retries there (and schedules a full map refresh: a slot moved means
 *     others may have); `-ASK slot host:port` retries once at the target,
 *     preceded by ASKING, without changing the map (a slot being
 *     migrated). `-TRYAGAIN` and `-CLUSTERDOWN` retry after a refresh while
 *     the deadline allows. At most max_redirects hops per operation.
 *   - Faults. A node that refuses, resets or does not answer in time is
 *     marked down for down_ms: its connection is dropped, the map is
 *     refreshed from another node (a failover may have promoted its
 *     replica) and its operations retried once there; reads whose master
 *     is down go to a replica (READONLY). An operation that still has no
 *     answer when the batch's deadline passes is SB_RC_DOWN; with
 *     sb_rc_exec nothing waits longer than timeout_ms in all, with
 *     sb_rc_exec_lim a batch waits while replies arrive (stall_ns since
 *     the last one) until the caller's until_ns. A node marked down is tried again
 *     after down_ms, so the client comes back by itself.
 *
 * Authentication: AUTH [user] password on every new connection, before
 * anything else on it (an ACL user confines a tenant to its key pattern).
 * A refused AUTH drops the connection and marks the node down (RC_F_AUTH):
 * it is never used as whatever user the server then takes it for.
 *
 * Why an operation failed: every DOWN or REFUSED operation carries an
 * sb_rc_fault, from the server's error reply (WRONGPASS / NOAUTH,
 * NOPERM, WRONGTYPE, CLUSTERDOWN...) or from what its node did (timed
 * out, refused or lost its connection), or the deadline.
 * Credentials are copied at open; they are never logged.
 *
 * Thread safety: a client is used by one thread at a time (the remote tier
 * keeps one per thread that talks to the cluster).
 */
#ifndef SB_RCLUSTER_H
#define SB_RCLUSTER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define SB_RC_SLOTS 16384u
#define SB_RC_MAX_NODES 256u
#define SB_RC_WINDOW 32u /* replies one node owes at most (operations and
                            the ASKING / READONLY before them) */
#define SB_RC_WINDOW_BYTES (640u << 10) /* value bytes one node owes at most
                            (GETs' hints, SETs' values), past its first two
                            operations */

typedef struct sb_rc sb_rc;

typedef struct sb_rc_config {
    const char *seeds;           /* "host:port[,host:port...]": where to ask
                                    for the slot map first; copied */
    const char *user;            /* ACL user for AUTH, or NULL (password only) */
    const char *password;        /* NULL: no AUTH; copied */
    uint32_t timeout_ms;         /* bound on one sb_rc_exec; 0: 200 */
    uint32_t connect_timeout_ms; /* bound on one connect; 0: timeout_ms */
    uint32_t down_ms;            /* a failed node is skipped this long; 0: 1000 */
    uint32_t max_redirects;      /* MOVED/ASK hops per operation; 0: 5 */
    /* Monotonic clock in nanoseconds (NULL: CLOCK_MONOTONIC). */
    uint64_t (*clock_ns)(void *ctx);
    void *clock_ctx;
} sb_rc_config;

/* What an operation asks. */
typedef enum sb_rc_kind {
    SB_RC_GET = 0,    /* GET key: the value into data/len */
    SB_RC_SET = 1,    /* SET key val [EX ttl_s] [NX] */
    SB_RC_EXISTS = 2, /* EXISTS key */
    SB_RC_DEL = 3,    /* DEL key */
    SB_RC_REPLACE = 4, /* SET key val [EX ttl_s], only when the key is
                          absent or its value's SHA-1 is digest (one EVAL,
                          atomic on the server): OK when written, MISSING
                          when the key holds another value (someone
                          replaced it first) */
} sb_rc_kind;

/* How an operation ended. */
typedef enum sb_rc_status {
    SB_RC_OK = 0,        /* done: GET found a value, SET stored it, EXISTS
                            found the key, DEL removed it */
    SB_RC_MISSING = 1,   /* GET/EXISTS: no such key; SET NX: the key was
                            there already (nothing written); DEL: none */
    SB_RC_DOWN = 2,      /* no node answered for its slot before the
                            deadline (down, hung, cluster gone, or too many
                            redirections) */
    SB_RC_REFUSED = 3,   /* the server answered with an error (NOPERM,
                            OOM, WRONGTYPE, ...): err_msg has its text */
    SB_RC_NOMEM = 4,     /* no memory for the request or the reply */
} sb_rc_status;

/* Why an operation is DOWN or REFUSED (SB_RC_OK / MISSING: RC_F_NONE).
 * Taken from the server's error reply (its first word) or from what the
 * connection did; the deadline when nothing more specific was seen. */
typedef enum sb_rc_fault {
    RC_F_NONE = 0,
    RC_F_AUTH = 1,        /* WRONGPASS, NOAUTH, or AUTH refused otherwise */
    RC_F_NOPERM = 2,      /* NOPERM: the ACL user lacks the command or key */
    RC_F_WRONGTYPE = 3,   /* WRONGTYPE: the key holds another type */
    RC_F_REFUSED = 4,     /* any other error reply (OOM, READONLY, ...) */
    RC_F_TIMEOUT = 5,     /* a node owed replies past the deadline (hung) */
    RC_F_CONNECT = 6,     /* a connection refused, reset or closed */
    RC_F_CLUSTERDOWN = 7, /* CLUSTERDOWN / TRYAGAIN / MASTERDOWN / LOADING,
                             or slots without an owner */
    RC_F_DEADLINE = 8,    /* the batch's deadline passed first */
} sb_rc_fault;

typedef struct sb_rc_op {
    /* in */
    sb_rc_kind kind;
    const char *key;     /* borrowed for the call */
    size_t key_len;
    const void *val;     /* SET: borrowed for the call */
    size_t val_len;
    uint32_t ttl_s;      /* SET: expiry in seconds; 0: none */
    int nx;              /* SET: only if absent */
    const char *digest;  /* REPLACE: 40 lower-case hex digits, borrowed */
    size_t hint;         /* GET: the value's expected length, for the
                            node's window (SB_RC_WINDOW_BYTES); 0: small */
    /* out */
    sb_rc_status status;
    void *data;          /* GET on OK: the value, malloc'd, owned by the
                            caller (free()); NULL otherwise, and NULL when
                            the value went to its sink's spans */
    size_t len;          /* its length */
    int in_sink;         /* GET on OK: 1 when the value was read into the
                            spans the batch's sink gave for it (see
                            sb_rc_exec_sink), data NULL; else 0 */
    char err_msg[96];    /* REFUSED: the server's error line, cut; DOWN
                            after an error reply: that reply */
    sb_rc_fault fault;   /* DOWN / REFUSED: why */
} sb_rc_op;

/* Counters since open. */
typedef struct sb_rc_stats {
    uint64_t batches, ops;           /* sb_rc_exec calls, operations sent */
    uint64_t moved, ask, tryagain;   /* redirections followed */
    uint64_t refreshes;              /* slot maps read */
    uint64_t timeouts;               /* nodes that missed a deadline */
    uint64_t cuts;                   /* connections dropped when a
                                        caller's until passed (not down) */
    uint64_t node_errors;            /* connections lost or refused */
    uint64_t replica_reads;          /* GETs served by a replica */
    uint64_t bytes_out, bytes_in;    /* request and reply bytes */
    uint64_t sunk;                   /* GET values read into a sink's spans */
    uint32_t n_nodes;                /* nodes known now */
    uint32_t n_down;                 /* ...marked down now */
    uint32_t max_owed;               /* most replies one node owed at once
                                        for operations (<= SB_RC_WINDOW) */
    uint64_t max_owed_bytes;         /* most value bytes one node owed at
                                        once (<= SB_RC_WINDOW_BYTES, or two
                                        operations' worth) */
} sb_rc_stats;

/* sb_rc_open -- a client for the cluster the seeds belong to. Reads the slot
 * map from the first seed that answers; when none does, the client still
 * opens (every operation is DOWN until a seed answers: it keeps trying).
 * On success *out is owned by the caller (sb_rc_close).
 * Returns: SB_OK; SB_ERR_INVAL (NULL, no seed, a seed that is not
 * host:port); SB_ERR_NOMEM. err (may be NULL) receives a message. */
int sb_rc_open(const sb_rc_config *cfg, sb_rc **out, char *err, size_t err_len);

/* sb_rc_close -- close every connection and free the client. NULL: no-op. */
void sb_rc_close(sb_rc *c);

/* sb_rc_exec -- run ops[0, n) as one pipelined batch (see the top of this
 * file), within timeout_ms. Every op gets a status; GET values are owned
 * by the caller afterwards.
 * Returns: SB_OK (statuses say how each op ended, some may be DOWN);
 * SB_ERR_INVAL (NULL, a key over 1 KiB). */
int sb_rc_exec(sb_rc *c, sb_rc_op *ops, size_t n);

/* sb_rc_got_fn -- called by sb_rc_exec_each for a GET whose value arrived
 * (op->status SB_RC_OK), as it arrives, on the calling thread: i is its
 * index in ops. The callee may take op->data (free it, or keep it, and set
 * op->data to NULL); what it leaves is the caller's after the batch as
 * with sb_rc_exec. */
typedef void (*sb_rc_got_fn)(void *ctx, size_t i, sb_rc_op *op);

/* sb_rc_exec_each -- sb_rc_exec, with got (may be NULL) called for each
 * value as it arrives: a caller that checks and stores each value there
 * holds a window's values at a time, not the whole batch's. Returns as
 * sb_rc_exec. */
int sb_rc_exec_each(sb_rc *c, sb_rc_op *ops, size_t n, sb_rc_got_fn got, void *ctx);

/* The bounds of one sb_rc_exec_lim batch. A batch that keeps getting
 * replies is not cut by a fixed timeout: it waits while some node
 * answered within stall_ns, until until_ns. */
typedef struct sb_rc_limits {
    uint64_t stall_ns;   /* no reply from any node for this long: the nodes
                            owing replies are timed out and marked down
                            (RC_F_TIMEOUT); 0: timeout_ms */
    uint64_t until_ns;   /* the clock (cfg.clock_ns) past which the batch
                            stops: nodes owing replies have their
                            connections dropped but are not marked down;
                            what is unanswered is DOWN with RC_F_DEADLINE.
                            0: none. The got callback may move it (read
                            and written atomically, on the calling thread) */
} sb_rc_limits;

/* sb_rc_exec_lim -- sb_rc_exec_each bounded by *lim instead of one
 * timeout_ms for the whole batch (lim NULL: as sb_rc_exec_each). Returns
 * as sb_rc_exec. */
int sb_rc_exec_lim(sb_rc *c, sb_rc_op *ops, size_t n, sb_rc_got_fn got, void *ctx,
                   sb_rc_limits *lim);

/* sb_rc_sink_fn -- asked by sb_rc_exec_sink when the reply of GET ops[i]
 * turns out to be a value of len bytes, before any of its bytes is read:
 * where those bytes go. The callee fills out[0, k) with spans whose lengths
 * sum to len and returns k (1 or 2); the value is then read off the socket
 * straight into them (no reply object, no copy in between) and got sees it
 * with in_sink 1. Returning 0 (or spans that do not sum to len) reads this
 * value into a malloc'd data as without a sink. The spans are the
 * callee's; the client writes them only between this call and got for the
 * same i, or until ops[i] goes round again (its node failed mid-value: the
 * sink is asked again, from the first byte, for the next node's reply).
 * After the batch returns nothing writes them. Called on the calling
 * thread, only for a GET at the head of its node's pipeline. */
typedef unsigned (*sb_rc_sink_fn)(void *ctx, size_t i, size_t len, struct iovec out[2]);

/* sb_rc_exec_sink -- sb_rc_exec_lim whose GET values are read into the
 * spans sink gives (sink NULL: as sb_rc_exec_lim); ctx is passed to both
 * sink and got. Why: a page value went from the socket into a read buffer,
 * the reader's buffer, a reply object and then the page (four copies of
 * every byte, and a 192 KiB allocation per value); into a sink it goes
 * from the socket into the page. Returns as sb_rc_exec. */
int sb_rc_exec_sink(sb_rc *c, sb_rc_op *ops, size_t n, sb_rc_sink_fn sink, sb_rc_got_fn got,
                    void *ctx, sb_rc_limits *lim);

/* sb_rc_refresh -- read the slot map now (also done by itself after
 * MOVED, a failed node, or when slots have no owner).
 * Returns: SB_OK; SB_ERR_IO (no node answered). */
int sb_rc_refresh(sb_rc *c);

/* sb_rc_get_stats -- the counters. */
void sb_rc_get_stats(const sb_rc *c, sb_rc_stats *out);

/* sb_rc_slot -- the hash slot of a key (hash tags honoured). */
unsigned sb_rc_slot(const char *key, size_t len);

/* sb_rc_status_name -- "ok", "missing", "down", "refused", "nomem". */
const char *sb_rc_status_name(sb_rc_status s);

/* sb_rc_fault_of -- the fault an error reply's text (n bytes) names:
 * RC_F_AUTH, RC_F_NOPERM, RC_F_WRONGTYPE, RC_F_CLUSTERDOWN or
 * RC_F_REFUSED. */
sb_rc_fault sb_rc_fault_of(const char *msg, size_t n);

/* sb_rc_fault_name -- "none", "auth", "noperm", "wrongtype", "refused",
 * "timeout", "connect", "clusterdown", "deadline" (snapbank_shared.h's
 * names for the same numbers); "unknown" otherwise. */
const char *sb_rc_fault_name(sb_rc_fault f);

#endif /* SB_RCLUSTER_H */
