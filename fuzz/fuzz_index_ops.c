/* fuzz_index_ops.c -- the index fuzzer's operations, one per kind of the
 * input format (fuzz_index.c): each calls the store, checks the result
 * against the model at once, and updates the model and what it holds. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_index.h"

/* ---- operations ----------------------------------------------------------- */

void fz_op_put(fz *z, uint8_t fl)
{
    int xi = fz_rd_ns(z);
    fz_ns *x = &z->ns[xi];
    fz_seq s;
    fz_rd_seq(z, x, &s);
    size_t n = s.n;
    if (z->trace)
        fprintf(stderr, "  put ns %d %s%s\n", xi, FZ_S(s.tok, n), fl & 1 ? " +point" : "");
    fz_fill_buf(z, x, s.tok, n);
    const void *src[FZ_MAX_TENSORS];
    for (uint32_t t = 0; t < x->n_tensors; t++)
        src[t] = z->buf[t];
    uint8_t pbuf[FZ_MAX_POINT] = { 0 };
    size_t stored = 777;
    if ((fl & 4) && !x->point_bytes && n <= z->cfg.max_seq_tokens) {
        int rc = sb_ns_put(x->h, s.tok, n, src, pbuf, &stored);
        FZ_CHECK(z, rc == SB_ERR_INVAL && stored == 0,
                 "put with a point on a layout without points: %s, %zu stored",
                 sb_strerror(rc), stored);
        return;
    }
    const void *point = NULL;
    if ((fl & 1) && x->point_bytes) {
        uint64_t h[FZ_MAX_SEQ + 1];
        fz_chain(x, s.tok, n, h);
        fz_point(x, h, n, pbuf);
        point = pbuf;
    }
    bool quiet = fz_nothing_held(z);
    sb_stats s0, s1;
    fz_stats(z, &s0);
    bool armed = fz_fault_arm(z);
    int rc = sb_ns_put(x->h, s.tok, n, src, point, &stored);
    fz_fault_disarm(z);
    fz_stats(z, &s1);
    FZ_CHECK(z, s1.puts == s0.puts + (rc == SB_OK || (rc == SB_ERR_BUDGET && stored > 0)),
             "put: puts counter moved %" PRIu64 " (%s, %zu stored)", s1.puts - s0.puts,
             sb_strerror(rc), stored);
    FZ_CHECK(z, rc != SB_ERR_BUDGET || s1.budget_denials > s0.budget_denials,
             "put: SB_ERR_BUDGET without a budget denial counted");
    if (n > z->cfg.max_seq_tokens) {
        FZ_CHECK(z, rc == SB_ERR_TOO_MANY_TOKENS && stored == 0,
                 "put of %zu tokens over the limit: %s", n, sb_strerror(rc));
        return;
    }
    if (armed && rc == SB_ERR_NOMEM) {
        /* "nothing stored, nothing changed but pages evicted to make room" */
        FZ_CHECK(z, stored == 0, "put of %s: SB_ERR_NOMEM with %zu stored", FZ_S(s.tok, n),
                 stored);
        return;
    }
    if (rc == SB_OK) {
        FZ_CHECK(z, stored == n, "put of %s: OK with %zu stored", FZ_S(s.tok, n), stored);
        fz_model_add(z, x, s.tok, n, point != NULL);
    } else if (rc == SB_ERR_BUDGET) {
        /* Every token may be restorable when only the point found no room
         * ("the point, if any, was not stored"). */
        FZ_CHECK(z, stored < n || (point && stored == n),
                 "put of %s: SB_ERR_BUDGET with %zu of %zu tokens stored", FZ_S(s.tok, n),
                 stored, n);
        FZ_CHECK(z, !quiet || !fz_fits(z, x, fz_regions(x, n), point ? 1 : 0),
                 "put of %s: SB_ERR_BUDGET with nothing held, and it fits an empty store",
                 FZ_S(s.tok, n));
        if (stored)
            fz_model_add(z, x, s.tok, stored, false);
    } else {
        fz_fail(z, "put of %s: %s", FZ_S(s.tok, n), sb_strerror(rc));
    }
    if ((fl & 2) && stored) {
        /* "restorable from the index when the call returns" */
        sb_match_info info;
        fz_match_len(z, xi, &s, stored, &info);
        FZ_CHECK(z, info.n_matched_tokens == stored,
                 "put of %s stored %zu, a match right after finds %zu", FZ_S(s.tok, n), stored,
                 info.n_matched_tokens);
        if (x->required && point && rc == SB_OK)
            FZ_CHECK(z, info.n_tokens == n && info.has_point,
                     "put of %s with a point: a match right after restores %zu", FZ_S(s.tok, n),
                     info.n_tokens);
        if (!x->required)
            FZ_CHECK(z, info.n_tokens == stored, "put of %s: restorable %zu of %zu stored",
                     FZ_S(s.tok, n), info.n_tokens, stored);
        if (point && rc == SB_OK)
            FZ_CHECK(z, info.has_point, "put of %s with a point: match right after has none",
                     FZ_S(s.tok, n));
    }
}

