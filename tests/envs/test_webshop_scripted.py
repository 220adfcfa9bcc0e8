"""WebShop (substitute) end to end: the scripted target through the real runtime, with and without
patches; every shipped reference WebShop patch on our ctx; the demo replay states; the direction of
the Harness-R1 held-out patches."""
import json
import statistics
from pathlib import Path

import pytest

from envs.webshop.env import WebShopEnv
from envs.webshop.scripted import ScriptedAgent, kinds_of
from hr1_jax.patch.reference import REFERENCE_PATCH_DIR
from hr1_jax.runtime import run_episode

REF = REFERENCE_PATCH_DIR
EXAMPLE = REF / "examples" / "webshop_patch.json"
DEMO = REF / "demo" / "artifacts"
HELDOUT = sorted((REF / "examples" / "heldout_generalization").glob("*/seed*/webshop.json"))
HR1_HELDOUT = [p for p in HELDOUT if p.parts[-3] == "harness-r1"]
ALL_PATCHES = [EXAMPLE, DEMO / "patch.json"] + HELDOUT
# This Qwen3.5-397B patch calls `hasattr`, which the reference sandbox does not provide (spec §3.1
# item 10), so its helper raises NameError whenever a pending Buy Now meets unselected options: the
# patch's own bug, which it had upstream too (held-out delta -2/490).
KNOWN_BROKEN = {"qwen3.5-397b/seed20260722/webshop.json": "NameError: name 'hasattr' is not defined"}
SEED = 0
CFG = {"skill": 0.6, "hint_follow_prob": 0.7}


def compile_reference(path: Path):
    from hr1_jax.patch import compile_patch
    # ctx-contract check, not timing: a loose clock so a loaded CI box cannot add time-outs.
    return compile_patch(json.loads(path.read_text()), "webshop", time_budget_s=1.0)   # raises on a compile error


@pytest.fixture(scope="module")
def env():
    return WebShopEnv()


@pytest.fixture(scope="module")
def tasks(env):
    return env.tasks("test")


def run_batch(env, tasks, patch=None):
    return [run_episode(env, ScriptedAgent(t, SEED, CFG), t, patch, seed=SEED) for t in tasks]


@pytest.fixture(scope="module")
def baseline10(env, tasks):
    return run_batch(env, tasks[:10])


def summary(results):
    return statistics.mean(r.reward for r in results), sum(r.success for r in results)


def test_scripted_agent_is_deterministic_given_seed_and_messages(env, tasks):
    a = run_batch(env, tasks[20:25])
    b = run_batch(env, tasks[20:25])
    assert [r.actions for r in a] == [r.actions for r in b]
    assert [r.reward for r in a] == [r.reward for r in b]
    messages = a[0].trajectory[:4]
    tools = env.tool_specs()
    reply = ScriptedAgent(tasks[20], SEED, CFG).chat(messages, tools)
    assert reply == ScriptedAgent(tasks[20], SEED, CFG).chat(messages, tools)
    assert reply["role"] == "assistant" and len(reply["tool_calls"]) == 1
    # another seed plays differently on some task
    c = [run_episode(env, ScriptedAgent(t, 1, CFG), t, None, seed=1) for t in tasks[20:25]]
    assert [r.actions for r in c] != [r.actions for r in a]


def test_skill_one_solves_and_the_default_baseline_is_moderate(env, tasks):
    perfect = [run_episode(env, ScriptedAgent(t, SEED, {"skill": 1.0}), t, None, seed=SEED) for t in tasks[:20]]
    assert statistics.mean(r.reward for r in perfect) >= 0.95
    results = run_batch(env, tasks[:100])
    mean, passed = summary(results)
    print(f"\nwebshop (substitute) test[0:100] scripted baseline: mean reward {mean:.3f}, success {passed}/100")
    assert 0.5 <= mean <= 0.8 and 20 <= passed <= 55
    assert all(r.status in ("completed", "task_limit_reached") for r in results)
    kinds = {k for r in results for a in r.actions for k in ("[blocked]",) if k in a}
    assert not kinds                                   # no patch, no blocks


def test_ten_task_batch_end_to_end_without_and_with_a_patch(env, tasks, baseline10):
    for r in baseline10:
        assert r.error is None and 0.0 <= r.reward <= 1.0 and r.success == (r.reward >= 1.0)
        assert r.identity["webshop_task_manifest"]["index"] == r.task_id
        assert r.trajectory[0]["role"] == "system" and r.trajectory[1]["content"].startswith("The initial observation:")
        assert r.counts["hook_calls"] == 0
    patched = run_batch(env, tasks[:10], compile_reference(EXAMPLE))
    calls = sum(r.counts["hook_calls"] for r in patched)
    assert calls > 0 and sum(r.counts["hook_errors"] + r.counts["hook_timeouts"] for r in patched) == 0
    for r in patched:
        assert r.error is None
        assert "Some tips that may help for this task:" in r.trajectory[0]["content"]
    # same tasks, same identities
    assert [r.identity for r in patched] == [r.identity for r in baseline10]
    (mb, pb), (mp, pp) = summary(baseline10), summary(patched)
    print(f"\nexample patch on test[0:10]: reward {mb:.3f} -> {mp:.3f}, success {pb}/10 -> {pp}/10")


