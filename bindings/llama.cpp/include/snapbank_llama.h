/* snapbank_llama.h -- the llama.cpp connector: a prefix cache for any
 * program that decodes with libllama, kept in a snapbank store (RAM, disk,
 * the shared tier), so a prompt seen before -- in this process, before a
 * restart, or on another machine -- is restored into a llama.cpp sequence
 * instead of being prefilled again.
 *
 * The program keeps its own decode loop and calls the connector around it:
 *
 *     sb_llama_config cfg;
 *     sb_llama_config_default(&cfg);
 *     cfg.model_path = "model.gguf";          // digested into the identity
 *     cfg.cparams = &cparams;                  // what the context was made with
 *     sb_llama *sl;
 *     char err[256];
 *     if (sb_llama_attach(store, ctx, &cfg, &sl, err, sizeof err) != SB_OK)
 *         fail(err);                          // e.g. a model it cannot account for
 *
 *     // a request: restore what the bank holds, decode the rest
 *     sb_llama_restore_info ri;
 *     sb_llama_restore(sl, seq, prompt, n_prompt, n_prompt - 1, &ri);
 *     decode(ctx, seq, prompt + ri.n_restored, n_prompt - ri.n_restored,
 *            ri.n_restored);                  // positions from n_restored
 *     ... generate ...
 *     // after the turn: the sequence's new tokens go into the bank
 *     sb_llama_save(sl, seq, all_tokens, n_all, NULL);
 *
 *     sb_llama_detach(sl);
 *
 * What is stored. At attach the connector decodes two tokens into a probe
 * sequence and parses llama.cpp's sequence state (llama_state_seq_get_data)
 * field by field (src/state.h has its byte diagram): per layer, K's type
 * and row size, V's type and row size, and whether V is stored transposed
 * (flash attention off). Each layer's K and V become two tensors of a
 * snapbank namespace, one row per token, V always token-major. A state
 * that does not parse exactly -- an unknown section, a size that does not
 * add up, a recurrent model with no KV cache, a hybrid with a sliding-
 * window cache, an encoder-decoder -- is refused at attach with a message
 * naming the fault; the connector never restores bytes it could not
 * account for.
 *
 * Hybrid models (llama_model_is_hybrid: recurrent layers beside attention
 * layers, e.g. Qwen3.5's Gated DeltaNet). The attention layers' K and V
 * are paged as above; the recurrent layers' state -- what llama.cpp calls
 * the partial state (LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY), a fixed-size
 * summary of every token before it -- cannot be cut back to an earlier
 * position, so each save keeps it whole as the namespace's point state at
 * the save's end (a boundary; SB_LAYOUT_POINT_REQUIRED), and a restore
 * lands on the longest prefix that ends on one. A program that wants
 * boundaries inside a long prompt (a shared system prompt, a grid of
 * positions) decodes up to each and saves there.
 *
 * Sliding-window models (llama_model_n_swa > 0: layers that attend to a
 * window of recent positions beside layers that attend to all, OLMo 3,
 * Gemma 2/3, ...): llama.cpp keeps the windowed layers in a second cache
 * that holds only the window (its partial state). The full-attention
 * layers are paged as above; the window's cells at the save's end -- at
 * most n_swa + 1 positions of every windowed layer's K and V -- are the
 * point state there, a boundary as for a hybrid, with the same rules.
 *
 * M-RoPE models (Qwen3.5's attention) keep text tokens only: a save checks that every cell is a
 * text token's at its own position, and a restore writes that back.
 *
 * Identity. The namespace's model identity is an XXH3-128 digest of the
 * whole model file (or the caller's own model_id), the state layout the
 * probe found (per layer: types, row sizes, V transposed), and every
 * context parameter that changes the bytes of K or V (the RoPE and YaRN
 * overrides, type_k, type_v). Two contexts that could not exchange state
 * never share a namespace.
 *
 * Sequences. Tokens are at positions 0, 1, ... of their sequence: the
 * connector refuses a sequence whose positions do not start at 0 or have
 * a hole (a context shift, llama_memory_seq_add). llama_token values must
 * be >= 0.
 *
 * Threads. One handle belongs to one llama_context, which is not
 * thread-safe: calls on one handle (and decodes on its context) must not
 * run at the same time. Handles on different contexts may share one store
 * from different threads (the store is thread-safe).
 *
 * Errors. Every call that can fail returns SB_OK or a negative code: the
 * store's sb_err codes (snapbank_store.h) and the connector's own
 * (enum sb_llama_err); sb_llama_strerror names both. */
