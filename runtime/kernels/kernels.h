/* kernels.h -- the CPU math of the forward pass: matmul over F32, F16,
 * BF16 and GGML's quantized weights (quant.h), norms, softmax, activations,
 * f16 conversion, and the kernel tables for each instruction set.
 *
 * Every kernel exists as a portable scalar reference (ref) and, on x86-64,
 * as an AVX2 + FMA + F16C version and an AVX-512 (F/BW/VL) + FMA + F16C
 * version; avx512vnni is the AVX-512 table whose quantized matmul uses
 * AVX512-VNNI (VPDPBUSD, VPDPWSSD), every other kernel the same. The plain
 * calls (sb_rt_matmul, ...) use the best table this CPU runs, chosen once
 * on first use; the environment variable SNAPBANK_ISA (ref, avx2, avx512
 * or avx512vnni) picks a narrower one instead, e.g. to reproduce another
 * machine's bits (one line on stderr if this CPU lacks it).
 * sb_rt_kernels_get hands out a particular table for tests and benchmarks.
 *
 * ---- Determinism (what the runtime's bit-identical logits rest on) --------
 *
 * Within one ISA every output element is a pure function of its own inputs:
 * for matmul, of its X row and its W row only. The operation order does not
 * depend on n_tok, on the row's position in the batch, on the thread count
 * or how work is split, or on the buffers' alignment (no peeling: loads are
 * unaligned, tails masked or scalar at fixed positions). A prompt computed
 * in one batch, token by token, or restored and continued gives the same
 * bits. Batched matmul reuses each loaded weight vector across a tile of up
 * to 6 tokens x 4 rows, but each of the tile's dot products
 * has its own accumulator and the exact sequence of the one-token path.
 * AVX2 and AVX-512 run the same FMAs in the same order and give the same
 * bits (softmax included: the same exp polynomial); ref multiplies and adds
 * separately and agrees with them within a few units in the last place
 * times the condition number of the sum.
 *
 * ---- Summation order -------------------------------------------------------
 *
 * Dot products of length n (matmul F32/F16 rows, sb_rt_dot_*, the sum of
 * squares in rmsnorm, the sum in softmax) use L lanes: L = 16. Lane j accumulates the terms k = j, j+L, j+2L, ...
 * in increasing k, starting from +0.0f (ref: p = a*b rounded, then acc += p;
 * AVX-512: one fused multiply-add per term). The lanes are then folded
 * in halves: lane j += lane j+L/2 for j < L/2, then j += j+L/4, ... down to
 * lane 0, which is the result. A tail shorter than L fills lanes 0.. of
 * the last step (masked on AVX-512), so the rule above holds for every n.
 *
 * BF16 matmul follows the F32/F16 rule exactly (each weight converted to
 * f32, which is exact, then one FMA per term in the lane order).
 *
 * Quantized W (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K; quant.h
 * draws the blocks): each X row is first quantized to 8-bit blocks
 * (quant.h, "Activation blocks"), the same bits on every ISA: Q8_0-style
 * blocks of 32 for the 32-value types, Q8_K-style blocks of 256 with
 * per-16 sums for the K types. The dot of an X row and a W row then has
 * L = 16 float lanes acc[0..15], each starting at +0.0f, and integers that
 * are exact in int32 on every ISA (in any order: they are exact). With
 * qw the weight's integer (centred for Q4_0: q - 8, Q5_0: q - 16, Q8_0: q;
 * not for Q4_1, Q5_1, Q4_K, Q5_K: q in 0..15 or 0..31; Q6_K: q - 32), qx
 * X's, dw / mw / dmin / sc / m the block's fields (f16 fields as f32), dx
 * X's block scale, and fma(a, b, c) one rounding of a * b + c:
 *
 *   32-value types: block b feeds lanes 8 (b % 2) + k, k < 8, in
 *   increasing b, with the 4 values 4k..4k+3 of the block:
 *     I = sum of qw * qx over the 4,  lane = fma((float)I, dw * dx, lane)
 *     Q4_1, Q5_1 then: J = sum of qx over the 4,
 *                       lane = fma((float)J, mw * dx, lane)
 *   K types: super-block s (256 values, one dx), in increasing s: lane k
 *   takes the values 64c + 4k + v, c < 4, v < 4 (each 64-value chunk's
 *   k-th group of 4):
 *     Q4_K, Q5_K: I_k = sum_c sc_j * (sum_v qw * qx), j = 2c + k / 8 (the
 *       32-value sub-block of the group); lane k = fma((float)I_k, d * dx,
 *       lane k) for every k; then for k < 8, with X_k the sum of qx over
 *       sub-block k: lane k = fma(-(float)(m_k * X_k), dmin * dx, lane k)
 *     Q6_K: I_k = sum_c sc_j * (sum_v qw * qx), j = 4c + k / 4 (the
 *       16-value sub-block); qw = q - 32 is applied as q * qx in the sum
 *       and, for k < 8, - 32 * (sc_2k X_2k + sc_2k+1 X_2k+1) with X_g the
 *       sum of qx over sub-block g (the same integer); lane k =
 *       fma((float)I_k, d * dx, lane k)
 *   then the lanes are folded as above (j += j + 8, + 4, + 2, + 1).
 * So quantized results are bit-identical across ref, AVX2 and AVX-512
 * (with or without VNNI: only the integers come from other instructions),
 * and each output depends only on its X row and W row. Why quantize X
 * rather than dequantize W: the int8 dot (VPDPBUSD, VPMADDUBSW) does 4x the
 * multiply-adds per instruction of an f32 FMA, and decode reads the same W
 * bytes either way. The price is X's quantization error (at most half a
 * step, amax / 254 of X's block), the trade every llama-style runtime
 * makes (llama.cpp quantizes X to Q8_0 / Q8_K blocks for these types too).
 *
 * ---- Formats ---------------------------------------------------------------
 *
 * F16: IEEE binary16, little-endian uint16_t. BF16: the top half of an
 * IEEE binary32. The quantized blocks: quant.h. A W row of `in` values is
 * in / block consecutive blocks, with no padding; rows follow each other
 * (GGUF ne0 = in, ne1 = out). No alignment is assumed.
 *
 * Thread safety: every kernel is reentrant; the only shared state is the
 * dispatch choice, made once (atomically) and immutable after. sb_rt_matmul
 * with a pool must not run concurrently with another sb_rt_pool_run on the
 * same pool.
 */
