/* bpe.c -- byte-level BPE merge table and word encoding (bpe.h; the step
 * numbers are the header's).
 *
 * Pieces: every distinct byte string the table knows (normal tokens, the
 * 256 single bytes, both halves and the result of every merge) gets a
 * piece number, interned in an open-addressing hash table; piece_tok maps
 * a piece to its token. A merge is then a pair of piece numbers -> (rank,
 * result piece), another open-addressing table keyed by the pair, so the
 * merge loop compares and hashes integers only.
 */
#include "text/bpe.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "text/heap.h"
#include "text/unicode.h"
#include "snapbank.h"

#define NONE UINT32_MAX

typedef struct pair_slot {
    uint64_t key;              /* (left + 1) << 32 | (right + 1); 0 empty */
    uint32_t rank;             /* the merge's index in the file */
    uint32_t piece;            /* the merged piece */
} pair_slot;

struct sb_rt_bpe {
    char *bytes;               /* every piece's bytes, back to back */
    size_t n_bytes, cap_bytes;
    size_t *off;               /* (cap_pieces) piece i is bytes[off[i], + len[i]) */
    uint32_t *len;
    uint32_t *tok;             /* the normal token that piece i is, or NONE */
    size_t n_pieces, cap_pieces;
    uint32_t *slot;            /* piece hash: piece + 1, 0 empty */
    size_t slots;              /* a power of two, at least twice n_pieces */
    pair_slot *pair;
    size_t pair_slots;         /* a power of two */
    size_t n_pairs;
    uint32_t byte_piece[256];  /* the piece of each single byte */
    uint32_t unk;
    bool ignore_merges;
};

/* ---- the byte-to-unicode mapping ----------------------------------------------------- */

static bool printable(unsigned b)
{
    return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
}

/* The 68 other bytes in order: 0x00..0x20 (33), 0x7F..0xA0 (34), 0xAD. */
uint32_t sb_rt_bpe_byte_cp(uint8_t b)
{
    if (printable(b))
        return b;
    return 0x100u + (b <= 0x20 ? b : b <= 0xa0 ? 33u + (b - 0x7fu) : 67u);
}

int sb_rt_bpe_cp_byte(uint32_t cp)
{
    if (cp < 0x100)
        return printable(cp) ? (int)cp : -1;
    if (cp >= 0x100 + 68)
        return -1;
    uint32_t k = cp - 0x100;
    return k <= 32 ? (int)k : k <= 66 ? (int)(0x7f + k - 33) : 0xad;
}

bool sb_rt_bpe_unmap(const char *s, size_t n, char *out, size_t *out_len)
{
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t step = sb_rt_utf8_next((const uint8_t *)s + i, n - i, &cp);
        int b = step == 1 && (uint8_t)s[i] >= 0x80 ? -1 : sb_rt_bpe_cp_byte(cp);
        if (b < 0)
            return false;
        out[k++] = (char)b;
        i += step;
    }
    *out_len = k;
    return true;
}

/* ---- pieces ------------------------------------------------------------------------- */

static uint64_t hash_bytes(const char *s, size_t n)
{
    return XXH3_64bits(s, n);
}

static uint32_t find_piece(const sb_rt_bpe *b, const char *s, size_t n)
{
    for (size_t j = hash_bytes(s, n) & (b->slots - 1);; j = (j + 1) & (b->slots - 1)) {
        uint32_t v = b->slot[j];
        if (!v)
            return NONE;
        if (b->len[v - 1] == n && !memcmp(b->bytes + b->off[v - 1], s, n))
            return v - 1;
    }
}

static int grow_slots(sb_rt_bpe *b)
{
    size_t slots = b->slots ? 2 * b->slots : 1024;
    uint32_t *slot = calloc(slots, sizeof *slot);
    if (!slot)
        return SB_ERR_NOMEM;
    for (size_t p = 0; p < b->n_pieces; p++) {
        size_t j = hash_bytes(b->bytes + b->off[p], b->len[p]) & (slots - 1);
        while (slot[j])
            j = (j + 1) & (slots - 1);
        slot[j] = (uint32_t)p + 1;
    }
    free(b->slot);
    b->slot = slot;
    b->slots = slots;
    return SB_OK;
}

