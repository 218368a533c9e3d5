/* format.c -- encoders and validating decoders for the on-disk format
 * (format.h draws every structure). Pure functions: no I/O, no allocation. */
#include "format.h"

#include <string.h>
#include <xxhash.h>

#include "hash.h"

/* ---- little-endian fields ------------------------------------------------------ */

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static bool all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

static uint64_t round_up(uint64_t v, uint64_t to)
{
    return (v + to - 1) / to * to;
}

uint32_t sb_seg_file_id(const char *name, const char *ext)
{
    size_t n = strlen(ext);
    if (strncmp(name, "seg-", 4) || strlen(name) != 13 + n || name[12] != '.' ||
        strcmp(name + 13, ext))
        return 0;
    uint32_t id = 0;
    for (int i = 4; i < 12; i++) {
        if (name[i] < '0' || name[i] > '9')
            return 0;
        id = id * 10 + (uint32_t)(name[i] - '0');
    }
    return id;
}

/* ---- records --------------------------------------------------------------------- */

/* Field offsets of the fixed head (format.h's table). */
enum {
    R_MAGIC = 0, R_VERSION = 4, R_KIND = 6, R_FLAGS = 7, R_SEQ = 8, R_SEGMENT = 16,
    R_GENERATION = 20, R_NS = 24, R_KEY = 32, R_PARENT = 48, R_POSITION = 64,
    R_NTOKENS = 68, R_HEADBYTES = 72, R_EXTRA = 76, R_PAYLOAD = 80, R_PAYLOADHASH = 88,
    R_RESERVED = 96, R_HEADHASH = 120
};
_Static_assert(R_HEADHASH + 8 == SB_REC_FIXED, "fixed head is 128 bytes");

uint32_t sb_rec_head_size(uint32_t n_tokens, uint32_t extra_bytes)
{
    uint64_t n = SB_REC_FIXED + 4ull * n_tokens + extra_bytes;
    n = round_up(n, SB_FMT_BLOCK);
    return n > SB_REC_HEAD_MAX ? 0 : (uint32_t)n;
}

/* The head hash: XXH3-64 of the fixed fields before it, seeded with the
 * file offset, then of the token IDs and extra bytes, seeded with that.
 * The zero padding after them is checked, not hashed. */
uint64_t sb_rec_head_hash(const void *head, uint32_t body_bytes, uint64_t off)
{
    const uint8_t *p = head;
    uint64_t h = XXH3_64bits_withSeed(p, R_HEADHASH, off);
    return XXH3_64bits_withSeed(p + SB_REC_FIXED, body_bytes, h);
}

static uint64_t head_hash(const uint8_t *head, uint32_t body_bytes, uint64_t off)
{
    return sb_rec_head_hash(head, body_bytes, off);
}

/* Kind-specific shape rules shared by encoder and decoder. */
static bool shape_ok(uint8_t kind, uint32_t n_tokens, uint32_t extra, uint64_t payload)
{
    switch (kind) {
    case SB_REC_NAMESPACE:
        return n_tokens == 0 && extra > 0 && payload == 0;
    case SB_REC_PAGE:
        return n_tokens >= 1 && n_tokens <= SB_PAGE_TOKENS_MAX && extra == 0 && payload > 0;
    case SB_REC_POINT:
        return n_tokens < SB_PAGE_TOKENS_MAX && extra == 0 && payload > 0;
    case SB_REC_TOMBSTONE:
        return n_tokens < SB_PAGE_TOKENS_MAX && extra == SB_TOMB_EXTRA && payload == 0;
    default:
        return false;
    }
}

/* Is version one this code reads? */
static bool version_known(unsigned version)
{
    return version == SB_FMT_VERSION || version == SB_REC_VERSION_COMPRESSED ||
           version == SB_REC_VERSION_TOMBSTONE;
}

/* The version a record of kind with flags is written as: 3 for a
 * tombstone, 2 for a compressed record, else 1. */
static unsigned version_of(unsigned kind, unsigned flags)
{
    return kind == SB_REC_TOMBSTONE ? SB_REC_VERSION_TOMBSTONE
           : flags                 ? SB_REC_VERSION_COMPRESSED
                                   : SB_FMT_VERSION;
}

/* The kinds and flags a record of this version may carry: version 1, a
 * namespace, page or point state record without flags; version 2, a page
 * or point state, compressed and perhaps shuffled; version 3, a tombstone
 * without flags. */
