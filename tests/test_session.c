/* test_session.c -- sessions that restore warm prefixes from the bank
 * (runtime/session/session.h).
 *
 * Description: on tiny generated models (F32 and F16; every architecture:
 * the presets tiny (llama), tiny-llama3, tiny-qwen2 and tiny-qwen3; and
 * Q5_0 and the Q4_K_M mix on a dim 256 shape),
 *   - warm versus cold: a prompt diverging from a stored one at every
 *     position (every 7th under TSan: $SB_SESSION_STRIDE) restores exactly
 *     the shared prefix and gives logits and tokens bit-identical to a
 *     cold run;
 *   - a prompt that is exactly a stored sequence takes its logits from the
 *     point state (no forward pass) and they are the cold ones;
 *   - ssd: after the store is closed and reopened, a resumed session reads
 *     its pages from disk and continues bit-identically; with reading
 *     estimated slower than recomputing it skips the disk and says so,
 *     unless told to read always (SB_RT_DISK_ALWAYS);
 *   - scopes: two sessions of different scopes share nothing;
 *   - eviction: a session whose pages were evicted falls back to a correct
 *     cold prefill with miss reason "evicted";
 *   - session files: round trip, and damage, truncation, another model and
 *     a missing file each refused with their error;
 *   - turns step by step (sb_rt_session_begin .. _end): three sessions whose
 *     prompts and decode steps share forward passes give the tokens and
 *     logits of each one's turn alone; a turn ended mid-prefill commits the
 *     positions it computed, one ended with a token pushed but not run
 *     leaves it out, and an aborted one leaves the session as it was.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "model/boundary.h"
#include "model/forward.h"
#include "model/kv.h"
#include "make_model/make_model.h"
#include "model/model.h"
#include "model/sample.h"
#include "session/session.h"

#define N 100 /* prompt tokens: pages of 16 and a partial tail */

/* Generation of n tokens with sampler, no stop token. */
#define GEN(sampler, n) (&(sb_rt_gen){ .n_gen = (n), .smp = (sampler), .stop_id = UINT32_MAX })

static sb_rt_model *load_preset(const char *preset, const char *dtype, uint64_t seed)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/test_session.%ld.gguf", (long)getpid());
    sb_rt_make_opts o;
    assert_int_equal(sb_rt_make_opts_preset(&o, preset), SB_OK);
    assert_int_equal(sb_rt_make_opts_set(&o, "dtype", dtype), SB_OK);
    if (strstr(dtype, "_k")) { /* rows of 256 for the K types to apply */
        assert_int_equal(sb_rt_make_opts_set(&o, "dim", "256"), SB_OK);
        assert_int_equal(sb_rt_make_opts_set(&o, "ff", "512"), SB_OK);
    }
    o.seed = seed;
    sb_rt_err err = { 0 };
    if (sb_rt_make_model(&o, path, &err) != SB_OK)
        fail_msg("make_model: %s", err.msg);
    sb_rt_model *m;
    if (sb_rt_model_load(path, &m, &err) != SB_OK)
        fail_msg("load: %s", err.msg);
    unlink(path);
    return m;
}

static sb_rt_model *load_tiny(const char *dtype, uint64_t seed)
{
    return load_preset("tiny", dtype, seed);
}

/* The shortest sequence bank_open's stores write to disk. */
static uint32_t g_min_prefix = 1;

/* A store (RAM only when dir is NULL), one namespace per scope, a context. */
typedef struct bank {
    sb_rt_model *m;
    sb_store *st;
    sb_ns *ns;
    sb_rt_ctx *ctx;
    uint32_t bpt[2 * 8];
} bank;

static void bank_open(bank *b, sb_rt_model *m, const char *dir, const char *scope,
                      uint64_t ram_bytes)
{
    memset(b, 0, sizeof *b);
    b->m = m;
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.ram_bytes = ram_bytes;
    cfg.dir = dir;
    cfg.min_prefix_tokens = g_min_prefix; /* 1: the test prompts are short */
    cfg.segment_bytes = 1u << 20;
    cfg.disk_bytes = 64u << 20;
    assert_int_equal(sb_store_open(&cfg, &b->st), SB_OK);
    sb_layout layout;
    assert_int_equal(sb_rt_kv_layout(m, 16, b->bpt, &layout), SB_OK);
    assert_int_equal(sb_ns_open(b->st, &layout, scope, scope ? strlen(scope) : 0, &b->ns), SB_OK);
    /* One context's pages ready in the pool, as the CLI and the C API do:
     * all of them where the budget has room (64 MiB does), fewer in a
     * small budget, never more. */
    size_t ready = 0, want = (m->hp.n_ctx + 15) / 16;
    assert_int_equal(sb_rt_kv_prefault(m, b->ns, &ready), SB_OK);
    assert_true(ready <= want);
    if (ram_bytes >= 64u << 20)
        assert_int_equal(ready, want);
    assert_int_equal(sb_rt_kv_prefault(NULL, b->ns, &ready), SB_ERR_INVAL);
    assert_int_equal(ready, 0);
    assert_int_equal(sb_rt_ctx_new(m, 2, 32, &b->ctx), SB_OK);
}

static void bank_close(bank *b)
{
    sb_rt_ctx_free(b->ctx);
    sb_ns_close(b->ns);
    assert_int_equal(sb_store_check(b->st), SB_OK);
    assert_int_equal(sb_store_close(b->st), SB_OK);
}

static void tokens_for(const sb_rt_model *m, uint32_t *t, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        t[i] = (uint32_t)((seed >> 33) % m->hp.n_vocab);
    }
}

/* The last turn()'s logits at its last prompt position. */
static float g_prompt_logits[4096];

/* The boundary policy turn() gives a hybrid session: grid and how many
 * grid boundaries a turn keeps (0, 0: the defaults). */
static size_t g_grid, g_keep;

/* One turn of a fresh session (resumed at hist[0, n_hist) when n_hist):
 * input, n_gen greedy tokens into gen; the logits after it into lg, those
 * of the last prompt position into g_prompt_logits. */
