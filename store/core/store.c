/* store.c -- the bare store (store.h: made here, opened with its tiers by
 * store/open), closing a store, its configuration, clock and statistics. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "match.h"
#include "shared.h"
#include "store.h"
#include "tier.h"

unsigned sb_version(void)
{
    return SB_VERSION_NUMBER;
}

void sb_config_default(sb_config *cfg)
{
    if (!cfg)
        return;
    memset(cfg, 0, sizeof *cfg);
    cfg->ram_bytes = 1ull << 30;
    cfg->ram_pages = UINT64_MAX;
    cfg->ns_ram_bytes = UINT64_MAX;
    cfg->max_seq_tokens = 1u << 24;
    cfg->dir = NULL;
    cfg->disk_bytes = 0;
    cfg->segment_bytes = 256ull << 20;
    cfg->write_budget_bytes_per_hour = 128ull << 30;
    cfg->write_budget_burst_bytes = 0;
    cfg->backlog_bytes = 4ull << 30;
    cfg->min_prefix_tokens = 512;
    cfg->queue_depth = 32;
    cfg->durability = SB_DURABILITY_PERIODIC;
    cfg->write_mode = SB_WRITE_THROUGH;
    cfg->sync_bytes = 64ull << 20;
    cfg->sync_interval_ms = 1000;
    cfg->disk_free_floor_bytes = 256ull << 20;
}

uint64_t sb_now_ns(sb_store *st)
{
    if (st->cfg.clock_ns)
        return st->cfg.clock_ns(st->cfg.clock_ctx);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int sb_store_config_check(const sb_config *c)
{
    /* Content keys hash token IDs in host order and the format is
     * little-endian: refuse big-endian hosts rather than write wrong keys. */
    const uint32_t probe = 1;
    if (*(const uint8_t *)&probe != 1)
        return SB_ERR_UNSUPPORTED;
    if (c->ram_bytes == 0 || c->ram_pages == 0 || c->ns_ram_bytes == 0)
        return SB_ERR_INVAL;
    if (c->max_seq_tokens == 0 || c->max_seq_tokens > INT32_MAX)
        return SB_ERR_INVAL;
    if (c->reserved0 || (c->open_flags & ~SB_OPEN_SALVAGE))
        return SB_ERR_INVAL;
    if (c->durability > SB_DURABILITY_COMMIT || c->write_mode > SB_WRITE_ONLY)
        return SB_ERR_INVAL;
    return SB_OK;
}

int sb_store_new(const sb_config *cfg, sb_store **out)
{
    *out = NULL;
    sb_mem mem;
    int rc = sb_mem_init(&mem, cfg->fault_alloc_nth);
    if (rc != SB_OK)
        return rc;
    sb_store *st = sb_calloc(&mem, 1, sizeof *st);
    if (!st) {
        sb_mem_fini(&mem);
        return SB_ERR_NOMEM;
    }
    st->mem = mem;
    sb_pool_init(&st->pool);
    st->cfg = *cfg;
    st->cfg.dir = NULL;
    st->n_buckets = 16;
    st->buckets = sb_calloc(&st->mem, st->n_buckets, sizeof *st->buckets);
    if (!st->buckets || pthread_mutex_init(&st->mu, NULL) != 0) {
        sb_free(st->buckets);
        sb_mem_fini(&st->mem);
        sb_free(st);
        return SB_ERR_NOMEM;
    }
    st->next_pin_id = 1;
    *out = st;
    return SB_OK;
}

void sb_store_publish(sb_store *st)
{
    st->cfg.shared_seeds = st->cfg.shared_user = st->cfg.shared_password = NULL;
}

static int store_free(sb_store *st, bool crash)
{
    /* The publisher first: its queued pages hold references into the
     * index, which it drops as it goes. */
    sb_shared_close(st);
    sb_loader_stop(st); /* no load runs: every match was released */
    int rc = sb_tier_close(st, crash);
    pthread_mutex_lock(&st->mu);
    while (st->pins) {
        sb_pin *p = st->pins;
        st->pins = p->next;
        sb_pin_free(st, p);
    }
    sb_ns_free_all(st);
    sb_heap_free(&st->heap);
    sb_pool_fini(&st->pool);
    pthread_mutex_unlock(&st->mu);
    pthread_mutex_destroy(&st->mu);
    sb_free(st->buckets);
    sb_mem mem = st->mem;
    sb_free(st);
    sb_mem_fini(&mem);
    return rc;
}

int sb_store_close(sb_store *st)
{
    return st ? store_free(st, false) : SB_OK;
}

void sb_store_crash(sb_store *st)
{
    if (st)
        store_free(st, true);
}

int sb_store_flush(sb_store *st)
{
    if (!st)
        return SB_ERR_INVAL;
    sb_shared_flush(st);
    return sb_tier_flush(st);
}

int sb_store_fault_alloc(sb_store *st, uint64_t nth)
{
    if (!st)
        return SB_ERR_INVAL;
    sb_mem_arm(&st->mem, nth);
    return SB_OK;
}

int sb_store_foreground(sb_store *st, int busy)
{
    if (!st)
        return SB_ERR_INVAL;
    int rc = SB_OK;
    pthread_mutex_lock(&st->mu);
    if (busy)
        st->fg++;
    else if (st->fg == 0)
        rc = SB_ERR_INVAL;
    else if (--st->fg == 0)
        sb_tier_foreground_over(st);
    pthread_mutex_unlock(&st->mu);
    return rc;
}

int sb_store_stats(sb_store *st, sb_stats *out)
{
    if (!st || !out)
        return SB_ERR_INVAL;
    pthread_mutex_lock(&st->mu);
    sb_pins_expire(st);
    *out = st->stats;
    const sb_pool *p = &st->pool;
    out->ram_bytes = st->ram_bytes - p->spare_bytes - p->transit_bytes;
    out->ram_pages = st->ram_pages - p->spare_pages - p->transit_pages;
    out->pool_spare_bytes = p->spare_bytes;
    out->pool_spare_pages = p->spare_pages;
    out->pool_chunks = p->n_chunks;
    out->pool_grown_bytes = p->grown_bytes;
    out->pool_trimmed_bytes = p->trimmed_bytes;
    out->ram_bytes_limit = st->cfg.ram_bytes;
    out->ram_pages_limit = st->cfg.ram_pages;
    uint64_t tokens = 0;
    for (size_t i = 0; i < st->n_buckets; i++)
        for (sb_ns *ns = st->buckets[i]; ns; ns = ns->next)
            tokens += ns->index_tokens;
    out->indexed_pages = st->indexed_pages;
    out->indexed_bytes = st->indexed_bytes;
    out->pinned_pages = st->indexed_pages - st->free_pages;
    out->points = st->n_points;
    out->point_bytes = st->point_bytes;
    out->pins = st->n_pins;
    out->namespaces = st->n_ns;
    out->pool_resident_bytes = p->resident_bytes;
    out->index_bytes = st->index_bytes;
    out->index_tokens = tokens;
    out->index_nodes = st->index_nodes;
    out->index_bytes_per_token = tokens ? (double)st->index_bytes / (double)tokens : 0.0;
    sb_tier_stats(st, out);
    sb_shared_stats(st, out);
    pthread_mutex_unlock(&st->mu);
    return SB_OK;
}
