/* make_model.h -- writing a llama-family GGUF model with random weights
 * from a seed (no model can be downloaded on the machines this project
 * runs on): the test and benchmark models, and `snapbank make-model`.
 *
 * The file is ordinary GGUF v3 with llama.cpp's tensor names and metadata
 * keys (model.h lists the shapes and keys) for the architectures llama,
 * qwen2 (Q/K/V biases), qwen3 (per-head q/k norms) and qwen35 (hybrid:
 * Gated DeltaNet and gated attention layers, partial RoPE, M-RoPE
 * sections, optionally an MTP block), optionally with a
 * Llama 3 rope_freqs.weight and rope.scaling.* keys; and olmo2 (below),
 * which only llama.cpp runs: snapbank's runtime refuses it by name.
 *
 * olmo2 (OLMo 2, and with a window the sliding-window attention of
 * OLMo 3): no norm before attention or FFN; RMS norms over the whole Q
 * (dim) and the whole K (kv heads * head size) before RoPE, and after the
 * attention output (post_attention_norm) and the FFN output
 * (post_ffw_norm), each added to the residual. Per layer, in file order:
 *   attn_q (dim, dim), attn_k (dim, kv_dim), attn_v (dim, kv_dim),
 *   attn_output (dim, dim), attn_q_norm (dim), attn_k_norm (kv_dim),
 *   post_attention_norm (dim), ffn_gate (dim, ff), ffn_up (dim, ff),
 *   ffn_down (ff, dim), post_ffw_norm (dim);
 * then output_norm and output (untied: llama.cpp requires output.weight).
 * The head size is dim / heads (llama.cpp's olmo2 reads no other).
 * --swa N (n_swa below) writes olmo2.attention.sliding_window = N: a
 * layer attends to its last N positions; which layers is llama.cpp's
 * default pattern 4 (no sliding_window_pattern key is written): layers
 * 0, 1, 2 of every 4 slide, 3, 7, ... attend to everything. --swa 0
 * writes no window (plain OLMo 2, every layer full). Only olmo2 takes a
 * window; a window on another architecture is refused. Weights: matrices
 * normal with standard deviation 1/sqrt(in) (so activations keep their
 * scale layer to layer), embeddings standard deviation 1 (1/sqrt(dim) when
 * tied, as the output matrix's: logits near 1, as in a trained model), norm
 * weights (the q/k norms too) 1 + 0.1 N(0,1), qwen2 biases 0.1 N(0,1);
 * qwen35's conv taps N(0, 1/4), ssm_dt.bias N(0, 1) and ssm_a =
 * -exp(N(-1.5, 1)), so that the decay alpha of a step spreads over (0, 1)
 * with much of it near 1 (a state that remembers far back).
 * Normal draws come from splitmix64 through Box-Muller, in the file's
 * tensor order, so the same options give byte-identical files.
 *
 * rope_freqs.weight holds Llama 3.1's frequency divisors (Meta's
 * `apply_scaling`, the `llama3` rope_type of transformers): with the
 * original context L, factor F, low 1 and high 4, for pair j of frequency
 * w_j = base^(-2j/d) and wavelength lambda_j = 2 pi / w_j,
 *   lambda_j < L / 4  ->  1        (high frequencies kept)
 *   lambda_j > L      ->  F        (low frequencies interpolated)
 *   otherwise         ->  1 / ((1 - k) / F + k),  k = (L / lambda_j - 1) / 3.
 *
 * The vocabulary is a real one copied from a GGUF file (vocab, below), or
 * a generated SentencePiece (`llama`) one: ids 0 <unk>, 1 <s>,
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
 * The chat template (tokenizer.chat_template) is ChatML unless the options
 * name another (a vocabulary file
 * that carries a template, --vocab, keeps it; naming another then is refused).
 *
 * An answer fixture (--answer TEXT, o->answer): a model whose greedy
 * continuation of any ChatML prompt is TEXT, then <|im_end|>, then </s>,
 * on snapbank's runtime and on llama.cpp alike (a test of what a server
 * makes of a known answer, a tool call say). Only llama, f32 or f16,
 * untied, with the generated vocabulary. How:
 *   1. The vocabulary's last three ids are <|im_start|> and <|im_end|>
 *      (control; <|im_end|> is also tokenizer.ggml.eot_token_id, and an
 *      end of generation by its text for both engines) and TEXT as ONE
 *      token of type user-defined (4), which both detokenizers print as
 *      its text, special tokens shown or not; the learned pieces stop
 *      three short of the size.
 *   2. Every attn_output and ffn_down is zero (drawn, then zeroed: the
 *      other tensors keep their values), so each block adds nothing and
 *      the last position's residual is its token's embedding: the logits
 *      depend on the current token alone, h = rmsnorm(embedding) * the
 *      output norm.
 *   3. The prompt's last token is the byte token <0x0A> (the "\n" closing
 *      "<|im_start|>assistant\n": the text has no newline, so no piece
 *      holds one). The chain <0x0A> -> TEXT -> <|im_end|> -> </s> is
 *      written into output.weight: with A the three inputs' h (rows) and
 *      D = (A A^T)^-1 A their dual basis (d_k . a_i = [k == i]), every
 *      other row has its part in A's span removed (its logit there is 0)
 *      and the row of the k-th successor is 20 d_k (its logit at a_k is
 *      20, at the other two 0).
 *   4. The written (rounded) weights are checked: at each link the chosen
 *      token's logit leads every other by at least 10, far above what f16
 *      rounding or llama.cpp's kernels move a logit.
 * TEXT is 1 to 255 bytes (the CLI prints a token's piece through a buffer
 * of 256), none of the vocabulary's special texts, and not a suffix of
 * "<|im_start|>assistant\n" (it would swallow the prompt's last "\n"). A
 * TEXT that is an end-of-generation text (<|endoftext|>, ...) ends the
 * answer at once: do not ask for one. The builtin engine's `chat` prompts
 * in its plain format ("User: ...\nAssistant:"), not the template: feed
 * it `run --prompt` with a ChatML text, or `serve`.
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
    char arch[16];             /* "llama", "qwen2", "qwen3", "qwen35" or "olmo2" */
    uint32_t dtype;            /* matrices and embeddings: a GGML type id
                                * (quant.h) or SB_RT_MAKE_Q4_K_M / _Q5_K_M */
    uint32_t dim, n_layers, n_heads, n_kv_heads, n_ff, n_vocab, n_ctx;
    uint32_t head_dim;         /* 0: dim / n_heads */
    bool tied;                 /* no output.weight: the output shares token_embd */
    float rope_base;           /* rope.freq_base */
    float rms_eps;             /* attention.layer_norm_rms_epsilon */
    float rope_freqs;          /* > 0: write rope_freqs.weight, Llama 3 divisors
                                * with this factor F (above); 0: none */
    uint32_t rope_orig_ctx;    /* L of rope_freqs, and YaRN's
                                * rope.scaling.original_context_length */
    char rope_scaling[8];      /* rope.scaling.type: "" (not written), "none",
                                * "linear" or "yarn" */
    float rope_scale;          /* rope.scaling.factor (written with a type) */
    uint64_t seed;
    /* qwen35 */
    uint32_t n_rot;            /* rope.dimension_count (0: head_dim) */
    uint32_t attn_interval;    /* full_attention_interval: layer i is full
                                * attention when (i + 1) % interval == 0 */
    uint32_t ssm_conv;         /* ssm.conv_kernel */
    uint32_t ssm_k_heads, ssm_v_heads, ssm_head_dim; /* Gated DeltaNet heads */
    uint32_t mtp;              /* MTP blocks written after the trunk (0 or 1):
                                * nextn_predict_layers, tensors not run */
    /* olmo2 */
    uint32_t n_swa;            /* attention.sliding_window in positions;
                                * 0: none (no key written) */
    char vocab[512];           /* "" to generate the vocabulary; else a GGUF file whose
                                * tokenizer.* keys are copied (n_vocab is then its
                                * token count, whatever n_vocab says) */
    const char *chat_template; /* tokenizer.chat_template to write (borrowed); NULL: ChatML
                                  (sb_rt_chat_tmpl_chatml) */
    const char *answer;        /* an answer fixture's TEXT (above; borrowed until
                                * sb_rt_make_model returns); NULL: none */
} sb_rt_make_opts;

