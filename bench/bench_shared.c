/* bench_shared.c -- the shared tier (pages published to and fetched from a
 * Redis Cluster): fetch throughput against redis-benchmark GET of the same
 * value size, and hit rates over a multi-turn chat trace on 2 and 4 nodes
 * (issue 19).
 *
 * Description: needs a running cluster (it starts none):
 *
 *   url=$(scripts/local-cluster.sh start /tmp/bsh 17600)
 *   build/bin/bench_shared --shared $url
 *   scripts/local-cluster.sh stop /tmp/bsh
 *
 * 1. Fetch. Store A (RAM only, shared tier) puts one sequence of --pages
 *    (256) full pages of --page-kib (192: 16 tokens x 12 KiB, the `small`
 *    preset's F16 KV) and flushes its publisher; store B, whose index is
 *    empty but whose page pool holds as many spare pages (it put and
 *    removed another sequence first, as a running engine's store has
 *    recycled pages), fetches them all with sb_ns_fetch_shared. Printed:
 *    MiB/s, pages/s and the process' CPU time during the fetch; A's put
 *    and flush (its publisher's SETs of every page); and the
 *    time of the same fetch into a fresh store C, whose pool must first be
 *    mapped and populated (the first fetch of a process: that cost is the
 *    kernel's, zeroing memory, and varies with its free huge pages). Then,
 *    in the same run,
 *    `redis-benchmark --cluster -t set,get -d <value bytes> -n
 *    <--rb-requests, 2000> -c <--rb-clients, 3> -P 16 -q` against the
 *    first seed (SET first so the GETs find a value of that size; 3
 *    clients: one per master of a 3-master cluster, as the tier's fetch
 *    uses one connection per master; redis-benchmark's default 50 clients
 *    x 16 in flight of 192 KiB values measure a congested server), and
 *    the ratio of B's fetch bytes/s
 *    to redis-benchmark's GET requests/s x value bytes. --reps (3) times;
 *    medians printed.
 * 2. Chat trace. K = 2 and 4 nodes (stores in this process, RAM only, each
 *    its own budget, all on the cluster). --convs (20) conversations share
 *    a --sys (1,024) token system prompt; each has --turns (4) turns of a
 *    user message of 48 to 80 tokens and an answer of 16 to 48 (tokens
 *    and lengths generated from seeds, state bytes synthetic; a turn ends
 *    anywhere in a page, and partial pages are never published). Turns in order, one round of turns at
 *    a time over the conversations; conversation c on node c mod K
 *    ("affinity"), then again with turn t of conversation c on node
 *    (c + t) mod K ("no affinity": a load balancer without sticky
 *    sessions). Each turn: the node matches its prompt locally, fetches
 *    from the pool what it lacks past that, computes the rest, then puts
 *    prompt + answer and flushes its publisher (so the pool holds the turn
 *    before the next request: publishing is asynchronous, and on a real
 *    system a turn's decode leaves it time). Printed per K: prompt tokens
 *    from local RAM / from the pool / computed, bytes published, pool
 *    dedups, bytes fetched.
 *
 * --secret-file F gives every store the deployment's secret (keys keyed,
 * values sealed: snapbank_shared.h); redis-benchmark's values stay plain.
 *
 * Every run uses fresh scopes (time and pid), so pages of earlier runs are
 * never found; values carry a TTL of an hour. Figures are printed, never
 * asserted. Exit 0; 1 a call failed; 2 bad usage. --quick: 16 pages, 200
 * requests, 1 rep, 4 conversations of 2 turns on a 256-token prompt; the
 * ctest bench_shared_quick runs it on a cluster of its own
 * (bench_shared_quick.sh; skipped without redis-server).
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "snapbank.h"

#define BENCH_NAME "bench_shared"
#include "bench_util.h"

#define PT 16u     /* tokens per page */
#define USER 64u   /* mean tokens of a user message (48 to 80) */
#define ANSWER 32u /* mean tokens of an answer (16 to 48) */
#define MAX_NODES 4

