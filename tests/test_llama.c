/* test_llama.c -- the llama.cpp connector (bindings/llama.cpp) against
 * llama.cpp itself: libllama v0.5.0 computes, snapbank keeps the state.
 *
 * The property every case checks: llama.cpp's logits after a restore
 * through the connector are bit-identical to llama.cpp's cold prefill of
 * the same prompt in a fresh sequence, cut into the same batches (llama.cpp's
 * own logits move by about 1e-3 with the batch cut: a last batch of 1 token
 * takes other kernels than the same token inside a batch of 300). The saved
 * conversation and the restored one share a prefix that ends inside a
 * page, so the restore stops mid-page and llama.cpp decodes the rest.
 * Cases: the architectures make-model writes (llama, Llama 3, Qwen2,
 * Qwen3) in F16/F32 and quantized by llama.cpp's own llama_model_quantize
 * (Q8_0, Q4_K_M, Q6_K); K/V types f16 and q8_0; flash attention on and off
 * (V transposed); two sequences in one context, with a stream per sequence
 * (logits) and in one unified cache (there the restored K and V bytes are
 * compared with the saved sequence's, since where cells land beside
 * another sequence's moves llama.cpp's sums, cold or restored alike); a
 * second turn that saves only its new tokens; a prompt restored a chunk
 * at a time, with the disk reads ahead of the chunks; saves of whole pages
 * only; a hybrid model (qwen35: M-RoPE attention cells and Gated DeltaNet
 * recurrent state, kept as point states at each save's end) and a
 * sliding-window one (olmo2: the window's cells as the point state); from RAM,
 * from disk in a second process, and from the shared tier on a second
 * store; refusals (a planted state with bytes it cannot account for, every
 * truncation of a real state, a busy probe sequence, parameters that
 * disagree with the state, a restore into a sequence that holds
 * something); a context whose settings change the bytes never restores
 * another's state.
 *
 * Random-weight models in real shapes are made here with make-model's
 * library; llama.cpp's CPU backends are loaded from SB_LLAMA_BACKEND_DIR.
 * A second process is this binary run as `test_llama --save DIR MODEL`. */
#define _GNU_SOURCE
#include <ftw.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ggml-backend.h"
#include "llama.h"
#include "snapbank_llama.h"

#include "make_model/make_model.h"
#include "rcluster_util.h"
#include "testutil.h"

#include "../bindings/llama.cpp/src/state.h"

#define NA 300                 /* the saved conversation */
#define NB 280                 /* the restored one */
#define SHARED 150             /* their common prefix: inside page 2 of 64 */
#define PT 64

extern char **environ;

static char tmp[256];
static int teardown(void **state);
static char self_exe[512];

/* ---- fixtures --------------------------------------------------------------------- */

static void quiet(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (level >= GGML_LOG_LEVEL_ERROR)
        fputs(text, stderr);
}

/* A model file of the preset (and dtype), made once per run. */
static const char *model_file(const char *preset, const char *dtype)
{
    static char path[16][320];
    static int n;
    char want[320];
    snprintf(want, sizeof want, "%s/%s-%s.gguf", tmp, preset, dtype);
    for (int i = 0; i < n; i++)
        if (strcmp(path[i], want) == 0)
            return path[i];
    sb_rt_make_opts o;
    assert_int_equal(sb_rt_make_opts_preset(&o, preset), SB_OK);
    assert_int_equal(sb_rt_make_opts_set(&o, "dtype", dtype), SB_OK);
    if (strcmp(preset, "small") == 0) { /* small enough to run fast, K-quant rows */
        assert_int_equal(sb_rt_make_opts_set(&o, "dim", "256"), SB_OK);
        assert_int_equal(sb_rt_make_opts_set(&o, "layers", "4"), SB_OK);
        assert_int_equal(sb_rt_make_opts_set(&o, "heads", "8"), SB_OK);
        assert_int_equal(sb_rt_make_opts_set(&o, "kv-heads", "4"), SB_OK);
        assert_int_equal(sb_rt_make_opts_set(&o, "ff", "512"), SB_OK);
        assert_int_equal(sb_rt_make_opts_set(&o, "vocab", "2048"), SB_OK);
        assert_int_equal(sb_rt_make_opts_set(&o, "ctx", "2048"), SB_OK);
    }
    o.seed = 11;
    sb_rt_err err;
    if (sb_rt_make_model(&o, want, &err) != SB_OK)
        fail_msg("make-model %s %s failed", preset, dtype);
    assert_true(n < 16);
    strcpy(path[n], want);
    return path[n++];
}

/* The small llama quantized by llama.cpp's own quantizer. */
static const char *quantized_file(enum llama_ftype ftype, const char *name)
{
    static char out[4][320];
    static int n;
    char want[320];
    snprintf(want, sizeof want, "%s/small-%s.gguf", tmp, name);
    for (int i = 0; i < n; i++)
        if (strcmp(out[i], want) == 0)
            return out[i];
    llama_model_quantize_params qp = llama_model_quantize_default_params();
    qp.ftype = ftype;
    qp.nthread = 2;
    assert_int_equal(llama_model_quantize(model_file("small", "f16"), want, &qp), 0);
    assert_true(n < 4);
    strcpy(out[n], want);
    return out[n++];
}

typedef struct engine {
    struct llama_model *model;
    struct llama_context *ctx;
    struct llama_context_params cp;
    int n_vocab;
} engine;

typedef struct opts {
    int fa;                       /* LLAMA_FLASH_ATTN_TYPE_* */
    enum ggml_type k, v;
    uint32_t n_seq;
    int unified;
    uint32_t n_ctx;               /* 0: 1024 */
} opts;

static const opts DEFAULT = { LLAMA_FLASH_ATTN_TYPE_ENABLED, GGML_TYPE_F16, GGML_TYPE_F16, 2, 1, 0 };

static void engine_open(engine *e, const char *path, const opts *o)
{
    struct llama_model_params mp = llama_model_default_params();
    e->model = llama_model_load_from_file(path, mp);
    assert_non_null(e->model);
    e->cp = llama_context_default_params();
    e->cp.n_ctx = o->n_ctx ? o->n_ctx : 1024;
    e->cp.n_batch = 512;
    e->cp.n_ubatch = 512;
    e->cp.n_seq_max = o->n_seq;
    e->cp.n_threads = e->cp.n_threads_batch = 2;
    e->cp.flash_attn_type = o->fa;
    e->cp.type_k = o->k;
    e->cp.type_v = o->v;
    e->cp.kv_unified = o->unified;
    e->ctx = llama_init_from_model(e->model, e->cp);
    assert_non_null(e->ctx);
    e->n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(e->model));
}

static void engine_close(engine *e)
{
    llama_free(e->ctx);
    llama_model_free(e->model);
}

/* Decode t[0, n) at positions pos0.. into seq, in batches of n_batch. */
static void decode(engine *e, const llama_token *t, int n, int pos0, llama_seq_id seq)
{
    int step = (int)llama_n_batch(e->ctx);
    for (int i = 0; i < n; i += step) {
        int m = n - i < step ? n - i : step;
        struct llama_batch b = llama_batch_init(m, 0, 1);
        for (int j = 0; j < m; j++) {
            b.token[j] = t[i + j];
            b.pos[j] = pos0 + i + j;
            b.n_seq_id[j] = 1;
            b.seq_id[j][0] = seq;
            b.logits[j] = i + j == n - 1;
        }
        b.n_tokens = m;
        assert_int_equal(llama_decode(e->ctx, b), 0);
        llama_batch_free(b);
    }
}

