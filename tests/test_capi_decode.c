/* test_capi_decode.c -- the bare decoder of the runtime's public C API
 * (sbrt_decoder_* in snapbank_rt.h), as a program linking libsnapbank_rt
 * sees it: what `snapbank bench` decodes with.
 *
 * Description: on a generated model (the tiny preset),
 *   - its greedy tokens after a prompt are, token for token, those of
 *     sbrt_chat_turn at temperature 0 after the same prompt (in a store of
 *     its own), and prefilling again starts the same sequence over;
 *   - it takes its KV pages from the store it was given (the store's RAM
 *     use grows while it decodes) and commits nothing to the bank (a chat
 *     over the same store and scope afterwards restores nothing);
 *   - steps run until the context is full, then SB_ERR_TOO_MANY_TOKENS,
 *     and a new prefill decodes again;
 *   - bad calls are refused with SB_ERR_INVAL: NULL arguments, an empty
 *     prompt, an id past the vocabulary, a step before any prefill.
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

#define PROMPT 20
#define NGEN 12

static char g_dir[64], g_path[96];
static sb_rt_model *g_m;

static int setup(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/sb_test_capi_decode.XXXXXX");
    if (!mkdtemp(g_dir))
        return -1;
    snprintf(g_path, sizeof g_path, "%s/tiny.gguf", g_dir);
    char err[256] = "";
    if (sbrt_make_model("tiny", NULL, 3, g_path, err, sizeof err) != SB_OK ||
        sbrt_model_load(g_path, &g_m, err, sizeof err) != SB_OK) {
        fprintf(stderr, "model: %s\n", err);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sbrt_model_free(g_m);
    unlink(g_path);
    rmdir(g_dir);
    return 0;
}

static sb_store *ram_store(void)
{
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.ram_bytes = 64u << 20;
    cfg.min_prefix_tokens = 1;
    sb_store *st;
    assert_int_equal(sb_store_open(&cfg, &st), SB_OK);
    return st;
}

static void prompt_for(uint32_t *p, size_t n)
{
    uint32_t v = sbrt_model_n_vocab(g_m);
    for (size_t i = 0; i < n; i++)
        p[i] = (uint32_t)((i * 131 + 17) % v);
}

static void same_as_chat(void **state)
{
    (void)state;
    uint32_t prompt[PROMPT], want[NGEN], got[NGEN];
    prompt_for(prompt, PROMPT);
    /* the chat's greedy answer, in a store of its own */
    sb_store *cst = ram_store();
    sbrt_chat *c;
    assert_int_equal(sbrt_chat_open(cst, g_m, NULL, 0, 1, 0, &c), SB_OK);
    size_t n_out = 0;
    char report[4096];
    assert_int_equal(sbrt_chat_turn(c, prompt, PROMPT, NGEN, 0.0f, 0, 1.0f, 0, UINT32_MAX, want,
                                    &n_out, report, sizeof report),
                     SB_OK);
    assert_int_equal(n_out, NGEN);
    sbrt_chat_close(c);
    sb_store_close(cst);

    sb_store *st = ram_store();
    sb_stats before, during;
    sb_store_stats(st, &before);
    sbrt_decoder *d;
    assert_int_equal(sbrt_decoder_open(st, g_m, "decode", 6, 1, &d), SB_OK);
    for (int round = 0; round < 2; round++) { /* a second prefill starts over */
        assert_int_equal(sbrt_decoder_prefill(d, prompt, PROMPT), SB_OK);
        for (size_t i = 0; i < NGEN; i++)
            assert_int_equal(sbrt_decoder_step(d, &got[i]), SB_OK);
        assert_memory_equal(got, want, sizeof want);
    }
    sb_store_stats(st, &during);
    assert_true(during.ram_pages > before.ram_pages); /* its KV pages */
    sbrt_decoder_close(d);
    /* nothing was committed: a chat in the same scope restores nothing */
    assert_int_equal(sbrt_chat_open(st, g_m, "decode", 6, 1, 0, &c), SB_OK);
    assert_int_equal(sbrt_chat_turn(c, prompt, PROMPT, 1, 0.0f, 0, 1.0f, 0, UINT32_MAX, got,
                                    &n_out, report, sizeof report),
                     SB_OK);
    assert_non_null(strstr(report, "\"cached_tokens\":0,"));
    sbrt_chat_close(c);
    sb_store_close(st);
}

static void context_end(void **state)
{
    (void)state;
    uint32_t prompt[PROMPT], id;
    prompt_for(prompt, PROMPT);
    sb_store *st = ram_store();
    sbrt_decoder *d;
    assert_int_equal(sbrt_decoder_open(st, g_m, NULL, 0, 1, &d), SB_OK);
    assert_int_equal(sbrt_decoder_prefill(d, prompt, PROMPT), SB_OK);
    size_t steps = 0;
    int rc;
    while ((rc = sbrt_decoder_step(d, &id)) == SB_OK)
        steps++;
    assert_int_equal(rc, SB_ERR_TOO_MANY_TOKENS);
    assert_int_equal(steps, sbrt_model_n_ctx(g_m) - PROMPT);
    assert_int_equal(sbrt_decoder_step(d, &id), SB_ERR_TOO_MANY_TOKENS); /* nothing changed */
    assert_int_equal(sbrt_decoder_prefill(d, prompt, PROMPT), SB_OK);
    assert_int_equal(sbrt_decoder_step(d, &id), SB_OK);
    sbrt_decoder_close(d);
    sb_store_close(st);
}

static void refusals(void **state)
{
    (void)state;
    sb_store *st = ram_store();
    sbrt_decoder *d = (sbrt_decoder *)1;
    uint32_t id, bad = sbrt_model_n_vocab(g_m), ok = 1;
    assert_int_equal(sbrt_decoder_open(NULL, g_m, NULL, 0, 1, &d), SB_ERR_INVAL);
    assert_null(d);
    assert_int_equal(sbrt_decoder_open(st, NULL, NULL, 0, 1, &d), SB_ERR_INVAL);
    assert_int_equal(sbrt_decoder_open(st, g_m, NULL, 3, 1, &d), SB_ERR_INVAL);
    assert_int_equal(sbrt_decoder_open(st, g_m, NULL, 0, 1, NULL), SB_ERR_INVAL);
    assert_int_equal(sbrt_decoder_open(st, g_m, NULL, 0, 1, &d), SB_OK);
    assert_int_equal(sbrt_decoder_step(d, &id), SB_ERR_INVAL); /* no prefill yet */
    assert_int_equal(sbrt_decoder_prefill(d, &ok, 0), SB_ERR_INVAL);
    assert_int_equal(sbrt_decoder_prefill(d, NULL, 1), SB_ERR_INVAL);
    assert_int_equal(sbrt_decoder_prefill(d, &bad, 1), SB_ERR_INVAL);
    assert_int_equal(sbrt_decoder_prefill(NULL, &ok, 1), SB_ERR_INVAL);
    assert_int_equal(sbrt_decoder_step(NULL, &id), SB_ERR_INVAL);
    assert_int_equal(sbrt_decoder_prefill(d, &ok, 1), SB_OK);
    assert_int_equal(sbrt_decoder_step(d, NULL), SB_ERR_INVAL);
    assert_int_equal(sbrt_decoder_step(d, &id), SB_OK);
    sbrt_decoder_close(d);
    sbrt_decoder_close(NULL);
    sb_store_close(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(same_as_chat),
        cmocka_unit_test(context_end),
        cmocka_unit_test(refusals),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
