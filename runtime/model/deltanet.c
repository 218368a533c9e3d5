/* deltanet.c -- the Gated DeltaNet layer and its recurrent state
 * (deltanet.h; the step numbers are its). */
#include "model/deltanet.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"

#define CHUNK SB_RT_GDN_CHUNK

/* Shapes of one model's recurrent layers, and where each part of a
 * layer's state sits in its block of layer_floats (deltanet.h's table). */
typedef struct gdn_dims {
    uint32_t n_k, n_v, d, d_conv;
    uint32_t key_dim, value_dim, conv_dim; /* n_k d, n_v d, 2 key_dim + value_dim */
    size_t s_floats;                       /* n_v d d: S_0 of every head */
    size_t off_conv, off_k, off_delta, off_g; /* the parts' offsets */
    size_t layer_floats;
} gdn_dims;

struct sb_rt_gdn {
    const sb_rt_model *m;
    gdn_dims dm;
    size_t pos;                /* tokens taken in */
    float *state;              /* (n_rec, layer_floats): the serialized layout */
};

/* One thread's working rows for a chunk (scan_task). */
typedef struct chunk_tmp {
    float *pk, *pq;            /* (CHUNK, d) S_0 k_i and S_0 q_i of the new rows */
    float *kk, *qk;            /* (CHUNK, CHUNK) k_i . k_j (j < i), q_i . k_j (j <= i) */
    float *coef;               /* (CHUNK) a row's coefficients */
    float *y;                  /* (d) a row of the next S_0 */
} chunk_tmp;

struct sb_rt_gdn_scratch {
    const sb_rt_model *m;
    gdn_dims dm;
    uint32_t n_batch;
    unsigned n_threads;
    chunk_tmp *tmp;            /* (n_threads) */
    float *tmp_mem;
    float *mixed;              /* (n_batch, conv_dim) step 1, before the conv */
    float *conv;               /* (n_batch, conv_dim) step 2's output: q | k | v */
    float *z;                  /* (n_batch, value_dim) */
    float *beta;               /* (n_batch, n_v) b, then beta */
    float *g;                  /* (n_batch, n_v) a, then g */
    float *o;                  /* (n_batch, value_dim) step 4's output */
};

static void dims_of(const sb_rt_model *m, gdn_dims *dm)
{
    const sb_rt_hparams *hp = &m->hp;
    dm->n_k = hp->ssm_k_heads;
    dm->n_v = hp->ssm_v_heads;
    dm->d = hp->ssm_head_dim;
    dm->d_conv = hp->ssm_conv;
    dm->key_dim = dm->n_k * dm->d;
    dm->value_dim = dm->n_v * dm->d;
    dm->conv_dim = 2 * dm->key_dim + dm->value_dim;
    dm->s_floats = (size_t)dm->n_v * dm->d * dm->d;
    dm->off_conv = dm->s_floats;
    dm->off_k = dm->off_conv + (size_t)(dm->d_conv - 1) * dm->conv_dim;
    dm->off_delta = dm->off_k + (size_t)dm->n_k * CHUNK * dm->d;
    dm->off_g = dm->off_delta + (size_t)dm->n_v * CHUNK * dm->d;
    dm->layer_floats = dm->off_g + (size_t)dm->n_v * CHUNK;
}

static float *floats(size_t a, size_t b)
{
    return a && b && a <= SIZE_MAX / sizeof(float) / b ? calloc(a * b, sizeof(float)) : NULL;
}

/* ---- state ------------------------------------------------------------------------ */

int sb_rt_gdn_new(const sb_rt_model *m, sb_rt_gdn **out)
{
    if (!out)
        return SB_ERR_INVAL;
    *out = NULL;
    if (!m || !m->hp.n_rec)
        return SB_ERR_INVAL;
    sb_rt_gdn *g = calloc(1, sizeof *g);
    if (!g)
        return SB_ERR_NOMEM;
    g->m = m;
    dims_of(m, &g->dm);
    g->state = floats(m->hp.n_rec, g->dm.layer_floats);
    if (!g->state) {
        free(g);
        return SB_ERR_NOMEM;
    }
    *out = g;
    return SB_OK;
}

