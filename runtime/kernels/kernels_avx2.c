/* kernels_avx2.c -- AVX2 + FMA + F16C kernels, for x86-64 CPUs without
 * AVX-512. Compiled with those flags alone (runtime/CMakeLists.txt) and only
 * called after kernels.c checked the CPU.
 *
 * kernels.h's order has L = 16 lanes; here they are two ymm registers, lo
 * (lanes 0-7) and hi (lanes 8-15), each term one FMA. A tail shorter than
 * 16 is copied into a zero-padded buffer and goes through the same FMAs.
 * The fold adds hi into lo (lane j += lane j + 8), then halves 128, 64 and
 * 32 bits, as AVX-512's fold does. So every dot product, matmul element,
 * rmsnorm and softmax here gives the same bits as the AVX-512 table (the
 * same FMAs in the same order); test_kernels checks that where both run.
 *
 * Matmul tiles: up to 3 tokens x 2 rows for prefill (12 accumulators of
 * 16 ymm), 1 token x up to 6 rows for decode; BF16 like F16 with another
 * load. Quantized types: kernels_q_avx2.c.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/f16.h"
#include "kernels/kernels_isa.h"
#include "kernels/simd_avx2.h"

static inline __m256 load_h8(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}

/* 8 BF16 values as f32 (exact: each is the top half of its f32). */
static inline __m256 load_b8(const uint16_t *p)
{
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

/* The last rem < 16 values of an F32 / F16 row, zero-padded to 16. */
static inline void tail_f32(float buf[16], const float *p, size_t rem)
{
    memset(buf, 0, 16 * sizeof *buf);
    memcpy(buf, p, rem * sizeof *p);
}

static inline void tail_f16(uint16_t buf[16], const uint16_t *p, size_t rem)
{
    memset(buf, 0, 16 * sizeof *buf);
    memcpy(buf, p, rem * sizeof *p);
}

/* ---- conversions ---------------------------------------------------------------- */

static void v_f16_to_f32(const uint16_t *x, float *y, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, load_h8(x + i));
    for (; i < n; i++)
        y[i] = sb_rt_f16_to_f32_1(x[i]);
}

static void v_f32_to_f16(const float *x, uint16_t *y, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(void *)(y + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    if (i < n) {
        float b[8] = { 0 };
        uint16_t h[8];
        memcpy(b, x + i, (n - i) * sizeof *x);
        _mm_storeu_si128((__m128i *)(void *)h,
                         _mm256_cvtps_ph(_mm256_loadu_ps(b), _MM_FROUND_TO_NEAREST_INT));
        memcpy(y + i, h, (n - i) * sizeof *y);
    }
}

/* ---- dots ------------------------------------------------------------------------ */

static float v_dot_f32(const float *a, const float *b, size_t n)
{
    __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
    size_t k = 0;
    for (; k + 16 <= n; k += 16) {
        lo = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), lo);
        hi = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 8), _mm256_loadu_ps(b + k + 8), hi);
    }
    if (k < n) {
        float ta[16], tb[16];
        tail_f32(ta, a + k, n - k);
        tail_f32(tb, b + k, n - k);
        lo = _mm256_fmadd_ps(_mm256_loadu_ps(ta), _mm256_loadu_ps(tb), lo);
        hi = _mm256_fmadd_ps(_mm256_loadu_ps(ta + 8), _mm256_loadu_ps(tb + 8), hi);
    }
    return fold2(lo, hi);
}

static float v_dot_f16(const uint16_t *a, const float *b, size_t n)
{
    __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
    size_t k = 0;
    for (; k + 16 <= n; k += 16) {
        lo = _mm256_fmadd_ps(load_h8(a + k), _mm256_loadu_ps(b + k), lo);
        hi = _mm256_fmadd_ps(load_h8(a + k + 8), _mm256_loadu_ps(b + k + 8), hi);
    }
    if (k < n) {
        uint16_t ta[16];
        float tb[16];
        tail_f16(ta, a + k, n - k);
        tail_f32(tb, b + k, n - k);
        lo = _mm256_fmadd_ps(load_h8(ta), _mm256_loadu_ps(tb), lo);
        hi = _mm256_fmadd_ps(load_h8(ta + 8), _mm256_loadu_ps(tb + 8), hi);
    }
    return fold2(lo, hi);
}

