/* Description: errors. Every error that snapbank.h documents for a call and
 * that a RAM-only store can reach is triggered here, and every failing call
 * is shown to change nothing: sb_store_check passes, the store's gauges
 * (ram_bytes, ram_pages, indexed_pages, points, pins, namespaces,
 * index_nodes and their neighbours) and each namespace's figures are as
 * before, nothing was evicted, and every probe prefix restores the same
 * length with the same bytes (and the same point state) as before.
 * Allocation failure has its own file, test_faults.c. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errworld.h"

/* ---- names -------------------------------------------------------------------- */

static void test_strerror_every_code(void **state)
{
    (void)state;
    static const int codes[] = {
        SB_OK, SB_ERR_INVAL, SB_ERR_NOMEM, SB_ERR_LAYOUT, SB_ERR_LAYOUT_MISMATCH,
        SB_ERR_PAGE_SIZE, SB_ERR_NO_TOKENS, SB_ERR_TOO_MANY_TOKENS, SB_ERR_BUDGET,
        SB_ERR_FOREIGN_PAGE, SB_ERR_PAGE_STATE, SB_ERR_RANGE, SB_ERR_NOT_FOUND,
        SB_ERR_CORRUPT, SB_ERR_IO, SB_ERR_NOSPC, SB_ERR_LOCKED, SB_ERR_VERSION,
        SB_ERR_FORMAT, SB_ERR_UNSUPPORTED, SB_ERR_NO_POINT, SB_ERR_SUPERBLOCK, SB_ERR_PENDING,
        SB_ERR_NOT_DURABLE, SB_ERR_CANCELED, SB_ERR_BUSY, SB_ERR_INCOMPLETE,
        SB_ERR_WRITE_ONLY, SB_ERR_RECLAIMED,
    };
    enum { N = sizeof codes / sizeof *codes };
    const char *seen[N];
    for (int i = 0; i < N; i++) {
        const char *s = sb_strerror(codes[i]);
        assert_non_null(s);
        assert_true(strlen(s) > 0);
        assert_string_not_equal(s, "unknown error");
        for (int j = 0; j < i; j++)
            assert_string_not_equal(s, seen[j]);
        seen[i] = s;
    }
    static const int unknown[] = { 1, 2, 100, SB_ERR_RECLAIMED - 1, -100, INT_MIN, INT_MAX };
    for (size_t i = 0; i < sizeof unknown / sizeof *unknown; i++)
        assert_string_equal(sb_strerror(unknown[i]), "unknown error");
}

static void test_miss_names(void **state)
{
    (void)state;
    static const char *const names[SB_MISS__COUNT] = { "none", "no_prefix", "evicted",
                                                       "model_mismatch", "no_point",
                                                       "corrupt", "io" };
    for (int i = 0; i < SB_MISS__COUNT; i++)
        assert_string_equal(sb_miss_name(i), names[i]);
    static const int bad[] = { -1, SB_MISS__COUNT, 100, INT_MIN, INT_MAX };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_string_equal(sb_miss_name(bad[i]), "unknown");
}

/* ---- store ------------------------------------------------------------------------ */

static int open_rc(const sb_config *cfg)
{
    sb_store *st = (sb_store *)&st; /* not NULL: the call must clear it */
    int rc = sb_store_open(cfg, &st);
    if (rc == SB_OK) {
        tu_check(st);
        sb_store_close(st);
    } else {
        assert_null(st);
    }
    return rc;
}

static void test_store_open_inval(void **state)
{
    (void)state;
    sb_config cfg;
    sb_config_default(&cfg);
    sb_store *st = (sb_store *)&st;
    assert_int_equal(sb_store_open(NULL, &st), SB_ERR_INVAL);
    assert_null(st);
    assert_int_equal(sb_store_open(&cfg, NULL), SB_ERR_INVAL);

    sb_config c;
    c = cfg, c.ram_bytes = 0;
    assert_int_equal(open_rc(&c), SB_ERR_INVAL);
    c = cfg, c.ram_pages = 0;
    assert_int_equal(open_rc(&c), SB_ERR_INVAL);
    c = cfg, c.ns_ram_bytes = 0;
    assert_int_equal(open_rc(&c), SB_ERR_INVAL);
    c = cfg, c.reserved0 = 1;
    assert_int_equal(open_rc(&c), SB_ERR_INVAL);
    c = cfg, c.reserved0 = 0x80000000u;
    assert_int_equal(open_rc(&c), SB_ERR_INVAL);
    /* open_flags: unknown bits refused, alone or beside a known one. */
    c = cfg, c.open_flags = 2;
    assert_int_equal(open_rc(&c), SB_ERR_INVAL);
    c = cfg, c.open_flags = SB_OPEN_SALVAGE | 0x80000000u;
    assert_int_equal(open_rc(&c), SB_ERR_INVAL);
    c = cfg, c.open_flags = SB_OPEN_SALVAGE; /* RAM only: nothing to salvage */
    assert_int_equal(open_rc(&c), SB_OK);
    c = cfg, c.max_seq_tokens = 0;
    assert_int_equal(open_rc(&c), SB_ERR_INVAL);
    c = cfg, c.max_seq_tokens = 0x80000000u; /* 2^31 */
    assert_int_equal(open_rc(&c), SB_ERR_INVAL);
    c = cfg, c.max_seq_tokens = UINT32_MAX;
    assert_int_equal(open_rc(&c), SB_ERR_INVAL);
    c = cfg, c.durability = (sb_durability)3;
    assert_int_equal(open_rc(&c), SB_ERR_INVAL);
    c = cfg, c.write_mode = (sb_write_mode)3;
    assert_int_equal(open_rc(&c), SB_ERR_INVAL);
    /* The boundaries are accepted. */
    c = cfg, c.max_seq_tokens = 0x7fffffffu;
    assert_int_equal(open_rc(&c), SB_OK);
    c = cfg, c.max_seq_tokens = 1, c.ram_bytes = 1, c.ram_pages = 1, c.ns_ram_bytes = 1;
    assert_int_equal(open_rc(&c), SB_OK);
}

static void test_store_open_dir_not_directory(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "/tmp/snapbank-test-errors-%ld", (long)getpid());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("not a directory\n", f);
    fclose(f);
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.dir = path;
    assert_int_equal(open_rc(&cfg), SB_ERR_INVAL);
    /* Nothing changed: the file is as it was. */
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_size, 16);
    unlink(path);
    cfg.dir = "";
    assert_int_equal(open_rc(&cfg), SB_OK); /* "" means RAM only */
    sb_config_default(&cfg);
    cfg.dir = "/tmp";
    cfg.segment_bytes = 4096; /* under 64 KiB */
    assert_int_equal(open_rc(&cfg), SB_ERR_INVAL);
    cfg.segment_bytes = 1u << 20;
    cfg.queue_depth = 0;
    assert_int_equal(open_rc(&cfg), SB_ERR_INVAL);
    /* The rest of the disk settings, each checked before the directory is
     * touched. */
    sb_config_default(&cfg);
    cfg.dir = "/tmp";
    sb_config c = cfg;
    c.queue_depth = 4097;
    assert_int_equal(open_rc(&c), SB_ERR_INVAL);
    c = cfg, c.segment_bytes = (1u << 20) + 512; /* not a multiple of 4096 */
    assert_int_equal(open_rc(&c), SB_ERR_INVAL);
    c = cfg, c.segment_bytes = (1ull << 40) + 4096;
    assert_int_equal(open_rc(&c), SB_ERR_INVAL);
    c = cfg, c.sync_interval_ms = 0;
    assert_int_equal(open_rc(&c), SB_ERR_INVAL);
    c = cfg, c.disk_bytes = cfg.segment_bytes - 4096;
    assert_int_equal(open_rc(&c), SB_ERR_INVAL);
    c = cfg, c.write_budget_bytes_per_hour = (1u << 20) - 1;
    assert_int_equal(open_rc(&c), SB_ERR_INVAL);
    c = cfg, c.backlog_bytes = 0;
    assert_int_equal(open_rc(&c), SB_ERR_INVAL);
}

