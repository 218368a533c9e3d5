/* Description: zero-copy mode. Pages from sb_ns_page_alloc, filled by hand
 * through the documented page layout (sb_ns_tensor_offset, bytes_per_token)
 * and committed with sb_ns_commit, come back from a later match as the very
 * same sb_page pointers holding the bytes written, and restore in copy mode
 * too. A commit sharing a prefix with the index deduplicates: the caller's
 * pages[i] become the index's pages, stats.pages_dedup grows and the
 * duplicates stop counting in stats.ram_bytes. sb_page_writable copies a
 * committed or shared page (exactly its first n_keep slices) and leaves a
 * fresh private one alone; writing the copy never changes what the index
 * restores. Committing a committed page for other tokens is
 * SB_ERR_PAGE_STATE, a page of another namespace SB_ERR_FOREIGN_PAGE, and
 * both change nothing. Memory follows the references: a page counts from
 * alloc until its last reference goes, and evictions return it. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define POISON 0x5A

static const tu_layout LAYOUT = { .page_tokens = 4, .n_tensors = 3, .bpt = { 8, 24, 5 } };

static size_t page_bytes(sb_ns *ns)
{
    sb_ns_info info;
    assert_int_equal(sb_ns_get_info(ns, &info), SB_OK);
    return info.page_bytes;
}

static size_t regions(const tu_layout *l, size_t n)
{
    return (n + l->page_tokens - 1) / l->page_tokens;
}

/* Tokens of region r of a sequence of n tokens. */
static uint32_t region_tokens(const tu_layout *l, size_t n, size_t r)
{
    size_t rest = n - r * l->page_tokens;
    return rest < l->page_tokens ? (uint32_t)rest : l->page_tokens;
}

/* Write region r (k slices) of state into page p through the page layout;
 * every other byte of the page is poisoned. */
static void write_region(sb_ns *ns, const tu_layout *l, sb_page *p, void **state, size_t r,
                         uint32_t k)
{
    uint8_t *d = sb_page_data(p);
    assert_non_null(d);
    memset(d, POISON, page_bytes(ns));
    for (uint32_t t = 0; t < l->n_tensors; t++) {
        const uint8_t *src = (const uint8_t *)state[t] + r * l->page_tokens * l->bpt[t];
        memcpy(d + sb_ns_tensor_offset(ns, t), src, (size_t)k * l->bpt[t]);
    }
}

/* A fresh page from the bank holding region r (k slices) of state. */
static sb_page *hand_page(sb_ns *ns, const tu_layout *l, void **state, size_t r, uint32_t k)
{
    sb_page *p = NULL;
    assert_int_equal(sb_ns_page_alloc(ns, &p), SB_OK);
    assert_non_null(p);
    assert_int_equal(sb_page_tokens(p), 0);
    assert_true(((uintptr_t)sb_page_data(p) & 4095u) == 0);
    write_region(ns, l, p, state, r, k);
    return p;
}

/* Fresh pages holding the synthetic state of tokens[0, n). */
static void hand_pages(sb_ns *ns, const tu_layout *l, const uint32_t *tokens, size_t n,
                       sb_page **pages)
{
    void **state = tu_state(l, tokens, n);
    for (size_t r = 0; r < regions(l, n); r++)
        pages[r] = hand_page(ns, l, state, r, region_tokens(l, n, r));
    tu_free_state(l, state);
}


/* Match tokens[0, n), put new references to its pages in out (room for
 * regions(n)), return L. */
static size_t match_pages(sb_ns *ns, const uint32_t *tokens, size_t n, sb_page **out)
{
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, tokens, n, &m), SB_OK);
    sb_match_info info;
    assert_int_equal(sb_match_get_info(m, &info), SB_OK);
    assert_int_equal(sb_match_pages(m, 0, info.n_pages, out), SB_OK);
    sb_match_release(m);
    return info.n_tokens;
}

static void unref_all(sb_page **pages, size_t n)
{
    for (size_t i = 0; i < n; i++)
        sb_page_unref(pages[i]);
}

/* ---- commit and match --------------------------------------------------------- */

