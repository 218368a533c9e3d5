#!/usr/bin/env python3
"""bench_server.py -- a load benchmark of `snapbank serve`: M simulated users
in multi-turn chats that share a system prompt and paste tool-output-sized
messages, against a real server over HTTP (streamed chat completions, the
standard library as the client).

For each concurrency level C (default 1, 2, 4, 8) a fresh server on a fresh
bank directory serves the same M conversations, C users at a time (each
user's turns in order; a user sends the whole conversation back each turn,
with its session id). It reports per level:
  - aggregate generated tokens per second (all tokens over the wall time),
  - the prompt tokens served from the bank (hit rate: cached / prompt),
  - time to first token p50 / p99 by cache_mode (cold, warm_prefix, ssd),
    measured by the client from sending the request to the first text,
  - the bytes the disk tier wrote (the server's /metrics) and its write
    amplification;
  - decode throughput: then C requests with short prompts and long answers
    (--decode-tokens) at once, generated tokens per second over their wall
    time: what batching the decode steps of running requests into one
    forward pass buys (the chat phase is mostly prefill, which batching does
    not make cheaper).
Then the last level's server is stopped (SIGTERM: the bank is flushed) and
started again on the same bank, and every user sends one more turn: those
prompts come back from disk (cache_mode ssd).

Run it from the build directory:
    python3 ../bench/bench_server.py --bin bin/snapbank
--quick is a smoke run on the tiny model (the test suite runs it).
"""
import argparse
import http.client
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

# everyday English, which the generated models' vocabulary (learned from an
# English text) tokenizes in about a token and a half a word
WORDS = ("the of and to in is that it was for on are as with they at be this from "
         "have or by one had not but what all were when we there can an your which "
         "their said if do will each about how up out them then she many some so these "
         "would other into has more her two like him see time could no make than first "
         "been its who now people made over did down only way find use may water long "
         "little very after words called just where most know get through back much go "
         "good new write our man too any day same right look think also around another "
         "came come work three word must because does part even place well such here "
         "take why things help put years different away again off went old number great "
         "tell men say small every found still between name should home big give air "
         "line set own under read last never left end along while might next sound").split()


ADMIN = "bench-admin-key"


def text_of(rng, n_words):
    return " ".join(rng.choice(WORDS) for _ in range(n_words))


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, int(round(p / 100.0 * (len(xs) - 1)))))
    return xs[k]


