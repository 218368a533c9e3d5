/* chat_family.c -- built-in renderers for the chat formats real GGUF files
 * carry, one per template variant a vendor ships. Each renders a plain
 * conversation (role and content strings) exactly as jinja2 renders that
 * vendor's template (tests/data/templates holds each one; the tests compare
 * byte for byte), including the template's raise_exception messages. They
 * share the interpreter's strings, so content keeps its taint through trim,
 * split and JSON quoting, and the spans come out the same way.
 *
 *   family   variant        template (tests/data/templates/)
 *   chatml   chatml         OpenHermes 2.5: <|im_start|>role\ncontent<|im_end|>\n
 *            qwen2          + a default system prompt (Qwen2 GGUFs)
 *            smollm2        + SmolLM2's default system prompt
 *            qwen2.5        Qwen2.5 Instruct: default system prompt, tool turns merged
 *            qwen3          Qwen3: <think> blocks of the last turns, tool turns merged
 *   llama3   llama3         Meta Llama 3 Instruct (bos, trimmed content)
 *            llama3-gen     the same, assistant header only when asked
 *            llama3.1       Llama 3.1 / 3.2 / 3.3: dated system header
 *   llama2   llama2         Llama 2 chat: <<SYS>> inside the first [INST]
 *   mistral  mistral-v1     Mistral 7B Instruct v0.2 with a system prompt
 *            mistral-v0.1   Mistral 7B Instruct v0.1: user / assistant only
 *            mistral-nemo   Mistral Nemo (v3 tekken): system in the last [INST]
 *   gemma    gemma2         Gemma 2 (bos first)
 *            gemma          Gemma 7B it
 *   phi3     phi3.5         Phi-3.5 mini
 *            phi3-mini      Phi-3 mini 4k (GGUF): bos, user turns open the reply
 *            phi3-medium    the same without bos
 *            phi3-small     <|role|> for every role, eos when not generating
 *            phi3-vision    <|role|> for every role
 */
#include <string.h>

#include "template/chat_family.h"

/* ---- pieces -------------------------------------------------------------------------- */

static void lit(jctx *c, const char *s)
{
    sb_rt_jbuf_put(c, c->out, s, strlen(s), false);
}

static void put(jctx *c, const jstr *s)
{
    sb_rt_jbuf_put_str(c, c->out, s);
}

static bool role_is(const cf_msg *m, const char *r)
{
    return sb_rt_js_eq(m->role, &(jstr){ .s = r, .len = strlen(r) });
}

static jstr *trim(jctx *c, const jstr *s)
{
    return sb_rt_js_strip(c, s, NULL, 'b');
}

_Noreturn static void raise(jctx *c, const char *msg)
{
    sb_rt_jfail(c, SB_ERR_INVAL, "\x01%s", msg);
}

#define ALTERNATE "Conversation roles must alternate user/assistant/user/assistant/..."

/* ---- chatml -------------------------------------------------------------------------- */

static void chatml_turn(jctx *c, const cf_msg *m)
{
    lit(c, "<|im_start|>");
    put(c, m->role);
    lit(c, "\n");
    put(c, m->content);
    lit(c, "<|im_end|>\n");
}

static void chatml_with_default(jctx *c, const cf_in *in, const char *sys)
{
    for (size_t i = 0; i < in->n; i++) {
        if (i == 0 && sys && !role_is(&in->m[0], "system")) {
            lit(c, "<|im_start|>system\n");
            lit(c, sys);
            lit(c, "<|im_end|>\n");
        }
        chatml_turn(c, &in->m[i]);
    }
    if (in->gen)
        lit(c, "<|im_start|>assistant\n");
}

static void r_chatml(jctx *c, const cf_in *in)
{
    chatml_with_default(c, in, NULL);
}

static void r_qwen2(jctx *c, const cf_in *in)
{
    chatml_with_default(c, in, "You are a helpful assistant");
}

