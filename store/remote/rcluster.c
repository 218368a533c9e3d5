/* rcluster.c -- a Redis Cluster client over hiredis (see rcluster.h).
 *
 * One batch (sb_rc_exec), step by step:
 *   1. Every operation gets its slot; when the map has no owner for some
 *      slot, or a refresh is due, the map is read first (refresh()).
 *   2. dispatch(): each operation not yet answered is appended to the
 *      pipeline of the node that serves it now: its ASK target (after an
 *      ASKING), else its slot's master, else (a read whose master is down)
 *      the slot's replica (after READONLY on that connection). A node gets
 *      a connection (non-blocking connect, AUTH first) on first use. A
 *      node owes at most SB_RC_WINDOW replies: the rest of its operations
 *      wait, and pump() sends them as replies make room.
 *   3. pump(): one poll() loop over every node with requests in flight:
 *      write what is buffered, read what arrives, and hand each reply to
 *      the entry at the head of that node's FIFO (an operation, or a
 *      marker for AUTH / ASKING / READONLY / CLUSTER SLOTS).
 *   4. A reply settles its operation, or sends it round again: MOVED
 *      (map updated, refresh due), ASK (target noted), TRYAGAIN /
 *      CLUSTERDOWN / LOADING (refresh due). A node whose connection fails
 *      is marked down and its in-flight operations go round again once.
 *   5. While operations go round and the deadline allows: refresh if due,
 *      back to 2. At the deadline, nodes still owing replies are marked
 *      down (their connections dropped: late replies must not be matched
 *      to later requests) and what is unanswered is DOWN.
 */
#include "rcluster.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "snapbank.h"

#define RC_KEY_MAX 1024u
#define RC_NONE 0xffffu

/* FIFO entries: an operation index (>= 0) or a marker. */
enum { MK_AUTH = -1, MK_ASKING = -2, MK_READONLY = -3, MK_SLOTS = -4 };

/* One read() of a node's socket takes up to this much (hiredis' own
 * redisBufferRead reads 16 KiB at a time: a page value of 192 KiB would
 * take a dozen poll rounds). */
#define RC_RBUF (256u << 10)

/* While a value is read into its sink's spans, each readv() also takes up
 * to this much after it into the read buffer: the CRLF that ends it, the
 * next reply's header and the first bytes of the next value (copied from
 * there; the rest of it goes straight into its own spans). */
#define RC_TAIL 4096u

/* A bulk header "$<len>\r\n" is at most this long (len < 2^63): a shorter
 * start of one, cut by the end of a read, waits in the node for the rest. */
#define RC_HDR_MAX 24u

/* A GET's value being read straight into the spans its batch's sink gave
 * (sb_rc_exec_sink): what is still to fill, then the CRLF after it. */
typedef struct rc_bulk {
    bool on;
    int op;             /* its operation's index */
    size_t len;         /* the value's length */
    struct iovec sp[2]; /* what is still to fill, in order */
    unsigned n_sp;
    size_t left;        /* value bytes still to come */
    unsigned crlf;      /* bytes of the CRLF after it already read (0-2) */
} rc_bulk;

typedef struct rc_node {
    char host[64];
    int port;
    redisContext *ctx;   /* NULL: not connected */
    bool readonly;       /* READONLY sent on ctx */
    uint64_t down_until; /* clock ns; 0: up */
    sb_rc_fault down_fault; /* why it was marked down last */
    int *fifo;           /* replies owed, oldest first */
    size_t fifo_head, fifo_len, fifo_cap;
    size_t owed_bytes;   /* value bytes of the operations in fifo
                            (op_bytes) */
    bool dead_in_pump;   /* failed during the current pump */
    rc_bulk bulk;        /* a value read into its sink, when on */
    unsigned char pend[RC_HDR_MAX]; /* the start of a bulk header a read */
    size_t pend_n;                  /* ended in, waiting for the rest */
    size_t feed_left;    /* bytes of the reply being fed to the reader
                            still to come (node_take) */
} rc_node;

struct sb_rc {
    sb_rc_config cfg;
    char *seeds;                /* copy: "h:p,h:p" */
    char *user, *password;
    rc_node nodes[SB_RC_MAX_NODES];
    uint32_t n_nodes;
    uint16_t owner[SB_RC_SLOTS];   /* node index of the slot's master */
    uint16_t replica[SB_RC_SLOTS]; /* node index of one replica */
    bool refresh_due;
    redisReply *slots_reply;    /* the CLUSTER SLOTS answer being read */
    sb_rc_fault last_fault;     /* the last node failure or refused
                                   AUTH / CLUSTER SLOTS: why an operation
                                   found no node to go to */
    char last_msg[96];          /* ...the server's words, if any */
    sb_rc_stats st;
    unsigned char rbuf[RC_RBUF]; /* what one read() takes off a socket */
};

/* Per-operation scratch, alongside the caller's array. */
typedef struct rc_track {
    unsigned slot;
    uint16_t ask;      /* ASK target, RC_NONE when none */
    uint8_t hops;      /* redirections followed */
    uint8_t retries;   /* rounds after a node failure */
    bool in_flight;
    bool done;
    uint8_t fault;     /* sb_rc_fault: what its last round met */
} rc_track;

static uint64_t rc_now(const sb_rc *c)
{
    if (c->cfg.clock_ns)
        return c->cfg.clock_ns(c->cfg.clock_ctx);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- slots --------------------------------------------------------------- */

/* CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0, no reflection;
 * the function the Redis Cluster specification names for key slots. */
static uint16_t crc16(const unsigned char *p, size_t n)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < n; i++) {
        crc ^= (uint16_t)(p[i] << 8);
        for (int b = 0; b < 8; b++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return crc;
}

unsigned sb_rc_slot(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len);
    if (open) {
        size_t rest = len - (size_t)(open - key) - 1;
        const char *close = memchr(open + 1, '}', rest);
        if (close && close > open + 1)
            return crc16((const unsigned char *)open + 1, (size_t)(close - open - 1)) %
                   SB_RC_SLOTS;
    }
    return crc16((const unsigned char *)key, len) % SB_RC_SLOTS;
}

static bool starts_with(const char *s, size_t n, const char *w)
{
    size_t wl = strlen(w);
    return n >= wl && !memcmp(s, w, wl);
}

