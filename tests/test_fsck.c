/* Description: sb_store_fsck (store/include/snapbank_fsck.h) on store
 * directories built by hand with the format codec in a fresh directory
 * under /tmp: a superblock (slot A older, slot B current) listing a sealed
 * segment with its summary (namespace, page, point records, one page
 * larger than fsck's 1 MiB read window), an open segment and a free one.
 * The clean store reports every record and no damage, and fsck leaves
 * every byte as it was (no LOCK created). Then one fault at a time: a
 * flipped payload byte (bad payload at its offset), a damaged head (one bad
 * head; the scan finds the records after it, even past a large payload),
 * summaries missing, damaged, stale or disagreeing, a sealed segment file
 * short or missing, the open segment truncated mid-record or ending in an
 * old generation's record (its tail, not damage), a bad payload in the
 * open segment (damage when durable, the tail when not), slot B damaged
 * or at the wrong place (slot A used), both slots damaged, the superblock
 * zeroed or gone beside segment files (a report with superblock set: a
 * store that lost it), no store at all (no superblock, no segment file:
 * SB_ERR_FORMAT), slot B of another version (its hash holding: slot A
 * used, as open does), a version field whose hash fails (damage), both
 * slots of another version, whole or cut in slot B (SB_ERR_VERSION, the
 * directory byte-identical, LOCK included), a store in use (SB_ERR_LOCKED
 * with the holder's pid), and argument and I/O errors. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

#include "format.h"
#include "io.h"
#include "snapbank_fsck.h"

#define XXH_INLINE_ALL /* the slot hash, without linking libxxhash */
#include <xxhash.h>

#define SEG_BYTES (4ull << 20)
#define BIG_PAGE (1536u << 10)     /* 1.5 MiB: spans fsck's read window */
#define MAX_RECS 8

/* One record as written, for summaries and offsets. */
typedef struct rec {
    uint64_t off;
    sb_rec_head h;
    uint32_t tok[4];
    uint8_t extra[64];
} rec;

/* A segment image being built. */
typedef struct seg {
    uint32_t id, gen;
    uint8_t *buf;                  /* (SEG_BYTES) */
    uint64_t end;                  /* bytes of records */
    uint32_t n;
    rec r[MAX_RECS];
} seg;

typedef struct fx {
    char dir[64];
    seg s[2];                      /* [0] sealed id 1, [1] open id 2 */
    sb_super_seg tab[2][3];        /* slot A's and slot B's segment tables */
    sb_super sup[2];
} fx;

/* ---- building a store ----------------------------------------------------- */

static void path_of(const fx *f, const char *name, char *out, size_t n)
{
    snprintf(out, n, "%s/%s", f->dir, name);
}

static void put_file(const fx *f, const char *name, const void *buf, size_t len)
{
    char p[512];
    path_of(f, name, p, sizeof p);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, buf, len), (ssize_t)len);
    close(fd);
}

/* Append a record of kind with seq to s (payload byte i is a function of
 * seq and i); returns its index. */
static uint32_t add_rec(seg *s, uint8_t kind, uint64_t seq, uint32_t n_tok, const void *extra,
                        uint32_t extra_bytes, uint64_t payload_bytes)
{
    assert_true(s->n < MAX_RECS);
    rec *r = &s->r[s->n];
    memset(r, 0, sizeof *r);
    r->off = s->end;
    for (uint32_t i = 0; i < n_tok; i++)
        r->tok[i] = (uint32_t)(seq * 100 + i);
    if (extra_bytes)
        memcpy(r->extra, extra, extra_bytes);
    sb_rec_head *h = &r->h;
    h->kind = kind;
    h->seq = seq;
    h->segment_id = s->id;
    h->generation = s->gen;
    h->ns_id = 0x1234;
    h->key[0] = seq * 0x9E3779B97F4A7C15ull;
    h->key[1] = ~seq;
    h->n_tokens = n_tok;
    h->extra_bytes = extra_bytes;
    h->head_bytes = sb_rec_head_size(n_tok, extra_bytes);
    h->payload_bytes = payload_bytes;
    uint8_t *payload = s->buf + r->off + h->head_bytes;
    for (uint64_t i = 0; i < payload_bytes; i++)
        payload[i] = (uint8_t)(seq * 31 + i * 7 + (i >> 12));
    h->payload_hash = sb_rec_payload_hash(payload, payload_bytes);
    assert_int_equal(sb_rec_encode(h, r->tok, r->extra, r->off, s->buf + r->off), SB_OK);
    s->end += sb_rec_record_bytes(h);
    assert_true(s->end <= SEG_BYTES);
    return s->n++;
}

