/* match.h -- a match's handle (index.c makes it) and the two things the
 * asynchronous loads (aload.c) need of it: reading a run of its pages in,
 * and the marks that say a load runs and how far it has come. */
#ifndef SB_MATCH_H
#define SB_MATCH_H

#include <stdbool.h>
#include <stddef.h>

#include "internal.h"
#include "tier_ops.h"

struct sb_match {
    sb_ns *ns;                 /* holds ns (ns->holds) */
    sb_store *st;              /* [const] */
    size_t n_req;              /* tokens asked for */
    size_t n_tokens;           /* [mu while loading] L */
    size_t n_matched;          /* before the point-state rule */
    size_t n_pages;            /* [mu while loading] ceil(L / pt):
                                  pages[0, n_pages) are referenced */
    sb_blk *point;             /* [mu while loading] referenced, or NULL */
    sb_miss miss;              /* [mu while loading] */
    sb_blk **pages;            /* (ceil(n_req / pt) + 1): the last entry is
                                  sb_match_fill's, for the point state */
    struct sb_load *loading;   /* [mu] the load running on the match, or
                                  NULL */
    size_t ready;              /* [mu] while loading: pages [0, ready) are
                                  resident */
};

/* sb_match_fill -- make pages [first, n) of m resident (and its point
 * state, when point), reading them through the tier, all in flight
 * together. A page that cannot be read is gone from the index with what
 * depends on it; the match then ends before it (m->n_tokens shrinks, its
 * point goes, m->miss says why), under st->mu. ready(ctx, i, data) numbers
 * the blocks from page first (the point, when asked, after the last page).
 * Unlocked; one caller at a time per match (a load, or the match's owner).
 * Returns: SB_OK; SB_ERR_CORRUPT, SB_ERR_IO (the match shrank: the pages
 * it still holds are resident); SB_ERR_BUDGET, SB_ERR_NOMEM (nothing read
 * that failed; the match unchanged). */
int sb_match_fill(sb_match *m, size_t first, size_t n, bool point, sb_tier_ready_fn ready,
                  void *ctx);

/* sb_match_detach -- end the load running on m, if any: cancel it and
 * wait until its reads are done; the load keeps only its outcome. Called
 * by sb_match_release before it lets go of the pages. Unlocked. */
void sb_match_detach(sb_match *m);

/* sb_loader_stop -- join the store's loader threads and free the loader
 * (store close; no load may be running). Unlocked. */
void sb_loader_stop(sb_store *st);

/* sb_load_hook -- fn(ctx, ready) is called by the loader thread running
 * a load of st before each run of reads, with no lock held: a test holds
 * the load there, pages [0, ready) resident, to use the match beside it.
 * fn NULL removes it. Locks st->mu. */
void sb_load_hook(sb_store *st, void (*fn)(void *ctx, size_t ready), void *ctx);

#endif /* SB_MATCH_H */
