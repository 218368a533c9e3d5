/* jinja_str.c -- the interpreter's memory (arena, growing buffers) and its
 * strings: UTF-8 with a taint flag per byte (jinja.h), and the string
 * operations of Python that templates use, with Python 3.11's answers
 * (case mappings from jinja_ucase.h, character classes from
 * jinja_uclass.h). Every operation keeps the taint of the bytes it copies;
 * a converted character (upper, lower, escaped) takes the taint of the
 * character it came from. */
#define _GNU_SOURCE /* memmem: linear substring search */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/jinja.h"
#include "template/jinja_ucase.h"
#include "template/jinja_uclass.h"

/* ---- arena --------------------------------------------------------------------------- */

struct jchunk {
    jchunk *next;
    size_t cap, used;
    _Alignas(16) unsigned char mem[];
};

#define JA_CHUNK (64u << 10)

void *sb_rt_ja_alloc(jarena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n == 0)
        n = 16;
    jchunk *h = a->head;
    if (!h || h->cap - h->used < n) {
        size_t cap = n > JA_CHUNK / 4 ? n : JA_CHUNK;
        if (a->limit && a->used + cap + sizeof *h > a->limit)
            sb_rt_jfail(a->ctx, SB_ERR_RANGE,
                        "memory over the limit of %zu bytes (max_memory_bytes)", a->limit);
        jchunk *nc = malloc(sizeof *nc + cap);
        if (!nc)
            sb_rt_jfail(a->ctx, SB_ERR_NOMEM, "out of memory");
        nc->cap = cap;
        nc->used = 0;
        a->used += cap + sizeof *nc;
        if (cap == JA_CHUNK || !h) {
            nc->next = h;
            a->head = nc;
        } else { /* a big one: keep the current chunk on top for small ones */
            nc->next = h->next;
            h->next = nc;
        }
        h = nc;
    }
    void *p = h->mem + h->used;
    h->used += n;
    memset(p, 0, n);
    return p;
}

void *sb_rt_ja_grow(jarena *a, const void *old, size_t n_used, size_t *cap, size_t first,
                    size_t elem)
{
    size_t nc = *cap ? *cap * 2 : first;
    void *p = sb_rt_ja_alloc(a, nc * elem);
    jcopy(p, old, n_used * elem);
    *cap = nc;
    return p;
}

void *sb_rt_ja_dup(jarena *a, const void *p, size_t n)
{
    void *q = sb_rt_ja_alloc(a, n + 1);
    if (n)
        jcopy(q, p, n);
    return q;
}

void sb_rt_ja_free(jarena *a)
{
    for (jchunk *h = a->head, *nx; h; h = nx) {
        nx = h->next;
        free(h);
    }
    a->head = NULL;
    a->used = 0;
}

/* ---- buffers ------------------------------------------------------------------------- */

static void mem_check(jctx *c, size_t more)
{
    size_t lim = c->lim->max_memory_bytes;
    if (c->arena.used + c->buf_bytes + more > lim)
        sb_rt_jfail(c, SB_ERR_RANGE, "memory over the limit of %zu bytes (max_memory_bytes)", lim);
}

jbuf *sb_rt_jbuf_new(jctx *c)
{
    jbuf *b = calloc(1, sizeof *b);
    if (!b)
        sb_rt_jfail(c, SB_ERR_NOMEM, "out of memory");
    b->next_live = c->live;
    if (c->live)
        c->live->prev_live = b;
    c->live = b;
    return b;
}

void sb_rt_jbuf_drop(jctx *c, jbuf *b)
{
    if (b->prev_live)
        b->prev_live->next_live = b->next_live;
    else
        c->live = b->next_live;
    if (b->next_live)
        b->next_live->prev_live = b->prev_live;
    c->buf_bytes -= b->cap * 2;
    free(b->s);
    free(b->taint);
    free(b);
}

void sb_rt_jbuf_free_all(jctx *c)
{
    while (c->live)
        sb_rt_jbuf_drop(c, c->live);
}

