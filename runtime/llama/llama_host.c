/* llama_host.c -- llama.cpp as the batching module's compute, the bank
 * through the connector (llama_host.h says how a slot's turn goes). */
#define _POSIX_C_SOURCE 200809L
#include "llama/llama_host.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ggml-backend.h"
#include "llama.h"
#include "model/boundary.h"

#ifndef SB_RT_LLAMA_BACKENDS
#define SB_RT_LLAMA_BACKENDS "" /* libggml links its backends itself */
#endif

_Static_assert(sizeof(llama_token) == sizeof(uint32_t), "token ids are passed as uint32_t");

#define MAX_SCOPES 4096 /* handles: one per tenant */
#define MAX_MARKS 68    /* a hybrid prompt's boundaries (boundary.h: 64) + its end */
#define KEEP_MIN 64     /* a slot's own tokens kept for a new prompt: at least */

typedef struct handle {
    sb_llama *sl;
    sb_ns *ns;
} handle;

typedef struct lslot {
    sb_llama *h;              /* the connector of the job's namespace */
    llama_token *toks;        /* (n_toks) the prompt, then pushed tokens */
    size_t n_toks, cap;
    size_t n_prompt, pos;     /* positions in the sequence (ran) */
    size_t saved;             /* tokens the last save covered */
    size_t resident;          /* between turns: the positions the sequence
                                 still holds, toks[0, resident) (its own KV
                                 stream; 0: emptied) */
    sb_llama *resident_h;     /* ...of this connector's namespace (tenant) */
    size_t planned;           /* rows in the pass being built */
    int32_t first_row;        /* ...from this row of the batch on */
    int logit_row;            /* its row with logits in that pass, -1 none */
    sb_rt_turn_state st;
    sb_rt_turn rep;
    size_t marks[MAX_MARKS], n_marks, next_mark; /* a hybrid's boundaries */
    float *logits;            /* (n_vocab) the last position's */
    double t_begin, t_prefilled, t_first;
    bool waits;               /* its rows left the pass: no cells (ll_pass) */
    int failed;               /* ...and its turn ends: SB_ERR_TOO_MANY_TOKENS */
} lslot;

struct sb_rt_llama {
    sb_rt_llama_cfg cfg;
    struct llama_model *model;
    const struct llama_vocab *vocab;
    struct llama_context *ctx;
    struct llama_context_params cp;
    uint32_t n_ctx, n_ctx_seq;
    int32_t n_vocab;
    double load_s;
    handle *h;
    size_t n_h;
    sb_llama_info info;       /* the last attach's (the same for every scope
                                 but the namespace) */
    /* the compute's */
    lslot *slots;
    struct llama_batch b;
    int pass_rc;
};

/* ---- llama.cpp, once per process ------------------------------------------------ */

static void quiet_log(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (level >= GGML_LOG_LEVEL_ERROR)
        fputs(text, stderr);
}

static bool no_progress(float progress, void *user)
{
    (void)progress, (void)user;
    return true;
}

void sb_rt_llama_init(void)
{
    static int loaded; /* the one process-wide fact: libggml's registry is too */
    if (loaded)
        return;
    loaded = 1;
    llama_log_set(quiet_log, NULL);
    const char *dir = getenv("SNAPBANK_LLAMA_BACKENDS");
    if (!dir || !*dir)
        dir = SB_RT_LLAMA_BACKENDS;
    if (*dir)
        ggml_backend_load_all_from_path(dir);
}

/* ---- the model and the context ---------------------------------------------------- */

struct llama_model *sb_rt_llama_load_model(const char *path, int gpu_layers, double *load_s)
{
    double t0 = sb_rt_now_s();
    struct llama_model_params mp = llama_model_default_params();
    mp.progress_callback = no_progress;
    if (gpu_layers >= 0)
        mp.n_gpu_layers = gpu_layers;
    struct llama_model *m = llama_model_load_from_file(path, mp);
    *load_s = sb_rt_now_s() - t0;
    return m;
}