/* The namespace description of a one-tensor layout. */
static uint32_t ns_desc(uint32_t bpt, uint8_t *out)
{
    static uint32_t b;
    b = bpt;
    sb_layout l = { .model_id = "model", .model_id_bytes = 5, .page_tokens = 4,
                    .n_tensors = 1, .bytes_per_token = &b, .point_bytes = 4096 };
    uint32_t n = sb_rec_ns_size(&l, 1);
    assert_true(n <= 64);
    assert_int_equal(sb_rec_ns_encode(&l, "t", 1, out), SB_OK);
    return n;
}

static void write_seg(const fx *f, const seg *s)
{
    char name[32];
    snprintf(name, sizeof name, "seg-%08u.dat", s->id);
    put_file(f, name, s->buf, SEG_BYTES);
}

/* Write the summary of s; entry e gets seq_delta added to its seq (to
 * make one disagree), and gen is the summary's generation. */
static void write_sum(const fx *f, const seg *s, uint32_t n, int e, uint64_t seq_delta,
                      uint32_t gen)
{
    size_t body = 0;
    for (uint32_t i = 0; i < n; i++)
        body += sb_sum_entry_size(s->r[i].h.n_tokens, s->r[i].h.extra_bytes);
    uint8_t *buf = calloc(1, SB_SUM_FIXED + body + 8);
    assert_non_null(buf);
    size_t pos = SB_SUM_FIXED;
    for (uint32_t i = 0; i < n; i++) {
        sb_rec_head h = s->r[i].h;
        if ((int)i == e)
            h.seq += seq_delta;
        sb_sum_put_entry(buf + pos, s->r[i].off, &h, s->r[i].tok, s->r[i].extra);
        pos += sb_sum_entry_size(h.n_tokens, h.extra_bytes);
    }
    sb_sum_info info = { .segment_id = s->id, .generation = gen, .n_entries = n,
                         .data_end = s->end, .first_seq = s->r[0].h.seq,
                         .last_seq = s->r[n - 1].h.seq, .body_bytes = body };
    size_t len = sb_sum_finish(buf, &info);
    char name[32];
    snprintf(name, sizeof name, "seg-%08u.sum", s->id);
    put_file(f, name, buf, len);
    free(buf);
}

static void write_super(const fx *f)
{
    uint32_t slot_bytes = f->sup[0].slot_bytes;
    uint8_t *buf = calloc(2, slot_bytes);
    assert_non_null(buf);
    assert_int_equal(sb_super_encode(&f->sup[0], buf), SB_OK);
    assert_int_equal(sb_super_encode(&f->sup[1], buf + slot_bytes), SB_OK);
    put_file(f, "superblock", buf, 2 * (size_t)slot_bytes);
    free(buf);
}

/* The standard store: segment 1 sealed (generation 3) with its summary,
 * segment 2 open (generation 1), segment 3 free and without a file. Slot A
 * (write 1) is an older state: segment 1 still open. durable_seq 9 covers
 * every record. */
