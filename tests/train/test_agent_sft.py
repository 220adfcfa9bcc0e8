"""Agent SFT: multi-turn rendering with tools and a per-token assistant mask, its padding into the
SFT batch, and the agent-SFT rows (successful, no-intervention, deduplicated per task)."""
import json

import numpy as np
import pytest

from fixtures.hf_engineer import save_tokenizer
from hr1_jax.data.agent_rows import build_agent_rows
from hr1_jax.models.tokenizer import IM_END, format_chat, load_tokenizer, render_conversation
from hr1_jax.train.agent_sft import conversation_example
from hr1_jax.train.data import pad_batch

TOOLS = [{"type": "function", "function": {"name": "execute_sql", "description": "Run SQL.",
                                           "parameters": {"type": "object",
                                                          "properties": {"query": {"type": "string"}}}}}]
CALL = {"id": "call_0", "type": "function",
        "function": {"name": "execute_sql", "arguments": json.dumps({"query": "SELECT 1"})}}
CONVERSATION = [
    {"role": "system", "content": "You are a database assistant."},
    {"role": "user", "content": "How many rows?"},
    {"role": "assistant", "content": "Let me count.", "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "call_0", "name": "execute_sql", "content": "[(1,)]"},
    {"role": "assistant", "content": "There is one row."},
    {"role": "user", "content": "No executable tool calls found."},
    {"role": "assistant", "content": "", "tool_calls": [dict(CALL, id="call_1")]},
]


def _spans(tok, ids, mask):
    """The decoded text of each run of masked tokens."""
    out, cur = [], []
    for t, m in zip(ids, mask):
        if m:
            cur.append(t)
        elif cur:
            out.append(tok.decode(cur))
            cur = []
    return out + ([tok.decode(cur)] if cur else [])


def test_every_assistant_turn_and_its_tool_calls_are_trained_and_nothing_else():
    tok = load_tokenizer()
    ids, mask = render_conversation(tok, CONVERSATION, TOOLS)
    assert tok.decode(ids) == format_chat(CONVERSATION, False, False, TOOLS)
    call = '<tool_call>\n{"name": "execute_sql", "arguments": {"query": "SELECT 1"}}\n</tool_call>'
    assert _spans(tok, ids, mask) == [f"Let me count.\n{call}{IM_END}", f"There is one row.{IM_END}", f"{call}{IM_END}"]
    text = tok.decode(ids)
    assert "# Tools" in text and '"name": "execute_sql"' in text            # the schema is in the prompt
    assert "<tool_response>\n[(1,)]\n</tool_response>" in text             # tool output: context, not target


def test_each_trained_turn_follows_the_generation_prompt_a_server_renders():
    tok = load_tokenizer()
    ids, mask = render_conversation(tok, CONVERSATION, TOOLS)
    starts = [i for i in range(len(mask)) if mask[i] and (i == 0 or not mask[i - 1])]
    turns = [i for i, m in enumerate(CONVERSATION) if m["role"] == "assistant"]
    for start, turn in zip(starts, turns):
        prompt = tok.apply_chat_template(CONVERSATION[:turn], add_generation_prompt=True, enable_thinking=False,
                                         tools=TOOLS)
        assert tok.decode(ids[:start]) == prompt
        assert prompt.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_hf_chat_template_masks_match_its_own_rendering(tmp_path):
    save_tokenizer(tmp_path, "qwen3_5")
    tok = load_tokenizer(str(tmp_path))
    msgs = [{k: v for k, v in m.items() if k != "tool_calls"} for m in CONVERSATION[:5]]  # template: no tool calls
    ids, mask = render_conversation(tok, msgs)
    full = tok.tok.apply_chat_template(msgs, tokenize=False, enable_thinking=False)
    assert tok.decode(ids) == full
    assert _spans(tok, ids, mask) == [f"Let me count.{IM_END}", f"There is one row.{IM_END}"]


# Qwen3.5's tool format, reduced: tools listed in the system turn, calls as XML from argument objects.
XML_TOOLS_TEMPLATE = (
    "{%- if tools %}{{ '<|im_start|>system\\n' + messages[0].content + '\\n<tools>' }}"
    "{%- for t in tools %}{{ '\\n' + t.function.name }}{%- endfor %}{{ '\\n</tools><|im_end|>\\n' }}{%- endif %}"
    "{%- for m in messages %}{%- if m.role == 'system' and tools %}"
    "{%- elif m.role == 'assistant' %}{{ '<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n' + m.content }}"
    "{%- for c in m.tool_calls or [] %}{{ '\\n<tool_call>\\n<function=' + c.function.name + '>' }}"
    "{%- for k, v in c.function.arguments|items %}{{ '\\n<parameter=' + k + '>\\n' + v + '\\n</parameter>' }}{%- endfor %}"
    "{{ '\\n</function>\\n</tool_call>' }}{%- endfor %}{{ '<|im_end|>\\n' }}"
    "{%- elif m.role == 'tool' %}{{ '<|im_start|>user\\n<tool_response>\\n' + m.content + '\\n</tool_response><|im_end|>\\n' }}"
    "{%- else %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n' }}{%- endif %}")


def test_hf_template_renders_tools_and_xml_tool_calls_from_wire_arguments(tmp_path):
    save_tokenizer(tmp_path, None)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(dict(config, chat_template=XML_TOOLS_TEMPLATE)))
    tok = load_tokenizer(str(tmp_path))
    ids, mask = render_conversation(tok, CONVERSATION[:5], TOOLS)
    call = "<tool_call>\n<function=execute_sql>\n<parameter=query>\nSELECT 1\n</parameter>\n</function>\n</tool_call>"
    assert _spans(tok, ids, mask) == [f"Let me count.\n{call}{IM_END}", f"There is one row.{IM_END}"]
    assert "<tools>\nexecute_sql\n</tools>" in tok.decode(ids)


