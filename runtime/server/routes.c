/* routes.c -- the endpoints of snapbank serve: OpenAI completions (plain
 * and streamed), models, health, sessions, metrics, and the admin bank
 * calls (server.h; request fields in api.h). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capi/stats_fields.h"
#include "server/api.h"
#include "server/server_int.h"
#include "server/tools.h"
#include "text/tokenizer.h"

static const char *const retry1[] = { "Retry-After", "1", NULL };

#define STR2(x) #x
#define STR(x) STR2(x)
#define SB_SRV_VERSION STR(SB_VERSION_MAJOR) "." STR(SB_VERSION_MINOR) "." STR(SB_VERSION_PATCH)

/* ---- errors the OpenAI way ----------------------------------------------------------- */

static void bad_request(srv_hreq *r, const srv_api_err *e)
{
    srv_hreq_error(r, e->status, e->type, e->code, e->param[0] ? e->param : NULL, NULL, "%s",
                   e->msg);
}

static void overloaded(srv_hreq *r, const char *code, const char *msg)
{
    srv_hreq_error(r, 503, "service_unavailable_error", code, NULL, retry1, "%s", msg);
}

/* The tenant of a request, or NULL after answering 401. */
static srv_tenant *authorize(srv_server *s, srv_hreq *r)
{
    const char *auth = srv_hreq_header(r, "Authorization");
    srv_tenant *t = srv_tenants_auth(s->tenants, auth);
    if (t)
        return t;
    if (!auth)
        srv_hreq_error(r, 401, "invalid_request_error", NULL, NULL, NULL,
                       "You didn't provide an API key. You need to provide your API key in an "
                       "Authorization header using Bearer auth (i.e. Authorization: Bearer "
                       "YOUR_KEY).");
    else
        srv_hreq_error(r, 401, "invalid_request_error", "invalid_api_key", NULL, NULL,
                       "Incorrect API key provided.");
    return NULL;
}

/* Whether the request carries the admin key (answers 403 or 401 if not). */
static bool authorize_admin(srv_server *s, srv_hreq *r)
{
    if (!s->admin_key[0]) {
        srv_hreq_error(r, 403, "invalid_request_error", "admin_disabled", NULL, NULL,
                       "The bank's admin endpoints are off: start the server with "
                       "--admin-key-file.");
        return false;
    }
    const char *auth = srv_hreq_header(r, "Authorization");
    if (srv_bearer_is(auth, s->admin_key))
        return true;
    srv_hreq_error(r, 401, "invalid_request_error", auth ? "invalid_api_key" : NULL, NULL, NULL,
                   "%s", auth ? "Incorrect admin key provided."
                              : "You didn't provide the admin key (Authorization: Bearer KEY).");
    return false;
}

/* ---- one completion request ------------------------------------------------------------ */

/* What the job's end hook needs; owned by the job once submitted. */
typedef struct turn_ctx {
    srv_server *srv;
    srv_session *sess;        /* held until the turn ends; NULL without one */
    srv_text text;            /* the rendered prompt (text NULL: token ids) */
    size_t kept_text, kept_tokens;
    char tenant[SRV_TENANT_MAX + 1];
    char session_id[SRV_SESSION_ID_MAX + 1];
    const char *route;
} turn_ctx;

enum { PH_ROLE, PH_TEXT, PH_USAGE, PH_DONE, PH_END };

/* A job's link to the connection waiting on it lives in the job's own area
 * (so it lives as long as the job), and the engine's wake resumes it. */
static srv_link *job_link(sb_rt_job *j)
{
    return j->app;
}

static void job_wake(sb_rt_job *j)
{
    srv_link_wake(job_link(j));
}

static sb_rt_job *job_new(void)
{
    sb_rt_job *j = sb_rt_job_new(sizeof(srv_link));
    if (j) {
        job_link(j)->mu = &j->mu;
        j->wake = job_wake;
    }
    return j;
}

/* The HTTP side of a completion request. */
typedef struct req_ctx {
    srv_server *srv;
    sb_rt_job *j;               /* a reference */
    srv_api_kind kind;
    bool stream, include_usage;
    char id[48];
    time_t created;
    char session_id[SRV_SESSION_ID_MAX + 1];
    atomic_int refs;          /* the request, and a stream's body */
    int phase;                /* a stream's (under j->mu) */
    size_t sent;              /* out bytes sent */
    char *pend;               /* an event not yet taken by MHD */
    size_t pend_len, pend_off;
    int toolfmt;              /* srv_toolfmt: the request gave tools */
    unsigned long long call_seed; /* its tool calls' ids */
    bool tools_parsed;        /* a stream's answer split (under j->mu): */
    json_t *calls;            /* its tool calls, or NULL */
    size_t content_end;       /* ...and the end of its content */
    bool calls_sent;
    size_t lp_sent;           /* a stream's logprob entries sent */
} req_ctx;

static void req_unref(req_ctx *c)
{
    if (atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    sb_rt_job_unref(c->j);
    json_decref(c->calls);
    free(c->pend);
    free(c);
}

static void req_release(void *ctx)
{
    req_unref(ctx);
}

static void req_closed(void *ctx, bool aborted)
{
    req_ctx *c = ctx;
    pthread_mutex_lock(&c->j->mu);
    if (aborted && !c->j->done) { /* the client left: stop its generation */
        atomic_store(&c->j->cancel, 1);
        srv_metrics_client_gone(c->srv->mx);
    }
    job_link(c->j)->parked = false; /* never resume a connection that is gone */
    job_link(c->j)->conn = NULL;
    pthread_mutex_unlock(&c->j->mu);
    req_unref(c);
}

static const char *finish_name(sb_rt_finish f)
{
    return f == SB_RT_FINISH_STOP ? "stop" : "length";
}

/* Milliseconds from seconds, to the microsecond. */
static double ms(double s)
{
    return round(s * 1e6) / 1e3;
}

/* The usage object: OpenAI's fields and snapbank's (under j->mu); a
 * hybrid model's (hybrid true) also says which boundary the prompt resumed
 * from and what the turn recomputed past it. */
static json_t *usage_json(const sb_rt_job *j, bool hybrid)
{
    const sb_rt_turn *r = &j->rep;
    size_t prompt = j->n_prompt, cached = j->started ? r->cached_tokens : 0;
    size_t disk = j->started ? r->cached_disk_tokens : 0;
    size_t shared = j->started ? r->cached_shared_tokens : 0;
    json_t *u = json_pack("{s:I, s:I, s:I, s:{s:I}, s:s, s:I, s:I, s:I, s:I, s:f, s:f, s:f}",
        "prompt_tokens", (json_int_t)prompt, "completion_tokens", (json_int_t)j->n_gen,
        "total_tokens", (json_int_t)(prompt + j->n_gen), "prompt_tokens_details",
        "cached_tokens", (json_int_t)cached,
        "cache_mode", j->started ? sb_rt_cache_mode_name(r->cache_mode) : "cold",
        "cached_tokens_ram", (json_int_t)(cached - disk - shared),
        "cached_tokens_disk", (json_int_t)disk, "cached_tokens_shared", (json_int_t)shared,
        "prefill_tokens", (json_int_t)(prompt - cached),
        "restore_ms", j->started ? ms(r->restore_s) : 0.0,
        "ttft_ms", j->n_gen ? ms(j->t_first - j->t_arrival) : 0.0,
        "queue_ms", j->started ? ms(j->t_start - j->t_arrival) : 0.0);
    const char *why = j->started ? sb_rt_turn_miss_reason(r) : "no_prefix";
    if (u && why)
        json_object_set_new(u, "miss_reason", json_string(why));
    /* why a shared-tier fetch ended short (enum sb_shared_fault), the
     * server's words or the refused key, and the values refused */
    if (u && j->started && r->shared_fault)
        json_object_set_new(u, "shared_fault", json_pack("{s:s, s:s, s:I}",
            "reason", sb_shared_fault_name(r->shared_fault), "detail", r->shared_detail,
            "bad_values", (json_int_t)r->shared_bad));
    /* what the bank's disk tier made of the turn's commits (sb_write_outcome):
     * durable once the state is written and synced; zeroes without a disk */
    const sb_write_outcome *d = &r->disk;
    if (u && j->started)
        json_object_set_new(u, "bank_write", json_pack("{s:I, s:I, s:I, s:I, s:I, s:b}",
            "pages_new", (json_int_t)d->pages_new, "blocks_queued", (json_int_t)d->queued,
            "blocks_written", (json_int_t)d->written, "blocks_deferred",
            (json_int_t)d->deferred, "blocks_denied", (json_int_t)d->denied, "durable",
            d->durable));
    if (u && hybrid)
        json_object_set_new(u, "boundary", json_pack("{s:I, s:I, s:I, s:I}",
            "resumed_at", (json_int_t)(j->started ? r->boundary_tokens : 0),
            "recomputed_tokens", (json_int_t)(j->started ? r->recomputed_tokens : 0),
            "written", (json_int_t)(j->started ? r->boundaries_written : 0),
            "bank_bytes", (json_int_t)(j->started ? r->bank_bytes : 0)));
    return u;
}

/* The head every response object shares. */
static json_t *head_json(const req_ctx *c, const char *object)
{
    json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:s}", "id", c->id, "object", object, "created",
                          (json_int_t)c->created, "model", c->srv->name, "system_fingerprint",
                          "snapbank-" SB_SRV_VERSION);
    if (o && c->session_id[0])
        json_object_set_new(o, "session_id", json_string(c->session_id));
    return o;
}

