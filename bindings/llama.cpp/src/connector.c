/* connector.c -- the llama.cpp connector: attach (probe, identity,
 * namespace), restore (match, read, write llama.cpp's state, set it),
 * save (export, parse, put the new tokens). snapbank_llama.h is the
 * contract; state.h is llama.cpp's state format. */
#define _POSIX_C_SOURCE 200809L
#include "snapbank_llama.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "state.h"

#define DEFAULT_PAGE_TOKENS 64u
#define MODEL_ID_MAX 512u
#define PROBE_TOKENS 2
#define CHUNK_TOKENS 1024u /* a chunked restore's step */

struct sb_llama {
    sb_store *st;
    struct llama_context *ctx;
    sb_ns *ns;
    sb_llama_state_layout lay;
    uint32_t page_tokens;
    int whole_pages;              /* saves stop at the last whole page */
    int recurrent;                /* a hybrid model: each state ends with
                                     its recurrent part, kept as the point
                                     state at its end */
    int swa;                      /* a sliding-window model: the window's
                                     cells are the point state at the end */
    int ends;                     /* recurrent or swa: state is kept only
                                     at a sequence's end (a boundary) */
    uint32_t swa_max;             /* swa: cells a window keeps at most */
    uint64_t point_bytes;         /* the namespace's point state; 0: none */
    uint8_t *swa_point;           /* swa: a save's point, built here */
    uint32_t *swa_at;             /* swa: a save's cell of each window position */
    const uint8_t **swa_rk, **swa_rv; /* swa: a parsed state's window layers */
    uint8_t **swa_wk, **swa_wv;   /* swa: a written state's */
    llama_seq_id scratch;         /* -1: none (or the cache has streams) */
    uint8_t identity[16];
    uint64_t bytes_per_token;
    /* reused between calls */
    uint8_t *buf;                 /* a state: exported, or built to restore */
    size_t buf_cap;
    uint8_t *vtmp;                /* a transposed V, token-major */
    size_t vtmp_cap;
    uint32_t *toks;               /* tokens as the bank takes them */
    size_t toks_cap;
    uint32_t *idx;                /* a save: the cell of each new position */
    size_t idx_cap;
    sb_block_table *tables;       /* 2 * n_layer */
    const uint8_t *point;         /* a save: the exported recurrent part */
    const uint8_t **rk, **rv;     /* a parsed state's layers */
    uint8_t **wk, **wv;           /* a written state's layers */
};

const char *sb_llama_strerror(int err)
{
    switch (err) {
    case SB_LLAMA_ERR_FORMAT:
        return "llama.cpp sequence state in a format the connector does not parse";
    case SB_LLAMA_ERR_SETTING:
        return "llama.cpp context setting the connector cannot keep state for";
    case SB_LLAMA_ERR_DECODE:
        return "a llama.cpp call failed (decode, or a sequence state get or set)";
    case SB_LLAMA_ERR_SEQ:
        return "llama.cpp sequence not as the call needs it";
    case SB_LLAMA_ERR_MODEL_FILE:
        return "model file could not be read for its digest";
    default:
        return sb_strerror(err);
    }
}

void sb_llama_config_default(sb_llama_config *cfg)
{
    if (!cfg)
        return;
    memset(cfg, 0, sizeof *cfg);
    cfg->page_tokens = DEFAULT_PAGE_TOKENS;
    cfg->probe_seq = 0;
    cfg->scratch_seq = -1;
}

__attribute__((format(printf, 3, 4))) static void say(char *err, size_t err_len, const char *fmt,
                                                    ...)
{
    if (!err || !err_len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Grow *p to at least n bytes (contents not kept). */
static int reserve(void **p, size_t *cap, size_t n)
{
    if (n <= *cap)
        return 0;
    void *q = malloc(n);
    if (!q)
        return -1;
    free(*p);
    *p = q;
    *cap = n;
    return 0;
}

/* ---- attach ---------------------------------------------------------------------- */

/* XXH3-128 of the whole file, remembered for the process by device,
 * inode, size and modification time, so attaching a second context to
 * the same model does not read it again. */
#define DIGESTS 8
static struct digest_memo {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    uint8_t digest[16];
} memo[DIGESTS];
static unsigned memo_next;
static pthread_mutex_t memo_lock = PTHREAD_MUTEX_INITIALIZER;

static int memo_find(const struct stat *st, uint8_t out[16])
{
    int hit = 0;
    pthread_mutex_lock(&memo_lock);
    for (unsigned i = 0; i < DIGESTS && !hit; i++) {
        const struct digest_memo *d = &memo[i];
        if (d->size == st->st_size && d->dev == st->st_dev && d->ino == st->st_ino &&
            d->mtime.tv_sec == st->st_mtim.tv_sec && d->mtime.tv_nsec == st->st_mtim.tv_nsec &&
            d->size > 0) {
            memcpy(out, d->digest, 16);
            hit = 1;
        }
    }
    pthread_mutex_unlock(&memo_lock);
    return hit;
}

static void memo_add(const struct stat *st, const uint8_t digest[16])
{
    pthread_mutex_lock(&memo_lock);
    struct digest_memo *d = &memo[memo_next++ % DIGESTS];
    d->dev = st->st_dev;
    d->ino = st->st_ino;
    d->size = st->st_size;
    d->mtime = st->st_mtim;
    memcpy(d->digest, digest, 16);
    pthread_mutex_unlock(&memo_lock);
}

static int file_digest(const char *path, uint8_t out[16], char *err, size_t err_len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        say(err, err_len, "%s: %s", path, strerror(errno));
        return SB_LLAMA_ERR_MODEL_FILE;
    }
    struct stat before, after;
    if (fstat(fd, &before) == 0 && memo_find(&before, out)) {
        close(fd);
        return SB_OK;
    }
    size_t cap = 8u << 20;
    uint8_t *b = malloc(cap);
    XXH3_state_t *s = XXH3_createState();
    int rc = SB_OK;
    if (!b || !s) {
        rc = SB_ERR_NOMEM;
        goto out;
    }
    XXH3_128bits_reset(s);
    for (;;) {
        ssize_t got = read(fd, b, cap);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            say(err, err_len, "%s: %s", path, strerror(errno));
            rc = SB_LLAMA_ERR_MODEL_FILE;
            goto out;
        }
        if (got == 0)
            break;
        XXH3_128bits_update(s, b, (size_t)got);
    }
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits_digest(s));
    memcpy(out, c.digest, 16);
    /* remembered only when the file did not change while it was read */
    if (fstat(fd, &after) == 0 && after.st_size == before.st_size &&
        after.st_mtim.tv_sec == before.st_mtim.tv_sec &&
        after.st_mtim.tv_nsec == before.st_mtim.tv_nsec)
        memo_add(&after, out);
