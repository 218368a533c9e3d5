/* ns.c -- namespaces: the table of (model identity, scope) pairs, layout
 *  validation, page geometry, the root of each content-key chain, and the
 * checks of a call's token sequence against its namespace. */
#include <stdio.h>
#include <string.h>
#include <xxhash.h>

#include "internal.h"
#include "radix.h"
#include "tier.h"

/* ---- keys ------------------------------------------------------------------- */

sb_key sb_key_chain(const sb_key *parent, const uint32_t *tokens, size_t n)
{
    /* XXH3-128 of the tokens, seeded with a 64-bit fold of the parent key,
     * then mixed with the full parent key. Token IDs are hashed in host byte
     * order: the bank only runs on little-endian machines (checked in
     * store.c), so this equals the little-endian definition. */
    XXH128_hash_t h = XXH3_128bits_withSeed(tokens, n * sizeof *tokens,
                                            parent->lo ^ (parent->hi * 0x9E3779B97F4A7C15ull));
    uint64_t buf[4] = { parent->lo, parent->hi, h.low64, h.high64 };
    XXH128_hash_t k = XXH3_128bits(buf, sizeof buf);
    return (sb_key){ k.low64, k.high64 };
}

/* ---- layout -------------------------------------------------------------------- */

static int layout_check(const sb_layout *l)
{
    if (!l->model_id || l->model_id_bytes == 0 || l->model_id_bytes > SB_MODEL_ID_MAX)
        return SB_ERR_LAYOUT;
    if (l->n_tensors == 0 || l->n_tensors > SB_TENSORS_MAX || !l->bytes_per_token)
        return SB_ERR_LAYOUT;
    if (l->flags & ~(SB_LAYOUT_POINT_REQUIRED | SB_LAYOUT_ELEM16))
        return SB_ERR_LAYOUT;
    if ((l->flags & SB_LAYOUT_POINT_REQUIRED) && l->point_bytes == 0)
        return SB_ERR_LAYOUT;
    if (l->point_bytes > SB_POINT_BYTES_MAX)
        return SB_ERR_LAYOUT;
    for (uint32_t t = 0; t < l->n_tensors; t++)
        if (l->bytes_per_token[t] == 0 ||
            ((l->flags & SB_LAYOUT_ELEM16) && l->bytes_per_token[t] % 2))
            return SB_ERR_LAYOUT;
    if (l->page_tokens == 0 || l->page_tokens > SB_PAGE_TOKENS_MAX)
        return SB_ERR_PAGE_SIZE;
    uint64_t bytes = 0;
    for (uint32_t t = 0; t < l->n_tensors; t++) {
        bytes += ((uint64_t)l->page_tokens * l->bytes_per_token[t] + 63) / 64 * 64;
        if (bytes > SB_PAGE_BYTES_MAX)
            return SB_ERR_PAGE_SIZE;
    }
    if ((bytes + 4095) / 4096 * 4096 > SB_PAGE_BYTES_MAX)
        return SB_ERR_PAGE_SIZE;
    return SB_OK;
}

/* The flags that are part of a layout's identity (SB_LAYOUT_ELEM16 is a
 * compression hint: the namespace keeps the one it was first opened or
 * recovered with). */
#define IDENTITY_FLAGS SB_LAYOUT_POINT_REQUIRED

static bool layout_equal(const sb_ns *ns, const sb_layout *l)
{
    if (ns->page_tokens != l->page_tokens || ns->n_tensors != l->n_tensors ||
        ns->point_bytes != l->point_bytes ||
        (ns->flags & IDENTITY_FLAGS) != (l->flags & IDENTITY_FLAGS))
        return false;
    return memcmp(ns->bpt, l->bytes_per_token, l->n_tensors * sizeof *ns->bpt) == 0;
}

/* ---- table ------------------------------------------------------------------- */

static uint64_t scope_hash_of(const void *scope, size_t n)
{
    return XXH3_64bits(n ? scope : "", n);
}

static uint64_t ns_id_of(const void *model_id, size_t model_id_bytes,
                         const void *scope, size_t scope_bytes)
{
    /* Length-prefixed, so (ab, c) and (a, bc) differ. */
    uint64_t h = XXH3_64bits_withSeed(model_id, model_id_bytes, model_id_bytes);
    return XXH3_64bits_withSeed(scope_bytes ? scope : "", scope_bytes,
                                h ^ ((uint64_t)scope_bytes << 32));
}