/* The piece of s[0, n), made when new. *id receives it. */
static int intern(sb_rt_bpe *b, const char *s, size_t n, uint32_t *id)
{
    if (b->slots) {
        *id = find_piece(b, s, n);
        if (*id != NONE)
            return SB_OK;
    }
    if (2 * (b->n_pieces + 1) > b->slots && grow_slots(b) != SB_OK)
        return SB_ERR_NOMEM;
    if (b->n_pieces == b->cap_pieces) {
        size_t cap = b->cap_pieces ? 2 * b->cap_pieces : 4096;
        size_t *off = realloc(b->off, cap * sizeof *off);
        if (off)
            b->off = off;
        uint32_t *len = realloc(b->len, cap * sizeof *len);
        if (len)
            b->len = len;
        uint32_t *tok = realloc(b->tok, cap * sizeof *tok);
        if (tok)
            b->tok = tok;
        if (!off || !len || !tok)
            return SB_ERR_NOMEM;
        b->cap_pieces = cap;
    }
    if (n > b->cap_bytes - b->n_bytes) {
        size_t cap = b->cap_bytes ? b->cap_bytes : 1 << 16;
        while (n > cap - b->n_bytes)
            cap *= 2;
        char *bytes = realloc(b->bytes, cap);
        if (!bytes)
            return SB_ERR_NOMEM;
        b->bytes = bytes;
        b->cap_bytes = cap;
    }
    uint32_t p = (uint32_t)b->n_pieces++;
    if (n)
        memcpy(b->bytes + b->n_bytes, s, n);
    b->off[p] = b->n_bytes;
    b->len[p] = (uint32_t)n;
    b->tok[p] = NONE;
    b->n_bytes += n;
    size_t j = hash_bytes(s, n) & (b->slots - 1);
    while (b->slot[j])
        j = (j + 1) & (b->slots - 1);
    b->slot[j] = p + 1;
    *id = p;
    return SB_OK;
}

/* ---- pairs -------------------------------------------------------------------------- */

static size_t pair_hash(uint64_t key, size_t slots)
{
    return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 32) & (slots - 1);
}

static const pair_slot *find_pair(const sb_rt_bpe *b, uint32_t l, uint32_t r)
{
    uint64_t key = ((uint64_t)l + 1) << 32 | ((uint64_t)r + 1);
    for (size_t j = pair_hash(key, b->pair_slots);; j = (j + 1) & (b->pair_slots - 1)) {
        const pair_slot *s = &b->pair[j];
        if (s->key == key)
            return s;
        if (!s->key)
            return NULL;
    }
}

/* Merge string s[0, n) of rank `rank`: "LEFT RIGHT" split at the first
 * space after the first byte. A merge that cannot apply is skipped. */
static int add_merge(sb_rt_bpe *b, const char *s, size_t n, uint32_t rank, char *tmp)
{
    const char *sp = n > 1 ? memchr(s + 1, ' ', n - 1) : NULL;
    if (!sp)
        return SB_OK;
    size_t nl = (size_t)(sp - s), nr = n - nl - 1, ll, lr;
    if (!nr || !sb_rt_bpe_unmap(s, nl, tmp, &ll) || !sb_rt_bpe_unmap(sp + 1, nr, tmp + ll, &lr))
        return SB_OK;
    uint32_t pl, pr, pm;
    int rc;
    if ((rc = intern(b, tmp, ll, &pl)) || (rc = intern(b, tmp + ll, lr, &pr)) ||
        (rc = intern(b, tmp, ll + lr, &pm)))
        return rc;
    uint64_t key = ((uint64_t)pl + 1) << 32 | ((uint64_t)pr + 1);
    size_t j = pair_hash(key, b->pair_slots);
    while (b->pair[j].key && b->pair[j].key != key)
        j = (j + 1) & (b->pair_slots - 1);
    if (!b->pair[j].key) { /* a pair listed twice keeps its first rank */
        b->pair[j] = (pair_slot){ key, rank, pm };
        b->n_pairs++;
    }
    return SB_OK;
}