out:
    XXH3_freeState(s);
    free(b);
    close(fd);
    return rc;
}

/* The memory kinds the connector keeps: one KV cache, or a hybrid's KV
 * cache and recurrent state (without llama.cpp's experimental rollback
 * snapshots, which widen the recurrent tensors). */
static int model_known(const struct llama_context *ctx, char *err, size_t err_len)
{
    const struct llama_model *m = llama_get_model(ctx);
    const char *why = NULL;
    if (llama_model_is_recurrent(m))
        why = "a recurrent model with no KV cache (its state has no per-token part to page)";
    else if (llama_model_is_hybrid(m) && llama_n_rs_seq(ctx) != 0)
        why = "a hybrid model with recurrent rollback snapshots (n_rs_seq)";
    else if (llama_model_n_swa(m) > 0 && llama_model_is_hybrid(m))
        why = "a hybrid model with a sliding-window cache";
    else if (llama_model_has_encoder(m))
        why = "an encoder-decoder model";
    if (!why)
        return SB_OK;
    say(err, err_len, "llama.cpp connector: %s is not supported yet", why);
    return SB_LLAMA_ERR_FORMAT;
}

static int decode_at(struct llama_context *ctx, const llama_token *t, int n, llama_pos pos0,
                     llama_seq_id seq)
{
    struct llama_batch b = llama_batch_init(n, 0, 1);
    if (!b.token)
        return -1;
    for (int i = 0; i < n; i++) {
        b.token[i] = t[i];
        b.pos[i] = pos0 + i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = seq;
        b.logits[i] = i == n - 1;
    }
    b.n_tokens = n;
    int rc = llama_decode(ctx, b);
    llama_batch_free(b);
    return rc;
}

/* Read sequence seq's state into sl->buf; *n its bytes. */
static int export_seq(sb_llama *sl, llama_seq_id seq, size_t *n)
{
    size_t want = llama_state_seq_get_size(sl->ctx, seq);
    if (want == 0)
        return SB_LLAMA_ERR_DECODE;
    if (reserve((void **)&sl->buf, &sl->buf_cap, want))
        return SB_ERR_NOMEM;
    size_t got = llama_state_seq_get_data(sl->ctx, sl->buf, want, seq);
    if (got == 0 || got > want)
        return SB_LLAMA_ERR_DECODE;
    *n = got;
    return SB_OK;
}

static int seq_ok(const sb_llama *sl, llama_seq_id seq)
{
    return seq >= 0 && (uint32_t)seq < llama_n_seq_max(sl->ctx);
}

/* Decode the probe into probe_seq, learn the layout from its state. */
static int probe(sb_llama *sl, const sb_llama_config *cfg, char *err, size_t err_len)
{
    llama_memory_t mem = llama_get_memory(sl->ctx);
    llama_seq_id seq = cfg->probe_seq;
    if (!seq_ok(sl, seq) || !mem || llama_memory_seq_pos_max(mem, seq) != -1) {
        say(err, err_len, "llama.cpp connector: probe sequence %d is out of range or not empty",
            seq);
        return SB_LLAMA_ERR_SETTING;
    }
    const struct llama_vocab *vocab = llama_model_get_vocab(llama_get_model(sl->ctx));
    llama_token bos = llama_vocab_bos(vocab);
    llama_token t[PROBE_TOKENS] = { bos >= 0 ? bos : 0, 0 };
    if (decode_at(sl->ctx, t, PROBE_TOKENS, 0, seq) != 0) {
        llama_memory_seq_rm(mem, seq, -1, -1);
        say(err, err_len, "llama.cpp connector: the probe's decode failed");
        return SB_LLAMA_ERR_DECODE;
    }
    size_t n = 0;
    int rc = export_seq(sl, seq, &n);
    llama_memory_seq_rm(mem, seq, -1, -1);
    if (rc != SB_OK) {
        say(err, err_len, "llama.cpp connector: reading the probe's state failed");
        return rc;
    }
    sb_llama_state_view view;
    char why[192];
    view.k = view.v = view.swa_k = view.swa_v = NULL;
    if (sb_llama_state_parse(sl->buf, n, &sl->lay, seq, &view, why, sizeof why) != 0) {
        say(err, err_len, "llama.cpp connector: the probe's sequence state does not parse: %s",
            why);
        return SB_LLAMA_ERR_FORMAT;
    }
    if (sl->recurrent && view.rec_pos != PROBE_TOKENS - 1) {
        say(err, err_len, "llama.cpp connector: the probe's recurrent state is after position "
            "%d, not %d", view.rec_pos, PROBE_TOKENS - 1);
        return SB_LLAMA_ERR_FORMAT;
    }
    if (sl->swa && (view.swa_n_cells == 0 || view.swa_n_cells > PROBE_TOKENS)) {
        say(err, err_len, "llama.cpp connector: the probe's sliding-window cache holds %u "
            "cells, not 1 or 2", view.swa_n_cells);
        return SB_LLAMA_ERR_FORMAT;
    }
    if (view.n_cells != PROBE_TOKENS || sb_llama_state_cell_pos(&view, 0) +
                                                sb_llama_state_cell_pos(&view, 1) != 1) {
        say(err, err_len, "llama.cpp connector: the probe's state holds %u cells, not "
            "positions 0 and 1", view.n_cells);
        return SB_LLAMA_ERR_FORMAT;
    }
    for (uint32_t c = 0; c < PROBE_TOKENS; c++) {
        if (!sb_llama_state_cell_text(&view, c, t[sb_llama_state_cell_pos(&view, c)])) {
            say(err, err_len, "llama.cpp connector: the probe's cell %u carries an extension "
                "that is not a text token's (x = y = pos, its token)", c);
            return SB_LLAMA_ERR_FORMAT;
        }
    }
    const struct llama_context_params *cp = cfg->cparams;
    uint32_t n_kv = sl->lay.n_layer + sl->lay.swa_kv.n_layer;
    for (uint32_t i = 0; i < n_kv; i++) {
        uint32_t l = i < sl->lay.n_layer ? i : i - sl->lay.n_layer;
        const sb_llama_state_layer *L = i < sl->lay.n_layer ? &sl->lay.layers[l]
                                                             : &sl->lay.swa_kv.layers[l];
        if (L->k_type != (int32_t)cp->type_k || L->v_type != (int32_t)cp->type_v) {
            say(err, err_len, "llama.cpp connector: layer %u keeps K as %s and V as %s, the "
                "context parameters say %s and %s", l, ggml_type_name(L->k_type),
                ggml_type_name(L->v_type), ggml_type_name(cp->type_k), ggml_type_name(cp->type_v));
            return SB_LLAMA_ERR_SETTING;
        }
    }
    return SB_OK;
}

