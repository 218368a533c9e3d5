/* fuzz_api.c -- libFuzzer harness: the store's public API against the
 * model of its manual that tests/test_model.c runs (tests/apimodel.h).
 *
 * Property. Every promise the model checks (docs/contract.md lists them):
 * after any sequence of puts, zero-copy commits (from fresh pages and from
 * matched pages made writable), matches held across operations, restores
 * (whole, partial, to a point), sb_match_load and sb_match_pages, pins with
 * TTLs on a fake clock, flushes and ticket waits, clean close and reopen
 * (in another write mode too), power cuts, prefault and dump, allocation
 * faults and invalid arguments, in one of three modes (RAM only with
 * faults; a disk tier that drops nothing; caps, budgets and write-only):
 * every restored byte is the state of its prefix, every match length,
 * miss reason, n_stored, outcome, ticket answer, budget and counter is one
 * the manual allows, and sb_store_check passes. A violation prints the
 * operation, what broke and the namespaces' trees, then abort()s.
 *
 * Input format: the input is the model's stream of draws (am_draw: each
 * draw of a choice among n takes ceil(log256 n) bytes, big-endian, reduced
 * mod n; past the end every draw is 0 and the run ends). The first byte
 * picks the mode (its value mod 3: 0 RAM, 1 exact, 2 loose), the next ones the world
 * (layouts, scopes, budgets, disk settings: draw_config in
 * tests/apimodel.c), then one operation after another. At most 256
 * operations run per input. Everything is freed per input; the disk modes
 * run on the in-memory file system (no files).
 *
 * Set SB_FUZZ_TRACE=1 to print each operation as it runs.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "apimodel.h"

#define FZ_MAX_OPS 256u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    am *z = calloc(1, sizeof *z);
    if (!z)
        return 0;
    const char *tr = getenv("SB_FUZZ_TRACE");
    am_src src = { .bytes = data, .n_bytes = size };
    if (!am_init(z, &src, 0, -1, 0, tr && *tr == '1')) {
        pthread_mutex_destroy(&z->mu); /* the input ran out before a store was made */
        free(z);
        return 0;
    }
    while (!z->done && z->op_no < FZ_MAX_OPS)
        am_step(z);
    am_finish(z);
    free(z);
    return 0;
}
