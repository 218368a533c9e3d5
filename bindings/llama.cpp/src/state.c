/* state.c -- llama.cpp's sequence state: parse, check, write (state.h has
 * the format). */
#include "state.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"

#define CELL_BYTES 12u           /* pos, n_seq_id 1, seq_id */
#define EXT_BYTES 12u            /* M-RoPE's x, y, tok */
#define ROW_MAX (1ull << 30)     /* no layer's row of one token is 1 GiB */

typedef struct rd {
    const uint8_t *p, *end;
    char *err;
    size_t err_len;
    int failed;
} rd;

__attribute__((format(printf, 2, 3))) static void fail(rd *r, const char *fmt, ...)
{
    if (r->failed)
        return;
    r->failed = 1;
    if (r->err && r->err_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->err, r->err_len, fmt, ap);
        va_end(ap);
    }
}

static const uint8_t *take(rd *r, uint64_t n, const char *what)
{
    if (r->failed)
        return NULL;
    if (n > (uint64_t)(r->end - r->p)) {
        fail(r, "sequence state ends inside %s (%llu bytes wanted, %zu left)", what,
             (unsigned long long)n, (size_t)(r->end - r->p));
        return NULL;
    }
    const uint8_t *q = r->p;
    r->p += n;
    return q;
}

static uint32_t u32(rd *r, const char *what)
{
    const uint8_t *q = take(r, 4, what);
    uint32_t v = 0;
    if (q)
        memcpy(&v, q, 4);
    return v;
}

static uint64_t u64(rd *r, const char *what)
{
    const uint8_t *q = take(r, 8, what);
    uint64_t v = 0;
    if (q)
        memcpy(&v, q, 8);
    return v;
}

/* A type llama.cpp could have written, with a row of `row` bytes. */
static int type_ok(rd *r, int32_t type, uint64_t row, const char *what, uint32_t layer)
{
    if (type < 0 || type >= GGML_TYPE_COUNT || ggml_type_size(type) == 0 ||
        ggml_blck_size(type) <= 0) {
        fail(r, "layer %u: %s type %d is not a ggml type", layer, what, type);
        return 0;
    }
    size_t ts = ggml_type_size(type);
    int64_t bs = ggml_blck_size(type);
    if (row == 0 || row > ROW_MAX || row % ts != 0 ||
        ggml_row_size(type, (int64_t)(row / ts) * bs) != row) {
        fail(r, "layer %u: %s row of %llu bytes is not whole %s blocks", layer, what,
             (unsigned long long)row, ggml_type_name(type));
        return 0;
    }
    return 1;
}

int32_t sb_llama_state_cell_pos(const sb_llama_state_view *view, uint32_t i)
{
    int32_t pos;
    memcpy(&pos, view->cells + (size_t)i * view->cell_bytes, 4);
    return pos;
}

int sb_llama_state_cell_text(const sb_llama_state_view *view, uint32_t i, int32_t token)
{
    if (view->cell_bytes == CELL_BYTES)
        return 1;
    int32_t f[4]; /* pos, then the extension's x, y, tok */
    const uint8_t *c = view->cells + (size_t)i * view->cell_bytes;
    memcpy(&f[0], c, 4);
    memcpy(&f[1], c + 8, 12);
    return f[1] == f[0] && f[2] == f[0] && f[3] == token;
}

/* One layer's field header (K or V) checked against, or learned into, L. */
static void layer_k(rd *r, sb_llama_state_layer *L, int learn, uint32_t l, uint32_t n_cells,
                    const uint8_t **rows)
{
    int32_t type = (int32_t)u32(r, "a K type");
    uint64_t row = u64(r, "a K row size");
    if (r->failed)
        return;
    if (learn) {
        if (!type_ok(r, type, row, "K", l))
            return;
        L->k_type = type;
        L->k_row = row;
    } else if (type != L->k_type || row != L->k_row) {
        fail(r, "layer %u: K is %d with %llu-byte rows, the probe found %d with %llu", l, type,
             (unsigned long long)row, L->k_type, (unsigned long long)L->k_row);
        return;
    }
    const uint8_t *q = take(r, row * n_cells, "K rows");
    if (rows)
        *rows = q;
}

