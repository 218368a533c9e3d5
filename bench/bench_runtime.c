/* bench_runtime.c -- prefill and decode speed of the CPU runtime on a
 * generated model or any GGUF file, with its KV cache in snapbank pages.
 *
 * Description: makes the `small` preset model (dim 768, 12 layers, 12 heads,
 * 4 KV heads, ff 2048, vocab 4096, F16; --preset, any of make-model's, and
 * --dtype change it) in the scratch directory, or takes the file --model
 * names (any architecture and shape the runtime loads), loads it, and on
 * --threads threads (2) times:
 *   - prefill of P tokens in one call (P = 512 and 2048; --quick: 64), from
 *     an empty sequence, the logits of the last position asked for;
 *   - decode: D tokens one at a time after a 512-token prompt (D = 128;
 *     --quick: 8), greedy, each step a forward pass of one token.
 * Each figure is the best of --reps runs (3), printed with every run's
 * value. The prompt's token ids come from a fixed generator. For scale
 * (issue 5): llama.cpp on these machines, 2 threads, the same shape in F16,
 * prefills about 1300 tokens/s at 512 tokens and 820 at 2048, and decodes
 * about 180 tokens/s; the run prints its ratio to those figures.
 *
 * Exit status: 0 success; 1 a call failed; 2 bad usage. Figures are printed,
 * never asserted.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels/kernels.h"
#include "model/forward.h"
#include "model/kv.h"
#include "model/make_model.h"
#include "model/model.h"
#include "model/sample.h"

#define BENCH_NAME "bench_runtime"
#include "bench_util.h"

#ifndef SB_BENCH_BUILD_TYPE
#define SB_BENCH_BUILD_TYPE "unknown"
#endif

/* llama.cpp's figures quoted in issue 5 (2 threads, small shape, F16). */
#define REF_PREFILL_512 1300.0
#define REF_PREFILL_2048 820.0
#define REF_DECODE 180.0

typedef struct bench {
    sb_rt_model *m;
    sb_store *st;
    sb_ns *ns;
    sb_rt_ctx *ctx;
    uint32_t *tok;             /* (n_ctx) prompt tokens */
    float *logits;
} bench;

/* Seconds for a prefill of n tokens from empty. */
static double prefill(bench *b, size_t n)
{
    sb_rt_kv kv;
    check(sb_rt_kv_init(&kv, b->m, b->ns), "sb_rt_kv_init");
    double t0 = now_s();
    check(sb_rt_forward(b->ctx, &kv, b->tok, n, SB_RT_LOGITS_LAST, b->logits), "prefill");
    double t = now_s() - t0;
    sb_rt_kv_fini(&kv);
    return t;
}

/* Seconds for d decode steps after a prompt of n tokens. */
static double decode(bench *b, size_t n, size_t d)
{
    sb_rt_kv kv;
    sb_rt_sampler s;
    const sb_rt_sampling greedy = { 0, 0, 1, 0 };
    check(sb_rt_kv_init(&kv, b->m, b->ns), "sb_rt_kv_init");
    check(sb_rt_sampler_init(&s, &greedy, b->m->hp.n_vocab), "sampler");
    check(sb_rt_forward(b->ctx, &kv, b->tok, n, SB_RT_LOGITS_LAST, b->logits), "prompt");
    double t0 = now_s();
    for (size_t i = 0; i < d; i++) {
        uint32_t id = sb_rt_sample(&s, b->logits);
        check(sb_rt_forward(b->ctx, &kv, &id, 1, SB_RT_LOGITS_LAST, b->logits), "decode");
    }
    double t = now_s() - t0;
    sb_rt_sampler_fini(&s);
    sb_rt_kv_fini(&kv);
    return t;
}

static void report(const char *what, double tokens, const double *secs, int reps, double ref)
{
    double best = secs[0];
    for (int r = 1; r < reps; r++)
        best = secs[r] < best ? secs[r] : best;
    printf("%-22s %8.1f tokens/s (best of", what, tokens / best);
    for (int r = 0; r < reps; r++)
        printf(" %.1f", tokens / secs[r]);
    printf(")");
    if (ref > 0)
        printf("; llama.cpp %.0f: ratio %.2f", ref, tokens / best / ref);
    printf("\n");
}

