/* bench_budget.c -- a day of chat traffic against the hourly write budget,
 * on a fake clock: what the tier writes hour by hour when demand is above
 * and below the budget.
 *
 * Description: on a real directory (--dir, default /var/tmp), a store with
 * a write budget of --budget-mib MiB an hour (default 64; burst and
 * backlog at their defaults), pages of 16 tokens x 16 KiB (256 KiB) and
 * --ram-mib of RAM (256). The store's clock is simulated: each step is one
 * minute, --hours of them (24). Demand follows a day: the first third of
 * the hours at 2x the budget, the second at 0.5x, the last at 1.25x. A
 * minute's demand is chat turns among 32 conversations sharing a 64-token
 * system prompt, each turn adding 32 tokens (two new pages, 512 KiB of
 * state; a conversation past 512 tokens starts over); then a flush.
 *
 * Prints per hour: the demand and the device bytes written as fractions of
 * the budget, whether the hour meets the goal (demand above the budget:
 * written within [0.95, 1.0] of it), blocks that waited in the priority
 * pool, were written from it, were denied, and the pool at the hour's end.
 * Then: the hours above the budget and their range; the largest sliding
 * hour (minute resolution) against budget + burst, the hard bound; write
 * amplification; wall time. Hour 0 starts with a full bucket (the burst).
 * Figures are printed, not asserted; the run exits 1 when a call fails or
 * a sliding hour exceeds budget + burst (the bound the store guarantees).
 *
 * --quick: 8 MiB an hour, 4 KiB per token (64 KiB pages), 6 hours.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "snapbank.h"

#define BENCH_NAME "bench_budget"
#include "bench_util.h"

#define PT 16u         /* tokens per page */
#define SYS 64u        /* system prompt tokens */
#define TURN 32u       /* tokens a turn adds */
#define MAXTOK 512u    /* a conversation starts over past this */
#define CONVS 32u
#define MIN_NS (60ull * 1000000000ull)

static _Atomic uint64_t g_now = 1000000000ull; /* the store's clock (the writer reads it) */

static uint64_t fake_clock(void *ctx)
{
    (void)ctx;
    return g_now;
}

typedef struct opts {
    const char *dir;
    uint64_t budget, ram;
    uint32_t bpt, hours;
} opts;

/* Demand in the hour h of n, as a multiple of the budget. */
static double demand_level(uint32_t h, uint32_t n)
{
    return h < n / 3 ? 2.0 : h < 2 * n / 3 ? 0.5 : 1.25;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_budget [--dir D] [--budget-mib N] [--ram-mib N] [--hours N] "
               "[--quick]\n"
               "A simulated day of chat turns against the hourly write budget: demand at\n"
               "2x, 0.5x and 1.25x the budget, a third of the hours each; prints the bytes\n"
               "written per hour against the budget.\n");
}

static int parse(opts *o, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!strcmp(a, "--quick")) {
            o->budget = 8ull << 20;
            o->bpt = 4096;
            o->hours = 6;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        }
        if (!v)
            return -1;
        i++;
        if (!strcmp(a, "--dir")) {
            o->dir = v;
            continue;
        }
        unsigned long long x = strtoull(v, &end, 10);
        if (!*v || *end || x == 0 || x > (1ull << 20))
            return -1;
        if (!strcmp(a, "--budget-mib"))
            o->budget = x << 20;
        else if (!strcmp(a, "--ram-mib"))
            o->ram = x << 20;
        else if (!strcmp(a, "--hours") && x >= 3 && x <= 24 * 30)
            o->hours = (uint32_t)x;
        else
            return -1;
    }
    return 0;
}

typedef struct hour {
    uint64_t demand, written, deferred, pool_written, denied, pool_end;
} hour;

