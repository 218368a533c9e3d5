/* kernels_q_avx512.c -- AVX-512 (F, BW, VL) tiles for the quantized weight
 * types, compiled twice: as it is (VPMADDUBSW + VPMADDWD for the int8 dots)
 * and with SB_Q_VNNI from kernels_q_avx512vnni.c (VPDPBUSD, VPDPWSSD).
 * Only the integers differ in how they are made, and they are exact, so
 * both give the reference's bits (kernels.h, the quantized rule).
 *
 * A zmm of int32 is kernels.h's 16 lanes: lane k holds the dot of the k-th
 * group of 4 values of 64. Tiles are up to 4 tokens x 4 rows (prefill) or
 * 1 token x 8 rows (decode), one float accumulator per output.
 *
 * 32-value types, two blocks per step (64 values; a last odd block alone
 * in lanes 0-7, the others masked off):
 *   Q4_0, Q4_1, Q5_0, Q5_1: W as unsigned bytes (the nibbles, plus 16 where
 *     qh has the fifth bit), X as signed: VPDPBUSD(W, X). Q4_0 and Q5_0
 *     start each lane at -8 (-16) times the lane's sum of X, so the sum is
 *     of (q - 8) * x; Q4_1 and Q5_1 add the lane's X sum times m.
 *   Q8_0: both signed. With VNNI: W ^ 0x80 is W + 128 unsigned, and each
 *     lane starts at -128 times the lane's sum of X (once per token, not
 *     per row); without: |W| unsigned
 *     times X with W's sign (|W| <= 128, |X| <= 127: no VPMADDUBSW
 *     saturation).
 * K types, one 256-value super-block per step in four 64-value chunks:
 *   VPMADDUBSW(W chunk, X chunk) (W <= 63 unsigned: no saturation), then
 *   VPDPWSSD with each pair's sub-block scale, summed over the chunks in
 *   int32; the Q6_K offset (-32 sc X) and the Q4_K/Q5_K mins from X's
 *   16-value sums by VPMADDWD.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/kernels_isa.h"
#include "kernels/quant.h"
#include "kernels/simd_avx512.h"

#define ALWAYS static inline __attribute__((always_inline))

#if defined(SB_Q_VNNI)
#define DPBUSD(acc, u, s) _mm512_dpbusd_epi32(acc, u, s)
#define DPWSSD(acc, a, b) _mm512_dpwssd_epi32(acc, a, b)
#define QTILES sb_rt_qtiles_avx512vnni
#else
/* Valid while no pair of u * s products leaves int16: u <= 63 here. */
#define DPBUSD(acc, u, s)                                                                       \
    _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1)))
#define DPWSSD(acc, a, b) _mm512_add_epi32(acc, _mm512_madd_epi16(a, b))
#define QTILES sb_rt_qtiles_avx512
#endif

/* Decode streams W once: a one-token tile prefetches the same blocks of
 * the next tile's rows (NR rows further), which the hardware cannot guess
 * (rows are short: 432 bytes for a Q4_K row of 768), while it reads its
 * own. Tiles of several tokens reuse W from cache and do not prefetch. */

static inline float h2f(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}


/* [p[0] x 8, p[1] x 8] of two adjacent f32 (the second 0 when !two). */
static inline __m512 pair_f32(const uint8_t *p, int two)
{
    uint64_t u = sb_rt_ld32(p);
    if (two)
        u |= (uint64_t)sb_rt_ld32(p + 4) << 32;
    __m128 v = _mm_castsi128_ps(_mm_cvtsi64_si128((long long)u));
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
                                 _mm512_castps128_ps512(v));
}

/* [f16 at p x 8, f16 at p + stride x 8] as f32 (the second 0 when !two). */
static inline __m512 pair_f16(const uint8_t *p, size_t stride, int two)
{
    uint16_t a, b = 0;
    memcpy(&a, p, 2);
    if (two)
        memcpy(&b, p + stride, 2);
    __m128 v = _mm_cvtph_ps(_mm_cvtsi32_si128((int)((uint32_t)a | (uint32_t)b << 16)));
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
                                 _mm512_castps128_ps512(v));
}

