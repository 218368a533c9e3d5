/* Description: threads. Four threads run a bounded number of random
 * operations on one store, on two shared namespaces and one namespace of
 * their own, under budgets small enough that eviction runs concurrently
 * with everything else: put, match + restore with byte verification,
 * zero-copy alloc / fill / commit, the copy-on-write append path
 * (sb_page_writable on a match's tail page, then commit), TTL pins on a
 * shared fake clock, fresh pages held for a while, handles opened and
 * closed, stats and, now and then, sb_store_check. Every byte read back
 * (restored, or read through a matched or committed page) is compared with
 * the synthetic state of its token prefix: never a wrong byte, ever. Budgets
 * are never exceeded; a pin checked while certainly live covers its prefix;
 * only the documented error codes come back. The main thread joins, asserts
 * zero failures and a final sb_store_check. Race-free by the header's rules
 * (it runs under TSan in CI). A second, targeted test races a put of a
 * fully indexed prefix against a supersede and an eviction: sb_ns_put must
 * only ever return what it documents. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "testutil.h"

/* Steps per thread: about 5 s in a Debug build, bounded under the
 * sanitizers (TSan runs every test in CI). */
#if defined(__SANITIZE_THREAD__)
#define TH_STEPS 20000
#elif defined(__SANITIZE_ADDRESS__)
#define TH_STEPS 30000
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TH_STEPS 20000
#elif __has_feature(address_sanitizer)
#define TH_STEPS 30000
#endif
#endif
#ifndef TH_STEPS
#define TH_STEPS 120000
#endif

#define N_THREADS 4
#define N_SHARED 2
#define POOL 12
#define MAX_LEN 40
#define VOCAB 3

#define TH_RAM_PAGES 64
#define TH_RAM_BYTES (80ull * 4096)
#define TH_NS_BYTES (28ull * 4096)

static const tu_layout SHARED[N_SHARED] = {
    { .page_tokens = 4, .n_tensors = 2, .bpt = { 8, 32 }, .point_bytes = 48,
      .model = "th-shared-a" },
    { .page_tokens = 3, .n_tensors = 1, .bpt = { 16 }, .model = "th-shared-b" },
};
static const uint32_t PRIVATE_PT[N_THREADS] = { 1, 2, 4, 8 };

typedef struct seq {
    size_t n;
    uint32_t tok[MAX_LEN];
} seq;

/* Shared, read-only while the threads run. */
typedef struct shared {
    sb_store *st;
    _Atomic uint64_t clock;      /* fake store clock, ns */
    seq pool[N_SHARED][POOL];    /* sequences with shared prefixes */
} shared;

typedef struct worker {
    shared *sh;
    int id;
    uint64_t rng;
    tu_layout priv;              /* this thread's own layout */
    char scope[16];
    sb_ns *ns[N_SHARED + 1];     /* [N_SHARED]: private */
    const tu_layout *lay[N_SHARED + 1];
    seq own[POOL];               /* sequences of the private namespace */
    sb_page *held[2];            /* fresh pages held across steps */
    uint8_t held_pattern[2];
    /* results */
    uint64_t failures;
    uint64_t n_ops[10];
    uint64_t n_verified_tokens;
    char first_failure[160];
} worker;

static uint64_t clock_read(void *ctx)
{
    return atomic_load((_Atomic uint64_t *)ctx);
}

static size_t rnd(worker *w, size_t n)
{
    return (size_t)(tu_rand(&w->rng) % n);
}

static void failed(worker *w, const char *what, int rc)
{
    if (!w->failures++)
        snprintf(w->first_failure, sizeof w->first_failure, "thread %d: %s (%s)", w->id,
                 what, sb_strerror(rc));
}



/* Pick a namespace (0..N_SHARED, shared ones twice as often) and a
 * sequence in it. */
static const seq *pick(worker *w, int *k)
{
    *k = rnd(w, 5) == 0 ? N_SHARED : (int)rnd(w, N_SHARED);
    return *k == N_SHARED ? &w->own[rnd(w, POOL)] : &w->sh->pool[*k][rnd(w, POOL)];
}

static size_t pick_len(worker *w, const seq *s)
{
    return rnd(w, 2) ? s->n : 1 + rnd(w, s->n);
}

