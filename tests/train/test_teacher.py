"""Template teacher: every program of the library compiles in the sandbox and behaves at its hook
sites; the packet signal detectors fire on the evidence they are meant for."""
import itertools
import json

import pytest

from hr1_jax.patch.runner import call_hook
from hr1_jax.patch.sandbox import compile_hook
from hr1_jax.rollout.prompts import EVIDENCE_MARKER
from hr1_jax.runtime.episode import EpisodeResult
from hr1_jax.train.teacher.programs import LIBRARY, build_patch, module_names, render_response
from hr1_jax.train.teacher.signals import detect
from hr1_jax.train.teacher.template import TemplateTeacher


def _hooks(patch, bench):
    return {a["hook"]: compile_hook(a["code"], bench) for a in patch["actions"]}


@pytest.mark.parametrize("bench", sorted(LIBRARY))
def test_every_module_subset_compiles(bench):
    names = module_names(bench)
    subsets = [list(c) for r in (1, 2, len(names)) for c in itertools.combinations(names, r)]
    for sub in subsets:
        patch = build_patch(bench, sub)
        hooks = [a["hook"] for a in patch["actions"]]
        assert len(hooks) == len(set(hooks)) and hooks[0] == "on_init"
        assert sum(len(a["code"]) for a in patch["actions"]) < 9000
        _hooks(patch, bench)
    text = render_response(bench, names)
    think, rest = text.split("</think>")
    assert think.count("\n- ") == 3 and not think.lstrip().startswith("<think>")
    body = rest.split("<patch>")[1].split("</patch>")[0]
    assert json.loads(body)["benchmark"] == bench


def test_dbbench_guards_block_at_the_right_moment():
    hooks = _hooks(build_patch("dbbench", module_names("dbbench")), "dbbench")
    ctx = {"action": {"tool": "commit_final_answer", "answers": ["5"]}, "state": {},
           "predicates": {"no_sql_yet": True, "mutation_task": False}}
    out = call_hook(hooks["on_before_action"], ctx, {}, "on_before_action")
    assert out.result["kind"] == "block_and_prompt" and "SQL" in out.result["message"]
    ctx["predicates"]["no_sql_yet"] = False
    assert call_hook(hooks["on_before_action"], ctx, {}, "on_before_action").result is None
    ctx["action"]["answers"] = ["The answer is five hundred and two"]
    assert call_hook(hooks["on_before_action"], ctx, {}, "on_before_action").result["kind"] == "block_and_prompt"
    # stage machine + deduplicated hint
    nb = {}
    post = {"action": {"tool": "execute_sql"}, "state": {}, "predicates": {"unknown_column_error": True}}
    call_hook(hooks["on_post_step"], post, nb, "on_post_step")
    assert nb["stage"] == "need_schema_probe"
    first = call_hook(hooks["make_pre_hint"], {}, nb, "make_pre_hint").result
    assert "DESCRIBE" in first["message"]
    assert call_hook(hooks["make_pre_hint"], {}, nb, "make_pre_hint").result is None


def test_alfworld_transform_block_names_the_verb_and_rewrite_uses_admissible():
    hooks = _hooks(build_patch("alfworld", module_names("alfworld")), "alfworld")
    ctx = {"action": {"final_action": "put egg 1 in/on garbagecan 1", "raw": "put egg 1 in garbagecan 1",
                      "in_admissible": True},
           "task": {"task_type": "pick_heat_then_place", "target_type": "egg", "destination_type": "garbagecan"},
           "world": {"inventory": ["egg 1"], "transformed": {}}, "admissible": ["put egg 1 in/on garbagecan 1"],
           "predicates": {}, "state": {}}
    out = call_hook(hooks["on_before_action"], ctx, {}, "on_before_action").result
    assert out["kind"] == "block_and_prompt" and "heat" in out["message"]
    ctx["action"] = {"final_action": "go to the fridge", "raw": "go to the fridge", "in_admissible": False}
    ctx["admissible"] = ["go to fridge 1", "go to drawer 2", "inventory"]
    out = call_hook(hooks["on_before_action"], ctx, {}, "on_before_action").result
    assert out == {"kind": "rewrite_action", "action": "go to fridge 1"} or out["action"] == "go to fridge 1"


def _db_row(trace: str) -> dict:
    return {"prompt": [{"role": "system", "content": "s"}, {"role": "user", "content": f"x\n{EVIDENCE_MARKER}\n{trace}"}],
            "metadata": {"benchmark": "dbbench"}}


