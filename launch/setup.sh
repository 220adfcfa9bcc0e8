#!/usr/bin/env bash
# Idempotent set-up for a fresh machine: .venv with the package (+ extras), system services the
# benchmarks need (MariaDB from Debian when missing), and the shipped data unpacked.
# Usage: bash launch/setup.sh [EXTRAS]   (EXTRAS default "test,alfworld,eval")
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS="${1:-test,alfworld,eval}"
PY="${PYTHON:-python3}"

if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv"
  "$PY" -m venv .venv
fi
stamp=".venv/.hr1-installed-$(cat setup.py | sha1sum | cut -c1-12)-${EXTRAS//,/_}"
if [ ! -f "$stamp" ]; then
  echo "[setup] installing hr1_jax[$EXTRAS] (first time: a few minutes)"
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -e ".[${EXTRAS}]"
  touch "$stamp"
fi

# System packages from Debian: MariaDB for DBBench (a real server; the project's scripts start and
# stop it) and Chromium, which the report test uses to render report.html headless.
missing=()
command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || missing+=(mariadb-server)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "[setup] installing ${missing[*]} from Debian"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null) \
      || echo "[setup] WARNING: could not install ${missing[*]}; DBBench falls back to SQLite, report render test skips"
  else
    echo "[setup] WARNING: ${missing[*]} missing and not root; DBBench falls back to SQLite, report render test skips"
  fi
fi

# Shipped data that needs unpacking (ALFWorld game files).
if [ -f envs/alfworld/unpack.py ]; then
  .venv/bin/python -m envs.alfworld.unpack
fi
