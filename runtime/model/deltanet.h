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
 * ---- Chunks anchored at absolute positions (how step 4 is computed) -------
 *
 * Step 4 is computed in chunks of C = SB_RT_GDN_CHUNK positions, anchored
 * at absolute positions: chunk c covers [c C, (c + 1) C), whatever the
 * batches. Within a chunk, with S_0 the state at the chunk's start (kept
 * from the last chunk's end), local rows i = 0, 1, ... and
 * G_i = g_0 + ... + g_i (so gamma_i = exp(G_i) is the decay since the
 * chunk's start), unrolling the recurrence gives
 *   S_i   = gamma_i S_0 + sum_{j <= i} exp(G_i - G_j) delta_j k_j^T
 *   delta_i = beta_i (v_i - gamma_i S_0 k_i)
 *             - sum_{j < i} beta_i exp(G_i - G_j) (k_i . k_j) delta_j
 *   o_i   = gamma_i S_0 q_i + sum_{j <= i} exp(G_i - G_j) (q_i . k_j) delta_j
 *   S_C   = gamma_{C-1} S_0 + sum_{j < C} exp(G_{C-1} - G_j) delta_j k_j^T
 * The delta_i are the UT transform of the chunk (delta = (I + A)^-1 b with
 * A the strictly lower beta_i exp(G_i - G_j) k_i . k_j and b the
 * right-hand side above: the WY representation's U - W S_0^T), solved by
 * forward substitution; the mixing of the chunk's rows is matrix work
 * (S_0 against every k and q of the chunk, the chunk's Gram matrices, one
 * rank-C update of S per chunk) instead of C rank-1 updates.
 *
 * Row i needs only S_0, its own inputs and rows j < i (k_j, delta_j,
 * G_j), and every value is computed by the same operations in the same
 * order whether the chunk's rows arrive in one batch (prefill), a few at a
 * time (a prompt that ends mid-chunk, continued by the next turn) or one
 * by one (decode); S_0 moves on only when row C - 1 is done. So the state
 * after any position, and every output, is the same bits however the
 * tokens were batched, and a sequence resumed from a boundary (the state
 * at its position, with its open chunk's rows) continues exactly as a cold
 * prefill of the whole prompt would.
 *
 * Order of operations (each dot product and axpy as kernels.h states,
 * exp being libm's expf on every ISA): G_i = G_{i-1} + g_i (G_{-1} = 0);
 * delta_i = beta_i * (v_i - expf(G_i) * (S_0 k_i)), then for j = 0 .. i-1
 * delta_i += -(beta_i * expf(G_i - G_j) * (k_i . k_j)) * delta_j; o_i =
 * expf(G_i) * (S_0 q_i), then for j = 0 .. i, o_i += (expf(G_i - G_j) *
 * (q_i . k_j)) * delta_j; S_C's row a = expf(G_{C-1}) * S_0's row a, then
 * for j = 0 .. C-1, += (expf(G_{C-1} - G_j) * delta_j[a]) * k_j.
 *
 * ---- The state of one sequence (sb_rt_gdn) ---------------------------------
 *
 * At position p, with r = p mod C rows of the open chunk: for each
 * recurrent layer (in layer order), S_0 of every value head (the state at
 * p - r), the conv window (the last d_conv - 1 rows of `mixed`, oldest
 * first; zeros before position 0) and the open chunk's rows. Its
 * serialized form, the bytes a boundary keeps in the bank (boundary.h), is
 * exactly that, little-endian float32, C row slots per head of which the
 * first r are used and the rest are zeros:
 *
 *   per recurrent layer l = 0 .. n_rec - 1, at offset l * layer_bytes:
 *     OFFSET              SIZE                      FIELD
 *     0                   4 n_v d d                 S_0, head by head, row-major
 *     4 n_v d d           4 (d_conv - 1) conv_dim   conv window, oldest row first
 *     + (d_conv - 1) cd   4 n_k C d                 k_j, key head by key head
 *     + n_k C d           4 n_v C d                 delta_j, value head by head
 *     + n_v C d           4 n_v C                   G_j, value head by head
 *
 * (cd = conv_dim). A boundary on the chunk grid (r = 0) has no rows: the
 * bank's boundaries every 256 tokens are such.
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
#define SB_RT_GDN_FORMAT 2u

/* C: the positions of one chunk of the scan (above); boundaries on the
 * grid of multiples of C carry no open rows. */
#define SB_RT_GDN_CHUNK 16u

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
 * Returns: SB_OK; SB_ERR_INVAL (NULL); SB_ERR_FORMAT (a row slot past
 * pos mod C is not zero: saved at another position; g unchanged). */
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
