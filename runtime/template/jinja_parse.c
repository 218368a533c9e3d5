/* jinja_parse.c -- tokens to the syntax tree (jinja.h: jnode), by jinja2
 * 3.1's grammar. Operator precedence, loosest first:
 *
 *     a if b else c                       (conditional)
 *     or        and        not x
 *     == != < <= > >= in, not in           (chained, as in Python)
 *     + -       ~         * / // %        ** (left to right)
 *     -x +x     then postfix: .name [key] [a:b:c] (args) |filter is test
 *
 * A filter or test binds to the unary expression before it:
 * `'a' + x | trim` is 'a' + (x|trim). Unknown filters and tests are refused
 * here, as jinja2 refuses them when it compiles; ones jinja2 has and this
 * interpreter lacks fail when evaluated (SB_ERR_UNSUPPORTED).
 *
 * Nesting is bounded (max_depth): the parser's recursion, and the depth of
 * every node, so the evaluator's recursion is bounded too. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/jinja_parse.h"

typedef struct jparser {
    jctx *c;
    jarena *a;
    jtok *t;                    /* the token array, ending with JT_EOF */
    size_t i;                   /* the current token */
    uint32_t depth;             /* recursion now */
    uint32_t max_depth;
    int loops;                  /* enclosing for loops (break / continue) */
    jnames names;               /* the name table (the lexer's too) */
} jparser;

/* ---- tokens -------------------------------------------------------------------------- */

static jtok *cur(jparser *p)
{
    return &p->t[p->i];
}

static jtok *peek(jparser *p)
{
    return p->t[p->i].kind == JT_EOF ? &p->t[p->i] : &p->t[p->i + 1];
}

static jtok *adv(jparser *p)
{
    jtok *t = &p->t[p->i];
    if (t->kind != JT_EOF)
        p->i++;
    return t;
}

static bool is_op(const jtok *t, const char *op)
{
    return t->kind == JT_OP && !strcmp(t->s, op);
}

static bool is_name(const jtok *t, const char *name)
{
    return t->kind == JT_NAME && !strcmp(t->s, name);
}

static const char *describe(const jtok *t)
{
    switch (t->kind) {
    case JT_EOF: return "end of template";
    case JT_DATA: return "template data";
    case JT_VAR_BEGIN: return "begin of print statement";
    case JT_VAR_END: return "end of print statement";
    case JT_BLOCK_BEGIN: return "begin of statement block";
    case JT_BLOCK_END: return "end of statement block";
    case JT_STRING: return "string";
    case JT_INT: return "integer";
    case JT_FLOAT: return "float";
    default: return t->s;
    }
}

#define PFAIL(p, code, ...) ((p)->c->line = cur(p)->line, sb_rt_jfail((p)->c, code, __VA_ARGS__))

static void expect_op(jparser *p, const char *op)
{
    if (!is_op(cur(p), op))
        PFAIL(p, SB_ERR_INVAL, "expected token '%s', got '%s'", op, describe(cur(p)));
    adv(p);
}

static void expect_kind(jparser *p, int kind, const char *what)
{
    if (cur(p)->kind != kind)
        PFAIL(p, SB_ERR_INVAL, "expected token '%s', got '%s'", what, describe(cur(p)));
    adv(p);
}

static const char *expect_name(jparser *p)
{
    if (cur(p)->kind != JT_NAME)
        PFAIL(p, SB_ERR_INVAL, "expected token 'name', got '%s'", describe(cur(p)));
    return adv(p)->s;
}

static void enter(jparser *p)
{
    if (++p->depth > p->max_depth)
        PFAIL(p, SB_ERR_RANGE, "the template nests deeper than %u (max_depth)", p->max_depth);
}

static void leave(jparser *p)
{
    p->depth--;
}

/* ---- nodes --------------------------------------------------------------------------- */

static jnode *mk(jparser *p, int kind, uint32_t line, uint32_t n)
{
    jnode *x = sb_rt_ja_alloc(p->a, sizeof *x);
    x->kind = (uint16_t)kind;
    x->line = line;
    x->n = n;
    x->kids = n ? sb_rt_ja_alloc(p->a, n * sizeof *x->kids) : NULL;
    return x;
}

/* set x's depth from its kids; refuse a tree deeper than max_depth */
static jnode *fin(jparser *p, jnode *x)
{
    uint32_t d = 0;
    for (uint32_t k = 0; k < x->n; k++)
        if (x->kids[k] && x->kids[k]->depth > d)
            d = x->kids[k]->depth;
    x->depth = d + 1;
    if (x->depth > p->max_depth)
        PFAIL(p, SB_ERR_RANGE, "an expression nests deeper than %u (max_depth)", p->max_depth);
    return x;
}

/* a growing list of nodes */
typedef struct nvec {
    jnode **v;
    size_t n, cap;
} nvec;

static void nv_push(jparser *p, nvec *v, jnode *x)
{
    if (v->n == v->cap)
        v->v = sb_rt_ja_grow(p->a, v->v, v->n, &v->cap, 8, sizeof *v->v);
    v->v[v->n++] = x;
}

