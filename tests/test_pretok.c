/* test_pretok.c -- the byte-level BPE pre-tokenizers
 * (runtime/text/pretok.h).
 *
 * Description: per pattern, a table of texts and the words the pattern
 * gives them, case by case from its alternatives (contractions and their
 * case, letter runs and what may lead them, digit grouping: unbounded for
 * GPT2, 1-3 for LLAMA3, single for QWEN2, QWEN35 and SMOLLM, punctuation
 * runs and the newlines LLAMA3 lets them take, white space before newlines,
 * between words and at the end; combining marks, "other" but for QWEN35,
 * whose letter runs take them); invalid bytes split as U+FFFD would and stay
 * bytes; on random text of every kind the words cover the text exactly,
 * none empty; the names table.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "text/pretok.h"
#include "tokutil.h"

typedef struct words {
    const char *text;
    char out[4096];            /* the words joined by '|' */
    size_t n_out;
    size_t covered;            /* bytes the words covered so far */
    bool empty;                /* a word of 0 bytes was given */
} words;

static int collect(void *ctx, size_t off, size_t len)
{
    words *w = ctx;
    if (!len)
        w->empty = true;
    if (off != w->covered)
        fail_msg("word at %zu, expected %zu", off, w->covered);
    w->covered += len;
    if (w->n_out && w->n_out < sizeof w->out)
        w->out[w->n_out++] = '|';
    for (size_t i = 0; i < len && w->n_out < sizeof w->out - 1; i++)
        w->out[w->n_out++] = w->text[off + i];
    w->out[w->n_out] = '\0';
    return 0;
}

static void split(sb_rt_pretok_kind kind, const char *text, size_t len, words *w)
{
    sb_rt_pretok_buf b = { 0 };
    assert_int_equal(sb_rt_pretok_buf_reserve(&b, len), 0);
    memset(w, 0, sizeof *w);
    w->text = text;
    assert_int_equal(sb_rt_pretok_split(kind, text, len, &b, collect, w), 0);
    sb_rt_pretok_buf_free(&b);
    assert_int_equal(w->covered, len);
    assert_false(w->empty);
}

typedef struct split_case {
    const char *text, *want;
} split_case;

static void check(sb_rt_pretok_kind kind, const split_case *c, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        words w;
        split(kind, c[i].text, strlen(c[i].text), &w);
        if (strcmp(w.out, c[i].want))
            fail_msg("kind %d case %zu: \"%s\" gave \"%s\", expected \"%s\"", (int)kind, i,
                     c[i].text, w.out, c[i].want);
    }
}

/* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S) */
static void gpt2(void **state)
{
    (void)state;
    static const split_case c[] = {
        { "Hello world", "Hello| world" },
        /* contractions, lower case only */
        { "it's", "it|'s" }, { "we've", "we|'ve" }, { "they'll", "they|'ll" },
        { "I'd", "I|'d" }, { "you're", "you|'re" }, { "I'm", "I|'m" }, { "don't", "don|'t" },
        { "I'M", "I|'|M" }, { "IT'S", "IT|'|S" }, { "'x", "'|x" }, { "''s", "''|s" },
        /* letters with an optional leading space only */
        { "caf\xc3\xa9 na\xc3\xafve", "caf\xc3\xa9| na\xc3\xafve" },
        { "\xe6\x97\xa5\xe6\x9c\xac text", "\xe6\x97\xa5\xe6\x9c\xac| text" },
        { "\tword", "\t|word" }, { "(hello)", "(|hello|)" },
        /* numbers: a run of any length, with a leading space */
        { "abc 12345 x", "abc| 12345| x" }, { "a1b2", "a|1|b|2" },
        { "\xe2\x85\xab\xc2\xbd", "\xe2\x85\xab\xc2\xbd" }, { "3.14", "3|.|14" },
        /* other: a run, with a leading space */
        { "Hello, world!!!", "Hello|,| world|!!!" }, { "x ...y", "x| ...|y" },
        { "e\xcc\x81", "e|\xcc\x81" }, { "hi \xf0\x9f\x98\x80\xf0\x9f\x98\x80",
                                           "hi| \xf0\x9f\x98\x80\xf0\x9f\x98\x80" },
        /* white space: all but the last before a word, all at the end */
        { "a  b", "a| | b" }, { "a   b", "a|  | b" }, { "a  ", "a|  " },
        { "a\n\nb", "a|\n|\n|b" }, { "a \n b", "a| \n| b" }, { " ", " " },
        { "\n", "\n" }, { "a \t b", "a| \t| b" },
    };
    check(SB_RT_PRETOK_GPT2, c, sizeof c / sizeof *c);
}

