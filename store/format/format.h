/* format.h -- the disk tier's on-disk format, version 1 (with version 2
 * records for compressed payloads and version 3 records for tombstones):
 * records, the namespace description, superblock slots and segment
 * summaries, with a pure encoder and a validating decoder for each (no I/O
 * here).
 *
 * Everything is little-endian. Every structure carries a magic, the format
 * version and an XXH3-64 checksum; a decoder refuses an unknown version
 * with SB_ERR_VERSION (never guessing), bytes that are not the structure
 * with SB_ERR_FORMAT, and a checksum mismatch with SB_ERR_CORRUPT. Decoders
 * never trust a length they have not bounded: every size is checked against
 * the buffer and the format's limits before use. docs/format.md is the long
 * form.
 *
 * ---------------------------------------------------------------------------
 * The store directory
 *
 *     DIR/ (0700)
 *       LOCK              advisory lock; holds the owner's pid
 *       superblock        two slots, A at offset 0 and B at slot_bytes
 *       seg-00000001.dat  segment files, segment_bytes each, preallocated
 *       seg-00000001.sum  the summary of a sealed segment
 *
 * A segment is an append-only run of records, each starting on a 4 KiB
 * boundary, preallocated and never grown. Reclamation deletes it; a new
 * segment (a new id, a new generation) takes its slot in the superblock's
 * list. A record read for the wrong segment or generation fails its head
 * checksum.
 *
 * ---------------------------------------------------------------------------
 * Record: a head (a multiple of 4 KiB) then the payload, padded to 4 KiB.
 *
 *   OFFSET SIZE FIELD
 *   0      4    magic            "SBRC"
 *   4      2    version          1; 2 for a compressed record; 3 for a
 *                                tombstone (and only a tombstone)
 *   6      1    kind             1 namespace, 2 page, 3 point state,
 *                                4 tombstone
 *   7      1    flags            0 in versions 1 and 3; version 2: bit 0 set
 *                                (payload compressed: one zstd frame),
 *                                bit 1 (the bytes were shuffled as 2-byte
 *                                elements: every element's first byte,
 *                                then every second; each of the two
 *                                halves is a zstd frame, one after the
 *                                other)
 *   8      8    seq              store-wide sequence number, from 1
 *   16     4    segment_id       the segment this record was written to
 *   20     4    generation       that segment's generation when written
 *   24     8    ns_id            namespace id (XXH3-64 of identity, scope)
 *   32     16   key              page: content key; point, tombstone:
 *                                key of its path; namespace: the chain's
 *                                root key
 *   48     16   parent_key       page, point, tombstone: key of the page
 *                                before (or the root key); namespace: zero
 *   64     4    position         page: first token index (region * pt);
 *                                point: its position L; tombstone: the
 *                                length n of the removed prefix;
 *                                namespace: 0
 *   68     4    n_tokens         token IDs that follow the fixed head: a
 *                                page's tokens; a point's tokens after the
 *                                last full page before L; a tombstone's
 *                                after the last full page before n
 *                                (n mod pt of them); namespace: 0
 *   72     4    head_bytes       bytes of the head, a multiple of 4096
 *   76     4    extra_bytes      bytes after the token IDs (namespace: the
 *                                description below; tombstone: 8, its
 *                                removal sequence), else 0
 *   80     8    payload_bytes    bytes of payload after the head (as
 *                                stored: a compressed record's frame)
 *   88     8    payload_hash     XXH3-64 of the payload bytes as stored
 *   96     24   reserved         zero
 *   120    8    head_hash        XXH3-64 of the token IDs and extra bytes,
 *                                seeded with XXH3-64 of head[0, 120) seeded
 *                                with the record's byte offset in its
 *                                segment file
 *   128    4*n  token IDs
 *   ...    extra, then zeros up to head_bytes
 *
 * The head hash covers segment_id, generation and (through the seed) the
 * file offset, so a record read from the wrong place, or left from an older
 * life of the segment, fails; the reserved bytes and the padding after the
 * extra bytes must be zero. The payload of a page is the whole page block
 * (page_bytes; the slices of tokens past n_tokens are unspecified); of a
 * point state, point_bytes. A version 2 record stores it compressed (a
 * zstd frame that decompresses to exactly that size, written only when it
 * saves at least an eighth of the padded payload); version 1 readers
 * refuse it as an unknown version instead of misreading it. A page record alone rebuilds its place in the
 * radix tree: its parent key names the page before it, and its tokens
 * extend that page's path.
 *
 * A tombstone (version 3, kind 4; sb_ns_remove writes one) says that
 * every state of its namespace whose tokens start with a prefix of n
 * tokens was removed. Its parent_key is the key of the last full page
 * before n (the root key when n < pt), its tokens are the prefix's tokens
 * after that page (the "rest", n mod pt of them), its key is chained over
 * them as a point state's is (the parent key itself when there are none),
 * and its 8 extra bytes are its removal sequence, u64 little-endian: the
 * seq it was first written with (a copy reclamation writes keeps it; its
 * own seq is new). It has no payload (payload_bytes 0). Recovery drops
 * every page and point record whose seq is below a tombstone's removal
 * sequence and whose path passes through the tombstone's cut: a page
 * record of region n / pt that chains from parent_key and whose tokens
 * start with the rest, or a point record whose parent is parent_key, at a
 * position L >= n, whose tokens start with the rest; and every record
 * after such a page on its path. Records written after the tombstone
 * (a later put of the same prefix) have a larger seq and stay. Version 1
 * and 2 readers refuse a version 3 record as an unknown version; a store
 * that may hold tombstones also says superblock version 3 (below), which
 * they refuse before reading anything else.
 *
 * A page record as written: a 1-tensor layout with 8 bytes per token and
 * page_tokens 4 (so page_bytes 4096), the page of tokens 100 101 102 103 at
 * offset 0 of segment 1, generation 1, seq 2, with example ns_id and keys,
 * payload byte i = (7 i + 3) mod 256; fields labelled on the left:
 *
 *   magic/ver/kind/flags  0000: 53 42 52 43 01 00 02 00
 *   seq                   0008: 02 00 00 00 00 00 00 00
 *   segment_id/generation 0010: 01 00 00 00 01 00 00 00
 *   ns_id                 0018: 4d 6b 8e 22 3f 2c 0e 71
 *   key                   0020: 0e 76 e4 0c 6e 37 b4 56 84 34 b3 92 09 2b 8b 71
 *   parent_key            0030: 37 0f d3 58 5a 0d 69 3e 24 76 ab 2b 2a 67 13 93
 *   position/n_tokens     0040: 00 00 00 00 04 00 00 00
 *   head_bytes/extra      0048: 00 10 00 00 00 00 00 00
 *   payload_bytes         0050: 00 10 00 00 00 00 00 00
 *   payload_hash          0058: 7e e3 2b 84 46 87 42 d7
 *   reserved              0060: 00 ... 00 (24 bytes)
 *   head_hash             0078: 58 44 d8 17 83 de d0 d7
 *   tokens                0080: 64 00 00 00 65 00 00 00 66 00 00 00 67 00 00 00
 *   zeros                 0090: 00 ... up to 0x1000, then the 4096 payload bytes
 *
 * (tests/test_format.c rebuilds this record and checks every byte above.)
 *
 * ---------------------------------------------------------------------------
 * Namespace description: the extra bytes of a namespace record. A segment
 * holds the namespace record of every namespace it has pages of, before the
 * first of them, so any segment alone names its layouts.
 *
 *   OFFSET SIZE FIELD
 *   0      4    page_tokens
 *   4      4    n_tensors
 *   8      4    point_bytes
 *   12     4    layout flags (SB_LAYOUT_*)
 *   16     4    model_id_bytes
 *   20     4    scope_bytes
 *   24     4*T  bytes_per_token[n_tensors]
 *   ...         model_id bytes, then scope bytes
 *
 * ---------------------------------------------------------------------------
 * Superblock: two slots of slot_bytes each (a multiple of 4096) at the start
 * of the file "superblock". Writes alternate between them; open takes the
 * valid slot with the larger write_count, so a torn slot write leaves the
 * other one standing.
 *
 *   OFFSET SIZE FIELD
 *   0      8    magic            "SBSUPER1"
 *   8      2    version          2 (1: the same without the wear block;
 *                                3: the same as 2, and the segments may
 *                                hold tombstones)
 *   10     2    slot             0 (A) or 1 (B)
 *   12     4    slot_bytes
 *   16     8    write_count      larger is newer
 *   24     8    store_id         random, fixed at creation
 *   32     8    segment_bytes
 *   40     8    durable_seq      every record with seq <= this survives a crash
 *   48     4    n_segments
 *   52     12   reserved         zero
 *   64     24*N segments: u32 segment_id, u32 generation, u32 state
 *                (0 free, 1 open, 2 sealed), u32 reserved, u64 data_end
 *                (bytes of records; for sealed segments)
 *   64+24N 32   wear (version 2): what the tier has written over the
 *                store's life, as of this slot: u64 device bytes, u64
 *                state bytes (sb_stats disk_logical_bytes), u64 bytes
 *                reclamation wrote again, u64 reserved (zero)
 *   ...         zeros
 *   slot_bytes-8  8  slot_hash   XXH3-64 of the slot's other bytes
 *
 * Version 1 slots (no wear block) are read as having written nothing; a
 * store's next slot write is version 2 (its slot size leaves room: the
 * segment list is capped to fit). A store writes version 3 from just
 * before its first tombstone is written (the slot synced first) and for
 * good after: a reader that knows only versions 1 and 2 refuses the store
 * (SB_ERR_VERSION) instead of opening it without its tombstones, which
 * would bring removed states back. A slot whose version is unknown is
 * another version's only when its slot hash holds (sb_super_other_version);
 * else it is damage. When neither slot can be used, salvage.c rebuilds the
 * superblock from the segment files (SB_OPEN_SALVAGE; docs/format.md says
 * what it relies on: ids in file names, heads checked at their offsets,
 * generations and sequence numbers that only grow).
 *
 * ---------------------------------------------------------------------------
 * Summary "seg-NNNNNNNN.sum": the record heads of a sealed segment, so open
 * reads summaries, not payloads. Written to a temporary name, synced and
 * renamed; a summary that fails its checks is ignored and the segment is
 * scanned instead.
 *
 *   OFFSET SIZE FIELD
 *   0      8    magic            "SBSUMRY1"
 *   8      2    version          1
 *   10     2    reserved
 *   12     4    segment_id
 *   16     4    generation
 *   20     4    n_entries
 *   24     8    data_end         bytes of records in the segment
 *   32     8    first_seq
 *   40     8    last_seq
 *   48     8    body_bytes
 *   56     8    reserved
 *   64          entries, each: u32 entry_bytes (a multiple of 8), u32 zero,
 *                u64 record offset, the record's 128-byte fixed head, its
 *                token IDs and extra bytes, zeros to entry_bytes
 *   64+body 8   file_hash        XXH3-64 of every byte before it
 */