/* Match tok[0, n), restore, compare every byte, and read the matched pages
 * directly too. Returns L, or (size_t)-1 on an unexpected error. */
static size_t match_verify(worker *w, int k, const uint32_t *tok, size_t n)
{
    sb_ns *ns = w->ns[k];
    const tu_layout *l = w->lay[k];
    sb_match *m = NULL;
    int rc = sb_ns_match(ns, tok, n, &m);
    if (rc != SB_OK) {
        failed(w, "sb_ns_match", rc);
        return (size_t)-1;
    }
    sb_match_info info;
    sb_match_get_info(m, &info);
    size_t L = info.n_tokens, pt = l->page_tokens;
    if (L > n || info.n_pages != (L + pt - 1) / pt)
        failed(w, "match info out of range", 0);
    void **bufs = tu_bufs(l, L ? L : 1);
    void *point = info.has_point ? malloc(l->point_bytes) : NULL;
    rc = sb_match_restore(m, L, bufs, point);
    if (rc != SB_OK)
        failed(w, "sb_match_restore", rc);
    else if (!tu_state_equal(l, tok, L, bufs))
        failed(w, "restore returned wrong bytes", 0);
    if (point) {
        void *want = tu_point(l, tok, L);
        if (memcmp(point, want, l->point_bytes) != 0 ||
            memcmp(sb_match_point(m), want, l->point_bytes) != 0)
            failed(w, "wrong point state", 0);
        free(want);
        free(point);
    }
    tu_free_state(l, bufs);
    /* The zero-copy view: the pages themselves. */
    if (info.n_pages && rnd(w, 2)) {
        sb_page *pages[MAX_LEN];
        rc = sb_match_pages(m, 0, info.n_pages, pages);
        if (rc != SB_OK) {
            failed(w, "sb_match_pages", rc);
        } else {
            for (size_t r = 0; r < info.n_pages; r++) {
                size_t kt = L - r * pt < pt ? L - r * pt : pt;
                if (!tu_page_holds(ns, l, pages[r], tok, r, kt))
                    failed(w, "a matched page holds wrong bytes", 0);
                if (sb_page_tokens(pages[r]) < kt)
                    failed(w, "a matched page holds too few tokens", 0);
                sb_page_unref(pages[r]);
            }
        }
    }
    sb_match_release(m);
    w->n_verified_tokens += L;
    return L;
}

static void op_put(worker *w)
{
    int k;
    const seq *s = pick(w, &k);
    size_t n = pick_len(w, s);
    const tu_layout *l = w->lay[k];
    bool with_point = l->point_bytes && rnd(w, 2);
    void **state = tu_state(l, s->tok, n);
    void *point = with_point ? tu_point(l, s->tok, n) : NULL;
    size_t stored = 0;
    int rc = sb_ns_put(w->ns[k], s->tok, n, (const void *const *)state, point, &stored);
    /* SB_ERR_BUDGET: fewer than n restorable, or all n with the point
     * state refused (snapbank.h). */
    if (rc == SB_OK ? stored != n
                    : rc != SB_ERR_BUDGET || stored > n || (stored == n && !with_point))
        failed(w, "sb_ns_put", rc);
    free(point);
    tu_free_state(l, state);
}

static void op_match(worker *w)
{
    int k;
    const seq *s = pick(w, &k);
    match_verify(w, k, s->tok, pick_len(w, s));
}

static void op_commit(worker *w)
{
    int k;
    const seq *s = pick(w, &k);
    size_t n = pick_len(w, s);
    const tu_layout *l = w->lay[k];
    size_t pt = l->page_tokens, n_reg = (n + pt - 1) / pt;
    sb_page *pages[MAX_LEN], *orig[MAX_LEN];
    for (size_t r = 0; r < n_reg; r++) {
        int rc = sb_ns_page_alloc(w->ns[k], &pages[r]);
        if (rc != SB_OK) {
            if (rc != SB_ERR_BUDGET)
                failed(w, "sb_ns_page_alloc", rc);
            while (r-- > 0)
                sb_page_unref(pages[r]);
            return;
        }
    }
    tu_fill_range(w->ns[k], l, s->tok, 0, n, pages);
    memcpy(orig, pages, n_reg * sizeof *pages);
    bool with_point = l->point_bytes && rnd(w, 2);
    void *point = with_point ? tu_point(l, s->tok, n) : NULL;
    int rc = sb_ns_commit(w->ns[k], s->tok, n, pages, point);
    free(point);
    if (rc != SB_OK && (rc != SB_ERR_BUDGET || !with_point)) /* BUDGET: no room for the point */
        failed(w, "sb_ns_commit", rc);
    for (size_t r = 0; r < n_reg; r++) {
        size_t kt = n - r * pt < pt ? n - r * pt : pt;
        if (rc != SB_OK && pages[r] != orig[r])
            failed(w, "a failed commit replaced a page", rc);
        /* Ours or the index's (deduplicated): the right bytes either way. */
        if (!tu_page_holds(w->ns[k], l, pages[r], s->tok, r, kt))
            failed(w, "a committed page holds wrong bytes", 0);
        sb_page_unref(pages[r]);
    }
}

