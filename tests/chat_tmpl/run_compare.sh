#!/bin/sh
# run_compare.sh TOOL FIXTURES [compare.py options] -- run compare.py with a
# python3 that has jinja2: Debian's first (/usr/bin/python3, python3-jinja2
# from scripts/setup.sh), then every python3 and python3.N on PATH. Exit 77
# (skipped) only when none has it.
set -u
here=${0%/*}
candidates=/usr/bin/python3
old_ifs=$IFS
IFS=:
for d in $PATH; do
  for name in python3 python3.13 python3.12 python3.11 python3.10 python3.9; do
    [ -x "$d/$name" ] && candidates="$candidates $d/$name"
  done
done
IFS=$old_ifs
for py in $candidates; do
  if [ -x "$py" ] && "$py" -c 'import jinja2' 2>/dev/null; then
    exec "$py" "$here/compare.py" "$@"
  fi
done
echo "SKIP: no python3 with jinja2 found among: $candidates"
echo "      (install Debian's python3-jinja2: scripts/setup.sh)"
exit 77
