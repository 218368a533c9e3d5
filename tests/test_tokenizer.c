/* test_tokenizer.c -- SentencePiece BPE encoding and decoding
 * (runtime/model/tokenizer.h).
 *
 * Description: score order decides merges (a hand-built vocabulary where
 * "first pair wins" and "longest match" give other answers); byte fallback
 * and unk; decode(encode(x)) == x for random bytes; and a differential test
 * against a naive O(n^2) reference of the same rules on thousands of random
 * strings over random vocabularies with tied scores.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "model/tokenizer.h"
#include "snapbank.h"

#define SP "\xe2\x96\x81"

typedef struct vb {
    const char *p[600];
    size_t len[600];
    float score[600];
    int32_t type[600];
    char store[600][8];
    uint32_t n;
} vb;

static void add(vb *v, const char *s, float score, int32_t type)
{
    v->p[v->n] = s;
    v->len[v->n] = strlen(s);
    v->score[v->n] = score;
    v->type[v->n] = type;
    v->n++;
}

static void base(vb *v, bool bytes)
{
    v->n = 0;
    add(v, "<unk>", 0, SB_RT_TOK_UNKNOWN);
    add(v, "<s>", 0, SB_RT_TOK_CONTROL);
    add(v, "</s>", 0, SB_RT_TOK_CONTROL);
    for (int b = 0; bytes && b < 256; b++) {
        snprintf(v->store[b], 8, "<0x%02X>", b);
        add(v, v->store[b], 0, SB_RT_TOK_BYTE);
    }
}

static sb_rt_tok *make(vb *v, bool prefix)
{
    sb_rt_tok_spec s = { v->n, v->p, v->len, v->score, v->type, 1, 2, 0, true, prefix };
    sb_rt_tok *t;
    sb_rt_err err = { 0 };
    int rc = sb_rt_tok_new(&s, &t, &err);
    if (rc != SB_OK)
        fail_msg("tok_new: %s", err.msg);
    return t;
}

static size_t enc(sb_rt_tok *t, const char *s, size_t n, uint32_t *ids)
{
    size_t k;
    assert_int_equal(sb_rt_tok_encode(t, s, n, false, ids, 4096, &k), SB_OK);
    return k;
}

/* "abcd" with pieces ab (score -3), bc (-1), abc (-2), cd (-5), bcd (0):
 * by score: bc first (-1, the best pair), then bcd (0) -> a + bcd.
 * First-pair-wins would take ab; longest match would take abc. */
static void score_order_decides(void **state)
{
    (void)state;
    vb v;
    base(&v, false);
    uint32_t a = v.n;
    add(&v, "a", -10, 1);
    add(&v, "b", -10, 1);
    add(&v, "c", -10, 1);
    add(&v, "d", -10, 1);
    add(&v, "ab", -3, 1);
    add(&v, "bc", -1, 1);
    add(&v, "abc", -2, 1);
    add(&v, "cd", -5, 1);
    uint32_t bcd = v.n;
    add(&v, "bcd", 0, 1);
    sb_rt_tok *t = make(&v, false);
    uint32_t ids[16];
    size_t n = enc(t, "abcd", 4, ids);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], a);
    assert_int_equal(ids[1], bcd);
    /* ties: the leftmost pair */
    n = enc(t, "abab", 4, ids);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], a + 4);
    sb_rt_tok_free(t);
}

static void byte_fallback_and_unk(void **state)
{
    (void)state;
    vb v;
    base(&v, true);
    add(&v, SP, -1, 1);
    add(&v, "h", -1, 1);
    add(&v, "i", -1, 1);
    add(&v, SP "hi", 5, 1);
    add(&v, "hi", 4, 1);
    sb_rt_tok *t = make(&v, true);
    uint32_t ids[64];
    size_t n;
    const char *text = "hi \xf0\x9f\x98\x80\xff"; /* emoji, then an invalid byte */
    assert_int_equal(sb_rt_tok_encode(t, text, 8, true, ids, 64, &n), SB_OK);
    assert_int_equal(n, 1 + 1 + 1 + 4 + 1);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[1], 259 + 3);       /* ▁hi */
    assert_int_equal(ids[2], 259);           /* ▁ */
    assert_int_equal(ids[3], 3 + 0xf0);      /* <0xF0> */
    assert_int_equal(ids[7], 3 + 0xff);
    char out[64];
    size_t len;
    assert_int_equal(sb_rt_tok_decode(t, ids, n, out, sizeof out, &len), SB_OK);
    assert_true(len == 8 && !memcmp(out, text, 8));
    /* cap too small: the count needed */
    assert_int_equal(sb_rt_tok_encode(t, text, 8, true, ids, 2, &n), SB_ERR_RANGE);
    assert_int_equal(n, 8);
    assert_int_equal(sb_rt_tok_piece(t, 9999, SB_RT_TOK_NONE, out, 64, &len), SB_ERR_RANGE);
    sb_rt_tok_free(t);
    /* no byte tokens: unk */
    base(&v, false);
    add(&v, "x", -1, 1);
    t = make(&v, false);
    n = enc(t, "xy", 2, ids);
    assert_true(n == 2 && ids[0] == 3 && ids[1] == 0);
    sb_rt_tok_free(t);
}

