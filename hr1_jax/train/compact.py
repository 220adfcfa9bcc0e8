"""Compact prompts and a code-chunk tokenizer for the tiny CPU engineer of the embedded demo.

A 1M-parameter model trained for minutes on 2 CPU cores cannot read an 8k-token packet nor write
a 4k-character program token by token. The demo therefore (1) replaces the packet in the prompt by
its runtime-signal summary (the failure modes the packet shows, read from the packet by
`teacher.signals.detect`, plus the baseline pass count), keeping the reference prompt's structure
(system instruction, scope line, evidence marker) - SFT, RL and eval all use this same compact
prompt; and (2) trains the SentencePiece tokenizer with the recurring code lines of the program
library as single pieces, so a program is a few hundred tokens. Both are demo-only concessions,
reported as such; the full-size path uses the reference prompts and the model's own tokenizer.
"""
from __future__ import annotations

import collections
import json
import re

from hr1_jax.models.tokenizer import SPECIAL_TOKENS
from hr1_jax.rollout.prompts import EVIDENCE_MARKER

SYSTEM = ("You are a Harness-R1 harness engineer. Given runtime failure signals of a frozen agent, analyse the "
          "recurring failures and output one general code-hook patch: close your reasoning with </think>, then "
          "one JSON object inside a <patch> block.")


def compact_user(benchmark: str, signals: dict[str, int], baseline_pass: int, batch_size: int) -> str:
    lines = [f"Edit only the reusable {benchmark} harness, not task answers.",
             f"Benchmark: {benchmark}", f"Baseline: {baseline_pass}/{batch_size} tasks passed.", "",
             EVIDENCE_MARKER, "Failure signals:"]
    lines += [f"- {name}: {n} trace{'s' if n != 1 else ''}" for name, n in sorted(signals.items())] or ["- none"]
    # the benchmark again right before the answer: a tiny model attends most to the last lines
    lines += ["", f"Write one {benchmark} patch."]
    return "\n".join(lines)


# Lines of code (real or JSON-escaped newlines) and JSON scaffolding between fields.
_CHUNK_SPLIT = re.compile(r"\\n|\n|(?<=\", )|(?<=\": \")|(?<=\[\{)|(?<=\}, \{)|(?<=\. )|(?<=; )|(?<=: )")


def program_symbols() -> list[str]:
    """The template library's building blocks as they appear inside a response (JSON-escaped code
    blocks, skill sentences, `<think>` phrases), as SentencePiece user symbols."""
    from hr1_jax.train.teacher.programs import LIBRARY, THINK_FIXED, code_blocks

    out: list[str] = []
    for bench, mods in LIBRARY.items():
        out += [json.dumps(b, ensure_ascii=False)[1:-1] for b in code_blocks(bench)]
        out += [m.think for m in mods] + [m.name.replace("_", " ") for m in mods]
        out.append(THINK_FIXED[0].format(benchmark=bench))
    out += list(THINK_FIXED[1:])
    seen: set[str] = set()
    return [x.replace(" ", "\u2581") for x in out if len(x) > 3 and not (x in seen or seen.add(x))]


def code_chunks(texts: list[str], *, min_count: int = 2, min_len: int = 6, limit: int = 800) -> list[str]:
    """Recurring lines of the rendered responses (split at real and JSON-escaped newlines and JSON
    field boundaries), most frequent first, as SentencePiece user symbols: the tokenizer keeps each
    as one piece. Spaces are written as U+2581, the form SentencePiece matches symbols in."""
    counts = collections.Counter(c for t in texts for c in _CHUNK_SPLIT.split(t) if len(c) >= min_len)
    chunks = [c for c, n in counts.most_common() if n >= min_count and c.strip() not in SPECIAL_TOKENS]
    return ["\\n"] + [c.replace(" ", "\u2581") for c in chunks[:limit]]
