/* tools.c -- tool calls in a model's answer (tools.h). */
#define _POSIX_C_SOURCE 200809L
#include "server/tools.h"

#include <stdio.h>
#include <string.h>

#include "snapbank.h"

static const char hermes_open[] = "<tool_call>", hermes_close[] = "</tool_call>";
static const char python_tag[] = "<|python_tag|>", mistral_tag[] = "[TOOL_CALLS]";

srv_toolfmt srv_tools_format(const char *src)
{
    if (!src)
        return SRV_TOOLFMT_NONE;
    if (strstr(src, hermes_open))
        return SRV_TOOLFMT_HERMES;
    if (strstr(src, mistral_tag))
        return SRV_TOOLFMT_MISTRAL;
    if (strstr(src, python_tag) || (strstr(src, "<|start_header_id|>") && strstr(src, "tools")))
        return SRV_TOOLFMT_LLAMA3;
    return SRV_TOOLFMT_NONE;
}

const char *srv_tools_format_name(srv_toolfmt f)
{
    static const char *const n[] = { "none", "hermes", "llama3", "mistral" };
    return (unsigned)f < 4 ? n[f] : "none";
}

static bool space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Where text[from, len) has s, or len. */
static size_t find(const char *text, size_t len, size_t from, const char *s)
{
    size_t n = strlen(s);
    for (size_t i = from; i + n <= len; i++)
        if (!memcmp(text + i, s, n))
            return i;
    return len;
}

size_t srv_tools_visible(srv_toolfmt f, const char *text, size_t len)
{
    if (f == SRV_TOOLFMT_NONE)
        return len;
    if (f == SRV_TOOLFMT_HERMES) {
        size_t at = find(text, len, 0, hermes_open);
        if (at < len)
            return at;
        /* hold a tail that may grow into the opening tag */
        size_t n = sizeof hermes_open - 1;
        for (size_t h = n - 1; h > 0; h--)
            if (h <= len && !memcmp(text + len - h, hermes_open, h))
                return len - h;
        return len;
    }
    size_t i = 0;
    while (i < len && space(text[i]))
        i++;
    if (i == len || text[i] == '{' || text[i] == '[' || text[i] == '<')
        return 0;
    return len;
}

/* A call's id: "call_" + hex digits; Mistral's templates take only 9
 * letters and digits (the model's own id when it wrote one so). */
