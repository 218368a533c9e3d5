/* kernels_q_avx2.c -- AVX2 tiles for the quantized weight types (no VNNI:
 * VPMADDUBSW + VPMADDWD make the int8 dots, exact in int32), bit-identical
 * to the reference (kernels.h, the quantized rule).
 *
 * kernels.h's 16 lanes are two ymm registers: lo (lanes 0-7) and hi (lanes
 * 8-15). A 32-value block is one ymm: block b goes to lo when b is even,
 * to hi when odd, and its scale is one number per ymm. A K type's 64-value
 * chunk is two ymm: its values 0-31 in lo, 32-63 in hi. Tiles: up to 2
 * tokens x 2 rows (prefill) or 1 token x 4 rows (decode).
 *
 *   Q8_0: |W| (unsigned; -128 is 128) times X with W's sign, by
 *     VPMADDUBSW (at most 2 * 128 * 127 per pair: no saturation).
 *   Q4_x, Q5_x: the unsigned q times X; Q4_0 / Q5_0 start each lane at -8
 *     (-16) times the lane's X sum; Q4_1 / Q5_1 add that sum times m.
 *   K types: q (<= 63) times X, then VPMADDWD by the sub-block's scale.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/kernels_isa.h"
#include "kernels/quant.h"
#include "kernels/simd_avx2.h"

#define ALWAYS static inline __attribute__((always_inline))

static inline float h2f(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}


static inline __m256i ld256(const uint8_t *p)
{
    return _mm256_loadu_si256((const __m256i *)(const void *)p);
}

/* int32 lanes: sums of 4 adjacent u * s products (u unsigned, no pair over
 * int16). */
static inline __m256i dot4(__m256i u, __m256i s)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

/* Bytes 0xff where bit i of the 32-bit qh is set, i < 32. */
static inline __m256i bits32(uint32_t qh)
{
    const __m256i shuf = _mm256_setr_epi64x(0, 0x0101010101010101ll, 0x0202020202020202ll,
                                            0x0303030303030303ll);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), shuf);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

/* ---- 32-value types ---------------------------------------------------------------- */

/* Block B's 32 W values in value order: unsigned q (Q4_x / Q5_x) or int8. */
ALWAYS __m256i w32(sb_rt_dtype T, const uint8_t *B)
{
    if (T == SB_RT_Q8_0)
        return ld256(B + 2);
    const size_t qo = T == SB_RT_Q4_0 ? 2 : T == SB_RT_Q4_1 ? 4 : T == SB_RT_Q5_0 ? 6 : 8;
    __m128i q = _mm_loadu_si128((const __m128i *)(const void *)(B + qo));
    const __m128i m4 = _mm_set1_epi8(15);
    __m256i v = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m4), _mm_and_si128(q, m4));
    if (T == SB_RT_Q5_0 || T == SB_RT_Q5_1)
        v = _mm256_or_si256(v, _mm256_and_si256(bits32(sb_rt_ld32(B + (T == SB_RT_Q5_0 ? 2 : 4))),
                                                _mm256_set1_epi8(16)));
    return v;
}

ALWAYS void qtile32(const sb_rt_dtype T, float *y, size_t ldy, const uint8_t *xq, size_t ldq,
                    const uint8_t *w, size_t in, unsigned nt, unsigned nr, const unsigned NT,
                    const unsigned NR)
{
    const size_t bb = T == SB_RT_Q4_0 ? SB_RT_Q4_0_BYTES : T == SB_RT_Q4_1 ? SB_RT_Q4_1_BYTES
                    : T == SB_RT_Q5_0 ? SB_RT_Q5_0_BYTES : T == SB_RT_Q5_1 ? SB_RT_Q5_1_BYTES
                    : SB_RT_Q8_0_BLOCK_BYTES;
    const size_t nb = in / 32, rb = nb * bb;
    const int one = T == SB_RT_Q4_1 || T == SB_RT_Q5_1;
    const int off = T == SB_RT_Q4_0 ? 3 : T == SB_RT_Q5_0 ? 4 : 0;
    __m256 acc[2][4][2];
    for (unsigned t = 0; t < NT; t++)
        for (unsigned r = 0; r < NR; r++)
            acc[t][r][0] = acc[t][r][1] = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; b++) {
        const unsigned h = (unsigned)(b % 2);
        __m256i xv[2], cor[2];
        __m256 jf[2];
        float dx[2];
        for (unsigned t = 0; t < nt && t < NT; t++) {
            const uint8_t *xr = xq + t * ldq;
            xv[t] = ld256(xr + 32 * b);
            dx[t] = sb_rt_ldf(xr + in + 4 * b);
            if (off || one) {
                __m256i j4 = dot4(_mm256_set1_epi8(1), xv[t]);
                cor[t] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(j4, off));
                jf[t] = _mm256_cvtepi32_ps(j4);
            }
        }
        for (unsigned r = 0; r < nr && r < NR; r++) {
            const uint8_t *B = w + r * rb + b * bb;
            if (NT == 1) /* decode: the next tile's rows (kernels_q_avx512.c) */
                _mm_prefetch((const char *)(B + NR * rb), _MM_HINT_T0);
            __m256i wv = w32(T, B);
            float dw = h2f(B), mw = one ? h2f(B + 2) : 0.0f;
            __m256i aw = T == SB_RT_Q8_0 ? _mm256_sign_epi8(wv, wv) : wv;
            for (unsigned t = 0; t < nt && t < NT; t++) {
                __m256i I;
                if (T == SB_RT_Q8_0)
                    I = dot4(aw, _mm256_sign_epi8(xv[t], wv));
                else if (off)
                    I = _mm256_add_epi32(cor[t], dot4(wv, xv[t]));
                else
                    I = dot4(wv, xv[t]);
                float sd = dw * dx[t];
                acc[t][r][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(I), _mm256_set1_ps(sd),
                                               acc[t][r][h]);
                if (one) {
                    float sm = mw * dx[t];
                    acc[t][r][h] = _mm256_fmadd_ps(jf[t], _mm256_set1_ps(sm), acc[t][r][h]);
                }
            }
        }
    }
    for (unsigned t = 0; t < nt && t < NT; t++)
        for (unsigned r = 0; r < nr && r < NR; r++)
            y[t * ldy + r] = fold2(acc[t][r][0], acc[t][r][1]);
}

