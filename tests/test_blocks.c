/* Description: scatter/gather transfers between the bank and an engine's
 * own paged pool (sb_ns_put_blocks, sb_match_restore_blocks,
 * sb_block_table). The stand-in engine keeps, per tensor (two layers' K
 * and V), a pool of 12-token blocks (not the bank's 16-token pages, so
 * runs cross pages and blocks), V rows padded to 96 bytes, and a shuffled
 * block table per sequence. Checked byte for byte against the synthetic
 * state: a put from the pool and a restore into another pool with another
 * table; a restore a layer at a time and of a range in the middle (nothing
 * outside it written); a contiguous table equal to sb_match_restore; a
 * chat's growth put naming only the new positions (unaligned and aligned
 * to a page; the engine's memory before them is garbage and must not be
 * read), also when the page holding the positions before them is on disk
 * only after a reopen; a restore from disk; and the refusals (SB_ERR_RANGE
 * when the bank holds fewer tokens than the put's first position, with
 * *n_stored saying how many it holds; bad tables; ranges past L). */
#include <stdlib.h>
#include <string.h>

#include "tu_pool.h"

#define PT 16u
#define BT 12u        /* the engine's block size, in tokens */
#define NBLK 64u      /* blocks in each pool */
#define KROW 64u      /* bytes per token of each tensor */
#define VSTRIDE 96u   /* V rows are padded in the engine's pool */
#define NT 4u         /* K0 V0 K1 V1 */

static const tu_layout LAYOUT = { .page_tokens = PT, .n_tensors = NT,
                                  .bpt = { KROW, KROW, KROW, KROW }, .model = "blocks" };

typedef tu_pool engine;

