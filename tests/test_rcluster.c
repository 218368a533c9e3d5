/* test_rcluster.c -- the Redis Cluster client (store/remote/rcluster.h)
 * against a real local cluster: six redis-server processes on loopback,
 * three masters with a replica each, started and stopped by this test.
 *
 * Properties: every key reaches its slot's master and comes back intact
 * through pipelined batches, no node owing more than SB_RC_WINDOW replies,
 * read whole or into a sink's spans (sb_rc_exec_sink) in every test that
 * reads; sb_rc_exec_each hands each value to its callback once, as it
 * arrives;
 * MOVED (a slot moved under the client) and ASK (a slot being migrated)
 * are followed, an ASK once per operation even when the operation waits
 * for room in its node's window; a master killed mid-run is read from its
 * replica and written again after the failover, with the map
 * refreshed by itself; a master that hangs costs one deadline and then is
 * read from its replica; with the whole cluster gone every operation ends
 * DOWN within its deadline, and when the cluster returns the same client
 * serves again. No operation ever returns another key's value. Skipped
 * with a message when redis-server is not installed.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "rcluster.h"
#include "rcluster_util.h"
#include "snapbank.h"

static tu_cluster cl;
static bool have_cluster;

#define N_KEYS 1500

static char keys[N_KEYS][32];

/* The value of key i at version v: length and bytes both derive from
 * (i, v), so a value from another key or version cannot pass. */
static size_t val_len(int i, int v)
{
    if (i % 250 == 7)
        return 1u << 20; /* a few page-sized values */
    return 1 + (size_t)((i * 7919u + (unsigned)v * 104729u) % 3000);
}

static void val_fill(unsigned char *p, size_t n, int i, int v)
{
    uint64_t s = (uint64_t)i * 0x9e3779b97f4a7c15ull ^ (uint64_t)v << 32;
    for (size_t k = 0; k < n; k++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        p[k] = (unsigned char)s;
    }
}

static bool val_ok(const sb_rc_op *op, int i, int v)
{
    size_t n = val_len(i, v);
    if (op->len != n)
        return false;
    unsigned char *want = malloc(n);
    val_fill(want, n, i, v);
    bool ok = !memcmp(op->data, want, n);
    free(want);
    return ok;
}

static sb_rc *open_client(uint32_t timeout_ms, uint32_t down_ms)
{
    sb_rc_config cfg = { .seeds = cl.seeds, .timeout_ms = timeout_ms, .down_ms = down_ms };
    sb_rc *c = NULL;
    char err[128];
    assert_int_equal(sb_rc_open(&cfg, &c, err, sizeof err), SB_OK);
    return c;
}

/* SET keys [from, to) at version v in batches; asserts every one is OK. */
static void put_range(sb_rc *c, int from, int to, int v)
{
    sb_rc_op ops[64];
    unsigned char *bufs[64];
    for (int i = from; i < to; i += 64) {
        int n = to - i < 64 ? to - i : 64;
        for (int k = 0; k < n; k++) {
            size_t len = val_len(i + k, v);
            bufs[k] = malloc(len);
            val_fill(bufs[k], len, i + k, v);
            ops[k] = (sb_rc_op){ .kind = SB_RC_SET, .key = keys[i + k],
                                 .key_len = strlen(keys[i + k]), .val = bufs[k], .val_len = len };
        }
        assert_int_equal(sb_rc_exec(c, ops, (size_t)n), SB_OK);
        for (int k = 0; k < n; k++) {
            if (ops[k].status != SB_RC_OK)
                fail_msg("SET %s: %s %s", keys[i + k], sb_rc_status_name(ops[k].status),
                         ops[k].err_msg);
            free(bufs[k]);
        }
    }
}

/* get_range's sink: odd operations' values go into a buffer of their
 * own, in two spans split at a third (asked again after a node failed:
 * the buffer is made anew); even ones are declined (read whole). */
typedef struct range_sink {
    unsigned char *buf[64];
} range_sink;

