"""An OpenAI-compatible chat-completions target agent (reference spec §4.4), stdlib HTTP only.

POST {base_url}/chat/completions with the full messages and the episode's tools; per-request
timeout; bounded retries with exponential back-off on connection errors, time-outs, 429 and 5xx;
a per-endpoint concurrency limit shared by all clients of the process; token usage totals; and
tool-call format repair (`tool_repair`) counted per reply (`repaired_tool_calls`) and in total.
When every attempt fails it raises `AgentError`: an infrastructure failure, never a task failure.
"""
from __future__ import annotations

import http.client
import json
import os
import socket
import threading
import time
import urllib.error
import urllib.request

from hr1_jax.agents.base import AgentError
from hr1_jax.agents.tool_repair import repair_message

_SEMAPHORES: dict[tuple[str, int], threading.BoundedSemaphore] = {}
_SEM_LOCK = threading.Lock()
_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
_MESSAGE_KEYS = {"role", "content", "tool_calls", "tool_call_id"}


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


class OpenAIChatClient:
    def __init__(self, base_url: str, model: str, *, name: str = "", api_key: str = "",
                 temperature: float = 0.0, max_tokens: int = 4096, tool_choice: str = "auto",
                 timeout_s: float = 120.0, max_retries: int = 3, concurrency: int = 8,
                 enable_thinking: bool | None = False, backoff_s: float = 1.0, max_backoff_s: float = 30.0,
                 single_tool_call: bool = False):
        if not base_url or not model:
            raise ValueError("base_url and model are required")
        self.base_url = base_url.rstrip("/")
        self.model, self.name = model, name or model
        self.api_key = api_key
        self.temperature, self.max_tokens, self.tool_choice = temperature, max_tokens, tool_choice
        self.timeout_s, self.max_retries = timeout_s, max_retries
        self.backoff_s, self.max_backoff_s = backoff_s, max_backoff_s
        self.enable_thinking = enable_thinking
        self.single_tool_call = single_tool_call
        self._sem = _semaphore(self.base_url, max(1, int(concurrency)))
        self._lock = threading.Lock()
        self.stats = {"requests": 0, "attempts": 0, "retries": 0, "failures": 0, "repaired_tool_calls": 0,
                      "repaired_replies": 0, "prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}

    @classmethod
    def from_target_config(cls, t) -> "OpenAIChatClient":
        get = (lambda k, d=None: t.get(k, d)) if isinstance(t, dict) else (lambda k, d=None: t[k] if k in t else d)
        key_env = get("api_key_env", "OPENAI_API_KEY")
        return cls(get("base_url"), get("model"), name=get("name", ""), api_key=os.environ.get(key_env or "", ""),
                   temperature=float(get("temperature", 0.0)), max_tokens=int(get("max_tokens", 4096)),
                   tool_choice=get("tool_choice", "auto"), timeout_s=float(get("timeout_s", 120.0)),
                   max_retries=int(get("max_retries", 3)), concurrency=int(get("concurrency", 8)),
                   enable_thinking=get("enable_thinking", False), backoff_s=float(get("backoff_s", 1.0)))

    def request_body(self, messages: list[dict], tools: list[dict]) -> dict:
        body = {"model": self.model, "messages": _wire_messages(messages), "temperature": self.temperature,
                "max_tokens": self.max_tokens}
        if tools:
            body["tools"] = tools
            body["tool_choice"] = self.tool_choice
        if self.enable_thinking is not None:  # vLLM / SGLang servers (the reference target)
            body["chat_template_kwargs"] = {"enable_thinking": bool(self.enable_thinking)}
        return body

    def _post(self, body: dict) -> dict:
        data = json.dumps(body).encode("utf-8")
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(f"{self.base_url}/chat/completions", data=data, headers=headers, method="POST")
        with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
            return json.loads(resp.read().decode("utf-8"))

    def complete(self, body: dict) -> dict:
        """POST with retries; returns the decoded response JSON or raises AgentError."""
        last = ""
        with self._sem:
            for attempt in range(self.max_retries + 1):
                with self._lock:
                    self.stats["attempts"] += 1
                    if attempt:
                        self.stats["retries"] += 1
                try:
                    return self._post(body)
                except urllib.error.HTTPError as e:
                    detail = e.read()[:300].decode("utf-8", "replace") if e.fp else ""
                    last = f"HTTP {e.code}: {detail}"
                    if e.code not in _RETRY_STATUS:
                        break
                except (urllib.error.URLError, http.client.HTTPException, socket.timeout, TimeoutError,
                        ConnectionError, OSError, ValueError) as e:
                    last = f"{type(e).__name__}: {e}"
                if attempt < self.max_retries:
                    time.sleep(min(self.max_backoff_s, self.backoff_s * (2 ** attempt)))
        with self._lock:
            self.stats["failures"] += 1
        raise AgentError(f"{self.base_url} ({self.model}) failed after {attempt + 1} attempt(s): {last}")

    def chat(self, messages: list[dict], tools: list[dict]) -> dict:
        with self._lock:
            self.stats["requests"] += 1
            request_no = self.stats["requests"]
        data = self.complete(self.request_body(messages, tools))
        try:
            raw = data["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            raise AgentError(f"malformed chat completion: {str(data)[:300]}") from None
        message = {"role": "assistant", "content": raw.get("content") or ""}
        if raw.get("reasoning_content"):
            message["reasoning_content"] = raw["reasoning_content"]
        calls = []
        for i, call in enumerate(raw.get("tool_calls") or []):
            fn = call.get("function") or {}
            args = fn.get("arguments")
            calls.append({"id": call.get("id") or f"call_{i}", "type": "function",
                          "function": {"name": fn.get("name", ""),
                                       "arguments": args if isinstance(args, str) else json.dumps(args or {})}})
        if calls:
            message["tool_calls"] = calls
        allowed = {t["function"]["name"] for t in tools or [] if "function" in t}
        message, repaired = repair_message(message, allowed or None, call_prefix=f"call_rep{request_no}")
        message.pop("reasoning_content", None)
        if self.single_tool_call and len(message.get("tool_calls", [])) > 1:
            message["tool_calls"] = message["tool_calls"][:1]
        usage = {k: int(v) for k, v in (data.get("usage") or {}).items()
                 if k in ("prompt_tokens", "completion_tokens", "total_tokens") and isinstance(v, (int, float))}
        with self._lock:
            self.stats["repaired_tool_calls"] += repaired
            self.stats["repaired_replies"] += int(repaired > 0)
            for k, v in usage.items():
                self.stats[k] += v
        message["usage"] = usage
        message["repaired_tool_calls"] = repaired
        return message
