/* index.c -- the operations on a namespace's index: commit (both modes;
 * the copy-mode puts that feed it are put.c's), zero-copy pages, match and
 * restore, copy-on-write, TTL pins. */
#include <string.h>

#include "tier.h"
#include "xfer.h"
#include "internal.h"
#include "match.h"
#include "radix.h"
#include "shared.h"
#include "write.h"

/* The match lets go of pages [from, m->n_pages) and, when point, its point
 * state, as far as the tier below holds them (sb_tier_match). [mu] */
static void unhold(sb_match *m, size_t from, bool point)
{
    for (size_t r = from; r < m->n_pages; r++)
        sb_tier_match(m->st, m->pages[r], -1);
    if (point)
        sb_tier_match(m->st, m->point, -1);
}

/* ---- commit (both modes) ----------------------------------------------------- */
/*
 * sb_commit_locked indexes tokens[0, n) with pages[] (one per region):
 *
 *   1. Walk the tree; the walk matched m tokens. Regions below
 *      r0 = floor(m / pt) (all regions when m == n) are already indexed:
 *      path[r] is the index's page for them.
 *   2. Validate every caller page and compute the content keys of the new
 *      regions, before changing anything: a committed caller page must be
 *      the very page the index holds, or an unindexed page whose region,
 *      token count and key are exactly this region's.
 *   3. Plan the tree change (allocates; may fail: nothing changed).
 *   4. Stamp the new pages with their keys and link them (cannot fail).
 *   5. Deduplicate: where the index already held a region, the caller's
 *      reference moves to the index's page (zero-copy only).
 *   6. Hang the point state on the node ending at n, keep the newest page and
 *      point protected, and stamp everything used.
 *
 * In copy mode (zero_copy false) pages[r] for r < r0 is the caller's own
 * pin on path[r] or its own copy of a region the index turned out to hold
 * already; they are left alone. A NULL page for a region that must be added
 * makes it return SB_ERR_RANGE, having changed nothing.
 */
/* The index's page old is on disk only and the caller's page nu holds the
 * same state: nu takes old's place in the tree (and in pins) and its record
 * (unless that is being reclaimed: nu is then RAM-only), so the caller's
 * resident bytes serve the next restore. old stays valid for whoever holds
 * it. */
static void swap_in(sb_ns *ns, sb_blk *old, sb_blk *nu)
{
    sb_node *N = old->node;
    uint32_t j = old->region - N->start / ns->page_tokens;
    nu->n_tokens = old->n_tokens;
    nu->region = old->region;
    nu->key = old->key;
    nu->parent_key = old->parent_key;
    sb_blk_index(nu, N);
    sb_tier_take_record(ns->st, old, nu); /* or nu is RAM only */
    N->pages[j] = nu;
    sb_pins_supersede(ns->st, old, nu);
    sb_tier_supersede(ns->st, old, nu); /* durability tickets watch nu now */
    old->superseded = 1;
    sb_blk_touch(ns->st, nu);
    sb_blk_unindex(old);
    sb_blk_candidate(nu);
}

