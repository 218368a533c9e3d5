/* tokenizer.c -- SentencePiece BPE encoding and decoding (tokenizer.h; the
 * step numbers are the header's). */
#include "model/tokenizer.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "snapbank.h"

#define MAX_PIECE 256u

struct sb_rt_tok {
    uint32_t n;
    char **piece;              /* (n) owned copies */
    uint16_t *len;             /* (n) */
    float *score;              /* (n) */
    uint8_t *type;             /* (n) */
    uint32_t byte_id[256];     /* byte token of each byte, or UINT32_MAX */
    uint32_t *slot;            /* hash table of mergeable pieces: id + 1, 0 empty */
    size_t slots;              /* a power of two */
    uint32_t bos, eos, unk;
    bool add_bos, space_prefix;
};

static uint64_t hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

/* The mergeable piece s[0, n), or UINT32_MAX. */
static uint32_t lookup(const sb_rt_tok *t, const char *s, size_t n)
{
    for (size_t j = hash(s, n) & (t->slots - 1);; j = (j + 1) & (t->slots - 1)) {
        uint32_t v = t->slot[j];
        if (!v)
            return UINT32_MAX;
        if (t->len[v - 1] == n && !memcmp(t->piece[v - 1], s, n))
            return v - 1;
    }
}

static bool mergeable(int type)
{
    return type == SB_RT_TOK_NORMAL || type == SB_RT_TOK_USER || type == SB_RT_TOK_UNKNOWN;
}

void sb_rt_tok_free(sb_rt_tok *t)
{
    if (!t)
        return;
    for (uint32_t i = 0; t->piece && i < t->n; i++)
        free(t->piece[i]);
    free(t->piece);
    free(t->len);
    free(t->score);
    free(t->type);
    free(t->slot);
    free(t);
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
         : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

int sb_rt_tok_new(const sb_rt_tok_spec *spec, sb_rt_tok **out, sb_rt_err *err)
{
    if (!spec || !out || (spec->n_vocab && (!spec->pieces || !spec->piece_len)))
        return sb_rt_fail(err, SB_ERR_INVAL, "tokenizer: NULL argument");
    *out = NULL;
    uint32_t n = spec->n_vocab;
    if (n == 0 || n > (1u << 24))
        return sb_rt_fail(err, SB_ERR_FORMAT, "tokenizer: %" PRIu32 " tokens (1 to 2^24)", n);
    if (spec->bos >= n || spec->eos >= n || spec->unk >= n)
        return sb_rt_fail(err, SB_ERR_FORMAT, "tokenizer: bos/eos/unknown id out of range "
                          "(%" PRIu32 "/%" PRIu32 "/%" PRIu32 ", %" PRIu32 " tokens)",
                          spec->bos, spec->eos, spec->unk, n);
    sb_rt_tok *t = calloc(1, sizeof *t);
    if (!t)
        return sb_rt_fail(err, SB_ERR_NOMEM, "tokenizer: out of memory");
    t->n = n;
    t->bos = spec->bos;
    t->eos = spec->eos;
    t->unk = spec->unk;
    t->add_bos = spec->add_bos;
    t->space_prefix = spec->add_space_prefix;
    for (size_t b = 0; b < 256; b++)
        t->byte_id[b] = UINT32_MAX;
    t->slots = 1024;
    while (t->slots < 2ull * n)
        t->slots *= 2;
    t->piece = calloc(n, sizeof *t->piece);
    t->len = malloc(n * sizeof *t->len);
    t->score = malloc(n * sizeof *t->score);
    t->type = malloc(n);
    t->slot = calloc(t->slots, sizeof *t->slot);
    if (!t->piece || !t->len || !t->score || !t->type || !t->slot) {
        sb_rt_tok_free(t);
        return sb_rt_fail(err, SB_ERR_NOMEM, "tokenizer: out of memory");
    }
    for (uint32_t i = 0; i < n; i++) {
        size_t len = spec->piece_len[i];
        int type = spec->types ? spec->types[i] : SB_RT_TOK_NORMAL;
        if (len > MAX_PIECE || (len && !spec->pieces[i]) || !(t->piece[i] = malloc(len + 1))) {
            sb_rt_tok_free(t);
            return len > MAX_PIECE || (len && !spec->pieces[i])
                ? sb_rt_fail(err, SB_ERR_FORMAT, "tokenizer: token %" PRIu32 " has a piece of "
                             "%zu bytes (at most %u)", i, len, MAX_PIECE)
                : sb_rt_fail(err, SB_ERR_NOMEM, "tokenizer: out of memory");
        }
        if (len)
            memcpy(t->piece[i], spec->pieces[i], len);
        t->piece[i][len] = '\0';
        t->len[i] = (uint16_t)len;
        t->score[i] = spec->scores ? spec->scores[i] : 0.0f;
        t->type[i] = (uint8_t)(type >= 1 && type <= 6 ? type : SB_RT_TOK_NORMAL);
        if (type == SB_RT_TOK_BYTE) {
            const char *p = t->piece[i];
            int hi = len == 6 ? hexval(p[3]) : -1, lo = len == 6 ? hexval(p[4]) : -1;
            if (len != 6 || memcmp(p, "<0x", 3) || p[5] != '>' || hi < 0 || lo < 0) {
                sb_rt_tok_free(t);
                return sb_rt_fail(err, SB_ERR_FORMAT, "tokenizer: byte token %" PRIu32
                                  " is not spelled <0xNN>", i);
            }
            if (t->byte_id[hi * 16 + lo] == UINT32_MAX)
                t->byte_id[hi * 16 + lo] = i;
        } else if (mergeable(type) && len && lookup(t, t->piece[i], len) == UINT32_MAX) {
            size_t j = hash(t->piece[i], len) & (t->slots - 1);
            while (t->slot[j])
                j = (j + 1) & (t->slots - 1);
            t->slot[j] = i + 1; /* the lowest id of duplicates wins */
        }
    }
    *out = t;
    return SB_OK;
}

/* ---- encoding ---------------------------------------------------------------------- */

typedef struct sym {
    size_t off, len;           /* bytes of the normalized text */
    int32_t prev, next;        /* list links, -1 none */
} sym;

typedef struct cand {          /* a candidate merge of symbols l and r */
    float score;
    int32_t l, r;
    size_t len;                /* the merged length when queued: stale if changed */
} cand;

/* Heap order: higher score first, then the leftmost (smaller offset). */
static bool before(const cand *a, const cand *b, const sym *s)
{
    if (a->score != b->score)
        return a->score > b->score;
    return s[a->l].off < s[b->l].off;
}

static void heap_push(cand *h, size_t *n, cand c, const sym *s)
{
    size_t i = (*n)++;
    h[i] = c;
    while (i && before(&h[i], &h[(i - 1) / 2], s)) {
        cand x = h[i];
        h[i] = h[(i - 1) / 2];
        h[(i - 1) / 2] = x;
        i = (i - 1) / 2;
    }
}

static cand heap_pop(cand *h, size_t *n, const sym *s)
{
    cand top = h[0];
    h[0] = h[--*n];
    for (size_t i = 0;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < *n && before(&h[l], &h[m], s))
            m = l;
        if (r < *n && before(&h[r], &h[m], s))
            m = r;
        if (m == i)
            break;
        cand x = h[i];
        h[i] = h[m];
        h[m] = x;
        i = m;
    }
    return top;
}

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
    if (len > MAX_PIECE)
        return;
    uint32_t id = lookup(t, txt + s[l].off, len);
    if (id != UINT32_MAX)
        heap_push(h, nh, (cand){ t->score[id], l, r, len }, s);
}

