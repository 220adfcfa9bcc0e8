"""ALFWorld on the real TextWorld engine (a reset costs ~2-3 s, so few resets per test)."""
import json

import ml_collections
import pytest

pytest.importorskip("alfworld")
pytest.importorskip("textworld")

from envs.alfworld import engine_memo, unpack  # noqa: E402
from envs.alfworld.config import defaults  # noqa: E402
from envs.alfworld.env import ALFWorldEnv, SYSTEM_PROMPT, TIPS_HEADER  # noqa: E402
from envs.alfworld.scripted import ScriptedAgent  # noqa: E402

pytestmark = pytest.mark.alfworld


@pytest.fixture(scope="module")
def env():
    unpack.unpack()
    e = ALFWorldEnv(defaults())
    yield e
    e.close()


@pytest.fixture(scope="module")
def cool_task(env):
    task = env.tasks("harness_r1_test")[0]
    assert task.payload["task_type"] == "pick_cool_then_place"
    return task


def act(env, text):
    return env.step(env.action_from_tool_call("take_action", {"action": text}))


def test_walkthrough_wins_through_the_put_surface(env, cool_task):
    first = env.reset(cool_task)
    assert first.startswith("Here is your task. You are in the middle of a room.")
    assert "Your task is to: cool some pan and put it in countertop." in first
    assert first.endswith("\n") and " AVAILABLE ACTIONS: go to cabinet 1\n" in first
    assert "Welcome to TextWorld" not in first
    results = []
    for step in cool_task.oracle["walkthrough"]:
        # The walkthrough's engine form `move X to Y` is offered as `put X in/on Y`.
        results.append(act(env, step.replace("move ", "put ").replace(" to ", " in/on ")
                           if step.startswith("move ") else step))
    assert [r.done for r in results] == [False] * (len(results) - 1) + [True]
    assert results[-1].observation.startswith("You put the pan 1 in/on the countertop 2.")
    assert results[-1].reward == 1.0
    assert env.final_result() == {"reward": 1.0, "success": True, "status": "COMPLETED",
                                  "steps": len(results), "invalid_actions": 0}
    # Every admissible command shown uses the 0.2.2 put surface.
    assert not any(a.startswith("move ") for a in env.admissible)


def test_ctx_fields_nothing_happens_and_three_identical_actions(env, cool_task):
    env.reset(cool_task)
    ctx = env.hook_context("make_pre_hint", turn=0)
    assert set(ctx) >= {"action", "state", "task", "predicates", "observation", "admissible", "output",
                        "step", "max_step", "remaining_steps", "history", "world"}
    assert ctx["task"]["task_type"] == "pick_cool_then_place"
    assert (ctx["task"]["target_type"], ctx["task"]["destination_type"]) == ("pan", "countertop")
    assert ctx["remaining_steps"] == 50 and ctx["world"]["unvisited"][:2] == ["cabinet 6", "cabinet 5"]

    bad = env.action_from_tool_call("take_action", {"action": "search the room for a pan"})
    before = env.hook_context("on_before_action", turn=0, action=bad, raw_output="thinking")
    assert before["action"]["raw"] == "search the room for a pan"
    assert before["action"]["in_admissible"] is False and before["predicates"]["action_not_admissible"]
    assert before["output"] == "thinking"
    r = env.step(bad)
    assert r.observation.startswith("Nothing happens.") and r.info["nothing_happens"] and not r.done

    r = act(env, "go to stoveburner 4")
    post = env.hook_context("on_post_step", turn=1, action=env.action_from_tool_call(
        "take_action", {"action": "go to stoveburner 4"}))
    assert post["world"]["current_location"] == "stoveburner 4"
    assert post["world"]["target_found"] and post["world"]["target_location"] == "stoveburner 4"
    assert post["state"]["invalid_action_count"] == 1 and post["remaining_steps"] == 48
    assert post["history"]["last_actions"] == ["search the room for a pan", "go to stoveburner 4"]
    json.dumps(post)  # plain data only

    # AgentBench: more than three steps and the same raw action three times in a row -> fail.
    assert not act(env, "look").done
    assert not act(env, "look").done
    r = act(env, "look")
    assert r.done and r.reward == 0.0
    assert env.final_result()["status"] == "AGENT_INVALID_ACTION"


def test_reset_reuses_the_pddl_translation_and_keeps_argv(env, cool_task):
    import sys

    import fast_downward
    argv = list(sys.argv)
    env.reset(cool_task)
    hits, handed = fast_downward.pddl2sas.cache_info().hits, engine_memo.initial_states["reused"]
    env.reset(cool_task)                       # a rerun of the same game: every translation cached
    # TextWorld translates 4 times a reset (plain and optimised, for its load's state and its reset's);
    # 2 when the reset takes the state its load built
    handed = engine_memo.initial_states["reused"] - handed
    assert fast_downward.pddl2sas.cache_info().hits == hits + 4 - 2 * handed
    assert sys.argv == argv


def test_step_limit():
    c = defaults()
    c.max_steps = 2
    env = ALFWorldEnv(c)
    task = env.tasks("dev")[0]
    env.reset(task)
    assert not act(env, "look").done
    assert act(env, "inventory").done
    assert env.final_result()["status"] == "TASK_LIMIT_REACHED"
    env.close()


def test_prompts_and_tools(env):
    text = env.system_prompt(["tip one", ""], "")
    assert text.startswith(SYSTEM_PROMPT.format(max_steps=50)[:60])
    assert text.endswith(TIPS_HEADER + "\n- tip one")
    (tool,) = env.tool_specs()
    assert tool["function"]["name"] == "take_action"
    hinted = env.apply_tool_hint(env.tool_specs(), "HINT")
    assert hinted[0]["function"]["description"].endswith("HINT")
    assert env.action_from_tool_call("other", {"action": "look"}) is None
    assert env.action_from_tool_call("take_action", {"action": ""}) is None
    assert env.action_from_hook("  Go To  Desk 1 ", None, "on_before_action").text == "go to desk 1"


def drive(env, agent, task):
    """A minimal episode loop (no hooks) for the env + scripted target."""
    msgs = [{"role": "system", "content": env.system_prompt([], "")}, {"role": "user", "content": env.reset(task)}]
    for _ in range(env.max_turns):
        reply = agent.chat(msgs, env.tool_specs())
        msgs.append(reply)
        if not reply.get("tool_calls"):
            msgs.append({"role": "user", "content": env.no_tool_call_message()})
            continue
        call = reply["tool_calls"][0]
        r = env.step(env.action_from_tool_call("take_action", json.loads(call["function"]["arguments"])))
        msgs.append({"role": "tool", "tool_call_id": call["id"], "content": r.observation})
        if r.done:
            break
    return env.final_result()


def test_flawless_scripted_target_solves_each_family(env):
    tasks = env.tasks("dev")
    cfg = ml_collections.ConfigDict({"skill": 1.0, "hint_follow_prob": 1.0})
    picked = {}
    for t in tasks:
        picked.setdefault(t.payload["task_type"], t)
    for family in ("pick_two_obj", "look_at_obj", "pick_heat_then_place"):
        result = drive(env, ScriptedAgent(picked[family], 0, cfg), picked[family])
        assert result["success"], (family, result)
