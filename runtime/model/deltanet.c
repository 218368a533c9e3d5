/* deltanet.c -- the Gated DeltaNet layer and its recurrent state
 * (deltanet.h; the step numbers are its). */
#include "model/deltanet.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"

/* Shapes of one model's recurrent layers. */
typedef struct gdn_dims {
    uint32_t n_k, n_v, d, d_conv;
    uint32_t key_dim, value_dim, conv_dim; /* n_k d, n_v d, 2 key_dim + value_dim */
    size_t s_floats;                       /* n_v d d: S of every head */
    size_t layer_floats;                   /* S and the conv window */
} gdn_dims;

struct sb_rt_gdn {
    const sb_rt_model *m;
    gdn_dims dm;
    size_t pos;                /* tokens taken in */
    float *state;              /* (n_rec, layer_floats): the serialized layout */
};

struct sb_rt_gdn_scratch {
    const sb_rt_model *m;
    gdn_dims dm;
    uint32_t n_batch;
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
    dm->layer_floats = dm->s_floats + (size_t)(dm->d_conv - 1) * dm->conv_dim;
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

void sb_rt_gdn_save(const sb_rt_gdn *g, void *buf)
{
    memcpy(buf, g->state, sb_rt_gdn_bytes(g->m));
}

int sb_rt_gdn_load(sb_rt_gdn *g, const void *buf, size_t pos)
{
    if (!g || !buf)
        return SB_ERR_INVAL;
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
    free(s);
}

int sb_rt_gdn_scratch_new(const sb_rt_model *m, uint32_t n_batch, unsigned n_threads,
                          sb_rt_gdn_scratch **out)
{
    if (!out)
        return SB_ERR_INVAL;
    *out = NULL;
    if (!m || !m->hp.n_rec || !n_batch)
        return SB_ERR_INVAL;
    (void)n_threads;
    sb_rt_gdn_scratch *s = calloc(1, sizeof *s);
    if (!s)
        return SB_ERR_NOMEM;
    s->m = m;
    s->n_batch = n_batch;
    dims_of(m, &s->dm);
    const gdn_dims *dm = &s->dm;
    s->mixed = floats(n_batch, dm->conv_dim);
    s->conv = floats(n_batch, dm->conv_dim);
    s->z = floats(n_batch, dm->value_dim);
    s->beta = floats(n_batch, dm->n_v);
    s->g = floats(n_batch, dm->n_v);
    s->o = floats(n_batch, dm->value_dim);
    if (!s->mixed || !s->conv || !s->z || !s->beta || !s->g || !s->o) {
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
    float *S;                  /* the layer's states: head h at S + h d d */
    size_t n;
} scan_job;

/* Step 4 for value head h over the batch, one token at a time. */
static void scan_task(void *ctx, size_t h, unsigned thread)
{
    const scan_job *j = ctx;
    const gdn_dims *dm = j->dm;
    const sb_rt_gdn_scratch *s = j->s;
    uint32_t d = dm->d, kh = (uint32_t)(h % dm->n_k);
    float *S = j->S + h * d * d;
    (void)thread;
    for (size_t t = 0; t < j->n; t++) {
        const float *row = s->conv + t * dm->conv_dim;
        const float *q = row + (size_t)kh * d, *k = row + dm->key_dim + (size_t)kh * d;
        const float *v = row + 2 * dm->key_dim + h * d;
        float alpha = expf(s->g[t * dm->n_v + h]), beta = s->beta[t * dm->n_v + h];
        float *o = s->o + t * dm->value_dim + h * d;
        for (uint32_t i = 0; i < d; i++) {
            float *Si = S + (size_t)i * d;
            for (uint32_t c = 0; c < d; c++)
                Si[c] *= alpha;
            float delta = beta * (v[i] - sb_rt_dot_f32(Si, k, d));
            sb_rt_axpy_f32(Si, delta, k, d);
            o[i] = sb_rt_dot_f32(Si, q, d);
        }
    }
}

void sb_rt_gdn_layer(sb_rt_gdn_scratch *s, sb_rt_pool *pool, uint32_t l, sb_rt_gdn *g,
                     const float *xb, size_t n, float *y)
{
    const sb_rt_model *m = s->m;
    const sb_rt_hparams *hp = &m->hp;
    const sb_rt_layer *w = &m->layers[l];
    const gdn_dims *dm = &s->dm;
    float *S = g->state + (size_t)w->slot * dm->layer_floats, *win = S + dm->s_floats;
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
    scan_job job = { dm, s, S, n };
    sb_rt_pool_run(pool, dm->n_v, scan_task, &job);
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
