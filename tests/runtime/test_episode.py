"""The episode loop on the toy counter env: every hook effect, limits, and failure containment."""
import dataclasses
import json
import time

from hr1_jax.agents.base import AgentError
from hr1_jax.runtime import run_episode
from toy_env import CounterAgent, CounterEnv, DBStyleCounterEnv


@dataclasses.dataclass
class Outcome:
    hook: str
    status: str
    result: dict | None
    error: str | None
    elapsed_s: float


class PyPatch:
    """Runs plain Python hook functions with the compiled-patch call contract (the sandbox itself is
    tested with the patch package); lets these tests pin the runtime's effect semantics."""

    def __init__(self, **hooks):
        self.fns = {k: v if isinstance(v, list) else [v] for k, v in hooks.items()}
        self.hooks = list(self.fns)

    def call(self, hook, ctx, nb):
        out = []
        for fn in self.fns.get(hook, []):
            t0 = time.perf_counter()
            try:
                result, status, error = fn(ctx, nb), "ok", None
            except Exception as e:  # the real runner contains exceptions the same way
                result, status, error = None, "error", repr(e)
            out.append(Outcome(hook, status, result, error, time.perf_counter() - t0))
        return out


def task(i=1, env=None):
    return (env or CounterEnv()).tasks("test")[i]  # task 1: target 2


def test_no_patch_success_and_trajectory_format():
    env, t = CounterEnv(), task()
    r = run_episode(env, CounterAgent(t), t)
    assert (r.reward, r.success, r.status) == (1.0, True, "completed")
    assert r.actions == ["add[1]", "add[1]", "submit"]
    roles = [m["role"] for m in r.trajectory]
    assert roles == ["system", "user"] + ["assistant", "tool"] * 3
    for a, tm in zip(r.trajectory[2::2], r.trajectory[3::2]):
        assert tm["tool_call_id"] == a["tool_calls"][0]["id"]
    assert r.agent["model_calls"] == 3 and r.agent["usage"]["total_tokens"] == 36
    assert r.identity["task_id"] == 1 and len(r.identity["sha256"]) == 64
    json.dumps(r.to_dict())  # JSON-able


def test_on_init_skills_become_tips_and_tool_hint_reaches_tools():
    env, t = CounterEnv(), task()
    seen = {}

    class Spy(CounterAgent):
        def chat(self, messages, tools):
            seen.setdefault("system", messages[0]["content"])
            seen.setdefault("tools", tools)
            return super().chat(messages, tools)

    skills = [{"text": f"tip {i}"} for i in range(7)] + [{"text": ""}]
    patch = PyPatch(on_init=lambda ctx, nb: {"skills": skills, "tool_hint": "count carefully"})
    r = run_episode(env, Spy(t), t, patch)
    assert "Some tips that may help for this task:\n- tip 0" in seen["system"]
    assert "- tip 4" in seen["system"] and "tip 5" not in seen["system"]  # first 5 only
    assert all(tool["function"]["description"].endswith("count carefully") for tool in seen["tools"])
    assert env.tool_specs()[0]["function"]["description"] == "add tool"  # episode-local copy
    assert r.hook_events[0]["effect"] == "skills+tool_hint" and r.hook_events[0]["applied"]


def test_pre_hint_message_injected_before_agent_call():
    env, t = CounterEnv(), task()
    patch = PyPatch(make_pre_hint=lambda ctx, nb: {"message": f"hint at step {ctx['step']}"} if ctx["step"] == 1 else None)
    r = run_episode(env, CounterAgent(t), t, patch)
    idx = [i for i, m in enumerate(r.trajectory) if m["content"] == "hint at step 1"]
    assert len(idx) == 1 and r.trajectory[idx[0] + 1]["role"] == "assistant"
    assert r.counts["hint_messages"] == 1 and r.counts["hook_calls"] == 3



