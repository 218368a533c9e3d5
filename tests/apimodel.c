/* apimodel.c -- the reference model of snapbank.h and its checks: draws,
 * the synthetic state every byte is checked against, the world (mode,
 * layouts, budgets, the store on the in-memory file system), what a match
 * may and must return, and the checks after every operation. The
 * operations are in apimodel_ops.c; apimodel.h says what is promised. */
#define _DEFAULT_SOURCE
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apimodel.h"
#include "apimodel_int.h"
#include "io.h"
#include "open.h"
#include "tier.h"

/* Token IDs a vocabulary draws from: the extremes of uint32 and a few in
 * between, so child arrays sort and search over all of them. */
static const uint32_t am_ids[5] = { 0, UINT32_MAX, 1, 1000, 7 };

/* ---- failure and trace -------------------------------------------------------- */

void am_fail(am *z, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "apimodel: seed %" PRIu64 ", op %u (%s), mode %s: ", z->seed, z->op_no,
            z->op_name ? z->op_name : "setup",
            z->mode == AM_RAM ? "ram" : z->mode == AM_EXACT ? "exact" : "loose");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    if (!z->trace && z->ring_n) {
        unsigned n = z->ring_n < AM_RING ? z->ring_n : AM_RING;
        fprintf(stderr, "apimodel: the last %u trace lines:\n", n);
        for (unsigned i = z->ring_n - n; i < z->ring_n; i++)
            fprintf(stderr, "  %s\n", z->ring[i % AM_RING]);
    }
    fprintf(stderr, "apimodel: write mode %d, durability %d, min_prefix %u, ram %" PRIu64
            " bytes / %" PRIu64 " pages, ns budget %" PRIu64 "\n",
            (int)z->cfg.write_mode, (int)z->cfg.durability, z->cfg.min_prefix_tokens,
            z->cfg.ram_bytes, z->cfg.ram_pages, z->cfg.ns_ram_bytes);
    for (int i = 0; i < z->n_ns; i++) {
        const am_ns *x = &z->ns[i];
        const am_model *md = &z->model[x->model];
        if (!x->h || !z->st)
            continue;
        fprintf(stderr, "namespace %d (%s, scope %d; page_tokens %u, %s):\n", i, md->id,
                x->scope, md->pt,
                md->flags & SB_LAYOUT_POINT_REQUIRED ? "point required"
                : md->point_bytes                   ? "points"
                                                    : "no points");
        sb_ns_dump(x->h, stderr);
    }
    fflush(stderr);
    abort();
}

void am_trace(am *z, const char *fmt, ...)
{
    char *line = z->ring[z->ring_n++ % AM_RING];
    int k = snprintf(line, AM_RING_LINE, "[%u %s] ", z->op_no,
                     z->op_name ? z->op_name : "setup");
    va_list ap;
    va_start(ap, fmt);
    if (k > 0 && k < AM_RING_LINE)
        vsnprintf(line + k, AM_RING_LINE - (size_t)k, fmt, ap);
    va_end(ap);
    if (z->trace)
        fprintf(stderr, "%s\n", line);
}

const char *am_str(const uint32_t *tok, size_t n, char *buf, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 2 < cap; i++) {
        char c = '?';
        for (int v = 0; v < 5; v++)
            if (am_ids[v] == tok[i])
                c = (char)('a' + v);
        buf[o++] = c;
    }
    buf[o] = 0;
    return buf;
}

/* ---- draws -------------------------------------------------------------------- */

static uint64_t mix64(uint64_t *s)
{
    uint64_t v = (*s += 0x9E3779B97F4A7C15ull);
    v = (v ^ (v >> 30)) * 0xBF58476D1CE4E5B9ull;
    v = (v ^ (v >> 27)) * 0x94D049BB133111EBull;
    return v ^ (v >> 31);
}

uint64_t am_draw(am *z, uint64_t n)
{
    if (n <= 1)
        return 0;
    am_src *s = &z->src;
    if (!s->bytes)
        return mix64(&s->rng) % n;
    uint64_t v = 0;
    for (uint64_t span = n - 1; span; span >>= 8) {
        if (s->pos >= s->n_bytes) {
            z->done = true;
            return v % n;
        }
        v = v << 8 | s->bytes[s->pos++];
    }
    return v % n;
}

/* One of k choices weighted by w[0, k). */
unsigned am_pick(am *z, const unsigned *w, unsigned k)
{
    unsigned total = 0;
    for (unsigned i = 0; i < k; i++)
        total += w[i];
    unsigned r = (unsigned)am_draw(z, total);
    for (unsigned i = 0; i < k; i++) {
        if (r < w[i])
            return i;
        r -= w[i];
    }
    return k - 1;
}

/* ---- synthetic state ------------------------------------------------------------- */

/* h[i] digests the namespace and tokens[0, i); token i's slices are drawn
 * from h[i + 1], the point state at n from h[n]. */
static void chain(const am_ns *x, const uint32_t *tok, size_t n, uint64_t *h)
{
    h[0] = x->seed;
    for (size_t i = 0; i < n; i++) {
        uint64_t s = h[i] ^ ((uint64_t)tok[i] * 0xD6E8FEB86659FD93ull) ^ i;
        h[i + 1] = mix64(&s);
    }
}

static void bytes_from(uint8_t *dst, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = mix64(&seed);
        memcpy(dst + i, &v, n - i < 8 ? n - i : 8);
    }
}

static void slice(const am_model *md, const uint64_t *h, size_t i, uint32_t t, uint8_t *dst)
{
    bytes_from(dst, md->bpt[t], h[i + 1] ^ (0xA24BAED4963EE407ull * (t + 1)));
}

void am_point(const am *z, const am_ns *x, const uint32_t *tok, size_t n, uint8_t *dst)
{
    uint64_t h[AM_MAX_SEQ + 1];
    chain(x, tok, n, h);
    bytes_from(dst, z->model[x->model].point_bytes, h[n] ^ 0x706f696e74ull ^ ((uint64_t)n << 40));
}

void am_fill_buf(const am *z, const am_ns *x, const uint32_t *tok, size_t n,
                 uint8_t (*buf)[AM_MAX_SEQ * AM_MAX_BPT])
{
    const am_model *md = &z->model[x->model];
    uint64_t h[AM_MAX_SEQ + 1];
    chain(x, tok, n, h);
    for (size_t i = 0; i < n; i++)
        for (uint32_t t = 0; t < md->n_tensors; t++)
            slice(md, h, i, t, buf[t] + i * md->bpt[t]);
}

size_t am_bad_token(const am *z, const am_ns *x, const uint32_t *tok, size_t n,
                    uint8_t (*bufs)[AM_MAX_SEQ * AM_MAX_BPT + 64])
{
    const am_model *md = &z->model[x->model];
    uint64_t h[AM_MAX_SEQ + 1];
    uint8_t want[AM_MAX_BPT];
    chain(x, tok, n, h);
    for (size_t i = 0; i < n; i++)
        for (uint32_t t = 0; t < md->n_tensors; t++) {
            slice(md, h, i, t, want);
            if (memcmp(want, bufs[t] + i * md->bpt[t], md->bpt[t]))
                return i;
        }
    return n;
}

void am_fill_page(const am *z, const am_ns *x, sb_page *p, const uint32_t *tok, size_t r,
                  uint32_t from, uint32_t to)
{
    const am_model *md = &z->model[x->model];
    uint64_t h[AM_MAX_SEQ + 1];
    size_t first = r * md->pt;
    chain(x, tok, first + to, h);
    uint8_t *d = sb_page_data(p);
    for (uint32_t j = from; j < to; j++)
        for (uint32_t t = 0; t < md->n_tensors; t++)
            slice(md, h, first + j, t, d + md->off[t] + (size_t)j * md->bpt[t]);
}

bool am_page_ok(const am *z, const am_ns *x, sb_page *p, const uint32_t *tok, size_t r,
                uint32_t k)
{
    const am_model *md = &z->model[x->model];
    uint64_t h[AM_MAX_SEQ + 1];
    uint8_t want[AM_MAX_BPT];
    size_t first = r * md->pt;
    chain(x, tok, first + k, h);
    const uint8_t *d = sb_page_data(p);
    if (!d)
        return k == 0;
    for (uint32_t j = 0; j < k; j++)
        for (uint32_t t = 0; t < md->n_tensors; t++) {
            slice(md, h, first + j, t, want);
            if (memcmp(want, d + md->off[t] + (size_t)j * md->bpt[t], md->bpt[t]))
                return false;
        }
    return true;
}

