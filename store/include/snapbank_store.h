/* snapbank_store.h -- the store, its configuration and counters, errors and
 * version, durability of one call, namespaces and their layouts: what every
 * other part of the API builds on.
 *
 * One part of libsnapbank's public API. snapbank.h is the manual (its
 * first pages: concepts, page layout, ownership, thread safety, budgets)
 * and includes every part. */
#ifndef SNAPBANK_STORE_H
#define SNAPBANK_STORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define SB_API
#elif defined(__GNUC__)
#define SB_API __attribute__((visibility("default")))
#else
#define SB_API
#endif

/* ============================================================================
 * Version
 * ========================================================================== */

#define SB_VERSION_MAJOR 0
#define SB_VERSION_MINOR 1
#define SB_VERSION_PATCH 0
#define SB_VERSION_NUMBER \
    (SB_VERSION_MAJOR * 10000 + SB_VERSION_MINOR * 100 + SB_VERSION_PATCH)

/* sb_version -- the library's SB_VERSION_NUMBER, to compare with the header's.
 * Returns: the version number. */
SB_API unsigned sb_version(void);

/* ============================================================================
 * Errors
 * ========================================================================== */

/* Values are pinned: a code keeps its number forever and a retired number is
 * never reused. */
enum sb_err {
    SB_OK = 0,
    SB_ERR_INVAL = -1,           /* an argument is invalid (NULL, out of range) */
    SB_ERR_NOMEM = -2,           /* an allocation failed */
    SB_ERR_LAYOUT = -3,          /* the layout is invalid */
    SB_ERR_LAYOUT_MISMATCH = -4, /* the namespace exists with another layout */
    SB_ERR_PAGE_SIZE = -5,       /* page_tokens or page bytes out of range */
    SB_ERR_NO_TOKENS = -6,       /* a token sequence of length zero */
    SB_ERR_TOO_MANY_TOKENS = -7, /* more tokens than config.max_seq_tokens */
    SB_ERR_BUDGET = -8,          /* a RAM budget is full of pinned pages */
    SB_ERR_FOREIGN_PAGE = -9,    /* the page belongs to another namespace */
    SB_ERR_PAGE_STATE = -10,     /* the page is committed with other contents */
    SB_ERR_RANGE = -11,          /* a count or index beyond what a match holds */
    SB_ERR_NOT_FOUND = -12,      /* no such pin */
    SB_ERR_CORRUPT = -13,        /* an internal consistency check failed */
    SB_ERR_IO = -14,             /* an I/O error on the disk tier */
    SB_ERR_NOSPC = -15,          /* the disk tier's file system is full */
    SB_ERR_LOCKED = -16,         /* the store directory is held by another process */
    SB_ERR_VERSION = -17,        /* unknown on-disk format version */
    SB_ERR_FORMAT = -18,         /* not a snapbank store, or a damaged one */
    SB_ERR_UNSUPPORTED = -19,    /* the feature is not available in this build */
    SB_ERR_NO_POINT = -20,       /* a point state is needed and there is none */
    SB_ERR_SUPERBLOCK = -21,     /* the store's superblock cannot be used (both
                                    slots damaged, truncated, missing): open
                                    with SB_OPEN_SALVAGE or run 'snapbank
                                    fsck --repair DIR' to rebuild it from the
                                    segment files */
    SB_ERR_PENDING = -22,        /* not finished yet: a ticket's writes are
                                    queued, waiting or dirty; a load is in
                                    flight */
    SB_ERR_NOT_DURABLE = -23,    /* a ticket's state will never be durable: a
                                    write it needs was denied or failed (it
                                    is in RAM only), or there is no disk */
    SB_ERR_CANCELED = -24,       /* the load was canceled before it finished */
    SB_ERR_BUSY = -25,           /* the match is loading: the call needs pages
                                    or a point state not resident yet */
    SB_ERR_INCOMPLETE = -26,     /* a layered put was finished before every
                                    tensor was given (sb_put_finish) */
    SB_ERR_WRITE_ONLY = -27,     /* a ticket of an SB_WRITE_ONLY store: its
                                    state is written and synced, for a later
                                    open in a mode that reads the disk tier,
                                    but it is not durable (this store never
                                    restores it; an open in write-only mode
                                    starts empty) */
    SB_ERR_RECLAIMED = -28,      /* a ticket's state was durable, then
                                    reclamation under the disk cap took
                                    records it needs: a reopen no longer
                                    restores it whole */
};

/* sb_strerror -- a short English description of an sb_err code.
 * Returns: a static string, never NULL ("unknown error" for a code that is
 * not in enum sb_err). */
SB_API const char *sb_strerror(int err);

/* ============================================================================
 * Store
 * ========================================================================== */

typedef struct sb_store sb_store;

/* When the disk tier makes a written page durable (synced). Whatever the
 * mode, sb_write_outcome says per call what was written, and its ticket
 * when the state becomes durable ("Durability of one call" below). */
typedef enum sb_durability {
    SB_DURABILITY_NONE = 0,     /* synced at a flush, a ticket's wait and close */
    SB_DURABILITY_PERIODIC = 1, /* group commit every sync_bytes or sync_interval_ms */
    SB_DURABILITY_COMMIT = 2,   /* each put and commit writes its state and
                                   waits until it is synced before it
                                   returns, in every write mode (write-back
                                   too: the pages are written at once).
                                   What the tier does not write stays in RAM
                                   and the call still returns SB_OK: the
                                   outcome says durable 0 and why (denied:
                                   budget, backlog, capacity, short -- a
                                   sequence under min_prefix_tokens is not
                                   written, COMMIT or not; set it to 1 to
                                   write every length -- or deferred:
                                   waiting in the priority pool for the
                                   write budget, not waited for; its ticket
                                   turns durable once the pool writes it) */
} sb_durability;

/* When dirty pages reach the disk tier. */
typedef enum sb_write_mode {
    SB_WRITE_THROUGH = 0, /* written when committed */
    SB_WRITE_BACK = 1,    /* written when the RAM tier evicts them, at a
                             flush, at close, and when a ticket's wait asks
                             for them; under SB_DURABILITY_COMMIT when
                             committed, as write-through */
    SB_WRITE_ONLY = 2,    /* written when committed, never read back: a
                             store being warmed for a later open. Its
                             index holds what is in RAM only (a page the
                             RAM tier evicts leaves it, as in a RAM-only
                             store, so a put of those tokens stores them
                             again), and an open in this mode starts
                             empty: the records on disk serve a later open
                             in a mode that reads them. So nothing it
                             stores is ever durable: a crash and a reopen
                             of the same store restore none of it. Its
                             outcomes say durable 0 and write_only 1, and
                             its tickets answer SB_ERR_WRITE_ONLY once
                             their state is written and synced (the
                             warmer's signal that a later reading open
                             finds it), never SB_OK. Flush and close
                             still return SB_OK: they promise "written
                             and synced", which holds */
} sb_write_mode;

