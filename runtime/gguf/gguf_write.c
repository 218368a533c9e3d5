/* gguf_write.c -- building GGUF v3 files (gguf_write.h). */
#include "gguf/gguf_write.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "snapbank.h"

typedef struct wtensor {
    char *name;
    uint32_t n_dims, type;
    uint64_t ne[4];
    const void *data;
    uint64_t bytes;
} wtensor;

struct sb_rt_gguf_writer {
    uint8_t *kv;               /* encoded key/values */
    size_t kv_len, kv_cap;
    uint64_t n_kv;
    wtensor *t;
    size_t n_t, t_cap;
    uint32_t align;
    bool nomem;
};

sb_rt_gguf_writer *sb_rt_gguf_writer_new(void)
{
    sb_rt_gguf_writer *w = calloc(1, sizeof *w);
    if (w)
        w->align = 32;
    return w;
}

void sb_rt_gguf_writer_free(sb_rt_gguf_writer *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n_t; i++)
        free(w->t[i].name);
    free(w->t);
    free(w->kv);
    free(w);
}

static void put(sb_rt_gguf_writer *w, const void *p, size_t n)
{
    if (w->nomem)
        return;
    if (w->kv_len + n > w->kv_cap) {
        size_t cap = w->kv_cap ? w->kv_cap : 4096;
        while (cap < w->kv_len + n)
            cap *= 2;
        uint8_t *q = realloc(w->kv, cap);
        if (!q) {
            w->nomem = true;
            return;
        }
        w->kv = q;
        w->kv_cap = cap;
    }
    if (n)
        memcpy(w->kv + w->kv_len, p, n);
    w->kv_len += n;
}

static void put_str(sb_rt_gguf_writer *w, const char *s, size_t n)
{
    uint64_t len = n;
    put(w, &len, 8);
    put(w, s, n);
}

static void key(sb_rt_gguf_writer *w, const char *k, uint32_t type)
{
    put_str(w, k, strlen(k));
    put(w, &type, 4);
    w->n_kv++;
}

void sb_rt_gguf_add_raw(sb_rt_gguf_writer *w, const char *k, uint32_t type, const void *val,
                        size_t bytes)
{
    /* The file's alignment is what its general.alignment says, however the
     * key was added (a reader lays the data out by it). */
    if (!strcmp(k, "general.alignment") && type == SB_RT_GGUF_U32 && bytes == 4) {
        uint32_t v;
        memcpy(&v, val, 4);
        if (v && !(v & (v - 1)))
            w->align = v;
    }
    key(w, k, type);
    put(w, val, bytes);
}

void sb_rt_gguf_add_u32(sb_rt_gguf_writer *w, const char *k, uint32_t v)
{
    sb_rt_gguf_add_raw(w, k, SB_RT_GGUF_U32, &v, 4);
}

void sb_rt_gguf_add_i32(sb_rt_gguf_writer *w, const char *k, int32_t v)
{
    sb_rt_gguf_add_raw(w, k, SB_RT_GGUF_I32, &v, 4);
}

void sb_rt_gguf_add_u64(sb_rt_gguf_writer *w, const char *k, uint64_t v)
{
    sb_rt_gguf_add_raw(w, k, SB_RT_GGUF_U64, &v, 8);
}

void sb_rt_gguf_add_f32(sb_rt_gguf_writer *w, const char *k, float v)
{
    sb_rt_gguf_add_raw(w, k, SB_RT_GGUF_F32, &v, 4);
}

void sb_rt_gguf_add_bool(sb_rt_gguf_writer *w, const char *k, bool v)
{
    uint8_t b = v;
    sb_rt_gguf_add_raw(w, k, SB_RT_GGUF_BOOL, &b, 1);
}

void sb_rt_gguf_add_str(sb_rt_gguf_writer *w, const char *k, const char *s)
{
    key(w, k, SB_RT_GGUF_STR);
    put_str(w, s, strlen(s));
}

static size_t elem_size(uint32_t t)
{
    static const uint8_t sz[13] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };
    return t < 13 ? sz[t] : 0;
}

void sb_rt_gguf_add_arr(sb_rt_gguf_writer *w, const char *k, uint32_t type, const void *data,
                        uint64_t n)
{
    key(w, k, SB_RT_GGUF_ARR);
    put(w, &type, 4);
    put(w, &n, 8);
    put(w, data, (size_t)(n * elem_size(type)));
}

