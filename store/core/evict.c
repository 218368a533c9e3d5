/* evict.c -- making room under the RAM budgets: leaves-first LRU eviction,
 * TTL pins, and the fingerprints of evicted pages behind SB_MISS_EVICTED. */
#include "tier.h"
#include "internal.h"
#include "radix.h"

/* ---- evicted-page fingerprints ------------------------------------------------ */

static uint64_t evicted_fp(const sb_key *key)
{
    return (key->lo ^ (key->hi << 1 | key->hi >> 63)) | 1u;
}

void sb_evicted_note(sb_store *st, const sb_key *key)
{
    uint64_t fp = evicted_fp(key);
    st->evicted_fp[fp & (SB_EVICTED_SLOTS - 1)] = fp;
}

bool sb_evicted_seen(sb_store *st, const sb_key *key)
{
    uint64_t fp = evicted_fp(key);
    return st->evicted_fp[fp & (SB_EVICTED_SLOTS - 1)] == fp;
}

/* ---- pins ----------------------------------------------------------------------- */

void sb_pin_free(sb_store *st, sb_pin *p)
{
    sb_ns *ns = p->ns;
    for (size_t i = p->n_pages; i-- > 0;) {
        p->pages[i]->pinned--;
        sb_blk_unref(p->pages[i]);
    }
    sb_free(p->pages);
    sb_free(p);
    st->n_pins--;
    ns->holds--;
    sb_ns_maybe_free(ns);
}

void sb_pins_supersede(sb_store *st, sb_blk *old, sb_blk *repl)
{
    for (sb_pin *p = st->pins; p; p = p->next)
        for (size_t i = 0; i < p->n_pages; i++)
            if (p->pages[i] == old) {
                sb_blk_ref(repl);
                repl->pinned++;
                p->pages[i] = repl;
                old->pinned--;
                sb_blk_unref(old);
            }
}

void sb_pins_let_go(sb_store *st, sb_ns *ns)
{
    for (sb_pin *p = st->pins; p; p = p->next) {
        if (p->ns != ns)
            continue;
        size_t k = 0;
        for (size_t i = 0; i < p->n_pages; i++) {
            sb_blk *b = p->pages[i];
            if (b->removed && !b->indexed) {
                b->pinned--;
                sb_blk_unref(b);
            } else {
                p->pages[k++] = b;
            }
        }
        p->n_pages = k;
    }
}

void sb_pins_expire(sb_store *st)
{
    if (!st->pins)
        return;
    uint64_t now = sb_now_ns(st);
    sb_pin **pp = &st->pins;
    while (*pp) {
        sb_pin *p = *pp;
        if (p->expiry_ns && now >= p->expiry_ns) {
            *pp = p->next;
            sb_pin_free(st, p);
        } else {
            pp = &p->next;
        }
    }
}

/* ---- eviction ------------------------------------------------------------------ */
/*
 * Choosing a victim, step by step (the heap holds eviction candidates: every
 * block when indexed, and a page again whenever it becomes a leaf page):
 *
 *   1. Take the top of the heap (the store's, or the namespace's when its
 *      own budget is what overflows): the least recently used candidate, by
 *      the key it was pushed with.
 *   2. If it was used since (stamp > key), re-key it and go to 1: touching
 *      a block costs one store, not a heap operation.
 *   3. If it is held by anyone besides the index (a match, a pin, a
 *      runtime), park it: it leaves the heap until its last outside
 *      reference is dropped (sb_blk_unpark). Go to 1.
 *   4. If it is a page but not a leaf page (the last page of a leaf node),
 *      pages depend on it: unless it is droppable (clean: its record is on
 *      disk; or dirty under write-back, which writes it) or cut (below),
 *      drop it from the heap; it comes back when its dependents are gone
 *      (step 7) or it turns clean. Point states always qualify. Go to 1.
 *   5. The newest page and point state of a namespace (its latest commit)
 *      are protected: park them too; a newer commit unparks them. Go to 1.
 *   6. Evict it. A clean block only loses its data: it stays in the index,
 *      on disk (not under write-only, which never reads the disk tier:
 *      there a clean block goes as a RAM-only one does). Under write-back
 *      a dirty one is queued for writing (its data goes once written and
 *      clean). Otherwise it leaves the index: a leaf page with the edge
 *      tail only it covered (sb_radix_evict_page), a point state alone,
 *      and a cut page that is not a leaf page with every page and point
 *      state after it. (Reclamation cuts a resident
 *      page whose record it took: the pages after it may be on disk only,
 *      holding no RAM, so waiting for it to become a leaf page could hold
 *      it in RAM for good. Its stamp is at least as new as theirs -- a
 *      commit or match through them stamps it too -- so the LRU order
 *      holds.)
 *   7. The evicted page's predecessor (region - 1 on its path) may now be a
 *      leaf page: offer it again.
 *   8. (Steps 1-5 emptied the heap.) Everything left is pinned or
 *      protected: take the least recently used protected block that is
 *      free to go, so protection bends before a budget does; none left:
 *      wait for the writer when it holds pages that turn evictable once
 *      written, else SB_ERR_BUDGET.
 */

