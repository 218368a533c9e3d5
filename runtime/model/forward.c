/* forward.c -- the forward pass over a paged KV cache (forward.h). The step
 * numbers below are forward.h's. One pass (sb_rt_forward_pass) runs the
 * rows of one or more sequences: only the KV writes and attention look at
 * which sequence a row belongs to (forward_pass.h). */
#include "model/forward.h"
#include "model/forward_pass.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/quant.h"
#include "model/deltanet.h"

struct sb_rt_ctx {
    const sb_rt_model *m;
    sb_rt_pool *pool;
    uint32_t n_batch;          /* largest batch the scratch holds */
    uint32_t q_dim, kv_dim;    /* n_heads * head_dim, n_kv_heads * head_dim */
    float *x;                  /* (n_batch, dim) residual stream */
    float *xb;                 /* (n_batch, dim) normed input of a sublayer */
    float *q;                  /* (n_batch, q_dim) */
    float *qg;                 /* (n_batch, 2 q_dim) gated attention's q and
                                  gates, head by head; NULL without */
    float *gate;               /* (n_batch, q_dim) the gates; NULL without */
    sb_rt_gdn_scratch *gs;     /* hybrid models: the recurrent layers' */
    float *k, *v;              /* (n_batch, kv_dim) before they go to the pages */
    float *att;                /* (n_batch, q_dim) attention output */
    float *hb, *hb2;           /* (n_batch, n_ff) gate and up */
    float *rope;               /* (n_batch, head_dim / 2, 2) cos, sin */
    float *scores;             /* (threads, ATT_GROUP * gqa, n_ctx) attention scores */
    float *qo;                 /* (threads, 2, ATT_GROUP * gqa, head_dim) a task's
                                  queries and outputs, gathered */
    uint32_t gqa;              /* query heads per KV head */
    float *lg;                 /* (lg_rows, n_vocab) logits scratch of
                                  sb_rt_forward_multi, grown on demand */
    size_t lg_rows;
    size_t *ix;                /* (n_batch) rows whose logits a pass gives */
};

/* Positions per attention task: with the query heads of one KV head, up to
 * ATT_GROUP * gqa queries read each K and V row of the sequence once. */
#define ATT_GROUP 8u

/* ---- context ---------------------------------------------------------------------- */

void sb_rt_ctx_free(sb_rt_ctx *c)
{
    if (!c)
        return;
    sb_rt_pool_free(c->pool);
    free(c->x);
    free(c->xb);
    free(c->q);
    free(c->qg);
    free(c->gate);
    sb_rt_gdn_scratch_free(c->gs);
    free(c->k);
    free(c->v);
    free(c->att);
    free(c->hb);
    free(c->hb2);
    free(c->rope);
    free(c->scores);
    free(c->qo);
    free(c->lg);
    free(c->ix);
    free(c);
}

static float *floats(size_t a, size_t b)
{
    return a && b && a <= SIZE_MAX / sizeof(float) / b ? malloc(a * b * sizeof(float)) : NULL;
}