sb_rc_fault sb_rc_fault_of(const char *msg, size_t n)
{
    if (!msg)
        return RC_F_REFUSED;
    if (starts_with(msg, n, "WRONGPASS") || starts_with(msg, n, "NOAUTH") ||
        starts_with(msg, n, "ERR invalid password") || starts_with(msg, n, "ERR AUTH"))
        return RC_F_AUTH;
    if (starts_with(msg, n, "NOPERM"))
        return RC_F_NOPERM;
    if (starts_with(msg, n, "WRONGTYPE"))
        return RC_F_WRONGTYPE;
    if (starts_with(msg, n, "CLUSTERDOWN") || starts_with(msg, n, "TRYAGAIN") ||
        starts_with(msg, n, "MASTERDOWN") || starts_with(msg, n, "LOADING"))
        return RC_F_CLUSTERDOWN;
    return RC_F_REFUSED;
}

const char *sb_rc_fault_name(sb_rc_fault f)
{
    static const char *const name[] = { "none",    "auth",    "noperm",      "wrongtype", "refused",
                                        "timeout", "connect", "clusterdown", "deadline" };
    return (unsigned)f < sizeof name / sizeof *name ? name[f] : "unknown";
}

/* Note why operations may find no node: f, and the server's words. */
static void note_fault(sb_rc *c, sb_rc_fault f, const char *msg, size_t n)
{
    c->last_fault = f;
    snprintf(c->last_msg, sizeof c->last_msg, "%.*s", (int)(n < 95 ? n : 95), msg ? msg : "");
}

const char *sb_rc_status_name(sb_rc_status s)
{
    static const char *const names[] = { "ok", "missing", "down", "refused", "nomem" };
    return (unsigned)s < sizeof names / sizeof *names ? names[s] : "unknown";
}

/* ---- nodes --------------------------------------------------------------- */

static void set_err(char *err, size_t len, const char *msg)
{
    if (err && len)
        snprintf(err, len, "%s", msg);
}

/* The node at host:port, added when new. Returns its index or RC_NONE (the
 * table is full, or the name does not fit). */
static uint16_t node_find(sb_rc *c, const char *host, size_t host_len, int port)
{
    if (host_len == 0 || host_len >= sizeof c->nodes[0].host || port <= 0 || port > 65535)
        return RC_NONE;
    for (uint32_t i = 0; i < c->n_nodes; i++)
        if (c->nodes[i].port == port && strlen(c->nodes[i].host) == host_len &&
            !memcmp(c->nodes[i].host, host, host_len))
            return (uint16_t)i;
    if (c->n_nodes == SB_RC_MAX_NODES)
        return RC_NONE;
    rc_node *nd = &c->nodes[c->n_nodes];
    memset(nd, 0, sizeof *nd);
    memcpy(nd->host, host, host_len);
    nd->host[host_len] = 0;
    nd->port = port;
    c->st.n_nodes = c->n_nodes + 1;
    return (uint16_t)c->n_nodes++;
}

/* Parse "host:port" (the last colon splits, so "::1:6379" works). */
static bool parse_hostport(const char *s, size_t n, const char **host, size_t *host_len, int *port)
{
    const char *colon = NULL;
    for (size_t i = 0; i < n; i++)
        if (s[i] == ':')
            colon = s + i;
    if (!colon || colon == s)
        return false;
    long p = 0;
    size_t digits = 0;
    for (const char *q = colon + 1; q < s + n; q++, digits++) {
        if (*q < '0' || *q > '9' || p > 65535)
            return false;
        p = p * 10 + (*q - '0');
    }
    if (!digits || p <= 0 || p > 65535)
        return false;
    *host = s;
    *host_len = (size_t)(colon - s);
    *port = (int)p;
    return true;
}

static bool fifo_push(rc_node *nd, int v)
{
    if (nd->fifo_head + nd->fifo_len == nd->fifo_cap) {
        if (nd->fifo_head) { /* slide down before growing */
            memmove(nd->fifo, nd->fifo + nd->fifo_head, nd->fifo_len * sizeof *nd->fifo);
            nd->fifo_head = 0;
        } else {
            size_t cap = nd->fifo_cap ? nd->fifo_cap * 2 : 64;
            int *f = realloc(nd->fifo, cap * sizeof *f);
            if (!f)
                return false;
            nd->fifo = f;
            nd->fifo_cap = cap;
        }
    }
    nd->fifo[nd->fifo_head + nd->fifo_len++] = v;
    return true;
}

/* The value bytes an operation moves, as its node's window counts them:
 * a GET's expected value (hint), a SET's or REPLACE's value. */
static size_t op_bytes(const sb_rc_op *op)
{
    return op->kind == SB_RC_GET ? op->hint
           : op->kind == SB_RC_SET || op->kind == SB_RC_REPLACE ? op->val_len
                                                                : 0;
}

static int fifo_pop(rc_node *nd)
{
    int v = nd->fifo[nd->fifo_head++];
    if (--nd->fifo_len == 0)
        nd->fifo_head = 0;
    return v;
}

static void node_drop(rc_node *nd)
{
    if (nd->ctx)
        redisFree(nd->ctx);
    nd->ctx = NULL;
    nd->readonly = false;
    nd->fifo_head = nd->fifo_len = 0;
    nd->owed_bytes = 0;
    nd->bulk.on = false;
    nd->pend_n = 0;
    nd->feed_left = 0;
}

/* Make sure nd has a connection, AUTH queued first. Returns false when
 * the connection cannot even be started (the node is then marked down). */
static bool node_connect(sb_rc *c, uint16_t idx)
{
    rc_node *nd = &c->nodes[idx];
    if (nd->ctx)
        return true;
    redisContext *ctx = redisConnectNonBlock(nd->host, nd->port);
    if (!ctx || ctx->err) {
        if (ctx)
            redisFree(ctx);
        nd->down_until = rc_now(c) + (uint64_t)c->cfg.down_ms * 1000000ull;
        nd->down_fault = RC_F_CONNECT;
        c->st.node_errors++;
        note_fault(c, RC_F_CONNECT, NULL, 0);
        return false;
    }
    nd->ctx = ctx;
    /* Keep the reader's buffer between replies (hiredis frees it whenever
     * it empties with more than 16 KiB spare, then grows it again for the
     * next value: page values would churn it). */
    ctx->reader->maxbuf = 0;
    nd->fifo_head = nd->fifo_len = 0;
    if (c->password) {
        const char *argv[3] = { "AUTH", c->user ? c->user : c->password, c->password };
        int argc = c->user ? 3 : 2;
        size_t lens[3] = { 4, strlen(argv[1]), strlen(c->password) };
        if (redisAppendCommandArgv(ctx, argc, argv, lens) != REDIS_OK || !fifo_push(nd, MK_AUTH)) {
            node_drop(nd);
            return false;
        }
    }
    return true;
}