/* (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static const split_case llama3_common[] = {
    { "Hello world", "Hello| world" },
    /* contractions, any case */
    { "it's", "it|'s" }, { "I'M", "I|'M" }, { "YOU'RE", "YOU|'RE" }, { "We'Ve", "We|'Ve" },
    { "don't", "don|'t" }, { "'s'", "'s|'" }, { "'Sup", "'S|up" }, { "DON'TS", "DON|'T|S" },
    { "'LLama", "'LL|ama" }, { "'xyz", "'xyz" },
    /* one non-letter, non-number, non-newline code point may lead letters */
    { "(hello)", "(hello|)" }, { "a.b.c", "a|.b|.c" }, { "'hello", "'hello" },
    { "\tword", "\tword" }, { "\xe3\x80\x80word", "\xe3\x80\x80word" },
    { "\xf0\x9f\x98\x80hi", "\xf0\x9f\x98\x80hi" }, { "\nword", "\n|word" },
    { "x\xc2\xa0\xc2\xa0y", "x|\xc2\xa0|\xc2\xa0y" },
    /* other: a run, a leading space, then the newlines after it */
    { "hello, world", "hello|,| world" }, { "!!\n\nx", "!!\n\n|x" }, { " ...\n", " ...\n" },
    { "\xf0\x9f\x98\x80\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80\xf0\x9f\x98\x80" },
    /* white space up to the last newline; before a word all but the last */
    { "a  \n  b", "a|  \n| | b" }, { "a\r\n\r\nb", "a|\r\n\r\n|b" }, { "end   ", "end|   " },
    { "a \n", "a| \n" }, { " \n \n x", " \n \n| x" }, { "a  b", "a| | b" },
};

static void llama3(void **state)
{
    (void)state;
    check(SB_RT_PRETOK_LLAMA3, llama3_common, sizeof llama3_common / sizeof *llama3_common);
    static const split_case c[] = {
        /* numbers: groups of 1 to 3, never with a space */
        { "12345", "123|45" }, { "1234567", "123|456|7" }, { " 42", " |42" },
        { "x123456789y", "x|123|456|789|y" }, { "3.14", "3|.|14" },
        { "\xd9\xa3\xd9\xa4\xd9\xa5\xd9\xa6", "\xd9\xa3\xd9\xa4\xd9\xa5|\xd9\xa6" },
        /* a combining mark is "other" */
        { "e\xcc\x81", "e|\xcc\x81" },
    };
    check(SB_RT_PRETOK_LLAMA3, c, sizeof c / sizeof *c);
}

static void qwen2(void **state)
{
    (void)state;
    check(SB_RT_PRETOK_QWEN2, llama3_common, sizeof llama3_common / sizeof *llama3_common);
    static const split_case c[] = {
        /* numbers: one at a time */
        { "12345", "1|2|3|4|5" }, { " 42", " |4|2" }, { "x12y", "x|1|2|y" },
        { "3.14", "3|.|1|4" },
        /* a combining mark is "other": it ends a letter run, joins punctuation */
        { "e\xcc\x81", "e|\xcc\x81" }, { "!!\xcc\x81", "!!\xcc\x81" },
        { "\xe0\xa4\x95\xe0\xa5\x8d\xe0\xa4\xb7", "\xe0\xa4\x95|\xe0\xa5\x8d\xe0\xa4\xb7" },
    };
    check(SB_RT_PRETOK_QWEN2, c, sizeof c / sizeof *c);
}

/* QWEN2 with [\p{L}\p{M}]+ for \p{L}+ and [^\s\p{L}\p{M}\p{N}] for "other" */
static void qwen35(void **state)
{
    (void)state;
    check(SB_RT_PRETOK_QWEN35, llama3_common, sizeof llama3_common / sizeof *llama3_common);
    static const split_case c[] = {
        /* numbers: one at a time */
        { "12345", "1|2|3|4|5" }, { " 42", " |4|2" }, { "3.14", "3|.|1|4" },
        /* marks (Mn, Mc, Me) are letters: they join and lead letter runs */
        { "e\xcc\x81", "e\xcc\x81" }, { ("caf\xcc\x81" "e\xcc\x81 x"), ("caf\xcc\x81" "e\xcc\x81| x") },
        { "\xcc\x81\xcc\x82", "\xcc\x81\xcc\x82" }, { " \xcc\x81", " \xcc\x81" },
        { "(\xcc\x81)", "(\xcc\x81|)" }, { "!!\xcc\x81", "!!|\xcc\x81" },
        { "1\xcc\x81", "1|\xcc\x81" }, { "\n\xcc\x81", "\n|\xcc\x81" },
        /* Devanagari: a virama (Mn) and a vowel sign (Mc) stay in the word */
        { "\xe0\xa4\x95\xe0\xa5\x8d\xe0\xa4\xb7", "\xe0\xa4\x95\xe0\xa5\x8d\xe0\xa4\xb7" },
        { ("\xe0\xa4\xb9\xe0\xa4\xbf\xe0\xa4\x82\xe0\xa4\xa6\xe0\xa5\x80 "
           "\xe0\xa4\xad\xe0\xa4\xbe\xe0\xa4\xb7\xe0\xa4\xbe"),
          ("\xe0\xa4\xb9\xe0\xa4\xbf\xe0\xa4\x82\xe0\xa4\xa6\xe0\xa5\x80| "
           "\xe0\xa4\xad\xe0\xa4\xbe\xe0\xa4\xb7\xe0\xa4\xbe") },
        /* an enclosing mark (Me, U+20DD) after a digit: the digit, then the mark */
        { "1\xe2\x83\x9d", "1|\xe2\x83\x9d" },
    };
    check(SB_RT_PRETOK_QWEN35, c, sizeof c / sizeof *c);
}

