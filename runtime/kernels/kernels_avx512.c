/* kernels_avx512.c -- AVX-512 (F, BW, VL) + FMA + F16C kernels. Compiled
 * with those flags alone (runtime/CMakeLists.txt) and only called after
 * kernels.c checked the CPU.
 *
 * Dot products follow kernels.h's order with L = 16: a zmm register is the
 * 16 lanes, one FMA per 16 terms, the tail through a masked (zeroing) load,
 * lanes folded in halves (256, 128, 64, 32 bits). A matmul tile keeps
 * tokens x rows accumulators (up to 6 x 4) and loads each W vector once for
 * all its tokens; each accumulator sees exactly the single-token sequence.
 * The one-token (decode) tile streams its rows once and prefetches the
 * next tile's rows at the same offsets, a cache line at a time: rows are
 * short (1536 bytes at dim 768 in F16) and the next tile's are where the
 * hardware prefetcher cannot look ahead.
 * BF16 like F16 with another load. Quantized types: kernels_q_avx512.c.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/kernels_isa.h"
#include "kernels/simd_avx512.h"

static inline __mmask16 tail_mask(size_t rem)
{
    return (__mmask16)((1u << rem) - 1u);
}

static inline __m512 load_f16(const uint16_t *p)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p));
}

static inline __m512 load_f16_mask(const uint16_t *p, __mmask16 m)
{
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

/* 16 BF16 values as f32 (exact: each is the top half of its f32). */
static inline __m512 load_bf16(const uint16_t *p)
{
    __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}

static inline __m512 load_bf16_mask(const uint16_t *p, __mmask16 m)
{
    __m512i v = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}

/* ---- conversions ---------------------------------------------------------------- */

static void v_f16_to_f32(const uint16_t *x, float *y, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, load_f16(x + i));
    if (i < n) {
        __mmask16 m = tail_mask(n - i);
        _mm512_mask_storeu_ps(y + i, m, load_f16_mask(x + i, m));
    }
}

static void v_f32_to_f16(const float *x, uint16_t *y, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(void *)(y + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    if (i < n) {
        __mmask16 m = tail_mask(n - i);
        __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), _MM_FROUND_TO_NEAREST_INT);
        _mm256_mask_storeu_epi16(y + i, m, h);
    }
}

/* ---- dots ------------------------------------------------------------------------ */

static float v_dot_f32(const float *a, const float *b, size_t n)
{
    __m512 acc = _mm512_setzero_ps();
    size_t k = 0;
    for (; k + 16 <= n; k += 16)
        acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + k), _mm512_loadu_ps(b + k), acc);
    if (k < n) {
        __mmask16 m = tail_mask(n - k);
        acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + k), _mm512_maskz_loadu_ps(m, b + k),
                              acc);
    }
    return fold(acc);
}

static float v_dot_f16(const uint16_t *a, const float *b, size_t n)
{
    __m512 acc = _mm512_setzero_ps();
    size_t k = 0;
    for (; k + 16 <= n; k += 16)
        acc = _mm512_fmadd_ps(load_f16(a + k), _mm512_loadu_ps(b + k), acc);
    if (k < n) {
        __mmask16 m = tail_mask(n - k);
        acc = _mm512_fmadd_ps(load_f16_mask(a + k, m), _mm512_maskz_loadu_ps(m, b + k), acc);
    }
    return fold(acc);
}

/* ---- matmul tiles ------------------------------------------------------------------ */

/* nt tokens x nr rows, W rows loaded by LOADW(row pointer + k) (16 lanes)
 * and LOADW_M for the masked tail. Accumulators acc[t][r]. */
