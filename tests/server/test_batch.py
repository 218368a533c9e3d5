"""test_batch.py -- continuous batching changes no answer: N streams run
at once (their decode steps and prompt chunks sharing forward passes) give,
token for token, the text the same requests give run one at a time.

Description: the tiny model with a 32k context. Server A (--parallel 6,
--batch 32 so long prompts go in chunks beside the decode steps): a
30000-token stream keeps the engine busy while five greedy requests of
different prompt lengths run at once, streamed and not; metrics show passes
holding several sequences. Server B (--parallel 1, its own bank) runs the
same five requests one after another. Each request's text and token count
are the same on both. Then the same with sampling at temperature 1 and a
seed per request. The same comparison on the qwen3 architecture and on
the hybrid qwen35 (a recurrent state per sequence in the shared passes).

And a prompt shared by requests that arrive together is computed once:
four users send the same long system prompt at once (--batch 16, so the
first one's prompt takes many passes); the first is cold, the others wait
for its prompt to be committed and restore the shared part (warm_prefix,
at least the system prompt's tokens cached) instead of computing it beside
it.

On the llama.cpp engine (SB_ENGINE=llama.cpp) the texts are not compared:
llama.cpp's kernels do not promise a row the same bits whatever shares its
pass. There every request of the batched server completes as it does
alone (status; the finish reason stop or length, as an end token may come
at another place), passes hold several sequences, and the
pacer is shorter (llama.cpp computes the tiny model's long context slower).
"""
import json
import threading
import unittest

import os

from harness import ENGINE, ServerTest, long_ctx, make_model, streamed_text, wait_for
from test_lifecycle import drop, open_stream, read_events

PROMPTS = ["A.", "The bank keeps what a model has read, page by page. " * 3,
           "Tell me a story about the disk tier.", "x" * 300, "Twelve pages, then thirteen."]


def body(i, stream, temp=0, model="long"):
    b = {"model": model, "messages": [{"role": "user", "content": PROMPTS[i]}],
         "max_tokens": 24 + 3 * i, "temperature": temp, "stream": stream}
    if temp:
        b["seed"] = 100 + i
    return b


class Batch(ServerTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.model = long_ctx(cls.dir)

    def run_all(self, s, stream, temp, model):
        out = [None] * len(PROMPTS)

        def one(i):
            if stream:
                st, ev = s.stream("/v1/chat/completions", body(i, True, temp, model))
                out[i] = (st, streamed_text(ev), ev[-2]["choices"][0]["finish_reason"])
            else:
                st, _, r = s.post("/v1/chat/completions", body(i, False, temp, model))
                out[i] = (st, r["choices"][0]["message"]["content"],
                          r["choices"][0]["finish_reason"])
        ts = [threading.Thread(target=one, args=(i,)) for i in range(len(PROMPTS))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return out

    def compare(self, path, model, pacer_tokens):
        a = self.start(path, "--parallel", "6", "--batch", "32", name="batched-" + model)
        b = self.start(path, "--parallel", "1", name="alone-" + model)
        if ENGINE != "builtin":
            pacer_tokens = min(pacer_tokens, 3000)
        pacer = {"model": model, "messages": [{"role": "user", "content": "Keep going."}],
                 "max_tokens": pacer_tokens, "temperature": 0, "stream": True}
        c, r = open_stream(a.port, pacer)
        read_events(r, 2)
        for temp in (0, 1):
            for stream in (True, False):
                together = self.run_all(a, stream, temp, model)
                alone = [None] * len(PROMPTS)
                for i in range(len(PROMPTS)):
                    st, _, x = b.post("/v1/chat/completions", body(i, False, temp, model))
                    alone[i] = (st, x["choices"][0]["message"]["content"],
                                x["choices"][0]["finish_reason"])
                for i in range(len(PROMPTS)):
                    self.assertEqual(together[i][0], 200)
                    if ENGINE != "builtin":  # llama.cpp: the bits may differ (above),
                        # so may where an end token comes: each completes
                        together[i] = (together[i][0], together[i][2] in ("stop", "length"))
                        alone[i] = (alone[i][0], True)
                    self.assertEqual(together[i], alone[i],
                                     "%s request %d (stream %s, temperature %s)" %
                                     (model, i, stream, temp))
        m = a.metrics()
        drop(c)
        self.assertEqual(a.stop(), 0)
        self.assertEqual(b.stop(), 0)
        return m

    def test_batched_equals_alone(self):
        m = self.compare(self.model, "long", 30000)
        h = "snapbank:forward_pass_sequences"
        self.assertGreater(m[h + "_count"], m[h + '_bucket{le="1"}'])  # shared passes
        self.assertGreater(m[h + "_count"], m[h + '_bucket{le="3"}'])  # ...of 4 or more

    def test_other_architecture(self):
        # qwen3: per-head q/k norms, head_dim 32 with q_dim != dim, NEOX RoPE
        path = make_model(os.path.join(self.dir, "qwen3.gguf"), preset="tiny-qwen3")
        self.compare(path, "qwen3", 1900)

    def test_hybrid_architecture(self):
        # qwen35: Gated DeltaNet layers whose recurrent state each sequence
        # carries through the shared passes, boundaries on the grid
        path = make_model(os.path.join(self.dir, "hybrid.gguf"), preset="tiny-hybrid")
        self.compare(path, "hybrid", 1900)


class SharedPrefix(ServerTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.model = long_ctx(cls.dir)

    def test_computed_once(self):
        s = self.start(self.model, "--parallel", "4", "--batch", "16")
        system = "The bank keeps what a model has read, page by page, for everyone. " * 12
        out = [None] * 4

        def one(i):
            out[i] = s.post("/v1/chat/completions", {
                "model": "long", "max_tokens": 4, "temperature": 0,
                "messages": [{"role": "system", "content": system},
                             {"role": "user", "content": "I am user %d." % i}]})
        ts = [threading.Thread(target=one, args=(i,)) for i in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        modes = sorted(u[2]["usage"]["cache_mode"] for u in out)
        self.assertEqual(modes, ["cold", "warm_prefix", "warm_prefix", "warm_prefix"], out)
        # what a later user finds of the shared prompt in the bank
        st, _, later = s.post("/v1/chat/completions", {
            "model": "long", "max_tokens": 1, "temperature": 0,
            "messages": [{"role": "system", "content": system},
                         {"role": "user", "content": "Someone else."}]})
        shared = later["usage"]["prompt_tokens_details"]["cached_tokens"]
        self.assertGreater(shared, 200)
        for st, _, r in out:
            self.assertEqual(st, 200)
            if r["usage"]["cache_mode"] != "cold":
                self.assertGreaterEqual(r["usage"]["prompt_tokens_details"]["cached_tokens"],
                                        shared)
        self.assertEqual(s.stop(), 0)


if __name__ == "__main__":
    unittest.main()