static void bad_specs(void **state)
{
    (void)state;
    vb v;
    base(&v, true);
    sb_rt_tok *t;
    sb_rt_err err = { 0 };
    sb_rt_tok_spec s = { v.n, v.p, v.len, v.score, v.type, 1, 2, 0, true, true };
    s.bos = v.n;
    assert_int_equal(sb_rt_tok_new(&s, &t, &err), SB_ERR_FORMAT);
    s.bos = 1;
    s.n_vocab = 0;
    assert_int_equal(sb_rt_tok_new(&s, &t, &err), SB_ERR_FORMAT);
    s.n_vocab = v.n;
    v.p[10] = "<0xZZ>";
    assert_int_equal(sb_rt_tok_new(&s, &t, &err), SB_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "10"));
}

/* ---- differential against a naive reference ------------------------------------------ */

/* The same rules, O(n^2): each round scans every adjacent pair. */
static size_t naive(const vb *v, bool prefix, const char *s, size_t n, uint32_t *ids)
{
    char txt[1024];
    size_t k = 0;
    if (n) {
        if (prefix)
            memcpy(txt, SP, 3), k = 3;
        for (size_t i = 0; i < n; i++) {
            if (s[i] == ' ')
                memcpy(txt + k, SP, 3), k += 3;
            else
                txt[k++] = s[i];
        }
    }
    size_t off[1024], len[1024], m = 0;
    for (size_t i = 0; i < k;) {
        unsigned char c = (unsigned char)txt[i];
        size_t l = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        bool ok = l && l <= k - i;
        for (size_t j = 1; ok && j < l; j++)
            ok = ((unsigned char)txt[i + j] & 0xc0) == 0x80;
        l = ok ? l : 1;
        off[m] = i, len[m] = l, m++;
        i += l;
    }
    for (;;) {
        size_t best = SIZE_MAX;
        float bs = 0;
        for (size_t i = 0; i + 1 < m; i++) {
            size_t l = len[i] + len[i + 1];
            for (uint32_t id = 0; id < v->n; id++) { /* the lowest id of a piece */
                int ty = v->type[id];
                if ((ty == 1 || ty == 2 || ty == 4) && v->len[id] == l &&
                    !memcmp(v->p[id], txt + off[i], l)) {
                    if (best == SIZE_MAX || v->score[id] > bs) {
                        best = i;
                        bs = v->score[id];
                    }
                    break;
                }
            }
        }
        if (best == SIZE_MAX)
            break;
        len[best] += len[best + 1];
        memmove(off + best + 1, off + best + 2, (m - best - 2) * sizeof *off);
        memmove(len + best + 1, len + best + 2, (m - best - 2) * sizeof *len);
        m--;
    }
    size_t out = 0;
    for (size_t i = 0; i < m; i++) {
        uint32_t found = UINT32_MAX;
        for (uint32_t id = 0; id < v->n && found == UINT32_MAX; id++) {
            int ty = v->type[id];
            if ((ty == 1 || ty == 2 || ty == 4) && v->len[id] == len[i] &&
                !memcmp(v->p[id], txt + off[i], len[i]))
                found = id;
        }
        if (found != UINT32_MAX) {
            ids[out++] = found;
            continue;
        }
        for (size_t b = 0; b < len[i]; b++)
            ids[out++] = 3 + (unsigned char)txt[off[i] + b];
    }
    return out;
}

static void matches_naive_reference(void **state)
{
    (void)state;
    static const char alphabet[] = "ab c\xc3\xa9";
    static char pieces[300][8];
    uint64_t r = 42;
#define RND() (r = r * 6364136223846793005ull + 1442695040888963407ull, (uint32_t)(r >> 33))
    for (int round = 0; round < 40; round++) {
        vb v;
        base(&v, true);
        size_t np = 20 + RND() % 200;
        for (size_t i = 0; i < np; i++) {
            size_t l = 1 + RND() % 4, k = 0;
            for (size_t j = 0; j < l; j++) {
                uint32_t c = RND() % 5;
                if (c == 2) { /* ▁ */
                    memcpy(pieces[i] + k, SP, 3), k += 3;
                } else if (c == 4) { /* é */
                    memcpy(pieces[i] + k, "\xc3\xa9", 2), k += 2;
                } else {
                    pieces[i][k++] = alphabet[c];
                }
                if (k > 4)
                    break;
            }
            pieces[i][k] = '\0';
            add(&v, pieces[i], (float)(RND() % 6), 1); /* many equal scores */
        }
        bool prefix = round % 2;
        sb_rt_tok *t = make(&v, prefix);
        for (int c = 0; c < 100; c++) {
            char s[64];
            size_t n = RND() % 40;
            for (size_t i = 0; i < n; i++)
                s[i] = RND() % 9 ? alphabet[RND() % 6] : (char)(RND() % 256);
            uint32_t a[1024], b[1024];
            size_t na = enc(t, s, n, a), nb = naive(&v, prefix, s, n, b);
            if (na != nb || memcmp(a, b, na * sizeof *a))
                fail_msg("round %d case %d: %zu vs naive %zu tokens", round, c, na, nb);
            char back[256];
            size_t bl;
            assert_int_equal(sb_rt_tok_decode(t, a, na, back, sizeof back, &bl), SB_OK);
            assert_true(bl == n && !memcmp(back, s, n));
        }
        sb_rt_tok_free(t);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(score_order_decides),
        cmocka_unit_test(byte_fallback_and_unk),
        cmocka_unit_test(bad_specs),
        cmocka_unit_test(matches_naive_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
