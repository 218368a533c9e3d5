/* pool.c -- the worker threads behind sb_rt_pool_run (pool.h).
 *
 * One job at a time. sb_rt_pool_run publishes the job (fn, ctx, n_tasks) and
 * bumps `gen` under the mutex; workers notice the new generation (spinning
 * a little, then sleeping on cv_work), take task numbers from `next` until
 * they run out, and count themselves out of `pending`. The last one out
 * wakes the caller, who also takes tasks and then waits for pending == 0.
 * The job fields are written only while no worker is inside a job (run
 * returns after pending reaches 0), and read after an acquire load of gen.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "snapbank.h"

#include "kernels/pool.h"

#define POOL_SPIN 4096 /* polls before a waiting thread goes to sleep */

struct sb_rt_pool {
    unsigned n_threads;           /* caller included, >= 1 */
    pthread_t *tids;              /* (n_threads - 1) workers */
    pthread_mutex_t mu;           /* guards the sleeps on cv_work / cv_done */
    pthread_cond_t cv_work;       /* a new gen or stop */
    pthread_cond_t cv_done;       /* pending reached 0 */
    atomic_uint gen;              /* job number; workers run each once */
    atomic_int stop;              /* 1: workers exit */
    atomic_size_t next;           /* next task number to hand out */
    atomic_uint pending;          /* workers not yet done with this gen */
    sb_rt_pool_fn fn;             /* current job, valid while pending > 0 */
    void *ctx;
    size_t n_tasks;
};

/* The argument of one worker: its pool and its thread number. */
typedef struct pool_worker_arg {
    sb_rt_pool *p;
    unsigned thread;
} pool_worker_arg;

static inline void pool_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Take tasks until none is left. */
static void pool_drain(sb_rt_pool *p, unsigned thread)
{
    for (;;) {
        size_t t = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (t >= p->n_tasks)
            return;
        p->fn(p->ctx, t, thread);
    }
}

static void *pool_worker(void *argp)
{
    pool_worker_arg *a = argp;
    sb_rt_pool *p = a->p;
    unsigned thread = a->thread;
    unsigned seen = 0;
    free(a);
    for (;;) {
        unsigned g = atomic_load_explicit(&p->gen, memory_order_acquire);
        for (int i = 0; g == seen && i < POOL_SPIN; i++) {
            if (atomic_load_explicit(&p->stop, memory_order_acquire))
                return NULL;
            pool_relax();
            g = atomic_load_explicit(&p->gen, memory_order_acquire);
        }
        if (g == seen) {
            pthread_mutex_lock(&p->mu);
            while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen &&
                   !atomic_load_explicit(&p->stop, memory_order_acquire))
                pthread_cond_wait(&p->cv_work, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (g == seen) /* woken by stop */
            return NULL;
        seen = g;
        pool_drain(p, thread);
        if (atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_broadcast(&p->cv_done);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

static void pool_stop(sb_rt_pool *p, unsigned n_started)
{
    pthread_mutex_lock(&p->mu);
    atomic_store_explicit(&p->stop, 1, memory_order_release);
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 0; i < n_started; i++)
        pthread_join(p->tids[i], NULL);
}

int sb_rt_pool_new(unsigned n_threads, sb_rt_pool **out)
{
    if (!out)
        return SB_ERR_INVAL;
    *out = NULL;
    if (n_threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = n < 1 ? 1u : n > (long)SB_RT_POOL_MAX_THREADS ? SB_RT_POOL_MAX_THREADS
                                                                  : (unsigned)n;
    }
    if (n_threads > SB_RT_POOL_MAX_THREADS)
        return SB_ERR_INVAL;
    sb_rt_pool *p = calloc(1, sizeof *p);
    if (!p)
        return SB_ERR_NOMEM;
    p->n_threads = n_threads;
    p->tids = calloc(n_threads, sizeof *p->tids);
    if (!p->tids) {
        free(p);
        return SB_ERR_NOMEM;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_work, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    atomic_init(&p->gen, 0);
    atomic_init(&p->stop, 0);
    atomic_init(&p->next, 0);
    atomic_init(&p->pending, 0);
    for (unsigned i = 0; i + 1 < n_threads; i++) {
        pool_worker_arg *a = malloc(sizeof *a);
        int rc = a ? 0 : ENOMEM;
        if (a) {
            a->p = p;
            a->thread = i + 1;
            rc = pthread_create(&p->tids[i], NULL, pool_worker, a);
            if (rc)
                free(a);
        }
        if (rc) {
            pool_stop(p, i);
            pthread_cond_destroy(&p->cv_done);
            pthread_cond_destroy(&p->cv_work);
            pthread_mutex_destroy(&p->mu);
            free(p->tids);
            free(p);
            return SB_ERR_NOMEM;
        }
    }
    *out = p;
    return SB_OK;
}

void sb_rt_pool_free(sb_rt_pool *p)
{
    if (!p)
        return;
    pool_stop(p, p->n_threads - 1);
    pthread_cond_destroy(&p->cv_done);
    pthread_cond_destroy(&p->cv_work);
    pthread_mutex_destroy(&p->mu);
    free(p->tids);
    free(p);
}

unsigned sb_rt_pool_threads(const sb_rt_pool *p)
{
    return p ? p->n_threads : 1u;
}

void sb_rt_pool_run(sb_rt_pool *p, size_t n_tasks, sb_rt_pool_fn fn, void *ctx)
{
    if (n_tasks == 0 || !fn)
        return;
    if (!p || p->n_threads == 1 || n_tasks == 1) {
        for (size_t t = 0; t < n_tasks; t++)
            fn(ctx, t, 0);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n_tasks = n_tasks;
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    atomic_store_explicit(&p->pending, p->n_threads - 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);

    pool_drain(p, 0);

    for (int i = 0; i < POOL_SPIN; i++) {
        if (atomic_load_explicit(&p->pending, memory_order_acquire) == 0)
            return;
        pool_relax();
    }
    pthread_mutex_lock(&p->mu);
    while (atomic_load_explicit(&p->pending, memory_order_acquire) != 0)
        pthread_cond_wait(&p->cv_done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
