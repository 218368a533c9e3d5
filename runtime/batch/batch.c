/* batch.c -- the engine thread: slots, the queue, batched forward passes
 * (batch.h; the step numbers are batch.h's). */
#define _POSIX_C_SOURCE 200809L
#include "batch/batch.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "text/tokenizer.h"

/* ---- jobs -------------------------------------------------------------------------- */

sb_rt_job *sb_rt_job_new(size_t app_bytes)
{
    /* the caller's area follows the job, aligned as malloc aligns */
    size_t head = (sizeof(sb_rt_job) + _Alignof(max_align_t) - 1) & ~(_Alignof(max_align_t) - 1);
    if (app_bytes > SIZE_MAX - head)
        return NULL;
    sb_rt_job *j = calloc(1, head + app_bytes);
    if (!j)
        return NULL;
    pthread_mutex_init(&j->mu, NULL);
    j->app = app_bytes ? (char *)j + head : NULL;
    j->eog_stops = true;
    j->stop_token = SB_RT_TOK_NONE;
    atomic_init(&j->cancel, 0);
    atomic_init(&j->refs, 1);
    return j;
}

void sb_rt_job_ref(sb_rt_job *j)
{
    atomic_fetch_add(&j->refs, 1);
}

void sb_rt_job_unref(sb_rt_job *j)
{
    if (!j || atomic_fetch_sub(&j->refs, 1) != 1)
        return;
    for (size_t i = 0; i < j->n_stop; i++)
        free(j->stop[i]);
    free(j->stop);
    free(j->prompt);
    free(j->tokens);
    free(j->stext);
    free(j->marks);
    free(j->gen);
    free(j->lp);
    free(j->out);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

/* ---- the engine -------------------------------------------------------------------- */

typedef struct slot {
    sb_rt_job *j;                /* NULL: free */
    bool open;                 /* the compute's unit for it is open */
    sb_rt_sampler smp;
    bool has_smp;
    uint32_t prev;             /* the previous token, for its piece */
    unsigned char pend[4];     /* bytes of an incomplete UTF-8 character */
    size_t n_pend, need;       /* ...how many there are, and of how many */
    size_t max_stop;           /* the longest stop string */
    bool final;                /* the running token is the last: end after it */
    bool cut;                  /* the text was cut at a stop string */
    bool held;                 /* admitted, its turn not begun: it waits for
                                  another job's prompt sharing its prefix */
    sb_rt_finish finish;         /* ...for this reason */
    double t_last;             /* when the last token came */
    size_t order;              /* admission order (prompt chunks go first come) */
    bool planned;              /* it has rows in this pass */
} slot;

struct sb_rt_batch {
    const sb_rt_model *m;      /* its tokenizer */
    sb_rt_batch_cfg cfg;
    sb_rt_compute comp;        /* owned */
    pthread_t th;
    bool th_started;
    pthread_mutex_t mu;        /* guards everything below */
    pthread_cond_t cv;         /* work arrived, or quit */
    pthread_cond_t idle_cv;    /* nothing runs or waits */
    sb_rt_job **q;               /* (max_queue) ring */
    size_t q_head, q_len;
    size_t n_active;           /* jobs in slots */
    bool closed, quit;
    bool cancel_running;       /* shutdown: every job in a slot is cancelled */
    /* the engine thread's own */
    slot *slots;
    size_t admitted;           /* admissions so far */
    sb_rt_job **admit;           /* (slots) jobs admitted in one iteration */
};

static bool utf8_lead(unsigned char c, size_t *need)
{
    if (c < 0x80)
        return *need = 1, true;
    if (c >= 0xC2 && c <= 0xDF)
        return *need = 2, true;
    if (c >= 0xE0 && c <= 0xEF)
        return *need = 3, true;
    if (c >= 0xF0 && c <= 0xF4)
        return *need = 4, true;
    return false;
}

/* A continuation byte valid after the lead byte l as the k-th byte. */
static bool utf8_cont(unsigned char l, size_t k, unsigned char c)
{
    if (c < 0x80 || c > 0xBF)
        return false;
    if (k == 1) { /* no overlongs, no surrogates, nothing past U+10FFFF */
        if (l == 0xE0 && c < 0xA0)
            return false;
        if (l == 0xED && c > 0x9F)
            return false;
        if (l == 0xF0 && c < 0x90)
            return false;
        if (l == 0xF4 && c > 0x8F)
            return false;
    }
    return true;
}

static int grow_text(char **b, size_t *cap, size_t need)
{
    if (need <= *cap)
        return SB_OK;
    size_t c = *cap ? *cap : 256;
    while (c < need)
        c *= 2;
    char *nb = realloc(*b, c);
    if (!nb)
        return SB_ERR_NOMEM;
    *b = nb, *cap = c;
    return SB_OK;
}

/* Append p[0, n) to the job's out and stext (under j->mu). */
static void emit(sb_rt_job *j, const char *p, size_t n)
{
    if (!n)
        return;
    if (grow_text(&j->out, &j->out_cap, j->out_len + n + 1) != SB_OK ||
        grow_text(&j->stext, &j->stext_cap, j->stext_len + n + 1) != SB_OK)
        return; /* out of memory: the text is shorter, never invalid */
    memcpy(j->out + j->out_len, p, n);
    j->out_len += n;
    j->out[j->out_len] = 0;
    memcpy(j->stext + j->stext_len, p, n);
    j->stext_len += n;
}

static const char replacement[] = "\xEF\xBF\xBD"; /* U+FFFD */

/* Feed raw bytes through the slot's UTF-8 repair into the job's text. */
static void feed(slot *sl, const unsigned char *p, size_t n)
{
    sb_rt_job *j = sl->j;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = p[i];
        if (sl->n_pend) {
            if (utf8_cont(sl->pend[0], sl->n_pend, c)) {
                sl->pend[sl->n_pend++] = c;
                if (sl->n_pend == sl->need) {
                    emit(j, (const char *)sl->pend, sl->n_pend);
                    sl->n_pend = 0;
                }
                continue;
            }
            emit(j, replacement, 3); /* cut short: the bytes so far are one error */
            sl->n_pend = 0;
        }
        size_t need;
        if (!utf8_lead(c, &need) || c == 0) /* a NUL would not survive a round trip */
            emit(j, replacement, 3);
        else if (need == 1)
            emit(j, (const char *)&c, 1);
        else
            sl->pend[0] = c, sl->n_pend = 1, sl->need = need;
    }
}

