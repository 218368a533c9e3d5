/* kernels_ref.c -- the portable scalar kernels: the definitions the SIMD
 * tables are tested against (kernels.h, "Summation order": 16 lanes, each a
 * strided partial sum, folded in halves). */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/f16.h"
#include "kernels/kernels_isa.h"
#include "kernels/quant.h"

#define L 16u                   /* lanes of the reference order */

/* ---- f16 ---------------------------------------------------------------------- */

static void ref_f16_to_f32(const uint16_t *x, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = sb_rt_f16_to_f32_1(x[i]);
}

static void ref_f32_to_f16(const float *x, uint16_t *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = sb_rt_f32_to_f16_1(x[i]);
}

/* ---- dots in the lane order ---------------------------------------------------------- */

static float fold(float *acc)
{
    for (unsigned h = L / 2; h; h /= 2)
        for (unsigned j = 0; j < h; j++)
            acc[j] += acc[j + h];
    return acc[0];
}

static float ref_dot_f32(const float *a, const float *b, size_t n)
{
    float acc[L] = { 0 };
    for (size_t k = 0; k < n; k++) {
        float p = a[k] * b[k];
        acc[k % L] += p;
    }
    return fold(acc);
}

static float ref_dot_f16(const uint16_t *a, const float *b, size_t n)
{
    float acc[L] = { 0 };
    for (size_t k = 0; k < n; k++) {
        float p = sb_rt_f16_to_f32_1(a[k]) * b[k];
        acc[k % L] += p;
    }
    return fold(acc);
}

static float ref_dot_bf16(const uint16_t *a, const float *b, size_t n)
{
    float acc[L] = { 0 };
    for (size_t k = 0; k < n; k++) {
        float p = sb_rt_bf16_to_f32_1(a[k]) * b[k];
        acc[k % L] += p;
    }
    return fold(acc);
}

/* ---- quantized W: kernels.h's rule, written out ------------------------------------- */

static inline float ld_h(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return sb_rt_f16_to_f32_1(h);
}

static inline float ld_f(const uint8_t *p)
{
    float f;
    memcpy(&f, p, 4);
    return f;
}

/* The integer q of W value i of the block at w, centred as kernels.h says
 * (Q4_0 - 8, Q5_0 - 16, Q6_K not: its -32 is applied separately). */
static int qw_val(sb_rt_dtype t, const uint8_t *w, unsigned i)
{
    uint32_t qh = 0;
    switch (t) {
    case SB_RT_Q8_0:
        return (int8_t)w[2 + i];
    case SB_RT_Q4_0:
        return sb_rt_q32_val(w + 2, 0, i) - 8;
    case SB_RT_Q4_1:
        return sb_rt_q32_val(w + 4, 0, i);
    case SB_RT_Q5_0:
        memcpy(&qh, w + 2, 4);
        return sb_rt_q32_val(w + 6, qh, i) - 16;
    case SB_RT_Q5_1:
        memcpy(&qh, w + 4, 4);
        return sb_rt_q32_val(w + 8, qh, i);
    case SB_RT_Q4_K:
    case SB_RT_Q5_K: {
        unsigned j = i / 32, l = i % 32;
        const uint8_t *qs = w + (t == SB_RT_Q5_K ? SB_RT_Q5_K_QS : SB_RT_Q4_K_QS);
        uint8_t by = qs[32 * (j / 2) + l];
        int q = j % 2 ? by >> 4 : by & 15;
        if (t == SB_RT_Q5_K)
            q |= ((w[SB_RT_Q5_K_QH + l] >> j) & 1) << 4;
        return q;
    }
    case SB_RT_Q6_K:
        return sb_rt_q6k_val(w, i);
    default:
        return 0;
    }
}

/* Y element of X row xq (quantized for t, in values) and W row w of type t,
 * kernels.h's lanes written out one at a time. The sums of X's q are taken
 * from q itself, not from the row's stored sums, so the quantizer's sums
 * are checked too. */