#define TILE_BODY(WTYPE, LOADW, LOADW_M)                                                       \
    __m512 acc[6][4];                                                                          \
    for (unsigned t = 0; t < 6; t++)                                                           \
        for (unsigned r = 0; r < 4; r++)                                                       \
            acc[t][r] = _mm512_setzero_ps();                                                   \
    size_t k = 0;                                                                              \
    for (; k + 16 <= in; k += 16) {                                                            \
        __m512 wv[4];                                                                          \
        for (unsigned r = 0; r < nr; r++) {                                                    \
            _mm_prefetch((const char *)(w + r * ldw + k) + 1024, _MM_HINT_T0);                  \
            wv[r] = LOADW(w + r * ldw + k);                                                     \
        }                                                                                      \
        for (unsigned t = 0; t < nt; t++) {                                                    \
            __m512 xv = _mm512_loadu_ps(x + t * ldx + k);                                      \
            for (unsigned r = 0; r < nr; r++)                                                  \
                acc[t][r] = _mm512_fmadd_ps(wv[r], xv, acc[t][r]);                             \
        }                                                                                      \
    }                                                                                          \
    if (k < in) {                                                                              \
        __mmask16 m = tail_mask(in - k);                                                       \
        __m512 wv[4];                                                                          \
        for (unsigned r = 0; r < nr; r++)                                                      \
            wv[r] = LOADW_M(w + r * ldw + k, m);                                                \
        for (unsigned t = 0; t < nt; t++) {                                                    \
            __m512 xv = _mm512_maskz_loadu_ps(m, x + t * ldx + k);                             \
            for (unsigned r = 0; r < nr; r++)                                                  \
                acc[t][r] = _mm512_fmadd_ps(wv[r], xv, acc[t][r]);                             \
        }                                                                                      \
    }                                                                                          \
    for (unsigned t = 0; t < nt; t++) {                                                        \
        if (nr == 4) {                                                                         \
            fold4(y + t * ldy, acc[t][0], acc[t][1], acc[t][2], acc[t][3]);                    \
            continue;                                                                          \
        }                                                                                      \
        for (unsigned r = 0; r < nr; r++)                                                      \
            y[t * ldy + r] = fold(acc[t][r]);                                                  \
    }

#define LOAD_F32(p) _mm512_loadu_ps(p)
#define LOAD_F32_M(p, m) _mm512_maskz_loadu_ps(m, p)

/* One token x up to 8 rows (decode): eight W streams in flight; each
 * element's operations are TILE_BODY's. */
#define TILE1_BODY(LOADW, LOADW_M)                                                              \
    __m512 acc[8];                                                                             \
    for (unsigned r = 0; r < 8; r++)                                                           \
        acc[r] = _mm512_setzero_ps();                                                          \
    size_t k = 0;                                                                              \
    for (; k + 16 <= in; k += 16) {                                                            \
        __m512 xv = _mm512_loadu_ps(x + k);                                                    \
        for (unsigned r = 0; r < nr; r++) {                                                    \
            if (((k * sizeof *w) & 63) == 0) /* the next tile's row, a line at a time */       \
                _mm_prefetch((const char *)(w + (r + nr) * ldw + k), _MM_HINT_T0);              \
            acc[r] = _mm512_fmadd_ps(LOADW(w + r * ldw + k), xv, acc[r]);                       \
        }                                                                                      \
    }                                                                                          \
    if (k < in) {                                                                              \
        __mmask16 m = tail_mask(in - k);                                                       \
        __m512 xv = _mm512_maskz_loadu_ps(m, x + k);                                           \
        for (unsigned r = 0; r < nr; r++)                                                      \
            acc[r] = _mm512_fmadd_ps(LOADW_M(w + r * ldw + k, m), xv, acc[r]);                  \
    }                                                                                          \
    if (nr == 8) {                                                                             \
        fold4(y, acc[0], acc[1], acc[2], acc[3]);                                              \
        fold4(y + 4, acc[4], acc[5], acc[6], acc[7]);                                          \
    } else {                                                                                   \
        for (unsigned r = 0; r < nr; r++)                                                      \
            y[r] = fold(acc[r]);                                                               \
    }

static inline __attribute__((always_inline)) void
tile1_f16_k(float *y, const float *x, const uint16_t *w, size_t in, unsigned nr)
{
    const size_t ldw = in;
    TILE1_BODY(load_f16, load_f16_mask)
}

static inline __attribute__((always_inline)) void
tile1_f32_k(float *y, const float *x, const float *w, size_t in, unsigned nr)
{
    const size_t ldw = in;
    TILE1_BODY(LOAD_F32, LOAD_F32_M)
}