void sb_rt_gdn_free(sb_rt_gdn *g)
{
    if (!g)
        return;
    free(g->state);
    free(g);
}

void sb_rt_gdn_reset(sb_rt_gdn *g)
{
    memset(g->state, 0, g->m->hp.n_rec * g->dm.layer_floats * sizeof *g->state);
    g->pos = 0;
}

size_t sb_rt_gdn_pos(const sb_rt_gdn *g)
{
    return g->pos;
}

size_t sb_rt_gdn_bytes(const sb_rt_model *m)
{
    gdn_dims dm;
    dims_of(m, &dm);
    return (size_t)m->hp.n_rec * dm.layer_floats * sizeof(float);
}

/* The row slots of layer block L from row r on: rows of every head
 * (zeroed in f, or checked to be zero). Returns whether they were. */
static bool rows_past(const gdn_dims *dm, float *L, uint32_t r, bool zero)
{
    bool ok = true;
    for (uint32_t h = 0; h < dm->n_k; h++) {
        float *k = L + dm->off_k + ((size_t)h * CHUNK + r) * dm->d;
        for (size_t i = 0; i < (size_t)(CHUNK - r) * dm->d; i++)
            ok &= zero ? (k[i] = 0, true) : k[i] == 0;
    }
    for (uint32_t h = 0; h < dm->n_v; h++) {
        float *dl = L + dm->off_delta + ((size_t)h * CHUNK + r) * dm->d;
        float *gg = L + dm->off_g + (size_t)h * CHUNK + r;
        for (size_t i = 0; i < (size_t)(CHUNK - r) * dm->d; i++)
            ok &= zero ? (dl[i] = 0, true) : dl[i] == 0;
        for (size_t i = 0; i < CHUNK - r; i++)
            ok &= zero ? (gg[i] = 0, true) : gg[i] == 0;
    }
    return ok;
}

void sb_rt_gdn_save(const sb_rt_gdn *g, void *buf)
{
    memcpy(buf, g->state, sb_rt_gdn_bytes(g->m));
    /* Slots past the open chunk's rows hold what an earlier chunk left:
     * zeros in the bytes, so that a state's bytes depend on it alone. */
    for (uint32_t l = 0; l < g->m->hp.n_rec; l++)
        rows_past(&g->dm, (float *)buf + l * g->dm.layer_floats, (uint32_t)(g->pos % CHUNK), true);
}

int sb_rt_gdn_load(sb_rt_gdn *g, const void *buf, size_t pos)
{
    if (!g || !buf)
        return SB_ERR_INVAL;
    for (uint32_t l = 0; l < g->m->hp.n_rec; l++)
        if (!rows_past(&g->dm, (float *)(uintptr_t)buf + l * g->dm.layer_floats,
                       (uint32_t)(pos % CHUNK), false))
            return SB_ERR_FORMAT;
    memcpy(g->state, buf, sb_rt_gdn_bytes(g->m));
    g->pos = pos;
    return SB_OK;
}

void sb_rt_gdn_advance(sb_rt_gdn *g, size_t n)
{
    g->pos += n;
}

/* ---- scratch ---------------------------------------------------------------------- */

void sb_rt_gdn_scratch_free(sb_rt_gdn_scratch *s)
{
    if (!s)
        return;
    free(s->mixed);
    free(s->conv);
    free(s->z);
    free(s->beta);
    free(s->g);
    free(s->o);
    free(s->tmp);
    free(s->tmp_mem);
    free(s);
}

