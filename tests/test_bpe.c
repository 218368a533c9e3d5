/* test_bpe.c -- byte-level BPE (runtime/text/bpe.h) and the `gpt2`
 * vocabularies through the tokenizer.
 *
 * Description: the byte-to-unicode mapping is GPT-2's (a bijection; the
 * printable bytes are themselves, the 68 others U+0100.. in order); on
 * hand-built tables, merges apply by rank and not by position, the
 * leftmost pair wins a tie, a pair listed twice keeps its first rank,
 * ignore_merges takes a whole-word token, unmergeable symbols fall back
 * to byte tokens or unk, a byte without a token and no unk is refused;
 * and on the real llama-bpe, qwen2 and gpt-2 vocabularies, the encoder
 * equals a naive reference written here from the definition (pre-split
 * with the same splitter, then per word: apply the lowest-ranked merge
 * until none applies, over strings, scanning every pair each round) on
 * thousands of random strings, valid UTF-8 or not.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "text/bpe.h"
#include "gguf/gguf.h"
#include "text/pretok.h"
#include "tokutil.h"

/* ---- the mapping -------------------------------------------------------------------- */

static void mapping(void **state)
{
    (void)state;
    bool seen[0x144] = { false };
    int shifted = 0;
    for (int b = 0; b < 256; b++) {
        uint32_t cp = sb_rt_bpe_byte_cp((uint8_t)b);
        bool printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
        if (printable)
            assert_int_equal(cp, b);
        else
            assert_int_equal(cp, 0x100 + shifted++); /* in increasing byte order */
        assert_true(cp < 0x144 && !seen[cp]);
        seen[cp] = true;
        assert_int_equal(sb_rt_bpe_cp_byte(cp), b);
    }
    assert_int_equal(shifted, 68);
    assert_int_equal(sb_rt_bpe_byte_cp(' '), 0x120);
    assert_int_equal(sb_rt_bpe_byte_cp('\n'), 0x10a);
    assert_int_equal(sb_rt_bpe_byte_cp(0xad), 0x143);
    assert_int_equal(sb_rt_bpe_cp_byte(0xad), -1);
    assert_int_equal(sb_rt_bpe_cp_byte(0x144), -1);
    assert_int_equal(sb_rt_bpe_cp_byte(' '), -1);
    char out[16];
    size_t n;
    assert_true(sb_rt_bpe_unmap("\xc4\xa0hi\xc4\x8a", 6, out, &n)); /* "Ġhi\u010a" */
    assert_true(n == 4 && !memcmp(out, " hi\n", 4));
    assert_true(sb_rt_bpe_unmap("\xc3\xa9", 2, out, &n)); /* U+00E9 is byte 0xE9 */
    assert_true(n == 1 && (uint8_t)out[0] == 0xe9);
    assert_false(sb_rt_bpe_unmap("a b", 3, out, &n));   /* a raw space spells nothing */
    assert_false(sb_rt_bpe_unmap("\xc8\x80", 2, out, &n)); /* U+0200 */
    assert_false(sb_rt_bpe_unmap("\xff", 1, out, &n));
}

/* ---- hand-built tables -------------------------------------------------------------- */

typedef struct table {
    const char *tok[300];
    size_t tok_len[300];
    bool ok[300];
    uint32_t n;
    const char *merge[16];
    size_t merge_len[16];
    uint32_t n_merges;
} table;

static uint32_t add_tok(table *t, const char *s, bool ok)
{
    t->tok[t->n] = s;
    t->tok_len[t->n] = strlen(s);
    t->ok[t->n] = ok;
    return t->n++;
}

static void add_merge(table *t, const char *s)
{
    t->merge[t->n_merges] = s;
    t->merge_len[t->n_merges++] = strlen(s);
}

/* Every byte as a token (ids 0..255), so no fallback is needed. */
static void bytes(table *t)
{
    static char b[256][2];
    memset(t, 0, sizeof *t);
    for (int i = 0; i < 256; i++) {
        b[i][0] = (char)i;
        t->tok[i] = b[i];
        t->tok_len[i] = 1;
        t->ok[i] = true;
    }
    t->n = 256;
}

static sb_rt_bpe *build(table *t, bool ignore_merges, uint32_t unk)
{
    sb_rt_bpe *b;
    sb_rt_err err = { 0 };
    if (sb_rt_bpe_new(t->n, t->tok, t->tok_len, t->ok, t->merge, t->merge_len, t->n_merges,
                      ignore_merges, unk, &b, &err) != SB_OK)
        fail_msg("%s", err.msg);
    return b;
}

