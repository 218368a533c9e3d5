/* server.c -- the `snapbank serve` process: start, signals, shutdown, the
 * bank (server.h). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/kernels.h"
#include "model/kv.h"
#include "server/server_int.h"
#ifdef SB_SRV_LLAMA
#include "llama/llama_host.h"
#endif

void srv_config_default(srv_config *c)
{
    *c = (srv_config){
        .host = "127.0.0.1", .port = 8080, .gpu_layers = -1, .ram_mib = 1024, .ssd = SRV_SSD_ON,
        .min_prefix = 512, .page_tokens = 16, .durability = SB_DURABILITY_PERIODIC,
        .parallel = 4, .max_queue = 64, .batch = 256, .http_threads = 4, .max_conns = 256,
        .timeout_s = 600, .header_timeout_s = 10, .max_conns_per_ip = 64, .max_body = 4u << 20, .max_sessions = 4096,
        .shutdown_timeout_s = 10, .log_requests = true,
    };
}

/* ---- the bank ---------------------------------------------------------------------- */

/* Remove everything under path (not path itself). */
static int empty_dir(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return errno == ENOENT ? 0 : -1;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char p[4200];
        if (snprintf(p, sizeof p, "%s/%s", path, e->d_name) >= (int)sizeof p) {
            rc = -1;
            continue;
        }
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
            if (empty_dir(p) != 0 || rmdir(p) != 0)
                rc = -1;
        } else if (unlink(p) != 0) {
            rc = -1;
        }
    }
    closedir(d);
    return rc;
}

int srv_bank_open(srv_server *s, bool wipe)
{
    if (wipe && s->store_cfg.dir && empty_dir(s->store_cfg.dir) != 0)
        fprintf(stderr, "snapbank serve: %s: could not remove every file: %s\n",
                s->store_cfg.dir, strerror(errno));
    int rc = sb_store_open(&s->store_cfg, &s->st);
    if (rc != SB_OK && s->store_cfg.dir && wipe) {
        fprintf(stderr, "snapbank serve: %s: cannot open the bank again (%s): it is in RAM "
                        "only from now on\n", s->store_cfg.dir, sb_strerror(rc));
        s->store_cfg.dir = NULL;
        rc = sb_store_open(&s->store_cfg, &s->st);
    }
    if (rc != SB_OK) {
        fprintf(stderr, "snapbank serve: %s: cannot open the bank: %s\n",
                s->store_cfg.dir ? s->store_cfg.dir : "RAM", sb_strerror(rc));
        s->st = NULL;
        return rc;
    }
    for (size_t i = 0; i < srv_tenants_count(s->tenants); i++) {
        srv_tenant *t = srv_tenants_at(s->tenants, i);
        char why[256] = "";
#ifdef SB_SRV_LLAMA
        sb_llama_info info;
        if (s->llama) { /* the connector opens the namespace of its identity */
            rc = sb_rt_llama_attach(s->llama, s->st, t->scope, strlen(t->scope), &t->ns, &info,
                                    why, sizeof why);
            if (rc == SB_OK) {
                memcpy(s->m->id, info.identity, sizeof info.identity);
                s->boundaries = info.point_bytes != 0;
            }
        } else
#endif
            rc = sb_ns_open(s->st, &s->layout, t->scope, strlen(t->scope), &t->ns);
        if (rc != SB_OK) {
            fprintf(stderr, "snapbank serve: tenant %s: cannot open its namespace: %s%s%s\n",
                    t->name, sb_strerror(rc), why[0] ? ": " : "", why);
            srv_bank_close(s);
            return rc;
        }
    }
    if (s->llama)
        return SB_OK;
    /* One context's pages ready in the pool, as an engine allocates its KV
     * cache at start: restores and prefills then take pages without page
     * faults. Every tenant's namespace has the same layout, so the pages
     * serve them all; a refusal only means they fault in as they are used. */
    if (srv_tenants_count(s->tenants))
        (void)sb_rt_kv_prefault(s->m, srv_tenants_at(s->tenants, 0)->ns, NULL);
    return SB_OK;
}