static int fx_setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    strcpy(f->dir, "/tmp/sb-fsck-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    uint8_t d[64];
    f->s[0] = (seg){ .id = 1, .gen = 3 };
    f->s[1] = (seg){ .id = 2, .gen = 1 };
    for (int i = 0; i < 2; i++) {
        f->s[i].buf = calloc(1, SEG_BYTES);
        assert_non_null(f->s[i].buf);
    }
    seg *a = &f->s[0], *b = &f->s[1];
    add_rec(a, SB_REC_NAMESPACE, 1, 0, d, ns_desc(1024, d), 0);
    add_rec(a, SB_REC_PAGE, 2, 4, NULL, 0, 4096);
    add_rec(a, SB_REC_PAGE, 3, 4, NULL, 0, 4096);
    add_rec(a, SB_REC_NAMESPACE, 4, 0, d, ns_desc(BIG_PAGE / 4, d), 0);
    add_rec(a, SB_REC_PAGE, 5, 4, NULL, 0, BIG_PAGE);
    add_rec(a, SB_REC_POINT, 6, 2, NULL, 0, 4096);
    add_rec(b, SB_REC_NAMESPACE, 7, 0, d, ns_desc(1024, d), 0);
    add_rec(b, SB_REC_PAGE, 8, 4, NULL, 0, 4096);
    add_rec(b, SB_REC_PAGE, 9, 3, NULL, 0, 3000);
    /* A record without payload as store/disk/writer.c writes it: payload hash 0
     * (segment 1's have format.h's XXH3 of no bytes). */
    rec *nr = &b->r[0];
    nr->h.payload_hash = 0;
    assert_int_equal(sb_rec_encode(&nr->h, nr->tok, nr->extra, 0, b->buf), SB_OK);
    write_seg(f, a);
    write_seg(f, b);
    write_sum(f, a, a->n, -1, 0, a->gen);
    for (int k = 0; k < 2; k++) {
        f->tab[k][0] = (sb_super_seg){ 1, 3, k ? SB_SEG_SEALED : SB_SEG_OPEN, k ? a->end : 0 };
        f->tab[k][1] = (sb_super_seg){ 2, 1, k ? SB_SEG_OPEN : SB_SEG_FREE, 0 };
        f->tab[k][2] = (sb_super_seg){ 3, 0, SB_SEG_FREE, 0 };
        f->sup[k] = (sb_super){ .slot = (uint16_t)k, .slot_bytes = sb_super_slot_size(3),
                                .write_count = 1 + (uint64_t)k, .store_id = 77,
                                .segment_bytes = SEG_BYTES, .durable_seq = k ? 9 : 6,
                                .n_segments = 3, .segments = f->tab[k] };
    }
    write_super(f);
    *state = f;
    return 0;
}

static int fx_teardown(void **state)
{
    fx *f = *state;
    DIR *dh = opendir(f->dir);
    struct dirent *e;
    char p[512];
    while (dh && (e = readdir(dh))) {
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            path_of(f, e->d_name, p, sizeof p);
            if (unlink(p) < 0)
                rmdir(p);
        }
    }
    if (dh)
        closedir(dh);
    rmdir(f->dir);
    free(f->s[0].buf);
    free(f->s[1].buf);
    free(f);
    return 0;
}

/* ---- helpers ------------------------------------------------------------------ */

static void flip(const fx *f, const char *name, uint64_t off)
{
    char p[512];
    uint8_t c;
    path_of(f, name, p, sizeof p);
    int fd = open(p, O_RDWR);
    assert_true(fd >= 0);
    assert_int_equal(pread(fd, &c, 1, (off_t)off), 1);
    c ^= 0x40;
    assert_int_equal(pwrite(fd, &c, 1, (off_t)off), 1);
    close(fd);
}

/* Slot k of the superblock says version v, its hash holding (a slot of
 * another format version) or, without rehash, not (a damaged field). */
static void set_version(const fx *f, int k, uint16_t v, bool rehash)
{
    char p[512];
    path_of(f, "superblock", p, sizeof p);
    uint32_t slot = f->sup[0].slot_bytes;
    uint8_t *buf = malloc(slot);
    assert_non_null(buf);
    int fd = open(p, O_RDWR);
    assert_true(fd >= 0);
    assert_int_equal(pread(fd, buf, slot, (off_t)k * slot), (ssize_t)slot);
    buf[8] = (uint8_t)v;
    buf[9] = (uint8_t)(v >> 8);
    if (rehash) {
        uint64_t h = XXH3_64bits(buf, slot - 8);
        memcpy(buf + slot - 8, &h, 8);
    }
    assert_int_equal(pwrite(fd, buf, slot, (off_t)k * slot), (ssize_t)slot);
    close(fd);
    free(buf);
}

static void cut(const fx *f, const char *name, uint64_t len)
{
    char p[512];
    path_of(f, name, p, sizeof p);
    assert_int_equal(truncate(p, (off_t)len), 0);
}

