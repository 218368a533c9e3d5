"""test_tenants.py -- API keys, tenants that share nothing, the admin
endpoints, and the rules for where the server may listen.

Description: the tiny model, a key file mapping two keys to alice and one
to bob, an admin key file.
  - no key, or a wrong one: 401 with an OpenAI error object (/health and
    /metrics need none);
  - alice's prompt, asked by bob word for word, is cold for him: tenants are
    separate namespaces; each tenant's own repeat is warm_prefix, and both
    of alice's keys reach her bank;
  - sessions are per tenant: bob does not see alice's session;
  - admin: /v1/bank/* refused with a tenant key or none (401), answered with
    the admin key: stats list both tenants, flush, clear (alice is cold
    again after it); without --admin-key-file they are off (403);
  - /metrics: open by default even with keys; --metrics-auth admin: 401
    without a key or with a tenant's, 200 with the admin key; --metrics-auth
    key: any tenant's key or the admin key; either mode without the keys it
    needs is refused at start (exit 2, naming the option);
  - bad key files (a malformed line, a key twice, a missing file) stop the
    server at start with exit 2 and the file named; so do options out of
    range or that contradict each other, named;
  - without keys a non-loopback --host is refused (exit 2, naming
    --api-key-file) unless --allow-unauthenticated; with keys it is served.
"""
import os
import subprocess
import unittest

from harness import BIN, ServerTest, chat, tiny

M = "tiny"
A1, A2, B = "key-alice-0001", "key-alice-0002", "key-bob-000001"
ADMIN = "admin-key-000001"
SYS = "Shared words: the bank keeps what a model has read, page by page."


def auth(k):
    return {"Authorization": "Bearer " + k}


