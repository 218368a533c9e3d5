/* snapbank_rt.h -- the runtime's public header: a flat C API over the CPU
 * inference runtime for programs and language bindings (the Python package
 * in bindings/python calls it through ctypes): plain types, error text into
 * caller buffers, reports and stats as JSON. It is exported by
 * libsnapbank_rt.so (pkg-config snapbank_rt), which also exports the
 * store's API (snapbank.h); installed beside snapbank.h.
 *
 * Ownership: every object returned is freed by its *_free / *_close call;
 * buffers passed in are borrowed for the call only.
 * Thread safety: an sbrt_chat is used by one thread at a time; models may
 * be shared by chats on different threads (they are read-only).
 */
#ifndef SNAPBANK_RT_H
#define SNAPBANK_RT_H

#include <stddef.h>
#include <stdint.h>

#include "snapbank.h"

#define SBRT_API __attribute__((visibility("default")))

typedef struct sb_rt_model sb_rt_model;

/* sbrt_model_load -- load a GGUF model into *out (free with
 * sbrt_model_free). Returns: SB_OK; the errors of sb_rt_model_load
 * (SB_ERR_IO, SB_ERR_FORMAT, SB_ERR_UNSUPPORTED, ...) with the fault,
 * naming the file, in err. */
SBRT_API int sbrt_model_load(const char *path, sb_rt_model **out, char *err, size_t cap);

/* sbrt_model_free -- NULL is a no-op. */
SBRT_API void sbrt_model_free(sb_rt_model *m);

/* sbrt_model_n_vocab, sbrt_model_n_ctx -- the vocabulary size and context
 * length. */
SBRT_API uint32_t sbrt_model_n_vocab(const sb_rt_model *m);
SBRT_API uint32_t sbrt_model_n_ctx(const sb_rt_model *m);

/* sbrt_model_eos -- the EOS token id; UINT32_MAX without a vocabulary. */
SBRT_API uint32_t sbrt_model_eos(const sb_rt_model *m);

/* sbrt_make_model -- write a generated model (snapbank make-model): preset
 * one of make-model's (SB_RT_MAKE_PRESETS: "tiny", "small", "tiny-qwen3",
 * "llama3-1b", ...), dtype one of make-model's --dtype names ("f32",
 * "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q4_k", "q5_k",
 * "q6_k", "q4_k_m", "q5_k_m") or NULL (the preset's).
 * Returns: SB_OK; an sb_err code with the fault in err. */
SBRT_API int sbrt_make_model(const char *preset, const char *dtype, uint64_t seed,
                             const char *path, char *err, size_t cap);

/* sbrt_tokenize -- ids of text[0, len) (BOS first when bos and the model
 * asks for it) into ids[0, cap); *n receives the count (the size needed
 * when it returns SB_ERR_RANGE). Control-token texts ("<|im_start|>")
 * stay text; user-defined tokens' texts become those tokens, as
 * llama.cpp's llama_tokenize with parse_special false. Returns: SB_OK; SB_ERR_RANGE;
 * SB_ERR_UNSUPPORTED (the model has no usable vocabulary); SB_ERR_NOMEM. */
SBRT_API int sbrt_tokenize(const sb_rt_model *m, const char *text, size_t len, int bos,
                           uint32_t *ids, size_t cap, size_t *n);

/* sbrt_detokenize -- the text of ids into buf[0, cap); *len receives its
 * length (the size needed with SB_ERR_RANGE). Returns: SB_OK; SB_ERR_RANGE
 * (cap too small, or an id out of range); SB_ERR_UNSUPPORTED. */
SBRT_API int sbrt_detokenize(const sb_rt_model *m, const uint32_t *ids, size_t n, char *buf,
                             size_t cap, size_t *len);

/* A session over a store: its namespace (the model's KV layout and a
 * scope), a forward context and the session (runtime/session/session.h). */
typedef struct sbrt_chat sbrt_chat;

/* sbrt_chat_open -- a session of model m in store st under scope (may be
 * NULL when scope_len is 0), on threads threads (0: every CPU), KV pages of
 * page_tokens (0: 16). st and m must outlive it.
 * Returns: SB_OK with *out (free with sbrt_chat_close); the errors of
 * sb_ns_open, sb_rt_ctx_new and sb_rt_session_new. */
