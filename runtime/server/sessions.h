/* sessions.h -- snapbank serve's session registry: named conversations
 * (session_id) whose exact tokens are kept between requests, per tenant,
 * so a next turn continues from the very tokens the bank holds rather than
 * a re-tokenized copy of the answer. (Not a runtime session,
 * session/session.h, the conversation over a model that one turn runs
 * through, nor a batch job, batch/batch.h.)
 *
 * A session holds the token sequence its last turn committed (the prompt
 * and the answer's tokens), the text those tokens spell (the rendered
 * prompt, then the answer as generated, control tokens spelled as a
 * template writes them) and marks: points (tokens, text bytes) where the
 * two agree -- the end of every prompt, and every answer token that ends on
 * a whole character. A request naming the session renders its prompt text
 * R; when R begins with the session's text up to a mark, its prompt is the
 * session's first tokens up to that mark followed by the rest of R
 * tokenized (the longest such mark). So a client that sends the whole
 * conversation back (the OpenAI way) gets the answer's own tokens, and the
 * bank matches all of it. With no mark in common, or no session, R is
 * tokenized whole, and still matches whatever the bank holds for the
 * tenant (a shared system prompt hits across conversations).
 *
 * One request at a time per session (a second one meanwhile is refused).
 * Sessions stay in RAM (the --max-sessions least recently used; a session
 * not in RAM is read back from its file) and, with --bank-dir, in files
 * DIR/sessions/TENANT/ID.sbs (the default tenant's in
 * DIR/sessions/@default/), written by a background thread after each turn
 * (temporary file, fsync, rename: a crash leaves the old file or the new).
 *
 * The file is the one session file format (session/sfile.h), version 2
 * with its conversation section: the tokens, the marks (bit 63 of a mark's
 * tokens: a prompt's end; the marks inside earlier answers are not kept),
 * the text, the turn count, created and updated, and the last turn's
 * figures. Files of this server's version 1 (magic "SBSRVSES") are read as
 * before and rewritten as version 2 after the session's next turn; a file
 * a runtime session saved (sb_rt_session_save, no section) gives its
 * tokens alone (no marks, no text; created and updated from its mtime).
 *
 * A file that fails any check is named on stderr and the session starts
 * empty (its conversation is still matched in the bank by its text).
 *
 * Thread safety: every call may come from any thread (one mutex for the
 * table, another serializing file writes and removals).
 */
#ifndef SB_SRV_SESSIONS_H
#define SB_SRV_SESSIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "core/rt.h"
#include "batch/batch.h"
#include "server/tenants.h"

#define SRV_SESSION_ID_MAX 128u

typedef struct srv_sessions srv_sessions;
typedef struct srv_session srv_session;

/* srv_session_id_valid -- 1-128 of A-Z a-z 0-9 . _ -, not starting '.'. */
bool srv_session_id_valid(const char *id);

/* srv_sessions_new -- a registry keeping files under dir (NULL: RAM only;
 * created 0700 when absent) for the model whose identity is model_id (16
 * bytes, copied), at most max_in_ram sessions in RAM. On success *out is
 * owned by the caller (srv_sessions_free). Returns: SB_OK; SB_ERR_IO
 * (cannot create dir: err says why); SB_ERR_NOMEM. */
int srv_sessions_new(const char *dir, const uint8_t *model_id, size_t max_in_ram,
                     srv_sessions **out, sb_rt_err *err);

/* srv_sessions_flush -- write every session changed since its last write,
 * now. Returns: the sessions written; *failed (may be NULL) how many could
 * not be (named on stderr). */
size_t srv_sessions_flush(srv_sessions *r, size_t *failed);

/* srv_sessions_free -- flush, stop the writer, free. NULL is a no-op. */
void srv_sessions_free(srv_sessions *r);

/* srv_sessions_acquire -- the session id of tenant t for a request, made
 * empty when there is none; it is the caller's until srv_sessions_release.
 * Returns: SB_OK; SB_ERR_LOCKED (another request holds it); SB_ERR_NOMEM. */
int srv_sessions_acquire(srv_sessions *r, const srv_tenant *t, const char *id,
                         srv_session **out);

/* srv_session_prefix -- how much of text (the request's rendered prompt)
 * the session's tokens stand for: the longest mark whose text is a prefix
 * of text. *n_tokens receives its tokens and *tokens (may be NULL) a
 * pointer to them (borrowed while the session is acquired). Returns: its
 * text bytes (0 with *n_tokens 0 when none). */
size_t srv_session_prefix(const srv_session *s, const char *text, size_t len,
                          const uint32_t **tokens, size_t *n_tokens);

/* What a turn leaves in its session. */
typedef struct srv_session_turn {
    const uint32_t *tokens;   /* the committed sequence: prompt + answer tokens */
    size_t n_tokens;
    size_t n_prompt;          /* its first n_prompt are the prompt */
    const char *prompt_text;  /* the rendered prompt (NULL: a token prompt,
                                 the session keeps no text) */
    size_t prompt_len;
    size_t kept_text, kept_tokens; /* the session prefix the prompt began
                                 with (srv_session_prefix), 0 when none */
    const char *answer_text;  /* the answer's text as the tokens spell it */
    const sb_rt_gen_mark *marks;/* marks in the answer (tokens after the prompt) */
    size_t n_marks;
    size_t cached_tokens, cached_disk_tokens, completion_tokens;
    int cache_mode;           /* sb_rt_cache_mode */
    double restore_s;
} srv_session_turn;

/* srv_sessions_release -- the request is done with s; with turn (may be
 * NULL: nothing changed) the session becomes that turn's and is queued for
 * its file. A session made by srv_sessions_acquire and released without a
 * turn (the request was refused, or failed) is forgotten again. */
void srv_sessions_release(srv_sessions *r, srv_session *s, const srv_session_turn *turn);

/* srv_sessions_get -- the session id of tenant t as a JSON object (owned
 * by the caller: id, object "session", created, updated, turns, tokens,
 * reusable_tokens -- the tokens up to its last mark, which a next turn that
 * sends the conversation back reuses --, text_bytes, last_turn, busy), with
 * its tokens copied into *tokens (malloc'd, caller
 * frees) for the caller to match in the bank. Returns: SB_OK;
 * SB_ERR_NOT_FOUND; SB_ERR_NOMEM. */
int srv_sessions_get(srv_sessions *r, const srv_tenant *t, const char *id, json_t **out,
                     uint32_t **tokens, size_t *n_tokens);

/* srv_sessions_delete -- forget the session and remove its file.
 * Returns: SB_OK; SB_ERR_NOT_FOUND; SB_ERR_LOCKED (a request holds it). */
int srv_sessions_delete(srv_sessions *r, const srv_tenant *t, const char *id);

/* srv_sessions_count -- sessions in RAM. */
size_t srv_sessions_count(srv_sessions *r);

#endif /* SB_SRV_SESSIONS_H */
