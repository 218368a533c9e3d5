/* api.c -- parsing and checking OpenAI request bodies (api.h). */
#include "server/api.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snapbank.h"

__attribute__((format(printf, 4, 5))) static int fail(srv_api_err *e, const char *code,
                                                      const char *param, const char *fmt, ...)
{
    e->status = 400;
    e->type = "invalid_request_error";
    e->code = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return SB_ERR_FORMAT;
}

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a decimal";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "a value";
}

static int wrong_type(srv_api_err *e, const char *param, const char *want, const json_t *v)
{
    return fail(e, "invalid_type", param, "Invalid type for '%s': expected %s, but got %s "
                "instead.", param, want, type_name(v));
}

static int unsupported(srv_api_err *e, const char *param, const char *what)
{
    return fail(e, "unsupported_parameter", param, "'%s' is not supported by this server%s%s.",
                param, what ? ": " : "", what ? what : "");
}

bool srv_api_depth_ok(const char *s, size_t len, unsigned max)
{
    unsigned depth = 0;
    bool str = false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                str = false;
        } else if (c == '"') {
            str = true;
        } else if (c == '[' || c == '{') {
            if (++depth > max)
                return false;
        } else if ((c == ']' || c == '}') && depth) {
            depth--;
        }
    }
    return true;
}

/* A field that must be null/absent or boolean. */
static int get_bool(json_t *o, const char *k, bool *out, srv_api_err *e)
{
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v))
        return SB_OK;
    if (!json_is_boolean(v))
        return wrong_type(e, k, "a boolean", v);
    *out = json_is_true(v);
    return SB_OK;
}

/* A number in [lo, hi]; *set when present. */
static int get_number(json_t *o, const char *k, double lo, double hi, double *out, bool *set,
                      srv_api_err *e)
{
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v))
        return SB_OK;
    if (!json_is_number(v))
        return wrong_type(e, k, "a number", v);
    double d = json_number_value(v);
    if (!(d >= lo && d <= hi))
        return fail(e, "invalid_value", k, "Invalid '%s': %g is out of range: expected a "
                    "value from %g to %g.", k, d, lo, hi);
    *out = d;
    if (set)
        *set = true;
    return SB_OK;
}

static int get_int(json_t *o, const char *k, json_int_t lo, json_int_t hi, json_int_t *out,
                   bool *set, srv_api_err *e)
{
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v))
        return SB_OK;
    if (!json_is_integer(v))
        return wrong_type(e, k, "an integer", v);
    json_int_t i = json_integer_value(v);
    if (i < lo || i > hi)
        return fail(e, "invalid_value", k, "Invalid '%s': %lld is out of range: expected at "
                    "least %lld.", k, (long long)i, (long long)lo);
    *out = i;
    if (set)
        *set = true;
    return SB_OK;
}

/* A string joining the text parts of a content array. */
static int join_parts(json_t *parts, size_t mi, char **out, srv_api_err *e)
{
    char param[64];
    snprintf(param, sizeof param, "messages[%zu].content", mi);
    size_t total = 0, n = json_array_size(parts);
    for (size_t i = 0; i < n; i++) {
        json_t *p = json_array_get(parts, i), *t = json_object_get(p, "type");
        json_t *text = json_object_get(p, "text");
        if (!json_is_object(p) || !json_is_string(t))
            return fail(e, "invalid_type", param, "Invalid '%s[%zu]': expected an object with "
                        "a 'type'.", param, i);
        if (strcmp(json_string_value(t), "text") != 0)
            return unsupported(e, param, "only parts of type 'text' are");
        if (!json_is_string(text))
            return wrong_type(e, param, "a string 'text'", text ? text : json_null());
        total += json_string_length(text);
    }
    char *s = malloc(total + 1);
    if (!s)
        return SB_ERR_NOMEM;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *text = json_object_get(json_array_get(parts, i), "text");
        memcpy(s + at, json_string_value(text), json_string_length(text));
        at += json_string_length(text);
    }
    s[at] = 0;
    *out = s;
    return SB_OK;
}

