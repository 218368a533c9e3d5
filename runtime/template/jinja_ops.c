/* jinja_ops.c -- what values do, with Python's (and jinja2's) answers:
 * truth, ==, ordering, `in`, arithmetic (bool is an int; / is true
 * division; // and % floor; 64-bit ints fail on overflow rather than grow),
 * str() and repr() as {{ }} prints them, len(), iteration (one-shot
 * iterators are consumed), attribute and item lookup as jinja2's sandbox
 * does it (obj.x tries the attribute, then the item; obj[x] the item, then
 * the attribute), slicing by code point.
 *
 * Markup (|safe, |escape): jinja2 with autoescape off still has
 * markupsafe.Markup values. `Markup + str` escapes the str (so does
 * `str + Markup`); `~` and {{ }} ignore it. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "template/jinja.h"

/* ---- containers ---------------------------------------------------------------------- */

jlist *sb_rt_jl_new(jctx *c, size_t n, bool tuple)
{
    sb_rt_jstep(c, n); /* before the work, not after */
    jlist *l = sb_rt_ja_alloc(&c->arena, sizeof *l);
    l->n = n;
    l->v = n ? sb_rt_ja_alloc(&c->arena, n * sizeof *l->v) : NULL;
    l->tuple = tuple;
    return l;
}

jdict *sb_rt_jd_new(jctx *c, size_t cap)
{
    jdict *d = sb_rt_ja_alloc(&c->arena, sizeof *d);
    d->cap = cap ? cap : 4;
    d->k = sb_rt_ja_alloc(&c->arena, d->cap * sizeof *d->k);
    d->v = sb_rt_ja_alloc(&c->arena, d->cap * sizeof *d->v);
    return d;
}

/* dict keys compare as Python's hash/eq would for the key types templates
 * use: strings, numbers (1 == 1.0 == True), None */
static bool key_eq(jctx *c, jv a, jv b)
{
    if (a.kind == JV_STR && b.kind == JV_STR)
        return sb_rt_js_eq(a.s, b.s);
    if (a.kind == JV_STR || b.kind == JV_STR)
        return false;
    return sb_rt_jv_eq(c, a, b);
}

static ptrdiff_t jd_find(jctx *c, const jdict *d, jv k)
{
    sb_rt_jstep(c, d->n / 8 + 1 + (k.kind == JV_STR ? k.s->len / 64 : 0));
    for (size_t i = 0; i < d->n; i++)
        if (key_eq(c, d->k[i], k))
            return (ptrdiff_t)i;
    return -1;
}

void sb_rt_jv_check_hashable(jctx *c, jv k)
{
    if (k.kind == JV_LIST && !k.l->tuple)
        sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: unhashable type: 'list'");
    if (k.kind == JV_DICT)
        sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: unhashable type: 'dict'");
}

void sb_rt_jd_set(jctx *c, jdict *d, jv k, jv v)
{
    sb_rt_jv_check_hashable(c, k);
    ptrdiff_t at = jd_find(c, d, k);
    if (at >= 0) {
        d->v[at] = v;
        return;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap;
        d->k = sb_rt_ja_grow(&c->arena, d->k, d->n, &cap, 4, sizeof *d->k);
        d->v = sb_rt_ja_grow(&c->arena, d->v, d->n, &d->cap, 4, sizeof *d->v);
    }
    d->k[d->n] = k;
    d->v[d->n] = v;
    d->n++;
}

bool sb_rt_jd_get(jctx *c, const jdict *d, jv k, jv *out)
{
    if ((k.kind == JV_LIST && !k.l->tuple) || k.kind == JV_DICT)
        return false;
    ptrdiff_t at = jd_find(c, d, k);
    if (at < 0)
        return false;
    *out = d->v[at];
    return true;
}

bool sb_rt_jit_next(jctx *c, jiter *it, jv *out)
{
    sb_rt_jstep(c, 1);
    if (it->done)
        return false;
    if (it->produce) {
        if (it->produce(c, it, out))
            return true;
        it->done = true;
        return false;
    }
    if (it->pos < it->items->n) {
        *out = it->items->v[it->pos++];
        return true;
    }
    return false;
}

jv sb_rt_jv_iter_new(jctx *c, jlist *items, const char *type)
{
    jiter *it = sb_rt_ja_alloc(&c->arena, sizeof *it);
    it->items = items;
    it->type = type;
    jv v = { .kind = JV_ITER };
    v.it = it;
    return v;
}

/* ---- names and truth ----------------------------------------------------------------- */

