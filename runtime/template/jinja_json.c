/* jinja_json.c -- JSON to values (the caller's extras: tools, tool calls,
 * extra variables; every string tainted) and values to JSON (the tojson
 * filter, as Hugging Face defines it: json.dumps(value, ensure_ascii=False,
 * indent=..., separators=..., sort_keys=...), byte for byte). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/jinja.h"

/* ---- parse --------------------------------------------------------------------------- */

typedef struct jp {
    jctx *c;
    const char *s;
    size_t n, i;
    const char *what;
    uint32_t depth;
} jp;

_Noreturn static void jp_fail(jp *p, const char *why)
{
    sb_rt_jfail(p->c, SB_ERR_INVAL, "%s: invalid JSON at byte %zu: %s", p->what, p->i, why);
}

static void jp_ws(jp *p)
{
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' ||
                           p->s[p->i] == '\r'))
        p->i++;
}

static int jp_hex4(jp *p)
{
    if (p->n - p->i < 4)
        jp_fail(p, "truncated \\u escape");
    int v = 0;
    for (int k = 0; k < 4; k++) {
        char ch = p->s[p->i++];
        int h = ch >= '0' && ch <= '9' ? ch - '0' : (ch | 0x20) >= 'a' && (ch | 0x20) <= 'f'
                ? (ch | 0x20) - 'a' + 10 : -1;
        if (h < 0)
            jp_fail(p, "bad \\u escape");
        v = v * 16 + h;
    }
    return v;
}

