#!/usr/bin/env bash
# A Ray cluster of rollout machines beside the training hosts (rollout.backend=ray): rerun workers
# run as Ray actors on CPU machines that carry the custom resource `hr1_rollout`; the TPU (or GPU)
# hosts join with no CPUs to offer, so no actor ever lands on a learner, and their training
# processes attach as drivers (rollout.ray_address=auto). Every node needs the same checkout at the
# same path with its .venv (`bash launch/setup.sh alfworld,eval,ray` on CPU nodes, DEVICE=tpu with
# the ray extra on TPU hosts) and, for DBBench on MariaDB, `bash launch/mariadb.sh start` per
# rollout node. Process 0 of a multi-host run scores each GRPO group once on the fleet and
# broadcasts the rewards; the reward cache (rollout.cache_dir) lives on process 0's disk.
#
# Usage: bash launch/ray_cluster.sh head [NUM_CPUS]              on the first rollout machine
#        bash launch/ray_cluster.sh worker HEAD_IP [NUM_CPUS]    on every further rollout machine
#        bash launch/ray_cluster.sh learner HEAD_IP              on a training host (no actors there)
#        bash launch/ray_cluster.sh tpu-pod TPU_NAME ZONE HEAD_IP  `learner` on every TPU worker (gcloud)
#        bash launch/ray_cluster.sh stop                         on any node
# Env: RAY_PORT (default 6379), REPO_DIR (checkout on the TPU workers, default ~/hr1-jax), PROJECT.
# Then run GRPO as usual (launch/tpu_pod.sh) with
#   --config.rollout.backend=ray --config.rollout.ray_address=auto \
#   --config.rollout.ray_resource=hr1_rollout --config.rollout.num_workers=<actors, <= fleet CPUs>
set -euo pipefail
cd "$(dirname "$0")/.."
RAY=.venv/bin/ray
PORT="${RAY_PORT:-6379}"
usage() { sed -n '2,20p' "$0"; exit 2; }
[ $# -ge 1 ] || usage
[ -x "$RAY" ] || { echo "[ray_cluster] $RAY missing: bash launch/setup.sh <extras>,ray first" >&2; exit 2; }
cpus() { echo "${1:-$(nproc)}"; }
case "$1" in
  head)
    n=$(cpus "${2:-}")
    exec "$RAY" start --head --port="$PORT" --num-cpus="$n" --resources="{\"hr1_rollout\": $n}" \
      --include-dashboard=false --disable-usage-stats ;;
  worker)
    [ $# -ge 2 ] || usage
    n=$(cpus "${3:-}")
    exec "$RAY" start --address="$2:$PORT" --num-cpus="$n" --resources="{\"hr1_rollout\": $n}" \
      --disable-usage-stats ;;
  learner)
    [ $# -ge 2 ] || usage
    exec "$RAY" start --address="$2:$PORT" --num-cpus=0 --num-gpus=0 --disable-usage-stats ;;
  tpu-pod)
    [ $# -ge 4 ] || usage
    PROJECT_FLAG=()
    [ -n "${PROJECT:-}" ] && PROJECT_FLAG=(--project "$PROJECT")
    exec gcloud compute tpus tpu-vm ssh "$2" --zone "$3" "${PROJECT_FLAG[@]}" --worker=all \
      --command "cd ${REPO_DIR:-~/hr1-jax} && RAY_PORT=$PORT bash launch/ray_cluster.sh learner $(printf %q "$4")" ;;
  stop)
    exec "$RAY" stop ;;
  *) usage ;;
esac
