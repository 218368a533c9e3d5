/* kernels_isa.h -- what an instruction set's kernel file gives the shared
 * matmul driver (kernels.c): its tile functions. Private to
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

/* A quantized tile: X rows quantized (quant.h, "Activation blocks"), row
 * t at xq + t * ldq bytes; W rows of type t (quant.h), row r at w + r *
 * (row bytes of in). Each y element is kernels.h's quantized rule. */
typedef void (*sb_rt_qtile_fn)(float *y, size_t ldy, const uint8_t *xq, size_t ldq,
                               const uint8_t *w, size_t in, unsigned nt, unsigned nr);

typedef struct sb_rt_mm_isa {
    unsigned tile_tok; /* most tokens per tile call, <= SB_RT_MM_TILE_MAX */
    unsigned tile_row; /* most rows per tile call */
    void (*f32)(float *y, size_t ldy, const float *x, size_t ldx, const float *w, size_t in,
                unsigned nt, unsigned nr);
    void (*f16)(float *y, size_t ldy, const float *x, size_t ldx, const uint16_t *w, size_t in,
                unsigned nt, unsigned nr);
    void (*bf16)(float *y, size_t ldy, const float *x, size_t ldx, const uint16_t *w, size_t in,
                 unsigned nt, unsigned nr);
    unsigned tile_row_1; /* most rows per tile when a chunk has one token
                          * (decode: more rows in flight), <= SB_RT_MM_ROW1_MAX */
    /* Quantized types: tiles by type id (NULL: not quantized), and their
     * shapes, the same for every quantized type. */
    unsigned q_tok, q_row, q_row_1;
    const sb_rt_qtile_fn *q; /* (SB_RT_DTYPE_MAX) */
    /* The X quantizer: sb_rt_xq_quant_ref's bits (quant.h). */
    void (*xq)(sb_rt_dtype t, const float *x, uint8_t *xq, size_t n);
} sb_rt_mm_isa;

#define SB_RT_MM_ROW1_MAX 16u

#define SB_RT_MM_TILE_MAX 6u

/* sb_rt_mm_drive -- sb_rt_matmul with the tiles of one ISA. */
void sb_rt_mm_drive(const sb_rt_mm_isa *isa, sb_rt_pool *pool, float *y, const float *x,
                    const void *w, sb_rt_dtype wt, size_t n_tok, size_t in, size_t out);

/* The quantized tiles by type id: the reference's (kernels_ref.c: the
 * definitions), AVX2's, and AVX-512's with VNNI (VPDPBUSD / VPDPWSSD) or
 * without (VPMADDUBSW / VPMADDWD); all bit-identical. */
extern const sb_rt_qtile_fn sb_rt_qtiles_ref[SB_RT_DTYPE_MAX];
#if defined(SB_RT_KERNELS_X86)
extern const sb_rt_qtile_fn sb_rt_qtiles_avx2[SB_RT_DTYPE_MAX];
extern const sb_rt_qtile_fn sb_rt_qtiles_avx512[SB_RT_DTYPE_MAX];
extern const sb_rt_qtile_fn sb_rt_qtiles_avx512vnni[SB_RT_DTYPE_MAX];
void sb_rt_xq_quant_avx2(sb_rt_dtype t, const float *x, uint8_t *xq, size_t n);
void sb_rt_xq_quant_avx512(sb_rt_dtype t, const float *x, uint8_t *xq, size_t n);
#endif

/* Scalar f16 <-> f32 of one value (kernels_ref.c). */
float sb_rt_f16_to_f32_1(uint16_t h);
uint16_t sb_rt_f32_to_f16_1(float f);

/* The per-ISA tables (kernels_ref.c, kernels_avx2.c, kernels_avx512.c). */
extern const sb_rt_kernels sb_rt_kernels_ref;
#if defined(SB_RT_KERNELS_X86)
extern const sb_rt_kernels sb_rt_kernels_avx2;
extern const sb_rt_kernels sb_rt_kernels_avx512;
extern const sb_rt_kernels sb_rt_kernels_avx512vnni;
#endif

#endif /* SB_RT_KERNELS_ISA_H */