static jstr *jp_string(jp *p)
{
    p->i++; /* " */
    jbuf *b = sb_rt_jbuf_new(p->c);
    for (;;) {
        if (p->i >= p->n)
            jp_fail(p, "unterminated string");
        unsigned char ch = (unsigned char)p->s[p->i];
        if (ch == '"') {
            p->i++;
            break;
        }
        if (ch < 0x20)
            jp_fail(p, "control character in a string");
        if (ch != '\\') {
            size_t j = p->i;
            while (j < p->n && p->s[j] != '"' && p->s[j] != '\\' && (unsigned char)p->s[j] >= 0x20)
                j++;
            if (!sb_rt_utf8_valid(p->s + p->i, j - p->i))
                jp_fail(p, "invalid UTF-8");
            sb_rt_jbuf_put(p->c, b, p->s + p->i, j - p->i, true);
            p->i = j;
            continue;
        }
        p->i++;
        if (p->i >= p->n)
            jp_fail(p, "unterminated string");
        char e = p->s[p->i++], out;
        switch (e) {
        case '"': out = '"'; break;
        case '\\': out = '\\'; break;
        case '/': out = '/'; break;
        case 'b': out = '\b'; break;
        case 'f': out = '\f'; break;
        case 'n': out = '\n'; break;
        case 'r': out = '\r'; break;
        case 't': out = '\t'; break;
        case 'u': {
            uint32_t cp = (uint32_t)jp_hex4(p);
            if (cp >= 0xD800 && cp < 0xDC00) {
                if (p->n - p->i < 6 || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u')
                    jp_fail(p, "a lone surrogate");
                p->i += 2;
                uint32_t lo = (uint32_t)jp_hex4(p);
                if (lo < 0xDC00 || lo >= 0xE000)
                    jp_fail(p, "a lone surrogate");
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp < 0xE000) {
                jp_fail(p, "a lone surrogate");
            }
            char u[4];
            sb_rt_jbuf_put(p->c, b, u, sb_rt_utf8_enc(cp, u), true);
            continue;
        }
        default: jp_fail(p, "bad escape");
        }
        sb_rt_jbuf_putc(p->c, b, out, true);
    }
    return sb_rt_jbuf_take(p->c, b);
}

static jv jp_value(jp *p);

/* after an item of an object or array: true on ',' (another follows),
 * false on the closer; both consumed */
static bool jp_more(jp *p, char close)
{
    jp_ws(p);
    if (p->i < p->n && p->s[p->i] == ',') {
        p->i++;
        return true;
    }
    if (p->i < p->n && p->s[p->i] == close) {
        p->i++;
        return false;
    }
    jp_fail(p, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
}

/* an empty object or array: the closer, consumed */
static bool jp_empty(jp *p, char close)
{
    jp_ws(p);
    if (p->i < p->n && p->s[p->i] == close) {
        p->i++;
        return true;
    }
    return false;
}

/* one or more digits */
static void jp_digits(jp *p)
{
    size_t d = p->i;
    while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9')
        p->i++;
    if (p->i == d)
        jp_fail(p, "bad number");
}

static jv jp_number(jp *p)
{
    size_t a = p->i;
    bool fl = false;
    if (p->s[p->i] == '-')
        p->i++;
    if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9')
        jp_fail(p, "bad number");
    if (p->s[p->i] == '0')
        p->i++;
    else
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9')
            p->i++;
    if (p->i < p->n && p->s[p->i] == '.') {
        fl = true;
        p->i++;
        jp_digits(p);
    }
    if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        fl = true;
        p->i++;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-'))
            p->i++;
        jp_digits(p);
    }
    char buf[512];
    size_t len = p->i - a;
    if (len >= sizeof buf)
        jp_fail(p, "number too long");
    jcopy(buf, p->s + a, len);
    buf[len] = '\0';
    if (fl)
        return jv_float(strtod(buf, NULL));
    char *end;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (errno)
        sb_rt_jfail(p->c, SB_ERR_UNSUPPORTED, "%s: integer %s over 64 bits", p->what, buf);
    return jv_int(v);
}

static jv jp_value(jp *p)
{
    jp_ws(p);
    if (p->i >= p->n)
        jp_fail(p, "unexpected end");
    sb_rt_jstep(p->c, 1);
    char ch = p->s[p->i];
    if (ch == '"')
        return jv_str(jp_string(p));
    if (ch == '{' || ch == '[') {
        if (++p->depth > p->c->lim->max_depth)
            sb_rt_jfail(p->c, SB_ERR_INVAL, "%s: JSON nests deeper than %u (max_depth)", p->what,
                        p->c->lim->max_depth);
        p->i++;
        jv r;
        if (ch == '{') {
            jdict *d = sb_rt_jd_new(p->c, 4);
            if (!jp_empty(p, '}'))
                do {
                    jp_ws(p);
                    if (p->i >= p->n || p->s[p->i] != '"')
                        jp_fail(p, "expected a string key");
                    jv k = jv_str(jp_string(p));
                    jp_ws(p);
                    if (p->i >= p->n || p->s[p->i] != ':')
                        jp_fail(p, "expected ':'");
                    p->i++;
                    sb_rt_jd_set(p->c, d, k, jp_value(p));
                } while (jp_more(p, '}'));
            r = jv_dict(d);
        } else {
            jv *v = NULL;
            size_t n = 0, cap = 0;
            if (!jp_empty(p, ']'))
                do {
                    jv x = jp_value(p);
                    sb_rt_jv_push(p->c, &v, &n, &cap, x);
                } while (jp_more(p, ']'));
            jlist *l = sb_rt_jl_new(p->c, 0, false);
            l->n = n;
            l->v = v;
            r = jv_list(l);
        }
        p->depth--;
        return r;
    }
    if (ch == '-' || (ch >= '0' && ch <= '9'))
        return jp_number(p);
    if (p->n - p->i >= 4 && !strncmp(p->s + p->i, "true", 4)) {
        p->i += 4;
        return jv_bool(true);
    }
    if (p->n - p->i >= 5 && !strncmp(p->s + p->i, "false", 5)) {
        p->i += 5;
        return jv_bool(false);
    }
    if (p->n - p->i >= 4 && !strncmp(p->s + p->i, "null", 4)) {
        p->i += 4;
        return jv_none();
    }
    jp_fail(p, "unexpected character");
}

jv sb_rt_jjson_parse(jctx *c, const char *text, size_t len, const char *what)
{
    jp p = { .c = c, .s = text, .n = len, .what = what };
    jv v = jp_value(&p);
    jp_ws(&p);
    if (p.i != p.n)
        jp_fail(&p, "extra data after the value");
    return v;
}

/* ---- dump ---------------------------------------------------------------------------- */

typedef struct jd_opts {
    bool ensure_ascii, sort_keys;
    const jstr *indent;         /* NULL: no newlines */
    const jstr *item_sep, *key_sep;
} jd_opts;

static void put(jctx *c, jbuf *b, const char *s)
{
    sb_rt_jbuf_put(c, b, s, strlen(s), false);
}

static void newline_indent(jctx *c, jbuf *b, const jd_opts *o, uint32_t level)
{
    put(c, b, "\n");
    for (uint32_t k = 0; k < level; k++)
        sb_rt_jbuf_put_str(c, b, o->indent);
}

static void dump_float(jctx *c, jbuf *b, double f)
{
    if (isnan(f))
        put(c, b, "NaN");
    else if (isinf(f))
        put(c, b, f < 0 ? "-Infinity" : "Infinity");
    else
        sb_rt_jbuf_put_float(c, b, f);
}

_Noreturn static void not_serializable(jctx *c, jv v)
{
    sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: Object of type %s is not JSON serializable",
                sb_rt_jv_type_name(v));
}