/* The ids of word w as a string of numbers "1 2 3". */
static const char *enc(sb_rt_bpe *b, const char *w, char *out, size_t cap)
{
    sb_rt_bpe_scratch s = { 0 };
    const uint32_t *ids;
    size_t n, k = 0;
    assert_int_equal(sb_rt_bpe_word(b, (const uint8_t *)w, strlen(w), &s, &ids, &n), SB_OK);
    out[0] = '\0';
    for (size_t i = 0; i < n; i++)
        k += (size_t)snprintf(out + k, cap - k, i ? " %u" : "%u", ids[i]);
    sb_rt_bpe_scratch_free(&s);
    return out;
}

static void rank_not_position(void **state)
{
    (void)state;
    table t;
    bytes(&t);
    uint32_t ab = add_tok(&t, "ab", true), bc = add_tok(&t, "bc", true);
    uint32_t bcd = add_tok(&t, "bcd", true);
    (void)ab;
    add_merge(&t, "b c");  /* rank 0 */
    add_merge(&t, "a b");  /* rank 1: leftmost, but a higher rank */
    add_merge(&t, "bc d"); /* rank 2 */
    sb_rt_bpe *b = build(&t, false, UINT32_MAX);
    char out[128], want[128];
    snprintf(want, sizeof want, "%u %u", (unsigned)'a', bcd);
    assert_string_equal(enc(b, "abcd", out, sizeof out), want);
    snprintf(want, sizeof want, "%u %u", (unsigned)'a', bc);
    assert_string_equal(enc(b, "abc", out, sizeof out), want);
    assert_int_equal(sb_rt_bpe_n_merges(b), 3);
    sb_rt_bpe_free(b);
}

static void leftmost_tie_and_first_rank(void **state)
{
    (void)state;
    table t;
    bytes(&t);
    uint32_t aa = add_tok(&t, "aa", true), xy = add_tok(&t, "xy", true);
    add_tok(&t, "yz", true);
    add_merge(&t, "a a"); /* 0 */
    add_merge(&t, "x y"); /* 1 */
    add_merge(&t, "y z"); /* 2 */
    add_merge(&t, "y z"); /* 3: listed twice, keeps rank 2 */
    add_merge(&t, "x y"); /* 4: listed twice, keeps rank 1 (else y z would win "xyz") */
    add_merge(&t, "nospace");                 /* not a pair: dropped */
    add_merge(&t, "\xc8\x80 a");              /* U+0200 spells no byte: dropped */
    sb_rt_bpe *b = build(&t, false, UINT32_MAX);
    char out[128], want[128];
    snprintf(want, sizeof want, "%u %u", aa, (unsigned)'a'); /* not "a aa" */
    assert_string_equal(enc(b, "aaa", out, sizeof out), want);
    snprintf(want, sizeof want, "%u %u", aa, aa);
    assert_string_equal(enc(b, "aaaa", out, sizeof out), want);
    snprintf(want, sizeof want, "%u %u", xy, (unsigned)'z');
    assert_string_equal(enc(b, "xyz", out, sizeof out), want);
    assert_int_equal(sb_rt_bpe_n_merges(b), 3);
    sb_rt_bpe_free(b);
}

static void ignore_merges_and_fallback(void **state)
{
    (void)state;
    table t;
    bytes(&t);
    uint32_t abc = add_tok(&t, "abc", true), bc = add_tok(&t, "bc", true);
    add_merge(&t, "b c");
    add_merge(&t, "a bc");
    add_merge(&t, "q q"); /* "qq" is no token: its bytes come out */
    t.ok['z'] = false;    /* byte z has no token: unk */
    uint32_t unk = add_tok(&t, "<unk>", false);
    char out[128], want[128];
    sb_rt_bpe *b = build(&t, false, unk);
    snprintf(want, sizeof want, "%u", abc); /* b c, then a bc */
    assert_string_equal(enc(b, "abc", out, sizeof out), want);
    snprintf(want, sizeof want, "%u %u", (unsigned)'q', (unsigned)'q');
    assert_string_equal(enc(b, "qq", out, sizeof out), want);
    snprintf(want, sizeof want, "%u %u", (unsigned)'x', unk);
    assert_string_equal(enc(b, "xz", out, sizeof out), want);
    sb_rt_bpe_free(b);
    /* ignore_merges: a word that is a token is that token, even when the
     * merges would not make it */
    t.n_merges = 1; /* only "b c": "abc" would be a + bc */
    b = build(&t, false, unk);
    snprintf(want, sizeof want, "%u %u", (unsigned)'a', bc);
    assert_string_equal(enc(b, "abc", out, sizeof out), want);
    sb_rt_bpe_free(b);
    b = build(&t, true, unk);
    snprintf(want, sizeof want, "%u", abc);
    assert_string_equal(enc(b, "abc", out, sizeof out), want);
    sb_rt_bpe_free(b);
    /* no unk: a byte without a token is refused, named */
    sb_rt_bpe *x = NULL;
    sb_rt_err err = { 0 };
    assert_int_equal(sb_rt_bpe_new(t.n, t.tok, t.tok_len, t.ok, t.merge, t.merge_len,
                                   t.n_merges, false, UINT32_MAX, &x, &err), SB_ERR_FORMAT);
    assert_null(x);
    assert_non_null(strstr(err.msg, "0x7A"));
}

