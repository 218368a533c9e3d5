#!/usr/bin/env python3
"""llama_side.py -- the runtime beside llama.cpp on the same GGUF files, in
one run: prefill and decode, tokens per second and CPU seconds per token.

Usage:
    bench/llama_side.py --llama-bench PATH --bench-runtime PATH
        [--threads N] [--prefill 512,2048|none] [--decode 256|0] [--context 512]
        [--reps 3] FILE.gguf [FILE.gguf ...]

For each file and each case (prefill of P tokens from an empty context;
decode of D tokens after a C-token prompt), it runs llama.cpp's llama-bench
and snapbank's bench_runtime one after the other on the same thread count,
and prints both engines' tokens/s (median of --reps, wall clock) and CPU
seconds per token, with their ratios (snapbank / llama.cpp for tokens/s,
llama.cpp / snapbank for CPU per token: above 1 means snapbank is faster).

CPU per token is what a loaded machine changes least (wall time is shared
with everything else; the work a token takes is not). bench_runtime prints
its own (the process's CPU over the timed calls). For llama-bench, which
does not, it is the difference of the process CPU (its children's rusage)
between a run of --reps repetitions and a run of one, divided by the tokens
of the extra repetitions: load, warm-up and the first repetition cancel
out. A decode repetition of llama-bench (-d C) fills its C-token context
first, so its decode CPU subtracts a prefill of C measured the same way;
that difference is noisy unless the decode is long beside the fill (the
default 256 tokens after 512; on a loaded machine take more).
With more than one thread, llama.cpp's threads spin while they wait for
each other, which counts as CPU: compare CPU per token at --threads 1.

Exit status: 0 success; 1 a run failed; 2 bad usage. Figures are printed,
never asserted.
"""
import argparse
import json
import re
import resource
import statistics
import subprocess
import sys


def child_cpu():
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def run(cmd):
    """Run cmd; return (stdout, CPU seconds it took)."""
    c0 = child_cpu()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    c1 = child_cpu()
    if p.returncode != 0:
        sys.stderr.write("llama_side: %s failed (%d):\n%s\n" % (" ".join(cmd), p.returncode,
                                                               p.stderr[-2000:]))
        sys.exit(1)
    return p.stdout, c1 - c0


def llama(a, path, p, n, d, reps):
    """llama-bench: (median tokens/s over reps, CPU seconds of the run)."""
    cmd = [a.llama_bench, "-m", path, "-t", str(a.threads), "-p", str(p), "-n", str(n),
           "-d", str(d), "-r", str(reps), "-o", "json"]
    out, cpu = run(cmd)
    rows = json.loads(out)
    if len(rows) != 1:
        sys.stderr.write("llama_side: llama-bench printed %d results\n" % len(rows))
        sys.exit(1)
    return statistics.median(rows[0]["samples_ts"]), cpu


def llama_case(a, path, p, n, d):
    """llama.cpp's tokens/s (median) and CPU seconds per token of one case."""
    ts, cpu_n = llama(a, path, p, n, d, a.reps)
    _, cpu_1 = llama(a, path, p, n, d, 1)
    per_rep = (cpu_n - cpu_1) / (a.reps - 1)
    if d:  # each repetition first fills its context: take that out
        _, fill_n = llama(a, path, d, 0, 0, a.reps)
        _, fill_1 = llama(a, path, d, 0, 0, 1)
        per_rep -= (fill_n - fill_1) / (a.reps - 1)
    return ts, per_rep / (p + n)


def snapbank(a, path):
    """bench_runtime's figures: {("prefill", P) or ("decode", C): (tok/s, CPU s/token)}."""
    out = {}
    for p in a.prefill or [a.context]:
        text, _ = run([a.bench_runtime, "--model", path, "--threads", str(a.threads),
                       "--reps", str(a.reps), "--prefill", str(p), "--decode", str(a.decode or 8),
                       "--context", str(a.context)])
        pm = re.search(r"^prefill (\d+) tokens:\s+([\d.]+) tokens/s.*?; ([\d.]+) ms CPU per "
                       r"token", text, re.M)
        dm = re.search(r"^decode \(after (\d+)\):\s+([\d.]+) tokens/s.*?; ([\d.]+) ms CPU per "
                       r"token", text, re.M)
        if not pm or not dm:
            sys.stderr.write("llama_side: cannot read bench_runtime's output:\n%s\n" % text)
            sys.exit(1)
        out[("prefill", int(pm.group(1)))] = (float(pm.group(2)), float(pm.group(3)) / 1e3)
        out[("decode", int(dm.group(1)))] = (float(dm.group(2)), float(dm.group(3)) / 1e3)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llama-bench", required=True)
    ap.add_argument("--bench-runtime", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--prefill", default="512,2048")
    ap.add_argument("--decode", type=int, default=256)
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    try:
        a.prefill = [int(x) for x in a.prefill.split(",")] if a.prefill != "none" else []
    except ValueError:
        ap.error("--prefill takes comma-separated token counts, or none")
    if a.reps < 2 or a.threads < 1 or a.decode < 0 or min(a.prefill + [1]) < 1:
        ap.error("--reps must be at least 2; --threads and --prefill positive")
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print("llama_side -- %d thread(s), medians of %d, load average %s at start"
          % (a.threads, a.reps, load))
    print("%-28s %-18s %10s %10s %6s %12s %12s %6s" % (
        "file", "case", "llama t/s", "snap t/s", "ratio", "llama ms/t", "snap ms/t",
        "ratio"))
    for path in a.files:
        sb = snapbank(a, path)
        cases = [("prefill", p, p, 0, 0) for p in a.prefill]
        if a.decode:
            cases.append(("decode", a.context, 0, a.decode, a.context))
        for kind, key, p, n, d in cases:
            lts, lcpu = llama_case(a, path, p, n, d)
            sts, scpu = sb[(kind, key)]
            what = "pp%d" % p if kind == "prefill" else "tg%d after %d" % (n, d)
            print("%-28s %-18s %10.1f %10.1f %6.2f %12.3f %12.3f %6.2f" % (
                path.rsplit("/", 1)[-1][:28], what, lts, sts, sts / lts, lcpu * 1e3,
                scpu * 1e3, lcpu / scpu if scpu > 0 else 0.0), flush=True)
    with open("/proc/loadavg") as f:
        print("load average %s at the end" % f.read().split()[0])


if __name__ == "__main__":
    main()
