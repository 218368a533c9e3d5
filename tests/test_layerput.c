/* Description: the layered put (sb_ns_put_begin, sb_put_tensors,
 * sb_put_finish, sb_put_abort): an engine's tensors given a layer at a
 * time, out of order, from its own paged pool (12-token blocks under the
 * bank's 16-token pages, V rows padded, a shuffled block table). Checked:
 * the bank then holds the very bytes sb_ns_put_blocks stores from the same
 * pool (sb_match_restore_blocks and sb_match_restore compared between two
 * namespaces, and against the synthetic state), with the same n_stored and
 * outcome; a growth put from inside a page and from a page boundary; the
 * prefix pages and the page before `from` stay pinned through pressure
 * while the put is in flight; a tensor given twice (the last wins); a
 * missing tensor refused with SB_ERR_INCOMPLETE; abort and every failed
 * finish give back every page (stats before and after); budget exhaustion
 * storing the same prefix as sb_ns_put_blocks; another put of the same
 * tokens landing between begin and finish (it wins; finish adds only the
 * rest); a disk-tier store surviving a reopen, growing from a page on disk
 * only; the argument refusals (and a namespace handle closed while a put
 * is in flight); and puts in flight from several threads on one
 * namespace. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "tu_pool.h"

#define PT 16u
#define BT 12u        /* the engine's block size, in tokens */
#define NBLK 64u      /* blocks in each pool */
#define KROW 64u      /* bytes per token of each tensor */
#define VSTRIDE 96u   /* V rows are padded in the engine's pool */
#define NT 4u         /* K0 V0 K1 V1 */
#define PB 32u        /* point bytes */

static const tu_layout LAYOUT = { .page_tokens = PT, .n_tensors = NT,
                                  .bpt = { KROW, KROW, KROW, KROW }, .point_bytes = PB,
                                  .model = "layerput" };

typedef tu_pool engine;

/* A pool filled with byte fill, and a block table shuffled by seed. */
static void engine_init(engine *e, uint64_t seed, uint8_t fill)
{
    tu_pool_init(e, &LAYOUT, BT, NBLK, VSTRIDE, seed, fill);
}

/* A layered put of tokens[0, n) from e, positions from `from`, the layers
 * (K and V of one layer per call) last layer first; returns finish's code. */
static int layered(sb_ns *ns, const uint32_t *tok, size_t n, size_t from, engine *e,
                   const void *point, size_t *stored, sb_write_outcome *oc)
{
    sb_put *p = NULL;
    int rc = sb_ns_put_begin(ns, tok, n, from, &p);
    if (rc != SB_OK)
        return rc;
    for (uint32_t l = NT / 2; l-- > 0;)
        assert_int_equal(sb_put_tensors(p, 2 * l, 2, &e->bt[2 * l]), SB_OK);
    return sb_put_finish(p, point, stored, oc);
}

static sb_match *match_all(sb_ns *ns, const uint32_t *tok, size_t n, size_t want)
{
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, tok, n, &m), SB_OK);
    sb_match_info mi;
    assert_int_equal(sb_match_get_info(m, &mi), SB_OK);
    assert_int_equal(mi.n_tokens, want);
    return m;
}

/* The two namespaces hold the same bytes for tokens[0, n): restored into
 * two pools through their tables, and into contiguous buffers (with the
 * point state when point). */