static void test_store_calls_inval(void **state)
{
    (void)state;
    world *w = world_std();
    snap before;
    w_snap(w, &before);
    sb_stats s;
    assert_int_equal(sb_store_fault_alloc(NULL, 1), SB_ERR_INVAL);
    assert_int_equal(sb_store_stats(NULL, &s), SB_ERR_INVAL);
    assert_int_equal(sb_store_stats(w->st, NULL), SB_ERR_INVAL);
    assert_int_equal(sb_store_check(NULL), SB_ERR_INVAL);
    assert_int_equal(sb_store_close(NULL), SB_OK);
    sb_ns_close(NULL);
    sb_match_release(NULL);
    sb_page_unref(NULL);
    assert_null(sb_page_data(NULL));
    assert_int_equal(sb_page_tokens(NULL), 0);
    assert_null(sb_match_point(NULL));
    w_same(w, &before);
    world_close(w);
}

/* ---- namespaces ------------------------------------------------------------------ */

static int ns_open_rc(world *w, const sb_layout *lay, const char *scope, size_t scope_bytes)
{
    sb_ns *ns = NULL;
    int rc = sb_ns_open(w->st, lay, scope, scope_bytes, &ns);
    if (rc == SB_OK) {
        assert_non_null(ns);
        sb_ns_close(ns);
    }
    return rc;
}

static void test_ns_open_inval(void **state)
{
    (void)state;
    world *w = world_std();
    snap before;
    w_snap(w, &before);
    uint32_t bpt[2] = { 8, 8 };
    sb_layout lay = base_layout(bpt, 2);
    sb_ns *ns = NULL;
    assert_int_equal(sb_ns_open(NULL, &lay, "s", 1, &ns), SB_ERR_INVAL);
    assert_int_equal(sb_ns_open(w->st, NULL, "s", 1, &ns), SB_ERR_INVAL);
    assert_int_equal(sb_ns_open(w->st, &lay, "s", 1, NULL), SB_ERR_INVAL);
    assert_int_equal(sb_ns_open(w->st, &lay, NULL, 1, &ns), SB_ERR_INVAL);
    char *big = malloc(SB_SCOPE_MAX + 1);
    assert_non_null(big);
    memset(big, 's', SB_SCOPE_MAX + 1);
    assert_int_equal(ns_open_rc(w, &lay, big, SB_SCOPE_MAX + 1), SB_ERR_INVAL);
    w_same(w, &before);
    /* The boundaries: the longest scope, and the empty scope as NULL. */
    assert_int_equal(ns_open_rc(w, &lay, big, SB_SCOPE_MAX), SB_OK);
    assert_int_equal(ns_open_rc(w, &lay, NULL, 0), SB_OK);
    free(big);
    world_close(w);
}

static void test_ns_open_layout(void **state)
{
    (void)state;
    world *w = world_std();
    snap before;
    w_snap(w, &before);
    uint32_t bpt[2] = { 8, 8 };
    uint32_t bpt0[2] = { 8, 0 };
    sb_layout l;

    l = base_layout(bpt, 2), l.model_id = NULL;
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_ERR_LAYOUT);
    l = base_layout(bpt, 2), l.model_id_bytes = 0;
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_ERR_LAYOUT);
    char *id = calloc(1, SB_MODEL_ID_MAX + 1);
    assert_non_null(id);
    l = base_layout(bpt, 2), l.model_id = id, l.model_id_bytes = SB_MODEL_ID_MAX + 1;
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_ERR_LAYOUT);
    l = base_layout(bpt, 0);
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_ERR_LAYOUT);
    uint32_t *many = malloc((SB_TENSORS_MAX + 1) * sizeof *many);
    assert_non_null(many);
    for (uint32_t t = 0; t <= SB_TENSORS_MAX; t++)
        many[t] = 1;
    l = base_layout(many, SB_TENSORS_MAX + 1);
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_ERR_LAYOUT);
    l = base_layout(bpt0, 2); /* the second tensor has 0 bytes per token */
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_ERR_LAYOUT);
    l = base_layout(NULL, 2);
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_ERR_LAYOUT);
    l = base_layout(bpt, 2), l.flags = 4;
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_ERR_LAYOUT);
    uint32_t odd[2] = { 64, 33 }; /* 2-byte elements need even sizes */
    l = base_layout(odd, 2), l.flags = SB_LAYOUT_ELEM16;
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_ERR_LAYOUT);
    l = base_layout(bpt, 2), l.flags = 0x80000000u | SB_LAYOUT_POINT_REQUIRED, l.point_bytes = 8;
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_ERR_LAYOUT);
    l = base_layout(bpt, 2), l.flags = SB_LAYOUT_POINT_REQUIRED, l.point_bytes = 0;
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_ERR_LAYOUT);
    l = base_layout(bpt, 2), l.point_bytes = SB_POINT_BYTES_MAX + 1;
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_ERR_LAYOUT);
    w_same(w, &before);

    /* Each boundary is accepted (no page or point is allocated at open). */
    l = base_layout(bpt, 2), l.model_id = id, l.model_id_bytes = SB_MODEL_ID_MAX;
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_OK);
    l = base_layout(many, SB_TENSORS_MAX);
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_OK);
    l = base_layout(bpt, 2), l.flags = SB_LAYOUT_POINT_REQUIRED,
    l.point_bytes = SB_POINT_BYTES_MAX;
    assert_int_equal(ns_open_rc(w, &l, "s2", 2), SB_OK);
    free(many);
    free(id);
    world_close(w);
}

static void test_ns_open_page_size(void **state)
{
    (void)state;
    world *w = world_std();
    snap before;
    w_snap(w, &before);
    uint32_t bpt[2] = { 8, 8 };
    sb_layout l;
    l = base_layout(bpt, 2), l.page_tokens = 0;
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_ERR_PAGE_SIZE);
    l = base_layout(bpt, 2), l.page_tokens = SB_PAGE_TOKENS_MAX + 1;
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_ERR_PAGE_SIZE);
    /* One tensor over SB_PAGE_BYTES_MAX by itself (64 KiB tokens x 4097 B). */
    uint32_t one[1] = { 4097 };
    l = base_layout(one, 1), l.page_tokens = SB_PAGE_TOKENS_MAX;
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_ERR_PAGE_SIZE);
    /* A huge per-token size with one token per page. */
    uint32_t huge[1] = { UINT32_MAX };
    l = base_layout(huge, 1), l.page_tokens = 1;
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_ERR_PAGE_SIZE);
    /* Two tensors, each under the limit, together over it by 64 KiB. */
    uint32_t two[2] = { 2048, 2048 + 1 };
    l = base_layout(two, 2), l.page_tokens = SB_PAGE_TOKENS_MAX;
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_ERR_PAGE_SIZE);
    w_same(w, &before);
    /* Exactly SB_PAGE_BYTES_MAX, and the largest page_tokens, are accepted. */
    uint32_t exact[1] = { 4096 };
    l = base_layout(exact, 1), l.page_tokens = SB_PAGE_TOKENS_MAX;
    assert_int_equal(ns_open_rc(w, &l, "s", 1), SB_OK);
    uint32_t split[2] = { 2048, 2048 };
    l = base_layout(split, 2), l.page_tokens = SB_PAGE_TOKENS_MAX;
    assert_int_equal(ns_open_rc(w, &l, "s2", 2), SB_OK);
    world_close(w);
}

