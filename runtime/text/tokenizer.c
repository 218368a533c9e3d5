/* tokenizer.c -- the tokenizer object: its token table, special-token
 * matching, encoding by vocabulary kind, decoding (tokenizer.h; the step
 * numbers are the header's ENCODING steps).
 *
 * Memory: every token's text lives in one arena (text, text_off), NUL
 * after each; `raw` is a second arena with the bytes each token stands for
 * when decoded (a byte token's byte, a `gpt2` normal token's unmapped
 * bytes, otherwise the text). `llama` encoding keeps its hash table of
 * mergeable pieces here (spm_*); `gpt2` encoding is pretok.c + bpe.c.
 */
#include "text/tokenizer.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/bpe.h"
#include "text/heap.h"
#include "text/pretok.h"
#include "snapbank.h"

#define MAX_TEXT 4096u         /* the longest token text accepted */
#define NONE SB_RT_TOK_NONE

enum { KIND_SPM = 0, KIND_BPE = 1 };

/* A node of the trie of special-token texts: node 0 is the root; child
 * and sibling are node numbers, 0 for none. */
typedef struct tnode {
    uint32_t child, sibling;
    uint32_t tok;              /* the special token whose text ends here, or NONE */
    uint32_t rank;             /* its place in matching order (longest first) */
    uint8_t byte;
} tnode;

struct sb_rt_tok {
    uint32_t n;                /* tokens */
    int kind;                  /* KIND_SPM or KIND_BPE */
    char *text;                /* every token's text, NUL after each */
    size_t *text_off;          /* (n + 1) token i is text[text_off[i], text_off[i + 1] - 1) */
    char *raw;                 /* what each token decodes to (see above) */
    size_t *raw_off;           /* (n + 1) */
    float *score;              /* (n) */
    uint8_t *type;             /* (n) SB_RT_TOK_*, end texts made control (build_eog) */
    uint8_t *strip;            /* (n) SB_RT_TOK_LSTRIP | RSTRIP, or NULL: none */
    /* `llama` */
    uint32_t byte_id[256];     /* byte token of each byte, or NONE */
    uint32_t *slot;            /* hash of mergeable pieces: id + 1, 0 empty */
    size_t slots;              /* a power of two */
    size_t max_piece;          /* the longest mergeable piece */
    /* `gpt2` */
    sb_rt_bpe *bpe;
    sb_rt_pretok_kind pretok;
    /* special tokens */
    tnode *trie;
    size_t n_nodes;
    bool has_user;             /* a user-defined token has a text: matched unasked */
    bool first_byte[256];      /* a special text starts with this byte */
    uint32_t bos, eos, eot, eom, pad, unk;
    bool add_bos, add_eos, space_prefix;
    uint32_t *eog;             /* sorted end-of-generation ids */
    size_t n_eog;
    char model[8];
    char pre[64];
};

static size_t tlen(const sb_rt_tok *t, uint32_t id)
{
    return t->text_off[id + 1] - t->text_off[id] - 1;
}

static const char *ttext(const sb_rt_tok *t, uint32_t id)
{
    return t->text + t->text_off[id];
}

static bool special_type(int type)
{
    return type == SB_RT_TOK_CONTROL || type == SB_RT_TOK_USER || type == SB_RT_TOK_UNKNOWN;
}

