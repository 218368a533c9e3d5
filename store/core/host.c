/* host.c -- the index's side of host.h: what the tiers call, each a thin
 * function over core's own (block.c, ns.c, radix.c, pool.c, alloc.c,
 * store.c), or, where only a tier needed it, the walk itself. */
#include <string.h>

#include "host.h"
#include "internal.h"
#include "radix.h"
#include "shared.h"

/* ---- the store -------------------------------------------------------------- */

uint64_t sb_host_now(sb_store *st)
{
    return sb_now_ns(st);
}

void *sb_host_malloc(sb_store *st, size_t n)
{
    return sb_malloc(&st->mem, n);
}

void *sb_host_realloc(sb_store *st, void *p, size_t n)
{
    return sb_realloc(&st->mem, p, n);
}

void sb_host_free(void *p)
{
    sb_free(p);
}

void *sb_host_map(size_t len, size_t *mapped)
{
    return sb_pool_map(len, mapped);
}

sb_key sb_host_key_chain(const sb_key *parent, const uint32_t *tokens, size_t n)
{
    return sb_key_chain(parent, tokens, n);
}

/* ---- namespaces --------------------------------------------------------------- */

int sb_host_ns_open(sb_store *st, const sb_layout *layout, const void *scope,
                    size_t scope_bytes, sb_ns **out)
{
    return sb_ns_open(st, layout, scope, scope_bytes, out);
}

void sb_host_ns_close(sb_ns *ns)
{
    sb_ns_close(ns);
}

void sb_host_ns_hold(sb_ns *ns)
{
    ns->holds++;
}

void sb_host_ns_unhold(sb_ns *ns)
{
    ns->holds--;
    sb_ns_maybe_free(ns);
}

void sb_host_ns_maybe_free(sb_ns *ns)
{
    sb_ns_maybe_free(ns);
}

/* ---- blocks ------------------------------------------------------------------- */

void sb_host_blk_ref(sb_blk *b)
{
    sb_blk_ref(b);
}

void sb_host_blk_unref(sb_blk *b)
{
    sb_blk_unref(b);
}

sb_blk *sb_host_blk_new_record(sb_ns *ns, int kind)
{
    return sb_blk_new_disk(ns, kind);
}

int sb_host_blk_alloc(sb_ns *ns, int kind, sb_blk **out)
{
    return sb_blk_alloc(ns, kind, out);
}

size_t sb_host_blk_data_bytes(const sb_ns *ns, int kind)
{
    return sb_blk_alloc_bytes(ns, kind);
}

bool sb_host_blk_leaf(const sb_blk *b)
{
    return sb_radix_is_leaf_page(b);
}

void sb_host_blk_mark(sb_blk *b, unsigned mask, unsigned bits)
{
    b->below = (uint8_t)((b->below & ~mask) | (bits & mask));
}

int sb_host_blk_shared(const sb_blk *b)
{
    return b->shared;
}

void sb_host_blk_set_shared(sb_blk *b, int state)
{
    b->shared = (uint8_t)state;
}

bool sb_host_blk_removed(const sb_blk *b)
{
    return b->removed;
}

void sb_host_blk_fresh(sb_blk *b)
{
    b->removed = 0;
}

void sb_host_blk_evictable(sb_blk *b)
{
    sb_blk_candidate(b);
}

/* ---- the index ---------------------------------------------------------------- */

sb_blk *sb_host_index_parent(const sb_blk *b)
{
    sb_ns *ns = b->ns;
    if (b->kind == SB_BLK_PAGE)
        return sb_radix_prev_page(ns, b);
    uint32_t q = b->n_tokens / ns->page_tokens;
    return q ? sb_radix_page_above(b->node, ns->page_tokens, q - 1) : NULL;
}

void sb_host_index_tokens(const sb_blk *b, uint32_t from, uint32_t to, uint32_t *out)
{
    for (const sb_node *x = b->node; x && x->len; x = x->parent) {
        uint32_t s = x->start > from ? x->start : from;
        uint32_t e = sb_node_end(x) < to ? sb_node_end(x) : to;
        if (s < e)
            memcpy(out + (s - from), x->tok + (s - x->start), (size_t)(e - s) * sizeof *out);
        if (x->start <= from)
            break;
    }
}