static sb_rt_turn turn(bank *b, const uint32_t *hist, size_t n_hist, const uint32_t *in,
                       size_t n_in, size_t n_gen, uint32_t *gen, float *lg)
{
    sb_rt_session *s;
    assert_int_equal(sb_rt_session_new(b->m, b->ctx, b->ns, &s), SB_OK);
    if (b->m->hp.n_rec && (g_grid || g_keep))
        assert_int_equal(sb_rt_session_set_boundaries(s, g_grid,
                                                      g_keep * sb_rt_boundary_bytes(b->m)),
                         SB_OK);
    if (n_hist)
        assert_int_equal(sb_rt_session_resume(s, hist, n_hist), SB_OK);
    sb_rt_sampler smp;
    sb_rt_sampling so = { 0, 0, 1, 1 };
    assert_int_equal(sb_rt_sampler_init(&smp, &so, b->m->hp.n_vocab), SB_OK);
    sb_rt_turn rep;
    assert_true(b->m->hp.n_vocab <= 4096);
    sb_rt_gen g = { .n_gen = n_gen, .smp = &smp, .stop_id = UINT32_MAX,
                    .prompt_logits = g_prompt_logits };
    assert_int_equal(sb_rt_session_turn(s, in, n_in, &g, &rep),
                     SB_OK);
    assert_int_equal(rep.commit_rc, SB_OK);
    size_t nt;
    const uint32_t *t = sb_rt_session_tokens(s, &nt);
    assert_int_equal(nt, n_hist + n_in + n_gen);
    if (gen)
        memcpy(gen, t + n_hist + n_in, n_gen * sizeof *gen);
    if (lg)
        memcpy(lg, sb_rt_session_logits(s), b->m->hp.n_vocab * sizeof *lg);
    sb_rt_sampler_fini(&smp);
    sb_rt_session_free(s);
    return rep;
}

/* The logits and tokens of in[0, n) + n_gen computed cold, in a fresh bank. */
static void cold(sb_rt_model *m, const uint32_t *in, size_t n, size_t n_gen, uint32_t *gen,
                 float *lg)
{
    bank c;
    bank_open(&c, m, NULL, NULL, 64u << 20);
    sb_rt_turn r = turn(&c, NULL, 0, in, n, n_gen, gen, lg);
    assert_int_equal(r.cache_mode, SB_RT_CACHE_COLD);
    assert_int_equal(r.cached_tokens, 0);
    bank_close(&c);
}

/* The divergence positions warm_vs_cold walks: every one, or with
 * $SB_SESSION_STRIDE k every k-th and the last (a stride prime to the
 * 16-token page still meets every position within a page: TSan's run,
 * whose part is the matmul's threads, takes 7). */
static size_t divergence_stride(void)
{
    const char *env = getenv("SB_SESSION_STRIDE");
    size_t k = env ? strtoull(env, NULL, 10) : 1;
    return k ? k : 1;
}

/* The position after d: d + stride, N last, then past the end. */
static size_t next_divergence(size_t d, size_t stride)
{
    return d == N ? N + 1 : d + stride < N ? d + stride : N;
}

static void warm_vs_cold(const char *preset, const char *dtype)
{
    sb_rt_model *m = load_preset(preset, dtype, 11);
    size_t stride = divergence_stride();
    size_t V = m->hp.n_vocab;
    uint32_t a[N], p[N], g1[4], g2[4];
    float *l1 = malloc(V * 4), *l2 = malloc(V * 4), *pl = malloc(V * 4);
    tokens_for(m, a, N, 5);
    bank b;
    bank_open(&b, m, NULL, NULL, 64u << 20);
    sb_rt_turn r = turn(&b, NULL, 0, a, N, 0, NULL, NULL);
    assert_int_equal(r.cache_mode, SB_RT_CACHE_COLD);
    for (size_t d = 0; d <= N; d = next_divergence(d, stride)) {
        /* p shares exactly d tokens with a */
        memcpy(p, a, sizeof p);
        for (size_t i = d; i < N; i++)
            p[i] = (a[i] + 1 + (uint32_t)i) % (uint32_t)V;
        r = turn(&b, NULL, 0, p, N, 4, g1, l1);
        memcpy(pl, g_prompt_logits, V * 4);
        cold(m, p, N, 4, g2, l2);
        if (memcmp(l1, l2, V * 4) || memcmp(g1, g2, sizeof g1) ||
            memcmp(pl, g_prompt_logits, V * 4))
            fail_msg("%s %s: diverging at %zu: warm differs from cold", preset, dtype, d);
        /* every earlier p_d' (d' < d) shares d' tokens; a shares d */
        if (d < N) {
            assert_int_equal(r.cached_tokens, d);
            assert_int_equal(r.cache_mode, d ? SB_RT_CACHE_WARM : SB_RT_CACHE_COLD);
            assert_int_equal(r.miss, SB_MISS_NO_PREFIX);
            assert_int_equal(r.prefill_tokens, N - d);
        } else { /* exactly a: its point state gives the logits */
            assert_int_equal(r.point_hit, 1);
            assert_int_equal(r.cached_tokens, N);
            assert_int_equal(r.prefill_tokens, 0);
            assert_int_equal(r.miss, SB_MISS_NONE);
        }
    }
    /* A prefix of a stored sequence has no point state at its end: the last
     * position is recomputed. */
    r = turn(&b, NULL, 0, a, 37, 0, NULL, l1);
    cold(m, a, 37, 0, NULL, l2);
    assert_int_equal(r.cached_tokens, 36);
    assert_int_equal(r.prefill_tokens, 1);
    assert_memory_equal(l1, l2, V * 4);
    bank_close(&b);
    free(l1), free(l2), free(pl);
    sb_rt_model_free(m);
}

static void warm_vs_cold_f32(void **state)
{
    (void)state;
    warm_vs_cold("tiny", "f32");
}

static void warm_vs_cold_f16(void **state)
{
    (void)state;
    warm_vs_cold("tiny", "f16");
}

static void warm_vs_cold_llama3(void **state)
{
    (void)state;
    warm_vs_cold("tiny-llama3", "f16");
}

static void warm_vs_cold_qwen2(void **state)
{
    (void)state;
    warm_vs_cold("tiny-qwen2", "f16");
}

static void warm_vs_cold_qwen3(void **state)
{
    (void)state;
    warm_vs_cold("tiny-qwen3", "f16");
}