static json_t *text_json(const sb_rt_job *j, size_t from, size_t to)
{
    json_t *t = json_stringn(j->out + from, to - from);
    return t ? t : json_string(""); /* cannot be: out is valid UTF-8 */
}

/* ---- logprobs ---- */

/* Token id's text after prev into a JSON string (invalid UTF-8 bytes as
 * U+FFFD: a character split over tokens) and its raw bytes into *bytes. */
static json_t *token_json(const srv_server *s, uint32_t id, uint32_t prev, json_t **bytes)
{
    char piece[512], fixed[3 * sizeof piece];
    size_t n = 0, m = 0;
    if (sb_rt_tok_piece(s->m->tok, id, prev, piece, sizeof piece, &n) != SB_OK)
        n = 0;
    *bytes = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(*bytes, json_integer((unsigned char)piece[i]));
    for (size_t i = 0; i < n;) { /* keep whole valid characters, else U+FFFD */
        unsigned char c = (unsigned char)piece[i];
        size_t k = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
                 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        bool ok = k && i + k <= n && c;
        for (size_t t = 1; ok && t < k; t++)
            ok = ((unsigned char)piece[i + t] & 0xC0) == 0x80;
        if (ok && k > 1) { /* jansson refuses overlongs and surrogates */
            json_t *probe = json_stringn(piece + i, k);
            ok = probe != NULL;
            json_decref(probe);
        }
        if (ok) {
            memcpy(fixed + m, piece + i, k), m += k, i += k;
        } else {
            memcpy(fixed + m, "\xEF\xBF\xBD", 3), m += 3, i++;
        }
    }
    return json_stringn(fixed, m);
}

/* Chat's logprobs entry for j->lp[i] (under j->mu). */
static json_t *lp_chat_entry(const req_ctx *c, size_t i)
{
    const sb_rt_job *j = c->j;
    const sb_rt_logprob *e = &j->lp[i];
    uint32_t prev = i ? j->lp[i - 1].id : SB_RT_TOK_NONE;
    json_t *bytes, *tok = token_json(c->srv, e->id, prev, &bytes);
    json_t *top = json_array();
    for (uint32_t t = 0; t < e->n_top && t < j->top_logprobs; t++) {
        json_t *tb, *tt = token_json(c->srv, e->top_id[t], prev, &tb);
        json_array_append_new(top, json_pack("{s:o, s:f, s:o}", "token", tt, "logprob",
                                             (double)e->top_lp[t], "bytes", tb));
    }
    return json_pack("{s:o, s:f, s:o, s:o}", "token", tok, "logprob", (double)e->logprob, "bytes",
                     bytes, "top_logprobs", top);
}

/* The logprobs of entries [from, to): chat's {"content": [...], "refusal":
 * null}, or a completion's {"tokens", "token_logprobs", "top_logprobs",
 * "text_offset"} (under j->mu). */
static json_t *logprobs_json(const req_ctx *c, size_t from, size_t to)
{
    const sb_rt_job *j = c->j;
    if (c->kind == SRV_API_CHAT) {
        json_t *a = json_array();
        for (size_t i = from; i < to; i++)
            json_array_append_new(a, lp_chat_entry(c, i));
        return json_pack("{s:o, s:n}", "content", a, "refusal");
    }
    json_t *toks = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    for (size_t i = from; i < to; i++) {
        const sb_rt_logprob *e = &j->lp[i];
        uint32_t prev = i ? j->lp[i - 1].id : SB_RT_TOK_NONE;
        json_t *b, *t = token_json(c->srv, e->id, prev, &b);
        json_decref(b);
        json_array_append_new(toks, t);
        json_array_append_new(lps, json_real(e->logprob));
        json_t *d = json_object();
        for (uint32_t k = 0; k < e->n_top && k < j->top_logprobs; k++) {
            json_t *kb, *kt = token_json(c->srv, e->top_id[k], prev, &kb);
            json_decref(kb);
            if (kt && !json_object_get(d, json_string_value(kt)))
                json_object_set_new(d, json_string_value(kt), json_real(e->top_lp[k]));
            json_decref(kt);
        }
        json_array_append_new(tops, d);
        json_array_append_new(offs, json_integer((json_int_t)e->text_start));
    }
    return json_pack("{s:o, s:o, s:o, s:o}", "tokens", toks, "token_logprobs", lps,
                     "top_logprobs", tops, "text_offset", offs);
}

/* The entries to report of an answer whose text shown so far is out[0,
 * end): those whose text ends there; once the answer is whole (done),
 * every token whose text starts before end (not a stop string's or an
 * end token's past it). */
static size_t lp_upto(const sb_rt_job *j, size_t end, bool done)
{
    size_t k = 0;
    while (k < j->n_lp && (done ? j->lp[k].text_start < end : j->lp[k].text_end <= end))
        k++;
    return k;
}

/* An answer that did not complete: its HTTP status and OpenAI error object. */
static json_t *job_error(const sb_rt_job *j, unsigned *status)
{
    const char *type = "server_error", *code = NULL;
    char msg[256];
    if (j->finish == SB_RT_FINISH_CANCELLED) {
        *status = 503, type = "service_unavailable_error", code = "server_shutting_down";
        snprintf(msg, sizeof msg, "The server is shutting down; the request was stopped.");
    } else if (j->error == SB_ERR_BUDGET || j->error == SB_ERR_NOMEM) {
        *status = 503, type = "service_unavailable_error", code = "bank_full";
        snprintf(msg, sizeof msg, "The bank's RAM budget is full of pages in use; retry later, "
                                  "or start the server with a larger --ram-mib.");
    } else if (j->error == SB_ERR_TOO_MANY_TOKENS) { /* llama_host.h: -kvu's cells */
        *status = 503, type = "service_unavailable_error", code = "context_full";
        snprintf(msg, sizeof msg, "The KV cache the slots share (--kv-unified) is full of "
                                  "other requests' tokens; retry later, or start the server "
                                  "with a larger --ctx.");
    } else {
        *status = 500;
        snprintf(msg, sizeof msg, "The request failed: %s.", sb_strerror(j->error));
    }
    return json_pack("{s:{s:s, s:s, s:n, s:o}}", "error", "message", msg, "type", type, "param",
                     "code", code ? json_string(code) : json_null());
}

