/* unicode.h -- the Unicode facts the tokenizers need: each code point's
 * general category and White_Space property, and UTF-8 decoding that never
 * loses a byte.
 *
 * The categories come from a table generated from Python's unicodedata by
 * scripts/gen_unicode_table.py (unicode_table.c, committed; its Unicode
 * version is sb_rt_uni_version). Code points the table's Unicode version
 * does not assign are SB_RT_UNI_CN.
 *
 * Decoding (sb_rt_utf8_next): a well-formed UTF-8 sequence (RFC 3629: no
 * overlong forms, no surrogates, nothing above U+10FFFF) is one code point.
 * Any other byte is a code point of its own, reported as U+FFFD (the
 * replacement character, category So) with length 1: the caller keeps the
 * byte itself, so text that is not UTF-8 survives a round trip.
 *
 * Thread safety: constant tables and pure functions.
 */
#ifndef SB_RT_UNICODE_H
#define SB_RT_UNICODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* General categories, in the generator's order (pinned: the table stores
 * these numbers). */
enum sb_rt_uni_cat {
    SB_RT_UNI_CN = 0,          /* unassigned */
    SB_RT_UNI_LU, SB_RT_UNI_LL, SB_RT_UNI_LT, SB_RT_UNI_LM, SB_RT_UNI_LO,   /* letters 1-5 */
    SB_RT_UNI_MN, SB_RT_UNI_MC, SB_RT_UNI_ME,                               /* marks 6-8 */
    SB_RT_UNI_ND, SB_RT_UNI_NL, SB_RT_UNI_NO,                               /* numbers 9-11 */
    SB_RT_UNI_PC, SB_RT_UNI_PD, SB_RT_UNI_PS, SB_RT_UNI_PE, SB_RT_UNI_PI,   /* punctuation */
    SB_RT_UNI_PF, SB_RT_UNI_PO,                                             /* 12-18 */
    SB_RT_UNI_SM, SB_RT_UNI_SC, SB_RT_UNI_SK, SB_RT_UNI_SO,                 /* symbols 19-22 */
    SB_RT_UNI_ZS, SB_RT_UNI_ZL, SB_RT_UNI_ZP,                               /* separators 23-25 */
    SB_RT_UNI_CC, SB_RT_UNI_CF, SB_RT_UNI_CS, SB_RT_UNI_CO,                 /* other 26-29 */
};

#define SB_RT_UNI_WS 0x80u          /* White_Space, beside the category */
#define SB_RT_UNI_CAT_MASK 0x1fu

extern const char sb_rt_uni_version[];      /* "14.0.0": the table's Unicode version */
extern const uint16_t sb_rt_uni_stage1[];   /* (0x110000 >> 8) block numbers */
extern const char sb_rt_uni_stage2[][256];  /* (blocks, 256) characters: 0x60 +
                                               category, or 0x40 + category
                                               with White_Space */

/* sb_rt_uni_props -- category | SB_RT_UNI_WS of cp; code points above
 * U+10FFFF are SB_RT_UNI_CN. (A stored character's bit 5 is clear exactly
 * when the code point has White_Space; its low 5 bits are the category.) */
static inline uint8_t sb_rt_uni_props(uint32_t cp)
{
    if (cp >= 0x110000u)
        return SB_RT_UNI_CN;
    unsigned c = (unsigned char)sb_rt_uni_stage2[sb_rt_uni_stage1[cp >> 8]][cp & 255u];
    return (uint8_t)((c & SB_RT_UNI_CAT_MASK) | ((~c & 0x20u) << 2));
}

/* Classes of a props byte, as regular expressions name them. */
static inline bool sb_rt_uni_letter(uint8_t p)   /* \p{L} */
{
    p &= SB_RT_UNI_CAT_MASK;
    return p >= SB_RT_UNI_LU && p <= SB_RT_UNI_LO;
}
static inline bool sb_rt_uni_number(uint8_t p)   /* \p{N} */
{
    p &= SB_RT_UNI_CAT_MASK;
    return p >= SB_RT_UNI_ND && p <= SB_RT_UNI_NO;
}
static inline bool sb_rt_uni_mark(uint8_t p)     /* \p{M} */
{
    p &= SB_RT_UNI_CAT_MASK;
    return p >= SB_RT_UNI_MN && p <= SB_RT_UNI_ME;
}
static inline bool sb_rt_uni_space(uint8_t p)    /* \s: White_Space */
{
    return (p & SB_RT_UNI_WS) != 0;
}

/* sb_rt_utf8_next -- decode the code point at s[0, n) (n >= 1): *cp and
 * the bytes it takes (1..4). An ill-formed byte gives U+FFFD and 1. */
size_t sb_rt_utf8_next(const uint8_t *s, size_t n, uint32_t *cp);

/* sb_rt_utf8_put -- the UTF-8 of cp (<= U+10FFFF, not a surrogate) into
 * out[0, 4). Returns the bytes written, 0 for a code point that has no
 * UTF-8 form. */
size_t sb_rt_utf8_put(uint32_t cp, uint8_t out[4]);

#endif /* SB_RT_UNICODE_H */
