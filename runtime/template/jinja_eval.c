/* jinja_eval.c -- the syntax tree to output: statements, expressions,
 * scopes, loops, macros, and the render entry point.
 *
 * Scopes (as jinja2 3.1 behaves, checked against it in the tests):
 *   - the template's top level is one scope, holding messages,
 *     add_generation_prompt, bos_token, eos_token and the extras; a
 *     top-level `set` (inside if blocks too) assigns there;
 *   - every iteration of a for loop gets a fresh scope under the loop's
 *     scope: what it sets is gone after the iteration and is not seen by
 *     the next one (a name read before it is set in the body reads the outer
 *     value), hence namespace() for values that must cross iterations;
 *   - a macro call gets a fresh scope under the scope the macro was defined
 *     in (read live at call time), holding its parameters, varargs, kwargs
 *     and caller;
 *   - `with` opens a scope; `if` does not;
 *   - a for loop's `else` runs unless some iteration's body ran to its end
 *     (a break or continue in every iteration leaves it to run).
 *
 * Bounds: every statement, expression and call counts steps (max_steps);
 * loop iterations count (max_iterations); recursion (statements,
 * expressions, macro calls, recursive loops) stays under 10 x max_depth
 * frames. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/jinja.h"

enum { FLOW_NORMAL, FLOW_BREAK, FLOW_CONTINUE };

/* ---- failures and counters ----------------------------------------------------------- */

void sb_rt_jfail(jctx *c, int code, const char *fmt, ...)
{
    char msg[SB_RT_ERR_MSG];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->code = code;
    if (msg[0] == '\x01') /* raise_exception: the template's words, as they are */
        sb_rt_fail(c->err, code, "%s", msg + 1);
    else if (c->line)
        sb_rt_fail(c->err, code, "chat template line %u: %s", c->line, msg);
    else
        sb_rt_fail(c->err, code, "chat template: %s", msg);
    longjmp(c->jb, 1);
}

void sb_rt_jstep(jctx *c, uint64_t n)
{
    c->steps += n;
    if (c->steps > c->lim->max_steps)
        sb_rt_jfail(c, SB_ERR_RANGE, "evaluation over %" PRIu64 " steps (max_steps)",
                    c->lim->max_steps);
}

static void enter(jctx *c)
{
    if (++c->depth > 10 * c->lim->max_depth)
        sb_rt_jfail(c, SB_ERR_RANGE, "calls and blocks nest deeper than %u (10 x max_depth)",
                    10 * c->lim->max_depth);
}

static void leave(jctx *c)
{
    c->depth--;
}

/* ---- scopes -------------------------------------------------------------------------- */

static jscope *scope_new(jctx *c, jscope *parent)
{
    jscope *s = sb_rt_ja_alloc(&c->arena, sizeof *s);
    s->parent = parent;
    return s;
}

static void scope_set(jctx *c, jscope *s, const char *name, jv v)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->names[i] == name) {
            s->vals[i] = v;
            return;
        }
    if (s->n == s->cap) {
        size_t cap = s->cap;
        s->names = sb_rt_ja_grow(&c->arena, s->names, s->n, &cap, 4, sizeof *s->names);
        s->vals = sb_rt_ja_grow(&c->arena, s->vals, s->n, &s->cap, 4, sizeof *s->vals);
    }
    s->names[s->n] = name;
    s->vals[s->n] = v;
    s->n++;
}

static bool scope_get(const jscope *s, const char *name, jv *out)
{
    for (; s; s = s->parent)
        for (size_t i = s->n; i-- > 0;)
            if (s->names[i] == name) {
                *out = s->vals[i];
                return true;
            }
    return false;
}

static jv lookup(jctx *c, jscope *s, const char *name)
{
    jv v;
    if (scope_get(s, name, &v))
        return v;
    if (sb_rt_jb_global(c, name, &v))
        return v;
    char *m = sb_rt_ja_alloc(&c->arena, strlen(name) + 32);
    sprintf(m, "'%s' is undefined", name);
    return jv_undef(m);
}

