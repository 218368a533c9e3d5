#!/usr/bin/env python3
"""gen_index_seeds.py -- write the seed corpus of fuzz_index (fuzz/corpus/index/).

Each seed is a short script in fuzz_index.c's input format (see the comment at
the top of fuzz/fuzz_index.c; keep the two in step). Seeds are built from
named operations so they keep their meaning when the encoding changes: edit
the encoders below and rerun

    python3 fuzz/gen_index_seeds.py            # writes fuzz/corpus/index/
    python3 fuzz/gen_index_seeds.py OUT_DIR

Files named seed-* are rewritten; any other file in the directory (regression
inputs, named after the bug they pin) is left alone. Standard library only.
"""
import os
import random
import sys

# ---- encoding (mirrors fuzz_index.c) ------------------------------------------

PUT, COMMIT, MATCH, RESTORE, RELEASE, PIN, UNPIN, CLOCK = 0, 2, 4, 5, 6, 7, 8, 9
ALLOC, UNREF, MPAGES, WRITABLE, REOPEN, CHECK = 10, 11, 12, 13, 14, 15

NO_POINTS, POINTS, REQUIRED = 0, 1, 2
LETTERS = "abcde"  # token IDs 0, 0xffffffff, 1, 1000, 7


def layout(pt=4, points=NO_POINTS, tensors=1, vocab=3):
    """One layout byte: page_tokens 1-5, points mode, 1-2 tensors, vocab 2-5."""
    assert 1 <= pt <= 5 and points in (0, 1, 2) and tensors in (1, 2) and 2 <= vocab <= 5
    return (pt - 1) + 5 * points + 15 * (tensors - 1) + 30 * (vocab - 2)


def header(layouts, ram_pages=None, ram_bytes_pages=None, ram_slack=0,
           ns_ram_pages=None, ns_slack=0, max_seq=None, shared_scope=False,
           empty_scope=False):
    """The 8-byte header. Budgets in pages of 4096 bytes (None: unlimited);
    *_slack adds slack * 16 bytes (room for point states)."""
    n = len(layouts)
    assert 1 <= n <= 3
    h0 = (n - 1) | (4 if shared_scope else 0) | (8 if empty_scope else 0)
    lay = list(layouts) + [0] * (3 - n)
    if ram_pages is None:
        h4 = 32
    else:
        assert 2 <= ram_pages <= 33
        h4 = ram_pages - 2
    if ram_bytes_pages is None:
        h5 = 32
    else:
        assert 2 <= ram_bytes_pages <= 33
        h5 = ram_bytes_pages - 2 + 40 * ram_slack
    if ns_ram_pages is None:
        h6 = 24
    else:
        assert 2 <= ns_ram_pages <= 25
        h6 = ns_ram_pages - 2 + 40 * ns_slack
    h7 = 0 if max_seq is None else 223 + max_seq
    out = bytes([h0] + lay + [h4, h5, h6, h7])
    assert all(b < 256 for b in out)
    return out


def fresh(tokens):
    """SEQ, fresh: tokens as letters a-e (vocabulary indices)."""
    assert 1 <= len(tokens) <= 32
    return bytes([len(tokens) - 1] + [LETTERS.index(c) for c in tokens])


def derived(slot, keep, extra=""):
    """SEQ, derived: the first `keep` tokens of recent sequence `slot` of the
    namespace (slot i = the i-th sequence any op used there, for i < 16),
    then `extra` fresh tokens."""
    assert 1 <= keep <= 32 and len(extra) < 8
    return bytes([(5 << 5) | (keep - 1), slot, len(extra)] +
                 [LETTERS.index(c) for c in extra])


def op(kind, flags=0):
    assert 0 <= kind < 16 and 0 <= flags < 16
    return bytes([kind | flags << 4])


def put(ns, seq, point=False, verify=True, bad_point=False):
    return op(PUT, (1 if point else 0) | (2 if verify else 0) | (4 if bad_point else 0)) + \
        bytes([ns]) + seq


def commit(ns, seq, point=False, reuse=False, keep=False, late_release=False,
           verify=True, poison=None, duplicate=None):
    """poison: select byte s, region s % n_regions gets held page s % n_held;
    duplicate: region s % n_regions gets the page of the next region."""
    x = 8 if verify else 0
    if poison is not None:
        x = 7 | (poison << 3)
    if duplicate is not None:
        x = 6 | (duplicate << 3)
    flags = (1 if point else 0) | (2 if reuse else 0) | (4 if keep else 0) | \
        (8 if late_release else 0)
    return op(COMMIT, flags) + bytes([ns]) + seq + bytes([x & 255])


