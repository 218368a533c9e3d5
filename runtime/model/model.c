/* model.c -- loading a llama-family model from GGUF (model.h).
 *
 * The identity the bank keys KV state under is an XXH3-128 digest of:
 * the KV page format (SB_RT_KV_FORMAT, F16 K/V), the architecture, every
 * hyperparameter, the RoPE angle table and magnitude (so every scaling
 * key), and every tensor's name, type, shape and bytes; for a hybrid model
 * also the recurrent layers' shapes and which layers they are, and the
 * revisions of their state (SB_RT_GDN_FORMAT) and of the boundary point
 * state (SB_RT_BOUNDARY_VERSION). Any change
 * to weights or to a setting that changes the K/V bytes gives another
 * identity, so the bank never mixes state of two models. Hashing reads the
 * whole file once at load (about 10 ms per 100 MB here).
 */
#include "model/model.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "kernels/quant.h"
#include "model/boundary.h"
#include "model/deltanet.h"
#include "gguf/gguf.h"
#include "model/kv.h"
#include "text/tokenizer.h"
#include "text/vocab.h"

#define FAIL(code, ...) sb_rt_fail(err, code, __VA_ARGS__)

/* ---- metadata ---------------------------------------------------------------------- */

/* What each architecture computes beyond the common llama block. */
static const struct arch_info {
    const char *name;
    sb_rt_arch arch;
    bool neox;                 /* RoPE on halves */
    bool qk_norm;              /* attn_q_norm / attn_k_norm */
    bool rope_freqs;           /* may carry rope_freqs.weight */
    bool hybrid;               /* Gated DeltaNet and gated attention layers */
} arch_table[] = {
    { "llama", SB_RT_ARCH_LLAMA, false, false, true, false },
    { "qwen2", SB_RT_ARCH_QWEN2, true, false, false, false },
    { "qwen3", SB_RT_ARCH_QWEN3, true, true, false, false },
    { "qwen35", SB_RT_ARCH_QWEN35, true, true, false, true },
};

static const struct arch_info *arch_of(sb_rt_arch arch)
{
    for (size_t i = 0; i < sizeof arch_table / sizeof *arch_table; i++)
        if (arch_table[i].arch == arch)
            return &arch_table[i];
    return NULL;
}

const char *sb_rt_arch_name(sb_rt_arch arch)
{
    return arch_of(arch) ? arch_of(arch)->name : "?";
}

/* key "<arch>.<suffix>" */
static void arch_key(char *out, size_t n, const char *arch, const char *suffix)
{
    snprintf(out, n, "%s.%s", arch, suffix);
}

/* An integer key in [lo, hi]; *out = dflt when absent and not required. */
static int get_u32(const sb_rt_gguf *g, const char *path, const char *arch, const char *suffix,
                   bool required, uint32_t dflt, uint32_t lo, uint32_t hi, uint32_t *out,
                   sb_rt_err *err)
{
    char key[128];
    arch_key(key, sizeof key, arch, suffix);
    uint64_t v;
    int rc = sb_rt_gguf_get_u64(g, key, &v);
    if (rc == SB_ERR_NOT_FOUND && !required) {
        *out = dflt;
        return SB_OK;
    }
    if (rc == SB_ERR_NOT_FOUND)
        return FAIL(SB_ERR_FORMAT, "%s: metadata key '%s' is missing", path, key);
    if (rc != SB_OK || v < lo || v > hi)
        return FAIL(SB_ERR_FORMAT, "%s: metadata key '%s' must be an integer in [%" PRIu32
                    ", %" PRIu32 "]", path, key, lo, hi);
    *out = (uint32_t)v;
    return SB_OK;
}

static int need_u32(const sb_rt_gguf *g, const char *path, const char *arch, const char *suffix,
                    uint32_t lo, uint32_t hi, uint32_t *out, sb_rt_err *err)
{
    return get_u32(g, path, arch, suffix, true, 0, lo, hi, out, err);
}

/* A float key: *out = dflt when absent; else positive and finite (or 0
 * when zero_ok). *found says whether it was there. */
static int get_f32(const sb_rt_gguf *g, const char *path, const char *key, float dflt,
                   bool zero_ok, float *out, bool *found, sb_rt_err *err)
{
    int rc = sb_rt_gguf_get_f32(g, key, out);
    if (found)
        *found = rc != SB_ERR_NOT_FOUND;
    if (rc == SB_ERR_NOT_FOUND) {
        *out = dflt;
        return SB_OK;
    }
    if (rc != SB_OK || !(*out > 0 || (zero_ok && *out == 0)) || *out > 1e30f)
        return FAIL(SB_ERR_FORMAT, "%s: metadata key '%s' must be a positive float", path, key);
    return SB_OK;
}

static int opt_f32(const sb_rt_gguf *g, const char *path, const char *arch, const char *suffix,
                   float dflt, float *out, sb_rt_err *err)
{
    char key[128];
    arch_key(key, sizeof key, arch, suffix);
    return get_f32(g, path, key, dflt, false, out, NULL, err);
}

