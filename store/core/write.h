/* write.h -- what the writes share: the copy-mode puts (put.c) and the
 * zero-copy commit (index.c): the regions of a sequence, the arguments
 * every write checks first, and the report of one call's durability (its
 * sb_write_outcome and ticket). Both index with sb_commit_locked
 * (internal.h).
 *
 * A report's life: sb_report_init before anything changes (it allocates
 * what the ticket needs), sb_report_reserve under the lock before the
 * first commit (so nothing fails once something is committed),
 * sb_report_state once the state is indexed, sb_report_done always.
 *
 * Thread safety: functions marked [mu] expect st->mu held; the others
 * take nothing.
 */
#ifndef SB_WRITE_H
#define SB_WRITE_H

#include <stdbool.h>

#include "internal.h"

/* Regions (pages) of a sequence of n tokens. */
static inline size_t regions(const sb_ns *ns, size_t n)
{
    return (n + ns->page_tokens - 1) / ns->page_tokens;
}

/* Tokens of region r of a sequence of n tokens. */
static inline uint32_t region_tokens(const sb_ns *ns, size_t n, size_t r)
{
    size_t rest = n - r * ns->page_tokens;
    return rest < ns->page_tokens ? (uint32_t)rest : ns->page_tokens;
}

/* sb_write_args -- what the puts and the commit check first, their outputs
 * zeroed (n_stored, out: may be NULL): ns, the tokens, the point against
 * the layout, and that a source was given (sb_ns_put_begin: where the
 * handle goes; sb_put_finish: the put).
 * Returns: SB_OK; SB_ERR_INVAL; SB_ERR_NO_TOKENS; SB_ERR_TOO_MANY_TOKENS. */
int sb_write_args(sb_ns *ns, const uint32_t *tokens, size_t n_tokens, const void *source,
                  const void *point, size_t *n_stored, sb_write_outcome *out);

/* What a put or commit needs to report its durability: its outcome (the
 * caller's or a scratch one), and, when it takes a ticket (a disk tier,
 * and an outcome asked for or COMMIT durability), an array for its
 * state's blocks and a write set, allocated before anything changes. */
typedef struct sb_report {
    sb_write_outcome *oc;      /* out, or &scratch */
    sb_write_outcome scratch;
    sb_blk **state;            /* (n_reg + 1), or NULL: no ticket */
    sb_wset *ws;
    bool reserved;             /* ws has its place in the pending table */
} sb_report;

/* sb_report_init -- set up rp for a state of up to n_reg pages (and a
 * point), out the caller's outcome or NULL; zeroes the outcome.
 * Returns: SB_OK; SB_ERR_NOMEM (rp holds nothing). */
int sb_report_init(sb_report *rp, sb_store *st, size_t n_reg, sb_write_outcome *out);

/* sb_report_reserve -- [mu] take the write set's place in the pending
 * table. Returns: SB_OK; SB_ERR_NOMEM. */
int sb_report_reserve(sb_report *rp, sb_store *st);

/* sb_report_state -- [mu] the call indexed the state of tokens[0, n) (and
 * its point state, when point): its ticket, waiting under COMMIT
 * durability (t0: the call's first block ticket). */
void sb_report_state(sb_report *rp, sb_ns *ns, const uint32_t *tokens, size_t n, bool point,
                     uint64_t t0);

/* sb_report_done -- [mu] free what the report holds; when failed the
 * outcome is zeroed. */
void sb_report_done(sb_report *rp, sb_store *st, bool failed);

#endif /* SB_WRITE_H */
