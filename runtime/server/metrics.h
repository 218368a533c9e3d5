/* metrics.h -- what snapbank serve counts, and GET /metrics: the
 * Prometheus text exposition format (version 0.0.4), written here.
 *
 * Names follow vLLM's (a "snapbank:" prefix, _total counters, _seconds
 * histograms); tokens, not requests, where vLLM counts tokens:
 *
 *   snapbank:requests_total{endpoint,status}       HTTP requests answered
 *   snapbank:requests_finished_total{finished_reason}  stop|length|cancelled|error
 *   snapbank:requests_client_gone_total            ...of them cancelled because
 *                                                  the client left first
 *   snapbank:prompt_tokens_total, snapbank:generation_tokens_total
 *   snapbank:prefix_cache_queries_total            prompt tokens looked up
 *   snapbank:prefix_cache_hits_total{tier}         ...restored: ram | disk
 *   snapbank:prefix_cache_misses_total{reason}     ...computed, by why
 *   snapbank:turns_total{cache_mode}               cold | warm_prefix | ssd | remote
 *   snapbank:prompt_cached_fraction                histogram (cached / prompt
 *                                                  tokens, per turn)
 *   snapbank:time_to_first_token_seconds           histogram (from arrival)
 *   snapbank:time_per_output_token_seconds         histogram (between tokens)
 *   snapbank:restore_seconds                       histogram (match + restore)
 *   snapbank:forward_pass_sequences                histogram (batch width)
 *   snapbank:connections_closed_total{reason}      header_timeout | room |
 *                                                  per_ip | bad_request_line
 *   gauges of the moment: requests running and waiting, the bank's bytes
 *   against each budget, disk bytes written against the hourly budget,
 *   write amplification, sessions held (srv_gauges)
 *
 * Thread safety: every call may come from any thread (one mutex).
 */
#ifndef SB_SRV_METRICS_H
#define SB_SRV_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "batch/batch.h"
#include "snapbank.h"

typedef struct srv_metrics srv_metrics;

/* The moment's gauges, gathered by the server when /metrics is asked. */
typedef struct srv_gauges {
    size_t running, waiting, queue_cap, slots, sessions;
    int have_stats;           /* stats below are valid */
    sb_stats stats;           /* the store's */
    uint64_t written_last_hour;   /* disk bytes written in the last hour */
    uint64_t budget_per_hour;     /* the store's hourly write budget */
    uint64_t cut_header_timeout;  /* connections closed: header too late */
    uint64_t cut_room;            /* ...: room made for new clients */
    uint64_t cut_per_ip;          /* ...: over --max-connections-per-ip */
    uint64_t cut_bad_line;        /* ...: a request line that is not HTTP */
} srv_gauges;

/* srv_metrics_new -- zeroed counters. Returns: NULL when out of memory. */
srv_metrics *srv_metrics_new(void);
void srv_metrics_free(srv_metrics *mx);

/* srv_metrics_request -- one HTTP request answered: endpoint is a route
 * label (a static string), status the HTTP status. */
void srv_metrics_request(srv_metrics *mx, const char *endpoint, unsigned status);

/* srv_metrics_tokenizer_mismatch -- the builtin tokenizer and llama.cpp's
 * split a prompt apart (--engine llama.cpp). */
void srv_metrics_tokenizer_mismatch(srv_metrics *mx);

/* srv_metrics_client_gone -- a completion's client left before its
 * answer was done (its generation is cancelled). */
void srv_metrics_client_gone(srv_metrics *mx);

/* A finished turn's figures. */
typedef struct srv_turn_figures {
    size_t prompt_tokens, cached_ram, cached_disk, generated; /* cached_ram holds
                                 the shared tier's tokens too */
    const char *miss_reason;  /* why prompt > cached ("none" otherwise) */
    const char *cache_mode;   /* "cold", "warm_prefix", "ssd" */
    sb_rt_finish finish;
    double ttft_s, restore_s; /* < 0: not measured */
} srv_turn_figures;

/* srv_metrics_turn -- count a finished request's tokens and times. */
void srv_metrics_turn(srv_metrics *mx, const srv_turn_figures *f);

/* srv_metrics_token_gap -- seconds between two tokens of one request. */
void srv_metrics_token_gap(srv_metrics *mx, double s);

/* srv_metrics_pass -- a forward pass ran with this many sequences. */
void srv_metrics_pass(srv_metrics *mx, size_t sequences);

/* srv_metrics_render -- the exposition text of every metric and g into
 * *out (malloc'd, NUL-terminated, caller frees), *len its length.
 * Returns: SB_OK; SB_ERR_NOMEM. */
int srv_metrics_render(srv_metrics *mx, const srv_gauges *g, char **out, size_t *len);

#endif /* SB_SRV_METRICS_H */