static bool flags_ok(unsigned version, unsigned kind, unsigned flags)
{
    if (version == SB_REC_VERSION_TOMBSTONE)
        return kind == SB_REC_TOMBSTONE && flags == 0;
    if (kind == SB_REC_TOMBSTONE)
        return false;
    if (version == SB_FMT_VERSION)
        return flags == 0;
    return (flags & SB_REC_F_COMPRESSED) && !(flags & ~(SB_REC_F_COMPRESSED | SB_REC_F_SHUFFLE2)) &&
           kind != SB_REC_NAMESPACE;
}

/* Write the fixed fields, token IDs, extra bytes and head hash of h at p
 * (whose padding the caller has zeroed). */

static void write_head(uint8_t *p, const sb_rec_head *h, const uint32_t *tokens,
                       const void *extra, uint64_t off)
{
    put32(p + R_MAGIC, SB_REC_MAGIC);
    put16(p + R_VERSION, (uint16_t)version_of(h->kind, h->flags));
    p[R_KIND] = h->kind;
    p[R_FLAGS] = h->flags;
    put64(p + R_SEQ, h->seq);
    put32(p + R_SEGMENT, h->segment_id);
    put32(p + R_GENERATION, h->generation);
    put64(p + R_NS, h->ns_id);
    put64(p + R_KEY, h->key[0]);
    put64(p + R_KEY + 8, h->key[1]);
    put64(p + R_PARENT, h->parent_key[0]);
    put64(p + R_PARENT + 8, h->parent_key[1]);
    put32(p + R_POSITION, h->position);
    put32(p + R_NTOKENS, h->n_tokens);
    put32(p + R_HEADBYTES, h->head_bytes);
    put32(p + R_EXTRA, h->extra_bytes);
    put64(p + R_PAYLOAD, h->payload_bytes);
    put64(p + R_PAYLOADHASH, h->payload_hash);
    for (uint32_t i = 0; i < h->n_tokens; i++)
        put32(p + SB_REC_FIXED + 4 * i, tokens[i]);
    if (h->extra_bytes)
        memcpy(p + SB_REC_FIXED + 4ull * h->n_tokens, extra, h->extra_bytes);
    put64(p + R_HEADHASH, head_hash(p, 4 * h->n_tokens + h->extra_bytes, off));
}

int sb_rec_encode(const sb_rec_head *h, const uint32_t *tokens, const void *extra,
                  uint64_t off, void *buf)
{
    if (!h || !buf || (h->n_tokens && !tokens) || (h->extra_bytes && !extra))
        return SB_ERR_INVAL;
    unsigned version = version_of(h->kind, h->flags);
    if (!shape_ok(h->kind, h->n_tokens, h->extra_bytes, h->payload_bytes) ||
        !flags_ok(version, h->kind, h->flags) || h->payload_bytes > SB_REC_PAYLOAD_MAX ||
        h->head_bytes == 0 || h->head_bytes != sb_rec_head_size(h->n_tokens, h->extra_bytes))
        return SB_ERR_INVAL;
    memset(buf, 0, h->head_bytes);
    write_head(buf, h, tokens, extra, off);
    return SB_OK;
}

/* Decode the fixed fields without judging them. */
static void read_fixed(const uint8_t *p, sb_rec_head *h)
{
    h->kind = p[R_KIND];
    h->flags = p[R_FLAGS];
    h->seq = get64(p + R_SEQ);
    h->segment_id = get32(p + R_SEGMENT);
    h->generation = get32(p + R_GENERATION);
    h->ns_id = get64(p + R_NS);
    h->key[0] = get64(p + R_KEY);
    h->key[1] = get64(p + R_KEY + 8);
    h->parent_key[0] = get64(p + R_PARENT);
    h->parent_key[1] = get64(p + R_PARENT + 8);
    h->position = get32(p + R_POSITION);
    h->n_tokens = get32(p + R_NTOKENS);
    h->head_bytes = get32(p + R_HEADBYTES);
    h->extra_bytes = get32(p + R_EXTRA);
    h->payload_bytes = get64(p + R_PAYLOAD);
    h->payload_hash = get64(p + R_PAYLOADHASH);
}

