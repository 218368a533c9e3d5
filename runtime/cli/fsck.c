/* fsck.c -- `snapbank fsck DIR [--quiet] [--repair]`: verify a store
 * directory offline with sb_store_fsck and print what it found, segment by
 * segment; with --repair, first rebuild a superblock that cannot be used
 * from the segment files (sb_store_fsck_repair) and print what was rebuilt
 * and dropped. Exit status: 0 clean, 1 damage found (or, repairing,
 * records dropped), 2 usage error or the check could not run (no store, a
 * store in use, another format version, an I/O error). */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/rt.h"
#include "cli.h"
#include "snapbank_fsck.h"

#define BAR_WIDTH 40

static void fsck_usage(FILE *f)
{
    fprintf(f,
            "usage: snapbank fsck DIR [--quiet] [--repair]\n\n"
            "Checks the store directory DIR offline, reading every byte and writing\n"
            "none: the superblock (the newer valid slot), every record of every\n"
            "segment it lists (head checksum, segment and generation, payload\n"
            "checksum) and the summary of each sealed segment (it must decode and\n"
            "list exactly the records found). In the open segment, the first record\n"
            "that does not decode is its tail (what a crash leaves), not damage.\n"
            "DIR's lock is held while checking: a store open on DIR makes fsck stop.\n\n"
            "Prints a progress bar on a terminal, then one line per segment: id,\n"
            "generation, state, valid records, of which pages, bad heads (runs of\n"
            "blocks where a record should start and none decodes), bad payloads,\n"
            "summary status, the first bad offset and notes; then a totals line.\n\n"
            "A store whose superblock cannot be used (both slots damaged, the file\n"
            "truncated, zeroed or gone) is reported, and nothing else can be checked.\n\n"
            "options:\n"
            "  --quiet   no progress and no table; one line when damage is found\n"
            "  --repair  open the store as an engine would, rebuilding a superblock\n"
            "            that cannot be used from the segment files (every record\n"
            "            whose checksums hold is kept; the rest is dropped, never\n"
            "            served; a segment read record by record is sealed with a\n"
            "            new summary), print what was rebuilt and dropped, then\n"
            "            check as above. Segment files are never rewritten: damage\n"
            "            in them is still reported. The library does the same on\n"
            "            sb_store_open with sb_config.open_flags = SB_OPEN_SALVAGE.\n\n"
            "exit status: 0 clean, 1 damage found (with --repair: also records\n"
            "dropped), 2 usage error or the check could not run (no store in DIR,\n"
            "DIR in use, another format version, I/O).\n");
}

/* ---- progress bar ---------------------------------------------------------- */

typedef struct bar {
    double last;             /* monotonic seconds of the last draw */
    bool drawn;              /* something is on the line */
} bar;

/* Redrawn at most ten times a second, and at the end. */
static void draw_bar(void *ctx, uint64_t done, uint64_t total)
{
    bar *b = ctx;
    double t = sb_rt_now_s();
    if (done < total && b->drawn && t - b->last < 0.1)
        return;
    b->last = t;
    b->drawn = true;
    double frac = total ? (double)done / (double)total : 1.0;
    int fill = (int)(frac * BAR_WIDTH);
    char cells[BAR_WIDTH + 1];
    for (int i = 0; i < BAR_WIDTH; i++)
        cells[i] = i < fill ? '#' : '.';
    cells[BAR_WIDTH] = 0;
    fprintf(stderr, "\rchecking [%s] %3d%%  %.1f / %.1f MiB ", cells, (int)(frac * 100),
            done / 1048576.0, total / 1048576.0);
    fflush(stderr);
}

static void clear_bar(const bar *b)
{
    if (b->drawn)
        fprintf(stderr, "\r%*s\r", BAR_WIDTH + 48, "");
}

/* ---- the report -------------------------------------------------------------- */

static const char *state_name(uint32_t state)
{
    return state == 0 ? "free" : state == 1 ? "open" : state == 2 ? "sealed" : "?";
}

/* A short word for an sb_err found in a summary or a slot. */
static const char *fault_word(int err)
{
    switch (err) {
    case SB_OK:
        return "ok";
    case SB_ERR_NOT_FOUND:
        return "missing";
    case SB_ERR_FORMAT:
        return "malformed";
    case SB_ERR_VERSION:
        return "other-version";
    case SB_ERR_CORRUPT:
        return "corrupt";
    case SB_ERR_IO:
        return "unreadable";
    default:
        return "error";
    }
}

