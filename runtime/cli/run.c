/* run.c -- `snapbank run MODEL`: load a GGUF model, prefill a prompt into a
 * KV cache of snapbank pages, generate tokens, and report prefill and
 * decode speed. Exit status: 0 success, 1 failure (a message names the file
 * and the fault), 2 usage error. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "kernels/kernels.h"
#include "model/forward.h"
#include "model/kv.h"
#include "model/model.h"
#include "model/sample.h"
#include "model/tokenizer.h"

static void run_usage(FILE *f)
{
    fprintf(f,
            "usage: snapbank run MODEL (--prompt TEXT | --prompt-tokens 1,2,3) [options]\n\n"
            "Runs a llama-family GGUF model (llama or qwen2; F32, F16 or Q8_0 weights)\n"
            "on the CPU. Its KV cache lives in snapbank pages. Prints the generated\n"
            "text on stdout and the prefill and decode speed on stderr.\n\n"
            "options:\n"
            "  --prompt TEXT          the prompt, tokenized with the model's vocabulary\n"
            "                         (BOS first when the model asks for it)\n"
            "  --prompt-tokens LIST   the prompt as token ids, comma-separated, used as given\n"
            "  -n N                   tokens to generate (default 32; 0: prefill only)\n"
            "  --threads N            threads (default: every online CPU)\n"
            "  --temp T               sampling temperature (default 0: greedy)\n"
            "  --top-k K              keep the K most likely tokens (default 40; 0: all)\n"
            "  --top-p P              nucleus sampling threshold (default 0.95; 1: off)\n"
            "  --seed N               sampler seed (default 1)\n"
            "  --print-token-ids      print token ids instead of text\n"
            "  --logits-out FILE      write the float32 logits of the last prompt\n"
            "                         position (n_vocab little-endian floats) to FILE\n"
            "  --stop-at-eos          stop when the model produces its EOS token\n"
            "  --page-tokens N        tokens per KV page (default 16)\n"
            "  --batch N              prefill batch, tokens (default 512)\n\n"
            "exit status: 0 success, 1 failure, 2 usage.\n");
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Parse a decimal unsigned number in [lo, hi]. */
static int parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    if (!s || !*s || *s == '-')
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int parse_float(const char *s, float lo, float hi, float *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || *end || !(v >= lo && v <= hi))
        return -1;
    *out = v;
    return 0;
}

/* "1,2,3" into a fresh array. Returns the count, or 0 on a bad list. */
static size_t parse_tokens(const char *s, uint32_t **out)
{
    size_t n = 1;
    for (const char *p = s; *p; p++)
        n += *p == ',';
    uint32_t *t = malloc(n * sizeof *t);
    if (!t)
        return 0;
    size_t k = 0;
    const char *p = s;
    while (k < n) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(p, &end, 10);
        if (errno || end == p || v > UINT32_MAX || *p == '-' || (*end && *end != ',')) {
            free(t);
            return 0;
        }
        t[k++] = (uint32_t)v;
        if (!*end)
            break;
        p = end + 1;
    }
    if (k != n) {
        free(t);
        return 0;
    }
    *out = t;
    return n;
}

typedef struct run_opts {
    const char *model, *prompt, *prompt_tokens, *logits_out;
    uint64_t n_gen, threads, page_tokens, batch, seed;
    float temp, top_p;
    uint64_t top_k;
    int print_ids, stop_eos;
} run_opts;

