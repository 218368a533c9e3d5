/* test_tokenizer.c -- the tokenizer object: SentencePiece encoding,
 * special tokens, flags, decoding and the vocabulary's facts
 * (runtime/text/tokenizer.h).
 *
 * Description: `llama` score order decides merges (a hand-built vocabulary
 * where "first pair wins" and "longest match" give other answers); byte
 * fallback and unk; a differential test against a naive O(n^2) reference
 * of the same rules on thousands of random strings over random
 * vocabularies with tied scores. Special tokens: the longest text is taken
 * first everywhere (not the leftmost), ties to the lower id; which types
 * each flag matches; literal spans (inside, overlapping, bad spans);
 * LSTRIP/RSTRIP; end texts count as control; the space `llama` puts after
 * each special token. Flags, ADD_BOS/ADD_EOS, a short buffer. Decoding:
 * hidden and shown special tokens, a `gpt2` piece that ends inside a UTF-8
 * character, KEEP_SPACE. The facts of the real vocabularies (ids, EOT
 * found by text, EOG). Round trips decode(encode(x)) == x on random text
 * (emoji, CJK, RTL, combining marks, long white-space and digit runs,
 * invalid bytes) for every vocabulary in tests/data/vocab, with and
 * without BOS, and with special tokens parsed and shown for `gpt2`. Bad
 * specs are refused naming the fault. Threads sharing one tokenizer get
 * the ids one thread gets (and TSan sees no race).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "text/tokenizer.h"
#include "snapbank.h"
#include "tokutil.h"

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

static void spec_of(sb_rt_tok_spec *s, const vb *v, bool prefix)
{
    sb_rt_tok_spec_init(s);
    s->n_vocab = v->n;
    s->pieces = v->p;
    s->piece_len = v->len;
    s->scores = v->score;
    s->types = v->type;
    s->bos = 1, s->eos = 2, s->unk = 0;
    s->add_bos = true;
    s->add_space_prefix = prefix;
}

static sb_rt_tok *make(vb *v, bool prefix)
{
    sb_rt_tok_spec s;
    spec_of(&s, v, prefix);
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
    sb_rt_tok_spec s;
    spec_of(&s, &v, true);
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

/* ---- special tokens ----------------------------------------------------------------- */

/* A `llama` vocabulary with byte tokens, single letters, and specials. */
static sb_rt_tok *special_vocab(vb *v, const uint8_t *strip, uint32_t *first)
{
    base(v, true);
    *first = v->n;
    add(v, "xyz", 0, SB_RT_TOK_CONTROL);        /* first + 0 */
    add(v, "wx", 0, SB_RT_TOK_CONTROL);         /* first + 1 */
    add(v, "ab", 0, SB_RT_TOK_USER);            /* first + 2 */
    add(v, "bc", 0, SB_RT_TOK_USER);            /* first + 3: same length, higher id */
    add(v, "[u]", 0, SB_RT_TOK_UNKNOWN);        /* first + 4 */
    add(v, "<|im_end|>", 0, SB_RT_TOK_USER);    /* first + 5: an end text: control */
    add(v, "<r>", 0, SB_RT_TOK_USER);           /* first + 6 */
    add(v, "<l>", 0, SB_RT_TOK_USER);           /* first + 7 */
    static const char letters[] = "abcdefghijklmnopqrstuvwxyz";
    static char one[26][2];
    for (int i = 0; i < 26; i++) {
        one[i][0] = letters[i];
        add(v, one[i], -1, SB_RT_TOK_NORMAL);
    }
    add(v, SP, -1, SB_RT_TOK_NORMAL);
    sb_rt_tok_spec s;
    spec_of(&s, v, false);
    s.strip = strip;
    sb_rt_tok *t;
    sb_rt_err err = { 0 };
    if (sb_rt_tok_new(&s, &t, &err) != SB_OK)
        fail_msg("%s", err.msg);
    return t;
}