/* After text was added: cut out at the first stop string (returns true),
 * or hold back the longest tail that could still begin one. */
static bool check_stops(slot *sl, size_t old_len)
{
    sb_rt_job *j = sl->j;
    size_t from = old_len > sl->max_stop ? old_len - sl->max_stop : 0;
    size_t cut = SIZE_MAX;
    for (size_t k = 0; k < j->n_stop; k++) {
        size_t sn = strlen(j->stop[k]);
        for (size_t i = from; i + sn <= j->out_len && i < cut; i++)
            if (!memcmp(j->out + i, j->stop[k], sn)) {
                cut = i;
                break;
            }
    }
    if (cut != SIZE_MAX) {
        j->out_len = j->visible = cut;
        j->out[cut] = 0;
        return true;
    }
    size_t hold = 0;
    for (size_t k = 0; k < j->n_stop; k++) {
        size_t sn = strlen(j->stop[k]);
        for (size_t h = sn - 1; h > hold; h--)
            if (h <= j->out_len && !memcmp(j->out + j->out_len - h, j->stop[k], h)) {
                hold = h;
                break;
            }
    }
    j->visible = j->out_len - hold;
    return false;
}

static void *engine_main(void *arg);

int sb_rt_batch_new(const sb_rt_model *m, const sb_rt_batch_cfg *cfg, sb_rt_batch **out)
{
    *out = NULL;
    if (!cfg->slots || !cfg->max_queue || !cfg->batch || !m->tok)
        return SB_ERR_INVAL;
    sb_rt_compute comp;
    int rc = sb_rt_compute_rt(m, cfg->slots, cfg->threads, cfg->batch, cfg->disk_use, &comp);
    return rc == SB_OK ? sb_rt_batch_new_with(m, &comp, cfg, out) : rc;
}

