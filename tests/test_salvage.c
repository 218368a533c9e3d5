/* Description: salvaging a store whose superblock cannot be used
 * (sb_config.open_flags SB_OPEN_SALVAGE, store/disk/salvage.c).
 *
 * Real directories (io_uring, O_DIRECT). Two stores are built once: one
 * closed (every segment sealed with its summary) and one killed after a
 * flush (the newest segment still open, no summary), each holding a world
 * of sequences over two layouts (one requiring point states) with shared
 * prefixes, and last a "victim": two full pages in a namespace of its
 * own, whose page records are the last ones written. Each case copies a
 * store, damages it, and checks:
 *
 *   - without the flag sb_store_open refuses with SB_ERR_SUPERBLOCK and
 *     every file of the directory is byte for byte as it was (LOCK too: it
 *     holds the pid of the last holder, this process both times);
 *   - with it the store opens; every sequence whose records are intact
 *     restores in full, bit-exact (the victim as far as its damage
 *     allows); whatever anything restores is bit-exact; sb_store_check
 *     passes; the stats report the salvage: segments adopted and read
 *     record by record, what was dropped;
 *   - closed, the directory opens without the flag, nothing salvaged,
 *     serving the same lengths bit-exact.
 *
 * The damage: one slot only (the store still opens without the flag), both
 * slots at each field class (magic, version, slot number, slot size,
 * write count, store id, segment size, durable seq, segment count,
 * reserved bytes, segment table entries, wear block, zero tail, checksum),
 * the file truncated at each length class (empty, inside slot A's fixed
 * part, mid slot A, slot A alone, mid slot B, short of a block), unlinked,
 * replaced by garbage or zeros; and, with the superblock zeroed, a summary
 * damaged or every summary gone (the segments read record by record), the
 * killed store's open segment, torn by garbage over the victim's last
 * record, a payload that fails its hash, a stale record of an older
 * generation (a wrong payload with a newer seq: the older life of a file
 * must never come back as current), a segment file with no record of its
 * own, a record of another format version (refused: SB_ERR_VERSION, the
 * directory unchanged), a segment reclaimed and its files written back
 * after the fact.
 *
 * sb_store_fsck reports such a store (the superblock's damage, nothing
 * else read); sb_store_fsck_repair refuses a store in use (naming its
 * holder) and a directory with no store, writing nothing, and repairs the
 * others: what it rebuilt and dropped in its report, the check after it
 * clean but for damage the segment files still hold (a payload that fails
 * its hash, under a new summary that leaves the record out).
 *
 * On the in-memory file system (store/disk/io.h): power cuts before the
 * damage, a salvaged store that keeps working through another cut, and a
 * salvage cut short at each of its I/O operations (an EIO there, then a
 * power cut) that a second salvage completes, durable sequences whole.
 *
 * SB_SALVAGE_ROUNDS sets the power-cut rounds (default 40).
 */
#define _DEFAULT_SOURCE /* DT_REG */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "disk.h"
#include "format.h"
#include "io.h"
#include "open.h"
#include "snapbank_fsck.h"
#include "testutil.h"

static const tu_layout LA = { .page_tokens = 16, .n_tensors = 2, .bpt = { 64, 40 },
                              .point_bytes = 100, .model = "salvage-a" };
static const tu_layout LB = { .page_tokens = 4, .n_tensors = 1, .bpt = { 256 },
                              .point_bytes = 64, .flags = SB_LAYOUT_POINT_REQUIRED,
                              .model = "salvage-b" };

#define N_SEQ 17               /* the last one is the victim */
#define VICTIM (N_SEQ - 1)
#define MAX_TOK 200
#define SEG_BYTES (256u << 10)

typedef struct seq {
    uint32_t tok[MAX_TOK];
    size_t n;
    int layout;                /* 0: LA, 1: LB */
    char scope[16];
    bool point;
} seq;

static seq g_w[N_SEQ];
static char g_closed[128], g_killed[128];

static const tu_layout *lay_of(const seq *s)
{
    return s->layout ? &LB : &LA;
}

static void make_world(seq *w, uint64_t seed)
{
    uint64_t rng = seed;
    memset(w, 0, N_SEQ * sizeof *w);
    for (int i = 0; i < VICTIM; i++) {
        seq *s = &w[i];
        s->layout = i % 3 == 2;
        snprintf(s->scope, sizeof s->scope, "tenant-%d", i % 3);
        s->point = s->layout == 1 || i % 2;
        s->n = 1 + tu_rand(&rng) % (MAX_TOK - 1);
        tu_tokens(&rng, s->tok, s->n, 40);
        for (int j = i - 1; j >= 0; j--) /* share a prefix with an earlier one */
            if (w[j].layout == s->layout && !strcmp(w[j].scope, s->scope)) {
                size_t k = w[j].n < s->n ? w[j].n : s->n;
                memcpy(s->tok, w[j].tok, tu_rand(&rng) % (k + 1) * sizeof *s->tok);
                break;
            }
    }
    seq *v = &w[VICTIM]; /* two full pages, no point: its last record is page 2 */
    v->layout = 0;
    snprintf(v->scope, sizeof v->scope, "victim");
    v->n = 2 * LA.page_tokens;
    tu_tokens(&rng, v->tok, v->n, 40);
}

static sb_ns *ns_of(sb_store *st, const seq *s)
{
    return tu_ns(st, lay_of(s), s->scope);
}

static sb_config config(const char *dir, uint32_t flags)
{
    sb_config c;
    sb_config_default(&c);
    c.min_prefix_tokens = 1; /* short test sequences are written too */
    c.dir = dir;
    c.ram_bytes = 64 << 20;
    c.segment_bytes = SEG_BYTES;
    c.disk_bytes = 1ull << 30;
    c.open_flags = flags;
    return c;
}

static void put(sb_store *st, const seq *s)
{
    sb_ns *ns = ns_of(st, s);
    tu_put(ns, lay_of(s), s->tok, s->n, s->point, SB_OK);
    sb_ns_close(ns);
}

/* Match s and restore what the match gives, bit-exact (tu_restore_exact:
 * *damaged set when the restore met a damaged record). Returns the tokens
 * restored. */
static size_t probe_once(sb_store *st, const seq *s, bool *damaged)
{
    sb_ns *ns = ns_of(st, s);
    size_t L = tu_restore_exact(ns, lay_of(s), s->tok, s->n, damaged);
    sb_ns_close(ns);
    return L;
}

/* probe_once as a client would: after a restore that met damage (the
 * damaged record left the index), match again until one meets none. */
static size_t probe(sb_store *st, const seq *s)
{
    for (int k = 0; k < 1000; k++) {
        bool damaged = false;
        size_t L = probe_once(st, s, &damaged);
        if (!damaged)
            return L;
    }
    fail_msg("a thousand restores in a row met damage");
    return 0;
}