static int missing(srv_api_err *e, const char *param)
{
    return fail(e, "missing_required_parameter", param, "Missing required parameter: '%s'.",
                param);
}

/* An assistant message's tool_calls, a tool message's tool_call_id and
 * name: checked, and put in r->msg_json[i] for the template. */
static int msg_extras(json_t *msg, const char *role, size_t i, srv_api_req *r, srv_api_err *e)
{
    char param[96];
    json_t *calls = json_object_get(msg, "tool_calls"), *x = json_object();
    if (!x)
        return SB_ERR_NOMEM;
    int rc = SB_OK;
    if (calls && !json_is_null(calls)) {
        snprintf(param, sizeof param, "messages[%zu].tool_calls", i);
        if (strcmp(role, "assistant"))
            rc = fail(e, "invalid_value", param, "Invalid '%s': only an assistant message has "
                      "tool calls.", param);
        else if (!json_is_array(calls))
            rc = wrong_type(e, param, "an array", calls);
        json_t *out = rc == SB_OK ? json_array() : NULL;
        for (size_t k = 0; rc == SB_OK && out && k < json_array_size(calls); k++) {
            json_t *c = json_array_get(calls, k), *f = json_object_get(c, "function");
            json_t *id = json_object_get(c, "id"), *name = json_object_get(f, "name");
            json_t *args = json_object_get(f, "arguments");
            snprintf(param, sizeof param, "messages[%zu].tool_calls[%zu]", i, k);
            if (!json_is_object(c) || !json_is_object(f) || !json_is_string(name) ||
                !json_is_string(args) || (id && !json_is_string(id))) {
                rc = fail(e, "invalid_value", param, "Invalid '%s': expected {\"id\": string, "
                          "\"type\": \"function\", \"function\": {\"name\": string, "
                          "\"arguments\": string}}.", param);
                break;
            }
            /* templates print arguments as an object (tojson): parsed where
             * the text is JSON, else passed as the text */
            json_t *a = json_loads(json_string_value(args), 0, NULL);
            json_t *one = json_pack("{s:O?, s:s, s:{s:O, s:o}}", "id", id, "type", "function",
                                    "function", "name", name, "arguments",
                                    a ? a : json_incref(args));
            if (!one || json_array_append_new(out, one))
                rc = SB_ERR_NOMEM;
        }
        if (rc == SB_OK && (!out || json_object_set_new(x, "tool_calls", out)))
            rc = SB_ERR_NOMEM;
        else if (rc != SB_OK)
            json_decref(out);
    }
    json_t *tid = json_object_get(msg, "tool_call_id"), *name = json_object_get(msg, "name");
    if (rc == SB_OK && !strcmp(role, "tool")) {
        snprintf(param, sizeof param, "messages[%zu].tool_call_id", i);
        if (!tid)
            rc = missing(e, param);
        else if (!json_is_string(tid))
            rc = wrong_type(e, param, "a string", tid);
        else
            json_object_set(x, "tool_call_id", tid);
    }
    if (rc == SB_OK && name && !json_is_null(name)) {
        snprintf(param, sizeof param, "messages[%zu].name", i);
        if (!json_is_string(name))
            rc = wrong_type(e, param, "a string", name);
        else
            json_object_set(x, "name", name);
    }
    if (rc == SB_OK && json_object_size(x)) {
        if (!(r->msg_json[i] = json_dumps(x, JSON_COMPACT)))
            rc = SB_ERR_NOMEM;
        r->has_extras = true;
    }
    json_decref(x);
    return rc;
}

