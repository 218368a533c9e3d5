/* forward_pass.h -- one pass of the forward over the rows of one or more
 * sequences: what sb_rt_forward (one sequence, batch after batch) and
 * sb_rt_forward_multi (several sequences in one pass) share. Private to
 * runtime/model.
 *
 * The rows of a pass are laid out sequence after sequence:
 *
 *   row:  0 1 2 3 | 4 | 5 6 ...          (n rows <= the context's n_batch)
 *         seq 0     seq 1  seq 2
 *         pos0..    pos0   pos0..        (each continues its own KV)
 *
 * Every step of forward.h works on all rows at once (the matmuls treat each
 * row independently: kernels.h), except the two that look at a row's
 * sequence: its K and V go into its own sequence's pages at its position,
 * and its attention reads only its own sequence's pages. Attention tasks
 * never mix sequences, so a sequence's values are the same bits whatever
 * else shares the pass.
 *
 * Thread safety: as the context (forward.h).
 */
#ifndef SB_RT_FORWARD_PASS_H
#define SB_RT_FORWARD_PASS_H

#include <stddef.h>
#include <stdint.h>

#include "model/forward.h"

/* One sequence's rows in a pass. */
typedef struct sb_rt_fw_seq {
    const sb_rt_kv *kv;  /* borrowed; its pages for positions [pos0, pos0 + n)
                            present and writable (sb_rt_kv_reserve) */
    size_t pos0;         /* position of its first row (kv->n_tokens) */
    size_t row0, n;      /* its rows: [row0, row0 + n) of the pass, n >= 1 */
} sb_rt_fw_seq;

/* sb_rt_forward_pass -- run tokens[0, n) (row r is tokens[r]) through the
 * model: write each row's K and V into its sequence's pages and, for the
 * n_out rows out_rows[0, n_out), their logits into logits (n_out * n_vocab
 * floats, row out_rows[k] at logits + k * n_vocab). seqs cover rows 0..n-1
 * in order; n <= sb_rt_ctx_batch(c), n_out <= n. Token ids are checked by
 * the caller. The sequences' token lists are not touched: the caller
 * appends them (sb_rt_kv_append_tokens). */
void sb_rt_forward_pass(sb_rt_ctx *c, const sb_rt_fw_seq *seqs, size_t n_seqs,
                        const uint32_t *tokens, size_t n, const size_t *out_rows, size_t n_out,
                        float *logits);

/* sb_rt_ctx_model -- the model c runs (borrowed). */
const sb_rt_model *sb_rt_ctx_model(const sb_rt_ctx *c);

/* sb_rt_ctx_rows_scratch -- n_batch size_t the caller may use for out_rows
 * until its next call on c. */
size_t *sb_rt_ctx_rows_scratch(sb_rt_ctx *c);

/* sb_rt_ctx_logits_scratch -- rows * n_vocab floats owned by c, valid until
 * its next call on c; NULL when they cannot be had. */
float *sb_rt_ctx_logits_scratch(sb_rt_ctx *c, size_t rows);

#endif /* SB_RT_FORWARD_PASS_H */