int sb_commit_locked(sb_ns *ns, const uint32_t *tokens, size_t n,
                     sb_blk **pages, sb_blk *point, bool zero_copy, sb_write_outcome *oc)
{
    sb_store *st = ns->st;
    uint32_t pt = ns->page_tokens;
    size_t n_reg = regions(ns, n);
    int rc = SB_OK;

    sb_blk **path = sb_calloc(&st->mem, n_reg, sizeof *path);
    sb_key *keys = sb_calloc(&st->mem, n_reg, sizeof *keys);
    if (!path || !keys) {
        rc = SB_ERR_NOMEM;
        goto out;
    }

    /* 1 */
    sb_walk w;
    sb_radix_walk(ns, tokens, n, &w, path);
    size_t r0 = w.m == n ? n_reg : w.m / pt;
    if (w.m == n && n % pt)
        path[n_reg - 1] = sb_radix_cover(ns, &w, (uint32_t)(n_reg - 1));

    /* 2 */
    sb_key parent = ns->root_key;
    size_t marked = 0;
    for (size_t r = 0; r < n_reg; r++) {
        uint32_t k = region_tokens(ns, n, r);
        sb_blk *b = pages[r];
        bool known = r < r0;
        keys[r] = known && k == pt ? path[r]->key
                                   : sb_key_chain(&parent, tokens + r * pt, k);
        if (!b) {
            if (!known) {
                rc = SB_ERR_RANGE; /* copy mode: no page for a needed region */
                break;
            }
        } else if (!known || (zero_copy && b != path[r])) {
            if (b->mark) {
                rc = SB_ERR_INVAL; /* the same page given twice */
                break;
            }
            b->mark = 1;
            marked = r + 1;
            if (b->committed && (b->indexed || b->region != r || b->n_tokens != k ||
                                 !sb_key_eq(&b->key, &keys[r]))) {
                rc = SB_ERR_PAGE_STATE;
                break;
            }
            if (b->committed && !b->data && (b->removed || !sb_tier_record_stays(st, b))) {
                /* It left the index and its record went with reclamation,
                 * or is dead (a removal's tombstone covers it): no state
                 * to index again. */
                rc = zero_copy ? SB_ERR_PAGE_STATE : SB_ERR_RANGE;
                break;
            }
        }
        parent = keys[r];
    }
    for (size_t r = 0; r < marked; r++)
        if (pages[r])
            pages[r]->mark = 0;
    if (rc != SB_OK)
        goto out;

    /* 3 */
    rc = sb_heap_reserve(ns, (n_reg - r0) + (point ? 1 : 0));
    if (rc != SB_OK)
        goto out;
    sb_plan plan;
    rc = sb_radix_prepare(ns, &w, n, point != NULL, &plan);
    if (rc != SB_OK)
        goto out;

    /* 4 */
    for (size_t r = r0; r < n_reg; r++) {
        sb_blk *b = pages[r];
        if (b->committed && (b->below & SB_BELOW_KEPT)) { /* indexed again */
            if (!b->removed && sb_tier_record_stays(st, b))
                sb_tier_count(st, b, 1);
            else /* resident (step 2): written anew (a removed block's
                    record is older than its tombstone) */
                sb_tier_unclean(st, b);
        }
        b->n_tokens = region_tokens(ns, n, r);
        b->region = (uint32_t)r;
        b->key = keys[r];
        b->parent_key = r ? keys[r - 1] : ns->root_key;
        sb_blk_touch(st, b);
        path[r] = b;
    }
    sb_node *end = sb_radix_apply(ns, &w, tokens, n, &plan, pages + r0, n_reg - r0);
    st->stats.pages_new += n_reg - r0;
    if (oc)
        oc->pages_new += (uint32_t)(n_reg - r0);
    /* Of the new pages only the last can be a leaf page: it alone becomes
     * an eviction candidate now (the others when their dependents go, or
     * when they are droppable: written, or to be written on eviction). */
    for (size_t r = r0; r < n_reg; r++)
        if (r == n_reg - 1 || sb_blk_droppable(pages[r]))
            sb_blk_candidate(pages[r]);
    /* Offer what is unwritten to the disk tier, parents first: the new
     * pages, and pages a shorter commit left unoffered (admit.c). */
    bool offer = n >= st->cfg.min_prefix_tokens;
    for (size_t r = 0; r < n_reg; r++) {
        if (r < r0)
            sb_blk_used(st, path[r]);
        else
            path[r]->uses = 1;
        if (path[r]->below & SB_BELOW_OFFERED)
            continue;
        if (offer)
            sb_tier_offer(st, path[r], r ? path[r - 1] : NULL);
        else if (r >= r0)
            sb_tier_offer_short(st, path[r]);
    }

    /* ...and its full resident pages not offered before to the shared
     * tier (collected now, handed to its publisher once the caller lets go
     * of the lock: sb_shared_kick). Not for a layout that needs point
     * states: pages alone restore nothing there, and the pool keeps none. */
    if (offer && sb_shared_on(st) && !(ns->flags & SB_LAYOUT_POINT_REQUIRED))
        for (size_t r = 0; r < n_reg; r++)
            if (region_tokens(ns, n, r) == pt)
                sb_shared_offer(st, ns, path[r], tokens + r * pt);

    /* 5 */
    if (!zero_copy) {
        st->stats.pages_dedup += r0;
    } else {
        for (size_t r = 0; r < r0; r++) {
            if (pages[r] == path[r])
                continue;
            st->stats.pages_dedup++;
            if (!path[r]->data && (path[r]->below & SB_BELOW_KEPT) && pages[r]->data &&
                !pages[r]->indexed && pages[r]->n_tokens == 0 &&
                path[r]->n_tokens == region_tokens(ns, n, r)) {
                swap_in(ns, path[r], pages[r]);
                path[r] = pages[r];
                continue;
            }
            /* The index's page is on disk only and holds more tokens: it
             * has no bytes to hand out, so the caller keeps its own page
             * (private, uncommitted, the same bytes for these tokens). */
            if (!path[r]->data)
                continue;
            sb_blk_ref(path[r]);
            sb_blk_unref(pages[r]);
            pages[r] = path[r];
        }
    }

    /* 6 */
    if (point) {
        if (!end->point) {
            point->n_tokens = (uint32_t)n;
            sb_blk_touch(st, point);
            sb_blk_index(point, end);
            end->point = point;
            sb_blk_candidate(point);
            point->uses = 0;
            if (oc)
                oc->points_new++;
        }
        sb_blk_used(st, end->point);
        if (!(end->point->below & SB_BELOW_OFFERED)) {
            if (n >= st->cfg.min_prefix_tokens)
                sb_tier_offer(st, end->point, path[n_reg - 1]);
            else if (end->point == point)
                sb_tier_offer_short(st, point);
        }
        sb_blk_touch(st, end->point);
    }
    /* Point states a shorter commit left unoffered on this path (a
     * recurrent model's boundaries recorded along a prefill): the path now
     * reaches min_prefix_tokens, so they are offered like its pages, each
     * after the page before it. */
    if (offer)
        for (sb_node *x = end ? end->parent : NULL; x; x = x->parent)
            if (x->point && !(x->point->below & SB_BELOW_OFFERED) && sb_node_end(x))
                sb_tier_offer(st, x->point, path[regions(ns, sb_node_end(x)) - 1]);
    for (size_t r = 0; r < n_reg; r++)
        sb_blk_touch(st, path[r]);
    sb_blk *old_page = ns->newest_page, *old_point = ns->newest_point;
    ns->newest_page = path[n_reg - 1];
    ns->newest_point = point && end ? end->point : NULL;
    /* Protection moves on: what it parked is a candidate again. */
    if (old_page && old_page != ns->newest_page)
        sb_blk_unpark(old_page);
    if (old_point && old_point != ns->newest_point)
        sb_blk_unpark(old_point);
out:
    sb_free(path);
    sb_free(keys);
    return rc;
}

/* ---- what the writes share (write.h) --------------------------------------------- */

/* The blocks of the state of tokens[0, n) as the index holds it: the pages
 * covering them and, when point, the point state at n. out has room for
 * regions(n) + 1 entries. Returns how many (0 when n is 0). [mu] */