/* ---- matmul tiles ------------------------------------------------------------------ */

/* nt <= 3 tokens x nr <= 2 rows (or 1 token x nr <= 6 rows when TT is 1
 * and TR 6). W rows loaded by LOADW(pointer) (8 lanes); TAILW copies a
 * row's tail into a zero-padded buffer of 16. Accumulators lo/hi[t][r]. */
#define TILE_BODY(TT, TR, WTYPE, LOADW, TAILW)                                                 \
    __m256 lo[TT][TR], hi[TT][TR];                                                             \
    for (unsigned t = 0; t < TT; t++)                                                          \
        for (unsigned r = 0; r < TR; r++)                                                      \
            lo[t][r] = hi[t][r] = _mm256_setzero_ps();                                         \
    size_t k = 0;                                                                              \
    for (; k + 16 <= in; k += 16) {                                                            \
        __m256 wl[TR], wh[TR];                                                                 \
        for (unsigned r = 0; r < nr; r++) {                                                    \
            if (TT > 1) /* prefill: ahead in the row */                                        \
                _mm_prefetch((const char *)(w + r * in + k) + 1024, _MM_HINT_T0);              \
            else if (((k * sizeof *w) & 63) == 0) /* decode: the next tile's row */            \
                _mm_prefetch((const char *)(w + (r + nr) * in + k), _MM_HINT_T0);              \
            wl[r] = LOADW(w + r * in + k);                                                     \
            wh[r] = LOADW(w + r * in + k + 8);                                                 \
        }                                                                                      \
        for (unsigned t = 0; t < nt; t++) {                                                    \
            __m256 xl = _mm256_loadu_ps(x + t * ldx + k);                                      \
            __m256 xh = _mm256_loadu_ps(x + t * ldx + k + 8);                                  \
            for (unsigned r = 0; r < nr; r++) {                                                \
                lo[t][r] = _mm256_fmadd_ps(wl[r], xl, lo[t][r]);                               \
                hi[t][r] = _mm256_fmadd_ps(wh[r], xh, hi[t][r]);                               \
            }                                                                                  \
        }                                                                                      \
    }                                                                                          \
    if (k < in) {                                                                              \
        WTYPE tw[TR][16];                                                                      \
        for (unsigned r = 0; r < nr; r++)                                                      \
            TAILW(tw[r], w + r * in + k, in - k);                                              \
        for (unsigned t = 0; t < nt; t++) {                                                    \
            float tx[16];                                                                      \
            tail_f32(tx, x + t * ldx + k, in - k);                                             \
            __m256 xl = _mm256_loadu_ps(tx), xh = _mm256_loadu_ps(tx + 8);                     \
            for (unsigned r = 0; r < nr; r++) {                                                \
                lo[t][r] = _mm256_fmadd_ps(LOADW(tw[r]), xl, lo[t][r]);                        \
                hi[t][r] = _mm256_fmadd_ps(LOADW(tw[r] + 8), xh, hi[t][r]);                    \
            }                                                                                  \
        }                                                                                      \
    }                                                                                          \
    for (unsigned t = 0; t < nt; t++)                                                          \
        for (unsigned r = 0; r < nr; r++)                                                      \
            y[t * ldy + r] = fold2(lo[t][r], hi[t][r]);

#define LOAD_F32(p) _mm256_loadu_ps(p)

/* Inlined with the shape constant for full tiles, so the accumulators live
 * in registers; edge tiles take the general path, with the same operations
 * per element. */
