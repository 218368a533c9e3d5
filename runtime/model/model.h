/* model.h -- a llama-family model: hyperparameters, weights borrowed from
 * the mapped GGUF file, and the identity the bank keys its state under.
 *
 * Architectures (general.architecture), each a pre-norm decoder with GQA,
 * RMSNorm, SwiGLU and RoPE, tied (no output.weight) or separate output:
 *
 *   llama  Llama 1-3.x, TinyLlama, SmolLM, Mistral shapes. RoPE on adjacent
 *          pairs (2j, 2j + 1). Llama 3.1/3.2 files carry rope_freqs.weight:
 *          per-pair divisors of the frequencies (below).
 *   qwen2  Qwen2 / Qwen2.5: Q/K/V biases, RoPE on halves (NEOX: pairs j and
 *          j + head_dim / 2).
 *   qwen3  Qwen3 dense: no biases, an RMSNorm of each head of q and of k
 *          (attn_q_norm, attn_k_norm: head_dim weights) before RoPE, NEOX.
 *   qwen35 Qwen3.5 dense (hybrid): most layers are Gated DeltaNet layers
 *          (deltanet.h says what they compute), the rest gated
 *          full-attention layers: qwen3's attention with a per-head output
 *          gate and RoPE on the first n_rot dimensions of each head only;
 *          the FFN's norm is post_attention_norm. Listed below.
 *
 * Any other architecture is refused, named (SB_ERR_UNSUPPORTED). Q/K/V
 * biases are optional in every architecture (qwen2 files have them), as in
 * llama.cpp. A tensor the architecture does not use is refused, named, so
 * that a file needing more than this runtime computes never runs silently
 * wrong (fused attn_qkv, output or FFN biases, MoE experts).
 *
 * Metadata read ({arch} is the architecture's name):
 *   {arch}.embedding_length, block_count, feed_forward_length,
 *   attention.head_count, context_length                     required
 *   attention.head_count_kv                                  default head_count
 *   attention.key_length = attention.value_length            head_dim; each
 *       defaults to embedding_length / head_count (as in llama.cpp); K and
 *       V heads must have the same size
 *   rope.dimension_count                                     must be head_dim
 *       (partial RoPE is refused)
 *   rope.freq_base (10000), attention.layer_norm_rms_epsilon (1e-5)
 *   rope.scaling.type: "none", "linear" (the default, as in llama.cpp) or
 *       "yarn"; any other ("longrope", ...) is refused, named
 *   rope.scaling.factor (or the older rope.scale_linear): s > 0 (1)
 *   rope.scaling.original_context_length (yarn; default context_length)
 *   rope.scaling.attn_factor (1): multiplies cos and sin
 *   rope.scaling.yarn_ext_factor / yarn_beta_fast / yarn_beta_slow /
 *       yarn_attn_factor / yarn_log_multiplier: llama.cpp does not read them
 *       for these architectures and uses 1 / 32 / 1 / 1 + 0.1 ln s / 0; a
 *       file giving other values is refused rather than run differently.
 *
 * RoPE angles: position p rotates pair j (j < head_dim / 2) of each head by
 * p * theta_j, where, with d = head_dim, b = freq_base, f_j = rope_freqs[j]
 * (1 without the tensor) and s the scaling factor,
 *   e_j     = b^(-2j/d) / f_j                    (extrapolated frequency)
 *   none:   theta_j = e_j
 *   linear: theta_j = e_j / s
 *   yarn:   theta_j = e_j / s * (1 - r_j) + e_j * r_j, with r_j the YaRN
 *           ramp: 1 for j <= lo, 0 for j >= hi, linear between, where
 *           lo = floor(c(32)), hi = ceil(c(1)) clamped to [0, d - 1] and
 *           c(beta) = d ln(n_orig / (2 pi beta)) / (2 ln b);
 *           cos and sin are also multiplied by 1 + 0.1 ln s when s > 1.
 * (Peng et al., "YaRN", 2023; llama.cpp's ggml_rope_yarn_corr_dims.) The
 * table theta_j is computed once, in double, at load (sb_rt_model.rope).
 *
 * qwen35 (llama.cpp's converter, convert_hf_to_gguf.py, writes these):
 *   block_count counts the trunk and nextn_predict_layers (default 0)
 *       multi-token-prediction blocks after it; the MTP blocks (tensors
 *       blk.N.* for N >= block_count - nextn_predict_layers) only draft
 *       tokens for speculative decoding and are not run here
 *   attention.recurrent_layers (bool or integer array, one per block):
 *       which layers are Gated DeltaNet; without it full_attention_interval
 *       (default 4): layer i is recurrent unless (i + 1) % interval == 0
 *   ssm.conv_kernel (d_conv), ssm.state_size (d_k: the key head size),
 *   ssm.group_count (n_k: key heads), ssm.time_step_rank (n_v: value
 *       heads, a multiple of n_k), ssm.inner_size (n_v * d_v), all required;
 *       d_v must equal d_k (as llama.cpp requires)
 *   rope.dimension_count (n_rot, even, <= head_dim; default head_dim):
 *       the rotated dimensions of each head, pairs (j, j + n_rot / 2)
 *   rope.dimension_sections (4 integers; optional): interleaved M-RoPE's
 *       sections. For text every section's position is the token's, except
 *       the fourth, which llama.cpp sets to 0: pair j (j < n_rot / 2) has
 *       sector s = j mod (sum of sections) and rotates by the position when
 *       s mod 3 == 0 and s < 3 sec0, s mod 3 == 1 and s < 3 sec1, or
 *       s mod 3 == 2 and s < 3 sec2, and by 0 (not at all) otherwise: its
 *       theta_j is 0. (Qwen3.5's [11, 11, 10, 0] rotates every pair.)
 *
 *
 * Weight matrices are of any type the kernels run (quant.h: F32, F16,
 * BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K), each tensor its
 * own (Q4_K_M files mix them); norm weights, biases and rope_freqs are
 * read into owned float arrays whatever their stored type. Any other type
 * is refused (SB_ERR_UNSUPPORTED) with the tensor's name and the type's.
 *
 * Shapes (GGUF order: ne0 is the contiguous, input dimension; a matrix
 * (in, out) is `out` rows of `in` elements; q_dim = n_heads * head_dim,
 * kv_dim = n_kv_heads * head_dim; q_dim need not equal dim):
 *
 *   token_embd          (dim, n_vocab)       a row per token
 *   rope_freqs          (head_dim / 2)       optional (llama)
 *   attn_norm, ffn_norm (dim)
 *   attn_q              (dim, q_dim)         attn_q.bias (q_dim), optional
 *   attn_k, attn_v      (dim, kv_dim)        biases (kv_dim), optional
 *   attn_q_norm         (head_dim)           qwen3 only, required there
 *   attn_k_norm         (head_dim)           qwen3 only, required there
 *   attn_output         (q_dim, dim)
 *   ffn_gate, ffn_up    (dim, n_ff)
 *   ffn_down            (n_ff, dim)
 *   output_norm         (dim)
 *   output              (dim, n_vocab), or token_embd when absent (tied)
 *
 * qwen35, every layer: attn_norm and post_attention_norm (dim; the latter
 * is the FFN's norm, ffn_norm above), ffn_gate / ffn_up / ffn_down as
 * above. Full-attention layers:
 *   attn_q              (dim, 2 * q_dim)     per head, head_dim query values
 *                                            then head_dim gate values
 *   attn_k, attn_v      (dim, kv_dim)
 *   attn_q_norm, attn_k_norm (head_dim), attn_output (q_dim, dim)
 * Gated DeltaNet layers (key_dim = n_k * d_k, value_dim = n_v * d_v,
 * conv_dim = 2 * key_dim + value_dim):
 *   attn_qkv            (dim, conv_dim)      q | k | v, before the conv
 *   attn_gate           (dim, value_dim)     the output gate z
 *   ssm_conv1d          (d_conv, conv_dim)   a causal filter per channel
 *   ssm_dt.bias         (n_v)
 *   ssm_a               (n_v)                -exp(A_log) of the HF weights
 *   ssm_beta, ssm_alpha (dim, n_v)
 *   ssm_norm            (d_v)
 *   ssm_out             (value_dim, dim)
 *
 * Thread safety: a loaded model is immutable; any number of contexts on any
 * threads may use it at once.
 */
