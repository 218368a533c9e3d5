/* bench_runtime.c -- prefill and decode speed of the CPU runtime on a
 * GGUF model, with its KV cache in snapbank pages.
 *
 * Description: runs the GGUF file --model names (any model the runtime
 * loads), or else makes the `small` preset model (dim 768, 12 layers, 12
 * heads, 4 KV heads, ff 2048, vocab 4096, F16; --preset and --dtype change
 * it) in the scratch directory; loads it, and on --threads threads (2)
 * times:
 *   - prefill of P tokens in one call (P = 512 and 2048, or --prefill N;
 *     --quick: 64), from an empty sequence, the logits of the last
 *     position asked for;
 *   - decode: D tokens one at a time after a C-token prompt (D = 128 or
 *     --decode N, C = 512 or --context N; --quick: 8 after 64), greedy,
 *     each step a forward pass of one token. The line names C.
 * Each figure is the median of --reps runs (3), printed with every run's
 * value and the median CPU seconds per token of the process (all threads:
 * what a loaded machine does not change as much as wall time). The
 * prompt's token ids come from a fixed generator. For scale: issue 16's
 * llama.cpp figures on these machines (2 threads, small shape; F16: 854
 * tokens/s prefill 512, 658 at 2048, 128 decode; Q8_0: 935, 556, 147); a
 * generated small model of those types prints its ratio to them.
 *
 * Exit status: 0 success; 1 a call failed; 2 bad usage. Figures are printed,
 * never asserted.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "kernels/kernels.h"
#include "model/forward.h"
#include "model/kv.h"
#include "make_model/make_model.h"
#include "model/model.h"
#include "model/sample.h"

#define BENCH_NAME "bench_runtime"
#include "bench_util.h"

#ifndef SB_BENCH_BUILD_TYPE
#define SB_BENCH_BUILD_TYPE "unknown"
#endif

/* llama.cpp's figures quoted in issue 16 (2 threads, small shape):
 * prefill 512, prefill 2048, decode after 512. */
static const struct { const char *dtype; double p512, p2048, decode; } refs[] = {
    { "f16", 854, 658, 128 },
    { "q8_0", 935, 556, 147 },
};

/* CPU seconds of the process so far (every thread, user and system). */
static double cpu_s(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec / 1e6 +
           (double)u.ru_stime.tv_sec + (double)u.ru_stime.tv_usec / 1e6;
}

typedef struct bench {
    sb_rt_model *m;
    sb_store *st;
    sb_ns *ns;
    sb_rt_ctx *ctx;
    uint32_t *tok;             /* (n_ctx) prompt tokens */
    float *logits;
} bench;

/* Seconds for a prefill of n tokens from empty; *cpu its CPU seconds. */
static double prefill(bench *b, size_t n, double *cpu)
{
    sb_rt_kv kv;
    check(sb_rt_kv_init(&kv, b->m, b->ns), "sb_rt_kv_init");
    double c0 = cpu_s(), t0 = now_s();
    check(sb_rt_forward(b->ctx, &kv, b->tok, n, SB_RT_LOGITS_LAST, b->logits), "prefill");
    double t = now_s() - t0;
    *cpu = cpu_s() - c0;
    sb_rt_kv_fini(&kv);
    return t;
}

/* Seconds for d decode steps after a prompt of n tokens; *cpu their CPU
 * seconds. */