def test_hook_event_rows_are_their_asdict_and_to_dict_can_skip_the_copy():
    from hr1_jax.runtime.episode import HookEvent
    env, t = CounterEnv(), task()
    r = run_episode(env, CounterAgent(t), t, PyPatch(make_pre_hint=lambda ctx, nb: {"message": "go"},
                                                       on_post_step=lambda ctx, nb: 1 / 0))
    assert r.hook_events and {e["hook"] for e in r.hook_events} == {"make_pre_hint", "on_post_step"}
    for row in r.hook_events:
        assert row == dataclasses.asdict(HookEvent(**row))
    assert r.to_dict() == dataclasses.asdict(r)
    shallow = r.to_dict(copy_values=False)
    assert shallow == r.to_dict() and shallow["trajectory"] is r.trajectory
    assert r.to_dict(("reward", "trajectory"))["trajectory"] is not r.trajectory

def test_block_skips_env_step_and_answers_with_tool_message():
    env, t = CounterEnv(), task()

    def block_first_add(ctx, nb):
        if ctx["action"]["tool"] == "add" and not nb.get("blocked"):
            nb["blocked"] = True
            return {"kind": "block_and_prompt", "message": "not yet"}
        return None

    r = run_episode(env, CounterAgent(t), t, PyPatch(on_before_action=block_first_add))
    assert r.trajectory[3] == {"role": "tool", "tool_call_id": r.trajectory[2]["tool_calls"][0]["id"],
                               "name": "add", "content": "not yet"}
    assert r.actions[0] == "[blocked] add[1]" and r.counts["env_steps"] == 3 and r.success
    assert r.counts["blocked_actions"] == 1


def test_rewrite_replaces_action_and_message_follows_tool_message():
    env, t = CounterEnv(), task()

    def rewrite(ctx, nb):
        if ctx["action"]["final_action"] == "add[1]" and ctx["state"]["count"] == 0:
            return {"kind": "rewrite_action", "action": "add[2]", "message": "jumped ahead"}
        return None

    r = run_episode(env, CounterAgent(t), t, PyPatch(on_before_action=rewrite))
    assert r.actions == ["add[2]", "submit"] and r.success
    assert [m["role"] for m in r.trajectory[2:5]] == ["assistant", "tool", "user"]
    assert r.trajectory[4]["content"] == "jumped ahead"
    ev = [e for e in r.hook_events if e["effect"] == "rewrite_action"]
    assert ev[0]["applied"] and ev[0]["detail"] == "add[1] -> add[2]"


def test_post_step_force_applies_to_next_tool_call_and_hint_is_user_message():
    env, t = CounterEnv(), task(3)  # target 4, the agent would add four times

    def post(ctx, nb):
        if ctx["state"]["count"] == 1:
            return {"kind": "force_action", "action": "add[3]", "message": "forcing"}
        return None

    r = run_episode(env, CounterAgent(t), t, PyPatch(on_post_step=post))
    assert r.actions == ["add[1]", "add[3]", "submit"] and r.success
    assert r.counts["forced_actions"] == 1
    assert {"role": "user", "content": "forcing"} in r.trajectory


def test_inject_hint_fixes_overshooting_agent():
    env, t = CounterEnv(), task()
    base = run_episode(env, CounterAgent(t, overshoot=True), t)
    assert base.reward == 0.0
    hint = PyPatch(on_post_step=lambda ctx, nb: {"kind": "inject_hint", "message": "Submit now."}
                   if ctx["state"]["count"] >= ctx["task"]["target"] else None)
    r = run_episode(env, CounterAgent(t, overshoot=True), t, hint)
    assert r.reward == 1.0 and r.counts["hint_messages"] == 1


def test_forced_action_cap():
    env, t = CounterEnv(), task(3)
    always = PyPatch(on_before_action=lambda ctx, nb: {"kind": "force_action", "action": "add[1]"}
                     if ctx["action"]["tool"] == "add" else None)
    cfg = {"patch_protocol": {"max_forced_actions_per_episode": 2}}
    r = run_episode(env, CounterAgent(t), t, always, config=cfg)
    effects = [e["effect"] for e in r.hook_events]
    assert effects.count("force_action") == 2 and effects.count("capped_force_action") == 2
    assert r.counts["forced_actions"] == 2