/* ids of text as "1 2 3" */
static const char *ids_of(const sb_rt_tok *t, const char *text, unsigned flags,
                          const sb_rt_tok_span *sp, size_t n_sp, char *out, size_t cap)
{
    uint32_t ids[256];
    size_t n, k = 0;
    assert_int_equal(sb_rt_tok_encode_ex(t, text, strlen(text), flags, sp, n_sp, ids, 256, &n),
                     SB_OK);
    out[0] = '\0';
    for (size_t i = 0; i < n; i++)
        k += (size_t)snprintf(out + k, cap - k, i ? " %u" : "%u", ids[i]);
    return out;
}

static uint32_t letter(uint32_t first, char c) { return first + 8 + (uint32_t)(c - 'a'); }

static void special_longest_first(void **state)
{
    (void)state;
    vb v;
    uint32_t f;
    sb_rt_tok *t = special_vocab(&v, NULL, &f);
    char got[512], want[512];
    /* "wxyz": xyz (3) is taken before wx (2), though wx is leftmost */
    snprintf(want, sizeof want, "%u %u", letter(f, 'w'), f);
    assert_string_equal(ids_of(t, "wxyz", SB_RT_TOK_PARSE_SPECIAL, NULL, 0, got, sizeof got),
                        want);
    /* equal lengths: the lower id first ("ab" before "bc") */
    snprintf(want, sizeof want, "%u %u", f + 2, letter(f, 'c'));
    assert_string_equal(ids_of(t, "abc", SB_RT_TOK_PARSE_SPECIAL, NULL, 0, got, sizeof got),
                        want);
    /* repeated and adjacent */
    snprintf(want, sizeof want, "%u %u %u", f, f, letter(f, 'q'));
    assert_string_equal(ids_of(t, "xyzxyzq", SB_RT_TOK_PARSE_SPECIAL, NULL, 0, got,
                               sizeof got), want);
    sb_rt_tok_free(t);
}

static void special_types_and_flags(void **state)
{
    (void)state;
    vb v;
    uint32_t f;
    sb_rt_tok *t = special_vocab(&v, NULL, &f);
    char got[512], want[512];
    /* flags 0: user-defined texts only (llama.cpp without parse_special) */
    snprintf(want, sizeof want, "%u %u %u", letter(f, 'x'), letter(f, 'y'), letter(f, 'z'));
    assert_string_equal(ids_of(t, "xyz", 0, NULL, 0, got, sizeof got), want);
    snprintf(want, sizeof want, "%u", f + 2);
    assert_string_equal(ids_of(t, "ab", 0, NULL, 0, got, sizeof got), want);
    /* 8 was PARSE_USER: retired, refused */
    size_t n_ids;
    assert_int_equal(sb_rt_tok_encode(t, "ab", 2, 8u, NULL, 0, &n_ids), SB_ERR_INVAL);
    /* PARSE_SPECIAL: control, user-defined, unknown */
    snprintf(want, sizeof want, "%u %u %u", f, f + 2, f + 4);
    assert_string_equal(ids_of(t, "xyzab[u]", SB_RT_TOK_PARSE_SPECIAL, NULL, 0, got,
                               sizeof got), want);
    /* an end text is control whatever the file says: not without PARSE_SPECIAL */
    assert_int_equal(sb_rt_tok_type(t, f + 5), SB_RT_TOK_CONTROL);
    assert_int_equal(sb_rt_tok_type(t, f + 2), SB_RT_TOK_USER);
    snprintf(want, sizeof want, "%u", f + 5);
    assert_string_equal(ids_of(t, "<|im_end|>", SB_RT_TOK_PARSE_SPECIAL, NULL, 0, got,
                               sizeof got), want);
    assert_string_not_equal(ids_of(t, "<|im_end|>", 0, NULL, 0, got, sizeof got), want);
    assert_true(sb_rt_tok_is_eog(t, f + 5));
    /* BOS and EOS */
    snprintf(want, sizeof want, "1 %u 2", f);
    assert_string_equal(ids_of(t, "xyz", SB_RT_TOK_PARSE_SPECIAL | SB_RT_TOK_ADD_BOS |
                               SB_RT_TOK_ADD_EOS, NULL, 0, got, sizeof got), want);
    /* unknown flags, and the decode flag, are refused */
    uint32_t ids[8];
    size_t n;
    assert_int_equal(sb_rt_tok_encode(t, "a", 1, 64, ids, 8, &n), SB_ERR_INVAL);
    assert_int_equal(sb_rt_tok_encode(t, "a", 1, SB_RT_TOK_SHOW_SPECIAL, ids, 8, &n),
                     SB_ERR_INVAL);
    /* a short buffer: the count needed, the first ids written */
    assert_int_equal(sb_rt_tok_encode(t, "xyzab", 5, SB_RT_TOK_PARSE_SPECIAL, ids, 1, &n),
                     SB_ERR_RANGE);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], f);
    sb_rt_tok_free(t);
}