void sb_rt_gguf_add_arr_str(sb_rt_gguf_writer *w, const char *k, const char *const *s,
                            const size_t *len, uint64_t n)
{
    uint32_t type = SB_RT_GGUF_STR;
    key(w, k, SB_RT_GGUF_ARR);
    put(w, &type, 4);
    put(w, &n, 8);
    for (uint64_t i = 0; i < n; i++)
        put_str(w, s[i], len[i]);
}

void sb_rt_gguf_add_tensor(sb_rt_gguf_writer *w, const char *name, uint32_t n_dims,
                           const uint64_t *ne, uint32_t type, const void *data, uint64_t bytes)
{
    if (w->nomem)
        return;
    if (w->n_t == w->t_cap) {
        size_t cap = w->t_cap ? 2 * w->t_cap : 64;
        wtensor *t = realloc(w->t, cap * sizeof *t);
        if (!t) {
            w->nomem = true;
            return;
        }
        w->t = t;
        w->t_cap = cap;
    }
    wtensor *t = &w->t[w->n_t];
    memset(t, 0, sizeof *t);
    if (!(t->name = strdup(name))) {
        w->nomem = true;
        return;
    }
    t->n_dims = n_dims > 4 ? 4 : n_dims;
    for (uint32_t d = 0; d < t->n_dims; d++)
        t->ne[d] = ne[d];
    t->type = type;
    t->data = data;
    t->bytes = bytes;
    w->n_t++;
}

static uint64_t up(uint64_t x, uint64_t a)
{
    return (x + a - 1) / a * a;
}

int sb_rt_gguf_write_mem(const sb_rt_gguf_writer *w, uint8_t **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    if (w->nomem)
        return SB_ERR_NOMEM;
    uint64_t head = 24 + w->kv_len;
    for (size_t i = 0; i < w->n_t; i++)
        head += 8 + strlen(w->t[i].name) + 4 + 8ull * w->t[i].n_dims + 4 + 8;
    uint64_t data = up(head, w->align), end = data;
    for (size_t i = 0; i < w->n_t; i++)
        end = up(end, w->align) + w->t[i].bytes;
    uint8_t *b = calloc(1, end ? end : 1);
    if (!b)
        return SB_ERR_NOMEM;
    uint8_t *p = b;
    uint32_t v = SB_RT_GGUF_VERSION;
    uint64_t nt = w->n_t;
    memcpy(p, "GGUF", 4);
    memcpy(p + 4, &v, 4);
    memcpy(p + 8, &nt, 8);
    memcpy(p + 16, &w->n_kv, 8);
    p += 24;
    if (w->kv_len)
        memcpy(p, w->kv, w->kv_len);
    p += w->kv_len;
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        uint64_t n = strlen(t->name);
        memcpy(p, &n, 8);
        memcpy(p + 8, t->name, n);
        p += 8 + n;
        memcpy(p, &t->n_dims, 4);
        p += 4;
        for (uint32_t d = 0; d < t->n_dims; d++, p += 8)
            memcpy(p, &t->ne[d], 8);
        memcpy(p, &t->type, 4);
        memcpy(p + 4, &off, 8);
        p += 12;
        if (t->bytes)
            memcpy(b + data + off, t->data, t->bytes);
        off = up(off + t->bytes, w->align);
    }
    *out = b;
    *len = end;
    return SB_OK;
}

int sb_rt_gguf_write_file(const sb_rt_gguf_writer *w, const char *path, sb_rt_err *err)
{
    uint8_t *b;
    size_t len;
    int rc = sb_rt_gguf_write_mem(w, &b, &len);
    if (rc != SB_OK)
        return sb_rt_fail(err, rc, "%s: out of memory", path);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    bool ok = f && fwrite(b, 1, len, f) == len;
    if (f && fclose(f) != 0)
        ok = false;
    free(b);
    if (!ok || rename(tmp, path) != 0) {
        int e = errno;
        remove(tmp);
        return sb_rt_fail(err, SB_ERR_IO, "%s: cannot write: %s", path, strerror(e));
    }
    return SB_OK;
}