typedef struct opts {
    const char *seeds;   /* "host:port[,...]" (the URL without redis://) */
    char host[256];      /* the first seed, for redis-benchmark */
    int port;
    unsigned pages, page_kib, reps, rb_requests, rb_clients;
    unsigned convs, sys, turns;
    const char *secret_file; /* --secret-file: keys keyed, values sealed */
} opts;

static char run_tag[64]; /* makes every scope of this run new to the pool */

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, unsigned n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* (2) tensors of page_kib * 1024 / PT / 2 bytes per token each (K and V). */
static uint32_t bpt_of(const opts *o)
{
    return o->page_kib * 1024u / PT / 2u;
}

static sb_store *open_node(const opts *o, uint64_t ram_bytes)
{
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.min_prefix_tokens = 1;
    cfg.ram_bytes = ram_bytes;
    cfg.shared_seeds = o->seeds;
    cfg.shared_timeout_ms = 20000; /* a loaded machine: a bound, not a target */
    cfg.shared_ttl_s = 3600;
    cfg.shared_publish_bytes_per_s = 4ull << 30; /* not the bottleneck */
    cfg.shared_secret_file = o->secret_file;
    sb_store *st = NULL;
    check(sb_store_open(&cfg, &st), "sb_store_open");
    return st;
}

static sb_ns *open_ns(sb_store *st, const opts *o, const uint32_t *bpt, const char *what)
{
    static const char model[] = "bench-shared-small";
    sb_layout lay = { .model_id = model, .model_id_bytes = sizeof model - 1,
                      .page_tokens = PT, .n_tensors = 2, .bytes_per_token = bpt };
    (void)o;
    char scope[128];
    snprintf(scope, sizeof scope, "%s-%s", run_tag, what);
    sb_ns *ns = NULL;
    check(sb_ns_open(st, &lay, scope, strlen(scope), &ns), "sb_ns_open");
    return ns;
}

/* Synthetic state: token i's slice of each tensor is one 64-bit word of
 * (i, tokens[i]) repeated; cheap, and identical for identical prefixes. */
static void fill_state(uint8_t *const t[2], uint32_t bpt, const uint32_t *tok, size_t from,
                       size_t to)
{
    for (size_t i = from; i < to; i++) {
        uint64_t w = mix(((uint64_t)i << 32) ^ tok[i]);
        for (int k = 0; k < 2; k++) {
            uint8_t *p = t[k] + i * bpt;
            for (uint32_t b = 0; b + 8 <= bpt; b += 8)
                memcpy(p + b, &w, 8);
        }
    }
}

static void gen_tokens(uint32_t *out, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++)
        out[i] = (uint32_t)(mix(seed * 1000003u + i) % 150000u);
}

/* redis-benchmark's GET requests/s for values of val_bytes, or -1. */
static double redis_benchmark_get(const opts *o, uint64_t val_bytes)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "redis-benchmark -h %s -p %d --cluster -t set,get -d %" PRIu64
             " -n %u -c %u -P 16 -q 2>&1",
             o->host, o->port, val_bytes, o->rb_requests, o->rb_clients);
    FILE *f = popen(cmd, "r");
    if (!f)
        return -1;
    /* -q prints progress lines ending in \r, then "GET: N requests per
     * second, p50=... msec" */
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    int st = pclose(f);
    double rps = -1;
    for (char *p = buf; (p = strstr(p, "GET: ")) != NULL; p += 5) {
        char *end;
        double v = strtod(p + 5, &end);
        if (end != p + 5 && strncmp(end, " requests per second", 20) == 0)
            rps = v;
    }
    if (st != 0 || rps < 0) {
        fprintf(stderr, BENCH_NAME ": redis-benchmark (status %d): %s\n", st, buf);
        return -1;
    }
    return rps;
}

