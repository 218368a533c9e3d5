/* Description: the on-disk format (store/format/format.h). The documented example
 * record is produced byte for byte; every record kind, the namespace
 * description, superblock slots and summaries round-trip exactly; and each
 * decoder refuses what it must with the documented code: a wrong magic
 * (SB_ERR_FORMAT), another version (SB_ERR_VERSION, never guessed at), a
 * flipped bit anywhere in the checked bytes (SB_ERR_CORRUPT or
 * SB_ERR_FORMAT), a record read at the wrong offset (SB_ERR_CORRUPT),
 * sizes that do not add up (SB_ERR_FORMAT), a short buffer (SB_ERR_INVAL). */
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "format.h"
#include "hash.h"
#include "testutil.h"

static const uint8_t example_head[0xa0] = {
    0x53, 0x42, 0x52, 0x43, 0x01, 0x00, 0x02, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x4d, 0x6b, 0x8e, 0x22, 0x3f, 0x2c, 0x0e, 0x71,
    0x0e, 0x76, 0xe4, 0x0c, 0x6e, 0x37, 0xb4, 0x56, 0x84, 0x34, 0xb3, 0x92, 0x09, 0x2b, 0x8b, 0x71,
    0x37, 0x0f, 0xd3, 0x58, 0x5a, 0x0d, 0x69, 0x3e, 0x24, 0x76, 0xab, 0x2b, 0x2a, 0x67, 0x13, 0x93,
    0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x7e, 0xe3, 0x2b, 0x84, 0x46, 0x87, 0x42, 0xd7,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x58, 0x44, 0xd8, 0x17, 0x83, 0xde, 0xd0, 0xd7,
    0x64, 0x00, 0x00, 0x00, 0x65, 0x00, 0x00, 0x00, 0x66, 0x00, 0x00, 0x00, 0x67, 0x00, 0x00, 0x00,
};

/* Field by field: the structs have padding. */
static void assert_head_equal(const sb_rec_head *a, const sb_rec_head *b)
{
    assert_int_equal(a->kind, b->kind);
    assert_int_equal(a->flags, b->flags);
    assert_int_equal(a->seq, b->seq);
    assert_int_equal(a->segment_id, b->segment_id);
    assert_int_equal(a->generation, b->generation);
    assert_int_equal(a->ns_id, b->ns_id);
    assert_int_equal(a->key[0], b->key[0]);
    assert_int_equal(a->key[1], b->key[1]);
    assert_int_equal(a->parent_key[0], b->parent_key[0]);
    assert_int_equal(a->parent_key[1], b->parent_key[1]);
    assert_int_equal(a->position, b->position);
    assert_int_equal(a->n_tokens, b->n_tokens);
    assert_int_equal(a->head_bytes, b->head_bytes);
    assert_int_equal(a->extra_bytes, b->extra_bytes);
    assert_int_equal(a->payload_bytes, b->payload_bytes);
    assert_int_equal(a->payload_hash, b->payload_hash);
}

/* The record drawn in format.h. */
static sb_rec_head example(uint8_t *payload)
{
    for (int i = 0; i < 4096; i++)
        payload[i] = (uint8_t)(7 * i + 3);
    sb_rec_head h = { 0 };
    h.kind = SB_REC_PAGE;
    h.seq = 2;
    h.segment_id = 1;
    h.generation = 1;
    h.ns_id = 0x710e2c3f228e6b4dull;
    h.key[0] = 0x56b4376e0ce4760eull;
    h.key[1] = 0x718b2b0992b33484ull;
    h.parent_key[0] = 0x3e690d5a58d30f37ull;
    h.parent_key[1] = 0x9313672a2bab7624ull;
    h.n_tokens = 4;
    h.head_bytes = sb_rec_head_size(4, 0);
    h.payload_bytes = 4096;
    h.payload_hash = sb_rec_payload_hash(payload, 4096);
    return h;
}