int main(int argc, char **argv)
{
    opts o = { .dir = "/var/tmp", .budget = 64ull << 20, .ram = 256ull << 20, .bpt = 16384,
               .hours = 24 };
    if (parse(&o, argc, argv)) {
        usage(stderr);
        return 2;
    }
    char dir[256];
    snprintf(dir, sizeof dir, "%s/snapbank-bench-budget-XXXXXX", o.dir);
    if (!mkdtemp(dir)) {
        perror("bench_budget: mkdtemp");
        return 1;
    }
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.dir = dir;
    cfg.min_prefix_tokens = 1; /* every turn is demand, the first ones too */
    cfg.ram_bytes = o.ram;
    cfg.segment_bytes = 16u << 20;
    cfg.disk_bytes = 64ull << 30;
    cfg.disk_free_floor_bytes = 0;
    cfg.write_budget_bytes_per_hour = o.budget;
    cfg.clock_ns = fake_clock;
    sb_store *st = NULL;
    check(sb_store_open(&cfg, &st), "open");
    uint32_t bpt = o.bpt;
    sb_layout l = { .model_id = "bench-budget", .model_id_bytes = 12, .page_tokens = PT,
                    .n_tensors = 1, .bytes_per_token = &bpt };
    sb_ns *ns = NULL;
    check(sb_ns_open(st, &l, NULL, 0, &ns), "namespace");

    size_t minutes = (size_t)o.hours * 60;
    uint8_t *buf = malloc((size_t)MAXTOK * bpt);
    uint32_t *tok = malloc(MAXTOK * sizeof *tok);
    uint64_t *w = calloc(minutes + 1, sizeof *w);
    hour *hr = calloc(o.hours, sizeof *hr);
    uint32_t conv_id[CONVS], conv_n[CONVS], next_id = 1;
    if (!buf || !tok || !w || !hr) {
        fprintf(stderr, "bench_budget: out of memory\n");
        return 1;
    }
    for (uint32_t c = 0; c < CONVS; c++) {
        conv_id[c] = next_id++;
        conv_n[c] = SYS;
    }
    const uint64_t turn_bytes = (uint64_t)TURN * bpt;
    uint64_t rng = 99;
    double acc = 0, t0 = now_s();
    sb_stats s, prev;
    check(sb_store_stats(st, &s), "stats");
    w[0] = s.disk_write_bytes;
    prev = s;
    double burst = (double)o.budget / 12; /* the default burst */
    for (size_t m = 0; m < minutes; m++) {
        uint32_t h = (uint32_t)(m / 60);
        acc += demand_level(h, o.hours) * (double)o.budget / 60;
        while (acc >= (double)turn_bytes) {
            acc -= (double)turn_bytes;
            rng = mix(rng);
            uint32_t c = (uint32_t)(rng % CONVS);
            if (conv_n[c] + TURN > MAXTOK) {
                conv_id[c] = next_id++;
                conv_n[c] = SYS;
            }
            uint32_t n = conv_n[c] += TURN;
            for (uint32_t i = 0; i < n; i++) {
                tok[i] = (uint32_t)mix(i < SYS ? i : ((uint64_t)conv_id[c] << 32) | i) & 0xFFFFF;
                memset(buf + (size_t)i * bpt, (int)(tok[i] & 0xFF), bpt);
            }
            const void *in[1] = { buf };
            int rc = sb_ns_put(ns, tok, n, in, NULL, NULL);
            if (rc != SB_OK && rc != SB_ERR_BUDGET)
                check(rc, "put");
            hr[h].demand += turn_bytes;
        }
        check(sb_store_flush(st), "flush");
        check(sb_store_stats(st, &s), "stats");
        w[m + 1] = s.disk_write_bytes;
        hr[h].written += s.disk_write_bytes - prev.disk_write_bytes;
        hr[h].deferred += s.disk_deferred - prev.disk_deferred;
        hr[h].pool_written += s.disk_pool_written - prev.disk_pool_written;
        hr[h].denied += s.disk_write_denials - prev.disk_write_denials;
        hr[h].pool_end = s.disk_pool_blocks;
        prev = s;
        g_now += MIN_NS;
    }
    double secs = now_s() - t0;

    printf("bench_budget: budget %.0f MiB/h (burst %.1f MiB), pages %u x %u B, RAM %" PRIu64
           " MiB, %u simulated hours\n\n",
           (double)o.budget / 1048576, burst / 1048576, PT, bpt, o.ram >> 20, o.hours);
    printf("hour  demand  written  goal   waited  from-pool  denied  pool-at-end\n");
    double lo = 1e9, hi = 0;
    unsigned over = 0, met = 0;
    for (uint32_t h = 0; h < o.hours; h++) {
        double d = (double)hr[h].demand / (double)o.budget;
        double x = (double)hr[h].written / (double)o.budget;
        const char *goal = "-";
        if (d > 1.0) {
            over++;
            bool ok = x >= 0.95 && x <= 1.0;
            met += ok;
            goal = ok ? "met" : "MISSED";
            if (x < lo)
                lo = x;
            if (x > hi)
                hi = x;
        }
        printf("%4u  %5.2fx  %6.3fx  %-6s %6" PRIu64 "  %9" PRIu64 "  %6" PRIu64 "  %11" PRIu64
               "\n",
               h, d, x, goal, hr[h].deferred, hr[h].pool_written, hr[h].denied, hr[h].pool_end);
    }
    uint64_t worst = 0;
    size_t at = 0;
    for (size_t m = 0; m + 60 <= minutes; m++)
        if (w[m + 60] - w[m] > worst) {
            worst = w[m + 60] - w[m];
            at = m;
        }
    printf("\nhours with demand above the budget: %u, goal [0.95, 1.0] met in %u; written "
           "%.3f-%.3f of the budget\n",
           over, met, over ? lo : 0, hi);
    printf("largest sliding hour: %.3f of the budget (minutes %zu-%zu); the bound, budget + "
           "burst: %.3f\n",
           (double)worst / (double)o.budget, at, at + 60, 1.0 + burst / (double)o.budget);
    printf("device bytes %.1f MiB, state %.1f MiB, write amplification %.3f; %" PRIu64
           " blocks waited in the pool, %" PRIu64 " written from it, %" PRIu64
           " denied (budget %" PRIu64 ", parent %" PRIu64 "); %.1f s wall\n",
           (double)s.disk_write_bytes / 1048576, (double)s.disk_logical_bytes / 1048576,
           s.disk_write_amplification, s.disk_deferred, s.disk_pool_written,
           s.disk_write_denials, s.disk_denials[SB_DENY_BUDGET], s.disk_denials[SB_DENY_PARENT],
           secs);
    int bad = (double)worst > (double)o.budget + burst;
    if (bad)
        fprintf(stderr, "bench_budget: a sliding hour exceeded budget + burst\n");
    sb_ns_close(ns);
    sb_store_close(st);
    free(buf);
    free(tok);
    free(w);
    free(hr);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "bench_budget: could not remove %s\n", dir);
    return bad;
}