static bool node_up(const sb_rc *c, uint16_t idx, uint64_t now)
{
    return idx != RC_NONE && idx < c->n_nodes && c->nodes[idx].down_until <= now;
}

/* ---- the poll loop --------------------------------------------------------- */

typedef struct rc_batch {
    sb_rc_op *ops;
    rc_track *tr;
    size_t n;
    size_t n_round;  /* operations that must go round again */
    bool held;       /* operations wait for room in their node's window */
    sb_rc_got_fn got; /* a value arrived (may be NULL) */
    sb_rc_sink_fn sink; /* where a value goes (may be NULL) */
    void *got_ctx;      /* got's and sink's */
    sb_rc_limits *lim; /* the batch's bounds (see rcluster.h) */
    uint64_t hard;    /* sb_rc_exec's bound: t0 + timeout_ms; 0: none */
    uint64_t last_progress; /* clock of the last reply read */
} rc_batch;

static void op_settle(sb_rc_op *op, rc_track *t, sb_rc_status s);

/* The clock at which batch b stops waiting: the stall bound from its last
 * reply, the caller's until and the hard bound, whichever comes first. */
static uint64_t batch_deadline(const rc_batch *b)
{
    uint64_t d = b->last_progress + b->lim->stall_ns;
    uint64_t until = __atomic_load_n(&b->lim->until_ns, __ATOMIC_RELAXED);
    if (until && until < d)
        d = until;
    if (b->hard && b->hard < d)
        d = b->hard;
    return d;
}

/* The caller's budget ran out while node idx still owed replies: its
 * operations end DOWN with RC_F_DEADLINE and its connection is dropped
 * (a late reply must not meet a later request), but it is not marked
 * down: it was answering. */
static void node_cut(sb_rc *c, rc_batch *b, uint16_t idx)
{
    rc_node *nd = &c->nodes[idx];
    for (size_t k = 0; k < nd->fifo_len; k++) {
        int v = nd->fifo[nd->fifo_head + k];
        if (v >= 0 && !b->tr[v].done) {
            b->tr[v].fault = RC_F_DEADLINE;
            op_settle(&b->ops[v], &b->tr[v], SB_RC_DOWN);
        }
    }
    node_drop(nd);
    c->st.cuts++;
}

static void op_settle(sb_rc_op *op, rc_track *t, sb_rc_status s)
{
    op->status = s;
    if (s == SB_RC_DOWN)
        op->fault = t->fault ? (sb_rc_fault)t->fault : RC_F_DEADLINE;
    t->done = true;
    t->in_flight = false;
}

/* An operation goes round again (dispatch picks its node anew), or is
 * DOWN when it has used its redirections. */
static void op_again(sb_rc *c, rc_batch *b, size_t i, bool redirect)
{
    rc_track *t = &b->tr[i];
    t->in_flight = false;
    if (redirect ? ++t->hops > c->cfg.max_redirects : ++t->retries > 1) {
        op_settle(&b->ops[i], t, SB_RC_DOWN);
        return;
    }
    b->n_round++;
}

/* A node failed: mark it down, and send what it owed round again. */
static void node_fail(sb_rc *c, rc_batch *b, uint16_t idx, bool timeout)
{
    rc_node *nd = &c->nodes[idx];
    for (size_t k = 0; k < nd->fifo_len; k++) {
        int v = nd->fifo[nd->fifo_head + k];
        if (v >= 0 && b && !b->tr[v].done) {
            b->tr[v].fault = timeout ? RC_F_TIMEOUT : RC_F_CONNECT;
            op_again(c, b, (size_t)v, false);
        }
    }
    note_fault(c, timeout ? RC_F_TIMEOUT : RC_F_CONNECT, NULL, 0);
    node_drop(nd);
    nd->down_until = rc_now(c) + (uint64_t)c->cfg.down_ms * 1000000ull;
    nd->down_fault = timeout ? RC_F_TIMEOUT : RC_F_CONNECT;
    nd->dead_in_pump = true;
    c->refresh_due = true;
    if (timeout)
        c->st.timeouts++;
    else
        c->st.node_errors++;
}

/* The first word of an error reply, and for MOVED/ASK its target. */
static bool parse_redirect(const char *msg, size_t len, const char *word, unsigned *slot,
                           const char **host, size_t *host_len, int *port)
{
    size_t wl = strlen(word);
    if (len <= wl + 1 || memcmp(msg, word, wl) || msg[wl] != ' ')
        return false;
    const char *p = msg + wl + 1, *end = msg + len;
    unsigned s = 0;
    while (p < end && *p >= '0' && *p <= '9')
        s = s * 10 + (unsigned)(*p++ - '0');
    if (p == end || *p != ' ' || s >= SB_RC_SLOTS)
        return false;
    *slot = s;
    p++;
    return parse_hostport(p, (size_t)(end - p), host, host_len, port);
}

/* GET ops[i] got its value from node: data (malloc'd, now the op's) or,
 * in_sink, the spans its sink gave. */
static void got_value(sb_rc *c, rc_batch *b, uint16_t node, size_t i, void *data, size_t len,
                      bool in_sink)
{
    sb_rc_op *op = &b->ops[i];
    rc_track *t = &b->tr[i];
    op->data = data;
    op->len = len;
    op->in_sink = in_sink;
    c->st.bytes_in += len;
    c->st.sunk += in_sink;
    if (c->owner[t->slot] != node)
        c->st.replica_reads++;
    op_settle(op, t, SB_RC_OK);
    if (b->got)
        b->got(b->got_ctx, i, op);
}