static float qdot(sb_rt_dtype t, const uint8_t *xq, const uint8_t *w, size_t in)
{
    const int8_t *qx = (const int8_t *)xq;
    size_t blk = sb_rt_dtype_block(t), bb = sb_rt_dtype_block_bytes(t), nb = in / blk;
    float acc[L] = { 0 };
    for (size_t b = 0; b < nb; b++, w += bb, qx += blk) {
        float dx = ld_f(xq + in + 4 * b);
        if (blk == 32) {
            bool one = t == SB_RT_Q4_1 || t == SB_RT_Q5_1;
            float sd = ld_h(w) * dx, sm = one ? ld_h(w + 2) * dx : 0;
            for (unsigned k = 0; k < 8; k++) {
                int32_t I = 0, J = 0;
                for (unsigned v = 0; v < 4; v++) {
                    I += qw_val(t, w, 4 * k + v) * qx[4 * k + v];
                    J += qx[4 * k + v];
                }
                float *lane = &acc[8 * (b % 2) + k];
                *lane = fmaf((float)I, sd, *lane);
                if (one)
                    *lane = fmaf((float)J, sm, *lane);
            }
            continue;
        }
        int32_t I[L] = { 0 };
        for (unsigned k = 0; k < L; k++)
            for (unsigned c = 0; c < 4; c++) {
                unsigned i0 = 64 * c + 4 * k;
                int32_t g = 0;
                for (unsigned v = 0; v < 4; v++)
                    g += qw_val(t, w, i0 + v) * qx[i0 + v];
                int32_t sc;
                if (t == SB_RT_Q6_K) {
                    sc = (int8_t)w[SB_RT_Q6_K_SC + i0 / 16];
                } else {
                    uint8_t s6, m6;
                    sb_rt_qk_scale_min(w + SB_RT_QK_SCALES, i0 / 32, &s6, &m6);
                    sc = s6;
                }
                I[k] += sc * g;
            }
        int32_t X[16]; /* sums of qx over the 16-value sub-blocks */
        for (unsigned g = 0; g < 16; g++) {
            X[g] = 0;
            for (unsigned v = 0; v < 16; v++)
                X[g] += qx[16 * g + v];
        }
        if (t == SB_RT_Q6_K) {
            for (unsigned k = 0; k < 8; k++)
                I[k] -= 32 * ((int8_t)w[SB_RT_Q6_K_SC + 2 * k] * X[2 * k] +
                              (int8_t)w[SB_RT_Q6_K_SC + 2 * k + 1] * X[2 * k + 1]);
            float sd = ld_h(w + SB_RT_Q6_K_D) * dx;
            for (unsigned k = 0; k < L; k++)
                acc[k] = fmaf((float)I[k], sd, acc[k]);
            continue;
        }
        float sd = ld_h(w) * dx, sm = ld_h(w + 2) * dx;
        for (unsigned k = 0; k < L; k++)
            acc[k] = fmaf((float)I[k], sd, acc[k]);
        for (unsigned k = 0; k < 8; k++) {
            uint8_t s6, m6;
            sb_rt_qk_scale_min(w + SB_RT_QK_SCALES, k, &s6, &m6);
            acc[k] = fmaf(-(float)(m6 * (X[2 * k] + X[2 * k + 1])), sm, acc[k]);
        }
    }
    return fold(acc);
}

/* ---- tiles ------------------------------------------------------------------------------ */

static void tile_f32(float *y, size_t ldy, const float *x, size_t ldx, const float *w, size_t in,
                     unsigned nt, unsigned nr)
{
    for (unsigned t = 0; t < nt; t++)
        for (unsigned r = 0; r < nr; r++)
            y[t * ldy + r] = ref_dot_f32(w + r * in, x + t * ldx, in);
}

static void tile_f16(float *y, size_t ldy, const float *x, size_t ldx, const uint16_t *w,
                     size_t in, unsigned nt, unsigned nr)
{
    for (unsigned t = 0; t < nt; t++)
        for (unsigned r = 0; r < nr; r++)
            y[t * ldy + r] = ref_dot_f16(w + r * in, x + t * ldx, in);
}

static void tile_bf16(float *y, size_t ldy, const float *x, size_t ldx, const uint16_t *w,
                      size_t in, unsigned nt, unsigned nr)
{
    for (unsigned t = 0; t < nt; t++)
        for (unsigned r = 0; r < nr; r++)
            y[t * ldy + r] = ref_dot_bf16(w + r * in, x + t * ldx, in);
}

#define QTILE(NAME, T)                                                                         \
    static void NAME(float *y, size_t ldy, const uint8_t *xq, size_t ldq, const uint8_t *w,  \
                     size_t in, unsigned nt, unsigned nr)                                    \
    {                                                                                        \
        size_t rb = sb_rt_dtype_row_bytes(T, in);                                            \
        for (unsigned t = 0; t < nt; t++)                                                    \
            for (unsigned r = 0; r < nr; r++)                                                \
                y[t * ldy + r] = qdot(T, xq + t * ldq, w + r * rb, in);                      \
    }
