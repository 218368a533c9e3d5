/* batch.h -- continuous batching: many turns at once over one model, their
 * decode steps (and chunks of new prompts) in shared forward passes. Each
 * turn is a job (sb_rt_job), run in a slot through the compute
 * (compute.h: a runtime session, session/session.h, by default; or a
 * llama.cpp sequence); the server's named sessions
 * (server/sessions.h) are its caller's business, not known here. One
 * engine thread runs every job's turn, `slots` of them at once; the HTTP
 * server (snapbank serve) and the C API (sbrt_chat_turn_batch) are its
 * users, each through callbacks: nothing here knows of connections,
 * tenants or metrics.
 *
 * A job is one turn: its namespace in the bank, its prompt tokens, sampling
 * options, stop strings or stop token, and the most tokens it may
 * generate. sb_rt_batch_submit queues it (a bounded queue: beyond
 * max_queue it is refused). The engine thread loops:
 *
 *   1. admit queued jobs into free slots: a runtime session over the job's
 *      namespace begins the turn (match the prompt in the bank, restore RAM
 *      pages by reference or disk pages into fresh ones);
 *   2. end the jobs that were cancelled: what was computed is committed
 *      (sb_rt_session_end);
 *   3. sample a token for each job whose logits are ready (its own sampler
 *      and seed); turn it into text, check stop strings, call the job's
 *      wake; a job that is done runs its last token too (so the bank holds
 *      the whole answer) and ends after it;
 *   4. one forward pass for all: each decoding job's pushed token, then
 *      prompt chunks of prefilling jobs up to `batch` rows in all
 *      (sb_rt_forward_multi: each sequence's logits are the bits it would
 *      get alone, so batching never changes an answer);
 *   5. report each step to its session (a finished prompt is committed).
 *
 * A job waits before its turn begins while an older job in the same
 * namespace is still computing a prompt that shares more than 32 tokens
 * with its own beyond what that one restored: it then restores the shared
 * part from the bank instead of computing it a second time (users of one
 * system prompt arriving together).
 *
 * A barrier job waits at the head of the queue until no job runs, then its
 * function runs on the engine thread (the server's bank clear).
 *
 * Generated text: pieces of the tokens, made valid UTF-8 as they come (a
 * byte that cannot start or continue a character, and NUL, becomes U+FFFD;
 * an incomplete character waits for its next bytes). out[0, visible) may be
 * shown: the tail that could still become a stop string is held back; when
 * a stop string appears, out is cut where it starts and the job stops.
 * stext is the answer's text as the bank's tokens spell it (out, plus the
 * text of an end-of-turn control token when the chat template writes it
 * after an answer: cfg.turn_end_text); marks say where tokens and stext
 * agree, so a chat can continue from there.
 *
 * Thread safety: sb_rt_batch_* and sb_rt_job_ref/unref from any thread; a
 * job's shared fields under its mu (the engine thread writes them, others
 * read them); its wake and on_end run on the engine thread.
 */
#ifndef SB_RT_BATCH_H
#define SB_RT_BATCH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "batch/compute.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/sample.h"
#include "session/session.h"

typedef enum sb_rt_job_kind {
    SB_RT_JOB_GENERATE = 0,
    SB_RT_JOB_BARRIER = 1,
} sb_rt_job_kind;

/* Why a job ended. */
typedef enum sb_rt_finish {
    SB_RT_FINISH_STOP = 0,      /* an end-of-generation token, the stop token
                                   or a stop string */
    SB_RT_FINISH_LENGTH = 1,    /* max_gen or the context */
    SB_RT_FINISH_CANCELLED = 2, /* cancelled (the client left, or shutdown) */
    SB_RT_FINISH_ERROR = 3,     /* error says which */
    SB_RT_FINISH__COUNT = 4
} sb_rt_finish;

/* A point where the generated tokens and the answer's text agree: after
 * n generated tokens, stext is text_len bytes. */
typedef struct sb_rt_gen_mark {
    size_t n, text_len;
} sb_rt_gen_mark;

/* A generated token's log probability under the model (the logits'
 * softmax, before temperature or any truncation), and the most likely
 * tokens at its position. */
