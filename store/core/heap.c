/* heap.c -- the eviction heaps: binary min-heaps of indexed blocks ordered
 * by last-use stamp, with each block's position kept in the block so it can
 * leave the heap from anywhere in O(log n). */
#include "internal.h"

static bool less(const sb_blk *a, const sb_blk *b, int which)
{
    return a->heap_key[which] < b->heap_key[which];
}

static void put(sb_heap *h, size_t i, sb_blk *b, int which)
{
    h->a[i] = b;
    b->heap_pos[which] = i;
}

static void sift_up(sb_heap *h, size_t i, int which)
{
    sb_blk *b = h->a[i];
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!less(b, h->a[p], which))
            break;
        put(h, i, h->a[p], which);
        i = p;
    }
    put(h, i, b, which);
}

static void sift_down(sb_heap *h, size_t i, int which)
{
    sb_blk *b = h->a[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && less(h->a[c + 1], h->a[c], which))
            c++;
        if (!less(h->a[c], b, which))
            break;
        put(h, i, h->a[c], which);
        i = c;
    }
    put(h, i, b, which);
}

static bool heap_grow(sb_mem *mem, sb_heap *h, uint64_t want)
{
    if (want <= h->cap)
        return true;
    uint64_t c = h->cap + h->cap / 2;
    if (c < want)
        c = want;
    if (c < 16)
        c = 16;
    sb_blk **a = sb_realloc(mem, h->a, (size_t)c * sizeof *a);
    if (!a)
        return false;
    h->a = a;
    h->cap = (size_t)c;
    return true;
}

int sb_heap_reserve(sb_ns *ns, uint64_t extra)
{
    sb_store *st = ns->st;
    if (!heap_grow(&st->mem, &st->heap, st->n_blocks + extra) ||
        !heap_grow(&st->mem, &ns->heap, ns->n_blocks + extra))
        return SB_ERR_NOMEM;
    return SB_OK;
}

void sb_heap_push(sb_heap *h, sb_blk *b, int which)
{
    b->heap_key[which] = b->stamp;
    h->a[h->n] = b;
    sift_up(h, h->n++, which);
}

void sb_heap_remove(sb_heap *h, sb_blk *b, int which)
{
    size_t i = b->heap_pos[which];
    b->heap_pos[which] = SB_HEAP_OUT;
    if (i == --h->n)
        return;
    /* Move the last element into the hole, then restore order either way. */
    sb_blk *x = h->a[h->n];
    put(h, i, x, which);
    sift_up(h, i, which);
    if (x->heap_pos[which] == i)
        sift_down(h, i, which);
}

void sb_heap_fix(sb_heap *h, sb_blk *b, int which)
{
    size_t i = b->heap_pos[which];
    sift_up(h, i, which);
    sift_down(h, b->heap_pos[which], which);
}

void sb_heap_free(sb_heap *h)
{
    sb_free(h->a);
    h->a = NULL;
    h->n = h->cap = 0;
}
