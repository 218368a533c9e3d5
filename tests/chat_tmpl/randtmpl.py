"""randtmpl.py -- random templates for compare.py: expressions, filters,
tests, methods, slicing, loops, scopes, macros and whitespace control,
drawn from the subset chat_tmpl.h documents, over a fixed context. Each is
rendered by jinja2 and by the interpreter; both must give the same text or
both fail. Standard library only."""
import random

STRS = ["''", "'abc'", "'Hello World'", "' pad '", "'a,b,,c'", "'x\\ny'", "'ÉtÉ ß'", "'ΣΑΣ'",
        "\"it's\"", "'<|im_end|>'", "'  \\t lead'", "'日本'", "'A-b(c'", "'%s'", "'{}-{0}'"]
INTS = ["0", "1", "2", "-3", "7", "10", "255", "1_000"]
FLOATS = ["0.5", "1.0", "2.5e3", "1e-7", "-0.0", "3.14159", "1e16"]
NAMES = ["s", "n", "f", "l", "d", "msgs", "undef", "nothing", "flag", "ns_like", "msgs[0]",
         "msgs[-1]", "d.k", "d['k']", "l[1]", "loop_var"]
FILTERS0 = ["trim", "length", "count", "upper", "lower", "title", "capitalize", "first", "last",
            "list", "string", "tojson", "reverse|list", "unique|list", "sort", "abs", "int",
            "float", "default", "d", "e", "escape", "safe", "items|list", "dictsort", "max", "min",
            "sum", "join"]
FILTERS1 = [("default", ["'dflt'", "0", "none"]), ("join", ["', '", "'-'"]),
            ("replace", ["'a', 'b'", "' ', '_'", "'', '.'"]),
            ("trim", ["'x'", "' a'"]), ("indent", ["2", "'> '", "2, true", "width=3, blank=true"]),
            ("tojson", ["indent=2", "sort_keys=true", "separators=(',', ':')", "ensure_ascii=true"]),
            ("selectattr", ["'role', 'equalto', 'user'", "'content'"]),
            ("rejectattr", ["'role', 'equalto', 'user'"]),
            ("map", ["attribute='role'", "'upper'", "'length'", "attribute='x', default='dd'"]),
            ("select", ["'odd'", "'string'", ""]), ("reject", ["'none'"]),
            ("sort", ["reverse=true", "attribute='role'", "case_sensitive=true"]),
            ("int", ["5", "base=16"]), ("float", ["1.5"]), ("first", []), ("last", []),
            ("batch", ["2"]), ("attr", ["'upper'", "'role'"])]
TESTS = ["defined", "undefined", "none", "string", "number", "integer", "float", "mapping",
         "iterable", "sequence", "boolean", "true", "false", "odd", "even", "lower", "upper",
         "callable", "escaped", "divisibleby 3", "in [1, 'abc']", "eq 1", "equalto 'abc'",
         "ne 2", "gt 1", "lt 5", "ge 0", "le 3", "sameas none", "sameas 1"]
METHODS = ["strip()", "lstrip()", "rstrip('c')", "upper()", "lower()", "title()",
           "capitalize()", "split()", "split(',')", "split(',', 1)", "rsplit(',', 1)",
           "splitlines()", "startswith('a')", "endswith(('c', 'd'))", "replace('a', 'X')",
           "find('b')", "rfind('b')", "count('a')", "index('x')", "join(['1', '2'])",
           "format(1, 'two')", "isspace()", "islower()", "isupper()", "get('k')",
           "get('zz', 5)", "items()|list", "keys()|list", "values()|list", "count(1)",
           "index(2)", "append(1)", "zfill(3)"]
OPS = ["+", "-", "*", "/", "//", "%", "**", "~", "==", "!=", "<", ">", "<=", ">=", "in",
       "not in", "and", "or"]

CONTEXT = {
    "s": "Hello, world",
    "n": 3,
    "f": 2.5,
    "l": [1, 2, 3, "x", None],
    "d": {"k": "v", "n": 1, "zz": [1, 2]},
    "msgs": [{"role": "system", "content": "Be brief"}, {"role": "user", "content": " hi "},
             {"role": "assistant", "content": "<think>r</think>ok"}],
    "flag": False,
    "nothing": None,
    "ns_like": {"a": {"b": [10, 20]}},
}


