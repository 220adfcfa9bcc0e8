"""`hr1 demo` end to end on a shrunken config (DBBench on SQLite only, a few steps, two GRPO seeds
with validation): the summary JSON has the promised schema (greedy and sampled methods and
comparisons with intervals, backend), every seed keeps best_params beside final_params, the report
and TensorBoard events exist (learning curves included), the output ends with the table, report,
TensorBoard and backend lines, and a rerun skips finished stages; a rerun under another config is refused
before any stage runs."""
import importlib
import json
import os

import pytest

from hr1_jax.config import ConfigError, validate_config
from hr1_jax.errors import InputError
from hr1_jax.train import demo
from hr1_jax.train.demo import METHODS, demo_stage
from hr1_jax.utils.tensorboard import read_events


@pytest.mark.slow
def test_demo_end_to_end_small(tmp_path, capsys):
    c = importlib.import_module("configs.demo").get_config()
    c.dbbench.backend = "sqlite"
    c.rollout.num_workers = 1
    c.mesh.update(dict(data=1, fsdp=1, tensor=-1))   # 8 test devices; batches of 4 stay unsplit
    t = c.train
    t.demo.benchmarks = ("dbbench",)
    t.demo.dbbench.update(dict(train_tasks="0:15", heldout_tasks="0:10", train_seeds=(0,), heldout_seeds=(0, 1),
                               val_tasks="250:260", val_seeds=(0,)))
    t.demo.grpo_seeds = (0, 1)
    t.demo.eval_samples = 1
    t.sft.epochs = 2
    t.grpo.num_steps = 2
    t.grpo.eval_every = 1
    t.checkpoint.export_hf = False
    validate_config(c)
    bad = importlib.import_module("configs.demo").get_config()
    with pytest.raises(ConfigError, match="train.sft.batch_size"):   # fsdp=8 cannot split 4 rows
        from hr1_jax.train.engine import Engineer
        Engineer(bad, stage="sft").require_batch_divisible(bad.train.sft.batch_size, "train.sft.batch_size")
    workdir = str(tmp_path / "demo")
    assert demo_stage(c, workdir) == 0
    summary = json.loads(open(os.path.join(workdir, "summary.json")).read())
    assert set(summary["methods"]) == set(METHODS) and summary["wall_seconds"] > 0
    entry = {"mean_delta_reward", "delta_pass_rate", "valid_rate", "n_batches"}
    for m in METHODS:
        assert set(summary["methods"][m]) == entry
    assert set(summary["methods_sampled"]) == {"no_patch", "sft", "grpo"}
    assert all(set(e) == entry for e in summary["methods_sampled"].values())
    assert summary["details"]["heldout_batches"] == summary["methods"]["no_patch"]["n_batches"] > 0
    assert summary["methods"]["teacher"]["valid_rate"] == 1.0
    assert summary["methods"]["no_patch"]["mean_delta_reward"] == 0.0
    comparisons = summary["comparisons"]
    pairs = [comparisons[n] for n in ("grpo_vs_sft", "sft_vs_no_patch", "teacher_vs_no_patch", "grpo_vs_no_patch")]
    pairs += [summary["comparisons_sampled"][n] for n in ("grpo_vs_sft", "sft_vs_no_patch")]
    pairs += [one["grpo_vs_sft"] for one in summary["details"]["grpo_seeds"].values()]
    for pair in pairs:
        assert set(pair) == {"mean", "ci95", "n"} and pair["ci95"][0] <= pair["mean"] <= pair["ci95"][1]
        assert pair["n"] > 0
    # two GRPO seeds, each with its validation-chosen checkpoint beside its final one
    assert set(summary["details"]["grpo_seeds"]) == {"seed0", "seed1"}
    for seed in (0, 1):
        run = os.path.join(workdir, "grpo", f"seed{seed}")
        best = json.loads(open(os.path.join(run, "best.json")).read())
        assert best["step"] in (1, 2) and best["start_val_reward"] is not None
        assert os.path.isdir(os.path.join(run, "best_params")) and os.path.isdir(os.path.join(run, "final_params"))
        assert summary["details"]["grpo_seeds"][f"seed{seed}"]["step"] == best["step"]
    # the table's mean is the comparison's: one unit (held-out tasks) throughout
    assert summary["methods"]["grpo"]["mean_delta_reward"] == pytest.approx(comparisons["grpo_vs_no_patch"]["mean"])
    assert summary["dbbench_backend"] == "sqlite" and os.path.exists(summary["report"])
    assert "on sqlite" in open(summary["report"]).read()
    ev = read_events(os.path.join(workdir, "tensorboard"))
    assert "sft/loss" in ev and "sft/lr" in ev and "reward/mean" in ev and "train/lr" in ev
    assert len(ev["reward/mean"]) == 4 and "patch/best" in ev and "reward/dbbench/mean" in ev   # 2 seeds x 2
    assert len(ev["reward/vs_start_greedy"]) == 4 and len(ev["reward/kept_mean"]) == 4
    assert [s for s, _ in ev["val/reward"]] == [0, 1, 2, 0, 1, 2] and "val/dbbench/reward" in ev
    # held-out numbers sit at the evaluated engineer's training step, not at a method index
    sft_steps = summary["details"]["sft"]["steps"]
    grpo_step = max(summary["details"]["grpo_seeds"][s]["step"] for s in ("seed0", "seed1"))
    assert [s for s, _ in ev["heldout/grpo/valid_rate"]] == [grpo_step]
    assert [s for s, _ in ev["heldout/sft/valid_rate"]] == [sft_steps]
    assert [s for s, _ in ev["eval/grpo_engineer_seed_0/dbbench/delta_reward_pp"]] == \
        [summary["details"]["grpo_seeds"]["seed0"]["step"]]
    out = capsys.readouterr().out
    assert "greedy Δ reward [95% CI]" in out and "sampled Δ reward [95% CI]" in out
    assert "grpo vs sft:" in out and "sft vs no patch:" in out and "mean over 2 GRPO seeds" in out
    assert f"report:      {summary['report']}" in out
    assert f"tensorboard --logdir {os.path.join(workdir, 'tensorboard')}" in out
    assert "DBBench backend: sqlite" in out
    # a second invocation finds every stage done and rewrites the same table
    assert demo_stage(c, workdir) == 0
    again = json.loads(open(os.path.join(workdir, "summary.json")).read())
    assert again["methods"] == summary["methods"]