/* Store configuration. Fill it with sb_config_default() and then change the
 * fields you need; fields added in later versions get safe defaults there. */
typedef struct sb_config {
    /* --- RAM tier ---------------------------------------------------------- */
    uint64_t ram_bytes;      /* budget for all pages and point states, bytes;
                                default 1 GiB */
    uint64_t ram_pages;      /* budget in pages; default UINT64_MAX (none) */
    uint64_t ns_ram_bytes;   /* budget per namespace, bytes; default UINT64_MAX */
    uint32_t max_seq_tokens; /* longest accepted token sequence; default 2^24,
                                at most 2^31 - 1 */
    uint32_t reserved0;      /* must be zero */

    /* --- disk tier (NULL dir: RAM only) ------------------------------------ */
    const char *dir;              /* store directory, created 0700 if absent;
                                     borrowed during sb_store_open only */
    uint64_t disk_bytes;          /* cap for the disk tier: its segments
                                     never take more (the oldest segment is
                                     reclaimed to make room); 0: what the
                                     store holds plus a quarter of the file
                                     system's free space, at open. On a
                                     fresh directory that default cap holds
                                     at least 8 segments: when a quarter of
                                     the free space is under 8 times
                                     segment_bytes, the store's segments
                                     are made an eighth of it instead (a
                                     multiple of 4096, at least 64 KiB), so
                                     that reclamation takes the oldest of
                                     many segments and never the one just
                                     written (a cap of one or two segments
                                     would reclaim what was just made
                                     durable to open the next). A cap you
                                     set keeps segment_bytes as set */
    uint64_t segment_bytes;       /* segment file size; default 256 MiB
                                     (smaller under the default cap on a
                                     small file system: disk_bytes) */
    uint64_t write_budget_bytes_per_hour; /* a token bucket over every byte
                                     the tier writes (records, padding,
                                     summaries, superblock, reclamation's
                                     copies): it refills at this rate on
                                     the store clock, so any hour sees at
                                     most this plus the burst (plus a
                                     metadata overdraft of at most a
                                     segment's summary). A page that does
                                     not fit waits in RAM in a priority
                                     pool (disk_deferred): as the bucket
                                     refills the pool is written best
                                     first, by recompute saved per byte
                                     (commits and matches through a page
                                     times its tokens over its record
                                     bytes; shallower first on ties) and
                                     never a page before its parent; one
                                     that leaves RAM still waiting is
                                     denied (RAM-only, disk_denials). A
                                     soft controller spreads the budget
                                     over the hour: once the burst is half
                                     spent, pages also pass a bucket
                                     holding one minute of the rate.
                                     Default 128 GiB, at least 1 MiB */
    uint64_t write_budget_burst_bytes;    /* token bucket depth; 0: a twelfth
                                     of the hourly budget */
    uint64_t backlog_bytes;       /* queued-write budget: a page that would
                                     queue more waits in the pool (above)
                                     until the writer catches up, except that
                                     a put of more new pages than this
                                     streams out (sb_ns_put: a chunk of
                                     half of it at a time, each queued once
                                     the writer has drained the queue to
                                     half), so it needs no more RAM than
                                     the budgets allow; default 4 GiB */
    uint32_t min_prefix_tokens;   /* shortest sequence worth writing: a
                                     commit or put of fewer tokens writes
                                     nothing to the disk tier (denial
                                     "short", in its outcome too; its pages
                                     are written if a longer sequence
                                     through them is committed later;
                                     write-back: a page no indexed sequence
                                     of this length goes through is not
                                     written). It holds under COMMIT
                                     durability too: such a call returns
                                     SB_OK with durable 0. Default 512; 0 or
                                     1: every length */
    uint32_t queue_depth;         /* io_uring queue depth; default 32 */
    sb_durability durability;     /* default SB_DURABILITY_PERIODIC */
    sb_write_mode write_mode;     /* default SB_WRITE_THROUGH */
    uint64_t sync_bytes;          /* periodic durability: bytes between syncs;
                                     default 64 MiB */
    uint32_t sync_interval_ms;    /* periodic durability: ms between syncs;
                                     default 1000 */
    uint32_t foreground_hold_ms;  /* longest the writer waits before new
                                     writes while a foreground phase is
                                     marked (sb_store_foreground); after each
                                     wait it writes a round (queue_depth
                                     records) before it may wait again, so
                                     it never starves; 0: 20 ms */
    uint64_t disk_free_floor_bytes; /* the tier opens no new segment while
                                     the file system has less than this
                                     free (it reclaims its oldest segment
                                     instead, or denies writes with reason
                                     capacity until space returns); default
                                     256 MiB, 0: no floor */
    uint32_t compress_level;      /* 0 (default): records are stored as they
                                     are; 1 to 22: the writer compresses
                                     page and point-state payloads with zstd
                                     at this level (layouts with
                                     SB_LAYOUT_ELEM16 byte-shuffled first)
                                     and stores a payload compressed when
                                     that saves at least an eighth of its
                                     4 KiB-padded size. The budget, the cap
                                     and disk_write_bytes count what is
                                     stored; restores decompress. 1-3 keep
                                     up with a disk; higher levels cost
                                     writer CPU */
    uint32_t open_flags;          /* SB_OPEN_* bits; other bits are refused
                                     (SB_ERR_INVAL). Default 0 */

    /* --- shared tier (NULL shared_seeds: none) ----------------------------- *
     * A pool of pages on a Redis Cluster that every store configured with
     * it shares ("Shared tier", snapbank_shared.h). Strings are borrowed
     * during sb_store_open only (the store keeps copies). */
    const char *shared_seeds;     /* "host:port[,host:port...]": nodes of the
                                     cluster to ask for its slot map first;
                                     NULL or "": no shared tier */
    const char *shared_user;      /* ACL user for AUTH; NULL: password only
                                     (needs shared_password) */
    const char *shared_password;  /* AUTH password; NULL: no AUTH. Read it
                                     from a file, never a command line */
    uint32_t shared_timeout_ms;   /* the stall bound of a probe or fetch:
                                     it waits while values arrive, at most
                                     this long without one and 50 times it
                                     in all (sb_fetch_shared_opts); the
                                     publisher waits five times this;
                                     0: 200, at most 60000 */
    uint32_t shared_ttl_s;        /* expiry of each published page; 0: none
                                     (the server's eviction policy bounds
                                     the pool) */
    uint64_t shared_publish_bytes_per_s; /* the publisher's budget, page bytes
                                     per second; 0: 64 MiB/s */
    const char *shared_secret_file; /* the deployment's secret (32 to 4096
                                     bytes, readable by its owner only):
                                     pool keys keyed and values sealed with
                                     it ("Secrecy", snapbank_shared.h);
                                     NULL: plain keys and values */

    /* --- hooks ------------------------------------------------------------- */
    /* Monotonic clock in nanoseconds, for pin TTLs and write budgets. NULL:
     * CLOCK_MONOTONIC. Tests and benchmarks inject a fake clock here. Called
     * with the store mutex held: it must not call into the store. */
    uint64_t (*clock_ns)(void *ctx);
    void *clock_ctx;

    /* Fault injection for tests: when nonzero, the store's fault_alloc_nth-th
     * allocation counted from sb_store_open (1 = the first) fails as if the
     * system were out of memory. See also sb_store_fault_alloc(). */
    uint64_t fault_alloc_nth;
} sb_config;