static jnode *from_vec(jparser *p, int kind, uint32_t line, const nvec *v)
{
    jnode *x = mk(p, kind, line, (uint32_t)v->n);
    if (v->n)
        jcopy(x->kids, v->v, v->n * sizeof *x->kids);
    return fin(p, x);
}

static jnode *mk1(jparser *p, int kind, uint32_t line, jnode *a)
{
    jnode *x = mk(p, kind, line, 1);
    x->kids[0] = a;
    return fin(p, x);
}

static jnode *mk2(jparser *p, int kind, uint32_t line, jnode *a, jnode *b)
{
    jnode *x = mk(p, kind, line, 2);
    x->kids[0] = a;
    x->kids[1] = b;
    return fin(p, x);
}

/* ---- expressions --------------------------------------------------------------------- */

static jnode *parse_expression(jparser *p, bool with_condexpr);
static jnode *parse_tuple(jparser *p, bool simplified, bool with_condexpr,
                          const char *const *extra_end, bool explicit_parens);
static jnode *parse_unary(jparser *p, bool with_filter);
static jnode *parse_primary(jparser *p);
static jnode *parse_postfix(jparser *p, jnode *x);
static jnode *parse_filter_expr(jparser *p, jnode *x);
static jnode *parse_filter(jparser *p, jnode *x, bool start_inline);

static jnode *parse_condexpr(jparser *p);

static jnode *parse_or(jparser *p);

static jnode *parse_expression(jparser *p, bool with_condexpr)
{
    return with_condexpr ? parse_condexpr(p) : parse_or(p);
}

static jnode *parse_condexpr(jparser *p)
{
    uint32_t line = cur(p)->line;
    jnode *e1 = parse_or(p);
    while (is_name(cur(p), "if")) {
        adv(p);
        jnode *e2 = parse_or(p);
        jnode *e3 = NULL;
        if (is_name(cur(p), "else")) {
            adv(p);
            enter(p);
            e3 = parse_condexpr(p);
            leave(p);
        }
        jnode *x = mk(p, JN_COND, line, 3);
        x->kids[0] = e1;
        x->kids[1] = e2;
        x->kids[2] = e3;
        e1 = fin(p, x);
        line = cur(p)->line;
    }
    return e1;
}

static jnode *parse_not(jparser *p);

static jnode *parse_and(jparser *p)
{
    uint32_t line = cur(p)->line;
    jnode *l = parse_not(p);
    while (is_name(cur(p), "and")) {
        adv(p);
        l = mk2(p, JN_AND, line, l, parse_not(p));
        line = cur(p)->line;
    }
    return l;
}

static jnode *parse_or(jparser *p)
{
    uint32_t line = cur(p)->line;
    jnode *l = parse_and(p);
    while (is_name(cur(p), "or")) {
        adv(p);
        l = mk2(p, JN_OR, line, l, parse_and(p));
        line = cur(p)->line;
    }
    return l;
}

static jnode *parse_math1(jparser *p);

static jnode *parse_compare(jparser *p)
{
    uint32_t line = cur(p)->line;
    jnode *e = parse_math1(p);
    nvec ops = { 0 };
    for (;;) {
        jtok *t = cur(p);
        int op = -1;
        if (is_op(t, "=="))
            op = JOP_EQ;
        else if (is_op(t, "!="))
            op = JOP_NE;
        else if (is_op(t, "<"))
            op = JOP_LT;
        else if (is_op(t, "<="))
            op = JOP_LE;
        else if (is_op(t, ">"))
            op = JOP_GT;
        else if (is_op(t, ">="))
            op = JOP_GE;
        else if (is_name(t, "in"))
            op = JOP_IN;
        else if (is_name(t, "not") && is_name(peek(p), "in")) {
            adv(p);
            op = JOP_NOTIN;
        }
        if (op < 0)
            break;
        adv(p);
        jnode *o = mk1(p, JN_BIN, t->line, parse_math1(p));
        o->op = (uint16_t)op;
        nv_push(p, &ops, o);
    }
    if (!ops.n)
        return e;
    jnode *x = mk(p, JN_COMPARE, line, (uint32_t)ops.n + 1);
    x->kids[0] = e;
    jcopy(x->kids + 1, ops.v, ops.n * sizeof *x->kids);
    return fin(p, x);
}

static jnode *parse_not(jparser *p)
{
    if (is_name(cur(p), "not")) {
        uint32_t line = adv(p)->line;
        enter(p);
        jnode *x = mk1(p, JN_NOT, line, parse_not(p));
        leave(p);
        return x;
    }
    return parse_compare(p);
}

static jnode *bin(jparser *p, int op, uint32_t line, jnode *a, jnode *b)
{
    jnode *x = mk2(p, JN_BIN, line, a, b);
    x->op = (uint16_t)op;
    return x;
}

static jnode *parse_concat(jparser *p);

static jnode *parse_math1(jparser *p)
{
    uint32_t line = cur(p)->line;
    jnode *l = parse_concat(p);
    while (is_op(cur(p), "+") || is_op(cur(p), "-")) {
        int op = is_op(adv(p), "+") ? JOP_ADD : JOP_SUB;
        l = bin(p, op, line, l, parse_concat(p));
        line = cur(p)->line;
    }
    return l;
}

