/* recover.c -- opening an existing store directory: read the superblock,
 * collect every record head (from summaries of sealed segments, by scanning
 * the others), rebuild each namespace's radix tree with disk-only blocks,
 * and seal what was open.
 *
 * Step by step:
 *
 *   1. The superblock: the valid slot with the larger write count. An
 *      unknown version is refused before anything is written. When no
 *      slot can be used the store is refused (SB_ERR_SUPERBLOCK), or with
 *      SB_OPEN_SALVAGE the superblock is rebuilt from the segment files,
 *      which also collects their records (salvage.c: steps 1-2 there),
 *      and recovery goes on at step 3.
 *   2. Every listed segment: a sealed one through its summary (its ids,
 *      generation and data_end must agree with the superblock; else it is
 *      scanned up to data_end); an open one by scanning from offset 0,
 *      record by record, each head checked (magic, version, sizes, head
 *      hash seeded with its offset, segment id, generation) before its
 *      length is trusted to find the next one. The first record that fails
 *      ends the segment: nothing after it is looked at.
 *   3. Namespaces from their records (the layout and identity; the id must
 *      be the one the identity and scope hash to).
 *   3b. Tombstones (removals: format.h): every sound one is kept live
 *      (the tier rewrites it while a segment may hold what it removes),
 *      in every mode; each segment's lowest seq is noted for that.
 *   4. Pages: a map from content key to record; the records a tombstone
 *      removes (see "tombstones" below) are taken out of it first, and are
 *      neither leaves nor parents. Every page record that no
 *      other record names as its parent is a leaf; its chain of parents
 *      (same namespace, each a full page ending where the next starts) back
 *      to the namespace's root key gives the token path. Its keys are
 *      recomputed from the tokens and must match (a parent is looked for
 *      first in the record written just before its child: pages of a
 *      sequence are written in order). The path is committed
 *      with a disk-only block for each region the tree lacks, so shared
 *      prefixes are inserted once. A chain that breaks is dropped: its
 *      records are orphans, counted.
 *   5. Point states the same way, at the end of their page chains.
 *   6. Segments that were open are sealed with a summary of what the scan
 *      found, so later writes go to a fresh segment and never interleave
 *      with bytes the scan did not trust.
 */
#define _DEFAULT_SOURCE /* madvise(MADV_HUGEPAGE) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "host.h"
#include "internal.h"
#include "recover_int.h"
#include "scan.h"

/* ---- collecting records -------------------------------------------------------- */

/* Ask for transparent huge pages on the 2 MiB runs inside a large array:
 * the arrays of a large store are hundreds of MiB, touched once, and
 * faulting them in 4 KiB at a time is a third of collecting. Advice only. */
static void huge_pages(void *p, size_t bytes)
{
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = 2u << 20;
    uintptr_t a = ((uintptr_t)p + huge - 1) & ~(huge - 1);
    uintptr_t e = ((uintptr_t)p + bytes) & ~(huge - 1);
    if (e > a)
        (void)madvise((void *)a, e - a, MADV_HUGEPAGE);
#else
    (void)p;
    (void)bytes;
#endif
}

/* Grow an array to hold want elements of size sz (geometric, so adding n
 * elements one by one copies O(n) in all). */
static int grow_to(void **p, size_t *cap, size_t want, size_t sz)
{
    if (want <= *cap)
        return SB_OK;
    size_t n = *cap ? *cap : 1024;
    while (n < want)
        n *= 2;
    void *q = realloc(*p, n * sz);
    if (!q)
        return SB_ERR_NOMEM;
    *p = q;
    *cap = n;
    huge_pages(q, n * sz);
    return SB_OK;
}

/* Room for n_rec more records with n_tok tokens and n_bytes extra bytes. */
static int reserve(rctx *c, size_t n_rec, size_t n_tok, size_t n_bytes)
{
    if (grow_to((void **)&c->r, &c->cap, c->n + n_rec, sizeof *c->r) != SB_OK ||
        grow_to((void **)&c->tok, &c->tokcap, c->ntok + n_tok, sizeof *c->tok) != SB_OK ||
        grow_to((void **)&c->bytes, &c->bcap, c->nb + n_bytes, 1) != SB_OK)
        return SB_ERR_NOMEM;
    return SB_OK;
}

int sb_recover_add(rctx *c, uint32_t seg, uint64_t off, const sb_rec_head *h,
                   const uint32_t *tokens, const void *extra)
{
    size_t eb = ((size_t)h->extra_bytes + 7) / 8 * 8;
    if (reserve(c, 1, h->n_tokens, eb) != SB_OK)
        return SB_ERR_NOMEM;
    rrec *r = &c->r[c->n++];
    memset(r, 0, sizeof *r);
    r->h = *h;
    r->off = off;
    r->seg = seg;
    r->tok = c->ntok;
    r->extra = c->nb;
    if (h->n_tokens)
        memcpy(c->tok + c->ntok, tokens, (size_t)h->n_tokens * sizeof *tokens);
    c->ntok += h->n_tokens;
    if (h->extra_bytes)
        memcpy(c->bytes + c->nb, extra, h->extra_bytes);
    c->nb += eb;
    return SB_OK;
}

/* Scan segment i from offset 0 up to limit (see step 2). *end receives the
 * end of the last valid record; *torn whether the scan stopped at bytes
 * that were not empty space. */
static int scan(rctx *c, uint32_t i, int fd, uint64_t limit, uint64_t *end, bool *torn)
{
    sb_disk *d = c->d;
    const sb_seg *s = &d->segs[i];
    uint8_t *buf = aligned_alloc(4096, SB_REC_HEAD_MAX);
    if (!buf)
        return SB_ERR_NOMEM;
    uint64_t off = 0;
    int rc = SB_OK;
    *torn = false;
    while (off + SB_FMT_BLOCK <= limit) {
        int64_t n = sb_io_pread(d->rio, fd, buf, SB_FMT_BLOCK, off);
        if (n != SB_FMT_BLOCK) {
            *torn = n != 0;
            break;
        }
        uint32_t hb;
        if (sb_rec_peek(buf, SB_FMT_BLOCK, &hb) != SB_OK) {
            static const uint8_t zero[SB_REC_FIXED];
            *torn = memcmp(buf, zero, sizeof zero) != 0;
            break;
        }
        if (hb > SB_FMT_BLOCK && (off + hb > limit ||
            sb_io_pread(d->rio, fd, buf + SB_FMT_BLOCK, hb - SB_FMT_BLOCK,
                        off + SB_FMT_BLOCK) != (int64_t)(hb - SB_FMT_BLOCK))) {
            *torn = true;
            break;
        }
        sb_rec_head h;
        const uint32_t *tokens;
        const void *extra;
        if (sb_rec_decode(buf, hb, off, &h, &tokens, &extra) != SB_OK ||
            h.segment_id != s->id || h.generation != s->gen || !h.seq ||
            h.seq > SB_REC_SEQ_MAX ||
            off + sb_rec_record_bytes(&h) > limit) {
            *torn = true;
            break;
        }
        if ((rc = sb_recover_add(c, i, off, &h, tokens, extra)) != SB_OK)
            break;
        off += sb_rec_record_bytes(&h);
    }
    free(buf);
    *end = off;
    return rc;
}

