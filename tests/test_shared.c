/* test_shared.c -- two stores sharing pages through the shared tier
 * (sb_config.shared_seeds, sb_ns_fetch_shared) on a real local Redis
 * Cluster (three masters, a replica each, started and stopped here;
 * skipped with a message when redis-server is absent).
 *
 * Description: each store has its own directory and its own RAM. Store A
 * commits a prefix; its publisher writes the full pages; store B, which
 * knows only the tokens, fetches them past what its own RAM and disk hold
 * and restores them bit-exact; a fetched page is not published back. A
 * poisoned value (a right key over a damaged payload) is refused and
 * counted, the good pages before it kept. Two tenants (scopes) share
 * nothing. A layout that needs point states publishes nothing and is
 * refused a fetch. Options that do not hold are refused at open. With the whole
 * cluster stopped, a fetch fails with SB_ERR_IO within its timeout and the
 * store works on from RAM and disk.
 *
 * Failures told apart (sb_fetch_shared_info.fault, sb_stats.shared_err_*):
 * a wrong password, an ACL user lacking GET, a key of another type where
 * a page should be, a hung node, a budget that ran out (deadline), a
 * master and its replica gone (clusterdown), the whole cluster gone
 * (connect). A fetch that progresses slowly but steadily (a master
 * kept busy by a script again and again) is not cut at the stall bound. A bad value is replaced by the node that recomputes the page,
 * and a third node restores it.
 */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "internal.h"
#include "rcluster.h"
#include "rcluster_util.h"
#include "remote.h"
#include "snapbank.h"
#include "testutil.h"

static tu_cluster cl;
static bool have_cluster;
static char tmp[256];

static const tu_layout LAY = { .page_tokens = 16, .n_tensors = 2, .bpt = { 96, 160 },
                               .model = "test-shared-model" };

#define NEED_CLUSTER()     \
    do {                   \
        if (!have_cluster) \
            skip();        \
    } while (0)

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb, (void)flag, (void)f;
    return remove(p);
}

/* A store on directory tmp/name with a shared tier on the test cluster,
 * its publisher writing at most rate bytes a second (0: the default). */
static sb_store *open_store_with(const char *name, uint32_t timeout_ms, uint64_t rate)
{
    char dir[320];
    snprintf(dir, sizeof dir, "%s/%s", tmp, name);
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.min_prefix_tokens = 1;
    cfg.ram_bytes = 16 << 20;
    cfg.segment_bytes = 1 << 20;
    cfg.disk_bytes = 64 << 20;
    cfg.disk_free_floor_bytes = 0;
    cfg.dir = dir;
    cfg.shared_seeds = cl.seeds;
    cfg.shared_timeout_ms = timeout_ms;
    if (rate)
        cfg.shared_publish_bytes_per_s = rate;
    sb_store *st = NULL;
    assert_int_equal(sb_store_open(&cfg, &st), SB_OK);
    return st;
}

/* As open_store_with, as ACL user `user` with password pw. */
static sb_store *open_store_user(const char *name, const char *user, const char *pw)
{
    char dir[320];
    snprintf(dir, sizeof dir, "%s/%s", tmp, name);
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.min_prefix_tokens = 1;
    cfg.ram_bytes = 16 << 20;
    cfg.dir = NULL;
    (void)dir;
    cfg.shared_seeds = cl.seeds;
    cfg.shared_user = user;
    cfg.shared_password = pw;
    cfg.shared_timeout_ms = 2000;
    sb_store *st = NULL;
    assert_int_equal(sb_store_open(&cfg, &st), SB_OK);
    return st;
}

static sb_store *open_store(const char *name, uint32_t timeout_ms)
{
    sb_store *st = open_store_with(name, timeout_ms, 0);
    assert_int_equal(sb_store_has_shared(st), 1);
    return st;
}

static sb_store *open_store_rate(const char *name, uint64_t rate)
{
    return open_store_with(name, 5000, rate);
}

static void tokens_of(uint32_t *tok, size_t n, uint64_t seed)
{
    uint64_t rng = seed;
    tu_tokens(&rng, tok, n, 50000);
}

static int group_setup(void **state)
{
    (void)state;
    snprintf(tmp, sizeof tmp, "/tmp/sb-test-shared-XXXXXX");
    if (!mkdtemp(tmp))
        return -1;
    return tu_cluster_suite_start(&cl, "test_shared", &have_cluster);
}