static jnode *parse_math2(jparser *p);

static jnode *parse_concat(jparser *p)
{
    uint32_t line = cur(p)->line;
    jnode *first = parse_math2(p);
    if (!is_op(cur(p), "~"))
        return first;
    nvec v = { 0 };
    nv_push(p, &v, first);
    while (is_op(cur(p), "~")) {
        adv(p);
        nv_push(p, &v, parse_math2(p));
    }
    return from_vec(p, JN_CONCAT, line, &v);
}

static jnode *parse_pow(jparser *p);

static jnode *parse_math2(jparser *p)
{
    uint32_t line = cur(p)->line;
    jnode *l = parse_pow(p);
    for (;;) {
        int op;
        if (is_op(cur(p), "*"))
            op = JOP_MUL;
        else if (is_op(cur(p), "/"))
            op = JOP_DIV;
        else if (is_op(cur(p), "//"))
            op = JOP_FLOORDIV;
        else if (is_op(cur(p), "%"))
            op = JOP_MOD;
        else
            break;
        adv(p);
        l = bin(p, op, line, l, parse_pow(p));
        line = cur(p)->line;
    }
    return l;
}

static jnode *parse_pow(jparser *p)
{
    uint32_t line = cur(p)->line;
    jnode *l = parse_unary(p, true);
    while (is_op(cur(p), "**")) {
        adv(p);
        l = bin(p, JOP_POW, line, l, parse_unary(p, true));
        line = cur(p)->line;
    }
    return l;
}

static jnode *parse_unary(jparser *p, bool with_filter)
{
    jtok *t = cur(p);
    jnode *x;
    enter(p);
    if (is_op(t, "-") || is_op(t, "+")) {
        adv(p);
        x = mk1(p, is_op(t, "-") ? JN_NEG : JN_POS, t->line, parse_unary(p, false));
    } else {
        x = parse_primary(p);
    }
    x = parse_postfix(p, x);
    if (with_filter)
        x = parse_filter_expr(p, x);
    leave(p);
    return x;
}

static jnode *konst(jparser *p, uint32_t line, jv v)
{
    jnode *x = mk(p, JN_CONST, line, 0);
    x->val = v;
    return fin(p, x);
}

/* [a, b, ...] or {k: v, ...}: items up to close, a trailing comma allowed */
static jnode *parse_seq(jparser *p, const char *open, const char *close, int kind)
{
    uint32_t line = cur(p)->line;
    expect_op(p, open);
    nvec v = { 0 };
    while (!is_op(cur(p), close)) {
        if (v.n)
            expect_op(p, ",");
        if (is_op(cur(p), close))
            break;
        nv_push(p, &v, parse_expression(p, true));
        if (kind == JN_DICT) {
            expect_op(p, ":");
            nv_push(p, &v, parse_expression(p, true));
        }
    }
    expect_op(p, close);
    return from_vec(p, kind, line, &v);
}

static jnode *parse_primary(jparser *p)
{
    jtok *t = cur(p);
    switch (t->kind) {
    case JT_NAME: {
        adv(p);
        if (!strcmp(t->s, "true") || !strcmp(t->s, "True"))
            return konst(p, t->line, jv_bool(true));
        if (!strcmp(t->s, "false") || !strcmp(t->s, "False"))
            return konst(p, t->line, jv_bool(false));
        if (!strcmp(t->s, "none") || !strcmp(t->s, "None"))
            return konst(p, t->line, jv_none());
        jnode *x = mk(p, JN_NAME, t->line, 0);
        x->name = t->s;
        return fin(p, x);
    }
    case JT_STRING: { /* adjacent literals join */
        adv(p);
        size_t len = t->len, k = p->i;
        while (p->t[k].kind == JT_STRING)
            len += p->t[k++].len;
        char *s = sb_rt_ja_alloc(p->a, len + 1);
        jcopy(s, t->s, t->len);
        size_t o = t->len;
        while (cur(p)->kind == JT_STRING) {
            jcopy(s + o, cur(p)->s, cur(p)->len);
            o += cur(p)->len;
            adv(p);
        }
        jstr *js = sb_rt_ja_alloc(p->a, sizeof *js);
        js->s = s;
        js->len = len;
        return konst(p, t->line, jv_str(js));
    }
    case JT_INT:
        adv(p);
        return konst(p, t->line, jv_int(t->i));
    case JT_FLOAT:
        adv(p);
        return konst(p, t->line, jv_float(t->f));
    default:
        break;
    }
    if (is_op(t, "(")) {
        adv(p);
        jnode *x = parse_tuple(p, false, true, NULL, true);
        expect_op(p, ")");
        return x;
    }
    if (is_op(t, "["))
        return parse_seq(p, "[", "]", JN_LIST);
    if (is_op(t, "{"))
        return parse_seq(p, "{", "}", JN_DICT);
    PFAIL(p, SB_ERR_INVAL, "unexpected '%s'", describe(t));
}

static bool is_tuple_end(jparser *p, const char *const *extra_end)
{
    jtok *t = cur(p);
    if (t->kind == JT_VAR_END || t->kind == JT_BLOCK_END || is_op(t, ")"))
        return true;
    for (size_t k = 0; extra_end && extra_end[k]; k++)
        if (is_name(t, extra_end[k]))
            return true;
    return false;
}

