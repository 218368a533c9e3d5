#!/bin/sh
# run_compare.sh TOOL FIXTURES -- run compare.py with a python3 that has
# jinja2: Debian's first (/usr/bin/python3, python3-jinja2 from
# scripts/setup.sh), then every python3 on PATH. Exit 77 (skipped) only
# when none has it.
set -u
here=$(dirname "$0")
for py in /usr/bin/python3 $(command -v -a python3 2>/dev/null) python3.11; do
  [ -x "$py" ] || py=$(command -v "$py" 2>/dev/null) || continue
  [ -n "$py" ] || continue
  if "$py" -c 'import jinja2' 2>/dev/null; then
    exec "$py" "$here/compare.py" "$@"
  fi
done
echo "SKIP: no python3 with jinja2 found (install python3-jinja2: scripts/setup.sh)"
exit 77