static size_t state_blocks(sb_ns *ns, const uint32_t *tokens, size_t n, bool point,
                           sb_blk **out)
{
    uint32_t pt = ns->page_tokens;
    if (!n)
        return 0;
    sb_walk w;
    sb_radix_walk(ns, tokens, n, &w, out);
    if (w.m < n)
        return 0; /* (not reached: the caller's tokens are restorable) */
    size_t k = n / pt;
    if (n % pt)
        out[k++] = sb_radix_cover(ns, &w, (uint32_t)(n / pt));
    if (point && w.off == w.node->len && w.node->point)
        out[k++] = w.node->point;
    return k;
}

int sb_report_init(sb_report *rp, sb_store *st, size_t n_reg, sb_write_outcome *out)
{
    memset(rp, 0, sizeof *rp);
    rp->oc = out ? out : &rp->scratch;
    memset(rp->oc, 0, sizeof *rp->oc);
    if (!sb_tier_below(st) || (!out && st->cfg.durability != SB_DURABILITY_COMMIT))
        return SB_OK;
    rp->state = sb_malloc(&st->mem, (n_reg + 1) * sizeof *rp->state);
    rp->ws = rp->state ? sb_tier_wset_new(st, n_reg + 1) : NULL;
    if (!rp->ws) {
        sb_free(rp->state);
        rp->state = NULL;
        return SB_ERR_NOMEM;
    }
    return SB_OK;
}

int sb_report_reserve(sb_report *rp, sb_store *st)
{
    if (!rp->ws)
        return SB_OK;
    int rc = sb_tier_wset_reserve(st);
    rp->reserved = rc == SB_OK;
    return rc;
}

void sb_report_state(sb_report *rp, sb_ns *ns, const uint32_t *tokens, size_t n, bool point,
                     uint64_t t0)
{
    if (!rp->ws)
        return;
    size_t k = state_blocks(ns, tokens, n, point, rp->state);
    sb_tier_outcome(ns->st, rp->ws, rp->state, k, t0, rp->oc, rp->oc != &rp->scratch);
    rp->ws = NULL;
    rp->reserved = false;
}

void sb_report_done(sb_report *rp, sb_store *st, bool failed)
{
    if (rp->reserved)
        sb_tier_wset_unreserve(st);
    sb_tier_wset_free(st, rp->ws);
    sb_free(rp->state);
    if (failed)
        memset(rp->oc, 0, sizeof *rp->oc);
}

int sb_write_args(sb_ns *ns, const uint32_t *tokens, size_t n_tokens, const void *source,
                  const void *point, size_t *n_stored, sb_write_outcome *out)
{
    if (n_stored)
        *n_stored = 0;
    if (out)
        memset(out, 0, sizeof *out);
    if (!ns || !source)
        return SB_ERR_INVAL;
    int rc = sb_tokens_check(ns, tokens, n_tokens);
    if (rc != SB_OK)
        return rc;
    if (point && !ns->point_bytes)
        return SB_ERR_INVAL;
    return SB_OK;
}


/* ---- zero-copy ------------------------------------------------------------------ */

int sb_ns_page_alloc(sb_ns *ns, sb_page **out)
{
    if (out)
        *out = NULL;
    if (!ns || !out)
        return SB_ERR_INVAL;
    return sb_blk_alloc(ns, SB_BLK_PAGE, out);
}

void *sb_page_data(sb_page *p)
{
    return p ? p->data : NULL;
}

uint32_t sb_page_tokens(const sb_page *p)
{
    if (!p)
        return 0;
    sb_store *st = p->ns->st;
    pthread_mutex_lock(&st->mu);
    uint32_t n = p->n_tokens;
    pthread_mutex_unlock(&st->mu);
    return n;
}

sb_page *sb_page_ref(sb_page *p)
{
    if (!p)
        return NULL;
    sb_store *st = p->ns->st;
    pthread_mutex_lock(&st->mu);
    sb_blk_ref(p);
    pthread_mutex_unlock(&st->mu);
    return p;
}

void sb_page_unref(sb_page *p)
{
    if (!p)
        return;
    sb_ns *ns = p->ns;
    sb_store *st = ns->st;
    pthread_mutex_lock(&st->mu);
    sb_blk_unref(p);
    sb_ns_maybe_free(ns);
    pthread_mutex_unlock(&st->mu);
}

int sb_page_writable(sb_ns *ns, sb_page **page, uint32_t n_keep)
{
    if (!ns || !page || !*page)
        return SB_ERR_INVAL;
    sb_blk *p = *page;
    if (p->ns != ns || p->kind != SB_BLK_PAGE)
        return SB_ERR_FOREIGN_PAGE;
    if (n_keep > ns->page_tokens)
        return SB_ERR_INVAL;
    sb_store *st = ns->st;
    pthread_mutex_lock(&st->mu);
    bool private = !p->committed && p->refs == 1;
    bool too_many = p->committed && n_keep > p->n_tokens;
    pthread_mutex_unlock(&st->mu);
    if (private)
        return SB_OK;
    if (too_many)
        return SB_ERR_INVAL;

    sb_blk *q;
    int rc = sb_blk_alloc(ns, SB_BLK_PAGE, &q);
    if (rc != SB_OK)
        return rc;
    for (uint32_t t = 0; t < ns->n_tensors; t++)
        memcpy(q->data + ns->tensor_off[t], p->data + ns->tensor_off[t],
               (size_t)n_keep * ns->bpt[t]);
    pthread_mutex_lock(&st->mu);
    sb_blk_unref(p);
    st->stats.cow_copies++;
    pthread_mutex_unlock(&st->mu);
    *page = q;
    return SB_OK;
}