static inline __attribute__((always_inline)) void
tile_f32_k(float *y, size_t ldy, const float *x, size_t ldx, const float *w, size_t in,
           unsigned nt, unsigned nr)
{
    TILE_BODY(3, 2, float, LOAD_F32, tail_f32)
}

static inline __attribute__((always_inline)) void
tile_f16_k(float *y, size_t ldy, const float *x, size_t ldx, const uint16_t *w, size_t in,
           unsigned nt, unsigned nr)
{
    TILE_BODY(3, 2, uint16_t, load_h8, tail_f16)
}

static inline __attribute__((always_inline)) void
tile1_f32_k(float *y, const float *x, const float *w, size_t in, unsigned nr)
{
    const size_t ldy = 0, ldx = 0;
    const unsigned nt = 1;
    TILE_BODY(1, 6, float, LOAD_F32, tail_f32)
}

static inline __attribute__((always_inline)) void
tile1_f16_k(float *y, const float *x, const uint16_t *w, size_t in, unsigned nr)
{
    const size_t ldy = 0, ldx = 0;
    const unsigned nt = 1;
    TILE_BODY(1, 6, uint16_t, load_h8, tail_f16)
}

static inline __attribute__((always_inline)) void
tile_bf16_k(float *y, size_t ldy, const float *x, size_t ldx, const uint16_t *w, size_t in,
            unsigned nt, unsigned nr)
{
    TILE_BODY(3, 2, uint16_t, load_b8, tail_f16)
}

static inline __attribute__((always_inline)) void
tile1_bf16_k(float *y, const float *x, const uint16_t *w, size_t in, unsigned nr)
{
    const size_t ldy = 0, ldx = 0;
    const unsigned nt = 1;
    TILE_BODY(1, 6, uint16_t, load_b8, tail_f16)
}

/* The tile entry points: full 3 x 2 and 1 x 6 tiles with the shape a
 * constant, one token in the decode body, anything else in the general
 * one; the same operations per element whichever runs. */
#define TILE_ENTRY(NAME, WT, BODY, BODY1)                                                       \
    static void NAME(float *y, size_t ldy, const float *x, size_t ldx, const WT *w, size_t in, \
                     unsigned nt, unsigned nr)                                                \
    {                                                                                         \
        if (nt == 3 && nr == 2)                                                               \
            BODY(y, ldy, x, ldx, w, in, 3, 2);                                                \
        else if (nt == 1 && nr == 6)                                                          \
            BODY1(y, x, w, in, 6);                                                            \
        else if (nt == 1)                                                                     \
            BODY1(y, x, w, in, nr);                                                           \
        else                                                                                  \
            BODY(y, ldy, x, ldx, w, in, nt, nr);                                              \
    }
TILE_ENTRY(tile_f32, float, tile_f32_k, tile1_f32_k)
TILE_ENTRY(tile_f16, uint16_t, tile_f16_k, tile1_f16_k)
TILE_ENTRY(tile_bf16, uint16_t, tile_bf16_k, tile1_bf16_k)
#undef TILE_ENTRY

static const sb_rt_mm_isa avx2_mm = {
    .tile_tok = 3, .tile_row = 2, .f32 = tile_f32, .f16 = tile_f16, .bf16 = tile_bf16,
    .tile_row_1 = 6, .q_tok = 2, .q_row = 2, .q_row_1 = 4, .q = sb_rt_qtiles_avx2,
    .xq = sb_rt_xq_quant_avx2,
};

static void v_matmul(sb_rt_pool *pool, float *y, const float *x, const void *w, sb_rt_dtype wt,
                     size_t n_tok, size_t in, size_t out)
{
    sb_rt_mm_drive(&avx2_mm, pool, y, x, w, wt, n_tok, in, out);
}

/* ---- element-wise ---------------------------------------------------------------------- */