static jnode *parse_tuple(jparser *p, bool simplified, bool with_condexpr,
                          const char *const *extra_end, bool explicit_parens)
{
    uint32_t line = cur(p)->line;
    nvec v = { 0 };
    bool is_tuple = false;
    for (;;) {
        if (v.n)
            expect_op(p, ",");
        if (is_tuple_end(p, extra_end))
            break;
        nv_push(p, &v, simplified ? parse_primary(p) : parse_expression(p, with_condexpr));
        if (is_op(cur(p), ","))
            is_tuple = true;
        else
            break;
    }
    if (!is_tuple) {
        if (v.n)
            return v.v[0];
        if (!explicit_parens)
            PFAIL(p, SB_ERR_INVAL, "Expected an expression, got '%s'", describe(cur(p)));
    }
    return from_vec(p, JN_TUPLE, line, &v);
}

/* call arguments: positional, then name=value; appended to v after the
 * positional ones (kwargs become KWARG nodes) */
static void parse_call_args(jparser *p, nvec *v)
{
    expect_op(p, "(");
    bool kw = false, need_comma = false;
    while (!is_op(cur(p), ")")) {
        if (need_comma) {
            expect_op(p, ",");
            if (is_op(cur(p), ")"))
                break;
        }
        if (is_op(cur(p), "*") || is_op(cur(p), "**"))
            PFAIL(p, SB_ERR_UNSUPPORTED, "*args and **kwargs in calls are not supported");
        if (cur(p)->kind == JT_NAME && is_op(peek(p), "=")) {
            jtok *t = adv(p);
            adv(p);
            jnode *x = mk1(p, JN_KWARG, t->line, parse_expression(p, true));
            x->name = t->s;
            nv_push(p, v, x);
            kw = true;
        } else {
            if (kw)
                PFAIL(p, SB_ERR_INVAL, "invalid syntax for function call expression");
            nv_push(p, v, parse_expression(p, true));
        }
        need_comma = true;
    }
    expect_op(p, ")");
}

static jnode *parse_call(jparser *p, jnode *callee)
{
    uint32_t line = cur(p)->line;
    nvec v = { 0 };
    nv_push(p, &v, callee);
    parse_call_args(p, &v);
    return from_vec(p, JN_CALL, line, &v);
}

static jnode *parse_subscribed(jparser *p)
{
    uint32_t line = cur(p)->line;
    jnode *a[3] = { NULL, NULL, NULL };
    if (is_op(cur(p), ":")) {
        adv(p);
    } else {
        jnode *e = parse_expression(p, true);
        if (!is_op(cur(p), ":"))
            return e;
        adv(p);
        a[0] = e;
    }
    if (!is_op(cur(p), ":") && !is_op(cur(p), "]") && !is_op(cur(p), ","))
        a[1] = parse_expression(p, true);
    if (is_op(cur(p), ":")) {
        adv(p);
        if (!is_op(cur(p), "]") && !is_op(cur(p), ","))
            a[2] = parse_expression(p, true);
    }
    jnode *x = mk(p, JN_SLICE, line, 3);
    jcopy(x->kids, a, sizeof a);
    return fin(p, x);
}

static jnode *parse_subscript(jparser *p, jnode *obj)
{
    jtok *t = adv(p);
    if (is_op(t, ".")) {
        jtok *a = adv(p);
        if (a->kind == JT_NAME) {
            jnode *x = mk1(p, JN_GETATTR, t->line, obj);
            x->name = a->s;
            return x;
        }
        if (a->kind != JT_INT)
            PFAIL(p, SB_ERR_INVAL, "expected name or number");
        return mk2(p, JN_GETITEM, t->line, obj, konst(p, a->line, jv_int(a->i)));
    }
    nvec v = { 0 };
    while (!is_op(cur(p), "]")) {
        if (v.n)
            expect_op(p, ",");
        nv_push(p, &v, parse_subscribed(p));
    }
    expect_op(p, "]");
    jnode *key = v.n == 1 ? v.v[0] : from_vec(p, JN_TUPLE, t->line, &v);
    if (!v.n)
        PFAIL(p, SB_ERR_INVAL, "expected subscript expression");
    return mk2(p, JN_GETITEM, t->line, obj, key);
}

static jnode *parse_postfix(jparser *p, jnode *x)
{
    for (;;) {
        if (is_op(cur(p), ".") || is_op(cur(p), "["))
            x = parse_subscript(p, x);
        else if (is_op(cur(p), "("))
            x = parse_call(p, x);
        else
            return x;
    }
}

static const char *dotted_name(jparser *p)
{
    const char *name = expect_name(p);
    if (!is_op(cur(p), "."))
        return name;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", name);
    while (is_op(cur(p), ".")) {
        adv(p);
        size_t l = strlen(buf);
        snprintf(buf + l, sizeof buf - l, ".%s", expect_name(p));
    }
    return sb_rt_jintern(&p->names, buf, strlen(buf));
}

