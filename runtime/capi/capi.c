/* capi.c -- the flat C API for bindings (snapbank_rt.h). */
#include "snapbank_rt.h"
#include "capi/stats_fields.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch/batch.h"
#include "model/forward.h"
#include "model/kv.h"
#include "model/model.h"
#include "model/sample.h"
#include "session/session.h"
#include "text/tokenizer.h"

static void put_err(char *err, size_t cap, const char *msg)
{
    if (err && cap)
        snprintf(err, cap, "%s", msg);
}

int sbrt_model_load(const char *path, sb_rt_model **out, char *err, size_t cap)
{
    sb_rt_err e = { 0 };
    if (!out)
        return SB_ERR_INVAL;
    *out = NULL;
    if (!path) {
        put_err(err, cap, "no path");
        return SB_ERR_INVAL;
    }
    int rc = sb_rt_model_load(path, out, &e);
    if (rc != SB_OK)
        put_err(err, cap, e.msg);
    return rc;
}

void sbrt_model_free(sb_rt_model *m)
{
    sb_rt_model_free(m);
}

uint32_t sbrt_model_n_vocab(const sb_rt_model *m)
{
    return m ? m->hp.n_vocab : 0;
}

uint32_t sbrt_model_n_ctx(const sb_rt_model *m)
{
    return m ? m->hp.n_ctx : 0;
}

uint32_t sbrt_model_eos(const sb_rt_model *m)
{
    return m && m->tok ? sb_rt_tok_eos(m->tok) : UINT32_MAX;
}

int sbrt_tokenize(const sb_rt_model *m, const char *text, size_t len, int bos, uint32_t *ids,
                  size_t cap, size_t *n)
{
    if (!m || (len && !text) || !n)
        return SB_ERR_INVAL;
    if (!m->tok)
        return SB_ERR_UNSUPPORTED;
    return sb_rt_tok_encode(m->tok, text, len, bos && sb_rt_tok_add_bos(m->tok), ids, cap, n);
}

int sbrt_detokenize(const sb_rt_model *m, const uint32_t *ids, size_t n, char *buf, size_t cap,
                    size_t *len)
{
    if (!m || (n && !ids) || !len)
        return SB_ERR_INVAL;
    if (!m->tok)
        return SB_ERR_UNSUPPORTED;
    return sb_rt_tok_decode(m->tok, ids, n, buf, cap, len);
}

struct sbrt_chat {
    const sb_rt_model *m;
    sb_ns *ns;
    sb_rt_ctx *ctx;
    sb_rt_session *s;
    uint32_t bpt[2 * SB_RT_MAX_LAYERS];
};

void sbrt_chat_close(sbrt_chat *c)
{
    if (!c)
        return;
    sb_rt_session_free(c->s);
    sb_rt_ctx_free(c->ctx);
    sb_ns_close(c->ns);
    free(c);
}

int sbrt_chat_open(sb_store *st, const sb_rt_model *m, const void *scope, size_t scope_len,
                   unsigned threads, uint32_t page_tokens, sbrt_chat **out)
{
    if (!out)
        return SB_ERR_INVAL;
    *out = NULL;
    if (!st || !m || (scope_len && !scope))
        return SB_ERR_INVAL;
    sbrt_chat *c = calloc(1, sizeof *c);
    if (!c)
        return SB_ERR_NOMEM;
    c->m = m;
    sb_layout layout;
    int rc = sb_rt_kv_layout(m, page_tokens ? page_tokens : 16, c->bpt, &layout);
    if (rc == SB_OK)
        rc = sb_ns_open(st, &layout, scope, scope_len, &c->ns);
    if (rc == SB_OK) /* one context's pages ready (a refusal only costs faults later) */
        (void)sb_rt_kv_prefault(m, c->ns, NULL);
    if (rc == SB_OK)
        rc = sb_rt_ctx_new(m, threads, 512, &c->ctx);
    if (rc == SB_OK)
        rc = sb_rt_session_new(m, c->ctx, c->ns, &c->s);
    if (rc != SB_OK) {
        sbrt_chat_close(c);
        return rc;
    }
    *out = c;
    return SB_OK;
}