const char *sb_rt_jv_type_name(jv v)
{
    switch (v.kind) {
    case JV_UNDEF: return "Undefined";
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STR: return v.s->markup ? "Markup" : "str";
    case JV_LIST: return v.l->tuple ? "tuple" : v.l->wrap ? v.l->wrap : "list";
    case JV_DICT: return "dict";
    case JV_NS: return "Namespace";
    case JV_ITER: return v.it->type;
    case JV_CALL: return "function";
    case JV_LOOP: return "LoopContext";
    default: return "object";
    }
}

_Noreturn static void undefined_used(jctx *c, jv v)
{
    sb_rt_jfail(c, SB_ERR_INVAL, "UndefinedError: %s", v.undef ? v.undef : "undefined value");
}

bool sb_rt_jv_truth(jv v)
{
    switch (v.kind) {
    case JV_UNDEF:
    case JV_NONE: return false;
    case JV_BOOL: return v.b;
    case JV_INT: return v.i != 0;
    case JV_FLOAT: return v.f != 0;
    case JV_STR: return v.s->len != 0;
    case JV_LIST: return v.l->n != 0;
    case JV_DICT: return v.d->n != 0;
    default: return true;
    }
}

static bool is_num(jv v)
{
    return v.kind == JV_BOOL || v.kind == JV_INT || v.kind == JV_FLOAT;
}

static int64_t as_int(jv v)
{
    return v.kind == JV_BOOL ? (int64_t)v.b : v.i;
}

static double as_f(jv v)
{
    return v.kind == JV_FLOAT ? v.f : (double)as_int(v);
}

/* ---- equality, order, membership ----------------------------------------------------- */

static bool eq_depth(jctx *c, jv a, jv b, uint32_t depth)
{
    if (depth > c->lim->max_depth)
        sb_rt_jfail(c, SB_ERR_RANGE, "values nest deeper than %u (max_depth)", c->lim->max_depth);
    sb_rt_jstep(c, 1);
    if (is_num(a) && is_num(b)) {
        if (a.kind == JV_FLOAT || b.kind == JV_FLOAT)
            return as_f(a) == as_f(b);
        return as_int(a) == as_int(b);
    }
    if (a.kind != b.kind)
        return false;
    switch (a.kind) {
    case JV_UNDEF:
    case JV_NONE: return true;
    case JV_STR:
        sb_rt_jstep(c, a.s->len / 64);
        return sb_rt_js_eq(a.s, b.s);
    case JV_LIST:
        if (a.l->tuple != b.l->tuple || a.l->n != b.l->n)
            return false;
        for (size_t i = 0; i < a.l->n; i++)
            if (!eq_depth(c, a.l->v[i], b.l->v[i], depth + 1))
                return false;
        return true;
    case JV_DICT:
        if (a.d->n != b.d->n)
            return false;
        for (size_t i = 0; i < a.d->n; i++) {
            jv x;
            if (!sb_rt_jd_get(c, b.d, a.d->k[i], &x) || !eq_depth(c, a.d->v[i], x, depth + 1))
                return false;
        }
        return true;
    case JV_NS: return a.d == b.d;
    case JV_ITER: return a.it == b.it;
    case JV_CALL: return a.c == b.c;
    case JV_LOOP: return a.loop == b.loop;
    default: return false;
    }
}

bool sb_rt_jv_eq(jctx *c, jv a, jv b)
{
    return eq_depth(c, a, b, 0);
}

_Noreturn static void unordered(jctx *c, const char *op, jv a, jv b)
{
    if (a.kind == JV_UNDEF)
        undefined_used(c, a);
    if (b.kind == JV_UNDEF)
        undefined_used(c, b);
    sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: '%s' not supported between instances of '%s' and '%s'",
                op, sb_rt_jv_type_name(a), sb_rt_jv_type_name(b));
}

static int cmp_depth(jctx *c, jv a, jv b, uint32_t depth)
{
    if (depth > c->lim->max_depth)
        sb_rt_jfail(c, SB_ERR_RANGE, "values nest deeper than %u (max_depth)", c->lim->max_depth);
    sb_rt_jstep(c, 1);
    if (is_num(a) && is_num(b)) {
        if (a.kind == JV_FLOAT || b.kind == JV_FLOAT) {
            double x = as_f(a), y = as_f(b);
            return x < y ? -1 : x > y ? 1 : 0;
        }
        int64_t x = as_int(a), y = as_int(b);
        return x < y ? -1 : x > y;
    }
    if (a.kind == JV_STR && b.kind == JV_STR) {
        sb_rt_jstep(c, a.s->len / 64);
        return sb_rt_js_cmp(a.s, b.s);
    }
    if (a.kind == JV_LIST && b.kind == JV_LIST && a.l->tuple == b.l->tuple) {
        size_t n = a.l->n < b.l->n ? a.l->n : b.l->n;
        for (size_t i = 0; i < n; i++) {
            if (eq_depth(c, a.l->v[i], b.l->v[i], depth + 1))
                continue;
            return cmp_depth(c, a.l->v[i], b.l->v[i], depth + 1);
        }
        return a.l->n < b.l->n ? -1 : a.l->n > b.l->n;
    }
    unordered(c, "<", a, b);
}

