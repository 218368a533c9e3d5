/* fuzz_llama_state.c -- libFuzzer harness: the llama.cpp connector's
 * parser of llama.cpp's sequence state (bindings/llama.cpp/src/state.h) on
 * arbitrary bytes.
 *
 * Property. The parser refuses its input (and then leaves no layout
 * behind) or accepts it; what it accepts parses again against the layout it
 * learned, with the same cells and every layer's rows inside the input; a
 * state written back from the view (sb_llama_state_write, rows copied)
 * parses with that layout, and when the input's cells were already
 * positions 0 .. n-1 in order in stream 0 -- the form the writer makes --
 * the written state is the input, byte for byte. It never reads outside
 * its buffer (ASan) and never crashes.
 *
 * Input: one byte of flags (bit 0: a hybrid model's recurrent part
 * follows the KV cache's; bit 1: cells carry M-RoPE's extension; bit 2: a
 * sliding-window cache's part follows the base one, written back after
 * it (with bit 0 as well, only parsed); the other bits ignored), then the
 * bytes of a state. Seeds
 * (fuzz/corpus/llama_state/) are real states llama.cpp v0.5.0 exported,
 * each after its flags byte, written by `test_llama --write-seeds DIR`. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FAIL(...)                                                              \
    do {                                                                       \
        fprintf(stderr, "fuzz_llama_state: " __VA_ARGS__);                     \
        fputc('\n', stderr);                                                   \
        abort();                                                               \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    uint8_t flags = data[0];
    data++, size--;
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    sb_llama_state_layout lay = { .recurrent = flags & 1, .cell_ext = (flags >> 1) & 1,
                                  .swa = (flags >> 2) & 1 };
    sb_llama_state_view first = { 0 };
    if (sb_llama_state_parse(buf, size, &lay, -1, &first, NULL, 0) != 0) {
        if (lay.layers || lay.swa_kv.layers)
            FAIL("a refused state left a layout");
        free(buf);
        return 0;
    }
    uint32_t nl = lay.n_layer, n = first.n_cells;
    uint32_t ns = lay.swa_kv.n_layer, c = first.swa_n_cells;
    const uint8_t **k = calloc(nl, sizeof *k), **v = calloc(nl, sizeof *v);
    uint8_t **wk = calloc(nl, sizeof *wk), **wv = calloc(nl, sizeof *wv);
    const uint8_t **sk = calloc(ns + 1, sizeof *sk), **sv = calloc(ns + 1, sizeof *sv);
    uint8_t **swk = calloc(ns + 1, sizeof *swk), **swv = calloc(ns + 1, sizeof *swv);
    uint32_t *toks = calloc(n ? n : 1, sizeof *toks);
    uint32_t *stoks = calloc(c ? c : 1, sizeof *stoks);
    sb_llama_state_view view = { .k = k, .v = v, .swa_k = sk, .swa_v = sv };
    char err[200];
    uint8_t *out = NULL;
    if (!k || !v || !wk || !wv || !sk || !sv || !swk || !swv || !toks || !stoks)
        goto out;
    if (sb_llama_state_parse(buf, size, &lay, -1, &view, err, sizeof err) != 0)
        FAIL("accepted once, refused against its own layout: %s", err);
    if (view.n_cells != n || view.swa_n_cells != c)
        FAIL("%u and %u cells, then %u and %u", n, c, view.n_cells, view.swa_n_cells);
    /* (a window's part is written back in stream 0 with consecutive
     * positions: only checked to parse) */
    int canonical = n > 0 && view.cells == buf + 16 && !lay.swa; /* stream 0's cells */
    int32_t seq = 0;
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *cl = view.cells + (size_t)i * view.cell_bytes;
        int32_t tok = 0;
        if (lay.cell_ext)
            memcpy(&tok, cl + 16, 4);
        toks[i] = (uint32_t)tok;
        if (sb_llama_state_cell_pos(&view, i) != (int32_t)i ||
            !sb_llama_state_cell_text(&view, i, tok))
            canonical = 0;
        memcpy(&seq, cl + view.cell_bytes - 4, 4);
    }
    if (lay.recurrent && (!view.rec || view.rec < buf ||
                          view.rec + lay.rec_bytes > buf + size))
        FAIL("the recurrent part outside the input");
    for (uint32_t l = 0; l < nl; l++) {
        const sb_llama_state_layer *L = &lay.layers[l];
        if (k[l] < buf || k[l] + L->k_row * n > buf + size || v[l] < buf ||
            v[l] + L->v_row * n > buf + size)
            FAIL("layer %u's rows outside the input", l);
    }
    for (uint32_t l = 0; c && l < ns; l++) {
        const sb_llama_state_layer *L = &lay.swa_kv.layers[l];
        if (sk[l] < buf || sk[l] + L->k_row * c > buf + size || sv[l] < buf ||
            sv[l] + L->v_row * c > buf + size)
            FAIL("window layer %u's rows outside the input", l);
    }
    if (lay.swa && lay.recurrent)
        goto out; /* no writer for both: the connector refuses such a model */
    int32_t pos0 = 0;
    for (uint32_t i = 0; i < c; i++) {
        const uint8_t *cell = view.swa_cells + (size_t)i * view.cell_bytes;
        int32_t tok = 0;
        if (lay.cell_ext)
            memcpy(&tok, cell + 16, 4);
        stoks[i] = (uint32_t)tok;
        if (i == 0)
            memcpy(&pos0, cell, 4);
    }
    size_t wb = sb_llama_state_bytes(&lay, n);
    size_t sb = lay.swa && wb ? sb_llama_state_swa_bytes(&lay, c) : 0;
    out = wb && (sb || !lay.swa) ? malloc(wb + sb) : NULL;
    if (!out)
        goto out;
    sb_llama_state_write(&lay, n, 0, seq, toks, out, wk, wv);
    for (uint32_t l = 0; l < nl; l++) {
        memcpy(wk[l], k[l], lay.layers[l].k_row * n);
        memcpy(wv[l], v[l], lay.layers[l].v_row * n);
    }
    if (lay.swa) { /* cell order kept: rows and transposed blocks as they are */
        sb_llama_state_write_swa(&lay, c, pos0, seq, stoks, out + wb, swk, swv);
        for (uint32_t l = 0; c && l < ns; l++) {
            memcpy(swk[l], sk[l], lay.swa_kv.layers[l].k_row * c);
            memcpy(swv[l], sv[l], lay.swa_kv.layers[l].v_row * c);
        }
        wb += sb;
    }
    if (lay.recurrent) {
        memcpy(out + wb - lay.rec_bytes, view.rec, lay.rec_bytes);
        if (sb_llama_state_rec_check(&lay, view.rec, view.rec_pos, err, sizeof err) != 0)
            FAIL("the parsed recurrent part fails its own check: %s", err);
    }
    sb_llama_state_view back = { .k = (const uint8_t **)wk, .v = (const uint8_t **)wv };
    if (sb_llama_state_parse(out, wb, &lay, seq, &back, err, sizeof err) != 0)
        FAIL("the written state does not parse: %s", err);
    /* the header's seq_id is the reader's business, not the cells' */
    if (canonical && first.seq_id == seq && (wb != size || memcmp(out, buf, size) != 0))
        FAIL("a state already in the writer's form did not write back the same");
out:
    free(out);
    free(k), free(v), free(wk), free(wv), free(toks);
    free(sk), free(sv), free(swk), free(swv), free(stoks);
    sb_llama_state_layout_free(&lay);
    free(buf);
    return 0;
}
