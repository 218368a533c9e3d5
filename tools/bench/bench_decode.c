/* bench_decode.c -- decoding while a bench job runs (bench_decode.h). */
#define _GNU_SOURCE
#include "bench_decode.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/forward.h"
#include "model/kv.h"
#include "make_model/make_model.h"
#include "model/model.h"
#include "model/sample.h"

#define PROMPT 64u /* tokens prefilled before decoding starts (again) */

struct bd_decode {
    const bj_job *j;
    sb_rt_model *m;
    sb_rt_ctx *ctx;
    float *logits;
    uint32_t prompt[PROMPT];
    /* the thread */
    pthread_t th;
    sb_store *st;
    bl_lat *lat;
    _Atomic int stop;
    uint64_t tokens;
    double secs;
    int failed;
};

bd_decode *bd_open(const bj_job *j)
{
    bd_decode *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->j = j;
    char path[BJ_PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/snapbank-bench-model.%ld.gguf", j->directory,
             (long)getpid());
    sb_rt_make_opts mo;
    sb_rt_make_opts_preset(&mo, j->decode);
    sb_rt_err err = { 0 };
    int rc = sb_rt_make_model(&mo, path, &err);
    if (rc == SB_OK)
        rc = sb_rt_model_load(path, &d->m, &err);
    unlink(path);
    if (rc == SB_OK)
        rc = sb_rt_ctx_new(d->m, (unsigned)j->decode_threads, 64, &d->ctx);
    if (rc == SB_OK && !(d->logits = malloc(d->m->hp.n_vocab * sizeof *d->logits)))
        rc = SB_ERR_NOMEM;
    if (rc != SB_OK) {
        fprintf(stderr, "snapbank bench: job '%s': decode model %s: %s\n", j->name, j->decode,
                *err.msg ? err.msg : sb_strerror(rc));
        bd_close(d);
        return NULL;
    }
    uint64_t x = j->seed;
    for (unsigned i = 0; i < PROMPT; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        d->prompt[i] = (uint32_t)((x >> 33) % d->m->hp.n_vocab);
    }
    return d;
}

/* Decode on d->st until d->stop (or secs, when > 0). */
static void decode_loop(bd_decode *d, double secs)
{
    sb_layout layout;
    uint32_t bpt[2 * SB_RT_MAX_LAYERS];
    sb_ns *ns = NULL;
    int rc = sb_rt_kv_layout(d->m, 16, bpt, &layout);
    if (rc == SB_OK)
        rc = sb_ns_open(d->st, &layout, "decode", 6, &ns);
    sb_rt_kv kv;
    sb_rt_sampler s;
    const sb_rt_sampling greedy = { 0, 0, 1, 0 };
    bool have_kv = false, have_s = false;
    if (rc == SB_OK && (rc = sb_rt_kv_init(&kv, d->m, ns)) == SB_OK)
        have_kv = true;
    if (rc == SB_OK && (rc = sb_rt_sampler_init(&s, &greedy, d->m->hp.n_vocab)) == SB_OK)
        have_s = true;
    uint64_t t0 = bl_now_ns(), n = 0;
    size_t len = 0;
    bool fg = d->j->foreground;
    while (rc == SB_OK && !atomic_load(&d->stop) &&
           (secs <= 0 || (double)(bl_now_ns() - t0) / 1e9 < secs)) {
        if (!len || len + 1 >= d->m->hp.n_ctx) { /* (again) from the prompt */
            sb_rt_kv_reset(&kv);
            rc = sb_rt_forward(d->ctx, &kv, d->prompt, PROMPT, SB_RT_LOGITS_LAST, d->logits);
            len = PROMPT;
            continue;
        }
        uint32_t id = sb_rt_sample(&s, d->logits);
        uint64_t t = bl_now_ns();
        if (fg)
            sb_store_foreground(d->st, 1);
        rc = sb_rt_forward(d->ctx, &kv, &id, 1, SB_RT_LOGITS_LAST, d->logits);
        if (fg)
            sb_store_foreground(d->st, 0);
        t = bl_now_ns() - t;
        if (d->lat)
            bl_add(d->lat, t);
        len++;
        n++;
    }
    d->secs = (double)(bl_now_ns() - t0) / 1e9;
    d->tokens = n;
    if (rc != SB_OK) {
        fprintf(stderr, "snapbank bench: job '%s': decoding: %s\n", d->j->name, sb_strerror(rc));
        d->failed = 1;
    }
    if (have_s)
        sb_rt_sampler_fini(&s);
    if (have_kv)
        sb_rt_kv_fini(&kv);
    if (ns)
        sb_ns_close(ns);
}

double bd_alone(bd_decode *d, sb_store *st, double secs)
{
    d->st = st;
    d->lat = NULL;
    d->failed = 0;
    atomic_store(&d->stop, 0);
    decode_loop(d, secs);
    return d->failed || d->secs <= 0 ? 0 : (double)d->tokens / d->secs;
}

static void *decode_main(void *arg)
{
    decode_loop(arg, 0);
    return NULL;
}

int bd_start(bd_decode *d, sb_store *st, bl_lat *lat)
{
    d->st = st;
    d->lat = lat;
    d->failed = 0;
    atomic_store(&d->stop, 0);
    return pthread_create(&d->th, NULL, decode_main, d) == 0 ? 0 : -1;
}

double bd_stop(bd_decode *d)
{
    atomic_store(&d->stop, 1);
    pthread_join(d->th, NULL);
    return d->failed || d->secs <= 0 ? 0 : (double)d->tokens / d->secs;
}

void bd_close(bd_decode *d)
{
    if (!d)
        return;
    sb_rt_ctx_free(d->ctx);
    sb_rt_model_free(d->m);
    free(d->logits);
    free(d);
}