#ifndef SB_FORMAT_H
#define SB_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snapbank.h"

#define SB_FMT_VERSION 1u
#define SB_FMT_BLOCK 4096u

#define SB_REC_MAGIC 0x43524253u        /* "SBRC" */
#define SB_REC_FIXED 128u               /* bytes of the fixed head */
#define SB_REC_HEAD_MAX (1u << 20)      /* largest head */
#define SB_REC_PAYLOAD_MAX (1ull << 30) /* largest payload */
#define SB_REC_SEQ_MAX (1ull << 62)     /* largest sequence number a store
                                           writes; recovery takes a record
                                           with a larger (or zero) seq as
                                           damage, so seqs never wrap */

/* sb_seg_file_id -- the segment id the file name seg-NNNNNNNN.<ext> names
 * (eight decimal digits, ext "dat" or "sum"), or 0 when name is not one. */
uint32_t sb_seg_file_id(const char *name, const char *ext);

/* Record kinds: pinned numbers, never reused. */
enum { SB_REC_NAMESPACE = 1, SB_REC_PAGE = 2, SB_REC_POINT = 3, SB_REC_TOMBSTONE = 4 };

/* Record flags: pinned bits (version 2 records only). */
#define SB_REC_F_COMPRESSED 0x01u /* the payload is one zstd frame */
#define SB_REC_F_SHUFFLE2 0x02u   /* ...or two: the payload's bytes
                                     shuffled as 2-byte elements (all
                                     first bytes, then all second bytes),
                                     each half a frame */
