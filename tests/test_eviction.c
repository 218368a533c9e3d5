/* Description: eviction. Random operations (put, zero-copy commit,
 * copy-on-write and commit of a match's tail page, match-and-hold, release,
 * TTL pins on a fake clock, clock advances, fresh pages held and released)
 * run against a reference model under small RAM budgets (store bytes,
 * store pages, bytes per namespace) on several namespaces with page_tokens
 * 1, 2, 3, 4 and 8 and a vocabulary of three tokens, so prefixes are shared
 * and eviction is constant. After every step:
 *   - sb_store_check passes and no budget is exceeded (store bytes, store
 *     pages, each namespace's bytes);
 *   - every held match restores its L tokens exactly, every live pin's
 *     prefix matches and restores exactly, held pages keep their bytes;
 *   - the restorable set is prefix-closed: for every sequence the model has
 *     stored, with L its restorable length, sampled prefixes p <= L match
 *     exactly p tokens and restore exact bytes;
 *   - nothing restores more than was stored: L is at most the longest
 *     common prefix with a stored sequence, and a point state is restored
 *     only where one was stored for that very prefix.
 * Then deterministic scenarios: a long chain under pressure loses one page
 * at a time from its end and stays prefix-closed at every step; a shared
 * system prompt with many branches loses every branch leaf before any of
 * its own pages; SB_ERR_BUDGET when everything is pinned (matches, pins,
 * held pages) and success once they are released or their TTL runs out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* Steps per seed of the random test: about 1 s in a Debug build, bounded
 * under the sanitizers (the checks after every step dominate). */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define EV_STEPS 250
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define EV_STEPS 250
#endif
#endif
#ifndef EV_STEPS
#define EV_STEPS 1000
#endif

static uint64_t fake_clock(void *ctx)
{
    return *(const uint64_t *)ctx;
}

static sb_store *open_store(uint64_t ram_bytes, uint64_t ram_pages, uint64_t ns_ram_bytes,
                            uint64_t *clock)
{
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.ram_bytes = ram_bytes;
    cfg.ram_pages = ram_pages;
    cfg.ns_ram_bytes = ns_ram_bytes;
    cfg.clock_ns = fake_clock;
    cfg.clock_ctx = clock;
    sb_store *st = NULL;
    assert_int_equal(sb_store_open(&cfg, &st), SB_OK);
    return st;
}

/* Match tok[0, n), restore all L tokens and compare the bytes (and the
 * point state, when the match has one). Returns L; *has_point as found. */
static size_t verify(sb_ns *ns, const tu_layout *l, const uint32_t *tok, size_t n,
                     int *has_point)
{
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, tok, n, &m), SB_OK);
    sb_match_info info;
    assert_int_equal(sb_match_get_info(m, &info), SB_OK);
    size_t L = info.n_tokens;
    assert_true(L <= n);
    void **bufs = tu_bufs(l, L ? L : 1);
    assert_int_equal(sb_match_restore(m, L, bufs, NULL), SB_OK);
    if (!tu_state_equal(l, tok, L, bufs)) {
        print_error("wrong bytes restored for a prefix of %zu tokens\n", L);
        fail();
    }
    tu_free_state(l, bufs);
    if (info.has_point) {
        void *want = tu_point(l, tok, L);
        assert_non_null(sb_match_point(m));
        assert_memory_equal(sb_match_point(m), want, l->point_bytes);
        free(want);
    }
    if (has_point)
        *has_point = info.has_point;
    sb_match_release(m);
    return L;
}



/* ---- the random test: model ----------------------------------------------------- */

#define N_NS 6
#define POOL 24
#define MAX_LEN 48
#define VOCAB 3
#define MAX_HELD 3
#define MAX_PINS 4
#define MAX_FRESH 3
#define MAX_KEEP 4

static const tu_layout LAYS[N_NS] = {
    { .page_tokens = 1, .n_tensors = 2, .bpt = { 8, 16 }, .model = "ev-1" },
    { .page_tokens = 2, .n_tensors = 1, .bpt = { 24 }, .point_bytes = 40, .model = "ev-2" },
    { .page_tokens = 3, .n_tensors = 3, .bpt = { 5, 7, 3 }, .model = "ev-3" },
    /* 8 KiB pages: the byte budget binds before the page budget. */
    { .page_tokens = 4, .n_tensors = 2, .bpt = { 900, 400 }, .point_bytes = 64,
      .model = "ev-4" },
    { .page_tokens = 8, .n_tensors = 1, .bpt = { 16 }, .point_bytes = 100, .model = "ev-8" },
    { .page_tokens = 4, .n_tensors = 1, .bpt = { 12 }, .model = "ev-8" }, /* other scope */
};
static const char *const SCOPES[N_NS] = { "s1", "s2", "s3", "s4", "s8", "s8b" };

