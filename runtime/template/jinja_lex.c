/* jinja_lex.c -- template source to tokens, by jinja2 3.1's lexing rules
 * with trim_blocks and lstrip_blocks on (how Hugging Face, and so every
 * model vendor, renders chat templates):
 *
 *   1. Line breaks \r\n and \r become \n; one trailing \n is dropped.
 *   2. Text runs up to the next `{{`, `{%` or `{#`. Before the opener:
 *      `{%-` (any `-` opener) strips all whitespace from the end of the text;
 *      otherwise, for `{%` and `{#` without `+`, spaces and tabs between the
 *      last line break (or the start of a line) and the opener are dropped.
 *   3. After a tag: `-%}` (`-}}`, `-#}`) strips all whitespace that follows;
 *      `%}` and `#}` eat one following \n (trim_blocks); `+%}` eats nothing.
 *   4. Inside a tag: whitespace, numbers, names, strings, operators; the
 *      closer counts only where brackets are balanced.
 *   5. `{% raw %}...{% endraw %}` is text.
 * "Whitespace" is Python's (str.isspace), as jinja2's \s is. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "template/jinja_parse.h"

/* ---- names --------------------------------------------------------------------------- */

static uint64_t hash_name(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

const char *sb_rt_jintern(jnames *p, const char *s, size_t n)
{
    if (p->n_names * 2 >= p->cap_names) {
        size_t nc = p->cap_names ? p->cap_names * 2 : 256;
        const char **nt = sb_rt_ja_alloc(p->a, nc * sizeof *nt);
        for (size_t k = 0; k < p->cap_names; k++) {
            const char *x = p->names[k];
            if (!x)
                continue;
            size_t h = hash_name(x, strlen(x)) & (nc - 1);
            while (nt[h])
                h = (h + 1) & (nc - 1);
            nt[h] = x;
        }
        p->names = nt;
        p->cap_names = nc;
    }
    size_t h = hash_name(s, n) & (p->cap_names - 1);
    while (p->names[h]) {
        if (!strncmp(p->names[h], s, n) && p->names[h][n] == '\0')
            return p->names[h];
        h = (h + 1) & (p->cap_names - 1);
    }
    const char *x = sb_rt_ja_dup(p->a, s, n);
    p->names[h] = x;
    p->n_names++;
    return x;
}

/* ---- text ----------------------------------------------------------------------------- */

static bool ws_at(const char *s, size_t n, size_t i, size_t *adv)
{
    uint32_t cp = sb_rt_utf8_dec(s + i, n - i, adv);
    return sb_rt_uc_isspace(cp);
}

static size_t skip_ws(const char *s, size_t n, size_t i)
{
    size_t adv;
    while (i < n && ws_at(s, n, i, &adv))
        i += adv;
    return i;
}

/* length of the text after removing trailing whitespace */
static size_t rstrip_len(const char *s, size_t n)
{
    size_t z = n;
    while (z > 0) {
        size_t p = z - 1, adv;
        while (p > 0 && ((unsigned char)s[p] & 0xC0) == 0x80)
            p--;
        if (!ws_at(s, z, p, &adv))
            break;
        z = p;
    }
    return z;
}

/* rule 2 on text[0, n): the length kept */
static size_t strip_before(const char *text, size_t n, char sign, bool lstrip, bool line_starting)
{
    if (sign == '-')
        return rstrip_len(text, n);
    if (sign == '+' || !lstrip)
        return n;
    size_t l = n;
    while (l > 0 && text[l - 1] != '\n')
        l--;
    if (l == 0 && !line_starting)
        return n;
    if (l == n)
        return n;
    if (skip_ws(text, n, l) == n)
        return l;
    return n;
}

static void push(jlexer *L, jtok t)
{
    if (L->n == L->cap)
        L->toks = sb_rt_ja_grow(L->a, L->toks, L->n, &L->cap, 256, sizeof *L->toks);
    L->toks[L->n++] = t;
}

/* the line of pos (counted on from the last answer: tokens come in order) */
static uint32_t line_at(jlexer *L, size_t pos)
{
    if (pos < L->line_pos || L->line_line == 0) {
        L->line_pos = 0;
        L->line_line = 1;
    }
    for (size_t i = L->line_pos; i < pos && i < L->n_src; i++)
        L->line_line += L->src[i] == '\n';
    L->line_pos = pos;
    return L->line_line;
}

#define LFAIL(L, pos, code, ...)                                                                   \
    (L->c->line = line_at(L, pos), sb_rt_jfail(L->c, code, __VA_ARGS__))

static void push_data(jlexer *L, size_t pos, const char *s, size_t n)
{
    if (!n)
        return;
    jtok t = { .kind = JT_DATA, .line = line_at(L, pos), .s = s, .len = n };
    push(L, t);
}

static int hexv(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* a string literal's value: Python's unicode-escape decoding of the body */
static void decode_string(jlexer *L, size_t pos, const char *s, size_t n, jtok *t)
{
    char *o = sb_rt_ja_alloc(L->a, n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        if (s[i] != '\\' || i + 1 == n) {
            o[k++] = s[i++];
            continue;
        }
        char e = s[i + 1];
        i += 2;
        uint32_t cp;
        int digits = 0;
        switch (e) {
        case '\n': continue;
        case '\\': o[k++] = '\\'; continue;
        case '\'': o[k++] = '\''; continue;
        case '"': o[k++] = '"'; continue;
        case 'a': o[k++] = '\a'; continue;
        case 'b': o[k++] = '\b'; continue;
        case 'f': o[k++] = '\f'; continue;
        case 'n': o[k++] = '\n'; continue;
        case 'r': o[k++] = '\r'; continue;
        case 't': o[k++] = '\t'; continue;
        case 'v': o[k++] = '\v'; continue;
        case 'x': digits = 2; break;
        case 'u': digits = 4; break;
        case 'U': digits = 8; break;
        case 'N':
            LFAIL(L, pos, SB_ERR_UNSUPPORTED, "\\N{...} escapes in string literals are not supported");
        default:
            if (e >= '0' && e <= '7') { /* up to three octal digits */
                cp = (uint32_t)(e - '0');
                for (int j = 0; j < 2 && i < n && s[i] >= '0' && s[i] <= '7'; j++)
                    cp = cp * 8 + (uint32_t)(s[i++] - '0');
                k += sb_rt_utf8_enc(cp, o + k);
                continue;
            }
            o[k++] = '\\'; /* unknown escapes stay as they are */
            i--;
            continue;
        }
        cp = 0;
        for (int j = 0; j < digits; j++) {
            int h = i < n ? hexv(s[i]) : -1;
            if (h < 0)
                LFAIL(L, pos, SB_ERR_INVAL, "truncated \\%c escape in a string literal", e);
            cp = cp * 16 + (uint32_t)h;
            i++;
        }
        if (cp > 0x10FFFF)
            LFAIL(L, pos, SB_ERR_INVAL, "illegal Unicode character in a string literal");
        if (cp >= 0xD800 && cp < 0xE000)
            LFAIL(L, pos, SB_ERR_UNSUPPORTED, "a lone surrogate in a string literal");
        k += sb_rt_utf8_enc(cp, o + k);
    }
    t->s = o;
    t->len = k;
}

static bool isdig(char ch)
{
    return ch >= '0' && ch <= '9';
}

/* digits with single underscores between them: (\d+_)*\d+ */
static size_t scan_digits(const char *s, size_t n, size_t i)
{
    size_t j = i;
    if (j >= n || !isdig(s[j]))
        return i;
    while (j < n && isdig(s[j]))
        j++;
    while (j + 1 < n && s[j] == '_' && isdig(s[j + 1])) {
        j++;
        while (j < n && isdig(s[j]))
            j++;
    }
    return j;
}

/* a float at i (float_re); the end, or i when none */
static size_t scan_float(const char *s, size_t n, size_t i)
{
    if (i > 0 && s[i - 1] == '.')
        return i;
    size_t j = scan_digits(s, n, i);
    if (j == i)
        return i;
    size_t frac = j;
    if (j < n && s[j] == '.') {
        size_t k = scan_digits(s, n, j + 1);
        if (k > j + 1)
            frac = k;
    }
    if (frac < n && (s[frac] == 'e' || s[frac] == 'E')) {
        size_t k = frac + 1;
        if (k < n && (s[k] == '+' || s[k] == '-'))
            k++;
        size_t e = scan_digits(s, n, k);
        if (e > k)
            return e;
    }
    return frac > j ? frac : i;
}

/* an integer at i (integer_re); the end, or i when none */
static size_t scan_int(const char *s, size_t n, size_t i, int *base)
{
    *base = 10;
    if (i + 1 < n && s[i] == '0' && strchr("bBoOxX", s[i + 1]) && s[i + 1]) {
        char b = (char)(s[i + 1] | 0x20);
        *base = b == 'b' ? 2 : b == 'o' ? 8 : 16;
        size_t j = i + 2, got = 0;
        for (;;) {
            size_t k = j;
            if (k < n && s[k] == '_')
                k++;
            int h = k < n ? hexv(s[k]) : -1;
            if (h < 0 || h >= *base)
                break;
            j = k + 1;
            got++;
        }
        if (got)
            return j;
        *base = 10; /* "0" alone, then a name */
    }
    if (i < n && s[i] >= '1' && s[i] <= '9') {
        size_t j = i + 1;
        for (;;) {
            size_t k = j;
            if (k < n && s[k] == '_')
                k++;
            if (k < n && isdig(s[k]))
                j = k + 1;
            else
                break;
        }
        return j;
    }
    if (i < n && s[i] == '0') {
        size_t j = i + 1;
        for (;;) {
            size_t k = j;
            if (k < n && s[k] == '_')
                k++;
            if (k < n && s[k] == '0')
                j = k + 1;
            else
                break;
        }
        return j;
    }
    return i;
}

static const char *const ops[] = { /* longest first, as jinja2's operator_re */
    "//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[", "]", "(", ")",
    "{", "}", ">", "<", "=", ".", ":", "|", ",", ";",
};

/* the tokens of one tag from i; returns the position after its closer */
static size_t lex_tag(jlexer *L, size_t i, char kind, bool *line_starting)
{
    const char *s = L->src;
    size_t n = L->n_src;
    size_t max = L->c->lim->max_depth, depth = 0;
    if (!L->brackets)
        L->brackets = sb_rt_ja_alloc(L->a, max + 1);
    char *stack = L->brackets; /* the closers still open */
    for (;;) {
        if (i >= n)
            return n; /* the parser reports the missing closer */
        if (depth == 0) {
            size_t end = 0;
            if (kind == '%') {
                if (!strncmp(s + i, "+%}", 3))
                    end = i + 3;
                else if (!strncmp(s + i, "-%}", 3))
                    end = skip_ws(s, n, i + 3);
                else if (!strncmp(s + i, "%}", 2))
                    end = i + 2 + (i + 2 < n && s[i + 2] == '\n');
            } else {
                if (!strncmp(s + i, "-}}", 3))
                    end = skip_ws(s, n, i + 3);
                else if (!strncmp(s + i, "}}", 2))
                    end = i + 2;
            }
            if (end) {
                jtok t = { .kind = kind == '%' ? JT_BLOCK_END : JT_VAR_END, .line = line_at(L, i) };
                push(L, t);
                *line_starting = s[end - 1] == '\n';
                return end;
            }
        }
        size_t adv;
        if (ws_at(s, n, i, &adv)) {
            i = skip_ws(s, n, i);
            continue;
        }
        jtok t = { .line = line_at(L, i), .s = s + i };
        size_t j = scan_float(s, n, i);
        int base;
        if (j > i) {
            char buf[128];
            size_t k = 0;
            for (size_t q = i; q < j && k + 1 < sizeof buf; q++)
                if (s[q] != '_')
                    buf[k++] = s[q];
            buf[k] = '\0';
            t.kind = JT_FLOAT;
            t.f = strtod(buf, NULL);
            t.len = j - i;
            push(L, t);
            i = j;
            continue;
        }
        j = scan_int(s, n, i, &base);
        if (j > i) {
            uint64_t v = 0;
            size_t q = base == 10 ? i : i + 2;
            for (; q < j; q++) {
                if (s[q] == '_')
                    continue;
                int h = hexv(s[q]);
                if (v > (uint64_t)(INT64_MAX - h) / (uint64_t)base)
                    LFAIL(L, i, SB_ERR_UNSUPPORTED, "integer literal over 64 bits");
                v = v * (uint64_t)base + (uint64_t)h;
            }
            t.kind = JT_INT;
            t.i = (int64_t)v;
            t.len = j - i;
            push(L, t);
            i = j;
            continue;
        }
        unsigned char ch = (unsigned char)s[i];
        if (ch == '_' || ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'z')) {
            j = i + 1;
            while (j < n && (s[j] == '_' || isdig(s[j]) || ((s[j] | 0x20) >= 'a' && (s[j] | 0x20) <= 'z')))
                j++;
            if (j < n && (unsigned char)s[j] >= 0x80)
                LFAIL(L, i, SB_ERR_UNSUPPORTED, "non-ASCII names are not supported");
            t.kind = JT_NAME;
            t.len = j - i;
            t.s = sb_rt_jintern(L->names, s + i, j - i);
            push(L, t);
            i = j;
            continue;
        }
        if (ch == '\'' || ch == '"') {
            j = i + 1;
            while (j < n && s[j] != (char)ch)
                j += s[j] == '\\' && j + 1 < n ? 2 : 1;
            if (j >= n)
                LFAIL(L, i, SB_ERR_INVAL, "unexpected char '%c' at %zu (an unterminated string)",
                      ch, i);
            t.kind = JT_STRING;
            decode_string(L, i, s + i + 1, j - i - 1, &t);
            push(L, t);
            i = j + 1;
            continue;
        }
        const char *op = NULL;
        for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++)
            if (!strncmp(s + i, ops[k], strlen(ops[k]))) {
                op = ops[k];
                break;
            }
        if (!op) {
            if (ch >= 0x80)
                LFAIL(L, i, SB_ERR_INVAL, "unexpected character at %zu", i);
            LFAIL(L, i, SB_ERR_INVAL, "unexpected char '%c' at %zu", ch, i);
        }
        if (op[0] == '(' || op[0] == '[' || op[0] == '{') {
            if (depth == max)
                LFAIL(L, i, SB_ERR_RANGE, "brackets nest deeper than %zu (max_depth)", max);
            stack[depth++] = op[0] == '(' ? ')' : op[0] == '[' ? ']' : '}';
        } else if (op[0] == ')' || op[0] == ']' || op[0] == '}') {
            if (!depth)
                LFAIL(L, i, SB_ERR_INVAL, "unexpected '%c'", op[0]);
            if (stack[--depth] != op[0])
                LFAIL(L, i, SB_ERR_INVAL, "unexpected '%c', expected '%c'", op[0], stack[depth]);
        }
        t.kind = JT_OP;
        t.len = strlen(op);
        t.s = op;
        push(L, t);
        i += t.len;
    }
}

