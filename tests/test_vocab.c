/* test_vocab.c -- tokenizers from GGUF metadata, vocabulary-only files,
 * copying the vocabulary, and `make-model --vocab` (runtime/text/vocab.h,
 * make_model.h).
 *
 * Description: every vocabulary in tests/data/vocab loads from its file
 * alone; the defaults of each key per vocabulary type (llama.cpp's) when
 * the file leaves it out; every malformed key refused with SB_ERR_FORMAT
 * naming it, an unknown type or pre-tokenizer with SB_ERR_UNSUPPORTED
 * naming it; Phi-3's strip rule by general.name; sb_rt_vocab_copy gives a
 * file whose tokenizer encodes like the original and refuses what it
 * cannot copy, appending nothing; a random-weight model made with a real
 * vocabulary loads with that tokenizer and its vocabulary size, and one
 * whose vocabulary outgrows its embedding loads without a tokenizer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "gguf/gguf.h"
#include "gguf/gguf_write.h"
#include "make_model/make_model.h"
#include "model/model.h"
#include "text/vocab.h"
#include "tokutil.h"

static void every_file_loads(void **state)
{
    (void)state;
    for (size_t i = 0; i < TKU_N_VOCABS; i++) {
        char path[1024];
        sb_rt_gguf *g;
        sb_rt_err err = { 0 };
        assert_int_equal(sb_rt_gguf_open(tku_vocab_path(path, sizeof path, tku_vocabs[i]), &g,
                                         &err), SB_OK);
        assert_int_equal(sb_rt_gguf_n_tensors(g), 0); /* vocabulary only */
        const char *model, *pre;
        size_t ml, pl;
        assert_int_equal(sb_rt_gguf_get_str(g, "tokenizer.ggml.model", &model, &ml), SB_OK);
        assert_int_equal(sb_rt_gguf_get_str(g, "tokenizer.ggml.pre", &pre, &pl), SB_OK);
        sb_rt_tok *t = NULL;
        assert_int_equal(sb_rt_tok_from_gguf(g, path, &t, &err), SB_OK);
        sb_rt_tok_info in;
        sb_rt_tok_get_info(t, &in);
        assert_true(strlen(in.model) == ml && !memcmp(in.model, model, ml));
        assert_true(strlen(in.pre) == pl && !memcmp(in.pre, pre, pl));
        sb_rt_tok_free(t);
        sb_rt_gguf_close(g);
        t = tku_vocab(tku_vocabs[i]); /* sb_rt_tok_load */
        assert_int_equal(sb_rt_tok_n_vocab(t), in.n_vocab);
        sb_rt_tok_free(t);
    }
    sb_rt_tok *t = (sb_rt_tok *)1;
    sb_rt_err err = { 0 };
    assert_int_equal(sb_rt_tok_load("/nonexistent/v.gguf", &t, &err), SB_ERR_IO);
    assert_null(t);
    assert_non_null(strstr(err.msg, "/nonexistent/v.gguf"));
    assert_int_equal(sb_rt_tok_load(NULL, &t, &err), SB_ERR_INVAL);
}

/* ---- hand-made files ---------------------------------------------------------------- */

enum { KEEP = 0, DROP = 1 };

/* A small vocabulary file of type `model`: for gpt2, the 256 byte
 * characters and merges "a b", "ab c"; for llama, <unk> <s> </s>, byte
 * tokens and letters. extra (may be NULL) adds keys. */