int sb_rt_jv_cmp(jctx *c, jv a, jv b)
{
    return cmp_depth(c, a, b, 0);
}

bool sb_rt_jv_contains(jctx *c, jv y, jv x)
{
    switch (y.kind) {
    case JV_STR:
        if (x.kind != JV_STR)
            sb_rt_jfail(c, SB_ERR_INVAL,
                        "TypeError: 'in <string>' requires string as left operand, "
                        "not %s",
                        sb_rt_jv_type_name(x));
        return sb_rt_js_find(c, y.s, x.s, 0) >= 0;
    case JV_LIST:
        for (size_t i = 0; i < y.l->n; i++)
            if (sb_rt_jv_eq(c, y.l->v[i], x))
                return true;
        return false;
    case JV_DICT: {
        jv dummy;
        sb_rt_jv_check_hashable(c, x);
        return sb_rt_jd_get(c, y.d, x, &dummy);
    }
    case JV_ITER: {
        jv v;
        while (sb_rt_jit_next(c, y.it, &v))
            if (sb_rt_jv_eq(c, v, x))
                return true;
        return false;
    }
    case JV_UNDEF:
        return false;
    default:
        sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: argument of type '%s' is not iterable",
                    sb_rt_jv_type_name(y));
    }
}

/* ---- arithmetic ---------------------------------------------------------------------- */

static const char *op_sym(int op)
{
    static const char *const s[] = { "+", "-", "*", "/", "//", "%", "**" };
    return op >= 0 && op <= JOP_POW ? s[op] : "?";
}

_Noreturn static void bad_operands(jctx *c, int op, jv a, jv b)
{
    if (a.kind == JV_UNDEF)
        undefined_used(c, a);
    if (b.kind == JV_UNDEF)
        undefined_used(c, b);
    if (op == JOP_ADD && a.kind == JV_STR)
        sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: can only concatenate str (not \"%s\") to str",
                    sb_rt_jv_type_name(b));
    if (op == JOP_ADD && a.kind == JV_LIST && !a.l->tuple)
        sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: can only concatenate list (not \"%s\") to list",
                    sb_rt_jv_type_name(b));
    sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: unsupported operand type(s) for %s: '%s' and '%s'",
                op_sym(op), sb_rt_jv_type_name(a), sb_rt_jv_type_name(b));
}

_Noreturn static void overflow(jctx *c)
{
    sb_rt_jfail(c, SB_ERR_UNSUPPORTED, "integer arithmetic over 64 bits");
}

static int64_t floordiv_i(jctx *c, int64_t a, int64_t b)
{
    if (b == 0)
        sb_rt_jfail(c, SB_ERR_INVAL, "ZeroDivisionError: integer division or modulo by zero");
    if (a == INT64_MIN && b == -1)
        overflow(c);
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0)))
        q--;
    return q;
}

static int64_t mod_i(jctx *c, int64_t a, int64_t b)
{
    if (b == 0)
        sb_rt_jfail(c, SB_ERR_INVAL, "ZeroDivisionError: integer division or modulo by zero");
    if (b == -1)
        return 0;
    int64_t r = a % b;
    if (r != 0 && ((r < 0) != (b < 0)))
        r += b;
    return r;
}

static double mod_f(jctx *c, double a, double b)
{
    if (b == 0)
        sb_rt_jfail(c, SB_ERR_INVAL, "ZeroDivisionError: float modulo");
    double r = fmod(a, b);
    if (r != 0) {
        if ((b < 0) != (r < 0))
            r += b;
    } else {
        r = copysign(0.0, b);
    }
    return r;
}

static jv seq_repeat(jctx *c, jv seq, int64_t n)
{
    if (seq.kind == JV_STR) {
        jstr *r = sb_rt_js_repeat(c, seq.s, n);
        r->markup = seq.s->markup;
        return jv_str(r);
    }
    size_t len = seq.l->n;
    if (n <= 0 || len == 0)
        return jv_list(sb_rt_jl_new(c, 0, seq.l->tuple));
    if ((uint64_t)n > c->lim->max_memory_bytes / (len * sizeof(jv)))
        sb_rt_jfail(c, SB_ERR_RANGE, "memory over the limit of %zu bytes (max_memory_bytes)",
                    c->lim->max_memory_bytes);
    jlist *l = sb_rt_jl_new(c, len * (size_t)n, seq.l->tuple);
    for (int64_t i = 0; i < n; i++)
        jcopy(l->v + (size_t)i * len, seq.l->v, len * sizeof *l->v);
    return jv_list(l);
}