#ifndef SNAPBANK_LLAMA_H
#define SNAPBANK_LLAMA_H

#include <stddef.h>
#include <stdint.h>

#include "llama.h"
#include "snapbank.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SB_LLAMA_VERSION 1 /* this header's version; also in the identity */

/* The connector's own error codes (the store's are -1 .. -99). */
enum sb_llama_err {
    SB_LLAMA_ERR_FORMAT = -100,   /* llama.cpp's sequence state is not one this
                                     connector parses: a model or memory kind
                                     it does not know, or bytes that do not
                                     add up */
    SB_LLAMA_ERR_SETTING = -101,  /* a context setting the connector cannot
                                     keep state for (no free sequence for
                                     the probe, a state that disagrees with
                                     the parameters given) */
    SB_LLAMA_ERR_DECODE = -102,   /* a libllama call failed: llama_decode,
                                     or getting or setting a sequence state */
    SB_LLAMA_ERR_SEQ = -103,      /* the sequence is not what the call needs
                                     (not empty for a restore; positions not
                                     0 .. n-1 for a save; an id out of range) */
    SB_LLAMA_ERR_MODEL_FILE = -104 /* the model file could not be read for
                                     its digest */
};

/* sb_llama_strerror -- a short English description of a connector code or
 * of any sb_err code (sb_strerror). Never NULL. */
SB_API const char *sb_llama_strerror(int err);

typedef struct sb_llama sb_llama;

/* What to attach with. Fill with sb_llama_config_default, then set at
 * least cparams and one of model_path or model_id. */
typedef struct sb_llama_config {
    const char *model_path;       /* the GGUF file the model was loaded from:
                                     its bytes are digested (XXH3-128, one
                                     read of the file) into the identity */
    const void *model_id;         /* instead of model_path: the caller's own
                                     identity bytes for the model (1 .. 512),
                                     e.g. a digest it keeps */
    size_t model_id_bytes;
    const struct llama_context_params *cparams; /* the parameters the context
                                     was created with (required) */
    const void *scope;            /* the namespace's scope (a tenant or a
                                     session); NULL with scope_bytes 0: the
                                     empty scope */
    size_t scope_bytes;
    uint32_t page_tokens;         /* tokens per page; 0: 64 */
    llama_seq_id probe_seq;       /* the sequence the attach decodes its probe
                                     into; it must be empty and is left
                                     empty (default 0) */
    llama_seq_id scratch_seq;     /* a sequence id the program never uses,
                                     reserved for the connector's saves, so a
                                     save exports only the new tokens
                                     (llama_memory_seq_cp to it, export,
                                     remove); -1 (default): none, each save
                                     exports the whole sequence and keeps
                                     only its new part */
    int whole_pages;              /* 1: a save keeps only the sequence's whole
                                     pages, never a partial last page, so a
                                     chat's disk tier writes each page once
                                     (a partial page written at a periodic
                                     sync and then superseded by the next
                                     turn's longer one costs a whole page);
                                     the tail, under page_tokens tokens, is
                                     decoded again by the next restore.
                                     0 (default): every token is kept */
    size_t prefault_tokens;       /* make the bank's page buffers and the
                                     connector's staging buffer for restores
                                     of this many tokens ready at attach
                                     (sb_ns_prefault), as an engine
                                     allocates its KV cache at start, so the
                                     first restore after a start costs no
                                     page faults; 0 (default): none */
} sb_llama_config;

/* sb_llama_config_default -- every field to its default (no model, no
 * parameters, empty scope, 64 tokens a page, probe 0, no scratch). */
SB_API void sb_llama_config_default(sb_llama_config *cfg);