/* The namespace identity: the model, the layout, the settings that move K
 * and V. */
static void identity(sb_llama *sl, const uint8_t *model, size_t model_bytes,
                     const struct llama_context_params *cp)
{
    static const char tag[] = "snapbank llama.cpp connector KV";
    XXH3_state_t *s = XXH3_createState();
    XXH3_128bits_reset(s);
    XXH3_128bits_update(s, tag, sizeof tag);
    uint32_t head[] = { SB_LLAMA_VERSION, (uint32_t)model_bytes, sl->lay.v_trans,
                        sl->lay.n_layer };
    XXH3_128bits_update(s, head, sizeof head);
    XXH3_128bits_update(s, model, model_bytes);
    for (uint32_t l = 0; l < sl->lay.n_layer; l++) {
        const sb_llama_state_layer *L = &sl->lay.layers[l];
        uint64_t d[] = { (uint64_t)L->k_type, L->k_row, (uint64_t)L->v_type, L->v_row };
        XXH3_128bits_update(s, d, sizeof d);
    }
    /* (a model with one KV cache and plain cells hashes as it did before
     * these parts were known) */
    for (uint32_t r = 0; r < sl->lay.n_rec; r++) {
        const sb_llama_state_rec *R = &sl->lay.rec[r];
        uint64_t d[] = { (uint64_t)R->r_type, R->r_row, (uint64_t)R->s_type, R->s_row };
        XXH3_128bits_update(s, d, sizeof d);
    }
    for (uint32_t l = 0; l < sl->lay.swa_kv.n_layer; l++) {
        const sb_llama_state_layer *L = &sl->lay.swa_kv.layers[l];
        uint64_t d[] = { (uint64_t)L->k_type, L->k_row, (uint64_t)L->v_type, L->v_row };
        XXH3_128bits_update(s, d, sizeof d);
    }
    if (sl->lay.recurrent || sl->lay.cell_ext || sl->lay.swa) {
        uint32_t more[] = { sl->lay.recurrent, sl->lay.n_layer_all, sl->lay.cell_ext,
                            sl->lay.swa, sl->swa_max, sl->lay.swa_kv.v_trans };
        XXH3_128bits_update(s, more, sizeof more);
    }
    float f[] = { cp->rope_freq_base, cp->rope_freq_scale, cp->yarn_ext_factor,
                  cp->yarn_attn_factor, cp->yarn_beta_fast, cp->yarn_beta_slow };
    XXH3_128bits_update(s, f, sizeof f);
    int32_t i[] = { (int32_t)cp->rope_scaling_type, (int32_t)cp->yarn_orig_ctx,
                    (int32_t)cp->type_k, (int32_t)cp->type_v };
    XXH3_128bits_update(s, i, sizeof i);
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits_digest(s));
    memcpy(sl->identity, c.digest, 16);
    XXH3_freeState(s);
}

static int open_ns(sb_llama *sl, const sb_llama_config *cfg)
{
    uint32_t n = 2 * sl->lay.n_layer;
    uint32_t *bpt = malloc(n * sizeof *bpt);
    if (!bpt)
        return SB_ERR_NOMEM;
    int elem16 = 1;
    for (uint32_t l = 0; l < sl->lay.n_layer; l++) {
        const sb_llama_state_layer *L = &sl->lay.layers[l];
        bpt[2 * l] = (uint32_t)L->k_row;
        bpt[2 * l + 1] = (uint32_t)L->v_row;
        sl->bytes_per_token += L->k_row + L->v_row;
        elem16 &= (L->k_type == GGML_TYPE_F16 || L->k_type == GGML_TYPE_BF16) &&
                  (L->v_type == GGML_TYPE_F16 || L->v_type == GGML_TYPE_BF16);
    }
    sb_layout lay = { .model_id = sl->identity, .model_id_bytes = sizeof sl->identity,
                      .page_tokens = sl->page_tokens, .n_tensors = n, .bytes_per_token = bpt,
                      .flags = elem16 ? SB_LAYOUT_ELEM16 : 0 };
    if (sl->point_bytes) {
        lay.point_bytes = (uint32_t)sl->point_bytes;
        lay.flags |= SB_LAYOUT_POINT_REQUIRED;
    }
    int rc = sb_ns_open(sl->st, &lay, cfg->scope, cfg->scope_bytes, &sl->ns);
    free(bpt);
    return rc;
}

/* Restores go a chunk at a time through the scratch sequence: not for a
 * hybrid, whose recurrent state llama.cpp copies whole (seq_cp shares the
 * source's one cell), nor a sliding-window model, whose window goes with
 * the last chunk's state: their state is set in one piece. */
static int chunked(const sb_llama *sl)
{
    return sl->scratch >= 0 && !sl->ends;
}

/* The bank's page buffers for n tokens, and the staging buffers of the
 * restores: allocated and touched now. */
static int prefault(sb_llama *sl, size_t n)
{
    int rc = sb_ns_prefault(sl->ns, (n + sl->page_tokens - 1) / sl->page_tokens, NULL);
    if (rc != SB_OK)
        return rc;
    /* a chunked restore stages a chunk, one in one piece the whole */
    size_t cells = chunked(sl) && n > CHUNK_TOKENS ? CHUNK_TOKENS : n;
    size_t b = sb_llama_state_bytes(&sl->lay, (uint32_t)cells);
    if (b && sl->swa)
        b += sb_llama_state_swa_bytes(&sl->lay, sl->swa_max);
    if (b == 0 || reserve((void **)&sl->buf, &sl->buf_cap, b))
        return SB_ERR_NOMEM;
    memset(sl->buf, 0, b);
    if (sl->lay.v_trans) {
        size_t v = 0;
        for (uint32_t l = 0; l < sl->lay.n_layer; l++)
            v = sl->lay.layers[l].v_row > v ? sl->lay.layers[l].v_row : v;
        if (reserve((void **)&sl->vtmp, &sl->vtmp_cap, v * cells))
            return SB_ERR_NOMEM;
        memset(sl->vtmp, 0, v * cells);
    }
    return SB_OK;
}

