/* check.c -- the consistency checker (sb_store_check) and the tree dump.
 * Tests and fuzzers run the checker after every step; it recomputes every
 * invariant of radix.h and every gauge of the store from scratch. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "radix.h"

#define FAIL(...)                                                              \
    do {                                                                       \
        fprintf(stderr, "snapbank check: " __VA_ARGS__);                       \
        fputc('\n', stderr);                                                   \
        return SB_ERR_CORRUPT;                                                 \
    } while (0)

static int check_candidate(const sb_ns *ns, const sb_blk *b);

typedef struct totals {
    uint64_t pages, pinned, points, point_bytes, indexed_bytes, nodes, blocks;
    uint64_t free_bytes, free_pages; /* resident blocks held by the index alone */
    uint64_t resident_pages;          /* indexed pages with data in RAM */
    uint64_t resident_bytes;          /* indexed blocks' bytes in RAM */
} totals;

/* Check one page against the path that leads to it. */
static int check_page(const sb_ns *ns, const sb_node *N, const sb_blk *b, uint32_t region,
                      const uint32_t *path_tok, const sb_key *region_key)
{
    uint32_t pt = ns->page_tokens;
    uint32_t end = sb_node_end(N);
    uint32_t want = (region + 1) * pt <= end ? pt : end - region * pt;
    if (!b->indexed || b->node != N || b->kind != SB_BLK_PAGE || !b->committed ||
        b->ns != ns || b->refs < 1)
        FAIL("page of region %" PRIu32 " at depth %" PRIu32 ": bad state", region, N->start);
    if (b->region != region || b->n_tokens != want)
        FAIL("page at depth %" PRIu32 ": region %" PRIu32 "/%" PRIu32 ", tokens %" PRIu32
             "/%" PRIu32, N->start, b->region, region, b->n_tokens, want);
    const sb_key *parent = region ? &region_key[region - 1] : &ns->root_key;
    sb_key k = sb_key_chain(parent, path_tok + (size_t)region * pt, want);
    if (!sb_key_eq(&k, &b->key) || !sb_key_eq(parent, &b->parent_key))
        FAIL("page of region %" PRIu32 ": content key does not match its tokens", region);
    return SB_OK;
}

static int check_node(const sb_ns *ns, const sb_node *N, uint32_t *path_tok,
                      sb_key *region_key, totals *t)
{
    uint32_t pt = ns->page_tokens;
    uint32_t end = sb_node_end(N);
    t->nodes++;
    if (N == ns->root) {
        if (N->start || N->len || N->n_pages || N->point || N->parent)
            FAIL("root has an edge, pages or a point");
    } else {
        if (N->len == 0 || N->start != sb_node_end(N->parent))
            FAIL("node at depth %" PRIu32 ": empty edge or gap to its parent", N->start);
        memcpy(path_tok + N->start, N->tok, (size_t)N->len * sizeof *N->tok);
    }
    for (uint32_t i = 0; i < N->n_kids; i++) {
        const sb_node *c = N->kids[i].node;
        if (c->parent != N || N->kids[i].first != c->tok[0])
            FAIL("node at depth %" PRIu32 ": child %" PRIu32 " badly linked", N->start, i);
        if (i && N->kids[i - 1].first >= N->kids[i].first)
            FAIL("node at depth %" PRIu32 ": children not sorted", N->start);
    }
    uint32_t full = end / pt - N->start / pt;
    uint32_t want = full + (N->n_kids == 0 && N != ns->root && end % pt ? 1 : 0);
    if (N->n_pages != want)
        FAIL("node [%" PRIu32 ",%" PRIu32 "): %" PRIu32 " pages, want %" PRIu32, N->start,
             end, N->n_pages, want);
    if (N != ns->root && N->n_kids == 0 && N->n_pages == 0)
        FAIL("leaf [%" PRIu32 ",%" PRIu32 ") has no page", N->start, end);
    for (uint32_t j = 0; j < N->n_pages; j++) {
        const sb_blk *b = N->pages[j];
        uint32_t region = N->start / pt + j;
        int rc = check_page(ns, N, b, region, path_tok, region_key);
        if (rc || (rc = check_candidate(ns, b)))
            return rc;
        if (b->n_tokens == pt)
            region_key[region] = b->key;
        t->pages++;
        t->blocks++;
        t->indexed_bytes += b->bytes;
        if (b->refs > 1 || !b->data)
            t->pinned++;
        else
            t->free_bytes += b->bytes, t->free_pages++;
        t->resident_pages += b->data != NULL;
        t->resident_bytes += b->data ? b->bytes : 0;
    }
    if (N->point) {
        const sb_blk *b = N->point;
        if (!b->indexed || b->node != N || b->kind != SB_BLK_POINT || b->ns != ns ||
            b->refs < 1 || b->n_tokens != end)
            FAIL("point state at depth %" PRIu32 ": bad state", end);
        int rc = check_candidate(ns, b);
        if (rc)
            return rc;
        t->points++;
        t->point_bytes += b->bytes;
        t->blocks++;
        if (b->refs == 1 && b->data)
            t->free_bytes += b->bytes;
        t->resident_bytes += b->data ? b->bytes : 0;
    }
    return SB_OK;
}