/* A pool filled with byte fill, and a block table shuffled by seed. */
static void engine_init(engine *e, uint64_t seed, uint8_t fill)
{
    tu_pool_init(e, &LAYOUT, BT, NBLK, VSTRIDE, seed, fill);
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

static void test_blocks_ram(void **state)
{
    (void)state;
    sb_store *st = tu_store(64u << 20);
    sb_ns *ns = tu_ns(st, &LAYOUT, NULL);
    uint64_t rng = 5;
    uint32_t tok[300];
    tu_tokens(&rng, tok, 300, 900);

    engine a, b;
    engine_init(&a, 1, 0xEE);
    tu_pool_compute(&a, tok, 0, 300);
    size_t stored = 0;
    assert_int_equal(sb_ns_put_blocks(ns, tok, 300, 0, a.bt, NULL, &stored, NULL), SB_OK);
    assert_int_equal(stored, 300);
    assert_int_equal(tu_restore_exact(ns, &LAYOUT, tok, 300, NULL), 300);

    /* Into another pool with another table: all of it, then a layer at a
     * time, then a range in the middle. */
    sb_match *m = match_all(ns, tok, 300, 300);
    engine_init(&b, 2, 0x11);
    assert_int_equal(sb_match_restore_blocks(m, 0, 300, 0, NT, b.bt), SB_OK);
    tu_pool_expect(&b, tok, 0, 300, 0, NT, -1, 300);
    tu_pool_free(&b);
    engine_init(&b, 3, 0x22);
    assert_int_equal(sb_match_restore_blocks(m, 0, 300, 0, 2, b.bt), SB_OK);
    tu_pool_expect(&b, tok, 0, 300, 0, 2, -1, 300);
    tu_pool_expect(&b, tok, 0, 0, 2, 2, 0x22, NBLK * BT); /* layer 1 untouched */
    assert_int_equal(sb_match_restore_blocks(m, 0, 300, 2, 2, b.bt + 2), SB_OK);
    tu_pool_expect(&b, tok, 0, 300, 0, NT, -1, 300);
    tu_pool_free(&b);
    engine_init(&b, 4, 0x33);
    assert_int_equal(sb_match_restore_blocks(m, 37, 101, 0, NT, b.bt), SB_OK);
    tu_pool_expect(&b, tok, 37, 101, 0, NT, 0x33, NBLK * BT);
    assert_int_equal(sb_match_restore_blocks(m, 300, 0, 0, NT, b.bt), SB_OK);

    /* A contiguous table (block_tokens 0) gives what sb_match_restore does. */
    void **want = tu_bufs(&LAYOUT, 300), **got = tu_bufs(&LAYOUT, 300);
    assert_int_equal(sb_match_restore(m, 300, want, NULL), SB_OK);
    sb_block_table flat[NT];
    for (uint32_t t = 0; t < NT; t++)
        flat[t] = (sb_block_table){ .base = (uint8_t *)got[t] + 10 * KROW, .first_pos = 10 };
    assert_int_equal(sb_match_restore_blocks(m, 10, 290, 0, NT, flat), SB_OK);
    for (uint32_t t = 0; t < NT; t++)
        assert_memory_equal((uint8_t *)got[t] + 10 * KROW, (uint8_t *)want[t] + 10 * KROW,
                            290 * KROW);

    /* Refusals. */
    assert_int_equal(sb_match_restore_blocks(m, 0, 301, 0, NT, b.bt), SB_ERR_RANGE);
    assert_int_equal(sb_match_restore_blocks(m, 299, 2, 0, NT, b.bt), SB_ERR_RANGE);
    assert_int_equal(sb_match_restore_blocks(m, 5, 10, 0, NT, flat), SB_ERR_RANGE);
    assert_int_equal(sb_match_restore_blocks(m, 0, 10, 3, 2, b.bt), SB_ERR_INVAL);
    assert_int_equal(sb_match_restore_blocks(m, 0, 10, 0, 0, b.bt), SB_ERR_INVAL);
    assert_int_equal(sb_match_restore_blocks(m, 0, 10, 0, NT, NULL), SB_ERR_INVAL);
    assert_int_equal(sb_match_restore_blocks(NULL, 0, 10, 0, NT, b.bt), SB_ERR_INVAL);
    sb_block_table bad = b.bt[1];
    bad.token_stride = KROW - 1;
    assert_int_equal(sb_match_restore_blocks(m, 0, 10, 1, 1, &bad), SB_ERR_INVAL);
    bad = b.bt[1];
    bad.base = NULL;
    assert_int_equal(sb_match_restore_blocks(m, 0, 10, 1, 1, &bad), SB_ERR_INVAL);
    sb_match_release(m);
    for (uint32_t t = 0; t < NT; t++)
        free(want[t]), free(got[t]);
    free(want);
    free(got);
    tu_pool_free(&b);
    tu_pool_free(&a);
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
}

/* A chat grows: the first turn puts positions [0, t1), the next names only
 * [t1, t2) (the engine's rows before t1 are garbage by then). */
static void grow(sb_ns *ns, const uint32_t *tok, size_t t1, size_t t2, uint64_t seed)
{
    engine e;
    engine_init(&e, seed, 0x5A);
    tu_pool_compute(&e, tok, 0, t1);
    size_t stored = 0;
    assert_int_equal(sb_ns_put_blocks(ns, tok, t1, 0, e.bt, NULL, &stored, NULL), SB_OK);
    assert_int_equal(stored, t1);
    tu_pool_scribble(&e, t1);
    tu_pool_compute(&e, tok, t1, t2);
    assert_int_equal(sb_ns_put_blocks(ns, tok, t2, t1, e.bt, NULL, &stored, NULL), SB_OK);
    assert_int_equal(stored, t2);
    assert_int_equal(tu_restore_exact(ns, &LAYOUT, tok, t2, NULL), t2);
    tu_pool_free(&e);
}

static void test_blocks_growth(void **state)
{
    (void)state;
    sb_store *st = tu_store(64u << 20);
    sb_ns *ns = tu_ns(st, &LAYOUT, NULL);
    uint64_t rng = 9;
    uint32_t tok[3][200];
    for (int i = 0; i < 3; i++) {
        tu_tokens(&rng, tok[i], 200, 900);
        tok[i][0] = 901 + (uint32_t)i;
    }
    grow(ns, tok[0], 50, 170, 11);  /* 50 = 3 pages + 2 tokens */
    grow(ns, tok[1], 48, 130, 12);  /* a page boundary */
    grow(ns, tok[2], 7, 8, 13);     /* one token more, inside the first page */

    /* From past what the bank holds: refused, nothing stored. */
    engine e;
    engine_init(&e, 14, 0);
    uint32_t other[100];
    memcpy(other, tok[0], sizeof other);
    other[60] ^= 1; /* the bank holds 60 of these */
    tu_pool_compute(&e, other, 0, 100);
    size_t stored = 99;
    assert_int_equal(sb_ns_put_blocks(ns, other, 100, 80, e.bt, NULL, &stored, NULL),
                     SB_ERR_RANGE);
    assert_int_equal(stored, 60);
    assert_int_equal(tu_match_len(ns, other, 100), 60);
    assert_int_equal(sb_ns_put_blocks(ns, other, 100, stored, e.bt, NULL, &stored, NULL),
                     SB_OK);
    assert_int_equal(tu_restore_exact(ns, &LAYOUT, other, 100, NULL), 100);
    assert_int_equal(sb_ns_put_blocks(ns, other, 100, 101, e.bt, NULL, &stored, NULL),
                     SB_ERR_RANGE);
    sb_block_table late[NT];
    memcpy(late, e.bt, sizeof late);
    late[2].first_pos = 90;
    assert_int_equal(sb_ns_put_blocks(ns, other, 100, 80, late, NULL, &stored, NULL),
                     SB_ERR_RANGE);
    assert_int_equal(sb_ns_put_blocks(ns, other, 100, 0, NULL, NULL, &stored, NULL),
                     SB_ERR_INVAL);
    assert_int_equal(sb_ns_put_blocks(ns, other, 0, 0, e.bt, NULL, &stored, NULL),
                     SB_ERR_NO_TOKENS);
    tu_pool_free(&e);
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
}

/* With a disk tier: after a reopen every page is on disk only; a restore
 * into the pool reads them, and a growth put whose first position falls
 * inside a page on disk reads that page for the positions before it. */
static void test_blocks_disk(void **state)
{
    (void)state;
    char dir[128];
    tu_scratch_dir(dir, sizeof dir, "blocks");
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
    assert_int_equal(sb_ns_put_blocks(ns, tok, 100, 0, e.bt, NULL, NULL, NULL), SB_OK);
    assert_int_equal(sb_store_flush(st), SB_OK);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);

    assert_int_equal(sb_store_open(&cfg, &st), SB_OK);
    ns = tu_ns(st, &LAYOUT, NULL);
    sb_match *m = match_all(ns, tok, 100, 100);
    sb_match_info mi;
    assert_int_equal(sb_match_get_info(m, &mi), SB_OK);
    assert_int_equal(mi.n_pages_disk, 7);
    engine b;
    engine_init(&b, 32, 0x44);
    assert_int_equal(sb_match_restore_blocks(m, 40, 30, 0, NT, b.bt), SB_OK);
    tu_pool_expect(&b, tok, 40, 30, 0, NT, 0x44, NBLK * BT);
    assert_int_equal(sb_match_get_info(m, &mi), SB_OK);
    assert_int_equal(mi.n_pages_disk, 4); /* pages 2-4 were read, no others */
    sb_match_release(m);
    tu_pool_free(&b);

    /* Grow from 100 (inside page 6, on disk): the engine's rows before 100
     * are garbage. */
    tu_pool_scribble(&e, 100);
    tu_pool_compute(&e, tok, 100, 200);
    size_t stored = 0;
    assert_int_equal(sb_ns_put_blocks(ns, tok, 200, 100, e.bt, NULL, &stored, NULL), SB_OK);
    assert_int_equal(stored, 200);
    assert_int_equal(tu_restore_exact(ns, &LAYOUT, tok, 200, NULL), 200);
    assert_int_equal(tu_stats(st).disk_checksum_failures, 0);
    tu_pool_free(&e);
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
    tu_remove_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocks_ram),
        cmocka_unit_test(test_blocks_growth),
        cmocka_unit_test(test_blocks_disk),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
