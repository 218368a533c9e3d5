/* snapbank_fsck.h -- offline verification of a store directory: the
 * superblock, every segment's records (heads and payloads) and the summaries
 * of sealed segments, read-only, reported per segment; and its repair: a
 * superblock that cannot be used rebuilt from the segment files.
 *
 * This header is the manual for sb_store_fsck and sb_store_fsck_repair;
 * snapbank.h has the conventions (errors, ownership) they follow.
 *
 * ============================================================================
 * What fsck checks
 * ============================================================================
 *
 * The store directory (store/format/format.h draws every structure):
 *
 *     DIR/LOCK              taken for the duration of the check, when present
 *     DIR/superblock        slot A at 0, slot B at slot_bytes = file size / 2;
 *                           the valid slot (sound, and naming its own
 *                           position) with the larger write_count lists the
 *                           segments, as the store's open picks it
 *     DIR/seg-NNNNNNNN.dat  each non-free segment's records
 *     DIR/seg-NNNNNNNN.sum  each sealed segment's summary
 *
 * For each segment the superblock lists:
 *
 *   free    nothing is read.
 *   sealed  records fill [0, data_end) back to back. Each record's head must
 *           decode at its offset and name this segment and generation, and
 *           end inside data_end; its payload must match its payload hash.
 *           A record whose head fails is a bad head; its length cannot be
 *           trusted, so the scan looks for the next record at each following
 *           4 KiB boundary (a head only decodes at its own offset) and counts
 *           the whole run of blocks between as one bad head. The summary
 *           must decode, name the same segment, generation and data_end, and
 *           list exactly the records found, each with the same seq, key and
 *           payload hash (entries at offsets inside a bad run are excused:
 *           the bad head is the damage; so is a record with a bad payload
 *           it leaves out, as the summary of a salvaged segment does).
 *   open    the end is unknown: the scan runs from 0 and stops at the first
 *           record that does not decode for this segment and generation, or
 *           that the file ends inside. That is the tail (what a crash leaves
 *           of the last writes), reported as data_end, not as damage. A
 *           record whose head decodes but whose payload fails is also the
 *           tail when its seq is above the superblock's durable_seq (a torn
 *           write that was never durable); at or below it, it is a bad
 *           payload and the scan goes on (its head, and so its length, is
 *           sound).
 *
 * A directory holds a store when it holds a superblock file or segment
 * files (seg-*). A store whose superblock cannot be used -- both slots
 * fail their checks, the file is truncated, zeroed or garbage, or it is
 * gone while segment files remain -- is reported with superblock set and
 * nothing else checked; sb_store_fsck_repair rebuilds it (below).
 *
 * fsck never writes a byte of the store. It takes the directory's lock so a
 * store cannot be opened while it reads; taking it writes fsck's pid into
 * LOCK, as every holder does. When LOCK does not exist it is not created (a
 * store that never ran has no lock to honour); when LOCK cannot be opened
 * for writing (a read-only directory or file system) the check runs
 * unlocked (sb_fsck_report.locked says which). A directory that holds no
 * store, or a store of another format version, is not touched at all: the
 * superblock is read and classified before the lock is taken.
 *
 * Usage:
 *
 *     sb_fsck_report *r;
 *     long pid;
 *     int rc = sb_store_fsck("/var/lib/bank", NULL, NULL, &r, &pid);
 *     if (rc == SB_ERR_LOCKED)
 *         fprintf(stderr, "in use by pid %ld\n", pid);
 *     else if (rc == SB_OK) {
 *         bool clean = r->superblock == 0 && r->n_damaged == 0;
 *         ...
 *         sb_fsck_report_free(r);
 *     }
 *
 * ============================================================================
 * Repair
 * ============================================================================
 *
 * sb_store_fsck_repair opens the store with SB_OPEN_SALVAGE (snapbank.h,
 * sb_store_open: a superblock that cannot be used is rebuilt from the
 * segment files; a sound one is used as any open uses it, which seals a
 * segment a crash left open), closes it, then checks the directory as
 * sb_store_fsck does. The report says what the repair found and did
 * (repaired, repair) besides what the check finds afterwards. Records that
 * fail their checks are not rewritten or deleted: they stay in their
 * segment files, dropped from the index, and the check after the repair
 * still reports them as damage.
 *
 * Thread safety: sb_store_fsck and sb_store_fsck_repair keep all their
 * state in the call; calls on different directories (or the same one: the
 * second gets SB_ERR_LOCKED) may run at once from any threads.
 */
