/* hash_avx512.c -- XXH3-64 built for AVX-512 (this file is compiled with
 * -mavx512f -mavx512bw; hash.c calls it only on CPUs that have both). */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "hash.h"

uint64_t sb_hash_avx512(const void *p, size_t n)
{
    return XXH3_64bits(p, n);
}