int sb_rt_batch_new_with(const sb_rt_model *m, sb_rt_compute *comp, const sb_rt_batch_cfg *cfg,
                         sb_rt_batch **out)
{
    *out = NULL;
    if (!cfg->slots || !cfg->max_queue || !cfg->batch || !m->tok) {
        comp->ops->free(comp->c);
        return SB_ERR_INVAL;
    }
    sb_rt_batch *e = calloc(1, sizeof *e);
    if (!e) {
        comp->ops->free(comp->c);
        return SB_ERR_NOMEM;
    }
    e->m = m, e->cfg = *cfg, e->comp = *comp;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    pthread_cond_init(&e->idle_cv, NULL);
    e->q = calloc(cfg->max_queue, sizeof *e->q);
    e->slots = calloc(cfg->slots, sizeof *e->slots);
    e->admit = calloc(cfg->slots, sizeof *e->admit);
    int rc = e->q && e->slots && e->admit ? SB_OK : SB_ERR_NOMEM;
    if (rc == SB_OK && pthread_create(&e->th, NULL, engine_main, e) != 0)
        rc = SB_ERR_NOMEM;
    e->th_started = rc == SB_OK;
    if (rc != SB_OK) {
        sb_rt_batch_free(e);
        return rc;
    }
    *out = e;
    return SB_OK;
}

/* A job is over (under no lock): its reason recorded, the end hook, the
 * observer, then done and woken -- so whoever the wake answers (an HTTP
 * client) and then asks the observer's figures (/metrics) finds the turn
 * counted. */
static void finish(sb_rt_batch *e, sb_rt_job *j, sb_rt_finish why, int err)
{
    pthread_mutex_lock(&j->mu);
    j->finish = why;
    j->error = err;
    j->t_end = sb_rt_now_s();
    pthread_mutex_unlock(&j->mu);
    if (j->on_end)
        j->on_end(j, j->end_ctx);
    if (j->kind == SB_RT_JOB_GENERATE && e->cfg.obs.turn)
        e->cfg.obs.turn(e->cfg.obs.ctx, j);
    pthread_mutex_lock(&j->mu);
    j->visible = j->out_len; /* a tail held back for a stop string that never
                                came is the answer's after all */
    j->done = true;
    if (j->wake)
        j->wake(j);
    pthread_mutex_unlock(&j->mu);
    sb_rt_job_unref(j);
}

/* The compute's calls for slot sl. */
#define OPS (e->comp.ops)
#define SLOT(sl) ((size_t)((sl) - e->slots))

/* End a slot's turn: commit what was computed, keep the tokens, free it. */
static void end_slot(sb_rt_batch *e, slot *sl, sb_rt_finish why, int err)
{
    sb_rt_job *j = sl->j;
    sb_rt_turn rep = j->rep;
    void *c = e->comp.c;
    int rc = sl->held ? SB_ERR_INVAL : OPS->end(c, SLOT(sl), &rep);
    size_t n = 0;
    const uint32_t *t = rc == SB_OK ? OPS->tokens(c, SLOT(sl), &n) : NULL;
    if (rc == SB_OK && n && (j->tokens = malloc(n * sizeof *t))) {
        memcpy(j->tokens, t, n * sizeof *t);
        j->n_tokens = n;
    }
    /* marks past the tokens that ran are not the bank's */
    size_t ran = j->n_tokens > j->n_prompt ? j->n_tokens - j->n_prompt : 0;
    while (j->n_marks && j->marks[j->n_marks - 1].n > ran)
        j->n_marks--;
    pthread_mutex_lock(&j->mu);
    if (sl->n_pend && !sl->cut)
        emit(j, replacement, 3); /* an incomplete character at the end */
    j->rep = rep;
    pthread_mutex_unlock(&j->mu);
    if (sl->open)
        OPS->close(c, SLOT(sl));
    if (sl->has_smp)
        sb_rt_sampler_fini(&sl->smp);
    memset(sl, 0, sizeof *sl);
    finish(e, j, why, err);
    pthread_mutex_lock(&e->mu);
    e->n_active--;
    pthread_mutex_unlock(&e->mu);
}