#ifndef SB_RT_MODEL_H
#define SB_RT_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/rt.h"
#include "kernels/kernels.h"

#define SB_RT_MAX_LAYERS 512u
#define SB_RT_ID_BYTES 16u     /* model identity: an XXH3-128 digest */

typedef enum sb_rt_arch {
    SB_RT_ARCH_LLAMA = 0,
    SB_RT_ARCH_QWEN2 = 1,
    SB_RT_ARCH_QWEN3 = 2,
    SB_RT_ARCH_QWEN35 = 3,
} sb_rt_arch;

/* RoPE frequency scaling ({arch}.rope.scaling.type; see above). */
typedef enum sb_rt_rope_scaling {
    SB_RT_ROPE_NONE = 0,
    SB_RT_ROPE_LINEAR = 1,
    SB_RT_ROPE_YARN = 2,
} sb_rt_rope_scaling;

/* What the forward pass needs to know, from the GGUF metadata. */
typedef struct sb_rt_hparams {
    sb_rt_arch arch;
    uint32_t n_vocab;
    uint32_t dim;              /* embedding width */
    uint32_t n_layers;
    uint32_t n_heads;
    uint32_t n_kv_heads;       /* divides n_heads */
    uint32_t head_dim;         /* of q, k and v heads; even; n_heads * head_dim
                                * need not be dim */
    uint32_t n_ff;             /* feed-forward width */
    uint32_t n_ctx;            /* trained context length: the longest sequence */
    float rope_base;           /* RoPE frequency base */
    float rms_eps;             /* RMSNorm epsilon (also of the q/k norms) */
    bool tied;                 /* output shares token_embd */
    bool rope_neox;            /* RoPE pairs (j, j + head_dim/2), not (2j, 2j+1) */
    bool qk_norm;              /* per-head RMSNorm of q and k before RoPE */
    sb_rt_rope_scaling rope_scaling;
    float rope_scale;          /* scaling factor s (1 with SB_RT_ROPE_NONE) */
    uint32_t rope_ctx_orig;    /* YaRN's original context length */
    float rope_attn_factor;    /* rope.scaling.attn_factor */
    uint32_t n_rot;            /* RoPE's rotated dimensions per head (even,
                                * <= head_dim; head_dim but for qwen35) */
    uint32_t rope_sections[4]; /* qwen35's M-RoPE sections (all 0: none) */
    bool attn_gate;            /* attn_q also gives a sigmoid output gate
                                * per head (qwen35) */
    /* Hybrid models (qwen35); all 0 for the others. */
    uint32_t n_rec;            /* Gated DeltaNet layers */
    uint32_t n_attn;           /* full-attention layers: n_layers - n_rec
                                * (the layers with K/V pages) */
    uint32_t ssm_conv;         /* d_conv: the causal conv's width, >= 2 */
    uint32_t ssm_k_heads;      /* n_k: query and key heads */
    uint32_t ssm_v_heads;      /* n_v: value heads, a multiple of n_k */
    uint32_t ssm_head_dim;     /* d_k = d_v: key and value head size */
} sb_rt_hparams;

