/* remote.c -- the shared tier on a Redis Cluster (see remote.h).
 *
 * The publisher, step by step (publisher()):
 *   1. Wait for offers.
 *   2. Budget: the bucket (page bytes) refills at publish_bytes_per_s,
 *      depth one second of it; wait until it holds the first waiting page,
 *      then take a batch from the queue, shallowest position first (a
 *      heap), as many pages as the bucket pays for (at least one; at most
 *      PUB_BATCH pages or PUB_BATCH_BYTES), and debit them. So the pages
 *      published by time t never exceed the rate times (t + 1 s) plus one
 *      page.
 *   3. Pages a removal took since their offer are dropped (the page's
 *      live callback); probe the rest with EXISTS: pages the pool holds
 *      are done (dedup), except a page whose value a fetch refused (the
 *      bad-value ring): it goes on to be replaced.
 *   4. Encode the rest (sealed with the secret, if any: seal.h) and SET
 *      them NX EX ttl in one pipelined batch -- a bad value's page with
 *      REPLACE instead, written only over that value (its SHA-1) or
 *      nothing; keys a removal deleted while the batch was in flight
 *      (sb_remote_forget) are deleted again. A refusal is counted by its
 *      reason, the first of each reason logged.
 *   5. Release every page of the batch, whatever happened (the pool is a
 *      cache: a page it did not take is simply not shared).
 *   6. If an offer was denied (the queue full) and the queue is now at
 *      most half full, call the owner's room callback, unlocked: it offers
 *      the denied pages again (rtier.c).
 */
#include "remote.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compress.h"
#include "format.h"
#include "host.h"
#include "rcluster.h"
#include "seal.h"
#include "snapbank.h"

#define PUB_BATCH 32u
#define PUB_BATCH_BYTES (16u << 20)
#define BAD_MAX 64u /* bad values remembered for replacement */

typedef struct pub_item {
    sb_remote_page pg;
    uint32_t *tokens;  /* owned copy */
    uint64_t order;    /* arrival, for ties */
} pub_item;

struct sb_remote {
    sb_remote_config cfg;         /* seeds, user, password cleared: the
                                     clients keep their own copies */
    pthread_mutex_t mu;           /* guards fg, the queue and the stats */
    pthread_cond_t cv;            /* queue changes, stop */
    sb_rc *fg;                    /* probes and fetches [mu] */
    sb_rc *bg;                    /* the publisher's [publisher thread] */
    pub_item **heap;              /* [mu] min-heap by (position, order) */
    size_t n_heap, cap_heap;
    uint64_t queued_bytes;        /* [mu] */
    uint64_t next_order;          /* [mu] */
    bool busy;                    /* [mu] the publisher holds a batch */
    bool want_room;               /* [mu] an offer was denied since the
                                     room callback was last called */
    struct forgot {               /* [mu] keys sb_remote_forget deleted
                                     while a batch was in flight: what the
                                     batch wrote of them is deleted again */
        uint64_t ns_id, key[2];
    } *forgot;
    size_t n_forgot, cap_forgot;
    bool stop;                    /* [mu] */
    pthread_t thread;
    double bucket;                /* [publisher] budget bytes available */
    uint64_t bucket_at;           /* [publisher] clock of the last refill */
    sb_remote_stats st;           /* [mu] */
    struct badv {                 /* [mu] values a fetch refused, to be
                                     replaced when the page is published:
                                     a ring of the last BAD_MAX */
        uint64_t ns_id, key[2];
        char sha1[41];            /* of the value as the pool held it */
        bool live;                /* false: replaced, or settled */
    } bad[BAD_MAX];
    size_t n_bad, bad_next;
    bool sealed;                  /* [const] keys keyed, values sealed */
    sb_seal seal;                 /* [const] ...with this (seal.h) */
    bool logged[SB_SHARED_FAULT__COUNT]; /* [mu] a publish failure of
                                     this reason went to stderr once */
};