def match(ns, seq, hold=True):
    return op(MATCH, 0 if hold else 1) + bytes([ns]) + seq


def restore(i, k, point=False, errors=False):
    return op(RESTORE, (1 if point else 0) | (2 if errors else 0)) + bytes([i, k])


def release(i):
    return op(RELEASE) + bytes([i])


def pin(ns, seq, ttl_ms=0):
    """ttl_ms 0: forever; else 1-15 ms."""
    assert 0 <= ttl_ms < 16
    t = ttl_ms
    return op(PIN) + bytes([ns]) + seq + bytes([t])


def unpin(i, other_ns=False):
    """i == number of pin records: an id never issued."""
    return op(UNPIN, 1 if other_ns else 0) + bytes([i])


def clock(ms, fault=0):
    """Advance the clock; fault 1-7: the next op's first allocating call
    fails its fault-th allocation."""
    assert 0 <= ms < 32 and 0 <= fault < 8
    return op(CLOCK) + bytes([ms | fault << 5])


def alloc(ns):
    return op(ALLOC) + bytes([ns])


def unref(i):
    return op(UNREF) + bytes([i])


def mpages(i, past_end=False):
    return op(MPAGES, 1 if past_end else 0) + bytes([i])


def writable(i, keep, other_ns=False):
    return op(WRITABLE, 1 if other_ns else 0) + bytes([i, keep])


def reopen(ns):
    return op(REOPEN) + bytes([ns])


def check():
    return op(CHECK)


# ---- seeds -------------------------------------------------------------------

SEEDS = {}


def seed(name):
    def deco(fn):
        SEEDS[name] = fn
        return fn
    return deco


@seed("put-match-basic")
def _():
    return header([layout(pt=4)]) + put(0, fresh("abcab")) + match(0, fresh("abcab")) + \
        match(0, fresh("abc")) + match(0, fresh("abcabcc")) + restore(2, 3) + check()


@seed("put-split-merge-pt2")
def _():
    return header([layout(pt=2, vocab=2)]) + put(0, fresh("aabba")) + \
        put(0, fresh("aaba")) + put(0, fresh("ab")) + put(0, fresh("aabbab")) + \
        match(0, fresh("aabb")) + match(0, fresh("aab")) + check()


@seed("put-pt1-long")
def _():
    return header([layout(pt=1, vocab=3, tensors=2)]) + put(0, fresh("abcabcabcabcabcabcab")) + \
        put(0, derived(0, 9, "ba")) + match(0, derived(0, 12, "c")) + check()


@seed("put-pt3-branches")
def _():
    s = header([layout(pt=3, vocab=4)])
    for t in ["abcd", "abca", "abdd", "abcdab", "b", "abcdabc", "abc"]:
        s += put(0, fresh(t))
    return s + check()


@seed("put-pt5-extend")
def _():
    return header([layout(pt=5, vocab=2)]) + put(0, fresh("ab")) + put(0, fresh("abb")) + \
        put(0, fresh("abba")) + put(0, fresh("abbaab")) + put(0, fresh("abbaabbaaba")) + \
        match(0, fresh("abbaabbaab")) + check()


@seed("points-optional")
def _():
    return header([layout(pt=3, points=POINTS)]) + put(0, fresh("abcab"), point=True) + \
        put(0, fresh("abc"), point=True) + put(0, fresh("abcb")) + \
        match(0, fresh("abc")) + restore(0, 3, point=True) + match(0, fresh("abcab")) + \
        restore(1, 5, point=True, errors=True) + match(0, fresh("abca")) + check()


@seed("points-required")
def _():
    return header([layout(pt=2, points=REQUIRED, vocab=2)]) + put(0, fresh("abab")) + \
        match(0, fresh("abab")) + put(0, fresh("ab"), point=True) + \
        put(0, fresh("ababb"), point=True) + match(0, fresh("ababa")) + \
        match(0, fresh("ababbab")) + restore(1, 5, point=True) + check()


