/* bench_run.c -- run a `snapbank bench` job (bench_run.h).
 *
 * Workers (threads=N of them; chat runs one) loop over operations on their
 * own sequences; the calling thread samples the store's stats every few
 * milliseconds for the per-hour wear figures, every second for the series,
 * and reports progress. Snapshot state is a fixed random pattern with an
 * 8-byte stamp at the start of every token slice, a function of the token
 * and the one before it (so a shared system prompt has the same state in
 * every session); restores check every stamp.
 */
#define _GNU_SOURCE
#include "bench_run.h"

#include "bench_decode.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* ---- the run ------------------------------------------------------------------- */

typedef struct snap {
    uint64_t id;               /* its tokens derive from it */
    uint32_t n;                /* tokens */
} snap;

typedef struct run run;

typedef struct worker {
    run *r;
    unsigned idx;
    pthread_t th;
    uint64_t rng;
    uint8_t *buf, *got;        /* a snapshot's state, a restore's */
    uint32_t *tok;
    snap *snaps;               /* what it wrote (read jobs restore these) */
    size_t n_snaps, snaps_cap;
    br_side write, read;       /* its own counts; merged at the end */
    br_durability dur;         /* ...and its puts' outcomes */
    int failed;
    bool joined;
} worker;

struct run {
    const bj_job *j;
    br_result *res;
    sb_store *st;
    sb_ns *ns;
    uint32_t bpt, max_tok;
    uint8_t *pattern;          /* max_tok * bpt random bytes */
    uint64_t t0;               /* real start, ns */
    double warp;               /* store-clock ns per real ns (0: real time) */
    _Atomic uint64_t next_id;
    _Atomic uint64_t written;  /* state bytes put (the size limit) */
    _Atomic uint64_t wbytes, rbytes; /* for the series: put / restored */
    _Atomic int stop;
    bool timed;                /* the phase being measured (read jobs: restores) */
    double total_hours;        /* demand: the simulated day's length */
    double end_ns;             /* time warp with a runtime or demand: where
                                  the store clock stops (store ns after t0),
                                  so the job's simulated length is exact
                                  however slow the machine (its final flush
                                  happens at the day's end); 0: never */
};

/* Store ns since t0: real time, or warped and stopped at end_ns. */
static double warped_ns(const run *r)
{
    double t = (double)(bl_now_ns() - r->t0);
    if (!r->warp)
        return t;
    t *= r->warp;
    return r->end_ns && t > r->end_ns ? r->end_ns : t;
}

static uint64_t store_clock(void *ctx)
{
    return 1000000000ull + (uint64_t)warped_ns(ctx);
}

static double sim_hours(const run *r)
{
    return warped_ns(r) / 3.6e12;
}

/* The hour of the job a store-clock time h (hours) falls in: bytes written
 * at the stopped clock's end belong to the last hour, not the next. */
static size_t hour_of(const run *r, double h)
{
    size_t hour = (size_t)h;
    if (r->end_ns && hour && (double)hour == h && h * 3.6e12 >= r->end_ns)
        hour--;
    return hour;
}

/* Token i of snapshot id (write, read and randrw jobs). */
static uint32_t snap_token(const run *r, uint64_t id, uint32_t i)
{
    return i == 0 ? (uint32_t)id : (uint32_t)mix(r->j->seed ^ id << 32 ^ i) & 0xFFFFF;
}

static uint64_t stamp(const uint32_t *tok, uint32_t i)
{
    return mix((uint64_t)tok[i] << 24 ^ i ^ (uint64_t)(i ? tok[i - 1] : 7) << 44);
}

/* The state of tok[from, n) into buf, which holds the pattern already
 * (copied once per worker): only the stamps change, so making a snapshot
 * costs the workload nothing, as an engine's state is there already. */
static void fill(const run *r, const uint32_t *tok, uint32_t from, uint32_t n, uint8_t *buf)
{
    for (uint32_t i = from; i < n; i++) {
        uint64_t s = stamp(tok, i);
        memcpy(buf + (size_t)i * r->bpt, &s, r->bpt < 8 ? r->bpt : 8);
    }
}

static bool stamps_ok(const run *r, const uint32_t *tok, uint32_t n, const uint8_t *buf)
{
    for (uint32_t i = 0; i < n; i++) {
        uint64_t s = stamp(tok, i);
        if (memcmp(buf + (size_t)i * r->bpt, &s, r->bpt < 8 ? r->bpt : 8))
            return false;
    }
    return true;
}