#define EV_RAM_PAGES 40
#define EV_RAM_BYTES (44ull * 4096)
#define EV_NS_BYTES (14ull * 4096)

typedef struct seq {
    size_t n;
    uint32_t tok[MAX_LEN];
} seq;

/* The model of one namespace: a fixed pool of sequences with shared
 * prefixes; what was stored of each; where point states were stored. */
typedef struct nsm {
    sb_ns *ns;
    const tu_layout *l;
    seq pool[POOL];
    size_t put_len[POOL];               /* longest prefix ever stored */
    uint64_t point_at[POOL];            /* bit L: a point stored at length L */
    uint8_t lcp[POOL][POOL];
} nsm;

typedef struct held {
    sb_match *m;
    int k, i;                           /* namespace, pool sequence */
    size_t n, L;                        /* asked, restorable */
} held;

typedef struct pin {
    int k, i;
    size_t n_pinned;
    uint64_t id;
    uint64_t expiry_ns;                 /* 0: never */
} pin;

typedef struct fresh {
    sb_page *p;
    size_t bytes;
    uint8_t pattern;
} fresh;

typedef struct keep {                   /* a committed page we still hold */
    sb_page *p;
    int k, i;
    size_t r, n_tok;
} keep;

typedef struct model {
    sb_store *st;
    uint64_t clock;
    uint64_t rng;
    nsm ns[N_NS];
    held held[MAX_HELD];
    size_t n_held;
    pin pins[MAX_PINS];
    size_t n_pins;
    fresh fresh[MAX_FRESH];
    size_t n_fresh;
    keep keep[MAX_KEEP];
    size_t n_keep;
    /* what happened, for the summary */
    uint64_t n_puts, n_put_partial, n_commits, n_cow, n_denied;
} model;

static size_t rnd(model *md, size_t n)
{
    return (size_t)(tu_rand(&md->rng) % n);
}

static size_t lcp(const uint32_t *a, size_t na, const uint32_t *b, size_t nb)
{
    size_t n = na < nb ? na : nb, i = 0;
    while (i < n && a[i] == b[i])
        i++;
    return i;
}

static void model_init(model *md, uint64_t seed)
{
    memset(md, 0, sizeof *md);
    md->rng = seed;
    md->clock = 1000000000ull;
    md->st = open_store(EV_RAM_BYTES, EV_RAM_PAGES, EV_NS_BYTES, &md->clock);
    for (int k = 0; k < N_NS; k++) {
        nsm *m = &md->ns[k];
        m->l = &LAYS[k];
        m->ns = tu_ns(md->st, m->l, SCOPES[k]);
        size_t max = 4 * m->l->page_tokens + 7;
        if (max > MAX_LEN)
            max = MAX_LEN;
        for (int i = 0; i < POOL; i++) {
            seq *s = &m->pool[i];
            s->n = 1 + rnd(md, max);
            tu_tokens(&md->rng, s->tok, s->n, VOCAB);
            if (i > 0 && rnd(md, 3) != 0) {
                /* Branch off an earlier sequence. */
                const seq *o = &m->pool[rnd(md, (size_t)i)];
                size_t share = rnd(md, o->n + 1);
                if (share > s->n)
                    share = s->n;
                memcpy(s->tok, o->tok, share * sizeof *s->tok);
            }
        }
        for (int i = 0; i < POOL; i++)
            for (int j = 0; j < POOL; j++)
                m->lcp[i][j] = (uint8_t)lcp(m->pool[i].tok, m->pool[i].n, m->pool[j].tok,
                                            m->pool[j].n);
    }
}

/* The longest prefix of tok[0, n) the model ever stored in namespace k. */
static size_t stored_bound(const nsm *m, const uint32_t *tok, size_t n)
{
    size_t best = 0;
    for (int j = 0; j < POOL; j++) {
        if (!m->put_len[j])
            continue;
        size_t c = lcp(tok, n, m->pool[j].tok, m->put_len[j]);
        if (c > best)
            best = c;
    }
    return best;
}

/* Was a point state stored at exactly tok[0, L)? */
static bool point_stored(const nsm *m, const uint32_t *tok, size_t L)
{
    for (int j = 0; j < POOL; j++)
        if ((m->point_at[j] >> L & 1) && lcp(tok, L, m->pool[j].tok, m->pool[j].n) >= L)
            return true;
    return false;
}

static void note_stored(nsm *m, int i, size_t n, bool point)
{
    if (n > m->put_len[i])
        m->put_len[i] = n;
    if (point)
        m->point_at[i] |= 1ull << n;
}

