/* internal.h -- the store's private structures: store, namespace, block.
 *
 * Everything here hangs off one sb_store; there is no global mutable state.
 *
 * Locking. st->mu (one mutex per store) guards every field marked [mu]:
 * the namespace table, every radix tree, every block's refcount and index
 * links, the eviction heaps, the budgets' accounting and the stats. Fields marked
 * [const] are set before the object is published and never change. Block
 * data is written only by the thread that owns a fresh block; once indexed
 * (committed) it is immutable, and the mutex hand-off at commit publishes it.
 *
 * Thread safety: the functions declared here expect st->mu held unless
 * their comment says "unlocked".
 */
#ifndef SB_INTERNAL_H
#define SB_INTERNAL_H

#include "snapbank.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc.h"
#include "host.h"
#include "pool.h"

/* Debug log, compiled out unless built with -DSB_DEBUG_LOG. */
#ifdef SB_DEBUG_LOG
#include <stdio.h>
#define SB_DLOG(...) fprintf(stderr, "snapbank: " __VA_ARGS__)
#else
#define SB_DLOG(...) ((void)0)
#endif

typedef struct sb_node sb_node;

enum { SB_BLK_PAGE = 1, SB_BLK_POINT = 2 };
enum { SB_HEAP_STORE = 0, SB_HEAP_NS = 1 };

/* Heap position sentinels (sb_blk.heap_pos). */
#define SB_HEAP_OUT SIZE_MAX          /* not an eviction candidate now */
#define SB_HEAP_PARKED (SIZE_MAX - 1) /* a candidate, held by someone: waits
                                         for its last outside reference */

/* A block: one refcounted allocation from the page pool, either a page
 * (page_bytes, 4 KiB aligned) or a point state (point_bytes). The public
 * type sb_page is this struct; point states are never handed out as pages.
 *
 * Life cycle of a page:
 *
 *     fresh (refs >= 1, private, writable)
 *       |  commit: the index takes a reference
 *       v
 *     committed + indexed (immutable; an eviction candidate in both heaps
 *       |  while it is a leaf page)
 *       |  evicted, superseded or namespace dropped: index reference dropped
 *       v
 *     committed, not indexed (held by matches or runtimes only)
 *       |  last reference dropped
 *       v
 *     freed (accounting returned to the budgets)
 *
 * The block header and the tier's per-block state are one allocation
 * (blk_new), as SQLite's pager gives each page nExtra bytes for the b-tree:
 *
 *     0                  80                    144 (x86-64)
 *     +------------------+---------------------+-------------------------+
 *     | cold: chunk,     | hot on a match:     | tier_area: blk_bytes    |
 *     | node, keys,      | data, ns, refs,     | of the tier's (disk:    |
 *     | heap places      | below, uses,        | struct sb_drec, 56),    |
 *     |                  | matched, stamp      | zeroed; none RAM-only   |
 *     +------------------+---------------------+-------------------------+
 *
 * Core reads only `below` (flags the tier sets through host.h) and
 * `matched` (core counts matches) of what concerns the tier.
 */
