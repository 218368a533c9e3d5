/* put.c -- the copy-mode puts: sb_ns_put, sb_ns_put_ex and sb_ns_put_blocks
 * in one call, and the layered put (sb_ns_put_begin, sb_put_tensors,
 * sb_put_finish, sb_put_abort) over several; one set of steps serves both.
 * They copy into fresh pages outside the lock and index them with
 * sb_commit_locked (index.c).
 *
 * Thread safety: as snapbank.h says; the functions marked [mu] expect
 * st->mu held.
 */
#include <string.h>

#include "tier.h"
#include "xfer.h"
#include "internal.h"
#include "radix.h"
#include "shared.h"
#include "write.h"

/* Where a put's state comes from: the caller's contiguous buffers
 * (sb_ns_put_ex: positions [0, n)), or block tables (sb_ns_put_blocks:
 * positions [x.from, n), the bank's page `held` for the positions of x.from's
 * region before x.from). A layered put (sb_ns_put_begin) has no tables yet
 * (x.tab NULL): they come a few tensors at a time (sb_put_tensors). */
typedef struct put_src {
    const void *const *tensors;   /* contiguous, or NULL: block tables */
    sb_xfer x;                    /* the tables (all tensors), or tab NULL */
    sb_blk *held;                 /* [x.from rounded down to a page, x.from) */
} put_src;

/* Fill page b of region r (k tokens) from src (from tables: the positions
 * before x.from from the held page, the rest from the tables if given). */
static void fill_page(const sb_ns *ns, sb_blk *b, const put_src *src, size_t r, uint32_t k)
{
    size_t first = r * ns->page_tokens;
    if (src->tensors) {
        for (uint32_t t = 0; t < ns->n_tensors; t++) {
            const uint8_t *in = (const uint8_t *)src->tensors[t] + first * ns->bpt[t];
            memcpy(b->data + ns->tensor_off[t], in, (size_t)k * ns->bpt[t]);
        }
        return;
    }
    if (first < src->x.from) /* (only the region x.from falls in) */
        for (uint32_t t = 0; t < ns->n_tensors; t++)
            memcpy(b->data + ns->tensor_off[t], src->held->data + ns->tensor_off[t],
                   (src->x.from - first) * ns->bpt[t]);
    if (src->x.tab)
        sb_xfer_in(&src->x, r, b->data);
}

int sb_ns_put(sb_ns *ns, const uint32_t *tokens, size_t n_tokens,
              const void *const *tensors, const void *point, size_t *n_stored)
{
    return sb_ns_put_ex(ns, tokens, n_tokens, tensors, point, n_stored, NULL);
}

/* A put in progress. sb_ns_put_ex and sb_ns_put_blocks run one from start
 * to end inside the call (put() below); a layered put (sb_ns_put_begin)
 * keeps one between calls while the engine gives its tensors. Its steps:
 *
 *   1. put_open: pin the full pages the index holds for a prefix of the
 *      tokens (regions [0, r0)) and the page holding the positions before
 *      x.from, read from disk if it is there only;
 *   2. put_pages: take a page for each region from r0 on while the
 *      budgets allow (pages[r0, got)) and fill it from the source (a
 *      layered put: only the positions before x.from; sb_put_tensors
 *      gathers the rest);
 *   3. the point state: put() takes it before step 2, so that when it
 *      cannot be had no page is copied; a layered put at sb_put_finish;
 *   4. put_commit: index the sequence, or the prefix whose pages were had
 *      (put() may commit a chunk at a time before, see there);
 *   5. put_end: what is restorable, the ticket, and put_release lets go
 *      of every block the put holds.
 */
struct sb_put {
    sb_ns *ns;                 /* [const] held (ns->holds) when layered */
    const uint32_t *tokens;    /* (n_tokens) the caller's, or own_tokens */
    uint32_t *own_tokens;      /* layered: the put's copy, else NULL */
    size_t n_tokens;
    size_t n_reg;              /* regions(n_tokens) */
    put_src src;
    sb_report rp;              /* put(): from the start; layered: set up
                                  by sb_put_finish (oc the scratch before) */
    sb_blk **pages;            /* (n_reg) [0, r0) the index's, pinned;
                                  [r0, got) the put's new pages; the rest
                                  NULL */
    size_t r0;                 /* full regions the index held at step 1 */
    size_t got;                /* pages[0, got) are referenced (or NULL:
                                  a chunk put() committed) */
    bool layered;              /* sb_ns_put_begin's: holds ns, owns tokens */
    int pages_rc;              /* layered: SB_OK, or SB_ERR_BUDGET when the
                                  budgets ran out before the last region */
    uint8_t *given;            /* layered: (n_tensors) 1 once tensor t came */
    uint64_t t0;               /* the first block ticket of its commits */
};