static void r_smollm2(jctx *c, const cf_in *in)
{
    chatml_with_default(c, in, "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
}

/* Qwen's tool turns: consecutive tool messages share one user turn */
static void qwen_tool(jctx *c, const cf_in *in, size_t i)
{
    if (i == 0 || !role_is(&in->m[i - 1], "tool"))
        lit(c, "<|im_start|>user");
    lit(c, "\n<tool_response>\n");
    put(c, in->m[i].content);
    lit(c, "\n</tool_response>");
    if (i + 1 == in->n || !role_is(&in->m[i + 1], "tool"))
        lit(c, "<|im_end|>\n");
}

static void r_qwen25(jctx *c, const cf_in *in)
{
    if (role_is(&in->m[0], "system")) {
        lit(c, "<|im_start|>system\n");
        put(c, in->m[0].content);
        lit(c, "<|im_end|>\n");
    } else {
        lit(c, "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
               "assistant.<|im_end|>\n");
    }
    for (size_t i = 0; i < in->n; i++) {
        const cf_msg *m = &in->m[i];
        if (role_is(m, "user") || (role_is(m, "system") && i > 0) || role_is(m, "assistant"))
            chatml_turn(c, m);
        else if (role_is(m, "tool"))
            qwen_tool(c, in, i);
    }
    if (in->gen)
        lit(c, "<|im_start|>assistant\n");
}

static bool starts(const jstr *s, const char *p)
{
    size_t n = strlen(p);
    return s->len >= n && !memcmp(s->s, p, n);
}

static bool ends(const jstr *s, const char *p)
{
    size_t n = strlen(p);
    return s->len >= n && !memcmp(s->s + s->len - n, p, n);
}

static jstr *strip_chars(jctx *c, const jstr *s, const char *chars, char which)
{
    return sb_rt_js_strip(c, s, sb_rt_js_lit(c, chars), which);
}

static void r_qwen3(jctx *c, const cf_in *in)
{
    if (role_is(&in->m[0], "system")) {
        lit(c, "<|im_start|>system\n");
        put(c, in->m[0].content);
        lit(c, "<|im_end|>\n");
    }
    /* the last user turn that is not a tool response */
    size_t last_query = in->n - 1;
    for (size_t k = in->n; k-- > 0;) {
        const cf_msg *m = &in->m[k];
        if (role_is(m, "user") &&
            !(starts(m->content, "<tool_response>") && ends(m->content, "</tool_response>"))) {
            last_query = k;
            break;
        }
    }
    jstr *think_end = sb_rt_js_lit(c, "</think>"), *think = sb_rt_js_lit(c, "<think>");
    for (size_t i = 0; i < in->n; i++) {
        const cf_msg *m = &in->m[i];
        if (role_is(m, "user") || (role_is(m, "system") && i > 0)) {
            chatml_turn(c, m);
        } else if (role_is(m, "assistant")) {
            const jstr *content = m->content;
            jstr *reasoning = sb_rt_js_lit(c, "");
            if (sb_rt_js_find(c, m->content, think_end, 0) >= 0) {
                jlist *parts = sb_rt_js_split(c, m->content, think_end, -1, false);
                content = strip_chars(c, parts->v[parts->n - 1].s, "\n", 'l');
                jstr *r = strip_chars(c, parts->v[0].s, "\n", 'r');
                jlist *p2 = sb_rt_js_split(c, r, think, -1, false);
                reasoning = strip_chars(c, p2->v[p2->n - 1].s, "\n", 'l');
            }
            lit(c, "<|im_start|>");
            put(c, m->role);
            lit(c, "\n");
            if (i > last_query && (i + 1 == in->n || reasoning->len)) {
                lit(c, "<think>\n");
                put(c, strip_chars(c, reasoning, "\n", 'b'));
                lit(c, "\n</think>\n\n");
                put(c, strip_chars(c, content, "\n", 'l'));
            } else {
                put(c, content);
            }
            lit(c, "<|im_end|>\n");
        } else if (role_is(m, "tool")) {
            qwen_tool(c, in, i);
        }
    }
    if (in->gen)
        lit(c, "<|im_start|>assistant\n");
}

/* ---- llama3 -------------------------------------------------------------------------- */

static void llama3_header(jctx *c, const jstr *role)
{
    lit(c, "<|start_header_id|>");
    put(c, role);
    lit(c, "<|end_header_id|>\n\n");
}

static void llama3_common(jctx *c, const cf_in *in, bool gen)
{
    for (size_t i = 0; i < in->n; i++) {
        if (i == 0)
            lit(c, in->bos);
        llama3_header(c, in->m[i].role);
        put(c, trim(c, in->m[i].content));
        lit(c, "<|eot_id|>");
    }
    if (gen)
        lit(c, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static void r_llama3(jctx *c, const cf_in *in)
{
    llama3_common(c, in, true);
}

static void r_llama3_gen(jctx *c, const cf_in *in)
{
    llama3_common(c, in, in->gen);
}

static void r_llama31(jctx *c, const cf_in *in)
{
    size_t first = 0;
    lit(c, in->bos);
    lit(c, "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
           "Today Date: 26 Jul 2024\n\n");
    if (role_is(&in->m[0], "system")) {
        put(c, trim(c, in->m[0].content));
        first = 1;
    }
    lit(c, "<|eot_id|>");
    for (size_t i = first; i < in->n; i++) {
        const cf_msg *m = &in->m[i];
        if (role_is(m, "ipython") || role_is(m, "tool")) {
            /* a str is iterable, so the template writes it as JSON */
            lit(c, "<|start_header_id|>ipython<|end_header_id|>\n\n");
            sb_rt_js_json(c, c->out, m->content, false);
        } else {
            llama3_header(c, m->role);
            put(c, trim(c, m->content));
        }
        lit(c, "<|eot_id|>");
    }
    if (in->gen)
        lit(c, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

/* ---- llama2 / mistral ---------------------------------------------------------------- */

static void r_llama2(jctx *c, const cf_in *in)
{
    size_t first = role_is(&in->m[0], "system") ? 1 : 0;
    for (size_t i = first; i < in->n; i++) {
        const cf_msg *m = &in->m[i];
        size_t k = i - first;
        if (role_is(m, "user") != (k % 2 == 0))
            raise(c, ALTERNATE);
        const jstr *content = m->content;
        if (k == 0 && first) {
            jbuf *b = sb_rt_jbuf_new(c);
            sb_rt_jbuf_put(c, b, "<<SYS>>\n", 8, false);
            sb_rt_jbuf_put_str(c, b, in->m[0].content);
            sb_rt_jbuf_put(c, b, "\n<</SYS>>\n\n", 11, false);
            sb_rt_jbuf_put_str(c, b, m->content);
            content = sb_rt_jbuf_take(c, b);
        }
        if (role_is(m, "user")) {
            lit(c, in->bos);
            lit(c, "[INST] ");
            put(c, trim(c, content));
            lit(c, " [/INST]");
        } else if (role_is(m, "assistant")) {
            lit(c, " ");
            put(c, trim(c, content));
            lit(c, " ");
            lit(c, in->eos);
        }
    }
}

#define AFTER_SYSTEM "After the optional system message, conversation roles must alternate " \
                     "user/assistant/user/assistant/..."
#define ONLY_UA_SYSTEM "Only user and assistant roles are supported, with the exception of an " \
                       "initial optional system message!"

static void r_mistral_v1(jctx *c, const cf_in *in)
{
    size_t first = role_is(&in->m[0], "system") ? 1 : 0;
    lit(c, in->bos);
    for (size_t i = first; i < in->n; i++) {
        const cf_msg *m = &in->m[i];
        if (role_is(m, "user") != ((i - first) % 2 == 0))
            raise(c, AFTER_SYSTEM);
        if (role_is(m, "user")) {
            lit(c, " [INST] ");
            if (i == first && first) {
                put(c, in->m[0].content);
                lit(c, "\n\n");
            }
            put(c, m->content);
            lit(c, " [/INST]");
        } else if (role_is(m, "assistant")) {
            lit(c, " ");
            put(c, m->content);
            lit(c, in->eos);
        } else {
            raise(c, ONLY_UA_SYSTEM);
        }
    }
}

static void r_mistral_v01(jctx *c, const cf_in *in)
{
    lit(c, in->bos);
    for (size_t i = 0; i < in->n; i++) {
        const cf_msg *m = &in->m[i];
        if (role_is(m, "user") != (i % 2 == 0))
            raise(c, ALTERNATE);
        if (role_is(m, "user")) {
            lit(c, "[INST] ");
            put(c, m->content);
            lit(c, " [/INST]");
        } else if (role_is(m, "assistant")) {
            put(c, m->content);
            lit(c, in->eos);
        } else {
            raise(c, "Only user and assistant roles are supported!");
        }
    }
}

static void r_mistral_nemo(jctx *c, const cf_in *in)
{
    size_t first = role_is(&in->m[0], "system") ? 1 : 0;
    /* the alternation check skips tool turns */
    size_t idx = 0;
    for (size_t i = first; i < in->n; i++) {
        const cf_msg *m = &in->m[i];
        if (role_is(m, "tool") || role_is(m, "tool_results"))
            continue;
        if (role_is(m, "user") != (idx % 2 == 0))
            raise(c, AFTER_SYSTEM);
        idx++;
    }
    lit(c, in->bos);
    for (size_t i = first; i < in->n; i++) {
        const cf_msg *m = &in->m[i];
        if (role_is(m, "user")) {
            lit(c, "[INST]");
            if (i + 1 == in->n && first) {
                put(c, in->m[0].content);
                lit(c, "\n\n");
            }
            put(c, m->content);
            lit(c, "[/INST]");
        } else if (role_is(m, "assistant")) {
            put(c, m->content);
            lit(c, in->eos);
        } else if (role_is(m, "tool_results") || role_is(m, "tool")) {
            raise(c, "Tool call IDs should be alphanumeric strings with length 9!");
        } else {
            raise(c, ONLY_UA_SYSTEM);
        }
    }
}

/* ---- gemma --------------------------------------------------------------------------- */

static void gemma_common(jctx *c, const cf_in *in, bool bos)
{
    if (bos)
        lit(c, in->bos);
    if (role_is(&in->m[0], "system"))
        raise(c, "System role not supported");
    for (size_t i = 0; i < in->n; i++) {
        const cf_msg *m = &in->m[i];
        if (role_is(m, "user") != (i % 2 == 0))
            raise(c, ALTERNATE);
        lit(c, "<start_of_turn>");
        if (role_is(m, "assistant"))
            lit(c, "model");
        else
            put(c, m->role);
        lit(c, "\n");
        put(c, trim(c, m->content));
        lit(c, "<end_of_turn>\n");
    }
    if (in->gen)
        lit(c, "<start_of_turn>model\n");
}

static void r_gemma2(jctx *c, const cf_in *in)
{
    gemma_common(c, in, true);
}

static void r_gemma(jctx *c, const cf_in *in)
{
    gemma_common(c, in, false);
}

/* ---- phi3 ---------------------------------------------------------------------------- */

static void phi_turn(jctx *c, const char *tag, const jstr *content)
{
    lit(c, tag);
    lit(c, "\n");
    put(c, content);
    lit(c, "<|end|>\n");
}

static void r_phi35(jctx *c, const cf_in *in)
{
    for (size_t i = 0; i < in->n; i++) {
        const cf_msg *m = &in->m[i];
        if (role_is(m, "system") && m->content->len)
            phi_turn(c, "<|system|>", m->content);
        else if (role_is(m, "user"))
            phi_turn(c, "<|user|>", m->content);
        else if (role_is(m, "assistant"))
            phi_turn(c, "<|assistant|>", m->content);
    }
    lit(c, in->gen ? "<|assistant|>\n" : in->eos);
}

static void phi3_mini_common(jctx *c, const cf_in *in, bool bos)
{
    if (bos)
        lit(c, in->bos);
    for (size_t i = 0; i < in->n; i++) {
        const cf_msg *m = &in->m[i];
        if (role_is(m, "user")) {
            phi_turn(c, "<|user|>", m->content);
            lit(c, "<|assistant|>\n");
        } else if (role_is(m, "assistant")) {
            put(c, m->content);
            lit(c, "<|end|>\n");
        }
    }
}

static void r_phi3_mini(jctx *c, const cf_in *in)
{
    phi3_mini_common(c, in, true);
}

static void r_phi3_medium(jctx *c, const cf_in *in)
{
    phi3_mini_common(c, in, false);
}

static void phi3_roles(jctx *c, const cf_in *in)
{
    for (size_t i = 0; i < in->n; i++) {
        lit(c, "<|");
        put(c, in->m[i].role);
        lit(c, "|>\n");
        put(c, in->m[i].content);
        lit(c, "<|end|>\n");
    }
}

static void r_phi3_small(jctx *c, const cf_in *in)
{
    lit(c, in->bos);
    phi3_roles(c, in);
    lit(c, in->gen ? "<|assistant|>\n" : in->eos);
}

static void r_phi3_vision(jctx *c, const cf_in *in)
{
    phi3_roles(c, in);
    if (in->gen && !role_is(&in->m[in->n - 1], "assistant"))
        lit(c, "<|assistant|>\n");
}

/* ---- the table ----------------------------------------------------------------------- */

/* each family's first variant is its default */
const cf_variant sb_rt_cf_variants[] = {
    { "chatml", "chatml", r_chatml },
    { "chatml", "qwen2", r_qwen2 },
    { "chatml", "smollm2", r_smollm2 },
    { "chatml", "qwen2.5", r_qwen25 },
    { "chatml", "qwen3", r_qwen3 },
    { "llama3", "llama3", r_llama3 },
    { "llama3", "llama3-gen", r_llama3_gen },
    { "llama3", "llama3.1", r_llama31 },
    { "llama2", "llama2", r_llama2 },
    { "mistral", "mistral-v1", r_mistral_v1 },
    { "mistral", "mistral-v0.1", r_mistral_v01 },
    { "mistral", "mistral-nemo", r_mistral_nemo },
    { "gemma", "gemma2", r_gemma2 },
    { "gemma", "gemma", r_gemma },
    { "phi3", "phi3.5", r_phi35 },
    { "phi3", "phi3-mini", r_phi3_mini },
    { "phi3", "phi3-medium", r_phi3_medium },
    { "phi3", "phi3-small", r_phi3_small },
    { "phi3", "phi3-vision", r_phi3_vision },
};

const size_t sb_rt_cf_n_variants = sizeof sb_rt_cf_variants / sizeof sb_rt_cf_variants[0];

/* signatures, in the order they are tried */
static bool has(const char *src, const char *s)
{
    return strstr(src, s) != NULL;
}

const char *sb_rt_cf_detect(const char *src)
{
    if (!src)
        return NULL;
    if (has(src, "<|start_header_id|>") && has(src, "<|eot_id|>"))
        return "llama3";
    if (has(src, "<|im_start|>"))
        return "chatml";
    if (has(src, "<start_of_turn>"))
        return "gemma";
    if (has(src, "<|end|>") && (has(src, "<|user|>") || has(src, "<|assistant|>")))
        return "phi3";
    if (has(src, "[INST]") && has(src, "<<SYS>>"))
        return "llama2";
    if (has(src, "[INST]"))
        return "mistral";
    return NULL;
}

bool sb_rt_cf_is_family(const char *name)
{
    for (size_t i = 0; i < sb_rt_cf_n_variants; i++)
        if (!strcmp(sb_rt_cf_variants[i].family, name))
            return true;
    return false;
}

/* ---- running one ----------------------------------------------------------------------- */

typedef struct cf_job {
    const cf_variant *v;
    const sb_rt_chat_msg *msgs;
    size_t n;
    bool gen;
    const char *bos, *eos;
} cf_job;

static void cf_body(jctx *c, void *arg)
{
    const cf_job *j = arg;
    cf_msg *m = sb_rt_ja_alloc(&c->arena, j->n * sizeof *m);
    for (size_t i = 0; i < j->n; i++) {
        m[i].role = sb_rt_jinja_input_str(c, j->msgs[i].role, "the role", i);
        m[i].content = sb_rt_jinja_input_str(c, j->msgs[i].content, "the content", i);
    }
    cf_in in = { .m = m, .n = j->n, .gen = j->gen, .bos = j->bos, .eos = j->eos };
    j->v->render(c, &in);
}

int sb_rt_cf_render(const cf_variant *v, const sb_rt_chat_msg *msgs, size_t n, bool gen,
                    const char *bos, const char *eos, const sb_rt_chat_limits *lim,
                    sb_rt_chat_text *out, sb_rt_err *err)
{
    cf_job j = { .v = v, .msgs = msgs, .n = n, .gen = gen, .bos = bos, .eos = eos };
    return sb_rt_jinja_run(lim, NULL, cf_body, &j, out, err);
}