/* Verify tok[0, n) of namespace k against the model: exact bytes, L within
 * what was stored, a point only where one was stored. Returns L. */
static size_t model_verify(model *md, int k, const uint32_t *tok, size_t n)
{
    nsm *m = &md->ns[k];
    int has_point = 0;
    size_t L = verify(m->ns, m->l, tok, n, &has_point);
    size_t bound = stored_bound(m, tok, n);
    if (L > bound) {
        print_error("namespace %d restores %zu tokens, never stored more than %zu\n", k, L,
                    bound);
        fail();
    }
    if (has_point && !point_stored(m, tok, L)) {
        print_error("namespace %d restores a point state at %zu that was never stored\n", k,
                    L);
        fail();
    }
    return L;
}

static bool pin_live(const model *md, const pin *p)
{
    return p->expiry_ns == 0 || md->clock < p->expiry_ns;
}

static void check_all(model *md)
{
    tu_check(md->st);
    sb_stats s;
    assert_int_equal(sb_store_stats(md->st, &s), SB_OK);
    assert_true(s.ram_bytes <= EV_RAM_BYTES);
    assert_true(s.ram_pages <= EV_RAM_PAGES);
    for (int k = 0; k < N_NS; k++) {
        sb_ns_info info;
        assert_int_equal(sb_ns_get_info(md->ns[k].ns, &info), SB_OK);
        assert_true(info.ram_bytes <= EV_NS_BYTES);
    }
    /* Held matches restore exactly what they matched. */
    for (size_t h = 0; h < md->n_held; h++) {
        held *x = &md->held[h];
        nsm *m = &md->ns[x->k];
        sb_match_info info;
        assert_int_equal(sb_match_get_info(x->m, &info), SB_OK);
        assert_int_equal(info.n_tokens, x->L);
        void **bufs = tu_bufs(m->l, x->L ? x->L : 1);
        assert_int_equal(sb_match_restore(x->m, x->L, bufs, NULL), SB_OK);
        if (!tu_state_equal(m->l, m->pool[x->i].tok, x->L, bufs)) {
            print_error("a held match of %zu tokens restores wrong bytes\n", x->L);
            fail();
        }
        tu_free_state(m->l, bufs);
    }
    /* Live pins keep their prefix restorable. */
    for (size_t p = 0; p < md->n_pins; p++) {
        pin *x = &md->pins[p];
        if (!pin_live(md, x) || !x->n_pinned)
            continue;
        size_t L = model_verify(md, x->k, md->ns[x->k].pool[x->i].tok, x->n_pinned);
        if (L != x->n_pinned) {
            print_error("a live pin of %zu tokens restores only %zu\n", x->n_pinned, L);
            fail();
        }
    }
    /* Held pages keep their bytes. */
    for (size_t f = 0; f < md->n_fresh; f++) {
        const uint8_t *d = sb_page_data(md->fresh[f].p);
        for (size_t b = 0; b < md->fresh[f].bytes; b += 512)
            assert_int_equal(d[b], md->fresh[f].pattern);
    }
    for (size_t q = 0; q < md->n_keep; q++) {
        keep *x = &md->keep[q];
        nsm *m = &md->ns[x->k];
        assert_true(tu_page_holds(m->ns, m->l, x->p, m->pool[x->i].tok, x->r, x->n_tok));
    }
    /* Prefix closure and the stored bound, for every stored sequence. */
    for (int k = 0; k < N_NS; k++) {
        nsm *m = &md->ns[k];
        for (int i = 0; i < POOL; i++) {
            if (!m->put_len[i])
                continue;
            const seq *sq = &m->pool[i];
            size_t L = model_verify(md, k, sq->tok, sq->n);
            if (!L)
                continue;
            size_t ps[2] = { 1 + rnd(md, L), L - rnd(md, L < 3 ? L : 3) };
            for (int j = 0; j < 2; j++) {
                size_t got = model_verify(md, k, sq->tok, ps[j]);
                if (got != ps[j]) {
                    print_error("namespace %d: prefix %zu of a sequence restorable to %zu "
                                "restores %zu (not prefix-closed)\n", k, ps[j], L, got);
                    fail();
                }
            }
        }
        /* A random request restores no more than was stored. */
        uint32_t r[MAX_LEN];
        size_t n = 1 + rnd(md, MAX_LEN);
        tu_tokens(&md->rng, r, n, VOCAB);
        model_verify(md, k, r, n);
    }
}

/* ---- the random test: operations ----------------------------------------------- */