static void test_zerocopy_commit_match(void **state)
{
    (void)state;
    const tu_layout *l = &LAYOUT;
    sb_store *st = tu_store(0);
    sb_ns *ns = tu_ns(st, l, "zc");
    /* The page layout as the header draws it: tensors at 64-byte rounded
     * offsets, the page rounded up to 4096. */
    assert_int_equal(sb_ns_tensor_offset(ns, 0), 0);
    assert_int_equal(sb_ns_tensor_offset(ns, 1), 64);  /* round_up(4 * 8, 64) */
    assert_int_equal(sb_ns_tensor_offset(ns, 2), 192); /* + round_up(4 * 24, 64) */
    assert_int_equal(sb_ns_tensor_offset(ns, 3), (size_t)-1);
    assert_int_equal(sb_ns_tensor_offset(NULL, 0), (size_t)-1);
    size_t pb = page_bytes(ns);
    assert_int_equal(pb, 4096);

    uint64_t rng = 21;
    uint32_t tok[10];
    tu_tokens(&rng, tok, 10, 1000);
    sb_page *pages[3], *orig[3];
    hand_pages(ns, l, tok, 10, pages);
    memcpy(orig, pages, sizeof orig);
    assert_int_equal(tu_stats(st).ram_bytes, 3 * pb);
    assert_int_equal(tu_stats(st).indexed_pages, 0);
    assert_int_equal(sb_ns_commit(ns, tok, 10, pages, NULL), SB_OK);
    tu_check(st);
    /* Nothing was deduplicated: the caller keeps its pages, now committed. */
    assert_memory_equal(pages, orig, sizeof orig);
    assert_int_equal(sb_page_tokens(pages[0]), 4);
    assert_int_equal(sb_page_tokens(pages[1]), 4);
    assert_int_equal(sb_page_tokens(pages[2]), 2);
    sb_stats s = tu_stats(st);
    assert_int_equal(s.commits, 1);
    assert_int_equal(s.pages_new, 3);
    assert_int_equal(s.indexed_pages, 3);
    assert_int_equal(s.pinned_pages, 3); /* held by the caller too */
    assert_int_equal(s.ram_bytes, 3 * pb);

    /* A match hands back the very same pages, holding what was written. */
    sb_page *got[3];
    assert_int_equal(match_pages(ns, tok, 10, got), 10);
    assert_memory_equal(got, orig, sizeof orig);
    for (size_t r = 0; r < 3; r++)
        assert_true(tu_page_holds(ns, l, got[r], tok, r, region_tokens(l, 10, r)));
    unref_all(got, 3);
    /* A shorter match: the first pages, the same ones. */
    assert_int_equal(match_pages(ns, tok, 6, got), 6);
    assert_ptr_equal(got[0], orig[0]);
    assert_ptr_equal(got[1], orig[1]);
    unref_all(got, 2);

    /* Copy mode restores the same bytes, every prefix. */
    unref_all(pages, 3);
    assert_int_equal(tu_stats(st).pinned_pages, 0);
    assert_int_equal(tu_stats(st).ram_bytes, 3 * pb);
    for (size_t n = 1; n <= 10; n++)
        assert_int_equal(tu_match_verify(ns, l, tok, n), n);
    /* Recommitting the index's own pages for their own tokens is a no-op. */
    assert_int_equal(match_pages(ns, tok, 10, got), 10);
    assert_int_equal(sb_ns_commit(ns, tok, 10, got, NULL), SB_OK);
    assert_memory_equal(got, orig, sizeof orig);
    unref_all(got, 3);
    assert_int_equal(tu_stats(st).indexed_pages, 3);
    assert_int_equal(tu_stats(st).ram_bytes, 3 * pb);
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
}

/* ---- deduplication --------------------------------------------------------------- */

