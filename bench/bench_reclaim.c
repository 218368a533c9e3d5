/* bench_reclaim.c -- a chat cache under a disk cap: what reclamation keeps,
 * what it costs in writes, side by side with the same workload on a disk
 * with room for everything.
 *
 * Description: on a real directory (--dir, default /var/tmp), a store with
 * a small RAM tier (--ram-mib, 32) so most pages live on disk only, and
 * pages of 16 tokens x 16 KiB (256 KiB). Conversations share a 64-token
 * system prompt; each step takes one: with probability 0.8 one of --hot
 * (16) conversations, else a new one, and plays a turn: match and restore
 * what the bank holds of it, then put it grown by 32 tokens (a turn that
 * reaches 1024 tokens starts over). Steps run until the bank has written
 * --turnover (10) times its cap. Two runs, the same seed:
 *   - capped: disk_bytes = --cap-mib (64) in 8 MiB segments: reclamation
 *     runs all along;
 *   - roomy: a cap of 16 GiB (nothing is ever reclaimed), as many turns.
 * Each prints: turns, tokens restored of tokens asked for the hot and the
 * new conversations (a new one can restore its system prompt only), device bytes, write amplification (device bytes /
 * state bytes) with the share reclamation's rewrites took, segments
 * reclaimed, pages kept / dropped, capacity denials (hot pages past the
 * 3/4-segment limit a reclamation rewrites, or pages refused for room when
 * the writer found every segment held by a restore for 100 ms), and wall
 * time; then the ratios capped /
 * roomy (device bytes too: the capped run writes again the pages it lost,
 * which write amplification, per state byte, does not show). Figures are printed, never asserted; every restore is checked
 * byte for byte (exit 1 on a mismatch or a failed call).
 *
 * --quick: 2 MiB segments, an 8 MiB cap, 8 MiB of RAM, turnover 3.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "snapbank.h"

#define BENCH_NAME "bench_reclaim"
#include "bench_util.h"

#define PT 16u            /* tokens per page */
#define BPT (16u << 10)   /* bytes per token */
#define SYS 64u           /* system prompt tokens */
#define TURN 32u          /* tokens a turn adds */
#define MAXTOK 1024u      /* a conversation starts over past this */

typedef struct opts {
    const char *dir;
    uint64_t cap, seg, ram;
    unsigned hot, turnover;
} opts;

typedef struct conv {
    uint32_t id;              /* token stream seed */
    uint32_t n;               /* tokens so far */
} conv;

typedef struct result {
    uint64_t steps, hot_asked, hot_got, cold_asked, cold_got;
    sb_stats s;
    double secs;
} result;

/* Token i of conversation c: the system prompt, then c's own stream. */
static uint32_t token(const conv *c, uint32_t i)
{
    return (uint32_t)mix(i < SYS ? i : ((uint64_t)c->id << 32) | i) & 0xFFFFF;
}

/* The state of token i: a word derived from the whole prefix's last token
 * and position, repeated (enough to tell a wrong restore). */
static uint64_t word(const uint32_t *tok, uint32_t i)
{
    return mix(((uint64_t)tok[i] << 24) ^ i ^ ((uint64_t)(i ? tok[i - 1] : 7) << 44));
}

static void fill(uint8_t *buf, const uint32_t *tok, uint32_t from, uint32_t to)
{
    for (uint32_t i = from; i < to; i++) {
        uint64_t w = word(tok, i);
        for (uint32_t k = 0; k < BPT; k += 8)
            memcpy(buf + (size_t)i * BPT + k, &w, 8);
    }
}

static int equal(const uint8_t *buf, const uint32_t *tok, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        uint64_t w = word(tok, i), got;
        memcpy(&got, buf + (size_t)i * BPT, 8);
        if (got != w || memcmp(buf + (size_t)i * BPT, buf + (size_t)i * BPT + 8, BPT - 8))
            return 0;
    }
    return 1;
}

/* One run: a store capped at cap, turns until stop bytes are written or,
 * when turns is not 0, that many turns. */
