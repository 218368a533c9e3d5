/* shared.h -- the hooks through which the RAM index reaches the shared
 * tier (a pool of pages many stores share; store/remote implements it).
 *
 * Like tier.h, a table of operations and the tier's own state hang off the
 * store (st->shared), and core calls the inline wrappers below, each of
 * which gives the answer of a store without a shared tier when
 * st->shared.ops is NULL. Core includes nothing of store/remote:
 *
 *     sb_store
 *       shared.ops ----> sb_shared_ops (const, store/remote/rtier.c)
 *       shared.state --> the remote tier's state, opaque to core
 *
 * The shared tier is not below the disk tier in the index's sense: it
 * keeps no record the index names. A page reaches it by being offered
 * (publishing) and comes back by being fetched into a fresh page that the
 * index then commits like any other (sb_ns_fetch_shared, core/shared.c).
 *
 * Thread safety: operations marked [mu] expect st->mu held and never wait
 * on the network; the others are called unlocked. st->shared is [const]:
 * set by the tier's constructor (store/remote/rtier.h, called by
 * store/open) before the store is published, cleared by close.
 */
#ifndef SB_SHARED_H
#define SB_SHARED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

typedef struct sb_shared_ops {
    /* [mu] full page b of ns (committed, indexed, resident) is to be
     * published; tokens are its page_tokens IDs (copied). The tier takes a
     * reference on b (sb_blk_ref) that it drops later, unlocked, once the
     * page is written or dropped. Never waits. */
    void (*offer)(sb_store *st, struct sb_ns *ns, sb_blk *b, const uint32_t *tokens);
    /* Unlocked: hand what offer collected to the publisher. */
    void (*kick)(sb_store *st);
    /* Unlocked: how many of the n pages named by keys (parent of the first:
     * parent; each the chain of the one before) the pool holds as a run from
     * the first. SB_OK or SB_ERR_IO (*n_present: the run before the first
     * page no node answered for); SB_ERR_NOMEM. */
    int (*probe)(struct sb_ns *ns, const sb_key *keys, size_t n, size_t *n_present);
    /* Unlocked: fetch pages [0, n) (keys as above; their tokens are
     * tokens[i * page_tokens ...], their first position first_pos + i *
     * page_tokens) into dst[i] (page_bytes each), every value checked.
     * *n_ok: the run of good pages. Returns as sb_remote_fetch. */
    int (*fetch)(struct sb_ns *ns, const sb_key *parent, const sb_key *keys,
                 const uint32_t *tokens, uint32_t first_pos, size_t n, uint8_t **dst,
                 size_t *n_ok);
    /* Unlocked: wait until every page offered before the call is
     * published or dropped (the cluster did not take it). */
    void (*flush)(sb_store *st);
    /* [mu] fill the shared_* fields of *out. */
    void (*stats)(const sb_store *st, sb_stats *out);
    /* Unlocked: stop publishing (what is queued is dropped, its references
     * dropped), disconnect, free the state; st->shared is cleared. */
    void (*close)(sb_store *st);
} sb_shared_ops;

/* sb_shared_on -- whether the store has a shared tier. */
static inline bool sb_shared_on(const sb_store *st)
{
    return st->shared.ops != NULL;
}

/* sb_shared_offer -- [mu] offer full page b of ns (resident, committed,
 * not offered before: b->shared 0) for publishing; b->shared becomes 1
 * whatever the tier makes of it, so a page is offered once. Without a
 * shared tier: nothing. */
static inline void sb_shared_offer(sb_store *st, struct sb_ns *ns, sb_blk *b,
                                   const uint32_t *tokens)
{
    if (!st->shared.ops || b->shared || !b->data)
        return;
    b->shared = 1;
    st->shared.ops->offer(st, ns, b, tokens);
}

/* sb_shared_kick -- unlocked: publish what the calls before offered.
 * Without a shared tier: nothing. */
static inline void sb_shared_kick(sb_store *st)
{
    if (st->shared.ops)
        st->shared.ops->kick(st);
}

/* sb_shared_flush -- unlocked: wait until what was offered is published
 * or dropped. Without a shared tier: nothing. */
static inline void sb_shared_flush(sb_store *st)
{
    if (st->shared.ops)
        st->shared.ops->flush(st);
}

/* sb_shared_stats -- [mu] the shared_* fields of *out (zero without). */
static inline void sb_shared_stats(const sb_store *st, sb_stats *out)
{
    if (st->shared.ops)
        st->shared.ops->stats(st, out);
}

/* sb_shared_close -- unlocked: close the tier (see the table). */
static inline void sb_shared_close(sb_store *st)
{
    if (st->shared.ops)
        st->shared.ops->close(st);
}

#endif /* SB_SHARED_H */