/* sb_config.open_flags */
#define SB_OPEN_SALVAGE 1u /* a store directory whose superblock cannot be
                              used (SB_ERR_SUPERBLOCK: both slots fail their
                              checks, the file is truncated, zeroed, garbage
                              or gone while segment files remain) is
                              salvaged instead of refused: the superblock is
                              rebuilt from the segment files (sb_store_open
                              says how; docs/format.md what it relies on)
                              and what was found and dropped shows in
                              sb_store_stats (salvage_*). No effect on a
                              store whose superblock is sound, on a new
                              directory, or without a dir */

/* sb_config_default -- fill *cfg with the defaults listed in sb_config.
 * RAM only (dir NULL). */
SB_API void sb_config_default(sb_config *cfg);

/* sb_store_open -- open a store.
 *
 * cfg is read during the call only. With cfg->dir NULL or "" the store lives
 * in RAM only.
 *
 * With cfg->shared_seeds set the store also has a shared tier ("Shared
 * tier", snapbank_shared.h): it connects to the cluster and starts a
 * publisher thread.
 * A cluster that does not answer yet is not an error (fetches fail with
 * SB_ERR_IO until it does; the tier reconnects by itself).
 *
 * With cfg->dir set the store has a disk tier in that directory (created
 * 0700 when absent; its files are 0600). A directory that holds a store is
 * recovered: every valid record is indexed again (as a disk page, read back
 * on restore) and what was found and dropped shows in sb_store_stats
 * (recovered_*, recovery_*). One process at a time may open a directory.
 * On a fresh directory segment_bytes sets the segment size for good (made
 * smaller under the default cap on a small file system: see disk_bytes);
 * an existing store keeps the one it was made with.
 *
 * Salvage. The superblock (two slots, each listing every segment) is what
 * open reads first; when neither slot can be used, open refuses the store
 * with SB_ERR_SUPERBLOCK and changes nothing. With SB_OPEN_SALVAGE in
 * cfg->open_flags it rebuilds the superblock from the segment files
 * instead, which describe themselves: each file's name gives its id; a
 * sound summary (sealed segments) gives its generation and records, and a
 * file without one is read record by record to its end, every record
 * head checked at its own offset and every payload against its hash (past
 * a damaged record the scan looks for the next one at each 4 KiB block; a
 * length is never taken from bytes that did not check). Only the records
 * of a file's newest generation are kept (an older life of the file is
 * stale), and of two records of one key the newer; records whose checks
 * fail are dropped, never indexed. Each file read this way is sealed with
 * a new summary of what it kept, then a fresh superblock listing every
 * adopted segment (both slots) replaces the damaged one, and the index is
 * rebuilt as recovery does. What the segments cannot tell is reset: a new
 * store id, the wear block from zero (the tier's write history before the
 * salvage is lost), no free slots (a reclaimed segment whose files remain
 * is adopted again; its records are correct, and older than any copy of
 * them). sb_store_stats reports it (salvaged_*, salvage_*); the store then
 * opens without the flag. Segment files with no record of their own are
 * left as they are, unlisted. A failure after the superblock was replaced
 * leaves the rebuilt store (a plain open reads it).
 *
 * On success *out is owned by the caller; close it with sb_store_close().
 * Returns: SB_OK; SB_ERR_INVAL (NULL argument, a zero budget, reserved0
 * nonzero or an unknown open_flags bit, a shared tier option that does
 * not hold -- a seed that is not host:port, shared_user without
 * shared_password, either without shared_seeds, shared_timeout_ms over
 * 60000: a message naming it goes to stderr --, compress_level over 22,
 * max_seq_tokens 0 or above 2^31 - 1, durability or write_mode not one of
 * their enum's values, a disk setting out of range: queue_depth 0 or over
 * 4096, segment_bytes under 64 KiB or not a multiple of 4096 or over 1 TiB,
 * sync_interval_ms 0, a nonzero disk_bytes under segment_bytes,
 * write_budget_bytes_per_hour under 1 MiB, backlog_bytes 0; dir not a
 * directory); SB_ERR_UNSUPPORTED (a big-endian host: the format is
 * little-endian); SB_ERR_NOMEM; SB_ERR_LOCKED (another process has the
 * directory open: a message naming its pid is written to stderr);
 * SB_ERR_VERSION (the store, or with SB_OPEN_SALVAGE one of its records,
 * was written by an unknown format version -- its checksum holds, so it is
 * not damage: the directory is left untouched); SB_ERR_FORMAT (a superblock
 * that is not a store's); SB_ERR_SUPERBLOCK (without SB_OPEN_SALVAGE: the
 * directory holds a store whose superblock cannot be used -- both slots
 * fail their checks, the file is truncated, zeroed or garbage, or it is
 * gone while segment files remain; nothing was changed); SB_ERR_IO,
 * SB_ERR_NOSPC (the directory could not be read or set up; during a
 * salvage, a read or write failed: the damaged superblock stays, unless the
 * rebuilt one was already in place, and a summary the salvage wrote for a
 * segment it read is a sound one; a retry salvages again). On failure *out
 * is NULL. */
SB_API int sb_store_open(const sb_config *cfg, sb_store **out);