int sb_rt_ctx_new(const sb_rt_model *m, unsigned n_threads, uint32_t n_batch, sb_rt_ctx **out)
{
    if (!m || !out)
        return SB_ERR_INVAL;
    *out = NULL;
    sb_rt_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return SB_ERR_NOMEM;
    const sb_rt_hparams *hp = &m->hp;
    c->m = m;
    c->n_batch = n_batch ? n_batch : 512;
    c->q_dim = hp->n_heads * hp->head_dim;
    c->kv_dim = hp->n_kv_heads * hp->head_dim;
    int rc = sb_rt_pool_new(n_threads, &c->pool);
    if (rc != SB_OK) {
        free(c);
        return rc;
    }
    size_t nb = c->n_batch;
    c->x = floats(nb, hp->dim);
    c->xb = floats(nb, hp->dim);
    c->q = floats(nb, c->q_dim);
    c->k = floats(nb, c->kv_dim);
    c->v = floats(nb, c->kv_dim);
    c->att = floats(nb, c->q_dim);
    c->hb = floats(nb, hp->n_ff);
    c->hb2 = floats(nb, hp->n_ff);
    c->rope = floats(nb, hp->head_dim);
    c->gqa = hp->n_heads / hp->n_kv_heads;
    size_t nq = (size_t)ATT_GROUP * c->gqa, th = sb_rt_pool_threads(c->pool);
    c->scores = floats(th * nq, hp->n_ctx);
    c->qo = floats(th * 2 * nq, hp->head_dim);
    c->ix = malloc(nb * sizeof *c->ix);
    if (hp->attn_gate) {
        c->qg = floats(nb, 2 * (size_t)c->q_dim);
        c->gate = floats(nb, c->q_dim);
    }
    if (hp->n_rec && sb_rt_gdn_scratch_new(m, c->n_batch, (unsigned)th, &c->gs) != SB_OK)
        c->gs = NULL;
    if (!c->ix || !c->x || !c->xb || !c->q || !c->k || !c->v || !c->att || !c->hb || !c->hb2 ||
        !c->rope || !c->scores || !c->qo || (hp->attn_gate && (!c->qg || !c->gate)) ||
        (hp->n_rec && !c->gs)) {
        sb_rt_ctx_free(c);
        return SB_ERR_NOMEM;
    }
    *out = c;
    return SB_OK;
}

unsigned sb_rt_ctx_threads(const sb_rt_ctx *c)
{
    return c ? sb_rt_pool_threads(c->pool) : 0;
}

uint32_t sb_rt_ctx_batch(const sb_rt_ctx *c)
{
    return c ? c->n_batch : 0;
}

const sb_rt_model *sb_rt_ctx_model(const sb_rt_ctx *c)
{
    return c->m;
}

size_t *sb_rt_ctx_rows_scratch(sb_rt_ctx *c)
{
    return c->ix;
}

float *sb_rt_ctx_logits_scratch(sb_rt_ctx *c, size_t rows)
{
    if (rows > c->lg_rows) {
        float *p = floats(rows, c->m->hp.n_vocab);
        if (!p)
            return NULL;
        free(c->lg);
        c->lg = p, c->lg_rows = rows;
    }
    return c->lg;
}

/* ---- pieces ----------------------------------------------------------------------- */

/* Row `row` of matrix w as floats into y (w->in of them): an embedding
 * lookup, in any weight type (quant.h). */
static void mat_row(const sb_rt_mat *w, uint32_t row, float *y)
{
    const uint8_t *p = (const uint8_t *)w->data + (size_t)row * sb_rt_dtype_row_bytes(w->type, w->in);
    sb_rt_dequant_row(w->type, p, y, w->in);
}

static void matmul(sb_rt_ctx *c, float *y, const float *x, const sb_rt_mat *w, size_t n)
{
    sb_rt_matmul(c->pool, y, x, w->data, w->type, n, w->in, w->out);
}

static void add_bias(float *y, const float *b, size_t n, size_t width)
{
    if (!b)
        return;
    for (size_t i = 0; i < n; i++)
        sb_rt_add(y + i * width, b, width);
}

/* Step 2's angles for each row's position into c->rope: computed once per
 * pass (every layer uses the same), in double from the position and the
 * model's table alone (model.h: theta_j, every scaling applied). */
static void rope_angles(sb_rt_ctx *c, const sb_rt_fw_seq *seqs, size_t n_seqs)
{
    const sb_rt_model *m = c->m;
    uint32_t hd = m->hp.head_dim, half = m->hp.n_rot / 2;
    double ms = m->rope_mscale;
    for (size_t s = 0; s < n_seqs; s++)
        for (size_t i = 0; i < seqs[s].n; i++) {
            float *cs = c->rope + (seqs[s].row0 + i) * hd;
            for (uint32_t j = 0; j < half; j++) {
                double theta = (double)(seqs[s].pos0 + i) * m->rope[j];
                cs[2 * j] = (float)(cos(theta) * ms);
                cs[2 * j + 1] = (float)(sin(theta) * ms);
            }
        }
}

