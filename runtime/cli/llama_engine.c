/* llama_engine.c -- `snapbank run` / `snapbank chat` with --engine
 * llama.cpp: libllama computes, the bank keeps its state through the
 * llama.cpp connector (llama_engine.h says how a turn goes). */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "llama.h"
#include "snapbank_llama.h"

#include "cli/llama_engine.h"
#include "llama/llama_host.h"
#include "model/boundary.h"
#include "session/session.h"
#include "session/sfile.h"

_Static_assert(sizeof(llama_token) == sizeof(uint32_t), "token ids are passed as uint32_t");

#define SEQ 0     /* the conversation's sequence */
#define SCRATCH 1 /* the connector's, for saves */

struct rt_llama {
    const rt_opts *o;               /* borrowed from the caller */
    struct llama_model *model;
    const struct llama_vocab *vocab; /* the model's */
    struct llama_context *ctx;
    struct llama_context_params cp; /* what ctx was made with */
    struct llama_sampler *smp;      /* a chain: greedy, or top-k/top-p/temp/dist */
    const char *tmpl;               /* the model's chat template (the model's
                                       string), NULL: the plain format */
    sb_store *st;
    sb_llama *sl;
    sb_llama_info info;             /* identity, bytes_per_token, page_tokens,
                                       point_bytes (a hybrid model's) */
    size_t grid, keep;              /* a hybrid's boundary policy (session.h) */
    llama_token *hist;              /* (n_hist) the conversation's tokens */
    size_t n_hist;
    int resumed;                    /* the session file held tokens */
    int32_t n_vocab;
    uint32_t n_ctx;
    double t_load, t_open;          /* seconds: the model, the store */
    char sess_path[4096];           /* "" without --session */
    char store_dir[4096];           /* "" without --bank-dir */
};

static struct llama_sampler *make_sampler(const rt_opts *o)
{
    struct llama_sampler_chain_params sp = llama_sampler_chain_default_params();
    sp.no_perf = true;
    struct llama_sampler *c = llama_sampler_chain_init(sp);
    if (!c)
        return NULL;
    if (o->temp <= 0) {
        llama_sampler_chain_add(c, llama_sampler_init_greedy());
        return c;
    }
    if (o->top_k)
        llama_sampler_chain_add(c, llama_sampler_init_top_k((int32_t)(o->top_k > INT32_MAX
                                                                          ? INT32_MAX
                                                                          : o->top_k)));
    if (o->top_p < 1)
        llama_sampler_chain_add(c, llama_sampler_init_top_p(o->top_p, 1));
    llama_sampler_chain_add(c, llama_sampler_init_temp(o->temp));
    llama_sampler_chain_add(c, llama_sampler_init_dist((uint32_t)o->seed));
    return c;
}

/* msgs rendered by the template into a malloc'd string. NULL: the template
 * is not one llama.cpp knows, or no memory. */
static char *render(const char *tmpl, const struct llama_chat_message *msgs, size_t n, bool add_ass)
{
    int32_t cap = 256;
    for (size_t i = 0; i < n; i++)
        cap += 2 * (int32_t)(strlen(msgs[i].role) + strlen(msgs[i].content));
    for (int tries = 0; tries < 2; tries++) {
        char *buf = malloc((size_t)cap + 1);
        if (!buf)
            return NULL;
        int32_t got = llama_chat_apply_template(tmpl, msgs, n, add_ass, buf, cap);
        if (got >= 0 && got <= cap) {
            buf[got] = 0;
            return buf;
        }
        free(buf);
        if (got < 0)
            return NULL;
        cap = got;
    }
    return NULL;
}