/* Step 1 for one job: a slot, a session, the turn begun. */
static void start(sb_rt_batch *e, sb_rt_job *j)
{
    slot *sl = NULL;
    size_t best = 0;
    for (size_t i = 0; i < e->cfg.slots; i++) { /* the free slot holding most of the prompt */
        if (e->slots[i].j)
            continue;
        size_t a = OPS->affinity && j->prompt ? OPS->affinity(e->comp.c, i, j->ns, j->prompt,
                                                              j->n_prompt) : 0;
        if (!sl || a > best)
            sl = &e->slots[i], best = a;
    }
    int rc = SB_OK;
    if (atomic_load(&j->cancel)) {
        rc = -1;
    } else if (!sl) {
        rc = SB_ERR_INVAL; /* cannot be: admission counts the slots */
    } else {
        memset(sl, 0, sizeof *sl);
        sl->prev = SB_RT_TOK_NONE;
        sl->order = e->admitted++;
        for (size_t k = 0; k < j->n_stop; k++)
            if (strlen(j->stop[k]) > sl->max_stop)
                sl->max_stop = strlen(j->stop[k]);
        rc = OPS->open(e->comp.c, SLOT(sl), j->ns);
        sl->open = rc == SB_OK;
        if (rc == SB_OK) {
            rc = sb_rt_sampler_init(&sl->smp, &j->sampling, e->comp.n_vocab);
            sl->has_smp = rc == SB_OK;
        }
        if (rc == SB_OK) { /* begun in step 1b, once no other prompt it
                              shares a prefix with is still being computed */
            sl->j = j;
            sl->held = true;
            return;
        }
        if (sl->open)
            OPS->close(e->comp.c, SLOT(sl));
        if (sl->has_smp)
            sb_rt_sampler_fini(&sl->smp);
        memset(sl, 0, sizeof *sl);
    }
    finish(e, j, rc == -1 ? SB_RT_FINISH_CANCELLED : SB_RT_FINISH_ERROR, rc == -1 ? SB_OK : rc);
    pthread_mutex_lock(&e->mu);
    e->n_active--;
    pthread_mutex_unlock(&e->mu);
}

static void add_mark(sb_rt_job *j, size_t n, size_t text_len)
{
    if (j->n_marks == j->marks_cap) {
        size_t c = j->marks_cap ? 2 * j->marks_cap : 64;
        sb_rt_gen_mark *m = realloc(j->marks, c * sizeof *m);
        if (!m)
            return; /* fewer marks: a session continues from an earlier one */
        j->marks = m, j->marks_cap = c;
    }
    j->marks[j->n_marks++] = (sb_rt_gen_mark){ n, text_len };
}

/* Step 1b: whether a job that began before sl's and is still computing
 * its prompt shares more than SHARE_MIN tokens of sl's prompt beyond
 * what it restored from the bank. Then sl waits for that prompt to be
 * committed, and restores the shared part instead of computing it a
 * second time beside it (users of one system prompt arriving together). */
