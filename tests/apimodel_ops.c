/* apimodel_ops.c -- the operations of the model-based test and the API
 * fuzzer: each draws its arguments, calls the store, and checks the answer
 * against the model (apimodel.c); am_step picks one and runs the checks
 * that follow every operation. */
#define _DEFAULT_SOURCE
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apimodel.h"
#include "apimodel_int.h"
#include "io.h"
#include "tier.h"

/* ---- outcomes ----------------------------------------------------------------------- */

static bool outcome_zero(const sb_write_outcome *oc)
{
    static const sb_write_outcome zero;
    return !memcmp(oc, &zero, sizeof zero);
}

/* What a put or commit said of the disk tier (sb_write_outcome), for a
 * call that stored `stored` tokens (and its point state when point);
 * e is the model's entry for it (NULL when nothing was stored). */
static void check_outcome(am *z, int xi, const sb_write_outcome *oc, size_t n, size_t stored,
                          bool point, am_entry *e, const char *what)
{
    am_ns *x = &z->ns[xi];
    uint32_t denied = 0;
    for (int r = 0; r < SB_DENY__COUNT; r++)
        denied += oc->denied_by[r];
    am_trace(z, "%s outcome: ticket %" PRIu64 ", durable %d, new %u+%u, queued %u, written %u, "
             "deferred %u, dirty %u, denied %u (short %u, budget %u, capacity %u, parent %u)",
             what, oc->ticket, oc->durable, oc->pages_new, oc->points_new, oc->queued,
             oc->written, oc->deferred, oc->dirty, oc->denied, oc->denied_by[SB_DENY_SHORT],
             oc->denied_by[SB_DENY_BUDGET], oc->denied_by[SB_DENY_CAPACITY],
             oc->denied_by[SB_DENY_PARENT]);
    AM_CHECK(z, oc->denied == denied, "%s: denied %u is not the sum of denied_by (%u)", what,
             oc->denied, denied);
    /* (A put that streams may see pages it added evicted again before it
     * returns: new pages are bounded by the request, not by *n_stored.) */
    AM_CHECK(z, oc->pages_new <= am_regions(z, x, n) && oc->points_new <= (point ? 1u : 0u),
             "%s: %u pages and %u points new for %zu tokens", what, oc->pages_new,
             oc->points_new, n);
    AM_CHECK(z, oc->written <= oc->queued, "%s: written %u of %u queued", what, oc->written,
             oc->queued);
    if (!z->io || stored == 0) {
        /* Every call on a RAM-only store, and one that stored nothing,
         * gets ticket 0 and is never durable. */
        AM_CHECK(z, oc->ticket == 0 && !oc->durable && !oc->queued && !oc->deferred &&
                        !oc->dirty && !oc->denied,
                 "%s: %s store, %zu tokens stored, yet ticket %" PRIu64 " durable %d queued %u",
                 what, z->io ? "a disk" : "a RAM-only", stored, oc->ticket, oc->durable,
                 oc->queued);
        return;
    }
    /* Write-only: never durable, and the outcome says why. */
    bool wo = z->cfg.write_mode == SB_WRITE_ONLY;
    AM_CHECK(z, oc->write_only == (int)wo && (!wo || !oc->durable),
             "%s: write mode %d, outcome write_only %d durable %d", what, (int)z->cfg.write_mode,
             oc->write_only, oc->durable);
    AM_CHECK(z, oc->ticket > z->max_ticket, "%s: ticket %" PRIu64 " after %" PRIu64
             " (tickets rise)", what, oc->ticket, z->max_ticket);
    z->max_ticket = oc->ticket;
    /* Durable: every block written and synced, none denied or waiting. */
    if (oc->durable)
        AM_CHECK(z, !oc->denied && !oc->deferred && !oc->dirty,
                 "%s: durable 1 with %u denied, %u deferred, %u dirty", what, oc->denied,
                 oc->deferred, oc->dirty);
    if (z->cfg.durability == SB_DURABILITY_COMMIT)
        AM_CHECK(z, oc->durable == (!wo && !oc->denied && !oc->deferred),
                 "%s: COMMIT durability, durable %d with %u denied and %u deferred", what,
                 oc->durable, oc->denied, oc->deferred);
    if (z->mode == AM_EXACT)
        AM_CHECK(z, !oc->denied && !oc->deferred,
                 "%s: %u blocks denied (%u short), %u deferred where nothing is", what,
                 oc->denied, oc->denied_by[SB_DENY_SHORT], oc->deferred);
    int rc = sb_store_is_durable(z->st, oc->ticket);
    if (oc->durable) /* (the writer may have reclaimed it since, under a cap) */
        AM_CHECK(z, rc == SB_OK || (rc == SB_ERR_RECLAIMED && z->mode == AM_LOOSE),
                 "%s: durable 1, but its ticket answers %s", what, sb_strerror(rc));
    if (wo && z->cfg.durability == SB_DURABILITY_COMMIT && !oc->denied && !oc->deferred)
        AM_CHECK(z, rc == SB_ERR_WRITE_ONLY && oc->written == oc->queued,
                 "%s: write-only COMMIT, %u of %u written, its ticket answers %s", what,
                 oc->written, oc->queued, sb_strerror(rc));
    if (oc->denied)
        AM_CHECK(z, rc == SB_ERR_NOT_DURABLE, "%s: %u blocks denied, but its ticket answers %s",
                 what, oc->denied, sb_strerror(rc));
    AM_CHECK(z, (rc == SB_OK && !wo) || (rc == SB_ERR_WRITE_ONLY && wo) ||
                    rc == SB_ERR_PENDING || rc == SB_ERR_NOT_DURABLE ||
                    (rc == SB_ERR_RECLAIMED && !wo && z->mode == AM_LOOSE),
             "%s: its ticket answers %s", what, sb_strerror(rc));
    if (e) {
        e->ticket = oc->ticket;
        am_follow(z, oc->ticket, SB_ERR_PENDING, xi, (size_t)(e - x->e));
        am_ticket_answer(z, &z->tk[z->n_tk - 1], rc, what);
    }
}

/* After a put or commit stored tokens[0, stored): the index restores it
 * now (point-state rule aside), unless something was dropped meanwhile. */
static void check_stored(am *z, int xi, const am_seq *s, size_t stored)
{
    if (!stored || stored > z->cfg.max_seq_tokens)
        return;
    sb_stats a, b;
    am_stats(z, &a);
    sb_match_info info;
    sb_match *m = am_match_checked(z, xi, s, stored, &info);
    am_stats(z, &b);
    sb_match_release(m);
    if (!m)
        return;
    bool dropped = z->mode == AM_LOOSE && (a.evictions != b.evictions ||
                                            a.disk_reclaim_dropped != b.disk_reclaim_dropped);
    if (!dropped && z->mode != AM_LOOSE)
        AM_CHECK(z, info.n_matched_tokens >= stored,
                 "stored %zu tokens of %s, a match right after finds %zu", stored,
                 AM_S(s->tok, stored), info.n_matched_tokens);
}

/* The drops a new entry counts from: after the call where nothing runs in
 * the background that drops (RAM, EXACT); before it otherwise. */
static uint64_t entry_since(am *z, uint64_t before)
{
    sb_stats s;
    am_stats(z, &s);
    am_update_drops(z, &s);
    return z->mode == AM_LOOSE ? before : z->drops;
}

/* ---- put ------------------------------------------------------------------------------ */