static void rm(const fx *f, const char *name)
{
    char p[512];
    path_of(f, name, p, sizeof p);
    assert_int_equal(unlink(p), 0);
}

/* Every file of the directory, concatenated with its name, for comparing
 * before and after. Caller frees. */
static uint8_t *snapshot(const fx *f, size_t *len)
{
    size_t cap = 16u << 20, n = 0;
    uint8_t *out = malloc(cap);
    assert_non_null(out);
    const char *names[] = { "LOCK", "superblock", "seg-00000001.dat", "seg-00000001.sum",
                            "seg-00000002.dat", "seg-00000003.dat" };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char p[512];
        path_of(f, names[i], p, sizeof p);
        n += (size_t)snprintf((char *)out + n, 64, "%s:", names[i]);
        int fd = open(p, O_RDONLY);
        if (fd < 0)
            continue;
        ssize_t got;
        while ((got = read(fd, out + n, cap - n)) > 0)
            n += (size_t)got;
        close(fd);
        assert_true(n < cap);
    }
    *len = n;
    return out;
}

/* Progress as seen by the callback. */
typedef struct prog {
    uint64_t calls, last_done, total;
    bool backwards;
} prog;

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
    prog *p = ctx;
    p->backwards |= done < p->last_done || done > total || (p->calls && total != p->total);
    p->calls++;
    p->last_done = done;
    p->total = total;
}

/* Run fsck on f's directory; asserts SB_OK. */
static sb_fsck_report *run(const fx *f)
{
    sb_fsck_report *r = NULL;
    long pid = -1;
    assert_int_equal(sb_store_fsck(f->dir, NULL, NULL, &r, &pid), SB_OK);
    assert_int_equal(pid, 0);
    assert_non_null(r);
    return r;
}

/* Run fsck; segment i's findings, and the report's count of damaged
 * segments in *n_damaged. */
static sb_fsck_segment check(const fx *f, uint32_t i, uint32_t *n_damaged)
{
    sb_fsck_report *r = run(f);
    assert_true(i < r->n_segments);
    sb_fsck_segment s = r->segments[i];
    *n_damaged = r->n_damaged;
    sb_fsck_report_free(r);
    return s;
}

static void assert_seg_clean(const sb_fsck_segment *s)
{
    assert_int_equal(s->bad_heads, 0);
    assert_int_equal(s->bad_payloads, 0);
    assert_int_equal(s->summary, 0);
    assert_int_equal(s->file, 0);
    assert_true(s->first_bad_offset == UINT64_MAX);
}

/* ---- tests --------------------------------------------------------------------- */

static void test_fsck_clean(void **state)
{
    fx *f = *state;
    size_t n0, n1;
    uint8_t *before = snapshot(f, &n0);
    prog pg = { 0 };
    sb_fsck_report *r = NULL;
    assert_int_equal(sb_store_fsck(f->dir, on_progress, &pg, &r, NULL), SB_OK);
    assert_int_equal(r->superblock, 0);
    assert_int_equal(r->superblock_slot, 1);
    assert_int_equal(r->other_slot, 0);
    assert_int_equal(r->write_count, 2);
    assert_int_equal(r->segment_bytes, SEG_BYTES);
    assert_int_equal(r->durable_seq, 9);
    assert_int_equal(r->locked, 0);             /* no LOCK file: none created */
    assert_int_equal(r->n_segments, 3);
    const sb_fsck_segment *a = &r->segments[0], *b = &r->segments[1], *c = &r->segments[2];
    assert_int_equal(a->segment_id, 1);
    assert_int_equal(a->generation, 3);
    assert_int_equal(a->state, SB_SEG_SEALED);
    assert_int_equal(a->data_end, f->s[0].end);
    assert_int_equal(a->records, 6);
    assert_int_equal(a->namespaces, 2);
    assert_int_equal(a->pages, 3);
    assert_int_equal(a->points, 1);
    assert_int_equal(a->bytes_checked, f->s[0].end);
    assert_seg_clean(a);
    assert_int_equal(b->state, SB_SEG_OPEN);
    assert_int_equal(b->data_end, f->s[1].end);  /* the tail: where records stop */
    assert_int_equal(b->records, 3);
    assert_int_equal(b->pages, 2);
    assert_seg_clean(b);
    assert_int_equal(c->state, SB_SEG_FREE);
    assert_int_equal(c->records, 0);
    assert_seg_clean(c);
    assert_int_equal(r->records, 9);
    assert_int_equal(r->bad_records, 0);
    assert_int_equal(r->n_damaged, 0);
    assert_int_equal(r->bytes_checked, f->s[0].end + f->s[1].end);
    sb_fsck_report_free(r);
    /* Progress rose to its total, which was the sealed bytes plus the open
     * segment's size. */
    assert_true(pg.calls >= 2);
    assert_false(pg.backwards);
    assert_int_equal(pg.total, f->s[0].end + SEG_BYTES);
    assert_int_equal(pg.last_done, pg.total);
    /* Nothing was written or created. */
    uint8_t *after = snapshot(f, &n1);
    assert_int_equal(n0, n1);
    assert_memory_equal(before, after, n0);
    free(before);
    free(after);
    sb_fsck_report_free(NULL);
}

