/* xfer.c -- copies between pages and block tables (xfer.h). */
#include <string.h>

#include "xfer.h"

int sb_xfer_check(const sb_ns *ns, size_t from, uint32_t t0, uint32_t nt,
                  const sb_block_table *tab)
{
    if (!tab || nt == 0 || t0 > ns->n_tensors || nt > ns->n_tensors - t0)
        return SB_ERR_INVAL;
    for (uint32_t i = 0; i < nt; i++) {
        const sb_block_table *b = &tab[i];
        if (!b->base || (b->token_stride && b->token_stride < ns->bpt[t0 + i]))
            return SB_ERR_INVAL;
        if (b->first_pos > from)
            return SB_ERR_RANGE;
    }
    return SB_OK;
}

/* Where position p of table b is (p >= b->first_pos), and how many
 * positions from p on are contiguous there (up to the end of its block). */
static uint8_t *place(const sb_block_table *b, size_t p, size_t stride, size_t *run)
{
    size_t q = p - b->first_pos;
    if (!b->block_tokens) { /* one contiguous buffer */
        *run = SIZE_MAX;
        return (uint8_t *)b->base + q * stride;
    }
    size_t blk = q / b->block_tokens, off = q % b->block_tokens;
    size_t id = b->block_ids ? b->block_ids[blk] : blk;
    *run = b->block_tokens - off;
    return (uint8_t *)b->base + id * b->block_stride + off * stride;
}

/* Copy region r's positions in [from, to) of every tensor of x, out of
 * page out (in NULL) or into page in (out NULL). */
static void copy(const sb_xfer *x, size_t r, const uint8_t *out, uint8_t *in)
{
    const sb_ns *ns = x->ns;
    size_t lo = r * ns->page_tokens, hi = lo + ns->page_tokens;
    if (lo < x->from)
        lo = x->from;
    if (hi > x->to)
        hi = x->to;
    if (lo >= hi)
        return;
    for (uint32_t i = 0; i < x->nt; i++) {
        const sb_block_table *b = &x->tab[i];
        uint32_t t = x->t0 + i;
        size_t bpt = ns->bpt[t], stride = b->token_stride ? b->token_stride : bpt;
        size_t at = ns->tensor_off[t] + (lo - r * ns->page_tokens) * bpt;
        for (size_t p = lo; p < hi;) {
            size_t run;
            uint8_t *mem = place(b, p, stride, &run);
            if (run > hi - p)
                run = hi - p;
            if (stride == bpt) {
                if (in)
                    memcpy(in + at, mem, run * bpt);
                else
                    memcpy(mem, out + at, run * bpt);
            } else {
                for (size_t j = 0; j < run; j++) {
                    if (in)
                        memcpy(in + at + j * bpt, mem + j * stride, bpt);
                    else
                        memcpy(mem + j * stride, out + at + j * bpt, bpt);
                }
            }
            at += run * bpt;
            p += run;
        }
    }
}

void sb_xfer_out(const sb_xfer *x, size_t r, const uint8_t *page)
{
    copy(x, r, page, NULL);
}

void sb_xfer_in(const sb_xfer *x, size_t r, uint8_t *page)
{
    copy(x, r, NULL, page);
}