static void op_put(am *z)
{
    int xi = (int)am_draw(z, (uint64_t)z->n_ns);
    am_ns *x = &z->ns[xi];
    const am_model *md = &z->model[x->model];
    am_seq s;
    am_draw_seq(z, x, &s);
    size_t n = s.n;
    bool point = md->point_bytes && am_draw(z, 4) > 0;
    bool ex = am_draw(z, 3) > 0;
    am_fill_buf(z, x, s.tok, n, z->buf);
    const void *src[AM_MAX_TENSORS];
    for (uint32_t t = 0; t < md->n_tensors; t++)
        src[t] = z->buf[t];
    uint8_t pbuf[AM_MAX_POINT];
    if (point)
        am_point(z, x, s.tok, n, pbuf);
    sb_stats s0, s1;
    am_stats(z, &s0);
    am_update_drops(z, &s0);
    uint64_t drops0 = z->drops, rd0 = am_disk_drops(z, &s0);
    size_t stored = 12345;
    sb_write_outcome oc;
    memset(&oc, 0xAB, sizeof oc);
    /* Now and then from block tables, naming only the positions from some
     * length the index holds (a lookup says how much: with a disk tier
     * reclamation may cut it meanwhile, SB_ERR_RANGE then). */
    bool blocks = ex && am_draw(z, 4) == 0;
    size_t from = 0, held = 0;
    if (blocks && n <= z->cfg.max_seq_tokens && am_draw(z, 2)) {
        sb_lookup lk = { .tokens = s.tok, .n_tokens = n };
        AM_CHECK(z, sb_ns_lookup(x->h, &lk, 1) == SB_OK, "sb_ns_lookup");
        held = lk.info.n_matched_tokens;
        from = am_draw(z, held + 1);
    }
    /* ...and of those, half a layered put (tensors in several calls),
     * which must do all the same; or it ends without storing anything. */
    bool layers = blocks && am_draw(z, 2);
    am_layered how = AM_LAYERED_FINISHED;
    bool armed = am_arm(z);
    int rc = layers   ? am_put_layers(z, xi, s.tok, n, from, point ? pbuf : NULL, &stored, &oc,
                                      &how)
             : blocks ? am_put_blocks(z, xi, s.tok, n, from, point ? pbuf : NULL, &stored, &oc)
             : ex     ? sb_ns_put_ex(x->h, s.tok, n, src, point ? pbuf : NULL, &stored, &oc)
                      : sb_ns_put(x->h, s.tok, n, src, point ? pbuf : NULL, &stored);
    am_disarm(z);
    am_trace(z, "put%s ns %d %s (%zu)%s: %s, stored %zu",
             layers ? "_layers" : blocks ? "_blocks" : ex ? "_ex" : "", xi, AM_S(s.tok, n), n,
             point ? " + point" : "", sb_strerror(rc), stored);
    if (how != AM_LAYERED_FINISHED) {
        /* Aborted, or refused for a missing tensor: nothing added, every
         * page it took let go (one a read brought in stays). */
        am_stats(z, &s1);
        AM_CHECK(z, stored == 0 && outcome_zero(&oc) && s1.puts == s0.puts &&
                        s1.pages_new == s0.pages_new && s1.points <= s0.points &&
                        s1.ram_pages <= s0.ram_pages + 1,
                 "a layered put %s changed the bank (stored %zu, pages %" PRIu64 " -> %" PRIu64
                 ")", how == AM_LAYERED_ABORTED ? "aborted" : "refused", stored, s0.ram_pages,
                 s1.ram_pages);
        return;
    }
    if (blocks && from && rc == SB_ERR_RANGE && z->mode == AM_LOOSE) {
        AM_CHECK(z, stored < from && outcome_zero(&oc),
                 "put_blocks from %zu refused, yet the bank holds %zu (or an outcome)", from,
                 stored);
        return;
    }
    if (blocks && from && (rc == SB_ERR_CORRUPT || rc == SB_ERR_IO)) {
        /* the page before from failed to read: only after a power cut */
        AM_CHECK(z, z->crashed && stored == 0, "put_blocks from %zu: %s", from, sb_strerror(rc));
        am_damage(z, xi);
        return;
    }
    if (n > z->cfg.max_seq_tokens) {
        AM_CHECK(z, rc == SB_ERR_TOO_MANY_TOKENS && stored == 0 && (!ex || outcome_zero(&oc)),
                 "put of %zu tokens over max_seq_tokens: %s, stored %zu", n, sb_strerror(rc),
                 stored);
        return;
    }
    if (armed && rc == SB_ERR_NOMEM) {
        AM_CHECK(z, stored == 0 && (!ex || outcome_zero(&oc)),
                 "a put failed with NOMEM, yet stored %zu (or a nonzero outcome)", stored);
        return;
    }
    AM_CHECK(z, rc == SB_OK || rc == SB_ERR_BUDGET, "put of %s: %s", AM_S(s.tok, n),
             sb_strerror(rc));
    if (rc == SB_OK)
        AM_CHECK(z, stored == n, "put returned SB_OK with %zu of %zu tokens stored", stored, n);
    else
        AM_CHECK(z, stored < n || (stored == n && point),
                 "put returned SB_ERR_BUDGET with all %zu tokens stored and no point", n);
    am_stats(z, &s1);
    AM_CHECK(z, s1.puts == s0.puts + (stored > 0), "puts counter moved %" PRIu64 " for a put "
             "storing %zu tokens", s1.puts - s0.puts, stored);
    if (rc == SB_ERR_BUDGET && z->io && z->cfg.write_mode == SB_WRITE_ONLY && stored < n) {
        /* A put that streams commits its chunks as it goes: one the RAM
         * tier evicted before the call returned is not in *n_stored, yet
         * its records may serve a later open (write-only mode keeps
         * nothing on disk in its index). An upper bound only. */
        am_entry *g = am_add(z, x, s.tok, n, false);
        g->must = false;
    }
    am_entry *e = NULL;
    if (stored) {
        e = am_add(z, x, s.tok, stored, rc == SB_OK && point);
        e->since = entry_since(z, drops0);
        e->disk_since = rd0;
    }
    if (ex)
        check_outcome(z, xi, &oc, n, stored, rc == SB_OK && point, e, "put");
    check_stored(z, xi, &s, stored);
}

/* ---- zero-copy commit ------------------------------------------------------------------ */

static void unref_all(sb_page **pages, size_t n)
{
    for (size_t r = 0; r < n; r++)
        sb_page_unref(pages[r]);
}