@seed("points-required-split")
def _():
    return header([layout(pt=4, points=REQUIRED, vocab=3, tensors=2)]) + \
        put(0, fresh("abcabc"), point=True) + put(0, fresh("abc"), point=True) + \
        put(0, fresh("ab"), point=True) + put(0, fresh("abcabcab")) + \
        match(0, fresh("abcabcab")) + match(0, fresh("abcb")) + check()


@seed("points-bad-point")
def _():
    return header([layout(pt=2)]) + put(0, fresh("abc"), bad_point=True) + \
        put(0, fresh("abc"), point=True) + check()


@seed("evict-lru-pages")
def _():
    s = header([layout(pt=2, vocab=3)], ram_pages=4)
    for t in ["abab", "acac", "bcbc", "abca", "ccaa", "abab", "baba"]:
        s += put(0, fresh(t))
    return s + match(0, fresh("abab")) + check()


@seed("evict-ram-bytes")
def _():
    s = header([layout(pt=1, vocab=2)], ram_bytes_pages=5)
    for t in ["abab", "aaab", "abbb", "bbba", "abab"]:
        s += put(0, fresh(t))
    return s + check()


@seed("evict-budget-partial-put")
def _():
    # A held match pins 3 of 4 pages: the next put stores only a prefix.
    return header([layout(pt=1, vocab=2)], ram_pages=4) + put(0, fresh("aaa")) + \
        match(0, fresh("aaa")) + put(0, fresh("bbbbbb")) + release(0) + \
        put(0, fresh("bbbbbb")) + check()


@seed("evict-budget-partial-put-point")
def _():
    # A partial store drops the point: it belonged at the full length only.
    return header([layout(pt=1, points=POINTS, vocab=2)], ram_pages=4) + \
        put(0, fresh("aaa")) + match(0, fresh("aaa")) + \
        put(0, fresh("aabbbb"), point=True) + match(0, fresh("aab")) + check()


@seed("evict-point-only")
def _():
    # The least recently used block is a point state: it goes alone, and the
    # store reports a point eviction (no page was evicted).
    return header([layout(pt=2, points=POINTS)], ram_bytes_pages=2, ram_slack=2) + \
        put(0, fresh("ab"), point=True) + put(0, fresh("ba")) + \
        match(0, fresh("a"), hold=False) + put(0, fresh("ba"), point=True) + \
        match(0, fresh("ab")) + check()


@seed("evict-points")
def _():
    s = header([layout(pt=2, points=POINTS, vocab=3)], ram_pages=6, ram_bytes_pages=5,
               ram_slack=2)
    for t in ["abca", "abc", "ab", "bca", "bcab", "cab", "abca"]:
        s += put(0, fresh(t), point=True)
    return s + match(0, fresh("abca")) + check()


@seed("evict-points-required")
def _():
    s = header([layout(pt=3, points=REQUIRED, vocab=2)], ram_bytes_pages=4, ram_slack=1)
    for t in ["abab", "aba", "abb", "bbab", "bba", "abab"]:
        s += put(0, fresh(t), point=True)
    return s + match(0, fresh("ababab")) + check()


@seed("evict-protected-newest")
def _():
    # Every page but the newest is held: protection bends before the budget.
    return header([layout(pt=1, vocab=2)], ram_pages=3) + put(0, fresh("a")) + \
        put(0, fresh("b")) + put(0, fresh("ab")) + put(0, fresh("ba")) + check()


@seed("ns-two-budgets")
def _():
    s = header([layout(pt=2, vocab=2), layout(pt=3, points=POINTS, vocab=3)],
               ram_pages=10, ns_ram_pages=4, ns_slack=1)
    for t in ["abab", "baba", "aabb", "bbaa"]:
        s += put(0, fresh(t)) + put(1, fresh(t + "c"), point=True)
    return s + match(0, fresh("abab")) + match(1, fresh("ababc")) + check()


@seed("ns-three-mixed")
def _():
    s = header([layout(pt=1, vocab=5), layout(pt=4, points=REQUIRED, vocab=2, tensors=2),
                layout(pt=5, points=POINTS, vocab=3)], ram_pages=12)
    for i, t in enumerate(["abcde", "aabb", "abcab", "edcba", "abab", "cabca"]):
        s += put(i % 3, fresh(t), point=True) + commit((i + 1) % 3, fresh(t))
    return s + check()


@seed("ns-model-mismatch")
def _():
    return header([layout(pt=2), layout(pt=2)], shared_scope=True) + \
        put(0, fresh("abcab")) + match(1, fresh("abc")) + match(1, fresh("cab")) + \
        put(1, fresh("ca")) + match(0, fresh("cab")) + check()