/* Non-streamed: answer once the job is done (srv_poll_fn, under j->mu). */
static bool poll_done(void *ctx, srv_hreq *r)
{
    req_ctx *c = ctx;
    sb_rt_job *j = c->j;
    if (!j->done)
        return false;
    if (j->finish == SB_RT_FINISH_CANCELLED || j->finish == SB_RT_FINISH_ERROR) {
        unsigned status;
        json_t *e = job_error(j, &status);
        srv_hreq_json(r, status, e, status == 503 ? retry1 : NULL);
        return true;
    }
    bool chat = c->kind == SRV_API_CHAT;
    json_t *calls = NULL;
    size_t content = j->out_len;
    if (c->toolfmt && srv_tools_parse(c->toolfmt, j->out, j->out_len, c->call_seed, &calls,
                                      &content) != SB_OK) {
        srv_hreq_error(r, 500, "server_error", NULL, NULL, NULL, "out of memory");
        return true;
    }
    json_t *o = head_json(c, chat ? "chat.completion" : "text_completion");
    json_t *choice = chat ? json_pack("{s:i, s:{s:s, s:o, s:n}, s:n, s:s}", "index", 0, "message",
                                      "role", "assistant", "content",
                                      calls && !content ? json_null() : text_json(j, 0, content),
                                      "refusal", "logprobs", "finish_reason",
                                      calls ? "tool_calls" : finish_name(j->finish))
                          : json_pack("{s:o, s:i, s:n, s:s}", "text", text_json(j, 0, j->out_len),
                                      "index", 0, "logprobs", "finish_reason",
                                      finish_name(j->finish));
    if (choice && calls)
        json_object_set_new(json_object_get(choice, "message"), "tool_calls", calls);
    if (choice && j->logprobs)
        json_object_set_new(choice, "logprobs", /* a tool call's tokens too */
                            logprobs_json(c, 0, lp_upto(j, j->out_len, true)));
    if (o && choice) {
        json_object_set_new(o, "choices", json_pack("[o]", choice));
        json_object_set_new(o, "usage", usage_json(j, c->srv->boundaries));
        srv_hreq_json(r, 200, o, NULL);
    } else {
        json_decref(o);
        json_decref(choice);
        srv_hreq_error(r, 500, "server_error", NULL, NULL, NULL, "out of memory");
    }
    return true;
}

/* Put "data: JSON\n\n" in c->pend (j consumed). */
static void event(req_ctx *c, json_t *j)
{
    char *s = j ? json_dumps(j, SRV_JSON_FLAGS) : NULL;
    json_decref(j);
    if (!s)
        return;
    size_t n = strlen(s);
    c->pend = malloc(n + 9);
    if (c->pend) {
        memcpy(c->pend, "data: ", 6);
        memcpy(c->pend + 6, s, n);
        memcpy(c->pend + 6 + n, "\n\n", 3);
        c->pend_len = n + 8, c->pend_off = 0;
    }
    free(s);
}

/* A stream chunk: delta (chat) or text (completions), finish (NULL: none). */
static json_t *chunk(req_ctx *c, json_t *delta_or_text, const char *finish)
{
    bool chat = c->kind == SRV_API_CHAT;
    json_t *o = head_json(c, chat ? "chat.completion.chunk" : "text_completion");
    json_t *choice = chat ? json_pack("{s:i, s:o, s:n, s:o}", "index", 0, "delta", delta_or_text,
                                      "logprobs", "finish_reason",
                                      finish ? json_string(finish) : json_null())
                          : json_pack("{s:o, s:i, s:n, s:o}", "text", delta_or_text, "index", 0,
                                      "logprobs", "finish_reason",
                                      finish ? json_string(finish) : json_null());
    if (!o || !choice) {
        json_decref(o);
        json_decref(choice);
        return NULL;
    }
    json_object_set_new(o, "choices", json_pack("[o]", choice));
    if (c->include_usage)
        json_object_set_new(o, "usage", json_null());
    return o;
}

/* The stream's next event into c->pend; false when there is none now. */
static bool next_event(req_ctx *c)
{
    sb_rt_job *j = c->j;
    bool chat = c->kind == SRV_API_CHAT;
    switch (c->phase) {
    case PH_ROLE:
        c->phase = PH_TEXT;
        if (chat) {
            event(c, chunk(c, json_pack("{s:s, s:s}", "role", "assistant", "content", ""), NULL));
            return true;
        }
        /* fall through */
    case PH_TEXT: {
        /* with tools: what may be a call is held back until the answer is
         * whole, then split into content and calls */
        size_t vis = j->visible;
        if (c->toolfmt && !c->tools_parsed && j->done && j->finish != SB_RT_FINISH_CANCELLED &&
            j->finish != SB_RT_FINISH_ERROR) {
            if (srv_tools_parse(c->toolfmt, j->out, j->out_len, c->call_seed, &c->calls,
                                &c->content_end) != SB_OK)
                c->calls = NULL, c->content_end = j->out_len; /* out of memory: text */
            c->tools_parsed = true;
        }
        if (c->tools_parsed)
            vis = c->content_end;
        else if (c->toolfmt)
            vis = srv_tools_visible(c->toolfmt, j->out, j->visible);
        if (vis > c->sent) {
            json_t *t = text_json(j, c->sent, vis);
            c->sent = vis;
            json_t *o = chunk(c, chat ? json_pack("{s:o}", "content", t) : t, NULL);
            size_t k = j->logprobs ? lp_upto(j, vis, c->tools_parsed || j->done) : 0;
            if (o && k > c->lp_sent) {
                json_object_set_new(json_array_get(json_object_get(o, "choices"), 0), "logprobs",
                                    logprobs_json(c, c->lp_sent, k));
                c->lp_sent = k;
            }
            event(c, o);
            return true;
        }
        if (!j->done)
            return false;
        if (j->finish == SB_RT_FINISH_CANCELLED || j->finish == SB_RT_FINISH_ERROR) {
            unsigned status;
            event(c, job_error(j, &status));
            c->phase = PH_DONE;
            return true;
        }
        if (c->calls && !c->calls_sent) { /* every call whole, in one delta */
            c->calls_sent = true;
            for (size_t i = 0; i < json_array_size(c->calls); i++)
                json_object_set_new(json_array_get(c->calls, i), "index", json_integer((json_int_t)i));
            event(c, chunk(c, json_pack("{s:O}", "tool_calls", c->calls), NULL));
            return true;
        }
        json_t *o = chunk(c, chat ? json_object() : json_string(""),
                          c->calls ? "tool_calls" : finish_name(j->finish));
        size_t k = j->logprobs ? lp_upto(j, j->out_len, true) : 0;
        if (o && k > c->lp_sent) { /* text held back to the end, a tool call's */
            json_object_set_new(json_array_get(json_object_get(o, "choices"), 0), "logprobs",
                                logprobs_json(c, c->lp_sent, k));
            c->lp_sent = k;
        }
        event(c, o);
        c->phase = PH_USAGE;
        return true;
    }
    case PH_USAGE:
        c->phase = PH_DONE;
        if (c->include_usage) {
            json_t *o = head_json(c, chat ? "chat.completion.chunk" : "text_completion");
            if (o) {
                json_object_set_new(o, "choices", json_array());
                json_object_set_new(o, "usage", usage_json(j, c->srv->boundaries));
            }
            event(c, o);
            return true;
        }
        /* fall through */
    case PH_DONE:
        c->pend = strdup("data: [DONE]\n\n");
        c->pend_len = c->pend ? strlen(c->pend) : 0, c->pend_off = 0;
        c->phase = PH_END;
        return true;
    }
    return false;
}

