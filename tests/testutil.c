/* testutil.c -- shared helpers for the cmocka tests. */
#include "testutil.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t tu_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

sb_store *tu_store(uint64_t ram_bytes)
{
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.min_prefix_tokens = 1; /* short test sequences are written too */
    if (ram_bytes)
        cfg.ram_bytes = ram_bytes;
    sb_store *st = NULL;
    assert_int_equal(sb_store_open(&cfg, &st), SB_OK);
    assert_non_null(st);
    return st;
}

sb_ns *tu_ns(sb_store *st, const tu_layout *l, const char *scope)
{
    const char *model = l->model ? l->model : "test-model";
    sb_layout lay = { .model_id = model, .model_id_bytes = strlen(model),
                      .page_tokens = l->page_tokens, .n_tensors = l->n_tensors,
                      .bytes_per_token = l->bpt, .point_bytes = l->point_bytes,
                      .flags = l->flags };
    sb_ns *ns = NULL;
    assert_int_equal(sb_ns_open(st, &lay, scope, scope ? strlen(scope) : 0, &ns), SB_OK);
    assert_non_null(ns);
    return ns;
}

void tu_tokens(uint64_t *rng, uint32_t *out, size_t n, uint32_t vocab)
{
    for (size_t i = 0; i < n; i++)
        out[i] = (uint32_t)(tu_rand(rng) % vocab);
}

void tu_seq(uint32_t *out, size_t n, uint32_t seed, uint32_t stride)
{
    for (size_t i = 0; i < n; i++)
        out[i] = seed * stride + (uint32_t)i;
}

static uint64_t model_seed(const tu_layout *l)
{
    const char *m = l->model ? l->model : "test-model";
    uint64_t h = 1469598103934665603ull;
    for (; *m; m++)
        h = (h ^ (uint8_t)*m) * 1099511628211ull;
    return h;
}

static void fill(uint8_t *dst, size_t bytes, uint64_t seed)
{
    for (size_t i = 0; i < bytes; i += 8) {
        uint64_t v = tu_rand(&seed);
        memcpy(dst + i, &v, bytes - i < 8 ? bytes - i : 8);
    }
}

void **tu_state(const tu_layout *l, const uint32_t *tokens, size_t n)
{
    void **bufs = calloc(l->n_tensors, sizeof *bufs);
    assert_non_null(bufs);
    for (uint32_t t = 0; t < l->n_tensors; t++) {
        bufs[t] = malloc(n * l->bpt[t] + 1);
        assert_non_null(bufs[t]);
    }
    uint64_t h = model_seed(l);
    for (size_t i = 0; i < n; i++) {
        uint64_t s = h ^ tokens[i];
        h = tu_rand(&s);
        for (uint32_t t = 0; t < l->n_tensors; t++)
            fill((uint8_t *)bufs[t] + i * l->bpt[t], l->bpt[t], h + t);
    }
    return bufs;
}

void tu_free_state(const tu_layout *l, void **bufs)
{
    if (!bufs)
        return;
    for (uint32_t t = 0; t < l->n_tensors; t++)
        free(bufs[t]);
    free(bufs);
}

void *tu_point(const tu_layout *l, const uint32_t *tokens, size_t n)
{
    uint8_t *p = malloc(l->point_bytes);
    assert_non_null(p);
    uint64_t h = model_seed(l) ^ 0x706f696e74ull;
    for (size_t i = 0; i < n; i++) {
        uint64_t s = h ^ tokens[i];
        h = tu_rand(&s);
    }
    fill(p, l->point_bytes, h ^ n);
    return p;
}

void **tu_bufs(const tu_layout *l, size_t n)
{
    void **bufs = calloc(l->n_tensors, sizeof *bufs);
    assert_non_null(bufs);
    for (uint32_t t = 0; t < l->n_tensors; t++) {
        bufs[t] = calloc(1, n * l->bpt[t] + 1);
        assert_non_null(bufs[t]);
    }
    return bufs;
}

bool tu_state_equal(const tu_layout *l, const uint32_t *tokens, size_t n, void **bufs)
{
    void **want = tu_state(l, tokens, n);
    bool eq = true;
    for (uint32_t t = 0; t < l->n_tensors && eq; t++)
        eq = memcmp(want[t], bufs[t], n * l->bpt[t]) == 0;
    tu_free_state(l, want);
    return eq;
}

size_t tu_match_len(sb_ns *ns, const uint32_t *tokens, size_t n)
{
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, tokens, n, &m), SB_OK);
    sb_match_info info;
    assert_int_equal(sb_match_get_info(m, &info), SB_OK);
    sb_match_release(m);
    return info.n_tokens;
}

size_t tu_match_verify(sb_ns *ns, const tu_layout *l, const uint32_t *tokens, size_t n)
{
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, tokens, n, &m), SB_OK);
    sb_match_info info;
    assert_int_equal(sb_match_get_info(m, &info), SB_OK);
    size_t L = info.n_tokens;
    void **bufs = tu_bufs(l, L ? L : 1);
    assert_int_equal(sb_match_restore(m, L, bufs, NULL), SB_OK);
    assert_true(tu_state_equal(l, tokens, L, bufs));
    tu_free_state(l, bufs);
    sb_match_release(m);
    return L;
}

