/* gen_recovery_seeds.c -- writes the seed corpus of fuzz_recovery into a
 * directory: real store directories, made by running the store on the
 * in-memory file system (puts of the world's sequences, flushes, a clean
 * close, a kill, a power cut, a reopen) and dumping every file in the
 * harness's input format (fuzz_recovery.c). Each seed is replayed through
 * the harness before it is written. Run it when the format or the world
 * changes: gen_recovery_seeds fuzz/corpus/recovery
 *
 * The salvage-* seeds are such stores with their superblock then damaged
 * (zeroed, unlinked, cut in slot B, version fields flipped; zeroed beside
 * a damaged summary): the harness finds them refused and salvages them.
 *
 * The stores differ from run to run (the store id is random and the writer
 * thread's timing decides record order), so regenerating rewrites every
 * seed. Page bytes past a page's tokens are whatever the pool held (they
 * are payload, hashed); under ASan malloc fills new blocks with 0xbe, which
 * would turn every page into a 4 KiB extent, so the ASan fill is turned off
 * below and the seeds stay sparse.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "disk.h"
#include "fuzz_recovery.h"
#include "io.h"
#include "open.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Read by ASan at start-up (ignored in other builds). */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "max_malloc_fill_size=0";
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "gen_recovery_seeds: %s: %d (%s)\n", what, rc, sb_strerror(rc));
    exit(1);
}

/* ---- building stores ------------------------------------------------------------ */

static fr_seq world[FR_N_SEQ];

static sb_config config(sb_write_mode mode, uint64_t ram_bytes)
{
    sb_config c;
    sb_config_default(&c);
    c.min_prefix_tokens = 1; /* short test sequences are written too */
    c.segment_bytes = 64 << 10;
    c.disk_bytes = 64 << 20;
    c.queue_depth = 4;
    c.sync_interval_ms = 5;
    c.write_mode = mode;
    c.ram_bytes = ram_bytes;
    return c;
}

static sb_store *open_store(sb_io *io, const sb_config *c)
{
    sb_store *st = NULL;
    int rc = sb_store_open_io(c, io, &st);
    if (rc != SB_OK)
        die("open", rc);
    return st;
}

static void put_range(sb_store *st, int from, int to)
{
    for (int i = from; i < to; i++) {
        int rc = fr_put(st, &world[i]);
        if (rc != SB_OK)
            die("put", rc);
    }
}

static void flush(sb_store *st)
{
    int rc = sb_store_flush(st);
    if (rc != SB_OK)
        die("flush", rc);
}

/* Every sequence but the last two, then a clean close: sealed segments,
 * each with its summary. */
static void make_closed(sb_io *io)
{
    sb_config c = config(SB_WRITE_THROUGH, 16 << 20);
    sb_store *st = open_store(io, &c);
    put_range(st, 0, FR_N_SEQ - 2);
    sb_store_close(st);
}

/* A kill after a flush: the last segment is still open (no summary). */
static void make_killed(sb_io *io)
{
    sb_config c = config(SB_WRITE_THROUGH, 16 << 20);
    sb_store *st = open_store(io, &c);
    put_range(st, 0, 6);
    flush(st);
    put_range(st, 6, 9);
    flush(st);
    sb_store_crash(st);
}

/* A power cut with writes in flight: unsynced 4 KiB units kept, garbled
 * or lost. */
static void make_power_cut(sb_io *io)
{
    sb_config c = config(SB_WRITE_THROUGH, 16 << 20);
    sb_store *st = open_store(io, &c);
    put_range(st, 0, 7);
    flush(st);
    put_range(st, 7, 10);
    int rc = sb_io_mem_crash(io, 42, 0.5, 0.2);
    if (rc != 0)
        die("crash", rc);
    sb_store_crash(st);
}

/* Two sessions: a clean close, then a reopen (recovery seals nothing, the
 * second session's segments get later generations) and a kill. */
static void make_reopened(sb_io *io)
{
    sb_config c = config(SB_WRITE_THROUGH, 16 << 20);
    sb_store *st = open_store(io, &c);
    put_range(st, 0, 5);
    sb_store_close(st);
    st = open_store(io, &c);
    put_range(st, 5, 10);
    flush(st);
    sb_store_crash(st);
}

/* Write-back under a small RAM budget: pages reach the disk as they are
 * evicted, parents before children, then the rest at close. */
