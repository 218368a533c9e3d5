"""test_openai_npm.py -- the official `openai` npm package as a client of
snapbank serve, unchanged (tests/server/openai_client.mjs says what it
checks). The package is installed with npm into the build directory
(tests/server-work/npm, once); the test is skipped (exit 77) only when npm
or node is absent.
"""
import os
import shutil
import subprocess
import sys
import unittest

from harness import ENGINE, ServerTest, WORK, make_model, tiny

HERE = os.path.dirname(os.path.abspath(__file__))
KEY = "key-npm-0000001"
VERSION = "openai@6"  # node 20 runs it (openai 7 asks for node 22)


def npm_dir():
    d = os.path.join(WORK, "npm")
    if not os.path.exists(os.path.join(d, "node_modules", "openai", "package.json")):
        os.makedirs(d, exist_ok=True)
        subprocess.run(["npm", "install", "--prefix", d, "--no-audit", "--no-fund",
                        "--loglevel=error", VERSION], check=True, timeout=600)
    for f in ("openai_client.mjs", "openai_tools.mjs"):
        shutil.copy(os.path.join(HERE, f), d)
    return d


class OpenAINpm(ServerTest):
    def test_client(self):
        keys = os.path.join(self.dir, "keys")
        with open(keys, "w") as f:
            f.write(KEY + " npm\n")
        os.chmod(keys, 0o600)
        d = npm_dir()
        s = self.start(tiny(self.dir), "--api-key-file", keys, "--min-prefix", "1")
        p = subprocess.run(["node", os.path.join(d, "openai_client.mjs"), str(s.port), KEY, ENGINE],
                           capture_output=True, timeout=600, cwd=d)
        out = p.stdout.decode() + p.stderr.decode()
        self.assertEqual(p.returncode, 0, out)
        self.assertEqual(p.stdout.decode().strip(), "ok", out)
        self.assertEqual(s.stop(), 0)

    def test_tools(self):
        # test_tools.py's model and template: its answer is a tool call
        model = make_model(os.path.join(self.dir, "caller.gguf"), "--answer",
                           '<tool_call>\n{"name": "get_weather", "arguments": {"city": '
                           '"Paris", "days": 2}}\n</tool_call>')
        d = npm_dir()
        s = self.start(model, "--chat-template-file",
                       os.path.join(HERE, "..", "data", "templates",
                                    "chatml-qwen2.5-7b-instruct.jinja"))
        p = subprocess.run(["node", os.path.join(d, "openai_tools.mjs"), str(s.port)],
                           capture_output=True, timeout=600, cwd=d)
        out = p.stdout.decode() + p.stderr.decode()
        self.assertEqual(p.returncode, 0, out)
        self.assertEqual(p.stdout.decode().strip(), "ok", out)
        self.assertEqual(s.stop(), 0)


if __name__ == "__main__":
    if not shutil.which("npm") or not shutil.which("node"):
        print("test_openai_npm: SKIPPED: npm or node is not installed")
        sys.exit(77)
    unittest.main()