def test_db_style_env_processes_all_calls_and_ignores_rewrite():
    env = DBStyleCounterEnv()
    t = env.tasks("test")[3]  # target 4
    rw = PyPatch(on_before_action=lambda ctx, nb: {"kind": "rewrite_action", "action": "add[5]"})
    r = run_episode(env, CounterAgent(t, multi=True), t, rw)
    assert r.actions == ["add[1]"] * 4 + ["submit"] and r.success
    assert r.trajectory[2]["tool_calls"][1]["id"] == r.trajectory[4]["tool_call_id"]
    assert {e["effect"] for e in r.hook_events} == {"ignored_rewrite_action"}

    # First-call-only envs drop the rest of a multi-call turn (and say so).
    env1 = CounterEnv()
    r1 = run_episode(env1, CounterAgent(t, multi=True), t)
    assert r1.actions == ["add[1]"] * 4 + ["submit"] and r1.counts["dropped_tool_calls"] == 4
    assert all(len(m.get("tool_calls", [])) <= 1 for m in r1.trajectory)


def test_hook_failures_never_break_the_episode():
    env, t = CounterEnv(), task()

    def boom(ctx, nb):
        nb["partial"] = 1
        raise ValueError("hook bug")

    r = run_episode(env, CounterAgent(t), t, PyPatch(make_pre_hint=boom, on_post_step=boom))
    assert r.success and r.counts["hook_errors"] == 5 and r.counts["hook_calls"] == 5
    assert all("hook bug" in e["error"] for e in r.hook_events)


def test_no_tool_call_reprimand_and_turn_limit():
    env, t = CounterEnv(max_turns=3), task(3)
    r = run_episode(env, CounterAgent(t, silent_turns=2), t)
    assert r.counts["no_tool_call_turns"] == 2
    assert r.trajectory[3] == {"role": "user", "content": env.no_tool_call_message()}
    assert (r.status, r.reward, r.success) == ("task_limit_reached", 0.0, False)


def test_invalid_tool_call_gets_tool_message():
    env, t = CounterEnv(), task()

    class Bad(CounterAgent):
        def chat(self, messages, tools):
            if self.calls == 0:
                self.calls += 1
                return {"role": "assistant", "content": None,
                        "tool_calls": [{"id": "x", "type": "function",
                                        "function": {"name": "fly", "arguments": "{not json"}}]}
            return super().chat(messages, tools)

    r = run_episode(env, Bad(t), t)
    assert r.counts["invalid_tool_calls"] == 1 and r.trajectory[3]["tool_call_id"] == "x" and r.success


def test_agent_error_is_infra_error_not_zero():
    env, t = CounterEnv(), task()

    class Dead(CounterAgent):
        def chat(self, messages, tools):
            raise AgentError("endpoint down")

    r = run_episode(env, Dead(t), t)
    assert r.status == "infra_error" and r.reward is None and r.infra_failed
    assert "endpoint down" in r.error


def test_env_crash_is_infra_error():
    class Broken(CounterEnv):
        def step(self, action):
            raise ConnectionError("db gone")

    env = Broken()
    t = env.tasks("test")[1]
    r = run_episode(env, CounterAgent(t), t)
    assert r.status == "infra_error" and r.reward is None and "db gone" in r.error


def test_identity_depends_on_payload_env_version_and_seed():
    env, t = CounterEnv(), task()
    a = run_episode(env, CounterAgent(t), t, seed=0).identity
    assert a == run_episode(env, CounterAgent(t), t, seed=0).identity
    assert a["sha256"] != run_episode(env, CounterAgent(t), t, seed=1).identity["sha256"]
    t2 = dataclasses.replace(t, payload={"target": 3})
    assert a["sha256"] != run_episode(env, CounterAgent(t2), t2).identity["sha256"]
