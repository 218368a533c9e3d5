/* jinja_methods.c -- the template's global functions (range, dict,
 * namespace, raise_exception) and the methods of str, dict and list, with
 * Python's behaviour; calls to them (sb_rt_jb_call). Mutating methods fail as
 * jinja2's immutable sandbox makes them fail; str methods Python has and
 * this file lacks fail as unsupported. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/jinja.h"

#define ARGS(...) ((const char *const[]){ __VA_ARGS__, NULL })

static jv mkstr(jctx *c, const char *s)
{
    return jv_str(sb_rt_js_lit(c, s));
}

/* ---- globals ------------------------------------------------------------------------- */

jv sb_rt_jcall_new(jctx *c, int kind, const char *name, jv self)
{
    jcall *k = sb_rt_ja_alloc(&c->arena, sizeof *k);
    k->kind = (uint8_t)kind;
    k->name = name;
    k->self = self;
    k->caller = jv_undef(NULL);
    jv v = { .kind = JV_CALL };
    v.c = k;
    return v;
}

static const char *const globals[] = { "range", "dict", "namespace", "raise_exception" };

bool sb_rt_jb_global(jctx *c, const char *name, jv *out)
{
    for (size_t i = 0; i < sizeof globals / sizeof globals[0]; i++)
        if (!strcmp(globals[i], name)) {
            *out = sb_rt_jcall_new(c, JC_GLOBAL, globals[i], jv_none());
            return true;
        }
    return false;
}

#define MAX_RANGE 100000 /* jinja2.sandbox.MAX_RANGE */

static jv g_range(jctx *c, const jargs *a)
{
    if (a->n_kw)
        sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: range() takes no keyword arguments");
    if (a->n < 1 || a->n > 3)
        sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: range expected 1 to 3 arguments, got %zu", a->n);
    int64_t start = 0, stop, step = 1;
    if (a->n == 1) {
        stop = sb_rt_jb_want_int(c, a->v[0], "range argument");
    } else {
        start = sb_rt_jb_want_int(c, a->v[0], "range argument");
        stop = sb_rt_jb_want_int(c, a->v[1], "range argument");
        if (a->n == 3)
            step = sb_rt_jb_want_int(c, a->v[2], "range argument");
    }
    if (step == 0)
        sb_rt_jfail(c, SB_ERR_INVAL, "ValueError: range() arg 3 must not be zero");
    uint64_t n = 0;
    if (step > 0 && start < stop)
        n = ((uint64_t)stop - (uint64_t)start - 1) / (uint64_t)step + 1;
    else if (step < 0 && start > stop)
        n = ((uint64_t)start - (uint64_t)stop - 1) / ((uint64_t)0 - (uint64_t)step) + 1;
    if (n > MAX_RANGE)
        sb_rt_jfail(c, SB_ERR_INVAL,
                    "OverflowError: Range too big. The sandbox blocks ranges larger "
                    "than MAX_RANGE (%d).",
                    MAX_RANGE);
    jlist *l = sb_rt_jl_new(c, (size_t)n, false);
    for (uint64_t i = 0; i < n; i++)
        l->v[i] = jv_int(start + (int64_t)i * step);
    l->wrap = "range";
    l->range[0] = start;
    l->range[1] = stop;
    l->range[2] = step;
    return jv_list(l);
}

static jv kwargs_dict(jctx *c, const jargs *a, int kind)
{
    jdict *d = sb_rt_jd_new(c, a->n_kw + 4);
    if (a->n > 1)
        sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: %s expected at most 1 argument, got %zu",
                    kind == JV_NS ? "namespace" : "dict", a->n);
    if (a->n == 1) {
        jv src = a->v[0];
        if (src.kind == JV_DICT || src.kind == JV_NS) {
            for (size_t i = 0; i < src.d->n; i++)
                sb_rt_jd_set(c, d, src.d->k[i], src.d->v[i]);
        } else {
            jlist *l = sb_rt_jv_iterate(c, src);
            for (size_t i = 0; i < l->n; i++) {
                jlist *pair = sb_rt_jv_iterate(c, l->v[i]);
                if (pair->n != 2)
                    sb_rt_jfail(c, SB_ERR_INVAL,
                                "ValueError: dictionary update sequence element #%zu "
                                "has length %zu; 2 is required",
                                i, pair->n);
                sb_rt_jd_set(c, d, pair->v[0], pair->v[1]);
            }
        }
    }
    for (size_t k = 0; k < a->n_kw; k++)
        sb_rt_jd_set(c, d, mkstr(c, a->kw[k]), a->kv[k]);
    jv v = { .kind = (uint8_t)kind };
    v.d = d;
    return v;
}

