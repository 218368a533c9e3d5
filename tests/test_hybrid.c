/* test_hybrid.c -- hybrid models (qwen35): Gated DeltaNet and gated
 * attention layers through the forward pass (runtime/model/deltanet.h,
 * forward.h), their recurrent state resumed from a boundary (boundary.h).
 *
 * Description: the tiny-hybrid preset (4 layers alternating Gated DeltaNet
 * and gated attention, 2 key / 4 value heads so the value heads tile the
 * key heads, attention heads of 32 with RoPE on 16 dimensions) with F32,
 * F16 and Q8_0 weights, and with an MTP block the runtime does not run, is
 *   - run against a plain reference written here from the architecture's
 *     definition (the recurrence token by token in double, the conv over
 *     every earlier row, contiguous F16-rounded KV): logits agree within
 *     1e-4 of their scale, so the conv, norms, gates, decay, delta rule,
 *     head tiling, partial RoPE and output gate are wired right. Against
 *     Q8_0 weights the matmul rounds its inputs to Q8_0 (kernels.h), and an
 *     input near a half step can round a step apart in the two, which moves
 *     that position's logits by about 1e-2 of their scale; a recurrent layer
 *     carries the step into every later position. So with Q8_0 the
 *     positions before the first such step agree within 1e-4, that step
 *     comes no earlier than a quarter of the prompt (seen: position 45 of
 *     70), and every position within 5e-2 (seen: 3.8e-2);
 *   - batched versus token by token, at several batch sizes and thread
 *     counts: logits bit-identical;
 *   - committed to the bank with a boundary at every length L (on the
 *     scan's chunk grid and between: a boundary carries its open chunk's
 *     rows), matched, its pages adopted and the boundary's state loaded,
 *     and continued in one batch, in batches of 5 or token by token (as
 *     decode runs): logits of positions L.. equal the cold run's, bit for
 *     bit;
 *   - refused to continue from adopted pages without a boundary
 *     (SB_ERR_NO_POINT), and a boundary of another position is refused.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "model/boundary.h"
#include "model/deltanet.h"
#include "model/forward.h"
#include "model/kv.h"
#include "make_model/make_model.h"
#include "model/model.h"
#include "rt_ref.h"
#include "rt_world.h"

#define PROMPT 70              /* tokens: several pages of 16, a partial tail */

/* ---- fixtures --------------------------------------------------------------------- */

static void make_opts(world *w, const sb_rt_make_opts *o)
{
    rw_make(w, "test_hybrid", o, 16, 256u << 20);
    sb_layout layout;
    uint32_t bpt[2 * 8];
    assert_int_equal(sb_rt_kv_layout(w->m, 16, bpt, &layout), SB_OK);
    assert_true(layout.flags & SB_LAYOUT_POINT_REQUIRED);
    assert_int_equal(layout.n_tensors, 2 * w->m->hp.n_attn);
}

static sb_rt_make_opts opts(const char *dtype, uint32_t mtp)
{
    sb_rt_make_opts o;
    assert_int_equal(sb_rt_make_opts_preset(&o, "tiny-hybrid"), SB_OK);
    assert_int_equal(sb_rt_make_opts_set(&o, "dtype", dtype), SB_OK);
    o.seed = 7;
    o.mtp = mtp;
    return o;
}

static void make(world *w, const char *dtype)
{
    sb_rt_make_opts o = opts(dtype, 0);
    make_opts(w, &o);
}

/* ---- the reference -------------------------------------------------------------------- */

static double sigm(double x)
{
    return 1 / (1 + exp(-x));
}

/* Pair j of the partial RoPE turns with the position (model.h's M-RoPE
 * rule for text), written out from the sections. */
static bool text_pair(const sb_rt_hparams *hp, uint32_t j)
{
    const uint32_t *s = hp->rope_sections;
    uint32_t sum = s[0] + s[1] + s[2] + s[3];
    if (!sum)
        return true;
    uint32_t k = j % sum;
    return (k % 3 == 0 && k < 3 * s[0]) || (k % 3 == 1 && k < 3 * s[1]) ||
           (k % 3 == 2 && k < 3 * s[2]);
}

/* Every position's logits, one token at a time: deltanet.h's steps 1-6
 * with the state in double, forward.h's gated attention over contiguous
 * F16-rounded K and V. */