static jv list_concat(jctx *c, jlist *a, jlist *b)
{
    jlist *l = sb_rt_jl_new(c, a->n + b->n, a->tuple);
    if (a->n)
        jcopy(l->v, a->v, a->n * sizeof *l->v);
    if (b->n)
        jcopy(l->v + a->n, b->v, b->n * sizeof *l->v);
    return jv_list(l);
}

jv sb_rt_jv_binop(jctx *c, int op, jv a, jv b)
{
    if (is_num(a) && is_num(b)) {
        bool fl = a.kind == JV_FLOAT || b.kind == JV_FLOAT;
        if (fl || op == JOP_DIV) {
            double x = as_f(a), y = as_f(b), r;
            switch (op) {
            case JOP_ADD: r = x + y; break;
            case JOP_SUB: r = x - y; break;
            case JOP_MUL: r = x * y; break;
            case JOP_DIV:
                if (y == 0)
                    sb_rt_jfail(c, SB_ERR_INVAL, "ZeroDivisionError: division by zero");
                r = x / y;
                break;
            case JOP_FLOORDIV:
                if (y == 0)
                    sb_rt_jfail(c, SB_ERR_INVAL, "ZeroDivisionError: float floor division by zero");
                { /* CPython's float_floor_div */
                    double m = fmod(x, y), d = (x - m) / y;
                    if (m != 0 && (y < 0) != (m < 0))
                        d -= 1.0;
                    if (d != 0) {
                        r = floor(d);
                        if (d - r > 0.5)
                            r += 1.0;
                    } else {
                        r = copysign(0.0, x / y);
                    }
                }
                break;
            case JOP_MOD: r = mod_f(c, x, y); break;
            default: /* pow */
                if (x == 0 && y < 0)
                    sb_rt_jfail(c, SB_ERR_INVAL,
                                "ZeroDivisionError: 0.0 cannot be raised to a "
                                "negative power");
                if (x < 0 && y != floor(y))
                    sb_rt_jfail(c, SB_ERR_UNSUPPORTED,
                                "a negative number to a fractional power "
                                "(complex result)");
                r = pow(x, y);
                break;
            }
            if (isinf(r) && !isinf(x) && !isinf(y) && (op == JOP_POW || op == JOP_MUL))
                sb_rt_jfail(c, SB_ERR_INVAL, "OverflowError: numerical result out of range");
            return jv_float(r);
        }
        int64_t x = as_int(a), y = as_int(b), r;
        switch (op) {
        case JOP_ADD:
            if (__builtin_add_overflow(x, y, &r))
                overflow(c);
            return jv_int(r);
        case JOP_SUB:
            if (__builtin_sub_overflow(x, y, &r))
                overflow(c);
            return jv_int(r);
        case JOP_MUL:
            if (__builtin_mul_overflow(x, y, &r))
                overflow(c);
            return jv_int(r);
        case JOP_FLOORDIV: return jv_int(floordiv_i(c, x, y));
        case JOP_MOD: return jv_int(mod_i(c, x, y));
        default: /* pow */
            if (y < 0) {
                if (x == 0)
                    sb_rt_jfail(c, SB_ERR_INVAL,
                                "ZeroDivisionError: 0.0 cannot be raised to a "
                                "negative power");
                return jv_float(pow((double)x, (double)y));
            }
            r = 1;
            for (int64_t base = x, e = y; e; e >>= 1) {
                if ((e & 1) && __builtin_mul_overflow(r, base, &r))
                    overflow(c);
                if (e > 1 && __builtin_mul_overflow(base, base, &base))
                    overflow(c);
            }
            return jv_int(r);
        }
    }
    if (op == JOP_ADD) {
        if (a.kind == JV_STR && b.kind == JV_STR) {
            const jstr *x = a.s, *y = b.s;
            bool m = x->markup || y->markup;
            if (m && !x->markup)
                x = sb_rt_js_escape_html(c, x);
            if (m && !y->markup)
                y = sb_rt_js_escape_html(c, y);
            jstr *r = sb_rt_js_concat(c, x, y);
            if (m && r->markup != m) {
                jstr *cp = sb_rt_ja_alloc(&c->arena, sizeof *cp);
                *cp = *r;
                cp->markup = m;
                r = cp;
            }
            return jv_str(r);
        }
        if (a.kind == JV_LIST && b.kind == JV_LIST && a.l->tuple == b.l->tuple && !a.l->wrap &&
            !b.l->wrap)
            return list_concat(c, a.l, b.l);
    }
    if (op == JOP_MUL) {
        bool as = a.kind == JV_STR || (a.kind == JV_LIST && !a.l->wrap);
        bool bs = b.kind == JV_STR || (b.kind == JV_LIST && !b.l->wrap);
        if (as && (b.kind == JV_INT || b.kind == JV_BOOL))
            return seq_repeat(c, a, as_int(b));
        if (bs && (a.kind == JV_INT || a.kind == JV_BOOL))
            return seq_repeat(c, b, as_int(a));
    }
    if (op == JOP_MOD && a.kind == JV_STR)
        sb_rt_jfail(c, SB_ERR_UNSUPPORTED, "printf-style formatting (str %% x) is not supported");
    bad_operands(c, op, a, b);
}