static sb_rt_gguf *small(const char *model, const char *pre, void (*extra)(sb_rt_gguf_writer *),
                         uint8_t **mem)
{
    static char text[300][8];
    const char *tok[300];
    size_t len[300];
    int32_t type[300];
    uint32_t n = 0;
    sb_rt_gguf_writer *w = sb_rt_gguf_writer_new();
    assert_non_null(w);
    if (!strcmp(model, "gpt2")) {
        int k = 0;
        for (int b = 0; b < 256; b++) { /* the mapped spelling of each byte */
            bool pr = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
            unsigned cp = pr ? (unsigned)b : 256u + (unsigned)k++;
            if (cp < 0x80) {
                text[n][0] = (char)cp, len[n] = 1;
            } else {
                text[n][0] = (char)(0xc0 | cp >> 6), text[n][1] = (char)(0x80 | (cp & 0x3f));
                len[n] = 2;
            }
            tok[n] = text[n], type[n++] = SB_RT_TOK_NORMAL;
        }
        tok[n] = "ab", len[n] = 2, type[n++] = SB_RT_TOK_NORMAL;
        tok[n] = "abc", len[n] = 3, type[n++] = SB_RT_TOK_NORMAL;
        tok[n] = "<|end|>", len[n] = 7, type[n++] = SB_RT_TOK_CONTROL;
        const char *merges[2] = { "a b", "ab c" };
        size_t ml[2] = { 3, 4 };
        sb_rt_gguf_add_arr_str(w, "tokenizer.ggml.merges", merges, ml, 2);
    } else {
        const char *sp[3] = { "<unk>", "<s>", "</s>" };
        for (int i = 0; i < 3; i++)
            tok[n] = sp[i], len[n] = strlen(sp[i]), type[n++] = i ? SB_RT_TOK_CONTROL : 2;
        for (int b = 0; b < 256; b++) {
            snprintf(text[n], sizeof text[n], "<0x%02X>", b);
            tok[n] = text[n], len[n] = 6, type[n++] = SB_RT_TOK_BYTE;
        }
        tok[n] = "\xe2\x96\x81" "a", len[n] = 4, type[n++] = SB_RT_TOK_NORMAL;
        tok[n] = "<|end|>", len[n] = 7, type[n++] = SB_RT_TOK_USER;
    }
    if (model[0])
        sb_rt_gguf_add_str(w, "tokenizer.ggml.model", model);
    if (pre)
        sb_rt_gguf_add_str(w, "tokenizer.ggml.pre", pre);
    sb_rt_gguf_add_arr_str(w, "tokenizer.ggml.tokens", tok, len, n);
    sb_rt_gguf_add_arr(w, "tokenizer.ggml.token_type", SB_RT_GGUF_I32, type, n);
    if (extra)
        extra(w);
    size_t size;
    assert_int_equal(sb_rt_gguf_write_mem(w, mem, &size), SB_OK);
    sb_rt_gguf_writer_free(w);
    sb_rt_gguf *g;
    assert_int_equal(sb_rt_gguf_open_mem(*mem, size, "small.gguf", &g, NULL), SB_OK);
    return g;
}

static sb_rt_tok *small_tok(const char *model, const char *pre,
                            void (*extra)(sb_rt_gguf_writer *), int want, const char *msg)
{
    uint8_t *mem;
    sb_rt_gguf *g = small(model, pre, extra, &mem);
    sb_rt_tok *t = NULL;
    sb_rt_err err = { 0 };
    int rc = sb_rt_tok_from_gguf(g, "small.gguf", &t, &err);
    if (rc != want)
        fail_msg("rc %d, expected %d: %s", rc, want, err.msg);
    if (msg && (!strstr(err.msg, msg) || !strstr(err.msg, "small.gguf")))
        fail_msg("message '%s' does not name '%s' and the file", err.msg, msg);
    sb_rt_gguf_close(g);
    free(mem);
    return t;
}

