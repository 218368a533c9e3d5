/* session.h -- a conversation over a model whose KV cache comes back from
 * the bank (runtime/session; not snapbank serve's registry of named
 * sessions, server/sessions.h, nor a batched turn, a "job" of
 * batch/batch.h, which drives one of these). Each turn restores the
 * longest stored prefix of its prompt instead of recomputing it, from RAM
 * pages by reference, from disk pages read into fresh ones, or from pages
 * another node published to the bank's shared tier, fetched into fresh
 * ones.
 *
 * A session keeps its committed tokens (every earlier prompt and answer).
 * One turn (sb_rt_session_turn):
 *   1. prompt = the session's tokens + the turn's input;
 *   2. match the prompt in the session's namespace (its model and scope);
 *   3. choose how much of the match to take: RAM pages always (no copy);
 *      disk pages only when reading them is estimated faster than
 *      recomputing their tokens (measured rates, sb_rt_rates); with a
 *      shared tier, the prompt's full pages past what RAM and disk hold
 *      are fetched from it first (sb_ns_fetch_shared) when fetching them
 *      is estimated faster than recomputing them (the network's rates
 *      measured the same way), then the match is made again; when the
 *      whole prompt matched, its logits come from the point state stored
 *      with it, or else its last token is recomputed;
 *   4. prefill the rest, then commit the prompt's pages with the last
 *      logits as the point state (so the next turn reuses the prompt even
 *      when the answer differs, and a prompt that is exactly a stored
 *      sequence needs no forward pass);
 *   5. decode n_gen tokens (each one run through the model, so the KV and
 *      logits cover the whole answer), then commit again.
 * Restore, prefill and decode are marked as the store's foreground phases
 * (sb_store_foreground): the disk tier's writer holds back during them.
 *
 * sb_rt_session_turn does all of it in one call. A server that batches
 * many sessions' decode steps into one forward pass drives the same steps
 * itself ("a turn, step by step" below): begin (1-3), then rows to run
 * from sb_rt_session_next, run with sb_rt_forward_multi beside other
 * sessions' rows and reported back with sb_rt_session_ran (the prompt's
 * last row commits the prompt: 4), tokens sampled by the caller and pushed,
 * and end (5). sb_rt_session_turn is built on these calls, so both paths
 * compute the same bits.
 *
 * The point state of the runtime's layout is the last position's logits:
 * n_vocab little-endian float32 values (kv.h, sb_rt_kv_layout); for a
 * hybrid model it is a boundary (boundary.h, and "boundaries" below).
 *
 * Determinism: a turn computes the same logits and tokens whether its
 * prefix was restored from RAM, from disk, or computed (forward.h).
 *
 * Thread safety: a session is used by one thread at a time.
 */
#ifndef SB_RT_SESSION_H
#define SB_RT_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "model/forward.h"
#include "model/kv.h"
#include "model/model.h"
#include "model/sample.h"
#include "snapbank.h"

/* Where a turn's cached prefix came from. */
typedef enum sb_rt_cache_mode {
    SB_RT_CACHE_COLD = 0, /* nothing restored: the whole prompt computed */
    SB_RT_CACHE_WARM = 1, /* a prefix restored from RAM pages ("warm_prefix") */
    SB_RT_CACHE_SSD = 2,  /* a prefix restored with pages read from disk */
    SB_RT_CACHE_REMOTE = 3, /* a prefix restored with pages fetched from the
                             shared tier this turn (others may have come
                             from RAM or disk) */
} sb_rt_cache_mode;

/* sb_rt_cache_mode_name -- "cold", "warm_prefix", "ssd", "remote"
 * ("unknown" when out of range). Returns: a static string. */
const char *sb_rt_cache_mode_name(sb_rt_cache_mode m);

/* The speeds behind the restore-or-recompute choice. A session starts from
 * priors and replaces each with what it measures (an average over turns). */
