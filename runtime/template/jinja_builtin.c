/* jinja_builtin.c -- filters and tests, with jinja2 3.1's (and Python's)
 * behaviour; tojson is Hugging Face's (json.dumps, ensure_ascii off, no
 * HTML escaping). The filters jinja2 returns generators from (select,
 * reject, selectattr, rejectattr, map, unique, items) are lazy here too.
 * What jinja2 has and this file lacks is listed in known_filters /
 * known_tests: such a template parses, and fails with SB_ERR_UNSUPPORTED
 * only when it reaches the missing piece. Global functions and methods are
 * in jinja_methods.c. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "template/jinja.h"

/* ---- arguments ----------------------------------------------------------------------- */

jv sb_rt_jarg(const jargs *a, size_t pos, const char *kw, jv dflt)
{
    if (pos < a->n)
        return a->v[pos];
    for (size_t k = 0; kw && k < a->n_kw; k++)
        if (!strcmp(a->kw[k], kw))
            return a->kv[k];
    return dflt;
}

bool sb_rt_jarg_has(const jargs *a, size_t pos, const char *kw)
{
    if (pos < a->n)
        return true;
    for (size_t k = 0; kw && k < a->n_kw; k++)
        if (!strcmp(a->kw[k], kw))
            return true;
    return false;
}

/* refuse more than max_pos positional arguments or keywords not in names
 * (NULL-terminated); "what" names the callee in the message */
void sb_rt_jb_check_args(jctx *c, const jargs *a, const char *what, size_t max_pos,
                         const char *const *names)
{
    if (a->n > max_pos)
        sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: %s() takes at most %zu argument%s (%zu given)",
                    what, max_pos, max_pos == 1 ? "" : "s", a->n);
    for (size_t k = 0; k < a->n_kw; k++) {
        size_t j = 0;
        while (names && names[j] && strcmp(names[j], a->kw[k]))
            j++;
        if (!names || !names[j])
            sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: %s() got an unexpected keyword argument '%s'",
                        what, a->kw[k]);
        for (size_t p = 0; p < a->n && p < max_pos; p++)
            if (p == j)
                sb_rt_jfail(c, SB_ERR_INVAL,
                            "TypeError: %s() got multiple values for argument '%s'", what,
                            a->kw[k]);
    }
}

#define ARGS(...) ((const char *const[]){ __VA_ARGS__, NULL })

jstr *sb_rt_jb_want_str(jctx *c, jv v, const char *what)
{
    if (v.kind != JV_STR)
        sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: %s must be str, not %s", what,
                    sb_rt_jv_type_name(v));
    return v.s;
}

int64_t sb_rt_jb_want_int(jctx *c, jv v, const char *what)
{
    if (v.kind == JV_INT)
        return v.i;
    if (v.kind == JV_BOOL)
        return v.b;
    sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: %s must be an integer, not %s", what,
                sb_rt_jv_type_name(v));
}

static jv mkstr(jctx *c, const char *s)
{
    return jv_str(sb_rt_js_lit(c, s));
}

jstr *sb_rt_jb_markup(jctx *c, jstr *s, bool markup)
{
    if (s->markup == markup)
        return s;
    jstr *r = sb_rt_ja_alloc(&c->arena, sizeof *r);
    *r = *s;
    r->markup = markup;
    return r;
}

/* soft_str: a str stays itself (Markup too); anything else is str(x) */
static jstr *soft_str(jctx *c, jv v)
{
    return sb_rt_jv_to_str(c, v);
}

/* ---- attribute paths (make_attrgetter) ----------------------------------------------- */

/* make_attrgetter: item[part] for each dot-separated part (digits: an
 * index); dflt (when not NULL) replaces an undefined after each part */
static jv get_path(jctx *c, jv item, const jstr *attr, const jv *dflt)
{
    size_t a = 0;
    for (;;) {
        size_t z = a;
        while (z < attr->len && attr->s[z] != '.')
            z++;
        jstr *part = sb_rt_js_sub(c, attr, a, z - a);
        bool digits = part->len > 0;
        int64_t n = 0;
        for (size_t i = 0; i < part->len && digits; i++) {
            digits = part->s[i] >= '0' && part->s[i] <= '9';
            if (digits && n < INT64_MAX / 10)
                n = n * 10 + (part->s[i] - '0');
        }
        item = sb_rt_jv_getitem(c, item, digits ? jv_int(n) : jv_str(part));
        if (dflt && item.kind == JV_UNDEF)
            item = *dflt;
        if (z == attr->len)
            return item;
        a = z + 1;
    }
}

static jv attr_arg(jctx *c, jv v)
{
    if (v.kind == JV_INT)
        return v;
    return jv_str(sb_rt_jb_want_str(c, v, "attribute"));
}

static jv get_attr_or_index(jctx *c, jv item, jv attr)
{
    if (attr.kind == JV_INT)
        return sb_rt_jv_getitem(c, item, attr);
    return get_path(c, item, attr.s, NULL);
}

/* ignore_case: lower() of strings */
static jv fold(jctx *c, jv v, bool case_sensitive)
{
    if (!case_sensitive && v.kind == JV_STR)
        return jv_str(sb_rt_js_case(c, v.s, 'l'));
    return v;
}

/* stable merge sort of idx[0, n) by keys (sb_rt_jv_cmp), reversed when rev (stable too) */
static void sort_idx(jctx *c, size_t *idx, size_t n, const jv *keys, bool rev)
{
    if (n < 2)
        return;
    size_t *tmp = sb_rt_ja_alloc(&c->arena, n * sizeof *tmp);
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                int r = sb_rt_jv_cmp(c, keys[idx[j]], keys[idx[i]]);
                bool take_right = rev ? r > 0 : r < 0;
                tmp[k++] = take_right ? idx[j++] : idx[i++];
            }
            while (i < mid)
                tmp[k++] = idx[i++];
            while (j < hi)
                tmp[k++] = idx[j++];
        }
        jcopy(idx, tmp, n * sizeof *idx);
    }
}

/* a lazy generator over x: produce runs when it is first pulled */
static jv lazy(jctx *c, jv x, const jargs *a, int mode,
               bool (*produce)(jctx *c, jiter *it, jv *out))
{
    jv v = sb_rt_jv_iter_new(c, NULL, "generator");
    v.it->produce = produce;
    v.it->src = x;
    jargs *keep = sb_rt_ja_alloc(&c->arena, sizeof *keep); /* a is the caller's, on its stack */
    *keep = *a;
    v.it->args = keep;
    v.it->mode = mode;
    return v;
}


