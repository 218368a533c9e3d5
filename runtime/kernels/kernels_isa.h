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

/* SB_RT_QTILE(NAME, T, BODY, A, B, C) -- a quantized tile function NAME
 * for type T over an always-inline BODY(T, y, ldy, xq, ldq, w, in, nt, nr,
 * NT, NR) that handles nt <= NT tokens x nr <= NR rows: full A x B and
 * 1 x C tiles run with the shape a constant (accumulators in registers);
 * any other shape is cut into pieces of at most A x B (1 x C for one
 * token), each element through the same operations. */
#define SB_RT_QTILE(NAME, T, BODY, A, B, C)                                                     \
    static void NAME(float *y, size_t ldy, const uint8_t *xq, size_t ldq, const uint8_t *w,   \
                     size_t in, unsigned nt, unsigned nr)                                     \
    {                                                                                         \
        const size_t rb = sb_rt_dtype_row_bytes(T, in);                                       \
        if (nt == (A) && nr == (B))                                                           \
            BODY(T, y, ldy, xq, ldq, w, in, A, B, A, B);                                      \
        else if (nt == 1 && nr == (C))                                                        \
            BODY(T, y, ldy, xq, ldq, w, in, 1, C, 1, C);                                      \
        else if (nt == 1)                                                                     \
            for (unsigned r0 = 0; r0 < nr; r0 += (C))                                         \
                BODY(T, y + r0, ldy, xq, ldq, w + r0 * rb, in, 1,                             \
                     nr - r0 < (C) ? nr - r0 : (C), 1, C);                                    \
        else                                                                                  \
            for (unsigned t0 = 0; t0 < nt; t0 += (A))                                         \
                for (unsigned r0 = 0; r0 < nr; r0 += (B))                                     \
                    BODY(T, y + t0 * ldy + r0, ldy, xq + t0 * ldq, ldq, w + r0 * rb, in,      \
                         nt - t0 < (A) ? nt - t0 : (A), nr - r0 < (B) ? nr - r0 : (B), A, B); \
    }

/* SB_RT_QTILE_TABLE(TABLE, A, B, C) -- the eight quantized tile functions
 * of an ISA file over its qtile32 (32-value types) and qtilek (K types)
 * bodies, and TABLE, their array by type id. */
#define SB_RT_QTILE_TABLE(TABLE, A, B, C)                                                       \
    SB_RT_QTILE(tile_q4_0, SB_RT_Q4_0, qtile32, A, B, C)                                      \
    SB_RT_QTILE(tile_q4_1, SB_RT_Q4_1, qtile32, A, B, C)                                      \
    SB_RT_QTILE(tile_q5_0, SB_RT_Q5_0, qtile32, A, B, C)                                      \
    SB_RT_QTILE(tile_q5_1, SB_RT_Q5_1, qtile32, A, B, C)                                      \
    SB_RT_QTILE(tile_q8_0, SB_RT_Q8_0, qtile32, A, B, C)                                      \
    SB_RT_QTILE(tile_q4_k, SB_RT_Q4_K, qtilek, A, B, C)                                       \
    SB_RT_QTILE(tile_q5_k, SB_RT_Q5_K, qtilek, A, B, C)                                       \
    SB_RT_QTILE(tile_q6_k, SB_RT_Q6_K, qtilek, A, B, C)                                       \
    const sb_rt_qtile_fn TABLE[SB_RT_DTYPE_MAX] = {                                           \
        [SB_RT_Q4_0] = tile_q4_0, [SB_RT_Q4_1] = tile_q4_1, [SB_RT_Q5_0] = tile_q5_0,         \
        [SB_RT_Q5_1] = tile_q5_1, [SB_RT_Q8_0] = tile_q8_0, [SB_RT_Q4_K] = tile_q4_k,         \
        [SB_RT_Q5_K] = tile_q5_k, [SB_RT_Q6_K] = tile_q6_k,                                   \
    };

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

/* The per-ISA tables (kernels_ref.c, kernels_avx2.c, kernels_avx512.c). */
extern const sb_rt_kernels sb_rt_kernels_ref;
#if defined(SB_RT_KERNELS_X86)
extern const sb_rt_kernels sb_rt_kernels_avx2;
extern const sb_rt_kernels sb_rt_kernels_avx512;
extern const sb_rt_kernels sb_rt_kernels_avx512vnni;
#endif

#endif /* SB_RT_KERNELS_ISA_H */