/* The point state's size: a hybrid's recurrent part, or a sliding-window
 * model's window (state.h: 8 bytes of count and first position, then each
 * window layer's K rows and token-major V rows for swa_max cells). */
static int point_layout(sb_llama *sl, char *err, size_t err_len)
{
    uint64_t b = 0;
    if (sl->recurrent) {
        b = sl->lay.rec_bytes;
    } else if (sl->swa) {
        uint64_t row = 0;
        for (uint32_t l = 0; l < sl->lay.swa_kv.n_layer; l++)
            row += sl->lay.swa_kv.layers[l].k_row + sl->lay.swa_kv.layers[l].v_row;
        b = 8 + row * sl->swa_max;
    }
    if (b > SB_POINT_BYTES_MAX) {
        say(err, err_len, "llama.cpp connector: a point state of %llu bytes (the %s) is over "
            "the bank's limit", (unsigned long long)b,
            sl->recurrent ? "recurrent state" : "sliding window's cells");
        return SB_LLAMA_ERR_SETTING;
    }
    sl->point_bytes = b;
    return SB_OK;
}

int sb_llama_attach(sb_store *st, struct llama_context *ctx, const sb_llama_config *cfg,
                    sb_llama **out, char *err, size_t err_len)
{
    if (out)
        *out = NULL;
    if (err && err_len)
        err[0] = '\0';
    if (!st || !ctx || !cfg || !cfg->cparams || !out ||
        !cfg->model_path == !cfg->model_id || (cfg->model_id && (cfg->model_id_bytes == 0 ||
                                                                 cfg->model_id_bytes > MODEL_ID_MAX))) {
        say(err, err_len, "llama.cpp connector: attach needs a store, a context, its "
            "parameters, and one of a model path or a model id (1 .. %u bytes)", MODEL_ID_MAX);
        return SB_ERR_INVAL;
    }
    int rc = model_known(ctx, err, err_len);
    if (rc != SB_OK)
        return rc;
    sb_llama *sl = calloc(1, sizeof *sl);
    if (!sl)
        return SB_ERR_NOMEM;
    sl->st = st;
    sl->ctx = ctx;
    sl->page_tokens = cfg->page_tokens ? cfg->page_tokens : DEFAULT_PAGE_TOKENS;
    sl->whole_pages = cfg->whole_pages != 0;
    sl->recurrent = llama_model_is_hybrid(llama_get_model(ctx));
    sl->lay.recurrent = (uint32_t)sl->recurrent;
    int32_t n_swa = llama_model_n_swa(llama_get_model(ctx));
    sl->swa = n_swa > 0;
    sl->lay.swa = (uint32_t)sl->swa;
    sl->swa_max = sl->swa ? (uint32_t)n_swa + 1 : 0;
    sl->ends = sl->recurrent || sl->swa;
    int rope = llama_model_rope_type(llama_get_model(ctx));
    sl->lay.cell_ext = rope == LLAMA_ROPE_TYPE_MROPE || rope == LLAMA_ROPE_TYPE_IMROPE;
    if (sl->ends && sl->whole_pages) {
        say(err, err_len, "llama.cpp connector: whole_pages with a %s model: its %s exists "
            "only at the sequence's end, so a save cannot stop at a page",
            sl->recurrent ? "hybrid" : "sliding-window",
            sl->recurrent ? "recurrent state" : "window");
        rc = SB_LLAMA_ERR_SETTING;
        goto fail;
    }
    rc = probe(sl, cfg, err, err_len);
    if (rc != SB_OK)
        goto fail;
    /* A partial copy between streams is not something llama.cpp does
     * (llama_kv_cache::seq_cp), so a scratch sequence helps only one. */
    sl->scratch = cfg->scratch_seq;
    if (sl->scratch >= 0 && (!seq_ok(sl, sl->scratch) || sl->lay.n_stream != 1))
        sl->scratch = -1;
    uint8_t digest[16];
    const uint8_t *model = cfg->model_id;
    size_t model_bytes = cfg->model_id_bytes;
    if (cfg->model_path) {
        rc = file_digest(cfg->model_path, digest, err, err_len);
        if (rc != SB_OK)
            goto fail;
        model = digest;
        model_bytes = sizeof digest;
    }
    identity(sl, model, model_bytes, cfg->cparams);
    rc = point_layout(sl, err, err_len);
    if (rc != SB_OK)
        goto fail;
    uint32_t nl = sl->lay.n_layer, ns = sl->lay.swa_kv.n_layer + 1;
    sl->swa_rk = calloc(ns, sizeof *sl->swa_rk);
    sl->swa_rv = calloc(ns, sizeof *sl->swa_rv);
    sl->swa_wk = calloc(ns, sizeof *sl->swa_wk);
    sl->swa_wv = calloc(ns, sizeof *sl->swa_wv);
    sl->swa_point = sl->swa ? malloc(sl->point_bytes) : NULL;
    sl->swa_at = sl->swa ? malloc(sl->swa_max * sizeof *sl->swa_at) : NULL;
    if (!sl->swa_rk || !sl->swa_rv || !sl->swa_wk || !sl->swa_wv ||
        (sl->swa && (!sl->swa_point || !sl->swa_at))) {
        rc = SB_ERR_NOMEM;
        goto fail;
    }
    sl->tables = calloc(2 * (size_t)nl, sizeof *sl->tables);
    sl->rk = calloc(nl, sizeof *sl->rk);
    sl->rv = calloc(nl, sizeof *sl->rv);
    sl->wk = calloc(nl, sizeof *sl->wk);
    sl->wv = calloc(nl, sizeof *sl->wv);
    if (!sl->tables || !sl->rk || !sl->rv || !sl->wk || !sl->wv) {
        rc = SB_ERR_NOMEM;
        goto fail;
    }
    rc = open_ns(sl, cfg);
    if (rc != SB_OK) {
        say(err, err_len, "llama.cpp connector: opening the namespace: %s", sb_strerror(rc));
        goto fail;
    }
    if (cfg->prefault_tokens) {
        rc = prefault(sl, cfg->prefault_tokens);
        if (rc != SB_OK) {
            say(err, err_len, "llama.cpp connector: prefaulting for %zu tokens: %s",
                cfg->prefault_tokens, sb_strerror(rc));
            goto fail;
        }
    }
    *out = sl;
    return SB_OK;
fail:
    sb_llama_detach(sl);
    return rc;
}