@pytest.mark.parametrize("path", ALL_PATCHES, ids=lambda p: str(p.relative_to(REF)))
def test_reference_patch_runs_on_our_ctx(env, tasks, baseline10, path):
    patch = compile_reference(path)                 # zero compile errors
    results = run_batch(env, tasks[:10], patch)
    calls = sum(r.counts["hook_calls"] for r in results)
    errors = [e for r in results for e in r.hook_events if e["status"] in ("error", "memory", "timeout")]
    (mb, pb), (mp, pp) = summary(baseline10), summary(results)
    rel = str(path.relative_to(REF))
    print(f"\n{rel}: {calls} hook calls, {len(errors)} exceptions ({len(errors) / max(calls, 1):.2%}); "
          f"reward {mb:.3f} -> {mp:.3f}, success {pb} -> {pp}")
    assert calls > 0 and all(r.error is None for r in results)
    known = next((msg for key, msg in KNOWN_BROKEN.items() if rel.endswith(key)), None)
    if known:
        assert {e["error"] for e in errors} <= {known}
    else:
        assert len(errors) < 0.01 * calls, {e["error"] for e in errors}


def test_demo_replay_states_give_the_recorded_effects(env, tasks):
    """The stored demo guard on the three stored ctx states, then on the same situation built by
    our env: a pending Buy Now with visible unselected colour/size is rewritten to the option."""
    patch = compile_reference(DEMO / "patch.json")
    for scenario in json.loads((DEMO / "replay_states.json").read_text())["scenarios"]:
        outcomes = patch.call("on_before_action", scenario["ctx"], {})
        result = outcomes[0].result
        kind = result["kind"] if result else "no intervention"
        assert kind == scenario["expect"], scenario["id"]
        if kind == "rewrite_action":
            assert env.action_from_hook(result["action"], None, "on_before_action").text == "click[gray]"
    task = next(t for t in tasks if t.oracle["goal"]["goal_options"].get("color")
                and t.oracle["goal"]["goal_options"].get("size"))
    goal = task.oracle["goal"]
    env.reset(task)
    env.step(env.action_from_tool_call("search_action", {"keywords": goal["query"]}))
    env.site.product = env.catalog.by_asin(goal["asin"])
    env.site.page = "item"
    buy = env.action_from_tool_call("click_action", {"value": "buy now"})
    result = patch.call("on_before_action", env.hook_context("on_before_action", turn=3, action=buy), {})[0].result
    assert result["kind"] == "rewrite_action"
    rewritten = env.action_from_hook(result["action"], buy, "on_before_action")
    assert rewritten.text == f"click[{goal['goal_options']['color']}]"
    for value in goal["goal_options"].values():
        env.step(env.action_from_tool_call("click_action", {"value": value}))
    ctx = env.hook_context("on_before_action", turn=5, action=buy)
    assert patch.call("on_before_action", ctx, {})[0].result is None


def test_agent_follows_hint_kinds_but_never_hint_contents(env, tasks):
    assert kinds_of("Do not buy yet: select the required color option") >= {"options"}
    assert "buy" not in kinds_of("Do not buy yet: select the required color option")
    assert "budget" in kinds_of("This item is over the budget, go back to search")
    # a patch whose hints name a bogus option and product: never clicked
    bogus = {"schema_version": "harness-r1-patch-v1", "benchmark": "webshop", "description": "bogus hints",
             "actions": [{"type": "add_code_hook", "hook": "make_pre_hint", "code":
                          "def hook(ctx, nb):\n    return {'message': 'Select the option zq-ultraviolet and "
                          "then click product b0zzzzzzzz; buy now.'}"}]}
    from hr1_jax.patch import compile_patch
    results = run_batch(env, tasks[:10], compile_patch(bogus, "webshop"))
    actions = " ".join(a for r in results for a in r.actions)
    assert "zq-ultraviolet" not in actions and "b0zzzzzzzz" not in actions


def test_harness_r1_heldout_patches_change_outcomes(env, tasks):
    """Report the direction of the three Harness-R1 held-out WebShop patches (a block on Buy Now
    while required options are unselected) on test[0:40]; upstream they gained +40..+48/490."""
    batch = tasks[:40]
    base = run_batch(env, batch)
    mb, pb = summary(base)
    deltas = []
    for path in HR1_HELDOUT:
        mp, pp = summary(run_batch(env, batch, compile_reference(path)))
        deltas.append(mp - mb)
        print(f"\n{path.relative_to(REF)} on webshop (substitute) test[0:40]: reward {mb:.3f} -> {mp:.3f} "
              f"({mp - mb:+.3f}), success {pb}/40 -> {pp}/40")
    assert sum(deltas) > 0
