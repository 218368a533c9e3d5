/* test_recover.c -- the disk tier across close and reopen, on a real
 * directory (io_uring, O_DIRECT): every sequence put before close is
 * restorable after reopen, bit-exact, from disk pages; copy and zero-copy
 * mode, partial tails, point states, many namespaces; pages evicted to disk
 * come back; a second open of the directory is refused naming the holder;
 * an unknown format version is refused and left untouched; foreground
 * marks hold the writer back (but not a flush) until the last one ends. */
#define _DEFAULT_SOURCE /* usleep */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

#define XXH_INLINE_ALL /* the slot checksum, without linking libxxhash */
#include <xxhash.h>

static char g_dir[128];

static int setup(void **state)
{
    (void)state;
    tu_scratch_dir(g_dir, sizeof g_dir, "recover");
    rmdir(g_dir); /* the store creates it, 0700 */
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_remove_dir(g_dir);
    return 0;
}

static sb_store *open_dir(uint64_t ram_bytes, uint64_t seg_bytes)
{
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.min_prefix_tokens = 1; /* short test sequences are written too */
    cfg.dir = g_dir;
    cfg.ram_bytes = ram_bytes;
    cfg.segment_bytes = seg_bytes;
    cfg.disk_bytes = 1ull << 30;
    sb_store *st = NULL;
    assert_int_equal(sb_store_open(&cfg, &st), SB_OK);
    return st;
}

static const tu_layout LA = { .page_tokens = 16, .n_tensors = 2, .bpt = { 64, 40 },
                              .point_bytes = 100, .model = "model-a" };
static const tu_layout LB = { .page_tokens = 4, .n_tensors = 1, .bpt = { 256 },
                              .point_bytes = 64, .flags = SB_LAYOUT_POINT_REQUIRED,
                              .model = "model-b" };

#define N_SEQ 24

typedef struct seq {
    uint32_t tok[300];
    size_t n;
    int layout;        /* 0: LA, 1: LB */
    char scope[16];
} seq;

static void make_seqs(seq *s, uint64_t seed)
{
    uint64_t rng = seed;
    for (int i = 0; i < N_SEQ; i++) {
        s[i].layout = i % 3 == 2;
        snprintf(s[i].scope, sizeof s[i].scope, "tenant-%d", i % 4);
        s[i].n = 1 + tu_rand(&rng) % 299;
        tu_tokens(&rng, s[i].tok, s[i].n, 50);
        if (i % 5 == 1) /* share a prefix with the sequence before */
            memcpy(s[i].tok, s[i - 1].tok, (s[i].n < s[i - 1].n ? s[i].n : s[i - 1].n) / 2 * 4);
    }
}

static const tu_layout *lay(const seq *s)
{
    return s->layout ? &LB : &LA;
}

/* Put every sequence (zero-copy for every fourth), with point states. */
static void put_all(sb_store *st, const seq *s)
{
    for (int i = 0; i < N_SEQ; i++) {
        const tu_layout *l = lay(&s[i]);
        sb_ns *ns = tu_ns(st, l, s[i].scope);
        if (i % 4 == 3) {
            sb_ns_info info;
            assert_int_equal(sb_ns_get_info(ns, &info), SB_OK);
            size_t nr = (s[i].n + l->page_tokens - 1) / l->page_tokens;
            sb_page *pages[300];
            for (size_t r = 0; r < nr; r++)
                assert_int_equal(sb_ns_page_alloc(ns, &pages[r]), SB_OK);
            tu_fill_range(ns, l, s[i].tok, 0, s[i].n, pages);
            void *pt = tu_point(l, s[i].tok, s[i].n);
            assert_int_equal(sb_ns_commit(ns, s[i].tok, s[i].n, pages, pt), SB_OK);
            free(pt);
            for (size_t r = 0; r < nr; r++)
                sb_page_unref(pages[r]);
        } else {
            tu_put(ns, l, s[i].tok, s[i].n, true, SB_OK);
        }
        sb_ns_close(ns);
    }
}

/* Every sequence restores in full with its point state; returns the pages
 * that came from disk. */