/* ---- 32-value types ---------------------------------------------------------------- */

/* The 64 W values of the block at B and the next (two; else zeros in the
 * upper half) in value order: unsigned q for Q4_x / Q5_x, int8 for Q8_0. */
ALWAYS __m512i w32_pair(sb_rt_dtype T, const uint8_t *B, size_t bb, int two)
{
    if (T == SB_RT_Q8_0) {
        __m256i lo = _mm256_loadu_si256((const __m256i *)(const void *)(B + 2));
        __m256i hi = two ? _mm256_loadu_si256((const __m256i *)(const void *)(B + bb + 2))
                         : _mm256_setzero_si256();
        return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    }
    const size_t qo = T == SB_RT_Q4_0 ? 2 : T == SB_RT_Q4_1 ? 4 : T == SB_RT_Q5_0 ? 6 : 8;
    __m128i q0 = _mm_loadu_si128((const __m128i *)(const void *)(B + qo));
    __m128i q1 = two ? _mm_loadu_si128((const __m128i *)(const void *)(B + bb + qo))
                     : _mm_setzero_si128();
    /* 128-bit lanes [q0, q0, q1, q1]; low nibbles of the first copy, high
     * of the second */
    __m512i v = _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 1, 0, 1, 2, 3, 2, 3),
                                         _mm512_castsi256_si512(_mm256_inserti128_si256(
                                             _mm256_castsi128_si256(q0), q1, 1)));
    const __m512i sh = _mm512_setr_epi64(0, 0, 0x0004000400040004ll, 0x0004000400040004ll, 0, 0,
                                         0x0004000400040004ll, 0x0004000400040004ll);
    v = _mm512_and_si512(_mm512_srlv_epi16(v, sh), _mm512_set1_epi8(15));
    if (T == SB_RT_Q5_0 || T == SB_RT_Q5_1) {
        const size_t ho = T == SB_RT_Q5_0 ? 2 : 4;
        uint64_t k = sb_rt_ld32(B + ho) | (two ? (uint64_t)sb_rt_ld32(B + bb + ho) << 32 : 0);
        v = _mm512_mask_add_epi8(v, (__mmask64)k, v, _mm512_set1_epi8(16));
    }
    return v;
}

