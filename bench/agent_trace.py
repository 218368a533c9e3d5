#!/usr/bin/env python3
"""agent_trace.py -- an agent's trace against `snapbank serve --engine
llama.cpp` and against llama.cpp's own llama-server, the same model, slots,
threads and context, one after the other in one run.

The trace: every conversation starts with the same long system prompt (an
agent's instructions and its tool definitions, --system-tokens of them) and
runs --turns turns; each turn sends the whole conversation back (the
OpenAI way) with one more user message the size of a tool's output
(--user-tokens) and asks for --gen tokens, greedy, streamed. The
assistant's messages sent back are fixed texts, not what the model said,
so both servers see the very same prompts. --convs sets how many
conversations run at once (one thread each, each turn after the last);
each server gets --parallel slots (default: the conversations) and a
context of --ctx tokens per slot.

After turn --restart-after of every conversation the server is stopped
(SIGTERM) and started again: snapbank on the same bank directory (its disk
tier), llama-server as it is (it keeps nothing). The next turn's time to
first token is the restart's cost.

Per server and concurrency it prints: generated tokens per second over the
turns' wall time (the restart excluded), time to first token p50 and p95
over the warm turns (not the first turn, not the one after the restart),
the first turn's, and the first turn after the restart; then the ratios
snapbank / llama-server. TTFT is the client's: from sending the request to
the first chunk with text.

    python3 bench/agent_trace.py --snapbank build/bin/snapbank \\
        --llama-server /tmp/llsrc/src/build-srv/bin/llama-server --model small.gguf
"""
import argparse
import http.client
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

WORDS = ("the of and to in is that it was for on are as with they at be this from "
         "have or by one had not but what all were when we there can an your which "
         "their said if do will each about how up out them then she many some so these "
         "would other into has more her two like him see time could no make than first "
         "been its who now people made over did down only way find use may water long "
         "little very after words called just where most know get through back much go "
         "good new write our man too any day same right look think also around another").split()

