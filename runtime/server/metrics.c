/* metrics.c -- counters, histograms and their Prometheus text (metrics.h). */
#include "server/metrics.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LABELS 64 /* distinct (endpoint, status) and reason labels kept */

typedef struct hist {
    const double *le;   /* upper bounds, ascending */
    size_t n;
    uint64_t count[32]; /* per bucket (not cumulative); [n] is +Inf */
    double sum;
    uint64_t total;
} hist;

typedef struct labelled {
    const char *a;      /* static strings */
    unsigned b;
    uint64_t v;
} labelled;

static const double ttft_le[] = { 0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
                                  0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0 };
static const double tpot_le[] = { 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1,
                                  0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5 };
static const double restore_le[] = { 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1,
                                     0.25, 0.5, 1.0, 2.5, 5.0 };
/* the share of a prompt restored: 0 is a cold turn, 1 all of it */
static const double share_le[] = { 0, 0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1 };
static const double seqs_le[] = { 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64 };

static const char *const finish_names[SB_RT_FINISH__COUNT] = { "stop", "length", "cancelled",
                                                             "error" };
static const char *const modes[4] = { "cold", "warm_prefix", "ssd", "remote" };

struct srv_metrics {
    pthread_mutex_t mu;
    labelled req[MAX_LABELS];
    size_t n_req;
    labelled miss[MAX_LABELS]; /* tokens by reason */
    size_t n_miss;
    uint64_t finished[SB_RT_FINISH__COUNT];
    uint64_t client_gone;      /* completions whose client left first */
    uint64_t tok_mismatch;     /* prompts the two tokenizers split apart */
    uint64_t prompt, generated, queries, hit_ram, hit_disk, turns[4];
    hist ttft, tpot, restore, seqs, share;
};

static void hist_init(hist *h, const double *le, size_t n)
{
    h->le = le, h->n = n;
}

static void hist_add(hist *h, double v)
{
    size_t i = 0;
    while (i < h->n && v > h->le[i])
        i++;
    h->count[i]++;
    h->sum += v;
    h->total++;
}

srv_metrics *srv_metrics_new(void)
{
    srv_metrics *mx = calloc(1, sizeof *mx);
    if (!mx)
        return NULL;
    pthread_mutex_init(&mx->mu, NULL);
    hist_init(&mx->ttft, ttft_le, sizeof ttft_le / sizeof *ttft_le);
    hist_init(&mx->tpot, tpot_le, sizeof tpot_le / sizeof *tpot_le);
    hist_init(&mx->restore, restore_le, sizeof restore_le / sizeof *restore_le);
    hist_init(&mx->seqs, seqs_le, sizeof seqs_le / sizeof *seqs_le);
    hist_init(&mx->share, share_le, sizeof share_le / sizeof *share_le);
    return mx;
}

void srv_metrics_free(srv_metrics *mx)
{
    if (!mx)
        return;
    pthread_mutex_destroy(&mx->mu);
    free(mx);
}

/* Add v to the entry (a, b) of a label table (a new entry when there is
 * room; past MAX_LABELS the rest are dropped). */
static void bump(labelled *t, size_t *n, const char *a, unsigned b, uint64_t v)
{
    for (size_t i = 0; i < *n; i++)
        if (t[i].b == b && !strcmp(t[i].a, a)) {
            t[i].v += v;
            return;
        }
    if (*n < MAX_LABELS)
        t[(*n)++] = (labelled){ a, b, v };
}

void srv_metrics_request(srv_metrics *mx, const char *endpoint, unsigned status)
{
    pthread_mutex_lock(&mx->mu);
    bump(mx->req, &mx->n_req, endpoint, status, 1);
    pthread_mutex_unlock(&mx->mu);
}

void srv_metrics_turn(srv_metrics *mx, const srv_turn_figures *f)
{
    pthread_mutex_lock(&mx->mu);
    mx->finished[f->finish]++;
    mx->prompt += f->prompt_tokens;
    mx->generated += f->generated;
    mx->queries += f->prompt_tokens;
    mx->hit_ram += f->cached_ram;
    mx->hit_disk += f->cached_disk;
    size_t missed = f->prompt_tokens - f->cached_ram - f->cached_disk;
    if (missed && f->miss_reason)
        bump(mx->miss, &mx->n_miss, f->miss_reason, 0, missed);
    for (int i = 0; i < 4; i++)
        if (f->cache_mode && !strcmp(f->cache_mode, modes[i]))
            mx->turns[i]++;
    if (f->cache_mode && f->prompt_tokens) /* the turn began: its share restored */
        hist_add(&mx->share, (double)(f->cached_ram + f->cached_disk) / (double)f->prompt_tokens);
    if (f->ttft_s >= 0)
        hist_add(&mx->ttft, f->ttft_s);
    if (f->restore_s >= 0)
        hist_add(&mx->restore, f->restore_s);
    pthread_mutex_unlock(&mx->mu);
}

void srv_metrics_client_gone(srv_metrics *mx)
{
    pthread_mutex_lock(&mx->mu);
    mx->client_gone++;
    pthread_mutex_unlock(&mx->mu);
}

