/* fuzz_record.c -- libFuzzer harness: the on-disk format's decoders
 * (store/format/format.h) on arbitrary bytes.
 *
 * Property. Every decoder either refuses its input with a documented code
 * (SB_ERR_FORMAT, SB_ERR_VERSION, SB_ERR_CORRUPT, SB_ERR_RANGE, SB_ERR_INVAL)
 * or accepts it, and what it accepts round-trips exactly: encoding the
 * decoded value gives back the very bytes that were decoded. Decoders never
 * read outside their buffer (ASan checks that) and never crash.
 *
 * Input:
 *   byte 0     structure (bits 0-1): 0 record head, 1 namespace description,
 *              2 superblock slot, 3 summary file; bit 2: repair checksums
 *              before decoding, so the checks behind them get fuzzed too
 *   bytes 1-2  record only: file offset / 4096 (little-endian)
 *   rest       the bytes to decode (copied to a 4096-aligned buffer)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "format.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FAIL(...)                                                              \
    do {                                                                       \
        fprintf(stderr, "fuzz_record: " __VA_ARGS__);                          \
        fputc('\n', stderr);                                                   \
        abort();                                                               \
    } while (0)

static void expect_refusal(int rc, const char *what)
{
    if (rc != SB_ERR_FORMAT && rc != SB_ERR_VERSION && rc != SB_ERR_CORRUPT &&
        rc != SB_ERR_RANGE && rc != SB_ERR_INVAL)
        FAIL("%s: undocumented result %d", what, rc);
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void fuzz_head(uint8_t *buf, size_t len, uint64_t off, int repair)
{
    uint32_t hb;
    int rc = sb_rec_peek(buf, len, &hb);
    if (rc != SB_OK) {
        expect_refusal(rc, "sb_rec_peek");
        return;
    }
    if (len < hb)
        return;
    if (repair) {
        uint32_t body = 4 * (buf[68] | buf[69] << 8 | buf[70] << 16 | (uint32_t)buf[71] << 24) +
                        (buf[76] | buf[77] << 8 | buf[78] << 16 | (uint32_t)buf[79] << 24);
        if (body <= hb - SB_REC_FIXED)
            put64(buf + 120, sb_rec_head_hash(buf, body, off));
    }
    sb_rec_head h;
    const uint32_t *tok;
    const void *extra;
    rc = sb_rec_decode(buf, len, off, &h, &tok, &extra);
    if (rc != SB_OK) {
        expect_refusal(rc, "sb_rec_decode");
        return;
    }
    uint8_t *again = aligned_alloc(4096, hb);
    if (!again)
        return;
    if (sb_rec_encode(&h, tok, extra, off, again) != SB_OK)
        FAIL("a decoded record head does not encode");
    if (memcmp(again, buf, hb) != 0)
        FAIL("a record head does not round-trip");
    free(again);
}

static void fuzz_ns(const uint8_t *buf, size_t len)
{
    sb_rec_ns d;
    int rc = sb_rec_ns_decode(buf, len, &d);
    if (rc != SB_OK) {
        expect_refusal(rc, "sb_rec_ns_decode");
        return;
    }
    if (sb_rec_ns_size(&d.layout, d.scope_bytes) != len)
        FAIL("a namespace description's size does not add up");
    uint8_t *again = malloc(len ? len : 1);
    if (!again)
        return;
    if (sb_rec_ns_encode(&d.layout, d.scope, d.scope_bytes, again) != SB_OK)
        FAIL("a decoded namespace description does not encode");
    if (memcmp(again, buf, len) != 0)
        FAIL("a namespace description does not round-trip");
    free(again);
}

static void fuzz_super(uint8_t *buf, size_t len, int repair)
{
    if (repair && len >= SB_SUPER_FIXED + 8)
        put64(buf + len - 8, XXH3_64bits(buf, len - 8));
    uint32_t max = (uint32_t)(len / SB_SUPER_ENTRY + 1);
    sb_super_seg *segs = malloc(max * sizeof *segs);
    if (!segs)
        return;
    sb_super s;
    int rc = sb_super_decode(buf, len, &s, segs, max);
    if (rc != SB_OK) {
        expect_refusal(rc, "sb_super_decode");
    } else {
        /* A current slot (version 2, or 3: may hold tombstones) round-trips
         * byte for byte. An older one (version 1: no wear block) encodes
         * as current where its size leaves room for the wear block, and
         * that decodes to the same contents. */
        int old = buf[8] == 1;
        uint8_t *again = malloc(s.slot_bytes);
        sb_super_seg *segs2 = malloc(max * sizeof *segs2);
        if (again && segs2) {
            int erc = sb_super_encode(&s, again);
            if (erc != SB_OK && !(old && sb_super_slot_size(s.n_segments) > s.slot_bytes))
                FAIL("a decoded superblock slot does not encode");
            if (!old && (s.slot_bytes != len || memcmp(again, buf, len) != 0))
                FAIL("a superblock slot does not round-trip");
            sb_super t;
            int same = old && erc == SB_OK &&
                       sb_super_decode(again, s.slot_bytes, &t, segs2, max) == SB_OK &&
                       t.write_count == s.write_count && t.store_id == s.store_id &&
                       t.durable_seq == s.durable_seq && t.n_segments == s.n_segments &&
                       t.wear_write == 0;
            for (uint32_t i = 0; same && i < s.n_segments; i++)
                same = segs2[i].segment_id == segs[i].segment_id &&
                       segs2[i].generation == segs[i].generation &&
                       segs2[i].state == segs[i].state && segs2[i].data_end == segs[i].data_end;
            if (old && erc == SB_OK && !same)
                FAIL("an older superblock slot does not carry over");
        }
        free(again);
        free(segs2);
    }
    free(segs);
}