static void test_format_documented_example(void **state)
{
    (void)state;
    static uint8_t payload[4096], head[4096];
    static const uint32_t tok[4] = { 100, 101, 102, 103 };
    sb_rec_head h = example(payload);
    assert_int_equal(h.head_bytes, 4096);
    assert_int_equal(sb_rec_encode(&h, tok, NULL, 0, head), SB_OK);
    assert_memory_equal(head, example_head, sizeof example_head);
    for (size_t i = sizeof example_head; i < sizeof head; i++)
        assert_int_equal(head[i], 0);
    assert_int_equal(sb_rec_record_bytes(&h), 8192);

    sb_rec_head d;
    const uint32_t *t;
    const void *x;
    assert_int_equal(sb_rec_decode(head, sizeof head, 0, &d, &t, &x), SB_OK);
    assert_head_equal(&d, &h);
    assert_memory_equal(t, tok, sizeof tok);
    assert_null(x);
    assert_int_equal(sb_rec_payload_hash(payload, 4096), d.payload_hash);
}

/* Random heads of every kind survive encode + decode exactly. */
static void test_format_record_roundtrip(void **state)
{
    (void)state;
    uint64_t rng = 11;
    uint8_t *buf = malloc(SB_REC_HEAD_MAX), *buf2 = malloc(SB_REC_HEAD_MAX);
    uint32_t *tok = malloc(4 * 70000);
    uint8_t *extra = malloc(70000);
    assert_non_null(buf);
    assert_non_null(buf2);
    for (int it = 0; it < 300; it++) {
        sb_rec_head h = { 0 };
        h.kind = (uint8_t)(1 + tu_rand(&rng) % 4);
        h.seq = tu_rand(&rng);
        h.segment_id = (uint32_t)tu_rand(&rng);
        h.generation = (uint32_t)tu_rand(&rng);
        h.ns_id = tu_rand(&rng);
        h.key[0] = tu_rand(&rng);
        h.key[1] = tu_rand(&rng);
        h.position = (uint32_t)tu_rand(&rng);
        h.payload_hash = tu_rand(&rng);
        if (h.kind == SB_REC_NAMESPACE) {
            h.extra_bytes = 1 + (uint32_t)(tu_rand(&rng) % 20000);
        } else {
            h.parent_key[0] = tu_rand(&rng);
            h.parent_key[1] = tu_rand(&rng);
            uint32_t maxt = it % 50 == 0 ? SB_PAGE_TOKENS_MAX : 300;
            h.n_tokens = (uint32_t)(tu_rand(&rng) % maxt) + (h.kind == SB_REC_PAGE);
            if (h.kind != SB_REC_PAGE && h.n_tokens >= SB_PAGE_TOKENS_MAX)
                h.n_tokens = SB_PAGE_TOKENS_MAX - 1;
            h.payload_bytes = 1 + tu_rand(&rng) % (1u << 20);
            h.flags = (uint8_t)(tu_rand(&rng) & SB_REC_F_COMPRESSED);
            if (h.kind == SB_REC_TOMBSTONE) {
                h.payload_bytes = 0;
                h.flags = 0;
                h.extra_bytes = SB_TOMB_EXTRA;
            }
        }
        tu_tokens(&rng, tok, h.n_tokens, UINT32_MAX);
        for (uint32_t i = 0; i < h.extra_bytes; i++)
            extra[i] = (uint8_t)tu_rand(&rng);
        h.head_bytes = sb_rec_head_size(h.n_tokens, h.extra_bytes);
        assert_int_not_equal(h.head_bytes, 0);
        uint64_t off = tu_rand(&rng) % (1ull << 40) / 4096 * 4096;
        assert_int_equal(sb_rec_encode(&h, tok, extra, off, buf), SB_OK);

        uint32_t hb = 0;
        assert_int_equal(sb_rec_peek(buf, SB_REC_FIXED, &hb), SB_OK);
        assert_int_equal(hb, h.head_bytes);
        sb_rec_head d;
        const uint32_t *t;
        const void *x;
        assert_int_equal(sb_rec_decode(buf, hb, off, &d, &t, &x), SB_OK);
        assert_head_equal(&d, &h);
        if (h.n_tokens)
            assert_memory_equal(t, tok, 4ull * h.n_tokens);
        if (h.extra_bytes)
            assert_memory_equal(x, extra, h.extra_bytes);
        /* Re-encoding the decoded head gives the same bytes. */
        assert_int_equal(sb_rec_encode(&d, t, x, off, buf2), SB_OK);
        assert_memory_equal(buf, buf2, hb);
        /* The same bytes read at another offset are not this record. */
        assert_int_equal(sb_rec_decode(buf, hb, off + 4096, &d, NULL, NULL), SB_ERR_CORRUPT);
    }
    free(buf);
    free(buf2);
    free(tok);
    free(extra);
}