static void test_fsck_lock(void **state)
{
    fx *f = *state;
    put_file(f, "LOCK", "", 0);
    sb_fsck_report *r = run(f);
    assert_int_equal(r->locked, 1);
    assert_int_equal(r->n_damaged, 0);
    sb_fsck_report_free(r);
    /* A store open on the directory: another sb_io holds LOCK. */
    sb_io *io;
    long pid = 0;
    assert_int_equal(sb_io_posix_new(f->dir, &io), 0);
    assert_int_equal(io->ops->lock(io, "LOCK", &pid), 0);
    r = (sb_fsck_report *)&pid;
    assert_int_equal(sb_store_fsck(f->dir, NULL, NULL, &r, &pid), SB_ERR_LOCKED);
    assert_null(r);
    assert_int_equal(pid, (long)getpid());
    sb_io_destroy(io);
    r = run(f);
    sb_fsck_report_free(r);
}

static void test_fsck_bad_payload(void **state)
{
    fx *f = *state;
    const rec *big = &f->s[0].r[4], *p = &f->s[0].r[1];
    uint32_t dmg;
    flip(f, "seg-00000001.dat", big->off + big->h.head_bytes + (1u << 20) + 5);
    sb_fsck_report *r = run(f);
    const sb_fsck_segment *a = &r->segments[0];
    assert_int_equal(a->bad_payloads, 1);
    assert_int_equal(a->bad_heads, 0);
    assert_int_equal(a->first_bad_offset, big->off);
    assert_int_equal(a->records, 5);
    assert_int_equal(a->pages, 2);
    assert_int_equal(a->summary, 0);            /* its head still matches */
    assert_int_equal(r->bad_records, 1);
    assert_int_equal(r->n_damaged, 1);
    sb_fsck_report_free(r);
    /* A second one, earlier: first_bad_offset moves to it. */
    flip(f, "seg-00000001.dat", p->off + p->h.head_bytes);
    sb_fsck_segment s = check(f, 0, &dmg);
    assert_int_equal(s.bad_payloads, 2);
    assert_int_equal(s.first_bad_offset, p->off);
    assert_int_equal(dmg, 1);
}

static void test_fsck_bad_head(void **state)
{
    fx *f = *state;
    const rec *r2 = &f->s[0].r[2], *r4 = &f->s[0].r[4];
    uint32_t dmg;
    flip(f, "seg-00000001.dat", r2->off + SB_REC_FIXED);    /* a token ID */
    sb_fsck_segment s = check(f, 0, &dmg);
    assert_int_equal(s.bad_heads, 1);
    assert_int_equal(s.bad_payloads, 0);
    assert_int_equal(s.first_bad_offset, r2->off);
    assert_int_equal(s.records, 5);             /* the scan found the rest */
    assert_int_equal(s.summary, 0);             /* its entry is excused */
    assert_int_equal(dmg, 1);
    /* The head of the large page too: the scan probes every 4 KiB block of
     * its 1.5 MiB payload and still finds the point record after it. Two
     * bad runs, two bad heads. */
    flip(f, "seg-00000001.dat", r4->off + 8);               /* its seq */
    s = check(f, 0, &dmg);
    assert_int_equal(s.bad_heads, 2);
    assert_int_equal(s.records, 4);
    assert_int_equal(s.points, 1);
    assert_int_equal(s.summary, 0);
    /* Adjacent bad heads are one run (their lengths are unknown): with the
     * record between them damaged too, records 2 to 4 are one bad head. */
    flip(f, "seg-00000001.dat", f->s[0].r[3].off + 8);
    s = check(f, 0, &dmg);
    assert_int_equal(s.bad_heads, 1);
    assert_int_equal(s.first_bad_offset, r2->off);
    assert_int_equal(s.records, 3);
    assert_int_equal(s.summary, 0);
}