void srv_metrics_token_gap(srv_metrics *mx, double s)
{
    pthread_mutex_lock(&mx->mu);
    hist_add(&mx->tpot, s);
    pthread_mutex_unlock(&mx->mu);
}

void srv_metrics_tokenizer_mismatch(srv_metrics *mx)
{
    pthread_mutex_lock(&mx->mu);
    mx->tok_mismatch++;
    pthread_mutex_unlock(&mx->mu);
}

void srv_metrics_pass(srv_metrics *mx, size_t sequences)
{
    pthread_mutex_lock(&mx->mu);
    hist_add(&mx->seqs, (double)sequences);
    pthread_mutex_unlock(&mx->mu);
}

/* ---- the text --------------------------------------------------------------------- */

typedef struct out {
    char *b;
    size_t len, cap;
    int oom;
} out;

__attribute__((format(printf, 2, 3))) static void pr(out *o, const char *fmt, ...)
{
    for (;;) {
        if (o->oom)
            return;
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(o->b ? o->b + o->len : NULL, o->b ? o->cap - o->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            o->oom = 1;
            return;
        }
        if (o->b && o->len + (size_t)n < o->cap) {
            o->len += (size_t)n;
            return;
        }
        size_t cap = o->cap ? o->cap * 2 : 16384;
        while (cap < o->len + (size_t)n + 1)
            cap *= 2;
        char *nb = realloc(o->b, cap);
        if (!nb) {
            o->oom = 1;
            return;
        }
        o->b = nb, o->cap = cap;
    }
}