static void literal_spans(void **state)
{
    (void)state;
    vb v;
    uint32_t f;
    sb_rt_tok *t = special_vocab(&v, NULL, &f);
    char got[512], want[512];
    const char *text = "xyzqxyzqxyz"; /* specials at 0, 4, 8 */
    /* [4, 7) exactly: the middle one is text; [1, 2) overlaps the first */
    sb_rt_tok_span sp[2] = { { 1, 1 }, { 4, 3 } };
    snprintf(want, sizeof want, "%u %u %u %u %u %u %u", letter(f, 'x'), letter(f, 'y'),
             letter(f, 'z'), letter(f, 'q'), letter(f, 'x'), letter(f, 'y'), letter(f, 'z'));
    char w2[1100];
    snprintf(w2, sizeof w2, "%s %u %u", want, letter(f, 'q'), f);
    assert_string_equal(ids_of(t, text, SB_RT_TOK_PARSE_SPECIAL, sp, 2, got, sizeof got), w2);
    /* empty spans and spans beside a token protect nothing */
    sb_rt_tok_span beside[3] = { { 0, 0 }, { 3, 1 }, { 11, 0 } };
    snprintf(want, sizeof want, "%u %u %u %u %u", f, letter(f, 'q'), f, letter(f, 'q'), f);
    assert_string_equal(ids_of(t, text, SB_RT_TOK_PARSE_SPECIAL, beside, 3, got, sizeof got),
                        want);
    /* bad spans */
    uint32_t ids[64];
    size_t n;
    sb_rt_tok_span unsorted[2] = { { 4, 1 }, { 1, 1 } }, overlap[2] = { { 1, 3 }, { 3, 1 } };
    sb_rt_tok_span past = { 10, 2 };
    assert_int_equal(sb_rt_tok_encode_ex(t, text, 11, SB_RT_TOK_PARSE_SPECIAL, unsorted, 2,
                                         ids, 64, &n), SB_ERR_INVAL);
    assert_int_equal(sb_rt_tok_encode_ex(t, text, 11, SB_RT_TOK_PARSE_SPECIAL, overlap, 2, ids,
                                         64, &n), SB_ERR_INVAL);
    assert_int_equal(sb_rt_tok_encode_ex(t, text, 11, SB_RT_TOK_PARSE_SPECIAL, &past, 1, ids,
                                         64, &n), SB_ERR_INVAL);
    assert_int_equal(sb_rt_tok_encode_ex(t, text, 11, 0, NULL, 1, ids, 64, &n), SB_ERR_INVAL);
    sb_rt_tok_free(t);
}

