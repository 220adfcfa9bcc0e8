"""The OpenAI-compatible chat-completions client (reference spec §4.4): the target agent, and the
transport of the endpoint teacher and endpoint engineers (`train/teacher/endpoint.py`).

POST {base_url}/chat/completions over a pooled keep-alive HTTP client (`agents/http.py`). Bounds
that hold whatever the server does:
  timeout_s           one request in total: connect, send, wait, headers and body, however slowly
                      they trickle in;
  retry_budget_s      one call with all its attempts and back-off;
  max_response_bytes  the bytes read of one reply: a longer one is a protocol error, never kept;
  max_content_chars   the characters of one reply that flow into the episode (content, tool-call
                      ids, names and arguments): past it text is cut and later tool calls dropped,
                      counted in `truncated_replies`.
Retries with jittered exponential back-off (never shorter than a `Retry-After`) on connection
errors, time-outs, 408/409/429/5xx and protocol errors; any other 4xx is final. A per-endpoint
concurrency limit shared by all clients of the process (waiting for a slot is outside the budgets);
token usage totals; tool-call format repair (`tool_repair`, also from `reasoning_content` or vLLM's
newer `reasoning`) counted per reply (`repaired_tool_calls`) and in total. Every string returned
is valid UTF-8 (lone surrogates replaced). When every attempt fails it raises `AgentError`, or its
subclass `TargetProtocolError` when the endpoint answered with something that is not a chat
completion: a failure of the target, never a task failure.

Request fields: hosted OpenAI-style APIs answer 400 to fields they do not know, so the vLLM/SGLang
extensions (`chat_template_kwargs`, and the teacher's `continue_final_message` /
`add_generation_prompt`) go only to a server that takes them: `vllm_fields` True/False, or None
(auto: sent when GET /models says the server is vLLM, SGLang or hr1's own). The token limit is
sent as `token_limit_field` (`max_completion_tokens` by default: hosted OpenAI rejects `max_tokens`
for reasoning models; vLLM and SGLang read both); `omit_fields` leaves named fields out (e.g.
`temperature` for models that accept only their default).
"""
from __future__ import annotations

import json
import math
import os
import random
import re
import threading
import time

import httpx

from hr1_jax.agents.base import AgentError
from hr1_jax.agents.config import TOKEN_LIMIT_FIELDS
from hr1_jax.agents.http import BodyTooLarge, backoff_s, pooled_client, read_capped, request_deadline, retry_after_s
from hr1_jax.agents.tool_repair import repair_message
from hr1_jax.utils.jsonsafe import safe_str
from hr1_jax.utils.logging import log_event

_SEMAPHORES: dict[tuple[str, int], threading.BoundedSemaphore] = {}
_SEM_LOCK = threading.Lock()
_RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}
_MESSAGE_KEYS = {"role", "content", "tool_calls", "tool_call_id"}
_DETAIL_BYTES = 300
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
_TOO_DEEP = "<tool-call arguments nested too deeply to parse>"
REASONING_KEYS = ("reasoning_content", "reasoning")   # vLLM >= 0.17 names it `reasoning`
VLLM_OWNERS = {"vllm", "sglang", "hr1"}                # /models `owned_by` of servers that take the extensions


class TargetProtocolError(AgentError):
    """The endpoint answered, but not with a usable chat completion (not JSON, fields missing or of
    the wrong type, longer than max_response_bytes): a fault of the target server, not of the env."""


class _HTTPStatus(Exception):
    def __init__(self, code: int, detail: str, retry_after: float | None):
        super().__init__(f"HTTP {code}: {detail}")
        self.code, self.retry_after = code, retry_after


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


def reasoning_text(message: dict) -> str:
    """The reply's separate reasoning, under either name."""
    return next((message[k] for k in REASONING_KEYS if message.get(k)), "")


def _field_list(value) -> tuple[str, ...]:
    if isinstance(value, str):
        value = value.split(",")
    return tuple(v.strip() for v in value or () if v.strip())


