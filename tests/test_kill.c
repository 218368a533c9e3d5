/* test_kill.c -- kill -9 in the middle of writing, on a real directory.
 *
 * A child process opens the store, puts sequences drawn from a fixed set
 * (groups of four share a prefix; partial tails; point states) with
 * sb_ns_put_ex, flushes at random and records in a shared, mmap'd
 * expected-state table which sequences are acknowledged durable: the put
 * returned durable (its outcome), its ticket's wait returned SB_OK, or a
 * flush returned SB_OK after it (write-only, never durable: its ticket
 * said SB_ERR_WRITE_ONLY, written and synced for the reopen, which reads
 * the tier). Rounds cycle through every durability
 * mode and write mode (COMMIT with write-back included: its puts must
 * return durable unless the outcome says why not). The parent kills it
 * with SIGKILL after a random few milliseconds, reopens the directory
 * (the lock died with the child) and checks: every durable sequence
 * restores in full with its point state, bit-exact, and every sequence
 * restores bit-exact whatever length it gets. Then again, on the same
 * directory.
 *
 * SB_KILL_ROUNDS overrides the number of kills (default 200).
 */
#define _GNU_SOURCE /* MAP_ANONYMOUS, usleep */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#define N_SEQ 96
#define MAX_TOK 160

static const tu_layout LK = { .page_tokens = 16, .n_tensors = 2, .bpt = { 96, 32 },
                              .point_bytes = 48, .model = "kill-model" };

typedef struct shared {
    volatile int durable[N_SEQ];
    volatile int child_ready;
} shared;

static char g_dir[128];

static size_t seq_tokens(int k, uint32_t *tok)
{
    size_t n = 1 + (size_t)(k * 37 % (MAX_TOK - 1));
    uint64_t a = 1000 + (uint64_t)k / 4, b = 5000 + (uint64_t)k;
    for (size_t i = 0; i < n; i++)
        tok[i] = (uint32_t)(tu_rand(i < 24 ? &a : &b) % 50);
    return n;
}

static sb_config config(uint64_t round)
{
    sb_config c;
    sb_config_default(&c);
    c.min_prefix_tokens = 1; /* short test sequences are written too */
    c.dir = g_dir;
    c.segment_bytes = 256 << 10;
    c.disk_bytes = 1ull << 30;
    c.ram_bytes = 8 << 20;
    c.durability = (sb_durability)(round % 3);
    c.write_mode = (sb_write_mode)(round / 3 % 3);
    c.sync_interval_ms = 2;
    c.sync_bytes = 64 << 10;
    return c;
}

static void child(shared *sh, uint64_t round)
{
    sb_config c = config(round);
    sb_store *st = NULL;
    if (sb_store_open(&c, &st) != SB_OK)
        _exit(3);
    sb_ns *ns = tu_ns(st, &LK, "scope");
    sh->child_ready = 1;
    uint64_t rng = round * 131 + 7;
    int pending[N_SEQ], n_pending = 0;
    for (;;) {
        int k = (int)(tu_rand(&rng) % N_SEQ);
        uint32_t tok[MAX_TOK];
        size_t n = seq_tokens(k, tok);
        void **state = tu_state(&LK, tok, n);
        void *point = tu_point(&LK, tok, n);
        sb_write_outcome oc;
        int rc = sb_ns_put_ex(ns, tok, n, (const void *const *)state, point, NULL, &oc);
        free(point);
        tu_free_state(&LK, state);
        if (rc != SB_OK)
            _exit(4);
        /* COMMIT: durable on return in every write mode but write-only
         * (min_prefix 1 and the default budget deny nothing here), unless
         * the file system is full or failing (denied "capacity" or
         * "error"). Write-only is never durable: its state synced
         * (SB_ERR_WRITE_ONLY) is what the reopen, which reads the tier,
         * must find. */
        bool wo = c.write_mode == SB_WRITE_ONLY;
        int synced_rc = wo ? SB_ERR_WRITE_ONLY : SB_OK;
        if (oc.write_only != wo || (wo && oc.durable))
            _exit(6);
        bool synced = oc.durable || (wo && sb_store_is_durable(st, oc.ticket) == synced_rc);
        if (c.durability == SB_DURABILITY_COMMIT && !synced &&
            !oc.denied_by[SB_DENY_CAPACITY] && !oc.denied_by[SB_DENY_ERROR])
            _exit(5);
        if (!synced && tu_rand(&rng) % 8 == 0 &&
            sb_store_wait_durable(st, oc.ticket, SB_WAIT_FOREVER) == synced_rc)
            synced = true;
        if (synced)
            sh->durable[k] = 1;
        else if (n_pending < N_SEQ)
            pending[n_pending++] = k;
        if (tu_rand(&rng) % 4 == 0 && sb_store_flush(st) == SB_OK) {
            for (int i = 0; i < n_pending; i++)
                sh->durable[pending[i]] = 1;
            n_pending = 0;
        }
    }
}

