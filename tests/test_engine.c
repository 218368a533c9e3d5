/* Description: the reference integration -- a small paged engine that links
 * snapbank through its public header only, as an engine's connector would
 * (README, "Linking snapbank into an engine", walks this file).
 *
 * The engine: 4 layers, each with a K and a V tensor of 128 bytes per
 * token, kept in a pool of 16-token blocks per tensor, handed out to
 * requests from a shuffled free list (so a request's block table is out of
 * order); the bank's pages are 32 tokens, so runs cross pages and blocks.
 * Its "compute" of layer l for position p writes a row that is a function
 * of the tokens [0, p] (a prefix's state depends on the whole prefix) and
 * the layer, so a row restored from the wrong prefix or place is caught.
 *
 * A scheduling step takes a batch of requests:
 *   1. one batched lookup (sb_ns_lookup) says how much of each the bank
 *      holds, without pinning: the scheduler's admission estimate;
 *   2. per request: blocks from the free list, sb_ns_match (pinning), an
 *      asynchronous load of its pages (sb_match_load_start), and then the
 *      layer loop: wait for the load, restore layer l's K and V into the
 *      request's blocks (sb_match_restore_blocks), compute layer l for the
 *      positions the bank did not hold, and hand layer l's new rows to a
 *      layered put (sb_ns_put_begin before the loop, sb_put_tensors per
 *      layer, sb_put_finish after it);
 *   3. every row of every layer of the request is checked against the
 *      compute, byte for byte, and the blocks go back to the free list.
 * Run: cold requests sharing a system prompt (the second and third find
 * the first's prompt in RAM); the same conversations a turn longer (warm,
 * RAM); after a restart (every page read from disk by the asynchronous
 * load); a user forgetting one conversation (sb_ns_remove: gone, also
 * after a restart; the others and the shared prompt stay); and on a
 * second store that finds the pages in the shared tier
 * (sb_ns_fetch_shared) on a real local Redis Cluster, started and stopped
 * by the test (that part skips, saying so, without redis-server). */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rcluster_util.h"
#include "testutil.h"

#define LAYERS 4u
#define NT (2 * LAYERS)
#define ROW 128u        /* bytes per token of each tensor */
#define BT 16u          /* the engine's block, in tokens */
#define PT 32u          /* the bank's page, in tokens */
#define NBLK 512u       /* blocks in the engine's pool */
#define NREQ 3
#define SYS 200u        /* shared system prompt */
#define MAXTOK 1400u

typedef struct engine {
    uint8_t *pool[NT];            /* NBLK blocks of BT rows, per tensor */
    uint32_t free_list[NBLK];
    uint32_t n_free;
    uint64_t rng;
} engine;

typedef struct request {
    uint32_t tok[MAXTOK];
    size_t n;
    uint32_t table[NBLK];         /* its block table */
    size_t n_blocks;
    /* what happened, for the test's checks */
    size_t fetched;               /* tokens the shared tier added */
    size_t looked_up;             /* what the batched lookup said */
    size_t restored;              /* L of the match it restored */
    size_t stored;                /* tokens the bank holds after the put */
} request;

static void engine_init(engine *e, uint64_t seed)
{
    e->rng = seed;
    for (uint32_t t = 0; t < NT; t++) {
        e->pool[t] = malloc((size_t)NBLK * BT * ROW);
        assert_non_null(e->pool[t]);
        memset(e->pool[t], 0xA5, (size_t)NBLK * BT * ROW);
    }
    e->n_free = NBLK;
    for (uint32_t b = 0; b < NBLK; b++)
        e->free_list[b] = b;
    for (uint32_t b = NBLK; b > 1; b--) { /* shuffled: tables out of order */
        uint32_t j = (uint32_t)(tu_rand(&e->rng) % b), x = e->free_list[b - 1];
        e->free_list[b - 1] = e->free_list[j];
        e->free_list[j] = x;
    }
}

static void engine_free(engine *e)
{
    for (uint32_t t = 0; t < NT; t++)
        free(e->pool[t]);
}