/* Types that decode to nothing unless SB_RT_TOK_SHOW_SPECIAL. */
static bool hidden_type(int type)
{
    return type == SB_RT_TOK_CONTROL || type == SB_RT_TOK_UNKNOWN || type == SB_RT_TOK_UNUSED;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
         : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The byte of a token spelled <0xNN>, or -1. */
static int byte_of(const char *p, size_t len)
{
    int hi = len == 6 ? hexval(p[3]) : -1, lo = len == 6 ? hexval(p[4]) : -1;
    if (len != 6 || memcmp(p, "<0x", 3) || p[5] != '>' || hi < 0 || lo < 0)
        return -1;
    return hi * 16 + lo;
}

static uint64_t hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

void sb_rt_tok_spec_init(sb_rt_tok_spec *s)
{
    memset(s, 0, sizeof *s);
    s->bos = s->eos = s->unk = s->eot = s->eom = s->pad = NONE;
    s->model = "llama";
}

void sb_rt_tok_free(sb_rt_tok *t)
{
    if (!t)
        return;
    free(t->text), free(t->text_off), free(t->raw), free(t->raw_off);
    free(t->score), free(t->type), free(t->strip), free(t->slot), free(t->trie), free(t->eog);
    sb_rt_bpe_free(t->bpe);
    free(t);
}

/* ---- construction -------------------------------------------------------------------- */

/* `llama`: the mergeable piece s[0, n), or NONE. */
static uint32_t spm_lookup(const sb_rt_tok *t, const char *s, size_t n)
{
    for (size_t j = hash(s, n) & (t->slots - 1);; j = (j + 1) & (t->slots - 1)) {
        uint32_t v = t->slot[j];
        if (!v)
            return NONE;
        if (tlen(t, v - 1) == n && !memcmp(ttext(t, v - 1), s, n))
            return v - 1;
    }
}

static bool spm_mergeable(int type)
{
    return type == SB_RT_TOK_NORMAL || type == SB_RT_TOK_USER || type == SB_RT_TOK_UNKNOWN;
}

static int build_spm(sb_rt_tok *t, sb_rt_err *err)
{
    t->slots = 1024;
    while (t->slots < 2ull * t->n)
        t->slots *= 2;
    t->slot = calloc(t->slots, sizeof *t->slot);
    if (!t->slot)
        return sb_rt_fail(err, SB_ERR_NOMEM, "tokenizer: out of memory");
    for (uint32_t i = 0; i < t->n; i++) {
        size_t len = tlen(t, i);
        const char *p = ttext(t, i);
        if (t->type[i] == SB_RT_TOK_BYTE) {
            int b = byte_of(p, len);
            if (b < 0)
                return sb_rt_fail(err, SB_ERR_FORMAT, "tokenizer: byte token %" PRIu32
                                  " is not spelled <0xNN>", i);
            if (t->byte_id[b] == NONE)
                t->byte_id[b] = i;
        } else if (spm_mergeable(t->type[i]) && len && spm_lookup(t, p, len) == NONE) {
            size_t j = hash(p, len) & (t->slots - 1);
            while (t->slot[j])
                j = (j + 1) & (t->slots - 1);
            t->slot[j] = i + 1; /* the lowest id of duplicates wins */
            t->max_piece = len > t->max_piece ? len : t->max_piece;
        }
    }
    return SB_OK;
}

/* The raw arena: what each token decodes to. `gpt2` normal tokens unmap
 * (ok[i] says so: BPE may produce them); byte tokens are their byte. */
static int build_raw(sb_rt_tok *t, bool *ok /* NULL for `llama` */, sb_rt_err *err)
{
    t->raw = malloc(t->text_off[t->n] ? t->text_off[t->n] : 1); /* never longer */
    t->raw_off = malloc((t->n + 1ull) * sizeof *t->raw_off);
    if (!t->raw || !t->raw_off)
        return sb_rt_fail(err, SB_ERR_NOMEM, "tokenizer: out of memory");
    size_t k = 0;
    for (uint32_t i = 0; i < t->n; i++) {
        const char *p = ttext(t, i);
        size_t len = tlen(t, i), got;
        int b = t->type[i] == SB_RT_TOK_BYTE ? byte_of(p, len) : -1;
        t->raw_off[i] = k;
        if (b >= 0) {
            t->raw[k++] = (char)b;
        } else if (ok && t->type[i] == SB_RT_TOK_NORMAL &&
                   sb_rt_bpe_unmap(p, len, t->raw + k, &got)) {
            ok[i] = true;
            k += got;
        } else {
            memcpy(t->raw + k, p, len);
            k += len;
        }
    }
    t->raw_off[t->n] = k;
    return SB_OK;
}

static int build_bpe(sb_rt_tok *t, const sb_rt_tok_spec *spec, const sb_rt_pretok_info *pi,
                     sb_rt_err *err)
{
    bool *ok = calloc(t->n, sizeof *ok);
    const char **raw = malloc(t->n * sizeof *raw);
    size_t *raw_len = malloc(t->n * sizeof *raw_len);
    int rc = ok && raw && raw_len ? build_raw(t, ok, err)
           : sb_rt_fail(err, SB_ERR_NOMEM, "tokenizer: out of memory");
    if (rc == SB_OK) {
        for (uint32_t i = 0; i < t->n; i++) {
            raw[i] = t->raw + t->raw_off[i];
            raw_len[i] = t->raw_off[i + 1] - t->raw_off[i];
        }
        rc = sb_rt_bpe_new(t->n, raw, raw_len, ok, spec->merges, spec->merge_len,
                           spec->n_merges, pi->ignore_merges, t->unk, &t->bpe, err);
    }
    free(ok), free(raw), free(raw_len);
    return rc;
}

/* Matching order: the longest text first, then the lower id. */
typedef struct by_len { size_t len; uint32_t id; } by_len;

static int cmp_match_order(const void *a, const void *b)
{
    const by_len *x = a, *y = b;
    if (x->len != y->len)
        return x->len > y->len ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static int build_trie(sb_rt_tok *t, sb_rt_err *err)
{
    size_t nodes = 1, n_sp = 0;
    for (uint32_t i = 0; i < t->n; i++)
        if (special_type(t->type[i]) && tlen(t, i)) {
            nodes += tlen(t, i);
            n_sp++;
        }
    by_len *order = malloc((n_sp ? n_sp : 1) * sizeof *order);
    t->trie = calloc(nodes, sizeof *t->trie);
    if (!order || !t->trie) {
        free(order);
        return sb_rt_fail(err, SB_ERR_NOMEM, "tokenizer: out of memory");
    }
    n_sp = 0;
    for (uint32_t i = 0; i < t->n; i++)
        if (special_type(t->type[i]) && tlen(t, i)) {
            order[n_sp++] = (by_len){ tlen(t, i), i };
            t->has_user |= t->type[i] == SB_RT_TOK_USER;
        }
    qsort(order, n_sp, sizeof *order, cmp_match_order);
    t->trie[0].tok = NONE;
    t->n_nodes = 1;
    for (size_t r = 0; r < n_sp; r++) {
        uint32_t id = order[r].id, node = 0;
        const uint8_t *p = (const uint8_t *)ttext(t, id);
        t->first_byte[p[0]] = true;
        for (size_t j = 0; j < tlen(t, id); j++) {
            uint32_t c = t->trie[node].child;
            while (c && t->trie[c].byte != p[j])
                c = t->trie[c].sibling;
            if (!c) {
                c = (uint32_t)t->n_nodes++;
                t->trie[c] = (tnode){ 0, t->trie[node].child, NONE, 0, p[j] };
                t->trie[node].child = c;
            }
            node = c;
        }
        if (t->trie[node].tok == NONE) { /* a text listed twice: its first in order */
            t->trie[node].tok = id;
            t->trie[node].rank = (uint32_t)r;
        }
    }
    free(order);
    return SB_OK;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The first token whose text is s, or NONE. */
static uint32_t by_text(const sb_rt_tok *t, const char *s)
{
    size_t n = strlen(s);
    for (uint32_t i = 0; i < t->n; i++)
        if (tlen(t, i) == n && !memcmp(ttext(t, i), s, n))
            return i;
    return NONE;
}

static const char *const eot_texts[] = { /* in order of preference */
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
    "<|end_of_text|>", "<EOT>",
};
static const char *const eog_texts[] = { /* llama.cpp's end texts, most of them */
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|endoftext|>", "<|end_of_text|>", "<|eom_id|>",
    "<end_of_turn>", "<EOT>", "_<EOT>", "</s>", "<eos>", "<|return|>", "<|call|>",
    "<end_of_utterance>", ("<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"),
};

static int build_eog(sb_rt_tok *t)
{
    size_t ne = sizeof eog_texts / sizeof *eog_texts;
    for (size_t i = 0; t->eot == NONE && i < sizeof eot_texts / sizeof *eot_texts; i++)
        t->eot = by_text(t, eot_texts[i]);
    if (t->eom == NONE)
        t->eom = by_text(t, "<|eom_id|>");
    t->eog = malloc((ne + 3) * sizeof *t->eog);
    if (!t->eog)
        return SB_ERR_NOMEM;
    uint32_t cand[3] = { t->eos, t->eot, t->eom };
    for (size_t i = 0; i < 3; i++)
        if (cand[i] != NONE)
            t->eog[t->n_eog++] = cand[i];
    for (size_t i = 0; i < ne; i++) {
        uint32_t id = by_text(t, eog_texts[i]);
        if (id != NONE) {
            t->eog[t->n_eog++] = id;
            t->type[id] = SB_RT_TOK_CONTROL; /* llama.cpp overrides "control-looking"
                                                tokens so */
        }
    }
    qsort(t->eog, t->n_eog, sizeof *t->eog, cmp_u32);
    size_t k = 0;
    for (size_t i = 0; i < t->n_eog; i++)
        if (!k || t->eog[k - 1] != t->eog[i])
            t->eog[k++] = t->eog[i];
    t->n_eog = k;
    return SB_OK;
}

/* Copy the texts, types and scores into t. */
static int copy_table(sb_rt_tok *t, const sb_rt_tok_spec *spec, sb_rt_err *err)
{
    uint32_t n = t->n;
    size_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        size_t len = spec->piece_len[i];
        if (len > MAX_TEXT || (len && !spec->pieces[i]))
            return sb_rt_fail(err, SB_ERR_FORMAT, "tokenizer: token %" PRIu32 " has a text of "
                              "%zu bytes (at most %u)", i, len, MAX_TEXT);
        total += len + 1;
    }
    t->text = malloc(total);
    t->text_off = malloc((n + 1ull) * sizeof *t->text_off);
    t->score = malloc(n * sizeof *t->score);
    t->type = malloc(n);
    if (!t->text || !t->text_off || !t->score || !t->type)
        return sb_rt_fail(err, SB_ERR_NOMEM, "tokenizer: out of memory");
    size_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        size_t len = spec->piece_len[i];
        int type = spec->types ? spec->types[i] : SB_RT_TOK_NORMAL;
        t->text_off[i] = k;
        if (len)
            memcpy(t->text + k, spec->pieces[i], len);
        t->text[k + len] = '\0';
        k += len + 1;
        t->score[i] = spec->scores ? spec->scores[i] : 0.0f;
        t->type[i] = (uint8_t)(type >= 1 && type <= 6 ? type : SB_RT_TOK_NORMAL);
    }
    t->text_off[n] = k;
    if (spec->strip) {
        if (!(t->strip = malloc(n)))
            return sb_rt_fail(err, SB_ERR_NOMEM, "tokenizer: out of memory");
        memcpy(t->strip, spec->strip, n);
    }
    return SB_OK;
}

int sb_rt_tok_new(const sb_rt_tok_spec *spec, sb_rt_tok **out, sb_rt_err *err)
{
    if (!spec || !out || (spec->n_vocab && (!spec->pieces || !spec->piece_len)) ||
        (spec->n_merges && (!spec->merges || !spec->merge_len)))
        return sb_rt_fail(err, SB_ERR_INVAL, "tokenizer: NULL argument");
    *out = NULL;
    uint32_t n = spec->n_vocab;
    if (n == 0 || n > (1u << 24))
        return sb_rt_fail(err, SB_ERR_FORMAT, "tokenizer: %" PRIu32 " tokens (1 to 2^24)", n);
    const struct { const char *name; uint32_t id; } ids[] = {
        { "bos", spec->bos }, { "eos", spec->eos }, { "unknown", spec->unk },
        { "eot", spec->eot }, { "eom", spec->eom }, { "padding", spec->pad },
    };
    for (size_t i = 0; i < sizeof ids / sizeof *ids; i++)
        if (ids[i].id != NONE && ids[i].id >= n)
            return sb_rt_fail(err, SB_ERR_FORMAT, "tokenizer: %s token id %" PRIu32 " is out "
                              "of range (%" PRIu32 " tokens)", ids[i].name, ids[i].id, n);
    if ((spec->add_bos && spec->bos == NONE) || (spec->add_eos && spec->eos == NONE))
        return sb_rt_fail(err, SB_ERR_FORMAT, "tokenizer: add_%s_token is set but the "
                          "vocabulary has no %s token", spec->add_bos ? "bos" : "eos",
                          spec->add_bos ? "BOS" : "EOS");
    const char *model = spec->model ? spec->model : "llama";
    const char *pre = spec->pre ? spec->pre : "default";
    int kind = !strcmp(model, "llama") ? KIND_SPM : !strcmp(model, "gpt2") ? KIND_BPE : -1;
    if (kind < 0)
        return sb_rt_fail(err, SB_ERR_UNSUPPORTED, "tokenizer: vocabulary type '%.32s' is not "
                          "supported (llama, gpt2)", model);
    const sb_rt_pretok_info *pi = NULL;
    if (kind == KIND_BPE && !(pi = sb_rt_pretok_find(pre, strlen(pre))))
        return sb_rt_fail(err, SB_ERR_UNSUPPORTED, "tokenizer: pre-tokenizer '%.48s' (key "
                          "tokenizer.ggml.pre) is not supported; known: %s", pre,
                          sb_rt_pretok_names());
    sb_rt_tok *t = calloc(1, sizeof *t);
    if (!t)
        return sb_rt_fail(err, SB_ERR_NOMEM, "tokenizer: out of memory");
    t->n = n;
    t->kind = kind;
    t->bos = spec->bos, t->eos = spec->eos, t->unk = spec->unk;
    t->eot = spec->eot, t->eom = spec->eom, t->pad = spec->pad;
    t->add_bos = spec->add_bos, t->add_eos = spec->add_eos;
    t->space_prefix = kind == KIND_SPM && spec->add_space_prefix;
    snprintf(t->model, sizeof t->model, "%s", model);
    snprintf(t->pre, sizeof t->pre, "%s", pre);
    if (pi)
        t->pretok = pi->kind;
    for (size_t b = 0; b < 256; b++)
        t->byte_id[b] = NONE;
    int rc = copy_table(t, spec, err);
    if (rc == SB_OK && build_eog(t) != SB_OK) /* first: it changes types */
        rc = sb_rt_fail(err, SB_ERR_NOMEM, "tokenizer: out of memory");
    if (rc == SB_OK)
        rc = kind == KIND_SPM ? build_spm(t, err) : build_bpe(t, spec, pi, err);
    if (rc == SB_OK && kind == KIND_SPM)
        rc = build_raw(t, NULL, err);
    if (rc == SB_OK)
        rc = build_trie(t, err);
    if (rc != SB_OK) {
        sb_rt_tok_free(t);
        return rc;
    }
    *out = t;
    return SB_OK;
}

/* ---- output ------------------------------------------------------------------------- */

typedef struct idbuf {
    uint32_t *ids;
    size_t cap, n;             /* n counts past cap: the size needed */
} idbuf;

static void put(idbuf *o, uint32_t id)
{
    if (o->n < o->cap)
        o->ids[o->n] = id;
    o->n++;
}

/* ---- `llama` (SentencePiece) text ----------------------------------------------------- */

typedef struct sym {
    size_t off, len;           /* bytes of the normalized text */
    int32_t prev, next;        /* list links, -1 none */
} sym;

typedef struct cand {          /* a candidate merge of symbols l and r */
    float score;
    int32_t l, r;
    size_t len;                /* the merged length when queued: stale if changed */
} cand;

/* Heap order: higher score first, then the leftmost (smaller offset);
 * ctx: the symbols. */
static bool before(const cand *a, const cand *b, const void *ctx)
{
    const sym *s = ctx;
    if (a->score != b->score)
        return a->score > b->score;
    return s[a->l].off < s[b->l].off;
}

SB_RT_HEAP(heap, cand, before)

/* Length of the UTF-8 character at p[0, n), or 1 for an invalid byte. */
static size_t utf8_len(const uint8_t *p, size_t n)
{
    size_t k = p[0] < 0x80 ? 1 : (p[0] >> 5) == 6 ? 2 : (p[0] >> 4) == 14 ? 3 : (p[0] >> 3) == 30 ? 4 : 0;
    if (k == 0 || k > n)
        return 1;
    for (size_t i = 1; i < k; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 1;
    return k;
}

static void try_pair(const sb_rt_tok *t, const char *txt, sym *s, int32_t l, cand *h, size_t *nh)
{
    if (l < 0 || s[l].next < 0)
        return;
    int32_t r = s[l].next;
    size_t len = s[l].len + s[r].len;
    if (len > t->max_piece)
        return;
    uint32_t id = spm_lookup(t, txt + s[l].off, len);
    if (id != NONE)
        heap_push(h, nh, (cand){ t->score[id], l, r, len }, s);
}

/* 2: one stretch of text; prefix: put a space in front. */
static int spm_text(const sb_rt_tok *t, const char *text, size_t len, bool prefix, idbuf *o)
{
    size_t spaces = prefix;
    for (size_t i = 0; i < len; i++)
        spaces += text[i] == ' ';
    if (len > (SIZE_MAX - 3) / 4 / sizeof(cand))
        return SB_ERR_NOMEM;
    size_t m = len + 2 * spaces + prefix;
    char *txt = malloc(m ? m : 1);
    sym *s = malloc((m ? m : 1) * sizeof *s);
    cand *h = malloc((3 * m + 1) * sizeof *h); /* ns - 1 first pairs, <= 2 per merge */
    if (!txt || !s || !h) {
        free(txt), free(s), free(h);
        return SB_ERR_NOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < len + prefix; i++) {
        char c = prefix ? (i ? text[i - 1] : ' ') : text[i];
        if (c == ' ') {
            memcpy(txt + k, "\xe2\x96\x81", 3);
            k += 3;
        } else {
            txt[k++] = c;
        }
    }
    int32_t ns = 0;
    for (size_t i = 0; i < k; ns++) {
        size_t c = utf8_len((const uint8_t *)txt + i, k - i);
        s[ns] = (sym){ i, c, ns - 1, -1 };
        if (ns)
            s[ns - 1].next = ns;
        i += c;
    }
    size_t nh = 0;
    for (int32_t i = 0; i + 1 < ns; i++)
        try_pair(t, txt, s, i, h, &nh);
    while (nh) {
        cand c = heap_pop(h, &nh, s);
        if (s[c.l].len == 0 || s[c.r].len == 0 || s[c.l].next != c.r ||
            s[c.l].len + s[c.r].len != c.len)
            continue; /* stale */
        s[c.l].len += s[c.r].len;
        s[c.l].next = s[c.r].next;
        if (s[c.r].next >= 0)
            s[s[c.r].next].prev = c.l;
        s[c.r].len = 0;
        try_pair(t, txt, s, s[c.l].prev, h, &nh);
        try_pair(t, txt, s, c.l, h, &nh);
    }
    for (int32_t i = ns ? 0 : -1; i >= 0; i = s[i].next) {
        uint32_t id = s[i].len <= t->max_piece ? spm_lookup(t, txt + s[i].off, s[i].len) : NONE;
        if (id != NONE) {
            put(o, id);
            continue;
        }
        for (size_t b = 0; b < s[i].len; b++) {
            uint32_t bid = t->byte_id[(uint8_t)txt[s[i].off + b]];
            put(o, bid != NONE ? bid : t->unk);
        }
    }
    free(txt), free(s), free(h);
    return SB_OK;
}

/* ---- `gpt2` (byte-level BPE) text ----------------------------------------------------- */

typedef struct bpe_job {
    const sb_rt_tok *t;
    const char *text;
    sb_rt_pretok_buf pb;
    sb_rt_bpe_scratch bs;
    idbuf *o;
} bpe_job;

static int bpe_word(void *ctx, size_t off, size_t len)
{
    bpe_job *j = ctx;
    const uint32_t *ids;
    size_t n;
    if (sb_rt_bpe_word(j->t->bpe, (const uint8_t *)j->text + off, len, &j->bs, &ids, &n))
        return SB_ERR_NOMEM;
    for (size_t i = 0; i < n; i++)
        put(j->o, ids[i]);
    return SB_OK;
}

/* 3: one stretch of text. */
static int bpe_text(bpe_job *j, const char *text, size_t len)
{
    if (sb_rt_pretok_buf_reserve(&j->pb, len))
        return SB_ERR_NOMEM;
    j->text = text;
    return sb_rt_pretok_split(j->t->pretok, text, len, &j->pb, bpe_word, j);
}

/* ---- special tokens (1) ------------------------------------------------------------- */

typedef struct match {
    size_t off;
    uint32_t tok, rank;
} match;

static int by_rank_then_off(const void *a, const void *b)
{
    const match *x = a, *y = b;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return (x->off > y->off) - (x->off < y->off);
}

static int by_off(const void *a, const void *b)
{
    const match *x = a, *y = b;
    return (x->off > y->off) - (x->off < y->off);
}

/* Whether text[off, off + n) lies wholly outside the literal spans. */
static bool outside(const sb_rt_tok_span *sp, size_t n_sp, size_t off, size_t n)
{
    size_t lo = 0, hi = n_sp; /* the first span that ends after off */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sp[mid].off + sp[mid].len <= off)
            lo = mid + 1;
        else
            hi = mid;
    }
    while (lo < n_sp && sp[lo].len == 0)
        lo++;
    return lo == n_sp || sp[lo].off >= off + n; /* later spans start later still */
}