def test_a_template_that_rewrites_history_is_refused(tmp_path):
    # Qwen3's template drops the empty think block of earlier turns: not prefix-consistent.
    save_tokenizer(tmp_path, "qwen3")
    tok = load_tokenizer(str(tmp_path))
    msgs = [{k: v for k, v in m.items() if k != "tool_calls"} for m in CONVERSATION[:5]]
    with pytest.raises(ValueError, match="prefix"):
        render_conversation(tok, msgs)


def test_pad_batch_shifts_the_token_mask_onto_targets():
    tok = load_tokenizer()
    ex = conversation_example({"messages": CONVERSATION, "tools": TOOLS}, tok)
    n = len(ex["ids"])
    batch = pad_batch([ex], n + 8, tok.pad_id, rows=2)
    assert batch["loss_mask"].shape == (2, n + 7)
    np.testing.assert_array_equal(batch["loss_mask"][0, :n - 1], ex["token_mask"][1:])
    assert batch["loss_mask"][0, n - 1:].sum() == 0 and batch["loss_mask"][1].sum() == 0
    assert batch["loss_mask"][0].sum() == ex["token_mask"].sum()   # the first token is never a target here


def _episode(task, reward, success, n_turns, *, hooks=0, status="completed", split="dev"):
    traj = [{"role": "system", "content": "S"}, {"role": "user", "content": f"task {task}"}]
    for t in range(n_turns):
        traj.append({"role": "assistant", "content": f"turn {t}", "tool_calls": [CALL],
                     "reasoning_content": "dropped"})
        traj.append({"role": "tool", "tool_call_id": "call_0", "name": "execute_sql", "content": "ok"})
    return {"benchmark": "dbbench", "split": split, "task_id": task, "seed": n_turns, "reward": reward,
            "success": success, "status": status, "trajectory": traj,
            "hook_events": [{"hook": "on_init"}] if hooks else [], "counts": {"turns": n_turns, "hook_calls": hooks},
            "agent": {"name": "scripted-dbbench"}}


def _write(folder, episodes):
    folder.mkdir(parents=True)
    (folder / "results.jsonl").write_text("".join(json.dumps(e) + "\n" for e in episodes))


def test_agent_rows_keep_one_successful_unharnessed_trajectory_per_task(tmp_path):
    _write(tmp_path / "dbbench" / "batch_000", [
        _episode(0, 1.0, True, 3), _episode(1, 1.0, True, 2), _episode(2, 0.0, False, 1),
        _episode(3, 1.0, True, 1, hooks=2), _episode(4, None, False, 1, status="infra_error")])
    _write(tmp_path / "dbbench" / "seed1_batch_000", [
        _episode(0, 1.0, True, 2), _episode(1, 1.0, True, 4), _episode(5, 1.0, True, 1, split="test")])
    rows, stats = build_agent_rows(str(tmp_path), lambda bench: TOOLS, splits=("dev",))
    assert [(r["metadata"]["task_id"], r["metadata"]["turns"]) for r in rows] == [(0, 2), (1, 2)]  # shortest kept
    assert stats["skipped"] == {"not_successful": 1, "harnessed": 1, "infra_error": 1}
    assert stats["duplicates"] == 2 and stats["rows"] == 2
    row = rows[0]
    assert row["tools"] == TOOLS and row["metadata"]["enable_thinking"] is False
    assert all("reasoning_content" not in m for m in row["messages"])   # thinking off
    assert row["messages"][2]["tool_calls"] == [CALL]