/* The bodies are inlined with the tile shape as a constant for full 6 x 4
 * tiles, so the 16 accumulators live in registers; edge tiles take the
 * general path. Both run the same operations per element. */
static inline __attribute__((always_inline)) void
tile_f32_k(float *y, size_t ldy, const float *x, size_t ldx, const float *w, size_t in,
           unsigned nt, unsigned nr)
{
    const size_t ldw = in;
    TILE_BODY(float, LOAD_F32, LOAD_F32_M)
}

/* W rows ldw values apart (in for a matrix; a KV row stride for attention). */
static inline __attribute__((always_inline)) void
tile_f16_k(float *y, size_t ldy, const float *x, size_t ldx, const uint16_t *w, size_t in,
           size_t ldw, unsigned nt, unsigned nr)
{
    TILE_BODY(uint16_t, load_f16, load_f16_mask)
}

/* The tile entry points: full 6 x 4 and 1 x 8 tiles with the shape a
 * constant, one token and up to 8 rows in the decode body, anything else
 * in the general one; the same operations per element whichever runs. */
#define TILE_ENTRY(NAME, WT, BODY, BODY1)                                                       \
    static void NAME(float *y, size_t ldy, const float *x, size_t ldx, const WT *w, size_t in, \
                     unsigned nt, unsigned nr)                                                \
    {                                                                                         \
        if (nt == 6 && nr == 4)                                                               \
            BODY(y, ldy, x, ldx, w, in, 6, 4);                                                \
        else if (nt == 1 && nr == 8)                                                          \
            BODY1(y, x, w, in, 8);                                                            \
        else if (nt == 1 && nr > 4)                                                           \
            BODY1(y, x, w, in, nr);                                                           \
        else                                                                                  \
            BODY(y, ldy, x, ldx, w, in, nt, nr);                                              \
    }
/* A matrix's F16 rows are `in` apart. */
static inline __attribute__((always_inline)) void
tile_f16_mk(float *y, size_t ldy, const float *x, size_t ldx, const uint16_t *w, size_t in,
            unsigned nt, unsigned nr)
{
    tile_f16_k(y, ldy, x, ldx, w, in, in, nt, nr);
}

TILE_ENTRY(tile_f32, float, tile_f32_k, tile1_f32_k)
TILE_ENTRY(tile_f16, uint16_t, tile_f16_mk, tile1_f16_k)

static inline __attribute__((always_inline)) void
tile1_bf16_k(float *y, const float *x, const uint16_t *w, size_t in, unsigned nr)
{
    const size_t ldw = in;
    TILE1_BODY(load_bf16, load_bf16_mask)
}

static inline __attribute__((always_inline)) void
tile_bf16_k(float *y, size_t ldy, const float *x, size_t ldx, const uint16_t *w, size_t in,
            unsigned nt, unsigned nr)
{
    const size_t ldw = in;
    TILE_BODY(uint16_t, load_bf16, load_bf16_mask)
}

TILE_ENTRY(tile_bf16, uint16_t, tile_bf16_k, tile1_bf16_k)
#undef TILE_ENTRY

/* Two tables that differ only in their quantized tiles (kernels_q_avx512.c
 * compiled with and without VNNI). */
static const sb_rt_mm_isa avx512_mm = {
    .tile_tok = 6, .tile_row = 4, .f32 = tile_f32, .f16 = tile_f16, .bf16 = tile_bf16,
    .tile_row_1 = 8, .q_tok = 4, .q_row = 4, .q_row_1 = 8, .q = sb_rt_qtiles_avx512,
    .xq = sb_rt_xq_quant_avx512,
};

static const sb_rt_mm_isa avx512vnni_mm = {
    .tile_tok = 6, .tile_row = 4, .f32 = tile_f32, .f16 = tile_f16, .bf16 = tile_bf16,
    .tile_row_1 = 8, .q_tok = 4, .q_row = 4, .q_row_1 = 8, .q = sb_rt_qtiles_avx512vnni,
    .xq = sb_rt_xq_quant_avx512,
};

