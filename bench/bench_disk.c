/* bench_disk.c -- the disk tier benchmark: snapbank's spill, restore and open
 * against fio on the same file system, in one run, as ratios.
 *
 * Description: four measurements, printed as figures and, where fio ran,
 * as ratios to it.
 *
 *   1. Spill. One namespace whose pages are --page-bytes long (page_tokens
 *      16, one tensor of page_bytes / 16 bytes per token); sequences of
 *      distinct tokens totalling --size are stored with sb_ns_put, then
 *      sb_store_flush. Timed from the first put to the flush's return.
 *      Payload MiB/s counts page bytes; device MiB/s counts
 *      stats.disk_write_bytes (each page is a record of a 4 KiB head + the
 *      page, plus namespace records, superblock and summaries). The time
 *      the puts alone took is printed too: the writer thread writes while
 *      they copy, so a put path slower than the device bounds the spill.
 *      RAM budget, disk cap, write budgets and backlog are set so that
 *      nothing is throttled, denied or evicted.
 *      Sequences are 64 MiB (8 MiB with --quick).
 *   2. Restore. Close, drop the page cache of the store's files, reopen
 *      (timed: the open time of a store of --size), then sb_ns_match and
 *      sb_match_restore every sequence, one at a time, into caller buffers;
 *      the time is the sum of match + restore + release. Every restored
 *      byte is compared with what was put (untimed).
 *   3. Open. A second store of --open-pages pages of 4 KiB (page_tokens 16,
 *      256 bytes per token, 64-page sequences) is built, flushed and closed;
 *      its reopen is timed. Goal: under 1 s for 1,000,000 pages. Then every
 *      sequence must match whole from disk pages, and the first and last
 *      restore intact.
 *   4. fio baseline, when fio is in PATH: a sequential write, then a read of
 *      the same file, with ioengine=io_uring, direct=1, bs = page_bytes + 4096
 *      (the record snapbank writes per page), iodepth = --queue-depth,
 *      size = the records' bytes, in the same directory; --end_fsync=1 on
 *      the write, as the spill ends with a sync. The ratio lines compare
 *      snapbank's device MiB/s with fio's bw_bytes (goal >= 0.95). The write
 *      runs right after the spill and the read right after the restore.
 *
 * Page content is derived from the tokens: a pattern filled once, with an
 * 8-byte stamp of (sequence, position, token id) at the start of every 4 KiB
 * of every token slice, so generating a sequence costs a few stores per page
 * and a misplaced or stale page fails the byte check.
 *
 * Timing figures are printed, never asserted. Exit status: 0 success (also
 * when the disk tier is unavailable: SB_ERR_UNSUPPORTED, reported); 1 a
 * call failed, a restore returned wrong bytes or fewer tokens; 2 bad usage.
 * Dependency rule: only the public header snapbank.h.
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

/* sb_store_flush comes to snapbank.h with the disk tier. Against a library
 * without it this weak declaration still links (the call is never reached
 * there: sb_store_open refuses a directory first). Remove it together with
 * the SB_ERR_UNSUPPORTED escape in main once the tier has landed. */
extern int sb_store_flush(sb_store *st) __attribute__((weak));

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
    uint64_t seq_bytes;        /* spill sequence length, bytes (rounded to pages) */
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
 * seq_pages pages (the last may be shorter), every one of whole pages. */