/* Step 5's release: let go of the pages, the held page and (layered) the
 * namespace. [mu] */
static void put_release(sb_put *P)
{
    for (size_t r = P->got; r-- > 0;)
        if (P->pages[r])
            sb_blk_unref(P->pages[r]);
    if (P->src.held)
        sb_blk_unref(P->src.held);
    P->got = 0;
    P->src.held = NULL;
    if (P->layered) {
        P->ns->holds--;
        sb_ns_maybe_free(P->ns);
    }
}

/* 1. Pin the full pages the index already holds for a prefix of the tokens,
 *    so the copies need no lock. A partial page covering the tail is not
 *    pinned: a longer commit may supersede it meanwhile. Its region is
 *    copied like a new one; the commit drops the copy if the index still
 *    covers it. (And the ticket's place, taken now so nothing fails once
 *    something is committed: a report set up with a write set.)
 * Returns: SB_OK; SB_ERR_NOMEM (no place for the ticket); SB_ERR_RANGE
 * (block tables, and the index holds fewer than x.from tokens: *n_held
 * receives how many); SB_ERR_CORRUPT, SB_ERR_IO, SB_ERR_BUDGET,
 * SB_ERR_NOMEM (the page before x.from could not be read). On failure the
 * put holds nothing and its report is done (zeroed). */
static int put_open(sb_put *P, size_t *n_held)
{
    sb_ns *ns = P->ns;
    sb_store *st = ns->st;
    uint32_t pt = ns->page_tokens;
    pthread_mutex_lock(&st->mu);
    if (sb_report_reserve(&P->rp, st) != SB_OK) {
        sb_report_done(&P->rp, st, true);
        pthread_mutex_unlock(&st->mu);
        return SB_ERR_NOMEM;
    }
    st->tick++;
    sb_walk w;
    sb_radix_walk(ns, P->tokens, P->n_tokens, &w, P->pages);
    if (!P->src.tensors && w.m < P->src.x.from) {
        /* block tables name only positions from x.from: the index must
         * hold the rest */
        sb_report_done(&P->rp, st, true);
        pthread_mutex_unlock(&st->mu);
        *n_held = w.m;
        return SB_ERR_RANGE;
    }
    P->r0 = P->got = w.m / pt;
    for (size_t r = 0; r < P->r0; r++)
        sb_blk_ref(P->pages[r]);
    if (!P->src.tensors && P->src.x.from > P->r0 * pt) {
        /* x.from falls inside region r0, which the index holds in part:
         * that page gives the positions before x.from */
        P->src.held = sb_radix_cover(ns, &w, (uint32_t)P->r0);
        sb_blk_ref(P->src.held);
    }
    if (P->layered)
        ns->holds++;
    bool cold = P->src.held && !P->src.held->data;
    if (cold) /* its record stays readable while it is read (as a match's) */
        sb_tier_match(st, P->src.held, 1);
    pthread_mutex_unlock(&st->mu);
    if (cold) { /* on disk only: read it */
        size_t ok = 0;
        int rc = sb_tier_load(ns, &P->src.held, 1, &ok, NULL, NULL);
        pthread_mutex_lock(&st->mu);
        sb_tier_match(st, P->src.held, -1);
        pthread_mutex_unlock(&st->mu);
        if (rc != SB_OK) {
            pthread_mutex_lock(&st->mu);
            sb_report_done(&P->rp, st, true);
            put_release(P);
            pthread_mutex_unlock(&st->mu);
            return rc;
        }
    }
    return SB_OK;
}

/* 2. Take and fill the pages of regions [from, to), stopping at the first
 *    the budgets refuse.
 * Returns: SB_OK; SB_ERR_BUDGET, SB_ERR_NOMEM (pages[from, got) were had). */
static int put_pages(sb_put *P, size_t from, size_t to)
{
    for (size_t r = from; r < to; r++) {
        int rc = sb_blk_alloc(P->ns, SB_BLK_PAGE, &P->pages[r]);
        if (rc != SB_OK)
            return rc;
        fill_page(P->ns, P->pages[r], &P->src, r, region_tokens(P->ns, P->n_tokens, r));
        P->got++;
    }
    return SB_OK;
}

