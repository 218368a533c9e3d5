/* rtcli.c -- options, bank and session setup, and turn reports shared by
 * `snapbank run` and `snapbank chat` (rtcli.h). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli/rtcli.h"
#include "model/deltanet.h"
#include "model/kv.h"
#include "text/tokenizer.h"

const char rt_opts_help[] =
    "  --engine E             who computes: builtin (default: snapbank's runtime, its\n"
    "                         KV in bank pages) or llama.cpp (libllama computes, with\n"
    "                         its tokenizer and chat template; the bank keeps its KV\n"
    "                         through the llama.cpp connector)\n"
    "  -n N                   tokens to generate (default 32; 0: prefill only)\n"
    "  --threads N            threads (default: every online CPU)\n"
    "  --temp T               sampling temperature (default 0: greedy)\n"
    "  --top-k K              keep the K most likely tokens (default 40; 0: all)\n"
    "  --top-p P              nucleus sampling threshold (default 0.95; 1: off)\n"
    "  --seed N               sampler seed (default 1)\n"
    "  --print-token-ids      print token ids instead of text\n"
    "  --stop-at-eos          stop when the model produces its EOS token\n"
    "  --page-tokens N        tokens per KV page (default 16)\n"
    "  --batch N              prefill batch, tokens (default 512)\n"
    "  --bank-dir DIR         keep the KV bank in DIR (DIR/store, with its disk tier)\n"
    "                         and sessions in DIR/sessions; default: RAM only\n"
    "  --session ID           continue session ID (letters, digits, '.', '_', '-'):\n"
    "                         its tokens are read from and saved to the bank dir\n"
    "  --scope S              bank scope: sessions of one scope share prefixes,\n"
    "                         different scopes share nothing (default: empty)\n"
    "  --ssd-session-cache M  on (default): write KV pages to disk and restore them;\n"
    "                         write-only: write, never restore; off: RAM only\n"
    "  --ram-mib N            RAM budget of the bank, MiB (default 1024)\n"
    "  --min-prefix N         write to disk only prompts of at least N tokens\n"
    "                         (default 512, the store's; 1: every prompt)\n"
    "  --durability M         when the bank syncs its disk writes: periodic (default,\n"
    "                         every second), commit (each turn's pages are on disk\n"
    "                         when its report is printed) or none (at exit)\n"
    "  --boundary-grid N      hybrid models: record the recurrent state every N\n"
    "                         tokens of prefill (a multiple of 16; default 256;\n"
    "                         0: only at the ends of prompts and turns)\n"
    "  --boundary-kib N       hybrid models: KiB of grid boundaries a turn keeps\n"
    "                         (default: 8 boundaries' worth)\n";

const char rt_shared_help[] =
    "  --shared URL           share KV pages with other nodes through a Redis Cluster:\n"
    "                         redis://HOST:PORT[,HOST:PORT...] (nodes to ask first).\n"
    "                         Full pages of prompts of at least --min-prefix tokens\n"
    "                         are published in the background; a prompt's pages past\n"
    "                         what RAM and disk hold are fetched when that is\n"
    "                         estimated faster than recomputing them (cache_mode\n"
    "                         remote); every fetched page is checked\n"
    "  --shared-auth FILE     the cluster's credentials: a file holding \"PASSWORD\"\n"
    "                         or \"USER PASSWORD\", readable by its owner only (never\n"
    "                         on the command line)\n"
    "  --shared-timeout MS    a fetch waits while pages arrive, at most MS without\n"
    "                         one (a hung node), and stops when recomputing the\n"
    "                         rest is estimated faster (default 200, at most 60000)\n"
    "  --shared-ttl S         published pages expire after S seconds (default: never;\n"
    "                         the cluster's maxmemory policy bounds the pool)\n"
    "  --shared-publish-mib N publish at most N MiB of pages a second (default 64)\n"
    "  --shared-secret-file F the deployment's secret (32 to 4096 bytes, e.g. head -c 32\n"
    "                         /dev/urandom; chmod 600): pool keys are keyed hashes and\n"
    "                         values are encrypted and authenticated per scope, so a\n"
    "                         reader of the pool without it learns no prompt; nodes\n"
    "                         with another secret (or none) share nothing with them\n";

int rt_shared_tune_opt(const char *a, const char *v, rt_shared_tune *t, int *bad)
{
    if (!strcmp(a, "--shared-timeout"))
        *bad = rt_parse_u64(v, 1, 60000, &t->timeout_ms);
    else if (!strcmp(a, "--shared-ttl"))
        *bad = rt_parse_u64(v, 1, UINT32_MAX, &t->ttl_s);
    else if (!strcmp(a, "--shared-publish-mib"))
        *bad = rt_parse_u64(v, 1, 1u << 20, &t->publish_mib);
    else if (!strcmp(a, "--shared-secret-file"))
        *bad = v ? (t->secret_file = v, 0) : -1;
    else
        return 0;
    t->given = a;
    return 1;
}

void rt_shared_tune_apply(const rt_shared_tune *t, sb_config *cfg)
{
    cfg->shared_timeout_ms = (uint32_t)t->timeout_ms;
    cfg->shared_ttl_s = (uint32_t)t->ttl_s;
    cfg->shared_publish_bytes_per_s = t->publish_mib << 20;
    cfg->shared_secret_file = t->secret_file;
}

const char *rt_shared_seeds(const char *url, const char *cmd)
{
    static const char scheme[] = "redis://";
    if (!strncmp(url, "rediss://", 9)) {
        fprintf(stderr, "snapbank %s: --shared: TLS (rediss://) is not supported\n", cmd);
        return NULL;
    }
    if (strncmp(url, scheme, sizeof scheme - 1) || !url[sizeof scheme - 1]) {
        fprintf(stderr, "snapbank %s: --shared: want redis://HOST:PORT[,HOST:PORT...], not "
                        "'%s'\n", cmd, url);
        return NULL;
    }
    const char *seeds = url + sizeof scheme - 1;
    if (strchr(seeds, '@')) {
        fprintf(stderr, "snapbank %s: --shared: no credentials in the URL (they would show in "
                        "the process list): put them in a file for --shared-auth\n", cmd);
        return NULL;
    }
    return seeds;
}

int rt_shared_auth(const char *path, rt_auth *a, const char *cmd)
{
    memset(a, 0, sizeof *a);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        fprintf(stderr, "snapbank %s: --shared-auth %s: %s\n", cmd, path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return 1;
    }
    if (!S_ISREG(st.st_mode) || (st.st_mode & 077)) {
        fprintf(stderr, "snapbank %s: --shared-auth %s: %s (chmod 600 it)\n", cmd, path,
                S_ISREG(st.st_mode) ? "others may read or write it" : "not a regular file");
        close(fd);
        return 1;
    }
    char buf[1024];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n < 0 || n == (ssize_t)sizeof buf - 1) {
        fprintf(stderr, "snapbank %s: --shared-auth %s: %s\n", cmd, path,
                n < 0 ? strerror(errno) : "too long");
        return 1;
    }
    buf[n] = 0;
    char *w[3] = { 0 };
    int k = 0;
    for (char *p = buf; *p && k < 3;) {
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
            p++;
        if (!*p)
            break;
        w[k++] = p;
        while (*p && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
            p++;
        if (*p)
            *p++ = 0;
    }
    int bad = k == 0 || k == 3;
    if (!bad) {
        const char *pw = w[k - 1], *user = k == 2 ? w[0] : "";
        bad = strlen(user) >= sizeof a->user || strlen(pw) >= sizeof a->password;
        if (!bad) {
            strcpy(a->user, user);
            strcpy(a->password, pw);
        }
    }
    memset(buf, 0, sizeof buf);
    if (bad) {
        fprintf(stderr, "snapbank %s: --shared-auth %s: want one line \"PASSWORD\" or \"USER "
                        "PASSWORD\"\n", cmd, path);
        memset(a, 0, sizeof *a);
        return 1;
    }
    return 0;
}

void rt_opts_default(rt_opts *o)
{
    *o = (rt_opts){ .n_gen = 32, .page_tokens = 16, .batch = 512, .seed = 1, .top_k = 40,
                    .top_p = 0.95f, .ram_mib = 1024, .min_prefix = 512, .scope = "",
                    .durability = SB_DURABILITY_PERIODIC,
                    .boundary_grid = SB_RT_BOUNDARY_GRID };
}

int rt_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
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

/* s is one of names[0, n): *out = vals[i]. Returns 0 or -1. */
static int parse_word(const char *s, const char *const *names, const int *vals, int n, int *out)
{
    for (int i = 0; s && i < n; i++)
        if (!strcmp(s, names[i])) {
            *out = vals[i];
            return 0;
        }
    return -1;
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

int rt_opts_parse(rt_opts *o, int argc, char **argv, int *i)
{
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    int bad = 0;
    if (!strcmp(a, "-n"))
        bad = rt_parse_u64(v, 0, 1u << 24, &o->n_gen);
    else if (!strcmp(a, "--threads"))
        bad = rt_parse_u64(v, 1, 1024, &o->threads);
    else if (!strcmp(a, "--page-tokens"))
        bad = rt_parse_u64(v, 1, 65536, &o->page_tokens);
    else if (!strcmp(a, "--boundary-grid")) {
        bad = rt_parse_u64(v, 0, 1u << 30, &o->boundary_grid) || o->boundary_grid % SB_RT_GDN_CHUNK;
    } else if (!strcmp(a, "--boundary-kib")) {
        bad = rt_parse_u64(v, 1, 1u << 30, &o->boundary_kib);
    } else if (!strcmp(a, "--batch"))
        bad = rt_parse_u64(v, 1, 65536, &o->batch);
    else if (!strcmp(a, "--seed"))
        bad = rt_parse_u64(v, 0, UINT64_MAX, &o->seed);
    else if (!strcmp(a, "--top-k"))
        bad = rt_parse_u64(v, 0, UINT32_MAX, &o->top_k);
    else if (!strcmp(a, "--ram-mib"))
        bad = rt_parse_u64(v, 16, 1u << 24, &o->ram_mib);
    else if (!strcmp(a, "--min-prefix"))
        bad = rt_parse_u64(v, 0, UINT32_MAX, &o->min_prefix);
    else if (!strcmp(a, "--temp"))
        bad = parse_float(v, 0, 100, &o->temp);
    else if (!strcmp(a, "--top-p"))
        bad = parse_float(v, 1e-6f, 1, &o->top_p);
    else if (!strcmp(a, "--bank-dir"))
        bad = v ? (o->bank_dir = v, 0) : -1;
    else if (!strcmp(a, "--session"))
        bad = v ? (o->session = v, 0) : -1;
    else if (!strcmp(a, "--scope"))
        bad = v ? (o->scope = v, 0) : -1;
    else if (!strcmp(a, "--shared"))
        bad = v ? (o->shared = v, 0) : -1;
    else if (!strcmp(a, "--shared-auth"))
        bad = v ? (o->shared_auth = v, 0) : -1;
    else if (rt_shared_tune_opt(a, v, &o->shared_tune, &bad))
        ;
    else if (!strcmp(a, "--ssd-session-cache"))
        bad = parse_word(v, (const char *const[]){ "on", "off", "write-only" },
                         (const int[]){ RT_SSD_ON, RT_SSD_OFF, RT_SSD_WRITE_ONLY }, 3, &o->ssd);
    else if (!strcmp(a, "--engine"))
        bad = parse_word(v, (const char *const[]){ "builtin", "llama.cpp" },
                         (const int[]){ RT_ENGINE_BUILTIN, RT_ENGINE_LLAMA }, 2, &o->engine);
    else if (!strcmp(a, "--durability"))
        bad = parse_word(v, (const char *const[]){ "periodic", "commit", "none" },
                         (const int[]){ SB_DURABILITY_PERIODIC, SB_DURABILITY_COMMIT,
                                        SB_DURABILITY_NONE },
                         3, &o->durability);
    else if (!strcmp(a, "--print-token-ids"))
        return o->print_ids = 1, 1;
    else if (!strcmp(a, "--stop-at-eos"))
        return o->stop_eos = 1, 1;
    else
        return 0;
    if (bad)
        return -1;
    (*i)++;
    return 1;
}

int rt_parse_args(rt_opts *o, int argc, char **argv, const char *cmd, void (*usage)(FILE *),
                  rt_args_fn own, void *ctx)
{
    rt_opts_default(o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int took = rt_opts_parse(o, argc, argv, &i);
        if (took > 0)
            continue;
        if (took == 0 && (!strcmp(a, "--help") || !strcmp(a, "-h"))) {
            usage(stdout);
            return 1;
        }
        if (took == 0 && (took = own(ctx, a, v)) > 0) {
            i += took - 1;
            continue;
        }
        if (took == 0 && a[0] != '-' && !o->model) {
            o->model = a;
            continue;
        }
        if (!strcmp(a, "--engine")) { /* name the choices */
            fprintf(stderr, "snapbank %s: --engine '%s': no such engine: use builtin or "
                            "llama.cpp\n", cmd, v ? v : "");
            return 2;
        }
        fprintf(stderr, "snapbank %s: bad argument '%s'%s%s\n\n", cmd, a, v ? " " : "",
                v && a[0] == '-' ? v : "");
        usage(stderr);
        return 2;
    }
    return 0;
}

int rt_opts_check(const rt_opts *o, const char *cmd)
{
    if (o->session && !o->bank_dir) {
        fprintf(stderr, "snapbank %s: --session needs --bank-dir (where sessions are kept)\n",
                cmd);
        return 2;
    }
    if (o->session) {
        size_t n = strlen(o->session);
        int ok = n > 0 && n <= 128 && o->session[0] != '.';
        for (size_t i = 0; ok && i < n; i++) {
            char c = o->session[i];
            ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '_' || c == '-';
        }
        if (!ok) {
            fprintf(stderr, "snapbank %s: --session '%s': use 1-128 letters, digits, '.', '_' "
                            "or '-', not starting with '.'\n", cmd, o->session);
            return 2;
        }
    }
    if ((o->shared_auth || o->shared_tune.given) && !o->shared) {
        fprintf(stderr, "snapbank %s: %s needs --shared\n", cmd,
                o->shared_auth ? "--shared-auth" : o->shared_tune.given);
        return 2;
    }
    if (o->shared && !rt_shared_seeds(o->shared, cmd))
        return 2;
    if (strlen(o->scope) > SB_SCOPE_MAX) {
        fprintf(stderr, "snapbank %s: --scope is longer than %u bytes\n", cmd, SB_SCOPE_MAX);
        return 2;
    }
#ifndef SB_CLI_LLAMA
    if (o->engine == RT_ENGINE_LLAMA) {
        fprintf(stderr, "snapbank %s: --engine llama.cpp: this snapbank was built without "
                        "llama.cpp: run scripts/setup.sh (needs npm) and rebuild\n", cmd);
        return 2;
    }
#endif
    return 0;
}

/* mkdir that accepts an existing directory. */
static int ensure_dir(const char *path, const char *cmd)
{
    if (mkdir(path, 0700) == 0 || errno == EEXIST) {
        struct stat st;
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
            return 0;
        fprintf(stderr, "snapbank %s: %s: not a directory\n", cmd, path);
        return 1;
    }
    fprintf(stderr, "snapbank %s: %s: cannot create: %s\n", cmd, path, strerror(errno));
    return 1;
}

int rt_bank_paths(const rt_opts *o, const char *suffix, char *store_dir, char *sess_path,
                  const char *cmd)
{
    store_dir[0] = sess_path[0] = 0;
    if (!o->bank_dir)
        return 0;
    char sess_dir[4096];
    if (snprintf(store_dir, 4096, "%s/store", o->bank_dir) >= 4096 ||
        snprintf(sess_dir, sizeof sess_dir, "%s/sessions", o->bank_dir) >= (int)sizeof sess_dir) {
        fprintf(stderr, "snapbank %s: --bank-dir: path too long\n", cmd);
        return 1;
    }
    if (ensure_dir(o->bank_dir, cmd) || ensure_dir(sess_dir, cmd))
        return 1;
    if (o->session && snprintf(sess_path, 4096, "%s/sessions/%s%s", o->bank_dir, o->session,
                               suffix) >= 4096) {
        fprintf(stderr, "snapbank %s: --bank-dir: path too long\n", cmd);
        return 1;
    }
    return 0;
}

int rt_bank_config(const rt_opts *o, uint32_t max_seq_tokens, const char *store_dir,
                   sb_config *cfg, rt_auth *auth, const char *cmd)
{
    memset(auth, 0, sizeof *auth);
    sb_config_default(cfg);
    cfg->ram_bytes = o->ram_mib << 20;
    cfg->max_seq_tokens = max_seq_tokens;
    cfg->min_prefix_tokens = (uint32_t)o->min_prefix;
    cfg->dir = o->bank_dir && o->ssd != RT_SSD_OFF ? store_dir : NULL;
    cfg->write_mode = o->ssd == RT_SSD_WRITE_ONLY ? SB_WRITE_ONLY : SB_WRITE_THROUGH;
    cfg->durability = (sb_durability)o->durability;
    if (o->shared) {
        if (!(cfg->shared_seeds = rt_shared_seeds(o->shared, cmd)))
            return 1;
        if (o->shared_auth && rt_shared_auth(o->shared_auth, auth, cmd))
            return 1;
        cfg->shared_user = auth->user[0] ? auth->user : NULL;
        cfg->shared_password = auth->password[0] ? auth->password : NULL;
        rt_shared_tune_apply(&o->shared_tune, cfg);
    }
    return 0;
}

int rt_env_open(rt_env *e, const rt_opts *o, const char *cmd)
{
    memset(e, 0, sizeof *e);
    sb_rt_err err = { 0 };
    double t0 = sb_rt_now_s();
    if (sb_rt_model_load(o->model, &e->m, &err) != SB_OK) {
        fprintf(stderr, "snapbank %s: %s\n", cmd, err.msg);
        return 1;
    }
    e->t_load = sb_rt_now_s() - t0;
    char store_dir[4096];
    if (rt_bank_paths(o, ".session", store_dir, e->sess_path, cmd))
        goto fail;
    sb_config cfg;
    if (rt_bank_config(o, e->m->hp.n_ctx, store_dir, &cfg, &e->auth, cmd))
        goto fail;
    const char *what = "the bank";
    sb_layout layout;
    int rc = SB_ERR_NOMEM;
    e->bpt = malloc(2 * e->m->hp.n_layers * sizeof *e->bpt);
    if (!e->bpt)
        goto fail_rc;
    t0 = sb_rt_now_s();
    if ((rc = sb_rt_kv_layout(e->m, (uint32_t)o->page_tokens, e->bpt, &layout)) != SB_OK ||
        (rc = sb_store_open(&cfg, &e->st)) != SB_OK) {
        memset(&e->auth, 0, sizeof e->auth); /* the store keeps its own copy */
        goto fail_rc;
    }
    memset(&e->auth, 0, sizeof e->auth);
    e->t_open = sb_rt_now_s() - t0;
    if ((rc = sb_ns_open(e->st, &layout, o->scope, strlen(o->scope), &e->ns)) != SB_OK)
        goto fail_rc;
    /* One context's pages ready in the pool (a refusal only means they
     * fault in as they are used). */
    (void)sb_rt_kv_prefault(e->m, e->ns, NULL);
    what = "the forward context";
    sb_rt_sampling so = { o->temp, (uint32_t)o->top_k, o->top_p, o->seed };
    if ((rc = sb_rt_ctx_new(e->m, (unsigned)o->threads, (uint32_t)o->batch, &e->ctx)) != SB_OK ||
        (rc = sb_rt_sampler_init(&e->smp, &so, e->m->hp.n_vocab)) != SB_OK)
        goto fail_rc;
    what = "the session";
    if ((rc = sb_rt_session_new(e->m, e->ctx, e->ns, &e->s)) != SB_OK)
        goto fail_rc;
    if (o->ssd == RT_SSD_WRITE_ONLY)
        sb_rt_session_set_disk_use(e->s, SB_RT_DISK_NEVER);
    if (e->m->hp.n_rec &&
        (rc = sb_rt_session_set_boundaries(e->s, o->boundary_grid, o->boundary_kib << 10)) != SB_OK)
        goto fail_rc;
    if (e->sess_path[0]) {
        uint32_t *tok = NULL;
        size_t n = 0;
        rc = sb_rt_session_load(e->m, e->sess_path, &tok, &n, &err);
        if (rc == SB_OK) {
            rc = sb_rt_session_resume(e->s, tok, n);
            free(tok);
            e->resumed = n > 0;
            if (rc != SB_OK)
                goto fail_rc;
        } else if (rc != SB_ERR_NOT_FOUND) {
            fprintf(stderr, "snapbank %s: %s\n", cmd, err.msg);
            goto fail;
        }
    }
    return 0;
fail_rc:
    fprintf(stderr, "snapbank %s: %s: %s: %s\n", cmd, o->bank_dir ? o->bank_dir : o->model,
            what, sb_strerror(rc));
    if (rc == SB_ERR_SUPERBLOCK)
        fprintf(stderr, "snapbank %s: to salvage it: snapbank fsck --repair %s\n", cmd,
                store_dir);
fail:
    rt_env_close(e, NULL, NULL);
    return 1;
}

int rt_env_save(rt_env *e, const char *cmd)
{
    if (!e->sess_path[0])
        return 0;
    sb_rt_err err = { 0 };
    if (sb_rt_session_save(e->s, e->sess_path, &err) != SB_OK) {
        fprintf(stderr, "snapbank %s: %s\n", cmd, err.msg);
        return 1;
    }
    return 0;
}

int rt_env_close(rt_env *e, const char *cmd, const rt_opts *o)
{
    sb_rt_session_free(e->s);
    sb_rt_sampler_fini(&e->smp);
    sb_rt_ctx_free(e->ctx);
    sb_ns_close(e->ns);
    /* Publish what waits for the shared tier before it goes (close drops it). */
    if (e->st && sb_store_has_shared(e->st))
        sb_store_flush(e->st);
    int rc = sb_store_close(e->st);
    if (rc != SB_OK && cmd)
        fprintf(stderr, "snapbank %s: %s: closing the bank: %s (its last writes may be lost)\n",
                cmd, o && o->bank_dir ? o->bank_dir : "(RAM)", sb_strerror(rc));
    free(e->bpt);
    sb_rt_model_free(e->m);
    memset(e, 0, sizeof *e);
    return rc != SB_OK;
}

int rt_tokenize(const sb_rt_model *m, const char *text, bool bos, uint32_t **out, size_t *n,
                const char *cmd)
{
    *out = NULL, *n = 0;
    if (!m->tok) {
        fprintf(stderr, "snapbank %s: %s; give token ids instead\n", cmd, m->tok_error);
        return 1;
    }
    bos = bos && sb_rt_tok_add_bos(m->tok);
    size_t len = strlen(text), need = 0;
    int rc = sb_rt_tok_encode(m->tok, text, len, bos, NULL, 0, &need);
    if (rc != SB_OK && rc != SB_ERR_RANGE)
        need = 0;
    uint32_t *t = malloc((need ? need : 1) * sizeof *t);
    if (t && need == 0 && len == 0) { /* empty text, no BOS: no tokens */
        *out = t;
        return 0;
    }
    if (!t || !need || sb_rt_tok_encode(m->tok, text, len, bos, t, need, n) != SB_OK) {
        fprintf(stderr, "snapbank %s: the text could not be tokenized\n", cmd);
        free(t);
        *n = 0;
        return 1;
    }
    *out = t;
    return 0;
}

void rt_report(FILE *f, const char *label, const sb_rt_turn *r)
{
    fprintf(f, "%s cache_mode=%s cached=%zu/%zu", label, sb_rt_cache_mode_name(r->cache_mode),
            r->cached_tokens, r->prompt_tokens);
    if (r->cached_disk_tokens)
        fprintf(f, " (disk %zu)", r->cached_disk_tokens);
    if (r->cached_shared_tokens)
        fprintf(f, " (shared %zu)", r->cached_shared_tokens);
    fprintf(f, " prefill=%zu restore=%.1fms", r->prefill_tokens, r->restore_s * 1e3);
    if (r->restore_bytes)
        fprintf(f, " read=%.1fMiB", (double)r->restore_bytes / (1 << 20));
    fprintf(f, " ttft=%.1fms", r->ttft_s * 1e3);
    if (r->prefill_tokens && r->prefill_tok_s > 0)
        fprintf(f, " prefill_tok/s=%.0f", r->prefill_tok_s);
    if (r->gen_tokens > 1)
        fprintf(f, " decode_tok/s=%.1f", r->decode_tok_s);
    const char *why = sb_rt_turn_miss_reason(r);
    fprintf(f, " miss=%s", why ? why : "none");
    if (r->point_hit)
        fprintf(f, " logits=point_state");
    if (r->boundaries_written || r->boundary_tokens) /* a hybrid model's turn */
        fprintf(f, " boundary=%zu recomputed=%zu bank=%zuB boundaries_written=%zu",
                r->boundary_tokens, r->recomputed_tokens, r->bank_bytes,
                r->boundaries_written);
    if (r->est_read_s > 0)
        fprintf(f, " disk=%s(read~%.1fms,recompute~%.1fms)",
                r->disk_skipped ? "skipped" : "read", r->est_read_s * 1e3,
                r->est_recompute_s * 1e3);
    if (r->est_fetch_s > 0)
    {
        fprintf(f, " shared=%s(fetch~%.1fms,recompute~%.1fms",
                r->shared_skipped ? "skipped" : "asked", r->est_fetch_s * 1e3,
                r->est_fetch_recompute_s * 1e3);
        /* Why it ended short: the fault by name, the server's words or the
         * refused value's key, and how many values were refused. */
        if (r->shared_fault)
            fprintf(f, ",fault=%s", sb_shared_fault_name(r->shared_fault));
        else if (r->shared_rc)
            fprintf(f, ",%s", sb_strerror(r->shared_rc));
        if (r->shared_detail[0])
            fprintf(f, ",\"%s\"", r->shared_detail);
        if (r->shared_bad)
            fprintf(f, ",bad_values=%u", r->shared_bad);
        fputc(')', f);
    }
    if (r->commit_rc != SB_OK)
        fprintf(f, " commit=%s", sb_strerror(r->commit_rc));
    const sb_write_outcome *d = &r->disk;
    if (d->ticket) { /* a disk tier: what it made of the turn */
        fprintf(f, " disk_write=queued:%u,written:%u", d->queued, d->written);
        if (d->deferred)
            fprintf(f, ",deferred:%u", d->deferred);
        if (d->dirty)
            fprintf(f, ",dirty:%u", d->dirty);
        fprintf(f, ",denied:%u", d->denied);
        for (int k = 0, first = 1; k < SB_DENY__COUNT; k++)
            if (d->denied_by[k]) {
                fprintf(f, "%s%s:%u", first ? "(" : ",", sb_deny_name(k), d->denied_by[k]);
                first = 0;
            }
        if (d->denied)
            fputc(')', f);
        fprintf(f, " durable=%s", rt_durable_word(d));
    }
    fputc('\n', f);
}

const char *rt_durable_word(const sb_write_outcome *d)
{
    /* (A write-only store's state is never durable: "write-only".) */
    return !d->ticket ? "-" : d->durable ? "yes" : d->denied ? "no"
           : d->write_only ? "write-only" : "pending";
}

void rt_table_header(FILE *f)
{
    fprintf(f, "%-8s %4s  %-11s %6s %6s %6s %7s %10s %9s %8s %-8s %s\n", "session", "turn",
            "cache_mode", "prompt", "cached", "disk", "prefill", "restore_ms", "ttft_ms",
            "decode/s", "durable", "miss");
}

void rt_table_row(FILE *f, const char *session, int turn, const sb_rt_turn *r)
{
    const char *why = sb_rt_turn_miss_reason(r);
    fprintf(f, "%-8s %4d  %-11s %6zu %6zu %6zu %7zu %10.1f %9.1f %8.1f %-8s %s%s\n", session,
            turn, sb_rt_cache_mode_name(r->cache_mode), r->prompt_tokens, r->cached_tokens,
            r->cached_disk_tokens, r->prefill_tokens, r->restore_s * 1e3, r->ttft_s * 1e3,
            r->decode_tok_s, rt_durable_word(&r->disk), why ? why : "none",
            r->disk_skipped && !(why && !strcmp(why, "recompute_faster"))
                ? " (disk skipped: recompute was faster)" : "");
}
