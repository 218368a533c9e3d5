/* scan.h -- reading a segment file record by record through a read window:
 * each record's head checked at its own offset for its segment (and
 * generation), its payload hashed as it streams through the window.
 * fsck.c (the offline check) and salvage.c (rebuilding a superblock from
 * the segment files) scan with it.
 *
 * Every read goes through one SB_SCAN_WIN window (segments are never read
 * whole), so memory stays at the window. Window bases are record offsets
 * or payload chunk starts, all multiples of 4096, so a pointer into the
 * window is as aligned as the data it holds (namespace descriptions are
 * decoded in place).
 *
 * Thread safety: an sb_scan is one thread's; scans on different sb_scans
 * (and sb_io handles) may run at once.
 */
#ifndef SB_SCAN_H
#define SB_SCAN_H

#include <stdbool.h>
#include <stdint.h>

#include "format.h"
#include "io.h"

#define SB_SCAN_WIN (1u << 20) /* read window, bytes */

_Static_assert(SB_SCAN_WIN >= SB_REC_HEAD_MAX, "a whole record head fits the window");

typedef struct sb_scan {
    sb_io *io;                   /* borrowed */
    uint8_t *win;                /* (SB_SCAN_WIN) read window, 4 KiB aligned */
    int fd;                      /* file the window holds; -1: none */
    uint64_t off;                /* file offset of win[0], a multiple of 4096 */
    size_t len;                  /* valid bytes; < SB_SCAN_WIN: the file ends there */
    void *xxh;                   /* XXH3_state_t: the payload hash, streamed */
    void (*tick)(void *ctx, uint64_t pos); /* NULL, or told how far a payload
                                    has been hashed (file offset) */
    void *ctx;                   /* tick's */
} sb_scan;

/* What sb_scan_head and sb_scan_payload found at an offset. */
enum {
    SB_SCAN_OK = 0,              /* a sound record */
    SB_SCAN_BAD_HEAD,            /* no head checks here: its length cannot be
                                    trusted (a head decodes only at its own
                                    offset, so the next record can only be
                                    looked for at each following block) */
    SB_SCAN_BAD_PAYLOAD,         /* the head is sound, the payload fails its hash */
    SB_SCAN_SHORT,               /* the file ends inside the record */
    SB_SCAN_IO,                  /* a read failed */
    SB_SCAN_VERSION,             /* a record head of another format version
                                    (its head hash holds: not damage) */
};

/* sb_scan_init -- set up s to read through io (borrowed for s's life).
 * Returns: SB_OK; SB_ERR_NOMEM (s holds nothing to free). */
int sb_scan_init(sb_scan *s, sb_io *io);

/* sb_scan_fini -- free s's window and hash state. */
void sb_scan_fini(sb_scan *s);

/* sb_scan_forget -- the window's file is about to be closed (its number may
 * be reused): drop the window. */
static inline void sb_scan_forget(sb_scan *s)
{
    s->fd = -1;
}

/* sb_scan_read -- read len bytes of fd at off through io, retrying short
 * reads. Returns: the bytes read (fewer than len only where the file
 * ends); a negative errno. */
int64_t sb_scan_read(sb_io *io, int fd, void *buf, size_t len, uint64_t off);

/* sb_scan_get -- make [off, off + len) of fd readable at *p (len <=
 * SB_SCAN_WIN), borrowed until the next call on s.
 * Returns: the bytes available at *p (fewer than len only where the file
 * ends); a negative errno. */
int64_t sb_scan_get(sb_scan *s, int fd, uint64_t off, size_t len, const uint8_t **p);

/* sb_scan_head -- check the record head at off of fd, segment seg_id, which
 * must end (payload included) by limit: it decodes at its offset, names
 * seg_id and, when gen is nonzero, generation gen; a namespace record's
 * description decodes. On SB_SCAN_OK *h is the head and *tokens and
 * *extra (either may be NULL) point at its token IDs and extra bytes in
 * the window, borrowed until the next call on s.
 * Returns: SB_SCAN_OK; SB_SCAN_BAD_HEAD; SB_SCAN_SHORT; SB_SCAN_IO;
 * SB_SCAN_VERSION. */
int sb_scan_head(sb_scan *s, int fd, uint32_t seg_id, uint32_t gen, uint64_t off,
                 uint64_t limit, sb_rec_head *h, const uint32_t **tokens, const void **extra);

/* sb_scan_payload -- hash the payload of the record at off (head h, as
 * sb_scan_head returned it) and compare it with h->payload_hash.
 * Returns: SB_SCAN_OK; SB_SCAN_BAD_PAYLOAD; SB_SCAN_SHORT; SB_SCAN_IO. */
int sb_scan_payload(sb_scan *s, int fd, const sb_rec_head *h, uint64_t off);

/* sb_scan_zero -- is the block [off, off + 4096) of fd all zeros (free
 * space of a preallocated segment, not damage)? False also where it
 * cannot be read. */
bool sb_scan_zero(sb_scan *s, int fd, uint64_t off);

/* sb_scan_super_foreign -- does the superblock file fd (size bytes) hold a
 * slot of another format version (sb_super_other_version: its hash holds,
 * so it is not damage)? For a file whose size does not split into two
 * slots (truncated), the slots are placed by slot A's own slot_bytes
 * field. False also where nothing can be read. */
bool sb_scan_super_foreign(sb_io *io, int fd, uint64_t size);

#endif /* SB_SCAN_H */