static size_t verify_all(sb_store *st, const seq *s)
{
    size_t from_disk = 0;
    for (int i = 0; i < N_SEQ; i++) {
        const tu_layout *l = lay(&s[i]);
        sb_ns *ns = tu_ns(st, l, s[i].scope);
        sb_match *m = NULL;
        assert_int_equal(sb_ns_match(ns, s[i].tok, s[i].n, &m), SB_OK);
        sb_match_info info;
        assert_int_equal(sb_match_get_info(m, &info), SB_OK);
        assert_int_equal(info.n_tokens, s[i].n);
        assert_true(info.has_point);
        from_disk += info.n_pages_disk;
        if (i % 4 == 3) { /* zero-copy: the pages themselves */
            sb_page *pages[300];
            assert_int_equal(sb_match_pages(m, 0, info.n_pages, pages), SB_OK);
            for (size_t r = 0; r < info.n_pages; r++) {
                size_t k = s[i].n - r * l->page_tokens;
                k = k < l->page_tokens ? k : l->page_tokens;
                assert_true(tu_page_holds(ns, l, pages[r], s[i].tok, r, k));
                sb_page_unref(pages[r]);
            }
        }
        void **bufs = tu_bufs(l, s[i].n);
        uint8_t point[128];
        assert_int_equal(sb_match_restore(m, s[i].n, bufs, point), SB_OK);
        assert_true(tu_state_equal(l, s[i].tok, s[i].n, bufs));
        void *want = tu_point(l, s[i].tok, s[i].n);
        assert_memory_equal(point, want, l->point_bytes);
        free(want);
        tu_free_state(l, bufs);
        assert_int_equal(sb_match_get_info(m, &info), SB_OK);
        assert_int_equal(info.n_pages_disk, 0);
        sb_match_release(m);
        sb_ns_close(ns);
    }
    return from_disk;
}

static void test_recover_roundtrip(void **state)
{
    (void)state;
    static seq s[N_SEQ];
    make_seqs(s, 42);
    sb_store *st = open_dir(64 << 20, 1 << 20);
    struct stat sbuf;
    assert_int_equal(stat(g_dir, &sbuf), 0);
    assert_int_equal(sbuf.st_mode & 0777, 0700);
    put_all(st, s);
    assert_int_equal(sb_store_flush(st), SB_OK);
    sb_stats a = tu_stats(st);
    assert_true(a.disk_pages > 0);
    assert_int_equal(a.disk_write_errors, 0);
    assert_true(a.durable_seq > 0);
    tu_check(st);
    assert_int_equal(sb_store_close(st), SB_OK);

    st = open_dir(64 << 20, 1 << 20);
    sb_stats b = tu_stats(st);
    assert_int_equal(b.recovery_orphans, 0);
    assert_int_equal(b.recovery_torn, 0);
    assert_int_equal(b.recovery_bad_summaries, 0);
    assert_int_equal(b.recovered_pages, b.indexed_pages);
    assert_int_equal(b.indexed_pages, a.indexed_pages);
    assert_int_equal(b.points, a.points);
    assert_int_equal(b.ram_pages, 0);
    tu_check(st);
    size_t from_disk = verify_all(st, s);
    assert_true(from_disk > 0);
    tu_check(st);
    /* A second pass is served from RAM. */
    assert_int_equal(verify_all(st, s), 0);
    sb_stats c = tu_stats(st);
    assert_true(c.hits_disk > 0);
    assert_true(c.disk_read_bytes > 0);
    assert_int_equal(c.disk_checksum_failures, 0);
    assert_int_equal(sb_store_close(st), SB_OK);

    /* Once more, after a close that had nothing new to write. */
    st = open_dir(64 << 20, 1 << 20);
    verify_all(st, s);
    sb_store_close(st);
}

/* A RAM budget far below the data: clean pages leave RAM and come back. */
static void test_recover_evicted_to_disk(void **state)
{
    (void)state;
    static seq s[N_SEQ];
    make_seqs(s, 7);
    sb_store *st = open_dir(512 << 10, 1 << 20);
    put_all(st, s);
    assert_int_equal(sb_store_flush(st), SB_OK);
    tu_check(st);
    sb_stats a = tu_stats(st);
    assert_true(a.ram_bytes <= 512 << 10);
    assert_true(verify_all(st, s) > 0);
    tu_check(st);
    sb_store_close(st);
}

