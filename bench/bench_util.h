/* bench_util.h -- the small helpers every benchmark program uses: a
 * monotonic clock, a failed call's exit, a 64-bit mixer for generated
 * tokens and state, the load average. Header-only (static functions); define BENCH_NAME to
 * the program's name before including it. */
#ifndef SB_BENCH_UTIL_H
#define SB_BENCH_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "snapbank.h"

#ifndef BENCH_NAME
#error "define BENCH_NAME (the program's name, for its messages) first"
#endif

/* Seconds on CLOCK_MONOTONIC. */
static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Exit 1 with "BENCH_NAME: what: error" unless rc is SB_OK. */
static inline void check(int rc, const char *what)
{
    if (rc != SB_OK) {
        fprintf(stderr, BENCH_NAME ": %s: %s\n", what, sb_strerror(rc));
        exit(1);
    }
}

/* splitmix64's finalizer: a well-spread 64-bit function of x. */
static inline uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* The 1-minute load average, or -1: other work on the machine is noise. */
static inline double load_average(void)
{
    double v = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

#endif /* SB_BENCH_UTIL_H */
