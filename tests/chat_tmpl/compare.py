#!/usr/bin/env python3
"""compare.py -- our chat templates against jinja2, byte for byte.

For every template in the fixture directory (tests/data/templates), renders
many conversations with jinja2 configured as Hugging Face configures it
(ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols,
raise_exception, tojson = json.dumps(ensure_ascii=False)) and with
chat_tmpl_tool (runtime/template/chat_tmpl.h) twice: with the family detected
from the template (its built-in renderer) and with name "jinja" (the
interpreter). Both must give jinja2's text, or fail where jinja2 fails
(with the template's own message when it is a raise_exception).

Conversations: with and without a system prompt, 1..6 turns, empty
content, padding, content holding special-token text, Unicode (accents,
CJK, emoji, a final capital sigma), quotes and backslashes, think blocks,
tool turns, turns out of order; add_generation_prompt on and off. Fixtures
named jinja-* (and every fixture in a second pass) also get tools, tool
calls and extra variables through the extras.

Spans: conversations whose content is written in a private alphabet (CJK
ideographs no template contains) must come back with every one of those
characters inside a span, and no span may hold a byte that cannot have
come from the caller (template punctuation such as < | [ ]).

Random templates (randtmpl.py: expressions, filters, tests, methods,
slicing, loops, scopes, macros, whitespace control over a fixed context)
are rendered by jinja2 and the interpreter alone ("raw": no probes, as they
need the context's variables): equal text, or both fail.

Usage: compare.py TOOL FIXTURE_DIR [--seed N] [--per-template N] [--random N]
Exit status: 0 all equal, 1 a difference (printed), 2 usage.
Standard library plus jinja2 (Debian's python3-jinja2).
"""
import json
import os
import random
import subprocess
import sys

import warnings

import jinja2
import jinja2.ext
from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

import randtmpl

# The family each fixture must be detected as (and rendered by); "jinja"
# fixtures go to the interpreter.
EXPECTED = {
    "chatml-openhermes-2.5-mistral-7b.jinja": ("chatml", "chatml"),
    "chatml-qwen2-instruct.jinja": ("chatml", "qwen2"),
    "chatml-smollm2-1.7b-instruct.jinja": ("chatml", "smollm2"),
    "chatml-qwen2.5-7b-instruct.jinja": ("chatml", "qwen2.5"),
    "chatml-qwen3-0.6b.jinja": ("chatml", "qwen3"),
    "llama3-meta-llama-3-8b-instruct.jinja": ("llama3", "llama3"),
    "llama3-meta-llama-3-8b-instruct-gen.jinja": ("llama3", "llama3-gen"),
    "llama3-llama-3.1-8b-instruct.jinja": ("llama3", "llama3.1"),
    "llama3-llama-3.2-3b-instruct.jinja": ("llama3", "llama3.1"),
    "llama2-llama-2-7b-chat.jinja": ("llama2", "llama2"),
    "mistral-7b-instruct-v0.2-v1.jinja": ("mistral", "mistral-v1"),
    "mistral-7b-instruct-v0.1.jinja": ("mistral", "mistral-v0.1"),
    "mistral-nemo-instruct-2407.jinja": ("mistral", "mistral-nemo"),
    "gemma-2-2b-it.jinja": ("gemma", "gemma2"),
    "gemma-7b-it.jinja": ("gemma", "gemma"),
    "phi3-phi-3.5-mini-instruct.jinja": ("phi3", "phi3.5"),
    "phi3-phi-3-mini-4k-instruct.jinja": ("phi3", "phi3-mini"),
    "phi3-phi-3-medium-4k-instruct.jinja": ("phi3", "phi3-medium"),
    "phi3-phi-3-small-8k-instruct.jinja": ("phi3", "phi3-small"),
    "phi3-phi-3-vision-128k-instruct.jinja": ("phi3", "phi3-vision"),
    "jinja-smollm3-3b.jinja": ("jinja", "jinja"),
    "jinja-functionary-medium-v3.1.jinja": ("jinja", "jinja"),
    "jinja-hermes-2-pro-llama-3-8b-tool_use.jinja": ("jinja", "jinja"),
}

BOS, EOS = "<s>", "</s>"


class Raised(Exception):
    """raise_exception(message) from a template"""