/* Match, copy the tail page on write, append to it, commit the longer
 * prefix with the other matched pages by reference. */
static void op_cow(worker *w)
{
    int k;
    const seq *s = pick(w, &k);
    const tu_layout *l = w->lay[k];
    size_t pt = l->page_tokens;
    sb_match *m = NULL;
    int rc = sb_ns_match(w->ns[k], s->tok, s->n, &m);
    if (rc != SB_OK) {
        failed(w, "sb_ns_match", rc);
        return;
    }
    sb_match_info info;
    sb_match_get_info(m, &info);
    size_t L = info.n_tokens;
    if (L == 0 || L % pt == 0 || L >= s->n) {
        sb_match_release(m);
        return;
    }
    size_t n_pages = info.n_pages, last = n_pages - 1;
    size_t end = n_pages * pt < s->n ? n_pages * pt : s->n;
    sb_page *pages[MAX_LEN];
    if ((rc = sb_match_pages(m, 0, n_pages, pages)) != SB_OK) {
        failed(w, "sb_match_pages", rc);
        sb_match_release(m);
        return;
    }
    sb_page *tail = pages[last];
    uint32_t keep = (uint32_t)(L - last * pt);
    rc = sb_page_writable(w->ns[k], &pages[last], keep);
    if (rc == SB_OK) {
        if (pages[last] == tail)
            failed(w, "sb_page_writable kept a shared page", 0);
        else if (!tu_page_holds(w->ns[k], l, pages[last], s->tok, last, keep))
            failed(w, "a copied page holds wrong bytes", 0);
        tu_fill_range(w->ns[k], l, s->tok, L, end, pages);
        rc = sb_ns_commit(w->ns[k], s->tok, end, pages, NULL);
        if (rc != SB_OK)
            failed(w, "sb_ns_commit after copy-on-write", rc);
        size_t kt = end - last * pt;
        if (!tu_page_holds(w->ns[k], l, pages[last], s->tok, last, kt))
            failed(w, "an appended page holds wrong bytes", 0);
    } else if (rc != SB_ERR_BUDGET || pages[last] != tail) {
        failed(w, "sb_page_writable", rc);
    }
    for (size_t r = 0; r < n_pages; r++)
        sb_page_unref(pages[r]);
    sb_match_release(m);
}

/* Pin a page-aligned prefix with a TTL; while the pin is certainly live
 * (the clock, read after the check, is still before the earliest possible
 * expiry) its prefix must restore in full. Prefixes ending inside a page
 * are not checked here: see test_evict_pin_survives_superseded_tail. */
static void op_pin(worker *w)
{
    int k;
    const seq *s = pick(w, &k);
    size_t pt = w->lay[k]->page_tokens;
    size_t L = match_verify(w, k, s->tok, s->n);
    if (L == (size_t)-1)
        return;
    size_t n = L - L % pt;
    if (n == 0)
        n = s->n; /* nothing to protect: pin whatever is there */
    uint64_t ttl = 1 + rnd(w, 20);
    uint64_t t0 = atomic_load(&w->sh->clock);
    uint64_t id;
    size_t n_pinned = 0;
    int rc = sb_ns_pin(w->ns[k], s->tok, n, ttl, &id, &n_pinned);
    if (rc != SB_OK) {
        failed(w, "sb_ns_pin", rc);
        return;
    }
    uint64_t expiry = t0 + ttl * 1000000ull; /* the pin expires no earlier */
    if (n_pinned % pt == 0 && n_pinned) {
        size_t got = match_verify(w, k, s->tok, n_pinned);
        if (got != n_pinned && atomic_load(&w->sh->clock) < expiry)
            failed(w, "a live pin does not cover its prefix", 0);
    }
    rc = sb_ns_unpin(w->ns[k], id);
    if (rc == SB_ERR_NOT_FOUND) {
        if (atomic_load(&w->sh->clock) < expiry)
            failed(w, "a live pin was not found", rc);
    } else if (rc != SB_OK) {
        failed(w, "sb_ns_unpin", rc);
    }
}

