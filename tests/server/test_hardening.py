"""test_hardening.py -- snapbank serve against clients that misbehave, and
the options that make it safe to put in front of them (issue 29).

Description:
  - a non-streamed request whose client disconnects mid-generation: a
    small model (dim 256, 4 layers, 32k context, one thread: hundreds of
    tokens a second) asked for 30000 tokens, the socket closed once 20
    tokens ran; the request is counted cancelled and client-gone in
    /metrics, the slot is free, and fewer than 500 tokens ran after the
    close (before the fix it went on to its end of turn: 7,742 tokens);
  - a flood of silent connections: --max-connections 8, 12 sockets that
    send nothing; the oldest are closed by the server (at most 6 of 8 may
    wait for a header) and a new client still gets 200 (before: locked out);
  - --max-connections-per-ip 3: a fourth connection from the same address
    is closed without an answer; once one of the three goes, 200;
  - --header-timeout 1: a client dribbling its header a byte every 0.1 s
    is cut long before its 400 bytes are sent; a silent connection and a
    kept-alive one after its answer are closed too; /metrics counts them;
  - bad request framing: a request line that is not METHOD TARGET
    HTTP/D.D (no spaces, a bare method, a bad version, control bytes, over
    8 KiB) gets 400 with an error object (code invalid_request_line;
    before: closed unanswered, or libmicrohttpd's HTML 400) and is counted;
    HTTP/1.1 without Host gets 400 (code missing_host; HTTP/1.0 without
    Host is fine); a header left unfinished past --header-timeout gets 408
    with an error object;
  - the cached share: a cold turn then one sharing its system prompt: the
    second is warm_prefix with miss_reason new_tokens (the first stays
    no_prefix), and /metrics' snapbank:prompt_cached_fraction histogram
    has the cold one in le="0" and the sum of both shares;
  - the help of serve, run and chat names the shared tier's cache_mode
    remote, as every response does, never "shared";
  - CORS: --cors-origin https://ok.example: a preflight from it gets 204
    with Allow-Origin (that origin), -Methods and -Headers (Authorization,
    Content-Type); its POST's answer carries Allow-Origin; a preflight from
    another origin gets 403 and no CORS headers, its answers none either;
    without the option OPTIONS stays 405 with no CORS headers.
"""
import http.client
import json
import os
import socket
import subprocess
import time
import unittest

from harness import LIMIT, ServerTest, make_model, tiny, wait_for


def all_accepted(port):
    """Whether the kernel holds no connection to the listening port that the
    server has not accepted: none half-open (SYN_RECV) and none in the
    listening socket's queue (its rx_queue in /proc/net/tcp)."""
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(name) as f:
            next(f)
            for line in f:
                p = line.split()
                if int(p[1].rsplit(":", 1)[1], 16) != port:
                    continue
                if p[3] == "03" or (p[3] == "0A" and int(p[4].split(":")[1], 16)):
                    return False
    return True