/* Zero-copy commit of a partial tail whose region the index holds, longer,
 * in a disk-only page: the caller keeps its own page, with its bytes (the
 * index's page has none in RAM to hand out), and can go on writing it. */
static void test_recover_commit_over_disk_tail(void **state)
{
    (void)state;
    uint64_t rng = 3;
    uint32_t tok[40];
    tu_tokens(&rng, tok, 40, 1000);
    sb_store *st = open_dir(64 << 20, 1 << 20);
    sb_ns *ns = tu_ns(st, &LA, "s");
    tu_put(ns, &LA, tok, 40, false, SB_OK); /* region 2 holds 8 tokens */
    sb_ns_close(ns);
    sb_store_close(st);

    st = open_dir(64 << 20, 1 << 20);
    ns = tu_ns(st, &LA, "s");
    sb_page *pages[3];
    for (int r = 0; r < 3; r++)
        assert_int_equal(sb_ns_page_alloc(ns, &pages[r]), SB_OK);
    tu_fill_range(ns, &LA, tok, 0, 37, pages);
    sb_page *mine = pages[2];
    assert_int_equal(sb_ns_commit(ns, tok, 37, pages, NULL), SB_OK);
    assert_ptr_equal(pages[2], mine);
    assert_non_null(sb_page_data(pages[2]));
    assert_true(tu_page_holds(ns, &LA, pages[2], tok, 2, 5));
    for (int r = 0; r < 2; r++) /* full regions: swapped in, bytes kept */
        assert_true(tu_page_holds(ns, &LA, pages[r], tok, r, 16));
    assert_int_equal(sb_page_writable(ns, &pages[2], 5), SB_OK);
    assert_ptr_equal(pages[2], mine); /* still private */
    tu_check(st);
    assert_int_equal(tu_match_verify(ns, &LA, tok, 40), 40);
    for (int r = 0; r < 3; r++)
        sb_page_unref(pages[r]);
    sb_ns_close(ns);
    tu_check(st);
    sb_store_close(st);
}

/* The write-amplification breakdown adds up to every byte written, and its
 * logical part is exactly the state written: token slices and points. */
static void test_recover_write_amplification(void **state)
{
    (void)state;
    sb_store *st = open_dir(64 << 20, 1 << 20);
    sb_ns *ns = tu_ns(st, &LA, "wa");
    uint64_t rng = 11;
    uint32_t a[40], b[100];
    tu_tokens(&rng, a, 40, 1000);
    tu_tokens(&rng, b, 100, 1000);
    tu_put(ns, &LA, a, 40, true, SB_OK);  /* pages of 16, 16, 8 tokens and a point */
    tu_put(ns, &LA, b, 100, false, SB_OK); /* 6 full pages and one of 4 */
    assert_int_equal(sb_store_flush(st), SB_OK);
    sb_stats s = tu_stats(st);
    uint64_t per_token = LA.bpt[0] + LA.bpt[1];
    assert_int_equal(s.disk_logical_bytes, (40 + 100) * per_token + LA.point_bytes);
    assert_int_equal(s.disk_write_bytes,
                     s.disk_logical_bytes + s.disk_head_bytes + s.disk_padding_bytes +
                         s.disk_summary_bytes + s.disk_superblock_bytes +
                         s.disk_ns_record_bytes + s.disk_reinsert_bytes);
    assert_true(s.disk_head_bytes >= 11 * 128ull && s.disk_ns_record_bytes > 0);
    assert_true(s.disk_superblock_bytes > 0);
    double wa = (double)s.disk_write_bytes / (double)s.disk_logical_bytes;
    assert_true(s.disk_write_amplification == wa && wa > 1);
    print_message("write amplification %.2f for 104-byte tokens in 4 KiB-aligned records\n",
                  wa);
    assert_int_equal(s.disk_life_write_bytes, s.disk_write_bytes); /* a new store */
    assert_int_equal(s.disk_life_logical_bytes, s.disk_logical_bytes);
    sb_ns_close(ns);
    sb_store_close(st);
    /* The lifetime figures survive a restart (the superblock keeps them,
     * as of its last write: close seals the segment after the flush). */
    st = open_dir(64 << 20, 1 << 20);
    sb_stats r = tu_stats(st);
    assert_int_equal(r.disk_write_bytes, 0);
    assert_int_equal(r.disk_life_logical_bytes, s.disk_logical_bytes);
    assert_true(r.disk_life_write_bytes > s.disk_write_bytes);
    ns = tu_ns(st, &LA, "wa");
    uint32_t c[20];
    tu_tokens(&rng, c, 20, 1000);
    tu_put(ns, &LA, c, 20, false, SB_OK);
    assert_int_equal(sb_store_flush(st), SB_OK);
    sb_stats t = tu_stats(st);
    assert_int_equal(t.disk_life_logical_bytes, s.disk_logical_bytes + 20 * per_token);
    assert_int_equal(t.disk_life_write_bytes, r.disk_life_write_bytes + t.disk_write_bytes);
    sb_ns_close(ns);
    sb_store_close(st);
}

