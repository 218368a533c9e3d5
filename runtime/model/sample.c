/* sample.c -- next-token sampling (sample.h). */
#include "model/sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "snapbank.h"

int sb_rt_sampler_init(sb_rt_sampler *s, const sb_rt_sampling *opt, size_t n_vocab)
{
    memset(s, 0, sizeof *s);
    if (!opt || n_vocab == 0 || n_vocab > UINT32_MAX || !isfinite(opt->temp) ||
        opt->temp < 0 || !isfinite(opt->top_p) || opt->top_p <= 0)
        return SB_ERR_INVAL;
    s->opt = *opt;
    s->state = opt->seed;
    s->n_vocab = n_vocab;
    s->cand = malloc(n_vocab * sizeof *s->cand);
    if (!s->cand) {
        sb_rt_sampler_fini(s);
        return SB_ERR_NOMEM;
    }
    return SB_OK;
}

void sb_rt_sampler_fini(sb_rt_sampler *s)
{
    free(s->cand);
    memset(s, 0, sizeof *s);
}

/* splitmix64 */
static uint64_t next64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Higher logit first; the lower id on ties (NaN logits last). */
static int cand_cmp(const void *a, const void *b)
{
    const sb_rt_cand *x = a, *y = b;
    if (x->v != y->v) {
        if (isnan(x->v) || isnan(y->v))
            return isnan(x->v) - isnan(y->v);
        return x->v > y->v ? -1 : 1;
    }
    return x->id < y->id ? -1 : x->id > y->id;
}

uint32_t sb_rt_sample(sb_rt_sampler *s, const float *logits)
{
    size_t n = s->n_vocab;
    if (s->opt.temp == 0) {
        size_t best = 0;
        for (size_t i = 1; i < n; i++)
            if (logits[i] > logits[best] || (isnan(logits[best]) && !isnan(logits[i])))
                best = i;
        return (uint32_t)best;
    }
    sb_rt_cand *c = s->cand;
    for (size_t i = 0; i < n; i++)
        c[i] = (sb_rt_cand){ logits[i], (uint32_t)i };
    qsort(c, n, sizeof *c, cand_cmp);
    size_t k = s->opt.top_k && s->opt.top_k < n ? s->opt.top_k : n;
    while (k > 1 && isnan(c[k - 1].v))
        k--;
    /* Softmax over the k best at temperature temp (max first: c[0]). */
    double sum = 0;
    for (size_t i = 0; i < k; i++) {
        double p = exp(((double)c[i].v - (double)c[0].v) / s->opt.temp);
        c[i].v = (float)p;
        sum += p;
    }
    /* Top-p: the smallest prefix whose mass reaches top_p. */
    if (s->opt.top_p < 1) {
        double acc = 0;
        for (size_t i = 0; i < k; i++) {
            acc += c[i].v / sum;
            if (acc >= s->opt.top_p) {
                k = i + 1;
                break;
            }
        }
        sum = 0;
        for (size_t i = 0; i < k; i++)
            sum += c[i].v;
    }
    double r = (double)(next64(&s->state) >> 11) * 0x1.0p-53 * sum, acc = 0;
    for (size_t i = 0; i < k; i++) {
        acc += c[i].v;
        if (r < acc)
            return c[i].id;
    }
    return c[k - 1].id;
}