/* ---- directories ----------------------------------------------------------- */

static void path_of(const char *dir, const char *name, char *out)
{
    snprintf(out, 512, "%s/%s", dir, name);
}

/* The whole file (NULL when it does not exist); *size its size. */
static uint8_t *slurp(const char *dir, const char *name, size_t *size)
{
    char p[512];
    path_of(dir, name, p);
    int fd = open(p, O_RDONLY);
    if (fd < 0)
        return NULL;
    struct stat sb;
    assert_int_equal(fstat(fd, &sb), 0);
    uint8_t *buf = malloc((size_t)sb.st_size + 1);
    assert_non_null(buf);
    assert_int_equal(pread(fd, buf, (size_t)sb.st_size, 0), sb.st_size);
    close(fd);
    *size = (size_t)sb.st_size;
    return buf;
}

/* Write buf[0, size) as the whole file. */
static void spill(const char *dir, const char *name, const void *buf, size_t size)
{
    char p[512];
    path_of(dir, name, p);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, buf, size), (ssize_t)size);
    close(fd);
}

static void unlink_in(const char *dir, const char *name)
{
    char p[512];
    path_of(dir, name, p);
    assert_int_equal(unlink(p), 0);
}

typedef struct dirsnap {
    int n;
    char name[64][40];
    uint8_t *buf[64];
    size_t size[64];
} dirsnap;

static int name_cmp(const void *a, const void *b)
{
    return strcmp(a, b);
}

/* The regular files of dir, by name, and their bytes. */
static void snap(const char *dir, dirsnap *s)
{
    memset(s, 0, sizeof *s);
    DIR *d = opendir(dir);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        assert_true(s->n < 64 && strlen(e->d_name) < sizeof s->name[0]);
        memcpy(s->name[s->n++], e->d_name, strlen(e->d_name) + 1);
    }
    closedir(d);
    qsort(s->name, (size_t)s->n, sizeof s->name[0], name_cmp);
    for (int i = 0; i < s->n; i++)
        assert_non_null(s->buf[i] = slurp(dir, s->name[i], &s->size[i]));
}

static void snap_free(dirsnap *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->buf[i]);
}

static void snap_equal(const dirsnap *a, const dirsnap *b)
{
    assert_int_equal(a->n, b->n);
    for (int i = 0; i < a->n; i++) {
        assert_string_equal(a->name[i], b->name[i]);
        assert_int_equal(a->size[i], b->size[i]);
        assert_memory_equal(a->buf[i], b->buf[i], a->size[i]);
    }
}

static void copy_dir(const char *from, const char *to)
{
    dirsnap s;
    snap(from, &s);
    for (int i = 0; i < s.n; i++)
        spill(to, s.name[i], s.buf[i], s.size[i]);
    snap_free(&s);
}

/* The newest (highest-numbered) segment file's name. */
static void newest_seg(const char *dir, char *out)
{
    dirsnap s;
    snap(dir, &s);
    out[0] = 0;
    for (int i = 0; i < s.n; i++)
        if (strstr(s.name[i], ".dat"))
            strcpy(out, s.name[i]);
    snap_free(&s);
}

static int count_dat(const char *dir)
{
    dirsnap s;
    snap(dir, &s);
    int n = 0;
    for (int i = 0; i < s.n; i++)
        n += strstr(s.name[i], ".dat") != NULL;
    snap_free(&s);
    return n;
}

/* The offset of the last record of a segment image (following record
 * lengths from offset 0); its head in *h. */
static uint64_t last_record(const uint8_t *buf, size_t size, sb_rec_head *h)
{
    uint64_t off = 0, last = UINT64_MAX;
    for (;;) {
        uint32_t hb;
        sb_rec_head x;
        if (off + 4096 > size || sb_rec_peek(buf + off, 4096, &hb) != SB_OK ||
            off + hb > size || sb_rec_decode(buf + off, hb, off, &x, NULL, NULL) != SB_OK)
            break;
        last = off;
        *h = x;
        off += sb_rec_record_bytes(&x);
    }
    assert_true(last != UINT64_MAX);
    return last;
}

/* ---- the stores ------------------------------------------------------------ */

/* Build the world's store in dir; killed: sb_store_crash after the flush. */
static void build(const char *dir, bool killed)
{
    sb_config c = config(dir, 0);
    sb_store *st = NULL;
    assert_int_equal(sb_store_open(&c, &st), SB_OK);
    for (int i = 0; i < VICTIM; i++)
        put(st, &g_w[i]);
    /* Partial pages are written late: the flush writes them before the
     * victim, whose records are then the last ones. */
    assert_int_equal(sb_store_flush(st), SB_OK);
    put(st, &g_w[VICTIM]);
    assert_int_equal(sb_store_flush(st), SB_OK);
    if (killed)
        sb_store_crash(st);
    else
        assert_int_equal(sb_store_close(st), SB_OK);
}

static int group_setup(void **state)
{
    (void)state;
    make_world(g_w, 20240611);
    tu_scratch_dir(g_closed, sizeof g_closed, "salvage-closed");
    tu_scratch_dir(g_killed, sizeof g_killed, "salvage-killed");
    build(g_closed, false);
    build(g_killed, true);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tu_remove_dir(g_closed);
    tu_remove_dir(g_killed);
    return 0;
}

/* ---- one case ------------------------------------------------------------------ */

typedef void (*damage_fn)(const char *dir, const void *arg);

typedef struct expect {
    int refused;               /* the plain open's code */
    size_t victim;             /* tokens the victim restores after salvage */
    int scanned;               /* salvage_scanned_segments at least (-1: 0) */
    uint64_t dropped;          /* salvage_dropped_records at least (0: none) */
    uint64_t dropped_bytes;    /* ...and bytes exactly, when nonzero */
    uint64_t skipped;          /* salvage_skipped_files */
    bool some_lost;            /* sequences other than the victim may lose
                                  tokens too (damage in the middle of the
                                  world): only bit-exactness is checked */
} expect;

/* The world restores after a salvage: every sequence but the victim whole,
 * the victim e->victim tokens. Returns the lengths in L. */
static void verify(sb_store *st, const expect *e, size_t *L)
{
    for (int i = 0; i < N_SEQ; i++) {
        L[i] = probe(st, &g_w[i]);
        size_t want = i == VICTIM ? e->victim : g_w[i].n;
        if (L[i] != want && !e->some_lost) {
            fprintf(stderr, "seq %d restores %zu of %zu tokens, %zu expected\n", i, L[i],
                    g_w[i].n, want);
            fail();
        }
    }
    tu_check(st);
}

/* Copy base, damage the copy, and check everything the head comment says.
 * Returns the stats of the salvaging open. */
