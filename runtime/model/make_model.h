/* make_model.h -- writing a llama-family GGUF model with random weights
 * from a seed (no model can be downloaded on the machines this project
 * runs on): the test and benchmark models, and `snapbank make-model`.
 *
 * The file is ordinary GGUF v3 with llama.cpp's tensor names and metadata
 * keys (model.h lists the shapes). Weights: matrices normal with standard
 * deviation 1/sqrt(in) (so activations keep their scale layer to layer),
 * embeddings standard deviation 1, norm weights 1 + 0.1 N(0,1), qwen2 biases
 * 0.1 N(0,1). Normal draws come from splitmix64 through Box-Muller, in the
 * file's tensor order, so the same options give byte-identical files.
 *
 * The vocabulary is a SentencePiece (`llama`) one: ids 0 <unk>, 1 <s>,
 * 2 </s>, 3..258 the byte tokens <0x00>..<0xFF>, then every character of an
 * embedded English text (spaces as U+2581), then pieces merged from that
 * text by byte-pair counting (the most frequent adjacent pair within words
 * first; ties to the pair whose bytes compare lower), until the vocabulary
 * is full; if merges run out, <extra_N> pieces of type unused fill it.
 * Scores make SentencePiece's merge order the learned order: the k-th
 * merged piece scores -k, single characters -1e6 - rank.
 *
 * Weight types (--dtype): f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0,
 * q4_k, q5_k, q6_k put every matrix (token_embd and output included) in
 * that type; norms and biases stay F32. The quantizer is quant.h's
 * sb_rt_quant_row (round to nearest per block). q4_k_m and q5_k_m are
 * llama.cpp's Q4_K_M / Q5_K_M mixes (its llama_tensor_get_type, for a
 * dense model that is not Falcon and not 70B), as this rule:
 *   - output (and token_embd when tied): Q6_K;
 *   - attn_v and ffn_down of layer l: Q6_K when l < n/8, or l >= 7n/8, or
 *     (l - n/8) % 3 == 2 (n layers: llama.cpp's use_more_bits), else the
 *     base type;
 *   - every other matrix (token_embd untied, attn_q, attn_k, attn_output,
 *     ffn_gate, ffn_up): the base type, Q4_K or Q5_K.
 * Then, as llama.cpp does, a matrix whose rows are not a multiple of its
 * type's block falls back: Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0 (the
 * output straight to Q8_0), and a row that is not a multiple of 32 either
 * to F16. general.file_type is llama.cpp's llama_ftype for the dtype.
 *
 * Thread safety: no shared state.
 */
#ifndef SB_RT_MAKE_MODEL_H
#define SB_RT_MAKE_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/rt.h"

/* dtype values beyond GGML's type ids: llama.cpp's per-tensor mixes. */
#define SB_RT_MAKE_Q4_K_M 0x10fu
#define SB_RT_MAKE_Q5_K_M 0x111u

typedef struct sb_rt_make_opts {
    char arch[16];             /* "llama" or "qwen2" */
    uint32_t dtype;            /* matrices and embeddings: a GGML type id
                                * (quant.h) or SB_RT_MAKE_Q4_K_M / _Q5_K_M */
    uint32_t dim, n_layers, n_heads, n_kv_heads, n_ff, n_vocab, n_ctx;
    bool tied;                 /* no output.weight: the output shares token_embd */
    uint64_t seed;
} sb_rt_make_opts;

/* sb_rt_make_opts_preset -- "tiny" (dim 64, 2 layers, 4 heads, 2 KV heads,
 * ff 192, vocab 512, ctx 2048, F32) or "small" (dim 768, 12 layers, 12
 * heads, 4 KV heads, ff 2048, vocab 4096, ctx 8192, F16); llama, untied,
 * seed 1. An unknown name gives tiny. */
void sb_rt_make_opts_preset(sb_rt_make_opts *o, const char *preset);

/* sb_rt_make_dtype_name -- the --dtype name of a dtype value ("q4_k_m");
 * NULL for a value make-model does not write. */
const char *sb_rt_make_dtype_name(uint32_t dtype);

/* sb_rt_make_opts_set -- set one option by name: "arch" (llama|qwen2),
 * "dtype" (f32|f16|bf16|q4_0|q4_1|q5_0|q5_1|q8_0|q4_k|q5_k|q6_k|q4_k_m|
 * q5_k_m), "dim", "layers", "heads", "kv-heads", "ff",
 * "vocab", "ctx", "seed", "tied" (0|1).
 * Returns: SB_OK; SB_ERR_INVAL (unknown name or bad value). */
int sb_rt_make_opts_set(sb_rt_make_opts *o, const char *name, const char *value);

/* sb_rt_make_model -- write the model o describes to path.
 * Returns: SB_OK; SB_ERR_INVAL (an unknown dtype, or a shape that cannot
 * be: dim not a multiple of heads, odd head size, heads not a multiple of
 * kv heads, vocab under 300, a dimension 0 or too large);
 * SB_ERR_NOMEM; SB_ERR_IO (err names the path). */
int sb_rt_make_model(const sb_rt_make_opts *o, const char *path, sb_rt_err *err);

#endif /* SB_RT_MAKE_MODEL_H */
