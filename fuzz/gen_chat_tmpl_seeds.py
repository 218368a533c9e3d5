#!/usr/bin/env python3
"""gen_chat_tmpl_seeds.py -- write fuzz/corpus/chat_tmpl/seed-* for
fuzz_chat_tmpl: the fixture templates (tests/data/templates) and small
templates that reach the interpreter's corners, each behind the harness's
8-byte header (its format is at the top of fuzz_chat_tmpl.c).

Run from the repository's root: python3 fuzz/gen_chat_tmpl_seeds.py
It rewrites every seed-* file and leaves regress-* alone. Standard library.
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus", "chat_tmpl")
FIXTURES = os.path.join(HERE, "..", "tests", "data", "templates")

# role (0 system, 1 user, 2 assistant, 3 tool) | content length << 2
CONV = bytes([1 | 8 << 2, 2 | 5 << 2, 1 | 12 << 2, 2 | 0, 1 | 3 << 2, 2 | 20 << 2])
SYS_CONV = bytes([0 | 6 << 2, 1 | 8 << 2, 2 | 5 << 2, 1 | 12 << 2, 3 | 4 << 2, 1 | 1 << 2])

SNIPPETS = {
    "ws-control": "a \n {%- if true -%} \n b {%- endif %}\n  {% for m in messages %}\n"
                  "  {{- m.content }}\n  {% endfor %}\n{# c #}{%+ if 1 +%}x{% endif %}\r\n",
    "loops": "{% for m in messages if m.role != 'tool' %}{{ loop.index }}/{{ loop.length }}"
             "{{ loop.previtem is defined }}{{ loop.cycle('a', 'b') }}{% if loop.last %}"
             "{% break %}{% endif %}{% else %}E{% endfor %}",
    "namespace": "{% set ns = namespace(i=0, last='') %}{% for m in messages[::-1] %}"
                 "{% set ns.i = ns.i + 1 %}{% set ns.last = m.content %}{% endfor %}"
                 "{{ ns.i }}{{ ns.last|trim }}",
    "macro": "{% macro turn(m, sep='\\n') %}<{{ m.role|upper }}>{{ sep }}{{ m.content[1:] ~ "
             "caller() if caller is defined else m.content }}{% endmacro %}"
             "{% for m in messages %}{{ turn(m) }}{% call turn(m, '|') %}x{% endcall %}{% endfor %}",
    "filters": "{{ messages|map(attribute='content')|join(' / ')|replace(' ', '_')|upper }}"
               "{{ messages|selectattr('role', 'equalto', 'user')|list|length }}"
               "{{ messages|tojson(indent=2) }}{{ messages[0]|dictsort }}"
               "{{ messages[-1].content.split()|reverse|list }}",
    "methods": "{% for m in messages %}{{ m.content.strip().startswith('x') }}"
               "{{ m.content.split(' ', 1)[0] }}{{ '{}:{}'.format(m.role, m.content) }}"
               "{{ m.get('role') }}{{ m.items()|list }}{% endfor %}",
    "deep": "{{ " + "(" * 60 + "1" + ")" * 60 + " }}",
    "recursion": "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
    "big-loop": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "big-string": "{{ ('x' * 100000) * 1000 }}",
    "errors": "{{ raise_exception('no ' ~ messages[0].role) if messages|length > 3 }}"
              "{{ messages[0].nope.deeper }}",
    "markup": "{{ '<b>'|safe + messages[0].content }}{{ messages[0].content|e }}",
    "set-block": "{% set out %}{% for m in messages %}[{{ m.content }}]{% endfor %}{% endset %}"
                 "{{ out|length }}{{ out|trim }}",
}


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.startswith("seed-"):
            os.remove(os.path.join(OUT, f))
    n = 0
    for name in sorted(os.listdir(FIXTURES)):
        if not name.endswith(".jinja"):
            continue
        with open(os.path.join(FIXTURES, name), "rb") as f:
            src = f.read()
        for flags, conv, tag in ((1, CONV, "gen"), (0, SYS_CONV, "sys"), (3, CONV, "jinja")):
            head = bytes([flags, len(conv) - 1]) + conv
            with open(os.path.join(OUT, "seed-%s-%s" % (name[:-6], tag)), "wb") as f:
                f.write(head + src)
            n += 1
    for name, src in SNIPPETS.items():
        head = bytes([3, 5]) + CONV
        with open(os.path.join(OUT, "seed-snippet-" + name), "wb") as f:
            f.write(head + src.encode("utf-8"))
        n += 1
    print("wrote %d seeds to %s" % (n, OUT))


if __name__ == "__main__":
    main()
