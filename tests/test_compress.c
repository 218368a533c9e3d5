/* test_compress.c -- the disk tier's compression (sb_config.compress_level),
 * on a real directory.
 *
 * Description:
 *   - round trip, side by side: the same sequences go to a store that
 *     compresses and to one that does not. Three kinds of page state: F16
 *     values like a KV cache (layout SB_LAYOUT_ELEM16), a compressible
 *     pattern, and random bytes. After a reopen everything is on disk only
 *     and restores bit-exact from both stores; the compressing store
 *     stored compressed records (the KV and pattern pages) and stored the
 *     random ones as they were (disk_compress_skipped), wrote fewer device
 *     bytes, and its write-amplification identity holds with the saved
 *     bytes. A third store compresses the KV pages without the shuffle
 *     flag: the shuffle stores fewer bytes.
 *   - corruption: a compressed record whose payload has a flipped byte,
 *     and one whose payload is garbage under valid checksums (so only the
 *     decompression can tell), are refused (SB_ERR_CORRUPT, the match
 *     shrinks, disk_checksum_failures counts), never restored wrong.
 *   - take-over: a zero-copy commit over pages on disk only, whose records
 *     are compressed, hands those records to the caller's pages: they stay
 *     counted at their stored size, and after RAM pressure drops the
 *     pages' bytes they restore bit-exact from the records.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format.h"
#include "testutil.h"

static char g_dir[128];

static int setup(void **state)
{
    (void)state;
    tu_scratch_dir(g_dir, sizeof g_dir, "compress");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_remove_dir(g_dir);
    return 0;
}

enum { PT = 16, BPT = 4096, N = 64, SEQS = 6 }; /* 64 KiB pages, 4 a sequence */
enum { KIND_KV, KIND_PATTERN, KIND_RANDOM, KINDS };

static uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* A float as IEEE half (truncated mantissa; normal range only). */
static uint16_t half(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    int e = (int)((x >> 23) & 0xFF) - 127 + 15;
    if (e <= 0)
        return (uint16_t)sign;
    if (e >= 31)
        e = 30;
    return (uint16_t)(sign | (uint32_t)e << 10 | ((x >> 13) & 0x3FF));
}

/* Token i's state of a kind: BPT bytes. KV: F16 values of magnitude 0.5
 * to 2, either sign: random mantissas, a narrow exponent (the bytes the
 * shuffle puts together). */
static void token_state(int kind, const uint32_t *tok, size_t i, uint8_t *out)
{
    uint64_t s = mix(((uint64_t)tok[i] << 20) ^ i ^ ((uint64_t)kind << 60));
    for (size_t k = 0; k < BPT; k += 2) {
        s = mix(s);
        uint16_t v;
        if (kind == KIND_KV) {
            float f = (1.0f + (float)(s & 0xFFFF) / 65536.0f) * ((s >> 16) & 1 ? 1.0f : 0.5f);
            v = half((s >> 17) & 1 ? f : -f);
        } else if (kind == KIND_PATTERN) {
            v = (uint16_t)((i * 7 + k / 64) & 0xFF);
        } else {
            v = (uint16_t)s;
        }
        memcpy(out + k, &v, 2);
    }
}

static void fill(int kind, const uint32_t *tok, size_t n, uint8_t *buf)
{
    for (size_t i = 0; i < n; i++)
        token_state(kind, tok, i, buf + i * BPT);
}

static sb_store *open_store_ram(const char *sub, uint32_t level, uint64_t ram_bytes)
{
    char dir[256];
    snprintf(dir, sizeof dir, "%s/%s", g_dir, sub);
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.dir = dir;
    cfg.min_prefix_tokens = 1;
    cfg.ram_bytes = ram_bytes;
    cfg.segment_bytes = 4u << 20;
    cfg.disk_bytes = 256u << 20;
    cfg.disk_free_floor_bytes = 0;
    cfg.compress_level = level;
    sb_store *st = NULL;
    assert_int_equal(sb_store_open(&cfg, &st), SB_OK);
    return st;
}

static sb_store *open_store(const char *sub, uint32_t level)
{
    return open_store_ram(sub, level, 64u << 20);
}

