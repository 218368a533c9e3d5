/* bench_job.c -- read `snapbank bench` job files (bench_job.h). */
#include "bench_job.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "snapbank.h"

typedef enum kt { K_STR, K_SIZE, K_U64, K_DOUBLE, K_TIME, K_RW, K_DUR, K_SIZES, K_PHASES, K_BOOL } kt;

typedef struct key {
    const char *name;
    kt type;
    size_t off, cap;           /* where in bj_job; string capacity */
    const char *def;           /* default, as a value string; NULL: none */
    const char *help;
} key;

#define F(field) offsetof(bj_job, field), sizeof(((bj_job *)0)->field)

/* Every key, in the order --keys prints them. */
static const key KEYS[] = {
    { "description", K_STR, F(description), "", "free text, printed with the results" },
    { "directory", K_STR, F(directory), "/var/tmp",
      "where the job's store (and the fio baseline's file) is made, then removed" },
    { "rw", K_RW, F(rw), "write",
      "write: spill snapshots; read / randread: restore them in order / at random "
      "(written untimed first, the store reopened); randrw: a mix, rwmixread percent "
      "restores; chat: sessions of turns sharing a system prompt" },
    { "rwmixread", K_U64, F(rwmixread), "50", "randrw: percent of operations that restore" },
    { "segment_size", K_SIZE, F(segment_size), "256m", "segment file size" },
    { "page_tokens", K_U64, F(page_tokens), "16", "tokens per page" },
    { "bytes_per_token", K_SIZE, F(bytes_per_token), "16k",
      "state bytes per token (one tensor); a page is page_tokens x this" },
    { "snapshot_size", K_SIZES, F(sizes), "4m",
      "bytes per snapshot (write, read, randread, randrw): one size, or a distribution "
      "size:weight,size:weight,... (weights in percent or any ratio)" },
    { "size", K_SIZE, F(size), "0",
      "bytes of state the job writes (write, randrw: then it stops; read, randread: "
      "what it writes first and restores); 0: run for runtime" },
    { "runtime", K_TIME, F(runtime_s), "0",
      "how long the job runs (simulated time under time_warp); with size, the first "
      "reached ends it" },
    { "sessions", K_U64, F(sessions), "8", "chat: concurrent conversations" },
    { "turns", K_U64, F(turns), "8", "chat: turns per conversation before it starts over" },
    { "prompt_tokens", K_U64, F(prompt_tokens), "1024", "chat: the first turn's prompt" },
    { "tokens_per_turn", K_U64, F(tokens_per_turn), "64", "chat: tokens each later turn adds" },
    { "shared_prefix", K_DOUBLE, F(shared_prefix), "0.5",
      "chat: the fraction of the first prompt every session shares (the system prompt)" },
    { "iodepth", K_U64, F(iodepth), "32", "the store's io_uring queue depth, and fio's" },
    { "threads", K_U64, F(threads), "1",
      "client threads, each running the workload on its own sequences" },
    { "write_budget", K_SIZE, F(write_budget), "0",
      "the tier's write budget per hour; 0: the store's default (128 GiB)" },
    { "burst", K_SIZE, F(burst), "0", "the budget's bucket depth; 0: a twelfth of it" },
    { "time_warp", K_DOUBLE, F(time_warp), "0",
      "simulated hours per real second on the store's clock (0: real time); runtime and "
      "demand are simulated time, and the clock stops at their end" },
    { "demand", K_PHASES, F(phases), "",
      "chat under time_warp: LEVELxHOURS,... the turns' state bytes as a multiple of "
      "write_budget for that many simulated hours (e.g. 2x8,0.5x8,1.25x8)" },
    { "durability", K_DUR, F(durability), "periodic", "none, periodic or commit" },
    { "compression", K_U64, F(compression), "0", "zstd level of records, 0: off (1-22)" },
    { "ram", K_SIZE, F(ram), "1g", "the store's RAM tier budget" },
    { "disk_cap", K_SIZE, F(disk_cap), "0",
      "the disk tier's cap; 0: what it holds plus a quarter of the free space" },
    { "backlog", K_SIZE, F(backlog), "0", "queued-write budget; 0: the store's default" },
    { "min_prefix", K_U64, F(min_prefix), "1", "shortest sequence written to disk, tokens" },
    { "drive_capacity", K_SIZE, F(drive_capacity), "1t",
      "drive size for the projected drive writes per day" },
    { "fio", K_BOOL, F(fio), "1",
      "write and read jobs: run fio on the same directory, block size, queue depth and "
      "size, and print snapbank/fio ratios (when fio is installed)" },
    { "decode", K_STR, F(decode), "",
      "decode with the runtime's model preset (tiny, small) while the job runs, its KV in "
      "the job's store: tokens per second alone (first) and during, step latencies" },
    { "decode_threads", K_U64, F(decode_threads), "1", "the decoder's runtime threads" },
    { "decode_alone", K_TIME, F(decode_alone_s), "3",
      "how long to decode alone before the job, for the baseline" },
    { "foreground", K_BOOL, F(foreground), "1",
      "mark each decode step foreground (the writer holds back, bounded)" },
    { "loops", K_U64, F(loops), "1",
      "run the job this many times, each run followed by its fio run; the last "
      "prints the median and range of the snapbank/fio ratios (a disk's speed drifts)" },
    { "seed", K_U64, F(seed), "1", "token and content generator seed" },
};
#define N_KEYS (sizeof KEYS / sizeof *KEYS)