typedef struct sb_rt_rates {
    double prefill_tok_s; /* prefill tokens per second (prior: from the
                             model's size, 25 GFLOP/s per thread) */
    double read_bytes_s;  /* disk restore bytes per second (prior 500 MB/s) */
    double read_fixed_s;  /* fixed cost of a disk restore (prior 200 us) */
    unsigned prefill_samples, read_samples; /* measurements taken */
    double shared_bytes_s; /* shared-tier fetch bytes per second (prior 50
                              MB/s, conservative: a slow network makes a
                              fetch lose to recomputing, never the reverse
                              until measured) */
    double shared_fixed_s; /* fixed cost of a fetch: the probe's round
                              trip (prior 2 ms; measured on fetches that
                              found nothing to fetch) */
    unsigned shared_samples, shared_fixed_samples; /* measurements taken */
} sb_rt_rates;

/* What one turn did. Times in seconds, from the start of the call. */
typedef struct sb_rt_turn {
    sb_rt_cache_mode cache_mode;
    size_t prompt_tokens;    /* the session's tokens + the input */
    size_t cached_tokens;    /* restored from the bank */
    size_t cached_disk_tokens; /* ...of them in pages read from disk */
    size_t cached_shared_tokens; /* ...of them in pages fetched from the
                                shared tier this turn */
    int shared_skipped;      /* the shared tier may have held more pages but
                                fetching was estimated slower than
                                recomputing them: not asked */
    int shared_rc;           /* SB_OK, or why the fetch failed (SB_ERR_IO:
                                the cluster did not answer in time; the
                                turn recomputed what it lacked) */
    int shared_fault;        /* enum sb_shared_fault: what ended the fetch
                                short (sb_shared_fault_name); 0: none */
    char shared_detail[128]; /* the server's words, or the refused key */
    unsigned shared_bad;     /* values the checks refused */
    double est_fetch_s;      /* the estimates behind the shared-tier choice */
    double est_fetch_recompute_s; /* (0 when there was nothing to ask for) */
    size_t shared_bytes;     /* page bytes fetched from the shared tier */
    size_t prefill_tokens;   /* computed (prompt_tokens - cached_tokens) */
    size_t gen_tokens;       /* generated */
    size_t matched_tokens;   /* the bank's restorable prefix of the prompt */
    sb_miss miss;            /* why matched_tokens < prompt_tokens */
    int point_hit;           /* the first token's logits came from a point state */
    int disk_skipped;        /* disk pages matched but recomputing them was
                                estimated faster: they were not read */
    double est_read_s;       /* the estimates behind that choice (0 when no */
    double est_recompute_s;  /* disk page matched) */
    double restore_s;        /* match, map and read */
    double restore_cpu_s;    /* CPU time the restore took (its thread) */
    uint64_t restore_faults; /* minor page faults the restore took (its
                                thread: buffers touched the first time) */
    size_t restore_bytes;    /* KV bytes read from disk (disk pages x page
                                bytes; 0 when nothing came from disk; a
                                hybrid model's boundary is in bank_bytes) */
    double prefill_s;        /* computing the uncached prompt tokens */
    double ttft_s;           /* until the first generated token was known */
    double decode_s;         /* the decode steps */
    double prefill_tok_s;    /* prefill_tokens / prefill_s (0 when none) */
    double decode_tok_s;     /* gen_tokens / decode_s (0 when none) */
    int commit_rc;           /* SB_OK, or why a commit failed (the turn still
                                completes; only the caching is lost) */
    sb_write_outcome disk;   /* what the bank's disk tier made of the turn's
                                two commits (the prompt after prefill, then
                                the answer; a hybrid model's turn also
                                commits each grid boundary): pages_new, points_new, queued
                                and written added up over both; ticket,
                                durable, deferred, dirty and denied as the
                                last commit left the conversation's state
                                (its ticket stands for all of it). Zeroes
                                with a RAM-only bank (ticket 0) */
    /* Hybrid models (boundaries, below); 0 for the others. */
    size_t boundary_tokens;  /* the boundary the turn resumed from: its
                                position (= cached_tokens); 0 when cold */
    size_t recomputed_tokens;/* tokens past that boundary whose pages the
                                bank held, recomputed because the prompt
                                left the stored sequence (or the stored
                                sequence ended) between boundaries */
    size_t boundaries_written; /* boundaries this turn recorded (grid, end
                                of prompt, end of turn; one already stored
                                for the same tokens is kept, not rewritten) */
    size_t bank_bytes;       /* bytes taken from the bank, from RAM or
                                disk: the pages covering cached_tokens and
                                the boundary (or point state) */
} sb_rt_turn;