/* Step 2: rotate each head of q (n_heads) and k (n_kv_heads) by the
 * angles in c->rope. llama rotates adjacent pairs (2j, 2j + 1); qwen2,
 * qwen3 and qwen35 (NEOX) pair j and j + n_rot / 2, and leave dimensions
 * from n_rot on as they are (qwen35 rotates the first n_rot only). */
static void rope(sb_rt_ctx *c, size_t n)
{
    const sb_rt_hparams *hp = &c->m->hp;
    uint32_t hd = hp->head_dim, half = hp->n_rot / 2;
    bool neox = hp->rope_neox;
    for (size_t i = 0; i < n; i++) {
        const float *cs = c->rope + i * hd;
        for (int which = 0; which < 2; which++) {
            float *v = which ? c->k + i * c->kv_dim : c->q + i * c->q_dim;
            uint32_t heads = which ? hp->n_kv_heads : hp->n_heads;
            for (uint32_t h = 0; h < heads; h++, v += hd)
                for (uint32_t j = 0; j < half; j++) {
                    uint32_t a = neox ? j : 2 * j, b = neox ? j + half : 2 * j + 1;
                    float x0 = v[a], x1 = v[b], co = cs[2 * j], si = cs[2 * j + 1];
                    v[a] = x0 * co - x1 * si;
                    v[b] = x0 * si + x1 * co;
                }
        }
    }
}

/* Step 1b (qwen3): each head of y ((n, heads * head_dim)) RMS-normed in
 * place with the weights w (head_dim). */
static void head_norm(sb_rt_ctx *c, float *y, const float *w, size_t n, uint32_t heads)
{
    const sb_rt_hparams *hp = &c->m->hp;
    for (size_t i = 0; i < n * heads; i++)
        sb_rt_rmsnorm(y + i * hp->head_dim, y + i * hp->head_dim, w, hp->head_dim, hp->rms_eps);
}

typedef struct att_job {
    sb_rt_ctx *c;
    const sb_rt_fw_seq *seqs; /* the pass's sequences, their tasks in order */
    uint32_t layer;
} att_job;

/* Attention tasks of a sequence of n rows: a group of up to ATT_GROUP rows
 * per KV head. */
static size_t att_tasks(const sb_rt_ctx *c, size_t n)
{
    return (n + ATT_GROUP - 1) / ATT_GROUP * c->m->hp.n_kv_heads;
}

/* Prefetch KV head kvh's slice of the K (which 0) or V (1) rows of the
 * page run that starts at t, when t <= last: pages sit anywhere in memory
 * and a run holds 16-odd rows 128 bytes of 512 apart, too short a stream
 * for the hardware prefetcher to learn, so without this every run of a
 * decode's attention starts with a stall on memory. */
static void att_prefetch(const sb_rt_kv *kv, uint32_t layer, int which, uint32_t kvh,
                         uint32_t hd, size_t t, size_t last)
{
    if (t > last)
        return;
    size_t n = kv->page_tokens - t % kv->page_tokens;
    if (n > last + 1 - t)
        n = last + 1 - t;
    const char *p = (const char *)(sb_rt_kv_row(kv, layer, which, t) + (size_t)kvh * hd);
    for (size_t i = 0; i < n; i++, p += (size_t)kv->kv_dim * 2u) /* rows of one page */
        for (size_t b = 0; b < (size_t)hd * 2u; b += 64)
            __builtin_prefetch(p + b);
}

/* Step 3 for up to ATT_GROUP positions of one sequence and the gqa query
 * heads of one KV head: the sequence's tasks follow those of the sequences
 * before it, and within it task = group * n_kv_heads + kv head. Query
 * (i, g) is position pos0 + i0 + i, head kvh * gqa + g; each reads the K
 * and V rows of positions 0..its own in its own sequence's pages. The K and
 * V rows are loaded once for all the task's queries (sb_rt_qk_f16,
 * sb_rt_av_f16), and every query's scores and sums are the bits of the
 * one-query kernels (kernels.h), so the result does not depend on which
 * positions share a task, nor on the other sequences of the pass. */
