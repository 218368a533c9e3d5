/* llama_host.h -- llama.cpp as the runtime's compute: a model loaded by
 * libllama, one llama_context whose sequences are the batching module's
 * slots (batch/compute.h), and the bank reached through the llama.cpp
 * connector (snapbank_llama.h), one connector handle per scope (a
 * tenant's namespace). `snapbank serve --engine llama.cpp` runs on it.
 * Built only where llama.cpp was found (SB_HAVE_LLAMA).
 *
 * The context, as llama-server makes it: n_ctx cells split evenly among
 * the slots' sequences (n_seq_max = slots), each sequence in a KV stream
 * of its own, so a sequence reaches n_ctx / slots tokens and its
 * attention reads its own cells only. With kv_unified (llama-server's
 * --kv-unified) the slots share one stream of n_ctx cells instead, and
 * one more sequence is the connector's scratch, which makes saves and
 * restores cheaper (only new tokens exported; restores in chunks); a
 * sequence may then reach n_ctx tokens, but several long ones may find
 * the cells taken: then prompt chunks wait for cells, and where decode
 * steps alone find none, the turn whose sequence holds the most cells
 * ends as at its context's end (compute.h's ran: SB_ERR_TOO_MANY_TOKENS;
 * a turn still in its prompt fails with it). And every token's attention
 * reads every used cell of the stream, its own sequence's or not: with
 * many long conversations that costs more than it saves.
 *
 * A slot's turn (compute.h's steps over llama.cpp):
 *   begin: the slot's sequence is cleared and the bank's longest prefix
 *     of the prompt, at most all but its last token, restored into it
 *     (sb_llama_restore: RAM, disk, then the shared tier); a restore that
 *     fails for want of memory, cells or a readable page leaves the
 *     sequence empty and the turn cold. The report says where the prefix
 *     came from as the builtin engine's does.
 *   plan: prompt rows up to the budget, logits for the prompt's last
 *     (a hybrid's prefill also stops at its grid boundaries and before the
 *     last token, saving a boundary at each); in RUN the pushed token.
 *   pass: one llama_decode of every slot's planned rows.
 *   end: the tokens that ran are saved; the sequence is kept (in a KV
 *     stream of its own, for a model whose state can be cut back: not a
 *     hybrid's, not a window) for the same tenant's next turn that
 *     continues it: the batching module gives a job the free slot that
 *     holds most of its prompt (compute.h's affinity), and begin keeps
 *     that part (at least 64 tokens and half the prompt) instead of
 *     restoring it, as llama-server keeps a slot's cache; else the
 *     sequence is emptied at the next begin.
 *   The prompt is saved before the first token only where it must be
 *     (a hybrid's boundary) or another turn waits to restore it (batch.h);
 *     else the turn's end saves it with the answer.
 * Logits are copied out of llama.cpp at ran (n_vocab floats per slot).
 * llama.cpp's kernels do not promise the same bits for a row whatever
 * else shares its pass: a greedy answer may differ in its later tokens
 * between a request that ran alone and one batched beside others.
 *
 * Thread safety: open and close from one thread; attach, detach and
 * every call of the compute from the engine thread, or while it is idle
 * (a barrier: the server's bank clear). */
#ifndef SB_RT_LLAMA_HOST_H
#define SB_RT_LLAMA_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "batch/compute.h"
#include "snapbank.h"
#include "snapbank_llama.h"

typedef struct sb_rt_llama sb_rt_llama;

typedef struct sb_rt_llama_cfg {
    const char *model;       /* the GGUF file */
    size_t slots;            /* sequences computed at once, >= 1 */
    uint32_t n_ctx;          /* KV cells (0: the model's training context) */
    uint32_t batch;          /* rows per pass (llama.cpp's n_batch) */
    unsigned threads;        /* 0: every online CPU */
    int gpu_layers;          /* layers offloaded to a GPU backend; -1:
                                llama.cpp's default (all, where one is) */
    uint32_t page_tokens;    /* the bank's tokens per page (0: 64) */
    bool kv_unified;         /* one KV stream for every slot (above) */
} sb_rt_llama_cfg;

