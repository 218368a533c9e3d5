/* bench_layers.c -- a layer-by-layer restore overlapped with a stand-in
 * compute loop, beside a blocking restore of every layer, from disk after
 * a restart and from RAM.
 *
 * Description: on a real directory (--dir, default /var/tmp), a store
 * holds one prompt of --tokens (8000) tokens of a model of --layers (8)
 * layers, K and V of --kv-bytes (1024: 8 heads x 64 dims in f16) per token
 * each, in pages of 16 tokens, put from an engine's paged pool (blocks of
 * 16 tokens, shuffled). The engine's stand-in compute of a layer reads
 * that layer's K and V rows of every token from its pool --passes (4)
 * times. Each round (--rounds, 5; the two ways alternate, each on a store
 * reopened so that every page is on disk only):
 *   - blocking: sb_match_restore_blocks of every tensor, then the compute
 *     of each layer in turn; the first layer is usable when the restore
 *     returns;
 *   - layer-wise: sb_match_load_start of every page, sb_load_wait, then
 *     for each layer sb_match_restore_blocks of its K and V and its
 *     compute; the first layer is usable after its restore;
 * and then both again with the pages resident (a second match in the same
 * store): the RAM case. Medians over the rounds: time to the first layer
 * usable, total time, and the goal's bound: the whole load's time / layers
 * plus one I/O (one page read: the load time / pages). Every restored row
 * is checked byte for byte (exit 1 on a mismatch or a failed call);
 * figures are printed, never asserted.
 *
 * A page record holds every tensor of its tokens under one checksum, so a
 * layer from disk is usable only once every page of the prompt was read
 * and checked: from disk the first layer cannot come before the whole
 * load. The figures show by how much the goal is missed there and met
 * from RAM.
 *
 * --quick: 1024 tokens, 2 rounds.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BENCH_NAME "bench_layers"
#include "bench_util.h"

#define PT 16u     /* bank page and engine block, in tokens */
#define MAXR 32

typedef struct opts {
    const char *dir;
    uint32_t tokens, layers, kv_bytes, passes;
    int rounds;
} opts;

typedef struct engine {
    uint32_t n_tensors;
    uint32_t n_blocks;
    uint8_t **pool;            /* per tensor: n_blocks blocks of PT rows */
    uint32_t *table;           /* the prompt's block table (shuffled) */
    sb_block_table *bt;
} engine;

static uint8_t byte_of(uint32_t tok, uint32_t pos, uint32_t t, uint32_t i)
{
    return (uint8_t)mix(((uint64_t)tok << 32) ^ ((uint64_t)pos << 12) ^ (t << 8) ^ (i / 8)) ^
           (uint8_t)i;
}

static uint8_t *row(engine *e, uint32_t t, uint32_t pos, uint32_t kv)
{
    return e->pool[t] + ((size_t)e->table[pos / PT] * PT + pos % PT) * kv;
}

static void engine_init(engine *e, const opts *o)
{
    e->n_tensors = 2 * o->layers;
    e->n_blocks = (o->tokens + PT - 1) / PT;
    e->pool = calloc(e->n_tensors, sizeof *e->pool);
    e->bt = calloc(e->n_tensors, sizeof *e->bt);
    e->table = malloc(e->n_blocks * sizeof *e->table);
    for (uint32_t b = 0; b < e->n_blocks; b++)
        e->table[b] = b;
    uint64_t rng = 7;
    for (uint32_t b = e->n_blocks; b > 1; b--) {
        rng = mix(rng);
        uint32_t j = (uint32_t)(rng % b), tmp = e->table[b - 1];
        e->table[b - 1] = e->table[j];
        e->table[j] = tmp;
    }
    for (uint32_t t = 0; t < e->n_tensors; t++) {
        e->pool[t] = aligned_alloc(64, (size_t)e->n_blocks * PT * o->kv_bytes);
        if (!e->pool[t])
            check(SB_ERR_NOMEM, "pool");
        e->bt[t] = (sb_block_table){ .base = e->pool[t], .block_tokens = PT,
                                     .block_ids = e->table,
                                     .block_stride = (size_t)PT * o->kv_bytes,
                                     .token_stride = o->kv_bytes };
    }
}

static void engine_fill(engine *e, const opts *o, const uint32_t *tok)
{
    for (uint32_t t = 0; t < e->n_tensors; t++)
        for (uint32_t p = 0; p < o->tokens; p++) {
            uint8_t *r = row(e, t, p, o->kv_bytes);
            for (uint32_t i = 0; i < o->kv_bytes; i++)
                r[i] = byte_of(tok[p], p, t, i);
        }
}

static void engine_clear(engine *e, const opts *o)
{
    for (uint32_t t = 0; t < e->n_tensors; t++)
        memset(e->pool[t], 0, (size_t)e->n_blocks * PT * o->kv_bytes);
}

