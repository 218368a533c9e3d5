/* snapbank.h -- public API of libsnapbank, a key-value store for LLM tensor
 * snapshots keyed by token-ID prefixes.
 *
 * This header is the manual.
 *
 * ============================================================================
 * Introduction
 * ============================================================================
 *
 * An inference engine computes, for every prompt token, per-layer state (the
 * K and V rows of the KV cache, and for hybrid models a recurrent state).
 * snapbank keeps that state keyed by the token IDs that produced it, so the
 * next request that starts with a token sequence the bank has seen can
 * restore the state of that prefix instead of recomputing it.
 *
 *   store      sb_store: one bank. A RAM tier of pages under byte and page
 *              budgets; a disk tier below it when a directory is configured.
 *   namespace  sb_ns: one model identity (a digest of everything that
 *              changes the state bytes) plus one scope (tenant or session).
 *              Nothing is ever shared between two namespaces.
 *   layout     sb_layout: what one token's state is. A list of sequence
 *              tensors, each with a size in bytes per token, and optionally
 *              a point state (recurrent state, last logits) that belongs to
 *              one position and cannot be sliced.
 *   page       sb_page: the state of up to page_tokens consecutive tokens,
 *              one 4 KiB-aligned block holding a slice of every sequence
 *              tensor. Pages are refcounted; a page the bank indexes is
 *              immutable.
 *   match      sb_match: the longest restorable prefix of a request, with
 *              every page it needs pinned until sb_match_release.
 *
 * Two ways to move bytes:
 *
 *   copy mode       sb_ns_put() copies the state of tokens [0, n) from caller
 *                   buffers; sb_match_restore() copies a matched prefix back.
 *   zero-copy mode  a runtime allocates pages from the bank (sb_ns_page_alloc),
 *                   keeps its KV cache in them, commits a token sequence with
 *                   its pages by reference (sb_ns_commit), and maps matched
 *                   pages straight into its page table (sb_match_pages).
 *
 * Page layout. A page of a namespace whose layout has tensors t = 0..T-1 with
 * bpt[t] bytes per token is page_bytes long:
 *
 *     offset 0                   tensor_off[1]              tensor_off[T-1]
 *     +--------------------------+--------------------------+-- ... --+------+
 *     | tensor 0: page_tokens    | tensor 1: page_tokens    |         | zero |
 *     | slices of bpt[0] bytes   | slices of bpt[1] bytes   |         | pad  |
 *     +--------------------------+--------------------------+-- ... --+------+
 *
 * tensor_off[t] = sum over u < t of round_up(page_tokens * bpt[u], 64), and
 * page_bytes is the total rounded up to 4096. Token j of the page (j counted
 * from the page's first token) of tensor t is at tensor_off[t] + j * bpt[t].
 * Page i of a sequence holds tokens [i * page_tokens, (i + 1) * page_tokens);
 * the last page of a sequence may be partial.
 *
 * A short example (copy mode, error handling trimmed):
 *
 *     sb_config cfg;
 *     sb_config_default(&cfg);
 *     cfg.ram_bytes = 1ull << 30;
 *     sb_store *st;
 *     sb_store_open(&cfg, &st);
 *
 *     uint32_t bpt[2] = { 4096, 4096 };          // K and V, bytes per token
 *     sb_layout lay = { .model_id = digest, .model_id_bytes = 32,
 *                       .page_tokens = 16, .n_tensors = 2,
 *                       .bytes_per_token = bpt };
 *     sb_ns *ns;
 *     sb_ns_open(st, &lay, "tenant-a", 8, &ns);
 *     sb_ns_prefault(ns, 4096, NULL);            // buffers faulted in now, not
 *                                                // by the first puts
 *
 *     const void *src[2] = { k_rows, v_rows };   // n * 4096 bytes each
 *     size_t stored;
 *     sb_ns_put(ns, tokens, n, src, NULL, &stored);
 *
 *     sb_match *m;
 *     sb_ns_match(ns, prompt, n_prompt, &m);
 *     sb_match_info info;
 *     sb_match_get_info(m, &info);               // info.n_tokens restorable
 *     void *dst[2] = { k_out, v_out };
 *     sb_match_restore(m, info.n_tokens, dst, NULL);
 *     sb_match_release(m);
 *
 *     sb_ns_close(ns);
 *     sb_store_close(st);
 *
 * With a disk tier (cfg.dir), sequences shorter than cfg.min_prefix_tokens
 * (default 512) stay in RAM only (their write outcome says SB_DENY_SHORT):
 * set it to 1 to keep every sequence across a restart.
 *
 * ============================================================================
 * Conventions
 * ============================================================================
 *
 * Errors. Every call that can fail returns int: 0 (SB_OK) on success or a
 * negative value of enum sb_err. errno is never the interface.
 * sb_strerror() names each code. A negative code means the call failed;
 * each call's Returns lists every code it can return and what is true
 * after each, and unless it says otherwise a call that fails has changed
 * nothing. What a call did that is not a failure is a result, not a code:
 * a put or commit whose state the disk tier did not write (denied, or a
 * write error) returns SB_OK, its state in RAM, and says so in its
 * sb_write_outcome (sb_ns_put_ex, sb_ns_commit_ex). Two codes report part
 * of a call done, each stating exactly what: SB_ERR_BUDGET from a put (a
 * prefix stored), SB_ERR_CORRUPT and SB_ERR_IO from a restore (the match
 * shrank to what could be read).
 *
 * Ownership. "Owned by the caller" means the caller frees it with the named
 * function. "Borrowed until X" means valid until X is called. sb_*_close(NULL),
 * sb_*_release(NULL) and sb_page_unref(NULL) are no-ops.
 *
 * Thread safety. A store and every handle derived from it may be used from
 * several threads at once: put, commit, match, restore, pin and stats may run
 * concurrently on the same or different namespaces. Index and budget state
 * is guarded by one mutex per store, held only for index work (walking and
 * linking the radix tree, refcounts, eviction); the bulk byte copies of
 * put, restore and copy-on-write run outside it. The one exception is
 * sb_store_close, which must not race with any other call on that store.
 * A page returned by sb_ns_page_alloc is private to the caller until it is
 * committed; writing it from several threads is the caller's business.
 *
 * Budgets. Every page and point state allocated from the bank's pool counts
 * against the store's RAM budgets (ram_bytes, ram_pages) and its namespace's
 * budget (ns_ram_bytes) for as long as anyone holds it: the index, a match,
 * a pin or a runtime. When an allocation would exceed a budget the bank
 * evicts unpinned pages, least recently used first and leaves of the radix
 * tree first, so what stays restorable is always prefix-closed; a page held
 * by anyone but the index is never evicted. When evicting every page held by
 * the index alone still would not make room, the allocation fails with
 * SB_ERR_BUDGET before evicting anything. (A caller that holds a deep page
 * but releases the pages before it -- matches and pins never do -- can make
 * pages evictable by count that the tree order still protects; then a
 * refusal may come after some evictions.)
 */