static void v_matmul(sb_rt_pool *pool, float *y, const float *x, const void *w, sb_rt_dtype wt,
                     size_t n_tok, size_t in, size_t out)
{
    sb_rt_mm_drive(&avx512_mm, pool, y, x, w, wt, n_tok, in, out);
}

static void v_matmul_vnni(sb_rt_pool *pool, float *y, const float *x, const void *w,
                          sb_rt_dtype wt, size_t n_tok, size_t in, size_t out)
{
    sb_rt_mm_drive(&avx512vnni_mm, pool, y, x, w, wt, n_tok, in, out);
}

/* ---- element-wise ---------------------------------------------------------------------- */

static void v_rmsnorm(float *y, const float *x, const float *w, size_t n, float eps)
{
    if (!n)
        return;
    float ss = v_dot_f32(x, x, n);
    __m512 k = _mm512_set1_ps(1.0f / sqrtf(ss / (float)n + eps));
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), k),
                                              _mm512_loadu_ps(w + i)));
    if (i < n) {
        __mmask16 m = tail_mask(n - i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), k),
                                                      _mm512_maskz_loadu_ps(m, w + i)));
    }
}

static void v_add(float *y, const float *x, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_add_ps(_mm512_loadu_ps(y + i), _mm512_loadu_ps(x + i)));
    for (; i < n; i++)
        y[i] += x[i];
}

static void v_axpy_f32(float *y, float a, const float *x, size_t n)
{
    __m512 av = _mm512_set1_ps(a);
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_fmadd_ps(av, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
    if (i < n) {
        __mmask16 m = tail_mask(n - i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(m, x + i),
                                                        _mm512_maskz_loadu_ps(m, y + i)));
    }
}

static void v_axpy_f16(float *y, float a, const uint16_t *x, size_t n)
{
    __m512 av = _mm512_set1_ps(a);
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_fmadd_ps(av, load_f16(x + i), _mm512_loadu_ps(y + i)));
    if (i < n) {
        __mmask16 m = tail_mask(n - i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(av, load_f16_mask(x + i, m),
                                                        _mm512_maskz_loadu_ps(m, y + i)));
    }
}

/* Four rows at a time (independent chains), each row's operations those
 * of v_dot_f16. */
static void v_dots_f16(float *out, const uint16_t *a, size_t stride, size_t rows,
                       const float *b, size_t n)
{
    size_t j = 0;
    for (; j + 4 <= rows; j += 4) {
        __m512 acc[4] = { _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                          _mm512_setzero_ps() };
        const uint16_t *r = a + j * stride;
        size_t k = 0;
        for (; k + 16 <= n; k += 16) {
            __m512 bv = _mm512_loadu_ps(b + k);
            for (int q = 0; q < 4; q++)
                acc[q] = _mm512_fmadd_ps(load_f16(r + q * stride + k), bv, acc[q]);
        }
        if (k < n) {
            __mmask16 m = tail_mask(n - k);
            __m512 bv = _mm512_maskz_loadu_ps(m, b + k);
            for (int q = 0; q < 4; q++)
                acc[q] = _mm512_fmadd_ps(load_f16_mask(r + q * stride + k, m), bv, acc[q]);
        }
        fold4(out + j, acc[0], acc[1], acc[2], acc[3]);
    }
    for (; j < rows; j++)
        out[j] = v_dot_f16(a + j * stride, b, n);
}

/* y in registers across the rows, 64 values at a time; each element sees
 * the FMAs of repeated v_axpy_f16 calls, in row order. */
static void v_axpys_f16(float *y, const float *a, const uint16_t *x, size_t stride, size_t rows,
                        size_t n)
{
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m512 acc[4];
        for (int q = 0; q < 4; q++)
            acc[q] = _mm512_loadu_ps(y + i + 16 * q);
        for (size_t j = 0; j < rows; j++) {
            __m512 av = _mm512_set1_ps(a[j]);
            const uint16_t *r = x + j * stride + i;
            for (int q = 0; q < 4; q++)
                acc[q] = _mm512_fmadd_ps(av, load_f16(r + 16 * q), acc[q]);
        }
        for (int q = 0; q < 4; q++)
            _mm512_storeu_ps(y + i + 16 * q, acc[q]);
    }
    if (i < n)
        for (size_t j = 0; j < rows; j++)
            v_axpy_f16(y + i, a[j], x + j * stride + i, n - i);
}