/* The stream's body (srv_read_fn, under j->mu). */
static ssize_t read_stream(void *ctx, char *buf, size_t max)
{
    req_ctx *c = ctx;
    for (;;) {
        if (c->pend && c->pend_off < c->pend_len) {
            size_t n = c->pend_len - c->pend_off < max ? c->pend_len - c->pend_off : max;
            memcpy(buf, c->pend + c->pend_off, n);
            c->pend_off += n;
            return (ssize_t)n;
        }
        free(c->pend);
        c->pend = NULL;
        if (c->phase == PH_END)
            return SRV_READ_END;
        if (!next_event(c))
            return 0;
        if (!c->pend)
            return SRV_READ_ERROR; /* out of memory: close rather than lie */
    }
}

/* The engine's end hook: the session takes the turn, a log line. */
static void turn_end(sb_rt_job *j, void *ctx)
{
    turn_ctx *t = ctx;
    srv_server *s = t->srv;
    const sb_rt_turn *r = &j->rep;
    if (t->sess) {
        srv_session_turn st = {
            .tokens = j->tokens, .n_tokens = j->n_tokens, .n_prompt = j->n_prompt,
            .prompt_text = t->text.text, .prompt_len = t->text.len, .kept_text = t->kept_text,
            .kept_tokens = t->kept_tokens, .answer_text = j->stext, .marks = j->marks,
            .n_marks = j->n_marks, .cached_tokens = r->cached_tokens,
            .cached_disk_tokens = r->cached_disk_tokens, .completion_tokens = j->n_gen,
            .cache_mode = (int)r->cache_mode, .restore_s = r->restore_s,
        };
        srv_sessions_release(s->sessions, t->sess, j->n_tokens >= j->n_prompt ? &st : NULL);
    }
    if (s->cfg.log_requests) {
        static const char *const why[] = { "stop", "length", "cancelled", "error" };
        fprintf(stderr, "snapbank serve: %s tenant=%s%s%s cache_mode=%s prompt=%zu cached=%zu "
                "(disk %zu) completion=%zu ttft_ms=%.1f restore_ms=%.2f finish=%s%s%s\n",
                t->route, t->tenant, t->session_id[0] ? " session=" : "", t->session_id,
                j->started ? sb_rt_cache_mode_name(r->cache_mode) : "-", j->n_prompt,
                r->cached_tokens, r->cached_disk_tokens, j->n_gen,
                j->n_gen ? (j->t_first - j->t_arrival) * 1e3 : 0.0, r->restore_s * 1e3,
                why[j->finish], j->error ? " error=" : "", j->error ? sb_strerror(j->error) : "");
    }
    srv_text_free(&t->text);
    free(t);
}

/* The prompt's tokens: the session's up to the longest mark the text
 * begins with, then the rest of the text tokenized (spans shifted). */
/* On the llama.cpp engine: whether the builtin tokenizer's ids for text
 * (rest, with a BOS first when bos) are llama.cpp's. Where the caller's
 * text holds a control token's text (taken literally by the builtin, as a
 * control token by llama.cpp) there is nothing to compare. A difference is
 * logged as an error and counted, and llama.cpp's ids replace the
 * builtin's: the engine's tokens are llama.cpp's. */
static int agree(srv_server *s, const char *text, size_t len, bool bos, uint32_t **rest,
                 size_t *nr)
{
    uint32_t *plain = NULL, *ll = NULL;
    size_t np = 0, nl = 0;
    int rc = srv_prompt_encode(s->prompt, text, len, NULL, 0, SRV_ENC_SPECIAL, &plain, &np);
    size_t b = bos && *nr && *nr == np + 1 ? 1 : 0; /* the builtin's BOS */
    bool literal = rc != SB_OK || np + b != *nr || memcmp(plain, *rest + b, np * sizeof *plain);
    free(plain);
    if (literal || s->ref_tokenize(s->llama, text, len, &ll, &nl) != SB_OK)
        return SB_OK;
    size_t at = 0;
    while (at < np && at < nl && ll[at] == (*rest)[b + at])
        at++;
    if (at == np && np == nl) {
        free(ll);
        return SB_OK;
    }
    fprintf(stderr, "snapbank serve: error: the builtin tokenizer and llama.cpp's differ on a "
            "prompt at token %zu of %zu (builtin %u, llama.cpp %u; %zu and %zu tokens): "
            "llama.cpp's are used, and the bank's pages of the builtin's would not match\n",
            at, np, at < np ? (*rest)[b + at] : 0u, at < nl ? ll[at] : 0u, np, nl);
    srv_metrics_tokenizer_mismatch(s->mx);
    uint32_t *all = malloc((nl + b ? nl + b : 1) * sizeof *all);
    if (!all) {
        free(ll);
        return SB_ERR_NOMEM;
    }
    if (b)
        all[0] = (*rest)[0];
    memcpy(all + b, ll, nl * sizeof *ll);
    free(ll);
    free(*rest);
    *rest = all, *nr = nl + b;
    return SB_OK;
}

static int encode(srv_server *s, turn_ctx *t, uint32_t **ids, size_t *n)
{
    const uint32_t *kt = NULL;
    size_t kn = 0, kb = 0;
    if (t->sess)
        kb = srv_session_prefix(t->sess, t->text.text, t->text.len, &kt, &kn);
    if (!kn)
        kb = 0;
    srv_span *sp = malloc((t->text.n_spans ? t->text.n_spans : 1) * sizeof *sp);
    if (!sp)
        return SB_ERR_NOMEM;
    size_t ns = 0;
    for (size_t i = 0; i < t->text.n_spans; i++) {
        size_t a = t->text.spans[i].off, b = a + t->text.spans[i].len;
        if (b <= kb)
            continue;
        a = a > kb ? a : kb;
        sp[ns++] = (srv_span){ a - kb, b - a };
    }
    uint32_t *rest = NULL;
    size_t nr = 0;
    int rc = srv_prompt_encode(s->prompt, t->text.text + kb, t->text.len - kb, sp, ns,
                               SRV_ENC_SPECIAL | (kn ? 0 : SRV_ENC_BOS), &rest, &nr);
    free(sp);
    if (rc == SB_OK && s->ref_tokenize)
        rc = agree(s, t->text.text + kb, t->text.len - kb, !kn, &rest, &nr);
    if (rc != SB_OK) {
        free(rest);
        return rc;
    }
    uint32_t *all = malloc((kn + nr ? kn + nr : 1) * sizeof *all);
    if (!all) {
        free(rest);
        return SB_ERR_NOMEM;
    }
    if (kn)
        memcpy(all, kt, kn * sizeof *all);
    if (nr)
        memcpy(all + kn, rest, nr * sizeof *all);
    free(rest);
    t->kept_text = kb, t->kept_tokens = kn;
    *ids = all, *n = kn + nr;
    return SB_OK;
}

