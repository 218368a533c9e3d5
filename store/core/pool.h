/* pool.h -- the page pool: the data buffers of blocks (pages and point
 * states), carved from large pre-faulted chunks and recycled by size.
 *
 * Why. A buffer touched for the first time costs a page fault per 4 KiB
 * inside whoever touches it first -- for a restore that is the kernel,
 * pinning the buffer for an O_DIRECT read on the restoring thread -- and
 * on the development VM one fault cost about 11 us, more than reading the
 * 4 KiB. So the pool never gives a buffer back on free: it stays, faulted
 * in, as a spare of its size, and the next block of that size takes it.
 * New memory comes in chunks advised for transparent huge pages and
 * populated in one call (MADV_POPULATE_WRITE), not fault by fault; huge
 * pages also hand the device physically contiguous buffers (fewer segments
 * per request) and the kernel fewer pages to pin per I/O.
 *
 * Layout. A chunk is one anonymous mapping, 2 MiB aligned when it is at
 * least that long, holding n_slots slots of one class, back to back:
 *
 *     base (2 MiB aligned)
 *     | slot 0        | slot 1        | ...           | slot n-1      | slack |
 *     |<-- stride --->|                                               ^ map_bytes
 *     ^ a buffer (b->data) is the start of its slot; data_bytes of it are
 *       the block's, the rest (stride - data_bytes) is alignment padding
 *
 * A chunk of at least 2 MiB maps whole huge pages: the slack after its
 * last slot fills the last one, when that is at most an eighth of the
 * slots' bytes (else the mapping ends at the next 4 KiB and its tail gets
 * 4 KiB pages). The slack is never a slot and is not counted in the
 * budgets; the plan below keeps it under one slot where the budget lets
 * it. Why: a tail of 4 KiB pages costs every O_DIRECT read into it the
 * pinning of each 4 KiB, and on the development VM the first read of a
 * 4 KiB page the device had just written cost about 6 us (a 192 KiB page
 * checked in 300 us instead of 6): a restore of 128 such pages spent 4 of
 * its 9.5 ms there.
 *
 * Classes. One per distinct buffer shape: data bytes, what a buffer counts
 * against the budgets, whether it is a page (counts against ram_pages) and
 * its alignment. A namespace's page and point-state shapes are looked up
 * when it is created (sb_pool_class); classes live until the store closes.
 *
 * Budgets. A spare keeps the reservation of the block it was, so
 *
 *     st->ram_bytes = sum of ns->ram_bytes + spare_bytes + transit_bytes
 *     st->ram_pages = pages reserved by blocks + spare_pages + transit_pages
 *
 * (sb_store_check verifies both against the classes' spare stacks): blocks
 * and spares together stay within ram_bytes and ram_pages. A reservation
 * takes a spare of its class first (block.c); a reservation that needs
 * room gives spares of any class back to the system (sb_pool_trim) before
 * anything is evicted. Transit: when a chunk is made, the slots beyond
 * what the caller needs now are reserved as spares before the chunk exists
 * (only as many as the budget has room for without evicting), then pushed
 * once it is mapped.
 *
 * Growth. A class's first chunk holds what its first caller needs; each
 * later one as many slots as the class has already (doubling), at most
 * SB_POOL_CHUNK_MAX bytes, and at least what its caller needs, rounded up
 * to fill its last huge page; the slots beyond what the caller needs are
 * capped by the budget's room. n slots that take several chunks are split
 * into chunks of equal size (512 of 192 KiB: 4 of 128, 24 MiB each). So
 * a small store never maps much more than it uses, and a large one soon
 * makes chunks long enough for huge pages (2 MiB) and few of them.
 *
 * Trimming frees one spare slot at a time (munmap of its range; a huge
 * page partly unmapped is split and its freed part returned when the
 * kernel needs the memory); a chunk whose slots are all trimmed is
 * unmapped whole. A trimmed slot is never reused.
 *
 * Thread safety: everything marked [mu] expects the store mutex held;
 * sb_pool_grow runs unlocked (it maps and populates) on a private chunk,
 * which sb_pool_link publishes under the mutex.
 */
#ifndef SB_POOL_H
#define SB_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc.h"

#define SB_POOL_CHUNK_MAX (32u << 20)   /* the largest chunk, bytes */

typedef struct sb_pool_cls sb_pool_cls;

/* One mapping of slots of one class. */
typedef struct sb_chunk {
    uint8_t *base;             /* [const] the mapping (2 MiB aligned if long) */
    size_t map_bytes;          /* [const] its length */
    sb_pool_cls *cls;          /* [const] */
    uint32_t n_slots;          /* [const] */
    uint32_t n_live;           /* [mu] slots not trimmed */
    bool trimmed;              /* [mu] a slot was: its range has holes */
    struct sb_chunk *next;     /* [mu] the pool's list */
    struct sb_chunk *prev;     /* [mu] */
} sb_chunk;

/* A buffer: its data and the chunk it is in. */
typedef struct sb_pbuf {
    uint8_t *data;             /* slot start, NULL for none */
    sb_chunk *chunk;
} sb_pbuf;