/* ---- filters ------------------------------------------------------------------------- */

static jv f_abs(jctx *c, jv x, const jargs *a)
{
    sb_rt_jb_check_args(c, a, "abs", 0, NULL);
    if (x.kind == JV_FLOAT)
        return jv_float(fabs(x.f));
    if (x.kind == JV_INT || x.kind == JV_BOOL) {
        int64_t v = sb_rt_jb_want_int(c, x, "abs");
        if (v == INT64_MIN)
            sb_rt_jfail(c, SB_ERR_UNSUPPORTED, "integer arithmetic over 64 bits");
        return jv_int(v < 0 ? -v : v);
    }
    sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: bad operand type for abs(): '%s'",
                sb_rt_jv_type_name(x));
}

static jv f_attr(jctx *c, jv x, const jargs *a)
{
    sb_rt_jb_check_args(c, a, "attr", 1, ARGS("name"));
    jstr *name = sb_rt_jb_want_str(c, sb_rt_jarg(a, 0, "name", jv_none()), "attr name");
    const char *nm = sb_rt_ja_dup(&c->arena, name->s, name->len);
    if (x.kind == JV_UNDEF)
        sb_rt_jfail(c, SB_ERR_INVAL, "UndefinedError: %s", x.undef ? x.undef : "undefined value");
    jv m;
    if (x.kind == JV_NS && sb_rt_jd_get(c, x.d, jv_str(name), &m))
        return m;
    if (x.kind == JV_LOOP)
        return sb_rt_jv_getattr(c, x, nm);
    if (sb_rt_jb_method(c, x, nm, &m))
        return m;
    char *msg = sb_rt_ja_alloc(&c->arena, name->len + 64);
    sprintf(msg, "'%s object' has no attribute '%s'", sb_rt_jv_type_name(x), nm);
    return jv_undef(msg);
}

/* lower, upper, capitalize: str(x) converted */
static jv case_filter(jctx *c, jv x, const jargs *a, const char *name, char how)
{
    sb_rt_jb_check_args(c, a, name, 0, NULL);
    return jv_str(sb_rt_js_case(c, soft_str(c, x), how));
}

static jv f_capitalize(jctx *c, jv x, const jargs *a)
{
    return case_filter(c, x, a, "capitalize", 'c');
}

static jv f_length(jctx *c, jv x, const jargs *a)
{
    sb_rt_jb_check_args(c, a, "length", 0, NULL);
    return jv_int(sb_rt_jv_len(c, x));
}

static jv f_default(jctx *c, jv x, const jargs *a)
{
    sb_rt_jb_check_args(c, a, "default", 2, ARGS("default_value", "boolean"));
    jv d = sb_rt_jarg(a, 0, "default_value", mkstr(c, ""));
    bool boolean = sb_rt_jv_truth(sb_rt_jarg(a, 1, "boolean", jv_bool(false)));
    if (x.kind == JV_UNDEF || (boolean && !sb_rt_jv_truth(x)))
        return d;
    return x;
}

static jv f_dictsort(jctx *c, jv x, const jargs *a)
{
    sb_rt_jb_check_args(c, a, "dictsort", 3, ARGS("case_sensitive", "by", "reverse"));
    bool cs = sb_rt_jv_truth(sb_rt_jarg(a, 0, "case_sensitive", jv_bool(false)));
    jv by = sb_rt_jarg(a, 1, "by", mkstr(c, "key"));
    bool rev = sb_rt_jv_truth(sb_rt_jarg(a, 2, "reverse", jv_bool(false)));
    int pos;
    if (by.kind == JV_STR && sb_rt_js_eq(by.s, sb_rt_js_lit(c, "key")))
        pos = 0;
    else if (by.kind == JV_STR && sb_rt_js_eq(by.s, sb_rt_js_lit(c, "value")))
        pos = 1;
    else
        sb_rt_jfail(c, SB_ERR_INVAL,
                    "FilterArgumentError: You can only sort by either \"key\" or "
                    "\"value\"");
    if (x.kind != JV_DICT)
        sb_rt_jfail(c, SB_ERR_INVAL, "AttributeError: '%s' object has no attribute 'items'",
                    sb_rt_jv_type_name(x));
    size_t n = x.d->n;
    size_t *idx = sb_rt_ja_alloc(&c->arena, (n + 1) * sizeof *idx);
    jv *keys = sb_rt_ja_alloc(&c->arena, (n + 1) * sizeof *keys);
    for (size_t i = 0; i < n; i++) {
        idx[i] = i;
        keys[i] = fold(c, pos ? x.d->v[i] : x.d->k[i], cs);
    }
    sort_idx(c, idx, n, keys, rev);
    jlist *l = sb_rt_jl_new(c, n, false);
    for (size_t i = 0; i < n; i++) {
        jlist *t = sb_rt_jl_new(c, 2, true);
        t->v[0] = x.d->k[idx[i]];
        t->v[1] = x.d->v[idx[i]];
        l->v[i] = jv_list(t);
    }
    return jv_list(l);
}

static jv f_escape(jctx *c, jv x, const jargs *a)
{
    sb_rt_jb_check_args(c, a, "escape", 0, NULL);
    if (x.kind == JV_STR && x.s->markup)
        return x;
    return jv_str(sb_rt_js_escape_html(c, sb_rt_jv_to_str(c, x)));
}

static jv f_first(jctx *c, jv x, const jargs *a)
{
    sb_rt_jb_check_args(c, a, "first", 0, NULL);
    if (x.kind == JV_ITER) {
        jv v;
        if (sb_rt_jit_next(c, x.it, &v))
            return v;
    } else {
        jlist *l = sb_rt_jv_iterate(c, x);
        if (l->n)
            return l->v[0];
    }
    return jv_undef("No first item, sequence was empty.");
}

static jv f_last(jctx *c, jv x, const jargs *a)
{
    sb_rt_jb_check_args(c, a, "last", 0, NULL);
    if (x.kind == JV_ITER)
        sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: '%s' object is not reversible", x.it->type);
    jlist *l = sb_rt_jv_iterate(c, x);
    if (l->n)
        return l->v[l->n - 1];
    return jv_undef("No last item, sequence was empty.");
}

/* Python's float(str): whitespace around, a sign, digits with single
 * underscores between them, or inf / infinity / nan in any case */
