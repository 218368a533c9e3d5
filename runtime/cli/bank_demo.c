/* bank_demo.c -- `snapbank bank-demo`: scripted multi-turn chat sessions over synthetic
 * KV state, run the way an inference runtime uses the bank (zero-copy pages,
 * copy-on-write tails, prompt commit before decode), printing per turn what
 * was reused and checking every restored byte.
 *
 * The synthetic state of token i of tensor t is a pseudo-random function of
 * (tokens[0..i], t), as real KV rows depend on the whole prefix: a restore
 * that returned the wrong page, or a page of another prefix, would not
 * verify. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "snapbank.h"

#define VOCAB 32000u

typedef struct demo_opts {
    uint32_t page_tokens;   /* tokens per page */
    uint32_t layers;        /* K and V tensors per layer */
    uint32_t kv_bytes;      /* bytes per token of one tensor */
    uint32_t system_tokens; /* shared system prompt length */
    uint32_t turns;         /* turns of the longest session */
    uint64_t ram_mb;        /* RAM budget */
    uint64_t seed;
} demo_opts;

typedef struct demo_session {
    const char *scope;      /* tenant */
    const char *name;
    sb_ns *ns;
    uint32_t *tokens;       /* (n) committed tokens */
    size_t n, cap;
    uint64_t rng;
    unsigned turn;
} demo_session;

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Prefix hash: h_i depends on every token up to i. */
static uint64_t prefix_step(uint64_t h, uint32_t tok)
{
    uint64_t s = h ^ ((uint64_t)tok * 0xD6E8FEB86659FD93ull);
    return splitmix(&s);
}

/* The synthetic state slice of one token of one tensor. */
static void synth(uint8_t *dst, uint32_t bytes, uint64_t h, uint32_t tensor)
{
    uint64_t s = h ^ ((uint64_t)(tensor + 1) << 48);
    for (uint32_t i = 0; i < bytes; i += 8) {
        uint64_t v = splitmix(&s);
        memcpy(dst + i, &v, bytes - i < 8 ? bytes - i : 8);
    }
}

static int push_tokens(demo_session *s, size_t n, uint32_t *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = (uint32_t)(splitmix(&s->rng) % VOCAB);
    return 0;
}

static int fail(const char *what, int rc)
{
    fprintf(stderr, "snapbank bank-demo: %s: %s\n", what, sb_strerror(rc));
    return 1;
}

/* Compute the synthetic state of tokens[from, to) into the page table,
 * allocating pages and copying-on-write the partial page at `from`. */
static int compute(const demo_opts *o, sb_ns *ns, const uint32_t *tokens, size_t from,
                   size_t to, sb_page **pages)
{
    uint32_t pt = o->page_tokens, n_t = o->layers * 2;
    if (from % pt) {
        int rc = sb_page_writable(ns, &pages[from / pt], (uint32_t)(from % pt));
        if (rc)
            return fail("copy-on-write of the tail page", rc);
    }
    uint64_t h = 0;
    for (size_t i = 0; i < to; i++) {
        h = prefix_step(h, tokens[i]);
        if (i < from)
            continue;
        size_t r = i / pt;
        if (!pages[r]) {
            int rc = sb_ns_page_alloc(ns, &pages[r]);
            if (rc == SB_ERR_BUDGET) {
                fprintf(stderr, "snapbank bank-demo: this session's context (%zu tokens) needs more "
                                "pages than the RAM budget holds; raise --ram-mb\n", to);
                return 1;
            }
            if (rc)
                return fail("page allocation", rc);
        }
        uint8_t *page = sb_page_data(pages[r]);
        for (uint32_t t = 0; t < n_t; t++)
            synth(page + sb_ns_tensor_offset(ns, t) + (i % pt) * o->kv_bytes, o->kv_bytes, h, t);
    }
    return 0;
}

