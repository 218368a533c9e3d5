/* test_kernels.c -- the CPU kernels and the thread pool
 * (runtime/kernels/kernels.h, pool.h).
 *
 * Description: every available ISA table against the reference within a
 * tolerance (odd sizes, unaligned pointers, Q8_0 weights of -128); AVX2
 * and AVX-512 bit-identical to each other; matmul one token at a time, in
 * batches and on 1-3 threads bit-identical, in every table; f16 conversions exact over
 * all 65536 values and against F16C-style rounding; softmax, rmsnorm; the
 * pool runs every task exactly once.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/kernels.h"
#include "kernels/pool.h"
#include "kernels/quant.h"
#include "snapbank.h"

static uint64_t g_rng = 0x1234567;

static float rnd(void)
{
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(g_rng >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}

/* Every weight type, and a row length (in) that type allows for test k:
 * the K types' 256-value blocks, odd and even block counts. */
static const sb_rt_dtype all_types[] = { SB_RT_F32, SB_RT_F16, SB_RT_BF16, SB_RT_Q4_0,
                                         SB_RT_Q4_1, SB_RT_Q5_0, SB_RT_Q5_1, SB_RT_Q8_0,
                                         SB_RT_Q4_K, SB_RT_Q5_K, SB_RT_Q6_K };
#define N_TYPES (sizeof all_types / sizeof *all_types)

static size_t type_in(sb_rt_dtype t, size_t k)
{
    static const size_t f[] = { 32, 96, 168, 800 }, q[] = { 32, 96, 160, 800 },
                        kq[] = { 256, 768, 1280, 2304 };
    return sb_rt_dtype_block(t) == 256 ? kq[k % 4] : sb_rt_dtype_block(t) == 32 ? q[k % 4] : f[k % 4];
}

static bool is_quant(sb_rt_dtype t)
{
    return sb_rt_dtype_block(t) > 1;
}

static void put_h(uint8_t *p, float f)
{
    uint16_t h;
    sb_rt_f32_to_f16(&f, &h, 1);
    memcpy(p, &h, 2);
}

/* Weights of type t for out rows of in values, also returned dequantized
 * in wf. Quantized types are random bytes (every bit pattern of the
 * quants, scales and mins: Q8_0's -128, Q6_K's scale -128, 6-bit scales of
 * 63) with their f16 scale fields set to small values, so every field
 * value goes through the kernels. */
static void *make_w(sb_rt_dtype t, size_t in, size_t out, float *wf)
{
    size_t n = in * out, rb = sb_rt_dtype_row_bytes(t, in);
    uint8_t *w = malloc(rb * out + 64);
    assert_non_null(w);
    if (!is_quant(t)) {
        for (size_t i = 0; i < n; i++)
            wf[i] = rnd();
        assert_int_equal(sb_rt_quant_row(t, wf, w, n), SB_OK);
    } else {
        for (size_t i = 0; i < rb * out; i++) {
            g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
            w[i] = (uint8_t)(g_rng >> 56);
        }
        size_t bb = sb_rt_dtype_block_bytes(t), nb = rb * out / bb;
        for (size_t b = 0; b < nb; b++) {
            uint8_t *B = w + b * bb;
            float s = 0.001f + 0.01f * (rnd() + 1);
            if (b % 5 == 0 && t == SB_RT_Q8_0)
                B[2 + b % 32] = 0x80; /* -128 */
            switch (t) {
            case SB_RT_Q4_1: case SB_RT_Q5_1: case SB_RT_Q4_K: case SB_RT_Q5_K:
                put_h(B, s);
                put_h(B + 2, t == SB_RT_Q4_1 || t == SB_RT_Q5_1 ? rnd() * 0.1f : s * 0.5f);
                break;
            case SB_RT_Q6_K:
                put_h(B + SB_RT_Q6_K_D, s * 0.05f);
                break;
            default:
                put_h(B, s);
            }
        }
    }
    for (size_t r = 0; r < out; r++)
        sb_rt_dequant_row(t, w + r * rb, wf + r * in, in);
    return w;
}

