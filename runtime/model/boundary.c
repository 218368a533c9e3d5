/* boundary.c -- the boundary point state (boundary.h). */
#include "model/boundary.h"

#include <string.h>

#include "model/deltanet.h"

#define MAGIC "SBBOUND"

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

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
    put32(p + 8, SB_RT_BOUNDARY_VERSION);
    put32(p + 12, logits ? SB_RT_BOUNDARY_LOGITS : 0);
    put64(p + 16, sb_rt_gdn_pos(g));
    put64(p + 24, G);
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
    uint32_t flags = get32(p + 12);
    if (memcmp(p, MAGIC, 8) || get32(p + 8) != SB_RT_BOUNDARY_VERSION ||
        (flags & ~SB_RT_BOUNDARY_LOGITS) || get64(p + 16) != pos || get64(p + 24) != G)
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
