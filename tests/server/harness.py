"""harness.py -- what the snapbank serve tests share: making models, starting
a server on a free loopback port (it writes the port it got to --port-file),
waiting for /health, stopping it by pid, and HTTP helpers over the standard
library (http.client), including a server-sent-events reader.

The tests find the binary in $SNAPBANK_BIN and write under $SB_WORK (ctest
passes both). No test asserts on wall-clock time: every wait is for a
condition, with a generous limit that only a hung server reaches.
"""
import http.client
import json
import os
import signal
import subprocess
import time
import unittest

BIN = os.environ.get("SNAPBANK_BIN", "snapbank")
WORK = os.environ.get("SB_WORK", "/tmp/snapbank-server-tests")
LIMIT = float(os.environ.get("SB_WAIT_LIMIT", "300"))  # seconds: a hung server
# $SB_ENGINE: the engine every server of the suite runs (--engine; ctest
# runs the suites once on the builtin and again on llama.cpp where built)
ENGINE = os.environ.get("SB_ENGINE", "builtin")


def builtin_only(why):
    """Skip a test on the llama.cpp engine, saying why."""
    return unittest.skipIf(ENGINE != "builtin", "builtin engine only: " + why)


def work_dir(name):
    d = os.path.join(WORK, name)
    subprocess.run(["rm", "-rf", d], check=True)
    os.makedirs(d)
    return d


def make_model(path, *extra, preset="tiny"):
    """A model from `snapbank make-model --preset PRESET` with extra options."""
    if not os.path.exists(path):
        subprocess.run([BIN, "make-model", "--preset", preset, *extra, "-o", path],
                       check=True, stdout=subprocess.DEVNULL)
    return path


def tiny(dirname):
    return make_model(os.path.join(dirname, "tiny.gguf"))


def mid(dirname):
    """Big enough that reading a prefix from disk beats recomputing it (the
    runtime rightly recomputes the tiny model's pages instead of reading them)."""
    return make_model(os.path.join(dirname, "mid.gguf"), "--dim", "512", "--layers", "4",
                      "--heads", "8", "--kv-heads", "4", "--ff", "1536", "--dtype", "f16")


def long_ctx(dirname):
    """The tiny model with a long context: a generation that runs for many
    seconds, for the tests that stop one part-way."""
    return make_model(os.path.join(dirname, "long.gguf"), "--ctx", "32768")


def wait_for(cond, what, limit=LIMIT, step=0.02):
    t0 = time.monotonic()
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() - t0 > limit:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(step)


