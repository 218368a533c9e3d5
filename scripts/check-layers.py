#!/usr/bin/env python3
"""check-layers.py -- the repository's folders form layers: no two folders
include each other, directly or through others.

Reads every .c and .h file under the source folders, resolves each
`#include "x.h"` to the file it names (the including file's own folder
first, then the include directories CMake gives each part), and builds a
graph of folders (store/core, store/disk, runtime/model, tools/bench, ...)
with an edge A -> B when a file in A includes a file in B. A cycle in that
graph is an error: it names the folders and one include line per edge.

It also checks the rules DESIGN.md states outright:
  - nothing in store/ includes runtime/, tools/, bench/ or bindings/;
  - store/core includes nothing of store/format, store/disk, store/remote or
    store/open (the tiers sit above the index, which reaches them through
    their tables of operations: store/core/tier.h, shared.h);
  - no tier includes store/open (the wiring that opens a store with them);
  - tools/bench (`snapbank bench`) includes only the public headers
    (store/include, runtime/include) besides its own files;
  - the llama.cpp connector (bindings/llama.cpp) includes only the store's
    public headers besides its own (and llama.cpp's, which are not ours);
  - runtime/ (the CLI's llama.cpp engine) includes only the connector's
    public header (bindings/llama.cpp/include), never its sources.

Usage: scripts/check-layers.py [ROOT]. Exit status 0 when clean, 1 with a
report otherwise. Standard library only.
"""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), ".."))

# Source folders, and where their quoted includes may resolve besides the
# including file's own folder (what CMake's include directories say).
PARTS = {
    "store": ["store/include", "store/core", "store/format", "store/disk", "store/remote", "store/open"],
    "runtime": ["runtime", "runtime/core", "store/include", "tools", "tools/bench",
                "bindings/llama.cpp/include"],
    "tools": ["tools", "tools/bench", "runtime", "runtime/core", "runtime/include",
              "store/include"],
    "bench": ["bench", "tools", "runtime", "runtime/core", "store/include",
              "store/core", "store/format", "store/disk", "store/remote", "store/open"],
    "bindings": ["bindings/llama.cpp/include", "bindings/llama.cpp/src", "store/include"],
    "tests": ["tests", "bindings/llama.cpp/include", "store/include", "store/core", "store/format", "store/disk", "store/remote", "store/open",
              "runtime", "runtime/core", "runtime/include", "tools"],
    "fuzz": ["fuzz", "store/include", "store/core", "store/format", "store/disk", "store/remote", "store/open",
             "runtime", "runtime/core", "tools"],
}
# Folders whose files may include only their own and the public headers.
PUBLIC_ONLY = {"tools/bench": ["store/include", "runtime/include"],
               "bindings/llama.cpp/src": ["store/include", "bindings/llama.cpp/include"],
               "bindings/llama.cpp/include": ["store/include"]}
# Folders whose files are test or benchmark drivers: they may reach into
# any layer (white-box tests), but nothing may include them.
LEAVES = {"tests", "fuzz", "bench"}

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def files():
    for part in PARTS:
        base = os.path.join(ROOT, part)
        for d, _, names in os.walk(base):
            if "/build" in d or "/." in d:
                continue
            for n in names:
                if n.endswith((".c", ".h")):
                    yield part, os.path.join(d, n)


def resolve(part, src, inc):
    cands = [os.path.join(os.path.dirname(src), inc)]
    cands += [os.path.join(ROOT, d, inc) for d in PARTS[part]]
    for c in cands:
        if os.path.isfile(c):
            return os.path.normpath(c)
    return None


def folder(path):
    rel = os.path.relpath(os.path.dirname(path), ROOT)
    top = rel.split(os.sep)[0]
    if top in LEAVES:
        return top
    return rel


def main():
    edges = {}  # (a, b) -> example "file:line: #include"
    for part, src in files():
        text = open(src, encoding="utf-8", errors="replace").read()
        for m in INCLUDE.finditer(text):
            tgt = resolve(part, src, m.group(1))
            if not tgt:
                continue
            a, b = folder(src), folder(tgt)
            if a != b and (a, b) not in edges:
                line = text.count("\n", 0, m.start()) + 1
                edges[(a, b)] = "%s:%d: #include \"%s\"" % (
                    os.path.relpath(src, ROOT), line, m.group(1))
    bad = []
    for (a, b), where in sorted(edges.items()):
        if a.startswith("store") and b.split(os.sep)[0] in ("runtime", "tools", "bench", "bindings"):
            bad.append("store must not include %s: %s" % (b, where))
        if a == "store/core" and b in ("store/format", "store/disk", "store/remote", "store/open"):
            bad.append("store/core must reach %s through its tables only: %s" % (b, where))
        if a in ("store/format", "store/disk", "store/remote") and b == "store/open":
            bad.append("a tier must not include the wiring above it: %s" % where)
        if b in LEAVES:
            bad.append("nothing may include %s/: %s" % (b, where))
        if (a.startswith("runtime") and b.startswith("bindings")
                and b != "bindings/llama.cpp/include"):
            bad.append("runtime uses the llama.cpp connector through its public header only "
                       "(bindings/llama.cpp/include), not %s: %s" % (b, where))
        if a in PUBLIC_ONLY and b not in PUBLIC_ONLY[a]:
            bad.append("%s uses only the public headers (%s), not %s: %s" % (
                a, ", ".join(PUBLIC_ONLY[a]), b, where))
    # Cycles between folders: a depth-first search over the graph.
    graph = {}
    for a, b in edges:
        graph.setdefault(a, []).append(b)
    state, stack, cycles = {}, [], []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, [])):
            if state.get(m) == 1:
                cyc = stack[stack.index(m):] + [m]
                cycles.append(cyc)
            elif not state.get(m):
                visit(m)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if not state.get(n):
            visit(n)
    for cyc in cycles:
        lines = ["include cycle: " + " -> ".join(cyc)]
        for a, b in zip(cyc, cyc[1:]):
            lines.append("    " + edges[(a, b)])
        bad.append("\n".join(lines))
    if bad:
        print("\n".join(bad))
        return 1
    print("check-layers: %d folders, %d folder edges, no cycles" %
          (len({x for e in edges for x in e}), len(edges)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
