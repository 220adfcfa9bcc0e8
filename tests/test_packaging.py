"""The wheel (a non-editable `pip install .`) carries the configs and the shipped data, and
building it prints no setuptools package-discovery warnings."""
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHIPPED = ["hr1_jax/configs/default.py", "hr1_jax/configs/demo.py", "hr1_jax/configs/qwen3_5_9b_grpo_8xgpu.py",
           "envs/dbbench/data/standard.jsonl", "envs/webshop/data/human_goals.json",
           "envs/alfworld/data/alfworld_json_2.1.1_tw-pddl.tar.xz",
           "envs/alfworld/data/splits/harness_r1_test_set.json",
           "hr1_jax/models/assets/engineer_spm.model", "hr1_jax/eval/baseline_patches/self_refine_webshop.json",
           "hr1_jax/patch/reference_patches/examples/webshop_patch.json"]


def _source_copy(dest):
    """The checkout's files (tracked and new, not ignored) copied to `dest`: the build writes build/ and
    *.egg-info, which must not land in a checkout others work in."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed: cannot list the checkout's files")
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True)
    if listed.returncode != 0:
        pytest.skip(f"not a git checkout: {listed.stderr.decode()[:200]}")
    for rel in filter(None, listed.stdout.decode().split("\0")):
        if os.path.isfile(os.path.join(REPO, rel)):
            os.makedirs(os.path.join(dest, os.path.dirname(rel)), exist_ok=True)
            shutil.copy2(os.path.join(REPO, rel), os.path.join(dest, rel))


def test_wheel_has_configs_and_data_and_builds_quietly(tmp_path):
    pytest.importorskip("setuptools", minversion="70.1")   # bdist_wheel built in: no `wheel` package needed
    src, out = tmp_path / "src", tmp_path / "wheel"
    _source_copy(src)
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(out),
                        str(src)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "is absent from the `packages` configuration" not in r.stdout + r.stderr
    (wheel,) = out.glob("hr1_jax-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert [p for p in SHIPPED if p not in names] == []