/* a dict key as json.dumps writes it */
static void dump_key(jctx *c, jbuf *b, jv k, const jd_opts *o)
{
    switch (k.kind) {
    case JV_STR:
        sb_rt_js_json(c, b, k.s, o->ensure_ascii);
        return;
    case JV_NONE: put(c, b, "\"null\""); return;
    case JV_BOOL: put(c, b, k.b ? "\"true\"" : "\"false\""); return;
    case JV_INT:
        put(c, b, "\"");
        sb_rt_jbuf_put_int(c, b, k.i);
        put(c, b, "\"");
        return;
    case JV_FLOAT:
        put(c, b, "\"");
        dump_float(c, b, k.f);
        put(c, b, "\"");
        return;
    default:
        sb_rt_jfail(c, SB_ERR_INVAL,
                    "TypeError: keys must be str, int, float, bool or None, not %s",
                    sb_rt_jv_type_name(k));
    }
}

static void dump(jctx *c, jbuf *b, jv v, const jd_opts *o, uint32_t level)
{
    if (level > c->lim->max_depth)
        sb_rt_jfail(c, SB_ERR_RANGE, "values nest deeper than %u (max_depth)", c->lim->max_depth);
    sb_rt_jstep(c, 1);
    switch (v.kind) {
    case JV_NONE: put(c, b, "null"); return;
    case JV_BOOL: put(c, b, v.b ? "true" : "false"); return;
    case JV_INT:
        sb_rt_jbuf_put_int(c, b, v.i);
        return;
    case JV_FLOAT: dump_float(c, b, v.f); return;
    case JV_STR:
        sb_rt_js_json(c, b, v.s, o->ensure_ascii);
        return;
    case JV_LIST:
        if (v.l->wrap)
            not_serializable(c, v);
        if (!v.l->n) {
            put(c, b, "[]");
            return;
        }
        put(c, b, "[");
        for (size_t i = 0; i < v.l->n; i++) {
            if (i)
                sb_rt_jbuf_put_str(c, b, o->item_sep);
            if (o->indent)
                newline_indent(c, b, o, level + 1);
            dump(c, b, v.l->v[i], o, level + 1);
        }
        if (o->indent)
            newline_indent(c, b, o, level);
        put(c, b, "]");
        return;
    case JV_DICT: {
        if (!v.d->n) {
            put(c, b, "{}");
            return;
        }
        size_t n = v.d->n, *ord = sb_rt_ja_alloc(&c->arena, n * sizeof *ord);
        for (size_t i = 0; i < n; i++)
            ord[i] = i;
        if (o->sort_keys) /* insertion sort: stable, compares as Python's sorted(items) */
            for (size_t i = 1; i < n; i++)
                for (size_t j = i; j > 0; j--) {
                    int r = sb_rt_jv_cmp(c, v.d->k[ord[j - 1]], v.d->k[ord[j]]);
                    if (r < 0 ||
                        (r == 0 && sb_rt_jv_cmp(c, v.d->v[ord[j - 1]], v.d->v[ord[j]]) <= 0))
                        break;
                    size_t t = ord[j];
                    ord[j] = ord[j - 1];
                    ord[j - 1] = t;
                }
        put(c, b, "{");
        for (size_t i = 0; i < n; i++) {
            if (i)
                sb_rt_jbuf_put_str(c, b, o->item_sep);
            if (o->indent)
                newline_indent(c, b, o, level + 1);
            dump_key(c, b, v.d->k[ord[i]], o);
            sb_rt_jbuf_put_str(c, b, o->key_sep);
            dump(c, b, v.d->v[ord[i]], o, level + 1);
        }
        if (o->indent)
            newline_indent(c, b, o, level);
        put(c, b, "}");
        return;
    }
    default:
        not_serializable(c, v);
    }
}

void sb_rt_jjson_dump(jctx *c, jbuf *b, jv v, bool ensure_ascii, int64_t indent,
                      const jstr *indent_str, const jstr *item_sep, const jstr *key_sep,
                      bool sort_keys)
{
    jd_opts o = { .ensure_ascii = ensure_ascii, .sort_keys = sort_keys };
    if (indent_str) {
        o.indent = indent_str;
    } else if (indent >= 0) {
        if ((uint64_t)indent > c->lim->max_memory_bytes)
            sb_rt_jfail(c, SB_ERR_RANGE, "tojson indent %" PRId64 " too large", indent);
        o.indent = sb_rt_js_repeat(c, sb_rt_js_lit(c, " "), indent);
    }
    o.item_sep = item_sep ? item_sep : sb_rt_js_lit(c, o.indent ? "," : ", ");
    o.key_sep = key_sep ? key_sep : sb_rt_js_lit(c, ": ");
    dump(c, b, v, &o, 0);
}