/* Every byte of the example head is checked: flipping any bit of it (or of
 * its padding) is refused, never decoded as something else. */
static void test_format_record_bitflips(void **state)
{
    (void)state;
    static uint8_t payload[4096], head[4096];
    static const uint32_t tok[4] = { 100, 101, 102, 103 };
    sb_rec_head h = example(payload);
    assert_int_equal(sb_rec_encode(&h, tok, NULL, 0, head), SB_OK);
    for (size_t i = 0; i < sizeof head; i += (i < 0xa0 ? 1 : 61)) {
        for (int bit = 0; bit < 8; bit++) {
            head[i] ^= (uint8_t)(1u << bit);
            sb_rec_head d;
            int rc = sb_rec_decode(head, sizeof head, 0, &d, NULL, NULL);
            assert_true(rc == SB_ERR_CORRUPT || rc == SB_ERR_FORMAT || rc == SB_ERR_VERSION ||
                        rc == SB_ERR_INVAL);
            head[i] ^= (uint8_t)(1u << bit);
        }
    }
    sb_rec_head d;
    assert_int_equal(sb_rec_decode(head, sizeof head, 0, &d, NULL, NULL), SB_OK);
}

static void test_format_record_errors(void **state)
{
    (void)state;
    static uint8_t payload[4096], head[4096];
    static const uint32_t tok[4] = { 100, 101, 102, 103 };
    sb_rec_head h = example(payload), d;
    uint32_t hb;
    assert_int_equal(sb_rec_encode(&h, tok, NULL, 0, head), SB_OK);

    /* Short buffers and NULLs. */
    assert_int_equal(sb_rec_peek(head, SB_REC_FIXED - 1, &hb), SB_ERR_INVAL);
    assert_int_equal(sb_rec_peek(NULL, 4096, &hb), SB_ERR_INVAL);
    assert_int_equal(sb_rec_decode(head, 4095, 0, &d, NULL, NULL), SB_ERR_INVAL);
    /* Not a record. */
    static uint8_t zeros[4096];
    assert_int_equal(sb_rec_peek(zeros, sizeof zeros, &hb), SB_ERR_FORMAT);
    /* Another format version is refused as such, whatever else it holds. */
    head[4] = 4;
    assert_int_equal(sb_rec_peek(head, sizeof head, &hb), SB_ERR_VERSION);
    assert_int_equal(sb_rec_decode(head, sizeof head, 0, &d, NULL, NULL), SB_ERR_VERSION);
    /* Version 2 is a compressed record: without the flag it is not one,
     * and version 1 carries no flags. */
    head[4] = 2;
    assert_int_equal(sb_rec_peek(head, sizeof head, &hb), SB_ERR_FORMAT);
    head[7] = SB_REC_F_COMPRESSED | SB_REC_F_SHUFFLE2;
    assert_int_equal(sb_rec_peek(head, sizeof head, &hb), SB_OK);
    head[7] = SB_REC_F_SHUFFLE2;
    assert_int_equal(sb_rec_peek(head, sizeof head, &hb), SB_ERR_FORMAT);
    head[4] = 1;
    head[7] = SB_REC_F_COMPRESSED;
    assert_int_equal(sb_rec_peek(head, sizeof head, &hb), SB_ERR_FORMAT);
    head[7] = 0;
    /* Version 3 is a tombstone (kind 4), and only that. */
    head[4] = 3;
    assert_int_equal(sb_rec_peek(head, sizeof head, &hb), SB_ERR_FORMAT);
    head[4] = 1;
    /* Unknown kind and flag bits (a tombstone in version 1 too). */
    head[6] = 4;
    assert_int_equal(sb_rec_peek(head, sizeof head, &hb), SB_ERR_FORMAT);
    head[6] = 5;
    assert_int_equal(sb_rec_peek(head, sizeof head, &hb), SB_ERR_FORMAT);
    head[6] = 2;
    head[7] = 0x80;
    assert_int_equal(sb_rec_peek(head, sizeof head, &hb), SB_ERR_FORMAT);
    head[7] = 0;
    /* head_bytes that do not match the token count. */
    head[0x49] = 0x20;
    assert_int_equal(sb_rec_peek(head, sizeof head, &hb), SB_ERR_FORMAT);
    head[0x49] = 0x10;
    /* A page with no tokens, a payload over the limit. */
    head[0x44] = 0;
    assert_int_equal(sb_rec_peek(head, sizeof head, &hb), SB_ERR_FORMAT);
    head[0x44] = 4;
    head[0x54] = 0x80;
    assert_int_equal(sb_rec_peek(head, sizeof head, &hb), SB_ERR_FORMAT);
    head[0x54] = 0;
    /* Nonzero padding after the tokens. */
    head[0x800] = 1;
    assert_int_equal(sb_rec_decode(head, sizeof head, 0, &d, NULL, NULL), SB_ERR_CORRUPT);
    head[0x800] = 0;
    assert_int_equal(sb_rec_decode(head, sizeof head, 0, &d, NULL, NULL), SB_OK);

    /* The encoder refuses inconsistent heads. */
    sb_rec_head bad = h;
    bad.head_bytes = 8192;
    assert_int_equal(sb_rec_encode(&bad, tok, NULL, 0, head), SB_ERR_INVAL);
    bad = h;
    bad.kind = SB_REC_NAMESPACE;
    assert_int_equal(sb_rec_encode(&bad, tok, NULL, 0, head), SB_ERR_INVAL);
    bad = h;
    bad.payload_bytes = 0;
    assert_int_equal(sb_rec_encode(&bad, tok, NULL, 0, head), SB_ERR_INVAL);
    bad = h;
    bad.flags = 0x40;
    assert_int_equal(sb_rec_encode(&bad, tok, NULL, 0, head), SB_ERR_INVAL);
    assert_int_equal(sb_rec_head_size(SB_PAGE_TOKENS_MAX, SB_REC_HEAD_MAX), 0);
}