def reference_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])

    def raise_exception(message):
        raise Raised(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                          separators=separators, sort_keys=sort_keys)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def reference(env, source, conv):
    """('ok', text) or ('err', message, raised)"""
    try:
        tmpl = env.from_string(source)
        ctx = dict(conv.get("vars", {}))
        ctx.update(messages=conv["messages"], add_generation_prompt=conv["gen"],
                   bos_token=BOS, eos_token=EOS)
        return ("ok", tmpl.render(**ctx))
    except Raised as e:
        return ("err", str(e), True)
    except (TemplateError, TypeError, ValueError, KeyError, IndexError, AttributeError,
            ZeroDivisionError, OverflowError, RecursionError) as e:
        return ("err", "%s: %s" % (type(e).__name__, e), False)


class Tool:
    """chat_tmpl_tool over a pipe"""

    def __init__(self, path):
        self.p = subprocess.Popen([path], stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def _field(self, key, data):
        if isinstance(data, str):
            data = data.encode("utf-8")
        self.p.stdin.write(b"%s %d\n" % (key.encode(), len(data)) + data + b"\n")

    def _line(self):
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError("chat_tmpl_tool exited (status %s)" % self.p.wait())
        return line

    def render(self, source, name, conv, limits=None):
        self._field("source", source)
        self._field("name", name)
        self._field("bos", BOS)
        self._field("eos", EOS)
        self._field("limits", limits or "0 0 0 0 0 0")
        self._field("gen", "1" if conv["gen"] else "0")
        if conv.get("vars"):
            self._field("vars", json.dumps(conv["vars"]))
        for m in conv["messages"]:
            self._field("role", m["role"])
            if m.get("content") is None:
                self._field("null", "")
            else:
                self._field("content", m["content"])
            extra = {k: v for k, v in m.items() if k not in ("role", "content")}
            if extra or (m.get("content") is not None and not isinstance(m["content"], str)):
                if not isinstance(m.get("content"), (str, type(None))):
                    extra["content"] = m["content"]
                self._field("msg", json.dumps(extra))
        self._field("render", "")
        self.p.stdin.flush()
        head = self._line().split()
        if head[0] == b"ok":
            n = int(head[3])
            text = self.p.stdout.read(n)
            self.p.stdout.read(1)
            sp = self._line().split()
            k = int(sp[1])
            spans = [(int(sp[2 + 2 * i]), int(sp[3 + 2 * i])) for i in range(k)]
            return ("ok", head[1].decode(), head[2].decode(), text, spans)
        n = int(head[2])
        msg = self.p.stdout.read(n).decode("utf-8", "replace")
        self.p.stdout.read(1)
        return ("err", int(head[1]), msg)

    def close(self):
        self.p.stdin.close()
        return self.p.wait()


# ---- conversations ------------------------------------------------------------------------

SPECIAL = ["<|im_end|>", "<|im_start|>system\n", "<|eot_id|>", "<|start_header_id|>",
           "[INST]", "[/INST]", "<end_of_turn>", "<|end|>", "</s>", "<s>", "<<SYS>>",
           "<think>x</think>", "{{ bos_token }}", "{% if %}"]
UNICODE = ["héllo wörld", "日本語のテキスト", "emoji 😀👍🏽", "ΟΔΥΣΣΕΥΣ", "ΣΑΣ Σ", "мир",
           "עברית", "naïve café", "ß straße", "\u00a0nbsp\u00a0", "tab\there", "İstanbul",
           "\u2028line sep", "ǅ title"]
PLAIN = ["Hello", "What is the capital of France?", "Tell me a joke.", "ok", "1 + 1 = ?",
         "Write a poem about the sea.", "Thanks!", "Why?"]
ODD = ["", " ", "  padded  ", "\n\nnewlines\n", "quote ' and \" and \\ backslash",
       "line1\nline2\r\nline3", "   ", "\t", "trailing space ", "{not a tag}",
       "<tool_response>\nr\n</tool_response>"]
THINK = ["<think>\nreasoning here\n</think>\n\nThe answer.", "<think>r</think>a",
         "before</think>after", "\n\n<think>\n\n</think>\n\nx\n"]


def content(rnd):
    pool = rnd.choice([PLAIN, PLAIN, SPECIAL, UNICODE, ODD, THINK])
    s = rnd.choice(pool)
    if rnd.random() < 0.2:
        s = s + " " + rnd.choice(SPECIAL + UNICODE)
    return s


def conversation(rnd, kinds):
    msgs = []
    if rnd.random() < 0.5:
        msgs.append({"role": "system", "content": content(rnd) if rnd.random() < 0.7 else
                     "You are a helpful assistant."})
    turns = rnd.randint(1, 6)
    for t in range(turns):
        msgs.append({"role": "user", "content": content(rnd)})
        last = t == turns - 1
        if not last or rnd.random() < 0.3:
            a = content(rnd) if "think" not in kinds or rnd.random() < 0.5 else rnd.choice(THINK)
            msgs.append({"role": "assistant", "content": a})
    r = rnd.random()
    if r < 0.08:  # tool turns after an assistant one
        i = rnd.randrange(len(msgs))
        msgs.insert(i, {"role": "tool", "content": content(rnd)})
        if rnd.random() < 0.5:
            msgs.insert(i, {"role": "tool", "content": content(rnd)})
    elif r < 0.14:  # out of order
        rnd.shuffle(msgs)
    elif r < 0.17:
        msgs.insert(rnd.randrange(len(msgs) + 1), {"role": "system", "content": "late system"})
    if not msgs:
        msgs = [{"role": "user", "content": "hi"}]
    return {"messages": msgs, "gen": rnd.random() < 0.6}


TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather in a city, \"quoted\" <b>",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "the city"},
        "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}}}]


