#!/usr/bin/env python3
"""check-calls.py -- the layer rule, checked from the built objects' symbols:
a folder calls only names defined in itself, in folders below it, or through
a declared interface, and the libraries export only prefixed names.

check-layers.py reads `#include` lines; this reads what the linker sees, so
it also catches a call made through a prototype copied by hand, or through a
header that sits in another folder's include path.

How it works:
  1. Every object file under BUILD_DIR in CMake's layout,
     BUILD_DIR/<subdir>/CMakeFiles/<target>.dir/<path>.o, is the object of
     the source <subdir>/<path> (CMake writes ".." as "__"); its folder is
     that source's directory (store/core, store/disk, runtime/model, ...).
     A source built into several targets (snapbank_objs and
     snapbank_objs_dl, snapbank_runtime and snapbank_rt) counts once, with
     the union of its objects' symbols. Driver folders (DRIVERS: tests,
     fuzz, bench's own top level) are skipped: they may reach anything.
  2. One batched `nm` gives each object's defined globals and its undefined
     names. A name an object in folder A leaves undefined and an object in
     folder B != A defines is an edge A -> B (a call or a data reference).
  3. The edges are held against the tables below: LAYERS (a folder calls
     only itself and lower groups), INTERFACES (calls from some folders into
     others must be to names declared in given headers), no cycles between
     folders, and EXPORTS (the libraries' defined globals are prefixed).

Known violations: --allow FILE names violations, one key a line exactly as
printed (text after two spaces and "(" is ignored, as are blank lines and
"#" comments). A listed violation is counted as "allowed (known)"; a listed
line that matches nothing is "stale" and fails, so the list can only shrink.
--write-allow FILE writes the current violations in that form.

Usage: scripts/check-calls.py BUILD_DIR [ROOT] [--allow FILE]
                              [--write-allow FILE] [-v]
       scripts/check-calls.py --self-test
-v lists the allowed violations and every folder edge with one example.
ROOT (default: this script's repository) is read only for the interface
headers. Exit status 0 when clean, 1 with a report otherwise, 2 on bad
usage. Standard library and binutils' nm only.
"""
import fnmatch
import glob
import os
import re
import subprocess
import sys

# ---- the rules: edit these tables, not the code ------------------------------
#
# LAYERS: groups of folders, bottom first (glob patterns on the folder path).
# A folder may call its own folder and folders in LOWER groups only; two
# folders in the same group may not call each other. Every folder that has
# objects must be placed (an unplaced folder is a violation); a listed
# folder that does not exist yet is fine.
LAYERS = [
    ["store/core"],                       # index, RAM tier, store object
    ["store/format"],                     # records, compression, payload hash
    ["store/disk", "store/remote"],       # tiers: siblings, never each other
    ["store/open"],                       # wires the tiers to core
    ["bindings/llama.cpp/src"],           # the llama.cpp connector (store API only)
    ["runtime/core"],
    ["runtime/kernels"],
    ["runtime/gguf"],
    ["runtime/text"],                     # tokenizer, vocab, unicode
    ["runtime/template"],                 # chat templates, Jinja
    ["runtime/model"],
    ["runtime/session"],
    ["runtime/batch"],
    ["runtime/llama"],                    # llama.cpp as the batching module's compute
    ["runtime/capi"],
    ["runtime/server"],
    ["tools/make_model"],                 # `snapbank make-model` (also in libsnapbank_rt)
    ["tools/bench"],                      # `snapbank bench` (it decodes with a made model)
    ["runtime/cli"],
]

# INTERFACES: (callers, callees, headers). A call from a folder matching
# `callers` into a folder matching `callees` must be to a name declared in a
# header matching `headers` (globs relative to ROOT). When no header matches
# (not written yet), every such call is a violation.
INTERFACES = [
    # A tier reaches the index only through core's host interface.
    ("store/format", "store/core", "store/core/host.h"),
    ("store/disk", "store/core", "store/core/host.h"),
    ("store/remote", "store/core", "store/core/host.h"),
    # Everything above the store uses its public API only.
    ("runtime/*", "store/*", "store/include/*.h"),
    ("bindings/llama.cpp/src", "store/*", "store/include/snapbank*.h"),
    # `snapbank run/chat/serve --engine llama.cpp` use the connector through
    # its public header only.
    ("runtime/*", "bindings/llama.cpp/src", "bindings/llama.cpp/include/snapbank_llama.h"),
    ("tools/*", "store/*", "store/include/*.h"),
    # `snapbank bench` uses the runtime through its public header only
    # (sbrt_make_model, which tools/make_model defines, included).
    ("tools/bench", "runtime/*", "runtime/include/*.h"),
    ("tools/bench", "tools/make_model", "runtime/include/*.h"),
]

