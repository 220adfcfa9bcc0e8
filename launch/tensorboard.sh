#!/usr/bin/env bash
# TensorBoard over a run folder (no TensorFlow needed: the event files are written with
# TensorBoard's own protos). Usage: bash launch/tensorboard.sh [LOGDIR] [PORT]
#   LOGDIR default runs/ (a demo writes WORKDIR/tensorboard/{sft,grpo,eval}); HOST=0.0.0.0 to expose.
set -euo pipefail
cd "$(dirname "$0")/.."
LOGDIR="${1:-runs}"; PORT="${2:-6006}"
exec .venv/bin/tensorboard --logdir "$LOGDIR" --port "$PORT" --host "${HOST:-127.0.0.1}"