static unsigned range_sink_fn(void *ctx, size_t i, size_t len, struct iovec out[2])
{
    range_sink *s = ctx;
    assert_true(i < 64);
    if (i % 2 == 0)
        return 0;
    free(s->buf[i]);
    s->buf[i] = malloc(len ? len : 1);
    assert_non_null(s->buf[i]);
    out[0] = (struct iovec){ s->buf[i], len / 3 };
    out[1] = (struct iovec){ s->buf[i] + len / 3, len - len / 3 };
    return 2;
}

/* GET keys [from, to): counts OK (each checked against version v) and
 * DOWN; any other outcome, or a wrong value, fails. Every other batch
 * reads half of its values into a sink's spans (sb_rc_exec_sink), and
 * gives half of its GETs a hint of their length (the window in bytes), so
 * the failure tests meet both ways of reading a value. */
static void get_range(sb_rc *c, int from, int to, int v, int *n_ok, int *n_down)
{
    static unsigned batches;
    sb_rc_op ops[64];
    *n_ok = *n_down = 0;
    for (int i = from; i < to; i += 64) {
        int n = to - i < 64 ? to - i : 64;
        for (int k = 0; k < n; k++)
            ops[k] = (sb_rc_op){ .kind = SB_RC_GET, .key = keys[i + k],
                                 .key_len = strlen(keys[i + k]),
                                 .hint = k % 4 < 2 ? val_len(i + k, v) : 0 };
        range_sink rs = { { NULL } };
        bool sink = batches++ % 2;
        assert_int_equal(sb_rc_exec_sink(c, ops, (size_t)n, sink ? range_sink_fn : NULL, NULL,
                                         &rs, NULL),
                         SB_OK);
        for (int k = 0; k < n; k++) {
            if (ops[k].status == SB_RC_OK && ops[k].in_sink) {
                assert_true(sink && k % 2 == 1);
                assert_null(ops[k].data);
                ops[k].data = rs.buf[k]; /* checked and freed below */
                rs.buf[k] = NULL;
            }
            free(rs.buf[k]);
            if (ops[k].status == SB_RC_OK) {
                if (!val_ok(&ops[k], i + k, v))
                    fail_msg("GET %s returned a wrong value", keys[i + k]);
                (*n_ok)++;
            } else if (ops[k].status == SB_RC_DOWN) {
                (*n_down)++;
            } else {
                fail_msg("GET %s: %s %s", keys[i + k], sb_rc_status_name(ops[k].status),
                         ops[k].err_msg);
            }
            free(ops[k].data);
        }
    }
}

/* Whether running server i is not a master, or a master one of whose
 * replicas has every write it made (acknowledged its replication offset),
 * is linked to it, and holds as many keys as it does. */
static bool master_covered(int i)
{
    char info[8192], a[64], b[64], rinfo[8192];
    const char *repl[2] = { "INFO", "replication" }, *dbsize[1] = { "DBSIZE" };
    if (tu_cluster_cmd(&cl, i, info, sizeof info, 2, repl) != 0)
        return false;
    char *p = strstr(info, "master_repl_offset:");
    if (!strstr(info, "role:master"))
        return true;
    if (!p || tu_cluster_cmd(&cl, i, a, sizeof a, 1, dbsize) != 0)
        return false;
    long long mo = atoll(p + 19);
    /* slaveN:ip=...,port=P,state=online,offset=O,lag=L */
    for (char *q = strstr(info, ",port="); q; q = strstr(q + 1, ",port=")) {
        int port = atoi(q + 6);
        char *st = strstr(q, ",state=online,offset=");
        char *eol = strchr(q, '\n');
        if (!st || (eol && st > eol) || atoll(st + 21) != mo)
            continue;
        for (int j = 0; j < cl.n; j++)
            if (cl.ports[j] == port && cl.pids[j] > 0 &&
                tu_cluster_cmd(&cl, j, rinfo, sizeof rinfo, 2, repl) == 0 &&
                strstr(rinfo, "master_link_status:up") &&
                tu_cluster_cmd(&cl, j, b, sizeof b, 1, dbsize) == 0 && !strcmp(a, b))
                return true;
    }
    return false;
}