static float *reference(const sb_rt_model *m, const uint32_t *t, size_t n)
{
    const sb_rt_hparams *hp = &m->hp;
    uint32_t D = hp->dim, hd = hp->head_dim, qd = hp->n_heads * hd,
             kvd = hp->n_kv_heads * hd, F = hp->n_ff, V = hp->n_vocab;
    uint32_t nk = hp->ssm_k_heads, nv = hp->ssm_v_heads, d = hp->ssm_head_dim;
    uint32_t kd = nk * d, vd = nv * d, cd = 2 * kd + vd, K = hp->ssm_conv, L = hp->n_layers;
    float *Kc = calloc((size_t)L * n * kvd, sizeof *Kc), *Vc = calloc((size_t)L * n * kvd, 4);
    float *mixed = calloc((size_t)L * n * cd, sizeof *mixed); /* every row, per layer */
    double *S = calloc((size_t)L * nv * d * d, sizeof *S);
    float *lg = malloc(n * V * sizeof *lg), *x = malloc(D * 4), *xb = malloc(D * 4),
          *qg = malloc(2 * qd * 4), *q = malloc(qd * 4), *k = malloc(kvd * 4),
          *v = malloc(kvd * 4), *att = malloc(qd * 4), *o = malloc((D > vd ? D : vd) * 4),
          *g = malloc(F * 4), *u = malloc(F * 4), *e = malloc((size_t)D * V * 4),
          *sc = malloc(n * 4), *z = malloc(vd * 4), *bb = malloc(nv * 4), *aa = malloc(nv * 4),
          *c = malloc(cd * 4), *oo = malloc(vd * 4);
    assert_true(Kc && Vc && mixed && S && lg && x && xb && qg && q && k && v && att && o &&
                g && u && e && sc && z && bb && aa && c && oo);
    rr_deq(&m->embd, e);
    for (size_t p = 0; p < n; p++) {
        memcpy(x, e + (size_t)t[p] * D, D * sizeof *x);
        for (uint32_t l = 0; l < L; l++) {
            const sb_rt_layer *Ly = &m->layers[l];
            rr_rms(xb, x, Ly->attn_norm, D, hp->rms_eps);
            if (Ly->rec) {
                float *mx = mixed + (size_t)l * n * cd;
                rr_mv(&Ly->wqkv, xb, mx + p * cd);
                rr_mv(&Ly->wz, xb, z);
                rr_mv(&Ly->wbeta, xb, bb);
                rr_mv(&Ly->walpha, xb, aa);
                for (uint32_t ch = 0; ch < cd; ch++) { /* the conv, then SiLU */
                    double s = 0;
                    for (uint32_t i = 0; i < K; i++) {
                        long r = (long)p - (long)(K - 1) + (long)i;
                        s += r < 0 ? 0 : (double)Ly->conv[(size_t)ch * K + i] * mx[r * cd + ch];
                    }
                    c[ch] = (float)(s * sigm(s));
                }
                for (uint32_t h = 0; h < 2 * nk; h++) { /* L2 norms, q scaled */
                    double ss = 0;
                    for (uint32_t i = 0; i < d; i++)
                        ss += (double)c[h * d + i] * c[h * d + i];
                    double r = 1 / sqrt(ss + hp->rms_eps) / (h < nk ? sqrt((double)d) : 1);
                    for (uint32_t i = 0; i < d; i++)
                        c[h * d + i] = (float)(c[h * d + i] * r);
                }
                for (uint32_t h = 0; h < nv; h++) {
                    const float *qh = c + (h % nk) * d, *kh = c + kd + (h % nk) * d;
                    const float *vh = c + 2 * kd + h * d;
                    double beta = sigm(bb[h]), a = aa[h] + (double)Ly->dt_bias[h];
                    double alpha = exp((a > 20 ? a : log1p(exp(a))) * Ly->ssm_a[h]);
                    double *Sh = S + ((size_t)Ly->slot * nv + h) * d * d;
                    for (uint32_t i = 0; i < d; i++) {
                        double sk = 0, out = 0;
                        for (uint32_t j = 0; j < d; j++)
                            sk += alpha * Sh[i * d + j] * kh[j];
                        double delta = beta * (vh[i] - sk);
                        for (uint32_t j = 0; j < d; j++) {
                            Sh[i * d + j] = alpha * Sh[i * d + j] + delta * kh[j];
                            out += Sh[i * d + j] * qh[j];
                        }
                        oo[h * d + i] = (float)out;
                    }
                    rr_rms(oo + h * d, oo + h * d, Ly->ssm_norm, d, hp->rms_eps);
                    for (uint32_t i = 0; i < d; i++)
                        oo[h * d + i] = (float)(oo[h * d + i] * z[h * d + i] * sigm(z[h * d + i]));
                }
                rr_mv(&Ly->wout, oo, o);
            } else {
                rr_mv(&Ly->wq, xb, qg);
                for (uint32_t h = 0; h < hp->n_heads; h++)
                    memcpy(q + h * hd, qg + 2 * h * hd, hd * sizeof *q);
                rr_mv(&Ly->wk, xb, k);
                rr_mv(&Ly->wv, xb, v);
                for (uint32_t h = 0; h < hp->n_heads; h++)
                    rr_rms(q + h * hd, q + h * hd, Ly->q_norm, hd, hp->rms_eps);
                for (uint32_t h = 0; h < hp->n_kv_heads; h++)
                    rr_rms(k + h * hd, k + h * hd, Ly->k_norm, hd, hp->rms_eps);
                uint32_t rot = hp->n_rot, half = rot / 2;
                for (int which = 0; which < 2; which++) {
                    float *zz = which ? k : q;
                    uint32_t heads = which ? hp->n_kv_heads : hp->n_heads;
                    for (uint32_t h = 0; h < heads; h++)
                        for (uint32_t j = 0; j < half; j++) {
                            double th = text_pair(hp, j)
                                            ? (double)p * pow(hp->rope_base, -2.0 * j / rot) : 0;
                            double x0 = zz[h * hd + j], x1 = zz[h * hd + j + half];
                            zz[h * hd + j] = (float)(x0 * cos(th) - x1 * sin(th));
                            zz[h * hd + j + half] = (float)(x0 * sin(th) + x1 * cos(th));
                        }
                }
                rr_attend(hp, q, k, v, Kc + (size_t)l * n * kvd, Vc + (size_t)l * n * kvd, p,
                          sc, att);
                for (uint32_t i = 0; i < hp->n_heads * hd; i++) /* the output gate */
                    att[i] = (float)(att[i] * sigm(qg[(2 * (i / hd) + 1) * hd + i % hd]));
                rr_mv(&Ly->wo, att, o);
            }
            for (uint32_t i = 0; i < D; i++)
                x[i] += o[i];
            rr_rms(xb, x, Ly->ffn_norm, D, hp->rms_eps);
            rr_mv(&Ly->gate, xb, g);
            rr_mv(&Ly->up, xb, u);
            for (uint32_t i = 0; i < F; i++)
                g[i] = (float)(g[i] * sigm(g[i]) * u[i]);
            rr_mv(&Ly->down, g, o);
            for (uint32_t i = 0; i < D; i++)
                x[i] += o[i];
        }
        rr_rms(xb, x, m->out_norm, D, hp->rms_eps);
        rr_mv(&m->output, xb, lg + p * V);
    }
    free(Kc), free(Vc), free(mixed), free(S), free(x), free(xb), free(qg), free(q), free(k);
    free(v), free(att), free(o), free(g), free(u), free(e), free(sc), free(z), free(bb);
    free(aa), free(c), free(oo);
    return lg;
}

