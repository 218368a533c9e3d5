/* api.h -- the OpenAI request bodies snapbank serve accepts: parsing and
 * checking POST /v1/chat/completions and /v1/completions into one request,
 * or an error object's fields (status, type, code, param, message) the way
 * the OpenAI API reports them.
 *
 * JSON comes from jansson: duplicate keys, invalid UTF-8, a NUL in a string
 * and nesting deeper than SRV_API_MAX_DEPTH are refused. Fields:
 *
 *   model                       required string (the server checks it names
 *                               its model: 404 model_not_found otherwise)
 *   messages (chat)             required non-empty array of {role, content};
 *                               roles system, developer (as system), user,
 *                               assistant, tool; content a string, null
 *                               (assistant), or an array of {type: "text",
 *                               text} parts; an assistant's tool_calls
 *                               (array of {id, type "function", function:
 *                               {name, arguments: a JSON text}}); a tool
 *                               message's tool_call_id (required) and name
 *   tools (chat)                array of {type "function", function: {name,
 *                               description?, parameters?: object}}, given
 *                               to the chat template as `tools`
 *   tool_choice (chat)          "auto" (the default) or "none" (the tools
 *                               are not shown to the model); "required" and
 *                               a named function need constrained decoding:
 *                               refused
 *   parallel_tool_calls         a boolean (the model decides how many)
 *   prompt (completions)        a string, an array of token ids, or an array
 *                               holding one of those
 *   stream, stream_options.include_usage   booleans
 *   max_completion_tokens, max_tokens      integer >= 1 (the first wins)
 *   temperature [0, 2], top_p [0, 1], top_k >= 0 (snapbank's), seed
 *   stop                        a string or up to 4 non-empty strings
 *   n                           1 only
 *   session_id                  snapbank's: continue that session
 *   logprobs, top_logprobs      chat: a boolean and 0-20; completions:
 *                               logprobs 0-5 (the top count)
 *   echo, suffix, best_of > 1, functions,
 *   logit_bias, non-zero presence/frequency penalties, response_format
 *   other than text: refused (400, not supported) rather than ignored.
 * Other fields (user, metadata, store, ...) are ignored.
 *
 * Thread safety: no shared state.
 */
#ifndef SB_SRV_API_H
#define SB_SRV_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "model/sample.h"
#include "server/prompt.h"

#define SRV_API_MAX_DEPTH 32u
#define SRV_API_MAX_STOP 4u

typedef enum srv_api_kind { SRV_API_CHAT = 0, SRV_API_COMPLETION = 1 } srv_api_kind;

typedef struct srv_api_req {
    srv_api_kind kind;
    json_t *root;             /* the body (owned); strings below borrow from it */
    const char *model;
    srv_msg *msgs;            /* (n_msgs) chat; owned array */
    size_t n_msgs;
    char **joined;            /* (n_msgs) contents joined from parts, owned (or NULL) */
    const char *prompt;       /* completions: the text (NULL for token ids) */
    size_t prompt_len;
    uint32_t *prompt_ids;     /* completions: token ids (owned), when given so */
    size_t n_prompt_ids;
    bool stream, include_usage;
    bool has_max;
    size_t max_tokens;
    sb_rt_sampling sampling;  /* temperature 1, top_p 1, top_k 0 by default */
    bool has_seed;
    const char *stop[SRV_API_MAX_STOP];
    size_t n_stop;
    const char *session_id;   /* NULL when none */
    json_t *tools;            /* chat: the tools array (borrowed from root),
                                 NULL when none or tool_choice "none" */
    char **msg_json;          /* (n_msgs) chat: each message's extras for the
                                 template as a JSON object's text (tool_calls
                                 with arguments parsed where they are JSON,
                                 tool_call_id, name), or NULL; owned */
    bool has_extras;          /* some msg_json is not NULL */
    bool logprobs;            /* each generated token's log probability */
    unsigned top_logprobs;    /* ...and this many alternatives */
} srv_api_req;

/* An error as the OpenAI API reports it. */
typedef struct srv_api_err {
    unsigned status;          /* 400 */
    const char *type;         /* "invalid_request_error" */
    const char *code;         /* NULL or e.g. "missing_required_parameter" */
    char param[64];           /* "" for none */
    char msg[512];
} srv_api_err;

/* srv_api_parse -- body[0, len) as a request of kind. On success *out is
 * the caller's (srv_api_req_free). Returns: SB_OK; SB_ERR_FORMAT (err
 * filled: malformed JSON, a wrong type, a missing or bad field, something
 * not supported); SB_ERR_NOMEM. */
int srv_api_parse(srv_api_kind kind, const char *body, size_t len, srv_api_req *out,
                  srv_api_err *err);

/* srv_api_req_free -- NULL members are fine. */
void srv_api_req_free(srv_api_req *r);

/* srv_api_depth_ok -- whether JSON text nests at most max deep (strings
 * skipped); a cheap check before parsing. */
bool srv_api_depth_ok(const char *s, size_t len, unsigned max);

#endif /* SB_SRV_API_H */