/* ---- the naive reference ------------------------------------------------------------- */

typedef struct entry {
    const char *s;             /* a mapped string (borrowed from the mapping) */
    size_t len;
    uint32_t val;              /* token id, or merge rank */
} entry;

typedef struct ref {
    sb_rt_gguf *g;
    entry *tok, *merge;
    size_t n_tok, n_merge;
    char map[256][3];          /* the mapped UTF-8 of each byte */
    uint8_t map_len[256];
    sb_rt_pretok_kind kind;
    bool ignore_merges;
} ref;

static int cmp_entry(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    int c = memcmp(x->s, y->s, x->len < y->len ? x->len : y->len);
    if (c)
        return c;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    return x->val < y->val ? -1 : x->val > y->val; /* the first rank first */
}

static const entry *find(const entry *e, size_t n, const char *s, size_t len)
{
    size_t lo = 0, hi = n; /* the first entry >= (s, len) */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        entry k = { s, len, 0 };
        if (cmp_entry(&e[mid], &k) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && e[lo].len == len && !memcmp(e[lo].s, s, len) ? &e[lo] : NULL;
}

static void ref_open(ref *r, const char *name)
{
    memset(r, 0, sizeof *r);
    char path[1024];
    sb_rt_err err = { 0 };
    if (sb_rt_gguf_open(tku_vocab_path(path, sizeof path, name), &r->g, &err) != SB_OK)
        fail_msg("%s", err.msg);
    /* GPT-2's bytes_to_unicode, from its definition */
    int n = 0;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
        unsigned cp = printable ? (unsigned)b : 256u + (unsigned)n++;
        if (cp < 0x80) {
            r->map[b][0] = (char)cp;
            r->map_len[b] = 1;
        } else {
            r->map[b][0] = (char)(0xc0 | cp >> 6);
            r->map[b][1] = (char)(0x80 | (cp & 0x3f));
            r->map_len[b] = 2;
        }
    }
    uint32_t type;
    uint64_t nt, nm;
    const void *types;
    assert_int_equal(sb_rt_gguf_get_arr(r->g, "tokenizer.ggml.tokens", &type, &nt, &types), 0);
    assert_int_equal(sb_rt_gguf_get_arr(r->g, "tokenizer.ggml.token_type", &type, &nt, &types),
                     0);
    assert_int_equal(sb_rt_gguf_get_arr(r->g, "tokenizer.ggml.merges", &type, &nm, &types), 0);
    assert_int_equal(sb_rt_gguf_get_arr(r->g, "tokenizer.ggml.token_type", &type, &nt, &types),
                     0);
    r->tok = malloc(nt * sizeof *r->tok);
    r->merge = malloc(nm * sizeof *r->merge);
    assert_true(r->tok && r->merge);
    for (uint64_t i = 0; i < nt; i++) {
        int32_t ty;
        memcpy(&ty, (const char *)types + 4 * i, 4);
        entry e = { NULL, 0, (uint32_t)i };
        assert_int_equal(sb_rt_gguf_arr_str(r->g, "tokenizer.ggml.tokens", i, &e.s, &e.len), 0);
        if (ty == 1) /* normal tokens only: BPE never gives another */
            r->tok[r->n_tok++] = e;
    }
    for (uint64_t i = 0; i < nm; i++) {
        entry e = { NULL, 0, (uint32_t)i };
        assert_int_equal(sb_rt_gguf_arr_str(r->g, "tokenizer.ggml.merges", i, &e.s, &e.len), 0);
        r->merge[r->n_merge++] = e;
    }
    qsort(r->tok, r->n_tok, sizeof *r->tok, cmp_entry);
    qsort(r->merge, r->n_merge, sizeof *r->merge, cmp_entry);
    const char *pre;
    size_t pl;
    assert_int_equal(sb_rt_gguf_get_str(r->g, "tokenizer.ggml.pre", &pre, &pl), 0);
    const sb_rt_pretok_info *pi = sb_rt_pretok_find(pre, pl);
    assert_non_null(pi);
    r->kind = pi->kind;
    r->ignore_merges = pi->ignore_merges;
}

