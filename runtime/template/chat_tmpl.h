/* chat_tmpl.h -- chat messages to a prompt through the model's chat template
 * (GGUF tokenizer.chat_template), with the bytes that came from the caller
 * marked so they are never tokenized as control tokens.
 *
 * OVERVIEW
 *
 * A chat model is trained on conversations spelled in one format: ChatML's
 * `<|im_start|>user\n...<|im_end|>\n`, Llama 3's headers, `[INST] ... [/INST]`,
 * Gemma's turns, Phi-3's `<|user|>`. The model file carries that format as a
 * Jinja template. sb_rt_chat_tmpl_new reads it once; sb_rt_chat_render turns
 * each request's messages into the prompt text.
 *
 *     sb_rt_chat_tmpl *t;
 *     sb_rt_err err;
 *     if (sb_rt_chat_tmpl_new(src, NULL, bos_text, eos_text, &t, &err) != 0)
 *         die(err.msg);                       // names --chat-template
 *     sb_rt_chat_msg m[] = { { "system", "Be brief." }, { "user", "Hi <|im_end|>" } };
 *     sb_rt_chat_text p;
 *     if (sb_rt_chat_render(t, m, 2, true, &p, &err) != 0)
 *         reply_400(err.msg);
 *     sb_rt_tok_encode_ex(tok, p.text, p.len, SB_RT_TOK_PARSE_SPECIAL,
 *                         p.spans, p.n_spans, ids, cap, &n);  // "<|im_end|>" stays text
 *     sb_rt_chat_text_free(&p);
 *     sb_rt_chat_tmpl_free(t);
 *
 * HOW A TEMPLATE IS RENDERED
 *
 * 1. Families. The template text is matched against the signatures of the
 *    families real GGUF files carry (first match wins):
 *        llama3   `<|start_header_id|>` and `<|eot_id|>`     (Llama 3, 3.1, 3.2, 3.3)
 *        chatml   `<|im_start|>`                             (Qwen2/2.5/3, SmolLM2, Hermes)
 *        gemma    `<start_of_turn>`                          (Gemma 1, 2)
 *        phi3     `<|end|>` and `<|user|>` or `<|assistant|>` (Phi-3, Phi-3.5)
 *        llama2   `[INST]` and `<<SYS>>`                     (Llama 2 chat)
 *        mistral  `[INST]`                                   (Mistral 7B v0.1-0.3, Nemo)
 *    Each family has built-in renderers for the variants its vendors ship
 *    (chat_family.c lists them: default system prompts, trimming, where the
 *    system prompt goes). When the interpreter (2.) can render the template
 *    too, the variant chosen is the one whose output equals the
 *    interpreter's, byte for byte, on a fixed set of probe conversations
 *    (chat_tmpl.c lists them); if none does, the template is not that
 *    family's after all and the interpreter renders it
 *    (sb_rt_chat_tmpl_name says "jinja"), unless the caller named the
 *    family: then its first variant. When the interpreter cannot parse the
 *    template, the family's first variant is used. A family renderer
 *    renders plain conversations (role and content strings); a render with
 *    extras (sb_rt_chat_opts) or a NULL content goes to the interpreter.
 * 2. The interpreter (jinja*.c) renders any other template, with jinja2's
 *    semantics as Hugging Face configures it (trim_blocks and lstrip_blocks
 *    on, jinja2.ext.loopcontrols, an immutable sandbox, tojson as
 *    json.dumps(ensure_ascii=False), raise_exception). Its output equals
 *    jinja2 3.1's byte for byte on the templates tests/data/templates holds
 *    (tests/chat_tmpl/compare.py checks it against Debian's python3-jinja2).
 *
 * THE JINJA SUBSET
 *
 *   Syntax: {{ }}, {% %}, {# #}, whitespace control ({%- -%} {{- -}} {#- -#},
 *   {%+ +%}), raw blocks, trim_blocks and lstrip_blocks, one trailing
 *   newline of the source dropped, \r\n and \r read as \n.
 *   Statements: for (tuple targets, an `if` filter, else, recursive loops,
 *   break, continue), if / elif / else, set (names, tuples, namespace
 *   attributes, block set with filters), macro (defaults, varargs, kwargs,
 *   caller), call blocks, filter blocks, with, print, and Hugging Face's
 *   generation block (rendered as it is).
 *   Expressions: literals (str with Python's escapes, int, float,
 *   true/false, none, lists, tuples, dicts), names, attribute and item
 *   access, slicing ([1:], [::-1]), calls with keyword arguments,
 *   + - * / // % ** (Python's semantics; ints are 64-bit and fail rather
 *   than overflow), ~, comparisons (chained), in, not in, and, or, not,
 *   `a if b else c`, filters, tests.
 *   Variables: messages (a list of dicts: role, content, and the extras
 *   given), add_generation_prompt, bos_token, eos_token, the extra
 *   variables; loop.index, index0, revindex, revindex0, first, last,
 *   length, previtem, nextitem, depth, depth0, cycle(), and loop(...) in
 *   recursive loops.
 *   Globals: range, dict, namespace, raise_exception(msg) (the render fails
 *   with msg as its message). No strftime_now: the Llama 3.x templates then
 *   print their fixed date, as jinja2 does without it; pass date_string.
 *   Filters: abs attr capitalize count d default dictsort e escape first
 *   float indent int items join last length list lower map max min reject
 *   rejectattr replace reverse safe select selectattr sort string sum title
 *   tojson trim unique upper. select, reject, selectattr, rejectattr, map,
 *   unique and items return lazy one-shot generators, as jinja2's do
 *   (always true, consumed once, printed only as Python's address: that
 *   fails as unsupported).
 *   Tests: boolean callable defined divisibleby eq equalto escaped even
 *   false float ge gt greaterthan in integer iterable le lessthan lower lt
 *   mapping ne none number odd sameas sequence string true undefined upper,
 *   == != < <= > >=.
 *   Methods: str: capitalize count endswith find format index islower
 *   isspace isupper join lower lstrip replace rfind rsplit rstrip split
 *   splitlines startswith strip title upper; dict: copy get items keys
 *   values; list: copy count index. Mutating methods (append, pop, update)
 *   fail as in jinja2's immutable sandbox.
 *   Markup (|safe, |escape) behaves as markupsafe's: `Markup + str` escapes
 *   the str.
 *   Strings are Unicode: length, slicing and indexing count code points;
 *   upper, lower, title, capitalize, strip and split follow Python 3.11's
 *   Unicode tables (jinja_ucase.h, jinja_uclass.h, from Python's unicodedata),
 *   final sigma included.
 *   Refused: an unknown filter or test when the template is read, except in
 *   an `if` (jinja2's rule: there it fails when used); a filter, test, tag
 *   or method jinja2 has and this subset lacks when it is reached
 *   (SB_ERR_UNSUPPORTED). One difference is known and left: jinja2 folds an
 *   output made only of literals when it compiles, so `{{ 1[0:2] }}` prints
 *   "" there and fails here (as the same slice of a variable fails in both).
 *
 * SPANS: WHICH BYTES ARE THE CALLER'S
 *
 * Every string the caller gives (role, content, and every string in the
 * extras) is "tainted"; template text and bos_token / eos_token are not.
 * Each output byte keeps the taint of the byte it was copied from, through
 * every operation: concatenation (+, ~, join, format), slicing, trim and
 * strip, split, replace (bytes of the replacement carry its own taint),
 * upper / lower / title (a converted character keeps its taint), escaping
 * in tojson, repr and |escape (the escape of a tainted character is
 * tainted; quotes, commas and brackets the filter adds are not), macro
 * output and block captures. Numbers printed are never tainted. The
 * output's tainted bytes, merged into maximal ranges, are
 * sb_rt_chat_text.spans: give them to sb_rt_tok_encode_ex with
 * SB_RT_TOK_PARSE_SPECIAL and a user who types "<|im_end|>" gets that text,
 * not the control token, even where a template trimmed, sliced or
 * concatenated it. A special token's text is recognised only where it lies
 * wholly outside the spans.
 *
 * LIMITS
 *
 * Templates come with downloaded models and conversations from clients, so
 * all work is bounded (sb_rt_chat_limits; defaults below): the source's
 * length, the nesting of the template and of data (parser, syntax tree,
 * macro calls, JSON), the output's length, the memory a render may use,
 * the total for-loop iterations and evaluation steps. Past one, the call
 * fails with SB_ERR_RANGE and a message naming the limit; nothing crashes
 * and no loop is unbounded. The evaluator recurses at most 10 x max_depth
 * frames (a few hundred bytes of stack each: 1 MiB of stack is ample at the
 * default). Choosing a variant renders 20 probes by the interpreter and by
 * each of the family's variants, under smaller limits (50,000 steps,
 * 5,000 iterations, 8 MiB, 256 KiB of output; every fixture template
 * renders a probe within 2,000 steps), so a template that loops on purpose
 * costs little to read.
 *
 * Thread safety: a template is immutable once made; any number of threads
 * may render with it at once. Renders share nothing.
 */