void br_durability_add(br_durability *d, const sb_write_outcome *oc)
{
    if (!oc->ticket)
        return; /* RAM only, or nothing stored */
    d->puts++;
    d->durable += oc->durable != 0;
    d->pending += !oc->durable && !oc->denied;
    d->never += oc->denied != 0;
    d->queued += oc->queued;
    d->written += oc->written;
    d->deferred += oc->deferred;
    d->dirty += oc->dirty;
    d->denied += oc->denied;
}

static void fail(worker *w, const char *what, int rc)
{
    fprintf(stderr, "snapbank bench: job '%s': %s: %s\n", w->r->j->name, what,
            rc ? sb_strerror(rc) : "wrong bytes");
    w->failed = 1;
    atomic_store(&w->r->stop, 1);
}

/* The size of the next snapshot, tokens. */
static uint32_t pick_tokens(worker *w)
{
    const bj_job *j = w->r->j;
    uint64_t total = 0;
    for (unsigned i = 0; i < j->n_sizes; i++)
        total += j->sizes[i].weight;
    w->rng = mix(w->rng);
    uint64_t x = w->rng % total;
    unsigned i = 0;
    while (x >= j->sizes[i].weight)
        x -= j->sizes[i++].weight;
    uint64_t n = j->sizes[i].bytes / j->bytes_per_token;
    return (uint32_t)(n ? n : 1);
}

/* Is the job over (size written, runtime passed)? */
static bool over(run *r)
{
    const bj_job *j = r->j;
    if (atomic_load(&r->stop))
        return true;
    if (j->size && atomic_load(&r->written) >= j->size)
        return true;
    double t = r->warp ? sim_hours(r) * 3600 : (double)(bl_now_ns() - r->t0) / 1e9;
    return j->runtime_s && t >= j->runtime_s;
}

/* Put w->tok[0, n) with its state, counting `fresh` tokens of it as the
 * state handed over: timed into side (NULL: untimed). Returns 0 or -1. */
static int put_tokens(worker *w, uint32_t n, uint32_t fresh, br_side *side)
{
    run *r = w->r;
    fill(r, w->tok, 0, n, w->buf);
    const void *in[1] = { w->buf };
    sb_write_outcome oc;
    uint64_t t = bl_now_ns();
    int rc = sb_ns_put_ex(r->ns, w->tok, n, in, NULL, NULL, &oc);
    t = bl_now_ns() - t;
    if (rc != SB_OK && rc != SB_ERR_BUDGET) { /* BUDGET: RAM full, partly stored */
        fail(w, "put", rc);
        return -1;
    }
    uint64_t bytes = (uint64_t)fresh * r->bpt;
    atomic_fetch_add(&r->written, bytes);
    if (side) {
        side->bytes += bytes;
        side->ops++;
        bl_add(&side->lat, t);
        atomic_fetch_add(&r->wbytes, bytes);
        br_durability_add(&w->dur, &oc);
    }
    return 0;
}

/* Put one new snapshot of n tokens; timed into side (NULL: untimed). */
static int put_snap(worker *w, uint32_t n, br_side *side)
{
    run *r = w->r;
    snap s = { atomic_fetch_add(&r->next_id, 1), n };
    for (uint32_t i = 0; i < n; i++)
        w->tok[i] = snap_token(r, s.id, i);
    if (put_tokens(w, n, n, side) != 0)
        return -1;
    if (w->n_snaps == w->snaps_cap) {
        size_t cap = w->snaps_cap ? 2 * w->snaps_cap : 256;
        snap *p = realloc(w->snaps, cap * sizeof *p);
        if (!p) {
            fail(w, "out of memory", SB_ERR_NOMEM);
            return -1;
        }
        w->snaps = p;
        w->snaps_cap = cap;
    }
    w->snaps[w->n_snaps++] = s;
    return 0;
}

/* Restore the tokens of tok[0, n) the bank holds, checked; timed. Returns
 * the tokens restored, or -1. */