static int check_heap(const sb_heap *h, int which, const sb_ns *only, uint64_t blocks)
{
    if (h->n > h->cap || h->n > blocks)
        FAIL("heap %d: %zu entries, capacity %zu, %" PRIu64 " blocks", which, h->n, h->cap,
             blocks);
    for (size_t i = 0; i < h->n; i++) {
        const sb_blk *b = h->a[i];
        if (b->heap_pos[which] != i || !b->indexed || (only && b->ns != only))
            FAIL("heap %d: entry %zu misplaced or not indexed here", which, i);
        if (i && h->a[(i - 1) / 2]->heap_key[which] > b->heap_key[which])
            FAIL("heap %d: order broken at %zu", which, i);
    }
    return SB_OK;
}

/* Where an indexed block stands in the eviction heaps. */
static int check_candidate(const sb_ns *ns, const sb_blk *b)
{
    const sb_heap *heaps[2] = { &ns->st->heap, &ns->heap };
    bool leaf = b->kind == SB_BLK_POINT || sb_radix_is_leaf_page(b);
    bool protected_ = b == ns->newest_page || b == ns->newest_point;
    for (int w = 0; w < 2; w++) {
        size_t pos = b->heap_pos[w];
        if (pos == SB_HEAP_PARKED) {
            if (b->refs < 2 && !protected_)
                FAIL("block parked in heap %d with no outside reference", w);
        } else if (pos == SB_HEAP_OUT) {
            if (b->data && (leaf || sb_blk_droppable(b) || (b->below & SB_BELOW_CUT)))
                FAIL("%s block (region %" PRIu32 ") is no eviction candidate in heap %d",
                     leaf ? "leaf" : (b->below & SB_BELOW_CUT) ? "cut" : "clean", b->region, w);
        } else if (!b->data) {
            FAIL("disk-only block (region %" PRIu32 ") in heap %d", b->region, w);
        } else if (pos >= heaps[w]->n || heaps[w]->a[pos] != b) {
            FAIL("block's heap %d position is stale", w);
        }
    }
    return SB_OK;
}

