/* fuzz_index_model.c -- the index fuzzer's reference model and checks:
 * input decoding, the synthetic state every byte is verified against, what
 * the model allows a match to return, held matches and pages, and the
 * checks after every operation (fuzz_index.c states the property). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_index.h"

/* The token IDs a vocabulary draws from, in order: the extremes of uint32
 * and a few in between, so child arrays sort and search over all of them. */
static const uint32_t fz_ids[5] = { 0, UINT32_MAX, 1, 1000, 7 };

/* ---- failure ------------------------------------------------------------- */

void fz_fail(fz *z, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "fuzz_index: op %u (%s): ", z->op_no, z->op_name ? z->op_name : "setup");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fprintf(stderr, "fuzz_index: evictions so far: %s\n", z->evicted ? "yes" : "none");
    for (int i = 0; i < z->n_ns; i++) {
        if (!z->ns[i].h)
            continue;
        fprintf(stderr, "namespace %d (page_tokens %u, %s):\n", i, z->ns[i].pt,
                z->ns[i].required ? "point required"
                                  : z->ns[i].point_bytes ? "points" : "no points");
        sb_ns_dump(z->ns[i].h, stderr);
    }
    abort();
}


/* Tokens as letters: the vocabulary index of each ID ("abcde"). */
const char *fz_str(const uint32_t *tok, size_t n, char *buf, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 2 < cap; i++) {
        char c = '?';
        for (int v = 0; v < 5; v++)
            if (fz_ids[v] == tok[i])
                c = (char)('a' + v);
        buf[o++] = c;
    }
    buf[o] = 0;
    return buf;
}


/* ---- input --------------------------------------------------------------- */

uint8_t fz_rd(fz *z)
{
    return z->pos < z->n_in ? z->in[z->pos++] : 0;
}

int fz_rd_ns(fz *z)
{
    return fz_rd(z) % z->n_ns;
}

static void remember(fz_ns *x, const fz_seq *s)
{
    x->recent[x->recent_next] = *s;
    x->recent_next = (x->recent_next + 1) % FZ_RECENT;
    if (x->n_recent < FZ_RECENT)
        x->n_recent++;
}

static uint32_t rd_tok(fz *z, const fz_ns *x)
{
    return fz_ids[fz_rd(z) % x->vocab];
}

/* SEQ (see the format at the top). */
void fz_rd_seq(fz *z, fz_ns *x, fz_seq *s)
{
    uint8_t b = fz_rd(z);
    uint32_t len = 1 + (b & 31u);
    s->n = 0;
    if ((b >> 5) >= 5 && x->n_recent) {
        const fz_seq *base = &x->recent[fz_rd(z) % x->n_recent];
        uint32_t keep = len < base->n ? len : base->n;
        memcpy(s->tok, base->tok, keep * sizeof *s->tok);
        s->n = keep;
        len = fz_rd(z) % 8;
    }
    while (len-- && s->n < FZ_MAX_SEQ)
        s->tok[s->n++] = rd_tok(z, x);
    remember(x, s);
}

/* ---- synthetic state ----------------------------------------------------- */

static uint64_t fz_mix(uint64_t *s)
{
    uint64_t v = (*s += 0x9E3779B97F4A7C15ull);
    v = (v ^ (v >> 30)) * 0xBF58476D1CE4E5B9ull;
    v = (v ^ (v >> 27)) * 0x94D049BB133111EBull;
    return v ^ (v >> 31);
}

/* h[i] is a digest of tokens[0, i) and the namespace: h[0] = seed, and the
 * state of token i is drawn from h[i + 1]. */
void fz_chain(const fz_ns *x, const uint32_t *tok, size_t n, uint64_t *h)
{
    h[0] = x->seed;
    for (size_t i = 0; i < n; i++) {
        uint64_t s = h[i] ^ ((uint64_t)tok[i] * 0xD6E8FEB86659FD93ull) ^ i;
        h[i + 1] = fz_mix(&s);
    }
}

static void fz_bytes(uint8_t *dst, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = fz_mix(&seed);
        memcpy(dst + i, &v, n - i < 8 ? n - i : 8);
    }
}

