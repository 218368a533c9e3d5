/* model_threads.c -- the threaded variant of the model-based test
 * (test_model --threads T): T threads, each with its own namespace
 * handles on one store, over shared prefixes, with one model behind a
 * lock (z->mu). The store is sized so nothing is evicted, in RAM or with a
 * disk tier that drops nothing (apimodel.h's AM_EXACT), so:
 *
 *   - every restored byte is the state of its prefix;
 *   - a match restores at least what some sequence stored (its call
 *     returned) before the match began shares with the request, and no
 *     more than what one stored or being stored by the time it returned
 *     shares (point states likewise);
 *   - a pin's prefix stays restorable while it lives;
 *   - a ticket waited on forever is durable (nothing is denied);
 *   - at the end: sb_store_check, and with a disk tier a reopen restores
 *     every sequence.
 */
#define _DEFAULT_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apimodel.h"
#include "apimodel_int.h"

typedef struct worker {
    am *z;
    int id;
    uint64_t rng;
    unsigned ops;
    sb_ns *h[AM_MAX_NS];
    uint8_t buf[AM_MAX_TENSORS][AM_MAX_SEQ * AM_MAX_BPT];
    uint8_t out[AM_MAX_TENSORS][AM_MAX_SEQ * AM_MAX_BPT + 64];
} worker;

static uint64_t wdraw(worker *w, uint64_t n)
{
    uint64_t v = (w->rng += 0x9E3779B97F4A7C15ull);
    v = (v ^ (v >> 30)) * 0xBF58476D1CE4E5B9ull;
    v = (v ^ (v >> 27)) * 0x94D049BB133111EBull;
    v ^= v >> 31;
    return n > 1 ? v % n : 0;
}

/* A request: a stored sequence's prefix, maybe extended, or new. */
static void wseq(worker *w, int xi, am_seq *s)
{
    am *z = w->z;
    am_ns *x = &z->ns[xi];
    const am_model *md = &z->model[x->model];
    static const uint32_t ids[5] = { 0, UINT32_MAX, 1, 1000, 7 };
    s->n = 0;
    pthread_mutex_lock(&z->mu);
    if (x->n_e && wdraw(w, 4)) {
        const am_seq *b = &x->e[wdraw(w, x->n_e)].s;
        s->n = (uint32_t)wdraw(w, (uint64_t)b->n + 1);
        memcpy(s->tok, b->tok, s->n * sizeof *s->tok);
    }
    pthread_mutex_unlock(&z->mu);
    uint32_t more = (uint32_t)wdraw(w, 2 * md->pt + 4);
    if (s->n + more == 0)
        more = 1;
    while (more-- && s->n < AM_MAX_SEQ)
        s->tok[s->n++] = ids[wdraw(w, md->vocab)];
}

/* Bounds of what a match of s may restore, from the model (under z->mu). */
typedef struct bounds {
    size_t lo, lo_point;
} bounds;

static bounds lower(am *z, int xi, const am_seq *s)
{
    bounds b;
    pthread_mutex_lock(&z->mu);
    b.lo = am_lcp_must(z, &z->ns[xi], s->tok, s->n);
    b.lo_point = am_point_must(z, &z->ns[xi], s->tok, s->n);
    pthread_mutex_unlock(&z->mu);
    return b;
}

