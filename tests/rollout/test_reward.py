"""The paired rerun reward on DBBench (SQLite backend) with the scripted target: cache, dedupe,
identity errors, infra failures excluded (never 0), invalid patches scored 0."""
import copy
import json
import os
import socket
import threading

import pytest

from hr1_jax.config import base_config, validate_config
from hr1_jax.rollout.batches import baseline_metadata, run_batch
from hr1_jax.rollout.identity import IdentityError
from hr1_jax.rollout.pool import WorkerPool
from hr1_jax.rollout.reward import RewardContext, score_group, score_response


HINT_HOOK = """def hook(ctx, nb):
    if ctx["predicates"]["no_sql_yet"] and not nb.get("hinted"):
        nb["hinted"] = True
        return {"message": "%s"}
    return None
"""
INIT_HOOK = """def hook(ctx, nb):
    return {"skills": [{"text": "Inspect the schema with DESCRIBE first and quote identifiers with backticks."}]}
"""


def response(message="Probe the table schema (DESCRIBE) before writing the final query.", init=True):
    actions = [{"type": "add_code_hook", "hook": "make_pre_hint", "code": HINT_HOOK % message}]
    if init:
        actions.insert(0, {"type": "add_code_hook", "hook": "on_init", "code": INIT_HOOK})
    patch = {"benchmark": "dbbench", "description": "schema probing hint", "actions": actions}
    return f"- recurring: guessed identifiers\n</think>\n<patch>{json.dumps(patch)}</patch>"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    c = base_config()
    c.benchmark, c.tasks = "dbbench", "0:10"
    c.dbbench.backend = "sqlite"
    c.rollout.num_workers = 2
    c.rollout.max_job_retries = 1
    validate_config(c)
    pool = WorkerPool(c)
    episodes = run_batch(pool, "dbbench", "test", list(range(10)), target=c.target.to_dict(), seed=0)
    meta = baseline_metadata("dbbench", "test", 0, episodes, target_name=c.target.name)
    row = {"prompt": [], "label": "", "metadata": meta}
    yield c, pool, row, tmp_path_factory.mktemp("cache")
    pool.close()


def test_same_patch_twice_same_reward_second_is_cache_hit(setup):
    c, pool, row, cache = setup
    ctx = RewardContext(c, pool=pool, cache_dir=str(cache / "a"))
    first = score_response(row, response(), ctx)
    assert first.eval_status == "ok" and first.valid_patch and not first.cache_hit
    assert first.batch_size == 10 and first.hook_calls > 0 and first.hook_errors == 0
    assert first.score == pytest.approx(first.patched_average_reward - first.baseline_average_reward)
    assert first.delta_pass_rate == pytest.approx((first.patched_pass - first.baseline_pass) / 10)
    assert first.patched_average_reward == pytest.approx(sum(first.patched_rewards.values()) / 10)
    second = score_response(row, response(), ctx)
    assert second.cache_hit and second.score == first.score and ctx.counters["evaluations"] == 1
    # A fresh cache reruns and gets the same reward (deterministic scripted target).
    again = score_response(row, response(), RewardContext(c, pool=pool, cache_dir=str(cache / "b")))
    assert not again.cache_hit and again.score == first.score and again.patched_rewards == first.patched_rewards


def test_group_dedupes_identical_patches_and_concurrent_callers_share_one_evaluation(setup):
    c, pool, row, cache = setup
    ctx = RewardContext(c, pool=pool, cache_dir=str(cache / "group"))
    texts = [response(), response("Run DESCRIBE on the table first."), response(), "no patch here", response()]
    results = score_group([row] * 5, texts, ctx)
    assert ctx.counters["evaluations"] == 2 and ctx.counters["deduped"] == 2
    assert results[0].score == results[2].score == results[4].score
    assert results[3].eval_status == "invalid_patch" and results[3].score == 0.0 and not results[3].excluded
    # Two threads asking for the same new key: one evaluates, the other waits on the file lock.
    ctx2 = RewardContext(c, pool=pool, cache_dir=str(cache / "threads"))
    out = [None, None]
    threads = [threading.Thread(target=lambda i=i: out.__setitem__(i, score_response(row, response(init=False), ctx2)))
               for i in range(2)]
    [t.start() for t in threads]
    [t.join(120) for t in threads]
    assert ctx2.counters["evaluations"] == 1 and sorted(r.cache_hit for r in out) == [False, True]


def test_tampered_batch_raises_identity_error(setup):
    c, pool, row, cache = setup
    ctx = RewardContext(c, pool=pool, cache_dir=str(cache / "tamper"))
    swapped = copy.deepcopy(row)
    meta = swapped["metadata"]
    meta["task_ids"][3] = 42                     # one task swapped for another...
    meta["baseline_rewards"]["42"] = meta["baseline_rewards"].pop("3")
    digest = meta["identity"]["task_manifests"].pop("3")
    meta["identity"]["task_manifests"]["42"] = digest   # ...keeping its old manifest digest
    from hr1_jax.rollout.identity import batch_digest
    meta["identity"]["batch_sha256"] = batch_digest(meta["identity"])  # even with a recomputed batch digest
    with pytest.raises(IdentityError, match="task 42"):
        score_response(swapped, response(), ctx)
    lazy = copy.deepcopy(row)
    lazy["metadata"]["task_ids"][3] = 42         # swapped without updating the identity
    with pytest.raises(IdentityError):
        score_response(lazy, response(), ctx)
    other_target = copy.deepcopy(row)
    other_target["metadata"]["target_agent_name"] = "someone-else"
    with pytest.raises(IdentityError, match="target"):
        score_response(other_target, response(), ctx)