size_t am_regions(const am *z, const am_ns *x, size_t n)
{
    uint32_t pt = z->model[x->model].pt;
    return (n + pt - 1) / pt;
}

uint32_t am_region_tokens(const am *z, const am_ns *x, size_t n, size_t r)
{
    uint32_t pt = z->model[x->model].pt;
    size_t rest = n - r * pt;
    return rest < pt ? (uint32_t)rest : pt;
}

/* ---- sequences ------------------------------------------------------------------- */

static void remember(am_ns *x, const am_seq *s)
{
    x->recent[x->recent_next] = *s;
    x->recent_next = (x->recent_next + 1) % AM_RECENT;
    if (x->n_recent < AM_RECENT)
        x->n_recent++;
}

void am_draw_seq(am *z, am_ns *x, am_seq *s)
{
    const am_model *md = &z->model[x->model];
    /* Lengths around a few pages, now and then past max_seq_tokens. */
    uint32_t cap = 4 * md->pt + 8;
    if (cap > AM_MAX_SEQ)
        cap = AM_MAX_SEQ;
    uint32_t len = 1 + (uint32_t)am_draw(z, cap);
    s->n = 0;
    unsigned how = (unsigned)am_draw(z, 8);
    if (how >= 3 && (x->n_recent || x->n_e)) {
        /* Derived: a prefix of a recent or stored sequence, maybe extended
         * (a chat's next turn, a shared system prompt, a divergence). */
        const am_seq *base = how < 6 && x->n_e
                                 ? &x->e[am_draw(z, x->n_e)].s
                                 : &x->recent[am_draw(z, x->n_recent ? x->n_recent : 1)];
        if (!x->n_recent && !(how < 6 && x->n_e))
            base = &x->e[am_draw(z, x->n_e)].s;
        uint32_t keep = (uint32_t)am_draw(z, (uint64_t)base->n + 1);
        if (am_draw(z, 3) == 0)
            keep = base->n;
        memcpy(s->tok, base->tok, keep * sizeof *s->tok);
        s->n = keep;
        len = (uint32_t)am_draw(z, 2 * md->pt + 2);
        if (s->n == 0 && len == 0)
            len = 1;
    }
    while (len-- && s->n < AM_MAX_SEQ)
        s->tok[s->n++] = am_ids[am_draw(z, md->vocab)];
    remember(x, s);
}

/* ---- the model --------------------------------------------------------------------- */

size_t am_lcp(const uint32_t *a, size_t na, const uint32_t *b, size_t nb)
{
    size_t n = na < nb ? na : nb, i = 0;
    while (i < n && a[i] == b[i])
        i++;
    return i;
}

bool am_guaranteed(const am *z, const am_entry *e)
{
    return e->must && (z->mode == AM_EXACT || e->since == z->drops);
}

size_t am_lcp_any(const am *z, const am_ns *x, const uint32_t *tok, size_t n)
{
    (void)z;
    size_t best = 0;
    for (size_t i = 0; i < x->n_e && best < n; i++) {
        size_t l = am_lcp(x->e[i].s.tok, x->e[i].s.n, tok, n);
        if (l > best)
            best = l;
    }
    return best;
}

size_t am_lcp_must(const am *z, const am_ns *x, const uint32_t *tok, size_t n)
{
    size_t best = 0;
    for (size_t i = 0; i < x->n_e && best < n; i++) {
        if (!am_guaranteed(z, &x->e[i]))
            continue;
        size_t l = am_lcp(x->e[i].s.tok, x->e[i].s.n, tok, n);
        if (l > best)
            best = l;
    }
    return best;
}

/* Is every sequence stored in x guaranteed? */
bool am_all_must(const am *z, const am_ns *x)
{
    for (size_t i = 0; i < x->n_e; i++)
        if (!am_guaranteed(z, &x->e[i]))
            return false;
    return true;
}

/* Was a point state ever stored at exactly L on a path that tok[0, L)
 * follows? With must: by a guaranteed sequence. */
bool am_point_at(const am *z, const am_ns *x, const uint32_t *tok, size_t L, bool must)
{
    for (size_t i = 0; i < x->n_e; i++) {
        const am_entry *e = &x->e[i];
        if (e->point && e->s.n == L && (!must || am_guaranteed(z, e)) &&
            am_lcp(e->s.tok, e->s.n, tok, L) == L)
            return true;
    }
    return false;
}

/* The longest L <= n at which a guaranteed sequence stored a point state
 * on tok's path (0: none). */
size_t am_point_must(const am *z, const am_ns *x, const uint32_t *tok, size_t n)
{
    size_t best = 0;
    for (size_t i = 0; i < x->n_e; i++) {
        const am_entry *e = &x->e[i];
        if (e->point && e->s.n <= n && e->s.n > best && am_guaranteed(z, e) &&
            am_lcp(e->s.tok, e->s.n, tok, n) >= e->s.n)
            best = e->s.n;
    }
    return best;
}

am_entry *am_add(am *z, am_ns *x, const uint32_t *tok, size_t n, bool point)
{
    if (x->n_e == x->cap_e) {
        size_t cap = x->cap_e ? 2 * x->cap_e : 64;
        am_entry *p = realloc(x->e, cap * sizeof *p);
        AM_CHECK(z, p, "out of memory for the model");
        x->e = p;
        x->cap_e = cap;
    }
    am_entry *e = &x->e[x->n_e++];
    memset(e, 0, sizeof *e);
    e->s.n = (uint32_t)n;
    memcpy(e->s.tok, tok, n * sizeof *tok);
    e->point = point;
    e->must = true;
    e->since = z->drops;
    return e;
}

/* Does a namespace of x's scope under another model hold a prefix of tok
 * (as far as the model knows: ever stored)? */
bool am_other_model(const am *z, int xi, const uint32_t *tok, size_t n)
{
    const am_ns *x = &z->ns[xi];
    for (int i = 0; i < z->n_ns; i++)
        if (i != xi && z->ns[i].scope == x->scope && z->ns[i].model != x->model &&
            am_lcp_any(z, &z->ns[i], tok, n) > 0)
            return true;
    return false;
}

/* ---- stats --------------------------------------------------------------------------- */

void am_stats(am *z, sb_stats *s)
{
    AM_CHECK(z, sb_store_stats(z->st, s) == SB_OK, "sb_store_stats failed");
}

/* Events that may take state out of the index (evictions; reclamation
 * makes RAM-only or drops), and that may take state off the disk
 * (reclamation). */
static uint64_t index_drops(const sb_stats *s)
{
    return s->evictions + s->point_evictions + s->disk_reclaimed_segments +
           s->disk_reclaim_dropped + s->disk_reclaim_ram_only + s->disk_reclaim_kept;
}

uint64_t am_disk_drops(const am *z, const sb_stats *s)
{
    return z->base_drops + s->disk_reclaimed_segments + s->disk_reclaim_dropped +
           s->disk_reclaim_ram_only + s->disk_reclaim_kept + s->disk_write_errors +
           s->disk_checksum_failures;
}

void am_update_drops(am *z, const sb_stats *s)
{
    z->drops = z->base_drops + index_drops(s);
    if (s->evictions + s->point_evictions + s->disk_reclaimed_segments +
        s->disk_reclaim_dropped)
        z->ever_dropped = true;
}

/* ---- the fault hook ----------------------------------------------------------------- */

bool am_arm(am *z)
{
    if (!z->fault)
        return false;
    uint64_t nth = 1 + am_draw(z, 8);
    AM_CHECK(z, sb_store_fault_alloc(z->st, nth) == SB_OK, "sb_store_fault_alloc");
    return true;
}

void am_disarm(am *z)
{
    if (!z->fault)
        return;
    AM_CHECK(z, sb_store_fault_alloc(z->st, 0) == SB_OK, "sb_store_fault_alloc");
    z->fault = false;
}

/* ---- matches ------------------------------------------------------------------------- */

/* Restore n tokens of match m (and its point when with_point) and check
 * every byte. A restore that meets a damaged record (only after a power
 * cut) shrinks the match: then the shorter prefix is checked. Returns the
 * call's code (SB_OK, or what the mode allows). */
/* An engine's pool for n positions: per tensor, blocks of bs tokens (1 to
 * 2 pages' worth) in shuffled order, rows padded or not. */
typedef struct am_pool {
    uint32_t ids[2 * AM_MAX_SEQ + 2];
    uint8_t *mem[AM_MAX_TENSORS];
    sb_block_table tab[AM_MAX_TENSORS];
    uint32_t nt, bs;
} am_pool;