/* ---- tests -------------------------------------------------------------------------- */

static void check_reference(const char *dtype, uint32_t mtp, double tol)
{
    sb_rt_make_opts o = opts(dtype, mtp);
    world w;
    make_opts(&w, &o);
    assert_int_equal(w.m->hp.n_rec, 2);
    assert_int_equal(w.m->hp.n_attn, 2);
    assert_true(w.m->hp.n_rot < w.m->hp.head_dim);
    uint32_t t[PROMPT];
    rw_tokens(&w, t, PROMPT, 1);
    float *got = rw_run_all(&w, t, PROMPT, 512, 2);
    float *want = reference(w.m, t, PROMPT);
    size_t V = w.m->hp.n_vocab;
    for (size_t i = 0; i < PROMPT * V; i++)
        assert_true(isfinite(got[i]));
    double err = rr_max_rel_diff(want, got, PROMPT, V);
    if (err > tol)
        fail_msg("tiny-hybrid %s (mtp %u): logits differ from the reference by %g of their "
                 "scale (bound %g)", dtype, mtp, err, tol);
    size_t step = 0;
    while (step < PROMPT && rr_max_rel_diff(want + step * V, got + step * V, 1, V) <= 1e-4)
        step++;
    if (step < PROMPT / 4)
        fail_msg("tiny-hybrid %s: position %zu differs from the reference by more than 1e-4",
                 dtype, step);
    /* not degenerate: the positions do not all agree on their best token */
    size_t first = 0, differ = 0;
    for (size_t p = 0; p < PROMPT; p++) {
        size_t best = 0;
        for (size_t i = 1; i < V; i++)
            best = got[p * V + i] > got[p * V + best] ? i : best;
        if (!p)
            first = best;
        differ += best != first;
    }
    assert_true(differ > 0);
    free(got);
    free(want);
    rw_unmake(&w);
}

