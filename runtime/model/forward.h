/* forward.h -- the forward pass of a llama-family model over a paged KV
 * cache (kv.h).
 *
 * One call runs n new tokens at positions [kv->n_tokens, kv->n_tokens + n)
 * as one batch (matrix-matrix work; long inputs are cut into batches of the
 * context's n_batch), writes their K and V into the sequence's pages, and
 * gives the logits of the last position (or of every position).
 *
 * Determinism: every value a position computes depends only on the model,
 * the tokens up to it and the K/V rows stored for them, never on how the
 * positions were batched, on the thread count, or on whether the earlier
 * rows were computed now or restored from the bank. The kernels keep each
 * output element's operation order fixed (kernels.h), attention reads the
 * stored F16 rows even for the current batch, and RoPE angles depend on
 * the position alone. So a warm restore continues bit-identically to a
 * cold prefill. A hybrid model's recurrent layers keep that promise too
 * (deltanet.h): their state at a position does not depend on how the
 * tokens before it were batched, and a sequence resumes from the state a
 * boundary kept.
 *
 * Steps for each layer (x: the residual stream, (n, dim); q is (n, q_dim),
 * k and v (n, kv_dim), model.h):
 *   1. xb = rmsnorm(x) * attn_norm;  q, k, v = xb . Wq, Wk, Wv (+ biases,
 *      where the file has them)
 *      qwen35: attn_q gives each head's query and its gate (model.h)
 *   1b. qwen3, qwen35: each head of q and of k = rmsnorm(head) *
 *      attn_q_norm / attn_k_norm (head_dim weights, the model's epsilon)
 *   2. RoPE on q and k at each position: pair j of a head turned by
 *      pos * theta_j (model.h's table: rope_freqs and scaling applied),
 *      cos and sin times the model's magnitude scale; adjacent pairs for
 *      llama, halves of the first n_rot dimensions for qwen2, qwen3 and
 *      qwen35 (n_rot = head_dim but for qwen35); k and v stored as F16 in
 *      the pages
 *   3. per position and head: scores over positions 0..p (scaled by
 *      1/sqrt(head_dim)), softmax, weighted sum of V rows  (GQA: head h
 *      reads KV head h / (n_heads / n_kv_heads)); one task takes up to 8
 *      positions and the query heads of one KV head, so each K and V row
 *      is read once for all of them
 *   3b. qwen35: each head's output times sigmoid(its gate)
 *   4. x += att . Wo  (att is (n, q_dim))
 *   5. xb = rmsnorm(x) * ffn_norm;  x += (silu(xb . Wgate) * (xb . Wup)) . Wdown
 * then logits = rmsnorm(x) * output_norm . Woutput. A hybrid model's
 * recurrent layer does 1 (the norm), then x += GatedDeltaNet(xb)
 * (deltanet.h) in place of 1-4, then 5 (its norm is post_attention_norm).
 *
 * Several sequences at once (sb_rt_forward_multi): the rows of many
 * sequences -- the next token of each of a server's running requests, a
 * chunk of a new prompt -- go through the model in one pass, so each weight
 * matrix is read once for all of them. Only K/V writes and attention look
 * at which sequence a row belongs to, and attention never mixes sequences:
 * a sequence's logits are the same bits whether it runs alone or beside
 * others (forward_pass.h).
 *
 * Thread safety: a context is used by one thread at a time; it runs its
 * work on its own pool.
 */
#ifndef SB_RT_FORWARD_H
#define SB_RT_FORWARD_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/pool.h"
#include "model/kv.h"
#include "model/model.h"

typedef struct sb_rt_ctx sb_rt_ctx;

/* sb_rt_ctx_new -- scratch for forward passes of model m (borrowed: it
 * must outlive the context), batches of up to n_batch tokens (0: 512), on
 * n_threads threads (0: every online CPU).
 * On success *out is owned by the caller: free with sb_rt_ctx_free().
 * Returns: SB_OK; SB_ERR_INVAL; SB_ERR_NOMEM. */