/* ---- assignment ---------------------------------------------------------------------- */

static void assign(jctx *c, jscope *s, const jnode *t, jv v)
{
    if (t->kind == JN_NAME) {
        scope_set(c, s, t->name, v);
        return;
    }
    if (t->kind == JN_NSREF) {
        jv ns = lookup(c, s, t->name);
        if (ns.kind != JV_NS)
            sb_rt_jfail(c, SB_ERR_INVAL,
                        "TemplateRuntimeError: cannot assign attribute on "
                        "non-namespace object");
        sb_rt_jd_set(c, ns.d, jv_str(sb_rt_js_lit(c, t->attr)), v);
        return;
    }
    /* a tuple of targets: unpack */
    jlist *l = sb_rt_jv_iterate(c, v);
    if (l->n != t->n)
        sb_rt_jfail(c, SB_ERR_INVAL, "ValueError: %s values to unpack (expected %u, got %zu)",
                    l->n > t->n ? "too many" : "not enough", t->n, l->n);
    for (uint32_t k = 0; k < t->n; k++)
        assign(c, s, t->kids[k], l->v[k]);
}

/* ---- output capture ------------------------------------------------------------------ */

static jbuf *capture_begin(jctx *c)
{
    jbuf *old = c->out;
    c->out = sb_rt_jbuf_new(c);
    return old;
}

static jstr *capture_end(jctx *c, jbuf *old)
{
    jstr *s = sb_rt_jbuf_take(c, c->out);
    c->out = old;
    return s;
}

/* ---- calls --------------------------------------------------------------------------- */

static int exec(jctx *c, jscope *s, const jnode *n);

/* evaluate call arguments: kids[from..] (positional, then KWARG nodes) */
static void eval_args(jctx *c, jscope *s, const jnode *n, uint32_t from, jargs *a)
{
    uint32_t np = 0, nk = 0;
    for (uint32_t k = from; k < n->n; k++)
        n->kids[k]->kind == JN_KWARG ? nk++ : np++;
    a->n = np;
    a->n_kw = nk;
    a->v = np ? sb_rt_ja_alloc(&c->arena, np * sizeof *a->v) : NULL;
    a->kw = nk ? sb_rt_ja_alloc(&c->arena, nk * sizeof *a->kw) : NULL;
    a->kv = nk ? sb_rt_ja_alloc(&c->arena, nk * sizeof *a->kv) : NULL;
    np = nk = 0;
    for (uint32_t k = from; k < n->n; k++) {
        const jnode *x = n->kids[k];
        if (x->kind == JN_KWARG) {
            a->kw[nk] = x->name;
            a->kv[nk++] = sb_rt_jeval(c, s, x->kids[0]);
        } else {
            a->v[np++] = sb_rt_jeval(c, s, x);
        }
    }
}

/* the macro flags parse left in node->op */
#define USES_VARARGS 1u
#define USES_KWARGS 2u
#define USES_CALLER 4u

