/* block.c -- refcounted pool blocks (pages, point states): allocation under
 * the budgets, references, and entry into / exit from the index and its
 * eviction heaps. */
#include <string.h>

#include "tier.h"
#include "internal.h"
#include "radix.h"

/* ---- references ------------------------------------------------------------- */

/* Resident and held by the index alone: eviction could free its data. An
 * indexed resident page that is not free is pinned (stats.pinned_pages =
 * indexed_pages - free_pages counts disk-only pages as pinned too). */
static bool is_free(const sb_blk *b)
{
    return b->indexed && b->refs == 1 && b->data;
}

/* Keep the evictable gauges right across a change of b's refs or indexed
 * state; `was` is is_free(b) before the change. */
static void track_free(sb_blk *b, bool was)
{
    bool now = is_free(b);
    if (was == now)
        return;
    sb_ns *ns = b->ns;
    sb_store *st = ns->st;
    int64_t sign = now ? 1 : -1;
    st->free_bytes += (uint64_t)(sign * (int64_t)b->bytes);
    ns->free_bytes += (uint64_t)(sign * (int64_t)b->bytes);
    if (b->kind == SB_BLK_PAGE)
        st->free_pages += (uint64_t)sign;
}

static void blk_free(sb_blk *b)
{
    sb_ns *ns = b->ns;
    sb_store *st = ns->st;
    if (b->data) {
        sb_pool_free(&st->mem, b->data, sb_blk_alloc_bytes(ns, b->kind));
        sb_blk_unreserve(ns, b->kind);
    }
    sb_free(b);
    /* The namespace may now be empty; callers at a safe point call
     * sb_ns_maybe_free (freeing it here could pull it from under a walk). */
}

void sb_blk_ref(sb_blk *b)
{
    bool was_free = is_free(b);
    b->refs++;
    track_free(b, was_free);
}

void sb_blk_unref(sb_blk *b)
{
    bool was_free = is_free(b);
    b->refs--;
    track_free(b, was_free);
    if (b->refs == 0)
        blk_free(b);
    else if (b->indexed && b->refs == 1)
        sb_blk_unpark(b); /* held by the index alone again */
}

void sb_blk_unpark(sb_blk *b)
{
    sb_ns *ns = b->ns;
    if (b->heap_pos[SB_HEAP_STORE] == SB_HEAP_PARKED)
        sb_heap_push(&ns->st->heap, b, SB_HEAP_STORE);
    if (b->heap_pos[SB_HEAP_NS] == SB_HEAP_PARKED)
        sb_heap_push(&ns->heap, b, SB_HEAP_NS);
}

void sb_blk_candidate(sb_blk *b)
{
    sb_ns *ns = b->ns;
    if (!b->data || !b->indexed)
        return; /* nothing to evict from RAM */
    if (b->heap_pos[SB_HEAP_STORE] >= SB_HEAP_PARKED)
        sb_heap_push(&ns->st->heap, b, SB_HEAP_STORE);
    if (b->heap_pos[SB_HEAP_NS] >= SB_HEAP_PARKED)
        sb_heap_push(&ns->heap, b, SB_HEAP_NS);
}

/* b leaves both eviction heaps (wherever it stands in them). */
static void heaps_leave(sb_blk *b)
{
    sb_ns *ns = b->ns;
    if (b->heap_pos[SB_HEAP_STORE] < SB_HEAP_PARKED)
        sb_heap_remove(&ns->st->heap, b, SB_HEAP_STORE);
    if (b->heap_pos[SB_HEAP_NS] < SB_HEAP_PARKED)
        sb_heap_remove(&ns->heap, b, SB_HEAP_NS);
    b->heap_pos[SB_HEAP_STORE] = b->heap_pos[SB_HEAP_NS] = SB_HEAP_OUT;
}

/* ---- allocation ------------------------------------------------------------- */

size_t sb_blk_alloc_bytes(const sb_ns *ns, int kind)
{
    if (kind == SB_BLK_PAGE)
        return ns->page_bytes;
    size_t align = sb_tier_data_align(ns->st);
    if (align)
        return ((size_t)ns->point_bytes + align - 1) / align * align;
    return ns->point_bytes;
}

int sb_blk_reserve(sb_ns *ns, int kind)
{
    sb_store *st = ns->st;
    size_t bytes = kind == SB_BLK_PAGE ? ns->page_bytes : ns->point_bytes;
    uint64_t pages = kind == SB_BLK_PAGE ? 1 : 0;
    int rc = sb_evict_until(st, ns, bytes, pages);
    if (rc != SB_OK) {
        st->stats.budget_denials++;
        return rc;
    }
    st->ram_bytes += bytes;
    st->ram_pages += pages;
    ns->ram_bytes += bytes;
    return SB_OK;
}

void sb_blk_unreserve(sb_ns *ns, int kind)
{
    sb_store *st = ns->st;
    size_t bytes = kind == SB_BLK_PAGE ? ns->page_bytes : ns->point_bytes;
    st->ram_bytes -= bytes;
    ns->ram_bytes -= bytes;
    if (kind == SB_BLK_PAGE)
        st->ram_pages--;
}

/* A data buffer for a block of ns: pages 4 KiB aligned; point states too,
 * padded with zeros, when a disk tier writes them. NULL when out of memory. */
static uint8_t *data_alloc(sb_ns *ns, int kind)
{
    sb_store *st = ns->st;
    size_t n = sb_blk_alloc_bytes(ns, kind);
    size_t align = kind == SB_BLK_PAGE ? 4096 : sb_tier_data_align(st);
    uint8_t *p = sb_pool_alloc(&st->mem, n, align ? align : 64);
    if (p && kind == SB_BLK_POINT && n > ns->point_bytes)
        memset(p + ns->point_bytes, 0, n - ns->point_bytes);
    return p;
}

