"""test_sessions.py -- conversations over snapbank serve: a multi-turn chat
whose turns report cold then warm_prefix, sessions that continue from the
very tokens the bank holds, sessions seen and deleted, and a shared system
prompt that hits across conversations without any session.

Description: the tiny model, bank in RAM.
  - a chat sent back whole each turn (the OpenAI way) with session_id:
    turn 1 cold; turns 2 and 3 warm_prefix with exactly the tokens the
    session can reuse (GET /v1/sessions/ID's reusable_tokens: the prompt
    and the answer's tokens) cached, more than the previous prompt;
  - the same with X-Session-Id as a header; body and header that disagree
    are refused;
  - an edited history: the session still gives its prompt's tokens;
  - the same chat without a session re-tokenizes the answer and caches
    fewer tokens than with one;
  - completions with a session: a growing prompt continues the same way;
  - GET /v1/sessions/ID: turns, tokens, last turn, what of it the bank
    holds; DELETE; unknown ids 404;
  - a second conversation with the same system prompt and no session is
    warm_prefix on its first turn.
"""
import unittest

from harness import ServerTest, tiny

M = "tiny"
SYS = "You are the bank's clerk. Keep every page in order and answer briefly."


class Sessions(ServerTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.model = tiny(cls.dir)

    def setUp(self):
        self.s = self.start(self.model, "--min-prefix", "1")

    def turn(self, msgs, sid=None, header=False, n=8):
        body = {"model": M, "messages": msgs, "max_tokens": n, "temperature": 0}
        h = None
        if sid and header:
            h = {"X-Session-Id": sid}
        elif sid:
            body["session_id"] = sid
        st, _, r = self.s.post("/v1/chat/completions", body, headers=h)
        self.assertEqual(st, 200, r)
        return r["choices"][0]["message"]["content"], r["usage"]

    def session(self, sid):
        st, _, r = self.s.get("/v1/sessions/" + sid)
        self.assertEqual(st, 200, r)
        return r

    def conversation(self, sid, header=False):
        msgs = [{"role": "system", "content": SYS},
                {"role": "user", "content": "Which pages do you keep?"}]
        a1, u1 = self.turn(msgs, sid, header)
        self.assertEqual(u1["cache_mode"], "cold")
        self.assertEqual(u1["prompt_tokens_details"]["cached_tokens"], 0)
        reusable = self.session(sid)["reusable_tokens"]
        self.assertGreater(reusable, u1["prompt_tokens"])  # answer tokens too
        msgs += [{"role": "assistant", "content": a1},
                 {"role": "user", "content": "And for how long?"}]
        a2, u2 = self.turn(msgs, sid, header)
        self.assertEqual(u2["cache_mode"], "warm_prefix")
        self.assertEqual(u2["prompt_tokens_details"]["cached_tokens"], reusable)
        self.assertEqual(u2["cached_tokens_disk"], 0)
        reusable = self.session(sid)["reusable_tokens"]
        self.assertGreater(reusable, u2["prompt_tokens"])
        msgs += [{"role": "assistant", "content": a2},
                 {"role": "user", "content": "Thank you."}]
        _, u3 = self.turn(msgs, sid, header)
        self.assertEqual(u3["cache_mode"], "warm_prefix")
        self.assertEqual(u3["prompt_tokens_details"]["cached_tokens"], reusable)
        return msgs, u3

    def test_multi_turn(self):
        msgs, u3 = self.conversation("alice")
        info = self.session("alice")
        self.assertEqual(info["turns"], 3)
        self.assertEqual(info["object"], "session")
        self.assertEqual(info["last_turn"]["cache_mode"], "warm_prefix")
        self.assertEqual(info["last_turn"]["prompt_tokens"], u3["prompt_tokens"])
        self.assertEqual(info["bank"]["restorable_tokens"], info["tokens"])
        self.assertEqual(info["tokens"], u3["prompt_tokens"] + u3["completion_tokens"])

    def test_header(self):
        self.conversation("bob", header=True)
        st, _, e = self.s.post("/v1/chat/completions",
                               {"model": M, "messages": [{"role": "user", "content": "x"}],
                                "session_id": "bob"}, headers={"X-Session-Id": "someone"})
        self.assertEqual((st, e["error"]["param"]), (400, "session_id"))

    def test_no_session_reuses_less(self):
        # the answer's own tokens are what the bank holds; re-tokenized text
        # is not the same sequence, so without a session fewer tokens hit
        msgs = [{"role": "system", "content": SYS + " Count."},
                {"role": "user", "content": "Count the pages."}]
        a1, u1 = self.turn(msgs, n=24)
        more = msgs + [{"role": "assistant", "content": a1},
                       {"role": "user", "content": "Again."}]
        _, plain = self.turn(more)
        self.assertEqual(plain["cache_mode"], "warm_prefix")
        msgs2 = [{"role": "system", "content": SYS + " Count!"},
                 {"role": "user", "content": "Count the pages."}]
        a1, _ = self.turn(msgs2, "dave", n=24)
        more2 = msgs2 + [{"role": "assistant", "content": a1},
                         {"role": "user", "content": "Again."}]
        _, with_s = self.turn(more2, "dave")
        self.assertGreater(with_s["prompt_tokens_details"]["cached_tokens"],
                           plain["prompt_tokens_details"]["cached_tokens"])
        self.assertGreaterEqual(with_s["prompt_tokens_details"]["cached_tokens"],
                                u1["prompt_tokens"] + 1)

    def test_edited_history(self):
        msgs = [{"role": "user", "content": "Tell me about page nine."}]
        a1, u1 = self.turn(msgs, "erin")
        edited = msgs + [{"role": "assistant", "content": a1 + " (edited)"},
                         {"role": "user", "content": "More."}]
        _, u2 = self.turn(edited, "erin")
        self.assertEqual(u2["cache_mode"], "warm_prefix")
        self.assertGreaterEqual(u2["prompt_tokens_details"]["cached_tokens"],
                                u1["prompt_tokens"])

    def test_completions_session(self):
        p = "The bank keeps pages."
        st, _, r = self.s.post("/v1/completions", {"model": M, "prompt": p, "max_tokens": 6,
                                                   "temperature": 0, "session_id": "fred"})
        self.assertEqual(st, 200, r)
        reusable = self.session("fred")["reusable_tokens"]
        p2 = p + r["choices"][0]["text"] + " And then?"
        st, _, r2 = self.s.post("/v1/completions", {"model": M, "prompt": p2, "max_tokens": 6,
                                                    "temperature": 0, "session_id": "fred"})
        self.assertEqual(st, 200, r2)
        self.assertEqual(r2["usage"]["cache_mode"], "warm_prefix")
        self.assertEqual(r2["usage"]["prompt_tokens_details"]["cached_tokens"], reusable)

    def test_get_delete(self):
        self.turn([{"role": "user", "content": "Hello"}], "gone")
        self.assertEqual(self.session("gone")["turns"], 1)
        st, _, r = self.s.request("DELETE", "/v1/sessions/gone")
        self.assertEqual((st, r["deleted"], r["object"]), (200, True, "session.deleted"))
        for method in ("GET", "DELETE"):
            st, _, e = self.s.request(method, "/v1/sessions/gone")
            self.assertEqual((st, e["error"]["code"]), (404, "session_not_found"))
        st, _, e = self.s.get("/v1/sessions/.hidden")
        self.assertEqual(st, 400)
        st, _, e = self.s.request("POST", "/v1/sessions/x", raw=b"{}")
        self.assertEqual(st, 405)

    def test_shared_system_prompt(self):
        shared = SYS + " The system prompt every conversation shares."
        _, u1 = self.turn([{"role": "system", "content": shared},
                           {"role": "user", "content": "First conversation."}])
        _, u2 = self.turn([{"role": "system", "content": shared},
                           {"role": "user", "content": "A second, different one."}])
        self.assertEqual(u1["cache_mode"], "cold")
        self.assertEqual(u2["cache_mode"], "warm_prefix")
        self.assertGreater(u2["prompt_tokens_details"]["cached_tokens"], 20)
        self.assertEqual(u2["miss_reason"], "new_tokens")  # its start was there


if __name__ == "__main__":
    unittest.main()
