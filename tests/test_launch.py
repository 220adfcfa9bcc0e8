"""Launchers fail loudly: a failing rank makes tpu_pod.sh / slurm_gpu.sbatch / local.sh exit nonzero,
and every rank's output lands in WORKDIR/logs/rank<N>.log. gcloud, srun and the TPU metadata server
are replaced by fakes on PATH that run the launcher's real per-worker command locally (two ranks);
the stage is a fake program (HR1_BIN) that fails on the ranks named in FAIL_RANKS.
Also: the DEVICE switch of launch/setup.sh picks the right extras (pip is a recording fake)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

FAKE_STAGE = """#!/usr/bin/env bash
echo "stage $1 on rank $HR1_RANK: $*"
case ",${FAIL_RANKS:-}," in *",$HR1_RANK,"*) echo "boom on rank $HR1_RANK" >&2; exit 7 ;; esac
"""

# Like gcloud's --worker=all: the command on every worker at once; a failed worker's status is returned.
FAKE_GCLOUD = """#!/usr/bin/env bash
cmd=""; all=0
while [ $# -gt 0 ]; do
  case "$1" in --command) cmd=$2; shift ;; --worker=all) all=1 ;; esac
  shift
done
[ "$all" = 1 ] && [ -n "$cmd" ] || { echo "fake gcloud: expected --worker=all --command" >&2; exit 64; }
pids=()
for w in 0 1; do FAKE_WORKER_ID=$w bash -c "$cmd" & pids+=($!); done
status=0
for p in "${pids[@]}"; do wait "$p" || status=$?; done
exit $status
"""

FAKE_CURL = """#!/usr/bin/env bash
case "$*" in *agent-worker-number*) echo "$FAKE_WORKER_ID" ;; *) exit 22 ;; esac
"""

# Like srun: the command once per task (SLURM_NTASKS) with its SLURM_PROCID; nonzero if any task failed.
FAKE_SRUN = """#!/usr/bin/env bash
while [[ "$1" == --* ]]; do shift; done
pids=()
for ((i = 0; i < SLURM_NTASKS; i++)); do SLURM_PROCID=$i "$@" & pids+=($!); done
status=0
for p in "${pids[@]}"; do wait "$p" || status=$?; done
exit $status
"""


def _write_exe(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


@pytest.fixture
def fakes(tmp_path):
    bin_dir = tmp_path / "bin"
    for name, text in {"gcloud": FAKE_GCLOUD, "curl": FAKE_CURL, "srun": FAKE_SRUN}.items():
        _write_exe(bin_dir / name, text)
    stage = _write_exe(tmp_path / "fake_hr1", FAKE_STAGE)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "HR1_RANK", "TPU_WORKER"))}
    env.update(PATH=f"{bin_dir}:{env['PATH']}", HR1_BIN=str(stage), REPO_DIR=str(REPO),
               SLURM_SUBMIT_DIR=str(REPO), SLURM_NTASKS="2")
    return env


def _run(cmd, env, fail_ranks: str):
    return subprocess.run(cmd, cwd=REPO, env={**env, "FAIL_RANKS": fail_ranks}, capture_output=True,
                          text=True, timeout=60)


def _launch(launcher: str, workdir: Path) -> list[str]:
    if launcher == "tpu_pod":
        return ["bash", "launch/tpu_pod.sh", "fake-tpu", "fake-zone", "grpo", "configs/x.py", str(workdir),
                "--config.seed=3"]
    return ["bash", "launch/slurm_gpu.sbatch", "grpo", "configs/x.py", str(workdir), "--config.seed=3"]


@pytest.mark.parametrize("launcher", ["tpu_pod", "slurm"])
def test_one_failing_rank_fails_the_launch_and_both_ranks_log(fakes, tmp_path, launcher):
    workdir = tmp_path / "run dir"  # a space: the remote command must quote it
    proc = _run(_launch(launcher, workdir), fakes, fail_ranks="1")
    assert proc.returncode == 7, proc.stderr
    rank0 = (workdir / "logs" / "rank0.log").read_text()
    rank1 = (workdir / "logs" / "rank1.log").read_text()
    assert f"stage grpo on rank 0: grpo --config=configs/x.py --workdir={workdir} --config.seed=3" in rank0
    assert "failed" not in rank0
    assert "boom on rank 1" in rank1 and "rank 1 failed with exit status 7" in rank1
    assert "rank 1 failed" in proc.stderr


@pytest.mark.parametrize("launcher", ["tpu_pod", "slurm"])
def test_all_ranks_succeeding_exits_zero(fakes, tmp_path, launcher):
    proc = _run(_launch(launcher, tmp_path / "run"), fakes, fail_ranks="")
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (tmp_path / "run" / "logs").iterdir()) == ["rank0.log", "rank1.log"]


@pytest.mark.parametrize("fail_ranks, status", [("0", 7), ("", 0)])
def test_local_exit_status_and_log(fakes, tmp_path, fail_ranks, status):
    cmd = ["bash", "launch/local.sh", "sft", "configs/x.py", str(tmp_path / "run")]
    proc = _run(cmd, {**fakes, "SETUP": "0"}, fail_ranks=fail_ranks)
    assert proc.returncode == status, proc.stderr
    assert "stage sft on rank 0" in (tmp_path / "run" / "logs" / "rank0.log").read_text()


def test_run_rank_on_false_is_nonzero_and_logged(tmp_path):
    proc = subprocess.run(["bash", "launch/run_rank.sh", str(tmp_path), "false"], cwd=REPO, capture_output=True,
                          text=True, timeout=30, env={**os.environ, "HR1_RANK": "5"})
    assert proc.returncode == 1
    assert "rank 5 failed with exit status 1" in (tmp_path / "rank5.log").read_text()


# --- launch/setup.sh DEVICE switch, in a copy of the checkout with a recording pip ---------------------

@pytest.fixture
def setup_copy(tmp_path):
    shutil.copy(REPO / "launch" / "setup.sh", _write_exe(tmp_path / "launch" / "setup.sh", ""))
    shutil.copy(REPO / "setup.py", tmp_path / "setup.py")
    _write_exe(tmp_path / ".venv" / "bin" / "python", "#!/bin/sh\nexit 0\n")
    _write_exe(tmp_path / ".venv" / "bin" / "pip", f'#!/bin/sh\necho "$*" >> {tmp_path}/pip.log\n')
    # Present system tools, so no apt-get is attempted.
    for tool in ("mariadbd", "chromium"):
        _write_exe(tmp_path / "bin" / tool, "#!/bin/sh\n")
    return tmp_path


def _setup(copy: Path, device: str | None, *extras: str):
    env = {**os.environ, "PATH": f"{copy / 'bin'}:{os.environ['PATH']}"}
    env.pop("DEVICE", None)
    if device:
        env["DEVICE"] = device
    return subprocess.run(["bash", str(copy / "launch" / "setup.sh"), *extras], env=env, capture_output=True,
                          text=True, timeout=30)


@pytest.mark.parametrize("device, extras, spec", [
    (None, (), ".[test,alfworld,eval]"),
    ("cpu", ("test",), ".[test]"),
    ("tpu", (), ".[alfworld,eval,tpu]"),
    ("cuda", (), ".[alfworld,eval,cuda]"),
    ("cuda", ("test,eval",), ".[test,eval,cuda]"),
])
def test_setup_device_switch_installs_matching_extras(setup_copy, device, extras, spec):
    proc = _setup(setup_copy, device, *extras)
    assert proc.returncode == 0, proc.stderr
    installs = [line for line in (setup_copy / "pip.log").read_text().splitlines() if " -e " in line]
    assert installs == [f"install -q -e {spec}"]


def test_setup_rejects_unknown_device(setup_copy):
    proc = _setup(setup_copy, "gpu")
    assert proc.returncode == 2 and "DEVICE must be cpu, tpu or cuda" in proc.stderr
    assert not (setup_copy / "pip.log").exists()