struct llama_context_params sb_rt_llama_cparams(const struct llama_model *m, uint32_t n_ctx,
                                                uint32_t batch, unsigned threads, uint32_t n_seq,
                                                bool unified)
{
    int32_t n_train = llama_model_n_ctx_train(m);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int t = threads ? (int)threads : cpus > 0 ? (int)cpus : 1;
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_ctx ? n_ctx : n_train > 0 ? (uint32_t)n_train : 4096;
    cp.n_batch = batch;
    cp.n_ubatch = batch < 512 ? batch : 512;
    cp.n_seq_max = n_seq;
    cp.kv_unified = unified;
    cp.n_threads = cp.n_threads_batch = t;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_AUTO;
    cp.no_perf = true;
    return cp;
}

int sb_rt_llama_open(const sb_rt_llama_cfg *cfg, sb_rt_llama **out, char *err, size_t err_len)
{
    *out = NULL;
    if (!cfg->slots || !cfg->batch || !cfg->model) {
        snprintf(err, err_len, "no model, or slots or batch 0");
        return SB_ERR_INVAL;
    }
    sb_rt_llama *L = calloc(1, sizeof *L);
    if (!L) {
        snprintf(err, err_len, "out of memory");
        return SB_ERR_NOMEM;
    }
    L->cfg = *cfg;
    sb_rt_llama_init();
    if (!(L->model = sb_rt_llama_load_model(cfg->model, cfg->gpu_layers, &L->load_s))) {
        snprintf(err, err_len, "%s: llama.cpp could not load the model", cfg->model);
        sb_rt_llama_close(L);
        return SB_ERR_IO;
    }
    L->vocab = llama_model_get_vocab(L->model);
    L->n_vocab = llama_vocab_n_tokens(L->vocab);
    /* the slots, and with one KV stream the connector's scratch sequence */
    L->cp = sb_rt_llama_cparams(L->model, cfg->n_ctx, cfg->batch, cfg->threads,
                                (uint32_t)cfg->slots + (cfg->kv_unified ? 1 : 0),
                                cfg->kv_unified);
    if (!(L->ctx = llama_init_from_model(L->model, L->cp))) {
        snprintf(err, err_len, "%s: llama.cpp could not make a context of %u tokens for %zu "
                 "sequences", cfg->model, L->cp.n_ctx, cfg->slots);
        sb_rt_llama_close(L);
        return SB_ERR_NOMEM;
    }
    L->n_ctx = llama_n_ctx(L->ctx);
    L->n_ctx_seq = cfg->kv_unified ? L->n_ctx : L->n_ctx / (uint32_t)cfg->slots;
    *out = L;
    return SB_OK;
}

void sb_rt_llama_detach_all(sb_rt_llama *L)
{
    /* what the slots still hold belongs to handles about to go (a bank
     * clear): a later handle at the same address must not find it */
    for (size_t i = 0; L->slots && i < L->cfg.slots; i++)
        if (L->slots[i].resident) {
            llama_memory_seq_rm(llama_get_memory(L->ctx), (llama_seq_id)i, -1, -1);
            L->slots[i].resident = 0, L->slots[i].resident_h = NULL;
        }
    for (size_t i = 0; i < L->n_h; i++)
        sb_llama_detach(L->h[i].sl);
    free(L->h);
    L->h = NULL, L->n_h = 0;
}

void sb_rt_llama_close(sb_rt_llama *L)
{
    if (!L)
        return;
    sb_rt_llama_detach_all(L);
    if (L->ctx)
        llama_free(L->ctx);
    if (L->model)
        llama_model_free(L->model);
    free(L);
}

void sb_rt_llama_describe(const sb_rt_llama *L, sb_rt_llama_desc *d)
{
    memset(d, 0, sizeof *d);
    d->n_ctx = L->n_ctx;
    d->n_ctx_seq = L->n_ctx_seq;
    d->n_vocab = (uint32_t)L->n_vocab;
    d->n_layer = (uint32_t)llama_model_n_layer(L->model);
    d->n_batch = L->cp.n_batch;
    d->threads = (unsigned)L->cp.n_threads;
    d->load_s = L->load_s;
    llama_model_desc(L->model, d->desc, sizeof d->desc);
}

