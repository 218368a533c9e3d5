/* test_tools.c -- tool calls in answers (runtime/server/tools.h): the
 * format each template family teaches, the calls of each format parsed
 * into OpenAI's shape (name, arguments as JSON text, ids), content beside
 * them, answers that are not calls left whole as content, and what a
 * stream may show of a growing answer. */
#include <stdio.h>
#include <string.h>

#include "testutil.h"

#include "server/tools.h"

#define CHECK(x) assert_true(x)

/* The calls of text in format f: their count, and (when want_name) the
 * first call's name and arguments compared. */
static size_t calls_of(srv_toolfmt f, const char *text, size_t *content, const char *want_name,
                       const char *want_args)
{
    json_t *calls = NULL;
    CHECK(srv_tools_parse(f, text, strlen(text), 0xabcull, &calls, content) == SB_OK);
    if (!calls)
        return 0;
    size_t n = json_array_size(calls);
    json_t *c0 = json_array_get(calls, 0), *fn = json_object_get(c0, "function");
    CHECK(!strcmp(json_string_value(json_object_get(c0, "type")), "function"));
    const char *id = json_string_value(json_object_get(c0, "id"));
    if (f == SRV_TOOLFMT_MISTRAL) /* its templates take 9 letters and digits */
        CHECK(strlen(id) == 9 && strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                            "0123456789") == 9);
    else
        CHECK(!strncmp(id, "call_abc", 8));
    if (n > 1) /* ids differ */
        CHECK(strcmp(json_string_value(json_object_get(c0, "id")),
                     json_string_value(json_object_get(json_array_get(calls, 1), "id"))));
    if (want_name) {
        CHECK(!strcmp(json_string_value(json_object_get(fn, "name")), want_name));
        const char *a = json_string_value(json_object_get(fn, "arguments"));
        if (strcmp(a, want_args))
            fprintf(stderr, "arguments %s, want %s\n", a, want_args);
        CHECK(!strcmp(a, want_args));
    }
    json_decref(calls);
    return n;
}

static void formats(void **state)
{
    (void)state;
    CHECK(srv_tools_format(NULL) == SRV_TOOLFMT_NONE);
    CHECK(srv_tools_format("{% for m in messages %}<|im_start|>{{ m.content }}{% endfor %}") ==
          SRV_TOOLFMT_NONE);
    CHECK(srv_tools_format("{%- if tools %}<tool_call>{% endif %}") == SRV_TOOLFMT_HERMES);
    CHECK(srv_tools_format("{%- if tools %}<|start_header_id|>ipython<|python_tag|>") ==
          SRV_TOOLFMT_LLAMA3);
    CHECK(srv_tools_format("[AVAILABLE_TOOLS] {{ tools }} [TOOL_CALLS]") == SRV_TOOLFMT_MISTRAL);
    CHECK(!strcmp(srv_tools_format_name(SRV_TOOLFMT_HERMES), "hermes"));
}

static void hermes(void **state)
{
    (void)state;
    srv_toolfmt f = SRV_TOOLFMT_HERMES;
    size_t content;
    const char *one = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                      "\"Paris\"}}\n</tool_call>";
    CHECK(calls_of(f, one, &content, "get_weather", "{\"city\":\"Paris\"}") == 1);
    CHECK(content == 0);
    /* content first, two calls, the last closing tag missing (stopped at
     * the end-of-turn token) */
    const char *two = "Let me look.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n"
                      "</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {\"x\": [1, 2]}}";
    CHECK(calls_of(f, two, &content, "a", "{}") == 2);
    CHECK(content == strlen("Let me look."));
    /* arguments given as a string are passed on as that text */
    CHECK(calls_of(f, "<tool_call>{\"name\": \"a\", \"arguments\": \"{\\\"k\\\": 1}\"}</tool_call>",
                   &content, "a", "{\"k\": 1}") == 1);
    /* not calls: the whole answer is content */
    const char *bad[] = {
        "Just text.", "<tool_call>\n{\"name\": \"a\", \"arguments\": {}\n</tool_call>",
        "<tool_call>{\"arguments\": {}}</tool_call>", "<tool_call>[1, 2]</tool_call>",
        "<tool_call>{\"name\": \"a\"}</tool_call> and then words",
        "<tool_call>{\"name\": \"\", \"arguments\": {}}</tool_call>",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK(calls_of(f, bad[i], &content, NULL, NULL) == 0);
        CHECK(content == strlen(bad[i]));
    }
    /* streaming: content before the tag, a tail that may begin it held */
    CHECK(srv_tools_visible(f, "Hello", 5) == 5);
    CHECK(srv_tools_visible(f, "Hello <tool", 11) == 6);
    CHECK(srv_tools_visible(f, "Hello <tool_call>{", 18) == 6);
    CHECK(srv_tools_visible(f, "a < b", 5) == 5);
}

static void llama3(void **state)
{
    (void)state;
    srv_toolfmt f = SRV_TOOLFMT_LLAMA3;
    size_t content;
    CHECK(calls_of(f, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
                   &content, "get_weather", "{\"city\":\"Paris\"}") == 1);
    CHECK(content == 0);
    CHECK(calls_of(f, "<|python_tag|>{\"name\": \"a\", \"arguments\": {}}; {\"name\": \"b\", "
                   "\"parameters\": {}}", &content, "a", "{}") == 2);
    const char *text = "The weather is {fine}.";
    CHECK(calls_of(f, text, &content, NULL, NULL) == 0 && content == strlen(text));
    CHECK(calls_of(f, "{\"name\": \"a\"} trailing", &content, NULL, NULL) == 0);
    CHECK(srv_tools_visible(f, "  {\"na", 6) == 0);
    CHECK(srv_tools_visible(f, "Sure", 4) == 4);
    CHECK(srv_tools_visible(f, "  ", 2) == 0);
}

static void mistral(void **state)
{
    (void)state;
    srv_toolfmt f = SRV_TOOLFMT_MISTRAL;
    size_t content;
    CHECK(calls_of(f, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                   "\"Paris\"}, \"id\": \"abcdefghi\"}]", &content, "get_weather",
                   "{\"city\":\"Paris\"}") == 1);
    /* the model's own id, when it is one a template takes back */
    json_t *calls;
    const char *with_id = "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}, \"id\": "
                          "\"Xy3abcdef\"}]";
    CHECK(srv_tools_parse(f, with_id, strlen(with_id), 1, &calls, &content) == SB_OK && calls);
    CHECK(!strcmp(json_string_value(json_object_get(json_array_get(calls, 0), "id")),
                  "Xy3abcdef"));
    json_decref(calls);
    /* the tag is a control token a detokenizer may not print */
    CHECK(calls_of(f, " [{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\", \"arguments\": "
                   "{}}]", &content, "a", "{}") == 2);
    CHECK(calls_of(f, "[TOOL_CALLS][]", &content, NULL, NULL) == 0);
    CHECK(calls_of(f, "[1, 2, 3]", &content, NULL, NULL) == 0);
    CHECK(srv_tools_visible(f, "[TOOL", 5) == 0);
    CHECK(srv_tools_visible(f, "No tools needed.", 16) == 16);
}

static void no_format(void **state)
{
    (void)state;
    size_t content;
    CHECK(calls_of(SRV_TOOLFMT_NONE, "<tool_call>{\"name\": \"a\"}</tool_call>", &content,
                   NULL, NULL) == 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(formats), cmocka_unit_test(hermes), cmocka_unit_test(llama3),
        cmocka_unit_test(mistral), cmocka_unit_test(no_format),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