/* Is there a valid record of segment i (its id and generation, its head
 * checking at its offset) at a 4 KiB boundary in [from, limit)? For
 * reporting only: nothing found this way is indexed, since the log ends at
 * the first record that does not check. */
static bool valid_after(rctx *c, uint32_t i, int fd, uint64_t from, uint64_t limit)
{
    sb_disk *d = c->d;
    const sb_seg *s = &d->segs[i];
    const size_t chunk = 1u << 20;
    uint8_t *buf = aligned_alloc(4096, chunk);
    bool found = false;
    for (uint64_t off = from; buf && !found && off + SB_FMT_BLOCK <= limit; off += chunk) {
        size_t want = limit - off < chunk ? (size_t)(limit - off) : chunk;
        int64_t n = sb_io_pread(d->rio, fd, buf, want, off);
        for (int64_t b = 0; !found && b + SB_FMT_BLOCK <= n; b += SB_FMT_BLOCK) {
            uint32_t hb;
            sb_rec_head h;
            const uint32_t *tok;
            const void *extra;
            found = sb_rec_peek(buf + b, SB_FMT_BLOCK, &hb) == SB_OK && b + hb <= n &&
                    sb_rec_decode(buf + b, hb, off + (uint64_t)b, &h, &tok, &extra) == SB_OK &&
                    h.segment_id == s->id && h.generation == s->gen;
        }
        if (n < (int64_t)want)
            break;
    }
    free(buf);
    return found;
}

int sb_recover_read_summary(rctx *c, uint32_t i, uint64_t limit, sb_sum_info *seen)
{
    sb_disk *d = c->d;
    sb_seg *s = &d->segs[i];
    if (seen)
        seen->segment_id = 0;
    char name[32];
    sb_disk_seg_name(name, s->id, "sum");
    int fd = sb_io_open(d->rio, name, SB_IO_RDONLY);
    if (fd < 0)
        return SB_ERR_FORMAT;
    uint64_t size = 0;
    int rc = SB_ERR_FORMAT;
    if (d->rio->ops->size(d->rio, fd, &size) < 0 || size < SB_SUM_FIXED + 8 || size > (1ull << 34))
        goto out;
    if (size > c->sum_cap) {
        free(c->sum);
        c->sum_cap = 0;
        if (!(c->sum = malloc(size))) {
            rc = SB_ERR_NOMEM;
            goto out;
        }
        c->sum_cap = size;
    }
    uint8_t *buf = c->sum;
    if (sb_io_pread(d->rio, fd, buf, size, 0) != (int64_t)size)
        goto out;
    sb_sum_info info;
    if ((rc = sb_sum_decode(buf, size, &info)) != SB_OK)
        goto out;
    rc = SB_ERR_FORMAT;
    if (info.segment_id != s->id)
        goto out;
    if (seen)
        *seen = info;
    if (limit && info.generation && info.data_end <= limit) { /* salvage: it says */
        s->gen = info.generation;
        s->data_end = info.data_end;
    }
    if (info.generation != s->gen || info.data_end != s->data_end)
        goto out;
    /* The body bounds the tokens of its entries. */
    uint64_t fit = info.body_bytes / sb_sum_entry_size(0, 0); /* unchecked yet */
    if ((rc = reserve(c, info.n_entries < fit ? info.n_entries : fit, info.body_bytes / 4, 0)) !=
        SB_OK)
        goto out;
    size_t first = c->n, pos = SB_SUM_FIXED;
    for (uint32_t k = 0; k < info.n_entries; k++) {
        uint64_t off;
        sb_rec_head h;
        const uint32_t *tokens;
        const void *extra;
        int e = sb_sum_next(buf, &info, &pos, &off, &h, &tokens, &extra);
        if (e == SB_OK && (h.segment_id != s->id || h.generation != s->gen || !h.seq ||
                           h.seq > SB_REC_SEQ_MAX ||
                           off + sb_rec_record_bytes(&h) > s->data_end))
            e = SB_ERR_FORMAT;
        if (e == SB_OK)
            e = sb_recover_add(c, i, off, &h, tokens, extra);
        if (e != SB_OK) {
            c->n = first; /* all or nothing */
            rc = e;
            goto out;
        }
    }
    rc = SB_OK;
out:
    sb_io_close(d->rio, fd);
    return rc;
}

/* Size the record and token arrays once for every summary (bounds from
 * the files' sizes: virtual memory, touched only as records are added),
 * so that collecting a large store does not copy them as they grow. Only a
 * hint: records found by scanning still grow them. */
static void presize(rctx *c)
{
    sb_disk *d = c->d;
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < d->n_segs; i++) {
        if (d->segs[i].state != SB_SEG_SEALED)
            continue;
        char name[32];
        sb_disk_seg_name(name, d->segs[i].id, "sum");
        int fd = sb_io_open(d->rio, name, SB_IO_RDONLY);
        uint64_t size = 0;
        if (fd >= 0 && d->rio->ops->size(d->rio, fd, &size) == 0 && size <= (1ull << 34))
            bytes += size;
        if (fd >= 0)
            sb_io_close(d->rio, fd);
    }
    if (bytes <= SIZE_MAX / 2) /* no room is no error: the arrays grow */
        (void)reserve(c, (size_t)bytes / sb_sum_entry_size(0, 0), (size_t)bytes / 4, 0);
}