int sb_rt_llama_attach(sb_rt_llama *L, sb_store *st, const void *scope, size_t scope_len,
                       sb_ns **ns, sb_llama_info *info, char *err, size_t err_len)
{
    if (L->n_h == MAX_SCOPES) {
        snprintf(err, err_len, "more than %d scopes", MAX_SCOPES);
        return SB_ERR_RANGE;
    }
    handle *nh = realloc(L->h, (L->n_h + 1) * sizeof *nh);
    if (!nh) {
        snprintf(err, err_len, "out of memory");
        return SB_ERR_NOMEM;
    }
    L->h = nh;
    sb_llama_config lc;
    sb_llama_config_default(&lc);
    lc.model_path = L->cfg.model;
    lc.cparams = &L->cp;
    lc.scope = scope_len ? scope : NULL;
    lc.scope_bytes = scope_len;
    lc.page_tokens = L->cfg.page_tokens;
    lc.probe_seq = 0;
    lc.scratch_seq = L->cfg.kv_unified ? (llama_seq_id)L->cfg.slots : -1;
    sb_llama *sl;
    int rc = sb_llama_attach(st, L->ctx, &lc, &sl, err, err_len);
    if (rc != SB_OK)
        return rc;
    sb_llama_get_info(sl, &L->info);
    L->h[L->n_h++] = (handle){ sl, L->info.ns };
    *ns = L->info.ns;
    if (info)
        *info = L->info;
    return SB_OK;
}

int sb_rt_llama_tokenize(const sb_rt_llama *L, const char *text, size_t len, uint32_t **ids,
                         size_t *n)
{
    *ids = NULL, *n = 0;
    if (len > INT32_MAX)
        return SB_ERR_INVAL;
    size_t cap = len + 8;
    llama_token *t = malloc(cap * sizeof *t);
    if (!t)
        return SB_ERR_NOMEM;
    int32_t got = llama_tokenize(L->vocab, text, (int32_t)len, t, (int32_t)(cap > INT32_MAX
                                 ? INT32_MAX : cap), false, true);
    if (got < 0) { /* cannot be: a token is at least a byte */
        free(t);
        return SB_ERR_INVAL;
    }
    *ids = (uint32_t *)t, *n = (size_t)got;
    return SB_OK;
}

/* ---- the compute ------------------------------------------------------------------ */

static sb_llama *handle_of(sb_rt_llama *L, sb_ns *ns)
{
    for (size_t i = 0; i < L->n_h; i++)
        if (L->h[i].ns == ns)
            return L->h[i].sl;
    return NULL;
}

static int ll_open(void *cv, size_t slot, sb_ns *ns)
{
    sb_rt_llama *L = cv;
    lslot *s = &L->slots[slot];
    if (!(s->h = handle_of(L, ns)))
        return SB_ERR_INVAL;
    s->st = SB_RT_TURN_NONE;
    s->n_toks = s->pos = s->saved = s->planned = 0;
    s->logit_row = -1;
    s->waits = false;
    s->failed = SB_OK;
    return SB_OK;
}

static void ll_close(void *cv, size_t slot)
{
    sb_rt_llama *L = cv;
    lslot *s = &L->slots[slot];
    if (!s->resident)
        llama_memory_seq_rm(llama_get_memory(L->ctx), (llama_seq_id)slot, -1, -1);
    s->h = NULL;
    s->st = SB_RT_TURN_NONE;
}

/* How much of prompt[0, n) the slot's sequence still holds for namespace
 * ns (never another tenant's): kept only in a stream of its own (not
 * -kvu, whose cells every slot needs) and for models whose state can be
 * cut back to any position (not a hybrid's recurrent state, nor a
 * window). At most n - 1: the last token runs. */
static size_t held(const lslot *s, const sb_llama *h, const uint32_t *prompt, size_t n)
{
    size_t c = 0, max = n ? n - 1 : 0;
    if (!s->resident || s->resident_h != h)
        return 0;
    while (c < s->resident && c < max && (uint32_t)s->toks[c] == prompt[c])
        c++;
    return c;
}

static size_t ll_affinity(void *cv, size_t slot, sb_ns *ns, const uint32_t *prompt, size_t n)
{
    sb_rt_llama *L = cv;
    return held(&L->slots[slot], handle_of(L, ns), prompt, n);
}