/* Part 1: fetch throughput against redis-benchmark GET. */
static void bench_fetch(const opts *o)
{
    uint32_t bpt1 = bpt_of(o), bpt[2] = { bpt1, bpt1 };
    size_t n = (size_t)o->pages * PT;
    uint64_t state_bytes = (uint64_t)n * bpt1 * 2;
    uint32_t *tok = malloc(n * sizeof *tok);
    uint8_t *t[2] = { malloc(n * bpt1), malloc(n * bpt1) };
    if (!tok || !t[0] || !t[1]) {
        fprintf(stderr, BENCH_NAME ": out of memory\n");
        exit(1);
    }
    int have_rb = system("command -v redis-benchmark > /dev/null 2>&1") == 0;
    double mibs[16], pps[16], cpu[16], fresh[16], publish[16], rb_mibs[16], ratio[16], rb_rps[16];
    uint64_t val_bytes = 0;
    unsigned n_rb = 0;
    printf("fetch: %u pages of %u KiB (%u tokens x %u bytes), %.1f MiB, %u reps\n", o->pages,
           o->page_kib, PT, 2 * bpt1, (double)state_bytes / (1 << 20), o->reps);
    printf("%4s %10s %10s %9s %8s %10s %10s %12s %12s %8s\n", "rep", "fetch MiB/s", "pages/s",
           "fetch ms", "cpu ms", "fresh ms", "publish ms", "rb GET/s", "rb MiB/s", "ratio");
    for (unsigned r = 0; r < o->reps; r++) {
        uint64_t ram = 2 * state_bytes + (64u << 20);
        sb_store *a = open_node(o, 4 * ram), *b = open_node(o, ram), *c = open_node(o, ram);
        char what[32];
        snprintf(what, sizeof what, "fetch%u", r);
        sb_ns *na = open_ns(a, o, bpt, what), *nb = open_ns(b, o, bpt, what);
        sb_ns *nc = open_ns(c, o, bpt, what);
        /* B's pool: another sequence put (and published), then removed */
        size_t stored = 0, removed = 0;
        gen_tokens(tok, n, 1000 + r);
        fill_state(t, bpt1, tok, 0, n);
        check(sb_ns_put(nb, tok, n, (const void *const *)t, NULL, &stored), "sb_ns_put (B)");
        check(sb_store_flush(b), "sb_store_flush (B)");
        check(sb_ns_remove(nb, tok, 1, &removed), "sb_ns_remove (B)");
        gen_tokens(tok, n, 7 + r);
        fill_state(t, bpt1, tok, 0, n);
        double p0 = now_s();
        check(sb_ns_put(na, tok, n, (const void *const *)t, NULL, &stored), "sb_ns_put (A)");
        check(sb_store_flush(a), "sb_store_flush (A)");
        publish[r] = now_s() - p0;
        sb_stats sa;
        check(sb_store_stats(a, &sa), "sb_store_stats");
        if (sa.shared_published != o->pages) {
            fprintf(stderr, BENCH_NAME ": A published %" PRIu64 " of %u pages\n",
                    sa.shared_published, o->pages);
            exit(1);
        }
        size_t got = 0, added;
        double c0 = cpu_s(), t0 = now_s();
        do {
            check(sb_ns_fetch_shared(nb, tok, n, &added), "sb_ns_fetch_shared (B)");
            got += added;
        } while (added > 0 && got < n);
        double secs = now_s() - t0, cpus = cpu_s() - c0;
        sb_stats sb;
        check(sb_store_stats(b, &sb), "sb_store_stats");
        if (got != n || sb.shared_fetched_pages != o->pages) {
            fprintf(stderr, BENCH_NAME ": B fetched %zu of %zu tokens\n", got, n);
            exit(1);
        }
        double f0 = now_s();
        size_t got_c = 0;
        do {
            check(sb_ns_fetch_shared(nc, tok, n, &added), "sb_ns_fetch_shared (C)");
            got_c += added;
        } while (added > 0 && got_c < n);
        fresh[r] = now_s() - f0;
        if (got_c != n) {
            fprintf(stderr, BENCH_NAME ": C fetched %zu of %zu tokens\n", got_c, n);
            exit(1);
        }
        /* the bytes that came over the wire: the page records (values) */
        uint64_t bytes = sb.shared_fetched_bytes;
        val_bytes = sa.shared_published_bytes / o->pages;
        mibs[r] = (double)bytes / (1 << 20) / secs;
        pps[r] = o->pages / secs;
        cpu[r] = cpus;
        sb_ns_close(na);
        sb_ns_close(nb);
        sb_ns_close(nc);
        sb_store_close(a);
        sb_store_close(b);
        sb_store_close(c);
        double rps = have_rb ? redis_benchmark_get(o, val_bytes) : -1;
        if (rps > 0) {
            rb_rps[n_rb] = rps;
            rb_mibs[n_rb] = rps * (double)val_bytes / (1 << 20);
            ratio[n_rb] = mibs[r] / rb_mibs[n_rb];
            printf("%4u %10.1f %10.1f %9.1f %8.1f %10.1f %10.1f %12.1f %12.1f %8.2f\n", r + 1,
                   mibs[r], pps[r], secs * 1e3, cpus * 1e3, fresh[r] * 1e3, publish[r] * 1e3, rps,
                   rb_mibs[n_rb], ratio[n_rb]);
            n_rb++;
        } else {
            printf("%4u %10.1f %10.1f %9.1f %8.1f %10.1f %10.1f %12s %12s %8s\n", r + 1, mibs[r],
                   pps[r], secs * 1e3, cpus * 1e3, fresh[r] * 1e3, publish[r] * 1e3, "-", "-", "-");
        }
    }
    printf("median: fetch %.1f MiB/s, %.1f pages/s, cpu %.1f ms per fetch; into a fresh store "
           "%.1f ms; A's put and publish %.1f ms; value %" PRIu64 " bytes (page %u + record "
           "header)\n",
           median(mibs, o->reps), median(pps, o->reps), median(cpu, o->reps) * 1e3,
           median(fresh, o->reps) * 1e3, median(publish, o->reps) * 1e3, val_bytes,
           o->page_kib * 1024);
    if (n_rb)
        printf("median: redis-benchmark GET %.1f requests/s = %.1f MiB/s; ratio snapbank / "
               "redis-benchmark %.2f\n",
               median(rb_rps, n_rb), median(rb_mibs, n_rb), median(ratio, n_rb));
    else
        printf("redis-benchmark: %s; no ratio\n", have_rb ? "failed" : "not in PATH");
    printf("redis-benchmark -h %s -p %d --cluster -t set,get -d %" PRIu64 " -n %u -c %u -P 16 -q\n",
           o->host, o->port, val_bytes, o->rb_requests, o->rb_clients);
    free(tok);
    free(t[0]);
    free(t[1]);
}

