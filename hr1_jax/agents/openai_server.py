"""A loopback HTTP server speaking the OpenAI chat-completions wire format, backed by local agents.

Used by the tests and the probe demo to exercise the real HTTP client end to end. Each request is
routed to an agent chosen from the conversation (`agent_for(messages)`); `scripted_agent_resolver`
maps a conversation to its task by the first user message (what `env.reset(task)` returned) and
keeps one scripted agent per conversation, restarted when a request has no assistant turn yet.

`mode` chooses how tool calls are written on the wire:
  structured  - standard `tool_calls` (a server with a working tool parser)
  xml         - Qwen3-coder XML in `content`, no `tool_calls` (a server without the parser)
  json        - `<tool_call>{json}</tool_call>` in `content`
  think_xml   - the XML inside a `<think>` block in `content`
A reply's `reasoning_content` goes out under `reasoning_key` (vLLM >= 0.17 calls it `reasoning`).

`strict=True` answers like a hosted API: HTTP 400 to any request field or message field that the
OpenAI chat-completions API does not define (vLLM's `chat_template_kwargs`, ...), and /models says
`owned_by: openai`; otherwise the server passes for vLLM (`owned_by: vllm`).
Fault injection for retry tests: `fail_next` requests answered with `fail_status`, with a
`Retry-After` header when `retry_after` is set; `hold` (a threading.Barrier) keeps each request
until that many are in flight at once (`max_in_flight` records the most seen).
"""
from __future__ import annotations

import contextlib
import http.server
import json
import threading
import time
from typing import Callable

MODES = ("structured", "xml", "json", "think_xml")
# The request fields of the OpenAI chat-completions API (what a strict server accepts).
OPENAI_FIELDS = {"model", "messages", "audio", "frequency_penalty", "function_call", "functions", "logit_bias",
                 "logprobs", "max_completion_tokens", "max_tokens", "metadata", "modalities", "n",
                 "parallel_tool_calls", "prediction", "presence_penalty", "prompt_cache_key", "reasoning_effort",
                 "response_format", "safety_identifier", "seed", "service_tier", "stop", "store", "stream",
                 "stream_options", "temperature", "tool_choice", "tools", "top_logprobs", "top_p", "user",
                 "verbosity", "web_search_options"}
OPENAI_MESSAGE_FIELDS = {"role", "content", "name", "tool_calls", "tool_call_id", "refusal", "audio",
                         "function_call"}


def unknown_fields(body: dict) -> list[str]:
    """Fields a hosted OpenAI API would reject: top level, then per message."""
    bad = sorted(set(body) - OPENAI_FIELDS)
    for i, m in enumerate(body.get("messages") or []):
        bad += [f"messages[{i}].{k}" for k in sorted(set(m) - OPENAI_MESSAGE_FIELDS)] if isinstance(m, dict) else []
    return bad


def _xml_call(name: str, args: dict) -> str:
    params = "".join(f"<parameter={k}>\n{v if isinstance(v, str) else json.dumps(v)}\n</parameter>\n"
                     for k, v in args.items())
    return f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"


def encode_reply(reply: dict, mode: str, reasoning_key: str = "reasoning_content") -> dict:
    """The agent's structured reply as the wire message of `mode`."""
    msg = _encode_calls(reply, mode)
    if reply.get("reasoning_content"):
        msg[reasoning_key] = reply["reasoning_content"]
    return msg


def _encode_calls(reply: dict, mode: str) -> dict:
    calls = reply.get("tool_calls") or []
    content = reply.get("content") or ""
    if mode == "structured" or not calls:
        msg = {"role": "assistant", "content": content or None}
        if calls:
            msg["tool_calls"] = [{"id": c.get("id", f"call_{i}"), "type": "function", "function": c["function"]}
                                 for i, c in enumerate(calls)]
        return msg
    parsed = [(c["function"]["name"], json.loads(c["function"].get("arguments") or "{}")) for c in calls]
    if mode == "json":
        text = "\n".join(f"<tool_call>\n{json.dumps({'name': n, 'arguments': a})}\n</tool_call>" for n, a in parsed)
    else:
        text = "\n".join(_xml_call(n, a) for n, a in parsed)
    if mode == "think_xml":
        text = f"<think>\nI will call the tool.\n{text}\n</think>\n"
    return {"role": "assistant", "content": (content + "\n" + text).strip()}