static void test_fsck_summary(void **state)
{
    fx *f = *state;
    seg *a = &f->s[0];
    uint32_t dmg;
    rm(f, "seg-00000001.sum");
    sb_fsck_segment s = check(f, 0, &dmg);
    assert_int_equal(s.summary, SB_ERR_NOT_FOUND);
    assert_int_equal(s.records, 6);
    assert_int_equal(s.bad_heads + s.bad_payloads, 0);
    assert_int_equal(dmg, 1);
    /* Damaged bytes: its file hash fails. */
    write_sum(f, a, a->n, -1, 0, a->gen);
    flip(f, "seg-00000001.sum", 100);
    assert_int_equal(check(f, 0, &dmg).summary, SB_ERR_CORRUPT);
    /* Sound but disagreeing: one entry's seq, a stale generation, an entry
     * missing (a record it does not list). */
    write_sum(f, a, a->n, 2, 1, a->gen);
    s = check(f, 0, &dmg);
    assert_int_equal(s.summary, SB_ERR_CORRUPT);
    assert_int_equal(s.bad_heads + s.bad_payloads, 0);
    write_sum(f, a, a->n, -1, 0, a->gen - 1);
    assert_int_equal(check(f, 0, &dmg).summary, SB_ERR_CORRUPT);
    write_sum(f, a, a->n - 1, -1, 0, a->gen);
    assert_int_equal(check(f, 0, &dmg).summary, SB_ERR_CORRUPT);
    /* Not a summary at all. */
    uint8_t junk[72];
    memset(junk, 'x', sizeof junk);
    put_file(f, "seg-00000001.sum", junk, sizeof junk);
    assert_int_equal(check(f, 0, &dmg).summary, SB_ERR_FORMAT);
    /* Back to sound. */
    write_sum(f, a, a->n, -1, 0, a->gen);
    assert_int_equal(check(f, 0, &dmg).summary, 0);
    assert_int_equal(dmg, 0);
}

static void test_fsck_sealed_file(void **state)
{
    fx *f = *state;
    const rec *big = &f->s[0].r[4];
    uint32_t dmg;
    cut(f, "seg-00000001.dat", big->off + big->h.head_bytes + 12345);
    sb_fsck_segment s = check(f, 0, &dmg);
    assert_int_equal(s.file, SB_ERR_FORMAT);
    assert_int_equal(s.first_bad_offset, big->off);
    assert_int_equal(s.records, 4);
    assert_int_equal(s.bad_heads, 0);
    assert_int_equal(s.summary, 0);             /* the entries past the end excused */
    assert_int_equal(dmg, 1);
    rm(f, "seg-00000001.dat");
    s = check(f, 0, &dmg);
    assert_int_equal(s.file, SB_ERR_NOT_FOUND);
    assert_int_equal(s.first_bad_offset, 0);
    assert_int_equal(s.records, 0);
    assert_int_equal(s.summary, 0);             /* not its fault */
    assert_int_equal(dmg, 1);
    assert_int_equal(check(f, 1, &dmg).records, 3);
}