/* A tombstone: version 3, kind 4, its removal sequence in 8 extra bytes,
 * no payload; any other shape is refused, and version 3 is only that. */
static void test_format_tombstone(void **state)
{
    (void)state;
    static uint8_t buf[4096], buf2[4096];
    uint32_t rest[3] = { 7, 8, 9 };
    uint8_t extra[SB_TOMB_EXTRA];
    sb_rec_tomb_put(extra, 0x0102030405060708ull);
    assert_int_equal(sb_rec_tomb_seq(extra), 0x0102030405060708ull);
    assert_int_equal(extra[0], 0x08); /* little-endian */
    sb_rec_head h = { .kind = SB_REC_TOMBSTONE, .seq = 12, .segment_id = 3, .generation = 4,
                      .ns_id = 99, .key = { 1, 2 }, .parent_key = { 3, 4 }, .position = 11,
                      .n_tokens = 3, .extra_bytes = SB_TOMB_EXTRA };
    h.head_bytes = sb_rec_head_size(3, SB_TOMB_EXTRA);
    assert_int_equal(h.head_bytes, 4096);
    assert_int_equal(sb_rec_encode(&h, rest, extra, 8192, buf), SB_OK);
    assert_int_equal(buf[4] | buf[5] << 8, SB_REC_VERSION_TOMBSTONE);
    assert_int_equal(buf[6], SB_REC_TOMBSTONE);
    sb_rec_head d;
    const uint32_t *t;
    const void *x;
    assert_int_equal(sb_rec_decode(buf, sizeof buf, 8192, &d, &t, &x), SB_OK);
    assert_head_equal(&d, &h);
    assert_memory_equal(t, rest, sizeof rest);
    assert_int_equal(sb_rec_tomb_seq(x), 0x0102030405060708ull);
    assert_int_equal(sb_rec_encode(&d, t, x, 8192, buf2), SB_OK);
    assert_memory_equal(buf, buf2, sizeof buf);
    assert_false(sb_rec_other_version(buf, sizeof buf, 8192));
    /* A cut at a page boundary: no rest tokens. */
    sb_rec_head z = h;
    z.n_tokens = 0;
    z.head_bytes = sb_rec_head_size(0, SB_TOMB_EXTRA);
    assert_int_equal(sb_rec_encode(&z, NULL, extra, 0, buf2), SB_OK);
    assert_int_equal(sb_rec_decode(buf2, sizeof buf2, 0, &d, &t, &x), SB_OK);
    /* Shapes it may not have: a payload, other extra bytes, flags. */
    sb_rec_head bad = h;
    bad.payload_bytes = 4096;
    assert_int_equal(sb_rec_encode(&bad, rest, extra, 0, buf2), SB_ERR_INVAL);
    bad = h;
    bad.extra_bytes = 16;
    bad.head_bytes = sb_rec_head_size(3, 16);
    assert_int_equal(sb_rec_encode(&bad, rest, extra, 0, buf2), SB_ERR_INVAL);
    bad = h;
    bad.flags = SB_REC_F_COMPRESSED;
    assert_int_equal(sb_rec_encode(&bad, rest, extra, 0, buf2), SB_ERR_INVAL);
    uint32_t hb;
    memcpy(buf2, buf, sizeof buf);
    buf2[4] = 1; /* a tombstone in version 1 */
    assert_int_equal(sb_rec_peek(buf2, sizeof buf2, &hb), SB_ERR_FORMAT);
    buf2[4] = 2;
    assert_int_equal(sb_rec_peek(buf2, sizeof buf2, &hb), SB_ERR_FORMAT);
    buf2[4] = 3;
    buf2[6] = SB_REC_PAGE; /* version 3 of another kind */
    assert_int_equal(sb_rec_peek(buf2, sizeof buf2, &hb), SB_ERR_FORMAT);
    /* A reader that knows versions 1 and 2 only sees another version whose
     * head hash holds: sb_rec_other_version's test, with 3 unknown. */
    memcpy(buf2, buf, sizeof buf);
    buf2[4] = 4;
    uint64_t hh = sb_rec_head_hash(buf2, 4 * 3 + SB_TOMB_EXTRA, 8192);
    memcpy(buf2 + 120, &hh, 8);
    assert_int_equal(sb_rec_peek(buf2, sizeof buf2, &hb), SB_ERR_VERSION);
    assert_true(sb_rec_other_version(buf2, sizeof buf2, 8192));
}

