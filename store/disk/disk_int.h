/* disk_int.h -- what the disk tier's modules share: the sb_disk structure,
 * segments, and the helpers of disk.c (directory, superblock, segment life
 * cycle) used by writer.c (the writer thread), recover.c (open) and dread.c
 * (restores).
 *
 * Locking. Fields marked [mu] are guarded by the store mutex st->mu; [w] are
 * the writer thread's alone once it runs (recovery owns them before);
 * [rd] are guarded by rd_mu, the readers' mutex; [const] are set at open.
 * A segment's id, generation and state are written under st->mu (the
 * writer holds it when it changes them) so readers can look them up.
 */
#ifndef SB_DISK_INT_H
#define SB_DISK_INT_H

#include <pthread.h>
#include <stdint.h>

#include "disk.h"
#include "format.h"
#include "internal.h"

typedef struct sb_disk sb_disk;
typedef struct sb_wrun sb_wrun; /* a run of tickets (ticket.c) */

/* Tickets remembered as ascending runs [lo, hi] (ticket.c): failed ones,
 * reclaimed ones. [mu] */
typedef struct sb_truns {
    sb_wrun *r;                /* (n) ascending, disjoint */
    size_t n, cap;
    uint64_t forgot;           /* tickets up to it may have been in a run
                                  that was let go (0: none) */
} sb_truns;

#define SB_SEGS_MIN 1024u    /* a new superblock's capacity at least */
#define SB_CAP_SEGS_MIN 8u   /* segments the default cap holds at least: a
                                fresh store's segments shrink to fit
                                (sb_disk_open) */
#define SB_SEGS_MAX 65536u   /* and at most (a 1.5 MiB slot), unless the
                                segments found need more (salvage) */

/* The most bytes one read of a restore brings: adjacent records are read
 * together up to this (the block layer's usual largest request). */
#define SB_DISK_READ_MAX (4u << 20)

/* The record heads of a restore are read into one scratch the tier keeps
 * (d->rd_heads) up to this size -- 2,048 heads of 4 KiB -- so a restore
 * touches no fresh memory for them; a larger load takes a buffer of its
 * own for the heads beyond. */
#define SB_DISK_HEADS_KEEP (8u << 20)

/* Where a block's record stands in this tier: NONE until the tier takes
 * it; then QUEUED, CLEAN or FAILED. Not stored here: it is the flags the
 * index reads (sb_blk.below, host.h), so the index tests them without a
 * call and the two can never disagree:
 *
 *     state    below flags          the index may
 *     NONE     -                    offer it (again)
 *     QUEUED   OFFERED | QUEUED     park it while the writer holds it
 *     CLEAN    OFFERED | KEPT       drop its data (its record stays)
 *     FAILED   OFFERED              keep it in RAM only
 *
 * A block that is CLEAN may drop its data at any time it is held by the
 * index alone (the entry stays; a restore reads the record back); the
 * others are RAM-only and leave RAM only by leaving the index. */
enum {
    SB_DISK_NONE = 0,    /* not written (not yet queued) */
    SB_DISK_QUEUED = 1,  /* in the writer's queue or in flight: the writer
                            holds a reference */
    SB_DISK_CLEAN = 2,   /* its record is on disk (seg, rec_off, head_bytes) */
    SB_DISK_FAILED = 3,  /* its write failed or was denied: RAM-only */
};

/* The tier's state of one block: its area of the block (tier_ops.h
 * blk_bytes; internal.h tier_area), after the block's header in the same
 * allocation, zeroed when the block is made. Reached with sb_drec_of. All
 * [mu]. Holds nothing that must be freed with the block: its tickets
 * (waits) are resolved when it leaves the index (sb_disk_pool_leave) or
 * when the tier closes (sb_tkt_free_all). */