#define SB_REC_VERSION_COMPRESSED 2u /* the version of compressed records */
#define SB_REC_VERSION_TOMBSTONE 3u  /* the version of tombstones (kind 4) */
#define SB_TOMB_EXTRA 8u             /* a tombstone's extra bytes: its
                                        removal sequence, u64 LE */

/* Segment states in the superblock: pinned numbers. */
enum { SB_SEG_FREE = 0, SB_SEG_OPEN = 1, SB_SEG_SEALED = 2 };

/* A decoded fixed head (the fields of the table above). */
typedef struct sb_rec_head {
    uint8_t kind;
    uint8_t flags;
    uint64_t seq;
    uint32_t segment_id;
    uint32_t generation;
    uint64_t ns_id;
    uint64_t key[2];           /* lo, hi */
    uint64_t parent_key[2];
    uint32_t position;
    uint32_t n_tokens;
    uint32_t head_bytes;
    uint32_t extra_bytes;
    uint64_t payload_bytes;
    uint64_t payload_hash;
} sb_rec_head;

/* sb_rec_head_size -- head_bytes for n_tokens token IDs and extra_bytes.
 * Returns: the size (a multiple of 4096), or 0 when over SB_REC_HEAD_MAX. */
uint32_t sb_rec_head_size(uint32_t n_tokens, uint32_t extra_bytes);

