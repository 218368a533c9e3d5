/* unicode.c -- UTF-8 decoding and encoding (unicode.h; the category
 * table is unicode_table.c, generated). */
#include "text/unicode.h"

size_t sb_rt_utf8_next(const uint8_t *s, size_t n, uint32_t *cp)
{
    uint8_t b = s[0];
    if (b < 0x80) {
        *cp = b;
        return 1;
    }
    size_t k;
    uint32_t v, min;
    if (b >= 0xc2 && b <= 0xdf)
        k = 2, v = b & 0x1fu, min = 0x80;
    else if (b >= 0xe0 && b <= 0xef)
        k = 3, v = b & 0x0fu, min = 0x800;
    else if (b >= 0xf0 && b <= 0xf4)
        k = 4, v = b & 0x07u, min = 0x10000;
    else
        goto bad; /* a continuation byte, C0/C1 (always overlong), F5..FF */
    if (k > n)
        goto bad;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xc0) != 0x80)
            goto bad;
        v = v << 6 | (s[i] & 0x3fu);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        goto bad;
    *cp = v;
    return k;
bad:
    *cp = 0xfffd;
    return 1;
}

size_t sb_rt_utf8_put(uint32_t cp, uint8_t out[4])
{
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xc0 | cp >> 6);
        out[1] = (uint8_t)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp >= 0xd800 && cp <= 0xdfff)
        return 0;
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xe0 | cp >> 12);
        out[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
        out[2] = (uint8_t)(0x80 | (cp & 0x3f));
        return 3;
    }
    if (cp <= 0x10ffff) {
        out[0] = (uint8_t)(0xf0 | cp >> 18);
        out[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3f));
        out[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
        out[3] = (uint8_t)(0x80 | (cp & 0x3f));
        return 4;
    }
    return 0;
}