class Server:
    def __init__(self, args, bank, model, log):
        port_file = os.path.join(args.work, "port")
        if os.path.exists(port_file):
            os.unlink(port_file)
        self.log = open(log, "ab")
        admin = os.path.join(args.work, "admin-key")
        with open(admin, "w") as f:
            f.write(ADMIN + "\n")
        os.chmod(admin, 0o600)
        cmd = [args.bin, "serve", model, "--port", "0", "--port-file", port_file,
               "--bank-dir", bank, "--parallel", str(args.parallel), "--min-prefix",
               str(args.min_prefix), "--quiet", "--max-queue", "256", "--admin-key-file", admin]
        if args.threads:
            cmd += ["--threads", str(args.threads)]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        t0 = time.monotonic()
        while True:
            if self.proc.poll() is not None:
                sys.exit("bench_server: the server exited (%s)" % log)
            if os.path.exists(port_file):
                with open(port_file) as f:
                    self.port = int(f.read())
                try:
                    c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
                    c.request("GET", "/health")
                    if c.getresponse().status == 200:
                        break
                except OSError:
                    pass
            if time.monotonic() - t0 > 300:
                sys.exit("bench_server: the server did not come up")
            time.sleep(0.05)

    def metrics(self):
        """/metrics once the bank has written what it holds (a flush)."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        c.request("POST", "/v1/bank/flush", body=b"{}",
                  headers={"Authorization": "Bearer " + ADMIN})
        c.getresponse().read()
        c.request("GET", "/metrics")
        out = {}
        for line in c.getresponse().read().decode().splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                out[k] = float(v)
        return out

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout=600)
        self.log.close()
        return rc


def chat_turn(port, model, messages, sid, max_tokens):
    """One streamed turn: (answer text, usage, client ttft s, total s)."""
    body = {"model": model, "messages": messages, "max_tokens": max_tokens,
            "temperature": 0, "stream": True, "stream_options": {"include_usage": True},
            "session_id": sid}
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.monotonic()
    c.request("POST", "/v1/chat/completions", body=json.dumps(body).encode(),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError("HTTP %d: %s" % (r.status, r.read()[:300]))
    text, usage, ttft, buf = [], None, None, b""
    while True:
        chunk = r.read1(65536)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            data = ev[6:].decode()
            if data == "[DONE]":
                continue
            o = json.loads(data)
            if o.get("choices") and "content" in o["choices"][0]["delta"]:
                if ttft is None and o["choices"][0]["delta"]["content"]:
                    ttft = time.monotonic() - t0
                text.append(o["choices"][0]["delta"]["content"])
            if o.get("usage"):
                usage = o["usage"]
    c.close()
    total = time.monotonic() - t0
    return "".join(text), usage, ttft if ttft is not None else total, total


class User:
    def __init__(self, k, system, args):
        self.k = k
        self.sid = "user-%d" % k
        self.rng = random.Random(1000 + k)
        self.messages = [{"role": "system", "content": system}]
        self.args = args

    def turn(self, port, model, records, phase):
        # a tool-output-sized message: a command's output pasted back
        msg = "tool output %d:\n%s" % (len(self.messages), text_of(self.rng, self.args.tool_words))
        self.messages.append({"role": "user", "content": msg})
        answer, usage, ttft, total = chat_turn(port, model, self.messages, self.sid,
                                               self.args.max_tokens)
        self.messages.append({"role": "assistant", "content": answer})
        records.append({"phase": phase, "user": self.k, "ttft": ttft, "total": total,
                        "mode": usage["cache_mode"], "prompt": usage["prompt_tokens"],
                        "cached": usage["prompt_tokens_details"]["cached_tokens"],
                        "disk": usage["cached_tokens_disk"],
                        "completion": usage["completion_tokens"],
                        "server_ttft_ms": usage["ttft_ms"]})


def bank_dir(args, level):
    """The bank of the run at `level` users (the restart reuses the last)."""
    return os.path.join(args.work, "bank-%d" % level)


def run_level(args, model, model_name, system, level):
    bank = bank_dir(args, level)
    shutil.rmtree(bank, ignore_errors=True)
    srv = Server(args, bank, model, os.path.join(args.work, "server-%d.log" % level))
    users = [User(k, system, args) for k in range(args.users)]
    records, lock, todo = [], threading.Lock(), list(users)

    def worker():
        while True:
            with lock:
                if not todo:
                    return
                u = todo.pop(0)
            for _ in range(args.turns):
                u.turn(srv.port, model_name, records, "level")
    t0 = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(level)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    m = srv.metrics()
    # decode: C short prompts with long answers at once
    gen = [0] * level

    def decoder(i):
        msgs = [{"role": "user", "content": "Say something long, reader %d." % i}]
        _, usage, _, _ = chat_turn(srv.port, model_name, msgs, "decode-%d-%d" % (level, i),
                                   args.decode_tokens)
        gen[i] = usage["completion_tokens"]
    t0 = time.monotonic()
    threads = [threading.Thread(target=decoder, args=(i,)) for i in range(level)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    decode = sum(gen) / (time.monotonic() - t0)
    return srv, users, records, wall, m, decode


def summarize(name, records, wall, m):
    gen = sum(r["completion"] for r in records)
    prompt = sum(r["prompt"] for r in records)
    cached = sum(r["cached"] for r in records)
    row = {"name": name, "requests": len(records), "wall_s": wall,
           "gen_tokens": gen, "tok_s": gen / wall if wall else 0,
           "prompt_tokens": prompt, "cached_tokens": cached,
           "hit_rate": cached / prompt if prompt else 0,
           "disk_written": m.get("snapbank:disk_written_bytes_total", 0),
           "write_amp": m.get("snapbank:disk_write_amplification", 0), "ttft": {}}
    for mode in ("cold", "warm_prefix", "ssd"):
        xs = [r["ttft"] for r in records if r["mode"] == mode]
        if xs:
            row["ttft"][mode] = (len(xs), pct(xs, 50), pct(xs, 99))
    return row


def print_row(row):
    modes = "  ".join("%s n=%d p50 %.0f ms p99 %.0f ms" % (k, v[0], v[1] * 1e3, v[2] * 1e3)
                      for k, v in row["ttft"].items())
    dec = " decode %6.1f tok/s" % row["decode_tok_s"] if "decode_tok_s" in row else ""
    print("%-10s %4d req %7.1f s %6.1f tok/s%s  hit %5.1f%%  disk %7.1f MiB (wa %.3f)  %s" %
          (row["name"], row["requests"], row["wall_s"], row["tok_s"], dec,
           100 * row["hit_rate"], row["disk_written"] / 2**20, row["write_amp"], modes))
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default="bin/snapbank", help="the snapbank binary")
    ap.add_argument("--work", default="/var/tmp/snapbank-bench-server", help="work directory")
    ap.add_argument("--model", help="a GGUF model (default: make-model --preset PRESET)")
    ap.add_argument("--preset", default="small", help="the generated model (small)")
    ap.add_argument("--users", type=int, default=8, help="simulated users, M (8)")
    ap.add_argument("--turns", type=int, default=3, help="turns per user (3)")
    ap.add_argument("--system-words", type=int, default=400,
                    help="words of the shared system prompt (400)")
    ap.add_argument("--tool-words", type=int, default=120,
                    help="words of each tool output a user pastes (120)")
    ap.add_argument("--max-tokens", type=int, default=32, help="tokens per answer (32)")
    ap.add_argument("--decode-tokens", type=int, default=64,
                    help="tokens per answer of the decode phase (64)")
    ap.add_argument("--levels", default="1,2,4,8", help="concurrent users (1,2,4,8)")
    ap.add_argument("--parallel", type=int, default=8, help="the server's slots (8)")
    ap.add_argument("--threads", type=int, default=0, help="the server's threads")
    ap.add_argument("--min-prefix", type=int, default=256, help="the server's --min-prefix")
    ap.add_argument("--json", help="write every record and row to this file")
    ap.add_argument("--quick", action="store_true", help="a smoke run on the tiny model")
    args = ap.parse_args()
    if args.quick:
        args.preset, args.users, args.turns = "tiny", 4, 2
        args.system_words, args.tool_words, args.max_tokens = 60, 30, 8
        args.decode_tokens = 8
        args.levels, args.parallel, args.min_prefix = "1,4", 4, 1
    os.makedirs(args.work, exist_ok=True)
    model = args.model
    if not model:
        model = os.path.join(args.work, args.preset + ".gguf")
        if not os.path.exists(model):
            subprocess.run([args.bin, "make-model", "--preset", args.preset, "-o", model],
                           check=True, stdout=subprocess.DEVNULL)
    name = os.path.basename(model)[:-5] if model.endswith(".gguf") else os.path.basename(model)
    system = "You are a careful assistant. " + text_of(random.Random(7), args.system_words)
    levels = [int(x) for x in args.levels.split(",")]
    print("bench_server: %s, %d users x %d turns, system prompt %d words, tool outputs %d "
          "words, %d tokens per answer, --parallel %d" %
          (model, args.users, args.turns, args.system_words, args.tool_words,
           args.max_tokens, args.parallel))
    rows, all_records = [], []
    srv = users = None
    for level in levels:
        if srv:
            srv.stop()
        srv, users, records, wall, m, decode = run_level(args, model, name, system, level)
        row = summarize("%d user%s" % (level, "" if level == 1 else "s"), records, wall, m)
        row["decode_tok_s"] = decode
        print_row(row)
        rows.append(row)
        all_records += [dict(r, level=level) for r in records]
    # the last level's bank, after a restart: one more turn per user
    rc = srv.stop()
    if rc != 0:
        sys.exit("bench_server: the server's shutdown failed (%d)" % rc)
    bank = bank_dir(args, levels[-1])
    srv = Server(args, bank, model, os.path.join(args.work, "server-restart.log"))
    records = []
    t0 = time.monotonic()
    for u in users:
        u.turn(srv.port, name, records, "restart")
    row = summarize("restart", records, time.monotonic() - t0, srv.metrics())
    print_row(row)
    rows.append(row)
    all_records += [dict(r, level=0) for r in records]
    if srv.stop() != 0:
        sys.exit("bench_server: the server's shutdown failed")
    if not any(r["mode"] == "ssd" for r in records):
        sys.exit("bench_server: no turn after the restart came from disk")
    # The banks' segment files are preallocated (256 MiB each): a finished run
    # leaves its logs and model, not its banks.
    for level in levels:
        shutil.rmtree(bank_dir(args, level), ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "records": all_records}, f, indent=1)


if __name__ == "__main__":
    main()