static void same_bytes(sb_ns *a, sb_ns *b, const uint32_t *tok, size_t n, bool point)
{
    sb_match *ma = match_all(a, tok, n, n), *mb = match_all(b, tok, n, n);
    engine ea, eb;
    engine_init(&ea, 71, 0x11);
    engine_init(&eb, 71, 0x11);
    assert_int_equal(sb_match_restore_blocks(ma, 0, n, 0, NT, ea.bt), SB_OK);
    assert_int_equal(sb_match_restore_blocks(mb, 0, n, 0, NT, eb.bt), SB_OK);
    for (uint32_t t = 0; t < NT; t++)
        assert_memory_equal(ea.pool[t], eb.pool[t], (size_t)NBLK * BT * ea.stride[t]);
    void **ba = tu_bufs(&LAYOUT, n), **bb = tu_bufs(&LAYOUT, n);
    uint8_t pa[PB] = { 0 }, pb[PB] = { 1 };
    assert_int_equal(sb_match_restore(ma, n, ba, point ? pa : NULL), SB_OK);
    assert_int_equal(sb_match_restore(mb, n, bb, point ? pb : NULL), SB_OK);
    for (uint32_t t = 0; t < NT; t++)
        assert_memory_equal(ba[t], bb[t], n * KROW);
    assert_true(tu_state_equal(&LAYOUT, tok, n, ba));
    if (point)
        assert_memory_equal(pa, pb, PB);
    tu_free_state(&LAYOUT, ba);
    tu_free_state(&LAYOUT, bb);
    tu_pool_free(&ea);
    tu_pool_free(&eb);
    sb_match_release(ma);
    sb_match_release(mb);
}

/* A layered put with its tensors one at a time in a shuffled order (one
 * given twice, first from garbage: the last wins) stores what
 * sb_ns_put_blocks stores, with the same results; then both grow from
 * inside a page and from a page boundary. */
static void test_layerput_equals_put_blocks(void **state)
{
    (void)state;
    sb_store *st = tu_store(64u << 20);
    sb_ns *a = tu_ns(st, &LAYOUT, "blocks"), *b = tu_ns(st, &LAYOUT, "layers");
    uint64_t rng = 5;
    uint32_t tok[300];
    tu_tokens(&rng, tok, 300, 900);
    engine e, junk;
    engine_init(&e, 1, 0xEE);
    engine_init(&junk, 2, 0x77);
    tu_pool_compute(&e, tok, 0, 130);
    void *pt = tu_point(&LAYOUT, tok, 130);

    size_t sa = 0, sb = 0;
    sb_write_outcome oa, ob;
    assert_int_equal(sb_ns_put_blocks(a, tok, 130, 0, e.bt, pt, &sa, &oa), SB_OK);
    sb_put *p = NULL;
    assert_int_equal(sb_ns_put_begin(b, tok, 130, 0, &p), SB_OK);
    assert_int_equal(tu_match_len(b, tok, 130), 0); /* nothing visible yet */
    static const uint32_t order[] = { 2, 0, 3, 1 };
    assert_int_equal(sb_put_tensors(p, 1, 1, &junk.bt[1]), SB_OK);
    for (int i = 0; i < 4; i++)
        assert_int_equal(sb_put_tensors(p, order[i], 1, &e.bt[order[i]]), SB_OK);
    assert_int_equal(sb_put_finish(p, pt, &sb, &ob), SB_OK);
    assert_int_equal(sa, 130);
    assert_int_equal(sb, 130);
    assert_memory_equal(&oa, &ob, sizeof oa);
    assert_int_equal(ob.pages_new, 9);
    assert_int_equal(ob.points_new, 1);
    same_bytes(a, b, tok, 130, true);
    free(pt);

    /* Grow from 130 (inside page 8), then from 160 (a page boundary); the
     * engine's rows before are garbage by then. */
    static const size_t ends[] = { 160, 300 };
    size_t from = 130;
    for (int i = 0; i < 2; i++) {
        tu_pool_scribble(&e, from);
        tu_pool_compute(&e, tok, from, ends[i]);
        assert_int_equal(sb_ns_put_blocks(a, tok, ends[i], from, e.bt, NULL, &sa, &oa), SB_OK);
        assert_int_equal(layered(b, tok, ends[i], from, &e, NULL, &sb, &ob), SB_OK);
        assert_int_equal(sb, ends[i]);
        assert_memory_equal(&oa, &ob, sizeof oa);
        same_bytes(a, b, tok, ends[i], false);
        from = ends[i];
    }
    assert_int_equal(tu_restore_exact(b, &LAYOUT, tok, 300, NULL), 300);
    tu_pool_free(&junk);
    tu_pool_free(&e);
    tu_check(st);
    sb_ns_close(a);
    sb_ns_close(b);
    sb_store_close(st);
}