/* sb_rt_turn_miss_reason -- why a turn did not restore its whole prompt:
 * "new_tokens" (the bank held the prompt's start and never held the rest:
 * new text, the usual next turn of a conversation), the bank's miss reason
 * otherwise (sb_miss_name: "no_prefix" when nothing of the prompt was
 * there, "evicted", ...), "recompute_faster" (disk pages matched and
 * recomputing was estimated faster than reading them), "last_position"
 * (everything matched but no logits were stored there: the last position
 * was computed again); NULL when it did. Returns: a static string or NULL. */
const char *sb_rt_turn_miss_reason(const sb_rt_turn *r);

/* Called with each generated token as soon as it is sampled. */
typedef void (*sb_rt_token_fn)(void *ctx, uint32_t id);

/* How a turn generates. */
typedef struct sb_rt_gen {
    size_t n_gen;           /* most tokens to generate (0: prefill only) */
    sb_rt_sampler *smp;     /* the sampler (borrowed) */
    uint32_t stop_id;       /* stop after this token (UINT32_MAX: never) */
    sb_rt_token_fn on_token;/* may be NULL */
    void *cb_ctx;           /* passed to on_token */
    float *prompt_logits;   /* when not NULL: receives the logits of the last
                               prompt position (n_vocab floats) */
} sb_rt_gen;

/* How a session reads the bank. */
typedef enum sb_rt_disk_use {
    SB_RT_DISK_READ = 0,  /* restore disk pages when it pays */
    SB_RT_DISK_NEVER = 1, /* RAM pages only; disk pages are recomputed */
    SB_RT_DISK_ALWAYS = 2,/* restore disk pages whatever the estimates say */
} sb_rt_disk_use;

typedef struct sb_rt_session sb_rt_session;

/* sb_rt_session_new -- an empty session of model m over namespace ns (opened
 * with sb_rt_kv_layout's layout for m), computing with ctx. m, ns and ctx
 * are borrowed and must outlive the session.
 * On success *out is owned by the caller: free with sb_rt_session_free().
 * Returns: SB_OK; SB_ERR_INVAL (NULL, or ns of another shape or without the
 * model's point state: logits, or a boundary for a hybrid model);
 * SB_ERR_NOMEM. */
int sb_rt_session_new(const sb_rt_model *m, sb_rt_ctx *ctx, sb_ns *ns, sb_rt_session **out);

/* sb_rt_session_free -- drop the session's page references and free it.
 * NULL is a no-op. */
void sb_rt_session_free(sb_rt_session *s);

/* sb_rt_session_set_disk_use -- how turns use disk pages (default READ). */
void sb_rt_session_set_disk_use(sb_rt_session *s, sb_rt_disk_use use);

/* sb_rt_session_set_shared_use -- how turns use the bank's shared tier,
 * when it has one (default READ: fetch when estimated faster than
 * recomputing; NEVER: do not ask; ALWAYS: ask whatever the estimates).
 * Hybrid models never ask: a restore needs their boundary, which the
 * shared tier does not keep. */
void sb_rt_session_set_shared_use(sb_rt_session *s, sb_rt_disk_use use);