/* The special tokens of text to use, sorted by offset, into *out (*n_out;
 * the caller frees). */
static int find_specials(const sb_rt_tok *t, const char *text, size_t len, unsigned flags,
                         const sb_rt_tok_span *lit, size_t n_lit, match **out, size_t *n_out)
{
    *out = NULL, *n_out = 0;
    size_t n = 0, cap = 0;
    match *m = NULL;
    const uint8_t *p = (const uint8_t *)text;
    for (size_t i = 0; i < len; i++) {
        if (!t->first_byte[p[i]])
            continue;
        uint32_t node = 0;
        for (size_t j = i; j < len; j++) {
            uint32_t c = t->trie[node].child;
            while (c && t->trie[c].byte != p[j])
                c = t->trie[c].sibling;
            if (!c)
                break;
            node = c;
            uint32_t id = t->trie[node].tok;
            if (id == NONE)
                continue;
            bool want = t->type[id] == SB_RT_TOK_USER || (flags & SB_RT_TOK_PARSE_SPECIAL);
            if (!want || !outside(lit, n_lit, i, j + 1 - i))
                continue;
            if (n == cap) {
                size_t nc = cap ? 2 * cap : 16;
                match *g = realloc(m, nc * sizeof *m);
                if (!g) {
                    free(m);
                    return SB_ERR_NOMEM;
                }
                m = g, cap = nc;
            }
            m[n++] = (match){ i, id, t->trie[node].rank };
        }
    }
    if (!n) {
        free(m);
        return SB_OK;
    }
    /* longest first, everywhere; then the next longest in what is left */
    uint8_t *taken = calloc(len / 8 + 1, 1);
    if (!taken) {
        free(m);
        return SB_ERR_NOMEM;
    }
    qsort(m, n, sizeof *m, by_rank_then_off);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t a = m[i].off, e = a + tlen(t, m[i].tok), x;
        for (x = a; x < e && !(taken[x / 8] >> (x % 8) & 1); x++)
            ;
        if (x < e)
            continue;
        for (x = a; x < e; x++)
            taken[x / 8] |= (uint8_t)(1u << (x % 8));
        m[k++] = m[i];
    }
    free(taken);
    qsort(m, k, sizeof *m, by_off);
    *out = m, *n_out = k;
    return SB_OK;
}