/* Wait until every running master has a replica with every write it made
 * (so a replica read after the master dies sees every key at its latest
 * value). A replica's first sync starts a few seconds after the cluster
 * forms (redis' diskless sync delay); until then it holds nothing. */
static void wait_replicated(void)
{
    for (int tries = 0; tries < 600; tries++) {
        bool all = true;
        for (int i = 0; i < cl.n && all; i++)
            all = cl.pids[i] <= 0 || master_covered(i);
        if (all)
            return;
        struct timespec ts = { 0, 50000000 };
        nanosleep(&ts, NULL);
    }
    for (int i = 0; i < cl.n; i++) { /* what the servers say, for the log */
        char info[8192], n[64] = "?";
        const char *repl[2] = { "INFO", "replication" }, *dbsize[1] = { "DBSIZE" };
        if (cl.pids[i] <= 0 || tu_cluster_cmd(&cl, i, info, sizeof info, 2, repl) != 0)
            continue;
        (void)tu_cluster_cmd(&cl, i, n, sizeof n, 1, dbsize);
        fprintf(stderr, "server %d (port %d): %s keys\n%s\n", i, cl.ports[i], n, info);
    }
    fail_msg("replicas did not catch up");
}

/* SET keys [from, to) at version v until every one reads back at v and
 * every master's replica has them. Redis replicates asynchronously: a
 * failover the cluster starts by itself (a node late past
 * cluster-node-timeout on a loaded machine) may drop writes it had
 * acknowledged. A test that then kills a node must know what was there
 * before its own fault, so it writes until the keys stay. */
static void put_replicated(sb_rc *c, int from, int to, int v)
{
    for (int tries = 0; tries < 5; tries++) {
        put_range(c, from, to, v);
        wait_replicated();
        int ok = 0;
        sb_rc_op ops[64];
        for (int i = from; i < to; i += 64) {
            int n = to - i < 64 ? to - i : 64;
            for (int k = 0; k < n; k++)
                ops[k] = (sb_rc_op){ .kind = SB_RC_GET, .key = keys[i + k],
                                     .key_len = strlen(keys[i + k]) };
            assert_int_equal(sb_rc_exec(c, ops, (size_t)n), SB_OK);
            for (int k = 0; k < n; k++) {
                ok += ops[k].status == SB_RC_OK && val_ok(&ops[k], i + k, v);
                free(ops[k].data);
            }
        }
        if (ok == to - from)
            return;
        fprintf(stderr, "put_replicated: %d of %d keys lost (a failover of its own?); again\n",
                to - from - ok, to - from);
        assert_int_equal(tu_cluster_wait_ok(&cl, 60), 0);
    }
    fail_msg("keys [%d, %d) did not stay written", from, to);
}

static int group_setup(void **state)
{
    (void)state;
    for (int i = 0; i < N_KEYS; i++)
        snprintf(keys[i], sizeof keys[i], "sbtest:%d", i);
    return tu_cluster_suite_start(&cl, "test_rcluster", &have_cluster);
}

static int group_teardown(void **state)
{
    (void)state;
    if (have_cluster)
        tu_cluster_stop(&cl);
    return 0;
}

#define NEED_CLUSTER()       \
    do {                     \
        if (!have_cluster)   \
            skip();          \
    } while (0)

static void test_slot_function(void **state)
{
    (void)state;
    /* Values from the Redis Cluster specification's examples. */
    assert_int_equal(sb_rc_slot("123456789", 9), 0x31C3 % 16384);
    assert_int_equal(sb_rc_slot("{user1000}.following", 20), sb_rc_slot("user1000", 8));
    assert_int_equal(sb_rc_slot("foo{}{bar}", 10), sb_rc_slot("foo{}{bar}", 10));
    assert_int_not_equal(sb_rc_slot("foo{}{bar}", 10), sb_rc_slot("bar", 3));
    assert_int_equal(sb_rc_slot("foo{{bar}}zap", 13), sb_rc_slot("{bar", 4));
}