int sb_rec_peek(const void *buf, size_t len, uint32_t *head_bytes)
{
    if (!buf || !head_bytes || len < SB_REC_FIXED)
        return SB_ERR_INVAL;
    const uint8_t *p = buf;
    if (get32(p + R_MAGIC) != SB_REC_MAGIC)
        return SB_ERR_FORMAT;
    unsigned version = get16(p + R_VERSION);
    if (!version_known(version))
        return SB_ERR_VERSION;
    sb_rec_head h;
    read_fixed(p, &h);
    if (h.n_tokens > SB_PAGE_TOKENS_MAX || h.extra_bytes > SB_REC_HEAD_MAX ||
        !shape_ok(h.kind, h.n_tokens, h.extra_bytes, h.payload_bytes) ||
        !flags_ok(version, h.kind, h.flags) || h.payload_bytes > SB_REC_PAYLOAD_MAX ||
        h.head_bytes == 0 || h.head_bytes != sb_rec_head_size(h.n_tokens, h.extra_bytes))
        return SB_ERR_FORMAT;
    *head_bytes = h.head_bytes;
    return SB_OK;
}

bool sb_rec_other_version(const void *buf, size_t len, uint64_t off)
{
    const uint8_t *p = buf;
    if (!buf || len < SB_REC_FIXED || get32(p + R_MAGIC) != SB_REC_MAGIC)
        return false;
    unsigned version = get16(p + R_VERSION);
    if (version_known(version))
        return false;
    uint64_t body = 4ull * get32(p + R_NTOKENS) + get32(p + R_EXTRA);
    return body <= len - SB_REC_FIXED &&
           get64(p + R_HEADHASH) == head_hash(p, (uint32_t)body, off);
}

int sb_rec_decode(const void *buf, size_t len, uint64_t off, sb_rec_head *h,
                  const uint32_t **tokens, const void **extra)
{
    uint32_t head_bytes;
    int rc = sb_rec_peek(buf, len, &head_bytes);
    if (rc != SB_OK)
        return rc;
    if (!h || len < head_bytes)
        return SB_ERR_INVAL;
    const uint8_t *p = buf;
    read_fixed(p, h);
    uint32_t body = 4 * h->n_tokens + h->extra_bytes;
    if (!all_zero(p + R_RESERVED, R_HEADHASH - R_RESERVED) ||
        !all_zero(p + SB_REC_FIXED + body, head_bytes - SB_REC_FIXED - body) ||
        get64(p + R_HEADHASH) != head_hash(p, body, off))
        return SB_ERR_CORRUPT;
    if (tokens)
        *tokens = (const uint32_t *)(const void *)(p + SB_REC_FIXED);
    if (extra)
        *extra = h->extra_bytes ? p + SB_REC_FIXED + 4ull * h->n_tokens : NULL;
    return SB_OK;
}

uint64_t sb_rec_payload_hash(const void *payload, size_t n)
{
    return sb_hash_big(payload, n);
}

void sb_rec_tomb_put(void *extra, uint64_t removal_seq)
{
    put64(extra, removal_seq);
}

uint64_t sb_rec_tomb_seq(const void *extra)
{
    return get64(extra);
}

/* ---- namespace description --------------------------------------------------------- */

enum { N_PT = 0, N_TENSORS = 4, N_POINT = 8, N_FLAGS = 12, N_MODEL = 16, N_SCOPE = 20,
       N_FIXED = 24 };

uint32_t sb_rec_ns_size(const sb_layout *l, size_t scope_bytes)
{
    return (uint32_t)(N_FIXED + 4ull * l->n_tensors + l->model_id_bytes + scope_bytes);
}

int sb_rec_ns_encode(const sb_layout *l, const void *scope, size_t scope_bytes, void *buf)
{
    if (!l || !buf || l->n_tensors > SB_TENSORS_MAX || l->model_id_bytes > SB_MODEL_ID_MAX ||
        scope_bytes > SB_SCOPE_MAX || (scope_bytes && !scope) ||
        (l->n_tensors && !l->bytes_per_token) || (l->model_id_bytes && !l->model_id))
        return SB_ERR_INVAL;
    uint8_t *p = buf;
    put32(p + N_PT, l->page_tokens);
    put32(p + N_TENSORS, l->n_tensors);
    put32(p + N_POINT, l->point_bytes);
    put32(p + N_FLAGS, l->flags);
    put32(p + N_MODEL, (uint32_t)l->model_id_bytes);
    put32(p + N_SCOPE, (uint32_t)scope_bytes);
    uint8_t *q = p + N_FIXED;
    for (uint32_t t = 0; t < l->n_tensors; t++, q += 4)
        put32(q, l->bytes_per_token[t]);
    if (l->model_id_bytes)
        memcpy(q, l->model_id, l->model_id_bytes);
    q += l->model_id_bytes;
    if (scope_bytes)
        memcpy(q, scope, scope_bytes);
    return SB_OK;
}