jv sb_rt_jeval_call_macro(jctx *c, jv fn, const jargs *a)
{
    jcall *k = fn.c;
    const jnode *m = k->macro;
    bool is_block = m->kind == JN_CALLBLOCK;
    const jnode *params = m->kids[0], *defaults = m->kids[1];
    const jnode *body = m->kids[is_block ? 3 : 2];
    const char *name = is_block ? "caller" : m->name;
    enter(c);
    jscope *ms = scope_new(c, k->closure);
    uint32_t np = params->n, nd = defaults->n;
    bool *bound = sb_rt_ja_alloc(&c->arena, (np + 1) * sizeof *bound);
    if (a->n > np && !(m->op & USES_VARARGS))
        sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: macro '%s' takes not more than %u argument(s)",
                    name, np);
    for (uint32_t i = 0; i < np && i < a->n; i++) {
        scope_set(c, ms, params->kids[i]->name, a->v[i]);
        bound[i] = true;
    }
    jdict *kw = sb_rt_jd_new(c, 4);
    for (size_t j = 0; j < a->n_kw; j++) {
        uint32_t i = 0;
        while (i < np && strcmp(params->kids[i]->name, a->kw[j]))
            i++;
        if (i < np) {
            if (bound[i])
                sb_rt_jfail(c, SB_ERR_INVAL,
                            "TypeError: macro '%s' got multiple values for argument "
                            "'%s'",
                            name, a->kw[j]);
            scope_set(c, ms, params->kids[i]->name, a->kv[j]);
            bound[i] = true;
        } else if (!strcmp(a->kw[j], "caller") && k->caller.kind == JV_UNDEF && !is_block) {
            sb_rt_jfail(c, SB_ERR_INVAL,
                        "TypeError: macro '%s' was invoked with two values for the "
                        "special caller argument",
                        name);
        } else if (m->op & USES_KWARGS) {
            sb_rt_jd_set(c, kw, jv_str(sb_rt_js_lit(c, a->kw[j])), a->kv[j]);
        } else {
            sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: macro '%s' takes no keyword argument '%s'",
                        name, a->kw[j]);
        }
    }
    for (uint32_t i = 0; i < np; i++) {
        if (bound[i])
            continue;
        if (i + nd >= np) {
            scope_set(c, ms, params->kids[i]->name,
                      sb_rt_jeval(c, ms, defaults->kids[i + nd - np]));
        } else {
            char *msg = sb_rt_ja_alloc(&c->arena, strlen(params->kids[i]->name) + 48);
            sprintf(msg, "parameter '%s' was not provided", params->kids[i]->name);
            scope_set(c, ms, params->kids[i]->name, jv_undef(msg));
        }
    }
    if (m->op & USES_VARARGS) {
        size_t extra = a->n > np ? a->n - np : 0;
        jlist *va = sb_rt_jl_new(c, extra, true);
        for (size_t i = 0; i < extra; i++)
            va->v[i] = a->v[np + i];
        scope_set(c, ms, c->t->n_varargs, jv_list(va));
    }
    if (m->op & USES_KWARGS)
        scope_set(c, ms, c->t->n_kwargs, jv_dict(kw));
    if (k->caller.kind != JV_UNDEF)
        scope_set(c, ms, c->t->n_caller, k->caller);
    jbuf *old = capture_begin(c);
    exec(c, ms, body);
    jstr *r = capture_end(c, old);
    leave(c);
    return jv_str(r);
}

static jv make_macro(jctx *c, jscope *s, const jnode *m)
{
    jv v = sb_rt_jcall_new(c, JC_MACRO, m->name, jv_none());
    v.c->macro = m;
    v.c->closure = s;
    return v;
}

static int exec_for(jctx *c, jscope *s, const jnode *n, jv iterable, uint32_t depth0);

/* evaluate a CALL node; caller: the caller() a call block passes (or undefined) */
static jv eval_call(jctx *c, jscope *s, const jnode *n, jv caller)
{
    jv fn = sb_rt_jeval(c, s, n->kids[0]);
    jargs a;
    eval_args(c, s, n, 1, &a);
    sb_rt_jstep(c, 1);
    if (fn.kind == JV_LOOP) {
        if (!(fn.loop->node->op & 1))
            sb_rt_jfail(c, SB_ERR_INVAL,
                        "TypeError: Tried to call non recursive loop.  Maybe you "
                        "forgot the 'recursive' modifier.");
        if (a.n != 1 || a.n_kw)
            sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: loop() takes exactly one argument");
        enter(c);
        jbuf *old = capture_begin(c);
        exec_for(c, fn.loop->scope, fn.loop->node, a.v[0], fn.loop->depth0 + 1);
        jstr *r = capture_end(c, old);
        leave(c);
        return jv_str(r);
    }
    if (fn.kind == JV_CALL && fn.c->kind == JC_MACRO) {
        if (caller.kind != JV_UNDEF) {
            jcall *k = sb_rt_ja_alloc(&c->arena, sizeof *k);
            *k = *fn.c;
            k->caller = caller;
            fn.c = k;
        }
        return sb_rt_jeval_call_macro(c, fn, &a);
    }
    if (caller.kind != JV_UNDEF)
        sb_rt_jfail(c, SB_ERR_INVAL, "TypeError: a call block needs a macro to call");
    return sb_rt_jb_call(c, fn, &a);
}

