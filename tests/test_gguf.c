/* test_gguf.c -- the GGUF reader and writer, and the model generator
 * (runtime/model/gguf.h, gguf_write.h, make_model.h).
 *
 * Description: a file with every value type and the three tensor types
 * round-trips; malformed files are refused with the right code and a
 * message naming the file (bad magic, versions, every truncation, huge
 * counts, misaligned or overflowing or overlapping tensors, unknown types,
 * duplicates, bad alignment); generated models load, are deterministic in
 * their seed, and carry the documented shapes and vocabulary.
 */
#define _GNU_SOURCE /* memmem */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "model/gguf.h"
#include "model/gguf_write.h"
#include "model/make_model.h"
#include "model/model.h"
#include "model/tokenizer.h"

static float g_f32[64];
static uint16_t g_f16[32];
static uint8_t g_q8[34 * 2];

/* A small valid file: every value type, three tensors. */
static sb_rt_gguf_writer *sample(void)
{
    sb_rt_gguf_writer *w = sb_rt_gguf_writer_new();
    assert_non_null(w);
    for (int i = 0; i < 64; i++)
        g_f32[i] = (float)i / 3;
    for (int i = 0; i < 32; i++)
        g_f16[i] = (uint16_t)(0x3c00 + i);
    for (int i = 0; i < 68; i++)
        g_q8[i] = (uint8_t)i;
    uint8_t u8 = 200;
    int8_t i8 = -5;
    double f64 = 2.5;
    int64_t i64 = -7;
    sb_rt_gguf_add_raw(w, "t.u8", SB_RT_GGUF_U8, &u8, 1);
    sb_rt_gguf_add_raw(w, "t.i8", SB_RT_GGUF_I8, &i8, 1);
    sb_rt_gguf_add_u32(w, "t.u32", 123456);
    sb_rt_gguf_add_i32(w, "t.i32", -3);
    sb_rt_gguf_add_u64(w, "t.u64", 1ull << 40);
    sb_rt_gguf_add_raw(w, "t.i64", SB_RT_GGUF_I64, &i64, 8);
    sb_rt_gguf_add_f32(w, "t.f32", 0.25f);
    sb_rt_gguf_add_raw(w, "t.f64", SB_RT_GGUF_F64, &f64, 8);
    sb_rt_gguf_add_bool(w, "t.bool", true);
    sb_rt_gguf_add_str(w, "t.str", "hello");
    int32_t arr[3] = { 1, -2, 3 };
    sb_rt_gguf_add_arr(w, "t.arr", SB_RT_GGUF_I32, arr, 3);
    const char *ss[2] = { "ab", "" };
    size_t sl[2] = { 2, 0 };
    sb_rt_gguf_add_arr_str(w, "t.strs", ss, sl, 2);
    uint64_t ne2[2] = { 16, 4 }, ne1[1] = { 32 }, neq[2] = { 32, 2 };
    sb_rt_gguf_add_tensor(w, "a", 2, ne2, 0, g_f32, sizeof g_f32);
    sb_rt_gguf_add_tensor(w, "b", 1, ne1, 1, g_f16, sizeof g_f16);
    sb_rt_gguf_add_tensor(w, "c", 2, neq, 8, g_q8, sizeof g_q8);
    return w;
}