static void check(const shared *sh)
{
    sb_config c = config(0);
    sb_store *st = NULL;
    int rc = sb_store_open(&c, &st);
    if (rc != SB_OK) {
        fprintf(stderr, "reopen after kill: %s\n", sb_strerror(rc));
        fail();
    }
    sb_ns *ns = tu_ns(st, &LK, "scope");
    for (int k = 0; k < N_SEQ; k++) {
        uint32_t tok[MAX_TOK];
        size_t n = seq_tokens(k, tok);
        sb_match *m = NULL;
        assert_int_equal(sb_ns_match(ns, tok, n, &m), SB_OK);
        sb_match_info info;
        assert_int_equal(sb_match_get_info(m, &info), SB_OK);
        size_t L = info.n_tokens;
        if (sh->durable[k] && L != n) {
            fprintf(stderr, "durable sequence %d: %zu of %zu tokens (%s)\n", k, L, n,
                    sb_miss_name(info.miss));
            fail();
        }
        void **bufs = tu_bufs(&LK, L ? L : 1);
        uint8_t point[48];
        rc = sb_match_restore(m, L, bufs, L == n && info.has_point ? point : NULL);
        if (rc != SB_OK) {
            assert_false(sh->durable[k]);
            assert_int_equal(sb_match_get_info(m, &info), SB_OK);
            L = info.n_tokens;
        } else if (L == n && info.has_point) {
            void *want = tu_point(&LK, tok, n);
            assert_memory_equal(point, want, LK.point_bytes);
            free(want);
        }
        assert_true(tu_state_equal(&LK, tok, L, bufs));
        if (sh->durable[k])
            assert_true(info.has_point);
        tu_free_state(&LK, bufs);
        sb_match_release(m);
    }
    tu_check(st);
    sb_ns_close(ns);
    sb_store_close(st);
}

static void test_kill_midwrite(void **state)
{
    (void)state;
    tu_scratch_dir(g_dir, sizeof g_dir, "kill");
    shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                      -1, 0);
    assert_true(sh != MAP_FAILED);
    memset((void *)sh, 0, sizeof *sh);
    const char *env = getenv("SB_KILL_ROUNDS");
    uint64_t rounds = env ? strtoull(env, NULL, 10) : 200;
    uint64_t rng = 12345;
    for (uint64_t r = 1; r <= rounds; r++) {
        sh->child_ready = 0;
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
            child(sh, r);
        /* Kill it a random 0-20 ms after it opened the store. */
        while (!sh->child_ready) {
            int status;
            if (waitpid(pid, &status, WNOHANG) == pid) {
                fprintf(stderr, "child exited early: %d\n", status);
                fail();
            }
            usleep(200);
        }
        struct timespec ts = { 0, (long)(tu_rand(&rng) % 20000) * 1000 };
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (!WIFSIGNALED(status)) {
            fprintf(stderr, "child ended on its own: status %d\n", status);
            fail();
        }
        check(sh);
    }
    munmap((void *)sh, sizeof *sh);
    tu_remove_dir(g_dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kill_midwrite),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