/* Restore tokens[0, n) in copy mode and compare with the synthetic state. */
static int verify(const demo_opts *o, sb_ns *ns, const uint32_t *tokens, size_t n, bool *ok)
{
    uint32_t n_t = o->layers * 2;
    sb_match *m;
    int rc = sb_ns_match(ns, tokens, n, &m);
    if (rc)
        return fail("verify match", rc);
    sb_match_info info;
    sb_match_get_info(m, &info);
    void **bufs = calloc(n_t, sizeof *bufs);
    uint8_t *want = malloc(o->kv_bytes);
    int ret = 0;
    *ok = info.n_tokens == n;
    for (uint32_t t = 0; bufs && t < n_t; t++)
        if (!(bufs[t] = malloc(n * o->kv_bytes)))
            ret = 1;
    if (!bufs || !want || ret) {
        ret = fail("verify buffers", SB_ERR_NOMEM);
    } else if ((rc = sb_match_restore(m, info.n_tokens, bufs, NULL))) {
        ret = fail("verify restore", rc);
    } else {
        uint64_t h = 0;
        for (size_t i = 0; i < info.n_tokens && *ok; i++) {
            h = prefix_step(h, tokens[i]);
            for (uint32_t t = 0; t < n_t && *ok; t++) {
                synth(want, o->kv_bytes, h, t);
                if (memcmp((uint8_t *)bufs[t] + i * o->kv_bytes, want, o->kv_bytes))
                    *ok = false;
            }
        }
    }
    for (uint32_t t = 0; bufs && t < n_t; t++)
        free(bufs[t]);
    free(bufs);
    free(want);
    sb_match_release(m);
    return ret;
}

static void release_pages(sb_page **pages, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        sb_page_unref(pages[i]);
        pages[i] = NULL;
    }
}

/* One chat turn: user text, prefill from the bank, commit, decode, commit. */
static int turn(const demo_opts *o, sb_store *st, demo_session *s, const uint32_t *system,
                bool *all_ok)
{
    uint32_t pt = o->page_tokens;
    size_t user = 40 + splitmix(&s->rng) % 80, answer = 30 + splitmix(&s->rng) % 60;
    size_t need = (s->n ? s->n : o->system_tokens) + user + answer;
    if (need > s->cap) {
        uint32_t *t = realloc(s->tokens, need * sizeof *t);
        if (!t)
            return fail("tokens", SB_ERR_NOMEM);
        s->tokens = t;
        s->cap = need;
    }
    if (!s->n) {
        memcpy(s->tokens, system, o->system_tokens * sizeof *system);
        s->n = o->system_tokens;
    }
    push_tokens(s, user, s->tokens + s->n);
    size_t n_prompt = s->n + user, n_full = n_prompt + answer;

    sb_stats before;
    sb_store_stats(st, &before);

    /* Match the prompt and map the matched pages, no copy. */
    sb_match *m;
    int rc = sb_ns_match(s->ns, s->tokens, n_prompt, &m);
    if (rc)
        return fail("match", rc);
    sb_match_info info;
    sb_match_get_info(m, &info);
    size_t n_slots = (n_full + pt - 1) / pt;
    sb_page **pages = calloc(n_slots, sizeof *pages);
    if (!pages) {
        sb_match_release(m);
        return fail("page table", SB_ERR_NOMEM);
    }
    rc = sb_match_pages(m, 0, info.n_pages, pages);
    sb_match_release(m);
    if (rc) {
        free(pages);
        return fail("map pages", rc);
    }

    /* Prefill the rest, commit the prompt (so the next turn reuses it even
     * if the answer differs), decode, commit the whole turn. */
    int ret = compute(o, s->ns, s->tokens, info.n_tokens, n_prompt, pages);
    if (!ret && (rc = sb_ns_commit(s->ns, s->tokens, n_prompt, pages, NULL)))
        ret = fail("commit prompt", rc);
    if (!ret) {
        push_tokens(s, answer, s->tokens + n_prompt);
        ret = compute(o, s->ns, s->tokens, n_prompt, n_full, pages);
    }
    if (!ret && (rc = sb_ns_commit(s->ns, s->tokens, n_full, pages, NULL)))
        ret = fail("commit turn", rc);
    release_pages(pages, n_slots);
    free(pages);
    if (ret)
        return ret;
    s->n = n_full;
    s->turn++;

    bool ok;
    if (verify(o, s->ns, s->tokens, s->n, &ok))
        return 1;
    *all_ok &= ok;
    sb_stats after;
    sb_store_stats(st, &after);
    printf("%-9s %-8s %4u %7zu %8zu %7zu %6" PRIu64 " %9.1f  %-10s %s\n", s->scope, s->name,
           s->turn, n_prompt, info.n_tokens, info.n_pages, after.pages_new - before.pages_new,
           after.ram_bytes / 1048576.0, sb_miss_name(info.miss), ok ? "ok" : "MISMATCH");
    return 0;
}