QTILE(tile_q4_0, SB_RT_Q4_0)
QTILE(tile_q4_1, SB_RT_Q4_1)
QTILE(tile_q5_0, SB_RT_Q5_0)
QTILE(tile_q5_1, SB_RT_Q5_1)
QTILE(tile_q8_0, SB_RT_Q8_0)
QTILE(tile_q4_k, SB_RT_Q4_K)
QTILE(tile_q5_k, SB_RT_Q5_K)
QTILE(tile_q6_k, SB_RT_Q6_K)
#undef QTILE

const sb_rt_qtile_fn sb_rt_qtiles_ref[SB_RT_DTYPE_MAX] = {
    [SB_RT_Q4_0] = tile_q4_0, [SB_RT_Q4_1] = tile_q4_1, [SB_RT_Q5_0] = tile_q5_0,
    [SB_RT_Q5_1] = tile_q5_1, [SB_RT_Q8_0] = tile_q8_0, [SB_RT_Q4_K] = tile_q4_k,
    [SB_RT_Q5_K] = tile_q5_k, [SB_RT_Q6_K] = tile_q6_k,
};

static const sb_rt_mm_isa ref_mm = {
    .tile_tok = 1, .tile_row = 4, .f32 = tile_f32, .f16 = tile_f16, .bf16 = tile_bf16,
    .tile_row_1 = 4, .q_tok = 1, .q_row = 4, .q_row_1 = 4, .q = sb_rt_qtiles_ref,
    .xq = sb_rt_xq_quant_ref,
};

static void ref_matmul(sb_rt_pool *pool, float *y, const float *x, const void *w, sb_rt_dtype wt,
                       size_t n_tok, size_t in, size_t out)
{
    sb_rt_mm_drive(&ref_mm, pool, y, x, w, wt, n_tok, in, out);
}

/* ---- element-wise ------------------------------------------------------------------------ */

static void ref_rmsnorm(float *y, const float *x, const float *w, size_t n, float eps)
{
    if (!n)
        return;
    float ss = ref_dot_f32(x, x, n);
    float k = 1.0f / sqrtf(ss / (float)n + eps);
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] * k * w[i];
}

static void ref_softmax(float *x, size_t n)
{
    if (!n)
        return;
    float mx = -INFINITY;
    for (size_t i = 0; i < n; i++)
        mx = x[i] > mx ? x[i] : mx;
    if (mx == -INFINITY) {
        memset(x, 0, n * sizeof *x);
        return;
    }
    float acc[L] = { 0 };
    for (size_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        acc[i % L] += x[i];
    }
    float inv = 1.0f / fold(acc);
    for (size_t i = 0; i < n; i++)
        x[i] *= inv;
}

static void ref_silu_mul(float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        a[i] = a[i] / (1.0f + expf(-a[i])) * b[i];
}

static void ref_add(float *y, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] += x[i];
}

static void ref_axpy_f32(float *y, float a, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] += a * x[i];
}

static void ref_axpy_f16(float *y, float a, const uint16_t *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] += a * sb_rt_f16_to_f32_1(x[i]);
}

static void ref_dots_f16(float *out, const uint16_t *a, size_t stride, size_t rows,
                         const float *b, size_t n)
{
    for (size_t j = 0; j < rows; j++)
        out[j] = ref_dot_f16(a + j * stride, b, n);
}

static void ref_axpys_f16(float *y, const float *a, const uint16_t *x, size_t stride,
                          size_t rows, size_t n)
{
    for (size_t j = 0; j < rows; j++)
        ref_axpy_f16(y, a[j], x + j * stride, n);
}

static void ref_qk_f16(float *s, size_t lds, const float *q, size_t ldq, size_t nq,
                       const uint16_t *k, size_t ldk, size_t rows, size_t n)
{
    for (size_t i = 0; i < nq; i++)
        ref_dots_f16(s + i * lds, k, ldk, rows, q + i * ldq, n);
}

static void ref_av_f16(float *o, size_t ldo, const float *s, size_t lds, size_t nq,
                       const uint16_t *v, size_t ldv, size_t rows, size_t n)
{
    for (size_t i = 0; i < nq; i++)
        ref_axpys_f16(o + i * ldo, s + i * lds, v, ldv, rows, n);
}

const sb_rt_kernels sb_rt_kernels_ref = {
    ref_f16_to_f32, ref_f32_to_f16, ref_matmul, ref_rmsnorm, ref_softmax, ref_silu_mul,
    ref_add, ref_dot_f32, ref_dot_f16, ref_axpy_f32, ref_axpy_f16, ref_dots_f16, ref_axpys_f16,
    ref_qk_f16, ref_av_f16, SB_RT_ISA_REF, "ref",
};