static void test_ns_open_layout_mismatch(void **state)
{
    (void)state;
    world *w = world_std();
    snap before;
    w_snap(w, &before);
    /* The identity and scope of namespace A with one layout field changed. */
    const char *model = LAY_A.model;
    uint32_t bpt[3] = { 8, 24, 8 };
    sb_layout a = { .model_id = model, .model_id_bytes = strlen(model), .page_tokens = 4,
                    .n_tensors = 2, .bytes_per_token = bpt, .point_bytes = 32 };
    sb_layout l;
    l = a, l.page_tokens = 8;
    assert_int_equal(ns_open_rc(w, &l, SCOPE_A, strlen(SCOPE_A)), SB_ERR_LAYOUT_MISMATCH);
    l = a, l.n_tensors = 3;
    assert_int_equal(ns_open_rc(w, &l, SCOPE_A, strlen(SCOPE_A)), SB_ERR_LAYOUT_MISMATCH);
    uint32_t bpt2[2] = { 8, 25 };
    l = a, l.bytes_per_token = bpt2;
    assert_int_equal(ns_open_rc(w, &l, SCOPE_A, strlen(SCOPE_A)), SB_ERR_LAYOUT_MISMATCH);
    l = a, l.point_bytes = 0;
    assert_int_equal(ns_open_rc(w, &l, SCOPE_A, strlen(SCOPE_A)), SB_ERR_LAYOUT_MISMATCH);
    l = a, l.point_bytes = 33;
    assert_int_equal(ns_open_rc(w, &l, SCOPE_A, strlen(SCOPE_A)), SB_ERR_LAYOUT_MISMATCH);
    l = a, l.flags = SB_LAYOUT_POINT_REQUIRED;
    assert_int_equal(ns_open_rc(w, &l, SCOPE_A, strlen(SCOPE_A)), SB_ERR_LAYOUT_MISMATCH);
    w_same(w, &before);

    /* The same layout opens the same namespace; another scope is another. */
    sb_ns *same = NULL;
    assert_int_equal(sb_ns_open(w->st, &a, SCOPE_A, strlen(SCOPE_A), &same), SB_OK);
    sb_ns_info i1, i2;
    assert_int_equal(sb_ns_get_info(same, &i1), SB_OK);
    assert_int_equal(sb_ns_get_info(w->ns[NA], &i2), SB_OK);
    assert_int_equal(i1.ns_id, i2.ns_id);
    assert_int_equal(w_len(w, NA, w->a1, 30), 30);
    sb_ns_close(same);
    l = a, l.page_tokens = 8;
    assert_int_equal(ns_open_rc(w, &l, "other", 5), SB_OK);

    /* With every handle closed, a namespace that still holds pages still
     * exists: a mismatching layout is refused. */
    sb_ns_close(w->ns[NA]);
    l = a, l.page_tokens = 8;
    assert_int_equal(ns_open_rc(w, &l, SCOPE_A, strlen(SCOPE_A)), SB_ERR_LAYOUT_MISMATCH);
    w->ns[NA] = tu_ns(w->st, &LAY_A, SCOPE_A);
    w_same(w, &before);
    world_close(w);
}

static void test_ns_info_inval(void **state)
{
    (void)state;
    world *w = world_std();
    snap before;
    w_snap(w, &before);
    sb_ns_info info;
    assert_int_equal(sb_ns_get_info(NULL, &info), SB_ERR_INVAL);
    assert_int_equal(sb_ns_get_info(w->ns[NA], NULL), SB_ERR_INVAL);
    assert_int_equal(sb_ns_tensor_offset(NULL, 0), (size_t)-1);
    assert_int_equal(sb_ns_tensor_offset(w->ns[NA], 2), (size_t)-1);
    assert_int_equal(sb_ns_tensor_offset(w->ns[NA], UINT32_MAX), (size_t)-1);
    assert_int_equal(sb_ns_tensor_offset(w->ns[NA], 0), 0);
    assert_int_equal(sb_ns_tensor_offset(w->ns[NA], 1), 64); /* round_up(4 * 8, 64) */
    assert_int_equal(sb_ns_dump(NULL, stderr), SB_ERR_INVAL);
    assert_int_equal(sb_ns_dump(w->ns[NA], NULL), SB_ERR_INVAL);
    w_same(w, &before);
    world_close(w);
}

/* ---- copy mode ------------------------------------------------------------------- */

static int put_rc(world *w, int k, const uint32_t *tok, size_t n, const void *const *tensors,
                  const void *point, size_t *stored)
{
    *stored = 12345;
    return sb_ns_put(w->ns[k], tok, n, tensors, point, stored);
}

static void test_put_errors(void **state)
{
    (void)state;
    world *w = world_std();
    snap before;
    w_snap(w, &before);
    uint32_t tok[16];
    uint64_t rng = 3;
    tu_tokens(&rng, tok, 16, 9);
    void **st_a = tu_state(&LAY_A, tok, 16);
    void **st_c = tu_state(&LAY_C, tok, 16);
    void *pt_a = tu_point(&LAY_A, tok, 16);
    size_t stored;

    stored = 12345;
    assert_int_equal(sb_ns_put(NULL, tok, 16, (const void *const *)st_a, NULL, &stored),
                     SB_ERR_INVAL);
    assert_int_equal(stored, 0);
    assert_int_equal(put_rc(w, NA, NULL, 16, (const void *const *)st_a, NULL, &stored),
                     SB_ERR_INVAL);
    assert_int_equal(stored, 0);
    assert_int_equal(put_rc(w, NA, tok, 16, NULL, NULL, &stored), SB_ERR_INVAL);
    assert_int_equal(stored, 0);
    const void *holes[2] = { st_a[0], NULL };
    assert_int_equal(put_rc(w, NA, tok, 16, holes, NULL, &stored), SB_ERR_INVAL);
    assert_int_equal(stored, 0);
    const void *holes0[2] = { NULL, st_a[1] };
    assert_int_equal(put_rc(w, NA, tok, 16, holes0, NULL, &stored), SB_ERR_INVAL);
    /* A point for a layout without point states. */
    assert_int_equal(put_rc(w, NC, tok, 16, (const void *const *)st_c, pt_a, &stored),
                     SB_ERR_INVAL);
    assert_int_equal(stored, 0);
    assert_int_equal(put_rc(w, NA, tok, 0, (const void *const *)st_a, NULL, &stored),
                     SB_ERR_NO_TOKENS);
    assert_int_equal(stored, 0);
    assert_int_equal(put_rc(w, NA, tok, 0, (const void *const *)st_a, pt_a, &stored),
                     SB_ERR_NO_TOKENS);
    /* n_stored may be NULL. */
    assert_int_equal(sb_ns_put(w->ns[NA], tok, 0, (const void *const *)st_a, NULL, NULL),
                     SB_ERR_NO_TOKENS);
    w_same(w, &before);
    free(pt_a);
    tu_free_state(&LAY_A, st_a);
    tu_free_state(&LAY_C, st_c);
    world_close(w);
}