static result run(const opts *o, uint64_t cap, uint64_t stop, uint64_t turns,
                  const char *label)
{
    char dir[256];
    snprintf(dir, sizeof dir, "%s/snapbank-bench-reclaim-XXXXXX", o->dir);
    if (!mkdtemp(dir)) {
        perror("bench_reclaim: mkdtemp");
        exit(1);
    }
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.dir = dir;
    cfg.min_prefix_tokens = 1; /* every turn is written, its first ones too */
    cfg.ram_bytes = o->ram;
    cfg.segment_bytes = o->seg;
    cfg.disk_bytes = cap;
    cfg.disk_free_floor_bytes = 0;
    sb_store *st = NULL;
    check(sb_store_open(&cfg, &st), "open");
    uint32_t bpt = BPT;
    sb_layout l = { .model_id = "bench-reclaim", .model_id_bytes = 13, .page_tokens = PT,
                    .n_tensors = 1, .bytes_per_token = &bpt };
    sb_ns *ns = NULL;
    check(sb_ns_open(st, &l, NULL, 0, &ns), "namespace");

    uint8_t *buf = aligned_alloc(4096, (size_t)MAXTOK * BPT);
    uint8_t *got = aligned_alloc(4096, (size_t)MAXTOK * BPT);
    uint32_t *tok = malloc(MAXTOK * sizeof *tok);
    conv *hot = calloc(o->hot, sizeof *hot);
    if (!buf || !got || !tok || !hot) {
        fprintf(stderr, "bench_reclaim: out of memory\n");
        exit(1);
    }
    uint32_t next_id = 1;
    for (unsigned i = 0; i < o->hot; i++)
        hot[i] = (conv){ next_id++, SYS };
    uint64_t rng = 12345;
    result r = { 0 };
    double t0 = now_s();
    sb_stats s;
    do {
        rng = mix(rng);
        int is_hot = rng % 10 < 8;
        conv cold = { next_id++, SYS };
        conv *c = is_hot ? &hot[(rng >> 8) % o->hot] : &cold;
        for (uint32_t i = 0; i < c->n; i++)
            tok[i] = token(c, i);
        /* restore what the bank holds */
        sb_match *m = NULL;
        check(sb_ns_match(ns, tok, c->n, &m), "match");
        sb_match_info info;
        check(sb_match_get_info(m, &info), "match info");
        size_t L = info.n_tokens;
        void *tensors[1] = { got };
        int rc = L ? sb_match_restore(m, L, tensors, NULL) : SB_OK;
        if (rc == SB_ERR_CORRUPT || rc == SB_ERR_IO) { /* it shrank */
            check(sb_match_get_info(m, &info), "match info");
            L = info.n_tokens;
        } else {
            check(rc, "restore");
        }
        if (L && !equal(got, tok, (uint32_t)L)) {
            fprintf(stderr, "bench_reclaim: restore of %zu tokens is wrong\n", L);
            exit(1);
        }
        sb_match_release(m);
        *(is_hot ? &r.hot_asked : &r.cold_asked) += c->n;
        *(is_hot ? &r.hot_got : &r.cold_got) += L;
        /* the turn: the state grows by TURN tokens */
        uint32_t n = c->n + TURN;
        if (n > MAXTOK) { /* start over */
            c->id = next_id++;
            n = SYS + TURN;
        }
        c->n = n;
        for (uint32_t i = 0; i < n; i++)
            tok[i] = token(c, i);
        fill(buf, tok, 0, n);
        const void *in[1] = { buf };
        size_t stored = 0;
        rc = sb_ns_put(ns, tok, n, in, NULL, &stored);
        if (rc != SB_OK && rc != SB_ERR_BUDGET)
            check(rc, "put");
        r.steps++;
        check(sb_store_stats(st, &s), "stats");
    } while (turns ? r.steps < turns : s.disk_write_bytes < stop);
    /* SB_ERR_NOSPC: pages were denied for want of room (every segment a
     * restore was reading while the writer needed one); counted below. */
    int frc = sb_store_flush(st);
    if (frc != SB_ERR_NOSPC)
        check(frc, "flush");
    check(sb_store_stats(st, &r.s), "stats");
    r.secs = now_s() - t0;
    sb_ns_close(ns);
    sb_store_close(st);
    free(buf);
    free(got);
    free(tok);
    free(hot);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "bench_reclaim: could not remove %s\n", dir);

    const sb_stats *q = &r.s;
    printf("%-6s cap %5" PRIu64 " MiB: %6" PRIu64 " turns in %6.2f s; restored %5.1f%% of hot "
           "tokens, %5.1f%% of new; wrote %7.1f MiB, WA %.3f (reinsert %4.1f%%); %4" PRIu64
           " segments reclaimed, %6" PRIu64 " pages kept, %6" PRIu64 " dropped, %5" PRIu64
           " kept in RAM only, %4" PRIu64 " capacity denials\n",
           label, cap >> 20, r.steps, r.secs,
           r.hot_asked ? 100.0 * (double)r.hot_got / (double)r.hot_asked : 0.0,
           r.cold_asked ? 100.0 * (double)r.cold_got / (double)r.cold_asked : 0.0,
           (double)q->disk_write_bytes / 1048576.0, q->disk_write_amplification,
           q->disk_write_bytes ? 100.0 * (double)q->disk_reinsert_bytes /
                                     (double)q->disk_write_bytes
                               : 0.0,
           q->disk_reclaimed_segments, q->disk_reclaim_kept, q->disk_reclaim_dropped,
           q->disk_reclaim_ram_only, q->disk_denials[SB_DENY_CAPACITY]);
    return r;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_reclaim [--quick] [--dir DIR] [--cap-mib N] [--ram-mib N] "
               "[--hot N] [--turnover N]\n");
}

