/* tools.h -- tool calls in a model's answer: which format the chat
 * template teaches the model (read from the template's source), how much
 * of a growing answer is plain content that may be streamed, and the
 * answer split into content and OpenAI tool_calls once it is whole.
 *
 * Formats (the families whose templates carry tools):
 *   hermes   Qwen 2.5 / 3, Hermes 2 Pro, SmolLM3: any content, then one or
 *            more `<tool_call>\n{"name": N, "arguments": {...}}\n</tool_call>`
 *            (the last closing tag may be missing: generation stopped at
 *            the end-of-turn token)
 *   llama3   Llama 3.1 / 3.2: the answer is a JSON object {"name": N,
 *            "parameters": {...}} (or "arguments"), after `<|python_tag|>`
 *            where the model writes one; several separated by ';'
 *   mistral  Mistral Nemo / v0.3: `[TOOL_CALLS]` then a JSON array of
 *            {"name": N, "arguments": {...}, "id": ...}
 * A template whose source names none of these markers has no tool format:
 * a request with tools is refused for it (400), never answered with calls
 * that cannot be parsed.
 *
 * An answer that does not parse as calls (bad JSON, no name) is content,
 * whole: a client then sees what the model wrote. Arguments are passed on
 * as JSON text (OpenAI's `function.arguments` string).
 *
 * Thread safety: no shared state. */
#ifndef SB_SRV_TOOLS_H
#define SB_SRV_TOOLS_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

typedef enum srv_toolfmt {
    SRV_TOOLFMT_NONE = 0,
    SRV_TOOLFMT_HERMES = 1,
    SRV_TOOLFMT_LLAMA3 = 2,
    SRV_TOOLFMT_MISTRAL = 3,
} srv_toolfmt;

/* srv_tools_format -- the tool-call format a chat template's source
 * teaches (NULL or none: SRV_TOOLFMT_NONE). */
srv_toolfmt srv_tools_format(const char *template_source);

/* srv_tools_format_name -- "hermes", "llama3", "mistral", "none". */
const char *srv_tools_format_name(srv_toolfmt f);

/* srv_tools_visible -- of a growing answer text[0, len), the bytes that
 * are content for sure and may be streamed now: for hermes those before
 * the first `<tool_call>` (and not a tail that may begin one); for llama3
 * and mistral all of it once it starts with anything but whitespace, '{',
 * '[' or '<' (which may open a call: then 0 until the answer is whole). */
size_t srv_tools_visible(srv_toolfmt f, const char *text, size_t len);

/* srv_tools_parse -- the whole answer text[0, len) split: *calls receives
 * a new JSON array of OpenAI tool calls ({"id", "type": "function",
 * "function": {"name", "arguments"}}, ids "call_" + id_seed's hex and the
 * call's index; see below for mistral), or NULL when the answer holds none; *content_len the
 * bytes of content, which are text[0, *content_len) (for hermes the text
 * before the first call; 0 for the others when calls were found; len
 * when none were). Mistral's ids are 9 letters and digits, as its
 * templates demand of the calls sent back (the model's own id when it
 * wrote one so). Returns: SB_OK; SB_ERR_NOMEM. */
int srv_tools_parse(srv_toolfmt f, const char *text, size_t len, unsigned long long id_seed,
                    json_t **calls, size_t *content_len);

#endif /* SB_SRV_TOOLS_H */