struct sb_page {
    /* cold on a match: the block's buffer, place and keys, eviction */
    sb_chunk *chunk;        /* [mu] the pool chunk data is in (with data) */
    sb_node *node;          /* [mu] node whose edge holds it; NULL unless indexed */
    sb_key key;             /* [mu] content key, once committed (pages) */
    sb_key parent_key;      /* [mu] key of the previous page (or the ns root) */
    uint64_t heap_key[2];   /* [mu] stamp when (re)keyed in each heap */
    size_t heap_pos[2];     /* [mu] index in each heap, or SB_HEAP_OUT/PARKED */
    /* hot on a match (each page's refs, stamp, flags, counts), last, so
     * they share cache lines with the start of the tier's area, which a
     * match touches too (store/disk: sb_drec's seg and hit) */
    uint8_t *data;          /* [mu] (alloc_bytes) resident bytes, or NULL when
                               the block lives on disk only. Set under mu;
                               never dropped while anyone but the index
                               holds the block, so a holder may read it
                               unlocked once it saw it set */
    struct sb_ns *ns;       /* [const] owning namespace */
    uint32_t refs;          /* [mu] references: index, matches, pins, callers */
    uint32_t n_tokens;      /* [mu] committed token slices (pages); 0 when fresh */
    uint32_t region;        /* [mu] page index in its sequence, once committed */
    uint8_t kind;           /* [const] SB_BLK_PAGE or SB_BLK_POINT */
    uint8_t committed;      /* [mu] immutable from commit on */
    uint8_t indexed;        /* [mu] the index holds one of the refs */
    uint8_t mark;           /* [mu] scratch flag for duplicate detection */
    uint8_t below;          /* [mu] SB_BELOW_* (host.h): what the tier
                               below says of it, set by the tier alone
                               (sb_host_blk_mark); 0 without a tier */
    uint8_t shared;         /* [mu] SB_SHARED_* (shared.h): never offered,
                               offered (or fetched: never offered again),
                               or denied and waiting to be offered again */
    uint8_t superseded;     /* [mu] left the index for a page holding its
                               tokens and more (a longer partial page, or
                               a commit's own copy of it) */
    uint8_t removed;        /* [mu] left the index by sb_ns_remove: a
                               record of it written before the removal's
                               tombstone is dead (recovery drops it), so
                               a commit that indexes it again writes it
                               anew, and a write of it in flight when the
                               tombstone is placed counts as not written.
                               The tier below clears it once a record of
                               it is written after the tombstone */
    uint32_t uses;          /* [mu] commits and matches that went through
                               it (saturating): the pool's priority */
    uint32_t pinned;        /* [mu] TTL pins holding it */
    uint32_t matched;       /* [mu] live matches holding it (counted by
                               sb_tier_match): while the tier keeps its
                               record, the record stays readable */
    size_t bytes;           /* [const] page_bytes or point_bytes: what it
                               counts against the budgets when resident */
    uint64_t stamp;         /* [mu] store tick of the last use */
    uint64_t tier_area[];   /* the tier's per-block area, blk_bytes long
                               (tier_ops.h), zeroed when the block is made,
                               freed with it; core never reads or writes
                               it (the tier's: its own lock rules) */
};
typedef struct sb_page sb_blk;

/* Eviction candidates: a binary min-heap of indexed blocks by heap_key (the
 * last-use stamp, refreshed lazily when a candidate reaches the top).
 * Capacity is reserved before an insertion links blocks, so pushes never
 * allocate. */
typedef struct sb_heap {
    sb_blk **a;             /* (cap) */
    size_t n, cap;
} sb_heap;

/* A TTL pin: references to the pages of one prefix (and maybe the point
 * state at its end, last). */
typedef struct sb_pin {
    uint64_t id;            /* [const] */
    struct sb_ns *ns;       /* [const] */
    uint64_t expiry_ns;     /* [const] store clock; 0: never */
    size_t n_pages;         /* [mu] shrinks when sb_ns_remove takes pages */
    sb_blk **pages;         /* [mu] (n_pages) one reference each */
    struct sb_pin *next;    /* [mu] store's pin list */
} sb_pin;

/* A namespace: one model identity and scope, one radix tree. */
struct sb_ns {
    sb_store *st;              /* [const] */
    uint64_t id;               /* [const] XXH3-64 of (identity, scope) */
    uint64_t scope_hash;       /* [const] XXH3-64 of scope: table bucket */
    sb_key root_key;           /* [const] parent key of page 0 */
    uint8_t *model_id;         /* [const] (model_id_bytes) */
    size_t model_id_bytes;     /* [const] */
    uint8_t *scope;            /* [const] (scope_bytes), NULL when empty */
    size_t scope_bytes;        /* [const] */
    uint32_t page_tokens;      /* [const] */
    uint32_t n_tensors;        /* [const] */
    uint32_t point_bytes;      /* [const] */
    uint32_t flags;            /* [const] SB_LAYOUT_* */
    uint32_t *bpt;             /* [const] (n_tensors) bytes per token */
    size_t *tensor_off;        /* [const] (n_tensors) offset inside a page */
    size_t page_bytes;         /* [const] */
    sb_pool_cls *cls[2];       /* [const] pool classes of its pages [0] and
                                  point states [1] */
    sb_node *root;             /* [mu] radix tree root (depth 0, no edge) */
    uint32_t holds;            /* [mu] open handles + live matches + pins:
                                  the namespace is freed only when this is 0
                                  and it holds no block */
    uint64_t ram_bytes;        /* [mu] bytes of blocks allocated in this ns */
    uint64_t free_bytes;       /* [mu] of which indexed and held by the index
                                  alone (evictable, structure permitting) */
    uint64_t indexed_pages;    /* [mu] */
    uint64_t index_tokens;     /* [mu] sum of edge lengths */
    sb_heap heap;              /* [mu] this namespace's eviction candidates */
    uint64_t n_blocks;         /* [mu] indexed blocks (pages + points) */
    sb_blk *newest_page;       /* [mu] last page of the latest commit: soft-protected */
    sb_blk *newest_point;      /* [mu] its point state, if any */
    struct sb_ns *next;        /* [mu] store hash bucket chain */
};