/* sb_rt_llama_init -- llama.cpp's log set to errors only, its CPU (and
 * any other) backends loaded from $SNAPBANK_LLAMA_BACKENDS or else the
 * directory CMake found; once per process (later calls: no-op). */
void sb_rt_llama_init(void);

/* sb_rt_llama_load_model -- path by libllama (after sb_rt_llama_init), no
 * progress dots, gpu_layers offloaded (-1: llama.cpp's default); *load_s
 * the seconds it took. Returns: the model (llama_model_free), or NULL. */
struct llama_model *sb_rt_llama_load_model(const char *path, int gpu_layers, double *load_s);

/* sb_rt_llama_cparams -- the context parameters snapbank computes with:
 * n_ctx cells (0: the model's training context, else 4096), batch rows a
 * pass (ubatch at most 512), n_seq sequences, one KV stream when unified,
 * threads (0: every online CPU) for decode and prefill, flash attention
 * auto, no performance counters. */
struct llama_context_params sb_rt_llama_cparams(const struct llama_model *m, uint32_t n_ctx,
                                                uint32_t batch, unsigned threads, uint32_t n_seq,
                                                bool unified);

/* sb_rt_llama_open -- load cfg->model with libllama and make the context
 * (above; flash attention auto). cfg is copied. err receives what failed
 * naming the file. Returns: SB_OK (*out owned: sb_rt_llama_close);
 * SB_ERR_INVAL (slots or batch 0); SB_ERR_IO (llama.cpp could not load
 * the model); SB_ERR_NOMEM (no context of that size). */
int sb_rt_llama_open(const sb_rt_llama_cfg *cfg, sb_rt_llama **out, char *err, size_t err_len);

/* sb_rt_llama_close -- detach every handle, free the context and the
 * model. The compute (sb_rt_llama_compute) must be freed first. NULL: a
 * no-op. */
void sb_rt_llama_close(sb_rt_llama *L);

/* What was loaded. */
typedef struct sb_rt_llama_desc {
    uint32_t n_ctx, n_vocab, n_layer, n_batch;
    uint32_t n_ctx_seq;      /* the longest sequence: n_ctx, or n_ctx / slots */
    unsigned threads;
    double load_s;           /* the model's load */
    char desc[128];          /* llama_model_desc */
} sb_rt_llama_desc;
void sb_rt_llama_describe(const sb_rt_llama *L, sb_rt_llama_desc *d);

/* sb_rt_llama_attach -- the connector over store st for scope[0,
 * scope_len): *ns receives its namespace (borrowed until detach), the one
 * a job of this scope names; info (may be NULL) what the probe found.
 * Needs sequence 0 empty (no slot running). Returns: SB_OK; the codes of
 * sb_llama_attach (err says why). */
int sb_rt_llama_attach(sb_rt_llama *L, sb_store *st, const void *scope, size_t scope_len,
                       sb_ns **ns, sb_llama_info *info, char *err, size_t err_len);

/* sb_rt_llama_detach_all -- detach every handle (before their store
 * closes; their namespaces go with them). */
void sb_rt_llama_detach_all(sb_rt_llama *L);

/* sb_rt_llama_tokenize -- text[0, len) by llama.cpp's tokenizer, special
 * tokens' texts parsed (as llama-server does), no BOS added, into *ids
 * (malloc'd, caller frees; never NULL on success). Any thread (llama.cpp's
 * vocabulary is read only). Returns: SB_OK; SB_ERR_NOMEM; SB_ERR_INVAL
 * (llama.cpp refused the text). */
int sb_rt_llama_tokenize(const sb_rt_llama *L, const char *text, size_t len, uint32_t **ids,
                         size_t *n);

/* sb_rt_llama_compute -- the batching module's compute over L (borrowed:
 * it outlives the compute) for cfg.slots slots; a job's namespace must be
 * one attach gave. Returns: SB_OK; SB_ERR_NOMEM. */
int sb_rt_llama_compute(sb_rt_llama *L, sb_rt_compute *out);

#endif /* SB_RT_LLAMA_HOST_H */
