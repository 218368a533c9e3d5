/* bench_lat.h -- the latency recorder of `snapbank bench`: the clock
 * latencies are measured on, and a growing array of them with percentiles.
 * The job runner (bench_run.c) records its operations' latencies with it,
 * the decoding thread (bench_decode.c) its steps', and the output
 * (bench_out.c) reads percentiles.
 *
 * Thread safety: a bl_lat belongs to one thread at a time.
 */
#ifndef SB_BENCH_LAT_H
#define SB_BENCH_LAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Latencies, ns. Zeroed is empty; free ns when done. */
typedef struct bl_lat {
    uint64_t *ns;
    size_t n, cap;
    bool sorted;
} bl_lat;

/* bl_now_ns -- CLOCK_MONOTONIC, ns: what latencies are measured on. */
uint64_t bl_now_ns(void);

/* bl_add -- one more latency (lost, not fatal, when out of memory). */
void bl_add(bl_lat *lat, uint64_t ns);

/* bl_percentile -- the p-th percentile (0-100) of lat, ns (0 when empty;
 * sorts lat). */
uint64_t bl_percentile(bl_lat *lat, double p);

#endif /* SB_BENCH_LAT_H */