int sb_ns_commit(sb_ns *ns, const uint32_t *tokens, size_t n_tokens,
                 sb_page **pages, const void *point)
{
    return sb_ns_commit_ex(ns, tokens, n_tokens, pages, point, NULL);
}

int sb_ns_commit_ex(sb_ns *ns, const uint32_t *tokens, size_t n_tokens, sb_page **pages,
                    const void *point, sb_write_outcome *out)
{
    int rc = sb_write_args(ns, tokens, n_tokens, pages, point, NULL, out);
    if (rc != SB_OK)
        return rc;
    size_t n_reg = regions(ns, n_tokens);
    for (size_t r = 0; r < n_reg; r++) {
        if (!pages[r] || pages[r]->kind != SB_BLK_PAGE)
            return SB_ERR_INVAL;
        if (pages[r]->ns != ns)
            return SB_ERR_FOREIGN_PAGE;
    }
    sb_store *st = ns->st;
    sb_report rp;
    if (sb_report_init(&rp, st, n_reg, out) != SB_OK)
        return SB_ERR_NOMEM;
    sb_blk *pb = NULL;
    if (point) {
        if ((rc = sb_blk_alloc(ns, SB_BLK_POINT, &pb)) != SB_OK) {
            pthread_mutex_lock(&st->mu);
            sb_report_done(&rp, st, true);
            pthread_mutex_unlock(&st->mu);
            return rc;
        }
        memcpy(pb->data, point, ns->point_bytes);
    }
    pthread_mutex_lock(&st->mu);
    st->tick++;
    uint64_t t0 = sb_tier_ticket(st);
    rc = sb_report_reserve(&rp, st);
    if (rc == SB_OK)
        rc = sb_commit_locked(ns, tokens, n_tokens, pages, pb, true, rp.oc);
    if (rc == SB_OK) {
        st->stats.commits++;
        /* Its durability (COMMIT: written and synced first); a write the
         * tier did not make is an outcome, not an error. */
        sb_report_state(&rp, ns, tokens, n_tokens, point != NULL, t0);
    }
    sb_report_done(&rp, st, rc != SB_OK);
    if (pb)
        sb_blk_unref(pb);
    pthread_mutex_unlock(&st->mu);
    sb_shared_kick(st);
    return rc;
}

/* ---- match ---------------------------------------------------------------------- */

/* Why the match of tokens[0, n) stopped at L (walk w, pages in m->pages). */
static sb_miss miss_reason(sb_ns *ns, const sb_walk *w, const uint32_t *tokens,
                           size_t n, size_t L, sb_blk **pages)
{
    uint32_t pt = ns->page_tokens;
    if (L == n)
        return SB_MISS_NONE;
    if (w->m > L)
        return SB_MISS_NO_POINT;
    sb_miss why = SB_MISS_NO_PREFIX;
    /* Was the request's own next page (full, or its tail) evicted? Page
     * keys are hash(parent key, tokens), so the request's region keys can
     * be looked up exactly. */
    size_t r = L / pt;
    const sb_key *parent = r ? &pages[r - 1]->key : &ns->root_key;
    size_t rest = n - r * pt;
    sb_key k = sb_key_chain(parent, tokens + r * pt, rest < pt ? rest : pt);
    if (sb_evicted_seen(ns->st, &k))
        why = SB_MISS_EVICTED;
    if (L > 0)
        return why;
    /* Restored nothing: does the same scope under another model hold it? */
    sb_store *st = ns->st;
    unsigned seen = 0;
    for (sb_ns *o = st->buckets[ns->scope_hash & (st->n_buckets - 1)]; o && seen < 16;
         o = o->next) {
        if (o == ns || o->scope_hash != ns->scope_hash ||
            o->scope_bytes != ns->scope_bytes ||
            (ns->scope_bytes && memcmp(o->scope, ns->scope, ns->scope_bytes)))
            continue;
        seen++;
        sb_walk ow;
        sb_radix_walk(o, tokens, n, &ow, NULL);
        if (ow.m > 0)
            return SB_MISS_MODEL_MISMATCH;
    }
    return why;
}

/* What the index holds for a request, found under st->mu. */
typedef struct found {
    sb_walk w;       /* the walk: w.m tokens matched */
    size_t L;        /* the restorable prefix (the point-state rule applied) */
    size_t n_pages;  /* pages covering [0, L) */
    sb_blk *point;   /* the point state at L, or NULL */
} found;

/* [mu] The longest restorable prefix of tokens[0, n): pages[0, f->n_pages)
 * receive the pages covering it (pages has regions(ns, n) + 1 entries). */
static void find(sb_ns *ns, const uint32_t *tokens, size_t n, sb_blk **pages, found *f)
{
    uint32_t pt = ns->page_tokens;
    sb_radix_walk(ns, tokens, n, &f->w, pages);
    const sb_walk *w = &f->w;
    f->point = NULL;
    if (ns->flags & SB_LAYOUT_POINT_REQUIRED) {
        f->L = w->point_node ? sb_node_end(w->point_node) : 0;
        f->point = w->point_node ? w->point_node->point : NULL;
    } else {
        f->L = w->m;
        if (f->L && w->off == w->node->len)
            f->point = w->node->point;
    }
    f->n_pages = regions(ns, f->L);
    if (f->L % pt && (uint64_t)f->n_pages * pt > w->m)
        pages[f->n_pages - 1] = sb_radix_cover(ns, w, (uint32_t)(f->n_pages - 1));
}