/* The slice of token i of tensor t. */
static void fz_slice(const fz_ns *x, const uint64_t *h, size_t i, uint32_t t, uint8_t *dst)
{
    fz_bytes(dst, x->bpt[t], h[i + 1] ^ (0xA24BAED4963EE407ull * (t + 1)));
}

/* The point state at position n. */
void fz_point(const fz_ns *x, const uint64_t *h, size_t n, uint8_t *dst)
{
    fz_bytes(dst, x->point_bytes, h[n] ^ 0x706f696e74ull ^ ((uint64_t)n << 48));
}

/* State of tokens[0, n) into z->buf, laid out as sb_ns_put wants it. */
void fz_fill_buf(fz *z, const fz_ns *x, const uint32_t *tok, size_t n)
{
    uint64_t h[FZ_MAX_SEQ + 1];
    fz_chain(x, tok, n, h);
    for (size_t i = 0; i < n; i++)
        for (uint32_t t = 0; t < x->n_tensors; t++)
            fz_slice(x, h, i, t, z->buf[t] + i * x->bpt[t]);
}

/* Do bufs (as sb_match_restore fills them) hold the state of tokens[0, n)?
 * Returns the first bad token, or n when all are right. */
static size_t fz_bad_token(const fz_ns *x, const uint32_t *tok, size_t n,
                           uint8_t (*bufs)[FZ_MAX_SEQ * FZ_MAX_BPT + 64])
{
    uint64_t h[FZ_MAX_SEQ + 1];
    uint8_t want[FZ_MAX_BPT];
    fz_chain(x, tok, n, h);
    for (size_t i = 0; i < n; i++)
        for (uint32_t t = 0; t < x->n_tensors; t++) {
            fz_slice(x, h, i, t, want);
            if (memcmp(want, bufs[t] + i * x->bpt[t], x->bpt[t]))
                return i;
        }
    return n;
}

uint32_t fz_region_tokens(const fz_ns *x, size_t n, size_t r)
{
    size_t rest = n - r * x->pt;
    return rest < x->pt ? (uint32_t)rest : x->pt;
}

size_t fz_regions(const fz_ns *x, size_t n)
{
    return (n + x->pt - 1) / x->pt;
}

/* Write the state of token slices [from, to) of region r of tok into p. */
void fz_fill_page(const fz_ns *x, sb_page *p, const uint32_t *tok, size_t r,
                         uint32_t from, uint32_t to)
{
    uint64_t h[FZ_MAX_SEQ + 1];
    size_t first = r * x->pt;
    fz_chain(x, tok, first + to, h);
    uint8_t *d = sb_page_data(p);
    for (uint32_t j = from; j < to; j++)
        for (uint32_t t = 0; t < x->n_tensors; t++)
            fz_slice(x, h, first + j, t, d + x->off[t] + (size_t)j * x->bpt[t]);
}

/* Do slices [0, k) of page p hold the state of region r of tok? */
bool fz_page_ok(const fz_ns *x, sb_page *p, const uint32_t *tok, size_t r, uint32_t k)
{
    uint64_t h[FZ_MAX_SEQ + 1];
    uint8_t want[FZ_MAX_BPT];
    size_t first = r * x->pt;
    fz_chain(x, tok, first + k, h);
    const uint8_t *d = sb_page_data(p);
    for (uint32_t j = 0; j < k; j++)
        for (uint32_t t = 0; t < x->n_tensors; t++) {
            fz_slice(x, h, first + j, t, want);
            if (memcmp(want, d + x->off[t] + (size_t)j * x->bpt[t], x->bpt[t]))
                return false;
        }
    return true;
}

/* ---- the model ------------------------------------------------------------ */

size_t fz_lcp(const uint32_t *a, size_t na, const uint32_t *b, size_t nb)
{
    size_t n = na < nb ? na : nb, i = 0;
    while (i < n && a[i] == b[i])
        i++;
    return i;
}

/* Longest prefix of tok[0, n) that some stored sequence shares. */
size_t fz_model_lcp(const fz_ns *x, const uint32_t *tok, size_t n)
{
    size_t best = 0;
    for (size_t i = 0; i < x->n_model && best < n; i++) {
        size_t c = fz_lcp(x->model[i].s.tok, x->model[i].s.n, tok, n);
        if (c > best)
            best = c;
    }
    return best;
}

