/* test_forward.c -- the forward pass over paged KV (runtime/model/forward.h).
 *
 * Description: tiny models from the generator, one per architecture (the
 * presets tiny: llama; tiny-llama3: llama with rope_freqs, tied; tiny-qwen2:
 * biases, NEOX RoPE; tiny-qwen3: per-head q/k norms, head_dim 32 with
 * q_dim 128 != dim 64), with F32, F16 and Q8_0 weights, and the other
 * weight types (BF16, Q4_0, Q4_1, Q5_1, Q5_K, Q6_K and the Q4_K_M mix; the
 * K types on a dim 256 shape so their 256-value blocks apply), are run
 *   - against a plain reference written here from the architectures'
 *     definitions (contiguous KV, every weight dequantized to float, sums
 *     in double, RoPE angles derived from the hyperparameters rather than
 *     the model's table; against Q8_0 weights the inputs rounded to Q8_0
 *     as the kernels do): logits agree within 1e-3 of their scale (1e-2
 *     for Q8_0, where a rounding can land a step apart, and then 90 % of
 *     the positions within 1e-4; 5e-2 for the other quantized types, whose
 *     matmuls quantize their inputs in ways the reference does not copy),
 *     so paging, GQA, head sizes, RoPE variants and scaling, biases, q/k
 *     norms and every weight type's embedding lookup are wired right;
 *   - with rope_freqs, linear and YaRN scaling, and with the q/k norm
 *     weights changed: the logits move (the feature is not a no-op) and
 *     still match the reference; the reference without the q/k norm does
 *     not match qwen3; scaling type "none" ignores its factor;
 *   - batched versus token by token, at several batch sizes and thread
 *     counts: logits bit-identical, for every architecture;
 *   - from a bank match (pages by reference, the tail page copied on write)
 *     versus cold, at every prefix length, for every architecture: logits
 *     bit-identical;
 *   - several sequences in shared passes (sb_rt_forward_multi), joining at
 *     different steps so prompts and decode steps mix, over a small n_batch
 *     that splits prompts across passes: every sequence's logits
 *     bit-identical to running it alone, for every architecture; a failing
 *     step leaves its sequence unchanged and the others run;
 * and seeded generation is deterministic.
 */
#define _GNU_SOURCE /* M_PI */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "kernels/quant.h"
#include "model/forward.h"
#include "model/kv.h"
#include "make_model/make_model.h"
#include "model/model.h"
#include "rt_ref.h"
#include "rt_world.h"
#include "model/sample.h"

#define PROMPT 70              /* tokens: several pages of 16, a partial tail */

/* ---- fixtures --------------------------------------------------------------------- */

/* Generator options: preset with dtype, seed 7. */
static sb_rt_make_opts opts(const char *preset, const char *dtype)
{
    sb_rt_make_opts o;
    assert_int_equal(sb_rt_make_opts_preset(&o, preset), SB_OK);
    assert_int_equal(sb_rt_make_opts_set(&o, "dtype", dtype), SB_OK);
    if (strstr(dtype, "_k")) { /* rows of 256 for the K types to apply */
        assert_int_equal(sb_rt_make_opts_set(&o, "dim", "256"), SB_OK);
        assert_int_equal(sb_rt_make_opts_set(&o, "ff", "512"), SB_OK);
    }
    o.seed = 7;
    return o;
}

static void make(world *w, const char *preset, const char *dtype, uint32_t page_tokens)
{
    sb_rt_make_opts o = opts(preset, dtype);
    rw_make(w, "test_forward", &o, page_tokens, 64u << 20);
}

/* ---- the reference -------------------------------------------------------------------- */

/* RoPE's angle per position for pair j and the magnitude of cos/sin,
 * written out from model.h's definition and the hyperparameters (not from
 * the model's table): theta_j = b^(-2j/d) / f_j, divided by s (linear),
 * or YaRN's blend of the two by the ramp over [lo, hi]. */
static double ref_theta(const sb_rt_model *m, uint32_t j, double *mscale)
{
    const sb_rt_hparams *hp = &m->hp;
    double d = hp->head_dim, b = hp->rope_base, s = hp->rope_scale;
    double e = pow(b, -2.0 * j / d) / (m->rope_freqs ? m->rope_freqs[j] : 1.0);
    *mscale = hp->rope_attn_factor;
    switch (hp->rope_scaling) {
    case SB_RT_ROPE_NONE:
        return e;
    case SB_RT_ROPE_LINEAR:
        return e / s;
    case SB_RT_ROPE_YARN: {
        double L = hp->rope_ctx_orig;
        double lo = floor(d * log(L / (2 * M_PI * 32)) / (2 * log(b)));
        double hi = ceil(d * log(L / (2 * M_PI)) / (2 * log(b)));
        lo = lo < 0 ? 0 : lo;
        hi = hi > d - 1 ? d - 1 : hi;
        double y = (j - lo) / (hi - lo > 0.001 ? hi - lo : 0.001);
        double r = y <= 0 ? 1 : y >= 1 ? 0 : 1 - y;
        if (s > 1)
            *mscale *= 1 + 0.1 * log(s);
        return e / s * (1 - r) + e * r;
    }
    }
    fail_msg("unknown scaling");
    return 0;
}