static void layer_v(rd *r, sb_llama_state_layer *L, int learn, uint32_t v_trans, uint32_t l,
                    uint32_t n_cells, const uint8_t **rows)
{
    int32_t type = (int32_t)u32(r, "a V type");
    uint64_t row;
    uint32_t el = 0, n_embd = 0;
    if (!v_trans) {
        row = u64(r, "a V row size");
    } else {
        el = u32(r, "a V element size");
        n_embd = u32(r, "a V width");
        row = (uint64_t)el * n_embd;
    }
    if (r->failed)
        return;
    if (learn) {
        if (!type_ok(r, type, row, "V", l))
            return;
        if (v_trans && (ggml_blck_size(type) != 1 || el != ggml_type_size(type))) {
            fail(r, "layer %u: transposed V of type %s with %u-byte elements", l,
                 ggml_type_name(type), el);
            return;
        }
        L->v_type = type;
        L->v_row = row;
        L->v_el = el;
        L->n_embd_v = n_embd;
    } else if (type != L->v_type || row != L->v_row || el != L->v_el ||
               n_embd != L->n_embd_v) {
        fail(r, "layer %u: V is %d with %llu-byte rows, the probe found %d with %llu", l, type,
             (unsigned long long)row, L->v_type, (unsigned long long)L->v_row);
        return;
    }
    const uint8_t *q = take(r, row * n_cells, "V rows");
    if (rows)
        *rows = q;
}

/* One recurrent tensor's header (R or S of rec layer i) checked against,
 * or learned into, *type and *row; its row taken. */
static const uint8_t *rec_tensor(rd *r, int learn, const char *what, uint32_t i, int32_t *type,
                                 uint64_t *row)
{
    int32_t t = (int32_t)u32(r, "a recurrent type");
    uint64_t w = u64(r, "a recurrent row size");
    if (r->failed)
        return NULL;
    if (learn) {
        if (!type_ok(r, t, w, what, i))
            return NULL;
        *type = t;
        *row = w;
    } else if (t != *type || w != *row) {
        fail(r, "recurrent layer %u: %s is %d with %llu bytes, the probe found %d with %llu",
             i, what, t, (unsigned long long)w, *type, (unsigned long long)*row);
        return NULL;
    }
    return take(r, w, "a recurrent row");
}

/* The recurrent part after the KV cache's (state.h). learn: n_layer_all,
 * n_rec and rec are learned, rec in *layers' block (grown here). */
static void parse_rec(rd *r, sb_llama_state_layout *layout, int learn,
                      sb_llama_state_layer **layers, uint32_t n_kv, sb_llama_state_view *view)
{
    const uint8_t *start = r->p;
    uint32_t cells = u32(r, "the recurrent cell count");
    int32_t pos = (int32_t)u32(r, "the recurrent cell");
    uint32_t n_seq = u32(r, "the recurrent cell");
    uint32_t s_trans = u32(r, "the recurrent layout");
    uint32_t n_all = u32(r, "the recurrent layer count");
    if (r->failed)
        return;
    if (cells != 1 || pos < 0 || n_seq != 0) {
        fail(r, "the recurrent part holds %u cells (pos %d, %u sequence ids), not a "
             "sequence's one", cells, pos, n_seq);
        return;
    }
    if (s_trans != 0) {
        fail(r, "a transposed recurrent state (s_trans %u) is not one this connector knows",
             s_trans);
        return;
    }
    if (learn) {
        if (n_all <= n_kv || n_all > SB_LLAMA_STATE_LAYERS_MAX) {
            fail(r, "%u layers in all beside %u with a KV cache", n_all, n_kv);
            return;
        }
        size_t kv = (size_t)n_kv * sizeof **layers;
        sb_llama_state_layer *grown = realloc(*layers, kv + (n_all - n_kv) * sizeof *layout->rec);
        if (!grown) {
            fail(r, "out of memory");
            return;
        }
        *layers = grown;
        layout->n_layer_all = n_all;
        layout->n_rec = n_all - n_kv;
        layout->rec = (sb_llama_state_rec *)(void *)((uint8_t *)grown + kv);
    } else if (n_all != layout->n_layer_all) {
        fail(r, "%u layers in all, the probe found %u", n_all, layout->n_layer_all);
        return;
    }
    for (uint32_t i = 0; i < layout->n_rec && !r->failed; i++)
        rec_tensor(r, learn, "R", i, &layout->rec[i].r_type, &layout->rec[i].r_row);
    for (uint32_t i = 0; i < layout->n_rec && !r->failed; i++)
        rec_tensor(r, learn, "S", i, &layout->rec[i].s_type, &layout->rec[i].s_row);
    if (r->failed)
        return;
    if (learn)
        layout->rec_bytes = (uint64_t)(r->p - start);
    view->rec = start;
    view->rec_pos = pos;
}

