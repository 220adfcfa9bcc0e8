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
"""
from __future__ import annotations

import http.server
import json
import threading
import time
from typing import Callable

MODES = ("structured", "xml", "json", "think_xml")


def _xml_call(name: str, args: dict) -> str:
    params = "".join(f"<parameter={k}>\n{v if isinstance(v, str) else json.dumps(v)}\n</parameter>\n"
                     for k, v in args.items())
    return f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"


def encode_reply(reply: dict, mode: str) -> dict:
    """The agent's structured reply as the wire message of `mode`."""
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

    def log_message(self, *args):  # quiet
        pass

    def _send(self, code: int, payload: dict) -> None:
        body = json.dumps(payload).encode("utf-8")
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, {"object": "list", "data": [{"id": self.server.model, "object": "model"}]})
        else:
            self._send(404, {"error": {"message": "not found"}})

    def do_POST(self):
        owner: LoopbackOpenAIServer = self.server.owner
        if not self.path.rstrip("/").endswith("/chat/completions"):
            return self._send(404, {"error": {"message": "not found"}})
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            messages, tools = body["messages"], body.get("tools") or []
        except (ValueError, KeyError) as e:
            return self._send(400, {"error": {"message": f"bad request: {e}"}})
        owner.requests.append(body)
        if owner.fail_next > 0:
            owner.fail_next -= 1
            return self._send(503, {"error": {"message": "overloaded (injected)"}})
        try:
            reply = owner.agent_for(messages).chat(messages, tools)
        except Exception as e:
            return self._send(500, {"error": {"message": f"{type(e).__name__}: {e}"}})
        wire = encode_reply(reply, owner.mode)
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
                 model: str = "scripted-loopback", host: str = "127.0.0.1", port: int = 0):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        self.agent_for, self.mode, self.model = agent_for, mode, model
        self.requests: list[dict] = []
        self.replies: list[dict] = []   # the wire messages sent back
        self.fail_next = 0          # answer the next N requests with HTTP 503 (retry tests)
        self.httpd = http.server.ThreadingHTTPServer((host, port), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.owner, self.httpd.model = self, model
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="hr1-loopback-openai", daemon=True)

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