static void am_pool_open(am *z, const am_ns *x, size_t n, am_pool *pl)
{
    const am_model *md = &z->model[x->model];
    pl->nt = md->n_tensors;
    pl->bs = 1 + (uint32_t)am_draw(z, 2 * md->pt);
    size_t nb = (n + pl->bs - 1) / pl->bs + 1;
    for (size_t i = 0; i < nb; i++)
        pl->ids[i] = (uint32_t)i;
    for (size_t i = nb - 1; i > 0; i--) {
        size_t j = am_draw(z, i + 1);
        uint32_t v = pl->ids[i];
        pl->ids[i] = pl->ids[j];
        pl->ids[j] = v;
    }
    for (uint32_t t = 0; t < pl->nt; t++) {
        size_t stride = md->bpt[t] + 8 * am_draw(z, 2);
        pl->mem[t] = malloc(nb * pl->bs * stride);
        AM_CHECK(z, pl->mem[t] != NULL, "malloc");
        memset(pl->mem[t], 0xD7, nb * pl->bs * stride);
        pl->tab[t] = (sb_block_table){ .base = pl->mem[t], .block_ids = pl->ids,
                                       .block_tokens = pl->bs, .block_stride = pl->bs * stride,
                                       .token_stride = stride };
    }
}

static void am_pool_close(am_pool *pl)
{
    for (uint32_t t = 0; t < pl->nt; t++)
        free(pl->mem[t]);
}

/* Position p's row of tensor t. */
static uint8_t *am_row(const am_pool *pl, uint32_t t, size_t p)
{
    const sb_block_table *b = &pl->tab[t];
    return (uint8_t *)b->base + (size_t)b->block_ids[p / b->block_tokens] * b->block_stride +
           (p % b->block_tokens) * b->token_stride;
}

int am_restore_blocks(am *z, int xi, sb_match *m, size_t n)
{
    am_ns *x = &z->ns[xi];
    const am_model *md = &z->model[x->model];
    am_pool pl;
    am_pool_open(z, x, n, &pl);
    uint32_t nt = md->n_tensors;
    uint32_t split = nt > 1 && am_draw(z, 2) ? 1 + (uint32_t)am_draw(z, nt - 1) : nt;
    int rc = sb_match_restore_blocks(m, 0, n, 0, split, pl.tab);
    if (split < nt && (rc == SB_OK || rc == SB_ERR_CORRUPT || rc == SB_ERR_IO)) {
        /* the second layer, over what is left of the match */
        sb_match_info mid;
        AM_CHECK(z, sb_match_get_info(m, &mid) == SB_OK, "sb_match_get_info");
        size_t n2 = n < mid.n_tokens ? n : mid.n_tokens;
        int rc2 = sb_match_restore_blocks(m, 0, n2, split, nt - split, pl.tab + split);
        if (rc == SB_OK)
            rc = rc2;
    }
    am_trace(z, "  restore_blocks of %zu (blocks of %u, tensors split at %u): %s", n, pl.bs,
             split, sb_strerror(rc));
    sb_match_info after;
    AM_CHECK(z, sb_match_get_info(m, &after) == SB_OK, "sb_match_get_info");
    size_t k = n < after.n_tokens ? n : after.n_tokens;
    if (rc == SB_ERR_BUDGET || rc == SB_ERR_NOMEM)
        k = 0;
    for (uint32_t t = 0; t < nt; t++)
        for (size_t p = 0; p < k; p++)
            memcpy(z->out[t] + p * md->bpt[t], am_row(&pl, t, p), md->bpt[t]);
    am_pool_close(&pl);
    return rc;
}

int am_put_blocks(am *z, int xi, const uint32_t *tok, size_t n, size_t from, const void *point,
                  size_t *stored, sb_write_outcome *oc)
{
    am_ns *x = &z->ns[xi];
    const am_model *md = &z->model[x->model];
    am_pool pl;
    am_pool_open(z, x, n, &pl);
    for (uint32_t t = 0; t < md->n_tensors; t++)
        for (size_t p = from; p < n; p++)
            memcpy(am_row(&pl, t, p), z->buf[t] + p * md->bpt[t], md->bpt[t]);
    am_trace(z, "  put_blocks from %zu (blocks of %u)", from, pl.bs);
    int rc = sb_ns_put_blocks(x->h, tok, n, from, pl.tab, point, stored, oc);
    am_pool_close(&pl);
    return rc;
}

int am_put_layers(am *z, int xi, const uint32_t *tok, size_t n, size_t from, const void *point,
                  size_t *stored, sb_write_outcome *oc, am_layered *how)
{
    am_ns *x = &z->ns[xi];
    const am_model *md = &z->model[x->model];
    uint32_t nt = md->n_tensors;
    am_pool pl;
    am_pool_open(z, x, n, &pl);
    for (uint32_t t = 0; t < nt; t++)
        for (size_t p = from; p < n; p++)
            memcpy(am_row(&pl, t, p), z->buf[t] + p * md->bpt[t], md->bpt[t]);
    *how = AM_LAYERED_FINISHED;
    sb_put *put = NULL;
    int rc = sb_ns_put_begin(x->h, tok, n, from, &put);
    am_trace(z, "  put_layers from %zu (blocks of %u): begin %s", from, pl.bs,
             sb_strerror(rc));
    if (rc != SB_OK) {
        AM_CHECK(z, !put, "a refused sb_ns_put_begin left a handle");
        *stored = 0; /* (what sb_put_finish would say) */
        memset(oc, 0, sizeof *oc);
        am_pool_close(&pl);
        return rc;
    }
    /* The tensors in runs of 1 to nt, the runs in a shuffled order; now
     * and then one tensor again, or one run left out (then finish must
     * refuse), or an abort. */
    uint32_t first[AM_MAX_TENSORS], count[AM_MAX_TENSORS], runs = 0;
    for (uint32_t t = 0; t < nt; t += count[runs++]) {
        first[runs] = t;
        count[runs] = 1 + (uint32_t)am_draw(z, nt - t);
    }
    for (uint32_t i = runs - 1; i > 0; i--) {
        uint32_t j = (uint32_t)am_draw(z, i + 1), f = first[i], c = count[i];
        first[i] = first[j];
        count[i] = count[j];
        first[j] = f;
        count[j] = c;
    }
    uint32_t skip = am_draw(z, 12) == 0 ? (uint32_t)am_draw(z, runs) : runs;
    for (uint32_t i = 0; i < runs; i++)
        if (i != skip)
            AM_CHECK(z, sb_put_tensors(put, first[i], count[i], pl.tab + first[i]) == SB_OK,
                     "sb_put_tensors %u+%u", first[i], count[i]);
    if (skip == runs && am_draw(z, 4) == 0) {
        uint32_t t = (uint32_t)am_draw(z, nt);
        AM_CHECK(z, sb_put_tensors(put, t, 1, pl.tab + t) == SB_OK, "sb_put_tensors again");
    }
    if (skip == runs && am_draw(z, 8) == 0) {
        am_trace(z, "  put_layers aborted");
        sb_put_abort(put);
        *how = AM_LAYERED_ABORTED;
        *stored = 0;
        memset(oc, 0, sizeof *oc);
        am_pool_close(&pl);
        return SB_OK;
    }
    rc = sb_put_finish(put, point, stored, oc);
    if (skip < runs) {
        AM_CHECK(z, rc == SB_ERR_INCOMPLETE, "finish without tensors %u+%u: %s", first[skip],
                 count[skip], sb_strerror(rc));
        *how = AM_LAYERED_INCOMPLETE;
    }
    am_pool_close(&pl);
    return rc;
}

