/* rtier.c -- the shared tier as the RAM index sees it (store/core/shared.h):
 * the hook table over the pool of remote.h, and its constructor.
 *
 * Publishing crosses two locks, never both at once. An offer comes from a
 * commit under st->mu and must not wait: it takes a reference on the
 * page, copies its tokens into a pending list (guarded by st->mu) and
 * returns. The commit's caller, once it has let go of st->mu, kicks:
 * the pending list is taken under st->mu and handed to sb_remote_offer
 * unlocked. The pool releases every page it was handed exactly once (from
 * its publisher thread, or at once when its queue is full, or at close),
 * always without holding its own lock; the release takes st->mu and drops
 * the reference. So a page waiting to be published stays resident (a page
 * held by anyone but the index is never evicted) and the lock order is
 * st->mu, then the pool's mutex, only ever in that order.
 *
 * A page the pool's queue has no room for (its offer denied) waits: the
 * kick marks it SB_SHARED_WAITING (shared.h), holding nothing, so it may
 * be evicted like any page. It is offered again by a later commit through
 * it, or by a sweep of the index -- when the publisher says its queue has
 * drained to half (the room callback) and at a flush -- that offers the
 * waiting pages still resident, as many as the queue has room for. So a
 * sequence longer than the queue is published whole, the queue's bound
 * holding, as long as its pages stay in RAM; a page that leaves RAM first
 * is not published (it stays counted in shared_denied, not requeued).
 *
 * A removal (sb_ns_remove) forgets: offers not yet kicked whose page left
 * the index are dropped here, the pool drops those it queues and deletes
 * the keys (rt_forget, sb_remote_forget), and the publisher asks each
 * page whether it is still indexed before it publishes it (live_page).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "host.h"
#include "internal.h"
#include "remote.h"
#include "rtier.h"
#include "seal.h"
#include "shared.h"

typedef struct pend {
    sb_blk *b;          /* one reference, dropped by release */
    sb_remote_page pg;  /* tokens: the copy below */
    uint32_t *tokens;   /* (page_tokens) owned */
    bool denied;        /* the pool's queue had no room for it */
} pend;

typedef struct rtier {
    sb_remote *r;
    sb_store *st;       /* [const] */
    uint64_t queue;     /* [const] the pool's queue bound, bytes */
    uint64_t waiting;   /* [st->mu] pages marked waiting since a sweep
                           last found none left: whether to sweep */
    uint64_t requeued;  /* [st->mu] waiting pages a sweep offered again */
    pend *pend;         /* [st->mu] offered, not yet handed to r */
    size_t n_pend, cap_pend;
    uint64_t lost;      /* [st->mu] offers dropped here: no memory */
    uint64_t fetched_pages, fetched_bytes; /* [st->mu] added by rt_extend */
    uint64_t forget_lost;  /* [st->mu] keys of removed pages not deleted:
                              no memory to collect or send them */
} rtier;

static rtier *tier_of(const sb_store *st)
{
    return st->shared.state;
}

static sb_remote_ns remote_ns(const sb_ns *ns)
{
    return (sb_remote_ns){ .ns_id = ns->id, .scope_tag = ns->scope_hash,
                           .page_tokens = ns->page_tokens,
                           .page_bytes = (uint32_t)ns->page_bytes,
                           .elem16 = (ns->flags & SB_LAYOUT_ELEM16) != 0 };
}

/* The pool is done with page ctx: drop the reference its offer took. */
static void release_page(void *ctx)
{
    sb_blk *b = ctx;
    sb_ns *ns = b->ns;
    sb_store *st = ns->st;
    pthread_mutex_lock(&st->mu);
    sb_host_blk_unref(b);
    sb_host_ns_maybe_free(ns);
    pthread_mutex_unlock(&st->mu);
}

/* Is page ctx still to be published: still indexed (a removal takes it
 * out; a page waiting to be published is held, so nothing else does)? */
static bool live_page(void *ctx)
{
    sb_blk *b = ctx;
    sb_store *st = b->ns->st;
    pthread_mutex_lock(&st->mu);
    bool live = b->indexed;
    pthread_mutex_unlock(&st->mu);
    return live;
}