static sb_ns *table_find(sb_store *st, const sb_layout *l, const void *scope,
                         size_t scope_bytes, uint64_t sh)
{
    for (sb_ns *ns = st->buckets[sh & (st->n_buckets - 1)]; ns; ns = ns->next) {
        if (ns->scope_hash == sh && ns->scope_bytes == scope_bytes &&
            ns->model_id_bytes == l->model_id_bytes &&
            (scope_bytes == 0 || memcmp(ns->scope, scope, scope_bytes) == 0) &&
            memcmp(ns->model_id, l->model_id, l->model_id_bytes) == 0)
            return ns;
    }
    return NULL;
}

static int table_grow(sb_store *st)
{
    size_t nb = st->n_buckets * 2;
    sb_ns **b = sb_calloc(&st->mem, nb, sizeof *b);
    if (!b)
        return SB_ERR_NOMEM;
    for (size_t i = 0; i < st->n_buckets; i++) {
        sb_ns *ns = st->buckets[i];
        while (ns) {
            sb_ns *next = ns->next;
            size_t j = ns->scope_hash & (nb - 1);
            ns->next = b[j];
            b[j] = ns;
            ns = next;
        }
    }
    sb_free(st->buckets);
    st->buckets = b;
    st->n_buckets = nb;
    return SB_OK;
}

static void ns_destroy(sb_ns *ns)
{
    sb_radix_free(ns);
    sb_heap_free(&ns->heap);
    sb_free(ns->model_id);
    sb_free(ns->scope);
    sb_free(ns->bpt);
    sb_free(ns->tensor_off);
    sb_free(ns);
}

static void table_unlink(sb_store *st, sb_ns *ns)
{
    sb_ns **pp = &st->buckets[ns->scope_hash & (st->n_buckets - 1)];
    while (*pp != ns)
        pp = &(*pp)->next;
    *pp = ns->next;
    st->n_ns--;
}

void sb_ns_maybe_free(sb_ns *ns)
{
    if (ns->holds || ns->ram_bytes || ns->root->n_kids)
        return;
    table_unlink(ns->st, ns);
    ns_destroy(ns);
}

void sb_ns_free_all(sb_store *st)
{
    for (size_t i = 0; i < st->n_buckets; i++) {
        while (st->buckets[i]) {
            sb_ns *ns = st->buckets[i];
            st->buckets[i] = ns->next;
            st->n_ns--;
            ns_destroy(ns);
        }
    }
}

/* Build a namespace from a checked layout; not yet in the table. */
static int ns_create(sb_store *st, const sb_layout *l, const void *scope,
                     size_t scope_bytes, uint64_t sh, sb_ns **out)
{
    sb_ns *ns = sb_calloc(&st->mem, 1, sizeof *ns);
    if (!ns)
        return SB_ERR_NOMEM;
    ns->st = st;
    ns->model_id = sb_malloc(&st->mem, l->model_id_bytes);
    ns->scope = scope_bytes ? sb_malloc(&st->mem, scope_bytes) : NULL;
    ns->bpt = sb_malloc(&st->mem, l->n_tensors * sizeof *ns->bpt);
    ns->tensor_off = sb_malloc(&st->mem, l->n_tensors * sizeof *ns->tensor_off);
    if (!ns->model_id || (scope_bytes && !ns->scope) || !ns->bpt || !ns->tensor_off ||
        sb_radix_init(ns) != SB_OK) {
        ns_destroy(ns);
        return SB_ERR_NOMEM;
    }
    memcpy(ns->model_id, l->model_id, l->model_id_bytes);
    ns->model_id_bytes = l->model_id_bytes;
    if (scope_bytes)
        memcpy(ns->scope, scope, scope_bytes);
    ns->scope_bytes = scope_bytes;
    ns->scope_hash = sh;
    ns->page_tokens = l->page_tokens;
    ns->n_tensors = l->n_tensors;
    ns->point_bytes = l->point_bytes;
    ns->flags = l->flags;
    memcpy(ns->bpt, l->bytes_per_token, l->n_tensors * sizeof *ns->bpt);
    size_t off = 0;
    for (uint32_t t = 0; t < l->n_tensors; t++) {
        ns->tensor_off[t] = off;
        off += ((size_t)l->page_tokens * l->bytes_per_token[t] + 63) / 64 * 64;
    }
    ns->page_bytes = (off + 4095) / 4096 * 4096;
    ns->id = ns_id_of(l->model_id, l->model_id_bytes, scope, scope_bytes);
    /* Its buffers' pool classes: pages 4 KiB aligned; point states as the
     * tier below writes them (padded, sb_blk_alloc_bytes), else 64-byte
     * aligned. */
    size_t point_align = sb_tier_data_align(st);
    ns->cls[0] = sb_pool_class(&st->pool, &st->mem, ns->page_bytes, 4096, ns->page_bytes, true);
    if (ns->point_bytes)
        ns->cls[1] = sb_pool_class(&st->pool, &st->mem, sb_blk_alloc_bytes(ns, SB_BLK_POINT),
                                   point_align ? point_align : 64, ns->point_bytes, false);
    if (!ns->cls[0] || (ns->point_bytes && !ns->cls[1])) {
        ns_destroy(ns);
        return SB_ERR_NOMEM;
    }

    /* The root key binds the chain to the identity, scope and layout. */
    uint64_t head[6] = { ns->id, l->page_tokens, l->n_tensors, l->point_bytes,
                         l->flags & IDENTITY_FLAGS, 0x736e617062616e6bull /* "snapbank" */ };
    XXH3_state_t *s = XXH3_createState();
    if (!s) {
        ns_destroy(ns);
        return SB_ERR_NOMEM;
    }
    XXH3_128bits_reset(s);
    XXH3_128bits_update(s, head, sizeof head);
    XXH3_128bits_update(s, l->bytes_per_token, l->n_tensors * sizeof *l->bytes_per_token);
    XXH3_128bits_update(s, l->model_id, l->model_id_bytes);
    if (scope_bytes)
        XXH3_128bits_update(s, scope, scope_bytes);
    XXH128_hash_t rk = XXH3_128bits_digest(s);
    XXH3_freeState(s);
    ns->root_key = (sb_key){ rk.low64, rk.high64 };
    *out = ns;
    return SB_OK;
}

