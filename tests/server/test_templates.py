"""test_templates.py -- chat templates as snapbank serve applies them, on
models with real vocabularies (tests/data/vocab) and their own templates.

Description:
  - a Qwen2 vocabulary (its file carries Qwen's ChatML template, whose
    <|im_start|> and <|im_end|> are control tokens): /v1/models names the
    template; a control token's text typed in a message is ordinary text
    (several tokens), while the template's own become one token each;
  - its sessions: the next turn reuses every token the session says it can
    (the answer and the end-of-turn token the template spells after it);
  - --chat-template llama3 over a Llama 3 vocabulary: the prompt is exactly
    what `snapbank tokenize` gives for the rendered text, with one BOS (the
    template's own <|begin_of_text|>, never a second one added);
  - an unknown --chat-template name stops the server at start (exit 2),
    naming the option.
"""
import os
import subprocess
import unittest

from harness import BIN, ServerTest, make_model

VOCAB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "vocab")


def vocab_model(dirname, family, arch):
    return make_model(os.path.join(dirname, family + ".gguf"), "--arch", arch, "--vocab",
                      os.path.join(VOCAB, "ggml-vocab-%s.gguf" % family), preset="tiny")


def tokenize(model, text, *flags):
    out = subprocess.run([BIN, "tokenize", model, "--prompt", text, "--ids-only", *flags],
                         check=True, capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


class Templates(ServerTest):
    def chat(self, s, content, sid=None, n=4):
        body = {"model": s.get("/v1/models")[2]["data"][0]["id"], "messages": [{"role": "user", "content": content}],
                "max_tokens": n, "temperature": 0}
        if sid:
            body["session_id"] = sid
        st, _, r = s.post("/v1/chat/completions", body)
        self.assertEqual(st, 200, r)
        return r

    def test_qwen2_chatml(self):
        model = vocab_model(self.dir, "qwen2", "qwen2")
        s = self.start(model)
        st, _, r = s.get("/v1/models")
        self.assertEqual(st, 200, r)
        self.assertTrue(r["data"][0]["meta"]["chat_template"].startswith("chatml"), r)
        base = self.chat(s, "")["usage"]["prompt_tokens"]
        typed = self.chat(s, "<|im_end|>")["usage"]["prompt_tokens"]
        one = len(tokenize(model, "<|im_end|>", "--no-bos"))
        self.assertEqual(one, 1)  # the template's own text is one control token
        plain = len(tokenize(model, "<|im_end|>", "--no-bos", "--no-special"))
        self.assertGreater(plain, 1)
        self.assertEqual(typed - base, plain)  # typed, it is text

    def test_qwen2_session_reuse(self):
        model = vocab_model(self.dir, "qwen2", "qwen2")
        s = self.start(model, "--min-prefix", "1")
        msgs = [{"role": "user", "content": "Which pages do you keep?"}]
        for turn in range(3):
            body = {"model": "qwen2", "messages": msgs, "max_tokens": 6, "temperature": 0,
                    "session_id": "q"}
            st, _, r = s.post("/v1/chat/completions", body)
            self.assertEqual(st, 200, r)
            if turn:
                self.assertEqual(r["usage"]["prompt_tokens_details"]["cached_tokens"],
                                 reusable, r["usage"])
            st, _, info = s.get("/v1/sessions/q")
            self.assertEqual(st, 200, info)
            reusable = info["reusable_tokens"]
            msgs = msgs + [{"role": "assistant", "content": r["choices"][0]["message"]["content"]},
                           {"role": "user", "content": "And then %d?" % turn}]

    def test_llama3_one_bos(self):
        model = vocab_model(self.dir, "llama-bpe", "llama")
        s = self.start(model, "--chat-template", "llama3")
        r = self.chat(s, "Hello there.")
        text = ("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello there."
                "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")
        want = tokenize(model, text, "--no-bos")
        self.assertEqual(want.count(want[0]), 1)
        self.assertEqual(r["usage"]["prompt_tokens"], len(want), r["usage"])

    def test_unknown_template_refused(self):
        model = vocab_model(self.dir, "qwen2", "qwen2")
        p = subprocess.run([BIN, "serve", model, "--port", "0", "--chat-template", "nosuch"],
                           capture_output=True, timeout=300)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn(b"--chat-template", p.stderr)


if __name__ == "__main__":
    unittest.main()
