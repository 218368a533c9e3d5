/* test_remote.c -- the shared tier's pool (store/remote/remote.h) on a real
 * local Redis Cluster (three masters, a replica each, started and stopped
 * here; skipped with a message when redis-server is absent).
 *
 * Properties: pages one handle publishes, another finds by keys computed
 * from the tokens alone and fetches bit-exact (raw and zstd); a page
 * already in the pool costs no second upload; every kind of bad value
 * (a flipped payload byte, a consistent record of another page, another
 * namespace's record, wrong tokens, truncation, garbage) is refused and
 * counted, never written to the destination as good; the publisher never
 * sends more than its byte budget allows on the store clock; two tenants
 * confined by ACL users see nothing of each other's pages. With a secret
 * (seal.h): keys are not the plain ones, a raw value holds none of the
 * page's token IDs, a handle with another secret gets misses (not
 * errors), and a forged value (correct checksums, no seal or another
 * secret's) is refused and counted.
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
#include <hiredis/hiredis.h>

#include "internal.h"
#include "rcluster.h"
#include "rcluster_util.h"
#include "remote.h"
#include "seal.h"
#include "snapbank.h"

static tu_cluster cl;
static bool have_cluster;

#define PT 16u
#define PAGE_BYTES 65536u
#define N_PAGES 24

/* A sequence of N_PAGES full pages of namespace ns, chained from root. */
typedef struct seq {
    sb_remote_ns ns;
    uint32_t tokens[N_PAGES * PT];
    uint64_t key[N_PAGES][2], parent[N_PAGES][2];
    uint8_t *data[N_PAGES];
} seq;

static void seq_make(seq *s, uint64_t ns_id, uint64_t scope_tag, uint32_t salt, bool compressible)
{
    s->ns = (sb_remote_ns){ .ns_id = ns_id, .scope_tag = scope_tag, .page_tokens = PT,
                            .page_bytes = PAGE_BYTES, .elem16 = true };
    for (size_t i = 0; i < N_PAGES * PT; i++)
        s->tokens[i] = (uint32_t)(i * 2654435761u) ^ salt;
    sb_key k = { ns_id ^ 0x1234, scope_tag };
    for (size_t p = 0; p < N_PAGES; p++) {
        s->parent[p][0] = k.lo, s->parent[p][1] = k.hi;
        k = sb_key_chain(&k, s->tokens + p * PT, PT);
        s->key[p][0] = k.lo, s->key[p][1] = k.hi;
        s->data[p] = malloc(PAGE_BYTES);
        uint64_t x = k.lo ^ salt;
        for (size_t b = 0; b < PAGE_BYTES; b++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            s->data[p][b] = compressible && (b & 1) ? (uint8_t)(0x3c + (x & 1)) : (uint8_t)x;
        }
    }
}

static void seq_free(seq *s)
{
    for (size_t p = 0; p < N_PAGES; p++)
        free(s->data[p]);
}

static int released;
static void count_release(void *ctx)
{
    (void)ctx;
    released++;
}

static sb_remote_page seq_page(const seq *s, size_t p)
{
    return (sb_remote_page){ .ns = s->ns, .key = { s->key[p][0], s->key[p][1] },
                             .parent_key = { s->parent[p][0], s->parent[p][1] },
                             .position = (uint32_t)(p * PT), .tokens = s->tokens + p * PT,
                             .data = s->data[p], .release = count_release };
}

static sb_remote *open_remote(const char *user, const char *pw, uint32_t compress)
{
    sb_remote_config cfg = { .seeds = cl.seeds, .user = user, .password = pw,
                             .timeout_ms = 5000, .compress_level = compress };
    sb_remote *r = NULL;
    char err[128];
    assert_int_equal(sb_remote_open(&cfg, &r, err, sizeof err), SB_OK);
    return r;
}

/* Fetch pages [0, n) of s through r; returns *n_ok and the code. Each good
 * page is compared with what was published. */
