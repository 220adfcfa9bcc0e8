"""Tool-call format repair: tool calls a server left as text become structured `tool_calls`.

Serving stacks without the right tool parser return the model's tool call as text in `content`
(or inside a `<think>` block / `reasoning_content`). The reference then silently scored the
episode 0 (spec §4.4). Recognised forms, for tool names the request offered:

  Qwen3-coder XML   <tool_call><function=NAME><parameter=KEY>VALUE</parameter>...</function></tool_call>
  Hermes JSON       <tool_call>{"name": NAME, "arguments": {...}}</tool_call>
  bare JSON         {"name": NAME, "arguments": {...}} (also {"function": {...}}, {"tool_calls": [...]},
                    optionally in a ```json fence)

`repair_message` returns the message with structured calls and the number repaired (0 = untouched).
"""
from __future__ import annotations

import json
import re

_XML_CALL = re.compile(r"<tool_call>\s*(<function\s*=.*?</function>)\s*(?:</tool_call>|$)", re.S)
_XML_FUNC = re.compile(r"<function\s*=\s*([^>\s]+)\s*>(.*?)</function>", re.S)
_XML_PARAM = re.compile(r"<parameter\s*=\s*([^>\s]+)\s*>(.*?)</parameter>", re.S)
_JSON_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.S)
_THINK = re.compile(r"<think>(.*?)(?:</think>|$)", re.S)


MAX_CALL_NESTING = 8


def _value(text: str):
    text = text.strip("\n")
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # nested too deep to be a tool call
        return text


def _calls_from_obj(obj, depth: int = 0) -> list[tuple[str, dict]]:
    if depth > MAX_CALL_NESTING:  # real tool calls sit a few levels deep; deeper is not one
        return []
    if isinstance(obj, list):
        return [c for item in obj for c in _calls_from_obj(item, depth + 1)]
    if not isinstance(obj, dict):
        return []
    if isinstance(obj.get("tool_calls"), list):
        return _calls_from_obj(obj["tool_calls"], depth + 1)
    if isinstance(obj.get("function"), dict):
        return _calls_from_obj(obj["function"], depth + 1)
    name = obj.get("name")
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except (ValueError, RecursionError):  # nested too deep to be a tool call
            return []
    if isinstance(name, str) and isinstance(args, dict):
        return [(name, args)]
    return []


def _json_objects(text: str) -> list:
    """Every top-level JSON value decodable at a `{` or `[` (outermost first, non-overlapping)."""
    decoder, out, i = json.JSONDecoder(), [], 0
    while i < len(text):
        if text[i] in "{[":
            try:
                obj, end = decoder.raw_decode(text, i)
                out.append(obj)
                i = end
                continue
            except (ValueError, RecursionError):  # nested too deep to be a tool call
                pass
        i += 1
    return out


def extract_tool_calls(text: str) -> list[tuple[str, dict]]:
    """Tool calls written as text, in order of appearance; [] if none."""
    if not text:
        return []
    calls = []
    for block in _XML_CALL.findall(text):
        for name, body in _XML_FUNC.findall(block):
            calls.append((name.strip(), {k.strip(): _value(v) for k, v in _XML_PARAM.findall(body)}))
    if calls:
        return calls
    for block in _JSON_CALL.findall(text):
        calls.extend(_calls_from_obj(_json_objects(block)))
    if calls:
        return calls
    if "<function=" in text:  # XML function without the <tool_call> wrapper
        for name, body in _XML_FUNC.findall(text):
            calls.append((name.strip(), {k.strip(): _value(v) for k, v in _XML_PARAM.findall(body)}))
        if calls:
            return calls
    for obj in _json_objects(text):
        calls.extend(_calls_from_obj(obj))
    return calls


def _strip_calls(text: str) -> str:
    text = re.sub(r"<tool_call>.*?(?:</tool_call>|$)", "", text, flags=re.S)
    return text.strip()


def repair_message(message: dict, allowed_names: set[str] | None = None, call_prefix: str = "repaired") -> tuple[dict, int]:
    """Structured tool calls from text when the message has none. Only names in `allowed_names`
    (when given) are accepted, as the reference did."""
    if message.get("tool_calls"):
        return message, 0
    content = message.get("content") or ""
    sources = [content, message.get("reasoning_content") or ""] + _THINK.findall(content)
    found: list[tuple[str, dict]] = []
    for text in sources:
        found = [c for c in extract_tool_calls(text) if allowed_names is None or c[0] in allowed_names]
        if found:
            break
    if not found:
        return message, 0
    fixed = dict(message)
    fixed["content"] = _strip_calls(content)
    fixed["tool_calls"] = [{"id": f"{call_prefix}_{i}", "type": "function",
                            "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}}
                           for i, (name, args) in enumerate(found)]
    return fixed, len(found)