#ifndef SNAPBANK_FSCK_H
#define SNAPBANK_FSCK_H

#include <stdint.h>

#include "snapbank.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One segment as the superblock lists it, and what its check found. */
typedef struct sb_fsck_segment {
    uint32_t segment_id;       /* from the superblock */
    uint32_t generation;       /* from the superblock */
    uint32_t state;            /* 0 free, 1 open, 2 sealed (format.h's numbers) */
    uint64_t data_end;         /* bytes of records: the superblock's (sealed,
                                  free) or where the scan found the tail (open) */
    uint64_t records;          /* valid records (head and payload sound) ... */
    uint64_t namespaces;       /* ... of which namespace records */
    uint64_t pages;            /* ... page records */
    uint64_t points;           /* ... point-state records */
    uint64_t bytes_checked;    /* bytes of [0, data_end) the scan covered */
    uint64_t bad_heads;        /* runs of blocks inside data_end where a record
                                  should start and none decodes (sealed only:
                                  in an open segment that is the tail) */
    uint64_t bad_payloads;     /* records with a sound head whose payload
                                  fails its hash */
    uint64_t first_bad_offset; /* file offset of the first bad head, bad
                                  payload or file fault; UINT64_MAX when none */
    int summary;               /* sealed: 0 (sound and matching),
                                  SB_ERR_NOT_FOUND (no summary file),
                                  SB_ERR_FORMAT / SB_ERR_VERSION /
                                  SB_ERR_CORRUPT (it does not decode: not a
                                  summary, another version, a failed hash),
                                  SB_ERR_CORRUPT also when it decodes but does
                                  not match the segment, SB_ERR_IO (unreadable).
                                  Free and open segments: 0 (none expected) */
    int file;                  /* 0, or the segment file's fault:
                                  SB_ERR_NOT_FOUND (missing), SB_ERR_FORMAT
                                  (sealed: it ends inside data_end),
                                  SB_ERR_IO (a read failed); the scan stops
                                  there */
    uint64_t tombstones;       /* valid records that are tombstones (removals,
                                  sb_ns_remove; counted in records too) */
} sb_fsck_segment;

/* What sb_store_fsck_repair found and did before its check (all zero in a
 * report of sb_store_fsck). */
typedef struct sb_fsck_repair {
    int superblock;            /* the superblock before: 0 (sound: nothing to
                                  rebuild; the store was opened), or its
                                  damage as sb_fsck_report.superblock says */
    int salvaged;              /* 1: it was rebuilt from the segment files */
    uint64_t segments;         /* segments the store lists after the repair
                                  (salvaged: the segment files adopted) */
    uint64_t scanned_segments; /* ...of which read record by record (no sound
                                  summary) and sealed with a new summary */
    uint64_t skipped_files;    /* segment files with no record of their own:
                                  left as they were, unlisted */
    uint64_t records;          /* valid records found */
    uint64_t pages;            /* pages put back in the index */
    uint64_t points;           /* point states put back */
    uint64_t namespaces;       /* namespaces put back */
    uint64_t orphans;          /* page and point records not put back: a page
                                  before them is missing or damaged */
    uint64_t dropped_records;  /* what the salvage read and did not keep:
                                  runs of damaged blocks, payloads failing
                                  their hash, records of an older life of
                                  their file */
    uint64_t dropped_bytes;    /* the segment bytes they span */
} sb_fsck_repair;