static void op_commit(am *z)
{
    int xi = (int)am_draw(z, (uint64_t)z->n_ns);
    am_ns *x = &z->ns[xi];
    const am_model *md = &z->model[x->model];
    uint32_t pt = md->pt;
    am_seq s;
    am_draw_seq(z, x, &s);
    size_t n = s.n, n_reg = am_regions(z, x, n);
    sb_page *pages[AM_MAX_SEQ + 1];
    memset(pages, 0, sizeof pages);
    if (n > z->cfg.max_seq_tokens) {
        int rc = sb_ns_commit(x->h, s.tok, n, pages, NULL);
        AM_CHECK(z, rc == SB_ERR_TOO_MANY_TOKENS, "commit of %zu tokens over the limit: %s", n,
                 sb_strerror(rc));
        return;
    }
    /* Pages: a matched prefix's (the last made writable when partial), the
     * rest fresh. */
    bool reused = false;
    if (am_draw(z, 2)) {
        sb_match *m = NULL;
        int rc = sb_ns_match(x->h, s.tok, n, &m);
        AM_CHECK(z, rc == SB_OK, "match: %s", sb_strerror(rc));
        sb_match_info info;
        AM_CHECK(z, sb_match_get_info(m, &info) == SB_OK, "sb_match_get_info");
        size_t L = info.n_tokens;
        if (info.n_pages) {
            rc = sb_match_pages(m, 0, info.n_pages, pages);
            if (rc != SB_OK) {
                AM_CHECK(z, rc == SB_ERR_BUDGET || rc == SB_ERR_NOMEM ||
                                (z->crashed && (rc == SB_ERR_CORRUPT || rc == SB_ERR_IO)),
                         "sb_match_pages: %s", sb_strerror(rc));
                if (rc == SB_ERR_CORRUPT || rc == SB_ERR_IO)
                    am_damage(z, xi);
                memset(pages, 0, sizeof pages);
                L = 0;
            }
        }
        sb_match_release(m);
        reused = L > 0;
        for (size_t r = 0; r * pt < L; r++)
            AM_CHECK(z, am_page_ok(z, x, pages[r], s.tok, r,
                                   am_region_tokens(z, x, L, r)),
                     "a matched page of region %zu holds the wrong state", r);
        if (L % pt) {
            size_t r = L / pt;
            rc = sb_page_writable(x->h, &pages[r], (uint32_t)(L % pt));
            if (rc != SB_OK) {
                AM_CHECK(z, rc == SB_ERR_BUDGET || rc == SB_ERR_NOMEM, "sb_page_writable: %s",
                         sb_strerror(rc));
                sb_page_unref(pages[r]);
                pages[r] = NULL;
            } else {
                AM_CHECK(z, sb_page_tokens(pages[r]) == 0 &&
                                am_page_ok(z, x, pages[r], s.tok, r, (uint32_t)(L % pt)),
                         "a copy-on-write page does not hold the kept slices");
                am_fill_page(z, x, pages[r], s.tok, r, (uint32_t)(L % pt),
                             am_region_tokens(z, x, n, r));
            }
        }
    }
    for (size_t r = 0; r < n_reg; r++) {
        if (pages[r])
            continue;
        int rc = sb_ns_page_alloc(x->h, &pages[r]);
        if (rc != SB_OK) {
            AM_CHECK(z, (rc == SB_ERR_BUDGET || rc == SB_ERR_NOMEM) && !pages[r],
                     "sb_ns_page_alloc: %s", sb_strerror(rc));
            unref_all(pages, n_reg);
            return;
        }
        AM_CHECK(z, sb_page_tokens(pages[r]) == 0 && ((uintptr_t)sb_page_data(pages[r]) & 4095) == 0,
                 "a fresh page is not empty and 4 KiB aligned");
        am_fill_page(z, x, pages[r], s.tok, r, 0, am_region_tokens(z, x, n, r));
    }
    /* Now and then a bad argument: nothing may change. */
    unsigned bad = (unsigned)am_draw(z, 12);
    int want = SB_OK;
    sb_page *kept = NULL, *foreign = NULL;
    if (bad == 0 && n_reg >= 2 && sb_page_tokens(pages[0]) == 0) {
        /* (A fresh page: a committed one in another region is PAGE_STATE
         * as much as a duplicate.) */
        kept = pages[1];
        pages[1] = pages[0];
        want = SB_ERR_INVAL;
    } else if (bad == 1 && z->n_ns > 1) {
        int yi = (xi + 1 + (int)am_draw(z, (uint64_t)z->n_ns - 1)) % z->n_ns;
        if (sb_ns_page_alloc(z->ns[yi].h, &foreign) == SB_OK) {
            kept = pages[n_reg - 1];
            pages[n_reg - 1] = foreign;
            want = SB_ERR_FOREIGN_PAGE;
        }
    } else if (bad == 2) {
        kept = pages[n_reg - 1];
        pages[n_reg - 1] = NULL;
        want = SB_ERR_INVAL;
    } else if (bad == 3) {
        /* A committed page given for tokens other than its own. */
        for (int i = 0; i < z->n_page; i++) {
            am_page *hp = &z->page[i];
            if (hp->xi != xi || sb_page_tokens(hp->p) == 0 || hp->kv < sb_page_tokens(hp->p))
                continue; /* (a match's last page may hold tokens the model never saw) */
            size_t r = n_reg - 1;
            if (hp->region == r && hp->pre.n >= r * pt &&
                am_lcp(hp->pre.tok, r * pt + sb_page_tokens(hp->p), s.tok, n) >=
                    r * pt + am_region_tokens(z, x, n, r))
                continue; /* its own tokens after all */
            kept = pages[r];
            pages[r] = sb_page_ref(hp->p);
            want = SB_ERR_PAGE_STATE;
            break;
        }
    }
    sb_page *before[AM_MAX_SEQ + 1];
    memcpy(before, pages, sizeof pages);
    bool point = md->point_bytes && am_draw(z, 4) > 0;
    uint8_t pbuf[AM_MAX_POINT];
    if (point)
        am_point(z, x, s.tok, n, pbuf);
    bool ex = am_draw(z, 3) > 0;
    sb_write_outcome oc;
    memset(&oc, 0xAB, sizeof oc);
    sb_stats s0, s1;
    am_stats(z, &s0);
    am_update_drops(z, &s0);
    uint64_t drops0 = z->drops, rd0 = am_disk_drops(z, &s0);
    bool armed = want == SB_OK && am_arm(z);
    int rc = ex ? sb_ns_commit_ex(x->h, s.tok, n, pages, point ? pbuf : NULL, &oc)
                : sb_ns_commit(x->h, s.tok, n, pages, point ? pbuf : NULL);
    if (want == SB_OK)
        am_disarm(z);
    am_trace(z, "commit%s ns %d %s (%zu, %zu pages%s)%s: %s", ex ? "_ex" : "", xi,
             AM_S(s.tok, n), n, n_reg, reused ? ", reused" : "", point ? " + point" : "",
             sb_strerror(rc));
    am_stats(z, &s1);
    if (want != SB_OK || rc != SB_OK) {
        if (want != SB_OK) /* (or no room for the point state, found first) */
            AM_CHECK(z, rc == want || (point && rc == SB_ERR_BUDGET),
                     "commit with a bad page: %s, expected %s", sb_strerror(rc),
                     sb_strerror(want));
        else
            AM_CHECK(z, rc == SB_ERR_BUDGET || (armed && rc == SB_ERR_NOMEM) ||
                            (z->mode == AM_LOOSE && reused && rc == SB_ERR_PAGE_STATE),
                     "commit of %s: %s", AM_S(s.tok, n), sb_strerror(rc));
        AM_CHECK(z, !memcmp(before, pages, sizeof pages) && (!ex || outcome_zero(&oc)) &&
                        s1.commits == s0.commits,
                 "a failed commit (%s) changed the caller's pages, its outcome or the count",
                 sb_strerror(rc));
        if (want == SB_ERR_INVAL && bad == 0)
            pages[1] = kept;
        else if (want != SB_OK) {
            sb_page_unref(pages[n_reg - 1]);
            pages[n_reg - 1] = kept;
        }
        unref_all(pages, n_reg);
        return;
    }
    AM_CHECK(z, s1.commits == s0.commits + 1, "commits counter did not move");
    am_entry *e = am_add(z, x, s.tok, n, point);
    e->since = entry_since(z, drops0);
    e->disk_since = rd0;
    if (ex)
        check_outcome(z, xi, &oc, n, n, point, e, "commit");
    /* The caller's pages: the index's where it held the region already
     * (a partial last page may hold more), or its own. */
    for (size_t r = 0; r < n_reg; r++) {
        uint32_t k = am_region_tokens(z, x, n, r);
        uint32_t have = sb_page_tokens(pages[r]);
        /* (The one exception: the index's page is on disk only and holds
         * more tokens; the caller keeps its own, still private.) */
        AM_CHECK(z, have >= k || (have == 0 && z->io && pages[r] == before[r]),
                 "after commit, page %zu holds %u committed tokens of %u", r, have, k);
        AM_CHECK(z, sb_page_data(pages[r]) && am_page_ok(z, x, pages[r], s.tok, r, k),
                 "after commit, page %zu does not hold the state of its tokens", r);
    }
    for (size_t r = 0; r < n_reg; r++) {
        if (am_draw(z, 3) == 0) {
            am_hold_page(z, pages[r], xi, (uint32_t)r, am_region_tokens(z, x, n, r), s.tok);
            pages[r] = NULL;
        }
    }
    unref_all(pages, n_reg);
    check_stored(z, xi, &s, n);
}

/* ---- match ------------------------------------------------------------------------------- */

/* sb_match_load_start of pages [0, k) (and the point, when pt) of m: a
 * prefix waited for and restored beside the load (checked token by token),
 * now and then a cancel, then the end. Returns the load's outcome. */
static int load_async(am *z, int xi, sb_match *m, const am_seq *s, size_t k, int pt)
{
    sb_load *ld = NULL;
    int rc = sb_match_load_start(m, k, pt, &ld);
    AM_CHECK(z, rc == SB_OK || rc == SB_ERR_NOMEM, "sb_match_load_start(%zu, %d): %s", k, pt,
             sb_strerror(rc));
    if (rc != SB_OK)
        return rc;
    sb_load *two = NULL; /* a second load is refused while the first runs */
    rc = sb_match_load_start(m, k, pt, &two);
    AM_CHECK(z, rc == SB_ERR_BUSY || rc == SB_OK || rc == SB_ERR_NOMEM,
             "a second sb_match_load_start: %s", sb_strerror(rc));
    sb_load_free(two);
    size_t want = am_draw(z, k + 1), ready = 0;
    rc = sb_load_wait(ld, want, -1, &ready);
    AM_CHECK(z, rc != SB_OK || ready >= want, "sb_load_wait(%zu): SB_OK with %zu ready", want,
             ready);
    am_trace(z, "  load_start(%zu, %d), waited for %zu: %s, %zu ready", k, pt, want,
             sb_strerror(rc), ready);
    if (rc == SB_OK && want && !z->crashed) {
        /* Beside the load (if it still runs): pages it made resident. */
        sb_match_info info;
        AM_CHECK(z, sb_match_get_info(m, &info) == SB_OK, "sb_match_get_info");
        size_t n = want * z->model[z->ns[xi].model].pt;
        n = n < info.n_tokens ? n : info.n_tokens;
        if (n)
            am_restore_checked(z, xi, m, s->tok, n, false, "restore beside a load");
    }
    bool canceled = am_draw(z, 4) == 0;
    if (canceled)
        sb_load_cancel(ld);
    rc = sb_load_wait(ld, SIZE_MAX, -1, &ready);
    AM_CHECK(z, rc != SB_ERR_PENDING && (rc != SB_ERR_CANCELED || canceled),
             "sb_load_wait for the whole load: %s", sb_strerror(rc));
    size_t again;
    AM_CHECK(z, sb_load_poll(ld, &again) == rc && again == ready,
             "sb_load_poll after the end disagrees with sb_load_wait");
    if (rc == SB_OK) {
        sb_match_info info;
        AM_CHECK(z, sb_match_get_info(m, &info) == SB_OK, "sb_match_get_info");
        AM_CHECK(z, ready == k && info.n_pages_disk <= info.n_pages - k,
                 "a load of %zu pages ended SB_OK with %zu ready, %zu of %zu on disk", k, ready,
                 info.n_pages_disk, info.n_pages);
    }
    sb_load_free(ld);
    return rc;
}