static void unref_all(sb_page **pages, size_t n)
{
    for (size_t r = 0; r < n; r++)
        sb_page_unref(pages[r]);
}

void fz_op_commit(fz *z, uint8_t fl)
{
    int xi = fz_rd_ns(z);
    fz_ns *x = &z->ns[xi];
    fz_seq s;
    fz_rd_seq(z, x, &s);
    uint8_t xb = fz_rd(z);
    size_t n = s.n, pt = x->pt, n_reg = fz_regions(x, n);
    bool want_point = (fl & 1) && x->point_bytes;
    bool reuse = fl & 2, keep = fl & 4, late_release = fl & 8;
    bool poison = (xb & 7) == 7;
    if (z->trace)
        fprintf(stderr, "  commit ns %d %s%s%s%s\n", xi, FZ_S(s.tok, n),
                want_point ? " +point" : "", reuse ? " reuse" : " fresh",
                poison ? " poison" : "");
    sb_page *pages[FZ_MAX_SEQ] = { 0 };
    if (n > z->cfg.max_seq_tokens) {
        int rc = sb_ns_commit(x->h, s.tok, n, pages, NULL);
        FZ_CHECK(z, rc == SB_ERR_TOO_MANY_TOKENS, "commit of %zu tokens over the limit: %s", n,
                 sb_strerror(rc));
        return;
    }
    bool quiet = fz_nothing_held(z);
    /* Worst case held at once: every region, a copy-on-write source, the
     * match's point and the new point. */
    bool fit = fz_fits(z, x, n_reg + 1, 2);
    bool fresh[FZ_MAX_SEQ] = { 0 };
    size_t have = 0;
    sb_match *m = NULL;
    uint8_t pbuf[FZ_MAX_POINT];
    int rc;

    if (reuse) {
        sb_match_info info;
        m = fz_match_checked(z, xi, &s, n, &info);
        size_t L = info.n_tokens, full = L / pt; /* 0 when the match failed */
        if (full) {
            rc = sb_match_pages(m, 0, full, pages);
            FZ_CHECK(z, rc == SB_OK, "sb_match_pages(0, %zu): %s", full, sb_strerror(rc));
            have = full;
        }
        if (L % pt) {
            sb_page *q = NULL;
            rc = sb_match_pages(m, full, 1, &q);
            FZ_CHECK(z, rc == SB_OK && q, "sb_match_pages(%zu, 1): %s", full, sb_strerror(rc));
            uint32_t keep_n = (uint32_t)(L % pt), k = fz_region_tokens(x, n, full);
            uint32_t qt = sb_page_tokens(q);
            FZ_CHECK(z, qt >= keep_n, "matched tail page holds %u tokens, L %% pt is %u", qt,
                     keep_n);
            if (!(L == n && qt == k)) {
                /* The runtime appends to a matched partial page: copy on write. */
                sb_page *old = q;
                bool armed = fz_fault_arm(z);
                rc = sb_page_writable(x->h, &q, keep_n);
                fz_fault_disarm(z);
                if (rc == SB_ERR_BUDGET || (armed && rc == SB_ERR_NOMEM)) {
                    FZ_CHECK(z, rc == SB_ERR_NOMEM || !quiet || !fit,
                             "sb_page_writable: SB_ERR_BUDGET with nothing else held");
                    FZ_CHECK(z, q == old, "failed sb_page_writable replaced the page");
                    sb_page_unref(q);
                    goto abandon;
                }
                FZ_CHECK(z, rc == SB_OK, "sb_page_writable(%u): %s", keep_n, sb_strerror(rc));
                FZ_CHECK(z, q != old && sb_page_tokens(q) == 0,
                         "sb_page_writable of a committed page gave no fresh copy");
                FZ_CHECK(z, fz_page_ok(x, q, s.tok, full, keep_n),
                         "sb_page_writable lost the first %u slices", keep_n);
                fz_fill_page(x, q, s.tok, full, keep_n, k);
                fresh[full] = true;
            }
            pages[full] = q;
            have = full + 1;
        }
        if (!late_release) {
            sb_match_release(m);
            m = NULL;
        }
    }
    for (size_t r = have; r < n_reg; r++) {
        bool armed = fz_fault_arm(z);
        rc = sb_ns_page_alloc(x->h, &pages[r]);
        fz_fault_disarm(z);
        if (rc == SB_ERR_BUDGET || (armed && rc == SB_ERR_NOMEM)) {
            FZ_CHECK(z, !pages[r], "failed sb_ns_page_alloc left a page");
            FZ_CHECK(z, rc == SB_ERR_NOMEM || !quiet || !fit, "sb_ns_page_alloc: "
                     "SB_ERR_BUDGET with %zu pages held by this commit only", r);
            have = r;
            goto abandon;
        }
        FZ_CHECK(z, rc == SB_OK && pages[r], "sb_ns_page_alloc: %s", sb_strerror(rc));
        FZ_CHECK(z, ((uintptr_t)sb_page_data(pages[r]) & 4095) == 0,
                 "page data not 4096-aligned");
        FZ_CHECK(z, sb_page_tokens(pages[r]) == 0, "fresh page has committed tokens");
        fz_fill_page(x, pages[r], s.tok, r, 0, fz_region_tokens(x, n, r));
        fresh[r] = true;
        have = r + 1;
    }
    if (want_point) {
        uint64_t h[FZ_MAX_SEQ + 1];
        fz_chain(x, s.tok, n, h);
        fz_point(x, h, n, pbuf);
    }
    sb_page *before[FZ_MAX_SEQ];
    memcpy(before, pages, n_reg * sizeof *pages);

    /* A wrong page in region pr must make the commit fail and change nothing. */
    int expect = SB_OK;
    size_t pr = 0;
    sb_page *wrong = NULL;
    if ((xb & 7) == 6 && n_reg > 1) {
        /* The same page for two regions. */
        pr = (size_t)(xb >> 3) % n_reg;
        wrong = pages[(pr + 1) % n_reg];
        expect = SB_ERR_INVAL;
    } else if (poison && z->n_page) {
        const fz_page *hp = &z->page[(xb >> 3) % z->n_page];
        pr = (size_t)(xb >> 3) % n_reg;
        uint32_t k = fz_region_tokens(x, n, pr);
        size_t upto = pr * pt + k;
        size_t known = hp->pre.n < upto ? hp->pre.n : upto;
        if (hp->p == pages[pr]) {
            expect = SB_OK;
        } else if (hp->xi != xi) {
            expect = SB_ERR_FOREIGN_PAGE;
        } else if (hp->committed &&
                   (hp->region != pr || fz_lcp(hp->pre.tok, known, s.tok, known) < known)) {
            /* Certainly not this region's page: another region, or tokens
             * it is known to hold differ. (A page of this region with the
             * same known tokens may be the index's own: not a wrong page.) */
            expect = SB_ERR_PAGE_STATE;
        }
        if (expect != SB_OK)
            wrong = hp->p;
    }
    if (wrong)
        pages[pr] = wrong;

    sb_stats s0, s1;
    fz_stats(z, &s0);
    bool armed = fz_fault_arm(z);
    rc = sb_ns_commit(x->h, s.tok, n, pages, want_point ? pbuf : NULL);
    fz_fault_disarm(z);
    fz_stats(z, &s1);
    FZ_CHECK(z, s1.commits == s0.commits + (rc == SB_OK), "commit (%s): commits counter moved "
             "%" PRIu64, sb_strerror(rc), s1.commits - s0.commits);
    if (expect != SB_OK || (armed && rc == SB_ERR_NOMEM)) {
        /* The page checks come first; then the point's allocation; then
         * index work, which allocates before it validates. */
        bool ok = expect == SB_ERR_FOREIGN_PAGE
                      ? rc == SB_ERR_FOREIGN_PAGE
                      : rc == SB_ERR_PAGE_STATE || rc == SB_ERR_INVAL ||
                            (want_point && rc == SB_ERR_BUDGET) ||
                            (armed && rc == SB_ERR_NOMEM);
        FZ_CHECK(z, ok, "commit of %s with a wrong page in region %zu: %s, want %s",
                 FZ_S(s.tok, n), pr, sb_strerror(rc), sb_strerror(expect));
        for (size_t r = 0; r < n_reg; r++)
            FZ_CHECK(z, pages[r] == (wrong && r == pr ? wrong : before[r]),
                     "failed commit replaced the page of region %zu", r);
        pages[pr] = before[pr];
        for (size_t r = 0; r < n_reg; r++)
            if (fresh[r])
                FZ_CHECK(z, sb_page_tokens(pages[r]) == 0,
                         "failed commit committed the page of region %zu", r);
        goto abandon;
    }
    if (rc == SB_ERR_BUDGET && want_point) {
        FZ_CHECK(z, !quiet || !fit, "commit: SB_ERR_BUDGET for the point with nothing else "
                 "held");
        for (size_t r = 0; r < n_reg; r++)
            FZ_CHECK(z, pages[r] == before[r], "failed commit replaced region %zu", r);
        goto abandon;
    }
    FZ_CHECK(z, rc == SB_OK, "commit of %s: %s", FZ_S(s.tok, n), sb_strerror(rc));
    fz_model_add(z, x, s.tok, n, want_point);
    for (size_t r = 0; r < n_reg; r++) {
        uint32_t k = fz_region_tokens(x, n, r), cur = sb_page_tokens(pages[r]);
        if (fresh[r] && pages[r] == before[r])
            FZ_CHECK(z, cur == k, "committed page of region %zu holds %u tokens, not %u", r,
                     cur, k);
        else
            FZ_CHECK(z, cur >= k, "page of region %zu after commit holds %u < %u tokens", r,
                     cur, k);
        FZ_CHECK(z, fz_page_ok(x, pages[r], s.tok, r, k),
                 "page of region %zu after commit of %s has wrong bytes%s", r, FZ_S(s.tok, n),
                 pages[r] != before[r] ? " (deduplicated)" : "");
    }
    if (xb & 8) {
        sb_match_info info;
        fz_match_len(z, xi, &s, n, &info);
        FZ_CHECK(z, info.n_matched_tokens == n, "commit of %s: a match right after finds %zu",
                 FZ_S(s.tok, n), info.n_matched_tokens);
        if (!x->required || want_point)
            FZ_CHECK(z, info.n_tokens == n, "commit of %s: a match right after restores %zu",
                     FZ_S(s.tok, n), info.n_tokens);
    }
    if (keep) {
        for (size_t r = 0; r < n_reg; r++)
            fz_hold_page(z, pages[r], xi, true, (uint32_t)r, fz_region_tokens(x, n, r), s.tok);
        have = 0;
    } else {
        have = n_reg;
    }
abandon:
    unref_all(pages, have);
    sb_match_release(m);
}