#ifndef SNAPBANK_H
#define SNAPBANK_H

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
                             in a mode that reads them */
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
                                     system's free space, at open */
    uint64_t segment_bytes;       /* segment file size; default 256 MiB */
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
     * it shares ("Shared tier" below). Strings are borrowed during
     * sb_store_open only (the store keeps copies). */
    const char *shared_seeds;     /* "host:port[,host:port...]": nodes of the
                                     cluster to ask for its slot map first;
                                     NULL or "": no shared tier */
    const char *shared_user;      /* ACL user for AUTH; NULL: password only
                                     (needs shared_password) */
    const char *shared_password;  /* AUTH password; NULL: no AUTH. Read it
                                     from a file, never a command line */
    uint32_t shared_timeout_ms;   /* bound on one probe or fetch (the
                                     publisher waits five times this);
                                     0: 200, at most 60000 */
    uint32_t shared_ttl_s;        /* expiry of each published page; 0: none
                                     (the server's eviction policy bounds
                                     the pool) */
    uint64_t shared_publish_bytes_per_s; /* the publisher's budget, page bytes
                                     per second; 0: 64 MiB/s */

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
 * tier" below): it connects to the cluster and starts a publisher thread.
 * A cluster that does not answer yet is not an error (fetches fail with
 * SB_ERR_IO until it does; the tier reconnects by itself).
 *
 * With cfg->dir set the store has a disk tier in that directory (created
 * 0700 when absent; its files are 0600). A directory that holds a store is
 * recovered: every valid record is indexed again (as a disk page, read back
 * on restore) and what was found and dropped shows in sb_store_stats
 * (recovered_*, recovery_*). One process at a time may open a directory.
 * On a fresh directory segment_bytes sets the segment size for good; an
 * existing store keeps the one it was made with.
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
 * the call is written to the disk tier and synced (durable), and, with a
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
 * is durable once every one of them is written and synced: a crash (kill
 * -9, a power cut) and a reopen in a mode that reads the disk tier (not
 * SB_WRITE_ONLY) then restore that state whole. (Later
 * decisions of the cache may still drop it: reclamation under the disk
 * cap, a record found damaged.) It is never durable when one
 * of them was denied (sb_deny: write budget, backlog, capacity, parent,
 * short) or its write failed: that state is in RAM only, and waiting on
 * the ticket says so at once (SB_ERR_NOT_DURABLE, not a timeout).
 *
 * When it turns durable:
 *   SB_DURABILITY_COMMIT    before the call returns (outcome.durable 1),
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
 * runs of failed tickets (consecutive failures are one run); a ticket
 * older than the oldest remembered is answered SB_ERR_RANGE.
 */

/* What one put or commit did for the disk tier. "Blocks" are pages and
 * point states of the call's state (see above). */
typedef struct sb_write_outcome {
    uint64_t ticket;          /* for sb_store_wait_durable and
                                 sb_store_is_durable; 0: never durable */
    int durable;              /* 1: the state was written and synced when
                                 the call returned */
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
 * or the ticket is 0, or the store has no disk tier); SB_ERR_RANGE (a
 * ticket this store never handed out, or one too old to remember);
 * SB_ERR_INVAL (NULL st). Nothing is changed but the writer's hurry. */
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
    uint64_t shared_denied;      /* offers refused: the publish queue was full */
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
 * this namespace (see "Page layout" above).
 * Returns: the offset; (size_t)-1 when ns is NULL or t >= n_tensors. */
SB_API size_t sb_ns_tensor_offset(const sb_ns *ns, uint32_t t);

/* ============================================================================
 * Copy mode
 * ========================================================================== */

/* Where one tensor's token slices are in an engine's own memory, for the
 * scatter/gather transfers (sb_match_restore_blocks, sb_ns_put_blocks).
 * Position p of the sequence (its p-th token, p >= first_pos; q = p -
 * first_pos) lives at
 *
 *     base + block_ids[q / block_tokens] * block_stride
 *          + (q % block_tokens) * token_stride
 *
 * (block_ids NULL: block i is block_ids[i] = i), bytes_per_token[t]
 * contiguous bytes there. So a paged pool is one table per tensor: vLLM's
 * block table (block_tokens the block size, block_stride the bytes of a
 * block in that layer's K or V cache, token_stride one token's row);
 * SGLang's host indices or llama.cpp's cells (block_tokens 1, block_ids
 * the slot of each position, block_stride one row). block_tokens 0 is one
 * contiguous buffer: position p at base + q * token_stride. token_stride 0
 * means bytes_per_token[t] (rows packed). A layout where one token's slice
 * is not contiguous (heads outermost within a block, llama.cpp's
 * transposed V) is a table per head: declare each head a tensor of the
 * namespace. The memory is the caller's; a put only reads it. */
typedef struct sb_block_table {
    void *base;                 /* the pool (or buffer) of this tensor */
    const uint32_t *block_ids;  /* block of each run of block_tokens
                                   positions, from first_pos; NULL: 0, 1, ... */
    uint64_t first_pos;         /* the position the table starts at */
    uint32_t block_tokens;      /* positions per block; 0: one buffer */
    size_t block_stride;        /* bytes between block i and block i + 1 */
    size_t token_stride;        /* bytes between positions in a block; 0:
                                   bytes_per_token */
} sb_block_table;

/* sb_ns_put_ex -- store the state of tokens[0, n_tokens) from caller
 * buffers, and say what became of it on the disk tier.
 *
 * tensors[t] points at n_tokens * bytes_per_token[t] bytes: the slice of
 * token i of tensor t at tensors[t] + i * bytes_per_token[t]. point, when
 * not NULL, is the point state at position n_tokens (point_bytes long); it is
 * an error to pass one for a layout without point states. Pages the index
 * already holds for a prefix of tokens are kept, not copied again. All
 * buffers are read during the call only.
 *
 * When the RAM budgets cannot hold every new page (everything else is pinned),
 * the longest prefix whose pages fit is stored. *n_stored (when not NULL)
 * receives, on SB_OK and SB_ERR_BUDGET, the length of the prefix of tokens
 * that is restorable from the index when the call returns, point-state
 * requirements aside (n_tokens on SB_OK); 0 on other errors.
 *
 * With a disk tier the new pages (and the point) are offered to it as the
 * write mode says; under SB_DURABILITY_COMMIT the call waits until they
 * are written and synced. What the tier does not write stays in RAM: that
 * is an outcome, not an error. *out (when not NULL) receives, on SB_OK and
 * SB_ERR_BUDGET, the outcome for the state of the *n_stored tokens (and
 * the point when it was stored; ticket 0 when *n_stored is 0); zeroes on
 * other errors. Thread-safe.
 *
 * Returns: SB_OK (everything restorable, the point stored; on disk or not,
 * as *out says); SB_ERR_BUDGET (the budgets could not hold every new page
 * or the point state: *n_stored tokens are restorable -- fewer than
 * n_tokens, or all of them when only the point was refused -- and the
 * point, if any, was not stored; nothing else changed); SB_ERR_INVAL
 * (NULL ns, tokens or tensors, a NULL tensor pointer, a point for a layout
 * without points); SB_ERR_NO_TOKENS; SB_ERR_TOO_MANY_TOKENS; SB_ERR_NOMEM
 * (nothing stored, except that a put larger than the disk tier's backlog,
 * which streams out a chunk at a time, keeps the chunks it committed
 * before: *n_stored is 0 all the same, and a match finds them). Write and
 * sync failures of the disk tier are never returned: they show in *out
 * (denied, SB_DENY_ERROR) and in the ticket. */