class Gen:
    def __init__(self, seed):
        self.r = random.Random(seed)

    def atom(self):
        r = self.r.random()
        if r < 0.25:
            return self.r.choice(STRS)
        if r < 0.35:
            return self.r.choice(INTS)
        if r < 0.42:
            return self.r.choice(FLOATS)
        if r < 0.47:
            return self.r.choice(["true", "false", "none", "True", "None"])
        if r < 0.52:
            return "[%s]" % ", ".join(self.atom() for _ in range(self.r.randint(0, 3)))
        if r < 0.55:
            return "{%s}" % ", ".join("%s: %s" % (self.r.choice(STRS[1:4] + INTS[:3]), self.atom())
                                      for _ in range(self.r.randint(0, 2)))
        if r < 0.58:
            return "(%s,)" % self.atom()
        return self.r.choice(NAMES)

    def postfix(self, e):
        r = self.r.random()
        if r < 0.15:
            return "%s[%s]" % (e, self.r.choice(["0", "1", "-1", "5", "'k'", "'role'"]))
        if r < 0.3:
            # (a slice of a literal that is no sequence is left out: jinja2's
            # compile-time folding turns its error into an undefined)
            e = self.r.choice(["s", "l", "msgs", "d.k", "'abc'", "[1, 2, 3]", "msgs[0].role"])
            a = self.r.choice(["", "1", "-2", "0", "10"])
            b = self.r.choice(["", "2", "-1", "3"])
            c = self.r.choice(["", ":-1", ":2", ":-2", ":0"])
            return "%s[%s:%s%s]" % (e, a, b, c)
        if r < 0.45:
            return "%s.%s" % (e, self.r.choice(METHODS))
        if r < 0.5:
            return "%s.%s" % (e, self.r.choice(["role", "content", "k", "upper", "zz", "b"]))
        return e

    def filt(self, e):
        if self.r.random() < 0.5:
            return "%s|%s" % (e, self.r.choice(FILTERS0))
        name, args = self.r.choice(FILTERS1)
        if args:
            return "%s|%s(%s)" % (e, name, self.r.choice(args))
        return "%s|%s" % (e, name)

    def expr(self, depth=0):
        if depth > 3:
            return self.atom()
        r = self.r.random()
        if r < 0.3:
            return self.postfix(self.atom())
        if r < 0.5:
            return self.filt(self.expr(depth + 1))
        if r < 0.6:
            return "%s is %s%s" % (self.postfix(self.atom()), self.r.choice(["", "not "]),
                                   self.r.choice(TESTS))
        if r < 0.8:
            return "(%s %s %s)" % (self.expr(depth + 1), self.r.choice(OPS), self.expr(depth + 1))
        if r < 0.85:
            return "not %s" % self.expr(depth + 1)
        if r < 0.9:
            return "(%s if %s else %s)" % (self.expr(depth + 1), self.expr(depth + 1),
                                           self.expr(depth + 1))
        if r < 0.93:
            return "(%s if %s)" % (self.expr(depth + 1), self.expr(depth + 1))
        if r < 0.96:
            return "-%s" % self.atom()
        return "range(%s)|list" % self.r.choice(["3", "1, 4", "5, 0, -2", "0"])

    def ws(self):
        return self.r.choice(["", "", "-", "+"])

    def stmt(self, depth=0):
        r = self.r.random()
        o, c = "{%" + self.ws(), self.ws().replace("+", "") + "%}"
        text = self.r.choice(["", "", "x", " ", "\n", "  \n  ", "\t", "ab\n"])
        if depth > 2 or r < 0.35:
            v = "{{" + self.ws().replace("+", "") + " " + self.expr() + " " + \
                self.ws().replace("+", "") + "}}"
            return text + v
        if r < 0.5:
            return "%s%s if %s %s%s%s%s else %s%s%s endif %s" % (
                text, o, self.expr(), c, self.stmt(depth + 1), o, "", c, self.stmt(depth + 1), o, c)
        if r < 0.65:
            target = self.r.choice(["x", "x", "k, v"])
            it = self.r.choice(["l", "msgs", "s", "d", "d.items()", "range(3)", "[]", "undef",
                                "msgs|selectattr('role', 'equalto', 'user')", "[[1, 2], [3, 4]]"])
            cond = self.r.choice(["", "", " if x", " if loop is defined"])
            body = self.r.choice(["{{ x }}", "{{ loop.index }}/{{ loop.length }}",
                                  "{{ loop.first }}{{ loop.last }}{{ loop.revindex0 }}",
                                  "{{ loop.previtem }}|{{ loop.nextitem }}",
                                  "{{ loop.cycle('a', 'b') }}", "{% set y = x %}{{ y }}",
                                  "{% if loop.index > 1 %}{% break %}{% endif %}{{ x }}",
                                  "{% if loop.first %}{% continue %}{% endif %}{{ x }}",
                                  "{{ k }}={{ v }}"]) + self.stmt(depth + 1)
            els = self.r.choice(["", "{% else %}E"])
            return "%s%s for %s in %s%s %s%s%s%s endfor %s" % (text, o, target, it, cond, c, body,
                                                                els, o, c)
        if r < 0.75:
            return "%s%s set %s = %s %s{{ %s }}" % (text, o, "y", self.expr(), c, "y")
        if r < 0.8:
            return ("{% set ns = namespace(a=0) %}{% for x in l %}{% set ns.a = ns.a + 1 %}"
                    "{% endfor %}{{ ns.a }}" + self.stmt(depth + 1))
        if r < 0.85:
            return ("{%% macro m(a, b=%s) %%}[{{ a }}|{{ b }}{{ varargs }}]{%% endmacro %%}"
                    "{{ m(%s) }}{{ m(1, 2, 3) }}{{ m(b=%s, a=0) }}" % (
                        self.atom(), self.expr(), self.atom()))
        if r < 0.9:
            return "{%% set z %%}%s{%% endset %%}[{{ z }}]" % self.stmt(depth + 1)
        if r < 0.93:
            return "{%% filter upper %%}%s{%% endfilter %%}" % self.stmt(depth + 1)
        if r < 0.96:
            return "{# c #}%s{#- c -#}\n  %s" % (text, self.stmt(depth + 1))
        return "{%% raw %%}{{ %s }}{%% endraw %%}" % self.atom()

    def template(self):
        return "".join(self.stmt() for _ in range(self.r.randint(1, 2)))