/* y[t][r] = the fold of acc[t][r], t < nt <= NT, r < nr <= NR. */
ALWAYS void store_tile(float *y, size_t ldy, __m512 (*acc)[8], unsigned nt, unsigned nr,
                       const unsigned NT, const unsigned NR)
{
    for (unsigned t = 0; t < nt && t < NT; t++) {
        unsigned r = 0;
        for (; r + 4 <= nr && r + 4 <= NR; r += 4)
            fold4(y + t * ldy + r, acc[t][r], acc[t][r + 1], acc[t][r + 2], acc[t][r + 3]);
        for (; r < nr && r < NR; r++)
            y[t * ldy + r] = fold(acc[t][r]);
    }
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
    const int off = T == SB_RT_Q4_0 ? 3 : T == SB_RT_Q5_0 ? 4 : 0; /* log2 of the offset */
    const __m512i ones8 = _mm512_set1_epi8(1);
    __m512 acc[4][8];
    for (unsigned t = 0; t < NT; t++)
        for (unsigned r = 0; r < NR; r++)
            acc[t][r] = _mm512_setzero_ps();
    for (size_t b = 0; b < nb; b += 2) {
        const int two = b + 1 < nb;
        const __mmask16 lanes = two ? 0xFFFF : 0x00FF;
        __m512i xv[4], cor[4];
        __m512 dxv[4], jf[4];
        for (unsigned t = 0; t < nt; t++) {
            const uint8_t *xr = xq + t * ldq;
            xv[t] = two ? _mm512_loadu_si512((const void *)(xr + 32 * b))
                        : _mm512_zextsi256_si512(
                              _mm256_loadu_si256((const __m256i *)(const void *)(xr + 32 * b)));
            dxv[t] = pair_f32(xr + in + 4 * b, two);
            if (off || one) {
                __m512i j4 = DPBUSD(_mm512_setzero_si512(), ones8, xv[t]);
                if (off)
                    cor[t] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(j4, off));
                if (one)
                    jf[t] = _mm512_cvtepi32_ps(j4);
            }
#if defined(SB_Q_VNNI)
            if (T == SB_RT_Q8_0) /* -128 times the lane's sum of X */
                cor[t] = _mm512_sub_epi32(_mm512_setzero_si512(),
                                          DPBUSD(_mm512_setzero_si512(),
                                                 _mm512_set1_epi8((char)0x80), xv[t]));
#endif
        }
        for (unsigned r = 0; r < nr; r++) {
            const uint8_t *B = w + r * rb + b * bb;
            if (NT == 1) { /* both ends: a step is more than a cache line */
                _mm_prefetch((const char *)(B + NR * rb), _MM_HINT_T0);
                _mm_prefetch((const char *)(B + NR * rb + 2 * bb - 1), _MM_HINT_T0);
            }
            __m512i wv = w32_pair(T, B, bb, two);
            __m512 dwv = pair_f16(B, bb, two);
            __m512 mwv = one ? pair_f16(B + 2, bb, two) : dwv;
#if defined(SB_Q_VNNI)
            if (T == SB_RT_Q8_0) /* W + 128, unsigned */
                wv = _mm512_xor_si512(wv, _mm512_set1_epi8((char)0x80));
#else
            __m512i aw = wv;
            __mmask64 neg = 0;
            if (T == SB_RT_Q8_0) {
                aw = _mm512_abs_epi8(wv);
                neg = _mm512_movepi8_mask(wv);
            }
#endif
            for (unsigned t = 0; t < nt; t++) {
                __m512i I;
                if (T == SB_RT_Q8_0) {
#if defined(SB_Q_VNNI)
                    I = _mm512_dpbusd_epi32(cor[t], wv, xv[t]);
#else
                    __m512i xs = _mm512_mask_sub_epi8(xv[t], neg, _mm512_setzero_si512(), xv[t]);
                    I = _mm512_madd_epi16(_mm512_maddubs_epi16(aw, xs), _mm512_set1_epi16(1));
#endif
                } else {
                    I = DPBUSD(off ? cor[t] : _mm512_setzero_si512(), wv, xv[t]);
                }
                acc[t][r] = _mm512_mask3_fmadd_ps(_mm512_cvtepi32_ps(I),
                                                  _mm512_mul_ps(dwv, dxv[t]), acc[t][r], lanes);
                if (one)
                    acc[t][r] = _mm512_mask3_fmadd_ps(jf[t], _mm512_mul_ps(mwv, dxv[t]),
                                                      acc[t][r], lanes);
            }
        }
    }
    store_tile(y, ldy, acc, nt, nr, NT, NR);
}

/* ---- K types ---------------------------------------------------------------------- */

/* int16 lane indices for VPERMW: lane i of a chunk's 32 pairs -> its scale. */
static const int16_t idx_q4k[4][32] = {
#define R2(a) a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a
    { R2(0), R2(1) }, { R2(2), R2(3) }, { R2(4), R2(5) }, { R2(6), R2(7) },
#undef R2
};
static const int16_t idx_q6k[4][32] = {
#define R1(a) a, a, a, a, a, a, a, a
    { R1(0), R1(1), R1(2), R1(3) },     { R1(4), R1(5), R1(6), R1(7) },
    { R1(8), R1(9), R1(10), R1(11) },   { R1(12), R1(13), R1(14), R1(15) },
#undef R1
};
/* mins: lane g of 16 (a 16-value group) -> m_{g/2}, which sit at 8..15 */
static const int16_t idx_min[32] = { 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15 };