#define SHARE_MIN 32
static bool shares_pending(sb_rt_batch *e, const slot *sl)
{
    const sb_rt_job *j = sl->j;
    for (size_t i = 0; i < e->cfg.slots; i++) {
        const slot *o = &e->slots[i];
        if (o == sl || !o->j || o->held || o->order > sl->order ||
            OPS->state(e->comp.c, SLOT(o)) != SB_RT_TURN_PREFILL || o->j->ns != j->ns)
            continue;
        size_t n = o->j->n_prompt < j->n_prompt ? o->j->n_prompt : j->n_prompt, c = 0;
        while (c < n && o->j->prompt[c] == j->prompt[c])
            c++;
        if (c > OPS->report(e->comp.c, SLOT(o))->cached_tokens + SHARE_MIN)
            return true;
    }
    return false;
}

/* Step 1b for one slot: begin its turn (match, restore). */
static void begin(sb_rt_batch *e, slot *sl)
{
    sb_rt_job *j = sl->j;
    sb_rt_turn rep;
    int rc = OPS->begin(e->comp.c, SLOT(sl), j->prompt, j->n_prompt, j->max_gen, &rep);
    sl->held = false;
    if (rc != SB_OK) {
        end_slot(e, sl, SB_RT_FINISH_ERROR, rc);
        return;
    }
    pthread_mutex_lock(&j->mu);
    j->rep = rep;
    j->started = true;
    j->t_start = sb_rt_now_s();
    pthread_mutex_unlock(&j->mu);
}

/* The text of end-of-generation token id as the chat template writes it
 * after an answer (cfg.turn_end_text begins with it, and it is a control
 * token), so that stext and the tokens stay in step with the next turn's
 * rendering; "" (*len 0) for any other token. */
static const char *turn_end_token_text(const sb_rt_batch *e, uint32_t id, size_t *len)
{
    const sb_rt_tok *tok = e->m->tok;
    const char *s = sb_rt_tok_text(tok, id, len);
    if (!s || !*len || !e->cfg.turn_end_text ||
        sb_rt_tok_type(tok, id) != SB_RT_TOK_CONTROL || strncmp(e->cfg.turn_end_text, s, *len)) {
        *len = 0;
        return "";
    }
    return s;
}

/* The log probability of id under logits (n floats), and the k most
 * likely tokens, into e. */
static void logprob_of(const float *logits, uint32_t n, uint32_t id, uint32_t k, sb_rt_logprob *e)
{
    float mx = logits[0];
    for (uint32_t i = 1; i < n; i++)
        mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0;
    for (uint32_t i = 0; i < n; i++)
        sum += exp((double)logits[i] - mx);
    double lse = mx + log(sum);
    e->id = id;
    e->logprob = (float)((double)logits[id] - lse);
    /* the top k, kept sorted (most likely first): most tokens fail the
     * first comparison */
    e->n_top = 0;
    for (uint32_t i = 0; i < n && k; i++) {
        if (e->n_top == k && logits[i] <= logits[e->top_id[k - 1]])
            continue;
        uint32_t at = e->n_top < k ? e->n_top++ : k - 1;
        while (at > 0 && logits[e->top_id[at - 1]] < logits[i]) {
            e->top_id[at] = e->top_id[at - 1];
            at--;
        }
        e->top_id[at] = i;
    }
    for (uint32_t t = 0; t < e->n_top; t++)
        e->top_lp[t] = (float)((double)logits[e->top_id[t]] - lse);
}