static int check_ns(const sb_ns *ns, totals *t)
{
    sb_store *st = ns->st;
    /* Deepest depth: bounded by max_seq_tokens. */
    size_t cap = (size_t)st->cfg.max_seq_tokens + 1;
    uint64_t idx_tokens = 0;
    totals mine = { 0 };
    size_t depth_cap = 64, sp = 0;
    const sb_node **stack = sb_malloc(&st->mem, depth_cap * sizeof *stack);
    uint32_t *path_tok = NULL;
    sb_key *region_key = NULL;
    size_t tok_cap = 0;
    int rc = SB_OK;
    if (!stack)
        return SB_ERR_NOMEM;
    stack[sp++] = ns->root;
    while (sp && rc == SB_OK) {
        const sb_node *N = stack[--sp];
        uint32_t end = sb_node_end(N);
        if (end > cap) {
            rc = SB_ERR_CORRUPT;
            fprintf(stderr, "snapbank check: depth %" PRIu32 " over max_seq_tokens\n", end);
            break;
        }
        if (end + 1 > tok_cap) {
            size_t nc = (end + 1) * 2;
            uint32_t *pt2 = sb_realloc(&st->mem, path_tok, nc * sizeof *path_tok);
            sb_key *rk2 = pt2 ? sb_realloc(&st->mem, region_key, nc * sizeof *region_key) : NULL;
            if (pt2)
                path_tok = pt2;
            if (rk2)
                region_key = rk2;
            if (!pt2 || !rk2) {
                rc = SB_ERR_NOMEM;
                break;
            }
            tok_cap = nc;
        }
        idx_tokens += N->len;
        rc = check_node(ns, N, path_tok, region_key, &mine);
        if (sp + N->n_kids > depth_cap) {
            depth_cap = (sp + N->n_kids) * 2;
            const sb_node **s2 = sb_realloc(&st->mem, stack, depth_cap * sizeof *stack);
            if (!s2) {
                rc = SB_ERR_NOMEM;
                break;
            }
            stack = s2;
        }
        /* Depth-first, pre-order: path_tok and region_key below a node's
         * start stay those of its ancestors. */
        for (uint32_t i = N->n_kids; i-- > 0;)
            stack[sp++] = N->kids[i].node;
    }
    sb_free(stack);
    sb_free(path_tok);
    sb_free(region_key);
    if (rc)
        return rc;
    if (idx_tokens != ns->index_tokens)
        FAIL("namespace %016" PRIx64 ": %" PRIu64 " tokens in the tree, %" PRIu64 " counted",
             ns->id, idx_tokens, ns->index_tokens);
    if (mine.pages != ns->indexed_pages)
        FAIL("namespace %016" PRIx64 ": %" PRIu64 " pages in the tree, %" PRIu64 " counted",
             ns->id, mine.pages, ns->indexed_pages);
    if (mine.blocks != ns->n_blocks)
        FAIL("namespace %016" PRIx64 ": %" PRIu64 " blocks in the tree, %" PRIu64 " counted",
             ns->id, mine.blocks, ns->n_blocks);
    if ((rc = check_heap(&ns->heap, SB_HEAP_NS, ns, mine.blocks)))
        return rc;
    if (ns->ram_bytes < mine.resident_bytes)
        FAIL("namespace %016" PRIx64 ": ram_bytes below what its index holds", ns->id);
    if (mine.free_bytes != ns->free_bytes)
        FAIL("namespace %016" PRIx64 ": %" PRIu64 " evictable bytes, %" PRIu64 " counted",
             ns->id, mine.free_bytes, ns->free_bytes);
    if (ns->ram_bytes > st->cfg.ns_ram_bytes)
        FAIL("namespace %016" PRIx64 ": over its budget", ns->id);
    if (ns->newest_page && (!ns->newest_page->indexed || ns->newest_page->ns != ns))
        FAIL("namespace %016" PRIx64 ": newest page not indexed", ns->id);
    t->pages += mine.pages;
    t->pinned += mine.pinned;
    t->points += mine.points;
    t->point_bytes += mine.point_bytes;
    t->indexed_bytes += mine.indexed_bytes;
    t->nodes += mine.nodes;
    t->blocks += mine.blocks;
    t->free_bytes += mine.free_bytes;
    t->free_pages += mine.free_pages;
    t->resident_pages += mine.resident_pages;
    return SB_OK;
}

/* The pool's spare stacks against its gauges: every spare is a live slot
 * of a chunk of its class, its count is what spare_bytes and spare_pages
 * say, and each stack has room for every slot of its class. */
