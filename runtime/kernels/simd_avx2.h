/* simd_avx2.h -- the lane fold shared by the AVX2 kernel files (private to
 * runtime/kernels/; include only from files compiled with AVX2).
 *
 * kernels.h's 16 lanes are two ymm registers here, lo (lanes 0-7) and hi
 * (lanes 8-15); the fold adds hi into lo, then halves 128, 64 and 32 bits,
 * as AVX-512's fold does.
 */
#ifndef SB_RT_SIMD_AVX2_H
#define SB_RT_SIMD_AVX2_H

#include <immintrin.h>

/* Fold lanes lo[0..7], hi[8..15] in halves: j += j + 8, + 4, + 2, + 1. */
static inline float fold2(__m256 lo, __m256 hi)
{
    __m256 a = _mm256_add_ps(lo, hi);
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    __m128 d = _mm_add_ss(c, _mm_shuffle_ps(c, c, 1));
    return _mm_cvtss_f32(d);
}

#endif /* SB_RT_SIMD_AVX2_H */