static void make_write_back(sb_io *io)
{
    sb_config c = config(SB_WRITE_BACK, 96 << 10);
    sb_store *st = open_store(io, &c);
    put_range(st, 0, 8);
    sb_store_close(st);
}

/* Two short sequences: a small input that fuzzes fast. */
static void make_small(sb_io *io)
{
    sb_config c = config(SB_WRITE_THROUGH, 16 << 20);
    sb_store *st = open_store(io, &c);
    int k = 0;
    for (int i = 0; i < FR_N_SEQ && k < 2; i++)
        if (world[i].n <= 12) {
            if (fr_put(st, &world[i]) != SB_OK)
                die("put", -1);
            k++;
        }
    sb_store_close(st);
}

/* A store with no records: the superblock alone. */
static void make_empty(sb_io *io)
{
    sb_config c = config(SB_WRITE_THROUGH, 16 << 20);
    sb_store_close(open_store(io, &c));
}

/* ---- superblock damage (the salvage seeds) ---------------------------------------- */

/* Rewrite file name through fn(buf, &size) (size may shrink). */
static void rewrite(sb_io *io, const char *name, void (*fn)(uint8_t *buf, uint64_t *size))
{
    int fd = sb_io_open(io, name, 0);
    uint64_t size = 0;
    if (fd < 0 || io->ops->size(io, fd, &size) < 0)
        die(name, SB_ERR_IO);
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf || (size && sb_io_pread(io, fd, buf, size, 0) != (int64_t)size))
        die(name, SB_ERR_IO);
    fn(buf, &size);
    if (io->ops->truncate(io, fd, size) < 0 ||
        (size && sb_io_pwrite(io, fd, buf, size, 0) != (int64_t)size))
        die(name, SB_ERR_IO);
    sb_io_close(io, fd);
    free(buf);
}

static void zero_all(uint8_t *buf, uint64_t *size)
{
    memset(buf, 0, *size);
}

static void cut_mid_slot_b(uint8_t *buf, uint64_t *size)
{
    (void)buf;
    *size = *size / 2 + *size / 4;
}

/* Both slots' version fields damaged (their hashes then fail: damage, not
 * another version). */
static void flip_versions(uint8_t *buf, uint64_t *size)
{
    buf[8] ^= 0x04;
    buf[*size / 2 + 8] ^= 0x04;
}

static void flip_middle(uint8_t *buf, uint64_t *size)
{
    buf[*size / 2] ^= 0x01;
}

static void damage_zeroed(sb_io *io)
{
    rewrite(io, "superblock", zero_all);
}

static void damage_unlinked(sb_io *io)
{
    if (io->ops->unlink(io, "superblock") < 0)
        die("unlink superblock", SB_ERR_IO);
}

static void damage_cut(sb_io *io)
{
    rewrite(io, "superblock", cut_mid_slot_b);
}

static void damage_versions(sb_io *io)
{
    rewrite(io, "superblock", flip_versions);
}

/* Zeroed, and the first segment's summary damaged: read record by record. */
static void damage_zeroed_summary(sb_io *io)
{
    rewrite(io, "superblock", zero_all);
    rewrite(io, "seg-00000001.sum", flip_middle);
}

/* ---- dumping a directory --------------------------------------------------------- */

typedef struct out {
    uint8_t *p;
    size_t n, cap;
} out;

static void emit(out *o, const void *src, size_t n)
{
    if (o->n + n > o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 65536;
        while (cap < o->n + n)
            cap *= 2;
        if (!(o->p = realloc(o->p, cap)))
            die("out of memory", SB_ERR_NOMEM);
        o->cap = cap;
    }
    memcpy(o->p + o->n, src, n);
    o->n += n;
}

static void emit8(out *o, unsigned v)
{
    uint8_t b = (uint8_t)v;
    emit(o, &b, 1);
}

static void emit16(out *o, unsigned v)
{
    uint8_t b[2] = { (uint8_t)v, (uint8_t)(v >> 8) };
    emit(o, b, 2);
}

static void emit32(out *o, uint32_t v)
{
    uint8_t b[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };
    emit(o, b, 4);
}