class _Handler(http.server.BaseHTTPRequestHandler):
    server_version = "hr1-loopback/1"
    protocol_version = "HTTP/1.1"   # keep-alive, as real servers: a pooled client reuses its connection
    disable_nagle_algorithm = True  # headers and body go out in two writes: no delayed-ACK stall between

    def log_message(self, *args):  # quiet
        pass

    def _send(self, code: int, payload: dict, headers: dict | None = None) -> None:
        body = json.dumps(payload).encode("utf-8")
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path.rstrip("/").endswith("/models"):
            owner = "openai" if self.server.owner.strict else "vllm"
            self._send(200, {"object": "list", "data": [{"id": self.server.model, "object": "model",
                                                         "owned_by": owner}]})
        else:
            self._send(404, {"error": {"message": "not found"}})

    def do_POST(self):
        owner: LoopbackOpenAIServer = self.server.owner
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))  # all of it: the connection lives on
        if not self.path.rstrip("/").endswith("/chat/completions"):
            return self._send(404, {"error": {"message": "not found"}})
        try:
            body = json.loads(raw)
            messages, tools = body["messages"], body.get("tools") or []
        except (ValueError, KeyError) as e:
            return self._send(400, {"error": {"message": f"bad request: {e}"}})
        owner.requests.append(body)
        owner.peers.append(self.client_address)
        if owner.strict and unknown_fields(body):
            return self._send(400, {"error": {"message": "Unrecognized request argument supplied: "
                                                         + ", ".join(unknown_fields(body)),
                                              "type": "invalid_request_error"}})
        with owner.count_lock:
            owner.fail_next, failing = max(0, owner.fail_next - 1), owner.fail_next > 0
        if failing:
            headers = {"Retry-After": owner.retry_after} if owner.retry_after is not None else {}
            return self._send(owner.fail_status, {"error": {"message": "injected failure"}}, headers)
        try:
            with owner.in_flight():
                reply = owner.agent_for(messages).chat(messages, tools)
        except Exception as e:
            return self._send(500, {"error": {"message": f"{type(e).__name__}: {e}"}})
        wire = encode_reply(reply, owner.mode, owner.reasoning_key)
        owner.replies.append(wire)
        prompt_chars = sum(len(str(m.get("content") or "")) for m in messages)
        completion_chars = len(json.dumps(wire))
        usage = {"prompt_tokens": prompt_chars // 4, "completion_tokens": completion_chars // 4}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        self._send(200, {"id": f"chatcmpl-{len(owner.requests)}", "object": "chat.completion",
                         "created": int(time.time()), "model": body.get("model", owner.model),
                         "choices": [{"index": 0, "message": wire,
                                      "finish_reason": "tool_calls" if wire.get("tool_calls") else "stop"}],
                         "usage": usage})


class LoopbackOpenAIServer:
    """`with LoopbackOpenAIServer(agent_for, mode="xml") as srv: srv.base_url -> http://127.0.0.1:PORT/v1`."""

    def __init__(self, agent_for: Callable[[list[dict]], object], *, mode: str = "structured",
                 model: str = "scripted-loopback", host: str = "127.0.0.1", port: int = 0,
                 strict: bool = False, reasoning_key: str = "reasoning_content"):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        self.agent_for, self.mode, self.model = agent_for, mode, model
        self.strict, self.reasoning_key = strict, reasoning_key
        self.requests: list[dict] = []
        self.replies: list[dict] = []   # the wire messages sent back
        self.peers: list[tuple] = []    # the client address of each request (connection reuse)
        self.fail_next = 0          # answer the next N requests with `fail_status` (retry tests)
        self.fail_status, self.retry_after = 503, None
        self.hold: threading.Barrier | None = None
        self.max_in_flight, self._in_flight = 0, 0
        self.count_lock = threading.Lock()
        self.httpd = http.server.ThreadingHTTPServer((host, port), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.owner, self.httpd.model = self, model
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="hr1-loopback-openai", daemon=True)

    @contextlib.contextmanager
    def in_flight(self):
        with self.count_lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            if self.hold is not None:
                self.hold.wait()
            yield
        finally:
            with self.count_lock:
                self._in_flight -= 1

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> "LoopbackOpenAIServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def scripted_agent_resolver(env, tasks, seed: int, make_agent: Callable) -> Callable[[list[dict]], object]:
    """Route a conversation to a fresh-per-episode agent for its task (found by first user message).

    `make_agent(task, seed)` builds the agent, e.g. `lambda t, s: make_scripted_agent(t, s, cfg)`.
    Episodes of the same task must not run concurrently against one server.
    """
    by_first = {env.reset(task): task for task in tasks}
    live: dict[str, object] = {}
    lock = threading.Lock()

    def agent_for(messages: list[dict]):
        first = next((m.get("content") for m in messages if m.get("role") == "user"), None)
        if first not in by_first:
            raise KeyError("conversation does not start with a known task")
        with lock:
            if first not in live or not any(m.get("role") == "assistant" for m in messages):
                live[first] = make_agent(by_first[first], seed)
            return live[first]

    return agent_for