int sb_rt_gdn_scratch_new(const sb_rt_model *m, uint32_t n_batch, unsigned n_threads,
                          sb_rt_gdn_scratch **out)
{
    if (!out)
        return SB_ERR_INVAL;
    *out = NULL;
    if (!m || !m->hp.n_rec || !n_batch || !n_threads)
        return SB_ERR_INVAL;
    sb_rt_gdn_scratch *s = calloc(1, sizeof *s);
    if (!s)
        return SB_ERR_NOMEM;
    s->m = m;
    s->n_batch = n_batch;
    s->n_threads = n_threads;
    dims_of(m, &s->dm);
    const gdn_dims *dm = &s->dm;
    size_t per = 2 * (size_t)CHUNK * dm->d + 2 * (size_t)CHUNK * CHUNK + CHUNK + dm->d;
    s->tmp = calloc(n_threads, sizeof *s->tmp);
    s->tmp_mem = floats(n_threads, per);
    for (unsigned t = 0; s->tmp && s->tmp_mem && t < n_threads; t++) {
        chunk_tmp *c = &s->tmp[t];
        c->pk = s->tmp_mem + t * per;
        c->pq = c->pk + (size_t)CHUNK * dm->d;
        c->kk = c->pq + (size_t)CHUNK * dm->d;
        c->qk = c->kk + (size_t)CHUNK * CHUNK;
        c->coef = c->qk + (size_t)CHUNK * CHUNK;
        c->y = c->coef + CHUNK;
    }
    s->mixed = floats(n_batch, dm->conv_dim);
    s->conv = floats(n_batch, dm->conv_dim);
    s->z = floats(n_batch, dm->value_dim);
    s->beta = floats(n_batch, dm->n_v);
    s->g = floats(n_batch, dm->n_v);
    s->o = floats(n_batch, dm->value_dim);
    if (!s->mixed || !s->conv || !s->z || !s->beta || !s->g || !s->o || !s->tmp ||
        !s->tmp_mem) {
        sb_rt_gdn_scratch_free(s);
        return SB_ERR_NOMEM;
    }
    *out = s;
    return SB_OK;
}

/* ---- the layer -------------------------------------------------------------------- */

static float sigmoidf(float x)
{
    return 1.0f / (1.0f + expf(-x));
}

static float softplusf(float x)
{
    return x > 20.0f ? x : log1pf(expf(x));
}

static float siluf(float x)
{
    return x / (1.0f + expf(-x));
}

/* Step 2 for the n tokens of mixed, with the layer's window (the d_conv - 1
 * rows before them), which then moves on to the batch's last rows. */
static void conv_step(const gdn_dims *dm, const float *w, float *win, const float *mixed,
                      size_t n, float *out)
{
    uint32_t K = dm->d_conv, C = dm->conv_dim;
    for (size_t t = 0; t < n; t++)
        for (uint32_t ch = 0; ch < C; ch++) {
            float acc = 0;
            for (uint32_t i = 0; i < K; i++) {
                /* input row t - (K - 1) + i: the window's before the batch */
                size_t r = t + i; /* in [0, n + K - 1): rows of window ++ mixed */
                float x = r < K - 1 ? win[r * C + ch] : mixed[(r - (K - 1)) * C + ch];
                acc += w[(size_t)ch * K + i] * x;
            }
            out[t * C + ch] = siluf(acc);
        }
    /* the window's new rows: the last K - 1 of window ++ mixed */
    if (n >= K - 1) {
        memcpy(win, mixed + (n - (K - 1)) * C, (size_t)(K - 1) * C * sizeof *win);
    } else {
        memmove(win, win + n * C, (K - 1 - n) * C * sizeof *win);
        memcpy(win + (K - 1 - n) * C, mixed, n * C * sizeof *win);
    }
}

/* Step 3 for one head vector x of d values: x / sqrt(sum x^2 + eps) * scale. */
static void l2norm(float *x, uint32_t d, float eps, float scale)
{
    float ss = sb_rt_dot_f32(x, x, d);
    float r = 1.0f / sqrtf(ss + eps) * scale;
    for (uint32_t i = 0; i < d; i++)
        x[i] *= r;
}

typedef struct scan_job {
    const gdn_dims *dm;
    const sb_rt_gdn_scratch *s;
    float *L;                  /* the layer's block of state */
    size_t pos, n;             /* the batch: positions [pos, pos + n) */
} scan_job;

/* Step 4 for value head h over the batch, chunk by chunk (deltanet.h,
 * "Chunks anchored at absolute positions"; the comment's formulas and
 * order of operations are what this computes). */
