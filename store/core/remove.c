/* remove.c -- sb_ns_remove: a prefix's subtree out of every tier
 * (snapbank.h says what goes and what holders keep).
 *
 * Step by step:
 *
 *   1. Unlocked: the arguments, and the content key of the prefix's last
 *      full page (page n / pt - 1), chained from the tokens alone: the
 *      tier's record names the cut by it whether or not the index holds
 *      the prefix (records may be on disk that the index does not hold).
 *   2. Under st->mu, one hold: the tier records the removal (the disk
 *      tier queues a tombstone, ahead of any block queued later: the only
 *      step that may fail, NOMEM, and then nothing changed); the subtree
 *      leaves the index (radix.c sb_radix_remove: each block is marked
 *      removed, counted, and a full page's key kept for the shared tier;
 *      unindexing takes it out of the tier's queue and pool); pins let go
 *      of what left. Holding st->mu across both, nothing the writer takes
 *      after the removal can be a removed block, and any block committed
 *      after it is queued after the tombstone.
 *   3. Unlocked: the shared tier deletes the removed full pages' keys
 *      (best effort, bounded by its timeout).
 *   4. Unlocked: wait until the tier says the removal is durable (the
 *      tombstone synced) or cannot be.
 */
#include <string.h>

#include "internal.h"
#include "radix.h"
#include "shared.h"
#include "tier.h"

/* What the removal took out of the index (step 2). */
typedef struct gone_ctx {
    size_t pages, points;
    sb_key *keys;              /* full pages' keys, for the shared tier */
    size_t n_keys, cap_keys;
    size_t lost;               /* keys not kept: no memory */
    bool want_keys;
    sb_store *st;
} gone_ctx;

static void gone(void *ctx, sb_blk *b)
{
    gone_ctx *g = ctx;
    b->removed = 1;
    b->shared = SB_SHARED_NONE; /* its key leaves the pool: offered again if committed again */
    if (b->kind == SB_BLK_POINT) {
        g->points++;
        return;
    }
    g->pages++;
    if (!g->want_keys || b->n_tokens != b->ns->page_tokens)
        return;
    if (g->n_keys == g->cap_keys) {
        size_t cap = g->cap_keys ? 2 * g->cap_keys : 64;
        sb_key *k = sb_realloc(&g->st->mem, g->keys, cap * sizeof *k);
        if (!k) {
            g->lost++;
            return;
        }
        g->keys = k;
        g->cap_keys = cap;
    }
    g->keys[g->n_keys++] = b->key;
}

int sb_ns_remove(sb_ns *ns, const uint32_t *tokens, size_t n_tokens, size_t *n_removed)
{
    if (n_removed)
        *n_removed = 0;
    if (!ns)
        return SB_ERR_INVAL;
    int rc = sb_tokens_check(ns, tokens, n_tokens);
    if (rc != SB_OK)
        return rc;
    sb_store *st = ns->st;

    /* 1 */
    uint32_t pt = ns->page_tokens;
    size_t r = n_tokens / pt;
    sb_key parent = ns->root_key;
    for (size_t i = 0; i < r; i++)
        parent = sb_key_chain(&parent, tokens + i * pt, pt);

    /* 2 */
    gone_ctx g = { .st = st,
                   .want_keys = sb_shared_on(st) && !(ns->flags & SB_LAYOUT_POINT_REQUIRED) };
    void *req = NULL;
    pthread_mutex_lock(&st->mu);
    rc = sb_tier_remove(ns, &parent, (uint32_t)n_tokens, tokens + r * pt,
                            (uint32_t)(n_tokens - r * pt), &req);
    if (rc != SB_OK) {
        pthread_mutex_unlock(&st->mu);
        return rc; /* NOMEM: nothing changed */
    }
    st->tick++;
    sb_walk w;
    sb_radix_walk(ns, tokens, n_tokens, &w, NULL);
    if (w.m == n_tokens)
        sb_radix_remove(ns, &w, n_tokens, gone, &g);
    if (g.pages + g.points)
        sb_pins_let_go(st, ns);
    st->stats.removes++;
    st->stats.removed_pages += g.pages;
    st->stats.removed_points += g.points;
    pthread_mutex_unlock(&st->mu);

    /* 3 */
    sb_shared_forget(st, ns, g.keys, g.n_keys, g.lost);
    sb_free(g.keys);

    /* 4 */
    rc = sb_tier_remove_wait(st, req);
    if (n_removed)
        *n_removed = g.pages + g.points;
    return rc;
}