/* ---- encoding ----------------------------------------------------------------------- */

static bool is_space(char c) /* C's isspace in the "C" locale */
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

int sb_rt_tok_encode_ex(const sb_rt_tok *t, const char *text, size_t len, unsigned flags,
                        const sb_rt_tok_span *literal, size_t n_literal,
                        uint32_t *ids, size_t cap, size_t *n_ids)
{
    if (!t || !n_ids || (len && !text) || (cap && !ids) || (n_literal && !literal) ||
        (flags & ~(SB_RT_TOK_ADD_BOS | SB_RT_TOK_PARSE_SPECIAL | SB_RT_TOK_ADD_EOS)))
        return SB_ERR_INVAL;
    *n_ids = 0;
    for (size_t i = 0; i < n_literal; i++)
        if (literal[i].off > len || literal[i].len > len - literal[i].off ||
            (i && literal[i].off < literal[i - 1].off + literal[i - 1].len))
            return SB_ERR_INVAL;
    match *sp = NULL;
    size_t n_sp = 0;
    if (((flags & SB_RT_TOK_PARSE_SPECIAL) || t->has_user) &&
        find_specials(t, text, len, flags, literal, n_literal, &sp, &n_sp) != SB_OK)
        return SB_ERR_NOMEM;
    idbuf o = { ids, cap, 0 };
    bpe_job job = { .t = t, .o = &o };
    int rc = SB_OK;
    if ((flags & SB_RT_TOK_ADD_BOS) && t->bos != NONE) /* 4 */
        put(&o, t->bos);
    bool after_special = true; /* `llama`: a stretch that starts the text or follows a
                                  special token gets the space prefix */
    for (size_t i = 0, at = 0; rc == SB_OK && i <= n_sp; i++) {
        size_t end = i < n_sp ? sp[i].off : len;
        if (i > 0 && t->strip && (t->strip[sp[i - 1].tok] & SB_RT_TOK_RSTRIP))
            while (at < end && is_space(text[at]))
                at++;
        if (i < n_sp && t->strip && (t->strip[sp[i].tok] & SB_RT_TOK_LSTRIP))
            while (end > at && is_space(text[end - 1]))
                end--;
        if (end > at) {
            rc = t->kind == KIND_SPM ? spm_text(t, text + at, end - at,
                                                t->space_prefix && after_special, &o)
                                     : bpe_text(&job, text + at, end - at);
            after_special = false;
        }
        if (i < n_sp) {
            put(&o, sp[i].tok);
            after_special = true;
            at = sp[i].off + tlen(t, sp[i].tok);
        }
    }
    if ((flags & SB_RT_TOK_ADD_EOS) && t->eos != NONE)
        put(&o, t->eos);
    free(sp);
    sb_rt_pretok_buf_free(&job.pb);
    sb_rt_bpe_scratch_free(&job.bs);
    if (rc != SB_OK)
        return SB_ERR_NOMEM;
    *n_ids = o.n;
    return o.n > cap ? SB_ERR_RANGE : SB_OK;
}

