/* jinja.h -- the chat-template interpreter's insides: values, the arena,
 * strings that remember which bytes came from the caller, the syntax tree,
 * and the calls between its files. Not a public interface: chat_tmpl.h is.
 *
 * Files:
 *   jinja_lex.c     source -> tokens (jinja2's lexer rules, trim_blocks and
 *                   lstrip_blocks on, as Hugging Face renders templates)
 *   jinja_parse.c   tokens -> syntax tree (jnode); unknown filters and tests
 *                   are refused here (outside an if), as jinja2 refuses them
 *                   when it compiles
 *   jinja_eval.c    the tree -> output, with scopes, loops, macros, limits
 *   jinja_ops.c     operators, comparison, truth, str() and repr()
 *   jinja_builtin.c filters and tests
 *   jinja_methods.c global functions, methods of str/dict/list, calls
 *   jinja_str.c     UTF-8 strings with taint: slicing, strip, case, split...
 *   jinja_json.c    JSON text -> values (caller extras), values -> JSON (tojson)
 *
 * Memory. Everything a parse or a render makes lives in one arena (jarena)
 * freed at once; nothing is freed piecemeal, so values can share freely and
 * a failure anywhere needs no unwinding. Growing buffers (output, captured
 * blocks) are malloc'd, listed on the context and freed with it. Both count
 * against the render's memory limit.
 *
 * Errors. A failure deep in the evaluator calls sb_rt_jfail(), which records the
 * code and message and longjmps to the entry point (sb_rt_jinja_run, under
 * sb_rt_jinja_render and the family renderers, or sb_rt_jinja_parse), the only
 * functions that call setjmp; their context lives on the heap, so nothing
 * it holds is lost to the jump. Between them nothing owns memory outside
 * the arena and the buffer list, so the jump leaks nothing. No function
 * here may be entered from outside through any other path.
 *
 * Taint. Every string value carries, per byte, whether that byte came from
 * the caller's data (message content, role, name, extras) rather than the
 * template. Operations keep the flag of every byte they copy; of the bytes
 * they make, the escape or case mapping of a tainted character is tainted,
 * quotes, separators and numbers are not (chat_tmpl.h, SPANS). The output's
 * tainted bytes become sb_rt_chat_text.spans.
 *
 * Thread safety: a parsed template (jtmpl) is immutable; renders of one
 * template may run in parallel, each with its own jctx.
 */
#ifndef SB_RT_JINJA_H
#define SB_RT_JINJA_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/rt.h"
#include "template/chat_tmpl.h"

/* memcpy that accepts n == 0 with NULL pointers (memcpy may not) */
static inline void jcopy(void *dst, const void *src, size_t n)
{
    if (n)
        __builtin_memcpy(dst, src, n);
}

/* ---- arena --------------------------------------------------------------------------- */

typedef struct jchunk jchunk;
typedef struct jctx jctx;

typedef struct jarena {
    jchunk *head;       /* newest chunk first */
    size_t used;        /* bytes handed out plus chunk headers */
    size_t limit;       /* sb_rt_jfail(SB_ERR_RANGE) past it; 0: no limit */
    jctx *ctx;          /* where failures go */
} jarena;

void *sb_rt_ja_alloc(jarena *a, size_t n); /* zeroed, 16-byte aligned */
/* sb_rt_ja_grow -- an array of n_used elements of elem bytes at old, copied into a
 * new one of room for twice *cap (at least first) elements; *cap updated */
void *sb_rt_ja_grow(jarena *a, const void *old, size_t n_used, size_t *cap, size_t first,
                    size_t elem);
void *sb_rt_ja_dup(jarena *a, const void *p, size_t n);
void sb_rt_ja_free(jarena *a);

/* ---- values -------------------------------------------------------------------------- */

typedef enum jv_kind {
    JV_UNDEF, /* jinja2's Undefined: prints as "", false, empty when iterated */
    JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR,
    JV_LIST,  /* list, or tuple when l->tuple */
    JV_DICT,  /* dict (insertion order) */
    JV_NS,    /* namespace(): a dict whose attributes can be set */
    JV_ITER,  /* a one-shot iterator (generator, reversed(), dict items) */
    JV_CALL,  /* something callable: builtin, macro, bound method, loop.cycle */
    JV_LOOP,  /* the `loop` variable of a for loop */
} jv_kind;

typedef struct jstr jstr;
typedef struct jlist jlist;
typedef struct jdict jdict;
typedef struct jiter jiter;
typedef struct jcall jcall;
typedef struct jloop jloop;