int main(int argc, char **argv)
{
    const char *preset = "small", *dtype = NULL, *dir = "/var/tmp", *model = NULL;
    unsigned threads = 2;
    int reps = 3, quick = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quick")) {
            quick = 1;
        } else if (!strcmp(a, "--preset") && v) {
            preset = v, i++;
        } else if (!strcmp(a, "--dtype") && v) {
            dtype = v, i++;
        } else if (!strcmp(a, "--model") && v) {
            model = v, i++;
        } else if (!strcmp(a, "--dir") && v) {
            dir = v, i++;
        } else if (!strcmp(a, "--threads") && v && atoi(v) > 0) {
            threads = (unsigned)atoi(v), i++;
        } else if (!strcmp(a, "--reps") && v && atoi(v) > 0 && atoi(v) <= 16) {
            reps = atoi(v), i++;
        } else {
            fprintf(stderr, "usage: bench_runtime [--quick] [--model FILE | --preset P "
                            "[--dtype f32|f16|q8_0]] [--threads N] [--reps N] [--dir D]\n"
                            "presets: %s\n", SB_RT_MAKE_PRESETS);
            return 2;
        }
    }
    if (quick) {
        reps = 1;
        if (!strcmp(preset, "small"))
            preset = "tiny";
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/bench_runtime.%ld.gguf", dir, (long)getpid());
    sb_rt_make_opts mo;
    if (!model && sb_rt_make_opts_preset(&mo, preset) != SB_OK) {
        fprintf(stderr, "bench_runtime: --preset %s: unknown (%s)\n", preset, SB_RT_MAKE_PRESETS);
        return 2;
    }
    if (!model && dtype && sb_rt_make_opts_set(&mo, "dtype", dtype) != SB_OK) {
        fprintf(stderr, "bench_runtime: --dtype %s: unknown type\n", dtype);
        return 2;
    }
    sb_rt_err err = { 0 };
    double t0 = now_s();
    if (!model && sb_rt_make_model(&mo, path, &err) != SB_OK) {
        fprintf(stderr, "bench_runtime: make-model: %s\n", err.msg);
        return 1;
    }
    double t_make = now_s() - t0;
    bench b = { 0 };
    t0 = now_s();
    int rc = sb_rt_model_load(model ? model : path, &b.m, &err);
    if (!model)
        unlink(path);
    if (rc != SB_OK) {
        fprintf(stderr, "bench_runtime: %s\n", err.msg);
        return 1;
    }
    double t_load = now_s() - t0;
    const sb_rt_hparams *hp = &b.m->hp;
    size_t P[2] = { 512, 2048 }, D = 128, n_p = 2;
    if (quick) {
        P[0] = 64;
        n_p = 1;
        D = 8;
    }
    for (size_t k = 0; k < n_p; k++)
        if (P[k] + D > hp->n_ctx)
            P[k] = hp->n_ctx > D ? hp->n_ctx - D : 1;
    size_t n_tok = P[n_p - 1] > 512 ? P[n_p - 1] : 512; /* the longest prompt */
    if (n_tok + D > hp->n_ctx)
        n_tok = hp->n_ctx > D ? hp->n_ctx - D : 1;

    uint32_t bpt[2 * SB_RT_MAX_LAYERS];
    sb_layout layout;
    sb_config cfg;
    sb_config_default(&cfg);
    uint64_t kv_tok = 2ull * hp->n_layers * sb_rt_model_kv_dim(b.m) * 2;
    cfg.ram_bytes = (n_tok + D + 64) * kv_tok * 2 + (64u << 20); /* what the runs hold */
    cfg.max_seq_tokens = hp->n_ctx;
    check(sb_rt_kv_layout(b.m, 16, bpt, &layout), "layout");
    check(sb_store_open(&cfg, &b.st), "sb_store_open");
    check(sb_ns_open(b.st, &layout, NULL, 0, &b.ns), "sb_ns_open");
    check(sb_rt_ctx_new(b.m, threads, 512, &b.ctx), "sb_rt_ctx_new");
    b.tok = malloc(n_tok * sizeof *b.tok);
    b.logits = malloc(hp->n_vocab * sizeof *b.logits);
    if (!b.tok || !b.logits)
        check(SB_ERR_NOMEM, "malloc");
    uint64_t x = 12345;
    for (size_t i = 0; i < n_tok; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        b.tok[i] = (uint32_t)((x >> 33) % hp->n_vocab);
    }

    const sb_rt_dtype wt = b.m->layers[0].gate.type;
    printf("bench_runtime -- build %s; model %s%s (%s), %u layers, dim %u, %u/%u heads of %u, "
           "ff %u, vocab %u, weights %s; made in %.2f s, loaded in %.3f s; %u threads, %s "
           "kernels; KV pages of 16 tokens (%.0f KiB)\n", SB_BENCH_BUILD_TYPE,
           model ? model : preset, model ? "" : " preset", sb_rt_arch_name(hp->arch),
           hp->n_layers, hp->dim, hp->n_heads, hp->n_kv_heads, hp->head_dim, hp->n_ff,
           hp->n_vocab, wt == SB_RT_F32 ? "f32" : wt == SB_RT_F16 ? "f16" : wt == SB_RT_Q8_0 ?
           "q8_0" : "other", t_make, t_load, sb_rt_ctx_threads(b.ctx),
           sb_rt_kernels_best()->name, (double)(16 * kv_tok) / 1024);
    bool compare = !model && !strcmp(preset, "small") && (!dtype || !strcmp(dtype, "f16")) &&
                   threads == 2;
    double secs[16];
    for (size_t k = 0; k < n_p; k++) {
        (void)prefill(&b, P[k] < 64 ? P[k] : 64); /* warm the weights into cache */
        for (int r = 0; r < reps; r++)
            secs[r] = prefill(&b, P[k]);
        char what[64];
        snprintf(what, sizeof what, "prefill %zu tokens:", P[k]);
        report(what, (double)P[k], secs, reps,
               !compare ? 0 : P[k] == 512 ? REF_PREFILL_512 : P[k] == 2048 ? REF_PREFILL_2048 : 0);
    }
    size_t np = quick ? P[0] : n_tok < 512 ? n_tok : 512;
    for (int r = 0; r < reps; r++)
        secs[r] = decode(&b, np, D);
    char what[64];
    snprintf(what, sizeof what, "decode (after %zu):", np);
    report(what, (double)D, secs, reps, compare ? REF_DECODE : 0);

    sb_rt_ctx_free(b.ctx);
    sb_ns_close(b.ns);
    sb_store_close(b.st);
    sb_rt_model_free(b.m);
    free(b.tok);
    free(b.logits);
    return 0;
}