int am_restore_checked(am *z, int xi, sb_match *m, const uint32_t *tok, size_t n,
                       bool with_point, const char *what)
{
    am_ns *x = &z->ns[xi];
    const am_model *md = &z->model[x->model];
    void *dst[AM_MAX_TENSORS];
    uint8_t pt[AM_MAX_POINT + 8];
    for (uint32_t t = 0; t < md->n_tensors; t++) {
        memset(z->out[t], 0xEE, sizeof z->out[t]);
        dst[t] = z->out[t];
    }
    memset(pt, 0xEE, sizeof pt);
    sb_match_info before, after;
    AM_CHECK(z, sb_match_get_info(m, &before) == SB_OK, "sb_match_get_info");
    /* Without the point, now and then through block tables (a pool of
     * shuffled blocks of 1 to 2 pages' tokens, maybe a layer at a time),
     * gathered back into z->out for the same checks. */
    bool blocks = !with_point && n && am_draw(z, 3) == 0;
    int rc = blocks ? am_restore_blocks(z, xi, m, n) : sb_match_restore(m, n, dst, with_point ? pt : NULL);
    AM_CHECK(z, sb_match_get_info(m, &after) == SB_OK, "sb_match_get_info");
    const char *q = AM_S(tok, n);
    if (rc == SB_ERR_BUDGET || rc == SB_ERR_NOMEM) {
        /* No RAM to read disk pages into: nothing restored, the match
         * unchanged. Only a match with something on disk reads. */
        AM_CHECK(z, before.n_pages_disk > 0 || (with_point && z->io),
                 "%s: restore of %zu of %s: %s with nothing on disk", what, n, q,
                 sb_strerror(rc));
        AM_CHECK(z, after.n_tokens == before.n_tokens && after.has_point == before.has_point,
                 "%s: restore of %s failed with %s and changed the match", what, q,
                 sb_strerror(rc));
        return rc;
    }
    if (rc == SB_ERR_CORRUPT || rc == SB_ERR_IO) {
        /* Only a power cut damages records here: the match shrank to what
         * could be read; that prefix is restored. */
        AM_CHECK(z, z->crashed, "%s: restore of %zu tokens of %s: %s without any damage", what,
                 n, q, sb_strerror(rc));
        AM_CHECK(z, after.n_tokens <= before.n_tokens &&
                        (after.miss == SB_MISS_CORRUPT || after.miss == SB_MISS_IO),
                 "%s: restore failed with %s: L %zu -> %zu, miss %s", what, sb_strerror(rc),
                 before.n_tokens, after.n_tokens, sb_miss_name(after.miss));
        am_damage(z, xi);
        size_t k = n < after.n_tokens ? n : after.n_tokens;
        size_t bad = am_bad_token(z, x, tok, k, z->out);
        AM_CHECK(z, bad == k, "%s: shrunk restore of %s: token %zu holds the wrong state", what,
                 q, bad);
        return rc;
    }
    AM_CHECK(z, rc == SB_OK, "%s: restore of %zu tokens of %s: %s", what, n, q, sb_strerror(rc));
    AM_CHECK(z, after.n_tokens == before.n_tokens, "%s: a good restore changed L", what);
    size_t bad = am_bad_token(z, x, tok, n, z->out);
    AM_CHECK(z, bad == n, "%s: restore of %s: token %zu holds the wrong state", what, q, bad);
    for (uint32_t t = 0; t < md->n_tensors; t++)
        AM_CHECK(z, z->out[t][n * md->bpt[t]] == 0xEE, "%s: restore of %zu tokens wrote past them",
                 what, n);
    if (with_point) {
        uint8_t want[AM_MAX_POINT];
        am_point(z, x, tok, n, want);
        AM_CHECK(z, !memcmp(want, pt, md->point_bytes) && pt[md->point_bytes] == 0xEE,
                 "%s: point state at %zu of %s is wrong", what, n, q);
        const void *p = sb_match_point(m);
        AM_CHECK(z, p && !memcmp(want, p, md->point_bytes),
                 "%s: sb_match_point at %zu of %s is wrong", what, n, q);
    }
    return SB_OK;
}

/* A restore met damage in namespace xi: what it dropped is gone, so no
 * sequence there is guaranteed any more. */
void am_damage(am *z, int xi)
{
    am_ns *x = &z->ns[xi];
    for (size_t i = 0; i < x->n_e; i++)
        x->e[i].must = false;
}

sb_match *am_match_checked(am *z, int xi, const am_seq *s, size_t n, sb_match_info *info)
{
    am_ns *x = &z->ns[xi];
    const am_model *md = &z->model[x->model];
    const uint32_t *tok = s->tok;
    bool required = md->flags & SB_LAYOUT_POINT_REQUIRED;
    sb_match *m = (sb_match *)&m; /* must be overwritten */
    sb_stats s0, s1;
    am_stats(z, &s0);
    am_update_drops(z, &s0);
    uint64_t drops0 = z->drops;
    size_t must = am_lcp_must(z, x, tok, n), must_pt = am_point_must(z, x, tok, n);
    bool armed = am_arm(z);
    int rc = sb_ns_match(x->h, tok, n, &m);
    am_disarm(z);
    memset(info, 0, sizeof *info);
    if (n > z->cfg.max_seq_tokens) {
        AM_CHECK(z, rc == SB_ERR_TOO_MANY_TOKENS && !m,
                 "match of %zu tokens over max_seq_tokens: %s", n, sb_strerror(rc));
        return NULL;
    }
    if (armed && rc == SB_ERR_NOMEM) {
        AM_CHECK(z, !m, "a failed match left a handle");
        return NULL;
    }
    const char *q = AM_S(tok, n);
    AM_CHECK(z, rc == SB_OK && m, "match of %s: %s", q, sb_strerror(rc));
    AM_CHECK(z, sb_match_get_info(m, info) == SB_OK, "sb_match_get_info failed");
    am_stats(z, &s1);
    am_update_drops(z, &s1);
    /* (Outside LOOSE nothing drops but the caller's own calls; there the
     * writer's reclamation may, and the lower bounds hold only when it did
     * not meanwhile.) */
    bool lower = z->drops == drops0 || z->mode == AM_EXACT;
    size_t L = info->n_tokens, M = info->n_matched_tokens;
    int why = info->miss;
    am_trace(z, "match ns %d %s (%zu): L %zu, matched %zu, pages %zu (%zu disk), point %d, %s",
             xi, q, n, L, M, info->n_pages, info->n_pages_disk, info->has_point,
             sb_miss_name(why));

    /* The lookup's counters move by exactly this lookup. */
    AM_CHECK(z, why >= 0 && why < SB_MISS__COUNT, "miss %d out of range", why);
    AM_CHECK(z, s1.lookups == s0.lookups + 1 && s1.hits == s0.hits + (L > 0) &&
                    s1.hit_tokens == s0.hit_tokens + L &&
                    s1.miss_tokens == s0.miss_tokens + (n - L) &&
                    s1.misses[why] == s0.misses[why] + (L == 0) &&
                    s1.miss_tokens_by_reason[why] == s0.miss_tokens_by_reason[why] + (n - L) &&
                    s1.hits_ram + s1.hits_disk == s0.hits_ram + s0.hits_disk + (L > 0),
             "match of %s: lookup counters moved wrong (L %zu of %zu, miss %s)", q, L, n,
             sb_miss_name(why));
    /* A held page is never evicted: pages on disk now were on disk then. */
    if (info->n_pages_disk)
        AM_CHECK(z, s1.hits_disk == s0.hits_disk + 1,
                 "match of %s: %zu pages on disk, not counted a disk hit", q,
                 info->n_pages_disk);

    /* Geometry. */
    AM_CHECK(z, L <= M && M <= n, "match of %s: L %zu, matched %zu of %zu", q, L, M, n);
    AM_CHECK(z, info->n_pages == am_regions(z, x, L) &&
                    info->n_pages_ram + info->n_pages_disk == info->n_pages,
             "match of %s: L %zu with %zu pages (%zu RAM, %zu disk)", q, L, info->n_pages,
             info->n_pages_ram, info->n_pages_disk);
    AM_CHECK(z, !info->n_pages_disk || (z->io && z->cfg.write_mode != SB_WRITE_ONLY),
             "match of %s: %zu pages on disk in a store that serves RAM only", q,
             info->n_pages_disk);

    /* Upper bound: never more than some stored sequence shares. */
    size_t any = am_lcp_any(z, x, tok, n);
    AM_CHECK(z, M <= any, "match of %s: matched %zu tokens, no sequence stored shares more "
             "than %zu", q, M, any);
    /* Point states. */
    if (required) {
        AM_CHECK(z, L == 0 || am_point_at(z, x, tok, L, false),
                 "match of %s: L %zu, but no point state was ever stored there", q, L);
        AM_CHECK(z, (L > 0) == (info->has_point != 0),
                 "match of %s: point-required L %zu with has_point %d", q, L, info->has_point);
    } else {
        AM_CHECK(z, L == M, "match of %s: L %zu below matched %zu with no point rule", q, L, M);
    }
    if (info->has_point)
        AM_CHECK(z, md->point_bytes && am_point_at(z, x, tok, L, false),
                 "match of %s: a point state at %zu, none was stored there", q, L);

    /* Lower bound: what guaranteed sequences share. */
    if (!lower) {
        /* dropped meanwhile */
    } else if (required) {
        AM_CHECK(z, L >= must_pt, "match of %s: L %zu, but a point state at %zu was stored "
                 "and nothing dropped since", q, L, must_pt);
    } else {
        AM_CHECK(z, L >= must, "match of %s: L %zu, but %zu tokens were stored and nothing "
                 "dropped since", q, L, must);
        if (md->point_bytes && am_point_at(z, x, tok, L, true))
            AM_CHECK(z, info->has_point, "match of %s: no point at %zu, where one was stored "
                     "and nothing dropped since", q, L);
    }

    /* Miss reasons. */
    AM_CHECK(z, (why == SB_MISS_NONE) == (L == n), "match of %s: L %zu of %zu, miss %s", q, L,
             n, sb_miss_name(why));
    AM_CHECK(z, (why == SB_MISS_NO_POINT) == (L < n && M > L),
             "match of %s: L %zu, matched %zu, miss %s", q, L, M, sb_miss_name(why));
    AM_CHECK(z, why == SB_MISS_NONE || why == SB_MISS_NO_PREFIX || why == SB_MISS_EVICTED ||
                    why == SB_MISS_NO_POINT || why == SB_MISS_MODEL_MISMATCH,
             "match of %s: miss %s from a lookup (no read was made)", q, sb_miss_name(why));
    bool other = am_other_model(z, xi, tok, n);
    AM_CHECK(z, why != SB_MISS_MODEL_MISMATCH || (L == 0 && other),
             "match of %s: model_mismatch, but no other model of the scope holds a prefix", q);
    AM_CHECK(z, why != SB_MISS_EVICTED || z->ever_dropped || z->crashed || s1.evictions ||
                    s1.point_evictions || s1.disk_reclaimed_segments,
             "match of %s: miss evicted, but nothing was ever evicted", q);
    /* Where the index is what the model says (nothing dropped in this
     * store), the reason follows from the definitions. */
    bool exact = !z->crashed && !x->loose &&
                 ((z->mode == AM_RAM && !z->ever_dropped && !s1.evictions &&
                   !s1.point_evictions) ||
                  z->mode == AM_EXACT);
    if (exact && L < n && M == L)
        AM_CHECK(z, why == (L == 0 && other ? SB_MISS_MODEL_MISMATCH : SB_MISS_NO_PREFIX),
                 "match of %s: L %zu, miss %s (nothing dropped, another model %d)", q, L,
                 sb_miss_name(why), other);
    if (exact) {
        AM_CHECK(z, M == any, "match of %s: matched %zu, the model says %zu (nothing "
                 "dropped)", q, M, any);
        if (required && am_all_must(z, x))
            AM_CHECK(z, L == am_point_must(z, x, tok, n),
                     "match of %s: L %zu, the model says %zu (nothing dropped)", q, L,
                     am_point_must(z, x, tok, n));
        if (!required && md->point_bytes && am_all_must(z, x))
            AM_CHECK(z, (info->has_point != 0) == am_point_at(z, x, tok, L, false),
                     "match of %s: has_point %d at %zu, the model disagrees (nothing "
                     "dropped)", q, info->has_point, L);
    }
    return m;
}