@seed("ns-empty-scope")
def _():
    return header([layout(pt=3), layout(pt=3, vocab=4)], empty_scope=True) + \
        put(1, fresh("abcd")) + match(1, fresh("abcdd")) + put(0, fresh("abcd")) + \
        match(0, fresh("abc")) + check()


@seed("pin-forever")
def _():
    return header([layout(pt=2, vocab=2)], ram_pages=5) + put(0, fresh("abab")) + \
        pin(0, fresh("ababb")) + put(0, fresh("bbbb")) + put(0, fresh("aaaa")) + \
        put(0, fresh("baba")) + match(0, fresh("abab")) + unpin(0) + unpin(0) + check()


@seed("pin-ttl-expiry")
def _():
    return header([layout(pt=2, vocab=3)], ram_pages=4) + put(0, fresh("abc")) + \
        pin(0, fresh("abc"), ttl_ms=5) + put(0, fresh("cccc")) + clock(3) + \
        put(0, fresh("bbbb")) + clock(3) + put(0, fresh("aaaa")) + unpin(0) + \
        pin(0, fresh("aaaa"), ttl_ms=1) + clock(1) + put(0, fresh("abab")) + check()


@seed("pin-many-unpin")
def _():
    s = header([layout(pt=1, vocab=3), layout(pt=2, points=REQUIRED)], ram_pages=20)
    for i, t in enumerate(["ab", "abc", "ba", "cab", "ca", "bb", "a", "c", "abca", "bc"]):
        s += put(i % 2, fresh(t), point=True) + pin(i % 2, fresh(t), ttl_ms=(i * 3) % 16)
        s += clock(i % 4)
    s += unpin(3) + unpin(0, other_ns=True) + unpin(8) + unpin(7)
    return s + clock(20) + check()


@seed("pin-nothing-stored")
def _():
    return header([layout(pt=3)]) + pin(0, fresh("abc")) + put(0, fresh("abc")) + \
        unpin(0) + unpin(1) + check()


@seed("pin-partial-page-superseded")
def _():
    # A pin holding a partial page; a longer put supersedes that page.
    return header([layout(pt=2, vocab=3)], ram_pages=4) + put(0, fresh("abc")) + \
        pin(0, fresh("abc")) + put(0, fresh("abca")) + put(0, fresh("cc")) + \
        put(0, fresh("bb")) + put(0, fresh("ca")) + check()


@seed("zc-fresh-commit")
def _():
    return header([layout(pt=3, tensors=2)]) + commit(0, fresh("abcab")) + \
        commit(0, fresh("abcabcab"), keep=True) + match(0, fresh("abcabcab")) + check()


@seed("zc-dedup-fresh")
def _():
    return header([layout(pt=2, vocab=3)]) + put(0, fresh("abcabc")) + \
        commit(0, fresh("abcabc"), keep=True) + commit(0, fresh("abcab")) + \
        commit(0, fresh("abca"), keep=True) + check()


@seed("zc-reuse-cow-tail")
def _():
    return header([layout(pt=4, vocab=3)]) + put(0, fresh("abcab")) + \
        commit(0, fresh("abcabca"), reuse=True) + commit(0, fresh("abcabb"), reuse=True,
                                                        keep=True) + \
        commit(0, fresh("abcabca"), reuse=True, late_release=True) + check()


@seed("zc-reuse-exact")
def _():
    return header([layout(pt=3, points=POINTS)]) + put(0, fresh("abcab")) + \
        commit(0, fresh("abcab"), reuse=True, point=True) + \
        commit(0, fresh("abcabcab"), reuse=True, keep=True, late_release=True) + check()


@seed("zc-reuse-required")
def _():
    return header([layout(pt=2, points=REQUIRED, vocab=3)]) + \
        put(0, fresh("abcab"), point=True) + put(0, fresh("abcabcc")) + \
        commit(0, fresh("abcabccab"), reuse=True, point=True) + \
        commit(0, fresh("abcabcb"), reuse=True) + check()


@seed("zc-poison-page-state")
def _():
    return header([layout(pt=2, vocab=3)]) + put(0, fresh("aabb")) + \
        match(0, fresh("aabb")) + mpages(0) + \
        commit(0, fresh("ccbb"), poison=0) + commit(0, fresh("aacc"), poison=1) + \
        commit(0, fresh("aacc"), reuse=True, poison=9) + check()