static int fetch_verify(sb_remote *r, const seq *s, size_t n, size_t *n_ok)
{
    sb_remote_want w[N_PAGES];
    uint8_t *dst = calloc(n, PAGE_BYTES);
    for (size_t p = 0; p < n; p++)
        w[p] = (sb_remote_want){ .key = { s->key[p][0], s->key[p][1] },
                                 .parent_key = { s->parent[p][0], s->parent[p][1] },
                                 .position = (uint32_t)(p * PT), .tokens = s->tokens + p * PT,
                                 .dst = dst + p * PAGE_BYTES };
    int rc = sb_remote_fetch(r, &s->ns, w, n, n_ok);
    for (size_t p = 0; p < *n_ok; p++)
        assert_memory_equal(dst + p * PAGE_BYTES, s->data[p], PAGE_BYTES);
    free(dst);
    return rc;
}

static int group_setup(void **state)
{
    (void)state;
    return tu_cluster_suite_start(&cl, "test_remote", &have_cluster);
}

static int group_teardown(void **state)
{
    (void)state;
    if (have_cluster)
        tu_cluster_stop(&cl);
    return 0;
}

#define NEED_CLUSTER()     \
    do {                   \
        if (!have_cluster) \
            skip();        \
    } while (0)

static void test_key_format(void **state)
{
    (void)state;
    sb_remote_ns ns = { .ns_id = 0x0123456789abcdefull, .scope_tag = 0xfedcba9876543210ull };
    uint64_t key[2] = { 0x1111111111111111ull, 0xaaaaaaaaaaaaaaaaull };
    char k[SB_REMOTE_KEY_LEN + 1] = { 0 };
    sb_remote_key(k, &ns, key);
    assert_string_equal(
        k, "sb1:fedcba9876543210:0123456789abcdef:aaaaaaaaaaaaaaaa1111111111111111");
}

static void publish_and_fetch(uint32_t compress, uint32_t salt)
{
    sb_remote *a = open_remote(NULL, NULL, compress), *b = open_remote(NULL, NULL, 0);
    seq s;
    seq_make(&s, 0xa1, 0xb2, salt, true);
    released = 0;
    for (size_t p = 0; p < N_PAGES; p++) {
        sb_remote_page pg = seq_page(&s, p);
        assert_int_equal(sb_remote_offer(a, &pg), SB_OK);
    }
    sb_remote_flush(a);
    assert_int_equal(released, N_PAGES);
    sb_remote_stats st;
    sb_remote_get_stats(a, &st);
    assert_int_equal(st.published, N_PAGES);
    if (compress)
        assert_true(st.published_bytes < (uint64_t)N_PAGES * PAGE_BYTES);
    /* Node b knows only the tokens: it computes the keys and finds them. */
    size_t n;
    assert_int_equal(sb_remote_probe(b, &s.ns, (const uint64_t(*)[2])s.key, N_PAGES, &n), SB_OK);
    assert_int_equal(n, N_PAGES);
    assert_int_equal(fetch_verify(b, &s, N_PAGES, &n), SB_OK);
    assert_int_equal(n, N_PAGES);
    /* Offered again, by either node: probed, not uploaded again. */
    for (size_t p = 0; p < N_PAGES; p++) {
        sb_remote_page pg = seq_page(&s, p);
        assert_int_equal(sb_remote_offer(b, &pg), SB_OK);
    }
    sb_remote_flush(b);
    sb_remote_get_stats(b, &st);
    assert_int_equal(st.published, 0);
    assert_int_equal(st.dedup, N_PAGES);
    assert_int_equal(st.fetched, N_PAGES);
    assert_int_equal(st.bad_values, 0);
    /* A longer request than the pool holds: the run stops at the gap. */
    seq t;
    seq_make(&t, 0xa1, 0xb2, salt, true);
    t.tokens[10 * PT + 3] ^= 1; /* page 10 onward: other keys */
    sb_key k = { t.parent[10][0], t.parent[10][1] };
    for (size_t p = 10; p < N_PAGES; p++) {
        k = sb_key_chain(&k, t.tokens + p * PT, PT);
        t.key[p][0] = k.lo, t.key[p][1] = k.hi;
        if (p + 1 < N_PAGES)
            t.parent[p + 1][0] = k.lo, t.parent[p + 1][1] = k.hi;
    }
    assert_int_equal(sb_remote_probe(b, &t.ns, (const uint64_t(*)[2])t.key, N_PAGES, &n), SB_OK);
    assert_int_equal(n, 10);
    assert_int_equal(fetch_verify(b, &t, N_PAGES, &n), SB_ERR_NOT_FOUND);
    assert_int_equal(n, 10);
    seq_free(&s);
    seq_free(&t);
    sb_remote_close(a);
    sb_remote_close(b);
}