static jv call_global(jctx *c, const char *name, const jargs *a)
{
    if (!strcmp(name, "range"))
        return g_range(c, a);
    if (!strcmp(name, "dict"))
        return kwargs_dict(c, a, JV_DICT);
    if (!strcmp(name, "namespace"))
        return kwargs_dict(c, a, JV_NS);
    /* raise_exception(message): the render fails with the message as it is */
    jv m = sb_rt_jarg(a, 0, "message", jv_undef(NULL));
    jstr *s = sb_rt_jv_to_str(c, m);
    sb_rt_jfail(c, SB_ERR_INVAL, "\x01%.*s", (int)(s->len > 400 ? 400 : s->len), s->s);
}

/* ---- methods ------------------------------------------------------------------------- */

static const char *const str_methods[] = {
    "capitalize", "count", "endswith", "find", "format", "index", "islower", "isspace",
    "isupper", "join", "lower", "lstrip", "replace", "rfind", "rsplit", "rstrip", "split",
    "splitlines", "startswith", "strip", "title", "upper",
};
/* str methods Python has that are not above: calling one fails as unsupported */
static const char *const str_other[] = {
    "casefold", "center", "encode", "expandtabs", "format_map", "isalnum", "isalpha",
    "isascii", "isdecimal", "isdigit", "isidentifier", "isnumeric", "isprintable", "istitle",
    "ljust", "maketrans", "partition", "removeprefix", "removesuffix", "rindex", "rjust",
    "rpartition", "swapcase", "translate", "zfill",
};
static const char *const dict_methods[] = { "get", "items", "keys", "values", "copy" };
static const char *const dict_unsafe[] = { "clear", "pop", "popitem", "setdefault", "update" };
static const char *const list_methods[] = { "count", "index", "copy" };
static const char *const list_unsafe[] = { "append", "clear", "extend", "insert", "pop",
                                           "remove", "reverse", "sort" };

static const char *in_list(const char *const *l, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(l[i], name))
            return l[i];
    return NULL;
}

#define IN_LIST(l, name) in_list(l, sizeof l / sizeof l[0], name)

bool sb_rt_jb_method(jctx *c, jv obj, const char *name, jv *out)
{
    const char *m = NULL;
    int kind = JC_METHOD;
    switch (obj.kind) {
    case JV_STR:
        m = IN_LIST(str_methods, name);
        if (!m && (m = IN_LIST(str_other, name)))
            kind = JC_UNSUPPORTED;
        break;
    case JV_DICT:
        m = IN_LIST(dict_methods, name);
        if (!m && (m = IN_LIST(dict_unsafe, name)))
            kind = JC_UNSAFE;
        break;
    case JV_LIST:
        if (obj.l->wrap)
            break;
        m = IN_LIST(list_methods, name);
        if (!m && (m = IN_LIST(list_unsafe, name)))
            kind = JC_UNSAFE;
        break;
    case JV_LOOP:
        if (!strcmp(name, "cycle")) {
            m = "cycle";
            kind = JC_CYCLE;
        }
        break;
    default:
        break;
    }
    if (!m)
        return false;
    *out = sb_rt_jcall_new(c, kind, m, obj);
    return true;
}

