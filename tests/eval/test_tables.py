"""The pieces behind the paper's tables: per-benchmark task specs (through the real command line),
the main-table layout and CSV, the lifecycle ablation rows, merging runs, the shipped editors'
reference patches, and the prompt style a checkpoint carries."""
import csv
import json
import os
import subprocess
import sys

import pytest

from configs.default import get_config
from hr1_jax.config import ConfigError
from hr1_jax.errors import InputError
from hr1_jax.eval import tasks as T
from hr1_jax.eval.evaluate import without_site
from hr1_jax.eval.merge import merge_results
from hr1_jax.eval.report import ablation_rows, main_table_rows, write_reports
from hr1_jax.eval.results import EvalResult, MethodResult, TaskPair

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROVENANCE = {"commit": "abc", "config": "c", "date": "d", "target": "t", "engineer": "", "engineer_step": None,
              "data": {}}


def hr1(*args, cwd):
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=REPO)
    env.pop("HR1_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "hr1_jax.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


# ---------------------------------------------------------------------------------------------- tasks

def test_task_specs_default_overrides_and_string_updates():
    c = get_config()
    assert T.spec_for(c.eval.tasks, "dbbench") == "0:20"
    c.eval.tasks.dbbench = "0:50"
    assert (T.spec_for(c.eval.tasks, "dbbench"), T.spec_for(c.eval.tasks, "webshop")) == ("0:50", "0:20")
    c.eval.update(dict(tasks="all"))          # a string sets the default and clears the overrides
    assert c.eval.tasks.default == "all" and c.eval.tasks.dbbench == ""
    c.eval.tasks.update("3,5")
    assert T.spec_for(c.eval.tasks, "alfworld") == "3,5"
    assert T.spec_for(c.eval.tasks.copy_and_resolve_references(), "alfworld") == "3,5"


def test_all_is_the_whole_test_split_and_out_of_range_ids_are_refused():
    c = get_config()
    c.eval.tasks.update("all")
    assert T.resolve_all(c, ["dbbench", "webshop", "alfworld"]) == {"dbbench": "0:300", "webshop": "0:500",
                                                                    "alfworld": "0:432"}
    c.eval.tasks.update("298:302")
    with pytest.raises(ConfigError, match=r"eval.tasks.dbbench: '298:302'.*300 tasks.*: 300, 301;"):
        T.resolve_all(c, ["dbbench"])
    c.eval.tasks.update("0:2")
    c.eval.tasks.dbbench = "7,3"
    assert T.resolve_all(c, ["dbbench", "webshop"]) == {"dbbench": "7,3", "webshop": "0:2"}


def test_command_line_task_specs(tmp_path):
    """`--config.eval.tasks=all --config.eval.tasks.dbbench=0:2` through the real `hr1 eval`:
    DBBench runs its two tasks; an id past the split stops at start-up with one line, exit 2."""
    bad = hr1("eval", "--config.eval.benchmarks=dbbench", "--config.eval.tasks=298:302", "--config.eval.engineer=",
              "--config.eval.fixed_editors=", f"--workdir={tmp_path / 'bad'}", cwd=REPO)
    assert bad.returncode == 2, bad.stderr[-2000:]
    assert "config.eval.tasks.dbbench" in bad.stderr and "Traceback" not in bad.stderr
    assert not (tmp_path / "bad" / "baseline").exists()     # nothing ran
    ok = hr1("eval", "--config.eval.benchmarks=dbbench", "--config.eval.tasks=all", "--config.eval.tasks.dbbench=0:2",
             "--config.eval.engineer=reference:seed20260720", "--config.eval.fixed_editors=",
             "--config.eval.compare_teacher=False", "--config.eval.self_refine=False", "--config.eval.best_of_n=False",
             "--config.eval.heldout_evidence=0", "--config.eval.seeds=0", "--config.dbbench.backend=sqlite",
             f"--workdir={tmp_path / 'ok'}", cwd=REPO)
    assert ok.returncode == 0, ok.stderr[-3000:]
    result = json.loads((tmp_path / "ok" / "eval_result.json").read_text())
    assert sorted(p["task_id"] for p in result["methods"][0]["pairs"]) == [0, 1]
    assert "{'dbbench': '0:2'}" in result["notes"][0]


# ---------------------------------------------------------------------------------------------- tables

def _pairs(bench, base, patched, families=None, seed=0):
    fam = families or [""] * len(base)
    return [TaskPair(bench, i, seed, "b0", float(b), float(p), f) for i, (b, p, f) in enumerate(zip(base, patched, fam))]


FAMS = ["pick_and_place", "pick_and_place", "look_at_obj", "pick_two_obj"]


def _ablation_result() -> EvalResult:
    full = MethodResult(name="Engineer", pairs=_pairs("alfworld", [0, 0, 1, 0], [1, 1, 1, 0], FAMS)
                        + _pairs("dbbench", [0, 0, 0], [1, 1, 0]))
    wo = MethodResult(name="Engineer w/o on_before_action", ablation_of="Engineer", ablated_site="on_before_action",
                      pairs=_pairs("alfworld", [0, 0, 1, 0], [1, 0, 1, 0], FAMS) + _pairs("dbbench", [0, 0, 0], [0, 0, 0]))
    return EvalResult(title="t", methods=[full, wo])


def test_main_table_has_the_family_columns_and_csv(tmp_path):
    result = _ablation_result()
    rows = {r["method"]: r for r in main_table_rows(result)}
    base, eng = rows["No patch (baseline)"], rows["Engineer"]
    assert (base["alfworld_pick_and_place"], base["alfworld_pick_and_place_n"]) == (0.0, 2)
    assert (eng["alfworld_pick_and_place"], eng["alfworld_look_at_obj"], eng["alfworld_pick_two_obj"]) == (100.0, 100.0, 0.0)
    assert "alfworld_pick_heat_then_place" not in eng                      # no such task: an empty cell
    assert eng["average"] == pytest.approx((75.0 + 100 * 2 / 3) / 2) and eng["average_n"] == 7
    paths = write_reports(result, str(tmp_path), n_boot=200, provenance=PROVENANCE)
    md = open(paths["md"]).read()
    assert ("| Method | ALF Pick | ALF Look | ALF Clean | ALF Heat | ALF Cool | ALF Pick2 | ALFWorld (all) | "
            "WebShop score‡ | WebShop success‡ | DBBench success | Avg |") in md
    assert "| Engineer | 100.0 (2) | 100.0 (1) | – | – | – | 0.0 (1) | 75.0 (4) | – | – | 66.7 (3) | 70.8 (7) |" in md
    with open(paths["csv"], newline="") as f:
        table = list(csv.DictReader(f))
    assert [r["method"] for r in table] == ["No patch (baseline)", "Engineer", "Engineer w/o on_before_action"]
    assert table[1]["dbbench_success"] == "66.67" and table[1]["dbbench_success_n"] == "3"
    assert table[1]["alfworld_pick_heat_then_place"] == "" and table[1]["alfworld_pick_heat_then_place_n"] == "0"


def test_ablation_rows_pair_each_task_with_the_full_patch(tmp_path):
    rows = ablation_rows(_ablation_result(), n_boot=500)
    assert len(rows) == 1
    r = rows[0]
    assert (r["full"], r["site"]) == ("Engineer", "on_before_action")
    assert r["alfworld"]["mean"] == pytest.approx(-25.0) and r["alfworld"]["n"] == 4
    assert r["dbbench"]["mean"] == pytest.approx(-100 * 2 / 3)
    assert r["average"]["mean"] == pytest.approx((-25.0 - 100 * 2 / 3) / 2)
    assert r["average"]["ci95"][0] <= r["average"]["mean"] <= r["average"]["ci95"][1] <= 0
    md = open(write_reports(_ablation_result(), str(tmp_path), n_boot=200, provenance=PROVENANCE)["md"]).read()
    assert "## Lifecycle ablation" in md and "| Engineer w/o on_before_action | Engineer | -25.0 [" in md


def test_without_site_removes_only_that_sites_hooks():
    patch = {"benchmark": "dbbench", "actions": [
        {"type": "add_code_hook", "hook": "on_init", "code": "a"},
        {"type": "add_code_hook", "hook": "on_before_action", "code": "b"},
        {"type": "add_code_hook", "hook": "on_init", "code": "c"}]}
    assert [a["code"] for a in without_site(patch, "on_init")["actions"]] == ["b"]
    assert without_site(patch, "on_post_step") == patch
    assert without_site({"actions": [patch["actions"][1]]}, "on_before_action") is None
    assert len(patch["actions"]) == 3                                       # the full patch is untouched


# ---------------------------------------------------------------------------------------------- merge

def _write_run(folder, methods):
    folder.mkdir(parents=True)
    (folder / "eval_result.json").write_text(EvalResult(title="t", methods=methods, notes=["n"]).to_json())
    return str(folder)


def test_merge_joins_per_benchmark_runs_and_refuses_overlap(tmp_path):
    a = _write_run(tmp_path / "alf", [MethodResult(name="E", pairs=_pairs("alfworld", [0, 1], [1, 1], FAMS[:2]),
                                                   cost={"target_episodes": 2}, n_invalid=1)])
    d = _write_run(tmp_path / "db", [MethodResult(name="E", pairs=_pairs("dbbench", [0], [1]),
                                                  cost={"target_episodes": 1})])
    merged = merge_results([a, d])
    (e,) = merged.methods
    assert sorted({p.benchmark for p in e.pairs}) == ["alfworld", "dbbench"] and len(e.pairs) == 3
    assert (e.cost["target_episodes"], e.n_invalid) == (3, 1)
    assert e.pairs[0].family == "pick_and_place"                         # families survive the JSON round trip
    with pytest.raises(InputError, match="already has alfworld seed 0 task 0"):
        merge_results([a, a])
    with pytest.raises(InputError, match="not found"):
        merge_results([str(tmp_path / "missing")])


def test_merge_mode_of_hr1_eval_writes_one_report(tmp_path):
    from hr1_jax.eval.cli import eval_stage
    a = _write_run(tmp_path / "alf", [MethodResult(name="E", pairs=_pairs("alfworld", [0, 1, 0, 0], [1, 1, 1, 0], FAMS))])
    d = _write_run(tmp_path / "db", [MethodResult(name="E", pairs=_pairs("dbbench", [0, 0], [1, 0]))])
    c = get_config()
    c.eval.merge_from, c.eval.bootstrap_samples = f"{a},{d}", 200
    assert eval_stage(c, str(tmp_path / "all")) == 0
    md = (tmp_path / "all" / "report.md").read_text()
    assert "| E | 100.0 (2) | 100.0 (1) | – | – | – | 0.0 (1) | 75.0 (4) | – | – | 50.0 (2) | 62.5 (6) |" in md
    assert (tmp_path / "all" / "main_table.csv").is_file()
    assert not (tmp_path / "all" / "baseline").exists()                  # nothing ran


# ---------------------------------------------------------------------------------------------- editors

def test_reference_patches_of_every_shipped_editor():
    from hr1_jax.eval.engineers import make_engineer
    c = get_config()
    harness = make_engineer(c, "reference:seed20260720")
    qwen = make_engineer(c, "reference:qwen3.5-397b/seed20260720")
    deepseek = make_engineer(c, "reference:deepseek-v4-pro/seed20260721", name="DeepSeek-V4-Pro s1")
    assert sorted(harness.patches) == ["alfworld", "dbbench", "webshop"]
    assert sorted(qwen.patches) == ["dbbench", "webshop"]                # its ALFWorld patch failed validation
    assert qwen.name == "Reference qwen3.5-397b patch (seed20260720)" and deepseek.name == "DeepSeek-V4-Pro s1"
    assert qwen.patches["dbbench"] != harness.patches["dbbench"]
    with pytest.raises(InputError, match="unknown reference editor 'gpt'"):
        make_engineer(c, "reference:gpt/seed20260720")
    with pytest.raises(InputError, match="has seed20260720, seed20260721, seed20260722"):
        make_engineer(c, "reference:harness-r1/seed1")


def test_editor_entries_are_validated():
    from hr1_jax.eval.config import validate
    c = get_config()
    c.eval.editors.glm = dict(spec="https://example.invalid/v1", model="glm-5.2", api_key_env="GLM_KEY")
    validate(c.eval, c)
    c.eval.editors.bad = dict(model="x")
    with pytest.raises(ConfigError, match="eval.editors.bad"):
        validate(c.eval, c)


# ---------------------------------------------------------------------------------------------- prompt style

def _rl_row(bench="dbbench"):
    from hr1_jax.data.rows import rl_row
    from hr1_jax.rollout.prompts import EVIDENCE_MARKER
    user = f"Benchmark {bench}\n{EVIDENCE_MARKER}\n### Failed trace 1\nno rows returned\n"
    return rl_row("sys", user, {"benchmark": bench, "split": "test", "seed": 0, "task_ids": [0, 1, 2],
                                "baseline_rewards": {"0": 1.0, "1": 0.0, "2": 0.0}, "identity": {},
                                "reward_threshold": 1.0, "target_agent_name": "t", "baseline_pass": 1,
                                "prompt_version": "hr1-prompt-v1"})


def test_compact_restyle_and_the_style_a_checkpoint_carries(tmp_path):
    from hr1_jax.eval.prompt_styles import COMPACT, checkpoint_prompt_style, restyle
    from hr1_jax.train.compact import SYSTEM, compact_user
    from hr1_jax.train.engine import PROMPT_STYLE_FILE, rows_prompt_style
    from hr1_jax.train.teacher.signals import detect

    row = _rl_row()
    compact = restyle(row, COMPACT)
    assert compact["prompt"][0]["content"] == SYSTEM
    assert compact["prompt"][1]["content"] == compact_user("dbbench", detect("dbbench", row), 1, 3)
    assert restyle(row, "hr1-prompt-v1") is row and row["prompt"][0]["content"] == "sys"
    with pytest.raises(InputError, match="unknown"):
        restyle(row, "v9")
    # carried file > the run's rows > the reference style
    params = tmp_path / "run" / "grpo" / "final_params"
    params.mkdir(parents=True)
    assert checkpoint_prompt_style(str(params)) == "hr1-prompt-v1"
    (tmp_path / "run" / "rows").mkdir()
    (tmp_path / "run" / "rows" / "rl.jsonl").write_text(json.dumps(restyle(row, COMPACT)) + "\n")
    assert checkpoint_prompt_style(str(tmp_path / "run" / "grpo")) == COMPACT
    (tmp_path / "run" / "grpo" / "seed1" / "final_params").mkdir(parents=True)   # several GRPO seeds
    assert checkpoint_prompt_style(str(tmp_path / "run" / "grpo" / "seed1")) == COMPACT
    (tmp_path / "run" / "grpo" / "seed1" / "best_params").mkdir()
    assert checkpoint_prompt_style(str(tmp_path / "run" / "grpo" / "seed1" / "best_params")) == COMPACT
    (params / PROMPT_STYLE_FILE).write_text(json.dumps({"prompt_version": "hr1-prompt-v1"}))
    assert checkpoint_prompt_style(str(params)) == "hr1-prompt-v1"
    assert checkpoint_prompt_style(str(params), COMPACT) == COMPACT
    assert rows_prompt_style([compact, compact]) == COMPACT and rows_prompt_style([]) == "hr1-prompt-v1"
    with pytest.raises(ConfigError, match="mix prompt styles"):
        rows_prompt_style([compact, row])


def test_checkpoint_method_names_come_from_the_run():
    from hr1_jax.eval.engineers import checkpoint_name
    assert checkpoint_name("/runs/demo/grpo/final_params") == "GRPO engineer (demo)"
    assert checkpoint_name("/runs/demo/grpo/seed1") == "GRPO engineer seed1 (demo)"
    assert checkpoint_name("/runs/demo/grpo/seed1/best_params") == "GRPO engineer seed1 best (demo)"
    assert checkpoint_name("/runs/demo/sft/") == "SFT engineer (demo)"
    assert checkpoint_name("/models/my_hf") == "Engineer my_hf (models)"


def test_engineer_export_records_the_rows_prompt_style(tmp_path):
    from hr1_jax.eval.prompt_styles import COMPACT, restyle
    from hr1_jax.train.engine import PARAMS_DIR, PROMPT_STYLE_FILE, Engineer, carried_prompt_style

    c = get_config()
    c.model.vocab_size, c.model.hidden_size, c.model.intermediate_size = 256, 32, 64
    c.model.num_layers, c.model.num_heads, c.model.num_kv_heads, c.model.head_dim = 1, 2, 1, 16
    c.train.checkpoint.export_hf = False
    eng = Engineer(c, stage="sft")
    eng.export(eng.init_params, str(tmp_path / "plain"))
    assert not (tmp_path / "plain" / PARAMS_DIR / PROMPT_STYLE_FILE).exists()   # unknown: nothing claimed
    eng.use_rows_prompt_style([restyle(_rl_row(), COMPACT)])
    eng.export(eng.init_params, str(tmp_path / "sft"))
    assert carried_prompt_style(str(tmp_path / "sft" / PARAMS_DIR)) == COMPACT
    c.train.init_checkpoint = str(tmp_path / "sft")                          # the next stage inherits it
    nxt = Engineer(c, stage="grpo")
    assert nxt.prompt_style == COMPACT


# ---------------------------------------------------------------------------------------------- configs

def _load(name):
    import importlib.util
    from hr1_jax.config import validate_config
    spec = importlib.util.spec_from_file_location(name, os.path.join(REPO, "configs", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    c = module.get_config()
    validate_config(c)
    return c


def test_table_configs(monkeypatch):
    for var in ("HR1_TARGET_URL", "HR1_EDITOR_GLM_URL", "HR1_CROSS_TARGETS"):
        monkeypatch.delenv(var, raising=False)
    main = _load("eval_main")
    assert main.eval.tasks.default == "all" and main.eval.best_of_n and main.eval.self_refine
    assert main.target.kind == "scripted" and not len(main.eval.editors)
    held = _load("eval_heldout")
    assert held.eval.heldout_evidence == 10 and len(held.eval.fixed_editors.split(",")) == 9
    assert "reference:deepseek-v4-pro/seed20260722" in held.eval.fixed_editors
    assert _load("eval_ablation").eval.ablation
    assert sorted(_load("eval_cross_target").eval.targets.keys()) == ["scripted_strong", "scripted_weak"]
    monkeypatch.setenv("HR1_TARGET_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("HR1_EDITOR_GLM_URL", "https://glm.example/v1")
    monkeypatch.setenv("HR1_CROSS_TARGETS", "a=org/model-a@http://h:1/v1,b=model-b@http://h:2/v1")
    main = _load("eval_main")
    assert (main.target.kind, main.target.model) == ("openai", "Qwen/Qwen3.5-9B")
    assert main.eval.editors.glm.to_dict() == {"spec": "https://glm.example/v1", "name": "GLM-5.2",
                                               "model": "glm-5.2", "api_key_env": "GLM_API_KEY"}
    cross = _load("eval_cross_target")
    assert cross.eval.targets.a.model == "org/model-a" and cross.eval.targets.b.base_url == "http://h:2/v1"


def test_cross_target_run_writes_one_report_per_target_and_the_summary(tmp_path, monkeypatch):
    from hr1_jax.eval.cli import eval_stage
    monkeypatch.delenv("HR1_CROSS_TARGETS", raising=False)
    c = _load("eval_cross_target")
    c.dbbench.backend = "sqlite"
    c.rollout.num_workers = 2
    c.eval.benchmarks, c.eval.engineer, c.eval.bootstrap_samples = "dbbench", "reference:seed20260720", 200
    c.eval.tasks.update("0:10")
    assert eval_stage(c, str(tmp_path)) == 0
    text = (tmp_path / "cross_target.md").read_text()
    assert "| scripted_strong |" in text and "| scripted_weak |" in text and "| mean over 2 targets |" in text
    for key in ("scripted_strong", "scripted_weak"):
        report = json.loads((tmp_path / "targets" / key / "report.json").read_text())
        assert report["main_table"][0]["dbbench_n"] == 10
        assert report["provenance"]["target"] == f"scripted scripted-{key.split('_')[1]}"
    with open(tmp_path / "cross_target.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    weak = json.loads((tmp_path / "targets" / "scripted_weak" / "report.json").read_text())["main_table"]
    expected = weak[1]["average"] - weak[0]["average"]
    assert float(next(r for r in rows if r["target"] == "scripted_weak")[weak[1]["method"]]) == pytest.approx(expected, abs=0.01)


def test_checkpoint_engineer_asks_in_the_carried_style(tmp_path):
    """A checkpoint that carries the compact style gets compact prompts (the demo's engineers);
    one that carries none gets the reference prompt."""
    import json as _json

    from flax import nnx

    from hr1_jax.eval.engineers import CheckpointEngineer
    from hr1_jax.eval.prompt_styles import COMPACT
    from hr1_jax.models import build_model
    from hr1_jax.models.tokenizer import load_tokenizer
    from hr1_jax.train.compact import SYSTEM
    from hr1_jax.train.engine import PROMPT_STYLE_FILE, model_config_for, save_params
    from hr1_jax.train.state import split_model

    c = get_config()
    c.model.vocab_size, c.model.hidden_size, c.model.intermediate_size = 256, 32, 64
    c.model.num_layers, c.model.num_heads, c.model.num_kv_heads, c.model.head_dim = 1, 2, 1, 16
    tok = load_tokenizer()
    cfg = model_config_for(c, tok)
    _, params, _ = split_model(build_model(cfg, nnx.Rngs(0)))
    folder = tmp_path / "demo" / "grpo" / "final_params"
    save_params(params, cfg, str(folder), tok)
    row = _rl_row()
    plain = CheckpointEngineer(c, str(folder), max_new_tokens=4)
    assert plain.prompt_style == "hr1-prompt-v1" and plain.prompt_rows([row])[0] is row
    (folder / PROMPT_STYLE_FILE).write_text(_json.dumps({"prompt_version": COMPACT}))
    eng = CheckpointEngineer(c, str(folder), max_new_tokens=4)
    assert eng.name == "GRPO engineer (demo)" and eng.prompt_style == COMPACT
    asked = eng.prompt_rows([row])[0]
    assert asked["prompt"][0]["content"] == SYSTEM and "Failure signals:" in asked["prompt"][1]["content"]
    assert len(eng.propose([row])) == 1                                   # decodes from the compact prompt
