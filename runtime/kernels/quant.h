/* quant.h -- GGML's weight block formats: their layouts, a row's
 * dequantization, make-model's quantizer, and the 8-bit activation blocks
 * the integer dot products multiply them with.
 *
 * ---- Weight types (GGML type ids, as ggml.h numbers them) -----------------
 *
 *   id  name   values/block  bytes/block  value i of a block
 *   0   F32    1             4            IEEE binary32
 *   1   F16    1             2            IEEE binary16
 *   30  BF16   1             2            the top 16 bits of a binary32
 *   2   Q4_0   32            18           d * (q_i - 8)
 *   3   Q4_1   32            20           d * q_i + m
 *   6   Q5_0   32            22           d * (q_i - 16)
 *   7   Q5_1   32            24           d * q_i + m
 *   8   Q8_0   32            34           d * q_i
 *   12  Q4_K   256           144          d * sc_j * q_i - dmin * m_j
 *   13  Q5_K   256           176          d * sc_j * q_i - dmin * m_j
 *   14  Q6_K   256           210          d * sc_k * (q_i - 32)
 *
 * A row of n values is n / (values per block) blocks back to back, no
 * padding, no alignment (GGUF ne0 = n must be a multiple of the block).
 * Every multi-byte field is little-endian; d, m, dmin are binary16.
 *
 * Q4_0 (18 bytes):              Q4_1 (20 bytes):
 *   OFFSET SIZE FIELD             OFFSET SIZE FIELD
 *   0      2    d                 0      2    d
 *   2      16   qs                2      2    m
 *                                 4      16   qs
 *   q_i = qs[i] & 15 for i < 16, q_{i+16} = qs[i] >> 4: the low nibbles are
 *   the block's first half, the high nibbles its second half.
 *
 * Q5_0 (22 bytes):              Q5_1 (24 bytes):
 *   OFFSET SIZE FIELD             OFFSET SIZE FIELD
 *   0      2    d                 0      2    d
 *   2      4    qh (u32)          2      2    m
 *   6      16   qs                4      4    qh (u32)
 *                                 8      16   qs
 *   q_i = (nibble i as in Q4) | ((qh >> i) & 1) << 4: bit i of qh is the
 *   fifth bit of value i, i < 32.
 *
 * Q8_0 (34 bytes):
 *   OFFSET SIZE FIELD
 *   0      2    d
 *   2      32   qs (int8); q_i = qs[i], -128 included
 *
 * Q4_K (144 bytes): 8 sub-blocks j of 32 values, value i in sub-block i/32.
 *   OFFSET SIZE FIELD
 *   0      2    d      super-block scale of the sub-block scales
 *   2      2    dmin   super-block scale of the sub-block mins
 *   4      12   scales sc_j, m_j: 6 bits each, packed (below)
 *   16     128  qs     value 64c + l (c < 4, l < 32): qs[32c + l] & 15;
 *                      value 64c + 32 + l: qs[32c + l] >> 4
 *   The packing of scales[12] = s: for j < 4, sc_j = s[j] & 63 and m_j =
 *   s[j + 4] & 63; for j >= 4, sc_j = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4
 *   and m_j = (s[j + 4] >> 4) | (s[j] >> 6) << 4.
 *
 * Q5_K (176 bytes): as Q4_K with a fifth bit per value.
 *   OFFSET SIZE FIELD
 *   0      2    d
 *   2      2    dmin
 *   4      12   scales (as Q4_K)
 *   16     32   qh     value 64c + l: bit 2c of qh[l]; 64c + 32 + l: bit
 *                      2c + 1 of qh[l] (l < 32), as bit 4 of q
 *   48     128  qs     (as Q4_K)
 *
 * Q6_K (210 bytes): 16 sub-blocks k of 16 values, value i in sub-block i/16.
 *   OFFSET SIZE FIELD
 *   0      128  ql     low 4 bits
 *   128    64   qh     high 2 bits
 *   192    16   scales sc_k (int8)
 *   208    2    d
 *   In half h < 2 (values 128h..128h+127; L = ql + 64h, H = qh + 32h),
 *   for l < 32:
 *     value 128h + l      = L[l] & 15      | (H[l] >> 0 & 3) << 4
 *     value 128h + 32 + l = L[l + 32] & 15 | (H[l] >> 2 & 3) << 4
 *     value 128h + 64 + l = L[l] >> 4      | (H[l] >> 4 & 3) << 4
 *     value 128h + 96 + l = L[l + 32] >> 4 | (H[l] >> 6 & 3) << 4
 *
 * ---- Activation blocks (what X is quantized to for a quantized W) ---------
 *
 * A matmul over a quantized W first quantizes each X row (kernels.h). One
 * row is a struct of arrays in a byte buffer of sb_rt_xq_row_bytes(t, n):
 *
 *   32-value W blocks (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0): "Q8_0-style",
 *   nb = n / 32 blocks
 *     OFFSET  SIZE    FIELD
 *     0       n       q: int8 in [-127, 127]
 *     n       4 nb    d: f32 block scale; x_i ~ d_b * q_i
 *   256-value W blocks (Q4_K, Q5_K, Q6_K): "Q8_K-style", nk = n / 256
 *     OFFSET  SIZE    FIELD
 *     0       n       q: int8 in [-127, 127]
 *     n       4 nk    d: f32 super-block scale
 *     n+4nk   2 n/16  s: int16 sum of each 16 q (|sum| <= 2032): the
 *                     K types' min and offset terms (kernels.h)
 *
 * Each block of 32 (or 256) values x_i is quantized alike on every ISA:
 *   amax = max |x_i|,  d = amax / 127,  q_i = round_half_even(x_i * (d ? 1/d
 *   : 0)) clamped to [-127, 127]
 * in f32, so the bits are the same everywhere (kernels.h: Determinism). A
 * block holding a NaN or an infinity gets d = NaN and q = 0, so every
 * output that reads it is NaN (the fault shows, as with F32 weights).
 *
 * Thread safety: every function here is reentrant and pure.
 */