int sb_rec_ns_decode(const void *buf, size_t len, sb_rec_ns *out)
{
    if (!buf || !out)
        return SB_ERR_INVAL;
    const uint8_t *p = buf;
    if (len < N_FIXED)
        return SB_ERR_FORMAT;
    uint32_t n_t = get32(p + N_TENSORS), m = get32(p + N_MODEL), s = get32(p + N_SCOPE);
    if (n_t > SB_TENSORS_MAX || m > SB_MODEL_ID_MAX || s > SB_SCOPE_MAX ||
        N_FIXED + 4ull * n_t + m + s != len)
        return SB_ERR_FORMAT;
    memset(out, 0, sizeof *out);
    out->layout.page_tokens = get32(p + N_PT);
    out->layout.n_tensors = n_t;
    out->layout.point_bytes = get32(p + N_POINT);
    out->layout.flags = get32(p + N_FLAGS);
    out->layout.bytes_per_token = (const uint32_t *)(const void *)(p + N_FIXED);
    out->layout.model_id = p + N_FIXED + 4ull * n_t;
    out->layout.model_id_bytes = m;
    out->scope = s ? p + N_FIXED + 4ull * n_t + m : NULL;
    out->scope_bytes = s;
    return SB_OK;
}

/* ---- superblock ------------------------------------------------------------------- */

enum { S_MAGIC = 0, S_VERSION = 8, S_SLOT = 10, S_SLOTBYTES = 12, S_WRITES = 16,
       S_STORE = 24, S_SEGBYTES = 32, S_DURABLE = 40, S_NSEG = 48, S_RESERVED = 52 };

uint32_t sb_super_slot_size(uint32_t n_segments)
{
    uint64_t n = SB_SUPER_FIXED + (uint64_t)SB_SUPER_ENTRY * n_segments + SB_SUPER_WEAR + 8;
    n = round_up(n, SB_FMT_BLOCK);
    return n > UINT32_MAX ? 0 : (uint32_t)n;
}

int sb_super_encode(const sb_super *s, void *buf)
{
    if (!s || !buf || s->slot > 1 || (s->n_segments && !s->segments) ||
        s->slot_bytes % SB_FMT_BLOCK || s->slot_bytes < sb_super_slot_size(s->n_segments) ||
        sb_super_slot_size(s->n_segments) == 0)
        return SB_ERR_INVAL;
    uint8_t *p = buf;
    memset(p, 0, s->slot_bytes);
    put64(p + S_MAGIC, SB_SUPER_MAGIC);
    put16(p + S_VERSION, s->tombstones ? SB_SUPER_VERSION : SB_SUPER_VERSION_PLAIN);
    put16(p + S_SLOT, s->slot);
    put32(p + S_SLOTBYTES, s->slot_bytes);
    put64(p + S_WRITES, s->write_count);
    put64(p + S_STORE, s->store_id);
    put64(p + S_SEGBYTES, s->segment_bytes);
    put64(p + S_DURABLE, s->durable_seq);
    put32(p + S_NSEG, s->n_segments);
    for (uint32_t i = 0; i < s->n_segments; i++) {
        const sb_super_seg *g = &s->segments[i];
        uint8_t *e = p + SB_SUPER_FIXED + (size_t)SB_SUPER_ENTRY * i;
        if (g->state > SB_SEG_SEALED)
            return SB_ERR_INVAL;
        put32(e, g->segment_id);
        put32(e + 4, g->generation);
        put32(e + 8, g->state);
        put64(e + 16, g->data_end);
    }
    uint8_t *wear = p + SB_SUPER_FIXED + (size_t)SB_SUPER_ENTRY * s->n_segments;
    put64(wear, s->wear_write);
    put64(wear + 8, s->wear_logical);
    put64(wear + 16, s->wear_reinsert);
    put64(p + s->slot_bytes - 8, XXH3_64bits(p, s->slot_bytes - 8));
    return SB_OK;
}