static jnode *parse_filter(jparser *p, jnode *x, bool start_inline)
{
    while (is_op(cur(p), "|") || start_inline) {
        if (!start_inline)
            adv(p);
        uint32_t line = cur(p)->line;
        const char *name = dotted_name(p);
        const void *fn = sb_rt_jb_filter(name);
        nvec v = { 0 };
        nv_push(p, &v, x);
        if (is_op(cur(p), "("))
            parse_call_args(p, &v);
        jnode *f = mk(p, JN_FILTER, line, (uint32_t)v.n);
        jcopy(f->kids, v.v, v.n * sizeof *f->kids);
        f->name = name;
        f->fn = fn;
        f->op = !fn && !sb_rt_jb_filter_known(name); /* unknown: see check_names */
        x = fin(p, f);
        start_inline = false;
    }
    return x;
}

static jnode *parse_test(jparser *p, jnode *x)
{
    uint32_t line = adv(p)->line; /* is */
    bool negated = false;
    if (is_name(cur(p), "not")) {
        adv(p);
        negated = true;
    }
    const char *name = dotted_name(p);
    const void *fn = sb_rt_jb_test(name);
    nvec v = { 0 };
    nv_push(p, &v, x);
    jtok *t = cur(p);
    if (is_op(t, "(")) {
        parse_call_args(p, &v);
    } else if ((t->kind == JT_NAME || t->kind == JT_STRING || t->kind == JT_INT ||
                t->kind == JT_FLOAT || is_op(t, "[") || is_op(t, "{")) &&
               !is_name(t, "else") && !is_name(t, "or") && !is_name(t, "and")) {
        if (is_name(t, "is"))
            PFAIL(p, SB_ERR_INVAL, "You cannot chain multiple tests with is");
        nv_push(p, &v, parse_postfix(p, parse_primary(p)));
    }
    jnode *n = mk(p, JN_TEST, line, (uint32_t)v.n);
    jcopy(n->kids, v.v, v.n * sizeof *n->kids);
    n->name = name;
    n->fn = fn;
    n->op = !fn && !sb_rt_jb_test_known(name); /* unknown: see check_names */
    n = fin(p, n);
    return negated ? mk1(p, JN_NOT, line, n) : n;
}

static jnode *parse_filter_expr(jparser *p, jnode *x)
{
    for (;;) {
        if (is_op(cur(p), "|"))
            x = parse_filter(p, x, false);
        else if (is_name(cur(p), "is"))
            x = parse_test(p, x);
        else if (is_op(cur(p), "("))
            x = parse_call(p, x);
        else
            return x;
    }
}

/* ---- statements ---------------------------------------------------------------------- */

static jnode *subparse(jparser *p, const char *const *end);

static bool assignable(const jnode *x)
{
    if (x->kind == JN_NAME || x->kind == JN_NSREF)
        return true;
    if (x->kind != JN_TUPLE)
        return false;
    for (uint32_t k = 0; k < x->n; k++)
        if (!assignable(x->kids[k]))
            return false;
    return true;
}

static jnode *parse_assign_target(jparser *p, bool with_tuple, bool name_only,
                                  const char *const *extra_end, bool with_namespace)
{
    jnode *x;
    if (with_namespace && is_op(peek(p), ".")) {
        jtok *t = cur(p);
        const char *ns = expect_name(p);
        adv(p);
        x = mk(p, JN_NSREF, t->line, 0);
        x->name = ns;
        x->attr = expect_name(p);
        return fin(p, x);
    }
    if (name_only) {
        jtok *t = cur(p);
        x = mk(p, JN_NAME, t->line, 0);
        x->name = expect_name(p);
        return fin(p, x);
    }
    x = with_tuple ? parse_tuple(p, true, true, extra_end, false) : parse_primary(p);
    if (!assignable(x) || (x->kind == JN_TUPLE && x->n == 0))
        PFAIL(p, SB_ERR_INVAL, "can't assign to this expression");
    return x;
}

/* the body of a block statement up to one of end (names); the current token
 * is then that name, or it is consumed with drop_needle */
static jnode *parse_statements(jparser *p, const char *const *end, bool drop_needle)
{
    if (is_op(cur(p), ":"))
        adv(p);
    expect_kind(p, JT_BLOCK_END, "end of statement block");
    jnode *body = subparse(p, end);
    if (cur(p)->kind == JT_EOF)
        PFAIL(p, SB_ERR_INVAL, "Unexpected end of template. Jinja was looking for the "
              "following tags: '%s'.", end[0]);
    if (drop_needle)
        adv(p);
    return body;
}

static const char *const END_FOR[] = { "endfor", "else", NULL };
static const char *const END_FOR2[] = { "endfor", NULL };
static const char *const END_IF[] = { "elif", "else", "endif", NULL };
static const char *const END_IF2[] = { "endif", NULL };
static const char *const END_SET[] = { "endset", NULL };
static const char *const END_MACRO[] = { "endmacro", NULL };
static const char *const END_CALL[] = { "endcall", NULL };
static const char *const END_FILTER[] = { "endfilter", NULL };
static const char *const END_WITH[] = { "endwith", NULL };
static const char *const END_GEN[] = { "endgeneration", NULL };
static const char *const IN_END[] = { "in", NULL };
static const char *const REC_END[] = { "recursive", NULL };