static long restore(worker *w, uint32_t n, br_side *side)
{
    run *r = w->r;
    uint64_t t = bl_now_ns();
    sb_match *m = NULL;
    int rc = sb_ns_match(r->ns, w->tok, n, &m);
    if (rc != SB_OK) {
        fail(w, "match", rc);
        return -1;
    }
    sb_match_info info;
    sb_match_get_info(m, &info);
    size_t L = info.n_tokens;
    void *out[1] = { w->got };
    rc = L ? sb_match_restore(m, L, out, NULL) : SB_OK;
    if (rc == SB_ERR_CORRUPT || rc == SB_ERR_IO) { /* it shrank: what is left */
        sb_match_get_info(m, &info);
        L = info.n_tokens;
        rc = L ? sb_match_restore(m, L, out, NULL) : SB_OK;
    }
    sb_match_release(m);
    t = bl_now_ns() - t;
    if (rc != SB_OK) {
        fail(w, "restore", rc);
        return -1;
    }
    if (!stamps_ok(r, w->tok, (uint32_t)L, w->got)) {
        fail(w, "restore", 0);
        return -1;
    }
    uint64_t bytes = (uint64_t)L * r->bpt;
    side->bytes += bytes;
    side->ops++;
    bl_add(&side->lat, t);
    atomic_fetch_add(&r->rbytes, bytes);
    return (long)L;
}

static int restore_snap(worker *w, const snap *s)
{
    for (uint32_t i = 0; i < s->n; i++)
        w->tok[i] = snap_token(w->r, s->id, i);
    return restore(w, s->n, &w->read) < 0 ? -1 : 0;
}

/* ---- workloads ------------------------------------------------------------------ */

static void work_write(worker *w, bool timed)
{
    while (!over(w->r) && put_snap(w, pick_tokens(w), timed ? &w->write : NULL) == 0)
        ;
}

static void work_read(worker *w)
{
    if (w->r->j->rw == BJ_RANDREAD)
        for (size_t i = w->n_snaps; i > 1; i--) { /* shuffle */
            w->rng = mix(w->rng);
            size_t k = w->rng % i;
            snap t = w->snaps[i - 1];
            w->snaps[i - 1] = w->snaps[k];
            w->snaps[k] = t;
        }
    for (size_t i = 0; i < w->n_snaps && !atomic_load(&w->r->stop); i++)
        if (restore_snap(w, &w->snaps[i]) != 0)
            break;
}

static void work_randrw(worker *w)
{
    const bj_job *j = w->r->j;
    while (!over(w->r)) {
        w->rng = mix(w->rng);
        int rc;
        if (w->n_snaps && w->rng % 100 < j->rwmixread)
            rc = restore_snap(w, &w->snaps[(w->rng >> 8) % w->n_snaps]);
        else
            rc = put_snap(w, pick_tokens(w), &w->write);
        if (rc != 0)
            break;
    }
}

/* Demand offered by store-clock hour h of the day, bytes (chat under
 * time_warp with demand phases). */
static double demand_until(const bj_job *j, double hours)
{
    double d = 0, at = 0;
    for (unsigned i = 0; i < j->n_phases && at < hours; i++) {
        double span = fmin(j->phases[i].hours, hours - at);
        d += span * j->phases[i].level * (double)j->write_budget;
        at += j->phases[i].hours;
    }
    return d;
}

typedef struct conv {
    uint64_t id;
    uint32_t n, turn;
} conv;

static void conv_tokens(const run *r, const conv *c, uint32_t *tok, uint32_t from, uint32_t n)
{
    const bj_job *j = r->j;
    uint32_t sys = (uint32_t)(j->shared_prefix * (double)j->prompt_tokens);
    for (uint32_t i = from; i < n; i++)
        tok[i] = i < sys ? (uint32_t)mix(j->seed ^ i) & 0xFFFFF
                         : (uint32_t)mix(j->seed ^ c->id << 32 ^ i) & 0xFFFFF;
}