/* Every position's logits, one token at a time, contiguous float KV
 * (rounded through F16 as the pages store it). qk_norm false leaves out
 * qwen3's per-head norms (to show they matter). */
static float *reference(const sb_rt_model *m, const uint32_t *t, size_t n, bool qk_norm)
{
    const sb_rt_hparams *hp = &m->hp;
    uint32_t D = hp->dim, hd = hp->head_dim, qd = hp->n_heads * hd,
             kvd = hp->n_kv_heads * hd, F = hp->n_ff, V = hp->n_vocab;
    float *K = calloc((size_t)hp->n_layers * n * kvd, sizeof *K);
    float *Vv = calloc((size_t)hp->n_layers * n * kvd, sizeof *Vv);
    float *lg = malloc(n * V * sizeof *lg);
    float *x = malloc(D * sizeof *x), *xb = malloc(D * sizeof *xb), *q = malloc(qd * sizeof *q),
          *k = malloc(kvd * sizeof *k), *v = malloc(kvd * sizeof *v),
          *att = malloc(qd * sizeof *att), *o = malloc(D * sizeof *o),
          *g = malloc(F * sizeof *g), *u = malloc(F * sizeof *u), *e = malloc(D * V * sizeof *e),
          *sc = malloc(n * sizeof *sc);
    assert_true(K && Vv && lg && x && xb && q && k && v && att && o && g && u && e && sc);
    rr_deq(&m->embd, e);
    /* llama rotates adjacent pairs; qwen2 and qwen3 the two halves */
    bool neox = hp->arch == SB_RT_ARCH_QWEN2 || hp->arch == SB_RT_ARCH_QWEN3;
    for (size_t p = 0; p < n; p++) {
        memcpy(x, e + (size_t)t[p] * D, D * sizeof *x);
        for (uint32_t l = 0; l < hp->n_layers; l++) {
            const sb_rt_layer *L = &m->layers[l];
            rr_rms(xb, x, L->attn_norm, D, hp->rms_eps);
            rr_mv(&L->wq, xb, q);
            rr_mv(&L->wk, xb, k);
            rr_mv(&L->wv, xb, v);
            for (uint32_t i = 0; L->bq && i < qd; i++)
                q[i] += L->bq[i];
            for (uint32_t i = 0; L->bk && i < kvd; i++)
                k[i] += L->bk[i], v[i] += L->bv[i];
            if (hp->arch == SB_RT_ARCH_QWEN3 && qk_norm) {
                for (uint32_t h = 0; h < hp->n_heads; h++)
                    rr_rms(q + h * hd, q + h * hd, L->q_norm, hd, hp->rms_eps);
                for (uint32_t h = 0; h < hp->n_kv_heads; h++)
                    rr_rms(k + h * hd, k + h * hd, L->k_norm, hd, hp->rms_eps);
            }
            for (int which = 0; which < 2; which++) {
                float *z = which ? k : q;
                uint32_t heads = which ? hp->n_kv_heads : hp->n_heads;
                for (uint32_t h = 0; h < heads; h++)
                    for (uint32_t j = 0; j < hd / 2; j++) {
                        uint32_t a = h * hd + (neox ? j : 2 * j);
                        uint32_t b = h * hd + (neox ? j + hd / 2 : 2 * j + 1);
                        double ms, th = (double)p * ref_theta(m, j, &ms);
                        double x0 = z[a], x1 = z[b];
                        z[a] = (float)(ms * (x0 * cos(th) - x1 * sin(th)));
                        z[b] = (float)(ms * (x0 * sin(th) + x1 * cos(th)));
                    }
            }
            rr_attend(hp, q, k, v, K + (size_t)l * n * kvd, Vv + (size_t)l * n * kvd, p, sc,
                      att);
            rr_mv(&L->wo, att, o);
            for (uint32_t i = 0; i < D; i++)
                x[i] += o[i];
            rr_rms(xb, x, L->ffn_norm, D, hp->rms_eps);
            rr_mv(&L->gate, xb, g);
            rr_mv(&L->up, xb, u);
            for (uint32_t i = 0; i < F; i++)
                g[i] = (float)(g[i] / (1.0 + exp(-(double)g[i])) * u[i]);
            rr_mv(&L->down, g, o);
            for (uint32_t i = 0; i < D; i++)
                x[i] += o[i];
        }
        rr_rms(xb, x, m->out_norm, D, hp->rms_eps);
        rr_mv(&m->output, xb, lg + p * V);
    }
    free(K), free(Vv), free(x), free(xb), free(q), free(k), free(v), free(att), free(o);
    free(g), free(u), free(e), free(sc);
    return lg;
}

/* ---- tests -------------------------------------------------------------------------- */

/* The forward pass's logits for the world's model, checked against the
 * reference within tol (relative, per position) and for not being
 * degenerate. Returns them (the caller frees). */