/* [mu] */
static void rt_offer(sb_store *st, sb_ns *ns, sb_blk *b, const uint32_t *tokens)
{
    rtier *t = tier_of(st);
    if (t->n_pend == t->cap_pend) {
        size_t cap = t->cap_pend ? 2 * t->cap_pend : 64;
        pend *p = realloc(t->pend, cap * sizeof *p);
        if (!p) {
            t->lost++;
            return;
        }
        t->pend = p;
        t->cap_pend = cap;
    }
    uint32_t *tok = malloc(4 * (size_t)ns->page_tokens);
    if (!tok) {
        t->lost++;
        return;
    }
    memcpy(tok, tokens, 4 * (size_t)ns->page_tokens);
    sb_host_blk_ref(b);
    pend *p = &t->pend[t->n_pend++];
    p->b = b;
    p->tokens = tok;
    p->pg = (sb_remote_page){ .ns = remote_ns(ns), .key = { b->key.lo, b->key.hi },
                              .parent_key = { b->parent_key.lo, b->parent_key.hi },
                              .position = b->region * ns->page_tokens, .tokens = tok,
                              .data = b->data, .release = release_page, .live = live_page,
                              .ctx = b };
}

/* Unlocked: hand the pending offers to the pool. Each page is held by one
 * more reference across its offer, so a denied one can be marked waiting
 * afterwards (if nothing removed it meanwhile; a page larger than the
 * whole queue never fits, and is not). */
static void rt_kick(sb_store *st)
{
    rtier *t = tier_of(st);
    pthread_mutex_lock(&st->mu);
    pend *list = t->pend;
    size_t n = t->n_pend;
    t->pend = NULL;
    t->n_pend = t->cap_pend = 0;
    for (size_t i = 0; i < n; i++)
        sb_host_blk_ref(list[i].b);
    pthread_mutex_unlock(&st->mu);
    if (!n) {
        free(list);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        /* released now or later */
        list[i].denied = sb_remote_offer(t->r, &list[i].pg) == SB_ERR_BUDGET;
        free(list[i].tokens);
    }
    pthread_mutex_lock(&st->mu);
    for (size_t i = 0; i < n; i++) {
        sb_blk *b = list[i].b;
        sb_ns *ns = b->ns;
        if (list[i].denied && b->indexed && sb_host_blk_shared(b) == SB_SHARED_OFFERED &&
            b->bytes <= t->queue) {
            sb_host_blk_set_shared(b, SB_SHARED_WAITING);
            t->waiting++;
        }
        sb_host_blk_unref(b);
        sb_host_ns_maybe_free(ns);
    }
    pthread_mutex_unlock(&st->mu);
    free(list);
}

/* A sweep's walk: the waiting pages found resident, up to room bytes. */
typedef struct sweep_walk {
    sb_blk **got;
    size_t n_got, cap_got;
    uint64_t room, left;
    bool nomem;
} sweep_walk;

static void sweep_visit(void *ctx, sb_blk *b)
{
    sweep_walk *w = ctx;
    if (b->kind != SB_BLK_PAGE || sb_host_blk_shared(b) != SB_SHARED_WAITING || !b->data ||
        b->n_tokens != b->ns->page_tokens)
        return;
    if (b->bytes > w->room || w->nomem) {
        w->left++;
        return;
    }
    if (w->n_got == w->cap_got) {
        size_t cap = w->cap_got ? 2 * w->cap_got : 64;
        sb_blk **g = realloc(w->got, cap * sizeof *g);
        if (!g) {
            w->nomem = true;
            w->left++;
            return;
        }
        w->got = g;
        w->cap_got = cap;
    }
    w->got[w->n_got++] = b;
    w->room -= b->bytes;
}

/* [mu] Offer again (into the pending list: the caller kicks once it lets
 * go of mu) the waiting pages still resident, at most room bytes of them,
 * parents first. Returns how many; t->waiting becomes how many resident
 * ones are left waiting. */