static const char *const RW_NAMES[] = { "write", "read", "randread", "randrw", "chat" };

const char *bj_durability_name(int durability)
{
    static const char *const names[] = { "none", "periodic", "commit" };
    return durability >= 0 && durability <= SB_DURABILITY_COMMIT ? names[durability] : "?";
}

const char *bj_rw_name(bj_rw rw)
{
    return (unsigned)rw < 5 ? RW_NAMES[rw] : "unknown";
}

void bj_keys(FILE *f)
{
    fprintf(f, "job file keys (fio-style INI: [global] defaults, one [section] per job):\n\n");
    for (size_t i = 0; i < N_KEYS; i++)
        fprintf(f, "  %-16s default %-10s %s\n", KEYS[i].name,
                KEYS[i].def && *KEYS[i].def ? KEYS[i].def : "-", KEYS[i].help);
    fprintf(f, "\nsizes take k, m, g, t (x1024); times s, m, h (seconds by default).\n");
}

/* ---- values --------------------------------------------------------------------- */

static int parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || v < 0)
        return -1;
    double mul = 1;
    switch (tolower((unsigned char)*end)) {
    case 'k': mul = 1024.0; end++; break;
    case 'm': mul = 1048576.0; end++; break;
    case 'g': mul = 1073741824.0; end++; break;
    case 't': mul = 1099511627776.0; end++; break;
    default: break;
    }
    if (tolower((unsigned char)*end) == 'i')
        end++;
    if (tolower((unsigned char)*end) == 'b')
        end++;
    if (*end || v * mul >= 1.8e19)
        return -1;
    *out = (uint64_t)llround(v * mul);
    return 0;
}

static int parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !(v >= 0) || isinf(v))
        return -1;
    *out = v;
    return 0;
}

static int parse_time(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !(v >= 0))
        return -1;
    double mul = 1;
    if (*end == 's')
        end++;
    else if (*end == 'm')
        mul = 60, end++;
    else if (*end == 'h')
        mul = 3600, end++;
    if (*end)
        return -1;
    *out = v * mul;
    return 0;
}

static int parse_sizes(const char *s, bj_job *j)
{
    unsigned n = 0;
    char buf[512];
    if (strlen(s) >= sizeof buf)
        return -1;
    strcpy(buf, s);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (n == BJ_SIZES_MAX)
            return -1;
        char *colon = strchr(t, ':');
        uint64_t w = 1;
        if (colon) {
            *colon = 0;
            char *end;
            w = strtoull(colon + 1, &end, 10);
            if (*end || !w || w > 1000000)
                return -1;
        }
        if (parse_size(t, &j->sizes[n].bytes) || !j->sizes[n].bytes)
            return -1;
        j->sizes[n++].weight = (uint32_t)w;
    }
    if (!n)
        return -1;
    j->n_sizes = n;
    return 0;
}