# EXPORTS: libraries an embedding program links, by file name (found
# anywhere under BUILD_DIR outside CMakeFiles/), each with the symbol table
# read -- "shared": the dynamic one (nm -D); "static": every defined global
# of every member (what can clash at static link time) --, the prefixes its
# names may have, and when it is built: "always" (not built is a
# violation) or "optional" (built only where what it needs is found: the
# llama.cpp connector without llama.cpp is not a violation).
EXPORT_PREFIXES = ("sb_", "sbrt_", "SB_", "SBRT_")
EXPORTS = [
    ("libsnapbank.so", "shared", EXPORT_PREFIXES, "always"),
    ("libsnapbank_rt.so", "shared", EXPORT_PREFIXES, "always"),
    ("libsnapbank.a", "static", EXPORT_PREFIXES, "always"),          # target snapbank_static
    ("libsnapbank_runtime.a", "static", EXPORT_PREFIXES, "always"),
    ("libsnapbank_llama.so", "shared", ("sb_llama_",), "optional"),
]
LINKER_NAMES = {"_init", "_fini", "_edata", "_end", "__bss_start"}

# DRIVERS: folders of test and benchmark programs; their objects are not
# checked and define nothing others may call.
DRIVERS = ["tests", "tests/*", "fuzz", "fuzz/*", "bench"]

# Report order of the violation categories.
CATEGORIES = ["folder", "call", "interface", "cycle", "export", "library"]
# -------------------------------------------------------------------------------

DEFINED = set("TDBRCGSVWi")   # nm types of a defined name (global in an object)
UNDEFINED = set("Uwv")


def match(folder, pattern):
    return fnmatch.fnmatchcase(folder, pattern)


def objects(build):
    """Map source path (relative to the source root) -> [object paths]."""
    srcs = {}
    for d, dirs, names in os.walk(build):
        dirs.sort()
        parts = os.path.relpath(d, build).split(os.sep)
        if "CMakeFiles" not in parts:
            continue
        i = parts.index("CMakeFiles")
        if len(parts) < i + 2 or not parts[i + 1].endswith(".dir"):
            continue
        subdir = parts[:i] if parts[0] != "." else []
        for n in sorted(names):
            if not n.endswith(".o") or "." not in n[:-2]:
                continue
            rel = [".." if p == "__" else p for p in subdir + parts[i + 2:] + [n[:-2]]]
            src = os.path.normpath(os.path.join(*rel))
            srcs.setdefault(src, []).append(os.path.join(d, n))
    return srcs


def folder_of(src):
    return os.path.dirname(src) or "."


def nm(args, files):
    """Run nm over files in batches; yield (file, name, type)."""
    for k in range(0, len(files), 200):
        batch = files[k:k + 200]
        out = subprocess.run(["nm", "-A", "-P"] + args + batch, check=True,
                             stdout=subprocess.PIPE, universal_newlines=True).stdout
        for line in out.splitlines():
            path, _, rest = line.rpartition(": ")
            f = rest.split()
            if len(f) >= 2:
                yield path, f[0], f[1]