static void test_fsck_open_tail(void **state)
{
    fx *f = *state;
    seg *b = &f->s[1];
    uint32_t dmg;
    /* Truncated inside the last record's payload, then inside a head. */
    cut(f, "seg-00000002.dat", b->r[2].off + b->r[2].h.head_bytes + 100);
    sb_fsck_segment s = check(f, 1, &dmg);
    assert_int_equal(s.data_end, b->r[2].off);
    assert_int_equal(s.records, 2);
    assert_seg_clean(&s);
    assert_int_equal(dmg, 0);
    cut(f, "seg-00000002.dat", b->r[1].off + 100);
    s = check(f, 1, &dmg);
    assert_int_equal(s.data_end, b->r[1].off);
    assert_int_equal(s.records, 1);
    assert_int_equal(dmg, 0);
    /* A record of the segment's previous generation after the last one:
     * left from an older life, so the tail. */
    seg old = { .id = 2, .gen = 0, .buf = b->buf, .end = b->end };
    add_rec(&old, SB_REC_PAGE, 3, 4, NULL, 0, 4096);
    write_seg(f, b);
    s = check(f, 1, &dmg);
    assert_int_equal(s.data_end, b->end);
    assert_int_equal(s.records, 3);
    assert_int_equal(dmg, 0);
}

static void test_fsck_open_payload(void **state)
{
    fx *f = *state;
    const rec *p = &f->s[1].r[1];
    uint32_t dmg;
    flip(f, "seg-00000002.dat", p->off + p->h.head_bytes + 7);
    /* durable_seq 9: the record was durable, so this is damage and the
     * scan goes on past it. */
    sb_fsck_segment s = check(f, 1, &dmg);
    assert_int_equal(s.bad_payloads, 1);
    assert_int_equal(s.first_bad_offset, p->off);
    assert_int_equal(s.records, 2);
    assert_int_equal(s.data_end, f->s[1].end);
    assert_int_equal(dmg, 1);
    /* durable_seq 7: a torn write that never was durable: the tail. */
    f->sup[1].durable_seq = 7;
    write_super(f);
    s = check(f, 1, &dmg);
    assert_int_equal(s.data_end, p->off);
    assert_int_equal(s.records, 1);
    assert_seg_clean(&s);
    assert_int_equal(dmg, 0);
}

static void test_fsck_superblock(void **state)
{
    fx *f = *state;
    uint32_t slot = f->sup[0].slot_bytes;
    /* Slot B damaged: slot A (older: segment 1 open, 2 free) is used. */
    flip(f, "superblock", slot + 40);
    sb_fsck_report *r = run(f);
    assert_int_equal(r->superblock, 0);
    assert_int_equal(r->superblock_slot, 0);
    assert_int_equal(r->other_slot, SB_ERR_CORRUPT);
    assert_int_equal(r->write_count, 1);
    assert_int_equal(r->segments[0].state, SB_SEG_OPEN);
    assert_int_equal(r->segments[0].data_end, f->s[0].end);
    assert_int_equal(r->segments[0].records, 6);
    assert_int_equal(r->segments[1].state, SB_SEG_FREE);
    assert_int_equal(r->n_damaged, 0);
    sb_fsck_report_free(r);
    /* Slot B sound but written at slot A's place (its slot field 0). */
    f->sup[1].slot = 0;
    write_super(f);
    r = run(f);
    assert_int_equal(r->superblock_slot, 0);
    assert_int_equal(r->other_slot, SB_ERR_FORMAT);
    sb_fsck_report_free(r);
    flip(f, "superblock", slot + 40);
    /* Both damaged: a damaged store, reported; nothing else checkable. */
    flip(f, "superblock", 40);
    r = run(f);
    assert_int_equal(r->superblock, SB_ERR_CORRUPT);
    assert_int_equal(r->n_segments, 0);
    assert_null(r->segments);
    sb_fsck_report_free(r);
    /* A superblock whose size does not split into slots, magic intact. */
    cut(f, "superblock", slot + 100);
    r = run(f);
    assert_int_equal(r->superblock, SB_ERR_FORMAT);
    sb_fsck_report_free(r);
    /* No magic anywhere (zeroed), and no superblock file at all, beside
     * segment files: a store that lost its superblock, reported. */
    uint8_t *zero = calloc(2, slot);
    assert_non_null(zero);
    put_file(f, "superblock", zero, 2 * (size_t)slot);
    free(zero);
    r = run(f);
    assert_int_equal(r->superblock, SB_ERR_FORMAT);
    assert_int_equal(r->n_segment_files, 2);
    assert_int_equal(r->n_segments, 0);
    sb_fsck_report_free(r);
    rm(f, "superblock");
    r = run(f);
    assert_int_equal(r->superblock, SB_ERR_NOT_FOUND);
    assert_int_equal(r->n_segment_files, 2);
    sb_fsck_report_free(r);
    /* Neither a superblock nor segment files, no directory: not a store. */
    rm(f, "seg-00000001.dat");
    rm(f, "seg-00000001.sum");
    rm(f, "seg-00000002.dat");
    r = (sb_fsck_report *)f;
    assert_int_equal(sb_store_fsck(f->dir, NULL, NULL, &r, NULL), SB_ERR_FORMAT);
    assert_null(r);
    assert_int_equal(sb_store_fsck("/tmp/sb-fsck-no-such-dir", NULL, NULL, &r, NULL),
                     SB_ERR_FORMAT);
    char p[512];
    path_of(f, "LOCK", p, sizeof p);
    put_file(f, "LOCK", "1\n", 2);
    assert_int_equal(sb_store_fsck(p, NULL, NULL, &r, NULL), SB_ERR_FORMAT);
}