static void op_hold_page(worker *w)
{
    int slot = (int)rnd(w, 2);
    if (w->held[slot]) {
        const uint8_t *d = sb_page_data(w->held[slot]);
        for (size_t b = 0; b < 4096; b += 256)
            if (d[b] != w->held_pattern[slot]) {
                failed(w, "a held page changed", 0);
                break;
            }
        sb_page_unref(w->held[slot]);
        w->held[slot] = NULL;
        return;
    }
    int k = (int)rnd(w, N_SHARED + 1);
    int rc = sb_ns_page_alloc(w->ns[k], &w->held[slot]);
    if (rc != SB_OK) {
        if (rc != SB_ERR_BUDGET)
            failed(w, "sb_ns_page_alloc", rc);
        w->held[slot] = NULL;
        return;
    }
    w->held_pattern[slot] = (uint8_t)rnd(w, 256);
    memset(sb_page_data(w->held[slot]), w->held_pattern[slot], 4096);
}

static void op_stats(worker *w)
{
    sb_stats s;
    int rc = sb_store_stats(w->sh->st, &s);
    if (rc != SB_OK || s.ram_bytes > TH_RAM_BYTES || s.ram_pages > TH_RAM_PAGES)
        failed(w, "stats: a budget exceeded", rc);
    for (int k = 0; k <= N_SHARED; k++) {
        sb_ns_info info;
        if (sb_ns_get_info(w->ns[k], &info) != SB_OK || info.ram_bytes > TH_NS_BYTES)
            failed(w, "a namespace over its budget", 0);
    }
}

static sb_ns *open_ns(sb_store *st, const tu_layout *l, const char *scope)
{
    sb_layout lay = { .model_id = l->model, .model_id_bytes = strlen(l->model),
                      .page_tokens = l->page_tokens, .n_tensors = l->n_tensors,
                      .bytes_per_token = l->bpt, .point_bytes = l->point_bytes,
                      .flags = l->flags };
    sb_ns *ns = NULL;
    return sb_ns_open(st, &lay, scope, strlen(scope), &ns) == SB_OK ? ns : NULL;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    shared *sh = w->sh;
    for (int k = 0; k < N_SHARED; k++) {
        w->ns[k] = open_ns(sh->st, &SHARED[k], "shared");
        w->lay[k] = &SHARED[k];
    }
    w->ns[N_SHARED] = open_ns(sh->st, &w->priv, w->scope);
    w->lay[N_SHARED] = &w->priv;
    for (int k = 0; k <= N_SHARED; k++)
        if (!w->ns[k]) {
            failed(w, "sb_ns_open", 0);
            return NULL;
        }
    for (int step = 0; step < TH_STEPS; step++) {
        size_t op = rnd(w, 100);
        if (op < 25)
            op_put(w), w->n_ops[0]++;
        else if (op < 50)
            op_match(w), w->n_ops[1]++;
        else if (op < 65)
            op_commit(w), w->n_ops[2]++;
        else if (op < 73)
            op_cow(w), w->n_ops[3]++;
        else if (op < 80)
            op_pin(w), w->n_ops[4]++;
        else if (op < 86)
            op_hold_page(w), w->n_ops[5]++;
        else if (op < 92)
            atomic_fetch_add(&sh->clock, (1 + rnd(w, 5)) * 1000000ull), w->n_ops[6]++;
        else if (op < 97)
            op_stats(w), w->n_ops[7]++;
        else if (op < 99) {
            /* Another handle on a shared namespace, opened and closed. */
            int k = (int)rnd(w, N_SHARED);
            sb_ns *h = open_ns(sh->st, &SHARED[k], "shared");
            if (!h)
                failed(w, "sb_ns_open (again)", 0);
            sb_ns_close(h);
            w->n_ops[8]++;
        } else {
            int rc = sb_store_check(sh->st);
            if (rc != SB_OK)
                failed(w, "sb_store_check", rc);
            w->n_ops[9]++;
        }
    }
    for (int slot = 0; slot < 2; slot++)
        sb_page_unref(w->held[slot]);
    for (int k = 0; k <= N_SHARED; k++)
        sb_ns_close(w->ns[k]);
    return NULL;
}

