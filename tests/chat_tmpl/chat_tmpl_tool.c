/* chat_tmpl_tool.c -- a driver for runtime/template/chat_tmpl.h that
 * compare.py talks to through a pipe: it reads requests on stdin, renders
 * them, and writes the results on stdout, so one process serves thousands
 * of renders.
 *
 * A request is a sequence of fields, each `KEY LEN\n` then LEN bytes then
 * `\n`:
 *   source, name ("" detects), bos, eos    the template (made again only
 *                                          when one of these changes); name
 *                                          "raw" parses it with the interpreter
 *                                          alone (jinja.h), without the probes
 *                                          sb_rt_chat_tmpl_new makes, for
 *                                          templates that need variables
 *   gen ("0"/"1"), vars (JSON)             the render's options
 *   role, content, null (no content), msg (JSON extras of the last message)
 *   limits ("source output memory iterations steps depth", 0 = default)
 *   render (LEN 0)                         render now; the messages reset
 * A reply is `ok FAMILY VARIANT LEN\n` TEXT `\nspans N OFF LEN ...\n`, or
 * `err CODE LEN\n` MESSAGE `\n`.
 * Exit status: 0 at the end of input, 2 on a malformed request. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/chat_tmpl.h"
#include "template/jinja.h"

typedef struct field {
    char *s;
    size_t n;
    bool set;
} field;

static void field_set(field *f, char *s, size_t n)
{
    free(f->s);
    f->s = s;
    f->n = n;
    f->set = true;
}

static bool field_eq(const field *a, const field *b)
{
    return a->set == b->set && a->n == b->n && (!a->n || !memcmp(a->s, b->s, a->n));
}

static char *dup_field(const field *f)
{
    char *s = malloc(f->n + 1);
    if (!s)
        exit(2);
    if (f->n)
        memcpy(s, f->s, f->n);
    s[f->n] = '\0';
    return s;
}

int main(void)
{
    field source = { 0 }, name = { 0 }, bos = { 0 }, eos = { 0 }, vars = { 0 }, limits = { 0 };
    field made_source = { 0 }, made_name = { 0 }, made_bos = { 0 }, made_eos = { 0 },
          made_limits = { 0 };
    sb_rt_chat_tmpl *t = NULL;
    jtmpl *raw = NULL;
    int made_rc = -1000;
    sb_rt_err made_err = { 0 };
    bool gen = false;
    size_t n = 0, cap = 0;
    sb_rt_chat_msg *msgs = NULL;
    char **msg_json = NULL;
    char key[64];
    size_t len;
    while (scanf("%63s %zu", key, &len) == 2) {
        if (getchar() != '\n')
            return 2;
        char *buf = malloc(len + 1);
        if (!buf || fread(buf, 1, len, stdin) != len || getchar() != '\n')
            return 2;
        buf[len] = '\0';
        if (!strcmp(key, "source")) {
            field_set(&source, buf, len);
        } else if (!strcmp(key, "name")) {
            field_set(&name, buf, len);
        } else if (!strcmp(key, "bos")) {
            field_set(&bos, buf, len);
        } else if (!strcmp(key, "eos")) {
            field_set(&eos, buf, len);
        } else if (!strcmp(key, "vars")) {
            field_set(&vars, buf, len);
        } else if (!strcmp(key, "limits")) {
            field_set(&limits, buf, len);
        } else if (!strcmp(key, "gen")) {
            gen = buf[0] == '1';
            free(buf);
        } else if (!strcmp(key, "role") || !strcmp(key, "content") || !strcmp(key, "null") ||
                   !strcmp(key, "msg")) {
            if (!strcmp(key, "role")) {
                if (n == cap) {
                    cap = cap ? cap * 2 : 16;
                    msgs = realloc(msgs, cap * sizeof *msgs);
                    msg_json = realloc(msg_json, cap * sizeof *msg_json);
                    if (!msgs || !msg_json)
                        return 2;
                }
                msgs[n].role = buf;
                msgs[n].content = NULL;
                msg_json[n] = NULL;
                n++;
            } else if (!n) {
                return 2;
            } else if (!strcmp(key, "content")) {
                msgs[n - 1].content = buf;
            } else if (!strcmp(key, "msg")) {
                msg_json[n - 1] = buf;
            } else {
                free(buf);
            }
        } else if (!strcmp(key, "render")) {
            free(buf);
            if (!t || !field_eq(&source, &made_source) || !field_eq(&name, &made_name) ||
                !field_eq(&bos, &made_bos) || !field_eq(&eos, &made_eos) ||
                !field_eq(&limits, &made_limits)) {
                sb_rt_chat_tmpl_free(t);
                t = NULL;
                sb_rt_jinja_free(raw);
                raw = NULL;
                char *src = source.set ? dup_field(&source) : NULL;
                char *nm = name.set && name.n ? dup_field(&name) : NULL;
                char *b = bos.set ? dup_field(&bos) : NULL, *e = eos.set ? dup_field(&eos) : NULL;
                sb_rt_chat_limits lim = { 0 };
                if (limits.set) {
                    unsigned long long v[6] = { 0 };
                    char *l = dup_field(&limits);
                    sscanf(l, "%llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
                           &v[5]);
                    free(l);
                    lim.max_source_bytes = v[0];
                    lim.max_output_bytes = v[1];
                    lim.max_memory_bytes = v[2];
                    lim.max_iterations = v[3];
                    lim.max_steps = v[4];
                    lim.max_depth = (uint32_t)v[5];
                }
                if (nm && !strcmp(nm, "raw")) {
                    sb_rt_chat_limits full;
                    sb_rt_chat_limits_default(&full);
                    made_rc =
                        src ? sb_rt_jinja_parse(src, strlen(src), &full, &raw, &made_err) : -1;
                } else {
                    made_rc = sb_rt_chat_tmpl_new_ex(src, nm, b, e, &lim, &t, &made_err);
                }
                free(src);
                free(nm);
                free(b);
                free(e);
                field *pairs[][2] = { { &made_source, &source }, { &made_name, &name },
                                      { &made_bos, &bos }, { &made_eos, &eos },
                                      { &made_limits, &limits } };
                for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++) {
                    free(pairs[k][0]->s);
                    *pairs[k][0] = *pairs[k][1];
                    pairs[k][0]->s = pairs[k][1]->set ? dup_field(pairs[k][1]) : NULL;
                }
            }
            if (made_rc != 0) {
                printf("err %d %zu\n%s\n", made_rc, strlen(made_err.msg), made_err.msg);
            } else {
                bool any_json = false;
                for (size_t i = 0; i < n; i++)
                    any_json |= msg_json[i] != NULL;
                sb_rt_chat_opts o = { .add_generation_prompt = gen,
                                      .msg_json = any_json ? (const char *const *)msg_json : NULL,
                                      .vars_json = vars.set ? vars.s : NULL };
                sb_rt_chat_text x;
                sb_rt_err err = { 0 };
                int rc;
                if (raw) {
                    jinja_input in = { .msgs = msgs, .n_msgs = n, .add_generation_prompt = gen,
                                       .msg_json = o.msg_json, .vars_json = o.vars_json,
                                       .bos = bos.set ? bos.s : "", .eos = eos.set ? eos.s : "" };
                    rc = n ? sb_rt_jinja_render(raw, &in, &x, &err) : -1;
                } else {
                    rc = sb_rt_chat_render_ex(t, msgs, n, &o, &x, &err);
                }
                if (rc != 0) {
                    printf("err %d %zu\n%s\n", rc, strlen(err.msg), err.msg);
                } else {
                    printf("ok %s %s %zu\n", raw ? "raw" : sb_rt_chat_tmpl_name(t),
                           raw ? "raw" : sb_rt_chat_tmpl_variant(t), x.len);
                    fwrite(x.text, 1, x.len, stdout);
                    printf("\nspans %zu", x.n_spans);
                    for (size_t i = 0; i < x.n_spans; i++)
                        printf(" %zu %zu", x.spans[i].off, x.spans[i].len);
                    printf("\n");
                    sb_rt_chat_text_free(&x);
                }
            }
            fflush(stdout);
            for (size_t i = 0; i < n; i++) {
                free((char *)msgs[i].role);
                free((char *)msgs[i].content);
                free(msg_json[i]);
            }
            n = 0;
            field_set(&vars, NULL, 0);
            vars.set = false;
            gen = false;
        } else {
            free(buf);
            return 2;
        }
    }
    sb_rt_chat_tmpl_free(t);
    sb_rt_jinja_free(raw);
    field *all[] = { &source, &name, &bos, &eos, &vars, &limits, &made_source, &made_name,
                     &made_bos, &made_eos, &made_limits };
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        free(all[k]->s);
    free(msgs);
    free(msg_json);
    return 0;
}
