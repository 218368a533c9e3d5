/* vocab.h -- the tokenizer of a GGUF model, from its tokenizer.ggml.* keys.
 *
 * Only the `llama` vocabulary type (SentencePiece pieces with scores, byte
 * fallback through <0xNN> tokens) is supported; any other type is refused
 * with SB_ERR_UNSUPPORTED and a message naming it (token ids can always be
 * given directly).
 *
 * Thread safety: reads the mapping only; the tokenizer it makes is
 * immutable.
 */
#ifndef SB_RT_VOCAB_H
#define SB_RT_VOCAB_H

#include "core/rt.h"
#include "model/gguf.h"
#include "model/tokenizer.h"

/* sb_rt_tok_from_gguf -- the tokenizer described by g's metadata (path for
 * messages). Keys: tokenizer.ggml.model ("llama"), .tokens (string array),
 * .scores (float32 array, optional), .token_type (int32 array, optional),
 * .bos_token_id (default 1), .eos_token_id (2), .unknown_token_id (0),
 * .add_bos_token (true), .add_space_prefix (true).
 * On success *out is owned by the caller (sb_rt_tok_free).
 * Returns: SB_OK; SB_ERR_UNSUPPORTED (another vocabulary type or none);
 * SB_ERR_FORMAT (missing or inconsistent keys); SB_ERR_NOMEM. */
int sb_rt_tok_from_gguf(const sb_rt_gguf *g, const char *path, sb_rt_tok **out, sb_rt_err *err);

#endif /* SB_RT_VOCAB_H */
