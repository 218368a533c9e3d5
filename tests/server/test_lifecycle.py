"""test_lifecycle.py -- snapbank serve across stops, kills and clients that
leave: SIGTERM finishes or cancels what runs, flushes the bank and exits 0;
a restart (after SIGTERM or kill -9) restores the conversations from disk
(cache_mode ssd); a client that disconnects mid-stream stops its
generation and what was computed is committed; a full queue answers 503
with Retry-After; a busy session 409.

Description:
  - restart: the mid model (big enough that reading pages beats computing
    them), a bank directory; a two-turn chat with a session; SIGTERM: exit
    0, the log names the flushed SSD session cache and the sessions written;
    a new process on the same bank (--disk-restore always, so a slow
    sanitizer build reads the pages too rather than deciding that computing
    them is faster): the session is there, its third turn is ssd with its
    reusable tokens read from disk, and another conversation sharing the
    system prompt finds it on disk too;
  - kill -9: the same without a clean stop: once the bank's writer has
    drained (stats) and the session file holds the turn (its header), kill
    -9, restart: ssd;
  - disconnect: the tiny model with a 32k context, a stream of up to 30000
    tokens read for two chunks and dropped: the request is counted
    cancelled, the session holds the prompt and the tokens that ran (fewer
    than asked), and the bank restores all of them; SIGINT then stops the
    server as SIGTERM does;
  - SIGTERM with a request in flight: a short one completes (200, every
    token); a stream of 30000 tokens is cancelled after --shutdown-timeout
    with an error event and [DONE]; exit 0;
  - --parallel 1 --max-queue 1: one request running, one waiting, the next
    gets 503 with Retry-After and an error object; the waiting one then
    completes;
  - a session answering one request refuses a second (409).
"""
import http.client
import json
import os
import signal
import socket
import struct
import threading
import unittest

from harness import ServerTest, chat, long_ctx, mid, wait_for

SYS = "You keep the bank's pages. " * 6
ADMIN = "admin-key-lifecycle"


def open_stream(port, body):
    """Start a streamed request; returns (connection, response)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    c.request("POST", "/v1/chat/completions", body=json.dumps(body).encode(),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200, r.read()
    return c, r


def read_events(r, n):
    """Read until n events have come (or the stream ended); returns them."""
    buf, out = b"", []
    while len(out) < n:
        chunk = r.read1(65536)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            out.append(ev.decode()[6:])
    return out


def drop(c):
    """Close the client's socket at once."""
    c.sock.shutdown(socket.SHUT_RDWR)
    c.close()


