/* tier_ops.h -- the table of operations a tier below the RAM index
 * implements (store/disk fills one): the types alone, so a tier's headers
 * need nothing of core but this and host.h. What each operation promises,
 * and how the index calls it, is in tier.h (one inline wrapper each).
 *
 * Thread safety: as tier.h says per operation ([mu] or unlocked).
 */
#ifndef SB_TIER_OPS_H
#define SB_TIER_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "host.h"
#include "snapbank.h"

typedef struct sb_io sb_io;     /* store/disk/io.h: a file system backend */
typedef struct sb_wset sb_wset; /* a write set: one state's blocks (tickets) */

/* Called by a load for block i as soon as its record is read and checked,
 * with its data (the caller may copy out of it then, while other reads are
 * in flight; the block is not resident yet). */
typedef void (*sb_tier_ready_fn)(void *ctx, size_t i, const uint8_t *data);

/* The operations of a tier. Every member is set (no NULL entries); the
 * contracts are those of the wrappers in tier.h, which call them only when
 * st->tier.ops is set. */
typedef struct sb_tier_ops {
    const char *name;     /* "disk" */
    size_t data_align;    /* alignment and padding the tier needs of a
                             block's data, so it can write it as it is
                             (O_DIRECT: 4096); 0: none */
    size_t blk_bytes;     /* bytes of the tier's per-block area, allocated
                             with each block after its header (internal.h
                             tier_area, 8-byte aligned), zeroed: a zeroed
                             area is a block the tier has not seen. It
                             goes with the block's last reference: the
                             tier keeps nothing in it that must be freed
                             then */

    /* life */
    int (*close)(sb_store *st, bool crash);
    int (*flush)(sb_store *st);
    void (*stats)(const sb_store *st, sb_stats *out);
    void (*foreground_over)(sb_store *st);

    /* offers */
    void (*offer)(sb_store *st, sb_blk *b, const sb_blk *parent);
    void (*offer_short)(sb_store *st, sb_blk *b);
    void (*supersede)(sb_store *st, sb_blk *old, sb_blk *repl);
    void (*enqueue)(sb_store *st, sb_blk *b);
    void (*reorder)(sb_store *st, sb_blk *b);
    void (*leave)(sb_store *st, sb_blk *b);
    bool (*write_back)(const sb_store *st);
    bool (*write_only)(const sb_store *st);
    uint64_t (*pending)(const sb_store *st);
    bool (*wait_progress)(sb_store *st);

    /* records */
    void (*match)(sb_store *st, sb_blk *b, int sign);
    void (*count)(sb_store *st, const sb_blk *b, int sign);
    void (*held)(sb_store *st, const sb_blk *b, int sign);
    bool (*record_stays)(const sb_store *st, const sb_blk *b);
    void (*take_record)(sb_store *st, const sb_blk *old, sb_blk *nu);
    void (*unclean)(sb_store *st, sb_blk *b);

    /* reads */
    int (*load)(struct sb_ns *ns, sb_blk **blocks, size_t n, size_t *n_ok,
                sb_tier_ready_fn ready, void *ctx);
    void (*prefault)(sb_store *st, const struct sb_ns *ns, size_t n);
    size_t (*stream_pages)(const sb_store *st, size_t page_bytes, size_t pages);
    void (*stream_wait)(sb_store *st);

    /* forget */
    void (*drop)(struct sb_ns *ns, sb_blk *b);
    int (*remove)(struct sb_ns *ns, const sb_key *parent, uint32_t n, const uint32_t *rest,
                  uint32_t n_rest, void **req);
    int (*remove_wait)(sb_store *st, void *req);

    /* tickets */
    uint64_t (*ticket)(const sb_store *st);
    sb_wset *(*wset_new)(sb_store *st, size_t n);
    void (*wset_free)(sb_wset *ws);
    int (*wset_reserve)(sb_store *st);
    void (*wset_unreserve)(sb_store *st);
    void (*outcome)(sb_store *st, sb_wset *ws, sb_blk **blocks, size_t n, uint64_t t0,
                    sb_write_outcome *oc, bool keep);
} sb_tier_ops;

#endif /* SB_TIER_OPS_H */