/* ---- K types ---------------------------------------------------------------------- */

/* Half hv (0: values 0-31, 1: 32-63) of chunk c of a K block's W, as
 * unsigned bytes. */
ALWAYS __m256i wk_half(const sb_rt_dtype T, const uint8_t *B, unsigned c, unsigned hv)
{
    const __m256i m4 = _mm256_set1_epi8(15);
    if (T == SB_RT_Q6_K) {
        /* chunk c: half c/2 of the block; c odd takes the high nibbles and
         * qh bits 4-7 */
        const uint8_t *L = B + 64 * (c / 2) + 32 * hv, *H = B + SB_RT_Q6_K_QH + 32 * (c / 2);
        __m256i l = ld256(L);
        l = c % 2 ? _mm256_and_si256(_mm256_srli_epi16(l, 4), m4) : _mm256_and_si256(l, m4);
        int shift = 2 * (int)(2 * (c % 2) + hv);
        __m256i hb = _mm256_and_si256(_mm256_srl_epi16(ld256(H), _mm_cvtsi32_si128(shift)),
                                      _mm256_set1_epi8(3));
        return _mm256_or_si256(l, _mm256_slli_epi16(hb, 4));
    }
    const uint8_t *qs = B + (T == SB_RT_Q5_K ? SB_RT_Q5_K_QS : SB_RT_Q4_K_QS) + 32 * c;
    __m256i q = ld256(qs);
    __m256i v = hv ? _mm256_and_si256(_mm256_srli_epi16(q, 4), m4) : _mm256_and_si256(q, m4);
    if (T == SB_RT_Q5_K) {
        __m256i bit = _mm256_set1_epi8((char)(1u << (2 * c + hv)));
        __m256i qh = ld256(B + SB_RT_Q5_K_QH);
        __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(qh, bit), bit);
        v = _mm256_or_si256(v, _mm256_and_si256(set, _mm256_set1_epi8(16)));
    }
    return v;
}