static void test_too_many_tokens(void **state)
{
    (void)state;
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.max_seq_tokens = 16;
    world *w = world_open(&cfg);
    uint32_t tok[17];
    uint64_t rng = 11;
    tu_tokens(&rng, tok, 17, 4);
    tu_put(w->ns[NA], &LAY_A, tok, 10, true, SB_OK);
    w_probe(w, NA, tok, 10);
    w_probe(w, NA, tok, 16);
    snap before;
    w_snap(w, &before);

    void **st = tu_state(&LAY_A, tok, 17);
    void *pt = tu_point(&LAY_A, tok, 17);
    size_t stored = 12345;
    assert_int_equal(sb_ns_put(w->ns[NA], tok, 17, (const void *const *)st, NULL, &stored),
                     SB_ERR_TOO_MANY_TOKENS);
    assert_int_equal(stored, 0);
    assert_int_equal(sb_ns_put(w->ns[NA], tok, 17, (const void *const *)st, pt, &stored),
                     SB_ERR_TOO_MANY_TOKENS);
    sb_match *m = (sb_match *)&m;
    assert_int_equal(sb_ns_match(w->ns[NA], tok, 17, &m), SB_ERR_TOO_MANY_TOKENS);
    assert_null(m);
    uint64_t id = 0;
    size_t n_pinned = 12345;
    assert_int_equal(sb_ns_pin(w->ns[NA], tok, 17, 0, &id, &n_pinned),
                     SB_ERR_TOO_MANY_TOKENS);
    free(pt);
    tu_free_state(&LAY_A, st);
    w_same(w, &before);

    /* Commit: five fresh pages for 17 tokens. */
    sb_page *pages[5];
    alloc_pages(w->ns[NA], &LAY_A, tok, 17, pages);
    w_snap(w, &before);
    assert_int_equal(sb_ns_commit(w->ns[NA], tok, 17, pages, NULL), SB_ERR_TOO_MANY_TOKENS);
    for (int i = 0; i < 5; i++)
        assert_int_equal(sb_page_tokens(pages[i]), 0);
    w_same(w, &before);
    /* 16 tokens is the limit and is accepted. */
    assert_int_equal(sb_ns_commit(w->ns[NA], tok, 16, pages, NULL), SB_OK);
    for (int i = 0; i < 5; i++)
        sb_page_unref(pages[i]);
    assert_int_equal(w_len(w, NA, tok, 16), 16);
    world_close(w);
}

static void test_match_errors(void **state)
{
    (void)state;
    world *w = world_std();
    snap before;
    w_snap(w, &before);
    sb_match *m = (sb_match *)&m;
    assert_int_equal(sb_ns_match(NULL, w->a1, 10, &m), SB_ERR_INVAL);
    assert_null(m);
    m = (sb_match *)&m;
    assert_int_equal(sb_ns_match(w->ns[NA], NULL, 10, &m), SB_ERR_INVAL);
    assert_null(m);
    assert_int_equal(sb_ns_match(w->ns[NA], w->a1, 10, NULL), SB_ERR_INVAL);
    m = (sb_match *)&m;
    assert_int_equal(sb_ns_match(w->ns[NA], w->a1, 0, &m), SB_ERR_NO_TOKENS);
    assert_null(m);
    sb_match_info info;
    assert_int_equal(sb_match_get_info(NULL, &info), SB_ERR_INVAL);
    w_same(w, &before);
    assert_int_equal(sb_ns_match(w->ns[NA], w->a1, 10, &m), SB_OK);
    assert_int_equal(sb_match_get_info(m, NULL), SB_ERR_INVAL);
    sb_match_release(m);
    w_same(w, &before);
    world_close(w);
}

static void test_restore_errors(void **state)
{
    (void)state;
    world *w = world_std();
    snap before;
    w_snap(w, &before);

    /* A match of a1 (30 tokens, point at 30) and one of a2 (no point). */
    sb_match *m1 = NULL, *m2 = NULL;
    assert_int_equal(sb_ns_match(w->ns[NA], w->a1, 30, &m1), SB_OK);
    assert_int_equal(sb_ns_match(w->ns[NA], w->a2, 40, &m2), SB_OK);
    sb_match_info i1, i2;
    assert_int_equal(sb_match_get_info(m1, &i1), SB_OK);
    assert_int_equal(sb_match_get_info(m2, &i2), SB_OK);
    assert_int_equal(i1.n_tokens, 30);
    assert_true(i1.has_point);
    assert_int_equal(i2.n_tokens, 24);
    assert_false(i2.has_point);
    assert_int_equal(i2.miss, SB_MISS_NO_PREFIX);

    void **bufs = tu_bufs(&LAY_A, 41);
    uint8_t point[32];
    void *holes[2] = { bufs[0], NULL };
    assert_int_equal(sb_match_restore(NULL, 10, bufs, NULL), SB_ERR_INVAL);
    assert_int_equal(sb_match_restore(m1, 10, NULL, NULL), SB_ERR_INVAL);
    assert_int_equal(sb_match_restore(m1, 10, holes, NULL), SB_ERR_INVAL);
    assert_int_equal(sb_match_restore(m1, 31, bufs, NULL), SB_ERR_RANGE);
    assert_int_equal(sb_match_restore(m2, 25, bufs, NULL), SB_ERR_RANGE);
    assert_int_equal(sb_match_restore(m2, SIZE_MAX, bufs, NULL), SB_ERR_RANGE);
    /* A point asked for: none at all, or not at n_tokens. */
    assert_int_equal(sb_match_restore(m2, 24, bufs, point), SB_ERR_NO_POINT);
    assert_int_equal(sb_match_restore(m1, 29, bufs, point), SB_ERR_NO_POINT);
    assert_int_equal(sb_match_restore(m1, 0, bufs, point), SB_ERR_NO_POINT);
    /* The boundaries work and are exact. */
    assert_int_equal(sb_match_restore(m1, 30, bufs, point), SB_OK);
    assert_true(tu_state_equal(&LAY_A, w->a1, 30, bufs));
    void *want = tu_point(&LAY_A, w->a1, 30);
    assert_memory_equal(point, want, sizeof point);
    free(want);
    assert_int_equal(sb_match_restore(m2, 24, bufs, NULL), SB_OK);
    assert_true(tu_state_equal(&LAY_A, w->a2, 24, bufs));
    tu_free_state(&LAY_A, bufs);

    /* A layout without point states: any point buffer is NO_POINT. */
    sb_match *m3 = NULL;
    assert_int_equal(sb_ns_match(w->ns[NC], w->c1, 12, &m3), SB_OK);
    void **cb = tu_bufs(&LAY_C, 12);
    assert_int_equal(sb_match_restore(m3, 12, cb, point), SB_ERR_NO_POINT);
    assert_null(sb_match_point(m3));
    tu_free_state(&LAY_C, cb);

    /* The recurrent layout: L is the point at 9; asking 8 with a point is
     * NO_POINT, 9 works. */
    sb_match *m4 = NULL;
    assert_int_equal(sb_ns_match(w->ns[NB], w->b1, 15, &m4), SB_OK);
    sb_match_info i4;
    assert_int_equal(sb_match_get_info(m4, &i4), SB_OK);
    assert_int_equal(i4.n_tokens, 9);
    assert_int_equal(i4.n_matched_tokens, 15);
    assert_int_equal(i4.miss, SB_MISS_NO_POINT);
    void **bb = tu_bufs(&LAY_B, 15);
    uint8_t bpoint[24];
    assert_int_equal(sb_match_restore(m4, 8, bb, bpoint), SB_ERR_NO_POINT);
    assert_int_equal(sb_match_restore(m4, 10, bb, NULL), SB_ERR_RANGE);
    assert_int_equal(sb_match_restore(m4, 9, bb, bpoint), SB_OK);
    assert_true(tu_state_equal(&LAY_B, w->b1, 9, bb));
    tu_free_state(&LAY_B, bb);

    sb_match_release(m1);
    sb_match_release(m2);
    sb_match_release(m3);
    sb_match_release(m4);
    w_same(w, &before);
    world_close(w);
}