static bool segment_damaged(const sb_fsck_segment *s)
{
    return s->bad_heads || s->bad_payloads || s->summary || s->file;
}

static void print_segment(const sb_fsck_segment *s)
{
    char first[24] = "-", note[96] = "";
    if (s->first_bad_offset != UINT64_MAX)
        snprintf(first, sizeof first, "%" PRIu64, s->first_bad_offset);
    if (s->file == SB_ERR_NOT_FOUND)
        snprintf(note, sizeof note, "segment file missing");
    else if (s->file == SB_ERR_FORMAT)
        snprintf(note, sizeof note, "segment file ends inside data_end (%" PRIu64 ")",
                 s->data_end);
    else if (s->file)
        snprintf(note, sizeof note, "segment file: %s", sb_strerror(s->file));
    else if (s->state == 1)
        snprintf(note, sizeof note, "tail at offset %" PRIu64, s->data_end);
    printf("%8" PRIu32 " %6" PRIu32 "  %-6s %9" PRIu64 " %9" PRIu64 " %9" PRIu64 " %12" PRIu64
           "  %-10s %-*s%s%s\n",
           s->segment_id, s->generation, state_name(s->state), s->records, s->pages,
           s->bad_heads, s->bad_payloads, s->state == 2 ? fault_word(s->summary) : "-",
           *note ? 12 : 0, first, *note ? " " : "", note);
}

/* What a superblock's damage code means, for a sentence. */
static const char *super_damage(int err)
{
    switch (err) {
    case SB_ERR_CORRUPT:
        return "both slots fail their checks";
    case SB_ERR_FORMAT:
        return "no usable slot (the file is truncated, zeroed or not a superblock)";
    case SB_ERR_NOT_FOUND:
        return "missing";
    default:
        return sb_strerror(err);
    }
}

static void print_repair(const char *dir, const sb_fsck_report *r)
{
    const sb_fsck_repair *p = &r->repair;
    printf("snapbank fsck --repair: %s\n", dir);
    if (p->salvaged)
        printf("superblock: %s: rebuilt from %" PRIu64 " segment file%s (%" PRIu64
               " by %s summar%s, %" PRIu64 " read record by record and sealed with a new "
               "summary)\n",
               super_damage(p->superblock), p->segments, p->segments == 1 ? "" : "s",
               p->segments - p->scanned_segments,
               p->segments - p->scanned_segments == 1 ? "its" : "their",
               p->segments - p->scanned_segments == 1 ? "y" : "ies", p->scanned_segments);
    else
        printf("superblock: sound, nothing to rebuild (the store was opened and closed: a "
               "segment left open is sealed)\n");
    if (p->skipped_files)
        printf("skipped: %" PRIu64 " segment file%s with no record of %s own, left as %s\n",
               p->skipped_files, p->skipped_files == 1 ? "" : "s",
               p->skipped_files == 1 ? "its" : "their",
               p->skipped_files == 1 ? "it is" : "they are");
    printf("kept: %" PRIu64 " records; put back %" PRIu64 " pages, %" PRIu64
           " point states, %" PRIu64 " namespace%s; %" PRIu64
           " orphans (a page before them missing)\n",
           p->records, p->pages, p->points, p->namespaces, p->namespaces == 1 ? "" : "s",
           p->orphans);
    printf("dropped: %" PRIu64 " record%s or damaged run%s, %.1f KiB (checksums that fail, "
           "stale generations)\n\n",
           p->dropped_records, p->dropped_records == 1 ? "" : "s",
           p->dropped_records == 1 ? "" : "s", p->dropped_bytes / 1024.0);
}

/* "DAMAGED: 1 segment, 2 bad records" */
static void print_damage(const sb_fsck_report *r)
{
    printf("DAMAGED: %" PRIu32 " segment%s, %" PRIu64 " bad record%s\n", r->n_damaged,
           r->n_damaged == 1 ? "" : "s", r->bad_records, r->bad_records == 1 ? "" : "s");
}