static inline __m512i ldidx(const int16_t *p)
{
    return _mm512_loadu_si512((const void *)p);
}

/* Q4_K / Q5_K scales[12] unpacked: int16 lanes 0-7 the scales, 8-15 the
 * mins (quant.h's packing, four at a time). */
static inline __m512i qk_scales(const uint8_t *s)
{
    /* x = [u0, u1, u2, -] (the last 4 bytes are the block's first qs:
     * within the block, unused); bytes of sc_hi = (u2 & 15) | (u0 >> 6) << 4
     * = (u2 & 15) | (u0 >> 2) & 0x30, of m_hi the same of u2 >> 4 and u1 */
    const __m128i x = _mm_loadu_si128((const __m128i *)(const void *)s);
    __m128i lo = _mm_srlv_epi32(_mm_shuffle_epi32(x, _MM_SHUFFLE(2, 1, 2, 0)),
                                _mm_setr_epi32(0, 0, 0, 4));          /* u0, u2, u1, u2 >> 4 */
    lo = _mm_and_si128(lo, _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
    __m128i hi = _mm_srli_epi32(_mm_shuffle_epi32(x, _MM_SHUFFLE(1, 1, 0, 0)), 2); /* u0, u0, u1, u1 */
    hi = _mm_and_si128(hi, _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
    return _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_or_si128(lo, hi)));
}

/* Chunk c (64 values) of a K block's W as unsigned bytes. qhd: Q5_K's qh
 * (or Q6_K's for this half) in both 256-bit halves. */
ALWAYS __m512i wk_chunk(const sb_rt_dtype T, const uint8_t *B, unsigned c, __m512i qhd)
{
    const __m512i m4 = _mm512_set1_epi8(15);
    if (T == SB_RT_Q6_K) {
        const __m512i ql = _mm512_loadu_si512((const void *)(B + 64 * (c / 2)));
        const __m512i lo = c % 2 ? _mm512_and_si512(_mm512_srli_epi16(ql, 4), m4)
                                 : _mm512_and_si512(ql, m4);
        const long long s0 = c % 2 ? 4 : 0, s1 = c % 2 ? 6 : 2;
        const long long a = s0 * 0x0001000100010001ll, b = s1 * 0x0001000100010001ll;
        const __m512i sh = _mm512_setr_epi64(a, a, a, a, b, b, b, b);
        __m512i hi = _mm512_and_si512(_mm512_srlv_epi16(qhd, sh), _mm512_set1_epi8(3));
        return _mm512_or_si512(lo, _mm512_slli_epi16(hi, 4));
    }
    const uint8_t *qs = B + (T == SB_RT_Q5_K ? SB_RT_Q5_K_QS : SB_RT_Q4_K_QS) + 32 * c;
    __m512i v = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(const void *)qs));
    const __m512i sh = _mm512_setr_epi64(0, 0, 0, 0, 0x0004000400040004ll, 0x0004000400040004ll,
                                         0x0004000400040004ll, 0x0004000400040004ll);
    v = _mm512_and_si512(_mm512_srlv_epi16(v, sh), m4);
    if (T == SB_RT_Q5_K) {
        const __m512i bits = _mm512_mask_blend_epi64(0xF0, _mm512_set1_epi8((char)(1u << (2 * c))),
                                                     _mm512_set1_epi8((char)(2u << (2 * c))));
        __mmask64 k = _mm512_test_epi8_mask(qhd, bits);
        v = _mm512_mask_add_epi8(v, k, v, _mm512_set1_epi8(16));
    }
    return v;
}

/* One super-block B (of W's row) times super-block s of nt X rows: adds
 * its terms to a[t * as], t < nt (kernels.h's K rule for that block). xq,
 * ldq, in: the quantized X rows as in qtilek; dx[t] and bs[t]: row t's
 * super-block scale (all 16 lanes) and its 16-value sums. */
