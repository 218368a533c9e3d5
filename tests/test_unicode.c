/* test_unicode.c -- the generated Unicode table and UTF-8 decoding
 * (runtime/text/unicode.h).
 *
 * Description: code points of every general category read back as that
 * category (letters of many scripts, the number kinds, marks, each
 * punctuation and symbol kind, separators, controls, format, surrogates,
 * private use, unassigned, and above U+10FFFF); White_Space is exactly its
 * 25 code points over the whole range; the version string is recorded;
 * decoding accepts every well-formed sequence (all 1,112,064 scalar values
 * round-trip through sb_rt_utf8_put) and takes every ill-formed one
 * (continuation bytes, overlong forms, surrogates, above U+10FFFF,
 * truncated) as U+FFFD of one byte.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "text/unicode.h"

static int cat(uint32_t cp)
{
    return sb_rt_uni_props(cp) & SB_RT_UNI_CAT_MASK;
}

static void categories(void **state)
{
    (void)state;
    static const struct { uint32_t cp; int cat; } known[] = {
        { 'A', SB_RT_UNI_LU }, { 'z', SB_RT_UNI_LL }, { 0xe9, SB_RT_UNI_LL },
        { 0x1c5, SB_RT_UNI_LT }, { 0x2b0, SB_RT_UNI_LM }, { 0x4e2d, SB_RT_UNI_LO },
        { 0x5d0, SB_RT_UNI_LO }, { 0x627, SB_RT_UNI_LO }, { 0x416, SB_RT_UNI_LU },
        { 0xac00, SB_RT_UNI_LO }, { 0x3042, SB_RT_UNI_LO }, { 0x1d518, SB_RT_UNI_LU },
        { 0x301, SB_RT_UNI_MN }, { 0x93e, SB_RT_UNI_MC }, { 0x20dd, SB_RT_UNI_ME },
        { '7', SB_RT_UNI_ND }, { 0x663, SB_RT_UNI_ND }, { 0x2160, SB_RT_UNI_NL },
        { 0xbd, SB_RT_UNI_NO }, { 0xb2, SB_RT_UNI_NO },
        { '_', SB_RT_UNI_PC }, { '-', SB_RT_UNI_PD }, { '(', SB_RT_UNI_PS },
        { ')', SB_RT_UNI_PE }, { 0xab, SB_RT_UNI_PI }, { 0xbb, SB_RT_UNI_PF },
        { '!', SB_RT_UNI_PO }, { '\'', SB_RT_UNI_PO },
        { '+', SB_RT_UNI_SM }, { '$', SB_RT_UNI_SC }, { 0x20ac, SB_RT_UNI_SC },
        { '^', SB_RT_UNI_SK }, { 0xa9, SB_RT_UNI_SO }, { 0x1f600, SB_RT_UNI_SO },
        { 0xfffd, SB_RT_UNI_SO },
        { ' ', SB_RT_UNI_ZS }, { 0x3000, SB_RT_UNI_ZS }, { 0x2028, SB_RT_UNI_ZL },
        { 0x2029, SB_RT_UNI_ZP }, { '\n', SB_RT_UNI_CC }, { 0x85, SB_RT_UNI_CC },
        { 0x200d, SB_RT_UNI_CF }, { 0xfeff, SB_RT_UNI_CF }, { 0xd800, SB_RT_UNI_CS },
        { 0xe000, SB_RT_UNI_CO }, { 0x10fffd, SB_RT_UNI_CO }, { 0x378, SB_RT_UNI_CN },
        { 0x10ffff, SB_RT_UNI_CN }, { 0x110000, SB_RT_UNI_CN }, { UINT32_MAX, SB_RT_UNI_CN },
    };
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (cat(known[i].cp) != known[i].cat)
            fail_msg("U+%04X: category %d, expected %d", known[i].cp, cat(known[i].cp),
                     known[i].cat);
    assert_true(sb_rt_uni_letter(sb_rt_uni_props(0x4e2d)));
    assert_false(sb_rt_uni_letter(sb_rt_uni_props(0x301)));
    assert_true(sb_rt_uni_number(sb_rt_uni_props(0x2160)));
    assert_false(sb_rt_uni_number(sb_rt_uni_props('x')));
    /* the version the table was generated from is recorded: "M.m.p" */
    assert_true(strlen(sb_rt_uni_version) >= 5 && sb_rt_uni_version[0] >= '1' &&
                strchr(sb_rt_uni_version, '.'));
}

