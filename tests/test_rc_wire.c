/* test_rc_wire.c -- the cluster client's reply reading (store/remote/
 * rcluster.c) against a scripted server: one thread of this process that
 * speaks RESP on loopback, owns every slot, and writes each reply in the
 * pieces the test chooses, so that every place a read can end is met.
 *
 * Properties: a GET's value read into its sink's spans (sb_rc_exec_sink)
 * arrives whole and right, wherever the reads cut it: in the bulk header
 * (byte by byte), in the value, in the CRLF after it; with the spans split
 * anywhere (an empty first span, one span); beside replies the sink does
 * not take (nil, error, integer, values it declines), in one read or
 * many; data NULL and in_sink 1 exactly for values read into spans. A
 * value not followed by CRLF fails its node (the operation ends DOWN,
 * nothing else is read as a value). A node's window holds at most
 * SB_RC_WINDOW_BYTES of expected values past its first two operations,
 * and SB_RC_WINDOW small replies. Needs no redis-server: never skipped.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "rcluster.h"
#include "snapbank.h"

/* ---- the scripted server ------------------------------------------------ */

/* How the server writes a GET's reply, chosen by its key:
 *   "v:<len>:<piece>" a value of <len> bytes (val_fill), the header and
 *                     the CRLF one byte per write, the value in writes of
 *                     <piece> bytes; a pause after every write when
 *                     <piece> is under 64, so that reads end there
 *   "w:<len>"         the same value in one write with its header and CRLF
 *   "bad:<len>"       a value followed by "XY" instead of CRLF
 *   "nil"             $-1
 *   "err"             -ERR scripted
 *   "int"             :7
 * Any other command gets +OK. Replies of one read batch of commands go
 * out in order. */
typedef struct server {
    int lfd, port;
    pthread_t th;
    int stop;          /* set by server_stop (atomic) */
    int max_pending;   /* most GETs read and not yet answered at once
                          (atomic) */
} server;

static void val_fill(unsigned char *p, size_t n, const char *key)
{
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (const char *k = key; *k; k++)
        s = (s ^ (unsigned char)*k) * 0x100000001b3ull;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        p[i] = (unsigned char)s;
    }
}

static void put_all(int fd, const void *p, size_t n, size_t piece)
{
    const char *c = p;
    while (n) {
        size_t k = n < piece ? n : piece;
        ssize_t w = send(fd, c, k, MSG_NOSIGNAL); /* the client may have gone */
        if (w <= 0)
            return;
        c += w, n -= (size_t)w;
        if (piece < 64)
            usleep(200);
    }
}

static void reply_get(server *sv, int fd, const char *key)
{
    char hdr[32];
    size_t len = 0, piece = 0;
    if (sscanf(key, "v:%zu:%zu", &len, &piece) == 2 || sscanf(key, "w:%zu", &len) == 1 ||
        sscanf(key, "bad:%zu", &len) == 1) {
        unsigned char *v = malloc(len + 64);
        int h = snprintf(hdr, sizeof hdr, "$%zu\r\n", len);
        if (key[0] == 'w') {
            memcpy(v, hdr, (size_t)h);
            val_fill(v + h, len, key);
            memcpy(v + h + len, "\r\n", 2);
            put_all(fd, v, (size_t)h + len + 2, len + 64);
        } else {
            val_fill(v, len, key);
            put_all(fd, hdr, (size_t)h, key[0] == 'v' ? 1 : (size_t)h);
            put_all(fd, v, len, key[0] == 'v' ? piece : len);
            put_all(fd, key[0] == 'v' ? "\r\n" : "XY", 2, key[0] == 'v' ? 1 : 2);
        }
        free(v);
    } else if (!strcmp(key, "nil")) {
        put_all(fd, "$-1\r\n", 5, 5);
    } else if (!strcmp(key, "err")) {
        put_all(fd, "-ERR scripted\r\n", 15, 15);
    } else {
        put_all(fd, ":7\r\n", 4, 4);
    }
    (void)sv;
}

static void reply_slots(server *sv, int fd)
{
    char b[256];
    int n = snprintf(b, sizeof b,
                     "*1\r\n*3\r\n:0\r\n:16383\r\n*3\r\n$9\r\n127.0.0.1\r\n:%d\r\n$40\r\n"
                     "0123456789012345678901234567890123456789\r\n",
                     sv->port);
    put_all(fd, b, (size_t)n, (size_t)n);
}

/* Parse one RESP command array from buf[0, n): its arguments (up to 4,
 * NUL-terminated copies in args). Returns the bytes it took, 0 when
 * incomplete. */
