/* compute.h -- what the batching module (batch.h) computes with: one
 * turn per slot, stepped through the states of a runtime session's turn
 * (session.h, "a turn, step by step"), and forward passes that run the
 * rows every slot planned. Two implementations: the builtin runtime's
 * (sb_rt_compute_rt below: runtime sessions over one sb_rt_ctx) and
 * llama.cpp's (llama/compute_llama.h: sequences of one llama_context,
 * the bank through the llama.cpp connector). The batching module knows
 * only this interface; sampling, text and stop strings stay its own.
 *
 * A slot's life, on the engine thread:
 *   open(slot, ns) -> begin -> { plan, (pass), ran, logits, push }* ->
 *   end -> close          (close alone after an open whose begin failed
 *                          or never came)
 * plan adds the slot's next rows (at most max_rows) to the pass being
 * built; pass runs every planned row in one go; ran then tells each
 * planned slot what became of its rows (and moves its state on: a
 * finished prompt is committed to the bank, a pushed token leaves its
 * logits ready). logits is valid in SAMPLE until the slot's next call.
 *
 * Thread safety: one engine thread makes every call.
 */
#ifndef SB_RT_COMPUTE_H
#define SB_RT_COMPUTE_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"
#include "session/session.h"

typedef struct sb_rt_compute_ops {
    /* a unit for slot's turn over namespace ns (borrowed: it outlives the
     * turn). Returns: SB_OK; SB_ERR_INVAL (ns of another model or shape);
     * SB_ERR_NOMEM. */
    int (*open)(void *c, size_t slot, sb_ns *ns);
    /* free what open made (after end, or when begin failed). */
    void (*close)(void *c, size_t slot);
    /* match the prompt, restore its prefix (session.h's
     * sb_rt_session_begin, with the same codes); rep receives the report
     * so far. */
    int (*begin)(void *c, size_t slot, const uint32_t *prompt, size_t n, size_t max_gen,
                 sb_rt_turn *rep);
    sb_rt_turn_state (*state)(void *c, size_t slot);
    const sb_rt_turn *(*report)(void *c, size_t slot);
    /* add up to max_rows of the slot's next rows to the pass being built.
     * Returns: the rows (0 in SAMPLE or NONE). */
    size_t (*plan)(void *c, size_t slot, size_t max_rows);
    /* run every planned row. */
    void (*pass)(void *c);
    /* what became of the slot's planned rows: they ran, or they did not
     * and the slot plans them again (a context whose cells its sequences
     * share was full). Returns: SB_OK; SB_ERR_TOO_MANY_TOKENS (no cells
     * for the turn: in RUN it ends as at its context's end, finish length;
     * in PREFILL it fails); another error (the slot's turn must end). */
    int (*ran)(void *c, size_t slot);
    /* in SAMPLE: the last position's logits (n_vocab floats). */
    const float *(*logits)(void *c, size_t slot);
    /* in SAMPLE: id runs next (RUN). Returns: SB_OK; SB_ERR_TOO_MANY_TOKENS
     * (the context is full: end the turn); SB_ERR_INVAL. */
    int (*push)(void *c, size_t slot, uint32_t id);
    /* commit what was computed (sb_rt_session_end); rep receives the whole
     * report. Returns: SB_OK; an error (the tokens are not the turn's). */
    int (*end)(void *c, size_t slot, sb_rt_turn *rep);
    /* after end: the sequence committed (prompt + the tokens that ran),
     * borrowed until close. */
    const uint32_t *(*tokens)(void *c, size_t slot, size_t *n);
    unsigned (*threads)(void *c);
    void (*free)(void *c);
    /* may be NULL: how many leading tokens of prompt[0, n) in namespace ns
     * free slot `slot` still holds from its last turn (a job goes to the
     * free slot that holds the most) */
    size_t (*affinity)(void *c, size_t slot, sb_ns *ns, const uint32_t *prompt, size_t n);
} sb_rt_compute_ops;

/* A compute: its operations, its state, and the logits' width. */
typedef struct sb_rt_compute {
    const sb_rt_compute_ops *ops;
    void *c;
    uint32_t n_vocab;
} sb_rt_compute;

/* sb_rt_compute_rt -- the builtin runtime's compute for `slots` slots over
 * model m (borrowed): runtime sessions (disk_use as session.h says),
 * forward passes over one context of `threads` threads (0: every CPU) and
 * `batch` rows, the restore-or-recompute rates learned by each turn handed
 * to the next. Returns: SB_OK (*out filled; out->ops->free frees it);
 * SB_ERR_NOMEM; the errors of sb_rt_ctx_new. */
int sb_rt_compute_rt(const sb_rt_model *m, size_t slots, unsigned threads, uint32_t batch,
                     sb_rt_disk_use disk_use, sb_rt_compute *out);

#endif /* SB_RT_COMPUTE_H */