static float *check_world(world *w, const char *what, double tol)
{
    uint32_t t[PROMPT];
    rw_tokens(w, t, PROMPT, 1);
    float *got = rw_run_all(w, t, PROMPT, 512, 2);
    float *want = reference(w->m, t, PROMPT, true);
    size_t V = w->m->hp.n_vocab;
    for (size_t i = 0; i < PROMPT * V; i++)
        assert_true(isfinite(got[i]));
    double err = rr_max_rel_diff(want, got, PROMPT, V);
    if (err > tol)
        fail_msg("%s: logits differ from the reference by %g of their scale (bound %g)", what,
                 err, tol);
    /* Where the reference rounds as the kernels do (Q8_0), the bulk still
     * agrees tightly: at most a tenth of the positions beyond 1e-4. */
    size_t loose = 0;
    for (size_t p = 0; tol == 1e-2 && p < PROMPT; p++)
        loose += rr_max_rel_diff(want + p * V, got + p * V, 1, V) > 1e-4;
    if (loose > PROMPT / 10)
        fail_msg("%s: %zu of %d positions differ from the reference by more than 1e-4", what,
                 loose, PROMPT);
    /* The logits are not degenerate: no row is constant, and the positions
     * do not all agree on their most likely token. */
    size_t first_best = 0, differ = 0;
    for (size_t p = 0; p < PROMPT; p++) {
        size_t best = 0;
        float lo = got[p * V], hi = got[p * V];
        for (size_t i = 1; i < V; i++) {
            best = got[p * V + i] > got[p * V + best] ? i : best;
            lo = fminf(lo, got[p * V + i]);
            hi = fmaxf(hi, got[p * V + i]);
        }
        assert_true(hi - lo > 1e-3f);
        if (p == 0)
            first_best = best;
        differ += best != first_best;
    }
    assert_true(differ > 0);
    free(want);
    return got;
}

/* Q8_0 matmuls round their input rows to Q8_0 (kernels.h) and the
 * reference does the same; where an input lies near a half step the two
 * (which differ in their last bits) can round it a step apart, 1/127 of
 * its block's largest value, which moves that position's logits by up to
 * about 1e-2 of their scale (seen: 6e-3 at 3 of 70 positions, the rest
 * within 1e-6). The other quantized types quantize their inputs too (to
 * 32-value blocks, or 256-value ones for the K types: quant.h), which the
 * reference does not copy: an error of up to 1/254 of each block's
 * largest value per input, which on the tied miniatures (logits near 1)
 * reached 3.3e-2 of the scale (tiny-qwen2, Q6_K): bound 5e-2. A wiring
 * fault (a wrong RoPE, scale or block layout) is off by the whole scale;
 * the kernels themselves are checked bit for bit in test_kernels. */
static double tol_for(const char *dtype)
{
    if (!strcmp(dtype, "f32") || !strcmp(dtype, "f16") || !strcmp(dtype, "bf16"))
        return 1e-3;
    return strcmp(dtype, "q8_0") ? 5e-2 : 1e-2;
}

/* The model o describes against the reference; its logits (caller frees). */
static float *check_opts(const sb_rt_make_opts *o, const char *what, const char *dtype)
{
    world w;
    rw_make(&w, "test_forward", o, 16, 64u << 20);
    float *got = check_world(&w, what, tol_for(dtype));
    rw_unmake(&w);
    return got;
}

static void check_reference(const char *preset, const char *dtype)
{
    char what[64];
    snprintf(what, sizeof what, "%s %s", preset, dtype);
    sb_rt_make_opts o = opts(preset, dtype);
    free(check_opts(&o, what, dtype));
}

static void reference_llama_f32(void **s) { (void)s; check_reference("tiny", "f32"); }
static void reference_llama_f16(void **s) { (void)s; check_reference("tiny", "f16"); }
static void reference_llama_q8_0(void **s) { (void)s; check_reference("tiny", "q8_0"); }
static void reference_llama3_f32(void **s) { (void)s; check_reference("tiny-llama3", "f32"); }
static void reference_llama3_f16(void **s) { (void)s; check_reference("tiny-llama3", "f16"); }
static void reference_qwen2_f32(void **s) { (void)s; check_reference("tiny-qwen2", "f32"); }
static void reference_qwen2_f16(void **s) { (void)s; check_reference("tiny-qwen2", "f16"); }
static void reference_qwen3_f32(void **s) { (void)s; check_reference("tiny-qwen3", "f32"); }
static void reference_qwen3_f16(void **s) { (void)s; check_reference("tiny-qwen3", "f16"); }
static void reference_qwen3_q8_0(void **s) { (void)s; check_reference("tiny-qwen3", "q8_0"); }
static void reference_llama_bf16(void **s) { (void)s; check_reference("tiny", "bf16"); }
static void reference_llama_q4_0(void **s) { (void)s; check_reference("tiny", "q4_0"); }
static void reference_llama_q5_1(void **s) { (void)s; check_reference("tiny", "q5_1"); }
static void reference_llama_q4_k_m(void **s) { (void)s; check_reference("tiny", "q4_k_m"); }
static void reference_qwen2_q6_k(void **s) { (void)s; check_reference("tiny-qwen2", "q6_k"); }

/* Llama 3's rope_freqs: the file holds Llama 3.1's divisors (computed here
 * from the published rule), the loader takes them, and they change the
 * logits, which still match the reference. An original context of 64
 * puts the blend over the high-frequency pairs the test's 70 positions
 * turn through. */