static void call_id(char *id, size_t cap, unsigned long long seed, size_t index, bool nine,
                    const json_t *given)
{
    const char *g = json_string_value(given);
    if (nine && g && strlen(g) == 9 && strspn(g, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOP"
                                                "QRSTUVWXYZ0123456789") == 9) {
        snprintf(id, cap, "%s", g);
        return;
    }
    if (!nine) {
        snprintf(id, cap, "call_%llx%02zx", seed, index);
        return;
    }
    static const char al[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    unsigned long long x = seed ^ (0x9e3779b97f4a7c15ull * (index + 1));
    for (int i = 0; i < 9; i++) {
        x ^= x >> 31, x *= 0xbf58476d1ce4e5b9ull, x ^= x >> 27;
        id[i] = al[x % 62];
    }
    id[9] = 0;
}

/* One call's JSON object o ({"name", "arguments" | "parameters"}) appended
 * to calls (ids of nine characters when nine). Returns false when it is
 * not one. */
static bool add_call(json_t *calls, json_t *o, unsigned long long seed, bool nine)
{
    json_t *name = json_object_get(o, "name");
    json_t *args = json_object_get(o, "arguments");
    if (!args)
        args = json_object_get(o, "parameters");
    if (!json_is_object(o) || !json_is_string(name) || !json_string_length(name))
        return false;
    char *a = NULL;
    if (!args || json_is_null(args))
        a = strdup("{}");
    else if (json_is_string(args)) /* already text: passed on as it is */
        a = strdup(json_string_value(args));
    else
        a = json_dumps(args, JSON_COMPACT);
    if (!a)
        return false;
    char id[40];
    call_id(id, sizeof id, seed, json_array_size(calls), nine, json_object_get(o, "id"));
    json_t *c = json_pack("{s:s, s:s, s:{s:O, s:s}}", "id", id, "type", "function", "function",
                          "name", name, "arguments", a);
    free(a);
    return c && json_array_append_new(calls, c) == 0;
}

/* A JSON value at text[*at, len), skipping whitespace first; *at moves
 * past it. NULL when none parses there. */
static json_t *json_at(const char *text, size_t len, size_t *at)
{
    size_t i = *at;
    while (i < len && space(text[i]))
        i++;
    if (i == len)
        return NULL;
    json_error_t e;
    json_t *v = json_loadb(text + i, len - i, JSON_DISABLE_EOF_CHECK | JSON_DECODE_ANY, &e);
    if (v)
        *at = i + (size_t)e.position;
    return v;
}

static bool parse_hermes(const char *text, size_t len, unsigned long long seed, json_t *calls,
                         size_t *content_len)
{
    size_t first = find(text, len, 0, hermes_open), at = first;
    if (first == len)
        return false;
    while (at < len) {
        at += sizeof hermes_open - 1;
        json_t *o = json_at(text, len, &at);
        bool ok = o && add_call(calls, o, seed, false);
        json_decref(o);
        if (!ok)
            return false;
        while (at < len && space(text[at]))
            at++;
        if (at == len)
            break; /* stopped before the closing tag */
        if (len - at < sizeof hermes_close - 1 ||
            memcmp(text + at, hermes_close, sizeof hermes_close - 1))
            return false;
        at += sizeof hermes_close - 1;
        while (at < len && space(text[at]))
            at++;
        if (at < len && (len - at < sizeof hermes_open - 1 ||
                         memcmp(text + at, hermes_open, sizeof hermes_open - 1)))
            return false; /* text after the calls that is not another call */
    }
    while (first > 0 && space(text[first - 1]))
        first--;
    *content_len = first;
    return true;
}

static bool parse_llama3(const char *text, size_t len, unsigned long long seed, json_t *calls)
{
    size_t at = 0;
    while (at < len && space(text[at]))
        at++;
    if (len - at >= sizeof python_tag - 1 && !memcmp(text + at, python_tag, sizeof python_tag - 1))
        at += sizeof python_tag - 1;
    for (;;) {
        json_t *o = json_at(text, len, &at);
        bool ok = o && add_call(calls, o, seed, false);
        json_decref(o);
        if (!ok)
            return false;
        while (at < len && space(text[at]))
            at++;
        if (at == len)
            return true;
        if (text[at++] != ';')
            return false;
    }
}

static bool parse_mistral(const char *text, size_t len, unsigned long long seed, json_t *calls)
{
    size_t at = 0;
    while (at < len && space(text[at]))
        at++;
    if (len - at >= sizeof mistral_tag - 1 &&
        !memcmp(text + at, mistral_tag, sizeof mistral_tag - 1))
        at += sizeof mistral_tag - 1;
    json_t *a = json_at(text, len, &at);
    bool ok = json_is_array(a) && json_array_size(a) > 0;
    for (size_t i = 0; ok && i < json_array_size(a); i++)
        ok = add_call(calls, json_array_get(a, i), seed, true);
    json_decref(a);
    while (ok && at < len && space(text[at]))
        at++;
    return ok && at == len;
}

int srv_tools_parse(srv_toolfmt f, const char *text, size_t len, unsigned long long id_seed,
                    json_t **calls, size_t *content_len)
{
    *calls = NULL;
    *content_len = len;
    if (f == SRV_TOOLFMT_NONE)
        return SB_OK;
    json_t *c = json_array();
    if (!c)
        return SB_ERR_NOMEM;
    size_t content = 0;
    bool ok = f == SRV_TOOLFMT_HERMES    ? parse_hermes(text, len, id_seed, c, &content)
              : f == SRV_TOOLFMT_LLAMA3  ? parse_llama3(text, len, id_seed, c)
                                         : parse_mistral(text, len, id_seed, c);
    if (!ok || !json_array_size(c)) {
        json_decref(c);
        return SB_OK;
    }
    *calls = c;
    *content_len = content;
    return SB_OK;
}