static void jbuf_grow(jctx *c, jbuf *b, size_t more)
{
    if (b == c->root && b->len + more > c->lim->max_output_bytes)
        sb_rt_jfail(c, SB_ERR_RANGE, "output over the limit of %zu bytes (max_output_bytes)",
                    c->lim->max_output_bytes);
    if (b->len + more + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + more + 1)
        cap *= 2;
    mem_check(c, (cap - b->cap) * 2);
    char *s = realloc(b->s, cap);
    if (!s)
        sb_rt_jfail(c, SB_ERR_NOMEM, "out of memory");
    b->s = s;
    uint8_t *t = realloc(b->taint, cap);
    if (!t)
        sb_rt_jfail(c, SB_ERR_NOMEM, "out of memory");
    b->taint = t;
    c->buf_bytes += (cap - b->cap) * 2;
    b->cap = cap;
}

void sb_rt_jbuf_put(jctx *c, jbuf *b, const char *s, size_t n, bool tainted)
{
    if (!n)
        return;
    jbuf_grow(c, b, n);
    jcopy(b->s + b->len, s, n);
    memset(b->taint + b->len, tainted, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void sb_rt_jbuf_putc(jctx *c, jbuf *b, char ch, bool tainted)
{
    sb_rt_jbuf_put(c, b, &ch, 1, tainted);
}

void sb_rt_jbuf_put_range(jctx *c, jbuf *b, const jstr *s, size_t off, size_t n)
{
    if (!n)
        return;
    jbuf_grow(c, b, n);
    jcopy(b->s + b->len, s->s + off, n);
    if (!s->taint || s->taint == JT_ALL)
        memset(b->taint + b->len, s->taint == JT_ALL, n);
    else
        jcopy(b->taint + b->len, s->taint + off, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void sb_rt_jbuf_put_str(jctx *c, jbuf *b, const jstr *s)
{
    sb_rt_jbuf_put_range(c, b, s, 0, s->len);
}

/* the taint of bytes [0, n) as NULL (none), JT_ALL or a copy in the arena */
static const uint8_t *taint_pack(jctx *c, const uint8_t *t, size_t n)
{
    size_t ones = 0;
    for (size_t i = 0; i < n; i++)
        ones += t[i] != 0;
    if (ones == 0)
        return NULL;
    if (ones == n)
        return JT_ALL;
    return sb_rt_ja_dup(&c->arena, t, n);
}

jstr *sb_rt_jbuf_take(jctx *c, jbuf *b)
{
    jstr *s = sb_rt_ja_alloc(&c->arena, sizeof *s);
    s->len = b->len;
    s->s = sb_rt_ja_dup(&c->arena, b->s ? b->s : "", b->len);
    s->taint = b->len ? taint_pack(c, b->taint, b->len) : NULL;
    sb_rt_jbuf_drop(c, b);
    return s;
}

/* ---- strings ------------------------------------------------------------------------- */

jstr *sb_rt_js_new(jctx *c, const char *s, size_t n, bool tainted)
{
    jstr *r = sb_rt_ja_alloc(&c->arena, sizeof *r);
    r->s = sb_rt_ja_dup(&c->arena, s, n);
    r->len = n;
    r->taint = tainted && n ? JT_ALL : NULL;
    return r;
}

jstr *sb_rt_js_lit(jctx *c, const char *s)
{
    return sb_rt_js_new(c, s, strlen(s), false);
}

jstr *sb_rt_js_sub(jctx *c, const jstr *s, size_t off, size_t n)
{
    jstr *r = sb_rt_ja_alloc(&c->arena, sizeof *r);
    r->s = s->s + off;
    r->len = n;
    r->markup = s->markup;
    if (!s->taint || s->taint == JT_ALL || !n) {
        r->taint = n ? s->taint : NULL;
    } else {
        sb_rt_jstep(c, n / 64);
        r->taint = taint_pack(c, s->taint + off, n);
    }
    return r;
}

bool sb_rt_js_tainted_at(const jstr *s, size_t i)
{
    return s->taint == JT_ALL || (s->taint && s->taint[i]);
}

bool sb_rt_js_eq(const jstr *a, const jstr *b)
{
    return a->len == b->len && !memcmp(a->s, b->s, a->len);
}

int sb_rt_js_cmp(const jstr *a, const jstr *b)
{ /* UTF-8 byte order is code point order */
    size_t n = a->len < b->len ? a->len : b->len;
    int r = memcmp(a->s, b->s, n);
    if (r)
        return r < 0 ? -1 : 1;
    return a->len < b->len ? -1 : a->len > b->len;
}

uint32_t sb_rt_utf8_dec(const char *s, size_t n, size_t *adv)
{
    const unsigned char *u = (const unsigned char *)s;
    if (u[0] < 0x80 || n < 2) {
        *adv = 1;
        return u[0];
    }
    if (u[0] < 0xE0) {
        *adv = 2;
        return ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F);
    }
    if (u[0] < 0xF0 || n < 4) {
        *adv = 3;
        return ((uint32_t)(u[0] & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6) | (u[2] & 0x3F);
    }
    *adv = 4;
    return ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3F) << 12) |
           ((uint32_t)(u[2] & 0x3F) << 6) | (u[3] & 0x3F);
}

size_t sb_rt_utf8_enc(uint32_t cp, char *o)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

bool sb_rt_utf8_valid(const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        unsigned char b = s[i];
        if (b < 0x80) {
            i++;
            continue;
        }
        size_t k;
        uint32_t cp, min;
        if (b >= 0xC2 && b <= 0xDF)
            k = 1, cp = b & 0x1F, min = 0x80;
        else if (b >= 0xE0 && b <= 0xEF)
            k = 2, cp = b & 0x0F, min = 0x800;
        else if (b >= 0xF0 && b <= 0xF4)
            k = 3, cp = b & 0x07, min = 0x10000;
        else
            return false;
        if (n - i <= k)
            return false;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80)
                return false;
            cp = (cp << 6) | (s[i + j] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000))
            return false;
        i += k + 1;
    }
    return true;
}