/* str.format: {} {0} {name} {{ }}, with !s / !r; no format specs */
static jv m_format(jctx *c, jstr *s, const jargs *a)
{
    jbuf *b = sb_rt_jbuf_new(c);
    size_t auto_i = 0, i = 0;
    int numbering = 0; /* 1 automatic ({}), 2 manual ({0}): Python refuses a mix */
    while (i < s->len) {
        char ch = s->s[i];
        if (ch == '}') {
            if (i + 1 < s->len && s->s[i + 1] == '}') {
                sb_rt_jbuf_put_range(c, b, s, i, 1);
                i += 2;
                continue;
            }
            sb_rt_jfail(c, SB_ERR_INVAL, "ValueError: Single '}' encountered in format string");
        }
        if (ch != '{') {
            sb_rt_jbuf_put_range(c, b, s, i, 1);
            i++;
            continue;
        }
        if (i + 1 < s->len && s->s[i + 1] == '{') {
            sb_rt_jbuf_put_range(c, b, s, i, 1);
            i += 2;
            continue;
        }
        size_t j = i + 1;
        while (j < s->len && s->s[j] != '}' && s->s[j] != '!' && s->s[j] != ':')
            j++;
        jstr *field = sb_rt_js_sub(c, s, i + 1, j - i - 1);
        char conv = 's';
        if (j < s->len && s->s[j] == '!') {
            if (j + 1 >= s->len || (s->s[j + 1] != 's' && s->s[j + 1] != 'r'))
                sb_rt_jfail(c, SB_ERR_UNSUPPORTED, "str.format conversions other than !s and !r");
            conv = s->s[j + 1];
            j += 2;
        }
        if (j < s->len && s->s[j] == ':')
            sb_rt_jfail(c, SB_ERR_UNSUPPORTED, "str.format format specs are not supported");
        if (j >= s->len || s->s[j] != '}')
            sb_rt_jfail(c, SB_ERR_INVAL, "ValueError: expected '}' before end of string");
        jv v;
        bool positional = field->len == 0 || (field->s[0] >= '0' && field->s[0] <= '9');
        if (positional) {
            int mode = field->len == 0 ? 1 : 2;
            if (numbering && numbering != mode)
                sb_rt_jfail(c, SB_ERR_INVAL,
                            "ValueError: cannot switch between automatic and manual "
                            "field numbering");
            numbering = mode;
        }
        if (field->len == 0) {
            if (auto_i >= a->n)
                sb_rt_jfail(c, SB_ERR_INVAL, "IndexError: Replacement index %zu out of range",
                            auto_i);
            v = a->v[auto_i++];
        } else if (field->s[0] >= '0' && field->s[0] <= '9') {
            size_t k = 0;
            for (size_t q = 0; q < field->len; q++) {
                if (field->s[q] < '0' || field->s[q] > '9')
                    sb_rt_jfail(c, SB_ERR_UNSUPPORTED, "str.format field '%.*s'", (int)field->len,
                                field->s);
                k = k * 10 + (size_t)(field->s[q] - '0');
                if (k > a->n)
                    break;
            }
            if (k >= a->n)
                sb_rt_jfail(c, SB_ERR_INVAL, "IndexError: Replacement index %zu out of range", k);
            v = a->v[k];
        } else {
            bool found = false;
            for (size_t k = 0; k < a->n_kw && !found; k++)
                if (strlen(a->kw[k]) == field->len && !memcmp(a->kw[k], field->s, field->len)) {
                    v = a->kv[k];
                    found = true;
                }
            if (!found) {
                for (size_t q = 0; q < field->len; q++)
                    if (field->s[q] == '.' || field->s[q] == '[')
                        sb_rt_jfail(c, SB_ERR_UNSUPPORTED, "str.format field '%.*s'",
                                    (int)field->len, field->s);
                sb_rt_jfail(c, SB_ERR_INVAL, "KeyError: '%.*s'", (int)field->len, field->s);
            }
        }
        jstr *vs;
        if (conv == 'r') {
            jbuf *rb = sb_rt_jbuf_new(c);
            sb_rt_jv_repr_into(c, rb, v);
            vs = sb_rt_jbuf_take(c, rb);
        } else {
            vs = sb_rt_jv_to_str(c, v);
        }
        if (s->markup && !vs->markup)
            vs = sb_rt_js_escape_html(c, vs);
        sb_rt_jbuf_put_str(c, b, vs);
        i = j + 1;
    }
    return jv_str(sb_rt_jb_markup(c, sb_rt_jbuf_take(c, b), s->markup));
}