/* The last token's logits, copied. */
static float *logits(engine *e)
{
    float *l = malloc((size_t)e->n_vocab * sizeof *l);
    assert_non_null(l);
    memcpy(l, llama_get_logits_ith(e->ctx, -1), (size_t)e->n_vocab * sizeof *l);
    return l;
}

/* Conversation A (saved) and B (restored): B is A's first SHARED tokens,
 * then its own. */
static void prompts(const engine *e, llama_token *a, llama_token *b)
{
    uint64_t rng = 99;
    for (int i = 0; i < NA; i++)
        a[i] = 3 + (llama_token)(tu_rand(&rng) % (uint64_t)(e->n_vocab - 3));
    memcpy(b, a, SHARED * sizeof *b);
    for (int i = SHARED; i < NB; i++)
        b[i] = 3 + (llama_token)(tu_rand(&rng) % (uint64_t)(e->n_vocab - 3));
}

/* llama.cpp's cold prefill of t[0, n) into seq, in the batches a restore
 * of k tokens leaves: [0, k), then [k, n). (llama.cpp's logits depend on
 * how a prompt is cut into batches -- a last batch of 1 or 10 tokens takes
 * other kernels than the same tokens inside one of 300, and differs by
 * some 1e-3 -- so the cold reference is cut where the restore cut.) */
static float *cold(engine *e, const llama_token *t, int n, int k, llama_seq_id seq)
{
    llama_memory_t mem = llama_get_memory(e->ctx);
    llama_memory_seq_rm(mem, seq, -1, -1);
    decode(e, t, k, 0, seq);
    decode(e, t + k, n - k, k, seq);
    float *l = logits(e);
    llama_memory_seq_rm(mem, seq, -1, -1);
    return l;
}

static sb_llama *attach(sb_store *st, engine *e, const char *path)
{
    sb_llama_config c;
    sb_llama_config_default(&c);
    c.model_path = path;
    c.cparams = &e->cp;
    c.scratch_seq = (llama_seq_id)e->cp.n_seq_max - 1;
    sb_llama *sl = NULL;
    char err[256];
    int rc = sb_llama_attach(st, e->ctx, &c, &sl, err, sizeof err);
    if (rc != SB_OK)
        fail_msg("attach: %s (%s)", err, sb_llama_strerror(rc));
    return sl;
}

static sb_store *ram_store(void)
{
    sb_config c;
    sb_config_default(&c);
    c.ram_bytes = 256 << 20;
    sb_store *st = NULL;
    assert_int_equal(sb_store_open(&c, &st), SB_OK);
    return st;
}

static sb_config disk_config(const char *dir)
{
    sb_config c;
    sb_config_default(&c);
    c.ram_bytes = 256 << 20;
    c.dir = dir;
    c.min_prefix_tokens = 1;
    c.segment_bytes = 1 << 20;
    c.disk_bytes = 256 << 20;
    c.disk_free_floor_bytes = 0;
    return c;
}

/* Restore t[0, n - 1) into seq 0 (emptied first), expect `restored`
 * tokens back at positions 0 .. restored - 1, decode the rest, and compare
 * the last logits with want (llama.cpp's cold prefill cut at `restored`).
 * Returns the restore's info. */
static sb_llama_restore_info restore_check(engine *e, sb_llama *sl, const llama_token *t, int n,
                                           size_t restored, const float *want)
{
    llama_memory_t mem = llama_get_memory(e->ctx);
    llama_memory_seq_rm(mem, 0, -1, -1);
    sb_llama_restore_info ri;
    assert_int_equal(sb_llama_restore(sl, 0, t, (size_t)n, (size_t)n - 1, &ri), SB_OK);
    assert_int_equal(ri.n_restored, restored);
    assert_int_equal(ri.tokens_ram + ri.tokens_disk + ri.tokens_remote, restored);
    assert_int_equal(llama_memory_seq_pos_max(mem, 0), (llama_pos)restored - 1);
    decode(e, t + restored, n - (int)restored, (int)restored, 0);
    float *got = logits(e);
    assert_memory_equal(got, want, (size_t)e->n_vocab * sizeof *got);
    free(got);
    return ri;
}

/* Sequence seq's state as llama.cpp exports it, parsed (layout learned
 * into *lay: free lay->layers). */
static uint8_t *export_parsed(engine *e, llama_seq_id seq, sb_llama_state_layout *lay,
                              sb_llama_state_view *v)
{
    size_t n = llama_state_seq_get_size(e->ctx, seq);
    uint8_t *buf = malloc(n);
    assert_non_null(buf);
    assert_int_equal(llama_state_seq_get_data(e->ctx, buf, n, seq), n);
    memset(lay, 0, sizeof *lay);
    sb_llama_state_view probe = { 0 };
    char err[200];
    if (sb_llama_state_parse(buf, n, lay, seq, &probe, err, sizeof err) != 0)
        fail_msg("%s", err);
    v->k = calloc(lay->n_layer, sizeof *v->k);
    v->v = calloc(lay->n_layer, sizeof *v->v);
    assert_int_equal(sb_llama_state_parse(buf, n, lay, seq, v, err, sizeof err), 0);
    return buf;
}

static uint32_t cell_of(const sb_llama_state_view *v, int32_t pos)
{
    for (uint32_t c = 0; c < v->n_cells; c++)
        if (sb_llama_state_cell_pos(v, c) == pos)
            return c;
    fail_msg("position %d not in the state", pos);
    return 0;
}

/* Positions [0, n) of sequences s1 and s2 hold the same K and V bytes in
 * every layer: what llama.cpp's cache holds after a restore is byte for
 * byte what it computed. */
static void same_state(engine *e, llama_seq_id s1, llama_seq_id s2, int n)
{
    sb_llama_state_layout l1, l2;
    sb_llama_state_view v1, v2;
    uint8_t *b1 = export_parsed(e, s1, &l1, &v1), *b2 = export_parsed(e, s2, &l2, &v2);
    for (int p = 0; p < n; p++) {
        uint32_t c1 = cell_of(&v1, p), c2 = cell_of(&v2, p);
        for (uint32_t l = 0; l < l1.n_layer; l++) {
            const sb_llama_state_layer *L = &l1.layers[l];
            assert_memory_equal(v1.k[l] + c1 * L->k_row, v2.k[l] + c2 * L->k_row, L->k_row);
            if (!l1.v_trans) {
                assert_memory_equal(v1.v[l] + c1 * L->v_row, v2.v[l] + c2 * L->v_row, L->v_row);
                continue;
            }
            for (uint32_t j = 0; j < L->n_embd_v; j++)
                assert_memory_equal(v1.v[l] + ((size_t)j * v1.n_cells + c1) * L->v_el,
                                    v2.v[l] + ((size_t)j * v2.n_cells + c2) * L->v_el, L->v_el);
        }
    }
    free(v1.k), free(v1.v), free(v2.k), free(v2.v);
    free(l1.layers), free(l2.layers);
    free(b1), free(b2);
}

/* Save A from seq, then restore B into `into` (seq keeps A when they
 * differ): the restored positions hold A's bytes; with exact_logits, the
 * logits after decoding the rest of B are those of a cold prefill of B in
 * an empty cache (or stream). In one cache shared by both sequences they
 * are not compared: where B's cells land beside A's changes llama.cpp's
 * sums, cold or restored alike. Returns the restore's info. */
