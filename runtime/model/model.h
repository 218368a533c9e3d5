/* model.h -- a llama-family model: hyperparameters, weights borrowed from
 * the mapped GGUF file, and the identity the bank keys its state under.
 *
 * Architectures: `llama` (Llama, TinyLlama, SmolLM, Mistral shapes: GQA,
 * RoPE on adjacent pairs, RMSNorm, SwiGLU, tied or separate output) and
 * `qwen2` (the same with Q/K/V biases and RoPE on halves, NEOX style).
 * Weight matrices are F32, F16 or Q8_0; norm weights and biases are read
 * into owned float arrays whatever their stored type (F32 or F16).
 *
 * Shapes (GGUF order: ne0 is the contiguous, input dimension; a matrix
 * (in, out) is `out` rows of `in` elements):
 *
 *   token_embd          (dim, n_vocab)       a row per token
 *   attn_norm, ffn_norm (dim)
 *   attn_q              (dim, n_heads * head_dim)
 *   attn_k, attn_v      (dim, n_kv_heads * head_dim)
 *   attn_output         (n_heads * head_dim, dim)
 *   ffn_gate, ffn_up    (dim, n_ff)
 *   ffn_down            (n_ff, dim)
 *   output_norm         (dim)
 *   output              (dim, n_vocab), or token_embd when tied
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

typedef enum sb_rt_arch { SB_RT_ARCH_LLAMA = 0, SB_RT_ARCH_QWEN2 = 1 } sb_rt_arch;

/* What the forward pass needs to know, from the GGUF metadata. */
typedef struct sb_rt_hparams {
    sb_rt_arch arch;
    uint32_t n_vocab;
    uint32_t dim;              /* embedding width */
    uint32_t n_layers;
    uint32_t n_heads;
    uint32_t n_kv_heads;       /* divides n_heads */
    uint32_t head_dim;         /* dim / n_heads; even */
    uint32_t n_ff;             /* feed-forward width */
    uint32_t n_ctx;            /* trained context length: the longest sequence */
    float rope_base;           /* RoPE frequency base */
    float rms_eps;             /* RMSNorm epsilon */
    bool tied;                 /* output shares token_embd */
} sb_rt_hparams;

/* A weight matrix: `out` rows of `in` elements of type `type`, borrowed from
 * the mapping (row r at data + r * sb_rt_dtype_row_bytes(type, in)). */
typedef struct sb_rt_mat {
    const void *data;
    sb_rt_dtype type;
    uint32_t in, out;
} sb_rt_mat;

typedef struct sb_rt_layer {
    float *attn_norm;          /* (dim), owned */
    sb_rt_mat wq, wk, wv, wo;
    float *bq, *bk, *bv;       /* qwen2 biases (q_dim / kv_dim), owned; NULL for llama */
    float *ffn_norm;           /* (dim), owned */
    sb_rt_mat gate, up, down;
} sb_rt_layer;

typedef struct sb_rt_gguf sb_rt_gguf;
typedef struct sb_rt_tok sb_rt_tok;

typedef struct sb_rt_model {
    sb_rt_hparams hp;
    sb_rt_mat embd;            /* token_embd (dim, n_vocab) */
    sb_rt_layer *layers;       /* (n_layers), owned */
    float *out_norm;           /* (dim), owned */
    sb_rt_mat output;          /* (dim, n_vocab); token_embd when tied */
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
 * otherwise m->tok is NULL with the reason in m->tok_error.
 *
 * On success *out is owned by the caller: free with sb_rt_model_free().
 * Returns: SB_OK; SB_ERR_INVAL (NULL argument); SB_ERR_IO (cannot read the
 * file); SB_ERR_FORMAT (not GGUF, damaged, or a missing or misshapen
 * tensor or key); SB_ERR_VERSION (GGUF version); SB_ERR_UNSUPPORTED (an
 * architecture or tensor type this runtime does not run); SB_ERR_NOMEM.
 * err names the file and the fault. */
int sb_rt_model_load(const char *path, sb_rt_model **out, sb_rt_err *err);

/* sb_rt_model_free -- unmap and free. NULL is a no-op. */
void sb_rt_model_free(sb_rt_model *m);

/* sb_rt_model_kv_dim -- n_kv_heads * head_dim: the K (or V) floats a token
 * keeps per layer. */
static inline uint32_t sb_rt_model_kv_dim(const sb_rt_model *m)
{
    return m->hp.n_kv_heads * m->hp.head_dim;
}

#endif /* SB_RT_MODEL_H */