static sb_stats run_case(const char *base, damage_fn damage, const void *arg, const expect *e)
{
    char dir[128];
    tu_scratch_dir(dir, sizeof dir, "salvage-case");
    copy_dir(base, dir);
    damage(dir, arg);
    int n_dat = count_dat(dir);

    /* Without the flag: refused, nothing changed. */
    dirsnap before, after;
    snap(dir, &before);
    sb_config c = config(dir, 0);
    sb_store *st = (sb_store *)&st;
    assert_int_equal(sb_store_open(&c, &st), e->refused);
    assert_null(st);
    snap(dir, &after);
    snap_equal(&before, &after);
    snap_free(&after);

    c.open_flags = SB_OPEN_SALVAGE;
    if (e->refused == SB_ERR_VERSION) { /* never salvaged over */
        assert_int_equal(sb_store_open(&c, &st), SB_ERR_VERSION);
        snap(dir, &after);
        snap_equal(&before, &after);
        snap_free(&after);
        snap_free(&before);
        tu_remove_dir(dir);
        return (sb_stats){ 0 };
    }
    snap_free(&before);

    /* With it: opens, serves, reports. */
    assert_int_equal(sb_store_open(&c, &st), SB_OK);
    sb_stats s = tu_stats(st);
    assert_int_equal(s.salvaged, 1);
    assert_int_equal(s.salvaged_segments + s.salvage_skipped_files, (uint64_t)n_dat);
    assert_int_equal(s.salvage_skipped_files, e->skipped);
    assert_int_equal(s.disk_segments, s.salvaged_segments);
    if (e->scanned < 0)
        assert_int_equal(s.salvage_scanned_segments, 0);
    else
        assert_true(s.salvage_scanned_segments >= (uint64_t)e->scanned);
    if (e->dropped)
        assert_true(s.salvage_dropped_records >= e->dropped);
    else
        assert_int_equal(s.salvage_dropped_records, 0);
    if (e->dropped_bytes)
        assert_int_equal(s.salvage_dropped_bytes, e->dropped_bytes);
    assert_true(s.recovered_pages > 0);
    size_t L[N_SEQ], L2[N_SEQ];
    verify(st, e, L);
    assert_int_equal(sb_store_close(st), SB_OK);

    /* Again, without the flag: the same content. */
    c.open_flags = 0;
    st = NULL;
    assert_int_equal(sb_store_open(&c, &st), SB_OK);
    sb_stats again = tu_stats(st);
    assert_int_equal(again.salvaged, 0);
    assert_int_equal(again.recovery_orphans, s.recovery_orphans);
    assert_int_equal(again.recovered_records, s.recovered_records);
    verify(st, e, L2);
    assert_memory_equal(L, L2, sizeof L);
    assert_int_equal(sb_store_close(st), SB_OK);
    tu_remove_dir(dir);
    return s;
}

static const expect WHOLE = { .refused = SB_ERR_SUPERBLOCK, .victim = 2 * 16, .scanned = -1 };
static const expect WHOLE_KILLED = { .refused = SB_ERR_SUPERBLOCK, .victim = 2 * 16,
                                     .scanned = 1 };

/* ---- damage to the superblock ------------------------------------------------- */

/* Field classes of a slot: their offsets (format.h's table); TABLE, WEAR,
 * TAIL and SUM are resolved against the slot. */
enum { F_TABLE = -1, F_TABLE_LAST = -2, F_WEAR = -3, F_TAIL = -4, F_SUM = -5 };

static const struct field {
    const char *name;
    int off;
} FIELDS[] = {
    { "magic", 0 },         { "version", 8 },        { "slot", 10 },
    { "slot_bytes", 12 },   { "write_count", 16 },   { "store_id", 24 },
    { "segment_bytes", 32 }, { "durable_seq", 40 },  { "n_segments", 48 },
    { "reserved", 52 },     { "table[0].id", F_TABLE }, { "table[last].data_end", F_TABLE_LAST },
    { "wear", F_WEAR },     { "zero tail", F_TAIL }, { "checksum", F_SUM },
};

typedef struct slot_damage {
    int slots;                 /* bit 0: slot A, bit 1: slot B */
    int field;                 /* index into FIELDS */
} slot_damage;

static uint32_t get32(const uint8_t *p)
{
    return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void damage_slots(const char *dir, const void *arg)
{
    const slot_damage *x = arg;
    size_t size;
    uint8_t *buf = slurp(dir, "superblock", &size);
    assert_non_null(buf);
    size_t slot = size / 2;
    for (int k = 0; k < 2; k++) {
        if (!(x->slots >> k & 1))
            continue;
        uint8_t *p = buf + (size_t)k * slot;
        uint32_t n = get32(p + 48);
        assert_true(n >= 1);
        int off = FIELDS[x->field].off;
        size_t at = off >= 0 ? (size_t)off
                    : off == F_TABLE ? 64
                    : off == F_TABLE_LAST ? 64 + 24 * (size_t)(n - 1) + 16
                    : off == F_WEAR ? 64 + 24 * (size_t)n
                    : off == F_TAIL ? slot - 100
                                      : slot - 8;
        p[at] ^= 0x5a;
    }
    spill(dir, "superblock", buf, size);
    free(buf);
}

/* One slot damaged at each field class: the other one stands, and the
 * store opens without the flag (and with it: the flag changes nothing). */
static void test_salvage_one_slot(void **state)
{
    (void)state;
    for (int k = 0; k < 2; k++)
        for (size_t f = 0; f < sizeof FIELDS / sizeof *FIELDS; f++) {
            char dir[128];
            tu_scratch_dir(dir, sizeof dir, "salvage-slot");
            copy_dir(g_closed, dir);
            slot_damage x = { 1 << k, (int)f };
            damage_slots(dir, &x);
            for (uint32_t flags = 0; flags <= SB_OPEN_SALVAGE; flags += SB_OPEN_SALVAGE) {
                sb_config c = config(dir, flags);
                sb_store *st = NULL;
                int rc = sb_store_open(&c, &st);
                if (rc != SB_OK) {
                    fprintf(stderr, "slot %c, %s: %s\n", 'A' + k, FIELDS[f].name,
                            sb_strerror(rc));
                    fail();
                }
                sb_stats s = tu_stats(st);
                assert_int_equal(s.salvaged, 0);
                size_t L[N_SEQ];
                verify(st, &WHOLE, L);
                assert_int_equal(sb_store_close(st), SB_OK);
            }
            tu_remove_dir(dir);
        }
}

/* Both slots damaged at the same field class (the killed store for the
 * first and the last class: how a slot fails does not depend on what the
 * segments hold). */
static void test_salvage_both_slots(void **state)
{
    (void)state;
    size_t n = sizeof FIELDS / sizeof *FIELDS;
    for (size_t f = 0; f < n; f++) {
        slot_damage x = { 3, (int)f };
        run_case(g_closed, damage_slots, &x, &WHOLE);
        if (f == 0 || f == n - 1)
            run_case(g_killed, damage_slots, &x, &WHOLE_KILLED);
    }
}

/* Length classes: the file cut to *arg bytes, (size_t)-n meaning the slot
 * size times n / 4. */
static void damage_truncate(const char *dir, const void *arg)
{
    size_t size;
    uint8_t *buf = slurp(dir, "superblock", &size);
    assert_non_null(buf);
    long want = *(const long *)arg;
    size_t at = want >= 0 ? (size_t)want : size / 2 * (size_t)-want / 4;
    assert_true(at < size);
    spill(dir, "superblock", buf, at);
    free(buf);
}

static void test_salvage_truncated(void **state)
{
    (void)state;
    /* empty, inside slot A's fixed part, mid slot A, slot A alone, mid
     * slot B, a block short of the whole */
    static const long cuts[] = { 0, 40, -2, -4, -6, -7 };
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        run_case(g_closed, damage_truncate, &cuts[i], &WHOLE);
        if (i == 0 || i == 4) /* the killed store: empty, mid slot B */
            run_case(g_killed, damage_truncate, &cuts[i], &WHOLE_KILLED);
    }
}

