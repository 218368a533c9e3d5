/* boundary.h -- a hybrid model's boundaries: the point states the bank
 * keeps for a sequence at chosen positions, from which a turn resumes the
 * recurrent layers exactly.
 *
 * A recurrent layer's state cannot be cut back to an earlier token: it is
 * a fixed-size summary of every token before it. So a prompt that shares
 * only part of a stored sequence can resume from the bank at a position L
 * only if the recurrent state at exactly L was kept: a boundary. Its K/V
 * pages (full-attention layers) come from the bank's pages as for any
 * model; the boundary is the bank's point state at L (snapbank.h), in the
 * format below, which the layout marks required (SB_LAYOUT_POINT_REQUIRED):
 * a match lands on the longest prefix with one.
 *
 * ---- The point state (little-endian) ----------------------------------------
 *
 *   OFFSET   SIZE        FIELD
 *   0        8           magic "SBBOUND\0"
 *   8        4           version (SB_RT_BOUNDARY_VERSION = 1)
 *   12       4           flags: bit 0 (SB_RT_BOUNDARY_LOGITS) logits present;
 *                        the other bits 0
 *   16       8           position L: the tokens the state has taken in
 *   24       8           state bytes G (sb_rt_gdn_bytes of the model)
 *   32       32          reserved, 0
 *   64       G           the recurrent layers' state at L (deltanet.h)
 *   64 + G   4 n_vocab   float32 logits of position L - 1 when bit 0 is set
 *                        (a boundary at the end of a prompt: asking the same
 *                        prompt again needs no forward pass), else zeros
 *
 * Its size is fixed per model (sb_rt_boundary_bytes): the layout's
 * point_bytes. The model identity includes the version (model.c), so a
 * bank never holds boundaries of two versions in one namespace.
 *
 * Thread safety: pure functions of their arguments.
 */
#ifndef SB_RT_BOUNDARY_H
#define SB_RT_BOUNDARY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/model.h"

#define SB_RT_BOUNDARY_VERSION 1u
#define SB_RT_BOUNDARY_LOGITS 1u   /* flags: logits present */
#define SB_RT_BOUNDARY_HEAD 64u    /* bytes before the state */

struct sb_rt_gdn;

/* sb_rt_boundary_bytes -- the point state's size for hybrid model m (0 for
 * a model without recurrent layers). */
size_t sb_rt_boundary_bytes(const sb_rt_model *m);

/* sb_rt_boundary_encode -- the point state of g (at its position) into out
 * (sb_rt_boundary_bytes long), with the logits of its last position when
 * logits is not NULL (n_vocab floats). */
void sb_rt_boundary_encode(const sb_rt_model *m, const struct sb_rt_gdn *g, const float *logits,
                           void *out);

/* sb_rt_boundary_decode -- set g from the point state p (sb_rt_boundary_bytes
 * long) recorded at position pos; when logits is not NULL and the state
 * carries them, copy them there (n_vocab floats) and set *has_logits.
 * Returns: SB_OK; SB_ERR_FORMAT (not a boundary of this version and model
 * size, another position, unknown flags: g unchanged). */
int sb_rt_boundary_decode(const sb_rt_model *m, struct sb_rt_gdn *g, const void *p, size_t pos,
                          float *logits, bool *has_logits);

/* sb_rt_boundary_marks -- the grid positions a hybrid prefill of the
 * positions (from, n) records as boundaries (session.h's policy: the
 * multiples of grid in (from, n); when more than keep of them, or more
 * than 64, counted back from the prompt's end -- j = 1 the last -- j = 1,
 * then the oldest, then j = 2, 4, 8, ... until keep), ascending, into at
 * (room for min(keep, 64)); returns the count. grid 0 or keep 0: none. */
size_t sb_rt_boundary_marks(size_t grid, size_t keep, size_t from, size_t n, size_t *at);

#endif /* SB_RT_BOUNDARY_H */