static void blocks_take(engine *e, request *r)
{
    r->n_blocks = (r->n + BT - 1) / BT;
    assert_true(r->n_blocks <= e->n_free);
    for (size_t i = 0; i < r->n_blocks; i++)
        r->table[i] = e->free_list[--e->n_free];
}

static void blocks_give_back(engine *e, request *r)
{
    for (size_t i = 0; i < r->n_blocks; i++) {
        for (uint32_t t = 0; t < NT; t++) /* garbage for the next user */
            memset(e->pool[t] + (size_t)r->table[i] * BT * ROW, 0x5A, (size_t)BT * ROW);
        e->free_list[e->n_free++] = r->table[i];
    }
    r->n_blocks = 0;
}

static uint8_t *row_of(engine *e, const request *r, uint32_t t, size_t p)
{
    return e->pool[t] + ((size_t)r->table[p / BT] * BT + p % BT) * ROW;
}

/* The engine's tables for tensors of request r (sb_block_table). */
static void tables_of(engine *e, const request *r, sb_block_table bt[NT])
{
    for (uint32_t t = 0; t < NT; t++)
        bt[t] = (sb_block_table){ .base = e->pool[t], .block_ids = r->table,
                                  .block_tokens = BT, .block_stride = (size_t)BT * ROW,
                                  .token_stride = ROW };
}

/* The compute: row p of tensor t, a function of tokens [0, p]. */
static void expected_row(const uint32_t *tok, size_t p, uint32_t t, uint8_t *out)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i <= p; i++)
        h = (h ^ tok[i]) * 1099511628211ull;
    for (uint32_t i = 0; i < ROW; i++) {
        h ^= h >> 29;
        h *= 0xBF58476D1CE4E5B9ull;
        out[i] = (uint8_t)(h >> 32) ^ (uint8_t)(t * 37);
    }
}

static void compute_layer(engine *e, request *r, uint32_t l, size_t from)
{
    for (uint32_t t = 2 * l; t < 2 * l + 2; t++)
        for (size_t p = from; p < r->n; p++)
            expected_row(r->tok, p, t, row_of(e, r, t, p));
}

static void check_rows(engine *e, request *r)
{
    uint8_t want[ROW];
    for (uint32_t t = 0; t < NT; t++)
        for (size_t p = 0; p < r->n; p++) {
            expected_row(r->tok, p, t, want);
            if (memcmp(want, row_of(e, r, t, p), ROW) != 0)
                fail_msg("tensor %u position %zu holds the wrong state (restored %zu)", t, p,
                         r->restored);
        }
}

/* One request, from its match to its put (step 2 above). */
static void run_request(engine *e, sb_ns *ns, request *r)
{
    blocks_take(e, r);
    sb_block_table bt[NT];
    tables_of(e, r, bt);

    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, r->tok, r->n, &m), SB_OK);
    sb_match_info info;
    assert_int_equal(sb_match_get_info(m, &info), SB_OK);
    size_t L = info.n_tokens;
    /* Recompute at least the last token, as an engine does to get logits. */
    if (L == r->n)
        L--;
    size_t keep_pages = (L + PT - 1) / PT;
    sb_load *ld = NULL;
    assert_int_equal(sb_match_load_start(m, keep_pages, 0, &ld), SB_OK);

    /* The bank already holds [0, L); the engine saves [L, n). */
    sb_put *put = NULL;
    assert_int_equal(sb_ns_put_begin(ns, r->tok, r->n, L, &put), SB_OK);
    for (uint32_t l = 0; l < LAYERS; l++) {
        if (L) {
            if (l == 0) /* layer 0 needs every page: the load's end */
                assert_int_equal(sb_load_wait(ld, SIZE_MAX, -1, NULL), SB_OK);
            assert_int_equal(sb_match_restore_blocks(m, 0, L, 2 * l, 2, bt + 2 * l), SB_OK);
        }
        compute_layer(e, r, l, L);
        assert_int_equal(sb_put_tensors(put, 2 * l, 2, bt + 2 * l), SB_OK);
    }
    sb_write_outcome oc;
    assert_int_equal(sb_put_finish(put, NULL, &r->stored, &oc), SB_OK);
    assert_int_equal(r->stored, r->n);
    sb_load_free(ld);
    sb_match_release(m);
    r->restored = L;
    check_rows(e, r);
    blocks_give_back(e, r);
}

