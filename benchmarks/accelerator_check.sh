#!/usr/bin/env bash
# One-command accelerator check on one chip (≤ 8 min on an H100/H200-class GPU, of it ≤ 2 min
# compiling): train-step tokens/s + MFU, sampler decode tokens/s at batch 8 and 32 (2048-token
# prompt, 1024 new tokens), peak memory, and the same in transformers PyTorch as the ratio.
# Without an accelerator (or with --tiny) it runs at a tiny size on CPU.
# Usage: bash benchmarks/accelerator_check.sh [--tiny] [--model 9b|4b|4b_16l|4b_8l] [--param-dtype float32]
#        [--scan-layers auto|on|off] [--peak-tflops X]
# Env: OUT_DIR (default runs/accelerator_check: jax.json, torch.json, report.txt), PYTHON (default
#      .venv/bin/python), JAX_PART_TIMEOUT / TORCH_PART_TIMEOUT (seconds, default 300 / 150).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT_DIR="${OUT_DIR:-runs/accelerator_check}"
PY="${PYTHON:-.venv/bin/python}"
mkdir -p "$OUT_DIR"
rm -f "$OUT_DIR/jax.json" "$OUT_DIR/torch.json"
# One chip: the first GPU (JAX would otherwise take memory on every visible GPU), most of its memory.
export CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}"
export XLA_PYTHON_CLIENT_MEM_FRACTION="${XLA_PYTHON_CLIENT_MEM_FRACTION:-0.92}"
export JAX_COMPILATION_CACHE_DIR="${JAX_COMPILATION_CACHE_DIR:-$PWD/.cache/jax}"

# Each part saves what it has measured so far: a part stopped by its time limit still reports.
jax_status=0
timeout "${JAX_PART_TIMEOUT:-300}" "$PY" benchmarks/accelerator_check.py jax --out "$OUT_DIR/jax.json" "$@" \
  || jax_status=$?
if [ ! -f "$OUT_DIR/jax.json" ]; then
  echo "[check] the jax part measured nothing (exit $jax_status)" >&2
  exit 1
fi
# After JAX has exited, so each framework has the chip's memory to itself.
timeout "${TORCH_PART_TIMEOUT:-150}" "$PY" benchmarks/accelerator_check.py torch --plan "$OUT_DIR/jax.json" \
  --out "$OUT_DIR/torch.json" || echo "[check] the torch part failed or timed out (exit $?)" >&2
"$PY" benchmarks/accelerator_check.py report "$OUT_DIR/jax.json" "$OUT_DIR/torch.json" | tee "$OUT_DIR/report.txt"
# A jax part that stopped early still fails the check, after its partial report.
exit "$jax_status"
