/* llama_engine.h -- `snapbank run` and `snapbank chat` with --engine
 * llama.cpp: llama.cpp's libllama loads the model, tokenizes, renders the
 * chat template and computes; the bank is snapbank's, the same store the
 * builtin engine opens (rtcli.h: --bank-dir DIR keeps it in DIR/store),
 * reached through the llama.cpp connector (snapbank_llama.h). Built only
 * where llama.cpp was found (SB_CLI_LLAMA).
 *
 * One engine holds one model, one llama.cpp context and one conversation
 * (its tokens, the "history"). The context has two sequences: 0 is the
 * conversation, 1 the connector's scratch sequence for saves.
 *
 * A turn (rt_llama_turn): its prompt is the history followed by the
 * turn's input. Sequence 0 is cleared and the bank's longest prefix of the
 * prompt (at most all but its last token) restored into it
 * (sb_llama_restore: from RAM, disk or the shared tier); the rest is
 * decoded in batches of --batch, the last prompt token in a batch of its
 * own (so a cold and a restored prompt reach the first sampled token
 * through the same llama.cpp kernels: greedy output is identical whether
 * the prefix was restored or computed); -n tokens are sampled; and what
 * the sequence holds (prompt and decoded answer) is saved to the bank
 * (sb_llama_save). Clearing and restoring every turn, rather than keeping
 * sequence 0 between a chat's turns, is the simpler correct choice: the
 * prompt of the next turn is a re-rendered conversation that may part
 * from the tokens decoded (a chat template closes the answer its own
 * way), and the restore finds exactly the common prefix; it costs a copy
 * of the prefix's state from the bank's RAM tier each turn.
 *
 * A hybrid model (recurrent layers beside attention: the connector keeps
 * the recurrent state as a point state at each save's end, a boundary),
 * or a sliding-window one (the window's cells are that point state):
 * the prefill stops at the grid positions the builtin engine's policy
 * chooses (--boundary-grid, --boundary-kib; sb_rt_boundary_marks) and at
 * all but the last prompt token, and saves at each, so a prompt through a
 * shared prefix resumes from the last grid boundary before it parts, and
 * the same prompt asked again from its end; the turn's save after the
 * answer is the end-of-turn boundary the next turn resumes from. The
 * report adds boundary, recomputed and boundaries_written as the builtin
 * engine's does. (llama.cpp's recurrent kernels, like its attention,
 * give bits that depend on where the prefill is cut: a cold run and a
 * restored one agree bit for bit when they cut at the same places, as
 * the same prompt does.)
 *
 * Sessions (--session ID with --bank-dir): the history is kept in
 * DIR/sessions/ID.llama.session in the builtin engine's session file
 * format (session/sfile.h: the tokens, no conversation section), with
 * the connector's model identity (sb_llama_info.identity: the model
 * file's digest, its state layout and the settings that move K and V) in
 * place of the builtin model's: the two engines never read each other's
 * sessions (a foreign file is refused as made with another model).
 *
 * Thread safety: an engine is used by one thread. */
#ifndef SB_CLI_LLAMA_ENGINE_H
#define SB_CLI_LLAMA_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli/rtcli.h"

typedef struct rt_llama rt_llama;

/* rt_llama_open -- load llama.cpp's CPU backends (once; from
 * $SNAPBANK_LLAMA_BACKENDS, else the directory CMake found), o->model with
 * libllama, a context (n_ctx: the model's training context; --threads,
 * --batch; flash attention auto; two sequences in one unified cache), the
 * sampler (greedy at --temp 0, else top-k, top-p, temperature, seeded),
 * the bank (as rt_env_open: rt_bank_paths, rt_bank_config), attach the
 * connector (model_path o->model, --scope, --page-tokens, scratch
 * sequence 1), and with --session read its history. llama.cpp logs only
 * its errors. Prints what failed naming cmd. o is borrowed until
 * rt_llama_close. Returns: 0 (*out owned by the caller, close with
 * rt_llama_close); 1 failure (*out NULL, everything opened closed). */
int rt_llama_open(const rt_opts *o, const char *cmd, rt_llama **out);

/* rt_llama_close -- save nothing, close the connector, the bank (a store
 * whose close fails is printed naming cmd: its last writes may be lost),
 * the context and the model. NULL is a no-op. Returns: 0; 1 the store's
 * close failed. */