static void damage_unlink(const char *dir, const void *arg)
{
    (void)arg;
    unlink_in(dir, "superblock");
}

/* *arg: 0 zeros of the same size; 1 random bytes of the same size; 2
 * random bytes of another size. */
static void damage_garbage(const char *dir, const void *arg)
{
    int kind = *(const int *)arg;
    size_t size;
    uint8_t *buf = slurp(dir, "superblock", &size);
    assert_non_null(buf);
    if (kind == 2)
        size = 5000;
    uint8_t *g = calloc(1, size);
    assert_non_null(g);
    uint64_t rng = 77;
    for (size_t i = 0; kind && i < size; i++)
        g[i] = (uint8_t)tu_rand(&rng);
    spill(dir, "superblock", g, size);
    free(g);
    free(buf);
}

static void test_salvage_unlinked_and_garbage(void **state)
{
    (void)state;
    run_case(g_closed, damage_unlink, NULL, &WHOLE);
    run_case(g_killed, damage_unlink, NULL, &WHOLE_KILLED);
    for (int kind = 0; kind < 3; kind++) {
        run_case(g_closed, damage_garbage, &kind, &WHOLE);
        if (kind == 1)
            run_case(g_killed, damage_garbage, &kind, &WHOLE_KILLED);
    }
}

/* ---- the superblock zeroed, and more ----------------------------------------------- */

static void zero_super(const char *dir)
{
    int zero = 0;
    damage_garbage(dir, &zero);
}

/* A summary damaged: *arg 0 flips a byte in the middle segment's, 1
 * deletes every summary. */
static void damage_summaries(const char *dir, const void *arg)
{
    zero_super(dir);
    dirsnap s;
    snap(dir, &s);
    int n_sum = 0;
    for (int i = 0; i < s.n; i++)
        n_sum += strstr(s.name[i], ".sum") != NULL;
    assert_true(n_sum >= 2);
    for (int i = 0, k = 0; i < s.n; i++) {
        if (!strstr(s.name[i], ".sum"))
            continue;
        if (*(const int *)arg)
            unlink_in(dir, s.name[i]);
        else if (k++ == n_sum / 2) {
            s.buf[i][s.size[i] / 2] ^= 0x01;
            spill(dir, s.name[i], s.buf[i], s.size[i]);
        }
    }
    snap_free(&s);
}

static void test_salvage_bad_summaries(void **state)
{
    (void)state;
    int flip = 0, gone = 1;
    expect one = WHOLE;
    one.scanned = 1;
    run_case(g_closed, damage_summaries, &flip, &one);
    expect all = WHOLE;
    all.scanned = count_dat(g_closed);
    run_case(g_closed, damage_summaries, &gone, &all);
}

/* The superblock zeroed, and the newest segment file (its name in name,
 * its bytes returned, *size of them, the caller's to free) with its last
 * record, the victim's second page: its head in *h, its offset in *off. */
static uint8_t *victim_segment(const char *dir, char *name, size_t *size, sb_rec_head *h,
                               uint64_t *off)
{
    zero_super(dir);
    newest_seg(dir, name);
    uint8_t *buf = slurp(dir, name, size);
    assert_non_null(buf);
    *off = last_record(buf, *size, h);
    assert_int_equal(h->kind, SB_REC_PAGE);
    assert_int_equal(h->position, LA.page_tokens);
    return buf;
}

/* The newest segment's last record (the victim's second page) damaged:
 * *arg 0 garbage over its head block (a torn write), 1 a payload byte
 * flipped (its summary deleted, so the file is read record by record). */
static void damage_victim(const char *dir, const void *arg)
{
    char name[40];
    size_t size;
    sb_rec_head h;
    uint64_t off;
    uint8_t *buf = victim_segment(dir, name, &size, &h, &off);
    if (*(const int *)arg == 0) {
        uint64_t rng = 5;
        for (size_t i = 0; i < 4096; i++)
            buf[off + i] = (uint8_t)(tu_rand(&rng) | 1);
    } else {
        buf[off + h.head_bytes + 7] ^= 0x10;
        char sum[40];
        snprintf(sum, sizeof sum, "%.12s.sum", name);
        unlink_in(dir, sum);
    }
    spill(dir, name, buf, size);
    free(buf);
}

static void test_salvage_torn_and_bad_payload(void **state)
{
    (void)state;
    /* The killed store's open segment, torn: the victim keeps its first
     * page; the run of garbage is one dropped record, one block. */
    int torn = 0, payload = 1;
    expect e = { .refused = SB_ERR_SUPERBLOCK, .victim = 16, .scanned = 1, .dropped = 1 };
    run_case(g_killed, damage_victim, &torn, &e);
    /* A payload that fails its hash: the record is dropped, its bytes
     * counted (an 8 KiB record: a 4 KiB head and a 4 KiB page). */
    e.dropped_bytes = 8192;
    run_case(g_closed, damage_victim, &payload, &e);
}

/* A record in the middle of segment 1 damaged, its summary deleted: *arg
 * 0 garbles its head (4 KiB of non-zero bytes: the scan goes on past it
 * at the next block where a record checks, so every other record of the
 * file is kept), 1 flips a byte of its payload. */