static void scan_task(void *ctx, size_t h, unsigned thread)
{
    const scan_job *j = ctx;
    const gdn_dims *dm = j->dm;
    const sb_rt_gdn_scratch *s = j->s;
    chunk_tmp *tp = &s->tmp[thread];
    uint32_t d = dm->d, kh = (uint32_t)(h % dm->n_k), nv = dm->n_v;
    float *S0 = j->L + h * d * d;
    float *krows = j->L + dm->off_k + (size_t)kh * CHUNK * d;  /* read only here */
    float *drows = j->L + dm->off_delta + h * CHUNK * d;
    float *grows = j->L + dm->off_g + h * CHUNK;
    uint32_t r = (uint32_t)(j->pos % CHUNK);  /* rows of the open chunk */
    uint32_t r_stored = r;                 /* ...of them in krows */
    for (size_t t = 0; t < j->n;) {
        /* rows [r, r + m) of this chunk are tokens [t, t + m) of the batch */
        uint32_t m = (uint32_t)(j->n - t < CHUNK - r ? j->n - t : CHUNK - r);
        const float *krow[CHUNK];
        for (uint32_t i = 0; i < r + m; i++)
            krow[i] = i < r_stored ? krows + (size_t)i * d
                                   : s->conv + (t + i - r) * dm->conv_dim + dm->key_dim +
                                         (size_t)kh * d;
        /* S_0 against the new rows' k and q; the Gram rows */
        for (uint32_t i = r; i < r + m; i++) {
            const float *q = s->conv + (t + i - r) * dm->conv_dim + (size_t)kh * d;
            for (uint32_t a = 0; a < d; a++) {
                tp->pk[i * d + a] = sb_rt_dot_f32(S0 + (size_t)a * d, krow[i], d);
                tp->pq[i * d + a] = sb_rt_dot_f32(S0 + (size_t)a * d, q, d);
            }
            for (uint32_t jj = 0; jj <= i; jj++) {
                tp->kk[i * CHUNK + jj] = jj < i ? sb_rt_dot_f32(krow[i], krow[jj], d) : 0;
                tp->qk[i * CHUNK + jj] = sb_rt_dot_f32(q, krow[jj], d);
            }
        }
        /* the rows, in order */
        for (uint32_t i = r; i < r + m; i++) {
            size_t tok = t + i - r;
            const float *v = s->conv + tok * dm->conv_dim + 2 * dm->key_dim + h * d;
            float beta = s->beta[tok * nv + h];
            float G = (i ? grows[i - 1] : 0.0f) + s->g[tok * nv + h];
            float gam = expf(G);
            grows[i] = G;
            float *dl = drows + (size_t)i * d;
            for (uint32_t a = 0; a < d; a++)
                dl[a] = beta * (v[a] - gam * tp->pk[i * d + a]);
            for (uint32_t jj = 0; jj < i; jj++)
                sb_rt_axpy_f32(dl, -(beta * expf(G - grows[jj]) * tp->kk[i * CHUNK + jj]),
                               drows + (size_t)jj * d, d);
            float *o = s->o + tok * dm->value_dim + h * d;
            for (uint32_t a = 0; a < d; a++)
                o[a] = gam * tp->pq[i * d + a];
            for (uint32_t jj = 0; jj <= i; jj++)
                sb_rt_axpy_f32(o, expf(G - grows[jj]) * tp->qk[i * CHUNK + jj],
                               drows + (size_t)jj * d, d);
        }
        r += m;
        t += m;
        if (r < CHUNK)
            break; /* the batch ends inside this chunk */
        /* the chunk is complete: S_0 moves to its end */
        float Gl = grows[CHUNK - 1], gl = expf(Gl);
        for (uint32_t jj = 0; jj < CHUNK; jj++)
            tp->coef[jj] = expf(Gl - grows[jj]);
        for (uint32_t a = 0; a < d; a++) {
            float *Sa = S0 + (size_t)a * d;
            for (uint32_t b = 0; b < d; b++)
                tp->y[b] = gl * Sa[b];
            for (uint32_t jj = 0; jj < CHUNK; jj++)
                sb_rt_axpy_f32(tp->y, tp->coef[jj] * drows[(size_t)jj * d + a], krow[jj], d);
            memcpy(Sa, tp->y, d * sizeof *Sa);
        }
        r = 0;
        r_stored = 0;
    }
}