typedef struct sb_drec {
    /* first: what a match touches (sb_disk_match: seg, hit), so it sits
     * right after the block's header, on the line the header ends on */
    uint32_t seg;              /* segment index of its record (CLEAN) */
    uint8_t hit;               /* matched since its record was written:
                                  reclamation keeps it (reclaim.c); set by
                                  sb_disk_match */
    uint8_t zflags;            /* the record's flags when stored compressed */
    uint8_t why;               /* why it waits in the pool (pool_at nonzero),
                                  or why it was not written (FAILED): an
                                  sb_deny */
    uint8_t reinsert;          /* queued again by reclamation (QUEUED) */
    uint32_t seg_id;           /* ...and that segment's id: once the
                                  segment is reclaimed its slot may hold
                                  another */
    uint32_t pool_at;          /* 1 + its place in the priority pool
                                  (admit.c), 0: not there (the index sees
                                  SB_BELOW_POOLED) */
    uint32_t head_bytes;       /* its record's head size (CLEAN) */
    uint32_t stored;           /* its record's payload bytes when stored
                                  compressed (CLEAN), 0: stored as it is */
    uint64_t rec_off;          /* its record's offset in the segment (CLEAN) */
    uint64_t ticket;           /* write-queue ticket, given when queued: the
                                  writer's order, and (CLEAN) which sync
                                  covered its record */
    struct sb_wnode *waits;    /* durability tickets waiting for it to be
                                  written (ticket.c) */
    sb_blk *wq_next;           /* write-queue link (QUEUED) */
} sb_drec;
_Static_assert(sizeof(sb_drec) == 56, "sb_drec: 56 bytes, laid out for a match (see above)");

/* sb_drec_of -- block b's state in this tier (b of a store whose tier this
 * is: its area was allocated with it). [mu] for the fields. */
static inline sb_drec *sb_drec_of(const sb_blk *b)
{
    return (sb_drec *)(uintptr_t)b->tier_area;
}

/* sb_disk_state -- b's SB_DISK_* state, from the index's flags. [mu] */
static inline int sb_disk_state(const sb_blk *b)
{
    unsigned f = b->below;
    if (!(f & SB_BELOW_OFFERED))
        return SB_DISK_NONE;
    return f & SB_BELOW_KEPT ? SB_DISK_CLEAN : f & SB_BELOW_QUEUED ? SB_DISK_QUEUED
                                                                  : SB_DISK_FAILED;
}

/* sb_disk_state_set -- [mu] b's state becomes state (SB_DISK_*): the
 * index's flags say so (POOLED and CUT stay as they are). */
static inline void sb_disk_state_set(sb_blk *b, int state)
{
    static const uint8_t flags[4] = {
        [SB_DISK_NONE] = 0,
        [SB_DISK_QUEUED] = SB_BELOW_OFFERED | SB_BELOW_QUEUED,
        [SB_DISK_CLEAN] = SB_BELOW_OFFERED | SB_BELOW_KEPT,
        [SB_DISK_FAILED] = SB_BELOW_OFFERED,
    };
    sb_host_blk_mark(b, SB_BELOW_OFFERED | SB_BELOW_KEPT | SB_BELOW_QUEUED,
                     flags[state & 3]);
}

/* A tombstone (format.h): a removal (sb_ns_remove) as the tier records
 * it, from its queueing until the tier drops it (tomb.c). [mu]
 *
 *   queued     on d->tq, written before any block queued after it (the
 *              writer takes tombstones first)
 *   in flight  a writer slot holds it
 *   written    on d->tpend until a sync: a good one makes it durable (a
 *              new one: its caller's wait returns SB_OK; a copy: it takes
 *              the place of the one it copies), a failed one fails it
 *   live       on d->tombs while a segment may hold a record it removes:
 *              where its newest record is; reclamation writes it again
 *              (a copy, copy_of the one in the segment going) or drops it
 *
 * A new tombstone is freed by its caller's wait when nothing else holds
 * it; a live one by the tier (reclamation, close). */
typedef struct sb_tomb {
    uint64_t ns_id;
    sb_key parent;             /* key of the page before the cut region */
    sb_key key;                /* chained over rest from parent (parent
                                  itself when n_rest is 0) */
    uint32_t position;         /* n: the removed prefix's length */
    uint32_t n_rest;           /* its tokens after page parent: n mod pt */
    uint64_t removal_seq;      /* records below it through the cut are
                                  removed: the first record's seq (0 until
                                  a new one is placed) */
    int state;                 /* SB_TOMB_PENDING, _DURABLE or _FAILED: what
                                  a waiting caller is told */
    int rc;                    /* FAILED: SB_ERR_IO or SB_ERR_NOSPC */
    bool queued;               /* on d->tq or in a writer slot */
    bool pend;                 /* on d->tpend */
    bool live;                 /* on d->tombs */
    bool waited;               /* a caller's sb_disk_remove_wait holds it */
    bool placed;               /* a record of it is written: seg, rec_* */
    struct sb_tomb *copy_of;   /* a copy: the live tombstone it replaces */
    uint32_t from;             /* a copy: the segment it is copied out of */
    uint32_t seg, seg_id;      /* where its newest record is (placed) */
    uint64_t rec_off, rec_seq;
    uint32_t rec_bytes;
    struct sb_tomb *qnext;     /* d->tq, or d->tpend */
    struct sb_tomb *next, *prev; /* d->tombs */
    uint32_t rest[];           /* (n_rest) */
} sb_tomb;

