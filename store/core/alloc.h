/* alloc.h -- every allocation of a store: heap objects and the page pool.
 *
 * One wrapper for all allocations so tests can fail the Nth one
 * (sb_config.fault_alloc_nth, sb_store_fault_alloc). Pages and point states
 * come from a dedicated jemalloc arena (4 KiB aligned, no thread cache) so
 * their memory is accounted apart from the process heap; builds without
 * jemalloc (sanitizer builds, where the sanitizers must see every byte) use
 * posix_memalign instead.
 *
 * Thread safety: every function may be called from any thread; the fault
 * counter is atomic and the arena is jemalloc's (internally locked).
 */
#ifndef SB_ALLOC_H
#define SB_ALLOC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sb_mem {
    atomic_uint_fast64_t fault_countdown; /* 0: disarmed; 1: next alloc fails */
    unsigned arena;                       /* jemalloc arena index */
    bool have_arena;                      /* arena created */
} sb_mem;

/* sb_mem_init -- set up the allocator; fault_nth as in sb_config.
 * Returns: 0; SB_ERR_NOMEM when the arena cannot be created. */
int sb_mem_init(sb_mem *mem, uint64_t fault_nth);

/* sb_mem_fini -- release the arena. Every pool block must be freed first. */
void sb_mem_fini(sb_mem *mem);

/* sb_mem_arm -- fail the nth allocation from now (0 disarms). */
void sb_mem_arm(sb_mem *mem, uint64_t nth);

/* Heap allocations. NULL on failure (real or injected). sb_free(NULL) is a
 * no-op. sb_realloc leaves p untouched on failure. */
void *sb_malloc(sb_mem *mem, size_t n);
void *sb_calloc(sb_mem *mem, size_t count, size_t size);
void *sb_realloc(sb_mem *mem, void *p, size_t n);
void sb_free(void *p);

/* Pool allocations: 4096-aligned (pages) or 64-aligned (align 64).
 * NULL on failure. */
void *sb_pool_alloc(sb_mem *mem, size_t n, size_t align);
void sb_pool_free(sb_mem *mem, void *p, size_t n);

/* sb_pool_resident -- resident bytes of the arena per the allocator's stats,
 * 0 when unknown. */
uint64_t sb_pool_resident(sb_mem *mem);

#endif /* SB_ALLOC_H */