void sb_llama_detach(sb_llama *sl)
{
    if (!sl)
        return;
    sb_ns_close(sl->ns);
    sb_llama_state_layout_free(&sl->lay);
    free(sl->swa_point);
    free(sl->swa_at);
    free(sl->swa_rk);
    free(sl->swa_rv);
    free(sl->swa_wk);
    free(sl->swa_wv);
    free(sl->buf);
    free(sl->vtmp);
    free(sl->toks);
    free(sl->idx);
    free(sl->tables);
    free(sl->rk);
    free(sl->rv);
    free(sl->wk);
    free(sl->wv);
    free(sl);
}

int sb_llama_get_info(const sb_llama *sl, sb_llama_info *out)
{
    if (!sl || !out)
        return SB_ERR_INVAL;
    memset(out, 0, sizeof *out);
    out->n_layer = sl->lay.n_layer;
    out->v_trans = sl->lay.v_trans;
    out->k_type = sl->lay.layers[0].k_type;
    out->v_type = sl->lay.layers[0].v_type;
    out->bytes_per_token = sl->bytes_per_token;
    out->page_tokens = sl->page_tokens;
    memcpy(out->identity, sl->identity, sizeof out->identity);
    out->ns = sl->ns;
    out->n_layer_recurrent = sl->lay.n_rec;
    out->point_bytes = sl->point_bytes;
    out->n_layer_swa = sl->lay.swa_kv.n_layer;
    return SB_OK;
}

/* The caller's tokens as the bank's. */
static int bank_tokens(sb_llama *sl, const llama_token *tokens, size_t n)
{
    if (reserve((void **)&sl->toks, &sl->toks_cap, (n ? n : 1) * sizeof *sl->toks))
        return SB_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        if (tokens[i] < 0)
            return SB_ERR_INVAL;
        sl->toks[i] = (uint32_t)tokens[i];
    }
    return SB_OK;
}

/* ---- a sliding-window model's point state ------------------------------------------ */

/* Where window layer l's K (or V) rows start in a point. */
static size_t swa_off(const sb_llama *sl, uint32_t l, int v)
{
    const sb_llama_state_kv *kv = &sl->lay.swa_kv;
    size_t off = 8;
    for (uint32_t j = 0; j < kv->n_layer; j++)
        off += (v ? kv->layers[j].k_row : 0) * sl->swa_max;
    for (uint32_t j = 0; j < l; j++)
        off += (v ? kv->layers[j].v_row : kv->layers[j].k_row) * sl->swa_max;
    return off;
}

/* A save: the window's cells of a parsed state of positions .. n - 1 (each
 * of n - c .. n - 1 once, c <= swa_max, text tokens) into sl->swa_point,
 * rows in position order, V token-major. */
static int swa_point_from(sb_llama *sl, const sb_llama_state_view *view, size_t n)
{
    const sb_llama_state_kv *kv = &sl->lay.swa_kv;
    uint32_t c = view->swa_n_cells;
    if (c == 0 || c > sl->swa_max || c > n)
        return SB_LLAMA_ERR_FORMAT;
    size_t pos0 = n - c;
    sb_llama_state_view w = *view;
    w.cells = view->swa_cells;
    w.n_cells = c;
    uint32_t *at = sl->swa_at; /* the cell of each position */
    memset(at, 0xff, (size_t)c * sizeof *at);
    for (uint32_t i = 0; i < c; i++) {
        int32_t pos = sb_llama_state_cell_pos(&w, i);
        if (pos < (int32_t)pos0 || (size_t)pos >= n || at[pos - pos0] != UINT32_MAX ||
            !sb_llama_state_cell_text(&w, i, (int32_t)sl->toks[pos]))
            return SB_LLAMA_ERR_SEQ;
        at[pos - pos0] = i;
    }
    uint8_t *pt = sl->swa_point;
    memset(pt, 0, sl->point_bytes);
    memcpy(pt, &c, 4);
    int32_t p0 = (int32_t)pos0;
    memcpy(pt + 4, &p0, 4);
    for (uint32_t l = 0; l < kv->n_layer; l++) {
        const sb_llama_state_layer *L = &kv->layers[l];
        const uint8_t *vrows = view->swa_v[l];
        if (kv->v_trans) {
            if (reserve((void **)&sl->vtmp, &sl->vtmp_cap, L->v_row * c))
                return SB_ERR_NOMEM;
            sb_llama_state_transpose(sl->vtmp, (uint8_t *)view->swa_v[l], c, L->n_embd_v, L->v_el,
                                     1);
            vrows = sl->vtmp;
        }
        uint8_t *k = pt + swa_off(sl, l, 0), *v = pt + swa_off(sl, l, 1);
        for (uint32_t i = 0; i < c; i++) {
            memcpy(k + (size_t)i * L->k_row, view->swa_k[l] + (size_t)at[i] * L->k_row, L->k_row);
            memcpy(v + (size_t)i * L->v_row, vrows + (size_t)at[i] * L->v_row, L->v_row);
        }
    }
    return SB_OK;
}

/* A restore to L: the window's cells from point pt written as the state's
 * sliding-window part at buf (swa_bytes long, from swa_cells). */
static int swa_cells_of(const sb_llama *sl, const uint8_t *pt, size_t L, uint32_t *c)
{
    int32_t pos0;
    memcpy(c, pt, 4);
    memcpy(&pos0, pt + 4, 4);
    if (*c == 0 || *c > sl->swa_max || pos0 < 0 || (size_t)pos0 + *c != L)
        return SB_LLAMA_ERR_FORMAT;
    return SB_OK;
}

