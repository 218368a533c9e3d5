/* model.c -- loading a llama-family model from GGUF (model.h).
 *
 * The identity the bank keys KV state under is an XXH3-128 digest of:
 * the KV page format (SB_RT_KV_FORMAT, F16 K/V), the architecture, every
 * hyperparameter, and every tensor's name, type, shape and bytes. Any change
 * to weights or to a setting that changes the K/V bytes gives another
 * identity, so the bank never mixes state of two models. Hashing reads the
 * whole file once at load (about 10 ms per 100 MB here).
 */
#include "model/model.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "model/gguf.h"
#include "model/kv.h"
#include "model/tokenizer.h"
#include "model/vocab.h"

#define FAIL(code, ...) sb_rt_fail(err, code, __VA_ARGS__)

/* ---- metadata ---------------------------------------------------------------------- */

/* key "<arch>.<suffix>" */
static void arch_key(char *out, size_t n, const char *arch, const char *suffix)
{
    snprintf(out, n, "%s.%s", arch, suffix);
}

static int need_u32(const sb_rt_gguf *g, const char *path, const char *arch, const char *suffix,
                    uint32_t lo, uint32_t hi, uint32_t *out, sb_rt_err *err)
{
    char key[128];
    arch_key(key, sizeof key, arch, suffix);
    uint64_t v;
    int rc = sb_rt_gguf_get_u64(g, key, &v);
    if (rc == SB_ERR_NOT_FOUND)
        return FAIL(SB_ERR_FORMAT, "%s: metadata key '%s' is missing", path, key);
    if (rc != SB_OK || v < lo || v > hi)
        return FAIL(SB_ERR_FORMAT, "%s: metadata key '%s' must be an integer in [%" PRIu32
                    ", %" PRIu32 "]", path, key, lo, hi);
    *out = (uint32_t)v;
    return SB_OK;
}

static int opt_f32(const sb_rt_gguf *g, const char *path, const char *arch, const char *suffix,
                   float dflt, float *out, sb_rt_err *err)
{
    char key[128];
    arch_key(key, sizeof key, arch, suffix);
    int rc = sb_rt_gguf_get_f32(g, key, out);
    if (rc == SB_ERR_NOT_FOUND) {
        *out = dflt;
        return SB_OK;
    }
    if (rc != SB_OK || !(*out > 0) || *out > 1e30f)
        return FAIL(SB_ERR_FORMAT, "%s: metadata key '%s' must be a positive float", path, key);
    return SB_OK;
}