static void att_task(void *ctx, size_t task, unsigned thread)
{
    const att_job *jb = ctx;
    sb_rt_ctx *c = jb->c;
    const sb_rt_fw_seq *sq = jb->seqs;
    while (task >= att_tasks(c, sq->n)) /* a few sequences: a scan is cheap */
        task -= att_tasks(c, sq->n), sq++;
    const sb_rt_kv *kv = sq->kv;
    uint32_t layer = jb->layer;
    const sb_rt_hparams *hp = &c->m->hp;
    uint32_t hd = hp->head_dim, gqa = c->gqa;
    size_t i0 = task / hp->n_kv_heads * ATT_GROUP;
    uint32_t kvh = (uint32_t)(task % hp->n_kv_heads);
    size_t ni = sq->n - i0 < ATT_GROUP ? sq->n - i0 : ATT_GROUP, nq = ni * gqa;
    size_t per = (size_t)ATT_GROUP * gqa, ctx_n = hp->n_ctx;
    float *S = c->scores + (size_t)thread * per * ctx_n;
    float *Q = c->qo + (size_t)thread * 2 * per * hd, *O = Q + per * hd;
    for (size_t i = 0; i < ni; i++) /* gather: query i * gqa + g */
        memcpy(Q + i * gqa * hd, c->q + (sq->row0 + i0 + i) * c->q_dim + (size_t)kvh * gqa * hd,
               (size_t)gqa * hd * sizeof *Q);
    float scale = 1.0f / sqrtf((float)hd);
    uint32_t pt = kv->page_tokens, stride = kv->kv_dim;
    size_t p_first = sq->pos0 + i0, p_last = p_first + ni - 1;
    /* scores against K rows 0..p_last, a page's run per call (rows past a
     * query's own position are computed and not used) */
    att_prefetch(kv, layer, 0, kvh, hd, 0, p_last);
    for (size_t t = 0; t <= p_last;) {
        size_t run = pt - t % pt < p_last + 1 - t ? pt - t % pt : p_last + 1 - t;
        att_prefetch(kv, layer, 0, kvh, hd, t + run, p_last);
        sb_rt_qk_f16(S + t, ctx_n, Q, hd, nq, sb_rt_kv_row(kv, layer, 0, t) + (size_t)kvh * hd,
                     stride, run, hd);
        t += run;
    }
    for (size_t q = 0; q < nq; q++) {
        size_t p = p_first + q / gqa;
        float *s = S + q * ctx_n;
        for (size_t t = 0; t <= p; t++)
            s[t] *= scale;
        sb_rt_softmax(s, p + 1);
    }
    memset(O, 0, nq * hd * sizeof *O);
    /* V rows every query reads (0..p_first) for all at once, then each
     * query's rest in order: per output element the same FMAs, row by row */
    att_prefetch(kv, layer, 1, kvh, hd, 0, p_first);
    for (size_t t = 0; t <= p_first;) {
        size_t run = pt - t % pt < p_first + 1 - t ? pt - t % pt : p_first + 1 - t;
        att_prefetch(kv, layer, 1, kvh, hd, t + run, p_first);
        sb_rt_av_f16(O, hd, S + t, ctx_n, nq, sb_rt_kv_row(kv, layer, 1, t) + (size_t)kvh * hd,
                     stride, run, hd);
        t += run;
    }
    for (size_t q = gqa; q < nq; q++) {
        size_t p = p_first + q / gqa;
        for (size_t t = p_first + 1; t <= p; t++)
            sb_rt_axpy_f16(O + q * hd, S[q * ctx_n + t],
                           sb_rt_kv_row(kv, layer, 1, t) + (size_t)kvh * hd, hd);
    }
    for (size_t i = 0; i < ni; i++) /* scatter */
        memcpy(c->att + (sq->row0 + i0 + i) * c->q_dim + (size_t)kvh * gqa * hd, O + i * gqa * hd,
               (size_t)gqa * hd * sizeof *O);
}

