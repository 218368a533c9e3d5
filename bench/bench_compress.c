/* bench_compress.c -- what zstd compression (sb_config.compress_level) does
 * to KV pages of the runtime's `small` model: the ratio, and what it costs
 * in write and restore throughput, side by side with no compression.
 *
 * Description: makes the `small` preset model (F16 weights and KV; --quick:
 * `tiny`) in --dir (default /var/tmp), prefills a prompt of --tokens (2048;
 * --quick 128) from a fixed generator into an in-RAM bank, and restores the
 * KV state out of it. Then, for each level (0, 1, 3, 9; --levels a,b,..):
 * a fresh disk store in --dir puts that state under --copies (4) token
 * sequences (they differ in their first token, so each is written) and
 * flushes: the time from the first put to the end of the flush is the
 * write time. The store is closed and opened again with an empty RAM tier,
 * and every copy is restored from disk and compared with the original
 * byte for byte: that time is the restore time. The KV layout is flagged
 * SB_LAYOUT_ELEM16, so its pages are byte-shuffled before compression.
 *
 * Prints per level: the payload ratio (bytes before / after, over the
 * records stored compressed), records stored raw, device bytes, write and
 * restore throughput in MiB/s of KV state, and each as a ratio to level 0
 * of the same run. Exit status: 0; 1 a call failed or a restore differed;
 * 2 bad usage. Figures are printed, never asserted.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "model/forward.h"
#include "model/kv.h"
#include "make_model/make_model.h"
#include "model/model.h"

#define BENCH_NAME "bench_compress"
#include "bench_util.h"

typedef struct result {
    uint32_t level;
    sb_stats s;
    double write_s, restore_s;
} result;

/* The state of n tokens: one buffer per tensor. */
typedef struct state {
    uint32_t n_tensors;
    uint32_t bpt[2 * SB_RT_MAX_LAYERS];
    void *t[2 * SB_RT_MAX_LAYERS];
} state;

static result run(const char *dir, uint32_t level, const sb_layout *layout, const state *kv,
                  const uint32_t *tok, size_t n, unsigned copies, state *out)
{
    char path[512];
    snprintf(path, sizeof path, "%s/snapbank-bench-compress-%ld-%u", dir, (long)getpid(), level);
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.dir = path;
    cfg.min_prefix_tokens = 1;
    cfg.compress_level = level;
    cfg.ram_bytes = 1ull << 30;
    cfg.segment_bytes = 64u << 20;
    cfg.disk_free_floor_bytes = 0;
    cfg.max_seq_tokens = (uint32_t)n;
    result r = { .level = level };
    uint32_t *t = malloc(n * sizeof *t);
    if (!t)
        check(SB_ERR_NOMEM, "malloc");
    memcpy(t, tok, n * sizeof *t);

    sb_store *st = NULL;
    sb_ns *ns = NULL;
    check(sb_store_open(&cfg, &st), "open");
    check(sb_ns_open(st, layout, NULL, 0, &ns), "namespace");
    double t0 = now_s();
    for (unsigned c = 0; c < copies; c++) {
        t[0] = (uint32_t)c; /* a sequence of its own */
        check(sb_ns_put(ns, t, n, (const void *const *)kv->t, NULL, NULL), "put");
    }
    check(sb_store_flush(st), "flush");
    r.write_s = now_s() - t0;
    check(sb_store_stats(st, &r.s), "stats");
    sb_ns_close(ns);
    sb_store_close(st);

    check(sb_store_open(&cfg, &st), "reopen");
    check(sb_ns_open(st, layout, NULL, 0, &ns), "namespace");
    t0 = now_s();
    for (unsigned c = 0; c < copies; c++) {
        t[0] = (uint32_t)c;
        sb_match *m = NULL;
        check(sb_ns_match(ns, t, n, &m), "match");
        check(sb_match_restore(m, n, out->t, NULL), "restore");
        sb_match_release(m);
        /* every copy holds the original's bytes under other keys */
        for (uint32_t k = 0; k < kv->n_tensors; k++)
            if (memcmp(out->t[k], kv->t[k], n * kv->bpt[k])) {
                fprintf(stderr, "bench_compress: level %u: copy %u restored wrong bytes\n",
                        level, c);
                exit(1);
            }
    }
    r.restore_s = now_s() - t0;
    sb_ns_close(ns);
    sb_store_close(st);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd) != 0)
        fprintf(stderr, "bench_compress: could not remove %s\n", path);
    free(t);
    return r;
}