SB_API int sb_ns_put_ex(sb_ns *ns, const uint32_t *tokens, size_t n_tokens,
                        const void *const *tensors, const void *point,
                        size_t *n_stored, sb_write_outcome *out);

/* sb_ns_put -- sb_ns_put_ex without the outcome (out NULL): the same
 * effects and the same returns. SB_OK does not say the state reached the
 * disk tier: ask sb_ns_put_ex for that. */
SB_API int sb_ns_put(sb_ns *ns, const uint32_t *tokens, size_t n_tokens,
                     const void *const *tensors, const void *point,
                     size_t *n_stored);

/* sb_ns_put_blocks -- sb_ns_put_ex from the engine's own memory: src has
 * one table per tensor (see sb_block_table), and names only positions
 * [from, n_tokens). The index must already hold tokens[0, from) (a
 * previous put or commit of this prefix: a chat's earlier turns); their
 * pages are kept, and when from falls inside a page the bank's page gives
 * the positions before it (read from disk if it is there only). So a turn
 * that grew the sequence puts only its new tokens, gathered from the
 * engine's block table with one copy and no staging buffer. Pages, point,
 * budgets, durability, *n_stored and *out as sb_ns_put_ex.
 * Returns: as sb_ns_put_ex, and SB_ERR_RANGE (from > n_tokens, a table
 * whose first_pos is after from, or the index holds fewer than from tokens
 * of the sequence: nothing stored, *n_stored receives how many it holds, so
 * a caller can put again from there); SB_ERR_INVAL also for a NULL src or
 * base or a token_stride below the tensor's bytes per token;
 * SB_ERR_CORRUPT, SB_ERR_IO (the page holding the positions before from
 * failed to read: it left the index; nothing stored, *n_stored 0);
 * SB_ERR_BUDGET also when there was no RAM to read that page (nothing
 * stored, *n_stored 0). */
SB_API int sb_ns_put_blocks(sb_ns *ns, const uint32_t *tokens, size_t n_tokens, size_t from,
                            const sb_block_table *src, const void *point, size_t *n_stored,
                            sb_write_outcome *out);

/* A layered put: sb_ns_put_blocks with its tensors given over several calls,
 * as an engine saves each layer's KV when that layer finishes (vLLM's
 * save_kv_layer, then wait_for_save):
 *
 *     sb_put *p;
 *     sb_ns_put_begin(ns, tokens, n, from, &p);     // pages taken
 *     for (each layer l as it finishes)             // its K and V tables
 *         sb_put_tensors(p, 2 * l, 2, &tables[2 * l]);
 *     sb_put_finish(p, NULL, &n_stored, &outcome);  // indexed; p freed
 *
 * Each call gathers its tensors straight into the bank's pages (one copy,
 * no staging buffer); nothing is visible to a match until sb_put_finish,
 * which indexes the pages exactly as sb_ns_put_blocks would with the same
 * tables, and its bytes are the same. Owned by the caller from
 * sb_ns_put_begin until sb_put_finish or sb_put_abort, which free it;
 * one put is used by one thread at a time, and several puts, on one
 * namespace or several, may be in flight from different threads. A put
 * keeps its namespace: sb_ns_close may come before its end. Finish or
 * abort every put before sb_store_close. */
typedef struct sb_put sb_put;

/* sb_ns_put_begin -- start a layered put of the state of
 * tokens[0, n_tokens), of which the engine gives positions [from,
 * n_tokens) (sb_put_tensors); the index must already hold tokens[0, from),
 * as for sb_ns_put_blocks. The tokens are copied (read during the call
 * only).
 *
 * The put takes now, and holds until it ends, everything it needs: a pin
 * on each page the index holds for a prefix of tokens (those pages are
 * not evicted while the put is in flight), the page holding the positions
 * of from's page before from (read from disk if it is there only, its
 * bytes copied into the put's page now), and RAM for a new page for each
 * further page of the sequence, against the budgets like any page. When
 * the budgets cannot hold every new page (everything else pinned), it
 * takes the pages of the longest prefix that fit and still returns SB_OK:
 * sb_put_tensors fills those, and sb_put_finish stores that prefix and
 * returns SB_ERR_BUDGET, as sb_ns_put_blocks would. Unlike
 * sb_ns_put_blocks, a put larger than the disk tier's backlog does not
 * stream out a page chunk at a time: all its pages stay in RAM until
 * sb_put_finish offers them together.
 *
 * What the index does meanwhile: another put or commit that stores some
 * of these tokens before sb_put_finish wins: finish keeps the index's
 * pages for them (this put's copies are dropped), indexes the rest, and
 * reports only what it added (as two sb_ns_put_blocks calls in that order
 * would). A page the index held for a prefix cannot be evicted meanwhile
 * (it is pinned); one that leaves the index otherwise is indexed again by
 * finish from the pin.
 *
 * On success *out is owned by the caller: end it with sb_put_finish or
 * sb_put_abort. Thread-safe.
 * Returns: SB_OK; SB_ERR_INVAL (NULL ns, tokens or out); SB_ERR_NO_TOKENS;
 * SB_ERR_TOO_MANY_TOKENS; SB_ERR_RANGE (from > n_tokens, or the index
 * holds fewer than from tokens of the sequence: sb_ns_lookup says how
 * many); SB_ERR_CORRUPT, SB_ERR_IO (the page holding the positions before
 * from failed to read: it left the index); SB_ERR_BUDGET (no RAM to read
 * that page); SB_ERR_NOMEM. On failure *out is NULL and nothing is held
 * or changed (but a page that failed to read left the index). */
SB_API int sb_ns_put_begin(sb_ns *ns, const uint32_t *tokens, size_t n_tokens, size_t from,
                           sb_put **out);

/* sb_put_tensors -- gather tensors [first_tensor, first_tensor +
 * n_tensors) of positions [from, n_tokens) into the put's pages: src[i]
 * is the table of tensor first_tensor + i (see sb_block_table; its
 * first_pos at most the put's from). The engine's memory is read during
 * the call only. A tensor may be given again: the last call's bytes win
 * (a tensor recomputed, or a table corrected). Not thread-safe on one
 * put: one thread at a time.
 * Returns: SB_OK; SB_ERR_INVAL (NULL p or src, n_tensors 0, tensors past
 * the layout's, a NULL base, a token_stride below the tensor's bytes per
 * token); SB_ERR_RANGE (a table whose first_pos is after from). On failure
 * nothing was copied and the put is as it was. */
SB_API int sb_put_tensors(sb_put *p, uint32_t first_tensor, uint32_t n_tensors,
                          const sb_block_table *src);