/* The tier below the RAM index (tier.h): its operations and its own state
 * (store/disk: struct sb_disk), opaque to core. */
typedef struct sb_tier {
    const struct sb_tier_ops *ops; /* [const] NULL: RAM only */
    void *state;                   /* [const] the tier's; NULL: RAM only */
} sb_tier;

/* The shared tier (shared.h): its operations and its own state
 * (store/remote), opaque to core. */
typedef struct sb_shared {
    const struct sb_shared_ops *ops; /* [const] NULL: no shared tier */
    void *state;                     /* [const] the tier's */
} sb_shared;

/* Evicted-page fingerprints, for SB_MISS_EVICTED (direct-mapped, lossy). */
#define SB_EVICTED_SLOTS 4096u

struct sb_store {
    pthread_mutex_t mu;
    sb_config cfg;             /* [const] copy, dir cleared */
    sb_mem mem;                /* allocator and fault hook (own locking) */
    sb_pool pool;              /* [mu] the page pool: block data, spares */
    sb_ns **buckets;           /* [mu] namespaces by scope hash */
    size_t n_buckets;          /* [mu] power of two */
    uint64_t n_ns;             /* [mu] */
    sb_heap heap;              /* [mu] every eviction candidate */
    uint64_t n_blocks;         /* [mu] indexed blocks of all namespaces */
    uint64_t tick;             /* [mu] logical clock for LRU stamps */
    uint64_t ram_bytes;        /* [mu] bytes of blocks allocated (reserved),
                                  the pool's spares and spares in transit
                                  included (pool.h) */
    uint64_t ram_pages;        /* [mu] pages allocated (reserved), spare and
                                  transit page buffers included */
    uint64_t free_bytes;       /* [mu] bytes of blocks held by the index alone */
    uint64_t free_pages;       /* [mu] pages held by the index alone; the
                                  other indexed pages are pinned */
    uint64_t indexed_bytes;    /* [mu] */
    uint64_t indexed_pages;    /* [mu] pages the index holds, all namespaces */
    uint64_t n_points;         /* [mu] indexed point states */
    uint64_t point_bytes;      /* [mu] */
    uint64_t index_bytes;      /* [mu] radix nodes and arrays */
    uint64_t index_nodes;      /* [mu] */
    sb_pin *pins;              /* [mu] live TTL pins */
    uint64_t n_pins;           /* [mu] */
    uint64_t next_pin_id;      /* [mu] */
    uint64_t evicted_fp[SB_EVICTED_SLOTS]; /* [mu] 0: empty */
    sb_stats stats;            /* [mu] counters (gauges filled on read) */
    sb_tier tier;              /* [const] the tier below the index (tier.h);
                                  tier.ops NULL: RAM only */
    sb_shared shared;          /* [const] the shared tier (shared.h);
                                  shared.ops NULL: none */
    uint32_t fg;               /* [mu] foreground marks (sb_store_foreground) */
    uint64_t disk_pages;       /* [mu] indexed pages with a record on disk */
    uint64_t disk_live_bytes;  /* [mu] bytes of the records of indexed blocks */
    struct sb_loader *loader;  /* [mu] the loader threads of asynchronous
                                  loads (aload.c), NULL until the first */
};

/* ---- clock ---------------------------------------------------------------- */

/* sb_now_ns -- the store clock (config hook or CLOCK_MONOTONIC). */
uint64_t sb_now_ns(sb_store *st);

/* ---- blocks (block.c) ----------------------------------------------------- */

/* sb_blk_alloc -- reserve budget for a block of ns (evicting if needed) and
 * allocate it with one reference. Unlocked: takes st->mu itself.
 * Returns: SB_OK; SB_ERR_BUDGET; SB_ERR_NOMEM. Evictions made to find room
 * stay made. */
int sb_blk_alloc(struct sb_ns *ns, int kind, sb_blk **out);

/* sb_blk_alloc_bytes -- bytes of a block's data allocation: the page, or
 * with a disk tier a point state padded to 4 KiB (O_DIRECT writes it from
 * the pool as is). */
size_t sb_blk_alloc_bytes(const struct sb_ns *ns, int kind);

/* sb_blk_new_disk -- a block of ns with no data, one reference, for a
 * record on disk (recovery). Returns NULL when out of memory. */
