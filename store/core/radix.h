/* radix.h -- the token radix tree of one namespace: path-compressed edges of
 * uint32 token IDs, with the pages that cover them hung on the edges.
 *
 * Shape. Each node owns an edge: the tokens at depths [start, start + len)
 * of every sequence through it (the root has no edge). Children are keyed by
 * their first token, kept sorted; no two children share a first token. A
 * sequence that never branches is one node, however long, so a match is one
 * array compare per branch point, not one hop per page.
 *
 * Pages ride on the edges. Page r of a sequence covers depths
 * [r * pt, (r + 1) * pt) (pt = page_tokens). A node holds the pages whose
 * region END falls inside its edge, i.e. in (start, start + len]:
 *
 *     pt = 4, sequences A = a b c d e f g h i j   and   B = a b c d e f x y
 *
 *     root
 *      |  [0,6) "a b c d e f"    pages: A0 (ends at 4)
 *      +-- [6,10) "g h i j"      pages: A1 (ends at 8), A2' (partial: 8..10)
 *      +-- [6,8)  "x y"          pages: B1 (ends at 8)
 *
 * Region 1 ([4,8)) is shared by A and B up to depth 6 and differs after it,
 * so each branch holds its own page for it; the node "a b c d e f" holds no
 * page for region 1. A restore of "a b c d e f q" (6 tokens) takes A0 and
 * the first 2 token slices of A1 (or B1: any page below the stop point in
 * that region holds the same state for depths 4..6). That is what makes
 * restores exact to the token.
 *
 * Invariants (sb_store_check verifies them):
 *   I1  a non-root node has len >= 1 and start == parent's end.
 *   I2  node->pages[j] is region floor(start / pt) + j; a node holds a page
 *       for every full region ending in (start, end], plus, at a leaf whose
 *       end is not a multiple of pt, one partial page ending at its end.
 *       Only leaves hold partial pages.
 *   I3  every non-root leaf holds at least one page, the last covering its
 *       end. Hence every depth in the tree is covered by a page in its
 *       subtree, and the pages on a path are prefix-closed: no page without
 *       its parent page.
 *   I4  a point state sits at a node's end depth (node->point).
 *   I5  a non-root node with one child, no point and no partial page is
 *       merged into its child when possible (path compression); merging
 *       allocates, so a node left unmerged by an allocation failure is legal.
 *
 * Eviction takes only the LAST page of a leaf (a "leaf page") or a point
 * state, so I3 and prefix closure hold after every step. See the walkthrough
 * above sb_radix_evict_page in radix.c.
 *
 * Thread safety: every function expects the store mutex held.
 */
#ifndef SB_RADIX_H
#define SB_RADIX_H

#include "internal.h"

typedef struct sb_kid {
    uint32_t first;            /* the child's first edge token */
    sb_node *node;
} sb_kid;

/* One radix node. Diagram of a leaf with a 5-token edge, pt = 4:
 *
 *   parent --> +---------------------+
 *              | start = 14, len = 5 |   depths [14, 19)
 *              | tok ---------------------> [t14 t15 t16 t17 t18]
 *              | pages -------------------> [P3: region 3, depths 12..16, full;
 *              |                             P4: region 4, depths 16..19, partial]
 *              | kids --------------------> [] (an inner node: {first, node}
 *              |                             pairs sorted by first)
 *              | point -> state at depth 19, or NULL
 *              +---------------------+
 *
 * P3 began on the parent's edge (depths 12, 13) and ends on this one, so
 * this node holds it. Were this node not a leaf, P4 would not be here: the
 * child edges would hold region 4's pages.
 */
struct sb_node {
    sb_node *parent;           /* NULL for the root */
    uint32_t start;            /* depth of tok[0] */
    uint32_t len;              /* edge length; 0 only for the root */
    uint32_t tok_cap;          /* capacity of tok, tokens */
    uint32_t n_pages;          /* pages hung on this edge (I2) */
    uint32_t pages_cap;        /* capacity of pages */
    uint32_t n_kids;           /* children */
    uint32_t kids_cap;         /* capacity of kids */
    uint32_t *tok;             /* (len) edge tokens */
    sb_blk **pages;            /* (n_pages) index references */
    sb_kid *kids;              /* (n_kids) ascending by first */
    sb_blk *point;             /* point state at depth start + len */
};

static inline uint32_t sb_node_end(const sb_node *n)
{
    return n->start + n->len;
}

/* Where a walk stopped. */
typedef struct sb_walk {
    sb_node *node;             /* the node whose edge holds depth m, or the
                                  node ending at m (root when m == 0) */
    uint32_t off;              /* edge tokens of node matched; == node->len
                                  when the walk stopped at the node's end */
    size_t m;                  /* tokens matched */
    sb_node *point_node;       /* deepest node on the path with a point state
                                  and end <= m; NULL when none */
} sb_walk;

/* sb_radix_init / sb_radix_free -- create the root / free the whole tree,
 * unindexing every block it holds.
 * Returns (init): SB_OK; SB_ERR_NOMEM. */