static int swa_write(sb_llama *sl, const uint8_t *pt, uint32_t c, size_t L, llama_seq_id seq,
                     uint8_t *buf)
{
    const sb_llama_state_kv *kv = &sl->lay.swa_kv;
    size_t pos0 = L - c;
    sb_llama_state_write_swa(&sl->lay, c, (int32_t)pos0, seq, sl->toks + pos0, buf, sl->swa_wk,
                             sl->swa_wv);
    for (uint32_t l = 0; l < kv->n_layer; l++) {
        const sb_llama_state_layer *Ly = &kv->layers[l];
        memcpy(sl->swa_wk[l], pt + swa_off(sl, l, 0), (size_t)c * Ly->k_row);
        if (!kv->v_trans)
            memcpy(sl->swa_wv[l], pt + swa_off(sl, l, 1), (size_t)c * Ly->v_row);
        else /* rows to llama.cpp's block (the transpose only reads the rows) */
            sb_llama_state_transpose((uint8_t *)(uintptr_t)(pt + swa_off(sl, l, 1)), sl->swa_wv[l],
                                     c, Ly->n_embd_v, Ly->v_el, 0);
    }
    return SB_OK;
}

/* ---- restore --------------------------------------------------------------------- */

/* Build the state of the match's positions [from, from + n) in sl->buf, as
 * cells of sequence seq; *bytes its size. A page that fails to read
 * shrinks the match (SB_ERR_CORRUPT, SB_ERR_IO): the caller asks again. */
static int build_state(sb_llama *sl, sb_match *m, size_t from, size_t n, llama_seq_id seq,
                       size_t *bytes)
{
    const sb_llama_state_layout *lay = &sl->lay;
    /* A boundary's point state: the match's, checked to be one of this
     * layout at exactly its end. */
    const uint8_t *pt = NULL;
    uint32_t swa_c = 0;
    size_t extra = 0;
    if (sl->ends) {
        pt = sb_match_point(m);
        if (!pt) {
            sb_match_info mi;
            sb_match_get_info(m, &mi);
            return mi.n_tokens < from + n ? SB_ERR_CORRUPT : SB_ERR_NO_POINT;
        }
        if (sl->recurrent &&
            sb_llama_state_rec_check(lay, pt, (int32_t)(from + n) - 1, NULL, 0) != 0)
            return SB_LLAMA_ERR_FORMAT;
        if (sl->swa) {
            if (swa_cells_of(sl, pt, from + n, &swa_c) != SB_OK)
                return SB_LLAMA_ERR_FORMAT;
            extra = sb_llama_state_swa_bytes(lay, swa_c);
        }
    }
    size_t b = sb_llama_state_bytes(lay, (uint32_t)n);
    if (b == 0 || reserve((void **)&sl->buf, &sl->buf_cap, b + extra))
        return SB_ERR_NOMEM;
    sb_llama_state_write(lay, (uint32_t)n, (int32_t)from, seq, sl->toks + from, sl->buf, sl->wk,
                         sl->wv);
    if (lay->v_trans) {
        size_t vmax = 0;
        for (uint32_t l = 0; l < lay->n_layer; l++)
            if (lay->layers[l].v_row > vmax)
                vmax = lay->layers[l].v_row;
        if (reserve((void **)&sl->vtmp, &sl->vtmp_cap, vmax * n))
            return SB_ERR_NOMEM;
    }
    if (!lay->v_trans) {
        /* Every layer's K and V straight into the state, one pass over
         * each page. */
        for (uint32_t l = 0; l < lay->n_layer; l++) {
            sl->tables[2 * l] = (sb_block_table){ .base = sl->wk[l], .first_pos = from };
            sl->tables[2 * l + 1] = (sb_block_table){ .base = sl->wv[l], .first_pos = from };
        }
        int rc = sb_match_restore_blocks(m, from, n, 0, 2 * lay->n_layer, sl->tables);
        if (rc != SB_OK)
            return rc;
    }
    for (uint32_t l = 0; lay->v_trans && l < lay->n_layer; l++) {
        /* K straight into the state; V token-major, then transposed. */
        const sb_llama_state_layer *L = &lay->layers[l];
        sb_block_table t[2] = { { .base = sl->wk[l], .first_pos = from },
                                { .base = sl->vtmp, .first_pos = from } };
        int rc = sb_match_restore_blocks(m, from, n, 2 * l, 2, t);
        if (rc != SB_OK)
            return rc;
        sb_llama_state_transpose(sl->vtmp, sl->wv[l], (uint32_t)n, L->n_embd_v, L->v_el, 0);
    }
    if (sl->recurrent) /* the recurrent part, last */
        memcpy(sl->buf + b - lay->rec_bytes, pt, lay->rec_bytes);
    if (sl->swa) /* the window's cells after the base cache's */
        swa_write(sl, pt, swa_c, from + n, seq, sl->buf + b);
    *bytes = b + extra;
    return SB_OK;
}

/* A restore in progress: the match, how far it can go, the clocks. */
typedef struct restoring {
    sb_match *m;
    sb_load *ld;                  /* the disk reads, ahead of the chunks */
    size_t n;                     /* tokens to restore (shrinks on a bad page) */
    sb_miss miss;
    double set_ms;                /* in llama_state_seq_set_data */
} restoring;

/* A page failed: the match shrank; n follows it. */
static void shrunk(restoring *r)
{
    sb_match_info mi;
    sb_match_get_info(r->m, &mi);
    if (mi.n_tokens < r->n) {
        r->n = mi.n_tokens;
        r->miss = mi.miss;
    }
}

/* Positions [from, to) of the match into sequence `into` (the target, or
 * the scratch sequence of a chunked restore). to may shrink with r->n. */
static int restore_range(sb_llama *sl, restoring *r, size_t from, size_t to, llama_seq_id into,
                         size_t *done)
{
    *done = from;
    int rc = SB_OK;
    size_t bytes = 0;
    for (;;) {
        if (r->ld) {
            size_t need = (to + sl->page_tokens - 1) / sl->page_tokens;
            rc = sb_load_wait(r->ld, need, -1, NULL);
            if (rc == SB_ERR_CORRUPT || rc == SB_ERR_IO)
                shrunk(r);
            else if (rc != SB_OK)
                return rc;
        }
        if (to > r->n)
            to = r->n;
        if (to <= from)
            return SB_OK;
        rc = build_state(sl, r->m, from, to - from, into, &bytes);
        if (rc != SB_ERR_CORRUPT && rc != SB_ERR_IO)
            break;
        shrunk(r);
    }
    if (rc != SB_OK)
        return rc;
    double t1 = now_ms();
    size_t set = llama_state_seq_set_data(sl->ctx, sl->buf, bytes, into);
    r->set_ms += now_ms() - t1;
    if (set != bytes)
        return SB_LLAMA_ERR_DECODE;
    *done = to;
    return SB_OK;
}