/* Step 1 of a gated attention layer (qwen35): attn_q gives, head by head,
 * head_dim query values then head_dim gate values: q and c->gate. */
static void q_and_gate(sb_rt_ctx *c, const sb_rt_layer *w, size_t n)
{
    uint32_t hd = c->m->hp.head_dim;
    matmul(c, c->qg, c->xb, &w->wq, n);
    for (size_t i = 0; i < n * c->m->hp.n_heads; i++) {
        memcpy(c->q + i * hd, c->qg + 2 * i * hd, hd * sizeof *c->q);
        memcpy(c->gate + i * hd, c->qg + (2 * i + 1) * hd, hd * sizeof *c->q);
    }
}

/* One layer over the pass's n rows (steps 1-5; a recurrent layer of a
 * hybrid model replaces 1-4 with deltanet.h's, sequence by sequence). */
static void layer(sb_rt_ctx *c, const sb_rt_fw_seq *seqs, size_t n_seqs, uint32_t l, size_t n)
{
    const sb_rt_hparams *hp = &c->m->hp;
    const sb_rt_layer *w = &c->m->layers[l];
    uint32_t dim = hp->dim;
    /* 1 */
    for (size_t i = 0; i < n; i++)
        sb_rt_rmsnorm(c->xb + i * dim, c->x + i * dim, w->attn_norm, dim, hp->rms_eps);
    if (w->rec) {
        for (size_t s = 0; s < n_seqs; s++) {
            float *xs = c->xb + seqs[s].row0 * dim;
            sb_rt_gdn_layer(c->gs, c->pool, l, seqs[s].kv->gdn, xs, seqs[s].n, xs);
        }
        sb_rt_add(c->x, c->xb, n * dim);
        goto ffn;
    }
    if (hp->attn_gate)
        q_and_gate(c, w, n);
    else
        matmul(c, c->q, c->xb, &w->wq, n);
    matmul(c, c->k, c->xb, &w->wk, n);
    matmul(c, c->v, c->xb, &w->wv, n);
    add_bias(c->q, w->bq, n, c->q_dim);
    add_bias(c->k, w->bk, n, c->kv_dim);
    add_bias(c->v, w->bv, n, c->kv_dim);
    if (w->q_norm) {
        head_norm(c, c->q, w->q_norm, n, hp->n_heads);
        head_norm(c, c->k, w->k_norm, n, hp->n_kv_heads);
    }
    /* 2 */
    rope(c, n);
    size_t tasks = 0;
    for (size_t s = 0; s < n_seqs; s++) {
        const sb_rt_fw_seq *q = &seqs[s];
        for (size_t i = 0, r = q->row0; i < q->n; i++, r++) {
            sb_rt_f32_to_f16(c->k + r * c->kv_dim, sb_rt_kv_row(q->kv, w->slot, 0, q->pos0 + i),
                             c->kv_dim);
            sb_rt_f32_to_f16(c->v + r * c->kv_dim, sb_rt_kv_row(q->kv, w->slot, 1, q->pos0 + i),
                             c->kv_dim);
        }
        tasks += att_tasks(c, q->n);
    }
    /* 3 */
    att_job job = { c, seqs, w->slot };
    sb_rt_pool_run(c->pool, tasks, att_task, &job);
    /* 3b (qwen35): the output of each head times sigmoid(its gate) */
    for (size_t i = 0; hp->attn_gate && i < n * c->q_dim; i++)
        c->att[i] *= 1.0f / (1.0f + expf(-c->gate[i]));
    /* 4: xb takes the projection (its normed input is spent) */
    matmul(c, c->xb, c->att, &w->wo, n);
    sb_rt_add(c->x, c->xb, n * dim);
ffn:
    /* 5 */
    for (size_t i = 0; i < n; i++)
        sb_rt_rmsnorm(c->xb + i * dim, c->x + i * dim, w->ffn_norm, dim, hp->rms_eps);
    matmul(c, c->hb, c->xb, &w->gate, n);
    matmul(c, c->hb2, c->xb, &w->up, n);
    sb_rt_silu_mul(c->hb, c->hb2, n * hp->n_ff);
    matmul(c, c->xb, c->hb, &w->down, n);
    sb_rt_add(c->x, c->xb, n * dim);
}