void fz_op_match(fz *z, uint8_t fl)
{
    int xi = fz_rd_ns(z);
    fz_seq s;
    fz_rd_seq(z, &z->ns[xi], &s);
    if (z->trace)
        fprintf(stderr, "  match ns %d %s\n", xi, FZ_S(s.tok, s.n));
    sb_lookup lk = { .tokens = s.tok, .n_tokens = s.n };
    int lrc = (fl & 2) ? sb_ns_lookup(z->ns[xi].h, &lk, 1) : SB_ERR_UNSUPPORTED;
    sb_match_info info;
    sb_match *m = fz_match_checked(z, xi, &s, s.n, &info);
    if (lrc != SB_ERR_UNSUPPORTED)
        FZ_CHECK(z, m ? lrc == SB_OK && !memcmp(&lk.info, &info, sizeof info)
                      : s.n <= z->cfg.max_seq_tokens || lrc == SB_ERR_TOO_MANY_TOKENS,
                 "lookup before the match: %s, L %zu matched %zu point %d miss %d; the "
                 "match: L %zu matched %zu point %d miss %d", sb_strerror(lrc),
                 lk.info.n_tokens, lk.info.n_matched_tokens, lk.info.has_point,
                 (int)lk.info.miss, info.n_tokens, info.n_matched_tokens, info.has_point,
                 (int)info.miss);
    if (!m)
        return;
    if (fl & 1)
        sb_match_release(m);
    else
        fz_hold_match(z, m, xi, &s, s.n, &info);
}