static void matmul_matches_reference(void **state)
{
    (void)state;
    const sb_rt_kernels *ref = sb_rt_kernels_get(SB_RT_ISA_REF);
    const size_t outs[] = { 1, 5, 33 };
    for (int isa = SB_RT_ISA_AVX2; isa < SB_RT_ISA_COUNT; isa++) {
        const sb_rt_kernels *k = sb_rt_kernels_get((sb_rt_isa)isa);
        if (!k)
            continue;
        for (size_t ti = 0; ti < N_TYPES; ti++)
            for (size_t a = 0; a < 4; a++)
                for (size_t b = 0; b < 3; b++) {
                    const sb_rt_dtype types[] = { all_types[ti] };
                    size_t in = type_in(types[0], a), out = outs[b], nt = 7;
                    float *wf = malloc(in * out * 4), *x = malloc((nt * in + 1) * 4);
                    float *y0 = malloc(nt * out * 4), *y1 = malloc(nt * out * 4);
                    void *w = make_w(types[0], in, out, wf);
                    for (size_t i = 0; i < nt * in + 1; i++)
                        x[i] = rnd();
                    ref->matmul(NULL, y0, x + 1, w, types[0], nt, in, out); /* unaligned x */
                    k->matmul(NULL, y1, x + 1, w, types[0], nt, in, out);
                    /* quantized: bit-identical (kernels.h) */
                    if (is_quant(types[0]) && memcmp(y0, y1, nt * out * 4))
                        fail_msg("%s type %d in %zu out %zu: not the reference's bits", k->name,
                                 types[0], in, out);
                    for (size_t i = 0; i < nt * out; i++) {
                        double mag = 0;
                        size_t t = i / out, r = i % out;
                        for (size_t j = 0; j < in; j++)
                            mag += fabs((double)wf[r * in + j] * x[1 + t * in + j]);
                        if (fabs(y0[i] - y1[i]) > 1e-5 * mag + 1e-6)
                            fail_msg("%s type %d in %zu out %zu: %g vs ref %g", k->name, types[0],
                                     in, out, y1[i], y0[i]);
                    }
                    free(wf), free(x), free(y0), free(y1), free(w);
                }
    }
}

/* The same Y element, whatever the batch, its position in it, and the
 * thread count. */
static void matmul_is_batch_invariant(void **state)
{
    (void)state;
    size_t out = 70, nt = 13;
    sb_rt_pool *pools[3];
    for (unsigned p = 0; p < 3; p++)
        assert_int_equal(sb_rt_pool_new(p + 1, &pools[p]), SB_OK);
    for (int isa = SB_RT_ISA_REF; isa < SB_RT_ISA_COUNT; isa++) {
        const sb_rt_kernels *kt = sb_rt_kernels_get((sb_rt_isa)isa);
        if (!kt)
            continue;
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        const sb_rt_dtype types[] = { all_types[ti] };
        size_t in = type_in(types[0], 3);
        float *wf = malloc(in * out * 4), *x = malloc(nt * in * 4);
        float *ya = malloc(nt * out * 4), *yb = malloc(nt * out * 4);
        void *w = make_w(types[0], in, out, wf);
        for (size_t i = 0; i < nt * in; i++)
            x[i] = rnd();
        kt->matmul(pools[1], ya, x, w, types[0], nt, in, out);
        for (size_t t = 0; t < nt; t++) /* one at a time */
            kt->matmul(NULL, yb + t * out, x + t * in, w, types[0], 1, in, out);
        assert_memory_equal(ya, yb, nt * out * 4);
        for (unsigned p = 0; p < 3; p++) {
            for (size_t first = 0; first < nt; first += 5) { /* sub-batches */
                size_t k = nt - first < 5 ? nt - first : 5;
                kt->matmul(pools[p], yb + first * out, x + first * in, w, types[0], k, in, out);
            }
            assert_memory_equal(ya, yb, nt * out * 4);
        }
        free(wf), free(x), free(ya), free(yb), free(w);
    }
    }
    for (unsigned p = 0; p < 3; p++)
        sb_rt_pool_free(pools[p]);
}

/* quant.h's stated error bound for value i of a row x quantized to t:
 * computed from the original floats, so it checks the quantizer's choice
 * of scales as well as its rounding. Slack: 2^-9 relative for the f16
 * scales, 1e-6 of the block's amax for float rounding. */
