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
    if (b->data)
        sb_blk_release(b->ns, b->kind, (sb_pbuf){ b->data, b->chunk });
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

/* What one block of kind counts against the budgets: bytes, pages. */
static size_t budget_bytes(const sb_ns *ns, int kind)
{
    return kind == SB_BLK_PAGE ? ns->page_bytes : ns->point_bytes;
}

static sb_pool_cls *cls_of(const sb_ns *ns, int kind)
{
    return ns->cls[kind == SB_BLK_PAGE ? 0 : 1];
}

/* A spare taken for a reservation that failed: back to the pool if the
 * budgets still have room for it (the store's counters may have moved
 * while eviction waited), else back to the system. */
static void spare_return(sb_store *st, sb_pool_cls *c, sb_pbuf buf)
{
    if (st->ram_bytes + c->budget_bytes <= st->cfg.ram_bytes &&
        st->ram_pages + c->page <= st->cfg.ram_pages) {
        st->ram_bytes += c->budget_bytes;
        st->ram_pages += c->page;
        sb_pool_put(&st->pool, c, buf);
    } else {
        sb_pool_discard(&st->pool, buf);
    }
}

int sb_blk_reserve(sb_ns *ns, int kind, sb_pbuf *buf)
{
    sb_store *st = ns->st;
    size_t bytes = budget_bytes(ns, kind);
    uint64_t pages = kind == SB_BLK_PAGE ? 1 : 0;
    sb_pbuf spare = { NULL, NULL };
    /* A spare's reservation leaves the store's counters here and comes
     * back below as this block's (a pure move when there is room). */
    if (buf && sb_pool_take(&st->pool, cls_of(ns, kind), &spare)) {
        st->ram_bytes -= bytes;
        st->ram_pages -= pages;
    }
    int rc = sb_evict_until(st, ns, bytes, pages, cls_of(ns, kind), buf ? &spare : NULL);
    if (rc != SB_OK) {
        st->stats.budget_denials++;
        if (spare.data)
            spare_return(st, cls_of(ns, kind), spare);
        return rc;
    }
    st->ram_bytes += bytes;
    st->ram_pages += pages;
    ns->ram_bytes += bytes;
    if (buf)
        *buf = spare;
    return SB_OK;
}

void sb_blk_unreserve(sb_ns *ns, int kind)
{
    sb_store *st = ns->st;
    size_t bytes = budget_bytes(ns, kind);
    st->ram_bytes -= bytes;
    ns->ram_bytes -= bytes;
    if (kind == SB_BLK_PAGE)
        st->ram_pages--;
}

void sb_blk_release(sb_ns *ns, int kind, sb_pbuf buf)
{
    ns->ram_bytes -= budget_bytes(ns, kind);
    sb_pool_put(&ns->st->pool, cls_of(ns, kind), buf);
}

/* Reserve up to `want` spares of ns's kind in transit, as many as the
 * store's budgets have room for without evicting. Returns how many. */
static size_t transit_room(sb_ns *ns, int kind, size_t want)
{
    sb_store *st = ns->st;
    const sb_config *cfg = &st->cfg;
    sb_pool_cls *c = cls_of(ns, kind);
    uint64_t room = st->ram_bytes < cfg->ram_bytes ? cfg->ram_bytes - st->ram_bytes : 0;
    if (c->budget_bytes && room / c->budget_bytes < want)
        want = (size_t)(room / c->budget_bytes);
    if (c->page) {
        uint64_t rp = st->ram_pages < cfg->ram_pages ? cfg->ram_pages - st->ram_pages : 0;
        if (rp < want)
            want = (size_t)rp;
    }
    if (want) {
        sb_pool_transit(&st->pool, c, want, 1);
        st->ram_bytes += want * c->budget_bytes;
        st->ram_pages += c->page ? want : 0;
    }
    return want;
}

size_t sb_blk_plan(sb_ns *ns, int kind, size_t need)
{
    return transit_room(ns, kind, sb_pool_plan(cls_of(ns, kind), need) - need);
}

void sb_blk_plan_cancel(sb_ns *ns, int kind, size_t extra)
{
    sb_store *st = ns->st;
    sb_pool_cls *c = cls_of(ns, kind);
    sb_pool_transit(&st->pool, c, extra, -1);
    st->ram_bytes -= extra * c->budget_bytes;
    st->ram_pages -= c->page ? extra : 0;
}