/* sb_rt_session_set_foreground -- whether turns mark their restore, prefill
 * and decode as foreground phases of the store (sb_store_foreground), so
 * the disk tier's writer holds back during them (default on). */
void sb_rt_session_set_foreground(sb_rt_session *s, int on);

/* ---- boundaries (hybrid models) --------------------------------------------
 *
 * A hybrid model's recurrent layers resume only from a boundary: their
 * state at exactly the restored length (boundary.h), the point state of
 * the namespace. A turn of a hybrid session
 *   - restores the longest prefix L of its prompt that has a boundary at L
 *     (the bank's match, SB_LAYOUT_POINT_REQUIRED): K/V pages to L, the
 *     recurrent state and, when L is the whole prompt, its logits from the
 *     boundary; it reports L (boundary_tokens), the matched tokens past L
 *     it recomputes (recomputed_tokens) and the bytes it read;
 *   - records boundaries while it computes: on the grid of multiples of
 *     `grid` tokens (absolute positions, so every sequence through a shared
 *     prefix records the same boundaries there and the bank keeps one copy),
 *     at the end of the prompt and at the end of the turn. Each carries the
 *     logits of its last position, so a prompt ending on a boundary needs no
 *     forward pass.
 * The policy bounds the grid boundaries one turn records to
 * max_bytes / sb_rt_boundary_bytes of them (the end-of-prompt and
 * end-of-turn boundaries are always recorded: the next turn resumes from
 them). When the grid positions the turn computes are more than that
 * (or than 64), it thins them: counted back from the prompt's end (j = 1
 * the last), it keeps j = 1, then the oldest, then j = 2, 4, 8, ... until
 * the bound: newest kept, older ones thinned by distance from the tail, so
 * a prompt that diverges d grid steps before the tail recomputes at most
 * about d grid steps. Defaults: grid 256,
 * max_bytes 8 boundaries' worth (the seed system's 8 per entry). Recorded
 * boundaries are point states of the bank: they count against its RAM
 * budget, go to the disk tier and are evicted like pages. Earlier turns'
 * boundaries stay until the bank evicts them (least recently used). */

#define SB_RT_BOUNDARY_GRID 256u     /* default grid */
#define SB_RT_BOUNDARY_KEEP 8u       /* default bound, in boundaries */

/* sb_rt_session_set_boundaries -- the boundary policy above: grid (a
 * multiple of SB_RT_GDN_CHUNK = 16, deltanet.h; 0: no grid boundaries) and
 * max_bytes (0: the default, SB_RT_BOUNDARY_KEEP boundaries; less than one
 * boundary: none on the grid). It applies from the next turn begun.
 * Returns: SB_OK; SB_ERR_INVAL (NULL, grid not a multiple of 16, a model
 * without recurrent layers: nothing changed). */
int sb_rt_session_set_boundaries(sb_rt_session *s, size_t grid, size_t max_bytes);

/* sb_rt_session_rates -- the rates the session estimates with, to read or
 * to seed (e.g. from an earlier process). Returns: a pointer into s. */
sb_rt_rates *sb_rt_session_rates(sb_rt_session *s);

/* sb_rt_session_tokens -- the session's committed tokens; *n receives the
 * count. Borrowed until the next call on s. */
const uint32_t *sb_rt_session_tokens(const sb_rt_session *s, size_t *n);

/* sb_rt_session_logits -- the logits after the last turn's last token (the
 * point state it committed): n_vocab floats, borrowed until the next call
 * on s; unspecified before the first turn. */
const float *sb_rt_session_logits(const sb_rt_session *s);

/* sb_rt_session_resume -- set the session's tokens (an earlier process's
 * conversation, sb_rt_session_load) without computing anything: the next
 * turn restores them from the bank, or recomputes what it lacks. tokens is
 * copied. Returns: SB_OK; SB_ERR_INVAL (a token id >= n_vocab);
 * SB_ERR_TOO_MANY_TOKENS (past the context); SB_ERR_NOMEM. */
