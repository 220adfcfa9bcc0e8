"""Runtime signals read from a failure packet: which of the library's failure modes the evidence shows.

The detectors are the benchmark's (its descriptor's `teacher_signals`, e.g.
envs/dbbench/teacher_signals.py): they look only at what the engineer sees (the packet text inside
the prompt: tool calls, observations / tool results, the task sentence), never at hidden task data.
One detector per library module (`programs.LIBRARY`); a module is "evidenced" when its detector
fires on at least one failure trace.
"""
from __future__ import annotations

import re

from envs.registry import benchmark as descriptor, import_object
from hr1_jax.rollout.prompts import EVIDENCE_MARKER


def evidence_text(row_or_prompt) -> str:
    """The packet part of a row's user prompt (after the evidence marker), or the text itself."""
    if isinstance(row_or_prompt, dict):
        text = row_or_prompt["prompt"][-1]["content"]
    else:
        text = str(row_or_prompt)
    return text.split(EVIDENCE_MARKER, 1)[-1]


def _split(text: str, pattern: re.Pattern) -> list[str]:
    starts = [m.start() for m in pattern.finditer(text)]
    return [text[a:b] for a, b in zip(starts, starts[1:] + [len(text)])]


def detect(benchmark: str, row_or_prompt) -> dict[str, int]:
    """{module name: number of failure traces showing it} for the packet of a row."""
    path = descriptor(benchmark).teacher_signals
    if not path:
        return {}
    signals = import_object(path)
    counts: dict[str, int] = {}
    for trace in _split(evidence_text(row_or_prompt), signals.trace_start):
        for name in sorted(signals.detect(trace)):  # a set: sorted, so rows do not follow PYTHONHASHSEED
            counts[name] = counts.get(name, 0) + 1
    return counts