static void test_zerocopy_dedup(void **state)
{
    (void)state;
    const tu_layout *l = &LAYOUT;
    sb_store *st = tu_store(0);
    sb_ns *ns = tu_ns(st, l, "dedup");
    size_t pb = page_bytes(ns);
    uint64_t rng = 22;
    /* a: 14 tokens (pages 4 4 4 2); b: a's first 9 tokens, then its own
     * (16 tokens, 4 pages): regions 0 and 1 are a's, region 2 parts at 9. */
    uint32_t a[14], b[16];
    tu_tokens(&rng, a, 14, 1000);
    memcpy(b, a, 9 * sizeof *b);
    tu_tokens(&rng, b + 9, 7, 1000);
    b[9] = a[9] + 1000;

    sb_page *pa[4], *pbg[4], *orig_b[4];
    hand_pages(ns, l, a, 14, pa);
    assert_int_equal(sb_ns_commit(ns, a, 14, pa, NULL), SB_OK);
    hand_pages(ns, l, b, 16, pbg);
    memcpy(orig_b, pbg, sizeof orig_b);
    sb_stats s0 = tu_stats(st);
    assert_int_equal(s0.ram_bytes, 8 * pb);
    assert_int_equal(sb_ns_commit(ns, b, 16, pbg, NULL), SB_OK);
    tu_check(st);
    sb_stats s1 = tu_stats(st);
    /* The caller's pages for the shared full regions are now a's. */
    assert_ptr_equal(pbg[0], pa[0]);
    assert_ptr_equal(pbg[1], pa[1]);
    assert_ptr_equal(pbg[2], orig_b[2]);
    assert_ptr_equal(pbg[3], orig_b[3]);
    assert_int_equal(s1.pages_dedup - s0.pages_dedup, 2);
    assert_int_equal(s1.pages_new - s0.pages_new, 2);
    assert_int_equal(s1.indexed_pages, 6);
    /* The duplicates were the caller's alone: they are gone already. */
    assert_int_equal(s1.ram_bytes, 6 * pb);
    assert_int_equal(s1.ram_pages, 6);
    for (size_t r = 0; r < 4; r++)
        assert_true(tu_page_holds(ns, l, pbg[r], b, r, region_tokens(l, 16, r)));

    /* After the caller drops every reference, only indexed pages count. */
    unref_all(pa, 4);
    unref_all(pbg, 4);
    sb_stats s2 = tu_stats(st);
    assert_int_equal(s2.ram_bytes, 6 * pb);
    assert_int_equal(s2.ram_bytes, s2.indexed_bytes);
    assert_int_equal(s2.pinned_pages, 0);
    assert_int_equal(tu_match_verify(ns, l, a, 14), 14);
    assert_int_equal(tu_match_verify(ns, l, b, 16), 16);

    /* The same sequence again with fresh pages: all four are duplicates. */
    sb_page *again[4], *idx[4];
    hand_pages(ns, l, b, 16, again);
    assert_int_equal(sb_ns_commit(ns, b, 16, again, NULL), SB_OK);
    assert_int_equal(match_pages(ns, b, 16, idx), 16);
    assert_memory_equal(again, idx, sizeof idx);
    unref_all(idx, 4);
    unref_all(again, 4);
    sb_stats s3 = tu_stats(st);
    assert_int_equal(s3.pages_dedup - s2.pages_dedup, 4);
    assert_int_equal(s3.pages_new, s2.pages_new);
    assert_int_equal(s3.ram_bytes, 6 * pb);

    /* A prefix of a ending mid-page (6 tokens): region 0 is a's page; the
     * index already holds the 2 tokens of region 1 too, in a's full page. */
    sb_page *pre[2];
    hand_pages(ns, l, a, 6, pre);
    assert_int_equal(sb_ns_commit(ns, a, 6, pre, NULL), SB_OK);
    assert_int_equal(match_pages(ns, a, 14, idx), 14);
    assert_ptr_equal(pre[0], idx[0]);
    assert_ptr_equal(pre[1], idx[1]);
    unref_all(idx, 4);
    assert_true(tu_page_holds(ns, l, pre[1], a, 1, 2));
    unref_all(pre, 2);
    assert_int_equal(tu_stats(st).ram_bytes, 6 * pb);
    assert_int_equal(tu_match_verify(ns, l, a, 6), 6);
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
}

/* ---- copy on write ------------------------------------------------------------------ */

