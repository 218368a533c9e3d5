/* shared.c -- pages fetched from the shared tier into the index
 * (sb_ns_fetch_shared; the tier's hooks are in shared.h).
 *
 * A fetch, step by step:
 *   1. Walk the index for the request's full pages and take a reference on
 *      each page it holds (r < r0), so the prefix the new pages hang from
 *      stays while the network is asked; the parent key of page r0 is the
 *      last of them (or the namespace's root key).
 *   2. Compute the content keys of the request's full pages r0 .. from its
 *      tokens alone (the chain), and probe the pool for them: one
 *      pipelined EXISTS, the run it holds from r0.
 *   3. Allocate a fresh page for each page of that run (the budgets may
 *      allow fewer: the run is cut there).
 *   4. Fetch the run into the pages, every value checked by the tier
 *      (remote.h): the good run from r0.
 *   5. Commit the request's first (r0 + good) * pt tokens in copy mode,
 *      the held pages for r < r0 and the fetched ones after: the index
 *      takes its own reference on each, offers them to the disk tier like
 *      any commit, and marks nothing for the pool (fetched pages carry
 *      b->shared, so they are not published back).
 *   6. Drop this call's references.
 */
#include <string.h>

#include "internal.h"
#include "radix.h"
#include "shared.h"
#include "tier.h"

int sb_store_has_shared(const sb_store *st)
{
    return st && sb_shared_on(st);
}

int sb_ns_fetch_shared(sb_ns *ns, const uint32_t *tokens, size_t n_tokens, size_t *n_added)
{
    if (n_added)
        *n_added = 0;
    if (!ns)
        return SB_ERR_INVAL;
    if (n_tokens == 0)
        return SB_ERR_NO_TOKENS;
    if (!tokens)
        return SB_ERR_INVAL;
    sb_store *st = ns->st;
    if (n_tokens > st->cfg.max_seq_tokens)
        return SB_ERR_TOO_MANY_TOKENS;
    if (!sb_shared_on(st) || (ns->flags & SB_LAYOUT_POINT_REQUIRED))
        return SB_ERR_UNSUPPORTED;
    uint32_t pt = ns->page_tokens;
    size_t n_full = n_tokens / pt;
    if (!n_full)
        return SB_OK;
    sb_blk **pages = sb_calloc(&st->mem, n_full, sizeof *pages);
    sb_key *keys = sb_malloc(&st->mem, n_full * sizeof *keys);
    uint8_t **dst = sb_malloc(&st->mem, n_full * sizeof *dst);
    if (!pages || !keys || !dst) {
        sb_free(pages);
        sb_free(keys);
        sb_free(dst);
        return SB_ERR_NOMEM;
    }

    /* 1 */
    pthread_mutex_lock(&st->mu);
    st->tick++;
    sb_walk w;
    sb_radix_walk(ns, tokens, n_full * pt, &w, pages);
    size_t r0 = w.m / pt;
    for (size_t r = 0; r < r0; r++)
        sb_blk_ref(pages[r]);
    sb_key parent = r0 ? pages[r0 - 1]->key : ns->root_key;
    pthread_mutex_unlock(&st->mu);

    /* 2 */
    size_t want = n_full - r0, present = 0, got = 0, good = 0;
    int rc = SB_OK;
    sb_key k = parent;
    for (size_t i = 0; i < want; i++) {
        k = sb_key_chain(&k, tokens + (r0 + i) * pt, pt);
        keys[i] = k;
    }
    if (want)
        rc = st->shared.ops->probe(ns, keys, want, &present);

    /* 3 */
    int arc = SB_OK;
    for (; got < present; got++) {
        arc = sb_blk_alloc(ns, SB_BLK_PAGE, &pages[r0 + got]);
        if (arc != SB_OK)
            break;
        dst[got] = pages[r0 + got]->data;
    }

    /* 4 */
    if (got) {
        int frc = st->shared.ops->fetch(ns, &parent, keys, tokens + r0 * pt,
                                        (uint32_t)(r0 * pt), got, dst, &good);
        if (frc != SB_OK && frc != SB_ERR_NOT_FOUND)
            rc = frc;
    }
    if (rc == SB_OK && arc != SB_OK)
        rc = arc;

    /* 5 */
    pthread_mutex_lock(&st->mu);
    if (good) {
        for (size_t i = 0; i < good; i++)
            pages[r0 + i]->shared = 1;
        st->tick++;
        int crc = sb_commit_locked(ns, tokens, (r0 + good) * pt, pages, NULL, false, NULL);
        if (crc == SB_OK) {
            st->stats.shared_fetched_pages += good;
            st->stats.shared_fetched_bytes += good * ns->page_bytes;
            if (n_added)
                *n_added = good * pt;
        } else if (crc == SB_ERR_NOMEM) {
            rc = SB_ERR_NOMEM;
        } /* else the prefix left the index meanwhile: nothing added */
    }
    /* 6 */
    for (size_t r = 0; r < r0 + got; r++)
        sb_blk_unref(pages[r]);
    pthread_mutex_unlock(&st->mu);
    sb_shared_kick(st);
    sb_free(pages);
    sb_free(keys);
    sb_free(dst);
    return rc;
}
