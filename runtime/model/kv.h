/* kv.h -- a sequence's KV cache: a page table over snapbank pages (and, for
 * a hybrid model, its recurrent layers' state).
 *
 * The bank's layout for a model has 2 * n_layers sequence tensors, K then V
 * of each layer, each kv_dim = n_kv_heads * head_dim F16 values per token.
 * A hybrid model (qwen35) has them for its full-attention layers only
 * (sb_rt_model_kv_layers; a layer's `slot` is its place), and its recurrent
 * layers' state is a separate object (deltanet.h) the sequence carries.
 * A page holds page_tokens tokens of every tensor, tensor-major (snapbank.h,
 * "Page layout"), so the K row of position p in layer l is
 *
 *   page p / page_tokens, at sb_ns_tensor_offset(ns, 2l)
 *                            + (p % page_tokens) * kv_dim * 2 bytes
 *
 *   page:  [K0: pt x kv_dim f16][V0: pt x kv_dim f16][K1 ...] ... [V(L-1)]
 *
 * A sequence of n tokens owns ceil(n / page_tokens) pages and nothing else
 * holds its KV. Pages come from the bank (sb_ns_page_alloc) or from a match
 * (sb_match_pages: restored by reference, no copy); a page that is shared or
 * committed is made private (sb_page_writable) before a token is appended
 * to it. The table commits itself with sb_rt_kv_commit.
 *
 * Thread safety: one sequence is used by one thread at a time (the forward
 * pass's pool threads read it while the owner waits).
 */
#ifndef SB_RT_KV_H
#define SB_RT_KV_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"
#include "snapbank.h"

#define SB_RT_KV_FORMAT 1u      /* page contents: K/V F16 per layer as above */

typedef struct sb_rt_kv {
    sb_ns *ns;                 /* borrowed: outlives the table */
    uint32_t page_tokens;
    uint32_t n_layers;
    uint32_t kv_dim;           /* F16 values per token per tensor */
    size_t *off;               /* (2 * n_layers) tensor offsets in a page, owned */
    sb_page **pages;           /* (n_pages) one reference each, owned */
    size_t n_pages, cap;
    uint32_t *tokens;          /* (n_tokens) the sequence so far, owned */
    size_t n_tokens, tok_cap;  /* positions whose K and V are written */
    size_t max_tokens;         /* the model's context length */
    struct sb_rt_gdn *gdn;     /* hybrid models: the recurrent layers' state,
                                  owned; it must be at n_tokens for a forward
                                  pass (a match's adopted pages come without
                                  it: the caller loads a boundary). NULL for
                                  the other models */
} sb_rt_kv;

/* sb_rt_kv_layout -- the bank layout of model m's KV with page_tokens per
 * page: fills layout (its bytes_per_token points into bpt, which needs
 * 2 * n_layers entries, and model_id at m->id). Its point state is the
 * logits of the last position, n_vocab float32 (session.h); it is optional
 * (no SB_LAYOUT_POINT_REQUIRED). A hybrid model's point state is a
 * boundary (boundary.h), required. Returns: SB_OK;
 * SB_ERR_INVAL (page_tokens 0 or too many layers). */
int sb_rt_kv_layout(const sb_rt_model *m, uint32_t page_tokens, uint32_t *bpt,
                    sb_layout *layout);

/* sb_rt_kv_init -- an empty table for model m over namespace ns (opened
 * with sb_rt_kv_layout's layout), with a recurrent state at position 0 for
 * a hybrid model. Returns: SB_OK; SB_ERR_INVAL (ns does not have that
 * layout's shape); SB_ERR_NOMEM. On failure kv is empty and sb_rt_kv_fini
 * may still be called. */
int sb_rt_kv_init(sb_rt_kv *kv, const sb_rt_model *m, sb_ns *ns);

/* sb_rt_kv_prefault -- have the bank's pool hold, mapped and faulted in,
 * the pages of one full context of model m in ns (sb_ns_prefault), as an
 * engine allocates its KV cache when it starts: a restore or a prefill
 * then takes pages without page faults. Within the RAM budget's room;
 * nothing is evicted. *n_ready (may be NULL) receives the spare pages.
 * Returns: SB_OK; SB_ERR_INVAL; SB_ERR_NOMEM (the system refused: pages
 * are then faulted in as they are used). */
int sb_rt_kv_prefault(const sb_rt_model *m, sb_ns *ns, size_t *n_ready);

/* sb_rt_kv_fini -- drop every page reference and free the table. */
void sb_rt_kv_fini(sb_rt_kv *kv);

/* sb_rt_kv_reset -- forget the sequence (drops the page references; the
 * recurrent state goes back to position 0). */
void sb_rt_kv_reset(sb_rt_kv *kv);

/* sb_rt_kv_reserve -- make the pages for positions [n_tokens, n_tokens + n)
 * present and writable: fresh pages from the bank, and a private copy of a
 * shared tail page; and room for n more tokens, so that
 * sb_rt_kv_append_tokens(kv, ..., n) cannot fail. Returns: SB_OK;
 * SB_ERR_TOO_MANY_TOKENS (past the model's context); SB_ERR_BUDGET,
 * SB_ERR_NOMEM (the table is unchanged except for pages added, which stay
 * for a later call). */
int sb_rt_kv_reserve(sb_rt_kv *kv, size_t n);

/* sb_rt_kv_row -- the F16 K (which 0) or V (which 1) row of layer l at
 * position pos (whose page must be present). */
static inline uint16_t *sb_rt_kv_row(const sb_rt_kv *kv, uint32_t l, int which, size_t pos)
{
    uint8_t *page = (uint8_t *)sb_page_data(kv->pages[pos / kv->page_tokens]);
    return (uint16_t *)(void *)(page + kv->off[2 * l + (uint32_t)which] +
                                (pos % kv->page_tokens) * kv->kv_dim * 2u);
}

/* sb_rt_kv_append_tokens -- record tokens[0, n) as the sequence's next
 * positions (after the forward pass wrote their K and V). Returns: SB_OK;
 * SB_ERR_NOMEM (nothing recorded). */
int sb_rt_kv_append_tokens(sb_rt_kv *kv, const uint32_t *tokens, size_t n);

/* sb_rt_kv_adopt -- start the sequence from a match: references to the
 * match's pages covering its first n tokens (tokens[0, n)), restored from
 * disk by the bank where needed. The table must be empty. A hybrid model's
 * recurrent state is not set: load the boundary at n into kv->gdn before
 * the next forward pass. Returns: SB_OK;
 * SB_ERR_RANGE (n beyond the match); the errors of sb_match_pages
 * (SB_ERR_CORRUPT / SB_ERR_IO: the match shrank, the table stays empty). */
int sb_rt_kv_adopt(sb_rt_kv *kv, sb_match *m, const uint32_t *tokens, size_t n);

/* sb_rt_kv_commit -- index the sequence's tokens with its pages (zero-copy
 * sb_ns_commit_ex; pages the bank already holds are deduplicated into the
 * table), with point (the layout's point state at n_tokens) when not NULL.
 * oc (may be NULL) receives what the disk tier made of it (sb_write_outcome).
 * Returns: SB_ERR_NO_TOKENS (nothing to commit); the errors of sb_ns_commit. */
int sb_rt_kv_commit(sb_rt_kv *kv, const void *point, sb_write_outcome *oc);

#endif /* SB_RT_KV_H */