/* Was a point state stored at position p of the prefix tok[0, p)? */
static bool model_point_at(const fz_ns *x, const uint32_t *tok, size_t n, size_t p)
{
    if (p == 0 || p > n)
        return false;
    for (size_t i = 0; i < x->n_model; i++) {
        const fz_entry *e = &x->model[i];
        if (e->point && e->s.n == p && fz_lcp(e->s.tok, e->s.n, tok, n) >= p)
            return true;
    }
    return false;
}

/* Longest p <= n with a stored point state at p of tok's prefix; 0 if none. */
static size_t model_point_bound(const fz_ns *x, const uint32_t *tok, size_t n)
{
    size_t best = 0;
    for (size_t i = 0; i < x->n_model; i++) {
        const fz_entry *e = &x->model[i];
        if (e->point && e->s.n <= n && e->s.n > best &&
            fz_lcp(e->s.tok, e->s.n, tok, n) >= e->s.n)
            best = e->s.n;
    }
    return best;
}

void fz_model_add(fz *z, fz_ns *x, const uint32_t *tok, size_t n, bool point)
{
    for (size_t i = 0; i < x->n_model; i++) {
        fz_entry *e = &x->model[i];
        if (e->s.n == n && e->point == point && !memcmp(e->s.tok, tok, n * sizeof *tok))
            return;
    }
    if (x->n_model == x->cap_model) {
        size_t cap = x->cap_model ? 2 * x->cap_model : 16;
        fz_entry *m = realloc(x->model, cap * sizeof *m);
        FZ_CHECK(z, m, "out of memory (model)");
        x->model = m;
        x->cap_model = cap;
    }
    fz_entry *e = &x->model[x->n_model++];
    e->s.n = (uint32_t)n;
    memcpy(e->s.tok, tok, n * sizeof *tok);
    e->point = point;
}

/* Could pages pages and points point states of x fit into an empty store? */
bool fz_fits(const fz *z, const fz_ns *x, uint64_t pages, uint64_t points)
{
    uint64_t bytes = pages * x->page_bytes + points * x->point_bytes;
    return pages <= z->cfg.ram_pages && bytes <= z->cfg.ram_bytes &&
           bytes <= z->cfg.ns_ram_bytes;
}

bool fz_pin_live(const fz *z, const fz_pin *p)
{
    return p->expiry_ns == 0 || z->now_ns < p->expiry_ns;
}

/* Nothing held outside the index: no match, page reference or live pin. */
bool fz_nothing_held(const fz *z)
{
    if (z->n_match || z->n_page)
        return false;
    for (int i = 0; i < z->n_pin; i++)
        if (fz_pin_live(z, &z->pin[i]))
            return false;
    return true;
}

void fz_stats(fz *z, sb_stats *s)
{
    FZ_CHECK(z, sb_store_stats(z->st, s) == SB_OK, "sb_store_stats failed");
    if (s->evictions || s->point_evictions)
        z->evicted = true;
}

/* Arm the allocation fault CLOCK asked for, around one library call. The
 * caller then accepts SB_ERR_NOMEM. Returns whether one was armed. */
bool fz_fault_arm(fz *z)
{
    if (!z->fault_nth)
        return false;
    FZ_CHECK(z, sb_store_fault_alloc(z->st, z->fault_nth) == SB_OK, "sb_store_fault_alloc");
    return true;
}

/* Disarm it (it may not have fired): one call per operation gets it. */
void fz_fault_disarm(fz *z)
{
    if (!z->fault_nth)
        return;
    FZ_CHECK(z, sb_store_fault_alloc(z->st, 0) == SB_OK, "sb_store_fault_alloc");
    z->fault_nth = 0;
}

/* ---- matches -------------------------------------------------------------- */

/* Restore n tokens (and the point when with_point) of match m on tok and
 * check every byte. */
