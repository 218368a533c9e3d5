/* state.h -- llama.cpp's sequence state: parsed field by field and checked,
 * and written back for a restore. The format is llama.cpp's (v0.5.0,
 * src/llama-context.cpp and src/llama-kv-cache.cpp: state_seq_get_data,
 * llama_kv_cache::state_write); this file only reads and writes it, and
 * refuses every byte it cannot account for.
 *
 * A sequence state of a model whose memory is one KV cache
 * (llama_state_seq_get_data, flags 0), all integers little-endian:
 *
 *     offset  size  field
 *     0       4     magic      u32 0xaf143cd8
 *     4       4     seq_id     i32, the sequence it was read from
 *     8       4     n_stream   u32, the cache's streams (1 unless the
 *                              context has kv_unified off and several
 *                              sequences)
 *     then, for each stream s in 0 .. n_stream - 1:
 *             4     cell_count u32 (0: the stream holds nothing of the
 *                              sequence, and nothing more follows for s)
 *             cell_count x     one cell, in cache order (not position order):
 *               4               pos       i32
 *               4               n_seq_id  u32, 1 in a sequence's state
 *               12              ext       only for an M-RoPE model (rope
 *                                         type MROPE or IMROPE: the cache's
 *                                         cells carry an extension):
 *                                         x i32, y i32, tok i32; a text
 *                                         token's is x = y = pos, tok its
 *                                         token id
 *               4 * n_seq_id    seq_id    i32 each
 *             4     v_trans    u32, 1 when V is stored transposed (flash
 *                              attention off), else 0
 *             4     n_layer    u32, layers with a KV cache
 *             n_layer x        K of one layer:
 *               4               k_type    i32, a ggml_type
 *               8               k_row     u64, bytes of one cell's K row
 *               cell_count * k_row  the rows, cell by cell
 *             n_layer x        V of one layer, v_trans 0:
 *               4               v_type    i32
 *               8               v_row     u64
 *               cell_count * v_row  the rows
 *             ... or, v_trans 1:
 *               4               v_type    i32 (a type of block size 1)
 *               4               v_el      u32, bytes of one element
 *               4               n_embd_v  u32, elements of one cell's V
 *               n_embd_v * cell_count * v_el  element j of every cell,
 *                               then element j + 1 of every cell, ...
 *
 * A sliding-window model's memory (llama_kv_cache_iswa: the layers that
 * attend to every position in a base KV cache, those that attend to a
 * window of recent positions in a second one) writes the base cache's
 * part above, then the sliding-window cache's part in the same format
 * (from n_stream on) holding only the cells the window keeps for the
 * sequence's last position (llama.cpp drops the masked ones). The
 * connector pages the base layers and keeps the window's cells as the
 * point state at the sequence's end (see the point format below).
 *
 * A hybrid model's memory (llama_memory_hybrid: attention layers in a KV
 * cache, recurrent layers beside them) writes the KV cache's part above,
 * then the recurrent part (src/llama-memory-recurrent.cpp,
 * llama_memory_recurrent::state_write; what llama.cpp calls the partial
 * state, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY):
 *
 *             4     rec_cells  u32, 1 (a sequence's one recurrent cell)
 *             4     pos        i32, the position the state is after
 *             4     n_seq_id   u32, 0 in a sequence's state
 *             4     s_trans    u32, 0 (1, S transposed, is refused)
 *             4     n_layer    u32, every layer of the model
 *             n_rec x          R (conv state) of one recurrent layer:
 *               4               r_type    i32
 *               8               r_row     u64
 *               r_row           the row
 *             n_rec x          S (the recurrent state) of one layer:
 *               4               s_type    i32
 *               8               s_row     u64
 *               s_row           the row
 *
 * where n_rec = n_layer - the KV cache's layers (every layer is one or
 * the other). The connector keeps this part whole as the point state at
 * the sequence's end (SB_LAYOUT_POINT_REQUIRED): a state is only ever
 * restored with the recurrent state of exactly its last position.
 *
 * The connector's own point state of a sliding-window model (the namespace's
 * point_bytes, fixed: W = n_swa + 1 cells at most; not llama.cpp's
 * format, which it is written back into at a restore):
 *
 *     offset  size  field
 *     0       4     n          u32, the window's cells (1 .. W)
 *     4       4     pos0       i32, their positions pos0 .. pos0 + n - 1,
 *                              the last one the boundary's L - 1
 *     8       per windowed layer l: W * k_row   K rows, position order
 *                              (the first n used, the rest 0)
 *     then    per windowed layer l: W * v_row   V rows, token-major
 *
 * Its version is the connector's (SB_LLAMA_VERSION), which is part of the
 * namespace identity: a change of this format opens another namespace.
 *
 * Models whose memory has other parts (a recurrent model with no KV
 * cache, a hybrid with a sliding-window cache, the cell extension of
 * per-layer n-gram embeddings) write more or otherwise: those are
 * refused by the connector before a state is read, and a state with
 * bytes left over after the parse above is refused here.
 *
 * The connector keeps one row per token per tensor: the K rows as they
 * are, and V token-major (a transposed V is transposed on the way in and
 * out). A state to restore is written with all its cells in stream 0, at
 * positions 0 .. n - 1 in order, so llama.cpp places them in that order.
 * An M-RoPE cell's extension is not kept: a save checks that every cell
 * is a text token's (x = y = pos, tok the caller's token), and a restore
 * writes that back. */
