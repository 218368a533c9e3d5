/* sample.h -- choosing the next token from logits: greedy, or temperature
 * with top-k and top-p (nucleus) filtering, from a seeded generator.
 *
 * The same logits, options and seed always give the same token sequence
 * (the generator is splitmix64, the filtering a stable sort by logit with
 * ties broken by the lower id).
 *
 * Thread safety: a sampler belongs to one thread.
 */
#ifndef SB_RT_SAMPLE_H
#define SB_RT_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

typedef struct sb_rt_sampling {
    float temp;                /* 0: greedy (the highest logit, lowest id on ties) */
    uint32_t top_k;            /* keep the k most likely; 0: all */
    float top_p;               /* keep the smallest set whose probability
                                * reaches p; 1 (or more): all */
    uint64_t seed;
} sb_rt_sampling;

typedef struct sb_rt_cand {
    float v;                   /* logit, then unnormalized probability */
    uint32_t id;
} sb_rt_cand;

typedef struct sb_rt_sampler {
    sb_rt_sampling opt;
    uint64_t state;            /* splitmix64 state */
    sb_rt_cand *cand;          /* (n_vocab) scratch, owned */
    size_t n_vocab;
} sb_rt_sampler;

/* sb_rt_sampler_init -- a sampler for n_vocab logits with options opt.
 * Returns: SB_OK; SB_ERR_INVAL (n_vocab 0, temp < 0 or not finite, top_p
 * <= 0 or not finite); SB_ERR_NOMEM. */
int sb_rt_sampler_init(sb_rt_sampler *s, const sb_rt_sampling *opt, size_t n_vocab);

/* sb_rt_sampler_fini -- free the scratch. */
void sb_rt_sampler_fini(sb_rt_sampler *s);

/* sb_rt_sample -- the next token for logits (n_vocab floats; read only). */
uint32_t sb_rt_sample(sb_rt_sampler *s, const float *logits);

#endif /* SB_RT_SAMPLE_H */