static sb_llama_restore_info save_then_restore(engine *e, sb_llama *sl, llama_seq_id seq,
                                               llama_seq_id into, int exact_logits)
{
    llama_token a[NA], b[NB];
    prompts(e, a, b);
    llama_memory_t mem = llama_get_memory(e->ctx);
    float *want = cold(e, b, NB, SHARED, into);
    decode(e, a, NA, 0, seq);
    sb_llama_save_info si;
    assert_int_equal(sb_llama_save(sl, seq, a, NA, &si), SB_OK);
    assert_int_equal(si.n_stored, NA);
    assert_int_equal(si.n_new, NA);
    if (seq == into)
        llama_memory_seq_rm(mem, seq, -1, -1);
    sb_llama_restore_info ri;
    assert_int_equal(sb_llama_restore(sl, into, b, NB, NB - 1, &ri), SB_OK);
    assert_int_equal(ri.n_restored, SHARED);
    assert_int_equal(ri.miss, SB_MISS_NO_PREFIX);
    assert_int_equal(llama_memory_seq_pos_min(mem, into), 0);
    assert_int_equal(llama_memory_seq_pos_max(mem, into), SHARED - 1);
    if (seq != into) {
        assert_int_equal(llama_memory_seq_pos_max(mem, seq), NA - 1); /* untouched */
        same_state(e, seq, into, SHARED);
    }
    decode(e, b + SHARED, NB - SHARED, SHARED, into);
    float *got = logits(e);
    if (exact_logits)
        assert_memory_equal(got, want, (size_t)e->n_vocab * sizeof *got);
    free(got);
    free(want);
    llama_memory_seq_rm(mem, into, -1, -1);
    llama_memory_seq_rm(mem, seq, -1, -1);
    return ri;
}

/* One model and settings, from RAM. */
static void ram_case(const char *path, const opts *o)
{
    engine e;
    engine_open(&e, path, o);
    sb_store *st = ram_store();
    sb_llama *sl = attach(st, &e, path);
    sb_llama_info info;
    assert_int_equal(sb_llama_get_info(sl, &info), SB_OK);
    assert_int_equal(info.v_trans, o->fa == LLAMA_FLASH_ATTN_TYPE_DISABLED);
    assert_int_equal(info.k_type, o->k);
    assert_int_equal(info.v_type, o->v);
    sb_llama_restore_info ri = save_then_restore(&e, sl, 0, 0, 1);
    assert_int_equal(ri.tokens_ram, SHARED);
    assert_int_equal(ri.tokens_disk + ri.tokens_remote, 0);
    tu_check(st);
    sb_llama_detach(sl);
    assert_int_equal(sb_store_close(st), SB_OK);
    engine_close(&e);
}

/* ---- cases ------------------------------------------------------------------------ */

static void test_architectures(void **state)
{
    (void)state;
    ram_case(model_file("small", "f16"), &DEFAULT);
    ram_case(model_file("tiny-llama3", "f32"), &DEFAULT);
    ram_case(model_file("tiny-qwen2", "f32"), &DEFAULT);
    ram_case(model_file("tiny-qwen3", "f32"), &DEFAULT);
}

static void test_quantized(void **state)
{
    (void)state;
    ram_case(quantized_file(LLAMA_FTYPE_MOSTLY_Q8_0, "q8_0"), &DEFAULT);
    ram_case(quantized_file(LLAMA_FTYPE_MOSTLY_Q4_K_M, "q4_k_m"), &DEFAULT);
    ram_case(quantized_file(LLAMA_FTYPE_MOSTLY_Q6_K, "q6_k"), &DEFAULT);
}

static void test_kv_types_and_flash_attention(void **state)
{
    (void)state;
    const char *m = model_file("small", "f16");
    opts o = DEFAULT;
    o.fa = LLAMA_FLASH_ATTN_TYPE_DISABLED; /* V transposed */
    ram_case(m, &o);
    o.k = GGML_TYPE_Q8_0; /* K quantized, V transposed f16 */
    ram_case(m, &o);
    o = DEFAULT;
    o.k = o.v = GGML_TYPE_Q8_0;
    ram_case(m, &o);
}

/* Two sequences: A saved from seq 0 while it stays, B restored into seq 1;
 * in one unified cache (the restored bytes checked) and with a stream per
 * sequence (the logits too). */
static void test_two_sequences(void **state)
{
    (void)state;
    const char *m = model_file("small", "f16");
    for (int unified = 1; unified >= 0; unified--) {
        opts o = DEFAULT;
        o.n_seq = 3;
        o.unified = unified;
        engine e;
        engine_open(&e, m, &o);
        sb_store *st = ram_store();
        sb_llama *sl = attach(st, &e, m);
        save_then_restore(&e, sl, 0, 1, !unified);
        sb_llama_detach(sl);
        assert_int_equal(sb_store_close(st), SB_OK);
        engine_close(&e);
    }
}

/* A second turn saves only its new tokens: the bank's bytes grow by them,
 * and the whole conversation restores exactly. */
static void test_incremental_save(void **state)
{
    (void)state;
    const char *m = model_file("small", "f16");
    for (int scratch = 1; scratch >= 0; scratch--) {
        engine e;
        engine_open(&e, m, &DEFAULT);
        sb_store *st = ram_store();
        sb_llama_config c;
        sb_llama_config_default(&c);
        c.model_path = m;
        c.cparams = &e.cp;
        c.scratch_seq = scratch ? 1 : -1;
        sb_llama *sl = NULL;
        assert_int_equal(sb_llama_attach(st, e.ctx, &c, &sl, NULL, 0), SB_OK);
        llama_token a[NA], b[NB];
        prompts(&e, a, b);
        float *want = cold(&e, a, NA, NA - 1, 0);
        decode(&e, a, 100, 0, 0);
        sb_llama_save_info s1, s2, s3;
        assert_int_equal(sb_llama_save(sl, 0, a, 100, &s1), SB_OK);
        assert_int_equal(s1.n_new, 100);
        decode(&e, a + 100, NA - 100, 100, 0);
        assert_int_equal(sb_llama_save(sl, 0, a, NA, &s2), SB_OK);
        assert_int_equal(s2.n_new, NA - 100);
        assert_int_equal(s2.n_stored, NA);
        /* with a scratch sequence only the new tokens were read */
        sb_llama_info info;
        sb_llama_get_info(sl, &info);
        if (scratch)
            assert_true(s2.bytes_exported < (uint64_t)(NA - 100 + 16) * info.bytes_per_token);
        else
            assert_true(s2.bytes_exported >= (uint64_t)NA * info.bytes_per_token);
        assert_int_equal(sb_llama_save(sl, 0, a, NA, &s3), SB_OK); /* nothing new */
        assert_int_equal(s3.n_new, 0);
        assert_int_equal(s3.bytes_exported, 0);
        sb_llama_restore_info ri = restore_check(&e, sl, a, NA, NA - 1, want);
        assert_int_equal(ri.miss, SB_MISS_NONE);
        free(want);
        sb_llama_detach(sl);
        assert_int_equal(sb_store_close(st), SB_OK);
        engine_close(&e);
    }
}

/* A prompt longer than the connector's chunk (1,024 tokens): restored a
 * chunk at a time through the scratch sequence, from RAM and, after the
 * store is closed and opened again, from disk with the reads running
 * ahead of the chunks; and without a scratch sequence, in one piece. */