#ifndef SB_RT_QUANT_H
#define SB_RT_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kernels.h"

/* Byte offsets inside the blocks above. */
#define SB_RT_Q4_0_BYTES 18u
#define SB_RT_Q4_1_BYTES 20u
#define SB_RT_Q5_0_BYTES 22u
#define SB_RT_Q5_1_BYTES 24u
#define SB_RT_QK_BLOCK 256u         /* values per K-quant super-block */
#define SB_RT_Q4_K_BYTES 144u
#define SB_RT_Q5_K_BYTES 176u
#define SB_RT_Q6_K_BYTES 210u
#define SB_RT_QK_SCALES 4u          /* Q4_K / Q5_K: offset of scales[12] */
#define SB_RT_Q4_K_QS 16u
#define SB_RT_Q5_K_QH 16u
#define SB_RT_Q5_K_QS 48u
#define SB_RT_Q6_K_QH 128u
#define SB_RT_Q6_K_SC 192u
#define SB_RT_Q6_K_D 208u

/* sb_rt_dtype_block -- values per block of t (1 for F32, F16, BF16).
 * Returns: 0 when t is not a type this runtime runs. */
size_t sb_rt_dtype_block(sb_rt_dtype t);

/* sb_rt_dtype_block_bytes -- bytes per block of t; 0 when unknown. */
size_t sb_rt_dtype_block_bytes(sb_rt_dtype t);

/* sb_rt_dtype_known -- whether id is one of the types above (the ones
 * sb_rt_matmul runs). */
bool sb_rt_dtype_known(uint32_t id);

/* sb_rt_dtype_is_k -- whether t has 256-value super-blocks (Q4_K, Q5_K,
 * Q6_K), whose activations are Q8_K-style. */
bool sb_rt_dtype_is_k(sb_rt_dtype t);

/* sb_rt_ggml_type_name -- GGML's name of any GGML type id ("q4_K",
 * "iq4_xs", "bf16", ...), also of types this runtime does not run; "?" for
 * ids GGML does not define. A static string. */
const char *sb_rt_ggml_type_name(uint32_t id);

/* sb_rt_ggml_type_size -- values per block and bytes per block of any GGML
 * type id, run here or not (a GGUF reader must size every tensor).
 * Returns: true and the sizes; false for an id GGML does not define or has
 * removed. */
bool sb_rt_ggml_type_size(uint32_t id, size_t *block, size_t *bytes);

/* sb_rt_dequant_row -- y[i] = value i of the row of n values of type t at
 * w, as the table above defines it, computed in f32 (products rounded in
 * the order the table writes them: (d * sc) * q - (dmin * m)). n must be a
 * multiple of t's block; w needs no alignment. An unknown t fills y with
 * NaN. */
void sb_rt_dequant_row(sb_rt_dtype t, const void *w, float *y, size_t n);

