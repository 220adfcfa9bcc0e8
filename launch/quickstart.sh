#!/usr/bin/env bash
# Set up (idempotent) and run the main job on the embedded default: baseline rollouts -> packets ->
# tokenizer -> teacher rows -> SFT -> GRPO -> held-out evaluation, on CPU, no downloads.
set -euo pipefail
cd "$(dirname "$0")/.."
bash launch/setup.sh "test,alfworld,eval"
WORKDIR="${WORKDIR:-runs/demo}"
source launch/host_env.sh
exec .venv/bin/hr1 demo --config=configs/demo.py --workdir="$WORKDIR" "$@"