/* Step 4: settle one operation from its reply (which it may keep). */
static void on_reply(sb_rc *c, rc_batch *b, uint16_t node, size_t i, redisReply *r)
{
    sb_rc_op *op = &b->ops[i];
    rc_track *t = &b->tr[i];
    if (r->type == REDIS_REPLY_ERROR) {
        const char *host;
        size_t host_len, n = r->str ? (size_t)r->len : 0;
        int port;
        unsigned slot;
        if (parse_redirect(r->str, n, "MOVED", &slot, &host, &host_len, &port)) {
            uint16_t to = node_find(c, host, host_len, port);
            if (to != RC_NONE)
                c->owner[slot] = to;
            c->refresh_due = true;
            c->st.moved++;
            t->ask = RC_NONE;
            op_again(c, b, i, true);
        } else if (parse_redirect(r->str, n, "ASK", &slot, &host, &host_len, &port)) {
            t->ask = node_find(c, host, host_len, port);
            c->st.ask++;
            op_again(c, b, i, true);
        } else if (starts_with(r->str, n, "TRYAGAIN") || starts_with(r->str, n, "CLUSTERDOWN") ||
                   starts_with(r->str, n, "LOADING") || starts_with(r->str, n, "MASTERDOWN")) {
            c->refresh_due = true;
            c->st.tryagain++;
            t->ask = RC_NONE;
            t->fault = RC_F_CLUSTERDOWN;
            snprintf(op->err_msg, sizeof op->err_msg, "%.*s", (int)(n < 95 ? n : 95), r->str);
            op_again(c, b, i, true);
        } else {
            snprintf(op->err_msg, sizeof op->err_msg, "%.*s", (int)(n < 95 ? n : 95),
                     r->str ? r->str : "");
            op->fault = sb_rc_fault_of(r->str, n);
            op_settle(op, t, SB_RC_REFUSED);
        }
        (void)node;
        return;
    }
    switch (op->kind) {
    case SB_RC_GET:
        if (r->type == REDIS_REPLY_STRING) {
            /* Take the reply's buffer (hiredis 0.14 allocates it with
             * malloc and frees it with free): no copy. */
            void *data = r->str;
            size_t len = (size_t)r->len;
            r->str = NULL;
            r->len = 0;
            got_value(c, b, node, i, data, len, false);
        } else {
            if (r->type != REDIS_REPLY_NIL)
                op->fault = RC_F_WRONGTYPE;
            op_settle(op, t, r->type == REDIS_REPLY_NIL ? SB_RC_MISSING : SB_RC_REFUSED);
        }
        break;
    case SB_RC_SET:
        op_settle(op, t,
                  r->type == REDIS_REPLY_STATUS ? SB_RC_OK
                  : r->type == REDIS_REPLY_NIL  ? SB_RC_MISSING
                                                : SB_RC_REFUSED);
        break;
    case SB_RC_EXISTS:
    case SB_RC_DEL:
    case SB_RC_REPLACE:
        op_settle(op, t,
                  r->type != REDIS_REPLY_INTEGER ? SB_RC_REFUSED
                  : r->integer > 0               ? SB_RC_OK
                                                 : SB_RC_MISSING);
        break;
    }
}

/* A reply to a marker. AUTH refused: every operation on the node is
 * REFUSED with the server's words (retrying cannot help). */
static void on_marker(sb_rc *c, rc_batch *b, uint16_t idx, int mk, redisReply *r)
{
    rc_node *nd = &c->nodes[idx];
    if (mk == MK_SLOTS) {
        if (r->type == REDIS_REPLY_ERROR)
            note_fault(c, sb_rc_fault_of(r->str, (size_t)r->len), r->str, (size_t)r->len);
        if (c->slots_reply)
            freeReplyObject(c->slots_reply);
        c->slots_reply = r;
        return;
    }
    if (r->type == REDIS_REPLY_ERROR && mk == MK_AUTH) {
        note_fault(c, RC_F_AUTH, r->str, (size_t)r->len);
        for (size_t k = 0; b && k < nd->fifo_len; k++) {
            int v = nd->fifo[nd->fifo_head + k];
            if (v >= 0 && !b->tr[v].done) {
                snprintf(b->ops[v].err_msg, sizeof b->ops[v].err_msg, "%.*s",
                         (int)(r->len < 95 ? r->len : 95), r->str ? r->str : "");
                b->ops[v].fault = RC_F_AUTH;
                op_settle(&b->ops[v], &b->tr[v], SB_RC_REFUSED);
            }
        }
        /* Refused credentials: the connection is not used as whoever the
         * server then takes it for (a default user without a password
         * would answer): dropped, the node down for down_ms. */
        freeReplyObject(r);
        node_drop(nd);
        nd->down_until = rc_now(c) + (uint64_t)c->cfg.down_ms * 1000000ull;
        nd->down_fault = RC_F_AUTH;
        return;
    }
    if (mk == MK_READONLY && r->type != REDIS_REPLY_ERROR)
        nd->readonly = true;
    freeReplyObject(r);
}

/* m more bytes of the bulk's spans were filled, in order: move past them
 * (and past spans left empty). */
static void bulk_took(rc_bulk *k, size_t m)
{
    k->left -= m;
    while (k->n_sp && m >= k->sp[0].iov_len) {
        m -= k->sp[0].iov_len;
        k->sp[0] = k->sp[1];
        k->sp[1] = (struct iovec){ 0 };
        k->n_sp--;
    }
    if (m) { /* (no offset to the null base a spent bulk is left with) */
        k->sp[0].iov_base = (char *)k->sp[0].iov_base + m;
        k->sp[0].iov_len -= m;
    }
}

/* hiredis' reader holds nothing: no bytes fed and not yet taken, no
 * reply half built. Only then may bytes bypass it. A call that found no
 * reply leaves the reader at its first task with no type yet (ridx 0):
 * that is empty too. */
static bool reader_empty(const redisContext *ctx)
{
    const redisReader *r = ctx->reader;
    if (r->pos < r->len)
        return false;
#if HIREDIS_MAJOR >= 1
    return r->ridx < 0 || (r->ridx == 0 && r->task[0]->type < 0);
#else
    return r->ridx < 0 || (r->ridx == 0 && r->rstack[0].type < 0);
#endif
}

/* Hand what the reader has complete to the FIFO's entries. Returns false
 * when the node failed (a bad reply). */
static bool drain_reader(sb_rc *c, rc_batch *b, uint16_t idx)
{
    rc_node *nd = &c->nodes[idx];
    void *rep;
    while (nd->ctx && nd->fifo_len) {
        if (redisGetReplyFromReader(nd->ctx, &rep) != REDIS_OK) {
            node_fail(c, b, idx, false);
            return false;
        }
        if (!rep)
            break;
        if (b)
            b->last_progress = rc_now(c);
        int v = fifo_pop(nd);
        if (v >= 0 && b)
            nd->owed_bytes -= op_bytes(&b->ops[v]);
        if (v >= 0) {
            if (b && !b->tr[v].done)
                on_reply(c, b, idx, (size_t)v, rep);
            freeReplyObject(rep);
        } else {
            on_marker(c, b, idx, v, rep);
        }
    }
    return nd->ctx != NULL;
}

/* Copy up to n bytes of p into the bulk's spans. Returns how many. */
static size_t bulk_fill(rc_bulk *k, const unsigned char *p, size_t n)
{
    size_t done = 0;
    while (done < n && k->left) {
        struct iovec *v = &k->sp[0];
        size_t m = n - done < v->iov_len ? n - done : v->iov_len;
        memcpy(v->iov_base, p + done, m);
        bulk_took(k, m);
        done += m;
    }
    return done;
}