void fz_op_restore(fz *z, uint8_t fl)
{
    uint8_t i = fz_rd(z), k = fz_rd(z);
    if (!z->n_match)
        return;
    fz_match *fm = &z->match[i % z->n_match];
    const fz_ns *x = &z->ns[fm->xi];
    size_t n = k % (fm->L + 1);
    bool with_point = (fl & 1) && n == fm->L && fm->has_point;
    if (z->trace)
        fprintf(stderr, "  restore match %d: %zu of %zu\n", i % z->n_match, n, fm->L);
    fz_check_restore(z, x, fm->m, fm->req.tok, n, with_point, "restore");
    if (fl & 2) {
        sb_page *p = NULL;
        int rc = sb_match_pages(fm->m, fz_regions(x, fm->L), 1, &p);
        FZ_CHECK(z, rc == SB_ERR_RANGE && !p, "sb_match_pages past the end: %s",
                 sb_strerror(rc));
        sb_match_info info;
        FZ_CHECK(z, sb_match_get_info(fm->m, &info) == SB_OK && info.n_tokens == fm->L,
                 "held match changed its length");
    }
}

void fz_op_release(fz *z)
{
    uint8_t i = fz_rd(z);
    if (z->n_match)
        fz_drop_match(z, i % z->n_match);
}