static int parse(int argc, char **argv, run_opts *o)
{
    *o = (run_opts){ .n_gen = 32, .page_tokens = 16, .batch = 512, .seed = 1, .top_k = 40,
                     .top_p = 0.95f };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            run_usage(stdout);
            return 1;
        } else if (!strcmp(a, "--prompt") && v) {
            o->prompt = v, i++;
        } else if (!strcmp(a, "--prompt-tokens") && v) {
            o->prompt_tokens = v, i++;
        } else if (!strcmp(a, "--logits-out") && v) {
            o->logits_out = v, i++;
        } else if (!strcmp(a, "-n")) {
            bad = parse_u64(v, 0, 1u << 24, &o->n_gen), i++;
        } else if (!strcmp(a, "--threads")) {
            bad = parse_u64(v, 1, 1024, &o->threads), i++;
        } else if (!strcmp(a, "--page-tokens")) {
            bad = parse_u64(v, 1, 65536, &o->page_tokens), i++;
        } else if (!strcmp(a, "--batch")) {
            bad = parse_u64(v, 1, 65536, &o->batch), i++;
        } else if (!strcmp(a, "--seed")) {
            bad = parse_u64(v, 0, UINT64_MAX, &o->seed), i++;
        } else if (!strcmp(a, "--top-k")) {
            bad = parse_u64(v, 0, UINT32_MAX, &o->top_k), i++;
        } else if (!strcmp(a, "--temp")) {
            bad = parse_float(v, 0, 100, &o->temp), i++;
        } else if (!strcmp(a, "--top-p")) {
            bad = parse_float(v, 1e-6f, 1, &o->top_p), i++;
        } else if (!strcmp(a, "--print-token-ids")) {
            o->print_ids = 1;
        } else if (!strcmp(a, "--stop-at-eos")) {
            o->stop_eos = 1;
        } else if (a[0] != '-' && !o->model) {
            o->model = a;
        } else {
            bad = 1;
        }
        if (bad) {
            fprintf(stderr, "snapbank run: bad argument '%s'%s%s\n\n", a, v ? " " : "",
                    v && a[0] == '-' ? v : "");
            run_usage(stderr);
            return 2;
        }
    }
    if (!o->model || (!o->prompt == !o->prompt_tokens)) {
        fprintf(stderr, "snapbank run: need MODEL and exactly one of --prompt, "
                        "--prompt-tokens\n\n");
        run_usage(stderr);
        return 2;
    }
    return 0;
}

/* Print token id as text (or as its id). */
static void emit(const sb_rt_model *m, const run_opts *o, uint32_t prev, uint32_t id, int first)
{
    if (o->print_ids || !m->tok) {
        printf(first ? "%" PRIu32 : ",%" PRIu32, id);
    } else {
        char buf[256];
        size_t n = 0;
        if (sb_rt_tok_piece(m->tok, id, prev, buf, sizeof buf, &n) == SB_OK)
            fwrite(buf, 1, n, stdout);
    }
    fflush(stdout);
}