static void test_open_errors(void **state)
{
    (void)state;
    sb_rc *c = (sb_rc *)1;
    char err[128];
    sb_rc_config cfg = { .seeds = "localhost" };
    assert_int_equal(sb_rc_open(&cfg, &c, err, sizeof err), SB_ERR_INVAL);
    assert_non_null(strstr(err, "localhost"));
    cfg.seeds = "";
    assert_int_equal(sb_rc_open(&cfg, &c, err, sizeof err), SB_ERR_INVAL);
    cfg.seeds = "127.0.0.1:99999";
    assert_int_equal(sb_rc_open(&cfg, &c, err, sizeof err), SB_ERR_INVAL);
    /* Nothing listening: the client opens and every operation is DOWN. */
    cfg.seeds = "127.0.0.1:1";
    cfg.timeout_ms = 100;
    assert_int_equal(sb_rc_open(&cfg, &c, err, sizeof err), SB_OK);
    sb_rc_op op = { .kind = SB_RC_GET, .key = "k", .key_len = 1 };
    assert_int_equal(sb_rc_exec(c, &op, 1), SB_OK);
    assert_int_equal(op.status, SB_RC_DOWN);
    assert_null(op.data);
    char big[1100];
    memset(big, 'k', sizeof big);
    op.key = big;
    op.key_len = sizeof big;
    assert_int_equal(sb_rc_exec(c, &op, 1), SB_ERR_INVAL);
    sb_rc_close(c);
}

static void test_roundtrip(void **state)
{
    (void)state;
    NEED_CLUSTER();
    sb_rc *c = open_client(5000, 1000);
    put_range(c, 0, N_KEYS, 1);
    int ok, down;
    get_range(c, 0, N_KEYS, 1, &ok, &down);
    assert_int_equal(ok, N_KEYS);
    /* Keys landed on all three masters. */
    int per[TU_CLUSTER_MAX] = { 0 };
    for (int i = 0; i < N_KEYS; i += 10)
        per[tu_cluster_master_of(&cl, sb_rc_slot(keys[i], strlen(keys[i])))]++;
    int masters = 0;
    for (int i = 0; i < cl.n; i++)
        masters += per[i] > 0;
    assert_int_equal(masters, 3);
    /* NX on a present key writes nothing; EXISTS, DEL, GET of a missing key. */
    sb_rc_op ops[4] = {
        { .kind = SB_RC_SET, .key = keys[3], .key_len = strlen(keys[3]), .val = "x",
          .val_len = 1, .nx = 1 },
        { .kind = SB_RC_EXISTS, .key = keys[4], .key_len = strlen(keys[4]) },
        { .kind = SB_RC_DEL, .key = keys[5], .key_len = strlen(keys[5]) },
        { .kind = SB_RC_GET, .key = "sbtest:none", .key_len = 11 },
    };
    assert_int_equal(sb_rc_exec(c, ops, 4), SB_OK);
    assert_int_equal(ops[0].status, SB_RC_MISSING);
    assert_int_equal(ops[1].status, SB_RC_OK);
    assert_int_equal(ops[2].status, SB_RC_OK);
    assert_int_equal(ops[3].status, SB_RC_MISSING);
    get_range(c, 3, 4, 1, &ok, &down);
    assert_int_equal(ok, 1);
    ops[1].kind = SB_RC_EXISTS, ops[1].key = keys[5], ops[1].key_len = strlen(keys[5]);
    assert_int_equal(sb_rc_exec(c, &ops[1], 1), SB_OK);
    assert_int_equal(ops[1].status, SB_RC_MISSING);
    put_range(c, 5, 6, 1);
    /* A server error is REFUSED with its text: GET of a list. */
    char buf[64];
    const char *lpush[3] = { "LPUSH", "{sbtest:list}", "a" };
    int m = tu_cluster_master_of(&cl, sb_rc_slot("sbtest:list", 11));
    assert_int_equal(tu_cluster_cmd(&cl, m, buf, sizeof buf, 3, lpush), 0);
    sb_rc_op g = { .kind = SB_RC_GET, .key = "{sbtest:list}", .key_len = 13 };
    assert_int_equal(sb_rc_exec(c, &g, 1), SB_OK);
    assert_int_equal(g.status, SB_RC_REFUSED);
    assert_non_null(strstr(g.err_msg, "WRONGTYPE"));
    sb_rc_stats s;
    sb_rc_get_stats(c, &s);
    assert_true(s.refreshes >= 1);
    assert_int_equal(s.moved, 0);
    /* Batches of 64 over 3 masters: never more than the window (filled:
     * test_rc_wire). */
    assert_true(s.max_owed <= SB_RC_WINDOW);
    /* ...nor more value bytes than the window, or two of the 1 MiB values */
    assert_true(s.max_owed_bytes <= (SB_RC_WINDOW_BYTES > (2u << 20) ? SB_RC_WINDOW_BYTES
                                                                     : (2u << 20)));
    sb_rc_close(c);
}