static void round_trip(void **state)
{
    (void)state;
    sb_rt_gguf_writer *w = sample();
    uint8_t *b;
    size_t len;
    assert_int_equal(sb_rt_gguf_write_mem(w, &b, &len), SB_OK);
    sb_rt_gguf *g;
    sb_rt_err err = { 0 };
    assert_int_equal(sb_rt_gguf_open_mem(b, len, "sample", &g, &err), SB_OK);
    uint64_t u;
    int64_t i;
    float f;
    bool bo;
    const char *s;
    size_t sl;
    assert_int_equal(sb_rt_gguf_get_u64(g, "t.u8", &u), SB_OK);
    assert_int_equal(u, 200);
    assert_int_equal(sb_rt_gguf_get_i64(g, "t.i8", &i), SB_OK);
    assert_int_equal(i, -5);
    assert_int_equal(sb_rt_gguf_get_u64(g, "t.i8", &u), SB_ERR_FORMAT); /* negative */
    assert_int_equal(sb_rt_gguf_get_u64(g, "t.u32", &u), SB_OK);
    assert_int_equal(u, 123456);
    assert_int_equal(sb_rt_gguf_get_i64(g, "t.i32", &i), SB_OK);
    assert_int_equal(i, -3);
    assert_int_equal(sb_rt_gguf_get_u64(g, "t.u64", &u), SB_OK);
    assert_int_equal(u, 1ull << 40);
    assert_int_equal(sb_rt_gguf_get_i64(g, "t.i64", &i), SB_OK);
    assert_int_equal(i, -7);
    assert_int_equal(sb_rt_gguf_get_f32(g, "t.f32", &f), SB_OK);
    assert_true(f == 0.25f);
    assert_int_equal(sb_rt_gguf_get_f32(g, "t.f64", &f), SB_OK);
    assert_true(f == 2.5f);
    assert_int_equal(sb_rt_gguf_get_bool(g, "t.bool", &bo), SB_OK);
    assert_true(bo);
    assert_int_equal(sb_rt_gguf_get_str(g, "t.str", &s, &sl), SB_OK);
    assert_true(sl == 5 && !memcmp(s, "hello", 5));
    assert_int_equal(sb_rt_gguf_get_str(g, "t.u32", &s, &sl), SB_ERR_FORMAT);
    assert_int_equal(sb_rt_gguf_get_u64(g, "nope", &u), SB_ERR_NOT_FOUND);
    uint32_t type;
    uint64_t n;
    const void *d;
    assert_int_equal(sb_rt_gguf_get_arr(g, "t.arr", &type, &n, &d), SB_OK);
    int32_t a3[3];
    memcpy(a3, d, sizeof a3);
    assert_true(type == SB_RT_GGUF_I32 && n == 3 && a3[1] == -2);
    assert_int_equal(sb_rt_gguf_arr_str(g, "t.strs", 0, &s, &sl), SB_OK);
    assert_true(sl == 2 && !memcmp(s, "ab", 2));
    assert_int_equal(sb_rt_gguf_arr_str(g, "t.strs", 1, &s, &sl), SB_OK);
    assert_int_equal(sl, 0);
    assert_int_equal(sb_rt_gguf_arr_str(g, "t.strs", 2, &s, &sl), SB_ERR_RANGE);
    assert_int_equal(sb_rt_gguf_n_tensors(g), 3);
    const sb_rt_gguf_tensor *t = sb_rt_gguf_find_tensor(g, "a");
    assert_true(t && t->n_dims == 2 && t->ne[0] == 16 && t->ne[1] == 4 && t->type == 0);
    assert_memory_equal(t->data, g_f32, sizeof g_f32);
    assert_int_equal((uintptr_t)t->data % 32, (uintptr_t)b % 32);
    t = sb_rt_gguf_find_tensor(g, "c");
    assert_true(t && t->bytes == sizeof g_q8);
    assert_memory_equal(t->data, g_q8, sizeof g_q8);
    assert_null(sb_rt_gguf_find_tensor(g, "zz"));
    sb_rt_gguf_close(g);
    /* every truncation is refused, never a crash */
    for (size_t k = 0; k < len; k++) {
        uint8_t *c = malloc(k ? k : 1);
        memcpy(c, b, k);
        int rc = sb_rt_gguf_open_mem(c, k, "cut.gguf", &g, &err);
        if (rc == SB_OK)
            fail_msg("a file cut to %zu of %zu bytes opened", k, len);
        assert_non_null(strstr(err.msg, "cut.gguf"));
        free(c);
    }
    free(b);
    sb_rt_gguf_writer_free(w);
}

