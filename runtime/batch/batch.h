/* engine.h -- snapbank serve's slots and scheduler: one engine thread runs
 * every request's turn, --parallel of them at once, their decode steps (and
 * chunks of new prompts) batched into shared forward passes.
 *
 * A request becomes a job: its prompt tokens, sampling options, stop
 * strings and the most tokens it may generate. srv_engine_submit queues it
 * (a bounded queue: beyond --max-queue it is refused, and the server
 * answers 503 with Retry-After). The engine thread loops:
 *
 *   1. admit queued jobs into free slots: a runtime session over the
 *      tenant's namespace begins the turn (match the prompt in the bank,
 *      restore RAM pages by reference or disk pages into fresh ones);
 *   2. end the jobs whose client left (cancel): what was computed is
 *      committed (sb_rt_session_end);
 *   3. sample a token for each job whose logits are ready (its own sampler
 *      and seed); turn it into text, check stop strings, wake the job's
 *      connection; a job that is done runs its last token too (so the bank
 *      holds the whole answer) and ends after it;
 *   4. one forward pass for all: each decoding job's pushed token, then
 *      prompt chunks of prefilling jobs up to --batch rows in all
 *      (sb_rt_forward_multi: each sequence's logits are the bits it would
 *      get alone, so batching never changes an answer);
 *   5. report each step to its session (a finished prompt is committed).
 *
 * A barrier job (bank clear) waits at the head of the queue until no job
 * runs, then its function runs on the engine thread.
 *
 * Generated text: pieces of the tokens, made valid UTF-8 as they come (a
 * byte that cannot start or continue a character, and NUL, becomes U+FFFD;
 * an incomplete character waits for its next bytes). out[0, visible) may be
 * sent: the tail that could still become a stop string is held back; when
 * a stop string appears, out is cut where it starts and the job stops.
 *
 * Thread safety: srv_engine_* from any thread; a job's shared fields
 * under its mu (the engine thread writes them, the HTTP side reads them).
 */
#ifndef SB_SRV_ENGINE_H
#define SB_SRV_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/forward.h"
#include "model/model.h"
#include "model/sample.h"
#include "session/session.h"
#include "server/http.h"
#include "server/metrics.h"
#include "server/prompt.h"
#include "server/tenants.h"

typedef enum srv_job_kind {
    SRV_JOB_GENERATE = 0,
    SRV_JOB_BARRIER = 1,
} srv_job_kind;

/* A point where the generated tokens and the session's text agree: after
 * n generated tokens, the answer's text is text_len bytes. */
typedef struct srv_gen_mark {
    size_t n, text_len;
} srv_gen_mark;

typedef struct srv_job srv_job;

/* Called on the engine thread when a job's turn has ended, before the job
 * is marked done (so a session it holds is free for the client's next
 * request as soon as the response is seen). */
typedef void (*srv_job_end_fn)(srv_job *j, void *ctx);

struct srv_job {
    /* ---- set before srv_engine_submit, read only after ---- */
    srv_job_kind kind;
    srv_tenant *tenant;
    uint32_t *prompt;         /* (n_prompt) owned */
    size_t n_prompt;
    size_t max_gen;           /* most tokens to generate, >= 1 */
    sb_rt_sampling sampling;
    char **stop;              /* (n_stop) stop strings, owned, non-empty */
    size_t n_stop;
    double t_arrival;         /* CLOCK_MONOTONIC seconds */
    void (*barrier)(void *ctx); /* SRV_JOB_BARRIER: runs when no job runs */
    void *barrier_ctx;
    srv_job_end_fn on_end;    /* may be NULL */
    void *end_ctx;
    void *app;                /* the HTTP side's own (not touched here) */