enum { SB_TOMB_PENDING = 0, SB_TOMB_DURABLE = 1, SB_TOMB_FAILED = 2 };

/* An entry of the priority pool (admit.c): a block and its place. */
typedef struct sb_pool_ent {
    sb_blk *b;
    double value;              /* recompute saved per byte written */
    uint64_t depth;            /* first token it covers: ties, shallower first */
    uint64_t stamp;            /* its last use when placed: then newer first */
} sb_pool_ent;

/* A segment file, seg-<id>.dat, and while it is open the summary of the
 * records written to it. */
typedef struct sb_seg_ent {
    uint64_t off;              /* record offset */
    size_t pos;                /* entry bytes at sum + pos */
    uint32_t bytes;            /* entry size */
} sb_seg_ent;

typedef struct sb_seg {
    uint32_t id;               /* [mu] segment id (file name), from 1 */
    uint32_t gen;              /* [mu] generation of the records in it */
    uint32_t state;            /* [mu] SB_SEG_* */
    uint64_t data_end;         /* [mu] bytes of records (the open one: the
                                  next write offset) */
    uint64_t live_bytes;       /* [mu] bytes of records of indexed blocks */
    int wfd;                   /* [w] writer's fd, -1 when closed */
    int rfd;                   /* [rd] readers' fd, -1 when closed */
    /* The summary being built while the segment is open [w]: */
    uint8_t *sum;              /* entries, sb_sum_put_entry format */
    size_t sum_len, sum_cap;
    sb_seg_ent *ent;           /* one per record written, any order */
    size_t n_ent, ent_cap;
    uint64_t first_seq, last_seq; /* its records' lowest and highest seq
                                  (kept after it is sealed, and set by
                                  recovery: reclamation asks whether a
                                  segment may hold what a tombstone
                                  removes) */
    uint64_t *ns_ids;          /* namespaces with a record in it */
    size_t n_ns, ns_cap;
    bool damaged;              /* a write to it failed: seal it early */
    bool draining;             /* [mu] being reclaimed: its hot blocks are
                                  copied out, then it is freed */
    uint32_t copies;           /* [mu] blocks still to copy out of it */
    bool going;                /* [mu] being reclaimed (from the walk on):
                                  no block may newly name a record in it */
    uint32_t holds;            /* [mu] matches holding a CLEAN block here
                                  (sb_disk_match) and reads in flight: it
                                  is not deleted while any does */
    uint64_t synced_end;       /* [mu] data_end at its last good sync */
    bool suspect;              /* [mu] a write or a sync in it failed: its
                                  records from suspect_from on may not be
                                  found again (a scan stops at the hole
                                  until a summary is written), or not be
                                  on the device, so no ticket counts them
                                  durable. A good seal lifts it after a
                                  failed write (the summary lists what
                                  follows the hole), never after a failed
                                  sync (a later fdatasync may succeed
                                  without the data reaching the device) */
    bool sync_failed;          /* [mu] ...a sync failed */
    uint64_t suspect_from;     /* [mu] */
} sb_seg;

/* Where a block's record is (a copy taken under st->mu). */
typedef struct sb_disk_loc {
    uint32_t seg, seg_id, gen, head_bytes;
    uint64_t off;
    uint32_t stored;           /* payload bytes when compressed, else 0 */
    uint8_t zflags;            /* ...and the record's flags */
} sb_disk_loc;