/* tools and tool_choice (chat). */
static int parse_tools(json_t *root, srv_api_req *r, srv_api_err *e)
{
    json_t *t = json_object_get(root, "tools"), *ch = json_object_get(root, "tool_choice");
    int rc = get_bool(root, "parallel_tool_calls", &(bool){ false }, e);
    if (rc != SB_OK)
        return rc;
    if (ch && !json_is_null(ch)) {
        if (json_is_string(ch) && (!strcmp(json_string_value(ch), "auto") ||
                                   !strcmp(json_string_value(ch), "none"))) {
            if (!strcmp(json_string_value(ch), "none"))
                t = NULL; /* the model is not shown them */
        } else if (json_is_string(ch) && !strcmp(json_string_value(ch), "required")) {
            return unsupported(e, "tool_choice", "only 'auto' and 'none' are (forcing a call "
                               "needs constrained decoding, which snapbank does not do): "
                               "'required'");
        } else if (json_is_object(ch)) {
            return unsupported(e, "tool_choice", "only 'auto' and 'none' are (forcing a call "
                               "needs constrained decoding, which snapbank does not do): a named "
                               "function");
        } else {
            return fail(e, "invalid_value", "tool_choice", "Invalid 'tool_choice': expected "
                        "'none', 'auto', 'required' or {\"type\": \"function\", ...}.");
        }
    }
    if (!t || json_is_null(t))
        return SB_OK;
    if (!json_is_array(t))
        return wrong_type(e, "tools", "an array", t);
    for (size_t i = 0; i < json_array_size(t); i++) {
        json_t *one = json_array_get(t, i), *f = json_object_get(one, "function");
        json_t *type = json_object_get(one, "type"), *name = json_object_get(f, "name");
        json_t *params = json_object_get(f, "parameters"), *desc = json_object_get(f, "description");
        char param[64];
        snprintf(param, sizeof param, "tools[%zu]", i);
        if (!json_is_object(one) || !json_is_string(type) ||
            strcmp(json_string_value(type), "function") || !json_is_object(f) ||
            !json_is_string(name) || !json_string_length(name) ||
            (params && !json_is_object(params)) || (desc && !json_is_string(desc)))
            return fail(e, "invalid_value", param, "Invalid '%s': expected {\"type\": "
                        "\"function\", \"function\": {\"name\": string, \"description\": "
                        "string, \"parameters\": object}}.", param);
    }
    r->tools = json_array_size(t) ? t : NULL;
    return SB_OK;
}

static int parse_messages(json_t *root, srv_api_req *r, srv_api_err *e)
{
    json_t *m = json_object_get(root, "messages");
    if (!m)
        return missing(e, "messages");
    if (!json_is_array(m))
        return wrong_type(e, "messages", "an array", m);
    size_t n = json_array_size(m);
    if (n == 0)
        return fail(e, "empty_array", "messages", "Invalid 'messages': empty array. Expected an "
                    "array with minimum length 1, but got an empty array instead.");
    r->msgs = calloc(n, sizeof *r->msgs);
    r->joined = calloc(n, sizeof *r->joined);
    r->msg_json = calloc(n, sizeof *r->msg_json);
    if (!r->msgs || !r->joined || !r->msg_json)
        return SB_ERR_NOMEM;
    r->n_msgs = n;
    for (size_t i = 0; i < n; i++) {
        char param[64];
        json_t *msg = json_array_get(m, i);
        snprintf(param, sizeof param, "messages[%zu]", i);
        if (!json_is_object(msg))
            return wrong_type(e, param, "an object", msg);
        json_t *role = json_object_get(msg, "role"), *content = json_object_get(msg, "content");
        snprintf(param, sizeof param, "messages[%zu].role", i);
        if (!role)
            return missing(e, param);
        if (!json_is_string(role))
            return wrong_type(e, param, "a string", role);
        const char *rs = json_string_value(role);
        if (!strcmp(rs, "developer"))
            rs = "system";
        if (strcmp(rs, "system") && strcmp(rs, "user") && strcmp(rs, "assistant") &&
            strcmp(rs, "tool"))
            return fail(e, "invalid_value", param, "Invalid value: '%s'. Supported values are: "
                        "'system', 'developer', 'user', 'assistant' and 'tool'.", rs);
        r->msgs[i].role = rs;
        int rc = msg_extras(msg, rs, i, r, e);
        if (rc != SB_OK)
            return rc;
        snprintf(param, sizeof param, "messages[%zu].content", i);
        if (!content || json_is_null(content)) {
            if (strcmp(rs, "assistant") != 0)
                return missing(e, param);
            r->msgs[i].content = "";
        } else if (json_is_string(content)) {
            r->msgs[i].content = json_string_value(content);
        } else if (json_is_array(content)) {
            rc = join_parts(content, i, &r->joined[i], e);
            if (rc != SB_OK)
                return rc;
            r->msgs[i].content = r->joined[i];
        } else {
            return wrong_type(e, param, "a string or an array of parts", content);
        }
    }
    return SB_OK;
}