int rt_llama_close(rt_llama *L, const char *cmd);

/* rt_llama_banner -- one line on stderr about the engine: the model
 * (llama.cpp's description, layers, context, vocabulary), load time,
 * threads, the bank, a resumed session. */
void rt_llama_banner(const rt_llama *L, const char *cmd);

/* rt_llama_n_history -- tokens of the conversation so far. */
size_t rt_llama_n_history(const rt_llama *L);

/* rt_llama_tokenize -- text by llama.cpp's tokenizer (llama_tokenize,
 * special tokens parsed as llama.cpp's tools do), BOS first when bos and
 * the model asks for it, into *out (malloc'd, caller frees; empty text
 * without BOS: *n 0, *out non-NULL). Returns: 0; 1 failure (printed). */
int rt_llama_tokenize(const rt_llama *L, const char *text, bool bos, uint32_t **out, size_t *n,
                      const char *cmd);

/* rt_llama_check_ids -- every id of t[0, n) is below the vocabulary
 * size. Returns: 0; 1 one is not (printed naming cmd). */
int rt_llama_check_ids(const rt_llama *L, const uint32_t *t, size_t n, const char *cmd);

/* rt_llama_chat_input -- the input of a chat turn whose user message is
 * msg, so that history + input is the whole conversation rendered by the
 * model's chat template (llama_chat_apply_template): for a new session,
 * the template over (system, when not NULL or empty) and the message,
 * with BOS as the model asks; for one with a history, what the template
 * puts after the last answer -- its end-of-turn, the new message and the
 * assistant's header (found by rendering a stand-in turn before it).
 * A model without a template, or with one llama.cpp does not know, gets
 * the builtin engine's plain format ("\nUser: MSG\nAssistant:", a new
 * session starting with BOS and the system prompt). Returns: 0 (*in
 * malloc'd, caller frees); 1 failure (printed). */
int rt_llama_chat_input(const rt_llama *L, const char *system, const char *msg, uint32_t **in,
                        size_t *n, const char *cmd);

/* What a turn generates, and where it goes. */
typedef struct rt_llama_gen {
    uint64_t n_gen;   /* tokens to sample (0: prefill only) */
    int stop_eog;     /* stop at an end-of-generation token (not kept) */
    void (*emit)(void *ctx, uint32_t id); /* each kept token, or NULL */
    void *emit_ctx;
    float *logits;    /* (n_vocab): the last prompt position's logits, or NULL */
} rt_llama_gen;

/* rt_llama_turn -- one turn over history + in[0, n_in) (above). Fills
 * *r as the builtin engine's sb_rt_session_turn does (cache_mode from the
 * tiers the restore read, cached tokens and from where, restore, prefill,
 * first-token and decode times; the save's outcome in commit_rc and disk;
 * the fields of the builtin's restore-or-recompute estimates and hybrid
 * boundaries 0). A failed save is reported in commit_rc, not as a failure:
 * the turn completes, only its caching is lost. On success the history is
 * the prompt and the kept generated tokens. Returns: 0; 1 failure
 * (printed naming cmd: an empty prompt, one past the context, a restore
 * or decode that failed; the history is unchanged). */
int rt_llama_turn(rt_llama *L, const uint32_t *in, size_t n_in, const rt_llama_gen *g,
                  sb_rt_turn *r, const char *cmd);

/* rt_llama_piece -- the text of token id (llama_token_to_piece, special
 * tokens not rendered) into buf, *n bytes (0 when it does not fit). */
void rt_llama_piece(const rt_llama *L, uint32_t id, char *buf, size_t cap, size_t *n);

/* rt_llama_n_vocab, rt_llama_n_ctx -- the vocabulary size, the context. */
uint32_t rt_llama_n_vocab(const rt_llama *L);
uint32_t rt_llama_n_ctx(const rt_llama *L);

/* rt_llama_save_session -- write the history to the session file (with
 * --session; atomically, as sb_rt_sfile_write). Returns: 0; 1 failure
 * (printed). */
int rt_llama_save_session(rt_llama *L, const char *cmd);

#endif /* SB_CLI_LLAMA_ENGINE_H */