/* A scheduling step over a batch (steps 1-3 above). */
static void step(engine *e, sb_ns *ns, request *rs, int n)
{
    /* With a shared tier, what other machines published past this
     * machine's own pages is indexed first. */
    for (int i = 0; i < n; i++) {
        rs[i].fetched = 0;
        int rc = sb_ns_fetch_shared(ns, rs[i].tok, rs[i].n, &rs[i].fetched);
        assert_true(rc == SB_OK || rc == SB_ERR_UNSUPPORTED);
    }
    sb_lookup lk[NREQ];
    for (int i = 0; i < n; i++)
        lk[i] = (sb_lookup){ .tokens = rs[i].tok, .n_tokens = rs[i].n };
    assert_int_equal(sb_ns_lookup(ns, lk, (size_t)n), SB_OK);
    for (int i = 0; i < n; i++) {
        rs[i].looked_up = lk[i].info.n_tokens;
        run_request(e, ns, &rs[i]);
    }
}

static void conversation(request *r, int i, size_t n, uint64_t seed)
{
    uint64_t rng = 99; /* the system prompt, the same for every one */
    tu_tokens(&rng, r->tok, SYS, 30000);
    rng = seed * 7919 + (uint64_t)i;
    tu_tokens(&rng, r->tok + SYS, MAXTOK - SYS, 30000);
    r->n = n;
}

static const tu_layout LAY = { .page_tokens = PT, .n_tensors = NT,
                               .bpt = { ROW, ROW, ROW, ROW, ROW, ROW, ROW, ROW },
                               .model = "engine" };

static sb_config config(const char *dir, const char *seeds)
{
    sb_config c;
    sb_config_default(&c);
    c.ram_bytes = 64 << 20;
    c.min_prefix_tokens = 1;
    c.dir = dir;
    c.segment_bytes = 1 << 20;
    c.disk_bytes = 256 << 20;
    c.disk_free_floor_bytes = 0;
    c.shared_seeds = seeds;
    c.shared_timeout_ms = 5000;
    return c;
}

static char tmp[256];

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

