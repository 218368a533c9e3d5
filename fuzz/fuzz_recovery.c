/* fuzz_recovery.c -- libFuzzer harness: opening a store directory whose files
 * are arbitrary (store/disk/recover.c, with store/disk/disk.c and store/disk/dread.c behind
 * it), on the in-memory file system of store/disk/io.h.
 *
 * Property. sb_store_open_io either refuses the directory with a clean
 * error (SB_ERR_SUPERBLOCK, SB_ERR_VERSION, SB_ERR_IO) or opens
 * it, and never crashes, hangs or leaks (ASan/UBSan see to that). A
 * refusal changes no file (LOCK aside: the open held the lock). Refused
 * with SB_ERR_SUPERBLOCK (no usable superblock), the directory is opened
 * again with SB_OPEN_SALVAGE, which rebuilds the superblock from the
 * segment files: that open succeeds or refuses with SB_ERR_VERSION or
 * SB_ERR_IO (never SB_ERR_SUPERBLOCK), reports the salvage in its stats,
 * and the store it opens is held to everything below, the reopen included
 * (without the flag: the rebuilt superblock must be sound). An opened
 * store:
 *   - passes sb_store_check, after open and after every probe;
 *   - never serves a wrong byte: for each probe sequence of the fixed world
 *     (fuzz_recovery.h) it restores whatever prefix L the match gives, and
 *     the bytes (and the point state, when the match has one) equal the
 *     synthetic state of that prefix. A restore that meets a damaged record
 *     returns SB_ERR_CORRUPT or SB_ERR_IO with a shorter match, and the
 *     shorter prefix is checked instead. This is the reference-model check
 *     behind "never serves a page that fails its checksum";
 *   - closes with SB_OK, and the directory it leaves reopens with SB_OK,
 *     serving bit-exact again and at least every prefix the first session
 *     restored, unless that session reclaimed segments under its cap (a
 *     clean close loses nothing that was readable; lengths are
 *     compared as a client sees them, matching again after a restore that
 *     met damage until one does not);
 *   - keeps working: two sequences put after recovery and flushed (SB_OK)
 *     come back whole from the reopened store.
 *
 * Input (little-endian):
 *   byte 0   repair (FR_REPAIR_*): recompute, after the mutation, the
 *            superblock slot hashes, the head hash of every 4 KiB block of
 *            a .dat file that reads as a record head, and the entry head
 *            hashes and file hash of summaries -- so the checks behind the
 *            checksums get fuzzed too. Payload hashes are never repaired: a
 *            payload whose hash matches is by definition what was written.
 *   byte 1   config (FR_CFG_*): small RAM budget, the put phase, short
 *            max_seq_tokens, the reopen phase
 *   byte 2   drop: bit i set skips the i-th file entry (i < 8)
 *   byte 3   puts: the put phase puts sequences (b % 12) and (b / 16 % 12)
 *   then file entries to the end of the input, each:
 *     u8   name: bits 0-2 kind (FR_F_*: superblock, seg-<id>.dat,
 *          seg-<id>.sum, superblock.tmp, seg-<id>.sum.tmp, LOCK; 6 and 7
 *          read as superblock), bits 3-7 the segment id
 *     u32  file size (cut to FR_FILE_MAX)
 *     u8   n_extents, then each: u32 offset, u16 length, the bytes
 *          (clipped to the file size; the rest of the file is zeros)
 *   A name given twice is one file: the later entry resizes it and writes
 *   its extents over it. A truncated entry keeps what it has.
 *
 * Store bugs this harness found (pinned by tests/test_corrupt.c's
 * regression tests): a re-put point state lost at reopen to its older
 * record; a namespace opened from its first description collected, not the
 * newest; new segments named after the last listed id + 1 and written over
 * live files; NULL + 0 in seal_found; a summary's entry count reserved
 * before it was checked (fixed in bb910a4); a record seq of 2^64 - 1
 * wrapping the next seq (832388f); segment ids wrapping near 2^32 and a
 * huge segment_bytes wrapping the cap check (baed191).
 *
 * Set SB_FUZZ_TRACE=1 to print the files, the open's result, the recovery
 * counters and every probe's result.
 *
 * gen_recovery_seeds.c writes real stores (run on this backend, then dumped
 * file by file) in this format.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "disk.h"
#include "format.h"
#include "fuzz_recovery.h"
#include "io.h"
#include "open.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FAIL(...)                                                              \
    do {                                                                       \
        fprintf(stderr, "fuzz_recovery: " __VA_ARGS__);                        \
        fputc('\n', stderr);                                                   \
        abort();                                                               \
    } while (0)

/* ---- the world ------------------------------------------------------------------ */

