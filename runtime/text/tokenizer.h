/* tokenizer.h -- text to token ids and back, for the two vocabulary kinds
 * of GGUF files: `llama` (SentencePiece BPE: Llama 2, Mistral, Phi-3,
 * TinyLlama) and `gpt2` (byte-level BPE: Llama 3, Qwen2/2.5/3, SmolLM,
 * GPT-2).
 *
 * Usage:
 *
 *     sb_rt_tok *t;                                  // vocab.h makes one from a file
 *     sb_rt_tok_load("model.gguf", &t, &err);
 *     uint32_t ids[256]; size_t n;
 *     sb_rt_tok_encode(t, text, len, SB_RT_TOK_ADD_BOS | SB_RT_TOK_PARSE_SPECIAL,
 *                      ids, 256, &n);               // SB_ERR_RANGE: n is the count needed
 *     char out[1024]; size_t k;
 *     sb_rt_tok_decode(t, ids, n, out, sizeof out, &k);
 *     sb_rt_tok_free(t);
 *
 * ENCODING
 *
 *   1. Special tokens. The texts of user-defined tokens are found in the
 *      input and become those tokens, whole, always; with
 *      SB_RT_TOK_PARSE_SPECIAL the texts of control and unknown-type
 *      tokens too. This is llama.cpp's rule (llama_tokenize's
 *      parse_special = SB_RT_TOK_PARSE_SPECIAL): an added token such as
 *      GPT-NeoX's runs of spaces (MPT, OLMo) is part of the vocabulary's
 *      text encoding, not a markup token. For text that must match no
 *      token at all, give sb_rt_tok_encode_ex a literal span over it.
 *      The longest token text is matched first
 *      everywhere (ties: the lower id), then the next longest in what is
 *      left, and so on; an occurrence that overlaps one already taken, or
 *      (sb_rt_tok_encode_ex) any literal span, is plain text. A token with
 *      SB_RT_TOK_LSTRIP / RSTRIP drops the white space beside it. A token
 *      whose text is an end-of-generation text (sb_rt_tok_is_eog's list)
 *      counts as a control token whatever the file's type, as in llama.cpp
 *      (sb_rt_tok_type reports it so). What lies between the special
 *      tokens is encoded by the vocabulary's kind:
 *   2. `llama`: with add_space_prefix, a space is put in front of each
 *      stretch of text that starts the input or follows a special token
 *      (as llama.cpp does); every space becomes U+2581 '▁'; the text is
 *      cut into UTF-8 characters (an invalid byte is a symbol of its own);
 *      repeatedly the adjacent pair whose concatenation is a mergeable
 *      piece (normal, user-defined or unknown type) with the highest score
 *      is merged, the leftmost among equal scores; a final symbol that is
 *      a piece gives its id (the lowest id of duplicates), otherwise each
 *      of its bytes gives the byte token <0xNN>, or unk when there is none.
 *   3. `gpt2`: the stretch is cut into words by the pre-tokenizer that
 *      tokenizer.ggml.pre names (pretok.h), and each word is encoded by
 *      byte-level BPE (bpe.h: merges by rank from tokenizer.ggml.merges).
 *   4. SB_RT_TOK_ADD_BOS puts the BOS token first and SB_RT_TOK_ADD_EOS the
 *      EOS token last (nothing when the vocabulary has none). Callers that
 *      follow the file pass ADD_BOS when info.add_bos, ADD_EOS when
 *      info.add_eos.
 *
 * DECODING
 *
 *   Each token stands for bytes: a `gpt2` normal token for the bytes its
 *   text spells in the byte-to-unicode mapping (bpe.h); a `llama` normal
 *   token for its text with '▁' as a space, and with add_space_prefix the
 *   text's first space dropped; a byte token for its byte; a user-defined
 *   token for its text. Control, unknown and unused tokens stand for
 *   nothing unless SB_RT_TOK_SHOW_SPECIAL asks for their text. So
 *   decode(encode(x)) == x for every byte string x, in both kinds, when
 *   the vocabulary has every byte (every vocabulary in tests/data/vocab
 *   has but mpt, which lacks the 13 bytes UTF-8 never uses; `llama` also
 *   needs x free of U+2581 itself, which it reads as a
 *   space, and of user-defined token texts: a `llama` vocabulary adds its
 *   space after each special token), with or without BOS/EOS; and with
 *   PARSE_SPECIAL and SHOW_SPECIAL too for `gpt2`. A `gpt2` token may end
 *   inside a UTF-8 character: sb_rt_tok_piece gives its bytes as they are
 *   and the caller joins the pieces.
 *
 * Thread safety: a tokenizer is immutable once made; any thread may use it.
 */
#ifndef SB_RT_TOKENIZER_H
#define SB_RT_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/rt.h"

enum { /* token types (GGUF tokenizer.ggml.token_type; pinned) */
    SB_RT_TOK_NORMAL = 1, SB_RT_TOK_UNKNOWN = 2, SB_RT_TOK_CONTROL = 3,
    SB_RT_TOK_USER = 4, SB_RT_TOK_UNUSED = 5, SB_RT_TOK_BYTE = 6,
};