/* Match s, check it against the bounds and restore it bit-exact. */
static size_t wmatch(worker *w, int xi, const am_seq *s)
{
    am *z = w->z;
    am_ns *x = &z->ns[xi];
    const am_model *md = &z->model[x->model];
    bool required = md->flags & SB_LAYOUT_POINT_REQUIRED;
    bounds b = lower(z, xi, s);
    if (wdraw(w, 3) == 0) { /* a lookup first: the same bounds, nothing held */
        sb_lookup lk = { .tokens = s->tok, .n_tokens = s->n };
        int lrc = sb_ns_lookup(w->h[xi], &lk, 1);
        AM_CHECK(z, lrc == SB_OK, "thread %d: lookup: %s", w->id, sb_strerror(lrc));
        size_t lL = lk.info.n_tokens, lM = lk.info.n_matched_tokens;
        pthread_mutex_lock(&z->mu);
        size_t lany = am_lcp_any(z, x, s->tok, s->n);
        pthread_mutex_unlock(&z->mu);
        AM_CHECK(z, lM <= lany && (required ? lL >= b.lo_point : lL == lM && lL >= b.lo),
                 "thread %d: lookup L %zu (matched %zu): %zu (point %zu) stored before, "
                 "at most %zu", w->id, lL, lM, b.lo, b.lo_point, lany);
    }
    sb_match *m = NULL;
    int rc = sb_ns_match(w->h[xi], s->tok, s->n, &m);
    AM_CHECK(z, rc == SB_OK, "thread %d: match: %s", w->id, sb_strerror(rc));
    sb_match_info info;
    AM_CHECK(z, sb_match_get_info(m, &info) == SB_OK, "sb_match_get_info");
    size_t L = info.n_tokens, M = info.n_matched_tokens;
    pthread_mutex_lock(&z->mu);
    size_t any = am_lcp_any(z, x, s->tok, s->n);
    bool pt_ok = !info.has_point || am_point_at(z, x, s->tok, L, false);
    pthread_mutex_unlock(&z->mu);
    AM_CHECK(z, M <= any, "thread %d: matched %zu, no sequence stored shares more than %zu",
             w->id, M, any);
    AM_CHECK(z, pt_ok, "thread %d: a point at %zu, none was stored there", w->id, L);
    if (required) {
        AM_CHECK(z, L >= b.lo_point && (L > 0) == (info.has_point != 0),
                 "thread %d: L %zu, a point at %zu was stored before the match", w->id, L,
                 b.lo_point);
    } else {
        AM_CHECK(z, L == M && L >= b.lo, "thread %d: L %zu (matched %zu), %zu were stored "
                 "before the match", w->id, L, M, b.lo);
    }
    void *dst[AM_MAX_TENSORS];
    for (uint32_t t = 0; t < md->n_tensors; t++)
        dst[t] = w->out[t];
    uint8_t pt[AM_MAX_POINT], want[AM_MAX_POINT];
    rc = sb_match_restore(m, L, dst, info.has_point ? pt : NULL);
    AM_CHECK(z, rc == SB_OK, "thread %d: restore of %zu: %s", w->id, L, sb_strerror(rc));
    size_t bad = am_bad_token(z, x, s->tok, L, w->out);
    AM_CHECK(z, bad == L, "thread %d: restored token %zu of %zu holds the wrong state", w->id,
             bad, L);
    if (info.has_point) {
        am_point(z, x, s->tok, L, want);
        AM_CHECK(z, !memcmp(pt, want, md->point_bytes), "thread %d: wrong point state at %zu",
                 w->id, L);
    }
    if (info.n_pages && wdraw(w, 3) == 0) {
        size_t r = wdraw(w, info.n_pages);
        sb_page *p = NULL;
        rc = sb_match_pages(m, r, 1, &p);
        AM_CHECK(z, rc == SB_OK, "thread %d: sb_match_pages: %s", w->id, sb_strerror(rc));
        uint32_t k = am_region_tokens(z, x, L, r);
        AM_CHECK(z, am_page_ok(z, x, p, s->tok, r, k), "thread %d: page %zu holds wrong state",
                 w->id, r);
        sb_page_unref(p);
    }
    sb_match_release(m);
    return L;
}

/* Register s as being stored (upper bounds see it), then as stored. */
static size_t begin_store(am *z, int xi, const am_seq *s, bool point)
{
    pthread_mutex_lock(&z->mu);
    am_entry *e = am_add(z, &z->ns[xi], s->tok, s->n, point);
    e->must = false;
    size_t i = (size_t)(e - z->ns[xi].e);
    pthread_mutex_unlock(&z->mu);
    return i;
}

static void end_store(am *z, int xi, size_t i)
{
    pthread_mutex_lock(&z->mu);
    z->ns[xi].e[i].must = true;
    pthread_mutex_unlock(&z->mu);
}

static void wput(worker *w, int xi)
{
    am *z = w->z;
    am_ns *x = &z->ns[xi];
    const am_model *md = &z->model[x->model];
    am_seq s;
    wseq(w, xi, &s);
    bool point = md->point_bytes && wdraw(w, 3);
    am_fill_buf(z, x, s.tok, s.n, w->buf);
    const void *src[AM_MAX_TENSORS];
    for (uint32_t t = 0; t < md->n_tensors; t++)
        src[t] = w->buf[t];
    uint8_t pb[AM_MAX_POINT];
    if (point)
        am_point(z, x, s.tok, s.n, pb);
    size_t ei = begin_store(z, xi, &s, point);
    size_t stored = 0;
    sb_write_outcome oc;
    int rc = sb_ns_put_ex(w->h[xi], s.tok, s.n, src, point ? pb : NULL, &stored, &oc);
    AM_CHECK(z, rc == SB_OK && stored == s.n, "thread %d: put: %s, %zu of %u stored", w->id,
             sb_strerror(rc), stored, s.n);
    end_store(z, xi, ei);
    if (z->io && wdraw(w, 4) == 0) {
        rc = sb_store_wait_durable(z->st, oc.ticket, SB_WAIT_FOREVER);
        AM_CHECK(z, rc == SB_OK, "thread %d: wait forever on ticket %" PRIu64 ": %s", w->id,
                 oc.ticket, sb_strerror(rc));
    }
    wmatch(w, xi, &s);
}