size_t tu_restore_exact(sb_ns *ns, const tu_layout *l, const uint32_t *tokens, size_t n,
                        bool *damaged)
{
    sb_match *m = NULL;
    assert_int_equal(sb_ns_match(ns, tokens, n, &m), SB_OK);
    sb_match_info info;
    assert_int_equal(sb_match_get_info(m, &info), SB_OK);
    size_t L = info.n_tokens;
    assert_true(L <= n);
    if (L && (l->flags & SB_LAYOUT_POINT_REQUIRED))
        assert_true(info.has_point);
    void **bufs = tu_bufs(l, L ? L : 1);
    uint8_t *point = malloc(l->point_bytes ? l->point_bytes : 1);
    assert_non_null(point);
    bool has_point = info.has_point;
    int rc = sb_match_restore(m, L, bufs, has_point ? point : NULL);
    if (rc != SB_OK) {
        if (rc != SB_ERR_CORRUPT && rc != SB_ERR_IO) {
            fprintf(stderr, "restore of %zu tokens: %s\n", L, sb_strerror(rc));
            fail();
        }
        assert_int_equal(sb_match_get_info(m, &info), SB_OK);
        assert_true(info.miss == SB_MISS_CORRUPT || info.miss == SB_MISS_IO);
        assert_true(info.n_tokens < L || (info.n_tokens == L && !info.has_point));
        L = info.n_tokens;
        has_point = false;
        if (damaged)
            *damaged = true;
    }
    if (!tu_state_equal(l, tokens, L, bufs)) {
        fprintf(stderr, "restored bytes of a %zu-token prefix are wrong\n", L);
        fail();
    }
    if (has_point) {
        void *want = tu_point(l, tokens, L);
        assert_memory_equal(point, want, l->point_bytes);
        free(want);
    }
    free(point);
    tu_free_state(l, bufs);
    sb_match_release(m);
    return L;
}

void tu_put(sb_ns *ns, const tu_layout *l, const uint32_t *tokens, size_t n, bool with_point,
            int want)
{
    void **state = tu_state(l, tokens, n);
    void *point = with_point ? tu_point(l, tokens, n) : NULL;
    size_t stored = 0;
    assert_int_equal(sb_ns_put(ns, tokens, n, (const void *const *)state, point, &stored),
                     want);
    if (want == SB_OK)
        assert_int_equal(stored, n);
    free(point);
    tu_free_state(l, state);
}

int tu_put_ex(sb_ns *ns, const tu_layout *l, const uint32_t *tokens, size_t n, bool with_point,
              size_t *stored, sb_write_outcome *oc)
{
    void **state = tu_state(l, tokens, n);
    void *point = with_point ? tu_point(l, tokens, n) : NULL;
    int rc = sb_ns_put_ex(ns, tokens, n, (const void *const *)state, point, stored, oc);
    free(point);
    tu_free_state(l, state);
    return rc;
}

sb_config tu_small_disk_config(void)
{
    sb_config c;
    sb_config_default(&c);
    c.min_prefix_tokens = 1; /* short test sequences are written too */
    c.segment_bytes = 64 << 10;
    c.disk_bytes = 64 << 20;
    c.queue_depth = 4;
    c.sync_interval_ms = 5;
    c.ram_bytes = 16 << 20;
    return c;
}

sb_store *tu_store_pages(uint64_t ram_pages)
{
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.min_prefix_tokens = 1; /* short test sequences are written too */
    cfg.ram_pages = ram_pages;
    sb_store *st = NULL;
    assert_int_equal(sb_store_open(&cfg, &st), SB_OK);
    return st;
}

void tu_fill_range(sb_ns *ns, const tu_layout *l, const uint32_t *tok, size_t from, size_t to,
                   sb_page **pages)
{
    size_t pt = l->page_tokens;
    void **state = tu_state(l, tok, to);
    for (size_t i = from; i < to; i++) {
        uint8_t *d = sb_page_data(pages[i / pt]);
        for (uint32_t t = 0; t < l->n_tensors; t++)
            memcpy(d + sb_ns_tensor_offset(ns, t) + (i % pt) * l->bpt[t],
                   (uint8_t *)state[t] + i * l->bpt[t], l->bpt[t]);
    }
    tu_free_state(l, state);
}

bool tu_page_holds(sb_ns *ns, const tu_layout *l, sb_page *p, const uint32_t *tok, size_t r,
                   size_t k)
{
    size_t pt = l->page_tokens;
    void **state = tu_state(l, tok, r * pt + k);
    const uint8_t *d = sb_page_data(p);
    bool eq = true;
    for (uint32_t t = 0; t < l->n_tensors && eq; t++)
        eq = memcmp(d + sb_ns_tensor_offset(ns, t), (uint8_t *)state[t] + r * pt * l->bpt[t],
                    k * l->bpt[t]) == 0;
    tu_free_state(l, state);
    return eq;
}

sb_stats tu_stats(sb_store *st)
{
    sb_stats s;
    assert_int_equal(sb_store_stats(st, &s), SB_OK);
    return s;
}

void tu_check(sb_store *st)
{
    assert_int_equal(sb_store_check(st), SB_OK);
}

void tu_scratch_dir(char *buf, size_t n, const char *name)
{
    assert_true((size_t)snprintf(buf, n, "/var/tmp/snapbank-test-%s-XXXXXX", name) < n);
    assert_non_null(mkdtemp(buf));
}

void tu_remove_dir(const char *path)
{
    char cmd[512];
    assert_true((size_t)snprintf(cmd, sizeof cmd, "rm -rf '%s'", path) < sizeof cmd);
    assert_int_equal(system(cmd), 0);
}

uint64_t tu_fake_clock(void *ctx)
{
    return atomic_load((_Atomic uint64_t *)ctx);
}