static void strip_and_space_prefix(void **state)
{
    (void)state;
    vb v;
    uint32_t f;
    uint8_t strip[600] = { 0 };
    sb_rt_tok *t = special_vocab(&v, strip, &f); /* to learn f */
    sb_rt_tok_free(t);
    strip[f + 6] = SB_RT_TOK_RSTRIP; /* <r> */
    strip[f + 7] = SB_RT_TOK_LSTRIP; /* <l> */
    t = special_vocab(&v, strip, &f);
    char got[512], want[512];
    snprintf(want, sizeof want, "%u %u %u %u", letter(f, 'q'), f + 6, f + 7, letter(f, 'q'));
    assert_string_equal(ids_of(t, "q<r> \n\t <l>q", SB_RT_TOK_PARSE_SPECIAL, NULL, 0, got,
                               sizeof got), want);
    snprintf(want, sizeof want, "%u %u %u", letter(f, 'q'), f + 7, letter(f, 'q'));
    assert_string_equal(ids_of(t, "q  <l>q", SB_RT_TOK_PARSE_SPECIAL, NULL, 0, got, sizeof got),
                        want);
    snprintf(want, sizeof want, "%u %u %u %u", f + 6, letter(f, 'q'), f + 6, letter(f, 'q'));
    assert_string_equal(ids_of(t, "<r>  q<r>q", SB_RT_TOK_PARSE_SPECIAL, NULL, 0, got,
                               sizeof got), want);
    sb_rt_tok_free(t);
    /* `llama` with add_space_prefix: each stretch after a special token gets
     * its space, as at the start */
    base(&v, true);
    add(&v, SP "hi", 5, 1);
    add(&v, SP, -1, 1);
    add(&v, "h", -1, 1);
    add(&v, "i", -1, 1);
    add(&v, "<x>", 0, SB_RT_TOK_CONTROL);
    add(&v, "hi", -1, 1);
    t = make(&v, true);
    snprintf(want, sizeof want, "1 259 263 259");
    assert_string_equal(ids_of(t, "hi<x>hi", SB_RT_TOK_PARSE_SPECIAL | SB_RT_TOK_ADD_BOS, NULL,
                               0, got, sizeof got), want);
    sb_rt_tok_free(t);
}

/* ---- decoding ------------------------------------------------------------------------ */

