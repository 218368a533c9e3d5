/* server_int.h -- what server.c (the process: start, signals, shutdown)
 * and routes.c (the endpoints) share. Private to runtime/server. */
#ifndef SB_SRV_SERVER_INT_H
#define SB_SRV_SERVER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "model/model.h"
#include "batch/batch.h"
#include "server/http.h"
#include "server/metrics.h"
#include "server/prompt.h"
#include "server/server.h"
#include "server/sessions.h"
#include "server/tenants.h"
#include "snapbank.h"

#define SRV_HOUR_SAMPLES 62 /* a sample of the disk bytes written a minute */

typedef struct srv_server {
    srv_config cfg;
    char name[256];               /* the model id clients name */
    time_t started;
    sb_rt_model *m;               /* the builtin engine's model; llama.cpp's
                                     engine: the vocabulary and template only
                                     (sb_rt_model_load_vocab) */
    struct sb_rt_llama *llama;    /* --engine llama.cpp: its model and context */
    /* --engine llama.cpp: llama.cpp's tokenizer (sb_rt_llama_tokenize), which
     * the prompts' tokens must agree with; NULL for the builtin engine */
    int (*ref_tokenize)(const struct sb_rt_llama *L, const char *text, size_t len,
                        uint32_t **ids, size_t *n);
    bool boundaries;              /* the model's state resumes only from
                                     boundaries (a hybrid): usage says where */
    uint32_t ctx_limit;           /* tokens a sequence may reach */
    srv_prompt *prompt;
    srv_tenants *tenants;
    char admin_key[SRV_KEY_MAX + 1]; /* "" without --admin-key-file */
    /* the bank: replaced as a whole by a bank clear, which holds bank_lock
     * for writing while no request runs; readers off the engine thread
     * (stats, flush, session info) hold it for reading */
    pthread_rwlock_t bank_lock;
    sb_config store_cfg;
    char store_dir[4096];         /* "" for RAM only */
    sb_layout layout;
    uint32_t *bpt;
    sb_store *st;
    srv_sessions *sessions;
    srv_metrics *mx;
    sb_rt_batch *engine;
    srv_http *http;
    atomic_int draining;          /* shutting down: no new completions */
    atomic_ullong ids;            /* response ids */
    pthread_mutex_t hour_mu;      /* the samples below */
    uint64_t hour_bytes[SRV_HOUR_SAMPLES];
    double hour_t[SRV_HOUR_SAMPLES];
    size_t hour_n, hour_next;
} srv_server;

/* srv_route -- the HTTP handler (routes.c). */
void srv_route(void *app, srv_hreq *r);

/* srv_bank_open -- open the store (s->store_cfg) and every tenant's
 * namespace; with wipe, the store directory is emptied first (a bank
 * clear). When the disk tier cannot be opened the bank falls back to RAM
 * only (printed). Returns: SB_OK or the store's error (printed).
 * srv_bank_close -- close them (server.c). */
int srv_bank_open(srv_server *s, bool wipe);
void srv_bank_close(srv_server *s);

/* srv_written_last_hour -- disk bytes written over the last hour, from the
 * minute samples and stats (server.c). */
uint64_t srv_written_last_hour(srv_server *s, const sb_stats *st);

#endif /* SB_SRV_SERVER_INT_H */
