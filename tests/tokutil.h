/* tokutil.h -- what the tokenizer tests share: the vocabulary files of
 * tests/data/vocab (the directory comes from CMake as SB_TEST_DATA), and
 * random text that mixes every kind of Unicode a tokenizer meets, and
 * bytes that are not UTF-8 at all. */
#ifndef SB_TOKUTIL_H
#define SB_TOKUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "text/tokenizer.h"

/* The vocabularies of tests/data/vocab, by the name in their file name:
 * llama-spm, phi-3, llama-bpe, qwen2, gpt-2, qwen35, mpt. */
#define TKU_N_VOCABS 7
extern const char *const tku_vocabs[TKU_N_VOCABS];

/* tku_path -- tests/data/<rel> into buf (cap bytes); returns buf. */
const char *tku_path(char *buf, size_t cap, const char *rel);

/* tku_vocab_path -- the file of vocabulary name into buf; returns buf. */
const char *tku_vocab_path(char *buf, size_t cap, const char *name);

/* tku_vocab -- the tokenizer of vocabulary name; fails the test when it
 * does not load. Free with sb_rt_tok_free. */
sb_rt_tok *tku_vocab(const char *name);

/* tku_rand -- splitmix64 step. */
uint64_t tku_rand(uint64_t *s);

/* tku_text -- random text into buf[0, cap) (cap >= 64), its length
 * returned: ASCII words, runs of spaces, tabs and newlines (long ones too),
 * digit runs, punctuation, contractions, Latin-1, CJK, Cyrillic, Arabic
 * and Hebrew (RTL), combining marks, emoji and ZWJ sequences, and unless
 * utf8_only, bytes that are not UTF-8 (lone continuation bytes, truncated
 * and overlong sequences, surrogates, 0xF8..0xFF, NUL). */
size_t tku_text(uint64_t *rng, char *buf, size_t cap, bool utf8_only);

/* tku_encode -- the ids of text (asserting success) into a malloc'd array
 * (*n of them). */
uint32_t *tku_encode(const sb_rt_tok *t, const char *text, size_t len, unsigned flags,
                     size_t *n);

#endif /* SB_TOKUTIL_H */