/* Step 2 for segment i. */
static int collect(rctx *c, uint32_t i)
{
    sb_disk *d = c->d;
    sb_seg *s = &d->segs[i];
    if (s->state == SB_SEG_FREE)
        return SB_OK;
    if (s->state == SB_SEG_SEALED) {
        int rc = sb_recover_read_summary(c, i, 0, NULL);
        if (rc == SB_OK || rc == SB_ERR_NOMEM)
            return rc;
        d->rec_bad_summaries++;
    }
    char name[32];
    sb_disk_seg_name(name, s->id, "dat");
    int fd = sb_io_open(d->rio, name, SB_IO_RDONLY);
    if (fd < 0) {
        d->rec_torn++;
        if (s->state == SB_SEG_OPEN)
            s->data_end = 0;
        return fd == -ENOMEM ? SB_ERR_NOMEM : SB_OK;
    }
    uint64_t size = 0;
    d->rio->ops->size(d->rio, fd, &size);
    uint64_t limit = s->state == SB_SEG_SEALED ? s->data_end : d->seg_bytes;
    if (limit > size)
        limit = size;
    uint64_t end = 0;
    bool torn = false;
    int rc = scan(c, i, fd, limit, &end, &torn);
    /* An open segment's file is preallocated to segment_bytes: shorter, it
     * was cut. Where its scan stopped at what looks like empty space, a
     * valid record further on means the space is damage, not the end. */
    if (s->state == SB_SEG_OPEN && !torn && rc == SB_OK)
        torn = size < d->seg_bytes || valid_after(c, i, fd, end, limit);
    sb_io_close(d->rio, fd);
    if (torn || (s->state == SB_SEG_SEALED && end < s->data_end))
        d->rec_torn++;
    if (s->state == SB_SEG_OPEN)
        s->data_end = end;
    return rc;
}

/* ---- rebuilding ------------------------------------------------------------------- */

static size_t key_slot(const rctx *c, const sb_key *k)
{
    return (size_t)(k->lo ^ (k->hi >> 7)) & (c->map_cap - 1);
}

static rrec *lookup(const rctx *c, const sb_key *k)
{
    for (size_t j = key_slot(c, k);; j = (j + 1) & (c->map_cap - 1)) {
        uint32_t v = c->map[j];
        if (!v)
            return NULL;
        rrec *r = &c->r[v - 1];
        if (r->h.key[0] == k->lo && r->h.key[1] == k->hi)
            return r->dead ? NULL : r; /* (a removed key: every copy is) */
    }
}

/* The page record for key k, looking first at the record written just
 * before from (a sequence's pages are usually written in order, so its
 * parent is there and the random probe of the map is saved). */
static rrec *lookup_near(const rctx *c, const sb_key *k, const rrec *from)
{
    if (from > c->r) {
        const rrec *p = from - 1;
        if (p->winner && p->h.key[0] == k->lo && p->h.key[1] == k->hi)
            return (rrec *)p;
    }
    return lookup(c, k);
}

static int build_map(rctx *c)
{
    size_t cap = 1024;
    while (cap < c->n * 2)
        cap *= 2;
    c->map = calloc(cap, sizeof *c->map);
    if (!c->map)
        return SB_ERR_NOMEM;
    c->map_cap = cap;
    for (size_t i = 0; i < c->n; i++) {
        rrec *r = &c->r[i];
        if (r->h.kind != SB_REC_PAGE)
            continue;
        sb_key k = { r->h.key[0], r->h.key[1] };
        size_t j = key_slot(c, &k);
        for (; c->map[j]; j = (j + 1) & (cap - 1)) {
            rrec *o = &c->r[c->map[j] - 1];
            if (o->h.key[0] == k.lo && o->h.key[1] == k.hi)
                break;
        }
        /* The same page written twice: keep the newer record. */
        if (!c->map[j] || c->r[c->map[j] - 1].h.seq < r->h.seq) {
            if (c->map[j])
                c->r[c->map[j] - 1].winner = 0;
            c->map[j] = (uint32_t)(i + 1);
            r->winner = 1;
        }
    }
    return SB_OK;
}

/* ---- tombstones ------------------------------------------------------------------- *
 *
 * A tombstone (format.h) removes every page and point record older than
 * its removal sequence whose path passes through its cut. Each page
 * record's kill is the largest removal sequence of the tombstones on its
 * path: its parent's kill (memoized up the chain of winners), or that of
 * a tombstone naming its own region (same parent key, same region start,
 * its tokens starting with the tombstone's rest); a point record's the
 * same through its parent page. Records of one key share a path, hence a
 * kill, and the newer copy wins: a removed key has every copy removed. A
 * record with a seq below its kill is dead: out of the map (lookup), no
 * leaf, no parent, and counted (recovery_removed), not as an orphan. A
 * record written after the tombstone (a put of the prefix again) has a
 * larger seq and stays. */

/* Record r's tokens (NULL when it has none: the array may be empty). */
static const uint32_t *tok_of(const rctx *c, const rrec *r)
{
    return r->h.n_tokens ? c->tok + r->tok : NULL;
}

/* Is tombstone record r sound: a removal sequence no later than its own
 * seq (a copy's is earlier), rest tokens within its position, its key
 * chained from its parent over them? */
static bool tomb_sound(const rctx *c, const rrec *r)
{
    uint64_t rs = sb_rec_tomb_seq(c->bytes + r->extra);
    if (!rs || rs > r->h.seq || r->h.position < r->h.n_tokens)
        return false;
    sb_key parent = { r->h.parent_key[0], r->h.parent_key[1] };
    sb_key k = r->h.n_tokens ? sb_host_key_chain(&parent, tok_of(c, r), r->h.n_tokens)
                             : parent;
    return k.lo == r->h.key[0] && k.hi == r->h.key[1];
}

/* Order of tombstone records: namespace, parent key. */
static int tix_cmp3(const rrec *x, uint64_t ns, uint64_t p1, uint64_t p0)
{
    if (x->h.ns_id != ns)
        return x->h.ns_id < ns ? -1 : 1;
    if (x->h.parent_key[1] != p1)
        return x->h.parent_key[1] < p1 ? -1 : 1;
    if (x->h.parent_key[0] != p0)
        return x->h.parent_key[0] < p0 ? -1 : 1;
    return 0;
}

static const rctx *tix_ctx; /* (qsort has no context argument) */

static int tix_cmp(const void *a, const void *b)
{
    const rrec *x = &tix_ctx->r[*(const size_t *)a], *y = &tix_ctx->r[*(const size_t *)b];
    int o = tix_cmp3(x, y->h.ns_id, y->h.parent_key[1], y->h.parent_key[0]);
    if (o)
        return o;
    return x->h.seq < y->h.seq ? -1 : x->h.seq > y->h.seq;
}

