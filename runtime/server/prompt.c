/* prompt.c -- chat templates and tokenization as the server uses them
 * (prompt.h). The ChatML stand-in below goes when model/chat_tmpl.h and the
 * special-token tokenizer land on main. */
#include "server/prompt.h"

#include <stdlib.h>
#include <string.h>

#include "model/tokenizer.h"

struct srv_prompt {
    const sb_rt_model *m;
    const sb_rt_tok *tok;
};

int srv_prompt_new(const sb_rt_model *m, const char *template_name, srv_prompt **out,
                   sb_rt_err *err)
{
    *out = NULL;
    if (!m->tok)
        return sb_rt_fail(err, SB_ERR_UNSUPPORTED, "%s: no tokenizer: %s", m->path, m->tok_error);
    if (template_name && strcmp(template_name, "chatml") != 0)
        return sb_rt_fail(err, SB_ERR_UNSUPPORTED,
                          "--chat-template %s: unknown template (this build knows: chatml)",
                          template_name);
    srv_prompt *p = calloc(1, sizeof *p);
    if (!p)
        return sb_rt_fail(err, SB_ERR_NOMEM, "out of memory");
    p->m = m, p->tok = m->tok;
    *out = p;
    return SB_OK;
}

void srv_prompt_free(srv_prompt *p)
{
    free(p);
}

const char *srv_prompt_template(const srv_prompt *p)
{
    (void)p;
    return "chatml";
}

void srv_text_free(srv_text *t)
{
    if (!t)
        return;
    free(t->text);
    free(t->spans);
    memset(t, 0, sizeof *t);
}

/* A growing string. */
typedef struct sbuf {
    char *b;
    size_t len, cap;
    int oom;
} sbuf;

static void put(sbuf *s, const char *p, size_t n)
{
    if (s->oom)
        return;
    if (s->len + n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 256;
        while (cap < s->len + n + 1)
            cap *= 2;
        char *nb = realloc(s->b, cap);
        if (!nb) {
            s->oom = 1;
            return;
        }
        s->b = nb, s->cap = cap;
    }
    memcpy(s->b + s->len, p, n);
    s->len += n;
    s->b[s->len] = 0;
}

static void puts_(sbuf *s, const char *p)
{
    put(s, p, strlen(p));
}

int srv_prompt_render(const srv_prompt *p, const srv_msg *msgs, size_t n, srv_text *out,
                      sb_rt_err *err)
{
    (void)p;
    memset(out, 0, sizeof *out);
    static const char *const roles[] = { "system", "user", "assistant", "tool" };
    for (size_t i = 0; i < n; i++) {
        size_t r = 0;
        while (r < 4 && strcmp(msgs[i].role, roles[r]) != 0)
            r++;
        if (r == 4)
            return sb_rt_fail(err, SB_ERR_INVAL, "messages[%zu].role '%s' is not one of system, "
                              "user, assistant, tool", i, msgs[i].role);
    }
    sbuf s = { 0 };
    srv_span *spans = malloc((n ? n : 1) * sizeof *spans);
    if (!spans)
        return sb_rt_fail(err, SB_ERR_NOMEM, "out of memory");
    size_t n_spans = 0;
    for (size_t i = 0; i < n; i++) {
        puts_(&s, "<|im_start|>");
        puts_(&s, msgs[i].role);
        puts_(&s, "\n");
        size_t off = s.len, len = strlen(msgs[i].content);
        put(&s, msgs[i].content, len);
        if (len)
            spans[n_spans++] = (srv_span){ off, len };
        puts_(&s, "<|im_end|>\n");
    }
    puts_(&s, "<|im_start|>assistant\n");
    if (s.oom) {
        free(s.b);
        free(spans);
        return sb_rt_fail(err, SB_ERR_NOMEM, "out of memory");
    }
    out->text = s.b, out->len = s.len, out->spans = spans, out->n_spans = n_spans;
    return SB_OK;
}

int srv_prompt_encode(const srv_prompt *p, const char *text, size_t len, const srv_span *lit,
                      size_t n_lit, unsigned flags, uint32_t **ids, size_t *n)
{
    (void)lit, (void)n_lit; /* the stand-in tokenizer has no special tokens */
    *ids = NULL, *n = 0;
    bool bos = (flags & SRV_ENC_BOS) && sb_rt_tok_add_bos(p->tok);
    size_t need = 0;
    int rc = sb_rt_tok_encode(p->tok, text, len, bos, NULL, 0, &need);
    if (rc != SB_OK && rc != SB_ERR_RANGE)
        return rc;
    uint32_t *t = malloc((need ? need : 1) * sizeof *t);
    if (!t)
        return SB_ERR_NOMEM;
    if (need && (rc = sb_rt_tok_encode(p->tok, text, len, bos, t, need, n)) != SB_OK) {
        free(t);
        *n = 0;
        return rc;
    }
    *ids = t;
    return SB_OK;
}

bool srv_prompt_is_eog(const srv_prompt *p, uint32_t id)
{
    return id == sb_rt_tok_eos(p->tok);
}

int srv_prompt_piece(const srv_prompt *p, uint32_t id, uint32_t prev, char *buf, size_t cap,
                     size_t *n)
{
    return sb_rt_tok_piece(p->tok, id, prev, buf, cap, n);
}

const char *srv_prompt_token_text(const srv_prompt *p, uint32_t id, size_t *len)
{
    (void)p, (void)id;
    *len = 0;
    return "";
}