int sbrt_chat_resume(sbrt_chat *c, const uint32_t *tokens, size_t n)
{
    return c ? sb_rt_session_resume(c->s, tokens, n) : SB_ERR_INVAL;
}

size_t sbrt_chat_tokens(const sbrt_chat *c, uint32_t *out, size_t cap)
{
    if (!c)
        return 0;
    size_t n;
    const uint32_t *t = sb_rt_session_tokens(c->s, &n);
    if (out && n)
        memcpy(out, t, (n < cap ? n : cap) * sizeof *t);
    return n;
}

/* Append to a JSON buffer; *len tracks what it would need. */
static void jput(char *buf, size_t cap, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void jput(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(*len < cap ? buf + *len : NULL, *len < cap ? cap - *len : 0, fmt, ap);
    va_end(ap);
    if (k > 0)
        *len += (size_t)k;
}

/* ,"key":{"reason":v,...} for an array of n counters indexed by reason. */
static void by_reason(char *buf, size_t cap, size_t *len, const char *key,
                      const char *(*name)(int), const uint64_t *v, int n)
{
    jput(buf, cap, len, ",\"%s\":{", key);
    for (int i = 0; i < n; i++)
        jput(buf, cap, len, "%s\"%s\":%llu", i ? "," : "", name(i), (unsigned long long)v[i]);
    jput(buf, cap, len, "}");
}

typedef struct gen_sink {
    uint32_t *out;
    size_t n, cap;
} gen_sink;

static void gen_token(void *ctx, uint32_t id)
{
    gen_sink *g = ctx;
    if (g->n < g->cap)
        g->out[g->n++] = id;
}

/* The JSON report of turn r into report[0, cap) (sbrt_chat_turn's form).
 * Returns: SB_OK; SB_ERR_RANGE (cap too small). */
static int turn_report(const sb_rt_turn *r, char *report, size_t report_cap)
{
    size_t len = 0;
    jput(report, report_cap, &len,
         "{\"cache_mode\":\"%s\",\"prompt_tokens\":%zu,\"cached_tokens\":%zu,"
         "\"cached_disk_tokens\":%zu,\"cached_shared_tokens\":%zu,\"prefill_tokens\":%zu,"
         "\"gen_tokens\":%zu,"
         "\"matched_tokens\":%zu,\"miss\":\"%s\",\"point_hit\":%s,\"disk_skipped\":%s,"
         "\"est_read_s\":%.9g,\"est_recompute_s\":%.9g,\"restore_s\":%.9g,"
         "\"restore_cpu_s\":%.9g,\"restore_faults\":%llu,\"restore_bytes\":%zu,"
         "\"prefill_s\":%.9g,"
         "\"ttft_s\":%.9g,\"decode_s\":%.9g,\"prefill_tok_s\":%.9g,\"decode_tok_s\":%.9g,"
         "\"boundary_tokens\":%zu,\"recomputed_tokens\":%zu,\"boundaries_written\":%zu,"
         "\"bank_bytes\":%zu,\"commit_error\":",
         sb_rt_cache_mode_name(r->cache_mode), r->prompt_tokens, r->cached_tokens,
         r->cached_disk_tokens, r->cached_shared_tokens, r->prefill_tokens, r->gen_tokens,
         r->matched_tokens,
         sb_miss_name(r->miss), r->point_hit ? "true" : "false", r->disk_skipped ? "true" : "false",
         r->est_read_s, r->est_recompute_s, r->restore_s, r->restore_cpu_s,
         (unsigned long long)r->restore_faults, r->restore_bytes,
         r->prefill_s, r->ttft_s, r->decode_s,
         r->prefill_tok_s, r->decode_tok_s, r->boundary_tokens, r->recomputed_tokens,
         r->boundaries_written, r->bank_bytes);
    if (r->commit_rc == SB_OK)
        jput(report, report_cap, &len, "null");
    else
        jput(report, report_cap, &len, "\"%s\"", sb_strerror(r->commit_rc));
    const sb_write_outcome *d = &r->disk;
    const char *durable = !d->ticket ? "null" : d->durable ? "\"yes\""
                          : d->denied ? "\"no\"" : d->write_only ? "\"write-only\""
                          : "\"pending\"";
    jput(report, report_cap, &len,
         ",\"durable\":%s,\"disk\":{\"ticket\":%llu,\"pages_new\":%u,\"points_new\":%u,"
         "\"queued\":%u,\"written\":%u,\"deferred\":%u,\"dirty\":%u,\"denied\":%u",
         durable, (unsigned long long)d->ticket, d->pages_new, d->points_new, d->queued,
         d->written, d->deferred, d->dirty, d->denied);
    uint64_t by[SB_DENY__COUNT];
    for (int i = 0; i < SB_DENY__COUNT; i++)
        by[i] = d->denied_by[i];
    by_reason(report, report_cap, &len, "denied_by", sb_deny_name, by, SB_DENY__COUNT);
    jput(report, report_cap, &len, "}}");
    return len < report_cap ? SB_OK : SB_ERR_RANGE;
}

int sbrt_chat_turn(sbrt_chat *c, const uint32_t *input, size_t n_in, size_t n_gen, float temp,
                   uint32_t top_k, float top_p, uint64_t seed, uint32_t stop_id, uint32_t *out,
                   size_t *n_out, char *report, size_t report_cap)
{
    if (!c || !n_out || (n_gen && !out) || !report || !report_cap)
        return SB_ERR_INVAL;
    *n_out = 0;
    sb_rt_sampler smp;
    sb_rt_sampling so = { temp, top_k, top_p, seed };
    int rc = sb_rt_sampler_init(&smp, &so, c->m->hp.n_vocab);
    if (rc != SB_OK)
        return rc;
    gen_sink sink = { out, 0, n_gen };
    sb_rt_gen g = { n_gen, &smp, stop_id, gen_token, &sink, NULL };
    sb_rt_turn r;
    rc = sb_rt_session_turn(c->s, input, n_in, &g, &r);
    sb_rt_sampler_fini(&smp);
    if (rc != SB_OK)
        return rc;
    *n_out = sink.n;
    return turn_report(&r, report, report_cap);
}

/* One chat's job of a batched turn: its prompt is the chat's tokens and
 * then the input. Returns: SB_OK; SB_ERR_NOMEM. */
static int batch_job(sbrt_chat *c, const uint32_t *input, size_t n_in, size_t n_gen,
                     const sb_rt_sampling *so, uint32_t stop_id, sb_rt_job **out)
{
    size_t n_hist = 0;
    const uint32_t *hist = sb_rt_session_tokens(c->s, &n_hist);
    sb_rt_job *j = sb_rt_job_new(0);
    if (!j || !(j->prompt = malloc((n_hist + n_in) * sizeof *j->prompt))) {
        sb_rt_job_unref(j);
        return SB_ERR_NOMEM;
    }
    if (n_hist)
        memcpy(j->prompt, hist, n_hist * sizeof *hist);
    memcpy(j->prompt + n_hist, input, n_in * sizeof *input);
    j->n_prompt = n_hist + n_in;
    j->kind = SB_RT_JOB_GENERATE;
    j->ns = c->ns;
    j->max_gen = n_gen;
    j->sampling = *so;
    j->eog_stops = false; /* as sbrt_chat_turn: only stop_id stops */
    j->stop_token = stop_id;
    j->t_arrival = sb_rt_now_s();
    *out = j;
    return SB_OK;
}

int sbrt_chat_turn_batch(sbrt_chat *const *chats, size_t n, const uint32_t *const *inputs,
                         const size_t *n_in, size_t n_gen, float temp, uint32_t top_k,
                         float top_p, const uint64_t *seeds, uint32_t stop_id,
                         uint32_t *const *outs, size_t *n_outs, int *rcs, char *const *reports,
                         size_t report_cap)
{
    if (!chats || !n || !inputs || !n_in || !n_gen || !seeds || !outs || !n_outs ||
        (reports && !report_cap))
        return SB_ERR_INVAL;
    for (size_t k = 0; k < n; k++) {
        if (!chats[k] || chats[k]->m != chats[0]->m || !outs[k] || (n_in[k] && !inputs[k]) ||
            (reports && !reports[k]))
            return SB_ERR_INVAL;
        for (size_t i = 0; i < k; i++)
            if (chats[i] == chats[k])
                return SB_ERR_INVAL;
        size_t n_hist = 0;
        (void)sb_rt_session_tokens(chats[k]->s, &n_hist);
        if (!n_hist && !n_in[k])
            return SB_ERR_INVAL; /* no prompt at all */
    }
    for (size_t k = 0; k < n; k++) {
        n_outs[k] = 0;
        if (rcs)
            rcs[k] = SB_OK;
    }
    const sb_rt_model *m = chats[0]->m;
    sb_rt_batch_cfg cfg = { .slots = n, .max_queue = n,
                            .threads = sb_rt_ctx_threads(chats[0]->ctx), .batch = 512,
                            .disk_use = SB_RT_DISK_READ };
    sb_rt_batch *b = NULL;
    sb_rt_job **jobs = calloc(n, sizeof *jobs);
    int rc = jobs ? sb_rt_batch_new(m, &cfg, &b) : SB_ERR_NOMEM;
    for (size_t k = 0; k < n && rc == SB_OK; k++) {
        sb_rt_sampling so = { temp, top_k, top_p, seeds[k] };
        rc = batch_job(chats[k], inputs[k], n_in[k], n_gen, &so, stop_id, &jobs[k]);
        if (rc == SB_OK)
            rc = sb_rt_batch_submit(b, jobs[k]);
    }
    if (rc != SB_OK) { /* nothing ran: what was queued is cancelled */
        sb_rt_batch_free(b);
        for (size_t k = 0; jobs && k < n; k++)
            sb_rt_job_unref(jobs[k]);
        free(jobs);
        return rc;
    }
    sb_rt_batch_wait_idle(b, -1);
    sb_rt_batch_free(b);
    int first = SB_OK;
    for (size_t k = 0; k < n; k++) {
        sb_rt_job *j = jobs[k];
        int r = j->finish == SB_RT_FINISH_ERROR ? j->error : SB_OK;
        /* the generated tokens that ran (a last one the context had no room
           for did not, as with sbrt_chat_turn) */
        size_t ran = j->n_tokens > j->n_prompt ? j->n_tokens - j->n_prompt : 0;
        if (r == SB_OK && !j->n_tokens)
            r = SB_ERR_NOMEM; /* the committed sequence could not be kept */
        if (r == SB_OK && (ran > j->n_gen || j->gen_cap < ran))
            r = SB_ERR_NOMEM; /* the generated ids could not be kept */
        if (r == SB_OK) {
            memcpy(outs[k], j->gen, ran * sizeof *j->gen);
            n_outs[k] = ran;
            r = sb_rt_session_resume(chats[k]->s, j->tokens, j->n_tokens);
        }
        if (r == SB_OK && reports)
            r = turn_report(&j->rep, reports[k], report_cap);
        if (rcs)
            rcs[k] = r;
        if (first == SB_OK)
            first = r;
        sb_rt_job_unref(j);
    }
    free(jobs);
    return first;
}

/* ---- a bare decoder ---------------------------------------------------------------- */

struct sbrt_decoder {
    const sb_rt_model *m;
    sb_ns *ns;
    sb_rt_ctx *ctx;
    sb_rt_kv kv;
    bool have_kv;
    sb_rt_sampler smp;   /* greedy */
    bool have_smp;
    float *logits;       /* (n_vocab): after the sequence's last token */
    size_t len;          /* tokens in the KV; 0: no sequence */
    uint32_t bpt[2 * SB_RT_MAX_LAYERS];
};

void sbrt_decoder_close(sbrt_decoder *d)
{
    if (!d)
        return;
    if (d->have_smp)
        sb_rt_sampler_fini(&d->smp);
    if (d->have_kv)
        sb_rt_kv_fini(&d->kv);
    sb_rt_ctx_free(d->ctx);
    sb_ns_close(d->ns);
    free(d->logits);
    free(d);
}

int sbrt_decoder_open(sb_store *st, const sb_rt_model *m, const void *scope, size_t scope_len,
                      unsigned threads, sbrt_decoder **out)
{
    if (!out)
        return SB_ERR_INVAL;
    *out = NULL;
    if (!st || !m || (scope_len && !scope))
        return SB_ERR_INVAL;
    sbrt_decoder *d = calloc(1, sizeof *d);
    if (!d || !(d->logits = malloc(m->hp.n_vocab * sizeof *d->logits))) {
        free(d);
        return SB_ERR_NOMEM;
    }
    d->m = m;
    const sb_rt_sampling greedy = { .temp = 0, .top_k = 0, .top_p = 1, .seed = 0 };
    sb_layout layout;
    int rc = sb_rt_kv_layout(m, 16, d->bpt, &layout);
    if (rc == SB_OK)
        rc = sb_ns_open(st, &layout, scope, scope_len, &d->ns);
    if (rc == SB_OK)
        rc = sb_rt_ctx_new(m, threads, 64, &d->ctx);
    if (rc == SB_OK && (rc = sb_rt_kv_init(&d->kv, m, d->ns)) == SB_OK)
        d->have_kv = true;
    if (rc == SB_OK && (rc = sb_rt_sampler_init(&d->smp, &greedy, m->hp.n_vocab)) == SB_OK)
        d->have_smp = true;
    if (rc != SB_OK) {
        sbrt_decoder_close(d);
        return rc;
    }
    *out = d;
    return SB_OK;
}

int sbrt_decoder_prefill(sbrt_decoder *d, const uint32_t *ids, size_t n)
{
    if (!d || !ids || !n)
        return SB_ERR_INVAL;
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= d->m->hp.n_vocab)
            return SB_ERR_INVAL;
    sb_rt_kv_reset(&d->kv);
    d->len = 0;
    int rc = sb_rt_forward(d->ctx, &d->kv, ids, n, SB_RT_LOGITS_LAST, d->logits);
    if (rc != SB_OK) {
        sb_rt_kv_reset(&d->kv);
        return rc;
    }
    d->len = n;
    return SB_OK;
}