/* A token-id array (every id a non-negative integer < 2^31). */
static int token_array(json_t *a, srv_api_req *r, srv_api_err *e)
{
    size_t n = json_array_size(a);
    if (!n)
        return fail(e, "empty_array", "prompt", "Invalid 'prompt': empty array.");
    r->prompt_ids = malloc(n * sizeof *r->prompt_ids);
    if (!r->prompt_ids)
        return SB_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(a, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) > INT32_MAX)
            return fail(e, "invalid_type", "prompt", "Invalid 'prompt': expected a string or "
                        "an array of token ids.");
        r->prompt_ids[i] = (uint32_t)json_integer_value(v);
    }
    r->n_prompt_ids = n;
    return SB_OK;
}

static int parse_prompt(json_t *root, srv_api_req *r, srv_api_err *e)
{
    json_t *p = json_object_get(root, "prompt");
    if (!p)
        return missing(e, "prompt");
    if (json_is_array(p) && json_array_size(p) == 1 &&
        (json_is_string(json_array_get(p, 0)) || json_is_array(json_array_get(p, 0))))
        p = json_array_get(p, 0); /* one prompt in a list */
    if (json_is_string(p)) {
        r->prompt = json_string_value(p);
        r->prompt_len = json_string_length(p);
        return SB_OK;
    }
    if (json_is_array(p)) {
        json_t *first = json_array_get(p, 0);
        if (json_is_string(first) || json_is_array(first))
            return fail(e, "invalid_value", "prompt",
                        "Invalid 'prompt': this server completes one prompt per request.");
        return token_array(p, r, e);
    }
    return wrong_type(e, "prompt", "a string or an array of token ids", p);
}

static int parse_stop(json_t *root, srv_api_req *r, srv_api_err *e)
{
    json_t *s = json_object_get(root, "stop");
    if (!s || json_is_null(s))
        return SB_OK;
    if (json_is_string(s)) {
        if (!json_string_length(s))
            return fail(e, "invalid_value", "stop", "Invalid 'stop': an empty string.");
        r->stop[r->n_stop++] = json_string_value(s);
        return SB_OK;
    }
    if (!json_is_array(s))
        return wrong_type(e, "stop", "a string or an array of strings", s);
    if (json_array_size(s) > SRV_API_MAX_STOP)
        return fail(e, "invalid_value", "stop", "Invalid 'stop': at most %u sequences.",
                    SRV_API_MAX_STOP);
    for (size_t i = 0; i < json_array_size(s); i++) {
        json_t *v = json_array_get(s, i);
        if (!json_is_string(v))
            return wrong_type(e, "stop", "an array of strings", v);
        if (!json_string_length(v))
            return fail(e, "invalid_value", "stop", "Invalid 'stop': an empty string.");
        r->stop[r->n_stop++] = json_string_value(v);
    }
    return SB_OK;
}

