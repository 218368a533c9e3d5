/* pretok.c -- the byte-level BPE pre-tokenizers (pretok.h; the step
 * numbers are the header's).
 *
 * The text is decoded once into per-code-point arrays (props, the ASCII
 * value, the byte offset); the matchers then walk code point indices i in
 * a stretch [lo, hi) and return where the word that starts at i ends.
 * Nothing looks past hi: the end of a stretch is the end of the text for
 * the lookahead of step 6.
 */
#include "text/pretok.h"

#include <stdlib.h>
#include <string.h>

#include "text/unicode.h"

static const sb_rt_pretok_info known[] = {
    { "llama-bpe", SB_RT_PRETOK_LLAMA3, true, true },
    { "llama3", SB_RT_PRETOK_LLAMA3, true, true },
    { "llama-v3", SB_RT_PRETOK_LLAMA3, true, true },
    { "dbrx", SB_RT_PRETOK_LLAMA3, false, false },
    { "smaug-bpe", SB_RT_PRETOK_LLAMA3, false, false },
    { "qwen2", SB_RT_PRETOK_QWEN2, false, false },
    { "deepseek-r1-qwen", SB_RT_PRETOK_QWEN2, false, false },
    { "stablelm2", SB_RT_PRETOK_QWEN2, false, false },
    { "megrez", SB_RT_PRETOK_QWEN2, false, false },
    { "qwen35", SB_RT_PRETOK_QWEN35, false, false },
    { "gpt-2", SB_RT_PRETOK_GPT2, false, false },
    { "phi-2", SB_RT_PRETOK_GPT2, false, false },
    { "mpt", SB_RT_PRETOK_GPT2, false, false },
    { "olmo", SB_RT_PRETOK_GPT2, false, false },
    { "smollm", SB_RT_PRETOK_SMOLLM, false, false },
    { "starcoder", SB_RT_PRETOK_SMOLLM, false, false },
    { "refact", SB_RT_PRETOK_SMOLLM, false, false },
    { "codeshell", SB_RT_PRETOK_SMOLLM, false, false },
    { "command-r", SB_RT_PRETOK_SMOLLM, false, false },
};

const sb_rt_pretok_info *sb_rt_pretok_find(const char *name, size_t len)
{
    for (size_t i = 0; name && i < sizeof known / sizeof *known; i++)
        if (strlen(known[i].name) == len && !memcmp(known[i].name, name, len))
            return &known[i];
    return NULL;
}

const char *sb_rt_pretok_names(void)
{
    return "llama-bpe, llama3, llama-v3, dbrx, smaug-bpe, qwen2, deepseek-r1-qwen, stablelm2, "
           "megrez, qwen35, gpt-2, phi-2, mpt, olmo, smollm, starcoder, refact, codeshell, "
           "command-r";
}

int sb_rt_pretok_buf_reserve(sb_rt_pretok_buf *b, size_t n)
{
    if (n <= b->cap && b->props)
        return 0;
    size_t cap = n < 256 ? 256 : n;
    if (cap > (SIZE_MAX / sizeof *b->off) - 1)
        return -1;
    uint8_t *props = malloc(cap + 1), *ascii = malloc(cap + 1);
    size_t *off = malloc((cap + 1) * sizeof *off);
    if (!props || !ascii || !off) {
        free(props), free(ascii), free(off);
        return -1;
    }
    sb_rt_pretok_buf_free(b);
    b->props = props, b->ascii = ascii, b->off = off, b->cap = cap;
    return 0;
}

void sb_rt_pretok_buf_free(sb_rt_pretok_buf *b)
{
    free(b->props), free(b->ascii), free(b->off);
    memset(b, 0, sizeof *b);
}

/* ---- classes ------------------------------------------------------------------------ */

enum { C_NONE, C_SPACE, C_LETTER, C_NUMBER, C_OTHER };

typedef struct walk {
    const uint8_t *props, *ascii;
    size_t hi;                 /* the stretch ends here */
    bool marks;                /* \p{M} is C_LETTER (QWEN35), else C_OTHER */
} walk;

/* The class of code point i; C_NONE past the stretch. */
static int cls(const walk *w, size_t i)
{
    if (i >= w->hi)
        return C_NONE;
    uint8_t p = w->props[i];
    return sb_rt_uni_space(p) ? C_SPACE
         : sb_rt_uni_letter(p) || (w->marks && sb_rt_uni_mark(p)) ? C_LETTER
         : sb_rt_uni_number(p) ? C_NUMBER : C_OTHER;
}

/* The end of the run of class c that starts at i. */
static size_t run(const walk *w, size_t i, int c)
{
    while (cls(w, i) == c)
        i++;
    return i;
}

static bool is_crlf(const walk *w, size_t i)
{
    return i < w->hi && (w->ascii[i] == '\r' || w->ascii[i] == '\n');
}

static bool is_sp(const walk *w, size_t i) /* U+0020 */
{
    return i < w->hi && w->ascii[i] == ' ';
}

