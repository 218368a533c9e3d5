/* kv.c -- a sequence's KV cache as a page table over snapbank pages (kv.h). */
#include "model/kv.h"

#include <stdlib.h>
#include <string.h>

#include "model/boundary.h"
#include "model/deltanet.h"

int sb_rt_kv_layout(const sb_rt_model *m, uint32_t page_tokens, uint32_t *bpt,
                    sb_layout *layout)
{
    if (!m || !bpt || !layout || page_tokens == 0 || m->hp.n_layers > SB_RT_MAX_LAYERS)
        return SB_ERR_INVAL;
    uint32_t row = sb_rt_model_kv_dim(m) * 2u, kv_layers = sb_rt_model_kv_layers(m);
    for (uint32_t t = 0; t < 2 * kv_layers; t++)
        bpt[t] = row;
    size_t point = m->hp.n_rec ? sb_rt_boundary_bytes(m) : (size_t)m->hp.n_vocab * sizeof(float);
    if (point > SB_POINT_BYTES_MAX)
        return SB_ERR_INVAL;
    memset(layout, 0, sizeof *layout);
    layout->model_id = m->id;
    layout->model_id_bytes = SB_RT_ID_BYTES;
    layout->page_tokens = page_tokens;
    layout->n_tensors = 2 * kv_layers;
    layout->bytes_per_token = bpt;
    layout->point_bytes = (uint32_t)point;
    layout->flags = SB_LAYOUT_ELEM16; /* F16 rows: compression shuffles them */
    if (m->hp.n_rec) /* a hybrid model resumes only at a boundary */
        layout->flags |= SB_LAYOUT_POINT_REQUIRED;
    return SB_OK;
}

int sb_rt_kv_init(sb_rt_kv *kv, const sb_rt_model *m, sb_ns *ns)
{
    memset(kv, 0, sizeof *kv);
    sb_ns_info info;
    if (!m || !ns || sb_ns_get_info(ns, &info) != SB_OK ||
        info.n_tensors != 2 * sb_rt_model_kv_layers(m))
        return SB_ERR_INVAL;
    kv->off = malloc(info.n_tensors * sizeof *kv->off);
    if (!kv->off)
        return SB_ERR_NOMEM;
    for (uint32_t t = 0; t < info.n_tensors; t++)
        kv->off[t] = sb_ns_tensor_offset(ns, t);
    /* The tensors must sit where sb_rt_kv_row expects them: each a run of
     * page_tokens rows of kv_dim F16 values. */
    uint32_t kv_dim = sb_rt_model_kv_dim(m);
    for (uint32_t t = 0; t < info.n_tensors; t++) {
        size_t end = t + 1 < info.n_tensors ? kv->off[t + 1] : info.page_bytes;
        if (kv->off[t] == (size_t)-1 || end < kv->off[t] ||
            end - kv->off[t] < (size_t)info.page_tokens * kv_dim * 2u) {
            free(kv->off);
            kv->off = NULL;
            return SB_ERR_INVAL;
        }
    }
    if (m->hp.n_rec && sb_rt_gdn_new(m, &kv->gdn) != SB_OK) {
        free(kv->off);
        kv->off = NULL;
        return SB_ERR_NOMEM;
    }
    kv->ns = ns;
    kv->page_tokens = info.page_tokens;
    kv->n_layers = sb_rt_model_kv_layers(m);
    kv->kv_dim = kv_dim;
    kv->max_tokens = m->hp.n_ctx;
    return SB_OK;
}

int sb_rt_kv_prefault(const sb_rt_model *m, sb_ns *ns, size_t *n_ready)
{
    sb_ns_info info;
    if (n_ready)
        *n_ready = 0;
    if (!m || !ns || sb_ns_get_info(ns, &info) != SB_OK)
        return SB_ERR_INVAL;
    size_t pages = (m->hp.n_ctx + info.page_tokens - 1) / info.page_tokens;
    return sb_ns_prefault(ns, pages, n_ready);
}

void sb_rt_kv_reset(sb_rt_kv *kv)
{
    for (size_t i = 0; i < kv->n_pages; i++)
        sb_page_unref(kv->pages[i]);
    kv->n_pages = 0;
    kv->n_tokens = 0;
    if (kv->gdn)
        sb_rt_gdn_reset(kv->gdn);
}

