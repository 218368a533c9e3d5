/* vocab.h -- the tokenizer of a GGUF file, from its tokenizer.ggml.* keys:
 * a model's, or a vocabulary-only file's (no tensors, like llama.cpp's
 * models/ggml-vocab-*.gguf); and copying those keys into a new file.
 *
 * Keys read (llama.cpp's names; defaults are llama.cpp's per type):
 *
 *   KEY (tokenizer.ggml.)  TYPE             `llama` default   `gpt2` default
 *   model                  string           (required: "llama" or "gpt2")
 *   tokens                 string array     (required, 1 to 2^24)
 *   scores                 f32/i32 array    all 0             -
 *   token_type             i32 array        all normal        all normal
 *   merges                 string array     -                 none
 *   pre                    string           "default"         "default" (refused:
 *                                                             a name pretok.h knows)
 *   bos_token_id           integer          1                 11
 *   eos_token_id           integer          2                 11
 *   unknown_token_id       integer          0                 none
 *   eot_token_id           integer          by text           by text
 *   eom_token_id           integer          by text           by text
 *   padding_token_id       integer          none              none
 *   add_bos_token          bool             true              per pre (llama-bpe: true)
 *   add_eos_token          bool             false             false
 *   add_space_prefix       bool             true              false
 *
 * A default id the vocabulary is too small for is "none"; an id the file
 * gives out of range is refused.
 *
 * Thread safety: reads the mapping only; the tokenizer it makes is
 * immutable.
 */
#ifndef SB_RT_VOCAB_H
#define SB_RT_VOCAB_H

#include "core/rt.h"
#include "gguf/gguf.h"
#include "gguf/gguf_write.h"
#include "text/tokenizer.h"

/* sb_rt_tok_from_gguf -- the tokenizer described by g's metadata (path
 * for messages). On success *out is owned by the caller (sb_rt_tok_free).
 * Returns: SB_OK; SB_ERR_UNSUPPORTED (another vocabulary type or none, an
 * unknown pre-tokenizer: err names it); SB_ERR_FORMAT (missing or
 * inconsistent keys: err names the key); SB_ERR_NOMEM. */
int sb_rt_tok_from_gguf(const sb_rt_gguf *g, const char *path, sb_rt_tok **out, sb_rt_err *err);

/* sb_rt_tok_load -- open the GGUF file at path (a model or a
 * vocabulary-only file: tensors are not looked at) and build only its
 * tokenizer; the file is closed again. On success *out is owned by the
 * caller (sb_rt_tok_free).
 * Returns: as sb_rt_gguf_open and sb_rt_tok_from_gguf; err names path. */
int sb_rt_tok_load(const char *path, sb_rt_tok **out, sb_rt_err *err);

/* sb_rt_vocab_copy -- append every key of g whose name starts with
 * "tokenizer." (the vocabulary, merges, token types, special ids, pre,
 * chat template) to w, values unchanged. It does not check that they make
 * a tokenizer: sb_rt_tok_from_gguf does. path is for messages. On failure
 * nothing is appended.
 * Returns: SB_OK; SB_ERR_UNSUPPORTED (a scalar f64 key, which this reader
 * cannot give back unchanged: err names it); SB_ERR_FORMAT (a key that
 * does not read); SB_ERR_NOMEM. */
int sb_rt_vocab_copy(const sb_rt_gguf *g, const char *path, sb_rt_gguf_writer *w,
                     sb_rt_err *err);

#endif /* SB_RT_VOCAB_H */