int main(int argc, char **argv)
{
    const char *dir = "/var/tmp", *levels_arg = "0,1,3,9";
    size_t n = 2048;
    unsigned copies = 4;
    int quick = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quick")) {
            quick = 1;
        } else if (!strcmp(a, "--dir") && v) {
            dir = v, i++;
        } else if (!strcmp(a, "--levels") && v) {
            levels_arg = v, i++;
        } else if (!strcmp(a, "--tokens") && v && atoi(v) >= 16) {
            n = (size_t)atoi(v), i++;
        } else if (!strcmp(a, "--copies") && v && atoi(v) > 0 && atoi(v) <= 64) {
            copies = (unsigned)atoi(v), i++;
        } else {
            fprintf(stderr, "usage: bench_compress [--quick] [--dir D] [--levels 0,1,3,9] "
                            "[--tokens N] [--copies N]\n");
            return 2;
        }
    }
    uint32_t levels[16];
    unsigned n_levels = 0;
    for (const char *p = levels_arg; *p && n_levels < 16;) {
        char *end;
        long l = strtol(p, &end, 10);
        if (end == p || l < 0 || l > 22) {
            fprintf(stderr, "bench_compress: --levels: 0 to 22, comma separated\n");
            return 2;
        }
        levels[n_levels++] = (uint32_t)l;
        p = *end == ',' ? end + 1 : end;
    }
    if (!n_levels || levels[0] != 0) {
        fprintf(stderr, "bench_compress: --levels must start with 0 (the baseline)\n");
        return 2;
    }
    const char *preset = quick ? "tiny" : "small";
    if (quick)
        n = 128;

    char path[4096];
    snprintf(path, sizeof path, "%s/bench_compress.%ld.gguf", dir, (long)getpid());
    sb_rt_make_opts mo;
    sb_rt_make_opts_preset(&mo, preset);
    sb_rt_err err = { 0 };
    if (sb_rt_make_model(&mo, path, &err) != SB_OK) {
        fprintf(stderr, "bench_compress: make-model: %s\n", err.msg);
        return 1;
    }
    sb_rt_model *m = NULL;
    int rc = sb_rt_model_load(path, &m, &err);
    unlink(path);
    if (rc != SB_OK) {
        fprintf(stderr, "bench_compress: %s\n", err.msg);
        return 1;
    }
    if (n > m->hp.n_ctx)
        n = m->hp.n_ctx;

    /* The KV state of a prefilled prompt, from an in-RAM bank. */
    state kv = { 0 }, out = { 0 };
    sb_layout layout;
    check(sb_rt_kv_layout(m, 16, kv.bpt, &layout), "layout");
    kv.n_tensors = out.n_tensors = layout.n_tensors;
    memcpy(out.bpt, kv.bpt, sizeof kv.bpt);
    uint64_t per_token = 0;
    for (uint32_t k = 0; k < layout.n_tensors; k++) {
        per_token += kv.bpt[k];
        kv.t[k] = malloc(n * kv.bpt[k]);
        out.t[k] = malloc(n * kv.bpt[k]);
        if (!kv.t[k] || !out.t[k])
            check(SB_ERR_NOMEM, "malloc");
    }
    uint32_t *tok = malloc(n * sizeof *tok);
    float *logits = malloc(m->hp.n_vocab * sizeof *logits);
    if (!tok || !logits)
        check(SB_ERR_NOMEM, "malloc");
    uint64_t x = 12345;
    for (size_t i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        tok[i] = (uint32_t)((x >> 33) % m->hp.n_vocab);
    }
    sb_config rc_cfg;
    sb_config_default(&rc_cfg);
    rc_cfg.ram_bytes = n * per_token * 2 + (64u << 20);
    rc_cfg.max_seq_tokens = m->hp.n_ctx;
    sb_store *ram = NULL;
    sb_ns *ns = NULL;
    sb_rt_ctx *ctx = NULL;
    check(sb_store_open(&rc_cfg, &ram), "open");
    check(sb_ns_open(ram, &layout, NULL, 0, &ns), "namespace");
    check(sb_rt_ctx_new(m, 2, 512, &ctx), "context");
    sb_rt_kv seq;
    check(sb_rt_kv_init(&seq, m, ns), "kv");
    double t0 = now_s();
    check(sb_rt_forward(ctx, &seq, tok, n, SB_RT_LOGITS_LAST, logits), "prefill");
    double t_prefill = now_s() - t0;
    check(sb_rt_kv_commit(&seq, NULL, NULL), "commit");
    sb_rt_kv_fini(&seq);
    sb_match *mt = NULL;
    check(sb_ns_match(ns, tok, n, &mt), "match");
    check(sb_match_restore(mt, n, kv.t, NULL), "restore");
    sb_match_release(mt);
    sb_ns_close(ns);
    sb_store_close(ram);
    sb_rt_ctx_free(ctx);

    double mib = (double)(n * per_token) * copies / 1048576.0;
    printf("bench_compress: model %s (%u layers, KV %u B per token per tensor, F16), %zu tokens "
           "(prefill %.2f s), %u copies: %.1f MiB of KV state, pages of 16 tokens "
           "(%.0f KiB)\n\n",
           preset, m->hp.n_layers, kv.bpt[0], n, t_prefill, copies, mib,
           16.0 * (double)per_token / 1024);
    printf("level  ratio  raw-records  device MiB  write MiB/s  restore MiB/s  "
           "(vs level 0: device, write, restore)\n");
    result base = { 0 };
    for (unsigned i = 0; i < n_levels; i++) {
        result r = run(dir, levels[i], &layout, &kv, tok, n, copies, &out);
        if (i == 0)
            base = r;
        double ratio = r.s.disk_compress_stored_bytes
                           ? (double)r.s.disk_compress_raw_bytes /
                                 (double)r.s.disk_compress_stored_bytes
                           : 1.0;
        double w = mib / r.write_s, rs = mib / r.restore_s;
        printf("%5u  %5.2f  %11" PRIu64 "  %10.1f  %11.0f  %13.0f  (%.3f, %.2f, %.2f)\n",
               r.level, ratio, r.s.disk_compress_skipped,
               (double)r.s.disk_write_bytes / 1048576.0, w, rs,
               (double)r.s.disk_write_bytes / (double)base.s.disk_write_bytes,
               w / (mib / base.write_s), rs / (mib / base.restore_s));
    }
    for (uint32_t k = 0; k < layout.n_tensors; k++) {
        free(kv.t[k]);
        free(out.t[k]);
    }
    free(tok);
    free(logits);
    sb_rt_model_free(m);
    return 0;
}