static sb_ns *open_ns(sb_store *st, int kind, bool shuffle)
{
    static const uint32_t bpt[1] = { BPT };
    static const char *const names[KINDS] = { "kv", "pattern", "random" };
    sb_layout l = { .model_id = names[kind], .model_id_bytes = strlen(names[kind]),
                    .page_tokens = PT, .n_tensors = 1, .bytes_per_token = bpt,
                    .flags = kind == KIND_KV && shuffle ? SB_LAYOUT_ELEM16 : 0 };
    sb_ns *ns = NULL;
    assert_int_equal(sb_ns_open(st, &l, NULL, 0, &ns), SB_OK);
    return ns;
}

static void seq_tokens(int s, uint32_t *tok)
{
    for (size_t i = 0; i < N; i++)
        tok[i] = (uint32_t)mix((uint64_t)s << 32 | i) & 0xFFFFF;
}

static void put_all(sb_store *st, int kind, bool shuffle, uint8_t *buf)
{
    sb_ns *ns = open_ns(st, kind, shuffle);
    uint32_t tok[N];
    for (int s = 0; s < SEQS; s++) {
        seq_tokens(s, tok);
        fill(kind, tok, N, buf);
        const void *in[1] = { buf };
        assert_int_equal(sb_ns_put(ns, tok, N, in, NULL, NULL), SB_OK);
    }
    sb_ns_close(ns);
}

/* Restore every sequence of kind from disk; returns tokens restored. */
static size_t verify_all(sb_store *st, int kind, bool shuffle, uint8_t *buf, uint8_t *want)
{
    sb_ns *ns = open_ns(st, kind, shuffle);
    uint32_t tok[N];
    size_t total = 0;
    for (int s = 0; s < SEQS; s++) {
        seq_tokens(s, tok);
        sb_match *m;
        assert_int_equal(sb_ns_match(ns, tok, N, &m), SB_OK);
        void *out[1] = { buf };
        int rc = sb_match_restore(m, N, out, NULL);
        sb_match_info info;
        assert_int_equal(sb_match_get_info(m, &info), SB_OK);
        if (rc == SB_OK)
            assert_int_equal(info.n_tokens, N);
        else
            assert_int_equal(rc, SB_ERR_CORRUPT); /* refused, and the match shrank */
        if (rc == SB_OK || info.n_tokens < N) {
            size_t n = rc == SB_OK ? N : info.n_tokens;
            if (rc != SB_OK && n)
                assert_int_equal(sb_match_restore(m, n, out, NULL), SB_OK);
            fill(kind, tok, n, want);
            assert_memory_equal(buf, want, n * BPT);
            total += n;
        }
        sb_match_release(m);
    }
    sb_ns_close(ns);
    return total;
}

static void check_identity(const sb_stats *s)
{
    assert_int_equal(s->disk_write_bytes + s->disk_compress_saved_bytes,
                     s->disk_logical_bytes + s->disk_head_bytes + s->disk_padding_bytes +
                         s->disk_summary_bytes + s->disk_superblock_bytes +
                         s->disk_ns_record_bytes + s->disk_reinsert_bytes);
}

static void test_compress_roundtrip(void **state)
{
    (void)state;
    uint8_t *buf = malloc((size_t)N * BPT), *want = malloc((size_t)N * BPT);
    assert_non_null(buf);
    assert_non_null(want);
    sb_stats zs, rs, ns_;
    const char *subs[3] = { "zstd", "raw", "noshuffle" };
    uint32_t levels[3] = { 3, 0, 3 };
    for (int k = 0; k < 3; k++) {
        sb_store *st = open_store(subs[k], levels[k]);
        for (int kind = 0; kind < KINDS; kind++)
            put_all(st, kind, k != 2, buf);
        assert_int_equal(sb_store_flush(st), SB_OK);
        sb_stats s = tu_stats(st);
        check_identity(&s);
        *(k == 0 ? &zs : k == 1 ? &rs : &ns_) = s;
        sb_store_close(st);
    }
    print_message("compress: %llu records compressed, %llu stored raw; %llu -> %llu payload "
                  "bytes (%.2fx); device bytes %llu vs %llu uncompressed (%.2fx); without the "
                  "shuffle %llu device bytes\n",
                  (unsigned long long)zs.disk_compressed_records,
                  (unsigned long long)zs.disk_compress_skipped,
                  (unsigned long long)zs.disk_compress_raw_bytes,
                  (unsigned long long)zs.disk_compress_stored_bytes,
                  (double)zs.disk_compress_raw_bytes / (double)zs.disk_compress_stored_bytes,
                  (unsigned long long)zs.disk_write_bytes,
                  (unsigned long long)rs.disk_write_bytes,
                  (double)rs.disk_write_bytes / (double)zs.disk_write_bytes,
                  (unsigned long long)ns_.disk_write_bytes);

    /* compressed: the KV and the pattern pages; the random ones stored raw */
    assert_true(zs.disk_compressed_records >= 2 * SEQS * (N / PT));
    assert_true(zs.disk_compress_skipped >= SEQS * (N / PT));
    assert_true(zs.disk_compress_stored_bytes < zs.disk_compress_raw_bytes);
    assert_true(zs.disk_write_bytes < rs.disk_write_bytes);
    assert_int_equal(rs.disk_compressed_records, 0);
    assert_int_equal(rs.disk_compress_saved_bytes, 0);
    assert_int_equal(zs.disk_logical_bytes, rs.disk_logical_bytes);
    /* the shuffle helps F16 values */
    assert_true(zs.disk_write_bytes < ns_.disk_write_bytes);
    /* Reopen: everything is on disk only; both restore bit-exact. */
    for (int k = 0; k < 3; k++) {
        sb_store *st = open_store(subs[k], levels[k]);
        for (int kind = 0; kind < KINDS; kind++)
            assert_int_equal(verify_all(st, kind, k != 2, buf, want), (size_t)SEQS * N);
        sb_stats s = tu_stats(st);
        assert_int_equal(s.disk_checksum_failures, 0);
        assert_true(s.hits_disk > 0);
        tu_check(st);
        sb_store_close(st);
    }
    free(buf);
    free(want);
}

