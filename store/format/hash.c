/* hash.c -- XXH3-64 of large buffers: pick the widest path the CPU runs
 * (see hash.h). This file is the baseline build (SSE2 on x86-64), inlined
 * from xxhash.h so it is not bound to how the shared library was built. */
#define XXH_INLINE_ALL
#include <stdatomic.h>
#include <xxhash.h>

#include "hash.h"

typedef uint64_t (*hash_fn)(const void *, size_t);

static uint64_t hash_base(const void *p, size_t n)
{
    return XXH3_64bits(p, n);
}

static hash_fn pick(void)
{
#if defined(__x86_64__) && defined(__GNUC__) && defined(SB_HASH_X86)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw"))
        return sb_hash_avx512;
    if (__builtin_cpu_supports("avx2"))
        return sb_hash_avx2;
#endif
    return hash_base;
}

uint64_t sb_hash_big(const void *p, size_t n)
{
    static _Atomic(hash_fn) fn; /* a benign race: every thread picks the same */
    hash_fn f = atomic_load_explicit(&fn, memory_order_relaxed);
    if (!f) {
        f = pick();
        atomic_store_explicit(&fn, f, memory_order_relaxed);
    }
    return f(p, n);
}
