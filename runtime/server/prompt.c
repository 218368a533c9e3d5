/* prompt.c -- chat templates and tokenization as the server uses them
 * (prompt.h): the model's tokenizer.chat_template through template/chat_tmpl.h,
 * the text through the tokenizer's span-aware encoder. */
#include "server/prompt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/chat_tmpl.h"
#include "gguf/gguf.h"
#include "server/tools.h"
#include "text/tokenizer.h"

struct srv_prompt {
    const sb_rt_model *m;
    const sb_rt_tok *tok;
    sb_rt_chat_tmpl *tmpl;
    char name[64];          /* "chatml (qwen2.5)", "jinja", ... */
    const char *bos_text;   /* the BOS token's text, or NULL (borrowed from tok) */
    size_t bos_len;
    int toolfmt;            /* srv_toolfmt the template teaches */
    char *after;            /* what the template writes after an assistant
                             * message's content ("<|im_end|>\n"), owned; ""
                             * when the probe could not tell */
};

/* What the template writes right after an assistant message's content, as
 * a probe conversation shows it: its end-of-turn token's text. */
static char *probe_after(const sb_rt_chat_tmpl *t)
{
    sb_rt_chat_msg m[] = { { "user", "Hello." }, { "assistant", "Hi." } };
    sb_rt_chat_text ct;
    sb_rt_err err;
    const char *tail = "";
    size_t n = 0;
    int rc = sb_rt_chat_render(t, m, 2, false, &ct, &err);
    if (rc == SB_OK && ct.n_spans) {
        const sb_rt_tok_span *last = &ct.spans[ct.n_spans - 1];
        tail = ct.text + last->off + last->len;
        n = ct.len - last->off - last->len;
    }
    char *r = malloc(n + 1);
    if (r) {
        memcpy(r, tail, n);
        r[n] = 0;
    }
    if (rc == SB_OK)
        sb_rt_chat_text_free(&ct);
    return r;
}

/* A token's text, or NULL when the vocabulary has no such token. */
static const char *tok_text(const sb_rt_tok *t, uint32_t id, size_t *len)
{
    *len = 0;
    return id == SB_RT_TOK_NONE ? NULL : sb_rt_tok_text(t, id, len);
}

int srv_prompt_new(const sb_rt_model *m, const char *template_name, const char *template_source,
                   srv_prompt **out, sb_rt_err *err)
{
    *out = NULL;
    if (!m->tok)
        return sb_rt_fail(err, SB_ERR_UNSUPPORTED, "%s: no tokenizer: %s", m->path, m->tok_error);
    srv_prompt *p = calloc(1, sizeof *p);
    if (!p)
        return sb_rt_fail(err, SB_ERR_NOMEM, "out of memory");
    p->m = m, p->tok = m->tok;
    sb_rt_tok_info info;
    sb_rt_tok_get_info(m->tok, &info);
    size_t eos_len;
    p->bos_text = tok_text(m->tok, info.bos, &p->bos_len);
    const char *eos_text = tok_text(m->tok, info.eos, &eos_len);
    /* the template as the file has it, NUL-terminated for chat_tmpl */
    const char *src = NULL;
    size_t src_len = 0;
    char *source = NULL;
    if (template_source) {
        src = template_source, src_len = strlen(template_source);
        template_name = "jinja";
    }
    if (src || sb_rt_gguf_get_str(m->gguf, "tokenizer.chat_template", &src, &src_len) == SB_OK) {
        if (!(source = malloc(src_len + 1))) {
            free(p);
            return sb_rt_fail(err, SB_ERR_NOMEM, "out of memory");
        }
        memcpy(source, src, src_len);
        source[src_len] = 0;
    }
    int rc = sb_rt_chat_tmpl_new(source, template_name, p->bos_text, eos_text, &p->tmpl, err);
    p->toolfmt = (int)srv_tools_format(source);
    free(source);
    if (rc != SB_OK) {
        if (!src && !template_name) /* say which model lacks one */
            sb_rt_fail(err, rc, "%s has no chat template (tokenizer.chat_template): name one "
                       "with --chat-template (chatml, llama3, llama2, mistral, gemma, phi3)",
                       m->path);
        free(p);
        return rc;
    }
    if (!(p->after = probe_after(p->tmpl))) {
        srv_prompt_free(p);
        return sb_rt_fail(err, SB_ERR_NOMEM, "out of memory");
    }
    const char *fam = sb_rt_chat_tmpl_name(p->tmpl), *var = sb_rt_chat_tmpl_variant(p->tmpl);
    if (strcmp(fam, var))
        snprintf(p->name, sizeof p->name, "%s (%s)", fam, var);
    else
        snprintf(p->name, sizeof p->name, "%s", fam);
    *out = p;
    return SB_OK;
}