static void test_threads_random(void **state)
{
    (void)state;
    shared *sh = calloc(1, sizeof *sh);
    assert_non_null(sh);
    atomic_init(&sh->clock, 1000000000ull);
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.ram_pages = TH_RAM_PAGES;
    cfg.ram_bytes = TH_RAM_BYTES;
    cfg.ns_ram_bytes = TH_NS_BYTES;
    cfg.clock_ns = clock_read;
    cfg.clock_ctx = &sh->clock;
    assert_int_equal(sb_store_open(&cfg, &sh->st), SB_OK);

    uint64_t rng = 2024;
    for (int k = 0; k < N_SHARED; k++)
        for (int i = 0; i < POOL; i++) {
            seq *s = &sh->pool[k][i];
            s->n = 1 + (size_t)(tu_rand(&rng) % MAX_LEN);
            tu_tokens(&rng, s->tok, s->n, VOCAB);
            if (i && tu_rand(&rng) % 3) {
                const seq *o = &sh->pool[k][tu_rand(&rng) % (uint64_t)i];
                size_t share = (size_t)(tu_rand(&rng) % (o->n + 1));
                memcpy(s->tok, o->tok, (share < s->n ? share : s->n) * sizeof *s->tok);
            }
        }

    worker *ws = calloc(N_THREADS, sizeof *ws);
    assert_non_null(ws);
    pthread_t tid[N_THREADS];
    for (int t = 0; t < N_THREADS; t++) {
        worker *w = &ws[t];
        w->sh = sh;
        w->id = t;
        w->rng = 0x7468726561647300ull + (uint64_t)t;
        w->priv = (tu_layout){ .page_tokens = PRIVATE_PT[t], .n_tensors = 2,
                               .bpt = { 12, 4 }, .model = "th-private" };
        snprintf(w->scope, sizeof w->scope, "t%d", t);
        for (int i = 0; i < POOL; i++) {
            w->own[i].n = 1 + (size_t)(tu_rand(&w->rng) % MAX_LEN);
            tu_tokens(&w->rng, w->own[i].tok, w->own[i].n, VOCAB);
        }
    }
    for (int t = 0; t < N_THREADS; t++)
        assert_int_equal(pthread_create(&tid[t], NULL, worker_main, &ws[t]), 0);
    uint64_t failures = 0, verified = 0;
    for (int t = 0; t < N_THREADS; t++) {
        assert_int_equal(pthread_join(tid[t], NULL), 0);
        failures += ws[t].failures;
        verified += ws[t].n_verified_tokens;
        if (ws[t].failures)
            print_error("%s; %llu failures in all\n", ws[t].first_failure,
                        (unsigned long long)ws[t].failures);
    }
    int check = sb_store_check(sh->st);
    sb_stats s;
    assert_int_equal(sb_store_stats(sh->st, &s), SB_OK);
    assert_int_equal(sb_store_close(sh->st), SB_OK);
    print_message("%d threads x %d steps: %llu tokens verified, %llu lookups, %llu puts, "
                  "%llu commits, %llu copies on write, %llu evictions, %llu budget denials\n",
                  N_THREADS, TH_STEPS, (unsigned long long)verified,
                  (unsigned long long)s.lookups, (unsigned long long)s.puts,
                  (unsigned long long)s.commits, (unsigned long long)s.cow_copies,
                  (unsigned long long)s.evictions, (unsigned long long)s.budget_denials);
    free(ws);
    free(sh);
    assert_int_equal(failures, 0);
    assert_int_equal(check, SB_OK);
    assert_true(s.evictions > 0); /* eviction ran alongside everything else */
    assert_true(s.cow_copies > 0);
    /* Everything the threads held is released: only the index holds pages. */
    assert_int_equal(s.pinned_pages, 0);
    assert_int_equal(s.pins, 0);
    assert_int_equal(s.ram_pages, s.indexed_pages);
}