void srv_bank_close(srv_server *s)
{
#ifdef SB_SRV_LLAMA
    if (s->llama) /* the connector's handles close their namespaces */
        sb_rt_llama_detach_all(s->llama);
#endif
    for (size_t i = 0; s->tenants && i < srv_tenants_count(s->tenants); i++) {
        srv_tenant *t = srv_tenants_at(s->tenants, i);
        if (!s->llama)
            sb_ns_close(t->ns);
        t->ns = NULL;
    }
    sb_store_close(s->st);
    s->st = NULL;
}

/* ---- disk bytes over the last hour --------------------------------------------------- */

static void hour_sample(srv_server *s, double now)
{
    sb_stats st;
    pthread_rwlock_rdlock(&s->bank_lock);
    int ok = s->st && sb_store_stats(s->st, &st) == SB_OK;
    pthread_rwlock_unlock(&s->bank_lock);
    if (!ok)
        return;
    pthread_mutex_lock(&s->hour_mu);
    s->hour_bytes[s->hour_next] = st.disk_write_bytes;
    s->hour_t[s->hour_next] = now;
    s->hour_next = (s->hour_next + 1) % SRV_HOUR_SAMPLES;
    if (s->hour_n < SRV_HOUR_SAMPLES)
        s->hour_n++;
    pthread_mutex_unlock(&s->hour_mu);
}

uint64_t srv_written_last_hour(srv_server *s, const sb_stats *st)
{
    double now = sb_rt_now_s();
    uint64_t base = 0;
    pthread_mutex_lock(&s->hour_mu);
    /* the oldest sample no older than an hour (else the newest before it) */
    for (size_t k = 0; k < s->hour_n; k++) {
        size_t i = (s->hour_next + SRV_HOUR_SAMPLES - s->hour_n + k) % SRV_HOUR_SAMPLES;
        base = s->hour_bytes[i];
        if (now - s->hour_t[i] <= 3600)
            break;
    }
    pthread_mutex_unlock(&s->hour_mu);
    /* a bank clear starts the counter again */
    return st->disk_write_bytes >= base ? st->disk_write_bytes - base : st->disk_write_bytes;
}

/* ---- start ------------------------------------------------------------------------- */

static bool is_loopback(const char *host)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ai, *p;
    if (getaddrinfo(host, NULL, &hints, &ai) != 0)
        return false;
    bool all = true;
    for (p = ai; p; p = p->ai_next) {
        if (p->ai_family == AF_INET) {
            const struct sockaddr_in *a = (const void *)p->ai_addr;
            all = all && (ntohl(a->sin_addr.s_addr) >> 24) == 127;
        } else if (p->ai_family == AF_INET6) {
            const struct sockaddr_in6 *a = (const void *)p->ai_addr;
            all = all && IN6_IS_ADDR_LOOPBACK(&a->sin6_addr);
        } else {
            all = false;
        }
    }
    freeaddrinfo(ai);
    return all;
}

static void model_name(const char *path, char *out, size_t cap)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t n = strlen(b);
    if (n > 5 && !strcmp(b + n - 5, ".gguf"))
        n -= 5;
    snprintf(out, cap, "%.*s", (int)n, b);
}