int sb_rt_tok_encode(const sb_rt_tok *t, const char *text, size_t len, bool add_bos,
                     uint32_t *ids, size_t cap, size_t *n_ids)
{
    if (!t || !n_ids || (len && !text) || (cap && !ids))
        return SB_ERR_INVAL;
    *n_ids = 0;
    /* 1 */
    size_t spaces = t->space_prefix;
    for (size_t i = 0; i < len; i++)
        spaces += text[i] == ' ';
    if (len > (SIZE_MAX - 3) / 4)
        return SB_ERR_NOMEM;
    size_t m = len + 2 * spaces + (t->space_prefix ? 1 : 0);
    char *txt = malloc(m ? m : 1);
    sym *s = malloc((m ? m : 1) * sizeof *s);
    cand *h = malloc((3 * m + 1) * sizeof *h); /* ns - 1 first pairs, <= 2 per merge */
    if (!txt || !s || !h) {
        free(txt), free(s), free(h);
        return SB_ERR_NOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < len + (t->space_prefix ? 1 : 0); i++) {
        char c = t->space_prefix ? (i ? text[i - 1] : ' ') : text[i];
        if (c == ' ') {
            memcpy(txt + k, "\xe2\x96\x81", 3);
            k += 3;
        } else {
            txt[k++] = c;
        }
    }
    if (len == 0)
        k = 0; /* an empty text is no tokens, not a lone space */
    /* 2 */
    int32_t ns = 0;
    for (size_t i = 0; i < k; ns++) {
        size_t c = utf8_len((const uint8_t *)txt + i, k - i);
        s[ns] = (sym){ i, c, ns - 1, -1 };
        if (ns)
            s[ns - 1].next = ns;
        i += c;
    }
    /* 3 */
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
    /* 4 */
    size_t n = 0;
    if (add_bos) {
        if (n < cap)
            ids[n] = t->bos;
        n++;
    }
    for (int32_t i = ns ? 0 : -1; i >= 0; i = s[i].next) {
        uint32_t id = lookup(t, txt + s[i].off, s[i].len);
        if (id != UINT32_MAX) {
            if (n < cap)
                ids[n] = id;
            n++;
            continue;
        }
        for (size_t b = 0; b < s[i].len; b++) {
            uint32_t bid = t->byte_id[(uint8_t)txt[s[i].off + b]];
            if (n < cap)
                ids[n] = bid != UINT32_MAX ? bid : t->unk;
            n++;
        }
    }
    free(txt), free(s), free(h);
    *n_ids = n;
    return n > cap ? SB_ERR_RANGE : SB_OK;
}

