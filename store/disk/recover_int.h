/* recover_int.h -- what recover.c (opening a store directory) and salvage.c
 * (rebuilding its superblock from the segment files) share: the records
 * collected from summaries and scans, before the index is rebuilt from
 * them.
 *
 * Records are collected into an rctx segment by segment (each segment's
 * records contiguous, in the order found); recover.c then rebuilds every
 * namespace's index from them. Thread safety: an rctx is the opening
 * thread's (no writer thread runs yet).
 */
#ifndef SB_RECOVER_INT_H
#define SB_RECOVER_INT_H

#include "disk_int.h"

/* One record found. */
typedef struct rrec {
    sb_rec_head h;             /* decoded fixed head */
    uint64_t off;              /* offset in its segment */
    uint32_t seg;              /* segment index */
    uint8_t placed;            /* indexed, or found in the tree */
    uint8_t has_child;         /* another page record names it as parent */
    uint8_t winner;            /* a page record the map holds for its key
                                * (not an older copy) */
    uint8_t kill_done;         /* kill is computed (pages) */
    uint8_t dead;              /* a tombstone removed it (kill > seq) */
    uint64_t kill;             /* the largest removal sequence of the
                                  tombstones whose cut its path passes
                                  through (0: none) */
    size_t tok;                /* its tokens at ctx->tok + tok */
    size_t extra;              /* its extra bytes at ctx->bytes + extra */
} rrec;

typedef struct rctx {
    sb_disk *d;
    rrec *r;
    size_t n, cap;
    uint32_t *tok;
    size_t ntok, tokcap;
    uint8_t *bytes;            /* extra bytes, each run 8-aligned */
    size_t nb, bcap;
    uint32_t *map;             /* page records by key: index + 1, 0 empty */
    size_t map_cap;
    uint8_t *sum;              /* summary buffer, reused segment to segment */
    size_t sum_cap;
    struct rns {
        uint64_t id;
        sb_ns *ns;
    } *ns;
    size_t n_ns;
    size_t *tix;               /* the sound tombstone records, by
                                  (ns_id, parent key): c->r indices */
    size_t n_tix;
    rrec **kstack;             /* scratch of the kill walk */
    size_t kcap;
} rctx;

/* sb_recover_add -- add the record at off of segment index seg (head h,
 * its tokens and extra bytes, copied) to c. Returns: SB_OK; SB_ERR_NOMEM
 * (c unchanged). */
int sb_recover_add(rctx *c, uint32_t seg, uint64_t off, const sb_rec_head *h,
                   const uint32_t *tokens, const void *extra);

/* sb_recover_read_summary -- add the records of segment index i's summary
 * file to c, all or none. The summary must name the segment's id and, with
 * limit 0 (recovery: the superblock says), its generation and data_end;
 * with a nonzero limit (salvage) it sets both in d->segs[i], its data_end
 * at most limit (the file's size). seen,
 * when not NULL, receives the summary's header whenever the file decodes
 * and names the segment's id (else seen->segment_id is 0), even when the
 * summary is refused for another reason.
 * Returns: SB_OK; SB_ERR_NOMEM; another error when the summary is missing
 * or bad (nothing added). */
int sb_recover_read_summary(rctx *c, uint32_t i, uint64_t limit, sb_sum_info *seen);

/* The ids of the segment files (seg-NNNNNNNN.dat) in a directory. */
typedef struct sb_id_list {
    uint32_t *id;              /* (n), in the order listed */
    size_t n, cap;
    bool nomem;
} sb_id_list;

/* sb_recover_list_ids -- list d's segment files into *l (free l->id).
 * Returns: SB_OK; SB_ERR_NOMEM; SB_ERR_IO. */
int sb_recover_list_ids(sb_disk *d, sb_id_list *l);

/* sb_disk_salvage -- rebuild a superblock that cannot be used from the
 * segment files in the directory (salvage.c walks through it): list and
 * collect every file's records into c, seal each file read record by
 * record with a summary, then replace the superblock (both slots). On
 * SB_OK d describes the store as a superblock read would (d->segs, sizes,
 * sequence numbers), the salvage counters are set, and recover.c rebuilds
 * the index from c. d->sb_fd is the damaged superblock's fd or -1.
 * Returns: SB_OK; SB_ERR_VERSION (a record of another format version:
 * nothing written); SB_ERR_IO, SB_ERR_NOSPC (a summary or the superblock
 * could not be written: the damaged superblock stays, unless its
 * replacement was already renamed into place); SB_ERR_NOMEM. */
int sb_disk_salvage(rctx *c);

#endif /* SB_RECOVER_INT_H */