int rt_llama_open(const rt_opts *o, const char *cmd, rt_llama **out)
{
    *out = NULL;
    rt_llama *L = calloc(1, sizeof *L);
    if (!L) {
        fprintf(stderr, "snapbank %s: out of memory\n", cmd);
        return 1;
    }
    L->o = o;
    sb_rt_llama_init();
    if (!(L->model = sb_rt_llama_load_model(o->model, -1, &L->t_load))) {
        fprintf(stderr, "snapbank %s: %s: llama.cpp could not load the model\n", cmd, o->model);
        goto fail;
    }
    L->vocab = llama_model_get_vocab(L->model);
    L->n_vocab = llama_vocab_n_tokens(L->vocab);
    /* the conversation and the connector's scratch, in one cache: the
     * scratch copy shares its cells */
    L->cp = sb_rt_llama_cparams(L->model, 0, (uint32_t)o->batch, o->threads, 2, true);
    if (!(L->ctx = llama_init_from_model(L->model, L->cp))) {
        fprintf(stderr, "snapbank %s: %s: llama.cpp could not make a context of %u tokens\n",
                cmd, o->model, L->cp.n_ctx);
        goto fail;
    }
    L->n_ctx = llama_n_ctx(L->ctx);
    if (!(L->smp = make_sampler(o))) {
        fprintf(stderr, "snapbank %s: out of memory\n", cmd);
        goto fail;
    }
    /* The template, when llama.cpp can render it (else the plain format). */
    const char *tmpl = llama_model_chat_template(L->model, NULL);
    if (tmpl) {
        struct llama_chat_message m = { "user", "x" };
        char *r = render(tmpl, &m, 1, true);
        L->tmpl = r ? tmpl : NULL;
        free(r);
    }

    rt_auth auth;
    sb_config cfg;
    if (rt_bank_paths(o, ".llama.session", L->store_dir, L->sess_path, cmd) ||
        rt_bank_config(o, L->n_ctx, L->store_dir, &cfg, &auth, cmd))
        goto fail;
    double t0 = sb_rt_now_s();
    int rc = sb_store_open(&cfg, &L->st);
    memset(&auth, 0, sizeof auth); /* the store keeps its own copy */
    if (rc != SB_OK) {
        fprintf(stderr, "snapbank %s: %s: the bank: %s\n", cmd,
                o->bank_dir ? o->bank_dir : o->model, sb_strerror(rc));
        if (rc == SB_ERR_SUPERBLOCK)
            fprintf(stderr, "snapbank %s: to salvage it: snapbank fsck --repair %s\n", cmd,
                    L->store_dir);
        goto fail;
    }
    L->t_open = sb_rt_now_s() - t0;
    sb_llama_config lc;
    sb_llama_config_default(&lc);
    lc.model_path = o->model;
    lc.cparams = &L->cp;
    lc.scope = o->scope;
    lc.scope_bytes = strlen(o->scope);
    lc.page_tokens = (uint32_t)o->page_tokens;
    lc.probe_seq = SEQ;
    lc.scratch_seq = SCRATCH;
    char err[256];
    if ((rc = sb_llama_attach(L->st, L->ctx, &lc, &L->sl, err, sizeof err)) != SB_OK) {
        fprintf(stderr, "snapbank %s: %s: the llama.cpp connector: %s (%s)\n", cmd, o->model,
                err, sb_llama_strerror(rc));
        goto fail;
    }
    sb_llama_get_info(L->sl, &L->info);
    if (L->info.point_bytes) {
        L->grid = o->boundary_grid;
        L->keep = o->boundary_kib ? (o->boundary_kib << 10) / L->info.point_bytes
                                  : SB_RT_BOUNDARY_KEEP;
    }
    if (L->sess_path[0]) {
        sb_rt_sfile f;
        sb_rt_err e = { 0 };
        rc = sb_rt_sfile_read(L->sess_path, L->info.identity, &f, &e);
        if (rc == SB_OK) {
            L->n_hist = f.n_tokens;
            L->hist = malloc((f.n_tokens ? f.n_tokens : 1) * sizeof *L->hist);
            for (size_t i = 0; L->hist && i < f.n_tokens; i++)
                L->hist[i] = (llama_token)f.tokens[i];
            sb_rt_sfile_free(&f);
            if (!L->hist) {
                fprintf(stderr, "snapbank %s: out of memory\n", cmd);
                goto fail;
            }
            L->resumed = L->n_hist > 0;
            if (rt_llama_check_ids(L, (const uint32_t *)L->hist, L->n_hist, cmd))
                goto fail;
        } else if (rc != SB_ERR_NOT_FOUND) {
            fprintf(stderr, "snapbank %s: %s\n", cmd, e.msg);
            goto fail;
        }
    }
    *out = L;
    return 0;
fail:
    rt_llama_close(L, NULL);
    return 1;
}

