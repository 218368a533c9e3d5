/* bench_job.h -- `snapbank bench` job files: fio-style INI read into job
 * descriptions.
 *
 * A job file is INI as fio writes it: `[global]` holds defaults, every
 * other `[name]` section is a job that starts from them; `key=value` lines
 * (spaces around `=` allowed), `#` and `;` start comments, a line of
 * `key` alone sets a flag key to 1. Sizes take k/m/g/t suffixes (powers of
 * 1024, as fio's defaults); durations s/m/h (seconds by default). Every key
 * is listed, with its default and meaning, by `snapbank bench --keys`
 * (bench_job_keys below); an unknown key, a bad value or a job without
 * what its workload needs is an error naming the file and line.
 */
#ifndef SB_BENCH_JOB_H
#define SB_BENCH_JOB_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define BJ_NAME_MAX 64
#define BJ_PATH_MAX 1024
#define BJ_SIZES_MAX 8      /* snapshot size distribution entries */
#define BJ_PHASES_MAX 16    /* demand phases of a budget day */

/* What a job does (key rw=). */
typedef enum bj_rw {
    BJ_WRITE = 0,   /* spill: put snapshots, each a new sequence */
    BJ_READ,        /* restore: put snapshots untimed, reopen, restore in order */
    BJ_RANDREAD,    /* ...restore in random order */
    BJ_RANDRW,      /* mixed: each operation restores a stored snapshot
                       (rwmixread percent) or puts a new one */
    BJ_CHAT,        /* multi-turn sessions sharing a system prompt */
} bj_rw;

/* One entry of a snapshot size distribution: bytes, and its weight. */
typedef struct bj_size {
    uint64_t bytes;
    uint32_t weight;
} bj_size;

/* A demand phase of a time-warped chat: a multiple of the write budget for
 * a number of simulated hours. */
typedef struct bj_phase {
    double level;
    double hours;
} bj_phase;

typedef struct bj_job {
    char name[BJ_NAME_MAX];
    char description[256];
    char directory[BJ_PATH_MAX];
    bj_rw rw;
    uint64_t segment_size, page_tokens, bytes_per_token;
    bj_size sizes[BJ_SIZES_MAX];     /* snapshot_size */
    unsigned n_sizes;
    uint64_t size;                   /* bytes of state to write (0: runtime) */
    double runtime_s;                /* seconds (simulated when time_warp) */
    uint64_t sessions, turns, tokens_per_turn, prompt_tokens;
    double shared_prefix;            /* fraction of prompt_tokens all sessions share */
    uint64_t rwmixread;              /* percent of randrw operations that restore */
    uint64_t iodepth, threads;
    uint64_t write_budget, burst;    /* bytes per hour; 0: the store's default */
    double time_warp;                /* simulated hours per real second; 0: real time */
    bj_phase phases[BJ_PHASES_MAX];  /* demand (chat under time_warp) */
    unsigned n_phases;
    int durability;                  /* sb_durability */
    uint64_t compression;            /* zstd level, 0 off */
    uint64_t ram, disk_cap, min_prefix, backlog;
    uint64_t drive_capacity;         /* bytes, for drive writes per day */
    bool fio;                        /* run the fio baseline (write and read jobs) */
    uint64_t loops;                  /* runs of the job, each with its fio run */
    char decode[16];                 /* decode with this model preset while the job
                                        runs ("tiny", "small"), "" none */
    uint64_t decode_threads;
    double decode_alone_s;           /* seconds of decoding alone, first */
    bool foreground;                 /* decode steps marked foreground */
    uint64_t seed;
    unsigned line;                   /* where its section starts */
} bj_job;

/* bj_load -- read job file path into *jobs (malloc'd, *n_jobs of them; the
 * caller frees *jobs). On an error prints "snapbank bench: FILE:LINE: ..."
 * to stderr and returns -1 (nothing allocated); 0 on success (a file with
 * no job section is an error). */
int bj_load(const char *path, bj_job **jobs, size_t *n_jobs);

/* bj_keys -- print every key: name, default, meaning. */
void bj_keys(FILE *f);

/* bj_durability_name -- "none", "periodic", "commit" for an sb_durability
 * ("?" out of range). */
const char *bj_durability_name(int durability);

/* bj_rw_name -- "write", "read", "randread", "randrw", "chat". */
const char *bj_rw_name(bj_rw rw);

#endif /* SB_BENCH_JOB_H */