/* 4. Index the whole sequence with the point state pb (may be NULL); when
 *    a region without a page is needed (the budgets ran out), the prefix
 *    before it. *whole: the whole sequence was committed. [mu]
 * Returns: SB_OK (the whole or a prefix, or nothing new: put_end says
 * which); SB_ERR_NOMEM (nothing stored). */
static int put_commit(sb_put *P, sb_blk *pb, bool *whole)
{
    sb_ns *ns = P->ns;
    int rc = sb_commit_locked(ns, P->tokens, P->n_tokens, P->pages, pb, false, P->rp.oc);
    *whole = rc == SB_OK;
    if (rc == SB_ERR_RANGE && P->got)
        rc = sb_commit_locked(ns, P->tokens, P->got * ns->page_tokens, P->pages, NULL, false,
                              P->rp.oc);
    return rc == SB_ERR_RANGE ? SB_OK : rc;
}

/* 5. The put's result from rc (what the steps before returned), whole
 *    (put_commit's) and whether a point was given (pb: the point state
 *    had, or NULL): what is restorable (*n_stored when not NULL), its
 *    ticket, and everything let go. Called with mu held; returns without.
 * Returns: SB_OK; SB_ERR_BUDGET; rc when it is another error. */
static int put_end(sb_put *P, int rc, bool whole, bool point, sb_blk *pb, size_t *n_stored)
{
    sb_ns *ns = P->ns;
    sb_store *st = ns->st;
    size_t done = 0;
    if (rc == SB_OK || rc == SB_ERR_BUDGET) {
        /* What is restorable now: all of it after a whole commit, else a
         * walk says (the index may hold more than the prefix committed). */
        if (whole) {
            done = P->n_tokens;
        } else {
            sb_walk after;
            sb_radix_walk(ns, P->tokens, P->n_tokens, &after, NULL);
            done = after.m;
        }
        /* Everything restorable, and the point stored if one was given. */
        rc = done == P->n_tokens && !(point && !pb) ? SB_OK : SB_ERR_BUDGET;
        if (done)
            st->stats.puts++;
        /* Its durability: the ticket of what it left restorable (COMMIT:
         * written and synced first). A write the tier did not make is an
         * outcome, not an error: the state is in RAM either way. */
        sb_report_state(&P->rp, ns, P->tokens, done, point && rc == SB_OK, P->t0);
    }
    sb_report_done(&P->rp, st, rc != SB_OK && rc != SB_ERR_BUDGET);
    if (pb)
        sb_blk_unref(pb);
    put_release(P);
    pthread_mutex_unlock(&st->mu);
    sb_shared_kick(st);
    if (n_stored)
        *n_stored = done;
    return rc;
}

/* A put from src (arguments checked): sb_ns_put_ex and sb_ns_put_blocks.
 * With block tables, the index must hold tokens[0, x.from) (else
 * SB_ERR_RANGE, nothing stored, *n_stored the tokens it holds). */