/* The name byte for a store file name; -1 for names the format has none for. */
static int name_code(const char *name)
{
    unsigned id;
    char ext[8];
    if (!strcmp(name, "superblock"))
        return FR_F_SUPER;
    if (!strcmp(name, "superblock.tmp"))
        return FR_F_SUPER_TMP;
    if (!strcmp(name, "LOCK"))
        return FR_F_LOCK;
    if (sscanf(name, "seg-%8u.%7s", &id, ext) == 2 && id <= FR_SEG_ID_MAX) {
        if (!strcmp(ext, "dat"))
            return FR_F_DAT | (int)id << 3;
        if (!strcmp(ext, "sum"))
            return FR_F_SUM | (int)id << 3;
        if (!strcmp(ext, "sum.tmp"))
            return FR_F_SUM_TMP | (int)id << 3;
    }
    return -1;
}

/* The file's non-zero runs as file entries (extents of at most 65535
 * bytes, gaps of under 32 zeros merged, 255 extents an entry). */
static void emit_file(out *o, int code, const uint8_t *p, uint32_t size)
{
    typedef struct ext { uint32_t off, len; } ext;
    ext *e = NULL;
    size_t n = 0, cap = 0;
    for (uint32_t i = 0; i < size;) {
        if (!p[i]) {
            i++;
            continue;
        }
        uint32_t start = i, last = i;
        while (i < size && i - start < 65535) {
            if (p[i])
                last = i;
            else if (i - last >= 32)
                break;
            i++;
        }
        if (n == cap && !(e = realloc(e, (cap = cap ? 2 * cap : 64) * sizeof *e)))
            die("out of memory", SB_ERR_NOMEM);
        e[n++] = (ext){ start, last - start + 1 };
        i = last + 1;
    }
    size_t k = 0;
    do {
        size_t m = n - k < 255 ? n - k : 255;
        emit8(o, (unsigned)code);
        emit32(o, size);
        emit8(o, (unsigned)m);
        for (size_t j = 0; j < m; j++) {
            emit32(o, e[k + j].off);
            emit16(o, e[k + j].len);
            emit(o, p + e[k + j].off, e[k + j].len);
        }
        k += m;
    } while (k < n);
    free(e);
}

typedef struct names {
    char name[64][40];
    int n;
} names;

static void collect_name(void *ctx, const char *name)
{
    names *ns = ctx;
    if (ns->n == 64)
        die("more than 64 files", SB_ERR_RANGE);
    snprintf(ns->name[ns->n++], 40, "%s", name);
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(a, b);
}

static void dump(sb_io *io, out *o)
{
    names ns = { .n = 0 };
    if (io->ops->list(io, collect_name, &ns) < 0)
        die("list", SB_ERR_IO);
    /* superblock first, then the segments in name order */
    qsort(ns.name, (size_t)ns.n, sizeof ns.name[0], name_cmp);
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < ns.n; i++) {
            const char *name = ns.name[i];
            int code = name_code(name);
            if (code < 0) {
                fprintf(stderr, "gen_recovery_seeds: skipping %s\n", name);
                continue;
            }
            if ((pass == 0) != ((code & 7) == FR_F_SUPER) || (code & 7) == FR_F_LOCK)
                continue;
            int fd = sb_io_open(io, name, SB_IO_RDONLY);
            uint64_t size = 0;
            if (fd < 0 || io->ops->size(io, fd, &size) < 0 || size > FR_FILE_MAX)
                die(name, SB_ERR_IO);
            uint8_t *buf = malloc(size ? size : 1);
            if (!buf || (size && sb_io_pread(io, fd, buf, size, 0) != (int64_t)size))
                die(name, SB_ERR_IO);
            sb_io_close(io, fd);
            emit_file(o, code, buf, (uint32_t)size);
            free(buf);
        }
}

/* ---- main ------------------------------------------------------------------------- */

typedef struct variant {
    const char *name;
    uint8_t head[FR_HEAD_BYTES]; /* repair, config, drop, puts */
    void (*make)(sb_io *io);
    int n_durable;               /* sequences [0, n) were made durable */
    void (*damage)(sb_io *io);   /* NULL, or the superblock damaged (the
                                    store is then salvaged) */
} variant;