typedef struct trace_result {
    uint64_t asked, local, pool, computed; /* prompt tokens */
    uint64_t published_bytes, published, dedup, fetched_bytes, fetched;
    double secs;
} trace_result;

/* Turn t of conversation c: a user message of 48 to 80 tokens and an
 * answer of 16 to 48 (so turns end anywhere in a page). */
static size_t user_len(unsigned c, unsigned t)
{
    return USER - 16 + mix(((uint64_t)c << 20) ^ t ^ 0x5553u) % 33;
}

static size_t answer_len(unsigned c, unsigned t)
{
    return ANSWER - 16 + mix(((uint64_t)c << 20) ^ t ^ 0x414eu) % 33;
}

/* The prompt of turn t: the system prompt, the turns before (messages and
 * answers), this turn's message. */
static size_t prompt_len(const opts *o, unsigned c, unsigned t)
{
    size_t n = o->sys;
    for (unsigned i = 0; i < t; i++)
        n += user_len(c, i) + answer_len(c, i);
    return n + user_len(c, t);
}

/* Part 2: the chat trace on k nodes. affinity: conversation c stays on node
 * c mod k; else turn t goes to node (c + t) mod k. */
static trace_result run_trace(const opts *o, unsigned k, int affinity)
{
    uint32_t bpt1 = bpt_of(o), bpt[2] = { bpt1, bpt1 };
    size_t per_conv = o->sys + (size_t)o->turns * (USER + ANSWER + 32);
    uint64_t conv_bytes = (uint64_t)per_conv * bpt1 * 2;
    uint64_t ram = (uint64_t)o->convs * conv_bytes + (64u << 20);
    sb_store *st[MAX_NODES];
    sb_ns *ns[MAX_NODES];
    char what[32];
    snprintf(what, sizeof what, "chat%u%c", k, affinity ? 'a' : 'n');
    for (unsigned i = 0; i < k; i++) {
        st[i] = open_node(o, ram);
        ns[i] = open_ns(st[i], o, bpt, what);
    }
    uint32_t *tok = malloc((size_t)o->convs * per_conv * sizeof *tok);
    uint8_t *t[2] = { malloc(per_conv * bpt1), malloc(per_conv * bpt1) };
    if (!tok || !t[0] || !t[1]) {
        fprintf(stderr, BENCH_NAME ": out of memory\n");
        exit(1);
    }
    for (unsigned c = 0; c < o->convs; c++) {
        uint32_t *ct = tok + (size_t)c * per_conv;
        gen_tokens(ct, o->sys, 1); /* the system prompt every conversation shares */
        gen_tokens(ct + o->sys, per_conv - o->sys, 1000 + c);
    }
    trace_result res = { 0 };
    double t0 = now_s();
    for (unsigned turn = 0; turn < o->turns; turn++) {
        for (unsigned c = 0; c < o->convs; c++) {
            unsigned node = affinity ? c % k : (c + turn) % k;
            const uint32_t *ct = tok + (size_t)c * per_conv;
            size_t prompt = prompt_len(o, c, turn), answer = answer_len(c, turn);
            sb_match *m = NULL;
            sb_match_info info;
            check(sb_ns_match(ns[node], ct, prompt, &m), "sb_ns_match");
            check(sb_match_get_info(m, &info), "sb_match_get_info");
            sb_match_release(m);
            size_t local = info.n_tokens, added = 0;
            if (local < prompt)
                check(sb_ns_fetch_shared(ns[node], ct, prompt, &added), "sb_ns_fetch_shared");
            res.asked += prompt;
            res.local += local;
            res.pool += added;
            res.computed += prompt - local - added;
            /* the turn's state: prompt + answer; what the node holds is
             * kept by the put, so only the rest (from its last full
             * page) is generated */
            size_t n = prompt + answer;
            fill_state(t, bpt1, ct, (local + added) / PT * PT, n);
            size_t stored = 0;
            check(sb_ns_put(ns[node], ct, n, (const void *const *)t, NULL, &stored), "sb_ns_put");
            check(sb_store_flush(st[node]), "sb_store_flush");
        }
    }
    res.secs = now_s() - t0;
    for (unsigned i = 0; i < k; i++) {
        sb_stats s;
        check(sb_store_stats(st[i], &s), "sb_store_stats");
        res.published_bytes += s.shared_published_bytes;
        res.published += s.shared_published;
        res.dedup += s.shared_dedup;
        res.fetched_bytes += s.shared_fetched_bytes;
        res.fetched += s.shared_fetched_pages;
        sb_ns_close(ns[i]);
        sb_store_close(st[i]);
    }
    free(tok);
    free(t[0]);
    free(t[1]);
    return res;
}