static void long_case(int fa, const char *name)
{
    const char *m = model_file("small", "f16");
    enum { LONG = 2600 };
    char dir[300];
    snprintf(dir, sizeof dir, "%s/%s", tmp, name);
    opts o = DEFAULT;
    o.n_ctx = 4096;
    o.fa = fa;
    engine e;
    engine_open(&e, m, &o);
    llama_token *t = malloc(LONG * sizeof *t);
    uint64_t rng = 5;
    for (int i = 0; i < LONG; i++)
        t[i] = 3 + (llama_token)(tu_rand(&rng) % (uint64_t)(e.n_vocab - 3));
    float *want = cold(&e, t, LONG, LONG - 1, 0);
    sb_config c = disk_config(dir);
    sb_store *st = NULL;
    assert_int_equal(sb_store_open(&c, &st), SB_OK);
    sb_llama *sl = attach(st, &e, m);
    decode(&e, t, LONG, 0, 0);
    assert_int_equal(sb_llama_save(sl, 0, t, LONG, NULL), SB_OK);
    llama_memory_t mem = llama_get_memory(e.ctx);
    for (int round = 0; round < 3; round++) {
        if (round == 1) { /* a restart: the pages come from disk */
            sb_llama_detach(sl);
            assert_int_equal(sb_store_close(st), SB_OK);
            assert_int_equal(sb_store_open(&c, &st), SB_OK);
            llama_memory_seq_rm(mem, 0, -1, -1);
            sl = attach(st, &e, m);
        }
        if (round == 2) { /* no scratch sequence: one piece */
            sb_llama_detach(sl);
            llama_memory_seq_rm(mem, 0, -1, -1);
            sb_llama_config cfg;
            sb_llama_config_default(&cfg);
            cfg.model_path = m;
            cfg.cparams = &e.cp;
            assert_int_equal(sb_llama_attach(st, e.ctx, &cfg, &sl, NULL, 0), SB_OK);
        }
        sb_llama_restore_info ri = restore_check(&e, sl, t, LONG, LONG - 1, want);
        assert_int_equal(round == 1 ? ri.tokens_disk : ri.tokens_ram, LONG - 1);
        assert_int_equal(llama_memory_seq_pos_max(mem, 1), -1); /* scratch left empty */
    }
    free(want);
    free(t);
    sb_llama_detach(sl);
    assert_int_equal(sb_store_close(st), SB_OK);
    engine_close(&e);
}

/* Flash attention on, and off: each chunk's V transposed on its way in. */
static void test_long_chunked(void **state)
{
    (void)state;
    long_case(LLAMA_FLASH_ATTN_TYPE_ENABLED, "long");
    long_case(LLAMA_FLASH_ATTN_TYPE_DISABLED, "long-nofa");
}

/* whole_pages: a save keeps whole pages only (the tail is decoded again),
 * a sequence shorter than a page keeps nothing; prefault_tokens readies
 * the buffers at attach. The restore is exact all the same. */
static void test_whole_pages(void **state)
{
    (void)state;
    const char *m = model_file("small", "f16");
    engine e;
    engine_open(&e, m, &DEFAULT);
    sb_store *st = ram_store();
    sb_llama_config c;
    sb_llama_config_default(&c);
    c.model_path = m;
    c.cparams = &e.cp;
    c.scratch_seq = 1;
    c.whole_pages = 1;
    c.prefault_tokens = 3000; /* more than a chunk: the chunk's buffer */
    sb_llama *sl = NULL;
    assert_int_equal(sb_llama_attach(st, e.ctx, &c, &sl, NULL, 0), SB_OK);
    sb_stats stats;
    assert_int_equal(sb_store_stats(st, &stats), SB_OK);
    assert_true(stats.pool_spare_pages >= 3000 / PT);
    llama_token a[NA], b[NB];
    prompts(&e, a, b);
    float *want = cold(&e, a, NA, NA / PT * PT, 0);
    decode(&e, a, NA, 0, 0);
    sb_llama_save_info si;
    assert_int_equal(sb_llama_save(sl, 0, a, 50, &si), SB_OK); /* under a page */
    assert_int_equal(si.n_stored, 0);
    assert_int_equal(si.n_new, 0);
    assert_int_equal(sb_llama_save(sl, 0, a, NA, &si), SB_OK);
    assert_int_equal(si.n_stored, NA / PT * PT);
    assert_int_equal(si.n_new, NA / PT * PT);
    restore_check(&e, sl, a, NA, NA / PT * PT, want); /* A's tail decoded again */
    free(want);
    sb_llama_detach(sl);
    assert_int_equal(sb_store_close(st), SB_OK);
    engine_close(&e);
}

/* The child of test_disk_second_process: decode A, save, close. */
static int child_save(const char *dir, const char *model)
{
    engine e;
    engine_open(&e, model, &DEFAULT);
    sb_config c = disk_config(dir);
    sb_store *st = NULL;
    if (sb_store_open(&c, &st) != SB_OK)
        return 2;
    sb_llama *sl = attach(st, &e, model);
    llama_token a[NA], b[NB];
    prompts(&e, a, b);
    decode(&e, a, NA, 0, 0);
    sb_llama_save_info si;
    int rc = sb_llama_save(sl, 0, a, NA, &si);
    sb_llama_detach(sl);
    if (sb_store_close(st) != SB_OK || rc != SB_OK || si.n_stored != NA)
        return 3;
    engine_close(&e);
    return 0;
}

/* Run this binary as `--save DIR MODEL` (child_save) and wait for it. */
static void spawn_save(const char *dir, const char *m)
{
    char *argv[] = { self_exe, "--save", (char *)dir, (char *)m, NULL };
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, self_exe, NULL, NULL, argv, environ), 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_disk_second_process(void **state)
{
    (void)state;
    const char *m = model_file("small", "f16");
    char dir[300];
    snprintf(dir, sizeof dir, "%s/disk", tmp);
    spawn_save(dir, m);

    engine e;
    engine_open(&e, m, &DEFAULT);
    llama_token a[NA], b[NB];
    prompts(&e, a, b);
    float *want = cold(&e, b, NB, SHARED, 0);
    sb_config c = disk_config(dir);
    sb_store *st = NULL;
    assert_int_equal(sb_store_open(&c, &st), SB_OK);
    sb_llama *sl = attach(st, &e, m);
    sb_llama_restore_info ri = restore_check(&e, sl, b, NB, SHARED, want);
    assert_int_equal(ri.tokens_disk, SHARED);
    free(want);
    sb_llama_detach(sl);
    assert_int_equal(sb_store_close(st), SB_OK);
    engine_close(&e);
}

/* A second machine: its own store, the first one's pages from the pool
 * (whole pages only: SHARED rounded down to a page). */
static void test_shared_tier(void **state)
{
    (void)state;
    tu_cluster cl;
    bool have = false;
    assert_int_equal(tu_cluster_suite_start(&cl, "test_llama (its shared tier part)", &have), 0);
    if (!have)
        skip();
    const char *m = model_file("small", "f16");
    engine e;
    engine_open(&e, m, &DEFAULT);
    sb_config c;
    sb_config_default(&c);
    c.ram_bytes = 256 << 20;
    c.shared_seeds = cl.seeds;
    c.shared_timeout_ms = 5000;
    c.min_prefix_tokens = 1; /* publish sequences of any length */
    sb_store *sa = NULL, *sb = NULL;
    assert_int_equal(sb_store_open(&c, &sa), SB_OK);
    sb_llama *la = attach(sa, &e, m);
    llama_token a[NA], b[NB];
    prompts(&e, a, b);
    size_t whole = SHARED / PT * PT;
    float *want = cold(&e, b, NB, (int)whole, 0);
    decode(&e, a, NA, 0, 0);
    assert_int_equal(sb_llama_save(la, 0, a, NA, NULL), SB_OK);
    assert_int_equal(sb_store_flush(sa), SB_OK); /* published */
    llama_memory_seq_rm(llama_get_memory(e.ctx), 0, -1, -1);
    sb_llama_detach(la);

    assert_int_equal(sb_store_open(&c, &sb), SB_OK);
    sb_llama *lb = attach(sb, &e, m);
    sb_llama_restore_info ri = restore_check(&e, lb, b, NB, whole, want);
    assert_int_equal(ri.tokens_remote, whole);
    free(want);
    sb_llama_detach(lb);
    assert_int_equal(sb_store_close(sb), SB_OK);
    assert_int_equal(sb_store_close(sa), SB_OK);
    engine_close(&e);
    tu_cluster_stop(&cl);
}

