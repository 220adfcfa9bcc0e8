#!/usr/bin/env bash
# Run one hr1 stage on every worker of a TPU VM slice: the same command on all hosts via gcloud.
# jax.distributed.initialize() is called by the stage itself on multi-host slices (it reads
# TPU_WORKER_HOSTNAMES); WORKDIR must be a filesystem all workers share (NFS/Filestore, or a
# GCS-fuse mount) because checkpoints are written collectively and rows/summaries by process 0.
#
# Usage: bash launch/tpu_pod.sh TPU_NAME ZONE STAGE CONFIG WORKDIR [--config.a.b=v ...]
#   e.g. bash launch/tpu_pod.sh hr1-v5p-64 us-east5-a grpo configs/qwen3_5_9b_grpo_tpu_v5p.py \
#        /mnt/shared/runs/grpo --config.train.init_checkpoint=/mnt/shared/runs/sft/final_params
# Env: PROJECT (gcloud project, optional), REPO_DIR (checkout path on the workers, default ~/hr1-jax),
#      SETUP=1 to run `DEVICE=tpu launch/setup.sh` on every worker first, HR1_BIN (the program each
#      worker runs, default .venv/bin/hr1).
# Each worker's output goes to WORKDIR/logs/rank<worker>.log; the exit status is nonzero when any
# worker fails (gcloud returns a failed worker's status).
set -euo pipefail
if [ $# -lt 5 ]; then
  sed -n '2,14p' "$0"; exit 2
fi
TPU_NAME=$1; ZONE=$2; STAGE=$3; CONFIG=$4; WORKDIR=$5; shift 5
REPO_DIR="${REPO_DIR:-~/hr1-jax}"   # unquoted in the remote command: ~ expands on the worker
PROJECT_FLAG=()
[ -n "${PROJECT:-}" ] && PROJECT_FLAG=(--project "$PROJECT")
# The worker's index in the slice, from its metadata server (what jax itself reads).
WORKER_ID='$(curl -sf -m 10 -H Metadata-Flavor:Google http://metadata.google.internal/computeMetadata/v1/instance/attributes/agent-worker-number || hostname)'
RUN=$(printf ' %q' "${HR1_BIN:-.venv/bin/hr1}" "$STAGE" --config="$CONFIG" --workdir="$WORKDIR" "$@")
REMOTE="cd $REPO_DIR"
[ "${SETUP:-0}" = "1" ] && REMOTE="$REMOTE && DEVICE=tpu bash launch/setup.sh"
REMOTE="$REMOTE && HR1_RANK=$WORKER_ID HR1_PROGRESS=1 bash launch/run_rank.sh $(printf %q "$WORKDIR/logs")$RUN"
exec gcloud compute tpus tpu-vm ssh "$TPU_NAME" --zone "$ZONE" "${PROJECT_FLAG[@]}" --worker=all --command "$REMOTE"
