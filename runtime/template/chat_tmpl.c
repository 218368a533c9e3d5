/* chat_tmpl.c -- chat templates: choosing how a model's template renders
 * (a family's built-in renderer, or the interpreter) and rendering with it
 * (chat_tmpl.h has the whole story).
 *
 * Choosing, for a source and an optional name:
 *   1. name "jinja": the interpreter, which must parse the source and render
 *      a user message, alone or after a system one (probes 0 and 1).
 *   2. Otherwise the family is the name, or the one whose signature the
 *      source carries (chat_family.c: sb_rt_cf_detect).
 *   3. With a family and a source the interpreter parses, every probe
 *      conversation below is rendered by the interpreter, and then by each
 *      of the family's variants in turn; the first variant that gives the
 *      same result on every probe (the same text, or a failure where the
 *      interpreter fails; a probe the interpreter could not finish, under
 *      its smaller limits, does not count) is chosen. If none does, a named
 *      family gets its first variant (the caller asked for it) and a
 *      detected one gives way to the interpreter when the interpreter
 *      renders probe 0 or 1: the template looked like the family but says
 *      something else. Otherwise the family's first variant.
 *   4. With a family and no parsed source: the family's first variant.
 *   5. No family: the interpreter, if it parses the source and renders
 *      probe 0 or 1; else the template is refused, naming --chat-template. */
#include <stdlib.h>
#include <string.h>

#include "template/chat_family.h"
#include "template/chat_tmpl.h"
#include "template/jinja.h"

struct sb_rt_chat_tmpl {
    const char *family;           /* static: a family name or "jinja" */
    const cf_variant *v;          /* the built-in renderer, or NULL (the interpreter) */
    jtmpl *jt;                    /* the source, parsed; NULL without one or when it failed */
    char *bos, *eos;              /* owned; "" when the vocabulary has none */
    sb_rt_chat_limits lim;
};

const char sb_rt_chat_tmpl_chatml[] =
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

#define OPTION_HINT "choose a built-in format with --chat-template NAME (chatml, llama3, " \
                    "llama2, mistral, gemma, phi3)"

void sb_rt_chat_limits_default(sb_rt_chat_limits *l)
{
    l->max_source_bytes = 1u << 20;
    l->max_output_bytes = 32u << 20;
    l->max_memory_bytes = 256u << 20;
    l->max_iterations = 1000000;
    l->max_steps = 50000000;
    l->max_depth = 100;
}

static void limits_fill(sb_rt_chat_limits *l, const sb_rt_chat_limits *given)
{
    sb_rt_chat_limits d;
    sb_rt_chat_limits_default(&d);
    *l = given ? *given : d;
#define FILL(f) l->f = l->f ? l->f : d.f
    FILL(max_source_bytes);
    FILL(max_output_bytes);
    FILL(max_memory_bytes);
    FILL(max_iterations);
    FILL(max_steps);
    FILL(max_depth);
#undef FILL
}

/* ---- probes -------------------------------------------------------------------------- */

typedef struct probe {
    size_t n;
    sb_rt_chat_msg m[5];
} probe;

/* conversations that tell the variants of each family apart: system or not,
 * padding (trim), think blocks, empty system, tool turns, wrong order, an
 * assistant turn last */
static const probe probes[] = {
    { 1, { { "user", "Hello" } } },
    { 2, { { "system", "You are terse." }, { "user", "Hi there" } } },
    { 4, { { "system", "S" }, { "user", "U1" }, { "assistant", "A1" }, { "user", "U2" } } },
    { 3, { { "user", "  padded  \n" }, { "assistant", "\n reply \n" }, { "user", "x" } } },
    { 2, { { "user", "Q" }, { "assistant", "<think>\nR\n</think>\n\nA" } } },
    { 2, { { "system", "" }, { "user", "U" } } },
    { 5, { { "user", "U" }, { "assistant", "A" }, { "tool", "T1" }, { "tool", "T2" },
           { "user", "U2" } } },
    { 2, { { "assistant", "A" }, { "user", "U" } } },
    { 2, { { "user", "U1" }, { "user", "U2" } } },
    { 3, { { "system", "S" }, { "user", "U" }, { "assistant", "A" } } },
};