static void decode_special_and_pieces(void **state)
{
    (void)state;
    sb_rt_tok *t = tku_vocab("qwen2");
    const char *text = "<|im_start|>user\n\xf0\x9f\x98\x80 hi<|im_end|>";
    size_t n;
    uint32_t *ids = tku_encode(t, text, strlen(text), SB_RT_TOK_PARSE_SPECIAL, &n);
    assert_int_equal(ids[0], 151644);
    assert_int_equal(ids[n - 1], 151645);
    char buf[256];
    size_t len;
    assert_int_equal(sb_rt_tok_decode(t, ids, n, buf, sizeof buf, &len), SB_OK);
    assert_true(len == strlen(text) - 22 && !memcmp(buf, text + 12, len)); /* control hidden */
    assert_int_equal(sb_rt_tok_decode_ex(t, ids, n, SB_RT_TOK_SHOW_SPECIAL, buf, sizeof buf,
                                         &len), SB_OK);
    assert_true(len == strlen(text) && !memcmp(buf, text, len));
    assert_int_equal(sb_rt_tok_decode(t, ids, n, buf, 3, &len), SB_ERR_RANGE);
    assert_int_equal(len, strlen(text) - 22);
    assert_int_equal(sb_rt_tok_decode_ex(t, ids, n, 64, buf, sizeof buf, &len), SB_ERR_INVAL);
    /* pieces, one at a time, join into the same bytes */
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t m;
        assert_int_equal(sb_rt_tok_piece_ex(t, ids[i], i ? ids[i - 1] : SB_RT_TOK_NONE,
                                            SB_RT_TOK_SHOW_SPECIAL, buf + k, sizeof buf - k, &m),
                         SB_OK);
        k += m;
    }
    assert_true(k == strlen(text) && !memcmp(buf, text, k));
    free(ids);
    sb_rt_tok_free(t);
    /* gpt-2 spells the emoji in tokens that end inside it: each piece is
     * its bytes, not a replacement character */
    t = tku_vocab("gpt-2");
    ids = tku_encode(t, "\xf0\x9f\x98\x80", 4, 0, &n);
    assert_true(n >= 2);
    size_t m;
    assert_int_equal(sb_rt_tok_piece(t, ids[0], SB_RT_TOK_NONE, buf, sizeof buf, &m), SB_OK);
    assert_true(m < 4 && !memcmp(buf, "\xf0\x9f\x98\x80", m));
    free(ids);
    sb_rt_tok_free(t);
    /* llama: the first piece drops its space unless KEEP_SPACE */
    t = tku_vocab("llama-spm");
    ids = tku_encode(t, "Hello", 5, 0, &n);
    assert_int_equal(n, 1);
    assert_int_equal(sb_rt_tok_piece(t, ids[0], SB_RT_TOK_NONE, buf, sizeof buf, &m), SB_OK);
    assert_true(m == 5 && !memcmp(buf, "Hello", 5));
    assert_int_equal(sb_rt_tok_piece_ex(t, ids[0], SB_RT_TOK_NONE, SB_RT_TOK_KEEP_SPACE, buf,
                                        sizeof buf, &m), SB_OK);
    assert_true(m == 6 && !memcmp(buf, " Hello", 6));
    assert_int_equal(sb_rt_tok_piece(t, ids[0], 1 /* BOS */, buf, sizeof buf, &m), SB_OK);
    assert_int_equal(m, 5);
    assert_int_equal(sb_rt_tok_piece(t, ids[0], 29892, buf, sizeof buf, &m), SB_OK);
    assert_int_equal(m, 6);
    assert_int_equal(sb_rt_tok_piece(t, 1, SB_RT_TOK_NONE, buf, sizeof buf, &m), SB_OK);
    assert_int_equal(m, 0); /* <s> prints nothing */
    assert_int_equal(sb_rt_tok_piece_ex(t, 1, SB_RT_TOK_NONE, SB_RT_TOK_SHOW_SPECIAL, buf,
                                        sizeof buf, &m), SB_OK);
    assert_true(m == 3 && !memcmp(buf, "<s>", 3));
    free(ids);
    sb_rt_tok_free(t);
}

/* ---- the real vocabularies ----------------------------------------------------------- */

static void facts(void **state)
{
    (void)state;
    static const struct {
        const char *name, *model, *pre;
        uint32_t n, bos, eos, eot, unk;
        bool add_bos;
    } want[] = {
        { "llama-spm", "llama", "default", 32000, 1, 2, SB_RT_TOK_NONE, 0, true },
        { "phi-3", "llama", "default", 32064, 1, 32000, 32007, 0, true },
        { "llama-bpe", "gpt2", "llama-bpe", 128256, 128000, 128001, 128009, SB_RT_TOK_NONE,
          true },
        { "qwen2", "gpt2", "qwen2", 151936, 151643, 151643, 151645, SB_RT_TOK_NONE, false },
        { "gpt-2", "gpt2", "gpt-2", 50257, 50256, 50256, 50256, SB_RT_TOK_NONE, false },
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        sb_rt_tok *t = tku_vocab(want[i].name);
        sb_rt_tok_info in;
        sb_rt_tok_get_info(t, &in);
        assert_string_equal(in.model, want[i].model);
        assert_string_equal(in.pre, want[i].pre);
        assert_int_equal(in.n_vocab, want[i].n);
        assert_int_equal(in.bos, want[i].bos);
        assert_int_equal(in.eos, want[i].eos);
        assert_int_equal(in.eot, want[i].eot);
        assert_int_equal(in.unk, want[i].unk);
        assert_int_equal(in.add_bos, want[i].add_bos);
        assert_false(in.add_eos);
        assert_true(sb_rt_tok_is_eog(t, in.eos));
        if (in.eot != SB_RT_TOK_NONE)
            assert_true(sb_rt_tok_is_eog(t, in.eot));
        assert_false(sb_rt_tok_is_eog(t, 100));
        assert_false(sb_rt_tok_is_eog(t, in.n_vocab));
        size_t len;
        const char *bos = sb_rt_tok_text(t, in.bos, &len);
        assert_true(bos && len == strlen(bos) && len >= 3);
        assert_null(sb_rt_tok_text(t, in.n_vocab, &len));
        assert_int_equal(sb_rt_tok_type(t, in.n_vocab), 0);
        sb_rt_tok_free(t);
    }
    sb_rt_tok *t = tku_vocab("llama-bpe");
    size_t len;
    assert_string_equal(sb_rt_tok_text(t, 128000, &len), "<|begin_of_text|>");
    assert_true(sb_rt_tok_is_eog(t, 128009)); /* <|eot_id|> */
    assert_false(sb_rt_tok_is_eog(t, 128006)); /* <|start_header_id|> */
    sb_rt_tok_free(t);
}

