/* replay.c -- the regression driver: runs a fuzz harness's
 * LLVMFuzzerTestOneInput over files without libFuzzer, so seed corpora and
 * regression inputs run as ordinary tests under any compiler (the idea of
 * zstd's tests/fuzz/regression_driver.c).
 *
 * Usage: NAME_replay PATH...
 *   Each PATH is a file, or a directory whose files are replayed in name
 *   order, descending into subdirectories; names starting with '.' are
 *   skipped. A harness reports a violated property by aborting, so a
 *   failing input ends the process with SIGABRT (its name is printed first
 *   when REPLAY_VERBOSE is set, and always on stderr before it runs when
 *   replaying a single file).
 *
 * Exit status: 0 when every input ran; 1 when a path could not be read or
 * no input was found at all (an empty corpus must not pass silently);
 * 2 on a usage error.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct replay {
    size_t n_run;    /* inputs replayed */
    int failed;      /* a path could not be read */
    int verbose;     /* print each input's name before running it */
} replay;

static void run_path(replay *r, const char *path);

static void run_file(replay *r, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        r->failed = 1;
        return;
    }
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        uint8_t *b2 = realloc(buf, cap * 2);
        if (!b2) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = b2;
        cap *= 2;
    }
    int err = ferror(f);
    fclose(f);
    if (!buf || err) {
        fprintf(stderr, "replay: %s: %s\n", path, buf ? "read error" : "out of memory");
        free(buf);
        r->failed = 1;
        return;
    }
    if (r->verbose)
        fprintf(stderr, "replay: %s (%zu bytes)\n", path, n);
    /* Exact size: libFuzzer hands the harness a buffer of exactly n bytes,
     * so ASan catches reads past the end here too. */
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact) {
        free(buf);
        r->failed = 1;
        return;
    }
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    r->n_run++;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void run_dir(replay *r, const char *path)
{
    DIR *d = opendir(path);
    if (!d) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        r->failed = 1;
        return;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **n2 = realloc(names, cap * sizeof *names);
            if (!n2)
                break;
            names = n2;
        }
        size_t len = strlen(path) + 1 + strlen(e->d_name) + 1;
        if (!(names[n] = malloc(len)))
            break;
        snprintf(names[n], len, "%s/%s", path, e->d_name);
        n++;
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof *names, cmp_names);
    for (size_t i = 0; i < n; i++) {
        run_path(r, names[i]);
        free(names[i]);
    }
    free(names);
}

static void run_path(replay *r, const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        r->failed = 1;
    } else if (S_ISDIR(sb.st_mode)) {
        run_dir(r, path);
    } else {
        run_file(r, path);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE_OR_DIR...\n", argv[0]);
        return 2;
    }
    const char *v = getenv("REPLAY_VERBOSE");
    replay r = { .verbose = v && *v && *v != '0' };
    if (argc == 2) {
        struct stat sb;
        if (stat(argv[1], &sb) == 0 && !S_ISDIR(sb.st_mode))
            r.verbose = 1;
    }
    for (int i = 1; i < argc; i++)
        run_path(&r, argv[i]);
    if (r.n_run == 0) {
        fprintf(stderr, "replay: no inputs found\n");
        return 1;
    }
    fprintf(stderr, "replay: %zu inputs ran%s\n", r.n_run,
            r.failed ? ", some paths could not be read" : "");
    return r.failed ? 1 : 0;
}