#define N_PROBES (sizeof probes / sizeof probes[0])

typedef struct probe_result {
    int rc;
    sb_rt_chat_text text;
} probe_result;

static int interp_render(const sb_rt_chat_tmpl *t, const sb_rt_chat_msg *msgs, size_t n,
                         bool gen, const sb_rt_chat_opts *opts, const sb_rt_chat_limits *lim,
                         sb_rt_chat_text *out, sb_rt_err *err)
{
    jinja_input in = { .msgs = msgs, .n_msgs = n, .add_generation_prompt = gen,
                       .bos = t->bos, .eos = t->eos,
                       .msg_json = opts ? opts->msg_json : NULL,
                       .vars_json = opts ? opts->vars_json : NULL };
    return sb_rt_jinja_render_lim(t->jt, &in, lim ? lim : &t->lim, out, err);
}

/* The probes' limits: every fixture template (tests/data/templates) renders
 * each probe within 2,000 steps, so these leave a wide margin and bound what
 * choosing a variant can cost (20 probes by the interpreter and by each
 * variant) for a template that loops on purpose. */
static sb_rt_chat_limits probe_limits(const sb_rt_chat_limits *l)
{
    sb_rt_chat_limits p = *l;
#define CAP(f, v) p.f = p.f < (v) ? p.f : (v)
    CAP(max_output_bytes, 256u << 10);
    CAP(max_memory_bytes, 8u << 20);
    CAP(max_iterations, 5000);
    CAP(max_steps, 50000);
#undef CAP
    return p;
}

static bool same(const probe_result *a, int rc, const sb_rt_chat_text *b)
{
    if (a->rc != SB_OK || rc != SB_OK)
        return a->rc == rc || (a->rc == SB_ERR_INVAL && rc == SB_ERR_INVAL);
    return a->text.len == b->len && !memcmp(a->text.text, b->text, b->len);
}

/* the first variant of family that agrees with the interpreter on every
 * probe, or NULL; *interp_ok: whether the interpreter rendered a user
 * message, alone or after a system one (what makes it usable, below) */
static const cf_variant *probe_variants(const sb_rt_chat_tmpl *t, const char *family,
                                        bool *interp_ok, int *nomem)
{
    probe_result r[2 * N_PROBES];
    sb_rt_err e;
    sb_rt_chat_limits plim = probe_limits(&t->lim);
    for (size_t i = 0; i < 2 * N_PROBES; i++) {
        const probe *p = &probes[i / 2];
        r[i].rc = interp_render(t, p->m, p->n, i % 2 == 0, NULL, &plim, &r[i].text, &e);
        if (r[i].rc == SB_ERR_NOMEM)
            *nomem = 1;
    }
    *interp_ok = r[0].rc == SB_OK || r[2].rc == SB_OK; /* probes 0 and 1, with gen */
    const cf_variant *found = NULL;
    for (size_t v = 0; v < sb_rt_cf_n_variants && !found && !*nomem; v++) {
        const cf_variant *cv = &sb_rt_cf_variants[v];
        if (strcmp(cv->family, family))
            continue;
        bool agree = true;
        for (size_t i = 0; i < 2 * N_PROBES && agree; i++) {
            const probe *p = &probes[i / 2];
            if (r[i].rc == SB_ERR_RANGE || r[i].rc == SB_ERR_UNSUPPORTED)
                continue; /* the interpreter cannot say; the others decide */
            sb_rt_chat_text out;
            int rc = sb_rt_cf_render(cv, p->m, p->n, i % 2 == 0, t->bos, t->eos, &plim, &out, &e);
            if (rc == SB_ERR_NOMEM)
                *nomem = 1;
            agree = same(&r[i], rc, &out);
            if (rc == SB_OK)
                sb_rt_chat_text_free(&out);
        }
        if (agree)
            found = cv;
    }
    for (size_t i = 0; i < 2 * N_PROBES; i++)
        if (r[i].rc == SB_OK)
            sb_rt_chat_text_free(&r[i].text);
    return found;
}