typedef struct seqset {
    const char *model;         /* model identity of the namespace */
    uint32_t bpt;              /* bytes per token of the one tensor */
    size_t page_bytes;         /* PAGE_TOKENS * bpt, a multiple of 4096 */
    uint64_t n_pages;          /* pages over all sequences */
    uint64_t seq_pages;        /* pages per sequence */
    uint64_t n_seq;            /* ceil(n_pages / seq_pages) */
    uint32_t *tok;             /* (seq_pages * PAGE_TOKENS) current sequence */
    uint8_t *src;              /* (seq_pages * PAGE_TOKENS, bpt) put source */
    uint8_t *dst;              /* (seq_pages * PAGE_TOKENS, bpt) restore target */
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

/* Make sequence s in tok and src (stamping src). Returns its token count. */
static size_t seq_make(seqset *ss, uint64_t s)
{
    uint64_t first = s * ss->seq_pages, pages = ss->n_pages - first;
    size_t n = (size_t)(pages < ss->seq_pages ? pages : ss->seq_pages) * PAGE_TOKENS;
    ss->tok[0] = (uint32_t)s; /* distinct first tokens: nothing is shared */
    for (size_t i = 1; i < n; i++)
        ss->tok[i] = (uint32_t)mix64((s << 32) ^ i);
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < ss->bpt; k += 4096) {
            uint64_t v = mix64(((uint64_t)ss->tok[i] << 32) ^ (s << 40) ^ (i << 12) ^ k);
            memcpy(ss->src + i * ss->bpt + k, &v, sizeof v); /* bpt >= 256 */
        }
    return n;
}