static void defaults(void **state)
{
    (void)state;
    sb_rt_tok_info in;
    sb_rt_tok *t = small_tok("llama", NULL, NULL, SB_OK, NULL);
    sb_rt_tok_get_info(t, &in);
    assert_true(in.bos == 1 && in.eos == 2 && in.unk == 0 && in.add_bos && !in.add_eos);
    assert_true(in.pad == SB_RT_TOK_NONE && in.eot == 260); /* <|end|>, by its text */
    assert_string_equal(in.pre, "default");
    uint32_t ids[8];
    size_t n;
    assert_int_equal(sb_rt_tok_encode(t, "a", 1, 0, ids, 8, &n), SB_OK); /* space prefix */
    assert_true(n == 1 && ids[0] == 259);
    sb_rt_tok_free(t);
    t = small_tok("gpt2", "qwen2", NULL, SB_OK, NULL);
    sb_rt_tok_get_info(t, &in);
    assert_true(in.bos == 11 && in.eos == 11 && in.unk == SB_RT_TOK_NONE && !in.add_bos);
    assert_int_equal(in.eot, 258); /* <|end|>, found by its text */
    assert_int_equal(sb_rt_tok_encode(t, "abc", 3, 0, ids, 8, &n), SB_OK);
    assert_true(n == 1 && ids[0] == 257); /* a b, then ab c */
    sb_rt_tok_free(t);
    t = small_tok("gpt2", "llama-bpe", NULL, SB_OK, NULL);
    sb_rt_tok_get_info(t, &in);
    assert_true(in.add_bos); /* llama-bpe's default */
    sb_rt_tok_free(t);
}

static void k_ids(sb_rt_gguf_writer *w)
{
    sb_rt_gguf_add_u32(w, "tokenizer.ggml.bos_token_id", 5);
    sb_rt_gguf_add_u32(w, "tokenizer.ggml.eos_token_id", 6);
    sb_rt_gguf_add_u32(w, "tokenizer.ggml.eot_token_id", 7);
    sb_rt_gguf_add_u32(w, "tokenizer.ggml.padding_token_id", 8);
    sb_rt_gguf_add_u32(w, "tokenizer.ggml.unknown_token_id", 9);
    sb_rt_gguf_add_bool(w, "tokenizer.ggml.add_bos_token", false);
    sb_rt_gguf_add_bool(w, "tokenizer.ggml.add_eos_token", true);
}

static void k_bad_bos(sb_rt_gguf_writer *w) { sb_rt_gguf_add_u32(w, "tokenizer.ggml.bos_token_id", 100000); }
static void k_bad_eos(sb_rt_gguf_writer *w) { sb_rt_gguf_add_str(w, "tokenizer.ggml.eos_token_id", "2"); }
static void k_bad_add(sb_rt_gguf_writer *w) { sb_rt_gguf_add_u32(w, "tokenizer.ggml.add_bos_token", 1); }
static void k_bad_scores(sb_rt_gguf_writer *w)
{
    float f[2] = { 0, 1 };
    sb_rt_gguf_add_arr(w, "tokenizer.ggml.scores", SB_RT_GGUF_F32, f, 2);
}

static void keys(void **state)
{
    (void)state;
    sb_rt_tok_info in;
    sb_rt_tok *t = small_tok("gpt2", "gpt-2", k_ids, SB_OK, NULL);
    sb_rt_tok_get_info(t, &in);
    assert_true(in.bos == 5 && in.eos == 6 && in.eot == 7 && in.pad == 8 && in.unk == 9);
    assert_true(!in.add_bos && in.add_eos);
    assert_true(sb_rt_tok_is_eog(t, 6) && sb_rt_tok_is_eog(t, 7) && sb_rt_tok_is_eog(t, 258));
    sb_rt_tok_free(t);
    small_tok("gpt2", "gpt-2", k_bad_bos, SB_ERR_FORMAT, "tokenizer.ggml.bos_token_id");
    small_tok("gpt2", "gpt-2", k_bad_eos, SB_ERR_FORMAT, "tokenizer.ggml.eos_token_id");
    small_tok("llama", NULL, k_bad_add, SB_ERR_FORMAT, "tokenizer.ggml.add_bos_token");
    small_tok("llama", NULL, k_bad_scores, SB_ERR_FORMAT, "tokenizer.ggml.scores");
    small_tok("gpt2", "no-such-pre", NULL, SB_ERR_UNSUPPORTED, "'no-such-pre'");
    small_tok("gpt2", NULL, NULL, SB_ERR_UNSUPPORTED, "'default'");
    small_tok("bert", NULL, NULL, SB_ERR_UNSUPPORTED, "'bert'");
    small_tok("", NULL, NULL, SB_ERR_UNSUPPORTED, "tokenizer.ggml.model");
}

