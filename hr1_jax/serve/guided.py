"""Guided tool calls: a reply's tool call names a tool the request declared, with JSON arguments
that fit that tool's schema, and `tool_choice` is enforced (what vLLM / SGLang guided decoding
guarantees).

After the free decode of a request that offers tools (`tool_choice` not "none"):
  * the model wrote no `<tool_call>`: "auto" keeps the reply as it is; "required" / a named function
    force one (the reply is then only the tool call, after any reasoning);
  * every call it opened is well formed (a declared name, a JSON object fitting the schema): kept;
  * otherwise the reply is cut where its first `<tool_call>` opens and that one call is decoded
    again under constraints: the NAME is the declared tool the model scores highest after
    `<tool_call>\\n{"name": "` (the named one for a named `tool_choice`), the ARGUMENTS are decoded
    freely after `"arguments": ` and kept when they parse and fit; else they are filled field by
    field from the schema (required keys in order; the model writes each string value up to its
    closing quote, or a JSON value of the declared type).
A call that still cannot be made to fit raises `GuideError` (HTTP 500 for that request): never a
silently wrong call. Only the Hermes/Qwen3 JSON call format (the project's chat format) is guided.
"""
from __future__ import annotations

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from hr1_jax.agents.tool_repair import extract_tool_calls
from hr1_jax.models.logprobs import sequence_logprobs
from hr1_jax.models.tokenizer import THINK_CLOSE, tool_call_text
from hr1_jax.serve.batcher import pow2_at_least as _pow2

CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
NAME_HEAD = CALL_OPEN + '\n{"name": "'
ARGS_HEAD = '", "arguments": '
CALL_TAIL = "}\n" + CALL_CLOSE
JSON_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "array": list,
              "object": dict, "null": type(None)}


class GuideError(RuntimeError):
    """The model's tool call could not be made to fit the declared tools."""


@dataclasses.dataclass(frozen=True)
class ToolPolicy:
    """The request's tools (function objects by name) and its tool_choice: "auto", "required" or
    "named" (then `name`). tool_choice "none" has no policy: the reply stays text."""
    functions: tuple[tuple[str, dict], ...]
    choice: str = "auto"
    name: str | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name,) if self.choice == "named" else tuple(n for n, _ in self.functions)

    def schema(self, name: str) -> dict:
        return dict(self.functions).get(name, {}).get("parameters") or {}


def fits(args, schema: dict) -> bool:
    """A JSON object with every required key, only declared keys (when properties are given) and
    values of the declared types."""
    if not isinstance(args, dict):
        return False
    props = schema.get("properties")
    if any(k not in args for k in schema.get("required") or ()):
        return False
    if isinstance(props, dict) and props:
        if any(k not in props for k in args):
            return False
        return all(_typed(args[k], props[k]) for k in args)
    return True


def _typed(value, spec) -> bool:
    kind = spec.get("type") if isinstance(spec, dict) else None
    if kind not in JSON_TYPES:
        return True
    if kind in ("integer", "number") and isinstance(value, bool):
        return False
    if kind == "array" and isinstance(value, list) and isinstance(spec.get("items"), dict):
        return all(_typed(v, spec["items"]) for v in value)
    return isinstance(value, JSON_TYPES[kind])


def _well_formed(text: str, policy: ToolPolicy) -> bool:
    calls = extract_tool_calls(text)
    return len(calls) >= text.count(CALL_OPEN) and all(
        name in policy.names and fits(args, policy.schema(name)) for name, args in calls)


def json_call_format(tokenizer) -> bool:
    """Whether the tokenizer's chat template writes tool calls as `<tool_call>{json}</tool_call>`."""
    call = {"type": "function", "function": {"name": "f", "arguments": '{"a": "b"}'}}
    text = tokenizer.apply_chat_template([{"role": "user", "content": "q"},
                                          {"role": "assistant", "content": "", "tool_calls": [call]}],
                                         add_generation_prompt=False, enable_thinking=False)
    return tool_call_text(call) in text


@nnx.jit
def _logprobs(model, ids):
    return sequence_logprobs(model, ids)[0]


