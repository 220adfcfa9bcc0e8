"""The OpenAI chat-completions wire format on top of the batcher: request -> prompt ids, decode
result -> a chat completion with structured `tool_calls` and `usage`.

Requests are rendered with the checkpoint's chat template (`Tokenizer.apply_chat_template`, the
project's Qwen format when it has none) with the request's `tools`; thinking follows
`chat_template_kwargs.enable_thinking` (the server's default otherwise); vLLM's
`continue_final_message` / `add_generation_prompt` are honoured, so the endpoint engineer's prefill
works. Tool calls in the generated text (Qwen3 JSON or Qwen3.5 XML, `agents.tool_repair`) for tools
the request offered become `tool_calls` (the batcher's `serve.guided.Guide` has made them well formed
and enforced `tool_choice` first); text before `</think>` becomes `reasoning_content`.
Bad requests get HTTP 400 with an OpenAI error object, a wrong model name 404.
"""
from __future__ import annotations

import dataclasses
import time
import uuid

from hr1_jax.agents.tool_repair import repair_message
from hr1_jax.models.tokenizer import THINK_CLOSE, THINK_OPEN
from hr1_jax.serve.batcher import GenRequest
from hr1_jax.serve.guided import ToolPolicy

TOOL_CHOICES = ("none", "auto", "required")


