"""An OpenAI-compatible chat-completions target agent (reference spec §4.4), stdlib HTTP only.

POST {base_url}/chat/completions with the full messages and the episode's tools. Bounds that hold
whatever the server does:
  timeout_s           one request in total: connect, send, wait, headers and body, however slowly
                      they trickle in (socket timeouts bound each read, not the request, so a
                      watchdog shuts the socket down at the deadline);
  retry_budget_s      one call with all its attempts and back-off;
  max_response_bytes  the bytes read of one reply: a longer one is a protocol error, never kept;
  max_content_chars   the characters of one reply that flow into the episode (content, tool-call
                      ids, names and arguments): past it text is cut and later tool calls dropped,
                      counted in `truncated_replies`.
Bounded retries with exponential back-off on connection errors, time-outs, 429/5xx and protocol
errors; a per-endpoint concurrency limit shared by all clients of the process (waiting for a slot
is outside the budgets); token usage totals; tool-call format repair (`tool_repair`) counted per
reply (`repaired_tool_calls`) and in total. Every string returned is valid UTF-8 (lone surrogates
replaced). When every attempt fails it raises `AgentError`, or its subclass `TargetProtocolError`
when the endpoint answered with something that is not a chat completion: a failure of the target,
never a task failure. Host-name resolution happens before there is a socket to watch: a hanging
DNS lookup is not bounded here.
"""
from __future__ import annotations

import http.client
import json
import math
import os
import re
import socket
import threading
import time
import urllib.error
import urllib.request

from hr1_jax.agents.base import AgentError
from hr1_jax.agents.tool_repair import repair_message
from hr1_jax.utils.jsonsafe import safe_str

_SEMAPHORES: dict[tuple[str, int], threading.BoundedSemaphore] = {}
_SEM_LOCK = threading.Lock()
_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
_MESSAGE_KEYS = {"role", "content", "tool_calls", "tool_call_id"}
_READ_CHUNK = 1 << 16
_DETAIL_BYTES = 300
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
_TOO_DEEP = "<tool-call arguments nested too deeply to parse>"


class TargetProtocolError(AgentError):
    """The endpoint answered, but not with a usable chat completion (not JSON, fields missing or of
    the wrong type, longer than max_response_bytes): a fault of the target server, not of the env."""


class _HTTPStatus(Exception):
    def __init__(self, code: int, detail: str):
        super().__init__(f"HTTP {code}: {detail}")
        self.code = code


def _head(value) -> str:
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    return safe_str(text[:_DETAIL_BYTES])


def _semaphore(base_url: str, limit: int) -> threading.BoundedSemaphore:
    with _SEM_LOCK:
        return _SEMAPHORES.setdefault((base_url, limit), threading.BoundedSemaphore(limit))


def _wire_messages(messages: list[dict]) -> list[dict]:
    """Only the standard fields (the runtime keeps extras such as a tool message's name)."""
    out = []
    for m in messages:
        w = {k: v for k, v in m.items() if k in _MESSAGE_KEYS and v is not None}
        w.setdefault("content", "")
        out.append(w)
    return out


# --- one attempt, over by its deadline ---------------------------------------------------------
def _shut_down(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)  # wakes a connect/send/recv blocked on the socket
    except OSError:
        pass  # already closed


class _Watchdog:
    """Shuts the sockets of one attempt down at its deadline. It holds duplicates of them: TLS
    wrapping detaches the original socket object, and shutdown acts on the shared connection."""

    def __init__(self, deadline: float):
        self.deadline, self.fired = deadline, False
        self._dups: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(self.remaining(), self._fire)
        self._timer.daemon = True

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            for dup in self._dups:
                _shut_down(dup)

    def create_connection(self, *args, **kwargs) -> socket.socket:
        sock = socket.create_connection(*args, **kwargs)
        with self._lock:
            self._dups.append(sock.dup())
            if self.fired:
                _shut_down(self._dups[-1])
        return sock

    def connection_class(self, http_class):
        def make(*args, **kwargs):
            conn = http_class(*args, **kwargs)
            conn._create_connection = self.create_connection  # http.client's socket factory hook
            return conn
        return make

    def opener(self) -> urllib.request.OpenerDirector:
        """urllib as usual (proxies, redirects, TLS) with every connection watched."""
        handlers = [_WatchedHTTPHandler(), _WatchedHTTPSHandler()]
        for handler in handlers:
            handler.watchdog = self
        return urllib.request.build_opener(*handlers)

    def __enter__(self) -> "_Watchdog":
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self._timer.cancel()
        with self._lock:
            for dup in self._dups:
                dup.close()