static void op_match(am *z, bool hold)
{
    int xi = (int)am_draw(z, (uint64_t)z->n_ns);
    am_ns *x = &z->ns[xi];
    const am_model *md = &z->model[x->model];
    am_seq s;
    am_draw_seq(z, x, &s);
    size_t n = s.n;
    /* A batched lookup of s among up to two other requests just before. */
    am_seq other[2];
    sb_lookup lk[3];
    size_t n_lk = 1 + am_draw(z, 3), at = am_draw(z, n_lk), o = 0;
    bool too_long = n > z->cfg.max_seq_tokens;
    for (size_t i = 0; i < n_lk; i++) {
        const am_seq *q = &s;
        if (i != at) {
            am_draw_seq(z, x, &other[o]);
            q = &other[o++];
        }
        too_long |= q->n > z->cfg.max_seq_tokens;
        lk[i] = (sb_lookup){ .tokens = q->tok, .n_tokens = q->n };
    }
    sb_stats l0;
    am_stats(z, &l0);
    am_update_drops(z, &l0);
    uint64_t drops0 = z->drops;
    int lrc = sb_ns_lookup(x->h, lk, n_lk);
    AM_CHECK(z, lrc == (too_long ? SB_ERR_TOO_MANY_TOKENS : SB_OK),
             "sb_ns_lookup of %zu requests: %s", n_lk, sb_strerror(lrc));
    for (size_t i = 0; lrc == SB_OK && i < n_lk; i++) {
        const sb_match_info *li = &lk[i].info;
        AM_CHECK(z, li->n_tokens <= li->n_matched_tokens &&
                        li->n_matched_tokens <= lk[i].n_tokens &&
                        li->n_pages == am_regions(z, x, li->n_tokens) &&
                        li->n_pages_ram + li->n_pages_disk == li->n_pages &&
                        li->n_matched_tokens <= am_lcp_any(z, x, lk[i].tokens, lk[i].n_tokens),
                 "lookup %zu of %s: L %zu, matched %zu, pages %zu (%zu disk)", i,
                 AM_S(lk[i].tokens, lk[i].n_tokens), li->n_tokens, li->n_matched_tokens,
                 li->n_pages, li->n_pages_disk);
    }
    sb_match_info info;
    sb_match *m = am_match_checked(z, xi, &s, n, &info);
    if (!m)
        return;
    /* The lookup found what the match then finds, as far as nothing can
     * have changed in between: a RAM store has no thread of its own; with
     * a disk tier the writer drops written pages' bytes meanwhile, and
     * reclamation (LOOSE) may cut records (counted as drops). */
    sb_stats l1;
    am_stats(z, &l1);
    am_update_drops(z, &l1);
    if (lrc == SB_OK && (z->mode != AM_LOOSE || z->drops == drops0)) {
        const sb_match_info *li = &lk[at].info;
        AM_CHECK(z, li->n_tokens == info.n_tokens &&
                        li->n_matched_tokens == info.n_matched_tokens &&
                        li->has_point == info.has_point && li->n_pages == info.n_pages &&
                        (z->mode == AM_LOOSE || li->miss == info.miss) &&
                        (z->mode != AM_RAM || li->n_pages_disk == info.n_pages_disk),
                 "lookup of %s: L %zu, matched %zu, point %d, %zu pages (%zu disk), %s; the "
                 "match: L %zu, matched %zu, point %d, %zu pages (%zu disk), %s",
                 AM_S(s.tok, n), li->n_tokens, li->n_matched_tokens, li->has_point,
                 li->n_pages, li->n_pages_disk, sb_miss_name(li->miss), info.n_tokens,
                 info.n_matched_tokens, info.has_point, info.n_pages, info.n_pages_disk,
                 sb_miss_name(info.miss));
    }
    am_match_restores(z, xi, m, &s, n, &info);
    /* Pages for a page table: new references, each holding its tokens. */
    if (info.n_pages) {
        size_t first = am_draw(z, info.n_pages);
        size_t count = 1 + am_draw(z, info.n_pages - first);
        sb_page *pg[AM_MAX_SEQ];
        int rc = sb_match_pages(m, first, count, pg);
        if (rc == SB_OK) {
            for (size_t i = 0; i < count; i++) {
                size_t r = first + i;
                uint32_t k = am_region_tokens(z, x, info.n_tokens, r);
                AM_CHECK(z, sb_page_tokens(pg[i]) >= k && am_page_ok(z, x, pg[i], s.tok, r, k),
                         "sb_match_pages: page %zu does not hold its %u tokens", r, k);
                if (am_draw(z, 4) == 0)
                    am_hold_page(z, pg[i], xi, (uint32_t)r, k, s.tok);
                else
                    sb_page_unref(pg[i]);
            }
        } else {
            AM_CHECK(z, rc == SB_ERR_BUDGET || rc == SB_ERR_NOMEM ||
                            (z->crashed && (rc == SB_ERR_CORRUPT || rc == SB_ERR_IO)),
                     "sb_match_pages(%zu, %zu) of %zu: %s", first, count, info.n_pages,
                     sb_strerror(rc));
            if (rc == SB_ERR_CORRUPT || rc == SB_ERR_IO) {
                am_damage(z, xi);
                AM_CHECK(z, sb_match_get_info(m, &info) == SB_OK, "sb_match_get_info");
            }
        }
    }
    /* A load of the pages (and the point) ahead of use, blocking or not. */
    size_t k = am_draw(z, info.n_pages + 1);
    int pt = k == info.n_pages && info.has_point && am_draw(z, 2);
    int rc = am_draw(z, 2) ? sb_match_load(m, k, pt) : load_async(z, xi, m, &s, k, pt);
    AM_CHECK(z, rc == SB_OK || rc == SB_ERR_BUDGET || rc == SB_ERR_NOMEM ||
                    rc == SB_ERR_CANCELED ||
                    (z->crashed && (rc == SB_ERR_CORRUPT || rc == SB_ERR_IO)),
             "sb_match_load(%zu, %d): %s", k, pt, sb_strerror(rc));
    if (rc == SB_ERR_CORRUPT || rc == SB_ERR_IO)
        am_damage(z, xi);
    AM_CHECK(z, sb_match_get_info(m, &info) == SB_OK, "sb_match_get_info");
    (void)md;
    if (hold)
        am_hold_match(z, m, xi, &s, n, &info);
    else
        sb_match_release(m);
}

static void op_release(am *z)
{
    if (z->n_match)
        am_drop_match(z, (int)am_draw(z, (uint64_t)z->n_match));
}

/* ---- pins ---------------------------------------------------------------------------------- */

static void op_pin(am *z)
{
    int xi = (int)am_draw(z, (uint64_t)z->n_ns);
    am_ns *x = &z->ns[xi];
    const am_model *md = &z->model[x->model];
    am_seq s;
    am_draw_seq(z, x, &s);
    size_t n = s.n;
    uint64_t ttl = am_draw(z, 3) == 0 ? 0 : 1 + am_draw(z, 5000);
    uint64_t id = 0;
    size_t np = 12345;
    uint64_t now = atomic_load(&z->clock_ns);
    bool armed = am_arm(z);
    int rc = sb_ns_pin(x->h, s.tok, n, ttl, &id, &np);
    am_disarm(z);
    am_trace(z, "pin ns %d %s (%zu) ttl %" PRIu64 ": %s, id %" PRIu64 ", %zu pinned", xi,
             AM_S(s.tok, n), n, ttl, sb_strerror(rc), id, np);
    if (n > z->cfg.max_seq_tokens) {
        AM_CHECK(z, rc == SB_ERR_TOO_MANY_TOKENS && np == 0, "pin over the limit: %s",
                 sb_strerror(rc));
        return;
    }
    if (armed && rc == SB_ERR_NOMEM)
        return;
    if (z->crashed && (rc == SB_ERR_CORRUPT || rc == SB_ERR_IO)) {
        /* A damaged record met reading the pages in: they left the index. */
        AM_CHECK(z, np == 0, "a pin that failed (%s) pinned %zu", sb_strerror(rc), np);
        am_damage(z, xi);
        return;
    }
    AM_CHECK(z, rc == SB_OK && np <= n, "pin of %s: %s, %zu pinned", AM_S(s.tok, n),
             sb_strerror(rc), np);
    sb_match_info info;
    sb_match *m = am_match_checked(z, xi, &s, n, &info);
    sb_match_release(m);
    if (!m)
        return;
    /* What the pin holds stays restorable while it lives: np tokens (the
     * budgets or a read may have stopped it short of what is stored), and
     * under the point rule what was restorable if it pinned everything
     * (not in LOOSE, where a point state it could not read in may go). */
    bool required = md->flags & SB_LAYOUT_POINT_REQUIRED;
    AM_CHECK(z, np <= info.n_matched_tokens && (required || np <= info.n_tokens),
             "pinned %zu tokens of %s, only %zu restorable right after", np, AM_S(s.tok, n),
             info.n_tokens);
    size_t L0 = !required ? np
                : np == info.n_matched_tokens && z->mode != AM_LOOSE ? info.n_tokens
                                                                      : 0;
    if (np && np <= z->cfg.max_seq_tokens) {
        /* ...and in RAM. */
        sb_match *pm = NULL;
        AM_CHECK(z, sb_ns_match(x->h, s.tok, np, &pm) == SB_OK, "match");
        AM_CHECK(z, sb_match_get_info(pm, &info) == SB_OK, "sb_match_get_info");
        sb_match_release(pm);
        AM_CHECK(z, info.n_pages_disk == 0 || info.n_matched_tokens < np,
                 "pinned %zu tokens of %s: %zu of their pages on disk only", np,
                 AM_S(s.tok, n), info.n_pages_disk);
    }
    if (z->n_pin == AM_PINS) {
        am_pin *old = &z->pin[0];
        if (am_pin_live(z, old))
            AM_CHECK(z, sb_ns_unpin(z->ns[old->xi].h, old->id) == SB_OK, "unpin");
        memmove(&z->pin[0], &z->pin[1], (AM_PINS - 1) * sizeof z->pin[0]);
        z->n_pin--;
    }
    am_pin *p = &z->pin[z->n_pin++];
    p->id = id;
    p->xi = xi;
    p->s = s;
    p->s.n = (uint32_t)n;
    p->L0 = L0;
    p->expiry_ns = ttl ? now + ttl * 1000000ull : 0;
    p->live = true;
}