struct sb_disk {
    sb_store *st;              /* [const] */
    sb_io *wio;                /* [w] the writer's handle: data path, files */
    sb_io *rio;                /* [rd] the readers' handle */
    bool direct;               /* [const] segment files take O_DIRECT */
    pthread_mutex_t rd_mu;
    uint8_t *rd_heads;         /* [rd] the heads' scratch (dread.c): whole
                                  huge pages (sb_host_map), populated;
                                  NULL until needed */
    size_t rd_heads_cap;       /* [rd] its bytes, <= SB_DISK_HEADS_KEEP */
    pthread_t thread;
    bool running;              /* [const after open] the thread exists */
    pthread_cond_t work_cv;    /* [mu] the writer waits for work here */
    pthread_cond_t done_cv;    /* [mu] writers of commits and budget waiters */

    /* configuration [const] */
    uint64_t seg_bytes;
    uint32_t max_segs;         /* superblock capacity */
    uint64_t cap_bytes;        /* disk cap in effect */
    uint32_t qd;
    sb_durability durability;
    sb_write_mode mode;
    uint64_t sync_bytes, sync_ns;

    /* the queue [mu] */
    sb_blk *q_head, *q_tail;   /* full pages and point states, FIFO */
    sb_blk *t_head, *t_tail;   /* partial pages: written late */
    sb_blk *c_head, *c_tail;   /* blocks to copy out of a draining segment
                                  (reclaim.c): CLEAN there, the writer's
                                  reference, reinsert set */
    uint64_t pending_bytes;    /* resident bytes queued or in flight */
    uint64_t pending_peak;     /* the most pending_bytes ever was */
    uint64_t next_ticket;      /* the next block queued gets this */
    uint64_t synced_ticket;    /* every ticket up to it is resolved and synced */
    uint64_t flush_ticket;     /* a flush waits for this one */
    uint64_t err_ticket;       /* the highest ticket whose write failed */
    int err_rc;                /* what it failed with: SB_ERR_NOSPC (denied:
                                  no room) or SB_ERR_IO */
    uint64_t progress;         /* writes finished so far */
    bool stop, abort;          /* close asked; crash asked */
    bool closing;              /* sb_disk_close has begun */
    int close_rc;              /* the first write, sync or seal error since
                                  closing began: what close returns */
    uint64_t hold_ns;          /* [const] longest single hold */
    void (*gap_hook)(void *);  /* test hook (sb_disk_writer_hook), or NULL */
    void *gap_ctx;

    /* the write budget [mu] (sb_config.write_budget_*; disk.c) */
    double bucket;             /* bytes that may be written now (may dip
                                  below 0 by a metadata overdraft) */
    uint64_t bucket_t;         /* store clock of the last refill */
    double rate;               /* [const] refill, bytes per ns */
    double depth;              /* [const] bucket capacity, bytes */
    double pace;               /* the pacing bucket: refills at rate, holds a
                                  minute of it (pace_depth); pages pass it
                                  too once the hard bucket is under half
                                  full, so the budget is spread over the
                                  hour */
    double pace_depth;         /* [const] */
    uint64_t win[60];          /* bytes written in each minute of the last
                                  hour (store clock), slot minute % 60 */
    uint64_t win_min;          /* the newest slot's minute */
    uint64_t win_sum;          /* the sum of win */
    uint64_t hour_cap;         /* [const] pages are admitted while the last
                                  hour's bytes stay under this: 99 % of the
                                  budget (1 % for metadata) */
    uint64_t reserved;         /* record bytes admitted and not yet written */
    uint64_t meta_reserve;     /* [const] kept for summaries, superblocks and
                                  namespace records: pages never take it */
    uint64_t backlog;          /* [const] sb_config.backlog_bytes */
    uint64_t deny[SB_DENY__COUNT]; /* denials by reason */
    uint64_t deny_bytes[SB_DENY__COUNT]; /* ...their blocks' bytes */
    sb_pool_ent *pool;         /* the priority pool: a max-heap (admit.c) */
    size_t pool_n, pool_cap;
    uint64_t deferred, pool_written; /* blocks that entered it, and left it
                                  for the queue */
    uint64_t wa_logical, wa_head, wa_pad, wa_sum, wa_super, wa_ns; /* [mu] the
                                  write amplification breakdown (sb_stats) */
    uint64_t held_ns, holds;   /* time held back, and how many waits */
    int broken;                /* 0, or why the tier writes no more (sb_err);
                                  SB_ERR_NOSPC lifts at retry_ns */
    uint64_t retry_ns;         /* store clock: when a tier stopped by NOSPC
                                  tries to open a segment again */
    uint64_t floor_bytes;      /* [const] sb_config.disk_free_floor_bytes */
    uint64_t wa_reinsert;      /* [mu] record bytes written by reclamation */
    uint64_t wear_write0, wear_logical0, wear_reinsert0; /* [const] the
                                  superblock's wear block at open: what
                                  earlier lives of the store wrote */
    uint64_t reclaimed, rc_kept, rc_ram, rc_dropped, nospc; /* [mu] sb_stats */
    uint32_t zlevel;           /* [const] sb_config.compress_level */
    bool salvage;              /* [const] sb_config.open_flags has
                                  SB_OPEN_SALVAGE */
    uint64_t z_records, z_skipped, z_raw, z_stored, z_saved; /* [mu] sb_stats
                                  disk_compress_* */