void fz_check_restore(fz *z, const fz_ns *x, sb_match *m, const uint32_t *tok,
                          size_t n, bool with_point, const char *what)
{
    void *dst[FZ_MAX_TENSORS];
    uint8_t pt[FZ_MAX_POINT];
    for (uint32_t t = 0; t < x->n_tensors; t++) {
        memset(z->out[t], 0xEE, sizeof z->out[t]);
        dst[t] = z->out[t];
    }
    int rc = sb_match_restore(m, n, dst, with_point ? pt : NULL);
    FZ_CHECK(z, rc == SB_OK, "%s: restore of %zu tokens of %s: %s", what, n, FZ_S(tok, n),
             sb_strerror(rc));
    size_t bad = fz_bad_token(x, tok, n, z->out);
    FZ_CHECK(z, bad == n, "%s: restore of %s: token %zu holds the wrong state", what,
             FZ_S(tok, n), bad);
    for (uint32_t t = 0; t < x->n_tensors; t++)
        FZ_CHECK(z, z->out[t][n * x->bpt[t]] == 0xEE,
                 "%s: restore of %zu tokens wrote past them", what, n);
    if (with_point) {
        uint64_t h[FZ_MAX_SEQ + 1];
        uint8_t want[FZ_MAX_POINT];
        fz_chain(x, tok, n, h);
        fz_point(x, h, n, want);
        FZ_CHECK(z, !memcmp(want, pt, x->point_bytes), "%s: point state at %zu of %s is wrong",
                 what, n, FZ_S(tok, n));
        const void *p = sb_match_point(m);
        FZ_CHECK(z, p && !memcmp(want, p, x->point_bytes),
                 "%s: sb_match_point at %zu of %s is wrong", what, n, FZ_S(tok, n));
    }
}

/* Match tok[0, n) of s on namespace xi and check the answer against the
 * model (P2, P3). Returns the match (the caller releases it), or NULL when
 * n is over max_seq_tokens or an injected allocation failure hit (then
 * *info is zeroed). */