static size_t parse_cmd(const char *buf, size_t n, char args[4][128], int *argc)
{
    size_t i = 0;
    if (!n || buf[0] != '*')
        return 0;
    const char *e = memchr(buf, '\n', n);
    if (!e)
        return 0;
    int cnt = atoi(buf + 1);
    i = (size_t)(e - buf) + 1;
    *argc = 0;
    for (int a = 0; a < cnt; a++) {
        if (i >= n || buf[i] != '$')
            return 0;
        e = memchr(buf + i, '\n', n - i);
        if (!e)
            return 0;
        size_t len = (size_t)atol(buf + i + 1);
        i = (size_t)(e - buf) + 1;
        if (i + len + 2 > n)
            return 0;
        if (a < 4) {
            size_t c = len < 127 ? len : 127;
            memcpy(args[a], buf + i, c);
            args[a][c] = 0;
            (*argc)++;
        }
        i += len + 2;
    }
    return i;
}

static void serve_conn(server *sv, int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    static char buf[1 << 16];
    size_t have = 0;
    for (;;) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (poll(&p, 1, 50) <= 0) {
            if (__atomic_load_n(&sv->stop, __ATOMIC_RELAXED))
                return;
            continue;
        }
        ssize_t r = read(fd, buf + have, sizeof buf - have);
        if (r <= 0)
            return;
        have += (size_t)r;
        /* Everything read is answered in order, as a server does with a
         * pipeline; count the GETs it holds at once. */
        char args[64][4][128];
        int argc[64], n_cmd = 0, gets = 0;
        size_t off = 0, k;
        while (n_cmd < 64 && (k = parse_cmd(buf + off, have - off, args[n_cmd], &argc[n_cmd]))) {
            gets += argc[n_cmd] >= 1 && !strcasecmp(args[n_cmd][0], "GET");
            off += k;
            n_cmd++;
        }
        memmove(buf, buf + off, have - off);
        have -= off;
        if (gets > __atomic_load_n(&sv->max_pending, __ATOMIC_RELAXED))
            __atomic_store_n(&sv->max_pending, gets, __ATOMIC_RELAXED);
        for (int c = 0; c < n_cmd; c++) {
            if (argc[c] >= 2 && !strcasecmp(args[c][0], "GET"))
                reply_get(sv, fd, args[c][1]);
            else if (argc[c] >= 2 && !strcasecmp(args[c][0], "CLUSTER"))
                reply_slots(sv, fd);
            else
                put_all(fd, "+OK\r\n", 5, 5);
        }
    }
}

static void *serve(void *arg)
{
    server *sv = arg;
    while (!__atomic_load_n(&sv->stop, __ATOMIC_RELAXED)) {
        struct pollfd p = { .fd = sv->lfd, .events = POLLIN };
        if (poll(&p, 1, 50) <= 0)
            continue;
        int fd = accept(sv->lfd, NULL, NULL);
        if (fd < 0)
            continue;
        serve_conn(sv, fd);
        close(fd);
    }
    return NULL;
}

static server *server_start(void)
{
    server *sv = calloc(1, sizeof *sv);
    assert_non_null(sv);
    sv->lfd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(sv->lfd >= 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t al = sizeof a;
    assert_int_equal(bind(sv->lfd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(sv->lfd, 4), 0);
    assert_int_equal(getsockname(sv->lfd, (struct sockaddr *)&a, &al), 0);
    sv->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&sv->th, NULL, serve, sv), 0);
    return sv;
}

static void server_stop(server *sv)
{
    __atomic_store_n(&sv->stop, 1, __ATOMIC_RELAXED);
    pthread_join(sv->th, NULL);
    close(sv->lfd);
    free(sv);
}

static sb_rc *client_of(const server *sv, uint32_t timeout_ms)
{
    char seeds[64];
    snprintf(seeds, sizeof seeds, "127.0.0.1:%d", sv->port);
    sb_rc_config cfg = { .seeds = seeds, .timeout_ms = timeout_ms, .down_ms = 50 };
    sb_rc *c = NULL;
    char err[128];
    assert_int_equal(sb_rc_open(&cfg, &c, err, sizeof err), SB_OK);
    return c;
}

/* ---- the sink ----------------------------------------------------------- */

/* Per operation: a buffer its spans cover, split at `cut` (clamped to the
 * value's length: 0 gives an empty first span, len one span), or no spans
 * when `decline`. Asked again after a node failure: the same buffer. */
typedef struct sink_ctx {
    size_t n;
    unsigned char *buf[64];
    size_t cut[64];
    bool decline[64];
    int asked[64];
    int got[64];
} sink_ctx;