static void print_report(const char *dir, const sb_fsck_report *r)
{
    printf("snapbank fsck: %s\n", dir);
    if (!r->locked)
        printf("note: checked without the lock (no LOCK file, or it is read-only to us)\n");
    printf("superblock: slot %c, write %" PRIu64 " (slot %c: %s), segment_bytes %" PRIu64
           ", durable_seq %" PRIu64 "\n\n",
           r->superblock_slot ? 'B' : 'A', r->write_count, r->superblock_slot ? 'A' : 'B',
           r->other_slot ? fault_word(r->other_slot) : "ok", r->segment_bytes, r->durable_seq);
    printf("%8s %6s  %-6s %9s %9s %9s %12s  %-10s %s\n", "segment", "gen", "state",
           "records", "pages", "bad-heads", "bad-payloads", "summary", "first-bad    notes");
    for (uint32_t i = 0; i < r->n_segments; i++)
        print_segment(&r->segments[i]);
}

int sb_cli_fsck(int argc, char **argv)
{
    const char *dir = NULL;
    bool quiet = false, repair = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fsck_usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--quiet") || !strcmp(argv[i], "-q")) {
            quiet = true;
        } else if (!strcmp(argv[i], "--repair")) {
            repair = true;
        } else if (argv[i][0] == '-' || dir) {
            fprintf(stderr, "snapbank fsck: unexpected argument '%s'\n\n", argv[i]);
            fsck_usage(stderr);
            return 2;
        } else {
            dir = argv[i];
        }
    }
    if (!dir) {
        fsck_usage(stderr);
        return 2;
    }
    /* The library says "not a store" for a missing directory; say why. */
    struct stat st;
    errno = 0;
    if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "snapbank fsck: %s: %s\n", dir,
                errno ? strerror(errno) : "not a directory");
        return 2;
    }

    bar b = { 0 };
    bool show_bar = !quiet && isatty(STDERR_FILENO);
    sb_fsck_report *r;
    long pid;
    int rc = repair ? sb_store_fsck_repair(dir, show_bar ? draw_bar : NULL, &b, &r, &pid)
                    : sb_store_fsck(dir, show_bar ? draw_bar : NULL, &b, &r, &pid);
    clear_bar(&b);
    if (rc == SB_ERR_LOCKED) {
        fprintf(stderr, "snapbank fsck: %s: %s (held by pid %ld): close the store first\n", dir,
                sb_strerror(rc), pid);
        return 2;
    }
    if (rc == SB_ERR_FORMAT) {
        fprintf(stderr, "snapbank fsck: %s: no store here (no superblock and no segment "
                        "files)%s\n", dir, repair ? ": nothing to repair, nothing written" : "");
        return 2;
    }
    if (rc != SB_OK) {
        fprintf(stderr, "snapbank fsck: %s: %s%s\n", dir, sb_strerror(rc),
                rc == SB_ERR_VERSION ? " (left untouched)" : "");
        return 2;
    }
    if (r->repaired && !quiet)
        print_repair(dir, r);
    if (r->superblock) {
        printf("snapbank fsck: %s: superblock: %s (%" PRIu32 " segment file%s); no segment "
               "can be checked.\n"
               "Run 'snapbank fsck --repair %s' to rebuild it from the segment files (records "
               "whose checksums fail are dropped, never served); an engine can open the store "
               "with sb_config.open_flags = SB_OPEN_SALVAGE to the same effect.\n",
               dir, super_damage(r->superblock), r->n_segment_files,
               r->n_segment_files == 1 ? "" : "s", dir);
        sb_fsck_report_free(r);
        return 1;
    }
    bool clean = r->n_damaged == 0 && !(r->repaired && r->repair.dropped_records);
    if (!quiet) {
        print_report(dir, r);
        printf("\ntotal: %" PRIu32 " segments, %" PRIu64 " records, %.1f MiB checked: ",
               r->n_segments, r->records, r->bytes_checked / 1048576.0);
        if (r->n_damaged == 0)
            printf("clean\n");
        else
            print_damage(r);
    } else if (!clean) {
        printf("snapbank fsck: %s: ", dir);
        if (r->repaired && r->repair.dropped_records)
            printf("repair dropped %" PRIu64 " records or damaged runs (%.1f KiB)%s",
                   r->repair.dropped_records, r->repair.dropped_bytes / 1024.0,
                   r->n_damaged ? "; " : "\n");
        if (r->n_damaged)
            print_damage(r);
        for (uint32_t i = 0; i < r->n_segments; i++)
            if (segment_damaged(&r->segments[i]))
                print_segment(&r->segments[i]);
    }
    sb_fsck_report_free(r);
    return clean ? 0 : 1;
}