static int parse_phases(const char *s, bj_job *j)
{
    unsigned n = 0;
    char buf[512];
    if (strlen(s) >= sizeof buf)
        return -1;
    strcpy(buf, s);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *x = strchr(t, 'x');
        if (!x || n == BJ_PHASES_MAX)
            return -1;
        *x = 0;
        if (parse_double(t, &j->phases[n].level) || parse_double(x + 1, &j->phases[n].hours) ||
            j->phases[n].hours <= 0)
            return -1;
        n++;
    }
    j->n_phases = n;
    return 0;
}

/* Set key k of j from value v. Returns 0, or -1 for a bad value. */
static int set(bj_job *j, const key *k, const char *v)
{
    void *p = (char *)j + k->off;
    switch (k->type) {
    case K_STR:
        if (strlen(v) >= k->cap)
            return -1;
        strcpy(p, v);
        return 0;
    case K_SIZE:
        return parse_size(v, p);
    case K_U64: {
        char *end;
        errno = 0;
        unsigned long long x = strtoull(v, &end, 10);
        if (!*v || *end || errno || *v == '-')
            return -1;
        *(uint64_t *)p = x;
        return 0;
    }
    case K_DOUBLE:
        return parse_double(v, p);
    case K_TIME:
        return parse_time(v, p);
    case K_RW:
        for (int i = 0; i < 5; i++)
            if (!strcmp(v, RW_NAMES[i])) {
                *(bj_rw *)p = (bj_rw)i;
                return 0;
            }
        return -1;
    case K_DUR:
        for (int i = SB_DURABILITY_NONE; i <= SB_DURABILITY_COMMIT; i++)
            if (!strcmp(v, bj_durability_name(i))) {
                *(int *)p = i;
                return 0;
            }
        return -1;
    case K_SIZES:
        return parse_sizes(v, j);
    case K_PHASES:
        return *v ? parse_phases(v, j) : (j->n_phases = 0, 0);
    case K_BOOL:
        if (!strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "on"))
            *(bool *)p = true;
        else if (!strcmp(v, "0") || !strcmp(v, "false") || !strcmp(v, "off"))
            *(bool *)p = false;
        else
            return -1;
        return 0;
    }
    return -1;
}

static const key *find_key(const char *name)
{
    for (size_t i = 0; i < N_KEYS; i++)
        if (!strcmp(KEYS[i].name, name))
            return &KEYS[i];
    return NULL;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = 0;
    return s;
}

/* Does job j have what its workload needs, in range? Returns NULL or why not. */
static const char *check_job(const bj_job *j)
{
    if (!j->page_tokens || j->page_tokens > SB_PAGE_TOKENS_MAX)
        return "page_tokens out of range";
    if (!j->bytes_per_token || j->page_tokens * j->bytes_per_token > SB_PAGE_BYTES_MAX)
        return "a page (page_tokens x bytes_per_token) out of range";
    if (j->segment_size < (64u << 10) || j->segment_size % 4096)
        return "segment_size under 64k or not a multiple of 4k";
    if (!j->loops || j->loops > 100)
        return "loops out of range (1-100)";
    if (!j->iodepth || j->iodepth > 4096 || !j->threads || j->threads > 64)
        return "iodepth (1-4096) or threads (1-64) out of range";
    if (j->compression > 22)
        return "compression is a zstd level, 0-22";
    if (j->rwmixread > 100 || j->shared_prefix > 1)
        return "rwmixread (0-100) or shared_prefix (0-1) out of range";
    if (!j->size && !j->runtime_s && !(j->rw == BJ_CHAT && j->n_phases))
        return "neither size nor runtime (nor demand) says when the job ends";
    if ((j->rw == BJ_READ || j->rw == BJ_RANDREAD) && !j->size)
        return "read jobs need size (what is written first, then restored)";
    if (j->rw == BJ_CHAT && (!j->sessions || !j->turns || !j->prompt_tokens))
        return "chat needs sessions, turns and prompt_tokens";
    if (j->n_phases && (j->rw != BJ_CHAT || !j->time_warp || !j->write_budget))
        return "demand needs rw=chat, time_warp and write_budget";
    if (*j->decode && strcmp(j->decode, "tiny") && strcmp(j->decode, "small"))
        return "decode is a model preset: tiny or small";
    if (*j->decode && (!j->decode_threads || j->decode_threads > 64 || j->time_warp))
        return "decode needs decode_threads 1-64 and real time (no time_warp)";
    for (unsigned i = 0; i < j->n_sizes; i++)
        if (j->sizes[i].bytes / j->bytes_per_token < 1 ||
            j->sizes[i].bytes / j->bytes_per_token > (1u << 24))
            return "a snapshot_size under one token or over 2^24 tokens";
    return NULL;
}