/* sb_rec_encode -- write a record head into buf (h->head_bytes long; h's
 * head_bytes must equal sb_rec_head_size(n_tokens, extra_bytes)): the
 * fixed fields, tokens, extra, zeros, and the head hash for a record at
 * file offset off. The caller fills payload_hash (sb_rec_payload_hash).
 * Returns: SB_OK; SB_ERR_INVAL (inconsistent sizes or kind). */
int sb_rec_encode(const sb_rec_head *h, const uint32_t *tokens, const void *extra,
                  uint64_t off, void *buf);

/* sb_rec_peek -- check the fixed part of a head in buf[0, len) (len >=
 * SB_REC_FIXED) before reading the rest: magic, version, kind, flags and
 * the bounds of every size. *head_bytes receives how much to read.
 * Returns: SB_OK; SB_ERR_FORMAT (not a record, or sizes out of bounds);
 * SB_ERR_VERSION (a record of another format version); SB_ERR_INVAL. */
int sb_rec_peek(const void *buf, size_t len, uint32_t *head_bytes);

/* sb_rec_decode -- validate and decode a whole head (buf[0, len), len >=
 * its head_bytes) read from file offset off. *tokens and *extra point into
 * buf (borrowed for as long as buf lives).
 * Returns: SB_OK; SB_ERR_FORMAT; SB_ERR_VERSION; SB_ERR_CORRUPT (head hash
 * mismatch, or reserved bytes or padding not zero); SB_ERR_INVAL. */