/* Patch helpers: the header's counts sit at fixed offsets. */
static int open_bytes(uint8_t *b, size_t len, sb_rt_err *err)
{
    sb_rt_gguf *g = NULL;
    int rc = sb_rt_gguf_open_mem(b, len, "bad.gguf", &g, err);
    sb_rt_gguf_close(g);
    if (rc != SB_OK)
        assert_non_null(strstr(err->msg, "bad.gguf"));
    return rc;
}

static int build_open(sb_rt_gguf_writer *w, sb_rt_err *err)
{
    uint8_t *b;
    size_t len;
    assert_int_equal(sb_rt_gguf_write_mem(w, &b, &len), SB_OK);
    int rc = open_bytes(b, len, err);
    free(b);
    sb_rt_gguf_writer_free(w);
    return rc;
}

static void rejects_bad_files(void **state)
{
    (void)state;
    sb_rt_err err = { 0 };
    sb_rt_gguf_writer *w = sample();
    uint8_t *b;
    size_t len;
    assert_int_equal(sb_rt_gguf_write_mem(w, &b, &len), SB_OK);
    sb_rt_gguf_writer_free(w);
    uint8_t *c = malloc(len);
#define FRESH() memcpy(c, b, len)
    FRESH();
    c[0] = 'X';
    assert_int_equal(open_bytes(c, len, &err), SB_ERR_FORMAT);
    for (uint32_t v = 2; v <= 4; v += 2) {
        FRESH();
        memcpy(c + 4, &v, 4);
        assert_int_equal(open_bytes(c, len, &err), SB_ERR_VERSION);
    }
    uint64_t huge = 1ull << 60;
    FRESH();
    memcpy(c + 8, &huge, 8); /* tensors */
    assert_int_equal(open_bytes(c, len, &err), SB_ERR_FORMAT);
    FRESH();
    memcpy(c + 16, &huge, 8); /* key/values */
    assert_int_equal(open_bytes(c, len, &err), SB_ERR_FORMAT);
    FRESH();
    memcpy(c + 24, &huge, 8); /* the first key's length */
    assert_int_equal(open_bytes(c, len, &err), SB_ERR_FORMAT);
    free(c);
    free(b);

    uint64_t ne[2] = { 16, 4 };
    /* an array count that cannot fit */
    w = sb_rt_gguf_writer_new();
    uint8_t arr_hdr[12];
    uint32_t et = SB_RT_GGUF_U32;
    memcpy(arr_hdr, &et, 4);
    memcpy(arr_hdr + 4, &huge, 8);
    sb_rt_gguf_add_raw(w, "x", SB_RT_GGUF_ARR, arr_hdr, 12);
    assert_int_equal(build_open(w, &err), SB_ERR_FORMAT);
    /* nested arrays */
    w = sb_rt_gguf_writer_new();
    et = SB_RT_GGUF_ARR;
    memcpy(arr_hdr, &et, 4);
    sb_rt_gguf_add_raw(w, "x", SB_RT_GGUF_ARR, arr_hdr, 12);
    assert_int_equal(build_open(w, &err), SB_ERR_UNSUPPORTED);
    /* a tensor type GGML removed (4, Q4_2) or never defined (99) */
    w = sb_rt_gguf_writer_new();
    sb_rt_gguf_add_tensor(w, "a", 2, ne, 4, g_f32, 64);
    assert_int_equal(build_open(w, &err), SB_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "'a'"));
    assert_non_null(strstr(err.msg, "q4_2"));
    w = sb_rt_gguf_writer_new();
    sb_rt_gguf_add_tensor(w, "a", 2, ne, 99, g_f32, 64);
    assert_int_equal(build_open(w, &err), SB_ERR_UNSUPPORTED);
    /* a type GGML defines but the kernels do not run (IQ4_XS) is read and
     * sized (256-value blocks of 136 bytes); the model loader refuses it */
    {
        static uint8_t iq[136];
        uint64_t ine[2] = { 256, 1 };
        w = sb_rt_gguf_writer_new();
        sb_rt_gguf_add_tensor(w, "iq", 2, ine, 23, iq, sizeof iq);
        assert_int_equal(build_open(w, &err), SB_OK);
    }
    /* data past the end */
    w = sb_rt_gguf_writer_new();
    sb_rt_gguf_add_tensor(w, "a", 2, ne, 0, g_f32, 16);
    assert_int_equal(build_open(w, &err), SB_ERR_FORMAT);
    /* n_dims 5, ne 0, element count overflow */
    uint64_t bigne[4] = { 1ull << 30, 1ull << 30, 1ull << 30, 1 };
    w = sb_rt_gguf_writer_new();
    sb_rt_gguf_add_tensor(w, "a", 3, bigne, 0, g_f32, 4);
    assert_int_equal(build_open(w, &err), SB_ERR_FORMAT);
    uint64_t zne[2] = { 0, 4 };
    w = sb_rt_gguf_writer_new();
    sb_rt_gguf_add_tensor(w, "a", 2, zne, 0, g_f32, 0);
    assert_int_equal(build_open(w, &err), SB_ERR_FORMAT);
    /* Q8_0 rows not a multiple of 32; Q4_K rows not a multiple of 256 */
    uint64_t qne[2] = { 16, 1 };
    w = sb_rt_gguf_writer_new();
    sb_rt_gguf_add_tensor(w, "q", 2, qne, 8, g_q8, 17);
    assert_int_equal(build_open(w, &err), SB_ERR_FORMAT);
    uint64_t kne[2] = { 128, 1 };
    static uint8_t half_k[72];
    w = sb_rt_gguf_writer_new();
    sb_rt_gguf_add_tensor(w, "q", 2, kne, 12, half_k, sizeof half_k);
    assert_int_equal(build_open(w, &err), SB_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "q4_K"));
    /* duplicates */
    w = sb_rt_gguf_writer_new();
    sb_rt_gguf_add_u32(w, "k", 1);
    sb_rt_gguf_add_u32(w, "k", 2);
    assert_int_equal(build_open(w, &err), SB_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "'k'"));
    w = sb_rt_gguf_writer_new();
    sb_rt_gguf_add_tensor(w, "a", 2, ne, 0, g_f32, 256);
    sb_rt_gguf_add_tensor(w, "a", 2, ne, 0, g_f32, 256);
    assert_int_equal(build_open(w, &err), SB_ERR_FORMAT);
    /* bad alignment: not a power of two, or the wrong type */
    w = sb_rt_gguf_writer_new();
    uint32_t al = 24;
    sb_rt_gguf_add_raw(w, "general.alignment", SB_RT_GGUF_U32, &al, 4);
    assert_int_equal(build_open(w, &err), SB_ERR_FORMAT);
    w = sb_rt_gguf_writer_new();
    sb_rt_gguf_add_u64(w, "general.alignment", 32);
    assert_int_equal(build_open(w, &err), SB_ERR_FORMAT);
    /* misaligned and overlapping tensors: patch the offsets of a valid file */
    w = sb_rt_gguf_writer_new();
    sb_rt_gguf_add_tensor(w, "a", 2, ne, 0, g_f32, 256);
    sb_rt_gguf_add_tensor(w, "b", 2, ne, 0, g_f32, 256);
    assert_int_equal(sb_rt_gguf_write_mem(w, &b, &len), SB_OK);
    sb_rt_gguf_writer_free(w);
    /* tensor b's offset field: after a's info (8+1 + 4 + 16 + 4 + 8) and
     * b's name, dims and type */
    size_t off_b = 24 + (8 + 1 + 4 + 16 + 4 + 8) + (8 + 1 + 4 + 16 + 4);
    uint64_t o;
    memcpy(&o, b + off_b, 8);
    assert_int_equal(o, 256);
    assert_int_equal(open_bytes(b, len, &err), SB_OK);
    o = 100; /* misaligned */
    memcpy(b + off_b, &o, 8);
    assert_int_equal(open_bytes(b, len, &err), SB_ERR_FORMAT);
    o = 128; /* overlaps a */
    memcpy(b + off_b, &o, 8);
    assert_int_equal(open_bytes(b, len, &err), SB_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "overlap"));
    free(b);
    /* a file that is not there */
    sb_rt_gguf *g;
    assert_int_equal(sb_rt_gguf_open("/nonexistent/x.gguf", &g, &err), SB_ERR_IO);
    assert_non_null(strstr(err.msg, "/nonexistent/x.gguf"));
}