/* The restores of a fresh match, whole and partial, and their errors. */
void am_match_restores(am *z, int xi, sb_match *m, const am_seq *s, size_t n,
                       sb_match_info *info)
{
    am_ns *x = &z->ns[xi];
    const am_model *md = &z->model[x->model];
    size_t L = info->n_tokens;
    int rc = am_restore_checked(z, xi, m, s->tok, L, info->has_point, "match");
    if (rc != SB_OK && rc != SB_ERR_BUDGET && rc != SB_ERR_NOMEM)
        AM_CHECK(z, sb_match_get_info(m, info) == SB_OK, "sb_match_get_info");
    L = info->n_tokens;
    (void)n;
    void *dst[AM_MAX_TENSORS];
    for (uint32_t t = 0; t < md->n_tensors; t++)
        dst[t] = z->out[t];
    uint8_t pt[AM_MAX_POINT];
    rc = sb_match_restore(m, L + 1, dst, NULL);
    AM_CHECK(z, rc == SB_ERR_RANGE, "restore of L + 1 tokens: %s", sb_strerror(rc));
    if (!info->has_point) {
        rc = sb_match_restore(m, L, dst, pt);
        AM_CHECK(z, rc == SB_ERR_NO_POINT, "restore with a point of a match without one: %s",
                 sb_strerror(rc));
    } else if (L > 0) {
        rc = sb_match_restore(m, L - 1, dst, pt);
        AM_CHECK(z, rc == SB_ERR_NO_POINT, "restore with a point short of L: %s",
                 sb_strerror(rc));
    }
    rc = sb_match_load(m, info->n_pages + 1, 0);
    AM_CHECK(z, rc == SB_ERR_RANGE, "sb_match_load past the match's pages: %s", sb_strerror(rc));
    if (info->n_pages) {
        rc = sb_match_load(m, info->n_pages - 1, 1);
        AM_CHECK(z, rc == SB_ERR_NO_POINT, "sb_match_load with a point and fewer pages: %s",
                 sb_strerror(rc));
    }
    if (!info->has_point) {
        rc = sb_match_load(m, info->n_pages, 1);
        AM_CHECK(z, rc == SB_ERR_NO_POINT, "sb_match_load of a point the match lacks: %s",
                 sb_strerror(rc));
    }
    sb_page *pg[1];
    rc = sb_match_pages(m, info->n_pages, 1, pg);
    AM_CHECK(z, rc == SB_ERR_RANGE, "sb_match_pages past the match's pages: %s",
             sb_strerror(rc));
    /* A partial restore. */
    if (L > 1) {
        size_t k = 1 + am_draw(z, L - 1);
        rc = am_restore_checked(z, xi, m, s->tok, k, false, "partial restore");
        if (rc == SB_ERR_CORRUPT || rc == SB_ERR_IO)
            AM_CHECK(z, sb_match_get_info(m, info) == SB_OK, "sb_match_get_info");
    }
}

/* ---- held things ------------------------------------------------------------------- */

void am_hold_match(am *z, sb_match *m, int xi, const am_seq *s, size_t n,
                   const sb_match_info *info)
{
    if (z->n_match == AM_MATCHES)
        am_drop_match(z, 0);
    am_match *hm = &z->match[z->n_match++];
    hm->m = m;
    hm->xi = xi;
    hm->req = *s;
    hm->req.n = (uint32_t)n;
    hm->L = info->n_tokens;
    hm->has_point = info->has_point != 0;
}

void am_drop_match(am *z, int i)
{
    sb_match_release(z->match[i].m);
    memmove(&z->match[i], &z->match[i + 1], (size_t)(z->n_match - i - 1) * sizeof z->match[0]);
    z->n_match--;
}

void am_drop_page(am *z, int i)
{
    sb_page_unref(z->page[i].p);
    memmove(&z->page[i], &z->page[i + 1], (size_t)(z->n_page - i - 1) * sizeof z->page[0]);
    z->n_page--;
}

void am_hold_page(am *z, sb_page *p, int xi, uint32_t region, uint32_t kv, const uint32_t *tok)
{
    if (z->n_page == AM_PAGES)
        am_drop_page(z, 0);
    am_page *hp = &z->page[z->n_page++];
    const am_model *md = &z->model[z->ns[xi].model];
    hp->p = p;
    hp->xi = xi;
    hp->region = region;
    hp->kv = kv;
    hp->pre.n = region * md->pt + kv;
    memcpy(hp->pre.tok, tok, hp->pre.n * sizeof *tok);
}

void am_release_all(am *z)
{
    while (z->n_match)
        am_drop_match(z, z->n_match - 1);
    while (z->n_page)
        am_drop_page(z, z->n_page - 1);
    for (int i = 0; i < z->n_pin; i++)
        if (z->pin[i].live && am_pin_live(z, &z->pin[i])) {
            int rc = sb_ns_unpin(z->ns[z->pin[i].xi].h, z->pin[i].id);
            AM_CHECK(z, rc == SB_OK, "unpin of live pin %" PRIu64 ": %s", z->pin[i].id,
                     sb_strerror(rc));
        }
    z->n_pin = 0;
    while (z->fg > 0) {
        AM_CHECK(z, sb_store_foreground(z->st, 0) == SB_OK, "foreground end");
        z->fg--;
    }
}

bool am_pin_live(const am *z, const am_pin *p)
{
    return p->live && (!p->expiry_ns || atomic_load(&z->clock_ns) < p->expiry_ns);
}

/* ---- tickets ----------------------------------------------------------------------- */

/* Follow ticket t of entry (xi, ei), whose call said state (SB_OK when
 * durable). */
void am_follow(am *z, uint64_t t, int state, int xi, size_t ei)
{
    if (!t)
        return;
    if (z->n_tk == AM_TICKETS) {
        memmove(&z->tk[0], &z->tk[1], (AM_TICKETS - 1) * sizeof z->tk[0]);
        z->n_tk--;
    }
    z->tk[z->n_tk++] = (am_ticket){ t, state, xi, ei, am_bad_reads(z), z->removes };
}