/* Scores of nq queries against rows K rows: matmul tiles of 6 queries x 4
 * rows over the strided rows, each score the operations of v_dot_f16. The
 * common query counts of a decode (the GQA group: 1, 2, 3) get a tile of
 * their own constant shape, whose accumulators stay in registers. */
static void v_qk_f16(float *s, size_t lds, const float *q, size_t ldq, size_t nq,
                     const uint16_t *k, size_t ldk, size_t rows, size_t n)
{
    for (size_t i = 0; i < nq; i += 6) {
        unsigned nt = (unsigned)(nq - i < 6 ? nq - i : 6);
        for (size_t j = 0; j < rows; j += 4) {
            unsigned nr = (unsigned)(rows - j < 4 ? rows - j : 4);
            float *y = s + i * lds + j;
            const float *x = q + i * ldq;
            const uint16_t *w = k + j * ldk;
            if (nr < 4)
                tile_f16_k(y, lds, x, ldq, w, n, ldk, nt, nr);
            else if (nt == 6)
                tile_f16_k(y, lds, x, ldq, w, n, ldk, 6, 4);
            else if (nt == 3) /* decode with 3 query heads per KV head */
                tile_f16_k(y, lds, x, ldq, w, n, ldk, 3, 4);
            else if (nt == 2)
                tile_f16_k(y, lds, x, ldq, w, n, ldk, 2, 4);
            else if (nt == 1)
                tile_f16_k(y, lds, x, ldq, w, n, ldk, 1, 4);
            else
                tile_f16_k(y, lds, x, ldq, w, n, ldk, nt, 4);
        }
    }
}

/* Weighted sums for up to 6 queries, 64 columns: o_i += s_i[t] * V row t for
 * t in order, each V row converted once; per element the FMAs of
 * v_axpys_f16. v_av_f16 inlines it with ni a constant for 6 queries and for
 * a decode's 1, 2 or 3 (accumulators in registers). */
static inline __attribute__((always_inline)) void
av_tile(float *o, size_t ldo, const float *s, size_t lds, unsigned ni, const uint16_t *v,
        size_t ldv, size_t rows)
{
    __m512 acc[6][4];
    for (unsigned i = 0; i < ni; i++)
        for (int u = 0; u < 4; u++)
            acc[i][u] = _mm512_loadu_ps(o + i * ldo + 16 * u);
    for (size_t t = 0; t < rows; t++) {
        const uint16_t *r = v + t * ldv;
        __m512 vv[4];
        for (int u = 0; u < 4; u++)
            vv[u] = load_f16(r + 16 * u);
        for (unsigned i = 0; i < ni; i++) {
            __m512 a = _mm512_set1_ps(s[i * lds + t]);
            for (int u = 0; u < 4; u++)
                acc[i][u] = _mm512_fmadd_ps(a, vv[u], acc[i][u]);
        }
    }
    for (unsigned i = 0; i < ni; i++)
        for (int u = 0; u < 4; u++)
            _mm512_storeu_ps(o + i * ldo + 16 * u, acc[i][u]);
}

static void v_av_f16(float *o, size_t ldo, const float *s, size_t lds, size_t nq,
                     const uint16_t *v, size_t ldv, size_t rows, size_t n)
{
    size_t c = 0;
    for (; c + 64 <= n; c += 64)
        for (size_t i = 0; i < nq; i += 6) {
            unsigned ni = (unsigned)(nq - i < 6 ? nq - i : 6);
            if (ni == 6)
                av_tile(o + i * ldo + c, ldo, s + i * lds, lds, 6, v + c, ldv, rows);
            else if (ni == 3) /* decode with 3 query heads per KV head */
                av_tile(o + i * ldo + c, ldo, s + i * lds, lds, 3, v + c, ldv, rows);
            else if (ni == 2)
                av_tile(o + i * ldo + c, ldo, s + i * lds, lds, 2, v + c, ldv, rows);
            else if (ni == 1)
                av_tile(o + i * ldo + c, ldo, s + i * lds, lds, 1, v + c, ldv, rows);
            else
                av_tile(o + i * ldo + c, ldo, s + i * lds, lds, ni, v + c, ldv, rows);
        }
    if (c < n) /* as v_axpys_f16 does past its last 64 columns */
        for (size_t i = 0; i < nq; i++)
            for (size_t t = 0; t < rows; t++)
                v_axpy_f16(o + i * ldo + c, s[i * lds + t], v + t * ldv + c, n - c);
}

