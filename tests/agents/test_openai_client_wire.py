"""What the one OpenAI client puts on the wire, over real loopback HTTP: a strict server that rejects
unknown fields as hosted APIs do, the vLLM/SGLang fields only where they are taken (auto, on, off),
the token-limit field, omitted fields, no retry on a final 4xx, `Retry-After`, jittered back-off,
reasoning under either field name, and one kept-alive connection for a whole episode."""
import os
import random
import re

import pytest

from hr1_jax.agents import openai_client
from hr1_jax.agents.base import AgentError
from hr1_jax.agents.http import backoff_s, retry_after_s
from hr1_jax.agents.openai_client import OpenAIChatClient
from hr1_jax.agents.openai_server import LoopbackOpenAIServer, scripted_agent_resolver, unknown_fields
from hr1_jax.runtime import run_episode
from toy_env import CounterAgent, CounterEnv

ASK = [{"role": "user", "content": "Target: 1. count=0"}]
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def served(**kwargs):
    env = CounterEnv()
    tasks = env.tasks("test")[:2]
    agent_for = scripted_agent_resolver(env, tasks, 0, lambda t, s: CounterAgent(t, s))
    return env, tasks, LoopbackOpenAIServer(agent_for, **kwargs)


@pytest.fixture
def pauses(monkeypatch):
    """The back-off pauses the client asks for (not slept: the test's speed is not the client's)."""
    seen = []
    monkeypatch.setattr(openai_client.time, "sleep", seen.append)
    return seen


def test_strict_server_rejects_vllm_fields_and_hosted_request_passes():
    assert unknown_fields({"model": "m", "messages": [{"role": "user", "content": "x", "reasoning_content": ""}],
                           "chat_template_kwargs": {}}) == ["chat_template_kwargs", "messages[0].reasoning_content"]
    env, tasks, srv = served(strict=True)
    with srv:
        auto = OpenAIChatClient(srv.base_url, "m", max_retries=0)
        r = run_episode(env, auto, tasks[1])
        assert r.success and auto.vllm_fields is False
        sent = srv.requests[-1]
        assert "chat_template_kwargs" not in sent and "max_tokens" not in sent
        assert sent["max_completion_tokens"] == 4096 and sent["temperature"] == 0.0
        forced = OpenAIChatClient(srv.base_url, "m", max_retries=3, backoff_s=0.01, vllm_fields=True)
        with pytest.raises(AgentError, match="HTTP 400: .*chat_template_kwargs"):
            forced.chat(ASK, env.tool_specs())
        assert forced.stats["attempts"] == 1 and forced.stats["retries"] == 0  # a 400 is final


def test_vllm_server_gets_its_fields_in_auto_mode_and_none_when_off():
    env, tasks, srv = served()
    with srv:
        auto = OpenAIChatClient(srv.base_url, "m", max_retries=0)
        auto.chat(ASK, env.tool_specs())
        assert auto.vllm_fields is True and srv.requests[-1]["chat_template_kwargs"] == {"enable_thinking": False}
        off = OpenAIChatClient(srv.base_url, "m", max_retries=0, vllm_fields=False, token_limit_field="max_tokens",
                               omit_fields="temperature, top_p", top_p=0.9)
        off.chat(ASK, env.tool_specs())
        sent = srv.requests[-1]
        assert "chat_template_kwargs" not in sent and sent["max_tokens"] == 4096
        assert "temperature" not in sent and "top_p" not in sent and "max_completion_tokens" not in sent


def test_target_config_reaches_the_wire():
    from hr1_jax.config import base_config
    c = base_config()
    env, tasks, srv = served()
    with srv, c.unlocked():
        c.target.update(kind="openai", base_url=srv.base_url, model="m", vllm_fields=False, omit_fields="temperature")
        client = OpenAIChatClient.from_target_config(c.target)
        client.chat(ASK, env.tool_specs())
    assert {"chat_template_kwargs", "temperature"}.isdisjoint(srv.requests[-1])


@pytest.mark.parametrize("status", [408, 409, 429, 503])
def test_retryable_status_is_retried(status, pauses):
    env, tasks, srv = served()
    with srv:
        srv.fail_next, srv.fail_status = 2, status
        client = OpenAIChatClient(srv.base_url, "m", max_retries=2, backoff_s=0.01, vllm_fields=False)
        assert client.chat(ASK, env.tool_specs())["tool_calls"]
    assert client.stats["retries"] == 2 and len(pauses) == 2


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_final_4xx_is_not_retried(status, pauses):
    env, tasks, srv = served()
    with srv:
        srv.fail_next, srv.fail_status = 5, status
        client = OpenAIChatClient(srv.base_url, "m", max_retries=3, backoff_s=0.01, vllm_fields=False)
        with pytest.raises(AgentError, match=f"1 attempt.*HTTP {status}"):
            client.chat(ASK, env.tool_specs())
    assert client.stats["attempts"] == 1 and pauses == [] and len(srv.requests) == 1