/* `{%[-+]? WORD` and the whitespace after it, at p: where it ends, or 0 */
static size_t tag_word(const char *s, size_t n, size_t p, const char *word)
{
    size_t i = p + 2, w = strlen(word);
    if (i < n && (s[i] == '-' || s[i] == '+'))
        i++;
    i = skip_ws(s, n, i);
    if (n - i < w || strncmp(s + i, word, w))
        return 0;
    return skip_ws(s, n, i + w);
}

/* `{%[-+]? raw %}` at p: the end of the match, or 0 */
static size_t raw_begin(const char *s, size_t n, size_t p)
{
    size_t i = tag_word(s, n, p, "raw");
    if (!i)
        return 0;
    if (!strncmp(s + i, "-%}", 3))
        return skip_ws(s, n, i + 3);
    if (!strncmp(s + i, "%}", 2))
        return i + 2;
    return 0;
}

/* `{%[-+]? endraw (+%}|-%}\s*|%}\n?)` at p: the end, or 0 */
static size_t raw_end(const char *s, size_t n, size_t p)
{
    size_t i = tag_word(s, n, p, "endraw");
    if (!i)
        return 0;
    if (!strncmp(s + i, "+%}", 3))
        return i + 3;
    if (!strncmp(s + i, "-%}", 3))
        return skip_ws(s, n, i + 3);
    if (!strncmp(s + i, "%}", 2))
        return i + 2 + (i + 2 < n && s[i + 2] == '\n');
    return 0;
}