int sb_ns_match(sb_ns *ns, const uint32_t *tokens, size_t n_tokens, sb_match **out)
{
    if (out)
        *out = NULL;
    if (!ns || !out)
        return SB_ERR_INVAL;
    int rc = sb_tokens_check(ns, tokens, n_tokens);
    if (rc != SB_OK)
        return rc;
    sb_store *st = ns->st;
    sb_match *m = sb_calloc(&st->mem, 1, sizeof *m);
    if (!m)
        return SB_ERR_NOMEM;
    m->pages = sb_malloc(&st->mem, (regions(ns, n_tokens) + 1) * sizeof *m->pages);
    if (!m->pages) {
        sb_free(m);
        return SB_ERR_NOMEM;
    }

    pthread_mutex_lock(&st->mu);
    st->tick++;
    found f;
    find(ns, tokens, n_tokens, m->pages, &f);
    size_t L = f.L, n_pages = f.n_pages;
    sb_blk *point = f.point;
    size_t on_disk = 0;
    for (size_t r = 0; r < n_pages; r++)
        on_disk += !m->pages[r]->data;
    sb_blk_pin_run(ns, m->pages, n_pages);
    for (size_t r = 0; r < n_pages; r++) { /* what is on disk stays there */
        sb_tier_match(st, m->pages[r], 1);
        sb_blk_used(st, m->pages[r]);
    }
    if (point) {
        sb_blk_ref(point);
        sb_blk_touch(st, point);
        sb_tier_match(st, point, 1);
        sb_blk_used(st, point);
    }
    m->miss = miss_reason(ns, &f.w, tokens, n_tokens, L, m->pages);
    m->ns = ns;
    m->st = st;
    ns->holds++;
    m->n_req = n_tokens;
    m->n_tokens = L;
    m->n_matched = f.w.m;
    m->n_pages = n_pages;
    m->point = point;

    sb_stats *s = &st->stats;
    s->lookups++;
    if (L) {
        s->hits++;
        if (on_disk)
            s->hits_disk++;
        else
            s->hits_ram++;
    } else {
        s->misses[m->miss]++;
    }
    s->hit_tokens += L;
    s->miss_tokens += n_tokens - L;
    s->miss_tokens_by_reason[m->miss] += n_tokens - L;
    pthread_mutex_unlock(&st->mu);
    *out = m;
    return SB_OK;
}

int sb_ns_lookup(sb_ns *ns, sb_lookup *reqs, size_t n)
{
    if (!ns || (!reqs && n))
        return SB_ERR_INVAL;
    size_t most = 0;
    for (size_t i = 0; i < n; i++) {
        int rc = sb_tokens_check(ns, reqs[i].tokens, reqs[i].n_tokens);
        if (rc != SB_OK)
            return rc;
        size_t k = regions(ns, reqs[i].n_tokens);
        if (k > most)
            most = k;
    }
    if (!n)
        return SB_OK;
    sb_store *st = ns->st;
    sb_blk **pages = sb_malloc(&st->mem, (most + 1) * sizeof *pages);
    if (!pages)
        return SB_ERR_NOMEM;
    pthread_mutex_lock(&st->mu);
    for (size_t i = 0; i < n; i++) {
        const uint32_t *tokens = reqs[i].tokens;
        size_t nt = reqs[i].n_tokens;
        found f;
        find(ns, tokens, nt, pages, &f);
        size_t on_disk = 0;
        for (size_t r = 0; r < f.n_pages; r++)
            on_disk += !pages[r]->data;
        sb_match_info *out = &reqs[i].info;
        out->n_tokens = f.L;
        out->n_pages = f.n_pages;
        out->n_pages_ram = f.n_pages - on_disk;
        out->n_pages_disk = on_disk;
        out->n_matched_tokens = f.w.m;
        out->has_point = f.point != NULL;
        out->miss = miss_reason(ns, &f.w, tokens, nt, f.L, pages);
    }
    pthread_mutex_unlock(&st->mu);
    sb_free(pages);
    return SB_OK;
}

int sb_match_get_info(const sb_match *m, sb_match_info *out)
{
    if (!m || !out)
        return SB_ERR_INVAL;
    size_t on_disk = 0;
    pthread_mutex_lock(&m->st->mu);
    for (size_t r = 0; r < m->n_pages; r++)
        on_disk += !m->pages[r]->data;
    out->n_tokens = m->n_tokens;
    out->n_pages = m->n_pages;
    out->n_pages_ram = m->n_pages - on_disk;
    out->n_pages_disk = on_disk;
    out->n_matched_tokens = m->n_matched;
    out->has_point = m->point != NULL;
    out->miss = m->miss;
    pthread_mutex_unlock(&m->st->mu);
    return SB_OK;
}

