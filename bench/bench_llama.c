/* bench_llama.c -- the llama.cpp connector beside llama.cpp's own paths, in
 * one run on one model: time to first token of a prompt of N tokens
 *
 *   cold     llama.cpp prefills all N tokens (batches of 2,048)
 *   ram      the connector restores N - 1 tokens from the store's RAM
 *   disk     ... from the disk tier after a restart (store closed and
 *            reopened, its files dropped from the page cache)
 *   shared   ... from the shared tier on a second store (--shared URL)
 *   file     llama.cpp's own llama_state_seq_load_file of the same N - 1
 *            tokens (the file dropped from the page cache)
 *
 * each warm path then decoding token N for its logits; and a 20-turn chat:
 * what each turn's save costs beside that turn's decode (prefill of the new
 * tokens and generation), and the disk tier's write amplification over
 * the conversation (bytes written / bytes of the K and V kept), saving
 * every token and saving whole pages only (sb_llama_config.whole_pages).
 *
 * Description: makes the `small` preset model (F16, dim 768, 12 layers,
 * 12/4 heads; context 33,792) with make-model's library unless --model is
 * given; medians over --rounds rounds of each warm path (cold once per
 * size above 8,192 tokens), paths alternated within a round. The page
 * cache is dropped per file (fsync, then POSIX_FADV_DONTNEED) so the model's
 * own mapped weights stay cached. --quick: 512 tokens and 3 chat turns,
 * every restore checked to restore what it should (the smoke run).
 *
 * Usage: bench_llama [--model FILE] [--sizes N,N,...] [--rounds R]
 *                    [--threads T] [--turns T] [--page-tokens N]
 *                    [--shared redis://H:P,...]
 *                    [--dir DIR] [--quick] */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ggml-backend.h"
#include "llama.h"
#include "snapbank_llama.h"

#include "make_model/make_model.h"

#define BENCH_NAME "bench_llama"
#include "bench_util.h"

#define MAX_SIZES 8
#define MAX_ROUNDS 9

static int threads = 2;
static uint32_t page_tokens; /* 0: the connector's default */
static const char *shared_seeds; /* --shared's, past the scheme */
static char dir[512];

static void quiet(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (level >= GGML_LOG_LEVEL_ERROR)
        fputs(text, stderr);
}

static void die(const char *what)
{
    fprintf(stderr, BENCH_NAME ": %s\n", what);
    exit(1);
}

/* fsync and drop one file's pages from the page cache. */
static void drop_file(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
}