void sb_rt_jlex(jlexer *L, const char *source, size_t len)
{
    /* 1. line breaks; one trailing \n dropped */
    char *s = sb_rt_ja_alloc(L->a, len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (source[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && source[i + 1] == '\n')
                i++;
        } else {
            s[n++] = source[i];
        }
    }
    if (n && s[n - 1] == '\n')
        n--;
    L->src = s;
    L->n_src = n;

    size_t pos = 0;
    bool line_starting = true;
    while (pos < n) {
        size_t p = pos;
        while (p + 1 < n && !(s[p] == '{' && (s[p + 1] == '{' || s[p + 1] == '%' || s[p + 1] == '#')))
            p++;
        if (p + 1 >= n) {
            push_data(L, pos, s + pos, n - pos);
            break;
        }
        char kind = s[p + 1];
        char sign = p + 2 < n && (s[p + 2] == '-' || s[p + 2] == '+') ? s[p + 2] : 0;
        /* 2. the text before the opener */
        size_t keep = strip_before(s + pos, p - pos, sign, kind != '{', line_starting);
        push_data(L, pos, s + pos, keep);
        size_t rb = kind == '%' ? raw_begin(s, n, p) : 0;
        if (rb) { /* 5. raw text up to the first endraw */
            bool ls = s[rb - 1] == '\n';
            size_t q = rb, re = 0;
            for (; q + 1 < n; q++)
                if (s[q] == '{' && s[q + 1] == '%' && (re = raw_end(s, n, q)))
                    break;
            if (!re)
                LFAIL(L, p, SB_ERR_INVAL, "Missing end of raw directive");
            char rsign = s[q + 2] == '-' || s[q + 2] == '+' ? s[q + 2] : 0;
            push_data(L, rb, s + rb, strip_before(s + rb, q - rb, rsign, true, ls));
            pos = re;
            line_starting = s[re - 1] == '\n';
            continue;
        }
        size_t q = p + 2 + (sign ? 1 : 0);
        if (kind == '#') { /* comments: nothing but the whitespace rules */
            size_t end = 0;
            for (size_t k = q; k + 1 < n && !end; k++) {
                if (s[k] == '+' && k + 2 < n && s[k + 1] == '#' && s[k + 2] == '}')
                    end = k + 3;
                else if (s[k] == '-' && k + 2 < n && s[k + 1] == '#' && s[k + 2] == '}')
                    end = skip_ws(s, n, k + 3);
                else if (s[k] == '#' && s[k + 1] == '}')
                    end = k + 2 + (k + 2 < n && s[k + 2] == '\n');
            }
            if (!end)
                LFAIL(L, p, SB_ERR_INVAL, "Missing end of comment tag");
            pos = end;
            line_starting = s[end - 1] == '\n';
            continue;
        }
        jtok t = { .kind = kind == '%' ? JT_BLOCK_BEGIN : JT_VAR_BEGIN, .line = line_at(L, p) };
        push(L, t);
        pos = lex_tag(L, q, kind, &line_starting);
    }
    jtok eof = { .kind = JT_EOF, .line = line_at(L, n) };
    push(L, eof);
}