static void test_zerocopy_writable_tail(void **state)
{
    (void)state;
    const tu_layout *l = &LAYOUT;
    sb_store *st = tu_store(0);
    sb_ns *ns = tu_ns(st, l, "cow");
    size_t pb = page_bytes(ns);
    uint64_t rng = 23;
    /* s: 10 tokens (pages 4 4 2); s2: s plus 4 tokens (pages 4 4 4 2). */
    uint32_t s2[14];
    tu_tokens(&rng, s2, 14, 1000);
    const uint32_t *s = s2;
    sb_page *ps[3];
    hand_pages(ns, l, s, 10, ps);
    assert_int_equal(sb_ns_commit(ns, s, 10, ps, NULL), SB_OK);
    unref_all(ps, 3);

    /* A runtime matches s and wants to append: the partial tail page is the
     * index's, so it asks for a writable copy keeping its 2 slices. */
    sb_page *p[4];
    assert_int_equal(match_pages(ns, s2, 14, p), 10);
    sb_page *tail = p[2];
    assert_int_equal(sb_page_tokens(tail), 2);
    sb_stats s0 = tu_stats(st);
    assert_int_equal(sb_page_writable(ns, &p[2], 3), SB_ERR_INVAL); /* > its 2 tokens */
    assert_int_equal(sb_page_writable(ns, &p[2], 5), SB_ERR_INVAL); /* > page_tokens */
    assert_ptr_equal(p[2], tail);
    assert_int_equal(sb_page_writable(ns, &p[2], 2), SB_OK);
    assert_ptr_not_equal(p[2], tail);
    assert_int_equal(sb_page_tokens(p[2]), 0); /* fresh, private */
    assert_true(tu_page_holds(ns, l, p[2], s, 2, 2));
    sb_stats s1 = tu_stats(st);
    assert_int_equal(s1.cow_copies - s0.cow_copies, 1);
    assert_int_equal(s1.ram_bytes - s0.ram_bytes, pb);
    /* A fresh private page is already writable: the same pointer. */
    sb_page *q = p[2];
    assert_int_equal(sb_page_writable(ns, &p[2], 2), SB_OK);
    assert_ptr_equal(p[2], q);
    assert_int_equal(tu_stats(st).cow_copies, s1.cow_copies);

    /* Scribble over the whole copy: s still restores exactly, from the
     * index's page, which is unchanged. */
    memset(sb_page_data(q), 0xEE, pb);
    assert_int_equal(tu_match_verify(ns, l, s, 10), 10);
    sb_page *chk[4];
    assert_int_equal(match_pages(ns, s, 10, chk), 10);
    assert_ptr_equal(chk[2], tail);
    assert_true(tu_page_holds(ns, l, chk[2], s, 2, 2));
    unref_all(chk, 3);

    /* Append: region 2 gets all 4 slices of s2, region 3 a new page, and
     * s2 is committed on the matched pages plus these. */
    void **st2 = tu_state(l, s2, 14);
    write_region(ns, l, q, st2, 2, 4);
    p[3] = hand_page(ns, l, st2, 3, 2);
    tu_free_state(l, st2);
    sb_page *before[4];
    memcpy(before, p, sizeof before);
    assert_int_equal(sb_ns_commit(ns, s2, 14, p, NULL), SB_OK);
    assert_memory_equal(p, before, sizeof before);
    assert_int_equal(sb_page_tokens(q), 4);
    sb_stats s2s = tu_stats(st);
    assert_int_equal(s2s.pages_superseded - s1.pages_superseded, 1);
    tu_check(st);
    for (size_t n = 1; n <= 14; n++)
        assert_int_equal(tu_match_verify(ns, l, s2, n), n);
    assert_int_equal(match_pages(ns, s2, 14, chk), 14);
    assert_ptr_equal(chk[2], q); /* s's 10 tokens now come from the new page */
    unref_all(chk, 3);
    sb_page_unref(chk[3]);
    unref_all(p, 4);

    /* A match that ends mid-page on a full page: a request leaving s2 at 6.
     * The copy keeps exactly the 2 slices asked for, whatever follows. */
    uint32_t req[8];
    memcpy(req, s2, 6 * sizeof *req);
    req[6] = 0x7fff0000u;
    req[7] = 1;
    sb_page *mp[2];
    assert_int_equal(match_pages(ns, req, 8, mp), 6);
    sb_page *full = mp[1];
    assert_int_equal(sb_page_tokens(full), 4);
    assert_int_equal(sb_page_writable(ns, &mp[1], 2), SB_OK);
    assert_ptr_not_equal(mp[1], full);
    assert_true(tu_page_holds(ns, l, mp[1], s2, 1, 2));
    memset(sb_page_data(mp[1]), 0xEE, pb);
    assert_int_equal(tu_match_verify(ns, l, s2, 14), 14);
    /* n_keep 0 is a fresh page with nothing kept. */
    assert_int_equal(sb_page_writable(ns, &mp[0], 0), SB_OK);
    assert_int_equal(sb_page_tokens(mp[0]), 0);
    unref_all(mp, 2);

    /* A fresh page shared with another reference is copied too; the other
     * reference keeps the original. */
    void **st_s = tu_state(l, s, 4);
    sb_page *f = hand_page(ns, l, st_s, 0, 4);
    tu_free_state(l, st_s);
    sb_page *g = sb_page_ref(f);
    assert_int_equal(sb_page_writable(ns, &g, 3), SB_OK);
    assert_ptr_not_equal(g, f);
    assert_true(tu_page_holds(ns, l, g, s, 0, 3));
    assert_true(tu_page_holds(ns, l, f, s, 0, 4));
    sb_page_unref(g);
    sb_page_unref(f);

    sb_stats end = tu_stats(st);
    assert_int_equal(end.ram_bytes, end.indexed_bytes);
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
}

