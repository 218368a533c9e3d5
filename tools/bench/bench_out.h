/* bench_out.h -- `snapbank bench` results as fio prints them: normal (a
 * block per job), json (fio's field names where they mean the same thing,
 * plus a "wear" object) and terse (one line of ';'-separated fields per
 * job); and the per-second and per-hour series as CSV files.
 */
#ifndef SB_BENCH_OUT_H
#define SB_BENCH_OUT_H

#include <stdio.h>

#include "bench_job.h"
#include "bench_run.h"

typedef enum bo_format { BO_NORMAL, BO_JSON, BO_TERSE } bo_format;

/* The terse line's fields, in order (printed by --help). */
#define BO_TERSE_FIELDS                                                                    \
    "snapbank;1;jobname;rw;write_bytes;write_bw_bytes;write_iops;write_clat_p50_ns;"     \
    "write_clat_p99_ns;read_bytes;read_bw_bytes;read_iops;read_clat_p50_ns;"             \
    "read_clat_p99_ns;host_bytes_written;logical_bytes;write_amplification;"             \
    "drive_writes_per_day;fio_write_bw_bytes;fio_read_bw_bytes (-1: not run)"

/* bo_begin / bo_job / bo_end -- print the results of a run of jobs to f:
 * begin once, each job's result, end once (JSON needs the brackets). */
void bo_begin(FILE *f, bo_format fmt);
void bo_job(FILE *f, bo_format fmt, const bj_job *j, br_result *r, bool first);
void bo_end(FILE *f, bo_format fmt);

/* bo_ratio -- snapbank's device bytes per second over fio's for the side
 * fio ran (write or read); -1 when fio did not run. */
double bo_ratio(const br_result *r);

/* bo_csv -- write dir/JOB.csv (per second: t_s, sim_h, host_bytes,
 * write_bytes, read_bytes), dir/JOB_hours.csv (per store-clock hour:
 * host_bytes, budget_bytes, demand_bytes) and dir/JOB_clat.csv (the
 * latency CDF: percentile, write_ns, read_ns). Returns 0, or -1 after
 * printing which file could not be written. */
int bo_csv(const char *dir, const bj_job *j, br_result *r);

#endif /* SB_BENCH_OUT_H */