/* (match.h) */
int sb_match_fill(sb_match *m, size_t first, size_t n, bool point, sb_tier_ready_fn ready,
                  void *ctx)
{
    sb_ns *ns = m->ns;
    size_t k = n - first; /* pages asked */
    size_t ok = k;
    bool with_point = point && m->point;
    /* Pages then the point in one array: after the last page (the spare
     * entry of m->pages) or alone. A prefix of the pages and the point
     * (not asked for by any caller) load one after the other. */
    sb_blk **blocks = with_point && k == 0 ? &m->point : m->pages + first;
    size_t nb = k + (with_point && (k == 0 || n == m->n_pages));
    if (nb > k && k)
        m->pages[n] = m->point;
    int rc = sb_tier_load(ns, blocks, nb, &ok, ready, ctx);
    if (rc == SB_OK && with_point && nb == k) {
        size_t pok = 1;
        rc = sb_tier_load(ns, &m->point, 1, &pok, NULL, NULL);
        ok = rc == SB_OK ? k + 1 : k;
    }
    if (rc == SB_OK || rc == SB_ERR_BUDGET || rc == SB_ERR_NOMEM)
        return rc;
    if (ok == k && with_point) {
        /* The point failed: the match ends where the point rule allows. */
        pthread_mutex_lock(&m->st->mu);
        unhold(m, m->n_pages, true);
        sb_blk_unref(m->point);
        m->point = NULL;
        m->miss = rc == SB_ERR_CORRUPT ? SB_MISS_CORRUPT : SB_MISS_IO;
        if (ns->flags & SB_LAYOUT_POINT_REQUIRED) {
            unhold(m, 0, false);
            sb_blk_unpin_run(ns, m->pages, m->n_pages);
            m->n_tokens = m->n_pages = 0;
        }
        pthread_mutex_unlock(&m->st->mu);
        return rc;
    }
    pthread_mutex_lock(&m->st->mu);
    size_t L = (first + ok) * ns->page_tokens;
    if (ns->flags & SB_LAYOUT_POINT_REQUIRED)
        L = 0; /* no point state is known to sit at the shorter length */
    if (L < m->n_tokens) {
        size_t keep = regions(ns, L);
        unhold(m, keep, m->point != NULL);
        sb_blk_unpin_run(ns, m->pages + keep, m->n_pages - keep);
        m->n_pages = keep;
        m->n_tokens = L;
        if (m->point)
            sb_blk_unref(m->point);
        m->point = NULL;
        m->miss = rc == SB_ERR_CORRUPT ? SB_MISS_CORRUPT : SB_MISS_IO;
    }
    pthread_mutex_unlock(&m->st->mu);
    return rc;
}

/* ---- use beside a load (aload.c) ----------------------------------------------- */

/* What a call on m sees of it: whether a load runs, the match's length and
 * whether it has a point state. Only the load writes them meanwhile, under
 * st->mu. */
typedef struct seen {
    bool loading;
    size_t L;                  /* m->n_tokens */
    bool point;                /* m->point != NULL */
} seen;

#define ENDED 1 /* ref_run: no load runs any more */

static seen look(sb_match *m)
{
    pthread_mutex_lock(&m->st->mu);
    seen v = { m->loading != NULL, m->n_tokens, m->point != NULL };
    pthread_mutex_unlock(&m->st->mu);
    return v;
}

/* Beside a running load: reference pages [first, end) of m for a copy out
 * of them, when the load has made them resident. A failure of the load
 * may shrink the match meanwhile, which must not free them under the copy.
 * The caller drops them with unref_run. Returns the references (end -
 * first); NULL and *rc: SB_ERR_BUSY (not resident yet, or gone with a
 * shrink), SB_ERR_NOMEM, ENDED (the load ended since the caller looked:
 * the match is the caller's alone again, look again). */
static sb_blk **ref_run(sb_match *m, size_t first, size_t end, int *rc)
{
    *rc = SB_OK;
    sb_blk **run = sb_malloc(&m->st->mem, (end - first + 1) * sizeof *run);
    if (!run) {
        *rc = SB_ERR_NOMEM;
        return NULL;
    }
    pthread_mutex_lock(&m->st->mu);
    if (!m->loading) {
        *rc = ENDED;
    } else if (end > m->ready || end > m->n_pages) {
        *rc = SB_ERR_BUSY;
    } else {
        for (size_t r = first; r < end; r++)
        {
            sb_blk_ref(m->pages[r]);
            run[r - first] = m->pages[r];
        }
    }
    pthread_mutex_unlock(&m->st->mu);
    if (*rc != SB_OK) {
        sb_free(run);
        return NULL;
    }
    return run;
}

static void unref_run(sb_match *m, sb_blk **run, size_t n)
{
    if (!run)
        return;
    pthread_mutex_lock(&m->st->mu);
    for (size_t i = 0; i < n; i++)
        sb_blk_unref(run[i]);
    pthread_mutex_unlock(&m->st->mu);
    sb_free(run);
}

/* Where a restore copies to: the caller's buffers, and which regions are
 * copied already (pages read from disk are copied as their reads complete,
 * while the rest are in flight). */
typedef struct restore_to {
    const sb_ns *ns;
    size_t n_tokens;
    void *const *tensors;
    uint8_t *copied;           /* (regions), or NULL: copy everything after */
} restore_to;

/* Copy region r's slices of every tensor from page data src. */
static void copy_region(const restore_to *to, size_t r, const uint8_t *src)
{
    const sb_ns *ns = to->ns;
    uint32_t pt = ns->page_tokens;
    uint32_t k = region_tokens(ns, to->n_tokens, r);
    for (uint32_t t = 0; t < ns->n_tensors; t++)
        memcpy((uint8_t *)to->tensors[t] + r * pt * ns->bpt[t], src + ns->tensor_off[t],
               (size_t)k * ns->bpt[t]);
}

static void copy_ready(void *ctx, size_t r, const uint8_t *data)
{
    restore_to *to = ctx;
    if (r * to->ns->page_tokens >= to->n_tokens)
        return;
    copy_region(to, r, data);
    to->copied[r] = 1;
}