static void fuzz_summary(uint8_t *buf, size_t len, int repair)
{
    if (repair && len >= SB_SUM_FIXED + 8)
        put64(buf + len - 8, XXH3_64bits(buf, len - 8));
    sb_sum_info info;
    int rc = sb_sum_decode(buf, len, &info);
    if (rc != SB_OK) {
        expect_refusal(rc, "sb_sum_decode");
        return;
    }
    /* Walk the entries, rebuilding the file from what was decoded. */
    uint8_t *again = calloc(1, len);
    if (!again)
        return;
    size_t pos = SB_SUM_FIXED;
    uint32_t n = 0;
    for (;;) {
        size_t at = pos;
        uint64_t off;
        sb_rec_head h;
        const uint32_t *tok;
        const void *extra;
        rc = sb_sum_next(buf, &info, &pos, &off, &h, &tok, &extra);
        if (rc == SB_ERR_RANGE)
            break;
        if (rc != SB_OK) {
            expect_refusal(rc, "sb_sum_next");
            free(again);
            return;
        }
        if (pos - at != sb_sum_entry_size(h.n_tokens, h.extra_bytes))
            FAIL("a summary entry's size does not add up");
        sb_sum_put_entry(again + at, off, &h, tok, extra);
        n++;
    }
    if (pos != SB_SUM_FIXED + info.body_bytes)
        FAIL("summary entries overrun the body");
    if (n == info.n_entries) {
        if (sb_sum_finish(again, &info) != len || memcmp(again, buf, len) != 0)
            FAIL("a summary does not round-trip");
    }
    free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    int kind = data[0] & 3, repair = (data[0] >> 2) & 1;
    uint64_t off = (uint64_t)(data[1] | data[2] << 8) * 4096;
    const uint8_t *body = data + 3;
    size_t len = size - 3;
    uint8_t *buf = aligned_alloc(4096, (len + 4095) / 4096 * 4096 + 4096);
    if (!buf)
        return 0;
    memcpy(buf, body, len);
    switch (kind) {
    case 0:
        fuzz_head(buf, len, off, repair);
        break;
    case 1:
        fuzz_ns(buf, len);
        break;
    case 2:
        fuzz_super(buf, len, repair);
        break;
    default:
        fuzz_summary(buf, len, repair);
        break;
    }
    free(buf);
    return 0;
}