/* Wait for done (up to ten minutes: a generous bound for a thread to be
 * scheduled, never a figure the test relies on). */
static sb_stats poll_stats(sb_store *st, int (*done)(const sb_stats *))
{
    sb_stats s = tu_stats(st);
    for (int i = 0; i < 60000 && !done(&s); i++) {
        usleep(10000);
        s = tu_stats(st);
    }
    return s;
}

static int held_once(const sb_stats *s)
{
    return s->disk_holdbacks >= 1;
}

static int held_twice(const sb_stats *s)
{
    return s->disk_holdbacks >= 2;
}

static int drained(const sb_stats *s)
{
    return s->disk_queued_bytes == 0;
}

/* While a foreground phase is marked the writer writes nothing new (its
 * hold here is a day, longer than any machine takes to run the test, so
 * nothing below depends on its speed), except for a flush; marks nest;
 * the end of the last mark lets it write at once (a writer not woken
 * would wait out the day and the last poll would give up). */
static void test_recover_foreground_holds_writer(void **state)
{
    (void)state;
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.min_prefix_tokens = 1; /* short test sequences are written too */
    cfg.dir = g_dir;
    cfg.segment_bytes = 1 << 20;
    cfg.disk_bytes = 1ull << 30;
    cfg.foreground_hold_ms = 24u * 3600u * 1000u;
    sb_store *st;
    assert_int_equal(sb_store_open(&cfg, &st), SB_OK);
    sb_ns *ns = tu_ns(st, &LA, "fg");
    assert_int_equal(sb_store_foreground(st, 0), SB_ERR_INVAL); /* no mark to end */
    assert_int_equal(sb_store_foreground(NULL, 1), SB_ERR_INVAL);
    assert_int_equal(sb_store_foreground(st, 1), SB_OK);
    assert_int_equal(sb_store_foreground(st, 1), SB_OK);
    uint64_t rng = 5;
    uint32_t a[64], b[64];
    tu_tokens(&rng, a, 64, 1000);
    tu_tokens(&rng, b, 64, 1000);
    sb_stats s0 = tu_stats(st);
    tu_put(ns, &LA, a, 64, false, SB_OK);
    sb_stats s1 = poll_stats(st, held_once);
    assert_true(s1.disk_holdbacks >= 1);
    usleep(50000);
    s1 = tu_stats(st);
    assert_int_equal(s1.disk_write_bytes, s0.disk_write_bytes); /* held */
    assert_true(s1.disk_queued_bytes > 0);
    assert_int_equal(sb_store_foreground(st, 0), SB_OK); /* one mark left */
    assert_int_equal(sb_store_flush(st), SB_OK);          /* served despite it */
    sb_stats s2 = tu_stats(st);
    assert_true(s2.disk_write_bytes > s0.disk_write_bytes);
    assert_int_equal(s2.disk_queued_bytes, 0);
    tu_put(ns, &LA, b, 64, false, SB_OK);
    s2 = poll_stats(st, held_twice);
    assert_true(s2.disk_holdbacks >= 2);
    assert_true(tu_stats(st).disk_queued_bytes > 0);
    assert_int_equal(sb_store_foreground(st, 0), SB_OK); /* the last mark */
    sb_stats s3 = poll_stats(st, drained);
    assert_int_equal(s3.disk_queued_bytes, 0);
    assert_true(s3.disk_write_bytes > s2.disk_write_bytes);
    assert_int_equal(sb_store_foreground(st, 0), SB_ERR_INVAL);
    sb_ns_close(ns);
    tu_check(st);
    sb_store_close(st);
}