int sb_rec_decode(const void *buf, size_t len, uint64_t off, sb_rec_head *h,
                  const uint32_t **tokens, const void **extra);

/* sb_rec_other_version -- is buf[0, len) (read from file offset off) the
 * head of a record of another format version: the magic, a version this
 * code does not read, and a head hash that holds where this version keeps
 * it (so not damage to the version field, which the hash covers)? A
 * reader never rewrites what such a record's store holds. */
bool sb_rec_other_version(const void *buf, size_t len, uint64_t off);

/* sb_rec_head_hash -- the head hash of the head at head (its fixed fields
 * and body_bytes of token IDs and extra after them) for file offset off:
 * what sb_rec_encode stores at offset 120. */
uint64_t sb_rec_head_hash(const void *head, uint32_t body_bytes, uint64_t off);

/* sb_rec_payload_hash -- the payload checksum. */
uint64_t sb_rec_payload_hash(const void *payload, size_t n);

/* sb_rec_tomb_put / sb_rec_tomb_seq -- a tombstone's extra bytes
 * (SB_TOMB_EXTRA): its removal sequence, little-endian. */
void sb_rec_tomb_put(void *extra, uint64_t removal_seq);
uint64_t sb_rec_tomb_seq(const void *extra);

/* sb_fmt_pad -- n rounded up to the 4 KiB block every record part is
 * padded to. */
static inline uint64_t sb_fmt_pad(uint64_t n)
{
    return (n + SB_FMT_BLOCK - 1) / SB_FMT_BLOCK * SB_FMT_BLOCK;
}

/* sb_rec_record_bytes -- bytes a record occupies in its segment: head plus
 * payload rounded up to 4096. */
static inline uint64_t sb_rec_record_bytes(const sb_rec_head *h)
{
    return h->head_bytes + sb_fmt_pad(h->payload_bytes);
}

/* ---- namespace description ------------------------------------------------ */

/* A decoded description; pointers borrow from the decoded bytes. */
typedef struct sb_rec_ns {
    sb_layout layout;              /* model_id and bytes_per_token borrowed */
    const void *scope;
    size_t scope_bytes;
} sb_rec_ns;

/* sb_rec_ns_size -- bytes of the description of (layout, scope_bytes). */
uint32_t sb_rec_ns_size(const sb_layout *layout, size_t scope_bytes);

/* sb_rec_ns_encode -- write the description into buf (sb_rec_ns_size
 * bytes). bytes_per_token must be 4-byte aligned in memory or not: it is
 * copied. Returns: SB_OK; SB_ERR_INVAL. */
int sb_rec_ns_encode(const sb_layout *layout, const void *scope, size_t scope_bytes,
                     void *buf);

/* sb_rec_ns_decode -- decode and bound-check a description of len bytes.
 * bytes_per_token in *out points into buf, which must be 4-byte aligned.
 * The layout is not validated as sb_ns_open would; the caller does that.
 * Returns: SB_OK; SB_ERR_FORMAT (sizes do not add up to len). */
int sb_rec_ns_decode(const void *buf, size_t len, sb_rec_ns *out);

/* ---- superblock ------------------------------------------------------------- */

#define SB_SUPER_MAGIC 0x3152455055534253ull /* "SBSUPER1" */
#define SB_SUPER_FIXED 64u
#define SB_SUPER_ENTRY 24u
#define SB_SUPER_WEAR 32u
#define SB_SUPER_VERSION 3u       /* the newest slot version this code reads
                                     (and writes for a store with
                                     tombstones) */
#define SB_SUPER_VERSION_PLAIN 2u /* what a store without tombstones writes */
#define SB_SUPER_VERSION_TOMB 3u  /* the first version that may hold them */

typedef struct sb_super_seg {
    uint32_t segment_id;
    uint32_t generation;
    uint32_t state;            /* SB_SEG_* */
    uint64_t data_end;
} sb_super_seg;

