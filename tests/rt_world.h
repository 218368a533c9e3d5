/* rt_world.h -- the runtime tests' fixture: a generated model, loaded,
 * with a RAM bank and a namespace of its layout; token ids drawn from a
 * seed; every position's logits of a prompt run cold. Failures are cmocka
 * test failures.
 *
 * Thread safety: one world per test.
 */
#ifndef SB_TEST_RT_WORLD_H
#define SB_TEST_RT_WORLD_H

#include <stddef.h>
#include <stdint.h>

#include "make_model/make_model.h"
#include "model/model.h"
#include "snapbank.h"

typedef struct world {
    char path[64];
    sb_rt_model *m;            /* owned */
    sb_store *st;              /* owned: RAM only */
    sb_ns *ns;                 /* the model's layout, empty scope */
    uint32_t bpt[2 * 8];
} world;

/* rw_make -- the model o describes, written to a temporary file (removed
 * once loaded) under tag, loaded (at most 8 layers), and a bank of
 * ram_bytes whose namespace has the model's layout with page_tokens. */
void rw_make(world *w, const char *tag, const sb_rt_make_opts *o, uint32_t page_tokens,
             uint64_t ram_bytes);

/* rw_unmake -- close the namespace and the bank (checking its invariants
 * first) and free the model. */
void rw_unmake(world *w);

/* rw_tokens -- n token ids below the vocabulary size into t, drawn from
 * seed. */
void rw_tokens(const world *w, uint32_t *t, size_t n, uint64_t seed);

/* rw_run_all -- the logits of every position of t[0, n) (n * n_vocab
 * floats, malloc'd: the caller frees), computed cold in a fresh sequence
 * n_batch tokens at a time on `threads` threads; nothing is committed. */
float *rw_run_all(world *w, const uint32_t *t, size_t n, uint32_t n_batch, unsigned threads);

#endif /* SB_TEST_RT_WORLD_H */
