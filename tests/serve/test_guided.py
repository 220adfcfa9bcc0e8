"""Guided tool calls (serve/guided.py) on a tiny random model: whatever it writes, a reply that calls
a tool names a declared tool with arguments fitting the schema; tool_choice is enforced; a reply
that is already well formed, or plain text under "auto", is left as the model wrote it."""
import json

import jax
import pytest
from flax import nnx

from hr1_jax.agents.tool_repair import extract_tool_calls
from hr1_jax.models import ModelConfig, build_model
from hr1_jax.models.sampler import Sampler
from hr1_jax.models.tokenizer import load_tokenizer
from hr1_jax.serve.guided import Guide, GuideError, ToolPolicy, fits, json_call_format
from hr1_jax.serve.openai_api import ServeOptions, completion, parse_request
from hr1_jax.serve.server import ChatServer

SQL = {"name": "execute_sql", "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                                             "required": ["query"]}}
COMMIT = {"name": "commit_final_answer", "parameters": {
    "type": "object", "properties": {"answers": {"type": "array", "items": {"type": "string"}}},
    "required": ["answers"]}}
COUNT = {"name": "count", "parameters": {"type": "object", "properties": {"n": {"type": "integer"}},
                                         "required": ["n"]}}
TOOLS = [{"type": "function", "function": f} for f in (SQL, COMMIT)]


@pytest.fixture(scope="module")
def guide():
    tok = load_tokenizer()
    cfg = ModelConfig(vocab_size=tok.vocab_size, hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4,
                      num_kv_heads=2, head_dim=16)
    return Guide(Sampler(build_model(cfg, nnx.Rngs(0)), tok), min_prompt_bucket=64, value_tokens=16)


def _req(guide, tools=TOOLS, **extra):
    body = {"messages": [{"role": "user", "content": "How many rows?"}], "tools": tools, "temperature": 0,
            "max_tokens": 16, **extra}
    return parse_request(guide.tok, body, ServeOptions(model_id="m"))


def _only_call(text):
    calls = extract_tool_calls(text)
    assert len(calls) == 1 and text.count("<tool_call>") == 1, text
    return calls[0]


def test_fits_checks_required_keys_declared_keys_and_types():
    schema = SQL["parameters"]
    assert fits({"query": "SELECT 1"}, schema)
    assert not fits({}, schema) and not fits({"query": 3}, schema) and not fits(["SELECT 1"], schema)
    assert not fits({"query": "x", "city": "Paris"}, schema)          # a key the tool does not declare
    assert fits({"answers": ["a"]}, COMMIT["parameters"]) and not fits({"answers": [1]}, COMMIT["parameters"])
    assert not fits({"n": True}, COUNT["parameters"]) and fits({"n": 2}, COUNT["parameters"])


def test_auto_leaves_text_and_well_formed_calls_as_written(guide):
    req = _req(guide)
    assert guide(req, "There are 3 rows.", jax.random.key(0)) is None
    good = 'Let me look.\n<tool_call>\n{"name": "execute_sql", "arguments": {"query": "SELECT 1"}}\n</tool_call>'
    assert guide(req, good, jax.random.key(0)) is None


@pytest.mark.parametrize("bad", [
    '<tool_call>\n{"name": "get_weather", "arguments": {"query": "SELECT 1"}}\n</tool_call>',   # undeclared name
    '<tool_call>\n{"name": "execute_sql", "arguments": {"query": "SELECT',                     # JSON cut off
    '<tool_call>\n{"name": "execute_sql", "arguments": {"sql": "SELECT 1"}}\n</tool_call>',   # wrong key
])
def test_a_malformed_call_is_redecoded_to_a_declared_tool_with_fitting_arguments(guide, bad):
    text = guide(_req(guide), "Checking.\n" + bad, jax.random.key(1))
    assert text.startswith("Checking.\n<tool_call>\n")             # the model's text before the call is kept
    name, args = _only_call(text)
    assert name in ("execute_sql", "commit_final_answer") and fits(args, {"execute_sql": SQL, "commit_final_answer": COMMIT}[name]["parameters"])


def test_tool_choice_required_and_named_force_a_call(guide):
    text = guide(_req(guide, tool_choice="required"), "no tool here", jax.random.key(2))
    name, args = _only_call(text)
    assert name in ("execute_sql", "commit_final_answer") and "no tool here" not in text
    named = _req(guide, tool_choice={"type": "function", "function": {"name": "commit_final_answer"}})
    text = guide(named, '<tool_call>\n{"name": "execute_sql", "arguments": {"query": "x"}}\n</tool_call>',
                 jax.random.key(3))
    name, args = _only_call(text)
    assert name == "commit_final_answer" and fits(args, COMMIT["parameters"])


def test_an_argument_the_model_cannot_write_in_the_declared_type_is_an_error_not_a_wrong_call(guide):
    # the random model writes no integer for `n` (if it ever did, the call would fit: no silent garbage)
    req = _req(guide, tools=[{"type": "function", "function": COUNT}], tool_choice="required")
    try:
        text = guide(req, "", jax.random.key(4))
    except GuideError as e:
        assert "integer" in str(e)
    else:
        name, args = _only_call(text)
        assert name == "count" and fits(args, COUNT["parameters"])


def test_served_required_reply_is_a_structured_call_and_none_stays_text(guide):
    assert json_call_format(guide.tok)
    with ChatServer(guide.sampler, guide.tok, ServeOptions(model_id="m", default_max_tokens=8), window_s=0.0,
                    min_prompt_bucket=64) as srv:
        for choice in ("required", "none"):
            body = {"messages": [{"role": "user", "content": "q"}], "tools": TOOLS, "temperature": 0,
                    "max_tokens": 8, "tool_choice": choice}
            req = parse_request(srv.tokenizer, body, srv.opts)
            out = completion(body, req, srv.batcher.submit(req).result(timeout=600), srv.opts)
            msg = out["choices"][0]["message"]
            if choice == "none":
                assert "tool_calls" not in msg
                continue
            assert out["choices"][0]["finish_reason"] == "tool_calls" and len(msg["tool_calls"]) == 1
            fn = msg["tool_calls"][0]["function"]
            assert fn["name"] in ("execute_sql", "commit_final_answer")
            assert isinstance(json.loads(fn["arguments"]), dict)
            assert out["usage"]["completion_tokens"] > 0