/* After the scan: the k of the open chunk's rows that this batch brought
 * go to the state (the scan only read them), key head by key head. */
static void keep_k_rows(const gdn_dims *dm, const sb_rt_gdn_scratch *s, float *L, size_t pos,
                        size_t n)
{
    size_t end = pos + n, first = end - end % CHUNK;
    if (first < pos)
        first = pos; /* earlier rows of the chunk are there already */
    for (size_t p = first; p < end; p++)
        for (uint32_t kh = 0; kh < dm->n_k; kh++)
            memcpy(L + dm->off_k + ((size_t)kh * CHUNK + p % CHUNK) * dm->d,
                   s->conv + (p - pos) * dm->conv_dim + dm->key_dim + (size_t)kh * dm->d,
                   dm->d * sizeof(float));
}

void sb_rt_gdn_layer(sb_rt_gdn_scratch *s, sb_rt_pool *pool, uint32_t l, sb_rt_gdn *g,
                     const float *xb, size_t n, float *y)
{
    const sb_rt_model *m = s->m;
    const sb_rt_hparams *hp = &m->hp;
    const sb_rt_layer *w = &m->layers[l];
    const gdn_dims *dm = &s->dm;
    float *L = g->state + (size_t)w->slot * dm->layer_floats, *win = L + dm->off_conv;
    /* 1 */
    sb_rt_matmul(pool, s->mixed, xb, w->wqkv.data, w->wqkv.type, n, hp->dim, dm->conv_dim);
    sb_rt_matmul(pool, s->z, xb, w->wz.data, w->wz.type, n, hp->dim, dm->value_dim);
    sb_rt_matmul(pool, s->beta, xb, w->wbeta.data, w->wbeta.type, n, hp->dim, dm->n_v);
    sb_rt_matmul(pool, s->g, xb, w->walpha.data, w->walpha.type, n, hp->dim, dm->n_v);
    /* 2 */
    conv_step(dm, w->conv, win, s->mixed, n, s->conv);
    /* 3 */
    float qscale = 1.0f / sqrtf((float)dm->d);
    for (size_t t = 0; t < n; t++) {
        float *row = s->conv + t * dm->conv_dim;
        for (uint32_t h = 0; h < dm->n_k; h++) {
            l2norm(row + (size_t)h * dm->d, dm->d, hp->rms_eps, qscale);
            l2norm(row + dm->key_dim + (size_t)h * dm->d, dm->d, hp->rms_eps, 1.0f);
        }
        for (uint32_t h = 0; h < dm->n_v; h++) {
            float *b = &s->beta[t * dm->n_v + h], *a = &s->g[t * dm->n_v + h];
            *b = sigmoidf(*b);
            *a = softplusf(*a + w->dt_bias[h]) * w->ssm_a[h];
        }
    }
    /* 4 */
    scan_job job = { dm, s, L, g->pos, n };
    sb_rt_pool_run(pool, dm->n_v, scan_task, &job);
    keep_k_rows(dm, s, L, g->pos, n);
    /* 5 */
    for (size_t t = 0; t < n; t++)
        for (uint32_t h = 0; h < dm->n_v; h++) {
            float *o = s->o + t * dm->value_dim + (size_t)h * dm->d;
            const float *z = s->z + t * dm->value_dim + (size_t)h * dm->d;
            sb_rt_rmsnorm(o, o, w->ssm_norm, dm->d, hp->rms_eps);
            for (uint32_t i = 0; i < dm->d; i++)
                o[i] *= siluf(z[i]);
        }
    /* 6 */
    sb_rt_matmul(pool, y, s->o, w->wout.data, w->wout.type, n, dm->value_dim, hp->dim);
}
