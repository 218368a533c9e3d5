/* radix.c -- the token radix tree: walk, planned insertion, eviction. */
#include "radix.h"
#include "tier.h"

#include <stdlib.h>
#include <string.h>

/* ---- node memory ---------------------------------------------------------- */

static uint64_t node_bytes(const sb_node *n)
{
    return sizeof *n + (uint64_t)n->tok_cap * sizeof *n->tok +
           (uint64_t)n->pages_cap * sizeof *n->pages +
           (uint64_t)n->kids_cap * sizeof *n->kids;
}

/* Allocate a node with the given capacities, all or nothing. */
static sb_node *node_alloc(struct sb_ns *ns, uint32_t tok_cap, uint32_t pages_cap,
                           uint32_t kids_cap)
{
    sb_store *st = ns->st;
    sb_node *n = sb_calloc(&st->mem, 1, sizeof *n);
    if (!n)
        return NULL;
    n->tok_cap = tok_cap;
    n->pages_cap = pages_cap;
    n->kids_cap = kids_cap;
    if (tok_cap && !(n->tok = sb_malloc(&st->mem, (size_t)tok_cap * sizeof *n->tok)))
        goto fail;
    if (pages_cap &&
        !(n->pages = sb_malloc(&st->mem, (size_t)pages_cap * sizeof *n->pages)))
        goto fail;
    if (kids_cap && !(n->kids = sb_malloc(&st->mem, (size_t)kids_cap * sizeof *n->kids)))
        goto fail;
    st->index_bytes += node_bytes(n);
    st->index_nodes++;
    return n;
fail:
    sb_free(n->tok);
    sb_free(n->pages);
    sb_free(n->kids);
    sb_free(n);
    return NULL;
}

static void node_free(struct sb_ns *ns, sb_node *n)
{
    sb_store *st = ns->st;
    st->index_bytes -= node_bytes(n);
    st->index_nodes--;
    sb_free(n->tok);
    sb_free(n->pages);
    sb_free(n->kids);
    sb_free(n);
}

/* Grow an array of n's to at least want elements (x1.5). Returns false on
 * allocation failure, leaving the array as it was. */
static bool grow(struct sb_ns *ns, void **arr, uint32_t *cap, uint32_t want,
                 size_t elem)
{
    if (want <= *cap)
        return true;
    uint64_t c = (uint64_t)*cap + *cap / 2;
    if (c < want)
        c = want;
    if (c < 4)
        c = 4;
    if (c > UINT32_MAX)
        c = UINT32_MAX;
    void *p = sb_realloc(&ns->st->mem, *arr, (size_t)c * elem);
    if (!p)
        return false;
    ns->st->index_bytes += (c - *cap) * elem;
    *arr = p;
    *cap = (uint32_t)c;
    return true;
}

static bool grow_tok(struct sb_ns *ns, sb_node *n, uint32_t want)
{
    return grow(ns, (void **)&n->tok, &n->tok_cap, want, sizeof *n->tok);
}

static bool grow_pages(struct sb_ns *ns, sb_node *n, uint32_t want)
{
    return grow(ns, (void **)&n->pages, &n->pages_cap, want, sizeof *n->pages);
}

static bool grow_kids(struct sb_ns *ns, sb_node *n, uint32_t want)
{
    return grow(ns, (void **)&n->kids, &n->kids_cap, want, sizeof *n->kids);
}

/* ---- children --------------------------------------------------------------- */

/* Index of the child whose first token is t, or of the slot where it would
 * go (with *found false). Binary search over the sorted kids. */