    /* segments [mu] for id/gen/state/data_end, else [w] */
    sb_seg *segs;              /* (max_segs) */
    uint32_t n_segs;
    uint32_t cur;              /* [w] open segment index; UINT32_MAX: none */
    uint32_t next_seg_id;      /* [w] id of the next segment created: above
                                  every segment file in the directory */

    /* superblock [w] */
    int sb_fd;
    uint32_t slot_bytes;
    uint64_t write_count;
    uint64_t store_id;
    uint64_t next_seq;         /* [w] */
    uint64_t durable_seq;      /* [mu] */

    /* durability tickets [mu] (ticket.c) */
    uint64_t next_wt;          /* the next ticket handed out, from 1 */
    uint64_t next_hidden;      /* the next hidden ticket (ticket.c): a call
                                  that asked for no outcome */
    sb_wset **wsets;           /* (n_wsets) pending, ascending ticket */
    size_t n_wsets, wsets_cap;
    size_t wsets_reserved;     /* places taken by calls under way
                                  (n_wsets + wsets_reserved <= wsets_cap) */
    sb_truns failed;           /* failed tickets no longer pending */
    sb_truns rtickets;         /* durable tickets whose records reclamation
                                  took since */
    sb_wset *wdur_head, *wdur_tail; /* durable tickets still watched, oldest
                                  first (through wnext): reclamation of one
                                  of their blocks makes them reclaimed */
    size_t n_wdur;             /* ...how many */
    uint64_t wdur_nodes;       /* ...their nodes (bounded) */
    bool reclaiming;           /* reclamation is taking records now: a
                                  watched ticket that loses a block is
                                  reclaimed (ticket.c) */

    /* tombstones [mu] (tomb.c) */
    sb_tomb *tq_head, *tq_tail; /* queued, written first */
    sb_tomb *tpend;            /* written, waiting for a sync */
    sb_tomb *tombs;            /* live: records they remove may remain */
    uint64_t n_tombs;          /* on d->tombs */
    bool tomb_mark;            /* the superblock says version 3 from its
                                  next write on ([w] writes it) */
    bool super_tomb;           /* ...and one said so durably: tombstones
                                  may be written */
    uint64_t removal_mark;     /* next_seq when the last removal was
                                  queued: a record written with a smaller
                                  seq of a block a removal took (marked
                                  removed) is dead, one with a larger seq
                                  was placed after its tombstone */
    uint64_t stale_seq;        /* the oldest first_seq of a segment whose
                                  files a failed unlink may have left (0:
                                  none): a later open adopts them */
    uint64_t tombs_written, wa_tomb; /* records and bytes (copies too) */
    uint64_t rec_tombs, rec_removed; /* recovery: tombstones found, records
                                  they removed */

    /* counters [mu] */
    uint64_t write_bytes, read_bytes;
    uint64_t write_ios, read_ios; /* requests: writes finished, reads submitted */
    uint64_t write_errors, read_errors, checksum_failures, denials;
    uint64_t rec_records, rec_pages, rec_points, rec_ns, rec_orphans;
    uint64_t rec_bad_summaries, rec_torn, rec_unlisted, rec_ns_time;
    uint64_t salvaged;         /* 1: this open rebuilt the superblock */
    uint64_t salv_segments, salv_scanned, salv_skipped; /* sb_stats salvage_* */
    uint64_t salv_dropped, salv_dropped_bytes;
};

