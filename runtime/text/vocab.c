/* vocab.c -- a GGUF file's tokenizer from its metadata, and copying the
 * tokenizer keys (vocab.h). */
#include "text/vocab.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/pretok.h"

#define NONE SB_RT_TOK_NONE

/* An id key: *out keeps dflt (NONE when dflt >= n) when the key is absent.
 * Returns: SB_OK; SB_ERR_FORMAT (not an integer, or out of range). */
static int id_key(const sb_rt_gguf *g, const char *path, const char *key, uint32_t dflt,
                  uint32_t n, uint32_t *out, sb_rt_err *err)
{
    uint64_t v;
    int rc = sb_rt_gguf_get_u64(g, key, &v);
    if (rc == SB_ERR_NOT_FOUND) {
        *out = dflt < n ? dflt : NONE;
        return SB_OK;
    }
    if (rc != SB_OK || v >= n)
        return sb_rt_fail(err, SB_ERR_FORMAT, "%s: %s must be a token id below %" PRIu32, path,
                          key, n);
    *out = (uint32_t)v;
    return SB_OK;
}

static int bool_key(const sb_rt_gguf *g, const char *path, const char *key, bool dflt,
                    bool *out, sb_rt_err *err)
{
    int rc = sb_rt_gguf_get_bool(g, key, out);
    if (rc == SB_ERR_NOT_FOUND) {
        *out = dflt;
        return SB_OK;
    }
    return rc == SB_OK ? SB_OK : sb_rt_fail(err, SB_ERR_FORMAT, "%s: %s must be a bool", path,
                                            key);
}

/* A string array's elements (borrowed into the mapping). */
static int str_array(const sb_rt_gguf *g, const char *path, const char *key, uint64_t n,
                     const char **s, size_t *len, sb_rt_err *err)
{
    for (uint64_t i = 0; i < n; i++)
        if (sb_rt_gguf_arr_str(g, key, i, &s[i], &len[i]) != SB_OK)
            return sb_rt_fail(err, SB_ERR_FORMAT, "%s: %s[%" PRIu64 "] is unreadable", path,
                              key, i);
    return SB_OK;
}

typedef struct arrays {
    const char **pieces, **merges;
    size_t *lens, *merge_lens;
    float *scores;
    int32_t *types;
    uint8_t *strip;
} arrays;

static void arrays_free(arrays *a)
{
    free(a->pieces), free(a->merges), free(a->lens), free(a->merge_lens);
    free(a->scores), free(a->types), free(a->strip);
}

/* Phi-3 (general.name holding "phi-3" or "phi3", any case): every special
 * token but <unk>, <s> and <|endoftext|> drops the white space after it
 * (its tokenizer_config.json says rstrip; llama.cpp sets the same by this
 * name, as GGUF has no key for it). Other vocabularies: none. */
static int strip_attrs(const sb_rt_gguf *g, const char *path, uint64_t n, arrays *a,
                       sb_rt_err *err)
{
    const char *name;
    size_t len;
    char low[256];
    if (sb_rt_gguf_get_str(g, "general.name", &name, &len) != SB_OK)
        return SB_OK;
    len = len < sizeof low - 1 ? len : sizeof low - 1;
    for (size_t i = 0; i < len; i++)
        low[i] = name[i] >= 'A' && name[i] <= 'Z' ? (char)(name[i] + 32) : name[i];
    low[len] = '\0';
    if (!strstr(low, "phi-3") && !strstr(low, "phi3"))
        return SB_OK;
    if (!(a->strip = calloc(n, 1)))
        return sb_rt_fail(err, SB_ERR_NOMEM, "%s: out of memory", path);
    for (uint64_t i = 0; i < n; i++) {
        int type = a->types ? a->types[i] : SB_RT_TOK_NORMAL;
        bool keep = (a->lens[i] == 5 && !memcmp(a->pieces[i], "<unk>", 5)) ||
                    (a->lens[i] == 3 && !memcmp(a->pieces[i], "<s>", 3)) ||
                    (a->lens[i] == 13 && !memcmp(a->pieces[i], "<|endoftext|>", 13));
        bool special = type == SB_RT_TOK_CONTROL || type == SB_RT_TOK_USER ||
                       type == SB_RT_TOK_UNKNOWN;
        if (special && !keep)
            a->strip[i] = SB_RT_TOK_RSTRIP;
    }
    return SB_OK;
}