static void work_chat(worker *w)
{
    run *r = w->r;
    const bj_job *j = r->j;
    conv *cs = calloc(j->sessions, sizeof *cs);
    if (!cs) {
        fail(w, "out of memory", SB_ERR_NOMEM);
        return;
    }
    for (uint64_t s = 0; s < j->sessions; s++)
        cs[s] = (conv){ .id = atomic_fetch_add(&r->next_id, 1) };
    double offered = 0;
    while (!atomic_load(&r->stop)) {
        if (j->n_phases) {
            double h = sim_hours(r);
            if (h >= r->total_hours)
                break;
            if (offered >= demand_until(j, h)) {
                usleep(200);
                continue;
            }
        } else if (over(r)) {
            break;
        }
        w->rng = mix(w->rng);
        conv *c = &cs[w->rng % j->sessions];
        if (c->turn == j->turns || c->n + j->tokens_per_turn > r->max_tok) {
            *c = (conv){ .id = atomic_fetch_add(&r->next_id, 1) };
        }
        uint32_t n = c->turn ? c->n + (uint32_t)j->tokens_per_turn : (uint32_t)j->prompt_tokens;
        conv_tokens(r, c, w->tok, 0, n);
        long L = restore(w, n, &w->read); /* what the bank holds of the prompt */
        if (L < 0)
            break;
        if (put_tokens(w, n, n - (uint32_t)L, &w->write) != 0) /* the new state */
            break;
        uint64_t bytes = (uint64_t)(n - (uint32_t)L) * r->bpt;
        offered += (double)bytes;
        size_t hour = (size_t)sim_hours(r);
        if (hour < r->res->n_hours)
            r->res->hour_demand[hour] += (double)bytes;
        c->n = n;
        c->turn++;
    }
    free(cs);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    switch (w->r->j->rw) {
    case BJ_WRITE:
        work_write(w, true);
        break;
    case BJ_READ:
    case BJ_RANDREAD:
        if (w->r->timed)
            work_read(w);
        else
            work_write(w, false);
        break;
    case BJ_RANDRW:
        work_randrw(w);
        break;
    case BJ_CHAT:
        work_chat(w);
        break;
    }
    return NULL;
}

/* ---- sampling -------------------------------------------------------------------- */

/* One sample: the hour's device bytes, a series point every second (and
 * always when last: the run's end), progress every half second. */
static void sample(run *r, uint64_t *last_host, double *next_series, br_progress progress,
                   void *ctx, double *next_progress, bool last)
{
    br_result *res = r->res;
    sb_stats s;
    if (sb_store_stats(r->st, &s) != SB_OK)
        return;
    double h = sim_hours(r), t = (double)(bl_now_ns() - r->t0) / 1e9;
    size_t hour = hour_of(r, h);
    if (hour < res->n_hours)
        res->hour_bytes[hour] += s.disk_write_bytes - *last_host;
    *last_host = s.disk_write_bytes;
    if (t >= *next_series || last) {
        if (res->n_series == res->series_cap) {
            size_t cap = res->series_cap ? 2 * res->series_cap : 64;
            br_sample *p = realloc(res->series, cap * sizeof *p);
            if (p) {
                res->series = p;
                res->series_cap = cap;
            }
        }
        if (res->n_series < res->series_cap)
            res->series[res->n_series++] =
                (br_sample){ t, h, s.disk_write_bytes, atomic_load(&r->wbytes),
                             atomic_load(&r->rbytes) };
        *next_series += 1.0;
    }
    if (progress && t >= *next_progress) {
        const bj_job *j = r->j;
        double done = 0;
        if (j->size)
            done = fmax(done, (double)atomic_load(&r->written) / (double)j->size);
        if (j->runtime_s)
            done = fmax(done, (r->warp ? h * 3600 : t) / j->runtime_s);
        if (r->total_hours)
            done = fmax(done, h / r->total_hours);
        res->stats = s;
        res->secs = t;
        res->live_put = atomic_load(&r->wbytes);
        res->live_restored = atomic_load(&r->rbytes);
        progress(j, fmin(done, 1.0), res, ctx);
        *next_progress = t + 0.5;
    }
}

/* Run the workers to their end, sampling meanwhile. */
static int run_workers(run *r, worker *ws, unsigned n, br_progress progress, void *ctx)
{
    unsigned started = 0;
    for (unsigned i = 0; i < n; i++)
        ws[i].joined = false;
    for (; started < n; started++)
        if (pthread_create(&ws[started].th, NULL, worker_main, &ws[started]) != 0) {
            atomic_store(&r->stop, 1);
            break;
        }
    uint64_t last_host = 0;
    sb_stats s0;
    if (sb_store_stats(r->st, &s0) == SB_OK)
        last_host = s0.disk_write_bytes;
    double next_series = 0, next_progress = 0.5;
    useconds_t period = r->warp ? 2000 : 50000;
    for (;;) {
        bool alive = false;
        for (unsigned i = 0; i < started; i++) {
            if (ws[i].joined)
                continue;
            if (pthread_tryjoin_np(ws[i].th, NULL) == EBUSY)
                alive = true;
            else
                ws[i].joined = true;
        }
        if (!alive)
            break;
        if (r->timed)
            sample(r, &last_host, &next_series, progress, ctx, &next_progress, false);
        usleep(period);
    }
    if (r->timed)
        sample(r, &last_host, &next_series, NULL, NULL, &next_progress, true);
    int failed = started < n;
    for (unsigned i = 0; i < n; i++)
        failed |= ws[i].failed;
    return failed ? -1 : 0;
}