#ifndef SB_RT_CHAT_TMPL_H
#define SB_RT_CHAT_TMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/rt.h"
#include "text/tokenizer.h"

#ifndef SB_RT_TOK_PARSE_SPECIAL
/* Until the tokenizer's span-aware encoder (branch `tokenizer`) is merged,
 * the span type it takes is declared here; tokenizer.h declares it (and
 * SB_RT_TOK_PARSE_SPECIAL) once it is, and this copy drops out. */
typedef struct sb_rt_tok_span {
    size_t off, len;            /* bytes [off, off + len) of a text */
} sb_rt_tok_span;
#endif

/* One message. role: "system", "user", "assistant", "tool" (any string the
 * template knows); content: the text, or NULL for none (Python None, as an
 * assistant turn that only calls tools has). Both UTF-8, NUL-terminated,
 * borrowed for the call. */
typedef struct sb_rt_chat_msg {
    const char *role;
    const char *content;
} sb_rt_chat_msg;

/* A rendered prompt. text: owned, NUL-terminated, len bytes (valid UTF-8).
 * spans: owned (NULL when n_spans is 0), byte ranges of text that came from
 * the caller's data: sorted, disjoint, not adjacent, non-empty, inside
 * [0, len). Free the members with sb_rt_chat_text_free. */