static void op_unpin(am *z)
{
    if (!z->n_pin) {
        int rc = sb_ns_unpin(z->ns[0].h, 0xdeadbeef);
        AM_CHECK(z, rc == SB_ERR_NOT_FOUND, "unpin of an id never made: %s", sb_strerror(rc));
        return;
    }
    int i = (int)am_draw(z, (uint64_t)z->n_pin);
    am_pin *p = &z->pin[i];
    if (z->n_ns > 1 && am_draw(z, 6) == 0) {
        int yi = (p->xi + 1) % z->n_ns;
        if (z->ns[yi].h != z->ns[p->xi].h) {
            int rc = sb_ns_unpin(z->ns[yi].h, p->id);
            AM_CHECK(z, rc == SB_ERR_NOT_FOUND, "unpin through another namespace: %s",
                     sb_strerror(rc));
            return;
        }
    }
    bool live = am_pin_live(z, p);
    int rc = sb_ns_unpin(z->ns[p->xi].h, p->id);
    am_trace(z, "unpin %" PRIu64 " (%s): %s", p->id, live ? "live" : "gone", sb_strerror(rc));
    AM_CHECK(z, rc == (live ? SB_OK : SB_ERR_NOT_FOUND), "unpin of a %s pin: %s",
             live ? "live" : "removed or expired", sb_strerror(rc));
    p->live = false;
}

static void op_clock(am *z)
{
    static const uint64_t span_ms[] = { 10, 1000, 10000, 600000, 3600000 };
    uint64_t ms = am_draw(z, span_ms[am_draw(z, 5)]);
    atomic_fetch_add(&z->clock_ns, ms * 1000000ull);
    am_trace(z, "clock +%" PRIu64 " ms", ms);
}

/* ---- removal -------------------------------------------------------------------------------- */

/* Add a copy of e to x's entries as an upper bound only (not guaranteed):
 * what a reopen may bring back. */
static void add_ghost(am *z, am_ns *x, const am_entry *e)
{
    am_entry copy = *e;
    am_entry *g = am_add(z, x, copy.s.tok, copy.s.n, copy.point);
    g->must = false;
}

/* Keep a copy of e for the next reopen (am_ns.lat). */
static void add_latent(am *z, am_ns *x, const am_entry *e)
{
    if (x->n_lat == x->cap_lat) {
        size_t cap = x->cap_lat ? 2 * x->cap_lat : 16;
        am_entry *p = realloc(x->lat, cap * sizeof *p);
        AM_CHECK(z, p, "out of memory for the model");
        x->lat = p;
        x->cap_lat = cap;
    }
    x->lat[x->n_lat++] = *e;
}

/* sb_ns_remove of a prefix of a drawn sequence. What the model makes of it
 * (snapbank.h): with r = n / pt, a sequence that starts with the prefix
 * keeps its first r * pt tokens and no point state. A stored sequence
 * that is a proper prefix of the prefix and ends past r * pt (inside the
 * cut page) had its tail held by a page of the cut region that began with
 * the whole rest: where the index is exactly the model's, it stays whole
 * if a sequence that leaves the prefix after its end and before n, and
 * goes on past where it leaves, covers it (that one's own page of the
 * region), else it keeps r * pt tokens and no point (and a reopen may find
 * its own older page again: latent); elsewhere it is no longer
 * guaranteed. A call that failed on the disk tier (IO, NOSPC) took the
 * states out of RAM, but a reopen may bring them back: ghosts. */
static void op_remove(am *z)
{
    int xi = (int)am_draw(z, (uint64_t)z->n_ns);
    am_ns *x = &z->ns[xi];
    const am_model *md = &z->model[x->model];
    am_seq s;
    am_draw_seq(z, x, &s);
    if (!s.n)
        return;
    size_t n = 1 + am_draw(z, s.n);
    size_t cut = n / md->pt * md->pt;
    sb_stats s0, s1;
    am_stats(z, &s0);
    am_update_drops(z, &s0);
    bool exact = !z->crashed && !x->loose &&
                 ((z->mode == AM_RAM && !z->ever_dropped && !s0.evictions &&
                   !s0.point_evictions) ||
                  z->mode == AM_EXACT);
    size_t removed = 12345;
    bool armed = am_arm(z);
    int rc = sb_ns_remove(x->h, s.tok, n, &removed);
    am_disarm(z);
    am_trace(z, "remove ns %d %s (%zu): %s, %zu removed", xi, AM_S(s.tok, n), n,
             sb_strerror(rc), removed);
    if (n > z->cfg.max_seq_tokens) {
        AM_CHECK(z, rc == SB_ERR_TOO_MANY_TOKENS && removed == 0,
                 "remove of %zu tokens over max_seq_tokens: %s, %zu removed", n,
                 sb_strerror(rc), removed);
        return;
    }
    am_stats(z, &s1);
    if (armed && rc == SB_ERR_NOMEM) {
        AM_CHECK(z, removed == 0 && s1.removes == s0.removes && s1.indexed_pages == s0.indexed_pages,
                 "a remove failed with NOMEM, yet %zu removed", removed);
        return;
    }
    AM_CHECK(z, rc == SB_OK || (z->mode == AM_LOOSE && (rc == SB_ERR_IO || rc == SB_ERR_NOSPC)),
             "remove of %s: %s", AM_S(s.tok, n), sb_strerror(rc));
    AM_CHECK(z, s1.removes == s0.removes + 1 &&
                    s1.removed_pages + s1.removed_points ==
                        s0.removed_pages + s0.removed_points + removed,
             "remove: the counters moved wrong (%zu removed)", removed);
    if (z->io && rc == SB_OK)
        AM_CHECK(z, s1.disk_tombstones > s0.disk_tombstones,
                 "remove with a disk tier said SB_OK and wrote no tombstone");
    /* Nothing past the prefix is left on its paths: a match of anything
     * that starts with it covers at most the prefix (its pages before the
     * cut), less when the prefix ends inside a page, and has no point
     * state at the prefix's end. */
    sb_match *m = NULL;
    size_t q = s.n <= z->cfg.max_seq_tokens ? s.n : n;
    AM_CHECK(z, sb_ns_match(x->h, s.tok, q, &m) == SB_OK, "match");
    sb_match_info info;
    AM_CHECK(z, sb_match_get_info(m, &info) == SB_OK, "sb_match_get_info");
    sb_match_release(m);
    AM_CHECK(z, info.n_matched_tokens <= cut + (cut < n ? (n - cut) - 1 : 0) &&
                    !(info.n_tokens == n && info.has_point),
             "after the removal of %s, a match of %s matched %zu (L %zu, point %d)",
             AM_S(s.tok, n), AM_S(s.tok, q), info.n_matched_tokens, info.n_tokens,
             info.has_point);

    z->removes++;
    /* Pins let go of what was removed: a pinned prefix through the cut
     * keeps its pages before it (under the point rule, maybe nothing). */
    for (int i = 0; i < z->n_pin; i++) {
        am_pin *p = &z->pin[i];
        if (p->xi != xi)
            continue;
        size_t l = am_lcp(p->s.tok, p->L0, s.tok, n);
        bool through = l >= n || (l == p->L0 && p->L0 > cut);
        if (md->flags & SB_LAYOUT_POINT_REQUIRED) {
            if (through)
                p->L0 = 0; /* its point state may have gone */
        } else if (through && p->L0 > cut) {
            p->L0 = cut;
        }
    }
    bool ghosts = z->io && rc != SB_OK;
    size_t n_e0 = x->n_e;
    bool hit = false; /* some sequence stored starts with the prefix */
    for (size_t i = 0; i < n_e0 && !hit; i++)
        hit = am_lcp(x->e[i].s.tok, x->e[i].s.n, s.tok, n) >= n;
    if (!hit) {
        AM_CHECK(z, removed == 0, "remove of %s: %zu removed, nothing stored starts with it",
                 AM_S(s.tok, n), removed);
        return;
    }
    /* A removed page written before a page before it on its path (an
     * eviction writes leaves first) has a record whose chain no longer
     * reaches the root: a reopen counts it an orphan, as it does any
     * record whose parent is missing. */
    if (z->io)
        z->orphans_ok = true;
    for (size_t i = 0; i < n_e0; i++) {
        am_entry *e = &x->e[i];
        if (am_lcp(e->s.tok, e->s.n, s.tok, n) < n)
            continue;
        if (ghosts)
            add_ghost(z, x, e);
        e = &x->e[i]; /* (the array may have moved) */
        e->s.n = (uint32_t)cut;
        e->point = false;
    }
    for (size_t i = 0; i < x->n_e; i++) {
        am_entry *e = &x->e[i];
        if (e->s.n <= cut || e->s.n >= n || am_lcp(e->s.tok, e->s.n, s.tok, n) != e->s.n)
            continue;
        bool covered = false;
        for (size_t j = 0; j < x->n_e && !covered; j++) {
            const am_entry *g = &x->e[j];
            size_t lg = am_lcp(g->s.tok, g->s.n, s.tok, n);
            covered = j != i && g->must && lg >= e->s.n && lg < n && g->s.n > lg;
        }
        if (!exact) {
            e->must = false;
        } else if (covered) {
            e->durable = false; /* its tail is another sequence's page now */
            e->ticket = 0;
        } else {
            if (z->io)
                add_latent(z, x, e);
            e = &x->e[i];
            e->s.n = (uint32_t)cut;
            e->point = false;
        }
    }
}