static void test_recover_locked(void **state)
{
    (void)state;
    sb_store *st = open_dir(1 << 20, 1 << 20);
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.min_prefix_tokens = 1; /* short test sequences are written too */
    cfg.dir = g_dir;
    sb_store *two = NULL;
    assert_int_equal(sb_store_open(&cfg, &two), SB_ERR_LOCKED);
    assert_null(two);
    sb_store_close(st);
    assert_int_equal(sb_store_open(&cfg, &two), SB_OK);
    sb_store_close(two);
}

/* Slot slot of the superblock at path (size bytes) gets version v; with
 * rehash its checksum is made to hold again (a slot written by another
 * format version), else it is left stale (a damaged version field). */
static void set_slot_version(const char *path, long size, long slot, int v, bool rehash)
{
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    size_t half = (size_t)size / 2;
    uint8_t *buf = malloc(half);
    assert_non_null(buf);
    fseek(f, slot * (long)half, SEEK_SET);
    assert_int_equal(fread(buf, 1, half, f), half);
    buf[8] = (uint8_t)v;
    if (rehash) {
        uint64_t h = XXH3_64bits(buf, half - 8);
        memcpy(buf + half - 8, &h, 8);
    }
    fseek(f, slot * (long)half, SEEK_SET);
    assert_int_equal(fwrite(buf, 1, half, f), half);
    fclose(f);
    free(buf);
}

/* A superblock of an unknown format version (its checksum holding: written
 * by another version) is refused and left byte for byte, with
 * SB_OPEN_SALVAGE too; a version field that fails the checksum is damage. */
static void test_recover_unknown_version(void **state)
{
    (void)state;
    sb_store *st = open_dir(1 << 20, 1 << 20);
    sb_store_close(st);
    char path[200];
    snprintf(path, sizeof path, "%s/superblock", g_dir);
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    uint8_t *before = malloc((size_t)size);
    fseek(f, 0, SEEK_SET);
    assert_int_equal(fread(before, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    /* Both slots say version 4, their checksums holding. */
    for (long slot = 0; slot < 2; slot++)
        set_slot_version(path, size, slot, 4, true);
    f = fopen(path, "rb");
    uint8_t *changed = malloc((size_t)size);
    assert_int_equal(fread(changed, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.min_prefix_tokens = 1; /* short test sequences are written too */
    cfg.dir = g_dir;
    sb_store *two = NULL;
    assert_int_equal(sb_store_open(&cfg, &two), SB_ERR_VERSION);
    cfg.open_flags = SB_OPEN_SALVAGE; /* never salvaged over */
    assert_int_equal(sb_store_open(&cfg, &two), SB_ERR_VERSION);
    cfg.open_flags = 0;
    f = fopen(path, "rb");
    uint8_t *after = malloc((size_t)size);
    assert_int_equal(fread(after, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    assert_memory_equal(after, changed, (size_t)size);
    /* Version 5 in slots whose checksums fail: damage, not a version. */
    for (long slot = 0; slot < 2; slot++)
        set_slot_version(path, size, slot, 5, false);
    assert_int_equal(sb_store_open(&cfg, &two), SB_ERR_SUPERBLOCK);
    assert_null(two);
    free(before);
    free(changed);
    free(after);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_recover_roundtrip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recover_evicted_to_disk, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recover_commit_over_disk_tail, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recover_foreground_holds_writer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recover_write_amplification, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recover_locked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recover_unknown_version, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