static void engine_expect(engine *e, const opts *o, const uint32_t *tok)
{
    for (uint32_t t = 0; t < e->n_tensors; t++)
        for (uint32_t p = 0; p < o->tokens; p++) {
            const uint8_t *r = row(e, t, p, o->kv_bytes);
            for (uint32_t i = 0; i < o->kv_bytes; i++)
                if (r[i] != byte_of(tok[p], p, t, i)) {
                    fprintf(stderr, BENCH_NAME ": tensor %u position %u byte %u is wrong\n", t,
                            p, i);
                    exit(1);
                }
        }
}

/* The stand-in compute of layer l: read its K and V rows `passes` times. */
static volatile uint64_t sink;

static void compute(engine *e, const opts *o, uint32_t l)
{
    uint64_t acc = 0;
    for (uint32_t pass = 0; pass < o->passes; pass++)
        for (uint32_t t = 2 * l; t < 2 * l + 2; t++)
            for (uint32_t p = 0; p < o->tokens; p++) {
                const uint64_t *r = (const uint64_t *)row(e, t, p, o->kv_bytes);
                for (uint32_t i = 0; i < o->kv_bytes / 8; i++)
                    acc += r[i] ^ (acc >> 3);
            }
    sink += acc;
}

static sb_store *open_store(const opts *o)
{
    sb_config c;
    sb_config_default(&c);
    c.dir = o->dir;
    c.ram_bytes = 4ull << 30;
    c.disk_bytes = 8ull << 30;
    c.max_seq_tokens = o->tokens;
    c.min_prefix_tokens = 1;
    sb_store *st = NULL;
    check(sb_store_open(&c, &st), "sb_store_open");
    return st;
}

static sb_ns *open_ns(sb_store *st, const opts *o)
{
    uint32_t bpt[2 * 64];
    for (uint32_t t = 0; t < 2 * o->layers; t++)
        bpt[t] = o->kv_bytes;
    sb_layout lay = { .model_id = "bench_layers", .model_id_bytes = 12, .page_tokens = PT,
                      .n_tensors = 2 * o->layers, .bytes_per_token = bpt };
    sb_ns *ns = NULL;
    check(sb_ns_open(st, &lay, NULL, 0, &ns), "sb_ns_open");
    return ns;
}

typedef struct times {
    double first, total, load;  /* seconds from the match */
} times;

static sb_match *match_all(sb_ns *ns, const uint32_t *tok, const opts *o)
{
    sb_match *m = NULL;
    check(sb_ns_match(ns, tok, o->tokens, &m), "sb_ns_match");
    sb_match_info info;
    check(sb_match_get_info(m, &info), "sb_match_get_info");
    if (info.n_tokens != o->tokens) {
        fprintf(stderr, BENCH_NAME ": the match holds %zu of %u tokens\n", info.n_tokens,
                o->tokens);
        exit(1);
    }
    return m;
}

static times blocking(sb_ns *ns, engine *e, const opts *o, const uint32_t *tok)
{
    engine_clear(e, o);
    times r;
    double t0 = now_s();
    sb_match *m = match_all(ns, tok, o);
    check(sb_match_restore_blocks(m, 0, o->tokens, 0, e->n_tensors, e->bt), "restore_blocks");
    r.first = r.load = now_s() - t0;
    for (uint32_t l = 0; l < o->layers; l++)
        compute(e, o, l);
    r.total = now_s() - t0;
    sb_match_release(m);
    engine_expect(e, o, tok);
    return r;
}