int sb_rt_tok_encode(const sb_rt_tok *t, const char *text, size_t len, unsigned flags,
                     uint32_t *ids, size_t cap, size_t *n_ids)
{
    return sb_rt_tok_encode_ex(t, text, len, flags, NULL, 0, ids, cap, n_ids);
}

/* ---- decoding ----------------------------------------------------------------------- */

static bool shown(const sb_rt_tok *t, uint32_t id, unsigned flags)
{
    return (flags & SB_RT_TOK_SHOW_SPECIAL) || !hidden_type(t->type[id]);
}

/* The raw bytes of id, and whether `llama` spells spaces as U+2581 in them
 * (normal and byte tokens; other types print their text as it is). */
static const char *raw_of(const sb_rt_tok *t, uint32_t id, size_t *n, bool *escaped)
{
    *n = t->raw_off[id + 1] - t->raw_off[id];
    *escaped = t->kind == KIND_SPM &&
               (t->type[id] == SB_RT_TOK_NORMAL || t->type[id] == SB_RT_TOK_BYTE);
    return t->raw + t->raw_off[id];
}

int sb_rt_tok_piece_ex(const sb_rt_tok *t, uint32_t id, uint32_t prev, unsigned flags,
                       char *buf, size_t cap, size_t *n)
{
    if (flags & ~(SB_RT_TOK_SHOW_SPECIAL | SB_RT_TOK_KEEP_SPACE))
        return SB_ERR_INVAL;
    if (!t || !n || (cap && !buf) || id >= t->n)
        return SB_ERR_RANGE;
    size_t len = 0, k = 0;
    bool esc = false;
    const char *r = shown(t, id, flags) ? raw_of(t, id, &len, &esc) : "";
    bool first = !(flags & SB_RT_TOK_KEEP_SPACE) && (prev == NONE || prev == t->bos);
    for (size_t i = 0; i < len;) {
        char c = r[i];
        size_t step = 1;
        if (esc && len - i >= 3 && !memcmp(r + i, "\xe2\x96\x81", 3))
            c = ' ', step = 3;
        if (!(i == 0 && c == ' ' && esc && first && t->space_prefix)) {
            if (k < cap)
                buf[k] = c;
            k++;
        }
        i += step;
    }
    *n = k;
    return k > cap ? SB_ERR_RANGE : SB_OK;
}

