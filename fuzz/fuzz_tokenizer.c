/* fuzz_tokenizer.c -- libFuzzer harness: the tokenizer
 * (runtime/text/tokenizer.h) on arbitrary text, flags and literal spans,
 * over small vocabularies of both kinds built per input.
 *
 * Property. For any input:
 *   - sb_rt_tok_encode_ex returns SB_ERR_INVAL exactly when the spans are
 *     out of order, overlapping or past the text, else SB_OK; every id is
 *     in range; asked again with half the room it returns SB_ERR_RANGE, the
 *     same count and the same first ids; encode_ex with no spans equals
 *     encode;
 *   - BOS comes first and EOS last exactly when asked (the vocabularies
 *     have both);
 *   - control and unknown-type tokens only with PARSE_SPECIAL
 *     (user-defined ones always match, as in llama.cpp), and no special
 *     token from bytes a literal span touches;
 *   - decode(encode(x)) == x: byte-level BPE always (special texts parsed
 *     and shown, or not parsed), SentencePiece when no special text is
 *     parsed and x holds no U+2581; a strip rule only ever drops white
 *     space;
 *   - the pieces of the ids, joined, are the decoded text.
 * Nothing is read outside the input (ASan), nothing leaks per input.
 *
 * Input: byte 0: bit 0 the kind (0 SentencePiece, 1 byte-level BPE), bits
 * 1-2 the pre-tokenizer (gpt-2, llama-bpe, qwen2, smollm), bit 3
 * PARSE_SPECIAL, bit 4 the qwen35 pre-tokenizer instead of bits 1-2's
 * (it was PARSE_USER, now the behaviour without PARSE_SPECIAL), bit 5 ADD_BOS, bit 6 ADD_EOS, bit 7
 * RSTRIP on the user-defined token; byte 1: the number of literal spans
 * (its low 2 bits), then 2 bytes per span (offset, length); the rest is the
 * text. Seeds: fuzz/corpus/tokenizer/.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FAIL(...)                                                              \
    do {                                                                       \
        fprintf(stderr, "fuzz_tokenizer: " __VA_ARGS__);                       \
        fputc('\n', stderr);                                                   \
        abort();                                                               \
    } while (0)

#define SP "\xe2\x96\x81"

/* The special tokens both vocabularies end with. */
static const struct { const char *text; int type; } specials[] = {
    { "<s>", SB_RT_TOK_CONTROL }, { "</s>", SB_RT_TOK_CONTROL },
    { "<|im_start|>", SB_RT_TOK_CONTROL }, { "<|im_end|>", SB_RT_TOK_CONTROL },
    { "<u>", SB_RT_TOK_USER }, { "<u>x", SB_RT_TOK_USER }, { "[x]", SB_RT_TOK_UNKNOWN },
};
#define N_SPECIAL (sizeof specials / sizeof *specials)

typedef struct vocab {
    const char *p[600];
    size_t len[600];
    float score[600];
    int32_t type[600];
    uint8_t strip[600];
    char store[600][8];
    const char *merge[16];
    size_t merge_len[16];
    uint32_t n, n_merges, bos, eos, user;
} vocab;

static void add(vocab *v, const char *s, size_t len, float score, int32_t type)
{
    v->p[v->n] = s, v->len[v->n] = len, v->score[v->n] = score, v->type[v->n] = type;
    v->n++;
}

/* A byte-level BPE vocabulary: the 256 mapped bytes, a few merges. */
static void bpe_vocab(vocab *v)
{
    int k = 0;
    for (int b = 0; b < 256; b++) {
        bool pr = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
        unsigned cp = pr ? (unsigned)b : 256u + (unsigned)k++;
        char *s = v->store[v->n];
        if (cp < 0x80) {
            s[0] = (char)cp;
            add(v, s, 1, 0, SB_RT_TOK_NORMAL);
        } else {
            s[0] = (char)(0xc0 | cp >> 6), s[1] = (char)(0x80 | (cp & 0x3f));
            add(v, s, 2, 0, SB_RT_TOK_NORMAL);
        }
    }
    static const char *const merged[] = { "\xc4\xa0t", "he", "th", "\xc4\xa0the", "in", "er",
                                          "12", "\xc4\xa0\xc4\xa0" };
    static const char *const merges[] = { "\xc4\xa0 t", "h e", "t h", "\xc4\xa0t he", "i n",
                                          "e r", "1 2", "\xc4\xa0 \xc4\xa0" };
    for (size_t i = 0; i < sizeof merged / sizeof *merged; i++) {
        add(v, merged[i], strlen(merged[i]), 0, SB_RT_TOK_NORMAL);
        v->merge[v->n_merges] = merges[i];
        v->merge_len[v->n_merges++] = strlen(merges[i]);
    }
}