static void ref_close(ref *r)
{
    free(r->tok), free(r->merge);
    sb_rt_gguf_close(r->g);
}

typedef struct ref_job {
    const ref *r;
    const char *text;
    uint32_t *ids;
    size_t n;
} ref_job;

/* One word by the definition: symbols are mapped strings; each round
 * scans every adjacent pair for the lowest rank (the leftmost on a tie). */
static int ref_word(void *ctx, size_t off, size_t len)
{
    ref_job *j = ctx;
    const ref *r = j->r;
    const uint8_t *w = (const uint8_t *)j->text + off;
    char (*sym)[1024] = malloc(len * sizeof *sym);
    size_t *sl = malloc(len * sizeof *sl), ns = len;
    char whole[4096], pair[2100];
    size_t wl = 0;
    assert_true(sym && sl && 2 * len < sizeof whole);
    for (size_t i = 0; i < len; i++) {
        memcpy(sym[i], r->map[w[i]], r->map_len[w[i]]);
        sl[i] = r->map_len[w[i]];
        memcpy(whole + wl, sym[i], sl[i]);
        wl += sl[i];
    }
    const entry *e = r->ignore_merges ? find(r->tok, r->n_tok, whole, wl) : NULL;
    if (e) {
        j->ids[j->n++] = e->val;
        ns = 0;
    }
    for (;;) {
        size_t best = SIZE_MAX;
        uint32_t rank = UINT32_MAX;
        for (size_t i = 0; i + 1 < ns; i++) {
            memcpy(pair, sym[i], sl[i]);
            pair[sl[i]] = ' ';
            memcpy(pair + sl[i] + 1, sym[i + 1], sl[i + 1]);
            const entry *m = find(r->merge, r->n_merge, pair, sl[i] + 1 + sl[i + 1]);
            if (m && m->val < rank)
                best = i, rank = m->val;
        }
        if (best == SIZE_MAX)
            break;
        assert_true(sl[best] + sl[best + 1] <= sizeof sym[0]);
        memcpy(sym[best] + sl[best], sym[best + 1], sl[best + 1]);
        sl[best] += sl[best + 1];
        memmove(sym + best + 1, sym + best + 2, (ns - best - 2) * sizeof *sym);
        memmove(sl + best + 1, sl + best + 2, (ns - best - 2) * sizeof *sl);
        ns--;
    }
    for (size_t i = 0; i < ns; i++) {
        e = find(r->tok, r->n_tok, sym[i], sl[i]);
        if (e) {
            j->ids[j->n++] = e->val;
            continue;
        }
        for (size_t k = 0; k < sl[i];) { /* each byte's own token */
            size_t cl = ((uint8_t)sym[i][k] & 0x80) ? 2 : 1;
            e = find(r->tok, r->n_tok, sym[i] + k, cl);
            assert_non_null(e);
            j->ids[j->n++] = e->val;
            k += cl;
        }
    }
    free(sym), free(sl);
    return 0;
}

static void matches_reference(const char *name, int rounds)
{
    ref r;
    ref_open(&r, name);
    sb_rt_tok *t = tku_vocab(name);
    sb_rt_pretok_buf pb = { 0 };
    uint64_t rng = 0x5eed;
    char text[512];
    uint32_t want[1024];
    for (int c = 0; c < rounds; c++) {
        size_t len = tku_text(&rng, text, sizeof text, c % 2);
        ref_job j = { &r, text, want, 0 };
        assert_int_equal(sb_rt_pretok_buf_reserve(&pb, len), 0);
        assert_int_equal(sb_rt_pretok_split(r.kind, text, len, &pb, ref_word, &j), 0);
        size_t n;
        uint32_t *got = tku_encode(t, text, len, 0, &n);
        if (n != j.n || memcmp(got, want, n * sizeof *got))
            fail_msg("%s case %d (%zu bytes): %zu ids, the reference %zu", name, c, len, n, j.n);
        free(got);
    }
    sb_rt_pretok_buf_free(&pb);
    sb_rt_tok_free(t);
    ref_close(&r);
}

static void reference_llama_bpe(void **state) { (void)state; matches_reference("llama-bpe", 1500); }
static void reference_qwen2(void **state) { (void)state; matches_reference("qwen2", 1500); }
static void reference_gpt2(void **state) { (void)state; matches_reference("gpt-2", 1500); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(mapping),
        cmocka_unit_test(rank_not_position),
        cmocka_unit_test(leftmost_tie_and_first_rank),
        cmocka_unit_test(ignore_merges_and_fallback),
        cmocka_unit_test(reference_llama_bpe),
        cmocka_unit_test(reference_qwen2),
        cmocka_unit_test(reference_gpt2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