static void test_format_namespace_description(void **state)
{
    (void)state;
    static const uint32_t bpt[3] = { 4096, 4096, 17 };
    static const char model[] = "llama-7b q8_0 rope10000";
    sb_layout l = { .model_id = model, .model_id_bytes = sizeof model - 1, .page_tokens = 16,
                    .n_tensors = 3, .bytes_per_token = bpt, .point_bytes = 512,
                    .flags = SB_LAYOUT_POINT_REQUIRED };
    uint32_t n = sb_rec_ns_size(&l, 8);
    assert_int_equal(n, 24 + 12 + sizeof model - 1 + 8);
    uint32_t buf32[64];
    uint8_t *buf = (uint8_t *)buf32;
    assert_int_equal(sb_rec_ns_encode(&l, "tenant-a", 8, buf), SB_OK);
    sb_rec_ns d;
    assert_int_equal(sb_rec_ns_decode(buf, n, &d), SB_OK);
    assert_int_equal(d.layout.page_tokens, 16);
    assert_int_equal(d.layout.n_tensors, 3);
    assert_int_equal(d.layout.point_bytes, 512);
    assert_int_equal(d.layout.flags, SB_LAYOUT_POINT_REQUIRED);
    assert_memory_equal(d.layout.bytes_per_token, bpt, sizeof bpt);
    assert_int_equal(d.layout.model_id_bytes, sizeof model - 1);
    assert_memory_equal(d.layout.model_id, model, sizeof model - 1);
    assert_int_equal(d.scope_bytes, 8);
    assert_memory_equal(d.scope, "tenant-a", 8);
    /* Lengths that do not add up, in either direction. */
    assert_int_equal(sb_rec_ns_decode(buf, n - 1, &d), SB_ERR_FORMAT);
    assert_int_equal(sb_rec_ns_decode(buf, n + 1, &d), SB_ERR_FORMAT);
    assert_int_equal(sb_rec_ns_decode(buf, 23, &d), SB_ERR_FORMAT);
    buf[4] = 0xff; /* n_tensors huge */
    assert_int_equal(sb_rec_ns_decode(buf, n, &d), SB_ERR_FORMAT);
}