static int grow(lslot *s, size_t n)
{
    if (n <= s->cap)
        return SB_OK;
    size_t c = s->cap ? s->cap : 256;
    while (c < n)
        c *= 2;
    llama_token *t = realloc(s->toks, c * sizeof *t);
    if (!t)
        return SB_ERR_NOMEM;
    s->toks = t, s->cap = c;
    return SB_OK;
}

static int ll_begin(void *cv, size_t slot, const uint32_t *prompt, size_t n, size_t max_gen,
                    sb_rt_turn *rep)
{
    sb_rt_llama *L = cv;
    lslot *s = &L->slots[slot];
    if (!n || s->st != SB_RT_TURN_NONE)
        return SB_ERR_INVAL;
    for (size_t i = 0; i < n; i++)
        if (prompt[i] >= (uint32_t)L->n_vocab)
            return SB_ERR_INVAL;
    if (n + max_gen > L->n_ctx_seq)
        return SB_ERR_TOO_MANY_TOKENS;
    if (grow(s, n + 1) != SB_OK)
        return SB_ERR_NOMEM;
    /* what the sequence still holds of the prompt (its last turn's) is kept
     * when it is a good part of it; else it is emptied and the bank asked */
    size_t kept = held(s, s->h, prompt, n);
    if (kept < KEEP_MIN || kept * 2 < n)
        kept = 0;
    s->resident = 0;
    memcpy(s->toks, prompt, n * sizeof *prompt);
    s->n_toks = s->n_prompt = n;
    memset(&s->rep, 0, sizeof s->rep);
    s->t_begin = sb_rt_now_s();
    llama_seq_id seq = (llama_seq_id)slot;
    sb_llama_restore_info ri;
    memset(&ri, 0, sizeof ri);
    int rc = SB_OK;
    if (kept) {
        llama_memory_seq_rm(llama_get_memory(L->ctx), seq, (llama_pos)kept, -1);
        ri.n_restored = ri.tokens_ram = ri.n_matched = kept;
        /* past it: new tokens as far as the slot knows, or only the last
         * position (the same prompt again) */
        ri.miss = kept + 1 == n ? SB_MISS_NONE : SB_MISS_NO_PREFIX;
    } else {
        llama_memory_seq_rm(llama_get_memory(L->ctx), seq, -1, -1);
        rc = sb_llama_restore(s->h, seq, s->toks, n, n - 1, &ri);
    }
    if (rc == SB_ERR_INVAL || rc == SB_LLAMA_ERR_SEQ)
        return rc;
    if (rc != SB_OK) { /* no memory, no cells: the turn goes cold */
        llama_memory_seq_rm(llama_get_memory(L->ctx), seq, -1, -1);
        memset(&ri, 0, sizeof ri);
        ri.miss = SB_MISS_IO;
    }
    sb_rt_turn *r = &s->rep;
    r->cache_mode = ri.tokens_remote ? SB_RT_CACHE_REMOTE
                    : ri.tokens_disk ? SB_RT_CACHE_SSD
                    : ri.n_restored  ? SB_RT_CACHE_WARM
                                     : SB_RT_CACHE_COLD;
    r->prompt_tokens = n;
    r->cached_tokens = ri.n_restored;
    r->matched_tokens = ri.n_matched > ri.n_restored ? ri.n_matched : ri.n_restored;
    r->cached_disk_tokens = ri.tokens_disk;
    r->cached_shared_tokens = ri.tokens_remote;
    r->miss = ri.miss;
    r->prefill_tokens = n - ri.n_restored;
    if (L->info.point_bytes) {
        r->boundary_tokens = ri.n_restored;
        r->recomputed_tokens = ri.n_matched > ri.n_restored ? ri.n_matched - ri.n_restored : 0;
    }
    /* bytes of KV read from disk: the connector counts tokens, so this is
     * tokens x bytes per token (the builtin counts whole pages) */
    r->restore_bytes = ri.tokens_disk * L->info.bytes_per_token;
    r->bank_bytes = ri.n_restored * L->info.bytes_per_token +
                    (ri.n_restored ? L->info.point_bytes : 0);
    r->restore_s = sb_rt_now_s() - s->t_begin;
    s->pos = ri.n_restored;
    s->saved = kept ? 0 : ri.n_restored; /* the bank may lack what the slot kept */
    s->n_marks = s->next_mark = 0;
    if (L->info.point_bytes) { /* a hybrid's prefill stops at the grid's boundaries, and
                                  before the prompt's last token: the same prompt asked
                                  again resumes there */
        s->n_marks = sb_rt_boundary_marks(SB_RT_BOUNDARY_GRID, SB_RT_BOUNDARY_KEEP, s->pos, n - 1,
                                          s->marks);
        if (n - 1 > s->pos && (!s->n_marks || s->marks[s->n_marks - 1] < n - 1))
            s->marks[s->n_marks++] = n - 1;
    }
    s->st = SB_RT_TURN_PREFILL;
    s->t_prefilled = s->t_first = 0;
    if (rep)
        *rep = *r;
    return SB_OK;
}