SBRT_API int sbrt_chat_open(sb_store *st, const sb_rt_model *m, const void *scope,
                            size_t scope_len, unsigned threads, uint32_t page_tokens,
                            sbrt_chat **out);

/* sbrt_chat_close -- NULL is a no-op. */
SBRT_API void sbrt_chat_close(sbrt_chat *c);

/* sbrt_chat_resume -- set the session's tokens (sb_rt_session_resume). */
SBRT_API int sbrt_chat_resume(sbrt_chat *c, const uint32_t *tokens, size_t n);

/* sbrt_chat_tokens -- copy up to cap of the session's tokens into out.
 * Returns: how many it has (may exceed cap). */
SBRT_API size_t sbrt_chat_tokens(const sbrt_chat *c, uint32_t *out, size_t cap);

/* sbrt_chat_turn -- one turn (sb_rt_session_turn): input[0, n_in), then up
 * to n_gen tokens sampled with (temp, top_k, top_p, seed), stopping after
 * stop_id (UINT32_MAX: never). The generated ids go to out (n_gen of room),
 * their count to *n_out; the turn's report to report as a JSON object
 * (cache_mode, prompt_tokens, cached_tokens, cached_disk_tokens,
 * cached_shared_tokens, prefill_tokens, gen_tokens, matched_tokens, miss, point_hit,
 * disk_skipped, est_read_s, est_recompute_s, restore_s, restore_cpu_s,
 * restore_faults, restore_bytes, prefill_s, ttft_s, decode_s,
 * prefill_tok_s, decode_tok_s, boundary_tokens, recomputed_tokens,
 * boundaries_written, bank_bytes, commit_error; durable: "yes",
 * "pending", "no" or null without a disk tier; disk: the turn's
 * sb_write_outcome as sb_rt_turn.disk has it -- ticket, pages_new,
 * points_new, queued, written, deferred, dirty, denied and denied_by keyed
 * by sb_deny_name).
 * Returns: SB_OK; SB_ERR_RANGE (report_cap too small: 2048 is enough); the
 * errors of sb_rt_session_turn and sb_rt_sampler_init. */
SBRT_API int sbrt_chat_turn(sbrt_chat *c, const uint32_t *input, size_t n_in, size_t n_gen,
                            float temp, uint32_t top_k, float top_p, uint64_t seed,
                            uint32_t stop_id, uint32_t *out, size_t *n_out, char *report,
                            size_t report_cap);

/* sbrt_chat_turn_batch -- one turn for each of chats[0, n) at once, their
 * prompt chunks and decode steps sharing forward passes (continuous
 * batching, runtime/batch): chat k's input is inputs[k][0, n_in[k]), then
 * up to n_gen (>= 1) tokens are sampled with (temp, top_k, top_p,
 * seeds[k]), stopping after stop_id (UINT32_MAX: never). Batching never
 * changes an answer: chat k gets the ids its own sbrt_chat_turn would give
 * (into outs[k], n_gen of room; their count into n_outs[k]), and its
 * session continues after them. The chats must be distinct and of one
 * model; each turn runs in its chat's namespace; the passes run on the
 * first chat's threads. rcs (may be NULL) receives each chat's outcome;
 * reports (may be NULL) n buffers of report_cap bytes for each chat's
 * report (sbrt_chat_turn's JSON). A turn that reaches the end of the
 * context ends there (SB_OK, fewer ids).
 * Returns: SB_OK (every turn ran); SB_ERR_INVAL (a NULL argument, n or
 * n_gen 0, a chat twice, chats of different models, a chat without
 * tokens and an empty input: nothing ran); SB_ERR_NOMEM (nothing ran, or
 * in rcs: that chat's result could not be kept); otherwise the first
 * chat's error in rcs order: the errors of sb_rt_session_begin and of a
 * forward pass (that chat keeps the tokens it had), SB_ERR_RANGE
 * (report_cap too small: the turn ran). A chat whose rcs is SB_OK ran its
 * turn and continues after it. */
