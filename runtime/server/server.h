/* server.h -- `snapbank serve`: an OpenAI-compatible HTTP server over the
 * runtime's sessions and the bank, whose every response says where its
 * prompt came from (cache_mode cold / warm_prefix / ssd / remote). What
 * computes is the engine: the builtin runtime, or llama.cpp's libllama
 * (--engine llama.cpp, llama/llama_host.h: the same batching module over
 * llama.cpp's sequences, the bank through the llama.cpp connector, the
 * prompt rendered and tokenized by the builtin template engine and
 * tokenizer from the model file's vocabulary).
 *
 * One process: the model, one bank (RAM tier, and with --bank-dir its disk
 * tier in DIR/store and sessions in DIR/sessions), one namespace per
 * tenant, the engine thread (engine.h) and the HTTP pool (http.h).
 * srv_run serves until SIGTERM or SIGINT, then shuts down:
 *   1. stop accepting connections, and new completions on open ones (503);
 *   2. let the requests in flight finish, for at most --shutdown-timeout
 *      seconds (a second signal cuts it short), then cancel the rest (what
 *      they computed is committed; their clients get an error);
 *   3. wait for the answers to go out, close the HTTP side;
 *   4. write the sessions, flush the bank (every committed page durable
 *      on disk), log what was flushed, close, and return 0.
 *
 * Thread safety: srv_run is called once, from the main thread; it blocks
 * SIGTERM and SIGINT in every thread it starts and waits for them itself.
 */
#ifndef SB_SRV_SERVER_H
#define SB_SRV_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snapbank.h"

/* --metrics-auth: who may read GET /metrics */
enum { SRV_METRICS_OPEN = 0, SRV_METRICS_KEY = 1, SRV_METRICS_ADMIN = 2 };

/* --engine: what computes */
enum { SRV_ENGINE_BUILTIN = 0, SRV_ENGINE_LLAMA = 1 };

/* --ssd-session-cache */
enum { SRV_SSD_ON = 0, SRV_SSD_OFF = 1, SRV_SSD_WRITE_ONLY = 2 };

typedef struct srv_config {
    const char *model;            /* the GGUF file */
    int engine;                   /* SRV_ENGINE_*: the builtin runtime, or
                                     llama.cpp (where built with it) */
    int gpu_layers;               /* llama.cpp: layers offloaded to a GPU
                                     (-1: llama.cpp's default) */
    bool kv_unified;              /* llama.cpp: one KV stream for all slots */
    const char *model_name;       /* the id clients name (NULL: the file's
                                     name without .gguf) */
    const char *host;             /* default 127.0.0.1 */
    unsigned port;                /* default 8080; 0: any free port */
    const char *port_file;        /* write the port here once listening */
    const char *bank_dir;         /* NULL: the bank is in RAM only */
    uint64_t ram_mib;             /* RAM budget of the bank */
    int ssd;                      /* SRV_SSD_* */
    bool disk_always;             /* restore disk pages even when recomputing
                                     them is estimated faster */
    uint32_t min_prefix;          /* shortest sequence written to disk */
    uint32_t page_tokens;
    uint64_t disk_mib;            /* the disk tier's cap (0: the store's default) */
    uint64_t write_budget_mib;    /* hourly write budget (0: the store's default) */
    sb_durability durability;
    size_t parallel;              /* slots */
    size_t max_queue;
    uint32_t ctx;                 /* context limit (0: the model's); llama.cpp:
                                     its cells, split among the slots */
    uint32_t batch;               /* rows per forward pass */
    unsigned threads;             /* forward-pass threads (0: every CPU) */
    unsigned http_threads, max_conns, timeout_s;
    unsigned header_timeout_s;    /* a request header must come whole within */
    unsigned max_conns_per_ip;    /* 0: no limit */
    size_t max_body;
    size_t max_sessions;          /* sessions kept in RAM */
    size_t default_max_tokens;    /* when a request sets none (0: to the context's end) */
    const char *api_key_file, *admin_key_file, *chat_template;
    const char *chat_template_file; /* a Jinja template replacing the model's */
    const char *api_key;          /* --api-key: keys of the default tenant,
                                     comma-separated (instead of the file) */
    bool allow_public;            /* listen beyond loopback without keys */
    int metrics_auth;             /* SRV_METRICS_*: open (default), any API
                                     key or the admin key, the admin key */
    const char *const *cors_origins; /* (n_cors_origins) --cors-origin: origins
                                     browsers may call from; "*": any (borrowed) */
    size_t n_cors_origins;
    double shutdown_timeout_s;
    bool log_requests;            /* a line per completion on stderr */
    const char *shared_seeds;     /* the shared tier's "host:port[,...]" (NULL:
                                     none; sb_config.shared_seeds) */
    const char *shared_user;      /* its credentials (NULL: none), read from */
    const char *shared_password;  /* a file by the caller */
    uint32_t shared_timeout_ms;   /* sb_config.shared_timeout_ms (0: default) */
    uint32_t shared_ttl_s;        /* sb_config.shared_ttl_s (0: none) */
    uint64_t shared_publish_bytes_per_s; /* ...(0: default) */
    const char *shared_secret_file; /* sb_config.shared_secret_file (NULL: none) */
} srv_config;

/* srv_config_default -- every option at its default. */
void srv_config_default(srv_config *c);

/* srv_run -- serve as c says until SIGTERM or SIGINT. What fails is printed
 * on stderr naming the option or file. Returns: the exit status: 0 after a
 * clean shutdown, 1 when the server could not start (or its bank could not
 * be flushed), 2 for options refused (e.g. a public --host without keys). */
int srv_run(const srv_config *c);

#endif /* SB_SRV_SERVER_H */