static void round_trip(const char *name, unsigned enc_flags, unsigned dec_flags, int rounds)
{
    sb_rt_tok *t = tku_vocab(name);
    bool spm = !strcmp(name, "llama-spm") || !strcmp(name, "phi-3");
    /* MPT (GPT-NeoX's vocabulary) has no token for the 13 bytes UTF-8
     * never uses (C0, C1, F5..FF): they encode as unk, so its texts are
     * UTF-8 */
    bool utf8_only = !strcmp(name, "mpt");
    uint64_t rng = 1234;
    char text[1500], back[1500];
    for (int c = 0; c < rounds; c++) {
        size_t len = tku_text(&rng, text, sizeof text, utf8_only), n, bl;
        bool has_sp = false;
        for (size_t i = 0; i + 3 <= len && !has_sp; i++)
            has_sp = !memcmp(text + i, SP, 3);
        if (spm && has_sp)
            continue; /* `llama` spells spaces U+2581: the one text it cannot give back */
        uint32_t *ids = tku_encode(t, text, len, enc_flags, &n);
        assert_int_equal(sb_rt_tok_decode_ex(t, ids, n, dec_flags, back, sizeof back, &bl),
                         SB_OK);
        if (bl != len || memcmp(back, text, len))
            fail_msg("%s case %d: %zu bytes back of %zu", name, c, bl, len);
        free(ids);
    }
    sb_rt_tok_free(t);
}

static void round_trips(void **state)
{
    (void)state;
    for (size_t v = 0; v < TKU_N_VOCABS; v++) {
        round_trip(tku_vocabs[v], 0, 0, 300);
        round_trip(tku_vocabs[v], SB_RT_TOK_ADD_BOS | SB_RT_TOK_ADD_EOS, 0, 100);
    }
    /* gpt2: special-token texts parsed, then shown, give the text back */
    round_trip("llama-bpe", SB_RT_TOK_PARSE_SPECIAL, SB_RT_TOK_SHOW_SPECIAL, 100);
    round_trip("qwen2", SB_RT_TOK_PARSE_SPECIAL, SB_RT_TOK_SHOW_SPECIAL, 100);
    round_trip("gpt-2", SB_RT_TOK_PARSE_SPECIAL, SB_RT_TOK_SHOW_SPECIAL, 100);
    /* with the special texts in the text */
    sb_rt_tok *t = tku_vocab("qwen2");
    const char *text = "a<|im_start|>b<|endoftext|>\n[PAD151700]<|im_end";
    size_t n, bl;
    char back[128];
    uint32_t *ids = tku_encode(t, text, strlen(text), SB_RT_TOK_PARSE_SPECIAL, &n);
    assert_int_equal(sb_rt_tok_decode_ex(t, ids, n, SB_RT_TOK_SHOW_SPECIAL, back, sizeof back,
                                         &bl), SB_OK);
    assert_true(bl == strlen(text) && !memcmp(back, text, bl));
    free(ids);
    sb_rt_tok_free(t);
}