static void op_put(model *md)
{
    int k = (int)rnd(md, N_NS), i = (int)rnd(md, POOL);
    nsm *m = &md->ns[k];
    const seq *sq = &m->pool[i];
    size_t n = rnd(md, 2) ? sq->n : 1 + rnd(md, sq->n);
    bool point = m->l->point_bytes && rnd(md, 2);
    void **state = tu_state(m->l, sq->tok, n);
    void *pt = point ? tu_point(m->l, sq->tok, n) : NULL;
    size_t stored = 12345;
    int rc = sb_ns_put(m->ns, sq->tok, n, (const void *const *)state, pt, &stored);
    free(pt);
    tu_free_state(m->l, state);
    md->n_puts++;
    if (rc == SB_OK) {
        assert_int_equal(stored, n);
        note_stored(m, i, n, point);
        int has_point = 0;
        assert_int_equal(verify(m->ns, m->l, sq->tok, n, &has_point), n);
        if (point)
            assert_true(has_point);
    } else {
        assert_int_equal(rc, SB_ERR_BUDGET);
        md->n_put_partial++;
        /* *n_stored is what is restorable now: pages this put added plus
         * what the index already held beyond them; all n when only the
         * point state was refused. */
        assert_true(stored < n || (stored == n && point));
        note_stored(m, i, stored, false);
        assert_int_equal(verify(m->ns, m->l, sq->tok, n, NULL), stored);
    }
}

static void op_commit(model *md)
{
    int k = (int)rnd(md, N_NS), i = (int)rnd(md, POOL);
    nsm *m = &md->ns[k];
    const seq *sq = &m->pool[i];
    size_t n = rnd(md, 2) ? sq->n : 1 + rnd(md, sq->n);
    size_t pt = m->l->page_tokens, n_reg = (n + pt - 1) / pt;
    sb_page *pages[MAX_LEN], *orig[MAX_LEN];
    for (size_t r = 0; r < n_reg; r++) {
        int rc = sb_ns_page_alloc(m->ns, &pages[r]);
        if (rc != SB_OK) {
            assert_int_equal(rc, SB_ERR_BUDGET);
            md->n_denied++;
            while (r-- > 0)
                sb_page_unref(pages[r]);
            return;
        }
    }
    tu_fill_range(m->ns, m->l, sq->tok, 0, n, pages);
    memcpy(orig, pages, n_reg * sizeof *pages);
    bool point = m->l->point_bytes && rnd(md, 2);
    void *pt_buf = point ? tu_point(m->l, sq->tok, n) : NULL;
    int rc = sb_ns_commit(m->ns, sq->tok, n, pages, pt_buf);
    free(pt_buf);
    if (rc == SB_OK) {
        md->n_commits++;
        note_stored(m, i, n, point);
        assert_int_equal(verify(m->ns, m->l, sq->tok, n, NULL), n);
    } else {
        assert_int_equal(rc, SB_ERR_BUDGET); /* no room for the point state */
        md->n_denied++;
        for (size_t r = 0; r < n_reg; r++) {
            assert_ptr_equal(pages[r], orig[r]);
            assert_int_equal(sb_page_tokens(pages[r]), 0);
        }
    }
    for (size_t r = 0; r < n_reg; r++) {
        size_t kt = n - r * pt < pt ? n - r * pt : pt;
        assert_true(tu_page_holds(m->ns, m->l, pages[r], sq->tok, r, kt));
        if (rc == SB_OK && md->n_keep < MAX_KEEP && rnd(md, 4) == 0) {
            md->keep[md->n_keep++] = (keep){ .p = pages[r], .k = k, .i = i, .r = r,
                                             .n_tok = kt };
            continue;
        }
        sb_page_unref(pages[r]);
    }
}

static void op_hold(model *md)
{
    if (md->n_held == MAX_HELD) {
        size_t h = rnd(md, md->n_held);
        sb_match_release(md->held[h].m);
        md->held[h] = md->held[--md->n_held];
        return;
    }
    int k = (int)rnd(md, N_NS), i = (int)rnd(md, POOL);
    nsm *m = &md->ns[k];
    const seq *sq = &m->pool[i];
    size_t n = rnd(md, 3) ? sq->n : 1 + rnd(md, sq->n);
    held *x = &md->held[md->n_held++];
    *x = (held){ .k = k, .i = i, .n = n };
    assert_int_equal(sb_ns_match(m->ns, sq->tok, n, &x->m), SB_OK);
    sb_match_info info;
    assert_int_equal(sb_match_get_info(x->m, &info), SB_OK);
    x->L = info.n_tokens;
    assert_true(x->L <= stored_bound(m, sq->tok, n));
}

static void op_release(model *md)
{
    if (!md->n_held)
        return;
    size_t h = rnd(md, md->n_held);
    sb_match_release(md->held[h].m);
    md->held[h] = md->held[--md->n_held];
}

