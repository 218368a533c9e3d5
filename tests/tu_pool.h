/* tu_pool.h -- an engine's paged KV pool for the scatter/gather tests
 * (test_blocks, test_layerput): per tensor of a test layout, n_blocks
 * blocks of block_tokens rows, the odd tensors' (V) rows padded to a
 * stride wider than their bytes per token, one block table shuffled by a
 * seed and shared by every tensor, and the sb_block_table of each tensor
 * over it. Rows hold the synthetic state of testutil.h (tu_state). Public
 * API only. */
#ifndef SB_TU_POOL_H
#define SB_TU_POOL_H

#include "testutil.h"

#define TU_POOL_TENSORS 8

typedef struct tu_pool {
    const tu_layout *l;
    uint32_t block_tokens, n_blocks;
    size_t stride[TU_POOL_TENSORS];  /* bytes between a tensor's rows */
    uint8_t *pool[TU_POOL_TENSORS];  /* n_blocks blocks of block_tokens rows */
    uint32_t *table;                 /* (n_blocks) the sequence's block table */
    sb_block_table bt[TU_POOL_TENSORS];
} tu_pool;

/* tu_pool_init -- a pool for layout l (at most TU_POOL_TENSORS tensors),
 * every byte `fill`, odd tensors' rows odd_stride bytes apart (0: their
 * bytes per token), the block table shuffled by seed. Free with
 * tu_pool_free. */
void tu_pool_init(tu_pool *p, const tu_layout *l, uint32_t block_tokens, uint32_t n_blocks,
                  size_t odd_stride, uint64_t seed, uint8_t fill);
void tu_pool_free(tu_pool *p);

/* tu_pool_row -- position pos's row of tensor t. */
uint8_t *tu_pool_row(const tu_pool *p, uint32_t t, size_t pos);

/* tu_pool_compute -- the engine computed positions [from, n) of tokens:
 * their synthetic state goes to its rows. */
void tu_pool_compute(tu_pool *p, const uint32_t *tokens, size_t from, size_t n);

/* tu_pool_expect -- positions [from, from + n) of tensors [t0, t0 + nt)
 * hold the state of tokens; every other row of those tensors in
 * [0, limit) still holds byte fill (when fill >= 0). Fails the test
 * otherwise. */
void tu_pool_expect(const tu_pool *p, const uint32_t *tokens, size_t from, size_t n, uint32_t t0,
                    uint32_t nt, int fill, size_t limit);

/* tu_pool_scribble -- rows [0, n) of every tensor overwritten with
 * garbage (the engine reused them). */
void tu_pool_scribble(tu_pool *p, size_t n);

#endif /* SB_TU_POOL_H */
