"""`hr1 rollout` / `hr1 baseline` on the real DBBench env (SQLite backend) with the scripted target."""
import json
import os
import subprocess
import sys

from hr1_jax.config import base_config, validate_config
from hr1_jax.rollout.batches import read_results
from hr1_jax.rollout.cli import baseline_stage, rollout_stage
from hr1_jax.rollout.identity import check_batch_identity

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def dbbench_config(tasks="0:10"):
    c = base_config()
    c.benchmark, c.tasks = "dbbench", tasks
    c.dbbench.backend = "sqlite"
    c.rollout.num_workers = 2
    validate_config(c)
    return c


def test_hr1_rollout_cli_writes_results_and_summary(tmp_path):
    out = subprocess.run([sys.executable, "-m", "hr1_jax.cli", "rollout", "--config.benchmark=dbbench",
                          "--config.tasks=0:10", "--config.dbbench.backend=sqlite", f"--workdir={tmp_path}"],
                         cwd=REPO, capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, HR1_PROGRESS="0"))
    assert out.returncode == 0, out.stderr[-2000:]
    rows = read_results(str(tmp_path))
    assert [r["task_id"] for r in rows] == list(range(10))
    for r in rows:
        assert {"task_id", "reward", "success", "status", "trajectory", "hook_events", "identity"} <= set(r)
        assert r["trajectory"][0]["role"] == "system" and r["status"] != "infra_error"
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["benchmark"] == "dbbench" and summary["n_tasks"] == 10
    assert summary["mean_reward"] == sum(r["reward"] for r in rows) / 10
    assert {"success_rate", "hook_calls", "hook_errors", "hook_timeouts"} <= set(summary)
    assert "mean_reward=" in out.stdout and out.stdout.count("\n") >= 11


def test_baseline_batches_metadata_and_resume(tmp_path):
    c = dbbench_config("0:15")
    assert baseline_stage(c, str(tmp_path)) == 0
    root = tmp_path / "baseline" / "dbbench"
    status = [json.loads((root / f"batch_{i:03d}" / "status.json").read_text()) for i in range(2)]
    assert [s["task_ids"] for s in status] == [list(range(10)), list(range(10, 15))]
    meta = status[0]["metadata"]
    check_batch_identity(meta["identity"], meta["task_ids"])
    assert meta["target_agent_name"] == c.target.name and len(meta["baseline_rewards"]) == 10
    mtime = os.path.getmtime(root / "batch_000" / "results.jsonl")
    assert baseline_stage(c, str(tmp_path)) == 0  # resume: complete batches are not rerun
    assert os.path.getmtime(root / "batch_000" / "results.jsonl") == mtime


def test_rollout_with_reference_patch_file_records_hook_events(tmp_path):
    c = dbbench_config()
    c.patch = os.path.join(REPO, "hr1_jax/patch/reference_patches/examples/heldout_generalization/harness-r1/"
                                 "seed20260720/dbbench.json")
    assert rollout_stage(c, str(tmp_path)) == 0
    rows = read_results(str(tmp_path))
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["patched"] and summary["hook_calls"] > 0 and summary["hook_errors"] == 0
    assert summary["hook_calls"] == sum(len(r["hook_events"]) for r in rows)
    events = [e for r in rows for e in r["hook_events"]]
    assert {e["hook"] for e in events} == {"on_init", "make_pre_hint", "on_post_step", "on_before_action"}
    assert all({"hook", "turn", "status", "effect", "error", "elapsed_s"} <= set(e) for e in events)
    assert any(e["effect"] == "message" and e["applied"] for e in events)


def strict_jsonl(path) -> list[dict]:
    """The rows of a JSONL file that must be strict UTF-8 (a lone surrogate cannot be encoded)."""
    return [json.loads(line) for line in path.read_bytes().decode("utf-8").splitlines()]


def test_hr1_rollout_with_a_surrogate_hook_message_writes_complete_utf8_results(tmp_path):
    # The hook source is ASCII; its "\ud800" escape makes a lone surrogate at run time.
    code = 'def hook(ctx, nb):\n    return {"message": "look \\ud800 here"}\n'
    patch = {"benchmark": "dbbench", "description": "surrogate hint",
             "actions": [{"type": "add_code_hook", "hook": "make_pre_hint", "code": code}]}
    (tmp_path / "patch.json").write_text(json.dumps(patch))
    out = subprocess.run([sys.executable, "-m", "hr1_jax.cli", "rollout", "--config.benchmark=dbbench",
                          "--config.tasks=0:3", "--config.dbbench.backend=sqlite", "--config.rollout.num_workers=1",
                          f"--config.patch={tmp_path / 'patch.json'}", f"--workdir={tmp_path / 'run'}"],
                         cwd=REPO, capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, HR1_PROGRESS="0"))
    assert out.returncode == 0, out.stderr[-2000:]
    rows = strict_jsonl(tmp_path / "run" / "results.jsonl")
    assert [r["task_id"] for r in rows] == [0, 1, 2]
    assert all(any(e["applied"] for e in r["hook_events"]) for r in rows)
    assert "look ? here" in json.dumps(rows[0]["trajectory"])


def test_rollout_stores_endpoint_text_that_utf8_cannot_encode(tmp_path, monkeypatch):
    """An OpenAI-style target can decode a "\\ud800" escape into its reply: the results keep every
    row, the offending text sanitised."""
    import hr1_jax.rollout.batches as batches
    real = batches.run_batch

    def run_with_endpoint_surrogates(*args, **kwargs):
        episodes = real(*args, **kwargs)
        episodes[1]["trajectory"].append({"role": "assistant", "content": "reply \ud800"})
        episodes[1]["agent"]["note\udfff"] = {1, 2}  # and an object JSON cannot hold
        return episodes

    monkeypatch.setattr(batches, "run_batch", run_with_endpoint_surrogates)
    assert rollout_stage(dbbench_config("0:3"), str(tmp_path)) == 0
    rows = strict_jsonl(tmp_path / "results.jsonl")
    assert [r["task_id"] for r in rows] == [0, 1, 2]
    assert rows[1]["trajectory"][-1]["content"] == "reply ?" and rows[1]["agent"]["note?"] == "{1, 2}"
    assert json.loads((tmp_path / "summary.json").read_text(encoding="utf-8"))["n_tasks"] == 3