static double qbound(sb_rt_dtype t, const float *x, size_t i)
{
    size_t blk = sb_rt_dtype_block(t), b0 = i / blk * blk;
    const float *v = x + b0;
    double amax = 0, mn = v[0], mx = v[0], sv = 0;
    for (size_t k = 0; k < blk; k++) {
        if (fabs(v[k]) > amax)
            amax = fabs(v[k]), sv = v[k];
        mn = fmin(mn, v[k]), mx = fmax(mx, v[k]);
    }
    const double f = 1 + 1.0 / 512, tiny = 1e-6 * amax + 1e-30;
    switch (t) {
    case SB_RT_F16:
        return fabs(x[i]) / 2048 * f + 6e-8;
    case SB_RT_BF16:
        return fabs(x[i]) / 256 * f;
    case SB_RT_Q8_0:
        return amax / 254 * f + tiny;
    case SB_RT_Q4_0:
    case SB_RT_Q5_0: {
        double step = amax / (t == SB_RT_Q4_0 ? 8 : 16) * f;
        /* the side of the largest magnitude never clips: half a step */
        return (x[i] * sv >= 0 ? step / 2 : step) + tiny;
    }
    case SB_RT_Q4_1:
    case SB_RT_Q5_1:
        return (mx - mn) / (t == SB_RT_Q4_1 ? 30 : 62) * f + fabs(mn) / 1024 + tiny;
    case SB_RT_Q4_K:
    case SB_RT_Q5_K: {
        double levels = t == SB_RT_Q4_K ? 15 : 31, max_off = 0, max_step = 0, r[8];
        for (unsigned j = 0; j < 8; j++) {
            double lo = 0, hi = 0;
            for (unsigned l = 0; l < 32; l++)
                lo = fmin(lo, v[32 * j + l]), hi = fmax(hi, v[32 * j + l]);
            max_off = fmax(max_off, -lo);
            r[j] = hi - lo;
        }
        double dmin = max_off / 63 * f;
        for (unsigned j = 0; j < 8; j++)
            max_step = fmax(max_step, (r[j] + dmin) / levels);
        double d = max_step / 63 * f, sj = (r[(i % 256) / 32] + dmin) / levels;
        return (sj + d) / 2 * (1 + 1e-5) + tiny;
    }
    case SB_RT_Q6_K: {
        double max_step = 0, ak = 0;
        for (unsigned k = 0; k < 16; k++) {
            double a = 0;
            for (unsigned l = 0; l < 16; l++)
                a = fmax(a, fabs(v[16 * k + l]));
            max_step = fmax(max_step, a / 31);
            if (k == (i % 256) / 16)
                ak = a;
        }
        double d = max_step / 127 * f;
        return (ak / 31 + d) / 2 * (1 + 1e-5) + tiny;
    }
    default:
        return 0;
    }
}

/* make-model's quantizer: every type's dequantized row is within quant.h's
 * stated bound of the floats, on blocks of every kind (signed normal
 * values, all positive, all negative, zeros, one outlier, tiny values). */
static void quant_round_trip(void **state)
{
    (void)state;
    const size_t n = 256 * 12;
    float *x = malloc(n * 4), *y = malloc(n * 4);
    uint8_t *w = malloc(n * 4 + 64);
    for (size_t i = 0; i < n; i++) {
        size_t kind = i / 256;
        float v = rnd();
        x[i] = kind == 1 ? fabsf(v) + 0.5f : kind == 2 ? -fabsf(v) - 0.2f
             : kind == 3 ? 0.0f : kind == 4 ? v * 1e-3f : kind == 5 && i % 256 == 77 ? 40.0f
             : kind == 6 ? v * 100 : v;
    }
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        sb_rt_dtype t = all_types[ti];
        if (t == SB_RT_F32)
            continue;
        assert_int_equal(sb_rt_quant_row(t, x, w, n), SB_OK);
        sb_rt_dequant_row(t, w, y, n);
        for (size_t i = 0; i < n; i++) {
            double e = fabs((double)y[i] - x[i]), bound = qbound(t, x, i);
            if (!(e <= bound))
                fail_msg("type %s value %zu: %g quantized to %g, error %g over the bound %g",
                         sb_rt_ggml_type_name(t), i, x[i], y[i], e, bound);
        }
        /* the bound is not vacuous: the error is mostly well inside it */
        double worst = 0;
        for (size_t i = 0; i < n; i++)
            worst = fmax(worst, fabs((double)y[i] - x[i]) / (qbound(t, x, i) + 1e-30));
        assert_true(worst > 0.3);
    }
    assert_int_equal(sb_rt_quant_row(SB_RT_Q4_K, x, w, 300), SB_ERR_INVAL);
    assert_int_equal(sb_rt_quant_row((sb_rt_dtype)23, x, w, 256), SB_ERR_INVAL);
    free(x), free(y), free(w);
}