/* POST /v1/chat/completions and /v1/completions. */
static void completion(srv_server *s, srv_hreq *r, srv_api_kind kind)
{
    double t_arrival = sb_rt_now_s();
    srv_tenant *tenant = authorize(s, r);
    if (!tenant)
        return;
    if (atomic_load(&s->draining)) {
        overloaded(r, "server_shutting_down", "The server is shutting down.");
        return;
    }
    size_t len;
    const char *body = srv_hreq_body(r, &len);
    srv_api_req q;
    srv_api_err e;
    int rc = srv_api_parse(kind, body, len, &q, &e);
    if (rc != SB_OK) {
        if (rc == SB_ERR_FORMAT)
            bad_request(r, &e);
        else
            srv_hreq_error(r, 500, "server_error", NULL, NULL, NULL, "out of memory");
        srv_api_req_free(&q);
        return;
    }
    const char *pname = kind == SRV_API_CHAT ? "messages" : "prompt";
    const char *hsid = srv_hreq_header(r, "X-Session-Id");
    const char *sid = q.session_id ? q.session_id : hsid;
    turn_ctx *t = NULL;
    uint32_t *ids = NULL;
    size_t n = 0;
    sb_rt_job *j = NULL;
    if (strcmp(q.model, s->name) != 0) {
        srv_hreq_error(r, 404, "invalid_request_error", "model_not_found", "model", NULL,
                       "The model `%s` does not exist or you do not have access to it.", q.model);
        goto out;
    }
    if (q.session_id && hsid && strcmp(q.session_id, hsid) != 0) {
        srv_hreq_error(r, 400, "invalid_request_error", "invalid_value", "session_id", NULL,
                       "The body's session_id and the X-Session-Id header differ.");
        goto out;
    }
    if (sid && !srv_session_id_valid(sid)) {
        srv_hreq_error(r, 400, "invalid_request_error", "invalid_value", "session_id", NULL,
                       "Invalid session id: use 1-128 letters, digits, '.', '_' or '-', not "
                       "starting with '.'.");
        goto out;
    }
    if (!(t = calloc(1, sizeof *t)))
        goto oom;
    t->srv = s;
    t->route = kind == SRV_API_CHAT ? "/v1/chat/completions" : "/v1/completions";
    snprintf(t->tenant, sizeof t->tenant, "%s", tenant->name);
    snprintf(t->session_id, sizeof t->session_id, "%s", sid ? sid : "");
    sb_rt_err err = { 0 };
    int toolfmt = q.tools ? srv_prompt_toolfmt(s->prompt) : SRV_TOOLFMT_NONE;
    if (q.tools && toolfmt == SRV_TOOLFMT_NONE) {
        srv_hreq_error(r, 400, "invalid_request_error", "unsupported_parameter", "tools", NULL,
                       "'tools' is not supported for this model: its chat template teaches no "
                       "tool-call format this server parses (<tool_call> as Qwen and Hermes, "
                       "Llama 3's JSON, Mistral's [TOOL_CALLS]).");
        goto out;
    }
    if (kind == SRV_API_CHAT) {
        json_t *vo = q.tools ? json_pack("{s:O}", "tools", q.tools) : NULL;
        char *vars = vo ? json_dumps(vo, JSON_COMPACT) : NULL;
        json_decref(vo);
        if (q.tools && !vars)
            goto oom;
        rc = q.tools || q.has_extras
                 ? srv_prompt_render_ex(s->prompt, q.msgs, q.n_msgs,
                                        q.has_extras ? (const char *const *)q.msg_json : NULL,
                                        vars, &t->text, &err)
                 : srv_prompt_render(s->prompt, q.msgs, q.n_msgs, &t->text, &err);
        free(vars);
        if (rc != SB_OK) {
            if (rc == SB_ERR_NOMEM)
                goto oom;
            srv_hreq_error(r, 400, "invalid_request_error", "invalid_value", "messages", NULL,
                           "%s", err.msg);
            goto out;
        }
    } else if (q.prompt) {
        if (!(t->text.text = malloc(q.prompt_len + 1)))
            goto oom;
        memcpy(t->text.text, q.prompt, q.prompt_len + 1);
        t->text.len = q.prompt_len;
    }
    if (sid) {
        rc = srv_sessions_acquire(s->sessions, tenant, sid, &t->sess);
        if (rc == SB_ERR_LOCKED) {
            srv_hreq_error(r, 409, "invalid_request_error", "session_busy", "session_id", NULL,
                           "Session '%s' is answering another request; send one at a time.",
                           sid);
            goto out;
        }
        if (rc != SB_OK)
            goto oom;
    }
    if (t->text.text) {
        if ((rc = encode(s, t, &ids, &n)) != SB_OK)
            goto oom;
    } else {
        for (size_t i = 0; i < q.n_prompt_ids; i++)
            if (q.prompt_ids[i] >= s->m->hp.n_vocab) {
                srv_hreq_error(r, 400, "invalid_request_error", "invalid_value", "prompt", NULL,
                               "Invalid 'prompt': token id %u is not below the vocabulary size "
                               "%u.", q.prompt_ids[i], s->m->hp.n_vocab);
                goto out;
            }
        ids = q.prompt_ids, n = q.n_prompt_ids;
        q.prompt_ids = NULL;
    }
    if (n == 0) {
        srv_hreq_error(r, 400, "invalid_request_error", "invalid_value", pname, NULL,
                       "Invalid '%s': it makes no tokens.", pname);
        goto out;
    }
    size_t C = s->ctx_limit;
    if (n >= C || (q.has_max && n + q.max_tokens > C)) {
        if (q.has_max)
            srv_hreq_error(r, 400, "invalid_request_error", "context_length_exceeded", pname,
                           NULL, "This model's maximum context length is %zu tokens. However, "
                           "you requested %zu tokens (%zu in the %s, %zu in the completion). "
                           "Please reduce the length of the %s or completion.", C,
                           n + q.max_tokens, n, pname, q.max_tokens, pname);
        else
            srv_hreq_error(r, 400, "invalid_request_error", "context_length_exceeded", pname,
                           NULL, "This model's maximum context length is %zu tokens. However, "
                           "your %s resulted in %zu tokens. Please reduce the length of the "
                           "%s.", C, pname, n, pname);
        goto out;
    }
    if (!(j = job_new()))
        goto oom;
    j->kind = SB_RT_JOB_GENERATE;
    j->ns = tenant->ns;
    j->prompt = ids, j->n_prompt = n;
    ids = NULL;
    size_t room = C - n;
    j->max_gen = q.has_max ? q.max_tokens
                 : s->cfg.default_max_tokens && s->cfg.default_max_tokens < room
                     ? s->cfg.default_max_tokens
                     : room;
    j->sampling = q.sampling;
    j->logprobs = q.logprobs;
    j->top_logprobs = q.top_logprobs;
    if (!q.has_seed)
        j->sampling.seed = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull ^ atomic_fetch_add(&s->ids, 1);
    if (q.n_stop && !(j->stop = calloc(q.n_stop, sizeof *j->stop)))
        goto oom;
    for (size_t i = 0; i < q.n_stop; i++, j->n_stop++)
        if (!(j->stop[i] = strdup(q.stop[i])))
            goto oom;
    j->t_arrival = t_arrival;
    j->on_end = turn_end, j->end_ctx = t;
    req_ctx *c = calloc(1, sizeof *c);
    if (!c)
        goto oom;
    c->srv = s, c->j = j, c->kind = kind, c->stream = q.stream;
    c->toolfmt = toolfmt;
    c->call_seed = atomic_fetch_add(&s->ids, 1) * 0x9e3779b97f4a7c15ull ^ (unsigned long long)t_arrival;
    c->include_usage = q.include_usage;
    c->created = time(NULL);
    snprintf(c->id, sizeof c->id, "%s-%016llx", kind == SRV_API_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)(atomic_fetch_add(&s->ids, 1) * 0x9e3779b97f4a7c15ull ^
                                  (unsigned long long)c->created));
    snprintf(c->session_id, sizeof c->session_id, "%s", sid ? sid : "");
    atomic_init(&c->refs, 1);
    rc = sb_rt_batch_submit(s->engine, j);
    if (rc != SB_OK) {
        free(c);
        if (rc == SB_ERR_BUDGET)
            overloaded(r, "server_is_overloaded", "Every slot is busy and the queue is full "
                       "(--parallel, --max-queue); retry shortly.");
        else
            overloaded(r, "server_shutting_down", "The server is shutting down.");
        goto out;
    }
    /* submitted: the job owns t (its end hook frees it); c owns our reference */
    t = NULL;
    srv_hreq_on_close(r, req_closed, c);
    if (q.stream) {
        atomic_fetch_add(&c->refs, 1);
        srv_hreq_stream(r, job_link(j), read_stream, req_release, c);
    } else {
        srv_hreq_wait(r, job_link(j), poll_done, c);
    }
    j = NULL;
    srv_api_req_free(&q);
    return;