/* ---- zero-copy ----------------------------------------------------------------- */

static void test_match_pages_errors(void **state)
{
    (void)state;
    world *w = world_std();
    snap before;
    w_snap(w, &before);
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(w->ns[NA], w->a1, 30, &m), SB_OK); /* 8 pages */
    sb_page *out[10] = { 0 };
    assert_int_equal(sb_match_pages(NULL, 0, 1, out), SB_ERR_INVAL);
    assert_int_equal(sb_match_pages(m, 0, 1, NULL), SB_ERR_INVAL);
    assert_int_equal(sb_match_pages(m, 9, 0, out), SB_ERR_RANGE);
    assert_int_equal(sb_match_pages(m, 0, 9, out), SB_ERR_RANGE);
    assert_int_equal(sb_match_pages(m, 7, 2, out), SB_ERR_RANGE);
    assert_int_equal(sb_match_pages(m, SIZE_MAX, 2, out), SB_ERR_RANGE);
    assert_int_equal(sb_match_pages(m, 1, SIZE_MAX, out), SB_ERR_RANGE);
    for (int i = 0; i < 10; i++)
        assert_null(out[i]);
    /* The boundaries: an empty range at the end, the whole range. */
    assert_int_equal(sb_match_pages(m, 8, 0, out), SB_OK);
    assert_int_equal(sb_match_pages(m, 0, 8, out), SB_OK);
    for (int i = 0; i < 8; i++) {
        assert_true(tu_page_holds(w->ns[NA], &LAY_A, out[i], w->a1, (size_t)i, i < 7 ? 4 : 2));
        sb_page_unref(out[i]);
    }
    sb_match_release(m);
    w_same(w, &before);
    world_close(w);
}

static void test_page_alloc_errors(void **state)
{
    (void)state;
    world *w = world_std();
    snap before;
    w_snap(w, &before);
    sb_page *p = NULL;
    assert_int_equal(sb_ns_page_alloc(NULL, &p), SB_ERR_INVAL);
    assert_int_equal(sb_ns_page_alloc(w->ns[NA], NULL), SB_ERR_INVAL);
    w_same(w, &before);
    world_close(w);
}

static void test_page_writable_errors(void **state)
{
    (void)state;
    world *w = world_std();
    sb_ns *a2 = tu_ns(w->st, &LAY_A, SCOPE_A2); /* same geometry, another namespace */
    sb_page *fresh = NULL;
    assert_int_equal(sb_ns_page_alloc(w->ns[NA], &fresh), SB_OK);
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(w->ns[NA], w->a1, 30, &m), SB_OK);
    sb_page *mp[8];
    assert_int_equal(sb_match_pages(m, 0, 8, mp), SB_OK);
    snap before;
    w_snap(w, &before);

    sb_page *p = fresh, *null_page = NULL;
    assert_int_equal(sb_page_writable(NULL, &p, 0), SB_ERR_INVAL);
    assert_int_equal(sb_page_writable(w->ns[NA], NULL, 0), SB_ERR_INVAL);
    assert_int_equal(sb_page_writable(w->ns[NA], &null_page, 0), SB_ERR_INVAL);
    assert_null(null_page);
    assert_int_equal(sb_page_writable(w->ns[NA], &p, 5), SB_ERR_INVAL); /* > page_tokens */
    assert_ptr_equal(p, fresh);
    /* Committed pages: n_keep beyond the tokens the page holds. */
    sb_page *q = mp[7]; /* a1's last page: 2 tokens */
    assert_int_equal(sb_page_tokens(q), 2);
    assert_int_equal(sb_page_writable(w->ns[NA], &q, 3), SB_ERR_INVAL);
    assert_ptr_equal(q, mp[7]);
    assert_int_equal(sb_page_writable(w->ns[NA], &q, UINT32_MAX), SB_ERR_INVAL);
    assert_ptr_equal(q, mp[7]);
    /* Foreign pages: of a namespace with the same geometry, of another. */
    assert_int_equal(sb_page_writable(a2, &p, 0), SB_ERR_FOREIGN_PAGE);
    assert_ptr_equal(p, fresh);
    q = mp[3];
    assert_int_equal(sb_page_writable(a2, &q, 4), SB_ERR_FOREIGN_PAGE);
    assert_int_equal(sb_page_writable(w->ns[NC], &q, 1), SB_ERR_FOREIGN_PAGE);
    assert_ptr_equal(q, mp[3]);
    w_same(w, &before);

    /* The boundaries work: a fresh private page is left as it is; a
     * committed page with n_keep == its tokens is copied exactly. */
    assert_int_equal(sb_page_writable(w->ns[NA], &p, 4), SB_OK);
    assert_ptr_equal(p, fresh);
    assert_int_equal(sb_page_writable(w->ns[NA], &mp[7], 2), SB_OK);
    assert_int_equal(sb_page_tokens(mp[7]), 0);
    assert_true(tu_page_holds(w->ns[NA], &LAY_A, mp[7], w->a1, 7, 2));
    for (int i = 0; i < 8; i++)
        sb_page_unref(mp[i]);
    sb_page_unref(fresh);
    sb_match_release(m);
    sb_ns_close(a2);
    world_close(w);
}

