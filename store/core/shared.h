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
 * (publishing) and comes back when the tier extends the index with it
 * (sb_ns_fetch_shared: the tier fetches into fresh pages and adds them
 * through host.h, as the disk tier adopts the records it recovers).
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

/* A block's b->shared: what the shared tier made of it. */
enum {
    SB_SHARED_NONE = 0,    /* never offered (or removed since) */
    SB_SHARED_OFFERED = 1, /* offered, or fetched from the pool: not again */
    SB_SHARED_WAITING = 2  /* offered, but the publish queue was full: it
                              waits, held by nothing of the tier, to be
                              offered again (by a commit through it, or by
                              the tier once its queue has room) */
};

typedef struct sb_shared_ops {
    /* [mu] full page b of ns (committed, indexed, resident) is to be
     * published; tokens are its page_tokens IDs (copied). The tier takes a
     * reference on b (sb_blk_ref) that it drops later, unlocked, once the
     * page is written or dropped. Never waits. */
    void (*offer)(sb_store *st, struct sb_ns *ns, sb_blk *b, const uint32_t *tokens);
    /* Unlocked: hand what offer collected to the publisher. */
    void (*kick)(sb_store *st);
    /* Unlocked: extend the index of ns with the pages of tokens[0, n) the
     * pool holds past the run of whole pages the index holds from the
     * first (n a multiple of page_tokens, at least one page; the public
     * call's arguments checked: sb_ns_fetch_shared). The tier reaches the
     * index through host.h (hold the prefix, fresh pages, add the fetched
     * run) and never holds st->mu while it waits on the network. *n_added
     * (not NULL, 0 on entry): the tokens added. opts (may be NULL) bound
     * the fetch; *info (not NULL, zeroed) says what ended it short.
     * Returns as sb_ns_fetch_shared. */
    int (*extend)(struct sb_ns *ns, const uint32_t *tokens, size_t n,
                  const sb_fetch_shared_opts *opts, sb_fetch_shared_info *info,
                  size_t *n_added);
    /* Unlocked: wait until every page offered before the call is
     * published or dropped (the cluster did not take it). */
    void (*flush)(sb_store *st);
    /* Unlocked: sb_ns_remove took pages of ns with the content keys
     * keys[0, n) (full pages) out of the index: delete them from the pool
     * (best effort, waiting at most about twice the shared timeout) and
     * drop their publications still queued. lost: keys of removed pages
     * the caller could not collect (no memory), counted as failed. */
    void (*forget)(struct sb_ns *ns, const sb_key *keys, size_t n, size_t lost);
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

/* sb_shared_offer -- [mu] offer full page b of ns (resident, committed)
 * for publishing, unless it was offered before and not denied (b->shared
 * SB_SHARED_OFFERED); b->shared becomes SB_SHARED_OFFERED, and the tier
 * makes it SB_SHARED_WAITING again if its queue has no room, so a page is
 * published at most once per time it is indexed. Without a shared tier:
 * nothing. */
static inline void sb_shared_offer(sb_store *st, struct sb_ns *ns, sb_blk *b,
                                   const uint32_t *tokens)
{
    if (!st->shared.ops || b->shared == SB_SHARED_OFFERED || !b->data)
        return;
    b->shared = SB_SHARED_OFFERED;
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

/* sb_shared_forget -- unlocked: delete the keys of removed full pages of
 * ns from the pool (see the table). Without a shared tier: nothing. */
static inline void sb_shared_forget(sb_store *st, struct sb_ns *ns, const sb_key *keys,
                                    size_t n, size_t lost)
{
    if (st->shared.ops && (n || lost))
        st->shared.ops->forget(ns, keys, n, lost);
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

/* sb_fetch_check -- the argument checks of sb_ns_fetch_shared (and of
 * its asynchronous start): SB_OK or the code the call returns. */
int sb_fetch_check(const struct sb_ns *ns, const uint32_t *tokens, size_t n_tokens);

#endif /* SB_SHARED_H */