oom:
    srv_hreq_error(r, 500, "server_error", NULL, NULL, NULL, "out of memory");
out:
    if (j)
        j->on_end = NULL;
    sb_rt_job_unref(j);
    free(ids);
    if (t) {
        if (t->sess)
            srv_sessions_release(s->sessions, t->sess, NULL);
        srv_text_free(&t->text);
        free(t);
    }
    srv_api_req_free(&q);
}

/* ---- models, health, metrics ------------------------------------------------------------ */

static json_t *model_json(srv_server *s)
{
    const sb_rt_hparams *hp = &s->m->hp;
    return json_pack("{s:s, s:s, s:I, s:s, s:{s:I, s:I, s:I, s:I, s:s, s:s}}", "id", s->name,
                     "object", "model", "created", (json_int_t)s->started, "owned_by", "snapbank",
                     "meta", "n_ctx", (json_int_t)s->ctx_limit, "n_ctx_train",
                     (json_int_t)hp->n_ctx, "n_vocab", (json_int_t)hp->n_vocab, "n_layers",
                     (json_int_t)hp->n_layers, "chat_template", srv_prompt_template(s->prompt),
                     "file", s->cfg.model);
}

static void models(srv_server *s, srv_hreq *r, const char *id)
{
    if (!authorize(s, r))
        return;
    if (id && strcmp(id, s->name) != 0) {
        srv_hreq_error(r, 404, "invalid_request_error", "model_not_found", "model", NULL,
                       "The model `%s` does not exist or you do not have access to it.", id);
        return;
    }
    srv_hreq_json(r, 200, id ? model_json(s)
                             : json_pack("{s:s, s:[o]}", "object", "list", "data", model_json(s)),
                  NULL);
}

static void health(srv_server *s, srv_hreq *r)
{
    size_t running, waiting;
    sb_rt_batch_counts(s->engine, &running, &waiting);
    bool draining = atomic_load(&s->draining);
    srv_hreq_json(r, draining ? 503 : 200,
                  json_pack("{s:s, s:s, s:I, s:I, s:I}", "status",
                            draining ? "shutting_down" : "ok", "model", s->name, "slots",
                            (json_int_t)s->cfg.parallel, "running", (json_int_t)running,
                            "waiting", (json_int_t)waiting),
                  NULL);
}

/* Whether the request may read /metrics (--metrics-auth; answers 401 if
 * not). */
static bool authorize_metrics(srv_server *s, srv_hreq *r)
{
    if (s->cfg.metrics_auth == SRV_METRICS_OPEN)
        return true;
    const char *auth = srv_hreq_header(r, "Authorization");
    if (s->admin_key[0] && srv_bearer_is(auth, s->admin_key))
        return true;
    if (s->cfg.metrics_auth == SRV_METRICS_KEY && srv_tenants_keyed(s->tenants) &&
        srv_tenants_auth(s->tenants, auth))
        return true;
    srv_hreq_error(r, 401, "invalid_request_error", auth ? "invalid_api_key" : NULL, NULL, NULL,
                   "%s", s->cfg.metrics_auth == SRV_METRICS_ADMIN
                             ? "/metrics needs the admin key (Authorization: Bearer KEY)."
                             : "/metrics needs an API key or the admin key (Authorization: "
                               "Bearer KEY).");
    return false;
}

static void metrics(srv_server *s, srv_hreq *r)
{
    if (!authorize_metrics(s, r))
        return;
    srv_gauges g = { 0 };
    sb_rt_batch_counts(s->engine, &g.running, &g.waiting);
    g.queue_cap = s->cfg.max_queue;
    g.slots = s->cfg.parallel;
    g.sessions = srv_sessions_count(s->sessions);
    srv_http_counts hc;
    srv_http_guard_counts(s->http, &hc);
    g.cut_header_timeout = hc.header_timeout, g.cut_room = hc.room;
    g.cut_per_ip = hc.per_ip, g.cut_bad_line = hc.bad_request_line;
    pthread_rwlock_rdlock(&s->bank_lock);
    g.have_stats = sb_store_stats(s->st, &g.stats) == SB_OK;
    pthread_rwlock_unlock(&s->bank_lock);
    g.written_last_hour = srv_written_last_hour(s, &g.stats);
    g.budget_per_hour = s->store_cfg.dir ? s->store_cfg.write_budget_bytes_per_hour : 0;
    char *text;
    size_t len;
    if (srv_metrics_render(s->mx, &g, &text, &len) != SB_OK) {
        srv_hreq_error(r, 500, "server_error", NULL, NULL, NULL, "out of memory");
        return;
    }
    srv_hreq_respond(r, 200, "text/plain; version=0.0.4; charset=utf-8", text, len, NULL);
    free(text);
}

/* ---- sessions ----------------------------------------------------------------------- */

static void session(srv_server *s, srv_hreq *r, const char *id, bool del)
{
    srv_tenant *t = authorize(s, r);
    if (!t)
        return;
    if (!srv_session_id_valid(id)) {
        srv_hreq_error(r, 400, "invalid_request_error", "invalid_value", "session_id", NULL,
                       "Invalid session id: use 1-128 letters, digits, '.', '_' or '-', not "
                       "starting with '.'.");
        return;
    }
    int rc;
    if (del) {
        rc = srv_sessions_delete(s->sessions, t, id);
        if (rc == SB_OK)
            srv_hreq_json(r, 200, json_pack("{s:s, s:s, s:b}", "id", id, "object",
                                            "session.deleted", "deleted", 1), NULL);
    } else {
        json_t *o;
        uint32_t *tok;
        size_t n;
        rc = srv_sessions_get(s->sessions, t, id, &o, &tok, &n);
        if (rc == SB_OK) {
            /* what of it the bank holds now, and where */
            sb_match_info mi = { 0 };
            pthread_rwlock_rdlock(&s->bank_lock);
            sb_match *m = NULL;
            if (n && sb_ns_match(t->ns, tok, n, &m) == SB_OK)
                sb_match_get_info(m, &mi);
            sb_match_release(m);
            pthread_rwlock_unlock(&s->bank_lock);
            free(tok);
            json_object_set_new(o, "bank", json_pack("{s:I, s:I, s:I}", "restorable_tokens",
                                                     (json_int_t)mi.n_tokens, "pages_ram",
                                                     (json_int_t)mi.n_pages_ram, "pages_disk",
                                                     (json_int_t)mi.n_pages_disk));
            srv_hreq_json(r, 200, o, NULL);
        }
    }
    if (rc == SB_ERR_NOT_FOUND)
        srv_hreq_error(r, 404, "invalid_request_error", "session_not_found", "session_id", NULL,
                       "No session found with id '%s'.", id);
    else if (rc == SB_ERR_LOCKED)
        srv_hreq_error(r, 409, "invalid_request_error", "session_busy", "session_id", NULL,
                       "Session '%s' is answering a request.", id);
    else if (rc != SB_OK)
        srv_hreq_error(r, 500, "server_error", NULL, NULL, NULL, "%s", sb_strerror(rc));
}