/* ---- the job ------------------------------------------------------------------- */

static int open_store(run *r, const char *dir)
{
    const bj_job *j = r->j;
    sb_config c;
    sb_config_default(&c);
    c.dir = dir;
    c.ram_bytes = j->ram;
    c.segment_bytes = j->segment_size;
    c.disk_bytes = j->disk_cap;
    c.queue_depth = (uint32_t)j->iodepth;
    c.durability = (sb_durability)j->durability;
    c.compress_level = (uint32_t)j->compression;
    c.min_prefix_tokens = (uint32_t)j->min_prefix;
    if (r->max_tok > c.max_seq_tokens)
        c.max_seq_tokens = r->max_tok;
    if (j->write_budget)
        c.write_budget_bytes_per_hour = j->write_budget;
    c.write_budget_burst_bytes = j->burst;
    if (j->backlog)
        c.backlog_bytes = j->backlog;
    if (r->warp) {
        c.clock_ns = store_clock;
        c.clock_ctx = r;
    }
    int rc = sb_store_open(&c, &r->st);
    uint32_t bpt = r->bpt;
    sb_layout l = { .model_id = "snapbank-bench", .model_id_bytes = 14,
                    .page_tokens = (uint32_t)j->page_tokens, .n_tensors = 1,
                    .bytes_per_token = &bpt };
    if (rc == SB_OK)
        rc = sb_ns_open(r->st, &l, NULL, 0, &r->ns);
    if (rc != SB_OK) {
        fprintf(stderr, "snapbank bench: job '%s': opening a store in %s: %s\n", j->name, dir,
                sb_strerror(rc));
        if (r->st)
            sb_store_close(r->st);
        r->st = NULL;
        return -1;
    }
    return 0;
}

/* Close the job's store. Returns 0, or -1 when its close failed (its
 * last writes or syncs: printed). */
static int close_store(run *r)
{
    if (r->ns)
        sb_ns_close(r->ns);
    int rc = r->st ? sb_store_close(r->st) : SB_OK;
    if (rc != SB_OK)
        fprintf(stderr, "snapbank bench: job '%s': closing the store: %s\n", r->j->name,
                sb_strerror(rc));
    r->ns = NULL;
    r->st = NULL;
    return rc == SB_OK ? 0 : -1;
}

