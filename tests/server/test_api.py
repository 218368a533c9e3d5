"""test_api.py -- every endpoint of snapbank serve, streamed and not, the
OpenAI shapes of its answers, and every bad input refused with a 4xx and an
OpenAI error object while nothing changes.

Description: one server on the tiny model (context cut to 256 tokens, a
64 KiB body limit). Checks:
  - /health, /v1/models, /v1/models/ID (404 for another);
  - chat and text completions: the response object, finish_reason, usage
    (OpenAI's fields and snapbank's: cache_mode, cached tokens from RAM and
    disk, restore_ms, ttft_ms, miss_reason); the same request streamed gives
    the same text in chunks (role first, finish_reason last, [DONE]; with
    include_usage a final usage chunk with no choices and usage null before);
    a second identical request reports warm_prefix with every prompt token
    cached; token-id prompts; stop strings (plain and streamed, the text cut
    before the stop string); seeds;
  - curl as a client: a stream read raw ends with data: [DONE];
  - bad input: malformed JSON, a non-object, duplicate keys, invalid UTF-8,
    deep nesting, wrong types, missing or empty messages, missing model, a
    bad role, n=2, unsupported fields, stream_options without stream, a bad
    session id, an unknown model (404), an unknown endpoint (404), a wrong
    method (405 with Allow), a body over the limit (413, curl), a prompt over
    the context and a prompt + max_tokens over it (400
    context_length_exceeded): each answered with {"error": {message, type,
    param, code}}, and the bank's counters and sessions unchanged after all
    of them;
  - /metrics parses as the Prometheus text format with the names listed in
    metrics.h, histograms cumulative;
  - on llama.cpp's engine: -c split among the slots, a slot's sequence
    kept for its tenant's next turn, and -kvu's shared cells filled by two
    answers and by a prompt beside an answer (the longest answer ends with
    finish length, the others complete).
"""
import json
import os
import re
import subprocess
import threading
import unittest

from harness import ENGINE, ServerTest, chat, make_model, streamed_text, tiny, wait_for

M = "tiny"