/* A bulk header "$<len>\r\n" at p[0, n)? 1: yes (*len, *hlen its
 * length); 0: its start, cut by the read's end (fewer than RC_HDR_MAX
 * bytes); -1: something else ("$-1", another reply, not the protocol). */
static int bulk_header(const unsigned char *p, size_t n, size_t *len, size_t *hlen)
{
    if (!n || p[0] != '$')
        return -1;
    size_t v = 0, i = 1;
    for (; i < n && i <= 19 && p[i] >= '0' && p[i] <= '9'; i++)
        v = v * 10 + (size_t)(p[i] - '0');
    if (i == n || (i + 1 == n && p[i] == '\r'))
        return n < RC_HDR_MAX ? 0 : -1;
    if (i == 1 || i > 19 || p[i] != '\r' || p[i + 1] != '\n')
        return -1;
    *len = v;
    *hlen = i + 2;
    return 1;
}

/* The bytes of the reply starting at p[0, n) when they are known from
 * its first line: a status, error, integer or nil line, or a bulk value
 * (header, value, CRLF). 0: not known (an array, a line cut by the read's
 * end, not the protocol). */
static size_t reply_bytes(const unsigned char *p, size_t n)
{
    size_t len, hlen;
    if (bulk_header(p, n, &len, &hlen) == 1)
        return len <= SIZE_MAX - hlen - 2 ? hlen + len + 2 : 0;
    if (n && (p[0] == '+' || p[0] == '-' || p[0] == ':' || p[0] == '$')) {
        const unsigned char *nl = memchr(p, '\n', n);
        return nl ? (size_t)(nl - p) + 1 : 0;
    }
    return 0;
}

/* Bytes p[0, n) arrived from node idx (after any that went straight into a
 * bulk's spans), with a sink in the batch: a bulk's rest and its CRLF;
 * a value for the GET at the FIFO's head read into its sink's spans; any
 * other reply whose length its first line tells fed to hiredis' reader
 * alone (nd->feed_left), so that the value after it can still go to its
 * spans; what is left (an array, a cut line) fed whole. Without a sink
 * everything goes to the reader. Returns false when the node failed. */
static bool node_take(sb_rc *c, rc_batch *b, uint16_t idx, const unsigned char *p, size_t n)
{
    rc_node *nd = &c->nodes[idx];
    rc_bulk *k = &nd->bulk;
    bool sink = b && b->sink;
    while (n) {
        if (k->on) {
            size_t m = bulk_fill(k, p, n);
            p += m, n -= m;
            for (; n && k->crlf < 2; p++, n--, k->crlf++)
                if (*p != (k->crlf ? '\n' : '\r')) {
                    node_fail(c, b, idx, false); /* not the protocol */
                    return false;
                }
            if (k->crlf < 2)
                return true;
            k->on = false;
            int v = fifo_pop(nd);
            if (b && v >= 0)
                nd->owed_bytes -= op_bytes(&b->ops[v]);
            if (b)
                b->last_progress = rc_now(c);
            if (b && v == k->op && !b->tr[v].done)
                got_value(c, b, idx, (size_t)v, NULL, k->len, true);
            if (!nd->ctx)
                return false;
            continue;
        }
        size_t feed = n;
        if (sink && nd->feed_left) {
            feed = n < nd->feed_left ? n : nd->feed_left;
            nd->feed_left -= feed;
        } else if (sink && nd->fifo_len && reader_empty(nd->ctx)) {
            int v = nd->fifo[nd->fifo_head];
            size_t len, hlen;
            int h = bulk_header(p, n, &len, &hlen);
            if (h == 0) { /* the rest of the header comes with the next read */
                memcpy(nd->pend, p, n);
                nd->pend_n = n;
                return true;
            }
            struct iovec sp[2] = { { 0 } };
            unsigned ns = 0;
            if (h == 1 && v >= 0 && !b->tr[v].done && b->ops[v].kind == SB_RC_GET)
                ns = b->sink(b->got_ctx, (size_t)v, len, sp);
            size_t sum = 0;
            for (unsigned i = 0; i < ns && i < 2; i++)
                sum += sp[i].iov_len;
            if (ns && ns <= 2 && sum == len) {
                *k = (rc_bulk){ .on = true, .op = v, .len = len, .n_sp = ns, .left = len };
                memcpy(k->sp, sp, sizeof sp);
                bulk_took(k, 0); /* past an empty first span */
                p += hlen, n -= hlen;
                continue;
            }
            size_t whole = reply_bytes(p, n);
            if (whole) {
                feed = n < whole ? n : whole;
                nd->feed_left = whole - feed;
            }
        }
        if (redisReaderFeed(nd->ctx->reader, (const char *)p, feed) != REDIS_OK) {
            node_fail(c, b, idx, false);
            return false;
        }
        p += feed, n -= feed;
        if (!drain_reader(c, b, idx))
            return false;
    }
    return true;
}

/* Node idx's socket is readable: read it. While a value goes to its
 * sink's spans, one readv() fills the spans' rest and takes at most
 * RC_TAIL bytes after it; otherwise up to RC_RBUF bytes go to the read
 * buffer (after a header's start left in pend). */
static void node_read(sb_rc *c, rc_batch *b, uint16_t idx)
{
    rc_node *nd = &c->nodes[idx];
    rc_bulk *k = &nd->bulk;
    struct iovec iov[3];
    int n_iov = 0;
    size_t pre = 0;
    if (k->on && k->left) {
        for (unsigned s = 0; s < k->n_sp; s++)
            iov[n_iov++] = k->sp[s];
        iov[n_iov++] = (struct iovec){ c->rbuf, RC_TAIL };
    } else {
        pre = nd->pend_n;
        memcpy(c->rbuf, nd->pend, pre);
        iov[n_iov++] = (struct iovec){ c->rbuf + pre, RC_RBUF - pre };
    }
    ssize_t got = readv(nd->ctx->fd, iov, n_iov);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (got <= 0) {
        node_fail(c, b, idx, false); /* closed or failed */
        return;
    }
    size_t n = (size_t)got;
    if (k->on && k->left) {
        size_t into = n < k->left ? n : k->left;
        bulk_took(k, into);
        node_take(c, b, idx, c->rbuf, n - into);
        return;
    }
    nd->pend_n = 0;
    node_take(c, b, idx, c->rbuf, pre + n);
}

/* Step 3: service every node that owes replies until none does or the
 * deadline passes; then nodes still owing are failed as timed out. */