static void test_format_superblock(void **state)
{
    (void)state;
    sb_super_seg segs[300], got[300];
    for (uint32_t i = 0; i < 300; i++)
        segs[i] = (sb_super_seg){ .segment_id = i + 1, .generation = i * 3,
                                  .state = i % 3, .data_end = (uint64_t)i << 20 };
    sb_super s = { .slot = 1, .write_count = 77, .store_id = 0x1234567890abcdefull,
                   .segment_bytes = 256ull << 20, .durable_seq = 991, .n_segments = 300,
                   .segments = segs, .wear_write = 5ull << 40, .wear_logical = 3ull << 40,
                   .wear_reinsert = 1ull << 38 };
    s.slot_bytes = sb_super_slot_size(300);
    assert_int_equal(s.slot_bytes, 8192); /* 64 + 300 * 24 + 32 + 8 rounds to 8 KiB */
    uint8_t *buf = malloc(s.slot_bytes);
    assert_int_equal(sb_super_encode(&s, buf), SB_OK);
    sb_super d;
    assert_int_equal(sb_super_decode(buf, s.slot_bytes, &d, got, 300), SB_OK);
    assert_int_equal(d.slot, 1);
    assert_int_equal(d.write_count, 77);
    assert_int_equal(d.store_id, s.store_id);
    assert_int_equal(d.segment_bytes, s.segment_bytes);
    assert_int_equal(d.durable_seq, 991);
    assert_int_equal(d.n_segments, 300);
    assert_int_equal(d.wear_write, 5ull << 40);
    assert_int_equal(d.wear_logical, 3ull << 40);
    assert_int_equal(d.wear_reinsert, 1ull << 38);
    assert_false(d.tombstones);
    assert_int_equal(buf[8], SB_SUPER_VERSION_PLAIN); /* without tombstones: 2 */
    /* A store that may hold tombstones says version 3, and reads back so. */
    s.tombstones = true;
    uint8_t *buf3 = malloc(s.slot_bytes);
    assert_int_equal(sb_super_encode(&s, buf3), SB_OK);
    assert_int_equal(buf3[8], SB_SUPER_VERSION_TOMB);
    assert_int_equal(sb_super_decode(buf3, s.slot_bytes, &d, got, 300), SB_OK);
    assert_true(d.tombstones);
    assert_int_equal(d.write_count, 77);
    free(buf3);
    s.tombstones = false;
    assert_int_equal(sb_super_decode(buf, s.slot_bytes, &d, got, 300), SB_OK);
    for (uint32_t i = 0; i < 300; i++) {
        assert_int_equal(got[i].segment_id, segs[i].segment_id);
        assert_int_equal(got[i].generation, segs[i].generation);
        assert_int_equal(got[i].state, segs[i].state);
        assert_int_equal(got[i].data_end, segs[i].data_end);
    }
    assert_int_equal(sb_super_decode(buf, s.slot_bytes, &d, got, 299), SB_ERR_RANGE);
    assert_int_equal(sb_super_decode(buf, 4096, &d, got, 300), SB_ERR_FORMAT);
    /* Any flipped byte is refused. */
    for (uint32_t i = 0; i < s.slot_bytes; i += 97) {
        buf[i] ^= 0x10;
        int rc = sb_super_decode(buf, s.slot_bytes, &d, got, 300);
        assert_true(rc == SB_ERR_CORRUPT || rc == SB_ERR_FORMAT || rc == SB_ERR_VERSION);
        buf[i] ^= 0x10;
    }
    /* A version 1 slot: no wear block (read as zeros), and its bytes must
     * be zero like the rest of the slot's tail. */
    uint8_t *wear = buf + 64 + 300 * 24;
    buf[8] = 1;
    memset(wear, 0, 32);
    uint64_t h = XXH3_64bits(buf, s.slot_bytes - 8);
    memcpy(buf + s.slot_bytes - 8, &h, 8);
    assert_int_equal(sb_super_decode(buf, s.slot_bytes, &d, got, 300), SB_OK);
    assert_int_equal(d.wear_write, 0);
    assert_int_equal(d.n_segments, 300);
    wear[3] = 1;
    h = XXH3_64bits(buf, s.slot_bytes - 8);
    memcpy(buf + s.slot_bytes - 8, &h, 8);
    assert_int_equal(sb_super_decode(buf, s.slot_bytes, &d, got, 300), SB_ERR_CORRUPT);
    buf[8] = 9; /* version */
    assert_int_equal(sb_super_decode(buf, s.slot_bytes, &d, got, 300), SB_ERR_VERSION);
    free(buf);
    s.slot = 2;
    uint8_t small[4096];
    s.n_segments = 0;
    s.slot_bytes = 4096;
    assert_int_equal(sb_super_encode(&s, small), SB_ERR_INVAL);
}