class Api(ServerTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.model = tiny(cls.dir)

    def setUp(self):
        self.s = self.start(self.model, "--ctx", "256", "--max-body-bytes", "65536",
                            "--min-prefix", "1")

    def error_shape(self, payload, status, got, code=None, param=None):
        self.assertEqual(got, status, payload)
        self.assertIn("error", payload)
        e = payload["error"]
        self.assertEqual(set(e), {"message", "type", "param", "code"})
        self.assertTrue(e["message"])
        self.assertTrue(e["type"])
        if code is not None:
            self.assertEqual(e["code"], code, e)
        if param is not None:
            self.assertEqual(e["param"], param, e)
        return e

    def test_health_and_models(self):
        st, _, h = self.s.get("/health")
        self.assertEqual((st, h["status"], h["model"]), (200, "ok", M))
        st, _, ms = self.s.get("/v1/models")
        self.assertEqual(st, 200)
        self.assertEqual(ms["object"], "list")
        self.assertEqual([m["id"] for m in ms["data"]], [M])
        self.assertEqual(ms["data"][0]["object"], "model")
        st, _, one = self.s.get("/v1/models/" + M)
        self.assertEqual((st, one["id"]), (200, M))
        st, _, e = self.s.get("/v1/models/gpt-4")
        self.error_shape(e, 404, st, "model_not_found")

    def check_usage(self, u, prompt_tokens=None):
        for k in ("prompt_tokens", "completion_tokens", "total_tokens", "cache_mode",
                  "cached_tokens_ram", "cached_tokens_disk", "restore_ms", "ttft_ms"):
            self.assertIn(k, u)
        self.assertEqual(u["total_tokens"], u["prompt_tokens"] + u["completion_tokens"])
        cached = u["prompt_tokens_details"]["cached_tokens"]
        self.assertEqual(cached, u["cached_tokens_ram"] + u["cached_tokens_disk"])
        self.assertIn(u["cache_mode"], ("cold", "warm_prefix", "ssd"))
        self.assertEqual(cached < u["prompt_tokens"], "miss_reason" in u)
        if prompt_tokens is not None:
            self.assertEqual(u["prompt_tokens"], prompt_tokens)

    def test_chat(self):
        body = chat(M, "Tell me what the bank keeps.", max_tokens=12)
        st, _, r = self.s.post("/v1/chat/completions", body)
        self.assertEqual(st, 200, r)
        self.assertEqual(r["object"], "chat.completion")
        self.assertTrue(r["id"].startswith("chatcmpl-"))
        self.assertEqual(r["model"], M)
        self.assertEqual(len(r["choices"]), 1)
        ch = r["choices"][0]
        self.assertEqual((ch["index"], ch["message"]["role"], ch["finish_reason"]),
                         (0, "assistant", "length"))
        u = r["usage"]
        self.check_usage(u)
        self.assertEqual(u["completion_tokens"], 12)
        self.assertEqual(u["cache_mode"], "cold")
        self.assertEqual(u["miss_reason"], "no_prefix")
        # the commits' outcome: pages indexed, nothing for a disk (there is none)
        bw = u["bank_write"]
        self.assertGreater(bw["pages_new"], 0, bw)
        self.assertEqual((bw["blocks_queued"], bw["blocks_written"], bw["durable"]),
                         (0, 0, False), bw)
        text = ch["message"]["content"]
        # the same request streamed: the same text, in the OpenAI chunk shapes
        st, ev = self.s.stream("/v1/chat/completions", dict(body, stream=True))
        self.assertEqual(st, 200)
        self.assertEqual(ev[-1], "[DONE]")
        chunks = ev[:-1]
        self.assertTrue(all(c["object"] == "chat.completion.chunk" for c in chunks))
        self.assertEqual(len({c["id"] for c in chunks}), 1)
        self.assertEqual(chunks[0]["choices"][0]["delta"]["role"], "assistant")
        self.assertEqual(chunks[-1]["choices"][0]["finish_reason"], "length")
        self.assertTrue(all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1]))
        self.assertFalse(any("usage" in c for c in chunks))
        self.assertEqual(streamed_text(ev), text)
        # include_usage: usage null in every chunk, then one with no choices
        st, ev = self.s.stream("/v1/chat/completions",
                               dict(body, stream=True, stream_options={"include_usage": True}))
        self.assertEqual(st, 200)
        self.assertEqual(ev[-1], "[DONE]")
        last = ev[-2]
        self.assertEqual(last["choices"], [])
        self.check_usage(last["usage"])
        self.assertTrue(all(c["usage"] is None for c in ev[:-2]))
        self.assertEqual(streamed_text(ev), text)
        # asked again: the whole prompt comes from the bank (RAM); llama.cpp's
        # engine keeps no logits in the bank and computes the last token again
        self.assertEqual(last["usage"]["cache_mode"], "warm_prefix")
        self.assertEqual(last["usage"]["prompt_tokens_details"]["cached_tokens"],
                         last["usage"]["prompt_tokens"] - (ENGINE != "builtin"))

    def test_completions(self):
        body = {"model": M, "prompt": "The bank keeps what a model has read",
                "max_tokens": 10, "temperature": 0}
        st, _, r = self.s.post("/v1/completions", body)
        self.assertEqual(st, 200, r)
        self.assertEqual(r["object"], "text_completion")
        self.assertTrue(r["id"].startswith("cmpl-"))
        ch = r["choices"][0]
        self.assertEqual((ch["index"], ch["finish_reason"], ch["logprobs"]), (0, "length", None))
        self.check_usage(r["usage"])
        st, ev = self.s.stream("/v1/completions",
                               dict(body, stream=True, stream_options={"include_usage": True}))
        self.assertEqual(st, 200)
        self.assertEqual(ev[-1], "[DONE]")
        self.assertTrue(all(e["object"] == "text_completion" for e in ev[:-1]))
        self.assertEqual(streamed_text(ev, "text"), ch["text"])
        self.assertEqual(ev[-2]["choices"], [])
        self.assertEqual(ev[-2]["usage"]["completion_tokens"], 10)
        # token ids work as a prompt; one prompt in a list too
        ids = {"model": M, "prompt": [1, 300, 301, 302], "max_tokens": 3, "temperature": 0}
        st, _, r = self.s.post("/v1/completions", ids)
        self.assertEqual((st, r["usage"]["prompt_tokens"]), (200, 4), r)
        st, _, r2 = self.s.post("/v1/completions", dict(ids, prompt=[[1, 300, 301, 302]]))
        self.assertEqual((st, r2["choices"][0]["text"]), (200, r["choices"][0]["text"]))

    def test_stop_strings(self):
        body = {"model": M, "prompt": "Once upon a time the bank", "max_tokens": 40,
                "temperature": 0}
        st, _, r = self.s.post("/v1/completions", body)
        full = r["choices"][0]["text"]
        self.assertGreater(len(full), 12, full)
        cut = len(full) // 2
        stop = full[cut:cut + 3]
        want = full[:full.index(stop)]
        for stream in (False, True):
            b = dict(body, stop=[stop, "\u2603never"], stream=stream)
            if stream:
                st, ev = self.s.stream("/v1/completions", b)
                text, fin = streamed_text(ev, "text"), ev[-2]["choices"][0]["finish_reason"]
            else:
                st, _, r = self.s.post("/v1/completions", b)
                text, fin = r["choices"][0]["text"], r["choices"][0]["finish_reason"]
            self.assertEqual((st, text, fin), (200, want, "stop"), (stop, full))

    @unittest.skipIf(ENGINE == "builtin", "llama.cpp's engine only: its KV cells")
    def test_llama_ctx_split(self):
        # llama-server's -c: the cells split among the slots (each its own
        # KV stream), so a sequence reaches -c / -np tokens
        s = self.start(tiny(self.dir), "--no-kv-unified", "-c", "1024", "-np", "2",
                       name="split")
        st, _, ms = s.get("/v1/models")
        self.assertEqual(ms["data"][0]["meta"]["n_ctx"], 512)
        st, _, e = s.post("/v1/chat/completions", chat(M, "the bank keeps " * 200))
        self.assertEqual((st, e["error"]["code"]), (400, "context_length_exceeded"), e)
        self.assertIn("512", e["error"]["message"])
        outs = [s.post("/v1/chat/completions", chat(M, "the bank keeps " * 60, max_tokens=8))
                for _ in range(2)]
        for st, _, r in outs:
            self.assertEqual(st, 200, r)
        self.assertEqual(outs[1][2]["usage"]["cache_mode"], "warm_prefix")
        self.assertEqual(s.stop(), 0)

    @unittest.skipIf(ENGINE == "builtin", "llama.cpp's engine only: its slots' own caches")
    def test_llama_slot_kept_per_tenant(self):
        # one slot: a turn keeps its sequence for its conversation's next
        # turn, never for another tenant's same prompt
        keys = os.path.join(self.dir, "slot-keys")
        with open(keys, "w") as f:
            f.write("key-alice-0001 alice\nkey-bob-00001 bob\n")
        os.chmod(keys, 0o600)
        s = self.start(tiny(self.dir), "--no-kv-unified", "-np", "1", "--api-key-file", keys,
                       name="slot")
        body = chat(M, "the bank keeps what a model has read " * 12, max_tokens=4)

        def ask(key, b=body):
            st, _, r = s.post("/v1/chat/completions", b, {"Authorization": "Bearer " + key})
            self.assertEqual(st, 200, r)
            return r["usage"]
        self.assertEqual(ask("key-alice-0001")["cache_mode"], "cold")
        self.assertEqual(ask("key-bob-00001")["cache_mode"], "cold")  # not alice's slot
        u = ask("key-alice-0001")
        self.assertEqual(u["cache_mode"], "warm_prefix")
        self.assertEqual(u["prompt_tokens_details"]["cached_tokens"], u["prompt_tokens"] - 1)
        # the conversation's next turn, in the same slot
        nxt = dict(body, messages=body["messages"] + [
            {"role": "assistant", "content": "Noted."}, {"role": "user", "content": "More."}])
        u2 = ask("key-alice-0001", nxt)
        self.assertEqual(u2["cache_mode"], "warm_prefix")
        self.assertGreater(u2["prompt_tokens_details"]["cached_tokens"], u["prompt_tokens"] // 2)
        self.assertEqual(s.stop(), 0)

    @unittest.skipIf(ENGINE == "builtin", "llama.cpp's engine only: its shared KV cells")
    def test_llama_kv_unified_full(self):
        # -kvu: two slots share 512 cells. Two answers of 400 tokens cannot
        # both fit: the one holding more cells ends as at its context's end
        # (finish length, fewer tokens) and the other goes on to its 400;
        # then a 300-token prompt sent while an answer holds 200+ cells:
        # its chunks wait for cells, the answer ends, and the prompt runs.
        # (Before: the pass failed for every slot in it, 500 "unknown error")
        s = self.start(tiny(self.dir), "-c", "512", "-np", "2", "--batch", "32", name="kvu")
        self.assertEqual(s.get("/v1/models")[2]["data"][0]["meta"]["n_ctx"], 512)
        out = [None, None]

        def ask(i, content, max_tokens):
            st, _, r = s.post("/v1/chat/completions", chat(M, content, max_tokens=max_tokens))
            out[i] = (st, r)
        def fin(i):
            st, r = out[i]
            self.assertEqual(st, 200, r)
            return r["choices"][0]["finish_reason"], r["usage"]["completion_tokens"]
        ts = [threading.Thread(target=ask, args=(i, "About the bank, number %d." % i, 400))
              for i in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        got = sorted(fin(i) for i in range(2))
        self.assertEqual(got[1], ("length", 400), got)
        self.assertEqual(got[0][0], "length", got)
        self.assertLess(got[0][1], 400, got)

        tokens = "snapbank:time_per_output_token_seconds_count"
        before = s.metrics()[tokens]
        a = threading.Thread(target=ask, args=(0, "Go on about the disk tier.", 400))
        a.start()
        wait_for(lambda: s.metrics()[tokens] >= before + 200, "200 tokens of the answer")
        ask(1, "the bank keeps " * 100, 8)
        a.join()
        self.assertEqual(fin(1)[0] in ("stop", "length"), True, out[1])
        f, n = fin(0)
        self.assertEqual(f, "length", out[0])
        self.assertLess(n, 400, out[0])
        self.assertEqual(s.stop(), 0)

    def test_tokenizers_agree(self):
        # on llama.cpp's engine every prompt is tokenized by llama.cpp too,
        # and a difference is logged and counted (0 on the builtin engine,
        # which has one tokenizer)
        texts = ["Hello world", "  two  spaces\tand tabs\n\nnewlines", "naïve café Straße",
                 "数字 123456 和 emoji 🙂🙃", "don't won't I'll it's", "<|im_end|> typed by a user",
                 "x" * 100, "  leading", "trailing  "]
        for t in texts:
            st, _, r = self.s.post("/v1/chat/completions", chat(M, t, max_tokens=1))
            self.assertEqual(st, 200, r)
            st, _, r = self.s.post("/v1/completions", {"model": M, "prompt": t, "max_tokens": 1})
            self.assertEqual(st, 200, r)
        self.assertEqual(self.s.metrics()["snapbank:tokenizer_mismatch_total"], 0)

    def test_logprobs(self):
        body = chat(M, "Log my probabilities", max_tokens=12, logprobs=True, top_logprobs=3)
        st, _, r = self.s.post("/v1/chat/completions", body)
        self.assertEqual(st, 200, r)
        ch = r["choices"][0]
        lp = ch["logprobs"]["content"]
        # one entry per generated token, their bytes spelling the answer
        self.assertEqual(len(lp), r["usage"]["completion_tokens"])
        self.assertEqual(b"".join(bytes(e["bytes"]) for e in lp).decode("utf-8", "replace"),
                         ch["message"]["content"])
        for e in lp:
            self.assertLessEqual(e["logprob"], 0)
            top = e["top_logprobs"]
            self.assertEqual(len(top), 3)
            self.assertEqual([t["logprob"] for t in top],
                             sorted((t["logprob"] for t in top), reverse=True))
            # greedy: the token taken is the most likely one
            self.assertEqual((top[0]["bytes"], top[0]["logprob"]), (e["bytes"], e["logprob"]))
        self.assertLess(sum(2.718281828 ** t["logprob"] for t in lp[0]["top_logprobs"]), 1.0001)
        # streamed: the same entries, spread over the chunks
        st, ev = self.s.stream("/v1/chat/completions", dict(body, stream=True))
        got = [e for c in ev[:-1] if c["choices"] and c["choices"][0].get("logprobs")
               for e in c["choices"][0]["logprobs"]["content"]]
        self.assertEqual([e["bytes"] for e in got], [e["bytes"] for e in lp])
        self.assertEqual([e["logprob"] for e in got], [e["logprob"] for e in lp])
        # without: null, as before
        st, _, r = self.s.post("/v1/chat/completions", chat(M, "Log my probabilities"))
        self.assertIsNone(r["choices"][0]["logprobs"])
        # completions: the legacy shape
        st, _, r = self.s.post("/v1/completions", {"model": M, "prompt": "The bank",
                                                   "max_tokens": 6, "temperature": 0,
                                                   "logprobs": 2})
        self.assertEqual(st, 200, r)
        c = r["choices"][0]
        self.assertEqual(len(c["logprobs"]["tokens"]), r["usage"]["completion_tokens"])
        self.assertEqual(len(c["logprobs"]["top_logprobs"][0]), 2)
        self.assertEqual(c["logprobs"]["text_offset"][0], 0)

    def test_seed(self):
        body = {"model": M, "prompt": "Seeds", "max_tokens": 16, "temperature": 1.0,
                "seed": 5}
        a = self.s.post("/v1/completions", body)[2]["choices"][0]["text"]
        b = self.s.post("/v1/completions", body)[2]["choices"][0]["text"]
        c = self.s.post("/v1/completions", dict(body, seed=6))[2]["choices"][0]["text"]
        self.assertEqual(a, b)
        self.assertNotEqual(a, c)

    def test_curl_stream(self):
        body = json.dumps(chat(M, "curl me", stream=True))
        out = subprocess.run(["curl", "-sN", "http://127.0.0.1:%d/v1/chat/completions" %
                              self.s.port, "-H", "Content-Type: application/json", "-d", body],
                             check=True, capture_output=True).stdout.decode()
        self.assertTrue(out.startswith("data: {"), out)
        self.assertTrue(out.endswith("data: [DONE]\n\n"), out[-200:])

    def test_bad_input(self):
        before = self.s.metrics()
        P = "/v1/chat/completions"
        ok = chat(M, "hi")

        def bad(body, status=400, code=None, param=None, path=P, raw=None, method="POST",
                headers=None):
            st, hd, payload = self.s.request(method, path, None if raw is not None else body,
                                             headers=headers, raw=raw)
            self.assertIsInstance(payload, dict, payload)
            self.error_shape(payload, status, st, code, param)
            return hd

        bad(None, raw=b"{not json")
        bad(None, raw=b"[1, 2]")
        bad(None, raw=b'{"model": "tiny", "model": "tiny", "messages": []}')
        bad(None, raw=b'{"model": "tiny", "messages": [{"role": "user", "content": "\xff\xfe"}]}')
        bad(None, raw=('{"a":' * 100 + "1" + "}" * 100).encode())
        bad({"messages": [{"role": "user", "content": "x"}]}, code="missing_required_parameter",
            param="model")
        bad({"model": 7, "messages": []}, code="invalid_type", param="model")
        bad({"model": M}, code="missing_required_parameter", param="messages")
        bad({"model": M, "messages": "hello"}, code="invalid_type", param="messages")
        bad({"model": M, "messages": []}, code="empty_array", param="messages")
        bad({"model": M, "messages": [{"role": "wizard", "content": "x"}]},
            code="invalid_value", param="messages[0].role")
        bad({"model": M, "messages": [{"role": "user"}]}, code="missing_required_parameter")
        bad({"model": M, "messages": [{"role": "user", "content": 5}]}, code="invalid_type")
        bad(dict(ok, temperature="hot"), code="invalid_type", param="temperature")
        bad(dict(ok, temperature=3), code="invalid_value", param="temperature")
        bad(dict(ok, max_tokens=0), code="invalid_value", param="max_tokens")
        bad(dict(ok, max_tokens=1.5), code="invalid_type", param="max_tokens")
        bad(dict(ok, stream="yes"), code="invalid_type", param="stream")
        bad(dict(ok, stop=5), code="invalid_type", param="stop")
        bad(dict(ok, stop=["a", "b", "c", "d", "e"]), code="invalid_value", param="stop")
        bad(dict(ok, n=2), code="invalid_value", param="n")
        bad(dict(ok, logprobs="yes"), code="invalid_type", param="logprobs")
        bad(dict(ok, top_logprobs=2), code="invalid_value", param="top_logprobs")
        bad(dict(ok, logprobs=True, top_logprobs=21), code="invalid_value", param="top_logprobs")
        bad({"model": M, "prompt": "x", "logprobs": 6}, path="/v1/completions",
            code="invalid_value", param="logprobs")
        # tools: malformed, forced (needs constrained decoding), and the
        # model's template (ChatML without tools) teaches no call format
        fn = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
        bad(dict(ok, tools=[{"type": "function"}]), code="invalid_value", param="tools[0]")
        bad(dict(ok, tools=[fn], tool_choice="required"), code="unsupported_parameter",
            param="tool_choice")
        bad(dict(ok, tools=[fn], tool_choice={"type": "function", "function": {"name": "f"}}),
            code="unsupported_parameter", param="tool_choice")
        bad(dict(ok, tools=[fn]), code="unsupported_parameter", param="tools")
        bad({"model": M, "messages": [{"role": "tool", "content": "x"}]},
            code="missing_required_parameter", param="messages[0].tool_call_id")
        bad({"model": M, "messages": [{"role": "user", "content": "x", "tool_calls": []}]},
            code="invalid_value", param="messages[0].tool_calls")
        bad({"model": M, "messages": [{"role": "assistant", "content": None, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": {}}}]}]},
            code="invalid_value", param="messages[0].tool_calls[0]")
        bad({"model": M, "prompt": "x", "tools": [fn]}, path="/v1/completions",
            code="unsupported_parameter", param="tools")
        bad(dict(ok, stream_options={"include_usage": True}), param="stream_options")
        bad(dict(ok, session_id="../etc"), param="session_id")
        bad(chat(M, "short", max_tokens=250, session_id="refused"),
            code="context_length_exceeded")
        bad({"model": M, "prompt": 7}, path="/v1/completions", code="invalid_type",
            param="prompt")
        bad({"model": M, "prompt": ["a", "b"]}, path="/v1/completions", param="prompt")
        bad({"model": M, "prompt": [1, 99999]}, path="/v1/completions", param="prompt")
        bad(dict(ok, model="gpt-4"), status=404, code="model_not_found", param="model")
        bad(None, status=404, path="/v1/nothing", raw=b"{}")
        hd = bad(None, status=405, method="GET", raw=b"")
        self.assertEqual(hd.get("allow"), "POST")
        bad(None, status=405, path="/v1/models", method="POST", raw=b"{}")
        # a prompt over the context (256), and one that fits without its answer
        long_msg = "the bank keeps what a model has read " * 60
        bad(chat(M, long_msg, max_tokens=None), code="context_length_exceeded",
            param="messages")
        bad(chat(M, "short", max_tokens=250), code="context_length_exceeded", param="messages")
        # a body over --max-body-bytes (65536), sent by curl
        big = os.path.join(self.dir, "big.json")
        with open(big, "w") as f:
            json.dump(chat(M, "x" * 100000), f)
        out = subprocess.run(["curl", "-s", "-w", "\n%{http_code}", "-H",
                              "Content-Type: application/json", "--data-binary", "@" + big,
                              "http://127.0.0.1:%d%s" % (self.s.port, P)],
                             check=True, capture_output=True).stdout.decode()
        payload, code = out.rsplit("\n", 1)
        self.error_shape(json.loads(payload), 413, int(code), "request_too_large")
        # nothing was computed, stored or counted as a completion
        after = self.s.metrics()
        for k in ("snapbank:prefix_cache_queries_total", "snapbank:generation_tokens_total",
                  "snapbank:bank_indexed_bytes", "snapbank:sessions"):
            self.assertEqual(after[k], before[k], k)
        self.assertEqual(self.s.get("/v1/sessions/refused")[0], 404)  # not made
        self.assertEqual(self.s.get("/health")[0], 200)

    def test_metrics_format(self):
        self.s.post("/v1/chat/completions", chat(M, "count me"))
        self.s.post("/v1/chat/completions", chat(M, "count me"))
        st, hd, text = self.s.get("/metrics")
        self.assertEqual(st, 200)
        self.assertTrue(hd["content-type"].startswith("text/plain; version=0.0.4"))
        types = {}
        sample = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? '
                            r'(-?[0-9.e+-]+|\+Inf|NaN)$')
        for line in text.splitlines():
            if line.startswith("# TYPE "):
                _, _, name, typ = line.split(" ")
                types[name] = typ
            elif line.startswith("# HELP "):
                continue
            else:
                m = sample.match(line)
                self.assertTrue(m, "not an exposition line: %r" % line)
                base = re.sub(r"_(bucket|sum|count)$", "", m.group(1))
                self.assertTrue(m.group(1) in types or base in types, line)
        for name in ("snapbank:requests_total", "snapbank:prompt_tokens_total",
                     "snapbank:generation_tokens_total", "snapbank:prefix_cache_queries_total",
                     "snapbank:prefix_cache_hits_total", "snapbank:prefix_cache_misses_total",
                     "snapbank:time_to_first_token_seconds",
                     "snapbank:time_per_output_token_seconds", "snapbank:num_requests_waiting",
                     "snapbank:num_requests_running", "snapbank:bank_ram_bytes",
                     "snapbank:bank_ram_bytes_limit", "snapbank:disk_written_bytes_last_hour",
                     "snapbank:disk_write_budget_bytes_per_hour",
                     "snapbank:disk_write_amplification", "snapbank:forward_pass_sequences"):
            self.assertIn(name, types)
        m = self.s.metrics()
        self.assertGreaterEqual(
            m['snapbank:requests_total{endpoint="/v1/chat/completions",status="200"}'], 2)
        self.assertGreater(m['snapbank:prefix_cache_hits_total{tier="ram"}'], 0)
        self.assertGreater(m['snapbank:prefix_cache_misses_total{reason="no_prefix"}'], 0)
        self.assertEqual(m['snapbank:turns_total{cache_mode="cold"}'], 1)
        self.assertEqual(m['snapbank:turns_total{cache_mode="warm_prefix"}'], 1)
        # histograms: cumulative buckets, +Inf is the count
        h = "snapbank:time_to_first_token_seconds"
        buckets = [(k, v) for k, v in m.items() if k.startswith(h + "_bucket")]
        vals = [v for _, v in buckets]
        self.assertEqual(vals, sorted(vals))
        self.assertEqual(m[h + '_bucket{le="+Inf"}'], m[h + "_count"])
        self.assertEqual(m[h + "_count"], 2)


class HybridUsage(ServerTest):
    """A hybrid model's usage says where its recurrent state came from: the
    boundary the prompt resumed at (the default grid of 256 tokens), the
    tokens recomputed past it, the boundaries the turn wrote."""

    def test_boundary_fields(self):
        path = make_model(os.path.join(self.dir, "hybrid.gguf"), preset="tiny-hybrid")
        s = self.start(path, "--min-prefix", "1")
        ids = [1] + [(i * 7) % 500 + 3 for i in range(299)]  # 300 tokens
        body = {"model": "hybrid", "prompt": ids, "max_tokens": 1, "temperature": 0}
        st, _, r = s.post("/v1/completions", body)
        self.assertEqual(st, 200, r)
        u = r["usage"]
        self.assertEqual(u["cache_mode"], "cold", u)
        b = u["boundary"]
        self.assertEqual((b["resumed_at"], b["recomputed_tokens"]), (0, 0), u)
        self.assertGreaterEqual(b["written"], 2, u)  # grid 256, end of prompt (and of turn)
        # the same first 280 tokens, another tail: resumes at the grid's 256
        other = ids[:280] + [(i * 11) % 500 + 3 for i in range(20)]
        st, _, r = s.post("/v1/completions", dict(body, prompt=other))
        self.assertEqual(st, 200, r)
        u = r["usage"]
        self.assertEqual(u["cache_mode"], "warm_prefix", u)
        self.assertEqual(u["prompt_tokens_details"]["cached_tokens"], 256, u)
        b = u["boundary"]
        self.assertEqual((b["resumed_at"], b["recomputed_tokens"]), (256, 24), u)
        self.assertGreater(b["bank_bytes"], 0, u)
        # a dense model's usage has no boundary object
        d = self.start(tiny(self.dir), "--min-prefix", "1", name="dense")
        st, _, r = d.post("/v1/completions", {"model": "tiny", "prompt": "Hello", "max_tokens": 1})
        self.assertEqual(st, 200, r)
        self.assertNotIn("boundary", r["usage"])
        self.assertEqual(s.stop(), 0)
        self.assertEqual(d.stop(), 0)


if __name__ == "__main__":
    unittest.main()