static void reference_f32(void **s) { (void)s; check_reference("f32", 0, 1e-4); }
static void reference_f16(void **s) { (void)s; check_reference("f16", 0, 1e-4); }
static void reference_q8_0(void **s) { (void)s; check_reference("q8_0", 0, 5e-2); }
static void reference_mtp_ignored(void **s) { (void)s; check_reference("f32", 1, 1e-4); }

/* Batched, token by token, odd batch sizes, 1-3 threads: identical bits. */
static void batching_is_invisible(void **state)
{
    (void)state;
    const char *dtypes[] = { "f32", "q8_0" };
    for (size_t d = 0; d < 2; d++) {
        world w;
        make(&w, dtypes[d]);
        uint32_t t[PROMPT];
        rw_tokens(&w, t, PROMPT, 2);
        float *a = rw_run_all(&w, t, PROMPT, 512, 2);
        size_t bytes = (size_t)PROMPT * w.m->hp.n_vocab * sizeof(float);
        const struct { uint32_t batch; unsigned threads; } v[] = { { 1, 1 }, { 7, 2 }, { 16, 3 },
                                                                   { 33, 1 } };
        for (size_t k = 0; k < sizeof v / sizeof *v; k++) {
            float *b = rw_run_all(&w, t, PROMPT, v[k].batch, v[k].threads);
            if (memcmp(a, b, bytes))
                fail_msg("%s: batch %u threads %u differs from one batch", dtypes[d],
                         v[k].batch, v[k].threads);
            free(b);
        }
        free(a);
        rw_unmake(&w);
    }
}

/* The sequence committed with a boundary at every length L, matched,
 * continued from the pages and the boundary: logits of positions L..
 * equal the cold run's, bit for bit. */
static void warm_equals_cold(void **state)
{
    (void)state;
    world w;
    make(&w, "f32");
    size_t V = w.m->hp.n_vocab, pb = sb_rt_boundary_bytes(w.m);
    uint32_t t[PROMPT];
    rw_tokens(&w, t, PROMPT, 3);
    float *cold = rw_run_all(&w, t, PROMPT, 512, 2);
    sb_rt_ctx *ctxs[3], *c;
    assert_int_equal(sb_rt_ctx_new(w.m, 2, 64, &ctxs[0]), SB_OK);
    assert_int_equal(sb_rt_ctx_new(w.m, 2, 5, &ctxs[1]), SB_OK);
    assert_int_equal(sb_rt_ctx_new(w.m, 1, 1, &ctxs[2]), SB_OK);
    uint8_t *point = malloc(pb);
    float *lg = malloc(PROMPT * V * sizeof *lg);
    assert_true(point && lg);
    for (size_t L = 1; L < PROMPT; L++) {
        c = ctxs[L % 3];
        sb_rt_kv kv;
        assert_int_equal(sb_rt_kv_init(&kv, w.m, w.ns), SB_OK);
        assert_int_equal(sb_rt_forward(c, &kv, t, L, SB_RT_LOGITS_LAST, lg), SB_OK);
        sb_rt_boundary_encode(w.m, kv.gdn, lg, point);
        assert_int_equal(sb_rt_kv_commit(&kv, point, NULL), SB_OK);
        sb_rt_kv_fini(&kv);

        sb_match *m;
        assert_int_equal(sb_ns_match(w.ns, t, PROMPT, &m), SB_OK);
        sb_match_info info;
        assert_int_equal(sb_match_get_info(m, &info), SB_OK);
        assert_int_equal(info.n_tokens, L); /* the deepest boundary */
        assert_true(info.has_point);
        assert_int_equal(sb_rt_kv_init(&kv, w.m, w.ns), SB_OK);
        assert_int_equal(sb_rt_kv_adopt(&kv, m, t, L), SB_OK);
        bool has = false;
        float *last = malloc(V * sizeof *last);
        assert_int_equal(sb_rt_boundary_decode(w.m, kv.gdn, sb_match_point(m), L, last, &has),
                         SB_OK);
        assert_true(has);
        assert_memory_equal(last, cold + (L - 1) * V, V * sizeof *last);
        free(last);
        sb_match_release(m);
        assert_int_equal(sb_rt_forward(c, &kv, t + L, PROMPT - L, SB_RT_LOGITS_ALL, lg), SB_OK);
        if (memcmp(lg, cold + L * V, (PROMPT - L) * V * sizeof *lg))
            fail_msg("continuing from a boundary at %zu (batches of %u) differs from cold", L,
                     L % 3 == 0 ? 64 : L % 3 == 1 ? 5 : 1);
        sb_rt_kv_fini(&kv);
        assert_int_equal(sb_store_check(w.st), SB_OK);
    }
    free(point);
    free(lg);
    free(cold);
    for (int i = 0; i < 3; i++)
        sb_rt_ctx_free(ctxs[i]);
    rw_unmake(&w);
}