def test_dbbench_signals_and_teacher_variants():
    trace = "\n".join([
        "# DBBench batch evidence: batch_000", "## Failure Traces",
        "Trace index=3 status=completed reward=0.000", "USER: Question: What is the highest score of team X?",
        'ASSISTANT_TOOL commit_final_answer: {"answers": ["The answer is probably 5 points"]}',
        "Trace index=4 status=completed reward=0.000", "USER: Question: Which player has most goals?",
        'ASSISTANT_TOOL execute_sql: {"query": "SELECT name FROM t ORDER BY goal DESC"}',
        "TOOL_RESULT: 1054 (42S22): Unknown column 'goal' in 'order clause'",
        'ASSISTANT_TOOL execute_sql: {"query": "SELECT name FROM t ORDER BY goal DESC"}',
        "TOOL_RESULT: 1054 (42S22): Unknown column 'goal' in 'order clause'",
        'ASSISTANT_TOOL commit_final_answer: {"answers": []}',
    ])
    sig = detect("dbbench", _db_row(trace))
    assert sig["commit_before_sql"] == 1 and sig["answer_format"] == 1
    assert sig["schema_probe"] == 1 and sig["query_loop"] == 1 and sig["empty_commit"] == 1
    assert "mutation_commit" not in sig and sig["text_numeric"] == 2
    variants = TemplateTeacher().variants(_db_row(trace))
    assert variants[0][0] == "evidenced" and set(variants[0][1]) == set(sig)
    assert variants[-1] == ("full", module_names("dbbench"))
    # signals stored in row metadata (compact demo rows) win over re-detection
    row = _db_row("no traces")
    row["metadata"]["packet_signals"] = {"query_loop": 2}
    assert TemplateTeacher().variants(row)[0] == ("evidenced", ["query_loop"])


def test_alfworld_signals():
    trace = "\n".join([
        "### Trace case", "- final_reward: 0.0000", "Runtime signals:", "- nothing_happens_observations: 2",
        "- repeated_action_values: 'look' x3", "Transcript:",
        "USER: Here is your task. You are in the middle of a room. Your task is to: heat some egg and put it in garbagecan.",
        'ASSISTANT_TOOL: take_action {"action": "go to countertop 1"}',
        "OBSERVATION: On the countertop 1, you see a egg 2, and a knife 1.",
        'ASSISTANT_TOOL: take_action {"action": "go to garbagecan 1"}',
        'ASSISTANT_TOOL: take_action {"action": "put egg 2 in/on garbagecan 1"}',
    ])
    sig = detect("alfworld", f"{EVIDENCE_MARKER}\n{trace}")
    assert {"invalid_action", "action_loop", "transform_first", "take_target"} <= set(sig)
    assert "pick_two" not in sig


def _ws_episode(task_id, reward, status, calls, observations):
    msgs = [{"role": "system", "content": "shop"},
            {"role": "user", "content": "WebShop [SEP] Instruction: [SEP] i need a red cotton shirt, and price lower "
                                        "than 30.00 dollars [SEP] Search"}]
    for i, ((name, arg), obs) in enumerate(zip(calls, observations)):
        key = "keywords" if name == "search_action" else "value"
        msgs.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps({key: arg})}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": obs})
    return EpisodeResult("webshop", "test", task_id, 0, reward, False, status, msgs, [], [], {}, {}, {}, {})


def test_webshop_signals_on_the_real_packet():
    """The detectors read the packet the rollout layer writes (trace_packet), not a hand-made text."""
    from hr1_jax.rollout.packets import trace_packet

    bought = _ws_episode(3, 0.5, "completed", [("search_action", "red shirt"), ("search_action", "red shirt"),
                                              ("click_action", "b0abcdefgh"), ("click_action", "buy now")],
                         ["Results [SEP] $25.99", "Results [SEP] $25.99", "Price: $34.00 [SEP] Buy Now", "Thank you"])
    stalled = _ws_episode(4, 0.0, "task_limit_reached", [("search_action", "shirt")], ["Results [SEP] $9.99"])
    packet, n = trace_packet("webshop", [(0, [bought, stalled])])
    assert n == 2
    sig = detect("webshop", f"x\n{EVIDENCE_MARKER}\n{packet}")
    assert sig == {"options_before_buy": 1, "careful_pick": 1, "budget": 1, "search_loop": 1}
    row = {"prompt": [{"role": "user", "content": f"x\n{EVIDENCE_MARKER}\n{packet}"}], "metadata": {"benchmark": "webshop"}}
    assert TemplateTeacher().variants(row) == [("evidenced", module_names("webshop"))]