#ifndef SB_RT_KERNELS_H
#define SB_RT_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/pool.h"

/* Weight element types; the numbers are GGML's type ids (quant.h draws
 * each block). */
typedef enum sb_rt_dtype {
    SB_RT_F32 = 0, SB_RT_F16 = 1, SB_RT_Q4_0 = 2, SB_RT_Q4_1 = 3, SB_RT_Q5_0 = 6,
    SB_RT_Q5_1 = 7, SB_RT_Q8_0 = 8, SB_RT_Q4_K = 12, SB_RT_Q5_K = 13, SB_RT_Q6_K = 14,
    SB_RT_BF16 = 30,
} sb_rt_dtype;

#define SB_RT_DTYPE_MAX 31u        /* type ids are below this */
#define SB_RT_Q8_0_BLOCK 32u       /* values per Q8_0 block */
#define SB_RT_Q8_0_BLOCK_BYTES 34u /* bytes per Q8_0 block */

/* sb_rt_dtype_row_bytes -- bytes of one row of n values of type t.
 * Returns: the size; 0 when t is unknown or n is not a multiple of t's
 * block (32 for the Q*_0/Q*_1 types, 256 for the K types). */
size_t sb_rt_dtype_row_bytes(sb_rt_dtype t, size_t n);

/* The instruction sets with a kernel table. */
typedef enum sb_rt_isa {
    SB_RT_ISA_REF = 0, SB_RT_ISA_AVX2 = 1, SB_RT_ISA_AVX512 = 2, SB_RT_ISA_AVX512VNNI = 3,
} sb_rt_isa;
#define SB_RT_ISA_COUNT 4

/* One instruction set's kernels; each member has the contract of the plain
 * call of the same name below. Tables are static and immutable. */
typedef struct sb_rt_kernels {
    void (*f16_to_f32)(const uint16_t *x, float *y, size_t n);
    void (*f32_to_f16)(const float *x, uint16_t *y, size_t n);
    void (*matmul)(sb_rt_pool *pool, float *y, const float *x, const void *w, sb_rt_dtype wt,
                   size_t n_tok, size_t in, size_t out);
    void (*rmsnorm)(float *y, const float *x, const float *w, size_t n, float eps);
    void (*softmax)(float *x, size_t n);
    void (*silu_mul)(float *a, const float *b, size_t n);
    void (*add)(float *y, const float *x, size_t n);
    float (*dot_f32)(const float *a, const float *b, size_t n);
    float (*dot_f16)(const uint16_t *a, const float *b, size_t n);
    void (*axpy_f32)(float *y, float a, const float *x, size_t n);
    void (*axpy_f16)(float *y, float a, const uint16_t *x, size_t n);
    void (*dots_f16)(float *out, const uint16_t *a, size_t stride, size_t rows, const float *b,
                     size_t n);
    void (*axpys_f16)(float *y, const float *a, const uint16_t *x, size_t stride, size_t rows,
                      size_t n);
    void (*qk_f16)(float *s, size_t lds, const float *q, size_t ldq, size_t nq, const uint16_t *k,
                   size_t ldk, size_t rows, size_t n);
    void (*av_f16)(float *o, size_t ldo, const float *s, size_t lds, size_t nq, const uint16_t *v,
                   size_t ldv, size_t rows, size_t n);
    sb_rt_isa isa;    /* which set this is */
    const char *name; /* "ref", "avx2", "avx512", "avx512vnni" */
} sb_rt_kernels;

/* sb_rt_kernels_get -- the table of isa. Returns: a static table, or NULL
 * when this CPU (or this build) lacks isa. */
const sb_rt_kernels *sb_rt_kernels_get(sb_rt_isa isa);