def declared_names(paths):
    """Function and extern data names declared at the top level of headers."""
    names = set()
    for p in paths:
        text = open(p, encoding="utf-8", errors="replace").read()
        text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
        text = re.sub(r"//[^\n]*", " ", text)
        text = re.sub(r"\\\n", " ", text)
        text = re.sub(r"^\s*#[^\n]*", " ", text, flags=re.M)
        text = re.sub(r'extern\s*"C"\s*\{', " ", text)   # its "}" is clamped below
        flat, depth = [], 0
        for ch in text:     # drop brace bodies: members, enumerators, inline bodies
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth = max(depth - 1, 0)
            elif depth == 0:
                flat.append(ch)
        for stmt in "".join(flat).split(";"):
            s = stmt.strip()
            if not s or s.startswith("typedef"):
                continue
            if "(" in s:
                names.update(n for n in re.findall(r"\b([A-Za-z_]\w*)\s*\(", s)
                             if not n.startswith("__"))
            elif s.startswith("extern"):
                m = re.search(r"\b([A-Za-z_]\w*)\s*(\[[^\]]*\]\s*)*(=.*)?$", s, re.S)
                if m:
                    names.add(m.group(1))
    return names


def layer_of(folder, layers):
    for i, group in enumerate(layers):
        if any(match(folder, p) for p in group):
            return i
    return None


def find_cycles(edges):
    graph = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    state, stack, cycles = {}, [], set()

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                cyc = stack[stack.index(m):]
                k = cyc.index(min(cyc))         # one rotation per cycle
                cycles.add(tuple(cyc[k:] + cyc[:k]))
            elif not state.get(m):
                visit(m)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if not state.get(n):
            visit(n)
    return sorted(cycles)


def check(build, root, layers=None, interfaces=None, exports=None, drivers=None):
    """Return (violations, stats); violations maps key -> (category, detail)."""
    layers = LAYERS if layers is None else layers
    interfaces = INTERFACES if interfaces is None else interfaces
    exports = EXPORTS if exports is None else exports
    drivers = DRIVERS if drivers is None else drivers
    bad = {}

    def add(cat, key, where):
        bad.setdefault(key, (cat, set()))[1].add(where)

    # (an object whose source is gone is left over from before a move, in a
    # build directory used again: skipped, as the linker no longer sees it)
    srcs = {s: o for s, o in objects(build).items()
            if not any(match(folder_of(s), p) for p in drivers)
            and os.path.isfile(os.path.join(root, s))}
    obj_src = {o: s for s, objs in srcs.items() for o in objs}
    defs, undefs = {}, {}       # source -> names
    for path, name, t in nm([], sorted(obj_src)):
        s = obj_src.get(path)
        if s is None:
            continue
        if t in DEFINED:
            defs.setdefault(s, set()).add(name)
        elif t in UNDEFINED:
            undefs.setdefault(s, set()).add(name)
    owner = {}                  # name -> {folder: source}
    for s, names in defs.items():
        for n in names:
            owner.setdefault(n, {}).setdefault(folder_of(s), s)

    folders = sorted({folder_of(s) for s in srcs})
    level = {f: layer_of(f, layers) for f in folders}
    for f in folders:
        if level[f] is None:
            add("folder", "folder %s: not placed in LAYERS" % f,
                next(s for s in sorted(srcs) if folder_of(s) == f))

    hdr_cache = {}

    def allowed_names(pattern):
        if pattern not in hdr_cache:
            hdr_cache[pattern] = declared_names(sorted(glob.glob(os.path.join(root, pattern))))
        return hdr_cache[pattern]

    edges = {}                  # (a, b) -> "file: symbol"
    for s in sorted(undefs):
        a = folder_of(s)
        for n in sorted(undefs[s]):
            for b in sorted(owner.get(n, ())):
                if b == a:
                    continue
                edges.setdefault((a, b), "%s: %s" % (s, n))
                la, lb = level[a], level[b]
                if la is not None and lb is not None and lb >= la:
                    add("call", "call %s -> %s: %s" % (a, b, n), s)
                    continue
                for callers, callees, headers in interfaces:
                    if match(a, callers) and match(b, callees) and n not in allowed_names(headers):
                        add("interface", "interface %s -> %s: %s (not in %s)" %
                            (a, b, n, headers), s)
    for cyc in find_cycles(edges):
        key = "cycle " + " -> ".join(cyc + (cyc[0],))
        ring = list(cyc) + [cyc[0]]
        for x, y in zip(ring, ring[1:]):
            add("cycle", key, "%s -> %s: %s" % (x, y, edges[(x, y)]))

    for lib, kind, prefixes, when in exports:
        found = sorted(os.path.join(d, lib) for d, dirs, names in os.walk(build)
                       if "CMakeFiles" not in d.split(os.sep) and lib in names)
        if not found:
            if when != "optional":
                add("library", "library %s: not built" % lib, build)
            continue
        args = ["-D", "-g", "--defined-only"] if kind == "shared" else ["-g", "--defined-only"]
        for path, name, t in nm(args, found[:1]):
            if name in LINKER_NAMES or name.startswith(prefixes):
                continue
            member = path.rsplit(os.sep, 1)[-1].split(":")[-1].split("[")[-1].rstrip("]")
            add("export", "export %s: %s" % (lib, name), member)

    stats = {"sources": len(srcs), "objects": len(obj_src), "folders": len(folders),
             "edges": edges}
    return bad, stats