/* ---- the disk tier ------------------------------------------------------------------------- */

static void op_flush(am *z)
{
    int rc = sb_store_flush(z->st);
    am_trace(z, "flush: %s", sb_strerror(rc));
    if (z->mode == AM_LOOSE)
        AM_CHECK(z, rc == SB_OK || rc == SB_ERR_NOSPC, "flush: %s", sb_strerror(rc));
    else
        AM_CHECK(z, rc == SB_OK, "flush: %s", sb_strerror(rc));
    if (!z->io)
        return;
    /* Every followed ticket: in EXACT durable now (nothing is denied there;
     * after a power cut, a damaged record met since may have been one of
     * its pages); in LOOSE as it says. */
    for (int i = 0; i < z->n_tk; i++) {
        am_ticket *k = &z->tk[i];
        rc = sb_store_is_durable(z->st, k->t);
        if (z->mode == AM_EXACT)
            AM_CHECK(z, rc == SB_OK || (rc == SB_ERR_NOT_DURABLE && am_ticket_may_fail(z, k)),
                     "ticket %" PRIu64 " after a good flush: %s", k->t, sb_strerror(rc));
        am_ticket_answer(z, k, rc, "is_durable after flush");
    }
    /* EXACT: what the index held before the flush is durable (stored with
     * tickets or not). */
    if (z->mode == AM_EXACT)
        for (int xi = 0; xi < z->n_ns; xi++)
            for (size_t i = 0; i < z->ns[xi].n_e; i++) {
                am_entry *e = &z->ns[xi].e[i];
                if (e->must)
                    e->durable = true;
            }
}

static void op_wait(am *z)
{
    if (!z->io) {
        int rc = sb_store_wait_durable(z->st, am_draw(z, 4), (uint32_t)am_draw(z, 3));
        AM_CHECK(z, rc == SB_ERR_NOT_DURABLE, "a RAM-only store's wait: %s", sb_strerror(rc));
        return;
    }
    if (!z->n_tk || am_draw(z, 8) == 0) {
        uint64_t t = am_draw(z, 2) ? 0 : z->max_ticket + 1 + am_draw(z, 100);
        int rc = sb_store_wait_durable(z->st, t, (uint32_t)am_draw(z, 3));
        AM_CHECK(z, rc == (t ? SB_ERR_RANGE : SB_ERR_NOT_DURABLE),
                 "wait on ticket %" PRIu64 " (highest handed out %" PRIu64 "): %s", t,
                 z->max_ticket, sb_strerror(rc));
        return;
    }
    am_ticket *k = &z->tk[am_draw(z, (uint64_t)z->n_tk)];
    uint32_t timeout;
    unsigned how = (unsigned)am_draw(z, 3);
    if (how == 0)
        timeout = 0;
    else if (how == 1 || z->mode != AM_EXACT)
        timeout = 1 + (uint32_t)am_draw(z, 30);
    else
        timeout = SB_WAIT_FOREVER;
    int rc = sb_store_wait_durable(z->st, k->t, timeout);
    am_trace(z, "wait ticket %" PRIu64 " (%u ms): %s", k->t, timeout, sb_strerror(rc));
    if (timeout == SB_WAIT_FOREVER)
        AM_CHECK(z, rc == SB_OK || (rc == SB_ERR_NOT_DURABLE && am_ticket_may_fail(z, k)),
                 "wait forever on ticket %" PRIu64 " where nothing is denied: %s", k->t,
                 sb_strerror(rc));
    am_ticket_answer(z, k, rc, "wait");
}

/* Close every handle and the store: a clean close (crash false) or a
 * power cut (crash true: what survives is drawn). */
static void shut(am *z, bool crash)
{
    am_release_all(z);
    for (int i = 0; i < z->n_ns; i++) {
        sb_ns_close(z->ns[i].h);
        z->ns[i].h = NULL;
    }
    if (!crash) {
        int rc = sb_store_close(z->st);
        am_trace(z, "close: %s", sb_strerror(rc));
        if (z->mode == AM_LOOSE)
            AM_CHECK(z, rc == SB_OK || rc == SB_ERR_NOSPC, "close: %s", sb_strerror(rc));
        else
            AM_CHECK(z, rc == SB_OK, "close: %s", sb_strerror(rc));
        z->st = NULL;
        return;
    }
    double keep = (double)am_draw(z, 101) / 100.0;
    double garble = (double)am_draw(z, 31) / 100.0;
    uint64_t seed = am_draw(z, 1u << 30);
    AM_CHECK(z, sb_io_mem_crash(z->io, seed, keep, garble) == 0, "sb_io_mem_crash");
    sb_stats s;
    am_stats(z, &s);
    uint64_t rd = am_disk_drops(z, &s);
    sb_store_crash(z->st);
    z->st = NULL;
    am_trace(z, "power cut (keep %.2f, garble %.2f), disk drops %" PRIu64 " (reclaimed %" PRIu64
             ", segments %" PRIu64 ", write errors %" PRIu64 ")", keep, garble, rd,
             s.disk_reclaimed_segments, s.disk_segments, s.disk_write_errors);
    /* What survives for sure: what a ticket said was durable, with nothing
     * reclaimed since (outside EXACT). */
    for (int xi = 0; xi < z->n_ns; xi++)
        for (size_t i = 0; i < z->ns[xi].n_e; i++) {
            am_entry *e = &z->ns[xi].e[i];
            e->must = e->must && e->durable && (z->mode == AM_EXACT || e->disk_since == rd);
        }
    z->crashed = true;
}

static void reopen(am *z, bool crash)
{
    sb_stats last;
    am_stats(z, &last);
    shut(z, crash);
    if (z->mode == AM_RAM) {
        for (int i = 0; i < z->n_ns; i++)
            z->ns[i].n_e = 0; /* a RAM-only store starts empty */
    } else if (am_draw(z, 3) == 0) {
        /* Another write mode (and durability) for the next life. */
        z->cfg.write_mode = (sb_write_mode)am_draw(z, z->mode == AM_EXACT ? 2 : 3);
        z->cfg.durability = (sb_durability)am_draw(z, 3);
    }
    z->base_drops = z->drops + 1;
    memset(&z->last, 0, sizeof z->last);
    am_open_store(z);
    bool write_only = z->cfg.write_mode == SB_WRITE_ONLY;
    for (int xi = 0; xi < z->n_ns; xi++)
        for (size_t i = 0; i < z->ns[xi].n_e; i++) {
            am_entry *e = &z->ns[xi].e[i];
            /* A clean close keeps everything in EXACT; in LOOSE it may
             * reclaim. A write-only store serves RAM only. */
            if ((!crash && z->mode == AM_LOOSE) || write_only)
                e->must = false;
            e->since = z->drops;
        }
    /* What removals left without cover in RAM may be found again. */
    for (int xi = 0; xi < z->n_ns; xi++) {
        am_ns *x = &z->ns[xi];
        for (size_t i = 0; i < x->n_lat && z->mode != AM_RAM; i++) {
            am_entry *g = am_add(z, x, x->lat[i].s.tok, x->lat[i].s.n, x->lat[i].point);
            g->must = false;
            x->loose = true;
        }
        x->n_lat = 0;
    }
    am_stats(z, &z->last);
    am_trace(z, "reopened (write mode %d, durability %d): %" PRIu64 " records, %" PRIu64
             " pages, %" PRIu64 " points, %" PRIu64 " orphans, %" PRIu64 " torn",
             (int)z->cfg.write_mode, (int)z->cfg.durability, z->last.recovered_records,
             z->last.recovered_pages, z->last.recovered_points, z->last.recovery_orphans,
             z->last.recovery_torn);
    if (z->io && !z->crashed && z->mode == AM_EXACT)
        AM_CHECK(z, (!z->last.recovery_orphans || z->orphans_ok) && !z->last.recovery_torn &&
                        !z->last.recovery_bad_summaries,
                 "a clean reopen found %" PRIu64 " orphans, %" PRIu64 " torn segments, %" PRIu64
                 " bad summaries", z->last.recovery_orphans, z->last.recovery_torn,
                 z->last.recovery_bad_summaries);
    for (int xi = 0; xi < z->n_ns; xi++)
        am_verify_ns(z, xi, 48);
    (void)last;
}