static uint64_t now_ns(const sb_remote *r)
{
    if (r->cfg.clock_ns)
        return r->cfg.clock_ns(r->cfg.clock_ctx);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- SHA-1 (FIPS 180-4), for the compare of a replacement ---------------------
 * The server computes redis.sha1hex of what it holds; this computes it of
 * what a fetch refused. Not used for secrecy or integrity. */

static uint32_t rol32(uint32_t x, int k)
{
    return (x << k) | (x >> (32 - k));
}

static void sha1_block(uint32_t h[5], const uint8_t *p)
{
    uint32_t w[80];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 80; i++)
        w[i] = rol32(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
    for (int i = 0; i < 80; i++) {
        uint32_t f, k;
        if (i < 20)
            f = (b & c) | (~b & d), k = 0x5a827999u;
        else if (i < 40)
            f = b ^ c ^ d, k = 0x6ed9eba1u;
        else if (i < 60)
            f = (b & c) | (b & d) | (c & d), k = 0x8f1bbcdcu;
        else
            f = b ^ c ^ d, k = 0xca62c1d6u;
        uint32_t t = rol32(a, 5) + f + e + k + w[i];
        e = d, d = c, c = rol32(b, 30), b = a, a = t;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e;
}

/* The SHA-1 of v[0, len) as 40 lower-case hex digits and a NUL. */
static void sha1_hex(const void *v, size_t len, char out[41])
{
    uint32_t h[5] = { 0x67452301u, 0xefcdab89u, 0x98badcfeu, 0x10325476u, 0xc3d2e1f0u };
    const uint8_t *p = v;
    size_t n = len;
    for (; n >= 64; n -= 64, p += 64)
        sha1_block(h, p);
    uint8_t last[128] = { 0 };
    memcpy(last, p, n);
    last[n] = 0x80;
    size_t tail = n + 9 <= 64 ? 64 : 128;
    uint64_t bits = (uint64_t)len * 8;
    for (int i = 0; i < 8; i++)
        last[tail - 1 - i] = (uint8_t)(bits >> (8 * i));
    sha1_block(h, last);
    if (tail == 128)
        sha1_block(h, last + 64);
    static const char d[] = "0123456789abcdef";
    for (int i = 0; i < 20; i++) {
        uint8_t b = (uint8_t)(h[i / 4] >> (24 - 8 * (i % 4)));
        out[2 * i] = d[b >> 4];
        out[2 * i + 1] = d[b & 15];
    }
    out[40] = 0;
}

/* ---- faults ------------------------------------------------------------------ */

/* rcluster's faults are the public ones, number for number. */
_Static_assert((int)RC_F_AUTH == (int)SB_SHARED_FAULT_AUTH && (int)RC_F_NOPERM == (int)SB_SHARED_FAULT_NOPERM &&
                   (int)RC_F_WRONGTYPE == (int)SB_SHARED_FAULT_WRONGTYPE &&
                   (int)RC_F_REFUSED == (int)SB_SHARED_FAULT_REFUSED &&
                   (int)RC_F_TIMEOUT == (int)SB_SHARED_FAULT_TIMEOUT &&
                   (int)RC_F_CONNECT == (int)SB_SHARED_FAULT_CONNECT &&
                   (int)RC_F_CLUSTERDOWN == (int)SB_SHARED_FAULT_CLUSTERDOWN &&
                   (int)RC_F_DEADLINE == (int)SB_SHARED_FAULT_DEADLINE,
               "sb_rc_fault and enum sb_shared_fault must agree");

/* Count op's failure by its reason, and note the first in *info. [mu] */
static void count_fault(sb_remote *r, const sb_rc_op *op, sb_remote_fault_info *info)
{
    if (op->status != SB_RC_DOWN && op->status != SB_RC_REFUSED)
        return;
    int f = op->fault ? (int)op->fault : SB_SHARED_FAULT_REFUSED;
    r->st.faults[f]++;
    if (info && !info->fault) {
        info->fault = f;
        snprintf(info->detail, sizeof info->detail, "%s", op->err_msg);
    }
}

/* A publish failed: the first of each reason goes to stderr, with the
 * server's words (later ones are counted only: sb_stats.shared_err_*). [mu] */
static void log_refused(sb_remote *r, const sb_rc_op *op)
{
    int f = op->fault ? (int)op->fault : SB_SHARED_FAULT_REFUSED;
    if (r->logged[f])
        return;
    r->logged[f] = true;
    fprintf(stderr, "snapbank: shared tier: publishing %.*s failed: %s%s%s (further %s failures "
            "are counted only)\n", (int)op->key_len, op->key, sb_rc_fault_name((sb_rc_fault)f),
            op->err_msg[0] ? ": " : "", op->err_msg, sb_rc_fault_name((sb_rc_fault)f));
}

/* The bad value remembered for (ns_id, key), or NULL. [mu] */
static struct badv *bad_find(sb_remote *r, uint64_t ns_id, const uint64_t key[2])
{
    for (size_t i = 0; i < r->n_bad; i++)
        if (r->bad[i].live && r->bad[i].ns_id == ns_id && r->bad[i].key[0] == key[0] &&
            r->bad[i].key[1] == key[1])
            return &r->bad[i];
    return NULL;
}

/* Remember a refused value under (ns_id, key). [mu] */
static void bad_note(sb_remote *r, uint64_t ns_id, const uint64_t key[2], const char sha1[41])
{
    struct badv *b = bad_find(r, ns_id, key);
    if (!b) {
        b = &r->bad[r->bad_next];
        r->bad_next = (r->bad_next + 1) % BAD_MAX;
        if (r->n_bad < BAD_MAX)
            r->n_bad++;
    }
    b->ns_id = ns_id;
    b->live = true;
    b->key[0] = key[0], b->key[1] = key[1];
    memcpy(b->sha1, sha1, 41);
}

/* ---- keys and values --------------------------------------------------------- */

static void hex64(char *out, uint64_t v)
{
    static const char d[] = "0123456789abcdef";
    for (int i = 15; i >= 0; i--, v >>= 4)
        out[i] = d[v & 15];
}

void sb_remote_key(char out[SB_REMOTE_KEY_LEN], const sb_remote_ns *ns, const uint64_t key[2])
{
    memcpy(out, "sb1:", 4);
    hex64(out + 4, ns->scope_tag);
    out[20] = ':';
    hex64(out + 21, ns->ns_id);
    out[37] = ':';
    hex64(out + 38, key[1]);
    hex64(out + 54, key[0]);
}

void sb_remote_key_of(const sb_remote *r, char out[SB_REMOTE_KEY_LEN], const sb_remote_ns *ns,
                      const uint64_t key[2])
{
    if (r->sealed)
        sb_seal_key(&r->seal, out, ns->scope_tag, ns->ns_id, key);
    else
        sb_remote_key(out, ns, key);
}

int sb_remote_encode_value(const sb_remote_page *pg, int compress, void **out, size_t *len)
{
    uint32_t pt = pg->ns.page_tokens;
    uint32_t head_bytes = sb_rec_head_size(pt, 0);
    uint32_t used = SB_REC_FIXED + 4 * pt;
    size_t cap = (size_t)used + pg->ns.page_bytes + 64;
    uint8_t *head = calloc(1, head_bytes);
    uint8_t *v = malloc(cap);
    if (!head || !v) {
        free(head);
        free(v);
        return SB_ERR_NOMEM;
    }
    sb_rec_head h = {
        .kind = SB_REC_PAGE, .ns_id = pg->ns.ns_id,
        .key = { pg->key[0], pg->key[1] }, .parent_key = { pg->parent_key[0], pg->parent_key[1] },
        .position = pg->position, .n_tokens = pt, .head_bytes = head_bytes,
        .payload_bytes = pg->ns.page_bytes,
    };
    size_t stored = 0;
    if (compress > 0) {
        sb_zctx *z = sb_zctx_new(compress);
        if (z) {
            stored = sb_zcompress(z, pg->data, pg->ns.page_bytes, pg->ns.elem16, v + used,
                                  cap - used, &h.flags);
            sb_zctx_free(z);
        }
    }
    if (stored) {
        h.payload_bytes = stored;
    } else {
        h.flags = 0;
        memcpy(v + used, pg->data, pg->ns.page_bytes);
    }
    h.payload_hash = sb_rec_payload_hash(v + used, (size_t)h.payload_bytes);
    int rc = sb_rec_encode(&h, pg->tokens, NULL, 0, head);
    if (rc == SB_OK)
        memcpy(v, head, used);
    free(head);
    if (rc != SB_OK) {
        free(v);
        return rc;
    }
    *out = v;
    *len = used + (size_t)h.payload_bytes;
    return SB_OK;
}

/* Check a fetched value, its head v[0, used) (used = SB_REC_FIXED + 4 x
 * page_tokens; len is the whole value's length) and its payload (len -
 * used bytes at pay), against what was asked (remote.h lists the checks),
 * and leave its page in w->dst. pay may be w->dst itself (the value was
 * read there): an uncompressed page is then checked in place. Returns
 * SB_OK or SB_ERR_CORRUPT (w->dst may then hold anything). */
static int check_parts(const sb_remote_ns *ns, const sb_remote_want *w, const uint8_t *v,
                       size_t len, const uint8_t *pay)
{
    uint32_t pt = ns->page_tokens;
    uint32_t used = SB_REC_FIXED + 4 * pt;
    uint32_t head_bytes;
    if (len < used || sb_rec_peek(v, len, &head_bytes) != SB_OK ||
        head_bytes != sb_rec_head_size(pt, 0))
        return SB_ERR_CORRUPT;
    /* The head as the disk holds it: the value's bytes, then zeros. */
    uint8_t *head = calloc(1, head_bytes);
    if (!head)
        return SB_ERR_NOMEM;
    memcpy(head, v, used);
    sb_rec_head h;
    const uint32_t *tok;
    const void *extra;
    int rc = sb_rec_decode(head, head_bytes, 0, &h, &tok, &extra);
    bool ok = rc == SB_OK && h.kind == SB_REC_PAGE && h.ns_id == ns->ns_id &&
              h.key[0] == w->key[0] && h.key[1] == w->key[1] &&
              h.parent_key[0] == w->parent_key[0] && h.parent_key[1] == w->parent_key[1] &&
              h.position == w->position && h.n_tokens == pt && h.extra_bytes == 0 &&
              h.seq == 0 && h.segment_id == 0 && h.generation == 0 &&
              h.payload_bytes == len - used && !memcmp(tok, w->tokens, 4 * (size_t)pt);
    if (ok) {
        sb_key parent = { w->parent_key[0], w->parent_key[1] };
        sb_key k = sb_host_key_chain(&parent, w->tokens, pt);
        ok = k.lo == w->key[0] && k.hi == w->key[1];
    }
    free(head);
    if (!ok || sb_rec_payload_hash(pay, len - used) != h.payload_hash)
        return SB_ERR_CORRUPT;
    if (h.flags & SB_REC_F_COMPRESSED) {
        if (pay != w->dst)
            return sb_zdecompress(pay, len - used, h.flags, w->dst, ns->page_bytes) == SB_OK
                       ? SB_OK
                       : SB_ERR_CORRUPT;
        /* Read into dst (a frame as long as the page: no publisher
         * stores one, but a value may say so): decompressed beside it,
         * so that dst keeps the value's bytes when the frame is bad. */
        void *z = malloc(ns->page_bytes);
        if (!z)
            return SB_ERR_NOMEM;
        rc = sb_zdecompress(pay, len - used, h.flags, z, ns->page_bytes);
        if (rc == SB_OK)
            memcpy(w->dst, z, ns->page_bytes);
        free(z);
        return rc == SB_OK ? SB_OK : SB_ERR_CORRUPT;
    }
    if (len - used != ns->page_bytes)
        return SB_ERR_CORRUPT;
    if (pay != w->dst)
        memcpy(w->dst, pay, ns->page_bytes);
    return SB_OK;
}

/* check_parts of a value held whole at v[0, len). */
static int check_value(const sb_remote_ns *ns, const sb_remote_want *w, const uint8_t *v,
                       size_t len)
{
    size_t used = SB_REC_FIXED + 4 * (size_t)ns->page_tokens;
    return check_parts(ns, w, v, len, len < used ? v : v + used);
}

/* ---- probe and fetch ----------------------------------------------------------- */

int sb_remote_probe(sb_remote *r, const sb_remote_ns *ns, const uint64_t (*keys)[2], size_t n,
                    size_t *n_present)
{
    return sb_remote_probe_ex(r, ns, keys, n, n_present, NULL);
}

int sb_remote_probe_ex(sb_remote *r, const sb_remote_ns *ns, const uint64_t (*keys)[2], size_t n,
                       size_t *n_present, sb_remote_fault_info *info)
{
    if (info)
        memset(info, 0, sizeof *info);
    if (!r || !ns || (!keys && n) || !n_present)
        return SB_ERR_INVAL;
    *n_present = 0;
    if (!n)
        return SB_OK;
    sb_rc_op *ops = calloc(n, sizeof *ops);
    char *names = malloc(n * SB_REMOTE_KEY_LEN);
    if (!ops || !names) {
        free(ops);
        free(names);
        return SB_ERR_NOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        sb_remote_key_of(r, names + i * SB_REMOTE_KEY_LEN, ns, keys[i]);
        ops[i] = (sb_rc_op){ .kind = SB_RC_EXISTS, .key = names + i * SB_REMOTE_KEY_LEN,
                             .key_len = SB_REMOTE_KEY_LEN };
    }
    /* Like a fetch, a probe waits while answers arrive (a probe of many
     * keys through a slow node is not cut at timeout_ms), at most 50
     * times timeout_ms. */
    uint64_t stall = (uint64_t)r->cfg.timeout_ms * 1000000ull;
    sb_rc_limits lim = { .stall_ns = stall, .until_ns = now_ns(r) + 50 * stall };
    pthread_mutex_lock(&r->mu);
    sb_rc_exec_lim(r->fg, ops, n, NULL, NULL, &lim);
    int rc = SB_OK;
    size_t run = 0;
    while (run < n && ops[run].status == SB_RC_OK)
        run++;
    if (run < n && ops[run].status != SB_RC_MISSING) {
        rc = SB_ERR_IO;
        count_fault(r, &ops[run], info);
    }
    r->st.probes++;
    r->st.probe_keys += n;
    r->st.probe_hits += run;
    for (size_t i = 0; i < n; i++) {
        r->st.down += ops[i].status == SB_RC_DOWN;
        if (i != run)
            count_fault(r, &ops[i], NULL);
    }
    pthread_mutex_unlock(&r->mu);
    *n_present = run;
    free(ops);
    free(names);
    return rc;
}

/* A fetch's values are checked and stored as they arrive (sb_rc_exec_each),
 * and each reply buffer freed at once: the client holds a window's values,
 * not the batch's (a batch of 256 pages of 192 KiB held 48 MiB of fresh
 * heap, faulted in on every fetch). */
typedef struct fetch_ctx {
    sb_remote *r;
    const sb_remote_ns *ns;
    const sb_remote_want *want;
    int *res;                  /* per value: check_value's result */
    char (*bad_sha)[41];       /* per value: a refused one's SHA-1 */
    bool *forged;              /* per value: sealed, and did not open */
    const char *names;         /* the keys, SB_REMOTE_KEY_LEN apart */
    uint8_t *heads;            /* per value: its head, read there by the
                                  sink (used bytes each) */
    size_t n, n_got;           /* values asked, arrived */
    uint64_t t0;               /* the fetch's start */
    double page_ns;            /* recomputing one page; 0: unknown */
    uint64_t max_at;           /* the clock of max_ms */
    sb_rc_limits *lim;
} fetch_ctx;

/* Where value i of len bytes goes (sb_rc_sink_fn): a plain value as long
 * as an uncompressed page's record is read with its head into heads and
 * its payload straight into the page (want[i].dst), to be checked there.
 * Sealed, compressed or odd-sized values are read whole (0). */
static unsigned fetch_sink(void *ctx, size_t i, size_t len, struct iovec out[2])
{
    fetch_ctx *f = ctx;
    size_t used = SB_REC_FIXED + 4 * (size_t)f->ns->page_tokens;
    if (f->r->sealed || !f->heads || len != used + f->ns->page_bytes)
        return 0;
    out[0] = (struct iovec){ f->heads + i * used, used };
    out[1] = (struct iovec){ f->want[i].dst, f->ns->page_bytes };
    return 2;
}

/* A value arrived: check it, and move the fetch's end. The values still
 * to come must arrive within what recomputing them would take from now
 * (when the caller gave a cost), never past max_at. */
static void fetch_got(void *ctx, size_t i, sb_rc_op *op)
{
    fetch_ctx *f = ctx;
    if (op->in_sink) {
        size_t used = SB_REC_FIXED + 4 * (size_t)f->ns->page_tokens;
        const uint8_t *head = f->heads + i * used;
        f->res[i] = check_parts(f->ns, &f->want[i], head, op->len, f->want[i].dst);
        if (f->res[i] == SB_ERR_CORRUPT) {
            /* The SHA-1 of the value as the pool holds it: a refused
             * value's bytes are still where they were read. */
            uint8_t *whole = malloc(op->len);
            if (whole) {
                memcpy(whole, head, used);
                memcpy(whole + used, f->want[i].dst, op->len - used);
                sha1_hex(whole, op->len, f->bad_sha[i]);
                free(whole);
            } else {
                f->bad_sha[i][0] = 0;
            }
        }
    } else if (f->r->sealed) {
        /* Sealed: what does not open (no tag, a wrong one, another
         * scope's or key's) is forged; what opens is checked as plain. */
        void *plain;
        size_t pn;
        int orc = sb_seal_open(&f->r->seal, f->ns->scope_tag, f->names + i * SB_REMOTE_KEY_LEN,
                               op->data, op->len, &plain, &pn);
        if (orc == SB_OK) {
            f->res[i] = check_value(f->ns, &f->want[i], plain, pn);
            free(plain);
        } else {
            f->res[i] = orc;
            f->forged[i] = orc == SB_ERR_CORRUPT;
        }
    } else {
        f->res[i] = check_value(f->ns, &f->want[i], op->data, op->len);
    }
    if (f->res[i] == SB_ERR_CORRUPT && !op->in_sink)
        sha1_hex(op->data, op->len, f->bad_sha[i]);
    free(op->data);
    op->data = NULL;
    f->n_got++;
    if (f->page_ns > 0) {
        uint64_t now = now_ns(f->r);
        double rest = f->page_ns * (double)(f->n - f->n_got);
        uint64_t until = f->max_at;
        if (now + rest < (double)f->max_at)
            until = now + (uint64_t)rest;
        __atomic_store_n(&f->lim->until_ns, until, __ATOMIC_RELAXED);
    }
}

int sb_remote_fetch(sb_remote *r, const sb_remote_ns *ns, const sb_remote_want *want, size_t n,
                    size_t *n_ok)
{
    return sb_remote_fetch_ex(r, ns, want, n, NULL, n_ok, NULL);
}

int sb_remote_fetch_ex(sb_remote *r, const sb_remote_ns *ns, const sb_remote_want *want,
                       size_t n, const sb_remote_fetch_opts *opts, size_t *n_ok,
                       sb_remote_fault_info *info)
{
    if (info)
        memset(info, 0, sizeof *info);
    if (!r || !ns || (!want && n) || !n_ok)
        return SB_ERR_INVAL;
    *n_ok = 0;
    if (!n)
        return SB_OK;
    sb_rc_op *ops = calloc(n, sizeof *ops);
    char *names = malloc(n * SB_REMOTE_KEY_LEN);
    int *res = malloc(n * sizeof *res);
    char(*bad_sha)[41] = malloc(n * sizeof *bad_sha);
    bool *forged = calloc(n, sizeof *forged);
    if (!ops || !names || !res || !bad_sha || !forged) {
        free(ops);
        free(names);
        free(res);
        free(bad_sha);
        free(forged);
        return SB_ERR_NOMEM;
    }
    /* An uncompressed page's record (a sealed one is a little longer). */
    size_t hint = SB_REC_FIXED + 4 * (size_t)ns->page_tokens + ns->page_bytes;
    for (size_t i = 0; i < n; i++) {
        sb_remote_key_of(r, names + i * SB_REMOTE_KEY_LEN, ns, want[i].key);
        ops[i] = (sb_rc_op){ .kind = SB_RC_GET, .key = names + i * SB_REMOTE_KEY_LEN,
                             .key_len = SB_REMOTE_KEY_LEN, .hint = hint };
        res[i] = SB_ERR_IO; /* until its value is checked */
    }
    uint64_t t0 = now_ns(r);
    uint32_t stall_ms = opts && opts->stall_ms ? opts->stall_ms : r->cfg.timeout_ms;
    uint64_t max_ns = (uint64_t)(opts && opts->max_ms ? opts->max_ms : 50ull * stall_ms) * 1000000ull;
    double page_ns = opts && opts->page_recompute_ns > 0 ? opts->page_recompute_ns : 0;
    sb_rc_limits lim = { .stall_ns = (uint64_t)stall_ms * 1000000ull, .until_ns = t0 + max_ns };
    if (page_ns > 0) {
        /* Before the first value: the whole run's recompute time, plus a
         * stall for the first byte. */
        double first = page_ns * (double)n + (double)lim.stall_ns;
        if (first < (double)max_ns)
            lim.until_ns = t0 + (uint64_t)first;
    }
    /* Heads for the values read into their pages; without them (sealed,
     * or no memory) every value is read whole. */
    uint8_t *heads = r->sealed ? NULL : malloc(n * (SB_REC_FIXED + 4 * (size_t)ns->page_tokens));
    fetch_ctx fc = { .r = r, .ns = ns, .want = want, .res = res, .bad_sha = bad_sha,
                     .forged = forged, .names = names, .heads = heads, .n = n,
                     .t0 = t0, .page_ns = page_ns, .max_at = t0 + max_ns, .lim = &lim };
    pthread_mutex_lock(&r->mu);
    sb_rc_exec_sink(r->fg, ops, n, fetch_sink, fetch_got, &fc, &lim);
    pthread_mutex_unlock(&r->mu);
    free(heads);
    /* The good run from the first page: a page after a bad one was checked
     * (and written to its dst) as it arrived, but is not counted. */
    int rc = SB_OK;
    size_t good = 0, bad = 0, down = 0, n_forged = 0;
    uint64_t bytes = 0;
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < n; i++) {
        int one = SB_OK;
        if (ops[i].status == SB_RC_OK) {
            /* Every bad value is remembered for replacement; the run's
             * first is counted and named. */
            if (res[i] == SB_ERR_CORRUPT)
                bad_note(r, ns->ns_id, want[i].key, bad_sha[i]);
            one = rc == SB_OK ? res[i] : SB_OK;
            bad += one == SB_ERR_CORRUPT;
            n_forged += one == SB_ERR_CORRUPT && forged[i];
            if (one == SB_ERR_CORRUPT && info && !info->fault) {
                info->fault = SB_SHARED_FAULT_BAD_VALUE;
                snprintf(info->detail, sizeof info->detail, "%.*s", (int)SB_REMOTE_KEY_LEN,
                         names + i * SB_REMOTE_KEY_LEN);
            }
        } else {
            if (rc == SB_OK)
                count_fault(r, &ops[i], info);
            else
                count_fault(r, &ops[i], NULL);
            one = ops[i].status == SB_RC_MISSING ? SB_ERR_NOT_FOUND
                  : ops[i].status == SB_RC_NOMEM ? SB_ERR_NOMEM
                                                 : SB_ERR_IO;
            down += ops[i].status == SB_RC_DOWN;
        }
        if (rc == SB_OK && one != SB_OK)
            rc = one;
        if (rc == SB_OK) {
            good++;
            bytes += ns->page_bytes;
        }
        free(ops[i].data);
    }
    free(res);
    free(bad_sha);
    free(forged);
    r->st.forged += n_forged;
    if (info)
        info->n_bad = (uint32_t)bad;
    r->st.fetched += good;
    r->st.fetched_bytes += bytes;
    r->st.bad_values += bad;
    r->st.faults[SB_SHARED_FAULT_BAD_VALUE] += bad;
    r->st.down += down;
    r->st.fetch_ns += now_ns(r) - t0;
    pthread_mutex_unlock(&r->mu);
    *n_ok = good;
    free(ops);
    free(names);
    return rc;
}

/* ---- the publish queue ---------------------------------------------------------- */

static bool item_less(const pub_item *a, const pub_item *b)
{
    return a->pg.position != b->pg.position ? a->pg.position < b->pg.position
                                            : a->order < b->order;
}

static void heap_up(pub_item **h, size_t i)
{
    while (i && item_less(h[i], h[(i - 1) / 2])) {
        pub_item *t = h[i];
        h[i] = h[(i - 1) / 2];
        h[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

static pub_item *heap_pop(sb_remote *r)
{
    pub_item **h = r->heap;
    pub_item *top = h[0];
    h[0] = h[--r->n_heap];
    for (size_t i = 0;;) {
        size_t m = i, a = 2 * i + 1, b = a + 1;
        if (a < r->n_heap && item_less(h[a], h[m]))
            m = a;
        if (b < r->n_heap && item_less(h[b], h[m]))
            m = b;
        if (m == i)
            break;
        pub_item *t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
    return top;
}

static void item_free(pub_item *it)
{
    if (it->pg.release)
        it->pg.release(it->pg.ctx);
    free(it->tokens);
    free(it);
}

int sb_remote_offer(sb_remote *r, const sb_remote_page *pg)
{
    if (!r || !pg || !pg->data || !pg->tokens)
        return SB_ERR_INVAL;
    pub_item *it = malloc(sizeof *it);
    uint32_t *tok = malloc(4 * (size_t)pg->ns.page_tokens);
    if (!it || !tok) {
        free(it);
        free(tok);
        if (pg->release)
            pg->release(pg->ctx);
        return SB_ERR_NOMEM;
    }
    memcpy(tok, pg->tokens, 4 * (size_t)pg->ns.page_tokens);
    it->pg = *pg;
    it->pg.tokens = tok;
    it->tokens = tok;
    pthread_mutex_lock(&r->mu);
    r->st.offered++;
    if (r->stop || r->queued_bytes + pg->ns.page_bytes > r->cfg.queue_bytes ||
        (r->n_heap == r->cap_heap && !(r->cap_heap < SIZE_MAX / 2))) {
        r->st.denied_queue++;
        r->want_room = !r->stop;
        pthread_mutex_unlock(&r->mu);
        item_free(it);
        return SB_ERR_BUDGET;
    }
    if (r->n_heap == r->cap_heap) {
        size_t cap = r->cap_heap ? r->cap_heap * 2 : 256;
        pub_item **h = realloc(r->heap, cap * sizeof *h);
        if (!h) {
            pthread_mutex_unlock(&r->mu);
            item_free(it);
            return SB_ERR_NOMEM;
        }
        r->heap = h;
        r->cap_heap = cap;
    }
    it->order = r->next_order++;
    r->heap[r->n_heap] = it;
    heap_up(r->heap, r->n_heap++);
    r->queued_bytes += pg->ns.page_bytes;
    r->st.queued_bytes = r->queued_bytes;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    return SB_OK;
}

/* Step 2: refill the bucket, and wait until it holds the first waiting
 * page (or a second of the rate, for a page larger than that), or stop.
 * Returns the bytes the bucket holds. [mu held] */
static double budget_wait(sb_remote *r)
{
    double rate = (double)r->cfg.publish_bytes_per_s;
    for (;;) {
        uint64_t now = now_ns(r);
        r->bucket += rate * (double)(now - r->bucket_at) / 1e9;
        r->bucket_at = now;
        if (r->bucket > rate)
            r->bucket = rate; /* depth: one second */
        if (r->stop || !r->n_heap)
            return r->bucket;
        double first = (double)r->heap[0]->pg.ns.page_bytes;
        double need = first < rate ? first : rate;
        if (r->bucket >= need)
            return r->bucket;
        double wait_s = (need - r->bucket) / rate;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t ns = (uint64_t)(wait_s * 1e9) + 1000000;
        if (ns > 100000000ull)
            ns = 100000000ull; /* look at the (maybe injected) clock again */
        ts.tv_sec += (time_t)(ns / 1000000000ull);
        ts.tv_nsec += (long)(ns % 1000000000ull);
        if (ts.tv_nsec >= 1000000000L)
            ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&r->cv, &r->mu, &ts);
    }
}

/* Steps 3 and 4 for batch b[0, n); sent[i] says whether page i was
 * written. */
static void publish_batch(sb_remote *r, pub_item **b, size_t n, bool *sent_ok)
{
    char names[PUB_BATCH][SB_REMOTE_KEY_LEN];
    sb_rc_op ops[PUB_BATCH];
    void *vals[PUB_BATCH] = { 0 };
    size_t at[PUB_BATCH]; /* ops[k] is page at[k]'s */
    /* Pages a removal took since their offer are not published. */
    size_t q = 0;
    for (size_t i = 0; i < n; i++) {
        sent_ok[i] = false;
        if (b[i]->pg.live && !b[i]->pg.live(b[i]->pg.ctx))
            continue;
        sb_remote_key_of(r, names[q], &b[i]->pg.ns, b[i]->pg.key);
        at[q++] = i;
    }
    /* Step 3: which does the pool hold already? A page whose value a
     * fetch refused is not asked: it is replaced (step 4). */
    char bad_sha[PUB_BATCH][41];
    bool replace[PUB_BATCH] = { false };
    pthread_mutex_lock(&r->mu);
    for (size_t k = 0; k < q; k++) {
        struct badv *bv = bad_find(r, b[at[k]]->pg.ns.ns_id, b[at[k]]->pg.key);
        if (bv) {
            replace[k] = true;
            memcpy(bad_sha[k], bv->sha1, 41);
        }
    }
    pthread_mutex_unlock(&r->mu);
    for (size_t k = 0; k < q; k++)
        ops[k] = (sb_rc_op){ .kind = SB_RC_EXISTS, .key = names[k],
                             .key_len = SB_REMOTE_KEY_LEN };
    if (q)
        sb_rc_exec(r->bg, ops, q);
    for (size_t k = 0; k < q; k++)
        if (replace[k])
            ops[k].status = SB_RC_MISSING;
    size_t dedup = 0, sent = 0, failed = 0, down = 0;
    uint64_t bytes = 0;
    size_t m = 0;
    size_t set_of[PUB_BATCH]; /* the SET ops[m]'s page */
    for (size_t k = 0; k < q; k++) {
        size_t i = at[k];
        if (ops[k].status == SB_RC_OK) {
            dedup++;
            continue;
        }
        if (ops[k].status == SB_RC_DOWN || ops[k].status == SB_RC_REFUSED) {
            down += ops[k].status == SB_RC_DOWN;
            failed++;
            pthread_mutex_lock(&r->mu);
            count_fault(r, &ops[k], NULL);
            log_refused(r, &ops[k]);
            pthread_mutex_unlock(&r->mu);
            continue;
        }
        size_t len;
        if (sb_remote_encode_value(&b[i]->pg, (int)r->cfg.compress_level, &vals[m], &len) !=
            SB_OK) {
            failed++;
            continue;
        }
        if (r->sealed) {
            void *box;
            size_t blen;
            int src = sb_seal_value(&r->seal, b[i]->pg.ns.scope_tag, names[k], vals[m], len, &box,
                                    &blen);
            free(vals[m]);
            vals[m] = NULL;
            if (src != SB_OK) {
                failed++;
                continue;
            }
            vals[m] = box;
            len = blen;
        }
        ops[m] = (sb_rc_op){ .kind = replace[k] ? SB_RC_REPLACE : SB_RC_SET, .key = names[k],
                             .key_len = SB_REMOTE_KEY_LEN, .val = vals[m], .val_len = len,
                             .ttl_s = r->cfg.ttl_s, .nx = 1,
                             .digest = replace[k] ? bad_sha[k] : NULL };
        set_of[m] = i;
        m++;
    }
    /* Step 4. */
    if (m)
        sb_rc_exec(r->bg, ops, m);
    size_t replaced = 0;
    pthread_mutex_lock(&r->mu);
    for (size_t k = 0; k < m; k++) {
        bool rep = ops[k].kind == SB_RC_REPLACE;
        if (ops[k].status == SB_RC_OK) {
            sent++;
            replaced += rep;
            bytes += ops[k].val_len;
            sent_ok[set_of[k]] = true;
        } else if (ops[k].status == SB_RC_MISSING) {
            dedup++; /* another node published (or replaced) it meanwhile */
        } else {
            failed++;
            down += ops[k].status == SB_RC_DOWN;
            count_fault(r, &ops[k], NULL);
            log_refused(r, &ops[k]);
        }
        if (rep && ops[k].status != SB_RC_DOWN) {
            /* Settled either way: forget the bad value. */
            struct badv *bv = bad_find(r, b[set_of[k]]->pg.ns.ns_id, b[set_of[k]]->pg.key);
            if (bv)
                bv->live = false;
        }
        free(vals[k]);
    }
    r->st.replaced += replaced;
    r->st.dedup += dedup;
    r->st.published += sent;
    r->st.published_bytes += bytes;
    r->st.publish_failed += failed;
    r->st.down += down;
    pthread_mutex_unlock(&r->mu);
}

/* Is the page of pg among the keys forgotten while its batch was in
 * flight? [mu] */
static bool was_forgotten(const sb_remote *r, const sb_remote_page *pg)
{
    for (size_t i = 0; i < r->n_forgot; i++)
        if (r->forgot[i].ns_id == pg->ns.ns_id && r->forgot[i].key[0] == pg->key[0] &&
            r->forgot[i].key[1] == pg->key[1])
            return true;
    return false;
}

/* Count DEL results ops[0, n) in the stats. [mu] */
static void count_dels(sb_remote *r, const sb_rc_op *ops, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (ops[i].status == SB_RC_OK)
            r->st.forgotten++;
        else if (ops[i].status != SB_RC_MISSING)
            r->st.forget_failed++;
        r->st.down += ops[i].status == SB_RC_DOWN;
    }
}

/* After a batch: what it wrote of the keys a removal deleted meanwhile
 * (sb_remote_forget) is deleted again, so no publication outlives the
 * removal. */
static void again(sb_remote *r, pub_item **b, size_t n, const bool *sent)
{
    char names[PUB_BATCH][SB_REMOTE_KEY_LEN];
    sb_rc_op ops[PUB_BATCH];
    size_t m = 0;
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < n; i++)
        if (sent[i] && was_forgotten(r, &b[i]->pg)) {
            sb_remote_key_of(r, names[m], &b[i]->pg.ns, b[i]->pg.key);
            ops[m] = (sb_rc_op){ .kind = SB_RC_DEL, .key = names[m],
                                 .key_len = SB_REMOTE_KEY_LEN };
            m++;
        }
    r->n_forgot = 0;
    pthread_mutex_unlock(&r->mu);
    if (!m)
        return;
    sb_rc_exec(r->bg, ops, m);
    pthread_mutex_lock(&r->mu);
    count_dels(r, ops, m);
    pthread_mutex_unlock(&r->mu);
}

static void heap_down(pub_item **h, size_t n, size_t i)
{
    for (;;) {
        size_t m = i, a = 2 * i + 1, c = a + 1;
        if (a < n && item_less(h[a], h[m]))
            m = a;
        if (c < n && item_less(h[c], h[m]))
            m = c;
        if (m == i)
            return;
        pub_item *t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static int key_cmp(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;
    if (x[1] != y[1])
        return x[1] < y[1] ? -1 : 1;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

int sb_remote_forget(sb_remote *r, const sb_remote_ns *ns, const uint64_t (*keys)[2], size_t n)
{
    if (!r || !ns || (!keys && n))
        return SB_ERR_INVAL;
    if (!n)
        return SB_OK;
    uint64_t(*sorted)[2] = malloc(n * sizeof *sorted);
    sb_rc_op *ops = calloc(n, sizeof *ops);
    char *names = malloc(n * SB_REMOTE_KEY_LEN);
    pub_item **drop = NULL;
    if (!sorted || !ops || !names) {
        free(sorted);
        free(ops);
        free(names);
        return SB_ERR_NOMEM;
    }
    memcpy(sorted, keys, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, key_cmp);
    for (size_t i = 0; i < n; i++) {
        sb_remote_key_of(r, names + i * SB_REMOTE_KEY_LEN, ns, keys[i]);
        ops[i] = (sb_rc_op){ .kind = SB_RC_DEL, .key = names + i * SB_REMOTE_KEY_LEN,
                             .key_len = SB_REMOTE_KEY_LEN };
    }
    pthread_mutex_lock(&r->mu);
    /* Their publications still queued go unpublished. */
    size_t nd = 0, m = 0;
    drop = r->n_heap ? malloc(r->n_heap * sizeof *drop) : NULL;
    for (size_t i = 0; drop && i < r->n_heap; i++) {
        pub_item *it = r->heap[i];
        if (it->pg.ns.ns_id == ns->ns_id &&
            bsearch(it->pg.key, sorted, n, sizeof *sorted, key_cmp)) {
            drop[nd++] = it;
            r->queued_bytes -= it->pg.ns.page_bytes;
        } else {
            r->heap[m++] = it;
        }
    }
    if (drop) {
        r->n_heap = m;
        for (size_t i = m / 2; i-- > 0;)
            heap_down(r->heap, m, i);
        r->st.queued_bytes = r->queued_bytes;
    }
    /* One in the batch being published now is deleted again after it. */
    int rc = SB_OK;
    if (r->busy) {
        if (r->n_forgot + n > r->cap_forgot) {
            size_t cap = r->cap_forgot ? r->cap_forgot : 64;
            while (cap < r->n_forgot + n)
                cap *= 2;
            struct forgot *f = realloc(r->forgot, cap * sizeof *f);
            if (f) {
                r->forgot = f;
                r->cap_forgot = cap;
            }
        }
        for (size_t i = 0; i < n && r->n_forgot < r->cap_forgot; i++)
            r->forgot[r->n_forgot++] =
                (struct forgot){ ns->ns_id, { keys[i][0], keys[i][1] } };
    }
    sb_rc_exec(r->fg, ops, n);
    count_dels(r, ops, n);
    for (size_t i = 0; i < n; i++)
        if (ops[i].status != SB_RC_OK && ops[i].status != SB_RC_MISSING)
            rc = SB_ERR_IO;
    if (!drop && r->n_heap)
        rc = SB_ERR_NOMEM; /* (queued publications of them may still go out) */
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    for (size_t i = 0; i < nd; i++)
        item_free(drop[i]);
    free(drop);
    free(sorted);
    free(ops);
    free(names);
    return rc;
}

static void *publisher(void *arg)
{
    sb_remote *r = arg;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        /* Step 1. */
        while (!r->n_heap && !r->stop)
            pthread_cond_wait(&r->cv, &r->mu);
        if (r->stop)
            break;
        double allow = budget_wait(r); /* step 2 */
        if (r->stop)
            break;
        if (!r->n_heap)
            continue;
        /* Step 1's batch: what the bucket pays for (at least one page). */
        pub_item *b[PUB_BATCH];
        size_t n = 0;
        uint64_t bytes = 0;
        while (r->n_heap && n < PUB_BATCH &&
               (!n || (bytes + r->heap[0]->pg.ns.page_bytes <= allow &&
                       bytes < PUB_BATCH_BYTES))) {
            b[n] = heap_pop(r);
            bytes += b[n]->pg.ns.page_bytes;
            n++;
        }
        r->bucket -= (double)bytes;
        r->busy = true;
        pthread_mutex_unlock(&r->mu);
        bool sent[PUB_BATCH] = { false };
        if (!r->stop)
            publish_batch(r, b, n, sent);
        again(r, b, n, sent);
        for (size_t i = 0; i < n; i++) /* step 5 */
            item_free(b[i]);
        pthread_mutex_lock(&r->mu);
        r->queued_bytes -= bytes;
        r->st.queued_bytes = r->queued_bytes;
        r->busy = false;
        pthread_cond_broadcast(&r->cv);
        /* Step 6: room for what was denied. */
        if (r->want_room && r->cfg.room && !r->stop &&
            r->queued_bytes <= r->cfg.queue_bytes / 2) {
            r->want_room = false;
            pthread_mutex_unlock(&r->mu);
            r->cfg.room(r->cfg.room_ctx);
            pthread_mutex_lock(&r->mu);
        }
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

void sb_remote_flush(sb_remote *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    while ((r->n_heap || r->busy) && !r->stop)
        pthread_cond_wait(&r->cv, &r->mu);
    pthread_mutex_unlock(&r->mu);
}

void sb_remote_get_stats(sb_remote *r, sb_remote_stats *out)
{
    if (!r || !out)
        return;
    pthread_mutex_lock(&r->mu);
    *out = r->st;
    pthread_mutex_unlock(&r->mu);
}

/* ---- open / close ----------------------------------------------------------------- */

int sb_remote_open(const sb_remote_config *cfg, sb_remote **out, char *err, size_t err_len)
{
    if (!cfg || !out)
        return SB_ERR_INVAL;
    *out = NULL;
    if (cfg->compress_level > (uint32_t)sb_zlevel_max()) {
        if (err && err_len)
            snprintf(err, err_len, "compress level %u is over %d", cfg->compress_level,
                     sb_zlevel_max());
        return SB_ERR_INVAL;
    }
    sb_remote *r = calloc(1, sizeof *r);
    if (!r)
        return SB_ERR_NOMEM;
    r->cfg = *cfg;
    if (!r->cfg.timeout_ms)
        r->cfg.timeout_ms = 200;
    if (!r->cfg.publish_bytes_per_s)
        r->cfg.publish_bytes_per_s = 64ull << 20;
    if (!r->cfg.queue_bytes)
        r->cfg.queue_bytes = 256ull << 20;
    sb_rc_config rc = { .seeds = cfg->seeds, .user = cfg->user, .password = cfg->password,
                        .timeout_ms = r->cfg.timeout_ms, .clock_ns = cfg->clock_ns,
                        .clock_ctx = cfg->clock_ctx };
    int e = sb_rc_open(&rc, &r->fg, err, err_len);
    if (e == SB_OK) {
        /* The publisher waits longer: it is off the request path. */
        rc.timeout_ms = r->cfg.timeout_ms * 5;
        e = sb_rc_open(&rc, &r->bg, err, err_len);
    }
    if (e != SB_OK) {
        sb_rc_close(r->fg);
        free(r);
        return e;
    }
    r->cfg.seeds = r->cfg.user = r->cfg.password = NULL; /* the clients keep copies */
    if (cfg->seal) {
        r->seal = *cfg->seal;
        r->sealed = true;
    }
    r->cfg.seal = NULL;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    r->bucket = (double)r->cfg.publish_bytes_per_s;
    r->bucket_at = now_ns(r);
    if (pthread_create(&r->thread, NULL, publisher, r) != 0) {
        sb_rc_close(r->fg);
        sb_rc_close(r->bg);
        pthread_mutex_destroy(&r->mu);
        pthread_cond_destroy(&r->cv);
        free(r);
        return SB_ERR_NOMEM;
    }
    *out = r;
    return SB_OK;
}

void sb_remote_close(sb_remote *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    r->stop = true;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->thread, NULL);
    while (r->n_heap)
        item_free(heap_pop(r));
    free(r->heap);
    sb_rc_close(r->fg);
    sb_rc_close(r->bg);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r->forgot);
    free(r);
}