static void dispatch(sb_rc *c, rc_batch *b, bool refill);

static void pump(sb_rc *c, rc_batch *b, uint64_t deadline)
{
    bool timed = b && b->lim;
    struct pollfd pfd[SB_RC_MAX_NODES];
    uint16_t who[SB_RC_MAX_NODES];
    for (uint32_t i = 0; i < c->n_nodes; i++)
        c->nodes[i].dead_in_pump = false;
    for (;;) {
        if (b && b->held && !c->refresh_due)
            dispatch(c, b, true); /* replies made room in a window */
        nfds_t n = 0;
        for (uint32_t i = 0; i < c->n_nodes; i++) {
            rc_node *nd = &c->nodes[i];
            if (!nd->ctx || !nd->fifo_len)
                continue;
            short ev = POLLIN;
            if (sdslen(nd->ctx->obuf) > 0)
                ev |= POLLOUT;
            pfd[n] = (struct pollfd){ .fd = nd->ctx->fd, .events = ev };
            who[n++] = (uint16_t)i;
        }
        if (!n)
            return;
        uint64_t now = rc_now(c);
        if (timed)
            deadline = batch_deadline(b);
        if (now >= deadline) {
            /* A stall (no reply for stall_ns) or the hard bound: the nodes
             * owing replies are failed as timed out; the caller's until
             * reached while replies flowed: they are only cut. */
            bool cut = timed && now < b->last_progress + b->lim->stall_ns &&
                       (!b->hard || now < b->hard);
            for (nfds_t k = 0; k < n; k++) {
                if (cut)
                    node_cut(c, b, who[k]);
                else
                    node_fail(c, b, who[k], true);
            }
            return;
        }
        int ms = (int)((deadline - now + 999999) / 1000000);
        int rc = poll(pfd, n, ms);
        if (rc < 0 && errno != EINTR)
            return;
        if (rc <= 0)
            continue;
        for (nfds_t k = 0; k < n; k++) {
            uint16_t idx = who[k];
            rc_node *nd = &c->nodes[idx];
            if (!nd->ctx || !pfd[k].revents)
                continue;
            if (pfd[k].revents & POLLOUT) {
                size_t before = sdslen(nd->ctx->obuf);
                int done = 0;
                if (redisBufferWrite(nd->ctx, &done) != REDIS_OK) {
                    node_fail(c, b, idx, false);
                    continue;
                }
                c->st.bytes_out += before - sdslen(nd->ctx->obuf);
            }
            if (pfd[k].revents & (POLLIN | POLLERR | POLLHUP))
                node_read(c, b, idx);
        }
    }
}

/* ---- the slot map ---------------------------------------------------------- */

/* Install a CLUSTER SLOTS reply read from node `from`. Returns false when
 * the reply is not one. */
static bool install_slots(sb_rc *c, uint16_t from, const redisReply *r)
{
    if (r->type != REDIS_REPLY_ARRAY)
        return false;
    uint16_t owner[SB_RC_SLOTS], replica[SB_RC_SLOTS];
    for (unsigned s = 0; s < SB_RC_SLOTS; s++)
        owner[s] = replica[s] = RC_NONE;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
            e->element[0]->type != REDIS_REPLY_INTEGER ||
            e->element[1]->type != REDIS_REPLY_INTEGER)
            return false;
        long long lo = e->element[0]->integer, hi = e->element[1]->integer;
        if (lo < 0 || hi >= SB_RC_SLOTS || lo > hi)
            return false;
        uint16_t ids[2] = { RC_NONE, RC_NONE };
        for (size_t j = 2; j < e->elements && j < 4; j++) {
            const redisReply *nd = e->element[j];
            if (nd->type != REDIS_REPLY_ARRAY || nd->elements < 2 ||
                nd->element[0]->type != REDIS_REPLY_STRING ||
                nd->element[1]->type != REDIS_REPLY_INTEGER)
                return false;
            const char *host = nd->element[0]->str;
            size_t hl = (size_t)nd->element[0]->len;
            if (hl == 0 || (hl == 1 && host[0] == '?')) { /* "" : the node asked */
                host = c->nodes[from].host;
                hl = strlen(host);
            }
            ids[j - 2] = node_find(c, host, hl, (int)nd->element[1]->integer);
        }
        for (long long s = lo; s <= hi; s++) {
            owner[s] = ids[0];
            replica[s] = ids[1];
        }
    }
    memcpy(c->owner, owner, sizeof owner);
    memcpy(c->replica, replica, sizeof replica);
    c->refresh_due = false;
    c->st.refreshes++;
    c->last_fault = RC_F_NONE;
    c->last_msg[0] = 0;
    return true;
}

/* Ask one node for the map. */
static bool refresh_from(sb_rc *c, uint16_t idx, uint64_t deadline)
{
    if (!node_connect(c, idx))
        return false;
    rc_node *nd = &c->nodes[idx];
    const char *argv[2] = { "CLUSTER", "SLOTS" };
    size_t lens[2] = { 7, 5 };
    if (redisAppendCommandArgv(nd->ctx, 2, argv, lens) != REDIS_OK || !fifo_push(nd, MK_SLOTS)) {
        node_drop(nd);
        return false;
    }
    pump(c, NULL, deadline);
    redisReply *r = c->slots_reply;
    c->slots_reply = NULL;
    bool ok = r && install_slots(c, idx, r);
    if (r)
        freeReplyObject(r);
    return ok;
}

/* Read the map from the first node that answers: known nodes that are up
 * (masters the map names first), then the seeds. */
static bool refresh(sb_rc *c, uint64_t deadline)
{
    uint64_t now = rc_now(c);
    for (uint32_t i = 0; i < c->n_nodes && rc_now(c) < deadline; i++)
        if (c->nodes[i].down_until <= now && refresh_from(c, (uint16_t)i, deadline))
            return true;
    /* Seeds are in the table from open; a node marked down is still
     * worth asking when nothing else answered. */
    for (uint32_t i = 0; i < c->n_nodes && rc_now(c) < deadline; i++)
        if (c->nodes[i].down_until > now && refresh_from(c, (uint16_t)i, deadline)) {
            c->nodes[i].down_until = 0;
            return true;
        }
    return false;
}

int sb_rc_refresh(sb_rc *c)
{
    if (!c)
        return SB_ERR_INVAL;
    return refresh(c, rc_now(c) + (uint64_t)c->cfg.timeout_ms * 1000000ull) ? SB_OK : SB_ERR_IO;
}

/* ---- batches ---------------------------------------------------------------- */