/* The preset names, for usage messages. */
#define SB_RT_MAKE_PRESETS "tiny, small, tiny-llama3, tiny-qwen2, tiny-qwen3, tiny-hybrid, " \
                           "small-hybrid, llama3-1b, qwen2.5-0.5b, qwen3-0.6b, " \
                           "smollm2-360m, qwen3.5-0.8b, tiny-swa"

/* sb_rt_make_opts_preset -- fill o with a preset (seed 1; rope base 10000,
 * epsilon 1e-5 unless listed):
 *   tiny          llama, dim 64, 2 layers, 4/2 heads, ff 192, vocab 512,
 *                 ctx 2048, F32, untied
 *   small         llama, dim 768, 12 layers, 12/4 heads, ff 2048, vocab
 *                 4096, ctx 8192, F16, untied
 * test miniatures of the real models below (tiny's shape, F32, tied; each
 * runs in milliseconds):
 *   tiny-llama3   llama, rope base 500000, rope_freqs (F 32, L 8192)
 *   tiny-qwen2    qwen2 (biases), rope base 1e6, epsilon 1e-6
 *   tiny-qwen3    qwen3 (q/k norms), head_dim 32 (q_dim 128 != dim 64),
 *                 rope base 1e6, epsilon 1e-6
 *   tiny-hybrid   qwen35, 4 layers alternating Gated DeltaNet and gated
 *                 attention (interval 2), attention 4/2 heads of 32 with
 *                 RoPE on 16 dims, DeltaNet 2 key / 4 value heads of 16,
 *                 conv 4, rope base 1e7, epsilon 1e-6
 * hybrid (qwen35) at the small scale, F16, untied:
 *   small-hybrid  dim 768, 12 layers (interval 4: 9 Gated DeltaNet, 3
 *                 attention), attention 8/2 heads of 128 with RoPE on 32,
 *                 DeltaNet 6 key / 12 value heads of 128, conv 4, ff 2048,
 *                 vocab 4096, ctx 8192, rope base 1e7, epsilon 1e-6
 * the real shapes, F16, tied, with the real vocabulary size (the embedded
 * vocabulary padded with unused pieces until a real one is given):
 *   llama3-1b     Llama-3.2-1B: dim 2048, 16 layers, 32/8 heads, head_dim
 *                 64, ff 8192, vocab 128256, ctx 131072, rope base 500000,
 *                 rope_freqs (F 32, L 8192)
 *   qwen2.5-0.5b  Qwen2.5-0.5B: qwen2, dim 896, 24 layers, 14/2 heads, ff
 *                 4864, vocab 151936, ctx 32768, rope base 1e6, eps 1e-6
 *   qwen3-0.6b    Qwen3-0.6B: qwen3, dim 1024, 28 layers, 16/8 heads,
 *                 head_dim 128, ff 3072, vocab 151936, ctx 40960, rope
 *                 base 1e6, eps 1e-6
 *   smollm2-360m  SmolLM2-360M: llama, dim 960, 32 layers, 15/5 heads, ff
 *                 2560, vocab 49152, ctx 8192, rope base 100000
 *   qwen3.5-0.8b  Qwen3.5-0.8B: qwen35, dim 1024, 24 layers (interval 4),
 *                 attention 8/2 heads of 256 with RoPE on 64, DeltaNet 16
 *                 key / 16 value heads of 128, conv 4, ff 3584, vocab
 *                 248320, ctx 262144, rope base 1e7, epsilon 1e-6 (its MTP
 *                 block left out)
 * sliding-window attention, for llama.cpp only (snapbank's runtime does
 * not run olmo2):
 *   tiny-swa      olmo2, F32, dim 64, 4 layers, 4/2 heads of 16, ff 192,
 *                 vocab 512, ctx 2048, window 32 (layers 0-2 slide,
 *                 layer 3 full), untied, rope base 10000, epsilon 1e-6
 * (make_model.c cites the published configurations.)
 * Returns: SB_OK; SB_ERR_INVAL (an unknown name: o is then tiny). */