static int read_hparams(sb_rt_model *m, sb_rt_err *err)
{
    const sb_rt_gguf *g = m->gguf;
    const char *path = m->path;
    const char *arch;
    size_t arch_len;
    if (sb_rt_gguf_get_str(g, "general.architecture", &arch, &arch_len) != SB_OK)
        return FAIL(SB_ERR_FORMAT, "%s: metadata key 'general.architecture' is missing", path);
    sb_rt_hparams *hp = &m->hp;
    char a[16];
    if (arch_len == 5 && !memcmp(arch, "llama", 5)) {
        hp->arch = SB_RT_ARCH_LLAMA;
    } else if (arch_len == 5 && !memcmp(arch, "qwen2", 5)) {
        hp->arch = SB_RT_ARCH_QWEN2;
    } else {
        return FAIL(SB_ERR_UNSUPPORTED, "%s: architecture '%.*s' is not supported (llama, "
                    "qwen2)", path, (int)(arch_len > 64 ? 64 : arch_len), arch);
    }
    memcpy(a, arch, 5);
    a[5] = '\0';
    int rc;
    if ((rc = need_u32(g, path, a, "embedding_length", 2, 1u << 16, &hp->dim, err)) ||
        (rc = need_u32(g, path, a, "block_count", 1, SB_RT_MAX_LAYERS, &hp->n_layers, err)) ||
        (rc = need_u32(g, path, a, "feed_forward_length", 1, 1u << 20, &hp->n_ff, err)) ||
        (rc = need_u32(g, path, a, "attention.head_count", 1, 1024, &hp->n_heads, err)) ||
        (rc = need_u32(g, path, a, "context_length", 1, 1u << 22, &hp->n_ctx, err)))
        return rc;
    char key[128];
    arch_key(key, sizeof key, a, "attention.head_count_kv");
    uint64_t v;
    hp->n_kv_heads = hp->n_heads;
    if (sb_rt_gguf_get_u64(g, key, &v) == SB_OK)
        hp->n_kv_heads = v >= 1 && v <= hp->n_heads ? (uint32_t)v : 0;
    if (!hp->n_kv_heads || hp->n_heads % hp->n_kv_heads)
        return FAIL(SB_ERR_FORMAT, "%s: '%s' must divide the head count %" PRIu32, path, key,
                    hp->n_heads);
    if (hp->dim % hp->n_heads || (hp->dim / hp->n_heads) % 2)
        return FAIL(SB_ERR_FORMAT, "%s: embedding length %" PRIu32 " is not an even head "
                    "size times %" PRIu32 " heads", path, hp->dim, hp->n_heads);
    hp->head_dim = hp->dim / hp->n_heads;
    arch_key(key, sizeof key, a, "rope.dimension_count");
    if (sb_rt_gguf_get_u64(g, key, &v) == SB_OK && v != hp->head_dim)
        return FAIL(SB_ERR_UNSUPPORTED, "%s: partial RoPE ('%s' = %" PRIu64 ", head size %"
                    PRIu32 ") is not supported", path, key, v, hp->head_dim);
    if ((rc = opt_f32(g, path, a, "rope.freq_base", 10000.0f, &hp->rope_base, err)) ||
        (rc = opt_f32(g, path, a, "attention.layer_norm_rms_epsilon", 1e-5f, &hp->rms_eps, err)))
        return rc;
    return SB_OK;
}

/* ---- tensors ----------------------------------------------------------------------- */

/* A matrix tensor of shape (in, out), type F32 / F16 / Q8_0. */
static int get_mat(sb_rt_model *m, const char *name, uint32_t in, uint32_t out, sb_rt_mat *w,
                   sb_rt_err *err)
{
    const sb_rt_gguf_tensor *t = sb_rt_gguf_find_tensor(m->gguf, name);
    if (!t)
        return FAIL(SB_ERR_FORMAT, "%s: tensor '%s' is missing", m->path, name);
    if (t->n_dims != 2 || t->ne[0] != in || t->ne[1] != out)
        return FAIL(SB_ERR_FORMAT, "%s: tensor '%s' has shape (%" PRIu64 ", %" PRIu64 "%s), "
                    "expected (%" PRIu32 ", %" PRIu32 ")", m->path, name, t->ne[0],
                    t->n_dims > 1 ? t->ne[1] : 1, t->n_dims > 2 ? ", ..." : "", in, out);
    if (t->type != SB_RT_F32 && t->type != SB_RT_F16 && t->type != SB_RT_Q8_0)
        return FAIL(SB_ERR_UNSUPPORTED, "%s: tensor '%s' has type %" PRIu32 " (F32, F16 and "
                    "Q8_0 are supported)", m->path, name, (uint32_t)t->type);
    *w = (sb_rt_mat){ t->data, (sb_rt_dtype)t->type, in, out };
    return SB_OK;
}

/* A vector tensor of n elements (F32 or F16) into an owned float array;
 * *out NULL when optional and absent. */
static int get_vec(sb_rt_model *m, const char *name, uint32_t n, bool optional, float **out,
                   sb_rt_err *err)
{
    *out = NULL;
    const sb_rt_gguf_tensor *t = sb_rt_gguf_find_tensor(m->gguf, name);
    if (!t)
        return optional ? SB_OK : FAIL(SB_ERR_FORMAT, "%s: tensor '%s' is missing", m->path, name);
    if (t->n_dims != 1 || t->ne[0] != n)
        return FAIL(SB_ERR_FORMAT, "%s: tensor '%s' has %" PRIu64 " elements in %" PRIu32
                    " dimensions, expected (%" PRIu32 ")", m->path, name, t->ne[0], t->n_dims, n);
    if (t->type != SB_RT_F32 && t->type != SB_RT_F16)
        return FAIL(SB_ERR_UNSUPPORTED, "%s: tensor '%s' has type %" PRIu32 " (a vector must "
                    "be F32 or F16)", m->path, name, (uint32_t)t->type);
    float *v = malloc((size_t)n * sizeof *v);
    if (!v)
        return FAIL(SB_ERR_NOMEM, "%s: out of memory", m->path);
    if (t->type == SB_RT_F32) {
        memcpy(v, t->data, (size_t)n * sizeof *v);
    } else {
        for (uint32_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, (const uint8_t *)t->data + 2 * i, 2);
            sb_rt_f16_to_f32(&h, &v[i], 1);
        }
    }
    *out = v;
    return SB_OK;
}

