/* Description: batched lookups (sb_ns_lookup). Each request's answer is
 * exactly what sb_ns_match then finds for it (restorable prefix, pages in
 * RAM and on disk, point state, matched tokens, miss reason), for full
 * hits, partial pages, divergence, misses and point-required layouts; a
 * lookup pins nothing, reads nothing from disk (its pages stay on disk),
 * moves none of the match statistics, and is not a use: under pressure a
 * sequence only looked up is evicted before one matched since. Refusals:
 * NULL arguments, a request of zero tokens or over max_seq_tokens, each
 * leaving every answer unwritten; n == 0 is a no-op. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define PT 16u
static const tu_layout LAYOUT = { .page_tokens = PT, .n_tensors = 2, .bpt = { 64, 64 },
                                  .point_bytes = 32 };
static const tu_layout REQUIRED = { .page_tokens = PT, .n_tensors = 1, .bpt = { 64 },
                                    .point_bytes = 32, .flags = SB_LAYOUT_POINT_REQUIRED,
                                    .model = "required" };

/* reqs[i]'s answer equals what a match of the same tokens finds now. */
static void agree_with_match(sb_ns *ns, const sb_lookup *reqs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        sb_match *m;
        assert_int_equal(sb_ns_match(ns, reqs[i].tokens, reqs[i].n_tokens, &m), SB_OK);
        sb_match_info mi;
        assert_int_equal(sb_match_get_info(m, &mi), SB_OK);
        const sb_match_info *li = &reqs[i].info;
        assert_int_equal(li->n_tokens, mi.n_tokens);
        assert_int_equal(li->n_pages, mi.n_pages);
        assert_int_equal(li->n_pages_ram, mi.n_pages_ram);
        assert_int_equal(li->n_pages_disk, mi.n_pages_disk);
        assert_int_equal(li->n_matched_tokens, mi.n_matched_tokens);
        assert_int_equal(li->has_point, mi.has_point);
        assert_int_equal(li->miss, mi.miss);
        sb_match_release(m);
    }
}

static void req(sb_lookup *r, const uint32_t *tok, size_t n)
{
    memset(r, 0xA5, sizeof *r); /* the answer must be written */
    r->tokens = tok;
    r->n_tokens = n;
}

static void test_lookup_ram(void **state)
{
    (void)state;
    sb_store *st = tu_store(64u << 20);
    sb_ns *ns = tu_ns(st, &LAYOUT, NULL);
    uint64_t rng = 7;
    uint32_t a[100], b[100], c[40];
    tu_tokens(&rng, a, 100, 900);
    memcpy(b, a, 50 * sizeof *b); /* b diverges from a at 50 */
    tu_tokens(&rng, b + 50, 50, 900);
    b[50] = a[50] + 1;
    tu_tokens(&rng, c, 40, 900);
    c[0] = 950; /* shares nothing */
    tu_put(ns, &LAYOUT, a, 100, true, SB_OK);
    tu_put(ns, &LAYOUT, b, 70, false, SB_OK);

    sb_lookup reqs[7];
    req(&reqs[0], a, 100); /* all of it, with its point */
    req(&reqs[1], a, 37);  /* a partial page */
    req(&reqs[2], b, 100); /* 70 stored */
    req(&reqs[3], c, 40);  /* nothing */
    req(&reqs[4], a, 64);  /* a page boundary */
    req(&reqs[5], b, 50);  /* the shared prefix */
    req(&reqs[6], a, 100); /* the same twice */
    sb_stats s0 = tu_stats(st);
    assert_int_equal(sb_ns_lookup(ns, reqs, 7), SB_OK);
    sb_stats s1 = tu_stats(st);
    assert_int_equal(s1.lookups, s0.lookups);
    assert_int_equal(s1.hits, s0.hits);
    assert_int_equal(s1.hit_tokens, s0.hit_tokens);
    assert_int_equal(s1.miss_tokens, s0.miss_tokens);
    assert_int_equal(s1.pinned_pages, s0.pinned_pages);
    assert_int_equal(reqs[0].info.n_tokens, 100);
    assert_true(reqs[0].info.has_point);
    assert_int_equal(reqs[0].info.n_pages, 7);
    assert_int_equal(reqs[0].info.n_pages_ram, 7);
    assert_int_equal(reqs[1].info.n_tokens, 37);
    assert_int_equal(reqs[2].info.n_tokens, 70);
    assert_int_equal(reqs[2].info.miss, SB_MISS_NO_PREFIX);
    assert_int_equal(reqs[3].info.n_tokens, 0);
    assert_int_equal(reqs[3].info.n_pages, 0);
    assert_int_equal(reqs[5].info.n_tokens, 50);
    assert_memory_equal(&reqs[6].info, &reqs[0].info, sizeof reqs[0].info);
    agree_with_match(ns, reqs, 7);

    /* A layout that needs point states: L is the last point on the path. */
    sb_ns *rq = tu_ns(st, &REQUIRED, NULL);
    tu_put(rq, &REQUIRED, a, 40, true, SB_OK);
    tu_put(rq, &REQUIRED, a, 90, false, SB_OK);
    sb_lookup r2[2];
    req(&r2[0], a, 100);
    req(&r2[1], a, 30);
    assert_int_equal(sb_ns_lookup(rq, r2, 2), SB_OK);
    assert_int_equal(r2[0].info.n_tokens, 40);
    assert_int_equal(r2[0].info.n_matched_tokens, 90);
    assert_int_equal(r2[0].info.miss, SB_MISS_NO_POINT);
    assert_int_equal(r2[1].info.n_tokens, 0);
    agree_with_match(rq, r2, 2);
    sb_ns_close(rq);

    /* Refusals leave every answer unwritten. */
    sb_lookup bad[3];
    req(&bad[0], a, 10);
    req(&bad[1], a, 0);
    req(&bad[2], a, 10);
    sb_lookup before[3];
    memcpy(before, bad, sizeof bad);
    assert_int_equal(sb_ns_lookup(ns, bad, 3), SB_ERR_NO_TOKENS);
    assert_memory_equal(bad, before, sizeof bad);
    bad[1].n_tokens = (size_t)1 << 30;
    assert_int_equal(sb_ns_lookup(ns, bad, 3), SB_ERR_TOO_MANY_TOKENS);
    bad[1].n_tokens = 5;
    bad[1].tokens = NULL;
    assert_int_equal(sb_ns_lookup(ns, bad, 3), SB_ERR_INVAL);
    assert_int_equal(sb_ns_lookup(NULL, reqs, 1), SB_ERR_INVAL);
    assert_int_equal(sb_ns_lookup(ns, NULL, 1), SB_ERR_INVAL);
    assert_int_equal(sb_ns_lookup(ns, NULL, 0), SB_OK);
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
}