uint64_t am_bad_reads(am *z)
{
    sb_stats s;
    am_stats(z, &s);
    return s.disk_checksum_failures + s.disk_read_errors;
}

bool am_ticket_may_fail(am *z, const am_ticket *k)
{
    return (z->crashed && am_bad_reads(z) > k->bad) || z->removes > k->removes;
}

/* Check an answer about followed ticket k against what was said before:
 * durable stays durable, never stays never. Records a durable answer on
 * its entry. */
void am_ticket_answer(am *z, am_ticket *k, int rc, const char *what)
{
    /* A write-only store's synced state answers SB_ERR_WRITE_ONLY, never
     * SB_OK; any other store's never SB_ERR_WRITE_ONLY. */
    bool wo = z->cfg.write_mode == SB_WRITE_ONLY;
    AM_CHECK(z, (rc == SB_OK && !wo) || (rc == SB_ERR_WRITE_ONLY && wo) ||
                    rc == SB_ERR_PENDING || rc == SB_ERR_NOT_DURABLE ||
                    (rc == SB_ERR_RECLAIMED && !wo && z->mode == AM_LOOSE),
             "%s of ticket %" PRIu64 ": %s (write mode %d)", what, k->t, sb_strerror(rc),
             (int)z->cfg.write_mode);
    /* One way: pending to any answer; durable to reclaimed (a cap took
     * its records: only where caps reclaim). */
    AM_CHECK(z, k->state == SB_ERR_PENDING || rc == k->state ||
                    (k->state == SB_OK && rc == SB_ERR_RECLAIMED),
             "%s of ticket %" PRIu64 ": %s after %s", what, k->t, sb_strerror(rc),
             sb_strerror(k->state));
    k->state = rc;
    if (rc == SB_ERR_RECLAIMED && k->ei < z->ns[k->xi].n_e) {
        am_entry *e = &z->ns[k->xi].e[k->ei];
        if (e->ticket == k->t && e->durable) {
            e->durable = false; /* a reopen need not restore it whole */
            am_trace(z, "ticket %" PRIu64 " reclaimed (%s)", k->t, what);
        }
    }
    /* Synced: a power cut and a reopen that reads the tier restore it
     * (write-only too: what it is for). */
    if ((rc == SB_OK || rc == SB_ERR_WRITE_ONLY) && k->ei < z->ns[k->xi].n_e) {
        am_entry *e = &z->ns[k->xi].e[k->ei];
        if (e->ticket == k->t && !e->durable) {
            e->durable = true;
            am_trace(z, "ticket %" PRIu64 " durable (%s)", k->t, what);
        }
    }
}

/* ---- the world ---------------------------------------------------------------------- */

static uint64_t fake_clock(void *ctx)
{
    return atomic_load((_Atomic uint64_t *)ctx);
}

static void model_layout(am *z, am_model *md, int i)
{
    static const uint32_t pts[] = { 1, 2, 3, 4, 5, 7, 8, 16, 32, 64 };
    snprintf(md->id, sizeof md->id, "model-%d", i);
    md->pt = pts[am_draw(z, sizeof pts / sizeof pts[0])];
    md->n_tensors = 1 + (uint32_t)am_draw(z, AM_MAX_TENSORS);
    md->flags = am_draw(z, 4) == 0 ? SB_LAYOUT_ELEM16 : 0;
    for (uint32_t t = 0; t < md->n_tensors; t++) {
        md->bpt[t] = 1 + (uint32_t)am_draw(z, AM_MAX_BPT);
        if (md->flags & SB_LAYOUT_ELEM16)
            md->bpt[t] += md->bpt[t] % 2 ? (md->bpt[t] < AM_MAX_BPT ? 1 : -1u) : 0;
    }
    unsigned pk = (unsigned)am_draw(z, 3); /* none, optional, required */
    md->point_bytes = pk ? 1 + (uint32_t)am_draw(z, AM_MAX_POINT) : 0;
    if (pk == 2)
        md->flags |= SB_LAYOUT_POINT_REQUIRED;
    md->vocab = 2 + (uint32_t)am_draw(z, 4);
    /* The page layout, as the manual draws it. */
    size_t off = 0;
    for (uint32_t t = 0; t < md->n_tensors; t++) {
        md->off[t] = off;
        off += ((size_t)md->pt * md->bpt[t] + 63) / 64 * 64;
    }
    md->page_bytes = (off + 4095) / 4096 * 4096;
}

void am_layout(const am *z, const am_ns *x, sb_layout *lay)
{
    const am_model *md = &z->model[x->model];
    memset(lay, 0, sizeof *lay);
    lay->model_id = md->id;
    lay->model_id_bytes = strlen(md->id);
    lay->page_tokens = md->pt;
    lay->n_tensors = md->n_tensors;
    lay->bytes_per_token = md->bpt;
    lay->point_bytes = md->point_bytes;
    lay->flags = md->flags;
}

/* Open (or reopen) namespace handle xi and check what it says of itself. */
void am_open_ns(am *z, int xi)
{
    am_ns *x = &z->ns[xi];
    const am_model *md = &z->model[x->model];
    sb_layout lay;
    am_layout(z, x, &lay);
    int rc = sb_ns_open(z->st, &lay, z->scope[x->scope], z->scope_bytes[x->scope], &x->h);
    AM_CHECK(z, rc == SB_OK && x->h, "sb_ns_open of namespace %d: %s", xi, sb_strerror(rc));
    sb_ns_info info;
    AM_CHECK(z, sb_ns_get_info(x->h, &info) == SB_OK, "sb_ns_get_info");
    AM_CHECK(z, info.page_tokens == md->pt && info.n_tensors == md->n_tensors &&
                    info.page_bytes == md->page_bytes &&
                    info.point_bytes == md->point_bytes && info.flags == md->flags,
             "namespace %d: info (pt %u, %u tensors, %zu page bytes, %zu point bytes, flags "
             "%u) is not the layout's (page bytes by the manual's formula: %zu)", xi,
             info.page_tokens, info.n_tensors, info.page_bytes, info.point_bytes, info.flags,
             md->page_bytes);
    for (uint32_t t = 0; t < md->n_tensors; t++)
        AM_CHECK(z, sb_ns_tensor_offset(x->h, t) == md->off[t],
                 "tensor %u at offset %zu, the manual says %zu", t,
                 sb_ns_tensor_offset(x->h, t), md->off[t]);
    AM_CHECK(z, sb_ns_tensor_offset(x->h, md->n_tensors) == (size_t)-1,
             "the offset of a tensor past the layout is not (size_t)-1");
    AM_CHECK(z, sb_ns_store(x->h) == z->st, "sb_ns_store is not the store");
    AM_CHECK(z, !x->ns_id || x->ns_id == info.ns_id,
             "namespace %d changed its id: %016" PRIx64 " -> %016" PRIx64, xi, x->ns_id,
             info.ns_id);
    x->ns_id = info.ns_id;
}

void am_open_store(am *z)
{
    sb_store *st = NULL;
    int rc = z->io ? sb_store_open_io(&z->cfg, z->io, &st) : sb_store_open(&z->cfg, &st);
    AM_CHECK(z, rc == SB_OK && st, "sb_store_open: %s", sb_strerror(rc));
    z->st = st;
    for (int i = 0; i < z->n_ns; i++)
        am_open_ns(z, i);
    am_stats(z, &z->last);
    z->max_ticket = 0;
    z->n_tk = 0;
    z->ever_dropped = false;
    am_update_drops(z, &z->last);
}