static sb_ns *seq_ns(sb_store *st, const seqset *ss)
{
    uint32_t bpt[1] = { ss->bpt };
    sb_layout lay = { .model_id = ss->model, .model_id_bytes = strlen(ss->model),
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

/* Put every sequence. Returns the nanoseconds the puts took. */
static uint64_t seq_put_all(seqset *ss, sb_ns *ns)
{
    uint64_t t0 = now_ns();
    for (uint64_t s = 0; s < ss->n_seq; s++) {
        size_t n = seq_make(ss, s), stored = 0;
        const void *src[1] = { ss->src };
        CHECK(sb_ns_put(ns, ss->tok, n, src, NULL, &stored));
        if (stored != n)
            die("sb_ns_put stored count", (int)stored);
    }
    return now_ns() - t0;
}

/* Match sequence s (whole, or exit) and, when dst is not NULL, restore it
 * there. *t_ns grows by the time of match + restore + release, *n_disk by
 * the pages the match had on disk. Returns sb_match_restore's result. */
static int seq_match(seqset *ss, sb_ns *ns, uint64_t s, size_t n, void *dst,
                     uint64_t *t_ns, uint64_t *n_disk)
{
    void *dsts[1] = { dst };
    sb_match *m = NULL;
    sb_match_info info;
    uint64_t t0 = now_ns();
    CHECK(sb_ns_match(ns, ss->tok, n, &m));
    CHECK(sb_match_get_info(m, &info));
    int rc = info.n_tokens == n && dst ? sb_match_restore(m, n, dsts, NULL) : SB_OK;
    sb_match_release(m);
    *t_ns += now_ns() - t0;
    *n_disk += info.n_pages_disk;
    if (info.n_tokens != n) {
        fprintf(stderr, "bench_disk: %s sequence %" PRIu64 ": %zu of %zu tokens "
                "restorable (miss: %s)\n", ss->model, s, info.n_tokens, n,
                sb_miss_name(info.miss));
        exit(1);
    }
    return rc;
}

static void seq_match_check(seqset *ss, sb_ns *ns, uint64_t s, uint64_t *t_ns,
                            uint64_t *n_disk)
{
    seq_match(ss, ns, s, seq_make(ss, s), NULL, t_ns, n_disk);
}

/* Restore sequence s and check every byte (untimed). */
static void seq_restore_check(seqset *ss, sb_ns *ns, uint64_t s, uint64_t *t_ns,
                              uint64_t *n_disk)
{
    size_t n = seq_make(ss, s);
    memset(ss->dst, 0xA5, n * ss->bpt); /* poison: a byte not restored shows */
    int rc = seq_match(ss, ns, s, n, ss->dst, t_ns, n_disk);
    if (rc != SB_OK)
        die("sb_match_restore", rc);
    if (memcmp(ss->dst, ss->src, n * ss->bpt) != 0) {
        size_t i = 0;
        while (ss->dst[i] == ss->src[i])
            i++;
        fprintf(stderr, "bench_disk: %s sequence %" PRIu64 ": wrong byte at token %zu "
                "offset %zu (page %zu)\n", ss->model, s, i / ss->bpt, i % ss->bpt,
                i / ss->page_bytes);
        exit(1);
    }
}

/* ---- stores ------------------------------------------------------------------- */

static void disk_config(sb_config *cfg, const char *dir, const disk_opts *o, uint64_t ram,
                        uint64_t disk_need)
{
    sb_config_default(cfg);
    cfg->dir = dir;
    cfg->ram_bytes = ram;
    cfg->queue_depth = o->queue_depth;
    /* Room for everything, so the figures are the device's and not a cap's:
     * a disk cap with slack, every page worth writing, write budgets and a
     * backlog that cannot throttle or deny a run of this size. */
    cfg->disk_bytes = disk_need + disk_need / 4 + 4 * cfg->segment_bytes;
    cfg->min_prefix_tokens = 1;
    cfg->write_budget_bytes_per_hour = 1ull << 44;
    cfg->write_budget_burst_bytes = 1ull << 40;
    if (cfg->backlog_bytes < ram)
        cfg->backlog_bytes = ram;
}

/* One store of the run, with its one namespace and its sequences. */
typedef struct bank {
    char dir[PATH_MAX];        /* the store directory */
    sb_config cfg;             /* dir points at the field above */
    seqset ss;
    sb_store *st;              /* NULL while closed */
    sb_ns *ns;
    uint64_t t_open;           /* ns of the last sb_store_open */
} bank;

/* Open (create or reopen) the store and its namespace. Returns SB_OK, or
 * SB_ERR_UNSUPPORTED when may_refuse; other errors exit. */
static int bank_open(bank *b, bool may_refuse)
{
    uint64_t t0 = now_ns();
    int rc = sb_store_open(&b->cfg, &b->st);
    b->t_open = now_ns() - t0;
    if (rc == SB_ERR_UNSUPPORTED && may_refuse)
        return rc;
    CHECK(rc);
    b->ns = seq_ns(b->st, &b->ss);
    return SB_OK;
}

static void bank_close(bank *b)
{
    sb_ns_close(b->ns);
    CHECK(sb_store_close(b->st));
    b->st = NULL;
    b->ns = NULL;
}

/* The gauges are reported, not trusted: the restores after a reopen are
 * what checks that every page reached the disk. */
static void note_disk_pages(const char *when, const sb_stats *s, uint64_t want)
{
    if (s->disk_pages != want || s->disk_write_denials)
        printf("NOTE: %s stats.disk_pages is %" PRIu64 ", expected %" PRIu64 " (%" PRIu64
               " write denials)\n", when, s->disk_pages, want, s->disk_write_denials);
}

/* Put every sequence and flush: *t_put receives the time until the last put
 * returned, *t_all until the flush returned; *s the stats after it. Every
 * page must be on disk then, nothing denied. */
static void bank_fill(bank *b, uint64_t *t_put, uint64_t *t_all, sb_stats *s)
{
    if (!sb_store_flush) {
        fprintf(stderr, "bench_disk: sb_store_flush is not in the library\n");
        exit(1);
    }
    uint64_t t0 = now_ns();
    *t_put = seq_put_all(&b->ss, b->ns);
    CHECK(sb_store_flush(b->st));
    *t_all = now_ns() - t0;
    CHECK(sb_store_stats(b->st, s));
    note_disk_pages("after sb_store_flush", s, b->ss.n_pages);
}

/* ---- fio ---------------------------------------------------------------------- */

/* The text after the first `"key" :` at or after p (a key, not a value
 * equal to it), or NULL. */
static const char *json_key(const char *p, const char *key)
{
    size_t kl = strlen(key);
    for (p = strstr(p, key); p; p = strstr(p + kl, key)) {
        const char *q = p + kl;
        while (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r')
            q++;
        if (*q == ':')
            return q + 1;
    }
    return NULL;
}

/* bw_bytes of jobs[0].<ddir> in fio's JSON output, by string scanning: the
 * first "jobs" key, then the first "<ddir>" key (not a value such as
 * "rw" : "write"), then the first "bw_bytes" inside it, which fio prints
 * before any nested object. Returns -1 when not found. */
static double fio_bw(const char *json, const char *ddir)
{
    char key[32];
    snprintf(key, sizeof key, "\"%s\"", ddir);
    const char *p = json_key(json, "\"jobs\"");
    if (p)
        p = json_key(p, key);
    if (p)
        p = json_key(p, "\"bw_bytes\"");
    return p ? strtod(p, NULL) : -1;
}

/* Run fio once on file (rw "write" or "read"); print the command; return
 * bw_bytes, or -1 when fio failed or printed nothing we could parse. */
static double fio_run(const char *file, const char *rw, uint64_t bs, uint32_t qd,
                      uint64_t size)
{
    char cmd[PATH_MAX + 512];
    snprintf(cmd, sizeof cmd,
             "fio --name=bench_disk_%s --filename='%s' --ioengine=io_uring --direct=1 "
             "--rw=%s --bs=%" PRIu64 " --iodepth=%u --size=%" PRIu64 "%s "
             "--output-format=json", rw, file, rw, bs, qd, size,
             strcmp(rw, "write") ? "" : " --end_fsync=1");
    printf("fio command: %s\n", cmd);
    fflush(stdout);
    FILE *f = popen(cmd, "r");
    if (!f) {
        fprintf(stderr, "bench_disk: popen fio: %s\n", strerror(errno));
        return -1;
    }
    size_t cap = 1u << 20, len = 0, got; /* fio's JSON for one job is ~20 KB */
    char *buf = malloc(cap);
    while (buf && len < cap - 1 && (got = fread(buf + len, 1, cap - 1 - len, f)) > 0)
        len += got;
    int status = pclose(f);
    double bw = -1;
    if (buf) {
        buf[len] = 0;
        bw = status == 0 ? fio_bw(buf, rw) : -1;
        free(buf);
    }
    if (bw <= 0)
        fprintf(stderr, "bench_disk: fio %s failed (status %d) or gave no bw_bytes\n", rw,
                status);
    return bw > 0 ? bw : -1;
}

/* ---- the phases ------------------------------------------------------------------ */

typedef struct disk_res {
    double spill_payload, spill_dev;  /* MiB/s */
    double restore_payload, restore_dev;
    double fio_write, fio_read;       /* MiB/s; -1 when not run */
} disk_res;

static void print_ratio(const char *what, double sb, double fio)
{
    if (fio > 0)
        printf("%s: snapbank %.0f MiB/s, fio %.0f MiB/s, ratio %.3f (goal >= %.2f)\n", what,
               sb, fio, sb / fio, RATIO_GOAL);
    else
        printf("%s: snapbank %.0f MiB/s (no fio baseline)\n", what, sb);
}

/* fio write then read of the records' bytes in the scratch directory. */
static void fio_phase(const disk_opts *o, bool run, bool write, disk_res *r)
{
    if (!run)
        return;
    char file[PATH_MAX];
    path_join(file, g_scratch, "fio.dat");
    uint64_t bs = o->page_bytes + REC_HEAD_BYTES;
    uint64_t size = o->size_bytes / o->page_bytes * bs;
    double bw = fio_run(file, write ? "write" : "read", bs, o->queue_depth, size);
    if (bw > 0)
        printf("fio %s: %.0f MiB/s (%" PRIu64 " blocks of %" PRIu64 " bytes, QD %u)\n",
               write ? "write" : "read", bw / MIB, size / bs, bs, o->queue_depth);
    *(write ? &r->fio_write : &r->fio_read) = bw > 0 ? bw / MIB : -1;
    if (!write)
        unlink(file);
}

/* Phases 1 and 2 with fio interleaved (write after the spill, read after the
 * restore), so both sides see the device in a similar state. Returns
 * SB_ERR_UNSUPPORTED when the store refuses a directory, else SB_OK. */
static int spill_restore(const disk_opts *o, bool fio, disk_res *r)
{
    bank b = { .st = NULL };
    path_join(b.dir, g_scratch, "spill");
    uint64_t n_pages = o->size_bytes / o->page_bytes;
    uint64_t seq_pages = o->seq_bytes / o->page_bytes ? o->seq_bytes / o->page_bytes : 1;
    seqset_init(&b.ss, "bench-disk-spill", (uint32_t)(o->page_bytes / PAGE_TOKENS), n_pages,
                seq_pages);
    uint64_t payload = n_pages * o->page_bytes;
    disk_config(&b.cfg, b.dir, o, payload + (256ull << 20),
                n_pages * (o->page_bytes + REC_HEAD_BYTES));
    printf("\n== 1. Spill: %" PRIu64 " pages of %zu bytes in %" PRIu64 " sequences of <= %"
           PRIu64 " pages ==\n", n_pages, b.ss.page_bytes, b.ss.n_seq, b.ss.seq_pages);
    printf("config: ram_bytes %.0f MiB, segment %.0f MiB, queue_depth %u, durability %d, "
           "write_mode %d\n", (double)b.cfg.ram_bytes / MIB,
           (double)b.cfg.segment_bytes / MIB, b.cfg.queue_depth, (int)b.cfg.durability,
           (int)b.cfg.write_mode);
    if (bank_open(&b, true) == SB_ERR_UNSUPPORTED) {
        seqset_free(&b.ss);
        return SB_ERR_UNSUPPORTED;
    }
    uint64_t t_put, t_spill, t_new = b.t_open;
    sb_stats s, s0;
    bank_fill(&b, &t_put, &t_spill, &s);
    uint64_t t1 = now_ns();
    bank_close(&b);
    r->spill_payload = (double)payload / MIB / secs(t_spill);
    r->spill_dev = (double)s.disk_write_bytes / MIB / secs(t_spill);
    printf("puts returned after %.3f s, flush after %.3f s: payload %.0f MiB/s, device "
           "%.0f MiB/s (%.1f MiB written for %.1f MiB of pages)\n", secs(t_put),
           secs(t_spill), r->spill_payload, r->spill_dev, (double)s.disk_write_bytes / MIB,
           (double)payload / MIB);
    printf("store open (new) %.3f ms, close %.3f ms\n", (double)t_new / 1e6,
           (double)(now_ns() - t1) / 1e6);
    fio_phase(o, fio, true, r);

    printf("\n== 2. Restore: reopen, match and restore every sequence ==\n");
    dir_each(b.dir, drop_cache_file); /* segments, summaries, superblock */
    bank_open(&b, false);
    CHECK(sb_store_stats(b.st, &s0));
    uint64_t t_rest = 0, n_disk = 0;
    for (uint64_t q = 0; q < b.ss.n_seq; q++)
        seq_restore_check(&b.ss, b.ns, q, &t_rest, &n_disk);
    CHECK(sb_store_stats(b.st, &s));
    bank_close(&b);
    uint64_t rd = s.disk_read_bytes - s0.disk_read_bytes;
    r->restore_payload = (double)payload / MIB / secs(t_rest);
    r->restore_dev = (double)rd / MIB / secs(t_rest);
    printf("reopen of %" PRIu64 " pages: %.3f ms\n", n_pages, (double)b.t_open / 1e6);
    note_disk_pages("after reopen", &s0, n_pages);
    printf("restore %.3f s: payload %.0f MiB/s, device %.0f MiB/s (%.1f MiB read); "
           "%" PRIu64 " of %" PRIu64 " pages came from disk; every byte checked\n",
           secs(t_rest), r->restore_payload, r->restore_dev, (double)rd / MIB, n_disk,
           n_pages);
    if (n_disk != n_pages)
        printf("WARNING: not every page was read from disk: the restore figure is "
               "not a disk figure\n");
    rm_tree(b.dir);
    fio_phase(o, fio, false, r);
    seqset_free(&b.ss);
    return SB_OK;
}

/* Phase 3: reopen time of a store of many small pages. */
static void open_phase(const disk_opts *o)
{
    bank b = { .st = NULL };
    path_join(b.dir, g_scratch, "open");
    seqset_init(&b.ss, "bench-disk-open", OPEN_BPT, o->open_pages, 64);
    uint64_t n = b.ss.n_pages;
    disk_config(&b.cfg, b.dir, o, n * b.ss.page_bytes + (256ull << 20),
                n * (b.ss.page_bytes + REC_HEAD_BYTES));
    printf("\n== 3. Open: %" PRIu64 " pages of %zu bytes in %" PRIu64 " sequences ==\n", n,
           b.ss.page_bytes, b.ss.n_seq);
    uint64_t t_put, t_build;
    sb_stats s;
    bank_open(&b, false);
    bank_fill(&b, &t_put, &t_build, &s);
    bank_close(&b);
    printf("build (put + flush) %.3f s: %.0f pages/s, device %.0f MiB/s\n",
           secs(t_build), (double)n / secs(t_build),
           (double)s.disk_write_bytes / MIB / secs(t_build));

    dir_each(b.dir, drop_cache_file); /* segments, summaries, superblock */
    bank_open(&b, false);
    CHECK(sb_store_stats(b.st, &s));
    note_disk_pages("after reopen", &s, n);
    double t = secs(b.t_open);
    printf("reopen %.3f s: %.0f pages/s", t, (double)n / t);
    if (n >= OPEN_GOAL_PAGES)
        printf("; GOAL: < %.0f s for %u pages: %s\n", OPEN_GOAL_S, OPEN_GOAL_PAGES,
               t * OPEN_GOAL_PAGES / (double)n < OPEN_GOAL_S ? "MET" : "MISSED");
    else
        printf(" (the goal, < %.0f s, is for %u pages)\n", OPEN_GOAL_S, OPEN_GOAL_PAGES);
    /* Every sequence matches whole from disk pages; the first and the last
     * restore intact. */
    uint64_t t_match = 0, n_disk = 0;
    for (uint64_t q = 0; q < b.ss.n_seq; q++)
        seq_match_check(&b.ss, b.ns, q, &t_match, &n_disk);
    uint64_t t_rest = 0, n_disk_r = 0;
    seq_restore_check(&b.ss, b.ns, 0, &t_rest, &n_disk_r);
    seq_restore_check(&b.ss, b.ns, b.ss.n_seq - 1, &t_rest, &n_disk_r);
    bank_close(&b);
    printf("after reopen: %" PRIu64 " sequences match whole, %" PRIu64 " of %" PRIu64
           " pages on disk (%.0f ns per match); first and last restored intact\n",
           b.ss.n_seq, n_disk, n, (double)t_match / (double)b.ss.n_seq);
    if (n_disk != n) {
        fprintf(stderr, "bench_disk: after reopen %" PRIu64 " of %" PRIu64 " pages are "
                "disk pages\n", n_disk, n);
        exit(1);
    }
    rm_tree(b.dir);
    seqset_free(&b.ss);
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

/* The device and file system type of the mount holding path: the last
 * mount in /proc/mounts whose mount point is on the same device. */
static void mount_of(const char *path, char dev[PATH_MAX], char type[64])
{
    char line[PATH_MAX * 2 + 128], d[PATH_MAX], m[PATH_MAX], t[64];
    struct stat want, sb;
    strcpy(dev, "?");
    strcpy(type, "?");
    FILE *f = stat(path, &want) == 0 ? fopen("/proc/mounts", "r") : NULL;
    while (f && fgets(line, sizeof line, f)) {
        if (sscanf(line, "%4095s %4095s %63s", d, m, t) == 3 && stat(m, &sb) == 0 &&
            sb.st_dev == want.st_dev) {
            strcpy(dev, d);
            strcpy(type, t);
        }
    }
    if (f)
        fclose(f);
}

static void print_machine(const disk_opts *o, bool fio)
{
    char line[512], model[256] = "unknown", dev[PATH_MAX], fstype[64];
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
    struct statvfs vfs;
    double free_gib = statvfs(g_scratch, &vfs) == 0
                          ? (double)vfs.f_bavail * (double)vfs.f_frsize / (MIB * 1024) : -1;
    mount_of(g_scratch, dev, fstype);
    printf("bench_disk -- snapbank %u.%u.%u (library %u)\n", SB_VERSION_MAJOR,
           SB_VERSION_MINOR, SB_VERSION_PATCH, sb_version());
    printf("machine: %s, %u logical CPUs online, load average %.2f at start\n", model, cpus,
           load_average());
    printf("build: %s%s, page pool %s, compiler %s\n", SB_BENCH_BUILD_TYPE,
           SB_BENCH_SANITIZE ? " + ASan/UBSan" : "",
           SB_BENCH_JEMALLOC ? "jemalloc arena" : "libc", __VERSION__);
    printf("directory: %s on %s (%s), %.1f GiB free\n", g_scratch, dev, fstype, free_gib);
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
            "  --dir D           make the scratch directory in D (default /var/tmp);\n"
            "                    it is removed at the end\n"
            "  --size N          spill payload, bytes; K/M/G suffixes (default 2G,\n"
            "                    --quick 64M)\n"
            "  --page-bytes N    page size, a multiple of 4096 (default 1M)\n"
            "  --queue-depth N   sb_config.queue_depth and fio iodepth (default 32)\n"
            "  --open-pages N    pages of the open-time store; 0 skips it (default\n"
            "                    1000000, --quick 20000)\n"
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
    disk_opts o = { .parent = "/var/tmp", .page_bytes = 1u << 20, .queue_depth = 32 };
    bool set_size = false, set_open = false;
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
    o.seq_bytes = o.quick ? 8ull << 20 : 64ull << 20;
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
    /* The spill store and fio's file coexist; the open store comes after. */
    uint64_t rec = o.size_bytes / o.page_bytes * (o.page_bytes + REC_HEAD_BYTES);
    uint64_t need = 2 * rec > o.open_pages * 8192 ? 2 * rec : o.open_pages * 8192;
    struct statvfs vfs;
    if (statvfs(g_scratch, &vfs) == 0 &&
        (double)vfs.f_bavail * (double)vfs.f_frsize < (double)need * 1.1 + (1u << 30)) {
        fprintf(stderr, "bench_disk: %s has too little free space: the run needs about "
                "%.1f GiB\n", g_scratch, ((double)need * 1.1 + (1u << 30)) / (MIB * 1024));
        return 1;
    }

    uint64_t t0 = now_ns();
    disk_res r = { .fio_write = -1, .fio_read = -1 };
    if (spill_restore(&o, fio, &r) == SB_ERR_UNSUPPORTED) {
        /* The disk tier is being built: until it lands, say so and pass. */
        printf("bench_disk: disk tier unavailable: sb_store_open with a directory "
               "returns SB_ERR_UNSUPPORTED (%s); nothing of snapbank measured\n",
               sb_strerror(SB_ERR_UNSUPPORTED));
        if (!o.quick && fio) {
            printf("\n== fio baseline alone ==\n");
            fio_phase(&o, true, true, &r);
            fio_phase(&o, true, false, &r);
        }
        return 0;
    }
    if (o.open_pages)
        open_phase(&o);

    printf("\n== Summary: snapbank device MiB/s against fio bw on the same records ==\n");
    print_ratio("spill", r.spill_dev, r.fio_write);
    print_ratio("restore", r.restore_dev, r.fio_read);
    if (!fio)
        printf("(%s)\n", o.no_fio ? "fio baseline skipped: --no-fio"
                                  : "fio not found in PATH: snapbank figures only");
    printf("\ntotal run time %.1f s, load average %.2f at the end\n", secs(now_ns() - t0),
           load_average());
    return 0;
}
