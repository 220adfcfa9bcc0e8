#!/usr/bin/env bash
# Prints the interpreter launch/setup.sh makes .venv with (when PYTHON is not set): the first
# Python 3.11 on PATH whose executable has libpython linked in, else the first python3.11 on PATH,
# else python3. Distribution builds link libpython in (Debian's is also built with PGO and LTO);
# hook calls and patch validation are pure Python and took 0.75-0.93x as long on Debian 12's
# python3.11 as on a pyenv build with a shared libpython (benchmarks/README.md, "Which CPython runs
# it"). Where /proc/self/maps does not exist (not Linux) no build is preferred.
set -uo pipefail
linked_in='import sys, venv; assert sys.version_info[:2] == (3, 11); assert "libpython" not in open("/proc/self/maps").read()'
any_311='import sys, venv; assert sys.version_info[:2] == (3, 11)'
for probe in "$linked_in" "$any_311"; do
  for cand in $(type -ap python3.11) $(type -ap python3); do
    if "$cand" -c "$probe" >/dev/null 2>&1; then
      echo "$cand"
      exit 0
    fi
  done
done
echo python3