TOOLS = [
    {"name": "read_file", "description": "Read a file of the repository.",
     "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                    "required": ["path"]}},
    {"name": "run_tests", "description": "Run the test suite, or one test.",
     "parameters": {"type": "object", "properties": {"name": {"type": "string"}}}},
    {"name": "search", "description": "Search the code for a string.",
     "parameters": {"type": "object", "properties": {"query": {"type": "string"},
                                                     "limit": {"type": "integer"}},
                    "required": ["query"]}},
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def count_tokens(snapbank, model, text):
    with tempfile.NamedTemporaryFile("w", delete=False) as f:
        f.write(text)
    try:
        out = subprocess.run([snapbank, "tokenize", model, "--file", f.name, "--ids-only",
                              "--no-bos"], check=True, capture_output=True, text=True).stdout
    finally:
        os.unlink(f.name)
    return len(out.split())


def words_of(rng, snapbank, model, tokens, head=""):
    """Text of `tokens` tokens by the model's vocabulary, give or take a
    word's (words added a third of the way each time, then one by one)."""
    text = head
    while True:
        n = count_tokens(snapbank, model, text) if text else 0
        if n >= tokens:
            return text
        k = max(1, (tokens - n) // 3)
        text += " " + " ".join(rng.choice(WORDS) for _ in range(k))


class Server:
    def __init__(self, kind, args, bank):
        self.kind, self.args, self.bank = kind, args, bank
        self.port = free_port()
        self.log = open(os.path.join(args.work, kind + ".log"), "ab")
        self.start()

    def start(self):
        a = self.args
        n = a.parallel or 0
        common = ["-m", a.model, "-c", str(a.ctx * n), "-np", str(n), "-t", str(a.threads),
                  "-a", "m", "--host", "127.0.0.1", "--port", str(self.port)]
        if self.kind == "snapbank":
            cmd = [a.snapbank, "serve", "--engine", "llama.cpp", *common, "--bank-dir", self.bank,
                   "--min-prefix", "64", "--page-tokens", "64", "--quiet"]
        else:
            cmd = [a.llama_server, *common, "--no-webui"]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        t0 = time.monotonic()
        while True:
            if self.proc.poll() is not None:
                sys.exit("%s exited (%d): see %s" % (self.kind, self.proc.returncode,
                                                     self.log.name))
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    return
            except OSError:
                pass
            if time.monotonic() - t0 > 600:
                sys.exit(self.kind + " did not come up")
            time.sleep(0.1)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=600)

    def turn(self, messages, gen):
        """One streamed turn: (ttft seconds, generated tokens)."""
        body = json.dumps({"model": "m", "messages": messages, "max_tokens": gen,
                           "temperature": 0, "stream": True,
                           "stream_options": {"include_usage": True}})
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=3600)
        t0 = time.monotonic()
        c.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            sys.exit("%s: HTTP %d: %s" % (self.kind, r.status, r.read()[:300]))
        ttft, usage, pieces = None, None, 0
        for line in r:
            line = line.strip()
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            ev = json.loads(line[6:])
            for ch in ev.get("choices") or []:
                if (ch.get("delta") or {}).get("content"):
                    pieces += 1
                    if ttft is None:
                        ttft = time.monotonic() - t0
            if ev.get("usage"):
                usage = ev["usage"]
        c.close()
        if ttft is None:  # an answer with no text: its end
            ttft = time.monotonic() - t0
        return ttft, (usage or {}).get("completion_tokens", pieces), usage or {}


def run(kind, args, system, users, convs):
    bank = tempfile.mkdtemp(prefix="agent-trace-", dir=args.work)
    s = Server(kind, args, bank)
    hist = [[{"role": "system", "content": system}] for _ in range(convs)]
    ttft = {}       # turn -> [seconds]
    modes = {}      # turn -> [cache_mode]
    restore = {}    # turn -> [restore_ms] (snapbank's usage)
    gen_total, wall = 0, 0.0
    lock = threading.Lock()

    def one(ci, turn):
        nonlocal gen_total
        hist[ci].append({"role": "user", "content": users[ci][turn]})
        t, g, u = s.turn(hist[ci], args.gen)
        hist[ci].append({"role": "assistant", "content": "Noted: step %d of %d done." %
                         (turn + 1, args.turns)})
        with lock:
            ttft.setdefault(turn, []).append(t)
            modes.setdefault(turn, []).append(u.get("cache_mode", "-"))
            restore.setdefault(turn, []).append(u.get("restore_ms", 0))
            gen_total += g

    def phase(first, last):
        t0 = time.monotonic()

        def conv(ci):
            for turn in range(first, last):
                one(ci, turn)
        th = [threading.Thread(target=conv, args=(ci,)) for ci in range(convs)]
        for t in th:
            t.start()
        for t in th:
            t.join()
        return time.monotonic() - t0

    wall += phase(0, args.restart_after)
    s.stop()
    s.start()
    wall += phase(args.restart_after, args.turns)
    s.stop()
    shutil.rmtree(bank, ignore_errors=True)
    warm = [x for t, v in ttft.items() if t not in (0, args.restart_after) for x in v]
    q = statistics.quantiles(warm, n=20) if len(warm) > 1 else warm * 19
    return {"tok_s": gen_total / wall, "p50": statistics.median(warm), "p95": q[18],
            "first": statistics.median(ttft[0]),
            "after_restart": statistics.median(ttft[args.restart_after]),
            "modes_after_restart": modes[args.restart_after],
            "restore_ms_after_restart": statistics.median(restore[args.restart_after]),
            "gen": gen_total, "wall": wall}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--snapbank", required=True)
    ap.add_argument("--llama-server", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--convs", default="1,2,4")
    ap.add_argument("--parallel", type=int, default=0, help="slots (default: the conversations)")
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--restart-after", type=int, default=10)
    ap.add_argument("--system-tokens", type=int, default=4000)
    ap.add_argument("--user-tokens", type=int, default=150)
    ap.add_argument("--gen", type=int, default=32)
    ap.add_argument("--ctx", type=int, default=8192, help="context per slot")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--work", default="/var/tmp/agent-trace")
    ap.add_argument("--json", help="write the figures here too")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    rng = random.Random(7)
    head = ("You are a coding agent. Work step by step; call a tool when you need one. "
            "Tools:\n" + "\n".join(json.dumps({"type": "function", "function": t})
                                   for t in TOOLS) + "\nGuidelines:")
    system = words_of(rng, args.snapbank, args.model, args.system_tokens, head)
    print("system prompt: %d tokens; %d turns of %d user tokens, %d generated; restart after "
          "turn %d" % (count_tokens(args.snapbank, args.model, system), args.turns,
                       args.user_tokens, args.gen, args.restart_after), flush=True)
    results = {}
    for ci, convs in enumerate(int(c) for c in args.convs.split(",")):
        users = [[words_of(rng, args.snapbank, args.model, args.user_tokens,
                           "Tool output %d.%d:" % (c, t)) for t in range(args.turns)]
                 for c in range(convs)]
        parallel = args.parallel or convs
        order = ["snapbank", "llama-server"] if ci % 2 == 0 else ["llama-server", "snapbank"]
        for kind in order:
            a = argparse.Namespace(**vars(args))
            a.parallel = parallel
            r = run(kind, a, system, users, convs)
            results[(convs, kind)] = r
            print("%-12s convs %d -np %d: %.2f tok/s, TTFT p50 %.0f ms p95 %.0f ms, first turn "
                  "%.0f ms, after restart %.0f ms %s" %
                  (kind, convs, parallel, r["tok_s"], r["p50"] * 1e3, r["p95"] * 1e3,
                   r["first"] * 1e3, r["after_restart"] * 1e3,
                   "%s, restore %.0f ms" % (r["modes_after_restart"],
                                            r["restore_ms_after_restart"])
                   if kind == "snapbank" else ""), flush=True)
        sb, ll = results[(convs, "snapbank")], results[(convs, "llama-server")]
        print("ratio        convs %d: tok/s %.2fx, TTFT p50 %.2fx, after restart %.1fx better"
              % (convs, sb["tok_s"] / ll["tok_s"], ll["p50"] / sb["p50"],
                 ll["after_restart"] / sb["after_restart"]), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"%d/%s" % k: v for k, v in results.items()}, f, indent=1)


if __name__ == "__main__":
    main()