static void warm_vs_cold_q4_k_m(void **state)
{
    (void)state;
    warm_vs_cold("tiny", "q4_k_m");
}

static void warm_vs_cold_q5_0(void **state)
{
    (void)state;
    warm_vs_cold("tiny", "q5_0");
}

/* Two turns in one session: the second restores the first's prompt and
 * answer from RAM. */
static void second_turn_is_warm(void **state)
{
    (void)state;
    sb_rt_model *m = load_tiny("f16", 3);
    uint32_t a[N];
    tokens_for(m, a, N, 9);
    bank b;
    bank_open(&b, m, NULL, NULL, 64u << 20);
    sb_rt_session *s;
    assert_int_equal(sb_rt_session_new(m, b.ctx, b.ns, &s), SB_OK);
    sb_rt_sampler smp;
    sb_rt_sampling so = { 0.8f, 40, 0.95f, 42 };
    assert_int_equal(sb_rt_sampler_init(&smp, &so, m->hp.n_vocab), SB_OK);
    sb_rt_turn r;
    assert_int_equal(sb_rt_session_turn(s, a, 60, GEN(&smp, 8), &r), SB_OK);
    assert_int_equal(r.cache_mode, SB_RT_CACHE_COLD);
    assert_int_equal(r.gen_tokens, 8);
    /* The first token comes after the restore and the prefill (how long
     * any of them takes is the machine's business, not this test's). */
    assert_true(r.ttft_s > 0 && r.ttft_s >= r.prefill_s + r.restore_s - 1e-9);
    assert_int_equal(sb_rt_session_turn(s, a + 60, 40, GEN(&smp, 8), &r),
                     SB_OK);
    assert_int_equal(r.cache_mode, SB_RT_CACHE_WARM);
    assert_int_equal(r.prompt_tokens, 108);
    assert_int_equal(r.cached_tokens, 68); /* first prompt + its whole answer */
    assert_int_equal(r.prefill_tokens, 40);
    size_t nt;
    sb_rt_session_tokens(s, &nt);
    assert_int_equal(nt, 116);
    /* an input of nothing: the whole conversation is a stored sequence */
    assert_int_equal(sb_rt_session_turn(s, NULL, 0, GEN(&smp, 2), &r), SB_OK);
    assert_int_equal(r.point_hit, 1);
    assert_int_equal(r.prefill_tokens, 0);
    /* errors leave the session as it was */
    uint32_t bad = m->hp.n_vocab;
    assert_int_equal(sb_rt_session_turn(s, &bad, 1, GEN(&smp, 2), &r),
                     SB_ERR_INVAL);
    assert_int_equal(sb_rt_session_turn(s, a, 1, GEN(&smp, m->hp.n_ctx), &r),
                     SB_ERR_TOO_MANY_TOKENS);
    sb_rt_session_tokens(s, &nt);
    assert_int_equal(nt, 118);
    sb_rt_sampler_fini(&smp);
    sb_rt_session_free(s);
    bank_close(&b);
    sb_rt_model_free(m);
}

static void ssd_after_reopen_one(const char *preset)
{
    sb_rt_model *m = load_preset(preset, "f32", 5);
    size_t V = m->hp.n_vocab;
    char dir[] = "/tmp/test_session.XXXXXX";
    assert_non_null(mkdtemp(dir));
    uint32_t a[N + 20], g1[6], g2[6], gen0[5];
    float *l1 = malloc(V * 4), *l2 = malloc(V * 4);
    tokens_for(m, a, N + 20, 21);
    bank b;
    bank_open(&b, m, dir, NULL, 64u << 20);
    sb_rt_turn r = turn(&b, NULL, 0, a, N, 5, gen0, NULL);
    assert_int_equal(r.cache_mode, SB_RT_CACHE_COLD);
    assert_int_equal(r.restore_bytes, 0);
    /* What the disk tier made of the turn: every page of the conversation
     * (prompt and answer) and its point state queued, nothing denied; the
     * ticket stands for all of it. */
    size_t pages = (N + 5 + 15) / 16;
    assert_true(r.disk.ticket > 0);
    /* the prompt's 7 pages (the last partial), then the answer's longer
     * last page in its place */
    assert_int_equal(r.disk.pages_new, (N + 15) / 16 + 1);
    assert_int_equal(r.disk.denied, 0);
    assert_true(r.disk.queued >= pages + 1);
    assert_int_equal(sb_store_wait_durable(b.st, r.disk.ticket, SB_WAIT_FOREVER), SB_OK);
    bank_close(&b);
    uint32_t hist[N + 5];
    memcpy(hist, a, N * 4);
    memcpy(hist + N, gen0, sizeof gen0);

    bank_open(&b, m, dir, NULL, 64u << 20);
    r = turn(&b, hist, N + 5, a + N, 20, 6, g1, l1);
    assert_int_equal(r.cache_mode, SB_RT_CACHE_SSD);
    assert_int_equal(r.cached_tokens, N + 5);
    assert_int_equal(r.cached_disk_tokens, N + 5);
    assert_int_equal(r.disk_skipped, 0);
    assert_true(r.est_read_s > 0 && r.est_recompute_s > 0);
    /* The turn reports what it read and the CPU its restore took (the
     * thread's, so never more than the restore's wall time). */
    sb_ns_info nsi;
    assert_int_equal(sb_ns_get_info(b.ns, &nsi), SB_OK);
    assert_int_equal(r.restore_bytes,
                     (N + 5 + nsi.page_tokens - 1) / nsi.page_tokens * nsi.page_bytes);
    assert_true(r.restore_cpu_s > 0 && r.restore_cpu_s <= r.restore_s + 1e-4);
    uint32_t full[N + 25];
    memcpy(full, hist, sizeof hist);
    memcpy(full + N + 5, a + N, 20 * 4);
    cold(m, full, N + 25, 6, g2, l2);
    assert_memory_equal(l1, l2, V * 4);
    assert_memory_equal(g1, g2, sizeof g1);
    bank_close(&b);

    /* Reading estimated slower than recomputing: the disk is skipped. */
    bank_open(&b, m, dir, NULL, 64u << 20);
    sb_rt_session *s;
    assert_int_equal(sb_rt_session_new(m, b.ctx, b.ns, &s), SB_OK);
    sb_rt_session_rates(s)->read_bytes_s = 1; /* a byte a second */
    assert_int_equal(sb_rt_session_resume(s, hist, N + 5), SB_OK);
    sb_rt_sampler smp;
    sb_rt_sampling so = { 0, 0, 1, 1 };
    assert_int_equal(sb_rt_sampler_init(&smp, &so, V), SB_OK);
    assert_int_equal(sb_rt_session_turn(s, a + N, 20, GEN(&smp, 6), &r),
                     SB_OK);
    assert_int_equal(r.disk_skipped, 1);
    assert_int_equal(r.cache_mode, SB_RT_CACHE_COLD);
    assert_int_equal(r.cached_tokens, 0);
    assert_true(r.est_read_s > r.est_recompute_s);
    assert_memory_equal(sb_rt_session_logits(s), l2, V * 4);
    /* ... and with the disk turned off */
    sb_rt_session_set_disk_use(s, SB_RT_DISK_NEVER);
    sb_rt_session_rates(s)->read_bytes_s = 1e12;
    assert_int_equal(sb_rt_session_resume(s, hist, N + 5), SB_OK);
    assert_int_equal(sb_rt_session_turn(s, a + N, 20, GEN(&smp, 6), &r),
                     SB_OK);
    /* the pages the previous turn computed are in RAM now: warm, not ssd */
    assert_int_equal(r.cache_mode, SB_RT_CACHE_WARM);
    assert_int_equal(r.cached_disk_tokens, 0);
    sb_rt_sampler_fini(&smp);
    sb_rt_session_free(s);
    bank_close(&b);

    /* SB_RT_DISK_ALWAYS: read even when the estimate says recompute */
    bank_open(&b, m, dir, NULL, 64u << 20);
    assert_int_equal(sb_rt_session_new(m, b.ctx, b.ns, &s), SB_OK);
    assert_int_equal(sb_rt_sampler_init(&smp, &so, V), SB_OK);
    sb_rt_session_rates(s)->read_bytes_s = 1;
    sb_rt_session_set_disk_use(s, SB_RT_DISK_ALWAYS);
    assert_int_equal(sb_rt_session_resume(s, hist, N + 5), SB_OK);
    assert_int_equal(sb_rt_session_turn(s, a + N, 20, GEN(&smp, 6), &r), SB_OK);
    assert_int_equal(r.cache_mode, SB_RT_CACHE_SSD);
    assert_int_equal(r.disk_skipped, 0);
    assert_true(r.est_read_s > r.est_recompute_s);
    assert_true(r.cached_tokens >= N + 5 && r.cached_disk_tokens > 0);
    assert_memory_equal(sb_rt_session_logits(s), l2, V * 4);
    sb_rt_sampler_fini(&smp);
    sb_rt_session_free(s);
    bank_close(&b);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    free(l1), free(l2);
    sb_rt_model_free(m);
}