/* What sb_store_fsck found. */
typedef struct sb_fsck_report {
    int superblock;            /* 0, or why no slot is usable: SB_ERR_CORRUPT
                                  (a slot failed its hash or checks, or says
                                  an unknown version its hash does not
                                  confirm), SB_ERR_FORMAT (a size that does
                                  not split into slots, or no slot has the
                                  magic: truncated, zeroed, garbage),
                                  SB_ERR_NOT_FOUND (no superblock file, and
                                  segment files). Nothing else is checked
                                  then: n_segments is 0 */
    uint32_t superblock_slot;  /* the slot used: 0 (A) or 1 (B) */
    int other_slot;            /* the other slot's decode result: 0 or an
                                  sb_err. Informational: a torn slot write
                                  leaves one slot bad, which is not damage */
    uint64_t write_count;      /* of the slot used */
    uint64_t segment_bytes;    /* from the superblock */
    uint64_t durable_seq;      /* from the superblock */
    int locked;                /* 1: DIR/LOCK was held for the whole check;
                                  0: there is no LOCK file, or it could not be
                                  opened for writing, so nothing stopped a
                                  store from opening meanwhile */
    uint32_t n_segments;       /* entries of segments */
    sb_fsck_segment *segments; /* (n_segments), in superblock order */
    uint32_t n_damaged;        /* segments with a bad head or payload, a
                                  summary or a file fault */
    uint64_t records;          /* valid records, all segments */
    uint64_t bad_records;      /* bad heads + bad payloads, all segments */
    uint64_t bytes_checked;    /* all segments */
    uint32_t n_segment_files;  /* seg-NNNNNNNN.dat files in the directory */
    int repaired;              /* 1: a report of sb_store_fsck_repair */
    sb_fsck_repair repair;     /* what the repair did (repaired only) */
} sb_fsck_report;

/* Progress callback: done bytes of total checked so far. Called from
 * sb_store_fsck's thread, with done rising to total (the last call has
 * done == total); it must not free or reuse the report. */
typedef void (*sb_fsck_progress_fn)(void *ctx, uint64_t done, uint64_t total);

/* sb_store_fsck -- check the store directory dir (see the top of this
 * file) without changing it.
 *
 * progress, when not NULL, is called with ctx every few MiB and at the end.
 * The store is clean when the call returns SB_OK with (*out)->superblock
 * == 0 and (*out)->n_damaged == 0; a damaged store is still SB_OK, with the
 * damage in the report.
 *
 * On SB_OK *out is owned by the caller: free it with sb_fsck_report_free.
 * holder_pid may be NULL; otherwise it receives, on SB_ERR_LOCKED, the pid
 * written in DIR/LOCK by its holder (0 when unreadable), else 0.
 * Returns: SB_OK; SB_ERR_INVAL (dir or out NULL); SB_ERR_NOMEM;
 * SB_ERR_LOCKED (another sb_io holds DIR/LOCK: a store is open on it, in
 * this process or another); SB_ERR_FORMAT (no store here: dir does not
 * exist, or holds neither a superblock file nor segment files);
 * SB_ERR_VERSION (no valid slot, and one is of another format version --
 * its hash holds -- which the store would refuse too: nothing read
 * further, nothing written, not even LOCK; a valid slot next to one of
 * another version is used, and other_slot says SB_ERR_VERSION); SB_ERR_IO
 * (dir, the superblock or LOCK cannot be opened or read). On failure *out
 * is NULL. */
SB_API int sb_store_fsck(const char *dir, sb_fsck_progress_fn progress, void *ctx,
                         sb_fsck_report **out, long *holder_pid);

/* sb_store_fsck_repair -- repair the store directory dir (see "Repair"
 * above), then check it as sb_store_fsck does.
 *
 * A directory that holds no store, or a store of another format version,
 * is refused before anything is touched. progress, ctx and holder_pid are
 * sb_store_fsck's (progress covers the check after the repair). On SB_OK
 * *out is owned by the caller (sb_fsck_report_free), with repaired 1 and
 * the repair's figures in repair; the repaired store is clean when
 * superblock and n_damaged are 0 and repair.dropped_records is 0.
 * Returns: SB_OK; SB_ERR_INVAL (dir or out NULL); SB_ERR_FORMAT (no store
 * here, nothing written); SB_ERR_VERSION (another format version: nothing
 * written); SB_ERR_LOCKED (a store is open on dir: nothing written;
 * *holder_pid as for sb_store_fsck); SB_ERR_IO, SB_ERR_NOSPC (a read, or a
 * summary or superblock write of the salvage, failed: the superblock is
 * the damaged one still, unless its replacement was already in place);
 * SB_ERR_NOMEM. On failure *out is NULL. */
SB_API int sb_store_fsck_repair(const char *dir, sb_fsck_progress_fn progress, void *ctx,
                                sb_fsck_report **out, long *holder_pid);

/* sb_fsck_report_free -- free a report and its segments. NULL is a no-op. */
SB_API void sb_fsck_report_free(sb_fsck_report *r);

#ifdef __cplusplus
}
#endif

#endif /* SNAPBANK_FSCK_H */