static void bench_trace(const opts *o)
{
    printf("\nchat trace: %u conversations, a %u-token system prompt, %u turns of 48-80 + "
           "16-48 tokens, pages of %u KiB\n",
           o->convs, o->sys, o->turns, o->page_kib);
    printf("%5s %-11s %8s %14s %14s %14s %11s %9s %6s %11s %7s\n", "nodes", "routing",
           "prompt", "local RAM", "pool", "computed", "published", "pages", "dedup", "fetched",
           "secs");
    static const unsigned ks[] = { 2, 4 };
    for (int aff = 1; aff >= 0; aff--) {
        for (unsigned i = 0; i < 2; i++) {
            trace_result r = run_trace(o, ks[i], aff);
            double a = (double)r.asked;
            printf("%5u %-11s %8" PRIu64 " %7" PRIu64 " %5.1f%% %7" PRIu64 " %5.1f%% %7" PRIu64
                   " %5.1f%% %7.1f MiB %9" PRIu64 " %6" PRIu64 " %7.1f MiB %7.2f\n",
                   ks[i], aff ? "affinity" : "no affinity", r.asked, r.local,
                   100.0 * r.local / a, r.pool, 100.0 * r.pool / a, r.computed,
                   100.0 * r.computed / a, (double)r.published_bytes / (1 << 20), r.published,
                   r.dedup, (double)r.fetched_bytes / (1 << 20), r.secs);
        }
    }
}