void fz_op_pin(fz *z)
{
    int xi = fz_rd_ns(z);
    fz_ns *x = &z->ns[xi];
    fz_seq s;
    fz_rd_seq(z, x, &s);
    uint8_t t = fz_rd(z);
    uint64_t ttl = (t & 0x30) == 0x30 ? 0 : t % 16;
    size_t n = s.n;
    if (z->trace)
        fprintf(stderr, "  pin ns %d %s ttl %" PRIu64 " ms\n", xi, FZ_S(s.tok, n), ttl);
    uint64_t id = 0;
    size_t np = 777;
    if (n > z->cfg.max_seq_tokens) {
        int rc = sb_ns_pin(x->h, s.tok, n, ttl, &id, &np);
        FZ_CHECK(z, rc == SB_ERR_TOO_MANY_TOKENS && np == 0, "pin over the limit: %s",
                 sb_strerror(rc));
        return;
    }
    if (z->n_pin == FZ_PINS) {
        /* Forget expired records first, then unpin the oldest. */
        for (int i = 0; i < z->n_pin;) {
            if (!fz_pin_live(z, &z->pin[i])) {
                memmove(&z->pin[i], &z->pin[i + 1], (size_t)(z->n_pin - i - 1) * sizeof z->pin[0]);
                z->n_pin--;
            } else {
                i++;
            }
        }
        if (z->n_pin == FZ_PINS) {
            int rc = sb_ns_unpin(z->ns[z->pin[0].xi].h, z->pin[0].id);
            FZ_CHECK(z, rc == SB_OK, "unpin of a live pin: %s", sb_strerror(rc));
            memmove(&z->pin[0], &z->pin[1], (FZ_PINS - 1) * sizeof z->pin[0]);
            z->n_pin--;
        }
    }
    bool armed = fz_fault_arm(z);
    int rc = sb_ns_pin(x->h, s.tok, n, ttl, &id, &np);
    fz_fault_disarm(z);
    if (armed && rc == SB_ERR_NOMEM) {
        FZ_CHECK(z, np == 0, "failed pin pinned %zu tokens", np);
        return;
    }
    FZ_CHECK(z, rc == SB_OK, "pin of %s: %s", FZ_S(s.tok, n), sb_strerror(rc));
    FZ_CHECK(z, id > z->last_pin_id, "pin id %" PRIu64 " reused", id);
    z->last_pin_id = id;
    size_t bound = fz_model_lcp(x, s.tok, n);
    FZ_CHECK(z, np <= bound, "pin of %s pinned %zu tokens, the model allows %zu",
             FZ_S(s.tok, n), np, bound);
    FZ_CHECK(z, z->evicted || np == bound, "pin of %s pinned %zu tokens, the model says %zu",
             FZ_S(s.tok, n), np, bound);
    sb_match_info info;
    size_t L0 = fz_match_len(z, xi, &s, n, &info);
    FZ_CHECK(z, info.n_matched_tokens == np, "pin of %s pinned %zu, a match finds %zu",
             FZ_S(s.tok, n), np, info.n_matched_tokens);
    fz_pin *p = &z->pin[z->n_pin++];
    p->id = id;
    p->xi = xi;
    p->s = s;
    p->L0 = L0;
    p->expiry_ns = ttl ? z->now_ns + ttl * 1000000ull : 0;
}