class Server:
    """A `snapbank serve` process on a free loopback port."""

    def __init__(self, workdir, model, *args, name="server", wait=True):
        self.dir = workdir
        self.port_file = os.path.join(workdir, name + ".port")
        self.log_path = os.path.join(workdir, name + ".log")
        if os.path.exists(self.port_file):
            os.unlink(self.port_file)
        self.log = open(self.log_path, "ab")
        if ENGINE != "builtin" and "--threads" not in args:
            # llama.cpp's threads spin while they wait for work: two servers
            # of two threads each on a 2-core machine starve each other
            args = ("--threads", "1", *args)
        if ENGINE != "builtin" and "--no-kv-unified" not in args:
            # the tests' --ctx N (or the model's) is the longest sequence, as
            # the builtin engine reads it; llama.cpp's engine splits N among
            # the slots unless they share one cache
            args = ("-kvu", *args)
        self.proc = subprocess.Popen([BIN, "serve", model, "--port", "0", "--port-file",
                                      self.port_file, "--engine", ENGINE, *args],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        self.port = None
        if wait:
            self.wait_ready()

    def wait_ready(self):
        def up():
            if self.proc.poll() is not None:
                raise AssertionError("server exited with %d:\n%s" % (self.proc.returncode,
                                                                     self.text()))
            if not self.port and os.path.exists(self.port_file):
                with open(self.port_file) as f:
                    self.port = int(f.read())
            if not self.port:
                return False
            try:
                return self.get("/health")[0] == 200
            except OSError:
                return False
        wait_for(up, "the server's /health")

    def text(self):
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def conn(self):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=LIMIT)

    def request(self, method, path, body=None, headers=None, raw=None):
        """(status, headers dict, parsed JSON or text)."""
        c = self.conn()
        h = dict(headers or {})
        data = raw
        if body is not None:
            data = json.dumps(body).encode()
            h.setdefault("Content-Type", "application/json")
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        payload = r.read()
        c.close()
        hd = {k.lower(): v for k, v in r.getheaders()}
        if hd.get("content-type", "").startswith("application/json"):
            return r.status, hd, json.loads(payload)
        return r.status, hd, payload.decode("utf-8", "replace")

    def get(self, path, headers=None):
        return self.request("GET", path, headers=headers)

    def post(self, path, body, headers=None):
        return self.request("POST", path, body, headers)

    def stream(self, path, body, headers=None):
        """POST with stream: (status, list of events: parsed JSON, or the
        string "[DONE]")."""
        c = self.conn()
        h = {"Content-Type": "application/json", **(headers or {})}
        c.request("POST", path, body=json.dumps(body).encode(), headers=h)
        r = c.getresponse()
        if r.status != 200:
            payload = json.loads(r.read())
            c.close()
            return r.status, payload
        events = []
        for data in sse_events(r):
            events.append("[DONE]" if data == "[DONE]" else json.loads(data))
        c.close()
        return r.status, events

    def metrics(self):
        """{name{labels}: value} from /metrics."""
        st, _, text = self.get("/metrics")
        assert st == 200, text
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                out[k] = float(v)
        return out

    def stop(self, sig=signal.SIGTERM):
        """Signal the server and wait for it to exit; returns its status."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=LIMIT)
        finally:
            self.log.close()
        return rc

    def kill9(self):
        self.proc.kill()
        self.proc.wait(timeout=LIMIT)
        self.log.close()


def sse_events(resp):
    """The data of each server-sent event of an http.client response."""
    buf = b""
    while True:
        chunk = resp.read1(65536) if hasattr(resp, "read1") else resp.read(1)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            for line in ev.split(b"\n"):
                if line.startswith(b"data: "):
                    yield line[6:].decode()


def chat(model, content, **kw):
    body = {"model": model, "messages": [{"role": "user", "content": content}],
            "temperature": 0, "max_tokens": 8}
    body.update(kw)
    return body


def streamed_text(events, kind="chat"):
    """The text a stream's chunks carry, concatenated."""
    out = []
    for e in events:
        if e == "[DONE]" or not e.get("choices"):
            continue
        ch = e["choices"][0]
        out.append(ch["delta"].get("content") or "" if kind == "chat" else ch["text"])
    return "".join(out)


class ServerTest(unittest.TestCase):
    """Base class: self.dir is a fresh work directory per test class."""
    servers = []

    @classmethod
    def setUpClass(cls):
        cls.dir = work_dir(cls.__name__)

    @classmethod
    def tearDownClass(cls):
        """Everything but the servers' logs goes: a bank's segment files are
        preallocated (256 MiB each), and three builds' suites in one CI run
        must not fill the disk. The logs stay for a failure's post-mortem."""
        for root, dirs, files in os.walk(cls.dir, topdown=False):
            for f in files:
                if not f.endswith(".log"):
                    os.unlink(os.path.join(root, f))
            for d in dirs:
                p = os.path.join(root, d)
                if not os.listdir(p):
                    os.rmdir(p)

    def start(self, model, *args, **kw):
        s = Server(self.dir, model, *args, **kw)
        self.addCleanup(self._cleanup, s)
        return s

    @staticmethod
    def _cleanup(s):
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait()
        if not s.log.closed:
            s.log.close()
        # a sanitizer build reports into the log: any report fails the test
        for mark in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                     "WARNING: ThreadSanitizer", "runtime error:"):
            if mark in s.text():
                raise AssertionError("the server's log has a sanitizer report:\n" + s.text())