/* ---- the bank (admin) --------------------------------------------------------------- */

/* A counter as JSON: null for "no limit" (UINT64_MAX and the like). */
static json_t *u64_json(uint64_t v)
{
    return v > (uint64_t)INT64_MAX ? json_null() : json_integer((json_int_t)v);
}

/* {"reason": v, ...} for counters indexed by reason. */
static json_t *by_reason(const char *(*name)(int), const uint64_t *v, int n)
{
    json_t *o = json_object();
    for (int i = 0; o && i < n; i++)
        json_object_set_new(o, name(i), u64_json(v[i]));
    return o;
}

/* The store's stats and each tenant's namespace as JSON (bank_lock held). */
static json_t *stats_json(srv_server *s)
{
    sb_stats st;
    json_t *o = s->st && sb_store_stats(s->st, &st) == SB_OK ? json_object() : NULL;
    if (!o)
        return NULL;
#define SB_JSON_FIELD(f) json_object_set_new(o, #f, u64_json(st.f));
    SB_STATS_U64(SB_JSON_FIELD)
#undef SB_JSON_FIELD
    json_object_set_new(o, "index_bytes_per_token", json_real(st.index_bytes_per_token));
    json_object_set_new(o, "disk_write_amplification", json_real(st.disk_write_amplification));
    json_object_set_new(o, "misses", by_reason(sb_miss_name, st.misses, SB_MISS__COUNT));
    json_object_set_new(o, "miss_tokens_by_reason",
                        by_reason(sb_miss_name, st.miss_tokens_by_reason, SB_MISS__COUNT));
    json_object_set_new(o, "disk_denials", by_reason(sb_deny_name, st.disk_denials, SB_DENY__COUNT));
    json_object_set_new(o, "disk_denied_bytes",
                        by_reason(sb_deny_name, st.disk_denied_bytes, SB_DENY__COUNT));
    json_object_set_new(o, "disk_written_bytes_last_hour",
                        u64_json(srv_written_last_hour(s, &st)));
    json_t *ts = json_array();
    for (size_t i = 0; i < srv_tenants_count(s->tenants); i++) {
        srv_tenant *t = srv_tenants_at(s->tenants, i);
        sb_ns_info ni;
        if (sb_ns_get_info(t->ns, &ni) == SB_OK)
            json_array_append_new(ts, json_pack("{s:s, s:I, s:I, s:I}", "tenant", t->name,
                                                "ram_bytes", (json_int_t)ni.ram_bytes,
                                                "indexed_pages", (json_int_t)ni.indexed_pages,
                                                "index_tokens", (json_int_t)ni.index_tokens));
    }
    json_object_set_new(o, "tenants", ts);
    size_t running, waiting;
    sb_rt_batch_counts(s->engine, &running, &waiting);
    json_object_set_new(o, "server", json_pack("{s:I, s:I, s:I, s:I, s:s, s:b}", "slots",
                                               (json_int_t)s->cfg.parallel, "running",
                                               (json_int_t)running, "waiting",
                                               (json_int_t)waiting, "sessions",
                                               (json_int_t)srv_sessions_count(s->sessions),
                                               "bank_dir", s->cfg.bank_dir ? s->cfg.bank_dir : "",
                                               "disk_tier", s->store_cfg.dir != NULL));
    return o;
}

static void bank_stats(srv_server *s, srv_hreq *r)
{
    pthread_rwlock_rdlock(&s->bank_lock);
    json_t *o = stats_json(s);
    pthread_rwlock_unlock(&s->bank_lock);
    if (o)
        srv_hreq_json(r, 200, o, NULL);
    else
        srv_hreq_error(r, 500, "server_error", NULL, NULL, NULL, "out of memory");
}

static void bank_flush(srv_server *s, srv_hreq *r)
{
    size_t failed = 0, written = srv_sessions_flush(s->sessions, &failed);
    pthread_rwlock_rdlock(&s->bank_lock);
    int rc = sb_store_flush(s->st);
    json_t *o = rc == SB_OK ? stats_json(s) : NULL;
    pthread_rwlock_unlock(&s->bank_lock);
    if (rc != SB_OK) {
        srv_hreq_error(r, 500, "server_error", "flush_failed", NULL, NULL,
                       "The bank could not be flushed: %s.", sb_strerror(rc));
        return;
    }
    if (!o) {
        srv_hreq_error(r, 500, "server_error", NULL, NULL, NULL, "out of memory");
        return;
    }
    json_object_set_new(o, "flushed", json_true());
    json_object_set_new(o, "sessions_written", json_integer((json_int_t)written));
    json_object_set_new(o, "sessions_failed", json_integer((json_int_t)failed));
    srv_hreq_json(r, 200, o, NULL);
}

/* A bank clear: runs on the engine thread while no request runs. */
typedef struct clear_ctx {
    srv_server *srv;
    int rc;
    uint64_t pages, bytes, disk_bytes;
} clear_ctx;

static void clear_barrier(void *ctx)
{
    clear_ctx *c = ctx;
    srv_server *s = c->srv;
    pthread_rwlock_wrlock(&s->bank_lock);
    sb_stats st;
    if (sb_store_stats(s->st, &st) == SB_OK)
        c->pages = st.indexed_pages + st.disk_pages, c->bytes = st.indexed_bytes,
        c->disk_bytes = st.disk_bytes;
    srv_bank_close(s);
    c->rc = srv_bank_open(s, true);
    pthread_rwlock_unlock(&s->bank_lock);
}

/* Held by the request (released when it closes, with its job reference)
 * and by the job (released by its end hook, after the barrier ran). */
typedef struct clear_req {
    sb_rt_job *j;
    clear_ctx c;
    atomic_int refs;
} clear_req;

static void clear_unref(clear_req *q)
{
    if (atomic_fetch_sub(&q->refs, 1) == 1)
        free(q);
}

static bool poll_clear(void *ctx, srv_hreq *r)
{
    clear_req *q = ctx;
    if (!q->j->done)
        return false;
    if (q->j->finish == SB_RT_FINISH_CANCELLED)
        srv_hreq_error(r, 503, "service_unavailable_error", "server_shutting_down", NULL, retry1,
                       "The server is shutting down.");
    else if (q->c.rc != SB_OK)
        srv_hreq_error(r, 500, "server_error", NULL, NULL, NULL,
                       "The bank could not be opened again after clearing: %s.",
                       sb_strerror(q->c.rc));
    else
        srv_hreq_json(r, 200, json_pack("{s:b, s:I, s:I, s:I}", "cleared", 1, "pages_dropped",
                                        (json_int_t)q->c.pages, "ram_bytes_dropped",
                                        (json_int_t)q->c.bytes, "disk_bytes_dropped",
                                        (json_int_t)q->c.disk_bytes), NULL);
    return true;
}