/* ---- refusals ------------------------------------------------------------------------ */

/* Everything observable about a namespace that a failed commit must leave. */
typedef struct snap {
    uint64_t commits, pages_new, pages_dedup, indexed_pages, ram_bytes, index_tokens;
} snap;

static snap snapshot(sb_store *st)
{
    sb_stats s = tu_stats(st);
    return (snap){ s.commits, s.pages_new, s.pages_dedup, s.indexed_pages, s.ram_bytes,
                   s.index_tokens };
}

static void assert_same(sb_store *st, const snap *a)
{
    snap b = snapshot(st);
    assert_int_equal(b.commits, a->commits);
    assert_int_equal(b.pages_new, a->pages_new);
    assert_int_equal(b.pages_dedup, a->pages_dedup);
    assert_int_equal(b.indexed_pages, a->indexed_pages);
    assert_int_equal(b.ram_bytes, a->ram_bytes);
    assert_int_equal(b.index_tokens, a->index_tokens);
}

static void test_zerocopy_page_state(void **state)
{
    (void)state;
    const tu_layout *l = &LAYOUT;
    sb_store *st = tu_store(0);
    sb_ns *ns = tu_ns(st, l, "state");
    uint64_t rng = 24;
    uint32_t s[12], t[8], u[8];
    tu_tokens(&rng, s, 12, 1000);
    tu_tokens(&rng, t, 8, 1000);
    t[0] = s[0] + 1000;
    memcpy(u, s, 4 * sizeof *u);
    tu_tokens(&rng, u + 4, 4, 1000);
    u[4] = s[4] + 1000;

    sb_page *ps[3];
    hand_pages(ns, l, s, 12, ps);
    assert_int_equal(sb_ns_commit(ns, s, 12, ps, NULL), SB_OK);

    /* t shares nothing with s: s's committed page 0 given for t's region 0. */
    sb_page *fresh[2];
    hand_pages(ns, l, t, 8, fresh);
    snap before = snapshot(st);
    sb_page *arg[2] = { ps[0], fresh[1] };
    assert_int_equal(sb_ns_commit(ns, t, 8, arg, NULL), SB_ERR_PAGE_STATE);
    assert_ptr_equal(arg[0], ps[0]);
    assert_ptr_equal(arg[1], fresh[1]);
    assert_int_equal(sb_page_tokens(fresh[1]), 0); /* not committed */
    assert_same(st, &before);
    /* s's page 1 given for s's region 0 (the right tokens, the wrong place). */
    sb_page *swapped[3] = { ps[1], ps[0], ps[2] };
    assert_int_equal(sb_ns_commit(ns, s, 12, swapped, NULL), SB_ERR_PAGE_STATE);
    assert_same(st, &before);
    /* u shares s's region 0: the fresh page there would be deduplicated,
     * but region 1 is s's committed page for other tokens. Nothing is
     * replaced: the caller's fresh page 0 stays its own. */
    sb_page *fu[2];
    hand_pages(ns, l, u, 8, fu);
    sb_page *arg2[2] = { fu[0], sb_page_ref(ps[1]) };
    before = snapshot(st);
    assert_int_equal(sb_ns_commit(ns, u, 8, arg2, NULL), SB_ERR_PAGE_STATE);
    assert_ptr_equal(arg2[0], fu[0]);
    assert_ptr_equal(arg2[1], ps[1]);
    assert_int_equal(sb_page_tokens(fu[0]), 0);
    assert_true(tu_page_holds(ns, l, fu[0], u, 0, 4));
    assert_same(st, &before);
    tu_check(st);
    assert_int_equal(tu_match_len(ns, t, 8), 0);
    assert_int_equal(tu_match_len(ns, u, 8), 4);
    assert_int_equal(tu_match_verify(ns, l, s, 12), 12);

    /* The way it is meant to be done: a writable copy, then commit. */
    assert_int_equal(sb_page_writable(ns, &arg2[1], 0), SB_OK);
    void **su = tu_state(l, u, 8);
    write_region(ns, l, arg2[1], su, 1, 4);
    tu_free_state(l, su);
    assert_int_equal(sb_ns_commit(ns, u, 8, arg2, NULL), SB_OK);
    assert_ptr_equal(arg2[0], ps[0]); /* deduplicated now */
    assert_int_equal(tu_match_verify(ns, l, u, 8), 8);
    assert_int_equal(tu_match_verify(ns, l, s, 12), 12);
    tu_check(st);
    unref_all(arg2, 2);
    sb_page_unref(fu[1]);
    unref_all(fresh, 2);
    unref_all(ps, 3);
    sb_ns_close(ns);
    sb_store_close(st);
}