class Lifecycle(ServerTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.mid = mid(cls.dir)
        cls.long = long_ctx(cls.dir)
        cls.admin = os.path.join(cls.dir, "admin")
        with open(cls.admin, "w") as f:
            f.write(ADMIN + "\n")
        os.chmod(cls.admin, 0o600)

    def turn(self, s, model, msgs, sid=None, n=6):
        body = {"model": model, "messages": msgs, "max_tokens": n, "temperature": 0}
        if sid:
            body["session_id"] = sid
        st, _, r = s.post("/v1/chat/completions", body)
        self.assertEqual(st, 200, r)
        return r["choices"][0]["message"]["content"], r["usage"]

    def two_turns(self, s, sid):
        msgs = [{"role": "system", "content": SYS}, {"role": "user", "content": "Open."}]
        a, u = self.turn(s, "mid", msgs, sid)
        self.assertEqual(u["cache_mode"], "cold")
        msgs += [{"role": "assistant", "content": a}, {"role": "user", "content": "Go on."}]
        a, u = self.turn(s, "mid", msgs, sid)
        self.assertEqual(u["cache_mode"], "warm_prefix")
        return msgs + [{"role": "assistant", "content": a},
                       {"role": "user", "content": "Once more."}]

    def after_restart(self, s, msgs, sid):
        st, _, info = s.get("/v1/sessions/" + sid)
        self.assertEqual((st, info["turns"]), (200, 2), info)
        # a new conversation with the same system prompt: its prefix is on
        # disk (and read back into RAM, where the next turn finds it)
        _, u = self.turn(s, "mid", [{"role": "system", "content": SYS},
                                    {"role": "user", "content": "Someone else."}])
        self.assertEqual(u["cache_mode"], "ssd", u)
        # the conversation goes on: the rest of its tokens come from disk
        _, u = self.turn(s, "mid", msgs, sid)
        self.assertEqual(u["cache_mode"], "ssd", u)
        self.assertEqual(u["prompt_tokens_details"]["cached_tokens"], info["reusable_tokens"])
        self.assertGreater(u["cached_tokens_disk"], 0)

    def test_sigterm_restart(self):
        bank = os.path.join(self.dir, "bank-term")
        s = self.start(self.mid, "--bank-dir", bank, "--min-prefix", "1", name="term1")
        msgs = self.two_turns(s, "alice")
        self.assertEqual(s.stop(), 0, s.text())
        log = s.text()
        self.assertIn("SIGTERM: shutting down", log)
        self.assertIn("flushed the SSD session cache %s/store: ok" % bank, log)
        self.assertIn("sessions: 1 in RAM, each in its file", log)
        self.assertTrue(os.path.exists(os.path.join(bank, "sessions", "@default", "alice.sbs")))
        s = self.start(self.mid, "--bank-dir", bank, "--min-prefix", "1", "--disk-restore",
                       "always", name="term2")
        self.after_restart(s, msgs, "alice")
        self.assertEqual(s.stop(), 0)

    def test_bank_write_outcome(self):
        # with a disk tier the turn's pages are queued for it (or written),
        # none denied, and the usage says so
        bank = os.path.join(self.dir, "bank-outcome")
        s = self.start(self.mid, "--bank-dir", bank, "--min-prefix", "1", name="outcome")
        st, _, r = s.post("/v1/chat/completions",
                          chat(s.get("/v1/models")[2]["data"][0]["id"], "What is kept?",
                               max_tokens=4))
        self.assertEqual(st, 200, r)
        bw = r["usage"]["bank_write"]
        self.assertGreater(bw["pages_new"], 0, bw)
        self.assertGreater(bw["blocks_queued"], 0, bw)
        self.assertEqual(bw["blocks_denied"], 0, bw)
        self.assertEqual(s.stop(), 0)

    def test_kill9_restart(self):
        bank = os.path.join(self.dir, "bank-kill")
        s = self.start(self.mid, "--bank-dir", bank, "--min-prefix", "1", "--admin-key-file",
                       self.admin, name="kill1")
        msgs = self.two_turns(s, "bob")
        adm = {"Authorization": "Bearer " + ADMIN}

        def drained():
            st, _, x = s.get("/v1/bank/stats", headers=adm)
            return st == 200 and x["disk_queued_bytes"] == 0 and x["disk_pages"] > 0 and \
                x["disk_deferred"] == x["disk_pool_written"]
        wait_for(drained, "the bank's writer to drain")
        path = os.path.join(bank, "sessions", "@default", "bob.sbs")

        def session_written():
            try:
                with open(path, "rb") as f:
                    head = f.read(64)
            except OSError:
                return False
            return len(head) == 64 and struct.unpack("<Q", head[56:64])[0] == 2
        wait_for(session_written, "the session file of turn 2")
        s.kill9()
        s = self.start(self.mid, "--bank-dir", bank, "--min-prefix", "1", "--disk-restore",
                       "always", name="kill2")
        self.after_restart(s, msgs, "bob")
        self.assertEqual(s.stop(), 0)

    def test_disconnect(self):
        s = self.start(self.long, "--min-prefix", "1", name="dc")
        body = {"model": "long", "messages": [{"role": "user", "content": "Talk for long."}],
                "max_tokens": 30000, "temperature": 0, "stream": True, "session_id": "dc"}
        c, r = open_stream(s.port, body)
        self.assertEqual(len(read_events(r, 3)), 3)  # the role chunk and two of text
        drop(c)
        key = 'snapbank:requests_finished_total{finished_reason="cancelled"}'
        wait_for(lambda: s.metrics()[key] == 1, "the request to be cancelled")
        st, _, info = s.get("/v1/sessions/dc")
        self.assertEqual(st, 200, info)
        prompt = info["last_turn"]["prompt_tokens"]
        self.assertGreater(info["tokens"], prompt + 1)          # tokens ran...
        self.assertLess(info["tokens"], prompt + 30000)         # ...and stopped
        self.assertEqual(info["bank"]["restorable_tokens"], info["tokens"])  # committed
        m = s.metrics()
        self.assertEqual(m["snapbank:num_requests_running"], 0)
        self.assertLess(m["snapbank:generation_tokens_total"], 30000)
        self.assertEqual(s.stop(signal.SIGINT), 0)  # SIGINT shuts down as SIGTERM does
        self.assertIn("SIGINT: shutting down", s.text())

    def test_sigterm_in_flight(self):
        s = self.start(self.long, "--shutdown-timeout", "1", name="inflight")
        body = {"model": "long", "messages": [{"role": "user", "content": "Go."}],
                "max_tokens": 30000, "temperature": 0, "stream": True}
        c, r = open_stream(s.port, body)
        self.assertEqual(len(read_events(r, 2)), 2)
        short = {}

        def ask():
            st, _, x = s.post("/v1/chat/completions",
                              {"model": "long", "messages": [{"role": "user", "content": "Hi"}],
                               "max_tokens": 20, "temperature": 0})
            short["r"] = (st, x)
        t = threading.Thread(target=ask)
        t.start()
        wait_for(lambda: s.metrics()["snapbank:num_requests_running"] == 2 or "r" in short,
                 "the short request to start")
        s.proc.send_signal(15)
        rest = read_events(r, 10**9)  # to the end of the stream
        self.assertEqual(rest[-1], "[DONE]")
        err = json.loads(rest[-2])
        self.assertEqual(err["error"]["code"], "server_shutting_down")
        c.close()
        t.join()
        st, x = short["r"]
        self.assertEqual(st, 200, x)
        self.assertEqual(x["usage"]["completion_tokens"], 20)
        self.assertEqual(s.stop(), 0)
        log = s.text()
        self.assertIn("shutdown timeout: cancelling 1 requests", log)
        self.assertIn("nothing to flush", log)

    def test_queue_full_and_busy_session(self):
        s = self.start(self.long, "--parallel", "1", "--max-queue", "1", name="queue")
        body = {"model": "long", "messages": [{"role": "user", "content": "Long one."}],
                "max_tokens": 30000, "temperature": 0, "stream": True, "session_id": "busy"}
        c, r = open_stream(s.port, body)
        read_events(r, 2)
        # the same session while it answers: 409
        st, _, e = s.post("/v1/chat/completions",
                          dict(body, stream=False, max_tokens=1, session_id="busy"))
        self.assertEqual((st, e["error"]["code"]), (409, "session_busy"))
        # one waits in the queue...
        waiting = {}

        def ask():
            waiting["r"] = s.post("/v1/chat/completions",
                                  {"model": "long", "max_tokens": 3, "temperature": 0,
                                   "messages": [{"role": "user", "content": "Waiting."}]})
        t = threading.Thread(target=ask)
        t.start()
        wait_for(lambda: s.metrics()["snapbank:num_requests_waiting"] == 1, "a queued request")
        # ...the next is refused
        st, hd, e = s.post("/v1/chat/completions",
                           {"model": "long", "max_tokens": 3,
                            "messages": [{"role": "user", "content": "No room."}]})
        self.assertEqual((st, e["error"]["code"]), (503, "server_is_overloaded"))
        self.assertEqual(hd.get("retry-after"), "1")
        self.assertEqual(set(e["error"]), {"message", "type", "param", "code"})
        drop(c)  # the long one goes; the queued one runs
        t.join()
        st, _, x = waiting["r"]
        self.assertEqual((st, x["usage"]["completion_tokens"]), (200, 3), x)
        self.assertEqual(s.stop(), 0)


if __name__ == "__main__":
    unittest.main()