static void clear_closed(void *ctx, bool aborted)
{
    (void)aborted; /* a clear goes on without its client */
    clear_req *q = ctx;
    pthread_mutex_lock(&q->j->mu);
    job_link(q->j)->parked = false;
    job_link(q->j)->conn = NULL;
    pthread_mutex_unlock(&q->j->mu);
    sb_rt_job_unref(q->j);
    clear_unref(q);
}

static void clear_end(sb_rt_job *j, void *ctx)
{
    (void)j;
    clear_unref(ctx);
}

static void bank_clear(srv_server *s, srv_hreq *r)
{
    clear_req *q = calloc(1, sizeof *q);
    sb_rt_job *j = q ? job_new() : NULL;
    if (!j) {
        free(q);
        srv_hreq_error(r, 500, "server_error", NULL, NULL, NULL, "out of memory");
        return;
    }
    q->j = j;
    q->c.srv = s;
    atomic_init(&q->refs, 2);
    j->kind = SB_RT_JOB_BARRIER;
    j->barrier = clear_barrier, j->barrier_ctx = &q->c;
    j->on_end = clear_end, j->end_ctx = q;
    int rc = sb_rt_batch_submit(s->engine, j);
    if (rc != SB_OK) {
        sb_rt_job_unref(j);
        free(q);
        overloaded(r, rc == SB_ERR_BUDGET ? "server_is_overloaded" : "server_shutting_down",
                   rc == SB_ERR_BUDGET ? "The queue is full; retry shortly."
                                       : "The server is shutting down.");
        return;
    }
    srv_hreq_on_close(r, clear_closed, q);
    srv_hreq_wait(r, job_link(j), poll_clear, q);
}

/* ---- the router --------------------------------------------------------------------- */

typedef struct route {
    const char *path;     /* exact, or a prefix ending in '/' for PATH/ID */
    const char *methods;  /* "GET", "POST", "GET, DELETE" */
    const char *label;    /* for metrics */
} route;

static const route routes[] = {
    { "/v1/chat/completions", "POST", "/v1/chat/completions" },
    { "/v1/completions", "POST", "/v1/completions" },
    { "/v1/models", "GET", "/v1/models" },
    { "/v1/models/", "GET", "/v1/models" },
    { "/v1/sessions/", "GET, DELETE", "/v1/sessions" },
    { "/health", "GET", "/health" },
    { "/metrics", "GET", "/metrics" },
    { "/v1/bank/stats", "GET", "/v1/bank/stats" },
    { "/v1/bank/flush", "POST", "/v1/bank/flush" },
    { "/v1/bank/clear", "POST", "/v1/bank/clear" },
};

/* ---- CORS -------------------------------------------------------------------------

   With --cors-origin, a browser page from a listed origin (or any, with
   "*") may call the server: each answer to a request whose Origin is
   allowed carries Access-Control-Allow-Origin (that origin) and Vary:
   Origin, and a preflight (OPTIONS with Access-Control-Request-Method) is
   answered 204 with the methods and the headers clients send
   (Authorization, Content-Type, X-Session-Id). A preflight from another
   origin gets 403 and no CORS headers. Without --cors-origin nothing
   changes: an OPTIONS is 405, and no answer carries CORS headers, which a
   browser takes as "not allowed" whatever the status. */

static bool cors_allowed(const srv_server *s, const char *origin)
{
    for (size_t i = 0; origin && i < s->cfg.n_cors_origins; i++)
        if (!strcmp(s->cfg.cors_origins[i], "*") || !strcmp(s->cfg.cors_origins[i], origin))
            return true;
    return false;
}

/* An OPTIONS request to a route with methods, with --cors-origin. */
static void preflight(srv_server *s, srv_hreq *r, const char *methods)
{
    const char *origin = srv_hreq_header(r, "Origin");
    if (origin && srv_hreq_header(r, "Access-Control-Request-Method") &&
        !cors_allowed(s, origin)) {
        srv_hreq_error(r, 403, "invalid_request_error", "origin_not_allowed", NULL, NULL,
                       "Cross-origin requests from %s are not allowed (--cors-origin).", origin);
        return;
    }
    char allow[64];
    snprintf(allow, sizeof allow, "%s, OPTIONS", methods);
    const char *h[] = { "Allow", allow, "Access-Control-Allow-Methods", allow,
                        "Access-Control-Allow-Headers",
                        "Authorization, Content-Type, X-Session-Id",
                        "Access-Control-Max-Age", "600", NULL };
    srv_hreq_respond(r, 204, NULL, "", 0, h);
}

void srv_route(void *app, srv_hreq *r)
{
    srv_server *s = app;
    const char *path = srv_hreq_path(r), *method = srv_hreq_method(r);
    const char *origin = srv_hreq_header(r, "Origin");
    if (cors_allowed(s, origin)) {
        srv_hreq_add_header(r, "Access-Control-Allow-Origin", origin);
        srv_hreq_add_header(r, "Access-Control-Expose-Headers", "Retry-After");
    }
    if (s->cfg.n_cors_origins)
        srv_hreq_add_header(r, "Vary", "Origin");
    const route *rt = NULL;
    const char *id = NULL;
    for (size_t i = 0; i < sizeof routes / sizeof *routes && !rt; i++) {
        size_t n = strlen(routes[i].path);
        if (routes[i].path[n - 1] == '/') {
            if (!strncmp(path, routes[i].path, n) && path[n] && !strchr(path + n, '/'))
                rt = &routes[i], id = path + n;
        } else if (!strcmp(path, routes[i].path)) {
            rt = &routes[i];
        }
    }
    if (!rt) {
        srv_hreq_set_route(r, "other");
        srv_hreq_error(r, 404, "invalid_request_error", NULL, NULL, NULL,
                       "Invalid URL (%s %s)", method, path);
        return;
    }
    srv_hreq_set_route(r, rt->label);
    if (s->cfg.n_cors_origins && !strcmp(method, "OPTIONS")) {
        preflight(s, r, rt->methods);
        return;
    }
    /* the method must be one of the route's, as a whole word */
    const char *m = strstr(rt->methods, method);
    size_t ml = strlen(method);
    if (!ml || !m || (m != rt->methods && m[-1] != ' ') || (m[ml] && m[ml] != ',')) {
        const char *allow[] = { "Allow", rt->methods, NULL };
        srv_hreq_error(r, 405, "invalid_request_error", "method_not_allowed", NULL, allow,
                       "Invalid method for URL (%s %s): use %s.", method, path, rt->methods);
        return;
    }
    if (!strcmp(rt->label, "/v1/chat/completions"))
        completion(s, r, SRV_API_CHAT);
    else if (!strcmp(rt->label, "/v1/completions"))
        completion(s, r, SRV_API_COMPLETION);
    else if (!strcmp(rt->label, "/v1/models"))
        models(s, r, id);
    else if (!strcmp(rt->label, "/v1/sessions"))
        session(s, r, id, !strcmp(method, "DELETE"));
    else if (!strcmp(rt->label, "/health"))
        health(s, r);
    else if (!strcmp(rt->label, "/metrics"))
        metrics(s, r);
    else if (authorize_admin(s, r)) {
        if (!strcmp(rt->label, "/v1/bank/stats"))
            bank_stats(s, r);
        else if (!strcmp(rt->label, "/v1/bank/flush"))
            bank_flush(s, r);
        else
            bank_clear(s, r);
    }
}