sb_blk *sb_blk_new_disk(struct sb_ns *ns, int kind);

/* sb_blk_reserve -- take the budget for the data of one block of ns (with
 * mu held; evicting if needed, spares first). With buf, a spare buffer of
 * the block's size is taken when the pool has one (buf->data NULL when
 * not: get memory with sb_blk_plan and sb_blk_pool_fill).
 * sb_blk_unreserve -- return a reservation that got no buffer.
 * Returns: SB_OK; SB_ERR_BUDGET (nothing reserved, *buf empty). */
int sb_blk_reserve(struct sb_ns *ns, int kind, sb_pbuf *buf);
void sb_blk_unreserve(struct sb_ns *ns, int kind);

/* sb_blk_release -- [mu] a block's data buffer goes back to the pool as a
 * spare, and its reservation with it (ns's bytes drop; the store's count
 * it as a spare now). */
void sb_blk_release(struct sb_ns *ns, int kind, sb_pbuf buf);

/* sb_blk_plan -- [mu] a reserving caller needs `need` new buffers of ns's
 * kind: reserve, in transit, the extra spares the next chunk should carry
 * (as many as the budgets have room for without evicting). Returns how
 * many; pass it to sb_blk_pool_fill. */
size_t sb_blk_plan(struct sb_ns *ns, int kind, size_t need);

/* sb_blk_plan_cancel -- [mu] give back extra spares sb_blk_plan reserved
 * that will not be made. */
void sb_blk_plan_cancel(struct sb_ns *ns, int kind, size_t extra);

/* sb_blk_pool_fill -- unlocked (takes mu to publish): map chunks for
 * bufs[0, need) plus `extra` spares (sb_blk_plan's), which join the pool.
 * Returns: SB_OK; SB_ERR_NOMEM (bufs untouched, the transit reservation
 * given back; the callers' own reservations stay theirs to return). */
int sb_blk_pool_fill(struct sb_ns *ns, int kind, sb_pbuf *bufs, size_t need, size_t extra);

/* sb_blk_install -- give a block without data the buffer buf (reserved
 * with sb_blk_reserve, sb_blk_alloc_bytes long, from the pool); a block
 * that gained data meanwhile keeps its own and buf goes back to the pool
 * with its reservation. A clean, indexed block becomes an eviction
 * candidate. */
void sb_blk_install(sb_blk *b, sb_pbuf buf);

/* sb_blk_drop_data -- free a clean block's data (held by the index alone):
 * it stays indexed, on disk only. */
void sb_blk_drop_data(sb_blk *b);

/* sb_blk_ref / sb_blk_unref -- change a block's refcount, keeping the
 * pinned-page gauge right; the last unref frees the block. */
void sb_blk_ref(sb_blk *b);
void sb_blk_unref(sb_blk *b);

/* sb_blk_index / sb_blk_unindex -- the index takes / drops its reference;
 * the block enters / leaves both eviction heaps (room for it must have been
 * reserved with sb_heap_reserve). */
void sb_blk_index(sb_blk *b, sb_node *node);
void sb_blk_unindex(sb_blk *b);

/* ---- eviction heaps (heap.c) ---------------------------------------------- */

/* sb_heap_reserve -- make room in the store's and ns's heaps for `extra`
 * more indexed blocks. Returns: SB_OK; SB_ERR_NOMEM (nothing changed). */
int sb_heap_reserve(struct sb_ns *ns, uint64_t extra);

/* sb_heap_push / sb_heap_remove -- enter / leave one heap (a block not in
 * it, or in it, respectively). sb_heap_fix restores order after b's key
 * changed. sb_heap_top is the minimum or NULL. */
void sb_heap_push(sb_heap *h, sb_blk *b, int which);
void sb_heap_remove(sb_heap *h, sb_blk *b, int which);
void sb_heap_fix(sb_heap *h, sb_blk *b, int which);
static inline sb_blk *sb_heap_top(const sb_heap *h)
{
    return h->n ? h->a[0] : NULL;
}
void sb_heap_free(sb_heap *h);

/* sb_blk_candidate -- offer b for eviction in both heaps (where it is not
 * already): it was just indexed, or just became a leaf page.
 * sb_blk_unpark -- re-offer b where it was parked: it lost its last outside
 * reference. */
void sb_blk_candidate(sb_blk *b);
void sb_blk_unpark(sb_blk *b);