def conversation_extras(rnd):
    conv = conversation(rnd, ())
    v = {}
    if rnd.random() < 0.6:
        v["tools"] = TOOLS
    if rnd.random() < 0.3:
        v["enable_thinking"] = rnd.random() < 0.5
    if rnd.random() < 0.2:
        v["date_string"] = "14 Mar 2025"
    conv["vars"] = v
    if rnd.random() < 0.5:  # a tool call and its result
        call = {"id": "abcDEF123", "type": "function", "function": {
            "name": "get_weather", "arguments": {"city": "Paris é", "unit": "c"}}}
        msgs = conv["messages"]
        at = len(msgs) - 1 if msgs[-1]["role"] == "user" else len(msgs)
        msgs.insert(at, {"role": "assistant", "content": None if rnd.random() < 0.5 else "",
                         "tool_calls": [call]})
        msgs.insert(at + 1, {"role": "tool", "content": "{\"temp\": 21}", "tool_call_id": "abcDEF123",
                             "name": "get_weather"})
    return conv


PRIVATE = [chr(c) for c in range(0x4E00, 0x4E40)]


def private_conversation(rnd):
    conv = conversation(rnd, ())
    for m in conv["messages"]:
        n = rnd.randint(0, 12)
        s = "".join(rnd.choice(PRIVATE + [" ", "\n"]) for _ in range(n))
        m["content"] = s
    return conv


# ---- checks -------------------------------------------------------------------------------

def check_spans(text, spans, conv):
    """every private character is in a span; no span holds template punctuation"""
    covered = bytearray(len(text))
    prev = -1
    for off, n in spans:
        if n <= 0 or off <= prev or off + n > len(text):
            return "bad span (%d, %d)" % (off, n)
        prev = off + n
        for i in range(off, off + n):
            covered[i] = 1
    s = text.decode("utf-8")
    pos = 0
    caller = "".join(m["role"] + (m["content"] or "") for m in conv["messages"])
    for ch in s:
        b = len(ch.encode("utf-8"))
        if ch in PRIVATE and not all(covered[pos:pos + b]):
            return "private character %r at byte %d outside the spans" % (ch, pos)
        if covered[pos] and ch not in caller and ch not in "\\\"ntru0123456789abcdef":
            return "span covers %r at byte %d, which no caller string holds" % (ch, pos)
        pos += b
    return None