bool sb_super_other_version(const void *buf, size_t len)
{
    const uint8_t *p = buf;
    if (!buf || len < SB_SUPER_FIXED + 8 || get64(p + S_MAGIC) != SB_SUPER_MAGIC)
        return false;
    uint16_t version = get16(p + S_VERSION);
    return (version < 1 || version > SB_SUPER_VERSION) &&
           get64(p + len - 8) == XXH3_64bits(p, len - 8);
}

int sb_super_decode(const void *buf, size_t len, sb_super *s, sb_super_seg *segs,
                    uint32_t max_segs)
{
    if (!buf || !s)
        return SB_ERR_INVAL;
    const uint8_t *p = buf;
    if (len < SB_SUPER_FIXED + 8 || get64(p + S_MAGIC) != SB_SUPER_MAGIC)
        return SB_ERR_FORMAT;
    uint16_t version = get16(p + S_VERSION);
    if (version < 1 || version > SB_SUPER_VERSION)
        return SB_ERR_VERSION;
    uint32_t slot_bytes = get32(p + S_SLOTBYTES), n = get32(p + S_NSEG);
    uint32_t wear = version >= 2 ? SB_SUPER_WEAR : 0;
    uint64_t min = SB_SUPER_FIXED + (uint64_t)SB_SUPER_ENTRY * n + wear + 8;
    uint32_t need = min > UINT32_MAX ? 0 : (uint32_t)min;
    if (slot_bytes != len || slot_bytes % SB_FMT_BLOCK || need == 0 || slot_bytes < need ||
        get16(p + S_SLOT) > 1)
        return SB_ERR_FORMAT;
    if (get64(p + slot_bytes - 8) != XXH3_64bits(p, slot_bytes - 8))
        return SB_ERR_CORRUPT;
    size_t used = SB_SUPER_FIXED + (size_t)SB_SUPER_ENTRY * n;
    if (!all_zero(p + S_RESERVED, SB_SUPER_FIXED - S_RESERVED) ||
        (wear && !all_zero(p + used + 24, 8)) ||
        !all_zero(p + used + wear, slot_bytes - 8 - used - wear))
        return SB_ERR_CORRUPT;
    s->wear_write = wear ? get64(p + used) : 0;
    s->wear_logical = wear ? get64(p + used + 8) : 0;
    s->wear_reinsert = wear ? get64(p + used + 16) : 0;
    s->tombstones = version >= SB_SUPER_VERSION_TOMB;
    if (n > max_segs || (n && !segs))
        return SB_ERR_RANGE;
    s->slot = get16(p + S_SLOT);
    s->slot_bytes = slot_bytes;
    s->write_count = get64(p + S_WRITES);
    s->store_id = get64(p + S_STORE);
    s->segment_bytes = get64(p + S_SEGBYTES);
    s->durable_seq = get64(p + S_DURABLE);
    s->n_segments = n;
    s->segments = segs;
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *e = p + SB_SUPER_FIXED + (size_t)SB_SUPER_ENTRY * i;
        if (get32(e + 8) > SB_SEG_SEALED || get32(e + 12) != 0)
            return SB_ERR_CORRUPT;
        segs[i].segment_id = get32(e);
        segs[i].generation = get32(e + 4);
        segs[i].state = get32(e + 8);
        segs[i].data_end = get64(e + 16);
    }
    return SB_OK;
}

/* ---- summary ----------------------------------------------------------------------- */

enum { M_MAGIC = 0, M_VERSION = 8, M_RESERVED0 = 10, M_SEGMENT = 12, M_GENERATION = 16,
       M_NENTRIES = 20, M_DATAEND = 24, M_FIRST = 32, M_LAST = 40, M_BODY = 48,
       M_RESERVED1 = 56 };
enum { E_BYTES = 0, E_ZERO = 4, E_OFF = 8, E_HEAD = 16 };

uint32_t sb_sum_entry_size(uint32_t n_tokens, uint32_t extra_bytes)
{
    return (uint32_t)round_up(E_HEAD + SB_REC_FIXED + 4ull * n_tokens + extra_bytes, 8);
}