static void damage_middle(const char *dir, const void *arg)
{
    zero_super(dir);
    size_t size;
    uint8_t *buf = slurp(dir, "seg-00000001.dat", &size);
    assert_non_null(buf);
    sb_rec_head h;
    uint64_t offs[512], off = 0;
    size_t n = 0;
    for (uint32_t hb; n < 512 && off + 4096 <= size && sb_rec_peek(buf + off, 4096, &hb) == SB_OK &&
                      sb_rec_decode(buf + off, hb, off, &h, NULL, NULL) == SB_OK;
         off += sb_rec_record_bytes(&h))
        offs[n++] = off;
    assert_true(n >= 8);
    uint64_t rng = 11;
    for (size_t i = 0; i < 4096 && !*(const int *)arg; i++)
        buf[offs[n / 2] + i] = (uint8_t)(tu_rand(&rng) | 1);
    if (*(const int *)arg) {
        assert_int_equal(sb_rec_decode(buf + offs[n / 2], 4096, offs[n / 2], &h, NULL, NULL),
                         SB_OK);
        buf[offs[n / 2] + h.head_bytes] ^= 0x01;
    }
    spill(dir, "seg-00000001.dat", buf, size);
    unlink_in(dir, "seg-00000001.sum");
    free(buf);
}

static void test_salvage_resync(void **state)
{
    (void)state;
    sb_stats clean = run_case(g_closed, damage_unlink, NULL, &WHOLE);
    expect e = { .refused = SB_ERR_SUPERBLOCK, .victim = 32, .scanned = 1, .dropped = 1,
                 .some_lost = true };
    int head = 0;
    sb_stats s = run_case(g_closed, damage_middle, &head, &e);
    assert_int_equal(s.salvage_dropped_records, 1);
    assert_int_equal(s.recovered_records, clean.recovered_records - 1);
}

/* A record of an older life of the newest segment file, after its last
 * record: the victim's second page with other bytes, a newer seq and the
 * generation before the file's, checksums sound. Its summary is deleted
 * so the file is read record by record. Were it taken as current, the
 * victim would restore wrong bytes. With *arg set, it is of another format
 * version instead (version 4, its head hash sound): refused. */
static void damage_stale(const char *dir, const void *arg)
{
    bool other_version = *(const int *)arg;
    char name[40];
    size_t size;
    sb_rec_head h;
    uint64_t last;
    uint8_t *buf = victim_segment(dir, name, &size, &h, &last);
    const uint32_t *tok;
    sb_rec_head x;
    assert_int_equal(sb_rec_decode(buf + last, h.head_bytes, last, &x, &tok, NULL), SB_OK);
    uint32_t tokens[64];
    memcpy(tokens, tok, h.n_tokens * sizeof *tokens);
    uint64_t off = last + sb_rec_record_bytes(&h);
    assert_true(off + sb_rec_record_bytes(&h) <= size);
    x.seq += 1000;
    x.generation -= 1;
    uint8_t *payload = buf + off + x.head_bytes;
    memcpy(payload, buf + last + h.head_bytes, x.payload_bytes);
    for (uint64_t i = 0; i < 64; i++)
        payload[i] ^= 0xff;
    x.payload_hash = sb_rec_payload_hash(payload, x.payload_bytes);
    assert_int_equal(sb_rec_encode(&x, tokens, NULL, off, buf + off), SB_OK);
    if (other_version) { /* version 4, the head hash made to hold again */
        x.generation += 1;
        assert_int_equal(sb_rec_encode(&x, tokens, NULL, off, buf + off), SB_OK);
        buf[off + 4] = 4;
        uint64_t hh = sb_rec_head_hash(buf + off, 4 * x.n_tokens, off);
        memcpy(buf + off + 120, &hh, 8);
        assert_true(sb_rec_other_version(buf + off, x.head_bytes, off));
    }
    spill(dir, name, buf, size);
    char sum[40];
    snprintf(sum, sizeof sum, "%.12s.sum", name);
    unlink_in(dir, sum);
    free(buf);
}

static void test_salvage_stale_generation(void **state)
{
    (void)state;
    int stale = 0;
    expect e = { .refused = SB_ERR_SUPERBLOCK, .victim = 32, .scanned = 1, .dropped = 1,
                 .dropped_bytes = 8192 };
    run_case(g_closed, damage_stale, &stale, &e);
}

/* A record of another format version in a file salvage reads: the
 * salvage is refused (SB_ERR_VERSION) and the directory left as it was. */
static void test_salvage_other_version(void **state)
{
    (void)state;
    char dir[128];
    tu_scratch_dir(dir, sizeof dir, "salvage-version");
    copy_dir(g_closed, dir);
    int version = 1;
    damage_stale(dir, &version);
    dirsnap before, after;
    snap(dir, &before);
    sb_config c = config(dir, 0);
    sb_store *st = NULL;
    assert_int_equal(sb_store_open(&c, &st), SB_ERR_SUPERBLOCK);
    c.open_flags = SB_OPEN_SALVAGE;
    assert_int_equal(sb_store_open(&c, &st), SB_ERR_VERSION);
    assert_null(st);
    snap(dir, &after);
    snap_equal(&before, &after);
    snap_free(&before);
    snap_free(&after);
    tu_remove_dir(dir);
}

/* A segment file with nothing of its own (zeros, then garbage): skipped,
 * left as it was. */
static void damage_stray(const char *dir, const void *arg)
{
    (void)arg;
    zero_super(dir);
    uint8_t *z = calloc(1, SEG_BYTES);
    assert_non_null(z);
    memset(z + 8192, 0xa5, 4096);
    spill(dir, "seg-00000099.dat", z, SEG_BYTES);
    free(z);
}

static void test_salvage_stray_file(void **state)
{
    (void)state;
    expect e = WHOLE;
    e.skipped = 1;
    run_case(g_closed, damage_stray, NULL, &e);
}

/* ---- a reclaimed segment's files written back ----------------------------------- */

/* Segment 1, reclaimed under a small cap, comes back (its delete undone)
 * and the superblock is lost: salvage adopts it again. Its records are
 * correct; where reclamation copied them, the copies are newer and are
 * the ones served: with its file gone again every sequence still
 * restores what a plain open of the store before the damage restored. */