static void op_reopen(am *z)
{
    reopen(z, false);
}

static void op_crash(am *z)
{
    if (z->io)
        reopen(z, true);
}

static void op_foreground(am *z)
{
    if (z->fg > 0 && am_draw(z, 2)) {
        AM_CHECK(z, sb_store_foreground(z->st, 0) == SB_OK, "foreground end");
        z->fg--;
    } else if (z->fg == 0 && am_draw(z, 3) == 0) {
        int rc = sb_store_foreground(z->st, 0);
        AM_CHECK(z, rc == SB_ERR_INVAL, "foreground end without a start: %s", sb_strerror(rc));
    } else if (z->fg < 3) {
        AM_CHECK(z, sb_store_foreground(z->st, 1) == SB_OK, "foreground start");
        z->fg++;
    }
}

/* ---- pages ---------------------------------------------------------------------------------- */

static void op_writable(am *z)
{
    if (!z->n_page)
        return;
    am_page *hp = &z->page[am_draw(z, (uint64_t)z->n_page)];
    am_ns *x = &z->ns[hp->xi];
    const am_model *md = &z->model[x->model];
    uint32_t have = sb_page_tokens(hp->p);
    unsigned how = (unsigned)am_draw(z, 8);
    if (how == 0) {
        sb_page *p = hp->p;
        int rc = sb_page_writable(x->h, &p, md->pt + 1);
        AM_CHECK(z, rc == SB_ERR_INVAL && p == hp->p, "n_keep past page_tokens: %s",
                 sb_strerror(rc));
        return;
    }
    if (how == 1 && have && have < md->pt) {
        sb_page *p = hp->p;
        int rc = sb_page_writable(x->h, &p, have + 1);
        AM_CHECK(z, rc == SB_ERR_INVAL && p == hp->p, "n_keep past a committed page's tokens: %s",
                 sb_strerror(rc));
        return;
    }
    if (how == 2 && z->n_ns > 1) {
        int yi = (hp->xi + 1) % z->n_ns;
        sb_page *p = hp->p;
        int rc = sb_page_writable(z->ns[yi].h, &p, 0);
        AM_CHECK(z, rc == SB_ERR_FOREIGN_PAGE && p == hp->p, "a page of another namespace: %s",
                 sb_strerror(rc));
        return;
    }
    uint32_t keep = (uint32_t)am_draw(z, (uint64_t)hp->kv + 1);
    sb_page *p = hp->p;
    sb_stats s0, s1;
    am_stats(z, &s0);
    int rc = sb_page_writable(x->h, &p, keep);
    am_stats(z, &s1);
    am_trace(z, "writable (region %u, %u known, %u committed) keep %u: %s%s", hp->region, hp->kv,
             have, keep, sb_strerror(rc), p != hp->p ? ", copied" : "");
    if (rc != SB_OK) {
        AM_CHECK(z, (rc == SB_ERR_BUDGET || rc == SB_ERR_NOMEM) && p == hp->p,
                 "sb_page_writable: %s", sb_strerror(rc));
        return;
    }
    AM_CHECK(z, s1.cow_copies == s0.cow_copies + (p != hp->p),
             "cow_copies moved %" PRIu64 " for %s", s1.cow_copies - s0.cow_copies,
             p != hp->p ? "a copy" : "no copy");
    if (p != hp->p) {
        AM_CHECK(z, have > 0 || p != hp->p, "a private page was copied");
        hp->p = p;
        hp->kv = keep;
        hp->pre.n = hp->region * md->pt + keep;
    }
    AM_CHECK(z, sb_page_tokens(p) == 0 && am_page_ok(z, x, p, hp->pre.tok, hp->region, hp->kv),
             "a writable page does not hold the kept slices");
}

static void op_unref(am *z)
{
    if (z->n_page)
        am_drop_page(z, (int)am_draw(z, (uint64_t)z->n_page));
}

static void op_prefault(am *z)
{
    int xi = (int)am_draw(z, (uint64_t)z->n_ns);
    size_t ready = 12345;
    bool armed = am_arm(z);
    int rc = sb_ns_prefault(z->ns[xi].h, am_draw(z, 12), &ready);
    am_disarm(z);
    am_trace(z, "prefault ns %d: %s, %zu ready", xi, sb_strerror(rc), ready);
    AM_CHECK(z, rc == SB_OK || (armed && rc == SB_ERR_NOMEM), "sb_ns_prefault: %s",
             sb_strerror(rc));
}

static void op_dump(am *z)
{
    FILE *f = fopen("/dev/null", "w");
    AM_CHECK(z, f, "open /dev/null");
    int xi = (int)am_draw(z, (uint64_t)z->n_ns);
    bool armed = am_arm(z);
    int rc = sb_ns_dump(z->ns[xi].h, f);
    am_disarm(z);
    fclose(f);
    AM_CHECK(z, rc == SB_OK || (armed && rc == SB_ERR_NOMEM), "sb_ns_dump: %s", sb_strerror(rc));
}

static void op_churn(am *z)
{
    int xi = (int)am_draw(z, (uint64_t)z->n_ns);
    am_ns *x = &z->ns[xi];
    if (am_draw(z, 2)) {
        sb_ns *h = x->h;
        am_open_ns(z, xi); /* a second handle */
        sb_ns_close(x->h);
        x->h = h;
    } else {
        sb_ns_close(x->h);
        x->h = NULL;
        am_open_ns(z, xi);
    }
}

static void op_verify(am *z)
{
    am_verify_ns(z, (int)am_draw(z, (uint64_t)z->n_ns), 8);
}

/* ---- invalid arguments ----------------------------------------------------------------------- */