/* Settings that change the bytes (K type) or the layout (V transposed)
 * open another namespace: nothing of the first is restored. */
static void test_identity_apart(void **state)
{
    (void)state;
    const char *m = model_file("small", "f16");
    sb_store *st = ram_store();
    llama_token a[NA], b[NB];
    {
        engine e;
        engine_open(&e, m, &DEFAULT);
        sb_llama *sl = attach(st, &e, m);
        prompts(&e, a, b);
        decode(&e, a, NA, 0, 0);
        assert_int_equal(sb_llama_save(sl, 0, a, NA, NULL), SB_OK);
        sb_llama_detach(sl);
        engine_close(&e);
    }
    opts other[3] = { DEFAULT, DEFAULT, DEFAULT };
    other[0].k = GGML_TYPE_Q8_0;
    other[1].fa = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    other[2].n_seq = 1; /* not part of the identity: restores */
    for (int i = 0; i < 3; i++) {
        engine e;
        engine_open(&e, m, &other[i]);
        sb_llama *sl = attach(st, &e, m);
        sb_llama_restore_info ri;
        assert_int_equal(sb_llama_restore(sl, 0, b, NB, NB - 1, &ri), SB_OK);
        assert_int_equal(ri.n_restored, i == 2 ? SHARED : 0);
        sb_llama_detach(sl);
        engine_close(&e);
    }
    assert_int_equal(sb_store_close(st), SB_OK);
}

/* What the connector refuses, and says so. */
static void test_refusals(void **state)
{
    (void)state;
    const char *m = model_file("small", "f16");
    engine e;
    engine_open(&e, m, &DEFAULT);
    sb_store *st = ram_store();
    sb_llama_config c;
    sb_llama_config_default(&c);
    c.cparams = &e.cp;
    sb_llama *sl = (sb_llama *)&c;
    char err[256];
    /* neither a path nor an id; both */
    assert_int_equal(sb_llama_attach(st, e.ctx, &c, &sl, err, sizeof err), SB_ERR_INVAL);
    assert_null(sl);
    c.model_path = m;
    c.model_id = "x";
    c.model_id_bytes = 1;
    assert_int_equal(sb_llama_attach(st, e.ctx, &c, &sl, err, sizeof err), SB_ERR_INVAL);
    c.model_id = NULL;
    /* a model file that is not there */
    c.model_path = "/nonexistent/model.gguf";
    assert_int_equal(sb_llama_attach(st, e.ctx, &c, &sl, err, sizeof err),
                     SB_LLAMA_ERR_MODEL_FILE);
    assert_non_null(strstr(err, "/nonexistent/model.gguf"));
    c.model_path = m;
    /* a probe sequence that holds something, or is out of range */
    llama_token t[4] = { 5, 6, 7, 8 };
    decode(&e, t, 4, 0, 0);
    assert_int_equal(sb_llama_attach(st, e.ctx, &c, &sl, err, sizeof err), SB_LLAMA_ERR_SETTING);
    assert_non_null(strstr(err, "probe sequence"));
    assert_int_equal(llama_memory_seq_pos_max(llama_get_memory(e.ctx), 0), 3); /* untouched */
    c.probe_seq = 7;
    assert_int_equal(sb_llama_attach(st, e.ctx, &c, &sl, err, sizeof err), SB_LLAMA_ERR_SETTING);
    /* parameters that disagree with the context's state */
    c.probe_seq = 1;
    struct llama_context_params wrong = e.cp;
    wrong.type_k = GGML_TYPE_Q8_0;
    c.cparams = &wrong;
    assert_int_equal(sb_llama_attach(st, e.ctx, &c, &sl, err, sizeof err), SB_LLAMA_ERR_SETTING);
    assert_non_null(strstr(err, "q8_0"));
    c.cparams = &e.cp;
    assert_int_equal(sb_llama_attach(st, e.ctx, &c, &sl, err, sizeof err), SB_OK);
    /* a restore into a sequence that holds something; a bad sequence */
    sb_llama_restore_info ri;
    assert_int_equal(sb_llama_restore(sl, 0, t, 4, 3, &ri), SB_LLAMA_ERR_SEQ);
    assert_int_equal(ri.n_restored, 0);
    assert_int_equal(sb_llama_restore(sl, 9, t, 4, 3, &ri), SB_LLAMA_ERR_SEQ);
    assert_int_equal(sb_llama_restore(sl, 1, t, 4, 5, &ri), SB_ERR_INVAL);
    llama_token neg[2] = { 5, -1 };
    assert_int_equal(sb_llama_restore(sl, 1, neg, 2, 2, &ri), SB_ERR_INVAL);
    /* a save past what the sequence holds; of nothing */
    assert_int_equal(sb_llama_save(sl, 0, t, 4, NULL), SB_OK);
    llama_token more[6] = { 5, 6, 7, 8, 9, 10 };
    assert_int_equal(sb_llama_save(sl, 0, more, 6, NULL), SB_LLAMA_ERR_SEQ);
    assert_int_equal(sb_llama_save(sl, 0, t, 0, NULL), SB_ERR_NO_TOKENS);
    assert_int_equal(sb_llama_save(sl, 1, t, 4, NULL), SB_LLAMA_ERR_SEQ); /* empty */
    assert_string_equal(sb_llama_strerror(SB_LLAMA_ERR_FORMAT),
                        "llama.cpp sequence state in a format the connector does not parse");
    assert_string_equal(sb_llama_strerror(SB_ERR_INVAL), sb_strerror(SB_ERR_INVAL));
    sb_llama_detach(sl);
    assert_int_equal(sb_store_close(st), SB_OK);
    engine_close(&e);
}

/* make-model's tiny qwen35 hybrid, or NULL (with a message) when this
 * llama.cpp does not load it. */
static const char *hybrid_model(void)
{
    const char *m = model_file("tiny-hybrid", "f32");
    struct llama_model *model = llama_model_load_from_file(m, llama_model_default_params());
    if (!model) {
        print_message("test_llama: llama.cpp v0.5.0 does not load make-model's qwen35 "
                      "hybrid; its cases are not run\n");
        return NULL;
    }
    llama_model_free(model);
    return m;
}

/* llama.cpp's cold prefill of t[0, n) cut into batches at each of cuts[]
 * (ascending, < n): a recurrent layer's state, like the logits, depends
 * on where a prompt is cut, so the reference is cut where the saved turns
 * and the restore cut. */
static float *cold_cuts(engine *e, const llama_token *t, int n, const int *cuts, int n_cuts)
{
    llama_memory_t mem = llama_get_memory(e->ctx);
    llama_memory_seq_rm(mem, 0, -1, -1);
    int at = 0;
    for (int i = 0; i <= n_cuts; i++) {
        int to = i < n_cuts ? cuts[i] : n;
        decode(e, t + at, to - at, at, 0);
        at = to;
    }
    float *l = logits(e);
    llama_memory_seq_rm(mem, 0, -1, -1);
    return l;
}

/* A hybrid model (qwen35: Gated DeltaNet layers beside gated attention):
 * its KV cache is paged as any model's, and its recurrent state -- what
 * llama.cpp calls the partial state -- is the point state at each save's
 * end. A restore stops exactly at a saved end (the recurrent state exists
 * for no other position): a whole turn, a second turn that exported only
 * its new tokens, none for a prompt that leaves the saved one before its
 * end; logits bit-identical to a cold prefill cut at the same places;
 * with and without a scratch sequence; whole_pages refused. */