static size_t sweep(rtier *t, uint64_t room)
{
    sb_store *st = t->st;
    sweep_walk w = { .room = room };
    size_t took = 0;
    uint32_t *tok = NULL;
    for (size_t i = 0; i < st->n_buckets; i++)
        for (sb_ns *ns = st->buckets[i]; ns; ns = ns->next) {
            if (ns->flags & SB_LAYOUT_POINT_REQUIRED)
                continue; /* never offered */
            w.n_got = 0;
            if (sb_host_index_visit(ns, sweep_visit, &w) != SB_OK)
                w.left++; /* not all visited: look again later */
            uint32_t pt = ns->page_tokens;
            uint32_t *nt = realloc(tok, 4 * (size_t)pt);
            if (!nt) {
                w.left += w.n_got;
                continue;
            }
            tok = nt;
            for (size_t k = 0; k < w.n_got; k++) {
                sb_blk *b = w.got[k];
                sb_host_index_tokens(b, b->region * pt, (b->region + 1) * pt, tok);
                sb_host_blk_set_shared(b, SB_SHARED_OFFERED);
                rt_offer(st, ns, b, tok);
                took++;
            }
        }
    free(tok);
    free(w.got);
    t->waiting = w.left;
    t->requeued += took;
    return took;
}

/* The pool's room callback (its publisher thread, no lock held): offer the
 * waiting pages again, as many as half the queue holds. */
static void rt_room(void *ctx)
{
    rtier *t = ctx;
    sb_store *st = t->st;
    pthread_mutex_lock(&st->mu);
    size_t took = t->waiting ? sweep(t, t->queue / 2) : 0;
    pthread_mutex_unlock(&st->mu);
    if (took)
        rt_kick(st);
}

/* Probe the pool for the n pages named by keys: the run it holds from
 * the first (*n_present). Returns as sb_remote_probe. */
static int probe(rtier *t, const sb_ns *ns, const sb_key *keys, size_t n, size_t *n_present,
                 sb_remote_fault_info *fi)
{
    uint64_t(*k)[2] = malloc(n * sizeof *k);
    if (!k)
        return SB_ERR_NOMEM;
    for (size_t i = 0; i < n; i++)
        k[i][0] = keys[i].lo, k[i][1] = keys[i].hi;
    sb_remote_ns rns = remote_ns(ns);
    int rc = sb_remote_probe_ex(t->r, &rns, (const uint64_t(*)[2])k, n, n_present, fi);
    free(k);
    return rc;
}

/* Fetch pages [0, n) (keys as in probe; the first chains from parent; page
 * i holds tokens[i * page_tokens ...] from position first_pos + i *
 * page_tokens) into pages[i]'s data, every value checked: the good run
 * from the first (*n_ok). Returns as sb_remote_fetch. */
static int fetch(rtier *t, const sb_ns *ns, const sb_key *parent, const sb_key *keys,
                 const uint32_t *tokens, uint32_t first_pos, size_t n, sb_blk **pages,
                 const sb_fetch_shared_opts *opts, size_t *n_ok, sb_remote_fault_info *fi)
{
    sb_remote_want *w = malloc(n * sizeof *w);
    if (!w)
        return SB_ERR_NOMEM;
    uint32_t pt = ns->page_tokens;
    for (size_t i = 0; i < n; i++) {
        const sb_key *pk = i ? &keys[i - 1] : parent;
        w[i] = (sb_remote_want){ .key = { keys[i].lo, keys[i].hi },
                                 .parent_key = { pk->lo, pk->hi },
                                 .position = first_pos + (uint32_t)i * pt,
                                 .tokens = tokens + i * pt, .dst = pages[i]->data };
    }
    sb_remote_ns rns = remote_ns(ns);
    sb_remote_fetch_opts ro = { 0 };
    if (opts)
        ro = (sb_remote_fetch_opts){ .stall_ms = opts->stall_ms, .max_ms = opts->max_ms,
                                     .page_recompute_ns = opts->recompute_s_per_token * 1e9 *
                                                          (double)pt };
    int rc = sb_remote_fetch_ex(t->r, &rns, w, n, &ro, n_ok, fi);
    free(w);
    return rc;
}

/* Unlocked: extend the index with the pages of tokens[0, n) the pool
 * holds past it (shared.h), step by step:
 *   1. Hold the index's run of the request's pages (r0 of them), so the
 *      prefix the new pages hang from stays while the network is asked;
 *      the first new page chains from the last of them.
 *   2. Compute the content keys of pages r0 .. from the tokens alone
 *      (the chain) and probe the pool: the run it holds from r0.
 *   3. A fresh page for each page of that run (the budgets may allow
 *      fewer: the run is cut there).
 *   4. Fetch the run into them, every value checked: the good run.
 *   5. Add the held pages and the good run to the index, as a copy-mode
 *      commit (offered to the disk tier like any commit; never offered
 *      back to the pool).
 *   6. Drop this call's references; publish what the add offered. */
