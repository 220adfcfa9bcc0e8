"""The OpenAI-compatible client over real loopback HTTP, tool-call repair, the probe."""
import json
import socket

import pytest

from hr1_jax.agents.base import AgentError
from hr1_jax.agents.openai_client import OpenAIChatClient
from hr1_jax.agents.openai_server import LoopbackOpenAIServer, scripted_agent_resolver
from hr1_jax.agents.probe import main as probe_main
from hr1_jax.agents.tool_repair import extract_tool_calls, repair_message
from hr1_jax.runtime import run_episode
from toy_env import CounterAgent, CounterEnv


def served(mode):
    env = CounterEnv()
    tasks = env.tasks("test")[:4]
    return env, tasks, LoopbackOpenAIServer(scripted_agent_resolver(env, tasks, 0, lambda t, s: CounterAgent(t, s)),
                                            mode=mode)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_structured_episodes_through_http_match_in_process_agent():
    env, tasks, srv = served("structured")
    with srv:
        client = OpenAIChatClient(srv.base_url, "m", max_retries=0)
        for t in tasks:
            over_http = run_episode(env, client, t)
            local = run_episode(env, CounterAgent(t), t)
            assert over_http.actions == local.actions and over_http.reward == local.reward == 1.0
            assert over_http.agent["repaired_tool_calls"] == 0
        assert client.stats["requests"] == sum(t.payload["target"] + 1 for t in tasks)
        assert client.stats["total_tokens"] > 0
        sent = srv.requests[0]
        assert sent["tools"][0]["function"]["name"] == "add" and sent["temperature"] == 0.0
        assert sent["chat_template_kwargs"] == {"enable_thinking": False}


@pytest.mark.parametrize("mode", ["xml", "json", "think_xml"])
def test_tool_calls_in_content_are_repaired_and_counted(mode):
    env, tasks, srv = served(mode)
    with srv:
        client = OpenAIChatClient(srv.base_url, "m", max_retries=0)
        r = run_episode(env, client, tasks[2])  # target 3: 3 adds + submit
        assert r.success and r.actions == ["add[1]"] * 3 + ["submit"]
        assert r.agent["repaired_tool_calls"] == 4 and client.stats["repaired_replies"] == 4
        # The wire really carried text, not tool_calls.
        assert all("tool_calls" not in w and "<tool_call>" in w["content"] for w in srv.replies)
        assert all("<tool_call>" not in (m.get("content") or "") for m in r.trajectory if m["role"] == "assistant")


def test_dead_endpoint_raises_agent_error_and_episode_is_infra_error():
    client = OpenAIChatClient(f"http://127.0.0.1:{free_port()}/v1", "m", max_retries=2, backoff_s=0.01, timeout_s=2)
    env = CounterEnv()
    t = env.tasks("test")[0]
    with pytest.raises(AgentError, match="3 attempt"):
        client.chat([{"role": "user", "content": "x"}], env.tool_specs())
    r = run_episode(env, client, t)
    assert r.status == "infra_error" and r.reward is None


def test_transient_503_is_retried_then_succeeds():
    env, tasks, srv = served("structured")
    with srv:
        srv.fail_next = 2
        client = OpenAIChatClient(srv.base_url, "m", max_retries=2, backoff_s=0.01)
        r = run_episode(env, client, tasks[0])
        assert r.success and client.stats["retries"] == 2 and client.stats["failures"] == 0
        srv.fail_next = 5
        with pytest.raises(AgentError, match="HTTP 503"):
            client.chat([{"role": "user", "content": "x"}], [])


def test_repair_forms_and_allowed_names():
    xml = "<tool_call>\n<function=commit_final_answer>\n<parameter=answers>\n[\"1\", \"2\"]\n</parameter>\n</function>\n</tool_call>"
    assert extract_tool_calls(xml) == [("commit_final_answer", {"answers": ["1", "2"]})]
    hermes = 'ok <tool_call>{"name": "execute_sql", "arguments": {"query": "SELECT 1"}}</tool_call>'
    assert extract_tool_calls(hermes) == [("execute_sql", {"query": "SELECT 1"})]
    bare = 'Calling: ```json\n{"function": {"name": "take_action", "arguments": "{\\"action\\": \\"look\\"}"}}\n```'
    assert extract_tool_calls(bare) == [("take_action", {"action": "look"})]
    msg, n = repair_message({"role": "assistant", "content": "<think>plan " + xml + "</think>"}, {"commit_final_answer"})
    assert n == 1 and json.loads(msg["tool_calls"][0]["function"]["arguments"]) == {"answers": ["1", "2"]}
    assert repair_message({"role": "assistant", "content": hermes}, {"other_tool"})[1] == 0
    assert repair_message({"role": "assistant", "content": "no calls {\"a\": 1}"}, None)[1] == 0
    structured = {"role": "assistant", "content": xml, "tool_calls": [{"id": "x"}]}
    assert repair_message(structured, None) == (structured, 0)


def test_probe_target_verdicts(capsys):
    assert probe_main(["--demo", "structured"]) == 0
    assert probe_main(["--demo", "xml"]) == 1
    assert probe_main(["--base-url", f"http://127.0.0.1:{free_port()}/v1", "--model", "m", "--timeout", "2"]) == 2
    assert '"verdict": "endpoint_error"' in capsys.readouterr().out


def test_scripted_dbbench_agent_behind_http_in_xml_mode_matches_in_process():
    from envs.registry import make_env
    from hr1_jax.agents.scripted import make_scripted_agent
    from hr1_jax.config import base_config
    c = base_config()
    c.dbbench.backend = "sqlite"
    env = make_env("dbbench", c)
    try:
        tasks = env.tasks("test")[:5]
        make = lambda t, s: make_scripted_agent(t, s, c.target.scripted)  # noqa: E731
        local = [run_episode(env, make(t, 0), t) for t in tasks]
        with LoopbackOpenAIServer(scripted_agent_resolver(env, tasks, 0, make), mode="xml") as srv:
            client = OpenAIChatClient(srv.base_url, "scripted", max_retries=0)
            remote = [run_episode(env, client, t) for t in tasks]
        assert [r.reward for r in remote] == [r.reward for r in local]
        assert [r.actions for r in remote] == [r.actions for r in local]
        assert sum(r.agent["repaired_tool_calls"] for r in remote) == sum(len(r.actions) for r in local) > 0
    finally:
        env.close()


@pytest.mark.parametrize("text", ["<tool_call>" + "[" * 3000 + "]" * 3000 + "</tool_call>", "[" * 900 + "]" * 900,
                                  '<tool_call>{"name":"x","arguments":"' + "[" * 3000 + '"}</tool_call>'])
def test_text_nested_too_deep_is_no_tool_call_not_a_crash(text):
    assert extract_tool_calls(text) == []