/* A quantized matmul equals the float dot of dequantized W and X within
 * X's quantization: |y - sum w x| <= sum over X blocks b of (amax_b / 254)
 * * sum |w| over b, plus float rounding (1e-5 of sum |w x|); on every ISA
 * (they agree bit for bit anyway). */
static void quant_matmul_within_bound(void **state)
{
    (void)state;
    for (int isa = SB_RT_ISA_REF; isa < SB_RT_ISA_COUNT; isa++) {
        const sb_rt_kernels *k = sb_rt_kernels_get((sb_rt_isa)isa);
        if (!k)
            continue;
        for (size_t ti = 0; ti < N_TYPES; ti++) {
            sb_rt_dtype t = all_types[ti];
            if (!is_quant(t))
                continue;
            size_t in = type_in(t, 2), out = 9, nt = 3, blk = sb_rt_dtype_block(t);
            float *wf = malloc(in * out * 4), *x = malloc(nt * in * 4), *y = malloc(nt * out * 4);
            void *w = make_w(t, in, out, wf);
            for (size_t i = 0; i < nt * in; i++)
                x[i] = rnd() * (i % 97 == 0 ? 30 : 1);
            k->matmul(NULL, y, x, w, t, nt, in, out);
            for (size_t tt = 0; tt < nt; tt++)
                for (size_t r = 0; r < out; r++) {
                    double exact = 0, mag = 0, bound = 0;
                    for (size_t b = 0; b < in / blk; b++) {
                        double amax = 0, sw = 0;
                        for (size_t i = b * blk; i < (b + 1) * blk; i++) {
                            double xv = x[tt * in + i], wv = wf[r * in + i];
                            exact += xv * wv;
                            mag += fabs(xv * wv);
                            amax = fmax(amax, fabs(xv));
                            sw += fabs(wv);
                        }
                        bound += amax / 254 * sw;
                    }
                    bound = bound * 1.0001 + 1e-5 * mag + 1e-6;
                    double e = fabs(y[tt * out + r] - exact);
                    if (!(e <= bound))
                        fail_msg("%s %s token %zu row %zu: %g, exact %g, error %g over %g",
                                 k->name, sb_rt_ggml_type_name(t), tt, r, y[tt * out + r], exact,
                                 e, bound);
                }
            free(wf), free(x), free(y), free(w);
        }
    }
}

/* Every ISA's X quantizer rounds halves to even and clamps at 127, and a
 * block holding a NaN or an infinity makes the outputs that read it NaN:
 * seen through identity W rows (row r has q = 1 at value r, scales 1), whose
 * matmul returns each quantized X value times its block's scale (here 1). */
