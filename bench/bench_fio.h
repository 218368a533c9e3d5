/* bench_fio.h -- running fio beside a benchmark and reading its terse
 * output: what bench_disk and bench_session compare snapbank with.
 * Header-only (static functions); define BENCH_NAME (the program's name,
 * for its messages) before including it.
 *
 * fio's terse version 3 output is one line of ';'-separated fields; the
 * ones read here (1-based):
 *
 *   FIELD  MEANING
 *   6      read: I/O, KiB          47  write: I/O, KiB
 *   7      read: bandwidth, KiB/s  48  write: bandwidth, KiB/s
 *   9      read: runtime, ms       50  write: runtime, ms
 *   88     user CPU, % of the job's runtime
 *   89     system CPU, % of the job's runtime
 */
#ifndef SB_BENCH_FIO_H
#define SB_BENCH_FIO_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef BENCH_NAME
#error "define BENCH_NAME (the program's name, for its messages) first"
#endif

/* What one fio job measured. */
typedef struct bench_fio {
    double mib_s;              /* bandwidth, MiB/s */
    double runtime_s;          /* the job's runtime (all its loops) */
    double io_mib;             /* bytes moved, MiB */
    double cpu_s;              /* user + system CPU of the job */
} bench_fio;

/* Field n (1-based) of a terse line, or NULL. */
static inline const char *bench_fio_field(const char *line, int n)
{
    const char *p = line;
    for (int i = 1; p && i < n; i++)
        p = strchr(p, ';') ? strchr(p, ';') + 1 : NULL;
    return p;
}

/* Run `fio JOB --output-format=terse --terse-version=3` (JOB: the job's
 * options, quoted for sh), printing the command first; write: the job
 * writes (its fields are the write ones). Returns true with *out filled,
 * false when fio failed or printed no terse line (a message says so). */
static inline bool bench_fio_run(const char *job, bool write, bench_fio *out)
{
    char cmd[16384], line[16384];
    if ((size_t)snprintf(cmd, sizeof cmd, "fio %s --output-format=terse --terse-version=3",
                         job) >= sizeof cmd) {
        fprintf(stderr, BENCH_NAME ": fio job too long\n");
        return false;
    }
    printf("fio command: %s\n", cmd);
    fflush(stdout);
    FILE *f = popen(cmd, "r");
    const char *p = f && fgets(line, sizeof line, f) && !strncmp(line, "3;", 2) ? line : NULL;
    int base = write ? 47 : 6;
    const char *io = p ? bench_fio_field(p, base) : NULL;
    const char *bw = p ? bench_fio_field(p, base + 1) : NULL;
    const char *ms = p ? bench_fio_field(p, base + 3) : NULL;
    const char *usr = p ? bench_fio_field(p, 88) : NULL, *sys = p ? bench_fio_field(p, 89) : NULL;
    int status = f ? pclose(f) : -1;
    if (status != 0 || !io || !bw || !ms || !usr || !sys || strtod(bw, NULL) <= 0) {
        fprintf(stderr, BENCH_NAME ": fio failed (status %d) or gave no bandwidth\n", status);
        return false;
    }
    out->runtime_s = strtod(ms, NULL) / 1e3;
    out->mib_s = strtod(bw, NULL) / 1024;
    out->io_mib = strtod(io, NULL) / 1024;
    out->cpu_s = (strtod(usr, NULL) + strtod(sys, NULL)) / 100 * out->runtime_s;
    return true;
}

#endif /* SB_BENCH_FIO_H */