void srv_prompt_free(srv_prompt *p)
{
    if (!p)
        return;
    sb_rt_chat_tmpl_free(p->tmpl);
    free(p->after);
    free(p);
}

const char *srv_prompt_template(const srv_prompt *p)
{
    return p->name;
}

void srv_text_free(srv_text *t)
{
    if (!t)
        return;
    free(t->text);
    free(t->spans);
    memset(t, 0, sizeof *t);
}

int srv_prompt_toolfmt(const srv_prompt *p)
{
    return p->toolfmt;
}

int srv_prompt_render(const srv_prompt *p, const srv_msg *msgs, size_t n, srv_text *out,
                      sb_rt_err *err)
{
    return srv_prompt_render_ex(p, msgs, n, NULL, NULL, out, err);
}

int srv_prompt_render_ex(const srv_prompt *p, const srv_msg *msgs, size_t n,
                         const char *const *msg_json, const char *vars_json, srv_text *out,
                         sb_rt_err *err)
{
    memset(out, 0, sizeof *out);
    if (!n)
        return sb_rt_fail(err, SB_ERR_INVAL, "messages is empty");
    sb_rt_chat_msg *cm = malloc(n * sizeof *cm);
    if (!cm)
        return sb_rt_fail(err, SB_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        cm[i] = (sb_rt_chat_msg){ msgs[i].role, msgs[i].content };
    sb_rt_chat_text ct;
    sb_rt_chat_opts o = { .add_generation_prompt = true, .msg_json = msg_json,
                          .vars_json = vars_json };
    int rc = msg_json || vars_json ? sb_rt_chat_render_ex(p->tmpl, cm, n, &o, &ct, err)
                                   : sb_rt_chat_render(p->tmpl, cm, n, true, &ct, err);
    free(cm);
    if (rc != SB_OK)
        return rc;
    srv_span *spans = malloc((ct.n_spans ? ct.n_spans : 1) * sizeof *spans);
    if (!spans) {
        sb_rt_chat_text_free(&ct);
        return sb_rt_fail(err, SB_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < ct.n_spans; i++)
        spans[i] = (srv_span){ ct.spans[i].off, ct.spans[i].len };
    out->text = ct.text, out->len = ct.len, out->spans = spans, out->n_spans = ct.n_spans;
    free(ct.spans); /* the text is now out's */
    return SB_OK;
}

int srv_prompt_encode(const srv_prompt *p, const char *text, size_t len, const srv_span *lit,
                      size_t n_lit, unsigned flags, uint32_t **ids, size_t *n)
{
    *ids = NULL, *n = 0;
    unsigned tf = 0;
    if (flags & SRV_ENC_SPECIAL)
        tf |= SB_RT_TOK_PARSE_SPECIAL;
    /* BOS when the vocabulary asks for it, unless the text already starts
     * with it as a template spells it (Llama 3's "<|begin_of_text|>"): then
     * that text is the BOS, parsed, and a second one would be wrong. */
    if ((flags & SRV_ENC_BOS) && sb_rt_tok_add_bos(p->tok) &&
        !((flags & SRV_ENC_SPECIAL) && p->bos_len && len >= p->bos_len &&
          !memcmp(text, p->bos_text, p->bos_len) && (!n_lit || lit[0].off >= p->bos_len)))
        tf |= SB_RT_TOK_ADD_BOS;
    sb_rt_tok_span *sp = NULL;
    if (n_lit && !(sp = malloc(n_lit * sizeof *sp)))
        return SB_ERR_NOMEM;
    for (size_t i = 0; i < n_lit; i++)
        sp[i] = (sb_rt_tok_span){ lit[i].off, lit[i].len };
    size_t need = 0;
    int rc = sb_rt_tok_encode_ex(p->tok, text, len, tf, sp, n_lit, NULL, 0, &need);
    uint32_t *t = NULL;
    if (rc == SB_OK || rc == SB_ERR_RANGE) {
        rc = (t = malloc((need ? need : 1) * sizeof *t)) ? SB_OK : SB_ERR_NOMEM;
        if (rc == SB_OK && need)
            rc = sb_rt_tok_encode_ex(p->tok, text, len, tf, sp, n_lit, t, need, n);
    }
    free(sp);
    if (rc != SB_OK) {
        free(t);
        *n = 0;
        return rc;
    }
    *ids = t;
    return SB_OK;
}

const char *srv_prompt_turn_end(const srv_prompt *p)
{
    return p->after;
}
