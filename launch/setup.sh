#!/usr/bin/env bash
# Idempotent set-up for a fresh machine: .venv with the package (+ extras), system services the
# benchmarks need (MariaDB from Debian when missing), and the shipped data unpacked.
# Usage: [DEVICE=cpu|tpu|cuda] bash launch/setup.sh [EXTRAS]
#   DEVICE=cpu (default): EXTRAS default "test,alfworld,eval", the CPU jaxlib.
#   DEVICE=tpu / cuda: the matching accelerator extra (jax's TPU / CUDA 12 runtime) is added;
#   EXTRAS default "alfworld,eval": `test` (torch, several GB on an accelerator host) only when named.
set -euo pipefail
cd "$(dirname "$0")/.."
DEVICE="${DEVICE:-cpu}"
case "$DEVICE" in
  cpu) EXTRAS="${1:-test,alfworld,eval}" ;;
  tpu|cuda) EXTRAS="${1:-alfworld,eval},$DEVICE" ;;
  *) echo "[setup] ERROR: DEVICE must be cpu, tpu or cuda (got '$DEVICE')" >&2; exit 2 ;;
esac

if [ ! -x .venv/bin/python ]; then
  # PYTHON chooses the interpreter; else launch/pick_python.sh prefers a faster build of 3.11.
  PY="${PYTHON:-$(bash launch/pick_python.sh)}"
  echo "[setup] creating .venv with $PY"
  if ! "$PY" -m venv .venv; then
    if [ -n "${PYTHON:-}" ] || [ "$PY" = python3 ]; then
      exit 1
    fi
    echo "[setup] $PY could not create a venv; creating it with python3"
    rm -rf .venv
    python3 -m venv .venv
  fi
fi
stamp=".venv/.hr1-installed-$(cat setup.py | sha1sum | cut -c1-12)-${EXTRAS//,/_}"
if [ ! -f "$stamp" ]; then
  echo "[setup] installing hr1_jax[$EXTRAS] (first time: a few minutes)"
  .venv/bin/pip install -q --upgrade pip
  # setuptools prints a multi-line note for every editable install of this layout; it is not a problem.
  PYTHONWARNINGS="ignore:Editable installation" .venv/bin/pip install -q -e ".[${EXTRAS}]"
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