/* A YaRN parameter llama.cpp does not read for these architectures: when
 * present it must be the value llama.cpp uses (want), or the file is
 * refused rather than run differently. */
static int yarn_fixed(const sb_rt_gguf *g, const char *path, const char *arch, const char *suffix,
                      double want, sb_rt_err *err)
{
    char key[128];
    arch_key(key, sizeof key, arch, suffix);
    float v;
    int rc = sb_rt_gguf_get_f32(g, key, &v);
    if (rc == SB_ERR_NOT_FOUND)
        return SB_OK;
    if (rc != SB_OK)
        return FAIL(SB_ERR_FORMAT, "%s: metadata key '%s' must be a float", path, key);
    if (!(fabs(v - want) <= 1e-6 * fmax(1.0, fabs(want))))
        return FAIL(SB_ERR_UNSUPPORTED, "%s: '%s' = %g is not supported (only %g, the value "
                    "llama.cpp uses for this architecture)", path, key, (double)v, want);
    return SB_OK;
}

/* Step: {arch}.rope.scaling.* into hp (type, factor, original context,
 * attention factor), refusing what is not computed. */
static int read_rope_scaling(const sb_rt_gguf *g, const char *path, const char *a,
                             sb_rt_hparams *hp, sb_rt_err *err)
{
    char key[128];
    const char *type;
    size_t type_len;
    arch_key(key, sizeof key, a, "rope.scaling.type");
    int rc = sb_rt_gguf_get_str(g, key, &type, &type_len);
    hp->rope_scaling = SB_RT_ROPE_LINEAR; /* llama.cpp's default: a no-op at factor 1 */
    if (rc == SB_OK) {
        static const struct { const char *name; sb_rt_rope_scaling v; } types[] = {
            { "none", SB_RT_ROPE_NONE }, { "linear", SB_RT_ROPE_LINEAR },
            { "yarn", SB_RT_ROPE_YARN } };
        size_t i = 0;
        while (i < 3 && !(strlen(types[i].name) == type_len &&
                          !memcmp(types[i].name, type, type_len)))
            i++;
        if (i == 3)
            return FAIL(SB_ERR_UNSUPPORTED, "%s: RoPE scaling type '%.*s' ('%s') is not "
                        "supported (none, linear, yarn)", path,
                        (int)(type_len > 64 ? 64 : type_len), type, key);
        hp->rope_scaling = types[i].v;
    } else if (rc != SB_ERR_NOT_FOUND) {
        return FAIL(SB_ERR_FORMAT, "%s: metadata key '%s' must be a string", path, key);
    }
    bool found;
    arch_key(key, sizeof key, a, "rope.scaling.factor");
    if ((rc = get_f32(g, path, key, 0, true, &hp->rope_scale, &found, err)))
        return rc;
    if (!found) {
        arch_key(key, sizeof key, a, "rope.scale_linear");
        if ((rc = get_f32(g, path, key, 0, true, &hp->rope_scale, NULL, err)))
            return rc;
    }
    if (hp->rope_scale == 0 || hp->rope_scaling == SB_RT_ROPE_NONE)
        hp->rope_scale = 1; /* 0 means unset, as in llama.cpp */
    if ((rc = get_u32(g, path, a, "rope.scaling.original_context_length", false, hp->n_ctx, 1,
                      1u << 24, &hp->rope_ctx_orig, err)) ||
        (rc = opt_f32(g, path, a, "rope.scaling.attn_factor", 1.0f, &hp->rope_attn_factor, err)))
        return rc;
    if (hp->rope_scaling == SB_RT_ROPE_YARN) {
        double s = hp->rope_scale;
        if ((rc = yarn_fixed(g, path, a, "rope.scaling.yarn_ext_factor", 1, err)) ||
            (rc = yarn_fixed(g, path, a, "rope.scaling.yarn_beta_fast", 32, err)) ||
            (rc = yarn_fixed(g, path, a, "rope.scaling.yarn_beta_slow", 1, err)) ||
            (rc = yarn_fixed(g, path, a, "rope.scaling.yarn_attn_factor",
                             s > 1 ? 1 + 0.1 * log(s) : 1, err)) ||
            (rc = yarn_fixed(g, path, a, "rope.scaling.yarn_log_multiplier", 0, err)))
            return rc;
    }
    return SB_OK;
}

/* An integer array key of n elements (any integer element type) into
 * out[0, n); *found says whether it was there. */