#define SB_RT_TOP_LOGPROBS_MAX 20u
typedef struct sb_rt_logprob {
    uint32_t id;
    float logprob;
    size_t text_start, text_end; /* the bytes of out its text added (a
                                    character split over tokens is counted
                                    where it completes) */
    uint32_t n_top;               /* top_id/top_lp entries, most likely first */
    uint32_t top_id[SB_RT_TOP_LOGPROBS_MAX];
    float top_lp[SB_RT_TOP_LOGPROBS_MAX];
} sb_rt_logprob;

typedef struct sb_rt_job sb_rt_job;

/* Called on the engine thread when a job's turn has ended, before the job
 * is marked done (so whatever the job held is free for the caller's next
 * request as soon as it sees done). */
typedef void (*sb_rt_job_end_fn)(sb_rt_job *j, void *ctx);

struct sb_rt_job {
    /* ---- set before sb_rt_batch_submit, read only after ---- */
    sb_rt_job_kind kind;
    sb_ns *ns;                /* the turn's namespace (borrowed: it must
                                 outlive the job's turn) */
    uint32_t *prompt;         /* (n_prompt) malloc'd; freed with the job */
    size_t n_prompt;
    size_t max_gen;           /* most tokens to generate, >= 1 */
    sb_rt_sampling sampling;
    char **stop;              /* (n_stop) stop strings, non-empty, each and
                                 the array malloc'd; freed with the job */
    size_t n_stop;
    bool eog_stops;           /* an end-of-generation token (the
                                 tokenizer's list) ends the answer; true in
                                 a new job */
    uint32_t stop_token;      /* this token ends the answer after it (it is
                                 generated and runs); SB_RT_TOK_NONE (a new
                                 job's): none */
    double t_arrival;         /* sb_rt_now_s() when the request came */
    bool logprobs;            /* record each generated token's log
                                 probability (lp below) */
    uint32_t top_logprobs;    /* ...and this many most likely tokens at its
                                 position (<= SB_RT_TOP_LOGPROBS_MAX) */
    void (*barrier)(void *ctx); /* SB_RT_JOB_BARRIER: runs when no job runs */
    void *barrier_ctx;
    sb_rt_job_end_fn on_end;  /* may be NULL */
    void *end_ctx;
    void (*wake)(sb_rt_job *j); /* may be NULL; called with mu held each
                                   time the shared fields change (a token,
                                   done) */
    void *app;                /* the caller's own area (app_bytes of
                                 sb_rt_job_new, zeroed; freed with the job;
                                 not touched here) */

    /* ---- the engine thread's, read by others once done ---- */
    uint32_t *tokens;         /* (n_tokens) the sequence committed: prompt +
                                 the generated tokens that ran; owned */
    size_t n_tokens;
    char *stext;              /* (stext_len) the answer's text as the bank's
                                 tokens spell it (see above) */
    size_t stext_len, stext_cap;
    sb_rt_gen_mark *marks;    /* (n_marks) ascending */
    size_t n_marks, marks_cap;
    uint32_t *gen;            /* (n_gen) the generated ids, in order */
    size_t gen_cap;

    /* ---- shared, under mu ---- */
    pthread_mutex_t mu;
    char *out;                /* (out_len) generated text, valid UTF-8 */
    size_t out_len, out_cap;
    size_t visible;           /* out[0, visible) may be shown */
    size_t n_gen;             /* tokens generated */
    bool started;             /* rep's restore fields are set */
    bool done;                /* the engine is finished with the job */
    sb_rt_logprob *lp;        /* (n_lp) with logprobs: one per generated
                                 token, in order; owned */
    size_t n_lp, lp_cap;
    sb_rt_finish finish;
    int error;                /* an sb_err when finish is SB_RT_FINISH_ERROR */
    sb_rt_turn rep;           /* the turn's report */
    double t_start, t_first, t_end; /* sb_rt_now_s() */

    atomic_int cancel;        /* set by anyone: stop at the next step */
    atomic_int refs;
};

/* sb_rt_job_new -- a zeroed job with one reference, eog_stops true,
 * stop_token SB_RT_TOK_NONE, and app pointing at app_bytes of zeroed room
 * of the caller's (NULL when app_bytes is 0) that lives as long as the job.
 * Returns: NULL when out of memory. */
sb_rt_job *sb_rt_job_new(size_t app_bytes);

/* sb_rt_job_ref -- one more reference. */
void sb_rt_job_ref(sb_rt_job *j);