static int drop_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)ftw;
    if (flag == FTW_F)
        drop_file(path);
    return 0;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static void rm_tree(const char *path)
{
    nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void decode(struct llama_context *ctx, const llama_token *t, int n, int pos0)
{
    int step = (int)llama_n_batch(ctx);
    for (int i = 0; i < n; i += step) {
        int m = n - i < step ? n - i : step;
        struct llama_batch b = llama_batch_init(m, 0, 1);
        for (int j = 0; j < m; j++) {
            b.token[j] = t[i + j];
            b.pos[j] = pos0 + i + j;
            b.n_seq_id[j] = 1;
            b.seq_id[j][0] = 0;
            b.logits[j] = i + j == n - 1;
        }
        b.n_tokens = m;
        int rc = llama_decode(ctx, b);
        if (rc != 0) {
            fprintf(stderr, BENCH_NAME ": llama_decode of %d tokens at %d: %d\n", m, pos0 + i,
                    rc);
            exit(1);
        }
        llama_batch_free(b);
    }
}

static sb_store *open_store(const char *store_dir, const char *seeds)
{
    sb_config c;
    sb_config_default(&c);
    c.ram_bytes = 8ull << 30;
    c.dir = store_dir;
    c.min_prefix_tokens = 1;
    c.shared_seeds = seeds;
    c.shared_timeout_ms = 10000;
    sb_store *st = NULL;
    check(sb_store_open(&c, &st), "sb_store_open");
    return st;
}

static sb_llama *attach_with(sb_store *st, struct llama_context *ctx,
                             const struct llama_context_params *cp, const char *model,
                             double *ms, int whole_pages)
{
    sb_llama_config c;
    sb_llama_config_default(&c);
    c.page_tokens = page_tokens;
    c.whole_pages = whole_pages;
    c.model_path = model;
    c.cparams = cp;
    c.scratch_seq = 1;
    sb_llama *sl = NULL;
    char err[256];
    llama_memory_seq_rm(llama_get_memory(ctx), 0, -1, -1); /* the probe's */
    double t0 = now_s();
    if (sb_llama_attach(st, ctx, &c, &sl, err, sizeof err) != SB_OK)
        die(err);
    if (ms)
        *ms = (now_s() - t0) * 1e3;
    return sl;
}

static sb_llama *attach(sb_store *st, struct llama_context *ctx,
                        const struct llama_context_params *cp, const char *model, double *ms)
{
    return attach_with(st, ctx, cp, model, ms, 0);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Restore n - 1 tokens through sl and decode the last: ms to its logits. */
static double warm(sb_llama *sl, struct llama_context *ctx, const llama_token *t, int n,
                   size_t *ram, size_t *disk, size_t *remote, const char *what, size_t expect)
{
    llama_memory_seq_rm(llama_get_memory(ctx), 0, -1, -1);
    double t0 = now_s();
    sb_llama_restore_info ri;
    check(sb_llama_restore(sl, 0, t, (size_t)n, (size_t)n - 1, &ri), "sb_llama_restore");
    decode(ctx, t + ri.n_restored, n - (int)ri.n_restored, (int)ri.n_restored);
    double ms = (now_s() - t0) * 1e3;
    if (ri.n_restored != expect) {
        /* a tier that holds less is a result (the shared tier's pool may
         * not have taken every page); RAM and disk must hold it all */
        fprintf(stderr, BENCH_NAME ": %s restored %zu of %d tokens, not %zu\n", what,
                ri.n_restored, n - 1, expect);
        if (strcmp(what, "shared") != 0)
            exit(1);
    }
    *ram = ri.tokens_ram, *disk = ri.tokens_disk, *remote = ri.tokens_remote;
    fprintf(stderr, "  %d tokens from %s: %.1f ms = bank %.1f + llama.cpp set %.1f + the "
            "rest (decode of the last token) %.1f\n", n, what, ms, ri.bank_ms, ri.set_ms,
            ms - ri.bank_ms - ri.set_ms);
    return ms;
}

/* One prompt size: every path, `rounds` times. */
static void ttft(const char *model, int n, int rounds)
{
    struct llama_model *m = llama_model_load_from_file(model, llama_model_default_params());
    if (!m)
        die("llama.cpp could not load the model");
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)(n + 255) / 256 * 256 + 256;
    cp.n_batch = 2048;
    cp.n_ubatch = 512;
    cp.n_seq_max = 2; /* seq 1: the connector's scratch, in one unified cache */
    cp.kv_unified = true;
    cp.n_threads = cp.n_threads_batch = threads;
    struct llama_context *ctx = llama_init_from_model(m, cp);
    if (!ctx)
        die("llama.cpp could not make a context that large");
    llama_memory_t mem = llama_get_memory(ctx);
    int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(m));
    llama_token *t = malloc((size_t)n * sizeof *t);
    for (int i = 0; i < n; i++)
        t[i] = 3 + (llama_token)(mix((uint64_t)n * 1000003u + (uint64_t)i) % (uint64_t)(n_vocab - 3));

    char store_dir[600], file[600];
    snprintf(store_dir, sizeof store_dir, "%s/store-%d", dir, n);
    snprintf(file, sizeof file, "%s/seq-%d.bin", dir, n);
    rm_tree(store_dir);
    sb_store *st = open_store(store_dir, NULL);
    double attach_ms;
    sb_llama *sl = attach(st, ctx, &cp, model, &attach_ms);
    sb_llama_info info;
    sb_llama_get_info(sl, &info);

    double cold[MAX_ROUNDS], ram[MAX_ROUNDS], disk[MAX_ROUNDS], shr[MAX_ROUNDS], fil[MAX_ROUNDS];
    int cold_rounds = n > 8192 ? 1 : rounds;
    size_t r_ram = 0, r_disk = 0, r_remote = 0;
    double save_ms = 0;
    uint64_t state_bytes = 0;
    for (int r = 0; r < cold_rounds; r++) {
        llama_memory_seq_rm(mem, 0, -1, -1);
        double t0 = now_s();
        decode(ctx, t, n, 0);
        cold[r] = (now_s() - t0) * 1e3;
    }
    /* the state of n - 1 tokens, into the bank and into llama.cpp's file */
    llama_memory_seq_rm(mem, 0, n - 1, -1);
    sb_llama_save_info si;
    check(sb_llama_save(sl, 0, t, (size_t)n - 1, &si), "sb_llama_save");
    save_ms = si.save_ms;
    state_bytes = si.bytes_exported;
    check(sb_store_flush(st), "sb_store_flush");
    if (llama_state_seq_save_file(ctx, file, 0, t, (size_t)n - 1) == 0)
        die("llama_state_seq_save_file failed");
    struct stat fst;
    stat(file, &fst);

    sb_store *sa = NULL, *sb2 = NULL;
    sb_llama *la = NULL, *lb = NULL;
    if (shared_seeds) {
        sa = open_store(NULL, shared_seeds);
        la = attach(sa, ctx, &cp, model, NULL);
        /* the same state, from the first store (exact to the bit, and no
         * second cold prefill) */
        llama_memory_seq_rm(mem, 0, -1, -1);
        sb_llama_restore_info ri;
        check(sb_llama_restore(sl, 0, t, (size_t)n - 1, (size_t)n - 1, &ri),
              "sb_llama_restore (for the shared store)");
        if (ri.n_restored != (size_t)n - 1)
            die("the first store did not restore the whole state");
        check(sb_llama_save(la, 0, t, (size_t)n - 1, NULL), "sb_llama_save (shared)");
        check(sb_store_flush(sa), "sb_store_flush (shared)");
    }
    for (int r = 0; r < rounds; r++) {
        size_t a, b, c;
        ram[r] = warm(sl, ctx, t, n, &a, &b, &c, "ram", (size_t)n - 1);
        r_ram = a;
        /* llama.cpp's file, out of the page cache */
        drop_file(file);
        llama_memory_seq_rm(mem, 0, -1, -1);
        double t0 = now_s();
        size_t got = 0;
        if (llama_state_seq_load_file(ctx, file, 0, t, (size_t)n, &got) == 0 || got != (size_t)n - 1)
            die("llama_state_seq_load_file failed");
        decode(ctx, t + n - 1, 1, n - 1);
        fil[r] = (now_s() - t0) * 1e3;
        /* a restart: the store closed, its files out of the page cache */
        sb_llama_detach(sl);
        check(sb_store_close(st), "sb_store_close");
        nftw(store_dir, drop_one, 16, FTW_PHYS);
        st = open_store(store_dir, NULL);
        sl = attach(st, ctx, &cp, model, NULL);
        disk[r] = warm(sl, ctx, t, n, &a, &b, &c, "disk", (size_t)n - 1);
        r_disk = b;
        if (shared_seeds) {
            /* a second machine: a fresh store on the same pool each round */
            sb_llama_detach(lb);
            if (sb2)
                check(sb_store_close(sb2), "sb_store_close");
            sb2 = open_store(NULL, shared_seeds);
            lb = attach(sb2, ctx, &cp, model, NULL);
            /* the shared tier holds whole pages only */
            shr[r] = warm(lb, ctx, t, n, &a, &b, &c, "shared",
                          (size_t)(n - 1) / info.page_tokens * info.page_tokens);
            r_remote = c;
        }
    }
    double mc = median(cold, cold_rounds), mr = median(ram, rounds), md = median(disk, rounds),
           mf = median(fil, rounds), ms = shared_seeds ? median(shr, rounds) : 0;
    printf("| %d | %.0f | %.1f | %.1f | %s | %.1f | %.2fx | %.0fx | %.0fx |\n", n, mc, mr, md,
           shared_seeds ? "" : "-", mf, mf / md, mc / md, mc / mr);
    if (shared_seeds)
        printf("|   shared tier: %.1f ms (%zu tokens fetched) |\n", ms, r_remote);
    fprintf(stderr, "  %d tokens: state %.1f MiB (llama.cpp file %.1f MiB), save %.1f ms, "
            "attach %.0f ms (model digest included); restored from ram %zu, disk %zu\n", n,
            state_bytes / 1048576.0, fst.st_size / 1048576.0, save_ms, attach_ms, r_ram, r_disk);
    sb_llama_detach(sl);
    check(sb_store_close(st), "sb_store_close");
    sb_llama_detach(la);
    sb_llama_detach(lb);
    if (sa)
        check(sb_store_close(sa), "sb_store_close");
    if (sb2)
        check(sb_store_close(sb2), "sb_store_close");
    rm_tree(store_dir);
    remove(file);
    free(t);
    llama_free(ctx);
    llama_model_free(m);
}

