/* kernels_ref.c -- the portable scalar kernels: the definitions the SIMD
 * tables are tested against (kernels.h, "Summation order": 16 lanes, each a
 * strided partial sum, folded in halves). */
#include <math.h>
#include <string.h>

#include "kernels/kernels_isa.h"

#define L 16u                   /* lanes of the reference order */

/* ---- f16 ---------------------------------------------------------------------- */

float sb_rt_f16_to_f32_1(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13); /* inf, NaN (payload kept) */
    } else if (exp) {
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    } else if (man) { /* subnormal: normalize */
        int e = -1;
        do {
            man <<= 1;
            e++;
        } while (!(man & 0x400u));
        bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ffu) << 13);
    } else {
        bits = sign;
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t sb_rt_f32_to_f16_1(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t exp = (x >> 23) & 0xffu, man = x & 0x7fffffu;
    if (exp == 0xff) /* inf or NaN (quiet, top payload bits kept) */
        return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) { /* subnormal half or zero */
        if (e < -10)
            return sign;
        man |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t q = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1)))
            q++;
        return (uint16_t)(sign | q);
    }
    uint32_t q = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1)))
        q++; /* may carry into the exponent, up to inf: correct */
    return (uint16_t)(sign | q);
}

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

/* ---- Q8_0 ----------------------------------------------------------------------------- */

void sb_rt_quant_q8_ref(const float *x, int8_t *q, float *d, size_t in)
{
    for (size_t b = 0; b < in / SB_RT_Q8_0_BLOCK; b++) {
        const float *v = x + b * SB_RT_Q8_0_BLOCK;
        float amax = 0;
        for (unsigned i = 0; i < SB_RT_Q8_0_BLOCK; i++)
            amax = fmaxf(amax, fabsf(v[i]));
        float db = amax / 127.0f, inv = db != 0 ? 1.0f / db : 0.0f;
        d[b] = db;
        for (unsigned i = 0; i < SB_RT_Q8_0_BLOCK; i++) {
            float r = nearbyintf(v[i] * inv); /* ties to even (default rounding) */
            q[b * SB_RT_Q8_0_BLOCK + i] = (int8_t)(r > 127 ? 127 : r < -127 ? -127 : r);
        }
    }
}

static float q8_dot(const int8_t *xq, const float *xd, const uint8_t *w, size_t in)
{
    float y = 0;
    for (size_t b = 0; b < in / SB_RT_Q8_0_BLOCK; b++, w += SB_RT_Q8_0_BLOCK_BYTES) {
        uint16_t dh;
        memcpy(&dh, w, 2);
        int32_t s = 0;
        for (unsigned i = 0; i < SB_RT_Q8_0_BLOCK; i++)
            s += (int32_t)xq[b * SB_RT_Q8_0_BLOCK + i] * (int32_t)(int8_t)w[2 + i];
        float scale = sb_rt_f16_to_f32_1(dh) * xd[b];
        float p = scale * (float)s;
        y += p;
    }
    return y;
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

static void tile_q8(float *y, size_t ldy, const int8_t *xq, const float *xd, size_t ldq,
                    const uint8_t *w, size_t in, unsigned nt, unsigned nr)
{
    size_t rb = in / SB_RT_Q8_0_BLOCK * SB_RT_Q8_0_BLOCK_BYTES;
    for (unsigned t = 0; t < nt; t++)
        for (unsigned r = 0; r < nr; r++)
            y[t * ldy + r] = q8_dot(xq + t * ldq, xd + t * (ldq / SB_RT_Q8_0_BLOCK), w + r * rb, in);
}

static const sb_rt_mm_isa ref_mm = { 1, 4, tile_f32, tile_f16, tile_q8, sb_rt_quant_q8_ref, 4 };

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