/* REPLACE: the value is written when the key is absent or still holds the
 * value whose SHA-1 the caller names (redis.sha1hex: the server hashes
 * what it holds), so a value someone else wrote meanwhile is never
 * overwritten. KEYS[1] key; ARGV value, digest, ttl (0: none). */
static const char replace_lua[] =
    "local v = redis.call('GET', KEYS[1]) "
    "if v and redis.sha1hex(v) ~= ARGV[2] then return 0 end "
    "if ARGV[3] ~= '0' then redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[3]) "
    "else redis.call('SET', KEYS[1], ARGV[1]) end "
    "return 1";

static bool append_op(rc_node *nd, const sb_rc_op *op)
{
    char ttl[16];
    const char *argv[6];
    size_t lens[6];
    int argc = 0;
    if (op->kind == SB_RC_REPLACE) {
        const char *av[7] = { "EVAL", replace_lua, "1", op->key, op->val ? op->val : "",
                              op->digest ? op->digest : "", ttl };
        size_t lv[7] = { 4, sizeof replace_lua - 1, 1, op->key_len, op->val_len,
                         op->digest ? strlen(op->digest) : 0, 0 };
        lv[6] = (size_t)snprintf(ttl, sizeof ttl, "%u", op->ttl_s);
        return redisAppendCommandArgv(nd->ctx, 7, av, lv) == REDIS_OK;
    }
    switch (op->kind) {
    case SB_RC_GET:
        argv[argc] = "GET", lens[argc++] = 3;
        break;
    case SB_RC_SET:
        argv[argc] = "SET", lens[argc++] = 3;
        break;
    case SB_RC_EXISTS:
        argv[argc] = "EXISTS", lens[argc++] = 6;
        break;
    case SB_RC_DEL:
        argv[argc] = "DEL", lens[argc++] = 3;
        break;
    case SB_RC_REPLACE:
        break;
    }
    argv[argc] = op->key, lens[argc++] = op->key_len;
    if (op->kind == SB_RC_SET) {
        argv[argc] = op->val ? op->val : "", lens[argc++] = op->val_len;
        if (op->ttl_s) {
            argv[argc] = "EX", lens[argc++] = 2;
            lens[argc] = (size_t)snprintf(ttl, sizeof ttl, "%u", op->ttl_s);
            argv[argc++] = ttl;
        }
        if (op->nx)
            argv[argc] = "NX", lens[argc++] = 2;
    }
    return redisAppendCommandArgv(nd->ctx, argc, argv, lens) == REDIS_OK;
}

static bool append_marker(rc_node *nd, int mk)
{
    const char *w = mk == MK_ASKING ? "ASKING" : "READONLY";
    size_t l = strlen(w);
    return redisAppendCommandArgv(nd->ctx, 1, &w, &l) == REDIS_OK && fifo_push(nd, mk);
}

/* Step 2: put every operation that has no answer and is not in flight on
 * its node's pipeline, at most SB_RC_WINDOW replies owed per node; the
 * rest are held (b->held), keeping their ASK target. refill: called from
 * pump as replies free room, for nodes already connected; an operation
 * with nowhere to go waits for the next round. */
static void dispatch(sb_rc *c, rc_batch *b, bool refill)
{
    uint64_t now = rc_now(c);
    b->held = false;
    for (size_t i = 0; i < b->n; i++) {
        rc_track *t = &b->tr[i];
        sb_rc_op *op = &b->ops[i];
        if (t->done || t->in_flight)
            continue;
        uint16_t idx = RC_NONE;
        int pre = 0;
        if (t->ask != RC_NONE && node_up(c, t->ask, now)) {
            idx = t->ask;
            pre = MK_ASKING;
        } else if (node_up(c, c->owner[t->slot], now)) {
            idx = c->owner[t->slot];
        } else if ((op->kind == SB_RC_GET || op->kind == SB_RC_EXISTS) &&
                   node_up(c, c->replica[t->slot], now)) {
            idx = c->replica[t->slot];
        }
        if (refill && (idx == RC_NONE || !c->nodes[idx].ctx)) {
            b->held = true; /* for the next round, which may refresh */
            continue;
        }
        t->ask = RC_NONE;
        if (idx == RC_NONE || !node_connect(c, idx)) {
            /* Nobody to ask now: wait for a refresh, or give up. */
            c->refresh_due = true;
            uint16_t own = c->owner[t->slot];
            t->fault = own != RC_NONE && c->nodes[own].down_fault ? c->nodes[own].down_fault
                       : c->last_fault                            ? c->last_fault
                                                                  : RC_F_CLUSTERDOWN;
            if (c->last_msg[0] && !op->err_msg[0])
                snprintf(op->err_msg, sizeof op->err_msg, "%s", c->last_msg);
            op_again(c, b, i, false);
            continue;
        }
        rc_node *nd = &c->nodes[idx];
        if (!pre && c->owner[t->slot] != idx && !nd->readonly)
            pre = MK_READONLY;
        size_t ob = op_bytes(op);
        if (nd->fifo_len && (nd->fifo_len + 1 + (pre != 0) > SB_RC_WINDOW ||
                             (nd->fifo_len >= 2 && nd->owed_bytes + ob > SB_RC_WINDOW_BYTES))) {
            b->held = true; /* its window is full: when replies make room */
            if (pre == MK_ASKING)
                t->ask = idx; /* still to be asked there */
            continue;
        }
        if ((pre && !append_marker(nd, pre)) || !append_op(nd, op) || !fifo_push(nd, (int)i)) {
            op_settle(op, t, SB_RC_NOMEM);
            node_fail(c, b, idx, false);
            continue;
        }
        t->in_flight = true;
        nd->owed_bytes += ob;
        if (nd->fifo_len > c->st.max_owed)
            c->st.max_owed = (uint32_t)nd->fifo_len;
        if (nd->owed_bytes > c->st.max_owed_bytes)
            c->st.max_owed_bytes = nd->owed_bytes;
        c->st.ops++;
        c->st.bytes_out += 0; /* counted as written, in pump */
    }
}

int sb_rc_exec(sb_rc *c, sb_rc_op *ops, size_t n)
{
    return sb_rc_exec_each(c, ops, n, NULL, NULL);
}

int sb_rc_exec_each(sb_rc *c, sb_rc_op *ops, size_t n, sb_rc_got_fn got, void *ctx)
{
    return sb_rc_exec_lim(c, ops, n, got, ctx, NULL);
}

