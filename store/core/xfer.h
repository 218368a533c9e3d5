/* xfer.h -- copies between the bank's pages and an engine's own memory
 * described by block tables (sb_block_table, snapbank.h): the gather of
 * sb_ns_put_blocks and the scatter of sb_match_restore_blocks, one copy
 * per run of token slices that is contiguous on both sides.
 *
 * A transfer is the positions [from, to) of the tensors [t0, t0 + nt) of a
 * namespace; tab[i] places tensor t0 + i. A page of region r holds the
 * positions [r * page_tokens, (r + 1) * page_tokens); the functions below
 * copy the part of a page's positions that falls in [from, to).
 *
 * Thread safety: pure functions of their arguments; the caller keeps the
 * page and the engine's memory stable while they run.
 */
#ifndef SB_XFER_H
#define SB_XFER_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

typedef struct sb_xfer {
    const sb_ns *ns;
    size_t from, to;              /* positions [from, to) */
    uint32_t t0, nt;              /* tensors [t0, t0 + nt) */
    const sb_block_table *tab;    /* (nt) */
} sb_xfer;

/* sb_xfer_check -- the tables of tensors [t0, t0 + nt) of ns for positions
 * [from, to): every table has a base, a token stride of 0 or at least its
 * tensor's bytes per token, and a first position at most from.
 * Returns: SB_OK; SB_ERR_INVAL (a NULL table or base, a stride too small,
 * tensors out of range); SB_ERR_RANGE (a table starting after from). */
int sb_xfer_check(const sb_ns *ns, size_t from, uint32_t t0, uint32_t nt,
                  const sb_block_table *tab);

/* sb_xfer_out -- copy page r's slices in [x->from, x->to) from its data
 * page into the engine's memory. */
void sb_xfer_out(const sb_xfer *x, size_t r, const uint8_t *page);

/* sb_xfer_in -- copy the engine's slices of region r in [x->from, x->to)
 * into page r's data page (the rest of the page is left as it is). */
void sb_xfer_in(const sb_xfer *x, size_t r, uint8_t *page);

#endif /* SB_XFER_H */