static void quantizer_ties_and_nan(void **state)
{
    (void)state;
    enum { N = 256 };
    float x[N], y[N];
    for (size_t i = 0; i < N; i++) /* 127 sets the scale to exactly 1 */
        x[i] = i % 32 == 0 ? 127.0f : (float)((int)(i % 7) - 3) + (i % 3 ? 0.5f : -0.5f);
    uint8_t q8[N / 32 * 34 * N], q4k[144 * N];
    memset(q8, 0, sizeof q8);
    memset(q4k, 0, sizeof q4k);
    for (size_t r = 0; r < N; r++) {
        uint8_t *row8 = q8 + r * (N / 32 * 34), *k = q4k + r * 144;
        for (size_t b = 0; b < N / 32; b++)
            put_h(row8 + 34 * b, 1.0f);
        row8[34 * (r / 32) + 2 + r % 32] = 1;
        put_h(k, 1.0f);
        put_h(k + 2, 0.0f);
        for (unsigned j = 0; j < 4; j++)
            k[4 + j] = 1, k[12 + j] = 1; /* sc_j = 1, m_j = 0 */
        size_t j = r / 32, l = r % 32;
        k[16 + 32 * (j / 2) + l] = (uint8_t)(j % 2 ? 0x10 : 0x01);
    }
    for (int isa = SB_RT_ISA_REF; isa < SB_RT_ISA_COUNT; isa++) {
        const sb_rt_kernels *k = sb_rt_kernels_get((sb_rt_isa)isa);
        if (!k)
            continue;
        for (int pass = 0; pass < 2; pass++) {
            sb_rt_dtype t = pass ? SB_RT_Q4_K : SB_RT_Q8_0;
            k->matmul(NULL, y, x, pass ? (void *)q4k : (void *)q8, t, 1, N, N);
            for (size_t i = 0; i < N; i++)
                if (y[i] != nearbyintf(x[i]))
                    fail_msg("%s %s: x %g quantized to %g (halves go to even)", k->name,
                             sb_rt_ggml_type_name(t), x[i], y[i]);
        }
        float xb[N];
        memcpy(xb, x, sizeof xb);
        /* every output reads every block (0 * NaN is NaN, as with F32) */
        for (int bad = 0; bad < 2; bad++) {
            memcpy(xb, x, sizeof xb);
            xb[40 + 120 * bad] = bad ? INFINITY : NAN;
            for (int pass = 0; pass < 2; pass++) {
                sb_rt_dtype t = pass ? SB_RT_Q4_K : SB_RT_Q8_0;
                k->matmul(NULL, y, xb, pass ? (void *)q4k : (void *)q8, t, 1, N, N);
                for (size_t i = 0; i < N; i++)
                    if (!isnan(y[i]))
                        fail_msg("%s %s: output %zu is %g, not NaN", k->name,
                                 sb_rt_ggml_type_name(t), i, y[i]);
            }
        }
    }
}

/* Every f16 -> f32 -> f16 is the identity (NaN stays NaN); the ref and SIMD
 * conversions agree bit for bit on every f16 and on random floats. */
static void f16_conversions(void **state)
{
    (void)state;
    const sb_rt_kernels *ref = sb_rt_kernels_get(SB_RT_ISA_REF);
    uint16_t *h = malloc(65536 * 2), *h2 = malloc(65536 * 2);
    float *f = malloc(65536 * 4), *f2 = malloc(65536 * 4);
    for (uint32_t i = 0; i < 65536; i++)
        h[i] = (uint16_t)i;
    ref->f16_to_f32(h, f, 65536);
    ref->f32_to_f16(f, h2, 65536);
    for (uint32_t i = 0; i < 65536; i++) {
        bool nan = (i & 0x7c00) == 0x7c00 && (i & 0x3ff);
        if (nan)
            assert_true(isnan(f[i]) && (h2[i] & 0x7c00) == 0x7c00 && (h2[i] & 0x3ff));
        else if (h2[i] != i)
            fail_msg("f16 %04x -> %g -> %04x", i, f[i], h2[i]);
    }
    assert_true(f[0x3c00] == 1.0f && f[0xc000] == -2.0f && f[0x0001] == ldexpf(1, -24));
    assert_true(isinf(f[0x7c00]) && f[0x7bff] == 65504.0f);
    for (int isa = SB_RT_ISA_AVX2; isa < SB_RT_ISA_COUNT; isa++) {
        const sb_rt_kernels *k = sb_rt_kernels_get((sb_rt_isa)isa);
        if (!k)
            continue;
        for (uint32_t i = 0; i < 65536; i++)
            h[i] = (uint16_t)i;
        ref->f16_to_f32(h, f, 65536);
        k->f16_to_f32(h, f2, 65533); /* a tail of 13 (5 past a multiple of 8) */
        for (uint32_t i = 0; i < 65533; i++)
            assert_true(memcmp(&f[i], &f2[i], 4) == 0 || (isnan(f[i]) && isnan(f2[i])));
        /* rounding: random floats across the range, ties, subnormals, overflow */
        for (uint32_t i = 0; i < 65536; i++) {
            uint32_t bits = (uint32_t)(g_rng = g_rng * 6364136223846793005ull + 1) >> 1;
            if (i < 4096) /* exact ties between two f16 values */
                bits = (((uint32_t)(i % 60 + 100) << 23) | ((uint32_t)i << 13) | 0x1000u);
            memcpy(&f[i], &bits, 4);
            if (isnan(f[i]))
                f[i] = 1.5f;
        }
        ref->f32_to_f16(f, h, 65536);
        memset(h2, 0, 65536 * 2);
        k->f32_to_f16(f, h2, 65531); /* a tail of 11 (3 past a multiple of 8) */
        for (uint32_t i = 0; i < 65536; i++)
            if (i < 65531 ? h[i] != h2[i] : h2[i] != 0)
                fail_msg("f32 %a: ref %04x, %s %04x", f[i], h[i], k->name, h2[i]);
    }
    assert_int_equal(sb_rt_dtype_row_bytes(SB_RT_Q8_0, 33), 0);
    assert_int_equal(sb_rt_dtype_row_bytes(SB_RT_Q8_0, 64), 68);
    free(h), free(h2), free(f), free(f2);
}