static bool parse_float(const jstr *s, double *out)
{
    size_t a = 0, z = s->len;
    while (a < z && sb_rt_uc_isspace((unsigned char)s->s[a]))
        a++;
    while (z > a && sb_rt_uc_isspace((unsigned char)s->s[z - 1]))
        z--;
    char buf[512];
    size_t k = 0;
    if (z - a >= sizeof buf)
        return false;
    for (size_t i = a; i < z; i++) {
        char ch = s->s[i];
        if (ch == '_') {
            if (i == a || i + 1 == z || !(s->s[i - 1] >= '0' && s->s[i - 1] <= '9') ||
                !(s->s[i + 1] >= '0' && s->s[i + 1] <= '9'))
                return false;
            continue;
        }
        if (!strchr("0123456789+-.eEinfatyINFATY", ch) || ch == '\0')
            return false;
        buf[k++] = ch;
    }
    buf[k] = '\0';
    if (!k)
        return false;
    const char *p = buf + (buf[0] == '+' || buf[0] == '-');
    if (!strcasecmp(p, "inf") || !strcasecmp(p, "infinity") || !strcasecmp(p, "nan")) {
        *out = strtod(buf, NULL);
        return true;
    }
    if (strpbrk(p, "iInNaAfFtTyY"))
        return false;
    char *end;
    *out = strtod(buf, &end);
    return *end == '\0' && end != buf && (p[0] != '\0');
}

static jv f_float(jctx *c, jv x, const jargs *a)
{
    sb_rt_jb_check_args(c, a, "float", 1, ARGS("default"));
    jv d = sb_rt_jarg(a, 0, "default", jv_float(0.0));
    double f;
    if (x.kind == JV_UNDEF) /* float(Undefined) raises */
        sb_rt_jfail(c, SB_ERR_INVAL, "UndefinedError: %s", x.undef ? x.undef : "undefined value");
    if (x.kind == JV_FLOAT)
        return x;
    if (x.kind == JV_INT || x.kind == JV_BOOL)
        return jv_float((double)sb_rt_jb_want_int(c, x, "float"));
    if (x.kind == JV_STR && parse_float(x.s, &f))
        return jv_float(f);
    return d;
}

/* Python's int(str, base) for bases 2..36 and 0 */
static bool parse_int(const jstr *s, int base, int64_t *out)
{
    size_t a = 0, z = s->len;
    while (a < z && sb_rt_uc_isspace((unsigned char)s->s[a]))
        a++;
    while (z > a && sb_rt_uc_isspace((unsigned char)s->s[z - 1]))
        z--;
    bool neg = false;
    if (a < z && (s->s[a] == '+' || s->s[a] == '-'))
        neg = s->s[a++] == '-';
    if (z - a >= 2 && s->s[a] == '0') {
        char p = (char)(s->s[a + 1] | 0x20);
        int pb = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
        if (pb && (base == 0 || base == pb)) {
            base = pb;
            a += 2;
            if (a < z && s->s[a] == '_')
                a++;
        }
    }
    if (base == 0) {
        base = 10;
        if (z - a > 1 && s->s[a] == '0') { /* "00" is fine, "01" is not */
            for (size_t i = a; i < z; i++)
                if (s->s[i] != '0' && s->s[i] != '_')
                    return false;
        }
    }
    if (a == z)
        return false;
    uint64_t v = 0;
    for (size_t i = a; i < z; i++) {
        char ch = s->s[i];
        if (ch == '_') {
            if (i == a || i + 1 == z || s->s[i + 1] == '_')
                return false;
            continue;
        }
        int d = ch >= '0' && ch <= '9' ? ch - '0' : (ch | 0x20) >= 'a' && (ch | 0x20) <= 'z'
                ? (ch | 0x20) - 'a' + 10 : 99;
        if (d >= base)
            return false;
        if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base)
            return false;
        v = v * (uint64_t)base + (uint64_t)d;
    }
    if (v > (uint64_t)INT64_MAX + neg)
        return false;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

static jv f_int(jctx *c, jv x, const jargs *a)
{
    sb_rt_jb_check_args(c, a, "int", 2, ARGS("default", "base"));
    jv d = sb_rt_jarg(a, 0, "default", jv_int(0));
    int64_t base = sb_rt_jb_want_int(c, sb_rt_jarg(a, 1, "base", jv_int(10)), "base");
    int64_t v;
    double f;
    switch (x.kind) {
    case JV_UNDEF: /* int(Undefined) raises */
        sb_rt_jfail(c, SB_ERR_INVAL, "UndefinedError: %s", x.undef ? x.undef : "undefined value");
    case JV_INT: return x;
    case JV_BOOL: return jv_int(x.b);
    case JV_FLOAT:
        if (isnan(x.f) || isinf(x.f))
            sb_rt_jfail(c, SB_ERR_INVAL, "%s: cannot convert float %s to integer",
                        isnan(x.f) ? "ValueError" : "OverflowError",
                        isnan(x.f) ? "NaN" : "infinity");
        if (fabs(x.f) >= 9.2e18)
            sb_rt_jfail(c, SB_ERR_UNSUPPORTED, "integer arithmetic over 64 bits");
        return jv_int((int64_t)x.f);
    case JV_STR:
        if ((base == 0 || (base >= 2 && base <= 36)) && parse_int(x.s, (int)base, &v))
            return jv_int(v);
        if (parse_float(x.s, &f)) {
            if (isnan(f) || isinf(f))
                sb_rt_jfail(c, SB_ERR_INVAL, "%s: cannot convert float %s to integer",
                            isnan(f) ? "ValueError" : "OverflowError",
                            isnan(f) ? "NaN" : "infinity");
            if (fabs(f) >= 9.2e18)
                sb_rt_jfail(c, SB_ERR_UNSUPPORTED, "integer arithmetic over 64 bits");
            return jv_int((int64_t)f);
        }
        return d;
    default:
        return d;
    }
}

