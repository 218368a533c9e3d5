"""test_tools.py -- an agent client's tools through snapbank serve: tool
definitions rendered by the model's chat template, the tool call the model
writes returned as OpenAI `tool_calls` (not streamed and streamed), the
call and the tool's answer sent back as messages (`tool_calls`,
`tool_call_id`) and the next turn restoring the conversation so far from
the bank.

The model is `snapbank make-model --answer TEXT`: whatever the prompt, its
greedy answer is TEXT (here a Hermes `<tool_call>` block), on both engines,
so a test knows what a call must parse to. The server renders with Qwen
2.5's template (--chat-template-file tests/data/templates/...), which
teaches the Hermes format. Runs on the engine $SB_ENGINE names.
"""
import json
import os
import unittest

from harness import ServerTest, make_model, streamed_text

HERE = os.path.dirname(os.path.abspath(__file__))
QWEN = os.path.join(HERE, "..", "data", "templates", "chatml-qwen2.5-7b-instruct.jinja")
CALL = ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}\n'
        '</tool_call>')
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                    "days": {"type": "integer"}},
                   "required": ["city"]}}}]
ARGS = {"city": "Paris", "days": 2}


def body(messages, **kw):
    b = {"model": "caller", "messages": messages, "tools": TOOLS, "temperature": 0,
         "max_tokens": 8}
    b.update(kw)
    return b