static int write_port_file(const char *path, unsigned port)
{
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return -1;
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    int bad = fprintf(f, "%u\n", port) < 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

static void status_hook(void *app, const char *route, unsigned status)
{
    srv_server *s = app;
    srv_metrics_request(s->mx, route, status);
}

/* The engine's observer: each finished turn, token gap and pass counted in
 * the metrics (ctx). */
static void obs_turn(void *ctx, const sb_rt_job *j)
{
    const sb_rt_turn *r = &j->rep;
    const char *reason = sb_rt_turn_miss_reason(r);
    srv_turn_figures f = {
        .prompt_tokens = j->started ? r->prompt_tokens : 0,
        .cached_ram = r->cached_tokens - r->cached_disk_tokens,
        .cached_disk = r->cached_disk_tokens, .generated = j->n_gen,
        .miss_reason = reason ? reason : "none",
        .cache_mode = j->started ? sb_rt_cache_mode_name(r->cache_mode) : NULL,
        .finish = j->finish, .ttft_s = j->n_gen ? j->t_first - j->t_arrival : -1,
        .restore_s = j->started ? r->restore_s : -1,
    };
    srv_metrics_turn(ctx, &f);
}

static void obs_token_gap(void *ctx, double s)
{
    srv_metrics_token_gap(ctx, s);
}

static void obs_pass(void *ctx, size_t sequences)
{
    srv_metrics_pass(ctx, sequences);
}

/* A text file of at most 1 MiB with no NUL, malloc'd and NUL-terminated;
 * NULL (errno set) otherwise. */
static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *b = malloc((1u << 20) + 1);
    size_t n = b ? fread(b, 1, (1u << 20) + 1, f) : 0;
    int bad = !b || ferror(f) || n > (1u << 20) || memchr(b, 0, n);
    fclose(f);
    if (bad) {
        free(b);
        errno = errno ? errno : EFBIG;
        return NULL;
    }
    b[n] = 0;
    return b;
}