static void v_rmsnorm(float *y, const float *x, const float *w, size_t n, float eps)
{
    if (!n)
        return;
    float ss = v_dot_f32(x, x, n);
    float kf = 1.0f / sqrtf(ss / (float)n + eps);
    __m256 k = _mm256_set1_ps(kf);
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), k),
                                              _mm256_loadu_ps(w + i)));
    for (; i < n; i++)
        y[i] = x[i] * kf * w[i];
}

static void v_add(float *y, const float *x, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
    for (; i < n; i++)
        y[i] += x[i];
}

static void v_axpy_f32(float *y, float a, const float *x, size_t n)
{
    __m256 av = _mm256_set1_ps(a);
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] = fmaf(a, x[i], y[i]);
}

static void v_axpy_f16(float *y, float a, const uint16_t *x, size_t n)
{
    __m256 av = _mm256_set1_ps(a);
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, load_h8(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] = fmaf(a, sb_rt_f16_to_f32_1(x[i]), y[i]);
}

/* Two rows at a time (independent chains), each row's operations those of
 * v_dot_f16. */
static void v_dots_f16(float *out, const uint16_t *a, size_t stride, size_t rows,
                       const float *b, size_t n)
{
    size_t j = 0;
    if (n % 16 == 0)
        for (; j + 2 <= rows; j += 2) {
            const uint16_t *r0 = a + j * stride, *r1 = r0 + stride;
            __m256 l0 = _mm256_setzero_ps(), h0 = l0, l1 = l0, h1 = l0;
            for (size_t k = 0; k < n; k += 16) {
                __m256 bl = _mm256_loadu_ps(b + k), bh = _mm256_loadu_ps(b + k + 8);
                l0 = _mm256_fmadd_ps(load_h8(r0 + k), bl, l0);
                h0 = _mm256_fmadd_ps(load_h8(r0 + k + 8), bh, h0);
                l1 = _mm256_fmadd_ps(load_h8(r1 + k), bl, l1);
                h1 = _mm256_fmadd_ps(load_h8(r1 + k + 8), bh, h1);
            }
            out[j] = fold2(l0, h0);
            out[j + 1] = fold2(l1, h1);
        }
    for (; j < rows; j++)
        out[j] = v_dot_f16(a + j * stride, b, n);
}

/* y in registers across the rows, 32 values at a time; each element sees
 * the FMAs of repeated v_axpy_f16 calls, in row order. */
static void v_axpys_f16(float *y, const float *a, const uint16_t *x, size_t stride, size_t rows,
                        size_t n)
{
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256 acc[4];
        for (int q = 0; q < 4; q++)
            acc[q] = _mm256_loadu_ps(y + i + 8 * q);
        for (size_t j = 0; j < rows; j++) {
            __m256 av = _mm256_set1_ps(a[j]);
            const uint16_t *r = x + j * stride + i;
            for (int q = 0; q < 4; q++)
                acc[q] = _mm256_fmadd_ps(av, load_h8(r + 8 * q), acc[q]);
        }
        for (int q = 0; q < 4; q++)
            _mm256_storeu_ps(y + i + 8 * q, acc[q]);
    }
    if (i < n)
        for (size_t j = 0; j < rows; j++)
            v_axpy_f16(y + i, a[j], x + j * stride + i, n - i);
}

/* exp(v) for v <= 0, the AVX-512 table's method and constants: v = k ln2
 * + r, e^r by Taylor to r^6, times 2^k. 2^k is built in the exponent field
 * (k >= -126 wherever v >= -87, so it is a normal float) and multiplied:
 * one correctly rounded product, as scalef's. v < -87, -inf and NaN give 0. */
static inline __m256 exp_neg(__m256 v)
{
    __m256 k = _mm256_round_ps(_mm256_mul_ps(v, _mm256_set1_ps(1.44269504f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 live = _mm256_cmp_ps(v, _mm256_set1_ps(-87.0f), _CMP_GE_OQ);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), v);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.0f / 720);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i ki = _mm256_cvtps_epi32(_mm256_and_ps(k, live)); /* dead lanes: k = 0 */
    __m256 two_k = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(ki, _mm256_set1_epi32(127)), 23));
    return _mm256_and_ps(_mm256_mul_ps(p, two_k), live);
}

