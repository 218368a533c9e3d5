/* pool.h -- a fixed set of worker threads that runs one batch of tasks at a time.
 *
 * sb_rt_pool_run(p, n, fn, ctx) calls fn(ctx, task, thread) once for every
 * task in [0, n), spread over the pool's threads and the calling thread, and
 * returns when every call has returned. Tasks are handed out in increasing
 * order from a shared counter, so which thread runs which task varies from
 * run to run: a task's result must depend only on the task number, never on
 * `thread` or on what other tasks did (the kernels rely on this for their
 * bit-reproducibility). `thread` is in [0, sb_rt_pool_threads(p)) and no two
 * calls running at the same time share it, so it may index per-thread
 * scratch space. The caller is thread 0.
 *
 * Workers that find no work spin briefly and then sleep on a condition
 * variable, so an idle pool costs no CPU.
 *
 * Thread safety: one sb_rt_pool_run at a time per pool (the pool is driven
 * by one thread: a session's forward pass). Different pools are independent.
 * fn runs concurrently with itself on different tasks.
 */
#ifndef SB_RT_POOL_H
#define SB_RT_POOL_H

#include <stddef.h>

typedef struct sb_rt_pool sb_rt_pool;

/* The signature of a task: ctx as given to sb_rt_pool_run, the task number,
 * and the thread running it. */
typedef void (*sb_rt_pool_fn)(void *ctx, size_t task, unsigned thread);

#define SB_RT_POOL_MAX_THREADS 256u

/* sb_rt_pool_new -- start a pool of n_threads threads in total, the caller
 * of sb_rt_pool_run included (so n_threads - 1 new threads); 0 means one per
 * online CPU. On success *out is owned by the caller: free it with
 * sb_rt_pool_free. On failure *out is NULL and no thread is left running.
 * Returns: SB_OK; SB_ERR_INVAL when out is NULL or n_threads exceeds
 * SB_RT_POOL_MAX_THREADS; SB_ERR_NOMEM when memory or a thread cannot be had. */
int sb_rt_pool_new(unsigned n_threads, sb_rt_pool **out);

/* sb_rt_pool_free -- stop and join the workers and free the pool; NULL is a
 * no-op. Must not be called while sb_rt_pool_run is running on it. */
void sb_rt_pool_free(sb_rt_pool *p);

/* sb_rt_pool_threads -- the thread count, caller included; 1 for NULL. */
unsigned sb_rt_pool_threads(const sb_rt_pool *p);

/* sb_rt_pool_run -- run fn(ctx, task, thread) for every task in [0, n_tasks)
 * and return when all have finished. p may be NULL: the caller runs every
 * task itself, in order, as thread 0. n_tasks 0 returns at once. fn must not
 * call sb_rt_pool_run on the same pool. */
void sb_rt_pool_run(sb_rt_pool *p, size_t n_tasks, sb_rt_pool_fn fn, void *ctx);

#endif /* SB_RT_POOL_H */