/* ---- disk.c: files, superblock, segments ------------------------------------ */

/* sb_disk_fault -- [mu] a write, a sync, a seal or a segment's creation
 * failed with rc (an sb_err), or a block was not written because the tier
 * had stopped on one: once the tier is closing, the first such error is
 * what sb_store_close returns. */
static inline void sb_disk_fault(sb_disk *d, int rc)
{
    if (d->closing && !d->close_rc && rc < 0)
        d->close_rc = rc;
}

/* sb_disk_errno -- the sb_err for a negative errno from the I/O layer. */
int sb_disk_errno(int64_t err);

/* sb_disk_seg_name -- "seg-<id>.dat" / ".sum" into buf (32 bytes). */
void sb_disk_seg_name(char *buf, uint32_t id, const char *ext);

/* sb_disk_super_write -- [w] write the superblock (the slot not holding the
 * newest state) listing every segment, and sync it. durable_seq is the
 * caller's. Returns: SB_OK; SB_ERR_IO; SB_ERR_NOSPC; SB_ERR_NOMEM. */
int sb_disk_super_write(sb_disk *d);

/* sb_disk_super_create -- [w] write a new superblock (d->max_segs sets
 * its slot size; a new random store id) under a temporary name: n_writes
 * slot writes (1: a new store, the other slot zeros; 2: both slots sound),
 * then rename it over "superblock" and sync the directory, so a creation
 * cut short leaves what was there before. d->sb_fd becomes its fd (one it
 * held is closed). Returns: SB_OK; SB_ERR_IO; SB_ERR_NOSPC; SB_ERR_NOMEM. */
int sb_disk_super_create(sb_disk *d, int n_writes);

/* sb_disk_seg_write_summary -- [w] write segment i's summary (the records
 * noted with sb_disk_seg_note, data_end its data_end) under a temporary
 * name, sync it, rename it into place and sync the directory; nothing
 * else (salvage.c seals segments before any superblock lists them).
 * Returns: SB_OK; SB_ERR_IO; SB_ERR_NOSPC; SB_ERR_NOMEM. */
int sb_disk_seg_write_summary(sb_disk *d, uint32_t i);

/* sb_disk_seg_seal -- [w] seal segment i (nothing in flight on it): sync it,
 * write its summary (temporary name, sync, rename, sync the directory),
 * mark it sealed in the superblock. Returns: SB_OK or the first error (the
 * segment is sealed in memory either way). */
int sb_disk_seg_seal(sb_disk *d, uint32_t i);

/* sb_disk_seg_open_new -- [w] create the next segment file, preallocated,
 * and make it the open segment in the superblock.
 * Returns: SB_OK; SB_ERR_NOSPC (the cap or the file system is full);
 * SB_ERR_IO; SB_ERR_NOMEM. */
int sb_disk_seg_open_new(sb_disk *d);

/* sb_disk_seg_note -- [w] add the record at off (head h, its tokens and
 * extra) to segment i's summary. Returns: SB_OK; SB_ERR_NOMEM. */
int sb_disk_seg_note(sb_disk *d, uint32_t i, uint64_t off, const sb_rec_head *h,
                     const uint32_t *tokens, const void *extra);

/* sb_disk_seg_free -- release segment i's summary buffers and close its
 * writer fd. */
void sb_disk_seg_free(sb_disk *d, sb_seg *s);

/* sb_disk_admit -- admit b to the writer's queue: reserve its record's
 * bytes in the bucket and return -1, or return why not (a sb_deny). [mu] */
int sb_disk_admit(sb_disk *d, const sb_blk *b);

/* sb_disk_pool_clear -- [mu] empty the pool (the tier closes): what waits
 * in it is denied, the reason it waited for. */
void sb_disk_pool_clear(sb_disk *d);

/* sb_disk_live_segs -- segments open or sealed. [mu] or [w] */
uint32_t sb_disk_live_segs(const sb_disk *d);

/* sb_disk_cap_ok -- does one more segment stay under the cap? [w]
 * sb_disk_floor_ok -- does the file system keep floor_bytes free after one
 * more segment (true when it will not say)? [w] */
bool sb_disk_cap_ok(const sb_disk *d);
bool sb_disk_floor_ok(sb_disk *d);

/* ---- reclaim.c ------------------------------------------------------------------ */