static int get_u32_arr(const sb_rt_gguf *g, const char *path, const char *key, uint32_t n,
                       uint32_t *out, bool *found, sb_rt_err *err)
{
    uint32_t type;
    uint64_t count;
    const void *data;
    int rc = sb_rt_gguf_get_arr(g, key, &type, &count, &data);
    *found = rc == SB_OK;
    if (rc == SB_ERR_NOT_FOUND)
        return SB_OK;
    static const uint8_t size[] = { [SB_RT_GGUF_U8] = 1, [SB_RT_GGUF_I8] = 1,
                                    [SB_RT_GGUF_U16] = 2, [SB_RT_GGUF_I16] = 2,
                                    [SB_RT_GGUF_U32] = 4, [SB_RT_GGUF_I32] = 4,
                                    [SB_RT_GGUF_BOOL] = 1, [SB_RT_GGUF_U64] = 8,
                                    [SB_RT_GGUF_I64] = 8 };
    if (rc != SB_OK || type >= sizeof size || !size[type] || count != n)
        return FAIL(SB_ERR_FORMAT, "%s: metadata key '%s' must be an array of %" PRIu32
                    " integers", path, key, n);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t v = 0;
        memcpy(&v, (const uint8_t *)data + (size_t)i * size[type], size[type]);
        bool neg = (type == SB_RT_GGUF_I8 || type == SB_RT_GGUF_I16 || type == SB_RT_GGUF_I32 ||
                    type == SB_RT_GGUF_I64) && (v >> (8 * size[type] - 1)) & 1;
        if (neg || v > UINT32_MAX)
            return FAIL(SB_ERR_FORMAT, "%s: metadata key '%s': element %" PRIu32 " is not a "
                        "non-negative 32-bit integer", path, key, i);
        out[i] = (uint32_t)v;
    }
    return SB_OK;
}

/* Step for qwen35: the trunk's layer count (block_count less the MTP
 * blocks), which layers are recurrent, the Gated DeltaNet shapes and the
 * M-RoPE sections (model.h). Allocates m->layers (their rec and slot). */