static void op_pin(model *md)
{
    if (md->n_pins == MAX_PINS) {
        /* Unpin one: found while live, gone once its TTL ran out. */
        size_t p = rnd(md, md->n_pins);
        pin *x = &md->pins[p];
        int want = pin_live(md, x) ? SB_OK : SB_ERR_NOT_FOUND;
        assert_int_equal(sb_ns_unpin(md->ns[x->k].ns, x->id), want);
        assert_int_equal(sb_ns_unpin(md->ns[x->k].ns, x->id), SB_ERR_NOT_FOUND);
        md->pins[p] = md->pins[--md->n_pins];
        return;
    }
    int k = (int)rnd(md, N_NS), i = (int)rnd(md, POOL);
    nsm *m = &md->ns[k];
    const seq *sq = &m->pool[i];
    size_t n = rnd(md, 2) ? sq->n : 1 + rnd(md, sq->n);
    size_t L = verify(m->ns, m->l, sq->tok, n, NULL);
    uint64_t ttl = rnd(md, 3) ? 1 + rnd(md, 40) : 0;
    pin *x = &md->pins[md->n_pins++];
    *x = (pin){ .k = k, .i = i };
    assert_int_equal(sb_ns_pin(m->ns, sq->tok, n, ttl, &x->id, &x->n_pinned), SB_OK);
    assert_int_equal(x->n_pinned, L);
    x->expiry_ns = ttl ? md->clock + ttl * 1000000ull : 0;
}

static void op_fresh(model *md)
{
    if (md->n_fresh == MAX_FRESH || (md->n_fresh && rnd(md, 2))) {
        size_t f = rnd(md, md->n_fresh);
        sb_page_unref(md->fresh[f].p);
        md->fresh[f] = md->fresh[--md->n_fresh];
        return;
    }
    int k = (int)rnd(md, N_NS);
    sb_page *p = NULL;
    int rc = sb_ns_page_alloc(md->ns[k].ns, &p);
    if (rc != SB_OK) {
        assert_int_equal(rc, SB_ERR_BUDGET);
        md->n_denied++;
        return;
    }
    sb_ns_info info;
    assert_int_equal(sb_ns_get_info(md->ns[k].ns, &info), SB_OK);
    fresh *x = &md->fresh[md->n_fresh++];
    *x = (fresh){ .p = p, .bytes = info.page_bytes, .pattern = (uint8_t)rnd(md, 256) };
    memset(sb_page_data(p), x->pattern, x->bytes);
}

/* The runtime's append path: take a held match's partial tail page, make
 * it writable (a copy), fill the rest of its region and commit the longer
 * prefix with the match's other pages by reference. */
static void op_cow(model *md)
{
    if (!md->n_held)
        return;
    held *x = &md->held[rnd(md, md->n_held)];
    nsm *m = &md->ns[x->k];
    const seq *sq = &m->pool[x->i];
    size_t pt = m->l->page_tokens;
    if (x->L == 0 || x->L % pt == 0 || x->L >= sq->n)
        return;
    size_t n_pages = (x->L + pt - 1) / pt, last = n_pages - 1;
    size_t end = n_pages * pt < sq->n ? n_pages * pt : sq->n;
    sb_page *pages[MAX_LEN];
    assert_int_equal(sb_match_pages(x->m, 0, n_pages, pages), SB_OK);
    sb_page *tail = pages[last];
    uint32_t keep_n = (uint32_t)(x->L - last * pt);
    int rc = sb_page_writable(m->ns, &pages[last], keep_n);
    if (rc != SB_OK) {
        assert_int_equal(rc, SB_ERR_BUDGET);
        assert_ptr_equal(pages[last], tail);
        md->n_denied++;
    } else {
        assert_ptr_not_equal(pages[last], tail);
        assert_true(tu_page_holds(m->ns, m->l, pages[last], sq->tok, last, keep_n));
        tu_fill_range(m->ns, m->l, sq->tok, x->L, end, pages);
        assert_int_equal(sb_ns_commit(m->ns, sq->tok, end, pages, NULL), SB_OK);
        md->n_cow++;
        note_stored(m, x->i, end, false);
        assert_int_equal(verify(m->ns, m->l, sq->tok, end, NULL), end);
    }
    for (size_t r = 0; r < n_pages; r++)
        sb_page_unref(pages[r]);
}

static void release_all(model *md)
{
    for (size_t h = 0; h < md->n_held; h++)
        sb_match_release(md->held[h].m);
    for (size_t p = 0; p < md->n_pins; p++) {
        int rc = sb_ns_unpin(md->ns[md->pins[p].k].ns, md->pins[p].id);
        assert_int_equal(rc, pin_live(md, &md->pins[p]) ? SB_OK : SB_ERR_NOT_FOUND);
    }
    for (size_t f = 0; f < md->n_fresh; f++)
        sb_page_unref(md->fresh[f].p);
    for (size_t q = 0; q < md->n_keep; q++)
        sb_page_unref(md->keep[q].p);
    md->n_held = md->n_pins = md->n_fresh = md->n_keep = 0;
}

