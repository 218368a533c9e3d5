/* stat.c -- `snapbank stat DIR [--json]`: open the store in DIR the way an
 * engine restarting on it would, and report what recovery found and
 * dropped, what the disk tier holds, and what it has written over its life
 * (write amplification). Exit status: 0 opened, 1 the store could not be
 * opened, 2 usage error. */
#include <dirent.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "snapbank.h"

static void stat_usage(FILE *f)
{
    fprintf(f,
            "usage: snapbank stat DIR [--json]\n\n"
            "Opens the store in DIR (or in DIR/store, a runtime bank directory) as\n"
            "an engine restarting on it would (recovering its index from the\n"
            "superblock, the segment summaries and the tail of the segment that\n"
            "was open, which open then seals), prints what it found and what it\n"
            "dropped, what the tier holds and what it has written over its life\n"
            "(write amplification), and closes it. Nothing already stored is\n"
            "changed; a segment left open by a crash is sealed with a summary. A\n"
            "directory without a store is refused, never made one.\n"
            "Use 'snapbank fsck DIR' to verify every record's checksum.\n\n"
            "options:\n"
            "  --json    one JSON object instead of the table\n\n"
            "exit status: 0 opened, 1 the store could not be opened, 2 usage.\n");
}

/* Does dir hold a store: a superblock file, or segment files (a store
 * that lost its superblock, which open then names)? */
static bool holds_store(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/superblock", dir);
    if (access(path, F_OK) == 0)
        return true;
    DIR *d = opendir(dir);
    bool seg = false;
    for (struct dirent *e; d && !seg && (e = readdir(d));)
        seg = !strncmp(e->d_name, "seg-", 4);
    if (d)
        closedir(d);
    return seg;
}

/* One reported figure: its name and value. */
typedef struct fig {
    const char *name;
    uint64_t v;
    const char *help;
} fig;

int sb_cli_stat(int argc, char **argv)
{
    const char *dir = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            stat_usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (argv[i][0] == '-' || dir) {
            fprintf(stderr, "snapbank stat: unexpected argument '%s'\n\n", argv[i]);
            stat_usage(stderr);
            return 2;
        } else {
            dir = argv[i];
        }
    }
    if (!dir) {
        stat_usage(stderr);
        return 2;
    }
    /* Never create a store: DIR holds one (a superblock or segment files),
     * or is a bank directory of the runtime (its store in DIR/store). */
    char sub[4096];
    snprintf(sub, sizeof sub, "%s/store", dir);
    if (!holds_store(dir)) {
        if (!holds_store(sub)) {
            fprintf(stderr, "snapbank stat: %s: no store here (no superblock or segment file "
                            "in it or in its store/ directory)\n", dir);
            return 1;
        }
        dir = sub;
    }
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.dir = dir;
    cfg.ram_bytes = 64ull << 20; /* stat reads no page */
    sb_store *st = NULL;
    int rc = sb_store_open(&cfg, &st);
    if (rc != SB_OK) {
        fprintf(stderr, "snapbank stat: %s: cannot open the store: %s\n", dir, sb_strerror(rc));
        if (rc == SB_ERR_SUPERBLOCK)
            fprintf(stderr, "snapbank stat: to salvage it: snapbank fsck --repair %s\n", dir);
        return 1;
    }
    sb_stats s;
    sb_store_stats(st, &s);
    sb_store_close(st);
    const fig figs[] = {
        { "segments", s.disk_segments, "segment files" },
        { "disk_bytes", s.disk_bytes, "bytes of live records" },
        { "disk_bytes_limit", s.disk_bytes_limit, "the cap in effect" },
        { "namespaces", s.recovered_namespaces, "namespaces recovered" },
        { "records", s.recovered_records, "valid records found" },
        { "pages", s.recovered_pages, "pages put back in the index" },
        { "points", s.recovered_points, "point states put back" },
        { "index_tokens", s.index_tokens, "tokens the index holds" },
        { "orphans", s.recovery_orphans, "records dropped: the pages before them missing" },
        { "bad_summaries", s.recovery_bad_summaries, "summaries replaced by a scan" },
        { "torn", s.recovery_torn, "segments ending in damaged bytes or missing" },
        { "durable_seq", s.durable_seq, "last sequence number known durable" },
        { "recovery_us", s.recovery_ns / 1000, "time spent recovering, microseconds" },
        { "written_bytes", s.disk_life_write_bytes, "every byte the tier wrote, its life long" },
        { "state_bytes", s.disk_life_logical_bytes, "...of which state (token slices, points)" },
        { "reinsert_bytes", s.disk_life_reinsert_bytes, "...rewritten by reclamation" },
    };
    size_t n = sizeof figs / sizeof *figs;
    double wa = s.disk_life_logical_bytes
                    ? (double)s.disk_life_write_bytes / (double)s.disk_life_logical_bytes
                    : 0;
    if (json) {
        printf("{\"dir\": \"");
        for (const char *p = dir; *p; p++)
            printf(*p == '"' || *p == '\\' ? "\\%c" : "%c", *p);
        printf("\"");
        for (size_t i = 0; i < n; i++)
            printf(", \"%s\": %" PRIu64, figs[i].name, figs[i].v);
        printf(", \"write_amplification\": %.4f}\n", wa);
    } else {
        printf("store %s\n", dir);
        for (size_t i = 0; i < n; i++)
            printf("  %-18s %14" PRIu64 "  %s\n", figs[i].name, figs[i].v, figs[i].help);
        printf("  %-18s %14.3f  %s\n", "write_amp", wa,
               "written_bytes / state_bytes (0: nothing written yet)");
        if (s.recovery_orphans || s.recovery_bad_summaries || s.recovery_torn)
            printf("damage was found and dropped; 'snapbank fsck %s' shows where\n", dir);
    }
    return 0;
}