static void test_fsck_version(void **state)
{
    fx *f = *state;
    uint32_t slot = f->sup[0].slot_bytes;
    /* Slot B of another version (its hash holding) next to a valid slot A:
     * the store's open uses A, and so does fsck. */
    set_version(f, 1, 0x41, true);
    sb_fsck_report *r = run(f);
    assert_int_equal(r->superblock_slot, 0);
    assert_int_equal(r->other_slot, SB_ERR_VERSION);
    sb_fsck_report_free(r);
    /* A version field whose hash fails is damage, not a version. */
    set_version(f, 1, 0x42, false);
    r = run(f);
    assert_int_equal(r->superblock_slot, 0);
    assert_int_equal(r->other_slot, SB_ERR_CORRUPT);
    sb_fsck_report_free(r);
    set_version(f, 0, 0x42, false);
    r = run(f);
    assert_int_equal(r->superblock, SB_ERR_CORRUPT);
    sb_fsck_report_free(r);
    /* Both of another version: refused, and nothing touched, LOCK
     * included; cut in slot B, slot A placed by its own size says so. */
    set_version(f, 0, 0x41, true);
    set_version(f, 1, 0x41, true);
    put_file(f, "LOCK", "999\n", 4);
    size_t n0, n1;
    uint8_t *before = snapshot(f, &n0);
    r = (sb_fsck_report *)f;
    assert_int_equal(sb_store_fsck(f->dir, NULL, NULL, &r, NULL), SB_ERR_VERSION);
    assert_null(r);
    uint8_t *after = snapshot(f, &n1);
    assert_int_equal(n0, n1);
    assert_memory_equal(before, after, n0);
    free(before);
    free(after);
    cut(f, "superblock", slot + slot / 2);
    assert_int_equal(sb_store_fsck(f->dir, NULL, NULL, &r, NULL), SB_ERR_VERSION);
    set_version(f, 0, 0x43, false);             /* now damage: reported */
    r = run(f);
    assert_int_equal(r->superblock, SB_ERR_FORMAT);
    sb_fsck_report_free(r);
}

static void test_fsck_errors(void **state)
{
    fx *f = *state;
    sb_fsck_report *r;
    long pid = -1;
    assert_int_equal(sb_store_fsck(NULL, NULL, NULL, &r, &pid), SB_ERR_INVAL);
    assert_null(r);
    assert_int_equal(pid, 0);
    assert_int_equal(sb_store_fsck(f->dir, NULL, NULL, NULL, NULL), SB_ERR_INVAL);
    /* A superblock that cannot be read. */
    rm(f, "superblock");
    char p[512];
    path_of(f, "superblock", p, sizeof p);
    assert_int_equal(mkdir(p, 0700), 0);
    assert_int_equal(sb_store_fsck(f->dir, NULL, NULL, &r, NULL), SB_ERR_IO);
    assert_null(r);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)
    const struct CMUnitTest tests[] = {
        T(test_fsck_clean),       T(test_fsck_lock),        T(test_fsck_bad_payload),
        T(test_fsck_bad_head),    T(test_fsck_summary),     T(test_fsck_sealed_file),
        T(test_fsck_open_tail),   T(test_fsck_open_payload), T(test_fsck_superblock),
        T(test_fsck_version),     T(test_fsck_errors),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