static int rt_extend(sb_ns *ns, const uint32_t *tokens, size_t n,
                     const sb_fetch_shared_opts *opts, sb_fetch_shared_info *info,
                     size_t *n_added)
{
    sb_store *st = ns->st;
    rtier *t = tier_of(st);
    uint32_t pt = ns->page_tokens;
    size_t n_full = n / pt;
    sb_blk **pages = sb_host_malloc(st, n_full * sizeof *pages);
    sb_key *keys = sb_host_malloc(st, n_full * sizeof *keys);
    if (!pages || !keys) {
        sb_host_free(pages);
        sb_host_free(keys);
        return SB_ERR_NOMEM;
    }

    /* 1 */
    sb_key parent;
    pthread_mutex_lock(&st->mu);
    size_t r0 = sb_host_index_hold(ns, tokens, n, pages, &parent);
    pthread_mutex_unlock(&st->mu);

    /* 2 */
    size_t want = n_full - r0, present = 0, got = 0, good = 0;
    int rc = SB_OK;
    sb_key k = parent;
    for (size_t i = 0; i < want; i++) {
        k = sb_host_key_chain(&k, tokens + (r0 + i) * pt, pt);
        keys[i] = k;
    }
    sb_remote_fault_info fi = { 0 };
    if (want)
        rc = probe(t, ns, keys, want, &present, &fi);
    info->n_pages = (uint32_t)present;

    /* 3 */
    int arc = SB_OK;
    for (; got < present; got++)
        if ((arc = sb_host_blk_alloc(ns, SB_BLK_PAGE, &pages[r0 + got])) != SB_OK)
            break;

    /* 4 */
    if (got) {
        sb_remote_fault_info ff;
        int frc = fetch(t, ns, &parent, keys, tokens + r0 * pt, (uint32_t)(r0 * pt), got,
                        pages + r0, opts, &good, &ff);
        info->n_bad = ff.n_bad;
        if (ff.fault) /* what ended the fetch comes before the probe's end */
            fi = ff;
        if (frc != SB_OK && frc != SB_ERR_NOT_FOUND)
            rc = frc;
    }
    if (rc == SB_OK && arc != SB_OK)
        rc = arc;
    info->fault = fi.fault;
    memcpy(info->detail, fi.detail, sizeof info->detail);

    /* 5 */
    pthread_mutex_lock(&st->mu);
    if (good) {
        int crc = sb_host_index_add(ns, tokens, (r0 + good) * pt, pages, r0);
        if (crc == SB_OK) {
            t->fetched_pages += good;
            t->fetched_bytes += good * ns->page_bytes;
            *n_added = good * pt;
        } else if (crc == SB_ERR_NOMEM) {
            rc = SB_ERR_NOMEM;
        } /* else the prefix left the index meanwhile: nothing added */
    }
    /* 6 */
    for (size_t r = 0; r < r0 + got; r++)
        sb_host_blk_unref(pages[r]);
    pthread_mutex_unlock(&st->mu);
    rt_kick(st);
    sb_host_free(pages);
    sb_host_free(keys);
    return rc;
}

/* Unlocked: a removal took pages with keys[0, n) (full pages of ns) out
 * of the index. Offers not yet handed to the pool are dropped here (the
 * pool drops its queued ones and asks live_page before it publishes),
 * and the keys are deleted from the pool. */
static void rt_forget(sb_ns *ns, const sb_key *keys, size_t n, size_t lost)
{
    sb_store *st = ns->st;
    rtier *t = tier_of(st);
    pthread_mutex_lock(&st->mu);
    size_t k = 0;
    for (size_t i = 0; i < t->n_pend; i++) {
        pend *p = &t->pend[i];
        if (p->b->indexed) {
            t->pend[k++] = *p;
            continue;
        }
        sb_host_blk_unref(p->b);
        free(p->tokens);
    }
    t->n_pend = k;
    t->forget_lost += lost;
    pthread_mutex_unlock(&st->mu);
    if (!n)
        return;
    uint64_t(*k2)[2] = malloc(n * sizeof *k2);
    int rc = SB_ERR_NOMEM;
    if (k2) {
        for (size_t i = 0; i < n; i++)
            k2[i][0] = keys[i].lo, k2[i][1] = keys[i].hi;
        sb_remote_ns rns = remote_ns(ns);
        rc = sb_remote_forget(t->r, &rns, (const uint64_t(*)[2])k2, n);
        free(k2);
    }
    if (rc == SB_ERR_NOMEM) {
        pthread_mutex_lock(&st->mu);
        t->forget_lost += n;
        pthread_mutex_unlock(&st->mu);
    }
}