static int check_pool(const sb_pool *p)
{
    uint64_t bytes = 0, pages = 0, tbytes = 0, tpages = 0, resident = 0, chunks = 0;
    for (const sb_chunk *k = p->chunks; k; k = k->next) {
        chunks++;
        resident += (uint64_t)k->n_live * k->cls->stride;
        if (k->n_live == 0 || k->n_live > k->n_slots)
            FAIL("pool chunk with %" PRIu32 " of %" PRIu32 " slots live", k->n_live,
                 k->n_slots);
    }
    if (chunks != p->n_chunks || resident != p->resident_bytes)
        FAIL("pool: %" PRIu64 " chunks of %" PRIu64 " bytes, %" PRIu64 "/%" PRIu64 " counted",
             chunks, resident, p->n_chunks, p->resident_bytes);
    for (const sb_pool_cls *c = p->classes; c; c = c->next) {
        if (c->n_spare > c->spare_cap || c->spare_cap < c->n_slots || c->n_spare > c->n_slots)
            FAIL("pool class of %zu bytes: %zu spares, room %zu, %zu slots", c->data_bytes,
                 c->n_spare, c->spare_cap, c->n_slots);
        for (size_t i = 0; i < c->n_spare; i++) {
            const sb_pbuf *b = &c->spare[i];
            const sb_chunk *k = b->chunk;
            if (!k || k->cls != c || b->data < k->base ||
                b->data + c->stride > k->base + k->map_bytes ||
                (size_t)(b->data - k->base) % c->stride)
                FAIL("pool class of %zu bytes: spare %zu is not a slot of its chunks",
                     c->data_bytes, i);
        }
        bytes += c->n_spare * c->budget_bytes;
        pages += c->page ? c->n_spare : 0;
        tbytes += c->n_transit * c->budget_bytes;
        tpages += c->page ? c->n_transit : 0;
    }
    if (bytes != p->spare_bytes || pages != p->spare_pages || tbytes != p->transit_bytes ||
        tpages != p->transit_pages)
        FAIL("pool: spares of %" PRIu64 " bytes (%" PRIu64 " pages), %" PRIu64 " (%" PRIu64
             ") counted", bytes, pages, p->spare_bytes, p->spare_pages);
    return SB_OK;
}

int sb_store_check(sb_store *st)
{
    if (!st)
        return SB_ERR_INVAL;
    pthread_mutex_lock(&st->mu);
    totals t = { 0 };
    uint64_t n_ns = 0, ram = 0;
    int rc = SB_OK;
    for (size_t i = 0; i < st->n_buckets && rc == SB_OK; i++)
        for (sb_ns *ns = st->buckets[i]; ns && rc == SB_OK; ns = ns->next) {
            if ((ns->scope_hash & (st->n_buckets - 1)) != i) {
                fprintf(stderr, "snapbank check: namespace in the wrong bucket\n");
                rc = SB_ERR_CORRUPT;
                break;
            }
            n_ns++;
            ram += ns->ram_bytes;
            rc = check_ns(ns, &t);
        }
    if (rc == SB_OK) {
        rc = SB_ERR_CORRUPT;
        if (n_ns != st->n_ns)
            fprintf(stderr, "snapbank check: %" PRIu64 " namespaces, %" PRIu64 " counted\n",
                    n_ns, st->n_ns);
        else if (ram + st->pool.spare_bytes + st->pool.transit_bytes != st->ram_bytes)
            fprintf(stderr, "snapbank check: namespaces hold %" PRIu64 " bytes and the pool's "
                    "spares %" PRIu64 " (%" PRIu64 " in transit), store %" PRIu64 "\n", ram,
                    st->pool.spare_bytes, st->pool.transit_bytes, st->ram_bytes);
        else if (check_pool(&st->pool) != SB_OK)
            ; /* it said why */
        else if (t.pages != st->indexed_pages)
            fprintf(stderr, "snapbank check: %" PRIu64 " pages indexed, %" PRIu64 " counted\n",
                    t.pages, st->indexed_pages);
        else if (t.pinned != st->indexed_pages - st->free_pages || t.points != st->n_points ||
                 t.point_bytes != st->point_bytes || t.indexed_bytes != st->indexed_bytes)
            fprintf(stderr, "snapbank check: gauges drifted (pinned %" PRIu64 "/%" PRIu64
                    ", points %" PRIu64 "/%" PRIu64 ")\n", t.pinned,
                    st->indexed_pages - st->free_pages,
                    t.points, st->n_points);
        else if (t.nodes != st->index_nodes)
            fprintf(stderr, "snapbank check: %" PRIu64 " nodes, %" PRIu64 " counted\n",
                    t.nodes, st->index_nodes);
        else if (st->ram_bytes > st->cfg.ram_bytes || st->ram_pages > st->cfg.ram_pages)
            fprintf(stderr, "snapbank check: over the RAM budget (%" PRIu64 " bytes, %" PRIu64
                    " pages)\n", st->ram_bytes, st->ram_pages);
        else if (st->ram_pages < t.resident_pages + st->pool.spare_pages +
                                     st->pool.transit_pages)
            fprintf(stderr, "snapbank check: fewer pages allocated than indexed\n");
        else if (t.free_bytes != st->free_bytes || t.free_pages != st->free_pages)
            fprintf(stderr, "snapbank check: evictable gauges drifted (%" PRIu64 "/%" PRIu64
                    " bytes, %" PRIu64 "/%" PRIu64 " pages)\n", t.free_bytes, st->free_bytes,
                    t.free_pages, st->free_pages);
        else if (t.blocks != st->n_blocks)
            fprintf(stderr, "snapbank check: %" PRIu64 " blocks, %" PRIu64 " counted\n",
                    t.blocks, st->n_blocks);
        else
            rc = check_heap(&st->heap, SB_HEAP_STORE, NULL, t.blocks);
    }
    pthread_mutex_unlock(&st->mu);
    return rc;
}