static int put(sb_ns *ns, const uint32_t *tokens, size_t n_tokens, const put_src *src,
               const void *point, size_t *n_stored, sb_write_outcome *out)
{
    sb_store *st = ns->st;
    uint32_t pt = ns->page_tokens;
    sb_put P = { .ns = ns, .tokens = tokens, .n_tokens = n_tokens,
                 .n_reg = regions(ns, n_tokens), .src = *src };
    P.pages = sb_calloc(&st->mem, P.n_reg, sizeof *P.pages);
    if (!P.pages || sb_report_init(&P.rp, st, P.n_reg, out) != SB_OK) {
        sb_free(P.pages);
        return SB_ERR_NOMEM;
    }

    /* 1 */
    size_t held = 0;
    int rc = put_open(&P, &held);
    if (rc != SB_OK) {
        sb_free(P.pages);
        if (rc == SB_ERR_RANGE && n_stored)
            *n_stored = held;
        return rc;
    }

    /* 3. The point first: when it cannot be had, nothing is stored. */
    sb_blk *pb = NULL;
    if (point) {
        rc = sb_blk_alloc(ns, SB_BLK_POINT, &pb);
        if (rc == SB_OK)
            memcpy(pb->data, point, ns->point_bytes);
    }
    /* 2. Copy the other regions while the budgets allow, and 4. commit
     *    them. A put larger than the tier's backlog streams out
     *    (sb_tier_stream_pages): a chunk at a time, each committed (so
     *    queued for the writer) before the next is copied, once the
     *    writer has drained the backlog to half; only the last chunk
     *    commits the whole sequence and the point. */
    size_t step = sb_tier_stream_pages(st, ns->page_bytes, P.n_reg - P.r0);
    size_t from = P.r0;
    bool whole = false;
    for (bool first = true;; first = false) {
        size_t to = step && P.n_reg - from > step ? from + step : P.n_reg;
        if (rc == SB_OK)
            rc = put_pages(&P, from, to);
        bool abandon = rc == SB_ERR_NOMEM || (point && !pb);
        bool last = to == P.n_reg || rc != SB_OK;
        pthread_mutex_lock(&st->mu);
        st->tick++;
        if (first)
            P.t0 = sb_tier_ticket(st);
        if (!abandon && last) {
            int crc = put_commit(&P, pb, &whole);
            if (crc != SB_OK)
                rc = crc; /* NOMEM: nothing stored */
        } else if (!abandon) {
            int crc = sb_commit_locked(ns, tokens, to * pt, P.pages, NULL, false, P.rp.oc);
            if (crc != SB_OK) { /* stop here; what is indexed stays */
                rc = crc == SB_ERR_RANGE ? SB_ERR_BUDGET : crc;
                last = true;
            }
        }
        if (last)
            break;
        /* The chunk is the index's (and the writer's) now. */
        for (size_t r = from; r < to; r++) {
            sb_blk_unref(P.pages[r]);
            P.pages[r] = NULL;
        }
        sb_tier_stream_wait(st);
        pthread_mutex_unlock(&st->mu);
        from = to;
    }
    /* 5 */
    rc = put_end(&P, rc, whole, point != NULL, pb, n_stored);
    sb_free(P.pages);
    return rc;
}

int sb_ns_put_ex(sb_ns *ns, const uint32_t *tokens, size_t n_tokens,
                 const void *const *tensors, const void *point, size_t *n_stored,
                 sb_write_outcome *out)
{
    int rc = sb_write_args(ns, tokens, n_tokens, tensors, point, n_stored, out);
    if (rc != SB_OK)
        return rc;
    for (uint32_t t = 0; t < ns->n_tensors; t++)
        if (!tensors[t])
            return SB_ERR_INVAL;
    put_src src = { .tensors = tensors };
    return put(ns, tokens, n_tokens, &src, point, n_stored, out);
}

int sb_ns_put_blocks(sb_ns *ns, const uint32_t *tokens, size_t n_tokens, size_t from,
                     const sb_block_table *src, const void *point, size_t *n_stored,
                     sb_write_outcome *out)
{
    int rc = sb_write_args(ns, tokens, n_tokens, src, point, n_stored, out);
    if (rc != SB_OK)
        return rc;
    if (from > n_tokens)
        return SB_ERR_RANGE;
    if ((rc = sb_xfer_check(ns, from, 0, ns->n_tensors, src)) != SB_OK)
        return rc;
    put_src ps = { .x = { ns, from, n_tokens, 0, ns->n_tensors, src } };
    return put(ns, tokens, n_tokens, &ps, point, n_stored, out);
}

/* ---- layered put ---------------------------------------------------------------- */
/*
 * A layered put is put()'s steps spread over calls: sb_ns_put_begin runs
 * steps 1 and 2 (the pages taken, only the positions before from copied),
 * sb_put_tensors gathers tensors into the pages (no lock: they are the
 * put's alone until the commit), sb_put_finish runs steps 3 to 5 in one
 * hold of the lock. It cannot stream out a chunk at a time as put() does
 * for a put larger than the disk tier's backlog: no page is whole before
 * the last tensor comes.
 */

static void put_free(sb_put *P)
{
    sb_free(P->own_tokens);
    sb_free(P->pages);
    sb_free(P->given);
    sb_free(P);
}