/* sb_store_close -- close a store and free everything it holds.
 *
 * With a shared tier, pages still waiting to be published are dropped
 * (call sb_store_flush first to publish them); its connections close.
 *
 * With a disk tier it first writes everything queued (under write-back,
 * every dirty page first), and pages waiting in the priority pool as far
 * as the write budget allows now (the rest are denied, RAM-only state that
 * goes with the store, as any denial), seals the open segment with its
 * summary and syncs, so a reopen reads summaries only.
 *
 * Every namespace handle, match and page obtained from the store becomes
 * invalid, including pages a runtime still references: release them first.
 * Not thread-safe against other calls on the same store. The store is
 * closed and freed whatever the call returns.
 * Returns: SB_OK (also for NULL and a RAM-only store): everything the
 * close wrote is written and synced; SB_ERR_IO, SB_ERR_NOSPC: the first
 * error of the close's own writes, syncs, summary or superblock (what it
 * did not write is lost; what was durable before the close stays; errors
 * of earlier writes were reported by the flushes and tickets of their
 * time and are not repeated here); SB_ERR_NOMEM (write-back: no memory to
 * find every dirty page, some were not written). */
SB_API int sb_store_close(sb_store *st);

/* sb_store_flush -- wait until every page and point state committed before
 * the call is written to the disk tier and synced (durable, except in an
 * SB_WRITE_ONLY store: see "Write-only" below), and, with a
 * shared tier, every page offered to it is published (or dropped: the
 * cluster did not take it in time; the pool is a cache). Partial pages
 * waiting to be written late are written too, and under write-back every
 * dirty page; pages waiting in the priority pool are written as far as
 * the write budget allows now. SB_OK at once for a RAM-only store. For
 * one call's state, a ticket (sb_store_wait_durable) says more precisely.
 * Returns: SB_OK (everything written is synced); SB_ERR_IO (a write or a
 * sync failed since the store opened: those pages stay in RAM only, see
 * disk_write_errors; the rest is synced); SB_ERR_NOSPC (the tier's cap or
 * file system is full: it writes no more until room returns, see
 * disk_write_denials); SB_ERR_NOMEM (write-back: no memory to find every
 * dirty page; those found are written); SB_ERR_INVAL (NULL). Pages the
 * tier did not admit (write budget, backlog, short: disk_denials) stay
 * RAM-only and do not make it fail. */
SB_API int sb_store_flush(sb_store *st);

/* sb_store_foreground -- mark the start (busy nonzero) or the end (busy 0)
 * of a latency-critical phase, such as a runtime's prefill or decode. While
 * any is marked the disk tier's writer holds back new writes, up to
 * config.foreground_hold_ms at a time, with a round of writes between
 * waits; writes already in flight finish, and a flush, a durable commit or
 * a RAM budget that needs the writer is served at once. Marks nest (a
 * count); held time shows in disk_holdback_ns. A RAM-only store counts the
 * marks and does nothing else. Thread-safe.
 * Returns: SB_OK; SB_ERR_INVAL (NULL, or an end without a start). */
SB_API int sb_store_foreground(sb_store *st, int busy);

/* sb_store_fault_alloc -- test hook: make the nth allocation from now on
 * (1 = the next one) fail as if out of memory; 0 disarms. It fires once.
 * Returns: SB_OK; SB_ERR_INVAL when st is NULL. */
SB_API int sb_store_fault_alloc(sb_store *st, uint64_t nth);

/* Why a lookup restored fewer tokens than it asked for. Pinned values. */
typedef enum sb_miss {
    SB_MISS_NONE = 0,           /* the whole request is restorable */
    SB_MISS_NO_PREFIX = 1,      /* the bank never held the rest (new text, or a
                                   stored sequence diverges here) */
    SB_MISS_EVICTED = 2,        /* the bank held a continuation here and evicted
                                   it (best effort: remembered per page) */
    SB_MISS_MODEL_MISMATCH = 3, /* nothing restorable here, while the same scope
                                   under another model identity holds a
                                   prefix of the request */
    SB_MISS_NO_POINT = 4,       /* pages cover more, but the layout needs a
                                   point state and none is recorded further */
    SB_MISS_CORRUPT = 5,        /* a disk page failed its checksum */
    SB_MISS_IO = 6,             /* a disk page could not be read */
    SB_MISS__COUNT = 7
} sb_miss;

/* sb_miss_name -- a short name for an sb_miss value ("none", "no_prefix",
 * "evicted", "model_mismatch", "no_point", "corrupt", "io").
 * Returns: a static string, never NULL ("unknown" when out of range). */
SB_API const char *sb_miss_name(int miss);

/* Why the disk tier did not write a page or point state (it stays in RAM
 * only). Pinned values. */
typedef enum sb_deny {
    SB_DENY_BUDGET = 0,   /* the hourly write budget's bucket was empty */
    SB_DENY_BACKLOG = 1,  /* the queue held backlog_bytes already */
    SB_DENY_CAPACITY = 2, /* the tier's cap or file system is full, or the
                             record is larger than a segment */
    SB_DENY_PARENT = 3,   /* the page before it on its path was not written */
    SB_DENY_ERROR = 4,    /* an I/O error stopped the tier, or no memory */
    SB_DENY_SHORT = 5,    /* its sequence is shorter than min_prefix_tokens */
    SB_DENY__COUNT = 6
} sb_deny;

/* sb_deny_name -- "budget", "backlog", "capacity", "parent", "error",
 * "short".
 * Returns: a static string, never NULL ("unknown" when out of range). */
SB_API const char *sb_deny_name(int reason);