/* ---- regression: a put racing a supersede ------------------------------------- */

/* Thread A puts s[0, 5) with a point state, page_tokens 4: the whole request
 * is indexed and ends inside page 1, so the put pins the page that covers
 * it (s's partial page of 3 tokens, or its full page) and then, unlocked,
 * allocates the point. Thread B meanwhile puts s[0, 7) (a partial page),
 * then s[0, 8) (which supersedes that partial page), then takes the budget
 * with fresh pages so the superseding page is evicted. When B's steps land
 * inside A's unlocked window, A's commit finds fewer tokens indexed than
 * its first walk did. sb_ns_put may only return SB_OK or SB_ERR_BUDGET
 * here; it must never fail with an error the header does not list for it. */
typedef struct race {
    sb_store *st;
    _Atomic int stop;
    uint64_t bad;                /* A: puts with an undocumented result */
    int first_bad;
    uint64_t puts;
} race;

static const tu_layout RACE_L = { .page_tokens = 4, .n_tensors = 1, .bpt = { 16 },
                                  .point_bytes = 16, .model = "th-race" };
static const uint32_t RACE_S[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void *race_a(void *arg)
{
    race *r = arg;
    uint64_t deadline = now_ms() + 1500; /* at most 2000000 puts or 1.5 s */
    sb_ns *ns = open_ns(r->st, &RACE_L, "race");
    void **state = tu_state(&RACE_L, RACE_S, 5);
    void *point = tu_point(&RACE_L, RACE_S, 5);
    for (int i = 0; i < 2000000 && !atomic_load(&r->stop); i++) {
        if (i % 1024 == 0 && now_ms() > deadline)
            break;
        size_t stored = 0;
        int rc = sb_ns_put(ns, RACE_S, 5, (const void *const *)state, point, &stored);
        r->puts++;
        if (rc != SB_OK && rc != SB_ERR_BUDGET) {
            if (!r->bad++)
                r->first_bad = rc;
            atomic_store(&r->stop, 1);
        }
    }
    atomic_store(&r->stop, 1);
    free(point);
    tu_free_state(&RACE_L, state);
    sb_ns_close(ns);
    return NULL;
}

static void *race_b(void *arg)
{
    race *r = arg;
    sb_ns *ns = open_ns(r->st, &RACE_L, "race");
    void **s7 = tu_state(&RACE_L, RACE_S, 7), **s8 = tu_state(&RACE_L, RACE_S, 8);
    while (!atomic_load(&r->stop)) {
        sb_ns_put(ns, RACE_S, 7, (const void *const *)s7, NULL, NULL);
        sb_ns_put(ns, RACE_S, 8, (const void *const *)s8, NULL, NULL);
        sb_page *p[2] = { NULL, NULL };
        for (int i = 0; i < 2; i++)
            if (sb_ns_page_alloc(ns, &p[i]) != SB_OK)
                p[i] = NULL;
        for (int i = 0; i < 2; i++)
            sb_page_unref(p[i]);
    }
    tu_free_state(&RACE_L, s7);
    tu_free_state(&RACE_L, s8);
    sb_ns_close(ns);
    return NULL;
}

static void test_threads_put_races_supersede(void **state)
{
    (void)state;
    race r = { 0 };
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.ram_pages = 3;
    assert_int_equal(sb_store_open(&cfg, &r.st), SB_OK);
    sb_ns *ns = open_ns(r.st, &RACE_L, "race");
    assert_non_null(ns);
    atomic_init(&r.stop, 0);
    pthread_t a, b;
    assert_int_equal(pthread_create(&a, NULL, race_a, &r), 0);
    assert_int_equal(pthread_create(&b, NULL, race_b, &r), 0);
    assert_int_equal(pthread_join(a, NULL), 0);
    assert_int_equal(pthread_join(b, NULL), 0);
    int check = sb_store_check(r.st);
    sb_ns_close(ns);
    sb_store_close(r.st);
    print_message("%llu puts of a fully indexed prefix raced a supersede and eviction\n",
                  (unsigned long long)r.puts);
    if (r.bad) {
        print_error("sb_ns_put failed with %s, which it does not document\n",
                    sb_strerror(r.first_bad));
        fail();
    }
    assert_int_equal(check, SB_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_random),
        cmocka_unit_test(test_threads_put_races_supersede),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