jv sb_rt_jv_neg(jctx *c, jv a, bool neg)
{
    if (a.kind == JV_FLOAT)
        return jv_float(neg ? -a.f : a.f);
    if (a.kind == JV_INT || a.kind == JV_BOOL) {
        int64_t x = as_int(a);
        if (neg && x == INT64_MIN)
            overflow(c);
        return jv_int(neg ? -x : x);
    }
    if (a.kind == JV_UNDEF)
        undefined_used(c, a);
    sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: bad operand type for unary %c: '%s'", neg ? '-' : '+',
                sb_rt_jv_type_name(a));
}

/* ---- str and repr -------------------------------------------------------------------- */

void sb_rt_jv_format_float(double f, char *out, size_t cap)
{
    if (isnan(f)) {
        snprintf(out, cap, "nan");
        return;
    }
    if (isinf(f)) {
        snprintf(out, cap, f < 0 ? "-inf" : "inf");
        return;
    }
    /* the shortest digits that read back as f (Python's repr) */
    char buf[64];
    int prec = 1;
    for (; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*e", prec - 1, f);
        if (strtod(buf, NULL) == f)
            break;
    }
    /* buf: [-]d.ddde[+-]XX; take the digits and the exponent */
    char digits[32];
    size_t nd = 0;
    const char *q = buf;
    bool neg = *q == '-';
    if (neg)
        q++;
    for (; *q && *q != 'e'; q++)
        if (*q != '.')
            digits[nd++] = *q;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = '\0';
    int e10 = atoi(q + 1); /* value = 0.d1d2... * 10^(e10+1) */
    char *o = out;
    size_t left = cap;
#define PUT(...) do { int w_ = snprintf(o, left, __VA_ARGS__); if (w_ < 0 || (size_t)w_ >= left) return; o += w_; left -= (size_t)w_; } while (0)
    if (neg)
        PUT("-");
    if (e10 >= -4 && e10 < 16) {
        if (e10 < 0) {
            PUT("0.");
            for (int i = 0; i < -e10 - 1; i++)
                PUT("0");
            PUT("%s", digits);
        } else if ((int)nd <= e10 + 1) {
            PUT("%s", digits);
            for (int i = (int)nd; i < e10 + 1; i++)
                PUT("0");
            PUT(".0");
        } else {
            PUT("%.*s.%s", e10 + 1, digits, digits + e10 + 1);
        }
    } else {
        PUT("%c", digits[0]);
        if (nd > 1)
            PUT(".%s", digits + 1);
        PUT("e%c%02d", e10 < 0 ? '-' : '+', e10 < 0 ? -e10 : e10);
    }
#undef PUT
}

static void put_lit(jctx *c, jbuf *b, const char *s)
{
    sb_rt_jbuf_put(c, b, s, strlen(s), false);
}

static void repr_depth(jctx *c, jbuf *b, jv v, bool top_str, uint32_t depth);

static void list_repr(jctx *c, jbuf *b, const jlist *l, uint32_t depth)
{
    put_lit(c, b, l->tuple ? "(" : "[");
    for (size_t i = 0; i < l->n; i++) {
        if (i)
            put_lit(c, b, ", ");
        repr_depth(c, b, l->v[i], false, depth + 1);
    }
    if (l->tuple && l->n == 1)
        put_lit(c, b, ",");
    put_lit(c, b, l->tuple ? ")" : "]");
}