/* A weight matrix: `out` rows of `in` elements of type `type`, borrowed from
 * the mapping (row r at data + r * sb_rt_dtype_row_bytes(type, in)). */
typedef struct sb_rt_mat {
    const void *data;
    sb_rt_dtype type;
    uint32_t in, out;
} sb_rt_mat;

typedef struct sb_rt_layer {
    bool rec;                  /* a Gated DeltaNet layer (qwen35): the attention
                                * members below are unset, the ssm ones set */
    uint32_t slot;             /* index among the layers of its kind: the KV
                                * tensors of a full-attention layer in the
                                * bank's pages (kv.h), a recurrent layer's
                                * state (deltanet.h) */
    float *attn_norm;          /* (dim), owned */
    sb_rt_mat wq, wk, wv, wo;
    float *bq, *bk, *bv;       /* biases (q_dim, kv_dim, kv_dim), owned; each
                                * NULL when the file has none (qwen2 has them) */
    float *q_norm, *k_norm;    /* (head_dim) per-head RMSNorm weights of q and k,
                                * owned; NULL unless qwen3 */
    float *ffn_norm;           /* (dim), owned (qwen35: post_attention_norm) */
    sb_rt_mat gate, up, down;
    /* Gated DeltaNet (deltanet.h); conv_dim = 2 * n_k * d_k + n_v * d_v */
    sb_rt_mat wqkv;            /* (dim, conv_dim) attn_qkv */
    sb_rt_mat wz;              /* (dim, n_v * d_v) attn_gate */
    sb_rt_mat wbeta, walpha;   /* (dim, n_v) ssm_beta, ssm_alpha */
    sb_rt_mat wout;            /* (n_v * d_v, dim) ssm_out */
    float *conv;               /* (conv_dim, d_conv) ssm_conv1d: channel c's
                                * taps at conv + c * d_conv, oldest first; owned */
    float *dt_bias;            /* (n_v) ssm_dt.bias, owned */
    float *ssm_a;              /* (n_v) ssm_a (negative), owned */
    float *ssm_norm;           /* (d_v) ssm_norm, owned */
} sb_rt_layer;