def _error_detail(resp: httpx.Response) -> str:
    try:
        got = b""
        for chunk in resp.iter_bytes(_DETAIL_BYTES):
            got += chunk
            if len(got) >= _DETAIL_BYTES:
                break
        return _head(got)
    except httpx.HTTPError:
        return ""


def _decode_models(body: bytes) -> dict:
    try:
        data = json.loads(body.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        raise TargetProtocolError(f"/models reply is not JSON: {_head(body)}") from None
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise TargetProtocolError(f"/models reply has no data list: {_head(data)}")
    return data


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
    for key in REASONING_KEYS:
        _typed(message, key, str)
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
                 max_response_bytes: int = 4 << 20, max_content_chars: int = 200_000,
                 vllm_fields: bool | None = None, token_limit_field: str = "max_completion_tokens",
                 omit_fields=(), top_p: float | None = None):
        if not base_url or not model:
            raise ValueError("base_url and model are required")
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
        if timeout_s <= 0 or retry_budget_s <= 0 or max_response_bytes <= 0 or max_content_chars <= 0:
            raise ValueError("timeout_s, retry_budget_s, max_response_bytes and max_content_chars must be > 0")
        if token_limit_field not in TOKEN_LIMIT_FIELDS:
            raise ValueError(f"token_limit_field must be one of {TOKEN_LIMIT_FIELDS}, got {token_limit_field!r}")
        self.base_url = base_url.rstrip("/")
        self.model, self.name = model, name or model
        self.api_key = api_key
        self.temperature, self.max_tokens, self.tool_choice = temperature, max_tokens, tool_choice
        self.top_p = top_p
        self.timeout_s, self.retry_budget_s, self.max_retries = timeout_s, retry_budget_s, max_retries
        self.backoff_s, self.max_backoff_s = backoff_s, max_backoff_s
        self.max_response_bytes, self.max_content_chars = int(max_response_bytes), int(max_content_chars)
        self.enable_thinking = enable_thinking
        self.vllm_fields = vllm_fields
        self.token_limit_field, self.omit_fields = token_limit_field, _field_list(omit_fields)
        self.single_tool_call = single_tool_call
        self._sem = _semaphore(self.base_url, max(1, int(concurrency)))
        self._http = pooled_client(self.base_url, max(1, int(concurrency)))
        self._rng = random.Random()
        self._lock, self._detect_lock = threading.Lock(), threading.Lock()
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
                   max_content_chars=int(get("max_content_chars", 200_000)),
                   vllm_fields=get("vllm_fields", None),
                   token_limit_field=get("token_limit_field", "max_completion_tokens"),
                   omit_fields=get("omit_fields", ""))

    # --- the request ---------------------------------------------------------------------------
    def takes_vllm_fields(self) -> bool:
        """`vllm_fields`, or in auto mode what the server's GET /models says (asked once)."""
        with self._detect_lock:  # one question per client, however many threads ask at once
            if self.vllm_fields is None:
                self.vllm_fields = self._detect_vllm()
        return self.vllm_fields

    def _detect_vllm(self) -> bool:
        """What GET /models says; a final error or no model list: no vLLM; no answer: AgentError."""
        try:
            data = self._call("GET", "/models", None, _decode_models, counted=False)
            owners = {str(m.get("owned_by", "")).lower() for m in data["data"] if isinstance(m, dict)}
        except AgentError as e:
            if not isinstance(e, TargetProtocolError) and getattr(e, "http_status", None) in (None, *_RETRY_STATUS):
                raise
            owners = set()
        log_event("agent", "vllm_fields_auto", base_url=self.base_url, owned_by=sorted(owners),
                  vllm_fields=bool(owners & VLLM_OWNERS))
        return bool(owners & VLLM_OWNERS)

    def body(self, messages: list[dict], tools: list[dict] | None = None, vllm_extra: dict | None = None) -> dict:
        """The request JSON; `vllm_extra` fields join `chat_template_kwargs` only on a server that takes them."""
        body = {"model": self.model, "messages": _wire_messages(messages), "temperature": self.temperature,
                self.token_limit_field: self.max_tokens}
        if self.top_p is not None:
            body["top_p"] = self.top_p
        if tools:
            body["tools"] = tools
            body["tool_choice"] = self.tool_choice
        if self.takes_vllm_fields():
            if self.enable_thinking is not None:  # vLLM / SGLang chat templates (the reference target)
                body["chat_template_kwargs"] = {"enable_thinking": bool(self.enable_thinking)}
            body.update(vllm_extra or {})
        for field in self.omit_fields:
            body.pop(field, None)
        return body

    def request_body(self, messages: list[dict], tools: list[dict]) -> dict:
        return self.body(messages, tools)

    def _count(self, key: str) -> None:
        with self._lock:
            self.stats[key] += 1

    def _attempt(self, method: str, path: str, data: bytes | None, deadline: float) -> bytes:
        """One attempt, over by `deadline` (time.monotonic) whatever the server does; the body."""
        headers = {"Content-Type": "application/json"} if data is not None else {}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        per_op = max(deadline - time.monotonic(), 0.01)
        try:
            with request_deadline(deadline), self._http.stream(method, self.base_url + path, content=data,
                                                               headers=headers, timeout=per_op) as resp:
                if resp.status_code >= 300:
                    raise _HTTPStatus(resp.status_code, _error_detail(resp),
                                      retry_after_s(resp.headers.get("Retry-After")))
                return read_capped(resp, self.max_response_bytes)
        except BodyTooLarge as e:
            raise TargetProtocolError(str(e)) from None
        except httpx.TimeoutException:
            raise TimeoutError(f"no complete reply within timeout_s={self.timeout_s}") from None
        except httpx.DecodingError as e:
            raise TargetProtocolError(f"reply body cannot be decoded: {e}") from None
        except httpx.RequestError as e:
            raise ConnectionError(f"{type(e).__name__}: {e}") from None

    def _call(self, method: str, path: str, data: bytes | None, decode, counted: bool = True):
        """`decode(body)` of the first attempt that succeeds within retry_budget_s, or AgentError
        (TargetProtocolError when the last reply was not what `decode` takes) with the last HTTP
        status in `http_status`; `counted` calls go into `stats`."""
        last, protocol, status = "", False, None
        count = self._count if counted else (lambda key: None)
        with self._sem:
            start = time.monotonic()
            budget_end = start + self.retry_budget_s
            for attempt in range(self.max_retries + 1):
                count("attempts")
                if attempt:
                    count("retries")
                retry_after, status = None, None
                try:
                    return decode(self._attempt(method, path, data, min(time.monotonic() + self.timeout_s,
                                                                        budget_end)))
                except _HTTPStatus as e:
                    last, protocol, retry_after, status = str(e), False, e.retry_after, e.code
                    if e.code not in _RETRY_STATUS:
                        break  # the request itself is wrong: sending it again cannot help
                except TargetProtocolError as e:
                    last, protocol = str(e), True
                    count("protocol_errors")
                except OSError as e:
                    last, protocol = f"{type(e).__name__}: {e}", False
                    if isinstance(e, TimeoutError):
                        count("timeouts")
                pause = backoff_s(attempt, self.backoff_s, self.max_backoff_s, retry_after, self._rng)
                if attempt == self.max_retries or time.monotonic() + pause >= budget_end:
                    break
                time.sleep(pause)
        count("failures")
        error = (TargetProtocolError if protocol else AgentError)(
            f"{self.base_url} ({self.model}) failed after {attempt + 1} attempt(s) in "
            f"{time.monotonic() - start:.1f}s: {last}")
        error.http_status = status
        raise error

    def complete(self, body: dict) -> dict:
        """POST with retries within retry_budget_s; returns the reply JSON, its choices[0].message
        checked, or raises AgentError (TargetProtocolError when the last reply was not a completion)."""
        return self._call("POST", "/chat/completions", json.dumps(body).encode("utf-8"), _decode_completion)

    # --- one agent turn ------------------------------------------------------------------------
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
        if reasoning_text(raw):  # read by the repair only, never kept
            message["reasoning_content"] = budget.take(reasoning_text(raw))
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