void fz_op_unpin(fz *z, uint8_t fl)
{
    uint8_t b = fz_rd(z);
    int i = b % (z->n_pin + 1);
    if (i == z->n_pin) {
        int rc = sb_ns_unpin(z->ns[0].h, z->last_pin_id + 1000);
        FZ_CHECK(z, rc == SB_ERR_NOT_FOUND, "unpin of an id never issued: %s", sb_strerror(rc));
        return;
    }
    fz_pin *p = &z->pin[i];
    if ((fl & 1) && z->n_ns > 1) {
        int rc = sb_ns_unpin(z->ns[(p->xi + 1) % z->n_ns].h, p->id);
        FZ_CHECK(z, rc == SB_ERR_NOT_FOUND, "unpin through another namespace: %s",
                 sb_strerror(rc));
        return;
    }
    bool live = fz_pin_live(z, p);
    if (z->trace)
        fprintf(stderr, "  unpin %" PRIu64 " (%s)\n", p->id, live ? "live" : "expired");
    int rc = sb_ns_unpin(z->ns[p->xi].h, p->id);
    FZ_CHECK(z, rc == (live ? SB_OK : SB_ERR_NOT_FOUND), "unpin of a%s pin: %s",
             live ? " live" : "n expired", sb_strerror(rc));
    rc = sb_ns_unpin(z->ns[p->xi].h, p->id);
    FZ_CHECK(z, rc == SB_ERR_NOT_FOUND, "second unpin: %s", sb_strerror(rc));
    memmove(&z->pin[i], &z->pin[i + 1], (size_t)(z->n_pin - i - 1) * sizeof z->pin[0]);
    z->n_pin--;
}