static const cf_variant *first_variant(const char *family)
{
    for (size_t v = 0; v < sb_rt_cf_n_variants; v++)
        if (!strcmp(sb_rt_cf_variants[v].family, family))
            return &sb_rt_cf_variants[v];
    return NULL;
}

/* ---- creation ------------------------------------------------------------------------ */

void sb_rt_chat_tmpl_free(sb_rt_chat_tmpl *t)
{
    if (!t)
        return;
    sb_rt_jinja_free(t->jt);
    free(t->bos);
    free(t->eos);
    free(t);
}

static char *dup_or_empty(const char *s)
{
    return strdup(s ? s : "");
}

int sb_rt_chat_tmpl_new_ex(const char *source, const char *name, const char *bos_text,
                           const char *eos_text, const sb_rt_chat_limits *limits,
                           sb_rt_chat_tmpl **out, sb_rt_err *err)
{
    if (!out)
        return sb_rt_fail(err, SB_ERR_INVAL, "chat template: NULL argument");
    bool jinja = name && !strcmp(name, "jinja");
    if (name && !jinja && !sb_rt_cf_is_family(name))
        return sb_rt_fail(err, SB_ERR_UNSUPPORTED, "chat template: unknown format '%s'; "
                          OPTION_HINT " or jinja", name);
    sb_rt_chat_tmpl *t = calloc(1, sizeof *t);
    if (!t)
        return sb_rt_fail(err, SB_ERR_NOMEM, "chat template: out of memory");
    limits_fill(&t->lim, limits);
    t->bos = dup_or_empty(bos_text);
    t->eos = dup_or_empty(eos_text);
    int rc = SB_OK;
    if (!t->bos || !t->eos) {
        rc = sb_rt_fail(err, SB_ERR_NOMEM, "chat template: out of memory");
        goto fail;
    }
    if ((bos_text && !sb_rt_utf8_valid(bos_text, strlen(bos_text))) ||
        (eos_text && !sb_rt_utf8_valid(eos_text, strlen(eos_text)))) {
        rc = sb_rt_fail(err, SB_ERR_INVAL, "chat template: the BOS or EOS text is not UTF-8");
        goto fail;
    }
    sb_rt_err perr = { 0 };
    if (source) {
        size_t len = strlen(source);
        if (len > t->lim.max_source_bytes) {
            rc = sb_rt_fail(err, SB_ERR_RANGE, "chat template: the source is %zu bytes, over "
                            "the limit of %zu (max_source_bytes)", len, t->lim.max_source_bytes);
            goto fail;
        }
        if (!sb_rt_utf8_valid(source, len)) {
            rc = sb_rt_fail(err, SB_ERR_INVAL, "chat template: the source is not valid UTF-8");
            goto fail;
        }
        if (sb_rt_jinja_parse(source, len, &t->lim, &t->jt, &perr) == SB_ERR_NOMEM) {
            rc = sb_rt_fail(err, SB_ERR_NOMEM, "chat template: out of memory");
            goto fail;
        }
    } else {
        sb_rt_fail(&perr, SB_ERR_UNSUPPORTED, "the model has no chat template");
    }
    const char *family = jinja ? NULL : name ? name : sb_rt_cf_detect(source);
    if (family) {
        bool interp_ok = false;
        int nomem = 0;
        const cf_variant *v = t->jt ? probe_variants(t, family, &interp_ok, &nomem) : NULL;
        if (nomem) {
            rc = sb_rt_fail(err, SB_ERR_NOMEM, "chat template: out of memory");
            goto fail;
        }
        if (!v && (name || !interp_ok))
            v = first_variant(family);
        if (v) {
            t->family = v->family;
            t->v = v;
            *out = t;
            return SB_OK;
        }
    }
    /* the interpreter, if it renders a user message, alone or after a system one */
    for (size_t k = 0; t->jt && k < 2; k++) {
        const probe *p = &probes[k];
        sb_rt_chat_text x;
        sb_rt_err xerr;
        int xrc = interp_render(t, p->m, p->n, true, NULL, NULL, &x, k ? &xerr : &perr);
        if (xrc == SB_ERR_NOMEM) {
            rc = sb_rt_fail(err, SB_ERR_NOMEM, "chat template: out of memory");
            goto fail;
        }
        if (xrc == SB_OK) {
            sb_rt_chat_text_free(&x);
            t->family = "jinja";
            *out = t;
            return SB_OK;
        }
    }
    rc = sb_rt_fail(err, SB_ERR_UNSUPPORTED, "chat template: %s%s (%s); " OPTION_HINT,
                    jinja ? "" : "not a known format and ",
                    t->jt ? "it does not render a user message"
                          : source ? "the interpreter cannot read it" : "none given",
                    perr.msg[0] ? perr.msg : "no details");
fail:
    sb_rt_chat_tmpl_free(t);
    return rc;
}

