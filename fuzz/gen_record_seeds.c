/* gen_record_seeds.c -- writes the seed corpus of fuzz_record into a
 * directory: one valid instance of every structure store/format/format.h
 * defines (page, point, namespace and tombstone records, a namespace
 * description, superblock slots of versions 2 and 3, a summary), each also
 * with its checksum-repair bit set, plus a few refusals (another version,
 * a truncated head). Run it when the format
 * changes: gen_record_seeds fuzz/corpus/record */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"

static const char *dir;

static void emit(const char *name, int kind, uint64_t off, const void *buf, size_t len)
{
    for (int repair = 0; repair < 2; repair++) {
        char path[512];
        snprintf(path, sizeof path, "%s/seed-%s%s", dir, name, repair ? "-repair" : "");
        FILE *f = fopen(path, "wb");
        if (!f) {
            perror(path);
            exit(1);
        }
        uint8_t hdr[3] = { (uint8_t)(kind | repair << 2), (uint8_t)(off / 4096),
                           (uint8_t)(off / 4096 >> 8) };
        fwrite(hdr, 1, 3, f);
        fwrite(buf, 1, len, f);
        fclose(f);
    }
}

static uint8_t buf[1 << 16];

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_record_seeds DIR\n");
        return 2;
    }
    dir = argv[1];
    uint32_t tok[20];
    for (int i = 0; i < 20; i++)
        tok[i] = (uint32_t)(1000 + 37 * i);

    /* A page record of 16 tokens at offset 8192. */
    sb_rec_head h = { .kind = SB_REC_PAGE, .seq = 7, .segment_id = 2, .generation = 3,
                      .ns_id = 0x1122334455667788ull, .key = { 1, 2 },
                      .parent_key = { 3, 4 }, .position = 32, .n_tokens = 16,
                      .payload_bytes = 65536, .payload_hash = 0xabcdef };
    h.head_bytes = sb_rec_head_size(h.n_tokens, 0);
    sb_rec_encode(&h, tok, NULL, 8192, buf);
    emit("page", 0, 8192, buf, h.head_bytes);
    emit("page-truncated", 0, 8192, buf, 100);
    buf[4] = 2;
    emit("page-version-2", 0, 8192, buf, h.head_bytes);

    /* A point record at position 37 (5 tokens after the page before). */
    sb_rec_head p = h;
    p.kind = SB_REC_POINT;
    p.position = 37;
    p.n_tokens = 5;
    p.payload_bytes = 512;
    p.head_bytes = sb_rec_head_size(5, 0);
    sb_rec_encode(&p, tok, NULL, 0, buf);
    emit("point", 0, 0, buf, p.head_bytes);

    /* A tombstone (version 3): the prefix of 37 tokens, 5 after the page
     * before; its removal sequence in 8 extra bytes, no payload. */
    sb_rec_head t = p;
    t.kind = SB_REC_TOMBSTONE;
    t.payload_bytes = 0;
    t.payload_hash = 0;
    t.extra_bytes = SB_TOMB_EXTRA;
    t.head_bytes = sb_rec_head_size(5, SB_TOMB_EXTRA);
    uint8_t removal[SB_TOMB_EXTRA];
    sb_rec_tomb_put(removal, 6);
    sb_rec_encode(&t, tok, removal, 12288, buf);
    emit("tombstone", 0, 12288, buf, t.head_bytes);

    /* A namespace record and its description. */
    static const uint32_t bpt[2] = { 6144, 6144 };
    static const char model[] = "small-f16";
    sb_layout l = { .model_id = model, .model_id_bytes = sizeof model - 1, .page_tokens = 16,
                    .n_tensors = 2, .bytes_per_token = bpt, .point_bytes = 16384 };
    uint8_t desc[256];
    uint32_t dn = sb_rec_ns_size(&l, 6);
    sb_rec_ns_encode(&l, "tenant", 6, desc);
    emit("ns-description", 1, 0, desc, dn);
    sb_rec_head n = { .kind = SB_REC_NAMESPACE, .seq = 1, .segment_id = 2, .generation = 3,
                      .ns_id = h.ns_id, .key = { 3, 4 }, .extra_bytes = dn };
    n.head_bytes = sb_rec_head_size(0, dn);
    sb_rec_encode(&n, NULL, desc, 4096, buf);
    emit("namespace", 0, 4096, buf, n.head_bytes);

    /* Superblock slots: empty, and with three segments. */
    sb_super_seg segs[3] = { { 1, 1, SB_SEG_SEALED, 1 << 20 }, { 2, 3, SB_SEG_OPEN, 0 },
                             { 3, 0, SB_SEG_FREE, 0 } };
    sb_super s = { .slot = 0, .write_count = 5, .store_id = 99, .segment_bytes = 1 << 22,
                   .durable_seq = 41, .n_segments = 0, .segments = segs };
    s.slot_bytes = sb_super_slot_size(0);
    sb_super_encode(&s, buf);
    emit("super-empty", 2, 0, buf, s.slot_bytes);
    s.slot = 1;
    s.n_segments = 3;
    s.slot_bytes = sb_super_slot_size(3);
    sb_super_encode(&s, buf);
    emit("super-3", 2, 0, buf, s.slot_bytes);
    s.tombstones = true; /* version 3 */
    sb_super_encode(&s, buf);
    emit("super-tombstones", 2, 0, buf, s.slot_bytes);

    /* A summary of the namespace, page and point records above. */
    size_t pos = SB_SUM_FIXED;
    sb_sum_put_entry(buf + pos, 0, &n, NULL, desc);
    pos += sb_sum_entry_size(0, dn);
    sb_sum_put_entry(buf + pos, 4096, &h, tok, NULL);
    pos += sb_sum_entry_size(16, 0);
    sb_sum_put_entry(buf + pos, 8192 + 69632, &p, tok, NULL);
    pos += sb_sum_entry_size(5, 0);
    sb_sum_info info = { .segment_id = 2, .generation = 3, .n_entries = 3,
                         .data_end = 8192 + 69632 + 8192, .first_seq = 1, .last_seq = 7,
                         .body_bytes = pos - SB_SUM_FIXED };
    size_t len = sb_sum_finish(buf, &info);
    emit("summary", 3, 0, buf, len);
    return 0;
}