static void test_commit_errors(void **state)
{
    (void)state;
    world *w = world_std();
    sb_ns *ns = w->ns[NA];
    sb_ns *a2 = tu_ns(w->st, &LAY_A, SCOPE_A2);
    uint32_t tok[12];
    uint64_t rng = 99;
    tu_tokens(&rng, tok, 12, 5);
    tok[0] = 8; /* a new first token: a new branch of A */
    sb_page *pages[3], *orig[3];
    alloc_pages(ns, &LAY_A, tok, 12, pages);
    memcpy(orig, pages, sizeof pages);
    sb_page *foreign = NULL;
    assert_int_equal(sb_ns_page_alloc(a2, &foreign), SB_OK);
    w_probe(w, NA, tok, 12);
    uint8_t point[32] = { 1 };
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, w->a1, 30, &m), SB_OK);
    sb_page *mp[8];
    assert_int_equal(sb_match_pages(m, 0, 8, mp), SB_OK);
    sb_match *m2 = NULL;
    assert_int_equal(sb_ns_match(ns, w->a2, 24, &m2), SB_OK);
    sb_page *mq[6];
    assert_int_equal(sb_match_pages(m2, 0, 6, mq), SB_OK);
    snap before;
    w_snap(w, &before);

    assert_int_equal(sb_ns_commit(NULL, tok, 12, pages, NULL), SB_ERR_INVAL);
    assert_int_equal(sb_ns_commit(ns, NULL, 12, pages, NULL), SB_ERR_INVAL);
    assert_int_equal(sb_ns_commit(ns, tok, 12, NULL, NULL), SB_ERR_INVAL);
    sb_page *with_null[3] = { pages[0], NULL, pages[2] };
    assert_int_equal(sb_ns_commit(ns, tok, 12, with_null, NULL), SB_ERR_INVAL);
    sb_page *cpage = NULL;
    assert_int_equal(sb_ns_page_alloc(w->ns[NC], &cpage), SB_OK);
    assert_int_equal(sb_ns_commit(w->ns[NC], w->c1, 1, &cpage, point), SB_ERR_INVAL);
    assert_int_equal(sb_page_tokens(cpage), 0);
    sb_page_unref(cpage);
    /* The same page for two regions is no valid page list either. */
    sb_page *twice[3] = { pages[0], pages[1], pages[1] };
    assert_int_equal(sb_ns_commit(ns, tok, 12, twice, NULL), SB_ERR_INVAL);
    assert_int_equal(sb_ns_commit(ns, tok, 0, pages, NULL), SB_ERR_NO_TOKENS);
    /* A page of another namespace (same geometry). */
    sb_page *mixed[3] = { pages[0], foreign, pages[2] };
    assert_int_equal(sb_ns_commit(ns, tok, 12, mixed, NULL), SB_ERR_FOREIGN_PAGE);
    assert_int_equal(sb_ns_commit(a2, tok, 12, pages, NULL), SB_ERR_FOREIGN_PAGE);
    /* Committed pages given for tokens other than their own. */
    sb_page *wrong0[3] = { mp[0], pages[1], pages[2] }; /* a1's region 0 as tok's */
    assert_int_equal(sb_ns_commit(ns, tok, 12, wrong0, NULL), SB_ERR_PAGE_STATE);
    sb_page *wrong1[3] = { pages[0], mp[1], pages[2] };
    assert_int_equal(sb_ns_commit(ns, tok, 12, wrong1, point), SB_ERR_PAGE_STATE);
    /* a1's own prefix, with a1's region-3 page given as region 2. */
    sb_page *wrong2[3] = { mp[0], mp[1], mp[3] };
    assert_int_equal(sb_ns_commit(ns, w->a1, 12, wrong2, NULL), SB_ERR_PAGE_STATE);
    /* a2's region 0 page is a1's (shared prefix); a2's region 2 page for a1. */
    assert_ptr_equal(mq[0], mp[0]);
    sb_page *wrong3[3] = { mp[0], mp[1], mq[2] };
    assert_int_equal(sb_ns_commit(ns, w->a1, 12, wrong3, NULL), SB_ERR_PAGE_STATE);
    for (int i = 0; i < 3; i++) {
        assert_ptr_equal(pages[i], orig[i]);
        assert_int_equal(sb_page_tokens(pages[i]), 0);
    }
    w_same(w, &before);

    /* A committed page the index no longer holds (a superseded partial
     * page) is still bound to its tokens. */
    uint32_t s[8];
    tu_tokens(&rng, s, 8, 5);
    s[0] = 9;
    sb_page *sp[2], *sx[2];
    alloc_pages(ns, &LAY_A, s, 6, sp);
    assert_int_equal(sb_ns_commit(ns, s, 6, sp, NULL), SB_OK);
    assert_int_equal(sb_page_tokens(sp[1]), 2);
    alloc_pages(ns, &LAY_A, s, 8, sx);
    assert_int_equal(sb_ns_commit(ns, s, 8, sx, NULL), SB_OK); /* supersedes sp[1] */
    assert_ptr_equal(sx[0], sp[0]); /* deduplicated */
    w_probe(w, NA, s, 8);
    w_snap(w, &before);
    sb_page *wrong4[3] = { pages[0], sp[1], pages[2] };
    assert_int_equal(sb_ns_commit(ns, tok, 12, wrong4, NULL), SB_ERR_PAGE_STATE);
    sb_page *wrong5[2] = { sp[0], sp[1] }; /* right region, other tokens */
    uint32_t s2[6];
    memcpy(s2, s, sizeof s2);
    s2[5] = (s[5] + 1) % 5;
    assert_int_equal(sb_ns_commit(ns, s2, 6, wrong5, NULL), SB_ERR_PAGE_STATE);
    w_same(w, &before);
    /* With its own tokens it is accepted (deduplicated to the index's page). */
    assert_int_equal(sb_ns_commit(ns, s, 6, sp, NULL), SB_OK);
    assert_ptr_equal(sp[1], sx[1]);

    /* Finally the valid commit of tok. */
    assert_int_equal(sb_ns_commit(ns, tok, 12, pages, NULL), SB_OK);
    assert_int_equal(w_len(w, NA, tok, 12), 12);
    for (int i = 0; i < 3; i++)
        sb_page_unref(pages[i]);
    for (int i = 0; i < 2; i++) {
        sb_page_unref(sp[i]);
        sb_page_unref(sx[i]);
    }
    for (int i = 0; i < 8; i++)
        sb_page_unref(mp[i]);
    for (int i = 0; i < 6; i++)
        sb_page_unref(mq[i]);
    sb_page_unref(foreign);
    sb_match_release(m);
    sb_match_release(m2);
    sb_ns_close(a2);
    world_close(w);
}

/* ---- pins ---------------------------------------------------------------------- */

static void test_pin_errors(void **state)
{
    (void)state;
    world *w = world_std();
    sb_ns *ns = w->ns[NA];
    snap before;
    w_snap(w, &before);
    uint64_t id = 777;
    size_t n_pinned = 12345;
    assert_int_equal(sb_ns_pin(NULL, w->a1, 30, 0, &id, &n_pinned), SB_ERR_INVAL);
    assert_int_equal(sb_ns_pin(ns, NULL, 30, 0, &id, &n_pinned), SB_ERR_INVAL);
    assert_int_equal(sb_ns_pin(ns, w->a1, 30, 0, NULL, &n_pinned), SB_ERR_INVAL);
    assert_int_equal(sb_ns_pin(ns, w->a1, 0, 0, &id, &n_pinned), SB_ERR_NO_TOKENS);
    assert_int_equal(sb_ns_unpin(NULL, 1), SB_ERR_INVAL);
    /* No pin was ever made with these ids. */
    assert_int_equal(sb_ns_unpin(ns, 0), SB_ERR_NOT_FOUND);
    assert_int_equal(sb_ns_unpin(ns, 1), SB_ERR_NOT_FOUND);
    assert_int_equal(sb_ns_unpin(ns, UINT64_MAX), SB_ERR_NOT_FOUND);
    w_same(w, &before);

    /* A live pin, unpinned through another namespace: not found there, and
     * still live. */
    assert_int_equal(sb_ns_pin(ns, w->a1, 40, 0, &id, &n_pinned), SB_OK);
    assert_int_equal(n_pinned, 30);
    w_snap(w, &before);
    assert_int_equal(before.s.pins, 1);
    assert_int_equal(sb_ns_unpin(w->ns[NC], id), SB_ERR_NOT_FOUND);
    assert_int_equal(sb_ns_unpin(w->ns[NB], id), SB_ERR_NOT_FOUND);
    w_same(w, &before);
    /* Removed, then removed again. */
    assert_int_equal(sb_ns_unpin(ns, id), SB_OK);
    w_snap(w, &before);
    assert_int_equal(before.s.pins, 0);
    assert_int_equal(sb_ns_unpin(ns, id), SB_ERR_NOT_FOUND);
    w_same(w, &before);
    /* Expired: live 1 ns before its TTL runs out, gone after. */
    uint64_t id2 = 0;
    assert_int_equal(sb_ns_pin(ns, w->a2, 24, 5, &id2, &n_pinned), SB_OK);
    assert_int_equal(n_pinned, 24);
    assert_int_not_equal(id2, id);
    w->clock_ns += 5 * 1000000ull - 1;
    sb_stats s;
    assert_int_equal(sb_store_stats(w->st, &s), SB_OK);
    assert_int_equal(s.pins, 1);
    w->clock_ns += 1;
    w_snap(w, &before);
    assert_int_equal(before.s.pins, 0);
    assert_int_equal(sb_ns_unpin(ns, id2), SB_ERR_NOT_FOUND);
    w_same(w, &before);
    /* A pin of nothing is no error. */
    uint32_t none[3] = { 42, 42, 42 };
    assert_int_equal(sb_ns_pin(ns, none, 3, 0, &id, &n_pinned), SB_OK);
    assert_int_equal(n_pinned, 0);
    assert_int_equal(sb_ns_unpin(ns, id), SB_OK);
    world_close(w);
}