static sb_rt_turn_state ll_state(void *cv, size_t slot)
{
    sb_rt_llama *L = cv;
    return L->slots[slot].st;
}

static const sb_rt_turn *ll_report(void *cv, size_t slot)
{
    sb_rt_llama *L = cv;
    return &L->slots[slot].rep;
}

static size_t ll_plan(void *cv, size_t slot, size_t max_rows)
{
    sb_rt_llama *L = cv;
    lslot *s = &L->slots[slot];
    struct llama_batch *b = &L->b;
    size_t room = L->cp.n_batch - (size_t)b->n_tokens;
    if (max_rows > room)
        max_rows = room;
    if (!max_rows || (s->st != SB_RT_TURN_PREFILL && s->st != SB_RT_TURN_RUN))
        return 0;
    size_t rows = 1;
    bool logits = true;
    if (s->st == SB_RT_TURN_PREFILL) { /* up to the next boundary, or the prompt's end */
        size_t to = s->n_prompt;
        if (s->next_mark < s->n_marks && s->marks[s->next_mark] < to)
            to = s->marks[s->next_mark];
        rows = to - s->pos < max_rows ? to - s->pos : max_rows;
        logits = s->pos + rows == s->n_prompt;
    }
    s->first_row = b->n_tokens;
    for (size_t i = 0; i < rows; i++) {
        int32_t k = b->n_tokens++;
        b->token[k] = s->toks[s->pos + i];
        b->pos[k] = (llama_pos)(s->pos + i);
        b->n_seq_id[k] = 1;
        b->seq_id[k][0] = (llama_seq_id)slot;
        b->logits[k] = logits && i + 1 == rows;
    }
    s->planned = rows;
    s->logit_row = logits ? b->n_tokens - 1 : -1;
    return rows;
}

/* Take slot's planned rows out of the pass being built (later rows move
 * down): they wait for the next pass, or for the turn's end (fail). */
static void unplan(sb_rt_llama *L, size_t slot, int fail)
{
    lslot *s = &L->slots[slot];
    struct llama_batch *b = &L->b;
    int32_t from = s->first_row, n = (int32_t)s->planned;
    for (int32_t k = from; k + n < b->n_tokens; k++) {
        b->token[k] = b->token[k + n];
        b->pos[k] = b->pos[k + n];
        b->n_seq_id[k] = b->n_seq_id[k + n];
        b->seq_id[k][0] = b->seq_id[k + n][0];
        b->logits[k] = b->logits[k + n];
    }
    b->n_tokens -= n;
    for (size_t i = 0; i < L->cfg.slots; i++) {
        lslot *t = &L->slots[i];
        if (t->planned && t->first_row > from) {
            t->first_row -= n;
            if (t->logit_row >= 0)
                t->logit_row -= n;
        }
    }
    s->planned = 0, s->logit_row = -1;
    s->waits = true, s->failed = fail;
}

/* llama_decode found no cells for the pass (nothing ran): with one KV
 * stream the slots' sequences share n_ctx cells, and together they may
 * want more. Prompt chunks give way to decode steps first (they wait for
 * cells that a turn's end frees); where only decode steps (or only prompt
 * chunks) are left, the turn whose sequence holds the most cells ends, as
 * at the end of its context, and the others wait one pass for its cells.
 * Returns: whether the pass is worth trying again. */