/* sb_rt_quant_row -- make-model's quantizer: x (n values, n a multiple of
 * t's block) to a row of type t at w (sb_rt_dtype_row_bytes(t, n) bytes).
 * Round to nearest per block, each scale chosen so that no value clips:
 *   Q8_0: d = amax / 127, q = round(x / d).
 *   Q4_0, Q5_0: d = v / -8 (-16), v the value of largest magnitude, so v
 *     maps to the lowest level exactly; q = round(x / d) + 8 (16), clamped
 *     to [0, 15] ([0, 31]); only the value opposite v can clip, by under
 *     one step.
 *   Q4_1, Q5_1: m = min, d = (max - min) / 15 (31), q = round((x - m) / d).
 *   Q4_K, Q5_K: per sub-block of 32, the min offset o_j = max(0, -min x)
 *     and the range (max x + o_j); 6-bit m_j and sc_j are the ceilings of
 *     o_j / dmin and range_j / (15 d) (31 d) with dmin = max o_j / 63 and
 *     d = max range / (63 * 15) (31), both rounded up when f16 rounds them
 *     down, so every value lies inside its sub-block's levels; then q =
 *     round((x + dmin m_j) / (d sc_j)).
 *   Q6_K: per sub-block of 16, step_k = amax_k / 31, d = max step / 127,
 *     sc_k = ceil(step_k / d), q = round(x / (d sc_k)) + 32 in [1, 63].
 *   F16, BF16: round to nearest even; F32: a copy.
 * Error bound (what test_kernels checks): every value dequantizes within
 * half its block's (or sub-block's) step, d * sc for K types, except the
 * one value opposite v in Q4_0/Q5_0, which is within one step; and the step
 * is at most the block's range over its levels plus one super-block
 * quantum (d) for K types, plus f16 rounding of the scales.
 * Returns: SB_OK; SB_ERR_INVAL when t is unknown or n not a multiple of
 * its block (w untouched). */
int sb_rt_quant_row(sb_rt_dtype t, const float *x, void *w, size_t n);

/* sb_rt_xq_row_bytes -- bytes of one quantized X row of n values for a W of
 * type t (the layouts above); 0 for F32/F16/BF16 (X is used as floats) and
 * when n is not a multiple of t's block. */
size_t sb_rt_xq_row_bytes(sb_rt_dtype t, size_t n);

/* sb_rt_xq_quant_ref -- quantize one X row of n values for a W of type t
 * into xq (sb_rt_xq_row_bytes(t, n) bytes), as above: the scalar
 * definition; each ISA table has a vector one with the same bits
 * (kernels_isa.h). */
void sb_rt_xq_quant_ref(sb_rt_dtype t, const float *x, uint8_t *xq, size_t n);

/* The row loop of an X quantizer, for the ISA files: block(x, q, len,
 * sums) quantizes one block of len values (32 or 256) as above, writes the
 * int16 sum of each 16 q to sums when it is not NULL, and returns d. */
typedef float (*sb_rt_xq_block_fn)(const float *x, int8_t *q, unsigned len, int16_t *sums);
void sb_rt_xq_rows(sb_rt_dtype t, const float *x, uint8_t *xq, size_t n, sb_rt_xq_block_fn block);

/* Unaligned little-endian loads. */
static inline float sb_rt_ldf(const uint8_t *p)
{
    float f;
    memcpy(&f, p, 4);
    return f;
}

static inline uint32_t sb_rt_ld32(const uint8_t *p)
{
    uint32_t u;
    memcpy(&u, p, 4);
    return u;
}

/* bf16 <-> f32 of one value: bf16 to f32 is exact (a shift); f32 to bf16
 * rounds to nearest even, NaNs stay NaN (quiet). */
static inline float sb_rt_bf16_to_f32_1(uint16_t h)
{
    union { uint32_t u; float f; } v = { (uint32_t)h << 16 };
    return v.f;
}

uint16_t sb_rt_f32_to_bf16_1(float f);

/* The 6-bit scale and min of sub-block j < 8 of a Q4_K / Q5_K block's
 * scales[12] (the packing above). */
static inline void sb_rt_qk_scale_min(const uint8_t *s, unsigned j, uint8_t *sc, uint8_t *m)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (uint8_t)((s[j + 4] & 15) | (s[j - 4] >> 6) << 4);
        *m = (uint8_t)((s[j + 4] >> 4) | (s[j] >> 6) << 4);
    }
}

/* The q of value i < 32 of a Q4_0 / Q4_1 block (qh = 0) or a Q5_0 / Q5_1
 * block (qh its fifth bits): qs the block's 16 nibble bytes. */
static inline int sb_rt_q32_val(const uint8_t *qs, uint32_t qh, unsigned i)
{
    int nib = i < 16 ? qs[i] & 15 : qs[i - 16] >> 4;
    return nib | (int)((qh >> i) & 1u) << 4;
}

/* The q (0..63, before the -32) of value i < 256 of the Q6_K block at b. */
static inline int sb_rt_q6k_val(const uint8_t *b, unsigned i)
{
    unsigned h = i / 128, r = i % 128, quarter = r / 32, l = r % 32;
    const uint8_t *L = b + 64 * h, *H = b + SB_RT_Q6_K_QH + 32 * h;
    int lo = quarter & 1 ? L[l + 32] : L[l];
    lo = quarter >= 2 ? lo >> 4 : lo & 15;
    return lo | ((H[l] >> (2 * quarter)) & 3) << 4;
}

#endif /* SB_RT_QUANT_H */