/* A restart for every architecture: the conversation read from disk
 * continues bit-identically to a cold run. */
static void ssd_after_reopen(void **state)
{
    (void)state;
    static const char *presets[] = { "tiny", "tiny-llama3", "tiny-qwen2", "tiny-qwen3",
                                     "tiny-hybrid" };
    for (size_t i = 0; i < sizeof presets / sizeof *presets; i++)
        ssd_after_reopen_one(presets[i]);
}

/* ---- hybrid models: boundaries ---------------------------------------------------- */

/* A prompt that leaves a stored one at d resumes from the deepest boundary
 * at or before d, recomputes the matched tokens past it, and its logits and
 * tokens are the cold ones, for every d: on the grid, between grid points,
 * at the end of the stored prompt. */
static void hybrid_divergence(const char *dtype)
{
    sb_rt_model *m = load_preset("tiny-hybrid", dtype, 11);
    size_t V = m->hp.n_vocab;
    uint32_t a[N], p[N], g1[4], g2[4];
    float *l1 = malloc(V * 4), *l2 = malloc(V * 4), *pl = malloc(V * 4);
    tokens_for(m, a, N, 5);
    bank b;
    bank_open(&b, m, NULL, NULL, 64u << 20);
    g_grid = 32, g_keep = 64;
    sb_rt_turn r = turn(&b, NULL, 0, a, N, 0, NULL, NULL);
    assert_int_equal(r.cache_mode, SB_RT_CACHE_COLD);
    assert_int_equal(r.boundaries_written, 4); /* 32, 64, 96 and the end, 100 */
    g_grid = 0, g_keep = 0; /* the others record on the default grid (256): none here */
    for (size_t d = 0; d <= N; d++) {
        memcpy(p, a, sizeof p);
        for (size_t i = d; i < N; i++)
            p[i] = (a[i] + 1 + (uint32_t)i) % (uint32_t)V;
        r = turn(&b, NULL, 0, p, N, 4, g1, l1);
        memcpy(pl, g_prompt_logits, V * 4);
        cold(m, p, N, 4, g2, l2);
        if (memcmp(l1, l2, V * 4) || memcmp(g1, g2, sizeof g1) ||
            memcmp(pl, g_prompt_logits, V * 4))
            fail_msg("%s: diverging at %zu: warm differs from cold", dtype, d);
        size_t bnd = d == N ? N : d / 32 * 32;
        assert_int_equal(r.boundary_tokens, bnd);
        assert_int_equal(r.cached_tokens, bnd);
        assert_int_equal(r.recomputed_tokens, d - bnd);
        assert_int_equal(r.prefill_tokens, N - bnd);
        assert_int_equal(r.point_hit, d == N);
        assert_int_equal(r.cache_mode, bnd ? SB_RT_CACHE_WARM : SB_RT_CACHE_COLD);
        assert_int_equal(r.miss, d == N ? SB_MISS_NONE : d == bnd ? SB_MISS_NO_PREFIX
                                                                  : SB_MISS_NO_POINT);
        size_t pages = (bnd + 15) / 16;
        assert_int_equal(r.bank_bytes,
                         bnd ? pages * 4096 * ((sb_rt_model_kv_dim(m) * 2 * 2 * m->hp.n_attn *
                                                16 + 4095) / 4096) +
                                   sb_rt_boundary_bytes(m)
                             : 0);
        /* the end of the prompt (not again when it was the one restored)
         * and of the turn */
        assert_int_equal(r.boundaries_written, d == N ? 1 : 2);
    }
    /* a prefix of the stored prompt: no boundary at its end, resumed from
     * the grid */
    r = turn(&b, NULL, 0, a, 77, 0, NULL, l1);
    cold(m, a, 77, 0, NULL, l2);
    assert_int_equal(r.boundary_tokens, 64);
    assert_int_equal(r.recomputed_tokens, 13);
    assert_memory_equal(l1, l2, V * 4);
    bank_close(&b);
    free(l1), free(l2), free(pl);
    sb_rt_model_free(m);
}