static void test_publish_fetch_raw(void **state)
{
    (void)state;
    NEED_CLUSTER();
    publish_and_fetch(0, 1);
}

static void test_publish_fetch_zstd(void **state)
{
    (void)state;
    NEED_CLUSTER();
    publish_and_fetch(3, 2);
}

/* Store raw bytes under page p's key (as a client with write access could). */
static void poison(const seq *s, size_t p, const void *v, size_t len)
{
    char key[SB_REMOTE_KEY_LEN];
    sb_remote_key(key, &s->ns, s->key[p]);
    sb_rc_config cfg = { .seeds = cl.seeds, .timeout_ms = 5000 };
    sb_rc *c;
    assert_int_equal(sb_rc_open(&cfg, &c, NULL, 0), SB_OK);
    sb_rc_op op = { .kind = SB_RC_SET, .key = key, .key_len = sizeof key, .val = v,
                    .val_len = len };
    assert_int_equal(sb_rc_exec(c, &op, 1), SB_OK);
    assert_int_equal(op.status, SB_RC_OK);
    sb_rc_close(c);
}

static void expect_refused(sb_remote *r, const seq *s, size_t p, uint64_t *bad)
{
    size_t n;
    assert_int_equal(fetch_verify(r, s, p + 1, &n), SB_ERR_CORRUPT);
    assert_int_equal(n, p);
    sb_remote_stats st;
    sb_remote_get_stats(r, &st);
    assert_int_equal(st.bad_values, ++*bad);
}

static void test_poisoned_values(void **state)
{
    (void)state;
    NEED_CLUSTER();
    sb_remote *r = open_remote(NULL, NULL, 0);
    seq s, other;
    seq_make(&s, 0xc1, 0xc2, 3, false);
    seq_make(&other, 0xc9, 0xc2, 4, false); /* another namespace */
    for (size_t p = 0; p < N_PAGES; p++) {
        sb_remote_page pg = seq_page(&s, p);
        assert_int_equal(sb_remote_offer(r, &pg), SB_OK);
    }
    sb_remote_flush(r);
    uint64_t bad = 0;
    size_t len;
    void *v;
    /* 1. A flipped payload byte under the right key. */
    sb_remote_page pg = seq_page(&s, 5);
    assert_int_equal(sb_remote_encode_value(&pg, 0, &v, &len), SB_OK);
    ((uint8_t *)v)[len - 100] ^= 0x40;
    poison(&s, 5, v, len);
    free(v);
    expect_refused(r, &s, 5, &bad);
    /* 2. A consistent record of another page (page 6) under page 5's key. */
    pg = seq_page(&s, 6);
    assert_int_equal(sb_remote_encode_value(&pg, 0, &v, &len), SB_OK);
    poison(&s, 5, v, len);
    free(v);
    expect_refused(r, &s, 5, &bad);
    /* 3. Another namespace's record of the same position and tokens. */
    memcpy(other.tokens, s.tokens, sizeof s.tokens);
    pg = seq_page(&other, 5);
    pg.key[0] = s.key[5][0], pg.key[1] = s.key[5][1];
    pg.parent_key[0] = s.parent[5][0], pg.parent_key[1] = s.parent[5][1];
    assert_int_equal(sb_remote_encode_value(&pg, 0, &v, &len), SB_OK);
    poison(&s, 5, v, len);
    free(v);
    expect_refused(r, &s, 5, &bad);
    /* 4. Right key, wrong tokens (a consistent record that lies about its
     * key: the chain recomputed from the tokens does not give it). */
    pg = seq_page(&s, 5);
    uint32_t tok[PT];
    memcpy(tok, s.tokens + 5 * PT, sizeof tok);
    tok[0] ^= 7;
    pg.tokens = tok;
    assert_int_equal(sb_remote_encode_value(&pg, 0, &v, &len), SB_OK);
    poison(&s, 5, v, len);
    free(v);
    expect_refused(r, &s, 5, &bad);
    /* 5. Truncated, and 6. garbage. */
    pg = seq_page(&s, 5);
    assert_int_equal(sb_remote_encode_value(&pg, 0, &v, &len), SB_OK);
    poison(&s, 5, v, len - 1);
    expect_refused(r, &s, 5, &bad);
    memset(v, 0x5a, len);
    poison(&s, 5, v, len);
    free(v);
    expect_refused(r, &s, 5, &bad);
    /* 7. A compressed value with a damaged frame (checksummed as stored). */
    seq z;
    seq_make(&z, 0xc1, 0xc2, 5, true);
    pg = seq_page(&z, 0);
    assert_int_equal(sb_remote_encode_value(&pg, 3, &v, &len), SB_OK);
    assert_true(len < PAGE_BYTES);
    ((uint8_t *)v)[len - 3] ^= 1;
    poison(&z, 0, v, len);
    free(v);
    expect_refused(r, &z, 0, &bad);
    /* The good value back: served again. */
    pg = seq_page(&s, 5);
    assert_int_equal(sb_remote_encode_value(&pg, 0, &v, &len), SB_OK);
    poison(&s, 5, v, len);
    free(v);
    size_t n;
    assert_int_equal(fetch_verify(r, &s, N_PAGES, &n), SB_OK);
    seq_free(&s);
    seq_free(&other);
    seq_free(&z);
    sb_remote_close(r);
}