/* A growth put holds the pages before `from` while it is in flight: other
 * puts that fill the budget evict other sequences, never them (nor the
 * partial page holding the positions before from). */
static void test_layerput_prefix_held(void **state)
{
    (void)state;
    sb_store *st = tu_store_pages(24);
    sb_ns *ns = tu_ns(st, &LAYOUT, NULL);
    uint64_t rng = 7;
    uint32_t tok[170], other[6][100];
    tu_tokens(&rng, tok, 170, 900);
    engine e;
    engine_init(&e, 3, 0);
    tu_pool_compute(&e, tok, 0, 50); /* 3 pages and 2 tokens */
    assert_int_equal(sb_ns_put_blocks(ns, tok, 50, 0, e.bt, NULL, NULL, NULL), SB_OK);
    tu_pool_scribble(&e, 50);
    tu_pool_compute(&e, tok, 50, 170);

    sb_put *p = NULL;
    assert_int_equal(sb_ns_put_begin(ns, tok, 170, 50, &p), SB_OK);
    assert_int_equal(sb_put_tensors(p, 0, 2, e.bt), SB_OK);
    uint64_t evicted = tu_stats(st).evictions;
    for (int i = 0; i < 6; i++) { /* 42 pages through a budget of 24 */
        tu_tokens(&rng, other[i], 100, 900);
        other[i][0] = 1000 + (uint32_t)i;
        tu_put(ns, &LAYOUT, other[i], 100, false, SB_OK);
    }
    assert_true(tu_stats(st).evictions > evicted);
    assert_int_equal(tu_match_len(ns, tok, 170), 50);
    assert_int_equal(sb_put_tensors(p, 2, 2, e.bt + 2), SB_OK);
    size_t stored = 0;
    assert_int_equal(sb_put_finish(p, NULL, &stored, NULL), SB_OK);
    assert_int_equal(stored, 170);
    assert_int_equal(tu_restore_exact(ns, &LAYOUT, tok, 170, NULL), 170);
    tu_pool_free(&e);
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
}

/* A missing tensor is refused and the put's pages go; so do abort's and
 * those of a finish refused for its point. */
