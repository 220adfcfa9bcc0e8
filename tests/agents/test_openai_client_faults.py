"""The OpenAI client against misbehaving endpoints, real sockets on 127.0.0.1: a server that never
answers, one that drips bytes, one that sends a huge body, malformed replies, lone surrogates.

Every bound is asserted as an outcome (an error of the right class, returned rather than hung);
elapsed times are checked only against a generous multiple of the timeout, so load cannot flake them.
"""
import contextlib
import http.server
import json
import socket
import threading
import time

import pytest

from hr1_jax.agents.base import AgentError
from hr1_jax.agents.openai_client import OpenAIChatClient, TargetProtocolError
from hr1_jax.runtime import run_episode
from toy_env import CounterEnv

TIMEOUT_S = 1.0
HANG_BOUND_S = 30 * TIMEOUT_S     # "returned rather than hung", with room for a loaded machine
DRIP_INTERVAL_S = 0.2
TOOLS = CounterEnv().tool_specs()
ASK = [{"role": "user", "content": "Target: 1. count=0"}]


@contextlib.contextmanager
def serving(respond):
    """An HTTP server on 127.0.0.1 whose POST handler is `respond(handler)`, after reading the request."""
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        try:
            respond(self)
        except OSError:  # the client gave up and closed the connection
            pass

    handler = type("Handler", (http.server.BaseHTTPRequestHandler,),
                   {"do_POST": do_POST, "log_message": lambda *args: None})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads, httpd.block_on_close = True, False
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()