int sb_llama_state_rec_check(const sb_llama_state_layout *layout, const uint8_t *rec,
                             int32_t pos, char *err, size_t err_len)
{
    rd r = { rec, rec + layout->rec_bytes, err, err_len, 0 };
    sb_llama_state_layout copy = *layout;
    sb_llama_state_layer *layers = layout->layers;
    sb_llama_state_view v = { 0 };
    parse_rec(&r, &copy, 0, &layers, layout->n_layer, &v);
    if (!r.failed && v.rec_pos != pos)
        fail(&r, "a recurrent state after position %d where one after %d was wanted", v.rec_pos,
             pos);
    if (!r.failed && r.p != r.end)
        fail(&r, "%zu bytes after the recurrent part", (size_t)(r.end - r.p));
    return r.failed ? -1 : 0;
}

/* Where one KV part's cells and rows are. */
typedef struct kv_found {
    uint32_t n_cells;
    const uint8_t *cells;
    const uint8_t **k, **v;       /* n_layer each, or NULL: not wanted */
} kv_found;

/* One KV cache's part (state.h): n_stream, then each stream's count, its
 * cells and layers, checked against kv, or learned into it (layers
 * allocated here). cb: the bytes of a cell. what: "KV cache" or "sliding-
 * window cache", for messages. */
static void parse_kv(rd *r, sb_llama_state_kv *kv, int learn, int32_t want_seq, uint32_t cb,
                     kv_found *f, const char *what)
{
    f->n_cells = 0;
    f->cells = NULL;
    uint32_t n_stream = u32(r, "the header");
    if (r->failed)
        return;
    if (n_stream == 0 || n_stream > 65536 || (!learn && n_stream != kv->n_stream)) {
        fail(r, "%s: %u streams (the probe found %u)", what, n_stream, learn ? 0 : kv->n_stream);
        return;
    }
    if (learn)
        kv->n_stream = n_stream;
    int seen = 0;
    for (uint32_t s = 0; s < n_stream && !r->failed; s++) {
        uint32_t n_cells = u32(r, "a stream's cell count");
        if (r->failed || n_cells == 0)
            continue;
        if (seen) {
            fail(r, "%s: a sequence's cells in two streams", what);
            return;
        }
        seen = 1;
        f->n_cells = n_cells;
        f->cells = take(r, (uint64_t)n_cells * cb, "the cells");
        if (r->failed)
            return;
        int32_t seq0 = 0;
        for (uint32_t i = 0; i < n_cells; i++) {
            const uint8_t *c = f->cells + (size_t)i * cb;
            int32_t pos, seq;
            uint32_t n_seq;
            memcpy(&pos, c, 4);
            memcpy(&n_seq, c + 4, 4);
            memcpy(&seq, c + cb - 4, 4);
            if (i == 0)
                seq0 = seq;
            if (n_seq != 1 || pos < 0 || seq < 0 || seq != seq0 ||
                (want_seq >= 0 && seq != want_seq)) {
                fail(r, "%s: cell %u is not one cell of sequence %d (pos %d, %u sequence ids, "
                     "first %d)", what, i, want_seq >= 0 ? want_seq : seq0, pos, n_seq, seq);
                return;
            }
        }
        uint32_t v_trans = u32(r, "the V layout");
        uint32_t n_layer = u32(r, "the layer count");
        if (r->failed)
            return;
        if (v_trans > 1 || n_layer == 0 || n_layer > SB_LLAMA_STATE_LAYERS_MAX) {
            fail(r, "%s: V layout %u with %u layers is not a KV cache this connector knows",
                 what, v_trans, n_layer);
            return;
        }
        if (learn) {
            kv->layers = calloc(n_layer, sizeof *kv->layers);
            if (!kv->layers) {
                fail(r, "out of memory");
                return;
            }
            kv->v_trans = v_trans;
            kv->n_layer = n_layer;
        } else if (v_trans != kv->v_trans || n_layer != kv->n_layer) {
            fail(r, "%s: V layout %u with %u layers, the probe found %u with %u", what,
                 v_trans, n_layer, kv->v_trans, kv->n_layer);
            return;
        }
        for (uint32_t l = 0; l < n_layer && !r->failed; l++)
            layer_k(r, &kv->layers[l], learn, l, n_cells, f->k ? &f->k[l] : NULL);
        for (uint32_t l = 0; l < n_layer && !r->failed; l++)
            layer_v(r, &kv->layers[l], learn, v_trans, l, n_cells, f->v ? &f->v[l] : NULL);
    }
    if (!r->failed && learn && !seen)
        fail(r, "%s: the probe's state holds no cells", what);
}