static int read_hybrid(sb_rt_model *m, const char *a, sb_rt_err *err)
{
    const sb_rt_gguf *g = m->gguf;
    const char *path = m->path;
    sb_rt_hparams *hp = &m->hp;
    char key[128];
    uint32_t blocks = hp->n_layers, nextn = 0, interval = 4, d_inner = 0;
    int rc;
    if ((rc = get_u32(g, path, a, "nextn_predict_layers", false, 0, 0, blocks - 1, &nextn,
                      err)) ||
        (rc = get_u32(g, path, a, "full_attention_interval", false, 4, 1, 1u << 20, &interval,
                      err)) ||
        (rc = need_u32(g, path, a, "ssm.conv_kernel", 2, 64, &hp->ssm_conv, err)) ||
        (rc = need_u32(g, path, a, "ssm.state_size", 1, 1024, &hp->ssm_head_dim, err)) ||
        (rc = need_u32(g, path, a, "ssm.group_count", 1, 1024, &hp->ssm_k_heads, err)) ||
        (rc = need_u32(g, path, a, "ssm.time_step_rank", 1, 1024, &hp->ssm_v_heads, err)) ||
        (rc = need_u32(g, path, a, "ssm.inner_size", 1, 1u << 20, &d_inner, err)))
        return rc;
    if (hp->ssm_v_heads % hp->ssm_k_heads)
        return FAIL(SB_ERR_FORMAT, "%s: %" PRIu32 " value heads ('%s.ssm.time_step_rank') are "
                    "not a multiple of %" PRIu32 " key heads ('%s.ssm.group_count')", path,
                    hp->ssm_v_heads, a, hp->ssm_k_heads, a);
    if (d_inner != hp->ssm_v_heads * hp->ssm_head_dim)
        return FAIL(SB_ERR_UNSUPPORTED, "%s: value heads of %" PRIu32 " values ('%s.ssm."
                    "inner_size' %" PRIu32 " / %" PRIu32 " heads) and key heads of %" PRIu32
                    " ('%s.ssm.state_size') are not supported (they must be equal)", path,
                    d_inner / hp->ssm_v_heads, a, d_inner, hp->ssm_v_heads, hp->ssm_head_dim, a);
    hp->n_layers = blocks - nextn;
    hp->attn_gate = true;
    m->layers = calloc(hp->n_layers, sizeof *m->layers);
    uint32_t *rec = calloc(blocks, sizeof *rec);
    if (!m->layers || !rec) {
        free(rec);
        return FAIL(SB_ERR_NOMEM, "%s: out of memory", path);
    }
    bool found;
    arch_key(key, sizeof key, a, "attention.recurrent_layers");
    if ((rc = get_u32_arr(g, path, key, blocks, rec, &found, err))) {
        free(rec);
        return rc;
    }
    for (uint32_t l = 0; l < hp->n_layers; l++) {
        sb_rt_layer *L = &m->layers[l];
        L->rec = found ? rec[l] != 0 : (l + 1) % interval != 0;
        L->slot = L->rec ? hp->n_rec++ : hp->n_attn++;
    }
    free(rec);
    if (!hp->n_attn)
        return FAIL(SB_ERR_UNSUPPORTED, "%s: every layer is recurrent: a hybrid model needs "
                    "a full-attention layer here", path);
    arch_key(key, sizeof key, a, "rope.dimension_sections");
    if ((rc = get_u32_arr(g, path, key, 4, hp->rope_sections, &found, err)))
        return rc;
    if (found && !(hp->rope_sections[0] + hp->rope_sections[1] + hp->rope_sections[2] +
                   hp->rope_sections[3]))
        return FAIL(SB_ERR_FORMAT, "%s: '%s' is all zeros", path, key);
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
    const struct arch_info *ai = NULL;
    for (size_t i = 0; i < sizeof arch_table / sizeof *arch_table; i++)
        if (strlen(arch_table[i].name) == arch_len && !memcmp(arch, arch_table[i].name, arch_len))
            ai = &arch_table[i];
    if (!ai)
        return FAIL(SB_ERR_UNSUPPORTED, "%s: architecture '%.*s' is not supported (llama, "
                    "qwen2, qwen3, qwen35)", path, (int)(arch_len > 64 ? 64 : arch_len), arch);
    const char *a = ai->name;
    hp->arch = ai->arch;
    hp->rope_neox = ai->neox;
    hp->qk_norm = ai->qk_norm;
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
    /* head size: attention.key_length (= value_length), else dim / heads */
    uint32_t kl = 0, vl = 0;
    if ((rc = get_u32(g, path, a, "attention.key_length", false, 0, 2, 4096, &kl, err)) ||
        (rc = get_u32(g, path, a, "attention.value_length", false, 0, 2, 4096, &vl, err)))
        return rc;
    if (!kl) {
        if (hp->dim % hp->n_heads)
            return FAIL(SB_ERR_FORMAT, "%s: embedding length %" PRIu32 " is not a multiple of "
                        "%" PRIu32 " heads and '%s.attention.key_length' is missing", path,
                        hp->dim, hp->n_heads, a);
        kl = hp->dim / hp->n_heads;
    }
    if (!vl) /* llama.cpp's default, whatever key_length says */
        vl = hp->dim % hp->n_heads ? 0 : hp->dim / hp->n_heads;
    if (!vl)
        return FAIL(SB_ERR_FORMAT, "%s: embedding length %" PRIu32 " is not a multiple of "
                    "%" PRIu32 " heads and '%s.attention.value_length' is missing", path,
                    hp->dim, hp->n_heads, a);
    if (kl != vl)
        return FAIL(SB_ERR_UNSUPPORTED, "%s: K heads of %" PRIu32 " and V heads of %" PRIu32
                    " values are not supported (they must be equal)", path, kl, vl);
    if (kl % 2)
        return FAIL(SB_ERR_FORMAT, "%s: head size %" PRIu32 " is odd (RoPE rotates pairs)",
                    path, kl);
    hp->head_dim = kl;
    arch_key(key, sizeof key, a, "rope.dimension_count");
    hp->n_rot = hp->head_dim;
    if (sb_rt_gguf_get_u64(g, key, &v) == SB_OK && v != hp->head_dim) {
        if (!ai->hybrid)
            return FAIL(SB_ERR_UNSUPPORTED, "%s: partial RoPE ('%s' = %" PRIu64 ", head size %"
                        PRIu32 ") is not supported", path, key, v, hp->head_dim);
        if (v < 2 || v > hp->head_dim || v % 2)
            return FAIL(SB_ERR_FORMAT, "%s: '%s' = %" PRIu64 " must be even and in [2, %"
                        PRIu32 "] (the head size)", path, key, v, hp->head_dim);
        hp->n_rot = (uint32_t)v;
    }
    if (ai->hybrid && (rc = read_hybrid(m, a, err)))
        return rc;
    if ((rc = opt_f32(g, path, a, "rope.freq_base", 10000.0f, &hp->rope_base, err)) ||
        (rc = opt_f32(g, path, a, "attention.layer_norm_rms_epsilon", 1e-5f, &hp->rms_eps, err)))
        return rc;
    if (hp->rope_base <= 1.0f)
        return FAIL(SB_ERR_FORMAT, "%s: '%s.rope.freq_base' must be above 1", path, a);
    return read_rope_scaling(g, path, a, hp, err);
}

/* ---- tensors ----------------------------------------------------------------------- */

/* Loading state: which of the file's tensors were taken, so that one the
 * architecture does not use is refused by name. */
typedef struct loader {
    sb_rt_model *m;
    uint8_t *used;             /* (n_tensors) 1 when taken */
} loader;

static const sb_rt_gguf_tensor *take(loader *ld, const char *name)
{
    for (size_t i = 0; i < sb_rt_gguf_n_tensors(ld->m->gguf); i++) {
        const sb_rt_gguf_tensor *t = sb_rt_gguf_tensor_at(ld->m->gguf, i);
        if (!strcmp(t->name, name)) {
            ld->used[i] = 1;
            return t;
        }
    }
    return NULL;
}

#define SUPPORTED_TYPES "f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q4_K, q5_K, q6_K"

