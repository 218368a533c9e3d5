/* fuzz_gguf.c -- libFuzzer harness: the GGUF reader (runtime/gguf/gguf.h)
 * on arbitrary bytes, checked against the writer as a reference.
 *
 * Property. The reader either refuses the input with a documented code
 * (SB_ERR_FORMAT, SB_ERR_VERSION, SB_ERR_UNSUPPORTED; SB_ERR_NOMEM is
 * tolerated) or accepts it, and then:
 *   - every tensor's data lies inside the input, with the bytes its type
 *     and shape say, and every key's value is readable by the getter of
 *     its type;
 *   - re-serializing what was read with the writer (sb_rt_gguf_writer) and
 *     reading that back gives the same keys in order, the same types and
 *     values, and the same tensors (names, shapes, types, bytes).
 * The reader never reads outside the input (ASan) and never crashes.
 *
 * Input: a GGUF file, as is. Seeds: fuzz/corpus/gguf/ (gen_gguf_seeds).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "gguf/gguf_write.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FAIL(...)                                                              \
    do {                                                                       \
        fprintf(stderr, "fuzz_gguf: " __VA_ARGS__);                            \
        fputc('\n', stderr);                                                   \
        abort();                                                               \
    } while (0)

static size_t esize(uint32_t t)
{
    static const uint8_t sz[13] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };
    return t < 13 ? sz[t] : 0;
}

/* GGML's block size and bytes per block by type id (ggml.h, ggml-common.h;
 * 0: removed or undefined), written out here as the reference for the
 * reader's sizes. */
static const uint16_t ggml_size[][2] = {
    { 1, 4 }, { 1, 2 }, { 32, 18 }, { 32, 20 }, { 0, 0 }, { 0, 0 }, { 32, 22 }, { 32, 24 },
    { 32, 34 }, { 32, 36 }, { 256, 84 }, { 256, 110 }, { 256, 144 }, { 256, 176 }, { 256, 210 },
    { 256, 292 }, { 256, 66 }, { 256, 74 }, { 256, 98 }, { 256, 50 }, { 32, 18 }, { 256, 110 },
    { 256, 82 }, { 256, 136 }, { 1, 1 }, { 1, 2 }, { 1, 4 }, { 1, 8 }, { 1, 8 }, { 256, 56 },
    { 1, 2 }, { 0, 0 }, { 0, 0 }, { 0, 0 }, { 256, 54 }, { 256, 66 }, { 0, 0 }, { 0, 0 },
    { 0, 0 }, { 32, 17 }, { 64, 36 }, { 128, 18 }, { 64, 18 },
};