static void elementwise(void **state)
{
    (void)state;
    for (int isa = SB_RT_ISA_REF; isa < SB_RT_ISA_COUNT; isa++) {
        const sb_rt_kernels *k = sb_rt_kernels_get((sb_rt_isa)isa);
        if (!k)
            continue;
        float x[37], y[37], w[37];
        double ss = 0;
        for (int i = 0; i < 37; i++) {
            x[i] = rnd() * 3, w[i] = rnd();
            ss += (double)x[i] * x[i];
        }
        k->rmsnorm(y, x, w, 37, 1e-5f);
        for (int i = 0; i < 37; i++)
            assert_true(fabs(y[i] - x[i] / sqrt(ss / 37 + 1e-5) * w[i]) < 1e-5);
        x[3] = -INFINITY;
        k->softmax(x, 37);
        double sum = 0;
        for (int i = 0; i < 37; i++)
            sum += x[i];
        assert_true(fabs(sum - 1) < 1e-5 && x[3] == 0);
        for (int i = 0; i < 37; i++)
            x[i] = -INFINITY;
        k->softmax(x, 37);
        assert_true(x[0] == 0 && x[36] == 0);
        /* against the reference, element by element (ISAs may use their
         * own exp: within a few ulp) */
        const sb_rt_kernels *ref = sb_rt_kernels_get(SB_RT_ISA_REF);
        float big[1000], big2[1000];
        for (int i = 0; i < 1000; i++)
            big[i] = big2[i] = rnd() * 30;
        big[7] = big2[7] = -INFINITY;
        ref->softmax(big, 1000);
        k->softmax(big2, 1000);
        for (int i = 0; i < 1000; i++)
            if (fabsf(big[i] - big2[i]) > 1e-6f * big[i] + 1e-30f)
                fail_msg("%s softmax[%d] %g, ref %g", k->name, i, big2[i], big[i]);
        uint16_t h[37];
        for (int i = 0; i < 37; i++)
            x[i] = rnd(), y[i] = rnd();
        k->f32_to_f16(x, h, 37);
        float d16 = k->dot_f16(h, y, 37), d32 = k->dot_f32(x, y, 37);
        assert_true(fabsf(d16 - d32) < 1e-2f);
        float acc[37] = { 0 };
        k->axpy_f16(acc, 2.0f, h, 37);
        for (int i = 0; i < 37; i++)
            assert_true(fabsf(acc[i] - 2 * x[i]) < 2e-3f);
    }
}

/* The strided attention kernels give the bits of the single-row calls, and
 * the many-query ones the bits of the one-query calls. */
