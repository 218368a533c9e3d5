/* vocab.c -- a GGUF model's tokenizer from its metadata (vocab.h). */
#include "model/vocab.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { GGUF_I32 = 5, GGUF_F32 = 6, GGUF_STR = 8 }; /* GGUF value type ids */

static uint32_t id_or(const sb_rt_gguf *g, const char *key, uint32_t dflt)
{
    uint64_t v;
    return sb_rt_gguf_get_u64(g, key, &v) == SB_OK && v <= UINT32_MAX ? (uint32_t)v : dflt;
}

static bool bool_or(const sb_rt_gguf *g, const char *key, bool dflt)
{
    bool v;
    return sb_rt_gguf_get_bool(g, key, &v) == SB_OK ? v : dflt;
}

int sb_rt_tok_from_gguf(const sb_rt_gguf *g, const char *path, sb_rt_tok **out, sb_rt_err *err)
{
    *out = NULL;
    const char *model;
    size_t model_len;
    if (sb_rt_gguf_get_str(g, "tokenizer.ggml.model", &model, &model_len) != SB_OK)
        return sb_rt_fail(err, SB_ERR_UNSUPPORTED, "%s: no vocabulary (tokenizer.ggml.model)",
                          path);
    if (model_len != 5 || memcmp(model, "llama", 5))
        return sb_rt_fail(err, SB_ERR_UNSUPPORTED, "%s: vocabulary type '%.*s' is not "
                          "supported (only 'llama', SentencePiece)", path,
                          (int)(model_len > 32 ? 32 : model_len), model);
    uint32_t type;
    uint64_t n;
    const void *data;
    if (sb_rt_gguf_get_arr(g, "tokenizer.ggml.tokens", &type, &n, &data) != SB_OK ||
        type != GGUF_STR || n == 0 || n > (1u << 24))
        return sb_rt_fail(err, SB_ERR_FORMAT, "%s: tokenizer.ggml.tokens must be an array of "
                          "1 to 2^24 strings", path);
    const float *scores = NULL;
    const int32_t *types = NULL;
    uint64_t m;
    if (sb_rt_gguf_get_arr(g, "tokenizer.ggml.scores", &type, &m, &data) == SB_OK) {
        if (type != GGUF_F32 || m != n)
            return sb_rt_fail(err, SB_ERR_FORMAT, "%s: tokenizer.ggml.scores must be %" PRIu64
                              " float32 values", path, n);
        scores = data;
    }
    if (sb_rt_gguf_get_arr(g, "tokenizer.ggml.token_type", &type, &m, &data) == SB_OK) {
        if (type != GGUF_I32 || m != n)
            return sb_rt_fail(err, SB_ERR_FORMAT, "%s: tokenizer.ggml.token_type must be %"
                              PRIu64 " int32 values", path, n);
        types = data;
    }
    /* The arrays in the mapping are packed little-endian and may be
     * unaligned: copy them. */
    const char **pieces = malloc(n * sizeof *pieces);
    size_t *lens = malloc(n * sizeof *lens);
    float *sc = scores ? malloc(n * sizeof *sc) : NULL;
    int32_t *ty = types ? malloc(n * sizeof *ty) : NULL;
    int rc = SB_OK;
    if (!pieces || !lens || (scores && !sc) || (types && !ty)) {
        rc = sb_rt_fail(err, SB_ERR_NOMEM, "%s: out of memory", path);
        goto out;
    }
    if (sc)
        memcpy(sc, scores, n * sizeof *sc);
    if (ty)
        memcpy(ty, types, n * sizeof *ty);
    for (uint64_t i = 0; i < n; i++)
        if (sb_rt_gguf_arr_str(g, "tokenizer.ggml.tokens", i, &pieces[i], &lens[i]) != SB_OK) {
            rc = sb_rt_fail(err, SB_ERR_FORMAT, "%s: tokenizer.ggml.tokens[%" PRIu64 "] is "
                            "unreadable", path, i);
            goto out;
        }
    sb_rt_tok_spec spec = {
        .n_vocab = (uint32_t)n, .pieces = pieces, .piece_len = lens, .scores = sc, .types = ty,
        .bos = id_or(g, "tokenizer.ggml.bos_token_id", 1),
        .eos = id_or(g, "tokenizer.ggml.eos_token_id", 2),
        .unk = id_or(g, "tokenizer.ggml.unknown_token_id", 0),
        .add_bos = bool_or(g, "tokenizer.ggml.add_bos_token", true),
        .add_space_prefix = bool_or(g, "tokenizer.ggml.add_space_prefix", true),
    };
    rc = sb_rt_tok_new(&spec, out, err);
    if (rc != SB_OK && err) {
        char why[SB_RT_ERR_MSG];
        snprintf(why, sizeof why, "%s", err->msg[0] ? err->msg : "bad vocabulary");
        sb_rt_fail(err, rc, "%s: %s", path, why);
    }
out:
    free(pieces);
    free(lens);
    free(sc);
    free(ty);
    return rc;
}