int sb_rt_session_resume(sb_rt_session *s, const uint32_t *tokens, size_t n);

/* sb_rt_session_turn -- run one turn: input[0, n_input) after the
 * session's tokens (n_input may be 0 when the session has tokens), then up
 * to g->n_gen tokens sampled with g->smp. rep (may be NULL) receives the
 * report. On SB_OK the session's tokens are the prompt and the answer.
 * Returns: SB_OK; SB_ERR_INVAL (NULL s, g or sampler, nothing to run, a
 * token id >= n_vocab); SB_ERR_TOO_MANY_TOKENS (prompt + n_gen past the
 * model's context); SB_ERR_BUDGET, SB_ERR_NOMEM (no page for the KV); on
 * failure the session's tokens are unchanged. */
int sb_rt_session_turn(sb_rt_session *s, const uint32_t *input, size_t n_input,
                       const sb_rt_gen *g, sb_rt_turn *rep);

/* ---- a turn, step by step ----------------------------------------------------------
 *
 *   begin ──► PREFILL ──next/forward/ran──► (prompt done: committed) ──► SAMPLE
 *                (a point-state hit goes straight to SAMPLE)               │
 *   SAMPLE: the logits of the last position are ready (sb_rt_session_logits)
 *           push(id) ──► RUN ──next/forward/ran──► SAMPLE ...
 *   end (any state): commit what was computed, the session's tokens become
 *           the KV's; abort: drop the turn, the tokens stay as they were.
 *
 * The caller owns the order: a step from sb_rt_session_next must run (in
 * sb_rt_forward_multi) and be reported with sb_rt_session_ran before the
 * next call on the session. The session's context is not used by these
 * calls (the caller runs the forward passes, on any context of the same
 * model), so one engine thread may drive many sessions over one context.
 */

/* Where an open turn stands. */
typedef enum sb_rt_turn_state {
    SB_RT_TURN_NONE = 0,    /* no turn open */
    SB_RT_TURN_PREFILL = 1, /* prompt positions remain to compute */
    SB_RT_TURN_SAMPLE = 2,  /* logits ready: push the next token, or end */
    SB_RT_TURN_RUN = 3,     /* a pushed token waits to run */
} sb_rt_turn_state;

/* sb_rt_session_begin -- steps 1-3 of a turn: the prompt (the session's
 * tokens + input[0, n_input)), the match and the restore, for an answer of
 * at most n_gen tokens. rep (may be NULL) receives the report so far
 * (cache_mode, cached tokens, restore_s, miss). On SB_OK the turn is open
 * (PREFILL, or SAMPLE after a point-state hit, whose prompt is already
 * committed). Returns: SB_OK; SB_ERR_INVAL (NULL s, a turn already open,
 * nothing to run, a token id >= n_vocab); SB_ERR_TOO_MANY_TOKENS (prompt +
 * n_gen past the context); SB_ERR_NOMEM and the store's errors of a match
 * (the turn is not open, nothing changed). */
int sb_rt_session_begin(sb_rt_session *s, const uint32_t *input, size_t n_input, size_t n_gen,
                        sb_rt_turn *rep);

/* sb_rt_session_state -- where the turn stands (NONE for NULL). */
sb_rt_turn_state sb_rt_session_state(const sb_rt_session *s);

/* sb_rt_session_next -- the rows to run next into *step (for
 * sb_rt_forward_multi): in PREFILL the next prompt positions, at most
 * max_rows of them, with logits when they end the prompt; in RUN the
 * pushed token. step points into the session until its next call.
 * Returns: the rows (0 in NONE and SAMPLE, or when max_rows is 0). */
size_t sb_rt_session_next(sb_rt_session *s, size_t max_rows, sb_rt_seq_step *step);