/* softmax: the max, then exp of the shifted values summed in 16 lanes
 * (kernels.h's order; the tail padded with -inf, whose exp is 0), then the
 * scale. */
static void v_softmax(float *x, size_t n)
{
    if (!n)
        return;
    float mx = -INFINITY;
    size_t i = 0;
    if (n >= 8) {
        __m256 mv = _mm256_set1_ps(-INFINITY);
        for (; i + 8 <= n; i += 8)
            mv = _mm256_max_ps(mv, _mm256_loadu_ps(x + i));
        float t[8];
        _mm256_storeu_ps(t, mv);
        for (int q = 0; q < 8; q++)
            mx = t[q] > mx ? t[q] : mx;
    }
    for (; i < n; i++)
        mx = x[i] > mx ? x[i] : mx;
    if (mx == -INFINITY) {
        memset(x, 0, n * sizeof *x);
        return;
    }
    __m256 m = _mm256_set1_ps(mx), lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
    for (i = 0; i + 16 <= n; i += 16) {
        __m256 el = exp_neg(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
        __m256 eh = exp_neg(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), m));
        _mm256_storeu_ps(x + i, el);
        _mm256_storeu_ps(x + i + 8, eh);
        lo = _mm256_add_ps(lo, el);
        hi = _mm256_add_ps(hi, eh);
    }
    if (i < n) {
        float t[16];
        for (int q = 0; q < 16; q++)
            t[q] = i + (size_t)q < n ? x[i + q] : -INFINITY;
        __m256 el = exp_neg(_mm256_sub_ps(_mm256_loadu_ps(t), m));
        __m256 eh = exp_neg(_mm256_sub_ps(_mm256_loadu_ps(t + 8), m));
        _mm256_storeu_ps(t, el);
        _mm256_storeu_ps(t + 8, eh);
        memcpy(x + i, t, (n - i) * sizeof *x);
        lo = _mm256_add_ps(lo, el);
        hi = _mm256_add_ps(hi, eh);
    }
    float inv = 1.0f / fold2(lo, hi);
    __m256 iv = _mm256_set1_ps(inv);
    for (i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), iv));
    for (; i < n; i++)
        x[i] *= inv;
}

/* silu uses libm's expf, as the reference does. */
static void v_silu_mul(float *a, const float *b, size_t n)
{
    sb_rt_kernels_ref.silu_mul(a, b, n);
}

/* Attention over many queries: the single-query kernels per query (each
 * query's bits are theirs; the AVX-512 table shares the row loads). */
static void v_qk_f16(float *s, size_t lds, const float *q, size_t ldq, size_t nq,
                     const uint16_t *k, size_t ldk, size_t rows, size_t n)
{
    for (size_t i = 0; i < nq; i++)
        v_dots_f16(s + i * lds, k, ldk, rows, q + i * ldq, n);
}

static void v_av_f16(float *o, size_t ldo, const float *s, size_t lds, size_t nq,
                     const uint16_t *v, size_t ldv, size_t rows, size_t n)
{
    for (size_t i = 0; i < nq; i++)
        v_axpys_f16(o + i * ldo, s + i * lds, v, ldv, rows, n);
}

const sb_rt_kernels sb_rt_kernels_avx2 = {
    v_f16_to_f32, v_f32_to_f16, v_matmul, v_rmsnorm, v_softmax, v_silu_mul,
    v_add, v_dot_f32, v_dot_f16, v_axpy_f32, v_axpy_f16, v_dots_f16, v_axpys_f16,
    v_qk_f16, v_av_f16, SB_RT_ISA_AVX2, "avx2",
};