/* the start/end arguments of startswith, count, find... as byte offsets */
static void sub_range(jctx *c, jstr *s, const jargs *a, size_t first, size_t *b0, size_t *b1)
{
    int64_t n = (int64_t)sb_rt_js_ncp(s), st = 0, en = n;
    if (a->n > first && a->v[first].kind != JV_NONE)
        st = sb_rt_jb_want_int(c, a->v[first], "start");
    if (a->n > first + 1 && a->v[first + 1].kind != JV_NONE)
        en = sb_rt_jb_want_int(c, a->v[first + 1], "end");
    if (st < 0)
        st = st + n < 0 ? 0 : st + n;
    if (en < 0)
        en = en + n < 0 ? 0 : en + n;
    if (st > n)
        st = n + 1; /* beyond: nothing matches, not even "" */
    if (en > n)
        en = n;
    *b0 = st > n ? s->len + 1 : sb_rt_js_cp_off(s, (size_t)st);
    *b1 = sb_rt_js_cp_off(s, (size_t)(en < 0 ? 0 : en));
}

static bool affix(jctx *c, jstr *s, const jargs *a, bool end, const char *what)
{
    sb_rt_jb_check_args(c, a, what, 3, NULL);
    if (a->n < 1)
        sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: %s() takes at least 1 argument (0 given)", what);
    size_t b0, b1;
    sub_range(c, s, a, 1, &b0, &b1);
    if (b0 > s->len || b1 < b0)
        return false;
    jstr *w = sb_rt_js_sub(c, s, b0, b1 - b0);
    jv p = a->v[0];
    jlist one = { .n = 1, .v = &p };
    jlist *cands = p.kind == JV_LIST && p.l->tuple ? p.l : &one;
    if (p.kind != JV_STR && !(p.kind == JV_LIST && p.l->tuple))
        sb_rt_jfail(c, SB_ERR_INVAL,
                    "TypeError: %s first arg must be str or a tuple of str, not %s", what,
                    sb_rt_jv_type_name(p));
    for (size_t i = 0; i < cands->n; i++) {
        jstr *x = sb_rt_jb_want_str(c, cands->v[i], "prefix");
        if (x->len <= w->len &&
            !memcmp(end ? w->s + w->len - x->len : w->s, x->s, x->len))
            return true;
    }
    return false;
}

