/* compress.c -- zstd with a 2-byte shuffle for disk-tier payloads (see
 * compress.h). */
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "compress.h"
#include "format.h"
#include "snapbank.h"

struct sb_zctx {
    ZSTD_CCtx *cctx;
    int level;
    uint8_t *scratch;          /* the shuffled bytes */
    size_t scratch_cap;
};

sb_zctx *sb_zctx_new(int level)
{
    sb_zctx *z = calloc(1, sizeof *z);
    if (!z)
        return NULL;
    z->cctx = ZSTD_createCCtx();
    if (!z->cctx) {
        free(z);
        return NULL;
    }
    z->level = level;
    return z;
}

void sb_zctx_free(sb_zctx *z)
{
    if (!z)
        return;
    ZSTD_freeCCtx(z->cctx);
    free(z->scratch);
    free(z);
}

int sb_zlevel_max(void)
{
    return ZSTD_maxCLevel();
}

/* Element i's byte 0 to out[i], byte 1 to out[n/2 + i]. */
static void shuffle2(const uint8_t *in, size_t n, uint8_t *out)
{
    size_t h = n / 2;
    for (size_t i = 0; i < h; i++) {
        out[i] = in[2 * i];
        out[h + i] = in[2 * i + 1];
    }
}

static void unshuffle2(const uint8_t *in, size_t n, uint8_t *out)
{
    size_t h = n / 2;
    for (size_t i = 0; i < h; i++) {
        out[2 * i] = in[i];
        out[2 * i + 1] = in[h + i];
    }
}

size_t sb_zcompress(sb_zctx *z, const void *src, size_t n, int shuffle, void *dst, size_t cap,
                    uint8_t *flags)
{
    shuffle = shuffle && n % 2 == 0;
    if (shuffle) {
        if (z->scratch_cap < n) {
            uint8_t *p = realloc(z->scratch, n);
            if (!p)
                return 0;
            z->scratch = p;
            z->scratch_cap = n;
        }
        shuffle2(src, n, z->scratch);
    }
    size_t r;
    if (shuffle) {
        /* One frame per byte plane: zstd codes a block's literals with one
         * Huffman table, and each plane has its own statistics. */
        size_t h = n / 2;
        size_t r0 = ZSTD_compressCCtx(z->cctx, dst, cap, z->scratch, h, z->level);
        if (ZSTD_isError(r0))
            return 0;
        size_t r1 = ZSTD_compressCCtx(z->cctx, (uint8_t *)dst + r0, cap - r0, z->scratch + h, h,
                                      z->level);
        r = ZSTD_isError(r1) ? r1 : r0 + r1;
    } else {
        r = ZSTD_compressCCtx(z->cctx, dst, cap, src, n, z->level);
    }
    if (ZSTD_isError(r) || sb_fmt_pad(r) > sb_fmt_pad(n) - sb_fmt_pad(n) / 8)
        return 0;
    *flags = (uint8_t)(SB_REC_F_COMPRESSED | (shuffle ? SB_REC_F_SHUFFLE2 : 0));
    return r;
}

int sb_zdecompress(const void *src, size_t n, uint8_t flags, void *dst, size_t raw)
{
    if (!(flags & SB_REC_F_COMPRESSED))
        return SB_ERR_CORRUPT;
    uint8_t *out = dst, *tmp = NULL;
    if (flags & SB_REC_F_SHUFFLE2) {
        if (raw % 2)
            return SB_ERR_CORRUPT;
        if (!(tmp = malloc(raw)))
            return SB_ERR_NOMEM;
        out = tmp;
    }
    size_t r = ZSTD_decompress(out, raw, src, n); /* every frame; errs past raw */
    int rc = !ZSTD_isError(r) && r == raw ? SB_OK : SB_ERR_CORRUPT;
    if (tmp) {
        if (rc == SB_OK)
            unshuffle2(tmp, raw, dst);
        free(tmp);
    }
    return rc;
}