/* sb_disk_reclaim -- [w] reclaim the oldest sealed segment that is not
 * draining, nothing in flight, st->mu not held (see reclaim.c). With
 * copies, hot blocks on disk only are copied out by the writer and the
 * segment drains (the writer frees it with sb_disk_release once the
 * copies are written and nobody holds it); without, they are read into
 * RAM or dropped, and the segment is free on return unless a match or a
 * read holds it (then it drains too). Returns: SB_OK; SB_ERR_NOSPC (no
 * sealed segment to reclaim); SB_ERR_NOMEM. */
int sb_disk_reclaim(sb_disk *d, bool copies);

/* sb_disk_release -- [w] free drained segment v (no copies left, synced
 * since the last was written, not held): its slot, its place in the
 * superblock, its files. A failure is counted (write errors); the slot is
 * free anyway and nothing is inconsistent. */
void sb_disk_release(sb_disk *d, uint32_t v);

/* sb_disk_record_live -- is the segment CLEAN block b names still there
 * (a reclaimed slot may hold another segment by now)? [mu] */
static inline bool sb_disk_record_live(const sb_disk *d, const sb_blk *b)
{
    const sb_drec *r = sb_drec_of(b);
    const sb_seg *s = &d->segs[r->seg];
    return s->state != SB_SEG_FREE && s->id == r->seg_id;
}

/* sb_disk_payload_read -- bytes after the head a read of CLEAN block b's
 * record takes: its payload as stored, padded to 4 KiB. */
static inline uint64_t sb_disk_payload_read(const sb_blk *b)
{
    const sb_drec *r = sb_drec_of(b);
    return r->stored ? sb_fmt_pad(r->stored) : sb_host_blk_data_bytes(b->ns, b->kind);
}

/* sb_disk_pending_add -- bytes joined the writer's queue. [mu] */
static inline void sb_disk_pending_add(sb_disk *d, uint64_t bytes)
{
    d->pending_bytes += bytes;
    if (d->pending_bytes > d->pending_peak)
        d->pending_peak = d->pending_bytes;
}

/* ---- dread.c ------------------------------------------------------------------ */

/* sb_disk_read_record -- read block b's record at *at into payload
 * (sb_host_blk_data_bytes(ns, b->kind) bytes, 4 KiB aligned) and check it as a
 * restore does. Unlocked: takes rd_mu, then st->mu for the counters.
 * Returns: SB_OK; SB_ERR_CORRUPT; SB_ERR_IO; SB_ERR_NOMEM. */
int sb_disk_read_record(sb_disk *d, sb_ns *ns, sb_blk *b, const sb_disk_loc *at,
                        uint8_t *payload);

/* sb_disk_heads_ready -- have the heads' scratch hold at least bytes
 * (at most SB_DISK_HEADS_KEEP), faulted in, so the restores it covers
 * touch no fresh memory for their heads. Unlocked: takes rd_mu.
 * Returns: SB_OK; SB_ERR_NOMEM (the scratch stays as it was). */
int sb_disk_heads_ready(sb_disk *d, size_t bytes);

/* ---- ticket.c ------------------------------------------------------------------ */

/* What happens to a block reaches the tickets waiting for it. [mu]
 *   sb_tkt_queued    b entered the writer's queue
 *   sb_tkt_resolved  b was written (ok; its ticket field set), or will not
 *                    be (denied, its write failed, it left the index)
 *   sb_tkt_short     b, new, is not offered: its commit is too short
 *   sb_tkt_unclean   CLEAN b stopped naming its record (reclamation): it
 *                    is queued again, dirty again or in RAM only
 *   sb_tkt_synced    a sync ran: the queue's tickets up to synced_ticket
 *                    are synced when ok, else every ticket with a block
 *                    written after before (the last good synced_ticket)
 *                    fails
 *   sb_tkt_free_all  the tier closes: every pending ticket goes
 * Reclamation (reclaim.c, and writer.c's copies) sets d->reclaiming while
 * it takes blocks' records: a durable ticket still watched that loses a
 * block then is reclaimed (SB_ERR_RECLAIMED). */
