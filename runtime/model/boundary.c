/* boundary.c -- the boundary point state (boundary.h). */
#include "model/boundary.h"

#include <string.h>

#include "model/deltanet.h"
#include "core/le.h"

#define MAGIC "SBBOUND"

size_t sb_rt_boundary_bytes(const sb_rt_model *m)
{
    if (!m || !m->hp.n_rec)
        return 0;
    return SB_RT_BOUNDARY_HEAD + sb_rt_gdn_bytes(m) + (size_t)m->hp.n_vocab * sizeof(float);
}

void sb_rt_boundary_encode(const sb_rt_model *m, const sb_rt_gdn *g, const float *logits,
                           void *out)
{
    uint8_t *p = out;
    size_t G = sb_rt_gdn_bytes(m), V = (size_t)m->hp.n_vocab * sizeof(float);
    memset(p, 0, SB_RT_BOUNDARY_HEAD);
    memcpy(p, MAGIC, 8);
    sb_rt_put_le32(p + 8, SB_RT_BOUNDARY_VERSION);
    sb_rt_put_le32(p + 12, logits ? SB_RT_BOUNDARY_LOGITS : 0);
    sb_rt_put_le64(p + 16, sb_rt_gdn_pos(g));
    sb_rt_put_le64(p + 24, G);
    sb_rt_gdn_save(g, p + SB_RT_BOUNDARY_HEAD);
    if (logits)
        memcpy(p + SB_RT_BOUNDARY_HEAD + G, logits, V);
    else
        memset(p + SB_RT_BOUNDARY_HEAD + G, 0, V);
}

int sb_rt_boundary_decode(const sb_rt_model *m, sb_rt_gdn *g, const void *pv, size_t pos,
                          float *logits, bool *has_logits)
{
    const uint8_t *p = pv;
    size_t G = sb_rt_gdn_bytes(m);
    uint32_t flags = sb_rt_get_le32(p + 12);
    if (memcmp(p, MAGIC, 8) || sb_rt_get_le32(p + 8) != SB_RT_BOUNDARY_VERSION ||
        (flags & ~SB_RT_BOUNDARY_LOGITS) || sb_rt_get_le64(p + 16) != pos || sb_rt_get_le64(p + 24) != G)
        return SB_ERR_FORMAT;
    int rc = sb_rt_gdn_load(g, p + SB_RT_BOUNDARY_HEAD, pos);
    if (rc != SB_OK)
        return rc;
    if (has_logits)
        *has_logits = flags & SB_RT_BOUNDARY_LOGITS;
    if (logits && (flags & SB_RT_BOUNDARY_LOGITS))
        memcpy(logits, p + SB_RT_BOUNDARY_HEAD + G, (size_t)m->hp.n_vocab * sizeof(float));
    return SB_OK;
}

size_t sb_rt_boundary_marks(size_t grid, size_t keep, size_t from, size_t n, size_t *at)
{
    if (!grid || !keep || n <= from + 1)
        return 0;
    size_t first = from / grid + 1, last = (n - 1) / grid; /* in (from, n) */
    if (last < first)
        return 0;
    size_t cnt = last - first + 1, k = 0;
    if (cnt <= keep && cnt <= 64) { /* they all fit */
        for (size_t g = first; g <= last; g++)
            at[k++] = g * grid;
        return k;
    }
    /* j counts back from the tail: j = 1 is grid point `last` */
    for (size_t j = 1; j <= cnt && k < keep && k < 64; j = j == 1 ? 2 : j * 2) {
        if (j == 1) {
            at[k++] = last * grid;
            if (cnt > 1 && k < keep)
                at[k++] = first * grid; /* the oldest */
            continue;
        }
        if (j < cnt) /* j == cnt is the oldest, kept already */
            at[k++] = (last + 1 - j) * grid;
    }
    /* ascending */
    for (size_t i = 1; i < k; i++)
        for (size_t m = i; m > 0 && at[m - 1] > at[m]; m--) {
            size_t t = at[m];
            at[m] = at[m - 1], at[m - 1] = t;
        }
    return k;
}