ALWAYS void qk_super(const sb_rt_dtype T, const uint8_t *B, const uint8_t *xq, size_t ldq,
                     size_t s, const __m512 *dx, const __m256i *bs, unsigned nt, __m512 *a,
                     size_t as)
{
    __m512i sc, qhd = _mm512_setzero_si512();
    float d, dmin = 0;
    if (T == SB_RT_Q6_K) {
        sc = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(
            _mm_loadu_si128((const __m128i *)(const void *)(B + SB_RT_Q6_K_SC))));
        d = h2f(B + SB_RT_Q6_K_D);
    } else {
        sc = qk_scales(B + SB_RT_QK_SCALES);
        d = h2f(B);
        dmin = h2f(B + 2);
        if (T == SB_RT_Q5_K)
            qhd = _mm512_broadcast_i64x4(
                _mm256_loadu_si256((const __m256i *)(const void *)(B + SB_RT_Q5_K_QH)));
    }
    __m512i I[4];
    for (unsigned t = 0; t < nt; t++)
        I[t] = _mm512_setzero_si512();
    for (unsigned c = 0; c < 4; c++) {
        if (T == SB_RT_Q6_K && c % 2 == 0)
            qhd = _mm512_broadcast_i64x4(_mm256_loadu_si256(
                (const __m256i *)(const void *)(B + SB_RT_Q6_K_QH + 32 * (c / 2))));
        __m512i wv = wk_chunk(T, B, c, qhd);
        __m512i scv = _mm512_permutexvar_epi16(
            ldidx(T == SB_RT_Q6_K ? idx_q6k[c] : idx_q4k[c]), sc);
        for (unsigned t = 0; t < nt; t++) {
            __m512i xv = _mm512_loadu_si512((const void *)(xq + t * ldq + 256 * s + 64 * c));
            I[t] = DPWSSD(I[t], _mm512_maddubs_epi16(wv, xv), scv);
        }
    }
    const __m512 dv = _mm512_set1_ps(d), dminv = _mm512_set1_ps(dmin);
    __m256i sc16 = _mm512_castsi512_si256(sc);
    __m256i mins = T == SB_RT_Q6_K ? sc16
                 : _mm512_castsi512_si256(_mm512_permutexvar_epi16(ldidx(idx_min), sc));
    for (unsigned t = 0; t < nt; t++) {
        __m512i Ii = I[t];
        if (T == SB_RT_Q6_K)
            Ii = _mm512_sub_epi32(Ii, _mm512_slli_epi32(
                _mm512_zextsi256_si512(_mm256_madd_epi16(bs[t], sc16)), 5));
        a[t * as] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(Ii), _mm512_mul_ps(dv, dx[t]), a[t * as]);
        if (T != SB_RT_Q6_K) {
            __m256 M = _mm256_cvtepi32_ps(_mm256_madd_epi16(bs[t], mins));
            a[t * as] = _mm512_fnmadd_ps(_mm512_zextps256_ps512(M), _mm512_mul_ps(dminv, dx[t]),
                                         a[t * as]);
        }
    }
}

/* Prefill (NT > 1): super-block outer, each W block loaded once for the
 * tile's tokens. Decode (NT == 1): row outer, the row's super-blocks in
 * order with its accumulator in a register, so W streams in address order
 * (a tile's rows are contiguous); the block NR rows further (the next
 * tile's) is prefetched, every cache line it spans. Each element gets
 * qk_super's operations in super-block order either way. */