@seed("zc-poison-foreign")
def _():
    return header([layout(pt=2), layout(pt=2)]) + alloc(1) + put(1, fresh("ab")) + \
        commit(0, fresh("abab"), poison=0) + match(1, fresh("ab")) + mpages(0) + \
        commit(0, fresh("ab"), poison=1) + check()


@seed("zc-budget-abandon")
def _():
    return header([layout(pt=1, vocab=2)], ram_pages=4) + alloc(0) + alloc(0) + \
        commit(0, fresh("abab")) + commit(0, fresh("ab"), keep=True) + unref(0) + \
        commit(0, fresh("abab"), reuse=True) + check()


@seed("zc-duplicate-page")
def _():
    return header([layout(pt=2, vocab=3)]) + put(0, fresh("abca")) + \
        commit(0, fresh("abcabc"), duplicate=0) + \
        commit(0, fresh("abcabc"), reuse=True, duplicate=1) + \
        commit(0, fresh("abcab"), reuse=True, point=False, duplicate=2) + check()


@seed("fault-put-commit")
def _():
    s = header([layout(pt=2, points=POINTS, vocab=3)])
    for f in range(1, 8):
        s += clock(0, fault=f) + put(0, fresh("abcab"[: 1 + f % 5] + "c"), point=f % 2 == 1)
        s += clock(0, fault=f) + commit(0, fresh("abcabc"), reuse=f % 2 == 0, keep=True)
    return s + check()


@seed("fault-match-pin-alloc")
def _():
    s = header([layout(pt=3, vocab=2), layout(pt=1, points=REQUIRED)])
    s += put(0, fresh("abababa")) + put(1, fresh("abab"), point=True)
    for f in range(1, 5):
        s += clock(1, fault=f) + match(f % 2, fresh("ababa"))
        s += clock(1, fault=f) + pin(f % 2, fresh("abab"), ttl_ms=3)
        s += clock(0, fault=f) + alloc(0)
        s += match(0, fresh("aba")) + mpages(0) + clock(0, fault=f) + writable(0, 1)
    return s + check()


@seed("fault-evict-unmerged")
def _():
    # Faults while eviction merges nodes: an unmerged node is legal and must
    # keep working.
    s = header([layout(pt=1, vocab=3)], ram_pages=6)
    for i, t in enumerate(["abc", "abb", "aba", "acc", "bbb", "abc", "aca", "abcab"]):
        s += clock(0, fault=1 + i % 4) + put(0, fresh(t))
        s += put(0, fresh(t[:2] + "c"))
    return s + check()


@seed("pages-alloc-unref")
def _():
    s = header([layout(pt=2)], ram_pages=3)
    s += alloc(0) + alloc(0) + alloc(0) + alloc(0) + put(0, fresh("abab")) + unref(1)
    return s + put(0, fresh("abab")) + unref(0) + unref(0) + put(0, fresh("abab")) + check()


@seed("pages-mpages-writable")
def _():
    return header([layout(pt=3, tensors=2, vocab=3), layout(pt=2)]) + \
        put(0, fresh("abcabca")) + match(0, fresh("abcabcab")) + mpages(0, past_end=True) + \
        writable(2, 1) + writable(1, 3) + writable(0, 4) + writable(0, 2, other_ns=True) + \
        alloc(0) + writable(3, 2) + release(0) + check()


@seed("pages-held-across-eviction")
def _():
    s = header([layout(pt=2, vocab=3)], ram_pages=6) + put(0, fresh("abc")) + \
        match(0, fresh("abc")) + mpages(0) + release(0)
    for t in ["cccc", "bbbb", "aaaa", "baba", "caca"]:
        s += put(0, fresh(t))
    return s + put(0, fresh("abcc")) + check()


@seed("match-hold-restore-release")
def _():
    s = header([layout(pt=2, points=POINTS, vocab=3)], ram_pages=8)
    s += put(0, fresh("abcabc"), point=True) + put(0, fresh("abcc"), point=True)
    for t in ["abcabc", "abc", "abcc", "ab", "c", "abcabcab", "abca", "abcab", "abcabc"]:
        s += match(0, fresh(t))
    s += restore(0, 3) + restore(7, 200, point=True, errors=True) + release(3) + release(0)
    for t in ["bbbb", "cccc", "bcbc"]:
        s += put(0, fresh(t))
    return s + restore(2, 9) + check()


