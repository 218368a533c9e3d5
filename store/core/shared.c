/* shared.c -- the shared tier's public calls (sb_store_has_shared,
 * sb_ns_fetch_shared): arguments checked here, the work done by the tier
 * (its table: shared.h; store/remote/rtier.c fetches and adds the pages
 * through host.h).
 */
#include <string.h>

#include "internal.h"
#include "shared.h"

int sb_store_has_shared(const sb_store *st)
{
    return st && sb_shared_on(st);
}

int sb_fetch_check(const sb_ns *ns, const uint32_t *tokens, size_t n_tokens)
{
    if (!ns)
        return SB_ERR_INVAL;
    int rc = sb_tokens_check(ns, tokens, n_tokens);
    if (rc != SB_OK)
        return rc;
    if (!sb_shared_on(ns->st) || (ns->flags & SB_LAYOUT_POINT_REQUIRED))
        return SB_ERR_UNSUPPORTED;
    return SB_OK;
}

int sb_ns_fetch_shared(sb_ns *ns, const uint32_t *tokens, size_t n_tokens, size_t *n_added)
{
    sb_fetch_shared_info info;
    int rc = sb_ns_fetch_shared_ex(ns, tokens, n_tokens, NULL, &info);
    if (n_added)
        *n_added = info.n_added;
    return rc;
}

int sb_ns_fetch_shared_ex(sb_ns *ns, const uint32_t *tokens, size_t n_tokens,
                          const sb_fetch_shared_opts *opts, sb_fetch_shared_info *info)
{
    sb_fetch_shared_info own;
    if (!info)
        info = &own;
    memset(info, 0, sizeof *info);
    int rc = sb_fetch_check(ns, tokens, n_tokens);
    if (rc != SB_OK)
        return rc;
    if (opts && !(opts->recompute_s_per_token >= 0))
        return SB_ERR_INVAL; /* negative or NaN */
    sb_store *st = ns->st;
    size_t n_full = n_tokens / ns->page_tokens;
    if (!n_full)
        return SB_OK;
    size_t added = 0;
    rc = st->shared.ops->extend(ns, tokens, n_full * ns->page_tokens, opts, info, &added);
    info->n_added = added;
    return rc;
}