int sb_llama_state_parse(const uint8_t *buf, size_t n, sb_llama_state_layout *layout,
                         int32_t want_seq, sb_llama_state_view *view, char *err,
                         size_t err_len)
{
    rd r = { buf, buf + n, err, err_len, 0 };
    int learn = layout->layers == NULL;
    memset(view, 0, offsetof(sb_llama_state_view, k));
    view->rec = NULL;
    view->rec_pos = -1;
    view->swa_n_cells = 0;
    view->swa_cells = NULL;
    view->cell_bytes = CELL_BYTES + (layout->cell_ext ? EXT_BYTES : 0);

    uint32_t magic = u32(&r, "the header");
    view->seq_id = (int32_t)u32(&r, "the header");
    if (!r.failed && magic != SB_LLAMA_STATE_MAGIC)
        fail(&r, "not a llama.cpp sequence state (magic 0x%08x, expected 0x%08x)", magic,
             SB_LLAMA_STATE_MAGIC);
    sb_llama_state_kv base = { layout->n_stream, layout->v_trans, layout->n_layer,
                               layout->layers };
    kv_found f = { .k = view->k, .v = view->v };
    parse_kv(&r, &base, learn, want_seq, view->cell_bytes, &f, "the KV cache");
    view->n_cells = f.n_cells;
    view->cells = f.cells;
    sb_llama_state_layer *layers = base.layers;
    if (learn) { /* kept on success, freed below on failure */
        layout->n_stream = base.n_stream;
        layout->v_trans = base.v_trans;
        layout->n_layer = base.n_layer;
    }
    if (!r.failed && layout->swa) {
        kv_found w = { .k = view->swa_k, .v = view->swa_v };
        parse_kv(&r, &layout->swa_kv, learn, want_seq, view->cell_bytes, &w,
                 "the sliding-window cache");
        view->swa_n_cells = w.n_cells;
        view->swa_cells = w.cells;
    }
    if (!r.failed && layout->recurrent)
        parse_rec(&r, layout, learn, &layers, layout->n_layer, view);
    if (!r.failed && r.p != r.end)
        fail(&r, "%zu bytes after the state's known parts: a memory part this connector does "
             "not know", (size_t)(r.end - r.p));
    if (learn) {
        if (r.failed) {
            free(layers);
            free(layout->swa_kv.layers);
            layout->swa_kv.layers = NULL;
            layout->swa_kv.n_layer = 0;
            layout->n_layer = 0;
            layout->n_rec = 0;
            layout->rec = NULL;
        } else {
            layout->layers = layers;
        }
    }
    return r.failed ? -1 : 0;
}

void sb_llama_state_layout_free(sb_llama_state_layout *layout)
{
    free(layout->layers);
    free(layout->swa_kv.layers);
    layout->layers = layout->swa_kv.layers = NULL;
    layout->rec = NULL;
}

/* Bytes of one KV part of n_cells cells. */
static uint64_t kv_bytes(const sb_llama_state_kv *kv, uint64_t cb, uint32_t n_cells)
{
    uint64_t b = 4 + 4ull * kv->n_stream;
    if (n_cells == 0)
        return b; /* no cells: a count of 0 in each stream, nothing more */
    b += (uint64_t)n_cells * cb + 8;
    for (uint32_t l = 0; l < kv->n_layer; l++) {
        const sb_llama_state_layer *L = &kv->layers[l];
        b += 12 + L->k_row * n_cells;
        b += 12 + L->v_row * n_cells;
    }
    return b;
}

static sb_llama_state_kv base_kv(const sb_llama_state_layout *layout)
{
    return (sb_llama_state_kv){ layout->n_stream, layout->v_trans, layout->n_layer,
                                layout->layers };
}

size_t sb_llama_state_bytes(const sb_llama_state_layout *layout, uint32_t n_cells)
{
    sb_llama_state_kv kv = base_kv(layout);
    uint64_t b = 8 + kv_bytes(&kv, CELL_BYTES + (layout->cell_ext ? EXT_BYTES : 0), n_cells);
    if (layout->recurrent)
        b += layout->rec_bytes;
    return b > SIZE_MAX / 2 ? 0 : (size_t)b;
}

