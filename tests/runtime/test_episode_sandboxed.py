"""The episode loop with real sandboxed hooks (hr1_jax.patch.compile_patch) on the toy counter env."""
import json

from hr1_jax.patch import compile_patch
from hr1_jax.runtime import run_episode
from toy_env import CounterAgent, CounterEnv


def patch(**hooks):
    return {"benchmark": "webshop", "description": "toy",
            "actions": [{"type": "add_code_hook", "hook": h, "code": c} for h, c in hooks.items()]}


def test_sandboxed_hooks_take_effect_and_failures_are_contained():
    env = CounterEnv()
    t = env.tasks("test")[1]  # target 2
    p = patch(
        on_init="def hook(ctx, nb):\n    nb['seen'] = 0\n    return {'skills': ['count to the target exactly']}\n",
        make_pre_hint="def hook(ctx, nb):\n    nb['seen'] = nb['seen'] + 1\n"
                      "    if nb['seen'] == 2:\n        return {'message': 'halfway there'}\n    return None\n",
        on_before_action="def hook(ctx, nb):\n    total = 0\n    for i in range(100000):\n        total += i\n"
                         "    return None\n",
        on_post_step="def hook(ctx, nb):\n    return {'kind': 'inject_hint', 'message': ctx['missing_key']}\n")
    compiled = compile_patch(p, "webshop")
    r = run_episode(env, CounterAgent(t), t, compiled)
    assert r.success and r.actions == ["add[1]", "add[1]", "submit"]
    assert "- count to the target exactly" in r.trajectory[0]["content"]
    assert {"role": "user", "content": "halfway there"} in r.trajectory
    by_hook = {}
    for e in r.hook_events:
        by_hook.setdefault(e["hook"], set()).add(e["status"])
    assert by_hook["on_before_action"] == {"timeout"} and by_hook["on_post_step"] == {"error"}
    assert r.counts["hook_timeouts"] == 3 and r.counts["hook_errors"] == 2
    assert all(e["error"] for e in r.hook_events if e["status"] in ("timeout", "error"))
    json.dumps(r.to_dict())


def test_dict_patch_is_compiled_with_config_budgets_and_block_rewrite_work():
    env = CounterEnv()
    t = env.tasks("test")[3]  # target 4
    p = patch(on_before_action="def hook(ctx, nb):\n"
                               "    if ctx['state']['count'] == 0 and ctx['action']['tool'] == 'add':\n"
                               "        return {'kind': 'rewrite_action', 'action': 'add[3]'}\n"
                               "    if ctx['action']['tool'] == 'submit' and not nb.get('b'):\n"
                               "        nb['b'] = 1\n"
                               "        return {'kind': 'block_and_prompt', 'message': 'double-check first'}\n"
                               "    return None\n")
    cfg = {"patch_protocol": {"time_budget_s": 0.5, "line_budget": 5000, "max_forced_actions_per_episode": 0,
                              "require_code_hook_only": True, "reject_runtime_noop": True,
                              "enforce_hook_once": False, "max_total_code_chars": 0}}
    r = run_episode(env, CounterAgent(t), t, p, config=cfg)
    assert r.actions == ["add[3]", "add[1]", "[blocked] submit", "submit"] and r.success
    assert r.counts["rewritten_actions"] == 1 and r.counts["blocked_actions"] == 1