class _Watched:
    watchdog: _Watchdog

    def do_open(self, http_class, req, **kwargs):
        return super().do_open(self.watchdog.connection_class(http_class), req, **kwargs)


class _WatchedHTTPHandler(_Watched, urllib.request.HTTPHandler):
    pass


class _WatchedHTTPSHandler(_Watched, urllib.request.HTTPSHandler):
    pass


def _read_capped(resp, limit: int) -> bytes:
    """The body, reading no more than `limit` + 1 bytes; TargetProtocolError when it is longer."""
    declared = resp.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > limit:
        raise TargetProtocolError(f"reply of {declared} bytes exceeds max_response_bytes={limit}")
    chunks, size = [], 0
    while chunk := resp.read(min(_READ_CHUNK, limit + 1 - size)):
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise TargetProtocolError(f"reply exceeds max_response_bytes={limit}")
    return b"".join(chunks)


def _error_detail(e: urllib.error.HTTPError) -> str:
    try:
        return _head(e.read(_DETAIL_BYTES)) if e.fp else ""
    except (OSError, http.client.HTTPException):
        return ""


# --- the reply ---------------------------------------------------------------------------------
def _typed(obj: dict, key: str, kind: type):
    value = obj.get(key)
    if value is not None and not isinstance(value, kind):
        raise TargetProtocolError(f"{key} is {type(value).__name__}, not {kind.__name__}: {_head(value)}")
    return value