/* Index the sound tombstone records into c->tix (sorted). The opening
 * thread alone runs recovery, so the sort's context is a static. */
static int tombs_index(rctx *c)
{
    size_t k = 0;
    for (size_t i = 0; i < c->n; i++)
        k += c->r[i].h.kind == SB_REC_TOMBSTONE;
    c->d->rec_tombs = k;
    if (!k)
        return SB_OK;
    c->d->tomb_mark = true; /* the next superblock write says version 3 */
    c->tix = malloc(k * sizeof *c->tix);
    if (!c->tix)
        return SB_ERR_NOMEM;
    for (size_t i = 0; i < c->n; i++)
        if (c->r[i].h.kind == SB_REC_TOMBSTONE && tomb_sound(c, &c->r[i]))
            c->tix[c->n_tix++] = i;
    tix_ctx = c;
    qsort(c->tix, c->n_tix, sizeof *c->tix, tix_cmp);
    tix_ctx = NULL;
    return SB_OK;
}

/* The tier keeps every tombstone found, live (reclamation decides when one
 * may go), once per removal: of identical ones (copies) the newest
 * record. */
static int tombs_adopt(rctx *c)
{
    sb_disk *d = c->d;
    for (size_t j = 0; j < c->n_tix; j++) {
        const rrec *r = &c->r[c->tix[j]];
        uint64_t rs = sb_rec_tomb_seq(c->bytes + r->extra);
        bool newer_copy = false;
        for (size_t k = j + 1; k < c->n_tix && !newer_copy; k++) {
            const rrec *o = &c->r[c->tix[k]];
            if (tix_cmp3(o, r->h.ns_id, r->h.parent_key[1], r->h.parent_key[0]))
                break;
            newer_copy = o->h.position == r->h.position && o->h.n_tokens == r->h.n_tokens &&
                         sb_rec_tomb_seq(c->bytes + o->extra) == rs &&
                         (!r->h.n_tokens ||
                          !memcmp(tok_of(c, o), tok_of(c, r), 4ull * r->h.n_tokens));
        }
        if (newer_copy) /* (sorted by seq within a key: o is newer) */
            continue;
        sb_key parent = { r->h.parent_key[0], r->h.parent_key[1] };
        sb_tomb *t = sb_tomb_new(d->st, r->h.ns_id, &parent, r->h.position, tok_of(c, r),
                                 r->h.n_tokens);
        if (!t)
            return SB_ERR_NOMEM;
        t->removal_seq = rs;
        t->state = SB_TOMB_DURABLE;
        t->placed = true;
        t->seg = r->seg;
        t->seg_id = r->h.segment_id;
        t->rec_off = r->off;
        t->rec_seq = r->h.seq;
        t->rec_bytes = (uint32_t)sb_rec_record_bytes(&r->h);
        pthread_mutex_lock(&d->st->mu);
        sb_tomb_live_add(d, t);
        pthread_mutex_unlock(&d->st->mu);
    }
    return SB_OK;
}

/* The largest removal sequence of the tombstones that remove a record of
 * namespace ns chaining from parent (p0, p1) whose region starts at start
 * with tokens tok[0, n) (a page's; a point state's up to its position). */
