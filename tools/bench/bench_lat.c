/* bench_lat.c -- the latency recorder (bench_lat.h). */
#define _GNU_SOURCE
#include "bench_lat.h"

#include <math.h>
#include <stdlib.h>
#include <time.h>

uint64_t bl_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void bl_add(bl_lat *l, uint64_t ns)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 1024;
        uint64_t *p = realloc(l->ns, cap * sizeof *p);
        if (!p)
            return; /* a latency lost, not the run */
        l->ns = p;
        l->cap = cap;
    }
    l->ns[l->n++] = ns;
    l->sorted = false;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

uint64_t bl_percentile(bl_lat *lat, double p)
{
    if (!lat->n)
        return 0;
    if (!lat->sorted)
        qsort(lat->ns, lat->n, sizeof *lat->ns, cmp_u64);
    lat->sorted = true;
    size_t i = (size_t)ceil(p / 100.0 * (double)lat->n);
    return lat->ns[i ? i - 1 : 0];
}