def read_allow(path):
    keys = []
    for line in open(path, encoding="utf-8"):
        line = line.split("  (")[0].strip()
        if line and not line.startswith("#"):
            keys.append(line)
    return keys


def report(bad, stats, allow, verbose, out=sys.stdout):
    """Print the report; return the exit status."""
    allow = set(allow or ())
    stale = sorted(allow - set(bad))
    n_new = n_known = 0
    for cat in CATEGORIES:
        keys = sorted(k for k, (c, _) in bad.items() if c == cat)
        new = [k for k in keys if k not in allow]
        known = [k for k in keys if k in allow]
        n_new += len(new)
        n_known += len(known)
        if not keys:
            continue
        print("== %s: %d violation%s, %d allowed (known)" %
              (cat, len(new), "" if len(new) == 1 else "s", len(known)), file=out)
        for k in new:
            where = sorted(bad[k][1])
            if cat == "cycle":
                print(k, file=out)
                for w in where:
                    print("    " + w, file=out)
            else:
                more = " +%d" % (len(where) - 2) if len(where) > 2 else ""
                print("%s  (%s%s)" % (k, ", ".join(where[:2]), more), file=out)
        if verbose:
            for k in known:
                print("allowed (known): " + k, file=out)
    if verbose:
        print("== folder edges (one example each)", file=out)
        for (a, b), where in sorted(stats["edges"].items()):
            print("%s -> %s  (%s)" % (a, b, where), file=out)
    if stale:
        print("== stale: %d allow line%s matching nothing (delete %s)" %
              (len(stale), "" if len(stale) == 1 else "s",
               "it" if len(stale) == 1 else "them"), file=out)
        for k in stale:
            print("stale: " + k, file=out)
    print("check-calls: %d sources (%d objects) in %d folders, %d folder edges; "
          "%d violations, %d allowed (known), %d stale" %
          (stats["sources"], stats["objects"], stats["folders"], len(stats["edges"]),
           n_new, n_known, len(stale)), file=out)
    return 1 if n_new or stale else 0


def write_allow(path, bad):
    with open(path, "w", encoding="utf-8") as f:
        f.write("# Known layer violations (scripts/check-calls.py --write-allow).\n"
                "# Remove a line when its violation is fixed; stale lines fail.\n")
        for cat in CATEGORIES:
            keys = sorted(k for k, (c, _) in bad.items() if c == cat)
            if keys:
                f.write("\n# %s (%d)\n" % (cat, len(keys)))
                f.writelines(k + "\n" for k in keys)