static void draw_config(am *z)
{
    sb_config *c = &z->cfg;
    sb_config_default(c);
    c->clock_ns = fake_clock;
    c->clock_ctx = (void *)&z->clock_ns;
    /* Page sizes here are 4 KiB to 16 KiB: budgets in pages of 8 KiB. */
    static const uint64_t ram_pages[] = { 3, 6, 12, 24, 48, 4096 };
    uint64_t rp = ram_pages[am_draw(z, 6)];
    c->ram_bytes = rp * 8192;
    if (am_draw(z, 4) == 0)
        c->ram_pages = 2 + am_draw(z, 40);
    if (am_draw(z, 4) == 0)
        c->ns_ram_bytes = (2 + am_draw(z, 30)) * 8192;
    if (am_draw(z, 3) == 0)
        c->max_seq_tokens = 20 + (uint32_t)am_draw(z, 120);
    if (z->mode == AM_RAM)
        return;
    c->dir = NULL; /* the in-memory file system */
    c->segment_bytes = (64u << 10) << am_draw(z, 4);
    c->queue_depth = 1 + (uint32_t)am_draw(z, 8);
    c->durability = (sb_durability)am_draw(z, 3);
    c->sync_interval_ms = 1 + (uint32_t)am_draw(z, 20);
    c->sync_bytes = (64u << 10) << am_draw(z, 4);
    c->compress_level = am_draw(z, 4) == 0 ? 1 + (uint32_t)am_draw(z, 3) : 0;
    c->disk_free_floor_bytes = 0;
    if (z->mode == AM_EXACT) {
        c->write_mode = (sb_write_mode)am_draw(z, 2); /* through, back */
        c->min_prefix_tokens = (uint32_t)am_draw(z, 2);
        c->disk_bytes = 4ull << 30;
        return;
    }
    c->write_mode = (sb_write_mode)am_draw(z, 3);
    c->min_prefix_tokens = am_draw(z, 2) ? (uint32_t)am_draw(z, 64) : 1;
    if (am_draw(z, 2))
        c->disk_bytes = c->segment_bytes * (1 + am_draw(z, 6));
    else
        c->disk_bytes = 4ull << 30;
    if (am_draw(z, 2)) {
        c->write_budget_bytes_per_hour = (1ull << 20) << am_draw(z, 4);
        c->write_budget_burst_bytes = am_draw(z, 2) ? (64u << 10) << am_draw(z, 4) : 0;
    }
    if (am_draw(z, 2))
        c->backlog_bytes = (16u << 10) << am_draw(z, 5);
}

bool am_init(am *z, const am_src *src, uint64_t seed, int force_mode, unsigned flags,
             bool trace)
{
    memset(z, 0, sizeof *z);
    z->src = *src;
    z->seed = seed;
    z->trace = trace;
    pthread_mutex_init(&z->mu, NULL);
    atomic_store(&z->clock_ns, 1000000000ull);
    z->mode = force_mode >= 0 ? (am_mode)force_mode : (am_mode)am_draw(z, 3);
    z->n_model = 1 + (int)am_draw(z, AM_MAX_MODELS);
    z->n_scope = 1 + (int)am_draw(z, AM_MAX_SCOPES);
    for (int i = 0; i < z->n_model; i++)
        model_layout(z, &z->model[i], i);
    bool empty = am_draw(z, 2);
    for (int i = 0; i < z->n_scope; i++) {
        z->scope_bytes[i] = i == 0 && empty ? 0 : (size_t)snprintf(z->scope[i], 16, "tenant-%d", i);
    }
    /* Every model in every scope, up to AM_MAX_NS. */
    for (int m = 0; m < z->n_model; m++)
        for (int s = 0; s < z->n_scope; s++) {
            am_ns *x = &z->ns[z->n_ns++];
            x->model = m;
            x->scope = s;
            uint64_t h = 0x5eed;
            for (const char *p = z->model[m].id; *p; p++)
                h = h * 131 + (uint8_t)*p;
            for (size_t k = 0; k < z->scope_bytes[s]; k++)
                h = h * 131 + (uint8_t)z->scope[s][k];
            x->seed = mix64(&h);
        }
    draw_config(z);
    if (flags & AM_ROOMY) {
        z->cfg.ram_bytes = 1ull << 30;
        z->cfg.ram_pages = UINT64_MAX;
        z->cfg.ns_ram_bytes = UINT64_MAX;
        z->cfg.max_seq_tokens = 1u << 24;
    }
    if (z->done)
        return false;
    if (z->mode != AM_RAM) {
        int r = sb_io_mem_new(&z->io);
        AM_CHECK(z, r == 0, "sb_io_mem_new: %d", r);
    }
    am_trace(z, "mode %d, %d models x %d scopes, ram %" PRIu64 " bytes / %" PRIu64
             " pages, write mode %d, durability %d", (int)z->mode, z->n_model, z->n_scope,
             z->cfg.ram_bytes, z->cfg.ram_pages, (int)z->cfg.write_mode, (int)z->cfg.durability);
    for (int i = 0; i < z->n_model; i++)
        am_trace(z, "%s: page_tokens %u, %u tensors (%u %u %u), point %u, flags %u, vocab %u",
                 z->model[i].id, z->model[i].pt, z->model[i].n_tensors, z->model[i].bpt[0],
                 z->model[i].bpt[1], z->model[i].bpt[2], z->model[i].point_bytes,
                 z->model[i].flags, z->model[i].vocab);
    am_open_store(z);
    return true;
}

void am_free(am *z)
{
    for (int i = 0; i < z->n_ns; i++) {
        free(z->ns[i].e);
        free(z->ns[i].lat);
    }
    sb_io_destroy(z->io);
    pthread_mutex_destroy(&z->mu);
}

/* ---- after every operation ------------------------------------------------------------ */

/* The counters of sb_stats (they only grow within one open store). */
#define AM_COUNTERS(X)                                                                        \
    X(lookups) X(hits) X(hits_ram) X(hits_disk) X(hit_tokens) X(miss_tokens) X(puts)          \
    X(commits) X(pages_new) X(pages_dedup) X(pages_superseded) X(cow_copies)                  \
    X(budget_denials) X(evictions) X(evicted_bytes) X(point_evictions) X(disk_write_bytes)    \
    X(disk_read_bytes) X(disk_write_denials) X(disk_logical_bytes) X(disk_head_bytes)         \
    X(disk_padding_bytes) X(disk_summary_bytes) X(disk_superblock_bytes)                      \
    X(disk_ns_record_bytes) X(disk_reinsert_bytes) X(disk_checksum_failures) X(durable_seq)   \
    X(disk_write_errors) X(disk_read_errors) X(disk_queued_peak_bytes) X(disk_holdback_ns)   \
    X(disk_holdbacks) X(disk_reclaimed_segments) X(disk_reclaim_kept) X(disk_reclaim_ram_only) \
    X(disk_reclaim_dropped) X(disk_nospc) X(disk_deferred) X(disk_pool_written)              \
    X(disk_compressed_records) X(disk_compress_skipped) X(disk_compress_raw_bytes)            \
    X(disk_compress_stored_bytes) X(disk_compress_saved_bytes) X(pool_grown_bytes)            \
    X(pool_trimmed_bytes) X(disk_read_ios) X(disk_write_ios) X(disk_life_write_bytes)         \
    X(disk_life_logical_bytes) X(disk_life_reinsert_bytes) X(removes) X(removed_pages)      \
    X(removed_points) X(disk_tombstones) X(disk_tombstone_bytes)

static void check_stats(am *z, const sb_stats *s)
{
    const sb_config *c = &z->cfg;
    const sb_stats *o = &z->last;
#define AM_GROWS(f) AM_CHECK(z, s->f >= o->f, "counter " #f " went back: %" PRIu64 " -> %" PRIu64, \
                             o->f, s->f);
    AM_COUNTERS(AM_GROWS)