    /* ---- the engine thread's, read by others once done ---- */
    uint32_t *tokens;         /* (n_tokens) the sequence committed: prompt +
                                 the generated tokens that ran; owned */
    size_t n_tokens;
    char *stext;              /* (stext_len) the answer's text as the bank's
                                 tokens spell it: out, plus the text of
                                 control tokens (chat templates write them) */
    size_t stext_len, stext_cap;
    srv_gen_mark *marks;      /* (n_marks) ascending */
    size_t n_marks, marks_cap;

    /* ---- shared, under mu ---- */
    pthread_mutex_t mu;
    srv_link link;            /* the connection waiting on this job */
    char *out;                /* (out_len) generated text, valid UTF-8 */
    size_t out_len, out_cap;
    size_t visible;           /* out[0, visible) may be sent */
    size_t n_gen;             /* tokens generated */
    bool started;             /* rep's restore fields are set */
    bool done;                /* the engine is finished with the job */
    srv_finish finish;
    int error;                /* an sb_err when finish is SRV_FINISH_ERROR */
    sb_rt_turn rep;           /* the turn's report */
    double t_start, t_first, t_end;

    atomic_int cancel;        /* set by anyone: stop at the next step */
    atomic_int refs;
};

/* srv_job_new -- a zeroed job with one reference. Returns: NULL when out
 * of memory. */
srv_job *srv_job_new(void);
void srv_job_ref(srv_job *j);
/* srv_job_unref -- drop a reference; the last frees the job. NULL: no-op. */
void srv_job_unref(srv_job *j);

typedef struct srv_engine srv_engine;

typedef struct srv_engine_cfg {
    size_t slots;             /* jobs at once (--parallel) */
    size_t max_queue;         /* jobs waiting at most (--max-queue) */
    unsigned threads;         /* forward-pass threads (0: every CPU) */
    uint32_t batch;           /* rows per forward pass */
    sb_rt_disk_use disk_use;  /* how turns use disk pages (session.h) */
    const srv_prompt *prompt; /* borrowed */
    srv_metrics *mx;          /* borrowed */
} srv_engine_cfg;

/* srv_engine_new -- start the engine thread for model m (borrowed). On
 * success *out is owned by the caller (srv_engine_free). Returns: SB_OK;
 * SB_ERR_NOMEM; SB_ERR_INVAL (slots or max_queue 0). */
int srv_engine_new(const sb_rt_model *m, const srv_engine_cfg *cfg, srv_engine **out);

/* srv_engine_submit -- queue j (the engine takes a reference). Returns:
 * SB_OK; SB_ERR_BUDGET (the queue is full); SB_ERR_LOCKED (the engine
 * takes no more jobs: shutting down). On failure j is not queued. */
int srv_engine_submit(srv_engine *e, srv_job *j);

/* srv_engine_threads -- the threads forward passes run on. */
unsigned srv_engine_threads(const srv_engine *e);

/* srv_engine_counts -- jobs in slots and waiting. */
void srv_engine_counts(srv_engine *e, size_t *running, size_t *waiting);

/* srv_engine_close -- take no more jobs (submit fails with SB_ERR_LOCKED). */
void srv_engine_close(srv_engine *e);

/* srv_engine_cancel_all -- cancel every queued and running job. */
void srv_engine_cancel_all(srv_engine *e);

/* srv_engine_wait_idle -- wait until no job runs or waits, at most
 * timeout_s seconds (< 0: forever). Returns: whether it is idle. */
bool srv_engine_wait_idle(srv_engine *e, double timeout_s);

/* srv_engine_free -- cancel what is left, stop the thread, free. NULL is a
 * no-op. */
void srv_engine_free(srv_engine *e);

/* srv_miss_reason -- why a turn did not restore its whole prompt: the
 * bank's miss reason (sb_miss_name: "no_prefix", "evicted", ...),
 * "recompute_faster" (disk pages matched and recomputing was estimated
 * faster than reading them), "last_position" (everything matched but no
 * logits were stored there: the last position was computed again); NULL
 * when it did. */
const char *srv_miss_reason(const sb_rt_turn *r);


#endif /* SB_SRV_ENGINE_H */