void sb_rt_bpe_free(sb_rt_bpe *b)
{
    if (!b)
        return;
    free(b->bytes), free(b->off), free(b->len), free(b->tok), free(b->slot), free(b->pair);
    free(b);
}

size_t sb_rt_bpe_n_merges(const sb_rt_bpe *b)
{
    return b ? b->n_pairs : 0;
}

int sb_rt_bpe_new(uint32_t n, const char *const *raw, const size_t *raw_len, const bool *ok,
                  const char *const *merges, const size_t *merge_len, uint64_t n_merges,
                  bool ignore_merges, uint32_t unk, sb_rt_bpe **out, sb_rt_err *err)
{
    *out = NULL;
    if (n_merges > (1ull << 31))
        return sb_rt_fail(err, SB_ERR_FORMAT, "tokenizer: %" PRIu64 " merges (at most 2^31)",
                          n_merges);
    sb_rt_bpe *b = calloc(1, sizeof *b);
    size_t longest = 0;
    for (uint64_t i = 0; i < n_merges; i++)
        longest = merge_len[i] > longest ? merge_len[i] : longest;
    char *tmp = malloc(longest + 1);
    int rc = b && tmp ? SB_OK : SB_ERR_NOMEM;
    if (rc == SB_OK) {
        b->unk = unk;
        b->ignore_merges = ignore_merges;
        b->pair_slots = 1024;
        while (b->pair_slots < n_merges + n_merges / 3 + 1)
            b->pair_slots *= 2;
        b->pair = calloc(b->pair_slots, sizeof *b->pair);
        rc = b->pair ? SB_OK : SB_ERR_NOMEM;
    }
    /* normal tokens, then single bytes, then merges */
    for (uint32_t i = 0; rc == SB_OK && i < n; i++) {
        uint32_t p;
        if (ok[i] && raw_len[i] && (rc = intern(b, raw[i], raw_len[i], &p)) == SB_OK &&
            b->tok[p] == NONE)
            b->tok[p] = i;
    }
    for (unsigned c = 0; rc == SB_OK && c < 256; c++) {
        char byte = (char)c;
        rc = intern(b, &byte, 1, &b->byte_piece[c]);
        if (rc == SB_OK && b->tok[b->byte_piece[c]] == NONE && unk == NONE) {
            free(tmp);
            sb_rt_bpe_free(b);
            return sb_rt_fail(err, SB_ERR_FORMAT, "tokenizer: byte 0x%02X has no token (its "
                              "text is U+%04" PRIX32 ") and the vocabulary has no unknown token",
                              c, sb_rt_bpe_byte_cp((uint8_t)c));
        }
    }
    for (uint64_t i = 0; rc == SB_OK && i < n_merges; i++)
        rc = add_merge(b, merges[i], merge_len[i], (uint32_t)i, tmp);
    free(tmp);
    if (rc != SB_OK) {
        sb_rt_bpe_free(b);
        return sb_rt_fail(err, rc, "tokenizer: out of memory");
    }
    *out = b;
    return SB_OK;
}

/* ---- encoding ----------------------------------------------------------------------- */

typedef struct sym {
    uint32_t piece;            /* NONE once merged into its left neighbour */
    int32_t prev, next;        /* list links, -1 none */
} sym;

typedef struct cand {          /* merge symbols l and r into piece `to` */
    uint32_t rank;
    int32_t l, r;
    uint32_t pl, pr;           /* their pieces when queued: stale if changed */
    uint32_t to;
} cand;