int main(int argc, char **argv)
{
    opts o = { .dir = "/var/tmp", .cap = 64ull << 20, .seg = 8ull << 20, .ram = 32ull << 20,
               .hot = 16, .turnover = 10 };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        unsigned long long x = v ? strtoull(v, &end, 10) : 0;
        int num = v && end && *end == '\0' && x > 0 && x < (1ull << 20);
        if (!strcmp(a, "--quick")) {
            o.cap = 8ull << 20;
            o.seg = 2ull << 20;
            o.ram = 8ull << 20;
            o.turnover = 3;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--dir") && v) {
            o.dir = v;
            i++;
        } else if (!strcmp(a, "--cap-mib") && num && x >= 16) {
            o.cap = x << 20;
            i++;
        } else if (!strcmp(a, "--ram-mib") && num) {
            o.ram = x << 20;
            i++;
        } else if (!strcmp(a, "--hot") && num) {
            o.hot = (unsigned)x;
            i++;
        } else if (!strcmp(a, "--turnover") && num) {
            o.turnover = (unsigned)x;
            i++;
        } else {
            fprintf(stderr, "bench_reclaim: bad argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    printf("bench_reclaim: pages of %u tokens x %u KiB, %u-token system prompt, %u-token "
           "turns, %u hot conversations (4 turns in 5), RAM %" PRIu64 " MiB, segments %" PRIu64
           " MiB, until %ux the cap is written\n",
           PT, BPT >> 10, SYS, TURN, o.hot, o.ram >> 20, o.seg >> 20, o.turnover);
    result a = run(&o, o.cap, o.turnover * o.cap, 0, "capped");
    /* The same turns with room for everything. */
    result b = run(&o, 16ull << 30, 0, a.steps, "roomy");
    double hot_a = (double)a.hot_got / (double)(a.hot_asked ? a.hot_asked : 1);
    double hot_b = (double)b.hot_got / (double)(b.hot_asked ? b.hot_asked : 1);
    printf("capped / roomy: hot tokens restored %.3f, device bytes %.3f, write amplification "
           "%.3f, time %.3f\n",
           hot_b > 0 ? hot_a / hot_b : 0.0,
           b.s.disk_write_bytes ? (double)a.s.disk_write_bytes / (double)b.s.disk_write_bytes
                                : 0.0,
           b.s.disk_write_amplification > 0
               ? a.s.disk_write_amplification / b.s.disk_write_amplification
               : 0.0,
           b.secs > 0 ? a.secs / b.secs : 0.0);
    return 0;
}