const fr_layout fr_layouts[FR_N_LAYOUTS] = {
    { .model = "recov-a", .page_tokens = 4, .n_tensors = 2, .bpt = { 16, 8 },
      .point_bytes = 24 },
    { .model = "recov-b", .page_tokens = 8, .n_tensors = 1, .bpt = { 24 },
      .point_bytes = 16, .flags = SB_LAYOUT_POINT_REQUIRED },
};

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void fr_world(fr_seq *seqs)
{
    uint64_t rng = 0x5eed2ec0;
    memset(seqs, 0, FR_N_SEQ * sizeof *seqs);
    for (int i = 0; i < FR_N_SEQ; i++) {
        fr_seq *s = &seqs[i];
        s->layout = (int)(splitmix(&rng) % FR_N_LAYOUTS);
        s->scope = (int)(splitmix(&rng) % FR_N_SCOPES);
        s->point = splitmix(&rng) % 2;
        s->n = 3 + splitmix(&rng) % (FR_MAX_TOK - 2);
        for (size_t k = 0; k < s->n; k++)
            s->tok[k] = (uint32_t)(splitmix(&rng) % 20);
        /* Share a prefix with an earlier sequence of the same namespace. */
        for (int j = i - 1; j >= 0; j--) {
            const fr_seq *o = &seqs[j];
            if (o->layout != s->layout || o->scope != s->scope)
                continue;
            size_t k = o->n < s->n ? o->n : s->n;
            k = splitmix(&rng) % (k + 1);
            memcpy(s->tok, o->tok, k * sizeof *s->tok);
            break;
        }
    }
}

int fr_ns_open(sb_store *st, int layout, int scope, sb_ns **out)
{
    const fr_layout *l = &fr_layouts[layout];
    sb_layout lay = { .model_id = l->model, .model_id_bytes = strlen(l->model),
                      .page_tokens = l->page_tokens, .n_tensors = l->n_tensors,
                      .bytes_per_token = l->bpt, .point_bytes = l->point_bytes,
                      .flags = l->flags };
    char sc[4] = { 's', (char)('0' + scope), 0, 0 };
    return sb_ns_open(st, &lay, sc, 2, out);
}

static uint64_t model_seed(const fr_layout *l)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *m = l->model; *m; m++)
        h = (h ^ (uint8_t)*m) * 1099511628211ull;
    return h;
}

static void fill(uint8_t *dst, size_t bytes, uint64_t seed)
{
    for (size_t i = 0; i < bytes; i += 8) {
        uint64_t v = splitmix(&seed);
        memcpy(dst + i, &v, bytes - i < 8 ? bytes - i : 8);
    }
}

void fr_state(const fr_layout *l, const uint32_t *tokens, size_t n, uint8_t *const *bufs)
{
    uint64_t h = model_seed(l);
    for (size_t i = 0; i < n; i++) {
        uint64_t s = h ^ tokens[i];
        h = splitmix(&s);
        for (uint32_t t = 0; t < l->n_tensors; t++)
            fill(bufs[t] + i * l->bpt[t], l->bpt[t], h + t);
    }
}

void fr_point(const fr_layout *l, const uint32_t *tokens, size_t n, uint8_t *out)
{
    uint64_t h = model_seed(l) ^ 0x706f696e74ull;
    for (size_t i = 0; i < n; i++) {
        uint64_t s = h ^ tokens[i];
        h = splitmix(&s);
    }
    fill(out, l->point_bytes, h ^ n);
}