/* sb_llama_attach -- attach a store to a llama.cpp context.
 *
 * Probes the context (two tokens decoded into cfg->probe_seq, its state
 * read and parsed, the sequence emptied again: the context's logits are
 * overwritten, so attach before decoding), digests the model file, and
 * opens the namespace of that identity and cfg->scope in st. The store
 * and the context are borrowed: both must outlive the handle. cfg and the
 * strings it points at are read during the call only.
 *
 * On success *out is owned by the caller: free it with sb_llama_detach.
 * On failure *out is NULL and, when err is not NULL, err receives a
 * message (at most err_len bytes, NUL-terminated) naming the fault.
 * Returns: SB_OK; SB_ERR_INVAL (NULL st, ctx, cfg, cparams or out; neither
 * model_path nor model_id, or both; model_id too long); SB_LLAMA_ERR_FORMAT
 * (a recurrent model with no KV cache, a hybrid with recurrent rollback
 * snapshots (n_rs_seq) or a sliding-window cache, an encoder model, or a
 * probe state that does not parse exactly); SB_LLAMA_ERR_SETTING
 * (probe_seq out of range or not empty; a probe state whose K or V type
 * is not cparams' type_k / type_v; whole_pages with a hybrid or
 * sliding-window model; a point state over SB_POINT_BYTES_MAX); SB_LLAMA_ERR_DECODE (the probe's
 * decode or state read failed); SB_LLAMA_ERR_MODEL_FILE; the codes of
 * sb_ns_open (SB_ERR_LAYOUT_MISMATCH: the namespace exists with another
 * page size); SB_ERR_NOMEM. */
SB_API int sb_llama_attach(sb_store *st, struct llama_context *ctx, const sb_llama_config *cfg,
                           sb_llama **out, char *err, size_t err_len);

/* sb_llama_detach -- close the handle (its namespace handle, its buffers).
 * The store keeps what was saved; the context is untouched. NULL is a
 * no-op. */
SB_API void sb_llama_detach(sb_llama *sl);

/* What the probe found and the namespace the handle uses. */
typedef struct sb_llama_info {
    uint32_t n_layer;             /* layers with a KV cache */
    uint32_t v_trans;             /* 1: llama.cpp keeps V transposed */
    int32_t k_type, v_type;       /* ggml types of layer 0's K and V */
    uint64_t bytes_per_token;     /* K and V of every layer, one token */
    uint32_t page_tokens;
    uint8_t identity[16];         /* the namespace's model identity */
    sb_ns *ns;                    /* the namespace (borrowed until detach) */
    uint32_t n_layer_recurrent;   /* a hybrid model's recurrent layers; 0: none */
    uint32_t n_layer_swa;         /* a sliding-window model's windowed layers
                                     (not in n_layer); 0: none */
    uint64_t point_bytes;         /* the point state kept at each save's end:
                                     a hybrid's recurrent state, a sliding-
                                     window model's window; 0: none */
} sb_llama_info;

/* sb_llama_get_info -- describe an attached handle.
 * Returns: SB_OK; SB_ERR_INVAL (NULL argument). */
SB_API int sb_llama_get_info(const sb_llama *sl, sb_llama_info *out);

/* What a restore did. */
typedef struct sb_llama_restore_info {
    size_t n_restored;            /* tokens now in the sequence, at positions
                                     [0, n_restored) */
    size_t tokens_ram;            /* of them, from pages that were in RAM */
    size_t tokens_disk;           /* ... read from the disk tier */
    size_t tokens_remote;         /* ... fetched from the shared tier */
    sb_miss miss;                 /* why not max_tokens (SB_MISS_NONE if equal) */
    size_t n_matched;             /* tokens of the prompt the bank's pages
                                     matched (>= n_restored: a hybrid's
                                     restore stops at the last boundary
                                     before; the rest is decoded again) */
    double restore_ms;            /* wall time of the call, of which: */
    double bank_ms;               /* the bank: match, shared-tier fetch, disk
                                     reads, pages copied into llama.cpp's
                                     state format */
    double set_ms;                /* llama.cpp: llama_state_seq_set_data */
} sb_llama_restore_info;