int sb_cli_run(int argc, char **argv)
{
    run_opts o;
    int prc = parse(argc, argv, &o);
    if (prc)
        return prc == 1 ? 0 : prc;

    sb_rt_err err = { 0 };
    sb_rt_model *m = NULL;
    double t0 = now_s();
    int rc = sb_rt_model_load(o.model, &m, &err);
    if (rc != SB_OK) {
        fprintf(stderr, "snapbank run: %s\n", err.msg);
        return 1;
    }
    double t_load = now_s() - t0;
    const sb_rt_hparams *hp = &m->hp;

    /* The prompt. */
    uint32_t *prompt = NULL;
    size_t n_prompt = 0;
    if (o.prompt_tokens) {
        n_prompt = parse_tokens(o.prompt_tokens, &prompt);
        if (!n_prompt) {
            fprintf(stderr, "snapbank run: --prompt-tokens: expected ids like 1,2,3\n");
            sb_rt_model_free(m);
            return 2;
        }
    } else if (!m->tok) {
        fprintf(stderr, "snapbank run: %s: %s; give --prompt-tokens instead\n", o.model,
                m->tok_error);
        sb_rt_model_free(m);
        return 1;
    } else {
        size_t len = strlen(o.prompt), need = 0;
        rc = sb_rt_tok_encode(m->tok, o.prompt, len, sb_rt_tok_add_bos(m->tok), NULL, 0, &need);
        prompt = malloc((need ? need : 1) * sizeof *prompt);
        if (rc != SB_ERR_RANGE && rc != SB_OK)
            need = 0;
        if (!prompt || sb_rt_tok_encode(m->tok, o.prompt, len, sb_rt_tok_add_bos(m->tok),
                                        prompt, need, &n_prompt) != SB_OK || !n_prompt) {
            fprintf(stderr, "snapbank run: the prompt could not be tokenized\n");
            free(prompt);
            sb_rt_model_free(m);
            return 1;
        }
    }
    for (size_t i = 0; i < n_prompt; i++)
        if (prompt[i] >= hp->n_vocab) {
            fprintf(stderr, "snapbank run: token id %" PRIu32 " is not below the vocabulary "
                    "size %" PRIu32 "\n", prompt[i], hp->n_vocab);
            free(prompt);
            sb_rt_model_free(m);
            return 1;
        }
    size_t total = n_prompt + o.n_gen;
    if (total > hp->n_ctx) {
        fprintf(stderr, "snapbank run: %zu prompt + %" PRIu64 " generated tokens exceed the "
                "model's context of %" PRIu32 "\n", n_prompt, o.n_gen, hp->n_ctx);
        free(prompt);
        sb_rt_model_free(m);
        return 1;
    }

    /* A RAM-only bank holding the KV pages. */
    uint32_t *bpt = malloc(2 * hp->n_layers * sizeof *bpt);
    sb_layout layout;
    sb_config cfg;
    sb_config_default(&cfg);
    sb_store *st = NULL;
    sb_ns *ns = NULL;
    sb_rt_kv kv = { 0 };
    sb_rt_ctx *ctx = NULL;
    sb_rt_sampler smp = { 0 };
    float *logits = malloc((size_t)hp->n_vocab * sizeof *logits);
    uint64_t kv_bytes = (uint64_t)(total + o.page_tokens) * 2 * hp->n_layers *
                        sb_rt_model_kv_dim(m) * 2;
    cfg.ram_bytes = kv_bytes + (kv_bytes / 4) + (64ull << 20);
    cfg.max_seq_tokens = hp->n_ctx;
    sb_rt_sampling so = { o.temp, (uint32_t)o.top_k, o.top_p, o.seed };
    const char *what = "out of memory";
    int ok = 0;
    if (!bpt || !logits)
        goto out;
    what = "the KV layout";
    if ((rc = sb_rt_kv_layout(m, (uint32_t)o.page_tokens, bpt, &layout)) != SB_OK)
        goto out;
    what = "the bank";
    if ((rc = sb_store_open(&cfg, &st)) != SB_OK ||
        (rc = sb_ns_open(st, &layout, NULL, 0, &ns)) != SB_OK ||
        (rc = sb_rt_kv_init(&kv, m, ns)) != SB_OK)
        goto out;
    what = "the forward context";
    if ((rc = sb_rt_ctx_new(m, (unsigned)o.threads, (uint32_t)o.batch, &ctx)) != SB_OK ||
        (rc = sb_rt_sampler_init(&smp, &so, hp->n_vocab)) != SB_OK)
        goto out;

    fprintf(stderr, "model: %s (%s, %u layers, dim %u, %u heads / %u KV heads, vocab %u), "
            "loaded in %.3f s; %u threads, %s kernels\n", o.model,
            hp->arch == SB_RT_ARCH_QWEN2 ? "qwen2" : "llama", hp->n_layers, hp->dim,
            hp->n_heads, hp->n_kv_heads, hp->n_vocab, t_load, sb_rt_ctx_threads(ctx),
            sb_rt_kernels_best()->name);
    what = "the prefill";
    t0 = now_s();
    if ((rc = sb_rt_forward(ctx, &kv, prompt, n_prompt, SB_RT_LOGITS_LAST, logits)) != SB_OK)
        goto out;
    double t_prefill = now_s() - t0;
    if (o.logits_out) {
        FILE *f = fopen(o.logits_out, "wb");
        if (!f || fwrite(logits, sizeof *logits, hp->n_vocab, f) != hp->n_vocab ||
            fclose(f) != 0) {
            fprintf(stderr, "snapbank run: %s: cannot write the logits: %s\n", o.logits_out,
                    strerror(errno));
            goto out_quiet;
        }
    }
    what = "the decode";
    uint32_t prev = prompt[n_prompt - 1];
    uint64_t n_out = 0;
    t0 = now_s();
    for (; n_out < o.n_gen; n_out++) {
        uint32_t id = sb_rt_sample(&smp, logits);
        emit(m, &o, prev, id, n_out == 0);
        prev = id;
        if (o.stop_eos && m->tok && id == sb_rt_tok_eos(m->tok)) {
            n_out++;
            break;
        }
        if (n_out + 1 < o.n_gen &&
            (rc = sb_rt_forward(ctx, &kv, &id, 1, SB_RT_LOGITS_LAST, logits)) != SB_OK)
            goto out;
    }
    double t_decode = now_s() - t0;
    printf("\n");
    fprintf(stderr, "prefill: %zu tokens in %.3f s (%.1f tokens/s)\n", n_prompt, t_prefill,
            (double)n_prompt / t_prefill);
    if (n_out > 1)
        fprintf(stderr, "decode: %" PRIu64 " tokens in %.3f s (%.1f tokens/s)\n", n_out - 1,
                t_decode, (double)(n_out - 1) / t_decode);
    ok = 1;
out:
    if (!ok)
        fprintf(stderr, "snapbank run: %s: %s: %s\n", o.model, what, sb_strerror(rc));
out_quiet:
    sb_rt_sampler_fini(&smp);
    sb_rt_ctx_free(ctx);
    sb_rt_kv_fini(&kv);
    sb_ns_close(ns);
    sb_store_close(st);
    free(logits);
    free(bpt);
    free(prompt);
    sb_rt_model_free(m);
    return ok ? 0 : 1;
}