sb_match *fz_match_checked(fz *z, int xi, const fz_seq *s, size_t n, sb_match_info *info)
{
    fz_ns *x = &z->ns[xi];
    const uint32_t *tok = s->tok;
    sb_match *m = (sb_match *)&m; /* must be overwritten */
    sb_stats s0;
    fz_stats(z, &s0);
    bool armed = fz_fault_arm(z);
    int rc = sb_ns_match(x->h, tok, n, &m);
    fz_fault_disarm(z);
    memset(info, 0, sizeof *info);
    if (n > z->cfg.max_seq_tokens) {
        FZ_CHECK(z, rc == SB_ERR_TOO_MANY_TOKENS && !m, "match of %zu tokens over the limit: %s",
                 n, sb_strerror(rc));
        return NULL;
    }
    if (armed && rc == SB_ERR_NOMEM) {
        FZ_CHECK(z, !m, "failed match left a handle");
        return NULL;
    }
    FZ_CHECK(z, rc == SB_OK && m, "match of %s: %s", FZ_S(tok, n), sb_strerror(rc));
    FZ_CHECK(z, sb_match_get_info(m, info) == SB_OK, "sb_match_get_info failed");
    sb_stats s1;
    fz_stats(z, &s1);

    size_t L = info->n_tokens, M = info->n_matched_tokens;
    /* The lookup counters move by exactly this lookup. */
    int why = info->miss;
    FZ_CHECK(z, why >= 0 && why < SB_MISS__COUNT, "miss %d out of range", why);
    FZ_CHECK(z, s1.lookups == s0.lookups + 1 && s1.hits == s0.hits + (L > 0) &&
                    s1.hit_tokens == s0.hit_tokens + L &&
                    s1.miss_tokens == s0.miss_tokens + (n - L) &&
                    s1.misses[why] == s0.misses[why] + (L == 0) &&
                    s1.miss_tokens_by_reason[why] == s0.miss_tokens_by_reason[why] + (n - L),
             "match of %s: lookup counters moved wrong (L %zu of %zu, miss %s)",
             FZ_S(tok, n), L, n, sb_miss_name(why));
    size_t bound = fz_model_lcp(x, tok, n);
    const char *q = FZ_S(tok, n);
    FZ_CHECK(z, L <= M && M <= n, "match of %s: L %zu, matched %zu", q, L, M);
    FZ_CHECK(z, info->n_pages == fz_regions(x, L) && info->n_pages_ram == info->n_pages &&
                    info->n_pages_disk == 0,
             "match of %s: L %zu with %zu pages (%zu in RAM)", q, L, info->n_pages,
             info->n_pages_ram);
    FZ_CHECK(z, M <= bound, "match of %s: matched %zu tokens, but no stored sequence shares "
             "more than %zu", q, M, bound);
    if (x->required) {
        FZ_CHECK(z, L == 0 || model_point_at(x, tok, n, L),
                 "match of %s: L %zu, but no point state was ever stored there", q, L);
        FZ_CHECK(z, (L > 0) == (info->has_point != 0),
                 "match of %s: point-required L %zu with has_point %d", q, L, info->has_point);
    } else {
        FZ_CHECK(z, L == M, "match of %s: L %zu below matched %zu without a point rule", q, L,
                 M);
    }
    if (info->has_point)
        FZ_CHECK(z, model_point_at(x, tok, n, L),
                 "match of %s: has a point at %zu, none was stored there", q, L);
    else
        FZ_CHECK(z, sb_match_point(m) == NULL, "match of %s: sb_match_point without has_point",
                 q);
    if (!z->evicted) {
        FZ_CHECK(z, M == bound, "match of %s: matched %zu tokens, the model says %zu "
                 "(nothing evicted)", q, M, bound);
        if (x->required) {
            size_t pb = model_point_bound(x, tok, n);
            FZ_CHECK(z, L == pb, "match of %s: L %zu, the model says %zu (nothing evicted)", q,
                     L, pb);
        } else if (x->point_bytes) {
            FZ_CHECK(z, (info->has_point != 0) == model_point_at(x, tok, n, L),
                     "match of %s: has_point %d at %zu, the model disagrees (nothing "
                     "evicted)", q, info->has_point, L);
        }
    }

    /* The miss reason (best effort, but these follow from the definitions). */
    int miss = info->miss;
    bool other = false; /* a namespace of the same scope holds a prefix */
    for (int i = 0; i < z->n_ns; i++)
        if (i != xi && z->ns[i].scope_bytes == x->scope_bytes &&
            !memcmp(z->ns[i].scope, x->scope, x->scope_bytes) &&
            fz_model_lcp(&z->ns[i], tok, n) > 0)
            other = true;
    FZ_CHECK(z, (miss == SB_MISS_NONE) == (L == n), "match of %s: L %zu/%zu, miss %s", q, L, n,
             sb_miss_name(miss));
    FZ_CHECK(z, (miss == SB_MISS_NO_POINT) == (L < n && M > L),
             "match of %s: L %zu, matched %zu, miss %s", q, L, M, sb_miss_name(miss));
    FZ_CHECK(z, miss != SB_MISS_MODEL_MISMATCH || (L == 0 && other),
             "match of %s: model_mismatch, but no other model of the scope holds it", q);
    FZ_CHECK(z, miss != SB_MISS_EVICTED || z->evicted,
             "match of %s: miss evicted, but nothing was ever evicted", q);
    FZ_CHECK(z, miss == SB_MISS_NONE || miss == SB_MISS_NO_PREFIX || miss == SB_MISS_EVICTED ||
                    miss == SB_MISS_NO_POINT || miss == SB_MISS_MODEL_MISMATCH,
             "match of %s: miss %d from a RAM-only store", q, miss);
    if (!z->evicted && L < n && M == L)
        FZ_CHECK(z, miss == (L == 0 && other ? SB_MISS_MODEL_MISMATCH : SB_MISS_NO_PREFIX),
                 "match of %s: L %zu, miss %s (nothing evicted, other model %d)", q, L,
                 sb_miss_name(miss), other);

    /* The bytes, and the error paths of restore. */
    fz_check_restore(z, x, m, tok, L, info->has_point, "match");
    void *dst[FZ_MAX_TENSORS];
    for (uint32_t t = 0; t < x->n_tensors; t++)
        dst[t] = z->out[t];
    uint8_t pt[FZ_MAX_POINT];
    rc = sb_match_restore(m, L + 1, dst, NULL);
    FZ_CHECK(z, rc == SB_ERR_RANGE, "restore of L + 1 tokens: %s", sb_strerror(rc));
    if (x->point_bytes && !info->has_point) {
        rc = sb_match_restore(m, L, dst, pt);
        FZ_CHECK(z, rc == SB_ERR_NO_POINT, "restore with a point of a match without one: %s",
                 sb_strerror(rc));
    }
    if (info->has_point && L > 0) {
        rc = sb_match_restore(m, L - 1, dst, pt);
        FZ_CHECK(z, rc == SB_ERR_NO_POINT, "restore with a point short of L: %s",
                 sb_strerror(rc));
    }
    return m;
}