/* sb_rc_exec_each: the callback sees each value once, as it arrives, with
 * its index; values it takes are gone from the batch, the others stay the
 * caller's. */
typedef struct each_seen {
    int calls[64], base;
} each_seen;

static void each_got(void *ctx, size_t i, sb_rc_op *op)
{
    each_seen *e = ctx;
    assert_true(i < 64);
    assert_int_equal(op->status, SB_RC_OK);
    if (!val_ok(op, e->base + (int)i, 1))
        fail_msg("callback: GET %s returned a wrong value", keys[e->base + (int)i]);
    e->calls[i]++;
    if (i % 2 == 0) { /* take the even ones */
        free(op->data);
        op->data = NULL;
    }
}

static void test_exec_each(void **state)
{
    (void)state;
    NEED_CLUSTER();
    sb_rc *c = open_client(5000, 1000);
    put_range(c, 0, 64, 1);
    sb_rc_op ops[65];
    for (int k = 0; k < 64; k++)
        ops[k] = (sb_rc_op){ .kind = SB_RC_GET, .key = keys[k], .key_len = strlen(keys[k]) };
    ops[64] = (sb_rc_op){ .kind = SB_RC_GET, .key = "sbtest:none", .key_len = 11 };
    each_seen e = { .base = 0 };
    assert_int_equal(sb_rc_exec_each(c, ops, 64, each_got, &e), SB_OK);
    for (int k = 0; k < 64; k++) {
        assert_int_equal(e.calls[k], 1);
        assert_int_equal(ops[k].status, SB_RC_OK);
        if (k % 2 == 0) {
            assert_null(ops[k].data);
        } else {
            assert_true(val_ok(&ops[k], k, 1));
            free(ops[k].data);
        }
    }
    /* A missing value is no call. */
    memset(&e, 0, sizeof e);
    assert_int_equal(sb_rc_exec_each(c, &ops[64], 1, each_got, &e), SB_OK);
    assert_int_equal(ops[64].status, SB_RC_MISSING);
    assert_int_equal(e.calls[0], 0);
    sb_rc_close(c);
}

/* Move the slot of key k from its master to another master, keys and all,
 * as redis-cli --cluster reshard does. Returns the new owner. */