/* sb_put_finish -- end a layered put: index its state, and the point
 * state at n_tokens when point is not NULL (point_bytes, read during the
 * call only), exactly as sb_ns_put_blocks with the same tokens, from and
 * tables would: pages, point, budgets, durability, *n_stored and *out as
 * sb_ns_put_ex. The point's RAM is taken now (the pages' at
 * sb_ns_put_begin). p is freed whatever this returns: every page it
 * holds is let go and counts against no budget any more.
 * Returns: SB_OK; SB_ERR_BUDGET (sb_ns_put_begin could not take every
 * page, or there is no RAM for the point: as sb_ns_put_ex, *n_stored
 * tokens restorable, the point not stored); SB_ERR_INCOMPLETE (a tensor
 * was never given: nothing stored); SB_ERR_INVAL (NULL p, nothing done; a
 * point for a layout without points: nothing stored); SB_ERR_NOMEM
 * (nothing stored). On an error other than SB_ERR_BUDGET *n_stored is 0
 * and *out zeroes. */
SB_API int sb_put_finish(sb_put *p, const void *point, size_t *n_stored,
                         sb_write_outcome *out);

/* sb_put_abort -- end a layered put without storing anything: every page
 * it holds is let go (the budgets are as before sb_ns_put_begin, but for
 * pages a read brought into RAM) and p is freed. NULL: a no-op.
 * Thread-safe as sb_put_finish. */
SB_API void sb_put_abort(sb_put *p);

typedef struct sb_match sb_match;

/* sb_ns_match -- find the longest restorable prefix of tokens[0, n_tokens).
 *
 * Restorable: pages cover [0, L) and, when the layout has
 * SB_LAYOUT_POINT_REQUIRED, a point state is recorded at exactly L. L may
 * be 0. Every page covering [0, L) (and the point state at L) is pinned by
 * the returned handle: nothing it holds is evicted or changed until
 * sb_match_release(). The walk compares token IDs, never only hashes, so a
 * hash collision cannot restore wrong state. Counts toward the store stats.
 * tokens is read during the call only.
 *
 * On success *out is owned by the caller: release it with sb_match_release().
 * Returns: SB_OK; SB_ERR_INVAL (NULL argument); SB_ERR_NO_TOKENS;
 * SB_ERR_TOO_MANY_TOKENS; SB_ERR_NOMEM. On failure *out is NULL. */
SB_API int sb_ns_match(sb_ns *ns, const uint32_t *tokens, size_t n_tokens,
                       sb_match **out);

/* What a match found. */
typedef struct sb_match_info {
    size_t n_tokens;          /* L: restorable prefix length */
    size_t n_pages;           /* ceil(L / page_tokens) pages cover it */
    size_t n_pages_ram;       /* ...of which in RAM */
    size_t n_pages_disk;      /* ...of which on disk (zero while RAM only) */
    size_t n_matched_tokens;  /* tokens the index matched before the
                                 point-state rule; >= n_tokens */
    int has_point;            /* a point state at L is pinned */
    sb_miss miss;             /* why L < the request length (SB_MISS_NONE if equal) */
} sb_match_info;

/* sb_match_get_info -- describe a match. Returns: SB_OK; SB_ERR_INVAL. */
SB_API int sb_match_get_info(const sb_match *m, sb_match_info *out);

/* One request of a batched lookup (sb_ns_lookup). */
typedef struct sb_lookup {
    const uint32_t *tokens;   /* in: the request's token IDs (read during
                                 the call only) */
    size_t n_tokens;          /* in: how many */
    sb_match_info info;       /* out: what sb_ns_match would find now */
} sb_lookup;

/* sb_ns_lookup -- how much of each of n requests the bank holds, without
 * pinning: reqs[i].info receives what sb_ns_match(reqs[i].tokens) would
 * find at the moment of the call (the restorable prefix L, its pages in
 * RAM and on disk, the point state, the miss reason), every request
 * answered under one hold of the store's lock, so the answers agree with
 * one another. Nothing is pinned or read from disk, the pages' eviction
 * order is unchanged (a lookup is not a use), and the match statistics
 * (lookups, hits, misses) do not move. An answer is a snapshot: pages may
 * be evicted or written before a later sb_ns_match, which is the call that
 * holds them. The pages a request shares with the shared tier are not
 * asked for (sb_ns_fetch_shared). The lock is held for one index walk per
 * request (a fraction of a nanosecond per token: bench_index).
 * Returns: SB_OK (every info written); SB_ERR_INVAL (NULL ns, NULL reqs
 * with n > 0, NULL tokens); SB_ERR_NO_TOKENS (a request of zero tokens);
 * SB_ERR_TOO_MANY_TOKENS; SB_ERR_NOMEM. On failure no info was written.
 * n == 0 is SB_OK. */
SB_API int sb_ns_lookup(sb_ns *ns, sb_lookup *reqs, size_t n);

/* sb_match_restore -- copy the state of tokens [0, n_tokens) of the match
 * into caller buffers laid out as in sb_ns_put (tensors[t] receives
 * n_tokens * bytes_per_token[t] bytes). n_tokens may be less than the
 * match's L. point, when not NULL, receives the point state at L; it needs
 * n_tokens == L and a match that has one.
 *
 * Pages on disk (sb_match_info.n_pages_disk) are read first, all in flight
 * together, each record's checksums verified; they then stay in RAM as
 * clean pages. A page that fails is removed from the index with every page
 * after it on its path, and the match shrinks to the valid prefix before it:
 * the call restores that prefix and returns SB_ERR_CORRUPT or SB_ERR_IO,
 * and sb_match_get_info then gives the new L (miss SB_MISS_CORRUPT or
 * SB_MISS_IO). Bytes past it in the buffers are unspecified; no wrong
 * state is ever restored. When only the point state fails to read, it is
 * dropped: a layout that requires point states loses the whole match
 * (L = 0); otherwise L stands, the tensors are restored, has_point turns 0,
 * point is left unwritten and the call still returns the error.
 *
 * Returns: SB_OK; SB_ERR_INVAL (NULL m or tensors, a NULL tensor pointer);
 * SB_ERR_RANGE (n_tokens > L); SB_ERR_NO_POINT (point asked and the match
 * has none at n_tokens); SB_ERR_CORRUPT, SB_ERR_IO (the match shrank, see
 * above); SB_ERR_BUDGET, SB_ERR_NOMEM (no RAM to read disk pages into:
 * nothing restored, the match unchanged). On failure the buffers may be
 * partly written. */
SB_API int sb_match_restore(sb_match *m, size_t n_tokens,
                            void *const *tensors, void *point);


/* sb_match_restore_blocks -- copy the state of positions [from, from +
 * n_tokens) of tensors [first_tensor, first_tensor + n_tensors) of the
 * match straight into the engine's memory: dst[i] places tensor
 * first_tensor + i (see sb_block_table). One copy, no staging buffer.
 * Only the pages covering the range are read from disk (all in flight
 * together; each copied out as its record is checked), so a restore can go
 * a layer (its K and V tensors) at a time, or a range at a time: the match
 * keeps its pages pinned until sb_match_release, whatever was taken. A
 * page that fails shrinks the match as in sb_match_restore (the range's
 * valid part is copied, the call returns the error).
 * Returns: SB_OK (also for n_tokens 0); SB_ERR_INVAL (NULL m or dst, a
 * NULL base, a token_stride below the tensor's bytes per token, tensors out
 * of range or n_tensors 0); SB_ERR_RANGE (from + n_tokens > L, or a table
 * whose first_pos is after from); SB_ERR_CORRUPT, SB_ERR_IO (the match
 * shrank); SB_ERR_BUDGET, SB_ERR_NOMEM (no RAM to read disk pages into:
 * nothing copied from them, the match unchanged). */