static const variant variants[] = {
    { "closed", { 0, FR_CFG_REOPEN, 0, 0x3a }, make_closed, FR_N_SEQ - 2, NULL },
    { "killed-open-segment", { 0, FR_CFG_PUT, 0, 0xb1 }, make_killed, 9, NULL },
    { "power-cut", { FR_REPAIR_SUPER | FR_REPAIR_RECORDS | FR_REPAIR_SUMMARY,
                     FR_CFG_PUT | FR_CFG_REOPEN, 0, 0x4a }, make_power_cut, 7, NULL },
    { "reopened", { FR_REPAIR_RECORDS, FR_CFG_SMALL_RAM | FR_CFG_REOPEN, 0, 0x27 },
      make_reopened, 10, NULL },
    { "write-back", { FR_REPAIR_SUMMARY, FR_CFG_PUT | FR_CFG_SHORT_SEQ, 0, 0x95 },
      make_write_back, 8, NULL },
    { "small", { FR_REPAIR_SUPER | FR_REPAIR_RECORDS | FR_REPAIR_SUMMARY,
                 FR_CFG_PUT | FR_CFG_SHORT_SEQ, 0, 0x10 }, make_small, 0, NULL },
    { "empty", { 0, FR_CFG_PUT, 0, 0x61 }, make_empty, 0, NULL },
    { "salvage-zeroed", { 0, FR_CFG_PUT, 0, 0x2c }, make_closed, FR_N_SEQ - 2, damage_zeroed },
    { "salvage-unlinked", { 0, 0, 0, 0x17 }, make_killed, 9, damage_unlinked },
    { "salvage-cut-slot-b", { FR_REPAIR_RECORDS, FR_CFG_PUT, 0, 0x83 }, make_power_cut, 7,
      damage_cut },
    { "salvage-versions", { 0, FR_CFG_SMALL_RAM, 0, 0x5e }, make_reopened, 10,
      damage_versions },
    { "salvage-bad-summary", { 0, FR_CFG_PUT | FR_CFG_SHORT_SEQ, 0, 0x49 },
      make_closed, FR_N_SEQ - 2, damage_zeroed_summary },
};

/* The seed holds what its store was told to keep: the durable sequences
 * match in full when the dumped directory is opened (after the dump: open
 * seals what was open). */
static void check_durable(sb_io *io, const variant *v)
{
    sb_config c = config(SB_WRITE_THROUGH, 16 << 20);
    sb_store *st = NULL;
    if (v->damage) { /* refused, then salvaged */
        if (sb_store_open_io(&c, io, &st) != SB_ERR_SUPERBLOCK) {
            fprintf(stderr, "gen_recovery_seeds: %s: the damaged store opens\n", v->name);
            exit(1);
        }
        c.open_flags = SB_OPEN_SALVAGE;
    }
    st = open_store(io, &c);
    for (int i = 0; i < v->n_durable; i++) {
        sb_ns *ns = NULL;
        sb_match *m = NULL;
        sb_match_info info = { 0 };
        if (fr_ns_open(st, world[i].layout, world[i].scope, &ns) != SB_OK ||
            sb_ns_match(ns, world[i].tok, world[i].n, &m) != SB_OK ||
            sb_match_get_info(m, &info) != SB_OK || info.n_tokens != world[i].n) {
            fprintf(stderr, "gen_recovery_seeds: %s: durable seq %d matches %zu of %zu\n",
                    v->name, i, info.n_tokens, world[i].n);
            exit(1);
        }
        sb_match_release(m);
        sb_ns_close(ns);
    }
    sb_store_close(st);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_recovery_seeds DIR\n");
        return 2;
    }
    fr_world(world);
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        sb_io *io = NULL;
        if (sb_io_mem_new(&io) != 0)
            die("sb_io_mem_new", SB_ERR_NOMEM);
        variants[v].make(io);
        if (variants[v].damage)
            variants[v].damage(io);
        out o = { 0 };
        emit(&o, variants[v].head, FR_HEAD_BYTES);
        dump(io, &o);
        check_durable(io, &variants[v]);
        sb_io_destroy(io);
        LLVMFuzzerTestOneInput(o.p, o.n); /* aborts on a violated property */
        char path[512];
        snprintf(path, sizeof path, "%s/seed-%s", argv[1], variants[v].name);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(o.p, 1, o.n, f) != o.n || fclose(f) != 0) {
            perror(path);
            return 1;
        }
        printf("%s: %zu bytes\n", path, o.n);
        free(o.p);
    }
    return 0;
}