int sb_rc_exec_lim(sb_rc *c, sb_rc_op *ops, size_t n, sb_rc_got_fn got, void *ctx,
                   sb_rc_limits *lim)
{
    return sb_rc_exec_sink(c, ops, n, NULL, got, ctx, lim);
}

int sb_rc_exec_sink(sb_rc *c, sb_rc_op *ops, size_t n, sb_rc_sink_fn sink, sb_rc_got_fn got,
                    void *ctx, sb_rc_limits *lim)
{
    if (!c || (!ops && n))
        return SB_ERR_INVAL;
    for (size_t i = 0; i < n; i++)
        if (!ops[i].key || ops[i].key_len > RC_KEY_MAX || (unsigned)ops[i].kind > SB_RC_REPLACE)
            return SB_ERR_INVAL;
    if (!n)
        return SB_OK;
    rc_track stack_tr[32];
    rc_track *tr = n <= 32 ? stack_tr : calloc(n, sizeof *tr);
    if (!tr) {
        for (size_t i = 0; i < n; i++)
            ops[i].status = SB_RC_NOMEM, ops[i].data = NULL, ops[i].len = 0;
        return SB_OK;
    }
    c->st.batches++;
    uint64_t t0 = rc_now(c);
    uint64_t timeout_ns = (uint64_t)c->cfg.timeout_ms * 1000000ull;
    sb_rc_limits own = { .stall_ns = timeout_ns };
    if (lim && !lim->stall_ns)
        lim->stall_ns = timeout_ns;
    bool unmapped = false;
    for (size_t i = 0; i < n; i++) {
        ops[i].status = SB_RC_DOWN;
        ops[i].data = NULL;
        ops[i].len = 0;
        ops[i].in_sink = 0;
        ops[i].err_msg[0] = 0;
        ops[i].fault = RC_F_NONE;
        tr[i] = (rc_track){ .slot = sb_rc_slot(ops[i].key, ops[i].key_len), .ask = RC_NONE };
        if (c->owner[tr[i].slot] == RC_NONE)
            unmapped = true;
    }
    rc_batch b = { .ops = ops, .tr = tr, .n = n, .got = got, .sink = sink, .got_ctx = ctx,
                   .lim = lim ? lim : &own, .hard = lim ? 0 : t0 + timeout_ns,
                   .last_progress = t0 };
    if (unmapped)
        c->refresh_due = true;
    for (;;) {
        if (c->refresh_due)
            refresh(c, batch_deadline(&b));
        b.n_round = 0;
        dispatch(c, &b, false);
        pump(c, &b, batch_deadline(&b));
        bool open = false;
        for (size_t i = 0; i < n && !open; i++)
            open = !tr[i].done;
        if (!open || rc_now(c) >= batch_deadline(&b))
            break;
        if (!b.n_round) {
            /* Operations are open but none could be sent: nothing will
             * change before the deadline unless a node returns; stop. */
            bool sendable = false;
            for (size_t i = 0; i < n; i++)
                sendable |= !tr[i].done && !tr[i].in_flight;
            if (!sendable)
                break;
        }
    }
    for (size_t i = 0; i < n; i++)
        if (!tr[i].done)
            op_settle(&ops[i], &tr[i], SB_RC_DOWN);
    /* A node still owing replies here (the loop stopped early, as when
     * poll() failed) is dropped: its late replies must not meet a later
     * batch's requests, nor a value this batch's sink gave spans for. */
    for (uint32_t i = 0; i < c->n_nodes; i++)
        if (c->nodes[i].ctx && c->nodes[i].fifo_len)
            node_drop(&c->nodes[i]);
    uint64_t now = rc_now(c);
    c->st.n_down = 0;
    for (uint32_t i = 0; i < c->n_nodes; i++)
        c->st.n_down += c->nodes[i].down_until > now;
    if (tr != stack_tr)
        free(tr);
    return SB_OK;
}

/* ---- open / close ------------------------------------------------------------ */

int sb_rc_open(const sb_rc_config *cfg, sb_rc **out, char *err, size_t err_len)
{
    if (!cfg || !out || !cfg->seeds || !*cfg->seeds) {
        set_err(err, err_len, "no seed node given");
        return SB_ERR_INVAL;
    }
    *out = NULL;
    sb_rc *c = calloc(1, sizeof *c);
    if (!c)
        return SB_ERR_NOMEM;
    c->cfg = *cfg;
    if (!c->cfg.timeout_ms)
        c->cfg.timeout_ms = 200;
    if (!c->cfg.connect_timeout_ms)
        c->cfg.connect_timeout_ms = c->cfg.timeout_ms;
    if (!c->cfg.down_ms)
        c->cfg.down_ms = 1000;
    if (!c->cfg.max_redirects)
        c->cfg.max_redirects = 5;
    c->seeds = strdup(cfg->seeds);
    c->user = cfg->user ? strdup(cfg->user) : NULL;
    c->password = cfg->password ? strdup(cfg->password) : NULL;
    c->cfg.seeds = c->seeds;
    c->cfg.user = c->user;
    c->cfg.password = c->password;
    if (!c->seeds || (cfg->user && !c->user) || (cfg->password && !c->password)) {
        sb_rc_close(c);
        return SB_ERR_NOMEM;
    }
    for (unsigned s = 0; s < SB_RC_SLOTS; s++)
        c->owner[s] = c->replica[s] = RC_NONE;
    const char *p = c->seeds;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *host;
        size_t hl;
        int port;
        if (!parse_hostport(p, len, &host, &hl, &port) || node_find(c, host, hl, port) == RC_NONE) {
            char msg[160];
            snprintf(msg, sizeof msg, "seed '%.*s' is not host:port", (int)(len < 100 ? len : 100), p);
            set_err(err, err_len, msg);
            sb_rc_close(c);
            return SB_ERR_INVAL;
        }
        p += len + (end ? 1 : 0);
    }
    refresh(c, rc_now(c) + (uint64_t)c->cfg.connect_timeout_ms * 1000000ull);
    *out = c;
    return SB_OK;
}

void sb_rc_close(sb_rc *c)
{
    if (!c)
        return;
    for (uint32_t i = 0; i < c->n_nodes; i++) {
        node_drop(&c->nodes[i]);
        free(c->nodes[i].fifo);
    }
    if (c->slots_reply)
        freeReplyObject(c->slots_reply);
    if (c->password) {
        memset(c->password, 0, strlen(c->password));
        free(c->password);
    }
    free(c->user);
    free(c->seeds);
    free(c);
}

void sb_rc_get_stats(const sb_rc *c, sb_rc_stats *out)
{
    if (c && out)
        *out = c->st;
}
