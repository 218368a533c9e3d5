/* bench_decode.c -- decoding while a bench job runs (bench_decode.h). */
#define _GNU_SOURCE
#include "bench_decode.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "snapbank_rt.h"

#define PROMPT 64u /* tokens prefilled before decoding starts (again) */

struct bd_decode {
    const bj_job *j;
    sb_rt_model *m;
    uint32_t n_ctx;
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
    char path[BJ_PATH_MAX + 64], err[512] = "";
    snprintf(path, sizeof path, "%s/snapbank-bench-model.%ld.gguf", j->directory,
             (long)getpid());
    /* the preset's own weights (make-model's default seed, 1) */
    int rc = sbrt_make_model(j->decode, NULL, 1, path, err, sizeof err);
    if (rc == SB_OK)
        rc = sbrt_model_load(path, &d->m, err, sizeof err);
    unlink(path);
    if (rc != SB_OK) {
        fprintf(stderr, "snapbank bench: job '%s': decode model %s: %s\n", j->name, j->decode,
                *err ? err : sb_strerror(rc));
        bd_close(d);
        return NULL;
    }
    d->n_ctx = sbrt_model_n_ctx(d->m);
    uint32_t n_vocab = sbrt_model_n_vocab(d->m);
    uint64_t x = j->seed;
    for (unsigned i = 0; i < PROMPT; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        d->prompt[i] = (uint32_t)((x >> 33) % n_vocab);
    }
    return d;
}

/* Decode on d->st until d->stop (or secs, when > 0): a decoder over a
 * namespace of its own in the job's store (snapbank_rt.h), started again
 * from the prompt when the context is full; each step (the greedy pick and
 * one forward pass) timed into d->lat. */
static void decode_loop(bd_decode *d, double secs)
{
    sbrt_decoder *dec = NULL;
    int rc = sbrt_decoder_open(d->st, d->m, "decode", 6, (unsigned)d->j->decode_threads, &dec);
    uint64_t t0 = bl_now_ns(), n = 0;
    size_t len = 0;
    bool fg = d->j->foreground;
    while (rc == SB_OK && !atomic_load(&d->stop) &&
           (secs <= 0 || (double)(bl_now_ns() - t0) / 1e9 < secs)) {
        if (!len || len + 1 >= d->n_ctx) { /* (again) from the prompt */
            rc = sbrt_decoder_prefill(dec, d->prompt, PROMPT);
            len = PROMPT;
            continue;
        }
        uint32_t id;
        uint64_t t = bl_now_ns();
        if (fg)
            sb_store_foreground(d->st, 1);
        rc = sbrt_decoder_step(dec, &id);
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
    sbrt_decoder_close(dec);
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
    sbrt_model_free(d->m);
    free(d);
}
