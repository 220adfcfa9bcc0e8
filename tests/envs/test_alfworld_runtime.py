"""ALFWorld end to end through the runtime: a 10-task batch with the scripted target, with and without
patches, and every shipped reference ALFWorld patch on the same tasks (real engine; ~2-3 s a reset)."""
import json

import ml_collections
import pytest

pytest.importorskip("alfworld")

from envs.alfworld import unpack  # noqa: E402
from envs.alfworld.config import defaults  # noqa: E402
from envs.alfworld.env import ALFWorldEnv  # noqa: E402
from envs.alfworld.tasks import balanced_sample  # noqa: E402
from envs.alfworld.scripted import ScriptedAgent  # noqa: E402
from hr1_jax.patch.reference import HELDOUT_DIR  # noqa: E402
from hr1_jax.runtime import run_episode  # noqa: E402

pytestmark = pytest.mark.alfworld

PATCHES = HELDOUT_DIR
PATCH_FILES = sorted(PATCHES.glob("*/seed*/alfworld.json"))
HR1_PATCH = PATCHES / "harness-r1" / "seed20260721" / "alfworld.json"
SEED = 0
STATUSES = {"COMPLETED", "AGENT_INVALID_ACTION", "TASK_LIMIT_REACHED"}


# These tests check the ctx contract (reference patches run without exceptions), not timing:
# a loose wall clock keeps a loaded CI box from turning slow hook calls into time-outs, while the
# reference line budget still bounds the work.
def compile_reference(path):
    from hr1_jax.patch import compile_patch
    return compile_patch(json.loads(path.read_text()), "alfworld", time_budget_s=1.0)


@pytest.fixture(scope="module")
def env():
    unpack.unpack()
    e = ALFWorldEnv(defaults())
    yield e
    e.close()


@pytest.fixture(scope="module")
def tasks(env):
    return balanced_sample(env.tasks("harness_r1_test"), 10)


def run_batch(env, tasks, patch=None):
    cfg = ml_collections.ConfigDict({"skill": 0.6, "hint_follow_prob": 0.7})
    return [run_episode(env, ScriptedAgent(t, SEED, cfg), t, patch, seed=SEED) for t in tasks]


@pytest.fixture(scope="module")
def baseline(env, tasks):
    return run_batch(env, tasks)


def test_baseline_batch_end_to_end(baseline, tasks):
    assert len({t.payload["task_type"] for t in tasks}) == 6
    for r, t in zip(baseline, tasks):
        assert r.status in STATUSES, (r.status, r.error)
        assert r.reward in (0.0, 1.0) and r.success == (r.reward == 1.0)
        assert r.identity["game_sha256"] == t.payload["game_sha256"]
        traj = r.trajectory
        assert traj[0]["role"] == "system" and traj[1]["content"].startswith("Here is your task. ")
        assert r.actions and r.counts["env_steps"] == len(r.actions)
        assert r.counts["hook_calls"] == 0 and r.hook_events == []
    n = sum(r.success for r in baseline)
    print(f"\nALFWorld baseline (scripted, skill 0.6): {n}/{len(baseline)} succeeded")
    assert 0 < n < len(baseline)          # a moderate baseline that leaves room for patches


def test_batch_with_the_harness_r1_patch(env, tasks, baseline):
    patch = compile_reference(HR1_PATCH)
    patched = run_batch(env, tasks, patch)
    calls = sum(r.counts["hook_calls"] for r in patched)
    errors = sum(r.counts["hook_errors"] + r.counts["hook_timeouts"] for r in patched)
    applied = [e for r in patched for e in r.hook_events if e["applied"]]
    assert calls > 0 and errors / calls < 0.01
    assert {e["hook"] for e in applied} >= {"on_init", "make_pre_hint"}
    for r in patched:
        assert r.status in STATUSES
        assert "Some tips that may help for this task:" in r.trajectory[0]["content"]
    b = [r.success for r in baseline]
    p = [r.success for r in patched]
    rescued = sum(x and not y for x, y in zip(p, b))
    broken = sum(y and not x for x, y in zip(p, b))
    print(f"\nharness-r1/seed20260721 on 10 tasks: baseline {sum(b)}/10 -> patched {sum(p)}/10 "
          f"(rescued {rescued}, broken {broken}); hook calls {calls}, exceptions {errors}")


# The two Harness-R1 patches below call a helper `text` in make_pre_hint that only their other hooks
# define (each hook compiles in its own namespace). It is reached only until on_post_step first
# stores nb["target_type"] (normally turn 0 only): about one NameError per episode, a bug in the
# patch that any faithful runtime reproduces (~4% of hook calls in short scripted episodes).
KNOWN_FIRST_TURN_NAME_ERROR = {"harness-r1/seed20260720/alfworld.json", "harness-r1/seed20260722/alfworld.json"}


@pytest.mark.slow
@pytest.mark.parametrize("path", PATCH_FILES, ids=lambda p: str(p.relative_to(PATCHES)))
def test_reference_patch_runs_on_our_ctx(env, tasks, baseline, path):
    name = str(path.relative_to(PATCHES))
    patch = compile_reference(path)          # raises on any compile error
    results = run_batch(env, tasks, patch)
    calls = sum(r.counts["hook_calls"] for r in results)
    errors = [e for r in results for e in r.hook_events if e["status"] in ("error", "timeout", "memory")]
    rate = len(errors) / max(1, calls)
    b, p = sum(r.success for r in baseline), sum(r.success for r in results)
    print(f"\n{name}: hook calls {calls}, exceptions {len(errors)} ({rate:.2%}); success {b}/10 -> {p}/10")
    assert calls > 0
    assert all(r.status in STATUSES for r in results)
    if name in KNOWN_FIRST_TURN_NAME_ERROR:
        for r in results:
            first_post = min((e["turn"] for e in r.hook_events if e["hook"] == "on_post_step"), default=10**9)
            for e in r.hook_events:
                if e["status"] in ("error", "timeout", "memory"):
                    assert e["hook"] == "make_pre_hint" and "'text' is not defined" in e["error"], e
                    assert e["turn"] <= first_post, e
    else:
        assert rate < 0.01, errors[:3]
