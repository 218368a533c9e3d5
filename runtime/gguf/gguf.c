/* gguf.c -- the GGUF v3 reader (gguf.h). Parsing walks a cursor over the
 * buffer; every read is bounds-checked first, every count is compared with
 * the bytes left before it sizes an allocation. */
#define _DEFAULT_SOURCE /* MAP_* */
#include "gguf/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/le.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "snapbank.h"

typedef struct kv {
    char *key;                 /* NUL-terminated copy */
    uint32_t type;
    const uint8_t *val;        /* the value's bytes in the buffer */
    uint32_t arr_type;         /* arrays: element type and count */
    uint64_t arr_n;
    uint64_t *str_off;         /* string arrays: offset of each element's
                                * length field, owned */
} kv;

struct sb_rt_gguf {
    const uint8_t *buf;
    size_t len;
    void *map;                 /* mmap of the file, or NULL */
    char name[256];
    kv *kv;
    size_t n_kv;
    sb_rt_gguf_tensor *t;
    size_t n_t;
};

typedef struct cur {
    const uint8_t *p;
    size_t len, off;
    const char *name;
    sb_rt_err *err;
} cur;

#define BAD(c, ...) bad(c, SB_ERR_FORMAT, __VA_ARGS__)

static int bad(cur *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int bad(cur *c, int code, const char *fmt, ...)
{
    char what[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return sb_rt_fail(c->err, code, "%s: offset %zu: %s", c->name, c->off, what);
}

static int need(cur *c, uint64_t n, const char *what)
{
    if (n > c->len - c->off)
        return BAD(c, "%s runs past the end of the file (%" PRIu64 " bytes needed, %zu left)",
                   what, n, c->len - c->off);
    return SB_OK;
}

static int rd32(cur *c, uint32_t *v, const char *what)
{
    int rc = need(c, 4, what);
    if (rc == SB_OK) {
        *v = sb_rt_get_le32(c->p + c->off);
        c->off += 4;
    }
    return rc;
}

static int rd64(cur *c, uint64_t *v, const char *what)
{
    int rc = need(c, 8, what);
    if (rc == SB_OK) {
        *v = sb_rt_get_le64(c->p + c->off);
        c->off += 8;
    }
    return rc;
}

static int rdstr(cur *c, const char **s, uint64_t *n, const char *what)
{
    int rc = rd64(c, n, what);
    if (rc == SB_OK && (rc = need(c, *n, what)) == SB_OK) {
        *s = (const char *)c->p + c->off;
        c->off += (size_t)*n;
    }
    return rc;
}

static size_t scalar_size(uint32_t t)
{
    static const uint8_t sz[13] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };
    return t < 13 ? sz[t] : 0;
}

/* Parse a value of type t at the cursor into e (when not NULL). */
static int value(cur *c, uint32_t t, kv *e, const char *key)
{
    if (e)
        e->val = c->p + c->off;
    if (t == SB_RT_GGUF_STR) {
        const char *s;
        uint64_t n;
        return rdstr(c, &s, &n, "a string value");
    }
    if (t == SB_RT_GGUF_ARR) {
        uint32_t et;
        uint64_t n;
        int rc;
        if ((rc = rd32(c, &et, "an array's type")) || (rc = rd64(c, &n, "an array's count")))
            return rc;
        if (et == SB_RT_GGUF_ARR)
            return bad(c, SB_ERR_UNSUPPORTED, "key '%s': arrays of arrays are not supported", key);
        if (et != SB_RT_GGUF_STR && !scalar_size(et))
            return BAD(c, "key '%s': unknown array element type %" PRIu32, key, et);
        size_t esz = et == SB_RT_GGUF_STR ? 8 : scalar_size(et);
        if (n > (c->len - c->off) / esz)
            return BAD(c, "key '%s': array count %" PRIu64 " cannot fit in the file", key, n);
        if (e) {
            e->arr_type = et;
            e->arr_n = n;
            e->val = c->p + c->off;
        }
        if (et != SB_RT_GGUF_STR) {
            for (uint64_t i = 0; et == SB_RT_GGUF_BOOL && i < n; i++)
                if (c->p[c->off + i] > 1)
                    return BAD(c, "key '%s': element %" PRIu64 " is a bool of value %u", key, i,
                               c->p[c->off + i]);
            c->off += (size_t)(n * esz);
            return SB_OK;
        }
        if (e && !(e->str_off = malloc((n ? n : 1) * sizeof *e->str_off)))
            return bad(c, SB_ERR_NOMEM, "out of memory");
        for (uint64_t i = 0; i < n; i++) {
            if (e)
                e->str_off[i] = c->off;
            const char *s;
            uint64_t len;
            if ((rc = rdstr(c, &s, &len, "a string in an array")))
                return rc;
        }
        return SB_OK;
    }
    if (!scalar_size(t))
        return BAD(c, "key '%s': unknown value type %" PRIu32, key, t);
    int rc = need(c, scalar_size(t), "a value");
    if (rc == SB_OK && t == SB_RT_GGUF_BOOL && c->p[c->off] > 1)
        return BAD(c, "key '%s' is a bool of value %u (0 or 1)", key, c->p[c->off]);
    if (rc == SB_OK)
        c->off += scalar_size(t);
    return rc;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A duplicate among n names (sorted copy); returns it or NULL. */
static const char *duplicate(const char **names, size_t n)
{
    qsort(names, n, sizeof *names, name_cmp);
    for (size_t i = 1; i < n; i++)
        if (!strcmp(names[i - 1], names[i]))
            return names[i];
    return NULL;
}

static int off_cmp(const void *a, const void *b)
{
    const sb_rt_gguf_tensor *x = *(const sb_rt_gguf_tensor *const *)a,
                            *y = *(const sb_rt_gguf_tensor *const *)b;
    return x->data < y->data ? -1 : x->data > y->data;
}

static char *copy_name(const char *s, uint64_t n)
{
    char *k = malloc((size_t)n + 1);
    if (k) {
        memcpy(k, s, (size_t)n);
        k[n] = '\0';
    }
    return k;
}

static int parse(sb_rt_gguf *g, sb_rt_err *err)
{
    cur c = { g->buf, g->len, 0, g->name, err };
    uint32_t magic, version;
    uint64_t n_t, n_kv;
    int rc;
    if (g->len < 4 || memcmp(g->buf, "GGUF", 4))
        return BAD(&c, "not a GGUF file (bad magic)");
    c.off = 4;
    if ((rc = rd32(&c, &version, "the version")))
        return rc;
    (void)magic;
    if (version != SB_RT_GGUF_VERSION)
        return sb_rt_fail(err, SB_ERR_VERSION, "%s: GGUF version %" PRIu32 " (only %u is read)",
                          g->name, version, SB_RT_GGUF_VERSION);
    if ((rc = rd64(&c, &n_t, "the tensor count")) || (rc = rd64(&c, &n_kv, "the key count")))
        return rc;
    /* a key/value takes at least 12 bytes, a tensor info at least 28 */
    if (n_kv > (g->len - c.off) / 12)
        return BAD(&c, "key count %" PRIu64 " cannot fit in the file", n_kv);
    if (n_t > (g->len - c.off) / 28)
        return BAD(&c, "tensor count %" PRIu64 " cannot fit in the file", n_t);
    g->kv = calloc(n_kv ? n_kv : 1, sizeof *g->kv);
    g->t = calloc(n_t ? n_t : 1, sizeof *g->t);
    if (!g->kv || !g->t)
        return bad(&c, SB_ERR_NOMEM, "out of memory");
    uint64_t align = 32;
    for (uint64_t i = 0; i < n_kv; i++) {
        const char *s;
        uint64_t n;
        kv *e = &g->kv[i];
        if ((rc = rdstr(&c, &s, &n, "a key")))
            return rc;
        if (!(e->key = copy_name(s, n)))
            return bad(&c, SB_ERR_NOMEM, "out of memory");
        g->n_kv++;
        if (strlen(e->key) != n)
            return BAD(&c, "a key contains a NUL byte");
        if ((rc = rd32(&c, &e->type, "a value type")) || (rc = value(&c, e->type, e, e->key)))
            return rc;
        if (!strcmp(e->key, "general.alignment")) {
            uint32_t a;
            if (e->type != SB_RT_GGUF_U32)
                return BAD(&c, "general.alignment must be a u32");
            memcpy(&a, e->val, 4);
            if (a == 0 || (a & (a - 1)) || a > (1u << 30))
                return BAD(&c, "general.alignment %" PRIu32 " is not a power of two", a);
            align = a;
        }
    }
    for (uint64_t i = 0; i < n_t; i++) {
        sb_rt_gguf_tensor *t = &g->t[i];
        const char *s;
        uint64_t n, off;
        if ((rc = rdstr(&c, &s, &n, "a tensor name")))
            return rc;
        if (!(t->name = copy_name(s, n)))
            return bad(&c, SB_ERR_NOMEM, "out of memory");
        g->n_t++;
        if (strlen(t->name) != n)
            return BAD(&c, "a tensor name contains a NUL byte");
        if ((rc = rd32(&c, &t->n_dims, "a tensor's dimension count")))
            return rc;
        if (t->n_dims < 1 || t->n_dims > SB_RT_GGUF_MAX_DIMS)
            return BAD(&c, "tensor '%s' has %" PRIu32 " dimensions (1 to 4)", t->name, t->n_dims);
        uint64_t count = 1;
        for (uint32_t d = 0; d < 4; d++) {
            t->ne[d] = 1;
            if (d < t->n_dims && (rc = rd64(&c, &t->ne[d], "a tensor dimension")))
                return rc;
            if (t->ne[d] == 0 || t->ne[d] > (UINT64_MAX >> 8) / count)
                return BAD(&c, "tensor '%s': dimension %" PRIu32 " is %" PRIu64
                           " (zero, or the element count overflows)", t->name, d, t->ne[d]);
            count *= t->ne[d];
        }
        if ((rc = rd32(&c, &t->type, "a tensor type")) || (rc = rd64(&c, &off, "a tensor offset")))
            return rc;
        size_t blk, bb;
        if (!sb_rt_ggml_type_size(t->type, &blk, &bb))
            return bad(&c, SB_ERR_UNSUPPORTED, "tensor '%s' has type %" PRIu32 " (%s), which "
                       "GGML does not define", t->name, t->type, sb_rt_ggml_type_name(t->type));
        if (t->ne[0] % blk)
            return BAD(&c, "tensor '%s': %s rows of %" PRIu64 " values (a multiple of %zu)",
                       t->name, sb_rt_ggml_type_name(t->type), t->ne[0], blk);
        if (count / blk > UINT64_MAX / 2 / bb)
            return BAD(&c, "tensor '%s': its size overflows", t->name);
        t->bytes = count / blk * bb;
        if (off % align)
            return BAD(&c, "tensor '%s': offset %" PRIu64 " is not a multiple of the alignment %"
                       PRIu64, t->name, off, align);
        t->data = (const void *)(uintptr_t)off; /* relative until the data section is known */
    }
    uint64_t data = (c.off + align - 1) / align * align;
    for (size_t i = 0; i < g->n_t; i++) {
        sb_rt_gguf_tensor *t = &g->t[i];
        uint64_t off = (uint64_t)(uintptr_t)t->data;
        if (data > g->len || off > g->len - data || t->bytes > g->len - data - off) {
            c.off = (size_t)(data < g->len ? data : g->len);
            return BAD(&c, "tensor '%s': data at %" PRIu64 " + %" PRIu64 " bytes runs past the "
                       "end of the file (size %zu)", t->name, data + off, t->bytes, g->len);
        }
        t->data = g->buf + data + off;
    }
    /* unique keys and names; tensors do not overlap */
    size_t most = g->n_kv > g->n_t ? g->n_kv : g->n_t;
    const char **names = malloc((most ? most : 1) * sizeof *names);
    const sb_rt_gguf_tensor **by = malloc((g->n_t ? g->n_t : 1) * sizeof *by);
    rc = SB_OK;
    if (!names || !by) {
        rc = bad(&c, SB_ERR_NOMEM, "out of memory");
    } else {
        const char *dup;
        for (size_t i = 0; i < g->n_kv; i++)
            names[i] = g->kv[i].key;
        if ((dup = duplicate(names, g->n_kv)))
            rc = BAD(&c, "key '%s' appears twice", dup);
        for (size_t i = 0; rc == SB_OK && i < g->n_t; i++)
            names[i] = g->t[i].name;
        if (rc == SB_OK && (dup = duplicate(names, g->n_t)))
            rc = BAD(&c, "tensor name '%s' appears twice", dup);
        for (size_t i = 0; i < g->n_t; i++)
            by[i] = &g->t[i];
        qsort(by, g->n_t, sizeof *by, off_cmp);
        for (size_t i = 1; rc == SB_OK && i < g->n_t; i++)
            if ((const uint8_t *)by[i - 1]->data + by[i - 1]->bytes > (const uint8_t *)by[i]->data)
                rc = BAD(&c, "tensors '%s' and '%s' overlap", by[i - 1]->name, by[i]->name);
    }
    free(names);
    free(by);
    return rc;
}

void sb_rt_gguf_close(sb_rt_gguf *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->n_kv; i++) {
        free(g->kv[i].key);
        free(g->kv[i].str_off);
    }
    for (size_t i = 0; i < g->n_t; i++)
        free((char *)(uintptr_t)g->t[i].name);
    free(g->kv);
    free(g->t);
    if (g->map)
        munmap(g->map, g->len);
    free(g);
}

int sb_rt_gguf_open_mem(const void *buf, size_t len, const char *name, sb_rt_gguf **out,
                        sb_rt_err *err)
{
    if (!out || (!buf && len))
        return sb_rt_fail(err, SB_ERR_INVAL, "sb_rt_gguf_open_mem: NULL argument");
    *out = NULL;
    sb_rt_gguf *g = calloc(1, sizeof *g);
    if (!g)
        return sb_rt_fail(err, SB_ERR_NOMEM, "%s: out of memory", name ? name : "(memory)");
    g->buf = buf;
    g->len = len;
    snprintf(g->name, sizeof g->name, "%s", name ? name : "(memory)");
    int rc = parse(g, err);
    if (rc != SB_OK) {
        sb_rt_gguf_close(g);
        return rc;
    }
    *out = g;
    return SB_OK;
}

int sb_rt_gguf_open(const char *path, sb_rt_gguf **out, sb_rt_err *err)
{
    if (!path || !out)
        return sb_rt_fail(err, SB_ERR_INVAL, "sb_rt_gguf_open: NULL argument");
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return sb_rt_fail(err, SB_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sbuf;
    if (fstat(fd, &sbuf) != 0 || !S_ISREG(sbuf.st_mode) || sbuf.st_size < 0) {
        close(fd);
        return sb_rt_fail(err, SB_ERR_IO, "%s: not a regular file", path);
    }
    size_t len = (size_t)sbuf.st_size;
    void *map = NULL;
    if (len) {
        map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            close(fd);
            return sb_rt_fail(err, SB_ERR_IO, "%s: cannot map: %s", path, strerror(errno));
        }
    }
    close(fd);
    int rc = sb_rt_gguf_open_mem(map, len, path, out, err);
    if (rc != SB_OK) {
        if (map)
            munmap(map, len);
        return rc;
    }
    (*out)->map = map;
    return SB_OK;
}

/* ---- lookups ---------------------------------------------------------------------- */

static const kv *find(const sb_rt_gguf *g, const char *key)
{
    for (size_t i = 0; g && key && i < g->n_kv; i++)
        if (!strcmp(g->kv[i].key, key))
            return &g->kv[i];
    return NULL;
}

int sb_rt_gguf_get_i64(const sb_rt_gguf *g, const char *key, int64_t *out)
{
    const kv *e = find(g, key);
    if (!e)
        return SB_ERR_NOT_FOUND;
    const uint8_t *p = e->val;
    switch (e->type) {
    case SB_RT_GGUF_U8: *out = p[0]; return SB_OK;
    case SB_RT_GGUF_I8: *out = (int8_t)p[0]; return SB_OK;
    case SB_RT_GGUF_U16: { uint16_t v; memcpy(&v, p, 2); *out = v; return SB_OK; }
    case SB_RT_GGUF_I16: { int16_t v; memcpy(&v, p, 2); *out = v; return SB_OK; }
    case SB_RT_GGUF_U32: { uint32_t v; memcpy(&v, p, 4); *out = v; return SB_OK; }
    case SB_RT_GGUF_I32: { int32_t v; memcpy(&v, p, 4); *out = v; return SB_OK; }
    case SB_RT_GGUF_I64: { int64_t v; memcpy(&v, p, 8); *out = v; return SB_OK; }
    case SB_RT_GGUF_U64: {
        uint64_t v;
        memcpy(&v, p, 8);
        if (v > INT64_MAX)
            return SB_ERR_FORMAT;
        *out = (int64_t)v;
        return SB_OK;
    }
    }
    return SB_ERR_FORMAT;
}

int sb_rt_gguf_get_u64(const sb_rt_gguf *g, const char *key, uint64_t *out)
{
    const kv *e = find(g, key);
    if (!e)
        return SB_ERR_NOT_FOUND;
    if (e->type == SB_RT_GGUF_U64) {
        memcpy(out, e->val, 8);
        return SB_OK;
    }
    int64_t v;
    int rc = sb_rt_gguf_get_i64(g, key, &v);
    if (rc != SB_OK || v < 0)
        return SB_ERR_FORMAT;
    *out = (uint64_t)v;
    return SB_OK;
}

int sb_rt_gguf_get_f32(const sb_rt_gguf *g, const char *key, float *out)
{
    const kv *e = find(g, key);
    if (!e)
        return SB_ERR_NOT_FOUND;
    if (e->type == SB_RT_GGUF_F32) {
        memcpy(out, e->val, 4);
        return SB_OK;
    }
    if (e->type == SB_RT_GGUF_F64) {
        double d;
        memcpy(&d, e->val, 8);
        *out = (float)d;
        return SB_OK;
    }
    return SB_ERR_FORMAT;
}

int sb_rt_gguf_get_bool(const sb_rt_gguf *g, const char *key, bool *out)
{
    const kv *e = find(g, key);
    if (!e)
        return SB_ERR_NOT_FOUND;
    if (e->type != SB_RT_GGUF_BOOL || e->val[0] > 1)
        return SB_ERR_FORMAT;
    *out = e->val[0];
    return SB_OK;
}

int sb_rt_gguf_get_str(const sb_rt_gguf *g, const char *key, const char **s, size_t *len)
{
    const kv *e = find(g, key);
    if (!e)
        return SB_ERR_NOT_FOUND;
    if (e->type != SB_RT_GGUF_STR)
        return SB_ERR_FORMAT;
    uint64_t n;
    memcpy(&n, e->val, 8);
    *s = (const char *)e->val + 8;
    *len = (size_t)n;
    return SB_OK;
}

int sb_rt_gguf_get_arr(const sb_rt_gguf *g, const char *key, uint32_t *type, uint64_t *n,
                       const void **data)
{
    const kv *e = find(g, key);
    if (!e)
        return SB_ERR_NOT_FOUND;
    if (e->type != SB_RT_GGUF_ARR)
        return SB_ERR_FORMAT;
    *type = e->arr_type;
    *n = e->arr_n;
    *data = e->arr_type == SB_RT_GGUF_STR ? NULL : e->val;
    return SB_OK;
}

int sb_rt_gguf_arr_str(const sb_rt_gguf *g, const char *key, uint64_t i, const char **s,
                       size_t *len)
{
    const kv *e = find(g, key);
    if (!e)
        return SB_ERR_NOT_FOUND;
    if (e->type != SB_RT_GGUF_ARR || e->arr_type != SB_RT_GGUF_STR)
        return SB_ERR_FORMAT;
    if (i >= e->arr_n)
        return SB_ERR_RANGE;
    uint64_t n;
    memcpy(&n, g->buf + e->str_off[i], 8);
    *s = (const char *)g->buf + e->str_off[i] + 8;
    *len = (size_t)n;
    return SB_OK;
}

size_t sb_rt_gguf_n_kv(const sb_rt_gguf *g)
{
    return g ? g->n_kv : 0;
}

const char *sb_rt_gguf_kv_key(const sb_rt_gguf *g, size_t i, uint32_t *type)
{
    if (!g || i >= g->n_kv)
        return NULL;
    if (type)
        *type = g->kv[i].type;
    return g->kv[i].key;
}

size_t sb_rt_gguf_n_tensors(const sb_rt_gguf *g)
{
    return g ? g->n_t : 0;
}

const sb_rt_gguf_tensor *sb_rt_gguf_tensor_at(const sb_rt_gguf *g, size_t i)
{
    return g && i < g->n_t ? &g->t[i] : NULL;
}

const sb_rt_gguf_tensor *sb_rt_gguf_find_tensor(const sb_rt_gguf *g, const char *name)
{
    for (size_t i = 0; g && name && i < g->n_t; i++)
        if (!strcmp(g->t[i].name, name))
            return &g->t[i];
    return NULL;
}
