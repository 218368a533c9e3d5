/* rt_ref.c -- the references' pieces (rt_ref.h). */
#include "rt_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/quant.h"

void rr_deq(const sb_rt_mat *w, float *out)
{
    size_t rb = sb_rt_dtype_row_bytes(w->type, w->in);
    for (uint32_t r = 0; r < w->out; r++) {
        const uint8_t *p = (const uint8_t *)w->data + r * rb;
        float *y = out + (size_t)r * w->in;
        if (w->type == SB_RT_F32) {
            memcpy(y, p, w->in * sizeof *y);
        } else if (w->type == SB_RT_F16) {
            for (uint32_t i = 0; i < w->in; i++) {
                uint16_t h;
                memcpy(&h, p + 2 * i, 2);
                sb_rt_f16_to_f32(&h, &y[i], 1);
            }
        } else { /* quant.h's dequantization, itself checked in test_kernels */
            sb_rt_dequant_row(w->type, p, y, w->in);
        }
    }
}

void rr_mv(const sb_rt_mat *w, const float *x, float *y)
{
    float *d = malloc((size_t)w->in * w->out * sizeof *d);
    float *xq = malloc((size_t)w->in * sizeof *xq);
    if (!d || !xq)
        abort();
    rr_deq(w, d);
    memcpy(xq, x, (size_t)w->in * sizeof *xq);
    for (uint32_t b = 0; w->type == SB_RT_Q8_0 && b < w->in; b += 32) {
        float amax = 0;
        for (uint32_t i = b; i < b + 32; i++)
            amax = fmaxf(amax, fabsf(x[i]));
        float dx = amax / 127, inv = dx ? 1 / dx : 0;
        for (uint32_t i = b; i < b + 32; i++)
            xq[i] = dx * nearbyintf(x[i] * inv);
    }
    for (uint32_t r = 0; r < w->out; r++) {
        double s = 0;
        for (uint32_t i = 0; i < w->in; i++)
            s += (double)d[(size_t)r * w->in + i] * xq[i];
        y[r] = (float)s;
    }
    free(d);
    free(xq);
}

void rr_rms(float *y, const float *x, const float *g, uint32_t n, float eps)
{
    double s = 0;
    for (uint32_t i = 0; i < n; i++)
        s += (double)x[i] * x[i];
    double k = 1.0 / sqrt(s / n + eps);
    for (uint32_t i = 0; i < n; i++)
        y[i] = (float)(x[i] * k * (g ? g[i] : 1.0f));
}

float rr_f16(float x)
{
    uint16_t h;
    float y;
    sb_rt_f32_to_f16(&x, &h, 1);
    sb_rt_f16_to_f32(&h, &y, 1);
    return y;
}

double rr_max_rel_diff(const float *a, const float *b, size_t n, size_t V)
{
    double worst = 0;
    for (size_t p = 0; p < n; p++) {
        double scale = 0, d = 0;
        for (size_t i = 0; i < V; i++) {
            scale = fmax(scale, fabs(a[p * V + i]));
            d = fmax(d, fabs((double)a[p * V + i] - b[p * V + i]));
        }
        worst = fmax(worst, d / (scale + 1));
    }
    return worst;
}

void rr_attend(const sb_rt_hparams *hp, const float *q, const float *k, const float *v,
               float *Kl, float *Vl, size_t p, float *sc, float *att)
{
    uint32_t hd = hp->head_dim, kvd = hp->n_kv_heads * hd;
    for (uint32_t i = 0; i < kvd; i++) {
        Kl[p * kvd + i] = rr_f16(k[i]);
        Vl[p * kvd + i] = rr_f16(v[i]);
    }
    for (uint32_t h = 0; h < hp->n_heads; h++) {
        uint32_t kh = h / (hp->n_heads / hp->n_kv_heads);
        double mx = -INFINITY, sum = 0;
        for (size_t s = 0; s <= p; s++) {
            double d = 0;
            for (uint32_t i = 0; i < hd; i++)
                d += (double)q[h * hd + i] * Kl[s * kvd + kh * hd + i];
            sc[s] = (float)(d / sqrt((double)hd));
            mx = sc[s] > mx ? sc[s] : mx;
        }
        for (size_t s = 0; s <= p; s++)
            sum += exp(sc[s] - mx);
        for (uint32_t i = 0; i < hd; i++) {
            double a = 0;
            for (size_t s = 0; s <= p; s++)
                a += exp(sc[s] - mx) / sum * Vl[s * kvd + kh * hd + i];
            att[h * hd + i] = (float)a;
        }
    }
}