def test_dead_endpoint_is_eval_failed_not_zero_and_not_cached(setup):
    c, pool, row, cache = setup
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    target = dict(c.target.to_dict(), kind="openai", base_url=f"http://127.0.0.1:{port}/v1", model="m",
                  max_retries=1, timeout_s=2.0, backoff_s=0.01, name=c.target.name)
    ctx = RewardContext(c, pool=pool, cache_dir=str(cache / "dead"), target=target)
    r = score_response(row, response(), ctx)
    assert r.eval_status == "eval_failed" and r.score is None and r.excluded and r.valid_patch
    assert "Connection refused" in r.reason or "failed after" in r.reason
    assert not any(f == "reward.json" for _, _, files in os.walk(cache / "dead") for f in files)
    assert ctx.counters["eval_failed"] == 1


def test_delta_pass_rate_metric_is_a_separate_cache_entry(setup):
    c, pool, row, cache = setup
    c2 = copy.deepcopy(c)
    c2.rollout.reward_metric = "delta_pass_rate"
    avg = score_response(row, response(), RewardContext(c, pool=pool, cache_dir=str(cache / "m")))
    ctx = RewardContext(c2, pool=pool, cache_dir=str(cache / "m"))
    r = score_response(row, response(), ctx)
    assert not r.cache_hit and r.cache_key != avg.cache_key and ctx.counters["evaluations"] == 1
    assert r.reward_metric == "delta_pass_rate" and r.score == pytest.approx(r.delta_pass_rate)


def patch_response(description="schema probing hint", code=None):
    code = code or HINT_HOOK % "Run DESCRIBE on the table first."
    patch = {"benchmark": "dbbench", "description": description,
             "actions": [{"type": "add_code_hook", "hook": "make_pre_hint", "code": code}]}
    return f"- recurring: guessed identifiers\n</think>\n<patch>{json.dumps(patch)}</patch>"


def test_one_bad_response_costs_only_itself(setup):
    c, pool, row, cache = setup
    ctx = RewardContext(c, pool=pool, cache_dir=str(cache / "bad"))
    texts = [patch_response(description="probe \ud800 first"),    # lone surrogate (a JSON escape)
             patch_response(code="def hook(ctx, nb):\n    return " + "(" * 5000 + "\n"),
             "\x00garbage \ud800 <patch>{]</patch>",
             patch_response()]
    results = score_group([row] * 4, texts, ctx)
    assert [r.eval_status for r in results] == ["ok", "invalid_patch", "invalid_patch", "ok"]
    assert results[0].cache_key != results[3].cache_key and results[0].hook_calls > 0
    assert all(r.score == 0.0 and not r.excluded for r in results[1:3])
    assert ctx.counters["invalid"] == 2 and ctx.counters["evaluations"] == 2
    stored = [os.path.join(folder, name) for folder, _, files in os.walk(cache / "bad")
              for name in files if name.endswith(".json")]
    assert len(stored) == 4  # patch.json + reward.json of both scored patches, in strict UTF-8
    assert any(json.loads(open(p, "rb").read().decode("utf-8")).get("description") == "probe ? first"
               for p in stored)


def test_a_group_of_invalid_responses_starts_no_rollout_workers(setup, tmp_path):
    c, _, row, _ = setup
    ctx = RewardContext(c, cache_dir=str(tmp_path))   # owns its pool, made on first use
    results = score_group([row] * 2, ["I am not sure.", "<patch>{]</patch>"], ctx)
    assert [r.eval_status for r in results] == ["invalid_patch"] * 2
    assert ctx._pool is None
    ctx.close()


def test_a_crash_inside_compilation_is_an_invalid_sample(setup, monkeypatch):
    import hr1_jax.patch
    real = hr1_jax.patch.compile_patch

    def compile_or_crash(patch, *args, **kwargs):
        if patch.get("description") == "boom":
            raise MemoryError  # what the parser raises on some pathological sources
        return real(patch, *args, **kwargs)

    monkeypatch.setattr(hr1_jax.patch, "compile_patch", compile_or_crash)
    c, pool, row, cache = setup
    ctx = RewardContext(c, pool=pool, cache_dir=str(cache / "crash_compile"))
    crashed, fine = score_group([row] * 2, [patch_response("boom"), patch_response()], ctx)
    assert crashed.eval_status == "invalid_patch" and "MemoryError" in crashed.reason and crashed.score == 0.0
    assert fine.eval_status == "ok" and ctx.counters["invalid"] == 1