void sb_tkt_queued(sb_disk *d, sb_blk *b);
void sb_tkt_resolved(sb_disk *d, sb_blk *b, bool ok);
void sb_tkt_short(sb_disk *d, sb_blk *b);
void sb_tkt_unclean(sb_disk *d, sb_blk *b);
void sb_tkt_synced(sb_disk *d, uint64_t before, bool ok);
void sb_tkt_free_all(sb_disk *d);

/* ---- tomb.c -------------------------------------------------------------------- */

/* sb_tomb_new -- a tombstone of ns_id for the prefix of n tokens whose
 * last full page has key parent, rest[0, n_rest) after it (copied); not
 * queued. NULL when out of memory. */
sb_tomb *sb_tomb_new(sb_store *st, uint64_t ns_id, const sb_key *parent, uint32_t n,
                     const uint32_t *rest, uint32_t n_rest);

/* sb_tomb_copy -- [mu] a copy of live tombstone t, to be written again
 * because its segment is reclaimed (copy_of t, from t's segment; the
 * same removal sequence). NULL when out of memory. */
sb_tomb *sb_tomb_copy(sb_disk *d, sb_tomb *t);

/* sb_tomb_queue -- [mu] append t to the writer's tombstone queue. */
void sb_tomb_queue(sb_disk *d, sb_tomb *t);

/* sb_tomb_release -- [mu] free t when nothing holds it any more (not
 * queued, pending, live or waited for). */
void sb_tomb_release(sb_disk *d, sb_tomb *t);

/* sb_tomb_live_add / sb_tomb_live_remove -- [mu] t joins / leaves the
 * live list (d->tombs). */
void sb_tomb_live_add(sb_disk *d, sb_tomb *t);
void sb_tomb_live_remove(sb_disk *d, sb_tomb *t);

/* sb_tomb_fail -- [mu] t will not be durable (rc): a new one's caller is
 * told (woken); a copy gives up the drain of its segment (which stays, t's
 * original in it). t leaves the queue or pending list first (caller). */
void sb_tomb_fail(sb_disk *d, sb_tomb *t, int rc);

/* sb_tomb_needed -- [mu] may a segment other than v hold a record that
 * live tombstone t removes (a record older than its removal sequence)? */
bool sb_tomb_needed(const sb_disk *d, const sb_tomb *t, uint32_t v);

/* sb_tomb_free_all -- free every tombstone the tier holds (it closes). */
void sb_tomb_free_all(sb_disk *d);

/* ---- writer.c ------------------------------------------------------------------ */

/* sb_writer_main -- the writer thread's body (arg: the sb_disk). */
void *sb_writer_main(void *arg);

/* ---- recover.c ---------------------------------------------------------------- */

/* sb_disk_recover -- read the superblock (d->sb_fd; -1: there is none),
 * the summaries and the open segments of a store directory that has one,
 * rebuild every namespace's index with disk-only blocks, and seal what was
 * open; with d->salvage, a superblock that cannot be used is first rebuilt
 * from the segment files (salvage.c). Called by sb_disk_open with the tier
 * otherwise set up (mu not held, no thread).
 * Returns: SB_OK; SB_ERR_VERSION (the superblock or, salvaging, a record
 * is of another version: nothing written); SB_ERR_SUPERBLOCK (not
 * salvaging: no usable superblock; nothing written); SB_ERR_IO;
 * SB_ERR_NOSPC (salvaging); SB_ERR_NOMEM. */
int sb_disk_recover(sb_disk *d);

/* sb_disk_read_super -- read and decode the newest valid superblock slot of
 * fd (file size size) into *s, segments into segs (max_segs). A slot whose
 * version is unknown is of another version only when its hash holds
 * (sb_super_other_version); else it is damage (SB_ERR_CORRUPT).
 * Returns: SB_OK; SB_ERR_VERSION (a slot of another version, none valid);
 * SB_ERR_FORMAT; SB_ERR_CORRUPT; SB_ERR_IO; SB_ERR_NOMEM. */
int sb_disk_read_super(sb_io *io, int fd, uint64_t size, sb_super *s, sb_super_seg *segs,
                       uint32_t max_segs);

/* sb_disk_of -- st's disk tier: the state of the store's tier (tier.h),
 * which disk.c's sb_disk_open attaches; NULL without one (or once it
 * closed). */
static inline sb_disk *sb_disk_of(const sb_store *st)
{
    return st->tier.state;
}

#endif /* SB_DISK_INT_H */