static void test_salvage_reclaimed_segment(void **state)
{
    (void)state;
    char dir[128], ref[128];
    tu_scratch_dir(dir, sizeof dir, "salvage-reclaim");
    tu_scratch_dir(ref, sizeof ref, "salvage-reclaim-ref");
    sb_config c = config(dir, 0);
    c.disk_bytes = 12 * SEG_BYTES;
    sb_store *st = NULL;
    assert_int_equal(sb_store_open(&c, &st), SB_OK);
    for (int i = 0; i < N_SEQ; i++)
        put(st, &g_w[i]);
    assert_int_equal(sb_store_flush(st), SB_OK);
    size_t n1, n1s;
    uint8_t *seg1 = slurp(dir, "seg-00000001.dat", &n1);
    uint8_t *sum1 = slurp(dir, "seg-00000001.sum", &n1s);
    assert_non_null(seg1);
    assert_non_null(sum1);
    /* Matches make pages hot (copied out, not dropped); then enough new
     * sequences that segment 1 is reclaimed. */
    for (int i = 0; i < N_SEQ; i++)
        probe(st, &g_w[i]);
    seq more[40];
    uint64_t rng = 4242;
    for (int k = 0; k < 40 && !tu_stats(st).disk_reclaimed_segments; k++) {
        more[k] = g_w[k % VICTIM];
        tu_tokens(&rng, more[k].tok, more[k].n, 40);
        put(st, &more[k]);
        assert_int_equal(sb_store_flush(st), SB_OK);
    }
    for (int k = 0; k < 20; k++) { /* and some more after it */
        seq x = g_w[k % VICTIM];
        tu_tokens(&rng, x.tok, x.n, 40);
        put(st, &x);
    }
    assert_int_equal(sb_store_flush(st), SB_OK);
    assert_true(tu_stats(st).disk_reclaimed_segments > 0);
    assert_int_equal(sb_store_close(st), SB_OK);
    size_t ignore;
    assert_null(slurp(dir, "seg-00000001.dat", &ignore)); /* reclaimed: deleted */

    /* What a plain open serves (on a copy). */
    copy_dir(dir, ref);
    sb_config cr = config(ref, 0);
    cr.disk_bytes = c.disk_bytes;
    assert_int_equal(sb_store_open(&cr, &st), SB_OK);
    size_t L_ref[N_SEQ];
    for (int i = 0; i < N_SEQ; i++)
        L_ref[i] = probe(st, &g_w[i]);
    assert_int_equal(sb_store_close(st), SB_OK);

    /* The old files back, the superblock gone: salvaged. */
    spill(dir, "seg-00000001.dat", seg1, n1);
    spill(dir, "seg-00000001.sum", sum1, n1s);
    unlink_in(dir, "superblock");
    c.open_flags = SB_OPEN_SALVAGE;
    assert_int_equal(sb_store_open(&c, &st), SB_OK);
    sb_stats s = tu_stats(st);
    assert_int_equal(s.salvaged, 1);
    assert_int_equal(s.salvage_skipped_files, 0);
    tu_check(st);
    /* Its file gone again (the store has not read it yet): nothing the
     * reference served depended on the stale copies. */
    unlink_in(dir, "seg-00000001.dat");
    for (int i = 0; i < N_SEQ; i++) {
        size_t L = probe(st, &g_w[i]);
        if (L < L_ref[i]) {
            fprintf(stderr, "seq %d: %zu tokens, %zu before the damage\n", i, L, L_ref[i]);
            fail();
        }
    }
    tu_check(st);
    assert_int_equal(sb_store_close(st), SB_OK);
    free(seg1);
    free(sum1);
    tu_remove_dir(dir);
    tu_remove_dir(ref);
}

/* ---- sb_store_fsck and sb_store_fsck_repair ---------------------------------------- */

static void test_salvage_fsck_repair(void **state)
{
    (void)state;
    char dir[128];
    tu_scratch_dir(dir, sizeof dir, "salvage-repair");
    copy_dir(g_closed, dir);
    int n_dat = count_dat(dir);
    zero_super(dir);

    /* The check reports the damage and reads nothing more. */
    sb_fsck_report *r = NULL;
    assert_int_equal(sb_store_fsck(dir, NULL, NULL, &r, NULL), SB_OK);
    assert_int_equal(r->superblock, SB_ERR_FORMAT);
    assert_int_equal(r->n_segment_files, n_dat);
    assert_int_equal(r->n_segments, 0);
    assert_int_equal(r->repaired, 0);
    sb_fsck_report_free(r);

    /* A store open on it (another holder of LOCK): refused, its holder
     * named, nothing written. */
    dirsnap before, after;
    snap(dir, &before);
    sb_io *holder = NULL;
    assert_int_equal(sb_io_posix_new(dir, &holder), 0);
    assert_int_equal(holder->ops->lock(holder, "LOCK", NULL), 0);
    long pid = 0;
    assert_int_equal(sb_store_fsck_repair(dir, NULL, NULL, &r, &pid), SB_ERR_LOCKED);
    assert_null(r);
    assert_int_equal(pid, (long)getpid());
    sb_io_destroy(holder);
    snap(dir, &after);
    snap_equal(&before, &after);
    snap_free(&before);
    snap_free(&after);

    /* The repair: rebuilt, then checked clean; the store serves. */
    assert_int_equal(sb_store_fsck_repair(dir, NULL, NULL, &r, NULL), SB_OK);
    assert_int_equal(r->repaired, 1);
    assert_int_equal(r->repair.superblock, SB_ERR_FORMAT);
    assert_int_equal(r->repair.salvaged, 1);
    assert_int_equal(r->repair.segments, n_dat);
    assert_int_equal(r->repair.scanned_segments, 0);
    assert_int_equal(r->repair.dropped_records, 0);
    assert_true(r->repair.records > 0 && r->repair.pages > 0 && r->repair.namespaces >= 3);
    assert_int_equal(r->superblock, 0);
    assert_int_equal(r->n_damaged, 0);
    assert_int_equal(r->n_segments, n_dat);
    sb_fsck_report_free(r);
    sb_config c = config(dir, 0);
    sb_store *st = NULL;
    assert_int_equal(sb_store_open(&c, &st), SB_OK);
    size_t L[N_SEQ];
    verify(st, &WHOLE, L);
    assert_int_equal(sb_store_close(st), SB_OK);

    /* Once more: nothing to rebuild. */
    assert_int_equal(sb_store_fsck_repair(dir, NULL, NULL, &r, NULL), SB_OK);
    assert_int_equal(r->repair.superblock, 0);
    assert_int_equal(r->repair.salvaged, 0);
    assert_int_equal(r->repair.segments, n_dat);
    sb_fsck_report_free(r);
    tu_remove_dir(dir);

    /* A payload that fails its hash, in the middle of a segment: dropped
     * by the repair, and the check after it still reports the damaged bytes
     * (segment files are not rewritten), under a summary that leaves the
     * record out. */
    tu_scratch_dir(dir, sizeof dir, "salvage-repair");
    copy_dir(g_closed, dir);
    int payload = 1;
    damage_middle(dir, &payload);
    assert_int_equal(sb_store_fsck_repair(dir, NULL, NULL, &r, NULL), SB_OK);
    assert_int_equal(r->repair.salvaged, 1);
    assert_int_equal(r->repair.scanned_segments, 1);
    assert_int_equal(r->repair.dropped_records, 1);
    assert_int_equal(r->superblock, 0);
    assert_int_equal(r->n_damaged, 1);
    assert_int_equal(r->bad_records, 1);
    for (uint32_t i = 0; i < r->n_segments; i++) {
        assert_int_equal(r->segments[i].summary, 0);
        assert_int_equal(r->segments[i].bad_heads, 0);
    }
    sb_fsck_report_free(r);
    tu_remove_dir(dir);
    /* ...and the victim's last record: past the end of what its segment
     * keeps, which the check reads no further than; the repair's count is
     * what reports it. */
    tu_scratch_dir(dir, sizeof dir, "salvage-repair");
    copy_dir(g_closed, dir);
    damage_victim(dir, &payload);
    assert_int_equal(sb_store_fsck_repair(dir, NULL, NULL, &r, NULL), SB_OK);
    assert_int_equal(r->repair.dropped_records, 1);
    assert_int_equal(r->repair.dropped_bytes, 8192);
    assert_int_equal(r->n_damaged, 0);
    sb_fsck_report_free(r);
    tu_remove_dir(dir);

    /* No store: refused, nothing written. */
    tu_scratch_dir(dir, sizeof dir, "salvage-repair");
    r = (sb_fsck_report *)&r;
    assert_int_equal(sb_store_fsck_repair(dir, NULL, NULL, &r, NULL), SB_ERR_FORMAT);
    assert_null(r);
    snap(dir, &after);
    assert_int_equal(after.n, 0);
    assert_int_equal(sb_store_fsck_repair(NULL, NULL, NULL, &r, NULL), SB_ERR_INVAL);
    assert_int_equal(sb_store_fsck_repair(dir, NULL, NULL, NULL, NULL), SB_ERR_INVAL);
    tu_remove_dir(dir);
}