static uint64_t direct_kill(const rctx *c, uint64_t ns, uint64_t p0, uint64_t p1,
                            uint32_t start, const uint32_t *tok, uint32_t n)
{
    size_t lo = 0, hi = c->n_tix;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (tix_cmp3(&c->r[c->tix[mid]], ns, p1, p0) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint64_t best = 0;
    for (size_t j = lo; j < c->n_tix; j++) {
        const rrec *t = &c->r[c->tix[j]];
        if (tix_cmp3(t, ns, p1, p0))
            break;
        uint32_t k = t->h.n_tokens;
        if (t->h.position - k != start || k > n || (k && memcmp(tok_of(c, t), tok, 4ull * k)))
            continue;
        uint64_t rs = sb_rec_tomb_seq(c->bytes + t->extra);
        best = rs > best ? rs : best;
    }
    return best;
}

/* The winner whose page region ends where a record's region starts (its
 * parent on the chain), or NULL (the root, or a chain that breaks). */
static rrec *chain_parent(const rctx *c, const rrec *x, uint32_t start)
{
    if (start == 0)
        return NULL;
    sb_key k = { x->h.parent_key[0], x->h.parent_key[1] };
    rrec *p = lookup(c, &k);
    if (!p || p->h.ns_id != x->h.ns_id || p->h.position >= start ||
        p->h.position + p->h.n_tokens != start)
        return NULL;
    return p;
}

/* Compute the kill of winner x and of the winners above it not yet done. */
static int page_kill(rctx *c, rrec *x)
{
    size_t n = 0;
    rrec *cur = x;
    while (cur && !cur->kill_done) {
        if (n == c->kcap) {
            size_t cap = c->kcap ? 2 * c->kcap : 256;
            rrec **p = realloc(c->kstack, cap * sizeof *p);
            if (!p)
                return SB_ERR_NOMEM;
            c->kstack = p;
            c->kcap = cap;
        }
        c->kstack[n++] = cur;
        cur = chain_parent(c, cur, cur->h.position);
    }
    uint64_t base = cur ? cur->kill : 0;
    while (n) {
        rrec *y = c->kstack[--n];
        uint64_t k = direct_kill(c, y->h.ns_id, y->h.parent_key[0], y->h.parent_key[1],
                                 y->h.position, tok_of(c, y), y->h.n_tokens);
        y->kill = k > base ? k : base;
        y->kill_done = 1;
        base = y->kill;
    }
    return SB_OK;
}

/* Mark the records the tombstones removed (see above). After build_map. */
static int mark_removed(rctx *c)
{
    if (!c->n_tix)
        return SB_OK;
    for (size_t i = 0; i < c->n; i++) {
        rrec *x = &c->r[i];
        if (x->h.kind == SB_REC_PAGE && x->winner && !x->kill_done) {
            int rc = page_kill(c, x);
            if (rc != SB_OK)
                return rc;
        }
    }
    /* Every kill first (lookup skips the dead), then who is dead. */
    for (size_t i = 0; i < c->n; i++) {
        rrec *x = &c->r[i];
        if (x->h.kind == SB_REC_PAGE) {
            sb_key k = { x->h.key[0], x->h.key[1] };
            rrec *w = x->winner ? x : lookup(c, &k);
            x->kill = w ? w->kill : 0;
        } else if (x->h.kind == SB_REC_POINT && x->h.n_tokens <= x->h.position) {
            uint32_t start = x->h.position - x->h.n_tokens;
            rrec *p = chain_parent(c, x, start);
            uint64_t k = direct_kill(c, x->h.ns_id, x->h.parent_key[0], x->h.parent_key[1],
                                     start, tok_of(c, x), x->h.n_tokens);
            x->kill = p && p->kill > k ? p->kill : k;
        }
    }
    for (size_t i = 0; i < c->n; i++) {
        rrec *x = &c->r[i];
        if ((x->h.kind == SB_REC_PAGE || x->h.kind == SB_REC_POINT) && x->h.seq < x->kill) {
            x->dead = 1;
            c->d->rec_removed += x->h.kind == SB_REC_POINT || x->winner;
            x->winner = 0;
        }
    }
    return SB_OK;
}

static sb_ns *ns_of(const rctx *c, uint64_t id)
{
    for (size_t i = 0; i < c->n_ns; i++)
        if (c->ns[i].id == id)
            return c->ns[i].ns;
    return NULL;
}

/* A namespace record's sort key: by id, the newest first. */
typedef struct ns_ref {
    uint64_t id, seq;
    size_t i;
} ns_ref;

static int ns_ref_cmp(const void *a, const void *b)
{
    const ns_ref *x = a, *y = b;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    return x->seq > y->seq ? -1 : x->seq < y->seq;
}

/* Step 3. A namespace dropped and made again with another layout has
 * several descriptions: the newest is the one its records follow. */
static int open_namespaces(rctx *c)
{
    sb_store *st = c->d->st;
    size_t k = 0;
    for (size_t i = 0; i < c->n; i++)
        k += c->r[i].h.kind == SB_REC_NAMESPACE;
    ns_ref *ix = malloc((k ? k : 1) * sizeof *ix);
    if (!ix)
        return SB_ERR_NOMEM;
    k = 0;
    for (size_t i = 0; i < c->n; i++)
        if (c->r[i].h.kind == SB_REC_NAMESPACE)
            ix[k++] = (ns_ref){ c->r[i].h.ns_id, c->r[i].h.seq, i };
    qsort(ix, k, sizeof *ix, ns_ref_cmp);
    int rc = SB_OK;
    for (size_t j = 0; j < k && rc == SB_OK; j++) {
        rrec *r = &c->r[ix[j].i];
        if (j && ix[j - 1].id == ix[j].id)
            continue; /* an older description */
        sb_rec_ns desc;
        if (sb_rec_ns_decode(c->bytes + r->extra, r->h.extra_bytes, &desc) != SB_OK)
            continue;
        sb_ns *ns;
        int e = sb_host_ns_open(st, &desc.layout, desc.scope, desc.scope_bytes, &ns);
        if (e == SB_ERR_NOMEM)
            rc = e;
        if (e != SB_OK)
            continue;
        if (ns->id != r->h.ns_id) {
            sb_host_ns_close(ns);
            continue;
        }
        struct rns *p = realloc(c->ns, (c->n_ns + 1) * sizeof *p);
        if (!p) {
            sb_host_ns_close(ns);
            rc = SB_ERR_NOMEM;
            break;
        }
        c->ns = p;
        c->ns[c->n_ns++] = (struct rns){ r->h.ns_id, ns };
        c->d->rec_ns++;
    }
    free(ix);
    return rc;
}

/* Is the payload of a record with head h one of raw bytes: exactly that,
 * or compressed to fewer? */
static bool payload_ok(const sb_rec_head *h, uint64_t raw)
{
    return h->flags ? h->payload_bytes < raw : h->payload_bytes == raw;
}

/* The chain of page records ending with the page before position end
 * (full pages only), root first, into chain[0, end / pt); its tokens into
 * tokens. last_key is the key of the page the chain must end with.
 * Returns false when the chain breaks. */
static bool chain_of(rctx *c, sb_ns *ns, uint64_t ns_id, const rrec *from, uint32_t end,
                     rrec **chain, uint32_t *tokens)
{
    uint32_t pt = ns->page_tokens;
    uint32_t n = end / pt;
    sb_key k = { from->h.parent_key[0], from->h.parent_key[1] };
    for (uint32_t r = n; r-- > 0;) {
        rrec *p = lookup_near(c, &k, from);
        if (!p || p->h.ns_id != ns_id || p->h.position != r * pt || p->h.n_tokens != pt ||
            !payload_ok(&p->h, ns->page_bytes))
            return false;
        chain[r] = p;
        memcpy(tokens + (size_t)r * pt, c->tok + p->tok, (size_t)pt * sizeof *tokens);
        k = (sb_key){ p->h.parent_key[0], p->h.parent_key[1] };
        from = p;
    }
    return sb_key_eq(&k, &ns->root_key);
}

/* Keys along tokens[0, n) must be the records' keys (chain has a record per
 * region; the last may be partial). */
static bool keys_match(sb_ns *ns, const uint32_t *tokens, size_t n, rrec **chain)
{
    uint32_t pt = ns->page_tokens;
    sb_key parent = ns->root_key;
    for (size_t r = 0; r * pt < n; r++) {
        size_t k = n - r * pt < pt ? n - r * pt : pt;
        sb_key key = sb_host_key_chain(&parent, tokens + r * pt, k);
        if (key.lo != chain[r]->h.key[0] || key.hi != chain[r]->h.key[1])
            return false;
        parent = key;
    }
    return true;
}

/* A disk-only block for record r. */
static sb_blk *disk_block(sb_ns *ns, const rrec *r, int kind)
{
    sb_blk *b = sb_host_blk_new_record(ns, kind);
    if (b) {
        sb_drec *at = sb_drec_of(b);
        sb_disk_state_set(b, SB_DISK_CLEAN);
        at->seg = r->seg;
        at->seg_id = r->h.segment_id;
        at->rec_off = r->off;
        at->head_bytes = r->h.head_bytes;
        at->stored = r->h.flags ? (uint32_t)r->h.payload_bytes : 0;
        at->zflags = r->h.flags;
    }
    return b;
}

/* Step 4 for leaf record leaf. Returns SB_OK (inserted or dropped) or
 * SB_ERR_NOMEM. */
static int insert_leaf(rctx *c, rrec *leaf, rrec **chain, uint32_t *tokens, sb_blk **pages)
{
    sb_store *st = c->d->st;
    sb_ns *ns = ns_of(c, leaf->h.ns_id);
    if (!ns || leaf->h.n_tokens > ns->page_tokens || leaf->h.position % ns->page_tokens ||
        !payload_ok(&leaf->h, ns->page_bytes))
        return SB_OK;
    uint32_t pt = ns->page_tokens;
    size_t n = (size_t)leaf->h.position + leaf->h.n_tokens;
    if (n > st->cfg.max_seq_tokens)
        return SB_OK;
    if (!chain_of(c, ns, leaf->h.ns_id, leaf, leaf->h.position, chain, tokens))
        return SB_OK;
    size_t n_reg = leaf->h.position / pt + 1;
    chain[n_reg - 1] = leaf;
    memcpy(tokens + leaf->h.position, c->tok + leaf->tok, (size_t)leaf->h.n_tokens * sizeof *tokens);
    if (!keys_match(ns, tokens, n, chain))
        return SB_OK;

    pthread_mutex_lock(&st->mu);
    size_t m = sb_host_index_prefix(ns, tokens, n);
    size_t r0 = m == n ? n_reg : m / pt;
    int rc = SB_OK;
    for (size_t r = 0; r < n_reg; r++) {
        pages[r] = r < r0 ? NULL : disk_block(ns, chain[r], SB_BLK_PAGE);
        if (r >= r0 && !pages[r])
            rc = SB_ERR_NOMEM;
    }
    if (rc == SB_OK)
        rc = sb_host_index_adopt(ns, tokens, n, pages, NULL);
    for (size_t r = r0; r < n_reg; r++) {
        if (!pages[r])
            continue;
        if (pages[r]->indexed) {
            sb_disk_count(st, pages[r], 1);
            c->d->rec_pages++;
        }
        sb_host_blk_unref(pages[r]);
    }
    pthread_mutex_unlock(&st->mu);
    if (rc == SB_OK)
        for (size_t r = 0; r < n_reg; r++)
            chain[r]->placed = 1;
    return rc == SB_ERR_NOMEM ? rc : SB_OK;
}

/* Step 5 for point record p. */
static int insert_point(rctx *c, rrec *p, rrec **chain, uint32_t *tokens, sb_blk **pages)
{
    sb_store *st = c->d->st;
    sb_ns *ns = ns_of(c, p->h.ns_id);
    if (!ns || !ns->point_bytes || !payload_ok(&p->h, ns->point_bytes))
        return SB_OK;
    uint32_t pt = ns->page_tokens;
    size_t L = p->h.position;
    if (L == 0 || L > st->cfg.max_seq_tokens || p->h.n_tokens != L % pt)
        return SB_OK;
    sb_key parent = { p->h.parent_key[0], p->h.parent_key[1] };
    uint32_t full = (uint32_t)(L - p->h.n_tokens);
    if (!chain_of(c, ns, p->h.ns_id, p, full, chain, tokens))
        return SB_OK;
    memcpy(tokens + full, c->tok + p->tok, (size_t)p->h.n_tokens * sizeof *tokens);
    sb_key key = p->h.n_tokens ? sb_host_key_chain(&parent, tokens + full, p->h.n_tokens) : parent;
    if (key.lo != p->h.key[0] || key.hi != p->h.key[1])
        return SB_OK;

    pthread_mutex_lock(&st->mu);
    int rc = SB_OK;
    if (sb_host_index_prefix(ns, tokens, L) == L) {
        memset(pages, 0, ((L + pt - 1) / pt) * sizeof *pages);
        sb_blk *b = disk_block(ns, p, SB_BLK_POINT);
        rc = b ? sb_host_index_adopt(ns, tokens, L, pages, b) : SB_ERR_NOMEM;
        if (b && b->indexed) {
            sb_disk_count(st, b, 1);
            c->d->rec_points++;
        }
        if (rc == SB_OK)
            p->placed = 1; /* indexed, or a newer copy was */
        if (b)
            sb_host_blk_unref(b);
    }
    pthread_mutex_unlock(&st->mu);
    return rc == SB_ERR_NOMEM ? rc : SB_OK;
}

static int rebuild(rctx *c)
{
    sb_store *st = c->d->st;
    int rc = open_namespaces(c);
    if (rc == SB_OK)
        rc = build_map(c);
    if (rc == SB_OK)
        rc = mark_removed(c);
    if (rc != SB_OK)
        return rc;
    for (size_t i = 0; i < c->n; i++) {
        rrec *r = &c->r[i];
        if (r->h.kind != SB_REC_PAGE || r->h.position == 0 || r->dead)
            continue;
        sb_key k = { r->h.parent_key[0], r->h.parent_key[1] };
        rrec *p = lookup_near(c, &k, r);
        if (p)
            p->has_child = 1;
    }
    size_t max_reg = st->cfg.max_seq_tokens + 1;
    rrec **chain = malloc(sizeof *chain * (max_reg < 65536 ? max_reg : 65536));
    size_t chain_cap = max_reg < 65536 ? max_reg : 65536;
    uint32_t *tokens = NULL;
    sb_blk **pages = NULL;
    size_t tok_cap = 0;
    if (!chain)
        return SB_ERR_NOMEM;
    /* Leaf pages first, then point states (which need their pages in the
     * tree), the newest first: a point state put again after its record
     * went bad has a newer record, which must win. */
    size_t n_order = 0;
    ns_ref *order = malloc((c->n ? c->n : 1) * sizeof *order);
    if (!order) {
        free(chain);
        return SB_ERR_NOMEM;
    }
    for (size_t i = 0; i < c->n; i++) {
        rrec *r = &c->r[i];
        if (r->h.kind == SB_REC_PAGE && !r->has_child &&
            r->winner)
            order[n_order++] = (ns_ref){ 0, 0, i };
    }
    size_t first_point = n_order;
    for (size_t i = 0; i < c->n; i++)
        if (c->r[i].h.kind == SB_REC_POINT && !c->r[i].dead)
            order[n_order++] = (ns_ref){ 0, c->r[i].h.seq, i };
    qsort(order + first_point, n_order - first_point, sizeof *order, ns_ref_cmp);
    for (size_t k = 0; k < n_order && rc == SB_OK; k++) {
        rrec *r = &c->r[order[k].i];
        bool leaf = k < first_point;
        /* Tokens [0, end) and their pages: a page record ends at position
         * + n_tokens; a point record's position is its L already (its
         * n_tokens are the partial page's tail before L, not after it). */
        size_t end = (size_t)r->h.position + (leaf ? r->h.n_tokens : 0);
        size_t need = end + 1;
        if (need > st->cfg.max_seq_tokens + 1ull)
            continue;
        if (need > tok_cap) {
            size_t cap = tok_cap ? tok_cap : 4096;
            while (cap < need)
                cap *= 2;
            uint32_t *t = realloc(tokens, cap * sizeof *t);
            sb_blk **pg = t ? realloc(pages, cap * sizeof *pg) : NULL;
            if (t)
                tokens = t;
            if (pg)
                pages = pg;
            if (!t || !pg) {
                rc = SB_ERR_NOMEM;
                break;
            }
            tok_cap = cap;
            if (cap > chain_cap) {
                rrec **ch = realloc(chain, cap * sizeof *ch);
                if (!ch) {
                    rc = SB_ERR_NOMEM;
                    break;
                }
                chain = ch;
                chain_cap = cap;
            }
        }
        rc = leaf ? insert_leaf(c, r, chain, tokens, pages)
                  : insert_point(c, r, chain, tokens, pages);
    }
    free(order);
    free(chain);
    free(tokens);
    free(pages);
    /* Orphans: records whose chain broke (not older copies of a record). */
    for (size_t i = 0; i < c->n; i++) {
        rrec *r = &c->r[i];
        if (r->placed || r->dead || (r->h.kind != SB_REC_PAGE && r->h.kind != SB_REC_POINT))
            continue;
        if (r->h.kind == SB_REC_PAGE && !r->winner)
            continue;
        c->d->rec_orphans++;
    }
    return rc;
}

/* Step 6: seal segment i, which was open, with the records found in it. */
static int seal_found(rctx *c, uint32_t i)
{
    sb_disk *d = c->d;
    for (size_t k = 0; k < c->n; k++) {
        rrec *r = &c->r[k];
        if (r->seg != i)
            continue;
        int rc = sb_disk_seg_note(d, i, r->off, &r->h, r->h.n_tokens ? c->tok + r->tok : NULL,
                                  r->h.extra_bytes ? c->bytes + r->extra : NULL);
        if (rc != SB_OK)
            return rc;
    }
    return sb_disk_seg_seal(d, i);
}

static void list_seg(void *ctx, const char *name)
{
    sb_id_list *l = ctx;
    uint32_t id = sb_seg_file_id(name, "dat");
    if (!id)
        return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        uint32_t *p = realloc(l->id, cap * sizeof *p);
        if (!p) {
            l->nomem = true;
            return;
        }
        l->id = p;
        l->cap = cap;
    }
    l->id[l->n++] = id;
}

