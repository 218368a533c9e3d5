/* fuzz_index.c -- libFuzzer harness: the token index and RAM tier of
 * libsnapbank, checked against a reference model.
 *
 * Property. For any sequence of puts (copy mode), zero-copy commits,
 * matches, restores, releases, pins, unpins, clock advances, page holds,
 * copy-on-write and namespace reopens on a store with 1-3 tiny namespaces
 * under tight RAM budgets:
 *
 *   P1  sb_store_check passes after every operation, and the budgets hold
 *       (stats.ram_bytes <= ram_bytes, stats.ram_pages <= ram_pages, each
 *       namespace's bytes <= ns_ram_bytes). Stats counters never go back;
 *       lookups, hits, hit and miss tokens, puts, commits and cow_copies
 *       move by exactly what the call did.
 *   P2  every restore returns exactly the state of the requested prefix.
 *       State is a function of the token prefix (fz_chain), so every byte
 *       a restore, a page or a point state holds can be checked.
 *   P3  L never exceeds what the model allows: the longest common prefix of
 *       the request with a stored sequence, and for SB_LAYOUT_POINT_REQUIRED
 *       layouts a length at which a point state was stored. While nothing
 *       has been evicted (stats.evictions and stats.point_evictions both 0)
 *       L, n_matched_tokens, has_point and the miss reason are exactly the
 *       model's answer.
 *   P4  what is held stays: a held match restores the same bytes until
 *       released, a held page keeps its bytes, a live pin's prefix stays
 *       restorable to at least the length it had when pinned.
 *   P5  documented errors: a put that runs out of budget stores a prefix
 *       and says how long (what is restorable when it returns: a match
 *       right after finds exactly that); a commit that fails changes
 *       nothing (the caller's page array included); SB_ERR_BUDGET with
 *       nothing held outside the index means the request could not fit in
 *       an empty store; foreign pages, wrong or duplicated pages,
 *       out-of-range restores, unknown pins and over-long sequences get
 *       their codes; an injected allocation failure (sb_store_fault_alloc)
 *       gives SB_ERR_NOMEM and changes nothing but evictions, or is
 *       absorbed (an unmerged node is legal) and every property above
 *       still holds.
 *   P6  with nothing held outside the index, every allocated byte is
 *       indexed: ram_pages == indexed_pages, ram_bytes == indexed_bytes +
 *       point_bytes, pinned_pages == 0.
 *
 * Any violation prints the operation, what broke and a dump of every
 * namespace's tree, then abort()s. Everything is freed per input.
 * Set SB_FUZZ_TRACE=1 to print each operation as it runs.
 *
 * Input format (bytes past the end read as 0; fuzz/gen_index_seeds.py
 * writes seeds in it, keep the two in step):
 *
 *   OFFSET SIZE FIELD
 *   0      1    h0: n_ns = 1 + h0 % 3; bit 2: all namespaces share one scope;
 *               bit 3: the last namespace has the empty scope
 *   1      3    layout byte b of namespace 0, 1, 2:
 *                 page_tokens = 1 + b % 5
 *                 points      = b / 5 % 3   0 none, 1 optional,
 *                                           2 SB_LAYOUT_POINT_REQUIRED
 *                 n_tensors   = 1 + b / 15 % 2
 *                 vocab       = 2 + b / 30 % 4   token IDs from
 *                               { 0, 0xffffffff, 1, 1000, 7 } ("abcde")
 *   4      1    ram_pages:    v = b % 40; v >= 32: none, else 2 + v
 *   5      1    ram_bytes:    v = b % 40; v >= 32: 1 GiB,
 *                             else (2 + v) * 4096 + b / 40 * 16
 *   6      1    ns_ram_bytes: v = b % 40; v >= 24: none,
 *                             else (2 + v) * 4096 + b / 40 * 16
 *   7      1    max_seq_tokens: b >= 224: b - 223 (1..32), else 2^24
 *   8      ...  operations, until the input ends
 *
 * Every page is 4096 bytes (tensors are a few bytes per token), so the
 * budgets above hold 2..33 pages and eviction is the common case.
 *
 * An operation is one byte o: kind = o % 16, flags f = o / 16, then its
 * arguments. NS is one byte (namespace NS % n_ns). SEQ is a token sequence:
 *
 *   s: len = 1 + s % 32, mode = s / 32
 *     mode 0-4  fresh: len token bytes follow (token = ids[byte % vocab])
 *     mode 5-7  derived (fresh when the namespace has no recent sequence):
 *               byte i picks recent sequence i % n_recent of the namespace,
 *               its first min(len, its length) tokens are kept; byte e
 *               follows and then e % 8 fresh token bytes are appended
 *
 *   kind      args         what (flags f)
 *   0, 1 PUT   NS SEQ      sb_ns_put of the synthetic state; f&1 with a point
 *                          state; f&2 match it right after (restorable now);
 *                          f&4 on a layout without points pass one anyway
 *                          (SB_ERR_INVAL)
 *   2, 3 COMMIT NS SEQ x   zero-copy: f&2 match first and reuse the matched
 *                          pages (sb_match_pages, sb_page_writable on a
 *                          partial tail), else fresh pages for every region
 *                          (the index dedups them); fill, sb_ns_commit;
 *                          f&1 with a point; f&4 keep the page references
 *                          as held pages; f&8 release the match only after
 *                          the commit; x&7 == 7: replace region (x/8) % n
 *                          with held page (x/8) % n_held, x&7 == 6: with
 *                          the page of the next region (both must fail);
 *                          otherwise x&8 match it right after
 *   4 MATCH    NS SEQ      sb_ns_match, checked; held (f&1: released at once);
 *                          f&2 an sb_ns_lookup of it first, which must find
 *                          exactly what the match then finds
 *   5 RESTORE  i k         restore k % (L+1) tokens of held match i; f&1 with
 *                          the point when k == L; f&2 error paths
 *   6 RELEASE  i           release held match i
 *   7 PIN      NS SEQ t    sb_ns_pin, ttl_ms = t % 16, forever (0) when
 *                          t & 0x30 == 0x30
 *   8 UNPIN    i           unpin pin i (i == n_pins: an id never issued);
 *                          f&1 through another namespace (SB_ERR_NOT_FOUND)
 *   9 CLOCK    d           advance the store clock d % 32 ms; d / 32 > 0:
 *                          the next operation's first allocating call
 *                          (put, commit, match, pin, page alloc, writable)
 *                          runs with its (d / 32)-th allocation failing
 *   10 ALLOC   NS          hold a fresh page (sb_ns_page_alloc)
 *   11 UNREF   i           drop held page i
 *   12 MPAGES  i           hold every page of held match i (sb_match_pages);
 *                          f&1 also ask one past the end (SB_ERR_RANGE)
 *   13 WRITABLE i k        sb_page_writable(held page i, n_keep = k % (pt+2));
 *                          f&1 through another namespace (FOREIGN_PAGE)
 *   14 REOPEN  NS          close and reopen the namespace handle; a
 *                          mismatched layout is refused meanwhile
 *   15 CHECK               match and restore every stored sequence (the last
 *                          32 per namespace) and the stats
 */