int sb_rt_ctx_new(const sb_rt_model *m, unsigned n_threads, uint32_t n_batch, sb_rt_ctx **out);

/* sb_rt_ctx_free -- NULL is a no-op. */
void sb_rt_ctx_free(sb_rt_ctx *c);

/* sb_rt_ctx_threads -- the threads the context runs on. */
unsigned sb_rt_ctx_threads(const sb_rt_ctx *c);

/* sb_rt_ctx_batch -- the most rows one pass runs (n_batch); 0 for NULL. */
uint32_t sb_rt_ctx_batch(const sb_rt_ctx *c);

/* Which logits a forward pass returns. */
typedef enum sb_rt_logits {
    SB_RT_LOGITS_NONE = 0,     /* none (prefill whose output is not needed) */
    SB_RT_LOGITS_LAST = 1,     /* the last position's: n_vocab floats */
    SB_RT_LOGITS_ALL = 2,      /* every position's: n * n_vocab floats */
} sb_rt_logits;

/* sb_rt_forward -- run tokens[0, n) after the sequence in kv, append them to
 * it, and write the logits asked for into logits (caller-owned, sized as
 * above; may be NULL with SB_RT_LOGITS_NONE).
 * Returns: SB_OK; SB_ERR_INVAL (NULL argument, n 0, a token id >= n_vocab);
 * SB_ERR_TOO_MANY_TOKENS (past the model's context); SB_ERR_NO_POINT (a
 * hybrid model's recurrent state is not at the sequence's end: pages were
 * adopted and no boundary loaded); SB_ERR_BUDGET,
 * SB_ERR_NOMEM (no page for the KV). On failure the sequence is unchanged:
 * positions of a batch that failed are not appended (pages reserved for
 * them stay in the table, unused). With several batches, those before the
 * failing one are appended. */
int sb_rt_forward(sb_rt_ctx *c, sb_rt_kv *kv, const uint32_t *tokens, size_t n,
                  sb_rt_logits which, float *logits);

/* One sequence's part of sb_rt_forward_multi. */
typedef struct sb_rt_seq_step {
    sb_rt_kv *kv;             /* the sequence (borrowed) */
    const uint32_t *tokens;   /* its next n tokens (borrowed) */
    size_t n;
    float *logits;            /* receives the logits of its last new position
                                 (n_vocab floats); NULL: not wanted */
    int rc;                   /* out: what became of this sequence (below) */
} sb_rt_seq_step;

/* sb_rt_forward_multi -- run steps[i].tokens after the sequence in
 * steps[i].kv, for every i, all in the same passes: the rows of all the
 * sequences are packed into passes of up to n_batch rows (a sequence's
 * rows may continue in the next pass). Each sequence's K/V rows and logits
 * are bit-identical to running its tokens alone with sb_rt_forward.
 * Each step's rc: SB_OK (appended, logits written); SB_ERR_INVAL (n 0, a
 * token id >= n_vocab); SB_ERR_TOO_MANY_TOKENS (past the model's
 * context); SB_ERR_NO_POINT (a hybrid sequence whose recurrent state is
 * not at its end); SB_ERR_BUDGET, SB_ERR_NOMEM (no page for its KV). A step
 * that failed left its sequence unchanged (pages reserved for it stay in
 * the table, unused) and did not stop the others -- except a hybrid
 * sequence whose step failed with SB_ERR_NOMEM for its logits after its
 * rows ran: its recurrent state moved on, so its sequence must be reset.
 * Returns: SB_OK (the steps ran: see each rc); SB_ERR_INVAL (c or steps
 * NULL, a step with a NULL kv or tokens, one kv in two steps: nothing
 * ran); SB_ERR_NOMEM (scratch: nothing ran). */
int sb_rt_forward_multi(sb_rt_ctx *c, sb_rt_seq_step *steps, size_t n_steps);

#endif /* SB_RT_FORWARD_H */
