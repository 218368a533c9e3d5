/* compute_rt.c -- the batching module's compute over the builtin runtime
 * (compute.h): a runtime session per slot, every planned step in one
 * sb_rt_forward_multi over one context. */
#include <stdlib.h>

#include "batch/compute.h"

typedef struct rt_slot {
    sb_rt_session *s;
    int ix; /* its step in the pass being built, -1 none */
} rt_slot;

typedef struct rt_compute {
    const sb_rt_model *m;
    sb_rt_ctx *ctx;
    sb_rt_disk_use disk_use;
    rt_slot *slots;
    sb_rt_seq_step *steps; /* (slots) the pass being built */
    size_t n_steps;
    sb_rt_rates rates;     /* learned by the last turn that ended */
    bool have_rates;
} rt_compute;

static int rt_open(void *cv, size_t slot, sb_ns *ns)
{
    rt_compute *c = cv;
    rt_slot *sl = &c->slots[slot];
    sl->ix = -1;
    int rc = sb_rt_session_new(c->m, c->ctx, ns, &sl->s);
    if (rc != SB_OK)
        return rc;
    sb_rt_session_set_disk_use(sl->s, c->disk_use);
    if (c->have_rates)
        *sb_rt_session_rates(sl->s) = c->rates;
    return SB_OK;
}

static void rt_close(void *cv, size_t slot)
{
    rt_compute *c = cv;
    sb_rt_session_free(c->slots[slot].s);
    c->slots[slot].s = NULL;
}

static int rt_begin(void *cv, size_t slot, const uint32_t *prompt, size_t n, size_t max_gen,
                    sb_rt_turn *rep)
{
    rt_compute *c = cv;
    return sb_rt_session_begin(c->slots[slot].s, prompt, n, max_gen, rep);
}

static sb_rt_turn_state rt_state(void *cv, size_t slot)
{
    rt_compute *c = cv;
    return sb_rt_session_state(c->slots[slot].s);
}

static const sb_rt_turn *rt_report(void *cv, size_t slot)
{
    rt_compute *c = cv;
    return sb_rt_session_report(c->slots[slot].s);
}

static size_t rt_plan(void *cv, size_t slot, size_t max_rows)
{
    rt_compute *c = cv;
    rt_slot *sl = &c->slots[slot];
    size_t rows = sb_rt_session_next(sl->s, max_rows, &c->steps[c->n_steps]);
    if (rows)
        sl->ix = (int)c->n_steps++;
    return rows;
}

static void rt_pass(void *cv)
{
    rt_compute *c = cv;
    if (c->n_steps)
        sb_rt_forward_multi(c->ctx, c->steps, c->n_steps);
    c->n_steps = 0; /* the steps stay readable for ran until the next plan */
}

static int rt_ran(void *cv, size_t slot)
{
    rt_compute *c = cv;
    rt_slot *sl = &c->slots[slot];
    int rc = sb_rt_session_ran(sl->s, &c->steps[sl->ix]);
    sl->ix = -1;
    return rc;
}

static const float *rt_logits(void *cv, size_t slot)
{
    rt_compute *c = cv;
    return sb_rt_session_logits(c->slots[slot].s);
}

static int rt_push(void *cv, size_t slot, uint32_t id)
{
    rt_compute *c = cv;
    return sb_rt_session_push(c->slots[slot].s, id);
}

static int rt_end(void *cv, size_t slot, sb_rt_turn *rep)
{
    rt_compute *c = cv;
    rt_slot *sl = &c->slots[slot];
    int rc = sb_rt_session_end(sl->s, rep);
    c->rates = *sb_rt_session_rates(sl->s);
    c->have_rates = true;
    return rc;
}

static const uint32_t *rt_tokens(void *cv, size_t slot, size_t *n)
{
    rt_compute *c = cv;
    return sb_rt_session_tokens(c->slots[slot].s, n);
}

static unsigned rt_threads(void *cv)
{
    rt_compute *c = cv;
    return sb_rt_ctx_threads(c->ctx);
}

static void rt_free(void *cv)
{
    rt_compute *c = cv;
    if (!c)
        return;
    sb_rt_ctx_free(c->ctx);
    free(c->slots);
    free(c->steps);
    free(c);
}

static const sb_rt_compute_ops rt_ops = {
    .open = rt_open, .close = rt_close, .begin = rt_begin, .state = rt_state,
    .report = rt_report, .plan = rt_plan, .pass = rt_pass, .ran = rt_ran,
    .logits = rt_logits, .push = rt_push, .end = rt_end, .tokens = rt_tokens,
    .threads = rt_threads, .free = rt_free,
};

int sb_rt_compute_rt(const sb_rt_model *m, size_t slots, unsigned threads, uint32_t batch,
                     sb_rt_disk_use disk_use, sb_rt_compute *out)
{
    rt_compute *c = calloc(1, sizeof *c);
    if (!c)
        return SB_ERR_NOMEM;
    c->m = m, c->disk_use = disk_use;
    c->slots = calloc(slots, sizeof *c->slots);
    c->steps = calloc(slots, sizeof *c->steps);
    int rc = c->slots && c->steps ? sb_rt_ctx_new(m, threads, batch, &c->ctx) : SB_ERR_NOMEM;
    if (rc != SB_OK) {
        rt_free(c);
        return rc;
    }
    *out = (sb_rt_compute){ &rt_ops, c, m->hp.n_vocab };
    return SB_OK;
}
