"""The scripted ALFWorld target on hand-written conversations (no engine needed)."""
import json

import ml_collections

from envs.base import Task
from hr1_jax.agents.scripted import make_scripted_agent
from envs.alfworld.scripted import ScriptedAgent

WALK = ["go to stoveburner 4", "take pan 1 from stoveburner 4", "go to fridge 1", "cool pan 1 with fridge 1",
        "go to countertop 2", "move pan 1 to countertop 2"]
TASK = Task("alfworld", "dev", 0,
            {"game": "g", "goal": "cool some pan and put it in countertop.", "task_type": "pick_cool_then_place",
             "target_type": "pan", "destination_type": "countertop"},
            oracle={"walkthrough": WALK})
ROOM = ["countertop 1", "countertop 2", "fridge 1", "stoveburner 4", "cabinet 1"]


def cfg(skill=1.0, hint=1.0):
    return ml_collections.ConfigDict({"skill": skill, "hint_follow_prob": hint})


def adm_suffix(adm):
    return " AVAILABLE ACTIONS: " + "\n".join(adm) + "\n"


def first_messages():
    obs = ("You are in the middle of a room. Looking quickly around you, you see "
           + ", ".join(f"a {r}" for r in ROOM) + ".\nYour task is to: cool some pan and put it in countertop.")
    return [{"role": "system", "content": "sys"},
            {"role": "user", "content": "Here is your task. " + obs + adm_suffix([f"go to {r}" for r in ROOM])}]


def turn(messages, action, observation, adm):
    messages.append({"role": "assistant", "content": "", "tool_calls": [
        {"id": f"c{len(messages)}", "type": "function",
         "function": {"name": "take_action", "arguments": json.dumps({"action": action})}}]})
    messages.append({"role": "tool", "tool_call_id": f"c{len(messages)}", "content": observation + adm_suffix(adm)})


def holding_pan_at_stove():
    m = first_messages()
    go = [f"go to {r}" for r in ROOM if r != "stoveburner 4"]
    turn(m, "go to stoveburner 4", "You arrive at stoveburner 4. On the stoveburner 4, you see a pan 1.",
         go + ["take pan 1 from stoveburner 4"])
    turn(m, "take pan 1 from stoveburner 4", "You pick up the pan 1 from the stoveburner 4.",
         go + ["put pan 1 in/on stoveburner 4", "inventory", "look"])
    return m


def action_of(reply):
    (call,) = reply["tool_calls"]
    assert call["function"]["name"] == "take_action"
    return json.loads(call["function"]["arguments"])["action"]


def test_dispatcher_and_message_format():
    agent = make_scripted_agent(TASK, 0, cfg())
    assert isinstance(agent, ScriptedAgent)
    reply = agent.chat(first_messages(), [])
    assert reply["role"] == "assistant" and action_of(reply).startswith("go to ")


def test_competent_agent_transforms_before_placing():
    agent = ScriptedAgent(TASK, 0, cfg(skill=1.0))
    assert action_of(agent.chat(holding_pan_at_stove(), [])) == "go to fridge 1"


def test_deterministic_given_seed_and_messages():
    m = holding_pan_at_stove()
    for seed in range(5):
        a = [action_of(ScriptedAgent(TASK, seed, cfg(skill=0.2)).chat(m, [])) for _ in range(2)]
        assert a[0] == a[1]
    # Different seeds do not all act alike at a low skill (failure modes are seeded).
    replies = [ScriptedAgent(TASK, s, cfg(skill=0.0)).chat(m, []) for s in range(30)]
    actions = {action_of(r) if r.get("tool_calls") else "<text>" for r in replies}
    assert len(actions) > 1


def skipping_agent(hint_prob):
    agent = ScriptedAgent(TASK, 0, cfg(skill=1.0, hint=hint_prob))
    agent.flags["skip_transform"] = True
    return agent


def test_skip_transform_failure_and_hint_recovery():
    m = holding_pan_at_stove()
    assert action_of(skipping_agent(1.0).chat(m, [])) == "go to countertop 2"      # the failure mode
    hinted = m + [{"role": "user", "content": "This target still needs the required cool step before any put."}]
    assert action_of(skipping_agent(1.0).chat(hinted, [])) == "go to fridge 1"      # follows
    assert action_of(skipping_agent(0.0).chat(hinted, [])) == "go to countertop 2"  # ignores