typedef struct sb_rt_gguf sb_rt_gguf;
typedef struct sb_rt_tok sb_rt_tok;

typedef struct sb_rt_model {
    sb_rt_hparams hp;
    sb_rt_mat embd;            /* token_embd (dim, n_vocab) */
    sb_rt_layer *layers;       /* (n_layers), owned */
    float *out_norm;           /* (dim), owned */
    sb_rt_mat output;          /* (dim, n_vocab); token_embd when tied */
    float *rope_freqs;         /* (head_dim / 2) rope_freqs.weight, owned; NULL
                                * when absent (then every f_j is 1) */
    double *rope;              /* (n_rot / 2) theta_j: the angle per position
                                * of pair j, every scaling applied, owned */
    float rope_mscale;         /* cos and sin are multiplied by this: 1, or
                                * attn_factor (* (1 + 0.1 ln s) with yarn) */
    uint8_t id[SB_RT_ID_BYTES];/* identity: weights and every setting that
                                * changes the KV bytes (see model.c) */
    sb_rt_gguf *gguf;          /* the mapping the weights borrow from, owned */
    sb_rt_tok *tok;            /* tokenizer; NULL when the vocabulary type is
                                * not supported (token IDs still work) */
    char tok_error[SB_RT_ERR_MSG]; /* why tok is NULL */
    char path[512];            /* the file, for messages */
} sb_rt_model;

/* sb_rt_model_load -- map the GGUF file at path and check it is a model this
 * runtime runs: architecture, hyperparameters, every tensor present with its
 * shape and a supported type. The tokenizer is loaded when the vocabulary
 * is one vocab.h reads (`llama` SentencePiece, `gpt2` byte-level BPE with a
 * known pre-tokenizer) and has no more tokens than token_embd has rows;
 * otherwise m->tok is NULL with the reason in m->tok_error. The
 * architectures, keys and tensors are those listed at the top of this file.
 *
 * On success *out is owned by the caller: free with sb_rt_model_free().
 * Returns: SB_OK; SB_ERR_INVAL (NULL argument); SB_ERR_IO (cannot read the
 * file); SB_ERR_FORMAT (not GGUF, damaged, or a missing or misshapen
 * tensor or key); SB_ERR_VERSION (GGUF version); SB_ERR_UNSUPPORTED (an
 * architecture, RoPE scaling type or parameter, partial RoPE, K and V
 * heads of different sizes, a tensor type, or a tensor the architecture
 * does not use: something this runtime does not compute); SB_ERR_NOMEM.
 * err names the file and the fault (the architecture, key or tensor).
 * Nothing is left allocated on failure. */
int sb_rt_model_load(const char *path, sb_rt_model **out, sb_rt_err *err);

/* sb_rt_model_load_vocab -- the GGUF file's vocabulary and metadata only,
 * for an engine that computes elsewhere (llama.cpp: snapbank serve
 * --engine llama.cpp renders and tokenizes with it): the tokenizer
 * (required, as sb_rt_model_load reads it), hp.n_vocab its size, hp.n_ctx
 * the architecture's context_length (4096 when absent), the metadata for
 * the chat template; any architecture, no tensors read (layers NULL,
 * hp.n_layers 0, id zero). Free with sb_rt_model_free(). Returns: SB_OK;
 * the codes of sb_rt_model_load, and SB_ERR_UNSUPPORTED for a vocabulary
 * the tokenizer does not read (err names the file and the fault). */
int sb_rt_model_load_vocab(const char *path, sb_rt_model **out, sb_rt_err *err);

/* sb_rt_model_free -- unmap and free. NULL is a no-op. */
void sb_rt_model_free(sb_rt_model *m);

/* sb_rt_arch_name -- "llama", "qwen2", "qwen3", "qwen35" (a static
 * string; "?" for a value outside the enum). */
const char *sb_rt_arch_name(sb_rt_arch arch);

/* sb_rt_model_kv_dim -- n_kv_heads * head_dim: the K (or V) floats a token
 * keeps per layer. */
static inline uint32_t sb_rt_model_kv_dim(const sb_rt_model *m)
{
    return m->hp.n_kv_heads * m->hp.head_dim;
}

/* sb_rt_model_kv_layers -- the layers with K/V rows in the bank's pages:
 * every layer, or a hybrid model's full-attention layers. */
static inline uint32_t sb_rt_model_kv_layers(const sb_rt_model *m)
{
    return m->hp.n_rec ? m->hp.n_attn : m->hp.n_layers;
}

#endif /* SB_RT_MODEL_H */