#define SB_RT_TOK_NONE UINT32_MAX /* no such token; "no previous token" for sb_rt_tok_piece */

/* flags of sb_rt_tok_encode / sb_rt_tok_encode_ex */
#define SB_RT_TOK_ADD_BOS       1u /* put BOS first (a bool `true` keeps its old meaning) */
#define SB_RT_TOK_PARSE_SPECIAL 2u /* control and unknown-type token texts in the input
                                      become those tokens, whole, never split (user-defined
                                      ones do without it) */
#define SB_RT_TOK_ADD_EOS       4u /* put EOS last */
/* 8u was SB_RT_TOK_PARSE_USER (user-defined texts only), retired when that
 * became the behaviour without PARSE_SPECIAL; not reused: encode refuses it */
/* flags of sb_rt_tok_decode_ex / sb_rt_tok_piece_ex */
#define SB_RT_TOK_SHOW_SPECIAL 16u /* control, unknown and unused tokens print their text */
#define SB_RT_TOK_KEEP_SPACE   32u /* piece_ex: a `llama` first token keeps its leading space
                                      (the token's own bytes, as llama-tokenize prints them) */

typedef struct sb_rt_tok sb_rt_tok;

/* What sb_rt_tok_new builds from. Start from sb_rt_tok_spec_init: ids
 * there are SB_RT_TOK_NONE ("none"), not 0. */
typedef struct sb_rt_tok_spec {
    uint32_t n_vocab;
    const char *const *pieces;   /* (n_vocab) token texts as the file spells them, not
                                    NUL-terminated; at most 4096 bytes each */
    const size_t *piece_len;     /* (n_vocab) */
    const float *scores;         /* (n_vocab) or NULL: all 0 (used by `llama`) */
    const int32_t *types;        /* (n_vocab) or NULL: all normal */
    uint32_t bos, eos, unk;      /* ids or SB_RT_TOK_NONE */
    bool add_bos, add_space_prefix;
    const char *model;           /* "llama" (or NULL) or "gpt2" */
    const char *pre;             /* gpt2: the pre-tokenizer name (pretok.h); NULL: "default" */
    const char *const *merges;   /* gpt2: (n_merges) "LEFT RIGHT" strings, not NUL-terminated */
    const size_t *merge_len;     /* (n_merges) */
    uint64_t n_merges;
    uint32_t eot, eom, pad;      /* ids or SB_RT_TOK_NONE; eot/eom NONE: found by text
                                    (sb_rt_tok_is_eog) */
    bool add_eos;
    const uint8_t *strip;        /* (n_vocab) SB_RT_TOK_LSTRIP | SB_RT_TOK_RSTRIP of each
                                    special token, or NULL: none */
} sb_rt_tok_spec;

/* spec.strip bits: when special token matching (ENCODING step 1) takes
 * the token, the white space (' ', \t, \n, \v, \f, \r) just before it
 * (LSTRIP) or just after it (RSTRIP) is dropped from the text. GGUF files
 * do not carry these; vocab.h sets them as llama.cpp does. */
#define SB_RT_TOK_LSTRIP 1u
#define SB_RT_TOK_RSTRIP 2u

/* sb_rt_tok_spec_init -- every field empty: no tokens, ids SB_RT_TOK_NONE,
 * model "llama", flags false. */
void sb_rt_tok_spec_init(sb_rt_tok_spec *spec);

/* sb_rt_tok_new -- a tokenizer for spec (copied: spec's memory may go).
 * On success *out is owned by the caller (sb_rt_tok_free).
 * Returns: SB_OK; SB_ERR_INVAL (NULL argument); SB_ERR_FORMAT (n_vocab 0
 * or over 2^24, an id out of range, add_bos/add_eos without that token, a
 * `llama` byte token not spelled <0xNN>, a piece over 4096 bytes, a `gpt2`
 * byte with no token and no unk); SB_ERR_UNSUPPORTED (another model, or a
 * pre-tokenizer this runtime does not know: err names it and lists the
 * known ones); SB_ERR_NOMEM. err says which. */
int sb_rt_tok_new(const sb_rt_tok_spec *spec, sb_rt_tok **out, sb_rt_err *err);

/* sb_rt_tok_free -- NULL is a no-op. */
void sb_rt_tok_free(sb_rt_tok *t);

/* sb_rt_tok_encode -- ids of text[0, len) (any bytes; ENCODING above)
 * into ids[0, cap). ids may be NULL when cap is 0. *n_ids receives the
 * count. flags: SB_RT_TOK_* (encode flags).
 * Returns: SB_OK; SB_ERR_RANGE (cap too small: *n_ids is the count needed,
 * ids holds the first cap of them); SB_ERR_INVAL (NULL argument, unknown
 * flag); SB_ERR_NOMEM (*n_ids 0). */
int sb_rt_tok_encode(const sb_rt_tok *t, const char *text, size_t len, unsigned flags,
                     uint32_t *ids, size_t cap, size_t *n_ids);

/* A byte range text[off, off + len). */
typedef struct sb_rt_tok_span { size_t off, len; } sb_rt_tok_span;

/* sb_rt_tok_encode_ex -- as sb_rt_tok_encode, except that a special token
 * (user-defined, or with SB_RT_TOK_PARSE_SPECIAL control and unknown) is
 * matched only where it lies wholly outside every literal span: user
 * content inside a rendered chat template. literal: n_literal spans,
 * sorted, disjoint, inside [0, len) (NULL when n_literal is 0). The text
 * inside a span is still encoded together with the text around it.
 * Returns: as sb_rt_tok_encode; SB_ERR_INVAL also for spans out of order,
 * overlapping or past len. */
int sb_rt_tok_encode_ex(const sb_rt_tok *t, const char *text, size_t len, unsigned flags,
                        const sb_rt_tok_span *literal, size_t n_literal,
                        uint32_t *ids, size_t cap, size_t *n_ids);

/* sb_rt_tok_piece -- the bytes token id prints as after token prev
 * (SB_RT_TOK_NONE at the start; a `llama` first token drops its leading
 * space), into buf. Returns: SB_OK; SB_ERR_RANGE (id out of range, or cap
 * too small: *n is the size needed). */
int sb_rt_tok_piece(const sb_rt_tok *t, uint32_t id, uint32_t prev, char *buf, size_t cap,
                    size_t *n);
/* sb_rt_tok_piece_ex -- the same with flags (SB_RT_TOK_SHOW_SPECIAL,
 * SB_RT_TOK_KEEP_SPACE). Returns also SB_ERR_INVAL (another flag). */
int sb_rt_tok_piece_ex(const sb_rt_tok *t, uint32_t id, uint32_t prev, unsigned flags,
                       char *buf, size_t cap, size_t *n);

/* sb_rt_tok_decode -- the text of ids[0, n_ids) into buf (*len bytes;
 * DECODING above). Returns: SB_OK; SB_ERR_RANGE (a bad id, or cap too
 * small: *len is the size needed); SB_ERR_INVAL (NULL argument);
 * SB_ERR_NOMEM. */
int sb_rt_tok_decode(const sb_rt_tok *t, const uint32_t *ids, size_t n_ids, char *buf,
                     size_t cap, size_t *len);
/* sb_rt_tok_decode_ex -- the same with flags (SB_RT_TOK_SHOW_SPECIAL;
 * another flag is SB_ERR_INVAL). */
int sb_rt_tok_decode_ex(const sb_rt_tok *t, const uint32_t *ids, size_t n_ids, unsigned flags,
                        char *buf, size_t cap, size_t *len);

typedef struct sb_rt_tok_info {
    uint32_t n_vocab;
    uint32_t bos, eos, eot, pad, unk;  /* SB_RT_TOK_NONE when the vocabulary has none */
    bool add_bos, add_eos;             /* tokenizer.ggml.add_bos_token / add_eos_token */
    const char *model;                 /* tokenizer.ggml.model: "llama" or "gpt2" */
    const char *pre;                   /* tokenizer.ggml.pre ("default" when absent) */
} sb_rt_tok_info;

/* sb_rt_tok_get_info -- the vocabulary's facts; strings borrowed for the
 * tokenizer's life. eot is the file's eot_token_id, else the first of
 * <|eot_id|>, <|im_end|>, <|end|>, <end_of_turn>, <|endoftext|>,
 * <|end_of_text|>, <EOT> that the vocabulary has. */
void sb_rt_tok_get_info(const sb_rt_tok *t, sb_rt_tok_info *out);

/* sb_rt_tok_is_eog -- whether id ends generation: EOS, EOT, EOM, and any
 * token whose text is one of <|eot_id|>, <|im_end|>, <|end|>,
 * <|endoftext|>, <|end_of_text|>, <|eom_id|>, <end_of_turn>, <EOT>,
 * <|return|>, <|call|> (as llama.cpp's list of end tokens). False for ids
 * out of range. */
bool sb_rt_tok_is_eog(const sb_rt_tok *t, uint32_t id);

/* sb_rt_tok_text -- the text of a token id as it appears in the vocabulary
 * (for templates' bos_token / eos_token): *len bytes, NUL-terminated,
 * borrowed for the tokenizer's life; NULL when out of range. */
const char *sb_rt_tok_text(const sb_rt_tok *t, uint32_t id, size_t *len);

/* sb_rt_tok_type -- the type (SB_RT_TOK_NORMAL...) of id; 0 out of range. */
int sb_rt_tok_type(const sb_rt_tok *t, uint32_t id);

/* Shorthands of sb_rt_tok_get_info (0 / false for a NULL t). */
uint32_t sb_rt_tok_n_vocab(const sb_rt_tok *t);
uint32_t sb_rt_tok_bos(const sb_rt_tok *t);
uint32_t sb_rt_tok_eos(const sb_rt_tok *t);
bool sb_rt_tok_add_bos(const sb_rt_tok *t);

#endif /* SB_RT_TOKENIZER_H */