static void rope_freqs_matter(void **state)
{
    (void)state;
    sb_rt_make_opts o = opts("tiny-llama3", "f32");
    assert_int_equal(sb_rt_make_opts_set(&o, "rope-orig-ctx", "64"), SB_OK);
    world w;
    rw_make(&w, "test_forward", &o, 16, 64u << 20);
    const sb_rt_hparams *hp = &w.m->hp;
    assert_non_null(w.m->rope_freqs);
    assert_true(hp->tied && hp->rope_base == 5e5f);
    uint32_t d = hp->head_dim, n_blend = 0;
    for (uint32_t j = 0; j < d / 2; j++) {
        double wavelen = 2 * M_PI * pow(5e5, 2.0 * j / d), want;
        if (wavelen < 64 / 4.0) {
            want = 1;
        } else if (wavelen > 64) {
            want = 32;
        } else { /* smooth blend between 1 and 1/32 of the frequency */
            double k = (64 / wavelen - 1) / 3;
            want = 1 / ((1 - k) / 32 + k);
            n_blend++;
        }
        assert_float_equal(w.m->rope_freqs[j], want, 1e-5 * want);
        assert_float_equal(w.m->rope[j], pow(5e5, -2.0 * j / d) / want, 1e-12);
    }
    assert_true(n_blend > 0 && w.m->rope_freqs[0] == 1 && w.m->rope_freqs[d / 2 - 1] == 32);
    float *with = check_world(&w, "tiny-llama3 with rope_freqs", 1e-3);
    rw_unmake(&w);
    assert_int_equal(sb_rt_make_opts_set(&o, "rope-freqs", "0"), SB_OK);
    rw_make(&w, "test_forward", &o, 16, 64u << 20);
    assert_null(w.m->rope_freqs);
    float *without = check_world(&w, "tiny-llama3 without rope_freqs", 1e-3);
    double moved = rr_max_rel_diff(with, without, PROMPT, w.m->hp.n_vocab);
    if (moved < 1e-2)
        fail_msg("rope_freqs moved the logits by only %g of their scale", moved);
    rw_unmake(&w);
    free(with), free(without);
}

/* rope.scaling: linear and YaRN change the logits and match the
 * reference; YaRN's table is pinned by hand; "none" ignores its factor. */
static void rope_scaling_matters(void **state)
{
    (void)state;
    sb_rt_make_opts o = opts("tiny-qwen2", "f32");
    float *plain = check_opts(&o, "tiny-qwen2", "f32");
    assert_int_equal(sb_rt_make_opts_set(&o, "rope-scaling", "linear"), SB_OK);
    assert_int_equal(sb_rt_make_opts_set(&o, "rope-scale", "4"), SB_OK);
    float *linear = check_opts(&o, "tiny-qwen2 linear 4", "f32");
    assert_int_equal(sb_rt_make_opts_set(&o, "rope-scaling", "yarn"), SB_OK);
    assert_int_equal(sb_rt_make_opts_set(&o, "rope-orig-ctx", "512"), SB_OK);
    world w;
    rw_make(&w, "test_forward", &o, 16, 64u << 20);
    /* d 16, base 1e6, original context 512: c(32) = 0.54, c(1) = 2.55, so
     * the ramp runs over [0, 3]: r = 1, 2/3, 1/3, then 0 */
    const double r[8] = { 1, 2.0 / 3, 1.0 / 3, 0, 0, 0, 0, 0 };
    assert_int_equal(w.m->hp.rope_scaling, SB_RT_ROPE_YARN);
    for (uint32_t j = 0; j < 8; j++) {
        double e = pow(1e6, -2.0 * j / 16);
        assert_float_equal(w.m->rope[j], e / 4 * (1 - r[j]) + e * r[j], 1e-12);
    }
    assert_float_equal(w.m->rope_mscale, 1 + 0.1 * log(4), 1e-6);
    float *yarn = check_world(&w, "tiny-qwen2 yarn 4", 1e-3);
    rw_unmake(&w);
    size_t V = 512;
    double d1 = rr_max_rel_diff(plain, linear, PROMPT, V), d2 = rr_max_rel_diff(linear, yarn, PROMPT, V);
    if (d1 < 1e-2 || d2 < 1e-2)
        fail_msg("scaling moved the logits too little: linear %g, yarn vs linear %g", d1, d2);
    /* "none" with a factor: no scaling at all, bit for bit */
    assert_int_equal(sb_rt_make_opts_set(&o, "rope-scaling", "none"), SB_OK);
    float *none = check_opts(&o, "tiny-qwen2 none 4", "f32");
    assert_memory_equal(none, plain, PROMPT * V * sizeof *none);
    /* YaRN on qwen3 (its head_dim 32) and on llama with rope_freqs */
    o = opts("tiny-qwen3", "f32");
    assert_int_equal(sb_rt_make_opts_set(&o, "rope-scaling", "yarn"), SB_OK);
    assert_int_equal(sb_rt_make_opts_set(&o, "rope-scale", "8"), SB_OK);
    assert_int_equal(sb_rt_make_opts_set(&o, "rope-orig-ctx", "256"), SB_OK);
    free(check_opts(&o, "tiny-qwen3 yarn 8", "f32"));
    o = opts("tiny-llama3", "f32");
    assert_int_equal(sb_rt_make_opts_set(&o, "rope-scaling", "yarn"), SB_OK);
    assert_int_equal(sb_rt_make_opts_set(&o, "rope-scale", "4"), SB_OK);
    assert_int_equal(sb_rt_make_opts_set(&o, "rope-orig-ctx", "128"), SB_OK);
    free(check_opts(&o, "tiny-llama3 yarn 4", "f32"));
    free(plain), free(linear), free(yarn), free(none);
}