static uint64_t fake_now;
static uint64_t fake_clock(void *ctx)
{
    (void)ctx;
    return __atomic_load_n(&fake_now, __ATOMIC_SEQ_CST);
}

/* Pages published, once at least want are (or a generous wait passed). */
static uint64_t published(sb_remote *r, uint64_t want)
{
    sb_remote_stats st;
    for (int i = 0; i < 4000; i++) {
        sb_remote_get_stats(r, &st);
        if (st.published >= want)
            break;
        struct timespec ts = { 0, 5000000 };
        nanosleep(&ts, NULL);
    }
    return st.published;
}

static void test_publish_budget(void **state)
{
    (void)state;
    NEED_CLUSTER();
    /* 4 pages a second on a frozen store clock: the first second's bucket,
     * then one more second's worth each time the clock moves a second,
     * never more, however fast the machine. */
    fake_now = 1000000000ull;
    uint64_t rate = 4 * PAGE_BYTES;
    sb_remote_config cfg = { .seeds = cl.seeds, .timeout_ms = 5000, .publish_bytes_per_s = rate,
                             .clock_ns = fake_clock };
    sb_remote *r;
    assert_int_equal(sb_remote_open(&cfg, &r, NULL, 0), SB_OK);
    seq s;
    seq_make(&s, 0xd1, 0xd2, 6, false);
    for (size_t p = 0; p < N_PAGES; p++) {
        sb_remote_page pg = seq_page(&s, p);
        assert_int_equal(sb_remote_offer(r, &pg), SB_OK);
    }
    assert_int_equal(published(r, 4), 4);
    for (uint64_t sec = 1; sec <= 3; sec++) {
        /* Still at most what the bucket paid for at this clock. */
        assert_int_equal(published(r, 0), 4 * sec);
        __atomic_add_fetch(&fake_now, 1000000000ull, __ATOMIC_SEQ_CST);
        assert_int_equal(published(r, 4 * (sec + 1)), 4 * (sec + 1));
    }
    sb_remote_close(r); /* releases what waits */
    seq_free(&s);
}