/* ---- public ------------------------------------------------------------------- */

int sb_ns_open(sb_store *st, const sb_layout *layout, const void *scope,
               size_t scope_bytes, sb_ns **out)
{
    if (out)
        *out = NULL;
    if (!st || !layout || !out || (scope_bytes && !scope) || scope_bytes > SB_SCOPE_MAX)
        return SB_ERR_INVAL;
    int rc = layout_check(layout);
    if (rc != SB_OK)
        return rc;
    uint64_t sh = scope_hash_of(scope, scope_bytes);

    pthread_mutex_lock(&st->mu);
    sb_ns *ns = table_find(st, layout, scope, scope_bytes, sh);
    if (ns) {
        if (!layout_equal(ns, layout)) {
            rc = SB_ERR_LAYOUT_MISMATCH;
        } else {
            ns->holds++;
            *out = ns;
        }
        pthread_mutex_unlock(&st->mu);
        return rc;
    }
    if (st->n_ns + 1 > st->n_buckets && (rc = table_grow(st)) != SB_OK) {
        pthread_mutex_unlock(&st->mu);
        return rc;
    }
    rc = ns_create(st, layout, scope, scope_bytes, sh, &ns);
    if (rc == SB_OK) {
        size_t b = sh & (st->n_buckets - 1);
        ns->next = st->buckets[b];
        st->buckets[b] = ns;
        st->n_ns++;
        ns->holds = 1;
        *out = ns;
        SB_DLOG("namespace %016llx created: page_tokens %u, %zu-byte pages\n",
                (unsigned long long)ns->id, ns->page_tokens, ns->page_bytes);
    }
    pthread_mutex_unlock(&st->mu);
    return rc;
}

void sb_ns_close(sb_ns *ns)
{
    if (!ns)
        return;
    sb_store *st = ns->st;
    pthread_mutex_lock(&st->mu);
    ns->holds--;
    sb_ns_maybe_free(ns);
    pthread_mutex_unlock(&st->mu);
}

int sb_ns_get_info(sb_ns *ns, sb_ns_info *out)
{
    if (!ns || !out)
        return SB_ERR_INVAL;
    pthread_mutex_lock(&ns->st->mu);
    out->ns_id = ns->id;
    out->page_tokens = ns->page_tokens;
    out->n_tensors = ns->n_tensors;
    out->page_bytes = ns->page_bytes;
    out->point_bytes = ns->point_bytes;
    out->flags = ns->flags;
    out->ram_bytes = ns->ram_bytes;
    out->indexed_pages = ns->indexed_pages;
    out->index_tokens = ns->index_tokens;
    pthread_mutex_unlock(&ns->st->mu);
    return SB_OK;
}

sb_store *sb_ns_store(const sb_ns *ns)
{
    return ns ? ns->st : NULL;
}

size_t sb_ns_tensor_offset(const sb_ns *ns, uint32_t t)
{
    if (!ns || t >= ns->n_tensors)
        return (size_t)-1;
    return ns->tensor_off[t];
}

int sb_tokens_check(const sb_ns *ns, const uint32_t *tokens, size_t n)
{
    if (n == 0)
        return SB_ERR_NO_TOKENS;
    if (!tokens)
        return SB_ERR_INVAL;
    if (n > ns->st->cfg.max_seq_tokens)
        return SB_ERR_TOO_MANY_TOKENS;
    return SB_OK;
}
