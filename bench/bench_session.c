/* bench_session.c -- time to first token of a session turn, cold versus
 * restored from the bank (warm_prefix from RAM, ssd after a restart), and
 * decode speed while the disk tier spills.
 *
 * Description: makes the `small` preset model (F16; --preset and --dtype
 * choose another, e.g. small-hybrid) in the scratch directory and, on
 * --threads threads (2), for prompts of P tokens (P = 2048 and 8000, those
 * that fit the context; --prompt N: N alone; --quick: the tiny model and
 * 256):
 *   - cold: a fresh bank directory, one turn of the prompt (one token
 *     generated): every token computed;
 *   - warm_prefix: the same store, a new session: (a) the same prompt (the
 *     whole prompt restored, its logits from the point state) and (b) the
 *     prompt and 32 new tokens (like the next turn of a chat);
 *   - ssd: the store closed and reopened (a restart) with the page cache
 *     dropped (as root: /proc/sys/vm/drop_caches; the run says when it
 *     could not), then (a) and (b) again, the pages read from disk; each
 *     --reps times (3), a restart each. Every restore prints its time, the
 *     bytes and read requests the store counted, its CPU (the restoring
 *     thread's) and page faults; then the median, and fio reading the same
 *     bytes from one file (io_uring, O_DIRECT, QD 32, blocks of up to
 *     4 MiB, 20 loops; --no-fio: not) with the ratios of time and CPU.
 *     The bank prefaults one context's pages at each open, as an engine
 *     does (sb_rt_kv_prefault). --llama-server PATH then runs
 *     bench/llama_slots.py: llama-server's slot save and restore of the
 *     same model and prompts after drop_caches, in the same run.
 *   - a hybrid model (boundaries, session.h; --grid N its grid): the
 *     bytes of boundaries the cold turn stored (per 1000 tokens), then 8
 *     prompts of P tokens that leave the stored one at random positions:
 *     the boundary each resumed from, the tokens it recomputed past it
 *     (mean and maximum) and its TTFT.
 * Each TTFT is printed with its ratio to cold. Then decode: a 512-token
 * prompt and 256 generated tokens, quiet versus while the disk tier writes
 * a 3 GiB snapshot put just before (another namespace; long enough to
 * spill through the whole decode at this disk's 1-2 GB/s), once with the
 * session's foreground marks off and once on (the writer holding back,
 * sb_store_foreground), alternating --reps times (3); it prints tokens/s,
 * the loss, the bytes the tier wrote during each spilling turn and the
 * time it held back.
 *
 * --shared-sim instead: 100 conversations (--quick: 10) sharing a
 * 4000-token system prompt (300), each a user message of 64 tokens and an
 * answer of 16, through one bank: the boundaries held and written per
 * conversation, against the seed system's per-entry copies of up to 8 on
 * the same trace (shared_sim).
 *
 * --shared URL instead (redis://HOST:PORT[,...], a cluster the caller
 * started, e.g. with scripts/local-cluster.sh): node B's first turn on node
 * A's prompt of P tokens. Node A (its own bank directory) computes the
 * prompt cold and publishes its pages (flushed); then, --reps times, a
 * node B with a fresh, empty bank directory runs the same prompt: its
 * pages come from the shared tier (cache_mode remote; the fetch's bytes,
 * time and throughput from the store's counters). Beside it: a cold node
 * (no bank to restore from), and node B again after a restart without the
 * shared tier, reading what it kept on its own disk (ssd). TTFT each, with
 * its ratio to cold.
 *
 * Exit status: 0 success; 1 a call failed; 2 bad usage. Figures are printed,
 * never asserted. Issue 6's goals: warm_prefix >= 1000x faster than cold at
 * 8k, ssd >= 200x; decode speed lost while spilling <= 3 %. Issue 20's: an
 * ssd restore at 2,048 and 8,000 tokens >= 1.5x faster than llama.cpp's
 * slot restore and within 1.2x of fio's time for the same bytes.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "model/boundary.h"
#include "model/forward.h"
#include "model/kv.h"
#include "make_model/make_model.h"
#include "model/model.h"
#include "model/sample.h"
#include "session/session.h"

#define BENCH_NAME "bench_session"
#include "bench_fio.h"
#include "bench_util.h"

#ifndef SB_BENCH_LLAMA_SCRIPT
#define SB_BENCH_LLAMA_SCRIPT "bench/llama_slots.py"
#endif

typedef struct bench {
    sb_rt_model *m;
    unsigned threads;
    char scratch[4096];        /* the run's directory parent */
    char dir[4096];
    sb_store *st;
    sb_ns *ns;
    sb_rt_ctx *ctx;
    uint32_t bpt[2 * SB_RT_MAX_LAYERS];
    int marks; /* sessions mark foreground phases (the default) */
    double t_prefault;         /* the last bank_open's sb_rt_kv_prefault, s */
    size_t prefault_pages;     /* ...and the spare pages it left */
    int fio;                   /* run fio beside the ssd restores */
    size_t grid; /* hybrid models: the boundary grid (0: the default) */
    const char *shared;        /* the shared tier's seeds (bank_open), or NULL */
} bench;