static int usage(void)
{
    fprintf(stderr,
            "usage: bench_shared --shared redis://HOST:PORT[,HOST:PORT...] [--quick]\n"
            "       [--pages N] [--page-kib K] [--reps R] [--rb-requests N] [--rb-clients N]\n"
            "       [--convs N] [--sys TOKENS] [--turns N] [--secret-file F]\n");
    return 2;
}

static int parse_uint(const char *s, unsigned lo, unsigned hi, unsigned *out)
{
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (!*s || *end || v < lo || v > hi)
        return -1;
    *out = (unsigned)v;
    return 0;
}

int main(int argc, char **argv)
{
    opts o = { .pages = 256, .page_kib = 192, .reps = 3, .rb_requests = 2000, .rb_clients = 3,
               .convs = 20, .sys = 1024, .turns = 4 };
    const char *url = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(a, "--quick")) {
            o.pages = 16, o.rb_requests = 200, o.reps = 1;
            o.convs = 4, o.sys = 256, o.turns = 2;
            continue;
        }
        if (!v)
            return usage();
        if (!strcmp(a, "--shared"))
            url = v;
        else if (!strcmp(a, "--secret-file"))
            o.secret_file = v;
        else if (!strcmp(a, "--pages"))
            bad = parse_uint(v, 1, 1u << 16, &o.pages);
        else if (!strcmp(a, "--page-kib"))
            bad = parse_uint(v, 1, 4096, &o.page_kib);
        else if (!strcmp(a, "--reps"))
            bad = parse_uint(v, 1, 16, &o.reps);
        else if (!strcmp(a, "--rb-requests"))
            bad = parse_uint(v, 1, 1u << 24, &o.rb_requests);
        else if (!strcmp(a, "--rb-clients"))
            bad = parse_uint(v, 1, 1000, &o.rb_clients);
        else if (!strcmp(a, "--convs"))
            bad = parse_uint(v, 1, 10000, &o.convs);
        else if (!strcmp(a, "--sys"))
            bad = parse_uint(v, 0, 1u << 20, &o.sys);
        else if (!strcmp(a, "--turns"))
            bad = parse_uint(v, 1, 1000, &o.turns);
        else
            bad = 1;
        if (bad)
            return usage();
        i++;
    }
    if (!url)
        return usage();
    o.seeds = strncmp(url, "redis://", 8) == 0 ? url + 8 : url;
    /* the first seed, for redis-benchmark */
    size_t hl = strcspn(o.seeds, ",");
    const char *colon = memrchr(o.seeds, ':', hl);
    if (!colon || colon == o.seeds || (size_t)(colon - o.seeds) >= sizeof o.host)
        return usage();
    memcpy(o.host, o.seeds, (size_t)(colon - o.seeds));
    o.host[colon - o.seeds] = 0;
    o.port = atoi(colon + 1);
    if (o.port <= 0 || o.port > 65535)
        return usage();
    signal(SIGPIPE, SIG_IGN);
    snprintf(run_tag, sizeof run_tag, "bsh-%ld-%d", (long)time(NULL), (int)getpid());
    printf("bench_shared: cluster %s, load average %.2f\n\n", o.seeds, load_average());
    bench_fetch(&o);
    bench_trace(&o);
    printf("\nload average %.2f\n", load_average());
    return 0;
}
