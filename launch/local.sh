#!/usr/bin/env bash
# Run one hr1 stage on this machine (CPU, or the local accelerators) after the idempotent set-up.
# Usage: [DEVICE=cpu|tpu|cuda] bash launch/local.sh STAGE CONFIG WORKDIR [--config.a.b=v ...]
#   e.g. bash launch/local.sh sft configs/demo.py runs/sft --config.train.sft_rows=runs/demo/rows/sft_rows.jsonl
# Env: HR1_EXTRAS (set-up extras, default per DEVICE), SETUP=0 to skip the set-up, HR1_BIN (the
#      program run, default .venv/bin/hr1). Output also goes to WORKDIR/logs/rank0.log.
set -euo pipefail
if [ $# -lt 3 ]; then
  sed -n '2,6p' "$0"; exit 2
fi
cd "$(dirname "$0")/.."
if [ "${SETUP:-1}" = "1" ]; then
  bash launch/setup.sh ${HR1_EXTRAS:+"$HR1_EXTRAS"} >/dev/null
fi
STAGE=$1; CONFIG=$2; WORKDIR=$3; shift 3
export HR1_JAX_CACHE_DIR="${HR1_JAX_CACHE_DIR:-$PWD/.cache/jax}"
export JAX_COMPILATION_CACHE_DIR="${JAX_COMPILATION_CACHE_DIR:-$HR1_JAX_CACHE_DIR}"
exec bash launch/run_rank.sh "$WORKDIR/logs" "${HR1_BIN:-.venv/bin/hr1}" "$STAGE" --config="$CONFIG" \
  --workdir="$WORKDIR" "$@"