static sb_blk *blk_new(sb_ns *ns, int kind)
{
    sb_blk *b = sb_calloc(&ns->st->mem, 1, sizeof *b);
    if (!b)
        return NULL;
    b->ns = ns;
    b->heap_pos[SB_HEAP_STORE] = b->heap_pos[SB_HEAP_NS] = SB_HEAP_OUT;
    b->refs = 1;
    b->kind = (uint8_t)kind;
    b->bytes = kind == SB_BLK_PAGE ? ns->page_bytes : ns->point_bytes;
    return b;
}

sb_blk *sb_blk_new_disk(sb_ns *ns, int kind)
{
    return blk_new(ns, kind);
}

int sb_blk_alloc(sb_ns *ns, int kind, sb_blk **out)
{
    sb_store *st = ns->st;
    *out = NULL;

    /* Reserve the budget first (evicting), so concurrent allocations cannot
     * overshoot it together; give it back if the allocation fails. */
    pthread_mutex_lock(&st->mu);
    int rc = sb_blk_reserve(ns, kind);
    pthread_mutex_unlock(&st->mu);
    if (rc != SB_OK)
        return rc;

    sb_blk *b = blk_new(ns, kind);
    uint8_t *data = b ? data_alloc(ns, kind) : NULL;
    if (!data) {
        sb_free(b);
        pthread_mutex_lock(&st->mu);
        sb_blk_unreserve(ns, kind);
        pthread_mutex_unlock(&st->mu);
        return SB_ERR_NOMEM;
    }
    b->data = data;
    *out = b;
    return SB_OK;
}

/* ---- resident data of disk blocks ------------------------------------------- */

void sb_blk_install(sb_blk *b, uint8_t *buf)
{
    sb_ns *ns = b->ns;
    if (b->data) { /* another reader was first */
        sb_pool_free(&ns->st->mem, buf, sb_blk_alloc_bytes(ns, b->kind));
        sb_blk_unreserve(ns, b->kind);
        return;
    }
    bool was_free = is_free(b);
    b->data = buf;
    track_free(b, was_free);
    sb_blk_candidate(b);
}

void sb_blk_drop_data(sb_blk *b)
{
    sb_ns *ns = b->ns;
    sb_store *st = ns->st;
    heaps_leave(b);
    bool was_free = is_free(b);
    uint8_t *data = b->data;
    b->data = NULL;
    track_free(b, was_free);
    sb_pool_free(&st->mem, data, sb_blk_alloc_bytes(ns, b->kind));
    sb_blk_unreserve(ns, b->kind);
}

/* ---- the index's reference ---------------------------------------------------- */

void sb_blk_index(sb_blk *b, sb_node *node)
{
    sb_ns *ns = b->ns;
    sb_store *st = ns->st;
    bool was_free = is_free(b);
    b->node = node;
    b->indexed = 1;
    b->committed = 1;
    b->refs++;
    track_free(b, was_free);
    if (b->kind == SB_BLK_PAGE) {
        ns->indexed_pages++;
        st->indexed_pages++;
        st->indexed_bytes += b->bytes;
    } else {
        st->n_points++;
        st->point_bytes += b->bytes;
    }
    ns->n_blocks++;
    st->n_blocks++;
    /* Not a candidate yet: the caller offers it (sb_blk_candidate) once
     * it is stamped and known to be a leaf page or a point state. */
    b->heap_pos[SB_HEAP_STORE] = b->heap_pos[SB_HEAP_NS] = SB_HEAP_OUT;
}

void sb_blk_pin_run(sb_ns *ns, sb_blk **pages, size_t n)
{
    sb_store *st = ns->st;
    uint64_t newly = 0, bytes = 0;
    for (size_t i = 0; i < n; i++) {
        sb_blk *b = pages[i];
        if (b->refs == 1 && b->data) { /* indexed: was held by the index alone */
            newly++;
            bytes += b->bytes;
        }
        b->refs++;
        b->stamp = st->tick;
        b->hit = 1;
    }
    st->free_pages -= newly;
    st->free_bytes -= bytes;
    ns->free_bytes -= bytes;
}

void sb_blk_unpin_run(sb_ns *ns, sb_blk **pages, size_t n)
{
    sb_store *st = ns->st;
    uint64_t freed = 0, bytes = 0;
    for (size_t i = n; i-- > 0;) {
        sb_blk *b = pages[i];
        if (!b->indexed) { /* superseded while held: the general path */
            sb_blk_unref(b);
            continue;
        }
        if (--b->refs == 1 && b->data) {
            freed++;
            bytes += b->bytes;
            sb_blk_unpark(b);
        }
    }
    st->free_pages += freed;
    st->free_bytes += bytes;
    ns->free_bytes += bytes;
}

void sb_blk_unindex(sb_blk *b)
{
    sb_ns *ns = b->ns;
    sb_store *st = ns->st;
    heaps_leave(b);
    ns->n_blocks--;
    st->n_blocks--;
    if (b->kind == SB_BLK_PAGE) {
        ns->indexed_pages--;
        st->indexed_pages--;
        st->indexed_bytes -= b->bytes;
    } else {
        st->n_points--;
        st->point_bytes -= b->bytes;
    }
    if (ns->newest_page == b)
        ns->newest_page = NULL;
    if (ns->newest_point == b)
        ns->newest_point = NULL;
    if (b->disk == SB_DISK_CLEAN)
        sb_tier_forget(st, b);
    sb_tier_leave(st, b);
    bool was_free = is_free(b);
    b->indexed = 0;
    b->node = NULL;
    b->refs--;
    track_free(b, was_free);
    if (b->refs == 0)
        blk_free(b);
}