/* sb_blk_pin_run / sb_blk_unpin_run -- take / drop one reference on each
 * of pages[0, n), all pages of ns, updating the gauges once (the match
 * path). pin_run needs every page indexed and stamps it used now. */
void sb_blk_pin_run(struct sb_ns *ns, sb_blk **pages, size_t n);
void sb_blk_unpin_run(struct sb_ns *ns, sb_blk **pages, size_t n);

/* sb_blk_touch -- stamp a block as used now. */
static inline void sb_blk_touch(sb_store *st, sb_blk *b)
{
    b->stamp = st->tick;
}

/* ---- eviction and pins (evict.c) ------------------------------------------ */

/* sb_blk_droppable -- the RAM tier may take b's data without taking it out
 * of the index: it is clean, or dirty under write-back (eviction queues
 * it for writing). */
bool sb_blk_droppable(const sb_blk *b);

/* sb_evict_until -- evict until need_bytes and need_pages more fit in the
 * store's budgets and need_bytes more in ns's. With take (not NULL, and
 * take->data NULL on entry), where the store's budget is what is short, a
 * spare of class cls (one an eviction just left, typically) is handed
 * over in *take rather than given back to the system (its reservation
 * leaves st->ram_bytes / ram_pages, as with sb_pool_take), so a
 * reservation under a full budget recycles the evicted page's buffer
 * instead of unmapping it and mapping and faulting in a new one. (Under a
 * namespace's budget alone the spare stays in the pool, where the
 * reservation's fill takes it.)
 * Returns: SB_OK; SB_ERR_BUDGET (everything left is pinned; a spare taken
 * meanwhile stays in *take, the caller's to give back). */
int sb_evict_until(sb_store *st, struct sb_ns *ns, uint64_t need_bytes,
                   uint64_t need_pages, struct sb_pool_cls *cls, sb_pbuf *take);

/* sb_pins_expire -- drop pins whose TTL has passed. */
void sb_pins_expire(sb_store *st);

/* sb_pins_supersede -- every pin holding old (a partial page being
 * superseded) holds repl instead. */
void sb_pins_supersede(sb_store *st, sb_blk *old, sb_blk *repl);

/* sb_pins_let_go -- every pin of ns lets go of the blocks it holds that
 * sb_ns_remove took out of the index (marked removed): a pin keeps state
 * in the index, and these left it. */
void sb_pins_let_go(sb_store *st, struct sb_ns *ns);

/* sb_pin_free -- drop a pin's references and free it (already unlinked). */
void sb_pin_free(sb_store *st, sb_pin *p);

/* sb_evicted_note / sb_evicted_seen -- remember / ask whether the page with
 * this content key was evicted (a lossy, direct-mapped memory). */
void sb_evicted_note(sb_store *st, const sb_key *key);
bool sb_evicted_seen(sb_store *st, const sb_key *key);

/* ---- namespaces (ns.c) ---------------------------------------------------- */

/* sb_ns_free_all -- free every namespace of a closing store. */
void sb_ns_free_all(sb_store *st);

/* sb_tokens_check -- the checks of a call's token sequence (ns not NULL):
 * SB_OK; SB_ERR_NO_TOKENS (n 0); SB_ERR_INVAL (NULL tokens);
 * SB_ERR_TOO_MANY_TOKENS (past max_seq_tokens). */
int sb_tokens_check(const struct sb_ns *ns, const uint32_t *tokens, size_t n);

/* sb_ns_maybe_free -- free ns if it has no handles and holds nothing. */
void sb_ns_maybe_free(struct sb_ns *ns);

/* sb_commit_locked -- index tokens[0, n) with pages[] (index.c; see the
 * walkthrough there). zero_copy: callers' pages are deduplicated against
 * the index's. oc (may be NULL) counts the pages and point state it adds
 * (pages_new, points_new). Returns: SB_OK; SB_ERR_INVAL;
 * SB_ERR_PAGE_STATE; SB_ERR_RANGE (no page for a region the index lacks);
 * SB_ERR_NOMEM. On failure nothing changed. */
int sb_commit_locked(struct sb_ns *ns, const uint32_t *tokens, size_t n,
                     sb_blk **pages, sb_blk *point, bool zero_copy, sb_write_outcome *oc);

/* ---- keys ------------------------------------------------------------------- */

/* sb_key_chain -- the content key of a page: XXH3-128 of the parent key and
 * the page's n tokens (little-endian uint32). */
sb_key sb_key_chain(const sb_key *parent, const uint32_t *tokens, size_t n);

#endif /* SB_INTERNAL_H */