typedef struct sb_rt_chat_text {
    char *text;
    size_t len;
    sb_rt_tok_span *spans;
    size_t n_spans;
} sb_rt_chat_text;

/* What a template may cost. 0 in a field means its default. */
typedef struct sb_rt_chat_limits {
    size_t max_source_bytes;      /* template text (default 1 MiB) */
    size_t max_output_bytes;      /* one rendered prompt (default 32 MiB) */
    size_t max_memory_bytes;      /* values and buffers of one render (default 256 MiB) */
    uint64_t max_iterations;      /* for-loop iterations of one render (default 1,000,000) */
    uint64_t max_steps;           /* evaluation steps of one render (default 50,000,000) */
    uint32_t max_depth;           /* nesting of syntax, macro calls, data (default 100) */
} sb_rt_chat_limits;

/* sb_rt_chat_limits_default -- fill l with the defaults above. */
void sb_rt_chat_limits_default(sb_rt_chat_limits *l);

typedef struct sb_rt_chat_tmpl sb_rt_chat_tmpl;

/* sb_rt_chat_tmpl_new -- read a chat template.
 * source: the model's tokenizer.chat_template (NUL-terminated UTF-8; may be
 * NULL: then name must be a family). name: NULL to detect the family from
 * source (OVERVIEW 1), or "chatml", "llama3", "llama2", "mistral", "gemma",
 * "phi3" (that family; its variant is still chosen by probing when source
 * renders), or "jinja" (render source with the interpreter, no family).
 * bos_text / eos_text: the vocabulary's BOS / EOS token texts for templates
 * that use bos_token / eos_token (NULL: the vocabulary has none; the
 * templates see ""). All strings are copied.
 * On success *out is owned by the caller (sb_rt_chat_tmpl_free).
 * Returns: SB_OK; SB_ERR_INVAL (out NULL; source not UTF-8);
 * SB_ERR_UNSUPPORTED (an unknown name; name "jinja" or NULL and a source
 * that neither matches a family nor renders a user message, alone or after
 * a system one; or no source and no family name: err names the
 * --chat-template option and says what failed); SB_ERR_RANGE (source over
 * max_source_bytes);
 * SB_ERR_NOMEM. On failure *out is untouched. */
