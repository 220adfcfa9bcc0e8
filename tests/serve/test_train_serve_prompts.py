"""No train/serve prompt mismatch: for every assistant turn of an agent-SFT row, the prompt ids
`hr1 serve` decodes from (the request the project's OpenAI client sends for that history, tools
and thinking off included) are exactly the ids agent SFT trained that turn after."""
import json

from hr1_jax.agents.openai_client import _wire_messages
from hr1_jax.models.tokenizer import load_tokenizer, render_conversation
from hr1_jax.serve.openai_api import ServeOptions, parse_request

TOOLS = [{"type": "function", "function": {"name": "execute_sql", "description": "Run one SQL statement.",
                                           "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                                                          "required": ["query"]}}},
         {"type": "function", "function": {"name": "commit_final_answer", "description": "Commit the answer.",
                                           "parameters": {"type": "object", "properties": {
                                               "answers": {"type": "array", "items": {"type": "string"}}},
                                               "required": ["answers"]}}}]


def _call(i, name, args):
    return {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


ROW = [{"role": "system", "content": "You are a database assistant."},
       {"role": "user", "content": "Question: how many rows have `Year` = 2000?"},
       {"role": "assistant", "content": "Count them.",
        "tool_calls": [_call(0, "execute_sql", {"query": "SELECT COUNT(*) FROM `t` WHERE `Year` = 2000"})]},
       {"role": "tool", "content": "[(3,)]", "name": "execute_sql", "tool_call_id": "call_0"},
       {"role": "assistant", "content": "Let me think."},
       {"role": "user", "content": "No executable tool calls found. Call execute_sql or commit_final_answer."},
       {"role": "assistant", "content": None, "tool_calls": [_call(2, "commit_final_answer", {"answers": ["3"]})]},
       {"role": "tool", "content": "Your answer has been committed.", "name": "commit_final_answer",
        "tool_call_id": "call_2"}]


def test_served_prompt_ids_equal_the_trained_prefix_of_every_assistant_turn():
    tok = load_tokenizer()
    ids, mask = render_conversation(tok, ROW, TOOLS, enable_thinking=False)
    starts = [j for j in range(1, len(mask)) if mask[j] and not mask[j - 1]]
    turns = [i for i, m in enumerate(ROW) if m["role"] == "assistant"]
    assert len(starts) == len(turns) == 3
    for start, i in zip(starts, turns):
        body = {"model": "m", "messages": _wire_messages(ROW[:i]), "tools": TOOLS, "tool_choice": "auto",
                "chat_template_kwargs": {"enable_thinking": False}, "max_completion_tokens": 160}
        assert parse_request(tok, body, ServeOptions(model_id="m")).prompt_ids == ids[:start], f"turn {i}"
