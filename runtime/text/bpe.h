/* bpe.h -- byte-level BPE (GPT-2 style): the byte-to-unicode mapping, the
 * merge table, and the encoding of one pre-tokenized word into token ids.
 *
 * The byte-to-unicode mapping (GPT-2's bytes_to_unicode): a vocabulary
 * spells every byte as one printable code point, so token texts and merges
 * are strings of such code points. Bytes 0x21..0x7E, 0xA1..0xAC and
 * 0xAE..0xFF are the code point of the same number; the other 68 bytes
 * (0x00..0x20, 0x7F..0xA0, 0xAD), in increasing order, are U+0100,
 * U+0101, ... U+0143. So ' ' (0x20) is U+0120 'Ġ' and '\n' is U+010A 'Ċ'.
 * This module decodes texts and merges into the raw bytes they stand for
 * once, at load; encoding then works on the bytes of the text.
 *
 * Merges (tokenizer.ggml.merges): string i is "LEFT RIGHT", split at the
 * first space after its first byte, of rank i; a pair listed twice keeps
 * its first rank; a merge whose halves are not both spelled in the mapping
 * can never apply and is dropped.
 *
 * Encoding a word (the rules, numbered as in bpe.c):
 *   1. With ignore_merges, a word that is a token as a whole is that token.
 *   2. Each byte is a symbol.
 *   3. Repeatedly, of all adjacent symbol pairs that a merge joins, the one
 *      of lowest rank is merged (the leftmost among pairs of that rank),
 *      until no pair is in the merge table. (A heap of candidate pairs
 *      over a linked list of symbols, stale entries skipped: O(n log n) in
 *      the word's length.)
 *   4. A symbol that is a token gives its id; otherwise each of its bytes
 *      gives the token of that byte alone, or unk. Only tokens of type
 *      normal count here: BPE never produces a control or user-defined
 *      token (those come only from the special-token matching of
 *      tokenizer.c).
 *
 * Thread safety: a table is immutable once made; encoding uses the
 * caller's scratch.
 */
#ifndef SB_RT_BPE_H
#define SB_RT_BPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/rt.h"

typedef struct sb_rt_bpe sb_rt_bpe;

/* sb_rt_bpe_cp_byte -- the byte code point cp spells in the mapping, or -1
 * when cp spells none. sb_rt_bpe_byte_cp -- the code point of byte b. */
int sb_rt_bpe_cp_byte(uint32_t cp);
uint32_t sb_rt_bpe_byte_cp(uint8_t b);

/* sb_rt_bpe_unmap -- the bytes the mapped text s[0, n) stands for, into
 * out (room for n bytes: never longer). *out_len receives the length.
 * Returns true; false when s holds a code point outside the mapping
 * (out is then unspecified). */
bool sb_rt_bpe_unmap(const char *s, size_t n, char *out, size_t *out_len);

/* sb_rt_bpe_new -- the merge table for a vocabulary of n tokens: raw[i] /
 * raw_len[i] the bytes token i stands for (mapped texts already unmapped;
 * ignored unless ok[i], which says token i is a normal token BPE may
 * produce), and the n_merges merge strings (mapped, as in the file).
 * unk: the token for a byte no token spells, or UINT32_MAX.
 * On success *out is owned by the caller (sb_rt_bpe_free).
 * Returns: SB_OK; SB_ERR_FORMAT (a byte has no token and there is no unk:
 * err names the byte; more than 2^31 merges); SB_ERR_NOMEM. */
int sb_rt_bpe_new(uint32_t n, const char *const *raw, const size_t *raw_len, const bool *ok,
                  const char *const *merges, const size_t *merge_len, uint64_t n_merges,
                  bool ignore_merges, uint32_t unk, sb_rt_bpe **out, sb_rt_err *err);

/* sb_rt_bpe_free -- NULL is a no-op. */
void sb_rt_bpe_free(sb_rt_bpe *b);

/* sb_rt_bpe_n_merges -- the merges kept (distinct pairs that can apply). */
size_t sb_rt_bpe_n_merges(const sb_rt_bpe *b);

/* Scratch space for encoding words: zero it first; it grows to the
 * longest word seen; free with sb_rt_bpe_scratch_free (a zeroed scratch
 * too). */
typedef struct sb_rt_bpe_scratch {
    void *sym, *heap;          /* the symbol list and the candidate heap */
    uint32_t *ids;             /* the last word's ids */
    size_t cap;                /* the longest word it holds, in bytes */
} sb_rt_bpe_scratch;

void sb_rt_bpe_scratch_free(sb_rt_bpe_scratch *s);

/* sb_rt_bpe_word -- the ids of word w[0, n) (n >= 1): *ids points at
 * *n_ids ids (at most n) in s, borrowed until s is used again.
 * Returns: SB_OK; SB_ERR_NOMEM (the scratch could not grow). */
int sb_rt_bpe_word(const sb_rt_bpe *b, const uint8_t *w, size_t n, sb_rt_bpe_scratch *s,
                   const uint32_t **ids, size_t *n_ids);

#endif /* SB_RT_BPE_H */