size_t sb_llama_state_swa_bytes(const sb_llama_state_layout *layout, uint32_t n_cells)
{
    uint64_t b = kv_bytes(&layout->swa_kv, CELL_BYTES + (layout->cell_ext ? EXT_BYTES : 0),
                          n_cells);
    return b > SIZE_MAX / 2 ? 0 : (size_t)b;
}

static uint8_t *put32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4);
    return p + 4;
}

static uint8_t *put64(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, 8);
    return p + 8;
}

/* One KV part at p: its cells (positions pos0.., all in stream 0) and
 * field headers; k[l], v[l] where the rows go. Returns the end. */
static uint8_t *write_kv(const sb_llama_state_kv *kv, int cell_ext, uint32_t n_cells,
                         int32_t pos0, int32_t seq_id, const uint32_t *tokens, uint8_t *p,
                         uint8_t **k, uint8_t **v)
{
    p = put32(p, kv->n_stream);
    for (uint32_t s = 0; s < kv->n_stream; s++) {
        p = put32(p, s == 0 ? n_cells : 0);
        if (s != 0 || n_cells == 0)
            continue;
        for (uint32_t i = 0; i < n_cells; i++) {
            uint32_t pos = (uint32_t)(pos0 + (int32_t)i);
            p = put32(p, pos);
            p = put32(p, 1);
            if (cell_ext) {
                p = put32(p, pos);
                p = put32(p, pos);
                p = put32(p, tokens[i]);
            }
            p = put32(p, (uint32_t)seq_id);
        }
        p = put32(p, kv->v_trans);
        p = put32(p, kv->n_layer);
        for (uint32_t l = 0; l < kv->n_layer; l++) {
            const sb_llama_state_layer *L = &kv->layers[l];
            p = put32(p, (uint32_t)L->k_type);
            p = put64(p, L->k_row);
            k[l] = p;
            p += L->k_row * n_cells;
        }
        for (uint32_t l = 0; l < kv->n_layer; l++) {
            const sb_llama_state_layer *L = &kv->layers[l];
            p = put32(p, (uint32_t)L->v_type);
            if (!kv->v_trans) {
                p = put64(p, L->v_row);
            } else {
                p = put32(p, L->v_el);
                p = put32(p, L->n_embd_v);
            }
            v[l] = p;
            p += L->v_row * n_cells;
        }
    }
    return p;
}

void sb_llama_state_write(const sb_llama_state_layout *layout, uint32_t n_cells, int32_t pos0,
                          int32_t seq_id, const uint32_t *tokens, uint8_t *buf, uint8_t **k,
                          uint8_t **v)
{
    uint8_t *p = buf;
    p = put32(p, SB_LLAMA_STATE_MAGIC);
    p = put32(p, (uint32_t)seq_id);
    sb_llama_state_kv kv = base_kv(layout);
    write_kv(&kv, (int)layout->cell_ext, n_cells, pos0, seq_id, tokens, p, k, v);
}

void sb_llama_state_write_swa(const sb_llama_state_layout *layout, uint32_t n_cells,
                              int32_t pos0, int32_t seq_id, const uint32_t *tokens, uint8_t *buf,
                              uint8_t **k, uint8_t **v)
{
    write_kv(&layout->swa_kv, (int)layout->cell_ext, n_cells, pos0, seq_id, tokens, buf, k, v);
}

void sb_llama_state_transpose(uint8_t *rows, uint8_t *block, uint32_t n_cells, uint32_t n_embd,
                              uint32_t el, int to_rows)
{
    /* Tiles of 64 cells x 64 elements keep both sides in cache. */
    enum { T = 64 };
    for (uint32_t c0 = 0; c0 < n_cells; c0 += T) {
        uint32_t c1 = c0 + T < n_cells ? c0 + T : n_cells;
        for (uint32_t j0 = 0; j0 < n_embd; j0 += T) {
            uint32_t j1 = j0 + T < n_embd ? j0 + T : n_embd;
            for (uint32_t c = c0; c < c1; c++) {
                for (uint32_t j = j0; j < j1; j++) {
                    uint8_t *r = rows + ((size_t)c * n_embd + j) * el;
                    uint8_t *b = block + ((size_t)j * n_cells + c) * el;
                    uint8_t *dst = to_rows ? r : b;
                    const uint8_t *src = to_rows ? b : r;
                    if (el == 2) /* F16/BF16: a fixed-size copy the compiler inlines */
                        memcpy(dst, src, 2);
                    else
                        memcpy(dst, src, el);
                }
            }
        }
    }
}