static void generator(void **state)
{
    (void)state;
    char p1[64], p2[64];
    snprintf(p1, sizeof p1, "/tmp/test_gguf.%ld.a", (long)getpid());
    snprintf(p2, sizeof p2, "/tmp/test_gguf.%ld.b", (long)getpid());
    sb_rt_make_opts o;
    sb_rt_make_opts_preset(&o, "tiny");
    sb_rt_err err = { 0 };
    assert_int_equal(sb_rt_make_model(&o, p1, &err), SB_OK);
    assert_int_equal(sb_rt_make_model(&o, p2, &err), SB_OK);
    FILE *a = fopen(p1, "rb"), *b = fopen(p2, "rb");
    int same = 1, ca, cb;
    do {
        ca = fgetc(a), cb = fgetc(b);
        same &= ca == cb;
    } while (ca != EOF && cb != EOF);
    fclose(a), fclose(b);
    assert_true(same);
    o.seed = 2;
    assert_int_equal(sb_rt_make_model(&o, p2, &err), SB_OK);
    sb_rt_model *m1, *m2;
    assert_int_equal(sb_rt_model_load(p1, &m1, &err), SB_OK);
    assert_int_equal(sb_rt_model_load(p2, &m2, &err), SB_OK);
    assert_memory_not_equal(m1->embd.data, m2->embd.data, 64 * 4);
    assert_memory_not_equal(m1->id, m2->id, SB_RT_ID_BYTES);
    const sb_rt_hparams *hp = &m1->hp;
    assert_true(hp->dim == 64 && hp->n_layers == 2 && hp->n_heads == 4 && hp->n_kv_heads == 2 &&
                hp->n_ff == 192 && hp->n_vocab == 512 && hp->n_ctx == 2048 && !hp->tied);
    assert_true(m1->layers[1].wk.in == 64 && m1->layers[1].wk.out == 32);
    /* the vocabulary: specials, byte tokens, pieces that merge by score */
    assert_non_null(m1->tok);
    uint32_t ids[64];
    size_t n;
    const char *text = "The bank keeps what a model has read";
    assert_int_equal(sb_rt_tok_encode(m1->tok, text, strlen(text), true, ids, 64, &n), SB_OK);
    assert_int_equal(ids[0], 1);
    assert_true(n < strlen(text)); /* merges happened */
    char back[128];
    size_t bl;
    assert_int_equal(sb_rt_tok_decode(m1->tok, ids, n, back, sizeof back, &bl), SB_OK);
    assert_true(bl == strlen(text) && !memcmp(back, text, bl));
    sb_rt_model_free(m1);
    sb_rt_model_free(m2);
    /* q8_0 and qwen2 load; impossible shapes are refused */
    assert_int_equal(sb_rt_make_opts_set(&o, "dtype", "q8_0"), SB_OK);
    assert_int_equal(sb_rt_make_opts_set(&o, "arch", "qwen2"), SB_OK);
    assert_int_equal(sb_rt_make_model(&o, p1, &err), SB_OK);
    assert_int_equal(sb_rt_model_load(p1, &m1, &err), SB_OK);
    assert_true(m1->layers[0].bq && m1->layers[0].wq.type == SB_RT_Q8_0);
    sb_rt_model_free(m1);
    assert_int_equal(sb_rt_make_opts_set(&o, "heads", "5"), SB_OK);
    assert_int_equal(sb_rt_make_model(&o, p1, &err), SB_ERR_INVAL);
    assert_int_equal(sb_rt_make_opts_set(&o, "dtype", "f64"), SB_ERR_INVAL);
    unlink(p1);
    unlink(p2);
}