static void op_invalid(am *z)
{
    int xi = (int)am_draw(z, (uint64_t)z->n_ns);
    am_ns *x = &z->ns[xi];
    const am_model *md = &z->model[x->model];
    uint32_t tok[4] = { 0, 1, 7, 1000 };
    const void *src[AM_MAX_TENSORS];
    for (uint32_t t = 0; t < md->n_tensors; t++)
        src[t] = z->buf[t];
    uint8_t pbuf[AM_MAX_POINT] = { 0 };
    sb_stats s0, s1;
    am_stats(z, &s0);
    size_t stored = 12345;
    sb_write_outcome oc;
    memset(&oc, 0xAB, sizeof oc);
    int rc = SB_OK, want = SB_OK;
    unsigned c = (unsigned)am_draw(z, 26);
    sb_match *m = (sb_match *)&m;
    sb_ns *h2 = (sb_ns *)&h2;
    sb_layout lay;
    am_layout(z, x, &lay);
    uint32_t bpt0[AM_MAX_TENSORS];
    switch (c) {
    case 0: rc = sb_ns_put_ex(NULL, tok, 4, src, NULL, &stored, &oc); want = SB_ERR_INVAL; break;
    case 1: rc = sb_ns_put_ex(x->h, NULL, 4, src, NULL, &stored, &oc); want = SB_ERR_INVAL; break;
    case 2: rc = sb_ns_put_ex(x->h, tok, 0, src, NULL, &stored, &oc); want = SB_ERR_NO_TOKENS; break;
    case 3: rc = sb_ns_put_ex(x->h, tok, 4, NULL, NULL, &stored, &oc); want = SB_ERR_INVAL; break;
    case 4: {
        const void *bad[AM_MAX_TENSORS];
        memcpy(bad, src, sizeof bad);
        bad[md->n_tensors - 1] = NULL;
        rc = sb_ns_put_ex(x->h, tok, 4, bad, NULL, &stored, &oc);
        want = SB_ERR_INVAL;
        break;
    }
    case 5:
        if (md->point_bytes)
            return;
        rc = sb_ns_put_ex(x->h, tok, 4, src, pbuf, &stored, &oc);
        want = SB_ERR_INVAL;
        break;
    case 6:
        rc = sb_ns_match(x->h, NULL, 3, &m);
        want = SB_ERR_INVAL;
        AM_CHECK(z, !m, "a failed match left a handle");
        break;
    case 7:
        rc = sb_ns_match(x->h, tok, 0, &m);
        want = SB_ERR_NO_TOKENS;
        AM_CHECK(z, !m, "a failed match left a handle");
        break;
    case 8: rc = sb_ns_match(x->h, tok, 3, NULL); want = SB_ERR_INVAL; break;
    case 9: {
        uint64_t id;
        rc = sb_ns_pin(x->h, tok, 0, 0, &id, &stored);
        want = SB_ERR_NO_TOKENS;
        break;
    }
    case 10: rc = sb_ns_pin(x->h, tok, 2, 0, NULL, &stored); want = SB_ERR_INVAL; break;
    case 11: rc = sb_ns_unpin(NULL, 1); want = SB_ERR_INVAL; break;
    case 12: /* layouts the manual refuses */
    case 13: {
        unsigned k = (unsigned)am_draw(z, 9);
        memcpy(bpt0, md->bpt, sizeof bpt0);
        lay.bytes_per_token = bpt0;
        want = SB_ERR_LAYOUT;
        if (k == 0)
            lay.model_id_bytes = 0;
        else if (k == 1)
            lay.n_tensors = 0;
        else if (k == 2)
            bpt0[0] = 0;
        else if (k == 3)
            lay.flags |= 0x80u;
        else if (k == 4)
            lay.flags = SB_LAYOUT_POINT_REQUIRED, lay.point_bytes = 0;
        else if (k == 5)
            lay.flags = SB_LAYOUT_ELEM16, bpt0[0] = 3;
        else if (k == 6)
            lay.page_tokens = 0, want = SB_ERR_PAGE_SIZE;
        else if (k == 7)
            lay.page_tokens = SB_PAGE_TOKENS_MAX + 1, want = SB_ERR_PAGE_SIZE;
        else
            lay.page_tokens = md->pt == 1 ? 2 : md->pt - 1, want = SB_ERR_LAYOUT_MISMATCH;
        rc = sb_ns_open(z->st, &lay, z->scope[x->scope], z->scope_bytes[x->scope], &h2);
        AM_CHECK(z, !h2, "a failed sb_ns_open left a handle");
        break;
    }
    case 14: {
        char big[SB_SCOPE_MAX + 1];
        memset(big, 's', sizeof big);
        rc = sb_ns_open(z->st, &lay, big, sizeof big, &h2);
        want = SB_ERR_INVAL;
        AM_CHECK(z, !h2, "a failed sb_ns_open left a handle");
        break;
    }
    case 15:
        rc = sb_ns_open(z->st, &lay, NULL, 3, &h2);
        want = SB_ERR_INVAL;
        break;
    case 16: rc = sb_ns_commit(x->h, tok, 2, NULL, NULL); want = SB_ERR_INVAL; break;
    case 17: rc = sb_store_wait_durable(NULL, 1, 0); want = SB_ERR_INVAL; break;
    case 18: rc = sb_store_flush(NULL); want = SB_ERR_INVAL; break;
    case 19: rc = sb_store_stats(NULL, &s1); want = SB_ERR_INVAL; break;
    case 20: rc = sb_store_check(NULL); want = SB_ERR_INVAL; break;
    case 21: rc = sb_ns_get_info(NULL, NULL); want = SB_ERR_INVAL; break;
    case 22: rc = sb_ns_prefault(NULL, 1, NULL); want = SB_ERR_INVAL; break;
    case 23: {
        size_t added = 99;
        rc = sb_ns_fetch_shared(x->h, tok, 4, &added);
        want = SB_ERR_UNSUPPORTED; /* no shared tier here */
        AM_CHECK(z, added == 0, "fetch_shared without a tier added %zu", added);
        AM_CHECK(z, !sb_store_has_shared(z->st), "a shared tier nobody configured");
        break;
    }
    case 24:
        AM_CHECK(z, !strcmp(sb_strerror(-999), "unknown error") &&
                        !strcmp(sb_miss_name(SB_MISS__COUNT), "unknown") &&
                        !strcmp(sb_deny_name(SB_DENY__COUNT), "unknown") &&
                        !strcmp(sb_miss_name(SB_MISS_NO_POINT), "no_point") &&
                        !strcmp(sb_deny_name(SB_DENY_SHORT), "short") &&
                        sb_version() == SB_VERSION_NUMBER,
                 "names of codes out of range, or the version");
        for (int e = SB_OK; e >= SB_ERR_NOT_DURABLE; e--)
            AM_CHECK(z, sb_strerror(e) && strcmp(sb_strerror(e), "unknown error"),
                     "code %d has no name", e);
        return;
    default:
        rc = sb_match_get_info(NULL, NULL);
        want = SB_ERR_INVAL;
        break;
    }
    am_trace(z, "invalid case %u: %s", c, sb_strerror(rc));
    AM_CHECK(z, rc == want, "invalid call %u: %s, expected %s", c, sb_strerror(rc),
             sb_strerror(want));
    if (c <= 5)
        AM_CHECK(z, stored == 0 && outcome_zero(&oc),
                 "a refused put stored %zu or left an outcome", stored);
    am_stats(z, &s1);
    AM_CHECK(z, s1.puts == s0.puts && s1.commits == s0.commits && s1.lookups == s0.lookups &&
                    s1.pins == s0.pins && s1.namespaces == s0.namespaces,
             "a refused call (%u) changed the store", c);
}

/* ---- the step ------------------------------------------------------------------------------- */

enum {
    OP_PUT, OP_COMMIT, OP_MATCH, OP_HOLD, OP_RELEASE, OP_PIN, OP_UNPIN, OP_CLOCK, OP_FAULT,
    OP_PREFAULT, OP_DUMP, OP_FLUSH, OP_WAIT, OP_REOPEN, OP_CRASH, OP_FOREGROUND, OP_INVALID,
    OP_WRITABLE, OP_UNREF, OP_CHURN, OP_VERIFY, OP_REMOVE, OP__COUNT
};

static const char *const op_names[OP__COUNT] = {
    "put", "commit", "match", "hold", "release", "pin", "unpin", "clock", "fault",
    "prefault", "dump", "flush", "wait", "reopen", "crash", "foreground", "invalid",
    "writable", "unref", "churn", "verify", "remove",
};

void am_step(am *z)
{
    unsigned w[OP__COUNT] = {
        [OP_PUT] = 20, [OP_COMMIT] = 10, [OP_MATCH] = 16, [OP_HOLD] = 3, [OP_RELEASE] = 3,
        [OP_PIN] = 3, [OP_UNPIN] = 2, [OP_CLOCK] = 3, [OP_FAULT] = z->mode == AM_RAM ? 4 : 0,
        [OP_PREFAULT] = 1, [OP_DUMP] = 1, [OP_FLUSH] = z->io ? 3 : 1, [OP_WAIT] = z->io ? 5 : 1,
        [OP_REOPEN] = 1, [OP_CRASH] = z->io ? 1 : 0, [OP_FOREGROUND] = 1, [OP_INVALID] = 3,
        [OP_WRITABLE] = 3, [OP_UNREF] = 3, [OP_CHURN] = 1, [OP_VERIFY] = 2, [OP_REMOVE] = 3,
    };
    unsigned op = am_pick(z, w, OP__COUNT);
    z->op_no++;
    z->op_name = op_names[op];
    switch (op) {
    case OP_PUT: op_put(z); break;
    case OP_COMMIT: op_commit(z); break;
    case OP_MATCH: op_match(z, false); break;
    case OP_HOLD: op_match(z, true); break;
    case OP_RELEASE: op_release(z); break;
    case OP_PIN: op_pin(z); break;
    case OP_UNPIN: op_unpin(z); break;
    case OP_CLOCK: op_clock(z); break;
    case OP_FAULT: z->fault = true; break;
    case OP_PREFAULT: op_prefault(z); break;
    case OP_DUMP: op_dump(z); break;
    case OP_FLUSH: op_flush(z); break;
    case OP_WAIT: op_wait(z); break;
    case OP_REOPEN: op_reopen(z); break;
    case OP_CRASH: op_crash(z); break;
    case OP_FOREGROUND: op_foreground(z); break;
    case OP_INVALID: op_invalid(z); break;
    case OP_WRITABLE: op_writable(z); break;
    case OP_UNREF: op_unref(z); break;
    case OP_CHURN: op_churn(z); break;
    case OP_REMOVE: op_remove(z); break;
    default: op_verify(z); break;
    }
    am_after_op(z);
}

void am_finish(am *z)
{
    z->op_name = "finish";
    am_release_all(z);
    am_after_op(z);
    if (z->io && z->mode == AM_EXACT) {
        reopen(z, false); /* everything comes back after a clean close */
        am_release_all(z);
    }
    for (int i = 0; i < z->n_ns; i++) {
        sb_ns_close(z->ns[i].h);
        z->ns[i].h = NULL;
    }
    int rc = sb_store_close(z->st);
    AM_CHECK(z, rc == SB_OK || (z->mode == AM_LOOSE && rc == SB_ERR_NOSPC), "close: %s",
             sb_strerror(rc));
    z->st = NULL;
    am_free(z);
}