class Guide:
    """Constrained re-decoding of one request's tool call on the server's sampler."""

    def __init__(self, sampler, *, min_prompt_bucket: int = 256, value_tokens: int = 256):
        self.sampler, self.tok = sampler, sampler.tokenizer
        self.min_prompt_bucket, self.value_tokens = min_prompt_bucket, value_tokens
        self.stats = {"guided": 0, "forced": 0, "renamed": 0, "schema_filled": 0, "failed": 0}

    def __call__(self, req, text: str, key) -> str | None:
        """The reply text with a well-formed tool call, or None when the free reply stands."""
        policy = req.tools
        cut = text.find(THINK_CLOSE)
        head_end = cut + len(THINK_CLOSE) if cut >= 0 else 0
        body = text[head_end:]
        opened = body.find(CALL_OPEN)
        if opened < 0 and policy.choice == "auto":
            return None
        if opened >= 0 and _well_formed(body, policy):
            return None
        self.stats["guided"] += 1
        self.stats["forced"] += opened < 0
        prefix = text[:head_end] + (body[:opened] if opened >= 0 else "")
        try:
            return prefix + self._call(req, prefix, body[opened:] if opened >= 0 else "", key)
        except GuideError:
            self.stats["failed"] += 1
            raise

    def _call(self, req, prefix: str, free_call: str, key) -> str:
        policy = req.tools
        name = self._name(req, prefix)
        self.stats["renamed"] += not free_call.startswith(NAME_HEAD + name + '"')
        head = NAME_HEAD + name + ARGS_HEAD
        k1, k2 = jax.random.split(key)
        out = self._decode(req, prefix + head, k1, req.max_tokens, stop=(CALL_CLOSE,))
        try:
            args, end = json.JSONDecoder().raw_decode(out.lstrip())
        except ValueError:
            args, end = None, 0
        if fits(args, policy.schema(name)):
            return head + out.lstrip()[:end] + CALL_TAIL
        self.stats["schema_filled"] += 1
        return head + self._fill(req, prefix + head, policy.schema(name), k2) + CALL_TAIL

    def _name(self, req, prefix: str) -> str:
        names = req.tools.names
        if not names:
            raise GuideError("tool_choice requires a tool call but the request declares no tools")
        if len(names) == 1:
            return names[0]
        conts = [self.tok.encode(prefix + NAME_HEAD + n + '"') for n in names]
        width = max(len(req.prompt_ids) + len(c) for c in conts)
        ids = np.full((len(names), _pow2(width, self.min_prompt_bucket)), self.tok.pad_id, np.int32)
        for i, c in enumerate(conts):   # right padding: causal attention, positions after a row's end unread
            ids[i, :len(req.prompt_ids) + len(c)] = list(req.prompt_ids) + c
        model = nnx.merge(self.sampler.graphdef, self.sampler.state)
        lp = np.asarray(_logprobs(model, jnp.asarray(ids)), np.float32)
        p = len(req.prompt_ids)
        scores = [float(lp[i, p - 1:p - 1 + len(c)].sum()) for i, c in enumerate(conts)]
        return names[int(np.argmax(scores))]

    def _fill(self, req, text: str, schema: dict, key) -> str:
        """`{"key": value, ...}`: the schema's keys (required, else all declared), each value decoded by
        the model in the declared type."""
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        keys = list(schema.get("required") or props)
        parts = []
        for i, k in enumerate(keys):
            lead = ("{" if not i else ", ") + json.dumps(k) + ": "
            key, sub = jax.random.split(key)
            parts.append(lead + self._value(req, text + "".join(parts) + lead, props.get(k) or {}, sub))
        return "".join(parts) + "}" if parts else "{}"

    def _value(self, req, text: str, spec: dict, key) -> str:
        kind = spec.get("type") if isinstance(spec, dict) else None
        if kind == "string":
            return json.dumps(self._string(req, text, key), ensure_ascii=False)
        if kind == "array" and (spec.get("items") or {}).get("type") == "string":
            return json.dumps([self._string(req, text + "[", key)], ensure_ascii=False)
        out = self._decode(req, text, key, min(self.value_tokens, req.max_tokens), stop=(CALL_CLOSE,)).lstrip()
        try:
            value, end = json.JSONDecoder().raw_decode(out)
        except ValueError:
            value, end = None, 0
        if not end or not _typed(value, spec):
            raise GuideError(f"the model wrote no JSON value of type {kind!r} for a tool argument: {out[:80]!r}")
        return out[:end]

    def _string(self, req, text: str, key) -> str:
        out = self._decode(req, text + '"', key, min(self.value_tokens, req.max_tokens), stop=('"',))
        return out[:-1] if out.endswith('"') else out

    def _decode(self, req, text: str, key, budget: int, stop: tuple[str, ...]) -> str:
        ids = list(req.prompt_ids) + self.tok.encode(text)
        self.sampler.prompt_bucket = _pow2(len(ids), self.min_prompt_bucket)
        res = self.sampler.generate([ids], key=key, max_new_tokens=_pow2(max(budget, 1), 16),
                                    temperature=req.temperature, top_p=req.top_p, stop=stop)[0]
        return self.tok.decode(res.tokens[:budget]) if len(res.tokens) > budget else res.text

