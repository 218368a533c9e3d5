/* tokutil.c -- the tokenizer tests' shared helpers (tokutil.h). */
#include "tokutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/vocab.h"

const char *const tku_vocabs[TKU_N_VOCABS] = {
    "llama-spm", "phi-3", "llama-bpe", "qwen2", "gpt-2", "qwen35", "mpt",
};

const char *tku_path(char *buf, size_t cap, const char *rel)
{
    snprintf(buf, cap, "%s/%s", SB_TEST_DATA, rel);
    return buf;
}

const char *tku_vocab_path(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/vocab/ggml-vocab-%s.gguf", SB_TEST_DATA, name);
    return buf;
}

sb_rt_tok *tku_vocab(const char *name)
{
    char path[1024];
    sb_rt_tok *t = NULL;
    sb_rt_err err = { 0 };
    if (sb_rt_tok_load(tku_vocab_path(path, sizeof path, name), &t, &err) != SB_OK)
        fail_msg("%s: %s", path, err.msg);
    return t;
}

uint64_t tku_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static const char *const pieces[] = {
    /* ASCII words, contractions, punctuation, digits */
    "the", "The", "hello", "world", "HTTP", "camelCase", "snake_case", "a", "I", "x",
    "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL", "n't", "'",
    ".", ",", "!", "?", "...", "--", "(", ")", "{\"k\": 1}", "<", ">", "|", "#", "@", "$",
    "0", "7", "42", "123", "1234", "1234567", "3.14", "99999999999",
    /* white space */
    " ", " ", " ", "  ", "\t", "\n", "\n\n", "\r\n", " \n", "\n ", "\v", "\f",
    "\xc2\xa0", "\xe3\x80\x80", "\xe2\x80\x89", "\xe2\x80\xa8", "\xc2\x85",
    /* Latin-1, Cyrillic, Greek, CJK, Korean, Japanese */
    "caf\xc3\xa9", "na\xc3\xafve", ("Gr\xc3\xbc\xc3\x9f" "e"), "\xc3\x86", "\xc3\xbf",
    "\xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82", "\xce\x93\xce\xb5\xce\xb9\xce\xac",
    "\xe4\xbd\xa0\xe5\xa5\xbd", "\xe4\xb8\x96\xe7\x95\x8c", "\xec\x95\x88\xeb\x85\x95",
    "\xe3\x81\x93\xe3\x82\x93\xe3\x81\xab\xe3\x81\xa1\xe3\x81\xaf",
    /* RTL: Arabic, Hebrew, an Arabic-Indic digit; bidi marks */
    "\xd9\x85\xd8\xb1\xd8\xad\xd8\xa8\xd8\xa7", "\xd7\xa9\xd7\x9c\xd7\x95\xd7\x9d",
    "\xd9\xa3", "\xe2\x80\x8f", "\xe2\x80\xae",
    /* combining marks, Devanagari with virama, Thai */
    "e\xcc\x81", "\xcc\x81", "n\xcc\x83", "a\xcc\x88\xcc\x84", "\xe0\xa4\x95\xe0\xa5\x8d",
    "\xe0\xb8\xaa\xe0\xb8\xa7\xe0\xb8\xb1",
    /* emoji, a ZWJ family, a flag, skin tone, variation selector */
    "\xf0\x9f\x98\x80", "\xf0\x9f\x91\x8b", "\xf0\x9f\x8c\x8d",
    "\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7",
    "\xf0\x9f\x87\xab\xf0\x9f\x87\xb7", "\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd", "\xe2\x9d\xa4\xef\xb8\x8f",
    /* symbols, a private-use and an unassigned code point, U+FFFD itself */
    "\xe2\x82\xac", "\xe2\x86\x92", "\xe2\x88\x9e", "\xee\x80\x80", "\xcd\xb8", "\xef\xbf\xbd",
};

static const char *const bad[] = {
    "\x80", "\xbf", "\xc0\xaf", "\xc1\x81", "\xe0\x80\xaf", "\xed\xa0\x80", "\xed\xbf\xbf",
    "\xf4\x90\x80\x80", "\xf8", "\xfe", "\xff", "\xe4\xbd", "\xf0\x9f\x98", "\xc3", "\0",
};

size_t tku_text(uint64_t *rng, char *buf, size_t cap, bool utf8_only)
{
    size_t n = 0, want = tku_rand(rng) % (cap / 2);
    while (n < want) {
        uint64_t r = tku_rand(rng);
        const char *p;
        size_t len, reps = 1;
        if (!utf8_only && r % 13 == 0) {
            p = bad[(r >> 8) % (sizeof bad / sizeof *bad)];
            len = strlen(p) ? strlen(p) : 1;
        } else if (r % 29 == 1) { /* a long run of one white-space or digit piece */
            static const char *const runs[] = { " ", "\t", "\n", "0", "9", "\xe3\x80\x80" };
            p = runs[(r >> 8) % 6];
            len = strlen(p);
            reps = 8 + (r >> 16) % 64;
        } else {
            p = pieces[(r >> 8) % (sizeof pieces / sizeof *pieces)];
            len = strlen(p);
        }
        for (size_t k = 0; k < reps && n + len <= cap; k++, n += len)
            memcpy(buf + n, p, len);
        if (n + len > cap)
            break;
    }
    return n;
}

uint32_t *tku_encode(const sb_rt_tok *t, const char *text, size_t len, unsigned flags,
                     size_t *n)
{
    size_t need = 0;
    int rc = sb_rt_tok_encode(t, text, len, flags, NULL, 0, &need);
    assert_true(rc == SB_OK || rc == SB_ERR_RANGE);
    uint32_t *ids = malloc((need ? need : 1) * sizeof *ids);
    assert_non_null(ids);
    assert_int_equal(sb_rt_tok_encode(t, text, len, flags, ids, need, n), SB_OK);
    assert_int_equal(*n, need);
    return ids;
}