static jv f_indent(jctx *c, jv x, const jargs *a)
{
    sb_rt_jb_check_args(c, a, "indent", 3, ARGS("width", "first", "blank"));
    jv w = sb_rt_jarg(a, 0, "width", jv_int(4));
    bool first = sb_rt_jv_truth(sb_rt_jarg(a, 1, "first", jv_bool(false)));
    bool blank = sb_rt_jv_truth(sb_rt_jarg(a, 2, "blank", jv_bool(false)));
    if (x.kind != JV_STR) /* indent does s += "\n": only a str can */
        sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: indent needs a string, not %s",
                    sb_rt_jv_type_name(x));
    jstr *s = x.s;
    jstr *ind = w.kind == JV_STR
                    ? w.s
                    : sb_rt_js_repeat(c, sb_rt_js_lit(c, " "), sb_rt_jb_want_int(c, w, "width"));
    jstr *nl = sb_rt_js_lit(c, "\n");
    jlist *lines = sb_rt_js_splitlines(c, sb_rt_js_concat(c, s, nl), false);
    jbuf *b = sb_rt_jbuf_new(c);
    if (first)
        sb_rt_jbuf_put_str(c, b, ind);
    for (size_t i = 0; i < lines->n; i++) {
        jstr *ln = lines->v[i].s;
        if (i) {
            sb_rt_jbuf_put_str(c, b, nl);
            if (blank || ln->len)
                sb_rt_jbuf_put_str(c, b, ind);
        }
        sb_rt_jbuf_put_str(c, b, ln);
    }
    return jv_str(sb_rt_jb_markup(c, sb_rt_jbuf_take(c, b), s->markup));
}

static bool items_produce(jctx *c, jiter *it, jv *out)
{
    if (!it->started) {
        it->started = true;
        if (it->src.kind != JV_UNDEF && it->src.kind != JV_DICT)
            sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: Can only get item pairs from a mapping.");
    }
    if (it->src.kind == JV_UNDEF || it->src_pos >= it->src.d->n)
        return false;
    jlist *t = sb_rt_jl_new(c, 2, true);
    t->v[0] = it->src.d->k[it->src_pos];
    t->v[1] = it->src.d->v[it->src_pos++];
    *out = jv_list(t);
    return true;
}

static jv f_items(jctx *c, jv x, const jargs *a)
{
    sb_rt_jb_check_args(c, a, "items", 0, NULL);
    return lazy(c, x, a, 0, items_produce);
}

static jv f_join(jctx *c, jv x, const jargs *a)
{
    sb_rt_jb_check_args(c, a, "join", 2, ARGS("d", "attribute"));
    jstr *d = soft_str(c, sb_rt_jarg(a, 0, "d", mkstr(c, "")));
    bool has_attr = sb_rt_jarg_has(a, 1, "attribute");
    jv attr = has_attr ? attr_arg(c, sb_rt_jarg(a, 1, "attribute", jv_none())) : jv_none();
    jlist *l = sb_rt_jv_iterate(c, x);
    jbuf *b = sb_rt_jbuf_new(c);
    for (size_t i = 0; i < l->n; i++) {
        if (i)
            sb_rt_jbuf_put_str(c, b, d);
        jv it = has_attr ? get_attr_or_index(c, l->v[i], attr) : l->v[i];
        jstr *s = soft_str(c, it);
        if (d->markup && !s->markup)
            s = sb_rt_js_escape_html(c, s);
        sb_rt_jbuf_put_str(c, b, s);
    }
    return jv_str(sb_rt_jb_markup(c, sb_rt_jbuf_take(c, b), d->markup));
}

static jv f_list(jctx *c, jv x, const jargs *a)
{
    sb_rt_jb_check_args(c, a, "list", 0, NULL);
    jlist *src = sb_rt_jv_iterate(c, x);
    jlist *l = sb_rt_jl_new(c, src->n, false);
    if (src->n)
        jcopy(l->v, src->v, src->n * sizeof *l->v);
    return jv_list(l);
}

static jv f_lower(jctx *c, jv x, const jargs *a)
{
    return case_filter(c, x, a, "lower", 'l');
}

static jv f_upper(jctx *c, jv x, const jargs *a)
{
    return case_filter(c, x, a, "upper", 'u');
}

/* jinja2's title: words begin after -, whitespace, (, {, [, <; first
 * character upper, the rest lower */
static jv f_title(jctx *c, jv x, const jargs *a)
{
    sb_rt_jb_check_args(c, a, "title", 0, NULL);
    jstr *s = soft_str(c, x);
    jbuf *b = sb_rt_jbuf_new(c);
    size_t i = 0, adv;
    while (i < s->len) {
        size_t j = i;
        bool sep = false;
        for (;;) { /* a run of separators, or a run of other characters */
            if (j >= s->len)
                break;
            uint32_t cp = sb_rt_utf8_dec(s->s + j, s->len - j, &adv);
            bool is_sep = cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' ||
                          sb_rt_uc_isspace(cp);
            if (j == i)
                sep = is_sep;
            else if (is_sep != sep)
                break;
            j += adv;
        }
        sb_rt_utf8_dec(s->s + i, s->len - i, &adv);
        sb_rt_jbuf_put_str(c, b, sb_rt_js_case(c, sb_rt_js_sub(c, s, i, adv), 'u'));
        sb_rt_jbuf_put_str(c, b, sb_rt_js_case(c, sb_rt_js_sub(c, s, i + adv, j - i - adv), 'l'));
        i = j;
    }
    return jv_str(sb_rt_jb_markup(c, sb_rt_jbuf_take(c, b), s->markup));
}

static bool call_test(jctx *c, const char *name, jv x, const jargs *a);
static jv call_filter(jctx *c, const char *name, jv x, const jargs *a);

/* the next item of the generator's source, starting it (`if value:`, as
 * jinja2's select and map begin) on the first pull */
static bool src_next(jctx *c, jiter *it, jv *out)
{
    if (!it->started) {
        it->started = true;
        if (!sb_rt_jv_truth(it->src))
            return false;
        it->src_items = sb_rt_jv_iterate(c, it->src);
    }
    if (!it->src_items || it->src_pos >= it->src_items->n)
        return false;
    *out = it->src_items->v[it->src_pos++];
    return true;
}

enum { SEL_WANT = 1, SEL_ATTR = 2 };

/* select / reject / selectattr / rejectattr */
static bool select_produce(jctx *c, jiter *it, jv *out)
{
    const jargs *a = it->args;
    bool want = it->mode & SEL_WANT, by_attr = it->mode & SEL_ATTR;
    jv item;
    while (src_next(c, it, &item)) {
        size_t k = 0;
        jv attr = jv_none();
        if (by_attr) {
            if (a->n < 1)
                sb_rt_jfail(c, SB_ERR_INVAL,
                            "FilterArgumentError: Missing parameter for attribute "
                            "name");
            attr = attr_arg(c, a->v[0]);
            k = 1;
        }
        const char *test = NULL;
        if (a->n > k) {
            jstr *tn = sb_rt_jb_want_str(c, a->v[k], "test name");
            test = sb_rt_ja_dup(&c->arena, tn->s, tn->len);
            k++;
        }
        /* (no positional argument left: v may be NULL, and NULL + 0 is UB) */
        jargs ta = { .n = a->n - k, .v = a->n > k ? a->v + k : NULL, .n_kw = a->n_kw,
                     .kw = a->kw, .kv = a->kv };
        jv x = by_attr ? get_attr_or_index(c, item, attr) : item;
        bool r = test ? call_test(c, test, x, &ta) : sb_rt_jv_truth(x);
        if (r == want) {
            *out = item;
            return true;
        }
    }
    return false;
}