/* A tensor type this runtime does not run: the error names it. */
static int bad_type(sb_rt_model *m, const sb_rt_gguf_tensor *t, sb_rt_err *err)
{
    return FAIL(SB_ERR_UNSUPPORTED, "%s: tensor '%s' has type %s (%" PRIu32 "), which this "
                "runtime does not run (it runs " SUPPORTED_TYPES ")", m->path, t->name,
                sb_rt_ggml_type_name(t->type), t->type);
}

/* A matrix tensor of shape (in, out), of any type quant.h lists. */
static int get_mat(loader *ld, const char *name, uint32_t in, uint32_t out, sb_rt_mat *w,
                   sb_rt_err *err)
{
    sb_rt_model *m = ld->m;
    const sb_rt_gguf_tensor *t = take(ld, name);
    if (!t)
        return FAIL(SB_ERR_FORMAT, "%s: tensor '%s' is missing", m->path, name);
    if (t->n_dims != 2 || t->ne[0] != in || t->ne[1] != out)
        return FAIL(SB_ERR_FORMAT, "%s: tensor '%s' has shape (%" PRIu64 ", %" PRIu64 "%s), "
                    "expected (%" PRIu32 ", %" PRIu32 ")", m->path, name, t->ne[0],
                    t->n_dims > 1 ? t->ne[1] : 1, t->n_dims > 2 ? ", ..." : "", in, out);
    if (!sb_rt_dtype_known(t->type))
        return bad_type(m, t, err);
    *w = (sb_rt_mat){ t->data, (sb_rt_dtype)t->type, in, out };
    return SB_OK;
}

/* A small tensor of shape (n) when ne1 is 0, else (n, ne1), of any type
 * quant.h lists (norms and biases are F32 in files llama.cpp writes), into
 * an owned float array; *out NULL when optional and absent. */
static int get_floats(loader *ld, const char *name, uint32_t n, uint32_t ne1, bool optional,
                      float **out, sb_rt_err *err)
{
    sb_rt_model *m = ld->m;
    *out = NULL;
    const sb_rt_gguf_tensor *t = take(ld, name);
    if (!t)
        return optional ? SB_OK : FAIL(SB_ERR_FORMAT, "%s: tensor '%s' is missing", m->path, name);
    if (!ne1 && (t->n_dims != 1 || t->ne[0] != n))
        return FAIL(SB_ERR_FORMAT, "%s: tensor '%s' has %" PRIu64 " elements in %" PRIu32
                    " dimensions, expected (%" PRIu32 ")", m->path, name, t->ne[0], t->n_dims, n);
    if (ne1 && (t->n_dims != 2 || t->ne[0] != n || t->ne[1] != ne1))
        return FAIL(SB_ERR_FORMAT, "%s: tensor '%s' has shape (%" PRIu64 ", %" PRIu64 "%s), "
                    "expected (%" PRIu32 ", %" PRIu32 ")", m->path, name, t->ne[0],
                    t->n_dims > 1 ? t->ne[1] : 1, t->n_dims > 2 ? ", ..." : "", n, ne1);
    if (!sb_rt_dtype_known(t->type))
        return bad_type(m, t, err);
    n *= ne1 ? ne1 : 1;
    float *v = malloc((size_t)n * sizeof *v);
    if (!v)
        return FAIL(SB_ERR_NOMEM, "%s: out of memory", m->path);
    sb_rt_dequant_row((sb_rt_dtype)t->type, t->data, v, n);
    *out = v;
    return SB_OK;
}

/* A vector tensor of n elements into an owned float array; *out NULL when
 * optional and absent. */
static int get_vec(loader *ld, const char *name, uint32_t n, bool optional, float **out,
                   sb_rt_err *err)
{
    return get_floats(ld, name, n, 0, optional, out, err);
}

/* A qwen35 layer (model.h): the norms and FFN of every layer, then a Gated
 * DeltaNet's tensors or a gated attention's. */