def test_a_rerun_under_another_config_is_refused_before_any_stage(tmp_path):
    """Finished stages are skipped on a rerun, so a workdir's stages must belong to the config asked
    for: another one (here: more GRPO seeds) would print the old table under the new config. Where
    compiled programs are cached, and when a rollout worker is replaced for its memory, are not part
    of that."""
    c = importlib.import_module("configs.demo").get_config()
    workdir = str(tmp_path / "demo")
    demo._check_same_config(workdir, json.loads(c.to_json_best_effort()))   # the first run records it
    demo._check_same_config(workdir, json.loads(c.to_json_best_effort()))   # the same config again: fine
    c.compile_cache.dir, c.compile_cache.min_compile_seconds = "/elsewhere", 0.0
    c.rollout.worker_max_rss_mb = 123.0
    demo._check_same_config(workdir, json.loads(c.to_json_best_effort()))   # cannot change results: fine
    recorded = json.loads(open(os.path.join(workdir, "stages", "config.json")).read())
    del recorded["rollout"]["worker_max_rss_mb"]   # a workdir from before the key existed
    open(os.path.join(workdir, "stages", "config.json"), "w").write(json.dumps(recorded))
    demo._check_same_config(workdir, json.loads(c.to_json_best_effort()))
    c.train.demo.grpo_seeds = (0, 1, 2, 3)
    c.train.grpo.lr = 1e-3
    with pytest.raises(InputError, match=r"differs in: train\.demo\.grpo_seeds, train\.grpo\.lr\)"):
        demo_stage(c, workdir)
    assert os.listdir(workdir) == ["stages"]   # refused before the baseline (or any service) started


def test_the_cli_refuses_before_it_writes_the_config_record(tmp_path, capsys):
    """`hr1 demo` writes DIR/config.demo.json for the run it starts: a refused rerun must leave the
    record of the config the workdir's stages ran under as it was."""
    from hr1_jax import cli

    workdir = tmp_path / "demo"
    (workdir / "stages").mkdir(parents=True)
    (workdir / "stages" / "config.json").write_text(json.dumps({"seed": -1}))   # a run under another config
    (workdir / "config.demo.json").write_text("the earlier run's record\n")
    assert cli.main(["demo", f"--workdir={workdir}"]) == 2
    assert "holds a demo run with another config" in capsys.readouterr().err
    assert (workdir / "config.demo.json").read_text() == "the earlier run's record\n"
    assert sorted(os.listdir(workdir)) == ["config.demo.json", "stages"]