static void test_tenants_acl(void **state)
{
    (void)state;
    NEED_CLUSTER();
    /* One ACL user per tenant, confined to its scope tag's keys. */
    const char *users[2][2] = { { "tenanta", "pwa" }, { "tenantb", "pwb" } };
    uint64_t tags[2] = { 0x0a0a0a0a0a0a0a0aull, 0x0b0b0b0b0b0b0b0bull };
    for (int i = 0; i < cl.n; i++) {
        if (cl.pids[i] <= 0)
            continue;
        for (int t = 0; t < 2; t++) {
            char pat[64], pw[16], buf[128];
            snprintf(pat, sizeof pat, "~sb1:%016llx:*", (unsigned long long)tags[t]);
            snprintf(pw, sizeof pw, ">%s", users[t][1]);
            const char *argv[9] = { "ACL", "SETUSER", users[t][0], "on", pw, "resetkeys", pat,
                                    "+@all", "-@dangerous" };
            assert_int_equal(tu_cluster_cmd(&cl, i, buf, sizeof buf, 9, argv), 0);
            assert_string_equal(buf, "OK");
            /* CLUSTER SLOTS is needed by the client; READONLY / ASKING too. */
            const char *argv2[6] = { "ACL", "SETUSER", users[t][0], "+cluster|slots", "+readonly",
                                     "+asking" };
            assert_int_equal(tu_cluster_cmd(&cl, i, buf, sizeof buf, 6, argv2), 0);
        }
    }
    sb_remote *a = open_remote(users[0][0], users[0][1], 0);
    sb_remote *b = open_remote(users[1][0], users[1][1], 0);
    seq sa, sb;
    seq_make(&sa, 0xe1, tags[0], 7, false);
    seq_make(&sb, 0xe1, tags[1], 7, false); /* same model, same tokens, other tenant */
    for (size_t p = 0; p < N_PAGES; p++) {
        sb_remote_page pg = seq_page(&sa, p);
        assert_int_equal(sb_remote_offer(a, &pg), SB_OK);
    }
    sb_remote_flush(a);
    sb_remote_stats st;
    sb_remote_get_stats(a, &st);
    assert_int_equal(st.published, N_PAGES);
    size_t n;
    /* b computes its own keys (its scope tag): nothing there. */
    assert_int_equal(sb_remote_probe(b, &sb.ns, (const uint64_t(*)[2])sb.key, N_PAGES, &n), SB_OK);
    assert_int_equal(n, 0);
    /* b asking for a's keys by name is refused by the server's ACL. */
    assert_int_not_equal(fetch_verify(b, &sa, 1, &n), SB_OK);
    assert_int_equal(n, 0);
    /* b cannot write into a's key space either. */
    sb_remote_page pg = seq_page(&sa, 0);
    pg.ns.ns_id ^= 1;
    assert_int_equal(sb_remote_offer(b, &pg), SB_OK);
    sb_remote_flush(b);
    sb_remote_get_stats(b, &st);
    assert_int_equal(st.published, 0);
    assert_int_equal(st.publish_failed, 1);
    assert_int_equal(fetch_verify(a, &sa, N_PAGES, &n), SB_OK);
    seq_free(&sa);
    seq_free(&sb);
    sb_remote_close(a);
    sb_remote_close(b);
}

static sb_remote *open_sealed(const sb_seal *seal)
{
    sb_remote_config cfg = { .seeds = cl.seeds, .timeout_ms = 5000, .seal = seal };
    sb_remote *r = NULL;
    assert_int_equal(sb_remote_open(&cfg, &r, NULL, 0), SB_OK);
    return r;
}

/* GET key raw through a plain client. */
static uint8_t *raw_get(const char *key, size_t *len)
{
    sb_rc_config rcc = { .seeds = cl.seeds, .timeout_ms = 5000 };
    sb_rc *rc = NULL;
    assert_int_equal(sb_rc_open(&rcc, &rc, NULL, 0), SB_OK);
    sb_rc_op op = { .kind = SB_RC_GET, .key = key, .key_len = SB_REMOTE_KEY_LEN };
    assert_int_equal(sb_rc_exec(rc, &op, 1), SB_OK);
    sb_rc_close(rc);
    *len = op.len;
    return op.status == SB_RC_OK ? op.data : NULL;
}

static bool holds(const uint8_t *v, size_t n, const void *what, size_t wn)
{
    for (size_t i = 0; i + wn <= n; i++)
        if (!memcmp(v + i, what, wn))
            return true;
    return false;
}