ALWAYS void qtilek(const sb_rt_dtype T, float *y, size_t ldy, const uint8_t *xq, size_t ldq,
                   const uint8_t *w, size_t in, unsigned nt, unsigned nr, const unsigned NT,
                   const unsigned NR)
{
    const size_t bb = T == SB_RT_Q4_K ? SB_RT_Q4_K_BYTES : T == SB_RT_Q5_K ? SB_RT_Q5_K_BYTES
                                                                          : SB_RT_Q6_K_BYTES;
    const size_t nk = in / 256, rb = nk * bb;
    __m256 acc[2][4][2];
    for (unsigned t = 0; t < NT; t++)
        for (unsigned r = 0; r < NR; r++)
            acc[t][r][0] = acc[t][r][1] = _mm256_setzero_ps();
    for (size_t s = 0; s < nk; s++) {
        for (unsigned r = 0; r < nr && r < NR; r++) {
            const uint8_t *B = w + r * rb + s * bb;
            if (NT == 1)
                for (size_t o = 0; o < bb; o += 64)
                    _mm_prefetch((const char *)(B + NR * rb + o), _MM_HINT_T0);
            int16_t sc[16], mn[16];
            float d, dmin = 0;
            if (T == SB_RT_Q6_K) {
                for (unsigned k = 0; k < 16; k++)
                    sc[k] = (int8_t)B[SB_RT_Q6_K_SC + k];
                d = h2f(B + SB_RT_Q6_K_D);
            } else {
                for (unsigned j = 0; j < 8; j++) {
                    uint8_t s6, m6;
                    sb_rt_qk_scale_min(B + SB_RT_QK_SCALES, j, &s6, &m6);
                    sc[j] = s6;
                    mn[2 * j] = mn[2 * j + 1] = m6;
                }
                d = h2f(B);
                dmin = h2f(B + 2);
            }
            __m256i I[2][2];
            for (unsigned t = 0; t < nt && t < NT; t++)
                I[t][0] = I[t][1] = _mm256_setzero_si256();
            for (unsigned c = 0; c < 4; c++)
                for (unsigned hv = 0; hv < 2; hv++) {
                    __m256i wv = wk_half(T, B, c, hv);
                    /* int16 lane i covers values 2i, 2i+1 of the 32 */
                    __m256i scv;
                    if (T == SB_RT_Q6_K) {
                        unsigned k0 = 4 * c + 2 * hv;
                        scv = _mm256_set_m128i(_mm_set1_epi16(sc[k0 + 1]), _mm_set1_epi16(sc[k0]));
                    } else {
                        scv = _mm256_set1_epi16(sc[2 * c + hv]);
                    }
                    for (unsigned t = 0; t < nt && t < NT; t++) {
                        __m256i xv = ld256(xq + t * ldq + 256 * s + 64 * c + 32 * hv);
                        I[t][hv] = _mm256_add_epi32(
                            I[t][hv], _mm256_madd_epi16(_mm256_maddubs_epi16(wv, xv), scv));
                    }
                }
            __m256i sc16 = _mm256_loadu_si256((const __m256i *)(const void *)sc);
            __m256i mins = _mm256_loadu_si256((const __m256i *)(const void *)mn);
            for (unsigned t = 0; t < nt && t < NT; t++) {
                const uint8_t *xr = xq + t * ldq;
                float dx = sb_rt_ldf(xr + in + 4 * s);
                __m256i bs = ld256(xr + in + 4 * nk + 32 * s);
                __m256i lo = I[t][0];
                if (T == SB_RT_Q6_K)
                    lo = _mm256_sub_epi32(lo, _mm256_slli_epi32(_mm256_madd_epi16(bs, sc16), 5));
                float sd = d * dx;
                acc[t][r][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lo), _mm256_set1_ps(sd),
                                               acc[t][r][0]);
                acc[t][r][1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(I[t][1]), _mm256_set1_ps(sd),
                                               acc[t][r][1]);
                if (T != SB_RT_Q6_K) {
                    float sm = dmin * dx;
                    __m256 M = _mm256_cvtepi32_ps(_mm256_madd_epi16(bs, mins));
                    acc[t][r][0] = _mm256_fnmadd_ps(M, _mm256_set1_ps(sm), acc[t][r][0]);
                }
            }
        }
    }
    for (unsigned t = 0; t < nt && t < NT; t++)
        for (unsigned r = 0; r < nr && r < NR; r++)
            y[t * ldy + r] = fold2(acc[t][r][0], acc[t][r][1]);
}

/* ---- the X quantizer (quant.h's bits) ------------------------------------------------ */

static inline int32_t hsum8(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

/* One block of len (a multiple of 16) values; sums: the int16 sum of each
 * 16 q, or NULL. */
static float xq_block(const float *x, int8_t *q, unsigned len, int16_t *sums)
{
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 amax = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
    for (unsigned i = 0; i < len; i += 8) {
        __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + i), absm);
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, _mm256_set1_ps(3.4028235e38f), _CMP_NLE_UQ));
        amax = _mm256_max_ps(amax, a);
    }
    if (_mm256_movemask_ps(bad)) {
        memset(q, 0, len);
        if (sums)
            memset(sums, 0, len / 16 * sizeof *sums);
        return __builtin_nanf("");
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    float d = _mm_cvtss_f32(m) / 127.0f, inv = d != 0 ? 1.0f / d : 0.0f;
    const __m256 iv = _mm256_set1_ps(inv);
    for (unsigned i = 0; i < len; i += 16) {
        __m256i a = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i), iv));
        __m256i b = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8), iv));
        a = _mm256_max_epi32(_mm256_min_epi32(a, _mm256_set1_epi32(127)), _mm256_set1_epi32(-127));
        b = _mm256_max_epi32(_mm256_min_epi32(b, _mm256_set1_epi32(127)), _mm256_set1_epi32(-127));
        /* int32 -> int16 -> int8 (saturating packs: values fit), then undo
         * the packs' lane interleave */
        __m256i w = _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), _MM_SHUFFLE(3, 1, 2, 0));
        __m128i by = _mm_packs_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
        _mm_storeu_si128((__m128i *)(void *)(q + i), by);
        if (sums)
            sums[i / 16] = (int16_t)hsum8(_mm256_add_epi32(a, b));
    }
    return d;
}

void sb_rt_xq_quant_avx2(sb_rt_dtype t, const float *x, uint8_t *xq, size_t n)
{
    sb_rt_xq_rows(t, x, xq, n, xq_block);
}

/* ---- the tiles ---------------------------------------------------------------------- */

SB_RT_QTILE_TABLE(sb_rt_qtiles_avx2, 2, 2, 4)