int sb_radix_init(struct sb_ns *ns);
void sb_radix_free(struct sb_ns *ns);

/* sb_radix_walk -- match tokens[0, n) against the tree. When path is not
 * NULL it receives, at index r, the page of every full region r with
 * (r + 1) * pt <= m (it must have room for floor(n / pt) entries). */
void sb_radix_walk(struct sb_ns *ns, const uint32_t *tokens, size_t n,
                   sb_walk *w, sb_blk **path);

/* sb_radix_cover -- the page of region r that covers depth L, where
 * r * pt < L <= w->m and (r + 1) * pt > w->m: a page in the subtree below
 * the walk's stop point (it exists by I3). */
sb_blk *sb_radix_cover(struct sb_ns *ns, const sb_walk *w, uint32_t r);

/* An insertion planned in two steps, so allocation failures change nothing:
 * sb_radix_prepare allocates every node and array the insertion needs;
 * sb_radix_apply links them and cannot fail. */
typedef struct sb_plan {
    int kind;                  /* SB_PLAN_* */
    sb_node *top;              /* new upper half of a split node */
    sb_node *leaf;             /* new leaf */
} sb_plan;

enum {
    SB_PLAN_NONE = 0,          /* everything matched, at a node end */
    SB_PLAN_SPLIT = 1,         /* everything matched mid-edge; split for a point */
    SB_PLAN_EXTEND = 2,        /* append to the leaf the walk ended at */
    SB_PLAN_CHILD = 3,         /* new leaf under the node the walk ended at */
    SB_PLAN_SPLIT_CHILD = 4,   /* split mid-edge, then a new leaf under the top */
};

/* sb_radix_prepare -- plan inserting a sequence of n tokens (and a point
 * at n when want_point) after walk w matched its prefix.
 * Returns: SB_OK; SB_ERR_NOMEM (nothing changed, the plan holds nothing). */
int sb_radix_prepare(struct sb_ns *ns, const sb_walk *w, size_t n, bool want_point,
                     sb_plan *plan);

/* sb_radix_plan_drop -- free what an unapplied plan holds. */
void sb_radix_plan_drop(struct sb_ns *ns, sb_plan *plan);

/* sb_radix_apply -- carry out a prepared plan. fresh[0 .. n_fresh) are the
 * new pages for regions floor(w->m / pt) ..; the index takes a reference to
 * each (sb_blk_index). A partial page the new pages supersede is unindexed.
 * Returns the node ending at depth n (NULL when n is mid-edge and no point
 * was planned). */
sb_node *sb_radix_apply(struct sb_ns *ns, const sb_walk *w,
                        const uint32_t *tokens, size_t n, sb_plan *plan,
                        sb_blk **fresh, size_t n_fresh);

/* sb_radix_evict_page -- unindex leaf page b (the last page of a leaf) and
 * everything that only it covered: the edge tail, point states on it, and
 * nodes left empty. */
void sb_radix_evict_page(struct sb_ns *ns, sb_blk *b);

/* sb_radix_remove -- unindex what sb_ns_remove of tokens[0, n) takes
 * (snapbank.h): every page of region n / pt or later and every point
 * state on a path through the prefix, and a point state between depths
 * (n / pt) * pt and n left without cover; w is a walk that matched all n
 * tokens (w->m == n >= 1). gone(ctx, b) sees each block just before it
 * is unindexed (gone must not change the tree). */
void sb_radix_remove(struct sb_ns *ns, const sb_walk *w, size_t n,
                     void (*gone)(void *ctx, sb_blk *b), void *ctx);

/* sb_radix_drop_point -- unindex the point state of node, merging the node
 * into its only child when that is now possible. */
void sb_radix_drop_point(struct sb_ns *ns, sb_node *node);

/* sb_radix_prev_page -- the page of region b->region - 1 on b's path (the
 * page b's content key chains from); NULL for region 0. */
sb_blk *sb_radix_prev_page(struct sb_ns *ns, const sb_blk *b);

/* sb_radix_page_above -- the page of region r held by node or one of its
 * ancestors (pt: page_tokens); NULL when none is. */
sb_blk *sb_radix_page_above(const sb_node *node, uint32_t pt, uint32_t r);

/* sb_radix_is_leaf_page -- b is the last page of a leaf node. */
bool sb_radix_is_leaf_page(const sb_blk *b);

/* sb_radix_visit -- call fn on every block ns indexes, depth first, each
 * node's pages in order and then its point state, so a block comes after
 * every block before it on its path. fn must not change the tree.
 * Returns: SB_OK; SB_ERR_NOMEM (no room for the walk's stack: some blocks
 * were not visited). */
int sb_radix_visit(struct sb_ns *ns, void (*fn)(void *ctx, sb_blk *b), void *ctx);

/* sb_radix_lcp -- length of the common prefix of a[0, n) and b[0, n). */
size_t sb_radix_lcp(const uint32_t *a, const uint32_t *b, size_t n);

#endif /* SB_RADIX_H */