int sb_rt_chat_tmpl_new(const char *source, const char *name, const char *bos_text,
                        const char *eos_text, sb_rt_chat_tmpl **out, sb_rt_err *err);

/* sb_rt_chat_tmpl_new_ex -- as sb_rt_chat_tmpl_new with limits (NULL: the
 * defaults), kept by the template for every render. */
int sb_rt_chat_tmpl_new_ex(const char *source, const char *name, const char *bos_text,
                           const char *eos_text, const sb_rt_chat_limits *limits,
                           sb_rt_chat_tmpl **out, sb_rt_err *err);

/* sb_rt_chat_tmpl_name -- what renders: the family ("chatml", ...) or
 * "jinja". Borrowed for the template's life. */
const char *sb_rt_chat_tmpl_name(const sb_rt_chat_tmpl *t);

/* sb_rt_chat_tmpl_variant -- the family variant chosen ("qwen2.5",
 * "llama3.1", ... see chat_family.c), or "jinja". Borrowed. */
const char *sb_rt_chat_tmpl_variant(const sb_rt_chat_tmpl *t);

/* sb_rt_chat_render -- the prompt for msgs[0, n_msgs), ending with the
 * assistant's header when add_generation_prompt. On success *out holds the
 * text and its spans (free with sb_rt_chat_text_free).
 * Returns: SB_OK; SB_ERR_INVAL (NULL argument, n_msgs 0, a role NULL,
 * a string not UTF-8; or the template refused the conversation:
 * raise_exception (err.msg is its message) or a template error such as an
 * undefined value used, which jinja2 would raise too); SB_ERR_RANGE (a
 * limit: err names it); SB_ERR_UNSUPPORTED (the template reached something
 * jinja2 has and this interpreter lacks: err names it); SB_ERR_NOMEM.
 * On failure *out is untouched. */
int sb_rt_chat_render(const sb_rt_chat_tmpl *t, const sb_rt_chat_msg *msgs, size_t n_msgs,
                      bool add_generation_prompt, sb_rt_chat_text *out, sb_rt_err *err);

/* What a render may carry beyond plain messages. */
typedef struct sb_rt_chat_opts {
    bool add_generation_prompt;
    /* NULL, or n_msgs entries, each NULL or the text of a JSON object whose
     * members are added to message i: "name", "tool_calls", "tool_call_id",
     * "reasoning_content", ... A "content" member replaces the content (so
     * it may be null or a list of parts); "role" is refused. */
    const char *const *msg_json;
    /* NULL, or the text of a JSON object whose members become template
     * variables: "tools", "enable_thinking", "date_string", ... The names
     * messages, add_generation_prompt, bos_token and eos_token are refused. */
    const char *vars_json;
} sb_rt_chat_opts;

/* sb_rt_chat_render_ex -- sb_rt_chat_render with extras (opts NULL: none,
 * no generation prompt). With any extra the interpreter renders, even for a
 * family template; a template the interpreter could not read then fails
 * with SB_ERR_UNSUPPORTED. Every string in the extras is the caller's
 * (tainted). Returns: as sb_rt_chat_render, and SB_ERR_INVAL for JSON that
 * does not parse, is not an object, nests over max_depth, or uses a
 * refused name. */
int sb_rt_chat_render_ex(const sb_rt_chat_tmpl *t, const sb_rt_chat_msg *msgs, size_t n_msgs,
                         const sb_rt_chat_opts *opts, sb_rt_chat_text *out, sb_rt_err *err);

/* sb_rt_chat_text_free -- free x's members and zero them; NULL is a no-op. */
void sb_rt_chat_text_free(sb_rt_chat_text *x);

/* sb_rt_chat_tmpl_free -- NULL is a no-op. */
void sb_rt_chat_tmpl_free(sb_rt_chat_tmpl *t);

/* The ChatML template `snapbank make-model` writes into the models it makes
 * (NUL-terminated, static). */
extern const char sb_rt_chat_tmpl_chatml[];

#endif /* SB_RT_CHAT_TMPL_H */