static void dict_repr(jctx *c, jbuf *b, const jdict *d, uint32_t depth)
{
    put_lit(c, b, "{");
    for (size_t i = 0; i < d->n; i++) {
        if (i)
            put_lit(c, b, ", ");
        repr_depth(c, b, d->k[i], false, depth + 1);
        put_lit(c, b, ": ");
        repr_depth(c, b, d->v[i], false, depth + 1);
    }
    put_lit(c, b, "}");
}

/* str(v) when top_str, else repr(v) */
static void repr_depth(jctx *c, jbuf *b, jv v, bool top_str, uint32_t depth)
{
    if (depth > c->lim->max_depth)
        sb_rt_jfail(c, SB_ERR_RANGE, "values nest deeper than %u (max_depth)", c->lim->max_depth);
    sb_rt_jstep(c, 1);
    char num[64];
    switch (v.kind) {
    case JV_UNDEF:
        if (!top_str)
            put_lit(c, b, "Undefined");
        return;
    case JV_NONE: put_lit(c, b, "None"); return;
    case JV_BOOL: put_lit(c, b, v.b ? "True" : "False"); return;
    case JV_INT:
        sb_rt_jbuf_put_int(c, b, v.i);
        return;
    case JV_FLOAT:
        sb_rt_jbuf_put_float(c, b, v.f);
        return;
    case JV_STR:
        if (top_str)
            sb_rt_jbuf_put_str(c, b, v.s);
        else if (v.s->markup) {
            put_lit(c, b, "Markup(");
            sb_rt_js_repr(c, b, v.s);
            put_lit(c, b, ")");
        } else
            sb_rt_js_repr(c, b, v.s);
        return;
    case JV_LIST:
        if (v.l->wrap && !strcmp(v.l->wrap, "range")) {
            if (v.l->range[2] == 1)
                snprintf(num, sizeof num, "range(%" PRId64 ", %" PRId64 ")", v.l->range[0],
                         v.l->range[1]);
            else
                snprintf(num, sizeof num, "range(%" PRId64 ", %" PRId64 ", %" PRId64 ")",
                         v.l->range[0], v.l->range[1], v.l->range[2]);
            put_lit(c, b, num);
            return;
        }
        if (v.l->wrap) {
            put_lit(c, b, v.l->wrap);
            put_lit(c, b, "(");
        }
        list_repr(c, b, v.l, depth);
        if (v.l->wrap)
            put_lit(c, b, ")");
        return;
    case JV_DICT:
        dict_repr(c, b, v.d, depth);
        return;
    case JV_NS:
        put_lit(c, b, "<Namespace ");
        dict_repr(c, b, v.d, depth);
        put_lit(c, b, ">");
        return;
    case JV_LOOP:
        snprintf(num, sizeof num, "<LoopContext %zu/%zu>", v.loop->index0 + 1, v.loop->length);
        put_lit(c, b, num);
        return;
    default:
        sb_rt_jfail(c, SB_ERR_UNSUPPORTED, "printing a %s (Python prints its address)",
                    sb_rt_jv_type_name(v));
    }
}

void sb_rt_jv_str_into(jctx *c, jbuf *b, jv v)
{
    repr_depth(c, b, v, true, 0);
}

void sb_rt_jv_repr_into(jctx *c, jbuf *b, jv v)
{
    repr_depth(c, b, v, false, 0);
}

jstr *sb_rt_jv_to_str(jctx *c, jv v)
{
    if (v.kind == JV_STR)
        return v.s;
    jbuf *b = sb_rt_jbuf_new(c);
    sb_rt_jv_str_into(c, b, v);
    return sb_rt_jbuf_take(c, b);
}

/* ---- len and iteration --------------------------------------------------------------- */

int64_t sb_rt_jv_len(jctx *c, jv v)
{
    switch (v.kind) {
    case JV_UNDEF: return 0;
    case JV_STR:
        sb_rt_jstep(c, v.s->len / 64);
        return (int64_t)sb_rt_js_ncp(v.s);
    case JV_LIST: return (int64_t)v.l->n;
    case JV_DICT: return (int64_t)v.d->n;
    case JV_LOOP: return (int64_t)v.loop->length;
    default:
        sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: object of type '%s' has no len()",
                    sb_rt_jv_type_name(v));
    }
}

