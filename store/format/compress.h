/* compress.h -- page and point-state payloads compressed for the disk tier:
 * zstd, after a byte shuffle of 2-byte elements for layouts that say their
 * values are 16-bit (SB_LAYOUT_ELEM16: F16, BF16), so the exponent bytes,
 * which repeat, sit together and compress.
 *
 * A payload is stored compressed only when that saves at least an eighth
 * of its 4 KiB-padded size (records are padded to 4 KiB, so smaller gains
 * save nothing on disk and still cost a decompression on every restore).
 * The record format (format.h) marks it with SB_REC_F_COMPRESSED and, when
 * shuffled, SB_REC_F_SHUFFLE2.
 *
 * No locks: the caller owns every buffer.
 */
#ifndef SB_COMPRESS_H
#define SB_COMPRESS_H

#include <stddef.h>
#include <stdint.h>

typedef struct sb_zctx sb_zctx;

/* sb_zctx_new / sb_zctx_free -- a compression context at zstd level
 * `level` (1 .. sb_zlevel_max()), with its scratch space; one per thread.
 * new returns NULL when out of memory. */
sb_zctx *sb_zctx_new(int level);
void sb_zctx_free(sb_zctx *z);

/* sb_zlevel_max -- the highest level sb_zctx_new takes. */
int sb_zlevel_max(void);

/* sb_zcompress -- compress src[0, n) into dst (cap bytes): one zstd
 * frame, or when shuffle2 (n even) the bytes shuffled and each byte plane
 * a frame of its own (zstd gives a block's literals one Huffman table, and
 * the planes differ: the exponent bytes repeat, the low mantissa bytes do
 * not). *flags receives the record flags to store.
 * Returns: the compressed size, or 0 when it does not save an eighth of
 * the padded size, does not fit cap, or memory ran out (store it raw). */
size_t sb_zcompress(sb_zctx *z, const void *src, size_t n, int shuffle2, void *dst, size_t cap,
                    uint8_t *flags);

/* sb_zdecompress -- decompress src[0, n) (stored with record flags
 * `flags`) into dst, which must come out exactly raw bytes long.
 * Returns: SB_OK; SB_ERR_CORRUPT (not a zstd frame, or not of raw bytes);
 * SB_ERR_NOMEM. */
int sb_zdecompress(const void *src, size_t n, uint8_t flags, void *dst, size_t raw);

#endif /* SB_COMPRESS_H */