/* A zero-copy commit over pages that are on disk only (compressed there)
 * gives the caller's resident pages the index's place and their records
 * (index.c's swap_in, the tier's take_record): the records stay counted at
 * their stored size (stats.disk_bytes does not move), and once RAM
 * pressure drops the pages' bytes again, they are read back from those
 * compressed records bit-exact. */
static void test_compress_take_record(void **state)
{
    (void)state;
    enum { RAM = 24 * PT * BPT }; /* 24 pages */
    uint8_t *buf = malloc((size_t)N * BPT), *want = malloc((size_t)N * BPT);
    assert_non_null(buf);
    assert_non_null(want);
    sb_store *st = open_store_ram("take", 3, RAM);
    put_all(st, KIND_KV, true, buf);
    assert_int_equal(sb_store_flush(st), SB_OK);
    assert_int_equal(tu_stats(st).disk_compressed_records, SEQS * (N / PT));
    sb_store_close(st);

    st = open_store_ram("take", 3, RAM); /* every page on disk only */
    sb_stats s0 = tu_stats(st);
    assert_int_equal(s0.disk_pages, SEQS * (N / PT));
    sb_ns *ns = open_ns(st, KIND_KV, true);
    uint32_t tok[N];
    for (int s = 0; s < SEQS; s++) {
        seq_tokens(s, tok);
        fill(KIND_KV, tok, N, buf); /* the same state the records hold */
        sb_page *pages[N / PT];
        for (size_t i = 0; i < N / PT; i++) {
            assert_int_equal(sb_ns_page_alloc(ns, &pages[i]), SB_OK);
            memcpy(sb_page_data(pages[i]), buf + i * PT * BPT, (size_t)PT * BPT);
        }
        sb_page *mine[N / PT];
        memcpy(mine, pages, sizeof mine);
        assert_int_equal(sb_ns_commit(ns, tok, N, pages, NULL), SB_OK);
        for (size_t i = 0; i < N / PT; i++) {
            assert_ptr_equal(pages[i], mine[i]); /* taken in, not deduplicated away */
            sb_page_unref(pages[i]);
        }
        sb_stats s1 = tu_stats(st);
        assert_int_equal(s1.disk_bytes, s0.disk_bytes);
        assert_int_equal(s1.disk_pages, s0.disk_pages);
        tu_check(st);
    }
    sb_ns_close(ns);

    /* Pages of another namespace, three times the RAM budget: the taken
     * pages' bytes are dropped (they are clean: their records hold them). */
    sb_ns *other = open_ns(st, KIND_RANDOM, false);
    for (uint32_t s = 0; s < 3 * RAM / (N * BPT); s++) {
        for (size_t i = 0; i < N; i++)
            tok[i] = 0x100000u + s * N + (uint32_t)i;
        fill(KIND_RANDOM, tok, N, buf);
        const void *in[1] = { buf };
        assert_int_equal(sb_ns_put(other, tok, N, in, NULL, NULL), SB_OK);
    }
    sb_ns_close(other);
    assert_int_equal(sb_store_flush(st), SB_OK);
    sb_stats s2 = tu_stats(st);
    assert_true(s2.ram_bytes <= RAM);

    assert_int_equal(verify_all(st, KIND_KV, true, buf, want), (size_t)SEQS * N);
    sb_stats s3 = tu_stats(st);
    assert_int_equal(s3.disk_checksum_failures, 0);
    assert_true(s3.hits_disk > s0.hits_disk);
    tu_check(st);
    sb_store_close(st);
    free(buf);
    free(want);
}