/* \p{N} first (each number alone), then GPT2 between them */
static void smollm(void **state)
{
    (void)state;
    static const split_case c[] = {
        { "abc 12 x", "abc| |1|2| x" }, { "a1b", "a|1|b" }, { "x  1", "x|  |1" },
        { "it's 3", "it|'s| |3" }, { "\xe2\x85\xab\xc2\xbd", "\xe2\x85\xab|\xc2\xbd" },
        { "Hello, world", "Hello|,| world" }, { "a  b", "a| | b" }, { "I'M", "I|'|M" },
        { "v2.0", "v|2|.|0" },
    };
    check(SB_RT_PRETOK_SMOLLM, c, sizeof c / sizeof *c);
}

/* Ill-formed bytes split as U+FFFD (an "other") and stay themselves. */
static void invalid_bytes(void **state)
{
    (void)state;
    static const split_case g[] = {
        { ("a\xff" "b"), "a|\xff|b" }, { " \xff\xfe", " \xff\xfe" }, { "\xc3x", "\xc3|x" },
    };
    check(SB_RT_PRETOK_GPT2, g, sizeof g / sizeof *g);
    static const split_case l[] = {
        { ("\xff" "b"), ("\xff" "b") }, { "\xed\xa0\x80!", "\xed\xa0\x80!" },
    };
    check(SB_RT_PRETOK_LLAMA3, l, sizeof l / sizeof *l);
}

static void covers_random_text(void **state)
{
    (void)state;
    uint64_t rng = 7;
    char text[2048];
    for (int i = 0; i < 2000; i++) {
        size_t len = tku_text(&rng, text, sizeof text, false);
        for (int k = 0; k <= SB_RT_PRETOK_QWEN35; k++) {
            words w;
            split((sb_rt_pretok_kind)k, text, len, &w); /* asserts coverage, no empty word */
        }
    }
}

static void names(void **state)
{
    (void)state;
    const sb_rt_pretok_info *p = sb_rt_pretok_find("llama-bpe", 9);
    assert_non_null(p);
    assert_int_equal(p->kind, SB_RT_PRETOK_LLAMA3);
    assert_true(p->ignore_merges && p->add_bos);
    p = sb_rt_pretok_find("qwen2", 5);
    assert_true(p && p->kind == SB_RT_PRETOK_QWEN2 && !p->ignore_merges && !p->add_bos);
    p = sb_rt_pretok_find("qwen35", 6);
    assert_true(p && p->kind == SB_RT_PRETOK_QWEN35 && !p->ignore_merges && !p->add_bos);
    assert_non_null(strstr(sb_rt_pretok_names(), "qwen35"));
    p = sb_rt_pretok_find("gpt-2", 5);
    assert_true(p && p->kind == SB_RT_PRETOK_GPT2);
    p = sb_rt_pretok_find("smollm", 6);
    assert_true(p && p->kind == SB_RT_PRETOK_SMOLLM);
    assert_null(sb_rt_pretok_find("default", 7));
    assert_null(sb_rt_pretok_find("qwen", 4));
    assert_null(sb_rt_pretok_find("qwen2x", 6));
    assert_null(sb_rt_pretok_find(NULL, 0));
    assert_non_null(strstr(sb_rt_pretok_names(), "smollm"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gpt2),
        cmocka_unit_test(llama3),
        cmocka_unit_test(qwen2),
        cmocka_unit_test(qwen35),
        cmocka_unit_test(smollm),
        cmocka_unit_test(invalid_bytes),
        cmocka_unit_test(covers_random_text),
        cmocka_unit_test(names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