static void k_phi3(sb_rt_gguf_writer *w) { sb_rt_gguf_add_str(w, "general.name", "Phi3-mini"); }

/* Phi-3's special tokens drop the white space after them; others keep it. */
static void phi3_strip(void **state)
{
    (void)state;
    uint32_t ids[16];
    size_t n;
    sb_rt_tok *t = small_tok("llama", NULL, k_phi3, SB_OK, NULL);
    assert_int_equal(sb_rt_tok_encode(t, "<|end|>\n\na", 10, SB_RT_TOK_PARSE_SPECIAL, ids, 16,
                                      &n), SB_OK);
    assert_true(n == 2 && ids[0] == 260 && ids[1] == 259);
    sb_rt_tok_free(t);
    t = small_tok("llama", NULL, NULL, SB_OK, NULL);
    assert_int_equal(sb_rt_tok_encode(t, "<|end|>\n\na", 10, SB_RT_TOK_PARSE_SPECIAL, ids, 16,
                                      &n), SB_OK);
    assert_true(n > 2 && ids[0] == 260 && ids[1] != 259);
    sb_rt_tok_free(t);
}

/* ---- copying ------------------------------------------------------------------------ */

static void copy_gives_same_tokenizer(void **state)
{
    (void)state;
    char path[1024];
    sb_rt_gguf *g;
    assert_int_equal(sb_rt_gguf_open(tku_vocab_path(path, sizeof path, "qwen2"), &g, NULL), 0);
    sb_rt_gguf_writer *w = sb_rt_gguf_writer_new();
    sb_rt_gguf_add_str(w, "general.architecture", "qwen2");
    sb_rt_err err = { 0 };
    assert_int_equal(sb_rt_vocab_copy(g, path, w, &err), SB_OK);
    uint8_t *mem;
    size_t size;
    assert_int_equal(sb_rt_gguf_write_mem(w, &mem, &size), SB_OK);
    sb_rt_gguf_writer_free(w);
    sb_rt_gguf *c;
    assert_int_equal(sb_rt_gguf_open_mem(mem, size, "copy.gguf", &c, NULL), SB_OK);
    /* every tokenizer key, with its type, and nothing else */
    size_t n_tok = 0;
    for (size_t i = 0; i < sb_rt_gguf_n_kv(g); i++) {
        uint32_t ta, tb;
        const char *k = sb_rt_gguf_kv_key(g, i, &ta);
        if (strncmp(k, "tokenizer.", 10))
            continue;
        n_tok++;
        bool found = false;
        for (size_t j = 0; j < sb_rt_gguf_n_kv(c); j++)
            if (!strcmp(sb_rt_gguf_kv_key(c, j, &tb), k))
                found = ta == tb;
        if (!found)
            fail_msg("key %s not copied with its type", k);
    }
    assert_int_equal(sb_rt_gguf_n_kv(c), n_tok + 1);
    const char *a, *b;
    size_t la, lb;
    assert_int_equal(sb_rt_gguf_get_str(g, "tokenizer.chat_template", &a, &la), SB_OK);
    assert_int_equal(sb_rt_gguf_get_str(c, "tokenizer.chat_template", &b, &lb), SB_OK);
    assert_true(la == lb && !memcmp(a, b, la));
    sb_rt_tok *t1, *t2;
    assert_int_equal(sb_rt_tok_from_gguf(g, path, &t1, NULL), SB_OK);
    assert_int_equal(sb_rt_tok_from_gguf(c, "copy.gguf", &t2, NULL), SB_OK);
    uint64_t rng = 3;
    char text[600];
    for (int i = 0; i < 200; i++) {
        size_t len = tku_text(&rng, text, sizeof text, false), n1, n2;
        uint32_t *x = tku_encode(t1, text, len, SB_RT_TOK_PARSE_SPECIAL, &n1);
        uint32_t *y = tku_encode(t2, text, len, SB_RT_TOK_PARSE_SPECIAL, &n2);
        assert_true(n1 == n2 && !memcmp(x, y, n1 * sizeof *x));
        free(x), free(y);
    }
    sb_rt_tok_free(t1), sb_rt_tok_free(t2);
    sb_rt_gguf_close(c);
    free(mem);
    sb_rt_gguf_close(g);
}

