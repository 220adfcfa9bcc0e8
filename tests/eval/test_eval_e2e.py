"""`hr1 eval` end to end on the embedded default (scripted targets, DBBench on SQLite, WebShop
substitute): every method and baseline in both reports, reproducible numbers, rendered page."""
import json
import shutil

import pytest

from configs.default import get_config
from hr1_jax.eval.cli import eval_stage
from hr1_jax.utils.tensorboard import read_events
from tests.eval.test_report import render_probe


def _config():
    c = get_config()
    c.dbbench.backend = "sqlite"
    c.rollout.num_workers = 2
    e = c.eval
    e.benchmarks, e.seeds = "dbbench,webshop", "0"
    e.tasks.update("0:10")
    e.engineer = "teacher"
    e.compare_teacher = False
    e.fixed_editors = "reference:seed20260720"
    e.heldout_evidence, e.heldout_seeds = 3, "1"
    e.bootstrap_samples = 300
    return c


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("eval1")
    assert eval_stage(_config(), str(workdir)) == 0
    return workdir


def test_reports_carry_all_methods_baselines_and_intervals(first_run):
    numbers = json.loads((first_run / "report.json").read_text())
    methods = [r["method"] for r in numbers["main_table"]]
    assert methods[0] == "No patch (baseline)"
    for expected in ("Template teacher", "Reference harness-r1 patch (seed20260720)", "Self-Refine rule",
                     "Best-of-2 target (budget-matched) †", "Template teacher held-out (evidence seed 1)"):
        assert expected in methods, methods
    for d in numbers["deltas"]:
        assert d["ci_low"] <= d["mean_delta"] <= d["ci_high"]
        assert d["n"] == (7 if "held-out" in d["method"] else 10)
    md = (first_run / "report.md").read_text()
    assert "95% paired bootstrap CI" in md and "substitute" in md and "```python" in md
    result = json.loads((first_run / "eval_result.json").read_text())
    teacher = next(m for m in result["methods"] if m["name"] == "Template teacher")
    assert teacher["patches"] and all(p["valid"] for p in teacher["patches"])
    assert any(p["hook_stats"] for p in teacher["patches"])  # hooks fired and were counted
    assert numbers["provenance"]["data"]["dbbench"].endswith("on sqlite")   # the backend the results recorded
    scalars = read_events(str(first_run / "tensorboard" / "eval"))
    assert "eval/template_teacher/dbbench/delta_reward_pp" in scalars and "eval/report" in scalars


def test_same_evaluation_reproduces_identical_numbers(first_run, tmp_path):
    assert eval_stage(_config(), str(tmp_path)) == 0  # fresh workdir: no cache, no stored baseline
    again, first = (json.loads((d / "report.json").read_text()) for d in (tmp_path, first_run))
    assert (again["main_table"], again["deltas"]) == (first["main_table"], first["deltas"])


@pytest.mark.chromium
def test_eval_report_renders(first_run, tmp_path):
    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        pytest.skip("chromium is not installed (launch/setup.sh installs it as root)")
    rows, images, loaded = render_probe(first_run / "report.html", tmp_path)
    assert rows == 7 and images == 2 and loaded == 2  # header + no patch + 5 methods


def test_checkpoint_engineer_is_scored_and_invalid_output_counts_as_no_patch(tmp_path):
    """A stage folder (final_params + model config) as the engineer: an untrained model writes no
    valid patch, so every batch is scored as no patch (delta 0) and counted as invalid."""
    from flax import nnx

    from hr1_jax.models import build_model
    from hr1_jax.models.tokenizer import load_tokenizer
    from hr1_jax.train.engine import model_config_for, save_params
    from hr1_jax.train.state import split_model

    c = _config()
    c.model.vocab_size, c.model.hidden_size, c.model.intermediate_size = 256, 32, 64
    c.model.num_layers, c.model.num_heads, c.model.num_kv_heads, c.model.head_dim = 1, 2, 1, 16
    c.eval.benchmarks, c.eval.max_new_tokens = "dbbench", 8
    c.eval.fixed_editors, c.eval.self_refine, c.eval.best_of_n, c.eval.heldout_evidence = "", False, False, 0
    tok = load_tokenizer()
    cfg = model_config_for(c, tok)
    _, params, _ = split_model(build_model(cfg, nnx.Rngs(0)))
    save_params(params, cfg, str(tmp_path / "myrun" / "grpo" / "final_params"), tok)
    c.eval.engineer = str(tmp_path / "myrun" / "grpo" / "final_params")
    assert eval_stage(c, str(tmp_path / "eval")) == 0
    result = json.loads((tmp_path / "eval" / "eval_result.json").read_text())
    engineer = result["methods"][0]
    assert engineer["name"] == "GRPO engineer (myrun)" and engineer["n_invalid"] == len(engineer["patches"]) >= 1
    assert all(p["baseline_reward"] == p["patched_reward"] for p in engineer["pairs"])
    assert (tmp_path / "eval" / "responses").is_dir()