static void test_secrecy(void **state)
{
    (void)state;
    NEED_CLUSTER();
    sb_seal sa, sbx;
    assert_int_equal(sb_seal_from_bytes("secret of deployment A, 32 bytes", 32, &sa), SB_OK);
    assert_int_equal(sb_seal_from_bytes("secret of deployment B, 32 bytes", 32, &sbx), SB_OK);
    sb_remote *a = open_sealed(&sa), *b = open_sealed(&sbx), *p = open_remote(NULL, NULL, 0);
    seq s;
    seq_make(&s, 0xf1, 0xf2, 8, false);
    for (size_t i = 0; i < N_PAGES; i++) {
        sb_remote_page pg = seq_page(&s, i);
        assert_int_equal(sb_remote_offer(a, &pg), SB_OK);
    }
    sb_remote_flush(a);
    size_t n;
    assert_int_equal(fetch_verify(a, &s, N_PAGES, &n), SB_OK);
    assert_int_equal(n, N_PAGES);

    /* Keys: not the plain ones, not the other secret's; the plain and the
     * other handle find nothing, and that is a miss, not an error. */
    char ka[SB_REMOTE_KEY_LEN + 1] = { 0 }, kp[SB_REMOTE_KEY_LEN + 1] = { 0 },
         kb[SB_REMOTE_KEY_LEN + 1] = { 0 };
    sb_remote_key_of(a, ka, &s.ns, s.key[3]);
    sb_remote_key(kp, &s.ns, s.key[3]);
    sb_remote_key_of(b, kb, &s.ns, s.key[3]);
    assert_memory_not_equal(ka, kp, SB_REMOTE_KEY_LEN);
    assert_memory_not_equal(ka, kb, SB_REMOTE_KEY_LEN);
    assert_memory_equal(ka, "sb2:", 4);
    assert_int_equal(sb_remote_probe(p, &s.ns, (const uint64_t(*)[2])s.key, N_PAGES, &n), SB_OK);
    assert_int_equal(n, 0);
    assert_int_equal(sb_remote_probe(b, &s.ns, (const uint64_t(*)[2])s.key, N_PAGES, &n), SB_OK);
    assert_int_equal(n, 0);
    assert_int_equal(fetch_verify(b, &s, 4, &n), SB_ERR_NOT_FOUND);
    sb_remote_stats st;
    sb_remote_get_stats(b, &st);
    assert_int_equal(st.bad_values + st.down, 0);

    /* A raw GET shows none of the page's token IDs (a plain value does). */
    size_t len;
    uint8_t *v = raw_get(ka, &len);
    assert_non_null(v);
    assert_false(holds(v, len, s.tokens + 3 * PT, 4 * PT));
    assert_false(holds(v, len, s.tokens + 3 * PT, 16)); /* not even four */
    free(v);
    sb_remote_page pg = seq_page(&s, 3);
    void *plain;
    size_t plen;
    assert_int_equal(sb_remote_encode_value(&pg, 0, &plain, &plen), SB_OK);
    assert_true(holds(plain, plen, s.tokens + 3 * PT, 4 * PT));

    /* Forged: a plain value with correct checksums under a's key of page
     * 3, then one sealed with the other secret: refused, counted. */
    sb_rc_config rcc = { .seeds = cl.seeds, .timeout_ms = 5000 };
    sb_rc *rc = NULL;
    assert_int_equal(sb_rc_open(&rcc, &rc, NULL, 0), SB_OK);
    sb_rc_op set = { .kind = SB_RC_SET, .key = ka, .key_len = SB_REMOTE_KEY_LEN, .val = plain,
                     .val_len = plen };
    assert_int_equal(sb_rc_exec(rc, &set, 1), SB_OK);
    assert_int_equal(set.status, SB_RC_OK);
    assert_int_equal(fetch_verify(a, &s, N_PAGES, &n), SB_ERR_CORRUPT);
    assert_int_equal(n, 3);
    void *box;
    size_t blen;
    assert_int_equal(sb_seal_value(&sbx, s.ns.scope_tag, ka, plain, plen, &box, &blen), SB_OK);
    set.val = box, set.val_len = blen;
    assert_int_equal(sb_rc_exec(rc, &set, 1), SB_OK);
    assert_int_equal(fetch_verify(a, &s, N_PAGES, &n), SB_ERR_CORRUPT);
    assert_int_equal(n, 3);
    sb_remote_get_stats(a, &st);
    assert_int_equal(st.forged, 2);
    assert_int_equal(st.bad_values, 2);
    free(box);
    free(plain);
    sb_rc_close(rc);
    seq_free(&s);
    sb_remote_close(a);
    sb_remote_close(b);
    sb_remote_close(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_format),      cmocka_unit_test(test_publish_fetch_raw),
        cmocka_unit_test(test_publish_fetch_zstd), cmocka_unit_test(test_poisoned_values),
        cmocka_unit_test(test_publish_budget),  cmocka_unit_test(test_tenants_acl),
        cmocka_unit_test(test_secrecy),
    };
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