/* sb_rt_kernels_best -- the table the plain calls use: the one SNAPBANK_ISA
 * names if this CPU runs it, else the widest this CPU runs (see above).
 * Returns: a static table, never NULL. */
const sb_rt_kernels *sb_rt_kernels_best(void);

/* sb_rt_f16_to_f32 -- y[i] = x[i] exactly, for n values (NaNs stay NaN). */
void sb_rt_f16_to_f32(const uint16_t *x, float *y, size_t n);

/* sb_rt_f32_to_f16 -- y[i] = x[i] rounded to nearest, ties to even, like
 * F16C: subnormal results kept, overflow to +-inf, NaNs stay NaN (quiet). */
void sb_rt_f32_to_f16(const float *x, uint16_t *y, size_t n);

/* sb_rt_matmul -- Y = X . W^T: y is (n_tok, out), x is (n_tok, in), both
 * row-major f32; w is (out, in) of type wt, each row contiguous
 * (sb_rt_dtype_row_bytes(wt, in) bytes), i.e. GGUF ne0 = in, ne1 = out.
 * y must not overlap x or w. The work is split over pool (NULL: the caller
 * does all of it); the result does not depend on the split.
 * Bad arguments (an unknown wt, in not a multiple of wt's block) cannot be
 * reported by this void call: y is then filled with NaN, so the fault shows
 * in the logits instead of passing silently. Callers check shapes when a
 * model is loaded. A quantized wt allocates a scratch copy of X quantized
 * when it exceeds 20 KiB; if that allocation fails it quantizes per tile
 * instead (slower, same bits) unless one X row exceeds 80 KiB quantized,
 * where y is NaN-filled. */
void sb_rt_matmul(sb_rt_pool *pool, float *y, const float *x, const void *w, sb_rt_dtype wt,
                  size_t n_tok, size_t in, size_t out);

/* sb_rt_rmsnorm -- y = x / sqrt(mean(x^2) + eps) * w over n values; y may
 * be x. n = 0 does nothing. */
void sb_rt_rmsnorm(float *y, const float *x, const float *w, size_t n, float eps);

/* sb_rt_softmax -- in place: x[i] = exp(x[i] - max) / sum_j exp(x[j] - max).
 * -inf entries become 0. If every entry is -inf (no finite logit), every
 * output is 0. n = 0 does nothing. */
void sb_rt_softmax(float *x, size_t n);

/* sb_rt_silu_mul -- a[i] = silu(a[i]) * b[i], silu(v) = v / (1 + exp(-v)). */
void sb_rt_silu_mul(float *a, const float *b, size_t n);

/* sb_rt_add -- y[i] += x[i]. */
void sb_rt_add(float *y, const float *x, size_t n);

/* sb_rt_dot_f32 -- sum of a[i] * b[i] in the order stated above. */
float sb_rt_dot_f32(const float *a, const float *b, size_t n);

/* sb_rt_dot_f16 -- sum of f16 a[i] (e.g. a KV cache row) times b[i]. */
float sb_rt_dot_f16(const uint16_t *a, const float *b, size_t n);

/* sb_rt_axpy_f32 -- y[i] += a * x[i]. */
void sb_rt_axpy_f32(float *y, float a, const float *x, size_t n);

/* sb_rt_axpy_f16 -- y[i] += a * x[i], x f16. */
void sb_rt_axpy_f16(float *y, float a, const uint16_t *x, size_t n);

/* sb_rt_dots_f16 -- out[j] = sb_rt_dot_f16(a + j * stride, b, n) for j <
 * rows, bit for bit: attention scores of one query against the K rows of a
 * page (stride: F16 values from one row to the next). */
void sb_rt_dots_f16(float *out, const uint16_t *a, size_t stride, size_t rows, const float *b,
                    size_t n);

/* sb_rt_axpys_f16 -- for j = 0, 1, ... rows - 1 in order, y += a[j] * x_j
 * with x_j = x + j * stride: the same bits as that many sb_rt_axpy_f16
 * calls (attention's weighted sum of a page's V rows), y kept in registers. */
void sb_rt_axpys_f16(float *y, const float *a, const uint16_t *x, size_t stride, size_t rows,
                     size_t n);

/* sb_rt_qk_f16 -- attention scores of nq queries against rows K rows:
 * s[i * lds + j] = sb_rt_dot_f16(k + j * ldk, q + i * ldq, n) for i < nq,
 * j < rows, bit for bit (each K row is loaded once for many queries). */
void sb_rt_qk_f16(float *s, size_t lds, const float *q, size_t ldq, size_t nq, const uint16_t *k,
                  size_t ldk, size_t rows, size_t n);

/* sb_rt_av_f16 -- for each query i < nq: sb_rt_axpys_f16(o + i * ldo,
 * s + i * lds, v, ldv, rows, n), bit for bit (each V row is loaded once for
 * every query): the weighted sums of attention. */
void sb_rt_av_f16(float *o, size_t ldo, const float *s, size_t lds, size_t nq, const uint16_t *v,
                  size_t ldv, size_t rows, size_t n);

#endif /* SB_RT_KERNELS_H */