/* Copy key i of g (of type t) into w, checking it reads back. */
static void copy_kv(const sb_rt_gguf *g, const char *k, uint32_t t, sb_rt_gguf_writer *w)
{
    if (t == SB_RT_GGUF_STR) {
        const char *s;
        size_t n;
        if (sb_rt_gguf_get_str(g, k, &s, &n) != SB_OK)
            FAIL("string key '%s' unreadable", k);
        char *z = malloc(n + 1);
        memcpy(z, s, n);
        z[n] = 0;
        if (strlen(z) != n) { /* an embedded NUL: raw */
            uint8_t *raw = malloc(n + 8);
            uint64_t len = n;
            memcpy(raw, &len, 8);
            memcpy(raw + 8, s, n);
            sb_rt_gguf_add_raw(w, k, t, raw, n + 8);
            free(raw);
        } else {
            sb_rt_gguf_add_str(w, k, z);
        }
        free(z);
    } else if (t == SB_RT_GGUF_ARR) {
        uint32_t et;
        uint64_t n;
        const void *d;
        if (sb_rt_gguf_get_arr(g, k, &et, &n, &d) != SB_OK)
            FAIL("array key '%s' unreadable", k);
        if (et == SB_RT_GGUF_STR) {
            const char **s = malloc((n ? n : 1) * sizeof *s);
            size_t *l = malloc((n ? n : 1) * sizeof *l);
            for (uint64_t i = 0; i < n; i++)
                if (sb_rt_gguf_arr_str(g, k, i, &s[i], &l[i]) != SB_OK)
                    FAIL("'%s'[%llu] unreadable", k, (unsigned long long)i);
            sb_rt_gguf_add_arr_str(w, k, s, l, n);
            free(s);
            free(l);
        } else {
            if (!esize(et))
                FAIL("'%s': accepted element type %u", k, et);
            sb_rt_gguf_add_arr(w, k, et, d, n);
        }
    } else {
        /* scalars: the raw bytes, found through the getters' agreement */
        uint8_t raw[8] = { 0 };
        uint64_t u;
        int64_t i;
        float f;
        bool b;
        if (!esize(t))
            FAIL("'%s': accepted type %u", k, t);
        if (t == SB_RT_GGUF_F32 || t == SB_RT_GGUF_F64) {
            if (sb_rt_gguf_get_f32(g, k, &f) != SB_OK)
                FAIL("float key '%s' unreadable", k);
            double dv = f; /* an f64 comes back through f32: not compared */
            if (t == SB_RT_GGUF_F32)
                memcpy(raw, &f, 4);
            else
                memcpy(raw, &dv, 8);
        } else if (t == SB_RT_GGUF_BOOL) {
            if (sb_rt_gguf_get_bool(g, k, &b) != SB_OK)
                FAIL("bool key '%s' unreadable", k);
            raw[0] = b;
        } else if (sb_rt_gguf_get_i64(g, k, &i) == SB_OK) {
            memcpy(raw, &i, 8);
        } else if (sb_rt_gguf_get_u64(g, k, &u) == SB_OK) {
            memcpy(raw, &u, 8);
        } else {
            FAIL("integer key '%s' unreadable", k);
        }
        sb_rt_gguf_add_raw(w, k, t, raw, esize(t));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sb_rt_gguf *g = NULL;
    sb_rt_err err = { 0 };
    int rc = sb_rt_gguf_open_mem(data, size, "fuzz.gguf", &g, &err);
    if (rc != SB_OK) {
        if (rc != SB_ERR_FORMAT && rc != SB_ERR_VERSION && rc != SB_ERR_UNSUPPORTED &&
            rc != SB_ERR_NOMEM)
            FAIL("undocumented refusal %d", rc);
        if (!err.msg[0] || !strstr(err.msg, "fuzz.gguf"))
            FAIL("refusal %d without a message naming the file", rc);
        return 0;
    }
    sb_rt_gguf_writer *w = sb_rt_gguf_writer_new();
    if (!w)
        FAIL("out of memory");
    size_t nkv = sb_rt_gguf_n_kv(g), nt = sb_rt_gguf_n_tensors(g);
    for (size_t i = 0; i < nkv; i++) {
        uint32_t t;
        const char *k = sb_rt_gguf_kv_key(g, i, &t);
        if (!k)
            FAIL("key %zu missing", i);
        copy_kv(g, k, t, w);
    }
    for (size_t i = 0; i < nt; i++) {
        const sb_rt_gguf_tensor *t = sb_rt_gguf_tensor_at(g, i);
        const uint8_t *p = t->data;
        if (p < data || p > data + size || t->bytes > (size_t)(data + size - p))
            FAIL("tensor '%s' outside the input", t->name);
        uint64_t count = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        if (t->type >= sizeof ggml_size / sizeof *ggml_size || !ggml_size[t->type][0] ||
            t->ne[0] % ggml_size[t->type][0])
            FAIL("tensor '%s': accepted type %u with rows of %llu", t->name, t->type,
                 (unsigned long long)t->ne[0]);
        uint64_t want = count / ggml_size[t->type][0] * ggml_size[t->type][1];
        if (t->bytes != want)
            FAIL("tensor '%s': %llu bytes for its shape, %llu said", t->name,
                 (unsigned long long)want, (unsigned long long)t->bytes);
        if (sb_rt_gguf_find_tensor(g, t->name) != t)
            FAIL("tensor '%s' not found by name", t->name);
        sb_rt_gguf_add_tensor(w, t->name, t->n_dims, t->ne, t->type, t->data, t->bytes);
    }
    uint8_t *b;
    size_t len;
    if (sb_rt_gguf_write_mem(w, &b, &len) != SB_OK)
        FAIL("re-serializing failed");
    sb_rt_gguf *h = NULL;
    if (sb_rt_gguf_open_mem(b, len, "again.gguf", &h, &err) != SB_OK)
        FAIL("the re-serialized file is refused: %s", err.msg);
    if (sb_rt_gguf_n_tensors(h) != nt)
        FAIL("tensor count changed");
    for (size_t i = 0; i < sb_rt_gguf_n_kv(h); i++) {
        uint32_t t1, t2;
        const char *k = sb_rt_gguf_kv_key(h, i, &t2);
        const char *k0 = sb_rt_gguf_kv_key(g, i, &t1);
        if (!k0 || strcmp(k, k0) || t1 != t2)
            FAIL("key %zu changed", i);
        uint64_t u1, u2;
        if (sb_rt_gguf_get_u64(g, k, &u1) == SB_OK &&
            (sb_rt_gguf_get_u64(h, k, &u2) != SB_OK || u1 != u2))
            FAIL("value of '%s' changed", k);
        const char *s1, *s2;
        size_t l1, l2;
        if (sb_rt_gguf_get_str(g, k, &s1, &l1) == SB_OK &&
            (sb_rt_gguf_get_str(h, k, &s2, &l2) != SB_OK || l1 != l2 || memcmp(s1, s2, l1)))
            FAIL("string '%s' changed", k);
    }
    for (size_t i = 0; i < nt; i++) {
        const sb_rt_gguf_tensor *a = sb_rt_gguf_tensor_at(g, i), *c = sb_rt_gguf_tensor_at(h, i);
        if (strcmp(a->name, c->name) || a->type != c->type || a->n_dims != c->n_dims ||
            memcmp(a->ne, c->ne, sizeof a->ne) || a->bytes != c->bytes ||
            memcmp(a->data, c->data, a->bytes))
            FAIL("tensor %zu ('%s') changed", i, a->name);
    }
    sb_rt_gguf_close(h);
    free(b);
    sb_rt_gguf_writer_free(w);
    sb_rt_gguf_close(g);
    return 0;
}