#ifndef SB_LLAMA_STATE_H
#define SB_LLAMA_STATE_H

#include <stddef.h>
#include <stdint.h>

#define SB_LLAMA_STATE_MAGIC 0xaf143cd8u
#define SB_LLAMA_STATE_LAYERS_MAX 4096u

/* One layer's K and V, as the probe found them. */
typedef struct sb_llama_state_layer {
    int32_t k_type;
    uint64_t k_row;               /* bytes of one token's K */
    int32_t v_type;
    uint64_t v_row;               /* bytes of one token's V (token-major) */
    uint32_t v_el;                /* v_trans: bytes of one element */
    uint32_t n_embd_v;            /* v_trans: elements of one token's V */
} sb_llama_state_layer;

/* One recurrent layer's R and S, as the probe found them. */
typedef struct sb_llama_state_rec {
    int32_t r_type;
    uint64_t r_row;               /* bytes of the layer's R */
    int32_t s_type;
    uint64_t s_row;               /* bytes of the layer's S */
} sb_llama_state_rec;

/* One KV cache part's layout. */
typedef struct sb_llama_state_kv {
    uint32_t n_stream;
    uint32_t v_trans;
    uint32_t n_layer;
    sb_llama_state_layer *layers; /* n_layer */
} sb_llama_state_kv;

/* What every state of one context looks like. */
typedef struct sb_llama_state_layout {
    uint32_t n_stream;
    uint32_t v_trans;
    uint32_t n_layer;             /* layers with a KV cache */
    sb_llama_state_layer *layers; /* n_layer, owned by whoever made it */
    uint32_t recurrent;           /* 1: a recurrent part follows (set by
                                     the caller before learning) */
    uint32_t cell_ext;            /* 1: cells carry M-RoPE's extension (set
                                     by the caller before learning) */
    uint32_t swa;                 /* 1: a sliding-window KV part follows the
                                     base one (set before learning) */
    sb_llama_state_kv swa_kv;     /* swa: its layout (layers its own block) */
    uint32_t n_layer_all;         /* recurrent: the model's layers */
    uint32_t n_rec;               /* recurrent: n_layer_all - n_layer */
    sb_llama_state_rec *rec;      /* n_rec, in the same allocation as layers
                                     (sb_llama_state_layout_free frees all) */
    uint64_t rec_bytes;           /* recurrent: bytes of the recurrent part */
} sb_llama_state_layout;

/* A parsed state: pointers into the buffer it was parsed from. */
typedef struct sb_llama_state_view {
    int32_t seq_id;               /* the header's */
    uint32_t n_cells;             /* cells of the sequence (one stream) */
    const uint8_t *cells;         /* n_cells cells: pos, 1, [ext,] seq */
    uint32_t cell_bytes;          /* 12, or 24 with the extension */
    uint32_t swa_n_cells;         /* swa: the window's cells */
    const uint8_t *swa_cells;     /* swa: they, cell_bytes each */
    const uint8_t **k;            /* n_layer: layer l's K rows */
    const uint8_t **v;            /* n_layer: layer l's V (rows, or the
                                     transposed block) */
    const uint8_t **swa_k;        /* swa: swa_kv.n_layer, or NULL: not wanted */
    const uint8_t **swa_v;
    const uint8_t *rec;           /* recurrent: the recurrent part
                                     (layout->rec_bytes), else NULL */
    int32_t rec_pos;              /* recurrent: the position it is after */
} sb_llama_state_view;