typedef struct jv {
    uint8_t kind;               /* jv_kind */
    union {
        bool b;
        int64_t i;
        double f;
        jstr *s;
        jlist *l;
        jdict *d;               /* JV_DICT and JV_NS */
        jiter *it;
        jcall *c;
        jloop *loop;
        const char *undef;      /* JV_UNDEF: the message jinja2 would give when used */
    };
} jv;

#define JT_ALL ((const uint8_t *)1) /* taint: every byte is the caller's */

/* A string: UTF-8 bytes (validated where they enter), taint per byte. */
struct jstr {
    const char *s;
    size_t len;
    const uint8_t *taint;       /* NULL: none; JT_ALL: all; else len flags (0/1) */
    bool markup;                /* markupsafe.Markup (|safe, |escape): see jinja_ops.c */
};

struct jlist {
    size_t n;
    jv *v;
    bool tuple;
    const char *wrap;           /* NULL, or what it stands for: "range" (printed as
                                   range(a, b)), "dict_keys", "dict_values", "dict_items" */
    int64_t range[3];           /* wrap "range": start, stop, step */
};

struct jdict {
    size_t n, cap;
    jv *k, *v;                  /* keys: any hashable value; usually strings */
};

typedef enum jc_kind {
    JC_GLOBAL,                  /* range, dict, namespace, raise_exception */
    JC_METHOD,                  /* a method of self (str, dict, list) */
    JC_UNSAFE,                  /* a mutating method the immutable sandbox refuses */
    JC_UNSUPPORTED,             /* a str method this interpreter lacks */
    JC_MACRO,                   /* a macro, or the caller() of a call block */
    JC_CYCLE,                   /* loop.cycle */
} jc_kind;

struct jcall {
    uint8_t kind;               /* jc_kind */
    const char *name;
    jv self;                    /* METHOD, UNSAFE, CYCLE, LOOP: the object */
    const struct jnode *macro;  /* MACRO: the MACRO or CALLBLOCK node */
    struct jscope *closure;     /* MACRO: the scope it was defined in */
    jv caller;                  /* MACRO: the caller() of a call block, or undefined */
};

/* A one-shot iterator. Either materialized (items, pos), or lazy like the
 * Python generators jinja2's filters return: produce() makes the next item
 * when it is asked for, so a generator nobody consumes never fails, and one
 * consumed in part runs only that far. */
struct jiter {
    const char *type;           /* "generator", "list_reverseiterator", ... */
    jlist *items;               /* materialized: the items */
    size_t pos;                 /* the next one */
    /* lazy: the next item into *out, or false at the end */
    bool (*produce)(jctx *c, jiter *it, jv *out);
    jv src;                     /* what the generator runs over */
    jlist *src_items;           /* src's items, taken at the first pull */
    size_t src_pos;
    bool started, done;
    const struct jargs *args;   /* the filter's arguments */
    int mode;                   /* the producer's own */
    jv *seen;                   /* unique: keys seen so far */
    size_t n_seen;
};

/* The `loop` variable of one iteration. */
struct jloop {
    size_t index0, length;
    uint32_t depth0;            /* recursion depth of a recursive loop */
    jlist *items;               /* what the loop runs over (previtem, nextitem) */
    const struct jnode *node;   /* the FOR node (loop(...) in recursive loops) */
    struct jscope *scope;       /* the scope the loop runs in */
};

/* ---- syntax tree --------------------------------------------------------------------- */

typedef enum jn_kind {
    /* expressions */
    JN_CONST, JN_NAME, JN_GETATTR, JN_GETITEM, JN_SLICE, JN_CALL, JN_KWARG,
    JN_FILTER, JN_TEST, JN_NOT, JN_NEG, JN_POS, JN_BIN, JN_CONCAT, JN_COMPARE,
    JN_AND, JN_OR, JN_COND, JN_LIST, JN_TUPLE, JN_DICT, JN_NSREF,
    /* statements */
    JN_BODY, JN_DATA, JN_OUTPUT, JN_FOR, JN_IF, JN_SET, JN_SETBLOCK, JN_MACRO,
    JN_CALLBLOCK, JN_FILTERBLOCK, JN_WITH, JN_BREAK, JN_CONTINUE,
} jn_kind;

typedef enum jn_op { /* JN_BIN, and JN_COMPARE operands */
    JOP_ADD, JOP_SUB, JOP_MUL, JOP_DIV, JOP_FLOORDIV, JOP_MOD, JOP_POW,
    JOP_EQ, JOP_NE, JOP_LT, JOP_LE, JOP_GT, JOP_GE, JOP_IN, JOP_NOTIN,
} jn_op;