static bool make_room(sb_rt_llama *L)
{
    bool run = false, prefill = false;
    for (size_t i = 0; i < L->cfg.slots; i++)
        if (L->slots[i].planned) {
            run |= L->slots[i].st == SB_RT_TURN_RUN;
            prefill |= L->slots[i].st == SB_RT_TURN_PREFILL;
        }
    if (run && prefill) {
        for (size_t i = 0; i < L->cfg.slots; i++)
            if (L->slots[i].planned && L->slots[i].st == SB_RT_TURN_PREFILL)
                unplan(L, i, SB_OK);
        return true;
    }
    size_t victim = L->cfg.slots;
    for (size_t i = 0; i < L->cfg.slots; i++)
        if (L->slots[i].planned && (victim == L->cfg.slots ||
                                    L->slots[i].pos > L->slots[victim].pos))
            victim = i;
    for (size_t i = 0; i < L->cfg.slots; i++)
        if (L->slots[i].planned)
            unplan(L, i, i == victim ? SB_ERR_TOO_MANY_TOKENS : SB_OK);
    return false;
}

static void ll_pass(void *cv)
{
    sb_rt_llama *L = cv;
    L->pass_rc = 0;
    while (L->b.n_tokens) {
        L->pass_rc = llama_decode(L->ctx, L->b);
        if (L->pass_rc != 1 || !make_room(L))
            break;
    }
    L->b.n_tokens = 0;
}

/* The outcome of a save added to the turn's report. */
static void saved(sb_rt_turn *r, int rc, const sb_llama_save_info *si)
{
    sb_write_outcome m = si->outcome;
    m.pages_new += r->disk.pages_new;
    m.points_new += r->disk.points_new;
    m.queued += r->disk.queued;
    m.written += r->disk.written;
    r->disk = m;
    r->boundaries_written += si->outcome.points_new;
    if (rc != SB_OK && r->commit_rc == SB_OK)
        r->commit_rc = rc;
}

static void save(sb_rt_llama *L, size_t slot, size_t n)
{
    lslot *s = &L->slots[slot];
    if (n <= s->saved)
        return;
    sb_llama_save_info si;
    memset(&si, 0, sizeof si);
    int rc = sb_llama_save(s->h, (llama_seq_id)slot, s->toks, n, &si);
    saved(&s->rep, rc, &si);
    s->saved = n;
}

static int ll_ran(void *cv, size_t slot)
{
    sb_rt_llama *L = cv;
    lslot *s = &L->slots[slot];
    size_t rows = s->planned;
    s->planned = 0;
    if (s->waits) { /* its rows did not run (make_room) */
        int rc = s->failed;
        s->waits = false, s->failed = SB_OK;
        return rc;
    }
    if (L->pass_rc != 0) /* < 0: an error (1, no cells, is make_room's) */
        return SB_LLAMA_ERR_DECODE;
    s->pos += rows;
    if (s->logit_row >= 0) {
        const float *lg = llama_get_logits_ith(L->ctx, s->logit_row);
        if (!lg)
            return SB_LLAMA_ERR_DECODE;
        memcpy(s->logits, lg, (size_t)L->n_vocab * sizeof *lg);
        s->logit_row = -1;
    }
    if (s->st == SB_RT_TURN_PREFILL) {
        if (s->next_mark < s->n_marks && s->pos == s->marks[s->next_mark]) {
            s->next_mark++;
            save(L, slot, s->pos); /* a grid boundary */
        }
        if (s->pos < s->n_prompt)
            return SB_OK;
        s->t_prefilled = sb_rt_now_s();
        s->rep.prefill_s = s->t_prefilled - s->t_begin - s->rep.restore_s;
        s->rep.prefill_tok_s = s->rep.prefill_s > 0
                                   ? (double)s->rep.prefill_tokens / s->rep.prefill_s : 0;
        /* the prompt into the bank now, before the first token, where a
         * boundary must be taken here (a hybrid's) or another turn waits to
         * restore it (batch.h: a prompt shared by requests that arrive
         * together); else the turn's end saves it with the answer */
        bool waiting = false;
        for (size_t i = 0; i < L->cfg.slots && !waiting; i++)
            waiting = i != slot && L->slots[i].h && L->slots[i].st == SB_RT_TURN_NONE;
        if (L->info.point_bytes || waiting)
            save(L, slot, s->n_prompt);
    }
    s->st = SB_RT_TURN_SAMPLE;
    return SB_OK;
}