struct sb_pool_cls {
    size_t data_bytes;         /* [const] bytes of a buffer */
    size_t budget_bytes;       /* [const] what one counts against ram_bytes */
    size_t align;              /* [const] 4096 or 64 */
    size_t stride;             /* [const] slot bytes: data_bytes rounded up to align */
    bool page;                 /* [const] counts against ram_pages */
    sb_pbuf *spare;            /* [mu] (n_spare) the spares, a stack */
    size_t n_spare;            /* [mu] */
    size_t spare_cap;          /* [mu] room in spare: at least n_slots */
    size_t n_transit;          /* [mu] spares reserved for chunks being made */
    size_t n_slots;            /* [mu] slots of the class's chunks, live or in
                                  a chunk being made */
    struct sb_pool_cls *next;  /* [mu] the pool's list */
};

typedef struct sb_pool {
    sb_pool_cls *classes;      /* [mu] */
    sb_chunk *chunks;          /* [mu] every chunk linked */
    uint64_t n_chunks;         /* [mu] gauge */
    uint64_t resident_bytes;   /* [mu] gauge: live slots' bytes */
    uint64_t spare_bytes;      /* [mu] budget bytes of the spares */
    uint64_t spare_pages;      /* [mu] ...of them pages */
    uint64_t transit_bytes;    /* [mu] budget bytes of spares in transit */
    uint64_t transit_pages;    /* [mu] */
    uint64_t trimmed_bytes;    /* [mu] counter: spare bytes given back */
    uint64_t grown_bytes;      /* [mu] counter: slot bytes mapped and populated */
} sb_pool;

/* sb_pool_init / sb_pool_fini -- an empty pool; unmap every chunk (no
 * block may still use one) and free the classes. */
void sb_pool_init(sb_pool *p);
void sb_pool_fini(sb_pool *p);

/* sb_pool_class -- [mu] the class of buffers of data_bytes (aligned to
 * align: 4096 or 64) counting budget_bytes (and a page when page), made if
 * new. Returns NULL when out of memory (mem's fault hook counts). */
sb_pool_cls *sb_pool_class(sb_pool *p, sb_mem *mem, size_t data_bytes, size_t align,
                           size_t budget_bytes, bool page);

/* sb_pool_take -- [mu] pop a spare of c into *out; its budget bytes leave
 * spare_bytes (the caller moves them where they now belong). Returns false
 * when c has none. */
bool sb_pool_take(sb_pool *p, sb_pool_cls *c, sb_pbuf *out);

/* sb_pool_put -- [mu] buf (a buffer of c) becomes a spare; its budget
 * bytes join spare_bytes. Never fails (the stack has room for every slot). */
void sb_pool_put(sb_pool *p, sb_pool_cls *c, sb_pbuf buf);

/* sb_pool_plan -- [mu] how many slots the next chunk of c should hold for
 * a caller who needs `need` of them: the doubling rule, at least need,
 * then as many more as fit before the end of its last huge page (within
 * SB_POOL_CHUNK_MAX). */
size_t sb_pool_plan(const sb_pool_cls *c, size_t need);

/* sb_pool_transit -- [mu] reserve (sign 1) or give back (-1) n spares of c
 * in transit. */
void sb_pool_transit(sb_pool *p, sb_pool_cls *c, size_t n, int sign);

/* sb_pool_grow -- unlocked: map and populate chunks of class c holding n
 * slots in all (several chunks of equal size when n slots exceed
 * SB_POOL_CHUNK_MAX; see Layout for their length), and
 * write the n buffers to out. The chunks are private to the caller until
 * sb_pool_link. Returns: SB_OK; SB_ERR_NOMEM (nothing mapped; mem's fault
 * hook counts one allocation per call). */
int sb_pool_grow(sb_mem *mem, sb_pool_cls *c, size_t n, sb_pbuf *out);

/* sb_pool_link -- [mu] publish the chunks of out[0, n) made by
 * sb_pool_grow (each chunk once) and make room in c's spare stack for
 * their slots. Returns: SB_OK; SB_ERR_NOMEM (nothing linked: the caller
 * gives them up with sb_pool_unmap). */
int sb_pool_link(sb_pool *p, sb_pool_cls *c, const sb_pbuf *out, size_t n);

/* sb_pool_map -- unlocked: map len bytes rounded up to whole huge pages
 * (at least one), 2 MiB aligned, advised for huge pages and populated, as
 * a chunk is: scratch a device writes into (a disk tier's record heads).
 * Sets *mapped to the length mapped (0 on failure); the caller unmaps it
 * with munmap(p, *mapped). NULL when the system refuses. */
void *sb_pool_map(size_t len, size_t *mapped);

/* sb_pool_unmap -- unlocked: unmap the chunks of out[0, n), never linked. */
void sb_pool_unmap(const sb_pbuf *out, size_t n);

/* sb_pool_discard -- [mu] give buf (no spare, not counted anywhere) back to
 * the system: its slot is trimmed. */
void sb_pool_discard(sb_pool *p, sb_pbuf buf);

/* sb_pool_trim -- [mu] give spares back to the system, any class, until
 * at least bytes budget bytes and pages pages were freed, or none is left.
 * Adds what it freed to *freed_bytes and *freed_pages (the caller takes
 * them off the store's counters). */
void sb_pool_trim(sb_pool *p, uint64_t bytes, uint64_t pages, uint64_t *freed_bytes,
                  uint64_t *freed_pages);

#endif /* SB_POOL_H */
