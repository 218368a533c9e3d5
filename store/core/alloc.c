/* alloc.c -- the allocation wrapper with its fault hook, and the page pool. */
#include "alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snapbank.h"

#ifdef SB_HAVE_JEMALLOC
#include <jemalloc/jemalloc.h>
#endif

/* Step the fault countdown; true when this allocation must fail. */
static bool fault_fires(sb_mem *mem)
{
    uint_fast64_t v = atomic_load_explicit(&mem->fault_countdown, memory_order_relaxed);
    while (v != 0) {
        if (atomic_compare_exchange_weak(&mem->fault_countdown, &v, v - 1))
            return v == 1;
    }
    return false;
}

int sb_mem_init(sb_mem *mem, uint64_t fault_nth)
{
    memset(mem, 0, sizeof *mem);
    atomic_init(&mem->fault_countdown, fault_nth);
    if (fault_fires(mem))
        return SB_ERR_NOMEM;
#ifdef SB_HAVE_JEMALLOC
    size_t sz = sizeof mem->arena;
    if (mallctl("arenas.create", &mem->arena, &sz, NULL, 0) != 0)
        return SB_ERR_NOMEM;
    mem->have_arena = true;
#endif
    return SB_OK;
}

void sb_mem_fini(sb_mem *mem)
{
#ifdef SB_HAVE_JEMALLOC
    if (mem->have_arena) {
        char name[64];
        snprintf(name, sizeof name, "arena.%u.destroy", mem->arena);
        (void)mallctl(name, NULL, NULL, NULL, 0);
        mem->have_arena = false;
    }
#else
    (void)mem;
#endif
}

void sb_mem_arm(sb_mem *mem, uint64_t nth)
{
    atomic_store(&mem->fault_countdown, nth);
}

void *sb_malloc(sb_mem *mem, size_t n)
{
    if (fault_fires(mem))
        return NULL;
    return malloc(n ? n : 1);
}

void *sb_calloc(sb_mem *mem, size_t count, size_t size)
{
    if (fault_fires(mem))
        return NULL;
    return calloc(count ? count : 1, size ? size : 1);
}

void *sb_realloc(sb_mem *mem, void *p, size_t n)
{
    if (fault_fires(mem))
        return NULL;
    return realloc(p, n ? n : 1);
}

void sb_free(void *p)
{
    free(p);
}

void *sb_pool_alloc(sb_mem *mem, size_t n, size_t align)
{
    if (fault_fires(mem))
        return NULL;
#ifdef SB_HAVE_JEMALLOC
    return mallocx(n, MALLOCX_ARENA(mem->arena) | MALLOCX_ALIGN(align) |
                          MALLOCX_TCACHE_NONE);
#else
    void *p = NULL;
    if (posix_memalign(&p, align, n) != 0)
        return NULL;
    return p;
#endif
}

void sb_pool_free(sb_mem *mem, void *p, size_t n)
{
    if (!p)
        return;
#ifdef SB_HAVE_JEMALLOC
    sdallocx(p, n, MALLOCX_ARENA(mem->arena) | MALLOCX_TCACHE_NONE);
#else
    (void)mem;
    (void)n;
    free(p);
#endif
}

uint64_t sb_pool_resident(sb_mem *mem)
{
#ifdef SB_HAVE_JEMALLOC
    if (!mem->have_arena)
        return 0;
    uint64_t epoch = 1;
    size_t sz = sizeof epoch;
    (void)mallctl("epoch", &epoch, &sz, &epoch, sz);
    char name[96];
    size_t pactive = 0, page = 0;
    sz = sizeof pactive;
    snprintf(name, sizeof name, "stats.arenas.%u.pactive", mem->arena);
    if (mallctl(name, &pactive, &sz, NULL, 0) != 0)
        return 0;
    sz = sizeof page;
    if (mallctl("arenas.page", &page, &sz, NULL, 0) != 0)
        return 0;
    return (uint64_t)pactive * page;
#else
    (void)mem;
    return 0;
#endif
}