/* ---- expressions --------------------------------------------------------------------- */

/* a filter or test this interpreter lacks (op 0: jinja2 has it) or nobody
 * has (op 1: allowed by jinja2 in an if, fails when used) */
_Noreturn static void missing_fn(jctx *c, const jnode *n)
{
    const char *what = n->kind == JN_FILTER ? "filter" : "test";
    if (n->op)
        sb_rt_jfail(c, SB_ERR_INVAL, "TemplateRuntimeError: No %s named '%s' found.", what,
                    n->name);
    sb_rt_jfail(c, SB_ERR_UNSUPPORTED, "the '%s' %s is not supported", n->name, what);
}

/* a filter node; hole is the input of a chain whose innermost input is NULL
 * (filter blocks and block sets) */
static jv eval_filter(jctx *c, jscope *s, const jnode *n, const jv *hole)
{
    jv x;
    if (n->kids[0])
        x = n->kids[0]->kind == JN_FILTER && hole ? eval_filter(c, s, n->kids[0], hole)
                                                  : sb_rt_jeval(c, s, n->kids[0]);
    else
        x = *hole;
    jargs a;
    eval_args(c, s, n, 1, &a);
    c->line = n->line;
    if (!n->fn)
        missing_fn(c, n);
    return ((jfilter_fn)n->fn)(c, x, &a);
}

static bool compare(jctx *c, int op, jv a, jv b)
{
    switch (op) {
    case JOP_EQ:
        return sb_rt_jv_eq(c, a, b);
    case JOP_NE:
        return !sb_rt_jv_eq(c, a, b);
    case JOP_LT:
        return sb_rt_jv_cmp(c, a, b) < 0;
    case JOP_LE:
        return sb_rt_jv_cmp(c, a, b) <= 0;
    case JOP_GT:
        return sb_rt_jv_cmp(c, a, b) > 0;
    case JOP_GE:
        return sb_rt_jv_cmp(c, a, b) >= 0;
    case JOP_IN:
        return sb_rt_jv_contains(c, b, a);
    default:
        return !sb_rt_jv_contains(c, b, a);
    }
}

static jv eval_slice_or_item(jctx *c, jscope *s, const jnode *n)
{
    jv obj = sb_rt_jeval(c, s, n->kids[0]);
    const jnode *k = n->kids[1];
    if (k->kind == JN_SLICE) {
        jv p[3];
        for (int i = 0; i < 3; i++)
            p[i] = k->kids[i] ? sb_rt_jeval(c, s, k->kids[i]) : jv_none();
        c->line = n->line;
        return sb_rt_jv_slice(c, obj, p[0], p[1], p[2]);
    }
    jv key = sb_rt_jeval(c, s, k);
    c->line = n->line;
    return sb_rt_jv_getitem(c, obj, key);
}

