/* test_tok_golden.c -- token ids from llama.cpp (runtime/text/tokenizer.h
 * against tests/data/tokenizer/golden-*.txt and llama.cpp's own vectors,
 * tests/data/vocab/ggml-vocab-*.gguf.inp/.out).
 *
 * Description: for each vocabulary in tests/data/vocab, a few hundred
 * strings (every alternative of the pre-tokenizer patterns, code, a dozen
 * scripts, emoji, special-token texts, random mixes) were tokenized by
 * llama.cpp v0.5.0 (scripts/gen_tokenizer_golden.py) in two modes:
 * `special` (BOS/EOS as the vocabulary asks, special-token texts parsed:
 * llama-tokenize's default) and `plain` (neither). snapbank must give
 * exactly the same ids: `special` is ADD_BOS/ADD_EOS per sb_rt_tok_info
 * with PARSE_SPECIAL, `plain` is flags 0 (user-defined tokens still
 * match, as in llama.cpp without parse_special). Every mismatch is
 * printed.
 *
 * The vectors: llama.cpp's repository ships, beside each vocabulary file,
 * the texts its tests/test-tokenizer-0.cpp tokenizes (.inp: each text
 * followed by a line `__ggml_vocab_test__`) and the ids llama.cpp gives
 * them (.out: one line per text, ids separated by spaces). That program
 * runs them with add_special and parse_special false: here flags 0. Every
 * vector of every vocabulary that has them must agree exactly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "text/tokenizer.h"
#include "tokutil.h"

static int hexv(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Parse `"TEXT"` at *p (escapes: \\ \" \n \t \r \xNN) into out; advance
 * *p past the closing quote. Returns the length, or -1. */
static long unquote(const char **p, char *out, size_t cap)
{
    const char *s = *p;
    size_t n = 0;
    if (*s++ != '"')
        return -1;
    while (*s && *s != '"' && n < cap) {
        char c = *s++;
        if (c == '\\') {
            c = *s++;
            if (c == 'n')
                c = '\n';
            else if (c == 't')
                c = '\t';
            else if (c == 'r')
                c = '\r';
            else if (c == 'x') {
                int hi = hexv(s[0]), lo = hi >= 0 ? hexv(s[1]) : -1;
                if (lo < 0)
                    return -1;
                c = (char)(hi * 16 + lo);
                s += 2;
            } else if (c != '\\' && c != '"') {
                return -1;
            }
        }
        out[n++] = c;
    }
    if (*s != '"')
        return -1;
    *p = s + 1;
    return (long)n;
}

/* Do got[0, n) and want[0, nw) differ? *bad counts the differences. */
static bool ids_differ(const uint32_t *want, size_t nw, const uint32_t *got, size_t n,
                       size_t *bad)
{
    if (n == nw && !memcmp(got, want, n * sizeof *got))
        return false;
    ++*bad;
    return true;
}

/* Both lists of ids, under a heading the caller printed. */
static void print_ids(const uint32_t *want, size_t nw, const uint32_t *got, size_t n)
{
    fprintf(stderr, "  want");
    for (size_t i = 0; i < nw; i++)
        fprintf(stderr, " %u", want[i]);
    fprintf(stderr, "\n  got ");
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, " %u", got[i]);
    fprintf(stderr, "\n");
}

static void golden(const char *name)
{
    char path[1024], rel[256];
    snprintf(rel, sizeof rel, "tokenizer/golden-%s.txt", name);
    FILE *f = fopen(tku_path(path, sizeof path, rel), "r");
    if (!f)
        fail_msg("%s: cannot open", path);
    sb_rt_tok *t = tku_vocab(name);
    sb_rt_tok_info info;
    sb_rt_tok_get_info(t, &info);
    size_t line_cap = 1 << 20, cases = 0, bad = 0, lineno = 0;
    char *line = malloc(line_cap), *text = malloc(line_cap);
    uint32_t *want = malloc(line_cap * sizeof *want);
    assert_true(line && text && want);
    while (fgets(line, (int)line_cap, f)) {
        lineno++;
        if (line[0] == '#' || line[0] == '\n')
            continue;
        bool special = !strncmp(line, "special ", 8);
        if (!special && strncmp(line, "plain ", 6))
            fail_msg("%s:%zu: no mode", path, lineno);
        const char *p = line + (special ? 8 : 6);
        long len = unquote(&p, text, line_cap);
        if (len < 0)
            fail_msg("%s:%zu: bad text", path, lineno);
        size_t nw = 0;
        for (char *end;; p = end) {
            unsigned long v = strtoul(p, &end, 10);
            if (end == p)
                break;
            want[nw++] = (uint32_t)v;
        }
        unsigned flags = special ? SB_RT_TOK_PARSE_SPECIAL |
                                       (info.add_bos ? SB_RT_TOK_ADD_BOS : 0) |
                                       (info.add_eos ? SB_RT_TOK_ADD_EOS : 0)
                                 : 0;
        size_t n;
        uint32_t *got = tku_encode(t, text, (size_t)len, flags, &n);
        cases++;
        if (ids_differ(want, nw, got, n, &bad) && bad <= 20) {
            fprintf(stderr, "%s:%zu: %s ids differ from llama.cpp's\n", path, lineno,
                    special ? "special" : "plain");
            print_ids(want, nw, got, n);
        }
        free(got);
    }
    fclose(f);
    free(line), free(text), free(want);
    sb_rt_tok_free(t);
    printf("%s: %zu of %zu cases agree with llama.cpp\n", name, cases - bad, cases);
    assert_true(cases >= 600);
    assert_int_equal(bad, 0);
}