jlist *sb_rt_jv_iterate(jctx *c, jv v)
{
    switch (v.kind) {
    case JV_UNDEF:
        return sb_rt_jl_new(c, 0, false);
    case JV_LIST: return v.l;
    case JV_STR: {
        size_t n = sb_rt_js_ncp(v.s);
        jlist *l = sb_rt_jl_new(c, n, false);
        for (size_t i = 0, off = 0, adv; i < n; i++, off += adv) {
            sb_rt_utf8_dec(v.s->s + off, v.s->len - off, &adv);
            jstr *ch = sb_rt_js_sub(c, v.s, off, adv);
            ch->markup = false; /* iterating a Markup gives plain characters */
            l->v[i] = jv_str(ch);
        }
        return l;
    }
    case JV_DICT: {
        jlist *l = sb_rt_jl_new(c, v.d->n, false);
        jcopy(l->v, v.d->k, v.d->n * sizeof *l->v);
        return l;
    }
    case JV_ITER: {
        jv *vals = NULL, x;
        size_t n = 0, cap = 0;
        while (sb_rt_jit_next(c, v.it, &x))
            sb_rt_jv_push(c, &vals, &n, &cap, x);
        jlist *l = sb_rt_jl_new(c, 0, false);
        l->n = n;
        l->v = vals;
        return l;
    }
    default:
        sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: '%s' object is not iterable",
                    sb_rt_jv_type_name(v));
    }
}

/* ---- attributes, items, slices ------------------------------------------------------- */

static jv no_attr(jctx *c, jv obj, const char *name)
{
    char *m = sb_rt_ja_alloc(&c->arena, strlen(name) + 64);
    sprintf(m, "'%s object' has no attribute '%s'", sb_rt_jv_type_name(obj), name);
    return jv_undef(m);
}

static jv loop_attr(jctx *c, jloop *l, const char *name, bool *found);

jv sb_rt_jv_getattr(jctx *c, jv obj, const char *name)
{
    sb_rt_jstep(c, 1);
    if (obj.kind == JV_UNDEF)
        undefined_used(c, obj);
    jv m;
    if (obj.kind == JV_LOOP) {
        bool found;
        jv r = loop_attr(c, obj.loop, name, &found);
        if (found)
            return r;
    }
    if (sb_rt_jb_method(c, obj, name, &m))
        return m;
    if (obj.kind == JV_DICT || obj.kind == JV_NS) {
        jv r;
        if (sb_rt_jd_get(c, obj.d, jv_str(sb_rt_js_lit(c, name)), &r))
            return r;
    }
    return no_attr(c, obj, name);
}

static bool index_of(jctx *c, jv key, size_t n, size_t *at)
{
    int64_t i = as_int(key);
    if (i < 0)
        i += (int64_t)n;
    (void)c;
    if (i < 0 || (uint64_t)i >= n)
        return false;
    *at = (size_t)i;
    return true;
}

jv sb_rt_jv_getitem(jctx *c, jv obj, jv key)
{
    sb_rt_jstep(c, 1);
    if (obj.kind == JV_UNDEF)
        undefined_used(c, obj);
    bool int_key = key.kind == JV_INT || key.kind == JV_BOOL;
    size_t at;
    switch (obj.kind) {
    case JV_DICT:
    case JV_NS: {
        jv r;
        if (obj.kind == JV_DICT && sb_rt_jd_get(c, obj.d, key, &r))
            return r;
        break;
    }
    case JV_LIST:
        if (int_key) {
            if (index_of(c, key, obj.l->n, &at))
                return obj.l->v[at];
            return jv_undef("list index out of range");
        }
        break;
    case JV_STR:
        if (int_key) {
            sb_rt_jstep(c, obj.s->len / 64);
            size_t n = sb_rt_js_ncp(obj.s);
            if (!index_of(c, key, n, &at))
                return jv_undef("string index out of range");
            size_t off = sb_rt_js_cp_off(obj.s, at), adv;
            sb_rt_utf8_dec(obj.s->s + off, obj.s->len - off, &adv);
            return jv_str(sb_rt_js_sub(c, obj.s, off, adv));
        }
        break;
    default:
        break;
    }
    if (key.kind == JV_STR) { /* the attribute of that name */
        jv m;
        const char *name = sb_rt_ja_dup(&c->arena, key.s->s, key.s->len);
        if (obj.kind == JV_LOOP) {
            bool found;
            jv r = loop_attr(c, obj.loop, name, &found);
            if (found)
                return r;
        }
        if (obj.kind == JV_NS) {
            jv r;
            if (sb_rt_jd_get(c, obj.d, key, &r))
                return r;
        }
        if (sb_rt_jb_method(c, obj, name, &m))
            return m;
        return no_attr(c, obj, name);
    }
    return jv_undef("no such item");
}

static int64_t slice_arg(jctx *c, jv v, int64_t dflt)
{
    if (v.kind == JV_NONE || v.kind == JV_UNDEF)
        return dflt;
    if (v.kind != JV_INT && v.kind != JV_BOOL)
        sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: slice indices must be integers or None");
    return as_int(v);
}