typedef struct sb_super {
    uint16_t slot;             /* 0 or 1 */
    uint32_t slot_bytes;
    uint64_t write_count;
    uint64_t store_id;
    uint64_t segment_bytes;
    uint64_t durable_seq;
    uint32_t n_segments;
    sb_super_seg *segments;    /* (n_segments) */
    uint64_t wear_write;       /* the wear block (zero from a version 1 slot) */
    uint64_t wear_logical;
    uint64_t wear_reinsert;
    bool tombstones;           /* version 3: the segments may hold
                                  tombstones (encode writes 3, else 2) */
} sb_super;

/* sb_super_slot_size -- slot_bytes for n segments (a multiple of 4096). */
uint32_t sb_super_slot_size(uint32_t n_segments);

/* sb_super_encode -- write s into buf (s->slot_bytes, which must hold
 * s->n_segments). Returns: SB_OK; SB_ERR_INVAL. */
int sb_super_encode(const sb_super *s, void *buf);

/* sb_super_decode -- validate and decode a slot of len bytes. segs receives
 * up to max_segs entries (s->segments = segs).
 * Returns: SB_OK; SB_ERR_FORMAT; SB_ERR_VERSION; SB_ERR_CORRUPT; SB_ERR_RANGE
 * (more segments than max_segs). */
int sb_super_decode(const void *buf, size_t len, sb_super *s, sb_super_seg *segs,
                    uint32_t max_segs);

/* sb_super_other_version -- is the slot buf[0, len) one of another format
 * version: the magic, a version this code does not read, and the slot hash
 * over buf[0, len - 8) holding (a slot whose version field was damaged
 * fails it, and is damage, not another version)? */
bool sb_super_other_version(const void *buf, size_t len);

/* ---- summary ------------------------------------------------------------------- */

#define SB_SUM_MAGIC 0x3159524d4d555342ull /* "SBSUMRY1" */
#define SB_SUM_FIXED 64u

typedef struct sb_sum_info {
    uint32_t segment_id;
    uint32_t generation;
    uint32_t n_entries;
    uint64_t data_end;
    uint64_t first_seq, last_seq;
    uint64_t body_bytes;
} sb_sum_info;

/* sb_sum_entry_size -- bytes of the entry of a record head with n_tokens
 * tokens and extra_bytes extra. */
uint32_t sb_sum_entry_size(uint32_t n_tokens, uint32_t extra_bytes);

/* sb_sum_put_entry -- write the entry for the record at offset off (head h,
 * its tokens and extra) at buf (sb_sum_entry_size bytes). */
void sb_sum_put_entry(void *buf, uint64_t off, const sb_rec_head *h, const uint32_t *tokens,
                      const void *extra);

/* sb_sum_finish -- write the header at buf[0, 64) and the file hash after
 * the body (buf must hold 64 + info->body_bytes + 8 bytes, the entries
 * already in place). Returns the file's total size. */
size_t sb_sum_finish(void *buf, const sb_sum_info *info);

/* sb_sum_decode -- validate a whole summary file of len bytes and describe
 * it. Entries are read with sb_sum_next.
 * Returns: SB_OK; SB_ERR_FORMAT; SB_ERR_VERSION; SB_ERR_CORRUPT. */
int sb_sum_decode(const void *buf, size_t len, sb_sum_info *info);

/* sb_sum_next -- decode the entry at *pos (start at SB_SUM_FIXED) of a
 * validated summary: its record offset, head, tokens and extra (borrowed
 * from buf). Advances *pos. Returns: SB_OK; SB_ERR_RANGE (no more entries);
 * SB_ERR_FORMAT (an entry out of bounds, or whose head is not valid). */
int sb_sum_next(const void *buf, const sb_sum_info *info, size_t *pos, uint64_t *off,
                sb_rec_head *h, const uint32_t **tokens, const void **extra);

#endif /* SB_FORMAT_H */