/* ============================================================================
 * Durability of one call
 * ============================================================================
 *
 * sb_ns_put_ex and sb_ns_commit_ex say what the call did for the disk tier
 * in an sb_write_outcome, and hand out a ticket that sb_store_is_durable
 * and sb_store_wait_durable answer for, so a caller can tie durability to
 * one call without reading stats (which other threads change meanwhile).
 *
 * A ticket stands for the state the call stored: the pages of the tokens
 * it left restorable (*n_stored for a put) and the point state it stored,
 * including pages earlier calls stored that are still being written. It
 * is durable once every one of them is written and synced by a store
 * that reads its disk tier (write-through or write-back): a crash (kill
 * -9, a power cut) and a reopen in such a mode then restore that state
 * whole. (Later decisions of the cache may still drop it: reclamation
 * under the disk cap, a record found damaged.) It is never durable when one
 * of them was denied (sb_deny: write budget, backlog, capacity, parent,
 * short) or its write failed: that state is in RAM only, and waiting on
 * the ticket says so at once (SB_ERR_NOT_DURABLE, not a timeout).
 *
 * Write-only. A store opened SB_WRITE_ONLY writes what it is given and
 * never reads it back; reopened the same way it starts empty. Its states
 * are therefore never durable: outcome durable 0 and write_only 1, and
 * the ticket answers SB_ERR_WRITE_ONLY (not SB_OK) once every block is
 * written and synced; before that SB_ERR_PENDING, and SB_ERR_NOT_DURABLE
 * when a block was denied or failed, as in the other modes. Why not call
 * it durable: durable is what a caller acts on ("I may let my copy go, a
 * restart gives it back"), and the store that handed out the ticket,
 * reopened as it is, gives nothing back; a warmer still learns, from the
 * distinct code, that a later open in a reading mode finds the state
 * whole (as a crash would leave it). Flush and close return SB_OK in
 * this mode as in the others: they promise "written and synced".
 *
 * Reclaimed. Durable is not for ever: the disk tier is a cache, and
 * reclamation under the disk cap (oldest segments first; "disk_bytes")
 * may later take records a durable state needs, as may a record found
 * damaged. The store keeps watching the blocks of its most recent
 * durable tickets -- the last 1024, fewer when their states hold more
 * than 2^18 blocks together -- and when reclamation takes one of those
 * blocks off the disk (left in RAM only, or dropped from the index with
 * what follows it; not when it is written again elsewhere) the ticket
 * answers SB_ERR_RECLAIMED from then on: a reopen would no longer
 * restore that state whole. (A block written again counts as kept from
 * the moment it is queued: a crash before that write is synced can still
 * lose it while the ticket answers SB_OK; if the write fails or is
 * denied, the ticket is reclaimed.) An older durable ticket keeps answering
 * SB_OK whatever becomes of its records (a match says what is left), as
 * does one whose record was found damaged or removed (sb_ns_remove); a
 * write-only store's tickets keep answering SB_ERR_WRITE_ONLY.
 *
 * When it turns durable:
 *   SB_DURABILITY_COMMIT    before the call returns (outcome.durable 1;
 *                           write-only: synced, durable 0, write_only 1),
 *                           unless a block was denied, failed, or waits in
 *                           the priority pool for the write budget (the
 *                           call does not wait for the pool: the ticket
 *                           turns durable when the pool writes it).
 *   SB_DURABILITY_PERIODIC  at the next sync (sync_bytes, sync_interval_ms);
 *   SB_DURABILITY_NONE      at a flush or close (or once 1024 tickets
 *                           wait: the oldest is then synced);
 *                           in both, a wait on the ticket asks the writer
 *                           for its writes and a sync at once.
 * Under SB_WRITE_BACK (without COMMIT) the pages are written when evicted
 * or flushed; waiting on the ticket queues them.
 *
 * Tickets belong to one open store and rise from 1. 0 is never durable:
 * a call that failed or stored nothing, and every call on a RAM-only
 * store, gets 0. The store remembers a failed ticket among its last 4096
 * runs of failed tickets (consecutive failures are one run), and a
 * reclaimed one among its last 4096 runs of reclaimed tickets; a ticket
 * older than the oldest remembered of either is answered SB_ERR_RANGE.
 */

/* What one put or commit did for the disk tier. "Blocks" are pages and
 * point states of the call's state (see above). */
typedef struct sb_write_outcome {
    uint64_t ticket;          /* for sb_store_wait_durable and
                                 sb_store_is_durable; 0: never durable */
    int durable;              /* 1: the state was written and synced when
                                 the call returned, by a store that reads
                                 its disk tier (never under SB_WRITE_ONLY:
                                 see write_only) */
    uint32_t pages_new;       /* pages the call added to the index */
    uint32_t points_new;      /* point states it added (0 or 1) */
    uint32_t queued;          /* blocks the call queued for the writer
                                 (written since, or still queued) */
    uint32_t written;         /* ...of them written and synced when it
                                 returned (under COMMIT all of them, unless
                                 a write failed) */
    uint32_t deferred;        /* blocks waiting in the priority pool for the
                                 write budget or the backlog */
    uint32_t dirty;           /* write-back without COMMIT: blocks to be
                                 written when evicted or flushed */
    uint32_t denied;          /* blocks that will not be written: the sum of
                                 denied_by */
    uint32_t denied_by[SB_DENY__COUNT]; /* ...by reason (sb_deny). Blocks an
                                 earlier call left unwritten count too, so
                                 this may exceed what the stats'
                                 disk_denials grew by */
    int write_only;           /* 1: the store is in SB_WRITE_ONLY mode, so
                                 the state is never durable (durable 0)
                                 whatever was written: written says what
                                 was synced for a later reading open, and
                                 the ticket answers SB_ERR_WRITE_ONLY once
                                 all of it is; 0 otherwise */
} sb_write_outcome;

#define SB_WAIT_FOREVER 0xFFFFFFFFu /* sb_store_wait_durable: no timeout */

/* sb_store_wait_durable -- wait until the state of ticket (an
 * sb_write_outcome's) is durable, for at most timeout_ms milliseconds of
 * real time (0: do not wait; SB_WAIT_FOREVER: no limit). While it waits
 * the writer is asked to write what the ticket needs now (partial pages,
 * under write-back its dirty pages) and to sync after; pages waiting in
 * the priority pool still wait for the write budget. Thread-safe.
 * Returns: SB_OK (durable); SB_ERR_PENDING (not yet when the time ran
 * out); SB_ERR_NOT_DURABLE (never: a write it needs was denied or failed,
 * or the ticket is 0, or the store has no disk tier); SB_ERR_WRITE_ONLY
 * (an SB_WRITE_ONLY store: written and synced, not durable -- see
 * "Write-only" above); SB_ERR_RECLAIMED (it was durable, and reclamation
 * under the disk cap has since taken records it needs -- see "Reclaimed"
 * above); SB_ERR_RANGE (a ticket this store never handed out, or one too
 * old to remember); SB_ERR_INVAL (NULL st). Answers move one way:
 * SB_ERR_PENDING to any other, and SB_OK to SB_ERR_RECLAIMED. Nothing is
 * changed but the writer's hurry. */
SB_API int sb_store_wait_durable(sb_store *st, uint64_t ticket, uint32_t timeout_ms);

/* sb_store_is_durable -- the state of ticket now: sb_store_wait_durable
 * with timeout 0. Returns: as sb_store_wait_durable. */