/* Everything but the HTTP side. Returns an exit status (0 ok). */
static int start(srv_server *s)
{
    const srv_config *c = &s->cfg;
    sb_rt_err err = { 0 };
    if (c->api_key && c->api_key_file) {
        fprintf(stderr, "snapbank serve: --api-key and --api-key-file: give one of them\n");
        return 2;
    }
    if ((c->api_key ? srv_tenants_from_keys(c->api_key, &s->tenants, &err)
                    : srv_tenants_load(c->api_key_file, &s->tenants, &err)) != SB_OK) {
        fprintf(stderr, "snapbank serve: %s\n", err.msg);
        return 2;
    }
    if (!srv_tenants_keyed(s->tenants) && !c->allow_public && !is_loopback(c->host)) {
        fprintf(stderr, "snapbank serve: --host %s is not a loopback address, and without "
                        "--api-key-file anyone who reaches it could use the server: give "
                        "--api-key-file FILE, or --allow-unauthenticated to serve it open\n",
                c->host);
        return 2;
    }
    if (c->disk_always && c->ssd != SRV_SSD_ON) {
        fprintf(stderr, "snapbank serve: --disk-restore always reads the disk tier, which "
                        "--ssd-session-cache %s turns off\n",
                c->ssd == SRV_SSD_OFF ? "off" : "write-only");
        return 2;
    }
    if (c->metrics_auth == SRV_METRICS_ADMIN && !c->admin_key_file) {
        fprintf(stderr, "snapbank serve: --metrics-auth admin needs --admin-key-file\n");
        return 2;
    }
    if (c->metrics_auth == SRV_METRICS_KEY && !c->admin_key_file &&
        !srv_tenants_keyed(s->tenants)) {
        fprintf(stderr, "snapbank serve: --metrics-auth key needs --api-key-file or "
                        "--admin-key-file\n");
        return 2;
    }
    if (c->admin_key_file && srv_admin_key_load(c->admin_key_file, s->admin_key, &err) != SB_OK) {
        fprintf(stderr, "snapbank serve: %s\n", err.msg);
        return 2;
    }
    if ((c->engine == SRV_ENGINE_LLAMA ? sb_rt_model_load_vocab(c->model, &s->m, &err)
                                       : sb_rt_model_load(c->model, &s->m, &err)) != SB_OK) {
        fprintf(stderr, "snapbank serve: %s\n", err.msg);
        return 1;
    }
    s->boundaries = s->m->hp.n_rec != 0;
    if (c->model_name)
        snprintf(s->name, sizeof s->name, "%s", c->model_name);
    else
        model_name(c->model, s->name, sizeof s->name);
    if (c->ctx > s->m->hp.n_ctx && c->engine != SRV_ENGINE_LLAMA) {
        fprintf(stderr, "snapbank serve: --ctx %u is more than the model's context (%u tokens)\n",
                c->ctx, s->m->hp.n_ctx);
        return 2;
    }
    s->ctx_limit = c->ctx ? c->ctx : s->m->hp.n_ctx;
    char *tsrc = NULL;
    if (c->chat_template_file && c->chat_template) {
        fprintf(stderr, "snapbank serve: --chat-template and --chat-template-file: give one\n");
        return 2;
    }
    if (c->chat_template_file && !(tsrc = read_text(c->chat_template_file))) {
        fprintf(stderr, "snapbank serve: --chat-template-file %s: cannot read it (a text file "
                        "of at most 1 MiB): %s\n", c->chat_template_file, strerror(errno));
        return 2;
    }
    int prc = srv_prompt_new(s->m, c->chat_template, tsrc, &s->prompt, &err);
    free(tsrc);
    if (prc != SB_OK) { /* a template to choose (--chat-template) is usage */
        fprintf(stderr, "snapbank serve: %s\n", err.msg);
        return prc == SB_ERR_UNSUPPORTED || prc == SB_ERR_INVAL ? 2 : 1;
    }
    /* the bank: DIR/store and DIR/sessions with --bank-dir */
    char sess_dir[4096] = "";
    if (c->bank_dir) {
        if ((mkdir(c->bank_dir, 0700) != 0 && errno != EEXIST) ||
            snprintf(s->store_dir, sizeof s->store_dir, "%s/store", c->bank_dir) >=
                (int)sizeof s->store_dir ||
            snprintf(sess_dir, sizeof sess_dir, "%s/sessions", c->bank_dir) >=
                (int)sizeof sess_dir) {
            fprintf(stderr, "snapbank serve: --bank-dir %s: cannot use it: %s\n", c->bank_dir,
                    strerror(errno));
            return 1;
        }
    }
    sb_config_default(&s->store_cfg);
    s->store_cfg.ram_bytes = c->ram_mib << 20;
    s->store_cfg.max_seq_tokens = s->ctx_limit > s->m->hp.n_ctx ? s->ctx_limit : s->m->hp.n_ctx;
    s->store_cfg.min_prefix_tokens = c->min_prefix;
    s->store_cfg.durability = c->durability;
    s->store_cfg.dir = c->bank_dir && c->ssd != SRV_SSD_OFF ? s->store_dir : NULL;
    s->store_cfg.write_mode = c->ssd == SRV_SSD_WRITE_ONLY ? SB_WRITE_ONLY : SB_WRITE_THROUGH;
    s->store_cfg.shared_seeds = c->shared_seeds;
    s->store_cfg.shared_user = c->shared_user;
    s->store_cfg.shared_password = c->shared_password;
    s->store_cfg.shared_timeout_ms = c->shared_timeout_ms;
    s->store_cfg.shared_ttl_s = c->shared_ttl_s;
    s->store_cfg.shared_publish_bytes_per_s = c->shared_publish_bytes_per_s;
    s->store_cfg.shared_secret_file = c->shared_secret_file;
    if (c->disk_mib)
        s->store_cfg.disk_bytes = c->disk_mib << 20;
    if (c->write_budget_mib)
        s->store_cfg.write_budget_bytes_per_hour = c->write_budget_mib << 20;
    if (c->engine == SRV_ENGINE_LLAMA) {
#ifdef SB_SRV_LLAMA
        sb_rt_llama_cfg lc = { .model = c->model, .slots = c->parallel, .n_ctx = c->ctx,
                               .batch = c->batch, .threads = c->threads,
                               .gpu_layers = c->gpu_layers, .page_tokens = c->page_tokens,
                               .kv_unified = c->kv_unified };
        char why[512];
        if (sb_rt_llama_open(&lc, &s->llama, why, sizeof why) != SB_OK) {
            fprintf(stderr, "snapbank serve: %s\n", why);
            return 1;
        }
        s->ref_tokenize = sb_rt_llama_tokenize;
        sb_rt_llama_desc d;
        sb_rt_llama_describe(s->llama, &d);
        s->m->hp.n_layers = d.n_layer; /* for /v1/models (the vocabulary has no layers) */
        s->ctx_limit = d.n_ctx_seq;    /* -c's cells, split among the slots */
        s->store_cfg.max_seq_tokens = s->ctx_limit > s->m->hp.n_ctx ? s->ctx_limit
                                                                     : s->m->hp.n_ctx;
        if (!s->ctx_limit) {
            fprintf(stderr, "snapbank serve: --ctx %u cells for %zu slots: no room for a "
                            "sequence\n", d.n_ctx, c->parallel);
            return 2;
        }
#else
        fprintf(stderr, "snapbank serve: --engine llama.cpp: this snapbank was built without "
                        "llama.cpp (scripts/setup.sh installs it; then build again)\n");
        return 2;
#endif
    } else if (!(s->bpt = malloc(2 * s->m->hp.n_layers * sizeof *s->bpt)) ||
               sb_rt_kv_layout(s->m, c->page_tokens, s->bpt, &s->layout) != SB_OK) {
        fprintf(stderr, "snapbank serve: --page-tokens %u: cannot lay out the model's KV\n",
                c->page_tokens);
        return 1;
    }
    if (srv_bank_open(s, false) != SB_OK)
        return 1;
    if (srv_sessions_new(c->bank_dir ? sess_dir : NULL, s->m->id, c->max_sessions, &s->sessions,
                         &err) != SB_OK) {
        fprintf(stderr, "snapbank serve: %s\n", err.msg);
        return 1;
    }
    if (!(s->mx = srv_metrics_new()))
        return 1;
    sb_rt_batch_cfg ec = { .slots = c->parallel, .max_queue = c->max_queue,
                           .threads = c->threads, .batch = c->batch,
                           .disk_use = c->ssd != SRV_SSD_ON ? SB_RT_DISK_NEVER
                                       : c->disk_always      ? SB_RT_DISK_ALWAYS
                                                             : SB_RT_DISK_READ,
                           .turn_end_text = srv_prompt_turn_end(s->prompt),
                           .obs = { .ctx = s->mx, .turn = obs_turn, .token_gap = obs_token_gap,
                                    .pass = obs_pass } };
    int rc;
#ifdef SB_SRV_LLAMA
    if (s->llama) {
        sb_rt_compute comp;
        rc = sb_rt_llama_compute(s->llama, &comp);
        if (rc == SB_OK)
            rc = sb_rt_batch_new_with(s->m, &comp, &ec, &s->engine);
    } else
#endif
        rc = sb_rt_batch_new(s->m, &ec, &s->engine);
    if (rc != SB_OK) {
        fprintf(stderr, "snapbank serve: cannot start the engine: %s\n", sb_strerror(rc));
        return 1;
    }
    return 0;
}