static void bank_open(bench *b, int fresh)
{
    if (fresh) {
        char cmd[4200];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", b->dir);
        if (system(cmd) != 0)
            exit(1);
    }
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.dir = b->dir;
    cfg.ram_bytes = 6ull << 30;
    cfg.max_seq_tokens = 1u << 20; /* the spill snapshot is longer than the context */
    cfg.min_prefix_tokens = 1;     /* --quick's short prompts reach the disk too */
    cfg.shared_seeds = b->shared;
    cfg.shared_timeout_ms = 5000;  /* a fetch of 8000 tokens' pages is large */
    sb_layout layout;
    check(sb_rt_kv_layout(b->m, 16, b->bpt, &layout), "layout");
    check(sb_store_open(&cfg, &b->st), "sb_store_open");
    check(sb_ns_open(b->st, &layout, NULL, 0, &b->ns), "sb_ns_open");
    /* As an engine does at start: one context's pages ready in the pool. */
    double t0 = now_s();
    check(sb_rt_kv_prefault(b->m, b->ns, &b->prefault_pages), "sb_rt_kv_prefault");
    b->t_prefault = now_s() - t0;
    check(sb_rt_ctx_new(b->m, b->threads, 512, &b->ctx), "sb_rt_ctx_new");
}

static void bank_close(bench *b)
{
    sb_rt_ctx_free(b->ctx);
    sb_ns_close(b->ns);
    check(sb_store_close(b->st), "sb_store_close");
}

/* One turn of a fresh session: tokens[0, n), n_gen greedy tokens. */
static sb_rt_turn turn(bench *b, const uint32_t *tokens, size_t n, size_t n_gen)
{
    sb_rt_session *s;
    check(sb_rt_session_new(b->m, b->ctx, b->ns, &s), "session");
    sb_rt_session_set_foreground(s, b->marks);
    if (b->m->hp.n_rec && b->grid)
        check(sb_rt_session_set_boundaries(s, b->grid, 0), "boundaries");
    sb_rt_sampler smp;
    sb_rt_sampling so = { 0, 0, 1, 1 };
    check(sb_rt_sampler_init(&smp, &so, b->m->hp.n_vocab), "sampler");
    sb_rt_gen g = { n_gen, &smp, UINT32_MAX, NULL, NULL, NULL };
    sb_rt_turn r;
    check(sb_rt_session_turn(s, tokens, n, &g, &r), "turn");
    sb_rt_sampler_fini(&smp);
    sb_rt_session_free(s);
    return r;
}

static int drop_caches(void)
{
    sync();
    FILE *f = fopen("/proc/sys/vm/drop_caches", "w");
    if (!f)
        return 0;
    int ok = fputs("3\n", f) >= 0;
    return fclose(f) == 0 && ok;
}

static void row(const char *what, const sb_rt_turn *r, double cold_ttft)
{
    printf("  %-34s %-11s cached %5zu (disk %5zu) computed %5zu  restore %8.2f ms  "
           "TTFT %9.2f ms  x%.0f\n", what, sb_rt_cache_mode_name(r->cache_mode),
           r->cached_tokens, r->cached_disk_tokens, r->prefill_tokens, r->restore_s * 1e3,
           r->ttft_s * 1e3, cold_ttft / r->ttft_s);
}

/* fio's block size for reading about `bytes` in blocks of at most 4 MiB:
 * ceil(bytes / 4 MiB) blocks of equal size, rounded up to 4 KiB (the read
 * is then at most 4 KiB a block longer than bytes). */
static uint64_t fio_bs(uint64_t bytes)
{
    uint64_t n = (bytes + (4u << 20) - 1) / (4u << 20);
    uint64_t bs = (bytes + n - 1) / n;
    return (bs + 4095) / 4096 * 4096;
}

