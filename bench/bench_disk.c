/* bench_disk.c -- the disk tier benchmark: snapbank's spill, restore and open
 * against fio on the same file system, in one run, as ratios.
 *
 * Description: one namespace of --page-bytes pages (page_tokens 16, one
 * tensor of page_bytes / 16 bytes per token) holds sequences of distinct
 * tokens, 256 pages each (8 with --quick), --size in all. RAM budget, disk
 * cap, write budgets and backlog leave nothing throttled, denied or evicted.
 *
 *   1. Spill, as an engine uses the tier: zero-copy. Untimed, every page is
 *      taken with sb_ns_page_alloc and filled (a forward pass would write
 *      it); timed, sb_ns_commit of every sequence, then sb_store_flush: the
 *      writer's figure. Payload MiB/s counts page bytes; device MiB/s the
 *      growth of stats.disk_write_bytes (a record per page: a 4 KiB head and
 *      the page; namespace records, summaries). Secondary: copy mode, the
 *      same sequences with sb_ns_put + flush into a second store; it pays
 *      memcpy and the first touch of fresh pool memory as well.
 *   2. Restore. Reopen (timed) with the files out of the page cache; then
 *      read every sequence back whole, one sb_ns_match at a time (one call
 *      submits all of a sequence's reads). Timed: match + read + release;
 *      untimed: a check of every byte. Passes: copy mode (sb_match_restore
 *      into a caller buffer touched before the timer) and zero-copy
 *      (sb_match_pages: pages read into pool memory and handed over), each
 *      on a fresh pool (right after an open: the reads land in memory
 *      touched for the first time) and, in the first round only, on a
 *      recycled one (a second namespace first took the whole budget,
 *      evicting every page back to disk-only, and freed it). getrusage's
 *      minor faults of each pass are printed. The fresh-pool passes run in
 *      --rounds rounds, each pass followed by a fio read (phase 4), and the
 *      goal is held to the median of the per-round ratios.
 *   3. Open. A store of --open-pages pages of 4 KiB (256 bytes per token,
 *      64-page sequences) is built, flushed, closed and reopened (timed;
 *      goal: < 1 s for 1,000,000 pages); every sequence must then match
 *      whole from disk pages, and the first and last restore intact.
 *   4. fio, when in PATH: a sequential write, then reads of the same file,
 *      io_uring, direct=1, bs = page_bytes + 4096 (a record), iodepth =
 *      --queue-depth, the records' bytes, in the same directory, the write
 *      with --end_fsync=1 as the spill ends with a sync. The write runs
 *      right after the spill, a read right after each fresh-pool restore
 *      pass. Ratio lines compare snapbank's device MiB/s with fio's (goal
 *      >= 0.95).
 *
 * Page content derives from the tokens: a pattern filled once, with an
 * 8-byte stamp of (sequence, position, token id) at the start of every 4 KiB
 * of every token slice, so a misplaced or stale page fails the byte check.
 *
 * Timing figures are printed, never asserted. Exit status: 0 success; 1 a
 * call failed, a gauge disagreed with what was written (disk_pages, denials,
 * write errors), a restore returned wrong bytes, fewer tokens, or pages that
 * were not on disk; 2 bad usage. Dependency rule: only snapbank.h.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "snapbank.h"

#ifndef SB_BENCH_BUILD_TYPE
#define SB_BENCH_BUILD_TYPE "unknown"
#endif
#ifndef SB_BENCH_SANITIZE
#define SB_BENCH_SANITIZE 0
#endif
#ifndef SB_BENCH_JEMALLOC
#define SB_BENCH_JEMALLOC 0
#endif

#define MIB (1024.0 * 1024.0)
#define PAGE_TOKENS 16u          /* both stores */
#define REC_HEAD_BYTES 4096u     /* head block of a page record */
#define OPEN_BPT 256u            /* open store: 16 x 256 = 4 KiB pages */
#define OPEN_GOAL_PAGES 1000000u
#define OPEN_GOAL_S 1.0
#define RATIO_GOAL 0.95

typedef struct disk_opts {
    const char *parent;        /* where the run's scratch directory is made */
    uint64_t size_bytes;       /* spill payload, bytes */
    uint64_t page_bytes;       /* spill page size, a multiple of 4096 */
    uint32_t queue_depth;      /* sb_config.queue_depth and fio's iodepth */
    uint64_t open_pages;       /* pages of the open store; 0 skips it */
    uint64_t seq_pages;        /* spill sequence length, pages */
    uint32_t rounds;           /* restore rounds, each beside its own fio read */
    bool quick, no_fio;
} disk_opts;

/* ---- helpers ------------------------------------------------------------------ */

/* The scratch directory, removed at exit even when a check fails: the one
 * piece of global state, for atexit(). */
static char g_scratch[PATH_MAX];

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double secs(uint64_t ns) { return (double)ns / 1e9; }

/* CPU seconds (user + system) of the whole process so far. */
static double cpu_secs(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* Minor page faults of the whole process so far (every thread). */
static uint64_t minor_faults(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? (uint64_t)ru.ru_minflt : 0;
}

/* splitmix64's finalizer */
static uint64_t mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "bench_disk: %s failed: %s (%d)\n", what,
            rc < 0 ? sb_strerror(rc) : "unexpected result", rc);
    exit(1);
}