static unsigned test_sink(void *ctx, size_t i, size_t len, struct iovec out[2])
{
    sink_ctx *s = ctx;
    assert_true(i < s->n);
    s->asked[i]++;
    if (s->decline[i])
        return 0;
    free(s->buf[i]);
    s->buf[i] = malloc(len ? len : 1);
    memset(s->buf[i], 0xee, len);
    size_t cut = s->cut[i] < len ? s->cut[i] : len;
    out[0] = (struct iovec){ s->buf[i], cut };
    if (cut == len)
        return 1;
    out[1] = (struct iovec){ s->buf[i] + cut, len - cut };
    return 2;
}

static void test_got(void *ctx, size_t i, sb_rc_op *op)
{
    sink_ctx *s = ctx;
    assert_true(i < s->n);
    assert_int_equal(op->status, SB_RC_OK);
    s->got[i]++;
}

static bool bytes_ok(const unsigned char *p, size_t n, const char *key)
{
    unsigned char *want = malloc(n ? n : 1);
    val_fill(want, n, key);
    bool ok = !memcmp(p, want, n);
    free(want);
    return ok;
}

static void sink_free(sink_ctx *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->buf[i]);
}

/* ---- tests --------------------------------------------------------------- */

/* Values cut everywhere by the reads, spans split everywhere, beside
 * replies the sink does not take. */
static void test_sink_values(void **state)
{
    (void)state;
    server *sv = server_start();
    sb_rc *c = client_of(sv, 5000);
    static const char *const keys[] = {
        "v:1:1",       "v:100:7",  "nil",        "v:5000:1000", "err",      "w:70000",
        "v:196800:50", "int",      "w:3",        "w:196800",    "v:17:1",   "nil",
        "w:65536",     "v:300:1",  "w:262144",   "w:1",         "v:4096:4096",
    };
    enum { N = sizeof keys / sizeof *keys };
    sb_rc_op ops[N];
    sink_ctx s = { .n = N };
    for (size_t i = 0; i < N; i++) {
        ops[i] = (sb_rc_op){ .kind = SB_RC_GET, .key = keys[i], .key_len = strlen(keys[i]) };
        s.cut[i] = (size_t[]){ 0, 1, 50, 100000, 196800, 3000 }[i % 6];
        s.decline[i] = i % 5 == 3;
    }
    for (int round = 0; round < 3; round++) {
        memset(s.asked, 0, sizeof s.asked);
        memset(s.got, 0, sizeof s.got);
        assert_int_equal(sb_rc_exec_sink(c, ops, N, test_sink, test_got, &s, NULL), SB_OK);
        for (size_t i = 0; i < N; i++) {
            size_t len = 0, piece;
            bool value = sscanf(keys[i], "v:%zu:%zu", &len, &piece) == 2 ||
                         sscanf(keys[i], "w:%zu", &len) == 1;
            if (!value) {
                assert_int_equal(s.asked[i], 0); /* no value: no sink asked */
                assert_int_equal(ops[i].status, !strcmp(keys[i], "nil") ? SB_RC_MISSING
                                                                         : SB_RC_REFUSED);
                continue;
            }
            if (ops[i].status != SB_RC_OK)
                fail_msg("%s: %s", keys[i], sb_rc_status_name(ops[i].status));
            assert_int_equal(s.got[i], 1);
            if (s.asked[i] != 1)
                fail_msg("%s (round %d): sink asked %d times", keys[i], round, s.asked[i]);
            assert_int_equal(ops[i].len, len);
            if (s.decline[i]) {
                assert_int_equal(ops[i].in_sink, 0);
                assert_non_null(ops[i].data);
                assert_true(bytes_ok(ops[i].data, len, keys[i]));
                free(ops[i].data);
            } else {
                if (ops[i].in_sink != 1)
                    fail_msg("%s (round %d): not read into its spans", keys[i], round);
                assert_null(ops[i].data);
                if (!bytes_ok(s.buf[i], len, keys[i]))
                    fail_msg("%s: the spans hold other bytes (cut %zu)", keys[i], s.cut[i]);
            }
        }
        /* Next round: other cuts and other values declined. */
        for (size_t i = 0; i < N; i++) {
            s.cut[i] = s.cut[(i + 1) % N];
            s.decline[i] = (i + (size_t)round) % 4 == 1;
        }
    }
    sb_rc_stats st;
    sb_rc_get_stats(c, &st);
    uint64_t sunk = 0;
    for (size_t i = 0; i < N; i++)
        sunk += ops[i].in_sink;
    assert_true(sunk > 0 && st.sunk >= sunk);
    /* Without a sink (and through sb_rc_exec) the same replies come as
     * malloc'd values. */
    uint64_t sunk_before = st.sunk;
    assert_int_equal(sb_rc_exec(c, ops, N), SB_OK);
    sb_rc_get_stats(c, &st);
    assert_int_equal(st.sunk, sunk_before);
    for (size_t i = 0; i < N; i++) {
        assert_int_equal(ops[i].in_sink, 0);
        if (ops[i].status == SB_RC_OK) {
            assert_true(bytes_ok(ops[i].data, ops[i].len, keys[i]));
            free(ops[i].data);
        }
    }
    sink_free(&s);
    sb_rc_close(c);
    server_stop(sv);
}

