"""`hr1 serve` pieces over real HTTP: a tiny random model behind ChatServer, the project's OpenAI
client against it, batching (requests that arrive together are one decode, with the same greedy
output as alone), the wire format (tool calls parsed for offered tools only, reasoning, usage), and
clear errors for bad requests."""
import concurrent.futures
import json
import urllib.error
import urllib.request

import pytest
from flax import nnx

from hr1_jax.agents.openai_client import OpenAIChatClient
from hr1_jax.models import ModelConfig, build_model
from hr1_jax.models.sampler import Sampler
from hr1_jax.models.tokenizer import load_tokenizer
from hr1_jax.serve.batcher import Batcher, GenResult
from hr1_jax.serve.openai_api import ServeOptions, completion, parse_request
from hr1_jax.serve.server import ChatServer

TOOLS = [{"type": "function", "function": {"name": "execute_sql", "parameters": {"type": "object"}}}]


@pytest.fixture(scope="module")
def served():
    tok = load_tokenizer()
    cfg = ModelConfig(vocab_size=tok.vocab_size, hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4,
                      num_kv_heads=2, head_dim=16)
    sampler = Sampler(build_model(cfg, nnx.Rngs(0)), tok)
    # a batch closes when full, so a long window makes "arrive together" independent of machine load
    with ChatServer(sampler, tok, ServeOptions(model_id="tiny", default_max_tokens=8), max_batch=4,
                    window_s=30.0) as srv:
        yield srv


def _post(url, body, *, raw=None):
    data = raw if raw is not None else json.dumps(body).encode()
    req = urllib.request.Request(url + "/chat/completions", data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _body(text, **extra):
    return {"model": "tiny", "messages": [{"role": "user", "content": text}], "temperature": 0, "max_tokens": 6,
            **extra}


def test_models_and_the_project_client_against_the_server(served):
    with urllib.request.urlopen(served.base_url + "/models", timeout=60) as resp:
        assert [m["id"] for m in json.loads(resp.read())["data"]] == ["tiny"]
    client = OpenAIChatClient(served.base_url, "tiny", max_tokens=5, timeout_s=600, retry_budget_s=600)
    reply = client.chat([{"role": "system", "content": "S"}, {"role": "user", "content": "hello"}], TOOLS)
    assert reply["role"] == "assistant" and isinstance(reply["content"], str)
    assert 1 <= reply["usage"]["completion_tokens"] <= 5 and reply["usage"]["prompt_tokens"] > 5


def test_requests_arriving_together_are_decoded_together_with_the_same_output(served):
    texts = ["a", "a longer question about tables", "SELECT 1", "three"]
    before = dict(served.batcher.stats)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda t: _post(served.base_url, _body(t))[1], texts))
    stats = served.batcher.stats
    assert stats["batches"] - before["batches"] == 1 and stats["max_batch_seen"] == 4
    single = Batcher(served.batcher.sampler, max_batch=1, window_s=0.0)   # one request per decode
    try:
        for text, b in zip(texts, together):   # greedy: a prompt decodes the same alone or in a batch
            req = parse_request(served.tokenizer, _body(text), served.opts)
            alone = single.submit(req).result(timeout=600)
            assert b["choices"][0]["message"]["content"] == alone.text.strip()
            assert b["usage"]["completion_tokens"] == len(alone.tokens)
    finally:
        single.close()


def test_bad_requests_get_openai_errors(served):
    url = served.base_url
    assert _post(url, _body("x", model="other"))[0] == 404
    assert _post(url, _body("x", stream=True))[0] == 400
    assert _post(url, None, raw=b"{not json")[0] == 400
    status, err = _post(url, _body("x", temperature=7))
    assert status == 400 and err["error"]["param"] == "temperature"
    assert _post(url, _body("x", tools=TOOLS, tool_choice={"type": "function",
                                                          "function": {"name": "nope"}}))[0] == 400
    assert _post(url, {"model": "tiny", "messages": []})[0] == 400


def test_tool_calls_for_offered_tools_become_structured_and_usage_counts_tokens():
    tok = load_tokenizer()
    opts = ServeOptions(model_id="m")
    body = {"messages": [{"role": "user", "content": "q"}], "tools": TOOLS, "max_completion_tokens": 20}
    req = parse_request(tok, body, opts)
    assert req.max_tokens == 20
    text = 'Running it.\n<tool_call>\n{"name": "execute_sql", "arguments": {"query": "SELECT 1"}}\n</tool_call>'
    out = completion(body, req, GenResult(text, [5, 6, 7], "stop"), opts)
    msg, choice = out["choices"][0]["message"], out["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and msg["content"] == "Running it."
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in msg["tool_calls"]] == \
        [("execute_sql", {"query": "SELECT 1"})]
    assert out["usage"] == {"prompt_tokens": len(req.prompt_ids), "completion_tokens": 3,
                            "total_tokens": len(req.prompt_ids) + 3}
    other = completion(dict(body, tool_choice="none"), req, GenResult(text, [5], "stop"), opts)
    assert "tool_calls" not in other["choices"][0]["message"]          # tool_choice none: text stays text
    thought = completion(body, req, GenResult("<think>\nplan\n</think>\n\nanswer", [5], "stop"), opts)
    assert thought["choices"][0]["message"] == {"role": "assistant", "content": "answer", "reasoning_content": "plan"}


def test_prompt_is_the_chat_template_with_tools_and_a_prefill_is_continued():
    tok = load_tokenizer()
    opts = ServeOptions(model_id="m", max_model_len=4096)
    msgs = [{"role": "user", "content": "q"}]
    req = parse_request(tok, {"messages": msgs, "tools": TOOLS}, opts)
    assert tok.decode(req.prompt_ids) == tok.apply_chat_template(msgs, enable_thinking=False, tools=TOOLS)
    cont = parse_request(tok, {"messages": msgs + [{"role": "assistant", "content": "<think>\nI see"}],
                               "continue_final_message": True, "add_generation_prompt": False,
                               "chat_template_kwargs": {"enable_thinking": True}}, opts)
    assert tok.decode(cont.prompt_ids) == tok.apply_chat_template(msgs, enable_thinking=True) + "I see"
    assert parse_request(tok, {"messages": msgs, "max_tokens": 10**6}, opts).max_tokens < 4096   # capped to context


def test_serve_cli_names_a_bad_checkpoint_in_one_line(tmp_path):
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "hr1_jax.cli", "serve", f"--checkpoint={tmp_path}/nope", "--port=0"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1] == f"hr1 serve: checkpoint not found: {tmp_path}/nope"


def test_an_endpoint_engineer_gets_the_prefill_protocol_prompt(served):
    # hr1 eval / hr1 teacher's endpoint client sends the <think> prefill with continue_final_message to
    # a vLLM-like server (hr1 serve says so in /v1/models): the prompt decoded is the engineer's own.
    from hr1_jax.train.data import render_prompt
    from hr1_jax.train.teacher.endpoint import EndpointTeacher

    prompt = [{"role": "system", "content": "You write harness patches."}, {"role": "user", "content": "Fix it."}]
    before = served.batcher.stats["prompt_tokens"]
    text = EndpointTeacher(served.base_url, "tiny", max_tokens=4, timeout_s=600).complete(prompt)
    assert isinstance(text, str)
    assert served.batcher.stats["prompt_tokens"] - before == len(render_prompt(served.tokenizer, prompt))