/* The numeric per-token arrays (scores f32 or i32, token_type i32),
 * copied: the mapping's are packed and may be unaligned. */
static int per_token(const sb_rt_gguf *g, const char *path, uint64_t n, arrays *a,
                     sb_rt_err *err)
{
    uint32_t type;
    uint64_t m;
    const void *data;
    if (sb_rt_gguf_get_arr(g, "tokenizer.ggml.scores", &type, &m, &data) == SB_OK) {
        if ((type != SB_RT_GGUF_F32 && type != SB_RT_GGUF_I32) || m != n)
            return sb_rt_fail(err, SB_ERR_FORMAT, "%s: tokenizer.ggml.scores must be %" PRIu64
                              " float32 values", path, n);
        if (!(a->scores = malloc(n * sizeof *a->scores)))
            return sb_rt_fail(err, SB_ERR_NOMEM, "%s: out of memory", path);
        for (uint64_t i = 0; i < n; i++) {
            int32_t v;
            memcpy(type == SB_RT_GGUF_F32 ? (void *)&a->scores[i] : (void *)&v,
                   (const char *)data + 4 * i, 4);
            if (type == SB_RT_GGUF_I32)
                a->scores[i] = (float)v;
        }
    }
    if (sb_rt_gguf_get_arr(g, "tokenizer.ggml.token_type", &type, &m, &data) == SB_OK) {
        if (type != SB_RT_GGUF_I32 || m != n)
            return sb_rt_fail(err, SB_ERR_FORMAT, "%s: tokenizer.ggml.token_type must be %"
                              PRIu64 " int32 values", path, n);
        if (!(a->types = malloc(n * sizeof *a->types)))
            return sb_rt_fail(err, SB_ERR_NOMEM, "%s: out of memory", path);
        memcpy(a->types, data, n * sizeof *a->types);
    }
    return SB_OK;
}