static jnode *parse_for(jparser *p)
{
    uint32_t line = adv(p)->line;
    jnode *target = parse_assign_target(p, true, false, IN_END, false);
    if (!is_name(cur(p), "in"))
        PFAIL(p, SB_ERR_INVAL, "expected token 'in', got '%s'", describe(cur(p)));
    adv(p);
    jnode *iter = parse_tuple(p, false, false, REC_END, false);
    jnode *test = NULL;
    if (is_name(cur(p), "if")) {
        adv(p);
        test = parse_expression(p, true);
    }
    bool recursive = false;
    if (is_name(cur(p), "recursive")) {
        adv(p);
        recursive = true;
    }
    p->loops++;
    jnode *body = parse_statements(p, END_FOR, false);
    p->loops--;
    jnode *els = NULL;
    if (!strcmp(adv(p)->s, "else"))
        els = parse_statements(p, END_FOR2, true);
    jnode *x = mk(p, JN_FOR, line, 5);
    x->kids[0] = target;
    x->kids[1] = iter;
    x->kids[2] = test;
    x->kids[3] = body;
    x->kids[4] = els;
    x->op = recursive;
    return fin(p, x);
}

static jnode *parse_if(jparser *p)
{
    uint32_t line = adv(p)->line;
    nvec v = { 0 };
    for (;;) {
        nv_push(p, &v, parse_tuple(p, false, false, NULL, false));
        nv_push(p, &v, parse_statements(p, END_IF, false));
        jtok *t = adv(p);
        if (!strcmp(t->s, "elif"))
            continue;
        if (!strcmp(t->s, "else"))
            nv_push(p, &v, parse_statements(p, END_IF2, true));
        break;
    }
    return from_vec(p, JN_IF, line, &v);
}

static jnode *parse_set(jparser *p)
{
    uint32_t line = adv(p)->line;
    jnode *target = parse_assign_target(p, true, false, NULL, true);
    if (is_op(cur(p), "=")) {
        adv(p);
        return mk2(p, JN_SET, line, target, parse_tuple(p, false, true, NULL, false));
    }
    jnode *filter = is_op(cur(p), "|") ? parse_filter(p, NULL, false) : NULL;
    jnode *body = parse_statements(p, END_SET, true);
    jnode *x = mk(p, JN_SETBLOCK, line, 3);
    x->kids[0] = target;
    x->kids[1] = filter;
    x->kids[2] = body;
    return fin(p, x);
}

/* (a, b=1, ...): params TUPLE of NAMEs and defaults LIST */
static void parse_signature(jparser *p, jnode **params, jnode **defaults)
{
    uint32_t line = cur(p)->line;
    nvec a = { 0 }, d = { 0 };
    expect_op(p, "(");
    while (!is_op(cur(p), ")")) {
        if (a.n)
            expect_op(p, ",");
        nv_push(p, &a, parse_assign_target(p, false, true, NULL, false));
        if (is_op(cur(p), "=")) {
            adv(p);
            nv_push(p, &d, parse_expression(p, true));
        } else if (d.n) {
            PFAIL(p, SB_ERR_INVAL, "non-default argument follows default argument");
        }
    }
    expect_op(p, ")");
    *params = from_vec(p, JN_TUPLE, line, &a);
    *defaults = from_vec(p, JN_LIST, line, &d);
}

/* which of varargs, kwargs, caller a macro body reads (jinja2 gives a macro
 * those only when it uses them): bits 1, 2, 4 of its op */
static uint16_t uses_specials(const jparser *p, const jnode *x)
{
    if (!x)
        return 0;
    uint16_t u = 0;
    if (x->kind == JN_NAME) {
        if (!strcmp(x->name, "varargs"))
            u |= 1;
        else if (!strcmp(x->name, "kwargs"))
            u |= 2;
        else if (!strcmp(x->name, "caller"))
            u |= 4;
    }
    if (x->kind == JN_MACRO || x->kind == JN_CALLBLOCK)
        return 0; /* a nested macro's own */
    for (uint32_t k = 0; k < x->n; k++)
        u |= uses_specials(p, x->kids[k]);
    return u;
}

static jnode *parse_macro(jparser *p)
{
    uint32_t line = adv(p)->line;
    const char *name = expect_name(p);
    jnode *params, *defaults;
    parse_signature(p, &params, &defaults);
    int loops = p->loops;
    p->loops = 0;
    jnode *body = parse_statements(p, END_MACRO, true);
    p->loops = loops;
    jnode *x = mk(p, JN_MACRO, line, 3);
    x->kids[0] = params;
    x->kids[1] = defaults;
    x->kids[2] = body;
    x->name = name;
    x->op = uses_specials(p, body);
    return fin(p, x);
}

