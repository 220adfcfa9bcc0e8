"""Engineer response parsing for both response protocols (reference spec §1.7).

* `full_think_patch`: a complete `<think>...</think>` and at least one complete
  `<patch>...</patch>` are required; the LAST patch block is used and must be non-empty.
* `prefill_think_patch`: the chat template already opened `<think>`, so the response is the
  continuation: drop everything up to the last `<|im_start|>assistant`, refuse a response that
  opens another `<think>`, prepend `<think>\\n` and parse as full-think.
* JSON extraction tries, in order, the patch blocks, the assistant segment, fenced ```json
  blocks and the full text; in each it decodes a JSON value at every `{` and prefers the last
  dict with a list `actions` and a string `benchmark`, else the last dict.
"""
from __future__ import annotations

import json
import re

from hr1_jax.patch.errors import PatchError
from hr1_jax.patch.schema import normalize_patch

PROTOCOLS = ("prefill_think_patch", "full_think_patch")
ASSISTANT_TAG = "<|im_start|>assistant"
_FLAGS = re.DOTALL | re.IGNORECASE
_PATCH_OPEN = re.compile(r"<patch>", re.IGNORECASE)
_PATCH_CLOSE = re.compile(r"</patch>", re.IGNORECASE)
_OPEN_PATCH = re.compile(r"<patch>\s*(.*)", _FLAGS)
_THINK_BLOCK = re.compile(r"<think>\s*(.*?)\s*</think>", _FLAGS)
_FENCED = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)
_DECODER = json.JSONDecoder()


def patch_blocks(text: str) -> list[str]:
    """The bodies of the complete `<patch>...</patch>` blocks, stripped: what
    `<patch>\\s*(.*?)\\s*</patch>` (DOTALL, IGNORECASE) captures, each block up to its first
    close tag, without that pattern's lazy scan (~25 ns a character, half a validation's
    parsing of a 10 KB response)."""
    out, pos = [], 0
    while (start := _PATCH_OPEN.search(text, pos)) is not None:
        end = _PATCH_CLOSE.search(text, start.end())
        if end is None:
            break
        out.append(text[start.end():end.start()].strip())  # strip() removes exactly what \s matches
        pos = end.end()
    return out


def _dicts_in(segment: str) -> list[dict]:
    found = []
    for m in re.finditer(r"\{", segment):
        try:
            obj, _ = _DECODER.raw_decode(segment, m.start())
        except (json.JSONDecodeError, RecursionError):  # RecursionError: nested too deep to be a patch
            continue
        if isinstance(obj, dict):
            found.append(obj)
    return found


def _choose(objects: list[dict]) -> dict | None:
    patch_like = [o for o in objects if isinstance(o.get("actions"), list) and isinstance(o.get("benchmark"), str)]
    if patch_like:
        return patch_like[-1]
    return objects[-1] if objects else None


def extract_patch_json(text: str) -> dict:
    """The patch JSON object inside an engineer response (or any text); raises PatchError."""
    if not isinstance(text, str):
        raise PatchError("not_text", "response must be a string")
    text = text.strip()
    segment = text.rsplit(ASSISTANT_TAG, 1)[-1] if ASSISTANT_TAG in text else text
    segments = patch_blocks(segment)
    if not segments:
        m = _OPEN_PATCH.search(segment)
        if m:
            segments.append(m.group(1))
    segments.append(segment)
    segments.extend(m.group(1) for m in _FENCED.finditer(segment))
    if segment != text:
        segments.append(text)
    for seg in segments:
        obj = _choose(_dicts_in(seg))
        if obj is not None:
            return obj
    raise PatchError("no_json", "no JSON object found in model output")


def _extract_full_think(text: str) -> dict:
    text = text.strip()
    if ASSISTANT_TAG in text:
        text = text.rsplit(ASSISTANT_TAG, 1)[-1]
    if _THINK_BLOCK.search(text) is None:
        raise PatchError("missing_think", "missing complete <think>...</think> block")
    blocks = patch_blocks(text)
    if not blocks:
        raise PatchError("missing_patch", "missing complete <patch>...</patch> block")
    body = blocks[-1]
    if not body:
        raise PatchError("empty_patch", "<patch> block is empty")
    return extract_patch_json(f"<patch>\n{body}\n</patch>")


def extract_response_json(text: str, protocol: str) -> dict:
    """Raw (un-normalised) patch dict from an engineer response under `protocol`."""
    if not isinstance(text, str):
        raise PatchError("not_text", "response must be a string")
    if protocol == "full_think_patch":
        return _extract_full_think(text)
    if protocol != "prefill_think_patch":
        raise PatchError("bad_protocol", f"unsupported response protocol: {protocol!r}")
    text = text.strip()
    if ASSISTANT_TAG in text:
        text = text.rsplit(ASSISTANT_TAG, 1)[-1].lstrip()
    if re.match(r"(?is)^<think\b", text):
        raise PatchError("nested_think", "prefilled-think response must not start with another <think> tag")
    return _extract_full_think("<think>\n" + text)


def parse_response(text: str, benchmark: str, protocol: str = "prefill_think_patch", **normalize_kwargs) -> dict:
    """Engineer response -> normalised patch (raises PatchError). Keyword arguments go to
    `normalize_patch` (code-hook-only and runtime-no-op checks are on by default)."""
    return normalize_patch(extract_response_json(text, protocol), benchmark, **normalize_kwargs)


def build_response(patch: dict, protocol: str, think: str = "Recurring failure analysis.") -> str:
    """A well-formed engineer response carrying `patch` (for tests, demos and SFT targets):
    prefill responses omit the opening `<think>` the chat template already emitted."""
    body = f"{think}\n</think>\n\n<patch>\n{json.dumps(patch, ensure_ascii=False, indent=2)}\n</patch>"
    if protocol == "full_think_patch":
        return "<think>\n" + body
    if protocol == "prefill_think_patch":
        return body
    raise PatchError("bad_protocol", f"unsupported response protocol: {protocol!r}")
