/* heap.h -- a binary heap over a caller's array, for any element type: the
 * priority queue of candidate merges that both BPE encoders keep.
 *
 * SB_RT_HEAP(name, type, before) defines
 *   void name##_push(type *h, size_t *n, type x, const void *ctx)
 *       put x in h[0, *n) (which has room for one more), *n + 1;
 *   type name##_pop(type *h, size_t *n, const void *ctx)
 *       take out the first (*n > 0), *n - 1;
 * where before(const type *a, const type *b, const void *ctx) is true when
 * a must come out before b (a strict order; ctx is passed through).
 *
 * Thread safety: the functions touch only their arguments.
 */
#ifndef SB_RT_HEAP_H
#define SB_RT_HEAP_H

#include <stddef.h>

#define SB_RT_HEAP(name, type, before)                                                        \
    static inline void name##_push(type *h, size_t *n, type x, const void *ctx)              \
    {                                                                                         \
        size_t i = (*n)++;                                                                    \
        while (i && before(&x, &h[(i - 1) / 2], ctx)) {                                      \
            h[i] = h[(i - 1) / 2];                                                            \
            i = (i - 1) / 2;                                                                  \
        }                                                                                     \
        h[i] = x;                                                                             \
    }                                                                                         \
    static inline type name##_pop(type *h, size_t *n, const void *ctx)                       \
    {                                                                                         \
        type top = h[0], last = h[--*n];                                                      \
        size_t i = 0;                                                                         \
        for (;;) {                                                                            \
            size_t l = 2 * i + 1, m = l;                                                      \
            if (l >= *n)                                                                      \
                break;                                                                        \
            if (l + 1 < *n && before(&h[l + 1], &h[l], ctx))                                  \
                m = l + 1;                                                                    \
            if (!before(&h[m], &last, ctx))                                                   \
                break;                                                                        \
            h[i] = h[m];                                                                      \
            i = m;                                                                            \
        }                                                                                     \
        if (*n)                                                                               \
            h[i] = last;                                                                      \
        return top;                                                                           \
    }

#endif /* SB_RT_HEAP_H */