/* ---- shutdown ------------------------------------------------------------------------- */

/* b bytes for a person: "812 B", "3.4 KiB", "12.0 MiB", "1.50 GiB". */
static const char *human(uint64_t b, char *buf, size_t cap)
{
    if (b < 1024)
        snprintf(buf, cap, "%llu B", (unsigned long long)b);
    else if (b < (1u << 20))
        snprintf(buf, cap, "%.1f KiB", (double)b / 1024);
    else if (b < (1u << 30))
        snprintf(buf, cap, "%.1f MiB", (double)b / (1 << 20));
    else
        snprintf(buf, cap, "%.2f GiB", (double)b / (1 << 30));
    return buf;
}

/* Steps 1-4 of server.h's shutdown. Returns the exit status. */
static int shut_down(srv_server *s, const sigset_t *set, int sig)
{
    size_t running, waiting;
    sb_rt_batch_counts(s->engine, &running, &waiting);
    fprintf(stderr, "snapbank serve: %s: shutting down: no new requests; %zu in flight, %zu "
                    "waiting (at most %.0f s to finish)\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM", running, waiting, s->cfg.shutdown_timeout_s);
    /* 1 */
    atomic_store(&s->draining, 1);
    srv_http_quiesce(s->http);
    sb_rt_batch_close(s->engine);
    /* 2 */
    double deadline = sb_rt_now_s() + s->cfg.shutdown_timeout_s;
    bool cancelled = false;
    const struct timespec zero = { 0, 0 };
    while (!sb_rt_batch_wait_idle(s->engine, 0.05)) {
        if (cancelled)
            continue;
        bool again = sigtimedwait(set, NULL, &zero) > 0;
        if (again || sb_rt_now_s() >= deadline) {
            sb_rt_batch_counts(s->engine, &running, &waiting);
            fprintf(stderr, "snapbank serve: %s: cancelling %zu requests (what they computed "
                            "is kept)\n", again ? "second signal" : "shutdown timeout",
                    running + waiting);
            sb_rt_batch_cancel_all(s->engine);
            cancelled = true;
        }
    }
    /* 3: let the last answers go out (bounded: a client that stopped
     *    reading does not hold the shutdown) */
    double out_by = sb_rt_now_s() + 5;
    while (srv_http_open_requests(s->http) && sb_rt_now_s() < out_by) {
        struct timespec t = { 0, 10 * 1000 * 1000 };
        nanosleep(&t, NULL);
    }
    srv_http_stop(s->http);
    s->http = NULL;
    /* 4 */
    size_t failed = 0, saved = srv_sessions_flush(s->sessions, &failed);
    int ret = 0;
    if (!s->store_cfg.dir && s->st && sb_store_has_shared(s->st)) {
        sb_store_flush(s->st); /* publish what waits for the shared tier */
    }
    if (!s->store_cfg.dir) {
        fprintf(stderr, "snapbank serve: the bank is in RAM only (%s): nothing to flush; %zu "
                        "sessions written\n",
                s->cfg.bank_dir ? "--ssd-session-cache off" : "no --bank-dir", saved);
    } else {
        int rc = s->st ? sb_store_flush(s->st) : SB_ERR_INVAL;
        sb_stats st = { 0 };
        if (s->st)
            sb_store_stats(s->st, &st);
        if (rc != SB_OK)
            ret = 1;
        char b1[32], b2[32];
        fprintf(stderr, "snapbank serve: flushed the SSD session cache %s: %s; %llu pages on "
                        "disk (%s of records), %s written since start, durable through record "
                        "%llu, %llu pages denied by the write budget or backlog; sessions: %zu "
                        "in RAM, each in its file (%zu written now%s)\n",
                s->store_cfg.dir, rc == SB_OK ? "ok" : sb_strerror(rc),
                (unsigned long long)st.disk_pages, human(st.disk_bytes, b1, sizeof b1),
                human(st.disk_write_bytes, b2, sizeof b2),
                (unsigned long long)st.durable_seq,
                (unsigned long long)(st.disk_denials[SB_DENY_BUDGET] +
                                     st.disk_denials[SB_DENY_BACKLOG]),
                srv_sessions_count(s->sessions), saved,
                failed ? ", some could not be: see above" : "");
    }
    return ret;
}