/* A depth-first look below b's node that stops at the first node that
 * reaches min. */
bool sb_host_index_reaches(const sb_blk *b, uint32_t min)
{
    const sb_node *n = b->node;
    if (!n || sb_node_end(n) >= min)
        return true;
    const sb_node *stack[64];
    size_t sp = 0;
    stack[sp++] = n;
    while (sp) {
        const sb_node *x = stack[--sp];
        if (sb_node_end(x) >= min)
            return true;
        for (uint32_t k = 0; k < x->n_kids; k++) {
            if (sp == sizeof stack / sizeof *stack)
                return true; /* a tree this bushy: take it as long */
            stack[sp++] = x->kids[k].node;
        }
    }
    return false;
}

int sb_host_index_visit(sb_ns *ns, void (*fn)(void *ctx, sb_blk *b), void *ctx)
{
    return sb_radix_visit(ns, fn, ctx);
}

/* Leaf pages go one at a time (the last page of the deepest leaf on the
 * first branch below b), so every step leaves the tree prefix-closed,
 * until b itself is the leaf page that goes. */
void sb_host_index_cut(sb_ns *ns, sb_blk *b, void (*gone)(void *ctx, sb_blk *page),
                       void *ctx)
{
    if (!b->indexed)
        return;
    if (b->kind == SB_BLK_POINT) {
        if (b->node->point == b)
            sb_radix_drop_point(ns, b->node);
        return;
    }
    sb_blk *prev = sb_radix_prev_page(ns, b);
    while (b->indexed) {
        sb_node *x = b->node;
        while (x->n_kids)
            x = x->kids[0].node;
        sb_blk *leaf = x->pages[x->n_pages - 1];
        if (gone)
            gone(ctx, leaf);
        sb_radix_evict_page(ns, leaf);
    }
    if (prev && prev->indexed && sb_radix_is_leaf_page(prev))
        sb_blk_candidate(prev);
}

size_t sb_host_index_prefix(sb_ns *ns, const uint32_t *tokens, size_t n)
{
    sb_walk w;
    sb_radix_walk(ns, tokens, n, &w, NULL);
    return w.m;
}

int sb_host_index_adopt(sb_ns *ns, const uint32_t *tokens, size_t n, sb_blk **pages,
                        sb_blk *point)
{
    return sb_commit_locked(ns, tokens, n, pages, point, false, NULL);
}

size_t sb_host_index_hold(sb_ns *ns, const uint32_t *tokens, size_t n, sb_blk **pages,
                          sb_key *parent)
{
    ns->st->tick++;
    sb_walk w;
    sb_radix_walk(ns, tokens, n, &w, pages);
    size_t r = w.m / ns->page_tokens;
    for (size_t i = 0; i < r; i++)
        sb_blk_ref(pages[i]);
    *parent = r ? pages[r - 1]->key : ns->root_key;
    return r;
}

int sb_host_index_add(sb_ns *ns, const uint32_t *tokens, size_t n, sb_blk **pages,
                      size_t from)
{
    for (size_t i = from; i < n / ns->page_tokens; i++)
        pages[i]->shared = SB_SHARED_OFFERED;
    ns->st->tick++;
    return sb_commit_locked(ns, tokens, n, pages, NULL, false, NULL);
}

/* ---- reads -------------------------------------------------------------------- */

int sb_host_read_reserve(sb_ns *ns, int kind, sb_pbuf *buf)
{
    return sb_blk_reserve(ns, kind, buf);
}

void sb_host_read_unreserve(sb_ns *ns, int kind, sb_pbuf buf)
{
    if (buf.data)
        sb_blk_release(ns, kind, buf);
    else
        sb_blk_unreserve(ns, kind);
}

size_t sb_host_read_plan(sb_ns *ns, int kind, size_t need)
{
    return sb_blk_plan(ns, kind, need);
}

void sb_host_read_plan_cancel(sb_ns *ns, int kind, size_t extra)
{
    sb_blk_plan_cancel(ns, kind, extra);
}

int sb_host_read_fill(sb_ns *ns, int kind, sb_pbuf *bufs, size_t need, size_t extra)
{
    return sb_blk_pool_fill(ns, kind, bufs, need, extra);
}

void sb_host_read_install(sb_blk *b, sb_pbuf buf)
{
    sb_blk_install(b, buf);
}