static int read_tensors(sb_rt_model *m, sb_rt_err *err)
{
    const sb_rt_hparams *hp = &m->hp;
    uint32_t qd = hp->n_heads * hp->head_dim, kvd = hp->n_kv_heads * hp->head_dim;
    /* The vocabulary size is token_embd's second dimension. */
    const sb_rt_gguf_tensor *te = sb_rt_gguf_find_tensor(m->gguf, "token_embd.weight");
    if (!te)
        return FAIL(SB_ERR_FORMAT, "%s: tensor 'token_embd.weight' is missing", m->path);
    if (te->n_dims != 2 || te->ne[1] < 1 || te->ne[1] > (1u << 24))
        return FAIL(SB_ERR_FORMAT, "%s: tensor 'token_embd.weight' must have shape (%" PRIu32
                    ", n_vocab), n_vocab in [1, 2^24]", m->path, hp->dim);
    m->hp.n_vocab = (uint32_t)te->ne[1];
    int rc = get_mat(m, "token_embd.weight", hp->dim, hp->n_vocab, &m->embd, err);
    if (rc != SB_OK)
        return rc;
    if ((rc = get_vec(m, "output_norm.weight", hp->dim, false, &m->out_norm, err)))
        return rc;
    if (sb_rt_gguf_find_tensor(m->gguf, "output.weight")) {
        rc = get_mat(m, "output.weight", hp->dim, hp->n_vocab, &m->output, err);
    } else {
        m->hp.tied = true;
        m->output = m->embd;
    }
    if (rc != SB_OK)
        return rc;
    m->layers = calloc(hp->n_layers, sizeof *m->layers);
    if (!m->layers)
        return FAIL(SB_ERR_NOMEM, "%s: out of memory", m->path);
    bool bias = hp->arch == SB_RT_ARCH_QWEN2;
    for (uint32_t l = 0; l < hp->n_layers && rc == SB_OK; l++) {
        sb_rt_layer *L = &m->layers[l];
        char n[96];
#define NAME(s) (snprintf(n, sizeof n, "blk.%" PRIu32 ".%s", l, s), n)
        if ((rc = get_vec(m, NAME("attn_norm.weight"), hp->dim, false, &L->attn_norm, err)) ||
            (rc = get_vec(m, NAME("ffn_norm.weight"), hp->dim, false, &L->ffn_norm, err)) ||
            (rc = get_mat(m, NAME("attn_q.weight"), hp->dim, qd, &L->wq, err)) ||
            (rc = get_mat(m, NAME("attn_k.weight"), hp->dim, kvd, &L->wk, err)) ||
            (rc = get_mat(m, NAME("attn_v.weight"), hp->dim, kvd, &L->wv, err)) ||
            (rc = get_mat(m, NAME("attn_output.weight"), qd, hp->dim, &L->wo, err)) ||
            (rc = get_mat(m, NAME("ffn_gate.weight"), hp->dim, hp->n_ff, &L->gate, err)) ||
            (rc = get_mat(m, NAME("ffn_up.weight"), hp->dim, hp->n_ff, &L->up, err)) ||
            (rc = get_mat(m, NAME("ffn_down.weight"), hp->n_ff, hp->dim, &L->down, err)) ||
            (rc = get_vec(m, NAME("attn_q.bias"), qd, !bias, &L->bq, err)) ||
            (rc = get_vec(m, NAME("attn_k.bias"), kvd, !bias, &L->bk, err)) ||
            (rc = get_vec(m, NAME("attn_v.bias"), kvd, !bias, &L->bv, err)))
            break;
#undef NAME
    }
    return rc;
}