static int migrate_slot(const char *k, bool finish, const char *only_key)
{
    unsigned slot = sb_rc_slot(k, strlen(k));
    int from = tu_cluster_master_of(&cl, slot), to = -1;
    for (int i = 0; i < cl.n && to < 0; i++) {
        if (i == from || cl.pids[i] <= 0)
            continue;
        char info[2048];
        const char *argv[2] = { "INFO", "replication" };
        if (tu_cluster_cmd(&cl, i, info, sizeof info, 2, argv) == 0 && strstr(info, "role:master"))
            to = i;
    }
    assert_true(from >= 0 && to >= 0);
    char id_from[41], id_to[41], sl[16], port[16], buf[256];
    assert_int_equal(tu_cluster_node_id(&cl, from, id_from), 0);
    assert_int_equal(tu_cluster_node_id(&cl, to, id_to), 0);
    snprintf(sl, sizeof sl, "%u", slot);
    snprintf(port, sizeof port, "%d", cl.ports[to]);
    const char *imp[5] = { "CLUSTER", "SETSLOT", sl, "IMPORTING", id_from };
    const char *mig[5] = { "CLUSTER", "SETSLOT", sl, "MIGRATING", id_to };
    assert_int_equal(tu_cluster_cmd(&cl, to, buf, sizeof buf, 5, imp), 0);
    assert_string_equal(buf, "OK");
    assert_int_equal(tu_cluster_cmd(&cl, from, buf, sizeof buf, 5, mig), 0);
    assert_string_equal(buf, "OK");
    /* MIGRATE host port "" 0 timeout KEYS k... */
    const char *argv[16] = { "MIGRATE", "127.0.0.1", port, "", "0", "5000", "KEYS" };
    int argc = 7;
    char names[1][256];
    if (only_key) {
        argv[argc++] = only_key;
    } else {
        char cnt[16];
        snprintf(cnt, sizeof cnt, "%d", 8);
        const char *gk[4] = { "CLUSTER", "GETKEYSINSLOT", sl, cnt };
        /* tu_cluster_cmd returns the first element only: take keys one
         * round at a time. */
        for (int round = 0; round < 64; round++) {
            assert_int_equal(tu_cluster_cmd(&cl, from, buf, sizeof buf, 4, gk), 0);
            if (!buf[0] || !strncmp(buf, "(error)", 7))
                break;
            snprintf(names[0], sizeof names[0], "%s", buf);
            const char *one[8] = { "MIGRATE", "127.0.0.1", port, "", "0", "5000", "KEYS",
                                   names[0] };
            assert_int_equal(tu_cluster_cmd(&cl, from, buf, sizeof buf, 8, one), 0);
            assert_string_equal(buf, "OK");
        }
        argc = 0;
    }
    if (argc) {
        assert_int_equal(tu_cluster_cmd(&cl, from, buf, sizeof buf, argc, argv), 0);
        assert_string_equal(buf, "OK");
    }
    if (finish) {
        const char *node[5] = { "CLUSTER", "SETSLOT", sl, "NODE", id_to };
        for (int i = 0; i < cl.n; i++)
            if (cl.pids[i] > 0) {
                assert_int_equal(tu_cluster_cmd(&cl, i, buf, sizeof buf, 5, node), 0);
            }
    }
    return to;
}

static void test_moved(void **state)
{
    (void)state;
    NEED_CLUSTER();
    sb_rc *c = open_client(5000, 1000);
    put_range(c, 0, 100, 2);
    migrate_slot(keys[10], true, NULL);
    int ok, down;
    get_range(c, 0, 100, 2, &ok, &down);
    assert_int_equal(ok, 100);
    sb_rc_stats s;
    sb_rc_get_stats(c, &s);
    assert_true(s.moved >= 1);
    assert_true(s.refreshes >= 2);
    /* Writes to the moved slot go to its new owner directly now. */
    put_range(c, 10, 11, 3);
    get_range(c, 10, 11, 3, &ok, &down);
    assert_int_equal(ok, 1);
    sb_rc_close(c);
}