/* sb_rt_job_unref -- drop a reference; the last frees the job and what it
 * owns. NULL: no-op. */
void sb_rt_job_unref(sb_rt_job *j);

typedef struct sb_rt_batch sb_rt_batch;

/* What the engine tells an observer (every member may be NULL), on the
 * engine thread, under no lock. */
typedef struct sb_rt_batch_obs {
    void *ctx;
    /* a generate job ended: after its on_end, before it is done and woken
     * (so its waiter finds the turn counted) */
    void (*turn)(void *ctx, const sb_rt_job *j);
    /* seconds between two tokens of one job */
    void (*token_gap)(void *ctx, double s);
    /* a forward pass ran with this many sequences */
    void (*pass)(void *ctx, size_t sequences);
} sb_rt_batch_obs;

typedef struct sb_rt_batch_cfg {
    size_t slots;             /* jobs at once */
    size_t max_queue;         /* jobs waiting at most */
    unsigned threads;         /* forward-pass threads (0: every CPU) */
    uint32_t batch;           /* rows per forward pass */
    sb_rt_disk_use disk_use;  /* how turns use disk pages (session.h) */
    const char *turn_end_text;/* what the chat template writes after an
                                 answer (e.g. "<|im_end|>"): an
                                 end-of-generation control token spelled so
                                 is part of stext; NULL: none (borrowed) */
    sb_rt_batch_obs obs;
} sb_rt_batch_cfg;

/* sb_rt_batch_new -- start the engine thread for model m (borrowed; it
 * needs a tokenizer), computing with the builtin runtime
 * (sb_rt_compute_rt). On success *out is owned by the caller
 * (sb_rt_batch_free). Returns: SB_OK; SB_ERR_NOMEM; SB_ERR_INVAL (slots,
 * max_queue or batch 0, or m without a tokenizer); the errors of
 * sb_rt_ctx_new. */
int sb_rt_batch_new(const sb_rt_model *m, const sb_rt_batch_cfg *cfg, sb_rt_batch **out);

/* sb_rt_batch_new_with -- the same over another compute (compute.h: e.g.
 * llama.cpp's), which the engine takes whatever the outcome (freed with
 * it, or at once on failure); m (borrowed) gives the tokenizer that turns
 * the compute's tokens into text and tells which end generation: its ids
 * must be the compute's. cfg's threads and disk_use are the compute's
 * business and not read here. Returns: SB_OK; SB_ERR_NOMEM; SB_ERR_INVAL
 * (slots, max_queue or batch 0, or m without a tokenizer). */
int sb_rt_batch_new_with(const sb_rt_model *m, sb_rt_compute *comp, const sb_rt_batch_cfg *cfg,
                         sb_rt_batch **out);

/* sb_rt_batch_submit -- queue j (the engine takes a reference). Returns:
 * SB_OK; SB_ERR_BUDGET (the queue is full); SB_ERR_LOCKED (the engine
 * takes no more jobs: closed); SB_ERR_INVAL (a generate job without ns or
 * prompt, or max_gen 0). On failure j is not queued. */
int sb_rt_batch_submit(sb_rt_batch *b, sb_rt_job *j);

/* sb_rt_batch_threads -- the threads forward passes run on. */
unsigned sb_rt_batch_threads(const sb_rt_batch *b);

/* sb_rt_batch_counts -- jobs in slots and waiting. */
void sb_rt_batch_counts(sb_rt_batch *b, size_t *running, size_t *waiting);

/* sb_rt_batch_close -- take no more jobs (submit fails with SB_ERR_LOCKED). */
void sb_rt_batch_close(sb_rt_batch *b);

/* sb_rt_batch_cancel_all -- cancel every queued and running job. */
void sb_rt_batch_cancel_all(sb_rt_batch *b);

/* sb_rt_batch_wait_idle -- wait until no job runs or waits, at most
 * timeout_s seconds (< 0: forever). Returns: whether it is idle. */
bool sb_rt_batch_wait_idle(sb_rt_batch *b, double timeout_s);

/* sb_rt_batch_free -- cancel what is left, stop the thread, free. NULL is
 * a no-op. */
void sb_rt_batch_free(sb_rt_batch *b);

#endif /* SB_RT_BATCH_H */