static jnode *parse_call_block(jparser *p)
{
    uint32_t line = adv(p)->line;
    jnode *params = NULL, *defaults = NULL;
    if (is_op(cur(p), "(")) {
        parse_signature(p, &params, &defaults);
    } else {
        nvec e = { 0 };
        params = from_vec(p, JN_TUPLE, line, &e);
        defaults = from_vec(p, JN_LIST, line, &e);
    }
    jnode *call = parse_expression(p, true);
    if (call->kind != JN_CALL)
        PFAIL(p, SB_ERR_INVAL, "expected call");
    int loops = p->loops;
    p->loops = 0;
    jnode *body = parse_statements(p, END_CALL, true);
    p->loops = loops;
    jnode *x = mk(p, JN_CALLBLOCK, line, 4);
    x->kids[0] = params;
    x->kids[1] = defaults;
    x->kids[2] = call;
    x->kids[3] = body;
    x->op = uses_specials(p, body);
    return fin(p, x);
}

static jnode *parse_with(jparser *p)
{
    uint32_t line = adv(p)->line;
    nvec t = { 0 }, v = { 0 };
    while (cur(p)->kind != JT_BLOCK_END) {
        if (t.n)
            expect_op(p, ",");
        nv_push(p, &t, parse_assign_target(p, true, false, NULL, false));
        expect_op(p, "=");
        nv_push(p, &v, parse_expression(p, true));
    }
    jnode *x = mk(p, JN_WITH, line, 3);
    x->kids[0] = from_vec(p, JN_TUPLE, line, &t);
    x->kids[1] = from_vec(p, JN_LIST, line, &v);
    x->kids[2] = parse_statements(p, END_WITH, true);
    return fin(p, x);
}

static jnode *parse_statement(jparser *p)
{
    jtok *t = cur(p);
    if (t->kind != JT_NAME)
        PFAIL(p, SB_ERR_INVAL, "tag name expected");
    const char *s = t->s;
    jnode *x;
    enter(p);
    if (!strcmp(s, "for")) {
        x = parse_for(p);
    } else if (!strcmp(s, "if")) {
        x = parse_if(p);
    } else if (!strcmp(s, "set")) {
        x = parse_set(p);
    } else if (!strcmp(s, "macro")) {
        x = parse_macro(p);
    } else if (!strcmp(s, "call")) {
        x = parse_call_block(p);
    } else if (!strcmp(s, "filter")) {
        uint32_t line = adv(p)->line;
        jnode *f = parse_filter(p, NULL, true);
        x = mk2(p, JN_FILTERBLOCK, line, f, parse_statements(p, END_FILTER, true));
    } else if (!strcmp(s, "with")) {
        x = parse_with(p);
    } else if (!strcmp(s, "print")) {
        uint32_t line = adv(p)->line;
        nvec v = { 0 };
        while (cur(p)->kind != JT_BLOCK_END) {
            if (v.n)
                expect_op(p, ",");
            nv_push(p, &v, mk1(p, JN_OUTPUT, line, parse_expression(p, true)));
        }
        x = from_vec(p, JN_BODY, line, &v);
    } else if (!strcmp(s, "break") || !strcmp(s, "continue")) {
        if (!p->loops)
            PFAIL(p, SB_ERR_INVAL, "'%s' outside a loop", s);
        x = fin(p, mk(p, s[0] == 'b' ? JN_BREAK : JN_CONTINUE, adv(p)->line, 0));
    } else if (!strcmp(s, "generation")) {
        /* Hugging Face's AssistantTracker tag: marks assistant text, renders as is */
        adv(p);
        x = parse_statements(p, END_GEN, true);
    } else if (!strcmp(s, "block") || !strcmp(s, "extends") || !strcmp(s, "include") ||
               !strcmp(s, "import") || !strcmp(s, "from") || !strcmp(s, "autoescape")) {
        PFAIL(p, SB_ERR_UNSUPPORTED, "the '%s' tag is not supported", s);
    } else {
        PFAIL(p, SB_ERR_INVAL, "Encountered unknown tag '%s'.", s);
    }
    leave(p);
    return x;
}

static bool is_end(const jtok *t, const char *const *end)
{
    for (size_t k = 0; end && end[k]; k++)
        if (is_name(t, end[k]))
            return true;
    return false;
}

static jnode *subparse(jparser *p, const char *const *end)
{
    uint32_t line = cur(p)->line;
    nvec v = { 0 };
    for (;;) {
        jtok *t = cur(p);
        if (t->kind == JT_EOF)
            break;
        if (t->kind == JT_DATA) {
            jstr *s = sb_rt_ja_alloc(p->a, sizeof *s);
            s->s = t->s;
            s->len = t->len;
            jnode *x = mk(p, JN_DATA, t->line, 0);
            x->val = jv_str(s);
            nv_push(p, &v, fin(p, x));
            adv(p);
        } else if (t->kind == JT_VAR_BEGIN) {
            adv(p);
            nv_push(p, &v, mk1(p, JN_OUTPUT, t->line, parse_tuple(p, false, true, NULL, false)));
            expect_kind(p, JT_VAR_END, "end of print statement");
        } else if (t->kind == JT_BLOCK_BEGIN) {
            adv(p);
            if (is_end(cur(p), end))
                return from_vec(p, JN_BODY, line, &v);
            nv_push(p, &v, parse_statement(p));
            expect_kind(p, JT_BLOCK_END, "end of statement block");
        } else {
            PFAIL(p, SB_ERR_INVAL, "unexpected '%s'", describe(t));
        }
    }
    return from_vec(p, JN_BODY, line, &v);
}