SB_API int sb_match_restore_blocks(sb_match *m, size_t from, size_t n_tokens,
                                   uint32_t first_tensor, uint32_t n_tensors,
                                   const sb_block_table *dst);

/* sb_match_point -- the point state at L, borrowed until sb_match_release().
 * A point state on disk is read first (the match shrinks as in
 * sb_match_restore when it fails).
 * Returns: a pointer to point_bytes bytes, or NULL when the match has none
 * or it could not be read. */
SB_API const void *sb_match_point(const sb_match *m);

/* sb_match_load -- make pages [0, n_pages) of the match resident and, with
 * point nonzero, its point state too, reading whatever is on disk with
 * every read in flight at once (the point state's record usually follows
 * the last page's, and is read with it). sb_match_restore, sb_match_pages
 * and sb_match_point read what they need themselves; this call lets a
 * caller that will want both the pages and the point state have them read
 * together. A failed read shrinks the match as in sb_match_restore.
 * Returns: SB_OK; SB_ERR_INVAL (NULL m); SB_ERR_RANGE (n_pages beyond the
 * match's pages); SB_ERR_NO_POINT (point asked with fewer than all the
 * match's pages, or the match has none); SB_ERR_CORRUPT, SB_ERR_IO (the
 * match shrank: what it still holds is resident); SB_ERR_BUDGET,
 * SB_ERR_NOMEM (no RAM to read into: the match unchanged, some of the
 * pages may be resident). */
SB_API int sb_match_load(sb_match *m, size_t n_pages, int point);

/* ---- asynchronous loads ------------------------------------------------------
 *
 * An engine that wants a match's disk pages read while it does other work
 * (schedules, computes other requests, restores the first layers) starts a
 * load and learns of its progress by polling, by waiting with a timeout
 * for a prefix of the pages or the whole, or through a file descriptor its
 * event loop watches. The reads run on the store's loader threads (two,
 * started by the first load), in runs of pages (at most 64 pages or 8 MiB
 * at a time, every read of a run in flight together), so pages [0, k)
 * become resident, and usable, while the pages after them are still read.
 * A failure shrinks the match exactly as the blocking sb_match_load does.
 *
 *     sb_load *ld;
 *     sb_match_load_start(m, info.n_pages, 0, &ld);
 *     ...                                   // other work
 *     size_t ready;
 *     int rc = sb_load_wait(ld, k, -1, &ready);   // pages [0, k) resident?
 *     if (rc == SB_OK)
 *         sb_match_restore_blocks(m, 0, k * page_tokens, 0, n_tensors, pool);
 *     ...
 *     sb_load_free(ld);                     // before sb_match_release
 *
 * While a load runs, the match's calls that need only pages [0, ready)
 * (sb_match_restore and sb_match_restore_blocks of tokens inside them, no
 * point state; sb_match_pages of them) work alongside it; a call that needs
 * more, or the point state, returns SB_ERR_BUSY (sb_match_point returns
 * NULL); sb_match_get_info always answers. Once the load is done, the
 * match is as after sb_match_load. */

typedef struct sb_load sb_load;

/* sb_match_load_start -- start making pages [0, n_pages) of the match and,
 * with point nonzero, its point state resident, as sb_match_load does,
 * without waiting. Pages already resident count at once; a RAM-only store,
 * or a match with nothing on disk, gives a load that is already done.
 * On success *out is owned by the caller: free it with sb_load_free,
 * before sb_match_release (which otherwise cancels the load, waits for its
 * reads and leaves the handle only to be freed). One load at a time per
 * match.
 * Returns: SB_OK (started: the outcome comes from poll or wait);
 * SB_ERR_INVAL (NULL m or out); SB_ERR_RANGE (n_pages beyond the match's
 * pages); SB_ERR_NO_POINT (as sb_match_load); SB_ERR_BUSY (a load of this
 * match is running); SB_ERR_NOMEM (no memory or no loader thread: nothing
 * started). On failure *out is NULL. */
SB_API int sb_match_load_start(sb_match *m, size_t n_pages, int point, sb_load **out);

/* sb_load_poll -- how far the load is, without blocking. *n_ready (may be
 * NULL) receives k: pages [0, k) of the match are resident (and stay so
 * until sb_match_release).
 * Returns: SB_ERR_PENDING (still running); SB_OK (done: every page asked
 * for, and the point state when asked for, is resident); else the load's
 * outcome as sb_match_load's: SB_ERR_CORRUPT, SB_ERR_IO (the match shrank:
 * k is its new page count, all resident), SB_ERR_BUDGET, SB_ERR_NOMEM (no
 * RAM to read into: the match unchanged, k pages resident); or
 * SB_ERR_CANCELED (sb_load_cancel or sb_match_release stopped it: k pages
 * resident, the rest are read by the calls that need them);
 * SB_ERR_INVAL (NULL ld). */
SB_API int sb_load_poll(sb_load *ld, size_t *n_ready);

/* sb_load_wait -- wait until pages [0, n_pages) of the load are resident
 * (n_pages at or past the load's pages, (size_t)-1 for example: until the
 * load is done), until the load ends short of them, or until timeout_ms
 * milliseconds passed (negative: no limit; 0: a poll). *n_ready as in
 * sb_load_poll.
 * Returns: SB_OK (those pages are resident; the load may still be
 * running); SB_ERR_PENDING (the time passed first); the load's outcome as
 * sb_load_poll's when it ended before they were resident; SB_ERR_INVAL. */
SB_API int sb_load_wait(sb_load *ld, size_t n_pages, int64_t timeout_ms, size_t *n_ready);

/* sb_load_fd -- a file descriptor that becomes readable when the load is
 * done (whatever its outcome), for poll(2), epoll or select; it stays
 * readable. Owned by the load: do not read or close it; it is closed by
 * sb_load_free.
 * Returns: the descriptor; SB_ERR_INVAL (NULL ld); SB_ERR_NOMEM (no
 * descriptor could be made: poll or wait instead). */
SB_API int sb_load_fd(sb_load *ld);

/* sb_load_cancel -- ask the load to stop: the runs of reads in flight
 * finish (what they read stays resident), no further run starts, and the
 * load ends SB_ERR_CANCELED unless it had already ended. Returns at once;
 * wait for the end with sb_load_wait. NULL is a no-op. */
SB_API void sb_load_cancel(sb_load *ld);

/* sb_load_free -- cancel the load if it runs, wait for its reads, and free
 * it. The match stays valid with everything it holds. NULL is a no-op. */
SB_API void sb_load_free(sb_load *ld);

/* sb_match_release -- unpin everything the match holds and free it.
 * NULL is a no-op. */