#define CHECK(call)                       \
    do {                                  \
        int rc_ = (call);                 \
        if (rc_ != SB_OK)                 \
            die(#call, rc_);              \
    } while (0)

static void *xalloc(size_t n)
{
    size_t sz = (n + 4095) / 4096 * 4096; /* aligned_alloc wants a multiple */
    void *p = aligned_alloc(4096, sz ? sz : 4096);
    if (!p) {
        fprintf(stderr, "bench_disk: out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

static void path_join(char *out, const char *dir, const char *name)
{
    if ((size_t)snprintf(out, PATH_MAX, "%s/%s", dir, name) >= PATH_MAX) {
        fprintf(stderr, "bench_disk: path too long: %s/%s\n", dir, name);
        exit(1);
    }
}

/* Call fn on every entry of dir but . and .. (a missing dir has none). */
static void dir_each(const char *dir, void (*fn)(const char *path))
{
    char p[PATH_MAX];
    struct dirent *e;
    DIR *d = opendir(dir);
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            path_join(p, dir, e->d_name);
            fn(p);
        }
    if (d)
        closedir(d);
}

/* Remove path and everything under it. Errors are reported, not fatal. */
static void rm_tree(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        dir_each(path, rm_tree);
        if (rmdir(path) != 0)
            fprintf(stderr, "bench_disk: rmdir %s: %s\n", path, strerror(errno));
    } else if (unlink(path) != 0 && errno != ENOENT) {
        fprintf(stderr, "bench_disk: unlink %s: %s\n", path, strerror(errno));
    }
}

static void cleanup_scratch(void)
{
    if (g_scratch[0])
        rm_tree(g_scratch);
    g_scratch[0] = 0;
}

/* Drop the page cache of a file: it is clean after close (O_DIRECT writes,
 * then fdatasync), so DONTNEED evicts it. Restores read with O_DIRECT and
 * bypass the cache anyway; the reads of sb_store_open may not. */
static void drop_cache_file(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd >= 0) {
        (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
    }
}

/* ---- sequences: tokens and page content derived from them ----------------------- */

/* Sequences of one namespace with one tensor: n_pages pages in sequences of
 * seq_pages pages (the last may be shorter), every one of whole pages. With
 * one tensor of page_bytes / PAGE_TOKENS bytes per token, page i of a
 * sequence is bytes [i * page_bytes, (i + 1) * page_bytes) of its src. */
typedef struct seqset {
    const char *model;         /* model identity of the namespace */
    uint32_t bpt;              /* bytes per token of the one tensor */
    size_t page_bytes;         /* PAGE_TOKENS * bpt, a multiple of 4096 */
    uint64_t n_pages;          /* pages over all sequences */
    uint64_t seq_pages;        /* pages per sequence */
    uint64_t n_seq;            /* ceil(n_pages / seq_pages) */
    uint32_t *tok;             /* (seq_pages * PAGE_TOKENS) current sequence */
    uint8_t *src;              /* (seq_pages * PAGE_TOKENS, bpt) its state */
    uint8_t *dst;              /* (seq_pages * PAGE_TOKENS, bpt) restore target,
                                  touched once at init */
} seqset;

static void seqset_init(seqset *ss, const char *model, uint32_t bpt, uint64_t n_pages,
                        uint64_t seq_pages)
{
    memset(ss, 0, sizeof *ss);
    ss->model = model;
    ss->bpt = bpt;
    ss->page_bytes = (size_t)PAGE_TOKENS * bpt;
    ss->n_pages = n_pages;
    ss->seq_pages = seq_pages < n_pages ? seq_pages : n_pages;
    ss->n_seq = (n_pages + ss->seq_pages - 1) / ss->seq_pages;
    size_t n_tok = (size_t)ss->seq_pages * PAGE_TOKENS, n_bytes = n_tok * bpt;
    ss->tok = xalloc(n_tok * sizeof *ss->tok);
    ss->src = xalloc(n_bytes);
    ss->dst = xalloc(n_bytes);
    uint64_t x = 0x5EEDu;
    for (size_t i = 0; i + 8 <= n_bytes; i += 8) { /* the pattern, filled once */
        uint64_t v = mix64(x++);
        memcpy(ss->src + i, &v, 8);
    }
    memset(ss->dst, 0, n_bytes); /* fault it in */
}

static void seqset_free(seqset *ss)
{
    free(ss->tok);
    free(ss->src);
    free(ss->dst);
}

/* Pages of sequence s. */
static size_t seq_n_pages(const seqset *ss, uint64_t s)
{
    uint64_t left = ss->n_pages - s * ss->seq_pages;
    return (size_t)(left < ss->seq_pages ? left : ss->seq_pages);
}

/* The tokens of sequence s into out. Returns their count. */
static size_t seq_tokens(const seqset *ss, uint64_t s, uint32_t *out)
{
    size_t n = seq_n_pages(ss, s) * PAGE_TOKENS;
    out[0] = (uint32_t)s; /* distinct first tokens: nothing is shared */
    for (size_t i = 1; i < n; i++)
        out[i] = (uint32_t)mix64((s << 32) ^ i);
    return n;
}

/* Make sequence s in tok and src (stamping src). Returns its token count. */
static size_t seq_make(seqset *ss, uint64_t s)
{
    size_t n = seq_tokens(ss, s, ss->tok);
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < ss->bpt; k += 4096) {
            uint64_t v = mix64(((uint64_t)ss->tok[i] << 32) ^ (s << 40) ^ (i << 12) ^ k);
            memcpy(ss->src + i * ss->bpt + k, &v, sizeof v); /* bpt >= 256 */
        }
    return n;
}

/* Compare len restored bytes at got with src + off of sequence s; exit at
 * the first difference, naming where it is. */
static void seq_check_bytes(const seqset *ss, uint64_t s, const uint8_t *got, size_t off,
                            size_t len)
{
    const uint8_t *want = ss->src + off;
    if (memcmp(got, want, len) == 0)
        return;
    size_t i = 0;
    while (got[i] == want[i])
        i++;
    i += off;
    fprintf(stderr, "bench_disk: %s sequence %" PRIu64 ": wrong byte at token %zu "
            "offset %zu (page %zu)\n", ss->model, s, i / ss->bpt, i % ss->bpt,
            i / ss->page_bytes);
    exit(1);
}

static sb_ns *seq_ns(sb_store *st, const seqset *ss, const char *model)
{
    uint32_t bpt[1] = { ss->bpt };
    sb_layout lay = { .model_id = model, .model_id_bytes = strlen(model),
                      .page_tokens = PAGE_TOKENS, .n_tensors = 1, .bytes_per_token = bpt };
    sb_ns *ns = NULL;
    sb_ns_info info;
    CHECK(sb_ns_open(st, &lay, "bench", 5, &ns));
    CHECK(sb_ns_get_info(ns, &info));
    if (info.page_bytes != ss->page_bytes) {
        fprintf(stderr, "bench_disk: page is %zu bytes, expected %zu\n", info.page_bytes,
                ss->page_bytes);
        exit(1);
    }
    return ns;
}

/* Match sequence s (its n tokens in ss->tok) and exit unless all of it is
 * restorable. */
static sb_match *seq_match(seqset *ss, sb_ns *ns, uint64_t s, size_t n,
                           sb_match_info *info)
{
    sb_match *m = NULL;
    CHECK(sb_ns_match(ns, ss->tok, n, &m));
    CHECK(sb_match_get_info(m, info));
    if (info->n_tokens != n) {
        fprintf(stderr, "bench_disk: %s sequence %" PRIu64 ": %zu of %zu tokens "
                "restorable (miss: %s)\n", ss->model, s, info->n_tokens, n,
                sb_miss_name(info->miss));
        exit(1);
    }
    return m;
}

/* Read sequence s back and check every byte (the check untimed): copy mode
 * (pages NULL) with sb_match_restore into ss->dst, or zero-copy with
 * sb_match_pages of every page into pages, whose references are dropped
 * after the check. *t_ns grows by match + read + release, *n_disk by the
 * pages the match had on disk. */
static void seq_read_check(seqset *ss, sb_ns *ns, uint64_t s, sb_page **pages,
                           uint64_t *t_ns, uint64_t *n_disk)
{
    size_t n = seq_make(ss, s);
    void *dst[1] = { ss->dst };
    if (!pages)
        memset(ss->dst, 0xA5, n * ss->bpt); /* poison: a byte not restored shows */
    sb_match_info info;
    uint64_t t0 = now_ns();
    sb_match *m = seq_match(ss, ns, s, n, &info);
    int rc = pages ? sb_match_pages(m, 0, info.n_pages, pages)
                   : sb_match_restore(m, n, dst, NULL);
    sb_match_release(m);
    *t_ns += now_ns() - t0;
    *n_disk += info.n_pages_disk;
    if (rc != SB_OK)
        die(pages ? "sb_match_pages" : "sb_match_restore", rc);
    if (!pages)
        seq_check_bytes(ss, s, ss->dst, 0, n * ss->bpt);
    for (size_t i = 0; pages && i < info.n_pages; i++) {
        if (sb_page_tokens(pages[i]) != PAGE_TOKENS)
            die("sb_page_tokens of a restored page", (int)sb_page_tokens(pages[i]));
        seq_check_bytes(ss, s, sb_page_data(pages[i]), i * ss->page_bytes, ss->page_bytes);
        sb_page_unref(pages[i]);
    }
}

/* ---- stores ------------------------------------------------------------------- */

/* One store of the run, with its one namespace and its sequences. */
typedef struct bank {
    char dir[PATH_MAX];        /* the store directory */
    sb_config cfg;             /* dir points at the field above */
    seqset *ss;                /* borrowed */
    sb_store *st;              /* NULL while closed */
    sb_ns *ns;
    uint64_t t_open;           /* ns of the last sb_store_open */
} bank;

/* Room for everything, so the figures are the device's and not a cap's: RAM
 * for every page, a disk cap with slack, every page worth writing, write
 * budgets and a backlog that cannot throttle or deny a run of this size. */
static void bank_init(bank *b, const char *name, seqset *ss, const disk_opts *o)
{
    memset(b, 0, sizeof *b);
    path_join(b->dir, g_scratch, name);
    b->ss = ss;
    sb_config *c = &b->cfg;
    uint64_t n = ss->n_pages, disk_need = n * (ss->page_bytes + REC_HEAD_BYTES);
    sb_config_default(c);
    c->dir = b->dir;
    c->min_prefix_tokens = 1; /* throughput: --quick sequences are short */
    c->ram_bytes = n * ss->page_bytes + (256ull << 20);
    c->queue_depth = o->queue_depth;
    c->disk_bytes = disk_need + disk_need / 4 + 4 * c->segment_bytes;
    c->min_prefix_tokens = 1;
    c->write_budget_bytes_per_hour = 1ull << 44;
    c->write_budget_burst_bytes = 1ull << 40;
    if (c->backlog_bytes < c->ram_bytes)
        c->backlog_bytes = c->ram_bytes;
}

/* Open (create or reopen) the store and its namespace; drop the page cache
 * of its files first. */
static void bank_open(bank *b)
{
    dir_each(b->dir, drop_cache_file); /* segments, summaries, superblock */
    uint64_t t0 = now_ns();
    CHECK(sb_store_open(&b->cfg, &b->st));
    b->t_open = now_ns() - t0;
    b->ns = seq_ns(b->st, b->ss, b->ss->model);
}

static void bank_close(bank *b)
{
    sb_ns_close(b->ns);
    CHECK(sb_store_close(b->st));
    b->st = NULL;
    b->ns = NULL;
}

/* Every page must be on disk (after a flush, or after a reopen), nothing
 * denied or failed. Returns the stats. */
static sb_stats bank_expect_on_disk(bank *b, const char *when)
{
    sb_stats s;
    CHECK(sb_store_stats(b->st, &s));
    if (s.disk_pages != b->ss->n_pages || s.disk_write_denials || s.disk_write_errors) {
        fprintf(stderr, "bench_disk: %s: stats.disk_pages %" PRIu64 ", expected %" PRIu64
                "; %" PRIu64 " write denials, %" PRIu64 " write errors\n", when,
                s.disk_pages, b->ss->n_pages, s.disk_write_denials, s.disk_write_errors);
        exit(1);
    }
    return s;
}

/* What the disk tier made of a phase's puts or commits, from their
 * outcomes (sb_write_outcome). */
typedef struct durs {
    uint64_t calls, durable, pending, never;
    uint64_t last;             /* the last call's ticket */
} durs;

static void durs_add(durs *d, const sb_write_outcome *oc)
{
    d->calls++;
    d->durable += oc->durable != 0;
    d->never += oc->denied != 0;
    d->pending += !oc->durable && !oc->denied;
    d->last = oc->ticket;
}

/* Print them, once the phase's flush returned: no call may have had a
 * block denied, and the last one's ticket must be durable now. */
static void durs_print(const durs *d, sb_store *st, const char *what)
{
    printf("%s durability: %" PRIu64 " calls, %" PRIu64 " durable when they returned, %" PRIu64
           " pending until the flush, %" PRIu64 " never\n", what, d->calls, d->durable,
           d->pending, d->never);
    if (d->never)
        die("calls with a block denied", (int)d->never);
    CHECK(sb_store_is_durable(st, d->last));
}

/* Put every sequence (copy mode) and flush: *t_put receives the time the
 * puts took, *t_all from the first put until the flush returned (making
 * each sequence, a few stores per page, included); *s the stats after. */
static void bank_fill(bank *b, uint64_t *t_put, uint64_t *t_all, sb_stats *s)
{
    uint64_t t0 = now_ns();
    *t_put = 0;
    durs d = { 0 };
    for (uint64_t q = 0; q < b->ss->n_seq; q++) {
        size_t n = seq_make(b->ss, q), stored = 0;
        const void *src[1] = { b->ss->src };
        sb_write_outcome oc;
        uint64_t t1 = now_ns();
        CHECK(sb_ns_put_ex(b->ns, b->ss->tok, n, src, NULL, &stored, &oc));
        *t_put += now_ns() - t1;
        if (stored != n)
            die("sb_ns_put stored count", (int)stored);
        durs_add(&d, &oc);
    }
    CHECK(sb_store_flush(b->st));
    *t_all = now_ns() - t0;
    *s = bank_expect_on_disk(b, "after sb_store_flush");
    durs_print(&d, b->st, "copy-mode spill");
}

/* Make every restored page disk-only again without closing the store: a
 * second namespace takes the whole RAM budget in fresh pages (evicting
 * every clean page, whose buffer goes back to the pool), touches them and
 * frees them. The next restore then reads into recycled pool memory. */
static void bank_evict_all(bank *b)
{
    seqset *ss = b->ss;
    size_t n = (size_t)(b->cfg.ram_bytes / ss->page_bytes);
    sb_page **p = xalloc(n * sizeof *p);
    sb_ns *filler = seq_ns(b->st, ss, "bench-disk-filler");
    for (size_t i = 0; i < n; i++) {
        CHECK(sb_ns_page_alloc(filler, &p[i]));
        volatile uint8_t *d = sb_page_data(p[i]);
        for (size_t k = 0; k < ss->page_bytes; k += 4096)
            d[k] = 0; /* the first allocations are fresh memory: touch them too */
    }
    for (size_t i = 0; i < n; i++)
        sb_page_unref(p[i]);
    sb_ns_close(filler);
    free(p);
}

/* ---- fio ---------------------------------------------------------------------- */

/* Run fio once on file (rw "write" or "read"); print the command; return
 * its bandwidth in bytes/s, or -1 when fio failed or printed no terse line.
 * Terse version 3 is one line of ';'-separated fields: 7 is the read
 * bandwidth, 48 the write bandwidth, in KiB/s. */
static double fio_run(const char *file, const char *rw, uint64_t bs, uint32_t qd,
                      uint64_t size)
{
    char cmd[PATH_MAX + 512], line[16384];
    bool wr = !strcmp(rw, "write");
    snprintf(cmd, sizeof cmd,
             "fio --name=bench_disk_%s --filename='%s' --ioengine=io_uring --direct=1 "
             "--rw=%s --bs=%" PRIu64 " --iodepth=%u --size=%" PRIu64 "%s "
             "--output-format=terse --terse-version=3", rw, file, rw, bs, qd, size,
             wr ? " --end_fsync=1" : "");
    printf("fio command: %s\n", cmd);
    fflush(stdout);
    FILE *f = popen(cmd, "r");
    double kib = -1;
    const char *p = f && fgets(line, sizeof line, f) && !strncmp(line, "3;", 2) ? line : NULL;
    for (int i = 1; p && i < (wr ? 48 : 7); i++)
        p = strchr(p, ';') ? strchr(p, ';') + 1 : NULL;
    if (p)
        kib = strtod(p, NULL);
    int status = f ? pclose(f) : -1;
    if (status != 0 || kib <= 0) {
        fprintf(stderr, "bench_disk: fio %s failed (status %d) or gave no bandwidth\n", rw,
                status);
        return -1;
    }
    return kib * 1024;
}

/* ---- the phases ------------------------------------------------------------------ */

enum { R_COPY, R_ZERO };       /* restore modes */
enum { R_FRESH, R_RECYCLED };  /* pool states */

#define MAX_ROUNDS 16

typedef struct disk_res {
    double spill_dev, put_dev;        /* MiB/s: zero-copy spill, copy-mode spill */
    double rest_dev[2][2];            /* MiB/s by [R_COPY, R_ZERO][R_FRESH, R_RECYCLED];
                                       * fresh: the median round */
    double fio_write, fio_read;       /* MiB/s; -1 when not run; read: median round */
    uint32_t rounds;                  /* fresh-pool restore rounds run */
    double round_dev[MAX_ROUNDS][2];  /* MiB/s of each round's pass by [R_COPY, R_ZERO] */
    double round_fio[MAX_ROUNDS][2];  /* the fio read right after that pass; -1 none */
    double open_s;                    /* reopen of the open store, s; -1: not run */
    uint64_t open_pages;
} disk_res;

static void print_ratio(const char *what, double sb, double fio, bool goal)
{
    printf("%-36s snapbank %5.0f MiB/s", what, sb);
    if (fio > 0)
        printf(", fio %5.0f MiB/s, ratio %.3f%s%s", fio, sb / fio,
               goal ? (sb / fio >= RATIO_GOAL ? ": goal MET" : ": goal MISSED") : "",
               goal ? " (>= 0.95)" : " (no goal)");
    printf("\n");
}

/* fio write or read of the records' bytes (fio.dat in the scratch
 * directory; written once after the spill, read after each restore pass).
 * Returns MiB/s, or -1 when not run or failed. */
static double fio_phase(const disk_opts *o, bool run, bool write)
{
    if (!run)
        return -1;
    char file[PATH_MAX];
    path_join(file, g_scratch, "fio.dat");
    uint64_t bs = o->page_bytes + REC_HEAD_BYTES;
    uint64_t size = o->size_bytes / o->page_bytes * bs;
    if (!write)
        drop_cache_file(file); /* direct=1 bypasses it; as for the store's files */
    double bw = fio_run(file, write ? "write" : "read", bs, o->queue_depth, size);
    if (bw > 0)
        printf("fio %s: %.0f MiB/s (%" PRIu64 " blocks of %" PRIu64 " bytes, QD %u)\n",
               write ? "write" : "read", bw / MIB, size / bs, bs, o->queue_depth);
    return bw > 0 ? bw / MIB : -1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of v[0, n) (1 <= n <= 2 * MAX_ROUNDS; v is not changed). */
static double median(const double *v, size_t n)
{
    double t[2 * MAX_ROUNDS];
    memcpy(t, v, n * sizeof *t);
    qsort(t, n, sizeof *t, cmp_double);
    return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

/* Phase 1, zero-copy: fill pool pages untimed, then time the commits and
 * the flush. The store is left closed, every page on disk. */
static void spill_zero_copy(bank *b, disk_res *r)
{
    seqset *ss = b->ss;
    uint64_t n_pages = ss->n_pages, payload = n_pages * ss->page_bytes;
    sb_page **pages = xalloc(n_pages * sizeof *pages);
    uint32_t *tok = xalloc(n_pages * PAGE_TOKENS * sizeof *tok);
    bank_open(b);
    uint64_t t_new = b->t_open, t0 = now_ns();
    for (uint64_t s = 0; s < ss->n_seq; s++) { /* untimed: what a forward pass does */
        uint64_t first = s * ss->seq_pages;
        seq_make(ss, s);
        memcpy(tok + first * PAGE_TOKENS, ss->tok,
               seq_n_pages(ss, s) * PAGE_TOKENS * sizeof *tok);
        for (size_t i = 0; i < seq_n_pages(ss, s); i++) {
            CHECK(sb_ns_page_alloc(b->ns, &pages[first + i]));
            memcpy(sb_page_data(pages[first + i]), ss->src + i * ss->page_bytes,
                   ss->page_bytes);
        }
    }
    uint64_t t_fill = now_ns() - t0;
    sb_stats s0, s;
    CHECK(sb_store_stats(b->st, &s0));
    t0 = now_ns();
    durs d = { 0 };
    for (uint64_t q = 0; q < ss->n_seq; q++) {
        uint64_t first = q * ss->seq_pages;
        sb_write_outcome oc;
        CHECK(sb_ns_commit_ex(b->ns, tok + first * PAGE_TOKENS,
                              seq_n_pages(ss, q) * PAGE_TOKENS, pages + first, NULL, &oc));
        durs_add(&d, &oc);
    }
    uint64_t t_commit = now_ns() - t0;
    CHECK(sb_store_flush(b->st));
    uint64_t t_spill = now_ns() - t0;
    s = bank_expect_on_disk(b, "zero-copy spill, after sb_store_flush");
    durs_print(&d, b->st, "zero-copy spill");
    if (s.pages_new - s0.pages_new != n_pages)
        die("sb_ns_commit: pages added to the index", (int)(s.pages_new - s0.pages_new));
    for (uint64_t i = 0; i < n_pages; i++)
        sb_page_unref(pages[i]);
    uint64_t wr = s.disk_write_bytes - s0.disk_write_bytes;
    t0 = now_ns();
    bank_close(b);
    r->spill_dev = (double)wr / MIB / secs(t_spill);
    printf("untimed: %" PRIu64 " pages taken and filled in %.3f s\n", n_pages, secs(t_fill));
    printf("zero-copy spill (commit + flush) %.3f s: payload %.0f MiB/s, device %.0f MiB/s "
           "(%.1f MiB written for %.1f MiB of pages); the commits returned after %.3f s\n",
           secs(t_spill), (double)payload / MIB / secs(t_spill), r->spill_dev,
           (double)wr / MIB, (double)payload / MIB, secs(t_commit));
    printf("store open (new) %.3f ms, close %.3f ms\n", (double)t_new / 1e6,
           (double)(now_ns() - t0) / 1e6);
    free(pages);
    free(tok);
}

/* Phase 1, copy mode, secondary: sb_ns_put of the same sequences into a
 * second store, then flush; the store is removed after. */
static void spill_copy(const disk_opts *o, seqset *ss, disk_res *r)
{
    bank b;
    bank_init(&b, "put", ss, o);
    bank_open(&b);
    uint64_t t_put, t_all, payload = ss->n_pages * ss->page_bytes;
    sb_stats s;
    bank_fill(&b, &t_put, &t_all, &s);
    bank_close(&b);
    rm_tree(b.dir);
    r->put_dev = (double)s.disk_write_bytes / MIB / secs(t_all);
    printf("copy-mode spill (put + flush) %.3f s: payload %.0f MiB/s, device %.0f MiB/s; "
           "the puts took %.3f s (%.0f MiB/s)\n", secs(t_all),
           (double)payload / MIB / secs(t_all), r->put_dev, secs(t_put),
           (double)payload / MIB / secs(t_put));
}

/* Phase 2, one pass: match and read back every sequence, copy mode or
 * zero-copy; every page must come from disk. Returns device MiB/s. */
static double restore_pass(bank *b, int mode, int pool, sb_page **pages)
{
    seqset *ss = b->ss;
    sb_stats s0, s;
    CHECK(sb_store_stats(b->st, &s0));
    uint64_t t = 0, n_disk = 0, f0 = minor_faults();
    double c0 = cpu_secs();
    for (uint64_t q = 0; q < ss->n_seq; q++)
        seq_read_check(ss, b->ns, q, mode == R_ZERO ? pages : NULL, &t, &n_disk);
    uint64_t faults = minor_faults() - f0;
    double cpu = cpu_secs() - c0; /* the byte checks included */
    CHECK(sb_store_stats(b->st, &s));
    double rd = (double)(s.disk_read_bytes - s0.disk_read_bytes), pay = ss->n_pages;
    pay *= (double)ss->page_bytes;
    printf("%-10s %-8s pool: %.3f s, payload %5.0f MiB/s, device %5.0f MiB/s "
           "(%.1f MiB read); %" PRIu64 " minor faults (%.0f per MiB of pages); "
           "CPU %.3f s with the untimed checks\n",
           mode == R_ZERO ? "zero-copy," : "copy mode,",
           pool == R_FRESH ? "fresh" : "recycled",
           secs(t), pay / MIB / secs(t), rd / MIB / secs(t), rd / MIB, faults,
           (double)faults / (pay / MIB), cpu);
    if (n_disk != ss->n_pages) {
        fprintf(stderr, "bench_disk: only %" PRIu64 " of %" PRIu64 " restored pages came "
                "from disk: not a disk figure\n", n_disk, ss->n_pages);
        exit(1);
    }
    return rd / MIB / secs(t);
}

/* Phase 2: reopen (timed), then rounds of fresh-pool passes, each pass
 * followed by a fio read of as many bytes, so that every ratio compares two
 * runs seconds apart (this machine's disk drifts by a factor of two over
 * minutes); the figures held to the goal are the medians over the rounds.
 * The recycled-pool passes run once, in the first round. */
static void restore_phase(const disk_opts *o, bool fio, bank *b, disk_res *r)
{
    seqset *ss = b->ss;
    sb_page **pages = xalloc(ss->seq_pages * sizeof *pages);
    r->rounds = o->rounds;
    for (uint32_t k = 0; k < o->rounds; k++) {
        printf("-- round %u of %u --\n", k + 1, o->rounds);
        for (int mode = R_ZERO; mode >= R_COPY; mode--) {
            bank_open(b); /* a fresh pool */
            sb_stats s = bank_expect_on_disk(b, "after reopen");
            if (s.recovered_pages != ss->n_pages)
                die("reopen: stats.recovered_pages", (int)s.recovered_pages);
            if (k == 0 && mode == R_ZERO)
                printf("reopen of %" PRIu64 " pages: %.3f ms; stats.disk_pages %" PRIu64 "\n",
                       ss->n_pages, (double)b->t_open / 1e6, s.disk_pages);
            r->round_dev[k][mode] = restore_pass(b, mode, R_FRESH, pages);
            if (k == 0) {
                bank_evict_all(b);
                r->rest_dev[mode][R_RECYCLED] = restore_pass(b, mode, R_RECYCLED, pages);
            }
            bank_close(b);
            r->round_fio[k][mode] = fio_phase(o, fio, false);
        }
    }
    double v[MAX_ROUNDS], f[2 * MAX_ROUNDS];
    for (int mode = R_COPY; mode <= R_ZERO; mode++) {
        for (uint32_t k = 0; k < o->rounds; k++) {
            v[k] = r->round_dev[k][mode];
            f[2 * k + (uint32_t)mode] = r->round_fio[k][mode];
        }
        r->rest_dev[mode][R_FRESH] = median(v, o->rounds);
    }
    r->fio_read = fio ? median(f, 2 * o->rounds) : -1;
    free(pages);
}

/* The restore goal, per round and as the median of the rounds' ratios. */
static void print_rounds(const disk_res *r)
{
    if (r->fio_read <= 0)
        return;
    for (int mode = R_ZERO; mode >= R_COPY; mode--) {
        double q[MAX_ROUNDS];
        printf("restore, %s, fresh pool, per round (snapbank/fio):",
               mode == R_ZERO ? "zero-copy" : "copy mode");
        for (uint32_t k = 0; k < r->rounds; k++) {
            q[k] = r->round_fio[k][mode] > 0 ? r->round_dev[k][mode] / r->round_fio[k][mode] : 0;
            printf(" %.0f/%.0f=%.3f", r->round_dev[k][mode], r->round_fio[k][mode], q[k]);
        }
        double m = median(q, r->rounds);
        printf("\n  median ratio %.3f: goal %s (>= 0.95)\n", m,
               m >= RATIO_GOAL ? "MET" : "MISSED");
    }
}

/* Phases 1 and 2 with fio interleaved (write after the spill, read after the
 * restores), so both sides see the device in a similar state. */
static void spill_restore(const disk_opts *o, bool fio, disk_res *r)
{
    seqset ss;
    uint64_t n_pages = o->size_bytes / o->page_bytes;
    seqset_init(&ss, "bench-disk-spill", (uint32_t)(o->page_bytes / PAGE_TOKENS), n_pages,
                o->seq_pages);
    bank b;
    bank_init(&b, "spill", &ss, o);
    printf("\n== 1. Spill: %" PRIu64 " pages of %zu bytes in %" PRIu64 " sequences of <= %"
           PRIu64 " pages ==\n", n_pages, ss.page_bytes, ss.n_seq, ss.seq_pages);
    printf("config: ram_bytes %.0f MiB, segment %.0f MiB, queue_depth %u, durability %d, "
           "write_mode %d\n", (double)b.cfg.ram_bytes / MIB,
           (double)b.cfg.segment_bytes / MIB, b.cfg.queue_depth, (int)b.cfg.durability,
           (int)b.cfg.write_mode);
    spill_zero_copy(&b, r);
    r->fio_write = fio_phase(o, fio, true);
    spill_copy(o, &ss, r);

    printf("\n== 2. Restore: reopen, match and read back every sequence ==\n");
    restore_phase(o, fio, &b, r);
    rm_tree(b.dir);
    char file[PATH_MAX];
    path_join(file, g_scratch, "fio.dat");
    unlink(file);
    seqset_free(&ss);
}

/* Phase 3: reopen time of a store of many small pages. */
static void open_phase(const disk_opts *o, disk_res *r)
{
    seqset ss;
    seqset_init(&ss, "bench-disk-open", OPEN_BPT, o->open_pages, 64);
    bank b;
    bank_init(&b, "open", &ss, o);
    uint64_t n = ss.n_pages;
    printf("\n== 3. Open: %" PRIu64 " pages of %zu bytes in %" PRIu64 " sequences ==\n", n,
           ss.page_bytes, ss.n_seq);
    uint64_t t_put, t_build;
    sb_stats s;
    bank_open(&b);
    bank_fill(&b, &t_put, &t_build, &s);
    bank_close(&b);
    printf("build (put + flush) %.3f s: %.0f pages/s, device %.0f MiB/s\n",
           secs(t_build), (double)n / secs(t_build),
           (double)s.disk_write_bytes / MIB / secs(t_build));

    bank_open(&b);
    s = bank_expect_on_disk(&b, "open store, after reopen");
    r->open_s = secs(b.t_open);
    r->open_pages = n;
    printf("reopen %.3f s: %.0f pages/s; stats.disk_pages %" PRIu64 ", recovery_ns %.3f ms\n",
           r->open_s, (double)n / r->open_s, s.disk_pages, (double)s.recovery_ns / 1e6);
    /* Every sequence matches whole from disk pages; the first and the last
     * restore intact. */
    uint64_t t_match = 0, n_disk = 0, t_rest = 0, n_disk_r = 0;
    for (uint64_t q = 0; q < ss.n_seq; q++) {
        sb_match_info info;
        size_t k = seq_tokens(&ss, q, ss.tok);
        uint64_t t0 = now_ns();
        sb_match_release(seq_match(&ss, b.ns, q, k, &info));
        t_match += now_ns() - t0;
        n_disk += info.n_pages_disk;
    }
    seq_read_check(&ss, b.ns, 0, NULL, &t_rest, &n_disk_r);
    seq_read_check(&ss, b.ns, ss.n_seq - 1, NULL, &t_rest, &n_disk_r);
    bank_close(&b);
    printf("after reopen: %" PRIu64 " sequences match whole, %" PRIu64 " of %" PRIu64
           " pages on disk (%.0f ns per match); first and last restored intact\n",
           ss.n_seq, n_disk, n, (double)t_match / (double)ss.n_seq);
    if (n_disk != n) {
        fprintf(stderr, "bench_disk: after reopen %" PRIu64 " of %" PRIu64 " pages are "
                "disk pages\n", n_disk, n);
        exit(1);
    }
    rm_tree(b.dir);
    seqset_free(&ss);
}

/* ---- machine and main --------------------------------------------------------------- */

static double load_average(void)
{
    double v = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

static void print_machine(const disk_opts *o, bool fio)
{
    char line[PATH_MAX + 64], model[256] = "unknown";
    unsigned cpus = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f)) {
        char *v = strchr(line, ':');
        cpus += strncmp(line, "processor", 9) == 0;
        if (v && cpus == 1 && strncmp(line, "model name", 10) == 0)
            snprintf(model, sizeof model, "%.*s", (int)strcspn(v + 2, "\n"), v + 2);
    }
    if (f)
        fclose(f);
    printf("bench_disk -- snapbank %u.%u.%u (library %u)\n", SB_VERSION_MAJOR,
           SB_VERSION_MINOR, SB_VERSION_PATCH, sb_version());
    printf("machine: %s, %u logical CPUs online, load average %.2f at start\n", model, cpus,
           load_average());
    printf("build: %s%s, page pool %s, compiler %s\n", SB_BENCH_BUILD_TYPE,
           SB_BENCH_SANITIZE ? " + ASan/UBSan" : "",
           SB_BENCH_JEMALLOC ? "jemalloc arena" : "libc", __VERSION__);
    printf("directory: %s; its file system (df -T):\n", g_scratch);
    fflush(stdout);
    snprintf(line, sizeof line, "df -T '%s'", g_scratch); /* no ' in it: main checks */
    if (system(line) != 0)
        printf("(df failed)\n");
    printf("parameters: size %.0f MiB, page %" PRIu64 " bytes (record %" PRIu64 "), "
           "queue depth %u, open pages %" PRIu64 ", fio %s, %s\n",
           (double)o->size_bytes / MIB, o->page_bytes, o->page_bytes + REC_HEAD_BYTES,
           o->queue_depth, o->open_pages,
           o->no_fio ? "off (--no-fio)" : fio ? "in PATH" : "not found",
           o->quick ? "QUICK (smoke run, numbers not meaningful)" : "full run");
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bench_disk [options]\n"
            "  --dir D           scratch directory in D, removed at the end (/var/tmp)\n"
            "  --size N          spill payload, bytes; K/M/G suffixes (2G, --quick 64M)\n"
            "  --page-bytes N    page size, a multiple of 4096 (default 1M)\n"
            "  --queue-depth N   sb_config.queue_depth and fio iodepth (default 32)\n"
            "  --open-pages N    pages of the open store, 0: none (1000000, --quick 20000)\n"
            "  --rounds N        fresh-pool restore rounds, each beside a fio read (3, max 16)\n"
            "  --quick           smoke run: small sizes, every restored byte checked\n"
            "  --no-fio          do not run the fio baseline\n"
            "  --help            this text\n");
}

/* A byte count with an optional K, M or G suffix (powers of 1024). */
static bool parse_size(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    char *end;
    if (!s || *s < '0' || *s > '9')
        return false;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    unsigned shift = 0;
    if (*end == 'K' || *end == 'k')
        shift = 10;
    else if (*end == 'M' || *end == 'm')
        shift = 20;
    else if (*end == 'G' || *end == 'g')
        shift = 30;
    if (shift)
        end++;
    if (errno || *end || v > (hi >> shift) || (v << shift) < lo)
        return false;
    *out = (uint64_t)v << shift;
    return true;
}

int main(int argc, char **argv)
{
    disk_opts o = { .parent = "/var/tmp", .page_bytes = 1u << 20, .queue_depth = 32,
                    .rounds = 3 };
    bool set_size = false, set_open = false, set_rounds = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t x;
        if (!strcmp(a, "--quick")) {
            o.quick = true;
        } else if (!strcmp(a, "--no-fio")) {
            o.no_fio = true;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--dir") && v && *v) {
            o.parent = v;
            i++;
        } else if (!strcmp(a, "--size") && parse_size(v, 4096, 1ull << 50, &x)) {
            o.size_bytes = x;
            set_size = true;
            i++;
        } else if (!strcmp(a, "--page-bytes") && parse_size(v, 4096, SB_PAGE_BYTES_MAX, &x) &&
                   x % 4096 == 0) {
            o.page_bytes = x;
            i++;
        } else if (!strcmp(a, "--queue-depth") && parse_size(v, 1, 4096, &x)) {
            o.queue_depth = (uint32_t)x;
            i++;
        } else if (!strcmp(a, "--rounds") && parse_size(v, 1, MAX_ROUNDS, &x)) {
            o.rounds = (uint32_t)x;
            set_rounds = true;
            i++;
        } else if (!strcmp(a, "--open-pages") && parse_size(v, 0, 1ull << 32, &x)) {
            o.open_pages = x;
            set_open = true;
            i++;
        } else {
            fprintf(stderr, "bench_disk: bad argument '%s'%s%s\n", a, v ? " " : "",
                    v ? v : "");
            usage(stderr);
            return 2;
        }
    }
    if (!set_size)
        o.size_bytes = o.quick ? 64ull << 20 : 2ull << 30;
    if (!set_open)
        o.open_pages = o.quick ? 20000 : OPEN_GOAL_PAGES;
    o.seq_pages = o.quick ? 8 : 256;
    if (!set_rounds && o.quick)
        o.rounds = 1;
    if (o.size_bytes < o.page_bytes) {
        fprintf(stderr, "bench_disk: --size is less than one page\n");
        return 2;
    }
    bool fio = !o.no_fio && system("command -v fio >/dev/null 2>&1") == 0;
    if (strchr(o.parent, '\'')) { /* the fio command line quotes it with ' */
        fprintf(stderr, "bench_disk: --dir must not contain a single quote\n");
        return 2;
    }

    char tmpl[PATH_MAX];
    path_join(tmpl, o.parent, "bench_disk.XXXXXX");
    if (!mkdtemp(tmpl)) {
        fprintf(stderr, "bench_disk: mkdtemp %s: %s\n", tmpl, strerror(errno));
        return 1;
    }
    snprintf(g_scratch, sizeof g_scratch, "%s", tmpl);
    atexit(cleanup_scratch);
    print_machine(&o, fio);
    /* The spill store, the copy-mode store and fio's file coexist; the open
     * store comes after them. */
    uint64_t rec = o.size_bytes / o.page_bytes * (o.page_bytes + REC_HEAD_BYTES);
    uint64_t need = 3 * rec > o.open_pages * 8192 ? 3 * rec : o.open_pages * 8192;
    struct statvfs vfs;
    if (statvfs(g_scratch, &vfs) == 0 &&
        (double)vfs.f_bavail * (double)vfs.f_frsize < (double)need * 1.1 + (1u << 30)) {
        fprintf(stderr, "bench_disk: %s has too little free space: the run needs about "
                "%.1f GiB\n", g_scratch, ((double)need * 1.1 + (1u << 30)) / (MIB * 1024));
        return 1;
    }

    uint64_t t0 = now_ns();
    disk_res r = { .fio_write = -1, .fio_read = -1, .open_s = -1 };
    spill_restore(&o, fio, &r);
    if (o.open_pages)
        open_phase(&o, &r);

    printf("\n== Summary: snapbank device MiB/s against fio bw on the same records ==\n");
    print_ratio("spill, zero-copy commit + flush:", r.spill_dev, r.fio_write, true);
    print_ratio("spill, copy-mode put + flush:", r.put_dev, r.fio_write, false);
    for (int k = 0; k < 4; k++) {
        char what[64];
        snprintf(what, sizeof what, "restore, %s, %s pool:",
                 k % 2 ? "zero-copy" : "copy mode", k < 2 ? "fresh" : "recycled");
        print_ratio(what, r.rest_dev[k % 2][k / 2], r.fio_read, false);
    }
    if (r.fio_read > 0)
        printf("(restore lines: medians over %u rounds; fresh-pool goals on the per-round "
               "ratios below)\n", r.rounds);
    print_rounds(&r);
    if (r.open_s >= 0)
        printf("%-36s %.3f s for %" PRIu64 " pages%s\n", "open:", r.open_s, r.open_pages,
               r.open_pages < OPEN_GOAL_PAGES ? " (the goal, < 1 s, is for 1000000 pages)"
               : r.open_s < OPEN_GOAL_S * (double)r.open_pages / OPEN_GOAL_PAGES
                   ? ": goal MET (< 1 s for 1000000)" : ": goal MISSED (< 1 s for 1000000)");
    if (!fio)
        printf("(%s)\n", o.no_fio ? "fio baseline skipped: --no-fio"
                                  : "fio not found in PATH: snapbank figures only");
    printf("\ntotal run time %.1f s, load average %.2f at the end\n", secs(now_ns() - t0),
           load_average());
    return 0;
}