/* qwen3's per-head q/k norms are applied: the reference without them is
 * far off, and changing their weights moves the logits, which still match
 * the reference. */
static void qk_norm_applied(void **state)
{
    (void)state;
    world w;
    make(&w, "tiny-qwen3", "f32", 16);
    const sb_rt_hparams *hp = &w.m->hp;
    assert_true(hp->qk_norm && hp->head_dim == 32 && hp->n_heads * hp->head_dim == 128 &&
                hp->dim == 64 && w.m->layers[1].q_norm && w.m->layers[1].k_norm &&
                !w.m->layers[0].bq);
    float *got = check_world(&w, "tiny-qwen3", 1e-3);
    uint32_t t[PROMPT];
    rw_tokens(&w, t, PROMPT, 1);
    size_t V = hp->n_vocab;
    float *no_norm = reference(w.m, t, PROMPT, false);
    double off = rr_max_rel_diff(no_norm, got, PROMPT, V);
    if (off < 1e-2)
        fail_msg("the reference without q/k norms differs by only %g", off);
    for (uint32_t l = 0; l < hp->n_layers; l++)
        for (uint32_t i = 0; i < hp->head_dim; i++)
            w.m->layers[l].q_norm[i] *= 3, w.m->layers[l].k_norm[i] *= 0.5f + (float)(i % 3);
    float *changed = check_world(&w, "tiny-qwen3, norm weights changed", 1e-3);
    if (rr_max_rel_diff(got, changed, PROMPT, V) < 1e-2)
        fail_msg("changing the q/k norm weights did not move the logits");
    free(got), free(no_norm), free(changed);
    rw_unmake(&w);
}

/* One model of each architecture and type the invariance tests run. */
static const struct { const char *preset, *dtype; } every_arch[] = {
    { "tiny", "f32" },        { "tiny", "f16" },       { "tiny", "q8_0" },
    { "tiny", "q4_1" },       { "tiny", "q5_k" },      { "tiny", "q4_k_m" },
    { "tiny-llama3", "f32" }, { "tiny-qwen2", "f16" }, { "tiny-qwen3", "f32" },
    { "tiny-qwen3", "q8_0" },
};

/* Batched, token by token, odd batch sizes, 1-3 threads: identical bits. */
static void batching_is_invisible(void **state)
{
    (void)state;
    for (size_t d = 0; d < sizeof every_arch / sizeof *every_arch; d++) {
        world w;
        make(&w, every_arch[d].preset, every_arch[d].dtype, 16);
        uint32_t t[PROMPT];
        rw_tokens(&w, t, PROMPT, 2);
        float *a = rw_run_all(&w, t, PROMPT, 512, 2);
        size_t bytes = (size_t)PROMPT * w.m->hp.n_vocab * sizeof(float);
        const struct { uint32_t batch; unsigned threads; } v[] = { { 1, 1 }, { 7, 2 }, { 16, 3 },
                                                                   { 33, 1 } };
        for (size_t k = 0; k < sizeof v / sizeof *v; k++) {
            float *b = rw_run_all(&w, t, PROMPT, v[k].batch, v[k].threads);
            if (memcmp(a, b, bytes))
                fail_msg("%s %s: batch %u threads %u differs from one batch",
                         every_arch[d].preset, every_arch[d].dtype, v[k].batch, v[k].threads);
            free(b);
        }
        free(a);
        rw_unmake(&w);
    }
}

/* A sequence committed to the bank, then matched at every length L and
 * continued from the matched pages: logits of positions L.. equal the cold
 * run's, bit for bit. */