ALWAYS void qtilek(const sb_rt_dtype T, float *y, size_t ldy, const uint8_t *xq, size_t ldq,
                   const uint8_t *w, size_t in, unsigned nt, unsigned nr, const unsigned NT,
                   const unsigned NR)
{
    const size_t bb = T == SB_RT_Q4_K ? SB_RT_Q4_K_BYTES : T == SB_RT_Q5_K ? SB_RT_Q5_K_BYTES
                                                                          : SB_RT_Q6_K_BYTES;
    const size_t nk = in / 256, rb = nk * bb;
    __m512 acc[4][8];
    for (unsigned t = 0; t < NT; t++)
        for (unsigned r = 0; r < NR; r++)
            acc[t][r] = _mm512_setzero_ps();
    if (NT == 1) {
        for (unsigned r = 0; r < nr; r++) {
            __m512 a = _mm512_setzero_ps();
            for (size_t s = 0; s < nk; s++) {
                const uint8_t *B = w + r * rb + s * bb;
                for (size_t o = 0; o < bb; o += 64)
                    _mm_prefetch((const char *)(B + NR * rb + o), _MM_HINT_T0);
                _mm_prefetch((const char *)(B + NR * rb + bb - 1), _MM_HINT_T0);
                const __m512 dx = _mm512_set1_ps(sb_rt_ldf(xq + in + 4 * s));
                const __m256i bs =
                    _mm256_loadu_si256((const __m256i *)(const void *)(xq + in + 4 * nk + 32 * s));
                qk_super(T, B, xq, ldq, s, &dx, &bs, 1, &a, 1);
            }
            acc[0][r] = a;
        }
        store_tile(y, ldy, acc, nt, nr, NT, NR);
        return;
    }
    for (size_t s = 0; s < nk; s++) {
        __m512 dx[4];
        __m256i bs[4];
        for (unsigned t = 0; t < nt; t++) {
            const uint8_t *xr = xq + t * ldq;
            dx[t] = _mm512_set1_ps(sb_rt_ldf(xr + in + 4 * s));
            bs[t] = _mm256_loadu_si256((const __m256i *)(const void *)(xr + in + 4 * nk + 32 * s));
        }
        for (unsigned r = 0; r < nr; r++)
            qk_super(T, w + r * rb + s * bb, xq, ldq, s, dx, bs, nt, &acc[0][r], 8);
    }
    store_tile(y, ldy, acc, nt, nr, NT, NR);
}

/* ---- the X quantizer (quant.h's bits) ------------------------------------------------ */

#if !defined(SB_Q_VNNI) /* one copy: both compilations would define it */
/* One block of len (a multiple of 16) values; sums: the int16 sum of each
 * 16 q, or NULL. */
static float xq_block(const float *x, int8_t *q, unsigned len, int16_t *sums)
{
    __m512 amax = _mm512_setzero_ps();
    __mmask16 bad = 0;
    for (unsigned i = 0; i < len; i += 16) {
        __m512 a = _mm512_abs_ps(_mm512_loadu_ps(x + i));
        bad |= _mm512_cmp_ps_mask(a, _mm512_set1_ps(3.4028235e38f), _CMP_NLE_UQ);
        amax = _mm512_max_ps(amax, a);
    }
    if (bad) {
        memset(q, 0, len);
        if (sums)
            memset(sums, 0, len / 16 * sizeof *sums);
        return __builtin_nanf("");
    }
    float d = _mm512_reduce_max_ps(amax) / 127.0f, inv = d != 0 ? 1.0f / d : 0.0f;
    const __m512 iv = _mm512_set1_ps(inv);
    for (unsigned i = 0; i < len; i += 16) {
        __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + i), iv));
        v = _mm512_max_epi32(_mm512_min_epi32(v, _mm512_set1_epi32(127)), _mm512_set1_epi32(-127));
        _mm_storeu_si128((__m128i *)(void *)(q + i), _mm512_cvtepi32_epi8(v));
        if (sums)
            sums[i / 16] = (int16_t)_mm512_reduce_add_epi32(v);
    }
    return d;
}

void sb_rt_xq_quant_avx512(sb_rt_dtype t, const float *x, uint8_t *xq, size_t n)
{
    sb_rt_xq_rows(t, x, xq, n, xq_block);
}
#endif

/* ---- the tiles ---------------------------------------------------------------------- */

SB_RT_QTILE_TABLE(QTILES, 4, 4, 8)