int sb_rt_make_opts_preset(sb_rt_make_opts *o, const char *preset);

/* sb_rt_make_dtype_name -- the --dtype name of a dtype value ("q4_k_m");
 * NULL for a value make-model does not write. */
const char *sb_rt_make_dtype_name(uint32_t dtype);

/* sb_rt_make_opts_set -- set one option by name: "arch" (llama|qwen2|
 * qwen3|qwen35|olmo2), "dtype" (f32|f16|bf16|q4_0|q4_1|q5_0|q5_1|q8_0|q4_k|q5_k|q6_k|
 * q4_k_m|q5_k_m), "dim", "layers", "heads", "kv-heads",
 * "head-dim" (0: dim / heads), "ff", "vocab" (a number: the generated
 * vocabulary's size; anything else: a GGUF file to take the vocabulary
 * from), "ctx", "seed", "tied" (0|1),
 * "rope-base", "rms-eps", "rope-freqs" (the factor F; 0 none),
 * "rope-orig-ctx", "rope-scaling" (none|linear|yarn|"" for not written),
 * "rope-scale" (the factor); qwen35: "rope-dim" (n_rot, 0: head_dim),
 * "attn-interval", "ssm-conv", "ssm-k-heads", "ssm-v-heads",
 * "ssm-head-dim", "mtp" (0|1); olmo2: "swa" (the window in positions,
 * 0 none); "answer" (the answer fixture's TEXT: o->answer borrows value,
 * which must outlive the sb_rt_make_model call).
 * Returns: SB_OK; SB_ERR_INVAL (unknown name or bad value). */
int sb_rt_make_opts_set(sb_rt_make_opts *o, const char *name, const char *value);

/* sb_rt_make_model -- write the model o describes to path. With o->vocab,
 * the vocabulary is that file's (every tokenizer.* key, vocab.h), checked
 * first to make a tokenizer.
 * Returns: SB_OK; SB_ERR_INVAL (an unknown dtype, or a shape that cannot
 * be: dim not a multiple of heads without head_dim, odd head size, heads
 * not a multiple of kv heads, vocab under 300, a dimension 0 or too large,
 * an unknown rope scaling type; qwen35: an odd rope-dim or one above the
 * head size, value heads not a multiple of key heads, no full-attention
 * layer; a window (n_swa) on an architecture other than olmo2; olmo2:
 * tied, head_dim other than dim / heads; an answer with an architecture
 * other than llama, a dtype other than f32 or f16, tied, a vocabulary
 * file, a TEXT it refuses, or weights that fail the check (4, above);
 * err names --answer);
 * SB_ERR_NOMEM; SB_ERR_IO (err names the
 * path); with o->vocab also what sb_rt_gguf_open, sb_rt_tok_from_gguf and
 * sb_rt_vocab_copy return (err names the vocabulary file). */
int sb_rt_make_model(const sb_rt_make_opts *o, const char *path, sb_rt_err *err);

#endif /* SB_RT_MAKE_MODEL_H */