/* ---- budgets --------------------------------------------------------------------- */

/* Put tokens[0, n) into namespace k and return *n_stored; rc must be want. */
static size_t put_n(world *w, int k, const uint32_t *tok, size_t n, bool point, int want)
{
    const tu_layout *l = w->lay[k];
    void **st = tu_state(l, tok, n);
    void *pt = point ? tu_point(l, tok, n) : NULL;
    size_t stored = 12345;
    assert_int_equal(sb_ns_put(w->ns[k], tok, n, (const void *const *)st, pt, &stored), want);
    free(pt);
    tu_free_state(l, st);
    return stored;
}

/* A budget full of pages pinned by matches: a put stores the page-aligned
 * prefix that fits and says how long it is; then nothing fits and nothing
 * changes; released, the pages can go again. */
static void test_budget_put_partial(void **state)
{
    (void)state;
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.ram_pages = 6;
    world *w = world_open(&cfg);
    uint32_t x[16], y[16], z[4];
    uint64_t rng = 5;
    tu_tokens(&rng, x, 16, 4);
    tu_tokens(&rng, y, 16, 4);
    tu_tokens(&rng, z, 4, 4);
    x[0] = 10, y[0] = 11, z[0] = 12;
    put_n(w, NA, x, 16, false, SB_OK);
    sb_match *mx = NULL;
    assert_int_equal(sb_ns_match(w->ns[NA], x, 16, &mx), SB_OK);
    w_probe(w, NA, x, 16);

    /* Two of y's four pages fit. */
    assert_int_equal(put_n(w, NA, y, 16, false, SB_ERR_BUDGET), 8);
    for (size_t p = 1; p <= 16; p++)
        assert_int_equal(w_len(w, NA, y, p), p < 8 ? p : 8);
    assert_int_equal(w_len(w, NA, x, 16), 16);
    sb_stats s;
    assert_int_equal(sb_store_stats(w->st, &s), SB_OK);
    assert_int_equal(s.ram_pages, 6);
    assert_int_equal(s.indexed_pages, 6);
    assert_true(s.budget_denials >= 1);

    /* Pin y too: now nothing can go. */
    sb_match *my = NULL;
    assert_int_equal(sb_ns_match(w->ns[NA], y, 16, &my), SB_OK);
    w_probe(w, NA, y, 16);
    w_probe(w, NA, z, 4);
    snap before;
    w_snap(w, &before);
    assert_int_equal(put_n(w, NA, z, 4, false, SB_ERR_BUDGET), 0);
    w_same(w, &before);
    assert_int_equal(put_n(w, NA, z, 4, true, SB_ERR_BUDGET), 0);
    w_same(w, &before);
    /* y again: its stored half is what this put leaves restorable. */
    assert_int_equal(put_n(w, NA, y, 16, false, SB_ERR_BUDGET), 8);
    w_same(w, &before);
    sb_page *p = (sb_page *)&p;
    assert_int_equal(sb_ns_page_alloc(w->ns[NA], &p), SB_ERR_BUDGET);
    w_same(w, &before);

    /* Released, x's leaf page is the least recently used: z takes its room. */
    sb_match_release(mx);
    assert_int_equal(put_n(w, NA, z, 4, false, SB_OK), 4);
    assert_int_equal(w_len(w, NA, z, 4), 4);
    assert_int_equal(w_len(w, NA, x, 16), 12);
    assert_int_equal(w_len(w, NA, y, 16), 8);
    sb_match_release(my);
    world_close(w);
}

/* A budget full of pages the caller holds: put, page_alloc, a copy on
 * write and a commit with a point state all fail with SB_ERR_BUDGET and
 * change nothing. */
static void test_budget_held_pages(void **state)
{
    (void)state;
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.ram_bytes = 4 * 4096;
    world *w = world_open(&cfg);
    sb_ns *ns = w->ns[NA];
    uint32_t t[16], u[4];
    uint64_t rng = 6;
    tu_tokens(&rng, t, 16, 4);
    tu_tokens(&rng, u, 4, 4);
    u[0] = 13;
    sb_page *pages[4];
    alloc_pages(ns, &LAY_A, t, 16, pages);
    w_probe(w, NA, t, 16);
    w_probe(w, NA, u, 4);
    snap before;
    w_snap(w, &before);
    assert_int_equal(before.s.ram_bytes, 4 * 4096);

    assert_int_equal(put_n(w, NA, u, 4, false, SB_ERR_BUDGET), 0);
    w_same(w, &before);
    sb_page *p = NULL;
    assert_int_equal(sb_ns_page_alloc(ns, &p), SB_ERR_BUDGET);
    w_same(w, &before);
    /* A shared fresh page needs a copy, and there is no room for one. */
    sb_page *shared = sb_page_ref(pages[1]);
    assert_int_equal(sb_page_writable(ns, &shared, 4), SB_ERR_BUDGET);
    assert_ptr_equal(shared, pages[1]);
    sb_page_unref(shared);
    w_same(w, &before);
    /* The pages fit; their point state does not. */
    uint8_t *point = tu_point(&LAY_A, t, 16);
    assert_int_equal(sb_ns_commit(ns, t, 16, pages, point), SB_ERR_BUDGET);
    for (int i = 0; i < 4; i++)
        assert_int_equal(sb_page_tokens(pages[i]), 0);
    w_same(w, &before);

    /* Without the point the commit goes through. */
    assert_int_equal(sb_ns_commit(ns, t, 16, pages, NULL), SB_OK);
    assert_int_equal(w_len(w, NA, t, 16), 16);
    w_snap(w, &before);
    /* Committed, held by us and by a match: a copy has no room. */
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, t, 16, &m), SB_OK);
    sb_page *last = NULL;
    assert_int_equal(sb_match_pages(m, 3, 1, &last), SB_OK);
    sb_page *old = last;
    assert_int_equal(sb_page_writable(ns, &last, 2), SB_ERR_BUDGET);
    assert_ptr_equal(last, old);
    sb_page_unref(last);
    sb_match_release(m);
    w_same(w, &before);

    /* Let go of the last page: it can be evicted to make room. */
    sb_page_unref(pages[3]);
    assert_int_equal(sb_ns_page_alloc(ns, &p), SB_OK);
    assert_int_equal(w_len(w, NA, t, 16), 12);
    sb_page_unref(p);
    for (int i = 0; i < 3; i++)
        sb_page_unref(pages[i]);
    free(point);
    world_close(w);
}