static jv str_method(jctx *c, const char *m, jstr *s, const jargs *a)
{
    bool mk = s->markup;
    if (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip")) {
        sb_rt_jb_check_args(c, a, m, 1, NULL);
        jv ch = sb_rt_jarg(a, 0, NULL, jv_none());
        return jv_str(sb_rt_js_strip(c, s,
                                     ch.kind == JV_NONE ? NULL : sb_rt_jb_want_str(c, ch, "chars"),
                                     m[0] == 's' ? 'b' : m[0]));
    }
    if (!strcmp(m, "upper") || !strcmp(m, "lower") || !strcmp(m, "title") ||
        !strcmp(m, "capitalize")) {
        sb_rt_jb_check_args(c, a, m, 0, NULL);
        return jv_str(sb_rt_js_case(c, s,
                                    m[0] == 'u'   ? 'u'
                                    : m[0] == 'l' ? 'l'
                                    : m[0] == 't' ? 't'
                                                  : 'c'));
    }
    if (!strcmp(m, "startswith") || !strcmp(m, "endswith"))
        return jv_bool(affix(c, s, a, m[0] == 'e', m));
    if (!strcmp(m, "split") || !strcmp(m, "rsplit")) {
        sb_rt_jb_check_args(c, a, m, 2, ARGS("sep", "maxsplit"));
        jv sep = sb_rt_jarg(a, 0, "sep", jv_none());
        int64_t mx = sb_rt_jb_want_int(c, sb_rt_jarg(a, 1, "maxsplit", jv_int(-1)), "maxsplit");
        jlist *l = sb_rt_js_split(
            c, s, sep.kind == JV_NONE ? NULL : sb_rt_jb_want_str(c, sep, "sep"), mx, m[0] == 'r');
        return jv_list(l);
    }
    if (!strcmp(m, "splitlines")) {
        sb_rt_jb_check_args(c, a, m, 1, ARGS("keepends"));
        return jv_list(sb_rt_js_splitlines(
            c, s, sb_rt_jv_truth(sb_rt_jarg(a, 0, "keepends", jv_bool(false)))));
    }
    if (!strcmp(m, "replace")) {
        sb_rt_jb_check_args(c, a, m, 3, ARGS("count"));
        if (a->n < 2)
            sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: replace expected at least 2 arguments");
        jstr *old = sb_rt_jb_want_str(c, a->v[0], "replace() argument 1");
        jstr *neu = sb_rt_jb_want_str(c, a->v[1], "replace() argument 2");
        if (mk) {
            if (!old->markup)
                old = sb_rt_js_escape_html(c, old);
            if (!neu->markup)
                neu = sb_rt_js_escape_html(c, neu);
        }
        int64_t n = sb_rt_jb_want_int(c, sb_rt_jarg(a, 2, "count", jv_int(-1)), "count");
        return jv_str(sb_rt_jb_markup(c, sb_rt_js_replace(c, s, old, neu, n), mk));
    }
    if (!strcmp(m, "join")) {
        sb_rt_jb_check_args(c, a, m, 1, NULL);
        if (a->n < 1)
            sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: join() takes exactly one argument (0 given)");
        jlist *l = sb_rt_jv_iterate(c, a->v[0]);
        jbuf *b = sb_rt_jbuf_new(c);
        for (size_t i = 0; i < l->n; i++) {
            if (l->v[i].kind != JV_STR && !mk)
                sb_rt_jfail(c, SB_ERR_INVAL,
                            "TypeError: sequence item %zu: expected str instance, "
                            "%s found",
                            i, sb_rt_jv_type_name(l->v[i]));
            if (i)
                sb_rt_jbuf_put_str(c, b, s);
            jstr *it = sb_rt_jv_to_str(c, l->v[i]);
            if (mk && !it->markup)
                it = sb_rt_js_escape_html(c, it);
            sb_rt_jbuf_put_str(c, b, it);
        }
        return jv_str(sb_rt_jb_markup(c, sb_rt_jbuf_take(c, b), mk));
    }
    if (!strcmp(m, "count") || !strcmp(m, "find") || !strcmp(m, "rfind") ||
        !strcmp(m, "index")) {
        sb_rt_jb_check_args(c, a, m, 3, NULL);
        if (a->n < 1)
            sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: %s() takes at least 1 argument (0 given)", m);
        jstr *sub = sb_rt_jb_want_str(c, a->v[0], "substring");
        size_t b0, b1;
        sub_range(c, s, a, 1, &b0, &b1);
        int64_t found = -1, count = 0;
        if (b0 <= s->len && b1 >= b0) {
            jstr *w = sb_rt_js_sub(c, s, b0, b1 - b0);
            if (!strcmp(m, "count")) {
                if (!sub->len)
                    count = (int64_t)sb_rt_js_ncp(w) + 1;
                else
                    for (int64_t at = sb_rt_js_find(c, w, sub, 0); at >= 0;
                         at = sb_rt_js_find(c, w, sub, (size_t)at + sub->len))
                        count++;
                return jv_int(count);
            }
            int64_t at = -1;
            if (m[0] == 'r') {
                for (int64_t p = sb_rt_js_find(c, w, sub, 0); p >= 0;
                     p = (size_t)p + 1 <= w->len ? sb_rt_js_find(c, w, sub, (size_t)p + 1) : -1)
                    at = p;
            } else {
                at = sb_rt_js_find(c, w, sub, 0);
            }
            if (at >= 0) {
                jstr pre = { .s = s->s, .len = b0 + (size_t)at };
                found = (int64_t)sb_rt_js_ncp(&pre);
            }
        } else if (!strcmp(m, "count")) {
            return jv_int(0);
        }
        if (found < 0 && !strcmp(m, "index"))
            sb_rt_jfail(c, SB_ERR_INVAL, "ValueError: substring not found");
        return jv_int(found);
    }
    if (!strcmp(m, "isspace") || !strcmp(m, "islower") || !strcmp(m, "isupper")) {
        sb_rt_jb_check_args(c, a, m, 0, NULL);
        if (m[2] == 'l')
            return jv_bool(sb_rt_js_islower(s));
        if (m[2] == 'u')
            return jv_bool(sb_rt_js_isupper(s));
        bool all = s->len > 0;
        for (size_t i = 0, adv; i < s->len && all; i += adv)
            all = sb_rt_uc_isspace(sb_rt_utf8_dec(s->s + i, s->len - i, &adv));
        return jv_bool(all);
    }
    if (!strcmp(m, "format"))
        return m_format(c, s, a);
    sb_rt_jfail(c, SB_ERR_UNSUPPORTED, "the str method '%s' is not supported", m);
}