int sb_blk_pool_fill(sb_ns *ns, int kind, sb_pbuf *bufs, size_t need, size_t extra)
{
    sb_store *st = ns->st;
    sb_pool_cls *c = cls_of(ns, kind);
    size_t n = need + extra;
    sb_pbuf *all = extra ? sb_malloc(&st->mem, n * sizeof *all) : bufs;
    int rc = all ? sb_pool_grow(&st->mem, c, n, all) : SB_ERR_NOMEM;
    pthread_mutex_lock(&st->mu);
    if (rc == SB_OK && (rc = sb_pool_link(&st->pool, c, all, n)) != SB_OK) {
        pthread_mutex_unlock(&st->mu);
        sb_pool_unmap(all, n);
        pthread_mutex_lock(&st->mu);
    }
    if (extra && rc == SB_OK) { /* the transit reservation becomes the spares' */
        sb_pool_transit(&st->pool, c, extra, -1);
        for (size_t i = need; i < n; i++)
            sb_pool_put(&st->pool, c, all[i]);
    } else if (extra) {
        sb_blk_plan_cancel(ns, kind, extra);
    }
    pthread_mutex_unlock(&st->mu);
    if (rc == SB_OK && all != bufs && need)
        memcpy(bufs, all, need * sizeof *bufs);
    if (all != bufs)
        sb_free(all);
    return rc;
}

/* A block of ns with no data and one reference, and the tier's area after
 * its header (internal.h), zeroed, in the same allocation. NULL when out of
 * memory. */
static sb_blk *blk_new(sb_ns *ns, int kind)
{
    sb_blk *b = sb_calloc(&ns->st->mem, 1, sizeof *b + sb_tier_blk_bytes(ns->st));
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
    sb_blk *b = blk_new(ns, kind);
    if (!b)
        return SB_ERR_NOMEM;

    /* Reserve the budget first (evicting), so concurrent allocations cannot
     * overshoot it together; give it back if the allocation fails. */
    sb_pbuf buf;
    size_t extra = 0;
    pthread_mutex_lock(&st->mu);
    int rc = sb_blk_reserve(ns, kind, &buf);
    if (rc == SB_OK && !buf.data)
        extra = sb_blk_plan(ns, kind, 1);
    pthread_mutex_unlock(&st->mu);
    if (rc == SB_OK && !buf.data && (rc = sb_blk_pool_fill(ns, kind, &buf, 1, extra)) != SB_OK) {
        pthread_mutex_lock(&st->mu);
        sb_blk_unreserve(ns, kind);
        pthread_mutex_unlock(&st->mu);
    }
    if (rc != SB_OK) {
        sb_free(b);
        return rc;
    }
    /* A point state's padding (a disk tier writes the whole buffer) is
     * zero, whatever the buffer held before. */
    size_t n = sb_blk_alloc_bytes(ns, kind);
    if (kind == SB_BLK_POINT && n > ns->point_bytes)
        memset(buf.data + ns->point_bytes, 0, n - ns->point_bytes);
    b->data = buf.data;
    b->chunk = buf.chunk;
    *out = b;
    return SB_OK;
}

/* ---- resident data of disk blocks ------------------------------------------- */

void sb_blk_install(sb_blk *b, sb_pbuf buf)
{
    sb_ns *ns = b->ns;
    if (b->data) { /* another reader was first */
        sb_blk_release(ns, b->kind, buf);
        return;
    }
    bool was_free = is_free(b);
    b->data = buf.data;
    b->chunk = buf.chunk;
    track_free(b, was_free);
    sb_blk_candidate(b);
}

void sb_blk_drop_data(sb_blk *b)
{
    sb_ns *ns = b->ns;
    heaps_leave(b);
    bool was_free = is_free(b);
    sb_pbuf buf = { b->data, b->chunk };
    b->data = NULL;
    b->chunk = NULL;
    track_free(b, was_free);
    sb_blk_release(ns, b->kind, buf);
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
    if (b->below & SB_BELOW_KEPT)
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

/* ---- prefaulting --------------------------------------------------------------- */

int sb_ns_prefault(sb_ns *ns, size_t n_pages, size_t *n_ready)
{
    if (n_ready)
        *n_ready = 0;
    if (!ns)
        return SB_ERR_INVAL;
    sb_store *st = ns->st;
    pthread_mutex_lock(&st->mu);
    size_t have = cls_of(ns, SB_BLK_PAGE)->n_spare;
    size_t extra = n_pages > have ? transit_room(ns, SB_BLK_PAGE, n_pages - have) : 0;
    pthread_mutex_unlock(&st->mu);
    int rc = extra ? sb_blk_pool_fill(ns, SB_BLK_PAGE, NULL, 0, extra) : SB_OK;
    sb_tier_prefault(st, ns, n_pages); /* the scratch for their record heads */
    pthread_mutex_lock(&st->mu);
    if (n_ready)
        *n_ready = cls_of(ns, SB_BLK_PAGE)->n_spare;
    pthread_mutex_unlock(&st->mu);
    return rc;
}