SB_API void sb_match_release(sb_match *m);

/* ============================================================================
 * Shared tier
 * ============================================================================
 *
 * A store opened with sb_config.shared_seeds shares full pages with every
 * other store (on this machine or others) configured with the same Redis
 * Cluster. Each page is kept under a key computed from its namespace
 * (model identity and scope) and its content key, so a store finds, from a
 * request's tokens alone, the pages another store published.
 *
 * Publishing. When a commit or put leaves a sequence of at least
 * min_prefix_tokens indexed, its full pages not yet offered are queued
 * for the pool (never blocking the call: a background thread writes them,
 * shallowest first, within shared_publish_bytes_per_s, with SET NX so a
 * page the pool holds costs one probe, not a second upload). A queued
 * page is held (it is not evicted) until it is written or dropped; the
 * queue holds at most a quarter of ram_bytes (and 256 MiB), beyond that an
 * offer is denied (shared_denied). Partial pages and point states are not
 * published: a page from the pool ends a restore at a page boundary, and
 * a namespace whose layout needs point states publishes nothing.
 *
 * Restore order. sb_ns_match finds what RAM and the local disk hold;
 * sb_ns_fetch_shared extends the index with the pages the pool holds
 * past that, which later matches then find like any committed page.
 *
 * What is checked. A fetched value is used only when it is a page record
 * of this namespace, at the position asked, with the content key asked
 * (recomputed over its tokens), holding the request's tokens, with its
 * checksums intact: anything else is a miss, counted (shared_bad_values),
 * never served. The checks do not authenticate the writer: a client that
 * may write the pool's keys can store a well-formed page of wrong state
 * for tokens it knows. Give write access only to trusted nodes (one ACL
 * user per tenant, confined to its key pattern sb1:<scope tag>:*).
 */

/* sb_ns_fetch_shared -- extend the index with pages of tokens[0, n_tokens)
 * from the shared tier.
 *
 * The index (RAM and disk) is walked for the request: past its last full
 * page that covers a prefix of the request, the keys of the request's
 * following full pages are computed and probed in the pool (one pipelined
 * EXISTS); the run of pages it holds is fetched (one pipelined GET),
 * every value checked (see "Shared tier"), and the good run is indexed as
 * if committed (they count against the RAM budgets, may go to the disk
 * tier and are evicted like any page; they are not offered to the pool
 * again). A layout that needs point states (SB_LAYOUT_POINT_REQUIRED)
 * cannot restore from pages alone and is refused. tokens is read during
 * the call only. *n_added (may be NULL) receives the tokens added to the
 * restorable prefix (a multiple of page_tokens; 0 on every error).
 * Thread-safe; it waits at most about twice shared_timeout_ms on the
 * network.
 *
 * Returns: SB_OK (what the pool held past the index, possibly nothing, is
 * indexed); SB_ERR_CORRUPT (a value failed its checks: the good pages
 * before it are indexed, *n_added says how many tokens; the bad one is
 * counted); SB_ERR_IO (no node answered in time -- the cluster is down,
 * hung or unreachable: what came before is indexed, as above; the call
 * can be retried and the tier reconnects by itself); SB_ERR_BUDGET (no
 * RAM for the pages: those that fit are indexed, as above);
 * SB_ERR_UNSUPPORTED (the store has no shared tier, or the layout needs
 * point states: nothing changed); SB_ERR_INVAL (NULL ns);
 * SB_ERR_NO_TOKENS; SB_ERR_TOO_MANY_TOKENS; SB_ERR_NOMEM (nothing
 * changed). A page that expired between probe and fetch ends the run
 * without an error. */
SB_API int sb_ns_fetch_shared(sb_ns *ns, const uint32_t *tokens, size_t n_tokens,
                              size_t *n_added);

/* sb_ns_fetch_shared_start -- sb_ns_fetch_shared on one of the store's
 * loader threads (see "asynchronous loads"), returning at once: the load
 * ends with sb_ns_fetch_shared's code, and its n_ready (sb_load_poll,
 * sb_load_wait) is then the tokens added (*n_added), 0 before. A wait
 * for any number of pages waits for the end. A cancel stops a fetch not
 * yet begun (SB_ERR_CANCELED); one under way finishes. tokens is copied;
 * the namespace stays valid for the load even if closed meanwhile.
 * On success *out is owned by the caller (sb_load_free, before
 * sb_store_close).
 * Returns: SB_OK (started); SB_ERR_INVAL (NULL ns, tokens or out);
 * SB_ERR_NO_TOKENS; SB_ERR_TOO_MANY_TOKENS; SB_ERR_UNSUPPORTED (as
 * sb_ns_fetch_shared); SB_ERR_NOMEM (nothing started). On failure *out
 * is NULL. */
SB_API int sb_ns_fetch_shared_start(sb_ns *ns, const uint32_t *tokens, size_t n_tokens,
                                    sb_load **out);

/* sb_store_has_shared -- whether st was opened with a shared tier.
 * Returns: 1 or 0 (0 for NULL). */
SB_API int sb_store_has_shared(const sb_store *st);

/* ============================================================================
 * Zero-copy mode
 * ========================================================================== */

typedef struct sb_page sb_page;

/* sb_ns_page_alloc -- take a fresh page from the bank's pool.
 *
 * The page is page_bytes long (see sb_ns_get_info), 4096-aligned, private
 * and writable, with unspecified contents. It counts against the budgets
 * at once (evicting unpinned pages if needed).
 * On success *out is owned by the caller: one reference, dropped with
 * sb_page_unref() (or kept after sb_ns_commit, which takes its own); on
 * failure *out is NULL (when out is not NULL).
 * Returns: SB_OK; SB_ERR_INVAL (NULL argument); SB_ERR_BUDGET (the budgets
 * are full of pinned pages: pages evicted to look for room stay evicted,
 * see Budgets); SB_ERR_NOMEM. */
SB_API int sb_ns_page_alloc(sb_ns *ns, sb_page **out);

/* sb_ns_prefault -- have page buffers of ns's size ready in the bank's
 * pool before they are needed, as an inference engine allocates its KV
 * cache when it starts: up to n_pages of them, mapped and faulted in, so
 * that the pages a later restore reads into, or sb_ns_page_alloc hands
 * out, cost no page faults then.
 *
 * They are spares: they count against the budgets (sb_config.ram_bytes
 * and ram_pages; stats.pool_spare_bytes and pool_spare_pages, not
 * stats.ram_bytes) and are the first memory the bank gives back
 * when blocks need room. Spares the pool already holds count towards
 * n_pages; nothing is evicted to make more: with the budgets full, fewer
 * (or none) are made. Spares of a page size are shared by every namespace
 * of that size.
 * With a disk tier, the scratch a restore of n_pages pages reads their
 * record heads into is made ready too (best effort, outside the budgets:
 * 4 KiB a page, at most 8 MiB per bank).
 * *n_ready (may be NULL) receives how many spare pages of ns's size the
 * pool holds on return.
 * Returns: SB_OK (also when the budgets allowed fewer than n_pages);
 * SB_ERR_INVAL (NULL ns); SB_ERR_NOMEM (the system refused the memory:
 * no spare was made by this call). */