static int read_layer_qwen35(loader *ld, uint32_t l, sb_rt_err *err)
{
    sb_rt_model *m = ld->m;
    const sb_rt_hparams *hp = &m->hp;
    uint32_t qd = hp->n_heads * hp->head_dim, kvd = hp->n_kv_heads * hp->head_dim;
    uint32_t kd = hp->ssm_k_heads * hp->ssm_head_dim, vd = hp->ssm_v_heads * hp->ssm_head_dim;
    uint32_t nv = hp->ssm_v_heads;
    sb_rt_layer *L = &m->layers[l];
    char n[96];
    int rc;
#define NAME(s) (snprintf(n, sizeof n, "blk.%" PRIu32 ".%s", l, s), n)
    if ((rc = get_vec(ld, NAME("attn_norm.weight"), hp->dim, false, &L->attn_norm, err)) ||
        (rc = get_vec(ld, NAME("post_attention_norm.weight"), hp->dim, false, &L->ffn_norm,
                      err)) ||
        (rc = get_mat(ld, NAME("ffn_gate.weight"), hp->dim, hp->n_ff, &L->gate, err)) ||
        (rc = get_mat(ld, NAME("ffn_up.weight"), hp->dim, hp->n_ff, &L->up, err)) ||
        (rc = get_mat(ld, NAME("ffn_down.weight"), hp->n_ff, hp->dim, &L->down, err)))
        return rc;
    if (L->rec &&
        ((rc = get_mat(ld, NAME("attn_qkv.weight"), hp->dim, 2 * kd + vd, &L->wqkv, err)) ||
         (rc = get_mat(ld, NAME("attn_gate.weight"), hp->dim, vd, &L->wz, err)) ||
         (rc = get_mat(ld, NAME("ssm_beta.weight"), hp->dim, nv, &L->wbeta, err)) ||
         (rc = get_mat(ld, NAME("ssm_alpha.weight"), hp->dim, nv, &L->walpha, err)) ||
         (rc = get_mat(ld, NAME("ssm_out.weight"), vd, hp->dim, &L->wout, err)) ||
         (rc = get_floats(ld, NAME("ssm_conv1d.weight"), hp->ssm_conv, 2 * kd + vd, false,
                          &L->conv, err)) ||
         (rc = get_vec(ld, NAME("ssm_dt.bias"), nv, false, &L->dt_bias, err)) ||
         (rc = get_vec(ld, NAME("ssm_a"), nv, false, &L->ssm_a, err)) ||
         (rc = get_vec(ld, NAME("ssm_norm.weight"), hp->ssm_head_dim, false, &L->ssm_norm,
                       err))))
        return rc;
    if (!L->rec &&
        ((rc = get_mat(ld, NAME("attn_q.weight"), hp->dim, 2 * qd, &L->wq, err)) ||
         (rc = get_mat(ld, NAME("attn_k.weight"), hp->dim, kvd, &L->wk, err)) ||
         (rc = get_mat(ld, NAME("attn_v.weight"), hp->dim, kvd, &L->wv, err)) ||
         (rc = get_mat(ld, NAME("attn_output.weight"), qd, hp->dim, &L->wo, err)) ||
         (rc = get_vec(ld, NAME("attn_q_norm.weight"), hp->head_dim, false, &L->q_norm, err)) ||
         (rc = get_vec(ld, NAME("attn_k_norm.weight"), hp->head_dim, false, &L->k_norm, err))))
        return rc;
    for (uint32_t i = 0; L->rec && i < nv; i++)
        if (!(L->ssm_a[i] < 0) || !isfinite(L->ssm_a[i]))
            return FAIL(SB_ERR_FORMAT, "%s: tensor '%s': element %" PRIu32 " is %g, not a "
                        "negative number (-exp(A_log))", m->path, NAME("ssm_a"), i,
                        (double)L->ssm_a[i]);
#undef NAME
    return SB_OK;
}

static int read_layer(loader *ld, uint32_t l, sb_rt_err *err)
{
    sb_rt_model *m = ld->m;
    const sb_rt_hparams *hp = &m->hp;
    uint32_t qd = hp->n_heads * hp->head_dim, kvd = hp->n_kv_heads * hp->head_dim;
    sb_rt_layer *L = &m->layers[l];
    char n[96];
    int rc;
    L->slot = l;
#define NAME(s) (snprintf(n, sizeof n, "blk.%" PRIu32 ".%s", l, s), n)
    if ((rc = get_vec(ld, NAME("attn_norm.weight"), hp->dim, false, &L->attn_norm, err)) ||
        (rc = get_vec(ld, NAME("ffn_norm.weight"), hp->dim, false, &L->ffn_norm, err)) ||
        (rc = get_mat(ld, NAME("attn_q.weight"), hp->dim, qd, &L->wq, err)) ||
        (rc = get_mat(ld, NAME("attn_k.weight"), hp->dim, kvd, &L->wk, err)) ||
        (rc = get_mat(ld, NAME("attn_v.weight"), hp->dim, kvd, &L->wv, err)) ||
        (rc = get_mat(ld, NAME("attn_output.weight"), qd, hp->dim, &L->wo, err)) ||
        (rc = get_mat(ld, NAME("ffn_gate.weight"), hp->dim, hp->n_ff, &L->gate, err)) ||
        (rc = get_mat(ld, NAME("ffn_up.weight"), hp->dim, hp->n_ff, &L->up, err)) ||
        (rc = get_mat(ld, NAME("ffn_down.weight"), hp->n_ff, hp->dim, &L->down, err)) ||
        (rc = get_vec(ld, NAME("attn_q.bias"), qd, true, &L->bq, err)) ||
        (rc = get_vec(ld, NAME("attn_k.bias"), kvd, true, &L->bk, err)) ||
        (rc = get_vec(ld, NAME("attn_v.bias"), kvd, true, &L->bv, err)))
        return rc;
    if (hp->qk_norm &&
        ((rc = get_vec(ld, NAME("attn_q_norm.weight"), hp->head_dim, false, &L->q_norm, err)) ||
         (rc = get_vec(ld, NAME("attn_k_norm.weight"), hp->head_dim, false, &L->k_norm, err))))
        return rc;
#undef NAME
    return SB_OK;
}