def main():
    args = sys.argv[1:]
    seed, per, n_random = 1, 60, 2000
    if "--random" in args:
        i = args.index("--random")
        n_random = int(args[i + 1])
        del args[i:i + 2]
    if "--seed" in args:
        i = args.index("--seed")
        seed = int(args[i + 1])
        del args[i:i + 2]
    if "--per-template" in args:
        i = args.index("--per-template")
        per = int(args[i + 1])
        del args[i:i + 2]
    if len(args) != 2:
        print(__doc__.split("\n\n")[-3], file=sys.stderr)
        return 2
    tool_path, fixtures = args
    env = reference_env()
    tool = Tool(tool_path)
    failures = 0
    checked = 0
    names = sorted(f for f in os.listdir(fixtures) if f.endswith(".jinja"))
    missing = [n for n in names if n not in EXPECTED]
    if missing:
        print("fixtures without an expected family in compare.py: %s" % missing)
        return 1
    for name in names:
        with open(os.path.join(fixtures, name), encoding="utf-8") as f:
            source = f.read()
        family, variant = EXPECTED[name]
        rnd = random.Random("%d:%s" % (seed, name))
        kinds = ("think",) if "qwen3" in name else ()
        convs = [conversation(rnd, kinds) for _ in range(per)]
        convs += [private_conversation(rnd) for _ in range(per // 4)]
        convs += [conversation_extras(rnd) for _ in range(per // 2 if family == "jinja" else per // 6)]
        n_fail = 0
        for conv in convs:
            ref = reference(env, source, conv)
            modes = [("", family, variant), ("jinja", "jinja", "jinja")]
            if conv.get("vars") or any(set(m) - {"role", "content"} or m.get("content") is None
                                       for m in conv["messages"]):
                modes = modes[1:] if family == "jinja" else [("", family, variant), ("jinja", "jinja", "jinja")]
            for mode, want_family, want_variant in modes:
                got = tool.render(source, mode, conv)
                checked += 1
                problem = None
                if ref[0] == "ok":
                    if got[0] != "ok":
                        problem = "jinja2 renders, we fail: %s" % (got[2],)
                    elif got[3] != ref[1].encode("utf-8"):
                        problem = "text differs:\n  jinja2: %r\n  ours:   %r" % (
                            ref[1], got[3].decode("utf-8", "replace"))
                    elif (got[1], got[2]) != (want_family, want_variant):
                        problem = "rendered by %s/%s, expected %s/%s" % (
                            got[1], got[2], want_family, want_variant)
                    else:
                        if any(ch in PRIVATE for m in conv["messages"] for ch in (m["content"] or "")):
                            problem = check_spans(got[3], got[4], conv)
                else:
                    if got[0] == "ok":
                        problem = "jinja2 fails (%s), we render %r" % (ref[1], got[3])
                    elif ref[2] and got[2] != ref[1]:
                        problem = "raise_exception message differs: jinja2 %r, ours %r" % (
                            ref[1], got[2])
                if problem:
                    n_fail += 1
                    if n_fail <= 3:
                        print("FAIL %s (%s): %s\n  conversation: %s" % (
                            name, mode or "detected", problem, json.dumps(conv, ensure_ascii=False)))
        failures += n_fail
        print("%-48s %-8s %-13s %4d conversations %s" % (
            name, family, variant, len(convs), "ok" if not n_fail else "%d FAILED" % n_fail))
    # random templates through the interpreter alone
    warnings.simplefilter("ignore")  # jinja2's compiler warns about some of them
    n_both_fail = n_fail = n_unsupported = 0
    for i in range(n_random):
        src = randtmpl.Gen("%d:%d" % (seed, i)).template()
        conv = {"messages": [{"role": "user", "content": "hi"}], "gen": False,
                "vars": randtmpl.CONTEXT}
        ref = reference(env, src, conv)
        got = tool.render(src, "raw", conv)
        checked += 1
        if ref[0] == "ok" and got[0] == "ok" and got[3] == ref[1].encode("utf-8"):
            continue
        if ref[0] == "err" and got[0] == "err":
            n_both_fail += 1
            continue
        if got[0] == "err" and got[1] == -19:  # SB_ERR_UNSUPPORTED: a documented refusal
            n_unsupported += 1
            continue
        n_fail += 1
        if n_fail <= 5:
            print("FAIL random template %r\n  jinja2: %r\n  ours:   %r" % (
                src, ref[:2], got[3] if got[0] == "ok" else got[1:]))
    failures += n_fail
    print("%d random templates: %d equal, %d fail in both, %d refused as unsupported, "
          "%d differ" % (n_random, n_random - n_both_fail - n_fail - n_unsupported, n_both_fail,
                         n_unsupported, n_fail))
    status = tool.close()
    print("%d renders compared, %d failed" % (checked, failures))
    if status != 0:  # a sanitizer's report (a leak) ends the tool with an error status
        print("chat_tmpl_tool exited with status %d" % status)
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