/* ---- decoding ---------------------------------------------------------------------- */

/* The bytes of token id; first: the first piece of the text (drops one
 * leading space with add_space_prefix). */
static int piece(const sb_rt_tok *t, uint32_t id, bool first, char *buf, size_t cap, size_t *n)
{
    char tmp[MAX_PIECE + 1];
    size_t k = 0;
    int type = t->type[id];
    if (type == SB_RT_TOK_BYTE) {
        tmp[k++] = (char)(hexval(t->piece[id][3]) * 16 + hexval(t->piece[id][4]));
    } else if (type != SB_RT_TOK_CONTROL && type != SB_RT_TOK_UNUSED) {
        const char *p = t->piece[id];
        for (size_t i = 0; i < t->len[id];) {
            if (t->len[id] - i >= 3 && !memcmp(p + i, "\xe2\x96\x81", 3)) {
                tmp[k++] = ' ';
                i += 3;
            } else {
                tmp[k++] = p[i++];
            }
        }
    }
    const char *o = tmp;
    if (first && t->space_prefix && k && tmp[0] == ' ')
        o++, k--;
    *n = k;
    if (k > cap)
        return SB_ERR_RANGE;
    if (k)
        memcpy(buf, o, k);
    return SB_OK;
}

int sb_rt_tok_piece(const sb_rt_tok *t, uint32_t id, uint32_t prev, char *buf, size_t cap,
                    size_t *n)
{
    if (!t || !n || (cap && !buf) || id >= t->n)
        return SB_ERR_RANGE;
    return piece(t, id, prev == SB_RT_TOK_NONE || prev == t->bos, buf, cap, n);
}

int sb_rt_tok_decode(const sb_rt_tok *t, const uint32_t *ids, size_t n_ids, char *buf,
                     size_t cap, size_t *len)
{
    if (!t || !len || (n_ids && !ids) || (cap && !buf))
        return SB_ERR_INVAL;
    /* The raw bytes first (pieces as stored, byte tokens as bytes), then
     * U+2581 to spaces over the whole: a U+2581 that byte fallback split
     * into three byte tokens is still a space. */
    size_t raw_len = 0;
    for (size_t i = 0; i < n_ids; i++) {
        if (ids[i] >= t->n)
            return SB_ERR_RANGE;
        int type = t->type[ids[i]];
        raw_len += type == SB_RT_TOK_BYTE ? 1
                 : type == SB_RT_TOK_CONTROL || type == SB_RT_TOK_UNUSED ? 0 : t->len[ids[i]];
    }
    char *raw = malloc(raw_len ? raw_len : 1);
    if (!raw)
        return SB_ERR_NOMEM;
    size_t k = 0;
    for (size_t i = 0; i < n_ids; i++) {
        uint32_t id = ids[i];
        int type = t->type[id];
        if (type == SB_RT_TOK_BYTE)
            raw[k++] = (char)(hexval(t->piece[id][3]) * 16 + hexval(t->piece[id][4]));
        else if (type != SB_RT_TOK_CONTROL && type != SB_RT_TOK_UNUSED)
            memcpy(raw + k, t->piece[id], t->len[id]), k += t->len[id];
    }
    size_t total = 0;
    bool first = true;
    for (size_t i = 0; i < k;) {
        char c = raw[i];
        size_t step = 1;
        if (k - i >= 3 && !memcmp(raw + i, "\xe2\x96\x81", 3))
            c = ' ', step = 3;
        i += step;
        if (first && c == ' ' && t->space_prefix) {
            first = false;
            continue;
        }
        first = false;
        if (total < cap)
            buf[total] = c;
        total++;
    }
    free(raw);
    *len = total;
    return total > cap ? SB_ERR_RANGE : SB_OK;
}

uint32_t sb_rt_tok_n_vocab(const sb_rt_tok *t) { return t ? t->n : 0; }
uint32_t sb_rt_tok_bos(const sb_rt_tok *t) { return t ? t->bos : 0; }
uint32_t sb_rt_tok_eos(const sb_rt_tok *t) { return t ? t->eos : 0; }
bool sb_rt_tok_add_bos(const sb_rt_tok *t) { return t && t->add_bos; }
