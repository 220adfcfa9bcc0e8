"""The one row builder (hr1_jax/rollout/rows.py): typed episode records that round-trip the
results files byte for byte, packets shaped by the benchmark's descriptor (the toy benchmark's from
the defaults), `rollout.packet.<benchmark>` limits, and stored batches -> rows."""
import dataclasses
import json

import pytest

from envs import registry
from envs.plugin import TRACE_LIMITS, Packets
from hr1_jax.config import base_config
from hr1_jax.rollout.batches import read_episodes, store_baseline_batch, write_results
from hr1_jax.rollout.packets import failure_packet
from hr1_jax.rollout.pool import WorkerPool, failed_episode
from hr1_jax.rollout.rows import batch_packets, build_rows
from hr1_jax.runtime import EpisodeResult, run_episode
from toy_benchmark import BENCHMARK as TOY
from toy_env import CounterAgent, CounterEnv

# the toy with its own packet rules: a title, a leak rule and runtime signals of its own
SHAPED = dataclasses.replace(TOY, name="shaped", packets=Packets(
    title="Shaped Counter", also_forbid="target counts", signals="test_rows_builder:add_calls",
    limits=(("max_obs_chars", 40), ("max_assistant_chars", 40), ("max_approx_tokens", 50000))))


def add_calls(actions, observations):
    return [f"add_calls: {sum(name == 'add' for name, _ in actions)}", f"observations: {len(observations)}"]


def dict_episodes(ids, overshoot=True):
    env = CounterEnv()
    tasks = env.tasks("test")
    return [run_episode(env, CounterAgent(tasks[i], overshoot=overshoot), tasks[i], seed=0).to_dict() for i in ids]


@pytest.fixture
def toy():
    with registry.registered("counter", "toy_benchmark:BENCHMARK"), \
            registry.registered("shaped", "test_rows_builder:SHAPED"):
        yield


def test_episode_records_round_trip_the_results_file_byte_for_byte(tmp_path):
    eps = dict_episodes(range(3)) + [failed_episode("counter", "test", 3, 0, "endpoint down")]
    write_results(str(tmp_path / "a"), eps, {})
    records = read_episodes(str(tmp_path / "a"))
    assert [r.task_id for r in records] == [0, 1, 2, 3] and records[3].infra_failed
    write_results(str(tmp_path / "b"), [r.to_dict() for r in records], {})
    assert (tmp_path / "a/results.jsonl").read_bytes() == (tmp_path / "b/results.jsonl").read_bytes()
    with pytest.raises(ValueError, match=r"missing \['identity'\], unknown \['extra'\]"):
        row = dict(eps[0], extra=1)
        del row["identity"]
        EpisodeResult.from_dict(row)


def test_the_toy_packet_comes_from_the_defaults(toy):
    eps = [EpisodeResult.from_dict(ep) for ep in dict_episodes(range(4))]
    packet, n = failure_packet("counter", "batch_000", eps)
    assert registry.benchmark("counter").packets == Packets() and dict(Packets().limits) == dict(TRACE_LIMITS)
    assert n == 4 and packet.startswith("# counter no-harness failure traces")
    assert "- source run: counter/batch_000" in packet and "task indices or answers.\n" in packet
    assert "- take_action: 0" in packet and "- nothing_happens_observations: 0" in packet
    assert packet == failure_packet("counter", "batch_000", eps, limits=dict(TRACE_LIMITS))[0]


def test_the_descriptor_shapes_the_packet(toy):
    eps = [EpisodeResult.from_dict(ep) for ep in dict_episodes(range(4))]
    packet, n = failure_packet("shaped", "batch_007", eps, max_failures=2)
    assert n == 2 and packet.startswith("# Shaped Counter no-harness failure traces")
    assert "task indices or answers, nor target counts.\n" in packet
    assert "- add_calls: " in packet and "- observations: " in packet and "take_action" not in packet
    infra = EpisodeResult.from_dict(failed_episode("shaped", "test", 9, 0, "down"))
    assert failure_packet("shaped", "b", [infra])[1] == 0   # an infrastructure failure is never a trace


def test_rollout_packet_config_holds_every_registered_benchmarks_limits():
    c = base_config()
    for name in registry.names():
        assert c.rollout.packet[name].to_dict() == dict(registry.benchmark(name).packets.limits)
    assert c.rollout.packet.alfworld.max_obs_chars == 350 and c.rollout.packet.dbbench.max_failures_per_batch == 4


def test_stored_batches_become_rows_with_the_configured_limits(toy, tmp_path):
    c = base_config()
    with WorkerPool(c, num_workers=1, job_timeout_s=120, max_retries=0) as pool:
        for batch_id, (ids, overshoot) in enumerate([(range(4), True), (range(4, 8), False)]):
            target = {**c.target.to_dict(), "scripted": {"overshoot": overshoot}}
            status, summary = store_baseline_batch(pool, str(tmp_path / f"counter/batch_{batch_id:03d}"), "counter",
                                                   "test", list(ids), batch_id, target=target, seed=0, threshold=1.0)
            assert status["status"] == "ok" and summary["pass_count"] == (0 if overshoot else 4)
    assert json.loads((tmp_path / "counter/batch_001/status.json").read_text()) == status
    (tmp_path / "counter/batch_002").mkdir()
    (tmp_path / "counter/batch_002/status.json").write_text(json.dumps({"status": "failed"}))
    rows, skipped = build_rows(c, str(tmp_path), "counter")
    assert skipped == {"not_ok": 1, "too_few_failures": 1} and len(rows) == 1
    meta = rows[0]["metadata"]
    assert meta["batch_tag"] == "counter_batch_000" and meta["included_failures"] == 4
    assert meta["schema_style"] == "counter_life_multihook_v1" and meta["prompt_version"] == "hr1-prompt-v1"
    packets = list(batch_packets(c, str(tmp_path), "counter"))
    assert rows[0]["prompt"][1]["content"].endswith(packets[0].packet.strip())
    with c.unlocked():
        c.rollout.packet.counter = dict(TRACE_LIMITS, max_approx_tokens=300)
    assert 1 <= next(batch_packets(c, str(tmp_path), "counter")).n_failures < 4
