/* bench_plot.h -- `snapbank bench --plots DIR`: each job's CSV series
 * (bench_out.h's bo_csv) and, with gnuplot on PATH, PNGs drawn from them:
 *   JOB_budget.png      device bytes per store-clock hour against the
 *                       write budget line (and the demand, for a chat
 *                       under time_warp);
 *   JOB_throughput.png  MiB/s put, restored and written to the device,
 *                       per second of the run;
 *   JOB_clat.png        the completion-latency CDF of both sides.
 * The gnuplot script is left beside them (JOB.gp) to redraw or restyle.
 */
#ifndef SB_BENCH_PLOT_H
#define SB_BENCH_PLOT_H

#include "bench_job.h"
#include "bench_run.h"

/* bp_plots -- write the CSVs, JOB.gp, and run gnuplot on it when installed
 * (else say so once on stderr). Returns 0, or -1 after printing which file
 * could not be written or that gnuplot failed. */
int bp_plots(const char *dir, const bj_job *j, br_result *r);

#endif /* SB_BENCH_PLOT_H */