static void white_space(void **state)
{
    (void)state;
    static const uint32_t ws[] = {
        0x9, 0xa, 0xb, 0xc, 0xd, 0x20, 0x85, 0xa0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003,
        0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a, 0x2028, 0x2029, 0x202f,
        0x205f, 0x3000,
    };
    size_t k = 0;
    for (uint32_t cp = 0; cp < 0x110000; cp++) {
        bool want = k < sizeof ws / sizeof *ws && ws[k] == cp;
        if (sb_rt_uni_space(sb_rt_uni_props(cp)) != want)
            fail_msg("U+%04X: White_Space %d, expected %d", cp, !want, want);
        k += want;
    }
    assert_int_equal(k, 25);
    /* the information separators Python's isspace() counts are not White_Space */
    assert_false(sb_rt_uni_space(sb_rt_uni_props(0x1c)));
    assert_false(sb_rt_uni_space(sb_rt_uni_props(0x200b))); /* zero width space: Cf */
}

static void utf8_round_trip(void **state)
{
    (void)state;
    for (uint32_t cp = 0; cp < 0x110000; cp++) {
        uint8_t b[4];
        size_t n = sb_rt_utf8_put(cp, b);
        if (cp >= 0xd800 && cp <= 0xdfff) {
            assert_int_equal(n, 0);
            continue;
        }
        assert_int_equal(n, cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4);
        uint32_t back;
        if (sb_rt_utf8_next(b, n, &back) != n || back != cp)
            fail_msg("U+%04X does not decode back", cp);
    }
    uint8_t b[4];
    assert_int_equal(sb_rt_utf8_put(0x110000, b), 0);
}

static void ill_formed(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "\x80", "\xbf", "\xc0\x80", "\xc1\xbf", "\xe0\x80\x80", "\xe0\x9f\xbf",
        "\xf0\x80\x80\x80", "\xf0\x8f\xbf\xbf", "\xed\xa0\x80", "\xed\xbf\xbf",
        "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xf8\x88\x80\x80\x80", "\xfe", "\xff",
        "\xc3", "\xe4\xbd", "\xf0\x9f\x98", "\xc3\x41", "\xe4\x41\x41", "\xf0\x9f\x41\x41",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        uint32_t cp = 0;
        size_t n = sb_rt_utf8_next((const uint8_t *)bad[i], strlen(bad[i]), &cp);
        if (n != 1 || cp != 0xfffd)
            fail_msg("case %zu: %zu bytes, U+%04X; expected 1 byte, U+FFFD", i, n, cp);
    }
    /* the edges that are well formed */
    static const struct { const char *s; uint32_t cp; } good[] = {
        { "\xc2\x80", 0x80 }, { "\xdf\xbf", 0x7ff }, { "\xe0\xa0\x80", 0x800 },
        { "\xed\x9f\xbf", 0xd7ff }, { "\xee\x80\x80", 0xe000 }, { "\xef\xbf\xbf", 0xffff },
        { "\xf0\x90\x80\x80", 0x10000 }, { "\xf4\x8f\xbf\xbf", 0x10ffff },
    };
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        uint32_t cp = 0;
        size_t n = sb_rt_utf8_next((const uint8_t *)good[i].s, strlen(good[i].s), &cp);
        assert_int_equal(n, strlen(good[i].s));
        assert_int_equal(cp, good[i].cp);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(categories),
        cmocka_unit_test(white_space),
        cmocka_unit_test(utf8_round_trip),
        cmocka_unit_test(ill_formed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