jv sb_rt_jeval(jctx *c, jscope *s, const jnode *n)
{
    sb_rt_jstep(c, 1);
    enter(c);
    jv r;
    switch (n->kind) {
    case JN_CONST:
        r = n->val;
        break;
    case JN_NAME:
        r = lookup(c, s, n->name);
        break;
    case JN_GETATTR: {
        jv obj = sb_rt_jeval(c, s, n->kids[0]);
        c->line = n->line;
        r = sb_rt_jv_getattr(c, obj, n->name);
        break;
    }
    case JN_GETITEM:
        r = eval_slice_or_item(c, s, n);
        break;
    case JN_CALL:
        r = eval_call(c, s, n, jv_undef(NULL));
        break;
    case JN_FILTER:
        r = eval_filter(c, s, n, NULL);
        break;
    case JN_TEST: {
        jv x = sb_rt_jeval(c, s, n->kids[0]);
        jargs a;
        eval_args(c, s, n, 1, &a);
        c->line = n->line;
        if (!n->fn)
            missing_fn(c, n);
        sb_rt_jb_test_arity(c, n->name, &a);
        r = jv_bool(((jtest_fn)n->fn)(c, x, &a));
        break;
    }
    case JN_NOT:
        r = jv_bool(!sb_rt_jv_truth(sb_rt_jeval(c, s, n->kids[0])));
        break;
    case JN_NEG:
    case JN_POS: {
        jv x = sb_rt_jeval(c, s, n->kids[0]);
        c->line = n->line;
        r = sb_rt_jv_neg(c, x, n->kind == JN_NEG);
        break;
    }
    case JN_BIN: {
        jv a = sb_rt_jeval(c, s, n->kids[0]), b = sb_rt_jeval(c, s, n->kids[1]);
        c->line = n->line;
        r = sb_rt_jv_binop(c, n->op, a, b);
        break;
    }
    case JN_CONCAT: { /* str_join: str() of each, Markup or not */
        jbuf *b = sb_rt_jbuf_new(c);
        for (uint32_t k = 0; k < n->n; k++) {
            jv x = sb_rt_jeval(c, s, n->kids[k]);
            c->line = n->line;
            sb_rt_jv_str_into(c, b, x);
        }
        r = jv_str(sb_rt_jbuf_take(c, b));
        break;
    }
    case JN_COMPARE: {
        jv a = sb_rt_jeval(c, s, n->kids[0]);
        bool ok = true;
        for (uint32_t k = 1; k < n->n && ok; k++) {
            jv b = sb_rt_jeval(c, s, n->kids[k]->kids[0]);
            c->line = n->line;
            ok = compare(c, n->kids[k]->op, a, b);
            a = b;
        }
        r = jv_bool(ok);
        break;
    }
    case JN_AND: {
        jv a = sb_rt_jeval(c, s, n->kids[0]);
        r = sb_rt_jv_truth(a) ? sb_rt_jeval(c, s, n->kids[1]) : a;
        break;
    }
    case JN_OR: {
        jv a = sb_rt_jeval(c, s, n->kids[0]);
        r = sb_rt_jv_truth(a) ? a : sb_rt_jeval(c, s, n->kids[1]);
        break;
    }
    case JN_COND:
        if (sb_rt_jv_truth(sb_rt_jeval(c, s, n->kids[1])))
            r = sb_rt_jeval(c, s, n->kids[0]);
        else if (n->kids[2])
            r = sb_rt_jeval(c, s, n->kids[2]);
        else
            r = jv_undef("the inline if-expression evaluated to false and no else section "
                         "was defined.");
        break;
    case JN_LIST:
    case JN_TUPLE: {
        jlist *l = sb_rt_jl_new(c, n->n, n->kind == JN_TUPLE);
        for (uint32_t k = 0; k < n->n; k++)
            l->v[k] = sb_rt_jeval(c, s, n->kids[k]);
        r = jv_list(l);
        break;
    }
    case JN_DICT: {
        jdict *d = sb_rt_jd_new(c, n->n / 2 + 1);
        for (uint32_t k = 0; k + 1 < n->n; k += 2) {
            jv key = sb_rt_jeval(c, s, n->kids[k]);
            jv val = sb_rt_jeval(c, s, n->kids[k + 1]);
            c->line = n->line;
            sb_rt_jd_set(c, d, key, val);
        }
        r = jv_dict(d);
        break;
    }
    case JN_SLICE:
        c->line = n->line;
        sb_rt_jfail(c, SB_ERR_INVAL, "a slice outside a subscript");
    default:
        c->line = n->line;
        sb_rt_jfail(c, SB_ERR_INVAL, "this expression cannot be evaluated here");
    }
    leave(c);
    return r;
}

/* ---- statements ---------------------------------------------------------------------- */