bool sb_blk_droppable(const sb_blk *b)
{
    if (b->below & SB_BELOW_KEPT)
        return !sb_tier_write_only(b->ns->st); /* write-only reads nothing back */
    return !(b->below & SB_BELOW_OFFERED) && sb_tier_write_back(b->ns->st);
}

static bool is_protected(const sb_blk *b)
{
    return b == b->ns->newest_page || b == b->ns->newest_point;
}

static void evict(sb_store *st, sb_blk *b)
{
    sb_ns *ns = b->ns;
    if ((b->below & SB_BELOW_KEPT) && !sb_tier_write_only(st)) { /* 6: its record stays indexed */
        if (b->kind == SB_BLK_PAGE) {
            st->stats.evictions++;
            st->stats.evicted_bytes += b->bytes;
        } else {
            st->stats.point_evictions++;
        }
        sb_blk_drop_data(b);
        return;
    }
    if (!(b->below & SB_BELOW_OFFERED) && sb_tier_write_back(st)) { /* 6: write it */
        sb_tier_enqueue(st, b);
        /* Queued: it waits for the writer (parked). Refused (OFFERED alone): a
         * leaf page or a point state is evicted below; an inner page
         * leaves the heaps until it is a leaf page again. */
        bool queued = (b->below & SB_BELOW_QUEUED) != 0;
        if (!queued && (b->kind == SB_BLK_POINT || sb_radix_is_leaf_page(b) ||
                        (b->below & SB_BELOW_CUT)))
            goto unindex;
        for (int w = 0; w < 2; w++)
            if (b->heap_pos[w] < SB_HEAP_PARKED) {
                sb_heap_remove(w == SB_HEAP_STORE ? &st->heap : &ns->heap, b, w);
                b->heap_pos[w] = queued ? SB_HEAP_PARKED : SB_HEAP_OUT;
            }
        return;
    }
unindex:
    SB_DLOG("evict %s of ns %016llx, region %u, stamp %llu\n",
            b->kind == SB_BLK_PAGE ? "page" : "point", (unsigned long long)ns->id,
            b->region, (unsigned long long)b->stamp);
    if (b->kind == SB_BLK_PAGE && !sb_radix_is_leaf_page(b)) { /* 6: cut */
        uint64_t pages = ns->indexed_pages, bytes = st->indexed_bytes;
        sb_evicted_note(st, &b->key);
        sb_blk_ref(b); /* (the index's reference goes in the drop) */
        sb_tier_drop(ns, b); /* and 7 */
        sb_blk_unref(b);
        st->stats.evictions += pages - ns->indexed_pages;
        st->stats.evicted_bytes += bytes - st->indexed_bytes;
    } else if (b->kind == SB_BLK_PAGE) {
        sb_blk *prev = sb_radix_prev_page(ns, b);
        st->stats.evictions++;
        st->stats.evicted_bytes += b->bytes;
        sb_evicted_note(st, &b->key);
        sb_radix_evict_page(ns, b); /* 6 */
        if (prev && sb_radix_is_leaf_page(prev))
            sb_blk_candidate(prev); /* 7 */
    } else {
        st->stats.point_evictions++;
        sb_radix_drop_point(ns, b->node); /* 6 */
    }
    sb_ns_maybe_free(ns);
}

/* Step 8: the least recently used protected block that could go, of ns or
 * of every namespace; NULL when none can. */
static sb_blk *protected_fallback(sb_store *st, sb_ns *only)
{
    sb_blk *best = NULL;
    for (size_t i = 0; i < st->n_buckets; i++)
        for (sb_ns *ns = st->buckets[i]; ns; ns = ns->next) {
            if (only && ns != only)
                continue;
            sb_blk *c[2] = { ns->newest_page, ns->newest_point };
            for (int k = 0; k < 2; k++) {
                sb_blk *b = c[k];
                if (!b || b->refs > 1 || !b->data ||
                    (b->kind == SB_BLK_PAGE && !sb_blk_droppable(b) &&
                     !sb_radix_is_leaf_page(b)))
                    continue;
                if (!best || b->stamp < best->stamp)
                    best = b;
            }
        }
    return best;
}