size_t sb_rt_js_ncp(const jstr *s)
{
    size_t n = 0;
    for (size_t i = 0; i < s->len; i++)
        n += ((unsigned char)s->s[i] & 0xC0) != 0x80;
    return n;
}

size_t sb_rt_js_cp_off(const jstr *s, size_t cp)
{
    size_t i = 0;
    while (i < s->len && cp) {
        i++;
        while (i < s->len && ((unsigned char)s->s[i] & 0xC0) == 0x80)
            i++;
        cp--;
    }
    return i;
}

/* ---- Unicode properties -------------------------------------------------------------- */

static bool in_ranges(const uint32_t (*r)[2], size_t n, uint32_t cp)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < r[mid][0])
            hi = mid;
        else if (cp > r[mid][1])
            lo = mid + 1;
        else
            return true;
    }
    return false;
}

#define IN(tbl, cp) in_ranges(tbl, sizeof tbl / sizeof tbl[0], cp)

static const uint32_t *map_find(const uint32_t (*m)[4], size_t n, uint32_t cp)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < m[mid][0])
            hi = mid;
        else if (cp > m[mid][0])
            lo = mid + 1;
        else
            return &m[mid][1];
    }
    return NULL;
}

#define MAP(tbl, cp) map_find(tbl, sizeof tbl / sizeof tbl[0], cp)