@contextlib.contextmanager
def never_answering():
    """A port that accepts connections (the kernel's backlog) but never reads or writes."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    finally:
        sock.close()


def send_json(handler, payload, code=200):
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    handler.send_response(code)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def completion(message: dict) -> dict:
    return {"choices": [{"index": 0, "message": {"role": "assistant", **message}}]}


def client_for(url, **kwargs):
    kwargs = {"timeout_s": TIMEOUT_S, "max_retries": 0, "backoff_s": 0.01, "vllm_fields": False, **kwargs}
    return OpenAIChatClient(url, "m", **kwargs)


def timed_chat(client):
    t0 = time.monotonic()
    with pytest.raises(AgentError) as err:
        client.chat(ASK, TOOLS)
    return err.value, time.monotonic() - t0


def drip_forever(handler, prefix: bytes):
    handler.wfile.write(prefix)
    while True:
        handler.wfile.write(b"a")
        time.sleep(DRIP_INTERVAL_S)


def drip_headers(handler):
    drip_forever(handler, b"HTTP/1.1 200 OK\r\nX-Pad: ")


def drip_body(handler):
    drip_forever(handler, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n")


def test_never_answering_endpoint_fails_each_attempt_at_its_timeout():
    with never_answering() as url:
        client = client_for(url, max_retries=2)
        error, elapsed = timed_chat(client)
    assert type(error) is AgentError and "3 attempt" in str(error)
    assert client.stats["timeouts"] == 3 and elapsed < 3 * HANG_BOUND_S


def test_retry_budget_bounds_a_call_with_all_its_retries():
    with never_answering() as url:
        client = client_for(url, max_retries=50, retry_budget_s=2.5 * TIMEOUT_S)
        error, elapsed = timed_chat(client)
    # Each attempt waits out its deadline, so the budget leaves room for 3 of the 51 allowed.
    assert type(error) is AgentError and client.stats["attempts"] <= 4
    assert elapsed < HANG_BOUND_S


@pytest.mark.parametrize("respond", [drip_headers, drip_body], ids=["headers", "body"])
def test_slow_drip_is_cut_at_the_total_timeout(respond):
    """Each byte arrives well within the socket timeout: only a total deadline ends the request."""
    with serving(respond) as url:
        client = client_for(url)
        error, elapsed = timed_chat(client)
    assert type(error) is AgentError and "TimeoutError" in str(error)
    assert client.stats["timeouts"] == 1 and elapsed < HANG_BOUND_S


def huge_declared(handler):
    handler.send_response(200)
    handler.send_header("Content-Length", str(10 ** 9))
    handler.end_headers()
    handler.wfile.write(b"{" + b" " * (1 << 20))


def huge_streamed(handler):
    """No Content-Length: the body runs until the connection closes, i.e. forever."""
    handler.send_response(200)
    handler.send_header("Connection", "close")
    handler.end_headers()
    handler.wfile.write(b'{"choices": [{"message": {"content": "')
    while True:
        handler.wfile.write(b"a" * (1 << 16))


@pytest.mark.parametrize("respond", [huge_declared, huge_streamed], ids=["declared", "streamed"])
def test_huge_body_is_a_target_protocol_error_and_never_kept(respond):
    env = CounterEnv()
    with serving(respond) as url:
        client = client_for(url, max_response_bytes=1 << 20, timeout_s=10 * TIMEOUT_S)
        error, elapsed = timed_chat(client)
        result = run_episode(env, client, env.tasks("test")[0])
    assert isinstance(error, TargetProtocolError) and "max_response_bytes" in str(error)
    assert len(str(error)) < 2000 and elapsed < 10 * HANG_BOUND_S
    assert result.status == "infra_error" and result.reward is None and result.error.startswith("agent:")
    assert len(json.dumps(result.to_dict())) < 20_000


MALFORMED = {
    "html": b"<html>502 Bad Gateway</html>",
    "invalid_utf8": b"\xff\xfe\x00",
    "deep_nesting": b"[" * 5000,
    "no_choices": {"id": "x", "object": "chat.completion"},
    "empty_choices": {"choices": []},
    "message_is_text": {"choices": [{"message": "hello"}]},
    "content_is_list": completion({"content": [{"type": "text", "text": "hi"}]}),
    "tool_calls_is_object": completion({"content": "", "tool_calls": {"name": "add"}}),
    "tool_call_is_text": completion({"tool_calls": ["add"]}),
    "tool_name_is_number": completion({"tool_calls": [{"id": "c", "function": {"name": 5}}]}),
}


@pytest.mark.parametrize("payload", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_reply_is_a_retried_target_protocol_error_not_an_env_error(payload):
    env = CounterEnv()
    with serving(lambda handler: send_json(handler, payload)) as url:
        client = client_for(url, max_retries=1)
        error, _ = timed_chat(client)
        result = run_episode(env, client, env.tasks("test")[0])
    assert isinstance(error, TargetProtocolError) and client.stats["attempts"] == 4  # 2 per call
    assert client.stats["protocol_errors"] == 4 and client.stats["failures"] == 2
    assert result.status == "infra_error" and result.reward is None
    assert result.error.startswith("agent:")  # the target failed, not the environment


def test_malformed_usage_is_ignored():
    reply = dict(completion({"content": "hi"}), usage={"prompt_tokens": float("inf"), "total_tokens": "3"})
    with serving(lambda handler: send_json(handler, json.dumps(reply).encode())) as url:
        message = client_for(url).chat(ASK, TOOLS)
    assert message["content"] == "hi" and message["usage"] == {}


LONE = "\ud800"
SURROGATE_REPLIES = {
    "structured": completion({"content": f"ok {LONE} done", "tool_calls": [
        {"id": f"c{LONE}", "type": "function",
         "function": {"name": "add", "arguments": json.dumps({"amount": 1, "note": LONE})}}]}),
    "repaired_from_text": completion({"content": "<tool_call>" + json.dumps(
        {"name": "add", "arguments": {"amount": 1, "note": "\udc00"}}) + "</tool_call>"}),
    "arguments_object": completion({"tool_calls": [
        {"id": "c", "function": {"name": "add", "arguments": {"amount": 1, "note": LONE}}}]}),
}


def utf8_json(value) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8")  # raises on a lone surrogate


@pytest.mark.parametrize("reply", SURROGATE_REPLIES.values(), ids=SURROGATE_REPLIES.keys())
def test_lone_surrogates_are_replaced_in_everything_returned(reply):
    with serving(lambda handler: send_json(handler, reply)) as url:
        message = client_for(url).chat(ASK, TOOLS)
    utf8_json(message)
    arguments = json.loads(message["tool_calls"][0]["function"]["arguments"])
    utf8_json(arguments)  # what the runtime decodes from the arguments text is clean too
    assert arguments["amount"] == 1 and arguments["note"] == "?"


def test_episode_over_surrogate_replies_stores_valid_utf8():
    env = CounterEnv()
    reply = SURROGATE_REPLIES["structured"]
    with serving(lambda handler: send_json(handler, reply)) as url:
        result = run_episode(env, client_for(url), env.tasks("test")[0])
    assert result.status == "task_limit_reached"
    utf8_json(result.to_dict())


def test_reply_longer_than_max_content_chars_is_cut_and_counted():
    calls = [{"id": f"c{i}", "function": {"name": "add", "arguments": json.dumps({"amount": 1})}} for i in range(3)]
    long_content = completion({"content": "x" * 5000, "tool_calls": calls})
    long_arguments = completion({"content": "", "tool_calls": [
        {"id": "c", "function": {"name": "add", "arguments": json.dumps({"amount": 1, "pad": "y" * 5000})}}]})
    replies = iter([long_content, long_arguments])
    with serving(lambda handler: send_json(handler, next(replies))) as url:
        client = client_for(url, max_content_chars=1000)
        first, second = client.chat(ASK, TOOLS), client.chat(ASK, TOOLS)
    assert first["content"] == "x" * 1000 and "tool_calls" not in first
    arguments = second["tool_calls"][0]["function"]["arguments"]
    assert len(arguments) < 1000 and arguments.startswith('{"amount": 1')
    assert client.stats["truncated_replies"] == 2


def test_too_deeply_nested_text_is_no_tool_call_rather_than_a_crash():
    deep = completion({"content": "[" * 5000, "tool_calls": [
        {"id": "c", "function": {"name": "add", "arguments": "[" * 5000}}]})
    deep_text_only = completion({"content": "[" * 5000})
    env = CounterEnv(max_turns=2)
    replies = iter([deep, deep_text_only])
    with serving(lambda handler: send_json(handler, next(replies))) as url:
        result = run_episode(env, client_for(url), env.tasks("test")[0])
    assert result.status == "task_limit_reached" and result.error is None
    assert result.counts["invalid_tool_calls"] == 1 and result.counts["no_tool_call_turns"] == 1