static void bad_new(void **state)
{
    (void)state;
    vb v;
    base(&v, true);
    sb_rt_tok_spec s;
    sb_rt_tok *t = NULL;
    sb_rt_err err = { 0 };
    spec_of(&s, &v, true);
    s.model = "bert";
    assert_int_equal(sb_rt_tok_new(&s, &t, &err), SB_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "bert"));
    s.model = "gpt2";
    s.pre = "no-such-pre";
    assert_int_equal(sb_rt_tok_new(&s, &t, &err), SB_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "no-such-pre"));
    assert_non_null(strstr(err.msg, "qwen2")); /* and the known ones */
    s.pre = NULL;                              /* "default" */
    assert_int_equal(sb_rt_tok_new(&s, &t, &err), SB_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "'default'"));
    spec_of(&s, &v, true);
    s.eot = v.n;
    assert_int_equal(sb_rt_tok_new(&s, &t, &err), SB_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "eot"));
    s.eot = SB_RT_TOK_NONE;
    s.bos = SB_RT_TOK_NONE;                    /* add_bos without a BOS */
    assert_int_equal(sb_rt_tok_new(&s, &t, &err), SB_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "add_bos"));
    spec_of(&s, &v, true);
    char big[5000];
    memset(big, 'a', sizeof big);
    v.p[5] = big;
    v.len[5] = 4097;
    assert_int_equal(sb_rt_tok_new(&s, &t, &err), SB_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "token 5"));
    assert_int_equal(sb_rt_tok_new(NULL, &t, &err), SB_ERR_INVAL);
    assert_null(t);
}

/* ---- threads ------------------------------------------------------------------------ */

typedef struct share {
    const sb_rt_tok *t;
    uint64_t seed;
    int rounds;
    size_t total;              /* sum of ids, the result compared */
} share;

static void *share_run(void *arg)
{
    share *s = arg;
    uint64_t rng = s->seed;
    char text[800], back[800];
    for (int i = 0; i < s->rounds; i++) {
        size_t len = tku_text(&rng, text, sizeof text, false), n, bl;
        uint32_t ids[800];
        int rc = sb_rt_tok_encode(s->t, text, len, SB_RT_TOK_PARSE_SPECIAL, ids, 800, &n);
        if (rc != SB_OK || sb_rt_tok_decode_ex(s->t, ids, n, SB_RT_TOK_SHOW_SPECIAL, back,
                                               sizeof back, &bl) != SB_OK)
            return NULL;
        for (size_t k = 0; k < n; k++)
            s->total += ids[k];
        s->total += bl;
    }
    return s;
}

static void threads_share_a_tokenizer(void **state)
{
    (void)state;
    static const char *const names[2] = { "qwen2", "llama-spm" };
    for (int v = 0; v < 2; v++) {
        sb_rt_tok *t = tku_vocab(names[v]);
        share one[4], many[4];
        pthread_t th[4];
        for (int i = 0; i < 4; i++) {
            one[i] = (share){ t, 100 + (uint64_t)i, 40, 0 };
            many[i] = one[i];
            assert_ptr_equal(share_run(&one[i]), &one[i]);
        }
        for (int i = 0; i < 4; i++)
            assert_int_equal(pthread_create(&th[i], NULL, share_run, &many[i]), 0);
        for (int i = 0; i < 4; i++) {
            void *r;
            assert_int_equal(pthread_join(th[i], &r), 0);
            assert_ptr_equal(r, &many[i]);
            assert_int_equal(many[i].total, one[i].total);
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
        cmocka_unit_test(special_longest_first),
        cmocka_unit_test(special_types_and_flags),
        cmocka_unit_test(literal_spans),
        cmocka_unit_test(strip_and_space_prefix),
        cmocka_unit_test(decode_special_and_pieces),
        cmocka_unit_test(facts),
        cmocka_unit_test(round_trips),
        cmocka_unit_test(bad_new),
        cmocka_unit_test(threads_share_a_tokenizer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