/* Restore r->n tokens into seq. With a scratch sequence (one stream), a
 * chunk at a time: each chunk's state goes into the scratch sequence and
 * is copied to seq (llama_memory_seq_cp in one cache moves no bytes), so
 * the staging buffer stays a chunk long and the disk reads, started first,
 * run ahead of the chunks. Else the whole state at once. */
static int restore_all(sb_llama *sl, restoring *r, llama_seq_id seq)
{
    llama_memory_t mem = llama_get_memory(sl->ctx);
    size_t pages = (r->n + sl->page_tokens - 1) / sl->page_tokens;
    if (sb_match_load_start(r->m, pages, sl->ends, &r->ld) != SB_OK)
        r->ld = NULL; /* the restores read what they need themselves */
    int rc = SB_OK;
    size_t done = 0;
    if (!chunked(sl) || sl->scratch == seq) {
        rc = restore_range(sl, r, 0, r->n, seq, &done);
    } else {
        size_t chunk = CHUNK_TOKENS / sl->page_tokens * sl->page_tokens;
        if (chunk == 0)
            chunk = sl->page_tokens;
        while (rc == SB_OK && done < r->n) {
            size_t from = done;
            rc = restore_range(sl, r, from, from + chunk, sl->scratch, &done);
            if (rc == SB_OK && done > from)
                llama_memory_seq_cp(mem, sl->scratch, seq, (llama_pos)from, (llama_pos)done);
            llama_memory_seq_rm(mem, sl->scratch, -1, -1);
        }
    }
    sb_load_free(r->ld);
    r->ld = NULL;
    if (rc != SB_OK)
        llama_memory_seq_rm(mem, seq, -1, -1);
    else
        r->n = done;
    return rc;
}

/* Match (and fetch from the shared tier when short); *m is the match. */
static int find(sb_llama *sl, size_t want, sb_match **m, sb_match_info *mi, size_t *remote)
{
    *remote = 0;
    int rc = sb_ns_match(sl->ns, sl->toks, want, m);
    if (rc != SB_OK)
        return rc;
    sb_match_get_info(*m, mi);
    if (mi->n_tokens >= want || !sb_store_has_shared(sl->st))
        return SB_OK;
    size_t before = mi->n_tokens, added = 0;
    sb_match_release(*m);
    *m = NULL;
    (void)sb_ns_fetch_shared(sl->ns, sl->toks, want, &added); /* a failure is a miss */
    rc = sb_ns_match(sl->ns, sl->toks, want, m);
    if (rc != SB_OK)
        return rc;
    sb_match_get_info(*m, mi);
    if (added && mi->n_tokens > before)
        *remote = mi->n_tokens - before;
    return SB_OK;
}

int sb_llama_restore(sb_llama *sl, llama_seq_id seq, const llama_token *tokens,
                     size_t n_tokens, size_t max_tokens, sb_llama_restore_info *info)
{
    double t0 = now_ms();
    sb_llama_restore_info ri = { 0 };
    ri.miss = SB_MISS_NO_PREFIX;
    if (info)
        *info = ri;
    if (!sl || !tokens || max_tokens > n_tokens)
        return SB_ERR_INVAL;
    llama_memory_t mem = llama_get_memory(sl->ctx);
    if (!seq_ok(sl, seq) || llama_memory_seq_pos_max(mem, seq) != -1)
        return SB_LLAMA_ERR_SEQ;
    int rc = bank_tokens(sl, tokens, max_tokens);
    if (rc != SB_OK)
        return rc;
    if (max_tokens == 0) {
        ri.miss = SB_MISS_NONE;
        goto done;
    }
    sb_match *m = NULL;
    sb_match_info mi;
    size_t remote;
    rc = find(sl, max_tokens, &m, &mi, &remote);
    if (rc != SB_OK)
        return rc;
    size_t ram_pages = mi.n_pages_ram;
    restoring r = { .m = m, .n = mi.n_tokens, .miss = mi.miss };
    if (r.n > 0)
        rc = restore_all(sl, &r, seq);
    sb_match_release(m);
    if (rc != SB_OK)
        return rc;
    size_t n = r.n;
    sb_miss miss = r.miss;
    if (remote > n)
        remote = n;
    ri.set_ms = r.set_ms;
    ri.n_restored = n;
    ri.n_matched = mi.n_matched_tokens > n ? mi.n_matched_tokens : n;
    ri.miss = n == max_tokens ? SB_MISS_NONE : miss;
    ri.tokens_remote = remote;
    size_t local = n - remote;
    size_t in_ram = ram_pages * (size_t)sl->page_tokens;
    ri.tokens_ram = in_ram < local ? in_ram : local;
    ri.tokens_disk = local - ri.tokens_ram;
done:
    ri.restore_ms = now_ms() - t0;
    ri.bank_ms = ri.restore_ms - ri.set_ms;
    if (info)
        *info = ri;
    return SB_OK;
}

/* ---- save ------------------------------------------------------------------------ */

/* Export positions [from, n) of seq (through the scratch sequence when
 * there is one), parse it, and point sl->idx at the cell of each of them. */