/* A value not followed by CRLF is not the protocol: its node fails, the
 * operation ends DOWN (asked again, it meets the same), and the value
 * before it in the pipeline is still right. */
static void test_sink_bad_crlf(void **state)
{
    (void)state;
    server *sv = server_start();
    sb_rc *c = client_of(sv, 400);
    static const char *const keys[] = { "w:1000", "bad:1000", "bad:10" };
    sb_rc_op ops[3];
    sink_ctx s = { .n = 3, .decline = { false, false, true } };
    for (size_t i = 0; i < 3; i++)
        ops[i] = (sb_rc_op){ .kind = SB_RC_GET, .key = keys[i], .key_len = strlen(keys[i]) };
    assert_int_equal(sb_rc_exec_sink(c, ops, 3, test_sink, test_got, &s, NULL), SB_OK);
    assert_int_equal(ops[0].status, SB_RC_OK);
    assert_true(bytes_ok(s.buf[0], 1000, keys[0]));
    assert_int_equal(ops[1].status, SB_RC_DOWN);
    assert_int_equal(s.got[1], 0);
    assert_int_equal(ops[2].status, SB_RC_DOWN);
    assert_null(ops[2].data);
    sb_rc_stats st;
    sb_rc_get_stats(c, &st);
    assert_true(st.node_errors >= 1);
    sink_free(&s);
    /* The client serves again once the node's down time has passed. */
    usleep(100 * 1000);
    sb_rc_op g = { .kind = SB_RC_GET, .key = "w:5", .key_len = 3 };
    assert_int_equal(sb_rc_exec(c, &g, 1), SB_OK);
    assert_int_equal(g.status, SB_RC_OK);
    assert_true(bytes_ok(g.data, 5, "w:5"));
    free(g.data);
    sb_rc_close(c);
    server_stop(sv);
}

/* The window: GETs whose hints say 192 KiB are owed at most
 * SB_RC_WINDOW_BYTES' worth past the first two; small ones up to
 * SB_RC_WINDOW at a time. */
static void test_window(void **state)
{
    (void)state;
    server *sv = server_start();
    sb_rc *c = client_of(sv, 5000);
    enum { N = 40 };
    char keys[N][24];
    sb_rc_op ops[N];
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof keys[i], "w:196800");
        ops[i] = (sb_rc_op){ .kind = SB_RC_GET, .key = keys[i], .key_len = strlen(keys[i]),
                             .hint = 196800 };
    }
    assert_int_equal(sb_rc_exec(c, ops, N), SB_OK);
    for (int i = 0; i < N; i++) {
        assert_int_equal(ops[i].status, SB_RC_OK);
        free(ops[i].data);
    }
    sb_rc_stats st;
    sb_rc_get_stats(c, &st);
    size_t per = SB_RC_WINDOW_BYTES / 196800 > 2 ? SB_RC_WINDOW_BYTES / 196800 : 2;
    assert_int_equal(st.max_owed, per);
    assert_int_equal(st.max_owed_bytes, per * 196800);
    assert_true(__atomic_load_n(&sv->max_pending, __ATOMIC_RELAXED) <= (int)per);
    /* Small replies: the whole reply window. */
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof keys[i], "w:10");
        ops[i] = (sb_rc_op){ .kind = SB_RC_GET, .key = keys[i], .key_len = strlen(keys[i]) };
    }
    assert_int_equal(sb_rc_exec(c, ops, N), SB_OK);
    for (int i = 0; i < N; i++) {
        assert_int_equal(ops[i].status, SB_RC_OK);
        free(ops[i].data);
    }
    sb_rc_get_stats(c, &st);
    assert_int_equal(st.max_owed, SB_RC_WINDOW);
    sb_rc_close(c);
    server_stop(sv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sink_values),
        cmocka_unit_test(test_sink_bad_crlf),
        cmocka_unit_test(test_window),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