int br_run(const bj_job *j, br_result *res, br_progress progress, void *ctx)
{
    memset(res, 0, sizeof *res);
    res->fio_write = res->fio_read = -1;
    run r = { .j = j, .res = res, .bpt = (uint32_t)j->bytes_per_token };
    uint64_t max_tok = 1;
    for (unsigned i = 0; i < j->n_sizes; i++)
        if (j->sizes[i].bytes / j->bytes_per_token > max_tok)
            max_tok = j->sizes[i].bytes / j->bytes_per_token;
    if (j->rw == BJ_CHAT)
        max_tok = j->prompt_tokens + j->turns * j->tokens_per_turn;
    r.max_tok = (uint32_t)max_tok;
    r.warp = j->time_warp * 3600.0; /* store ns per real ns */
    for (unsigned i = 0; i < j->n_phases; i++)
        r.total_hours += j->phases[i].hours;
    if (r.warp)
        r.end_ns = r.total_hours ? r.total_hours * 3.6e12 : j->runtime_s * 1e9;
    double hours = r.total_hours;
    if (!hours)
        hours = (j->runtime_s ? j->runtime_s : 3600) / 3600 + 1;
    res->n_hours = (size_t)ceil(hours) + 1;
    res->hour_bytes = calloc(res->n_hours, sizeof *res->hour_bytes);
    res->hour_demand = calloc(res->n_hours, sizeof *res->hour_demand);
    r.pattern = malloc((size_t)max_tok * r.bpt);
    char dir[BJ_PATH_MAX + BJ_NAME_MAX + 64];
    snprintf(dir, sizeof dir, "%s/snapbank-bench-%s-XXXXXX", j->directory, j->name);
    if (!res->hour_bytes || !res->hour_demand || !r.pattern) {
        fprintf(stderr, "snapbank bench: out of memory\n");
        free(r.pattern);
        return -1;
    }
    if (!mkdtemp(dir)) {
        fprintf(stderr, "snapbank bench: job '%s': cannot make a directory in %s: %s\n",
                j->name, j->directory, strerror(errno));
        free(r.pattern);
        return -1;
    }
    uint64_t s = j->seed;
    for (size_t i = 0; i < (size_t)max_tok * r.bpt; i += 8) {
        uint64_t v = mix(s++);
        memcpy(r.pattern + i, &v, (size_t)max_tok * r.bpt - i < 8 ? (size_t)max_tok * r.bpt - i : 8);
    }
    unsigned n_w = j->rw == BJ_CHAT ? 1 : (unsigned)j->threads;
    worker *ws = calloc(n_w, sizeof *ws);
    int rc = ws ? 0 : -1;
    for (unsigned i = 0; rc == 0 && i < n_w; i++) {
        ws[i] = (worker){ .r = &r, .idx = i, .rng = mix(j->seed * 31 + i) };
        ws[i].buf = malloc((size_t)max_tok * r.bpt);
        ws[i].got = malloc((size_t)max_tok * r.bpt);
        ws[i].tok = malloc((size_t)max_tok * sizeof *ws[i].tok);
        if (!ws[i].buf || !ws[i].got || !ws[i].tok)
            rc = -1;
        else
            memcpy(ws[i].buf, r.pattern, (size_t)max_tok * r.bpt);
    }
    atomic_store(&r.next_id, 1);
    if (rc != 0)
        fprintf(stderr, "snapbank bench: out of memory\n");
    r.t0 = bl_now_ns();
    if (rc == 0)
        rc = open_store(&r, dir);
    if (rc == 0 && (j->rw == BJ_READ || j->rw == BJ_RANDREAD)) {
        /* Write what is restored, untimed; then reopen on a cold RAM tier. */
        rc = run_workers(&r, ws, n_w, NULL, NULL);
        if (rc == 0 && (rc = sb_store_flush(r.st)) != SB_OK) {
            fprintf(stderr, "snapbank bench: job '%s': flush: %s\n", j->name, sb_strerror(rc));
            rc = -1;
        }
        if (close_store(&r) && rc == 0)
            rc = -1;
        if (rc == 0)
            rc = open_store(&r, dir);
        atomic_store(&r.written, 0);
    }
    bd_decode *dec = NULL;
    if (rc == 0 && *j->decode) {
        if (!(dec = bd_open(j)) || !(res->decode_alone = bd_alone(dec, r.st, j->decode_alone_s)))
            rc = -1;
    }
    if (rc == 0) {
        r.timed = true;
        r.t0 = bl_now_ns();
        sb_stats before;
        sb_store_stats(r.st, &before);
        bool decoding = dec && bd_start(dec, r.st, &res->decode_lat) == 0;
        if (dec && !decoding)
            rc = -1;
        if (rc == 0)
            rc = run_workers(&r, ws, n_w, progress, ctx);
        int frc = sb_store_flush(r.st);
        if (decoding && !(res->decode_during = bd_stop(dec)))
            rc = -1;
        if (rc == 0 && frc != SB_OK && frc != SB_ERR_NOSPC) {
            fprintf(stderr, "snapbank bench: job '%s': flush: %s\n", j->name, sb_strerror(frc));
            rc = -1;
        }
        res->secs = (double)(bl_now_ns() - r.t0) / 1e9;
        res->sim_hours = sim_hours(&r);
        uint64_t last = 0;
        for (size_t h = 0; h < res->n_hours; h++)
            last += res->hour_bytes[h];
        sb_store_stats(r.st, &res->stats);
        /* what the final flush wrote belongs to the last hour sampled */
        size_t hour = hour_of(&r, res->sim_hours);
        if (hour >= res->n_hours)
            hour = res->n_hours - 1;
        if (res->stats.disk_write_bytes > before.disk_write_bytes + last)
            res->hour_bytes[hour] += res->stats.disk_write_bytes - before.disk_write_bytes - last;
    }
    if (close_store(&r) && rc == 0)
        rc = -1;
    bd_close(dec);
    for (unsigned i = 0; ws && i < n_w; i++) {
        br_side *sides[2] = { &ws[i].write, &ws[i].read };
        br_side *into[2] = { &res->write, &res->read };
        for (int k = 0; k < 2; k++) {
            into[k]->bytes += sides[k]->bytes;
            into[k]->ops += sides[k]->ops;
            for (size_t x = 0; x < sides[k]->lat.n; x++)
                bl_add(&into[k]->lat, sides[k]->lat.ns[x]);
            free(sides[k]->lat.ns);
        }
        br_durability *d = &res->dur, *e = &ws[i].dur;
        d->puts += e->puts, d->durable += e->durable, d->pending += e->pending;
        d->never += e->never, d->queued += e->queued, d->written += e->written;
        d->deferred += e->deferred, d->dirty += e->dirty, d->denied += e->denied;
        free(ws[i].buf);
        free(ws[i].got);
        free(ws[i].tok);
        free(ws[i].snaps);
    }
    free(ws);
    free(r.pattern);
    char cmd[BJ_PATH_MAX + BJ_NAME_MAX + 128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "snapbank bench: could not remove %s\n", dir);
    return rc;
}