int sb_recover_list_ids(sb_disk *d, sb_id_list *l)
{
    memset(l, 0, sizeof *l);
    int r = d->rio->ops->list(d->rio, list_seg, l);
    if (r < 0 || l->nomem) {
        free(l->id);
        l->id = NULL;
        return l->nomem || r == -ENOMEM ? SB_ERR_NOMEM : sb_disk_errno(r);
    }
    return SB_OK;
}

/* The generation of segment file id's first record, or 0 when it has no
 * valid one. */
static uint32_t first_generation(sb_disk *d, uint32_t id)
{
    char name[32];
    sb_disk_seg_name(name, id, "dat");
    int fd = sb_io_open(d->rio, name, SB_IO_RDONLY);
    if (fd < 0)
        return 0;
    uint32_t gen = 0;
    uint8_t *buf = aligned_alloc(4096, SB_REC_HEAD_MAX);
    uint32_t hb;
    if (buf && sb_io_pread(d->rio, fd, buf, SB_FMT_BLOCK, 0) == SB_FMT_BLOCK &&
        sb_rec_peek(buf, SB_FMT_BLOCK, &hb) == SB_OK &&
        (hb == SB_FMT_BLOCK || sb_io_pread(d->rio, fd, buf + SB_FMT_BLOCK, hb - SB_FMT_BLOCK,
                                           SB_FMT_BLOCK) == (int64_t)(hb - SB_FMT_BLOCK))) {
        sb_rec_head h;
        const uint32_t *tok;
        const void *extra;
        if (sb_rec_decode(buf, hb, 0, &h, &tok, &extra) == SB_OK && h.segment_id == id)
            gen = h.generation;
    }
    free(buf);
    sb_io_close(d->rio, fd);
    return gen;
}

