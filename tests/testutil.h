/* testutil.h -- shared helpers for the cmocka tests: stores and namespaces
 * with small layouts, deterministic token streams, and synthetic state whose
 * bytes depend on the whole token prefix (so a restore from the wrong
 * prefix cannot pass a comparison). */
#ifndef SB_TESTUTIL_H
#define SB_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "snapbank.h"

/* A small layout: n_tensors tensors with the given bytes per token. */
typedef struct tu_layout {
    uint32_t page_tokens;
    uint32_t n_tensors;
    uint32_t bpt[8];
    uint32_t point_bytes;
    uint32_t flags;
    const char *model;       /* model identity string */
} tu_layout;

/* The configuration of the small disk-tier stores the crash, corruption
 * and salvage tests build: every sequence written (min_prefix_tokens 1),
 * 64 KiB segments under a 64 MiB cap, queue depth 4, a sync every 5 ms,
 * 16 MiB of RAM; no directory (they run on the in-memory file system). */
sb_config tu_small_disk_config(void);

/* Open a RAM-only store with ram_bytes budget (0: the default). */
sb_store *tu_store(uint64_t ram_bytes);

/* Open the namespace (l, scope); asserts success. */
sb_ns *tu_ns(sb_store *st, const tu_layout *l, const char *scope);

/* splitmix64 step. */
uint64_t tu_rand(uint64_t *s);

/* n tokens drawn from [0, vocab). */
void tu_tokens(uint64_t *rng, uint32_t *out, size_t n, uint32_t vocab);

/* n tokens of sequence `seed`: seed * stride, seed * stride + 1, ...
 * (distinct seeds share no first token). */
void tu_seq(uint32_t *out, size_t n, uint32_t seed, uint32_t stride);

/* Synthetic state of tokens[0, n): bufs[t] gets n * bpt[t] bytes. The slice
 * of token i depends on tokens[0..i] and the model string. Caller frees
 * with tu_free_state. */
void **tu_state(const tu_layout *l, const uint32_t *tokens, size_t n);
void tu_free_state(const tu_layout *l, void **bufs);

/* The synthetic point state at position n (l->point_bytes bytes, malloc'd). */
void *tu_point(const tu_layout *l, const uint32_t *tokens, size_t n);

/* Zeroed buffers for a restore of n tokens. */
void **tu_bufs(const tu_layout *l, size_t n);

/* True when bufs hold exactly the synthetic state of tokens[0, n). */
bool tu_state_equal(const tu_layout *l, const uint32_t *tokens, size_t n, void **bufs);

/* Match tokens[0, n) and return L (releases the match). */
size_t tu_match_len(sb_ns *ns, const uint32_t *tokens, size_t n);

/* Match, restore L tokens and compare with the synthetic state; returns L
 * and fails the test on a byte mismatch. */
size_t tu_match_verify(sb_ns *ns, const tu_layout *l, const uint32_t *tokens, size_t n);

/* Match tokens[0, n), restore the L the match gives (with its point state
 * when it has one; a layout requiring point states must have one at L) and
 * fail the test on any byte that is not the synthetic state of that prefix.
 * A restore that meets a damaged record must shrink the match
 * (SB_ERR_CORRUPT or SB_ERR_IO, miss corrupt or io): the shorter prefix is
 * checked then, and *damaged (may be NULL) set. Returns the tokens
 * restored. */
size_t tu_restore_exact(sb_ns *ns, const tu_layout *l, const uint32_t *tokens, size_t n,
                        bool *damaged);

/* Put tokens[0, n) with synthetic state (and a point when the layout has
 * point states and with_point); asserts the return code is want. */
void tu_put(sb_ns *ns, const tu_layout *l, const uint32_t *tokens, size_t n, bool with_point,
            int want);

/* sb_ns_put_ex of tokens[0, n) with synthetic state (and a point when
 * with_point); returns its code. stored and oc as sb_ns_put_ex's. */
int tu_put_ex(sb_ns *ns, const tu_layout *l, const uint32_t *tokens, size_t n, bool with_point,
              size_t *stored, sb_write_outcome *oc);

/* Open a RAM-only store whose budget is ram_pages pages. */
sb_store *tu_store_pages(uint64_t ram_pages);

/* Write the synthetic state of tok[from, to) into pages (pages[r] holds
 * region r of the sequence; each must be writable). */
void tu_fill_range(sb_ns *ns, const tu_layout *l, const uint32_t *tok, size_t from, size_t to,
                   sb_page **pages);

/* True when the first k token slices of page p are the state of tokens
 * [r * pt, r * pt + k) of tok (region r). */
bool tu_page_holds(sb_ns *ns, const tu_layout *l, sb_page *p, const uint32_t *tok, size_t r,
                   size_t k);

/* The store's stats (asserting the call succeeds). */
sb_stats tu_stats(sb_store *st);

/* Assert sb_store_check passes. */
void tu_check(sb_store *st);

/* Make a fresh directory /var/tmp/snapbank-test-NAME-XXXXXX into buf
 * (n bytes; 128 is enough for a short name). */
void tu_scratch_dir(char *buf, size_t n, const char *name);

/* Remove path and everything below it (asserts it went). */
void tu_remove_dir(const char *path);

/* A store clock hook (sb_config.clock_ns) reading the ns count at ctx, an
 * _Atomic uint64_t the test advances (the writer thread reads it too). */
uint64_t tu_fake_clock(void *ctx);

#endif /* SB_TESTUTIL_H */