static double decode(bench *b, size_t n, size_t d, double *cpu)
{
    sb_rt_kv kv;
    sb_rt_sampler s;
    const sb_rt_sampling greedy = { 0, 0, 1, 0 };
    check(sb_rt_kv_init(&kv, b->m, b->ns), "sb_rt_kv_init");
    check(sb_rt_sampler_init(&s, &greedy, b->m->hp.n_vocab), "sampler");
    check(sb_rt_forward(b->ctx, &kv, b->tok, n, SB_RT_LOGITS_LAST, b->logits), "prompt");
    double c0 = cpu_s(), t0 = now_s();
    for (size_t i = 0; i < d; i++) {
        uint32_t id = sb_rt_sample(&s, b->logits);
        check(sb_rt_forward(b->ctx, &kv, &id, 1, SB_RT_LOGITS_LAST, b->logits), "decode");
    }
    double t = now_s() - t0;
    *cpu = cpu_s() - c0;
    sb_rt_sampler_fini(&s);
    sb_rt_kv_fini(&kv);
    return t;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v, int n)
{
    double s[16];
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static void report(const char *what, double tokens, const double *secs, const double *cpu,
                   int reps, double ref)
{
    double med = median(secs, reps);
    printf("%-22s %8.1f tokens/s (median of", what, tokens / med);
    for (int r = 0; r < reps; r++)
        printf(" %.1f", tokens / secs[r]);
    printf("); %.2f ms CPU per token", median(cpu, reps) / tokens * 1e3);
    if (ref > 0)
        printf("; llama.cpp %.0f: ratio %.2f", ref, tokens / med / ref);
    printf("\n");
}

int main(int argc, char **argv)
{
    const char *preset = "small", *dtype = NULL, *dir = "/var/tmp", *model = NULL;
    unsigned threads = 2;
    int reps = 3, quick = 0;
    size_t P[2] = { 512, 2048 }, n_p = 2, D = 128, C = 512;
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
        } else if (!strcmp(a, "--prefill") && v && atoi(v) >= 0) {
            P[0] = (size_t)atoi(v), n_p = P[0] ? 1 : 0, i++;
        } else if (!strcmp(a, "--decode") && v && atoi(v) >= 0) {
            D = (size_t)atoi(v), i++;
        } else if (!strcmp(a, "--context") && v && atoi(v) > 0) {
            C = (size_t)atoi(v), i++;
        } else {
            fprintf(stderr, "usage: bench_runtime [--quick] [--model FILE | --preset P "
                            "[--dtype T]] [--prefill N] [--decode N] [--context N] "
                            "[--threads N] [--reps N] [--dir D]\npresets: %s\n",
                    SB_RT_MAKE_PRESETS);
            return 2;
        }
    }
    if (model && dtype) {
        fprintf(stderr, "bench_runtime: --dtype makes a model; --model runs one: not both\n");
        return 2;
    }
    if (quick) {
        reps = 1;
        if (!strcmp(preset, "small"))
            preset = "tiny";
        P[0] = 64, n_p = 1, D = 8, C = 64;
    }
    char path[4096];
    double t_make = 0, t0;
    sb_rt_err err = { 0 };
    if (!model) {
        snprintf(path, sizeof path, "%s/bench_runtime.%ld.gguf", dir, (long)getpid());
        sb_rt_make_opts mo;
        if (sb_rt_make_opts_preset(&mo, preset) != SB_OK) {
            fprintf(stderr, "bench_runtime: --preset %s: unknown (%s)\n", preset,
                    SB_RT_MAKE_PRESETS);
            return 2;
        }
        if (dtype && sb_rt_make_opts_set(&mo, "dtype", dtype) != SB_OK) {
            fprintf(stderr, "bench_runtime: --dtype %s: unknown type\n", dtype);
            return 2;
        }
        t0 = now_s();
        if (sb_rt_make_model(&mo, path, &err) != SB_OK) {
            fprintf(stderr, "bench_runtime: make-model: %s\n", err.msg);
            return 1;
        }
        t_make = now_s() - t0;
        if (!dtype)
            dtype = sb_rt_make_dtype_name(mo.dtype);
    } else {
        snprintf(path, sizeof path, "%s", model);
    }
    bench b = { 0 };
    t0 = now_s();
    int rc = sb_rt_model_load(path, &b.m, &err);
    if (!model)
        unlink(path);
    if (rc != SB_OK) {
        fprintf(stderr, "bench_runtime: %s\n", err.msg);
        return 1;
    }
    double t_load = now_s() - t0;
    const sb_rt_hparams *hp = &b.m->hp;
    for (size_t k = 0; k < n_p; k++)
        if (P[k] > hp->n_ctx)
            P[k] = hp->n_ctx;
    if (D >= hp->n_ctx)
        D = hp->n_ctx / 2;
    if (C + D > hp->n_ctx)
        C = hp->n_ctx - D;
    uint32_t bpt[2 * SB_RT_MAX_LAYERS];
    sb_layout layout;
    sb_config cfg;
    sb_config_default(&cfg);
    uint64_t kv_tok = 2ull * hp->n_layers * sb_rt_model_kv_dim(b.m) * 2;
    /* What the runs hold (not the model's context: 131072 for Llama 3.2). */
    size_t longest = C + D;
    for (size_t k = 0; k < n_p; k++)
        longest = P[k] > longest ? P[k] : longest;
    cfg.ram_bytes = (longest + 64) * kv_tok * 2 + (64u << 20);
    cfg.max_seq_tokens = hp->n_ctx;
    check(sb_rt_kv_layout(b.m, 16, bpt, &layout), "layout");
    check(sb_store_open(&cfg, &b.st), "sb_store_open");
    check(sb_ns_open(b.st, &layout, NULL, 0, &b.ns), "sb_ns_open");
    check(sb_rt_ctx_new(b.m, threads, 512, &b.ctx), "sb_rt_ctx_new");
    b.tok = malloc(hp->n_ctx * sizeof *b.tok);
    b.logits = malloc(hp->n_vocab * sizeof *b.logits);
    if (!b.tok || !b.logits)
        check(SB_ERR_NOMEM, "malloc");
    uint64_t x = 12345;
    for (size_t i = 0; i < hp->n_ctx; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        b.tok[i] = (uint32_t)((x >> 33) % hp->n_vocab);
    }

    if (model)
        printf("bench_runtime -- build %s; model %s (%s): %u layers, dim %u, %u/%u heads of "
               "%u, ff %u, vocab %u; loaded in %.3f s; %u threads, %s kernels; KV pages of 16 "
               "tokens (%.0f KiB)\n", SB_BENCH_BUILD_TYPE, model, sb_rt_arch_name(hp->arch),
               hp->n_layers, hp->dim, hp->n_heads, hp->n_kv_heads, hp->head_dim, hp->n_ff,
               hp->n_vocab, t_load, sb_rt_ctx_threads(b.ctx),
               sb_rt_kernels_best()->name, (double)(16 * kv_tok) / 1024);
    else
        printf("bench_runtime -- build %s; model %s preset (%s), %u layers, dim %u, %u/%u heads "
               "of %u, ff %u, vocab %u, weights %s; made in %.2f s, loaded in %.3f s; %u threads, "
               "%s kernels; KV pages of 16 tokens (%.0f KiB)\n", SB_BENCH_BUILD_TYPE, preset,
               sb_rt_arch_name(hp->arch), hp->n_layers, hp->dim, hp->n_heads, hp->n_kv_heads,
               hp->head_dim, hp->n_ff, hp->n_vocab, dtype,
               t_make, t_load, sb_rt_ctx_threads(b.ctx), sb_rt_kernels_best()->name,
               (double)(16 * kv_tok) / 1024);
    int ref = -1;
    for (int i = 0; i < 2 && !model && !strcmp(preset, "small") && threads == 2; i++)
        if (!strcmp(dtype, refs[i].dtype))
            ref = i;
    double secs[16], cpu[16];
    for (size_t k = 0; k < n_p; k++) {
        (void)prefill(&b, P[k] < 64 ? P[k] : 64, &cpu[0]); /* warm the weights into cache */
        for (int r = 0; r < reps; r++)
            secs[r] = prefill(&b, P[k], &cpu[r]);
        char what[64];
        snprintf(what, sizeof what, "prefill %zu tokens:", P[k]);
        report(what, (double)P[k], secs, cpu, reps,
               ref < 0 ? 0 : P[k] == 512 ? refs[ref].p512 : P[k] == 2048 ? refs[ref].p2048 : 0);
    }
    if (D) {
        for (int r = 0; r < reps; r++)
            secs[r] = decode(&b, C, D, &cpu[r]);
        char what[64];
        snprintf(what, sizeof what, "decode (after %zu):", C);
        report(what, (double)D, secs, cpu, reps, ref >= 0 && C == 512 ? refs[ref].decode : 0);
    }

    sb_rt_ctx_free(b.ctx);
    sb_ns_close(b.ns);
    sb_store_close(b.st);
    sb_rt_model_free(b.m);
    free(b.tok);
    free(b.logits);
    return 0;
}
