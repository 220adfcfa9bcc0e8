"""Pluggable data: DBBench task files in the reference's (AgentBench JSONL) format through the
config, named in the reports; RL-row mixing with explicit group counts per benchmark."""
import json
import os
import subprocess
import sys

import pytest

from configs.default import get_config
from envs.dbbench import tasks as dbtasks
from hr1_jax.config import ConfigError
from hr1_jax.data.rows import group_rows, parse_group_counts

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _task_file(tmp_path, lines=(4, 5, 6)):
    with open(dbtasks.DATA_DIR / "dev.jsonl", encoding="utf-8") as f:
        dev = f.readlines()
    path = tmp_path / "my_train.jsonl"
    path.write_text("".join(dev[i] for i in lines), encoding="utf-8")
    return path, [json.loads(dev[i]) for i in lines]


def test_dbbench_task_files_add_and_replace_splits(tmp_path):
    path, entries = _task_file(tmp_path)
    files = f"train={path}"
    train = dbtasks.load_split("train", "dbbench-v1", task_files=files)
    assert [t.payload["entry"]["description"] for t in train] == [e["description"] for e in entries]
    assert train[0].oracle["label"] == list(entries[0].get("label") or [])
    assert len(dbtasks.load_split("test", "dbbench-v1", task_files=files)) == 300      # shipped splits stay
    assert len(dbtasks.load_split("test", "dbbench-v1", task_files=f"test={path}")) == 3  # ... or are replaced
    with pytest.raises(KeyError, match=r"no split 'extra'.*'dev', 'test', 'train'"):
        dbtasks.load_split("extra", "dbbench-v1", task_files=files)
    with pytest.raises(ValueError, match="expected 'split=path'"):
        dbtasks.parse_task_files("train")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"description": "x"\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:1: bad JSON"):
        dbtasks.load_split("train", "dbbench-v1", task_files=f"train={bad}")


def test_dbbench_task_files_are_validated_and_sized(tmp_path):
    from envs.dbbench.config import validate
    from hr1_jax.eval.tasks import resolve_all
    c = get_config()
    c.dbbench.backend = "sqlite"
    c.dbbench.task_files = f"train={tmp_path / 'missing.jsonl'}"
    with pytest.raises(ConfigError, match="dbbench.task_files: split 'train': no such file"):
        validate(c.dbbench, c)
    path, _ = _task_file(tmp_path)
    c.dbbench.task_files = f"train={path}"
    c.eval.split.dbbench = "train"
    c.eval.tasks.update("all")
    assert resolve_all(c, ["dbbench"]) == {"dbbench": "0:3"}
    c.eval.tasks.update("2:4")
    with pytest.raises(ConfigError, match=r"eval.tasks.dbbench.*3 tasks"):
        resolve_all(c, ["dbbench"])


def test_eval_on_user_task_files_names_them_in_the_report(tmp_path):
    path, _ = _task_file(tmp_path)
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=REPO)
    run = subprocess.run(
        [sys.executable, "-m", "hr1_jax.cli", "eval", "--config.eval.benchmarks=dbbench",
         f"--config.dbbench.task_files=train={path}", "--config.dbbench.backend=sqlite",
         "--config.eval.split.dbbench=train", "--config.eval.tasks=all", "--config.eval.engineer=teacher",
         "--config.eval.fixed_editors=", "--config.eval.compare_teacher=False", "--config.eval.self_refine=False",
         "--config.eval.best_of_n=False", "--config.eval.heldout_evidence=0", "--config.eval.seeds=0",
         "--config.rollout.min_failures=1", f"--workdir={tmp_path / 'w'}"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    md = (tmp_path / "w" / "report.md").read_text()
    assert f"- data: DBBench: tasks from train={path}" in md and "on sqlite" in md
    result = json.loads((tmp_path / "w" / "eval_result.json").read_text())
    assert sorted(p["task_id"] for p in result["methods"][0]["pairs"]) == [0, 1, 2]


def _rows(bench, n):
    return [{"prompt": [], "metadata": {"benchmark": bench, "i": i}} for i in range(n)]


def test_group_counts_upsample_and_downsample_per_benchmark():
    rows = {"webshop": _rows("webshop", 8), "dbbench": _rows("dbbench", 16), "alfworld": _rows("alfworld", 4)}
    plain = group_rows(rows, 4, 7)
    assert plain == group_rows(rows, 4, 7, group_counts=None)               # unchanged without counts
    out = group_rows(rows, 4, 7, group_counts=parse_group_counts("webshop=5,dbbench=2"))
    groups = {}
    for r in out:
        groups.setdefault(r["metadata"]["mixed_group_index"], []).append(r)
    per_bench = {}
    for g in groups.values():
        assert len({r["metadata"]["benchmark"] for r in g}) == 1 and len(g) == 4
        per_bench.setdefault(g[0]["metadata"]["benchmark"], []).append(g)
    assert {b: len(gs) for b, gs in per_bench.items()} == {"webshop": 5, "dbbench": 2, "alfworld": 1}
    dup = [g for g in per_bench["webshop"] if g[0]["metadata"].get("mixed_upsampled_duplicate")]
    assert len(dup) == 3 and all(r["metadata"]["mixed_upsampled_duplicate"] for g in dup for r in g)
    originals = {tuple(r["metadata"]["i"] for r in g) for g in per_bench["webshop"] if g not in dup}
    assert len(originals) == 2 and all(tuple(r["metadata"]["i"] for r in g) in originals for g in dup)
    assert not any(r["metadata"].get("mixed_upsampled_duplicate") for g in per_bench["dbbench"] for r in g)
    assert out == group_rows(rows, 4, 7, group_counts={"webshop": 5, "dbbench": 2})   # seeded
    with pytest.raises(ValueError, match="without rows"):
        group_rows(rows, 4, 7, group_counts={"tau": 3})
    with pytest.raises(ValueError, match="benchmark=N"):
        parse_group_counts("webshop=0")


def test_build_rows_stage_takes_group_counts(tmp_path):
    """`hr1 build-rows --config.rollout.group_counts=dbbench=5`: the grouped file holds exactly 5
    DBBench groups however many batches the baselines gave."""
    from hr1_jax.config import base_config, validate_config
    from hr1_jax.data.rows import read_jsonl
    from hr1_jax.rollout.cli import baseline_stage, build_rows_stage
    c = base_config()
    c.benchmark, c.split, c.tasks = "dbbench", "dev", "0:20"
    c.dbbench.backend, c.rollout.batch_size, c.rollout.group_size = "sqlite", 5, 2
    c.rollout.group_counts = "dbbench=5"
    validate_config(c)
    assert baseline_stage(c, str(tmp_path)) == 0
    assert build_rows_stage(c, str(tmp_path)) == 0
    rows = read_jsonl(str(tmp_path / "rows" / "rl_dbbench.jsonl"))
    grouped = read_jsonl(str(tmp_path / "rows" / "rl_grouped.jsonl"))
    assert len(grouped) == 5 * 2 and len(rows) < len(grouped)
    assert any(r["metadata"].get("mixed_upsampled_duplicate") for r in grouped)
    c.rollout.group_counts = "dbbench=x"
    with pytest.raises(ConfigError, match="rollout.group_counts"):
        validate_config(c)
