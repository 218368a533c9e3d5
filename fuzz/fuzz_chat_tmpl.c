/* fuzz_chat_tmpl.c -- libFuzzer harness: chat templates
 * (runtime/template/chat_tmpl.h) made from arbitrary text and rendered under
 * small limits, checked against a reference model of the spans.
 *
 * Property. sb_rt_chat_tmpl_new either refuses the template with a
 * documented code (SB_ERR_INVAL, SB_ERR_UNSUPPORTED, SB_ERR_RANGE,
 * SB_ERR_NOMEM), leaving *out untouched, or makes one whose name is a
 * family or "jinja". Rendering the input's conversation either fails with
 * a documented code (the same, and *out untouched) or gives:
 *   - text NUL-terminated at len, valid UTF-8, within max_output_bytes;
 *   - spans sorted, disjoint, not adjacent, non-empty, inside the text;
 *   - the same text and spans when rendered again (no hidden state);
 *   - the reference model of taint: message content is written in a
 *     private alphabet (CJK ideographs U+4E00..U+4E3F and spaces). When the
 *     template source holds neither a backslash nor any byte 0xE4 (the
 *     lead byte of that range), no template text can spell those
 *     characters, so every one in the output came from content and must lie
 *     inside a span; and no span may hold a character the caller could not
 *     have given (only the alphabet, spaces, the role names' letters,
 *     digits and the characters escapes write: \ " ' & # ;).
 * Nothing crashes, leaks or loops: every limit is small here (memory 16
 * MiB, output 256 KiB, 10,000 iterations, 300,000 steps, depth 64), so an
 * input costs well under a second even under the sanitizers.
 *
 * Input: byte 0: bit 0 add_generation_prompt, bit 1 name "jinja" (else
 * detect), bits 2-4 a family name to force (0: none; 1..6 chatml, llama3,
 * llama2, mistral, gemma, phi3); byte 1: messages - 1 (mod 6); bytes 2..7:
 * one per message, role (bits 0-1: system, user, assistant, tool) and
 * content (bits 2-7: a length, 0..63 characters of the alphabet, picked by
 * a hash of the input); the rest: the template source. Seeds:
 * fuzz/corpus/chat_tmpl/ (gen_chat_tmpl_seeds.py).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/chat_tmpl.h"
#include "snapbank.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FAIL(...)                                                              \
    do {                                                                       \
        fprintf(stderr, "fuzz_chat_tmpl: " __VA_ARGS__);                       \
        fputc('\n', stderr);                                                   \
        abort();                                                               \
    } while (0)

#define HEADER 8

static const char *const roles[] = { "system", "user", "assistant", "tool" };
static const char *const families[] = { NULL, "chatml", "llama3", "llama2", "mistral", "gemma",
                                        "phi3" };

static bool documented(int rc)
{
    return rc == SB_ERR_INVAL || rc == SB_ERR_UNSUPPORTED || rc == SB_ERR_RANGE ||
           rc == SB_ERR_NOMEM;
}

/* decode one UTF-8 character of valid text */
static uint32_t dec(const unsigned char *s, size_t *adv)
{
    if (s[0] < 0x80) {
        *adv = 1;
        return s[0];
    }
    if (s[0] < 0xE0) {
        *adv = 2;
        return ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F);
    }
    if (s[0] < 0xF0) {
        *adv = 3;
        return ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    }
    *adv = 4;
    return ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
           ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
}

static bool valid_utf8(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned char b = s[i];
        size_t k = b < 0x80 ? 0 : b >= 0xC2 && b <= 0xDF ? 1 : b >= 0xE0 && b <= 0xEF ? 2
                 : b >= 0xF0 && b <= 0xF4 ? 3 : 9;
        if (k == 9 || n - i <= k)
            return false;
        for (size_t j = 1; j <= k; j++)
            if ((s[i + j] & 0xC0) != 0x80)
                return false;
        if (k) {
            size_t adv;
            uint32_t cp = dec(s + i, &adv);
            if ((k == 2 && cp < 0x800) || (k == 3 && (cp < 0x10000 || cp > 0x10FFFF)) ||
                (cp >= 0xD800 && cp < 0xE000))
                return false;
        }
        i += k + 1;
    }
    return true;
}