static void strided_match_single(void **state)
{
    (void)state;
    for (int isa = SB_RT_ISA_REF; isa < SB_RT_ISA_COUNT; isa++) {
        const sb_rt_kernels *k = sb_rt_kernels_get((sb_rt_isa)isa);
        if (!k)
            continue;
        const size_t ns[] = { 64, 80, 13 };
        for (size_t c = 0; c < 3; c++) {
            size_t n = ns[c], stride = n + 3, rows = 11;
            uint16_t *x = malloc(rows * stride * 2);
            float *f = malloc(rows * stride * 4), b[80], a[11], s1[11], s2[11], y1[80], y2[80];
            for (size_t i = 0; i < rows * stride; i++)
                f[i] = rnd();
            k->f32_to_f16(f, x, rows * stride);
            for (size_t i = 0; i < n; i++)
                b[i] = rnd(), y1[i] = y2[i] = rnd();
            for (size_t j = 0; j < rows; j++)
                a[j] = rnd();
            k->dots_f16(s1, x, stride, rows, b, n);
            for (size_t j = 0; j < rows; j++)
                s2[j] = k->dot_f16(x + j * stride, b, n);
            assert_memory_equal(s1, s2, rows * 4);
            k->axpys_f16(y1, a, x, stride, rows, n);
            for (size_t j = 0; j < rows; j++)
                k->axpy_f16(y2, a[j], x + j * stride, n);
            assert_memory_equal(y1, y2, n * 4);
            /* many queries at once: each query's bits are the one-query
             * kernels' (13 queries: two full tiles of 6 and one left) */
            enum { NQ = 13 };
            float qs[NQ * 80], sm[NQ * 12], ss[NQ * 12], w[NQ * 12], o1[NQ * 80], o2[NQ * 80];
            for (size_t i = 0; i < NQ * 80; i++)
                qs[i] = rnd(), o1[i] = o2[i] = rnd();
            for (size_t i = 0; i < NQ * 12; i++)
                w[i] = rnd();
            for (size_t nq = 1; nq <= NQ; nq += 3) {
                k->qk_f16(sm, 12, qs, 80, nq, x, stride, rows, n);
                for (size_t i = 0; i < nq; i++) {
                    k->dots_f16(ss + i * 12, x, stride, rows, qs + i * 80, n);
                    if (memcmp(sm + i * 12, ss + i * 12, rows * 4))
                        fail_msg("%s qk_f16 n %zu nq %zu: query %zu differs", k->name, n, nq, i);
                }
                k->av_f16(o1, 80, w, 12, nq, x, stride, rows, n);
                for (size_t i = 0; i < nq; i++) {
                    k->axpys_f16(o2 + i * 80, w + i * 12, x, stride, rows, n);
                    if (memcmp(o1 + i * 80, o2 + i * 80, n * 4))
                        fail_msg("%s av_f16 n %zu nq %zu: query %zu differs", k->name, n, nq, i);
                }
            }
            free(x), free(f);
        }
    }
}

/* AVX2 and AVX-512 run the same FMAs in the same order (kernels.h): every
 * kernel gives the same bits, at lengths with and without tails. */