static void ends_case(const char *m, const opts *o, int swa)
{
    enum { EXTRA = 40, T2 = 20 };
    for (int scratch = 1; scratch >= 0; scratch--) {
        engine e;
        engine_open(&e, m, o);
        sb_store *st = ram_store();
        sb_llama_config c;
        sb_llama_config_default(&c);
        c.model_path = m;
        c.cparams = &e.cp;
        c.scratch_seq = scratch ? 1 : -1;
        sb_llama *sl = NULL;
        char err[256];
        c.whole_pages = 1;
        assert_int_equal(sb_llama_attach(st, e.ctx, &c, &sl, err, sizeof err),
                         SB_LLAMA_ERR_SETTING);
        assert_non_null(strstr(err, "whole_pages"));
        c.whole_pages = 0;
        if (sb_llama_attach(st, e.ctx, &c, &sl, err, sizeof err) != SB_OK)
            fail_msg("attach: %s", err);
        sb_llama_info info;
        assert_int_equal(sb_llama_get_info(sl, &info), SB_OK);
        if (swa)
            assert_true(info.n_layer_swa > 0 && info.n_layer_recurrent == 0);
        else
            assert_true(info.n_layer_recurrent > 0 && info.n_layer_swa == 0);
        assert_true(info.n_layer > 0 && info.point_bytes > 0);

        llama_token a[NA], b[NB], t[NA + EXTRA];
        prompts(&e, a, b);
        memcpy(t, a, sizeof a);
        uint64_t rng = 7;
        for (int i = NA; i < NA + EXTRA; i++)
            t[i] = 3 + (llama_token)(tu_rand(&rng) % (uint64_t)(e.n_vocab - 3));
        int cut1[] = { NA }, cut2[] = { NA, NA + T2 };
        float *want1 = cold_cuts(&e, t, NA + 10, cut1, 1);
        float *want2 = cold_cuts(&e, t, NA + EXTRA, cut2, 2);

        /* turn 1, then turn 2 (its new tokens only) */
        decode(&e, t, NA, 0, 0);
        assert_int_equal(sb_llama_save(sl, 0, t, NA - 1, NULL), SB_LLAMA_ERR_SEQ);
        sb_llama_save_info s1, s2, s3;
        assert_int_equal(sb_llama_save(sl, 0, t, NA, &s1), SB_OK);
        assert_int_equal(s1.n_stored, NA);
        assert_int_equal(s1.n_new, NA);
        decode(&e, t + NA, T2, NA, 0);
        assert_int_equal(sb_llama_save(sl, 0, t, NA + T2, &s2), SB_OK);
        assert_int_equal(s2.n_stored, NA + T2);
        assert_int_equal(s2.n_new, T2);
        if (scratch) /* the new tokens (and a window's cells) */
            assert_true(s2.bytes_exported < (uint64_t)(T2 + 16 + (swa ? 64 : 0)) *
                                                    info.bytes_per_token +
                                                info.point_bytes + 4096);
        else
            assert_true(s2.bytes_exported >= (uint64_t)(NA + T2) * info.bytes_per_token);
        assert_int_equal(sb_llama_save(sl, 0, t, NA + T2, &s3), SB_OK);
        assert_int_equal(s3.n_new, 0);
        assert_int_equal(s3.bytes_exported, 0);
        sb_stats ss;
        assert_int_equal(sb_store_stats(st, &ss), SB_OK);
        assert_int_equal(ss.points, 2);

        /* restores stop at a saved end */
        sb_llama_restore_info ri = restore_check(&e, sl, t, NA + 10, NA, want1);
        assert_int_equal(ri.tokens_ram, NA);
        assert_int_equal(ri.miss, SB_MISS_NO_POINT); /* pages to NA + T2 */
        assert_int_equal(ri.n_matched, NA + 9);
        restore_check(&e, sl, t, NA + EXTRA, NA + T2, want2);
        llama_memory_t mem = llama_get_memory(e.ctx);
        llama_memory_seq_rm(mem, 0, -1, -1);
        assert_int_equal(sb_llama_restore(sl, 0, b, NB, NB - 1, &ri), SB_OK);
        assert_int_equal(ri.n_restored, 0); /* b leaves a before any saved end */
        assert_int_equal(ri.miss, SB_MISS_NO_POINT);
        assert_int_equal(llama_memory_seq_pos_max(mem, 0), -1);
        free(want1);
        free(want2);
        tu_check(st);
        sb_llama_detach(sl);
        assert_int_equal(sb_store_close(st), SB_OK);
        engine_close(&e);
    }
}

static void test_hybrid(void **state)
{
    (void)state;
    const char *m = hybrid_model();
    if (!m)
        skip();
    ends_case(m, &DEFAULT, 0);
}

/* A boundary model's turn (hybrid or sliding-window) saved to disk by a
 * second process (this binary's --save child) and restored from there
 * after it exits. */
static void ends_disk_case(const char *m, const char *name)
{
    char dir[300];
    snprintf(dir, sizeof dir, "%s/%s-disk", tmp, name);
    spawn_save(dir, m);

    engine e;
    engine_open(&e, m, &DEFAULT);
    llama_token a[NA], b[NB], t[NA + 10];
    prompts(&e, a, b);
    memcpy(t, a, sizeof a);
    for (int i = NA; i < NA + 10; i++)
        t[i] = 3 + i;
    int cut[] = { NA };
    float *want = cold_cuts(&e, t, NA + 10, cut, 1);
    sb_config c = disk_config(dir);
    sb_store *st = NULL;
    assert_int_equal(sb_store_open(&c, &st), SB_OK);
    sb_llama *sl = attach(st, &e, m);
    sb_llama_restore_info ri = restore_check(&e, sl, t, NA + 10, NA, want);
    assert_int_equal(ri.tokens_disk, NA);
    free(want);
    sb_llama_detach(sl);
    assert_int_equal(sb_store_close(st), SB_OK);
    engine_close(&e);
}

static void test_hybrid_disk(void **state)
{
    (void)state;
    const char *m = hybrid_model();
    if (!m)
        skip();
    ends_disk_case(m, "hybrid");
}

/* make-model's tiny-swa (olmo2 with a 32-token window on three layers of
 * four): the window's cells are the point state at each save's end; flash
 * attention on and off (the window's V transposed too); from RAM and from
 * disk in a second process. */
static void test_sliding_window(void **state)
{
    (void)state;
    const char *m = model_file("tiny-swa", "f32");
    opts nofa = DEFAULT;
    nofa.fa = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    ends_case(m, &DEFAULT, 1);
    ends_case(m, &nofa, 1);
    ends_disk_case(m, "swa");
}

/* The parser on a sliding-window model's real state: the window's cells
 * (at most n_swa + 1 of the last positions) beside all of the base
 * cache's; every truncation fails; without the flag the bytes do not
 * parse. */