SB_API int sb_ns_prefault(sb_ns *ns, size_t n_pages, size_t *n_ready);

/* sb_page_data -- the page's bytes. Borrowed while the caller holds a
 * reference. A page the bank indexes (committed) must not be written: use
 * sb_page_writable() first.
 * Returns: the data pointer, or NULL for NULL. */
SB_API void *sb_page_data(sb_page *p);

/* sb_page_tokens -- how many leading token slices of the page are committed
 * state (0 for a fresh page). Returns: the count; 0 for NULL. */
SB_API uint32_t sb_page_tokens(const sb_page *p);

/* sb_page_ref -- take another reference. Returns: p (NULL for NULL). */
SB_API sb_page *sb_page_ref(sb_page *p);

/* sb_page_unref -- drop a reference; the page is freed with the last one.
 * NULL is a no-op. */
SB_API void sb_page_unref(sb_page *p);

/* sb_page_writable -- make *page safe to write (copy on write).
 *
 * A fresh page the caller alone holds is left as is. Otherwise (the page is
 * committed or shared) *page is replaced by a fresh private page holding a
 * copy of the first n_keep token slices of every tensor, and the caller's
 * reference to the old page is dropped. Runtimes call this before writing
 * into a partial tail page they committed or obtained from a match.
 *
 * Returns: SB_OK; SB_ERR_INVAL (NULL argument, n_keep > page_tokens,
 * n_keep > the tokens the page holds when it is committed);
 * SB_ERR_FOREIGN_PAGE (a page of another namespace, or a point state);
 * SB_ERR_BUDGET; SB_ERR_NOMEM. On failure *page is unchanged and the
 * caller keeps its reference. */
SB_API int sb_page_writable(sb_ns *ns, sb_page **page, uint32_t n_keep);

/* sb_ns_commit -- index tokens[0, n_tokens) with the caller's pages.
 *
 * pages has ceil(n_tokens / page_tokens) entries: pages[i] holds the state
 * of tokens [i * page_tokens, min(n_tokens, (i + 1) * page_tokens)). The
 * index takes its own reference to every page it keeps; the caller keeps
 * its references. A page for a prefix the index already holds is
 * deduplicated: pages[i] is replaced by the index's page covering the same
 * tokens (for a partial last page it may hold more tokens after them), the
 * caller's reference moving to it (the reference to the caller's page is
 * dropped) -- except when that page is on disk only and holds more tokens
 * than the caller's: the caller then keeps its own page, still private.
 * Committed pages are immutable. point, when not NULL, is copied
 * as the point state at n_tokens.
 *
 * With a disk tier the new pages (and the point) are offered to it as the
 * write mode says; under SB_DURABILITY_COMMIT the call waits until they
 * are written and synced (see sb_ns_put_ex: what the tier does not write
 * is an outcome, not an error). Thread-safe (pages aside: see
 * Conventions).
 *
 * Returns: SB_OK (the tokens are restorable, on disk or not as the
 * outcome of sb_ns_commit_ex says); SB_ERR_INVAL (NULL argument or page,
 * one page given for two regions, a point for a layout without points);
 * SB_ERR_NO_TOKENS; SB_ERR_TOO_MANY_TOKENS;
 * SB_ERR_FOREIGN_PAGE (a page of another namespace); SB_ERR_PAGE_STATE (a
 * committed page given for tokens other than its own: call
 * sb_page_writable first); SB_ERR_BUDGET, SB_ERR_NOMEM (no room for the
 * point state or index nodes). On failure nothing changed: no page was
 * indexed or replaced. */
SB_API int sb_ns_commit(sb_ns *ns, const uint32_t *tokens, size_t n_tokens,
                        sb_page **pages, const void *point);

/* sb_ns_commit_ex -- sb_ns_commit, and *out (when not NULL) receives what
 * became of the state of tokens[0, n_tokens) (and the point) on the disk
 * tier (sb_write_outcome; zeroes on failure).
 * Returns: as sb_ns_commit. */
SB_API int sb_ns_commit_ex(sb_ns *ns, const uint32_t *tokens, size_t n_tokens,
                           sb_page **pages, const void *point, sb_write_outcome *out);

/* sb_match_pages -- new references to pages [first, first + count) of a
 * match, for a runtime's page table. The last page of a match may hold more
 * tokens than the match covers: make it writable before appending to it.
 * Each out[i] is owned by the caller (sb_page_unref). Pages on disk among
 * pages [0, first + count) are read first, as in sb_match_restore.
 * Returns: SB_OK; SB_ERR_INVAL (NULL argument); SB_ERR_RANGE (beyond
 * n_pages); SB_ERR_CORRUPT, SB_ERR_IO (a page failed: the match shrank,
 * no reference was taken; ask sb_match_get_info and call again with what
 * is left); SB_ERR_BUDGET, SB_ERR_NOMEM (no RAM to read into). */
SB_API int sb_match_pages(sb_match *m, size_t first, size_t count,
                          sb_page **out);

/* ============================================================================
 * Pins
 * ========================================================================== */

/* sb_ns_pin -- pin the longest stored prefix of tokens[0, n_tokens) (a system
 * prompt, say) so eviction cannot take it, for ttl_ms milliseconds of the
 * store clock (0: until sb_ns_unpin). The pin holds the pages that cover the
 * prefix now; it does not grow with later puts, except that when a longer
 * page of the same tokens supersedes a partial page it holds, the pin holds
 * that page instead (so the pinned tokens stay restorable from the index).
 * Pinned pages are kept in RAM: pages on disk only are read first (as a
 * restore reads them), so the disk tier's reclamation cannot take them
 * either; no room for one in the budgets ends the pin before it. Pinned
 * pages count against the budgets.
 *
 * *pin_id receives an id for sb_ns_unpin; *n_pinned (when not NULL) the
 * number of tokens pinned (0 is not an error: the pin then holds nothing).
 * Returns: SB_OK; SB_ERR_INVAL; SB_ERR_NO_TOKENS; SB_ERR_TOO_MANY_TOKENS;
 * SB_ERR_NOMEM; SB_ERR_CORRUPT, SB_ERR_IO (a page on disk failed its
 * read: it left the index with every page after it, as in
 * sb_match_restore, and nothing was pinned; a second call pins what is
 * left). */
SB_API int sb_ns_pin(sb_ns *ns, const uint32_t *tokens, size_t n_tokens,
                     uint64_t ttl_ms, uint64_t *pin_id, size_t *n_pinned);

/* sb_ns_unpin -- remove a pin before its TTL expires.
 * Returns: SB_OK; SB_ERR_INVAL; SB_ERR_NOT_FOUND (no live pin with this id
 * in this namespace: never made, removed, or expired). */
SB_API int sb_ns_unpin(sb_ns *ns, uint64_t pin_id);

/* ============================================================================
 * Removal
 * ============================================================================
 *
 * sb_ns_remove forgets a conversation (or any prefix): every state whose
 * token sequence starts with the prefix leaves the index, the disk tier
 * and the shared tier, for good.
 */

