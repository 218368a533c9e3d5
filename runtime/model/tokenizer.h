/* tokenizer.h -- text to token ids and back for the GGUF `llama`
 * (SentencePiece BPE) vocabulary.
 *
 * Encoding, the rules implemented:
 *   1. With add_space_prefix, one space is put in front of the text. Every
 *      space (0x20) becomes U+2581 '▁' (E2 96 81).
 *   2. The text is cut into symbols: one per UTF-8 character; a byte that
 *      does not begin a complete, valid sequence is a symbol by itself.
 *   3. Repeatedly, the adjacent pair of symbols whose concatenation is a
 *      mergeable piece (type normal, user-defined or unknown) with the
 *      highest score is merged; among equal scores the leftmost pair wins.
 *      A piece listed twice counts once, as its lowest id with that id's
 *      score.
 *      (A priority queue of candidate pairs over a linked list of symbols,
 *      with stale entries skipped: O(n log n).)
 *   4. A final symbol that is a piece gives its id (among duplicate pieces,
 *      the lowest id); otherwise each of its bytes gives the byte token
 *      `<0xNN>`, or unk when the vocabulary has none for that byte.
 * BOS is put first when asked.
 *
 * Decoding (sb_rt_tok_decode): the pieces' bytes, a byte token's byte,
 * nothing for control and unused tokens, then every '▁' (even one spelled
 * as three byte tokens) becomes a space, and with add_space_prefix the
 * text's first space is dropped. So decode(encode(x)) is x for every byte
 * string x. sb_rt_tok_piece, for streaming, does the same one token at a
 * time (a '▁' split over byte tokens then prints as its bytes).
 *
 * Thread safety: a tokenizer is immutable once made; any thread may use it.
 */
#ifndef SB_RT_TOKENIZER_H
#define SB_RT_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/rt.h"

enum { /* token types (GGUF tokenizer.ggml.token_type) */
    SB_RT_TOK_NORMAL = 1, SB_RT_TOK_UNKNOWN = 2, SB_RT_TOK_CONTROL = 3,
    SB_RT_TOK_USER = 4, SB_RT_TOK_UNUSED = 5, SB_RT_TOK_BYTE = 6,
};

#define SB_RT_TOK_NONE UINT32_MAX /* "no previous token" for sb_rt_tok_piece */

typedef struct sb_rt_tok sb_rt_tok;

typedef struct sb_rt_tok_spec {
    uint32_t n_vocab;
    const char *const *pieces;   /* (n_vocab) UTF-8 bytes, not NUL-terminated */
    const size_t *piece_len;     /* (n_vocab) */
    const float *scores;         /* (n_vocab) or NULL: all 0 */
    const int32_t *types;        /* (n_vocab) or NULL: all normal */
    uint32_t bos, eos, unk;
    bool add_bos, add_space_prefix;
} sb_rt_tok_spec;

/* sb_rt_tok_new -- a tokenizer for spec (copied: spec's memory may go).
 * On success *out is owned by the caller (sb_rt_tok_free).
 * Returns: SB_OK; SB_ERR_INVAL (NULL argument); SB_ERR_FORMAT (n_vocab 0
 * or over 2^24, bos/eos/unk out of range, a byte token not spelled <0xNN>,
 * a piece over 256 bytes); SB_ERR_NOMEM. */
int sb_rt_tok_new(const sb_rt_tok_spec *spec, sb_rt_tok **out, sb_rt_err *err);

/* sb_rt_tok_free -- NULL is a no-op. */
void sb_rt_tok_free(sb_rt_tok *t);

/* sb_rt_tok_encode -- ids of text[0, len) (any bytes), BOS first when
 * add_bos. ids may be NULL when cap is 0. *n_ids receives the count.
 * Returns: SB_OK; SB_ERR_RANGE (cap too small: *n_ids is the count needed,
 * ids unspecified); SB_ERR_INVAL; SB_ERR_NOMEM. */
int sb_rt_tok_encode(const sb_rt_tok *t, const char *text, size_t len, bool add_bos,
                     uint32_t *ids, size_t cap, size_t *n_ids);

/* sb_rt_tok_piece -- the bytes token id prints as after token prev
 * (SB_RT_TOK_NONE at the start), into buf. Returns: SB_OK; SB_ERR_RANGE
 * (id out of range, or cap too small: *n is the size needed). */
int sb_rt_tok_piece(const sb_rt_tok *t, uint32_t id, uint32_t prev, char *buf, size_t cap,
                    size_t *n);

/* sb_rt_tok_decode -- the text of ids[0, n_ids) into buf (*len bytes).
 * Returns: SB_OK; SB_ERR_RANGE (a bad id, or cap too small: *len is the
 * size needed). */
int sb_rt_tok_decode(const sb_rt_tok *t, const uint32_t *ids, size_t n_ids, char *buf,
                     size_t cap, size_t *len);

uint32_t sb_rt_tok_n_vocab(const sb_rt_tok *t);
uint32_t sb_rt_tok_bos(const sb_rt_tok *t);
uint32_t sb_rt_tok_eos(const sb_rt_tok *t);
bool sb_rt_tok_add_bos(const sb_rt_tok *t);

#endif /* SB_RT_TOKENIZER_H */