/* Cold, warm, and after a restart, on one store (RAM, then disk). */
static void test_engine_ram_and_restart(void **state)
{
    (void)state;
    char dir[300];
    snprintf(dir, sizeof dir, "%s/store", tmp);
    sb_config c = config(dir, NULL);
    sb_store *st = NULL;
    assert_int_equal(sb_store_open(&c, &st), SB_OK);
    sb_ns *ns = tu_ns(st, &LAY, NULL);
    assert_int_equal(sb_ns_prefault(ns, 64, NULL), SB_OK);
    engine e;
    engine_init(&e, 5);
    request rs[NREQ];

    /* Cold: the first computes everything; the others find its prompt. */
    for (int i = 0; i < NREQ; i++)
        conversation(&rs[i], i, 600 + 100 * (size_t)i, 1);
    step(&e, ns, rs, 1);
    assert_int_equal(rs[0].looked_up, 0);
    assert_int_equal(rs[0].restored, 0);
    step(&e, ns, rs + 1, NREQ - 1);
    for (int i = 1; i < NREQ; i++) {
        assert_int_equal(rs[i].looked_up, SYS); /* the prompt, to its last token */
        assert_int_equal(rs[i].restored, rs[i].looked_up);
    }
    /* Warm: each conversation a turn longer finds all it had. */
    for (int i = 0; i < NREQ; i++) {
        size_t had = rs[i].n;
        conversation(&rs[i], i, had + 150, 1);
        step(&e, ns, rs + i, 1);
        assert_int_equal(rs[i].looked_up, had);
        assert_int_equal(rs[i].restored, had);
    }
    assert_int_equal(sb_store_flush(st), SB_OK);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);

    /* After a restart: everything on disk, read by the loads. */
    assert_int_equal(sb_store_open(&c, &st), SB_OK);
    ns = tu_ns(st, &LAY, NULL);
    sb_lookup lk = { .tokens = rs[2].tok, .n_tokens = rs[2].n };
    assert_int_equal(sb_ns_lookup(ns, &lk, 1), SB_OK);
    assert_int_equal(lk.info.n_pages_disk, lk.info.n_pages);
    for (int i = 0; i < NREQ; i++) {
        size_t had = rs[i].n;
        conversation(&rs[i], i, had + 40, 1);
        step(&e, ns, rs + i, 1);
        assert_int_equal(rs[i].restored, had);
    }
    sb_stats s = tu_stats(st);
    assert_true(s.disk_read_bytes > 0);

    /* A user forgets conversation 0: its tokens from the first one after
     * the shared prompt. The others keep everything, the prompt stays. */
    size_t removed = 0;
    assert_int_equal(sb_ns_remove(ns, rs[0].tok, SYS + 1, &removed), SB_OK);
    assert_true(removed > 0);
    for (int pass = 0; pass < 2; pass++) { /* now, and after a restart */
        sb_lookup q[NREQ];
        for (int i = 0; i < NREQ; i++)
            q[i] = (sb_lookup){ .tokens = rs[i].tok, .n_tokens = rs[i].n };
        assert_int_equal(sb_ns_lookup(ns, q, NREQ), SB_OK);
        assert_true(q[0].info.n_tokens <= SYS);
        assert_true(q[0].info.n_tokens >= SYS / PT * PT); /* the prompt's full pages */
        for (int i = 1; i < NREQ; i++)
            assert_int_equal(q[i].info.n_tokens, rs[i].n);
        if (pass == 0) {
            sb_ns_close(ns);
            assert_int_equal(sb_store_close(st), SB_OK);
            assert_int_equal(sb_store_open(&c, &st), SB_OK);
            ns = tu_ns(st, &LAY, NULL);
        }
    }
    tu_check(st);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);
    engine_free(&e);
}

/* A second machine: its own store finds the pages in the shared tier. */
static void test_engine_shared(void **state)
{
    (void)state;
    tu_cluster cl;
    bool have = false;
    assert_int_equal(tu_cluster_suite_start(&cl, "test_engine (its shared tier part)", &have), 0);
    if (!have)
        skip();
    char da[300], db[300];
    snprintf(da, sizeof da, "%s/a", tmp);
    snprintf(db, sizeof db, "%s/b", tmp);
    sb_config ca = config(da, cl.seeds), cb = config(db, cl.seeds);
    sb_store *a = NULL, *b = NULL;
    assert_int_equal(sb_store_open(&ca, &a), SB_OK);
    sb_ns *na = tu_ns(a, &LAY, NULL);
    engine e;
    engine_init(&e, 6);
    request r;
    conversation(&r, 0, 900, 2);
    step(&e, na, &r, 1);
    assert_int_equal(r.restored, 0);
    assert_int_equal(sb_store_flush(a), SB_OK); /* published */

    assert_int_equal(sb_store_open(&cb, &b), SB_OK);
    sb_ns *nb = tu_ns(b, &LAY, NULL);
    conversation(&r, 0, 1000, 2); /* the next turn, on the other machine */
    step(&e, nb, &r, 1);
    assert_int_equal(r.fetched, 900 / PT * PT);
    assert_int_equal(r.looked_up, 900 / PT * PT);
    assert_int_equal(r.restored, 900 / PT * PT);
    tu_check(b);
    sb_ns_close(nb);
    assert_int_equal(sb_store_close(b), SB_OK);
    sb_ns_close(na);
    assert_int_equal(sb_store_close(a), SB_OK);
    engine_free(&e);
    tu_cluster_stop(&cl);
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmp, sizeof tmp, "/tmp/sb-test-engine-XXXXXX");
    return mkdtemp(tmp) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_engine_ram_and_restart),
        cmocka_unit_test(test_engine_shared),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