static jv f_select(jctx *c, jv x, const jargs *a) { return lazy(c, x, a, SEL_WANT, select_produce); }
static jv f_reject(jctx *c, jv x, const jargs *a) { return lazy(c, x, a, 0, select_produce); }
static jv f_selectattr(jctx *c, jv x, const jargs *a)
{
    return lazy(c, x, a, SEL_WANT | SEL_ATTR, select_produce);
}
static jv f_rejectattr(jctx *c, jv x, const jargs *a)
{
    return lazy(c, x, a, SEL_ATTR, select_produce);
}

static bool map_produce(jctx *c, jiter *it, jv *out)
{
    const jargs *a = it->args;
    jv item;
    if (!src_next(c, it, &item))
        return false;
    if (a->n == 0 && sb_rt_jarg_has(a, SIZE_MAX, "attribute")) {
        for (size_t k = 0; k < a->n_kw; k++)
            if (strcmp(a->kw[k], "attribute") && strcmp(a->kw[k], "default"))
                sb_rt_jfail(c, SB_ERR_INVAL,
                            "FilterArgumentError: Unexpected keyword argument '%s'", a->kw[k]);
        jv attr = attr_arg(c, sb_rt_jarg(a, SIZE_MAX, "attribute", jv_none()));
        jv d = sb_rt_jarg(a, SIZE_MAX, "default", jv_none());
        *out = attr.kind == JV_INT ? sb_rt_jv_getitem(c, item, attr)
                                   : get_path(c, item, attr.s, d.kind == JV_NONE ? NULL : &d);
        return true;
    }
    if (a->n == 0)
        sb_rt_jfail(c, SB_ERR_INVAL, "FilterArgumentError: map requires a filter argument");
    jstr *fn = sb_rt_jb_want_str(c, a->v[0], "filter name");
    const char *name = sb_rt_ja_dup(&c->arena, fn->s, fn->len);
    jargs fa = { .n = a->n - 1, .v = a->v + 1, .n_kw = a->n_kw, .kw = a->kw, .kv = a->kv };
    *out = call_filter(c, name, item, &fa);
    return true;
}

static jv f_map(jctx *c, jv x, const jargs *a)
{
    return lazy(c, x, a, 0, map_produce);
}

static jv minmax(jctx *c, jv x, const jargs *a, bool want_max)
{
    sb_rt_jb_check_args(c, a, want_max ? "max" : "min", 2, ARGS("case_sensitive", "attribute"));
    bool cs = sb_rt_jv_truth(sb_rt_jarg(a, 0, "case_sensitive", jv_bool(false)));
    bool has_attr = sb_rt_jarg_has(a, 1, "attribute");
    jv attr = has_attr ? attr_arg(c, sb_rt_jarg(a, 1, "attribute", jv_none())) : jv_none();
    jlist *l = sb_rt_jv_iterate(c, x);
    if (!l->n)
        return jv_undef("No aggregated item, sequence was empty.");
    size_t best = 0;
    jv bk = fold(c, has_attr ? get_attr_or_index(c, l->v[0], attr) : l->v[0], cs);
    for (size_t i = 1; i < l->n; i++) {
        jv k = fold(c, has_attr ? get_attr_or_index(c, l->v[i], attr) : l->v[i], cs);
        int r = sb_rt_jv_cmp(c, k, bk);
        if (want_max ? r > 0 : r < 0) {
            best = i;
            bk = k;
        }
    }
    return l->v[best];
}

static jv f_max(jctx *c, jv x, const jargs *a) { return minmax(c, x, a, true); }
static jv f_min(jctx *c, jv x, const jargs *a) { return minmax(c, x, a, false); }

static jv f_replace(jctx *c, jv x, const jargs *a)
{
    sb_rt_jb_check_args(c, a, "replace", 3, ARGS("old", "new", "count"));
    if (!sb_rt_jarg_has(a, 0, "old") || !sb_rt_jarg_has(a, 1, "new"))
        sb_rt_jfail(c, SB_ERR_INVAL,
                    "TypeError: replace() missing required arguments 'old', 'new'");
    jstr *s = sb_rt_jb_markup(c, sb_rt_jv_to_str(c, x), false);
    jstr *old = sb_rt_jb_markup(c, sb_rt_jv_to_str(c, sb_rt_jarg(a, 0, "old", jv_none())), false);
    jstr *neu = sb_rt_jb_markup(c, sb_rt_jv_to_str(c, sb_rt_jarg(a, 1, "new", jv_none())), false);
    jv cnt = sb_rt_jarg(a, 2, "count", jv_none());
    int64_t n = cnt.kind == JV_NONE ? -1 : sb_rt_jb_want_int(c, cnt, "count");
    return jv_str(sb_rt_jb_markup(c, sb_rt_js_replace(c, s, old, neu, n), false));
}

static jv f_reverse(jctx *c, jv x, const jargs *a)
{
    sb_rt_jb_check_args(c, a, "reverse", 0, NULL);
    if (x.kind == JV_STR)
        return sb_rt_jv_slice(c, x, jv_none(), jv_none(), jv_int(-1));
    jlist *l = sb_rt_jv_iterate(c, x);
    jlist *r = sb_rt_jl_new(c, l->n, false);
    for (size_t i = 0; i < l->n; i++)
        r->v[i] = l->v[l->n - 1 - i];
    if (x.kind == JV_ITER)
        return jv_list(r);
    return sb_rt_jv_iter_new(c, r,
                             x.kind == JV_DICT ? "dict_reversekeyiterator"
                             : x.kind == JV_LIST
                                 ? (x.l->tuple ? "reversed" : "list_reverseiterator")
                                 : "reversed");
}

static jv f_safe(jctx *c, jv x, const jargs *a)
{
    sb_rt_jb_check_args(c, a, "safe", 0, NULL);
    return jv_str(sb_rt_jb_markup(c, sb_rt_jv_to_str(c, x), true));
}

