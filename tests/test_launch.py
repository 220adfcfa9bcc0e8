"""Launchers fail loudly: a failing rank makes tpu_pod.sh / slurm_gpu.sbatch / local.sh exit nonzero,
and every rank's output lands in WORKDIR/logs/rank<N>.log. gcloud, srun and the TPU metadata server
are replaced by fakes on PATH that run the launcher's real per-worker command locally (two ranks);
the stage is a fake program (HR1_BIN) that fails on the ranks named in FAIL_RANKS.
Also: the DEVICE switch of launch/setup.sh picks the right extras (pip is a recording fake)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
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


# --- launch/pick_python.sh and the venv setup.sh makes with it, with fake interpreters on PATH -------------

def _fake_python(path: Path, *, linked_in: bool, is_311: bool = True, venv_ok: bool = True) -> Path:
    """A stand-in interpreter: answers pick_python.sh's probes as such a build would, and `-m venv DIR`
    makes a venv whose python succeeds and whose pip records its arguments, or fails (venv_ok)."""
    linked_rc = 0 if (linked_in and is_311) else 1
    any_rc = 0 if is_311 else 1
    venv = (f'mkdir -p "$3/bin" && printf "#!/bin/sh\\nexit 0\\n" > "$3/bin/python" && '
            f'printf "#!/bin/sh\\necho \\"\\$*\\" >> $3/../pip.log\\n" > "$3/bin/pip" && '
            f'chmod +x "$3/bin/python" "$3/bin/pip" && echo "$0" > "$3/../venv_by" && exit 0') if venv_ok else "exit 1"
    return _write_exe(path, f"""#!/bin/sh
case "$1" in
  -c) case "$2" in *libpython*) exit {linked_rc} ;; *) exit {any_rc} ;; esac ;;
  -m) [ "$2" = venv ] || exit 2; {venv} ;;
esac
exit 3
""")


def _pick(path_dirs: list[Path]) -> str:
    proc = subprocess.run(["/bin/bash", str(REPO / "launch" / "pick_python.sh")], capture_output=True, text=True,
                          env={**os.environ, "PATH": ":".join(map(str, path_dirs))}, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_pick_python_prefers_a_linked_in_311_then_any_311_then_python3(tmp_path):
    shared = _fake_python(tmp_path / "a" / "python3.11", linked_in=False)
    linked = _fake_python(tmp_path / "b" / "python3.11", linked_in=True)
    _fake_python(tmp_path / "c" / "python3", linked_in=True, is_311=False)
    dirs = [tmp_path / d for d in "abc"]
    assert _pick(dirs) == str(linked)
    assert _pick([dirs[0], dirs[2]]) == str(shared)    # no linked-in build: any 3.11 before python3
    assert _pick([dirs[2]]) == "python3"                # no 3.11 at all


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="the probe reads /proc/self/maps (Linux)")
def test_pick_python_probe_on_this_interpreter(tmp_path):
    """The real probe, run by the interpreter running this test: taken only if its libpython is
    linked in (else the later fake linked-in build is)."""
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "python3.11").symlink_to(sys.executable)
    fake = _fake_python(tmp_path / "fake" / "python3.11", linked_in=True)
    with open("/proc/self/maps") as maps:
        linked_here = "libpython" not in maps.read() and sys.version_info[:2] == (3, 11)
    expected = str(tmp_path / "real" / "python3.11") if linked_here else str(fake)
    assert _pick([tmp_path / "real", tmp_path / "fake"]) == expected


def _setup_without_venv(setup_copy: Path, pythons: dict, extra_env: dict | None = None):
    shutil.rmtree(setup_copy / ".venv")
    shutil.copy(REPO / "launch" / "pick_python.sh", setup_copy / "launch" / "pick_python.sh")
    for name, kwargs in pythons.items():
        _fake_python(setup_copy / "pybin" / name, **kwargs)
    env = {"PATH": f"{setup_copy / 'pybin'}:{setup_copy / 'bin'}:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/")}
    return subprocess.run(["/bin/bash", str(setup_copy / "launch" / "setup.sh"), "test"], capture_output=True,
                          text=True, timeout=30, env={**env, **(extra_env or {})})


def test_setup_makes_the_venv_with_the_picked_python(setup_copy):
    proc = _setup_without_venv(setup_copy, {"python3.11": dict(linked_in=True)})
    assert proc.returncode == 0, proc.stderr
    assert (setup_copy / "venv_by").read_text().strip() == str(setup_copy / "pybin" / "python3.11")
    assert "install -q -e .[test]" in (setup_copy / "pip.log").read_text()


def test_setup_falls_back_to_python3_when_the_picked_python_cannot_make_a_venv(setup_copy):
    proc = _setup_without_venv(setup_copy, {"python3.11": dict(linked_in=True, venv_ok=False),
                                            "python3": dict(linked_in=False, is_311=False)})
    assert proc.returncode == 0, proc.stderr
    assert "could not create a venv; creating it with python3" in proc.stdout
    assert (setup_copy / "venv_by").read_text().strip() == str(setup_copy / "pybin" / "python3")


def test_setup_stops_when_the_named_python_cannot_make_a_venv(setup_copy):
    proc = _setup_without_venv(setup_copy, {"python3.11": dict(linked_in=True, venv_ok=False),
                                            "python3": dict(linked_in=False)},
                               {"PYTHON": "python3.11"})
    assert proc.returncode != 0
    assert not (setup_copy / "venv_by").exists() and not (setup_copy / "pip.log").exists()
