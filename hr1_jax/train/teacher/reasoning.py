"""A frontier teacher's raw text -> the SFT target, as the reference built its cold-start rows (spec §7):

reasoning = the raw text before `</think>` (else before `<patch>`, else the patch's description),
cleaned of think/patch tags, fenced code, `{...}` spans and backticks, whitespace collapsed, at most
160 words and ending with "."; the patch JSON is re-serialised. So the engineer learns short prose
reasoning and one canonical patch block, not whatever layout the teacher happened to write.
"""
from __future__ import annotations

import re

from hr1_jax.data.rows import sft_assistant_text
from hr1_jax.patch.parse import PatchError, extract_patch_json

MAX_WORDS = 160
_THINK_END = re.compile(r"</think\s*>", re.I)
_PATCH_OPEN = re.compile(r"<patch\b", re.I)
_TAG = re.compile(r"</?\s*(?:think|patch)\b[^>]*>", re.I)
_FENCED = re.compile(r"```.*?(?:```|$)", re.S)   # an unclosed fence runs to the end
_BRACES = re.compile(r"\{[^{}]*\}")


def clean_text(text: str) -> str:
    """Tags, fenced code, `{...}` spans (innermost first) and backticks removed; whitespace collapsed."""
    text = _FENCED.sub(" ", _TAG.sub(" ", text))
    while True:
        stripped = _BRACES.sub(" ", text)
        if stripped == text:
            break
        text = stripped
    return " ".join(text.replace("`", "").replace("{", " ").replace("}", " ").split())


def _capped(text: str) -> str:
    words = text.split()
    text = " ".join(words[:MAX_WORDS]).rstrip(",;:-")
    return text if not text or text.endswith((".", "!", "?")) else text + "."


def clean_reasoning(raw: str, patch: dict) -> str:
    end = _THINK_END.search(raw) or _PATCH_OPEN.search(raw)
    text = clean_text(raw[:end.start()]) if end else ""
    if not text:
        description = patch.get("description")
        text = clean_text(description) if isinstance(description, str) else ""
    return _capped(text)


def sft_target(raw: str, protocol: str) -> str:
    """The SFT assistant text for a teacher reply under `protocol`; the raw text when it holds no
    patch JSON (the rerun then counts it invalid and no row is kept)."""
    try:
        patch = extract_patch_json(raw)
    except PatchError:
        return raw
    return sft_assistant_text(clean_reasoning(raw, patch), patch, protocol)
