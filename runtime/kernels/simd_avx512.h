/* simd_avx512.h -- lane folds shared by the AVX-512 kernel files (private
 * to runtime/kernels/; include only from files compiled with AVX-512 F).
 *
 * kernels.h's order folds 16 lanes in halves: lane j += lane j + 8, then
 * + 4, + 2, + 1; lane 0 is the result.
 */
#ifndef SB_RT_SIMD_AVX512_H
#define SB_RT_SIMD_AVX512_H

#include <immintrin.h>

/* Fold 16 lanes in halves: j += j + 8, j += j + 4, j += j + 2, j += j + 1. */
static inline float fold(__m512 v)
{
    __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v),
                             _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    __m128 d = _mm_add_ss(c, _mm_shuffle_ps(c, c, 1));
    return _mm_cvtss_f32(d);
}

/* fold() of four accumulators at once, into out[0..3]: the same additions
 * (lane j + lane j + 8, then + 4, + 2, + 1), done on the four side by side. */
static inline void fold4(float *out, __m512 a0, __m512 a1, __m512 a2, __m512 a3)
{
    __m512 s01 = _mm512_add_ps(_mm512_shuffle_f32x4(a0, a1, 0x44),
                               _mm512_shuffle_f32x4(a0, a1, 0xEE));
    __m512 s23 = _mm512_add_ps(_mm512_shuffle_f32x4(a2, a3, 0x44),
                               _mm512_shuffle_f32x4(a2, a3, 0xEE));
    __m512 v = _mm512_add_ps(_mm512_shuffle_f32x4(s01, s23, _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(s01, s23, _MM_SHUFFLE(3, 1, 3, 1)));
    __m512 w = _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(1, 0, 3, 2)));
    __m512 x = _mm512_add_ps(w, _mm512_permute_ps(w, _MM_SHUFFLE(2, 3, 0, 1)));
    __m512 r = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0,
                                                       0, 0, 0, 0), x);
    _mm_storeu_ps(out, _mm512_castps512_ps128(r));
}

#endif /* SB_RT_SIMD_AVX512_H */