/* ---- dump ------------------------------------------------------------------------ */

static void dump_node(const sb_ns *ns, const sb_node *N, FILE *f, unsigned indent)
{
    fprintf(f, "%*s[%" PRIu32 ",%" PRIu32 ")", indent * 2, "", N->start, sb_node_end(N));
    uint32_t show = N->len < 8 ? N->len : 8;
    for (uint32_t i = 0; i < show; i++)
        fprintf(f, "%s%" PRIu32, i ? " " : " \"", N->tok[i]);
    if (N->len)
        fprintf(f, "%s\"", N->len > show ? " ..." : "");
    fprintf(f, " pages=%" PRIu32, N->n_pages);
    for (uint32_t j = 0; j < N->n_pages; j++) {
        const sb_blk *b = N->pages[j];
        fprintf(f, "%s%" PRIu32 ":%" PRIu32 "t/r%" PRIu32, j ? "," : " {", b->region,
                b->n_tokens, b->refs);
    }
    if (N->n_pages)
        fputc('}', f);
    if (N->point)
        fprintf(f, " point(r%" PRIu32 ")", N->point->refs);
    fputc('\n', f);
    (void)ns;
}

int sb_ns_dump(sb_ns *ns, void *stream)
{
    if (!ns || !stream)
        return SB_ERR_INVAL;
    FILE *f = stream;
    sb_store *st = ns->st;
    pthread_mutex_lock(&st->mu);
    fprintf(f, "namespace %016" PRIx64 ": page_tokens %" PRIu32 ", %" PRIu64 " pages, %" PRIu64
            " tokens\n", ns->id, ns->page_tokens, ns->indexed_pages, ns->index_tokens);
    /* Depth-first with an explicit stack of (node, depth). */
    size_t cap = 64, sp = 0;
    struct ent { const sb_node *n; unsigned d; } *stack = sb_malloc(&st->mem, cap * sizeof *stack);
    int rc = stack ? SB_OK : SB_ERR_NOMEM;
    if (stack)
        stack[sp++] = (struct ent){ ns->root, 0 };
    while (sp && rc == SB_OK) {
        struct ent e = stack[--sp];
        dump_node(ns, e.n, f, e.d);
        if (sp + e.n->n_kids > cap) {
            cap = (sp + e.n->n_kids) * 2;
            void *s2 = sb_realloc(&st->mem, stack, cap * sizeof *stack);
            if (!s2) {
                rc = SB_ERR_NOMEM;
                break;
            }
            stack = s2;
        }
        for (uint32_t i = e.n->n_kids; i-- > 0;)
            stack[sp++] = (struct ent){ e.n->kids[i].node, e.d + 1 };
    }
    sb_free(stack);
    pthread_mutex_unlock(&st->mu);
    return rc;
}