/* exp(v) for v <= 0 (softmax's shifted logits): v = k ln2 + r with |r| <=
 * ln2/2 (ln2 split in two for an exact k ln2), e^r by its Taylor series to
 * r^6 (truncation under 2e-7 relative), times 2^k by scalef; v < -87 (and
 * -inf) gives 0. About 1-2 ulp from expf: this ISA's softmax bits differ
 * from ref's within that, and are the same every run. */
static inline __m512 exp_neg(__m512 v)
{
    __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(v, _mm512_set1_ps(1.44269504f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __mmask16 live = _mm512_cmp_ps_mask(v, _mm512_set1_ps(-87.0f), _CMP_GE_OQ);
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), v);
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.0f / 720);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_maskz_mov_ps(live, _mm512_scalef_ps(p, k));
}

/* softmax: the max, then exp of the shifted values summed in 16 lanes
 * (kernels.h's order), then the scale. */
static void v_softmax(float *x, size_t n)
{
    if (!n)
        return;
    __m512 mv = _mm512_set1_ps(-INFINITY);
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        mv = _mm512_max_ps(mv, _mm512_loadu_ps(x + i));
    float mx = _mm512_reduce_max_ps(mv);
    for (; i < n; i++)
        mx = x[i] > mx ? x[i] : mx;
    if (mx == -INFINITY) {
        memset(x, 0, n * sizeof *x);
        return;
    }
    __m512 m = _mm512_set1_ps(mx), acc = _mm512_setzero_ps();
    for (i = 0; i + 16 <= n; i += 16) {
        __m512 e = exp_neg(_mm512_sub_ps(_mm512_loadu_ps(x + i), m));
        _mm512_storeu_ps(x + i, e);
        acc = _mm512_add_ps(acc, e);
    }
    if (i < n) {
        __mmask16 t = tail_mask(n - i);
        __m512 e = exp_neg(_mm512_sub_ps(_mm512_mask_loadu_ps(m, t, x + i), m));
        e = _mm512_maskz_mov_ps(t, e);
        _mm512_mask_storeu_ps(x + i, t, e);
        acc = _mm512_add_ps(acc, e);
    }
    __m512 inv = _mm512_set1_ps(1.0f / fold(acc));
    for (i = 0; i + 16 <= n; i += 16)
        _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), inv));
    if (i < n) {
        __mmask16 t = tail_mask(n - i);
        _mm512_mask_storeu_ps(x + i, t, _mm512_mul_ps(_mm512_maskz_loadu_ps(t, x + i), inv));
    }
}

/* silu uses libm's expf, as the reference does. */
static void v_silu_mul(float *a, const float *b, size_t n)
{
    sb_rt_kernels_ref.silu_mul(a, b, n);
}

const sb_rt_kernels sb_rt_kernels_avx512 = {
    v_f16_to_f32, v_f32_to_f16, v_matmul, v_rmsnorm, v_softmax, v_silu_mul,
    v_add, v_dot_f32, v_dot_f16, v_axpy_f32, v_axpy_f16, v_dots_f16, v_axpys_f16,
    v_qk_f16, v_av_f16, SB_RT_ISA_AVX512, "avx512",
};

const sb_rt_kernels sb_rt_kernels_avx512vnni = {
    v_f16_to_f32, v_f32_to_f16, v_matmul_vnni, v_rmsnorm, v_softmax, v_silu_mul,
    v_add, v_dot_f32, v_dot_f16, v_axpy_f32, v_axpy_f16, v_dots_f16, v_axpys_f16,
    v_qk_f16, v_av_f16, SB_RT_ISA_AVX512VNNI, "avx512vnni",
};
