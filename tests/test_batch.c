/* test_batch.c -- continuous batching through the runtime's public C API
 * (sbrt_chat_turn_batch in snapbank_rt.h, runtime/batch), as a program
 * linking libsnapbank_rt sees it.
 *
 * Description: on a generated model (the tiny preset, and tiny-hybrid for
 * a model with recurrent state),
 *   - two chats' turns run batched give, token for token, what each chat's
 *     own sbrt_chat_turn gives in a store of its own (sampled, different
 *     seeds and inputs of different lengths), over three turns, the later
 *     ones restoring the earlier ones' prefixes from the bank (the report
 *     says cached_tokens > 0) and continuing the chats' sessions;
 *   - a stop token ends a batched turn after it, as it ends sbrt_chat_turn;
 *   - bad calls are refused with SB_ERR_INVAL and run nothing: a chat given
 *     twice, n_gen 0, a chat of another model, a chat with no tokens and
 *     no input, NULL arrays.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "snapbank_rt.h"

#define NGEN 12
#define REPORT 4096

typedef struct world {
    char dir[64];
    char path[96];
    sb_rt_model *m;
} world;

static void world_open(world *w, const char *preset)
{
    snprintf(w->dir, sizeof w->dir, "/tmp/sb_test_batch.XXXXXX");
    assert_non_null(mkdtemp(w->dir));
    snprintf(w->path, sizeof w->path, "%s/%s.gguf", w->dir, preset);
    char err[256] = "";
    int rc = sbrt_make_model(preset, NULL, 11, w->path, err, sizeof err);
    if (rc != SB_OK)
        fail_msg("make_model %s: %s (%s)", preset, sb_strerror(rc), err);
    rc = sbrt_model_load(w->path, &w->m, err, sizeof err);
    if (rc != SB_OK)
        fail_msg("load %s: %s (%s)", w->path, sb_strerror(rc), err);
}

static void world_close(world *w)
{
    sbrt_model_free(w->m);
    unlink(w->path);
    rmdir(w->dir);
}

static sb_store *ram_store(void)
{
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.min_prefix_tokens = 1;
    sb_store *st;
    assert_int_equal(sb_store_open(&cfg, &st), SB_OK);
    return st;
}

static sbrt_chat *chat(sb_store *st, const sb_rt_model *m, const char *scope)
{
    sbrt_chat *c;
    assert_int_equal(sbrt_chat_open(st, m, scope, strlen(scope), 1, 16, &c), SB_OK);
    return c;
}

/* The input of chat k at turn t: n ids below the vocabulary size. */
static size_t input(const sb_rt_model *m, int k, int t, uint32_t *ids)
{
    size_t n = (size_t)(20 + 13 * k + 7 * t);
    uint32_t v = sbrt_model_n_vocab(m);
    for (size_t i = 0; i < n; i++)
        ids[i] = (uint32_t)((i * 31u + (unsigned)k * 97u + (unsigned)t * 7u + 3u) % v);
    return n;
}

/* Whether a report says some of the prompt came from the bank. */
static long cached_tokens(const char *report)
{
    const char *p = strstr(report, "\"cached_tokens\":");
    assert_non_null(p);
    return strtol(p + strlen("\"cached_tokens\":"), NULL, 10);
}

/* Two chats, three turns: batched in one store, each alone in another. */
static void batched_equals_alone(const char *preset)
{
    world w;
    world_open(&w, preset);
    sb_store *st = ram_store(), *ref_st = ram_store();
    sbrt_chat *c[2] = { chat(st, w.m, "a"), chat(st, w.m, "b") };
    sbrt_chat *ref[2] = { chat(ref_st, w.m, "a"), chat(ref_st, w.m, "b") };
    for (int t = 0; t < 3; t++) {
        uint32_t in[2][64], out[2][NGEN], ref_out[NGEN];
        const uint32_t *inputs[2] = { in[0], in[1] };
        size_t n_in[2], n_out[2];
        uint64_t seeds[2] = { 100u + (uint64_t)t, 200u + (uint64_t)t };
        uint32_t *outs[2] = { out[0], out[1] };
        char rep[2][REPORT], ref_rep[REPORT];
        char *reports[2] = { rep[0], rep[1] };
        int rcs[2] = { -1, -1 };
        for (int k = 0; k < 2; k++)
            n_in[k] = input(w.m, k, t, in[k]);
        assert_int_equal(sbrt_chat_turn_batch(c, 2, inputs, n_in, NGEN, 0.9f, 40, 0.95f, seeds,
                                              UINT32_MAX, outs, n_out, rcs, reports, REPORT),
                         SB_OK);
        for (int k = 0; k < 2; k++) {
            assert_int_equal(rcs[k], SB_OK);
            size_t n_ref;
            assert_int_equal(sbrt_chat_turn(ref[k], in[k], n_in[k], NGEN, 0.9f, 40, 0.95f,
                                            seeds[k], UINT32_MAX, ref_out, &n_ref, ref_rep,
                                            REPORT),
                             SB_OK);
            assert_int_equal(n_out[k], NGEN);
            assert_int_equal(n_ref, NGEN);
            assert_memory_equal(out[k], ref_out, NGEN * sizeof *out[k]);
            /* the chat continues after the turn: its tokens are the
             * reference's (every generated token ran) */
            uint32_t a[512], b[512];
            size_t na = sbrt_chat_tokens(c[k], a, 512), nb = sbrt_chat_tokens(ref[k], b, 512);
            assert_int_equal(na, nb);
            assert_true(na <= 512);
            assert_memory_equal(a, b, na * sizeof *a);
            if (t > 0) /* the earlier turns' pages came from the bank */
                assert_true(cached_tokens(rep[k]) > 0);
        }
    }
    for (int k = 0; k < 2; k++) {
        sbrt_chat_close(c[k]);
        sbrt_chat_close(ref[k]);
    }
    sb_store_close(st);
    sb_store_close(ref_st);
    world_close(&w);
}