int sb_rt_tok_from_gguf(const sb_rt_gguf *g, const char *path, sb_rt_tok **out, sb_rt_err *err)
{
    *out = NULL;
    const char *model, *pre = "default";
    size_t model_len, pre_len = 7;
    if (sb_rt_gguf_get_str(g, "tokenizer.ggml.model", &model, &model_len) != SB_OK)
        return sb_rt_fail(err, SB_ERR_UNSUPPORTED, "%s: no vocabulary (tokenizer.ggml.model)",
                          path);
    bool bpe = model_len == 4 && !memcmp(model, "gpt2", 4);
    if (!bpe && (model_len != 5 || memcmp(model, "llama", 5)))
        return sb_rt_fail(err, SB_ERR_UNSUPPORTED, "%s: vocabulary type '%.*s' is not "
                          "supported (llama: SentencePiece; gpt2: byte-level BPE)", path,
                          (int)(model_len > 32 ? 32 : model_len), model);
    int rc = sb_rt_gguf_get_str(g, "tokenizer.ggml.pre", &pre, &pre_len);
    if (rc == SB_ERR_NOT_FOUND)
        pre = "default", pre_len = 7;
    else if (rc != SB_OK || pre_len > 48)
        return sb_rt_fail(err, SB_ERR_FORMAT, "%s: tokenizer.ggml.pre must be a short string",
                          path);
    char pre_z[49];
    memcpy(pre_z, pre, pre_len);
    pre_z[pre_len] = '\0';
    const sb_rt_pretok_info *pi = bpe ? sb_rt_pretok_find(pre_z, pre_len) : NULL;
    if (bpe && !pi)
        return sb_rt_fail(err, SB_ERR_UNSUPPORTED, "%s: pre-tokenizer '%s' (key "
                          "tokenizer.ggml.pre) is not supported; known: %s", path, pre_z,
                          sb_rt_pretok_names());
    uint32_t type;
    uint64_t n, n_merges = 0;
    const void *data;
    if (sb_rt_gguf_get_arr(g, "tokenizer.ggml.tokens", &type, &n, &data) != SB_OK ||
        type != SB_RT_GGUF_STR || n == 0 || n > (1u << 24))
        return sb_rt_fail(err, SB_ERR_FORMAT, "%s: tokenizer.ggml.tokens must be an array of "
                          "1 to 2^24 strings", path);
    rc = sb_rt_gguf_get_arr(g, "tokenizer.ggml.merges", &type, &n_merges, &data);
    if (rc == SB_ERR_NOT_FOUND || !bpe)
        n_merges = 0;
    else if (rc != SB_OK || type != SB_RT_GGUF_STR)
        return sb_rt_fail(err, SB_ERR_FORMAT, "%s: tokenizer.ggml.merges must be an array of "
                          "strings", path);
    arrays a = { 0 };
    a.pieces = malloc(n * sizeof *a.pieces);
    a.lens = malloc(n * sizeof *a.lens);
    a.merges = malloc((n_merges ? n_merges : 1) * sizeof *a.merges);
    a.merge_lens = malloc((n_merges ? n_merges : 1) * sizeof *a.merge_lens);
    sb_rt_tok_spec s;
    sb_rt_tok_spec_init(&s);
    s.n_vocab = (uint32_t)n;
    s.model = bpe ? "gpt2" : "llama";
    s.pre = pre_z;
    uint32_t nv = (uint32_t)n;
    if (!a.pieces || !a.lens || !a.merges || !a.merge_lens)
        rc = sb_rt_fail(err, SB_ERR_NOMEM, "%s: out of memory", path);
    else if ((rc = per_token(g, path, n, &a, err)) ||
             (rc = str_array(g, path, "tokenizer.ggml.tokens", n, a.pieces, a.lens, err)) ||
             (rc = str_array(g, path, "tokenizer.ggml.merges", n_merges, a.merges,
                             a.merge_lens, err)) ||
             (rc = id_key(g, path, "tokenizer.ggml.bos_token_id", bpe ? 11 : 1, nv, &s.bos,
                          err)) ||
             (rc = id_key(g, path, "tokenizer.ggml.eos_token_id", bpe ? 11 : 2, nv, &s.eos,
                          err)) ||
             (rc = id_key(g, path, "tokenizer.ggml.unknown_token_id", bpe ? NONE : 0, nv,
                          &s.unk, err)) ||
             (rc = id_key(g, path, "tokenizer.ggml.eot_token_id", NONE, nv, &s.eot, err)) ||
             (rc = id_key(g, path, "tokenizer.ggml.eom_token_id", NONE, nv, &s.eom, err)) ||
             (rc = id_key(g, path, "tokenizer.ggml.padding_token_id", NONE, nv, &s.pad, err)) ||
             (rc = bool_key(g, path, "tokenizer.ggml.add_bos_token", bpe ? pi->add_bos : true,
                            &s.add_bos, err)) ||
             (rc = bool_key(g, path, "tokenizer.ggml.add_eos_token", false, &s.add_eos, err)) ||
             (rc = bool_key(g, path, "tokenizer.ggml.add_space_prefix", !bpe,
                            &s.add_space_prefix, err))) {
        /* rc and err say what failed */
    }
    if (rc == SB_OK && (rc = strip_attrs(g, path, n, &a, err)) == SB_OK) {
        s.strip = a.strip;
        s.pieces = a.pieces, s.piece_len = a.lens, s.scores = a.scores, s.types = a.types;
        s.merges = a.merges, s.merge_len = a.merge_lens, s.n_merges = n_merges;
        rc = sb_rt_tok_new(&s, out, err);
        if (rc != SB_OK && err) {
            char why[SB_RT_ERR_MSG];
            snprintf(why, sizeof why, "%s", err->msg[0] ? err->msg : "bad vocabulary");
            sb_rt_fail(err, rc, "%s: %s", path, why);
        }
    }
    arrays_free(&a);
    return rc;
}

int sb_rt_tok_load(const char *path, sb_rt_tok **out, sb_rt_err *err)
{
    sb_rt_err_clear(err);
    if (!path || !out)
        return sb_rt_fail(err, SB_ERR_INVAL, "sb_rt_tok_load: NULL argument");
    *out = NULL;
    sb_rt_gguf *g;
    int rc = sb_rt_gguf_open(path, &g, err);
    if (rc != SB_OK)
        return rc;
    rc = sb_rt_tok_from_gguf(g, path, out, err);
    sb_rt_gguf_close(g);
    return rc;
}