class Tenants(ServerTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.model = tiny(cls.dir)
        cls.keys = os.path.join(cls.dir, "keys")
        with open(cls.keys, "w") as f:
            f.write("# tenants of the test\n%s alice\n\n%s\tbob\n%s alice\n" % (A1, B, A2))
        os.chmod(cls.keys, 0o600)
        cls.admin = os.path.join(cls.dir, "admin")
        with open(cls.admin, "w") as f:
            f.write(ADMIN + "\n")
        os.chmod(cls.admin, 0o600)

    def test_metrics_auth(self):
        s = self.start(self.model, "--api-key-file", self.keys, "--admin-key-file", self.admin,
                       name="mx-open")
        self.assertEqual(s.get("/metrics")[0], 200)  # as before: open by default
        a = self.start(self.model, "--api-key-file", self.keys, "--admin-key-file", self.admin,
                       "--metrics-auth", "admin", name="mx-admin")
        st, _, r = a.get("/metrics")
        self.assertEqual(st, 401, r)
        self.assertIn("admin key", r["error"]["message"])
        self.assertEqual(a.get("/metrics", headers=auth(A1))[0], 401)
        st, _, text = a.get("/metrics", headers=auth(ADMIN))
        self.assertEqual(st, 200)
        self.assertIn("snapbank:requests_total", text)
        k = self.start(self.model, "--api-key-file", self.keys, "--metrics-auth", "key",
                       name="mx-key")
        self.assertEqual(k.get("/metrics")[0], 401)
        self.assertEqual(k.get("/metrics", headers=auth("nope"))[0], 401)
        self.assertEqual(k.get("/metrics", headers=auth(B))[0], 200)
        for mode, need in (("admin", "--admin-key-file"), ("key", "--api-key-file")):
            p = subprocess.run([BIN, "serve", self.model, "--metrics-auth", mode],
                               capture_output=True, text=True)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(need, p.stderr)

    def ask(self, s, key, sid=None):
        body = {"model": M, "messages": [{"role": "system", "content": SYS},
                                         {"role": "user", "content": "What do you keep?"}],
                "max_tokens": 4, "temperature": 0}
        if sid:
            body["session_id"] = sid
        st, _, r = s.post("/v1/chat/completions", body, headers=auth(key))
        self.assertEqual(st, 200, r)
        return r["usage"]

    def test_keys_and_isolation(self):
        s = self.start(self.model, "--api-key-file", self.keys, "--admin-key-file", self.admin,
                       "--min-prefix", "1")
        body = chat(M, "hello")
        st, _, e = s.post("/v1/chat/completions", body)
        self.assertEqual((st, e["error"]["type"]), (401, "invalid_request_error"))
        self.assertEqual(set(e["error"]), {"message", "type", "param", "code"})
        st, _, e = s.post("/v1/chat/completions", body, headers=auth("key-nobody-001"))
        self.assertEqual((st, e["error"]["code"]), (401, "invalid_api_key"))
        st, _, e = s.post("/v1/chat/completions", body, headers={"Authorization": A1})
        self.assertEqual(st, 401)  # not "Bearer KEY"
        self.assertEqual(s.get("/v1/models")[0], 401)
        self.assertEqual(s.get("/v1/models", headers=auth(B))[0], 200)
        self.assertEqual(s.get("/health")[0], 200)
        self.assertEqual(s.get("/metrics")[0], 200)
        # the same words, two tenants: nothing shared
        self.assertEqual(self.ask(s, A1, "s1")["cache_mode"], "cold")
        ub = self.ask(s, B)
        self.assertEqual(ub["cache_mode"], "cold")
        self.assertEqual(ub["prompt_tokens_details"]["cached_tokens"], 0)
        self.assertEqual(self.ask(s, A2)["cache_mode"], "warm_prefix")  # alice's other key
        self.assertEqual(self.ask(s, B)["cache_mode"], "warm_prefix")
        # sessions are the tenant's own
        self.assertEqual(s.get("/v1/sessions/s1", headers=auth(A1))[0], 200)
        self.assertEqual(s.get("/v1/sessions/s1", headers=auth(B))[0], 404)
        self.assertEqual(s.request("DELETE", "/v1/sessions/s1", headers=auth(B))[0], 404)
        self.assertEqual(s.get("/v1/sessions/s1", headers=auth(A2))[0], 200)
        # admin endpoints: the admin key only
        for k in (None, A1):
            st, _, e = s.get("/v1/bank/stats", headers=auth(k) if k else None)
            self.assertEqual(st, 401, e)
        st, _, stats = s.get("/v1/bank/stats", headers=auth(ADMIN))
        self.assertEqual(st, 200, stats)
        self.assertEqual(sorted(t["tenant"] for t in stats["tenants"]), ["alice", "bob"])
        self.assertTrue(all(t["indexed_pages"] > 0 for t in stats["tenants"]))
        self.assertGreater(stats["indexed_pages"], 0)
        st, _, f = s.post("/v1/bank/flush", {}, headers=auth(ADMIN))
        self.assertEqual((st, f["flushed"]), (200, True), f)
        st, _, c = s.post("/v1/bank/clear", {}, headers=auth(ADMIN))
        self.assertEqual((st, c["cleared"]), (200, True), c)
        self.assertGreater(c["pages_dropped"], 0)
        st, _, stats = s.get("/v1/bank/stats", headers=auth(ADMIN))
        self.assertEqual(stats["indexed_pages"], 0)
        self.assertEqual(self.ask(s, A1)["cache_mode"], "cold")
        self.assertEqual(s.stop(), 0)

    def test_admin_off(self):
        s = self.start(self.model)
        st, _, e = s.get("/v1/bank/stats")
        self.assertEqual((st, e["error"]["code"]), (403, "admin_disabled"))
        self.assertEqual(s.post("/v1/bank/clear", {})[0], 403)

    def run_bad(self, *args):
        p = subprocess.run([BIN, "serve", self.model, "--port", "0", *args],
                           capture_output=True, timeout=120)
        return p.returncode, p.stderr.decode()

    def test_bad_key_files(self):
        bad = os.path.join(self.dir, "bad-keys")
        with open(bad, "w") as f:
            f.write("%s alice\nthis line is wrong\n" % A1)
        rc, err = self.run_bad("--api-key-file", bad)
        self.assertEqual(rc, 2, err)
        self.assertIn(bad + ":2", err)
        with open(bad, "w") as f:
            f.write("%s alice\n%s bob\n" % (A1, A1))
        rc, err = self.run_bad("--api-key-file", bad)
        self.assertEqual(rc, 2, err)
        self.assertIn("twice", err)
        rc, err = self.run_bad("--api-key-file", os.path.join(self.dir, "none"))
        self.assertEqual(rc, 2, err)
        self.assertIn("none", err)
        rc, err = self.run_bad("--admin-key-file", os.path.join(self.dir, "none"))
        self.assertEqual(rc, 2, err)

    def test_refused_options(self):
        for args, says in ((("--ctx", "4096"), "--ctx 4096"),
                           (("--disk-restore", "always", "--ssd-session-cache", "write-only"),
                            "--disk-restore always"),
                           (("--ssd-session-cache", "sometimes"), "--ssd-session-cache"),
                           (("--parallel", "0"), "--parallel"),
                           (("--port", "70000"), "--port"),
                           (("--frobnicate",), "--frobnicate")):
            rc, err = self.run_bad(*args)
            self.assertEqual(rc, 2, (args, err))
            self.assertIn(says, err)

    def test_llama_server_options(self):
        # llama-server's options snapbank serve lacks: refused by name
        for args, says in ((("-fa", "on"), "-fa is a llama-server option"),
                           (("--lora", "x.gguf"), "--lora is a llama-server option"),
                           (("-ctk", "q8_0"), "-ctk is a llama-server option"),
                           (("--api-key", "short"), "--api-key"),
                           (("--api-key", "K" * 12, "--api-key-file", "keys"),
                            "--api-key and --api-key-file"),
                           (("-ngl", "99", "--engine", "builtin"), "needs --engine llama.cpp"),
                           (("--engine", "tensorrt"), "--engine")):
            rc, err = self.run_bad(*args)
            self.assertEqual(rc, 2, (args, err))
            self.assertIn(says, err)
        # --api-key: the keys of the one default tenant; -a names the model
        k1, k2 = "first-key-1234", "second-key-5678"
        s = self.start(self.model, "--api-key", k1 + "," + k2, "-a", "my-model", "-np", "2")
        body = chat("my-model", "Hello")
        self.assertEqual(s.post("/v1/chat/completions", body)[0], 401)
        for k in (k1, k2):
            st, _, r = s.post("/v1/chat/completions", body, {"Authorization": "Bearer " + k})
            self.assertEqual(st, 200, r)
        st, _, h = s.get("/health")
        self.assertEqual((h["model"], h["slots"]), ("my-model", 2))
        self.assertEqual(s.stop(), 0)

    def test_where_to_listen(self):
        rc, err = self.run_bad("--host", "0.0.0.0")
        self.assertEqual(rc, 2, err)
        self.assertIn("--api-key-file", err)
        self.assertIn("--allow-unauthenticated", err)
        for args in (("--allow-unauthenticated",), ("--api-key-file", self.keys)):
            s = self.start(self.model, "--host", "0.0.0.0", *args)
            self.assertEqual(s.get("/health")[0], 200)
            self.assertEqual(s.stop(), 0)


if __name__ == "__main__":
    unittest.main()