void fz_op_alloc(fz *z)
{
    int xi = fz_rd_ns(z);
    fz_ns *x = &z->ns[xi];
    bool quiet = fz_nothing_held(z);
    sb_page *p = (sb_page *)&p;
    bool armed = fz_fault_arm(z);
    int rc = sb_ns_page_alloc(x->h, &p);
    fz_fault_disarm(z);
    if (rc == SB_ERR_BUDGET || (armed && rc == SB_ERR_NOMEM)) {
        FZ_CHECK(z, !p, "failed sb_ns_page_alloc left a page");
        FZ_CHECK(z, rc == SB_ERR_NOMEM || !quiet || !fz_fits(z, x, 1, 0),
                 "sb_ns_page_alloc: SB_ERR_BUDGET with nothing held");
        return;
    }
    FZ_CHECK(z, rc == SB_OK && p, "sb_ns_page_alloc: %s", sb_strerror(rc));
    FZ_CHECK(z, sb_page_tokens(p) == 0, "fresh page has committed tokens");
    /* Scribble over it: a fresh page is the caller's to write. */
    memset(sb_page_data(p), 0x5A, x->page_bytes);
    fz_hold_page(z, p, xi, false, 0, 0, NULL);
}

void fz_op_unref(fz *z)
{
    uint8_t i = fz_rd(z);
    if (z->n_page)
        fz_drop_page(z, i % z->n_page);
}

void fz_op_mpages(fz *z, uint8_t fl)
{
    uint8_t i = fz_rd(z);
    if (!z->n_match)
        return;
    fz_match *fm = &z->match[i % z->n_match];
    const fz_ns *x = &z->ns[fm->xi];
    size_t np = fz_regions(x, fm->L);
    sb_page *pages[FZ_MAX_SEQ];
    int rc = sb_match_pages(fm->m, 0, np, pages);
    FZ_CHECK(z, rc == SB_OK, "sb_match_pages(0, %zu): %s", np, sb_strerror(rc));
    for (size_t r = 0; r < np; r++) {
        uint32_t kv = fz_region_tokens(x, fm->L, r);
        fz_hold_page(z, pages[r], fm->xi, true, (uint32_t)r, kv, fm->req.tok);
        fz_check_held_page(z, &z->page[z->n_page - 1], "sb_match_pages");
    }
    if (fl & 1) {
        sb_page *p = NULL;
        rc = sb_match_pages(fm->m, np, 1, &p);
        FZ_CHECK(z, rc == SB_ERR_RANGE && !p, "sb_match_pages past the end: %s",
                 sb_strerror(rc));
    }
}

void fz_op_writable(fz *z, uint8_t fl)
{
    uint8_t i = fz_rd(z), k = fz_rd(z);
    if (!z->n_page)
        return;
    fz_page *hp = &z->page[i % z->n_page];
    fz_ns *x = &z->ns[hp->xi];
    uint32_t n_keep = k % (x->pt + 2);
    sb_page *p = hp->p;
    if (z->trace)
        fprintf(stderr, "  writable page %d keep %u\n", i % z->n_page, n_keep);
    if ((fl & 1) && z->n_ns > 1) {
        int rc = sb_page_writable(z->ns[(hp->xi + 1) % z->n_ns].h, &p, n_keep);
        FZ_CHECK(z, rc == SB_ERR_FOREIGN_PAGE && p == hp->p,
                 "sb_page_writable through another namespace: %s", sb_strerror(rc));
        return;
    }
    uint32_t cur = sb_page_tokens(p);
    sb_stats s0, s1;
    fz_stats(z, &s0);
    bool armed = fz_fault_arm(z);
    int rc = sb_page_writable(x->h, &p, n_keep);
    fz_fault_disarm(z);
    fz_stats(z, &s1);
    FZ_CHECK(z, s1.cow_copies == s0.cow_copies + (rc == SB_OK && p != hp->p),
             "sb_page_writable (%s): cow_copies moved %" PRIu64, sb_strerror(rc),
             s1.cow_copies - s0.cow_copies);
    if (n_keep > x->pt || (hp->committed && n_keep > cur)) {
        FZ_CHECK(z, rc == SB_ERR_INVAL && p == hp->p, "sb_page_writable(n_keep %u, page "
                 "holds %u of %u): %s", n_keep, cur, x->pt, sb_strerror(rc));
        return;
    }
    if (!hp->committed) {
        /* Fresh and held by us alone: left as is. */
        FZ_CHECK(z, rc == SB_OK && p == hp->p, "sb_page_writable of a private fresh page: %s",
                 sb_strerror(rc));
        return;
    }
    if (rc == SB_ERR_BUDGET || (armed && rc == SB_ERR_NOMEM)) {
        FZ_CHECK(z, p == hp->p, "failed sb_page_writable replaced the page");
        return;
    }
    FZ_CHECK(z, rc == SB_OK && p != hp->p && sb_page_tokens(p) == 0,
             "sb_page_writable of a committed page: %s", sb_strerror(rc));
    hp->p = p; /* our reference to the old page was dropped */
    hp->committed = false;
    if (hp->kv > n_keep)
        hp->kv = n_keep;
    hp->pre.n = hp->region * x->pt + hp->kv;
    fz_check_held_page(z, hp, "sb_page_writable");
}