int sb_match_restore(sb_match *m, size_t n_tokens, void *const *tensors, void *point)
{
    if (!m || !tensors)
        return SB_ERR_INVAL;
    const sb_ns *ns = m->ns;
    for (uint32_t t = 0; t < ns->n_tensors; t++)
        if (!tensors[t])
            return SB_ERR_INVAL;
    size_t n_reg = regions(ns, n_tokens);
    restore_to to = { ns, n_tokens, tensors, NULL };
    for (;;) {
        seen v = look(m);
        if (n_tokens > v.L)
            return SB_ERR_RANGE;
        if (point && (n_tokens != v.L || !v.point))
            return SB_ERR_NO_POINT;
        if (!v.loading)
            break;
        int rc = point ? SB_ERR_BUSY : SB_OK;
        sb_blk **run = rc == SB_OK ? ref_run(m, 0, n_reg, &rc) : NULL;
        if (rc == ENDED)
            continue;
        for (size_t r = 0; rc == SB_OK && r < n_reg; r++)
            copy_region(&to, r, run[r]->data);
        unref_run(m, run, n_reg);
        return rc;
    }
    if (sb_tier_below(m->st) && n_reg)
        to.copied = sb_calloc(&m->st->mem, n_reg, 1); /* NULL: copy after */
    int rc = sb_match_fill(m, 0, n_reg, point != NULL, to.copied ? copy_ready : NULL, &to);
    if (rc == SB_ERR_BUDGET || rc == SB_ERR_NOMEM) {
        sb_free(to.copied);
        return rc;
    }
    if (n_tokens > m->n_tokens)
        n_tokens = m->n_tokens; /* the match shrank: restore what is left */
    /* The pages are pinned, resident and immutable: no lock needed to read
     * them (load published their data under the lock). */
    to.n_tokens = n_tokens;
    for (size_t r = 0; r * ns->page_tokens < n_tokens; r++)
        if (!to.copied || !to.copied[r])
            copy_region(&to, r, m->pages[r]->data);
    sb_free(to.copied);
    if (point && rc == SB_OK)
        memcpy(point, m->point->data, ns->point_bytes);
    return rc;
}

const void *sb_match_point(const sb_match *m)
{
    if (!m)
        return NULL;
    sb_match *mm = (sb_match *)m; /* reading it in is not a visible change */
    seen v = look(mm);
    if (v.loading || !v.point)
        return NULL;
    if (sb_match_fill(mm, 0, 0, true, NULL, NULL) != SB_OK)
        return NULL;
    return mm->point ? mm->point->data : NULL;
}

/* The scatter of sb_match_restore_blocks: pages as they are read, then the
 * rest. */
typedef struct restore_blk {
    sb_xfer x;
    size_t first;              /* the region of blocks[0] in load's numbering */
    uint8_t *copied;           /* (regions from first), or NULL: copy after */
} restore_blk;

static void blk_ready(void *ctx, size_t i, const uint8_t *data)
{
    restore_blk *rb = ctx; /* (pages only: this load asks for no point) */
    sb_xfer_out(&rb->x, rb->first + i, data);
    rb->copied[i] = 1;
}

int sb_match_restore_blocks(sb_match *m, size_t from, size_t n_tokens, uint32_t first_tensor,
                            uint32_t n_tensors, const sb_block_table *dst)
{
    if (!m)
        return SB_ERR_INVAL;
    const sb_ns *ns = m->ns;
    int rc = sb_xfer_check(ns, from, first_tensor, n_tensors, dst);
    if (rc != SB_OK)
        return rc;
    uint32_t pt = ns->page_tokens;
    size_t first = from / pt, last = regions(ns, from + n_tokens);
    restore_blk rb = { .x = { ns, from, from + n_tokens, first_tensor, n_tensors, dst },
                       .first = first };
    for (;;) {
        seen v = look(m);
        if (from > v.L || n_tokens > v.L - from)
            return SB_ERR_RANGE;
        if (!n_tokens)
            return SB_OK;
        if (!v.loading)
            break;
        sb_blk **run = ref_run(m, first, last, &rc);
        if (rc == ENDED)
            continue;
        for (size_t r = first; rc == SB_OK && r < last; r++)
            sb_xfer_out(&rb.x, r, run[r - first]->data);
        unref_run(m, run, last - first);
        return rc;
    }
    if (sb_tier_below(m->st))
        rb.copied = sb_calloc(&m->st->mem, last - first, 1); /* NULL: copy after */
    rc = sb_match_fill(m, first, last, false, rb.copied ? blk_ready : NULL, &rb);
    if (rc == SB_ERR_BUDGET || rc == SB_ERR_NOMEM) {
        sb_free(rb.copied);
        return rc;
    }
    /* When the match shrank (a page failed), what is left of the range:
     * pages it still holds (r * pt < L, so r < n_pages). */
    if (rb.x.to > m->n_tokens)
        rb.x.to = m->n_tokens;
    for (size_t r = first; rb.x.to > from && r * pt < rb.x.to; r++)
        if (!rb.copied || !rb.copied[r - first])
            sb_xfer_out(&rb.x, r, m->pages[r]->data);
    sb_free(rb.copied);
    return rc;
}

int sb_match_load(sb_match *m, size_t n_pages, int point)
{
    if (!m)
        return SB_ERR_INVAL;
    if (look(m).loading)
        return SB_ERR_BUSY;
    if (n_pages > m->n_pages)
        return SB_ERR_RANGE;
    if (point && (n_pages != m->n_pages || !m->point))
        return SB_ERR_NO_POINT;
    return sb_match_fill(m, 0, n_pages, point != 0, NULL, NULL);
}

int sb_match_pages(sb_match *m, size_t first, size_t count, sb_page **out)
{
    if (!m || (count && !out))
        return SB_ERR_INVAL;
    sb_store *st = m->st;
    seen v;
    int rc;
    for (;;) {
        v = look(m);
        size_t n_pages = regions(m->ns, v.L);
        if (first > n_pages || count > n_pages - first)
            return SB_ERR_RANGE;
        rc = v.loading ? SB_OK : sb_match_fill(m, 0, first + count, false, NULL, NULL);
        if (rc != SB_OK)
            return rc;
        pthread_mutex_lock(&st->mu);
        if (!v.loading || m->loading)
            break;
        pthread_mutex_unlock(&st->mu); /* the load ended since: look again */
    }
    if (m->loading && (first + count > m->ready || first + count > m->n_pages))
        rc = SB_ERR_BUSY; /* not resident yet, or gone with a shrink */
    for (size_t i = 0; rc == SB_OK && i < count; i++) {
        sb_blk_ref(m->pages[first + i]);
        out[i] = m->pages[first + i];
    }
    pthread_mutex_unlock(&st->mu);
    return rc;
}