static void hybrid_divergence_f32(void **state)
{
    (void)state;
    hybrid_divergence("f32");
}

static void hybrid_divergence_q8_0(void **state)
{
    (void)state;
    hybrid_divergence("q8_0");
}

/* The bytes policy: a turn keeps the newest grid boundary, the oldest, then
 * those at 2, 4, ... grid steps from the tail, as many as max_bytes holds;
 * a divergence resumes from the deepest kept one. */
static void hybrid_policy(void **state)
{
    (void)state;
    sb_rt_model *m = load_preset("tiny-hybrid", "f32", 12);
    size_t V = m->hp.n_vocab;
    uint32_t a[N], p[N];
    float *l1 = malloc(V * 4), *l2 = malloc(V * 4);
    tokens_for(m, a, N, 6);
    const struct { size_t keep, d, bnd; } c[] = {
        { 1, 99, 96 }, { 1, 90, 0 },  { 2, 90, 16 }, { 2, 95, 16 },
        { 3, 90, 80 }, { 3, 70, 16 }, { 4, 70, 48 }, { 4, 47, 16 },
    };
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        bank b;
        bank_open(&b, m, NULL, NULL, 64u << 20);
        g_grid = 16, g_keep = c[i].keep; /* grid 16, 32, ..., 96 in a prompt of 100 */
        sb_rt_turn r = turn(&b, NULL, 0, a, N, 0, NULL, NULL);
        assert_int_equal(r.boundaries_written, c[i].keep + 1);
        sb_stats st;
        assert_int_equal(sb_store_stats(b.st, &st), SB_OK);
        assert_int_equal(st.points, c[i].keep + 1);
        assert_int_equal(st.point_bytes, (c[i].keep + 1) * sb_rt_boundary_bytes(m));
        g_grid = 0, g_keep = 0;
        memcpy(p, a, sizeof p);
        for (size_t k = c[i].d; k < N; k++)
            p[k] = (a[k] + 1) % (uint32_t)V;
        r = turn(&b, NULL, 0, p, N, 0, NULL, l1);
        if (r.boundary_tokens != c[i].bnd)
            fail_msg("keep %zu, diverging at %zu: resumed at %zu, not %zu", c[i].keep, c[i].d,
                     r.boundary_tokens, c[i].bnd);
        assert_int_equal(r.recomputed_tokens, c[i].d - c[i].bnd);
        cold(m, p, N, 0, NULL, l2);
        assert_memory_equal(l1, l2, V * 4);
        bank_close(&b);
    }
    /* a grid off the scan's chunks is refused */
    bank b;
    bank_open(&b, m, NULL, NULL, 64u << 20);
    sb_rt_session *s;
    assert_int_equal(sb_rt_session_new(m, b.ctx, b.ns, &s), SB_OK);
    assert_int_equal(sb_rt_session_set_boundaries(s, 24, 0), SB_ERR_INVAL);
    assert_int_equal(sb_rt_session_set_boundaries(s, 0, 0), SB_OK);
    sb_rt_session_free(s);
    bank_close(&b);
    free(l1), free(l2);
    sb_rt_model_free(m);
}

/* After a restart the grid boundaries of a long prompt come back from disk
 * (recorded while the prompt was shorter than the store's min_prefix_tokens,
 * they are written once the sequence reaches it): a prompt diverging
 * between two of them resumes from the earlier one, read from disk, and
 * continues bit-identically to a cold run. */
static void hybrid_restart(void **state)
{
    (void)state;
    sb_rt_model *m = load_preset("tiny-hybrid", "f32", 14);
    size_t V = m->hp.n_vocab, n = 600;
    uint32_t *a = malloc(n * 4), *p = malloc(n * 4), g1[4], g2[4];
    float *l1 = malloc(V * 4), *l2 = malloc(V * 4);
    tokens_for(m, a, n, 9);
    char dir[] = "/tmp/test_session.XXXXXX";
    assert_non_null(mkdtemp(dir));
    g_min_prefix = 512; /* the store's default */
    bank b;
    bank_open(&b, m, dir, NULL, 64u << 20);
    g_grid = 64, g_keep = 8; /* of 64 .. 576 it keeps 576, 64, 512, 384, 128 */
    sb_rt_turn r = turn(&b, NULL, 0, a, n, 4, NULL, NULL);
    assert_int_equal(r.boundaries_written, 7);
    g_grid = 0, g_keep = 0;
    bank_close(&b);

    memcpy(p, a, n * 4);
    for (size_t i = 300; i < n; i++)
        p[i] = (a[i] + 1) % (uint32_t)V;
    bank_open(&b, m, dir, NULL, 64u << 20);
    sb_rt_session *s;
    assert_int_equal(sb_rt_session_new(m, b.ctx, b.ns, &s), SB_OK);
    sb_rt_session_rates(s)->prefill_tok_s = 1; /* reading always pays */
    sb_rt_sampler smp;
    sb_rt_sampling so = { 0, 0, 1, 1 };
    assert_int_equal(sb_rt_sampler_init(&smp, &so, V), SB_OK);
    assert_int_equal(sb_rt_session_turn(s, p, n, GEN(&smp, 4), &r), SB_OK);
    assert_int_equal(r.cache_mode, SB_RT_CACHE_SSD);
    assert_int_equal(r.boundary_tokens, 128);
    assert_int_equal(r.cached_disk_tokens, 128);
    assert_int_equal(r.recomputed_tokens, 300 - 128);
    size_t nt;
    memcpy(g1, sb_rt_session_tokens(s, &nt) + n, sizeof g1);
    memcpy(l1, sb_rt_session_logits(s), V * 4);
    sb_rt_sampler_fini(&smp);
    sb_rt_session_free(s);
    bank_close(&b);
    g_min_prefix = 1;
    cold(m, p, n, 4, g2, l2);
    assert_memory_equal(l1, l2, V * 4);
    assert_memory_equal(g1, g2, sizeof g1);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    free(a), free(p), free(l1), free(l2);
    sb_rt_model_free(m);
}