def test_block_message_is_a_hint_and_blocked_action_not_retried():
    m = holding_pan_at_stove()
    go = [f"go to {r}" for r in ROOM if r != "countertop 2"]
    turn(m, "go to countertop 2", "You arrive at countertop 2. On the countertop 2, you see nothing.",
         go + ["put pan 1 in/on countertop 2"])
    agent = skipping_agent(1.0)
    assert action_of(agent.chat(m, [])) == "put pan 1 in/on countertop 2"
    m.append({"role": "assistant", "content": "", "tool_calls": [
        {"id": "b", "type": "function",
         "function": {"name": "take_action", "arguments": json.dumps({"action": "put pan 1 in/on countertop 2"})}}]})
    m.append({"role": "tool", "tool_call_id": "b",
              "content": "Do not put the target in the destination yet. First use the available cool action."})
    assert action_of(skipping_agent(1.0).chat(m, [])) == "go to fridge 1"


def test_quoted_admissible_action_in_hint_is_taken():
    m = first_messages()
    m.append({"role": "user", "content": "Try go to cabinet 1 next."})
    assert action_of(ScriptedAgent(TASK, 0, cfg(skill=1.0, hint=1.0)).chat(m, [])) == "go to cabinet 1"
    # A bare word that happens to be a command is not a quoted action.
    m = holding_pan_at_stove()
    m.append({"role": "user", "content": "Look for the fridge and keep going."})
    assert action_of(ScriptedAgent(TASK, 0, cfg(skill=1.0, hint=1.0)).chat(m, [])) == "go to fridge 1"


def test_believes_done_idles_with_the_same_action():
    m = holding_pan_at_stove()
    go = [f"go to {r}" for r in ROOM if r != "countertop 2"]
    turn(m, "go to countertop 2", "You arrive at countertop 2. On the countertop 2, you see nothing.",
         go + ["put pan 1 in/on countertop 2"])
    turn(m, "put pan 1 in/on countertop 2", "You put the pan 1 in/on the countertop 2.",
         go + ["take pan 1 from countertop 2", "look", "inventory"])
    agent = skipping_agent(1.0)
    first = action_of(agent.chat(m, []))
    assert first in ("look", "inventory")
    turn(m, first, "Nothing happens.", go + ["take pan 1 from countertop 2", "look", "inventory"])
    assert action_of(agent.chat(m, [])) == first
    # A hint naming the missing step gets it going again: take the pan back to cool it.
    m.append({"role": "user", "content": "The pan must be cooled before it is placed."})
    assert action_of(skipping_agent(1.0).chat(m, [])) == "take pan 1 from countertop 2"


def test_tips_in_the_system_prompt_are_standing_hints():
    m = holding_pan_at_stove()
    m[0] = {"role": "system", "content": "sys\n\nSome tips that may help for this task:\n- cool the item first"}
    outcomes = set()
    for seed in range(40):
        agent = ScriptedAgent(TASK, seed, cfg(skill=1.0, hint=1.0))
        agent.flags["skip_transform"] = True
        outcomes.add(action_of(agent.chat(m, [])))
    assert outcomes == {"go to fridge 1", "go to countertop 2"}   # followed for some seeds only
    tools = [{"type": "function", "function": {"name": "take_action",
                                               "description": "Act.\n\nCool the target before placing it."}}]
    m[0] = {"role": "system", "content": "sys"}
    by_tool = set()
    for seed in range(40):
        agent = ScriptedAgent(TASK, seed, cfg(skill=1.0, hint=1.0))
        agent.flags["skip_transform"] = True
        by_tool.add(action_of(agent.chat(m, tools)))
    assert by_tool == {"go to fridge 1", "go to countertop 2"}


def test_uninformative_hints_distract_sometimes():
    m = holding_pan_at_stove()
    m.append({"role": "user", "content": "Keep working on your task."})
    acts = [action_of(ScriptedAgent(TASK, s, cfg(skill=0.6, hint=1.0)).chat(m, [])) for s in range(60)]
    assert "inventory" in acts
    plain = [action_of(ScriptedAgent(TASK, s, cfg(skill=0.6, hint=1.0)).chat(m[:-1], [])) for s in range(60)]
    assert acts.count("inventory") > plain.count("inventory")