static uint64_t random_run(uint64_t seed, int steps)
{
    model *md = malloc(sizeof *md);
    assert_non_null(md);
    model_init(md, seed);
    for (int step = 0; step < steps; step++) {
        size_t op = rnd(md, 100);
        if (op < 36)
            op_put(md);
        else if (op < 50)
            op_commit(md);
        else if (op < 60)
            op_hold(md);
        else if (op < 66)
            op_release(md);
        else if (op < 74)
            op_pin(md);
        else if (op < 80)
            md->clock += (1 + rnd(md, 20)) * 1000000ull;
        else if (op < 88)
            op_fresh(md);
        else
            op_cow(md);
        check_all(md);
    }
    release_all(md);
    check_all(md);
    sb_stats s;
    assert_int_equal(sb_store_stats(md->st, &s), SB_OK);
    print_message("seed %llu: %d steps, %llu evictions (%llu point states), %llu puts "
                  "(%llu partial), %llu commits, %llu copy-on-write commits, %llu budget "
                  "denials\n",
                  (unsigned long long)seed, steps, (unsigned long long)s.evictions,
                  (unsigned long long)s.point_evictions, (unsigned long long)md->n_puts,
                  (unsigned long long)md->n_put_partial, (unsigned long long)md->n_commits,
                  (unsigned long long)md->n_cow, (unsigned long long)s.budget_denials);
    for (int k = 0; k < N_NS; k++)
        sb_ns_close(md->ns[k].ns);
    tu_check(md->st);
    sb_store_close(md->st);
    free(md);
    return s.evictions;
}

static void test_evict_random_model(void **state)
{
    (void)state;
    uint64_t total = 0;
    static const uint64_t seeds[] = { 1, 2, 3, 4 };
    for (size_t i = 0; i < sizeof seeds / sizeof *seeds; i++)
        total += random_run(seeds[i], EV_STEPS);
    print_message("random model: %llu evictions in all\n", (unsigned long long)total);
    /* Eviction is exercised, not incidental: more than one per two steps
     * (about 1.2 per step is typical). */
    assert_true(total >= 4 * EV_STEPS * 5 / 8);
}

/* ---- scenarios --------------------------------------------------------------------- */

static const tu_layout L4 = { .page_tokens = 4, .n_tensors = 2, .bpt = { 8, 24 },
                              .model = "ev-scenario" };

/* Put a one-token filler with first token `first`: one new page. */
static void put_filler(sb_ns *ns, uint32_t first)
{
    uint32_t t[1] = { first };
    tu_put(ns, &L4, t, 1, false, SB_OK);
}

/* Touch every filler so they are more recent than whatever was verified. */
static void touch_fillers(sb_ns *ns, uint32_t first, uint32_t n)
{
    for (uint32_t f = 0; f < n; f++) {
        uint32_t t[1] = { first + f };
        assert_int_equal(tu_match_len(ns, t, 1), 1);
    }
}

/* Every prefix p <= L of tok restores exactly p tokens; longer ones L. */
static void assert_prefix_closed(sb_ns *ns, const uint32_t *tok, size_t n, size_t L)
{
    for (size_t p = 1; p <= n; p++) {
        size_t got = verify(ns, &L4, tok, p, NULL);
        if (got != (p < L ? p : L)) {
            print_error("prefix %zu restores %zu, want %zu\n", p, got, p < L ? p : L);
            fail();
        }
    }
}

static void test_evict_chain_page_by_page(void **state)
{
    (void)state;
    uint64_t clock = 1;
    /* 50 tokens: 12 full pages and a partial one, exactly the budget. */
    sb_store *st = open_store(1ull << 30, 13, UINT64_MAX, &clock);
    sb_ns *ns = tu_ns(st, &L4, "chain");
    uint32_t chain[50];
    uint64_t rng = 77;
    tu_tokens(&rng, chain, 50, 3);
    tu_put(ns, &L4, chain, 50, false, SB_OK);
    assert_prefix_closed(ns, chain, 50, 50);
    size_t want = 50;
    for (uint32_t f = 0; f < 13; f++) {
        /* One new page under a full budget: exactly one page goes, the
         * chain's last. */
        put_filler(ns, 1000 + f);
        tu_check(st);
        want = want % 4 ? want / 4 * 4 : want - 4;
        sb_stats s;
        assert_int_equal(sb_store_stats(st, &s), SB_OK);
        assert_int_equal(s.evictions, f + 1);
        assert_int_equal(s.ram_pages, 13);
        assert_int_equal(verify(ns, &L4, chain, 50, NULL), want);
        assert_prefix_closed(ns, chain, 50, want);
        touch_fillers(ns, 1000, f + 1);
    }
    assert_int_equal(want, 0);
    sb_ns_close(ns);
    sb_store_close(st);
}

