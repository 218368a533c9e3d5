/* tu_pool.c -- the scatter/gather tests' paged pool (tu_pool.h). */
#include "tu_pool.h"

#include <stdlib.h>
#include <string.h>

void tu_pool_init(tu_pool *p, const tu_layout *l, uint32_t block_tokens, uint32_t n_blocks,
                  size_t odd_stride, uint64_t seed, uint8_t fill)
{
    assert_true(l->n_tensors <= TU_POOL_TENSORS);
    memset(p, 0, sizeof *p);
    p->l = l;
    p->block_tokens = block_tokens;
    p->n_blocks = n_blocks;
    p->table = malloc(n_blocks * sizeof *p->table);
    assert_non_null(p->table);
    for (uint32_t i = 0; i < n_blocks; i++)
        p->table[i] = i;
    for (uint32_t i = n_blocks - 1; i > 0; i--) {
        uint32_t j = (uint32_t)(tu_rand(&seed) % (i + 1)), x = p->table[i];
        p->table[i] = p->table[j];
        p->table[j] = x;
    }
    for (uint32_t t = 0; t < l->n_tensors; t++) {
        bool padded = t % 2 && odd_stride;
        p->stride[t] = padded ? odd_stride : l->bpt[t];
        size_t bytes = (size_t)n_blocks * block_tokens * p->stride[t];
        p->pool[t] = malloc(bytes);
        assert_non_null(p->pool[t]);
        memset(p->pool[t], fill, bytes);
        p->bt[t] = (sb_block_table){ .base = p->pool[t], .block_ids = p->table,
                                     .block_tokens = block_tokens,
                                     .block_stride = block_tokens * p->stride[t],
                                     .token_stride = padded ? odd_stride : 0 };
    }
}

void tu_pool_free(tu_pool *p)
{
    for (uint32_t t = 0; t < p->l->n_tensors; t++)
        free(p->pool[t]);
    free(p->table);
}

uint8_t *tu_pool_row(const tu_pool *p, uint32_t t, size_t pos)
{
    size_t bt = p->block_tokens;
    return p->pool[t] + ((size_t)p->table[pos / bt] * bt + pos % bt) * p->stride[t];
}

void tu_pool_compute(tu_pool *p, const uint32_t *tokens, size_t from, size_t n)
{
    void **st = tu_state(p->l, tokens, n);
    for (uint32_t t = 0; t < p->l->n_tensors; t++)
        for (size_t pos = from; pos < n; pos++)
            memcpy(tu_pool_row(p, t, pos), (uint8_t *)st[t] + pos * p->l->bpt[t], p->l->bpt[t]);
    tu_free_state(p->l, st);
}

void tu_pool_expect(const tu_pool *p, const uint32_t *tokens, size_t from, size_t n, uint32_t t0,
                    uint32_t nt, int fill, size_t limit)
{
    void **st = tu_state(p->l, tokens, from + n);
    for (uint32_t t = t0; t < t0 + nt; t++) {
        uint32_t b = p->l->bpt[t];
        uint8_t *blank = malloc(b);
        memset(blank, fill, b);
        for (size_t pos = 0; pos < limit; pos++) {
            if (pos >= from && pos < from + n)
                assert_memory_equal(tu_pool_row(p, t, pos), (uint8_t *)st[t] + pos * b, b);
            else if (fill >= 0)
                assert_memory_equal(tu_pool_row(p, t, pos), blank, b);
        }
        free(blank);
    }
    tu_free_state(p->l, st);
}

void tu_pool_scribble(tu_pool *p, size_t n)
{
    for (uint32_t t = 0; t < p->l->n_tensors; t++)
        for (size_t pos = 0; pos < n; pos++)
            memset(tu_pool_row(p, t, pos), 0xC3, p->l->bpt[t]);
}