/* The namespace budget binds even when the store has room. */
static void test_budget_namespace(void **state)
{
    (void)state;
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.ns_ram_bytes = 3 * 4096;
    world *w = world_open(&cfg);
    sb_ns *ns = w->ns[NA];
    sb_page *held[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(sb_ns_page_alloc(ns, &held[i]), SB_OK);
    uint32_t u[4] = { 1, 2, 3, 4 };
    w_probe(w, NA, u, 4);
    w_probe(w, NC, u, 4);
    snap before;
    w_snap(w, &before);
    sb_page *p = NULL;
    assert_int_equal(sb_ns_page_alloc(ns, &p), SB_ERR_BUDGET);
    w_same(w, &before);
    assert_int_equal(put_n(w, NA, u, 4, false, SB_ERR_BUDGET), 0);
    w_same(w, &before);
    /* Another namespace has its own budget (C has one token per page). */
    assert_int_equal(put_n(w, NC, u, 3, false, SB_OK), 3);
    assert_int_equal(w_len(w, NC, u, 4), 3);
    for (int i = 0; i < 3; i++)
        sb_page_unref(held[i]);
    assert_int_equal(put_n(w, NA, u, 4, false, SB_OK), 4);
    world_close(w);
}

/* A page larger than the whole budget can never be had. */
static void test_budget_page_over_budget(void **state)
{
    (void)state;
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.ram_bytes = 4096;
    world *w = world_open(&cfg);
    static const tu_layout big = { .page_tokens = 4, .n_tensors = 2, .bpt = { 1024, 1024 },
                                   .model = "errors-big" };
    sb_ns *ns = tu_ns(w->st, &big, "big");
    sb_ns_info info;
    assert_int_equal(sb_ns_get_info(ns, &info), SB_OK);
    assert_int_equal(info.page_bytes, 8192);
    uint32_t u[4] = { 1, 2, 3, 4 };
    snap before;
    w_snap(w, &before);
    sb_page *p = NULL;
    assert_int_equal(sb_ns_page_alloc(ns, &p), SB_ERR_BUDGET);
    void **st = tu_state(&big, u, 4);
    size_t stored = 12345;
    assert_int_equal(sb_ns_put(ns, u, 4, (const void *const *)st, NULL, &stored),
                     SB_ERR_BUDGET);
    assert_int_equal(stored, 0);
    tu_free_state(&big, st);
    w_same(w, &before);
    /* One 4 KiB page fits. */
    assert_int_equal(put_n(w, NA, u, 4, false, SB_OK), 4);
    sb_ns_close(ns);
    world_close(w);
}

/* Regression: a refused allocation must not evict. When the unpinned pages
 * cannot make room anyway (here: an 8 KiB page of one namespace, 4 KiB
 * unpinned in another, the rest pinned), the call fails with SB_ERR_BUDGET
 * and, by the header's default promise ("a call that fails has changed
 * nothing"; for sb_ns_put: "nothing else changed"), must leave the
 * unpinned page restorable. */
typedef struct refusal {
    world *w;
    sb_ns *big;                  /* 8 KiB pages */
    sb_match *m;                 /* pins x */
} refusal;

static const tu_layout LAY_BIG = { .page_tokens = 4, .n_tensors = 2, .bpt = { 1024, 1024 },
                                   .model = "errors-big" };

/* 12 KiB budget: x's two pages pinned by a match, y's page unpinned. */
static refusal *refusal_setup(void **state)
{
    refusal *r = calloc(1, sizeof *r);
    assert_non_null(r);
    *state = r;
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.ram_bytes = 3 * 4096;
    world *w = r->w = world_open(&cfg);
    r->big = tu_ns(w->st, &LAY_BIG, "big");
    uint32_t x[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, y[4] = { 9, 9, 9, 9 };
    put_n(w, NA, x, 8, false, SB_OK);
    assert_int_equal(sb_ns_match(w->ns[NA], x, 8, &r->m), SB_OK);
    put_n(w, NA, y, 4, false, SB_OK);
    put_n(w, NA, x, 4, false, SB_OK); /* the newest commit is x's again */
    w_probe(w, NA, x, 8);
    w_probe(w, NA, y, 4);
    return r;
}

/* Runs even when the test failed, so a failure leaks nothing. */
static int refusal_teardown(void **state)
{
    refusal *r = *state;
    if (r) {
        sb_match_release(r->m);
        sb_ns_close(r->big);
        world_free(r->w);
        free(r);
        *state = NULL;
    }
    return 0;
}

static void test_budget_refusal_evicts_nothing_page_alloc(void **state)
{
    refusal *r = refusal_setup(state);
    snap before;
    w_snap(r->w, &before);
    assert_int_equal(before.s.ram_bytes, 3 * 4096);
    sb_page *p = NULL;
    assert_int_equal(sb_ns_page_alloc(r->big, &p), SB_ERR_BUDGET);
    w_same(r->w, &before); /* fails while y's page is evicted for nothing */
}

static void test_budget_refusal_evicts_nothing_put(void **state)
{
    refusal *r = refusal_setup(state);
    snap before;
    w_snap(r->w, &before);
    uint32_t u[4] = { 5, 5, 5, 5 };
    void **st = tu_state(&LAY_BIG, u, 4);
    size_t stored = 12345;
    int rc = sb_ns_put(r->big, u, 4, (const void *const *)st, NULL, &stored);
    tu_free_state(&LAY_BIG, st);
    assert_int_equal(rc, SB_ERR_BUDGET);
    assert_int_equal(stored, 0);
    w_same(r->w, &before); /* fails while y's page is evicted for nothing */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strerror_every_code),
        cmocka_unit_test(test_miss_names),
        cmocka_unit_test(test_store_open_inval),
        cmocka_unit_test(test_store_open_dir_not_directory),
        cmocka_unit_test(test_store_calls_inval),
        cmocka_unit_test(test_ns_open_inval),
        cmocka_unit_test(test_ns_open_layout),
        cmocka_unit_test(test_ns_open_page_size),
        cmocka_unit_test(test_ns_open_layout_mismatch),
        cmocka_unit_test(test_ns_info_inval),
        cmocka_unit_test(test_put_errors),
        cmocka_unit_test(test_too_many_tokens),
        cmocka_unit_test(test_match_errors),
        cmocka_unit_test(test_restore_errors),
        cmocka_unit_test(test_match_pages_errors),
        cmocka_unit_test(test_page_alloc_errors),
        cmocka_unit_test(test_page_writable_errors),
        cmocka_unit_test(test_commit_errors),
        cmocka_unit_test(test_pin_errors),
        cmocka_unit_test(test_budget_put_partial),
        cmocka_unit_test(test_budget_held_pages),
        cmocka_unit_test(test_budget_namespace),
        cmocka_unit_test(test_budget_page_over_budget),
        cmocka_unit_test_teardown(test_budget_refusal_evicts_nothing_page_alloc,
                                  refusal_teardown),
        cmocka_unit_test_teardown(test_budget_refusal_evicts_nothing_put, refusal_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