int rt_llama_close(rt_llama *L, const char *cmd)
{
    if (!L)
        return 0;
    sb_llama_detach(L->sl);
    /* Publish what waits for the shared tier before it goes (close drops it). */
    if (L->st && sb_store_has_shared(L->st))
        sb_store_flush(L->st);
    int rc = sb_store_close(L->st);
    if (rc != SB_OK && cmd)
        fprintf(stderr, "snapbank %s: %s: closing the bank: %s (its last writes may be lost)\n",
                cmd, L->o->bank_dir ? L->o->bank_dir : "(RAM)", sb_strerror(rc));
    if (L->smp)
        llama_sampler_free(L->smp);
    if (L->ctx)
        llama_free(L->ctx);
    if (L->model)
        llama_model_free(L->model);
    free(L->hist);
    free(L);
    return rc != SB_OK;
}

void rt_llama_banner(const rt_llama *L, const char *cmd)
{
    char desc[128];
    if (llama_model_desc(L->model, desc, sizeof desc) < 0)
        snprintf(desc, sizeof desc, "?");
    fprintf(stderr, "%s: %s (llama.cpp: %s, %d layers, context %u, vocab %d), loaded in %.3f s; "
            "%d threads; bank %s (opened in %.3f s)%s%s\n",
            cmd, L->o->model, desc, llama_model_n_layer(L->model), L->n_ctx, L->n_vocab,
            L->t_load, L->cp.n_threads, L->o->bank_dir ? L->o->bank_dir : "in RAM", L->t_open,
            L->resumed ? "; resumed session " : "", L->resumed ? L->o->session : "");
}

size_t rt_llama_n_history(const rt_llama *L)
{
    return L->n_hist;
}

uint32_t rt_llama_n_vocab(const rt_llama *L)
{
    return (uint32_t)L->n_vocab;
}

uint32_t rt_llama_n_ctx(const rt_llama *L)
{
    return L->n_ctx;
}

/* text's tokens (add_special: BOS as the model asks) into a malloc'd
 * array. Returns 0, or 1 (printed). */
static int tokenize(const rt_llama *L, const char *text, bool add_special, bool parse_special,
                    uint32_t **out, size_t *n, const char *cmd)
{
    *out = NULL, *n = 0;
    size_t len = strlen(text);
    if (len > INT32_MAX / 2) {
        fprintf(stderr, "snapbank %s: the text is too long to tokenize\n", cmd);
        return 1;
    }
    int32_t need = -llama_tokenize(L->vocab, text, (int32_t)len, NULL, 0, add_special,
                                   parse_special);
    if (need < 0) /* fits in 0: no tokens */
        need = 0;
    llama_token *t = malloc(((size_t)need + 1) * sizeof *t);
    if (!t) {
        fprintf(stderr, "snapbank %s: out of memory\n", cmd);
        return 1;
    }
    int32_t got = need ? llama_tokenize(L->vocab, text, (int32_t)len, t, need, add_special,
                                        parse_special)
                       : 0;
    if (got < 0) {
        fprintf(stderr, "snapbank %s: the text could not be tokenized\n", cmd);
        free(t);
        return 1;
    }
    *out = (uint32_t *)t; /* llama_token ids are >= 0: the same bits */
    *n = (size_t)got;
    return 0;
}

int rt_llama_tokenize(const rt_llama *L, const char *text, bool bos, uint32_t **out, size_t *n,
                      const char *cmd)
{
    return tokenize(L, text, bos, true, out, n, cmd);
}

int rt_llama_check_ids(const rt_llama *L, const uint32_t *t, size_t n, const char *cmd)
{
    for (size_t i = 0; i < n; i++)
        if (t[i] >= (uint32_t)L->n_vocab) {
            fprintf(stderr, "snapbank %s: token id %" PRIu32 " is not below the vocabulary "
                    "size %d\n", cmd, t[i], L->n_vocab);
            return 1;
        }
    return 0;
}

