/* prompt.h -- the one place snapbank serve turns chat messages into text,
 * text into token ids and token ids back into text: the chat template and
 * the tokenizer as the server uses them.
 *
 * Every tokenization and template rendering of the server goes through
 * these calls, so how they are done can change in this file alone. A chat
 * is rendered to one text plus the byte ranges of it that came from message
 * content (spans); the text is tokenized with the template's control
 * tokens parsed as such and the spans taken literally, so a user who types
 * a control token's text gets ordinary tokens, never the control token.
 *
 * The template is the model's tokenizer.chat_template, read by
 * template/chat_tmpl.h (a family renderer where it recognises one, its Jinja
 * interpreter otherwise), or the family --chat-template names; a model
 * without one needs --chat-template.
 *
 * Thread safety: a srv_prompt is immutable once made; any thread may use it.
 */
#ifndef SB_SRV_PROMPT_H
#define SB_SRV_PROMPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/rt.h"
#include "model/model.h"

/* One chat message: role "system", "user", "assistant" or "tool", and its
 * content; both NUL-terminated UTF-8, borrowed. */
typedef struct srv_msg {
    const char *role;
    const char *content;
} srv_msg;

/* A byte range of a rendered text. */
typedef struct srv_span {
    size_t off, len;
} srv_span;

/* A rendered prompt: text (owned, NUL-terminated) and the sorted, disjoint
 * spans of it that came from message content (owned). */
typedef struct srv_text {
    char *text;
    size_t len;
    srv_span *spans;
    size_t n_spans;
} srv_text;

/* srv_prompt_encode flags */
#define SRV_ENC_BOS 1u     /* BOS first, when the vocabulary asks for it */
#define SRV_ENC_SPECIAL 2u /* control-token texts outside the spans become
                              those tokens */

typedef struct srv_prompt srv_prompt;

/* srv_prompt_new -- the template and tokenizer of model m (borrowed: it
 * must outlive the result). template_name: NULL to take the model's own
 * (its tokenizer.chat_template), or a family name; template_source: NULL,
 * or a Jinja template's text that replaces the model's (rendered by the
 * interpreter; --chat-template-file). On success *out is owned
 * by the caller (srv_prompt_free). Returns: SB_OK; SB_ERR_UNSUPPORTED (the
 * model has no usable tokenizer, no template and no name, or the template
 * is neither known nor renderable: err names the --chat-template option);
 * SB_ERR_INVAL (the template is not UTF-8); SB_ERR_RANGE (over the
 * template size limit); SB_ERR_NOMEM. */
int srv_prompt_new(const sb_rt_model *m, const char *template_name, const char *template_source,
                   srv_prompt **out, sb_rt_err *err);

/* srv_prompt_toolfmt -- the tool-call format the template teaches
 * (tools.h's srv_toolfmt; SRV_TOOLFMT_NONE for a family named without a
 * source). */
int srv_prompt_toolfmt(const srv_prompt *p);

/* srv_prompt_free -- NULL is a no-op. */
void srv_prompt_free(srv_prompt *p);

/* srv_prompt_template -- what renders: the family and its variant
 * ("chatml (qwen2.5)", "llama3 (llama3.1)") or "jinja". */
const char *srv_prompt_template(const srv_prompt *p);

/* srv_prompt_render -- msgs[0, n) as the model's chat prompt, ending with
 * the assistant's turn opened. *out owned by the caller (srv_text_free).
 * Returns: SB_OK; SB_ERR_INVAL (no messages, or the template refused the
 * conversation, e.g. its raise_exception on roles out of order: err says
 * why); SB_ERR_RANGE (a template limit); SB_ERR_UNSUPPORTED (the template
 * needs what the interpreter lacks); SB_ERR_NOMEM. */
int srv_prompt_render(const srv_prompt *p, const srv_msg *msgs, size_t n, srv_text *out,
                      sb_rt_err *err);

/* srv_prompt_render_ex -- the same with extras for the template
 * (chat_tmpl.h's sb_rt_chat_opts): msg_json NULL or n entries, each NULL or
 * a JSON object's text added to that message (tool_calls, tool_call_id,
 * name); vars_json NULL or a JSON object's text of template variables
 * ({"tools": [...]}). With either, the Jinja interpreter renders. Returns:
 * as srv_prompt_render, and SB_ERR_UNSUPPORTED when the template cannot be
 * rendered by the interpreter. */
int srv_prompt_render_ex(const srv_prompt *p, const srv_msg *msgs, size_t n,
                         const char *const *msg_json, const char *vars_json, srv_text *out,
                         sb_rt_err *err);

/* srv_text_free -- free the members; NULL is a no-op. */
void srv_text_free(srv_text *t);

/* srv_prompt_encode -- the ids of text[0, len) with flags (SRV_ENC_*);
 * lit[0, n_lit) are spans taken literally. *ids (malloc'd, caller frees;
 * never NULL on success) and *n receive them. Returns: SB_OK;
 * SB_ERR_NOMEM; SB_ERR_INVAL (the tokenizer refused the text). */
int srv_prompt_encode(const srv_prompt *p, const char *text, size_t len, const srv_span *lit,
                      size_t n_lit, unsigned flags, uint32_t **ids, size_t *n);

/* srv_prompt_turn_end -- what the template writes right after an
 * assistant message's content (e.g. "<|im_end|>\n" for ChatML, "<|eot_id|>"
 * for Llama 3): the engine spells an end-of-generation control token whose
 * text begins it into the session's text (sb_rt_batch_cfg.turn_end_text),
 * so the session's text and tokens stay in step with the next turn's
 * rendering. Borrowed for p's life. */
const char *srv_prompt_turn_end(const srv_prompt *p);

#endif /* SB_SRV_PROMPT_H */