static int exec_for(jctx *c, jscope *s, const jnode *n, jv iterable, uint32_t depth0)
{
    const jnode *target = n->kids[0], *test = n->kids[2], *body = n->kids[3], *els = n->kids[4];
    c->line = n->line;
    jlist *items = sb_rt_jv_iterate(c, iterable);
    if (test) { /* the loop's `if`: filters before loop.length is known */
        jlist *kept = sb_rt_jl_new(c, items->n, false);
        size_t k = 0;
        for (size_t i = 0; i < items->n; i++) {
            jscope *ts = scope_new(c, s);
            assign(c, ts, target, items->v[i]);
            if (sb_rt_jv_truth(sb_rt_jeval(c, ts, test)))
                kept->v[k++] = items->v[i];
        }
        kept->n = k;
        items = kept;
    }
    bool iterated = false; /* jinja2 runs `else` unless a body ran to its end */
    jloop *lp = sb_rt_ja_alloc(&c->arena, sizeof *lp);
    lp->length = items->n;
    lp->items = items;
    lp->depth0 = depth0;
    lp->node = n;
    lp->scope = s;
    for (size_t i = 0; i < items->n; i++) {
        if (++c->iterations > c->lim->max_iterations)
            sb_rt_jfail(c, SB_ERR_RANGE, "loops ran over %" PRIu64 " iterations (max_iterations)",
                        c->lim->max_iterations);
        jscope *is = scope_new(c, s);
        jloop *li = sb_rt_ja_alloc(&c->arena, sizeof *li);
        *li = *lp;
        li->index0 = i;
        jv lv = { .kind = JV_LOOP };
        lv.loop = li;
        scope_set(c, is, c->t->n_loop, lv);
        c->line = n->line;
        assign(c, is, target, items->v[i]);
        int flow = exec(c, is, body);
        if (flow == FLOW_BREAK)
            break;
        iterated |= flow == FLOW_NORMAL;
    }
    if (!iterated && els)
        return exec(c, s, els);
    return FLOW_NORMAL;
}

static int exec(jctx *c, jscope *s, const jnode *n)
{
    sb_rt_jstep(c, 1);
    enter(c);
    int flow = FLOW_NORMAL;
    switch (n->kind) {
    case JN_BODY:
        for (uint32_t k = 0; k < n->n && flow == FLOW_NORMAL; k++)
            flow = exec(c, s, n->kids[k]);
        break;
    case JN_DATA:
        sb_rt_jbuf_put_str(c, c->out, n->val.s);
        break;
    case JN_OUTPUT: {
        jv v = sb_rt_jeval(c, s, n->kids[0]);
        c->line = n->line;
        sb_rt_jv_str_into(c, c->out, v);
        break;
    }
    case JN_IF: {
        uint32_t k = 0;
        for (; k + 1 < n->n; k += 2) {
            c->line = n->kids[k]->line;
            if (sb_rt_jv_truth(sb_rt_jeval(c, s, n->kids[k]))) {
                flow = exec(c, s, n->kids[k + 1]);
                break;
            }
        }
        if (k + 1 >= n->n && n->n % 2) /* the else */
            flow = exec(c, s, n->kids[n->n - 1]);
        break;
    }
    case JN_FOR:
        c->line = n->line;
        flow = exec_for(c, s, n, sb_rt_jeval(c, s, n->kids[1]), 0);
        break;
    case JN_SET: {
        jv v = sb_rt_jeval(c, s, n->kids[1]);
        c->line = n->line;
        assign(c, s, n->kids[0], v);
        break;
    }
    case JN_SETBLOCK: {
        jbuf *old = capture_begin(c);
        exec(c, s, n->kids[2]);
        jv v = jv_str(capture_end(c, old));
        if (n->kids[1])
            v = eval_filter(c, s, n->kids[1], &v);
        c->line = n->line;
        assign(c, s, n->kids[0], v);
        break;
    }
    case JN_MACRO:
        scope_set(c, s, n->name, make_macro(c, s, n));
        break;
    case JN_CALLBLOCK: {
        jv caller = make_macro(c, s, n);
        caller.c->name = "caller";
        c->line = n->line;
        jv r = eval_call(c, s, n->kids[2], caller);
        sb_rt_jv_str_into(c, c->out, r);
        break;
    }
    case JN_FILTERBLOCK: {
        jbuf *old = capture_begin(c);
        exec(c, s, n->kids[1]);
        jv v = jv_str(capture_end(c, old));
        v = eval_filter(c, s, n->kids[0], &v);
        sb_rt_jv_str_into(c, c->out, v);
        break;
    }
    case JN_WITH: {
        jscope *ws = scope_new(c, s);
        const jnode *t = n->kids[0], *v = n->kids[1];
        jv *vals = sb_rt_ja_alloc(&c->arena, (t->n + 1) * sizeof *vals);
        for (uint32_t k = 0; k < t->n; k++) /* values see the outer scope */
            vals[k] = sb_rt_jeval(c, s, v->kids[k]);
        for (uint32_t k = 0; k < t->n; k++)
            assign(c, ws, t->kids[k], vals[k]);
        flow = exec(c, ws, n->kids[2]);
        break;
    }
    case JN_BREAK:
        flow = FLOW_BREAK;
        break;
    case JN_CONTINUE:
        flow = FLOW_CONTINUE;
        break;
    default:
        c->line = n->line;
        sb_rt_jfail(c, SB_ERR_INVAL, "this statement cannot be executed here");
    }
    leave(c);
    return flow;
}