static void test_format_summary(void **state)
{
    (void)state;
    uint64_t rng = 5;
    enum { N = 40 };
    sb_rec_head heads[N];
    uint32_t tok[N][40];
    uint8_t extra[N][64];
    uint64_t offs[N];
    size_t body = 0;
    for (int i = 0; i < N; i++) {
        sb_rec_head h = { 0 };
        h.kind = i % 5 == 0 ? SB_REC_NAMESPACE : SB_REC_PAGE;
        h.seq = 100 + (uint64_t)i;
        h.segment_id = 3;
        h.generation = 2;
        h.ns_id = tu_rand(&rng);
        h.key[0] = tu_rand(&rng);
        if (h.kind == SB_REC_NAMESPACE) {
            h.extra_bytes = 1 + (uint32_t)(tu_rand(&rng) % 64);
            for (uint32_t b = 0; b < h.extra_bytes; b++)
                extra[i][b] = (uint8_t)tu_rand(&rng);
        } else {
            h.n_tokens = 1 + (uint32_t)(tu_rand(&rng) % 40);
            tu_tokens(&rng, tok[i], h.n_tokens, 1000);
            h.payload_bytes = 4096;
        }
        h.head_bytes = sb_rec_head_size(h.n_tokens, h.extra_bytes);
        heads[i] = h;
        offs[i] = (uint64_t)i * 8192;
        body += sb_sum_entry_size(h.n_tokens, h.extra_bytes);
    }
    uint8_t *buf = calloc(1, SB_SUM_FIXED + body + 8);
    size_t pos = SB_SUM_FIXED;
    for (int i = 0; i < N; i++) {
        sb_sum_put_entry(buf + pos, offs[i], &heads[i], tok[i], extra[i]);
        pos += sb_sum_entry_size(heads[i].n_tokens, heads[i].extra_bytes);
    }
    sb_sum_info info = { .segment_id = 3, .generation = 2, .n_entries = N,
                         .data_end = N * 8192, .first_seq = 100, .last_seq = 100 + N - 1,
                         .body_bytes = body };
    size_t len = sb_sum_finish(buf, &info);
    assert_int_equal(len, SB_SUM_FIXED + body + 8);

    sb_sum_info d;
    assert_int_equal(sb_sum_decode(buf, len, &d), SB_OK);
    assert_int_equal(d.segment_id, info.segment_id);
    assert_int_equal(d.generation, info.generation);
    assert_int_equal(d.n_entries, info.n_entries);
    assert_int_equal(d.data_end, info.data_end);
    assert_int_equal(d.first_seq, info.first_seq);
    assert_int_equal(d.last_seq, info.last_seq);
    assert_int_equal(d.body_bytes, info.body_bytes);
    pos = SB_SUM_FIXED;
    for (int i = 0; i < N; i++) {
        uint64_t off;
        sb_rec_head h;
        const uint32_t *t;
        const void *x;
        assert_int_equal(sb_sum_next(buf, &d, &pos, &off, &h, &t, &x), SB_OK);
        assert_int_equal(off, offs[i]);
        assert_head_equal(&h, &heads[i]);
        if (h.n_tokens)
            assert_memory_equal(t, tok[i], 4ull * h.n_tokens);
        if (h.extra_bytes)
            assert_memory_equal(x, extra[i], h.extra_bytes);
    }
    uint64_t off;
    sb_rec_head h;
    assert_int_equal(sb_sum_next(buf, &d, &pos, &off, &h, NULL, NULL), SB_ERR_RANGE);
    /* Damage anywhere fails the file hash; a truncated file fails its size. */
    for (size_t i = 0; i < len; i += 37) {
        buf[i] ^= 1;
        assert_int_not_equal(sb_sum_decode(buf, len, &d), SB_OK);
        buf[i] ^= 1;
    }
    assert_int_equal(sb_sum_decode(buf, len - 8, &d), SB_ERR_FORMAT);
    buf[8] = 2;
    assert_int_equal(sb_sum_decode(buf, len, &d), SB_ERR_VERSION);
    free(buf);
}