static void avx2_matches_avx512_bitwise(void **state)
{
    (void)state;
    const sb_rt_kernels *a = sb_rt_kernels_get(SB_RT_ISA_AVX2);
    const sb_rt_kernels *b = sb_rt_kernels_get(SB_RT_ISA_AVX512);
    if (!a || !b) {
        print_message("skipped: this CPU lacks AVX2 or AVX-512\n");
        skip();
    }
    const sb_rt_kernels *bv = sb_rt_kernels_get(SB_RT_ISA_AVX512VNNI);
    const size_t outs[] = { 1, 7, 70 }, nts[] = { 1, 5, 13 };
    for (size_t ti = 0; ti < N_TYPES; ti++)
        for (size_t ii = 0; ii < 4; ii++)
            for (size_t oi = 0; oi < 3; oi++)
                for (size_t ni = 0; ni < 3; ni++) {
                    sb_rt_dtype t = all_types[ti];
                    size_t in = type_in(t, ii), out = outs[oi], nt = nts[ni];
                    float *wf = malloc(in * out * 4), *x = malloc(nt * in * 4);
                    float *ya = malloc(nt * out * 4), *yb = malloc(nt * out * 4);
                    void *w = make_w(t, in, out, wf);
                    for (size_t i = 0; i < nt * in; i++)
                        x[i] = rnd() * 4;
                    a->matmul(NULL, ya, x, w, t, nt, in, out);
                    b->matmul(NULL, yb, x, w, t, nt, in, out);
                    if (memcmp(ya, yb, nt * out * 4))
                        fail_msg("matmul type %d in %zu out %zu n_tok %zu differs", t, in, out,
                                 nt);
                    if (bv) {
                        bv->matmul(NULL, yb, x, w, t, nt, in, out);
                        if (memcmp(ya, yb, nt * out * 4))
                            fail_msg("avx512vnni matmul type %d in %zu out %zu n_tok %zu "
                                     "differs", t, in, out, nt);
                    }
                    free(wf), free(x), free(ya), free(yb), free(w);
                }
    for (size_t n = 1; n <= 300; n += n < 40 ? 1 : 37) {
        float *x = malloc(n * 4), *y = malloc(n * 4), *w = malloc(n * 4);
        float *r1 = malloc(n * 4), *r2 = malloc(n * 4);
        uint16_t *h = malloc(n * 2 * 3);
        for (size_t i = 0; i < n; i++)
            x[i] = rnd() * 20, y[i] = rnd(), w[i] = rnd();
        for (size_t i = 0; i < n * 3; i++)
            h[i] = (uint16_t)(0x3000 + (uint16_t)(rnd() * 4000 + 4000)) ^ (i & 1 ? 0x8000 : 0);
        float d1 = a->dot_f32(x, y, n), d2 = b->dot_f32(x, y, n);
        assert_memory_equal(&d1, &d2, 4);
        d1 = a->dot_f16(h, y, n), d2 = b->dot_f16(h, y, n);
        assert_memory_equal(&d1, &d2, 4);
        a->rmsnorm(r1, x, w, n, 1e-5f);
        b->rmsnorm(r2, x, w, n, 1e-5f);
        assert_memory_equal(r1, r2, n * 4);
        memcpy(r1, x, n * 4), memcpy(r2, x, n * 4);
        r1[n / 2] = r2[n / 2] = -INFINITY;
        a->softmax(r1, n);
        b->softmax(r2, n);
        if (memcmp(r1, r2, n * 4))
            fail_msg("softmax n %zu differs", n);
        memcpy(r1, y, n * 4), memcpy(r2, y, n * 4);
        a->axpy_f16(r1, 0.37f, h, n), b->axpy_f16(r2, 0.37f, h, n);
        a->axpy_f32(r1, -1.3f, x, n), b->axpy_f32(r2, -1.3f, x, n);
        a->add(r1, w, n), b->add(r2, w, n);
        assert_memory_equal(r1, r2, n * 4);
        float s1[3], s2[3], co[3] = { 0.5f, -0.25f, 2.0f };
        a->dots_f16(s1, h, n, 3, y, n), b->dots_f16(s2, h, n, 3, y, n);
        assert_memory_equal(s1, s2, sizeof s1);
        a->axpys_f16(r1, co, h, n, 3, n), b->axpys_f16(r2, co, h, n, 3, n);
        assert_memory_equal(r1, r2, n * 4);
        free(x), free(y), free(w), free(r1), free(r2), free(h);
    }
}

typedef struct count_ctx {
    _Atomic unsigned *hits;
    unsigned threads;
    _Atomic int bad_thread;
} count_ctx;

static void count_task(void *ctx, size_t task, unsigned thread)
{
    count_ctx *c = ctx;
    atomic_fetch_add(&c->hits[task], 1);
    if (thread >= c->threads)
        atomic_store(&c->bad_thread, 1);
}

static void pool_runs_each_task_once(void **state)
{
    (void)state;
    static _Atomic unsigned hits[1000];
    for (unsigned th = 1; th <= 4; th++) {
        sb_rt_pool *p;
        assert_int_equal(sb_rt_pool_new(th, &p), SB_OK);
        assert_int_equal(sb_rt_pool_threads(p), th);
        const size_t ns[] = { 0, 1, 3, 1000 };
        for (int rep = 0; rep < 20; rep++)
            for (size_t k = 0; k < 4; k++) {
                for (size_t i = 0; i < 1000; i++)
                    atomic_store(&hits[i], 0);
                count_ctx c = { hits, th, 0 };
                sb_rt_pool_run(p, ns[k], count_task, &c);
                for (size_t i = 0; i < 1000; i++)
                    assert_int_equal(atomic_load(&hits[i]), i < ns[k] ? 1 : 0);
                assert_int_equal(atomic_load(&c.bad_thread), 0);
            }
        sb_rt_pool_free(p);
    }
    sb_rt_pool_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(matmul_matches_reference), cmocka_unit_test(matmul_is_batch_invariant),
        cmocka_unit_test(f16_conversions),          cmocka_unit_test(elementwise),
        cmocka_unit_test(strided_match_single),     cmocka_unit_test(avx2_matches_avx512_bitwise),
        cmocka_unit_test(pool_runs_each_task_once), cmocka_unit_test(quant_round_trip),
        cmocka_unit_test(quant_matmul_within_bound), cmocka_unit_test(quantizer_ties_and_nan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