static uint32_t kid_search(const sb_node *n, uint32_t t, bool *found)
{
    uint32_t lo = 0, hi = n->n_kids;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (n->kids[mid].first < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo < n->n_kids && n->kids[lo].first == t;
    return lo;
}

static sb_node *kid_find(const sb_node *n, uint32_t t)
{
    if (n->n_kids == 1) /* the common case: a straight path */
        return n->kids[0].first == t ? n->kids[0].node : NULL;
    bool found;
    uint32_t i = kid_search(n, t, &found);
    return found ? n->kids[i].node : NULL;
}

/* Insert child c (capacity must already be there). */
static void kid_insert(sb_node *n, sb_node *c)
{
    bool found;
    uint32_t i = kid_search(n, c->tok[0], &found);
    memmove(&n->kids[i + 1], &n->kids[i], (n->n_kids - i) * sizeof *n->kids);
    n->kids[i].first = c->tok[0];
    n->kids[i].node = c;
    n->n_kids++;
    c->parent = n;
}

static void kid_remove(sb_node *n, const sb_node *c)
{
    bool found;
    uint32_t i = kid_search(n, c->tok[0], &found);
    memmove(&n->kids[i], &n->kids[i + 1], (n->n_kids - i - 1) * sizeof *n->kids);
    n->n_kids--;
}

static void kid_replace(sb_node *n, const sb_node *old, sb_node *repl)
{
    bool found;
    uint32_t i = kid_search(n, old->tok[0], &found);
    n->kids[i].node = repl;
    repl->parent = n;
}

/* ---- init, free ------------------------------------------------------------- */

int sb_radix_init(struct sb_ns *ns)
{
    ns->root = node_alloc(ns, 0, 0, 0);
    return ns->root ? SB_OK : SB_ERR_NOMEM;
}

static void free_subtree(struct sb_ns *ns, sb_node *n)
{
    /* Iterative post-order: descend to a leaf, free it, climb. */
    while (n) {
        if (n->n_kids) {
            n = n->kids[--n->n_kids].node;
            continue;
        }
        sb_node *parent = n->parent;
        for (uint32_t j = 0; j < n->n_pages; j++)
            sb_blk_unindex(n->pages[j]);
        if (n->point)
            sb_blk_unindex(n->point);
        ns->index_tokens -= n->len;
        node_free(ns, n);
        n = parent;
    }
}

void sb_radix_free(struct sb_ns *ns)
{
    if (ns->root)
        free_subtree(ns, ns->root);
    ns->root = NULL;
}

/* ---- walk ------------------------------------------------------------------- */

size_t sb_radix_lcp(const uint32_t *a, const uint32_t *b, size_t n)
{
    /* memcmp over 64-token chunks (libc's is vectorized), then the exact
     * position inside the first chunk that differs. */
    size_t i = 0;
    while (i + 64 <= n && memcmp(a + i, b + i, 64 * sizeof *a) == 0)
        i += 64;
    while (i < n && a[i] == b[i])
        i++;
    return i;
}

/* Put n's full pages whose region ends at or before depth m into path. */
static void collect(const struct sb_ns *ns, const sb_node *n, size_t m, sb_blk **path)
{
    uint32_t pt = ns->page_tokens;
    uint32_t base = n->start / pt;
    for (uint32_t j = 0; j < n->n_pages; j++) {
        if ((uint64_t)(base + j + 1) * pt > m)
            break;
        path[base + j] = n->pages[j];
    }
}

void sb_radix_walk(struct sb_ns *ns, const uint32_t *tokens, size_t n,
                   sb_walk *w, sb_blk **path)
{
    sb_node *node = ns->root;
    size_t m = 0;
    w->point_node = NULL;
    for (;;) {
        /* Invariant: every token of node's edge matched; m == end(node). */
        if (node->point)
            w->point_node = node;
        sb_node *kid = m < n ? kid_find(node, tokens[m]) : NULL;
        if (!kid) {
            w->node = node;
            w->off = node->len;
            w->m = m;
            return;
        }
        size_t k = kid->len < n - m ? kid->len : n - m;
        size_t c = 1 + sb_radix_lcp(kid->tok + 1, tokens + m + 1, k - 1);
        m += c;
        if (path)
            collect(ns, kid, m, path);
        if (c < kid->len) {
            w->node = kid;
            w->off = (uint32_t)c;
            w->m = m;
            return;
        }
        node = kid;
    }
}

sb_blk *sb_radix_cover(struct sb_ns *ns, const sb_walk *w, uint32_t r)
{
    uint32_t pt = ns->page_tokens;
    const sb_node *n = w->node;
    for (;;) {
        uint32_t j = r - n->start / pt;
        if (j < n->n_pages)
            return n->pages[j];
        /* Region r continues below n; any child path holds a page for it
         * (I3). Prefer the first child. */
        n = n->kids[0].node;
    }
}

sb_blk *sb_radix_page_above(const sb_node *node, uint32_t pt, uint32_t r)
{
    for (const sb_node *n = node; n; n = n->parent) {
        uint32_t base = n->start / pt;
        if (r >= base && r - base < n->n_pages)
            return n->pages[r - base];
    }
    return NULL;
}

sb_blk *sb_radix_prev_page(struct sb_ns *ns, const sb_blk *b)
{
    /* Region r ends at depth (r + 1) * pt <= b's first depth: on b's node
     * or an ancestor whose edge holds that depth. */
    return b->region ? sb_radix_page_above(b->node, ns->page_tokens, b->region - 1) : NULL;
}

bool sb_radix_is_leaf_page(const sb_blk *b)
{
    const sb_node *n = b->node;
    return n && n->n_kids == 0 && n->n_pages && n->pages[n->n_pages - 1] == b;
}

int sb_radix_visit(struct sb_ns *ns, void (*fn)(void *ctx, sb_blk *b), void *ctx)
{
    size_t cap = 64, sp = 0;
    sb_node **stack = malloc(cap * sizeof *stack);
    if (!stack)
        return SB_ERR_NOMEM;
    stack[sp++] = ns->root;
    while (sp) {
        sb_node *x = stack[--sp];
        for (uint32_t j = 0; j < x->n_pages; j++)
            fn(ctx, x->pages[j]);
        if (x->point)
            fn(ctx, x->point);
        if (sp + x->n_kids > cap) {
            while (sp + x->n_kids > cap)
                cap *= 2;
            sb_node **p = realloc(stack, cap * sizeof *p);
            if (!p) {
                free(stack);
                return SB_ERR_NOMEM;
            }
            stack = p;
        }
        for (uint32_t k = x->n_kids; k-- > 0;)
            stack[sp++] = x->kids[k].node;
    }
    free(stack);
    return SB_OK;
}

/* ---- planned insertion ------------------------------------------------------ */
/*
 * Inserting tokens[0, n) after a walk that matched m tokens, stopping at
 * (node N, off):
 *
 *   1. m == n, at N's end            nothing to link (SB_PLAN_NONE); a point
 *                                    goes on N.
 *   2. m == n, mid-edge, with point  split N at m so a node ends at n
 *                                    (SB_PLAN_SPLIT).
 *   3. m < n, mid-edge               split N at m into TOP [start, m) and N
 *                                    [m, end), then hang a new leaf
 *                                    [m, n) under TOP (SB_PLAN_SPLIT_CHILD).
 *   4. m < n, at the end of a leaf   append tokens[m, n) to N's edge; the new
 *      without a point              page for region floor(m / pt) replaces
 *                                    N's partial page, if any (SB_PLAN_EXTEND).
 *   5. m < n, at a node end          a new leaf [m, n) under N; if N was a
 *      otherwise                     leaf its partial page is superseded
 *                                    (SB_PLAN_CHILD).
 *
 * The split (steps 2, 3): N keeps its identity as the LOWER half, so its
 * children, point and tail pages stay put; TOP takes the head of the edge
 * and the pages whose region ends by depth m, and replaces N in the parent.
 *
 *     before:  P --[s .. m .. e)--> N{kids, point}
 *     after:   P --[s, m)--> TOP --[m, e)--> N{kids, point}
 *                                 \--[m, n)--> LEAF
 */

/* Pages a node spanning [start, end) holds when it is an inner node. */
static uint32_t full_pages(uint32_t pt, size_t start, size_t end)
{
    return (uint32_t)(end / pt - start / pt);
}

/* Pages a new leaf [start, end) holds. */
static uint32_t leaf_pages(uint32_t pt, size_t start, size_t end)
{
    return full_pages(pt, start, end) + (end % pt ? 1u : 0u);
}

int sb_radix_prepare(struct sb_ns *ns, const sb_walk *w, size_t n, bool want_point,
                     sb_plan *plan)
{
    uint32_t pt = ns->page_tokens;
    sb_node *N = w->node;
    bool mid = w->off < N->len;
    size_t m = w->m;
    memset(plan, 0, sizeof *plan);

    if (m == n) {
        if (!mid || !want_point)
            return SB_OK; /* step 1 (or mid-edge without a point: nothing) */
        plan->kind = SB_PLAN_SPLIT; /* step 2 */
    } else if (mid) {
        plan->kind = SB_PLAN_SPLIT_CHILD; /* step 3 */
    } else if (N != ns->root && N->n_kids == 0 && !N->point) {
        /* step 4: grow the leaf's arrays in place. Growth that succeeds
         * before a later failure is harmless: capacity only. */
        uint64_t len = (uint64_t)N->len + (n - m);
        uint32_t pages = leaf_pages(pt, N->start, N->start + len);
        if (!grow_tok(ns, N, (uint32_t)len) || !grow_pages(ns, N, pages))
            return SB_ERR_NOMEM;
        plan->kind = SB_PLAN_EXTEND;
        return SB_OK;
    } else {
        plan->kind = SB_PLAN_CHILD; /* step 5 */
        if (!grow_kids(ns, N, N->n_kids + 1))
            return SB_ERR_NOMEM;
    }

    if (plan->kind == SB_PLAN_SPLIT || plan->kind == SB_PLAN_SPLIT_CHILD) {
        uint32_t top_pages = full_pages(pt, N->start, m);
        uint32_t top_kids = plan->kind == SB_PLAN_SPLIT ? 1 : 2;
        plan->top = node_alloc(ns, w->off, top_pages, top_kids);
        if (!plan->top)
            return SB_ERR_NOMEM;
    }
    if (plan->kind == SB_PLAN_CHILD || plan->kind == SB_PLAN_SPLIT_CHILD) {
        plan->leaf = node_alloc(ns, (uint32_t)(n - m), leaf_pages(pt, m, n), 0);
        if (!plan->leaf) {
            sb_radix_plan_drop(ns, plan);
            return SB_ERR_NOMEM;
        }
    }
    return SB_OK;
}

void sb_radix_plan_drop(struct sb_ns *ns, sb_plan *plan)
{
    if (plan->top)
        node_free(ns, plan->top);
    if (plan->leaf)
        node_free(ns, plan->leaf);
    plan->top = plan->leaf = NULL;
    plan->kind = SB_PLAN_NONE;
}

/* Split N at edge offset off using the preallocated TOP (steps 2 and 3). */
static void split(struct sb_ns *ns, sb_node *N, uint32_t off, sb_node *top)
{
    uint32_t pt = ns->page_tokens;
    uint32_t m = N->start + off;
    uint32_t n_top = full_pages(pt, N->start, m);

    top->start = N->start;
    top->len = off;
    memcpy(top->tok, N->tok, (size_t)off * sizeof *N->tok);
    if (n_top) /* top->pages is NULL when the upper half holds no full page */
        memcpy(top->pages, N->pages, (size_t)n_top * sizeof *N->pages);
    top->n_pages = n_top;
    for (uint32_t j = 0; j < n_top; j++)
        top->pages[j]->node = top;
    top->point = NULL;
    kid_replace(N->parent, N, top);

    memmove(N->tok, N->tok + off, (size_t)(N->len - off) * sizeof *N->tok);
    N->len -= off;
    N->start = m;
    if (n_top)
        memmove(N->pages, N->pages + n_top, (size_t)(N->n_pages - n_top) * sizeof *N->pages);
    N->n_pages -= n_top;
    top->n_kids = 0;
    kid_insert(top, N);
}

/* Drop the partial page at the end of leaf-that-was N: repl, the new page
 * of the same region, covers its tokens and more. Pins holding the old page
 * move to repl, so what they pinned stays restorable from the index. */
static void drop_partial(struct sb_ns *ns, sb_node *N, sb_blk *repl)
{
    uint32_t pt = ns->page_tokens;
    if (N == ns->root || sb_node_end(N) % pt == 0)
        return;
    if (N->n_pages > full_pages(pt, N->start, sb_node_end(N))) {
        sb_blk *old = N->pages[--N->n_pages];
        ns->st->stats.pages_superseded++;
        old->superseded = 1;
        if (old->refs > 1)
            sb_pins_supersede(ns->st, old, repl);
        sb_tier_supersede(ns->st, old, repl); /* durability tickets wait for repl now */
        sb_blk_unindex(old);
    }
}

sb_node *sb_radix_apply(struct sb_ns *ns, const sb_walk *w,
                        const uint32_t *tokens, size_t n, sb_plan *plan,
                        sb_blk **fresh, size_t n_fresh)
{
    sb_node *N = w->node;
    size_t m = w->m;
    sb_node *leaf = NULL;

    switch (plan->kind) {
    case SB_PLAN_NONE:
        return w->off == N->len ? N : NULL;
    case SB_PLAN_SPLIT: {
        sb_node *top = plan->top;
        split(ns, N, w->off, top);
        plan->top = NULL;
        return top;
    }
    case SB_PLAN_SPLIT_CHILD:
        split(ns, N, w->off, plan->top);
        N = plan->top;
        plan->top = NULL;
        leaf = plan->leaf;
        break;
    case SB_PLAN_CHILD:
        drop_partial(ns, N, fresh[0]);
        leaf = plan->leaf;
        break;
    case SB_PLAN_EXTEND:
        drop_partial(ns, N, fresh[0]);
        memcpy(N->tok + N->len, tokens + m, (n - m) * sizeof *tokens);
        N->len += (uint32_t)(n - m);
        ns->index_tokens += n - m;
        for (size_t i = 0; i < n_fresh; i++) {
            N->pages[N->n_pages++] = fresh[i];
            sb_blk_index(fresh[i], N);
        }
        plan->kind = SB_PLAN_NONE;
        return N;
    }

    /* Steps 3 and 5: link the new leaf [m, n) under N. */
    leaf->start = (uint32_t)m;
    leaf->len = (uint32_t)(n - m);
    memcpy(leaf->tok, tokens + m, (n - m) * sizeof *tokens);
    ns->index_tokens += n - m;
    for (size_t i = 0; i < n_fresh; i++) {
        leaf->pages[leaf->n_pages++] = fresh[i];
        sb_blk_index(fresh[i], leaf);
    }
    kid_insert(N, leaf);
    plan->leaf = NULL;
    plan->kind = SB_PLAN_NONE;
    return leaf;
}

/* ---- removal -------------------------------------------------------------- */

/* Merge the only child C of inner node P into P (path compression, I5). A
 * failed allocation leaves both as they were. */
static void try_merge(struct sb_ns *ns, sb_node *P)
{
    if (P == ns->root || P->n_kids != 1 || P->point)
        return;
    sb_node *C = P->kids[0].node;
    if (!grow_tok(ns, P, P->len + C->len) ||
        !grow_pages(ns, P, P->n_pages + C->n_pages))
        return;
    memcpy(P->tok + P->len, C->tok, (size_t)C->len * sizeof *C->tok);
    P->len += C->len;
    for (uint32_t j = 0; j < C->n_pages; j++) {
        C->pages[j]->node = P;
        P->pages[P->n_pages++] = C->pages[j];
    }
    /* P takes C's children array and point. */
    sb_kid *kids = P->kids;
    uint32_t cap = P->kids_cap;
    P->kids = C->kids;
    P->kids_cap = C->kids_cap;
    P->n_kids = C->n_kids;
    C->kids = kids;
    C->kids_cap = cap;
    C->n_kids = 0;
    for (uint32_t i = 0; i < P->n_kids; i++)
        P->kids[i].node->parent = P;
    P->point = C->point;
    if (P->point)
        P->point->node = P;
    C->point = NULL;
    C->n_pages = 0;
    node_free(ns, C);
}

/*
 * Evicting a leaf page, step by step (the step numbers are in the code):
 *
 *   1. Unindex page b, the last page of leaf L; it covered region r, so L's
 *      edge now only has cover up to depth r * pt: cut it there. The point
 *      state at L's old end goes with it.
 *   2. If the cut leaves L's edge empty (r * pt <= L.start), unlink L from
 *      its parent P and free it.
 *   3. If P is now a leaf, its end needs a covering page of its own (I3).
 *      P had only full pages, so when its end is a multiple of pt the last
 *      one covers it; otherwise cut P to floor(end / pt) * pt and repeat
 *      from step 1's cut with L = P.
 *   4. If P still has one child and no point, merge it (I5).
 *
 *     pt = 4     root --[0,6) abcdef--> X --[6,8) gh--> L{B1}
 *                                         \-[6,7) q --> L2{B2 partial}
 *     evict B2:  L2 empties -> removed; X keeps one child and no point ->
 *                X and L merge into --[0,8) abcdefgh-- {A0, B1}
 */
/* Steps 1 (from the cut) to 4 below for leaf L, whose edge has cover up
 * to depth cut only. A point state on the way goes with the cover it
 * lost: reported to gone when given, else counted as evicted. */
static void cut_back(struct sb_ns *ns, sb_node *L, uint32_t cut,
                     void (*gone)(void *ctx, sb_blk *b), void *ctx)
{
    uint32_t pt = ns->page_tokens;
    for (;;) {
        if (L->point) {
            if (gone)
                gone(ctx, L->point);
            else
                ns->st->stats.point_evictions++;
            sb_blk_unindex(L->point);
            L->point = NULL;
        }
        if (cut > L->start) {
            ns->index_tokens -= sb_node_end(L) - cut;
            L->len = cut - L->start;
            return;
        }
        /* 2 */
        sb_node *P = L->parent;
        kid_remove(P, L);
        ns->index_tokens -= L->len;
        node_free(ns, L);
        if (P == ns->root)
            return;
        /* 3 */
        if (P->n_kids == 0) {
            uint32_t end = sb_node_end(P);
            if (end % pt == 0)
                return;
            L = P;
            cut = end / pt * pt;
            continue;
        }
        /* 4 */
        try_merge(ns, P);
        return;
    }
}

void sb_radix_evict_page(struct sb_ns *ns, sb_blk *b)
{
    sb_node *L = b->node;
    uint32_t cut = b->region * ns->page_tokens;

    /* 1 */
    L->n_pages--;
    sb_blk_unindex(b);
    cut_back(ns, L, cut, NULL, NULL);
}

/* Report block b to gone and unindex it. */
static void remove_blk(sb_blk *b, void (*gone)(void *ctx, sb_blk *b), void *ctx)
{
    gone(ctx, b);
    sb_blk_unindex(b);
}

/* Unindex every block of the subtree of top (unlinked from its parent by
 * the caller) and free its nodes: post-order, as free_subtree. */
static void remove_subtree(struct sb_ns *ns, sb_node *top,
                           void (*gone)(void *ctx, sb_blk *b), void *ctx)
{
    sb_node *n = top;
    for (;;) {
        if (n->n_kids) {
            n = n->kids[--n->n_kids].node;
            continue;
        }
        sb_node *parent = n->parent;
        for (uint32_t j = n->n_pages; j-- > 0;)
            remove_blk(n->pages[j], gone, ctx);
        n->n_pages = 0;
        if (n->point)
            remove_blk(n->point, gone, ctx);
        n->point = NULL;
        ns->index_tokens -= n->len;
        bool last = n == top;
        node_free(ns, n);
        if (last)
            return;
        n = parent;
    }
}

/*
 * Removing the subtree under a prefix of n tokens (sb_ns_remove), r =
 * floor(n / pt), the walk stopped in (or at the end of) node N:
 *
 *   1. Every child of N goes with its subtree (they all start at or past
 *      depth n), and N's point state (at N's end, >= n).
 *   2. N's pages of region r and later go: they end past r * pt, so they
 *      hold the prefix's tokens from r * pt to n (or start at n) and more.
 *   3. N's edge now has cover up to depth r * pt only (its page of region
 *      r - 1 ends there when N starts before it): cut it there, as an
 *      eviction cuts a leaf (cut_back: an edge left empty goes, and a
 *      parent left a leaf is cut to its last full page, its point state
 *      going with the cover it lost). Nothing above depth r * pt changes.
 *
 *     pt = 4, prefix "abcdef" (n 6, r 1): "abcdefgh" and "abcdx" stored
 *
 *     root --[0,4) abcd--> X{A0} --[4,8) efgh--> N{A1}     (X: 2 kids)
 *                                \--[4,5) x--> L{B1 partial}
 *     after:  root --[0,4) abcd--> X{A0} --[4,5) x--> L{B1 partial}
 *             (N: no kids, no page of region >= 1, cut to depth 4: empty,
 *             unlinked; X keeps one child and no point: merged with L)
 */
void sb_radix_remove(struct sb_ns *ns, const sb_walk *w, size_t n,
                     void (*gone)(void *ctx, sb_blk *b), void *ctx)
{
    uint32_t pt = ns->page_tokens;
    sb_node *N = w->node;
    uint32_t r = (uint32_t)(n / pt);
    /* The page before the cut (region r - 1), a leaf page after it when
     * nothing below is left: an eviction candidate then. */
    sb_blk *prev = r ? sb_radix_page_above(N, pt, r - 1) : NULL;

    /* 1 */
    while (N->n_kids)
        remove_subtree(ns, N->kids[--N->n_kids].node, gone, ctx);
    if (N->point)
        remove_blk(N->point, gone, ctx);
    N->point = NULL;
    /* 2 (N starts before depth n, so before region r ends: base <= r) */
    uint32_t keep = r - N->start / pt;
    while (N->n_pages > keep)
        remove_blk(N->pages[--N->n_pages], gone, ctx);
    /* 3 */
    cut_back(ns, N, r * pt, gone, ctx);
    if (prev && sb_radix_is_leaf_page(prev))
        sb_blk_candidate(prev);
}

void sb_radix_drop_point(struct sb_ns *ns, sb_node *node)
{
    sb_blk_unindex(node->point);
    node->point = NULL;
    try_merge(ns, node);
}