/* *in, *n grow by text's tokens. Returns 0, or 1 (printed). */
static int append_text(const rt_llama *L, const char *text, bool add_special, bool parse_special,
                       uint32_t **in, size_t *n, const char *cmd)
{
    uint32_t *t;
    size_t k;
    if (tokenize(L, text, add_special, parse_special, &t, &k, cmd))
        return 1;
    uint32_t *nb = realloc(*in, (*n + k + 1) * sizeof *nb);
    if (!nb) {
        free(t);
        fprintf(stderr, "snapbank %s: out of memory\n", cmd);
        return 1;
    }
    memcpy(nb + *n, t, k * sizeof *t);
    *in = nb, *n += k;
    free(t);
    return 0;
}

/* The template's text after an answer: its end of turn, the user's
 * message msg and the assistant's header. It renders a stand-in turn
 * ("x" asked, "y" answered) three ways: r1 = [x] with the assistant's
 * header, r2 = [x, y] closed, r3 = [x, y, msg] with the header; when r2
 * is r1 + "y" + CLOSE and r3 is r2 + NEXT, the text is CLOSE + NEXT.
 * NULL: a template whose turns do not render as such a sequence. */
static char *after_answer(const char *tmpl, const char *msg)
{
    struct llama_chat_message m[3] = { { "user", "x" }, { "assistant", "y" }, { "user", msg } };
    char *r1 = render(tmpl, m, 1, true), *r2 = render(tmpl, m, 2, false);
    char *r3 = render(tmpl, m, 3, true), *out = NULL;
    size_t n1 = r1 ? strlen(r1) : 0, n2 = r2 ? strlen(r2) : 0;
    if (r1 && r2 && r3 && n2 > n1 && !strncmp(r2, r1, n1) && r2[n1] == 'y' &&
        !strncmp(r3, r2, n2)) {
        size_t nc = n2 - n1 - 1, nn = strlen(r3) - n2;
        if ((out = malloc(nc + nn + 1))) {
            memcpy(out, r2 + n1 + 1, nc);
            memcpy(out + nc, r3 + n2, nn + 1);
        }
    }
    free(r1), free(r2), free(r3);
    return out;
}

int rt_llama_chat_input(const rt_llama *L, const char *system, const char *msg, uint32_t **in,
                        size_t *n, const char *cmd)
{
    *in = NULL, *n = 0;
    const char *sys = system ? system : "";
    char *text = NULL;
    if (L->tmpl && L->n_hist == 0) {
        struct llama_chat_message m[2] = { { "system", sys }, { "user", msg } };
        text = *sys ? render(L->tmpl, m, 2, true) : render(L->tmpl, m + 1, 1, true);
    } else if (L->tmpl) {
        text = after_answer(L->tmpl, msg);
    }
    int bad;
    if (text) { /* BOS as the model asks, at the start of a session */
        bad = append_text(L, text, L->n_hist == 0, true, in, n, cmd);
        free(text);
    } else { /* the builtin engine's plain format */
        bad = 0;
        if (L->n_hist == 0)
            bad = append_text(L, sys, true, false, in, n, cmd) ||
                  (*sys && append_text(L, "\n\n", false, false, in, n, cmd));
        size_t len = strlen(msg) + 32;
        char *t = malloc(len);
        if (!t) {
            fprintf(stderr, "snapbank %s: out of memory\n", cmd);
            bad = 1;
        } else if (!bad) {
            snprintf(t, len, "\nUser: %s\nAssistant:", msg);
            bad = append_text(L, t, false, false, in, n, cmd);
        }
        free(t);
    }
    if (bad) {
        free(*in);
        *in = NULL, *n = 0;
    }
    return bad;
}

void rt_llama_piece(const rt_llama *L, uint32_t id, char *buf, size_t cap, size_t *n)
{
    int32_t got = llama_token_to_piece(L->vocab, (llama_token)id, buf,
                                       (int32_t)(cap > INT32_MAX ? INT32_MAX : cap), 0, false);
    *n = got > 0 ? (size_t)got : 0;
}

/* Decode t[0, n) at positions pos0.. of SEQ in batches of at most
 * `batch`, logits for the last token only when want_last. Returns 0, or
 * llama_decode's non-zero status. */