/* A chat: a system prompt of 1,000 tokens, then per turn 200 user tokens
 * and 64 generated ones, the sequence saved after each turn. */
static void chat(const char *model, int turns, int whole_pages)
{
    struct llama_model *m = llama_model_load_from_file(model, llama_model_default_params());
    struct llama_context_params cp = llama_context_default_params();
    const int sys = 1000, user = 200, gen = 64;
    int total = sys + turns * (user + gen);
    cp.n_ctx = (uint32_t)(total + 511) / 256 * 256;
    cp.n_batch = 2048;
    cp.n_seq_max = 2; /* seq 1: the connector's scratch, in one unified cache */
    cp.kv_unified = true;
    cp.n_threads = cp.n_threads_batch = threads;
    struct llama_context *ctx = llama_init_from_model(m, cp);
    if (!m || !ctx)
        die("llama.cpp could not load the model");
    int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(m));
    char store_dir[600];
    snprintf(store_dir, sizeof store_dir, "%s/store-chat", dir);
    rm_tree(store_dir);
    sb_store *st = open_store(store_dir, NULL);
    sb_llama *sl = attach_with(st, ctx, &cp, model, NULL, whole_pages);
    sb_llama_info info;
    sb_llama_get_info(sl, &info);
    llama_token *t = malloc((size_t)total * sizeof *t);
    int n = 0;
    double decode_s = 0, save_ms = 0, worst = 0;
    uint64_t exported = 0;
    for (int turn = 0; turn < turns; turn++) {
        int add = (turn == 0 ? sys : 0) + user;
        for (int i = 0; i < add; i++)
            t[n + i] = 3 + (llama_token)(mix((uint64_t)(n + i) * 7919u) % (uint64_t)(n_vocab - 3));
        double t0 = now_s();
        decode(ctx, t + n, add, n);
        n += add;
        for (int g = 0; g < gen; g++) { /* greedy */
            const float *l = llama_get_logits_ith(ctx, -1);
            int best = 0;
            for (int v = 1; v < n_vocab; v++)
                if (l[v] > l[best])
                    best = v;
            t[n] = best;
            decode(ctx, t + n, 1, n);
            n++;
        }
        double turn_s = now_s() - t0;
        decode_s += turn_s;
        sb_llama_save_info si;
        check(sb_llama_save(sl, 0, t, (size_t)n, &si), "sb_llama_save");
        save_ms += si.save_ms;
        exported += si.bytes_exported;
        if (si.save_ms / (turn_s * 1e3) > worst)
            worst = si.save_ms / (turn_s * 1e3);
    }
    check(sb_store_flush(st), "sb_store_flush");
    sb_stats s;
    check(sb_store_stats(st, &s), "sb_store_stats");
    double kept = (double)n * (double)info.bytes_per_token;
    fprintf(stderr, "  disk: logical %.1f MiB, heads %.1f, padding %.1f, summaries %.1f, "
            "other %.1f; pages superseded %llu\n", s.disk_logical_bytes / 1048576.0,
            s.disk_head_bytes / 1048576.0, s.disk_padding_bytes / 1048576.0,
            s.disk_summary_bytes / 1048576.0,
            (s.disk_superblock_bytes + s.disk_ns_record_bytes) / 1048576.0,
            (unsigned long long)s.pages_superseded);
    printf("| %d turns, %d tokens, pages of %u%s | %.1f s | %.1f ms | %.2f%% (worst turn %.2f%%) | %.1f MiB | "
           "%.1f MiB | %.3f |\n", turns, n, info.page_tokens,
           whole_pages ? ", whole pages only" : "", decode_s, save_ms, 100 * save_ms / (decode_s * 1e3),
           100 * worst, exported / 1048576.0, s.disk_write_bytes / 1048576.0,
           s.disk_write_bytes / kept);
    sb_llama_detach(sl);
    check(sb_store_close(st), "sb_store_close");
    rm_tree(store_dir);
    free(t);
    llama_free(ctx);
    llama_model_free(m);
}