static const float *ll_logits(void *cv, size_t slot)
{
    sb_rt_llama *L = cv;
    return L->slots[slot].logits;
}

static int ll_push(void *cv, size_t slot, uint32_t id)
{
    sb_rt_llama *L = cv;
    lslot *s = &L->slots[slot];
    if (s->st != SB_RT_TURN_SAMPLE || id >= (uint32_t)L->n_vocab)
        return SB_ERR_INVAL;
    if (s->pos + 1 > L->n_ctx_seq)
        return SB_ERR_TOO_MANY_TOKENS;
    if (grow(s, s->n_toks + 1) != SB_OK)
        return SB_ERR_NOMEM;
    if (!s->t_first) {
        s->t_first = sb_rt_now_s();
        s->rep.ttft_s = s->t_first - s->t_begin;
    }
    s->toks[s->n_toks++] = (llama_token)id;
    s->rep.gen_tokens++;
    s->st = SB_RT_TURN_RUN;
    return SB_OK;
}

static int ll_end(void *cv, size_t slot, sb_rt_turn *rep)
{
    sb_rt_llama *L = cv;
    lslot *s = &L->slots[slot];
    if (s->st == SB_RT_TURN_NONE)
        return SB_ERR_INVAL;
    save(L, slot, s->pos); /* what ran: the prompt (or its part), the answer */
    if (L->cfg.kv_unified || L->info.point_bytes)
        llama_memory_seq_rm(llama_get_memory(L->ctx), (llama_seq_id)slot, -1, -1);
    else /* kept for the conversation's next turn (affinity) */
        s->resident = s->pos, s->resident_h = s->h;
    sb_rt_turn *r = &s->rep;
    if (s->t_first) {
        r->decode_s = sb_rt_now_s() - s->t_first;
        r->decode_tok_s = r->decode_s > 0 ? (double)r->gen_tokens / r->decode_s : 0;
    }
    s->n_toks = s->pos; /* a pushed token that did not run is not the bank's */
    s->st = SB_RT_TURN_NONE;
    if (rep)
        *rep = *r;
    return SB_OK;
}

static const uint32_t *ll_tokens(void *cv, size_t slot, size_t *n)
{
    sb_rt_llama *L = cv;
    *n = L->slots[slot].n_toks;
    return (const uint32_t *)L->slots[slot].toks;
}

static unsigned ll_threads(void *cv)
{
    sb_rt_llama *L = cv;
    return (unsigned)L->cp.n_threads;
}

static void ll_free(void *cv)
{
    sb_rt_llama *L = cv;
    if (!L->slots)
        return;
    for (size_t i = 0; i < L->cfg.slots; i++) {
        free(L->slots[i].toks);
        free(L->slots[i].logits);
    }
    free(L->slots);
    L->slots = NULL;
    llama_batch_free(L->b);
    memset(&L->b, 0, sizeof L->b);
}

static const sb_rt_compute_ops ll_ops = {
    .open = ll_open, .close = ll_close, .begin = ll_begin, .state = ll_state,
    .report = ll_report, .plan = ll_plan, .pass = ll_pass, .ran = ll_ran,
    .logits = ll_logits, .push = ll_push, .end = ll_end, .tokens = ll_tokens,
    .threads = ll_threads, .free = ll_free, .affinity = ll_affinity,
};

int sb_rt_llama_compute(sb_rt_llama *L, sb_rt_compute *out)
{
    if (L->slots)
        return SB_ERR_INVAL; /* one compute at a time */
    L->slots = calloc(L->cfg.slots, sizeof *L->slots);
    L->b = llama_batch_init((int32_t)L->cp.n_batch, 0, 1);
    bool ok = L->slots && L->b.token;
    for (size_t i = 0; ok && i < L->cfg.slots; i++)
        ok = (L->slots[i].logits = malloc((size_t)L->n_vocab * sizeof(float))) != NULL;
    if (!ok) {
        if (!L->slots)
            llama_batch_free(L->b), memset(&L->b, 0, sizeof L->b);
        ll_free(L);
        return SB_ERR_NOMEM;
    }
    L->b.n_tokens = 0;
    *out = (sb_rt_compute){ &ll_ops, L, (uint32_t)L->n_vocab };
    return SB_OK;
}