/* Match and release: the restorable length of tok[0, n). */
size_t fz_match_len(fz *z, int xi, const fz_seq *s, size_t n, sb_match_info *info)
{
    sb_match *m = fz_match_checked(z, xi, s, n, info);
    sb_match_release(m);
    return m ? info->n_tokens : 0;
}

void fz_hold_match(fz *z, sb_match *m, int xi, const fz_seq *s, size_t n,
                       const sb_match_info *info)
{
    if (z->n_match == FZ_MATCHES) {
        sb_match_release(z->match[0].m);
        memmove(&z->match[0], &z->match[1], (FZ_MATCHES - 1) * sizeof z->match[0]);
        z->n_match--;
    }
    fz_match *fm = &z->match[z->n_match++];
    fm->m = m;
    fm->xi = xi;
    fm->req = *s;
    fm->req.n = (uint32_t)n;
    fm->L = info->n_tokens;
    fm->has_point = info->has_point != 0;
}

void fz_drop_match(fz *z, int i)
{
    sb_match_release(z->match[i].m);
    memmove(&z->match[i], &z->match[i + 1], (size_t)(z->n_match - i - 1) * sizeof z->match[0]);
    z->n_match--;
}

/* ---- held pages ----------------------------------------------------------- */

void fz_drop_page(fz *z, int i)
{
    sb_page_unref(z->page[i].p);
    memmove(&z->page[i], &z->page[i + 1], (size_t)(z->n_page - i - 1) * sizeof z->page[0]);
    z->n_page--;
}

/* Hold reference p (the caller's reference moves to the list). */
void fz_hold_page(fz *z, sb_page *p, int xi, bool committed, uint32_t region, uint32_t kv,
                      const uint32_t *tok)
{
    if (z->n_page == FZ_PAGES)
        fz_drop_page(z, 0);
    fz_page *hp = &z->page[z->n_page++];
    const fz_ns *x = &z->ns[xi];
    hp->p = p;
    hp->xi = xi;
    hp->committed = committed;
    hp->region = region;
    hp->kv = kv;
    hp->pre.n = region * x->pt + kv;
    if (tok)
        memcpy(hp->pre.tok, tok, hp->pre.n * sizeof *tok);
}

void fz_check_held_page(fz *z, const fz_page *hp, const char *what)
{
    const fz_ns *x = &z->ns[hp->xi];
    uint32_t k = sb_page_tokens(hp->p);
    if (hp->committed)
        FZ_CHECK(z, k >= hp->kv && k > 0 && k <= x->pt,
                 "%s: committed page of region %u holds %u tokens, %u known", what, hp->region,
                 k, hp->kv);
    else
        FZ_CHECK(z, k == 0, "%s: fresh page holds %u committed tokens", what, k);
    FZ_CHECK(z, fz_page_ok(x, hp->p, hp->pre.tok, hp->region, hp->kv),
             "%s: page of region %u of %s changed its bytes", what, hp->region,
             FZ_S(hp->pre.tok, hp->pre.n));
}


/* ---- after every operation ------------------------------------------------ */