/* ---- render -------------------------------------------------------------------------- */

/* the interned copy of name, or NULL when the template never mentions it */
static const char *find_name(const jtmpl *t, const char *name)
{
    size_t lo = 0, hi = t->n_names;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int r = strcmp(name, t->names[mid]);
        if (!r)
            return t->names[mid];
        if (r < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

jstr *sb_rt_jinja_input_str(jctx *c, const char *s, const char *what, size_t i)
{
    size_t n = strlen(s);
    if (!sb_rt_utf8_valid(s, n))
        sb_rt_jfail(c, SB_ERR_INVAL, "%s of message %zu is not valid UTF-8", what, i);
    jstr *r = sb_rt_ja_alloc(&c->arena, sizeof *r);
    r->s = s; /* borrowed for the render */
    r->len = n;
    r->taint = n ? JT_ALL : NULL;
    return r;
}

static const char *const reserved_vars[] = { "messages", "add_generation_prompt", "bos_token",
                                             "eos_token" };

static void bind_inputs(jctx *c, const jinja_input *in, jscope *g)
{
    const jtmpl *t = c->t;
    jlist *msgs = sb_rt_jl_new(c, in->n_msgs, false);
    jv role_k = jv_str(sb_rt_js_lit(c, "role")), content_k = jv_str(sb_rt_js_lit(c, "content"));
    for (size_t i = 0; i < in->n_msgs; i++) {
        const sb_rt_chat_msg *m = &in->msgs[i];
        jdict *d = sb_rt_jd_new(c, 4);
        sb_rt_jd_set(c, d, role_k, jv_str(sb_rt_jinja_input_str(c, m->role, "the role", i)));
        sb_rt_jd_set(c, d, content_k,
                     m->content ? jv_str(sb_rt_jinja_input_str(c, m->content, "the content", i))
                                : jv_none());
        if (in->msg_json && in->msg_json[i]) {
            char what[64];
            snprintf(what, sizeof what, "the extras of message %zu", i);
            jv x = sb_rt_jjson_parse(c, in->msg_json[i], strlen(in->msg_json[i]), what);
            if (x.kind != JV_DICT)
                sb_rt_jfail(c, SB_ERR_INVAL, "%s: not a JSON object", what);
            for (size_t k = 0; k < x.d->n; k++) {
                if (sb_rt_jv_eq(c, x.d->k[k], role_k))
                    sb_rt_jfail(c, SB_ERR_INVAL, "%s: \"role\" cannot be set there", what);
                sb_rt_jd_set(c, d, x.d->k[k], x.d->v[k]);
            }
        }
        msgs->v[i] = jv_dict(d);
    }
    const char *nm;
    if ((nm = find_name(t, "messages")))
        scope_set(c, g, nm, jv_list(msgs));
    if ((nm = find_name(t, "add_generation_prompt")))
        scope_set(c, g, nm, jv_bool(in->add_generation_prompt));
    if (in->bos && (nm = find_name(t, "bos_token")))
        scope_set(c, g, nm, jv_str(sb_rt_js_new(c, in->bos, strlen(in->bos), false)));
    if (in->eos && (nm = find_name(t, "eos_token")))
        scope_set(c, g, nm, jv_str(sb_rt_js_new(c, in->eos, strlen(in->eos), false)));
    if (in->vars_json) {
        jv x = sb_rt_jjson_parse(c, in->vars_json, strlen(in->vars_json), "the template variables");
        if (x.kind != JV_DICT)
            sb_rt_jfail(c, SB_ERR_INVAL, "the template variables: not a JSON object");
        for (size_t k = 0; k < x.d->n; k++) {
            jstr *key = x.d->k[k].s;
            char *name = sb_rt_ja_dup(&c->arena, key->s, key->len);
            for (size_t r = 0; r < sizeof reserved_vars / sizeof reserved_vars[0]; r++)
                if (!strcmp(name, reserved_vars[r]))
                    sb_rt_jfail(c, SB_ERR_INVAL,
                                "the template variables: \"%s\" cannot be set there", name);
            if (strlen(name) == key->len && (nm = find_name(t, name)))
                scope_set(c, g, nm, x.d->v[k]);
        }
    }
}

int sb_rt_jinja_run(const sb_rt_chat_limits *lim, const jtmpl *t, void (*body)(jctx *c, void *arg),
                    void *arg, sb_rt_chat_text *out, sb_rt_err *err)
{
    /* on the heap: it is written between setjmp and longjmp, and read after */
    jctx *const c = calloc(1, sizeof *c);
    if (!c)
        return sb_rt_fail(err, SB_ERR_NOMEM, "chat template: out of memory");
    c->err = err;
    c->t = t;
    c->lim = lim;
    c->arena.ctx = c;
    c->arena.limit = lim->max_memory_bytes;
    if (setjmp(c->jb)) {
        int code = c->code;
        sb_rt_jbuf_free_all(c);
        sb_rt_ja_free(&c->arena);
        free(c);
        return code;
    }
    c->root = c->out = sb_rt_jbuf_new(c);
    body(c, arg);
    jbuf *o = c->root;
    if (!o->s) { /* nothing was written */
        o->s = malloc(1);
        o->taint = malloc(1);
        if (!o->s || !o->taint)
            sb_rt_jfail(c, SB_ERR_NOMEM, "out of memory");
        o->s[0] = '\0';
    }
    sb_rt_chat_text r;
    if (sb_rt_jinja_text_from_buf(o->s, o->len, o->taint, &r) != SB_OK)
        sb_rt_jfail(c, SB_ERR_NOMEM, "out of memory");
    o->s = NULL; /* now r's */
    sb_rt_jbuf_free_all(c);
    sb_rt_ja_free(&c->arena);
    free(c);
    *out = r;
    return SB_OK;
}

static void render_body(jctx *c, void *arg)
{
    const jinja_input *in = arg;
    if (in->bos && !sb_rt_utf8_valid(in->bos, strlen(in->bos)))
        sb_rt_jfail(c, SB_ERR_INVAL, "bos_token is not valid UTF-8");
    if (in->eos && !sb_rt_utf8_valid(in->eos, strlen(in->eos)))
        sb_rt_jfail(c, SB_ERR_INVAL, "eos_token is not valid UTF-8");
    jscope *g = scope_new(c, NULL);
    jbuf *root = c->out;
    bind_inputs(c, in, g);
    c->out = root;
    exec(c, g, c->t->root);
}

int sb_rt_jinja_render(const jtmpl *t, const jinja_input *in, sb_rt_chat_text *out, sb_rt_err *err)
{
    return sb_rt_jinja_run(&t->lim, t, render_body, (void *)in, out, err);
}

int sb_rt_jinja_render_lim(const jtmpl *t, const jinja_input *in, const sb_rt_chat_limits *lim,
                           sb_rt_chat_text *out, sb_rt_err *err)
{
    return sb_rt_jinja_run(lim, t, render_body, (void *)in, out, err);
}
