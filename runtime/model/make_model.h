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
 * The chat template (tokenizer.chat_template) is ChatML unless the options
 * name another (a vocabulary taken from a real model keeps its template).
 *
 * Thread safety: no shared state.
 */
#ifndef SB_RT_MAKE_MODEL_H
#define SB_RT_MAKE_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/rt.h"

typedef struct sb_rt_make_opts {
    char arch[16];             /* "llama" or "qwen2" */
    uint32_t dtype;            /* matrices and embeddings: 0 F32, 1 F16, 8 Q8_0 */
    uint32_t dim, n_layers, n_heads, n_kv_heads, n_ff, n_vocab, n_ctx;
    bool tied;                 /* no output.weight: the output shares token_embd */
    uint64_t seed;
    const char *chat_template; /* tokenizer.chat_template to write (borrowed); NULL: ChatML
                                  (sb_rt_chat_tmpl_chatml) */
} sb_rt_make_opts;

/* sb_rt_make_opts_preset -- "tiny" (dim 64, 2 layers, 4 heads, 2 KV heads,
 * ff 192, vocab 512, ctx 2048, F32) or "small" (dim 768, 12 layers, 12
 * heads, 4 KV heads, ff 2048, vocab 4096, ctx 8192, F16); llama, untied,
 * seed 1. An unknown name gives tiny. */
void sb_rt_make_opts_preset(sb_rt_make_opts *o, const char *preset);

/* sb_rt_make_opts_set -- set one option by name: "arch" (llama|qwen2),
 * "dtype" (f32|f16|q8_0), "dim", "layers", "heads", "kv-heads", "ff",
 * "vocab", "ctx", "seed", "tied" (0|1).
 * Returns: SB_OK; SB_ERR_INVAL (unknown name or bad value). */
int sb_rt_make_opts_set(sb_rt_make_opts *o, const char *name, const char *value);

/* sb_rt_make_model -- write the model o describes to path.
 * Returns: SB_OK; SB_ERR_INVAL (a shape that cannot be: dim not a multiple
 * of heads, odd head size, heads not a multiple of kv heads, Q8_0 with dim
 * or ff not multiples of 32, vocab under 300, a dimension 0 or too large);
 * SB_ERR_NOMEM; SB_ERR_IO (err names the path). */
int sb_rt_make_model(const sb_rt_make_opts *o, const char *path, sb_rt_err *err);

#endif /* SB_RT_MAKE_MODEL_H */