static void demo_usage(FILE *f)
{
    fprintf(f,
            "usage: snapbank bank-demo [options]\n\n"
            "Runs scripted chat sessions against an in-RAM bank: two tenants (scopes),\n"
            "three sessions, one shared system prompt. Each turn matches its prompt,\n"
            "maps the matched pages without copying, computes synthetic KV state for\n"
            "the new tokens, commits, and verifies every byte a restore returns.\n\n"
            "per turn: prompt tokens, matched (tokens restored from the bank), pages\n"
            "reused, pages new (added to the bank), RAM MiB held, miss reason, verify.\n\n"
            "options:\n"
            "  --page-tokens N    tokens per page (default 16)\n"
            "  --layers N         layers; each has a K and a V tensor (default 4)\n"
            "  --kv-bytes N       bytes per token per tensor (default 512)\n"
            "  --system-tokens N  shared system prompt length (default 1000)\n"
            "  --turns N          turns of the longest session (default 4)\n"
            "  --ram-mb N         RAM budget in MiB (default 256)\n"
            "  --seed N           token stream seed (default 1)\n");
}

static int parse_u64(const char *opt, const char *v, uint64_t lo, uint64_t hi, uint64_t *out)
{
    char *end;
    unsigned long long x = v ? strtoull(v, &end, 10) : 0;
    if (!v || !*v || *end || x < lo || x > hi) {
        fprintf(stderr, "snapbank bank-demo: %s needs a number in [%" PRIu64 ", %" PRIu64 "]\n",
                opt, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

int sb_cli_bank_demo(int argc, char **argv)
{
    demo_opts o = { .page_tokens = 16, .layers = 4, .kv_bytes = 512, .system_tokens = 1000,
                    .turns = 4, .ram_mb = 256, .seed = 1 };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t x;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            demo_usage(stdout);
            return 0;
        }
#define OPT(name, field, lo, hi)                                                        \
    if (!strcmp(a, name)) {                                                             \
        if (parse_u64(name, v, lo, hi, &x))                                             \
            return 2;                                                                   \
        o.field = x;                                                                    \
        i++;                                                                            \
        continue;                                                                       \
    }
        OPT("--page-tokens", page_tokens, 1, 4096)
        OPT("--layers", layers, 1, 128)
        OPT("--kv-bytes", kv_bytes, 1, 65536)
        OPT("--system-tokens", system_tokens, 1, 1u << 20)
        OPT("--turns", turns, 1, 1000)
        OPT("--ram-mb", ram_mb, 1, 1u << 20)
        OPT("--seed", seed, 0, UINT64_MAX)
#undef OPT
        fprintf(stderr, "snapbank bank-demo: unknown option '%s'\n\n", a);
        demo_usage(stderr);
        return 2;
    }

    sb_config cfg;
    sb_config_default(&cfg);
    cfg.ram_bytes = o.ram_mb << 20;
    sb_store *st;
    int rc = sb_store_open(&cfg, &st);
    if (rc)
        return fail("open store", rc);

    uint32_t n_t = o.layers * 2;
    uint32_t *bpt = malloc(n_t * sizeof *bpt);
    uint32_t *system = malloc(o.system_tokens * sizeof *system);
    if (!bpt || !system) {
        free(bpt);
        free(system);
        sb_store_close(st);
        return fail("setup", SB_ERR_NOMEM);
    }
    for (uint32_t t = 0; t < n_t; t++)
        bpt[t] = o.kv_bytes;
    uint64_t srng = o.seed * 7919 + 17;
    for (uint32_t i = 0; i < o.system_tokens; i++)
        system[i] = (uint32_t)(splitmix(&srng) % VOCAB);
    static const char model_id[] = "snapbank-demo synthetic model v1";
    sb_layout lay = { .model_id = model_id, .model_id_bytes = sizeof model_id - 1,
                      .page_tokens = o.page_tokens, .n_tensors = n_t, .bytes_per_token = bpt };

    demo_session ses[3] = {
        { .scope = "tenant-a", .name = "alice", .rng = o.seed * 1000003 + 0xA11CE },
        { .scope = "tenant-a", .name = "bob", .rng = o.seed * 1000003 + 0xB0B },
        { .scope = "tenant-b", .name = "carol", .rng = o.seed * 1000003 + 0xCA201 },
    };
    int ret = 0;
    for (int i = 0; i < 3 && !ret; i++) {
        rc = sb_ns_open(st, &lay, ses[i].scope, strlen(ses[i].scope), &ses[i].ns);
        if (rc)
            ret = fail("open namespace", rc);
    }
    sb_ns_info ni = { 0 };
    if (!ret)
        sb_ns_get_info(ses[0].ns, &ni);
    if (!ret)
        printf("snapbank bank-demo: %u tensors x %u B/token, %u tokens/page (%zu KiB pages), "
               "system prompt %u tokens, RAM budget %" PRIu64 " MiB\n\n",
               n_t, o.kv_bytes, o.page_tokens, ni.page_bytes / 1024, o.system_tokens,
               o.ram_mb);
    printf("%-9s %-8s %4s %7s %8s %7s %6s %9s  %-10s %s\n", "scope", "session", "turn",
           "prompt", "matched", "reused", "new", "ram_MiB", "miss", "verify");

    /* The script: alice chats; bob (same tenant) starts on the shared system
     * prompt; carol (another tenant) shares nothing. */
    static const int order[] = { 0, 0, 1, 0, 2, 1, 0, 2 };
    unsigned max_turns[3] = { o.turns, o.turns > 2 ? o.turns / 2 : 1, o.turns > 2 ? o.turns / 2 : 1 };
    bool ok = true;
    for (unsigned round = 0; !ret && round < o.turns; round++)
        for (size_t k = 0; !ret && k < sizeof order / sizeof *order; k++) {
            demo_session *s = &ses[order[k]];
            /* Walk the script; each session takes its turns in order. */
            unsigned want = (unsigned)(round * 4 + k) / 2;
            if (s->turn < max_turns[order[k]] && s->turn <= want)
                ret = turn(&o, st, s, system, &ok);
        }

    if (!ret) {
        sb_stats s;
        sb_store_stats(st, &s);
        printf("\nbank (lookups include the verify step): %" PRIu64 " lookups, %" PRIu64 " hits, %" PRIu64 " tokens restored, %"
               PRIu64 " computed; %" PRIu64 " pages indexed (%.1f MiB), %" PRIu64
               " evicted; index %.2f bytes/token\n",
               s.lookups, s.hits, s.hit_tokens, s.miss_tokens, s.indexed_pages,
               s.indexed_bytes / 1048576.0, s.evictions, s.index_bytes_per_token);
        printf("verify: %s\n", ok ? "every restored byte matched its prefix's state"
                                  : "MISMATCH: a restore returned wrong state");
        if (!ok)
            ret = 1;
    }
    for (int i = 0; i < 3; i++) {
        sb_ns_close(ses[i].ns);
        free(ses[i].tokens);
    }
    free(bpt);
    free(system);
    sb_store_close(st);
    return ret;
}