int sb_rt_tok_piece(const sb_rt_tok *t, uint32_t id, uint32_t prev, char *buf, size_t cap,
                    size_t *n)
{
    return sb_rt_tok_piece_ex(t, id, prev, 0, buf, cap, n);
}

int sb_rt_tok_decode_ex(const sb_rt_tok *t, const uint32_t *ids, size_t n_ids, unsigned flags,
                        char *buf, size_t cap, size_t *len)
{
    if (!t || !len || (n_ids && !ids) || (cap && !buf) || (flags & ~SB_RT_TOK_SHOW_SPECIAL))
        return SB_ERR_INVAL;
    *len = 0;
    /* The raw bytes first, with a mark on bytes that may spell U+2581;
     * then U+2581 to spaces over the whole: a U+2581 that byte fallback
     * split into three byte tokens is still a space. */
    size_t raw_len = 0;
    for (size_t i = 0; i < n_ids; i++) {
        if (ids[i] >= t->n)
            return SB_ERR_RANGE;
        if (shown(t, ids[i], flags))
            raw_len += t->raw_off[ids[i] + 1] - t->raw_off[ids[i]];
    }
    char *raw = malloc(raw_len ? raw_len : 1);
    bool *esc = t->kind == KIND_SPM ? malloc(raw_len ? raw_len : 1) : NULL;
    if (!raw || (t->kind == KIND_SPM && !esc)) {
        free(raw), free(esc);
        return SB_ERR_NOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < n_ids; i++) {
        if (!shown(t, ids[i], flags))
            continue;
        size_t n;
        bool e;
        const char *r = raw_of(t, ids[i], &n, &e);
        memcpy(raw + k, r, n);
        if (esc)
            memset(esc + k, e, n);
        k += n;
    }
    size_t total = 0;
    bool first = true;
    for (size_t i = 0; i < k;) {
        char c = raw[i];
        size_t step = 1;
        if (esc && k - i >= 3 && esc[i] && esc[i + 1] && esc[i + 2] &&
            !memcmp(raw + i, "\xe2\x96\x81", 3))
            c = ' ', step = 3;
        bool drop = first && c == ' ' && esc && esc[i] && t->space_prefix;
        i += step;
        first = false;
        if (drop)
            continue;
        if (total < cap)
            buf[total] = c;
        total++;
    }
    free(raw), free(esc);
    *len = total;
    return total > cap ? SB_ERR_RANGE : SB_OK;
}