/* ---- power cuts, on the in-memory file system ----------------------------------- */

typedef struct mseq {
    seq s;
    bool durable;              /* put before a flush that returned SB_OK */
} mseq;

static sb_config mem_config(uint32_t flags)
{
    sb_config c = tu_small_disk_config();
    c.open_flags = flags;
    return c;
}

/* Every file of the in-memory file system, for a before/after compare. */
typedef struct memsnap {
    int n;
    char name[64][40];
    uint8_t *buf[64];
    uint64_t size[64];
} memsnap;

static void mem_name(void *ctx, const char *name)
{
    memsnap *m = ctx;
    assert_true(m->n < 64);
    snprintf(m->name[m->n++], 40, "%s", name);
}

static void mem_snap(sb_io *io, memsnap *m)
{
    memset(m, 0, sizeof *m);
    assert_int_equal(io->ops->list(io, mem_name, m), 0);
    qsort(m->name, (size_t)m->n, sizeof m->name[0], name_cmp);
    for (int i = 0; i < m->n; i++) {
        int fd = sb_io_open(io, m->name[i], SB_IO_RDONLY);
        assert_true(fd >= 0);
        assert_int_equal(io->ops->size(io, fd, &m->size[i]), 0);
        assert_non_null(m->buf[i] = malloc(m->size[i] + 1));
        if (m->size[i])
            assert_int_equal(sb_io_pread(io, fd, m->buf[i], m->size[i], 0), (int64_t)m->size[i]);
        sb_io_close(io, fd);
    }
}

/* The same files with the same bytes -- LOCK aside: it holds the pid of
 * whoever held the lock last (a power cut may have garbled it), and the
 * refused open held the lock, as every open does before it reads. */
static void mem_snap_equal_free(memsnap *a, memsnap *b)
{
    assert_int_equal(a->n, b->n);
    for (int i = 0; i < a->n; i++) {
        assert_string_equal(a->name[i], b->name[i]);
        if (strcmp(a->name[i], "LOCK")) {
            assert_int_equal(a->size[i], b->size[i]);
            assert_memory_equal(a->buf[i], b->buf[i], a->size[i]);
        }
        free(a->buf[i]);
        free(b->buf[i]);
    }
}

/* Damage the superblock of an in-memory store: kind 0 zeros it, 1 removes
 * it, 2 flips a byte in each slot, 3 cuts it in slot B. */
static void mem_damage_super(sb_io *io, int kind)
{
    if (kind == 1) {
        assert_int_equal(io->ops->unlink(io, "superblock"), 0);
        return;
    }
    int fd = sb_io_open(io, "superblock", 0);
    assert_true(fd >= 0);
    uint64_t size = 0;
    assert_int_equal(io->ops->size(io, fd, &size), 0);
    uint8_t *buf = calloc(1, size);
    assert_non_null(buf);
    assert_int_equal(sb_io_pread(io, fd, buf, size, 0), (int64_t)size);
    if (kind == 0)
        memset(buf, 0, size);
    if (kind == 2)
        buf[40] ^= 1, buf[size / 2 + 40] ^= 1;
    if (kind == 3)
        assert_int_equal(io->ops->truncate(io, fd, size / 2 + 100), 0);
    else
        assert_int_equal(sb_io_pwrite(io, fd, buf, size, 0), (int64_t)size);
    assert_int_equal(sb_io_fdatasync(io, fd), 0);
    sb_io_close(io, fd);
    free(buf);
}

/* Every sequence bit-exact; the durable ones whole. */
static void mem_check(sb_store *st, const mseq *w, int n)
{
    for (int i = 0; i < n; i++) {
        size_t L = probe(st, &w[i].s);
        if (w[i].durable && L != w[i].s.n) {
            fprintf(stderr, "durable seq %d restores %zu of %zu tokens\n", i, L, w[i].s.n);
            fail();
        }
    }
    tu_check(st);
}

/* Put w[from, to) and flush: durable when the flush says so. */
static void mem_put(sb_store *st, mseq *w, int from, int to)
{
    for (int i = from; i < to; i++)
        put(st, &w[i].s);
    if (sb_store_flush(st) == SB_OK)
        for (int i = from; i < to; i++)
            w[i].durable = true;
}

static void mem_world(mseq *w, int n, uint64_t seed)
{
    seq base[N_SEQ];
    make_world(base, seed);
    uint64_t rng = seed * 31 + 7;
    for (int i = 0; i < n; i++) {
        w[i].s = base[i % N_SEQ];
        w[i].durable = false;
        if (i >= N_SEQ) /* more of the same shapes, other tokens */
            tu_tokens(&rng, w[i].s.tok, w[i].s.n, 40);
    }
}

static uint64_t salvage_rounds(void)
{
    const char *env = getenv("SB_SALVAGE_ROUNDS");
    return env ? strtoull(env, NULL, 10) : 40;
}

/* A power cut (the writer running, unsynced units kept, garbled or lost),
 * then the superblock damaged: salvage serves every durable sequence,
 * keeps working through another cut, and a plain open follows. */
