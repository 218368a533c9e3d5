/* errworld.h -- the error tests' world (tests/test_errors.c and
 * tests/test_faults.c): a store with three namespaces of different layouts,
 * standard stored content, and probe prefixes, so a test can snapshot
 * everything a failing call must leave unchanged and compare after it. */
#ifndef SB_TEST_ERRWORLD_H
#define SB_TEST_ERRWORLD_H

#include "testutil.h"

#define W_NS 3
#define W_PROBES 64
#define W_TOK 64

/* A: plain pages with optional point states. B: a recurrent layout (a
 * restore needs a point at exactly L). C: one token per page, no points. */
extern const tu_layout LAY_A, LAY_B, LAY_C;
/* Same page geometry as A, another scope (for foreign pages). */
#define SCOPE_A "scope-a"
#define SCOPE_A2 "scope-a2"

enum { NA = 0, NB = 1, NC = 2 };

typedef struct probe {
    int ns;                 /* index into world.ns */
    size_t n;
    uint32_t tok[W_TOK];
} probe;

typedef struct world {
    sb_store *st;
    sb_ns *ns[W_NS];
    const tu_layout *lay[W_NS];
    uint64_t clock_ns;      /* the store clock (fake) */
    size_t n_probes;
    probe probes[W_PROBES];
    /* Sequences of the standard content (world_fill). */
    uint32_t a1[W_TOK], a2[W_TOK], a3[W_TOK], b1[W_TOK], c1[W_TOK];
} world;

/* What "nothing changed" compares. */
typedef struct snap {
    sb_stats s;
    sb_ns_info info[W_NS];
    size_t L[W_PROBES];
    int has_point[W_PROBES];
} snap;

/* A store (cfg, or the defaults; the clock is always the fake one) with
 * the three namespaces open and nothing stored. */
world *world_open(const sb_config *cfg_in);

/* Close the namespaces and the store. */
void world_free(world *w);

/* sb_store_check, then world_free. */
void world_close(world *w);

/* Remember tokens[0, n) of namespace ns as a probe for w_snap / w_same. */
void w_probe(world *w, int ns, const uint32_t *tok, size_t n);

/* Match tokens[0, n), restore L tokens (and the point when there is one)
 * and compare with the synthetic state. Returns L. */
size_t verify_match(sb_ns *ns, const tu_layout *l, const uint32_t *tok, size_t n,
                           int *has_point);

/* The restorable length of tokens[0, n) in namespace ns, verified. */
size_t w_len(world *w, int ns, const uint32_t *tok, size_t n);

/* What "nothing changed" compares: stats, namespace figures, probes. */
void w_snap(world *w, snap *s);

/* Assert the world is as w_snap saw it. */
void w_same(world *w, const snap *before);

/* world_open(NULL) filled with the standard content and its probes. */
world *world_std(void);

/* Fresh pages of ns holding the synthetic state of tok[0, n). */
void alloc_pages(sb_ns *ns, const tu_layout *l, const uint32_t *tok, size_t n,
                        sb_page **pages);

/* A valid one-identity layout over bpt, for the namespace error tests. */
sb_layout base_layout(const uint32_t *bpt, uint32_t n_tensors);

#endif /* SB_TEST_ERRWORLD_H */
