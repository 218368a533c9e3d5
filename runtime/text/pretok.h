/* pretok.h -- the pre-tokenizers of byte-level BPE vocabularies: cutting
 * text into the words that BPE then merges within, as the regular
 * expression a vocabulary's `tokenizer.ggml.pre` names would, by
 * hand-written matchers (no regex engine).
 *
 * The patterns (llama.cpp v0.5.0, src/llama-vocab.cpp, lists which name
 * uses which; the classes come from unicode.h: \p{L} letters, \p{N}
 * numbers, \s White_Space; "other" below is [^\s\p{L}\p{N}]):
 *
 *   GPT2    's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
 *   LLAMA3  (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *           ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *   QWEN2   LLAMA3 with \p{N} (one digit) for \p{N}{1,3}
 *   QWEN35  (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}|
 *           ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ -- QWEN2
 *           with the marks \p{M} (combining accents, vowel signs, viramas)
 *           counted as letters: they join letter runs and leave "other"
 *           (a mark leading a word, where QWEN2's prefix could take it,
 *           starts the same run either way)
 *   SMOLLM  first \p{N}: every number code point is a word of its own; then
 *           GPT2 inside each stretch between them (its lookahead ends
 *           where the stretch does)
 *
 * Splitting rules, as a regex splitter applies them: at each position the
 * alternatives are tried in order and the first that matches is the word;
 * text no alternative matches (GPT2's single white space before a
 * non-space, which its pattern lacks a `\s+` for) is a word by itself.
 * What each alternative does, step by step, at code point i (the step
 * numbers appear in pretok.c):
 *
 *   1. Contraction: an apostrophe U+0027 then s, t, m, d (2 code points)
 *      or re, ve, ll (3). LLAMA3, QWEN2 and QWEN35 also take upper case
 *      (ASCII: the only letters that fold to these).
 *   2. Letters. GPT2: an optional space U+0020 then a run of \p{L}.
 *      LLAMA3/QWEN2: an optional code point that is none of \r, \n,
 *      \p{L}, \p{N} (a space, a tab, punctuation, ...) then a run of \p{L}.
 *      QWEN35: the same, \p{M} counting as \p{L}.
 *   3. Numbers. GPT2: an optional space then a run of \p{N}. LLAMA3: 1 to 3
 *      of \p{N} (a run of 7 digits is 3 + 3 + 1). QWEN2, QWEN35: one.
 *   4. Other. An optional space then a run of "other" (QWEN35: not \p{M}
 *      either); LLAMA3/QWEN2/QWEN35 then also take the \r and \n that
 *      follow.
 *   5. LLAMA3/QWEN2/QWEN35: white space up to and including the last \r or
 *      \n of the white-space run at i, if it holds one.
 *   6. A run of k white-space code points: all of them when the run ends
 *      the text, else the first k - 1 (so the last one can lead the next
 *      word), else (k = 1) the one code point.
 *
 * Text that is not UTF-8: each ill-formed byte counts as one U+FFFD, an
 * "other" (unicode.h) -- the word boundaries llama.cpp gets, which
 * replaces such bytes by U+FFFD -- but the word keeps the byte.
 *
 * Thread safety: pure functions over caller-owned memory.
 */
#ifndef SB_RT_PRETOK_H
#define SB_RT_PRETOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum sb_rt_pretok_kind {
    SB_RT_PRETOK_GPT2 = 0,
    SB_RT_PRETOK_LLAMA3 = 1,
    SB_RT_PRETOK_QWEN2 = 2,
    SB_RT_PRETOK_SMOLLM = 3,
    SB_RT_PRETOK_QWEN35 = 4,
} sb_rt_pretok_kind;

/* What a tokenizer.ggml.pre name means (llama.cpp's settings for it). */
typedef struct sb_rt_pretok_info {
    const char *name;          /* the name, as the table spells it */
    sb_rt_pretok_kind kind;
    bool ignore_merges;        /* a word that is itself a token is that
                                * token, unmerged (Llama 3) */
    bool add_bos;              /* add_bos_token when the file does not say */
} sb_rt_pretok_info;

/* sb_rt_pretok_find -- the settings of pre-tokenizer name[0, len).
 * Known: llama-bpe, llama3, llama-v3 (LLAMA3, ignore_merges, BOS); dbrx,
 * smaug-bpe (LLAMA3); qwen2, deepseek-r1-qwen, stablelm2, megrez (QWEN2);
 * qwen35 (QWEN35);
 * gpt-2, phi-2, mpt, olmo (GPT2); smollm, starcoder, refact, codeshell,
 * command-r (SMOLLM). Returns NULL for any other name. */
const sb_rt_pretok_info *sb_rt_pretok_find(const char *name, size_t len);

/* sb_rt_pretok_names -- the known names, comma-separated, for messages. */
const char *sb_rt_pretok_names(void);

/* Work space for sb_rt_pretok_split over up to cap bytes of text. */
typedef struct sb_rt_pretok_buf {
    uint8_t *props;            /* (cap + 1) unicode.h props of each code point */
    uint8_t *ascii;            /* (cap + 1) the code point when ASCII, else 0 */
    size_t *off;               /* (cap + 1) byte offset of each code point */
    size_t cap;
} sb_rt_pretok_buf;

/* sb_rt_pretok_buf_reserve -- make b hold at least n bytes of text (b
 * zeroed at first). Returns 0, or -1 out of memory (b unchanged). */
int sb_rt_pretok_buf_reserve(sb_rt_pretok_buf *b, size_t n);
/* sb_rt_pretok_buf_free -- free b's arrays (b may be zeroed, not NULL). */
void sb_rt_pretok_buf_free(sb_rt_pretok_buf *b);

/* Receives each word: text[off, off + len), in order, covering the text.
 * A nonzero return stops the split and is returned by it. */
typedef int (*sb_rt_pretok_word_fn)(void *ctx, size_t off, size_t len);

/* sb_rt_pretok_split -- cut text[0, len) into words by kind's pattern and
 * give each to word(ctx, ...). b must hold len bytes
 * (sb_rt_pretok_buf_reserve). Returns 0, or what word returned. */
int sb_rt_pretok_split(sb_rt_pretok_kind kind, const char *text, size_t len,
                       sb_rt_pretok_buf *b, sb_rt_pretok_word_fn word, void *ctx);

#endif /* SB_RT_PRETOK_H */