/* ---- identity ---------------------------------------------------------------------- */

static int identity(sb_rt_model *m)
{
    static const char tag[] = "snapbank llama KV";
    XXH3_state_t *s = XXH3_createState();
    if (!s)
        return SB_ERR_NOMEM;
    XXH3_128bits_reset(s);
    XXH3_128bits_update(s, tag, sizeof tag);
    uint32_t fmt = SB_RT_KV_FORMAT;
    XXH3_128bits_update(s, &fmt, sizeof fmt);
    const sb_rt_hparams *hp = &m->hp;
    uint32_t u[] = { (uint32_t)hp->arch, hp->n_vocab, hp->dim, hp->n_layers, hp->n_heads,
                     hp->n_kv_heads, hp->head_dim, hp->n_ff, hp->n_ctx, hp->tied };
    XXH3_128bits_update(s, u, sizeof u);
    float f[] = { hp->rope_base, hp->rms_eps };
    XXH3_128bits_update(s, f, sizeof f);
    for (size_t i = 0; i < sb_rt_gguf_n_tensors(m->gguf); i++) {
        const sb_rt_gguf_tensor *t = sb_rt_gguf_tensor_at(m->gguf, i);
        XXH3_128bits_update(s, t->name, strlen(t->name) + 1);
        uint64_t d[6] = { t->type, t->n_dims, t->ne[0], t->ne[1], t->ne[2], t->ne[3] };
        XXH3_128bits_update(s, d, sizeof d);
        XXH3_128bits_update(s, t->data, t->bytes);
    }
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits_digest(s));
    memcpy(m->id, c.digest, SB_RT_ID_BYTES);
    XXH3_freeState(s);
    return SB_OK;
}

/* ---- load ------------------------------------------------------------------------- */

void sb_rt_model_free(sb_rt_model *m)
{
    if (!m)
        return;
    if (m->layers)
        for (uint32_t l = 0; l < m->hp.n_layers; l++) {
            sb_rt_layer *L = &m->layers[l];
            free(L->attn_norm);
            free(L->ffn_norm);
            free(L->bq);
            free(L->bk);
            free(L->bv);
        }
    free(m->layers);
    free(m->out_norm);
    sb_rt_tok_free(m->tok);
    sb_rt_gguf_close(m->gguf);
    free(m);
}

int sb_rt_model_load(const char *path, sb_rt_model **out, sb_rt_err *err)
{
    sb_rt_err_clear(err);
    if (!path || !out)
        return FAIL(SB_ERR_INVAL, "sb_rt_model_load: NULL argument");
    *out = NULL;
    sb_rt_model *m = calloc(1, sizeof *m);
    if (!m)
        return FAIL(SB_ERR_NOMEM, "%s: out of memory", path);
    snprintf(m->path, sizeof m->path, "%s", path);
    int rc = sb_rt_gguf_open(path, &m->gguf, err);
    if (rc == SB_OK)
        rc = read_hparams(m, err);
    if (rc == SB_OK)
        rc = read_tensors(m, err);
    if (rc == SB_OK && identity(m) != SB_OK)
        rc = FAIL(SB_ERR_NOMEM, "%s: out of memory", path);
    if (rc != SB_OK) {
        sb_rt_model_free(m);
        return rc;
    }
    sb_rt_err terr = { 0 };
    if (sb_rt_tok_from_gguf(m->gguf, path, &m->tok, &terr) != SB_OK) {
        m->tok = NULL;
        snprintf(m->tok_error, sizeof m->tok_error, "%s", terr.msg);
    } else if (sb_rt_tok_n_vocab(m->tok) > m->hp.n_vocab) { /* ids the model has no row for */
        snprintf(m->tok_error, sizeof m->tok_error, "%s: the vocabulary has %" PRIu32 " tokens "
                 "but token_embd.weight only %" PRIu32 " rows", path,
                 sb_rt_tok_n_vocab(m->tok), m->hp.n_vocab);
        sb_rt_tok_free(m->tok);
        m->tok = NULL;
    }
    *out = m;
    return SB_OK;
}