static jv f_sort(jctx *c, jv x, const jargs *a)
{
    sb_rt_jb_check_args(c, a, "sort", 3, ARGS("reverse", "case_sensitive", "attribute"));
    bool rev = sb_rt_jv_truth(sb_rt_jarg(a, 0, "reverse", jv_bool(false)));
    bool cs = sb_rt_jv_truth(sb_rt_jarg(a, 1, "case_sensitive", jv_bool(false)));
    bool has_attr = sb_rt_jarg_has(a, 2, "attribute") &&
                    sb_rt_jarg(a, 2, "attribute", jv_none()).kind != JV_NONE;
    jv attrv = has_attr ? sb_rt_jarg(a, 2, "attribute", jv_none()) : jv_none();
    jlist *l = sb_rt_jv_iterate(c, x);
    size_t n = l->n;
    size_t *idx = sb_rt_ja_alloc(&c->arena, (n + 1) * sizeof *idx);
    jv *keys = sb_rt_ja_alloc(&c->arena, (n + 1) * sizeof *keys);
    for (size_t i = 0; i < n; i++) {
        idx[i] = i;
        jv k = l->v[i];
        if (has_attr) { /* make_multi_attrgetter: a list of keys, one per "," part */
            jlist *t;
            if (attrv.kind == JV_STR) {
                jlist *parts = sb_rt_js_split(c, attrv.s, sb_rt_js_lit(c, ","), -1, false);
                t = sb_rt_jl_new(c, parts->n, false);
                for (size_t p = 0; p < parts->n; p++)
                    t->v[p] = fold(c, get_path(c, k, parts->v[p].s, NULL), cs);
            } else {
                t = sb_rt_jl_new(c, 1, false);
                t->v[0] = fold(c, get_attr_or_index(c, k, attr_arg(c, attrv)), cs);
            }
            keys[i] = jv_list(t);
            continue;
        }
        keys[i] = fold(c, k, cs);
    }
    sort_idx(c, idx, n, keys, rev);
    jlist *r = sb_rt_jl_new(c, n, false);
    for (size_t i = 0; i < n; i++)
        r->v[i] = l->v[idx[i]];
    return jv_list(r);
}

static jv f_string(jctx *c, jv x, const jargs *a)
{
    sb_rt_jb_check_args(c, a, "string", 0, NULL);
    return jv_str(soft_str(c, x));
}

static jv f_sum(jctx *c, jv x, const jargs *a)
{
    sb_rt_jb_check_args(c, a, "sum", 2, ARGS("attribute", "start"));
    bool has_attr = sb_rt_jarg_has(a, 0, "attribute") &&
                    sb_rt_jarg(a, 0, "attribute", jv_none()).kind != JV_NONE;
    jv attr = has_attr ? attr_arg(c, sb_rt_jarg(a, 0, "attribute", jv_none())) : jv_none();
    jv acc = sb_rt_jarg(a, 1, "start", jv_int(0));
    jlist *l = sb_rt_jv_iterate(c, x);
    for (size_t i = 0; i < l->n; i++) {
        jv v = has_attr ? get_attr_or_index(c, l->v[i], attr) : l->v[i];
        if (v.kind == JV_STR || acc.kind == JV_STR)
            sb_rt_jfail(c, SB_ERR_INVAL,
                        "TypeError: unsupported operand type(s) for +: '%s' and '%s'",
                        sb_rt_jv_type_name(acc), sb_rt_jv_type_name(v));
        acc = sb_rt_jv_binop(c, JOP_ADD, acc, v);
    }
    return acc;
}

static jv f_tojson(jctx *c, jv x, const jargs *a)
{
    sb_rt_jb_check_args(c, a, "tojson", 4,
                        ARGS("ensure_ascii", "indent", "separators", "sort_keys"));
    bool ea = sb_rt_jv_truth(sb_rt_jarg(a, 0, "ensure_ascii", jv_bool(false)));
    jv ind = sb_rt_jarg(a, 1, "indent", jv_none());
    jv sep = sb_rt_jarg(a, 2, "separators", jv_none());
    bool sk = sb_rt_jv_truth(sb_rt_jarg(a, 3, "sort_keys", jv_bool(false)));
    const jstr *ind_s = NULL, *isep = NULL, *ksep = NULL;
    int64_t ind_n = -1;
    if (ind.kind == JV_STR) {
        ind_s = ind.s;
    } else if (ind.kind != JV_NONE) {
        ind_n = sb_rt_jb_want_int(c, ind, "indent");
        if (ind_n < 0) {
            ind_s = sb_rt_js_lit(c, "");
            ind_n = -1;
        }
    }
    if (sep.kind != JV_NONE) {
        if (sep.kind != JV_LIST || sep.l->n != 2)
            sb_rt_jfail(c, SB_ERR_INVAL, "ValueError: separators must be an (item, key) pair");
        isep = sb_rt_jb_want_str(c, sep.l->v[0], "separator");
        ksep = sb_rt_jb_want_str(c, sep.l->v[1], "separator");
    }
    jbuf *b = sb_rt_jbuf_new(c);
    sb_rt_jjson_dump(c, b, x, ea, ind_n, ind_s, isep, ksep, sk);
    return jv_str(sb_rt_jbuf_take(c, b));
}

static jv f_trim(jctx *c, jv x, const jargs *a)
{
    sb_rt_jb_check_args(c, a, "trim", 1, ARGS("chars"));
    jv ch = sb_rt_jarg(a, 0, "chars", jv_none());
    return jv_str(sb_rt_js_strip(
        c, soft_str(c, x), ch.kind == JV_NONE ? NULL : sb_rt_jb_want_str(c, ch, "chars"), 'b'));
}