static int read_tensors(loader *ld, sb_rt_err *err)
{
    sb_rt_model *m = ld->m;
    const sb_rt_hparams *hp = &m->hp;
    /* The vocabulary size is token_embd's second dimension. */
    const sb_rt_gguf_tensor *te = sb_rt_gguf_find_tensor(m->gguf, "token_embd.weight");
    if (!te)
        return FAIL(SB_ERR_FORMAT, "%s: tensor 'token_embd.weight' is missing", m->path);
    if (te->n_dims != 2 || te->ne[1] < 1 || te->ne[1] > (1u << 24))
        return FAIL(SB_ERR_FORMAT, "%s: tensor 'token_embd.weight' must have shape (%" PRIu32
                    ", n_vocab), n_vocab in [1, 2^24]", m->path, hp->dim);
    m->hp.n_vocab = (uint32_t)te->ne[1];
    int rc = get_mat(ld, "token_embd.weight", hp->dim, hp->n_vocab, &m->embd, err);
    if (rc != SB_OK)
        return rc;
    if ((rc = get_vec(ld, "output_norm.weight", hp->dim, false, &m->out_norm, err)))
        return rc;
    if (sb_rt_gguf_find_tensor(m->gguf, "output.weight")) {
        rc = get_mat(ld, "output.weight", hp->dim, hp->n_vocab, &m->output, err);
    } else {
        m->hp.tied = true;
        m->output = m->embd;
    }
    if (rc != SB_OK)
        return rc;
    if (arch_of(hp->arch)->rope_freqs &&
        (rc = get_vec(ld, "rope_freqs.weight", hp->head_dim / 2, true, &m->rope_freqs, err)))
        return rc;
    for (uint32_t j = 0; m->rope_freqs && j < hp->head_dim / 2; j++)
        if (!(m->rope_freqs[j] > 0) || !isfinite(m->rope_freqs[j]))
            return FAIL(SB_ERR_FORMAT, "%s: tensor 'rope_freqs.weight': element %" PRIu32 " is "
                        "%g, not a positive number", m->path, j, (double)m->rope_freqs[j]);
    if (!m->layers) /* qwen35 allocated them with the metadata */
        m->layers = calloc(hp->n_layers, sizeof *m->layers);
    if (!m->layers)
        return FAIL(SB_ERR_NOMEM, "%s: out of memory", m->path);
    for (uint32_t l = 0; l < hp->n_layers; l++) {
        rc = hp->arch == SB_RT_ARCH_QWEN35 ? read_layer_qwen35(ld, l, err)
                                           : read_layer(ld, l, err);
        if (rc)
            return rc;
    }
    /* qwen35's multi-token-prediction blocks after the trunk are not run
     * (model.h): their tensors are left unread on purpose. */
    for (size_t i = 0; hp->arch == SB_RT_ARCH_QWEN35 && i < sb_rt_gguf_n_tensors(m->gguf); i++) {
        unsigned long b;
        int len = 0;
        if (sscanf(sb_rt_gguf_tensor_at(m->gguf, i)->name, "blk.%lu.%n", &b, &len) == 1 &&
            len > 0 && b >= hp->n_layers)
            ld->used[i] = 1;
    }
    for (size_t i = 0; i < sb_rt_gguf_n_tensors(m->gguf); i++)
        if (!ld->used[i])
            return FAIL(SB_ERR_UNSUPPORTED, "%s: tensor '%s' is not used by architecture '%s' "
                        "in this runtime (a model that needs it cannot run here)", m->path,
                        sb_rt_gguf_tensor_at(m->gguf, i)->name, sb_rt_arch_name(hp->arch));
    return SB_OK;
}

/* ---- RoPE table ----------------------------------------------------------------------- */

/* Whether pair j of qwen35's interleaved M-RoPE turns with the text
 * position (model.h): every pair without sections. */
static bool mrope_text_pair(const sb_rt_hparams *hp, uint32_t j)
{
    const uint32_t *sec = hp->rope_sections;
    uint32_t sum = sec[0] + sec[1] + sec[2] + sec[3];
    if (!sum)
        return true;
    uint32_t s = j % sum;
    return (s % 3 == 0 && s < 3 * sec[0]) || (s % 3 == 1 && s < 3 * sec[1]) ||
           (s % 3 == 2 && s < 3 * sec[2]);
}