/* sb_llama_state_parse -- parse buf[0, n) as a sequence state.
 *
 * learn (layout->layers NULL on entry): the layout is taken from the state
 * (layers allocated with malloc, the caller frees them) after checking
 * every field: a known ggml type whose row size fits its block size, V
 * transposed only for a type of block size 1, every layer's sizes below
 * 1 GiB. Otherwise the state must have exactly the layout given.
 * view->k and view->v must have room for n_layer pointers (learn: pass
 * NULL for both; they are not filled).
 *
 * Every state: the magic, at most one stream with cells, every cell with
 * one sequence id equal to want_seq (-1: any, but the same for all), with
 * layout->swa the sliding-window part (its cells and rows in view->swa_*),
 * with layout->recurrent the recurrent part (one cell; in learn mode it is
 * learned, and a probe's state needs one), and the bytes add up to n
 * exactly. Learning allocates the layers (free them with
 * sb_llama_state_layout_free).
 * Returns 0, or -1 with a message in err (err_len bytes, may be 0). */
int sb_llama_state_parse(const uint8_t *buf, size_t n, sb_llama_state_layout *layout,
                         int32_t want_seq, sb_llama_state_view *view, char *err,
                         size_t err_len);

/* sb_llama_state_layout_free -- free what learning allocated (the layout
 * itself is the caller's). */
void sb_llama_state_layout_free(sb_llama_state_layout *layout);

/* sb_llama_state_cell_pos -- the position of cell i of a parsed view. */
int32_t sb_llama_state_cell_pos(const sb_llama_state_view *view, uint32_t i);

/* sb_llama_state_cell_text -- 1 when cell i of a parsed view is a text
 * token's: no extension, or one of x = y = pos and tok == token; else 0. */
int sb_llama_state_cell_text(const sb_llama_state_view *view, uint32_t i, int32_t token);

/* sb_llama_state_bytes -- bytes of a state of n_cells cells in this layout
 * (what sb_llama_state_write needs); 0 when it would overflow. */
size_t sb_llama_state_bytes(const sb_llama_state_layout *layout, uint32_t n_cells);

/* sb_llama_state_write -- write the header, cells (positions pos0 ..
 * pos0 + n_cells - 1 of seq_id, all in stream 0) and per-layer field
 * headers of a state of n_cells cells into buf (sb_llama_state_bytes
 * long), and point k[l] and v[l] at where layer l's K rows and V (rows, or
 * transposed block) go; the caller fills them. With cell_ext, tokens
 * holds the n_cells tokens (their extensions are written as a text
 * token's); else it may be NULL. A recurrent layout's
 * recurrent part (rec_bytes) is the buffer's last bytes, left for the
 * caller to fill (a point state checked by sb_llama_state_rec_check). */
void sb_llama_state_write(const sb_llama_state_layout *layout, uint32_t n_cells, int32_t pos0,
                          int32_t seq_id, const uint32_t *tokens, uint8_t *buf, uint8_t **k,
                          uint8_t **v);

/* sb_llama_state_swa_bytes -- bytes of a sliding-window part of n_cells
 * cells (what sb_llama_state_write_swa writes). */
size_t sb_llama_state_swa_bytes(const sb_llama_state_layout *layout, uint32_t n_cells);

/* sb_llama_state_write_swa -- as sb_llama_state_write for the sliding-
 * window part alone (it goes right after the base part): its cells at
 * positions pos0 .. pos0 + n_cells - 1 in stream 0, k[l] and v[l] where
 * layer l's rows go. */
void sb_llama_state_write_swa(const sb_llama_state_layout *layout, uint32_t n_cells,
                              int32_t pos0, int32_t seq_id, const uint32_t *tokens, uint8_t *buf,
                              uint8_t **k, uint8_t **v);

/* sb_llama_state_rec_check -- rec (rec_bytes) is a recurrent part of this
 * layout (every field header the probe's) of one cell after position pos.
 * Returns 0, or -1 with a message in err. */
int sb_llama_state_rec_check(const sb_llama_state_layout *layout, const uint8_t *rec,
                             int32_t pos, char *err, size_t err_len);

/* sb_llama_state_transpose -- V between token-major rows (rows: n_cells
 * rows of n_embd elements of el bytes) and llama.cpp's transposed block
 * (block: element j of cell c at (j * n_cells + c) * el). to_rows 1 reads
 * the block and writes rows; 0 the other way. */
void sb_llama_state_transpose(uint8_t *rows, uint8_t *block, uint32_t n_cells, uint32_t n_embd,
                              uint32_t el, int to_rows);

#endif /* SB_LLAMA_STATE_H */