void sb_sum_put_entry(void *buf, uint64_t off, const sb_rec_head *h, const uint32_t *tokens,
                      const void *extra)
{
    uint8_t *p = buf;
    uint32_t size = sb_sum_entry_size(h->n_tokens, h->extra_bytes);
    memset(p, 0, size);
    put32(p + E_BYTES, size);
    put64(p + E_OFF, off);
    /* The head as written, without its padding: same fields, same hash. */
    write_head(p + E_HEAD, h, tokens, extra, off);
}

size_t sb_sum_finish(void *buf, const sb_sum_info *info)
{
    uint8_t *p = buf;
    memset(p, 0, SB_SUM_FIXED);
    put64(p + M_MAGIC, SB_SUM_MAGIC);
    put16(p + M_VERSION, SB_FMT_VERSION);
    put32(p + M_SEGMENT, info->segment_id);
    put32(p + M_GENERATION, info->generation);
    put32(p + M_NENTRIES, info->n_entries);
    put64(p + M_DATAEND, info->data_end);
    put64(p + M_FIRST, info->first_seq);
    put64(p + M_LAST, info->last_seq);
    put64(p + M_BODY, info->body_bytes);
    size_t end = SB_SUM_FIXED + info->body_bytes;
    put64(p + end, XXH3_64bits(p, end));
    return end + 8;
}

int sb_sum_decode(const void *buf, size_t len, sb_sum_info *info)
{
    if (!buf || !info)
        return SB_ERR_INVAL;
    const uint8_t *p = buf;
    if (len < SB_SUM_FIXED + 8 || get64(p + M_MAGIC) != SB_SUM_MAGIC)
        return SB_ERR_FORMAT;
    if (get16(p + M_VERSION) != SB_FMT_VERSION)
        return SB_ERR_VERSION;
    uint64_t body = get64(p + M_BODY);
    if (body != len - SB_SUM_FIXED - 8 || body % 8)
        return SB_ERR_FORMAT;
    if (get64(p + len - 8) != XXH3_64bits(p, len - 8))
        return SB_ERR_CORRUPT;
    if (get16(p + M_RESERVED0) || get64(p + M_RESERVED1))
        return SB_ERR_CORRUPT;
    info->segment_id = get32(p + M_SEGMENT);
    info->generation = get32(p + M_GENERATION);
    info->n_entries = get32(p + M_NENTRIES);
    info->data_end = get64(p + M_DATAEND);
    info->first_seq = get64(p + M_FIRST);
    info->last_seq = get64(p + M_LAST);
    info->body_bytes = body;
    return SB_OK;
}

int sb_sum_next(const void *buf, const sb_sum_info *info, size_t *pos, uint64_t *off,
                sb_rec_head *h, const uint32_t **tokens, const void **extra)
{
    const uint8_t *p = buf;
    size_t end = SB_SUM_FIXED + info->body_bytes;
    if (*pos >= end)
        return SB_ERR_RANGE;
    if (end - *pos < E_HEAD + SB_REC_FIXED)
        return SB_ERR_FORMAT;
    const uint8_t *e = p + *pos;
    uint32_t size = get32(e + E_BYTES);
    if (size % 8 || size < E_HEAD + SB_REC_FIXED || size > end - *pos || get32(e + E_ZERO))
        return SB_ERR_FORMAT;
    uint32_t head_bytes;
    const uint8_t *r = e + E_HEAD;
    if (sb_rec_peek(r, SB_REC_FIXED, &head_bytes) != SB_OK)
        return SB_ERR_FORMAT;
    read_fixed(r, h);
    uint32_t body = 4 * h->n_tokens + h->extra_bytes;
    uint64_t o = get64(e + E_OFF);
    if (sb_sum_entry_size(h->n_tokens, h->extra_bytes) != size ||
        !all_zero(r + R_RESERVED, R_HEADHASH - R_RESERVED) ||
        !all_zero(r + SB_REC_FIXED + body, size - E_HEAD - SB_REC_FIXED - body) ||
        get64(r + R_HEADHASH) != head_hash(r, body, o))
        return SB_ERR_FORMAT;
    *off = o;
    if (tokens)
        *tokens = (const uint32_t *)(const void *)(r + SB_REC_FIXED);
    if (extra)
        *extra = h->extra_bytes ? r + SB_REC_FIXED + 4ull * h->n_tokens : NULL;
    *pos += size;
    return SB_OK;
}