static bool evict_one(sb_store *st, sb_ns *ns)
{
    int which = ns ? SB_HEAP_NS : SB_HEAP_STORE;
    sb_heap *h = ns ? &ns->heap : &st->heap;
    sb_blk *b;

    while ((b = sb_heap_top(h))) { /* 1 */
        if (b->stamp > b->heap_key[which]) { /* 2 */
            b->heap_key[which] = b->stamp;
            sb_heap_fix(h, b, which);
        } else if (b->refs > 1 || is_protected(b)) { /* 3, 5 */
            sb_heap_remove(h, b, which);
            b->heap_pos[which] = SB_HEAP_PARKED;
        } else if (b->kind == SB_BLK_PAGE && !sb_blk_droppable(b) &&
                   !(b->below & SB_BELOW_CUT) &&
                   !sb_radix_is_leaf_page(b)) { /* 4 */
            sb_heap_remove(h, b, which);
        } else {
            break;
        }
    }
    if (!b)
        b = protected_fallback(st, ns);
    if (!b)
        return false;
    evict(st, b); /* 6, 7 */
    return true;
}

/* A spare of cls into *take (when wanted and there), its reservation
 * leaving the store's counters. */
static bool take_spare(sb_store *st, sb_pool_cls *cls, sb_pbuf *take)
{
    if (!take || take->data || !sb_pool_take(&st->pool, cls, take))
        return false;
    st->ram_bytes -= cls->budget_bytes;
    st->ram_pages -= cls->page;
    return true;
}

int sb_evict_until(sb_store *st, sb_ns *ns, uint64_t need_bytes, uint64_t need_pages,
                   sb_pool_cls *cls, sb_pbuf *take)
{
    const sb_config *c = &st->cfg;
    if (need_bytes > c->ram_bytes || need_pages > c->ram_pages ||
        (ns && need_bytes > c->ns_ram_bytes))
        return SB_ERR_BUDGET;
    bool expired = false;
    for (;;) {
        bool ns_over = ns && ns->ram_bytes + need_bytes > c->ns_ram_bytes;
        bool st_over = st->ram_bytes + need_bytes > c->ram_bytes ||
                       st->ram_pages + need_pages > c->ram_pages;
        if (!ns_over && !st_over)
            return SB_OK;
        /* A spare of the wanted class is the room itself: kept, not trimmed. */
        if (st_over && take_spare(st, cls, take))
            continue;
        if (st_over && (st->pool.spare_bytes || st->pool.spare_pages)) {
            /* Spares go first: they hold no state. */
            uint64_t over = st->ram_bytes + need_bytes > c->ram_bytes
                                ? st->ram_bytes + need_bytes - c->ram_bytes : 0;
            uint64_t over_p = st->ram_pages + need_pages > c->ram_pages
                                  ? st->ram_pages + need_pages - c->ram_pages : 0;
            uint64_t fb = 0, fp = 0;
            sb_pool_trim(&st->pool, over, over_p, &fb, &fp);
            st->ram_bytes -= fb;
            st->ram_pages -= fp;
            if (fb || fp)
                continue;
        }
        if (!expired) {
            sb_pins_expire(st);
            expired = true;
            /* Refuse before evicting anything when even evicting every
             * block held by the index alone would not make room: a
             * refusal should change nothing. */
            if (!sb_tier_pending(st) &&
                ((ns && ns->ram_bytes - ns->free_bytes + need_bytes > c->ns_ram_bytes) ||
                 st->ram_bytes - st->free_bytes - st->pool.spare_bytes + need_bytes >
                     c->ram_bytes ||
                 st->ram_pages - st->free_pages - st->pool.spare_pages + need_pages >
                     c->ram_pages))
                return SB_ERR_BUDGET;
            continue;
        }
        /* Write-back: pages already queued will free enough once written. */
        uint64_t deficit = 0;
        if (st_over && st->ram_bytes + need_bytes > c->ram_bytes)
            deficit = st->ram_bytes + need_bytes - c->ram_bytes;
        if (ns_over && ns->ram_bytes + need_bytes - c->ns_ram_bytes > deficit)
            deficit = ns->ram_bytes + need_bytes - c->ns_ram_bytes;
        if (sb_tier_write_back(st) && deficit && sb_tier_pending(st) >= deficit &&
            sb_tier_wait_progress(st))
            continue;
        if (evict_one(st, ns_over ? ns : NULL))
            continue;
        /* 8: pages the writer holds turn evictable once written. */
        if (!sb_tier_wait_progress(st))
            return SB_ERR_BUDGET;
    }
}
