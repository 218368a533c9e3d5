/* bench_run.h -- run one `snapbank bench` job against a store and collect
 * what fio would report (bandwidth, operations, completion latencies) plus
 * the wear figures of the disk tier.
 *
 * An operation is one snapshot put (write side) or one restore of a stored
 * snapshot (read side); its latency is the call's wall time. Bandwidth
 * counts state bytes (what the caller handed over or got back); device
 * bytes are in the wear figures. Every restore is checked (a stamp per
 * token slice): a wrong byte fails the job.
 */
#ifndef SB_BENCH_RUN_H
#define SB_BENCH_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "bench_job.h"
#include "bench_lat.h"
#include "snapbank.h"

/* One point of the per-second series (real seconds). */
typedef struct br_sample {
    double t;                  /* real seconds since the job started */
    double sim_h;              /* store clock, hours since the start */
    uint64_t host_bytes;       /* device bytes written so far */
    uint64_t write_bytes;      /* state bytes put so far */
    uint64_t read_bytes;       /* state bytes restored so far */
} br_sample;

typedef struct br_side {
    uint64_t bytes, ops;
    bl_lat lat;
} br_side;

/* What the disk tier made of the job's puts, from each put's outcome
 * (sb_ns_put_ex): the puts that got a ticket (a disk tier), how their
 * state stood when the put returned, and their blocks (pages, point
 * states) summed. */
typedef struct br_durability {
    uint64_t puts;             /* puts with a ticket */
    uint64_t durable;          /* ...written and synced when it returned */
    uint64_t pending;          /* ...not yet: synced later */
    uint64_t never;            /* ...never durable: a block denied or failed */
    uint64_t queued, written, deferred, dirty, denied; /* blocks */
} br_durability;

/* br_durability_add -- count one put's outcome into d. */
void br_durability_add(br_durability *d, const sb_write_outcome *oc);

typedef struct br_result {
    double secs;               /* the timed part, real seconds */
    double sim_hours;          /* store-clock hours it spanned */
    br_side write, read;
    br_durability dur;         /* the puts' outcomes */
    sb_stats stats;            /* at the end */
    uint64_t *hour_bytes;      /* device bytes per store-clock hour */
    double *hour_demand;       /* state bytes offered per hour (chat) */
    size_t n_hours;
    uint64_t live_put, live_restored; /* while it runs: state bytes so far */
    br_sample *series;
    size_t n_series, series_cap;
    double fio_write, fio_read;/* fio's bandwidth, bytes/s; < 0: not run */
    double fio_write_iops, fio_read_iops;
    double decode_alone, decode_during; /* tokens/s; 0: no decode */
    unsigned loop, loops;      /* which run of the job this is (from 1), of how many */
    double ratio_median, ratio_min, ratio_max; /* the last loop: over every
                                  loop's snapbank/fio; < 0 when not run */
    bl_lat decode_lat;         /* decode step latencies during the job */
    char fio_cmd[2][4096];     /* the commands run */
} br_result;

/* br_progress -- called about every 0.5 s while a job runs: done in
 * [0, 1], and the result so far. */
typedef void (*br_progress)(const bj_job *j, double done, const br_result *r, void *ctx);

/* br_run -- run job j (its store in a fresh directory under j->directory,
 * removed after). Returns 0, or -1 after printing what failed (a store
 * call, a wrong restore) to stderr. r is filled either way; free it with
 * br_free. */
int br_run(const bj_job *j, br_result *r, br_progress progress, void *ctx);

/* br_fio -- the fio baseline of a write or read job (fio on PATH): fills
 * r->fio_*. Returns 0, 1 when fio is not installed or the job has no
 * baseline, -1 when fio failed (printed). */
int br_fio(const bj_job *j, br_result *r);

void br_free(br_result *r);


#endif /* SB_BENCH_RUN_H */