int fz_open_ns(fz *z, fz_ns *x, const sb_layout *lay, sb_ns **out)
{
    return sb_ns_open(z->st, lay, x->scope_bytes ? x->scope : NULL, x->scope_bytes, out);
}

void fz_op_reopen(fz *z)
{
    int xi = fz_rd_ns(z);
    fz_ns *x = &z->ns[xi];
    sb_ns_info info;
    FZ_CHECK(z, sb_ns_get_info(x->h, &info) == SB_OK, "sb_ns_get_info failed");
    bool holds = info.ram_bytes > 0;
    for (int i = 0; i < z->n_match; i++)
        holds |= z->match[i].xi == xi;
    for (int i = 0; i < z->n_pin; i++)
        holds |= z->pin[i].xi == xi && fz_pin_live(z, &z->pin[i]);
    sb_ns_close(x->h);
    x->h = NULL;

    /* Same identity and scope, another page size: refused while the
     * namespace exists; after an empty namespace was freed it is new. */
    sb_layout other = x->lay;
    other.page_tokens = x->pt + 1;
    sb_ns *h = NULL;
    int rc = fz_open_ns(z, x, &other, &h);
    if (rc == SB_OK) {
        FZ_CHECK(z, !holds, "namespace holding %" PRIu64 " bytes reopened with another layout",
                 info.ram_bytes);
        sb_ns_close(h);
    } else {
        FZ_CHECK(z, rc == SB_ERR_LAYOUT_MISMATCH && !h, "open with another layout: %s",
                 sb_strerror(rc));
    }
    rc = fz_open_ns(z, x, &x->lay, &x->h);
    FZ_CHECK(z, rc == SB_OK && x->h, "reopen: %s", sb_strerror(rc));
    sb_ns_info again;
    FZ_CHECK(z, sb_ns_get_info(x->h, &again) == SB_OK && again.ns_id == info.ns_id &&
                    again.page_tokens == x->pt,
             "reopened namespace differs");
    if (holds)
        FZ_CHECK(z, again.indexed_pages == info.indexed_pages &&
                        again.index_tokens == info.index_tokens,
                 "closing a handle changed the namespace's index");
}

void fz_check_all(fz *z)
{
    for (int xi = 0; xi < z->n_ns; xi++) {
        fz_ns *x = &z->ns[xi];
        size_t from = x->n_model > FZ_CHECK_LAST ? x->n_model - FZ_CHECK_LAST : 0;
        for (size_t i = from; i < x->n_model; i++) {
            sb_match_info info;
            fz_seq s = x->model[i].s; /* match may not grow the model, but copy anyway */
            fz_match_len(z, xi, &s, s.n, &info);
        }
    }
}