def _decode_completion(body: bytes) -> dict:
    """The reply JSON, its choices[0].message checked to be a chat message; TargetProtocolError if not."""
    try:
        data = json.loads(body.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        raise TargetProtocolError(f"reply is not JSON: {_head(body)}") from None
    try:
        message = data["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        raise TargetProtocolError(f"reply has no choices[0].message: {_head(data)}") from None
    if not isinstance(message, dict):
        raise TargetProtocolError(f"choices[0].message is not an object: {_head(message)}")
    _typed(message, "content", str)
    _typed(message, "reasoning_content", str)
    for call in _typed(message, "tool_calls", list) or []:
        if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
            raise TargetProtocolError(f"tool call without a function object: {_head(call)}")
        _typed(call, "id", str)
        _typed(call["function"], "name", str)
    return data


def _arguments_text(args) -> str:
    """Arguments as JSON text the runtime can parse safely: no escaped lone surrogate (it would
    decode back into one) and no nesting too deep for json (RecursionError, not ValueError)."""
    if args is None:
        return "{}"
    try:
        if isinstance(args, str):
            value = json.loads(args)
            if not _ESCAPED_SURROGATE.search(args):
                return args  # the server's own text
            args = value
        return json.dumps(args, ensure_ascii=False)
    except ValueError:
        return args  # not JSON: the runtime counts an invalid tool call
    except RecursionError:
        return _TOO_DEEP


class _CharBudget:
    """The characters of one reply allowed into the episode; every string passes through `take`."""

    def __init__(self, limit: int):
        self.left, self.cut = limit, False

    def take(self, text: str) -> str:
        text = safe_str(text)
        if len(text) > self.left:
            text, self.cut = text[:self.left], True
        self.left -= len(text)
        return text


def _tool_calls(raw_calls: list, budget: _CharBudget) -> list[dict]:
    calls = []
    for i, call in enumerate(raw_calls):
        if budget.left <= 0:
            budget.cut = True  # the remaining calls are dropped
            break
        fn = call["function"]
        calls.append({"id": budget.take(call.get("id") or "") or f"call_{i}", "type": "function",
                      "function": {"name": budget.take(fn.get("name") or ""),
                                   "arguments": budget.take(_arguments_text(fn.get("arguments")))}})
    return calls


def _repair(message: dict, allowed: set[str] | None, call_prefix: str) -> tuple[dict, int]:
    try:
        message, repaired = repair_message(message, allowed, call_prefix=call_prefix)
    except RecursionError:  # deeply nested brackets in the text: not a tool call
        return message, 0
    if repaired:  # arguments re-encoded from the text may hold a decoded lone surrogate
        for call in message["tool_calls"]:
            call["function"]["arguments"] = safe_str(call["function"]["arguments"])
    return message, repaired


def _usage(raw) -> dict:
    """Token counts of the reply; informational, so anything malformed is left out."""
    return {k: int(v) for k, v in (raw.items() if isinstance(raw, dict) else ())
            if k in ("prompt_tokens", "completion_tokens", "total_tokens")
            and isinstance(v, (int, float)) and math.isfinite(v)}


class OpenAIChatClient:
    def __init__(self, base_url: str, model: str, *, name: str = "", api_key: str = "",
                 temperature: float = 0.0, max_tokens: int = 4096, tool_choice: str = "auto",
                 timeout_s: float = 120.0, retry_budget_s: float = 600.0, max_retries: int = 3,
                 concurrency: int = 8, enable_thinking: bool | None = False, backoff_s: float = 1.0,
                 max_backoff_s: float = 30.0, single_tool_call: bool = False,
                 max_response_bytes: int = 4 << 20, max_content_chars: int = 200_000):
        if not base_url or not model:
            raise ValueError("base_url and model are required")
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
        if timeout_s <= 0 or retry_budget_s <= 0 or max_response_bytes <= 0 or max_content_chars <= 0:
            raise ValueError("timeout_s, retry_budget_s, max_response_bytes and max_content_chars must be > 0")
        self.base_url = base_url.rstrip("/")
        self.model, self.name = model, name or model
        self.api_key = api_key
        self.temperature, self.max_tokens, self.tool_choice = temperature, max_tokens, tool_choice
        self.timeout_s, self.retry_budget_s, self.max_retries = timeout_s, retry_budget_s, max_retries
        self.backoff_s, self.max_backoff_s = backoff_s, max_backoff_s
        self.max_response_bytes, self.max_content_chars = int(max_response_bytes), int(max_content_chars)
        self.enable_thinking = enable_thinking
        self.single_tool_call = single_tool_call
        self._sem = _semaphore(self.base_url, max(1, int(concurrency)))
        self._lock = threading.Lock()
        self.stats = {"requests": 0, "attempts": 0, "retries": 0, "failures": 0, "timeouts": 0,
                      "protocol_errors": 0, "truncated_replies": 0, "repaired_tool_calls": 0,
                      "repaired_replies": 0, "prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}

    @classmethod
    def from_target_config(cls, t) -> "OpenAIChatClient":
        get = (lambda k, d=None: t.get(k, d)) if isinstance(t, dict) else (lambda k, d=None: t[k] if k in t else d)
        key_env = get("api_key_env", "OPENAI_API_KEY")
        return cls(get("base_url"), get("model"), name=get("name", ""), api_key=os.environ.get(key_env or "", ""),
                   temperature=float(get("temperature", 0.0)), max_tokens=int(get("max_tokens", 4096)),
                   tool_choice=get("tool_choice", "auto"), timeout_s=float(get("timeout_s", 120.0)),
                   retry_budget_s=float(get("retry_budget_s", 600.0)),
                   max_retries=int(get("max_retries", 3)), concurrency=int(get("concurrency", 8)),
                   enable_thinking=get("enable_thinking", False), backoff_s=float(get("backoff_s", 1.0)),
                   max_response_bytes=int(get("max_response_bytes", 4 << 20)),
                   max_content_chars=int(get("max_content_chars", 200_000)))

    def request_body(self, messages: list[dict], tools: list[dict]) -> dict:
        body = {"model": self.model, "messages": _wire_messages(messages), "temperature": self.temperature,
                "max_tokens": self.max_tokens}
        if tools:
            body["tools"] = tools
            body["tool_choice"] = self.tool_choice
        if self.enable_thinking is not None:  # vLLM / SGLang servers (the reference target)
            body["chat_template_kwargs"] = {"enable_thinking": bool(self.enable_thinking)}
        return body

    def _count(self, key: str) -> None:
        with self._lock:
            self.stats[key] += 1

    def _post(self, data: bytes, deadline: float) -> dict:
        """One attempt, over by `deadline` (time.monotonic) whatever the server does."""
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(f"{self.base_url}/chat/completions", data=data, headers=headers, method="POST")
        with _Watchdog(deadline) as watchdog:
            per_read = max(watchdog.remaining(), 0.01)  # 0 would make the socket non-blocking
            try:
                with watchdog.opener().open(req, timeout=per_read) as resp:
                    body = _read_capped(resp, self.max_response_bytes)
            except urllib.error.HTTPError as e:
                raise _HTTPStatus(e.code, _error_detail(e)) from None
            except (OSError, http.client.HTTPException):  # URLError is an OSError
                if not watchdog.fired:
                    raise
            if watchdog.fired:  # a read cut short by the shutdown may look like a complete one
                raise TimeoutError(f"no complete reply within timeout_s={self.timeout_s}")
        return _decode_completion(body)

    def complete(self, body: dict) -> dict:
        """POST with retries within retry_budget_s; returns the reply JSON, its choices[0].message
        checked, or raises AgentError (TargetProtocolError when the last reply was not a completion)."""
        data = json.dumps(body).encode("utf-8")
        last, protocol = "", False
        with self._sem:
            start = time.monotonic()
            budget_end = start + self.retry_budget_s
            for attempt in range(self.max_retries + 1):
                with self._lock:
                    self.stats["attempts"] += 1
                    self.stats["retries"] += int(attempt > 0)
                try:
                    return self._post(data, min(time.monotonic() + self.timeout_s, budget_end))
                except _HTTPStatus as e:
                    last, protocol = str(e), False
                    if e.code not in _RETRY_STATUS:
                        break
                except TargetProtocolError as e:
                    last, protocol = str(e), True
                    self._count("protocol_errors")
                except (OSError, http.client.HTTPException) as e:
                    last, protocol = f"{type(e).__name__}: {e}", False
                    if isinstance(e, TimeoutError) or isinstance(getattr(e, "reason", None), TimeoutError):
                        self._count("timeouts")
                pause = min(self.max_backoff_s, self.backoff_s * (2 ** attempt))
                if attempt == self.max_retries or time.monotonic() + pause >= budget_end:
                    break
                time.sleep(pause)
        self._count("failures")
        error = TargetProtocolError if protocol else AgentError
        raise error(f"{self.base_url} ({self.model}) failed after {attempt + 1} attempt(s) in "
                    f"{time.monotonic() - start:.1f}s: {last}")

    def chat(self, messages: list[dict], tools: list[dict]) -> dict:
        with self._lock:
            self.stats["requests"] += 1
            request_no = self.stats["requests"]
        data = self.complete(self.request_body(messages, tools))
        raw = data["choices"][0]["message"]
        budget = _CharBudget(self.max_content_chars)
        message = {"role": "assistant", "content": budget.take(raw.get("content") or "")}
        calls = _tool_calls(raw.get("tool_calls") or [], budget)
        if calls:
            message["tool_calls"] = calls
        if raw.get("reasoning_content"):  # read by the repair only, never kept
            message["reasoning_content"] = budget.take(raw["reasoning_content"])
        allowed = {t["function"]["name"] for t in tools or [] if "function" in t}
        message, repaired = _repair(message, allowed or None, f"call_rep{request_no}")
        message.pop("reasoning_content", None)
        if self.single_tool_call and len(message.get("tool_calls", [])) > 1:
            message["tool_calls"] = message["tool_calls"][:1]
        usage = _usage(data.get("usage"))
        with self._lock:
            self.stats["repaired_tool_calls"] += repaired
            self.stats["repaired_replies"] += int(repaired > 0)
            self.stats["truncated_replies"] += int(budget.cut)
            for k, v in usage.items():
                self.stats[k] += v
        message["usage"] = usage
        message["repaired_tool_calls"] = repaired
        return message
