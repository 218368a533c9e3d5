/* stats_fields.h -- every uint64 field of sb_stats as an X-macro, for the
 * code that writes the stats out field by field (capi.c's JSON, snapbank
 * serve's /v1/bank/stats). The assertion catches a field added to sb_stats
 * and not here. */
#ifndef SB_RT_STATS_FIELDS_H
#define SB_RT_STATS_FIELDS_H

#include "snapbank.h"

/* Every field of sb_stats, in order: keep it in step with snapbank.h (the
 * assertion below catches a field added there and not here). */
#define SB_STATS_U64(X)                                                                         \
    X(lookups) X(hits) X(hits_ram) X(hits_disk) X(hit_tokens) X(miss_tokens) X(puts) X(commits) \
    X(pages_new) X(pages_dedup) X(pages_superseded) X(cow_copies) X(budget_denials)             \
    X(ram_bytes) X(ram_pages) X(ram_bytes_limit) X(ram_pages_limit) X(indexed_pages)            \
    X(indexed_bytes) X(pinned_pages) X(points) X(point_bytes) X(pins) X(namespaces)             \
    X(pool_resident_bytes) X(evictions) X(evicted_bytes) X(point_evictions) X(index_bytes)      \
    X(index_tokens) X(index_nodes) X(disk_bytes) X(disk_bytes_limit) X(disk_pages)              \
    X(disk_write_bytes) X(disk_read_bytes) X(disk_write_denials) X(disk_budget_bytes)           \
    X(disk_logical_bytes) X(disk_head_bytes) X(disk_padding_bytes) X(disk_summary_bytes)        \
    X(disk_superblock_bytes) X(disk_ns_record_bytes) X(disk_reinsert_bytes)                     \
    X(disk_life_write_bytes) X(disk_life_logical_bytes) X(disk_life_reinsert_bytes)             \
    X(disk_checksum_failures)                                                                   \
    X(durable_seq) X(disk_write_errors) X(disk_read_errors) X(disk_segments)                    \
    X(disk_queued_bytes) X(disk_queued_peak_bytes) X(disk_holdback_ns) X(disk_holdbacks) X(disk_reclaimed_segments)       \
    X(disk_reclaim_kept) X(disk_reclaim_ram_only) X(disk_reclaim_dropped) X(disk_nospc)          \
    X(disk_deferred) X(disk_pool_written) X(disk_pool_blocks)                                   \
    X(disk_compressed_records) X(disk_compress_skipped) X(disk_compress_raw_bytes)              \
    X(disk_compress_stored_bytes) X(disk_compress_saved_bytes)                                  \
    X(recovered_records)                                                                        \
    X(recovered_pages) X(recovered_points) X(recovered_namespaces) X(recovery_orphans)          \
    X(recovery_bad_summaries) X(recovery_torn) X(recovery_unlisted) X(recovery_ns)            \
    X(salvaged) X(salvaged_segments) X(salvage_scanned_segments) X(salvage_skipped_files)    \
    X(salvage_dropped_records) X(salvage_dropped_bytes)                                      \
    X(pool_spare_bytes) X(pool_spare_pages) X(pool_chunks) X(pool_grown_bytes)                  \
    X(pool_trimmed_bytes) X(disk_read_ios) X(disk_write_ios)                                   \
    X(shared_offered) X(shared_published) X(shared_published_bytes) X(shared_dedup)            \
    X(shared_denied) X(shared_publish_failed) X(shared_probes) X(shared_probe_hits)            \
    X(shared_fetched_pages) X(shared_fetched_bytes) X(shared_bad_values) X(shared_down)        \
    X(shared_fetch_ns) X(shared_queued_bytes)                                                \
    X(removes) X(removed_pages) X(removed_points) X(disk_tombstones) X(disk_tombstone_bytes)   \
    X(disk_tombstones_live) X(recovered_tombstones) X(recovery_removed) X(shared_forgotten)    \
    X(shared_forget_failed)                                                                    \
    X(shared_err_auth) X(shared_err_noperm) X(shared_err_wrongtype) X(shared_err_refused)      \
    X(shared_err_timeout) X(shared_err_connect) X(shared_err_clusterdown)                     \
    X(shared_err_deadline) X(shared_replaced) X(shared_forged) X(shared_requeued)
#define SB_COUNT_FIELD(f) +1
_Static_assert(sizeof(sb_stats) ==
                   (0 SB_STATS_U64(SB_COUNT_FIELD)) * 8 + 2 * sizeof(double) +
                       2 * SB_MISS__COUNT * 8 + 2 * SB_DENY__COUNT * 8,
               "sb_stats changed: update SB_STATS_U64 in stats_fields.h");


#endif /* SB_RT_STATS_FIELDS_H */
