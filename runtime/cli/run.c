/* run.c -- `snapbank run MODEL`: one turn of a session over the bank:
 * restore the prompt's longest stored prefix, prefill the rest into a KV
 * cache of snapbank pages, generate tokens, and report where the prefix
 * came from and the speeds. Exit status: 0 success, 1 failure (a message
 * names the file and the fault), 2 usage error. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli/rtcli.h"
#ifdef SB_CLI_LLAMA
#include "cli/llama_engine.h"
#endif
#include "kernels/kernels.h"
#include "text/tokenizer.h"

static void run_usage(FILE *f)
{
    fprintf(f,
            "usage: snapbank run MODEL (--prompt TEXT | --prompt-tokens 1,2,3) [options]\n\n"
            "Runs a llama-family GGUF model (llama, qwen2, qwen3; weights F32, F16, BF16,\n"
            "Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, or mixes like Q4_K_M)\n"
            "on the CPU. Its KV cache lives in snapbank pages: the longest prefix of the\n"
            "prompt the bank holds is restored instead of recomputed (from RAM, or from\n"
            "disk with --bank-dir), and the prompt and answer are stored for next time.\n"
            "Prints the generated text on stdout; the cache_mode (cold, warm_prefix,\n"
            "ssd, remote), cached tokens, time to first token and speeds on stderr.\n"
            "With --engine llama.cpp, llama.cpp computes (any model it loads whose state\n"
            "the llama.cpp connector accounts for) and the bank keeps its KV the same way.\n\n"
            "options:\n"
            "  --prompt TEXT          the prompt, tokenized with the model's vocabulary\n"
            "                         (BOS first when the model asks for it and the\n"
            "                         session is new)\n"
            "  --prompt-tokens LIST   the prompt as token ids, comma-separated, used as given\n"
            "  --logits-out FILE      write the float32 logits of the last prompt\n"
            "                         position (n_vocab little-endian floats) to FILE\n"
            "%s%s\n"
            "exit status: 0 success, 1 failure, 2 usage.\n",
            rt_opts_help, rt_shared_help);
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
    rt_opts rt;
    const char *prompt, *prompt_tokens, *logits_out;
} run_opts;

/* run's own options (rt_args_fn). */
static int run_arg(void *ctx, const char *a, const char *v)
{
    run_opts *o = ctx;
    const char **slot = !strcmp(a, "--prompt")          ? &o->prompt
                        : !strcmp(a, "--prompt-tokens") ? &o->prompt_tokens
                        : !strcmp(a, "--logits-out")    ? &o->logits_out
                                                        : NULL;
    if (!slot || !v)
        return 0;
    *slot = v;
    return 2;
}

static int parse(int argc, char **argv, run_opts *o)
{
    memset(o, 0, sizeof *o);
    int rc = rt_parse_args(&o->rt, argc, argv, "run", run_usage, run_arg, o);
    if (rc)
        return rc;
    if (!o->rt.model || (!o->prompt == !o->prompt_tokens)) {
        fprintf(stderr, "snapbank run: need MODEL and exactly one of --prompt, "
                        "--prompt-tokens\n\n");
        run_usage(stderr);
        return 2;
    }
    return rt_opts_check(&o->rt, "run");
}

typedef struct emitter {
    const sb_rt_model *m;
    int ids, first;
    uint32_t prev;
} emitter;

/* Print a generated token as text (or as its id). */
static void emit(void *ctx, uint32_t id)
{
    emitter *e = ctx;
    if (e->ids || !e->m->tok) {
        printf(e->first ? "%" PRIu32 : ",%" PRIu32, id);
    } else {
        char buf[256];
        size_t n = 0;
        if (sb_rt_tok_piece(e->m->tok, id, e->prev, buf, sizeof buf, &n) == SB_OK)
            fwrite(buf, 1, n, stdout);
    }
    e->first = 0;
    e->prev = id;
    fflush(stdout);
}

#ifdef SB_CLI_LLAMA
typedef struct llama_emitter {
    const rt_llama *L;
    int ids, first;
} llama_emitter;

/* Print a generated token as text (or as its id), llama.cpp's pieces. */
static void llama_emit(void *ctx, uint32_t id)
{
    llama_emitter *e = ctx;
    if (e->ids) {
        printf(e->first ? "%" PRIu32 : ",%" PRIu32, id);
    } else {
        char buf[256];
        size_t n;
        rt_llama_piece(e->L, id, buf, sizeof buf, &n);
        fwrite(buf, 1, n, stdout);
    }
    e->first = 0;
    fflush(stdout);
}

/* A turn's end, either engine: the logits to --logits-out (when asked),
 * the report and the speeds on stderr. Returns 0, or 1 (the logits could
 * not be written; said on stderr). */
static int finish(const char *logits_out, const float *logits, uint32_t n_vocab,
                  const sb_rt_turn *r)
{
    if (logits_out) {
        FILE *f = fopen(logits_out, "wb");
        int bad = !f || fwrite(logits, sizeof *logits, n_vocab, f) != n_vocab;
        if ((f && fclose(f) != 0) || bad) {
            fprintf(stderr, "snapbank run: %s: cannot write the logits: %s\n", logits_out,
                    strerror(errno));
            return 1;
        }
    }
    rt_report(stderr, "turn:", r);
    fprintf(stderr, "prefill: %zu tokens in %.3f s (%.1f tokens/s)\n", r->prefill_tokens,
            r->prefill_s, r->prefill_tok_s);
    if (r->gen_tokens > 1)
        fprintf(stderr, "decode: %zu tokens in %.3f s (%.1f tokens/s)\n", r->gen_tokens,
                r->decode_s, r->decode_tok_s);
    return 0;
}