@seed("match-lookup-only")
def _():
    return header([layout(pt=4, vocab=5)]) + put(0, fresh("abcdeabcde")) + \
        match(0, fresh("abcdeab"), hold=False) + match(0, fresh("e"), hold=False) + check()


@seed("reopen-namespaces")
def _():
    return header([layout(pt=2), layout(pt=3, points=POINTS)]) + reopen(1) + \
        put(0, fresh("abab")) + reopen(0) + match(0, fresh("abab")) + reopen(0) + \
        release(0) + reopen(0) + put(1, fresh("abc"), point=True) + reopen(1) + check()


@seed("limits-too-many-tokens")
def _():
    return header([layout(pt=2)], max_seq=4) + put(0, fresh("abab")) + \
        put(0, fresh("ababa")) + commit(0, fresh("abcabc")) + match(0, fresh("ababab")) + \
        pin(0, fresh("abcab")) + match(0, fresh("abab")) + check()


@seed("derived-sequences")
def _():
    s = header([layout(pt=2, vocab=2)])
    s += put(0, fresh("abababab"))
    s += put(0, derived(0, 5, "bb")) + put(0, derived(1, 6, "a")) + \
        match(0, derived(0, 8, "aa")) + commit(0, derived(2, 3, "bab"))
    return s + check()


def random_seed(rng, n_ops, hdr):
    """A deterministic mix of every operation, for coverage beyond the above."""
    s = hdr
    n_ns = (hdr[0] % 3) + 1
    for _ in range(n_ops):
        k = rng.randrange(16)
        s += bytes([k | rng.randrange(16) << 4])
        if k in (PUT, PUT + 1, COMMIT, COMMIT + 1, MATCH, PIN):
            s += bytes([rng.randrange(n_ns)])
            if rng.random() < 0.4:
                s += bytes([(5 << 5) | rng.randrange(12), rng.randrange(16),
                            rng.randrange(8)])
                s += bytes(rng.randrange(5) for _ in range(s[-1]))
            else:
                n = rng.randrange(1, 13)
                s += bytes([n - 1]) + bytes(rng.randrange(5) for _ in range(n))
            if k in (COMMIT, COMMIT + 1, PIN):
                s += bytes([rng.randrange(256)])
        elif k == CLOCK:
            s += bytes([rng.randrange(32) | (rng.randrange(4) << 5 if rng.random() < 0.15 else 0)])
        elif k in (RESTORE, WRITABLE):
            s += bytes([rng.randrange(256), rng.randrange(256)])
        elif k == CHECK:
            pass
        else:
            s += bytes([rng.randrange(256)])
    return s


def all_seeds():
    out = {}
    for name, fn in SEEDS.items():
        out["seed-" + name] = fn()
    rng = random.Random(20240601)
    mixes = [
        ("mix-tight-1ns", header([layout(pt=2, points=POINTS, vocab=3)], ram_pages=5)),
        ("mix-tight-3ns", header([layout(pt=1, vocab=2), layout(pt=3, points=REQUIRED),
                                  layout(pt=5, points=POINTS, tensors=2)],
                                 ram_pages=8, ram_bytes_pages=7, ram_slack=3,
                                 ns_ram_pages=4, ns_slack=2, shared_scope=True)),
        ("mix-bytes-2ns", header([layout(pt=4, vocab=2), layout(pt=2, points=POINTS)],
                                 ram_bytes_pages=6, ram_slack=1)),
        ("mix-roomy", header([layout(pt=3, vocab=4), layout(pt=1, points=REQUIRED, vocab=2)])),
        ("mix-short-seqs", header([layout(pt=2, vocab=3)], ram_pages=6, max_seq=6)),
    ]
    for name, hdr in mixes:
        out["seed-" + name] = random_seed(rng, 120, hdr)
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "corpus", "index")
    os.makedirs(out_dir, exist_ok=True)
    seeds = all_seeds()
    for f in os.listdir(out_dir):
        if f.startswith("seed-") and f not in seeds:
            os.remove(os.path.join(out_dir, f))
    for name, data in sorted(seeds.items()):
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(data)
    print(f"wrote {len(seeds)} seeds to {out_dir}")


if __name__ == "__main__":
    main()