static void k_f64(sb_rt_gguf_writer *w)
{
    double d = 0.5;
    sb_rt_gguf_add_raw(w, "tokenizer.ggml.weird", SB_RT_GGUF_F64, &d, 8);
}

static void copy_refuses_whole(void **state)
{
    (void)state;
    uint8_t *mem, *out;
    sb_rt_gguf *g = small("gpt2", "gpt-2", k_f64, &mem);
    sb_rt_gguf_writer *w = sb_rt_gguf_writer_new();
    sb_rt_err err = { 0 };
    assert_int_equal(sb_rt_vocab_copy(g, "small.gguf", w, &err), SB_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "tokenizer.ggml.weird"));
    size_t size;
    assert_int_equal(sb_rt_gguf_write_mem(w, &out, &size), SB_OK);
    sb_rt_gguf *c;
    assert_int_equal(sb_rt_gguf_open_mem(out, size, "out.gguf", &c, NULL), SB_OK);
    assert_int_equal(sb_rt_gguf_n_kv(c), 0); /* nothing appended */
    sb_rt_gguf_close(c);
    free(out);
    sb_rt_gguf_writer_free(w);
    sb_rt_gguf_close(g);
    free(mem);
}

/* ---- make-model --vocab --------------------------------------------------------------- */

static void model_with_real_vocab(void **state)
{
    (void)state;
    char dir[] = "/tmp/sb-vocab-XXXXXX", file[256], vpath[1024];
    assert_non_null(mkdtemp(dir));
    snprintf(file, sizeof file, "%s/m.gguf", dir);
    sb_rt_make_opts o;
    sb_rt_make_opts_preset(&o, "tiny");
    assert_int_equal(sb_rt_make_opts_set(&o, "dtype", "f16"), SB_OK);
    assert_int_equal(sb_rt_make_opts_set(&o, "vocab", tku_vocab_path(vpath, sizeof vpath,
                                                                     "llama-bpe")), SB_OK);
    assert_string_equal(o.vocab, vpath);
    o.tied = true;
    sb_rt_err err = { 0 };
    if (sb_rt_make_model(&o, file, &err) != SB_OK)
        fail_msg("%s", err.msg);
    sb_rt_model *m;
    if (sb_rt_model_load(file, &m, &err) != SB_OK)
        fail_msg("%s", err.msg);
    assert_non_null(m->tok);
    assert_int_equal(m->hp.n_vocab, 128256);
    sb_rt_tok_info in;
    sb_rt_tok_get_info(m->tok, &in);
    assert_string_equal(in.pre, "llama-bpe");
    sb_rt_tok *v = tku_vocab("llama-bpe");
    size_t n1, n2;
    const char *text = "Hello world, it's 2024!";
    uint32_t *x = tku_encode(m->tok, text, strlen(text), SB_RT_TOK_ADD_BOS, &n1);
    uint32_t *y = tku_encode(v, text, strlen(text), SB_RT_TOK_ADD_BOS, &n2);
    assert_true(n1 == n2 && !memcmp(x, y, n1 * sizeof *x));
    free(x), free(y);
    sb_rt_tok_free(v);
    sb_rt_model_free(m);
    /* a number still sets the generated vocabulary's size */
    assert_int_equal(sb_rt_make_opts_set(&o, "vocab", "600"), SB_OK);
    assert_true(o.vocab[0] == '\0' && o.n_vocab == 600);
    /* a file that is not a vocabulary: refused naming it */
    assert_int_equal(sb_rt_make_opts_set(&o, "vocab", "/nonexistent.gguf"), SB_OK);
    assert_int_equal(sb_rt_make_model(&o, file, &err), SB_ERR_IO);
    assert_non_null(strstr(err.msg, "/nonexistent.gguf"));
    unlink(file);
    rmdir(dir);
}