/* logprobs and top_logprobs: a chat's boolean and 0-20, a completion's
 * 0-5 (the top count: the chosen token's own is always given). */
static int parse_logprobs(json_t *root, srv_api_req *r, srv_api_err *e)
{
    json_int_t top = 0;
    bool top_set = false;
    int rc;
    if (r->kind == SRV_API_CHAT) {
        if ((rc = get_bool(root, "logprobs", &r->logprobs, e)) != SB_OK ||
            (rc = get_int(root, "top_logprobs", 0, 20, &top, &top_set, e)) != SB_OK)
            return rc;
        if (top_set && !r->logprobs)
            return fail(e, "invalid_value", "top_logprobs", "Invalid 'top_logprobs': it needs "
                        "'logprobs' set to true.");
    } else {
        if ((rc = get_int(root, "logprobs", 0, 5, &top, &top_set, e)) != SB_OK)
            return rc;
        if (json_object_get(root, "top_logprobs"))
            return fail(e, "invalid_value", "top_logprobs", "Invalid 'top_logprobs': a "
                        "completion takes the count in 'logprobs'.");
        r->logprobs = top_set;
    }
    r->top_logprobs = (unsigned)top;
    return SB_OK;
}

/* Fields this server does not implement: refused when they ask for
 * anything but the default. */
static int refuse_unsupported(json_t *root, srv_api_req *r, srv_api_err *e)
{
    json_t *v;
    if ((v = json_object_get(root, "echo")) && json_is_true(v))
        return unsupported(e, "echo", NULL);
    if ((v = json_object_get(root, "suffix")) && !json_is_null(v))
        return unsupported(e, "suffix", NULL);
    if ((v = json_object_get(root, "best_of")) && !json_is_null(v) &&
        !(json_is_integer(v) && json_integer_value(v) == 1))
        return unsupported(e, "best_of", "one completion per request");
    if ((v = json_object_get(root, "functions")) && !json_is_null(v) &&
        !(json_is_array(v) && json_array_size(v) == 0))
        return unsupported(e, "functions", "the deprecated 'functions' are not; 'tools' are");
    if (r->kind != SRV_API_CHAT && (v = json_object_get(root, "tools")) && !json_is_null(v))
        return unsupported(e, "tools", "a completion's tools are not; a chat's are");
    if ((v = json_object_get(root, "logit_bias")) && !json_is_null(v) &&
        !(json_is_object(v) && json_object_size(v) == 0))
        return unsupported(e, "logit_bias", NULL);
    const char *pen[] = { "presence_penalty", "frequency_penalty" };
    for (int i = 0; i < 2; i++)
        if ((v = json_object_get(root, pen[i])) && !json_is_null(v) &&
            !(json_is_number(v) && json_number_value(v) == 0))
            return unsupported(e, pen[i], "only 0 is");
    if ((v = json_object_get(root, "response_format")) && !json_is_null(v)) {
        json_t *t = json_object_get(v, "type");
        if (!json_is_object(v) || !json_is_string(t) || strcmp(json_string_value(t), "text"))
            return unsupported(e, "response_format", "only {\"type\": \"text\"} is");
    }
    json_int_t n = 1;
    int rc = get_int(root, "n", 1, INT32_MAX, &n, NULL, e);
    if (rc != SB_OK)
        return rc;
    if (n != 1)
        return fail(e, "invalid_value", "n", "Invalid 'n': this server makes one choice per "
                    "request (n = 1).");
    (void)r;
    return SB_OK;
}