/* Python's slice.indices(): the positions taken, in order */
jv sb_rt_jv_slice(jctx *c, jv obj, jv start, jv stop, jv step)
{
    if (obj.kind == JV_UNDEF)
        undefined_used(c, obj);
    /* jinja2 compiles a slice as a plain Python subscript: no undefined for errors */
    if (obj.kind == JV_DICT)
        sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: unhashable type: 'slice'");
    if (obj.kind != JV_STR && obj.kind != JV_LIST)
        sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: '%s' object is not subscriptable",
                    sb_rt_jv_type_name(obj));
    int64_t st = slice_arg(c, step, 1);
    if (st == 0)
        sb_rt_jfail(c, SB_ERR_INVAL, "ValueError: slice step cannot be zero");
    if (st == INT64_MIN)
        st = -INT64_MAX;
    if (obj.kind == JV_STR)
        sb_rt_jstep(c, obj.s->len / 64);
    int64_t n = obj.kind == JV_STR ? (int64_t)sb_rt_js_ncp(obj.s) : (int64_t)obj.l->n;
    int64_t lo = st < 0 ? -1 : 0, hi = st < 0 ? n - 1 : n;
    int64_t a = slice_arg(c, start, st < 0 ? hi : lo), z = slice_arg(c, stop, st < 0 ? lo : hi);
    if (start.kind == JV_INT || start.kind == JV_BOOL) {
        if (a < 0)
            a = a + n < lo ? lo : a + n;
        else if (a > hi)
            a = hi;
    }
    if (stop.kind == JV_INT || stop.kind == JV_BOOL) {
        if (z < 0)
            z = z + n < lo ? lo : z + n;
        else if (z > hi)
            z = hi;
    }
    size_t cnt = 0;
    if (st > 0 && a < z)
        cnt = (size_t)((z - a - 1) / st + 1);
    else if (st < 0 && a > z)
        cnt = (size_t)((a - z - 1) / -st + 1);
    sb_rt_jstep(c, cnt);
    if (obj.kind == JV_LIST) {
        jlist *l = sb_rt_jl_new(c, cnt, obj.l->tuple);
        for (size_t i = 0; i < cnt; i++)
            l->v[i] = obj.l->v[a + (int64_t)i * st];
        return jv_list(l);
    }
    if (st == 1) {
        size_t b0 = sb_rt_js_cp_off(obj.s, (size_t)a),
               b1 = cnt ? sb_rt_js_cp_off(obj.s, (size_t)z) : b0;
        return jv_str(sb_rt_js_sub(c, obj.s, b0, b1 - b0));
    }
    /* code point offsets, then gather */
    size_t *off = sb_rt_ja_alloc(&c->arena, ((size_t)n + 1) * sizeof *off), k = 0;
    for (size_t i = 0; i <= obj.s->len; i++)
        if (i == obj.s->len || ((unsigned char)obj.s->s[i] & 0xC0) != 0x80)
            off[k++] = i;
    jbuf *b = sb_rt_jbuf_new(c);
    for (size_t i = 0; i < cnt; i++) {
        int64_t cp = a + (int64_t)i * st;
        sb_rt_jbuf_put_range(c, b, obj.s, off[cp], off[cp + 1] - off[cp]);
    }
    jstr *r = sb_rt_jbuf_take(c, b);
    r->markup = obj.s->markup;
    return jv_str(r);
}

/* ---- loop ---------------------------------------------------------------------------- */

static jv loop_attr(jctx *c, jloop *l, const char *name, bool *found)
{
    *found = true;
    size_t i = l->index0, n = l->length;
    if (!strcmp(name, "index"))
        return jv_int((int64_t)i + 1);
    if (!strcmp(name, "index0"))
        return jv_int((int64_t)i);
    if (!strcmp(name, "revindex"))
        return jv_int((int64_t)(n - i));
    if (!strcmp(name, "revindex0"))
        return jv_int((int64_t)(n - i - 1));
    if (!strcmp(name, "first"))
        return jv_bool(i == 0);
    if (!strcmp(name, "last"))
        return jv_bool(i + 1 == n);
    if (!strcmp(name, "length"))
        return jv_int((int64_t)n);
    if (!strcmp(name, "depth"))
        return jv_int((int64_t)l->depth0 + 1);
    if (!strcmp(name, "depth0"))
        return jv_int((int64_t)l->depth0);
    if (!strcmp(name, "previtem"))
        return i > 0 ? l->items->v[i - 1] : jv_undef("there is no previous item");
    if (!strcmp(name, "nextitem"))
        return i + 1 < n ? l->items->v[i + 1] : jv_undef("there is no next item");
    *found = false;
    (void)c;
    return jv_none();
}
