/* kernels_isa.h -- what an instruction set's kernel file gives the shared
 * matmul driver (kernels.c): tile functions and the X quantizer. Private to
 * runtime/kernels/.
 *
 * A tile computes nt <= tile_tok tokens x nr <= tile_row rows of Y:
 *     y[t * ldy + r] = dot(X row t, W row r)   for t < nt, r < nr
 * with X row t at x + t * ldx and W row r at w + r * (row bytes of in).
 * Every (nt, nr) shape must run each dot product through the same sequence
 * of operations (kernels.h, "Summation order"), so a tile's results do not
 * depend on its shape or on which other rows and tokens share it.
 *
 * Thread safety: tiles are pure functions of their arguments.
 */
#ifndef SB_RT_KERNELS_ISA_H
#define SB_RT_KERNELS_ISA_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"

typedef struct sb_rt_mm_isa {
    unsigned tile_tok; /* most tokens per tile call, <= SB_RT_MM_TILE_MAX */
    unsigned tile_row; /* most rows per tile call */
    void (*f32)(float *y, size_t ldy, const float *x, size_t ldx, const float *w, size_t in,
                unsigned nt, unsigned nr);
    void (*f16)(float *y, size_t ldy, const float *x, size_t ldx, const uint16_t *w, size_t in,
                unsigned nt, unsigned nr);
    /* Q8_0: X row t quantized: xq + t * ldq int8 values, xd + t * ldq / 32
     * block scales; w is Q8_0 rows. */
    void (*q8)(float *y, size_t ldy, const int8_t *xq, const float *xd, size_t ldq,
               const uint8_t *w, size_t in, unsigned nt, unsigned nr);
    /* Quantize one row of in (a multiple of 32) values; bit-identical on
     * every ISA (kernels.h). */
    void (*quant_q8)(const float *x, int8_t *q, float *d, size_t in);
    unsigned tile_row_1; /* most rows per tile when a chunk has one token
                          * (decode: more rows in flight), <= SB_RT_MM_ROW1_MAX */
} sb_rt_mm_isa;

#define SB_RT_MM_ROW1_MAX 8u

#define SB_RT_MM_TILE_MAX 6u

/* sb_rt_mm_drive -- sb_rt_matmul with the tiles of one ISA. */
void sb_rt_mm_drive(const sb_rt_mm_isa *isa, sb_rt_pool *pool, float *y, const float *x,
                    const void *w, sb_rt_dtype wt, size_t n_tok, size_t in, size_t out);

/* The scalar quantizer, the definition the SIMD ones match. */
void sb_rt_quant_q8_ref(const float *x, int8_t *q, float *d, size_t in);

/* Scalar f16 <-> f32 of one value (kernels_ref.c). */
float sb_rt_f16_to_f32_1(uint16_t h);
uint16_t sb_rt_f32_to_f16_1(float f);

/* The per-ISA tables (kernels_ref.c, kernels_avx2.c, kernels_avx512.c). */
extern const sb_rt_kernels sb_rt_kernels_ref;
#if defined(SB_RT_KERNELS_X86)
extern const sb_rt_kernels sb_rt_kernels_avx2;
extern const sb_rt_kernels sb_rt_kernels_avx512;
#endif

#endif /* SB_RT_KERNELS_ISA_H */