class Hardening(ServerTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.slow = make_model(os.path.join(cls.dir, "slow.gguf"), "--dim", "256", "--layers",
                              "4", "--heads", "4", "--kv-heads", "2", "--ff", "768", "--ctx",
                              "32768")
        cls.tiny = tiny(cls.dir)

    def test_disconnect_not_streamed(self):
        s = self.start(self.slow, "--threads", "1", name="dc")
        body = {"model": "slow", "messages": [{"role": "user", "content": "Talk for long."}],
                "max_tokens": 30000, "temperature": 0}
        c = socket.create_connection(("127.0.0.1", s.port))
        data = json.dumps(body).encode()
        c.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                  % (len(data), data))
        gaps = "snapbank:time_per_output_token_seconds_count"
        wait_for(lambda: s.metrics()[gaps] >= 20, "tokens to flow")
        ran = s.metrics()[gaps] + 1  # tokens that had run just before the close
        c.close()
        # the log, not the server, is watched until the turn ends: another
        # request would let libmicrohttpd notice the closed socket by chance
        line = wait_for(lambda: [l for l in s.text().splitlines() if " finish=" in l],
                        "the turn to end")[0]
        self.assertIn("finish=cancelled", line)
        m = s.metrics()
        cancelled = 'snapbank:requests_finished_total{finished_reason="cancelled"}'
        self.assertEqual(m[cancelled], 1)
        self.assertEqual(m["snapbank:requests_client_gone_total"], 1)
        self.assertEqual(m["snapbank:num_requests_running"], 0)
        self.assertLess(m["snapbank:generation_tokens_total"], ran + 500)
        self.assertEqual(s.stop(), 0)

    # ---- hostile connections ----------------------------------------------------

    def silent(self, s, n):
        """n connections that send nothing, each accepted by the server
        before the next is made: connect() returns once the client has sent
        its ACK, which the kernel may queue on another core behind the next
        connection's, so without the wait the server can accept them out of
        order (a CI run under TSan saw the probe of test_per_ip_limit
        accepted before the third silent one)."""
        out = []
        for _ in range(n):
            c = socket.create_connection(("127.0.0.1", s.port))
            self.addCleanup(c.close)
            out.append(c)
            wait_for(lambda: all_accepted(s.port), "the server to accept a connection")
        return out

    @staticmethod
    def closed_by_server(c):
        """Whether the server has closed c (reads the end, or a reset)."""
        c.setblocking(False)
        try:
            return c.recv(1) == b""
        except BlockingIOError:
            return False
        except OSError:
            return True

    def test_silent_flood(self):
        s = self.start(self.tiny, "--max-connections", "8", "--max-connections-per-ip", "0",
                       "--header-timeout", "300", name="flood")
        socks = self.silent(s, 12)
        wait_for(lambda: sum(map(self.closed_by_server, socks)) >= 6,
                 "the oldest silent connections to be closed")
        st, _, r = s.get("/health")  # a new client, with 6 silent ones still open
        self.assertEqual(st, 200, r)
        self.assertFalse(any(self.closed_by_server(c) for c in socks[-5:]))
        m = s.metrics()
        self.assertGreaterEqual(m['snapbank:connections_closed_total{reason="room"}'], 6)
        self.assertEqual(m['snapbank:connections_closed_total{reason="header_timeout"}'], 0)

    def test_per_ip_limit(self):
        s = self.start(self.tiny, "--max-connections-per-ip", "3", "--header-timeout", "300",
                       name="perip")
        socks = self.silent(s, 3)
        while True:
            try:
                s.get("/health")
            except (OSError, http.client.HTTPException):
                break  # closed without an answer
            # Answered: the server counted fewer than 3 when it took this
            # one, which is right only where a silent one was refused while
            # an earlier connection (the harness's own /health, closed but
            # not yet seen closed) was still counted. That one is closed by
            # now (the server takes connections in order); open another.
            gone = [c for c in socks if self.closed_by_server(c)]
            self.assertTrue(gone, "a fourth connection was answered with three open")
            socks = [c for c in socks if c not in gone] + self.silent(s, len(gone))
        socks[0].close()
        wait_for(lambda: self.try_health(s), "a place once one connection went")
        # (the health check's own connection counts until the server sees it close)
        m = wait_for(lambda: self.try_metrics(s), "a place for /metrics")
        self.assertGreaterEqual(m['snapbank:connections_closed_total{reason="per_ip"}'], 1)

    @staticmethod
    def try_health(s):
        try:
            return s.get("/health")[0] == 200
        except (OSError, http.client.HTTPException):
            return False

    @staticmethod
    def try_metrics(s):
        try:
            return s.metrics()
        except (OSError, http.client.HTTPException):
            return None

    def test_header_timeout(self):
        s = self.start(self.tiny, "--header-timeout", "1", name="hto")
        # dribbling: 400 header bytes at one every 0.1 s would take 40 s
        c = socket.create_connection(("127.0.0.1", s.port))
        self.addCleanup(c.close)
        head = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 360 + b"\r\n\r\n"
        sent, cut = 0, False
        for i in range(len(head)):
            try:
                c.sendall(head[i:i + 1])
            except OSError:
                cut = True
                break
            sent += 1
            if self.closed_by_server(c):
                cut = True
                break
            c.setblocking(True)
            time.sleep(0.1)
        self.assertTrue(cut, "the dribbling client was never cut")
        self.assertLess(sent, len(head))
        # silent, and kept alive after an answer: both closed
        quiet = self.silent(s, 1)[0]
        kept = http.client.HTTPConnection("127.0.0.1", s.port, timeout=LIMIT)
        kept.request("GET", "/health")
        self.assertEqual(kept.getresponse().read()[:1], b"{")
        wait_for(lambda: self.closed_by_server(quiet) and self.closed_by_server(kept.sock),
                 "the idle connections to be closed")
        kept.close()
        m = s.metrics()
        self.assertGreaterEqual(m['snapbank:connections_closed_total{reason="header_timeout"}'], 3)

    @staticmethod
    def raw(s, data):
        """Send data on a new connection; everything the server answers
        until it closes."""
        c = socket.create_connection(("127.0.0.1", s.port), timeout=LIMIT)
        c.sendall(data)
        out = b""
        try:
            while True:
                b = c.recv(65536)
                if not b:
                    break
                out += b
        except OSError:
            pass
        c.close()
        return out

    def error_of(self, answer):
        head, _, body = answer.partition(b"\r\n\r\n")
        return head.split(b"\r\n")[0], json.loads(body)["error"]

    def test_framing(self):
        s = self.start(self.tiny, "--header-timeout", "1", name="framing")
        line, e = self.error_of(self.raw(s, b"GET /health HTTP/1.1\r\n\r\n"))
        self.assertEqual(line, b"HTTP/1.1 400 Bad Request")
        self.assertEqual(e["code"], "missing_host")
        self.assertIn(b" 200 ", self.raw(s, b"GET /health HTTP/1.0\r\n\r\n").split(b"\r\n")[0])
        line, e = self.error_of(self.raw(s, b"GET /health HTTP/1.1\r\nHo"))
        self.assertEqual(line, b"HTTP/1.1 408 Request Timeout")
        self.assertEqual(e["code"], "request_timeout")
        bad = [b"GARBAGE\r\n\r\n", b"GET\r\n\r\n", b"GET / FOO/1.1\r\n\r\n",
               b"\x00\x01\x02 hello\r\n\r\n", b"x" * 9000]
        for req in bad:
            line, e = self.error_of(self.raw(s, req))
            self.assertEqual((line, e["code"]), (b"HTTP/1.1 400 Bad Request",
                                                 "invalid_request_line"), req[:20])
        m = s.metrics()
        self.assertEqual(m['snapbank:connections_closed_total{reason="bad_request_line"}'],
                         len(bad))

    def test_cached_share(self):
        s = self.start(self.tiny, name="share")
        sys_msg = {"role": "system", "content": "The bank keeps what was read. " * 8}
        us = []
        for q in ("First question.", "A second, different question."):
            st, _, r = s.post("/v1/chat/completions", {
                "model": "tiny", "messages": [sys_msg, {"role": "user", "content": q}],
                "max_tokens": 2, "temperature": 0})
            self.assertEqual(st, 200, r)
            us.append(r["usage"])
        self.assertEqual((us[0]["cache_mode"], us[0]["miss_reason"]), ("cold", "no_prefix"))
        self.assertEqual((us[1]["cache_mode"], us[1]["miss_reason"]),
                         ("warm_prefix", "new_tokens"))
        share = [u["prompt_tokens_details"]["cached_tokens"] / u["prompt_tokens"] for u in us]
        self.assertGreater(share[1], 0)
        m = s.metrics()
        h = "snapbank:prompt_cached_fraction"
        self.assertEqual(m[h + '_bucket{le="0"}'], 1)
        self.assertEqual(m[h + '_bucket{le="1"}'], 2)
        self.assertEqual(m[h + "_count"], 2)
        self.assertAlmostEqual(m[h + "_sum"], sum(share), places=9)
        above = [float(k.split('"')[1]) for k in m if k.startswith(h + "_bucket") and
                 "+Inf" not in k and m[k] == 2]
        self.assertLessEqual(share[1], min(above))  # the second share is in its bucket

    def test_help_says_remote(self):
        for cmd in ("serve", "run", "chat"):
            p = subprocess.run([os.environ.get("SNAPBANK_BIN", "snapbank"), cmd, "--help"],
                               capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            text = " ".join(p.stdout.split())
            self.assertIn("remote", text, cmd)
            for wrong in ("cache_mode shared", "ssd, shared", "or shared ("):
                self.assertNotIn(wrong, text, cmd)

    # ---- CORS -------------------------------------------------------------------

    def preflight(self, s, origin, path="/v1/chat/completions"):
        return s.request("OPTIONS", path, headers={
            "Origin": origin, "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type"})

    def test_cors(self):
        ok = "https://ok.example"
        s = self.start(self.tiny, "--cors-origin", ok, "--cors-origin", "http://b.example",
                       name="cors")
        st, h, _ = self.preflight(s, ok)
        self.assertEqual(st, 204)
        self.assertEqual(h.get("access-control-allow-origin"), ok)
        self.assertIn("POST", h.get("access-control-allow-methods", ""))
        allow = h.get("access-control-allow-headers", "").lower()
        self.assertIn("authorization", allow)
        self.assertIn("content-type", allow)
        body = {"model": "tiny", "messages": [{"role": "user", "content": "Hi."}],
                "max_tokens": 2}
        st, h, r = s.post("/v1/chat/completions", body, headers={"Origin": ok})
        self.assertEqual(st, 200, r)
        self.assertEqual(h.get("access-control-allow-origin"), ok)
        st, h, r = self.preflight(s, "https://evil.example")
        self.assertEqual(st, 403, r)
        self.assertEqual(r["error"]["code"], "origin_not_allowed")
        self.assertFalse([k for k in h if k.startswith("access-control-")], h)
        st, h, r = s.post("/v1/chat/completions", body, headers={"Origin": "https://evil.example"})
        self.assertFalse([k for k in h if k.startswith("access-control-")], h)
        # without the option: as before
        t = self.start(self.tiny, name="nocors")
        st, h, r = self.preflight(t, ok)
        self.assertEqual(st, 405, r)
        self.assertFalse([k for k in h if k.startswith("access-control-")], h)
        for bad in ("", "ok.example"):
            p = subprocess.run([os.environ.get("SNAPBANK_BIN", "snapbank"), "serve", self.tiny,
                                "--cors-origin", bad], capture_output=True, text=True)
            self.assertEqual(p.returncode, 2)
            self.assertIn("--cors-origin", p.stderr)


if __name__ == "__main__":
    unittest.main()