/* `run --engine llama.cpp`: the same turn and report, llama.cpp computing. */
static int run_llama(const run_opts *o)
{
    rt_llama *L;
    if (rt_llama_open(&o->rt, "run", &L))
        return 1;
    uint32_t *prompt = NULL;
    size_t n_prompt = 0;
    float *logits = NULL;
    int ret = 1;
    if (o->prompt_tokens) {
        n_prompt = parse_tokens(o->prompt_tokens, &prompt);
        if (!n_prompt) {
            fprintf(stderr, "snapbank run: --prompt-tokens: expected ids like 1,2,3\n");
            ret = 2;
            goto out;
        }
    } else if (rt_llama_tokenize(L, o->prompt, rt_llama_n_history(L) == 0, &prompt, &n_prompt,
                                 "run")) {
        goto out;
    }
    if (rt_llama_check_ids(L, prompt, n_prompt, "run"))
        goto out;
    if (o->logits_out && !(logits = malloc((size_t)rt_llama_n_vocab(L) * sizeof *logits)))
        goto out;
    rt_llama_banner(L, "model");
    llama_emitter em = { L, o->rt.print_ids, 1 };
    rt_llama_gen g = { o->rt.n_gen, o->rt.stop_eos, llama_emit, &em, logits };
    sb_rt_turn r;
    int rc = rt_llama_turn(L, prompt, n_prompt, &g, &r, "run");
    printf("\n");
    if (rc)
        goto out;
    if (finish(o->logits_out, logits, rt_llama_n_vocab(L), &r))
        goto out;
    ret = rt_llama_save_session(L, "run");
out:
    free(prompt);
    free(logits);
    if (rt_llama_close(L, "run") && !ret)
        ret = 1;
    return ret;
}
#endif

int sb_cli_run(int argc, char **argv)
{
    run_opts o;
    int prc = parse(argc, argv, &o);
    if (prc)
        return prc == 1 ? 0 : prc;
#ifdef SB_CLI_LLAMA
    if (o.rt.engine == RT_ENGINE_LLAMA)
        return run_llama(&o);
#endif
    rt_env e;
    if (rt_env_open(&e, &o.rt, "run"))
        return 1;
    const sb_rt_hparams *hp = &e.m->hp;
    size_t n_hist = 0;
    sb_rt_session_tokens(e.s, &n_hist);
    uint32_t *prompt = NULL;
    size_t n_prompt = 0;
    float *logits = NULL;
    int ret = 1;
    if (o.prompt_tokens) {
        n_prompt = parse_tokens(o.prompt_tokens, &prompt);
        if (!n_prompt) {
            fprintf(stderr, "snapbank run: --prompt-tokens: expected ids like 1,2,3\n");
            ret = 2;
            goto out;
        }
    } else if (rt_tokenize(e.m, o.prompt, n_hist == 0, &prompt, &n_prompt, "run")) {
        goto out;
    }
    for (size_t i = 0; i < n_prompt; i++)
        if (prompt[i] >= hp->n_vocab) {
            fprintf(stderr, "snapbank run: token id %" PRIu32 " is not below the vocabulary "
                    "size %" PRIu32 "\n", prompt[i], hp->n_vocab);
            goto out;
        }
    if (n_hist + n_prompt + o.rt.n_gen > hp->n_ctx) {
        fprintf(stderr, "snapbank run: %zu session + %zu prompt + %" PRIu64 " generated "
                "tokens exceed the model's context of %" PRIu32 "\n", n_hist, n_prompt,
                o.rt.n_gen, hp->n_ctx);
        goto out;
    }
    if (o.logits_out && !(logits = malloc((size_t)hp->n_vocab * sizeof *logits)))
        goto out;
    fprintf(stderr, "model: %s (%s, %u layers, dim %u, %u heads / %u KV heads, vocab %u), "
            "loaded in %.3f s; %u threads, %s kernels; bank %s%s%s\n", o.rt.model,
            sb_rt_arch_name(hp->arch), hp->n_layers, hp->dim,
            hp->n_heads, hp->n_kv_heads, hp->n_vocab, e.t_load, sb_rt_ctx_threads(e.ctx),
            sb_rt_kernels_best()->name, o.rt.bank_dir ? o.rt.bank_dir : "in RAM",
            e.resumed ? "; resumed session " : "", e.resumed ? o.rt.session : "");
    emitter em = { e.m, o.rt.print_ids, 1, n_prompt ? prompt[n_prompt - 1] : 0 };
    uint32_t stop = o.rt.stop_eos && e.m->tok ? sb_rt_tok_eos(e.m->tok) : UINT32_MAX;
    sb_rt_gen g = { o.rt.n_gen, &e.smp, stop, emit, &em, logits };
    sb_rt_turn r;
    int rc = sb_rt_session_turn(e.s, prompt, n_prompt, &g, &r);
    printf("\n");
    if (rc != SB_OK) {
        fprintf(stderr, "snapbank run: %s: the turn failed: %s\n", o.rt.model, sb_strerror(rc));
        goto out;
    }
    if (finish(o.logits_out, logits, hp->n_vocab, &r))
        goto out;
    ret = rt_env_save(&e, "run");
out:
    free(prompt);
    free(logits);
    if (rt_env_close(&e, "run", &o.rt) && !ret)
        ret = 1;
    return ret;
}