/* sb_rt_session_ran -- step (from sb_rt_session_next) has run: on its
 * SB_OK, a finished prompt is committed with its logits (step 4; the
 * report's commit_rc says how that went) and the turn moves to SAMPLE; a
 * run token moves it to SAMPLE. Returns: SB_OK; step->rc when the step
 * failed (the turn stays where it was: end it or abort it). */
int sb_rt_session_ran(sb_rt_session *s, const sb_rt_seq_step *step);

/* sb_rt_session_push -- in SAMPLE, id (sampled by the caller from
 * sb_rt_session_logits) is the answer's next token: it runs next (RUN).
 * The first push sets the report's ttft_s. Returns: SB_OK; SB_ERR_INVAL
 * (not in SAMPLE, id >= n_vocab); SB_ERR_TOO_MANY_TOKENS (the context is
 * full: id cannot run; end the turn). On failure nothing changed. */
int sb_rt_session_push(sb_rt_session *s, uint32_t id);

/* sb_rt_session_report -- the open turn's report so far (or the last
 * turn's after it ended). Borrowed until the next call on s. */
const sb_rt_turn *sb_rt_session_report(const sb_rt_session *s);

/* sb_rt_session_end -- step 5, in any state: commit what was computed (the
 * answer's positions with the logits after the last one; or, for a turn
 * stopped in PREFILL, the prompt positions computed so far, without a
 * point state), and make the session's tokens the KV's (prompt and every
 * token that ran; a pushed token that did not run is not among them).
 * rep (may be NULL) receives the report. The turn is closed either way.
 * Returns: SB_OK; SB_ERR_INVAL (no turn open); SB_ERR_NOMEM (the session's
 * tokens stay as they were before the turn; what was committed stays in the
 * bank). A commit that fails does not fail the call (report commit_rc). */
int sb_rt_session_end(sb_rt_session *s, sb_rt_turn *rep);

/* sb_rt_session_abort -- close the open turn without committing more: the
 * session's tokens stay as they were before it (what was committed, the
 * prompt after step 4, stays in the bank). No turn open: a no-op. */
void sb_rt_session_abort(sb_rt_session *s);

/* ---- session files ----------------------------------------------------------
 *
 * A session's tokens saved between processes (sb_rt_session_save / _load),
 * so a restarted runtime resumes the conversation and finds its KV in the
 * bank. The file is the one session file format, defined in sfile.h and
 * shared with snapbank serve's session registry (server/sessions.h): a
 * runtime session writes version 2 without the conversation section
 * (magic "SBSESSN\0", version, flags 0, model identity, token count, the
 * tokens, XXH3-64: 48 + 4n bytes); _load also reads the files of earlier
 * versions (SBSESSN version 1) and the server's (its extra fields are not
 * used here). Saved to a temporary file, synced, then renamed over the old
 * one, so a crash leaves the old file or the new one.
 */
#define SB_RT_SESSION_FILE_VERSION 2u /* = SB_RT_SFILE_VERSION (sfile.h) */

/* sb_rt_session_save -- write the session's tokens to path (as above).
 * Returns: SB_OK; SB_ERR_IO, SB_ERR_NOSPC (err names the file and the
 * fault; the old file, if any, is left as it was); SB_ERR_NOMEM. */
int sb_rt_session_save(const sb_rt_session *s, const char *path, sb_rt_err *err);

/* sb_rt_session_load -- read the tokens saved at path for model m.
 * On success *tokens (malloc'd, caller frees) and *n receive them.
 * Returns: SB_OK; SB_ERR_NOT_FOUND (no file); SB_ERR_IO; SB_ERR_FORMAT (not
 * a session file, truncated, or failing its checksum); SB_ERR_VERSION;
 * SB_ERR_LAYOUT_MISMATCH (saved with another model); SB_ERR_NOMEM. err names
 * the file and the fault. */
int sb_rt_session_load(const sb_rt_model *m, const char *path, uint32_t **tokens, size_t *n,
                       sb_rt_err *err);

#endif /* SB_RT_SESSION_H */