static bool caller_char(uint32_t cp)
{
    if ((cp >= 0x4E00 && cp <= 0x4E3F) || cp == ' ' || (cp >= '0' && cp <= '9'))
        return true;
    if (cp < 0x80 && strchr("\\\"'&#;", (int)cp))
        return true;
    if (cp < 0x80 && ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z'))
        return strchr("systemurainol", (int)(cp | 0x20)) != NULL; /* role letters */
    return false;
}

static void check_text(const sb_rt_chat_text *x, const sb_rt_chat_limits *lim, bool oracle)
{
    if (!x->text || x->text[x->len] != '\0')
        FAIL("text not NUL-terminated at len %zu", x->len);
    if (x->len > lim->max_output_bytes)
        FAIL("text of %zu bytes over max_output_bytes", x->len);
    if (!valid_utf8((const unsigned char *)x->text, x->len))
        FAIL("text not valid UTF-8");
    if ((x->n_spans == 0) != (x->spans == NULL))
        FAIL("spans pointer and count disagree");
    size_t end = 0;
    for (size_t i = 0; i < x->n_spans; i++) {
        if (!x->spans[i].len || (i && x->spans[i].off <= end) ||
            x->spans[i].off + x->spans[i].len > x->len)
            FAIL("span %zu (%zu, %zu) not sorted, disjoint, non-empty and inside %zu bytes", i,
                 x->spans[i].off, x->spans[i].len, x->len);
        end = x->spans[i].off + x->spans[i].len;
    }
    if (!oracle)
        return;
    size_t s = 0;
    for (size_t i = 0, adv; i < x->len; i += adv) {
        uint32_t cp = dec((const unsigned char *)x->text + i, &adv);
        while (s < x->n_spans && x->spans[s].off + x->spans[s].len <= i)
            s++;
        bool in = s < x->n_spans && x->spans[s].off <= i;
        if (in && i + adv > x->spans[s].off + x->spans[s].len)
            FAIL("span %zu ends inside a character at %zu", s, i);
        if (cp >= 0x4E00 && cp <= 0x4E3F && !in)
            FAIL("content character U+%04X at byte %zu outside every span", cp, i);
        /* Content through tojson is content still, JSON-escaped: \uXXXX
         * for the private alphabet's characters (and for ' & < >, as Jinja
         * escapes them), in any order a filter such as reverse leaves the
         * characters: so a span may also hold '\\', 'u' and hex digits. */
        bool escape = cp == '\\' || cp == 'u' || cp == 'U' ||
                      ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'f');
        if (in && !caller_char(cp) && !escape)
            FAIL("span %zu holds U+%04X at byte %zu, which the caller never gave", s, cp, i);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < HEADER)
        return 0;
    sb_rt_chat_limits lim;
    sb_rt_chat_limits_default(&lim);
    lim.max_source_bytes = 64 << 10;
    lim.max_output_bytes = 256 << 10;
    lim.max_memory_bytes = 16 << 20;
    lim.max_iterations = 10000;
    lim.max_steps = 300000;
    lim.max_depth = 64;

    bool gen = data[0] & 1;
    unsigned fam = (data[0] >> 2) & 7;
    const char *name = data[0] & 2 ? "jinja" : fam < 7 ? families[fam] : NULL;
    size_t n = (size_t)data[1] % 6 + 1;
    char *src = malloc(size - HEADER + 1);
    if (!src)
        return 0;
    memcpy(src, data + HEADER, size - HEADER);
    src[size - HEADER] = '\0';
    bool oracle = !memchr(src, '\\', size - HEADER) && !memchr(src, 0xE4, size - HEADER);

    /* the conversation: contents in the private alphabet */
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < size; i++)
        h = (h ^ data[i]) * 16777619u;
    sb_rt_chat_msg msgs[6];
    char content[6][64 * 3 + 1];
    for (size_t i = 0; i < n; i++) {
        uint8_t b = data[2 + i];
        msgs[i].role = roles[b & 3];
        size_t len = b >> 2, o = 0;
        for (size_t k = 0; k < len; k++) {
            h = h * 1103515245u + 12345u;
            if ((h >> 16) % 5 == 0) {
                content[i][o++] = ' ';
            } else {
                uint32_t cp = 0x4E00 + (h >> 20) % 64;
                content[i][o++] = (char)(0xE0 | (cp >> 12));
                content[i][o++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                content[i][o++] = (char)(0x80 | (cp & 0x3F));
            }
        }
        content[i][o] = '\0';
        msgs[i].content = content[i];
    }

    sb_rt_chat_tmpl *t = (sb_rt_chat_tmpl *)&lim; /* a sentinel: must stay on failure */
    sb_rt_err err = { 0 };
    int rc = sb_rt_chat_tmpl_new_ex(src, name, "<s>", "</s>", &lim, &t, &err);
    if (rc != SB_OK) {
        if (!documented(rc))
            FAIL("creation returned %d (%s)", rc, err.msg);
        if (t != (sb_rt_chat_tmpl *)&lim)
            FAIL("creation failed (%d) but wrote *out", rc);
        free(src);
        return 0;
    }
    const char *tn = sb_rt_chat_tmpl_name(t);
    bool known = !strcmp(tn, "jinja");
    for (size_t f = 1; f < sizeof families / sizeof families[0]; f++)
        known |= !strcmp(tn, families[f]);
    if (!known)
        FAIL("template named '%s'", tn);

    sb_rt_chat_text x = { .text = (char *)"sentinel" }, y;
    rc = sb_rt_chat_render(t, msgs, n, gen, &x, &err);
    if (rc != SB_OK) {
        if (!documented(rc))
            FAIL("render returned %d (%s)", rc, err.msg);
        if (strcmp(x.text, "sentinel"))
            FAIL("render failed (%d) but wrote *out", rc);
    } else {
        check_text(&x, &lim, oracle);
        int rc2 = sb_rt_chat_render(t, msgs, n, gen, &y, &err);
        if (rc2 != SB_OK)
            FAIL("a second render failed (%d: %s) where the first did not", rc2, err.msg);
        if (y.len != x.len || memcmp(y.text, x.text, x.len) || y.n_spans != x.n_spans ||
            (x.n_spans && memcmp(y.spans, x.spans, x.n_spans * sizeof *x.spans)))
            FAIL("two renders of the same conversation differ");
        sb_rt_chat_text_free(&y);
        sb_rt_chat_text_free(&x);
    }
    sb_rt_chat_tmpl_free(t);
    free(src);
    return 0;
}