/* ---- unknown filters and tests -------------------------------------------------------- */

/* jinja2 refuses an unknown filter or test when it compiles the template,
 * except inside an `if` (its test and branches) or a conditional
 * expression, where the name is looked up only when it is used (a template
 * may test for optional filters). Those frames stop at a for loop's body,
 * test and else, a macro, a call block's body, a filter block, a with body
 * and a block set: they compile in frames of their own. */
static void check_names(jparser *p, const jnode *x, bool soft)
{
    if (!x)
        return;
    if ((x->kind == JN_FILTER || x->kind == JN_TEST) && x->op && !soft) {
        p->c->line = x->line;
        sb_rt_jfail(p->c, SB_ERR_INVAL, "No %s named '%s'.",
                    x->kind == JN_FILTER ? "filter" : "test", x->name);
    }
    switch (x->kind) {
    case JN_IF:
    case JN_COND:
        for (uint32_t k = 0; k < x->n; k++)
            check_names(p, x->kids[k], true);
        return;
    case JN_FOR:
        check_names(p, x->kids[0], false);
        check_names(p, x->kids[1], soft);
        for (uint32_t k = 2; k < x->n; k++)
            check_names(p, x->kids[k], false);
        return;
    case JN_MACRO:
    case JN_FILTERBLOCK:
    case JN_SETBLOCK:
        for (uint32_t k = 0; k < x->n; k++)
            check_names(p, x->kids[k], x->kind == JN_SETBLOCK && k == 0 ? soft : false);
        return;
    case JN_CALLBLOCK:
        for (uint32_t k = 0; k < x->n; k++)
            check_names(p, x->kids[k], k == 2 ? soft : false);
        return;
    case JN_WITH:
        for (uint32_t k = 0; k < x->n; k++)
            check_names(p, x->kids[k], k == 1 ? soft : false);
        return;
    default:
        for (uint32_t k = 0; k < x->n; k++)
            check_names(p, x->kids[k], soft);
    }
}

/* ---- entry --------------------------------------------------------------------------- */

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int sb_rt_jinja_parse(const char *source, size_t len, const sb_rt_chat_limits *lim, jtmpl **out,
                      sb_rt_err *err)
{
    jtmpl *const t = calloc(1, sizeof *t);
    /* on the heap: written between setjmp and longjmp, read after */
    jctx *const cp = calloc(1, sizeof *cp);
    if (!t || !cp) {
        free(t);
        free(cp);
        return sb_rt_fail(err, SB_ERR_NOMEM, "chat template: out of memory");
    }
    t->lim = *lim;
    jctx *c = cp;
    c->err = err;
    c->lim = &t->lim;
    jparser p = { 0 };
    jlexer L = { 0 };
    /* the tree lives in t->arena; c->arena stays empty (no render here) */
    t->arena.ctx = c;
    t->arena.limit = lim->max_memory_bytes;
    if (setjmp(cp->jb)) {
        int code = cp->code;
        sb_rt_ja_free(&t->arena);
        free(t);
        free(cp);
        return code;
    }
    if (len > lim->max_source_bytes)
        sb_rt_jfail(c, SB_ERR_RANGE,
                    "the source is %zu bytes, over the limit of %zu "
                    "(max_source_bytes)",
                    len, lim->max_source_bytes);
    p.c = c;
    p.a = &t->arena;
    p.names.a = &t->arena;
    p.max_depth = lim->max_depth;
    static const char *const pre[] = { "loop", "caller", "varargs", "kwargs", "messages",
                                       "add_generation_prompt", "bos_token", "eos_token" };
    for (size_t k = 0; k < sizeof pre / sizeof pre[0]; k++)
        sb_rt_jintern(&p.names, pre[k], strlen(pre[k]));
    L.c = c;
    L.a = &t->arena;
    L.names = &p.names;
    sb_rt_jlex(&L, source, len);
    p.t = L.toks;
    t->root = subparse(&p, NULL);
    if (cur(&p)->kind != JT_EOF)
        PFAIL(&p, SB_ERR_INVAL, "unexpected '%s'", describe(cur(&p)));
    check_names(&p, t->root, false);
    t->names = sb_rt_ja_alloc(&t->arena, (p.names.n_names + 1) * sizeof *t->names);
    for (size_t k = 0; k < p.names.cap_names; k++)
        if (p.names.names[k])
            t->names[t->n_names++] = p.names.names[k];
    qsort(t->names, t->n_names, sizeof *t->names, cmp_names);
    t->n_loop = sb_rt_jintern(&p.names, "loop", 4);
    t->n_varargs = sb_rt_jintern(&p.names, "varargs", 7);
    t->n_kwargs = sb_rt_jintern(&p.names, "kwargs", 6);
    t->n_caller = sb_rt_jintern(&p.names, "caller", 6);
    t->arena.ctx = NULL;
    free(cp);
    *out = t;
    return SB_OK;
}

void sb_rt_jinja_free(jtmpl *t)
{
    if (!t)
        return;
    sb_rt_ja_free(&t->arena);
    free(t);
}