/* theta_j and the magnitude scale, as model.h defines them. */
static int rope_table(sb_rt_model *m)
{
    const sb_rt_hparams *hp = &m->hp;
    uint32_t d = hp->n_rot, half = d / 2;
    m->rope = malloc(half * sizeof *m->rope);
    if (!m->rope)
        return SB_ERR_NOMEM;
    double base = hp->rope_base, s = hp->rope_scale, lo = 0, hi = 0;
    if (hp->rope_scaling == SB_RT_ROPE_YARN) {
        /* the pairs whose wavelength fits 32 times (lo) / once (hi) in the
         * original context: below lo extrapolate, above hi interpolate */
        double n_orig = hp->rope_ctx_orig, two_pi = 6.283185307179586;
        double c_fast = d * log(n_orig / (32 * two_pi)) / (2 * log(base));
        double c_slow = d * log(n_orig / (1 * two_pi)) / (2 * log(base));
        lo = fmax(0.0, floor(c_fast));
        hi = fmin((double)d - 1, ceil(c_slow));
    }
    for (uint32_t j = 0; j < half; j++) {
        double e = pow(base, -2.0 * j / d);
        if (m->rope_freqs)
            e /= m->rope_freqs[j];
        double t = e;
        if (hp->rope_scaling == SB_RT_ROPE_LINEAR) {
            t = e / s;
        } else if (hp->rope_scaling == SB_RT_ROPE_YARN) {
            double r = 1 - fmin(1.0, fmax(0.0, (j - lo) / fmax(0.001, hi - lo)));
            t = e / s * (1 - r) + e * r;
        }
        m->rope[j] = mrope_text_pair(hp, j) ? t : 0;
    }
    double ms = hp->rope_attn_factor;
    if (hp->rope_scaling == SB_RT_ROPE_YARN && s > 1)
        ms *= 1 + 0.1 * log(s);
    m->rope_mscale = (float)ms;
    return SB_OK;
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
                     hp->n_kv_heads, hp->head_dim, hp->n_ff, hp->n_ctx, hp->tied,
                     hp->rope_neox, hp->qk_norm };
    XXH3_128bits_update(s, u, sizeof u);
    float f[] = { hp->rope_base, hp->rms_eps, m->rope_mscale };
    XXH3_128bits_update(s, f, sizeof f);
    /* the angles themselves: every scaling setting that moves K */
    XXH3_128bits_update(s, m->rope, hp->n_rot / 2 * sizeof *m->rope);
    if (hp->arch == SB_RT_ARCH_QWEN35) { /* (the other identities stay as they were) */
        uint32_t h[] = { hp->n_rot, hp->attn_gate, hp->n_rec, hp->n_attn, hp->ssm_conv,
                         hp->ssm_k_heads, hp->ssm_v_heads, hp->ssm_head_dim, SB_RT_GDN_FORMAT,
                         SB_RT_BOUNDARY_VERSION };
        XXH3_128bits_update(s, h, sizeof h);
        for (uint32_t l = 0; l < hp->n_layers; l++)
            XXH3_128bits_update(s, &m->layers[l].rec, sizeof m->layers[l].rec);
    }
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
            free(L->q_norm);
            free(L->k_norm);
            free(L->conv);
            free(L->dt_bias);
            free(L->ssm_a);
            free(L->ssm_norm);
        }
    free(m->layers);
    free(m->out_norm);
    free(m->rope_freqs);
    free(m->rope);
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
    if (rc == SB_OK) {
        loader ld = { m, calloc(sb_rt_gguf_n_tensors(m->gguf) + 1, 1) };
        rc = ld.used ? read_tensors(&ld, err) : FAIL(SB_ERR_NOMEM, "%s: out of memory", path);
        free(ld.used);
    }
    if (rc == SB_OK && (rope_table(m) != SB_OK || identity(m) != SB_OK))
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

int sb_rt_model_load_vocab(const char *path, sb_rt_model **out, sb_rt_err *err)
{
    sb_rt_err_clear(err);
    if (!path || !out)
        return FAIL(SB_ERR_INVAL, "sb_rt_model_load_vocab: NULL argument");
    *out = NULL;
    sb_rt_model *m = calloc(1, sizeof *m);
    if (!m)
        return FAIL(SB_ERR_NOMEM, "%s: out of memory", path);
    snprintf(m->path, sizeof m->path, "%s", path);
    int rc = sb_rt_gguf_open(path, &m->gguf, err);
    const char *arch;
    size_t arch_len;
    if (rc == SB_OK && sb_rt_gguf_get_str(m->gguf, "general.architecture", &arch, &arch_len) != SB_OK)
        rc = FAIL(SB_ERR_FORMAT, "%s: metadata key 'general.architecture' is missing", path);
    if (rc == SB_OK) {
        char a[64];
        snprintf(a, sizeof a, "%.*s", (int)(arch_len < 63 ? arch_len : 63), arch);
        m->hp.n_ctx = 4096;
        rc = get_u32(m->gguf, path, a, "context_length", false, 4096, 1, 1u << 22, &m->hp.n_ctx,
                     err);
    }
    if (rc == SB_OK)
        rc = sb_rt_tok_from_gguf(m->gguf, path, &m->tok, err);
    if (rc != SB_OK) {
        m->tok = NULL;
        sb_rt_model_free(m);
        return rc;
    }
    m->hp.n_vocab = sb_rt_tok_n_vocab(m->tok);
    *out = m;
    return SB_OK;
}