/* Segment files the superblock does not list (it was an older slot, or a
 * stale copy) may hold records that were synced: adopt each whose first
 * record checks, as an open segment (scanned, then sealed). New segments
 * are numbered above every file, so none is ever written over. */
static int adopt_unlisted(sb_disk *d)
{
    sb_id_list l;
    int rc = sb_recover_list_ids(d, &l);
    if (rc != SB_OK)
        return rc;
    uint32_t max_id = 0;
    for (uint32_t i = 0; i < d->n_segs; i++)
        max_id = d->segs[i].id > max_id ? d->segs[i].id : max_id;
    for (size_t k = 0; k < l.n; k++) {
        uint32_t id = l.id[k];
        max_id = id > max_id ? id : max_id;
        bool listed = false;
        for (uint32_t i = 0; i < d->n_segs && !listed; i++)
            listed = d->segs[i].id == id;
        uint32_t gen = listed || d->n_segs >= d->max_segs ? 0 : first_generation(d, id);
        if (!gen)
            continue;
        sb_seg *g = &d->segs[d->n_segs++];
        memset(g, 0, sizeof *g);
        *g = (sb_seg){ .id = id, .gen = gen, .state = SB_SEG_OPEN, .wfd = -1, .rfd = -1 };
        d->rec_unlisted++;
    }
    d->next_seg_id = max_id + 1;
    free(l.id);
    return SB_OK;
}

/* Step 1: the superblock's newest valid slot into d (its segments into
 * d->segs). Returns: SB_OK; SB_ERR_SUPERBLOCK (none can be used: there is
 * no superblock file, it is truncated, or neither slot checks -- d->segs
 * freed); SB_ERR_VERSION; SB_ERR_IO; SB_ERR_NOMEM. */