static jv dict_method(jctx *c, const char *m, jdict *d, const jargs *a)
{
    if (!strcmp(m, "get")) {
        sb_rt_jb_check_args(c, a, "get", 2, NULL);
        if (a->n < 1)
            sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: get expected at least 1 argument, got 0");
        jv r;
        sb_rt_jv_check_hashable(c, a->v[0]);
        if (sb_rt_jd_get(c, d, a->v[0], &r))
            return r;
        return a->n > 1 ? a->v[1] : jv_none();
    }
    sb_rt_jb_check_args(c, a, m, 0, NULL);
    if (!strcmp(m, "copy")) {
        jdict *n = sb_rt_jd_new(c, d->n + 1);
        for (size_t i = 0; i < d->n; i++)
            sb_rt_jd_set(c, n, d->k[i], d->v[i]);
        return jv_dict(n);
    }
    jlist *l = sb_rt_jl_new(c, d->n, false);
    for (size_t i = 0; i < d->n; i++) {
        if (m[0] == 'k') {
            l->v[i] = d->k[i];
        } else if (m[0] == 'v') {
            l->v[i] = d->v[i];
        } else {
            jlist *t = sb_rt_jl_new(c, 2, true);
            t->v[0] = d->k[i];
            t->v[1] = d->v[i];
            l->v[i] = jv_list(t);
        }
    }
    l->wrap = m[0] == 'k' ? "dict_keys" : m[0] == 'v' ? "dict_values" : "dict_items";
    return jv_list(l);
}

static jv list_method(jctx *c, const char *m, jlist *l, const jargs *a)
{
    if (!strcmp(m, "copy")) {
        sb_rt_jb_check_args(c, a, m, 0, NULL);
        jlist *n = sb_rt_jl_new(c, l->n, l->tuple);
        if (l->n)
            jcopy(n->v, l->v, l->n * sizeof *n->v);
        return jv_list(n);
    }
    sb_rt_jb_check_args(c, a, m, 1, NULL);
    if (a->n < 1)
        sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: %s() takes exactly one argument (0 given)", m);
    int64_t cnt = 0;
    for (size_t i = 0; i < l->n; i++)
        if (sb_rt_jv_eq(c, l->v[i], a->v[0])) {
            if (m[0] == 'i')
                return jv_int((int64_t)i);
            cnt++;
        }
    if (m[0] == 'i')
        sb_rt_jfail(c, SB_ERR_INVAL, "ValueError: value is not in list");
    return jv_int(cnt);
}

jv sb_rt_jb_call(jctx *c, jv fn, const jargs *a)
{
    if (fn.kind == JV_UNDEF)
        sb_rt_jfail(c, SB_ERR_INVAL, "UndefinedError: %s", fn.undef ? fn.undef : "undefined value");
    if (fn.kind != JV_CALL)
        sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: '%s' object is not callable",
                    sb_rt_jv_type_name(fn));
    jcall *k = fn.c;
    switch (k->kind) {
    case JC_GLOBAL:
        return call_global(c, k->name, a);
    case JC_UNSAFE:
        sb_rt_jfail(c, SB_ERR_INVAL,
                    "SecurityError: access to attribute '%s' of '%s' object is "
                    "unsafe.",
                    k->name, sb_rt_jv_type_name(k->self));
    case JC_CYCLE:
        if (a->n == 0)
            sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: no items for cycling given");
        return a->v[k->self.loop->index0 % a->n];
    case JC_MACRO:
        return sb_rt_jeval_call_macro(c, fn, a);
    case JC_UNSUPPORTED:
        sb_rt_jfail(c, SB_ERR_UNSUPPORTED, "the %s method '%s' is not supported",
                    sb_rt_jv_type_name(k->self), k->name);
    default: /* JC_METHOD */
        if (k->self.kind == JV_STR)
            return str_method(c, k->name, k->self.s, a);
        if (k->self.kind == JV_DICT)
            return dict_method(c, k->name, k->self.d, a);
        return list_method(c, k->name, k->self.l, a);
    }
}