static void server_free(srv_server *s)
{
    srv_http_stop(s->http);
    sb_rt_batch_free(s->engine);
    srv_sessions_free(s->sessions);
    srv_bank_close(s);
#ifdef SB_SRV_LLAMA
    sb_rt_llama_close(s->llama);
#endif
    srv_metrics_free(s->mx);
    srv_prompt_free(s->prompt);
    srv_tenants_free(s->tenants);
    sb_rt_model_free(s->m);
    free(s->bpt);
    pthread_rwlock_destroy(&s->bank_lock);
    pthread_mutex_destroy(&s->hour_mu);
    memset(s->admin_key, 0, sizeof s->admin_key);
    free(s);
}

int srv_run(const srv_config *c)
{
    /* SIGTERM and SIGINT are waited for here; every thread started from
     * now on inherits the mask */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    srv_server *s = calloc(1, sizeof *s);
    if (!s)
        return 1;
    s->cfg = *c;
    s->started = time(NULL);
    pthread_rwlock_init(&s->bank_lock, NULL);
    pthread_mutex_init(&s->hour_mu, NULL);
    int ret = start(s);
    if (ret != 0) {
        server_free(s);
        return ret;
    }
    srv_http_cfg hc = { .host = c->host, .port = c->port, .threads = c->http_threads,
                        .max_conns = c->max_conns, .timeout_s = c->timeout_s,
                        .header_timeout_s = c->header_timeout_s,
                        .max_per_ip = c->max_conns_per_ip, .max_body = c->max_body };
    sb_rt_err err = { 0 };
    if (srv_http_start(&hc, srv_route, status_hook, s, &s->http, &err) != SB_OK) {
        fprintf(stderr, "snapbank serve: %s\n", err.msg);
        server_free(s);
        return 1;
    }
    unsigned port = srv_http_port(s->http);
    char engine[200];
    snprintf(engine, sizeof engine, "%s kernels", sb_rt_kernels_best()->name);
#ifdef SB_SRV_LLAMA
    if (s->llama) {
        sb_rt_llama_desc d;
        sb_rt_llama_describe(s->llama, &d);
        snprintf(engine, sizeof engine, "llama.cpp (%s, %u layers, loaded in %.1f s)", d.desc,
                 d.n_layer, d.load_s);
    }
#endif
    fprintf(stderr, "snapbank serve: %s as \"%s\" (context %u, chat template %s), %zu slots, %u "
                    "threads, %s; bank %s (RAM %llu MiB%s), %zu tenant%s%s\n",
            c->model, s->name, s->ctx_limit, srv_prompt_template(s->prompt), c->parallel,
            sb_rt_batch_threads(s->engine), engine,
            s->store_cfg.dir ? s->store_cfg.dir : "in RAM", (unsigned long long)c->ram_mib,
            s->store_cfg.dir ? (c->ssd == SRV_SSD_WRITE_ONLY ? ", disk tier write-only"
                                                             : ", disk tier on")
                             : "",
            srv_tenants_count(s->tenants), srv_tenants_count(s->tenants) == 1 ? "" : "s",
            srv_tenants_keyed(s->tenants) ? " (API keys)" : " (no API keys)");
    if (c->shared_seeds)
        fprintf(stderr, "snapbank serve: shared tier on %s%s\n", c->shared_seeds,
                c->shared_password ? " (AUTH from --shared-auth)" : "");
    fprintf(stderr, "snapbank serve: listening on http://%s%s%s:%u\n",
            strchr(c->host, ':') ? "[" : "", c->host, strchr(c->host, ':') ? "]" : "", port);
    if (c->port_file && write_port_file(c->port_file, port) != 0)
        fprintf(stderr, "snapbank serve: --port-file %s: cannot write it: %s\n", c->port_file,
                strerror(errno));
    double t = sb_rt_now_s(), last = -1e9;
    int sig;
    for (;;) {
        if (t - last >= 60) { /* a minute's sample of the disk bytes written */
            hour_sample(s, t);
            last = t;
        }
        struct timespec wait = { 10, 0 };
        sig = sigtimedwait(&set, NULL, &wait);
        t = sb_rt_now_s();
        if (sig == SIGTERM || sig == SIGINT)
            break;
    }
    ret = shut_down(s, &set, sig);
    server_free(s);
    fprintf(stderr, "snapbank serve: stopped\n");
    return ret;
}