/* Adopted pages without the recurrent state cannot run; a boundary
 * recorded at another position, or damaged, is refused. */
static void boundary_needed(void **state)
{
    (void)state;
    world w;
    make(&w, "f32");
    uint32_t t[40];
    rw_tokens(&w, t, 40, 5);
    sb_rt_ctx *c;
    assert_int_equal(sb_rt_ctx_new(w.m, 1, 0, &c), SB_OK);
    sb_rt_kv kv;
    assert_int_equal(sb_rt_kv_init(&kv, w.m, w.ns), SB_OK);
    assert_int_equal(sb_rt_forward(c, &kv, t, 32, SB_RT_LOGITS_NONE, NULL), SB_OK);
    size_t pb = sb_rt_boundary_bytes(w.m);
    uint8_t *point = malloc(pb);
    assert_non_null(point);
    sb_rt_boundary_encode(w.m, kv.gdn, NULL, point);
    assert_int_equal(sb_rt_kv_commit(&kv, point, NULL), SB_OK);
    sb_rt_kv_fini(&kv);

    sb_match *m;
    assert_int_equal(sb_ns_match(w.ns, t, 40, &m), SB_OK);
    assert_int_equal(sb_rt_kv_init(&kv, w.m, w.ns), SB_OK);
    assert_int_equal(sb_rt_kv_adopt(&kv, m, t, 32), SB_OK);
    assert_int_equal(sb_rt_forward(c, &kv, t + 32, 8, SB_RT_LOGITS_NONE, NULL), SB_ERR_NO_POINT);
    assert_int_equal(kv.n_tokens, 32);
    bool has = true;
    assert_int_equal(sb_rt_boundary_decode(w.m, kv.gdn, sb_match_point(m), 31, NULL, &has),
                     SB_ERR_FORMAT);
    memcpy(point, sb_match_point(m), pb);
    point[8] ^= 1; /* another version */
    assert_int_equal(sb_rt_boundary_decode(w.m, kv.gdn, point, 32, NULL, &has), SB_ERR_FORMAT);
    assert_int_equal(sb_rt_boundary_decode(w.m, kv.gdn, sb_match_point(m), 32, NULL, &has),
                     SB_OK);
    assert_false(has);
    sb_match_release(m);
    assert_int_equal(sb_rt_forward(c, &kv, t + 32, 8, SB_RT_LOGITS_NONE, NULL), SB_OK);
    sb_rt_kv_fini(&kv);
    free(point);
    sb_rt_ctx_free(c);
    rw_unmake(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reference_f32),         cmocka_unit_test(reference_f16),
        cmocka_unit_test(reference_q8_0),        cmocka_unit_test(reference_mtp_ignored),
        cmocka_unit_test(batching_is_invisible), cmocka_unit_test(warm_equals_cold),
        cmocka_unit_test(boundary_needed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