static void test_layerput_refusals_free(void **state)
{
    (void)state;
    sb_store *st = tu_store(64u << 20);
    sb_ns *ns = tu_ns(st, &LAYOUT, NULL);
    static const tu_layout NOPOINT = { .page_tokens = PT, .n_tensors = NT,
                                       .bpt = { KROW, KROW, KROW, KROW },
                                       .model = "layerput-nopoint" };
    sb_ns *np = tu_ns(st, &NOPOINT, NULL);
    uint64_t rng = 8;
    uint32_t tok[100];
    tu_tokens(&rng, tok, 100, 900);
    engine e;
    engine_init(&e, 4, 0);
    tu_pool_compute(&e, tok, 0, 100);
    assert_int_equal(sb_ns_put_blocks(ns, tok, 40, 0, e.bt, NULL, NULL, NULL), SB_OK);
    assert_int_equal(sb_ns_put_blocks(np, tok, 40, 0, e.bt, NULL, NULL, NULL), SB_OK);
    sb_stats before = tu_stats(st);

    /* A tensor never given. */
    sb_put *p = NULL;
    assert_int_equal(sb_ns_put_begin(ns, tok, 100, 40, &p), SB_OK);
    assert_int_equal(tu_stats(st).ram_pages, before.ram_pages + 5); /* regions 2-6 */
    assert_int_equal(sb_put_tensors(p, 0, 2, e.bt), SB_OK);
    assert_int_equal(sb_put_tensors(p, 3, 1, e.bt + 3), SB_OK);
    size_t stored = 9;
    sb_write_outcome oc;
    memset(&oc, 0xFF, sizeof oc);
    assert_int_equal(sb_put_finish(p, NULL, &stored, &oc), SB_ERR_INCOMPLETE);
    assert_int_equal(stored, 0);
    assert_int_equal(oc.pages_new, 0);
    assert_int_equal(oc.ticket, 0);
    assert_string_not_equal(sb_strerror(SB_ERR_INCOMPLETE), "unknown error");

    /* Abort, with every tensor given. */
    assert_int_equal(sb_ns_put_begin(ns, tok, 100, 40, &p), SB_OK);
    assert_int_equal(sb_put_tensors(p, 0, NT, e.bt), SB_OK);
    sb_put_abort(p);
    sb_put_abort(NULL);

    /* A point for a layout without points. */
    uint8_t point[PB] = { 0 };
    assert_int_equal(sb_ns_put_begin(np, tok, 100, 40, &p), SB_OK);
    assert_int_equal(sb_put_tensors(p, 0, NT, e.bt), SB_OK);
    assert_int_equal(sb_put_finish(p, point, &stored, NULL), SB_ERR_INVAL);

    sb_stats after = tu_stats(st);
    assert_int_equal(after.ram_pages, before.ram_pages);
    assert_int_equal(after.ram_bytes, before.ram_bytes);
    assert_int_equal(after.indexed_pages, before.indexed_pages);
    assert_int_equal(after.pinned_pages, 0);
    assert_int_equal(after.puts, before.puts);
    assert_int_equal(tu_match_len(ns, tok, 100), 40);
    assert_int_equal(tu_match_len(np, tok, 100), 40);
    tu_check(st);

    /* The put still works after all that. */
    assert_int_equal(layered(ns, tok, 100, 40, &e, NULL, &stored, NULL), SB_OK);
    assert_int_equal(tu_restore_exact(ns, &LAYOUT, tok, 100, NULL), 100);
    tu_pool_free(&e);
    sb_ns_close(np);
    sb_ns_close(ns);
    sb_store_close(st);
}