/* The whole file at path, NUL-terminated, into *out (*len bytes; the
 * caller frees); fails the test when it does not read. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("%s: cannot open", path);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    for (size_t got; (got = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += got;
        if (cap - n == 1) {
            buf = realloc(buf, cap *= 2);
            assert_non_null(buf);
        }
    }
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}

static void vectors(const char *name)
{
    static const char sep[] = "\n__ggml_vocab_test__\n";
    char path[1024], out_path[1024];
    tku_vocab_path(path, sizeof path - 4, name);
    memcpy(out_path, path, strlen(path) + 1);
    strcat(path, ".inp");
    strcat(out_path, ".out");
    size_t inp_len, out_len;
    char *inp = slurp(path, &inp_len), *out = slurp(out_path, &out_len);
    sb_rt_tok *t = tku_vocab(name);
    size_t cases = 0, bad = 0;
    uint32_t *want = malloc(out_len * sizeof *want + 1);
    assert_non_null(want);
    char *text = inp, *line = out;
    while (text < inp + inp_len) {
        char *end = strstr(text, sep);
        if (!end)
            fail_msg("%s: a text after the last separator", path);
        if (line >= out + out_len)
            fail_msg("%s: fewer lines than %s has texts", out_path, path);
        char *eol = strchr(line, '\n');
        eol = eol ? eol : out + out_len;
        *eol = '\0';
        size_t nw = 0;
        for (char *p = line, *q;; p = q) {
            unsigned long v = strtoul(p, &q, 10);
            if (q == p)
                break;
            want[nw++] = (uint32_t)v;
        }
        size_t n;
        uint32_t *got = tku_encode(t, text, (size_t)(end - text), 0, &n);
        cases++;
        if (ids_differ(want, nw, got, n, &bad) && bad <= 20) {
            fprintf(stderr, "%s: vector %zu (\"%.*s\") differs from llama.cpp's\n", name,
                    cases, (int)(end - text > 60 ? 60 : end - text), text);
            print_ids(want, nw, got, n);
        }
        free(got);
        text = end + sizeof sep - 1;
        line = eol + 1;
    }
    if (line < out + out_len)
        fail_msg("%s: more lines than %s has texts", out_path, path);
    free(inp), free(out), free(want);
    sb_rt_tok_free(t);
    printf("%s: %zu of %zu vectors agree with llama.cpp\n", name, cases - bad, cases);
    assert_true(cases >= 40);
    assert_int_equal(bad, 0);
}

static void vectors_llama_spm(void **state) { (void)state; vectors("llama-spm"); }
static void vectors_phi_3(void **state) { (void)state; vectors("phi-3"); }
static void vectors_llama_bpe(void **state) { (void)state; vectors("llama-bpe"); }
static void vectors_qwen2(void **state) { (void)state; vectors("qwen2"); }
static void vectors_gpt_2(void **state) { (void)state; vectors("gpt-2"); }
static void vectors_qwen35(void **state) { (void)state; vectors("qwen35"); }
static void vectors_mpt(void **state) { (void)state; vectors("mpt"); }

static void llama_spm(void **state) { (void)state; golden("llama-spm"); }
static void phi_3(void **state) { (void)state; golden("phi-3"); }
static void llama_bpe(void **state) { (void)state; golden("llama-bpe"); }
static void qwen2(void **state) { (void)state; golden("qwen2"); }
static void gpt_2(void **state) { (void)state; golden("gpt-2"); }
static void qwen35(void **state) { (void)state; golden("qwen35"); }
static void mpt(void **state) { (void)state; golden("mpt"); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(llama_spm), cmocka_unit_test(phi_3), cmocka_unit_test(llama_bpe),
        cmocka_unit_test(qwen2), cmocka_unit_test(gpt_2), cmocka_unit_test(qwen35),
        cmocka_unit_test(mpt),
        cmocka_unit_test(vectors_llama_spm), cmocka_unit_test(vectors_phi_3),
        cmocka_unit_test(vectors_llama_bpe), cmocka_unit_test(vectors_qwen2),
        cmocka_unit_test(vectors_gpt_2), cmocka_unit_test(vectors_qwen35),
        cmocka_unit_test(vectors_mpt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