void sb_match_release(sb_match *m)
{
    if (!m)
        return;
    sb_match_detach(m);
    sb_ns *ns = m->ns;
    sb_store *st = ns->st;
    pthread_mutex_lock(&st->mu);
    unhold(m, 0, m->point != NULL);
    if (m->point)
        sb_blk_unref(m->point);
    sb_blk_unpin_run(ns, m->pages, m->n_pages);
    ns->holds--;
    sb_ns_maybe_free(ns);
    pthread_mutex_unlock(&st->mu);
    sb_free(m->pages);
    sb_free(m);
}

/* ---- pins ---------------------------------------------------------------------- */

int sb_ns_pin(sb_ns *ns, const uint32_t *tokens, size_t n_tokens, uint64_t ttl_ms,
              uint64_t *pin_id, size_t *n_pinned)
{
    if (n_pinned)
        *n_pinned = 0;
    if (!ns || !pin_id)
        return SB_ERR_INVAL;
    int rc = sb_tokens_check(ns, tokens, n_tokens);
    if (rc != SB_OK)
        return rc;
    sb_store *st = ns->st;
    uint32_t pt = ns->page_tokens;
    sb_pin *p = sb_calloc(&st->mem, 1, sizeof *p);
    sb_blk **pages = sb_malloc(&st->mem, (regions(ns, n_tokens) + 1) * sizeof *pages);
    if (!p || !pages) {
        sb_free(p);
        sb_free(pages);
        return SB_ERR_NOMEM;
    }
    pthread_mutex_lock(&st->mu);
    sb_pins_expire(st);
    st->tick++;
    sb_walk w;
    sb_radix_walk(ns, tokens, n_tokens, &w, pages);
    size_t m = w.m;
    size_t n_pages = regions(ns, m);
    if (m % pt)
        pages[n_pages - 1] = sb_radix_cover(ns, &w, (uint32_t)(n_pages - 1));
    sb_blk *point = w.point_node ? w.point_node->point : NULL;
    size_t point_at = point ? sb_node_end(w.point_node) : 0;
    if (point)
        pages[n_pages] = point;
    size_t nb = n_pages + (point != NULL);
    bool cold = false;
    for (size_t i = 0; i < nb; i++) {
        sb_blk_ref(pages[i]);
        cold |= !pages[i]->data;
    }
    /* While they are read, their records stay readable (as a match's:
     * reclamation waits for the segments they are in). */
    for (size_t i = 0; cold && i < nb; i++)
        sb_tier_match(st, pages[i], 1);
    pthread_mutex_unlock(&st->mu);
    /* Pinned pages are kept in RAM: what is on disk only is read first
     * (reclamation may take a record on disk, never a resident page it
     * cannot evict). No room ends the pin before the first page that did
     * not fit; a damaged record fails the call, as a restore would. */
    if (cold) {
        size_t ok = 0;
        rc = sb_tier_load(ns, pages, nb, &ok, NULL, NULL);
        if (rc == SB_ERR_CORRUPT || rc == SB_ERR_IO) {
            pthread_mutex_lock(&st->mu);
            for (size_t i = 0; i < nb; i++) {
                sb_tier_match(st, pages[i], -1);
                sb_blk_unref(pages[i]);
            }
            pthread_mutex_unlock(&st->mu);
            sb_free(p);
            sb_free(pages);
            return rc;
        }
    }
    pthread_mutex_lock(&st->mu);
    for (size_t i = 0; cold && i < nb; i++)
        sb_tier_match(st, pages[i], -1);
    size_t keep = 0; /* leading pages still indexed and resident */
    while (keep < n_pages && pages[keep]->indexed && pages[keep]->data)
        keep++;
    if (keep < n_pages)
        m = keep * pt;
    bool with_point = point && point->indexed && point->data && point_at <= m;
    for (size_t i = keep; i < nb; i++)
        if (i < n_pages || !with_point)
            sb_blk_unref(pages[i]);
    if (with_point)
        pages[keep] = point;
    n_pages = keep + with_point;
    for (size_t i = 0; i < n_pages; i++) {
        sb_blk_touch(st, pages[i]);
        pages[i]->pinned++;
    }
    p->id = st->next_pin_id++;
    p->ns = ns;
    p->expiry_ns = ttl_ms ? sb_now_ns(st) + ttl_ms * 1000000ull : 0;
    p->n_pages = n_pages;
    p->pages = pages;
    p->next = st->pins;
    st->pins = p;
    st->n_pins++;
    ns->holds++;
    *pin_id = p->id;
    pthread_mutex_unlock(&st->mu);
    if (n_pinned)
        *n_pinned = m;
    return SB_OK;
}

int sb_ns_unpin(sb_ns *ns, uint64_t pin_id)
{
    if (!ns)
        return SB_ERR_INVAL;
    sb_store *st = ns->st;
    int rc = SB_ERR_NOT_FOUND;
    pthread_mutex_lock(&st->mu);
    sb_pins_expire(st);
    for (sb_pin **pp = &st->pins; *pp; pp = &(*pp)->next) {
        if ((*pp)->id == pin_id && (*pp)->ns == ns) {
            sb_pin *p = *pp;
            *pp = p->next;
            sb_pin_free(st, p);
            rc = SB_OK;
            break;
        }
    }
    pthread_mutex_unlock(&st->mu);
    return rc;
}