int fr_put(sb_store *st, const fr_seq *s)
{
    const fr_layout *l = &fr_layouts[s->layout];
    sb_ns *ns = NULL;
    int rc = fr_ns_open(st, s->layout, s->scope, &ns);
    if (rc != SB_OK)
        return rc;
    uint8_t *bufs[2] = { NULL, NULL };
    uint8_t point[64];
    rc = SB_ERR_NOMEM;
    for (uint32_t t = 0; t < l->n_tensors; t++)
        if (!(bufs[t] = malloc(s->n * l->bpt[t])))
            goto out;
    fr_state(l, s->tok, s->n, bufs);
    bool with_point = s->point || (l->flags & SB_LAYOUT_POINT_REQUIRED);
    if (with_point)
        fr_point(l, s->tok, s->n, point);
    const void *src[2] = { bufs[0], bufs[1] };
    size_t stored = 0;
    rc = sb_ns_put(ns, s->tok, s->n, src, with_point ? point : NULL, &stored);
out:
    free(bufs[0]);
    free(bufs[1]);
    sb_ns_close(ns);
    return rc;
}

/* ---- the input: files ----------------------------------------------------------- */

#define FR_MAX_FILES 64

typedef struct ffile {
    char name[40];
    int kind;
    uint8_t *buf;              /* size bytes */
    uint32_t size;
} ffile;

typedef struct fdir {
    ffile f[FR_MAX_FILES];
    int n;
} fdir;