#include <inttypes.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_index.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const fz_op_names[16] = {
    "put", "put", "commit", "commit", "match", "restore", "release", "pin",
    "unpin", "clock", "alloc", "unref", "mpages", "writable", "reopen", "check",
};

/* ---- one input ------------------------------------------------------------ */

static uint64_t fz_clock(void *ctx)
{
    return ((const fz *)ctx)->now_ns;
}

static void setup(fz *z)
{
    uint8_t h[FZ_HEADER];
    for (int i = 0; i < FZ_HEADER; i++)
        h[i] = fz_rd(z);
    z->n_ns = 1 + h[0] % 3;
    sb_config_default(&z->cfg);
    unsigned v = h[4] % 40;
    z->cfg.ram_pages = v >= 32 ? UINT64_MAX : 2 + v;
    v = h[5] % 40;
    z->cfg.ram_bytes = v >= 32 ? 1ull << 30 : (2 + v) * 4096ull + h[5] / 40 * 16;
    v = h[6] % 40;
    z->cfg.ns_ram_bytes = v >= 24 ? UINT64_MAX : (2 + v) * 4096ull + h[6] / 40 * 16;
    if (h[7] >= 224)
        z->cfg.max_seq_tokens = h[7] - 223u;
    z->cfg.clock_ns = fz_clock;
    z->cfg.clock_ctx = z;
    z->now_ns = 1000000000ull;
    int rc = sb_store_open(&z->cfg, &z->st);
    FZ_CHECK(z, rc == SB_OK && z->st, "sb_store_open: %s", sb_strerror(rc));

    for (int i = 0; i < z->n_ns; i++) {
        fz_ns *x = &z->ns[i];
        uint8_t b = h[1 + i];
        x->pt = 1 + b % 5;
        int points = b / 5 % 3;
        x->n_tensors = 1 + b / 15 % 2;
        x->vocab = 2 + b / 30 % 4;
        x->bpt[0] = 3 + 4 * (uint32_t)i;  /* 3, 7, 11 */
        x->bpt[1] = 16 - 5 * (uint32_t)i; /* 16, 11, 6 */
        x->point_bytes = points ? 24 + 8 * (uint32_t)i : 0;
        x->required = points == 2;
        x->seed = 0x5EED000000000000ull + (uint64_t)i * 0x1000193ull;
        snprintf(x->model_id, sizeof x->model_id, "model-%d", i);
        if ((h[0] & 8) && i == z->n_ns - 1)
            x->scope_bytes = 0;
        else if (h[0] & 4)
            x->scope_bytes = (size_t)snprintf(x->scope, sizeof x->scope, "tenant");
        else
            x->scope_bytes = (size_t)snprintf(x->scope, sizeof x->scope, "tenant-%d", i);
        x->lay = (sb_layout){ .model_id = x->model_id, .model_id_bytes = strlen(x->model_id),
                              .page_tokens = x->pt, .n_tensors = x->n_tensors,
                              .bytes_per_token = x->bpt, .point_bytes = x->point_bytes,
                              .flags = x->required ? SB_LAYOUT_POINT_REQUIRED : 0 };
        rc = fz_open_ns(z, x, &x->lay, &x->h);
        FZ_CHECK(z, rc == SB_OK && x->h, "sb_ns_open %d: %s", i, sb_strerror(rc));

        /* The page layout of snapbank.h. */
        size_t off = 0;
        for (uint32_t t = 0; t < x->n_tensors; t++) {
            x->off[t] = off;
            off += ((size_t)x->pt * x->bpt[t] + 63) / 64 * 64;
            FZ_CHECK(z, sb_ns_tensor_offset(x->h, t) == x->off[t], "tensor %u offset %zu, "
                     "want %zu", t, sb_ns_tensor_offset(x->h, t), x->off[t]);
        }
        x->page_bytes = (off + 4095) / 4096 * 4096;
        FZ_CHECK(z, sb_ns_tensor_offset(x->h, x->n_tensors) == (size_t)-1,
                 "offset of a tensor past the last");
        sb_ns_info info;
        FZ_CHECK(z, sb_ns_get_info(x->h, &info) == SB_OK && info.page_bytes == x->page_bytes &&
                        info.point_bytes == x->point_bytes && info.page_tokens == x->pt &&
                        info.n_tensors == x->n_tensors && info.flags == x->lay.flags,
                 "namespace %d geometry differs from the layout", i);
    }
    fz_stats(z, &z->last);
}