static void test_batched_equals_alone(void **state)
{
    (void)state;
    batched_equals_alone("tiny");
}

static void test_batched_equals_alone_hybrid(void **state)
{
    (void)state;
    batched_equals_alone("tiny-hybrid");
}

/* A stop token ends the batched turn after it, as it ends a turn alone. */
static void test_stop_token(void **state)
{
    (void)state;
    world w;
    world_open(&w, "tiny");
    sb_store *st = ram_store(), *ref_st = ram_store();
    uint32_t in[64], out[NGEN], ref_out[NGEN];
    size_t n_in = input(w.m, 0, 0, in), n_ref, n_out;
    char rep[REPORT];
    /* the fifth token of an unstopped turn is the stop token */
    sbrt_chat *probe = chat(ref_st, w.m, "probe");
    assert_int_equal(sbrt_chat_turn(probe, in, n_in, NGEN, 0, 0, 1, 5, UINT32_MAX, ref_out, &n_ref,
                                    rep, REPORT),
                     SB_OK);
    assert_int_equal(n_ref, NGEN);
    uint32_t stop = ref_out[4];
    size_t first = 0;
    while (ref_out[first] != stop)
        first++;
    sbrt_chat *ref = chat(ref_st, w.m, "ref"), *c = chat(st, w.m, "c");
    assert_int_equal(sbrt_chat_turn(ref, in, n_in, NGEN, 0, 0, 1, 5, stop, ref_out, &n_ref, rep,
                                    REPORT),
                     SB_OK);
    assert_int_equal(n_ref, first + 1);
    const uint32_t *inputs[1] = { in };
    uint32_t *outs[1] = { out };
    uint64_t seed = 5;
    assert_int_equal(sbrt_chat_turn_batch(&c, 1, inputs, &n_in, NGEN, 0, 0, 1, &seed, stop, outs,
                                          &n_out, NULL, NULL, 0),
                     SB_OK);
    assert_int_equal(n_out, n_ref);
    assert_memory_equal(out, ref_out, n_out * sizeof *out);
    sbrt_chat_close(probe);
    sbrt_chat_close(ref);
    sbrt_chat_close(c);
    sb_store_close(st);
    sb_store_close(ref_st);
    world_close(&w);
}

/* Bad calls are refused and run nothing. */
static void test_refusals(void **state)
{
    (void)state;
    world w, w2;
    world_open(&w, "tiny");
    world_open(&w2, "tiny");
    sb_store *st = ram_store();
    sbrt_chat *a = chat(st, w.m, "a"), *b = chat(st, w.m, "b"), *other = chat(st, w2.m, "o");
    uint32_t in[64], out0[NGEN], out1[NGEN];
    size_t n = input(w.m, 0, 0, in);
    const uint32_t *inputs[2] = { in, in };
    size_t n_in[2] = { n, n }, n_out[2], zero[2] = { 0, n };
    uint64_t seeds[2] = { 1, 2 };
    uint32_t *outs[2] = { out0, out1 };
    sbrt_chat *twice[2] = { a, a }, *mixed[2] = { a, other }, *ab[2] = { a, b };
    assert_int_equal(sbrt_chat_turn_batch(twice, 2, inputs, n_in, NGEN, 0, 0, 1, seeds,
                                          UINT32_MAX, outs, n_out, NULL, NULL, 0),
                     SB_ERR_INVAL);
    assert_int_equal(sbrt_chat_turn_batch(mixed, 2, inputs, n_in, NGEN, 0, 0, 1, seeds,
                                          UINT32_MAX, outs, n_out, NULL, NULL, 0),
                     SB_ERR_INVAL);
    assert_int_equal(sbrt_chat_turn_batch(ab, 2, inputs, n_in, 0, 0, 0, 1, seeds, UINT32_MAX,
                                          outs, n_out, NULL, NULL, 0),
                     SB_ERR_INVAL);
    assert_int_equal(sbrt_chat_turn_batch(ab, 2, inputs, zero, NGEN, 0, 0, 1, seeds, UINT32_MAX,
                                          outs, n_out, NULL, NULL, 0),
                     SB_ERR_INVAL);
    assert_int_equal(sbrt_chat_turn_batch(ab, 2, NULL, n_in, NGEN, 0, 0, 1, seeds, UINT32_MAX,
                                          outs, n_out, NULL, NULL, 0),
                     SB_ERR_INVAL);
    assert_int_equal(sbrt_chat_turn_batch(ab, 2, inputs, n_in, NGEN, 0, 0, 1, NULL, UINT32_MAX,
                                          outs, n_out, NULL, NULL, 0),
                     SB_ERR_INVAL);
    /* nothing ran: the chats are still empty */
    assert_int_equal(sbrt_chat_tokens(a, NULL, 0), 0);
    assert_int_equal(sbrt_chat_tokens(b, NULL, 0), 0);
    sbrt_chat_close(a);
    sbrt_chat_close(b);
    sbrt_chat_close(other);
    sb_store_close(st);
    world_close(&w);
    world_close(&w2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batched_equals_alone),
        cmocka_unit_test(test_batched_equals_alone_hybrid),
        cmocka_unit_test(test_stop_token),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
