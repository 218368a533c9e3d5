/* deltanet.h -- the Gated DeltaNet layer of hybrid models (qwen35): what it
 * computes, the per-sequence recurrent state it carries from token to
 * token, and that state as bytes for the bank's point states.
 *
 * Gated DeltaNet (Yang, Kautz, Hatamizadeh, "Gated Delta Networks:
 * Improving Mamba2 with Delta Rule", ICLR 2025) is linear attention whose
 * memory is a matrix per head, updated by the delta rule with a decay. In
 * Qwen3.5 (and Qwen3-Next) the layer is, for the tokens of a batch, with
 * xb the layer's normed input (dim floats per token), n_k key heads, n_v
 * value heads (n_v a multiple of n_k), head size d (= d_k = d_v) and
 * conv_dim = 2 n_k d + n_v d (model.h lists the tensors):
 *
 *   1. mixed = xb . attn_qkv          (conv_dim)  q | k | v, before the conv
 *      z     = xb . attn_gate         (n_v d)     the output gate
 *      b     = xb . ssm_beta          (n_v)
 *      a     = xb . ssm_alpha         (n_v)
 *   2. a causal depthwise convolution of width d_conv over the positions,
 *      then SiLU, channel by channel:
 *        c_t[ch] = silu( sum_{i < d_conv} w[ch][i] * mixed_{t - d_conv + 1 + i}[ch] )
 *      (w = ssm_conv1d, taps oldest first; mixed before position 0 is 0).
 *      c_t splits into q (n_k heads of d), k (n_k heads), v (n_v heads).
 *   3. per head, q and k are L2-normalized, x / sqrt(sum x^2 + eps) with
 *      the model's RMS epsilon, and q is then scaled by 1 / sqrt(d);
 *      beta_t = sigmoid(b_t)  and  g_t = softplus(a_t + ssm_dt.bias) * ssm_a
 *      per value head, so alpha_t = exp(g_t) is in (0, 1] (ssm_a < 0).
 *   4. per value head h, reading key head h mod n_k (llama.cpp's converter
 *      orders the value heads so that this tiling is the model's grouping),
 *      with the state S a d x d matrix (row i: value component i, column j:
 *      key component j), zero before position 0:
 *        S_t = alpha_t (S_{t-1} - beta_t (S_{t-1} k_t) k_t^T) + beta_t v_t k_t^T
 *            = alpha_t S_{t-1} + delta_t k_t^T,
 *              delta_t = beta_t (v_t - alpha_t S_{t-1} k_t)
 *        o_t = S_t q_t
 *      (the delta rule: S k_t moves toward v_t by a fraction beta_t, after
 *      the whole memory decayed by alpha_t).
 *   5. per value head, o_t = rmsnorm(o_t) * ssm_norm * silu(z_t) (over d,
 *      the RMS epsilon)
 *   6. y = o . ssm_out                (dim)
 *
 * The recurrent form above runs one token at a time: a position's state
 * depends only on the state before it and its own inputs, so the state at
 * any position is the same however the tokens were batched.
 *
 * ---- The state of one sequence (sb_rt_gdn) ---------------------------------
 *
 * For each recurrent layer (in layer order): S of every value head, and the
 * conv window: the last d_conv - 1 rows of `mixed` (oldest first; zeros
 * before position 0). Its serialized form, the bytes a boundary keeps in
 * the bank (boundary.h), is exactly that, little-endian float32:
 *
 *   per recurrent layer r = 0 .. n_rec - 1, at offset r * layer_bytes:
 *     OFFSET            SIZE                      FIELD
 *     0                 4 n_v d d                 S, head by head, row-major
 *     4 n_v d d         4 (d_conv - 1) conv_dim   conv window, oldest row first
 *
 * Thread safety: a state belongs to one sequence, used by one thread at a
 * time; a scratch belongs to one context. The layer runs its heads on the
 * context's pool.
 */
#ifndef SB_RT_DELTANET_H
#define SB_RT_DELTANET_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/pool.h"
#include "model/model.h"

/* Revision of the state's bytes and of the operation order behind them: a
 * part of the model identity (model.c), so that no bank mixes states of two
 * revisions. */
#define SB_RT_GDN_FORMAT 1u

typedef struct sb_rt_gdn sb_rt_gdn;
typedef struct sb_rt_gdn_scratch sb_rt_gdn_scratch;

/* sb_rt_gdn_new -- the state of one sequence of hybrid model m (borrowed:
 * it must outlive the state), at position 0 (zeros).
 * On success *out is owned by the caller: free with sb_rt_gdn_free().
 * Returns: SB_OK; SB_ERR_INVAL (m NULL or not hybrid); SB_ERR_NOMEM. */
int sb_rt_gdn_new(const sb_rt_model *m, sb_rt_gdn **out);

/* sb_rt_gdn_free -- NULL is a no-op. */
void sb_rt_gdn_free(sb_rt_gdn *g);

/* sb_rt_gdn_reset -- back to position 0 (the state before any token). */
void sb_rt_gdn_reset(sb_rt_gdn *g);

/* sb_rt_gdn_pos -- the position the state is at: how many tokens it has
 * taken in. */
size_t sb_rt_gdn_pos(const sb_rt_gdn *g);

/* sb_rt_gdn_bytes -- the size of model m's serialized state (above). */
size_t sb_rt_gdn_bytes(const sb_rt_model *m);

/* sb_rt_gdn_save -- serialize the state into buf (sb_rt_gdn_bytes long). */
void sb_rt_gdn_save(const sb_rt_gdn *g, void *buf);

/* sb_rt_gdn_load -- set the state from buf (sb_rt_gdn_bytes long, saved at
 * position pos); it is then at pos.
 * Returns: SB_OK; SB_ERR_INVAL (NULL). */
int sb_rt_gdn_load(sb_rt_gdn *g, const void *buf, size_t pos);

/* sb_rt_gdn_scratch_new -- working memory for layers of model m over
 * batches of up to n_batch tokens, on pools of up to n_threads threads.
 * On success *out is owned by the caller: free with sb_rt_gdn_scratch_free().
 * Returns: SB_OK; SB_ERR_INVAL; SB_ERR_NOMEM. */
int sb_rt_gdn_scratch_new(const sb_rt_model *m, uint32_t n_batch, unsigned n_threads,
                          sb_rt_gdn_scratch **out);

/* sb_rt_gdn_scratch_free -- NULL is a no-op. */
void sb_rt_gdn_scratch_free(sb_rt_gdn_scratch *s);

/* sb_rt_gdn_layer -- steps 1-6 above for recurrent layer l of the model
 * (m->layers[l].rec) over n <= n_batch tokens at positions [pos, pos + n),
 * pos = sb_rt_gdn_pos(g): y (n, dim) receives the layer's output for xb
 * (n, dim) (y may be xb: it is read first), and g's state of that layer
 * moves to pos + n. Once every recurrent layer ran, sb_rt_gdn_advance(g, n)
 * records the new position. */
void sb_rt_gdn_layer(sb_rt_gdn_scratch *s, sb_rt_pool *pool, uint32_t l, sb_rt_gdn *g,
                     const float *xb, size_t n, float *y);

/* sb_rt_gdn_advance -- the batch of n tokens went through every layer. */
void sb_rt_gdn_advance(sb_rt_gdn *g, size_t n);

#endif /* SB_RT_DELTANET_H */
