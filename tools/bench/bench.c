/* bench.c -- `snapbank bench JOBFILE...`: fio-style wear and throughput
 * jobs against the store, with fio's own figures beside them.
 *
 * Reads every job file first (a bad one stops the run before anything is
 * written), then runs the jobs in order: each on a fresh store in its
 * directory, then, for write and read jobs, fio on the same directory with
 * the same block size (a page record), queue depth and size. Prints the
 * results as fio does (--output-format), a progress line on a terminal,
 * and with --csv DIR the series behind the plots. Exit status: 0 every job
 * ran; 1 a job failed (a store call, a wrong restore, fio); 2 usage or a
 * bad job file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_job.h"
#include "bench_out.h"
#include "bench_plot.h"
#include "bench_run.h"
#include "bench_tool.h"

static void bench_usage(FILE *f)
{
    fprintf(f,
            "usage: snapbank bench [options] JOBFILE...\n\n"
            "Runs fio-style job files against the store: spill, restore, mixed and\n"
            "chat workloads, optionally on a time-warped store clock to play a day of\n"
            "write budget in seconds. Each job gets a fresh store in its directory;\n"
            "write and read jobs are followed by fio on the same directory, block size,\n"
            "queue depth and size (io_uring, direct), and the snapbank/fio ratio.\n"
            "bench/jobs/ has examples; 'snapbank bench --keys' lists every key.\n\n"
            "options:\n"
            "  --output-format F   normal (default), json or terse\n"
            "  --output FILE       write the results there instead of stdout\n"
            "  --csv DIR           write each job's series: JOB.csv (per second),\n"
            "                      JOB_hours.csv (per store-clock hour against the\n"
            "                      budget), JOB_clat.csv (latency percentiles)\n"
            "  --plots DIR         the series and PNGs drawn from them with gnuplot:\n"
            "                      JOB_budget.png, JOB_throughput.png, JOB_clat.png\n"
            "                      (and JOB.gp, the script)\n"
            "  --no-fio            skip the fio baselines\n"
            "  --keys              list the job file keys and exit\n\n"
            "terse fields: %s\n\n"
            "exit status: 0 every job ran, 1 a job failed, 2 usage or a bad job file.\n",
            BO_TERSE_FIELDS);
}

static void progress(const bj_job *j, double done, const br_result *r, void *ctx)
{
    (void)ctx;
    fprintf(stderr, "\r%s: %5.1f%% done, %.0f MiB put, %.0f MiB restored, %.0f MiB to the "
                    "device, %.1f s   ",
            j->name, done * 100, (double)r->live_put / 1048576.0,
            (double)r->live_restored / 1048576.0, (double)r->stats.disk_write_bytes / 1048576.0,
            r->secs);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median and range of the loops' snapbank/fio ratios into r. */
static void summarize(double *x, unsigned n, br_result *r)
{
    qsort(x, n, sizeof *x, cmp_double);
    r->ratio_median = n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
    r->ratio_min = x[0];
    r->ratio_max = x[n - 1];
}

int sb_bench_tool_main(int argc, char **argv)
{
    bo_format fmt = BO_NORMAL;
    const char *out_path = NULL, *csv = NULL, *plots = NULL;
    bool no_fio = false;
    int first_file = argc;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            bench_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--keys")) {
            bj_keys(stdout);
            return 0;
        } else if (!strncmp(a, "--output-format", 15)) {
            const char *f = a[15] == '=' ? a + 16 : (i++, v);
            if (!f || (strcmp(f, "normal") && strcmp(f, "json") && strcmp(f, "terse"))) {
                fprintf(stderr, "snapbank bench: --output-format: normal, json or terse\n");
                return 2;
            }
            fmt = !strcmp(f, "json") ? BO_JSON : !strcmp(f, "terse") ? BO_TERSE : BO_NORMAL;
        } else if (!strcmp(a, "--output") && v) {
            out_path = v, i++;
        } else if (!strcmp(a, "--csv") && v) {
            csv = v, i++;
        } else if (!strcmp(a, "--plots") && v) {
            plots = v, i++;
        } else if (!strcmp(a, "--no-fio")) {
            no_fio = true;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "snapbank bench: unknown option '%s'\n\n", a);
            bench_usage(stderr);
            return 2;
        } else {
            first_file = i;
            break;
        }
    }
    if (first_file >= argc) {
        bench_usage(stderr);
        return 2;
    }
    /* Every file is read before anything runs. */
    size_t n_files = (size_t)(argc - first_file), total = 0;
    bj_job **jobs = calloc(n_files, sizeof *jobs);
    size_t *counts = calloc(n_files, sizeof *counts);
    int rc = jobs && counts ? 0 : 2;
    for (size_t k = 0; rc == 0 && k < n_files; k++) {
        if (argv[first_file + (int)k][0] == '-') {
            fprintf(stderr, "snapbank bench: options go before the job files ('%s')\n",
                    argv[first_file + (int)k]);
            rc = 2;
        } else if (bj_load(argv[first_file + (int)k], &jobs[k], &counts[k]) != 0) {
            rc = 2;
        } else {
            total += counts[k];
        }
    }
    const char *dirs[2] = { csv, plots }, *opt[2] = { "--csv", "--plots" };
    for (int k = 0; k < 2; k++) {
        struct stat sst;
        if (rc == 0 && dirs[k] && (stat(dirs[k], &sst) != 0 || !S_ISDIR(sst.st_mode))) {
            fprintf(stderr, "snapbank bench: %s %s: not a directory\n", opt[k], dirs[k]);
            rc = 2;
        }
    }
    FILE *out = stdout;
    if (rc == 0 && out_path && !(out = fopen(out_path, "w"))) {
        fprintf(stderr, "snapbank bench: --output %s: cannot write it\n", out_path);
        rc = 2;
    }
    if (rc == 0) {
        bool tty = isatty(STDERR_FILENO);
        bo_begin(out, fmt);
        size_t done = 0;
        for (size_t k = 0; k < n_files; k++)
            for (size_t i = 0; i < counts[k]; i++) {
                bj_job *j = &jobs[k][i];
                if (no_fio)
                    j->fio = false;
                double ratios[100];
                unsigned n_ratios = 0;
                for (unsigned loop = 1; loop <= j->loops; loop++) {
                    br_result r;
                    int jr = br_run(j, &r, tty ? progress : NULL, NULL);
                    if (tty)
                        fprintf(stderr, "\r%*s\r", 100, "");
                    if (jr == 0 && br_fio(j, &r) < 0)
                        jr = -1;
                    r.loop = loop;
                    r.loops = (unsigned)j->loops;
                    double x = bo_ratio(&r);
                    if (x > 0)
                        ratios[n_ratios++] = x;
                    r.ratio_median = r.ratio_min = r.ratio_max = -1;
                    if (loop == j->loops && n_ratios)
                        summarize(ratios, n_ratios, &r);
                    bo_job(out, fmt, j, &r, done == 0);
                    if (jr == 0 && csv && bo_csv(csv, j, &r) != 0)
                        jr = -1;
                    if (jr == 0 && plots && bp_plots(plots, j, &r) != 0)
                        jr = -1;
                    if (jr != 0)
                        rc = 1;
                    br_free(&r);
                    done++;
                }
            }
        bo_end(out, fmt);
        (void)total;
        if (out != stdout && fclose(out) != 0) {
            fprintf(stderr, "snapbank bench: --output %s: write failed\n", out_path);
            rc = 1;
        }
    }
    for (size_t k = 0; jobs && k < n_files; k++)
        free(jobs[k]);
    free(jobs);
    free(counts);
    return rc;
}