/* Unlocked: publish what was offered, the waiting pages still resident
 * included (a queue's worth at a time), until none is left. */
static void rt_flush(sb_store *st)
{
    rtier *t = tier_of(st);
    for (;;) {
        rt_kick(st);
        sb_remote_flush(t->r);
        pthread_mutex_lock(&st->mu);
        size_t took = t->waiting ? sweep(t, t->queue) : 0;
        pthread_mutex_unlock(&st->mu);
        if (!took)
            break;
    }
}

/* [mu] */
static void rt_stats(const sb_store *st, sb_stats *out)
{
    rtier *t = tier_of(st);
    sb_remote_stats rs;
    sb_remote_get_stats(t->r, &rs);
    out->shared_offered = rs.offered + t->lost;
    out->shared_published = rs.published;
    out->shared_published_bytes = rs.published_bytes;
    out->shared_dedup = rs.dedup;
    out->shared_denied = rs.denied_queue + t->lost;
    out->shared_publish_failed = rs.publish_failed;
    out->shared_probes = rs.probes;
    out->shared_probe_hits = rs.probe_hits;
    out->shared_bad_values = rs.bad_values;
    out->shared_down = rs.down;
    out->shared_fetch_ns = rs.fetch_ns;
    out->shared_queued_bytes = rs.queued_bytes;
    out->shared_fetched_pages = t->fetched_pages;
    out->shared_fetched_bytes = t->fetched_bytes;
    out->shared_forgotten = rs.forgotten;
    out->shared_forget_failed = rs.forget_failed + t->forget_lost;
    out->shared_err_auth = rs.faults[SB_SHARED_FAULT_AUTH];
    out->shared_err_noperm = rs.faults[SB_SHARED_FAULT_NOPERM];
    out->shared_err_wrongtype = rs.faults[SB_SHARED_FAULT_WRONGTYPE];
    out->shared_err_refused = rs.faults[SB_SHARED_FAULT_REFUSED];
    out->shared_err_timeout = rs.faults[SB_SHARED_FAULT_TIMEOUT];
    out->shared_err_connect = rs.faults[SB_SHARED_FAULT_CONNECT];
    out->shared_err_clusterdown = rs.faults[SB_SHARED_FAULT_CLUSTERDOWN];
    out->shared_err_deadline = rs.faults[SB_SHARED_FAULT_DEADLINE];
    out->shared_replaced = rs.replaced;
    out->shared_forged = rs.forged;
    out->shared_requeued = t->requeued;
}

/* Unlocked. */
static void rt_close(sb_store *st)
{
    rtier *t = tier_of(st);
    /* Offers never handed over hold references: drop them. */
    pthread_mutex_lock(&st->mu);
    for (size_t i = 0; i < t->n_pend; i++) {
        sb_host_blk_unref(t->pend[i].b);
        free(t->pend[i].tokens);
    }
    free(t->pend);
    t->pend = NULL;
    t->n_pend = 0;
    pthread_mutex_unlock(&st->mu);
    sb_remote_close(t->r); /* releases what it still queues */
    free(t);
    st->shared.ops = NULL;
    st->shared.state = NULL;
}

static const sb_shared_ops remote_shared_ops = {
    .offer = rt_offer,
    .kick = rt_kick,
    .extend = rt_extend,
    .forget = rt_forget,
    .flush = rt_flush,
    .stats = rt_stats,
    .close = rt_close,
};

/* Is s (n bytes) "host:port" with a port in 1..65535? */
static bool seed_ok(const char *s, size_t n)
{
    const char *c = memchr(s, ':', n);
    if (!c || c == s)
        return false;
    size_t pl = n - (size_t)(c + 1 - s);
    if (pl == 0 || pl > 5)
        return false;
    unsigned port = 0;
    for (size_t i = 0; i < pl; i++) {
        char d = c[1 + i];
        if (d < '0' || d > '9')
            return false;
        port = port * 10 + (unsigned)(d - '0');
    }
    return port >= 1 && port <= 65535;
}