static void warm_equals_cold_one(const char *preset, const char *dtype)
{
    world w;
    make(&w, preset, dtype, 16);
    size_t V = w.m->hp.n_vocab;
    uint32_t t[PROMPT];
    rw_tokens(&w, t, PROMPT, 3);
    float *cold = rw_run_all(&w, t, PROMPT, 512, 2);
    sb_rt_ctx *c;
    assert_int_equal(sb_rt_ctx_new(w.m, 2, 64, &c), SB_OK);
    sb_rt_kv kv;
    assert_int_equal(sb_rt_kv_init(&kv, w.m, w.ns), SB_OK);
    assert_int_equal(sb_rt_forward(c, &kv, t, PROMPT, SB_RT_LOGITS_NONE, NULL), SB_OK);
    assert_int_equal(sb_rt_kv_commit(&kv, NULL, NULL), SB_OK);
    sb_rt_kv_fini(&kv);
    float *lg = malloc(PROMPT * V * sizeof *lg);
    for (size_t L = 1; L < PROMPT; L++) {
        sb_match *m;
        assert_int_equal(sb_ns_match(w.ns, t, L, &m), SB_OK);
        sb_match_info info;
        assert_int_equal(sb_match_get_info(m, &info), SB_OK);
        assert_int_equal(info.n_tokens, L);
        assert_int_equal(sb_rt_kv_init(&kv, w.m, w.ns), SB_OK);
        assert_int_equal(sb_rt_kv_adopt(&kv, m, t, L), SB_OK);
        sb_match_release(m);
        assert_int_equal(sb_rt_forward(c, &kv, t + L, PROMPT - L, SB_RT_LOGITS_ALL, lg), SB_OK);
        if (memcmp(lg, cold + L * V, (PROMPT - L) * V * sizeof *lg))
            fail_msg("%s %s: continuing from a match of %zu tokens differs from cold", preset,
                     dtype, L);
        sb_rt_kv_fini(&kv);
        /* The committed pages were not written through. */
        assert_int_equal(sb_store_check(w.st), SB_OK);
    }
    /* And the bank's copy still gives the cold logits. */
    sb_match *m;
    assert_int_equal(sb_ns_match(w.ns, t, PROMPT, &m), SB_OK);
    assert_int_equal(sb_rt_kv_init(&kv, w.m, w.ns), SB_OK);
    assert_int_equal(sb_rt_kv_adopt(&kv, m, t, PROMPT - 1), SB_OK);
    sb_match_release(m);
    assert_int_equal(sb_rt_forward(c, &kv, t + PROMPT - 1, 1, SB_RT_LOGITS_LAST, lg), SB_OK);
    assert_memory_equal(lg, cold + (PROMPT - 1) * V, V * sizeof *lg);
    sb_rt_kv_fini(&kv);
    free(lg);
    free(cold);
    sb_rt_ctx_free(c);
    rw_unmake(&w);
}

static void warm_equals_cold(void **state)
{
    (void)state;
    for (size_t d = 0; d < sizeof every_arch / sizeof *every_arch; d++)
        warm_equals_cold_one(every_arch[d].preset, every_arch[d].dtype);
}

/* Generation from a seed: the same seed the same tokens; greedy is the
 * argmax. */
static void generation_is_seeded(void **state)
{
    (void)state;
    world w;
    make(&w, "tiny", "f32", 16);
    size_t V = w.m->hp.n_vocab;
    uint32_t prompt[8];
    rw_tokens(&w, prompt, 8, 4);
    uint32_t out[3][24];
    const sb_rt_sampling opts[3] = { { 0.9f, 40, 0.95f, 11 }, { 0.9f, 40, 0.95f, 11 },
                                     { 0.9f, 40, 0.95f, 12 } };
    sb_rt_ctx *c;
    assert_int_equal(sb_rt_ctx_new(w.m, 2, 0, &c), SB_OK);
    float *lg = malloc(V * sizeof *lg);
    for (int r = 0; r < 3; r++) {
        sb_rt_kv kv;
        sb_rt_sampler smp;
        assert_int_equal(sb_rt_kv_init(&kv, w.m, w.ns), SB_OK);
        assert_int_equal(sb_rt_sampler_init(&smp, &opts[r], V), SB_OK);
        assert_int_equal(sb_rt_forward(c, &kv, prompt, 8, SB_RT_LOGITS_LAST, lg), SB_OK);
        for (int i = 0; i < 24; i++) {
            out[r][i] = sb_rt_sample(&smp, lg);
            assert_true(out[r][i] < V);
            assert_int_equal(sb_rt_forward(c, &kv, &out[r][i], 1, SB_RT_LOGITS_LAST, lg), SB_OK);
        }
        sb_rt_sampler_fini(&smp);
        sb_rt_kv_fini(&kv);
    }
    assert_memory_equal(out[0], out[1], sizeof out[0]);
    assert_memory_not_equal(out[0], out[2], sizeof out[0]);
    /* greedy picks the argmax */
    sb_rt_sampler smp;
    const sb_rt_sampling greedy = { 0, 0, 1, 0 };
    assert_int_equal(sb_rt_sampler_init(&smp, &greedy, V), SB_OK);
    uint32_t best = 0;
    for (size_t i = 1; i < V; i++)
        best = lg[i] > lg[best] ? (uint32_t)i : best;
    assert_int_equal(sb_rt_sample(&smp, lg), best);
    sb_rt_sampler_fini(&smp);
    free(lg);
    sb_rt_ctx_free(c);
    rw_unmake(&w);
}