int bj_load(const char *path, bj_job **out, size_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "snapbank bench: %s: %s\n", path, strerror(errno));
        return -1;
    }
    bj_job global;
    memset(&global, 0, sizeof global);
    for (size_t i = 0; i < N_KEYS; i++)
        if (KEYS[i].def && set(&global, &KEYS[i], KEYS[i].def) != 0)
            abort(); /* a default that does not parse: a bug here */
    bj_job *jobs = NULL, *cur = &global;
    size_t n = 0, cap = 0;
    char line[2048];
    unsigned ln = 0;
    int rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        ln++;
        if (!strchr(line, '\n') && !feof(f)) {
            fprintf(stderr, "snapbank bench: %s:%u: line too long\n", path, ln);
            rc = -1;
            break;
        }
        char *c = strpbrk(line, "#;");
        if (c)
            *c = 0;
        char *s = trim(line);
        if (!*s)
            continue;
        if (*s == '[') {
            char *e = strchr(s, ']');
            if (!e || e[1] || e == s + 1 || (size_t)(e - s - 1) >= BJ_NAME_MAX) {
                fprintf(stderr, "snapbank bench: %s:%u: bad section header '%s'\n", path, ln, s);
                rc = -1;
                break;
            }
            *e = 0;
            if (!strcmp(s + 1, "global")) {
                if (n) {
                    fprintf(stderr, "snapbank bench: %s:%u: [global] after a job: put it first\n",
                            path, ln);
                    rc = -1;
                }
                cur = &global;
                continue;
            }
            if (n == cap) {
                cap = cap ? 2 * cap : 8;
                bj_job *p = realloc(jobs, cap * sizeof *p);
                if (!p) {
                    fprintf(stderr, "snapbank bench: out of memory\n");
                    rc = -1;
                    break;
                }
                jobs = p;
            }
            cur = &jobs[n++];
            *cur = global;
            snprintf(cur->name, sizeof cur->name, "%s", s + 1);
            cur->line = ln;
            continue;
        }
        char *eq = strchr(s, '=');
        const char *v = "1";
        if (eq) {
            *eq = 0;
            v = trim(eq + 1);
        }
        char *name = trim(s);
        const key *k = find_key(name);
        if (!k) {
            fprintf(stderr, "snapbank bench: %s:%u: unknown key '%s' ('snapbank bench --keys' "
                            "lists them)\n",
                    path, ln, name);
            rc = -1;
        } else if (set(cur, k, v) != 0) {
            fprintf(stderr, "snapbank bench: %s:%u: bad value '%s' for %s\n", path, ln, v, name);
            rc = -1;
        }
    }
    if (rc == 0 && ferror(f)) {
        fprintf(stderr, "snapbank bench: %s: read error\n", path);
        rc = -1;
    }
    fclose(f);
    if (rc == 0 && !n) {
        fprintf(stderr, "snapbank bench: %s: no job section (only [global])\n", path);
        rc = -1;
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const char *why = check_job(&jobs[i]);
        if (why) {
            fprintf(stderr, "snapbank bench: %s:%u: job '%s': %s\n", path, jobs[i].line,
                    jobs[i].name, why);
            rc = -1;
        }
    }
    if (rc != 0) {
        free(jobs);
        return -1;
    }
    *out = jobs;
    *n_out = n;
    return 0;
}