/* sb_ns_remove -- drop every state of ns whose token sequence starts with
 * tokens[0, n_tokens) from every tier.
 *
 * What goes. Let pt be page_tokens and r = n_tokens / pt (rounded down):
 * page r is the page holding the prefix's last tokens when n_tokens is
 * not a multiple of pt, else the first page after the prefix. Every page
 * of region r or later on a path through tokens[0, n_tokens) goes -- the
 * pages after the prefix, and, when the prefix ends inside page r, the
 * pages of region r whose tokens begin with tokens[r * pt, n_tokens) (they
 * hold state of the prefix's last tokens, and of the tokens after) -- and
 * every point state at a position >= n_tokens on those paths, including
 * one at exactly n_tokens. Nothing else is a target: the pages of regions
 * before r (the state of tokens[0, r * pt)), point states at positions
 * below n_tokens, and every path that leaves the prefix before its end
 * stay. A prefix ending inside a page has one consequence beyond that:
 * positions r * pt .. n_tokens - 1 of the prefix were held by pages of
 * region r that began with the whole rest of it; they stay restorable
 * where a stored sequence that leaves the prefix before n_tokens covers
 * them, and a point state at such a position goes with the pages when
 * nothing else covers it (counted in *n_removed). Afterwards, until the
 * prefix is put again, a match of any request that starts with
 * tokens[0, n_tokens) covers at most the prefix (n_matched_tokens <=
 * n_tokens: its pages before the cut), fewer tokens when n_tokens is not
 * a multiple of pt, and never with a point state at n_tokens. (To forget
 * a conversation that left a shared prompt at token k, remove its tokens
 * [0, k + 1): the conversation goes whole, and the shared prompt stays
 * restorable as far as the other conversations through it hold it.)
 *
 * Holders. Removed pages and point states leave the index at once: no
 * later match, lookup, pin, put or commit finds them, and they stop
 * counting as indexed. Their memory goes with the last holder:
 *   - a live match keeps every page and point state it holds: its
 *     restores, sb_match_pages and sb_match_point give the same bytes as
 *     before (a page on disk only is read from its record, which stays
 *     until the match is released);
 *   - a page reference (sb_match_pages, a committed sb_ns_page_alloc
 *     page) stays valid with its bytes; committing it again indexes it as
 *     new state (written to the disk tier again, never served from its old
 *     record);
 *   - a pin lets go of the removed pages at once and keeps the pages
 *     before the cut (its id stays valid for sb_ns_unpin): a pin keeps
 *     state in the index, and these left it;
 *   - blocks queued for the disk tier's writer, or waiting in its priority
 *     pool, are not written; a durability ticket that needs one fails
 *     (SB_ERR_NOT_DURABLE), as for any block that leaves the index
 *     unwritten. A ticket already durable stays durable (it said the
 *     state was on disk; the removal took it off later).
 *
 * Disk tier. Records are never rewritten, so the call writes a tombstone
 * record (docs/format.md: the namespace, the key of page r - 1 on the
 * prefix's path, the tokens after it, and its sequence number) and waits
 * until it is synced, whatever the durability mode, before it returns
 * SB_OK. From then on no reopen -- after a clean close, a crash or a power
 * cut, with or without SB_OPEN_SALVAGE -- brings back a removed state:
 * recovery drops every record older than the tombstone whose path passes
 * through the cut (recovery_removed), and reclamation keeps the tombstone
 * (writing it again) while a segment that may hold such a record remains.
 * A put or commit of the same prefix after the call returns is newer than
 * the tombstone and survives restarts as any put does. A tombstone is
 * written on every call when the store has a disk tier (write-only mode
 * included), even when the index held nothing under the prefix: records
 * may be on disk that the index does not hold (write-only mode, an
 * earlier call whose tombstone failed). From its first tombstone on, a
 * store says superblock version 3, which builds without removal refuse
 * (SB_ERR_VERSION) instead of opening it without its tombstones.
 *
 * A crash during the call. The tombstone is one record: after a crash it
 * is either found whole or not at all. Not found (the call had not
 * returned SB_OK): the removed states come back as far as the crash would
 * have left them without the call -- what was durable is restored --
 * except that blocks of the removed states the writer had not begun to
 * write when the call took them out are never written. Found: nothing
 * removed comes back. Either way the crash loses nothing the call did not
 * take out of the index (the removed states, and the tail of a shorter
 * prefix left without cover, above; a reopen may find such a tail again
 * in its own older record).
 *
 * Shared tier. The keys of the removed full pages the index held are
 * deleted from the pool (one pipelined DEL, waiting at most about twice
 * shared_timeout_ms), whether this store published the page, fetched it,
 * or neither (another node may have published the same tokens), and their
 * publications still queued are dropped. Best effort, counted
 * (shared_forgotten, shared_forget_failed), never an error of the call:
 * a node that does not answer keeps its keys until their TTL; pages the
 * pool holds under the prefix that this store's index never held stay
 * (their keys need tokens it does not have); other nodes' RAM and disk
 * copies are not touched (call sb_ns_remove on every node).
 *
 * tokens is read during the call only. *n_removed (may be NULL) receives
 * the pages and point states that left the index (0 when the call fails
 * with an error other than SB_ERR_IO or SB_ERR_NOSPC). Thread-safe: put,
 * commit and match may run at once on the same namespace, and one that
 * starts after the call returns sees the removal. A put or commit racing
 * with it lands before it (removed with the rest) or after it (kept), on
 * disk as in RAM; a put that streams its pages in chunks (more than the
 * backlog) may have its first chunks removed and then stop short
 * (SB_ERR_BUDGET, *n_stored saying what is restorable).
 *
 * Returns: SB_OK (also when nothing matched: the tombstone is durable);
 * SB_ERR_INVAL (NULL ns, NULL tokens); SB_ERR_NO_TOKENS;
 * SB_ERR_TOO_MANY_TOKENS; SB_ERR_NOMEM (nothing changed); SB_ERR_IO,
 * SB_ERR_NOSPC: the states left the index (*n_removed of them) and no
 * match of this store finds them, but the removal is not durable: the
 * tombstone's write or sync failed (SB_ERR_IO), or the disk tier writes
 * nothing more since a write failed (SB_ERR_IO) or its cap or file system
 * is full (SB_ERR_NOSPC); a reopen may bring the states back as a crash
 * during the call would (above). Calling again writes a new tombstone
 * (and removes nothing more from RAM) once the tier writes again (a full
 * one tries again when a put offers it a block, a second or more after it
 * stopped; a removal alone does not make it try). */
SB_API int sb_ns_remove(sb_ns *ns, const uint32_t *tokens, size_t n_tokens, size_t *n_removed);

/* ============================================================================
 * Debugging
 * ========================================================================== */

/* sb_ns_dump -- print the namespace's radix tree to a stdio stream (a FILE *,
 * passed as void * so this header needs no <stdio.h>): one line per node with
 * its depth range, tokens, pages and point state.
 * Returns: SB_OK; SB_ERR_INVAL; SB_ERR_NOMEM (no memory for the walk). */
SB_API int sb_ns_dump(sb_ns *ns, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* SNAPBANK_H */
