/* forward_multi.c -- several sequences through the model in shared passes
 * (forward.h, sb_rt_forward_multi; the pass itself is forward.c's). */
#include <stdlib.h>
#include <string.h>

#include "model/deltanet.h"
#include "model/forward.h"
#include "model/forward_pass.h"

/* Step 1 of a call: check a step and reserve its pages; returns its rc. */
static int prepare(const sb_rt_model *m, sb_rt_seq_step *st)
{
    if (st->n == 0)
        return SB_ERR_INVAL;
    for (size_t i = 0; i < st->n; i++)
        if (st->tokens[i] >= m->hp.n_vocab)
            return SB_ERR_INVAL;
    if (st->kv->n_tokens + st->n > st->kv->max_tokens)
        return SB_ERR_TOO_MANY_TOKENS;
    if (st->kv->gdn && sb_rt_gdn_pos(st->kv->gdn) != st->kv->n_tokens)
        return SB_ERR_NO_POINT; /* a hybrid sequence without its recurrent state */
    return sb_rt_kv_reserve(st->kv, st->n);
}

int sb_rt_forward_multi(sb_rt_ctx *c, sb_rt_seq_step *steps, size_t n_steps)
{
    if (!c || (n_steps && !steps))
        return SB_ERR_INVAL;
    for (size_t i = 0; i < n_steps; i++) {
        if (!steps[i].kv || !steps[i].tokens)
            return SB_ERR_INVAL;
        for (size_t k = 0; k < i; k++)
            if (steps[k].kv == steps[i].kv)
                return SB_ERR_INVAL;
    }
    const sb_rt_model *m = sb_rt_ctx_model(c);
    size_t nb = sb_rt_ctx_batch(c), V = m->hp.n_vocab;
    size_t max_seqs = n_steps < nb ? n_steps : nb;
    sb_rt_fw_seq *seqs = malloc((max_seqs ? max_seqs : 1) * sizeof *seqs);
    size_t *done = calloc(n_steps ? n_steps : 1, sizeof *done);
    size_t *owner = malloc(nb * sizeof *owner); /* step of each logits row */
    uint32_t *tok = malloc(nb * sizeof *tok);
    if (!seqs || !done || !owner || !tok) {
        free(seqs), free(done), free(owner), free(tok);
        return SB_ERR_NOMEM;
    }
    /* 1. check and reserve each sequence on its own */
    for (size_t i = 0; i < n_steps; i++)
        steps[i].rc = prepare(m, &steps[i]);
    /* 2. passes: fill up to nb rows, step after step, until every
     *    prepared step's rows have run */
    size_t next = 0; /* the first step with rows left */
    for (;;) {
        while (next < n_steps && (steps[next].rc != SB_OK || done[next] == steps[next].n))
            next++;
        if (next == n_steps)
            break;
        size_t rows = 0, n_seqs = 0, n_out = 0;
        size_t *out_rows = sb_rt_ctx_rows_scratch(c);
        for (size_t i = next; i < n_steps && rows < nb; i++) {
            sb_rt_seq_step *st = &steps[i];
            if (st->rc != SB_OK || done[i] == st->n)
                continue;
            size_t take = st->n - done[i] < nb - rows ? st->n - done[i] : nb - rows;
            seqs[n_seqs++] = (sb_rt_fw_seq){ st->kv, st->kv->n_tokens + done[i], rows, take };
            memcpy(tok + rows, st->tokens + done[i], take * sizeof *tok);
            rows += take;
            done[i] += take;
            if (done[i] == st->n && st->logits) {
                owner[n_out] = i;
                out_rows[n_out++] = rows - 1;
            }
        }
        float *lg = n_out ? sb_rt_ctx_logits_scratch(c, n_out) : NULL;
        if (n_out && !lg) { /* no scratch: these sequences fail, unchanged */
            for (size_t k = 0; k < n_out; k++)
                steps[owner[k]].rc = SB_ERR_NOMEM;
            n_out = 0;
        }
        sb_rt_forward_pass(c, seqs, n_seqs, tok, rows, out_rows, n_out, lg);
        for (size_t k = 0; k < n_out; k++)
            memcpy(steps[owner[k]].logits, lg + k * V, V * sizeof *lg);
    }
    /* 3. the sequences that ran take their tokens */
    for (size_t i = 0; i < n_steps; i++)
        if (steps[i].rc == SB_OK)
            steps[i].rc = sb_rt_kv_append_tokens(steps[i].kv, steps[i].tokens, steps[i].n);
    free(seqs), free(done), free(owner), free(tok);
    return SB_OK;
}