class APIError(Exception):
    def __init__(self, status: int, message: str, param: str | None = None, kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.param, self.kind = status, param, kind

    def body(self) -> dict:
        return {"error": {"message": str(self), "type": self.kind, "param": self.param, "code": self.status}}


@dataclasses.dataclass
class ServeOptions:
    model_id: str
    max_model_len: int = 32768
    default_max_tokens: int = 1024
    enable_thinking: bool = False


def _number(body: dict, key: str, default: float, lo: float, hi: float) -> float:
    value = body.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
        raise APIError(400, f"{key} must be a number in [{lo}, {hi}], got {value!r}", key)
    return float(value)


def _text(content, where: str) -> str:
    """A message content: a string, null, or a list of text parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content):
        return "".join(str(p.get("text", "")) for p in content)
    raise APIError(400, f"{where}.content must be a string or a list of text parts", "messages")


def _messages(body: dict) -> list[dict]:
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs or not all(isinstance(m, dict) for m in msgs):
        raise APIError(400, "messages must be a non-empty list of objects", "messages")
    out = []
    for i, m in enumerate(msgs):
        if m.get("role") not in ("system", "user", "assistant", "tool"):
            raise APIError(400, f"messages[{i}].role must be system, user, assistant or tool", "messages")
        clean = {k: v for k, v in m.items() if k in ("role", "name", "tool_call_id", "tool_calls") and v is not None}
        clean["content"] = _text(m.get("content"), f"messages[{i}]")
        out.append(clean)
    return out


def _tools(body: dict) -> tuple[list[dict], ToolPolicy | None]:
    """(tool specs, the tool-call policy; None = tool_choice "none" or no tools: the reply stays text)."""
    tools = body.get("tools") or []
    if not isinstance(tools, list) or not all(isinstance(t, dict) and isinstance(t.get("function"), dict)
                                              and isinstance(t["function"].get("name"), str) for t in tools):
        raise APIError(400, "tools must be a list of {type: function, function: {name, ...}}", "tools")
    functions = tuple((t["function"]["name"], t["function"]) for t in tools)
    choice = body.get("tool_choice", "auto") or "auto"
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name")
        if name not in dict(functions):
            raise APIError(400, f"tool_choice names a tool that is not in tools: {name!r}", "tool_choice")
        return tools, ToolPolicy(functions, "named", name)
    if choice not in TOOL_CHOICES:
        raise APIError(400, f"tool_choice must be one of {TOOL_CHOICES} or a function object", "tool_choice")
    if choice == "required" and not tools:
        raise APIError(400, 'tool_choice "required" needs tools', "tool_choice")
    return tools, ToolPolicy(functions, choice) if tools and choice != "none" else None


def _stop(body: dict) -> tuple[str, ...]:
    stop = body.get("stop")
    if stop is None:
        return ()
    stop = [stop] if isinstance(stop, str) else stop
    if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop) or len(stop) > 4:
        raise APIError(400, "stop must be a string or a list of at most 4 strings", "stop")
    return tuple(s for s in stop if s)


def _overlap(head: str, tail: str) -> int:
    """Length of the longest prefix of `tail` that `head` already ends with."""
    for k in range(min(len(head), len(tail)), 0, -1):
        if head.endswith(tail[:k]):
            return k
    return 0


def render(tokenizer, body: dict, opts: ServeOptions) -> str:
    """The prompt text of a request."""
    messages = _messages(body)
    tools, _ = _tools(body)
    kwargs = body.get("chat_template_kwargs") or {}
    if not isinstance(kwargs, dict):
        raise APIError(400, "chat_template_kwargs must be an object", "chat_template_kwargs")
    thinking = bool(kwargs.get("enable_thinking", opts.enable_thinking))
    apply = lambda msgs, gen: tokenizer.apply_chat_template(msgs, add_generation_prompt=gen,
                                                            enable_thinking=thinking, tools=tools or None)
    if body.get("continue_final_message"):
        if messages[-1]["role"] != "assistant":
            raise APIError(400, "continue_final_message needs a final assistant message", "messages")
        head, final = apply(messages[:-1], True), messages[-1]["content"]
        return head + final[_overlap(head, final):]   # a prefill that repeats the opened think block
    return apply(messages, body.get("add_generation_prompt", True) is not False)


def parse_request(tokenizer, body: dict, opts: ServeOptions) -> GenRequest:
    if not isinstance(body, dict):
        raise APIError(400, "the request body must be a JSON object")
    if body.get("model") not in (None, opts.model_id):
        raise APIError(404, f"model {body.get('model')!r} does not exist; this server serves {opts.model_id!r}",
                       "model", "not_found_error")
    if body.get("stream"):
        raise APIError(400, "stream=true is not supported", "stream")
    if body.get("n", 1) != 1:
        raise APIError(400, "only n=1 is supported", "n")
    _, policy = _tools(body)
    try:
        ids = tokenizer.encode(render(tokenizer, body, opts))
    except ValueError as e:   # messages the chat template cannot render (e.g. tool-call arguments not JSON)
        raise APIError(400, f"cannot render the messages: {e}", "messages") from None
    room = opts.max_model_len - len(ids)
    if room < 1:
        raise APIError(400, f"the prompt has {len(ids)} tokens; this model's maximum context length is "
                            f"{opts.max_model_len}", "messages")
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    if limit is None:
        limit = opts.default_max_tokens
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise APIError(400, f"max_tokens / max_completion_tokens must be a positive integer, got {limit!r}",
                       "max_tokens")
    return GenRequest(prompt_ids=ids, max_tokens=min(limit, room), temperature=_number(body, "temperature", 1.0, 0, 2),
                      top_p=_number(body, "top_p", 1.0, 1e-9, 1.0), stop=_stop(body), tools=policy)


def completion(body: dict, req: GenRequest, result, opts: ServeOptions) -> dict:
    """The chat completion of a decode result."""
    _, policy = _tools(body)
    allowed = set(policy.names) if policy else None
    text, reasoning = result.text, None
    if THINK_CLOSE in text:   # thinking on: the reasoning before </think> (vLLM's reasoning parser)
        reasoning, text = text.split(THINK_CLOSE, 1)
        reasoning = reasoning.replace(THINK_OPEN, "").strip()
    text = text.strip()
    rid = uuid.uuid4().hex[:24]
    message = {"role": "assistant", "content": text}
    n_calls = 0
    if allowed:
        message, n_calls = repair_message(message, allowed, call_prefix=f"call_{rid[:12]}")
    if n_calls:
        message["content"] = message["content"] or None
    if reasoning:
        message["reasoning_content"] = reasoning
    finish = "tool_calls" if n_calls else result.finish_reason
    usage = {"prompt_tokens": len(req.prompt_ids), "completion_tokens": len(result.tokens),
             "total_tokens": len(req.prompt_ids) + len(result.tokens)}
    return {"id": f"chatcmpl-{rid}", "object": "chat.completion", "created": int(time.time()),
            "model": opts.model_id, "choices": [{"index": 0, "message": message, "finish_reason": finish,
                                                 "logprobs": None}], "usage": usage}