void sb_rt_kv_fini(sb_rt_kv *kv)
{
    sb_rt_kv_reset(kv);
    free(kv->pages);
    free(kv->tokens);
    free(kv->off);
    sb_rt_gdn_free(kv->gdn);
    memset(kv, 0, sizeof *kv);
}

/* Room for n page pointers. */
static int page_room(sb_rt_kv *kv, size_t n)
{
    if (n <= kv->cap)
        return SB_OK;
    size_t cap = kv->cap ? kv->cap : 16;
    while (cap < n)
        cap *= 2;
    sb_page **p = realloc(kv->pages, cap * sizeof *p);
    if (!p)
        return SB_ERR_NOMEM;
    kv->pages = p;
    kv->cap = cap;
    return SB_OK;
}

/* Room for n tokens in kv->tokens. */
static int token_room(sb_rt_kv *kv, size_t want)
{
    if (want <= kv->tok_cap)
        return SB_OK;
    size_t cap = kv->tok_cap ? kv->tok_cap : 256;
    while (cap < want)
        cap *= 2;
    uint32_t *t = realloc(kv->tokens, cap * sizeof *t);
    if (!t)
        return SB_ERR_NOMEM;
    kv->tokens = t;
    kv->tok_cap = cap;
    return SB_OK;
}

int sb_rt_kv_reserve(sb_rt_kv *kv, size_t n)
{
    size_t end = kv->n_tokens + n;
    if (end > kv->max_tokens)
        return SB_ERR_TOO_MANY_TOKENS;
    size_t pt = kv->page_tokens, need = (end + pt - 1) / pt;
    int rc = token_room(kv, end);
    if (rc == SB_OK)
        rc = page_room(kv, need);
    if (rc != SB_OK)
        return rc;
    /* A partial tail page may be committed or shared: append to a copy. */
    if (n && kv->n_tokens % pt) {
        rc = sb_page_writable(kv->ns, &kv->pages[kv->n_tokens / pt],
                              (uint32_t)(kv->n_tokens % pt));
        if (rc != SB_OK)
            return rc;
    }
    while (kv->n_pages < need) {
        rc = sb_ns_page_alloc(kv->ns, &kv->pages[kv->n_pages]);
        if (rc != SB_OK)
            return rc;
        kv->n_pages++;
    }
    return SB_OK;
}

int sb_rt_kv_append_tokens(sb_rt_kv *kv, const uint32_t *tokens, size_t n)
{
    size_t want = kv->n_tokens + n;
    int rc = token_room(kv, want);
    if (rc != SB_OK)
        return rc;
    memcpy(kv->tokens + kv->n_tokens, tokens, n * sizeof *tokens);
    kv->n_tokens = want;
    return SB_OK;
}

int sb_rt_kv_adopt(sb_rt_kv *kv, sb_match *m, const uint32_t *tokens, size_t n)
{
    if (!kv || !m || (n && !tokens) || kv->n_pages || kv->n_tokens)
        return SB_ERR_INVAL;
    sb_match_info info;
    int rc = sb_match_get_info(m, &info);
    if (rc != SB_OK)
        return rc;
    if (n > info.n_tokens)
        return SB_ERR_RANGE;
    if (n == 0)
        return SB_OK;
    size_t np = (n + kv->page_tokens - 1) / kv->page_tokens;
    if ((rc = page_room(kv, np)) != SB_OK)
        return rc;
    if ((rc = sb_match_pages(m, 0, np, kv->pages)) != SB_OK)
        return rc;
    kv->n_pages = np;
    if ((rc = sb_rt_kv_append_tokens(kv, tokens, n)) != SB_OK)
        sb_rt_kv_reset(kv);
    return rc;
}

int sb_rt_kv_commit(sb_rt_kv *kv, const void *point, sb_write_outcome *oc)
{
    if (oc)
        memset(oc, 0, sizeof *oc);
    if (!kv || kv->n_tokens == 0)
        return SB_ERR_NO_TOKENS;
    return sb_ns_commit_ex(kv->ns, kv->tokens, kv->n_tokens, kv->pages, point, oc);
}