static void wcommit(worker *w, int xi)
{
    am *z = w->z;
    am_ns *x = &z->ns[xi];
    const am_model *md = &z->model[x->model];
    am_seq s;
    wseq(w, xi, &s);
    size_t n_reg = am_regions(z, x, s.n);
    sb_page *pages[AM_MAX_SEQ];
    for (size_t r = 0; r < n_reg; r++) {
        int rc = sb_ns_page_alloc(w->h[xi], &pages[r]);
        AM_CHECK(z, rc == SB_OK, "thread %d: page_alloc: %s", w->id, sb_strerror(rc));
        am_fill_page(z, x, pages[r], s.tok, r, 0, am_region_tokens(z, x, s.n, r));
    }
    bool point = md->point_bytes && wdraw(w, 3);
    uint8_t pb[AM_MAX_POINT];
    if (point)
        am_point(z, x, s.tok, s.n, pb);
    size_t ei = begin_store(z, xi, &s, point);
    int rc = sb_ns_commit(w->h[xi], s.tok, s.n, pages, point ? pb : NULL);
    AM_CHECK(z, rc == SB_OK, "thread %d: commit: %s", w->id, sb_strerror(rc));
    end_store(z, xi, ei);
    for (size_t r = 0; r < n_reg; r++) {
        uint32_t k = am_region_tokens(z, x, s.n, r);
        AM_CHECK(z, am_page_ok(z, x, pages[r], s.tok, r, k),
                 "thread %d: page %zu after commit holds the wrong state", w->id, r);
        sb_page_unref(pages[r]);
    }
    wmatch(w, xi, &s);
}

static void wpin(worker *w, int xi)
{
    am *z = w->z;
    am_seq s;
    wseq(w, xi, &s);
    uint64_t id;
    size_t np;
    int rc = sb_ns_pin(w->h[xi], s.tok, s.n, 0, &id, &np);
    AM_CHECK(z, rc == SB_OK, "thread %d: pin: %s", w->id, sb_strerror(rc));
    size_t L0 = wmatch(w, xi, &s);
    for (int k = 0; k < 3; k++) {
        size_t L = wmatch(w, xi, &s);
        AM_CHECK(z, L >= L0, "thread %d: pinned prefix went from %zu to %zu", w->id, L0, L);
    }
    AM_CHECK(z, sb_ns_unpin(w->h[xi], id) == SB_OK, "thread %d: unpin", w->id);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    am *z = w->z;
    for (int i = 0; i < z->n_ns; i++) {
        sb_layout lay;
        am_layout(z, &z->ns[i], &lay);
        int rc = sb_ns_open(z->st, &lay, z->scope[z->ns[i].scope], z->scope_bytes[z->ns[i].scope],
                            &w->h[i]);
        AM_CHECK(z, rc == SB_OK, "thread %d: sb_ns_open: %s", w->id, sb_strerror(rc));
    }
    for (unsigned k = 0; k < w->ops; k++) {
        int xi = (int)wdraw(w, (uint64_t)z->n_ns);
        unsigned op = (unsigned)wdraw(w, 12);
        if (op < 4) {
            wput(w, xi);
        } else if (op < 6) {
            wcommit(w, xi);
        } else if (op < 10) {
            am_seq s;
            wseq(w, xi, &s);
            wmatch(w, xi, &s);
        } else if (op == 10) {
            wpin(w, xi);
        } else {
            int rc = sb_store_flush(z->st);
            AM_CHECK(z, rc == SB_OK, "thread %d: flush: %s", w->id, sb_strerror(rc));
            sb_stats st;
            am_stats(z, &st);
            AM_CHECK(z, st.evictions == 0 && st.point_evictions == 0,
                     "thread %d: %" PRIu64 " evictions in a store sized for none", w->id,
                     st.evictions);
        }
    }
    for (int i = 0; i < z->n_ns; i++)
        sb_ns_close(w->h[i]);
    return NULL;
}

int am_threads_run(uint64_t seed, unsigned threads, unsigned ops)
{
    am *z = calloc(1, sizeof *z);
    worker *ws = calloc(threads, sizeof *ws);
    pthread_t *tid = calloc(threads, sizeof *tid);
    if (!z || !ws || !tid) {
        fprintf(stderr, "test_model: out of memory\n");
        return 1;
    }
    am_src src = { .rng = seed * 0x9E3779B97F4A7C15ull + 7 };
    /* RAM only, or a disk tier that drops nothing. */
    am_init(z, &src, seed, seed % 2 ? AM_EXACT : AM_RAM, AM_ROOMY, false);
    z->op_name = "threads";
    for (unsigned i = 0; i < threads; i++) {
        ws[i].z = z;
        ws[i].id = (int)i;
        ws[i].rng = seed * 1000003u + i;
        ws[i].ops = ops;
        if (pthread_create(&tid[i], NULL, worker_main, &ws[i]) != 0) {
            fprintf(stderr, "test_model: pthread_create failed\n");
            return 1;
        }
    }
    for (unsigned i = 0; i < threads; i++)
        pthread_join(tid[i], NULL);
    int rc = sb_store_check(z->st);
    AM_CHECK(z, rc == SB_OK, "sb_store_check after the threads: %s", sb_strerror(rc));
    /* Everything stored comes back (after a reopen, from disk). */
    for (int xi = 0; xi < z->n_ns; xi++)
        am_verify_ns(z, xi, (size_t)-1);
    am_finish(z);
    free(z);
    free(ws);
    free(tid);
    return 0;
}
