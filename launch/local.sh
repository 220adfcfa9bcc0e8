#!/usr/bin/env bash
# Run one hr1 stage on this machine (CPU, or the local accelerators) after the idempotent set-up.
# Usage: bash launch/local.sh STAGE CONFIG WORKDIR [--config.a.b=v ...]
#   e.g. bash launch/local.sh sft configs/demo.py runs/sft --config.train.sft_rows=runs/demo/rows/sft_rows.jsonl
set -euo pipefail
if [ $# -lt 3 ]; then
  sed -n '2,4p' "$0"; exit 2
fi
cd "$(dirname "$0")/.."
bash launch/setup.sh "${HR1_EXTRAS:-test,alfworld,eval}" >/dev/null
STAGE=$1; CONFIG=$2; WORKDIR=$3; shift 3
export HR1_JAX_CACHE_DIR="${HR1_JAX_CACHE_DIR:-$PWD/.cache/jax}"
export JAX_COMPILATION_CACHE_DIR="${JAX_COMPILATION_CACHE_DIR:-$HR1_JAX_CACHE_DIR}"
exec .venv/bin/hr1 "$STAGE" --config="$CONFIG" --workdir="$WORKDIR" "$@"
