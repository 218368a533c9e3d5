/* scan.c -- reading segment files record by record through a window
 * (scan.h). */
#include "scan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

int sb_scan_init(sb_scan *s, sb_io *io)
{
    memset(s, 0, sizeof *s);
    s->io = io;
    s->fd = -1;
    s->win = aligned_alloc(4096, SB_SCAN_WIN);
    s->xxh = XXH3_createState();
    if (!s->win || !s->xxh) {
        sb_scan_fini(s);
        return SB_ERR_NOMEM;
    }
    return SB_OK;
}

void sb_scan_fini(sb_scan *s)
{
    free(s->win);
    XXH3_freeState(s->xxh);
    s->win = NULL;
    s->xxh = NULL;
    s->fd = -1;
}

int64_t sb_scan_read(sb_io *io, int fd, void *buf, size_t len, uint64_t off)
{
    size_t got = 0;
    while (got < len) {
        int64_t n = sb_io_pread(io, fd, (uint8_t *)buf + got, len - got, off + got);
        if (n < 0)
            return n;
        if (n == 0)
            break;
        got += (size_t)n;
    }
    return (int64_t)got;
}

int64_t sb_scan_get(sb_scan *s, int fd, uint64_t off, size_t len, const uint8_t **p)
{
    if (s->fd != fd || off < s->off || off - s->off > s->len ||
        (s->len - (off - s->off) < len && s->len == SB_SCAN_WIN)) {
        s->fd = -1;
        int64_t n = sb_scan_read(s->io, fd, s->win, SB_SCAN_WIN, off);
        if (n < 0)
            return n;
        s->fd = fd;
        s->off = off;
        s->len = (size_t)n;
    }
    size_t have = s->len - (size_t)(off - s->off);
    *p = s->win + (off - s->off);
    return (int64_t)(have < len ? have : len);
}

int sb_scan_head(sb_scan *s, int fd, uint32_t seg_id, uint32_t gen, uint64_t off,
                 uint64_t limit, sb_rec_head *h, const uint32_t **tokens, const void **extra)
{
    const uint8_t *p;
    uint32_t head_bytes;
    const uint32_t *tok;
    const void *ext;
    if (off >= limit || limit - off < SB_FMT_BLOCK)
        return SB_SCAN_BAD_HEAD;
    int64_t n = sb_scan_get(s, fd, off, SB_FMT_BLOCK, &p);
    if (n < SB_FMT_BLOCK)
        return n < 0 ? SB_SCAN_IO : SB_SCAN_SHORT;
    int rc = sb_rec_peek(p, SB_FMT_BLOCK, &head_bytes);
    if (rc == SB_ERR_VERSION) {
        /* Another version's record, or a damaged version field: its head
         * hash tells (the whole head is in the window or the file ends). */
        n = sb_scan_get(s, fd, off, SB_REC_HEAD_MAX, &p);
        return n >= 0 && sb_rec_other_version(p, (size_t)n, off) ? SB_SCAN_VERSION
                                                                  : SB_SCAN_BAD_HEAD;
    }
    if (rc != SB_OK || head_bytes > limit - off)
        return SB_SCAN_BAD_HEAD;
    n = sb_scan_get(s, fd, off, head_bytes, &p);
    if (n < head_bytes)
        return n < 0 ? SB_SCAN_IO : SB_SCAN_SHORT;
    if (sb_rec_decode(p, head_bytes, off, h, &tok, &ext) != SB_OK || h->segment_id != seg_id ||
        (gen && h->generation != gen))
        return SB_SCAN_BAD_HEAD;
    sb_rec_ns ns;
    if (h->kind == SB_REC_NAMESPACE && sb_rec_ns_decode(ext, h->extra_bytes, &ns) != SB_OK)
        return SB_SCAN_BAD_HEAD;
    if (sb_rec_record_bytes(h) > limit - off)
        return SB_SCAN_BAD_HEAD;
    if (tokens)
        *tokens = tok;
    if (extra)
        *extra = ext;
    return SB_SCAN_OK;
}

int sb_scan_payload(sb_scan *s, int fd, const sb_rec_head *h, uint64_t off)
{
    /* XXH3-64 of the payload bytes, streamed: what sb_rec_payload_hash
     * computes in one go (tests/test_fsck.c checks a payload larger than
     * the window against it). */
    XXH3_64bits_reset(s->xxh);
    uint64_t pos = off + h->head_bytes, end = pos + h->payload_bytes;
    while (pos < end) {
        const uint8_t *p;
        size_t want = end - pos < SB_SCAN_WIN ? (size_t)(end - pos) : SB_SCAN_WIN;
        int64_t n = sb_scan_get(s, fd, pos, want, &p);
        if (n < (int64_t)want)
            return n < 0 ? SB_SCAN_IO : SB_SCAN_SHORT;
        XXH3_64bits_update(s->xxh, p, want);
        pos += want;
        if (s->tick)
            s->tick(s->ctx, pos);
    }
    uint64_t hash = XXH3_64bits_digest(s->xxh);
    /* No payload: store/disk/writer.c stores 0 where format.h's XXH3 of no
     * bytes is a constant; either is sound (the head hash covers the field). */
    if (hash == h->payload_hash || (h->payload_bytes == 0 && h->payload_hash == 0))
        return SB_SCAN_OK;
    return SB_SCAN_BAD_PAYLOAD;
}

bool sb_scan_zero(sb_scan *s, int fd, uint64_t off)
{
    const uint8_t *p;
    if (sb_scan_get(s, fd, off, SB_FMT_BLOCK, &p) != SB_FMT_BLOCK)
        return false;
    for (size_t i = 0; i < SB_FMT_BLOCK; i += 8) {
        uint64_t v;
        memcpy(&v, p + i, 8);
        if (v)
            return false;
    }
    return true;
}

bool sb_scan_super_foreign(sb_io *io, int fd, uint64_t size)
{
    uint8_t fixed[SB_SUPER_FIXED];
    uint64_t slot = size / 2;
    if (size < 2 * SB_FMT_BLOCK || size % (2 * SB_FMT_BLOCK)) { /* A's own word */
        if (sb_scan_read(io, fd, fixed, sizeof fixed, 0) != (int64_t)sizeof fixed)
            return false;
        slot = fixed[12] | (uint32_t)fixed[13] << 8 | (uint32_t)fixed[14] << 16 |
               (uint32_t)fixed[15] << 24;
    }
    if (slot < SB_SUPER_FIXED + 8 || slot > (256u << 20))
        return false;
    uint8_t *buf = malloc(slot);
    bool foreign = false;
    for (uint64_t k = 0; buf && k < 2 && !foreign && (k + 1) * slot <= size; k++)
        foreign = sb_scan_read(io, fd, buf, slot, k * slot) == (int64_t)slot &&
                  sb_super_other_version(buf, slot);
    free(buf);
    return foreign;
}