static uint32_t get32(const uint8_t *p)
{
    return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
    return get32(p) | (uint64_t)get32(p + 4) << 32;
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void file_name(char *buf, int kind, uint32_t id)
{
    switch (kind) {
    case FR_F_DAT:
        snprintf(buf, 40, "seg-%08u.dat", id);
        break;
    case FR_F_SUM:
        snprintf(buf, 40, "seg-%08u.sum", id);
        break;
    case FR_F_SUPER_TMP:
        snprintf(buf, 40, "superblock.tmp");
        break;
    case FR_F_SUM_TMP:
        snprintf(buf, 40, "seg-%08u.sum.tmp", id);
        break;
    case FR_F_LOCK:
        snprintf(buf, 40, "LOCK");
        break;
    default:
        snprintf(buf, 40, "superblock");
        break;
    }
}

/* The file named name, created empty when absent (NULL when full). */
static ffile *dir_file(fdir *d, const char *name, int kind)
{
    for (int i = 0; i < d->n; i++)
        if (!strcmp(d->f[i].name, name))
            return &d->f[i];
    if (d->n == FR_MAX_FILES)
        return NULL;
    ffile *f = &d->f[d->n++];
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    f->kind = kind;
    return f;
}

static bool file_resize(ffile *f, uint32_t size)
{
    uint8_t *p = realloc(f->buf, size ? size : 1);
    if (!p)
        return false;
    if (size > f->size)
        memset(p + f->size, 0, size - f->size);
    f->buf = p;
    f->size = size;
    return true;
}

/* Parse the file entries after the header into d. */
static void parse(fdir *d, const uint8_t *data, size_t size, uint8_t drop)
{
    size_t pos = FR_HEAD_BYTES;
    for (int e = 0; pos + 6 <= size; e++) {
        int kind = data[pos] & 7;
        if (kind >= FR_F__KINDS)
            kind = FR_F_SUPER;
        uint32_t id = data[pos] >> 3;
        uint32_t fsize = get32(data + pos + 1);
        if (fsize > FR_FILE_MAX)
            fsize = FR_FILE_MAX;
        unsigned n_ext = data[pos + 5];
        pos += 6;
        bool skip = e < 8 && ((drop >> e) & 1);
        char name[40];
        file_name(name, kind, id);
        ffile *f = skip ? NULL : dir_file(d, name, kind);
        if (f && !file_resize(f, fsize))
            f = NULL;
        for (unsigned x = 0; x < n_ext && pos + 6 <= size; x++) {
            uint32_t off = get32(data + pos);
            size_t len = data[pos + 4] | (size_t)data[pos + 5] << 8;
            pos += 6;
            if (len > size - pos)
                len = size - pos;
            if (f && off < f->size) {
                size_t n = len < f->size - off ? len : f->size - off;
                memcpy(f->buf + off, data + pos, n);
            }
            pos += len;
        }
    }
}

/* ---- checksum repair ------------------------------------------------------------- */

static void repair_super(ffile *f)
{
    if (f->size < 2 * SB_FMT_BLOCK || f->size % (2 * SB_FMT_BLOCK))
        return;
    uint32_t slot = f->size / 2;
    for (uint32_t k = 0; k < 2; k++) {
        uint8_t *p = f->buf + (size_t)k * slot;
        put64(p + slot - 8, XXH3_64bits(p, slot - 8));
    }
}

/* The head hash of the record head at p (len bytes available), read from
 * file offset off. */
static void repair_head(uint8_t *p, size_t len, uint64_t off)
{
    uint32_t hb;
    if (len < SB_REC_FIXED || sb_rec_peek(p, len, &hb) != SB_OK)
        return;
    uint32_t body = 4 * get32(p + 68) + get32(p + 76);
    if (body <= len - SB_REC_FIXED)
        put64(p + 120, sb_rec_head_hash(p, body, off));
}

static void repair_records(ffile *f)
{
    for (uint64_t off = 0; off + SB_FMT_BLOCK <= f->size; off += SB_FMT_BLOCK)
        repair_head(f->buf + off, f->size - off, off);
}

static void repair_summary(ffile *f)
{
    uint8_t *p = f->buf;
    if (f->size < SB_SUM_FIXED + 8 || get64(p) != SB_SUM_MAGIC)
        return;
    size_t end = f->size - 8;
    for (size_t pos = SB_SUM_FIXED; pos + 16 + SB_REC_FIXED <= end;) {
        uint32_t bytes = get32(p + pos);
        if (bytes % 8 || bytes < 16 + SB_REC_FIXED || bytes > end - pos)
            break;
        repair_head(p + pos + 16, bytes - 16, get64(p + pos + 8));
        pos += bytes;
    }
    put64(p + end, XXH3_64bits(p, end));
}

/* ---- the files, before and after -------------------------------------------------- */

/* Every file of the in-memory file system but LOCK (which holds the pid
 * of whoever held the lock last), its name, size and bytes hashed. */
typedef struct fsnap {
    int n;
    char name[FR_MAX_FILES + 8][40];
    uint64_t size[FR_MAX_FILES + 8], hash[FR_MAX_FILES + 8];
    bool overflow;             /* more files than it holds: not compared */
} fsnap;

static void snap_name(void *ctx, const char *name)
{
    fsnap *s = ctx;
    if (!strcmp(name, "LOCK"))
        return;
    if (s->n == FR_MAX_FILES + 8 || strlen(name) >= sizeof s->name[0]) {
        s->overflow = true;
        return;
    }
    memcpy(s->name[s->n++], name, strlen(name) + 1);
}

static int snap_cmp(const void *a, const void *b)
{
    return strcmp(a, b);
}

static void snap_files(sb_io *io, fsnap *s)
{
    memset(s, 0, sizeof *s);
    if (io->ops->list(io, snap_name, s) < 0)
        FAIL("mem fs: list");
    /* names and their sizes/hashes move together: sort the names first */
    qsort(s->name, (size_t)s->n, sizeof s->name[0], snap_cmp);
    for (int i = 0; i < s->n; i++) {
        int fd = sb_io_open(io, s->name[i], SB_IO_RDONLY);
        if (fd < 0 || io->ops->size(io, fd, &s->size[i]) < 0)
            FAIL("mem fs: %s", s->name[i]);
        uint8_t *buf = malloc(s->size[i] ? s->size[i] : 1);
        if (!buf || (s->size[i] && sb_io_pread(io, fd, buf, s->size[i], 0) !=
                                       (int64_t)s->size[i]))
            FAIL("mem fs: read %s", s->name[i]);
        s->hash[i] = XXH3_64bits(buf, s->size[i]);
        free(buf);
        sb_io_close(io, fd);
    }
}

static void snap_same(const fsnap *a, const fsnap *b, const char *what)
{
    if (a->overflow || b->overflow)
        return;
    if (a->n != b->n)
        FAIL("%s: %d files before, %d after", what, a->n, b->n);
    for (int i = 0; i < a->n; i++)
        if (strcmp(a->name[i], b->name[i]) || a->size[i] != b->size[i] ||
            a->hash[i] != b->hash[i])
            FAIL("%s: %s changed", what, a->name[i]);
}

/* ---- the checks ------------------------------------------------------------------ */

typedef struct probe_ctx {
    fr_seq seqs[FR_N_SEQ];
    bool small_ram;
    bool trace;                /* SB_FUZZ_TRACE */
} probe_ctx;

static bool env_flag(const char *name)
{
    const char *v = getenv(name);
    return v && *v && *v != '0';
}


static bool clean_open_error(int rc)
{
    return rc == SB_ERR_SUPERBLOCK || rc == SB_ERR_VERSION || rc == SB_ERR_IO;
}

static void check_store(sb_store *st, const char *when)
{
    int rc = sb_store_check(st);
    if (rc != SB_OK)
        FAIL("sb_store_check fails %s: %s", when, sb_strerror(rc));
}

/* How a probe's restore went, besides the tokens it restored. */
typedef struct outcome {
    bool refused;              /* the small RAM budget refused it: nothing read */
    bool damaged;              /* it met a damaged record (SB_ERR_CORRUPT, IO) */
} outcome;

/* Match probe s, restore what the match gives and compare every byte.
 * Returns the tokens restored (and checked); 0 when the namespace is not
 * ours (a recovered description of another layout under the same identity,
 * which only a repaired head can make). */
static size_t probe_once(const probe_ctx *pc, sb_store *st, int i, outcome *out)
{
    *out = (outcome){ false, false };
    const fr_seq *s = &pc->seqs[i];
    const fr_layout *l = &fr_layouts[s->layout];
    sb_ns *ns = NULL;
    int rc = fr_ns_open(st, s->layout, s->scope, &ns);
    if (rc == SB_ERR_LAYOUT_MISMATCH)
        return 0;
    if (rc != SB_OK)
        FAIL("seq %d: sb_ns_open: %s", i, sb_strerror(rc));
    sb_match *m = NULL;
    if ((rc = sb_ns_match(ns, s->tok, s->n, &m)) != SB_OK)
        FAIL("seq %d: sb_ns_match: %s", i, sb_strerror(rc));
    sb_match_info info;
    sb_match_get_info(m, &info);
    size_t L = info.n_tokens;
    if (L > s->n || info.n_matched_tokens < L)
        FAIL("seq %d: match of %zu tokens gives L %zu (matched %zu)", i, s->n, L,
             info.n_matched_tokens);
    if (L && (l->flags & SB_LAYOUT_POINT_REQUIRED) && !info.has_point)
        FAIL("seq %d: L %zu without the point state the layout requires", i, L);
    uint8_t *bufs[2] = { NULL, NULL }, *want[2] = { NULL, NULL };
    for (uint32_t t = 0; t < l->n_tensors; t++) {
        bufs[t] = calloc(1, L * l->bpt[t] + 1);
        want[t] = malloc(L * l->bpt[t] + 1);
        if (!bufs[t] || !want[t])
            FAIL("out of memory");
    }
    uint8_t point[64], point_want[64];
    bool has_point = info.has_point;
    rc = sb_match_restore(m, L, (void *const *)bufs, has_point ? point : NULL);
    size_t R = L;
    if (rc == SB_ERR_CORRUPT || rc == SB_ERR_IO) {
        sb_match_info after;
        sb_match_get_info(m, &after);
        if (after.miss != SB_MISS_CORRUPT && after.miss != SB_MISS_IO)
            FAIL("seq %d: restore failed (%s) and the match says miss %s", i,
                 sb_strerror(rc), sb_miss_name(after.miss));
        if (after.n_tokens > L || (after.n_tokens == L && after.has_point))
            FAIL("seq %d: restore failed (%s) and the match did not shrink", i,
                 sb_strerror(rc));
        R = after.n_tokens;
        has_point = false; /* a failed restore copies no point state */
        out->damaged = true;
    } else if (rc == SB_ERR_BUDGET && pc->small_ram) {
        R = 0;
        has_point = false;
        out->refused = true;
    } else if (rc != SB_OK) {
        FAIL("seq %d: sb_match_restore(%zu): %s", i, L, sb_strerror(rc));
    }
    if (pc->trace)
        fprintf(stderr, "  seq %2d (layout %d scope %d, %2zu tokens): L %2zu, restore %s, "
                "%zu checked%s (miss %s)\n", i, s->layout, s->scope, s->n, L,
                sb_strerror(rc), R, has_point ? " with point" : "", sb_miss_name(info.miss));
    fr_state(l, s->tok, R, want);
    for (uint32_t t = 0; t < l->n_tensors; t++)
        if (memcmp(bufs[t], want[t], R * l->bpt[t]) != 0)
            FAIL("seq %d: restored bytes of tensor %u differ from the state of its %zu-token "
                 "prefix", i, t, R);
    if (has_point) {
        fr_point(l, s->tok, R, point_want);
        if (memcmp(point, point_want, l->point_bytes) != 0)
            FAIL("seq %d: the point state at %zu is not the one of that prefix", i, R);
    }
    for (uint32_t t = 0; t < l->n_tensors; t++) {
        free(bufs[t]);
        free(want[t]);
    }
    sb_match_release(m);
    sb_ns_close(ns);
    return R;
}

/* Probe s as a client would: after a restore that met damage (the damaged
 * record is gone from the index then), match again, until a restore meets
 * none. A failed restore may leave less than a shorter match would give
 * (with SB_LAYOUT_POINT_REQUIRED it ends at 0, no point state being known
 * below), so the settled length is the one to compare across sessions.
 * out->damaged tells whether any attempt met damage. */
static size_t probe(const probe_ctx *pc, sb_store *st, int i, outcome *out)
{
    bool damaged = false;
    size_t r = 0;
    /* Each damaged attempt drops at least one block: this ends. */
    for (int k = 0; k < 1000; k++) {
        r = probe_once(pc, st, i, out);
        damaged |= out->damaged;
        if (!out->damaged) {
            out->damaged = damaged;
            return r;
        }
    }
    FAIL("seq %d: a thousand restores in a row met damage", i);
}

static void trace_recovery(const sb_stats *s)
{
    fprintf(stderr, "recovered: records %llu pages %llu points %llu namespaces %llu, orphans "
            "%llu, bad summaries %llu, torn %llu, segments %llu\n",
            (unsigned long long)s->recovered_records, (unsigned long long)s->recovered_pages,
            (unsigned long long)s->recovered_points, (unsigned long long)s->recovered_namespaces,
            (unsigned long long)s->recovery_orphans,
            (unsigned long long)s->recovery_bad_summaries,
            (unsigned long long)s->recovery_torn, (unsigned long long)s->disk_segments);
    if (s->salvaged)
        fprintf(stderr, "salvaged: %llu segment files adopted (%llu read record by record), "
                "%llu skipped, %llu records dropped (%llu bytes)\n",
                (unsigned long long)s->salvaged_segments,
                (unsigned long long)s->salvage_scanned_segments,
                (unsigned long long)s->salvage_skipped_files,
                (unsigned long long)s->salvage_dropped_records,
                (unsigned long long)s->salvage_dropped_bytes);
}

static sb_config config(uint8_t cfg_byte)
{
    sb_config c;
    sb_config_default(&c);
    c.min_prefix_tokens = 1; /* short test sequences are written too */
    c.segment_bytes = 64 << 10;
    c.disk_bytes = 64 << 20;
    c.queue_depth = 4;
    c.sync_interval_ms = 5;
    c.ram_bytes = (cfg_byte & FR_CFG_SMALL_RAM) ? 64 << 10 : 16 << 20;
    c.max_seq_tokens = (cfg_byte & FR_CFG_SHORT_SEQ) ? 256 : 1u << 20;
    return c;
}

static void write_dir(sb_io *io, const fdir *d)
{
    for (int i = 0; i < d->n; i++) {
        const ffile *f = &d->f[i];
        int fd = sb_io_open(io, f->name, SB_IO_CREATE);
        if (fd < 0)
            FAIL("mem fs: open %s: %d", f->name, fd);
        if (io->ops->truncate(io, fd, f->size) < 0 ||
            (f->size && sb_io_pwrite(io, fd, f->buf, f->size, 0) != (int64_t)f->size))
            FAIL("mem fs: write %s", f->name);
        sb_io_close(io, fd);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < FR_HEAD_BYTES)
        return 0;
    uint8_t repair = data[0], cfg_byte = data[1], drop = data[2], puts = data[3];
    static fdir d; /* reset per input: no state survives it */
    memset(&d, 0, sizeof d);
    parse(&d, data, size, drop);
    for (int i = 0; i < d.n; i++) {
        ffile *f = &d.f[i];
        if ((repair & FR_REPAIR_SUPER) && (f->kind == FR_F_SUPER || f->kind == FR_F_SUPER_TMP))
            repair_super(f);
        if ((repair & FR_REPAIR_RECORDS) && f->kind == FR_F_DAT)
            repair_records(f);
        if ((repair & FR_REPAIR_SUMMARY) && (f->kind == FR_F_SUM || f->kind == FR_F_SUM_TMP))
            repair_summary(f);
    }
    sb_io *io = NULL;
    if (sb_io_mem_new(&io) != 0)
        FAIL("sb_io_mem_new");
    static probe_ctx pc;
    memset(&pc, 0, sizeof pc);
    fr_world(pc.seqs);
    pc.small_ram = cfg_byte & FR_CFG_SMALL_RAM;
    pc.trace = env_flag("SB_FUZZ_TRACE");
    if (pc.trace) {
        fprintf(stderr, "repair %#x config %#x drop %#x puts %#x\n", repair, cfg_byte, drop,
                puts);
        for (int i = 0; i < d.n; i++)
            fprintf(stderr, "  file %-20s %8u bytes\n", d.f[i].name, d.f[i].size);
    }
    write_dir(io, &d);
    for (int i = 0; i < d.n; i++)
        free(d.f[i].buf);

    sb_config c = config(cfg_byte);
    sb_store *st = NULL;
    static fsnap before, after;
    snap_files(io, &before);
    int rc = sb_store_open_io(&c, io, &st);
    if (pc.trace)
        fprintf(stderr, "open: %s\n", sb_strerror(rc));
    bool salvaged = false;
    if (rc != SB_OK) {
        if (!clean_open_error(rc))
            FAIL("open: undocumented result %s", sb_strerror(rc));
        if (st)
            FAIL("open failed and left *out set");
        snap_files(io, &after);
        snap_same(&before, &after, "a refused open");
        if (rc == SB_ERR_SUPERBLOCK) { /* 0. Salvage it. */
            c.open_flags = SB_OPEN_SALVAGE;
            rc = sb_store_open_io(&c, io, &st);
            c.open_flags = 0;
            salvaged = rc == SB_OK;
            if (pc.trace)
                fprintf(stderr, "salvaging open: %s\n", sb_strerror(rc));
            if (rc != SB_OK && rc != SB_ERR_VERSION && rc != SB_ERR_IO)
                FAIL("salvaging open: %s", sb_strerror(rc));
            if (rc != SB_OK && st)
                FAIL("salvaging open failed and left *out set");
            if (rc == SB_ERR_VERSION) { /* refused before writing anything */
                snap_files(io, &after);
                snap_same(&before, &after, "a salvage refused for a version");
            }
        }
        if (rc != SB_OK) {
            sb_io_destroy(io);
            return 0;
        }
    }
    check_store(st, "after open");
    sb_stats s0;
    sb_store_stats(st, &s0);
    if (pc.trace)
        trace_recovery(&s0);
    if (s0.salvaged != salvaged)
        FAIL("stats say salvaged %llu after a%s open", (unsigned long long)s0.salvaged,
             salvaged ? " salvaging" : " plain");
    if (salvaged && (s0.salvaged_segments != s0.disk_segments ||
                     s0.salvage_scanned_segments > s0.salvaged_segments))
        FAIL("salvage counters do not add up: %llu adopted, %llu scanned, %llu listed",
             (unsigned long long)s0.salvaged_segments,
             (unsigned long long)s0.salvage_scanned_segments,
             (unsigned long long)s0.disk_segments);
    if (s0.recovered_pages + s0.recovered_points > s0.recovered_records ||
        s0.recovery_orphans > s0.recovered_records || s0.disk_pages > s0.recovered_pages)
        FAIL("recovery counters do not add up: records %llu pages %llu points %llu "
             "orphans %llu disk_pages %llu",
             (unsigned long long)s0.recovered_records, (unsigned long long)s0.recovered_pages,
             (unsigned long long)s0.recovered_points, (unsigned long long)s0.recovery_orphans,
             (unsigned long long)s0.disk_pages);

    /* 1. Probe every sequence of the world. */
    size_t got[FR_N_SEQ];
    bool durable[FR_N_SEQ] = { false };
    outcome o;
    for (int i = 0; i < FR_N_SEQ; i++) {
        got[i] = probe(&pc, st, i, &o);
        check_store(st, "after a probe");
    }
    /* 2. The put phase: the store still takes writes, and makes them durable. */
    bool reopen = (cfg_byte & FR_CFG_REOPEN) || salvaged;
    if (cfg_byte & FR_CFG_PUT) {
        int which[2] = { puts % FR_N_SEQ, puts / 16 % FR_N_SEQ };
        bool ok[2] = { false, false };
        for (int k = 0; k < 2; k++) {
            rc = fr_put(st, &pc.seqs[which[k]]);
            if (rc == SB_OK)
                ok[k] = true;
            else if (rc != SB_ERR_LAYOUT_MISMATCH && !(rc == SB_ERR_BUDGET && pc.small_ram))
                FAIL("put of seq %d after recovery: %s", which[k], sb_strerror(rc));
        }
        rc = sb_store_flush(st);
        if (pc.trace)
            fprintf(stderr, "put seq %d: %s, seq %d: %s, flush: %s\n", which[0],
                    ok[0] ? "ok" : "refused", which[1], ok[1] ? "ok" : "refused",
                    sb_strerror(rc));
        if (rc != SB_OK && rc != SB_ERR_IO && rc != SB_ERR_NOSPC)
            FAIL("flush after recovery: %s", sb_strerror(rc));
        for (int k = 0; k < 2; k++) {
            if (!ok[k])
                continue;
            /* The put keeps pages the index holds: a damaged one past what
             * the probe above could reach (beyond the last point state of a
             * point-required layout) shows only now. */
            size_t r = probe(&pc, st, which[k], &o);
            if (r != pc.seqs[which[k]].n && !o.refused && !o.damaged)
                FAIL("seq %d put after recovery restores %zu of %zu tokens", which[k], r,
                     pc.seqs[which[k]].n);
            /* Durable only when the flush says so (RAM served the probe). */
            durable[which[k]] = rc == SB_OK && r == pc.seqs[which[k]].n;
            if (durable[which[k]])
                got[which[k]] = r;
        }
        check_store(st, "after the put phase");
        reopen = true;
    }
    /* Reclamation under the cap (a fuzzed segment size can leave room for
     * only a few) drops cold pages: then less may come back. */
    sb_stats before_close;
    sb_store_stats(st, &before_close);
    bool reclaimed = before_close.disk_reclaimed_segments || before_close.disk_reclaim_dropped ||
                     before_close.disk_reclaim_ram_only;
    if ((rc = sb_store_close(st)) != SB_OK)
        FAIL("close: %s", sb_strerror(rc));

    /* 3. What a clean close left must open (a salvaged store without the
     * flag), and serve at least as much. */
    if (reopen) {
        st = NULL;
        if ((rc = sb_store_open_io(&c, io, &st)) != SB_OK)
            FAIL("reopen after a clean close: %s", sb_strerror(rc));
        check_store(st, "after reopen");
        if (pc.trace) {
            sb_stats s1;
            sb_store_stats(st, &s1);
            fprintf(stderr, "reopened: ");
            trace_recovery(&s1);
        }
        for (int i = 0; i < FR_N_SEQ; i++) {
            size_t r = probe(&pc, st, i, &o);
            if (r < got[i] && !o.refused && !reclaimed)
                FAIL("seq %d: restored %zu tokens before a clean close, %zu after reopen", i,
                     got[i], r);
            if (durable[i] && r != pc.seqs[i].n && !o.refused)
                FAIL("seq %d, put and flushed after recovery, restores %zu of %zu tokens "
                     "after reopen", i, r, pc.seqs[i].n);
        }
        check_store(st, "after the reopen probes");
        if ((rc = sb_store_close(st)) != SB_OK)
            FAIL("close after reopen: %s", sb_strerror(rc));
    }
    sb_io_destroy(io);
    return 0;
}