/* Step 3 for one slot whose logits are ready. */
static void sample_one(sb_rt_batch *e, slot *sl)
{
    sb_rt_job *j = sl->j;
    const float *logits = OPS->logits(e->comp.c, SLOT(sl));
    uint32_t id = sb_rt_sample(&sl->smp, logits);
    sb_rt_logprob lpe;
    if (j->logprobs)
        logprob_of(logits, e->comp.n_vocab, id,
                   j->top_logprobs < SB_RT_TOP_LOGPROBS_MAX ? j->top_logprobs
                                                            : SB_RT_TOP_LOGPROBS_MAX, &lpe);
    const sb_rt_tok *tok = e->m->tok;
    bool eog = sb_rt_tok_is_eog(tok, id);
    char piece[512];
    size_t n = 0;
    if (!eog && sb_rt_tok_piece(tok, id, sl->prev, piece, sizeof piece, &n) != SB_OK)
        n = 0;
    sl->prev = id;
    double now = sb_rt_now_s();
    bool stop = (eog && j->eog_stops) || id == j->stop_token;
    if (j->n_gen && e->cfg.obs.token_gap)
        e->cfg.obs.token_gap(e->cfg.obs.ctx, now - sl->t_last);
    sl->t_last = now;
    pthread_mutex_lock(&j->mu);
    if (j->n_gen == j->gen_cap) { /* out of memory: the ids are not kept */
        size_t c = j->gen_cap ? 2 * j->gen_cap : 64;
        uint32_t *g = realloc(j->gen, c * sizeof *g);
        if (g)
            j->gen = g, j->gen_cap = c;
    }
    if (j->n_gen < j->gen_cap)
        j->gen[j->n_gen] = id;
    if (j->n_gen++ == 0)
        j->t_first = now;
    size_t old = j->out_len;
    feed(sl, (const unsigned char *)piece, n);
    if (j->logprobs) { /* out of memory: the entry is not kept */
        if (j->n_lp == j->lp_cap) {
            size_t c = j->lp_cap ? 2 * j->lp_cap : 64;
            sb_rt_logprob *g = realloc(j->lp, c * sizeof *g);
            if (g)
                j->lp = g, j->lp_cap = c;
        }
        if (j->n_lp < j->lp_cap) {
            lpe.text_start = old, lpe.text_end = j->out_len;
            j->lp[j->n_lp++] = lpe;
        }
    }
    bool whole = true; /* the session's text spells every token so far */
    if (eog) {
        size_t tl;
        const char *tt = turn_end_token_text(e, id, &tl);
        whole = tl && grow_text(&j->stext, &j->stext_cap, j->stext_len + tl + 1) == SB_OK;
        if (whole) {
            memcpy(j->stext + j->stext_len, tt, tl);
            j->stext_len += tl;
        }
    }
    if (!stop && j->n_stop)
        stop = sl->cut = check_stops(sl, old);
    else if (!j->n_stop)
        j->visible = j->out_len;
    if (j->wake)
        j->wake(j);
    pthread_mutex_unlock(&j->mu);
    /* a mark where the text is whole: a session may continue from here (not
     * after an end token the template does not write: the next turn's
     * rendering would not have it) */
    if (!sl->n_pend && whole)
        add_mark(j, j->n_gen, j->stext_len);
    sb_rt_finish why = stop ? SB_RT_FINISH_STOP : SB_RT_FINISH_LENGTH;
    bool last = stop || j->n_gen >= j->max_gen;
    if (OPS->push(e->comp.c, SLOT(sl), id) != SB_OK) { /* the context is full */
        end_slot(e, sl, why, SB_OK);
        return;
    }
    if (last)
        sl->final = true, sl->finish = why;
}