bool sb_rt_uc_isspace(uint32_t cp)
{ /* str.isspace(): Python's whitespace (bidirectional WS/B/S or Zs) */
    return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 ||
           cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

bool sb_rt_uc_isprintable(uint32_t cp)
{
    return IN(uc_printable, cp);
}

bool sb_rt_uc_is_cased(uint32_t cp)
{
    return IN(uc_cased, cp);
}

static bool case_ignorable(uint32_t cp)
{
    return IN(uc_case_ignorable, cp);
}

/* decode s into code points (arena) */
static uint32_t *cps_of(jctx *c, const jstr *s, size_t *n, size_t **boff)
{
    size_t cap = s->len + 1;
    uint32_t *cp = sb_rt_ja_alloc(&c->arena, cap * sizeof *cp);
    size_t *off = boff ? sb_rt_ja_alloc(&c->arena, cap * sizeof *off) : NULL;
    size_t k = 0;
    for (size_t i = 0, adv; i < s->len; i += adv) {
        if (off)
            off[k] = i;
        cp[k++] = sb_rt_utf8_dec(s->s + i, s->len - i, &adv);
    }
    if (off)
        off[k] = s->len;
    *n = k;
    if (boff)
        *boff = off;
    return cp;
}

/* str.isupper() / str.islower(): some cased character of the wanted case,
 * and none of the other case or title case */
static bool js_is_case(const jstr *s, bool upper)
{
    bool cased = false;
    for (size_t i = 0, adv; i < s->len; i += adv) {
        uint32_t cp = sb_rt_utf8_dec(s->s + i, s->len - i, &adv);
        bool up = IN(uc_isupper, cp), low = IN(uc_islower, cp);
        if ((upper ? low : up) || IN(uc_istitle, cp))
            return false;
        cased |= upper ? up : low;
    }
    return cased;
}

bool sb_rt_js_isupper(const jstr *s)
{
    return js_is_case(s, true);
}

bool sb_rt_js_islower(const jstr *s)
{
    return js_is_case(s, false);
}

/* the code points a mapping entry gives for cp (cp itself without one) */
static size_t mapped(const uint32_t *m, uint32_t cp, uint32_t out[3])
{
    if (!m) {
        out[0] = cp;
        return 1;
    }
    out[0] = m[0], out[1] = m[1], out[2] = m[2];
    return m[2] ? 3 : m[1] ? 2 : 1;
}

/* lower case of cps[i] with Python's final-sigma rule */
static size_t lower_at(const uint32_t *cps, size_t n, size_t i, uint32_t out[3])
{
    uint32_t cp = cps[i];
    if (cp == 0x03A3) {
        size_t j = i;
        while (j > 0 && case_ignorable(cps[j - 1]))
            j--;
        bool final = j > 0 && sb_rt_uc_is_cased(cps[j - 1]);
        if (final && i + 1 < n) {
            size_t k = i + 1;
            while (k < n && case_ignorable(cps[k]))
                k++;
            final = k == n || !sb_rt_uc_is_cased(cps[k]);
        }
        out[0] = final ? 0x03C2 : 0x03C3;
        return 1;
    }
    return mapped(MAP(uc_lower, cp), cp, out);
}

static size_t upper_of(uint32_t cp, uint32_t out[3])
{
    return mapped(MAP(uc_upper, cp), cp, out);
}

static size_t title_of(uint32_t cp, uint32_t out[3])
{
    const uint32_t *m = MAP(uc_title, cp);
    return m ? mapped(m, cp, out) : upper_of(cp, out);
}

jstr *sb_rt_js_case(jctx *c, const jstr *s, char how)
{
    sb_rt_jstep(c, s->len / 16 + 1);
    size_t n, *off;
    uint32_t *cps = cps_of(c, s, &n, &off);
    jbuf *b = sb_rt_jbuf_new(c);
    bool prev_cased = false;
    for (size_t i = 0; i < n; i++) {
        uint32_t m[3];
        size_t k;
        switch (how) {
        case 'u':
            k = upper_of(cps[i], m);
            break;
        case 'l':
            k = lower_at(cps, n, i, m);
            break;
        case 't': /* str.title() */
            k = prev_cased ? lower_at(cps, n, i, m) : title_of(cps[i], m);
            prev_cased = sb_rt_uc_is_cased(cps[i]);
            break;
        default: /* 'c': str.capitalize() */
            k = i == 0 ? title_of(cps[i], m) : lower_at(cps, n, i, m);
            break;
        }
        bool t = false;
        for (size_t j = off[i]; j < off[i + 1]; j++)
            t |= sb_rt_js_tainted_at(s, j);
        for (size_t j = 0; j < k; j++) {
            char e[4];
            sb_rt_jbuf_put(c, b, e, sb_rt_utf8_enc(m[j], e), t);
        }
    }
    jstr *r = sb_rt_jbuf_take(c, b);
    r->markup = s->markup;
    return r;
}

/* ---- strip, split, replace, find ----------------------------------------------------- */

static bool in_chars(jctx *c, const jstr *chars, uint32_t cp)
{
    if (!chars)
        return sb_rt_uc_isspace(cp);
    sb_rt_jstep(c, chars->len / 64 + 1);
    for (size_t i = 0, adv; i < chars->len; i += adv)
        if (sb_rt_utf8_dec(chars->s + i, chars->len - i, &adv) == cp)
            return true;
    return false;
}

jstr *sb_rt_js_strip(jctx *c, const jstr *s, const jstr *chars, char which)
{
    size_t a = 0, z = s->len, adv;
    sb_rt_jstep(c, s->len / 64 + 1);
    if (which != 'r')
        while (a < z) {
            uint32_t cp = sb_rt_utf8_dec(s->s + a, z - a, &adv);
            if (!in_chars(c, chars, cp))
                break;
            a += adv;
        }
    if (which != 'l')
        while (z > a) {
            size_t p = z - 1;
            while (p > a && ((unsigned char)s->s[p] & 0xC0) == 0x80)
                p--;
            uint32_t cp = sb_rt_utf8_dec(s->s + p, z - p, &adv);
            if (!in_chars(c, chars, cp))
                break;
            z = p;
        }
    return sb_rt_js_sub(c, s, a, z - a);
}

int64_t sb_rt_js_find(jctx *c, const jstr *s, const jstr *sub, size_t from)
{
    if (from > s->len)
        return -1;
    sb_rt_jstep(c, (s->len - from) / 64 + 1);
    if (sub->len == 0)
        return (int64_t)from;
    const char *at = memmem(s->s + from, s->len - from, sub->s, sub->len);
    return at ? at - s->s : -1;
}

static int64_t js_rfind(jctx *c, const jstr *s, const jstr *sub, size_t end)
{ /* last match lying wholly in [0, end) */
    jstr w = { .s = s->s, .len = end };
    int64_t last = -1;
    for (int64_t at = sb_rt_js_find(c, &w, sub, 0); at >= 0;
         at = sb_rt_js_find(c, &w, sub, (size_t)at + 1))
        last = at;
    return last;
}

jstr *sb_rt_js_replace(jctx *c, const jstr *s, const jstr *old, const jstr *neu, int64_t count)
{
    jbuf *b = sb_rt_jbuf_new(c);
    if (count < 0)
        count = INT64_MAX;
    if (old->len == 0) { /* new before every character and at the end */
        size_t i = 0, adv;
        int64_t k = 0;
        while (i <= s->len) {
            if (k < count) {
                sb_rt_jbuf_put_str(c, b, neu);
                k++;
            }
            if (i == s->len)
                break;
            sb_rt_utf8_dec(s->s + i, s->len - i, &adv);
            sb_rt_jbuf_put_range(c, b, s, i, adv);
            i += adv;
        }
    } else {
        size_t i = 0;
        int64_t k = 0;
        while (k < count) {
            int64_t at = sb_rt_js_find(c, s, old, i);
            if (at < 0)
                break;
            sb_rt_jbuf_put_range(c, b, s, i, (size_t)at - i);
            sb_rt_jbuf_put_str(c, b, neu);
            i = (size_t)at + old->len;
            k++;
            sb_rt_jstep(c, 1);
        }
        sb_rt_jbuf_put_range(c, b, s, i, s->len - i);
    }
    jstr *r = sb_rt_jbuf_take(c, b);
    r->markup = s->markup;
    return r;
}

void sb_rt_jv_push(jctx *c, jv **v, size_t *n, size_t *cap, jv x)
{
    if (*n == *cap)
        *v = sb_rt_ja_grow(&c->arena, *v, *n, cap, 8, sizeof **v);
    (*v)[(*n)++] = x;
    sb_rt_jstep(c, 1);
}

static jlist *list_of(jctx *c, jv *v, size_t n)
{
    jlist *l = sb_rt_ja_alloc(&c->arena, sizeof *l);
    l->n = n;
    l->v = v;
    return l;
}

static void reverse_jv(jv *v, size_t n)
{
    for (size_t i = 0; i < n / 2; i++) {
        jv t = v[i];
        v[i] = v[n - 1 - i];
        v[n - 1 - i] = t;
    }
}

jlist *sb_rt_js_split(jctx *c, const jstr *s, const jstr *sep, int64_t maxsplit, bool right)
{
    sb_rt_jstep(c, s->len / 64 + 1);
    jv *v = NULL;
    size_t n = 0, cap = 0;
    if (maxsplit < 0)
        maxsplit = INT64_MAX;
    if (sep && sep->len == 0)
        sb_rt_jfail(c, SB_ERR_INVAL, "ValueError: empty separator");
    if (sep) {
        if (!right) {
            size_t i = 0;
            while ((int64_t)n < maxsplit) {
                int64_t at = sb_rt_js_find(c, s, sep, i);
                if (at < 0)
                    break;
                sb_rt_jv_push(c, &v, &n, &cap, jv_str(sb_rt_js_sub(c, s, i, (size_t)at - i)));
                i = (size_t)at + sep->len;
            }
            sb_rt_jv_push(c, &v, &n, &cap, jv_str(sb_rt_js_sub(c, s, i, s->len - i)));
        } else {
            size_t end = s->len;
            while ((int64_t)n < maxsplit) {
                int64_t at = js_rfind(c, s, sep, end);
                if (at < 0)
                    break;
                size_t from = (size_t)at + sep->len;
                sb_rt_jv_push(c, &v, &n, &cap, jv_str(sb_rt_js_sub(c, s, from, end - from)));
                end = (size_t)at;
            }
            sb_rt_jv_push(c, &v, &n, &cap, jv_str(sb_rt_js_sub(c, s, 0, end)));
            reverse_jv(v, n);
        }
        return list_of(c, v, n);
    }
    /* runs of whitespace; no empty strings */
    size_t nc, *off;
    uint32_t *cps = cps_of(c, s, &nc, &off);
    if (!right) {
        size_t i = 0;
        while (i < nc) {
            while (i < nc && sb_rt_uc_isspace(cps[i]))
                i++;
            if (i == nc)
                break;
            if ((int64_t)n == maxsplit) { /* the rest, leading whitespace gone */
                size_t z = nc;
                sb_rt_jv_push(c, &v, &n, &cap, jv_str(sb_rt_js_sub(c, s, off[i], off[z] - off[i])));
                break;
            }
            size_t j = i;
            while (j < nc && !sb_rt_uc_isspace(cps[j]))
                j++;
            sb_rt_jv_push(c, &v, &n, &cap, jv_str(sb_rt_js_sub(c, s, off[i], off[j] - off[i])));
            i = j;
        }
    } else {
        size_t i = nc;
        while (i > 0) {
            while (i > 0 && sb_rt_uc_isspace(cps[i - 1]))
                i--;
            if (i == 0)
                break;
            if ((int64_t)n == maxsplit) {
                sb_rt_jv_push(c, &v, &n, &cap, jv_str(sb_rt_js_sub(c, s, 0, off[i])));
                break;
            }
            size_t j = i;
            while (j > 0 && !sb_rt_uc_isspace(cps[j - 1]))
                j--;
            sb_rt_jv_push(c, &v, &n, &cap, jv_str(sb_rt_js_sub(c, s, off[j], off[i] - off[j])));
            i = j;
        }
        reverse_jv(v, n);
    }
    return list_of(c, v, n);
}

static bool is_linebreak(uint32_t cp)
{
    return cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || cp == 0x1C || cp == 0x1D ||
           cp == 0x1E || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
}

jlist *sb_rt_js_splitlines(jctx *c, const jstr *s, bool keepends)
{
    jv *v = NULL;
    size_t n = 0, cap = 0, start = 0, i = 0, adv;
    while (i < s->len) {
        uint32_t cp = sb_rt_utf8_dec(s->s + i, s->len - i, &adv);
        if (!is_linebreak(cp)) {
            i += adv;
            continue;
        }
        size_t eol = i + adv;
        if (cp == '\r' && eol < s->len && s->s[eol] == '\n')
            eol++;
        sb_rt_jv_push(c, &v, &n, &cap,
                      jv_str(sb_rt_js_sub(c, s, start, (keepends ? eol : i) - start)));
        start = i = eol;
    }
    if (start < s->len)
        sb_rt_jv_push(c, &v, &n, &cap, jv_str(sb_rt_js_sub(c, s, start, s->len - start)));
    return list_of(c, v, n);
}

jstr *sb_rt_js_concat(jctx *c, const jstr *a, const jstr *b)
{
    if (!a->len && a->markup == b->markup)
        return (jstr *)b;
    if (!b->len && a->markup == b->markup)
        return (jstr *)a;
    jbuf *o = sb_rt_jbuf_new(c);
    sb_rt_jbuf_put_str(c, o, a);
    sb_rt_jbuf_put_str(c, o, b);
    return sb_rt_jbuf_take(c, o);
}

jstr *sb_rt_js_repeat(jctx *c, const jstr *s, int64_t n)
{
    if (n > 0 && s->len && (uint64_t)n > c->lim->max_memory_bytes / s->len)
        sb_rt_jfail(c, SB_ERR_RANGE, "memory over the limit of %zu bytes (max_memory_bytes)",
                    c->lim->max_memory_bytes);
    sb_rt_jstep(c, n > 0 ? (uint64_t)n : 0); /* before the work, not after */
    jbuf *o = sb_rt_jbuf_new(c);
    for (int64_t i = 0; i < n; i++)
        sb_rt_jbuf_put_str(c, o, s);
    return sb_rt_jbuf_take(c, o);
}

jstr *sb_rt_js_escape_html(jctx *c, const jstr *s)
{
    jbuf *o = sb_rt_jbuf_new(c);
    for (size_t i = 0; i < s->len; i++) {
        const char *e = NULL;
        switch (s->s[i]) {
        case '&': e = "&amp;"; break;
        case '<': e = "&lt;"; break;
        case '>': e = "&gt;"; break;
        case '\'': e = "&#39;"; break;
        case '"': e = "&#34;"; break;
        default: break;
        }
        if (e)
            sb_rt_jbuf_put(c, o, e, strlen(e), sb_rt_js_tainted_at(s, i));
        else
            sb_rt_jbuf_put_range(c, o, s, i, 1);
    }
    jstr *r = sb_rt_jbuf_take(c, o);
    r->markup = true;
    return r;
}

/* ---- repr and JSON ------------------------------------------------------------------- */

void sb_rt_js_repr(jctx *c, jbuf *b, const jstr *s)
{
    bool sq = memchr(s->s, '\'', s->len) != NULL, dq = memchr(s->s, '"', s->len) != NULL;
    char q = sq && !dq ? '"' : '\'';
    sb_rt_jbuf_putc(c, b, q, false);
    for (size_t i = 0, adv; i < s->len; i += adv) {
        uint32_t cp = sb_rt_utf8_dec(s->s + i, s->len - i, &adv);
        bool t = sb_rt_js_tainted_at(s, i);
        char e[16];
        if (cp == (uint32_t)q || cp == '\\') {
            e[0] = '\\', e[1] = (char)cp;
            sb_rt_jbuf_put(c, b, e, 2, t);
        } else if (cp == '\t' || cp == '\n' || cp == '\r') {
            e[0] = '\\', e[1] = cp == '\t' ? 't' : cp == '\n' ? 'n' : 'r';
            sb_rt_jbuf_put(c, b, e, 2, t);
        } else if (cp < 0x20 || cp == 0x7F) {
            snprintf(e, sizeof e, "\\x%02x", cp);
            sb_rt_jbuf_put(c, b, e, 4, t);
        } else if (cp < 0x7F || sb_rt_uc_isprintable(cp)) {
            sb_rt_jbuf_put_range(c, b, s, i, adv);
        } else {
            int k = cp <= 0xFF ? snprintf(e, sizeof e, "\\x%02x", cp)
                    : cp <= 0xFFFF ? snprintf(e, sizeof e, "\\u%04x", cp)
                                   : snprintf(e, sizeof e, "\\U%08x", cp);
            sb_rt_jbuf_put(c, b, e, (size_t)k, t);
        }
    }
    sb_rt_jbuf_putc(c, b, q, false);
}

void sb_rt_js_json(jctx *c, jbuf *b, const jstr *s, bool ensure_ascii)
{
    sb_rt_jbuf_putc(c, b, '"', false);
    for (size_t i = 0, adv; i < s->len; i += adv) {
        uint32_t cp = sb_rt_utf8_dec(s->s + i, s->len - i, &adv);
        bool t = sb_rt_js_tainted_at(s, i);
        char e[16];
        int k = 0;
        switch (cp) {
        case '"': k = snprintf(e, sizeof e, "\\\""); break;
        case '\\': k = snprintf(e, sizeof e, "\\\\"); break;
        case '\n': k = snprintf(e, sizeof e, "\\n"); break;
        case '\r': k = snprintf(e, sizeof e, "\\r"); break;
        case '\t': k = snprintf(e, sizeof e, "\\t"); break;
        case '\b': k = snprintf(e, sizeof e, "\\b"); break;
        case '\f': k = snprintf(e, sizeof e, "\\f"); break;
        default:
            if (cp < 0x20 || (ensure_ascii && cp >= 0x7F && cp < 0x10000))
                k = snprintf(e, sizeof e, "\\u%04x", cp);
            else if (ensure_ascii && cp >= 0x10000)
                k = snprintf(e, sizeof e, "\\u%04x\\u%04x", 0xD800 + ((cp - 0x10000) >> 10),
                             0xDC00 + ((cp - 0x10000) & 0x3FF));
            break;
        }
        if (k)
            sb_rt_jbuf_put(c, b, e, (size_t)k, t);
        else
            sb_rt_jbuf_put_range(c, b, s, i, adv);
    }
    sb_rt_jbuf_putc(c, b, '"', false);
}

void sb_rt_jbuf_put_int(jctx *c, jbuf *b, int64_t i)
{
    char num[32];
    int k = snprintf(num, sizeof num, "%" PRId64, i);
    sb_rt_jbuf_put(c, b, num, (size_t)k, false);
}

void sb_rt_jbuf_put_float(jctx *c, jbuf *b, double f)
{
    char num[64];
    sb_rt_jv_format_float(f, num, sizeof num);
    sb_rt_jbuf_put(c, b, num, strlen(num), false);
}

/* ---- spans --------------------------------------------------------------------------- */

int sb_rt_jinja_text_from_buf(char *s, size_t len, const uint8_t *taint, sb_rt_chat_text *out)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += taint[i] && (i == 0 || !taint[i - 1]);
    sb_rt_tok_span *sp = NULL;
    if (n) {
        sp = malloc(n * sizeof *sp);
        if (!sp)
            return SB_ERR_NOMEM;
        size_t k = 0;
        for (size_t i = 0; i < len;) {
            if (!taint[i]) {
                i++;
                continue;
            }
            size_t j = i;
            while (j < len && taint[j])
                j++;
            sp[k].off = i;
            sp[k].len = j - i;
            k++;
            i = j;
        }
    }
    out->text = s;
    out->len = len;
    out->spans = sp;
    out->n_spans = n;
    return SB_OK;
}