/* A system prompt of trunk_len tokens shared by 8 branches that each add
 * 40 - trunk_len tokens (3 pages), 31 pages in all, exactly the budget;
 * one-page fillers push them out one page at a time. */
static void branches_run(size_t trunk_len)
{
    enum { BR = 8, BLEN = 40, PAGES = 7 + 3 * BR };
    uint64_t clock = 1;
    sb_store *st = open_store(1ull << 30, PAGES, UINT64_MAX, &clock);
    sb_ns *ns = tu_ns(st, &L4, "trunk");
    uint32_t br[BR][BLEN];
    uint64_t rng = 78;
    tu_tokens(&rng, br[0], BLEN, 50);
    for (int b = 0; b < BR; b++) {
        memcpy(br[b], br[0], trunk_len * sizeof **br);
        tu_tokens(&rng, br[b] + trunk_len, BLEN - trunk_len, 50);
        br[b][trunk_len] = 100 + (uint32_t)b;
        tu_put(ns, &L4, br[b], BLEN, false, SB_OK);
    }
    sb_stats s;
    assert_int_equal(sb_store_stats(st, &s), SB_OK);
    assert_int_equal(s.indexed_pages, PAGES);
    uint64_t first_cut = 0; /* evictions when the trunk first lost a token */
    uint32_t f;
    for (f = 0; f < 2 * PAGES; f++) {
        put_filler(ns, 1000 + f);
        tu_check(st);
        assert_int_equal(sb_store_stats(st, &s), SB_OK);
        size_t trunk = verify(ns, &L4, br[0], trunk_len, NULL);
        size_t longest = 0;
        for (int b = 0; b < BR; b++) {
            size_t L = verify(ns, &L4, br[b], BLEN, NULL);
            assert_true(L >= trunk); /* a branch restores the trunk's part */
            if (L > longest)
                longest = L;
        }
        /* The trunk loses a token only once no branch holds anything
         * below it. */
        if (trunk < trunk_len && longest > trunk) {
            print_error("trunk cut to %zu while a branch restores %zu\n", trunk, longest);
            fail();
        }
        if (trunk < trunk_len && !first_cut)
            first_cut = s.evictions;
        if (trunk == 0)
            break;
        touch_fillers(ns, 1000, f + 1);
    }
    print_message("trunk of %zu tokens: first cut at eviction %llu, gone after %u fillers\n",
                  trunk_len, (unsigned long long)first_cut, f + 1);
    /* All 24 branch pages went before the trunk lost anything (with the
     * branch point inside a page, the 24th takes the trunk's tail tokens,
     * which no trunk page of its own covered). */
    assert_true(first_cut >= 3 * BR);
    assert_true(f < 2 * PAGES); /* and in the end the trunk went too */
    sb_ns_close(ns);
    sb_store_close(st);
}

static void test_evict_branches_before_trunk(void **state)
{
    (void)state;
    branches_run(28); /* the branch point on a page boundary */
    branches_run(30); /* inside a page: each branch has its own page 7 */
}