static int read_slots(sb_disk *d)
{
    if (d->sb_fd < 0)
        return SB_ERR_SUPERBLOCK;
    uint64_t size = 0;
    int r = d->wio->ops->size(d->wio, d->sb_fd, &size);
    if (r < 0)
        return sb_disk_errno(r);
    if (size < 2 * SB_FMT_BLOCK || size / 2 < sb_super_slot_size(1))
        return SB_ERR_SUPERBLOCK;
    /* A version 1 slot lists up to `listed` segments; writes (version 2,
     * with the wear block) up to max_segs. A store whose list is longer
     * than that opens and serves, and its tier writes no more (the
     * superblock write fails). */
    uint64_t listed = (size / 2 - SB_SUPER_FIXED - 8) / SB_SUPER_ENTRY;
    uint64_t max = (size / 2 - SB_SUPER_FIXED - SB_SUPER_WEAR - 8) / SB_SUPER_ENTRY;
    listed = listed > 1u << 20 ? 1u << 20 : listed;
    d->max_segs = max > 1u << 20 ? 1u << 20 : (uint32_t)max;
    sb_super_seg *segs = calloc(listed, sizeof *segs);
    d->segs = calloc(listed, sizeof *d->segs);
    if (!segs || !d->segs) {
        free(segs);
        return SB_ERR_NOMEM;
    }
    sb_super s;
    int rc = sb_disk_read_super(d->wio, d->sb_fd, size, &s, segs, (uint32_t)listed);
    if (rc == SB_ERR_CORRUPT || rc == SB_ERR_FORMAT)
        rc = SB_ERR_SUPERBLOCK;
    if (rc == SB_OK && (s.segment_bytes < (64u << 10) || s.segment_bytes % SB_FMT_BLOCK ||
                        s.segment_bytes > (1ull << 40)))
        rc = SB_ERR_SUPERBLOCK; /* damage the slot's checksum did not catch */
    if (rc != SB_OK) {
        free(segs);
        free(d->segs);
        d->segs = NULL;
        return rc;
    }
    d->slot_bytes = s.slot_bytes;
    d->write_count = s.write_count;
    d->store_id = s.store_id;
    d->seg_bytes = s.segment_bytes;
    d->durable_seq = s.durable_seq;
    d->wear_write0 = s.wear_write;
    d->wear_logical0 = s.wear_logical;
    d->wear_reinsert0 = s.wear_reinsert;
    d->tomb_mark = d->super_tomb = s.tombstones;
    d->n_segs = s.n_segments;
    for (uint32_t i = 0; i < s.n_segments; i++) {
        sb_seg *g = &d->segs[i];
        g->id = segs[i].segment_id;
        g->gen = segs[i].generation;
        g->state = segs[i].state;
        g->data_end = segs[i].data_end;
        g->wfd = g->rfd = -1;
    }
    free(segs);
    return SB_OK;
}

/* Step 1, and a superblock that cannot be used looked at once more: a
 * slot of another version in it (its hash holding; in a truncated file,
 * where slot A's own size places it) is that version's, never salvaged. */
static int load_super(sb_disk *d)
{
    int rc = read_slots(d);
    uint64_t size = 0;
    if (rc == SB_ERR_SUPERBLOCK && d->sb_fd >= 0 &&
        d->wio->ops->size(d->wio, d->sb_fd, &size) == 0 &&
        sb_scan_super_foreign(d->wio, d->sb_fd, size))
        rc = SB_ERR_VERSION;
    return rc;
}

int sb_disk_recover(sb_disk *d)
{
    sb_store *st = d->st;
    int rc = load_super(d);
    bool salvage = rc == SB_ERR_SUPERBLOCK && d->salvage;
    if (rc != SB_OK && !salvage)
        return rc;
    rctx c = { .d = d };
    if (salvage) {
        rc = sb_disk_salvage(&c);
    } else if ((rc = adopt_unlisted(d)) == SB_OK) {
        presize(&c);
        for (uint32_t i = 0; i < d->n_segs && rc == SB_OK; i++)
            rc = collect(&c, i);
    }
    d->rec_records = c.n;
    if (d->durable_seq > SB_REC_SEQ_MAX)
        d->durable_seq = 0; /* damage the slot's checksum did not catch */
    uint64_t max_seq = d->durable_seq;
    for (size_t i = 0; i < c.n; i++)
        if (c.r[i].h.seq > max_seq)
            max_seq = c.r[i].h.seq;
    d->next_seq = max_seq + 1;
    /* What each segment holds, by seq (reclamation asks, for tombstones). */
    for (size_t i = 0; i < c.n; i++) {
        sb_seg *g = &d->segs[c.r[i].seg];
        uint64_t q = c.r[i].h.seq;
        if (!g->first_seq || q < g->first_seq)
            g->first_seq = q;
        if (q > g->last_seq)
            g->last_seq = q;
    }
    if (rc == SB_OK)
        rc = tombs_index(&c);
    if (rc == SB_OK)
        rc = tombs_adopt(&c);
    /* Write-only never reads the tier: an index of records on disk only
     * would serve nothing and hold the tokens a put must store again, so
     * the store starts empty. The records stay for a later open in a mode
     * that reads them (reclamation, finding them unindexed, takes their
     * segments first when the cap needs room). */
    if (rc == SB_OK && d->mode != SB_WRITE_ONLY)
        rc = rebuild(&c);
    for (size_t i = 0; i < c.n_ns; i++)
        sb_host_ns_close(c.ns[i].ns);
    pthread_mutex_lock(&st->mu);
    for (size_t b = 0; b < st->n_buckets; b++)
        for (sb_ns *ns = st->buckets[b]; ns; ns = ns->next)
            ns->newest_page = ns->newest_point = NULL;
    memset(&st->stats, 0, sizeof st->stats); /* recovery commits are not the user's */
    pthread_mutex_unlock(&st->mu);
    bool sealed = true;
    for (uint32_t i = 0; i < d->n_segs && rc == SB_OK; i++)
        if (d->segs[i].state == SB_SEG_OPEN) {
            int e = seal_found(&c, i);
            if (e != SB_OK) { /* the store still serves what it found */
                d->write_errors++;
                sealed = false;
            }
        }
    if (rc == SB_OK && sealed)
        d->durable_seq = max_seq; /* everything found is synced now */
    free(c.r);
    free(c.tok);
    free(c.bytes);
    free(c.map);
    free(c.sum);
    free(c.ns);
    free(c.tix);
    free(c.kstack);
    return rc;
}