void sb_rt_forward_pass(sb_rt_ctx *c, const sb_rt_fw_seq *seqs, size_t n_seqs,
                        const uint32_t *tokens, size_t n, const size_t *out_rows, size_t n_out,
                        float *logits)
{
    const sb_rt_hparams *hp = &c->m->hp;
    for (size_t i = 0; i < n; i++)
        mat_row(&c->m->embd, tokens[i], c->x + i * hp->dim);
    rope_angles(c, seqs, n_seqs);
    for (uint32_t l = 0; l < hp->n_layers; l++)
        layer(c, seqs, n_seqs, l, n);
    for (size_t s = 0; s < n_seqs; s++)
        if (seqs[s].kv->gdn)
            sb_rt_gdn_advance(seqs[s].kv->gdn, seqs[s].n);
    if (n_out) { /* the rows asked for, normed side by side in xb */
        for (size_t k = 0; k < n_out; k++)
            sb_rt_rmsnorm(c->xb + k * hp->dim, c->x + out_rows[k] * hp->dim, c->m->out_norm,
                          hp->dim, hp->rms_eps);
        matmul(c, logits, c->xb, &c->m->output, n_out);
    }
}

/* One batch of n <= n_batch tokens of one sequence. */
static int batch(sb_rt_ctx *c, sb_rt_kv *kv, const uint32_t *tokens, size_t n,
                 sb_rt_logits which, float *logits)
{
    int rc = sb_rt_kv_reserve(kv, n);
    if (rc != SB_OK)
        return rc;
    sb_rt_fw_seq seq = { kv, kv->n_tokens, 0, n };
    size_t first = which == SB_RT_LOGITS_ALL ? 0 : n - 1;
    size_t n_out = which == SB_RT_LOGITS_NONE ? 0 : n - first;
    size_t *rows = c->ix;
    for (size_t k = 0; k < n_out; k++)
        rows[k] = first + k;
    sb_rt_forward_pass(c, &seq, 1, tokens, n, rows, n_out, logits);
    return sb_rt_kv_append_tokens(kv, tokens, n);
}

int sb_rt_forward(sb_rt_ctx *c, sb_rt_kv *kv, const uint32_t *tokens, size_t n,
                  sb_rt_logits which, float *logits)
{
    if (!c || !kv || !tokens || n == 0 || (which != SB_RT_LOGITS_NONE && !logits))
        return SB_ERR_INVAL;
    for (size_t i = 0; i < n; i++)
        if (tokens[i] >= c->m->hp.n_vocab)
            return SB_ERR_INVAL;
    if (kv->n_tokens + n > kv->max_tokens)
        return SB_ERR_TOO_MANY_TOKENS;
    if (kv->gdn && sb_rt_gdn_pos(kv->gdn) != kv->n_tokens)
        return SB_ERR_NO_POINT; /* the recurrent state is not at the sequence's end */
    size_t V = c->m->hp.n_vocab;
    for (size_t done = 0; done < n;) {
        size_t k = n - done < c->n_batch ? n - done : c->n_batch;
        bool last = done + k == n;
        sb_rt_logits w = which == SB_RT_LOGITS_ALL ? which : last ? which : SB_RT_LOGITS_NONE;
        int rc = batch(c, kv, tokens + done, k, w,
                       which == SB_RT_LOGITS_ALL ? logits + done * V : logits);
        if (rc != SB_OK)
            return rc;
        done += k;
    }
    return SB_OK;
}