/* Bad arguments: a clear code, nothing held. */
static void test_layerput_args(void **state)
{
    (void)state;
    sb_store *st = tu_store(64u << 20);
    sb_ns *ns = tu_ns(st, &LAYOUT, NULL);
    uint64_t rng = 9;
    uint32_t tok[100], other[100];
    tu_tokens(&rng, tok, 100, 900);
    memcpy(other, tok, sizeof other);
    other[60] ^= 1;
    engine e;
    engine_init(&e, 5, 0);
    tu_pool_compute(&e, tok, 0, 100);
    assert_int_equal(sb_ns_put_blocks(ns, tok, 100, 0, e.bt, NULL, NULL, NULL), SB_OK);
    sb_stats before = tu_stats(st);

    sb_put *p = (sb_put *)&p;
    assert_int_equal(sb_ns_put_begin(NULL, tok, 10, 0, &p), SB_ERR_INVAL);
    assert_null(p);
    assert_int_equal(sb_ns_put_begin(ns, NULL, 10, 0, &p), SB_ERR_INVAL);
    assert_int_equal(sb_ns_put_begin(ns, tok, 10, 0, NULL), SB_ERR_INVAL);
    assert_int_equal(sb_ns_put_begin(ns, tok, 0, 0, &p), SB_ERR_NO_TOKENS);
    assert_int_equal(sb_ns_put_begin(ns, tok, 10, 11, &p), SB_ERR_RANGE);
    assert_int_equal(sb_ns_put_begin(ns, other, 100, 80, &p), SB_ERR_RANGE); /* holds 60 */
    assert_null(p);
    assert_int_equal(sb_ns_put_begin(ns, other, 100, 60, &p), SB_OK);

    sb_block_table bad[NT];
    memcpy(bad, e.bt, sizeof bad);
    assert_int_equal(sb_put_tensors(NULL, 0, 1, e.bt), SB_ERR_INVAL);
    assert_int_equal(sb_put_tensors(p, 0, 1, NULL), SB_ERR_INVAL);
    assert_int_equal(sb_put_tensors(p, 0, 0, e.bt), SB_ERR_INVAL);
    assert_int_equal(sb_put_tensors(p, 3, 2, e.bt), SB_ERR_INVAL);
    assert_int_equal(sb_put_tensors(p, NT, 1, e.bt), SB_ERR_INVAL);
    assert_int_equal(sb_put_tensors(p, UINT32_MAX, 2, e.bt), SB_ERR_INVAL);
    bad[1].base = NULL;
    assert_int_equal(sb_put_tensors(p, 0, 2, bad), SB_ERR_INVAL);
    bad[1] = e.bt[1];
    bad[1].token_stride = KROW - 1;
    assert_int_equal(sb_put_tensors(p, 0, 2, bad), SB_ERR_INVAL);
    bad[1] = e.bt[1];
    bad[1].first_pos = 61;
    assert_int_equal(sb_put_tensors(p, 0, 2, bad), SB_ERR_RANGE);
    /* The refusals copied nothing and left the put as it was. */
    assert_int_equal(sb_put_finish(p, NULL, NULL, NULL), SB_ERR_INCOMPLETE);
    size_t stored = 7;
    sb_write_outcome oc;
    memset(&oc, 0xFF, sizeof oc);
    assert_int_equal(sb_put_finish(NULL, NULL, &stored, &oc), SB_ERR_INVAL);
    assert_int_equal(stored, 0);
    assert_int_equal(oc.pages_new, 0);

    sb_stats after = tu_stats(st);
    assert_int_equal(after.ram_pages, before.ram_pages);
    assert_int_equal(after.ram_bytes, before.ram_bytes);
    assert_int_equal(tu_match_len(ns, other, 100), 60);

    /* The put keeps its namespace: the handle may close first. */
    tu_pool_compute(&e, other, 0, 100);
    assert_int_equal(sb_ns_put_begin(ns, other, 100, 60, &p), SB_OK);
    sb_ns_close(ns);
    assert_int_equal(sb_put_tensors(p, 0, NT, e.bt), SB_OK);
    assert_int_equal(sb_put_finish(p, NULL, &stored, NULL), SB_OK);
    assert_int_equal(stored, 100);
    ns = tu_ns(st, &LAYOUT, NULL);
    assert_int_equal(tu_restore_exact(ns, &LAYOUT, other, 100, NULL), 100);
    tu_pool_free(&e);
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
}

/* When the budgets cannot hold every page, begin takes those of the
 * longest prefix that fit and finish stores that prefix with
 * SB_ERR_BUDGET, as sb_ns_put_blocks does in the same store. */
static void test_layerput_budget(void **state)
{
    (void)state;
    uint64_t rng = 10;
    uint32_t tok[200];
    tu_tokens(&rng, tok, 200, 900);
    engine e;
    engine_init(&e, 6, 0);
    tu_pool_compute(&e, tok, 0, 200);
    size_t got[2];
    int rcs[2];
    for (int i = 0; i < 2; i++) {
        sb_store *st = tu_store_pages(8);
        sb_ns *ns = tu_ns(st, &LAYOUT, NULL);
        sb_write_outcome oc;
        rcs[i] = i ? layered(ns, tok, 200, 0, &e, NULL, &got[i], &oc)
                   : sb_ns_put_blocks(ns, tok, 200, 0, e.bt, NULL, &got[i], &oc);
        assert_int_equal(oc.pages_new, 8);
        assert_int_equal(tu_restore_exact(ns, &LAYOUT, tok, 200, NULL), 128);
        sb_stats s = tu_stats(st);
        assert_int_equal(s.ram_pages, 8);
        assert_int_equal(s.indexed_pages, 8);
        tu_check(st);
        sb_ns_close(ns);
        sb_store_close(st);
    }
    assert_int_equal(rcs[0], SB_ERR_BUDGET);
    assert_int_equal(rcs[1], SB_ERR_BUDGET);
    assert_int_equal(got[0], 128);
    assert_int_equal(got[1], 128);
    tu_pool_free(&e);
}