void fz_after_op(fz *z)
{
    /* A fault CLOCK armed is for the next operation, not for these checks. */
    uint8_t fault_nth = z->fault_nth;
    z->fault_nth = 0;
    int rc = sb_store_check(z->st);
    FZ_CHECK(z, rc == SB_OK, "sb_store_check: %s", sb_strerror(rc));
    sb_stats s;
    fz_stats(z, &s);

    /* P1: budgets. */
    FZ_CHECK(z, s.ram_bytes <= z->cfg.ram_bytes && s.ram_pages <= z->cfg.ram_pages,
             "over budget: %" PRIu64 " bytes, %" PRIu64 " pages", s.ram_bytes, s.ram_pages);
    FZ_CHECK(z, s.ram_bytes_limit == z->cfg.ram_bytes && s.ram_pages_limit == z->cfg.ram_pages,
             "stats report other limits");
    uint64_t ns_bytes = 0, ns_pages = 0, ns_tokens = 0;
    for (int i = 0; i < z->n_ns; i++) {
        sb_ns_info info;
        FZ_CHECK(z, sb_ns_get_info(z->ns[i].h, &info) == SB_OK, "sb_ns_get_info failed");
        FZ_CHECK(z, info.ram_bytes <= z->cfg.ns_ram_bytes,
                 "namespace %d over its budget: %" PRIu64 " bytes", i, info.ram_bytes);
        ns_bytes += info.ram_bytes;
        ns_pages += info.indexed_pages;
        ns_tokens += info.index_tokens;
    }
    FZ_CHECK(z, s.namespaces == (uint64_t)z->n_ns, "%" PRIu64 " namespaces, %d open",
             s.namespaces, z->n_ns);
    FZ_CHECK(z, ns_bytes == s.ram_bytes && ns_pages == s.indexed_pages &&
                    ns_tokens == s.index_tokens,
             "namespaces' bytes, pages and tokens do not add up to the store's");
    FZ_CHECK(z, s.ram_pages >= s.indexed_pages && s.indexed_pages >= s.pinned_pages,
             "ram_pages %" PRIu64 " < indexed %" PRIu64 " or pinned %" PRIu64 " above it",
             s.ram_pages, s.indexed_pages, s.pinned_pages);

    /* Pins: the store's count is the live ones (stats expire the rest). */
    uint64_t live = 0;
    for (int i = 0; i < z->n_pin; i++)
        live += fz_pin_live(z, &z->pin[i]);
    FZ_CHECK(z, s.pins == live, "%" PRIu64 " pins, %" PRIu64 " live", s.pins, live);

    /* Counters only grow. */
    const sb_stats *o = &z->last;
    FZ_CHECK(z, s.lookups >= o->lookups && s.hits >= o->hits && s.puts >= o->puts &&
                    s.commits >= o->commits && s.pages_new >= o->pages_new &&
                    s.evictions >= o->evictions && s.point_evictions >= o->point_evictions &&
                    s.budget_denials >= o->budget_denials && s.cow_copies >= o->cow_copies &&
                    s.pages_dedup >= o->pages_dedup && s.hit_tokens >= o->hit_tokens &&
                    s.miss_tokens >= o->miss_tokens,
             "a counter went backwards");
    FZ_CHECK(z, s.hits == s.hits_ram && s.hits_disk == 0 && s.misses[SB_MISS_NONE] == 0,
             "hit counters inconsistent");

    /* P6: nothing held outside the index, every allocated byte is indexed. */
    if (fz_nothing_held(z))
        FZ_CHECK(z, s.pinned_pages == 0 && s.ram_pages == s.indexed_pages &&
                        s.ram_bytes == s.indexed_bytes + s.point_bytes,
                 "nothing held, yet %" PRIu64 " pages / %" PRIu64 " bytes allocated for %" PRIu64
                 " indexed pages / %" PRIu64 " bytes (%" PRIu64 " pinned)",
                 s.ram_pages, s.ram_bytes, s.indexed_pages, s.indexed_bytes + s.point_bytes,
                 s.pinned_pages);
    z->last = s;

    /* P4: held matches, held pages, live pins. */
    for (int i = 0; i < z->n_match; i++) {
        fz_match *fm = &z->match[i];
        fz_check_restore(z, &z->ns[fm->xi], fm->m, fm->req.tok, fm->L, fm->has_point,
                      "held match");
    }
    for (int i = 0; i < z->n_page; i++)
        fz_check_held_page(z, &z->page[i], "held page");
    for (int i = 0; i < z->n_pin; i++) {
        fz_pin *p = &z->pin[i];
        if (!fz_pin_live(z, p))
            continue;
        sb_match_info info;
        size_t L = fz_match_len(z, p->xi, &p->s, p->s.n, &info);
        FZ_CHECK(z, L >= p->L0, "pinned %s (restorable %zu when pinned) restores %zu",
                 FZ_S(p->s.tok, p->s.n), p->L0, L);
    }
    z->fault_nth = fault_nth;
}