def test_retry_after_is_honoured(pauses):
    env, tasks, srv = served()
    with srv:
        srv.fail_next, srv.fail_status, srv.retry_after = 1, 429, "7"
        client = OpenAIChatClient(srv.base_url, "m", max_retries=1, backoff_s=0.01, vllm_fields=False)
        assert client.chat(ASK, env.tool_specs())["tool_calls"]
        assert pauses == [7.0]
        srv.fail_next, srv.retry_after = 1, "3600"  # asks for more than the retry budget leaves: give up now
        short = OpenAIChatClient(srv.base_url, "m", max_retries=1, retry_budget_s=60, vllm_fields=False)
        with pytest.raises(AgentError, match="HTTP 429"):
            short.chat(ASK, env.tool_specs())
        assert pauses == [7.0]


def test_retry_after_forms_and_jittered_backoff():
    assert retry_after_s("12") == 12.0 and retry_after_s(None) is None and retry_after_s("soon") is None
    assert retry_after_s("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past: no wait
    rng = random.Random(0)
    for attempt in range(8):
        pause = backoff_s(attempt, 1.0, 30.0, None, rng)
        assert 0.5 * min(30.0, 2.0 ** attempt) <= pause <= min(30.0, 2.0 ** attempt)
    assert backoff_s(0, 1.0, 30.0, 45.0, rng) == 45.0
    firsts = {backoff_s(3, 1.0, 30.0, None, random.Random(seed)) for seed in range(10)}
    assert len(firsts) == 10  # clients that failed together spread out


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
def test_tool_call_in_either_reasoning_field_is_repaired(key):
    class ThinkingAgent:  # a reasoning parser moved the whole reply, tool call included, out of content
        def chat(self, messages, tools):
            return {"content": "", "reasoning_content":
                    "<tool_call>\n<function=add>\n<parameter=amount>\n1\n</parameter>\n</function>\n</tool_call>"}

    env = CounterEnv()
    with LoopbackOpenAIServer(lambda messages: ThinkingAgent(), reasoning_key=key) as srv:
        client = OpenAIChatClient(srv.base_url, "m", max_retries=0, vllm_fields=False)
        message = client.chat(ASK, env.tool_specs())
    assert key in srv.replies[0] and "reasoning_content" not in message
    assert message["repaired_tool_calls"] == 1 and message["tool_calls"][0]["function"]["name"] == "add"


def test_one_pooled_connection_serves_a_whole_episode():
    env, tasks, srv = served()
    with srv:
        client = OpenAIChatClient(srv.base_url, "m", max_retries=0)
        r = run_episode(env, client, tasks[1])
    assert r.success and len(srv.peers) >= 3 and len(set(srv.peers)) == 1


def test_rollout_cli_against_a_strict_server(tmp_path):
    """`hr1 rollout` with an openai target on a hosted-style server: auto mode sends nothing the
    server rejects (0 infra errors, the scripted agent's rewards); forcing vLLM fields on makes every
    episode an infra error (HTTP 400), never a zero score."""
    import subprocess
    import sys
    from envs.registry import make_env
    from hr1_jax.agents.scripted import make_scripted_agent
    from hr1_jax.config import base_config
    c = base_config()
    c.dbbench.backend = "sqlite"
    env = make_env("dbbench", c)
    try:
        tasks = env.tasks("test")[:3]
        make = lambda t, s: make_scripted_agent(t, s, c.target.scripted)  # noqa: E731
        local = [run_episode(env, make(t, 0), t).reward for t in tasks]
        with LoopbackOpenAIServer(scripted_agent_resolver(env, tasks, 0, make), mode="xml", strict=True) as srv:
            def rollout(name, *flags):
                cmd = [sys.executable, "-m", "hr1_jax.cli", "rollout", "--config=configs/demo.py",
                       "--config.benchmark=dbbench", "--config.split=test", "--config.tasks=0:3",
                       "--config.dbbench.backend=sqlite", "--config.target.kind=openai",
                       f"--config.target.base_url={srv.base_url}", "--config.target.model=scripted",
                       f"--workdir={tmp_path / name}", *flags]
                return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
            auto, forced = rollout("auto"), rollout("forced", "--config.target.vllm_fields=true")
    finally:
        env.close()
    assert auto.returncode == 0, auto.stderr[-2000:]
    assert "infra_errors=0" in auto.stdout and f"mean_reward={sum(local) / 3:.4f}" in auto.stdout
    assert forced.returncode != 0 and re.search(r'infra_errors"?[=:] ?3\b', forced.stdout + forced.stderr)


def test_probe_passes_a_strict_server_in_auto_mode():
    from hr1_jax.agents.probe import _DemoAgent, probe
    with LoopbackOpenAIServer(lambda m: _DemoAgent(), strict=True) as srv:
        report = probe(srv.base_url, "m", timeout_s=10)
        forced = probe(srv.base_url, "m", timeout_s=10, vllm_fields=True)
    assert report["exit_code"] == 0 and report["vllm_fields"] is False
    assert forced["exit_code"] == 2 and "HTTP 400" in forced["error"]