/* Bad calls: a token beyond the vocabulary, past the context, nothing. */
static void bad_calls(void **state)
{
    (void)state;
    world w;
    make(&w, "tiny", "f32", 16);
    sb_rt_ctx *c;
    assert_int_equal(sb_rt_ctx_new(w.m, 1, 0, &c), SB_OK);
    sb_rt_kv kv;
    assert_int_equal(sb_rt_kv_init(&kv, w.m, w.ns), SB_OK);
    uint32_t bad = w.m->hp.n_vocab;
    float lg[1];
    assert_int_equal(sb_rt_forward(c, &kv, &bad, 1, SB_RT_LOGITS_NONE, NULL), SB_ERR_INVAL);
    assert_int_equal(sb_rt_forward(c, &kv, &bad, 0, SB_RT_LOGITS_NONE, NULL), SB_ERR_INVAL);
    assert_int_equal(sb_rt_forward(c, &kv, &bad, 1, SB_RT_LOGITS_LAST, NULL), SB_ERR_INVAL);
    (void)lg;
    kv.max_tokens = 4;
    uint32_t t[5] = { 1, 2, 3, 4, 5 };
    assert_int_equal(sb_rt_forward(c, &kv, t, 5, SB_RT_LOGITS_NONE, NULL),
                     SB_ERR_TOO_MANY_TOKENS);
    assert_int_equal(kv.n_tokens, 0);
    sb_rt_kv_fini(&kv);
    sb_rt_ctx_free(c);
    rw_unmake(&w);
}

/* ---- several sequences in shared passes ------------------------------------------------ */

#define MSEQ 5
#define MDEC 10

static uint32_t argmax(const float *lg, size_t V)
{
    uint32_t best = 0;
    for (size_t i = 1; i < V; i++)
        best = lg[i] > lg[best] ? (uint32_t)i : best;
    return best;
}

/* Sequence k alone: its prompt's last logits, then MDEC greedy steps; the
 * logits of each into out[(1 + MDEC) * V]. */
static void alone(world *w, const uint32_t *p, size_t n, float *out)
{
    size_t V = w->m->hp.n_vocab;
    sb_rt_ctx *c;
    assert_int_equal(sb_rt_ctx_new(w->m, 1, 512, &c), SB_OK);
    sb_rt_kv kv;
    assert_int_equal(sb_rt_kv_init(&kv, w->m, w->ns), SB_OK);
    assert_int_equal(sb_rt_forward(c, &kv, p, n, SB_RT_LOGITS_LAST, out), SB_OK);
    for (int d = 0; d < MDEC; d++) {
        uint32_t id = argmax(out + d * V, V);
        assert_int_equal(sb_rt_forward(c, &kv, &id, 1, SB_RT_LOGITS_LAST, out + (d + 1) * V),
                         SB_OK);
    }
    sb_rt_kv_fini(&kv);
    sb_rt_ctx_free(c);
}

/* Sequence k joins at pass k (its whole prompt as one step), then decodes
 * one token per pass; n_batch 16 packs and splits the prompts across
 * passes. Each sequence's logits equal its run alone, bit for bit. */
static void check_multi(const char *preset, const char *dtype, unsigned threads)
{
    world w;
    make(&w, preset, dtype, 16);
    size_t V = w.m->hp.n_vocab;
    static const size_t len[MSEQ] = { 70, 1, 17, 33, 5 };
    uint32_t p[MSEQ][70];
    float *ref[MSEQ], *lg[MSEQ];
    sb_rt_kv kv[MSEQ];
    for (int k = 0; k < MSEQ; k++) {
        rw_tokens(&w, p[k], len[k], 10 + (uint64_t)k);
        ref[k] = malloc((1 + MDEC) * V * sizeof(float));
        lg[k] = malloc(V * sizeof(float));
        assert_non_null(ref[k]);
        assert_non_null(lg[k]);
        alone(&w, p[k], len[k], ref[k]);
        assert_int_equal(sb_rt_kv_init(&kv[k], w.m, w.ns), SB_OK);
    }
    sb_rt_ctx *c;
    assert_int_equal(sb_rt_ctx_new(w.m, threads, 16, &c), SB_OK);
    int steps_done[MSEQ] = { 0 }; /* logits compared so far */
    uint32_t next[MSEQ];
    for (int pass = 0; pass < MSEQ + MDEC; pass++) {
        sb_rt_seq_step st[MSEQ];
        int who[MSEQ], n = 0;
        for (int k = 0; k < MSEQ && k <= pass; k++) {
            if (steps_done[k] == 1 + MDEC)
                continue;
            if (k == pass) /* joins now: its whole prompt */
                st[n] = (sb_rt_seq_step){ &kv[k], p[k], len[k], lg[k], -99 };
            else
                st[n] = (sb_rt_seq_step){ &kv[k], &next[k], 1, lg[k], -99 };
            who[n++] = k;
        }
        assert_int_equal(sb_rt_forward_multi(c, st, (size_t)n), SB_OK);
        for (int i = 0; i < n; i++) {
            int k = who[i];
            assert_int_equal(st[i].rc, SB_OK);
            if (memcmp(lg[k], ref[k] + steps_done[k] * V, V * sizeof(float)))
                fail_msg("%s %s, %u threads: sequence %d step %d differs from running alone",
                         preset, dtype, threads, k, steps_done[k]);
            next[k] = argmax(lg[k], V);
            steps_done[k]++;
        }
    }
    for (int k = 0; k < MSEQ; k++) {
        assert_int_equal(steps_done[k], 1 + MDEC);
        assert_int_equal(kv[k].n_tokens, len[k] + MDEC);
        sb_rt_kv_fini(&kv[k]);
        free(ref[k]);
        free(lg[k]);
    }
    sb_rt_ctx_free(c);
    rw_unmake(&w);
}