/* ---- fio ----------------------------------------------------------------------- */

/* Run one fio command (terse v3); fill bandwidth (bytes/s) and IOPS of its
 * read (field 6, 7) or write (47, 48) side. Returns 0 or -1. */
static int fio_once(const char *cmd, bool write, double *bw, double *iops)
{
    FILE *f = popen(cmd, "r");
    if (!f)
        return -1;
    char line[16384];
    double kib = -1, io = -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "3;", 2)) {
            char *fields[64];
            int n = 0;
            for (char *save = NULL, *t = strtok_r(line, ";", &save); t && n < 64;
                 t = strtok_r(NULL, ";", &save))
                fields[n++] = t;
            int b = write ? 47 : 6;
            if (n > b + 1) {
                kib = strtod(fields[b], NULL);
                io = strtod(fields[b + 1], NULL);
            }
        }
    int status = pclose(f);
    if (status != 0 || kib <= 0)
        return -1;
    *bw = kib * 1024;
    *iops = io;
    return 0;
}

int br_fio(const bj_job *j, br_result *r)
{
    bool write = j->rw == BJ_WRITE;
    if (!j->fio || !(write || j->rw == BJ_READ || j->rw == BJ_RANDREAD))
        return 1;
    if (system("command -v fio > /dev/null 2>&1") != 0)
        return 1;
    uint64_t bs = j->page_tokens * j->bytes_per_token + 4096; /* a page record */
    uint64_t size = j->size ? j->size : r->write.bytes;
    size = (size + bs - 1) / bs * bs;
    if (!size)
        return 1;
    char file[BJ_PATH_MAX + 64];
    snprintf(file, sizeof file, "%s/snapbank-bench-fio.%ld", j->directory, (long)getpid());
    const char *common = "--ioengine=io_uring --direct=1 --output-format=terse "
                         "--terse-version=3";
    char *wcmd = r->fio_cmd[0], *rcmd = r->fio_cmd[1];
    snprintf(wcmd, sizeof r->fio_cmd[0],
             "fio --name=%s --filename='%s' --rw=write --bs=%" PRIu64 " --iodepth=%" PRIu64
             " --size=%" PRIu64 " --end_fsync=1 %s",
             j->name, file, bs, j->iodepth, size, common);
    double bw, iops;
    int rc = fio_once(wcmd, true, &bw, &iops);
    if (rc == 0 && write) {
        r->fio_write = bw;
        r->fio_write_iops = iops;
    } else if (rc == 0) {
        snprintf(rcmd, sizeof r->fio_cmd[1],
                 "fio --name=%s --filename='%s' --rw=%s --bs=%" PRIu64 " --iodepth=%" PRIu64
                 " --size=%" PRIu64 " %s",
                 j->name, file, j->rw == BJ_RANDREAD ? "randread" : "read", bs, j->iodepth,
                 size, common);
        rc = fio_once(rcmd, false, &bw, &iops);
        if (rc == 0) {
            r->fio_read = bw;
            r->fio_read_iops = iops;
        }
    }
    unlink(file);
    if (rc != 0)
        fprintf(stderr, "snapbank bench: job '%s': fio failed: %s\n", j->name,
                write ? wcmd : rcmd);
    return rc;
}

/* ---- results ------------------------------------------------------------------- */

void br_free(br_result *r)
{
    free(r->write.lat.ns);
    free(r->read.lat.ns);
    free(r->decode_lat.ns);
    free(r->hour_bytes);
    free(r->hour_demand);
    free(r->series);
    memset(r, 0, sizeof *r);
}