static void test_zerocopy_foreign_page(void **state)
{
    (void)state;
    const tu_layout *l = &LAYOUT;
    sb_store *st = tu_store(0);
    sb_ns *a = tu_ns(st, l, "a");
    sb_ns *b = tu_ns(st, l, "b");
    uint64_t rng = 25;
    uint32_t s[8];
    tu_tokens(&rng, s, 8, 1000);

    sb_page *pa[2], *pb[2];
    hand_pages(a, l, s, 8, pa);
    hand_pages(b, l, s, 8, pb);
    snap before = snapshot(st);
    /* b's fresh pages, all or one of them, in a's commit. */
    assert_int_equal(sb_ns_commit(a, s, 8, pb, NULL), SB_ERR_FOREIGN_PAGE);
    sb_page *mixed[2] = { pa[0], pb[1] };
    assert_int_equal(sb_ns_commit(a, s, 8, mixed, NULL), SB_ERR_FOREIGN_PAGE);
    assert_ptr_equal(mixed[0], pa[0]);
    assert_int_equal(sb_page_tokens(pa[0]), 0);
    assert_same(st, &before);
    assert_int_equal(tu_match_len(a, s, 8), 0);
    /* A committed page of b, for the very same tokens. */
    assert_int_equal(sb_ns_commit(b, s, 8, pb, NULL), SB_OK);
    before = snapshot(st);
    assert_int_equal(sb_ns_commit(a, s, 8, pb, NULL), SB_ERR_FOREIGN_PAGE);
    assert_same(st, &before);
    assert_int_equal(tu_match_len(a, s, 8), 0);
    /* Copy on write through the wrong namespace. */
    sb_page *x = pb[0];
    assert_int_equal(sb_page_writable(a, &x, 1), SB_ERR_FOREIGN_PAGE);
    assert_ptr_equal(x, pb[0]);
    assert_int_equal(tu_stats(st).cow_copies, 0);
    tu_check(st);
    /* a's own pages still commit. */
    assert_int_equal(sb_ns_commit(a, s, 8, pa, NULL), SB_OK);
    assert_int_equal(tu_match_verify(a, l, s, 8), 8);
    assert_int_equal(tu_match_verify(b, l, s, 8), 8);
    unref_all(pa, 2);
    unref_all(pb, 2);
    tu_check(st);
    sb_ns_close(a);
    sb_ns_close(b);
    sb_store_close(st);
}

/* ---- references and memory ------------------------------------------------------------ */