static void test_ask(void **state)
{
    (void)state;
    NEED_CLUSTER();
    assert_int_equal(tu_cluster_wait_ok(&cl, 60), 0);
    sb_rc *c = open_client(5000, 1000);
    /* Two keys in one slot (a hash tag); only one migrates. */
    const char *ka = "{sbask}:a", *kb = "{sbask}:b";
    sb_rc_op set[2] = {
        { .kind = SB_RC_SET, .key = ka, .key_len = strlen(ka), .val = "A", .val_len = 1 },
        { .kind = SB_RC_SET, .key = kb, .key_len = strlen(kb), .val = "B", .val_len = 1 },
    };
    assert_int_equal(sb_rc_exec(c, set, 2), SB_OK);
    assert_int_equal(set[0].status, SB_RC_OK);
    assert_int_equal(set[1].status, SB_RC_OK);
    migrate_slot(ka, false, ka);
    sb_rc_op get[2] = {
        { .kind = SB_RC_GET, .key = ka, .key_len = strlen(ka) },
        { .kind = SB_RC_GET, .key = kb, .key_len = strlen(kb) },
    };
    assert_int_equal(sb_rc_exec(c, get, 2), SB_OK);
    assert_int_equal(get[0].status, SB_RC_OK);
    assert_int_equal(get[1].status, SB_RC_OK);
    assert_memory_equal(get[0].data, "A", 1);
    assert_memory_equal(get[1].data, "B", 1);
    free(get[0].data);
    free(get[1].data);
    sb_rc_stats s;
    sb_rc_get_stats(c, &s);
    assert_true(s.ask >= 1);
    assert_int_equal(s.moved, 0);
    /* Many ASKs to one node in one batch: more than its window holds (each
     * is ASKING + op), so most wait for room, and each keeps its ASK target
     * while it waits (else it would be redirected again and again, past
     * max_redirects). New keys of a migrating slot are written on the
     * importing node (the old master answers ASK), and read there. */
    enum { NA = 24 };
    char many[NA][24];
    sb_rc_op mset[NA], mget[NA];
    for (int k = 0; k < NA; k++) {
        snprintf(many[k], sizeof many[k], "{sbask}:m%d", k);
        mset[k] = (sb_rc_op){ .kind = SB_RC_SET, .key = many[k], .key_len = strlen(many[k]),
                              .val = many[k], .val_len = strlen(many[k]) };
        mget[k] = (sb_rc_op){ .kind = SB_RC_GET, .key = many[k], .key_len = strlen(many[k]) };
    }
    uint64_t ask0 = s.ask;
    assert_int_equal(sb_rc_exec(c, mset, NA), SB_OK);
    for (int k = 0; k < NA; k++)
        if (mset[k].status != SB_RC_OK)
            fail_msg("SET %s: %s %s", many[k], sb_rc_status_name(mset[k].status),
                     mset[k].err_msg);
    sb_rc_get_stats(c, &s);
    assert_int_equal(s.ask - ask0, NA); /* one ASK each, none again */
    ask0 = s.ask;
    assert_int_equal(sb_rc_exec(c, mget, NA), SB_OK);
    for (int k = 0; k < NA; k++) {
        if (mget[k].status != SB_RC_OK)
            fail_msg("GET %s: %s %s", many[k], sb_rc_status_name(mget[k].status),
                     mget[k].err_msg);
        assert_int_equal(mget[k].len, strlen(many[k]));
        assert_memory_equal(mget[k].data, many[k], mget[k].len);
        free(mget[k].data);
    }
    sb_rc_get_stats(c, &s);
    assert_int_equal(s.ask - ask0, NA);
    assert_true(s.max_owed <= SB_RC_WINDOW);
    assert_int_equal(s.moved, 0);
    /* Finish the migration (kb too), so later tests see a stable map. */
    migrate_slot(ka, true, NULL);
    sb_rc_close(c);
}

static void test_failover(void **state)
{
    (void)state;
    NEED_CLUSTER();
    assert_int_equal(tu_cluster_wait_ok(&cl, 60), 0);
    sb_rc *c = open_client(5000, 300);
    put_replicated(c, 0, N_KEYS, 4);
    int victim = tu_cluster_master_of(&cl, sb_rc_slot(keys[0], strlen(keys[0])));
    tu_cluster_signal(&cl, victim, SIGKILL);
    /* Right away: the dead master's keys come from its replica, or are
     * DOWN; never wrong (get_range checks every byte). */
    int ok, down;
    get_range(c, 0, N_KEYS, 4, &ok, &down);
    assert_int_equal(ok + down, N_KEYS);
    /* After the failover every key is served again, and writes work,
     * without reopening the client. */
    assert_int_equal(tu_cluster_wait_ok(&cl, 60), 0);
    for (int tries = 0; tries < 100; tries++) {
        get_range(c, 0, N_KEYS, 4, &ok, &down);
        if (ok == N_KEYS)
            break;
    }
    assert_int_equal(ok, N_KEYS);
    put_range(c, 0, 200, 5);
    get_range(c, 0, 200, 5, &ok, &down);
    assert_int_equal(ok, 200);
    sb_rc_stats s;
    sb_rc_get_stats(c, &s);
    assert_true(s.node_errors >= 1);
    assert_true(s.replica_reads >= 1 || s.refreshes >= 2);
    /* The old master comes back as a replica. */
    assert_int_equal(tu_cluster_restart(&cl, victim), 0);
    assert_int_equal(tu_cluster_wait_ok(&cl, 60), 0);
    sb_rc_close(c);
}