static bool unique_produce(jctx *c, jiter *it, jv *out)
{
    const jargs *a = it->args;
    if (!it->started) {
        sb_rt_jb_check_args(c, a, "unique", 2, ARGS("case_sensitive", "attribute"));
        it->started = true;
        it->src_items = sb_rt_jv_iterate(c, it->src);
        it->seen = sb_rt_ja_alloc(&c->arena, (it->src_items->n + 1) * sizeof *it->seen);
    }
    bool cs = sb_rt_jv_truth(sb_rt_jarg(a, 0, "case_sensitive", jv_bool(false)));
    bool has_attr = sb_rt_jarg_has(a, 1, "attribute") &&
                    sb_rt_jarg(a, 1, "attribute", jv_none()).kind != JV_NONE;
    jv attr = has_attr ? attr_arg(c, sb_rt_jarg(a, 1, "attribute", jv_none())) : jv_none();
    while (it->src_pos < it->src_items->n) {
        jv item = it->src_items->v[it->src_pos++];
        jv k = fold(c, has_attr ? get_attr_or_index(c, item, attr) : item, cs);
        if (k.kind == JV_DICT || (k.kind == JV_LIST && !k.l->tuple))
            sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: unhashable type: '%s'", sb_rt_jv_type_name(k));
        bool dup = false;
        for (size_t j = 0; j < it->n_seen && !dup; j++)
            dup = sb_rt_jv_eq(c, it->seen[j], k);
        if (!dup) {
            it->seen[it->n_seen++] = k;
            *out = item;
            return true;
        }
    }
    return false;
}

static jv f_unique(jctx *c, jv x, const jargs *a)
{
    return lazy(c, x, a, 0, unique_produce);
}

/* ---- filter table -------------------------------------------------------------------- */

typedef struct named_fn {
    const char *name;
    const void *fn;
} named_fn;

static const named_fn filters[] = {
    { "abs", (const void *)f_abs }, { "attr", (const void *)f_attr },
    { "capitalize", (const void *)f_capitalize }, { "count", (const void *)f_length },
    { "d", (const void *)f_default }, { "default", (const void *)f_default },
    { "dictsort", (const void *)f_dictsort }, { "e", (const void *)f_escape },
    { "escape", (const void *)f_escape }, { "first", (const void *)f_first },
    { "float", (const void *)f_float }, { "indent", (const void *)f_indent },
    { "int", (const void *)f_int }, { "items", (const void *)f_items },
    { "join", (const void *)f_join }, { "last", (const void *)f_last },
    { "length", (const void *)f_length }, { "list", (const void *)f_list },
    { "lower", (const void *)f_lower }, { "map", (const void *)f_map },
    { "max", (const void *)f_max }, { "min", (const void *)f_min },
    { "reject", (const void *)f_reject }, { "rejectattr", (const void *)f_rejectattr },
    { "replace", (const void *)f_replace }, { "reverse", (const void *)f_reverse },
    { "safe", (const void *)f_safe }, { "select", (const void *)f_select },
    { "selectattr", (const void *)f_selectattr }, { "sort", (const void *)f_sort },
    { "string", (const void *)f_string }, { "sum", (const void *)f_sum },
    { "title", (const void *)f_title }, { "tojson", (const void *)f_tojson },
    { "trim", (const void *)f_trim }, { "unique", (const void *)f_unique },
    { "upper", (const void *)f_upper },
};

/* jinja2 3.1's other filters: a template using one parses, and fails when it is reached */
static const char *const known_filters[] = {
    "batch", "center", "filesizeformat", "forceescape", "format", "groupby", "pprint",
    "random", "round", "slice", "striptags", "truncate", "urlencode", "urlize", "wordcount",
    "wordwrap", "xmlattr",
};

static const void *find_fn(const named_fn *t, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(t[i].name, name))
            return t[i].fn;
    return NULL;
}

const void *sb_rt_jb_filter(const char *name)
{
    return find_fn(filters, sizeof filters / sizeof filters[0], name);
}

bool sb_rt_jb_filter_known(const char *name)
{
    for (size_t i = 0; i < sizeof known_filters / sizeof known_filters[0]; i++)
        if (!strcmp(known_filters[i], name))
            return true;
    return false;
}

static jv call_filter(jctx *c, const char *name, jv x, const jargs *a)
{
    jfilter_fn f = (jfilter_fn)sb_rt_jb_filter(name);
    if (!f) {
        if (sb_rt_jb_filter_known(name))
            sb_rt_jfail(c, SB_ERR_UNSUPPORTED, "the '%s' filter is not supported", name);
        sb_rt_jfail(c, SB_ERR_INVAL, "TemplateRuntimeError: No filter named '%s' found.", name);
    }
    return f(c, x, a);
}

/* ---- tests --------------------------------------------------------------------------- */

static jv targ(jctx *c, const jargs *a, const char *what)
{
    if (a->n < 1)
        sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: the '%s' test needs an argument", what);
    return a->v[0];
}

static bool t_defined(jctx *c, jv x, const jargs *a) { (void)c; (void)a; return x.kind != JV_UNDEF; }
static bool t_undefined(jctx *c, jv x, const jargs *a) { (void)c; (void)a; return x.kind == JV_UNDEF; }
static bool t_none(jctx *c, jv x, const jargs *a) { (void)c; (void)a; return x.kind == JV_NONE; }
static bool t_boolean(jctx *c, jv x, const jargs *a) { (void)c; (void)a; return x.kind == JV_BOOL; }
static bool t_false(jctx *c, jv x, const jargs *a) { (void)c; (void)a; return x.kind == JV_BOOL && !x.b; }
static bool t_true(jctx *c, jv x, const jargs *a) { (void)c; (void)a; return x.kind == JV_BOOL && x.b; }
static bool t_integer(jctx *c, jv x, const jargs *a) { (void)c; (void)a; return x.kind == JV_INT; }
static bool t_float(jctx *c, jv x, const jargs *a) { (void)c; (void)a; return x.kind == JV_FLOAT; }
static bool t_string(jctx *c, jv x, const jargs *a) { (void)c; (void)a; return x.kind == JV_STR; }
static bool t_mapping(jctx *c, jv x, const jargs *a) { (void)c; (void)a; return x.kind == JV_DICT; }
static bool t_escaped(jctx *c, jv x, const jargs *a) { (void)c; (void)a; return x.kind == JV_STR && x.s->markup; }
static bool t_callable(jctx *c, jv x, const jargs *a)
{
    (void)c;
    (void)a;
    return x.kind == JV_CALL || x.kind == JV_LOOP || x.kind == JV_UNDEF; /* Undefined.__call__ */
}

static bool t_number(jctx *c, jv x, const jargs *a)
{
    (void)c;
    (void)a;
    return x.kind == JV_INT || x.kind == JV_FLOAT || x.kind == JV_BOOL;
}

static bool t_iterable(jctx *c, jv x, const jargs *a)
{
    (void)c;
    (void)a;
    return x.kind == JV_UNDEF || x.kind == JV_STR || x.kind == JV_LIST || x.kind == JV_DICT ||
           x.kind == JV_ITER || x.kind == JV_LOOP;
}