/* Another put of the same tokens lands between begin and finish: it wins;
 * finish keeps its pages and adds only what it lacks. */
static void test_layerput_index_moves(void **state)
{
    (void)state;
    sb_store *st = tu_store(64u << 20);
    sb_ns *ns = tu_ns(st, &LAYOUT, NULL);
    uint64_t rng = 11;
    uint32_t tok[120];
    tu_tokens(&rng, tok, 120, 900);
    engine e;
    engine_init(&e, 7, 0);
    tu_pool_compute(&e, tok, 0, 120);

    /* All of it. */
    sb_put *p = NULL;
    assert_int_equal(sb_ns_put_begin(ns, tok, 120, 0, &p), SB_OK);
    assert_int_equal(sb_put_tensors(p, 0, NT, e.bt), SB_OK);
    assert_int_equal(sb_ns_put_blocks(ns, tok, 120, 0, e.bt, NULL, NULL, NULL), SB_OK);
    size_t stored = 0;
    sb_write_outcome oc;
    assert_int_equal(sb_put_finish(p, NULL, &stored, &oc), SB_OK);
    assert_int_equal(stored, 120);
    assert_int_equal(oc.pages_new, 0);
    assert_int_equal(tu_restore_exact(ns, &LAYOUT, tok, 120, NULL), 120);

    /* A prefix of it: two pages and 8 tokens of the third. */
    uint32_t t2[120];
    memcpy(t2, tok, sizeof t2);
    t2[0] ^= 0x8000;
    tu_pool_compute(&e, t2, 0, 120);
    assert_int_equal(sb_ns_put_begin(ns, t2, 120, 0, &p), SB_OK);
    assert_int_equal(sb_put_tensors(p, 0, NT, e.bt), SB_OK);
    assert_int_equal(sb_ns_put_blocks(ns, t2, 40, 0, e.bt, NULL, NULL, NULL), SB_OK);
    assert_int_equal(sb_put_finish(p, NULL, &stored, &oc), SB_OK);
    assert_int_equal(stored, 120);
    assert_int_equal(oc.pages_new, 6); /* regions 2-7: region 2 supersedes 40's */
    assert_int_equal(tu_restore_exact(ns, &LAYOUT, t2, 120, NULL), 120);
    tu_pool_free(&e);
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
}

/* With a disk tier: a layered put is written and survives a reopen; then a
 * growth from inside a page that is on disk only reads it. */
static void test_layerput_disk(void **state)
{
    (void)state;
    char dir[128];
    tu_scratch_dir(dir, sizeof dir, "layerput");
    sb_config cfg = tu_small_disk_config();
    cfg.dir = dir;
    sb_store *st = NULL;
    assert_int_equal(sb_store_open(&cfg, &st), SB_OK);
    sb_ns *ns = tu_ns(st, &LAYOUT, NULL);
    uint64_t rng = 21;
    uint32_t tok[200];
    tu_tokens(&rng, tok, 200, 900);
    engine e;
    engine_init(&e, 31, 0);
    tu_pool_compute(&e, tok, 0, 100);
    void *pt = tu_point(&LAYOUT, tok, 100);
    size_t stored = 0;
    sb_write_outcome oc;
    assert_int_equal(layered(ns, tok, 100, 0, &e, pt, &stored, &oc), SB_OK);
    assert_int_equal(stored, 100);
    assert_true(oc.ticket != 0);
    assert_int_equal(oc.pages_new, 7);
    assert_int_equal(sb_store_wait_durable(st, oc.ticket, SB_WAIT_FOREVER), SB_OK);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);

    assert_int_equal(sb_store_open(&cfg, &st), SB_OK);
    ns = tu_ns(st, &LAYOUT, NULL);
    sb_match *m = match_all(ns, tok, 100, 100);
    sb_match_info mi;
    assert_int_equal(sb_match_get_info(m, &mi), SB_OK);
    assert_int_equal(mi.n_pages_disk, 7);
    assert_int_equal(mi.has_point, 1);
    void **bufs = tu_bufs(&LAYOUT, 100);
    uint8_t point[PB];
    assert_int_equal(sb_match_restore(m, 100, bufs, point), SB_OK);
    assert_true(tu_state_equal(&LAYOUT, tok, 100, bufs));
    assert_memory_equal(point, pt, PB);
    tu_free_state(&LAYOUT, bufs);
    sb_match_release(m);
    free(pt);

    /* Grow from 100 (inside page 6, on disk only). */
    tu_pool_scribble(&e, 100);
    tu_pool_compute(&e, tok, 100, 200);
    assert_int_equal(layered(ns, tok, 200, 100, &e, NULL, &stored, NULL), SB_OK);
    assert_int_equal(stored, 200);
    assert_int_equal(tu_restore_exact(ns, &LAYOUT, tok, 200, NULL), 200);
    assert_int_equal(tu_stats(st).disk_checksum_failures, 0);
    tu_pool_free(&e);
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
    tu_remove_dir(dir);
}