/* fio's time to read `bytes` from one file with direct I/O (the device's
 * limit for that restore): the file written once, the page cache dropped,
 * then a read of that size (fio_bs: blocks of up to 4 MiB, whole ones),
 * io_uring, QD 32, looped 20 times (each loop reads the file from its
 * start; fio reports milliseconds, so one 10 ms read alone would be
 * measured to 10 %). Returns seconds per read, or -1; *cpu_s its CPU per
 * read, *read_bytes what one loop read. */
static double fio_same_bytes(const bench *b, uint64_t bytes, double *cpu_s, uint64_t *read_bytes)
{
    char file[4200], job[8400];
    snprintf(file, sizeof file, "%s/bench_session.%ld.fio", b->scratch, (long)getpid());
    uint64_t bs = fio_bs(bytes);
    uint64_t size = (bytes + bs - 1) / bs * bs;
    bench_fio w, r;
    snprintf(job, sizeof job, "--name=bench_session_write --filename='%s' --ioengine=io_uring "
             "--direct=1 --rw=write --bs=%" PRIu64 " --iodepth=32 --size=%" PRIu64
             " --end_fsync=1", file, bs, size);
    bool ok = bench_fio_run(job, true, &w);
    drop_caches();
    snprintf(job, sizeof job, "--name=bench_session_read --filename='%s' --ioengine=io_uring "
             "--direct=1 --rw=read --bs=%" PRIu64 " --iodepth=32 --size=%" PRIu64
             " --loops=20", file, bs, size);
    ok = ok && bench_fio_run(job, false, &r);
    unlink(file);
    if (!ok)
        return -1;
    *cpu_s = r.cpu_s / 20;
    *read_bytes = size;
    return r.runtime_s / 20;
}