int srv_api_parse(srv_api_kind kind, const char *body, size_t len, srv_api_req *r,
                  srv_api_err *e)
{
    memset(r, 0, sizeof *r);
    memset(e, 0, sizeof *e);
    r->kind = kind;
    r->sampling = (sb_rt_sampling){ 1.0f, 0, 1.0f, 0 };
    if (!srv_api_depth_ok(body, len, SRV_API_MAX_DEPTH))
        return fail(e, NULL, NULL, "We could not parse the JSON body of your request: it nests "
                    "deeper than %u levels.", SRV_API_MAX_DEPTH);
    json_error_t je;
    r->root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!r->root)
        return fail(e, NULL, NULL, "We could not parse the JSON body of your request: %s "
                    "(line %d, column %d).", je.text, je.line, je.column);
    json_t *root = r->root;
    if (!json_is_object(root))
        return fail(e, NULL, NULL, "The body of your request must be a JSON object, not %s.",
                    type_name(root));
    json_t *model = json_object_get(root, "model");
    if (!model || json_is_null(model))
        return fail(e, "missing_required_parameter", "model",
                    "you must provide a model parameter");
    if (!json_is_string(model))
        return wrong_type(e, "model", "a string", model);
    r->model = json_string_value(model);
    int rc = kind == SRV_API_CHAT ? parse_messages(root, r, e) : parse_prompt(root, r, e);
    if (rc == SB_OK && kind == SRV_API_CHAT)
        rc = parse_tools(root, r, e);
    if (rc != SB_OK)
        return rc;
    if ((rc = get_bool(root, "stream", &r->stream, e)) != SB_OK)
        return rc;
    json_t *so = json_object_get(root, "stream_options");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so))
            return wrong_type(e, "stream_options", "an object", so);
        if (!r->stream)
            return fail(e, "invalid_value", "stream_options", "The 'stream_options' parameter "
                        "is only allowed when 'stream' is enabled.");
        if ((rc = get_bool(so, "include_usage", &r->include_usage, e)) != SB_OK)
            return rc;
    }
    json_int_t mt = 0;
    if ((rc = get_int(root, "max_tokens", 1, INT32_MAX, &mt, &r->has_max, e)) != SB_OK ||
        (kind == SRV_API_CHAT &&
         (rc = get_int(root, "max_completion_tokens", 1, INT32_MAX, &mt, &r->has_max, e)) !=
             SB_OK))
        return rc;
    r->max_tokens = (size_t)mt;
    double temp = 1, top_p = 1;
    json_int_t top_k = 0, seed = 0;
    if ((rc = get_number(root, "temperature", 0, 2, &temp, NULL, e)) != SB_OK ||
        (rc = get_number(root, "top_p", 0, 1, &top_p, NULL, e)) != SB_OK ||
        (rc = get_int(root, "top_k", 0, INT32_MAX, &top_k, NULL, e)) != SB_OK ||
        (rc = get_int(root, "seed", INT64_MIN, INT64_MAX, &seed, &r->has_seed, e)) != SB_OK)
        return rc;
    r->sampling.temp = (float)temp;
    r->sampling.top_p = top_p > 0 ? (float)top_p : 1e-9f; /* 0: only the most likely */
    r->sampling.top_k = (uint32_t)top_k;
    r->sampling.seed = (uint64_t)seed;
    if ((rc = parse_stop(root, r, e)) != SB_OK || (rc = refuse_unsupported(root, r, e)) != SB_OK ||
        (rc = parse_logprobs(root, r, e)) != SB_OK)
        return rc;
    json_t *sid = json_object_get(root, "session_id");
    if (sid && !json_is_null(sid)) {
        if (!json_is_string(sid))
            return wrong_type(e, "session_id", "a string", sid);
        r->session_id = json_string_value(sid);
    }
    return SB_OK;
}

void srv_api_req_free(srv_api_req *r)
{
    if (!r)
        return;
    for (size_t i = 0; r->joined && i < r->n_msgs; i++)
        free(r->joined[i]);
    for (size_t i = 0; r->msg_json && i < r->n_msgs; i++)
        free(r->msg_json[i]);
    free(r->joined);
    free(r->msg_json);
    free(r->msgs);
    free(r->prompt_ids);
    json_decref(r->root);
    memset(r, 0, sizeof *r);
}