def self_test():
    """Build a fake tree of two folders with gcc -c, lower/ calling up into
    upper/, and check that the call, the cycle, an unprefixed export, the
    allow list and a stale allow line are all reported as they should be;
    an optional library not built is fine, a library's own prefixes hold."""
    import io
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        build = os.path.join(tmp, "build")
        code = {
            # lower/low.c calls upper's name: an upward call and, since upper
            # calls lower, a cycle.
            "lower/low.c": "int sb_up(void);\nint sb_low(void) { return sb_up(); }\n",
            "upper/up.c": "int sb_low(void);\nint sb_up(void) { return 1; }\n"
                          "int helper(void) { return sb_low(); }\n",
            "tests/t.c": "int sb_up(void);\nint main(void) { return sb_up(); }\n",
        }
        objs = []
        for src, text in code.items():
            top, name = src.split("/")
            c = os.path.join(tmp, src)
            os.makedirs(os.path.dirname(c), exist_ok=True)
            open(c, "w").write(text)
            o = os.path.join(build, top, "CMakeFiles", "t_" + top + ".dir", name + ".o")
            os.makedirs(os.path.dirname(o), exist_ok=True)
            subprocess.run(["gcc", "-c", "-o", o, c], check=True)
            objs.append(o)
        subprocess.run(["ar", "rcs", os.path.join(build, "libfake.a")] + objs[:2], check=True)
        kw = dict(layers=[["lower"], ["upper"]], interfaces=[],
                  exports=[("libfake.a", "static", ("sb_",), "always"),
                           ("libnone.so", "shared", ("sb_",), "optional")],
                  drivers=["tests"])
        bad, stats = check(build, tmp, **kw)
        want = {"call lower -> upper: sb_up", "cycle lower -> upper -> lower",
                "export libfake.a: helper"}
        assert set(bad) == want, sorted(bad)
        assert stats["sources"] == 2, stats            # tests/ skipped
        assert report(bad, stats, [], False, io.StringIO()) == 1
        assert report(bad, stats, sorted(want), False, io.StringIO()) == 0
        buf = io.StringIO()
        assert report(bad, stats, sorted(want) + ["call x -> y: z"], False, buf) == 1
        assert "stale: call x -> y: z" in buf.getvalue()
        # A library's own prefixes; a required library not built.
        bad, _ = check(build, tmp, **dict(kw, exports=[("libfake.a", "static", ("sb_up",), "always"),
                                                       ("libnone.so", "shared", ("sb_",), "always")]))
        assert {k for k in bad if k.startswith(("export", "library"))} == {
            "export libfake.a: sb_low", "export libfake.a: helper", "library libnone.so: not built"}, sorted(bad)
        # Placed the other way round, only upper -> lower remains: clean
        # except the cycle's edge now being the upward one.
        kw["layers"] = [["upper"], ["lower"]]
        bad, _ = check(build, tmp, **kw)
        assert "call upper -> lower: sb_low" in bad and "call lower -> upper: sb_up" not in bad
        # An unplaced folder; a downward call to a name its interface header
        # does not declare.
        kw["layers"] = [["lower"]]
        assert "folder upper: not placed in LAYERS" in check(build, tmp, **kw)[0]
        open(os.path.join(tmp, "upper", "up.h"), "w").write(
            "/* up.h */\nint sb_up(void);\nstatic inline int sb_x(void) { return g(1); }\n")
        kw.update(layers=[["lower"], ["upper"]], interfaces=[("upper", "lower", "upper/up.h")])
        bad, _ = check(build, tmp, **kw)
        assert "interface upper -> lower: sb_low (not in upper/up.h)" in bad, sorted(bad)
        assert declared_names([os.path.join(tmp, "upper", "up.h")]) == {"sb_up", "sb_x"}
    print("check-calls: self-test passed")
    return 0


def main(argv):
    args, allow, write, verbose = [], None, None, False
    it = iter(argv)
    for a in it:
        if a == "--self-test":
            return self_test()
        elif a == "--allow":
            allow = next(it, None)
        elif a == "--write-allow":
            write = next(it, None)
        elif a in ("-v", "--verbose"):
            verbose = True
        elif a.startswith("-") or len(args) == 2:
            args = []
            break
        else:
            args.append(a)
    if not args or (argv.count("--allow") and not allow) or (argv.count("--write-allow") and not write):
        print("usage: check-calls.py BUILD_DIR [ROOT] [--allow FILE] [--write-allow FILE] [-v]"
              " | --self-test", file=sys.stderr)
        return 2
    build = os.path.abspath(args[0])
    root = os.path.abspath(args[1] if len(args) > 1 else
                           os.path.join(os.path.dirname(__file__), ".."))
    bad, stats = check(build, root)
    if write:
        write_allow(write, bad)
        print("check-calls: wrote %d violations to %s" % (len(bad), write))
        return 0
    return report(bad, stats, read_allow(allow) if allow else [], verbose)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