def test_a_crash_inside_the_rerun_is_an_eval_failed_sample(setup, monkeypatch):
    import hr1_jax.rollout.reward as reward
    real = reward.submit_batch

    def submit_or_crash(*args, patch, **kwargs):
        if patch["description"] == "crash":
            raise RuntimeError("worker pool broke")
        return real(*args, patch=patch, **kwargs)

    monkeypatch.setattr(reward, "submit_batch", submit_or_crash)
    c, pool, row, cache = setup
    ctx = RewardContext(c, pool=pool, cache_dir=str(cache / "crash_rerun"))
    crashed, fine = score_group([row] * 2, [patch_response("crash"), patch_response()], ctx)
    assert crashed.eval_status == "eval_failed" and crashed.excluded and crashed.score is None
    assert "worker pool broke" in crashed.reason and crashed.cache_key
    assert not os.path.exists(cache / "crash_rerun" / row["metadata"]["identity"]["batch_sha256"][:16]
                              / crashed.cache_key / "reward.json")  # a failure is never cached
    assert fine.eval_status == "ok" and ctx.counters["eval_failed"] == 1


def test_cache_keys_of_encodable_patches_are_unchanged_by_sanitising(setup):
    from envs.base import canonical_sha256
    from hr1_jax.rollout.reward import _meta, cache_key, prepare_patch
    c, pool, row, cache = setup
    ctx = RewardContext(c, pool=pool, cache_dir=str(cache / "keys"))
    meta = _meta(row, ctx)
    patch, status, _ = prepare_patch(patch_response("sch\u00e9ma first"), "dbbench", c)
    raw = canonical_sha256({"patch": patch, "batch": meta["identity"]["batch_sha256"],
                            "baseline_rewards": meta["baseline_rewards"], "context": ctx.reward_context(meta)})
    assert status == "ok" and cache_key(patch, meta, ctx) == raw[:32]


class RecordingPool:
    """The real pool, with the order of job submissions and result waits written down."""

    def __init__(self, pool):
        self.pool, self.num_workers, self.events = pool, pool.num_workers, []

    def submit(self, spec):
        handle, events = self.pool.submit(spec), self.events
        events.append(("submit", spec.patch["description"]))

        class Recorded:
            def collect(self, timeout_s=None):
                events.append(("collect", spec.patch["description"]))
                return handle.collect(timeout_s)
        return Recorded()


def test_a_groups_reruns_are_all_in_flight_before_the_first_is_waited_for_in_the_callers_thread(setup, tmp_path):
    c, pool, row, _ = setup
    texts = [patch_response(f"hint {i}") for i in range(3)] + [patch_response("hint 0")]
    recording = RecordingPool(pool)
    threads = threading.active_count()
    results = score_group([row] * 4, texts, RewardContext(c, pool=recording, cache_dir=str(tmp_path / "a")))
    kinds = [kind for kind, _ in recording.events]
    assert kinds == ["submit"] * 6 + ["collect"] * 6   # 3 distinct patches, one job per worker share
    assert [d for _, d in recording.events[:6:2]] == ["hint 0", "hint 1", "hint 2"]
    assert threading.active_count() == threads and all(r.eval_status == "ok" for r in results)
    # Bounded: with at most one rerun in flight, each is waited for before the next is submitted.
    recording.events.clear()
    score_group([row] * 4, texts, RewardContext(c, pool=recording, cache_dir=str(tmp_path / "b")), max_parallel=1)
    assert [kind for kind, _ in recording.events] == ["submit", "submit", "collect", "collect"] * 3
    fresh = score_group([row] * 4, texts, RewardContext(c, pool=pool, cache_dir=str(tmp_path / "c")))
    assert [r.score for r in fresh] == [r.score for r in results]


def test_a_key_another_caller_holds_waits_without_holding_up_the_groups_own_reruns(setup, tmp_path):
    import fcntl
    import time
    from hr1_jax.rollout.reward import _meta, cache_key, prepare_patch
    c, pool, row, _ = setup
    ctx = RewardContext(c, pool=pool, cache_dir=str(tmp_path))
    meta = _meta(row, ctx)
    texts = [patch_response("held elsewhere"), patch_response("ours")]
    held, ours = (os.path.join(str(tmp_path), meta["identity"]["batch_sha256"][:16],
                               cache_key(prepare_patch(t, "dbbench", c)[0], meta, ctx)) for t in texts)
    os.makedirs(held)
    fd = os.open(os.path.join(held, "eval.lock"), os.O_CREAT | os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)   # another caller is evaluating the first patch
    out = []
    worker = threading.Thread(target=lambda: out.extend(score_group([row] * 2, texts, ctx)))
    worker.start()
    deadline = time.monotonic() + 120
    while not os.path.exists(os.path.join(ours, "reward.json")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert os.path.exists(os.path.join(ours, "reward.json")) and worker.is_alive()   # ours ran; the held one waits
    fcntl.flock(fd, fcntl.LOCK_UN)   # released without a result (a failed evaluation): the waiter reruns it
    os.close(fd)
    worker.join(120)
    assert [r.eval_status for r in out] == ["ok", "ok"] and ctx.counters["evaluations"] == 2
    assert os.path.exists(os.path.join(held, "reward.json"))