static void test_salvage_power_cut(void **state)
{
    (void)state;
    static mseq w[24];
    for (uint64_t seed = 1; seed <= salvage_rounds(); seed++) {
        mem_world(w, 24, seed);
        sb_io *io = NULL;
        assert_int_equal(sb_io_mem_new(&io), 0);
        sb_config c = mem_config(0);
        sb_store *st = NULL;
        assert_int_equal(sb_store_open_io(&c, io, &st), SB_OK);
        mem_put(st, w, 0, 10);
        for (int i = 10; i < 16; i++) /* in flight at the cut */
            put(st, &w[i].s);
        uint64_t rng = seed;
        double keep = (double)(tu_rand(&rng) % 100) / 100.0;
        double garble = (double)(tu_rand(&rng) % 30) / 100.0;
        assert_int_equal(sb_io_mem_crash(io, seed, keep, garble), 0);
        sb_store_crash(st);
        mem_damage_super(io, (int)(seed % 4));

        memsnap before, after;
        mem_snap(io, &before);
        st = (sb_store *)&st;
        assert_int_equal(sb_store_open_io(&c, io, &st), SB_ERR_SUPERBLOCK);
        assert_null(st);
        mem_snap(io, &after);
        mem_snap_equal_free(&before, &after);

        c.open_flags = SB_OPEN_SALVAGE;
        assert_int_equal(sb_store_open_io(&c, io, &st), SB_OK);
        assert_int_equal(tu_stats(st).salvaged, 1);
        mem_check(st, w, 16);
        /* It keeps working: more puts, durable once flushed, then a cut. */
        mem_put(st, w, 16, 24);
        mem_check(st, w, 24);
        assert_int_equal(sb_io_mem_crash(io, seed + 1000, keep, garble), 0);
        sb_store_crash(st);
        c.open_flags = 0;
        assert_int_equal(sb_store_open_io(&c, io, &st), SB_OK);
        assert_int_equal(tu_stats(st).salvaged, 0);
        mem_check(st, w, 24);
        assert_int_equal(sb_store_close(st), SB_OK);
        sb_io_destroy(io);
    }
}

/* The fixed store of the cut-short test, built once: everything flushed,
 * closed once (sealed segments, summaries) and then killed (an open
 * segment), its superblock zeroed; its files kept in *files. */
static void cut_store(mseq *w, int n, memsnap *files)
{
    mem_world(w, n, 99);
    sb_io *io = NULL;
    assert_int_equal(sb_io_mem_new(&io), 0);
    sb_config c = mem_config(0);
    c.segment_bytes = 256 << 10; /* a few segments: a salvage of few operations */
    sb_store *st = NULL;
    assert_int_equal(sb_store_open_io(&c, io, &st), SB_OK);
    mem_put(st, w, 0, n / 2);
    assert_int_equal(sb_store_close(st), SB_OK);
    assert_int_equal(sb_store_open_io(&c, io, &st), SB_OK);
    mem_put(st, w, n / 2, n);
    sb_store_crash(st);
    for (int i = 0; i < n; i++)
        assert_true(w[i].durable);
    mem_damage_super(io, 0);
    mem_snap(io, files);
    sb_io_destroy(io);
}

/* A fresh file system holding files, every one durable. */
static sb_io *mem_restore(const memsnap *files)
{
    sb_io *io = NULL;
    assert_int_equal(sb_io_mem_new(&io), 0);
    for (int i = 0; i < files->n; i++) {
        int fd = sb_io_open(io, files->name[i], SB_IO_CREATE);
        assert_true(fd >= 0);
        assert_int_equal(io->ops->truncate(io, fd, files->size[i]), 0);
        if (files->size[i])
            assert_int_equal(sb_io_pwrite(io, fd, files->buf[i], files->size[i], 0),
                             (int64_t)files->size[i]);
        assert_int_equal(sb_io_fdatasync(io, fd), 0);
        sb_io_close(io, fd);
    }
    assert_int_equal(io->ops->sync_dir(io), 0);
    return io;
}

/* A salvage cut short at its nth I/O operation (EIO there, then a power
 * cut that drops what was not synced): a second salvage opens the store
 * with every durable sequence whole, and a plain open follows. */
static void test_salvage_cut_short(void **state)
{
    (void)state;
    static mseq w[10];
    static memsnap files;
    cut_store(w, 10, &files);
    sb_config c = mem_config(SB_OPEN_SALVAGE);
    sb_io *io = mem_restore(&files);
    uint64_t before = sb_io_mem_ops_count(io);
    sb_store *st = NULL;
    assert_int_equal(sb_store_open_io(&c, io, &st), SB_OK);
    uint64_t total = sb_io_mem_ops_count(io) - before;
    sb_stats s = tu_stats(st);
    assert_true(s.salvage_scanned_segments >= 1);
    assert_true(s.salvaged_segments >= 3);
    sb_store_crash(st);
    sb_io_destroy(io);
    assert_true(total > 20);
    fprintf(stderr, "  a salvage of %llu segment files: %llu I/O operations, each cut\n",
            (unsigned long long)s.salvaged_segments, (unsigned long long)total);
    for (uint64_t n = 1; n <= total + 1; n++) {
        io = mem_restore(&files);
        sb_io_mem_fail_at(io, n, -5 /* EIO */);
        st = NULL;
        int rc = sb_store_open_io(&c, io, &st);
        sb_io_mem_fail_at(io, 0, 0);
        if (rc == SB_OK) {
            sb_store_crash(st);
        } else {
            assert_null(st);
            if (rc != SB_ERR_IO) {
                fprintf(stderr, "EIO at op %llu of the salvage: %s\n", (unsigned long long)n,
                        sb_strerror(rc));
                fail();
            }
        }
        assert_int_equal(sb_io_mem_crash(io, n, 0.5, 0.2), 0);
        /* Whatever the cut left: a salvage (or, the new superblock in
         * place, a plain open) serves everything durable. */
        rc = sb_store_open_io(&c, io, &st);
        if (rc != SB_OK) {
            fprintf(stderr, "EIO at op %llu, then a cut: salvage again: %s\n",
                    (unsigned long long)n, sb_strerror(rc));
            fail();
        }
        mem_check(st, w, 10);
        assert_int_equal(sb_store_close(st), SB_OK);
        sb_config plain = mem_config(0);
        assert_int_equal(sb_store_open_io(&plain, io, &st), SB_OK);
        assert_int_equal(tu_stats(st).salvaged, 0);
        mem_check(st, w, 10);
        assert_int_equal(sb_store_close(st), SB_OK);
        sb_io_destroy(io);
    }
    for (int i = 0; i < files.n; i++)
        free(files.buf[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_salvage_one_slot),
        cmocka_unit_test(test_salvage_both_slots),
        cmocka_unit_test(test_salvage_truncated),
        cmocka_unit_test(test_salvage_unlinked_and_garbage),
        cmocka_unit_test(test_salvage_bad_summaries),
        cmocka_unit_test(test_salvage_torn_and_bad_payload),
        cmocka_unit_test(test_salvage_resync),
        cmocka_unit_test(test_salvage_stale_generation),
        cmocka_unit_test(test_salvage_other_version),
        cmocka_unit_test(test_salvage_stray_file),
        cmocka_unit_test(test_salvage_reclaimed_segment),
        cmocka_unit_test(test_salvage_fsck_repair),
        cmocka_unit_test(test_salvage_power_cut),
        cmocka_unit_test(test_salvage_cut_short),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