/* A SentencePiece vocabulary: <unk>, the byte tokens, some pieces. */
static void spm_vocab(vocab *v)
{
    add(v, "<unk>", 5, 0, SB_RT_TOK_UNKNOWN);
    for (int b = 0; b < 256; b++) {
        snprintf(v->store[v->n], sizeof v->store[v->n], "<0x%02X>", b);
        add(v, v->store[v->n], 6, 0, SB_RT_TOK_BYTE);
    }
    static const char *const pieces[] = { SP, SP "t", "h", "e", "t", "he", SP "the", "in", "a",
                                          SP SP, "12", "\xc3\xa9" };
    for (size_t i = 0; i < sizeof pieces / sizeof *pieces; i++)
        add(v, pieces[i], strlen(pieces[i]), -(float)i, SB_RT_TOK_NORMAL);
}

static sb_rt_tok *make(const vocab *v, bool bpe, unsigned pre, bool strip)
{
    static const char *const pres[5] = { "gpt-2", "llama-bpe", "qwen2", "smollm", "qwen35" };
    sb_rt_tok_spec s;
    sb_rt_tok_spec_init(&s);
    s.n_vocab = v->n, s.pieces = v->p, s.piece_len = v->len, s.scores = v->score;
    s.types = v->type, s.bos = v->bos, s.eos = v->eos, s.unk = bpe ? SB_RT_TOK_NONE : 0;
    s.model = bpe ? "gpt2" : "llama";
    s.pre = bpe ? pres[pre] : NULL;
    s.merges = v->merge, s.merge_len = v->merge_len, s.n_merges = v->n_merges;
    s.add_space_prefix = !bpe;
    s.strip = strip ? v->strip : NULL;
    sb_rt_tok *t;
    sb_rt_err err = { 0 };
    if (sb_rt_tok_new(&s, &t, &err) != SB_OK)
        FAIL("tok_new: %s", err.msg);
    return t;
}

/* Control, user-defined or unknown: what only special matching gives
 * (SentencePiece merges user-defined pieces too, but none here can form). */
static bool special(const sb_rt_tok *t, uint32_t id)
{
    int type = sb_rt_tok_type(t, id);
    return type == SB_RT_TOK_CONTROL || type == SB_RT_TOK_USER || type == SB_RT_TOK_UNKNOWN;
}