/* One iteration (steps 2-5) over the jobs in slots. */
static void step(sb_rt_batch *e, bool cancel_running)
{
    size_t S = e->cfg.slots;
    /* 2. the cancelled */
    for (size_t i = 0; i < S; i++)
        if (e->slots[i].j && (cancel_running || atomic_load(&e->slots[i].j->cancel)))
            end_slot(e, &e->slots[i], SB_RT_FINISH_CANCELLED, SB_OK);
    /* 1b. begin the turns that need not wait for another's prompt (oldest
     *     first, so one that began may let the next wait for it) */
    for (;;) {
        slot *next = NULL;
        for (size_t i = 0; i < S; i++) {
            slot *sl = &e->slots[i];
            if (sl->j && sl->held && (!next || sl->order < next->order) && !shares_pending(e, sl))
                next = sl;
        }
        if (!next)
            break;
        begin(e, next);
    }
    /* 3. sample where logits are ready; end where the last token ran */
    for (size_t i = 0; i < S; i++) {
        slot *sl = &e->slots[i];
        if (!sl->j || sl->held || OPS->state(e->comp.c, i) != SB_RT_TURN_SAMPLE)
            continue;
        if (sl->final)
            end_slot(e, sl, sl->finish, SB_OK);
        else
            sample_one(e, sl);
    }
    /* 4. one pass: decode steps, then prompt chunks first come first */
    void *c = e->comp.c;
    size_t n = 0, budget = e->cfg.batch;
    for (size_t i = 0; i < S; i++) {
        slot *sl = &e->slots[i];
        sl->planned = false;
        if (sl->j && !sl->held && OPS->state(c, i) == SB_RT_TURN_RUN && budget &&
            OPS->plan(c, i, 1)) {
            sl->planned = true, n++;
            budget--;
        }
    }
    for (;;) {
        slot *first = NULL;
        for (size_t i = 0; i < S; i++) {
            slot *sl = &e->slots[i];
            if (sl->j && !sl->held && !sl->planned &&
                OPS->state(c, i) == SB_RT_TURN_PREFILL && (!first || sl->order < first->order))
                first = sl;
        }
        if (!first || !budget)
            break;
        size_t rows = OPS->plan(c, SLOT(first), budget);
        if (!rows)
            break; /* cannot be: a prompt in PREFILL has rows left */
        first->planned = true, n++;
        budget -= rows < budget ? rows : budget;
    }
    if (!n)
        return;
    OPS->pass(c);
    if (e->cfg.obs.pass)
        e->cfg.obs.pass(e->cfg.obs.ctx, n);
    /* 5. each slot's rows back to its turn */
    for (size_t i = 0; i < S; i++) {
        slot *sl = &e->slots[i];
        if (!sl->j || !sl->planned)
            continue;
        sl->planned = false;
        int rc = OPS->ran(c, i);
        if (rc == SB_ERR_TOO_MANY_TOKENS && OPS->state(c, i) == SB_RT_TURN_RUN)
            end_slot(e, sl, SB_RT_FINISH_LENGTH, SB_OK); /* as at its context's end */
        else if (rc != SB_OK)
            end_slot(e, sl, SB_RT_FINISH_ERROR, rc);
    }
}

static void *engine_main(void *arg)
{
    sb_rt_batch *e = arg;
    sb_rt_job **admit = e->admit;
    for (;;) {
        pthread_mutex_lock(&e->mu);
        while (e->n_active == 0 && e->q_len == 0) {
            pthread_cond_broadcast(&e->idle_cv);
            if (e->quit) {
                pthread_mutex_unlock(&e->mu);
                return NULL;
            }
            pthread_cond_wait(&e->cv, &e->mu);
        }
        /* 1. admit: first come, a barrier only into an empty engine */
        size_t n_admit = 0;
        sb_rt_job *barrier = NULL;
        while (e->q_len && e->n_active < e->cfg.slots) {
            sb_rt_job *j = e->q[e->q_head];
            if (j->kind == SB_RT_JOB_BARRIER && e->n_active)
                break;
            e->q_head = (e->q_head + 1) % e->cfg.max_queue;
            e->q_len--;
            e->n_active++;
            if (j->kind == SB_RT_JOB_BARRIER) {
                barrier = j;
                break;
            }
            admit[n_admit++] = j;
        }
        bool cancel_running = e->cancel_running;
        pthread_mutex_unlock(&e->mu);
        if (barrier) {
            if (!atomic_load(&barrier->cancel))
                barrier->barrier(barrier->barrier_ctx);
            finish(e, barrier, atomic_load(&barrier->cancel) ? SB_RT_FINISH_CANCELLED
                                                             : SB_RT_FINISH_STOP, SB_OK);
            pthread_mutex_lock(&e->mu);
            e->n_active--;
            pthread_mutex_unlock(&e->mu);
            continue;
        }
        for (size_t i = 0; i < n_admit; i++)
            start(e, admit[i]);
        step(e, cancel_running);
    }
}

