"""A fourth benchmark is one descriptor plus one registry line: the tests' counter game
(tests/toy_benchmark.py), registered for the test, runs through what is benchmark-free today:
registry -> scripted target -> a rollout batch in real worker processes -> an RL row (the row
builder's packet and engineer prompt, from the descriptor's defaults) -> the patched rerun's reward
-> the evaluation's task pairs, config section and reports."""
import csv
import json

import pytest

from envs import registry
from envs.base import Environment
from hr1_jax.config import base_config
from hr1_jax.data.rows import rl_row
from hr1_jax.rollout.batches import baseline_metadata, run_batch
from hr1_jax.rollout.pool import WorkerPool
from hr1_jax.rollout.rows import engineer_row, packet_for
from hr1_jax.runtime import EpisodeResult

TOY = ("counter", "toy_benchmark:BENCHMARK")
TASKS = list(range(6))


@pytest.fixture
def counter():
    with registry.registered(*TOY) as bench:
        yield bench


def _target(config, overshoot: bool) -> dict:
    """The scripted target section, asking the toy's agent to overshoot (it then fails every task)."""
    return {**config.target.to_dict(), "scripted": {"overshoot": overshoot}}


def _rollout(config, target) -> list[dict]:
    with WorkerPool(config, num_workers=2, job_timeout_s=120, max_retries=0) as pool:
        return run_batch(pool, "counter", "test", TASKS, target=target, seed=0)


def test_registration_is_one_line_and_ends_with_its_block(counter):
    assert registry.names() == ("alfworld", "webshop", "dbbench", "counter")
    assert isinstance(registry.make_env("counter", base_config()), Environment)
    assert counter.report.label == "Counter"
    with pytest.raises(TypeError, match="named 'bad'"), registry.registered("bad", "toy_benchmark:BENCHMARK"):
        pass   # a descriptor answers to its own name only
    assert registry.names()[-1] == "counter"   # the refused registration left nothing behind


def test_unregistered_after_the_block():
    with registry.registered(*TOY):
        pass
    assert "counter" not in registry.names()
    with pytest.raises(KeyError, match="unknown benchmark 'counter'"):
        registry.benchmark("counter")


def test_the_toy_runs_through_rollout_rows_and_the_evaluation_reports(counter, tmp_path):
    from hr1_jax.eval import provenance
    from hr1_jax.eval.config import validate
    from hr1_jax.eval.evaluate import task_family
    from hr1_jax.eval.report import write_reports
    from hr1_jax.eval.results import EvalResult, MethodResult, TaskPair

    config = base_config()
    assert config.eval.split.counter == "test" and config.eval.benchmarks.endswith(",counter")
    config.eval.benchmarks = "counter"
    validate(config.eval, config)

    # baseline: the scripted target built through the registry, in worker processes
    failing, fixed = _rollout(config, _target(config, True)), _rollout(config, _target(config, False))
    assert [ep["benchmark"] for ep in failing] == ["counter"] * len(TASKS)
    assert [ep["reward"] for ep in failing] == [0.0] * len(TASKS)
    assert [ep["reward"] for ep in fixed] == [1.0] * len(TASKS)
    meta = baseline_metadata("counter", "test", 0, failing, target_name=config.target.name)
    packet, n_fail = packet_for(config, "counter", "batch_000", [EpisodeResult.from_dict(e) for e in failing],
                                threshold=1.0)
    row = engineer_row(config, "counter", packet, dict(meta, batch_tag="counter_batch_000"))
    assert n_fail == len(TASKS) and row["metadata"]["identity"]["batch_sha256"]
    assert row["prompt"][1]["content"].endswith(packet) and "# counter no-harness failure traces" in packet

    # the evaluation's pairs and reports, from the toy's descriptor (families, columns, data line)
    pairs = [TaskPair("counter", a["task_id"], 0, "batch_000", a["reward"], b["reward"], task_family(a))
             for a, b in zip(failing, fixed)]
    assert [p.family for p in pairs] == ["even", "odd"] * 3
    data = provenance.data_sources(["counter"], config.to_dict())
    assert data == {"counter": "Counter: the tests' toy counting game"}
    result = EvalResult("toy", [MethodResult("agent that stops in time", pairs=pairs)])
    prov = {"commit": "c", "config": "k", "date": "d", "target": "t", "engineer": "", "engineer_step": None,
            "data": data}
    paths = write_reports(result, str(tmp_path), n_boot=200, provenance=prov)
    with open(paths["csv"]) as f:
        rows = list(csv.DictReader(f))
    assert [r["counter_success"] for r in rows] == ["0.00", "100.00"]
    assert [r["counter_even_n"] for r in rows] == ["3", "3"] and rows[1]["average"] == "100.00"
    md = open(paths["md"]).read()
    assert "| Counter even | Counter odd | Counter success | Avg |" in md
    assert "| agent that stops in time | Counter | 6 | +100.0" in md
    assert json.load(open(paths["json"]))["provenance"]["data"] == data


HINT = ("def hook(ctx, nb):\n    if ctx['state']['count'] >= ctx['task']['target']:\n"
        "        return {'message': 'Submit now.'}\n    return None\n")


def test_the_toy_patched_rerun_is_scored(counter, tmp_path):
    from hr1_jax.patch.schema import SCHEMA_VERSION
    from hr1_jax.rollout.reward import OK, RewardContext, score_patch

    config = base_config()
    target = _target(config, True)
    failing = _rollout(config, target)
    row = rl_row("system", "packet", baseline_metadata("counter", "test", 0, failing, target_name=config.target.name))
    patch = {"schema_version": SCHEMA_VERSION, "benchmark": "counter", "description": "tell it to stop",
             "actions": [{"type": "add_code_hook", "hook": "make_pre_hint", "code": HINT}]}
    with RewardContext(config, cache_dir=str(tmp_path / "cache"), target=target) as ctx:
        result = score_patch(patch, row, ctx)
    assert result.eval_status == OK, result.reason
    assert result.delta_pass_rate == 1.0
