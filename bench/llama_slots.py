#!/usr/bin/env python3
"""llama_slots.py -- llama.cpp's slot save and restore of the same model and
prompts bench_session restores, beside it in the same run.

Description: starts llama-server (--slot-save-path, one slot, the model's
context, on 127.0.0.1 at a free port), waits for /health, and for each
prompt length N: computes the prompt (POST /completion with the first N
token IDs of --prompt-file, n_predict 1, slot 0), saves the slot
(POST /slots/0?action=save), then --reps times drops the page cache (as
root: /proc/sys/vm/drop_caches; it says when it could not) and restores it
(POST /slots/0?action=restore), printing the server's restore timing
(timings.restore_ms) and the file's size; then the median. The server is
stopped by its pid and the slot files removed.

  llama_slots.py --server PATH --model GGUF --prompt-file F --tokens 2048,8000
                 [--reps 3] [--dir D] [--threads N]

Exit status: 0; 1 a request or the server failed; 2 bad usage. Standard
library only.
"""
import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url, body, timeout=600):
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def wait_health(base, proc, timeout=300):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"llama-server exited with status {proc.returncode}")
        try:
            with urllib.request.urlopen(base + "/health", timeout=5) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, OSError):
            pass
        time.sleep(0.2)
    raise RuntimeError("llama-server did not become healthy")


def drop_caches():
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompt-file", required=True)
    ap.add_argument("--tokens", default="2048,8000")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dir", default="/var/tmp")
    a = ap.parse_args()
    with open(a.prompt_file) as f:
        tokens = [int(t) for t in f.read().split()]
    lengths = [int(n) for n in a.tokens.split(",")]
    if max(lengths) > len(tokens):
        print(f"llama_slots: the prompt file holds {len(tokens)} tokens", file=sys.stderr)
        return 2
    work = tempfile.mkdtemp(prefix="llama_slots.", dir=a.dir)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    cmd = [a.server, "-m", a.model, "--host", "127.0.0.1", "--port", str(port),
           "--slot-save-path", work, "-np", "1", "-c", str(max(lengths) + 64),
           "-t", str(a.threads), "--no-webui"]
    print("llama-server command:", " ".join(cmd), flush=True)
    log = open(os.path.join(work, "server.log"), "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    rc = 0
    try:
        wait_health(base, proc)
        for n in lengths:
            t0 = time.monotonic()
            post(base + "/completion", {"prompt": tokens[:n], "n_predict": 1,
                                        "cache_prompt": True, "id_slot": 0,
                                        "temperature": 0})
            t_prefill = time.monotonic() - t0
            name = f"prompt{n}.bin"
            s = post(base + "/slots/0?action=save", {"filename": name})
            size = os.path.getsize(os.path.join(work, name))
            times = []
            dropped = True
            for _ in range(a.reps):
                dropped &= drop_caches()
                r = post(base + "/slots/0?action=restore", {"filename": name})
                times.append(r["timings"]["restore_ms"])
                if r.get("n_restored") != n and r.get("n_restored") is not None:
                    print(f"llama_slots: restored {r.get('n_restored')} of {n} tokens",
                          file=sys.stderr)
            print(f"llama.cpp slot, {n} tokens: prompt computed in {t_prefill:.1f} s; saved "
                  f"{s.get('n_saved')} tokens, {size / 2**20:.1f} MiB in "
                  f"{s['timings']['save_ms']:.1f} ms; restore after drop_caches"
                  f"{'' if dropped else ' (page cache NOT dropped: not root)'}: "
                  + ", ".join(f"{t:.1f}" for t in times)
                  + f" ms; median {statistics.median(times):.1f} ms", flush=True)
    except (RuntimeError, urllib.error.URLError, KeyError, OSError) as e:
        print(f"llama_slots: {e}", file=sys.stderr)
        rc = 1
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        if rc:
            with open(os.path.join(work, "server.log")) as f:
                sys.stderr.write(f.read()[-4000:])
        shutil.rmtree(work, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
