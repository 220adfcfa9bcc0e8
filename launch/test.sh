#!/usr/bin/env bash
# Set up (idempotent) and run the test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash launch/setup.sh "test,alfworld,eval"
export HR1_JAX_CACHE_DIR="${HR1_JAX_CACHE_DIR:-$PWD/.cache/jax}"
exec .venv/bin/python -m pytest -q "$@"