typedef struct jnode jnode;

/* One node. kids by kind:
 *   CONST: val                         NAME: name
 *   GETATTR: [obj], name               GETITEM: [obj, key]
 *   SLICE: [start|NULL, stop|NULL, step|NULL]
 *   CALL: [callee, args..., KWARGs...] KWARG: [value], name
 *   FILTER: [input|NULL (filter blocks), args...], name, fn
 *   TEST: [input, args...], name, fn   NOT/NEG/POS: [x]
 *   BIN: [a, b], op                    CONCAT: [a, b, ...]
 *   COMPARE: [first, operand...] where each operand is a BIN node (op, [b])
 *   AND/OR: [a, b]                     COND: [then, test, else|NULL]
 *   LIST/TUPLE: items                  DICT: [k0, v0, k1, v1, ...]
 *   NSREF: name (the namespace variable), attr: the attribute
 *   BODY: statements                   DATA: val (a string)
 *   OUTPUT: [expr]
 *   FOR: [target, iter, test|NULL, body, else|NULL], flag: recursive
 *   IF: [test, body, test, body, ..., else|NULL] (n odd when else is there)
 *   SET: [target, value]               SETBLOCK: [target, filter|NULL, body]
 *   MACRO: [params (TUPLE of NAMEs), defaults (LIST), body], name
 *   CALLBLOCK: [params, defaults, call, body]
 *   FILTERBLOCK: [filter chain on a NULL input, body]
 *   WITH: [targets (TUPLE), values (LIST), body]
 * Targets are NAME, NSREF, or TUPLE of targets. */
struct jnode {
    uint16_t kind;              /* jn_kind */
    uint16_t op;                /* jn_op, or a flag */
    uint32_t line;              /* 1-based line in the source */
    uint32_t n;                 /* number of kids */
    uint32_t depth;             /* 1 + the deepest kid (bounded by max_depth) */
    jnode **kids;
    const char *name;           /* interned */
    const char *attr;           /* interned (NSREF) */
    const void *fn;             /* the filter or test (jinja_builtin.c) */
    jv val;
};

/* A parsed template: immutable, shared by renders. */
typedef struct jtmpl {
    jarena arena;               /* the tree and interned names */
    jnode *root;                /* a BODY */
    const char **names;         /* every interned name (sorted) */
    size_t n_names;
    const char *n_loop, *n_varargs, *n_kwargs, *n_caller; /* interned special names */
    sb_rt_chat_limits lim;
} jtmpl;

/* ---- render context ------------------------------------------------------------------ */

typedef struct jbuf { /* a growing string with taint, malloc'd */
    char *s;
    uint8_t *taint;
    size_t len, cap;
    struct jbuf *next_live;     /* the context's list of live buffers */
    struct jbuf *prev_live;
} jbuf;

typedef struct jscope {
    struct jscope *parent;
    size_t n, cap;
    const char **names;         /* interned: compared by pointer */
    jv *vals;
} jscope;

struct jctx {
    jmp_buf jb;
    int code;                   /* the failure's sb_err code */
    sb_rt_err *err;
    jarena arena;
    const jtmpl *t;
    const sb_rt_chat_limits *lim;
    jbuf *out;                  /* where output goes now (captures push) */
    jbuf *root;                 /* the render's output (max_output_bytes) */
    jbuf *live;                 /* every malloc'd buffer, for cleanup */
    size_t buf_bytes;           /* capacity of live buffers (memory limit) */
    uint64_t steps, iterations;
    uint32_t depth;             /* macro calls and data nesting now */
    jscope *globals;
    uint32_t line;              /* the line being evaluated (messages) */
};

