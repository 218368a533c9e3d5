/* rt_world.c -- the runtime tests' fixture (rt_world.h). */
#include "rt_world.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "model/deltanet.h"
#include "model/forward.h"
#include "model/kv.h"

void rw_make(world *w, const char *tag, const sb_rt_make_opts *o, uint32_t page_tokens,
             uint64_t ram_bytes)
{
    memset(w, 0, sizeof *w);
    snprintf(w->path, sizeof w->path, "/tmp/%s.%ld.gguf", tag, (long)getpid());
    sb_rt_err err = { 0 };
    if (sb_rt_make_model(o, w->path, &err) != SB_OK)
        fail_msg("make_model: %s", err.msg);
    if (sb_rt_model_load(w->path, &w->m, &err) != SB_OK)
        fail_msg("load: %s", err.msg);
    unlink(w->path);
    assert_true(w->m->hp.n_layers <= 8);
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.ram_bytes = ram_bytes;
    assert_int_equal(sb_store_open(&cfg, &w->st), SB_OK);
    sb_layout layout;
    assert_int_equal(sb_rt_kv_layout(w->m, page_tokens, w->bpt, &layout), SB_OK);
    assert_int_equal(sb_ns_open(w->st, &layout, NULL, 0, &w->ns), SB_OK);
}

void rw_unmake(world *w)
{
    sb_ns_close(w->ns);
    assert_int_equal(sb_store_check(w->st), SB_OK);
    sb_store_close(w->st);
    sb_rt_model_free(w->m);
}

void rw_tokens(const world *w, uint32_t *t, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        t[i] = (uint32_t)((seed >> 33) % w->m->hp.n_vocab);
    }
}

float *rw_run_all(world *w, const uint32_t *t, size_t n, uint32_t n_batch, unsigned threads)
{
    size_t V = w->m->hp.n_vocab;
    float *lg = malloc(n * V * sizeof *lg);
    assert_non_null(lg);
    sb_rt_ctx *c;
    assert_int_equal(sb_rt_ctx_new(w->m, threads, n_batch, &c), SB_OK);
    sb_rt_kv kv;
    assert_int_equal(sb_rt_kv_init(&kv, w->m, w->ns), SB_OK);
    assert_int_equal(sb_rt_forward(c, &kv, t, n, SB_RT_LOGITS_ALL, lg), SB_OK);
    assert_int_equal(kv.n_tokens, n);
    if (kv.gdn) /* a hybrid model's recurrent state went along */
        assert_int_equal(sb_rt_gdn_pos(kv.gdn), n);
    sb_rt_kv_fini(&kv);
    sb_rt_ctx_free(c);
    return lg;
}