static void test_hang(void **state)
{
    (void)state;
    NEED_CLUSTER();
    assert_int_equal(tu_cluster_wait_ok(&cl, 60), 0);
    sb_rc *c = open_client(3000, 60000);
    put_replicated(c, 0, 300, 6);
    int victim = tu_cluster_master_of(&cl, sb_rc_slot(keys[1], strlen(keys[1])));
    tu_cluster_signal(&cl, victim, SIGSTOP);
    int ok, down;
    /* The first batch waits for the hung node once (its deadline), then
     * the node is marked down and its keys are read from its replica. */
    get_range(c, 0, 300, 6, &ok, &down);
    assert_int_equal(ok + down, 300);
    sb_rc_stats s;
    sb_rc_get_stats(c, &s);
    assert_true(s.timeouts >= 1);
    for (int tries = 0; tries < 20; tries++) {
        get_range(c, 0, 300, 6, &ok, &down);
        if (ok == 300)
            break;
    }
    assert_int_equal(ok, 300);
    /* Served by the replica, unless the cluster promoted it meanwhile. */
    sb_rc_get_stats(c, &s);
    assert_true(s.replica_reads >= 1 ||
                tu_cluster_master_of(&cl, sb_rc_slot(keys[1], strlen(keys[1]))) != victim);
    /* Writes to its slots are DOWN until a failover: never lost silently. */
    tu_cluster_signal(&cl, victim, SIGCONT);
    assert_int_equal(tu_cluster_wait_ok(&cl, 60), 0);
    sb_rc_close(c);
}

static void test_cluster_gone(void **state)
{
    (void)state;
    NEED_CLUSTER();
    assert_int_equal(tu_cluster_wait_ok(&cl, 60), 0);
    sb_rc *c = open_client(3000, 100);
    put_range(c, 0, 50, 7);
    for (int i = 0; i < cl.n; i++)
        tu_cluster_signal(&cl, i, SIGKILL);
    int ok, down;
    get_range(c, 0, 50, 7, &ok, &down);
    assert_int_equal(down, 50);
    sb_rc_op set = { .kind = SB_RC_SET, .key = keys[0], .key_len = strlen(keys[0]),
                     .val = "x", .val_len = 1 };
    assert_int_equal(sb_rc_exec(c, &set, 1), SB_OK);
    assert_int_equal(set.status, SB_RC_DOWN);
    /* Back (empty: the servers keep no data): the client serves again. */
    for (int i = 0; i < cl.n; i++)
        assert_int_equal(tu_cluster_restart(&cl, i), 0);
    assert_int_equal(tu_cluster_wait_ok(&cl, 60), 0);
    int tries = 0;
    do {
        set.status = SB_RC_DOWN;
        assert_int_equal(sb_rc_exec(c, &set, 1), SB_OK);
        struct timespec ts = { 0, 50000000 };
        nanosleep(&ts, NULL);
    } while (set.status != SB_RC_OK && ++tries < 400);
    assert_int_equal(set.status, SB_RC_OK);
    sb_rc_close(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slot_function), cmocka_unit_test(test_open_errors),
        cmocka_unit_test(test_roundtrip),     cmocka_unit_test(test_exec_each),
        cmocka_unit_test(test_moved),
        cmocka_unit_test(test_ask),           cmocka_unit_test(test_failover),
        cmocka_unit_test(test_hang),          cmocka_unit_test(test_cluster_gone),
    };
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
