/* bench_plot.c -- gnuplot PNGs of a bench job's series (bench_plot.h). */
#include "bench_plot.h"

#include <stdio.h>
#include <stdlib.h>

#include "bench_out.h"

int bp_plots(const char *dir, const bj_job *j, br_result *r)
{
    if (bo_csv(dir, j, r) != 0)
        return -1;
    char gp[2048];
    snprintf(gp, sizeof gp, "%s/%s.gp", dir, j->name);
    FILE *f = fopen(gp, "w");
    if (!f) {
        fprintf(stderr, "snapbank bench: cannot write %s\n", gp);
        return -1;
    }
    const char *n = j->name;
    fprintf(f,
            "# %s.gp -- plots of snapbank bench job '%s' (gnuplot %s.gp in this directory)\n"
            "set datafile separator ','\n"
            "set terminal png size 960,540\n"
            "set key top right\n"
            "set grid\n\n",
            n, n, n);
    fprintf(f,
            "set output '%s_budget.png'\n"
            "set title 'job %s: device bytes per store-clock hour against the write budget'\n"
            "set xlabel 'store-clock hour'\n"
            "set ylabel 'MiB'\n"
            "set style fill solid 0.5\n"
            "set boxwidth 0.8\n"
            "plot '%s_hours.csv' skip 1 using 1:($2/1048576) with boxes title 'written', \\\n"
            "     '' skip 1 using 1:($3/1048576) with lines lw 2 title 'budget', \\\n"
            "     '' skip 1 using 1:($4/1048576) with linespoints title 'demand (chat)'\n\n",
            n, n, n);
    fprintf(f,
            "set output '%s_throughput.png'\n"
            "set title 'job %s: throughput per second'\n"
            "set xlabel 'seconds'\n"
            "set ylabel 'MiB/s'\n"
            "# the series is cumulative: each point is the change since the one before\n"
            "a=0; b=0; c=0; d=0; e=0; g=0\n"
            "plot '%s.csv' skip 1 using 1:(x=($4-b)/1048576/($1-a), a=$1, b=$4, x) with lines "
            "title 'state put', \\\n"
            "     '' skip 1 using 1:(x=($5-d)/1048576/($1-c), c=$1, d=$5, x) with lines "
            "title 'state restored', \\\n"
            "     '' skip 1 using 1:(x=($3-g)/1048576/($1-e), e=$1, g=$3, x) with lines "
            "title 'device writes'\n\n",
            n, n, n);
    fprintf(f,
            "set output '%s_clat.png'\n"
            "set title 'job %s: completion latency CDF'\n"
            "set xlabel 'latency (ms)'\n"
            "set ylabel 'percentile'\n"
            "set logscale x\n"
            "plot '%s_clat.csv' skip 1 using ($2/1e6):1 with lines title 'write (put)', \\\n"
            "     '' skip 1 using ($3/1e6):1 with lines title 'read (restore)'\n",
            n, n, n);
    if (fclose(f) != 0) {
        fprintf(stderr, "snapbank bench: cannot write %s\n", gp);
        return -1;
    }
    static int warned;
    if (system("command -v gnuplot > /dev/null 2>&1") != 0) {
        if (!warned++)
            fprintf(stderr, "snapbank bench: gnuplot is not installed: CSV and .gp files only "
                            "(scripts/setup.sh installs it)\n");
        return 0;
    }
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "cd '%s' && gnuplot '%s.gp' 2> '%s.gp.log'", dir, n, n);
    if (system(cmd) != 0) {
        fprintf(stderr, "snapbank bench: gnuplot failed on %s (see %s.log)\n", gp, gp);
        return -1;
    }
    return 0;
}