static void test_state_parser_swa(void **state)
{
    (void)state;
    const char *m = model_file("tiny-swa", "f32");
    engine e;
    engine_open(&e, m, &DEFAULT);
    int32_t n_swa = llama_model_n_swa(e.model);
    assert_true(n_swa > 0 && n_swa < 50);
    llama_token t[50];
    for (int i = 0; i < 50; i++)
        t[i] = 5 + i;
    decode(&e, t, 50, 0, 1);
    size_t n = llama_state_seq_get_size(e.ctx, 1);
    uint8_t *buf = malloc(n);
    assert_int_equal(llama_state_seq_get_data(e.ctx, buf, n, 1), n);
    sb_llama_state_layout lay = { .swa = 1 };
    sb_llama_state_view v = { 0 };
    char err[200];
    if (sb_llama_state_parse(buf, n, &lay, 1, &v, err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_int_equal(v.n_cells, 50);
    assert_true(v.swa_n_cells >= (uint32_t)n_swa && v.swa_n_cells <= (uint32_t)n_swa + 1);
    assert_true(lay.swa_kv.n_layer > 0 && lay.n_layer > 0);
    sb_llama_state_view w = v;
    w.cells = v.swa_cells;
    w.n_cells = v.swa_n_cells;
    for (uint32_t i = 0; i < w.n_cells; i++) {
        int32_t pos = sb_llama_state_cell_pos(&w, i);
        assert_true(pos >= 50 - (int32_t)w.n_cells && pos < 50);
    }
    for (size_t cut = 0; cut < n; cut++)
        assert_int_equal(sb_llama_state_parse(buf, cut, &lay, 1, &v, err, sizeof err), -1);
    sb_llama_state_layout plain = { 0 };
    assert_int_equal(sb_llama_state_parse(buf, n, &plain, 1, &v, err, sizeof err), -1);
    assert_non_null(strstr(err, "memory part"));
    assert_null(plain.layers);
    free(buf);
    sb_llama_state_layout_free(&lay);
    engine_close(&e);
}

/* The parser on a real state: it parses whole; every truncation, a byte
 * more, a planted unknown section, a wrong magic, type or cell fails with
 * a message. */
static void test_state_parser(void **state)
{
    (void)state;
    const char *m = model_file("small", "f16");
    engine e;
    engine_open(&e, m, &DEFAULT);
    llama_token t[5] = { 5, 6, 7, 8, 9 };
    decode(&e, t, 5, 0, 1);
    size_t n = llama_state_seq_get_size(e.ctx, 1);
    uint8_t *buf = malloc(n + 64);
    assert_int_equal(llama_state_seq_get_data(e.ctx, buf, n, 1), n);
    sb_llama_state_layout lay = { 0 };
    sb_llama_state_view v = { 0 };
    char err[200];
    assert_int_equal(sb_llama_state_parse(buf, n, &lay, 1, &v, err, sizeof err), 0);
    assert_int_equal(lay.n_layer, 4);
    assert_int_equal(lay.v_trans, 0);
    assert_int_equal(lay.layers[0].k_type, GGML_TYPE_F16);
    assert_int_equal(lay.layers[0].k_row, 4 * 32 * 2); /* 4 KV heads of 32, f16 */
    const uint8_t *k[4], *vv[4];
    sb_llama_state_view view = { .k = k, .v = vv };
    assert_int_equal(sb_llama_state_parse(buf, n, &lay, 1, &view, err, sizeof err), 0);
    assert_int_equal(view.n_cells, 5);
    for (uint32_t i = 0; i < 5; i++)
        assert_int_equal(sb_llama_state_cell_pos(&view, i), i);
    /* every truncation */
    for (size_t cut = 0; cut < n; cut++)
        assert_int_equal(sb_llama_state_parse(buf, cut, &lay, 1, &view, err, sizeof err), -1);
    /* a planted section after the KV cache's */
    memset(buf + n, 0x5a, 64);
    assert_int_equal(sb_llama_state_parse(buf, n + 8, &lay, 1, &view, err, sizeof err), -1);
    assert_non_null(strstr(err, "memory part"));
    /* a wrong magic; another sequence's cells; a cell in two sequences */
    uint8_t *bad = malloc(n);
    memcpy(bad, buf, n);
    bad[0] ^= 1;
    assert_int_equal(sb_llama_state_parse(bad, n, &lay, 1, &view, err, sizeof err), -1);
    assert_non_null(strstr(err, "magic"));
    assert_int_equal(sb_llama_state_parse(buf, n, &lay, 2, &view, err, sizeof err), -1);
    memcpy(bad, buf, n);
    bad[16 + 4] = 2; /* cell 0's n_seq_id */
    assert_int_equal(sb_llama_state_parse(bad, n, &lay, 1, &view, err, sizeof err), -1);
    /* a K type that is not the probe's, or not a type */
    size_t ktype = 16 + 5 * 12 + 8;
    memcpy(bad, buf, n);
    bad[ktype] = GGML_TYPE_Q8_0;
    assert_int_equal(sb_llama_state_parse(bad, n, &lay, 1, &view, err, sizeof err), -1);
    sb_llama_state_layout fresh = { 0 };
    memcpy(bad, buf, n);
    bad[ktype] = 200;
    assert_int_equal(sb_llama_state_parse(bad, n, &fresh, 1, &view, err, sizeof err), -1);
    assert_non_null(strstr(err, "not a ggml type"));
    assert_null(fresh.layers);
    /* what the writer makes parses back, positions 0 .. n-1 */
    size_t wb = sb_llama_state_bytes(&lay, 7);
    uint8_t *w = calloc(1, wb);
    uint8_t *wk[4], *wv[4];
    sb_llama_state_write(&lay, 7, 0, 1, NULL, w, wk, wv);
    assert_int_equal(sb_llama_state_parse(w, wb, &lay, 1, &view, err, sizeof err), 0);
    assert_int_equal(view.n_cells, 7);
    assert_ptr_equal(view.k[3], wk[3]);
    assert_ptr_equal(view.v[3], wv[3]);
    /* the transpose round trip */
    uint8_t rows[6 * 10], block[6 * 10], back[6 * 10];
    for (int i = 0; i < 60; i++)
        rows[i] = (uint8_t)i;
    sb_llama_state_transpose(rows, block, 3, 10, 2, 0);
    assert_int_equal(block[2], rows[2 * 10]); /* element 0 of cell 1 */
    sb_llama_state_transpose(back, block, 3, 10, 2, 1);
    assert_memory_equal(back, rows, sizeof rows);
    free(w);
    free(bad);
    free(buf);
    free(lay.layers);
    engine_close(&e);
}

/* The parser on a hybrid's real state: M-RoPE cells and the recurrent
 * part learned and checked; every truncation, a byte more, a recurrent
 * state after another position, a transposed one, a cell that is not the
 * caller's text token fail; the writer's state parses back. */
static void test_state_parser_hybrid(void **state)
{
    (void)state;
    const char *m = hybrid_model();
    if (!m)
        skip();
    engine e;
    engine_open(&e, m, &DEFAULT);
    llama_token t[5] = { 5, 6, 7, 8, 9 };
    decode(&e, t, 5, 0, 1);
    size_t n = llama_state_seq_get_size(e.ctx, 1);
    uint8_t *buf = malloc(n + 8);
    assert_int_equal(llama_state_seq_get_data(e.ctx, buf, n, 1), n);
    sb_llama_state_layout lay = { .recurrent = 1, .cell_ext = 1 };
    sb_llama_state_view v = { 0 };
    char err[200];
    if (sb_llama_state_parse(buf, n, &lay, 1, &v, err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_true(lay.n_rec > 0 && lay.n_layer_all == lay.n_layer + lay.n_rec);
    assert_int_equal(v.rec_pos, 4);
    assert_ptr_equal(v.rec + lay.rec_bytes, buf + n); /* the last part */
    assert_int_equal(v.cell_bytes, 24);
    const uint8_t **k = calloc(lay.n_layer, sizeof *k), **vv = calloc(lay.n_layer, sizeof *vv);
    sb_llama_state_view view = { .k = k, .v = vv };
    assert_int_equal(sb_llama_state_parse(buf, n, &lay, 1, &view, err, sizeof err), 0);
    for (uint32_t i = 0; i < 5; i++) {
        int32_t pos = sb_llama_state_cell_pos(&view, i);
        assert_true(sb_llama_state_cell_text(&view, i, t[pos]));
        assert_false(sb_llama_state_cell_text(&view, i, t[pos] + 1));
    }
    for (size_t cut = 0; cut < n; cut++)
        assert_int_equal(sb_llama_state_parse(buf, cut, &lay, 1, &view, err, sizeof err), -1);
    memset(buf + n, 0, 8);
    assert_int_equal(sb_llama_state_parse(buf, n + 4, &lay, 1, &view, err, sizeof err), -1);
    assert_int_equal(sb_llama_state_rec_check(&lay, view.rec, 4, err, sizeof err), 0);
    assert_int_equal(sb_llama_state_rec_check(&lay, view.rec, 3, err, sizeof err), -1);
    assert_non_null(strstr(err, "position"));
    uint8_t *bad = malloc(n);
    memcpy(bad, buf, n);
    bad[view.rec - buf + 12] = 1; /* s_trans */
    assert_int_equal(sb_llama_state_parse(bad, n, &lay, 1, &view, err, sizeof err), -1);
    assert_non_null(strstr(err, "transposed"));
    /* without the layout's parts the same bytes do not parse */
    sb_llama_state_layout plain = { 0 };
    assert_int_equal(sb_llama_state_parse(buf, n, &plain, 1, &v, err, sizeof err), -1);
    assert_null(plain.layers);
    /* the writer: text cells of the tokens given, the recurrent part last */
    uint32_t toks[3] = { 11, 12, 13 };
    size_t wb = sb_llama_state_bytes(&lay, 3);
    uint8_t *w = calloc(1, wb);
    uint8_t **wk = calloc(lay.n_layer, sizeof *wk), **wv = calloc(lay.n_layer, sizeof *wv);
    sb_llama_state_write(&lay, 3, 0, 1, toks, w, wk, wv);
    assert_int_equal(sb_llama_state_parse(buf, n, &lay, 1, &view, err, sizeof err), 0);
    memcpy(w + wb - lay.rec_bytes, view.rec, lay.rec_bytes);
    memcpy(w + wb - lay.rec_bytes + 4, &(int32_t){ 2 }, 4); /* after position 2 */
    if (sb_llama_state_parse(w, wb, &lay, 1, &view, err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_int_equal(view.rec_pos, 2);
    for (uint32_t i = 0; i < 3; i++)
        assert_true(sb_llama_state_cell_text(&view, i, (int32_t)toks[i]));
    free(w), free(wk), free(wv), free(k), free(vv), free(bad), free(buf);
    free(lay.layers);
    engine_close(&e);
}

/* `test_llama --write-seeds DIR`: fuzz_llama_state's seeds, real states
 * llama.cpp exported (tiny llama and qwen3 models; flash attention on and
 * off; K/V f16 and q8_0; a unified cache and one with two streams; the
 * qwen35 hybrid, M-RoPE cells and a recurrent part), each after the
 * harness's flags byte. */
static int write_seeds(const char *out)
{
    snprintf(tmp, sizeof tmp, "/tmp/sb-test-llama-XXXXXX");
    if (!mkdtemp(tmp))
        return 1;
    struct {
        const char *preset, *dtype, *name;
        opts o;
    } seeds[] = {
        { "tiny", "f32", "tiny-fa-f16", { LLAMA_FLASH_ATTN_TYPE_ENABLED, GGML_TYPE_F16, GGML_TYPE_F16, 1, 1, 0 } },
        { "tiny", "f32", "tiny-nofa-f16", { LLAMA_FLASH_ATTN_TYPE_DISABLED, GGML_TYPE_F16, GGML_TYPE_F16, 1, 1, 0 } },
        { "small", "f16", "small-fa-q8", { LLAMA_FLASH_ATTN_TYPE_ENABLED, GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, 1, 1, 0 } },
        { "tiny-qwen3", "f32", "qwen3-streams", { LLAMA_FLASH_ATTN_TYPE_ENABLED, GGML_TYPE_F16, GGML_TYPE_F16, 2, 0, 0 } },
        { "tiny-hybrid", "f32", "qwen35-hybrid", { LLAMA_FLASH_ATTN_TYPE_ENABLED, GGML_TYPE_F16, GGML_TYPE_F16, 1, 1, 0 } },
        { "tiny-swa", "f32", "olmo2-swa-nofa", { LLAMA_FLASH_ATTN_TYPE_DISABLED, GGML_TYPE_F16, GGML_TYPE_F16, 1, 1, 0 } },
    };
    int rc = 0;
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0] && rc == 0; i++) {
        const char *m = model_file(seeds[i].preset, seeds[i].dtype);
        engine e;
        engine_open(&e, m, &seeds[i].o);
        llama_token t[3] = { 5, 6, 7 };
        decode(&e, t, 3, 0, 1 % (int)seeds[i].o.n_seq);
        llama_seq_id s = 1 % (llama_seq_id)seeds[i].o.n_seq;
        size_t n = llama_state_seq_get_size(e.ctx, s);
        uint8_t *buf = malloc(n);
        char path[600];
        snprintf(path, sizeof path, "%s/%s", out, seeds[i].name);
        FILE *f = fopen(path, "wb");
        int rope = llama_model_rope_type(e.model);
        uint8_t flags = (uint8_t)(llama_model_is_hybrid(e.model) |
                                  (rope == LLAMA_ROPE_TYPE_MROPE || rope == LLAMA_ROPE_TYPE_IMROPE) << 1 |
                                  (llama_model_n_swa(e.model) > 0) << 2);
        if (!buf || llama_state_seq_get_data(e.ctx, buf, n, s) != n || !f ||
            fputc(flags, f) == EOF || fwrite(buf, 1, n, f) != n)
            rc = 1;
        if (f && fclose(f) != 0)
            rc = 1;
        free(buf);
        engine_close(&e);
    }
    teardown(NULL);
    return rc;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmp, sizeof tmp, "/tmp/sb-test-llama-XXXXXX");
    return mkdtemp(tmp) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

int main(int argc, char **argv)
{
    llama_log_set(quiet, NULL);
    ggml_backend_load_all_from_path(SB_LLAMA_BACKEND_DIR);
    llama_backend_init();
    if (argc == 4 && strcmp(argv[1], "--save") == 0)
        return child_save(argv[2], argv[3]);
    if (argc == 3 && strcmp(argv[1], "--write-seeds") == 0)
        return write_seeds(argv[2]);
    ssize_t got = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    if (got <= 0)
        return 1;
    self_exe[got] = '\0';
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_state_parser),
        cmocka_unit_test(test_architectures),
        cmocka_unit_test(test_quantized),
        cmocka_unit_test(test_kv_types_and_flash_attention),
        cmocka_unit_test(test_two_sequences),
        cmocka_unit_test(test_incremental_save),
        cmocka_unit_test(test_long_chunked),
        cmocka_unit_test(test_whole_pages),
        cmocka_unit_test(test_disk_second_process),
        cmocka_unit_test(test_shared_tier),
        cmocka_unit_test(test_identity_apart),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_state_parser_hybrid),
        cmocka_unit_test(test_hybrid),
        cmocka_unit_test(test_hybrid_disk),
        cmocka_unit_test(test_state_parser_swa),
        cmocka_unit_test(test_sliding_window),
    };
    /* SB_TEST_FILTER, SB_TEST_SKIP: cmocka patterns of the cases to run
     * and to leave out (the TSan build leaves out the quantizer's minute). */
    if (getenv("SB_TEST_FILTER"))
        cmocka_set_test_filter(getenv("SB_TEST_FILTER"));
    if (getenv("SB_TEST_SKIP"))
        cmocka_set_skip_filter(getenv("SB_TEST_SKIP"));
    int rc = cmocka_run_group_tests(tests, setup, teardown);
    llama_backend_free();
    return rc;
}