/* 1: the length of the contraction at i, 0 when none. */
static size_t contraction(const walk *w, size_t i, bool fold)
{
    if (w->ascii[i] != '\'' || i + 1 >= w->hi)
        return 0;
    uint8_t a = w->ascii[i + 1];
    uint8_t b = i + 2 < w->hi ? w->ascii[i + 2] : 0;
    if (fold) {
        a = a >= 'A' && a <= 'Z' ? (uint8_t)(a + 32) : a;
        b = b >= 'A' && b <= 'Z' ? (uint8_t)(b + 32) : b;
    }
    if (a == 's' || a == 't' || a == 'm' || a == 'd')
        return 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
        return 3;
    return 0;
}

/* 6: a white-space run at i; its end, or 0 when i is not white space. */
static size_t spaces(const walk *w, size_t i)
{
    size_t e = run(w, i, C_SPACE);
    if (e == i)
        return 0;
    if (e == w->hi)
        return e;              /* \s+(?!\S) at the end of the text */
    return e - i > 1 ? e - 1 : e; /* leave the last for the next word; or \s+ */
}

/* ---- GPT2 --------------------------------------------------------------------------- */

static size_t gpt2_word(const walk *w, size_t i)
{
    size_t k = contraction(w, i, false); /* 1 */
    if (k)
        return i + k;
    size_t j = i;                          /* 2, 3, 4: " ?" then a run */
    int c = cls(w, i);
    if (is_sp(w, i)) {
        int n = cls(w, i + 1);
        if (n == C_LETTER || n == C_NUMBER || n == C_OTHER)
            j = i + 1, c = n;
    }
    if (c == C_LETTER || c == C_NUMBER || c == C_OTHER)
        return run(w, j, c);
    return spaces(w, i);                   /* 6 */
}

/* ---- LLAMA3 / QWEN2 / QWEN35 (w->marks for QWEN35) ---------------------------------- */

static size_t llama3_word(const walk *w, size_t i, size_t max_digits)
{
    size_t k = contraction(w, i, true); /* 1 */
    if (k)
        return i + k;
    int c = cls(w, i);
    if (c == C_LETTER)                     /* 2 */
        return run(w, i, C_LETTER);
    if (c != C_NUMBER && !is_crlf(w, i) && cls(w, i + 1) == C_LETTER)
        return run(w, i + 1, C_LETTER);
    if (c == C_NUMBER) {                   /* 3 */
        size_t e = run(w, i, C_NUMBER);
        return e - i > max_digits ? i + max_digits : e;
    }
    size_t j = is_sp(w, i) && cls(w, i + 1) == C_OTHER ? i + 1 : i; /* 4 */
    if (cls(w, j) == C_OTHER) {
        size_t e = run(w, j, C_OTHER);
        while (is_crlf(w, e))
            e++;
        return e;
    }
    size_t e = run(w, i, C_SPACE);         /* 5 */
    for (size_t m = e; m > i; m--)
        if (is_crlf(w, m - 1))
            return m;
    return spaces(w, i);                   /* 6 */
}

/* ---- the split ---------------------------------------------------------------------- */

typedef struct splitter {
    walk w;
    const size_t *off;
    sb_rt_pretok_kind kind;
    sb_rt_pretok_word_fn word;
    void *ctx;
} splitter;

/* The words of code points [lo, hi). */
static int stretch(splitter *s, size_t lo, size_t hi)
{
    s->w.hi = hi;
    for (size_t i = lo; i < hi;) {
        size_t e = s->kind == SB_RT_PRETOK_LLAMA3 ? llama3_word(&s->w, i, 3)
                 : s->kind == SB_RT_PRETOK_QWEN2 || s->kind == SB_RT_PRETOK_QWEN35
                 ? llama3_word(&s->w, i, 1)
                 : gpt2_word(&s->w, i);
        if (e <= i)
            e = i + 1;         /* nothing matched: the code point alone */
        int rc = s->word(s->ctx, s->off[i], s->off[e] - s->off[i]);
        if (rc)
            return rc;
        i = e;
    }
    return 0;
}

int sb_rt_pretok_split(sb_rt_pretok_kind kind, const char *text, size_t len,
                       sb_rt_pretok_buf *b, sb_rt_pretok_word_fn word, void *ctx)
{
    const uint8_t *t = (const uint8_t *)text;
    size_t n = 0;
    for (size_t i = 0; i < len; n++) {
        uint32_t cp;
        size_t k = sb_rt_utf8_next(t + i, len - i, &cp);
        b->props[n] = sb_rt_uni_props(cp);
        b->ascii[n] = cp < 0x80 ? (uint8_t)cp : 0;
        b->off[n] = i;
        i += k;
    }
    b->off[n] = len;
    splitter s = { { b->props, b->ascii, n, kind == SB_RT_PRETOK_QWEN35 }, b->off, kind, word,
                   ctx };
    if (kind != SB_RT_PRETOK_SMOLLM)
        return stretch(&s, 0, n);
    /* SMOLLM: each number code point alone, GPT2 between them */
    s.kind = SB_RT_PRETOK_GPT2;
    for (size_t i = 0; i < n;) {
        size_t e = i;
        while (e < n && !sb_rt_uni_number(b->props[e]))
            e++;
        int rc = e > i ? stretch(&s, i, e) : s.word(ctx, b->off[i], b->off[i + 1] - b->off[i]);
        if (rc)
            return rc;
        i = e > i ? e : i + 1;
    }
    return 0;
}