/* ---- threads ---- */

#define THREADS 4
#define ROUNDS 12

typedef struct worker {
    sb_ns *ns;
    int id;
    uint32_t tok[ROUNDS][90];
    bool kept[ROUNDS];
} worker;

static atomic_int failures; /* (cmocka's asserts are for the main thread) */

static void fail_unless(bool ok)
{
    if (!ok)
        atomic_fetch_add(&failures, 1);
}

/* Each thread puts its own sequences (all sharing a first page, so the
 * puts meet in the tree) a layer at a time, aborting every third. */
static void *work(void *arg)
{
    worker *w = arg;
    engine e;
    engine_init(&e, 100 + (uint64_t)w->id, 0);
    uint64_t rng = 200 + (uint64_t)w->id;
    for (int i = 0; i < ROUNDS; i++) {
        uint32_t *tok = w->tok[i];
        for (size_t k = 0; k < PT; k++)
            tok[k] = (uint32_t)k;
        tu_tokens(&rng, tok + PT, 90 - PT, 900);
        tu_pool_compute(&e, tok, 0, 90);
        sb_put *p = NULL;
        if (sb_ns_put_begin(w->ns, tok, 90, 0, &p) != SB_OK) {
            fail_unless(false);
            continue;
        }
        for (uint32_t t = 0; t < NT; t++)
            fail_unless(sb_put_tensors(p, t, 1, &e.bt[t]) == SB_OK);
        w->kept[i] = i % 3 != 2;
        if (!w->kept[i]) {
            sb_put_abort(p);
            continue;
        }
        size_t stored = 0;
        fail_unless(sb_put_finish(p, NULL, &stored, NULL) == SB_OK && stored == 90);
    }
    tu_pool_free(&e);
    return NULL;
}

static void test_layerput_threads(void **state)
{
    (void)state;
    sb_store *st = tu_store(64u << 20);
    sb_ns *ns = tu_ns(st, &LAYOUT, NULL);
    static worker w[THREADS];
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i].ns = ns;
        w[i].id = i;
        assert_int_equal(pthread_create(&th[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    assert_int_equal(atomic_load(&failures), 0);
    for (int i = 0; i < THREADS; i++)
        for (int r = 0; r < ROUNDS; r++)
            if (w[i].kept[r])
                assert_int_equal(tu_restore_exact(ns, &LAYOUT, w[i].tok[r], 90, NULL), 90);
            else
                assert_true(tu_match_len(ns, w[i].tok[r], 90) < 90);
    assert_int_equal(tu_stats(st).pinned_pages, 0);
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layerput_equals_put_blocks),
        cmocka_unit_test(test_layerput_prefix_held),
        cmocka_unit_test(test_layerput_refusals_free),
        cmocka_unit_test(test_layerput_args),
        cmocka_unit_test(test_layerput_budget),
        cmocka_unit_test(test_layerput_index_moves),
        cmocka_unit_test(test_layerput_disk),
        cmocka_unit_test(test_layerput_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