/* A model whose vocabulary has more tokens than token_embd has rows gets
 * no tokenizer (its ids would have no row), with the reason. */
static void vocab_larger_than_embedding(void **state)
{
    (void)state;
    char dir[] = "/tmp/sb-vocab-XXXXXX", small_m[256], big_m[256], vpath[1024];
    assert_non_null(mkdtemp(dir));
    snprintf(small_m, sizeof small_m, "%s/s.gguf", dir);
    snprintf(big_m, sizeof big_m, "%s/b.gguf", dir);
    sb_rt_make_opts o;
    sb_rt_make_opts_preset(&o, "tiny"); /* 512 rows */
    assert_int_equal(sb_rt_make_model(&o, small_m, NULL), SB_OK);
    sb_rt_gguf *m, *v;
    assert_int_equal(sb_rt_gguf_open(small_m, &m, NULL), SB_OK);
    assert_int_equal(sb_rt_gguf_open(tku_vocab_path(vpath, sizeof vpath, "gpt-2"), &v, NULL),
                     SB_OK);
    /* the model's own keys and tensors, gpt-2's 50257-token vocabulary */
    sb_rt_gguf_writer *w = sb_rt_gguf_writer_new();
    for (size_t i = 0; i < sb_rt_gguf_n_kv(m); i++) {
        uint32_t type;
        const char *k = sb_rt_gguf_kv_key(m, i, &type);
        if (!strncmp(k, "tokenizer.", 10))
            continue;
        if (type == SB_RT_GGUF_STR) {
            const char *str;
            size_t len;
            char z[256];
            assert_int_equal(sb_rt_gguf_get_str(m, k, &str, &len), SB_OK);
            snprintf(z, sizeof z, "%.*s", (int)len, str);
            sb_rt_gguf_add_str(w, k, z);
        } else if (type == SB_RT_GGUF_U32) {
            uint64_t u;
            assert_int_equal(sb_rt_gguf_get_u64(m, k, &u), SB_OK);
            sb_rt_gguf_add_u32(w, k, (uint32_t)u);
        } else {
            float f;
            assert_int_equal(type, SB_RT_GGUF_F32);
            assert_int_equal(sb_rt_gguf_get_f32(m, k, &f), SB_OK);
            sb_rt_gguf_add_f32(w, k, f);
        }
    }
    assert_int_equal(sb_rt_vocab_copy(v, vpath, w, NULL), SB_OK);
    for (size_t i = 0; i < sb_rt_gguf_n_tensors(m); i++) {
        const sb_rt_gguf_tensor *t = sb_rt_gguf_tensor_at(m, i);
        sb_rt_gguf_add_tensor(w, t->name, t->n_dims, t->ne, t->type, t->data, t->bytes);
    }
    sb_rt_err err = { 0 };
    assert_int_equal(sb_rt_gguf_write_file(w, big_m, &err), SB_OK);
    sb_rt_gguf_writer_free(w);
    sb_rt_gguf_close(v);
    sb_rt_gguf_close(m);
    sb_rt_model *model;
    if (sb_rt_model_load(big_m, &model, &err) != SB_OK)
        fail_msg("%s", err.msg);
    assert_null(model->tok);
    assert_non_null(strstr(model->tok_error, "50257"));
    assert_non_null(strstr(model->tok_error, "512"));
    sb_rt_model_free(model);
    unlink(small_m), unlink(big_m);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_file_loads),
        cmocka_unit_test(defaults),
        cmocka_unit_test(keys),
        cmocka_unit_test(phi3_strip),
        cmocka_unit_test(copy_gives_same_tokenizer),
        cmocka_unit_test(copy_refuses_whole),
        cmocka_unit_test(model_with_real_vocab),
        cmocka_unit_test(vocab_larger_than_embedding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