/* The offset of the first compressed record in segment file path. */
static off_t first_compressed(int fd, sb_rec_head *h)
{
    static uint8_t head[1 << 16];
    for (off_t off = 0;; off += 4096) {
        ssize_t r = pread(fd, head, 4096, off);
        if (r < (ssize_t)SB_REC_FIXED)
            return -1;
        uint32_t hb;
        if (sb_rec_peek(head, (size_t)r, &hb) != SB_OK || hb > sizeof head)
            continue;
        assert_int_equal(pread(fd, head, hb, off), (ssize_t)hb);
        if (sb_rec_decode(head, hb, (uint64_t)off, h, NULL, NULL) == SB_OK &&
            (h->flags & SB_REC_F_COMPRESSED))
            return off;
    }
}

static void test_compress_corrupt(void **state)
{
    (void)state;
    uint8_t *buf = malloc((size_t)N * BPT), *want = malloc((size_t)N * BPT);
    assert_non_null(buf);
    assert_non_null(want);
    for (int how = 0; how < 2; how++) {
        char sub[16];
        snprintf(sub, sizeof sub, "c%d", how);
        sb_store *st = open_store(sub, 3);
        put_all(st, KIND_KV, true, buf);
        sb_store_close(st);

        char path[300];
        snprintf(path, sizeof path, "%s/%s/seg-00000001.dat", g_dir, sub);
        int fd = open(path, O_RDWR);
        assert_true(fd >= 0);
        sb_rec_head h;
        off_t off = first_compressed(fd, &h);
        assert_true(off >= 0);
        static uint8_t pay[1 << 17];
        assert_true(h.payload_bytes <= sizeof pay);
        off_t at = off + (off_t)h.head_bytes;
        assert_int_equal(pread(fd, pay, h.payload_bytes, at), (ssize_t)h.payload_bytes);
        if (how == 0) {
            pay[h.payload_bytes / 2] ^= 0x10; /* the payload checksum fails */
        } else {
            /* garbage after the frame header, under valid checksums: only
             * decompressing can tell */
            for (size_t i = 16; i < h.payload_bytes; i++)
                pay[i] = (uint8_t)mix(i);
            h.payload_hash = sb_rec_payload_hash(pay, h.payload_bytes);
            static uint8_t head[1 << 16];
            assert_int_equal(pread(fd, head, h.head_bytes, off), (ssize_t)h.head_bytes);
            const uint32_t *tok;
            sb_rec_head old;
            assert_int_equal(sb_rec_decode(head, h.head_bytes, (uint64_t)off, &old, &tok, NULL),
                             SB_OK);
            static uint32_t toks[PT];
            memcpy(toks, tok, old.n_tokens * sizeof *toks);
            static uint8_t fresh[1 << 16];
            assert_int_equal(sb_rec_encode(&h, toks, NULL, (uint64_t)off, fresh), SB_OK);
            assert_int_equal(pwrite(fd, fresh, h.head_bytes, off), (ssize_t)h.head_bytes);
        }
        assert_int_equal(pwrite(fd, pay, h.payload_bytes, at), (ssize_t)h.payload_bytes);
        close(fd);

        st = open_store(sub, 3);
        size_t got = verify_all(st, KIND_KV, true, buf, want);
        sb_stats s = tu_stats(st);
        print_message("corrupt (%s): %zu of %d tokens restored, %llu checksum failures\n",
                      how ? "garbage frame" : "flipped byte", got, SEQS * N,
                      (unsigned long long)s.disk_checksum_failures);
        assert_true(got < (size_t)SEQS * N);
        assert_true(s.disk_checksum_failures >= 1);
        tu_check(st);
        sb_store_close(st);
    }
    free(buf);
    free(want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_compress_roundtrip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compress_corrupt, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compress_take_record, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