class Tools(ServerTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.model = make_model(os.path.join(cls.dir, "caller.gguf"), "--answer", CALL)

    def setUp(self):
        self.s = self.start(self.model, "--chat-template-file", QWEN)

    def check_call(self, calls):
        self.assertEqual(len(calls), 1, calls)
        c = calls[0]
        self.assertEqual(c["type"], "function")
        self.assertTrue(c["id"].startswith("call_"), c)
        self.assertEqual(c["function"]["name"], "get_weather")
        self.assertEqual(json.loads(c["function"]["arguments"]), ARGS)

    def test_call_and_answer(self):
        msgs = [{"role": "system", "content": "You are a weather assistant."},
                {"role": "user", "content": "What is the weather in Paris?"}]
        st, _, r = self.s.post("/v1/chat/completions", body(msgs))
        self.assertEqual(st, 200, r)
        ch = r["choices"][0]
        self.assertEqual(ch["finish_reason"], "tool_calls")
        self.assertIsNone(ch["message"]["content"])
        self.check_call(ch["message"]["tool_calls"])
        first = r["usage"]["prompt_tokens"]
        # the call and the tool's answer go back; the prompt so far comes
        # from the bank
        msgs += [{"role": "assistant", "content": None, "tool_calls": ch["message"]["tool_calls"]},
                 {"role": "tool", "tool_call_id": ch["message"]["tool_calls"][0]["id"],
                  "content": json.dumps({"temperature": 21, "sky": "clear"})}]
        st, _, r2 = self.s.post("/v1/chat/completions", body(msgs))
        self.assertEqual(st, 200, r2)
        self.assertGreater(r2["usage"]["prompt_tokens"], first)
        self.assertGreaterEqual(r2["usage"]["prompt_tokens_details"]["cached_tokens"],
                                first - 1)
        self.assertEqual(r2["usage"]["cache_mode"], "warm_prefix")
        self.check_call(r2["choices"][0]["message"]["tool_calls"])

    def test_streamed(self):
        msgs = [{"role": "user", "content": "Weather in Paris, please."}]
        st, ev = self.s.stream("/v1/chat/completions", body(msgs, stream=True))
        self.assertEqual(st, 200)
        self.assertEqual(ev[-1], "[DONE]")
        chunks = ev[:-1]
        # the call's text is never streamed as content
        self.assertNotIn("tool_call", streamed_text(ev))
        deltas = [c["choices"][0]["delta"] for c in chunks]
        calls = [t for d in deltas for t in d.get("tool_calls", [])]
        self.assertEqual([t["index"] for t in calls], [0])
        self.check_call(calls)
        self.assertEqual(chunks[-1]["choices"][0]["finish_reason"], "tool_calls")

    def test_without_tools(self):
        # no tools, or tool_choice none: the answer is the model's text
        msgs = [{"role": "user", "content": "Weather in Paris?"}]
        for b in (body(msgs, tools=None), body(msgs, tool_choice="none")):
            st, _, r = self.s.post("/v1/chat/completions", b)
            self.assertEqual(st, 200, r)
            ch = r["choices"][0]
            self.assertEqual((ch["finish_reason"], ch["message"]["content"]), ("stop", CALL))
            self.assertNotIn("tool_calls", ch["message"])
        st, ev = self.s.stream("/v1/chat/completions", body(msgs, tools=None, stream=True))
        self.assertEqual(streamed_text(ev), CALL)

    def test_logprobs_with_call(self):
        msgs = [{"role": "user", "content": "Weather in Paris?"}]
        st, _, r = self.s.post("/v1/chat/completions", body(msgs, logprobs=True, top_logprobs=1))
        self.assertEqual(st, 200, r)
        lp = r["choices"][0]["logprobs"]["content"]
        # the call is one token here, and the model is sure of it
        self.assertEqual(bytes(lp[0]["bytes"]).decode(), CALL)
        self.assertGreater(lp[0]["logprob"], -0.01)


class Formats(ServerTest):
    """The other template families: Llama 3.1's JSON call (a model that
    answers one), and Mistral Nemo's template taking tools, a call and its
    result back (its ids: nine letters and digits)."""

    def test_llama3(self):
        model = make_model(os.path.join(self.dir, "l3.gguf"), "--answer",
                           '{"name": "get_weather", "parameters": {"city": "Paris", "days": 2}}')
        s = self.start(model, "--chat-template-file",
                       os.path.join(HERE, "..", "data", "templates",
                                    "llama3-llama-3.1-8b-instruct.jinja"))
        msgs = [{"role": "user", "content": "What is the weather in Paris?"}]
        b = dict(body(msgs), model="l3")
        st, _, r = s.post("/v1/chat/completions", b)
        self.assertEqual(st, 200, r)
        ch = r["choices"][0]
        self.assertEqual(ch["finish_reason"], "tool_calls")
        calls = ch["message"]["tool_calls"]
        self.assertEqual(calls[0]["function"]["name"], "get_weather")
        self.assertEqual(json.loads(calls[0]["function"]["arguments"]), ARGS)
        msgs += [{"role": "assistant", "content": None, "tool_calls": calls},
                 {"role": "tool", "tool_call_id": calls[0]["id"], "content": "clear"}]
        st, _, r = s.post("/v1/chat/completions", dict(b, messages=msgs))
        self.assertEqual(st, 200, r)
        self.assertGreater(r["usage"]["prompt_tokens_details"]["cached_tokens"], 0)

    def test_mistral(self):
        model = make_model(os.path.join(self.dir, "plain.gguf"))
        s = self.start(model, "--chat-template-file",
                       os.path.join(HERE, "..", "data", "templates",
                                    "mistral-nemo-instruct-2407.jinja"))
        msgs = [{"role": "user", "content": "What is the weather in Paris?"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "a1B2c3D4e", "type": "function",
                     "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
                {"role": "tool", "tool_call_id": "a1B2c3D4e", "content": "clear"}]
        st, _, r = s.post("/v1/chat/completions", dict(body(msgs), model="plain"))
        self.assertEqual(st, 200, r)
        with_tools = r["usage"]["prompt_tokens"]
        st, _, r = s.post("/v1/chat/completions", dict(body(msgs, tools=None), model="plain"))
        self.assertEqual(st, 200, r)
        self.assertGreater(with_tools, r["usage"]["prompt_tokens"])  # the tools were shown
        # an id the template refuses: its words in a 400
        msgs[1]["tool_calls"][0]["id"] = msgs[2]["tool_call_id"] = "call_x"
        st, _, e = s.post("/v1/chat/completions", dict(body(msgs), model="plain"))
        self.assertEqual(st, 400, e)
        self.assertIn("length 9", e["error"]["message"])


if __name__ == "__main__":
    unittest.main()