static void head(out *o, const char *name, const char *type, const char *help)
{
    pr(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void scalar(out *o, const char *name, const char *type, const char *help, double v)
{
    head(o, name, type, help);
    pr(o, "%s %.17g\n", name, v);
}

static void histogram(out *o, const char *name, const char *help, const hist *h)
{
    head(o, name, "histogram", help);
    uint64_t cum = 0;
    for (size_t i = 0; i < h->n; i++) {
        cum += h->count[i];
        pr(o, "%s_bucket{le=\"%g\"} %llu\n", name, h->le[i], (unsigned long long)cum);
    }
    pr(o, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)h->total);
    pr(o, "%s_sum %.17g\n%s_count %llu\n", name, h->sum, name, (unsigned long long)h->total);
}

int srv_metrics_render(srv_metrics *mx, const srv_gauges *g, char **text, size_t *len)
{
    out o = { 0 };
    pthread_mutex_lock(&mx->mu);
    head(&o, "snapbank:requests_total", "counter", "HTTP requests answered, by endpoint and status.");
    for (size_t i = 0; i < mx->n_req; i++)
        pr(&o, "snapbank:requests_total{endpoint=\"%s\",status=\"%u\"} %llu\n", mx->req[i].a,
           mx->req[i].b, (unsigned long long)mx->req[i].v);
    head(&o, "snapbank:requests_finished_total", "counter",
         "Completions finished, by why (stop, length, cancelled, error).");
    for (int i = 0; i < SB_RT_FINISH__COUNT; i++)
        pr(&o, "snapbank:requests_finished_total{finished_reason=\"%s\"} %llu\n", finish_names[i],
           (unsigned long long)mx->finished[i]);
    scalar(&o, "snapbank:requests_client_gone_total", "counter",
           "Completions whose client left before the answer was done; their generation "
           "was cancelled.", (double)mx->client_gone);
    scalar(&o, "snapbank:tokenizer_mismatch_total", "counter",
           "Prompts the builtin tokenizer split otherwise than llama.cpp's (--engine "
           "llama.cpp; llama.cpp's tokens were used).", (double)mx->tok_mismatch);
    scalar(&o, "snapbank:prompt_tokens_total", "counter", "Prompt tokens of finished requests.",
           (double)mx->prompt);
    scalar(&o, "snapbank:generation_tokens_total", "counter", "Tokens generated.",
           (double)mx->generated);
    scalar(&o, "snapbank:prefix_cache_queries_total", "counter",
           "Prompt tokens looked up in the bank.", (double)mx->queries);
    head(&o, "snapbank:prefix_cache_hits_total", "counter",
         "Prompt tokens restored from the bank, by the tier their pages came from.");
    pr(&o, "snapbank:prefix_cache_hits_total{tier=\"ram\"} %llu\n",
       (unsigned long long)mx->hit_ram);
    pr(&o, "snapbank:prefix_cache_hits_total{tier=\"disk\"} %llu\n",
       (unsigned long long)mx->hit_disk);
    head(&o, "snapbank:prefix_cache_misses_total", "counter",
         "Prompt tokens computed rather than restored, by why the bank's prefix ended.");
    for (size_t i = 0; i < mx->n_miss; i++)
        pr(&o, "snapbank:prefix_cache_misses_total{reason=\"%s\"} %llu\n", mx->miss[i].a,
           (unsigned long long)mx->miss[i].v);
    head(&o, "snapbank:turns_total", "counter", "Finished requests by where their prompt came from.");
    for (int i = 0; i < 4; i++)
        pr(&o, "snapbank:turns_total{cache_mode=\"%s\"} %llu\n", modes[i],
           (unsigned long long)mx->turns[i]);
    histogram(&o, "snapbank:prompt_cached_fraction",
              "The share of each prompt's tokens restored from the bank (0: cold; a "
              "warm_prefix turn may be anywhere above 0).", &mx->share);
    histogram(&o, "snapbank:time_to_first_token_seconds",
              "From a request's arrival to its first token.", &mx->ttft);
    histogram(&o, "snapbank:time_per_output_token_seconds",
              "Between two tokens of one request.", &mx->tpot);
    histogram(&o, "snapbank:restore_seconds",
              "Matching a prompt in the bank and restoring its pages.", &mx->restore);
    histogram(&o, "snapbank:forward_pass_sequences",
              "Sequences that shared one forward pass (continuous batching).", &mx->seqs);
    pthread_mutex_unlock(&mx->mu);

    head(&o, "snapbank:connections_closed_total", "counter",
         "Connections the server closed before their request: its header did not come "
         "whole within --header-timeout (header_timeout), the oldest connection still "
         "waiting for its header made room for a new client (room), its address had "
         "--max-connections-per-ip open (per_ip), its request line was not HTTP, answered "
         "400 (bad_request_line).");
    pr(&o, "snapbank:connections_closed_total{reason=\"header_timeout\"} %llu\n",
       (unsigned long long)g->cut_header_timeout);
    pr(&o, "snapbank:connections_closed_total{reason=\"room\"} %llu\n",
       (unsigned long long)g->cut_room);
    pr(&o, "snapbank:connections_closed_total{reason=\"per_ip\"} %llu\n",
       (unsigned long long)g->cut_per_ip);
    pr(&o, "snapbank:connections_closed_total{reason=\"bad_request_line\"} %llu\n",
       (unsigned long long)g->cut_bad_line);
    scalar(&o, "snapbank:num_requests_running", "gauge", "Requests in a slot.", (double)g->running);
    scalar(&o, "snapbank:num_requests_waiting", "gauge", "Requests waiting for a slot.",
           (double)g->waiting);
    scalar(&o, "snapbank:num_requests_waiting_limit", "gauge",
           "Most requests that may wait (--max-queue); beyond it 503.", (double)g->queue_cap);
    scalar(&o, "snapbank:num_slots", "gauge", "Requests served at once (--parallel).",
           (double)g->slots);
    scalar(&o, "snapbank:sessions", "gauge", "Sessions held in memory.", (double)g->sessions);
    if (g->have_stats) {
        const sb_stats *s = &g->stats;
        scalar(&o, "snapbank:bank_ram_bytes", "gauge", "Bytes of pages and point states in RAM.",
               (double)s->ram_bytes);
        scalar(&o, "snapbank:bank_ram_bytes_limit", "gauge", "The RAM budget (--ram-mib).",
               (double)s->ram_bytes_limit);
        scalar(&o, "snapbank:bank_ram_pages", "gauge", "Pages in RAM.", (double)s->ram_pages);
        scalar(&o, "snapbank:bank_indexed_bytes", "gauge", "Bytes of pages the index holds.",
               (double)s->indexed_bytes);
        scalar(&o, "snapbank:bank_disk_bytes", "gauge", "Bytes of live records on disk.",
               (double)s->disk_bytes);
        scalar(&o, "snapbank:bank_disk_bytes_limit", "gauge", "The disk tier's cap.",
               (double)s->disk_bytes_limit);
        scalar(&o, "snapbank:bank_evictions_total", "counter", "Pages evicted from RAM.",
               (double)s->evictions);
        scalar(&o, "snapbank:disk_written_bytes_total", "counter",
               "Bytes written to the device since the server started.",
               (double)s->disk_write_bytes);
        scalar(&o, "snapbank:disk_written_bytes_last_hour", "gauge",
               "Bytes written to the device in the last hour.", (double)g->written_last_hour);
        scalar(&o, "snapbank:disk_write_budget_bytes_per_hour", "gauge",
               "The disk tier's hourly write budget.", (double)g->budget_per_hour);
        scalar(&o, "snapbank:disk_write_budget_available_bytes", "gauge",
               "What the write budget's bucket allows now.", (double)s->disk_budget_bytes);
        scalar(&o, "snapbank:disk_queued_bytes", "gauge", "Bytes queued for the disk writer.",
               (double)s->disk_queued_bytes);
        scalar(&o, "snapbank:disk_write_amplification", "gauge",
               "Device bytes written per byte of KV state written.",
               s->disk_write_amplification);
        head(&o, "snapbank:disk_write_denials_total", "counter",
             "Pages and point states the disk tier did not write, by reason.");
        for (int i = 0; i < SB_DENY__COUNT; i++)
            pr(&o, "snapbank:disk_write_denials_total{reason=\"%s\"} %llu\n", sb_deny_name(i),
               (unsigned long long)s->disk_denials[i]);
    }
    if (o.oom) {
        free(o.b);
        return SB_ERR_NOMEM;
    }
    *text = o.b, *len = o.len;
    return SB_OK;
}
