/* alloc.h -- every heap allocation of a store, with a fault hook.
 *
 * One wrapper for all allocations so tests can fail the Nth one
 * (sb_config.fault_alloc_nth, sb_store_fault_alloc). The data of pages and
 * point states comes from the page pool (pool.h), whose chunk structures
 * are allocated here, so the hook reaches the pool too.
 *
 * Thread safety: every function may be called from any thread; the fault
 * counter is atomic.
 */
#ifndef SB_ALLOC_H
#define SB_ALLOC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sb_mem {
    atomic_uint_fast64_t fault_countdown; /* 0: disarmed; 1: next alloc fails */
} sb_mem;

/* sb_mem_init -- set up the allocator; fault_nth as in sb_config.
 * Returns: 0; SB_ERR_NOMEM (the fault hook fired). */
int sb_mem_init(sb_mem *mem, uint64_t fault_nth);

/* sb_mem_fini -- release the allocator. */
void sb_mem_fini(sb_mem *mem);

/* sb_mem_arm -- fail the nth allocation from now (0 disarms). */
void sb_mem_arm(sb_mem *mem, uint64_t nth);

/* Heap allocations. NULL on failure (real or injected). sb_free(NULL) is a
 * no-op. sb_realloc leaves p untouched on failure. */
void *sb_malloc(sb_mem *mem, size_t n);
void *sb_calloc(sb_mem *mem, size_t count, size_t size);
void *sb_realloc(sb_mem *mem, void *p, size_t n);
void sb_free(void *p);

#endif /* SB_ALLOC_H */