int sb_rt_tok_decode(const sb_rt_tok *t, const uint32_t *ids, size_t n_ids, char *buf,
                     size_t cap, size_t *len)
{
    return sb_rt_tok_decode_ex(t, ids, n_ids, 0, buf, cap, len);
}

/* ---- facts -------------------------------------------------------------------------- */

void sb_rt_tok_get_info(const sb_rt_tok *t, sb_rt_tok_info *o)
{
    memset(o, 0, sizeof *o);
    o->bos = o->eos = o->eot = o->pad = o->unk = NONE;
    if (!t)
        return;
    o->n_vocab = t->n;
    o->bos = t->bos, o->eos = t->eos, o->eot = t->eot, o->pad = t->pad, o->unk = t->unk;
    o->add_bos = t->add_bos, o->add_eos = t->add_eos;
    o->model = t->model;
    o->pre = t->pre;
}

bool sb_rt_tok_is_eog(const sb_rt_tok *t, uint32_t id)
{
    return t && id < t->n && bsearch(&id, t->eog, t->n_eog, sizeof id, cmp_u32) != NULL;
}

const char *sb_rt_tok_text(const sb_rt_tok *t, uint32_t id, size_t *len)
{
    if (!t || id >= t->n)
        return NULL;
    if (len)
        *len = tlen(t, id);
    return ttext(t, id);
}

int sb_rt_tok_type(const sb_rt_tok *t, uint32_t id)
{
    return t && id < t->n ? t->type[id] : 0;
}

uint32_t sb_rt_tok_n_vocab(const sb_rt_tok *t) { return t ? t->n : 0; }
uint32_t sb_rt_tok_bos(const sb_rt_tok *t) { return t ? t->bos : 0; }
uint32_t sb_rt_tok_eos(const sb_rt_tok *t) { return t ? t->eos : 0; }
bool sb_rt_tok_add_bos(const sb_rt_tok *t) { return t && t->add_bos; }