/* sb_llama_restore -- put the longest prefix of tokens[0, max_tokens) that
 * the bank can restore into sequence seq, exactly: after SB_OK with
 * n_restored > 0 the sequence holds the state of tokens[0, n_restored) at
 * positions 0 .. n_restored - 1, byte for byte what llama.cpp computed for
 * them, and the program decodes tokens[n_restored, ...) from position
 * n_restored. A program that samples after the prompt passes max_tokens =
 * n_tokens - 1, so at least one token is decoded and gives logits.
 *
 * The bank is asked in this order: the RAM and disk tiers (one match),
 * then, when the store has a shared tier and the match is short of
 * max_tokens, the shared tier (sb_ns_fetch_shared) and a second match.
 * Disk pages are read and checked; a page that fails shrinks the restore
 * to the valid prefix before it (SB_OK all the same: the caller decodes
 * more; info->miss says SB_MISS_CORRUPT or SB_MISS_IO). A shared tier that
 * fails or times out is a miss, not an error.
 *
 * With a scratch sequence and one cache (kv_unified, or one sequence) the
 * state goes in 1,024 tokens at a time: each chunk into the scratch
 * sequence, then llama_memory_seq_cp to seq (no bytes move), the disk
 * pages' reads started first and running ahead of the chunks; the
 * scratch sequence is left empty. Otherwise the whole state is staged and
 * set at once. The handle keeps its staging buffer (a chunk's state, or
 * the largest whole state it set) until detach.
 *
 * A hybrid or sliding-window model's restore ends on a boundary (its
 * recurrent state or window is set with the K and V, in one piece:
 * llama.cpp copies a recurrent state between sequences whole, and a
 * window belongs to the last position, so the scratch sequence's chunks
 * are not used)
 * and is never longer than the last boundary at or before max_tokens;
 * info->miss says SB_MISS_NO_POINT when pages reached further.
 *
 * seq must be empty (llama_memory_seq_rm it first): a restore never mixes
 * with what a sequence holds. With n_restored 0 the sequence is untouched.
 * tokens is read during the call only; info may be NULL.
 *
 * Returns: SB_OK (info says how much, and from which tier); SB_ERR_INVAL
 * (NULL sl or tokens, a negative token, max_tokens > n_tokens);
 * SB_LLAMA_ERR_SEQ (seq out of range or not empty); SB_LLAMA_ERR_DECODE
 * (llama.cpp refused the state, e.g. no free cells for it: the sequence
 * is empty); SB_ERR_NOMEM, SB_ERR_BUDGET (no memory to read or stage the
 * pages: the sequence is untouched). On every error *info reads 0 tokens. */
SB_API int sb_llama_restore(sb_llama *sl, llama_seq_id seq, const llama_token *tokens,
                            size_t n_tokens, size_t max_tokens, sb_llama_restore_info *info);

/* What a save did. */
typedef struct sb_llama_save_info {
    size_t n_stored;              /* tokens of this sequence the bank holds
                                     (restorable) after the call */
    size_t n_new;                 /* tokens whose state this call put: those
                                     past what the bank already held */
    uint64_t bytes_exported;      /* bytes of llama.cpp state read for it */
    double save_ms;               /* wall time of the call */
    sb_write_outcome outcome;     /* what the disk tier did with it */
} sb_llama_save_info;

/* sb_llama_save -- put the state of sequence seq's tokens[0, n_tokens)
 * into the bank. tokens are the tokens at positions 0 .. n_tokens - 1 of
 * the sequence (the caller's word: llama.cpp does not keep them); the
 * sequence may hold more positions (generated tokens not yet kept). With
 * cfg->whole_pages the save stops at the last whole page (n_tokens rounded
 * down to page_tokens; nothing when that is 0). Only
 * the tokens past the prefix the bank already holds are exported and put
 * (with a scratch sequence, only they are read from llama.cpp; without
 * one the whole sequence is read and the rest dropped). Budgets,
 * durability and the disk tier's outcome as sb_ns_put_blocks. info may be
 * NULL. A hybrid or sliding-window model's save is a boundary: n_tokens
 * must be the sequence's length (its recurrent state, or its window, is
 * that of its last position only), and that goes in as the point state
 * at n_tokens beside the new K and V (a window's cells are exported
 * through the scratch sequence with the new tokens) (with SB_ERR_BUDGET it may be the point that did
 * not fit: the sequence is then restorable only to an earlier boundary).
 *
 * Returns: SB_OK; SB_ERR_BUDGET (the RAM budgets held a prefix only:
 * info->n_stored says how much); SB_ERR_INVAL (NULL sl or tokens, a
 * negative token); SB_ERR_NO_TOKENS; SB_LLAMA_ERR_SEQ (seq out of range,
 * or its positions are not 0 .. at least n_tokens - 1 with no hole; a
 * hybrid's or sliding-window model's not exactly 0 .. n_tokens - 1; a
 * window that is not the n_swa + 1 positions before n_tokens at most; an
 * M-RoPE cell that is not the
 * text token tokens[] has there);
 * SB_LLAMA_ERR_DECODE (llama.cpp's state read failed); SB_LLAMA_ERR_FORMAT
 * (the exported state does not parse as the probe's did: nothing stored);
 * the other codes of sb_ns_put_blocks. */
SB_API int sb_llama_save(sb_llama *sl, llama_seq_id seq, const llama_token *tokens,
                         size_t n_tokens, sb_llama_save_info *info);

#ifdef __cplusplus
}
#endif

#endif /* SNAPBANK_LLAMA_H */