static void multi_llama_f16(void **s) { (void)s; check_multi("tiny", "f16", 2); }
static void multi_llama_q8_0(void **s) { (void)s; check_multi("tiny", "q8_0", 3); }
static void multi_llama3_f32(void **s) { (void)s; check_multi("tiny-llama3", "f32", 2); }
static void multi_qwen2_f32(void **s) { (void)s; check_multi("tiny-qwen2", "f32", 1); }
static void multi_qwen3_f16(void **s) { (void)s; check_multi("tiny-qwen3", "f16", 2); }

/* A step that cannot run (a bad token, past the context, a zero count)
 * gets its own rc and leaves its sequence unchanged; the others run. Bad
 * calls (a kv in two steps, NULL) run nothing. */
static void multi_failures(void **state)
{
    (void)state;
    world w;
    make(&w, "tiny", "f32", 16);
    size_t V = w.m->hp.n_vocab;
    sb_rt_ctx *c;
    assert_int_equal(sb_rt_ctx_new(w.m, 2, 8, &c), SB_OK);
    sb_rt_kv kv[4];
    for (int k = 0; k < 4; k++)
        assert_int_equal(sb_rt_kv_init(&kv[k], w.m, w.ns), SB_OK);
    kv[2].max_tokens = 4;
    uint32_t good[6], bad[2] = { 1, (uint32_t)V };
    rw_tokens(&w, good, 6, 5);
    float *lg = malloc(2 * V * sizeof *lg), *ref = malloc(V * sizeof *ref);
    sb_rt_seq_step st[4] = {
        { &kv[0], good, 6, lg, -99 }, { &kv[1], bad, 2, NULL, -99 },
        { &kv[2], good, 6, NULL, -99 }, { &kv[3], good, 0, lg + V, -99 },
    };
    assert_int_equal(sb_rt_forward_multi(c, st, 4), SB_OK);
    assert_int_equal(st[0].rc, SB_OK);
    assert_int_equal(st[1].rc, SB_ERR_INVAL);
    assert_int_equal(st[2].rc, SB_ERR_TOO_MANY_TOKENS);
    assert_int_equal(st[3].rc, SB_ERR_INVAL);
    assert_int_equal(kv[0].n_tokens, 6);
    assert_int_equal(kv[1].n_tokens + kv[2].n_tokens + kv[3].n_tokens, 0);
    sb_rt_kv ref_kv;
    assert_int_equal(sb_rt_kv_init(&ref_kv, w.m, w.ns), SB_OK);
    assert_int_equal(sb_rt_forward(c, &ref_kv, good, 6, SB_RT_LOGITS_LAST, ref), SB_OK);
    assert_memory_equal(lg, ref, V * sizeof *ref);
    sb_rt_kv_fini(&ref_kv);
    sb_rt_seq_step twice[2] = { { &kv[1], good, 1, NULL, -99 }, { &kv[1], good, 1, NULL, -99 } };
    assert_int_equal(sb_rt_forward_multi(c, twice, 2), SB_ERR_INVAL);
    assert_int_equal(kv[1].n_tokens, 0);
    sb_rt_seq_step null_tokens = { &kv[1], NULL, 1, NULL, -99 };
    assert_int_equal(sb_rt_forward_multi(c, &null_tokens, 1), SB_ERR_INVAL);
    assert_int_equal(sb_rt_forward_multi(NULL, st, 1), SB_ERR_INVAL);
    assert_int_equal(sb_rt_forward_multi(c, NULL, 0), SB_OK);
    for (int k = 0; k < 4; k++)
        sb_rt_kv_fini(&kv[k]);
    free(lg);
    free(ref);
    sb_rt_ctx_free(c);
    rw_unmake(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reference_llama_f32),  cmocka_unit_test(reference_llama_f16),
        cmocka_unit_test(reference_llama_q8_0), cmocka_unit_test(reference_llama3_f32),
        cmocka_unit_test(reference_llama3_f16), cmocka_unit_test(reference_qwen2_f32),
        cmocka_unit_test(reference_qwen2_f16),  cmocka_unit_test(reference_qwen3_f32),
        cmocka_unit_test(reference_qwen3_f16),  cmocka_unit_test(reference_qwen3_q8_0),
        cmocka_unit_test(rope_freqs_matter),    cmocka_unit_test(rope_scaling_matters),
        cmocka_unit_test(qk_norm_applied),      cmocka_unit_test(reference_llama_bf16),
        cmocka_unit_test(reference_llama_q4_0), cmocka_unit_test(reference_llama_q5_1),
        cmocka_unit_test(reference_llama_q4_k_m), cmocka_unit_test(reference_qwen2_q6_k),
        cmocka_unit_test(batching_is_invisible), cmocka_unit_test(warm_equals_cold),
        cmocka_unit_test(generation_is_seeded), cmocka_unit_test(bad_calls),
        cmocka_unit_test(multi_llama_f16),      cmocka_unit_test(multi_llama_q8_0),
        cmocka_unit_test(multi_llama3_f32),     cmocka_unit_test(multi_qwen2_f32),
        cmocka_unit_test(multi_qwen3_f16),      cmocka_unit_test(multi_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