/* An ssd restore's figures: the restore, what it read. */
static void ssd_figures(const bench *b, const sb_rt_turn *r, const sb_stats *s0,
                        const sb_stats *s1)
{
    uint64_t bytes = s1->disk_read_bytes - s0->disk_read_bytes;
    uint64_t ios = s1->disk_read_ios - s0->disk_read_ios;
    printf("  %-34s restore %.2f ms: %.2f MiB read (%zu KV bytes) in %" PRIu64 " reads, "
           "CPU %.2f ms (%.3f s per GiB), %" PRIu64 " page faults; pool prefaulted at open in "
           "%.1f ms (%zu pages)\n",
           "", r->restore_s * 1e3, (double)bytes / (1 << 20), r->restore_bytes, ios,
           r->restore_cpu_s * 1e3,
           bytes ? r->restore_cpu_s / ((double)bytes / (1 << 30)) : 0.0, r->restore_faults,
           b->t_prefault * 1e3, b->prefault_pages);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* fio's read of the bytes the restores read, beside their median time. */
static void fio_beside(const bench *b, uint64_t bytes, double restore_s, double restore_cpu_s)
{
    if (!b->fio || !bytes)
        return;
    double cpu = 0;
    uint64_t fbytes = 0;
    double t = fio_same_bytes(b, bytes, &cpu, &fbytes);
    if (t > 0)
        printf("  %-34s fio read of the same bytes (%.2f MiB): %.2f ms, CPU %.2f ms (%.3f s "
               "per GiB); snapbank/fio: time %.2f (goal <= 1.2), CPU %.2f\n", "",
               (double)fbytes / (1 << 20), t * 1e3, cpu * 1e3,
               cpu / ((double)fbytes / (1 << 30)), restore_s / t,
               cpu > 0 ? restore_cpu_s / cpu : 0.0);
}

/* A hybrid model's boundaries: what one cold turn of P tokens stored, and
 * turns of prompts that leave it at random positions (the same length,
 * another tail): where they resumed, what they recomputed, their TTFT. */
static void divergent(bench *b, const uint32_t *tok, size_t P, double cold_ttft,
                      const sb_stats *after_cold)
{
    size_t pb = sb_rt_boundary_bytes(b->m);
    printf("  boundaries of the cold turn: %" PRIu64 " of %.2f MiB = %.2f MiB, %.2f MiB per "
           "1000 tokens\n", after_cold->points, (double)pb / (1 << 20),
           (double)after_cold->point_bytes / (1 << 20),
           (double)after_cold->point_bytes / (1 << 20) * 1000.0 / (double)P);
    enum { K = 8 };
    uint32_t *q = malloc(P * sizeof *q);
    if (!q)
        check(SB_ERR_NOMEM, "divergent");
    uint64_t x = 7;
    size_t sum = 0, max = 0;
    double t_sum = 0;
    for (int k = 0; k < K; k++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        size_t d = 1 + (size_t)((x >> 33) % (P - 1));
        memcpy(q, tok, d * sizeof *q);
        for (size_t i = d; i < P; i++)
            q[i] = (tok[i] + 1 + (uint32_t)k) % b->m->hp.n_vocab;
        sb_rt_turn r = turn(b, q, P, 1);
        char what[96];
        snprintf(what, sizeof what, "divergent at %zu (boundary %zu)", d, r.boundary_tokens);
        row(what, &r, cold_ttft);
        sum += r.recomputed_tokens;
        max = r.recomputed_tokens > max ? r.recomputed_tokens : max;
        t_sum += r.ttft_s;
    }
    printf("  divergent turns: recomputed past the boundary mean %.0f, max %zu tokens (grid "
           "%zu); mean TTFT %.2f ms, x%.1f vs cold\n", (double)sum / K, max,
           b->grid ? b->grid : SB_RT_BOUNDARY_GRID, t_sum / K * 1e3, cold_ttft / (t_sum / K));
    free(q);
}

/* The seed system's scheme against boundaries shared in the tree, on one
 * trace: n_conv conversations of one turn each, a system prompt of sys
 * tokens then a user message of 64 and an answer of 16. The tree's figures
 * are the bank's (a real run: the point states it holds, the new ones each
 * conversation stored, which the disk tier writes once); the seed's are
 * computed on the same trace: each conversation's entry keeps its own copy
 * of up to 8 of the boundaries it passes (the grid positions, the end of
 * its prompt and of its turn), and writes them. */
static void shared_sim(bench *b, const uint32_t *tok, size_t sys, size_t n_conv)
{
    size_t pb = sb_rt_boundary_bytes(b->m), grid = b->grid ? b->grid : SB_RT_BOUNDARY_GRID;
    size_t n = sys + 64;
    uint32_t *q = malloc(n * sizeof *q);
    if (!q)
        check(SB_ERR_NOMEM, "sim");
    bank_open(b, 1);
    sb_stats s0, s1;
    check(sb_store_stats(b->st, &s0), "stats");
    uint64_t first_new = 0, rest_new = 0, seed_count = 0;
    size_t recomputed = 0;
    for (size_t c = 0; c < n_conv; c++) {
        memcpy(q, tok, sys * sizeof *q);
        for (size_t i = sys; i < n; i++)
            q[i] = (tok[i] + 1 + (uint32_t)c) % b->m->hp.n_vocab;
        sb_stats before, after;
        check(sb_store_stats(b->st, &before), "stats");
        sb_rt_turn r = turn(b, q, n, 16);
        check(sb_store_stats(b->st, &after), "stats");
        uint64_t added = after.points - before.points;
        *(c ? &rest_new : &first_new) += added;
        recomputed += r.recomputed_tokens;
        size_t passes = (n - 1) / grid + 2; /* grid positions, end of prompt and turn */
        seed_count += passes < 8 ? passes : 8;
    }
    check(sb_store_stats(b->st, &s1), "stats");
    double mib = (double)pb / (1 << 20);
    printf("%zu conversations sharing a %zu-token system prompt (boundary %.2f MiB, grid %zu):\n",
           n_conv, sys, mib, grid);
    printf("  tree (this bank): held %" PRIu64 " boundaries = %.1f MiB (%.2f MiB per "
           "conversation); written: the first conversation %" PRIu64 " (%.1f MiB), each other "
           "%.2f (%.2f MiB); recomputed past the boundary %.0f tokens per conversation\n",
           s1.points - s0.points, (double)(s1.point_bytes - s0.point_bytes) / (1 << 20),
           (double)(s1.point_bytes - s0.point_bytes) / (1 << 20) / (double)n_conv, first_new,
           (double)first_new * mib, n_conv > 1 ? (double)rest_new / (double)(n_conv - 1) : 0,
           n_conv > 1 ? (double)rest_new / (double)(n_conv - 1) * mib : 0,
           (double)recomputed / (double)n_conv);
    printf("  seed (per-entry copies of up to 8): held %" PRIu64 " boundaries = %.1f MiB "
           "(%.2f MiB per conversation); written the same\n", seed_count,
           (double)seed_count * mib, (double)seed_count * mib / (double)n_conv);
    bank_close(b);
    free(q);
}

static void ttft(bench *b, const uint32_t *tok, size_t P, int reps)
{
    /* The prompt and 32 tokens the bank has not seen, for the ssd case (the
     * warm case's 32 were committed with its turn). */
    uint32_t *alt = malloc((P + 32) * sizeof *alt);
    if (!alt)
        check(SB_ERR_NOMEM, "alt");
    memcpy(alt, tok, P * sizeof *alt);
    memcpy(alt + P, tok + P + 32, 32 * sizeof *alt);
    printf("prompt of %zu tokens:\n", P);
    bank_open(b, 1);
    sb_rt_turn cold = turn(b, tok, P, 1);
    row("cold", &cold, cold.ttft_s);
    sb_stats after_cold;
    check(sb_store_stats(b->st, &after_cold), "stats");
    sb_rt_turn r = turn(b, tok, P, 1);
    row("warm_prefix, same prompt", &r, cold.ttft_s);
    r = turn(b, tok, P + 32, 1);
    row("warm_prefix, prompt + 32 new", &r, cold.ttft_s);
    if (b->m->hp.n_rec)
        divergent(b, tok, P, cold.ttft_s, &after_cold);
    bank_close(b);
    for (int k = 0; k < 2; k++) {
        /* Each restore after its own restart ((b) must not find (a)'s
         * pages in RAM), reps of them; fio after the last. */
        double t[16], cpu[16];
        uint64_t bytes = 0;
        for (int rep = 0; rep < reps; rep++) {
            int dropped = drop_caches();
            double t0 = now_s();
            bank_open(b, 0);
            double t_open = now_s() - t0 - b->t_prefault;
            /* (b)'s 32 new tokens differ between restarts: the bank has
             * seen none of them (each turn commits its own). */
            for (size_t i = 0; i < 32; i++)
                alt[P + i] = (tok[P + 32 + i] + (uint32_t)rep * 7919u) % b->m->hp.n_vocab;
            sb_stats s0, s1;
            check(sb_store_stats(b->st, &s0), "stats");
            r = turn(b, k ? alt : tok, k ? P + 32 : P, 1);
            check(sb_store_stats(b->st, &s1), "stats");
            char what[96];
            snprintf(what, sizeof what, "ssd, %s%s", k ? "prompt + 32 new" : "same prompt",
                     dropped ? "" : " (cache kept)");
            row(what, &r, cold.ttft_s);
            ssd_figures(b, &r, &s0, &s1);
            if (k == 0 && rep == 0)
                printf("  %-34s %.2f ms (the restart: store open and recovery)\n", "reopen",
                       t_open * 1e3);
            bank_close(b);
            t[rep] = r.restore_s;
            cpu[rep] = r.restore_cpu_s;
            bytes = s1.disk_read_bytes - s0.disk_read_bytes;
        }
        qsort(t, (size_t)reps, sizeof *t, cmp_double);
        qsort(cpu, (size_t)reps, sizeof *cpu, cmp_double);
        printf("  %-34s median of %d: restore %.2f ms (min %.2f, max %.2f), CPU %.2f ms; load "
               "average %.2f\n", "", reps, t[reps / 2] * 1e3, t[0] * 1e3, t[reps - 1] * 1e3,
               cpu[reps / 2] * 1e3, load_average());
        fio_beside(b, bytes, t[reps / 2], cpu[reps / 2]);
    }
    free(alt);
}

/* --shared: node B's first turn on node A's prompt (see the top). */
static void shared_nodes(bench *b, const char *seeds, const uint32_t *tok, size_t P, int reps)
{
    char base[4000]; /* b->dir with a suffix fits in b->dir */
    snprintf(base, sizeof base, "%.3990s", b->dir);
    printf("prompt of %zu tokens, shared tier on %s:\n", P, seeds);
    /* Node A: cold, published. */
    snprintf(b->dir, sizeof b->dir, "%s.A", base);
    b->shared = seeds;
    bank_open(b, 1);
    sb_rt_turn a = turn(b, tok, P, 1);
    double t0 = now_s();
    check(sb_store_flush(b->st), "sb_store_flush");
    sb_stats sa;
    check(sb_store_stats(b->st, &sa), "stats");
    row("node A (publishes)", &a, a.ttft_s);
    printf("  %-34s %" PRIu64 " pages offered, %" PRIu64 " published (%.1f MiB), %" PRIu64
           " already there; flush waited %.2f ms\n", "", sa.shared_offered, sa.shared_published,
           (double)sa.shared_published_bytes / (1 << 20), sa.shared_dedup,
           (now_s() - t0) * 1e3);
    bank_close(b);
    /* A cold node: nothing to restore from. */
    snprintf(b->dir, sizeof b->dir, "%s.C", base);
    b->shared = NULL;
    bank_open(b, 1);
    sb_rt_turn cold = turn(b, tok, P, 1);
    row("cold node", &cold, cold.ttft_s);
    bank_close(b);
    /* Node B: fresh each time, its pages from the pool. */
    snprintf(b->dir, sizeof b->dir, "%s.B", base);
    double t[16];
    for (int rep = 0; rep < reps; rep++) {
        b->shared = seeds;
        bank_open(b, 1);
        sb_rt_turn r = turn(b, tok, P, 1);
        sb_stats s;
        check(sb_store_stats(b->st, &s), "stats");
        row("node B, fresh bank (shared)", &r, cold.ttft_s);
        double fs = (double)s.shared_fetch_ns / 1e9;
        printf("  %-34s fetched %" PRIu64 " pages, %.1f MiB in %.2f ms (%.0f MB/s), %" PRIu64
               " bad; estimate fetch %.1f ms against recompute %.1f ms\n", "",
               s.shared_fetched_pages, (double)s.shared_fetched_bytes / (1 << 20), fs * 1e3,
               fs > 0 ? (double)s.shared_fetched_bytes / fs / 1e6 : 0.0, s.shared_bad_values,
               r.est_fetch_s * 1e3, r.est_fetch_recompute_s * 1e3);
        t[rep] = r.ttft_s;
        bank_close(b);
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    printf("  %-34s median TTFT of %d: %.2f ms, x%.1f faster than cold; load average %.2f\n",
           "", reps, t[reps / 2] * 1e3, cold.ttft_s / t[reps / 2], load_average());
    /* Node B again, restarted without the shared tier: its own disk. */
    b->shared = NULL;
    int dropped = drop_caches();
    bank_open(b, 0);
    sb_rt_turn own = turn(b, tok, P, 1);
    row(dropped ? "node B restarted (own disk)" : "node B restarted (own disk, cache kept)", &own,
        cold.ttft_s);
    bank_close(b);
    for (const char *suf = "ACB"; *suf; suf++) {
        char cmd[4300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s.%c'", base, *suf);
        if (system(cmd) != 0)
            exit(1);
    }
    snprintf(b->dir, sizeof b->dir, "%s", base);
}

/* Decode tokens/s of np prompt tokens and nd new ones, quiet (spill 0) or
 * while the tier writes a snapshot of spill bytes of another namespace. */
static double decode(bench *b, const uint32_t *tok, size_t np, size_t nd, size_t spill,
                     int marks, uint64_t *spilled, double *held_ms)
{
    b->marks = marks;
    bank_open(b, 1);
    *spilled = 0;
    sb_ns *big = NULL;
    sb_stats s0, s1;
    if (spill) {
        static const uint32_t bpt1[1] = { 65536 };
        sb_layout l = { "spill", 5, 16, 1, bpt1, 0, 0 };
        check(sb_ns_open(b->st, &l, NULL, 0, &big), "spill ns");
        size_t n = spill / 65536; /* tokens of 64 KiB */
        uint8_t *buf = malloc(n * 65536);
        uint32_t *t = malloc(n * sizeof *t);
        if (!buf || !t)
            check(SB_ERR_NOMEM, "spill buffer");
        for (size_t i = 0; i < n * 65536; i += 8)
            memcpy(buf + i, &i, 8);
        for (size_t i = 0; i < n; i++)
            t[i] = (uint32_t)i;
        const void *tens[1] = { buf };
        check(sb_ns_put(big, t, n, tens, NULL, NULL), "spill put");
        free(buf);
        free(t);
    }
    check(sb_store_stats(b->st, &s0), "stats");
    sb_rt_turn r = turn(b, tok, np, nd);
    check(sb_store_stats(b->st, &s1), "stats");
    *spilled = s1.disk_write_bytes - s0.disk_write_bytes;
    *held_ms = (double)(s1.disk_holdback_ns - s0.disk_holdback_ns) / 1e6;
    b->marks = 1;
    sb_ns_close(big);
    bank_close(b);
    return r.decode_tok_s;
}

/* Run bench/llama_slots.py: llama-server's slot save and restore of the
 * model at path and the prompts tok[0, P[k]), printed beside ours. */
static void llama_slots(const bench *b, const char *server, const char *path,
                        const uint32_t *tok, const size_t *P, size_t n_p)
{
    char pf[4200], cmd[16384];
    snprintf(pf, sizeof pf, "%s/bench_session.%ld.prompt", b->scratch, (long)getpid());
    FILE *f = fopen(pf, "w");
    if (!f) {
        fprintf(stderr, "bench_session: %s: cannot write\n", pf);
        return;
    }
    for (size_t i = 0; i < P[n_p - 1]; i++)
        fprintf(f, "%u ", tok[i]);
    fclose(f);
    int len = snprintf(cmd, sizeof cmd, "python3 '%s' --server '%s' --model '%s' --prompt-file "
                       "'%s' --dir '%s' --threads %u --tokens ", SB_BENCH_LLAMA_SCRIPT, server,
                       path, pf, b->scratch, b->threads);
    for (size_t k = 0; k < n_p && len > 0 && (size_t)len < sizeof cmd; k++)
        len += snprintf(cmd + len, sizeof cmd - (size_t)len, "%s%zu", k ? "," : "", P[k]);
    printf("llama.cpp beside it: %s\n", cmd);
    if (strchr(server, '\'') || system(cmd) != 0)
        fprintf(stderr, "bench_session: llama_slots.py failed\n");
    unlink(pf);
}

int main(int argc, char **argv)
{
    const char *scratch = "/var/tmp", *llama = NULL;
    int quick = 0, reps = 3, do_ttft = 1, do_decode = 1, sim = 0;
    const char *shared = NULL;
    const char *preset = NULL, *dtype = NULL;
    size_t prompt = 0;
    bench b = { .threads = 2, .marks = 1, .fio = 1 };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quick")) {
            quick = 1;
        } else if (!strcmp(a, "--ttft-only")) {
            do_decode = 0;
        } else if (!strcmp(a, "--decode-only")) {
            do_ttft = 0;
        } else if (!strcmp(a, "--dir") && v) {
            scratch = v, i++;
        } else if (!strcmp(a, "--no-fio")) {
            b.fio = 0;
        } else if (!strcmp(a, "--llama-server") && v) {
            llama = v, i++;
        } else if (!strcmp(a, "--threads") && v && atoi(v) > 0) {
            b.threads = (unsigned)atoi(v), i++;
        } else if (!strcmp(a, "--reps") && v && atoi(v) > 0 && atoi(v) <= 16) {
            reps = atoi(v), i++;
        } else if (!strcmp(a, "--preset") && v) {
            preset = v, i++;
        } else if (!strcmp(a, "--dtype") && v) {
            dtype = v, i++;
        } else if (!strcmp(a, "--grid") && v && atoi(v) > 0 && atoi(v) % 16 == 0) {
            b.grid = (size_t)atoi(v), i++;
        } else if (!strcmp(a, "--prompt") && v && atoi(v) > 1) {
            prompt = (size_t)atoi(v), i++;
        } else if (!strcmp(a, "--shared-sim")) {
            sim = 1, do_ttft = do_decode = 0;
        } else if (!strcmp(a, "--shared") && v && !strncmp(v, "redis://", 8) && v[8]) {
            shared = v + 8, do_ttft = do_decode = 0, i++;
        } else {
            fprintf(stderr, "usage: bench_session [--quick] [--ttft-only | --decode-only | "
                            "--shared-sim | --shared redis://H:P[,H:P...]] [--preset P] [--dtype T] [--grid N] [--prompt N] "
                            "[--threads N] [--reps N] [--dir D] [--no-fio] "
                            "[--llama-server PATH]\n");
            return 2;
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (strchr(scratch, '\'')) { /* fio's command line quotes it with ' */
        fprintf(stderr, "bench_session: --dir must not contain a single quote\n");
        return 2;
    }
    snprintf(b.scratch, sizeof b.scratch, "%s", scratch);
    if (b.fio && system("command -v fio >/dev/null 2>&1") != 0) {
        printf("(fio not in PATH: no device figure beside the ssd restores)\n");
        b.fio = 0;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/bench_session.%ld.gguf", scratch, (long)getpid());
    snprintf(b.dir, sizeof b.dir, "%s/bench_session.%ld.bank", scratch, (long)getpid());
    if (!preset)
        preset = quick ? "tiny" : "small";
    sb_rt_make_opts mo;
    sb_rt_err err = { 0 };
    if (sb_rt_make_opts_preset(&mo, preset) != SB_OK ||
        (dtype && sb_rt_make_opts_set(&mo, "dtype", dtype) != SB_OK)) {
        fprintf(stderr, "bench_session: unknown --preset %s or --dtype %s\n", preset,
                dtype ? dtype : "");
        return 2;
    }
    size_t sys = quick ? 300 : 4000, n_conv = quick ? 10 : 100;
    if (sim && mo.n_ctx < sys + 128)
        mo.n_ctx = 8192; /* the trace's length (the weights do not change) */
    if (sb_rt_make_model(&mo, path, &err) != SB_OK ||
        sb_rt_model_load(path, &b.m, &err) != SB_OK) {
        fprintf(stderr, "bench_session: %s\n", err.msg);
        return 1;
    }
    if (!llama)
        unlink(path);
    const sb_rt_hparams *hp = &b.m->hp;
    printf("bench_session -- model %s (%s, %u layers of which %u attention, dim %u, %u KV "
           "heads, %s), %u threads, KV %.1f KiB/token, bank in %s (root: %s)\n", preset,
           sb_rt_arch_name(hp->arch), hp->n_layers, sb_rt_model_kv_layers(b.m), hp->dim,
           hp->n_kv_heads, sb_rt_make_dtype_name(mo.dtype), b.threads,
           2.0 * sb_rt_model_kv_layers(b.m) * sb_rt_model_kv_dim(b.m) * 2 / 1024, scratch,
           geteuid() == 0 ? "yes" : "no, page cache not dropped");
    printf("load average %.2f at start (other work on the machine is noise)\n", load_average());
    uint32_t *tok = malloc(hp->n_ctx * sizeof *tok);
    uint64_t x = 99;
    for (size_t i = 0; i < hp->n_ctx; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        tok[i] = (uint32_t)((x >> 33) % hp->n_vocab);
    }
    size_t P[2] = { 2048, 8000 }, n_p = 2; /* P + 64 <= the context */
    if (quick || prompt)
        P[0] = prompt ? prompt : 256, n_p = 1;
    while (n_p && P[n_p - 1] + 64 > hp->n_ctx)
        n_p--;
    if (sim)
        shared_sim(&b, tok, sys, n_conv);
    for (size_t k = 0; shared && k < n_p; k++)
        shared_nodes(&b, shared, tok, P[k], reps);
    for (size_t k = 0; do_ttft && k < n_p; k++)
        ttft(&b, tok, P[k], reps);
    if (llama && do_ttft) /* llama.cpp's slot restore of the same model and prompts */
        llama_slots(&b, llama, path, tok, P, n_p);

    size_t np = quick ? 64 : 512, nd = quick ? 16 : 256;
    if (quick)
        reps = 1;
    if (do_decode)
        printf("decode, %zu-token prompt, %zu tokens (tokens/s):\n", np, nd);
    double q = 0, sp = 0, sh = 0;
    size_t big = quick ? 64u << 20 : 3ull << 30;
    for (int r = 0; do_decode && r < reps; r++) {
        uint64_t w1, w2, w0;
        double h0, h1, h2;
        double dq = decode(&b, tok, np, nd, 0, 1, &w0, &h0);
        double dp = decode(&b, tok, np, nd, big, 0, &w1, &h1);
        double dh = decode(&b, tok, np, nd, big, 1, &w2, &h2);
        printf("  round %d: quiet %.1f; spilling, writer not held %.1f (%.0f MiB written in "
               "the turn); spilling, held back %.1f (%.0f MiB written, held %.0f ms)\n", r + 1,
               dq, dp, (double)w1 / (1 << 20), dh, (double)w2 / (1 << 20), h2);
        q += dq, sp += dp, sh += dh;
    }
    if (do_decode)
        printf("  mean: quiet %.1f; spilling %.1f (%.1f %% lost) without hold-back, %.1f "
               "(%.1f %% lost) with it\n", q / reps, sp / reps, 100.0 * (q - sp) / q, sh / reps,
               100.0 * (q - sh) / q);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", b.dir);
    if (system(cmd) != 0)
        return 1;
    if (llama)
        unlink(path);
    free(tok);
    sb_rt_model_free(b.m);
    return 0;
}
