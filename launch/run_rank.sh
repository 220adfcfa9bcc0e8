#!/usr/bin/env bash
# Run one rank's command, append its output to LOG_DIR/rank<N>.log, and exit with the command's own
# status: with pipefail, so a crashed rank is never reported as tee's success.
# Usage: bash launch/run_rank.sh LOG_DIR CMD [ARG...]
#   rank: $HR1_RANK, else $SLURM_PROCID, else $TPU_WORKER_ID, else 0 (one host)
set -euo pipefail
if [ $# -lt 2 ]; then
  sed -n '2,5p' "$0"; exit 2
fi
LOG_DIR=$1; shift
source "$(dirname "$0")/host_env.sh"
export HR1_RANK="${HR1_RANK:-${SLURM_PROCID:-${TPU_WORKER_ID:-0}}}"
LOG="$LOG_DIR/rank$HR1_RANK.log"
mkdir -p "$LOG_DIR"
# Appended, not replaced: a resumed stage keeps the log of the attempt that crashed.
echo "[hr1] rank $HR1_RANK on $(hostname) at $(date -u +%FT%TZ): $*" >>"$LOG"
status=0
"$@" 2>&1 | tee -a "$LOG" || status=$?
if [ "$status" -ne 0 ]; then
  echo "[hr1] rank $HR1_RANK failed with exit status $status (log: $LOG)" | tee -a "$LOG" >&2
fi
exit "$status"
