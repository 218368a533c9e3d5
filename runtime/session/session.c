/* session.c -- conversations restored from the bank (session.h). */
#define _GNU_SOURCE /* RUSAGE_THREAD */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "session/session.h"
#include "session/sfile.h"

#include "model/boundary.h"
#include "model/deltanet.h"
#include "core/le.h"

struct sb_rt_session {
    const sb_rt_model *m;
    sb_rt_ctx *ctx;
    sb_ns *ns;
    sb_rt_kv kv;          /* the KV during a turn (empty between turns) */
    uint32_t *tok;        /* committed tokens */
    size_t n_tok, cap;
    uint32_t *prompt;     /* scratch: tokens + input */
    size_t prompt_cap;
    float *logits;        /* n_vocab */
    size_t page_bytes;
    sb_rt_disk_use disk_use;
    sb_rt_disk_use shared_use;
    sb_rt_rates rates;
    int mark_fg;          /* mark prefill and decode as foreground */
    /* the open turn (sb_rt_session_begin .. _end or _abort) */
    sb_rt_turn_state state;
    size_t n_prompt;      /* prompt tokens, in prompt[] */
    uint32_t next_id;     /* RUN: the pushed token */
    sb_rt_turn rep;       /* the report so far */
    double t0, t3;        /* begin; the first token pushed */
    double t_prefill;     /* when prefill started (after the restore) */
    sb_store *fg;         /* the store marked foreground for the turn, or NULL */
    /* hybrid models (session.h, "boundaries") */
    size_t point_bytes;   /* the layout's point state */
    uint8_t *point;       /* a boundary being encoded (point_bytes) */
    size_t grid, keep;    /* the policy: grid, grid boundaries per turn */
    size_t marks[66];     /* the open turn's grid positions to record */
    size_t n_marks, mark_i; /* ...how many, and the next one */
};

const char *sb_rt_cache_mode_name(sb_rt_cache_mode m)
{
    switch (m) {
    case SB_RT_CACHE_COLD:
        return "cold";
    case SB_RT_CACHE_WARM:
        return "warm_prefix";
    case SB_RT_CACHE_SSD:
        return "ssd";
    case SB_RT_CACHE_REMOTE:
        return "remote";
    }
    return "unknown";
}

const char *sb_rt_turn_miss_reason(const sb_rt_turn *r)
{
    if (r->cached_tokens >= r->prompt_tokens)
        return NULL;
    if (r->disk_skipped)
        return "recompute_faster"; /* disk pages matched; reading was slower */
    if (r->miss == SB_MISS_NONE)
        return "last_position";    /* all matched, no logits stored: recomputed */
    if (r->miss == SB_MISS_NO_PREFIX && r->matched_tokens)
        return "new_tokens";       /* the bank held the start; the rest is new */
    return sb_miss_name(r->miss);
}

/* CPU seconds and minor page faults of the calling thread (a restore runs
 * on it: its reads are submitted, reaped and checked there, into buffers
 * it may touch for the first time). */