/* Conversations sharing a system prompt share its boundaries: a second
 * conversation resumes from the one at the end of the shared prefix and
 * stores only its own; asking a stored conversation again stores nothing. */
static void hybrid_shared_prefix(void **state)
{
    (void)state;
    sb_rt_model *m = load_preset("tiny-hybrid", "f16", 13);
    size_t pb = sb_rt_boundary_bytes(m);
    uint32_t a[N], u[40];
    tokens_for(m, a, N, 7);  /* a[0, 64): the system prompt, then the first user's */
    tokens_for(m, u, 40, 8); /* the second user's */
    bank b;
    bank_open(&b, m, NULL, NULL, 64u << 20);
    g_grid = 32, g_keep = 8;
    sb_rt_turn r = turn(&b, NULL, 0, a, N, 4, NULL, NULL);
    assert_int_equal(r.boundaries_written, 5); /* 32, 64, 96, end of prompt and turn */
    sb_stats s1, s2, s3;
    assert_int_equal(sb_store_stats(b.st, &s1), SB_OK);
    assert_int_equal(s1.points, 5);
    r = turn(&b, a, 64, u, 40, 4, NULL, NULL);
    assert_int_equal(r.boundary_tokens, 64);
    assert_int_equal(r.recomputed_tokens, 0);
    assert_int_equal(r.boundaries_written, 3); /* 96, end of prompt and turn */
    assert_int_equal(sb_store_stats(b.st, &s2), SB_OK);
    assert_int_equal(s2.points, s1.points + 3);
    assert_int_equal(s2.point_bytes, s1.point_bytes + 3 * pb);
    r = turn(&b, NULL, 0, a, N, 4, NULL, NULL); /* the first conversation again */
    assert_int_equal(r.point_hit, 1);
    assert_int_equal(sb_store_stats(b.st, &s3), SB_OK);
    assert_int_equal(s3.points, s2.points);
    assert_int_equal(s3.point_bytes, s2.point_bytes);
    g_grid = 0, g_keep = 0;
    bank_close(&b);
    sb_rt_model_free(m);
}

static void scopes_share_nothing(void **state)
{
    (void)state;
    sb_rt_model *m = load_tiny("f16", 2);
    uint32_t a[N];
    tokens_for(m, a, N, 4);
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.ram_bytes = 64u << 20;
    sb_store *st;
    assert_int_equal(sb_store_open(&cfg, &st), SB_OK);
    uint32_t bpt[16];
    sb_layout layout;
    assert_int_equal(sb_rt_kv_layout(m, 16, bpt, &layout), SB_OK);
    bank x = { .m = m, .st = st }, y = { .m = m, .st = st };
    assert_int_equal(sb_ns_open(st, &layout, "tenant-a", 8, &x.ns), SB_OK);
    assert_int_equal(sb_ns_open(st, &layout, "tenant-b", 8, &y.ns), SB_OK);
    assert_int_equal(sb_rt_ctx_new(m, 1, 64, &x.ctx), SB_OK);
    y.ctx = x.ctx;
    sb_rt_turn r = turn(&x, NULL, 0, a, N, 3, NULL, NULL);
    assert_int_equal(r.cache_mode, SB_RT_CACHE_COLD);
    r = turn(&y, NULL, 0, a, N, 3, NULL, NULL);
    assert_int_equal(r.cache_mode, SB_RT_CACHE_COLD);
    assert_int_equal(r.cached_tokens, 0);
    assert_int_equal(r.miss, SB_MISS_NO_PREFIX);
    r = turn(&x, NULL, 0, a, N, 3, NULL, NULL);
    assert_int_equal(r.cache_mode, SB_RT_CACHE_WARM);
    sb_rt_ctx_free(x.ctx);
    sb_ns_close(x.ns);
    sb_ns_close(y.ns);
    assert_int_equal(sb_store_check(st), SB_OK);
    sb_store_close(st);
    sb_rt_model_free(m);
}

static void evicted_falls_back_cold(void **state)
{
    (void)state;
    sb_rt_model *m = load_tiny("f32", 8);
    size_t V = m->hp.n_vocab;
    uint32_t a[N], o[N], g1[4], g2[4];
    float *l1 = malloc(V * 4), *l2 = malloc(V * 4);
    tokens_for(m, a, N, 77);
    bank b;
    /* a 100-token sequence is 7 pages of 4 KiB plus a 2 KiB point state */
    bank_open(&b, m, NULL, NULL, 160u << 10);
    uint32_t gen0[4];
    turn(&b, NULL, 0, a, N, 4, gen0, NULL);
    for (uint64_t k = 0; k < 8; k++) { /* other sessions push it out */
        tokens_for(m, o, N, 1000 + k);
        turn(&b, NULL, 0, o, N, 4, NULL, NULL);
    }
    sb_stats stt;
    assert_int_equal(sb_store_stats(b.st, &stt), SB_OK);
    assert_true(stt.evictions > 0);
    uint32_t hist[N + 4], more[10];
    memcpy(hist, a, sizeof a);
    memcpy(hist + N, gen0, sizeof gen0);
    tokens_for(m, more, 10, 5);
    sb_rt_turn r = turn(&b, hist, N + 4, more, 10, 4, g1, l1);
    assert_int_equal(r.cache_mode, SB_RT_CACHE_COLD);
    assert_int_equal(r.cached_tokens, 0);
    assert_int_equal(r.miss, SB_MISS_EVICTED);
    uint32_t full[N + 14];
    memcpy(full, hist, sizeof hist);
    memcpy(full + N + 4, more, sizeof more);
    cold(m, full, N + 14, 4, g2, l2);
    assert_memory_equal(l1, l2, V * 4);
    assert_memory_equal(g1, g2, sizeof g1);
    bank_close(&b);
    free(l1), free(l2);
    sb_rt_model_free(m);
}

