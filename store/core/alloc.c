/* alloc.c -- the allocation wrapper with its fault hook. */
#include "alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snapbank.h"

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
    return SB_OK;
}

void sb_mem_fini(sb_mem *mem)
{
    (void)mem;
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