static double thread_cpu_s(uint64_t *minflt)
{
    struct rusage ru;
    *minflt = getrusage(RUSAGE_THREAD, &ru) == 0 ? (uint64_t)ru.ru_minflt : 0;
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Multiply-adds per token of the matrices (attention's own work aside). */
static double model_flops_per_token(const sb_rt_model *m)
{
    const sb_rt_hparams *h = &m->hp;
    double dim = h->dim, kv = sb_rt_model_kv_dim(m), ff = h->n_ff;
    double layer = dim * (dim + 2 * kv) + dim * dim + 3 * dim * ff;
    return 2 * (h->n_layers * layer + dim * h->n_vocab);
}

int sb_rt_session_new(const sb_rt_model *m, sb_rt_ctx *ctx, sb_ns *ns, sb_rt_session **out)
{
    if (!out)
        return SB_ERR_INVAL;
    *out = NULL;
    sb_ns_info info;
    if (!m || !ctx || !ns || sb_ns_get_info(ns, &info) != SB_OK)
        return SB_ERR_INVAL;
    size_t want = m->hp.n_rec ? sb_rt_boundary_bytes(m) : (size_t)m->hp.n_vocab * sizeof(float);
    if (info.point_bytes != want)
        return SB_ERR_INVAL;
    sb_rt_session *s = calloc(1, sizeof *s);
    if (!s)
        return SB_ERR_NOMEM;
    s->m = m, s->ctx = ctx, s->ns = ns, s->page_bytes = info.page_bytes;
    s->point_bytes = info.point_bytes;
    s->grid = SB_RT_BOUNDARY_GRID;
    s->keep = SB_RT_BOUNDARY_KEEP;
    s->logits = malloc((size_t)m->hp.n_vocab * sizeof(float));
    if (m->hp.n_rec)
        s->point = malloc(info.point_bytes);
    int rc = s->logits && (s->point || !m->hp.n_rec) ? sb_rt_kv_init(&s->kv, m, ns)
                                                     : SB_ERR_NOMEM;

    if (rc != SB_OK) {
        sb_rt_session_free(s);
        return rc;
    }
    s->mark_fg = 1;
    s->rates.prefill_tok_s = 25e9 * sb_rt_ctx_threads(ctx) / model_flops_per_token(m);
    s->rates.read_bytes_s = 500e6;
    s->rates.read_fixed_s = 200e-6;
    s->rates.shared_bytes_s = 50e6;
    s->rates.shared_fixed_s = 2e-3;
    *out = s;
    return SB_OK;
}

void sb_rt_session_free(sb_rt_session *s)
{
    if (!s)
        return;
    sb_rt_session_abort(s);
    sb_rt_kv_fini(&s->kv);
    free(s->tok);
    free(s->prompt);
    free(s->logits);
    free(s->point);
    free(s);
}

int sb_rt_session_set_boundaries(sb_rt_session *s, size_t grid, size_t max_bytes)
{
    if (!s || !s->m->hp.n_rec || grid % SB_RT_GDN_CHUNK)
        return SB_ERR_INVAL;
    s->grid = grid;
    s->keep = max_bytes ? max_bytes / s->point_bytes : SB_RT_BOUNDARY_KEEP;
    return SB_OK;
}

void sb_rt_session_set_disk_use(sb_rt_session *s, sb_rt_disk_use use)
{
    s->disk_use = use;
}

void sb_rt_session_set_shared_use(sb_rt_session *s, sb_rt_disk_use use)
{
    s->shared_use = use;
}

void sb_rt_session_set_foreground(sb_rt_session *s, int on)
{
    s->mark_fg = on;
}

sb_rt_rates *sb_rt_session_rates(sb_rt_session *s)
{
    return &s->rates;
}

const uint32_t *sb_rt_session_tokens(const sb_rt_session *s, size_t *n)
{
    *n = s->n_tok;
    return s->tok;
}

const float *sb_rt_session_logits(const sb_rt_session *s)
{
    return s->logits;
}

static int grow(uint32_t **p, size_t *cap, size_t need)
{
    if (need <= *cap)
        return SB_OK;
    size_t c = *cap ? *cap : 256;
    while (c < need)
        c *= 2;
    uint32_t *q = realloc(*p, c * sizeof *q);
    if (!q)
        return SB_ERR_NOMEM;
    *p = q, *cap = c;
    return SB_OK;
}

static int check_ids(const sb_rt_model *m, const uint32_t *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (t[i] >= m->hp.n_vocab)
            return SB_ERR_INVAL;
    return SB_OK;
}

int sb_rt_session_resume(sb_rt_session *s, const uint32_t *tokens, size_t n)
{
    if (!s || s->state != SB_RT_TURN_NONE || (n && !tokens) || check_ids(s->m, tokens, n) != SB_OK)
        return SB_ERR_INVAL;
    if (n > s->m->hp.n_ctx)
        return SB_ERR_TOO_MANY_TOKENS;
    int rc = grow(&s->tok, &s->cap, n ? n : 1);
    if (rc != SB_OK)
        return rc;
    if (n)
        memcpy(s->tok, tokens, n * sizeof *tokens);
    s->n_tok = n;
    sb_rt_kv_reset(&s->kv);
    return SB_OK;
}

/* A running average that starts from its first sample. */
static void average(double *v, unsigned *samples, double x)
{
    *v = *samples ? 0.7 * *v + 0.3 * x : x;
    (*samples)++;
}

/* Take the match: how many tokens (k) and from which tier. Fills rep's
 * choice fields; returns k. */
static size_t choose(sb_rt_session *s, const sb_match_info *mi, size_t n_prompt, sb_rt_turn *rep)
{
    size_t pt = s->kv.page_tokens, L = mi->n_tokens;
    /* Logits of the last prompt position are needed: a point state at L
     * gives them, else that position is recomputed. */
    size_t want = L == n_prompt && !mi->has_point ? L - 1 : L;
    size_t ram_tok = mi->n_pages_ram * pt < want ? mi->n_pages_ram * pt : want;
    if (want <= ram_tok)
        return want;
    /* Disk pages [ram pages, pages covering want). */
    size_t disk_pages = (want + pt - 1) / pt - mi->n_pages_ram;
    rep->est_read_s = s->rates.read_fixed_s +
                      (double)disk_pages * (double)s->page_bytes / s->rates.read_bytes_s;
    rep->est_recompute_s = (double)(want - ram_tok) / s->rates.prefill_tok_s;
    if (s->disk_use == SB_RT_DISK_NEVER ||
        (s->disk_use == SB_RT_DISK_READ && rep->est_read_s > rep->est_recompute_s)) {
        rep->disk_skipped = 1;
        return ram_tok;
    }
    return want;
}

/* The shared tier, after the match *mt found local tokens (RAM and disk):
 * when the prompt has full pages past them and fetching them is estimated
 * faster than recomputing them, fetch what the pool holds and match again
 * (*mt replaced). *from receives where the fetched pages start, *added
 * how many tokens they hold. The rates are measured here: a fetch that
 * brought pages times the bytes, one that found none the fixed cost. A
 * failed fetch is not an error of the turn (rep->shared_rc). */
static int fetch_shared(sb_rt_session *s, const uint32_t *prompt, size_t n, sb_match **mt,
                        size_t local, sb_rt_turn *rep, size_t *from, size_t *added)
{
    *from = *added = 0;
    size_t pt = s->kv.page_tokens;
    if (s->shared_use == SB_RT_DISK_NEVER || !sb_store_has_shared(sb_ns_store(s->ns)))
        return SB_OK;
    size_t have = local / pt, full = n / pt;
    if (full <= have)
        return SB_OK;
    size_t pages = full - have;
    sb_rt_rates *r = &s->rates;
    rep->est_fetch_s = r->shared_fixed_s + (double)pages * (double)s->page_bytes / r->shared_bytes_s;
    rep->est_fetch_recompute_s = (double)(pages * pt) / r->prefill_tok_s;
    if (s->shared_use == SB_RT_DISK_READ && rep->est_fetch_s > rep->est_fetch_recompute_s) {
        rep->shared_skipped = 1;
        return SB_OK;
    }
    double t0 = sb_rt_now_s();
    /* The fetch goes on while values arrive and recomputing what is still
     * to come would take longer (the cost model's prefill rate). */
    sb_fetch_shared_opts fo = { .recompute_s_per_token =
                                    r->prefill_tok_s > 0 ? 1.0 / r->prefill_tok_s : 0 };
    sb_fetch_shared_info fi;
    rep->shared_rc = sb_ns_fetch_shared_ex(s->ns, prompt, n, &fo, &fi);
    size_t got = fi.n_added;
    rep->shared_fault = fi.fault;
    rep->shared_bad = fi.n_bad;
    memcpy(rep->shared_detail, fi.detail, sizeof rep->shared_detail);
    double dt = sb_rt_now_s() - t0;
    if (got) {
        size_t bytes = got / pt * s->page_bytes;
        rep->shared_bytes = bytes;
        if (dt > r->shared_fixed_s)
            average(&r->shared_bytes_s, &r->shared_samples,
                    (double)bytes / (dt - r->shared_fixed_s));
    } else if (rep->shared_rc == SB_OK) {
        average(&r->shared_fixed_s, &r->shared_fixed_samples, dt);
    }
    if (!got)
        return SB_OK;
    *from = have * pt;
    *added = got;
    sb_match_release(*mt);
    *mt = NULL;
    return sb_ns_match(s->ns, prompt, n, mt);
}

/* A restore of rep->cached_tokens read disk_pages pages of the match mi
 * from disk, from t0 until now: what the turn reports of them, and the
 * read rate the next choice estimates with. */
static void disk_read(sb_rt_session *s, const sb_match_info *mi, size_t disk_pages, double t0,
                      sb_rt_turn *rep)
{
    rep->cached_disk_tokens = rep->cached_tokens - mi->n_pages_ram * s->kv.page_tokens;
    rep->restore_bytes = disk_pages * s->page_bytes;
    double dt = sb_rt_now_s() - t0;
    if (dt > s->rates.read_fixed_s)
        average(&s->rates.read_bytes_s, &s->rates.read_samples,
                (double)rep->restore_bytes / (dt - s->rates.read_fixed_s));
}

/* Steps 2-3 of a turn: match, choose, adopt. On return the KV holds the
 * restored prefix (possibly none); rep->point_hit says s->logits are filled. */
static int restore(sb_rt_session *s, const uint32_t *prompt, size_t n, sb_rt_turn *rep)
{
    sb_rt_kv_reset(&s->kv);
    sb_match *mt = NULL;
    int rc = sb_ns_match(s->ns, prompt, n, &mt);
    if (rc != SB_OK)
        return rc;
    sb_match_info mi;
    size_t shared_from = 0, shared_added = 0;
    if ((rc = sb_match_get_info(mt, &mi)) == SB_OK)
        rc = fetch_shared(s, prompt, n, &mt, mi.n_matched_tokens, rep, &shared_from,
                          &shared_added);
    if (rc != SB_OK) {
        sb_match_release(mt);
        return rc;
    }
    for (;;) {
        if ((rc = sb_match_get_info(mt, &mi)) != SB_OK)
            break;
        rep->matched_tokens = mi.n_tokens;
        rep->miss = mi.miss;
        rep->disk_skipped = 0;
        size_t k = mi.n_tokens ? choose(s, &mi, n, rep) : 0;
        size_t pages = (k + s->kv.page_tokens - 1) / s->kv.page_tokens;
        size_t disk_pages = pages > mi.n_pages_ram ? pages - mi.n_pages_ram : 0;
        double t0 = sb_rt_now_s();
        /* The whole prompt restored with its point state: read the pages
         * and the point together (its record follows the last page's). */
        bool want_point = k == n && k == mi.n_tokens && mi.has_point;
        rc = want_point && disk_pages ? sb_match_load(mt, pages, 1) : SB_OK;
        if (rc == SB_OK)
            rc = sb_rt_kv_adopt(&s->kv, mt, prompt, k);
        if (rc == SB_ERR_CORRUPT || rc == SB_ERR_IO)
            continue; /* the match shrank to the valid prefix: choose again */
        if (rc != SB_OK)
            break;
        rep->cached_tokens = k;
        if (disk_pages)
            disk_read(s, &mi, disk_pages, t0, rep);
        if (want_point) {
            const void *pt = sb_match_point(mt);
            if (pt) {
                memcpy(s->logits, pt, (size_t)s->m->hp.n_vocab * sizeof(float));
                rep->point_hit = 1;
            } else { /* unreadable: recompute the last position */
                sb_rt_kv_reset(&s->kv);
                k = n - 1;
                if ((rc = sb_rt_kv_adopt(&s->kv, mt, prompt, k)) != SB_OK)
                    break;
                rep->cached_tokens = k;
                if (rep->cached_disk_tokens > k)
                    rep->cached_disk_tokens = k;
            }
        }
        break;
    }
    sb_match_release(mt);
    if (rc == SB_OK && shared_added && rep->cached_tokens > shared_from) {
        size_t end = shared_from + shared_added;
        rep->cached_shared_tokens =
            (rep->cached_tokens < end ? rep->cached_tokens : end) - shared_from;
    }
    if (rc != SB_OK)
        sb_rt_kv_reset(&s->kv);
    else
        rep->bank_bytes =
            (rep->cached_tokens + s->kv.page_tokens - 1) / s->kv.page_tokens * s->page_bytes +
            (rep->point_hit ? s->point_bytes : 0);
    return rc;
}

/* Steps 2-3 of a hybrid model's turn: the longest prefix L with a
 * boundary, all or nothing (the recurrent state exists at L only). Pages on
 * disk are read when that is estimated faster than computing L tokens. On
 * return the KV and its recurrent state are at cached_tokens (possibly 0);
 * rep->point_hit says s->logits are filled. */
static int restore_hybrid(sb_rt_session *s, const uint32_t *prompt, size_t n, sb_rt_turn *rep)
{
    sb_rt_kv_reset(&s->kv);
    sb_match *mt = NULL;
    int rc = sb_ns_match(s->ns, prompt, n, &mt);
    if (rc != SB_OK)
        return rc;
    sb_match_info mi;
    size_t pt = s->kv.page_tokens;
    for (;;) {
        if ((rc = sb_match_get_info(mt, &mi)) != SB_OK)
            break;
        size_t L = mi.n_tokens;
        rep->matched_tokens = L;
        rep->miss = mi.miss;
        rep->disk_skipped = 0;
        rep->cached_disk_tokens = 0;
        if (!L)
            break;
        size_t pages = (L + pt - 1) / pt;
        size_t disk_pages = pages > mi.n_pages_ram ? pages - mi.n_pages_ram : 0;
        if (disk_pages) {
            rep->est_read_s = s->rates.read_fixed_s +
                              ((double)disk_pages * (double)s->page_bytes + (double)s->point_bytes) /
                                  s->rates.read_bytes_s;
            rep->est_recompute_s = (double)L / s->rates.prefill_tok_s;
            if (s->disk_use == SB_RT_DISK_NEVER ||
                (s->disk_use == SB_RT_DISK_READ && rep->est_read_s > rep->est_recompute_s)) {
                rep->disk_skipped = 1;
                break;
            }
        }
        double t0 = sb_rt_now_s();
        /* Pages and the boundary on disk are read in one batch (the
         * boundary's record follows the last page's). */
        rc = disk_pages && mi.has_point ? sb_match_load(mt, pages, 1) : SB_OK;
        if (rc == SB_OK)
            rc = sb_rt_kv_adopt(&s->kv, mt, prompt, L);
        const void *pnt = rc == SB_OK ? sb_match_point(mt) : NULL;
        if (rc == SB_ERR_CORRUPT || rc == SB_ERR_IO || (rc == SB_OK && !pnt)) {
            /* a page or the boundary failed to read: the match shrank to
             * what is left (sb_match_restore); choose again */
            sb_rt_kv_reset(&s->kv);
            sb_match_info now;
            if ((rc = sb_match_get_info(mt, &now)) != SB_OK)
                break;
            if (now.n_tokens >= L)
                break; /* no progress: compute everything */
            continue;
        }
        if (rc != SB_OK)
            break;
        bool has = false;
        if (sb_rt_boundary_decode(s->m, s->kv.gdn, pnt, L, s->logits, &has) != SB_OK ||
            (L == n && !has)) {
            /* not a boundary this runtime can resume from (or, at the end
             * of the prompt, one without the logits it needs: the state
             * cannot step back one token): compute everything */
            sb_rt_kv_reset(&s->kv);
            break;
        }
        rep->point_hit = L == n;
        rep->cached_tokens = L;
        rep->boundary_tokens = L;
        rep->bank_bytes = pages * s->page_bytes + s->point_bytes;
        if (disk_pages)
            disk_read(s, &mi, disk_pages, t0, rep);
        break;
    }
    if (rc == SB_OK) {
        size_t matched = mi.n_matched_tokens < n ? mi.n_matched_tokens : n;
        rep->recomputed_tokens = matched > rep->cached_tokens ? matched - rep->cached_tokens : 0;
    }
    sb_match_release(mt);
    if (rc != SB_OK)
        sb_rt_kv_reset(&s->kv);
    return rc;
}

/* The turn's second commit (the answer) after its first (the prompt):
 * counts of what each call added or queued add up; the state's standing
 * (its ticket, what it still waits for or lacks) is the later call's. */
static void merge_outcome(sb_write_outcome *turn, const sb_write_outcome *later)
{
    sb_write_outcome m = *later;
    m.pages_new += turn->pages_new;
    m.points_new += turn->points_new;
    m.queued += turn->queued;
    m.written += turn->written;
    *turn = m;
}

/* Record a boundary at the KV's end (its logits: s->logits): the point
 * state committed with the sequence so far. */
static void record_boundary(sb_rt_session *s)
{
    sb_rt_turn *rep = &s->rep;
    sb_write_outcome oc;
    sb_rt_boundary_encode(s->m, s->kv.gdn, s->logits, s->point);
    int rc = sb_rt_kv_commit(&s->kv, s->point, &oc);
    if (rc == SB_OK) {
        rep->boundaries_written++;
        merge_outcome(&rep->disk, &oc);
    } else if (rep->commit_rc == SB_OK) {
        rep->commit_rc = rc;
    }
}

/* ---- a turn, step by step ---------------------------------------------------------- */

sb_rt_turn_state sb_rt_session_state(const sb_rt_session *s)
{
    return s ? s->state : SB_RT_TURN_NONE;
}

const sb_rt_turn *sb_rt_session_report(const sb_rt_session *s)
{
    return &s->rep;
}

/* Step 4, once the prompt's last position is computed (or its logits came
 * from a point state): commit the prompt with its logits. */
static void prompt_done(sb_rt_session *s)
{
    sb_rt_turn *rep = &s->rep;
    rep->prefill_s = sb_rt_now_s() - s->t_prefill;
    if (rep->prefill_tokens >= 64)
        average(&s->rates.prefill_tok_s, &s->rates.prefill_samples,
                (double)rep->prefill_tokens / rep->prefill_s);
    if (s->m->hp.n_rec && !rep->point_hit)
        record_boundary(s); /* the end of the prompt */
    else if (s->m->hp.n_rec) /* its boundary is the one restored */
        rep->commit_rc = sb_rt_kv_commit(&s->kv, NULL, &rep->disk);
    else
        rep->commit_rc = sb_rt_kv_commit(&s->kv, s->logits, &rep->disk);
    s->state = SB_RT_TURN_SAMPLE;
}

int sb_rt_session_begin(sb_rt_session *s, const uint32_t *input, size_t n_input, size_t n_gen,
                        sb_rt_turn *rep)
{
    if (rep)
        memset(rep, 0, sizeof *rep);
    if (!s || s->state != SB_RT_TURN_NONE || (n_input && !input) || s->n_tok + n_input == 0 ||
        check_ids(s->m, input, n_input) != SB_OK)
        return SB_ERR_INVAL;
    size_t n = s->n_tok + n_input;
    if (n_gen > s->m->hp.n_ctx || n + n_gen > s->m->hp.n_ctx)
        return SB_ERR_TOO_MANY_TOKENS;
    int rc = grow(&s->prompt, &s->prompt_cap, n);
    if (rc != SB_OK)
        return rc;
    /* 1. the prompt */
    if (s->n_tok)
        memcpy(s->prompt, s->tok, s->n_tok * sizeof *s->tok);
    if (n_input)
        memcpy(s->prompt + s->n_tok, input, n_input * sizeof *input);
    memset(&s->rep, 0, sizeof s->rep);
    s->rep.prompt_tokens = s->n_prompt = n;
    s->fg = s->mark_fg ? sb_ns_store(s->ns) : NULL;
    if (s->fg)
        sb_store_foreground(s->fg, 1);
    /* 2-3. match, choose, adopt */
    uint64_t f0, f1;
    double c0 = thread_cpu_s(&f0);
    s->t0 = sb_rt_now_s();
    bool hybrid = s->m->hp.n_rec != 0;
    if ((rc = (hybrid ? restore_hybrid : restore)(s, s->prompt, n, &s->rep)) != SB_OK) {
        if (s->fg)
            sb_store_foreground(s->fg, 0);
        s->fg = NULL;
        return rc;
    }
    s->t_prefill = sb_rt_now_s();
    sb_rt_turn *r = &s->rep;
    r->restore_s = s->t_prefill - s->t0;
    r->restore_cpu_s = thread_cpu_s(&f1) - c0;
    r->restore_faults = f1 - f0;
    r->cache_mode = r->cached_shared_tokens ? SB_RT_CACHE_REMOTE
                    : r->cached_disk_tokens ? SB_RT_CACHE_SSD
                    : r->cached_tokens    ? SB_RT_CACHE_WARM
                                          : SB_RT_CACHE_COLD;
    r->prefill_tokens = n - r->cached_tokens;
    s->n_marks = hybrid && !r->point_hit ? sb_rt_boundary_marks(s->grid, s->keep, r->cached_tokens, n, s->marks) : 0;
    s->mark_i = 0;
    s->state = SB_RT_TURN_PREFILL;
    if (r->point_hit) /* the logits came with the match: nothing to compute */
        prompt_done(s);
    if (rep)
        *rep = s->rep;
    return SB_OK;
}

size_t sb_rt_session_next(sb_rt_session *s, size_t max_rows, sb_rt_seq_step *step)
{
    memset(step, 0, sizeof *step);
    step->kv = &s->kv;
    step->logits = s->logits;
    if (s->state == SB_RT_TURN_RUN) {
        step->tokens = &s->next_id;
        step->n = max_rows ? 1 : 0;
    } else if (s->state == SB_RT_TURN_PREFILL) {
        /* up to the prompt's end, or a hybrid model's next grid boundary
         * (whose logits it records) */
        size_t left = (s->mark_i < s->n_marks ? s->marks[s->mark_i] : s->n_prompt) -
                      s->kv.n_tokens;
        step->tokens = s->prompt + s->kv.n_tokens;
        step->n = left < max_rows ? left : max_rows;
        if (step->n < left)
            step->logits = NULL; /* only the last position's are kept */
    }
    return step->n;
}

int sb_rt_session_ran(sb_rt_session *s, const sb_rt_seq_step *step)
{
    if (step->rc != SB_OK)
        return step->rc;
    if (s->state == SB_RT_TURN_RUN) {
        s->state = SB_RT_TURN_SAMPLE;
    } else if (s->state == SB_RT_TURN_PREFILL) {
        if (s->mark_i < s->n_marks && s->kv.n_tokens == s->marks[s->mark_i]) {
            record_boundary(s); /* a grid boundary */
            s->mark_i++;
        }
        if (s->kv.n_tokens == s->n_prompt)
            prompt_done(s);
    }
    return SB_OK;
}

int sb_rt_session_push(sb_rt_session *s, uint32_t id)
{
    if (!s || s->state != SB_RT_TURN_SAMPLE || id >= s->m->hp.n_vocab)
        return SB_ERR_INVAL;
    if (s->kv.n_tokens + 1 > s->kv.max_tokens)
        return SB_ERR_TOO_MANY_TOKENS;
    if (s->rep.gen_tokens++ == 0) {
        s->t3 = sb_rt_now_s();
        s->rep.ttft_s = s->t3 - s->t0;
    }
    s->next_id = id;
    s->state = SB_RT_TURN_RUN;
    return SB_OK;
}

void sb_rt_session_abort(sb_rt_session *s)
{
    if (!s || s->state == SB_RT_TURN_NONE)
        return;
    sb_rt_kv_reset(&s->kv);
    if (s->fg)
        sb_store_foreground(s->fg, 0);
    s->fg = NULL;
    s->state = SB_RT_TURN_NONE;
}

int sb_rt_session_end(sb_rt_session *s, sb_rt_turn *rep)
{
    if (!s || s->state == SB_RT_TURN_NONE)
        return SB_ERR_INVAL;
    sb_rt_turn *r = &s->rep;
    double t = sb_rt_now_s();
    /* 5. commit what was computed past the prompt's commit: the answer's
     *    positions (with the logits after the last one), or the prompt
     *    positions a stopped prefill got through */
    if (s->kv.n_tokens > s->n_prompt && s->m->hp.n_rec) {
        record_boundary(s); /* the end of the turn */
    } else if (s->kv.n_tokens > s->n_prompt) {
        sb_write_outcome oc;
        int crc = sb_rt_kv_commit(&s->kv, s->logits, &oc);
        if (r->commit_rc == SB_OK)
            r->commit_rc = crc;
        if (crc == SB_OK)
            merge_outcome(&r->disk, &oc);
    } else if (s->state == SB_RT_TURN_PREFILL && s->kv.n_tokens > r->cached_tokens) {
        r->commit_rc = sb_rt_kv_commit(&s->kv, NULL, &r->disk);
    }
    if (!r->gen_tokens)
        r->ttft_s = s->state == SB_RT_TURN_PREFILL ? 0 : t - s->t0;
    else
        r->decode_s = t - s->t3;
    if (s->state == SB_RT_TURN_PREFILL)
        r->prefill_s = t - s->t_prefill;
    r->prefill_tok_s = r->prefill_tokens && r->prefill_s > 0
                           ? (double)r->prefill_tokens / r->prefill_s : 0;
    r->decode_tok_s = r->gen_tokens && r->decode_s > 0 ? (double)r->gen_tokens / r->decode_s : 0;
    /* The session's tokens: the prompt and the answer, as the KV holds them. */
    int rc = grow(&s->tok, &s->cap, s->kv.n_tokens ? s->kv.n_tokens : 1);
    if (rc == SB_OK) {
        memcpy(s->tok, s->kv.tokens, s->kv.n_tokens * sizeof *s->tok);
        s->n_tok = s->kv.n_tokens;
    }
    if (rep)
        *rep = *r;
    /* Between turns the session holds no page: the bank decides what stays
     * in RAM, and the next turn restores from it like any other. */
    sb_rt_session_abort(s);
    return rc;
}

int sb_rt_session_turn(sb_rt_session *s, const uint32_t *input, size_t n_input,
                       const sb_rt_gen *g, sb_rt_turn *rep)
{
    if (rep)
        memset(rep, 0, sizeof *rep);
    if (!s || !g || !g->smp)
        return SB_ERR_INVAL;
    int rc = sb_rt_session_begin(s, input, n_input, g->n_gen, rep);
    if (rc != SB_OK)
        return rc;
    size_t gen = 0;
    uint32_t last = UINT32_MAX;
    int prompt_copied = 0;
    for (;;) {
        if (s->state == SB_RT_TURN_SAMPLE) {
            if (!prompt_copied && g->prompt_logits)
                memcpy(g->prompt_logits, s->logits, (size_t)s->m->hp.n_vocab * sizeof *s->logits);
            prompt_copied = 1;
            /* Every answer token goes through the model (the stop token
             * too), so the committed KV and point state cover the answer. */
            if (gen == g->n_gen || (gen && last == g->stop_id))
                break;
            last = sb_rt_sample(g->smp, s->logits);
            gen++;
            if ((rc = sb_rt_session_push(s, last)) != SB_OK)
                break;
            if (g->on_token)
                g->on_token(g->cb_ctx, last);
            continue;
        }
        sb_rt_seq_step st;
        sb_rt_session_next(s, SIZE_MAX, &st);
        if ((rc = sb_rt_forward_multi(s->ctx, &st, 1)) != SB_OK ||
            (rc = sb_rt_session_ran(s, &st)) != SB_OK)
            break;
    }
    if (rc != SB_OK) {
        if (rep)
            *rep = s->rep;
        sb_rt_session_abort(s);
        return rc;
    }
    return sb_rt_session_end(s, rep);
}

/* ---- session files (the format: sfile.h) ------------------------------------------- */

int sb_rt_session_save(const sb_rt_session *s, const char *path, sb_rt_err *err)
{
    sb_rt_sfile f = { .tokens = s->tok, .n_tokens = s->n_tok }; /* no conversation section */
    memcpy(f.model_id, s->m->id, SB_RT_ID_BYTES);
    uint8_t *b;
    size_t bytes;
    if (sb_rt_sfile_encode(&f, &b, &bytes) != SB_OK)
        return sb_rt_fail(err, SB_ERR_NOMEM, "%s: out of memory", path);
    int rc = sb_rt_sfile_write(path, b, bytes, err);
    free(b);
    return rc;
}

int sb_rt_session_load(const sb_rt_model *m, const char *path, uint32_t **tokens, size_t *n,
                       sb_rt_err *err)
{
    *tokens = NULL, *n = 0;
    sb_rt_sfile f;
    int rc = sb_rt_sfile_read(path, m->id, &f, err);
    if (rc != SB_OK)
        return rc;
    for (size_t i = 0; i < f.n_tokens; i++)
        if (f.tokens[i] >= m->hp.n_vocab) {
            rc = sb_rt_fail(err, SB_ERR_FORMAT, "%s: token %zu is %u, not below the "
                            "vocabulary size %u", path, i, f.tokens[i], m->hp.n_vocab);
            sb_rt_sfile_free(&f);
            return rc;
        }
    *tokens = f.tokens, *n = f.n_tokens; /* the rest (a server's section) is not used */
    f.tokens = NULL;
    sb_rt_sfile_free(&f);
    return SB_OK;
}