static int decode(rt_llama *L, struct llama_batch *b, const llama_token *t, size_t n, size_t pos0,
                  size_t batch, bool want_last)
{
    for (size_t at = 0; at < n;) {
        size_t k = n - at < batch ? n - at : batch;
        for (size_t i = 0; i < k; i++) {
            b->token[i] = t[at + i];
            b->pos[i] = (llama_pos)(pos0 + at + i);
            b->n_seq_id[i] = 1;
            b->seq_id[i][0] = SEQ;
            b->logits[i] = want_last && at + i == n - 1;
        }
        b->n_tokens = (int32_t)k;
        int rc = llama_decode(L->ctx, *b);
        if (rc)
            return rc;
        at += k;
    }
    return 0;
}

int rt_llama_turn(rt_llama *L, const uint32_t *in, size_t n_in, const rt_llama_gen *g,
                  sb_rt_turn *r, const char *cmd)
{
    memset(r, 0, sizeof *r);
    size_t n = L->n_hist + n_in;
    if (n == 0) {
        fprintf(stderr, "snapbank %s: the prompt is empty\n", cmd);
        return 1;
    }
    if (n + g->n_gen > L->n_ctx) {
        fprintf(stderr, "snapbank %s: %zu session + %zu prompt + %" PRIu64 " generated tokens "
                "exceed the context of %u\n", cmd, L->n_hist, n_in, g->n_gen, L->n_ctx);
        return 1;
    }
    /* all: the prompt, then the generated tokens */
    llama_token *all = malloc((n + g->n_gen + 1) * sizeof *all);
    size_t batch = L->o->batch;
    struct llama_batch b = llama_batch_init((int32_t)batch, 0, 1);
    int ret = 1;
    if (!all || !b.token) {
        fprintf(stderr, "snapbank %s: out of memory\n", cmd);
        goto out;
    }
    if (L->n_hist)
        memcpy(all, L->hist, L->n_hist * sizeof *all);
    for (size_t i = 0; i < n_in; i++)
        all[L->n_hist + i] = (llama_token)in[i];

    /* 1. restore: an empty sequence, then the bank's longest prefix of all
     *    but the last prompt token. */
    double t0 = sb_rt_now_s();
    llama_memory_seq_rm(llama_get_memory(L->ctx), SEQ, -1, -1);
    sb_llama_restore_info ri;
    int rc = sb_llama_restore(L->sl, SEQ, all, n, n - 1, &ri);
    if (rc != SB_OK) {
        fprintf(stderr, "snapbank %s: restoring from the bank: %s\n", cmd,
                sb_llama_strerror(rc));
        goto out;
    }
    double t1 = sb_rt_now_s();
    /* 2. prefill the rest, the last prompt token alone (llama_engine.h); a
     *    hybrid model's stops at its boundaries and saves there. */
    size_t k = ri.n_restored, at = k;
    size_t marks[68], n_marks = 0;
    if (L->info.point_bytes) {
        n_marks = sb_rt_boundary_marks(L->grid, L->keep, k, n - 1, marks);
        if (n - 1 > k)
            marks[n_marks++] = n - 1; /* the end of the prompt */
    }
    for (size_t i = 0; i <= n_marks; i++) {
        size_t to = i < n_marks ? marks[i] : n - 1;
        if ((rc = decode(L, &b, all + at, to - at, at, batch, false)) != 0)
            break;
        at = to;
        if (i == n_marks)
            break;
        sb_llama_save_info si;
        int src = sb_llama_save(L->sl, SEQ, all, to, &si);
        if (src != SB_OK && src != SB_ERR_BUDGET) {
            fprintf(stderr, "snapbank %s: saving the boundary at %zu: %s\n", cmd, to,
                    sb_llama_strerror(src));
            goto out;
        }
        r->boundaries_written += si.outcome.points_new;
    }
    if (rc == 0)
        rc = decode(L, &b, all + n - 1, 1, n - 1, 1, true);
    if (rc != 0) {
        fprintf(stderr, "snapbank %s: llama_decode failed (%d) in the prompt\n", cmd, rc);
        goto out;
    }
    double t2 = sb_rt_now_s(), t3 = t2;
    if (g->logits)
        memcpy(g->logits, llama_get_logits_ith(L->ctx, -1), (size_t)L->n_vocab * sizeof *g->logits);
    /* 3. generate: sample, keep, decode it unless it is the last. */
    size_t n_kept = 0, n_decoded = 0;
    llama_sampler_reset(L->smp);
    for (uint64_t i = 0; i < g->n_gen; i++) {
        llama_token id = llama_sampler_sample(L->smp, L->ctx, -1);
        if (i == 0)
            t3 = sb_rt_now_s();
        if (g->stop_eog && llama_vocab_is_eog(L->vocab, id))
            break;
        all[n + n_kept++] = id;
        if (g->emit)
            g->emit(g->emit_ctx, (uint32_t)id);
        if (i + 1 == g->n_gen)
            break;
        if ((rc = decode(L, &b, &id, 1, n + n_decoded, 1, true)) != 0) {
            fprintf(stderr, "snapbank %s: llama_decode failed (%d) generating\n", cmd, rc);
            goto out;
        }
        n_decoded++;
    }
    double t4 = sb_rt_now_s();
    /* 4. save what the sequence holds: the prompt and the decoded answer. */
    sb_llama_save_info si;
    memset(&si, 0, sizeof si);
    r->commit_rc = sb_llama_save(L->sl, SEQ, all, n + n_decoded, &si);
    r->disk = si.outcome;
    r->boundaries_written += si.outcome.points_new;
    /* The history: the prompt and every kept token (the last one sampled
     * is decoded by the next turn). */
    llama_token *h = realloc(L->hist, (n + n_kept) * sizeof *h);
    if (!h) {
        fprintf(stderr, "snapbank %s: out of memory\n", cmd);
        goto out;
    }
    memcpy(h, all, (n + n_kept) * sizeof *h);
    L->hist = h, L->n_hist = n + n_kept;

    r->cache_mode = ri.tokens_remote ? SB_RT_CACHE_REMOTE
                    : ri.tokens_disk ? SB_RT_CACHE_SSD
                    : ri.n_restored  ? SB_RT_CACHE_WARM
                                     : SB_RT_CACHE_COLD;
    r->prompt_tokens = n;
    r->cached_tokens = r->matched_tokens = ri.n_restored;
    r->cached_disk_tokens = ri.tokens_disk;
    r->cached_shared_tokens = ri.tokens_remote;
    r->miss = ri.miss;
    r->prefill_tokens = n - ri.n_restored;
    if (L->info.point_bytes) {
        r->boundary_tokens = ri.n_restored;
        r->recomputed_tokens = ri.n_matched - ri.n_restored;
    }
    r->gen_tokens = n_kept;
    r->restore_s = t1 - t0;
    /* Bytes of KV read from disk: the connector counts tokens, so this is
     * tokens x bytes per token (the builtin counts whole pages). */
    r->restore_bytes = ri.tokens_disk * L->info.bytes_per_token;
    r->bank_bytes = ri.n_restored * L->info.bytes_per_token +
                    (ri.n_restored ? L->info.point_bytes : 0);
    r->prefill_s = t2 - t1;
    r->ttft_s = (g->n_gen ? t3 : t2) - t0;
    r->decode_s = t4 - t3;
    r->prefill_tok_s = r->prefill_s > 0 ? (double)r->prefill_tokens / r->prefill_s : 0;
    r->decode_tok_s = n_kept && r->decode_s > 0 ? (double)n_kept / r->decode_s : 0;
    ret = 0;
out:
    llama_batch_free(b);
    free(all);
    return ret;
}

int rt_llama_save_session(rt_llama *L, const char *cmd)
{
    if (!L->sess_path[0])
        return 0;
    sb_rt_sfile f;
    memset(&f, 0, sizeof f);
    memcpy(f.model_id, L->info.identity, sizeof f.model_id);
    f.tokens = (uint32_t *)L->hist; /* ids >= 0: the same bits */
    f.n_tokens = L->n_hist;
    uint8_t *bytes = NULL;
    size_t nb = 0;
    sb_rt_err err = { 0 };
    int rc = sb_rt_sfile_encode(&f, &bytes, &nb);
    if (rc == SB_OK)
        rc = sb_rt_sfile_write(L->sess_path, bytes, nb, &err);
    free(bytes);
    if (rc != SB_OK) {
        fprintf(stderr, "snapbank %s: %s\n", cmd, err.msg[0] ? err.msg : sb_strerror(rc));
        return 1;
    }
    return 0;
}
