/* hash_avx2.c -- XXH3-64 built for AVX2 (this file is compiled with -mavx2;
 * hash.c calls it only on CPUs that have AVX2). */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "hash.h"

uint64_t sb_hash_avx2(const void *p, size_t n)
{
    return XXH3_64bits(p, n);
}