static void test_zerocopy_refcounts(void **state)
{
    (void)state;
    const tu_layout *l = &LAYOUT;
    sb_store *st = tu_store_pages(12);
    sb_ns *ns = tu_ns(st, l, "refs");
    sb_ns *other = tu_ns(st, l, "pressure");
    size_t pb = page_bytes(ns);
    uint64_t rng = 26;

    /* A fresh page counts from alloc to its last reference. */
    sb_page *f = NULL;
    assert_int_equal(sb_ns_page_alloc(ns, &f), SB_OK);
    assert_int_equal(tu_stats(st).ram_bytes, pb);
    assert_int_equal(tu_stats(st).ram_pages, 1);
    sb_page_ref(f);
    sb_page_unref(f);
    assert_int_equal(tu_stats(st).ram_bytes, pb);
    sb_page_unref(f);
    assert_int_equal(tu_stats(st).ram_bytes, 0);
    assert_int_equal(tu_stats(st).ram_pages, 0);

    /* A superseded partial page lives on while the caller holds it. */
    uint32_t s[16];
    tu_tokens(&rng, s, 16, 1000);
    sb_page *x[2], *y[2];
    hand_pages(ns, l, s, 6, x);
    assert_int_equal(sb_ns_commit(ns, s, 6, x, NULL), SB_OK);
    hand_pages(ns, l, s, 8, y);
    assert_int_equal(sb_ns_commit(ns, s, 8, y, NULL), SB_OK);
    assert_ptr_equal(y[0], x[0]);
    assert_int_equal(tu_stats(st).indexed_pages, 2);
    assert_int_equal(tu_stats(st).ram_bytes, 3 * pb); /* x0, x1 (superseded), y1 */
    assert_true(tu_page_holds(ns, l, x[1], s, 1, 2));
    sb_page_unref(x[1]);
    assert_int_equal(tu_stats(st).ram_bytes, 2 * pb);
    sb_page_unref(x[0]);
    unref_all(y, 2);
    tu_check(st);

    /* Held pages are never evicted. s (4 pages) is held by the caller and by
     * page references taken from a match; another namespace then puts three
     * budgets' worth of sequences. */
    sb_page *ps[4], *mp[4];
    hand_pages(ns, l, s, 16, ps);
    assert_int_equal(sb_ns_commit(ns, s, 16, ps, NULL), SB_OK);
    assert_int_equal(match_pages(ns, s, 16, mp), 16);
    uint32_t r[16];
    for (int i = 0; i < 9; i++) {
        tu_tokens(&rng, r, 16, 1000);
        r[0] = 2000 + (uint32_t)i;
        tu_put(other, l, r, 16, false, SB_OK);
        tu_check(st);
    }
    sb_stats s1 = tu_stats(st);
    assert_true(s1.evictions > 0);
    assert_true(s1.ram_pages <= 12);
    assert_int_equal(s1.pinned_pages, 4);
    unref_all(mp, 4);
    assert_int_equal(tu_match_verify(ns, l, s, 16), 16);
    unref_all(ps, 4);
    assert_int_equal(tu_stats(st).pinned_pages, 0);

    /* Now nothing holds s but the index. A commit elsewhere in ns moves its
     * protection off s; then pressure evicts s and its memory comes back. */
    uint32_t one[4] = { 9001, 9002, 9003, 9004 };
    tu_put(ns, l, one, 4, false, SB_OK);
    for (int i = 0; i < 9; i++) {
        tu_tokens(&rng, r, 16, 1000);
        r[0] = 3000 + (uint32_t)i;
        tu_put(other, l, r, 16, false, SB_OK);
        tu_check(st);
    }
    assert_int_equal(tu_match_len(ns, s, 16), 0);
    assert_true(tu_stats(st).evictions > s1.evictions);
    /* Finally a sequence as large as the budget: everything else goes. */
    uint32_t big[48];
    tu_tokens(&rng, big, 48, 1000);
    big[0] = 4000;
    tu_put(other, l, big, 48, false, SB_OK);
    sb_ns_info info;
    assert_int_equal(sb_ns_get_info(ns, &info), SB_OK);
    assert_int_equal(info.ram_bytes, 0);
    assert_int_equal(info.indexed_pages, 0);
    sb_stats s2 = tu_stats(st);
    assert_int_equal(s2.ram_pages, 12);
    assert_int_equal(s2.ram_bytes, 12 * pb);
    assert_int_equal(s2.ram_bytes, s2.indexed_bytes);
    assert_int_equal(tu_match_verify(other, l, big, 48), 48);
    tu_check(st);
    sb_ns_close(ns);
    sb_ns_close(other);
    sb_store_close(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zerocopy_commit_match),
        cmocka_unit_test(test_zerocopy_dedup),
        cmocka_unit_test(test_zerocopy_writable_tail),
        cmocka_unit_test(test_zerocopy_page_state),
        cmocka_unit_test(test_zerocopy_foreign_page),
        cmocka_unit_test(test_zerocopy_refcounts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