SB_API int sb_store_is_durable(sb_store *st, uint64_t ticket);

/* Counters and gauges of a store. Counters only grow; gauges are current. */
typedef struct sb_stats {
    /* lookups (sb_ns_match) */
    uint64_t lookups;            /* matches performed */
    uint64_t hits;               /* lookups that restored at least one token */
    uint64_t hits_ram;           /* ...with every page in RAM */
    uint64_t hits_disk;          /* ...with at least one page from disk */
    uint64_t hit_tokens;         /* tokens restorable, summed over lookups */
    uint64_t miss_tokens;        /* tokens asked for and not restorable */
    uint64_t misses[SB_MISS__COUNT];      /* lookups restoring nothing, by reason
                                             (misses[SB_MISS_NONE] stays 0) */
    uint64_t miss_tokens_by_reason[SB_MISS__COUNT]; /* miss_tokens by the
                                             reason the match stopped */
    /* writes */
    uint64_t puts;               /* sb_ns_put calls that succeeded (fully or not) */
    uint64_t commits;            /* sb_ns_commit calls that succeeded */
    uint64_t pages_new;          /* pages added to the index */
    uint64_t pages_dedup;        /* pages not added: the index held them already */
    uint64_t pages_superseded;   /* partial pages replaced by a longer page */
    uint64_t cow_copies;         /* sb_page_writable copies */
    uint64_t budget_denials;     /* allocations refused with SB_ERR_BUDGET */
    /* RAM tier, gauges */
    uint64_t ram_bytes;          /* bytes of pages and point states allocated
                                    (the pool's spares not included) */
    uint64_t ram_pages;          /* pages allocated (indexed or held; spares
                                    not included) */
    uint64_t ram_bytes_limit;    /* config ram_bytes */
    uint64_t ram_pages_limit;    /* config ram_pages */
    uint64_t indexed_pages;      /* pages the index holds */
    uint64_t indexed_bytes;      /* their bytes */
    uint64_t pinned_pages;       /* indexed pages also held by a match, pin or runtime */
    uint64_t points;             /* point states the index holds */
    uint64_t point_bytes;        /* their bytes */
    uint64_t pins;               /* live TTL pins */
    uint64_t namespaces;         /* namespaces the store holds */
    uint64_t pool_resident_bytes;/* bytes of the page pool's slots, in use or
                                    spare (all faulted in) */
    /* RAM tier, counters */
    uint64_t evictions;          /* pages evicted */
    uint64_t evicted_bytes;      /* their bytes */
    uint64_t point_evictions;    /* point states evicted */
    /* index */
    uint64_t index_bytes;        /* bytes of radix nodes, token and page arrays */
    uint64_t index_tokens;       /* tokens the index holds (sum of edge lengths) */
    uint64_t index_nodes;        /* radix nodes */
    double index_bytes_per_token;/* index_bytes / index_tokens (0 when empty) */
    /* disk tier (zero while RAM only) */
    uint64_t disk_bytes;         /* bytes of live records */
    uint64_t disk_bytes_limit;   /* the cap in effect */
    uint64_t disk_pages;         /* page records indexed on disk */
    uint64_t disk_write_bytes;   /* every byte written to the device */
    uint64_t disk_read_bytes;    /* bytes read back */
    uint64_t disk_write_denials; /* pages and points not written (all reasons) */
    uint64_t disk_denials[SB_DENY__COUNT]; /* ...by reason (sb_deny) */
    uint64_t disk_denied_bytes[SB_DENY__COUNT]; /* their bytes (page or point
                                    state size), by reason */
    uint64_t disk_budget_bytes;  /* gauge: the write budget's bucket, bytes
                                    (what may be written now at most) */
    /* write amplification: disk_write_bytes = disk_logical_bytes +
     * disk_head_bytes + disk_padding_bytes + disk_summary_bytes +
     * disk_superblock_bytes + disk_ns_record_bytes + disk_reinsert_bytes +
     * disk_tombstone_bytes (removal, at the end) -
     * disk_compress_saved_bytes (below; 0 without compression) */
    uint64_t disk_logical_bytes; /* state written: token slices of pages, point
                                    states (the "new page bytes") */
    uint64_t disk_head_bytes;    /* record heads (fixed part and token IDs) */
    uint64_t disk_padding_bytes; /* alignment: heads and payloads to 4 KiB,
                                    the unused slices of partial pages */
    uint64_t disk_summary_bytes; /* segment summaries */
    uint64_t disk_superblock_bytes; /* superblock slots */
    uint64_t disk_ns_record_bytes;  /* namespace records (one per segment and
                                    namespace) */
    uint64_t disk_reinsert_bytes;/* records written again by reclamation
                                    (whole records: heads and padding too) */
    double disk_write_amplification; /* disk_write_bytes / disk_logical_bytes
                                    (0 before anything is written) */
    /* ...and over the store's whole life, earlier opens included (kept in
     * the superblock; up to its last write before a crash) */
    uint64_t disk_life_write_bytes;   /* device bytes */
    uint64_t disk_life_logical_bytes; /* state bytes */
    uint64_t disk_life_reinsert_bytes;/* written again by reclamation */
    uint64_t disk_checksum_failures; /* records that failed their checksum */
    uint64_t durable_seq;        /* every record written with a sequence number up
                                    to this one survives a crash */
    uint64_t disk_write_errors;  /* writes that failed (the blocks stay RAM-only) */
    uint64_t disk_read_errors;   /* reads that failed */
    uint64_t disk_segments;      /* segment files (open and sealed) */
    uint64_t disk_queued_bytes;  /* bytes queued for the writer or in flight */
    uint64_t disk_queued_peak_bytes; /* the most that ever were (at most
                                    backlog_bytes: a larger put streams) */
    uint64_t disk_holdback_ns;   /* time the writer held back for foreground
                                    phases (sb_store_foreground) */
    uint64_t disk_holdbacks;     /* ...the number of waits */
    uint64_t disk_reclaimed_segments; /* segments reclaimed to make room */
    uint64_t disk_reclaim_kept;  /* pages and point states they held that were
                                    pinned or hit: written again */
    uint64_t disk_reclaim_ram_only; /* ...not kept on disk but resident: they
                                    stay indexed, in RAM only (dirty again),
                                    until the RAM tier evicts them */
    uint64_t disk_reclaim_dropped; /* ...dropped from the index (with every
                                    page and point state after them) */
    uint64_t disk_nospc;         /* times the file system refused a segment
                                    (ENOSPC, or free space under the floor) */
    uint64_t disk_deferred;      /* pages and point states that waited in the
                                    priority pool for the budget or the
                                    backlog (not denials: those that leave
                                    it unwritten are) */
    uint64_t disk_pool_written;  /* ...and were queued from it */
    uint64_t disk_pool_blocks;   /* gauge: waiting in it now */
    /* compression (config compress_level) */
    uint64_t disk_compressed_records; /* records stored compressed */
    uint64_t disk_compress_skipped;  /* records tried and stored as they were
                                    (saving under an eighth) */
    uint64_t disk_compress_raw_bytes; /* payload bytes of the compressed
                                    records before compression */
    uint64_t disk_compress_stored_bytes; /* ...and after (the ratio is
                                    raw / stored) */
    uint64_t disk_compress_saved_bytes; /* state and head bytes the compressed
                                    records did not write (the term the
                                    write-amplification identity subtracts) */
    /* disk tier: what sb_store_open found in the directory */
    uint64_t recovered_records;  /* valid records */
    uint64_t recovered_pages;    /* pages put back in the index */
    uint64_t recovered_points;   /* point states put back */
    uint64_t recovered_namespaces; /* namespaces put back */
    uint64_t recovery_orphans;   /* page and point records dropped: the pages
                                    before them were missing or damaged */
    uint64_t recovery_bad_summaries; /* summaries that failed their checks (the
                                    segment was scanned instead) */
    uint64_t recovery_torn;      /* segments whose records ended in damaged
                                    bytes, or whose file was missing or short */
    uint64_t recovery_unlisted;  /* segment files the superblock did not list
                                    (an older slot or a stale superblock was
                                    all there was): scanned and adopted */
    uint64_t recovery_ns;        /* time open spent recovering, nanoseconds */
    /* disk tier: a superblock rebuilt by this open (SB_OPEN_SALVAGE) */
    uint64_t salvaged;           /* 1 when this open rebuilt the superblock from
                                    the segment files, else 0 (the fields
                                    below are 0 then) */
    uint64_t salvaged_segments;  /* segment files adopted as segments */
    uint64_t salvage_scanned_segments; /* ...of which read record by record
                                    (no sound summary) and sealed anew */
    uint64_t salvage_skipped_files; /* segment files with no record of their
                                    own (or gone since listed): left as they
                                    were, unlisted */
    uint64_t salvage_dropped_records; /* what the reads found and did not keep:
                                    runs of damaged blocks, records whose
                                    payload fails its hash, records of an
                                    older life of their file */
    uint64_t salvage_dropped_bytes; /* the segment bytes they span */
    /* the page pool: freed page and point-state buffers are kept, faulted
     * in, as spares for the next block of their size. Spares count against
     * ram_bytes_limit and ram_pages_limit beside ram_bytes and ram_pages,
     * and are given back to the system before anything is evicted. */
    uint64_t pool_spare_bytes;   /* gauge: what the spares count (their blocks'
                                    bytes) */
    uint64_t pool_spare_pages;   /* gauge: spare page buffers */
    uint64_t pool_chunks;        /* gauge: chunks mapped (each 2 MiB aligned,
                                    huge-page advised, populated at once) */
    uint64_t pool_grown_bytes;   /* bytes of slots mapped and populated so far */
    uint64_t pool_trimmed_bytes; /* spare bytes given back to make room */
    /* the disk tier's data path */
    uint64_t disk_read_ios;      /* read requests of restores (one covers
                                    several adjacent records) */
    uint64_t disk_write_ios;     /* write requests of the writer */
    /* the shared tier (zero without one) */
    uint64_t shared_offered;     /* full pages offered for publishing */
    uint64_t shared_published;   /* ...written to the pool by this store */
    uint64_t shared_published_bytes; /* the bytes of their values */
    uint64_t shared_dedup;       /* ...found in the pool already (one probe,
                                    no upload) */
    uint64_t shared_denied;      /* offers refused: the publish queue was
                                    full (the page waits: shared_requeued) */
    uint64_t shared_publish_failed; /* pages the cluster did not take */
    uint64_t shared_probes;      /* pipelined EXISTS batches (fetches' probes) */
    uint64_t shared_probe_hits;  /* pages the probes found */
    uint64_t shared_fetched_pages; /* pages fetched, checked and indexed */
    uint64_t shared_fetched_bytes; /* their bytes */
    uint64_t shared_bad_values;  /* values refused by the checks (counted
                                    misses, never served) */
    uint64_t shared_down;        /* operations no node answered in time */
    uint64_t shared_fetch_ns;    /* time spent fetching, nanoseconds */
    uint64_t shared_queued_bytes;/* gauge: page bytes waiting to publish */
    /* removal (sb_ns_remove) */
    uint64_t removes;            /* sb_ns_remove calls that took their
                                    prefix out of the index (SB_OK, and
                                    SB_ERR_IO / SB_ERR_NOSPC: not durable) */
    uint64_t removed_pages;      /* pages they took out of the index */
    uint64_t removed_points;     /* point states they took out */
    uint64_t disk_tombstones;    /* tombstone records written: one per call
                                    with a disk tier, and reclamation's
                                    copies of those still needed */
    uint64_t disk_tombstone_bytes; /* their bytes (a term of the
                                    write-amplification identity) */
    uint64_t disk_tombstones_live; /* gauge: tombstones the disk tier keeps,
                                    because records they remove may still
                                    be in its segments */
    uint64_t recovered_tombstones; /* tombstone records sb_store_open found */
    uint64_t recovery_removed;   /* page and point records it dropped
                                    because a tombstone removed them (not
                                    orphans: those are counted there) */
    uint64_t shared_forgotten;   /* keys of removed pages deleted from the
                                    shared pool (the DEL found the key) */
    uint64_t shared_forget_failed; /* ...DELs no node answered in time (the
                                    key may stay until its TTL) */
    /* the shared tier's failures by reason (enum sb_shared_fault,
     * snapbank_shared.h): keys a probe, fetch, publish or delete failed */
    uint64_t shared_err_auth;    /* WRONGPASS / NOAUTH */
    uint64_t shared_err_noperm;  /* NOPERM: the ACL lacks a command or key */
    uint64_t shared_err_wrongtype; /* WRONGTYPE: a key of another type */
    uint64_t shared_err_refused; /* any other error reply */
    uint64_t shared_err_timeout; /* a node silent past the stall bound */
    uint64_t shared_err_connect; /* connection refused, reset or closed */
    uint64_t shared_err_clusterdown; /* CLUSTERDOWN, TRYAGAIN, no master */
    uint64_t shared_err_deadline; /* a fetch's budget ran out (recomputing
                                    the rest was estimated faster) */
    uint64_t shared_replaced;    /* values that failed their checks which
                                    this store's publisher replaced with
                                    its recomputed page */
    uint64_t shared_forged;      /* of shared_bad_values: with a secret,
                                    values whose seal did not open (no tag
                                    or a wrong one: forged, or another
                                    deployment's) */
    uint64_t shared_requeued;    /* denied pages offered again once the
                                    queue had room (still in RAM then) */
} sb_stats;

