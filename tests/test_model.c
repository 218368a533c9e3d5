/* test_model.c -- the store against a model of its manual (apimodel.h):
 * random operations drawn from a seed, every answer checked, every
 * restored byte compared.
 *
 *   test_model [--seeds A-B] [--ops N] [--mode ram|exact|loose]
 *   test_model --seed S [--ops N] [--trace]       one run, every operation
 *                                                 printed
 *   test_model --threads T [--seeds A-B] [--ops N]  the threaded variant
 *
 * Seed S runs in mode S % 3 unless --mode says otherwise. A failure prints
 * the seed and the operation number (apimodel.c); `--seed S --trace`
 * replays it with a trace of every operation up to the failure (the disk
 * modes have a writer thread, so a replay follows the same operations but
 * the writer's timing may differ).
 *
 * The threaded variant runs T threads, each with its own namespace handles
 * on one store, over shared prefixes: puts, zero-copy commits, matches,
 * restores, pins, flushes and ticket waits, with one model behind a lock.
 * Every restored byte is checked; a match restores at least what was
 * stored before it began (the store is sized so nothing is evicted) and no
 * more than what was stored by the time it returned. tests/CMakeLists.txt
 * runs it under TSan too.
 */
#define _DEFAULT_SOURCE
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apimodel.h"

static int parse_mode(const char *s)
{
    if (!strcmp(s, "ram"))
        return AM_RAM;
    if (!strcmp(s, "exact"))
        return AM_EXACT;
    if (!strcmp(s, "loose"))
        return AM_LOOSE;
    fprintf(stderr, "test_model: unknown mode '%s' (ram, exact, loose)\n", s);
    exit(2);
}

static void run_seed(uint64_t seed, unsigned ops, int mode, bool trace)
{
    am *z = calloc(1, sizeof *z);
    if (!z) {
        fprintf(stderr, "test_model: out of memory\n");
        exit(1);
    }
    am_src src = { .rng = seed * 0x9E3779B97F4A7C15ull + 1 };
    am_init(z, &src, seed, mode >= 0 ? mode : (int)(seed % 3), 0, trace);
    for (unsigned i = 0; i < ops; i++)
        am_step(z);
    am_finish(z);
    free(z);
}

int main(int argc, char **argv)
{
    uint64_t lo = 1, hi = 24, seed = 0;
    unsigned ops = 600, threads = 0;
    int mode = -1;
    bool trace = false, one = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--seeds") && v) {
            if (sscanf(v, "%" SCNu64 "-%" SCNu64, &lo, &hi) != 2 || lo > hi) {
                fprintf(stderr, "test_model: --seeds A-B, A <= B\n");
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--seed") && v) {
            seed = strtoull(v, NULL, 10);
            one = true;
            i++;
        } else if (!strcmp(a, "--ops") && v) {
            ops = (unsigned)strtoul(v, NULL, 10);
            i++;
        } else if (!strcmp(a, "--mode") && v) {
            mode = parse_mode(v);
            i++;
        } else if (!strcmp(a, "--threads") && v) {
            threads = (unsigned)strtoul(v, NULL, 10);
            i++;
        } else if (!strcmp(a, "--trace")) {
            trace = true;
        } else {
            fprintf(stderr, "usage: test_model [--seeds A-B | --seed S] [--ops N] "
                            "[--mode ram|exact|loose] [--trace] [--threads T]\n");
            return 2;
        }
    }
    if (one)
        lo = hi = seed;
    if (threads) {
        for (uint64_t s = lo; s <= hi; s++)
            if (am_threads_run(s, threads, ops) != 0)
                return 1;
        printf("test_model: %u threads, seeds %" PRIu64 "-%" PRIu64 ", %u operations each: ok\n",
               threads, lo, hi, ops);
        return 0;
    }
    for (uint64_t s = lo; s <= hi; s++)
        run_seed(s, ops, mode, trace);
    printf("test_model: seeds %" PRIu64 "-%" PRIu64 ", %u operations each: ok\n", lo, hi, ops);
    return 0;
}