static void session_files(void **state)
{
    (void)state;
    sb_rt_model *m = load_tiny("f32", 1), *other = load_tiny("f32", 2);
    uint32_t a[N];
    tokens_for(m, a, N, 3);
    bank b;
    bank_open(&b, m, NULL, NULL, 64u << 20);
    sb_rt_session *s;
    assert_int_equal(sb_rt_session_new(m, b.ctx, b.ns, &s), SB_OK);
    assert_int_equal(sb_rt_session_resume(s, a, N), SB_OK);
    char path[64];
    snprintf(path, sizeof path, "/tmp/test_session.%ld.sess", (long)getpid());
    sb_rt_err err = { 0 };
    assert_int_equal(sb_rt_session_save(s, path, &err), SB_OK);
    uint32_t *t;
    size_t n;
    assert_int_equal(sb_rt_session_load(m, path, &t, &n, &err), SB_OK);
    assert_int_equal(n, N);
    assert_memory_equal(t, a, sizeof a);
    free(t);
    assert_int_equal(sb_rt_session_load(other, path, &t, &n, &err), SB_ERR_LAYOUT_MISMATCH);
    assert_non_null(strstr(err.msg, path));
    /* every flipped byte and every truncation is refused */
    FILE *f = fopen(path, "rb");
    uint8_t buf[1024];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    assert_int_equal(len, 40 + 4 * N + 8);
    for (size_t i = 0; i < len; i += 7) {
        buf[i] ^= 0x10;
        f = fopen(path, "wb");
        fwrite(buf, 1, len, f);
        fclose(f);
        int rc = sb_rt_session_load(m, path, &t, &n, &err);
        if (rc != SB_ERR_FORMAT && rc != SB_ERR_VERSION)
            fail_msg("byte %zu flipped: %d (%s)", i, rc, err.msg);
        assert_null(t);
        buf[i] ^= 0x10;
    }
    for (size_t cut = 0; cut < len; cut += 13) {
        f = fopen(path, "wb");
        fwrite(buf, 1, cut, f);
        fclose(f);
        assert_int_equal(sb_rt_session_load(m, path, &t, &n, &err), SB_ERR_FORMAT);
    }
    unlink(path);
    assert_int_equal(sb_rt_session_load(m, path, &t, &n, &err), SB_ERR_NOT_FOUND);
    sb_rt_session_free(s);
    bank_close(&b);
    sb_rt_model_free(m);
    sb_rt_model_free(other);
}

/* ---- turns step by step ------------------------------------------------------------ */

/* Session 0 starts alone; after its third pass sessions 1 and 2 begin and
 * every pass then holds their prompt chunks beside the decode steps of the
 * others (max 16 rows per prompt chunk). Each session's answer and final
 * logits equal its cold turn alone; 1 and 2 find the prefix 0 committed. */
static void stepwise_shares_passes_one(const char *preset)
{
    sb_rt_model *m = load_preset(preset, "f32", 21);
    bool hybrid = m->hp.n_rec != 0;
    size_t V = m->hp.n_vocab;
    enum { S = 3, GENS = 8, SHARED = 40 };
    uint32_t in[S][N];
    for (int k = 0; k < S; k++) {
        tokens_for(m, in[k], N, 77); /* the same first SHARED tokens */
        tokens_for(m, in[k] + SHARED, N - SHARED, 100 + (uint64_t)k);
    }
    uint32_t want[S][GENS];
    float want_lg[S][512];
    assert_true(V <= 512);
    for (int k = 0; k < S; k++)
        cold(m, in[k], N, GENS, want[k], want_lg[k]);
    bank b;
    bank_open(&b, m, NULL, NULL, 64u << 20);
    sb_rt_session *s[S];
    sb_rt_sampler smp[S];
    sb_rt_sampling so = { 0, 0, 1, 1 };
    size_t gen[S] = { 0 };
    sb_rt_turn rep[S];
    for (int k = 0; k < S; k++) {
        assert_int_equal(sb_rt_session_new(m, b.ctx, b.ns, &s[k]), SB_OK);
        assert_int_equal(sb_rt_sampler_init(&smp[k], &so, V), SB_OK);
        /* a hybrid model resumes from a boundary: one every 16 tokens */
        if (hybrid)
            assert_int_equal(sb_rt_session_set_boundaries(s[k], 16,
                                                          64 * sb_rt_boundary_bytes(m)),
                             SB_OK);
    }
    assert_int_equal(sb_rt_session_begin(s[0], in[0], N, GENS, &rep[0]), SB_OK);
    int open[S] = { 1, 0, 0 }, pass = 0;
    for (;;) {
        if (pass == 9) /* 0 has committed its prompt (7 chunks) and decodes */
            for (int k = 1; k < S; k++) {
                assert_int_equal(sb_rt_session_begin(s[k], in[k], N, GENS, &rep[k]), SB_OK);
                assert_int_equal(rep[k].cache_mode, SB_RT_CACHE_WARM);
                assert_true(rep[k].cached_tokens >= (hybrid ? SHARED / 16 * 16 : SHARED));
                open[k] = 1;
            }
        /* sample where logits are ready; end where the answer is done */
        for (int k = 0; k < S; k++) {
            if (!open[k] || sb_rt_session_state(s[k]) != SB_RT_TURN_SAMPLE)
                continue;
            if (gen[k] == GENS) {
                assert_int_equal(sb_rt_session_end(s[k], &rep[k]), SB_OK);
                open[k] = 0;
                continue;
            }
            uint32_t id = sb_rt_sample(&smp[k], sb_rt_session_logits(s[k]));
            assert_int_equal(id, want[k][gen[k]]);
            gen[k]++;
            assert_int_equal(sb_rt_session_push(s[k], id), SB_OK);
        }
        sb_rt_seq_step st[S];
        size_t n = 0;
        for (int k = 0; k < S; k++)
            if (open[k] && sb_rt_session_next(s[k], 16, &st[n]))
                n++;
        if (!n && pass >= 9)
            break;
        assert_int_equal(sb_rt_forward_multi(b.ctx, st, n), SB_OK);
        for (int k = 0, i = 0; k < S; k++)
            if (open[k] && (sb_rt_session_state(s[k]) == SB_RT_TURN_PREFILL ||
                            sb_rt_session_state(s[k]) == SB_RT_TURN_RUN))
                assert_int_equal(sb_rt_session_ran(s[k], &st[i++]), SB_OK);
        pass++;
    }
    for (int k = 0; k < S; k++) {
        assert_int_equal(gen[k], GENS);
        assert_int_equal(rep[k].gen_tokens, GENS);
        assert_int_equal(rep[k].commit_rc, SB_OK);
        size_t nt;
        const uint32_t *t = sb_rt_session_tokens(s[k], &nt);
        assert_int_equal(nt, N + GENS);
        assert_memory_equal(t + N, want[k], sizeof want[k]);
        assert_memory_equal(sb_rt_session_logits(s[k]), want_lg[k], V * sizeof(float));
        sb_rt_sampler_fini(&smp[k]);
        sb_rt_session_free(s[k]);
    }
    assert_int_equal(rep[0].cache_mode, SB_RT_CACHE_COLD);
    bank_close(&b);
    sb_rt_model_free(m);
}

