"""`hr1 baseline` without a patch is reproducible run to run, on every benchmark.

The same small baseline runs twice in separate `hr1` processes that differ in everything that must
not matter: PYTHONHASHSEED (string hashes, set order), the number of workers (which worker's warm
environment plays which task, after which others) and the batch split. Every per-task result
(reward, status, actions, the whole trajectory, identity) must be identical; only wall times may
differ. Nothing here depends on how fast the machine is.
"""
import glob
import json
import os
import subprocess
import sys

import pytest

from hr1_jax.config import parse_tasks
from hr1_jax.rollout.batches import read_results
from hr1_jax.rollout.pool import INFRA_ERROR

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUNS = ({"hash_seed": "1", "workers": 1, "batch_size": 4},
        {"hash_seed": "2", "workers": 2, "batch_size": 3})
TIMING = ("wall_s",)
DBBENCH_TASKS = "0:8"          # test task 2 queries a table name that does not exist

CASES = [
    pytest.param("webshop", "test", "0:6", [], id="webshop"),
    pytest.param("dbbench", "test", DBBENCH_TASKS, ["--config.dbbench.backend=sqlite"], id="dbbench-sqlite"),
    # two early failures (three identical actions) and a 13-step success
    pytest.param("alfworld", "dev", "4,5,7", [], id="alfworld", marks=pytest.mark.alfworld),
]


def _start(workdir, benchmark: str, args: list[str], run: dict) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "hr1_jax.cli", "baseline", f"--workdir={workdir}",
           f"--config.benchmark={benchmark}", *args, f"--config.rollout.num_workers={run['workers']}",
           f"--config.rollout.batch_size={run['batch_size']}"]
    env = dict(os.environ, PYTHONHASHSEED=run["hash_seed"], HR1_PROGRESS="0")
    return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _episodes(workdir, benchmark: str) -> dict[int, dict]:
    folders = sorted(glob.glob(os.path.join(workdir, "baseline", benchmark, "batch_*")))
    return {ep["task_id"]: {k: v for k, v in ep.items() if k not in TIMING}
            for folder in folders for ep in read_results(folder)}


def run_twice(tmp_path, benchmark: str, split: str, tasks: str, args: list[str]) -> list[dict[int, dict]]:
    """Both runs at once (separate processes): per-task results of each, keyed by task id."""
    args = [f"--config.split={split}", f"--config.tasks={tasks}", *args]
    workdirs = [tmp_path / f"run{i}" for i in range(len(RUNS))]
    procs = [_start(w, benchmark, args, run) for w, run in zip(workdirs, RUNS)]
    for proc in procs:
        _, err = proc.communicate(timeout=600)      # a hang guard only
        assert proc.returncode == 0, err[-3000:]
    runs = [_episodes(w, benchmark) for w in workdirs]
    assert [sorted(r) for r in runs] == [parse_tasks(tasks)] * len(RUNS)
    return runs


def _first_difference(a: dict, b: dict) -> str:
    key = next(k for k in a if a[k] != b.get(k))
    if key == "trajectory":
        i = next((i for i, (x, y) in enumerate(zip(a[key], b[key])) if x != y), min(len(a[key]), len(b[key])))
        return f"trajectory[{i}]: {a[key][i:i + 1]} != {b[key][i:i + 1]}"
    return f"{key}: {a[key]!r} != {b.get(key)!r}"


def assert_same_results(first: dict, second: dict) -> None:
    for tid in sorted(first):
        a, b = first[tid], second[tid]
        assert a["status"] != INFRA_ERROR, a["error"]   # two failed runs would agree trivially
        assert (a["reward"], a["status"], a["actions"]) == (b["reward"], b["status"], b["actions"]), f"task {tid}"
        assert a == b, f"task {tid}: {_first_difference(a, b)}"


@pytest.mark.parametrize("benchmark,split,tasks,args", CASES)
def test_baseline_is_identical_across_hash_seeds_worker_counts_and_batch_splits(tmp_path, benchmark, split,
                                                                                 tasks, args):
    if benchmark == "alfworld":
        pytest.importorskip("alfworld")
    assert_same_results(*run_twice(tmp_path, benchmark, split, tasks, args))


@pytest.mark.mariadb
def test_dbbench_mariadb_baseline_is_identical(tmp_path, throwaway_mariadb):
    # Each episode's database has a random name; the agent sees it as `dbbench` only.
    args = ["--config.dbbench.backend=mariadb", f"--config.dbbench.port={throwaway_mariadb.port}"]
    assert_same_results(*run_twice(tmp_path, "dbbench", "test", DBBENCH_TASKS, args))