static void test_evict_budget_when_all_pinned(void **state)
{
    (void)state;
    uint64_t clock = 1000000000ull;
    sb_store *st = open_store(1ull << 30, 8, UINT64_MAX, &clock);
    sb_ns *ns = tu_ns(st, &L4, "pinned");
    uint32_t a[32], b[8], c[8], d[8];
    uint64_t rng = 79;
    tu_tokens(&rng, a, 32, 3);
    tu_tokens(&rng, b, 8, 3);
    tu_tokens(&rng, c, 8, 3);
    tu_tokens(&rng, d, 8, 3);
    a[0] = 10, b[0] = 11, c[0] = 12, d[0] = 13;
    tu_put(ns, &L4, a, 32, false, SB_OK);

    /* 1. Held by a match: nothing fits. */
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, a, 32, &m), SB_OK);
    tu_put(ns, &L4, b, 8, false, SB_ERR_BUDGET);
    sb_page *p = NULL;
    assert_int_equal(sb_ns_page_alloc(ns, &p), SB_ERR_BUDGET);
    assert_int_equal(verify(ns, &L4, a, 32, NULL), 32);
    sb_match_release(m);
    tu_put(ns, &L4, b, 8, false, SB_OK);
    assert_int_equal(verify(ns, &L4, a, 32, NULL), 24);
    tu_check(st);

    /* 2. Pinned without a TTL: a and b fill the budget. */
    uint64_t pa, pb;
    size_t np;
    assert_int_equal(sb_ns_pin(ns, a, 32, 0, &pa, &np), SB_OK);
    assert_int_equal(np, 24);
    assert_int_equal(sb_ns_pin(ns, b, 8, 0, &pb, &np), SB_OK);
    assert_int_equal(np, 8);
    tu_put(ns, &L4, c, 8, false, SB_ERR_BUDGET);
    assert_int_equal(sb_ns_page_alloc(ns, &p), SB_ERR_BUDGET);
    assert_int_equal(sb_ns_unpin(ns, pb), SB_OK);
    tu_put(ns, &L4, c, 8, false, SB_OK); /* b's two pages go */
    assert_int_equal(verify(ns, &L4, b, 8, NULL), 0);
    assert_int_equal(verify(ns, &L4, a, 32, NULL), 24);
    tu_check(st);

    /* 3. Pinned with a TTL: refused until the clock passes it. */
    uint64_t pc;
    assert_int_equal(sb_ns_pin(ns, c, 8, 10, &pc, &np), SB_OK);
    assert_int_equal(np, 8);
    tu_put(ns, &L4, d, 8, false, SB_ERR_BUDGET);
    clock += 10 * 1000000ull - 1;
    tu_put(ns, &L4, d, 8, false, SB_ERR_BUDGET);
    clock += 1;
    tu_put(ns, &L4, d, 8, false, SB_OK); /* c's pin expired: c goes */
    assert_int_equal(verify(ns, &L4, c, 8, NULL), 0);
    assert_int_equal(sb_ns_unpin(ns, pc), SB_ERR_NOT_FOUND);
    tu_check(st);

    /* 4. Pages held by the caller. */
    assert_int_equal(sb_ns_unpin(ns, pa), SB_OK);
    sb_page *mine[8];
    for (int i = 0; i < 8; i++)
        assert_int_equal(sb_ns_page_alloc(ns, &mine[i]), SB_OK); /* evicts a and d */
    assert_int_equal(verify(ns, &L4, a, 32, NULL), 0);
    assert_int_equal(verify(ns, &L4, d, 8, NULL), 0);
    assert_int_equal(sb_ns_page_alloc(ns, &p), SB_ERR_BUDGET);
    tu_put(ns, &L4, b, 4, false, SB_ERR_BUDGET);
    sb_page_unref(mine[0]);
    tu_put(ns, &L4, b, 4, false, SB_OK);
    for (int i = 1; i < 8; i++)
        sb_page_unref(mine[i]);
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
}

/* Regression: a pin whose prefix ends inside a page holds that partial
 * page; a longer put supersedes it (the index takes a full page for the
 * region) and the pin keeps the superseded copy, so the index page that
 * now covers the pinned prefix is unpinned and eviction takes it: the
 * pinned prefix stops restoring while the pin is live ("pin the longest
 * stored prefix ... so eviction cannot take it"). */
static void test_evict_pin_survives_superseded_tail(void **state)
{
    (void)state;
    uint64_t clock = 1;
    static const tu_layout l2 = { .page_tokens = 2, .n_tensors = 1, .bpt = { 8 },
                                  .model = "ev-pin" };
    sb_store *st = open_store(1ull << 30, 3, UINT64_MAX, &clock);
    sb_ns *ns = tu_ns(st, &l2, "pin");
    uint32_t x[4] = { 0, 0, 0, 1 }, y[2] = { 5, 5 };
    tu_put(ns, &l2, x, 3, false, SB_OK); /* a full page and a partial one */
    uint64_t id;
    size_t n_pinned;
    assert_int_equal(sb_ns_pin(ns, x, 3, 0, &id, &n_pinned), SB_OK);
    assert_int_equal(n_pinned, 3);
    tu_put(ns, &l2, x, 4, false, SB_OK); /* supersedes the pinned partial page */
    assert_int_equal(verify(ns, &l2, x, 3, NULL), 3);
    tu_put(ns, &l2, y, 2, false, SB_OK); /* the budget is full: one page goes */
    tu_check(st);
    size_t L = verify(ns, &l2, x, 3, NULL);
    if (L != 3) {
        print_error("a live pin of 3 tokens restores only %zu\n", L);
        fail();
    }
    assert_int_equal(sb_ns_unpin(ns, id), SB_OK);
    sb_ns_close(ns);
    sb_store_close(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_evict_random_model),
        cmocka_unit_test(test_evict_chain_page_by_page),
        cmocka_unit_test(test_evict_branches_before_trunk),
        cmocka_unit_test(test_evict_budget_when_all_pinned),
        cmocka_unit_test(test_evict_pin_survives_superseded_tail),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