#undef AM_GROWS
    for (int i = 0; i < SB_MISS__COUNT; i++)
        AM_CHECK(z, s->misses[i] >= o->misses[i] &&
                        s->miss_tokens_by_reason[i] >= o->miss_tokens_by_reason[i],
                 "miss counters went back");
    for (int i = 0; i < SB_DENY__COUNT; i++)
        AM_CHECK(z, s->disk_denials[i] >= o->disk_denials[i] &&
                        s->disk_denied_bytes[i] >= o->disk_denied_bytes[i],
                 "denial counters went back");

    /* Budgets: blocks and the pool's spares within them. */
    AM_CHECK(z, s->ram_bytes + s->pool_spare_bytes <= c->ram_bytes &&
                    s->ram_pages + s->pool_spare_pages <= c->ram_pages,
             "over budget: %" PRIu64 " + %" PRIu64 " spare bytes of %" PRIu64 ", %" PRIu64
             " + %" PRIu64 " spare pages of %" PRIu64, s->ram_bytes, s->pool_spare_bytes,
             c->ram_bytes, s->ram_pages, s->pool_spare_pages, c->ram_pages);
    AM_CHECK(z, s->ram_bytes_limit == c->ram_bytes && s->ram_pages_limit == c->ram_pages,
             "stats report other limits");

    /* Sums and identities the fields' definitions give. */
    uint64_t misses = 0, miss_tokens = 0;
    for (int i = 0; i < SB_MISS__COUNT; i++) {
        misses += s->misses[i];
        miss_tokens += s->miss_tokens_by_reason[i];
    }
    AM_CHECK(z, s->misses[SB_MISS_NONE] == 0 && s->lookups == s->hits + misses &&
                    s->hits == s->hits_ram + s->hits_disk && s->miss_tokens == miss_tokens,
             "lookup counters do not add up: %" PRIu64 " lookups, %" PRIu64 " hits (%" PRIu64
             " RAM, %" PRIu64 " disk), %" PRIu64 " misses", s->lookups, s->hits, s->hits_ram,
             s->hits_disk, misses);
    uint64_t denials = 0;
    for (int i = 0; i < SB_DENY__COUNT; i++)
        denials += s->disk_denials[i];
    AM_CHECK(z, s->disk_write_denials == denials, "disk_write_denials %" PRIu64
             " is not the sum of disk_denials (%" PRIu64 ")", s->disk_write_denials, denials);
    AM_CHECK(z, s->pinned_pages <= s->indexed_pages,
             "pinned %" PRIu64 " of %" PRIu64 " indexed pages", s->pinned_pages,
             s->indexed_pages);
    AM_CHECK(z, s->index_tokens ? s->index_bytes_per_token ==
                                      (double)s->index_bytes / (double)s->index_tokens
                                : s->index_bytes_per_token == 0,
             "index_bytes_per_token is not index_bytes / index_tokens");
    if (!z->io) {
        AM_CHECK(z, s->disk_bytes == 0 && s->disk_pages == 0 && s->disk_write_bytes == 0 &&
                        s->hits_disk == 0 && s->disk_segments == 0,
                 "disk fields nonzero in a RAM-only store");
        AM_CHECK(z, s->ram_pages >= s->indexed_pages, "ram_pages %" PRIu64 " < indexed %" PRIu64,
                 s->ram_pages, s->indexed_pages);
    } else {
        AM_CHECK(z, s->disk_write_bytes ==
                        s->disk_logical_bytes + s->disk_head_bytes + s->disk_padding_bytes +
                            s->disk_summary_bytes + s->disk_superblock_bytes +
                            s->disk_ns_record_bytes + s->disk_reinsert_bytes +
                            s->disk_tombstone_bytes -
                            s->disk_compress_saved_bytes,
                 "the write-amplification identity does not hold: %" PRIu64 " written",
                 s->disk_write_bytes);
        AM_CHECK(z, s->disk_queued_peak_bytes <= c->backlog_bytes,
                 "queued peak %" PRIu64 " over the backlog %" PRIu64, s->disk_queued_peak_bytes,
                 c->backlog_bytes);
        AM_CHECK(z, s->disk_pages <= s->indexed_pages, "disk_pages %" PRIu64 " > indexed %" PRIu64,
                 s->disk_pages, s->indexed_pages);
        if (z->cfg.write_mode == SB_WRITE_ONLY)
            AM_CHECK(z, s->hits_disk == 0, "a write-only store counted a disk hit");
    }

    /* Namespaces: each one's share adds up to the store's. */
    uint64_t ns_bytes = 0, ns_pages = 0, ns_tokens = 0;
    for (int i = 0; i < z->n_ns; i++) {
        sb_ns_info info;
        AM_CHECK(z, sb_ns_get_info(z->ns[i].h, &info) == SB_OK, "sb_ns_get_info");
        AM_CHECK(z, info.ram_bytes <= c->ns_ram_bytes,
                 "namespace %d over its budget: %" PRIu64 " bytes", i, info.ram_bytes);
        ns_bytes += info.ram_bytes;
        ns_pages += info.indexed_pages;
        ns_tokens += info.index_tokens;
    }
    AM_CHECK(z, s->namespaces == (uint64_t)z->n_ns, "%" PRIu64 " namespaces, %d open",
             s->namespaces, z->n_ns);
    /* (The writer's reclamation may change the index between the calls:
     * compare when a second snapshot shows it did not.) */
    sb_stats s2;
    am_stats(z, &s2);
    bool still = s2.ram_bytes == s->ram_bytes && s2.indexed_pages == s->indexed_pages &&
                 s2.index_tokens == s->index_tokens &&
                 s2.disk_reclaimed_segments == s->disk_reclaimed_segments &&
                 s2.disk_reclaim_dropped == s->disk_reclaim_dropped &&
                 s2.disk_reclaim_kept == s->disk_reclaim_kept;
    AM_CHECK(z, !still || (ns_bytes == s->ram_bytes && ns_pages == s->indexed_pages &&
                           ns_tokens == s->index_tokens),
             "namespaces' bytes (%" PRIu64 "), pages (%" PRIu64 ") and tokens (%" PRIu64
             ") are not the store's (%" PRIu64 ", %" PRIu64 ", %" PRIu64 ")", ns_bytes, ns_pages,
             ns_tokens, s->ram_bytes, s->indexed_pages, s->index_tokens);

    /* Pins: the live ones, by the store clock. */
    uint64_t live = 0;
    for (int i = 0; i < z->n_pin; i++)
        live += am_pin_live(z, &z->pin[i]);
    AM_CHECK(z, s->pins == live, "%" PRIu64 " pins, %" PRIu64 " live", s->pins, live);

    /* Nothing held outside the index: every block allocated is indexed. */
    if (!z->io && !z->n_match && !z->n_page && !live)
        AM_CHECK(z, s->pinned_pages == 0 && s->ram_pages == s->indexed_pages &&
                        s->ram_bytes == s->indexed_bytes + s->point_bytes,
                 "nothing held, yet %" PRIu64 " pages / %" PRIu64 " bytes allocated for %" PRIu64
                 " indexed pages / %" PRIu64 " bytes (%" PRIu64 " pinned)", s->ram_pages,
                 s->ram_bytes, s->indexed_pages, s->indexed_bytes + s->point_bytes,
                 s->pinned_pages);
}

/* Every guaranteed sequence of namespace xi (up to max of them, newest
 * first) restores whole. */
void am_verify_ns(am *z, int xi, size_t max)
{
    am_ns *x = &z->ns[xi];
    size_t done = 0;
    for (size_t i = x->n_e; i-- > 0 && done < max;) {
        if (!am_guaranteed(z, &x->e[i]))
            continue;
        am_seq s = x->e[i].s;
        if (s.n > z->cfg.max_seq_tokens || s.n == 0) /* (0: all of it removed) */
            continue;
        sb_match_info info;
        sb_match *m = am_match_checked(z, xi, &s, s.n, &info);
        if (m)
            am_restore_checked(z, xi, m, s.tok, info.n_tokens, info.has_point, "verify");
        sb_match_release(m);
        done++;
    }
}

void am_after_op(am *z)
{
    bool fault = z->fault;
    z->fault = false; /* (an armed fault is for the next operation) */
    int rc = sb_store_check(z->st);
    AM_CHECK(z, rc == SB_OK, "sb_store_check: %s", sb_strerror(rc));
    sb_stats s;
    am_stats(z, &s);
    check_stats(z, &s);
    am_update_drops(z, &s);

    /* Held matches restore what they held; held pages keep their bytes;
     * live pins keep their prefix restorable. */
    for (int i = 0; i < z->n_match; i++) {
        am_match *hm = &z->match[i];
        rc = am_restore_checked(z, hm->xi, hm->m, hm->req.tok, hm->L, hm->has_point,
                                "held match");
        if (rc == SB_ERR_CORRUPT || rc == SB_ERR_IO) {
            sb_match_info info;
            AM_CHECK(z, sb_match_get_info(hm->m, &info) == SB_OK, "sb_match_get_info");
            hm->L = info.n_tokens;
            hm->has_point = info.has_point;
        }
    }
    for (int i = 0; i < z->n_page; i++) {
        am_page *hp = &z->page[i];
        AM_CHECK(z, am_page_ok(z, &z->ns[hp->xi], hp->p, hp->pre.tok, hp->region, hp->kv),
                 "held page of region %u of %s changed its bytes", hp->region,
                 AM_S(hp->pre.tok, hp->pre.n));
    }
    for (int i = 0; i < z->n_pin; i++) {
        am_pin *p = &z->pin[i];
        if (!am_pin_live(z, p))
            continue;
        sb_match_info info;
        sb_match *m = am_match_checked(z, p->xi, &p->s, p->s.n, &info);
        sb_match_release(m);
        if (m)
            AM_CHECK(z, info.n_tokens >= p->L0,
                     "pinned %s (restorable %zu when pinned) restores %zu",
                     AM_S(p->s.tok, p->s.n), p->L0, info.n_tokens);
    }
    /* Followed tickets: their answers move one way only. */
    if (z->io)
        for (int i = 0; i < z->n_tk; i++) {
            rc = sb_store_is_durable(z->st, z->tk[i].t);
            am_ticket_answer(z, &z->tk[i], rc, "is_durable");
        }
    am_stats(z, &z->last);
    z->fault = fault;
}