/* A model file missing a tensor or with one misshapen: the loader names it. */
static void loader_names_the_fault(void **state)
{
    (void)state;
    char p[64];
    snprintf(p, sizeof p, "/tmp/test_gguf.%ld.c", (long)getpid());
    sb_rt_gguf_writer *w = sb_rt_gguf_writer_new();
    sb_rt_gguf_add_str(w, "general.architecture", "llama");
    sb_rt_gguf_add_u32(w, "llama.embedding_length", 64);
    sb_rt_gguf_add_u32(w, "llama.block_count", 1);
    sb_rt_gguf_add_u32(w, "llama.feed_forward_length", 64);
    sb_rt_gguf_add_u32(w, "llama.attention.head_count", 4);
    sb_rt_gguf_add_u32(w, "llama.context_length", 64);
    static float emb[64 * 300];
    uint64_t ne[2] = { 64, 300 };
    sb_rt_gguf_add_tensor(w, "token_embd.weight", 2, ne, 0, emb, sizeof emb);
    sb_rt_gguf_add_tensor(w, "output_norm.weight", 1, ne, 0, emb, 64 * 4);
    sb_rt_err err = { 0 };
    assert_int_equal(sb_rt_gguf_write_file(w, p, &err), SB_OK);
    sb_rt_gguf_writer_free(w);
    sb_rt_model *m;
    assert_int_equal(sb_rt_model_load(p, &m, &err), SB_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "blk.0.attn_norm.weight"));
    assert_non_null(strstr(err.msg, p));
    w = sb_rt_gguf_writer_new();
    sb_rt_gguf_add_str(w, "general.architecture", "gpt2");
    assert_int_equal(sb_rt_gguf_write_file(w, p, &err), SB_OK);
    sb_rt_gguf_writer_free(w);
    assert_int_equal(sb_rt_model_load(p, &m, &err), SB_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "gpt2"));
    /* a weight type the kernels do not run: a q4_k model whose attn_q of
     * layer 0 is retyped to IQ4_XS (23; 136 bytes per 256 values, so its
     * data still lies inside the file) is refused naming both */
    sb_rt_make_opts o;
    sb_rt_make_opts_preset(&o, "tiny");
    assert_int_equal(sb_rt_make_opts_set(&o, "dtype", "q4_k"), SB_OK);
    assert_int_equal(sb_rt_make_opts_set(&o, "dim", "256"), SB_OK);
    assert_int_equal(sb_rt_make_opts_set(&o, "ff", "256"), SB_OK);
    assert_int_equal(sb_rt_make_model(&o, p, &err), SB_OK);
    assert_int_equal(sb_rt_model_load(p, &m, &err), SB_OK);
    assert_int_equal(m->layers[0].wq.type, SB_RT_Q4_K);
    sb_rt_model_free(m);
    FILE *f = fopen(p, "r+b");
    assert_non_null(f);
    static uint8_t head[1 << 16];
    size_t got = fread(head, 1, sizeof head, f);
    const char *nm = "blk.0.attn_q.weight";
    uint8_t *at = memmem(head, got, nm, strlen(nm));
    assert_non_null(at);
    size_t type_off = (size_t)(at - head) + strlen(nm) + 4 + 2 * 8; /* n_dims, ne[2] */
    uint32_t ty;
    memcpy(&ty, head + type_off, 4);
    assert_int_equal(ty, SB_RT_Q4_K);
    ty = 23;
    assert_int_equal(fseek(f, (long)type_off, SEEK_SET), 0);
    assert_int_equal(fwrite(&ty, 4, 1, f), 1);
    fclose(f);
    assert_int_equal(sb_rt_model_load(p, &m, &err), SB_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "blk.0.attn_q.weight"));
    assert_non_null(strstr(err.msg, "iq4_xs"));
    unlink(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip),
        cmocka_unit_test(rejects_bad_files),
        cmocka_unit_test(generator),
        cmocka_unit_test(loader_names_the_fault),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