static void teardown(fz *z)
{
    z->op_name = "teardown";
    z->fault_nth = 0;
    while (z->n_match)
        fz_drop_match(z, z->n_match - 1);
    while (z->n_page)
        fz_drop_page(z, z->n_page - 1);
    for (int i = 0; i < z->n_pin; i++) {
        int rc = sb_ns_unpin(z->ns[z->pin[i].xi].h, z->pin[i].id);
        FZ_CHECK(z, rc == (fz_pin_live(z, &z->pin[i]) ? SB_OK : SB_ERR_NOT_FOUND),
                 "unpin at the end: %s", sb_strerror(rc));
    }
    z->n_pin = 0;
    fz_after_op(z);
    fz_check_all(z);
    for (int i = 0; i < z->n_ns; i++) {
        sb_ns_close(z->ns[i].h);
        free(z->ns[i].model);
    }
    sb_ns_close(NULL);
    sb_match_release(NULL);
    sb_page_unref(NULL);
    FZ_CHECK(z, sb_store_close(z->st) == SB_OK, "sb_store_close failed");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz *z = calloc(1, sizeof *z);
    if (!z)
        return 0;
    z->in = data;
    z->n_in = size;
    const char *tr = getenv("SB_FUZZ_TRACE");
    z->trace = tr && *tr && *tr != '0';
    setup(z);
    while (z->pos < z->n_in) {
        uint8_t o = fz_rd(z);
        int kind = o & 15;
        uint8_t fl = o >> 4;
        z->op_no++;
        z->op_name = fz_op_names[kind];
        if (z->trace)
            fprintf(stderr, "op %u: %s flags %x\n", z->op_no, z->op_name, fl);
        switch (kind) {
        case OP_PUT:
        case OP_PUT + 1:
            fz_op_put(z, fl);
            break;
        case OP_COMMIT:
        case OP_COMMIT + 1:
            fz_op_commit(z, fl);
            break;
        case OP_MATCH:
            fz_op_match(z, fl);
            break;
        case OP_RESTORE:
            fz_op_restore(z, fl);
            break;
        case OP_RELEASE:
            fz_op_release(z);
            break;
        case OP_PIN:
            fz_op_pin(z);
            break;
        case OP_UNPIN:
            fz_op_unpin(z, fl);
            break;
        case OP_CLOCK: {
            uint8_t d = fz_rd(z);
            z->now_ns += (uint64_t)(d % 32) * 1000000ull;
            z->fault_nth = d / 32;
            break;
        }
        case OP_ALLOC:
            fz_op_alloc(z);
            break;
        case OP_UNREF:
            fz_op_unref(z);
            break;
        case OP_MPAGES:
            fz_op_mpages(z, fl);
            break;
        case OP_WRITABLE:
            fz_op_writable(z, fl);
            break;
        case OP_REOPEN:
            fz_op_reopen(z);
            break;
        case OP_CHECK:
            fz_check_all(z);
            break;
        }
        if (kind != OP_CLOCK)
            fz_fault_disarm(z);
        fz_after_op(z);
    }
    teardown(z);
    free(z);
    return 0;
}