/* sb_store_stats -- snapshot the store's counters into *out.
 * Returns: SB_OK; SB_ERR_INVAL (NULL argument). */
SB_API int sb_store_stats(sb_store *st, sb_stats *out);

/* sb_store_check -- verify every internal invariant of the index and the
 * RAM tier: tree shape, page coverage, refcounts, eviction heaps, budgets and
 * accounting. Meant for tests and fuzzers; it walks everything.
 * Returns: SB_OK; SB_ERR_CORRUPT (a message naming the broken invariant is
 * written to stderr); SB_ERR_INVAL (NULL); SB_ERR_NOMEM (no memory for
 * the walk). */
SB_API int sb_store_check(sb_store *st);

/* ============================================================================
 * Namespaces
 * ========================================================================== */

typedef struct sb_ns sb_ns;

#define SB_MODEL_ID_MAX 1024u   /* longest model identity, bytes */
#define SB_SCOPE_MAX 1024u      /* longest scope, bytes */
#define SB_TENSORS_MAX 4096u    /* most sequence tensors in a layout */
#define SB_PAGE_TOKENS_MAX 65536u
#define SB_PAGE_BYTES_MAX (256u << 20) /* largest page */
#define SB_POINT_BYTES_MAX (1u << 30)  /* largest point state */