static bool is_ws(uint8_t c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    uint8_t f = data[0];
    bool bpe = f & 1, strip = f & 128;
    unsigned pre = (f & 16) ? 4 : (f >> 1) & 3;
    unsigned flags = ((f & 8) ? SB_RT_TOK_PARSE_SPECIAL : 0) |
                     ((f & 32) ? SB_RT_TOK_ADD_BOS : 0) | ((f & 64) ? SB_RT_TOK_ADD_EOS : 0);
    size_t n_sp = data[1] & 3, at = 2;
    if (size < at + 2 * n_sp)
        return 0;
    sb_rt_tok_span sp[3];
    for (size_t i = 0; i < n_sp; i++, at += 2)
        sp[i] = (sb_rt_tok_span){ data[at], data[at + 1] };
    const char *text = (const char *)data + at;
    size_t len = size - at;

    vocab *v = calloc(1, sizeof *v);
    if (!v)
        return 0;
    if (bpe)
        bpe_vocab(v);
    else
        spm_vocab(v);
    uint32_t first = v->n;
    for (size_t i = 0; i < N_SPECIAL; i++)
        add(v, specials[i].text, strlen(specials[i].text), 0, specials[i].type);
    v->bos = first, v->eos = first + 1, v->user = first + 4;
    v->strip[v->user] = SB_RT_TOK_RSTRIP;
    sb_rt_tok *t = make(v, bpe, pre, strip);

    /* spans valid? */
    bool spans_ok = true;
    for (size_t i = 0; i < n_sp; i++)
        if (sp[i].off > len || sp[i].len > len - sp[i].off ||
            (i && sp[i].off < sp[i - 1].off + sp[i - 1].len))
            spans_ok = false;
    size_t n = 0;
    int rc = sb_rt_tok_encode_ex(t, text, len, flags, sp, n_sp, NULL, 0, &n);
    if (!spans_ok) {
        if (rc != SB_ERR_INVAL)
            FAIL("bad spans: rc %d", rc);
        goto out;
    }
    if (rc != SB_OK && rc != SB_ERR_RANGE)
        FAIL("encode: rc %d", rc);
    uint32_t *ids = malloc((n + 1) * sizeof *ids), *half = malloc((n + 1) * sizeof *half);
    char *back = malloc(2 * len + 64), *joined = malloc(2 * len + 64);
    size_t m, bl, jl = 0;
    if (sb_rt_tok_encode_ex(t, text, len, flags, sp, n_sp, ids, n, &m) != SB_OK || m != n)
        FAIL("encode: a second count differs");
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= v->n)
            FAIL("id %u out of range", ids[i]);
    if (n >= 2) {
        if (sb_rt_tok_encode_ex(t, text, len, flags, sp, n_sp, half, n / 2, &m) != SB_ERR_RANGE ||
            m != n || memcmp(half, ids, n / 2 * sizeof *ids))
            FAIL("encode with half the room");
    }
    if (!n_sp) {
        if (sb_rt_tok_encode(t, text, len, flags, half, n, &m) != SB_OK || m != n ||
            memcmp(half, ids, n * sizeof *ids))
            FAIL("encode and encode_ex differ");
    }
    bool bos = (flags & SB_RT_TOK_ADD_BOS) != 0, eos = (flags & SB_RT_TOK_ADD_EOS) != 0;
    if (bos && (!n || ids[0] != v->bos))
        FAIL("no BOS first");
    if (eos && (!n || ids[n - 1] != v->eos))
        FAIL("no EOS last");
    /* specials only where asked, never from inside a span */
    bool parsed = false;
    for (size_t i = 0; i < n; i++)
        if (special(t, ids[i]) && !((bos && i == 0) || (eos && i == n - 1))) {
            parsed = true;
            if (!(flags & SB_RT_TOK_PARSE_SPECIAL) && sb_rt_tok_type(t, ids[i]) != SB_RT_TOK_USER)
                FAIL("a control or unknown token without PARSE_SPECIAL");
        }
    if (sb_rt_tok_decode_ex(t, ids + bos, n - bos - eos, SB_RT_TOK_SHOW_SPECIAL, back,
                            2 * len + 64, &bl) != SB_OK)
        FAIL("decode");
    for (size_t i = bos; i < n - eos; i++) { /* pieces join into the decoded text */
        size_t k;
        if (sb_rt_tok_piece_ex(t, ids[i], i > bos ? ids[i - 1] : SB_RT_TOK_NONE,
                               SB_RT_TOK_SHOW_SPECIAL, joined + jl, 2 * len + 64 - jl, &k))
            FAIL("piece");
        jl += k;
    }
    if (bpe && (jl != bl || memcmp(joined, back, bl)))
        FAIL("pieces do not join into the decoded text");
    bool has_sp = false;
    for (size_t i = 0; i + 3 <= len; i++)
        has_sp |= !memcmp(text + i, SP, 3);
    if (bpe || (!parsed && !has_sp)) {
        if (!strip || !parsed) {
            if (bl != len || memcmp(back, text, len))
                FAIL("decode(encode(x)) != x (%zu bytes back of %zu)", bl, len);
        } else { /* strip drops white space only: the rest, in order, remains */
            size_t j = 0;
            for (size_t i = 0; i < len; i++) {
                if (j < bl && back[j] == text[i])
                    j++;
                else if (!is_ws((uint8_t)text[i]))
                    FAIL("strip dropped a byte that is not white space");
            }
            if (j != bl)
                FAIL("strip: the decoded text is not the input less white space");
        }
    }
    /* no special token from bytes a span touches (byte-level BPE without
     * strip: each id's piece sits at the offset the pieces before it end) */
    for (size_t i = bos, pos = 0; bpe && !strip && i < n - eos; i++) {
        size_t k;
        sb_rt_tok_piece_ex(t, ids[i], SB_RT_TOK_NONE, SB_RT_TOK_SHOW_SPECIAL, joined,
                           2 * len + 64, &k);
        if (special(t, ids[i]))
            for (size_t j = 0; j < n_sp; j++)
                if (sp[j].len && pos < sp[j].off + sp[j].len && sp[j].off < pos + k)
                    FAIL("special token %u at %zu overlaps span %zu", ids[i], pos, j);
        pos += k;
    }
    free(ids), free(half), free(back), free(joined);
out:
    sb_rt_tok_free(t);
    free(v);
    return 0;
}