/* The payload hash's vector builds give XXH3-64 exactly, at every length
 * and alignment (the tails and stripes are where builds differ). */
static void test_format_payload_hash_paths(void **state)
{
    (void)state;
    size_t cap = (1u << 20) + 64;
    uint8_t *buf = malloc(cap);
    assert_non_null(buf);
    uint64_t rng = 5;
    for (size_t i = 0; i < cap; i++)
        buf[i] = (uint8_t)tu_rand(&rng);
    __builtin_cpu_init();
    bool avx2 = __builtin_cpu_supports("avx2");
    bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
    for (size_t k = 0; k < 600; k++) {
        size_t n = k < 300 ? k * 7 : (size_t)(tu_rand(&rng) % (1u << 20));
        size_t off = k % 64;
        uint64_t want = XXH3_64bits(buf + off, n);
        assert_true(sb_hash_big(buf + off, n) == want);
        assert_true(sb_rec_payload_hash(buf + off, n) == want);
        if (avx2)
            assert_true(sb_hash_avx2(buf + off, n) == want);
        if (avx512)
            assert_true(sb_hash_avx512(buf + off, n) == want);
    }
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_documented_example),
        cmocka_unit_test(test_format_record_roundtrip),
        cmocka_unit_test(test_format_record_bitflips),
        cmocka_unit_test(test_format_record_errors),
        cmocka_unit_test(test_format_tombstone),
        cmocka_unit_test(test_format_namespace_description),
        cmocka_unit_test(test_format_superblock),
        cmocka_unit_test(test_format_summary),
        cmocka_unit_test(test_format_payload_hash_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