int sb_ns_put_begin(sb_ns *ns, const uint32_t *tokens, size_t n_tokens, size_t from,
                    sb_put **out)
{
    if (out)
        *out = NULL;
    int rc = sb_write_args(ns, tokens, n_tokens, out, NULL, NULL, NULL);
    if (rc != SB_OK)
        return rc;
    if (from > n_tokens)
        return SB_ERR_RANGE;
    sb_store *st = ns->st;
    sb_put *P = sb_calloc(&st->mem, 1, sizeof *P);
    if (!P)
        return SB_ERR_NOMEM;
    P->ns = ns;
    P->n_tokens = n_tokens;
    P->n_reg = regions(ns, n_tokens);
    P->layered = true;
    P->src.x = (sb_xfer){ ns, from, n_tokens, 0, ns->n_tensors, NULL };
    P->rp.oc = &P->rp.scratch;
    P->own_tokens = sb_malloc(&st->mem, n_tokens * sizeof *P->own_tokens);
    P->pages = sb_calloc(&st->mem, P->n_reg, sizeof *P->pages);
    P->given = sb_calloc(&st->mem, ns->n_tensors, 1);
    if (!P->own_tokens || !P->pages || !P->given) {
        put_free(P);
        return SB_ERR_NOMEM;
    }
    memcpy(P->own_tokens, tokens, n_tokens * sizeof *tokens);
    P->tokens = P->own_tokens;

    size_t held = 0;
    rc = put_open(P, &held); /* 1 */
    if (rc == SB_OK) {
        rc = put_pages(P, P->r0, P->n_reg); /* 2 */
        if (rc == SB_ERR_NOMEM) {
            pthread_mutex_lock(&st->mu);
            put_release(P);
            pthread_mutex_unlock(&st->mu);
        } else {
            P->pages_rc = rc; /* SB_ERR_BUDGET: finish stores a prefix */
            rc = SB_OK;
        }
    }
    if (rc != SB_OK) {
        put_free(P);
        return rc;
    }
    *out = P;
    return SB_OK;
}

int sb_put_tensors(sb_put *p, uint32_t first_tensor, uint32_t n_tensors,
                   const sb_block_table *src)
{
    if (!p)
        return SB_ERR_INVAL;
    int rc = sb_xfer_check(p->ns, p->src.x.from, first_tensor, n_tensors, src);
    if (rc != SB_OK)
        return rc;
    sb_xfer x = p->src.x;
    x.t0 = first_tensor;
    x.nt = n_tensors;
    x.tab = src;
    for (size_t r = p->r0; r < p->got; r++)
        sb_xfer_in(&x, r, p->pages[r]->data);
    memset(p->given + first_tensor, 1, n_tensors);
    return SB_OK;
}

int sb_put_finish(sb_put *p, const void *point, size_t *n_stored, sb_write_outcome *out)
{
    int rc = sb_write_args(p ? p->ns : NULL, p ? p->tokens : NULL, p ? p->n_tokens : 0, p, point,
                        n_stored, out);
    if (!p)
        return rc;
    sb_ns *ns = p->ns;
    sb_store *st = ns->st;
    for (uint32_t t = 0; rc == SB_OK && t < ns->n_tensors; t++)
        if (!p->given[t])
            rc = SB_ERR_INCOMPLETE;
    if (rc == SB_OK && sb_report_init(&p->rp, st, p->n_reg, out) != SB_OK)
        rc = SB_ERR_NOMEM;
    if (rc != SB_OK) {
        pthread_mutex_lock(&st->mu);
        put_release(p);
        pthread_mutex_unlock(&st->mu);
        put_free(p);
        return rc;
    }

    /* 3 */
    sb_blk *pb = NULL;
    rc = p->pages_rc;
    if (point) {
        int prc = sb_blk_alloc(ns, SB_BLK_POINT, &pb);
        if (prc == SB_OK)
            memcpy(pb->data, point, ns->point_bytes);
        else
            rc = prc;
    }
    bool abandon = rc == SB_ERR_NOMEM || (point && !pb);
    bool whole = false;
    /* 4 */
    pthread_mutex_lock(&st->mu);
    st->tick++;
    p->t0 = sb_tier_ticket(st);
    if (sb_report_reserve(&p->rp, st) != SB_OK) {
        rc = SB_ERR_NOMEM;
        abandon = true;
    }
    if (!abandon) {
        int crc = put_commit(p, pb, &whole);
        if (crc != SB_OK)
            rc = crc;
    }
    /* 5 */
    rc = put_end(p, rc, whole, point != NULL, pb, n_stored);
    put_free(p);
    return rc;
}

void sb_put_abort(sb_put *p)
{
    if (!p)
        return;
    sb_store *st = p->ns->st;
    pthread_mutex_lock(&st->mu);
    put_release(p);
    pthread_mutex_unlock(&st->mu);
    put_free(p);
}