static bool t_sequence(jctx *c, jv x, const jargs *a)
{
    (void)c;
    (void)a;
    return x.kind == JV_UNDEF || x.kind == JV_STR || x.kind == JV_LIST || x.kind == JV_DICT;
}

static bool t_odd(jctx *c, jv x, const jargs *a)
{
    (void)a;
    return sb_rt_jv_eq(c, sb_rt_jv_binop(c, JOP_MOD, x, jv_int(2)), jv_int(1));
}

static bool t_even(jctx *c, jv x, const jargs *a)
{
    (void)a;
    return sb_rt_jv_eq(c, sb_rt_jv_binop(c, JOP_MOD, x, jv_int(2)), jv_int(0));
}

static bool t_divisibleby(jctx *c, jv x, const jargs *a)
{
    return sb_rt_jv_eq(c, sb_rt_jv_binop(c, JOP_MOD, x, targ(c, a, "divisibleby")), jv_int(0));
}

static bool t_lower(jctx *c, jv x, const jargs *a)
{
    (void)a;
    return sb_rt_js_islower(sb_rt_jv_to_str(c, x));
}

static bool t_upper(jctx *c, jv x, const jargs *a)
{
    (void)a;
    return sb_rt_js_isupper(sb_rt_jv_to_str(c, x));
}

static bool t_in(jctx *c, jv x, const jargs *a)
{
    return sb_rt_jv_contains(c, targ(c, a, "in"), x);
}
static bool t_eq(jctx *c, jv x, const jargs *a)
{
    return sb_rt_jv_eq(c, x, targ(c, a, "eq"));
}
static bool t_ne(jctx *c, jv x, const jargs *a)
{
    return !sb_rt_jv_eq(c, x, targ(c, a, "ne"));
}
static bool t_lt(jctx *c, jv x, const jargs *a)
{
    return sb_rt_jv_cmp(c, x, targ(c, a, "lt")) < 0;
}
static bool t_le(jctx *c, jv x, const jargs *a)
{
    return sb_rt_jv_cmp(c, x, targ(c, a, "le")) <= 0;
}
static bool t_gt(jctx *c, jv x, const jargs *a)
{
    return sb_rt_jv_cmp(c, x, targ(c, a, "gt")) > 0;
}
static bool t_ge(jctx *c, jv x, const jargs *a)
{
    return sb_rt_jv_cmp(c, x, targ(c, a, "ge")) >= 0;
}

static bool t_sameas(jctx *c, jv x, const jargs *a)
{
    jv y = targ(c, a, "sameas");
    if (x.kind != y.kind)
        return false;
    switch (x.kind) {
    case JV_NONE:
    case JV_UNDEF: return true;
    case JV_BOOL: return x.b == y.b;
    case JV_INT: return x.i == y.i && x.i >= -5 && x.i <= 256; /* CPython's small ints */
    case JV_STR: return x.s == y.s;
    case JV_LIST: return x.l == y.l;
    case JV_DICT:
    case JV_NS: return x.d == y.d;
    case JV_ITER: return x.it == y.it;
    case JV_CALL: return x.c == y.c;
    case JV_LOOP: return x.loop == y.loop;
    default: return false;
    }
}

static const named_fn tests[] = {
    { "boolean", (const void *)t_boolean }, { "callable", (const void *)t_callable },
    { "defined", (const void *)t_defined }, { "divisibleby", (const void *)t_divisibleby },
    { "eq", (const void *)t_eq }, { "equalto", (const void *)t_eq }, { "==", (const void *)t_eq },
    { "escaped", (const void *)t_escaped }, { "even", (const void *)t_even },
    { "false", (const void *)t_false }, { "float", (const void *)t_float },
    { "ge", (const void *)t_ge }, { ">=", (const void *)t_ge },
    { "gt", (const void *)t_gt }, { ">", (const void *)t_gt }, { "greaterthan", (const void *)t_gt },
    { "in", (const void *)t_in }, { "integer", (const void *)t_integer },
    { "iterable", (const void *)t_iterable }, { "le", (const void *)t_le },
    { "<=", (const void *)t_le }, { "lower", (const void *)t_lower },
    { "lt", (const void *)t_lt }, { "<", (const void *)t_lt }, { "lessthan", (const void *)t_lt },
    { "mapping", (const void *)t_mapping }, { "ne", (const void *)t_ne },
    { "!=", (const void *)t_ne }, { "none", (const void *)t_none },
    { "number", (const void *)t_number }, { "odd", (const void *)t_odd },
    { "sameas", (const void *)t_sameas }, { "sequence", (const void *)t_sequence },
    { "string", (const void *)t_string }, { "true", (const void *)t_true },
    { "undefined", (const void *)t_undefined }, { "upper", (const void *)t_upper },
};

static const char *const known_tests[] = { "filter", "test" };

const void *sb_rt_jb_test(const char *name)
{
    return find_fn(tests, sizeof tests / sizeof tests[0], name);
}

bool sb_rt_jb_test_known(const char *name)
{
    for (size_t i = 0; i < sizeof known_tests / sizeof known_tests[0]; i++)
        if (!strcmp(known_tests[i], name))
            return true;
    return false;
}

/* tests that take an argument (the others take none) */
static const char *const tests_1[] = { "divisibleby", "eq", "equalto", "==", "ge", ">=", "gt",
                                       ">", "greaterthan", "in", "le", "<=", "lt", "<",
                                       "lessthan", "ne", "!=", "sameas" };

void sb_rt_jb_test_arity(jctx *c, const char *name, const jargs *a)
{
    size_t want = 0;
    for (size_t i = 0; i < sizeof tests_1 / sizeof tests_1[0]; i++)
        if (!strcmp(tests_1[i], name))
            want = 1;
    if (a->n_kw)
        sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: the '%s' test takes no keyword arguments", name);
    if (a->n != want)
        sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: the '%s' test takes %zu argument%s (%zu given)",
                    name, want, want == 1 ? "" : "s", a->n);
}

static bool call_test(jctx *c, const char *name, jv x, const jargs *a)
{
    jtest_fn t = (jtest_fn)sb_rt_jb_test(name);
    if (!t) {
        if (sb_rt_jb_test_known(name))
            sb_rt_jfail(c, SB_ERR_UNSUPPORTED, "the '%s' test is not supported", name);
        sb_rt_jfail(c, SB_ERR_INVAL, "TemplateRuntimeError: No test named '%s' found.", name);
    }
    sb_rt_jb_test_arity(c, name, a);
    return t(c, x, a);
}