/* sb_layout.flags */
#define SB_LAYOUT_POINT_REQUIRED 1u /* a restore to length L needs a point state
                                       recorded at exactly L (recurrent layers) */
#define SB_LAYOUT_ELEM16 2u         /* page state is 2-byte values (F16, BF16):
                                       compression shuffles their bytes so
                                       the exponent bytes sit together; needs
                                       even bytes per token. A hint, not
                                       part of the identity: a namespace
                                       keeps the one it was first opened or
                                       recovered with */

/* What one token's state is, and how it is paged. */
typedef struct sb_layout {
    const void *model_id;     /* identity bytes: a digest of the model and of
                                 every setting that changes the state bytes */
    size_t model_id_bytes;    /* 1 .. SB_MODEL_ID_MAX */
    uint32_t page_tokens;     /* tokens per page, 1 .. SB_PAGE_TOKENS_MAX */
    uint32_t n_tensors;       /* sequence tensors, 1 .. SB_TENSORS_MAX */
    const uint32_t *bytes_per_token; /* (n_tensors): each >= 1 */
    uint32_t point_bytes;     /* size of a point state; 0: none */
    uint32_t flags;           /* SB_LAYOUT_* */
} sb_layout;

/* sb_ns_open -- open the namespace of (layout->model_id, scope), creating it
 * when the store has none.
 *
 * The same model identity and scope always open the same namespace; a
 * different identity or scope shares nothing with it. scope may be NULL when
 * scope_bytes is 0 (the empty scope). Several handles may be open on one
 * namespace; its pages outlive the handles (they belong to the store).
 * layout and scope are read during the call only.
 *
 * On success *out is owned by the caller: close it with sb_ns_close(); on
 * failure *out is NULL (when out is not NULL).
 * Returns: SB_OK; SB_ERR_INVAL (NULL argument, scope too long);
 * SB_ERR_LAYOUT (no model identity or one too long, no tensors or too many,
 * a tensor of 0 bytes per token, unknown flags, SB_LAYOUT_POINT_REQUIRED
 * without point_bytes, SB_LAYOUT_ELEM16 with an odd bytes per token,
 * point_bytes over SB_POINT_BYTES_MAX);
 * SB_ERR_PAGE_SIZE (page_tokens 0 or over SB_PAGE_TOKENS_MAX, or a page over
 * SB_PAGE_BYTES_MAX); SB_ERR_LAYOUT_MISMATCH (this identity and scope exist
 * with different page_tokens, tensors, point size or SB_LAYOUT_POINT_REQUIRED;
 * SB_LAYOUT_ELEM16 is a hint, not part of the identity: a handle opened
 * with or without it gets the namespace as it is, and sb_ns_get_info's
 * flags say which the namespace keeps); SB_ERR_NOMEM. */
SB_API int sb_ns_open(sb_store *st, const sb_layout *layout,
                      const void *scope, size_t scope_bytes, sb_ns **out);

/* sb_ns_close -- close a namespace handle. The namespace and its pages stay
 * in the store. NULL is a no-op. */
SB_API void sb_ns_close(sb_ns *ns);

/* What a namespace is, as the bank computed it from its layout. */
typedef struct sb_ns_info {
    uint64_t ns_id;           /* 64-bit id of (identity, scope), as written on disk */
    uint32_t page_tokens;
    uint32_t n_tensors;
    size_t page_bytes;        /* bytes of one page, a multiple of 4096 */
    size_t point_bytes;       /* 0 when the layout has no point state */
    uint32_t flags;           /* the layout's flags */
    uint64_t ram_bytes;       /* bytes this namespace holds now */
    uint64_t indexed_pages;   /* pages its index holds */
    uint64_t index_tokens;    /* tokens its index holds */
} sb_ns_info;

/* sb_ns_get_info -- describe a namespace.
 * Returns: SB_OK; SB_ERR_INVAL (NULL argument). */
SB_API int sb_ns_get_info(sb_ns *ns, sb_ns_info *out);

/* sb_ns_store -- the store a namespace handle belongs to (borrowed).
 * Returns: the store; NULL for NULL. */
SB_API sb_store *sb_ns_store(const sb_ns *ns);

/* sb_ns_tensor_offset -- byte offset of sequence tensor t inside a page of
 * this namespace (see "Page layout" in snapbank.h).
 * Returns: the offset; (size_t)-1 when ns is NULL or t >= n_tensors. */
SB_API size_t sb_ns_tensor_offset(const sb_ns *ns, uint32_t t);

#ifdef __cplusplus
}
#endif

#endif /* SNAPBANK_STORE_H */
