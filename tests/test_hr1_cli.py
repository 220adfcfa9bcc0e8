"""The `hr1` command line as a user meets it (real subprocesses): help for every stage, the stage's
default config, and bad input answered by one line and exit 2 with no traceback."""
import json
import os
import subprocess
import sys

import pytest

from hr1_jax.cli import STAGES

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def hr1(*args, cwd=None):
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=REPO)
    env.pop("HR1_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "hr1_jax.cli", *args], cwd=cwd or REPO, env=env,
                          capture_output=True, text=True, timeout=120)


def test_overview_lists_every_stage_with_its_summary():
    r = hr1("--help")
    assert r.returncode == 0, r.stderr
    for name, stage in STAGES.items():
        assert f"  {name}" in r.stdout and stage.summary in r.stdout


@pytest.mark.parametrize("name", list(STAGES))
def test_every_stage_has_help(name, tmp_path):
    stage = STAGES[name]
    r = hr1(name, "--help", cwd=tmp_path)   # not the repo: help must not depend on the cwd
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    assert "example:" in r.stdout and f"hr1 {name}" in r.stdout
    if stage.takes_config:
        assert stage.summary in r.stdout
        assert f"config sections read: {', '.join(stage.sections)}" in r.stdout
        assert all(f"--{flag}" in r.stdout for flag in stage.flags)
    else:
        assert "reads no config file" in r.stdout


def _parsed(stage, *args, cwd=REPO):
    """(config path, config dict) as the stage would run them (a fresh process per parse: absl
    flags are process-global)."""
    code = ("import json, sys; from hr1_jax import cli; "
            f"c, _, p = cli._parse_config_flags({stage!r}, cli.STAGES[{stage!r}], sys.argv[1:]); "
            "print(json.dumps([p, c.to_dict()], default=str))")
    r = subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True,
                       env=dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=REPO), timeout=120)
    assert r.returncode == 0, r.stderr
    path, config = json.loads(r.stdout)
    return path, config, r.stderr


def test_demo_runs_the_embedded_default_and_says_so(tmp_path):
    path, config, stderr = _parsed("demo", f"--workdir={tmp_path}")
    assert path.endswith(os.path.join("configs", "demo.py"))
    assert config["train"]["grpo"]["num_steps"] == 48 and config["model"]["vocab_size"] == 1024
    assert "hr1 demo: config" in stderr and "demo.py (this stage's default)" in stderr
    path, _, _ = _parsed("rollout", f"--workdir={tmp_path}")
    assert path.endswith(os.path.join("configs", "default.py"))


def test_shipped_config_by_name_from_any_cwd_and_overrides(tmp_path):
    path, config, stderr = _parsed("sft", "--config=qwen3_5_9b_sft_tpu_v5p", f"--workdir={tmp_path}",
                                   "--config.train.sft.lr=0.5", cwd=tmp_path)
    assert path.endswith(os.path.join("configs", "qwen3_5_9b_sft_tpu_v5p.py")) and "(given)" in stderr
    assert config["train"]["sft"]["lr"] == 0.5 and config["model"]["family"] == "qwen3_5_text"
    path, _, _ = _parsed("sft", "--config", "configs/demo.py", f"--workdir={tmp_path}", cwd=tmp_path)
    assert path.endswith(os.path.join("configs", "demo.py"))


def assert_one_line_error(r, stage, *fragments):
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith(f"hr1 {stage}: "), r.stderr
    for fragment in fragments:
        assert fragment in last, last


def test_unknown_config_key_names_the_closest(tmp_path):
    r = hr1("rollout", f"--workdir={tmp_path}", "--config.rollout.num_worker=2")
    assert_one_line_error(r, "rollout", "unknown config key config.rollout.num_worker",
                          "did you mean config.rollout.num_workers?")
    r = hr1("rollout", f"--workdir={tmp_path}", "--config.no_such_key=1")
    assert_one_line_error(r, "rollout", "unknown config key config.no_such_key")


def test_missing_config_file(tmp_path):
    r = hr1("sft", f"--workdir={tmp_path}", f"--config={tmp_path / 'nope.py'}")
    assert_one_line_error(r, "sft", "config file not found", "shipped configs: ", "default, demo")


def test_wrong_value_type(tmp_path):
    r = hr1("baseline", f"--workdir={tmp_path}", "--config.rollout.num_workers=two")
    assert_one_line_error(r, "baseline", "--config.rollout.num_workers=two")


def test_missing_and_non_json_patch(tmp_path):
    r = hr1("rollout", f"--workdir={tmp_path}", f"--config.patch={tmp_path / 'missing.json'}")
    assert_one_line_error(r, "rollout", "patch file not found")
    (tmp_path / "broken.json").write_text('{"benchmark": "dbbench", "actions": [')
    r = hr1("rollout", f"--workdir={tmp_path}", f"--config.patch={tmp_path / 'broken.json'}")
    assert_one_line_error(r, "rollout", "broken.json is not valid JSON")


def test_missing_and_truncated_rows_file(tmp_path):
    r = hr1("teacher", f"--workdir={tmp_path}", f"--config.train.rows={tmp_path / 'missing.jsonl'}")
    assert_one_line_error(r, "teacher", "rows file not found")
    (tmp_path / "cut.jsonl").write_text('{"prompt": []}\n{"prompt": [{"role": "sys')
    r = hr1("teacher", f"--workdir={tmp_path}", f"--config.train.rows={tmp_path / 'cut.jsonl'}")
    assert_one_line_error(r, "teacher", "line 2 is not valid JSON (truncated file?)")


def test_debug_shows_the_traceback(tmp_path):
    r = hr1("rollout", f"--workdir={tmp_path}", "--config.no_such_key=1", "--debug")
    assert r.returncode != 0 and "Traceback" in r.stderr and "InputError" in r.stderr


def test_kebab_flags_are_accepted(tmp_path):
    r = hr1("reward", f"--workdir={tmp_path}", f"--row={tmp_path / 'none.jsonl'}", "--row-index=0",
            f"--response={tmp_path / 'r.txt'}")
    assert_one_line_error(r, "reward", "rows file not found")   # parsed: --row-index is --row_index