/* On disk: after a reopen every page is on disk only; a lookup says so and
 * leaves them there (a match after it finds them on disk still). */
static void test_lookup_disk(void **state)
{
    (void)state;
    char dir[128];
    tu_scratch_dir(dir, sizeof dir, "lookup");
    sb_config cfg = tu_small_disk_config();
    cfg.dir = dir;
    sb_store *st = NULL;
    assert_int_equal(sb_store_open(&cfg, &st), SB_OK);
    sb_ns *ns = tu_ns(st, &LAYOUT, NULL);
    uint64_t rng = 11;
    uint32_t a[80];
    tu_tokens(&rng, a, 80, 900);
    tu_put(ns, &LAYOUT, a, 80, true, SB_OK);
    assert_int_equal(sb_store_flush(st), SB_OK);
    sb_ns_close(ns);
    assert_int_equal(sb_store_close(st), SB_OK);

    assert_int_equal(sb_store_open(&cfg, &st), SB_OK);
    ns = tu_ns(st, &LAYOUT, NULL);
    sb_lookup r[2];
    req(&r[0], a, 80);
    req(&r[1], a, 20);
    sb_stats s0 = tu_stats(st);
    assert_int_equal(sb_ns_lookup(ns, r, 2), SB_OK);
    sb_stats s1 = tu_stats(st);
    assert_int_equal(r[0].info.n_tokens, 80);
    assert_int_equal(r[0].info.n_pages_disk, 5);
    assert_int_equal(r[0].info.n_pages_ram, 0);
    assert_true(r[0].info.has_point);
    assert_int_equal(r[1].info.n_pages_disk, 2);
    assert_int_equal(s1.disk_read_bytes, s0.disk_read_bytes);
    assert_int_equal(s1.lookups, s0.lookups);
    agree_with_match(ns, r, 2); /* matches do not load either */
    assert_int_equal(tu_restore_exact(ns, &LAYOUT, a, 80, NULL), 80);
    assert_int_equal(sb_ns_lookup(ns, r, 1), SB_OK);
    assert_int_equal(r[0].info.n_pages_ram, 5);
    assert_int_equal(r[0].info.n_pages_disk, 0);
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
    tu_remove_dir(dir);
}

/* Which of two sequences, put one after the other, is evicted first when
 * another namespace needs room, after the older one was looked up (match
 * false) or matched (match true). A one-page sequence put last takes the
 * protection of the namespace's newest page (evict.c, step 5). */
static bool older_survives(bool match)
{
    sb_store *st = tu_store_pages(10);
    sb_ns *ns = tu_ns(st, &LAYOUT, NULL), *other = tu_ns(st, &LAYOUT, "other");
    uint64_t rng = 3;
    uint32_t a[64], b[64], c[64], e[16];
    tu_tokens(&rng, a, 64, 900);
    tu_tokens(&rng, b, 64, 900);
    tu_tokens(&rng, c, 64, 900);
    tu_tokens(&rng, e, 16, 900);
    a[0] = 901, b[0] = 902, e[0] = 904;
    tu_put(ns, &LAYOUT, a, 64, false, SB_OK);
    tu_put(ns, &LAYOUT, b, 64, false, SB_OK);
    tu_put(ns, &LAYOUT, e, 16, false, SB_OK);
    if (match) {
        assert_int_equal(tu_match_len(ns, a, 64), 64);
    } else {
        sb_lookup r;
        req(&r, a, 64);
        assert_int_equal(sb_ns_lookup(ns, &r, 1), SB_OK);
        assert_int_equal(r.info.n_tokens, 64);
    }
    tu_put(other, &LAYOUT, c, 64, false, SB_OK); /* 4 pages where 1 is free */
    sb_lookup r[2];
    req(&r[0], a, 64);
    req(&r[1], b, 64);
    assert_int_equal(sb_ns_lookup(ns, r, 2), SB_OK);
    size_t la = r[0].info.n_tokens, lb = r[1].info.n_tokens;
    assert_true((la == 64) != (lb == 64)); /* one of them lost pages */
    tu_check(st);
    sb_ns_close(other);
    sb_ns_close(ns);
    sb_store_close(st);
    return la == 64;
}

static void test_lookup_not_a_use(void **state)
{
    (void)state;
    assert_true(older_survives(true));   /* a match is a use... */
    assert_false(older_survives(false)); /* ...a lookup is not */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookup_ram),
        cmocka_unit_test(test_lookup_disk),
        cmocka_unit_test(test_lookup_not_a_use),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