int sb_rt_chat_tmpl_new(const char *source, const char *name, const char *bos_text,
                        const char *eos_text, sb_rt_chat_tmpl **out, sb_rt_err *err)
{
    return sb_rt_chat_tmpl_new_ex(source, name, bos_text, eos_text, NULL, out, err);
}

const char *sb_rt_chat_tmpl_name(const sb_rt_chat_tmpl *t)
{
    return t ? t->family : NULL;
}

const char *sb_rt_chat_tmpl_variant(const sb_rt_chat_tmpl *t)
{
    return !t ? NULL : t->v ? t->v->name : "jinja";
}

/* ---- rendering ----------------------------------------------------------------------- */

int sb_rt_chat_render_ex(const sb_rt_chat_tmpl *t, const sb_rt_chat_msg *msgs, size_t n_msgs,
                         const sb_rt_chat_opts *opts, sb_rt_chat_text *out, sb_rt_err *err)
{
    if (!t || !msgs || !out)
        return sb_rt_fail(err, SB_ERR_INVAL, "chat template: NULL argument");
    if (n_msgs == 0)
        return sb_rt_fail(err, SB_ERR_INVAL, "chat template: no messages");
    bool extras = opts && (opts->vars_json || opts->msg_json);
    for (size_t i = 0; i < n_msgs; i++) {
        if (!msgs[i].role)
            return sb_rt_fail(err, SB_ERR_INVAL, "chat template: message %zu has no role", i);
        extras |= msgs[i].content == NULL;
    }
    bool gen = opts && opts->add_generation_prompt;
    if (t->v && !extras)
        return sb_rt_cf_render(t->v, msgs, n_msgs, gen, t->bos, t->eos, &t->lim, out, err);
    if (!t->jt)
        return sb_rt_fail(err, SB_ERR_UNSUPPORTED, "chat template: the built-in %s format "
                          "renders plain messages only, and the model's template cannot be "
                          "read to render tools, tool calls or null content", t->family);
    return interp_render(t, msgs, n_msgs, gen, opts, NULL, out, err);
}

int sb_rt_chat_render(const sb_rt_chat_tmpl *t, const sb_rt_chat_msg *msgs, size_t n_msgs,
                      bool add_generation_prompt, sb_rt_chat_text *out, sb_rt_err *err)
{
    sb_rt_chat_opts o = { .add_generation_prompt = add_generation_prompt };
    return sb_rt_chat_render_ex(t, msgs, n_msgs, &o, out, err);
}

void sb_rt_chat_text_free(sb_rt_chat_text *x)
{
    if (!x)
        return;
    free(x->text);
    free(x->spans);
    x->text = NULL;
    x->spans = NULL;
    x->len = x->n_spans = 0;
}