static void stepwise_shares_passes(void **state)
{
    (void)state;
    stepwise_shares_passes_one("tiny");
    stepwise_shares_passes_one("tiny-hybrid"); /* recurrent state per sequence */
}

/* Turns stopped early: ended mid-prefill (the computed positions are
 * committed), ended with a pushed token that never ran (left out), and
 * aborted (the session unchanged). */
static void stepwise_stopped(void **state)
{
    (void)state;
    sb_rt_model *m = load_tiny("f32", 22);
    uint32_t in[N];
    tokens_for(m, in, N, 5);
    bank b;
    bank_open(&b, m, NULL, NULL, 64u << 20);
    sb_rt_session *s;
    assert_int_equal(sb_rt_session_new(m, b.ctx, b.ns, &s), SB_OK);
    sb_rt_turn r;
    /* 1. ended after one chunk of 40 prompt positions */
    assert_int_equal(sb_rt_session_begin(s, in, N, 4, &r), SB_OK);
    assert_int_equal(sb_rt_session_state(s), SB_RT_TURN_PREFILL);
    assert_int_equal(sb_rt_session_begin(s, in, N, 4, &r), SB_ERR_INVAL); /* open */
    sb_rt_seq_step st;
    assert_int_equal(sb_rt_session_next(s, 40, &st), 40);
    assert_null(st.logits); /* not the prompt's end */
    assert_int_equal(sb_rt_forward_multi(b.ctx, &st, 1), SB_OK);
    assert_int_equal(sb_rt_session_ran(s, &st), SB_OK);
    assert_int_equal(sb_rt_session_end(s, &r), SB_OK);
    assert_int_equal(sb_rt_session_state(s), SB_RT_TURN_NONE);
    size_t nt;
    sb_rt_session_tokens(s, &nt);
    assert_int_equal(nt, 40);
    assert_int_equal(r.commit_rc, SB_OK);
    /* 2. a fresh session on the whole prompt finds those 40 */
    sb_rt_session *s2;
    assert_int_equal(sb_rt_session_new(m, b.ctx, b.ns, &s2), SB_OK);
    assert_int_equal(sb_rt_session_begin(s2, in, N, 4, &r), SB_OK);
    assert_int_equal(r.cached_tokens, 40);
    assert_int_equal(sb_rt_session_next(s2, SIZE_MAX, &st), N - 40);
    assert_non_null(st.logits);
    assert_int_equal(sb_rt_forward_multi(b.ctx, &st, 1), SB_OK);
    assert_int_equal(sb_rt_session_ran(s2, &st), SB_OK);
    assert_int_equal(sb_rt_session_state(s2), SB_RT_TURN_SAMPLE);
    assert_int_equal(sb_rt_session_push(s2, 7), SB_OK);
    assert_int_equal(sb_rt_session_push(s2, 8), SB_ERR_INVAL); /* RUN, not SAMPLE */
    /* ended with 7 pushed and not run: it is not among the tokens */
    assert_int_equal(sb_rt_session_end(s2, &r), SB_OK);
    sb_rt_session_tokens(s2, &nt);
    assert_int_equal(nt, N);
    assert_int_equal(r.gen_tokens, 1);
    /* 3. aborted: the tokens stay */
    uint32_t more[3] = { 1, 2, 3 };
    assert_int_equal(sb_rt_session_begin(s2, more, 3, 4, &r), SB_OK);
    assert_int_equal(r.cached_tokens, N); /* the point state at N is there... */
    sb_rt_session_abort(s2);
    sb_rt_session_tokens(s2, &nt);
    assert_int_equal(nt, N);
    assert_int_equal(sb_rt_session_end(s2, &r), SB_ERR_INVAL); /* nothing open */
    sb_rt_session_free(s2);
    sb_rt_session_free(s);
    bank_close(&b);
    sb_rt_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(warm_vs_cold_f32),     cmocka_unit_test(warm_vs_cold_f16),
        cmocka_unit_test(warm_vs_cold_llama3),  cmocka_unit_test(warm_vs_cold_qwen2),
        cmocka_unit_test(warm_vs_cold_qwen3),   cmocka_unit_test(warm_vs_cold_q4_k_m),
        cmocka_unit_test(warm_vs_cold_q5_0),
        cmocka_unit_test(second_turn_is_warm),  cmocka_unit_test(ssd_after_reopen),
        cmocka_unit_test(scopes_share_nothing), cmocka_unit_test(evicted_falls_back_cold),
        cmocka_unit_test(session_files),        cmocka_unit_test(stepwise_shares_passes),
        cmocka_unit_test(stepwise_stopped),     cmocka_unit_test(hybrid_divergence_f32),
        cmocka_unit_test(hybrid_divergence_q8_0), cmocka_unit_test(hybrid_policy),
        cmocka_unit_test(hybrid_shared_prefix),   cmocka_unit_test(hybrid_restart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