/* ---- copying ------------------------------------------------------------------------ */

/* One key, its value unchanged. */
static int copy_key(const sb_rt_gguf *g, const char *key, uint32_t type, sb_rt_gguf_writer *w,
                    bool dry)
{
    union { uint8_t b[8]; uint64_t u; int64_t i; float f; } v = { 0 };
    size_t size = 0;
    int rc = SB_OK;
    switch (type) {
    case SB_RT_GGUF_U8: case SB_RT_GGUF_I8: size = 1; break;
    case SB_RT_GGUF_U16: case SB_RT_GGUF_I16: size = 2; break;
    case SB_RT_GGUF_U32: case SB_RT_GGUF_I32: size = 4; break;
    case SB_RT_GGUF_I64: size = 8; break;
    case SB_RT_GGUF_U64: size = 8; rc = sb_rt_gguf_get_u64(g, key, &v.u); break;
    case SB_RT_GGUF_F32: size = 4; rc = sb_rt_gguf_get_f32(g, key, &v.f); break;
    case SB_RT_GGUF_BOOL: {
        bool b;
        size = 1;
        rc = sb_rt_gguf_get_bool(g, key, &b);
        v.b[0] = b;
        break;
    }
    case SB_RT_GGUF_STR: {
        const char *s;
        size_t len;
        if ((rc = sb_rt_gguf_get_str(g, key, &s, &len)) != SB_OK || dry)
            return rc;
        char *buf = malloc(8 + len);
        if (!buf)
            return SB_ERR_NOMEM;
        uint64_t n = len;
        memcpy(buf, &n, 8);
        memcpy(buf + 8, s, len);
        sb_rt_gguf_add_raw(w, key, type, buf, 8 + len);
        free(buf);
        return SB_OK;
    }
    case SB_RT_GGUF_ARR: {
        uint32_t et;
        uint64_t n;
        const void *data;
        if ((rc = sb_rt_gguf_get_arr(g, key, &et, &n, &data)) != SB_OK || dry)
            return rc;
        if (et != SB_RT_GGUF_STR) {
            sb_rt_gguf_add_arr(w, key, et, data, n);
            return SB_OK;
        }
        const char **s = malloc((n ? n : 1) * sizeof *s);
        size_t *len = malloc((n ? n : 1) * sizeof *len);
        for (uint64_t i = 0; s && len && i < n && rc == SB_OK; i++)
            rc = sb_rt_gguf_arr_str(g, key, i, &s[i], &len[i]);
        if (s && len && rc == SB_OK)
            sb_rt_gguf_add_arr_str(w, key, s, len, n);
        rc = !s || !len ? SB_ERR_NOMEM : rc;
        free(s), free(len);
        return rc;
    }
    default:
        return SB_ERR_UNSUPPORTED; /* f64: the reader gives it only as a float */
    }
    if (type != SB_RT_GGUF_U64 && type != SB_RT_GGUF_F32 && type != SB_RT_GGUF_BOOL)
        rc = sb_rt_gguf_get_i64(g, key, &v.i); /* little-endian: the low bytes are the value */
    if (rc == SB_OK && !dry)
        sb_rt_gguf_add_raw(w, key, type, v.b, size);
    return rc;
}

int sb_rt_vocab_copy(const sb_rt_gguf *g, const char *path, sb_rt_gguf_writer *w,
                     sb_rt_err *err)
{
    for (int pass = 0; pass < 2; pass++) /* check every key, then copy */
        for (size_t i = 0; i < sb_rt_gguf_n_kv(g); i++) {
            uint32_t type;
            const char *key = sb_rt_gguf_kv_key(g, i, &type);
            if (strncmp(key, "tokenizer.", 10))
                continue;
            int rc = copy_key(g, key, type, w, pass == 0);
            if (rc == SB_ERR_NOMEM)
                return sb_rt_fail(err, rc, "%s: out of memory", path);
            if (rc != SB_OK)
                return sb_rt_fail(err, rc == SB_ERR_UNSUPPORTED ? rc : SB_ERR_FORMAT, "%s: key "
                                  "'%s' (GGUF type %" PRIu32 ") cannot be copied", path, key,
                                  type);
        }
    return SB_OK;
}