/* sb_rt_jfail -- record code and message (prefixed with the line) and jump out. */
_Noreturn void sb_rt_jfail(jctx *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* sb_rt_jstep -- count n evaluation steps; sb_rt_jfail(SB_ERR_RANGE) past max_steps. */
void sb_rt_jstep(jctx *c, uint64_t n);

/* ---- buffers (jinja_str.c) ----------------------------------------------------------- */

jbuf *sb_rt_jbuf_new(jctx *c);
void sb_rt_jbuf_drop(jctx *c, jbuf *b); /* free one, unlink it */
void sb_rt_jbuf_free_all(jctx *c);
void sb_rt_jbuf_put(jctx *c, jbuf *b, const char *s, size_t n, bool tainted);
void sb_rt_jbuf_put_str(jctx *c, jbuf *b, const jstr *s); /* keeps s's taint */
void sb_rt_jbuf_put_range(jctx *c, jbuf *b, const jstr *s, size_t off, size_t n);
void sb_rt_jbuf_putc(jctx *c, jbuf *b, char ch, bool tainted);
jstr *sb_rt_jbuf_take(jctx *c, jbuf *b); /* copy into the arena, drop b */

/* ---- strings (jinja_str.c) ----------------------------------------------------------- */

jstr *sb_rt_js_new(jctx *c, const char *s, size_t n, bool tainted);
jstr *sb_rt_js_lit(jctx *c, const char *s);                       /* untainted NUL-terminated */
jstr *sb_rt_js_sub(jctx *c, const jstr *s, size_t off, size_t n); /* bytes [off, off+n) */
bool sb_rt_js_tainted_at(const jstr *s, size_t i);
bool sb_rt_js_eq(const jstr *a, const jstr *b);
int sb_rt_js_cmp(const jstr *a, const jstr *b);   /* by code point, like Python */
size_t sb_rt_js_ncp(const jstr *s);               /* code points */
size_t sb_rt_js_cp_off(const jstr *s, size_t cp); /* byte offset of code point cp */
uint32_t sb_rt_utf8_dec(const char *s, size_t n, size_t *adv);
size_t sb_rt_utf8_enc(uint32_t cp, char *out);
bool sb_rt_utf8_valid(const char *s, size_t n);
bool sb_rt_uc_isspace(uint32_t cp);
bool sb_rt_uc_isprintable(uint32_t cp);
bool sb_rt_uc_is_cased(uint32_t cp);
bool sb_rt_js_isupper(const jstr *s);
bool sb_rt_js_islower(const jstr *s);
/* case conversions: 'u' upper, 'l' lower, 't' title, 'c' capitalize, 's' swapcase */
jstr *sb_rt_js_case(jctx *c, const jstr *s, char how);
/* strip: which 'l', 'r', 'b'; chars NULL: Unicode whitespace */
jstr *sb_rt_js_strip(jctx *c, const jstr *s, const jstr *chars, char which);
jstr *sb_rt_js_replace(jctx *c, const jstr *s, const jstr *old, const jstr *neu, int64_t count);
jlist *sb_rt_js_split(jctx *c, const jstr *s, const jstr *sep, int64_t maxsplit, bool right);
jlist *sb_rt_js_splitlines(jctx *c, const jstr *s, bool keepends);
/* the first match of sub at or after byte from, or -1 (counts steps) */
int64_t sb_rt_js_find(jctx *c, const jstr *s, const jstr *sub, size_t from_byte);
jstr *sb_rt_js_concat(jctx *c, const jstr *a, const jstr *b);
jstr *sb_rt_js_repeat(jctx *c, const jstr *s, int64_t n);
jstr *sb_rt_js_escape_html(jctx *c, const jstr *s); /* markupsafe.escape */
/* quote s as Python's repr() does, appending to b */
void sb_rt_js_repr(jctx *c, jbuf *b, const jstr *s);
/* a number as Python prints it (repr), appending to b (never tainted) */
void sb_rt_jbuf_put_int(jctx *c, jbuf *b, int64_t i);
void sb_rt_jbuf_put_float(jctx *c, jbuf *b, double f);
/* JSON string (ensure_ascii on or off), appending to b */
void sb_rt_js_json(jctx *c, jbuf *b, const jstr *s, bool ensure_ascii);

/* ---- values (jinja_ops.c) ------------------------------------------------------------ */

static inline jv jv_undef(const char *why) { jv v = { .kind = JV_UNDEF }; v.undef = why; return v; }
static inline jv jv_none(void) { jv v = { .kind = JV_NONE }; return v; }
static inline jv jv_bool(bool b) { jv v = { .kind = JV_BOOL }; v.b = b; return v; }
static inline jv jv_int(int64_t i) { jv v = { .kind = JV_INT }; v.i = i; return v; }
static inline jv jv_float(double f) { jv v = { .kind = JV_FLOAT }; v.f = f; return v; }
static inline jv jv_str(jstr *s) { jv v = { .kind = JV_STR }; v.s = s; return v; }
static inline jv jv_list(jlist *l) { jv v = { .kind = JV_LIST }; v.l = l; return v; }
static inline jv jv_dict(jdict *d) { jv v = { .kind = JV_DICT }; v.d = d; return v; }

jlist *sb_rt_jl_new(jctx *c, size_t n, bool tuple); /* n zeroed (undefined) items */
/* append x to the growing array *v (*n items, room for *cap) */
void sb_rt_jv_push(jctx *c, jv **v, size_t *n, size_t *cap, jv x);
jdict *sb_rt_jd_new(jctx *c, size_t cap);
void sb_rt_jd_set(jctx *c, jdict *d, jv k, jv v); /* insert or replace */
bool sb_rt_jd_get(jctx *c, const jdict *d, jv k, jv *out);
void sb_rt_jv_check_hashable(jctx *c, jv k); /* sb_rt_jfail for a list or dict key */
jv sb_rt_jv_iter_new(jctx *c, jlist *items, const char *type);
/* sb_rt_jit_next -- the iterator's next item into *out; false at its end */
bool sb_rt_jit_next(jctx *c, jiter *it, jv *out);

const char *sb_rt_jv_type_name(jv v); /* Python's: 'str', 'dict', ... */
bool sb_rt_jv_truth(jv v);
bool sb_rt_jv_eq(jctx *c, jv a, jv b);
int sb_rt_jv_cmp(jctx *c, jv a, jv b); /* <, ==, > as -1, 0, 1; sb_rt_jfail if unordered */
bool sb_rt_jv_contains(jctx *c, jv container, jv item);
jv sb_rt_jv_binop(jctx *c, int op, jv a, jv b);
jv sb_rt_jv_neg(jctx *c, jv a, bool neg);
/* str(v) into b (what {{ v }} prints); repr(v) into b */
void sb_rt_jv_str_into(jctx *c, jbuf *b, jv v);
void sb_rt_jv_repr_into(jctx *c, jbuf *b, jv v);
jstr *sb_rt_jv_to_str(jctx *c, jv v); /* str(v) as a value (soft_str) */
/* the items of an iterable (consumes an iterator; a string gives its
 * characters, a dict its keys); sb_rt_jfail when v is not iterable */
jlist *sb_rt_jv_iterate(jctx *c, jv v);
int64_t sb_rt_jv_len(jctx *c, jv v);                    /* sb_rt_jfail when it has no len() */
jv sb_rt_jv_getattr(jctx *c, jv obj, const char *name); /* obj.name */
jv sb_rt_jv_getitem(jctx *c, jv obj, jv key);           /* obj[key] */
jv sb_rt_jv_slice(jctx *c, jv obj, jv start, jv stop, jv step);
void sb_rt_jv_format_float(double f, char *out, size_t cap); /* Python's repr(float) */

/* ---- JSON (jinja_json.c) ------------------------------------------------------------- */

/* parse JSON text into a value; every string tainted. sb_rt_jfail(SB_ERR_INVAL) on bad JSON
 * (what names the input in the message). */
jv sb_rt_jjson_parse(jctx *c, const char *text, size_t len, const char *what);
/* tojson as Hugging Face's filter: json.dumps(v, ensure_ascii, indent, separators,
 * sort_keys); indent < 0: none; item_sep / key_sep NULL: json's defaults */
void sb_rt_jjson_dump(jctx *c, jbuf *b, jv v, bool ensure_ascii, int64_t indent,
                      const jstr *indent_str, const jstr *item_sep, const jstr *key_sep,
                      bool sort_keys);

/* ---- builtins (jinja_builtin.c) ------------------------------------------------------ */

typedef struct jargs { /* evaluated call arguments */
    size_t n, n_kw;
    jv *v;
    const char **kw;            /* names of kwargs (not interned) */
    jv *kv;
} jargs;

typedef jv (*jfilter_fn)(jctx *c, jv x, const jargs *a);
typedef bool (*jtest_fn)(jctx *c, jv x, const jargs *a);

const void *sb_rt_jb_filter(const char *name); /* NULL: no such filter here */
const void *sb_rt_jb_test(const char *name);
bool sb_rt_jb_filter_known(const char *name); /* jinja2 has it (we may not) */
bool sb_rt_jb_test_known(const char *name);
void sb_rt_jb_test_arity(jctx *c, const char *name,
                         const jargs *a); /* sb_rt_jfail on a wrong count */
/* globals: range, dict, namespace, raise_exception, cycler, joiner */
bool sb_rt_jb_global(jctx *c, const char *name, jv *out);
/* obj.name as a bound method, when obj has such a method */
bool sb_rt_jb_method(jctx *c, jv obj, const char *name, jv *out);
jv sb_rt_jb_call(jctx *c, jv fn, const jargs *a); /* builtins and methods (not macros) */
/* a callable of kind (jc_kind), named, bound to self; caller undefined */
jv sb_rt_jcall_new(jctx *c, int kind, const char *name, jv self);
/* the argument helpers jinja_builtin.c and jinja_methods.c share: refuse
 * more than max_pos positional arguments or keywords outside names (NULL-
 * terminated); a str / an int argument or a TypeError naming what; s with
 * its Markup flag set to markup */
void sb_rt_jb_check_args(jctx *c, const jargs *a, const char *what, size_t max_pos,
                         const char *const *names);
jstr *sb_rt_jb_want_str(jctx *c, jv v, const char *what);
int64_t sb_rt_jb_want_int(jctx *c, jv v, const char *what);
jstr *sb_rt_jb_markup(jctx *c, jstr *s, bool markup);
/* one argument by position or keyword, or dflt when absent */
jv sb_rt_jarg(const jargs *a, size_t pos, const char *kw, jv dflt);
bool sb_rt_jarg_has(const jargs *a, size_t pos, const char *kw);

/* ---- the evaluator (jinja_eval.c) ---------------------------------------------------- */

jv sb_rt_jeval(jctx *c, jscope *s, const jnode *n);
/* call a macro value (from sb_rt_jb_call, for caller() and map) */
jv sb_rt_jeval_call_macro(jctx *c, jv fn, const jargs *a);

/* ---- entry points -------------------------------------------------------------------- */

/* sb_rt_jinja_parse -- parse source (len bytes, valid UTF-8) into *out (free with
 * sb_rt_jinja_free). Returns: SB_OK; SB_ERR_INVAL (a syntax error, an unknown
 * filter or test: err says where); SB_ERR_RANGE (source or nesting over a
 * limit); SB_ERR_NOMEM. */
int sb_rt_jinja_parse(const char *source, size_t len, const sb_rt_chat_limits *lim, jtmpl **out,
                      sb_rt_err *err);
void sb_rt_jinja_free(jtmpl *t);

/* What a render gets: the messages and variables of chat_tmpl.h. */
typedef struct jinja_input {
    const sb_rt_chat_msg *msgs;
    size_t n_msgs;
    const char *const *msg_json;  /* NULL or n_msgs entries, each NULL or JSON object text */
    const char *vars_json;        /* NULL or a JSON object's text */
    bool add_generation_prompt;
    const char *bos, *eos;        /* NULL: undefined */
} jinja_input;

/* sb_rt_jinja_render -- render t for in into *out (owned by the caller:
 * sb_rt_chat_text_free). Returns: SB_OK; SB_ERR_INVAL (the template failed:
 * raise_exception, an undefined used, a type error; or bad input: invalid
 * UTF-8, bad JSON); SB_ERR_RANGE (a limit); SB_ERR_UNSUPPORTED (something
 * jinja2 has that this interpreter does not); SB_ERR_NOMEM. On failure
 * *out is untouched. */
int sb_rt_jinja_render(const jtmpl *t, const jinja_input *in, sb_rt_chat_text *out, sb_rt_err *err);

/* sb_rt_jinja_render_lim -- sb_rt_jinja_render under other limits (the probes of
 * chat_tmpl.c run under smaller ones). */
int sb_rt_jinja_render_lim(const jtmpl *t, const jinja_input *in, const sb_rt_chat_limits *lim,
                           sb_rt_chat_text *out, sb_rt_err *err);

/* sb_rt_jinja_run -- the frame every render runs in: a context on the heap, the
 * setjmp that sb_rt_jfail returns to, the output buffer; body writes to c->out.
 * t may be NULL (family renderers). Returns as sb_rt_jinja_render. */
int sb_rt_jinja_run(const sb_rt_chat_limits *lim, const jtmpl *t, void (*body)(jctx *c, void *arg),
                    void *arg, sb_rt_chat_text *out, sb_rt_err *err);

/* a caller's string as a tainted value (borrowed); sb_rt_jfail(SB_ERR_INVAL)
 * when it is not UTF-8 ("what of message i") */
jstr *sb_rt_jinja_input_str(jctx *c, const char *s, const char *what, size_t i);

/* turn a buffer's taint into sorted, disjoint, merged spans; moves b's text into out */
int sb_rt_jinja_text_from_buf(char *s, size_t len, const uint8_t *taint, sb_rt_chat_text *out);

#endif /* SB_RT_JINJA_H */