int sbrt_decoder_step(sbrt_decoder *d, uint32_t *id)
{
    if (!d || !id || !d->len)
        return SB_ERR_INVAL;
    if (d->len + 1 > d->m->hp.n_ctx)
        return SB_ERR_TOO_MANY_TOKENS;
    uint32_t next = sb_rt_sample(&d->smp, d->logits);
    int rc = sb_rt_forward(d->ctx, &d->kv, &next, 1, SB_RT_LOGITS_LAST, d->logits);
    if (rc != SB_OK) {
        sb_rt_kv_reset(&d->kv);
        d->len = 0;
        return rc;
    }
    d->len++;
    *id = next;
    return SB_OK;
}

int sbrt_stats_json(sb_store *st, char *buf, size_t cap)
{
    sb_stats s;
    if (!buf || !cap || sb_store_stats(st, &s) != SB_OK)
        return SB_ERR_INVAL;
    size_t len = 0;
    jput(buf, cap, &len, "{");
#define SB_JSON_FIELD(f) jput(buf, cap, &len, "\"" #f "\":%llu,", (unsigned long long)s.f);
    SB_STATS_U64(SB_JSON_FIELD)
#undef SB_JSON_FIELD
    jput(buf, cap, &len, "\"index_bytes_per_token\":%.9g,\"disk_write_amplification\":%.9g",
         s.index_bytes_per_token, s.disk_write_amplification);
    by_reason(buf, cap, &len, "misses", sb_miss_name, s.misses, SB_MISS__COUNT);
    by_reason(buf, cap, &len, "miss_tokens_by_reason", sb_miss_name, s.miss_tokens_by_reason,
              SB_MISS__COUNT);
    by_reason(buf, cap, &len, "disk_denials", sb_deny_name, s.disk_denials, SB_DENY__COUNT);
    by_reason(buf, cap, &len, "disk_denied_bytes", sb_deny_name, s.disk_denied_bytes,
              SB_DENY__COUNT);
    jput(buf, cap, &len, "}");
    return len < cap ? SB_OK : SB_ERR_RANGE;
}

size_t sbrt_sizeof(int which)
{
    switch (which) {
    case 0:
        return sizeof(sb_config);
    case 1:
        return sizeof(sb_layout);
    case 2:
        return sizeof(sb_match_info);
    case 3:
        return sizeof(sb_ns_info);
    case 4:
        return sizeof(sb_write_outcome);
    }
    return 0;
}