static times layerwise(sb_ns *ns, engine *e, const opts *o, const uint32_t *tok)
{
    engine_clear(e, o);
    times r;
    double t0 = now_s();
    sb_match *m = match_all(ns, tok, o);
    sb_load *ld = NULL; /* every page: the blocks are pages (both PT tokens) */
    check(sb_match_load_start(m, e->n_blocks, 0, &ld), "sb_match_load_start");
    check(sb_load_wait(ld, SIZE_MAX, -1, NULL), "sb_load_wait");
    r.load = now_s() - t0;
    for (uint32_t l = 0; l < o->layers; l++) {
        check(sb_match_restore_blocks(m, 0, o->tokens, 2 * l, 2, e->bt + 2 * l),
              "restore_blocks of a layer");
        if (l == 0)
            r.first = now_s() - t0;
        compute(e, o, l);
    }
    r.total = now_s() - t0;
    sb_load_free(ld);
    sb_match_release(m);
    engine_expect(e, o, tok);
    return r;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_layers [--quick] [--dir DIR] [--tokens N] [--layers N] "
                    "[--kv-bytes N] [--passes N] [--rounds N]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    opts o = { "/var/tmp", 8000, 8, 1024, 4, 5 };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quick")) {
            o.tokens = 1024;
            o.rounds = 2;
            continue;
        }
        if (!v)
            usage();
        if (!strcmp(a, "--dir"))
            o.dir = v;
        else if (!strcmp(a, "--tokens"))
            o.tokens = (uint32_t)strtoul(v, NULL, 10);
        else if (!strcmp(a, "--layers"))
            o.layers = (uint32_t)strtoul(v, NULL, 10);
        else if (!strcmp(a, "--kv-bytes"))
            o.kv_bytes = (uint32_t)strtoul(v, NULL, 10);
        else if (!strcmp(a, "--passes"))
            o.passes = (uint32_t)strtoul(v, NULL, 10);
        else if (!strcmp(a, "--rounds"))
            o.rounds = atoi(v);
        else
            usage();
        i++;
    }
    if (!o.tokens || !o.layers || o.layers > 64 || !o.kv_bytes || o.kv_bytes % 8 ||
        o.rounds < 1 || o.rounds > MAXR)
        usage();
    char dir[512];
    snprintf(dir, sizeof dir, "%s/sb-bench-layers-%d", o.dir, (int)getpid());
    if (mkdir(dir, 0700) != 0) {
        perror(dir);
        return 1;
    }
    o.dir = dir;

    uint32_t *tok = malloc(o.tokens * sizeof *tok);
    for (uint32_t p = 0; p < o.tokens; p++)
        tok[p] = (uint32_t)(mix(p) % 150000);
    engine e;
    engine_init(&e, &o);
    engine_fill(&e, &o, tok);
    sb_store *st = open_store(&o);
    sb_ns *ns = open_ns(st, &o);
    check(sb_ns_put_blocks(ns, tok, o.tokens, 0, e.bt, NULL, NULL, NULL), "sb_ns_put_blocks");
    check(sb_store_flush(st), "sb_store_flush");
    sb_ns_close(ns);
    check(sb_store_close(st), "sb_store_close");

    double state_mib = (double)o.tokens * e.n_tensors * o.kv_bytes / (1 << 20);
    printf("bench_layers: %u tokens, %u layers (K and V of %u bytes per token), %.1f MiB of "
           "state in %u pages; compute: %u passes over a layer; %d rounds, load %.2f\n",
           o.tokens, o.layers, o.kv_bytes, state_mib, e.n_blocks, o.passes, o.rounds,
           load_average());
    double v[4][3][MAXR]; /* way (disk blocking, disk layer-wise, RAM ...) x figure x round */
    for (int r = 0; r < o.rounds; r++) {
        for (int k = 0; k < 2; k++) {
            bool lw = (r + k) % 2; /* alternate which goes first */
            st = open_store(&o);
            ns = open_ns(st, &o);
            times d = lw ? layerwise(ns, &e, &o, tok) : blocking(ns, &e, &o, tok);
            times m = lw ? layerwise(ns, &e, &o, tok) : blocking(ns, &e, &o, tok);
            int wd = lw ? 1 : 0, wm = lw ? 3 : 2;
            v[wd][0][r] = d.first, v[wd][1][r] = d.total, v[wd][2][r] = d.load;
            v[wm][0][r] = m.first, v[wm][1][r] = m.total, v[wm][2][r] = m.load;
            sb_ns_close(ns);
            check(sb_store_close(st), "sb_store_close");
        }
    }
    const char *names[4] = { "disk, blocking  ", "disk, layer-wise", "RAM, blocking   ",
                             "RAM, layer-wise " };
    double med[4][3];
    printf("%-18s %12s %12s %12s\n", "", "first layer", "total", "load");
    for (int w = 0; w < 4; w++) {
        for (int f = 0; f < 3; f++)
            med[w][f] = median(v[w][f], o.rounds) * 1e3;
        printf("%-18s %9.2f ms %9.2f ms %9.2f ms\n", names[w], med[w][0], med[w][1], med[w][2]);
    }
    for (int place = 0; place < 2; place++) {
        double whole = med[2 * place][2]; /* the blocking restore of every layer */
        double bound = whole / o.layers + whole / e.n_blocks;
        double first = med[2 * place + 1][0];
        printf("GOAL %s: first layer after %.2f ms, bound %.2f ms (whole restore %.2f ms / %u "
               "layers + one page's I/O): %s (%.2fx the bound)\n",
               place ? "RAM " : "disk", first, bound, whole, o.layers,
               first <= bound ? "met" : "missed", first / bound);
    }
    free(tok);
    for (uint32_t t = 0; t < e.n_tensors; t++)
        free(e.pool[t]);
    free(e.pool);
    free(e.bt);
    free(e.table);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, BENCH_NAME ": could not remove %s\n", dir);
    return 0;
}