int main(int argc, char **argv)
{
    const char *model = NULL;
    int sizes[MAX_SIZES] = { 2048, 8000, 32000 }, n_sizes = 3, rounds = 3, turns = 20;
    int quick = 0;
    snprintf(dir, sizeof dir, "/var/tmp/bench_llama");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quick")) {
            quick = 1;
        } else if (!strcmp(a, "--model") && v) {
            model = v, i++;
        } else if (!strcmp(a, "--rounds") && v) {
            rounds = atoi(v), i++;
        } else if (!strcmp(a, "--threads") && v) {
            threads = atoi(v), i++;
        } else if (!strcmp(a, "--page-tokens") && v) {
            page_tokens = (uint32_t)atoi(v), i++;
        } else if (!strcmp(a, "--turns") && v) {
            turns = atoi(v), i++;
        } else if (!strcmp(a, "--shared") && v) {
            shared_seeds = strstr(v, "://") ? strstr(v, "://") + 3 : v, i++;
        } else if (!strcmp(a, "--dir") && v) {
            snprintf(dir, sizeof dir, "%s", v), i++;
        } else if (!strcmp(a, "--sizes") && v) {
            n_sizes = 0;
            for (char *p = (char *)v; *p && n_sizes < MAX_SIZES; p++) {
                sizes[n_sizes++] = (int)strtol(p, &p, 10);
                if (*p != ',')
                    break;
            }
            i++;
        } else {
            fprintf(stderr, "usage: bench_llama [--model FILE] [--sizes N,N,...] [--rounds R] "
                    "[--threads T] [--turns T] [--page-tokens N] [--shared redis://H:P,...] "
                    "[--dir DIR] "
                    "[--quick]\n");
            return 2;
        }
    }
    if (rounds < 1 || rounds > MAX_ROUNDS || turns < 1)
        die("--rounds is 1 .. 9, --turns at least 1");
    if (quick) {
        sizes[0] = 512, n_sizes = 1, rounds = 1, turns = 3;
    }
    for (int i = 0; i < n_sizes; i++)
        if (sizes[i] < 2)
            die("a size is at least 2 tokens");
    mkdir(dir, 0755);
    llama_log_set(quiet, NULL);
    ggml_backend_load_all_from_path(SB_LLAMA_BACKEND_DIR);
    llama_backend_init();
    char made[600];
    if (!model) {
        sb_rt_make_opts o;
        sb_rt_make_opts_preset(&o, quick ? "tiny" : "small");
        sb_rt_make_opts_set(&o, "ctx", "33792");
        snprintf(made, sizeof made, "%s/model-%s.gguf", dir, quick ? "tiny" : "small");
        sb_rt_err err;
        if (sb_rt_make_model(&o, made, &err) != SB_OK)
            die("make-model failed");
        model = made;
    }
    printf("bench_llama: %s, %d threads, load average %.1f\n\n", model, threads, load_average());
    printf("| tokens | cold ms | ram ms | disk ms (restart) | shared ms | llama.cpp file ms "
           "| file / disk | cold / disk | cold / ram |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < n_sizes; i++)
        ttft(model, sizes[i], rounds);
    printf("\n| chat | decode | saves | save / decode | exported | disk written | "
           "write amplification |\n|---|---:|---:|---:|---:|---:|---:|\n");
    chat(model, turns, 0);
    chat(model, turns, 1);
    llama_backend_free();
    return 0;
}
