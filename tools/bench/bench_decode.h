/* bench_decode.h -- a `snapbank bench` job's decoding foreground: the CPU
 * runtime decodes greedily, one token per forward pass, with its KV cache
 * in the job's store (a namespace of its own), while the job's workload
 * runs; each step is marked foreground (sb_store_foreground) when the job
 * says so, as an engine would. Its tokens per second alone (measured
 * first, on the same store) and during the workload say what the
 * workload costs the foreground.
 */
#ifndef SB_BENCH_DECODE_H
#define SB_BENCH_DECODE_H

#include <stdbool.h>
#include <stdint.h>

#include "bench_job.h"
#include "bench_lat.h"
#include "snapbank.h"

typedef struct bd_decode bd_decode;

/* bd_open -- make the job's decode model (preset j->decode) in
 * j->directory, load it, and set up a context on threads runtime threads.
 * Returns NULL after printing why. */
bd_decode *bd_open(const bj_job *j);

/* bd_alone -- decode for secs seconds on store st with nothing else
 * running; returns tokens per second (0 on failure, printed). */
double bd_alone(bd_decode *d, sb_store *st, double secs);

/* bd_start / bd_stop -- decode on st in a thread of its own from start to
 * stop, every step's latency into lat. stop returns tokens per second, 0
 * on failure (printed). */
int bd_start(bd_decode *d, sb_store *st, bl_lat *lat);
double bd_stop(bd_decode *d);

void bd_close(bd_decode *d);

#endif /* SB_BENCH_DECODE_H */