static int group_teardown(void **state)
{
    (void)state;
    if (have_cluster)
        tu_cluster_stop(&cl);
    nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

/* Options that do not hold are refused at open, before anything connects. */
static void test_config_refused(void **state)
{
    (void)state;
    sb_config cfg;
    sb_store *st = NULL;
    const char *bad_seeds[] = { "localhost", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:70000",
                                "127.0.0.1:6379,", ":6379", "127.0.0.1:63x9" };
    for (size_t i = 0; i < sizeof bad_seeds / sizeof *bad_seeds; i++) {
        sb_config_default(&cfg);
        cfg.shared_seeds = bad_seeds[i];
        assert_int_equal(sb_store_open(&cfg, &st), SB_ERR_INVAL);
        assert_null(st);
    }
    sb_config_default(&cfg);
    cfg.shared_password = "pw"; /* without seeds */
    assert_int_equal(sb_store_open(&cfg, &st), SB_ERR_INVAL);
    sb_config_default(&cfg);
    cfg.shared_seeds = "127.0.0.1:1";
    cfg.shared_user = "alice"; /* without a password */
    assert_int_equal(sb_store_open(&cfg, &st), SB_ERR_INVAL);
    sb_config_default(&cfg);
    cfg.shared_seeds = "127.0.0.1:1";
    cfg.shared_timeout_ms = 60001;
    assert_int_equal(sb_store_open(&cfg, &st), SB_ERR_INVAL);
    /* Without a shared tier a fetch is unsupported and changes nothing. */
    st = tu_store(0);
    sb_ns *ns = tu_ns(st, &LAY, "t");
    uint32_t tok[40];
    tokens_of(tok, 40, 1);
    size_t added = 7;
    assert_int_equal(sb_ns_fetch_shared(ns, tok, 40, &added), SB_ERR_UNSUPPORTED);
    assert_int_equal(added, 0);
    assert_int_equal(sb_ns_fetch_shared(NULL, tok, 40, &added), SB_ERR_INVAL);
    assert_int_equal(sb_ns_fetch_shared(ns, NULL, 40, &added), SB_ERR_INVAL);
    assert_int_equal(sb_ns_fetch_shared(ns, tok, 0, &added), SB_ERR_NO_TOKENS);
    assert_int_equal(sb_ns_fetch_shared(ns, tok, (size_t)1 << 25, NULL), SB_ERR_TOO_MANY_TOKENS);
    assert_int_equal(sb_store_has_shared(st), 0);
    sb_ns_close(ns);
    sb_store_close(st);
}

/* A commits a 4-page prefix (and a partial tail); B fetches the full pages
 * and restores them bit-exact. */
static void test_two_stores(void **state)
{
    (void)state;
    NEED_CLUSTER();
    sb_store *a = open_store("a1", 5000), *b = open_store("b1", 5000);
    sb_ns *na = tu_ns(a, &LAY, "tenant"), *nb = tu_ns(b, &LAY, "tenant");
    uint32_t tok[4 * 16 + 5];
    size_t n = sizeof tok / sizeof *tok;
    tokens_of(tok, n, 11);
    tu_put(na, &LAY, tok, n, false, SB_OK);
    assert_int_equal(sb_store_flush(a), SB_OK);
    sb_stats sa;
    sb_store_stats(a, &sa);
    assert_int_equal(sa.shared_offered, 4);
    assert_int_equal(sa.shared_published + sa.shared_dedup, 4);
    assert_int_equal(sa.shared_queued_bytes, 0);

    assert_int_equal(tu_match_len(nb, tok, n), 0);
    size_t added = 0;
    assert_int_equal(sb_ns_fetch_shared(nb, tok, n, &added), SB_OK);
    assert_int_equal(added, 64);
    assert_int_equal(tu_match_verify(nb, &LAY, tok, n), 64);
    sb_stats sbs;
    sb_store_stats(b, &sbs);
    assert_int_equal(sbs.shared_fetched_pages, 4);
    assert_int_equal(sbs.shared_probe_hits, 4);
    assert_int_equal(sbs.shared_bad_values, 0);
    /* Again: the index holds them now, nothing is asked for. */
    assert_int_equal(sb_ns_fetch_shared(nb, tok, n, &added), SB_OK);
    assert_int_equal(added, 0);
    /* B commits the whole sequence: its fetched pages are not offered back. */
    tu_put(nb, &LAY, tok, n, false, SB_OK);
    assert_int_equal(sb_store_flush(b), SB_OK);
    sb_store_stats(b, &sbs);
    assert_int_equal(sbs.shared_offered, 0);
    assert_int_equal(sb_store_check(b), SB_OK);
    assert_int_equal(sb_store_check(a), SB_OK);
    sb_ns_close(na);
    sb_ns_close(nb);
    sb_store_close(a);
    sb_store_close(b);
    /* B's own disk holds them now: reopened, it restores without the pool. */
    b = open_store("b1", 5000);
    nb = tu_ns(b, &LAY, "tenant");
    assert_int_equal(tu_match_verify(nb, &LAY, tok, n), n);
    sb_ns_close(nb);
    sb_store_close(b);
}

/* The same fetch started on a loader thread (sb_ns_fetch_shared_start):
 * its end is seen by poll, wait and the descriptor, its n_ready is the
 * tokens added; the namespace may be closed while it runs; refusals. */
static void test_fetch_async(void **state)
{
    (void)state;
    NEED_CLUSTER();
    sb_store *a = open_store("a5", 5000), *b = open_store("b5", 5000);
    sb_ns *na = tu_ns(a, &LAY, "tenant"), *nb = tu_ns(b, &LAY, "tenant");
    uint32_t tok[6 * 16 + 3];
    size_t n = sizeof tok / sizeof *tok;
    tokens_of(tok, n, 51);
    tu_put(na, &LAY, tok, n, false, SB_OK);
    assert_int_equal(sb_store_flush(a), SB_OK);

    sb_load *ld = NULL;
    assert_int_equal(sb_ns_fetch_shared_start(nb, tok, n, &ld), SB_OK);
    sb_ns_close(nb); /* the load holds the namespace */
    size_t added = 7;
    assert_int_equal(sb_load_wait(ld, 0, -1, &added), SB_OK);
    assert_int_equal(added, 96);
    struct pollfd p = { .fd = sb_load_fd(ld), .events = POLLIN };
    assert_int_equal(poll(&p, 1, 0), 1);
    assert_int_equal(sb_load_poll(ld, &added), SB_OK);
    assert_int_equal(added, 96);
    sb_load_free(ld);
    nb = tu_ns(b, &LAY, "tenant");
    assert_int_equal(tu_match_verify(nb, &LAY, tok, n), 96);
    /* Nothing more: the index holds them. */
    assert_int_equal(sb_ns_fetch_shared_start(nb, tok, n, &ld), SB_OK);
    assert_int_equal(sb_load_wait(ld, SIZE_MAX, -1, &added), SB_OK);
    assert_int_equal(added, 0);
    sb_load_free(ld);
    ld = (sb_load *)&ld;
    assert_int_equal(sb_ns_fetch_shared_start(NULL, tok, n, &ld), SB_ERR_INVAL);
    assert_null(ld);
    assert_int_equal(sb_ns_fetch_shared_start(nb, tok, 0, &ld), SB_ERR_NO_TOKENS);
    assert_int_equal(sb_ns_fetch_shared_start(nb, NULL, n, &ld), SB_ERR_INVAL);
    assert_int_equal(sb_ns_fetch_shared_start(nb, tok, n, NULL), SB_ERR_INVAL);
    assert_int_equal(sb_store_check(b), SB_OK);
    sb_ns_close(na);
    sb_ns_close(nb);
    sb_store_close(a);
    sb_store_close(b);
    /* Without a shared tier. */
    sb_store *r = tu_store(0);
    sb_ns *nr = tu_ns(r, &LAY, "tenant");
    assert_int_equal(sb_ns_fetch_shared_start(nr, tok, n, &ld), SB_ERR_UNSUPPORTED);
    assert_null(ld);
    sb_ns_close(nr);
    sb_store_close(r);
}

/* A value under a right key whose payload was damaged is refused and
 * counted; the good pages before it are kept. */
static void test_poisoned(void **state)
{
    (void)state;
    NEED_CLUSTER();
    sb_store *a = open_store("a2", 5000), *b = open_store("b2", 5000);
    sb_ns *na = tu_ns(a, &LAY, "poison"), *nb = tu_ns(b, &LAY, "poison");
    uint32_t tok[4 * 16];
    size_t n = 64;
    tokens_of(tok, n, 22);
    tu_put(na, &LAY, tok, n, false, SB_OK);
    assert_int_equal(sb_store_flush(a), SB_OK);
    /* Page 2's key, from the tokens alone (white box: the ns's root key). */
    sb_key k = na->root_key;
    for (int p = 0; p < 3; p++)
        k = sb_key_chain(&k, tok + p * 16, 16);
    sb_remote_ns rns = { .ns_id = na->id, .scope_tag = na->scope_hash };
    char key[SB_REMOTE_KEY_LEN];
    sb_remote_key(key, &rns, (const uint64_t[2]){ k.lo, k.hi });
    sb_rc_config rcc = { .seeds = cl.seeds, .timeout_ms = 5000 };
    sb_rc *rc = NULL;
    assert_int_equal(sb_rc_open(&rcc, &rc, NULL, 0), SB_OK);
    sb_rc_op op = { .kind = SB_RC_GET, .key = key, .key_len = SB_REMOTE_KEY_LEN };
    assert_int_equal(sb_rc_exec(rc, &op, 1), SB_OK);
    assert_int_equal(op.status, SB_RC_OK);
    uint8_t *v = op.data;
    v[op.len - 100] ^= 0x40; /* a payload byte */
    sb_rc_op set = { .kind = SB_RC_SET, .key = key, .key_len = SB_REMOTE_KEY_LEN, .val = v,
                     .val_len = op.len };
    assert_int_equal(sb_rc_exec(rc, &set, 1), SB_OK);
    assert_int_equal(set.status, SB_RC_OK);
    free(v);
    sb_rc_close(rc);

    size_t added = 99;
    assert_int_equal(sb_ns_fetch_shared(nb, tok, n, &added), SB_ERR_CORRUPT);
    assert_int_equal(added, 32);
    assert_int_equal(tu_match_verify(nb, &LAY, tok, n), 32);
    sb_stats s;
    sb_store_stats(b, &s);
    assert_int_equal(s.shared_bad_values, 1);
    assert_int_equal(s.shared_fetched_pages, 2);
    assert_int_equal(sb_store_check(b), SB_OK);
    sb_ns_close(na);
    sb_ns_close(nb);
    sb_store_close(a);
    sb_store_close(b);
}

/* Two tenants with the same model and tokens share nothing. */
static void test_tenants_apart(void **state)
{
    (void)state;
    NEED_CLUSTER();
    sb_store *a = open_store("a3", 5000), *b = open_store("b3", 5000);
    sb_ns *na = tu_ns(a, &LAY, "alice"), *nb = tu_ns(b, &LAY, "bob");
    uint32_t tok[48];
    tokens_of(tok, 48, 33);
    tu_put(na, &LAY, tok, 48, false, SB_OK);
    assert_int_equal(sb_store_flush(a), SB_OK);
    size_t added = 1;
    assert_int_equal(sb_ns_fetch_shared(nb, tok, 48, &added), SB_OK);
    assert_int_equal(added, 0);
    assert_int_equal(tu_match_len(nb, tok, 48), 0);
    sb_stats s;
    sb_store_stats(b, &s);
    assert_int_equal(s.shared_probe_hits, 0);
    /* ...while alice on B finds them. */
    sb_ns *nab = tu_ns(b, &LAY, "alice");
    assert_int_equal(sb_ns_fetch_shared(nab, tok, 48, &added), SB_OK);
    assert_int_equal(added, 48);
    sb_ns_close(nab);
    sb_ns_close(na);
    sb_ns_close(nb);
    sb_store_close(a);
    sb_store_close(b);
}

/* A layout that needs point states (a hybrid model's) restores nothing
 * from pages alone: it publishes nothing and a fetch is refused. */
static void test_point_layouts(void **state)
{
    (void)state;
    NEED_CLUSTER();
    static const tu_layout hyb = { .page_tokens = 16, .n_tensors = 1, .bpt = { 64 },
                                   .point_bytes = 256, .flags = SB_LAYOUT_POINT_REQUIRED,
                                   .model = "test-shared-hybrid" };
    sb_store *a = open_store("a5", 5000);
    sb_ns *na = tu_ns(a, &hyb, "h");
    uint32_t tok[48];
    tokens_of(tok, 48, 55);
    tu_put(na, &hyb, tok, 48, true, SB_OK);
    assert_int_equal(sb_store_flush(a), SB_OK);
    sb_stats s;
    sb_store_stats(a, &s);
    assert_int_equal(s.shared_offered, 0);
    size_t added = 3;
    assert_int_equal(sb_ns_fetch_shared(na, tok, 48, &added), SB_ERR_UNSUPPORTED);
    assert_int_equal(added, 0);
    sb_ns_close(na);
    sb_store_close(a);
}

/* sb_ns_remove deletes the keys of the full pages it took from the pool
 * (published pages and publications still queued alike); the pages of the
 * prefix before the cut, and a sequence that leaves it before the cut,
 * stay; another store's own copies are not touched. */
static void test_remove_forgets(void **state)
{
    (void)state;
    NEED_CLUSTER();
    sb_store *a = open_store("a5", 5000), *b = open_store("b5", 5000), *c = open_store("c5", 5000);
    sb_ns *na = tu_ns(a, &LAY, "rm"), *nb = tu_ns(b, &LAY, "rm"), *nc = tu_ns(c, &LAY, "rm");
    uint32_t t1[4 * 16 + 3], t2[4 * 16];
    tokens_of(t1, 67, 51);
    memcpy(t2, t1, 32 * sizeof *t1);
    tokens_of(t2 + 32, 32, 52); /* leaves t1 at 32, before the cut at 33 */
    tu_put(na, &LAY, t1, 67, false, SB_OK);
    tu_put(na, &LAY, t2, 64, false, SB_OK);
    assert_int_equal(sb_store_flush(a), SB_OK);
    size_t added = 0;
    assert_int_equal(sb_ns_fetch_shared(nb, t1, 67, &added), SB_OK);
    assert_int_equal(added, 64);
    /* Pages 2 and 3 of t1 start with t1[32, 33): removed, and deleted. */
    size_t removed = 0;
    assert_int_equal(sb_ns_remove(na, t1, 33, &removed), SB_OK);
    assert_int_equal(removed, 3); /* pages 2, 3 and the partial page 4 */
    sb_stats sa;
    sb_store_stats(a, &sa);
    assert_int_equal(sa.shared_forgotten, 2);
    assert_int_equal(sa.shared_forget_failed, 0);
    assert_int_equal(sb_ns_fetch_shared(nc, t1, 67, &added), SB_OK);
    assert_int_equal(added, 32);
    assert_int_equal(sb_ns_fetch_shared(nc, t2, 64, &added), SB_OK);
    assert_int_equal(added, 32);
    assert_int_equal(tu_match_verify(nc, &LAY, t2, 64), 64);
    /* B's own copies stay (call sb_ns_remove on every node). */
    assert_int_equal(tu_match_verify(nb, &LAY, t1, 67), 64);
    sb_ns_close(na);
    sb_store_close(a);

    /* Publications still queued when the removal comes go unpublished: a
     * publisher of 4 KiB a second has 4 pages of 16 KiB waiting. */
    sb_store *d = open_store_rate("d5", 4096);
    sb_ns *nd = tu_ns(d, &LAY, "rm");
    uint32_t t3[64];
    tokens_of(t3, 64, 53);
    tu_put(nd, &LAY, t3, 64, false, SB_OK);
    assert_int_equal(sb_ns_remove(nd, t3, 1, &removed), SB_OK);
    assert_int_equal(removed, 4);
    sb_store_flush(d); /* what is still queued: nothing of t3 */
    sb_stats sd;
    sb_store_stats(d, &sd);
    assert_int_equal(sd.shared_queued_bytes, 0);
    assert_int_equal(sb_ns_fetch_shared(nc, t3, 64, &added), SB_OK);
    assert_int_equal(added, 0);
    assert_int_equal(sb_store_check(d), SB_OK);
    assert_int_equal(sb_store_check(c), SB_OK);
    sb_ns_close(nb);
    sb_ns_close(nc);
    sb_ns_close(nd);
    sb_store_close(b);
    sb_store_close(c);
    sb_store_close(d);
}

/* The whole cluster gone: a fetch fails cleanly, B works on RAM and disk
 * only, and its close does not hang on the publisher. (Last: it stops the
 * cluster.) */
/* The pool key of page p (0-based) of tokens in ns (white box: the ns's
 * root key and scope hash). */
static void page_key(const sb_ns *ns, const uint32_t *tok, int p, char key[SB_REMOTE_KEY_LEN])
{
    sb_key k = ns->root_key;
    for (int i = 0; i <= p; i++)
        k = sb_key_chain(&k, tok + i * 16, 16);
    sb_remote_ns rns = { .ns_id = ns->id, .scope_tag = ns->scope_hash };
    sb_remote_key(key, &rns, (const uint64_t[2]){ k.lo, k.hi });
}

/* Run argv on every running server, expecting want. */
static void on_all_want(const char *want, int argc, const char **argv)
{
    for (int i = 0; i < cl.n; i++) {
        if (cl.pids[i] <= 0)
            continue;
        char buf[256];
        assert_int_equal(tu_cluster_cmd(&cl, i, buf, sizeof buf, argc, argv), 0);
        assert_string_equal(buf, want);
    }
}

static void on_all(int argc, const char **argv)
{
    on_all_want("OK", argc, argv);
}

/* Each failure is told apart: the fetch says which, with the server's
 * words, and the store counts it under its own name. */
static void test_faults_told_apart(void **state)
{
    (void)state;
    NEED_CLUSTER();
    sb_store *a = open_store("a5", 5000);
    sb_ns *na = tu_ns(a, &LAY, "faults");
    uint32_t tok[64];
    tokens_of(tok, 64, 55);
    tu_put(na, &LAY, tok, 64, false, SB_OK);
    assert_int_equal(sb_store_flush(a), SB_OK);
    on_all(7, (const char *[]){ "ACL", "SETUSER", "sbright", "on", ">right", "~*", "+@all" });
    on_all(8, (const char *[]){ "ACL", "SETUSER", "sbnoget", "on", ">pw", "~*", "+@all",
                                "-get" });
    sb_fetch_shared_info fi;
    sb_stats s;

    /* 1. A wrong password: auth, with the server's WRONGPASS. */
    sb_store *w = open_store_user("w5", "sbright", "wrong");
    sb_ns *nw = tu_ns(w, &LAY, "faults");
    assert_int_equal(sb_ns_fetch_shared_ex(nw, tok, 64, NULL, &fi), SB_ERR_IO);
    assert_int_equal(fi.fault, SB_SHARED_FAULT_AUTH);
    assert_string_equal(sb_shared_fault_name(fi.fault), "auth");
    assert_non_null(strstr(fi.detail, "WRONGPASS"));
    assert_int_equal(fi.n_added, 0);
    sb_store_stats(w, &s);
    assert_true(s.shared_err_auth > 0);
    assert_int_equal(s.shared_err_noperm + s.shared_err_timeout + s.shared_err_connect, 0);

    /* 2. An ACL user that may EXISTS but not GET: noperm. */
    sb_store *n = open_store_user("n5", "sbnoget", "pw");
    sb_ns *nn = tu_ns(n, &LAY, "faults");
    assert_int_equal(sb_ns_fetch_shared_ex(nn, tok, 64, NULL, &fi), SB_ERR_IO);
    assert_int_equal(fi.fault, SB_SHARED_FAULT_NOPERM);
    assert_non_null(strstr(fi.detail, "NOPERM"));
    assert_int_equal(fi.n_pages, 4); /* the probe found them */
    sb_store_stats(n, &s);
    assert_int_equal(s.shared_err_noperm, 4);
    assert_int_equal(s.shared_err_auth, 0);

    /* 3. A list where page 2 should be: wrongtype, the pages before kept. */
    char key[SB_REMOTE_KEY_LEN + 1] = { 0 };
    page_key(na, tok, 2, key);
    int m = tu_cluster_master_of(&cl, sb_rc_slot(key, SB_REMOTE_KEY_LEN));
    assert_true(m >= 0);
    char buf[256];
    assert_int_equal(tu_cluster_cmd(&cl, m, buf, sizeof buf, 2, (const char *[]){ "DEL", key }), 0);
    assert_int_equal(
        tu_cluster_cmd(&cl, m, buf, sizeof buf, 3, (const char *[]){ "RPUSH", key, "x" }), 0);
    sb_store *b = open_store("b5", 5000);
    sb_ns *nb = tu_ns(b, &LAY, "faults");
    assert_int_equal(sb_ns_fetch_shared_ex(nb, tok, 64, NULL, &fi), SB_ERR_IO);
    assert_int_equal(fi.fault, SB_SHARED_FAULT_WRONGTYPE);
    assert_non_null(strstr(fi.detail, "WRONGTYPE"));
    assert_int_equal(fi.n_added, 32);
    sb_store_stats(b, &s);
    assert_int_equal(s.shared_err_wrongtype, 1);
    assert_int_equal(s.shared_bad_values, 0);
    assert_int_equal(tu_cluster_cmd(&cl, m, buf, sizeof buf, 2, (const char *[]){ "DEL", key }), 0);

    on_all_want("1", 3, (const char *[]){ "ACL", "DELUSER", "sbright" });
    on_all_want("1", 3, (const char *[]){ "ACL", "DELUSER", "sbnoget" });
    sb_ns_close(na), sb_ns_close(nw), sb_ns_close(nn), sb_ns_close(nb);
    sb_store_close(a), sb_store_close(w), sb_store_close(n), sb_store_close(b);
}

/* A master kept busy again and again: a script that spins for 100 ms,
 * sent again as soon as it returns. Between two, the server serves what
 * the other clients sent meanwhile (a fetch's window of values), so a
 * fetch through it progresses slowly but steadily: about one window per
 * 100 ms. */
typedef struct pauser {
    int port;
    int rounds;
    pthread_t th;
} pauser;

static void *pause_loop(void *arg)
{
    pauser *p = arg;
    redisContext *c = redisConnect("127.0.0.1", p->port);
    for (int i = 0; c && !c->err && i < p->rounds; i++) {
        redisReply *r = redisCommand(
            c, "EVAL %s 0",
            "local s = redis.call('TIME') "
            "repeat local n = redis.call('TIME') "
            "until (n[1] - s[1]) * 1000000 + (n[2] - s[2]) >= 100000 return 1");
        if (r)
            freeReplyObject(r);
    }
    if (c)
        redisFree(c);
    return NULL;
}

static void pauser_start(pauser *p, int server, int rounds)
{
    p->port = cl.ports[server];
    p->rounds = rounds;
    assert_int_equal(pthread_create(&p->th, NULL, pause_loop, p), 0);
    struct timespec ts = { 0, 5 * 1000000L }; /* the first spin is on */
    nanosleep(&ts, NULL);
}

static void pauser_stop(pauser *p)
{
    pthread_join(p->th, NULL);
}

/* The fetch follows its progress: slow but steady is not cut (the stall
 * bound is 1 s; the probe and the fetch each span about 20 spins of 100
 * ms), a hung node is
 * cut (timeout, marked down), and a caller's cost that makes recomputing
 * cheaper ends it as a deadline (nodes not marked down). */
static void test_fetch_follows_progress(void **state)
{
    (void)state;
    NEED_CLUSTER();
    enum { NT = 512 * 16 };
    uint32_t *tok = malloc(NT * sizeof *tok);
    tokens_of(tok, NT, 66);
    sb_store *a = open_store("a6", 5000);
    sb_ns *na = tu_ns(a, &LAY, "slow");
    tu_put(na, &LAY, tok, NT, false, SB_OK);
    assert_int_equal(sb_store_flush(a), SB_OK);
    char key[SB_REMOTE_KEY_LEN + 1] = { 0 };
    page_key(na, tok, 0, key);
    int m = tu_cluster_master_of(&cl, sb_rc_slot(key, SB_REMOTE_KEY_LEN));
    assert_true(m >= 0);
    sb_fetch_shared_info fi;
    sb_stats s;

    /* 1. Slow but steady: all of it. */
    sb_store *b = open_store("b6", 1000);
    sb_ns *nb = tu_ns(b, &LAY, "slow");
    pauser p;
    pauser_start(&p, m, 50);
    int rc = sb_ns_fetch_shared_ex(nb, tok, NT, NULL, &fi);
    pauser_stop(&p);
    if (rc != SB_OK)
        print_message("slow fetch: %s, %zu tokens, %s\n", sb_shared_fault_name(fi.fault),
                      fi.n_added, fi.detail);
    assert_int_equal(rc, SB_OK);
    assert_int_equal(fi.fault, SB_SHARED_FAULT_NONE);
    assert_int_equal(fi.n_added, NT);
    assert_int_equal(tu_match_verify(nb, &LAY, tok, NT), NT);
    sb_store_stats(b, &s);
    assert_int_equal(s.shared_err_timeout + s.shared_err_deadline, 0);

    /* 2. A cost that makes recomputing the rest faster than waiting for a
     * busy master: a deadline, the node not marked down. */
    sb_store *d = open_store("d6", 1000);
    sb_ns *nd = tu_ns(d, &LAY, "slow");
    pauser_start(&p, m, 50);
    sb_fetch_shared_opts cheap = { .recompute_s_per_token = 1e-9 };
    rc = sb_ns_fetch_shared_ex(nd, tok, NT, &cheap, &fi);
    pauser_stop(&p);
    if (fi.fault != SB_SHARED_FAULT_DEADLINE)
        print_message("cheap fetch: %s, %zu tokens, %s\n", sb_shared_fault_name(fi.fault),
                      fi.n_added, fi.detail);
    assert_int_equal(rc, SB_ERR_IO);
    assert_int_equal(fi.fault, SB_SHARED_FAULT_DEADLINE);
    assert_true(fi.n_added < NT);
    sb_store_stats(d, &s);
    assert_true(s.shared_err_deadline > 0);
    assert_int_equal(s.shared_err_timeout, 0);

    /* 3. A hung master (SIGSTOP): cut after the stall bound, a timeout. */
    sb_store *c = open_store("c6", 300);
    sb_ns *nc = tu_ns(c, &LAY, "slow");
    tu_cluster_signal(&cl, m, SIGSTOP);
    rc = sb_ns_fetch_shared_ex(nc, tok, NT, NULL, &fi);
    tu_cluster_signal(&cl, m, SIGCONT);
    if (fi.fault != SB_SHARED_FAULT_TIMEOUT)
        print_message("hung fetch: %s, %zu tokens, %s\n", sb_shared_fault_name(fi.fault),
                      fi.n_added, fi.detail);
    assert_int_equal(rc, SB_ERR_IO);
    assert_int_equal(fi.fault, SB_SHARED_FAULT_TIMEOUT);
    assert_true(fi.n_added < NT);
    sb_store_stats(c, &s);
    assert_true(s.shared_err_timeout > 0);
    assert_int_equal(tu_cluster_wait_ok(&cl, 30), 0);

    free(tok);
    sb_ns_close(na), sb_ns_close(nb), sb_ns_close(nd), sb_ns_close(nc);
    sb_store_close(a), sb_store_close(b), sb_store_close(d), sb_store_close(c);
}

/* GET key raw: its value (malloc'd, *len) or NULL. */
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

/* SET key raw. */
static void raw_set(const char *key, const void *v, size_t len)
{
    sb_rc_config rcc = { .seeds = cl.seeds, .timeout_ms = 5000 };
    sb_rc *rc = NULL;
    assert_int_equal(sb_rc_open(&rcc, &rc, NULL, 0), SB_OK);
    sb_rc_op set = { .kind = SB_RC_SET, .key = key, .key_len = SB_REMOTE_KEY_LEN, .val = v,
                     .val_len = len };
    assert_int_equal(sb_rc_exec(rc, &set, 1), SB_OK);
    assert_int_equal(set.status, SB_RC_OK);
    sb_rc_close(rc);
}

/* A bad value does not stay in the pool for good: the node that refused
 * it and recomputed the page replaces it, and a third node restores the
 * whole prefix. The replacement is a compare: a value someone else wrote
 * meanwhile is not overwritten. */
static void test_bad_value_replaced(void **state)
{
    (void)state;
    NEED_CLUSTER();
    sb_store *a = open_store("a7", 5000), *b = open_store("b7", 5000);
    sb_ns *na = tu_ns(a, &LAY, "replace"), *nb = tu_ns(b, &LAY, "replace");
    uint32_t tok[64];
    tokens_of(tok, 64, 77);
    tu_put(na, &LAY, tok, 64, false, SB_OK);
    assert_int_equal(sb_store_flush(a), SB_OK);
    char key[SB_REMOTE_KEY_LEN + 1] = { 0 };
    page_key(na, tok, 2, key);
    size_t glen, len;
    uint8_t *good = raw_get(key, &glen);
    assert_non_null(good);
    uint8_t *bad = malloc(glen);
    memcpy(bad, good, glen);
    bad[glen - 100] ^= 0x40;
    raw_set(key, bad, glen);

    /* B refuses it, names it, recomputes (commits the prefix) and the
     * publisher replaces it. */
    sb_fetch_shared_info fi;
    assert_int_equal(sb_ns_fetch_shared_ex(nb, tok, 64, NULL, &fi), SB_ERR_CORRUPT);
    assert_int_equal(fi.fault, SB_SHARED_FAULT_BAD_VALUE);
    assert_string_equal(fi.detail, key);
    assert_int_equal(fi.n_bad, 1);
    assert_int_equal(fi.n_added, 32);
    tu_put(nb, &LAY, tok, 64, false, SB_OK);
    assert_int_equal(sb_store_flush(b), SB_OK);
    sb_stats s;
    sb_store_stats(b, &s);
    assert_int_equal(s.shared_replaced, 1);
    uint8_t *now = raw_get(key, &len);
    assert_non_null(now);
    assert_int_equal(len, glen);
    assert_memory_equal(now, good, glen);
    free(now);

    /* A third node restores all of it. */
    sb_store *c = open_store("c7", 5000);
    sb_ns *nc = tu_ns(c, &LAY, "replace");
    assert_int_equal(sb_ns_fetch_shared_ex(nc, tok, 64, NULL, &fi), SB_OK);
    assert_int_equal(fi.n_added, 64);
    assert_int_equal(tu_match_verify(nc, &LAY, tok, 64), 64);
    sb_store_stats(c, &s);
    assert_int_equal(s.shared_bad_values, 0);

    /* The race: D refuses the bad value, but someone writes another value
     * before D publishes: D's compare fails, that value stays. */
    raw_set(key, bad, glen);
    sb_store *d = open_store("d7", 5000);
    sb_ns *nd = tu_ns(d, &LAY, "replace");
    assert_int_equal(sb_ns_fetch_shared_ex(nd, tok, 64, NULL, &fi), SB_ERR_CORRUPT);
    uint8_t *other = malloc(glen);
    memcpy(other, good, glen);
    other[glen - 50] ^= 0x01; /* anything but the bad value */
    raw_set(key, other, glen);
    tu_put(nd, &LAY, tok, 64, false, SB_OK);
    assert_int_equal(sb_store_flush(d), SB_OK);
    sb_store_stats(d, &s);
    assert_int_equal(s.shared_replaced, 0);
    now = raw_get(key, &len);
    assert_non_null(now);
    assert_memory_equal(now, other, glen);
    free(now);
    raw_set(key, good, glen);

    free(good), free(bad), free(other);
    sb_ns_close(na), sb_ns_close(nb), sb_ns_close(nc), sb_ns_close(nd);
    sb_store_close(a), sb_store_close(b), sb_store_close(c), sb_store_close(d);
}

static void test_cluster_gone(void **state)
{
    (void)state;
    NEED_CLUSTER();
    sb_store *a = open_store("a4", 5000), *b = open_store("b4", 300);
    sb_ns *na = tu_ns(a, &LAY, "gone"), *nb = tu_ns(b, &LAY, "gone");
    uint32_t tok[64], own[40];
    tokens_of(tok, 64, 44);
    tokens_of(own, 40, 45);
    tu_put(na, &LAY, tok, 64, false, SB_OK);
    assert_int_equal(sb_store_flush(a), SB_OK);
    tu_put(nb, &LAY, own, 40, false, SB_OK);
    assert_int_equal(sb_store_flush(b), SB_OK);
    sb_stats s0;
    sb_store_stats(b, &s0);

    /* A master and its replica killed: once the others say
     * cluster_state:fail they answer CLUSTERDOWN, and that is what the
     * fetch says (or connect, when its first key was the dead master's),
     * and what is counted. */
    char buf[2048], want[32];
    int dead = tu_cluster_master_of(&cl, 0), rep = -1;
    assert_true(dead >= 0);
    snprintf(want, sizeof want, "master_port:%d\r", cl.ports[dead]);
    for (int i = 0; i < cl.n && rep < 0; i++)
        if (i != dead &&
            tu_cluster_cmd(&cl, i, buf, sizeof buf, 2, (const char *[]){ "INFO", "replication" }) ==
                0 &&
            strstr(buf, want))
            rep = i;
    assert_true(rep >= 0);
    tu_cluster_signal(&cl, dead, SIGKILL);
    tu_cluster_signal(&cl, rep, SIGKILL);
    int alive = -1;
    for (int i = 0; i < cl.n && alive < 0; i++)
        if (cl.pids[i] > 0)
            alive = i;
    bool failed = false;
    for (int k = 0; k < 200 && !failed; k++) {
        failed = tu_cluster_cmd(&cl, alive, buf, sizeof buf, 2,
                                (const char *[]){ "CLUSTER", "INFO" }) == 0 &&
                 strstr(buf, "cluster_state:fail");
        if (!failed)
            poll(NULL, 0, 50);
    }
    assert_true(failed);
    uint32_t many[20 * 16];
    tokens_of(many, 20 * 16, 47);
    sb_fetch_shared_info cd;
    assert_int_equal(sb_ns_fetch_shared_ex(nb, many, 20 * 16, NULL, &cd), SB_ERR_IO);
    assert_true(cd.fault == SB_SHARED_FAULT_CLUSTERDOWN || cd.fault == SB_SHARED_FAULT_CONNECT);
    sb_stats sc;
    sb_store_stats(b, &sc);
    assert_true(sc.shared_err_clusterdown > s0.shared_err_clusterdown);

    tu_cluster_stop(&cl);
    have_cluster = false;
    sb_fetch_shared_info fi;
    assert_int_equal(sb_ns_fetch_shared_ex(nb, tok, 64, NULL, &fi), SB_ERR_IO);
    assert_int_equal(fi.fault, SB_SHARED_FAULT_CONNECT);
    size_t added = 5;
    /* It returns (a hang would meet ctest's timeout; how long the fetch
     * waits, shared_timeout_ms, is not a figure for a test to assert). */
    assert_int_equal(sb_ns_fetch_shared(nb, tok, 64, &added), SB_ERR_IO);
    assert_int_equal(added, 0);
    assert_int_equal(tu_match_len(nb, tok, 64), 0);
    sb_stats s;
    sb_store_stats(b, &s);
    assert_true(s.shared_down > 0);
    assert_true(s.shared_err_connect > 0);
    /* RAM and disk work as before; what B commits is not published. */
    assert_int_equal(tu_match_verify(nb, &LAY, own, 40), 40);
    uint32_t more[80];
    tokens_of(more, 80, 46);
    tu_put(nb, &LAY, more, 80, false, SB_OK);
    assert_int_equal(sb_store_flush(b), SB_OK);
    assert_int_equal(tu_match_verify(nb, &LAY, more, 80), 80);
    sb_store_stats(b, &s);
    assert_int_equal(s.shared_published, s0.shared_published);
    assert_int_equal(s.shared_publish_failed, s0.shared_publish_failed + 5);
    assert_int_equal(s.shared_queued_bytes, 0);
    assert_int_equal(sb_store_check(b), SB_OK);
    sb_ns_close(na);
    sb_ns_close(nb);
    sb_store_close(a);
    sb_store_close(b);
}

/* A sequence longer than the publish queue is published whole: the pages
 * its queue had no room for wait and are offered again (once the queue
 * drains to half, and at the flush), and a second store fetches it all.
 * The queue is a quarter of ram_bytes: 512 KiB, 128 of these 4 KiB pages;
 * the sequence is 320 pages, offered in one put while the publisher pays
 * 256 KiB/s (a bucket of 64 pages), so at least 128 are denied unless the
 * put's offers took seconds. */
static void test_longer_than_queue(void **state)
{
    (void)state;
    NEED_CLUSTER();
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.min_prefix_tokens = 1;
    cfg.ram_bytes = 2 << 20;
    cfg.shared_seeds = cl.seeds;
    cfg.shared_timeout_ms = 5000;
    cfg.shared_publish_bytes_per_s = 256 << 10;
    sb_store *a = NULL, *b = open_store("lq-b", 5000);
    assert_int_equal(sb_store_open(&cfg, &a), SB_OK);
    sb_ns *na = tu_ns(a, &LAY, "long"), *nb = tu_ns(b, &LAY, "long");
    enum { PAGES = 320 };
    static uint32_t tok[PAGES * 16];
    size_t n = PAGES * 16;
    tokens_of(tok, n, 77);
    tu_put(na, &LAY, tok, n, false, SB_OK);
    assert_int_equal(sb_store_flush(a), SB_OK);
    sb_stats sa;
    sb_store_stats(a, &sa);
    assert_true(sa.shared_denied > 0);
    assert_int_equal(sa.shared_requeued, sa.shared_denied);
    assert_int_equal(sa.shared_offered, PAGES + sa.shared_requeued);
    assert_int_equal(sa.shared_published + sa.shared_dedup, PAGES);
    assert_int_equal(sa.shared_queued_bytes, 0);
    assert_int_equal(sa.indexed_pages, PAGES);
    assert_int_equal(sb_store_check(a), SB_OK);

    size_t added = 0;
    assert_int_equal(sb_ns_fetch_shared(nb, tok, n, &added), SB_OK);
    assert_int_equal(added, n);
    assert_int_equal(tu_match_verify(nb, &LAY, tok, n), n);
    assert_int_equal(sb_store_check(b), SB_OK);
    sb_ns_close(na);
    sb_ns_close(nb);
    sb_store_close(a);
    sb_store_close(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_refused), cmocka_unit_test(test_two_stores),
        cmocka_unit_test(test_fetch_async),
        cmocka_unit_test(test_poisoned),       cmocka_unit_test(test_tenants_apart),
        cmocka_unit_test(test_point_layouts),  cmocka_unit_test(test_remove_forgets),
        cmocka_unit_test(test_faults_told_apart), cmocka_unit_test(test_fetch_follows_progress),
        cmocka_unit_test(test_bad_value_replaced),
        cmocka_unit_test(test_longer_than_queue),
        cmocka_unit_test(test_cluster_gone), /* last: it stops the cluster */
    };
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