SBRT_API int sbrt_chat_turn_batch(sbrt_chat *const *chats, size_t n,
                                  const uint32_t *const *inputs, const size_t *n_in,
                                  size_t n_gen, float temp, uint32_t top_k, float top_p,
                                  const uint64_t *seeds, uint32_t stop_id,
                                  uint32_t *const *outs, size_t *n_outs, int *rcs,
                                  char *const *reports, size_t report_cap);

/* ---- a bare decoder ----------------------------------------------------------
 *
 * A model decoding greedily, one token per forward pass, over a KV cache
 * in a store's namespace, with nothing matched in the bank and nothing
 * committed to it: the decode speed of the runtime over the store's page
 * pool, which is what `snapbank bench` measures as a store job's
 * foreground (its KV pages come from the job's store, so the job's RAM use
 * and writes are felt by each step). Conversations use sbrt_chat.
 *
 *   sbrt_decoder_open(st, m, "decode", 6, 1, &d);
 *   sbrt_decoder_prefill(d, prompt, n);          // the KV: prompt[0, n)
 *   for (...) sbrt_decoder_step(d, &id);         // one token each
 *   sbrt_decoder_close(d);
 */
typedef struct sbrt_decoder sbrt_decoder;

/* sbrt_decoder_open -- a decoder of model m whose KV pages (of 16 tokens)
 * live in store st under scope (may be NULL when scope_len is 0), on
 * threads threads (0: every CPU). st and m must outlive it.
 * Returns: SB_OK with *out (free with sbrt_decoder_close); SB_ERR_INVAL
 * (NULL st, m or out); the errors of sb_ns_open and sb_rt_ctx_new. */
SBRT_API int sbrt_decoder_open(sb_store *st, const sb_rt_model *m, const void *scope,
                               size_t scope_len, unsigned threads, sbrt_decoder **out);

/* sbrt_decoder_close -- drop its pages and free it. NULL is a no-op. */
SBRT_API void sbrt_decoder_close(sbrt_decoder *d);

/* sbrt_decoder_prefill -- forget the sequence, then run ids[0, n) (n >= 1)
 * as its start; the next step continues from the last one's logits.
 * Returns: SB_OK; SB_ERR_INVAL (NULL, n 0, an id >= n_vocab);
 * SB_ERR_TOO_MANY_TOKENS (past the context); SB_ERR_BUDGET, SB_ERR_NOMEM
 * (no page for the KV). On failure the decoder holds no sequence. */
SBRT_API int sbrt_decoder_prefill(sbrt_decoder *d, const uint32_t *ids, size_t n);

/* sbrt_decoder_step -- one decode step: the token with the highest logit
 * after the sequence (lowest id on ties, as sbrt_chat_turn's temperature
 * 0 picks it) into *id, then run through the model, so the sequence grows
 * by one. Returns: SB_OK; SB_ERR_INVAL (NULL, or no sequence: prefill
 * first); SB_ERR_TOO_MANY_TOKENS (the context is full: prefill again;
 * nothing changed); SB_ERR_BUDGET, SB_ERR_NOMEM (no page: the decoder
 * holds no sequence). */
SBRT_API int sbrt_decoder_step(sbrt_decoder *d, uint32_t *id);

/* sbrt_stats_json -- the store's stats (sb_store_stats) as a JSON object
 * with sb_stats' field names; misses by reason as objects keyed by
 * sb_miss_name, disk_denials and disk_denied_bytes keyed by sb_deny_name. Returns: SB_OK; SB_ERR_RANGE (cap too small: 8192 is
 * enough); SB_ERR_INVAL. */
SBRT_API int sbrt_stats_json(sb_store *st, char *buf, size_t cap);

/* sbrt_sizeof -- sizeof the public structs a binding mirrors, so it can
 * check its copies: 0 sb_config, 1 sb_layout, 2 sb_match_info,
 * 3 sb_ns_info, 4 sb_write_outcome. Returns: the size; 0 for anything
 * else. */
SBRT_API size_t sbrt_sizeof(int which);

#endif /* SNAPBANK_RT_H */