void sb_rt_bpe_scratch_free(sb_rt_bpe_scratch *s)
{
    free(s->sym), free(s->heap), free(s->ids);
    memset(s, 0, sizeof *s);
}

static int reserve(sb_rt_bpe_scratch *s, size_t n)
{
    if (n <= s->cap)
        return SB_OK;
    size_t cap = n < 64 ? 64 : n;
    if (cap > SIZE_MAX / (3 * sizeof(cand)))
        return SB_ERR_NOMEM;
    sym *sy = malloc(cap * sizeof *sy);
    cand *h = malloc(3 * cap * sizeof *h); /* n - 1 first pairs, 2 per merge */
    uint32_t *ids = malloc(cap * sizeof *ids);
    if (!sy || !h || !ids) {
        free(sy), free(h), free(ids);
        return SB_ERR_NOMEM;
    }
    sb_rt_bpe_scratch_free(s);
    s->sym = sy, s->heap = h, s->ids = ids, s->cap = cap;
    return SB_OK;
}

/* Heap order: lower rank first, then the leftmost pair. */
static bool before(const cand *a, const cand *b, const void *ctx)
{
    (void)ctx;
    return a->rank != b->rank ? a->rank < b->rank : a->l < b->l;
}

SB_RT_HEAP(heap, cand, before)

static void try_pair(const sb_rt_bpe *b, const sym *s, int32_t l, cand *h, size_t *nh)
{
    if (l < 0 || s[l].next < 0)
        return;
    int32_t r = s[l].next;
    const pair_slot *p = find_pair(b, s[l].piece, s[r].piece);
    if (p)
        heap_push(h, nh, (cand){ p->rank, l, r, s[l].piece, s[r].piece, p->piece }, NULL);
}

int sb_rt_bpe_word(const sb_rt_bpe *b, const uint8_t *w, size_t n, sb_rt_bpe_scratch *s,
                   const uint32_t **ids, size_t *n_ids)
{
    if (reserve(s, n) != SB_OK)
        return SB_ERR_NOMEM;
    uint32_t *out = s->ids;
    *ids = out;
    *n_ids = 0;
    if (b->ignore_merges && n > 1) { /* 1 */
        uint32_t p = find_piece(b, (const char *)w, n);
        if (p != NONE && b->tok[p] != NONE) {
            out[0] = b->tok[p];
            *n_ids = 1;
            return SB_OK;
        }
    }
    sym *sy = s->sym; /* 2 */
    cand *h = s->heap;
    for (size_t i = 0; i < n; i++)
        sy[i] = (sym){ b->byte_piece[w[i]], (int32_t)i - 1, i + 1 < n ? (int32_t)i + 1 : -1 };
    size_t nh = 0; /* 3 */
    for (int32_t i = 0; i + 1 < (int32_t)n; i++)
        try_pair(b, sy, i, h, &nh);
    while (nh) {
        cand c = heap_pop(h, &nh, NULL);
        sym *L = &sy[c.l], *R = &sy[c.r];
        if (L->piece != c.pl || R->piece != c.pr || L->next != c.r)
            continue; /* stale */
        L->piece = c.to;
        L->next = R->next;
        if (R->next >= 0)
            sy[R->next].prev = c.l;
        R->piece = NONE;
        try_pair(b, sy, L->prev, h, &nh);
        try_pair(b, sy, c.l, h, &nh);
    }
    size_t k = 0; /* 4 */
    for (int32_t i = 0; i >= 0; i = sy[i].next) {
        uint32_t p = sy[i].piece;
        if (b->tok[p] != NONE) {
            out[k++] = b->tok[p];
            continue;
        }
        for (uint32_t j = 0; j < b->len[p]; j++) {
            uint32_t t = b->tok[b->byte_piece[(uint8_t)b->bytes[b->off[p] + j]]];
            out[k++] = t != NONE ? t : b->unk;
        }
    }
    *n_ids = k;
    return SB_OK;
}