int sb_shared_config_check(const sb_config *cfg)
{
    const char *seeds = cfg->shared_seeds;
    bool on = seeds && seeds[0];
    const char *why = NULL;
    if (!on && (cfg->shared_user || cfg->shared_password || cfg->shared_secret_file))
        why = "shared_user, shared_password or shared_secret_file without shared_seeds";
    else if (on && cfg->shared_user && !cfg->shared_password)
        why = "shared_user without shared_password";
    else if (cfg->shared_timeout_ms > 60000)
        why = "shared_timeout_ms over 60000";
    else if (on) {
        for (const char *p = seeds;;) {
            const char *e = strchr(p, ',');
            size_t n = e ? (size_t)(e - p) : strlen(p);
            if (!seed_ok(p, n)) {
                why = "shared_seeds: each seed must be host:port (port 1..65535)";
                break;
            }
            if (!e)
                break;
            p = e + 1;
        }
    }
    if (why) {
        fprintf(stderr, "snapbank: shared tier: %s\n", why);
        return SB_ERR_INVAL;
    }
    return SB_OK;
}

int sb_shared_key_pattern(const char *secret_file, const void *scope, size_t scope_bytes,
                          char *out, size_t out_len)
{
    if (!out || out_len < SB_SHARED_PATTERN_LEN || (!scope && scope_bytes) ||
        scope_bytes > SB_SCOPE_MAX)
        return SB_ERR_INVAL;
    /* The scope's hash as sb_ns_open computes it (store/core/ns.c). */
    uint64_t sh = XXH3_64bits(scope_bytes ? scope : "", scope_bytes);
    uint64_t tag = sh;
    const char *ver = "sb1";
    if (secret_file) {
        sb_seal seal;
        char err[320] = "";
        int rc = sb_seal_load(secret_file, &seal, err, sizeof err);
        if (rc != SB_OK) {
            fprintf(stderr, "snapbank: shared tier: %s\n", err[0] ? err : "no secret");
            return SB_ERR_INVAL;
        }
        tag = sb_seal_scope_tag(&seal, sh);
        memset(&seal, 0, sizeof seal);
        ver = "sb2";
    }
    snprintf(out, out_len, "%s:%016llx:*", ver, (unsigned long long)tag);
    return SB_OK;
}

int sb_shared_open(sb_store *st, const sb_config *cfg)
{
    rtier *t = calloc(1, sizeof *t);
    if (!t)
        return SB_ERR_NOMEM;
    uint64_t queue = cfg->ram_bytes / 4;
    if (queue > (256ull << 20))
        queue = 256ull << 20;
    if (queue == 0)
        queue = 1;
    sb_remote_config rc = { .seeds = cfg->shared_seeds, .user = cfg->shared_user,
                            .password = cfg->shared_password,
                            .timeout_ms = cfg->shared_timeout_ms,
                            .publish_bytes_per_s = cfg->shared_publish_bytes_per_s,
                            .queue_bytes = queue, .ttl_s = cfg->shared_ttl_s,
                            .compress_level = cfg->compress_level,
                            .room = rt_room, .room_ctx = t };
    t->st = st;
    t->queue = queue;
    char err[320] = "";
    sb_seal seal;
    if (cfg->shared_secret_file) {
        int se = sb_seal_load(cfg->shared_secret_file, &seal, err, sizeof err);
        if (se != SB_OK) {
            fprintf(stderr, "snapbank: shared tier: %s\n", err[0] ? err : "no secret");
            free(t);
            return se;
        }
        rc.seal = &seal;
    }
    int e = sb_remote_open(&rc, &t->r, err, sizeof err);
    if (cfg->shared_secret_file)
        memset(&seal, 0, sizeof seal);
    if (e != SB_OK) {
        if (e == SB_ERR_INVAL)
            fprintf(stderr, "snapbank: shared tier: %s\n", err[0] ? err : "bad options");
        free(t);
        return e;
    }
    st->shared.state = t;
    st->shared.ops = &remote_shared_ops;
    return SB_OK;
}