static int export_new(sb_llama *sl, llama_seq_id seq, size_t from, size_t n, size_t *bytes)
{
    llama_memory_t mem = llama_get_memory(sl->ctx);
    llama_seq_id src = seq;
    if (sl->scratch >= 0 && sl->scratch != seq) {
        /* (a window's cells reach back before from: copied too) */
        size_t cp = from;
        if (sl->swa && n - cp < sl->swa_max)
            cp = n > sl->swa_max ? n - sl->swa_max : 0;
        llama_memory_seq_rm(mem, sl->scratch, -1, -1);
        llama_memory_seq_cp(mem, seq, sl->scratch, (llama_pos)cp, (llama_pos)n);
        src = sl->scratch;
    }
    int rc = export_seq(sl, src, bytes);
    if (src != seq)
        llama_memory_seq_rm(mem, src, -1, -1);
    if (rc != SB_OK)
        return rc;
    sb_llama_state_view view = { .k = sl->rk, .v = sl->rv, .swa_k = sl->swa_rk,
                                 .swa_v = sl->swa_rv };
    if (sb_llama_state_parse(sl->buf, *bytes, &sl->lay, src, &view, NULL, 0) != 0)
        return SB_LLAMA_ERR_FORMAT;
    /* Every position of [from, n) in exactly one cell. */
    size_t want = n - from;
    if (reserve((void **)&sl->idx, &sl->idx_cap, (want ? want : 1) * sizeof *sl->idx))
        return SB_ERR_NOMEM;
    memset(sl->idx, 0xff, want * sizeof *sl->idx);
    size_t found = 0;
    for (uint32_t c = 0; c < view.n_cells; c++) {
        int32_t pos = sb_llama_state_cell_pos(&view, c);
        if ((size_t)pos < from || (size_t)pos >= n)
            continue;
        if (sl->idx[pos - from] != UINT32_MAX)
            return SB_LLAMA_ERR_SEQ; /* one position twice */
        if (!sb_llama_state_cell_text(&view, c, (int32_t)sl->toks[pos]))
            return SB_LLAMA_ERR_SEQ; /* M-RoPE: not the caller's text token there */
        sl->idx[pos - from] = c;
        found++;
    }
    if (found != want)
        return SB_LLAMA_ERR_SEQ;
    /* A hybrid's recurrent state is after the sequence's last position:
     * it is the point state at n only when that is n - 1. */
    if (sl->recurrent && view.rec_pos != (int32_t)n - 1)
        return SB_LLAMA_ERR_SEQ;
    sl->point = view.rec;
    if (sl->swa) {
        int rc2 = swa_point_from(sl, &view, n);
        if (rc2 != SB_OK)
            return rc2;
        sl->point = sl->swa_point;
    }
    const sb_llama_state_layout *lay = &sl->lay;
    uint8_t *vt = NULL;
    if (lay->v_trans) {
        size_t vsum = 0;
        for (uint32_t l = 0; l < lay->n_layer; l++)
            vsum += lay->layers[l].v_row * view.n_cells;
        if (reserve((void **)&sl->vtmp, &sl->vtmp_cap, vsum ? vsum : 1))
            return SB_ERR_NOMEM;
        vt = sl->vtmp;
    }
    for (uint32_t l = 0; l < lay->n_layer; l++) {
        const sb_llama_state_layer *L = &lay->layers[l];
        sb_block_table *tk = &sl->tables[2 * l], *tv = &sl->tables[2 * l + 1];
        if (view.n_cells == 0) /* a hybrid's point alone: the tables name nothing */
            sl->rk[l] = sl->rv[l] = sl->buf;
        *tk = (sb_block_table){ .base = (void *)sl->rk[l], .block_ids = sl->idx,
                                .first_pos = from, .block_tokens = 1,
                                .block_stride = L->k_row };
        *tv = (sb_block_table){ .base = (void *)sl->rv[l], .block_ids = sl->idx,
                                .first_pos = from, .block_tokens = 1,
                                .block_stride = L->v_row };
        if (lay->v_trans) {
            sb_llama_state_transpose(vt, (uint8_t *)sl->rv[l], view.n_cells, L->n_embd_v,
                                     L->v_el, 1);
            tv->base = vt;
            vt += L->v_row * view.n_cells;
        }
    }
    return SB_OK;
}

int sb_llama_save(sb_llama *sl, llama_seq_id seq, const llama_token *tokens, size_t n_tokens,
                  sb_llama_save_info *info)
{
    double t0 = now_ms();
    sb_llama_save_info si = { 0 };
    if (info)
        *info = si;
    if (!sl || !tokens)
        return SB_ERR_INVAL;
    if (n_tokens == 0)
        return SB_ERR_NO_TOKENS;
    if (!seq_ok(sl, seq))
        return SB_LLAMA_ERR_SEQ;
    llama_memory_t mem = llama_get_memory(sl->ctx);
    /* (a hybrid's lowest position is its recurrent state's, the last: its
     * KV cells are checked position by position when exported) */
    llama_pos last = llama_memory_seq_pos_max(mem, seq);
    if ((!sl->ends && llama_memory_seq_pos_min(mem, seq) != 0) ||
        last < (llama_pos)n_tokens - 1 || (sl->ends && last != (llama_pos)n_tokens - 1))
        return SB_LLAMA_ERR_SEQ;
    int rc = bank_tokens(sl, tokens, n_tokens);
    if (rc != SB_OK)
        return rc;
    if (sl->whole_pages)
        n_tokens = n_tokens / sl->page_tokens * sl->page_tokens;
    size_t from = 0;
    int held = 0;                 /* the bank restores all n_tokens already */
    if (n_tokens > 0) {
        sb_lookup q = { .tokens = sl->toks, .n_tokens = n_tokens };
        rc = sb_ns_lookup(sl->ns, &q, 1);
        if (rc != SB_OK)
            return rc;
        /* a hybrid's pages may reach further than its last point state:
         * they are kept, and the point at n_tokens is put beside them */
        from = sl->ends ? q.info.n_matched_tokens : q.info.n_tokens;
        if (from > n_tokens)
            from = n_tokens;
        held = q.info.n_tokens >= n_tokens;
    }
    /* Eviction between the lookup and the put can take pages from under
     * `from`: the put then says how much the bank holds, and we go again
     * from there (a few times at most). */
    for (int tries = 0; tries < 4; tries++) {
        if (held || (from >= n_tokens && !sl->ends)) {
            si.n_stored = n_tokens;
            rc = SB_OK;
            break;
        }
        size_t bytes = 0;
        rc = export_new(sl, seq, from, n_tokens, &bytes);
        if (rc != SB_OK)
            break;
        si.bytes_exported += bytes;
        size_t stored = 0;
        rc = sb_ns_put_blocks(sl->ns, sl->toks, n_tokens, from, sl->tables,
                              sl->ends ? sl->point : NULL, &stored, &si.outcome);
        if (rc == SB_ERR_RANGE && stored < from) {
            from = stored;
            continue;
        }
        if (rc == SB_OK || rc == SB_ERR_BUDGET) {
            si.n_stored = stored;
            si.n_new = stored > from ? stored - from : 0;
        }
        break;
    }
    si.save_ms = now_ms() - t0;
    if (info)
        *info = si;
    return rc;
}