int sb_rt_batch_submit(sb_rt_batch *e, sb_rt_job *j)
{
    if (j->kind == SB_RT_JOB_GENERATE && (!j->ns || !j->prompt || !j->n_prompt || !j->max_gen))
        return SB_ERR_INVAL;
    if (j->kind == SB_RT_JOB_BARRIER && !j->barrier)
        return SB_ERR_INVAL;
    pthread_mutex_lock(&e->mu);
    int rc = e->closed ? SB_ERR_LOCKED
             : e->q_len == e->cfg.max_queue ? SB_ERR_BUDGET
                                            : SB_OK;
    if (rc == SB_OK) {
        sb_rt_job_ref(j);
        e->q[(e->q_head + e->q_len) % e->cfg.max_queue] = j;
        e->q_len++;
        pthread_cond_signal(&e->cv);
    }
    pthread_mutex_unlock(&e->mu);
    return rc;
}

unsigned sb_rt_batch_threads(const sb_rt_batch *e)
{
    return e->comp.ops->threads(e->comp.c);
}

void sb_rt_batch_counts(sb_rt_batch *e, size_t *running, size_t *waiting)
{
    pthread_mutex_lock(&e->mu);
    *running = e->n_active;
    *waiting = e->q_len;
    pthread_mutex_unlock(&e->mu);
}

void sb_rt_batch_close(sb_rt_batch *e)
{
    pthread_mutex_lock(&e->mu);
    e->closed = true;
    pthread_mutex_unlock(&e->mu);
}

void sb_rt_batch_cancel_all(sb_rt_batch *e)
{
    pthread_mutex_lock(&e->mu);
    for (size_t i = 0; i < e->q_len; i++)
        atomic_store(&e->q[(e->q_head + i) % e->cfg.max_queue]->cancel, 1);
    pthread_mutex_unlock(&e->mu);
    /* the running ones: only the engine thread touches the slots; it reads
     * this flag each iteration */
    pthread_mutex_lock(&e->mu);
    e->cancel_running = true;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

bool sb_rt_batch_wait_idle(sb_rt_batch *e, double timeout_s)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    if (timeout_s >= 0) {
        double t = (double)until.tv_sec + until.tv_nsec / 1e9 + timeout_s;
        until.tv_sec = (time_t)t;
        until.tv_nsec = (long)((t - (double)until.tv_sec) * 1e9);
    }
    pthread_mutex_lock(&e->mu);
    while (e->n_active || e->q_len) {
        if (timeout_s < 0)
            pthread_cond_wait(&e->idle_cv, &e->mu);
        else if (pthread_cond_timedwait(&e->idle_cv, &e->mu, &until) == ETIMEDOUT)
            break;
    }
    bool idle = !e->n_active && !e->q_len;
    pthread_mutex_unlock(&e->mu);
    return idle;
}

void sb_rt_batch_free(sb_rt_batch *e)
{
    if (!e)
        return;
    if (e->th_started) {
        sb_rt_batch_close(e);
        sb_rt_batch_cancel_all(e);
        pthread_mutex_lock(&e->mu);
        e->quit = true;
        pthread_cond_signal(&e->cv);
        pthread_mutex_unlock(&e->mu);
        pthread_join(e->th, NULL);
    }
    if (e->comp.ops)
        e->comp.ops->free(e->comp.c);
    free(e->q);
    free(e->slots);
    free(e->admit);
    pthread_cond_destroy(&e->cv);
    pthread_cond_destroy(&e->idle_cv);
    pthread_mutex_destroy(&e->mu);
    free(e);
}
