"""The template teacher: per packet, a few library programs chosen from its runtime signals.

Candidates, in order: the modules the evidence shows ("evidenced"), those plus the skill-only
modules of the benchmark ("evidenced+tips"), and the whole library ("full"). Each is rendered as a
prefill-protocol response (`<think>` bullets continuation, `</think>`, `<patch>` JSON); the SFT
builder reruns them all and keeps the best one whose delta is >= 0.
"""
from __future__ import annotations

from hr1_jax.train.data import row_benchmark
from hr1_jax.train.teacher.programs import LIBRARY, module_names, render_response
from hr1_jax.train.teacher.signals import detect


class TemplateTeacher:
    name = "template"

    def __init__(self, max_candidates: int = 3):
        self.max_candidates = max_candidates

    def variants(self, row: dict) -> list[tuple[str, list[str]]]:
        bench = row_benchmark(row)
        # compact demo rows carry the packet's signals in metadata (their prompt holds only a summary)
        signals = (row.get("metadata") or {}).get("packet_signals") or detect(bench, row)
        all_names = module_names(bench)
        evidenced = [n for n in all_names if n in signals]
        tips = [m.name for m in LIBRARY[bench] if m.skill and not m.guard and not m.stage]
        out: list[tuple[str, list[str]]] = []
        for label, names in (("evidenced", evidenced),
                             ("evidenced+tips", [n for n in all_names if n in set(evidenced) | set(tips)]),
                             ("full", all_names)):
            if names and all(names != seen for _, seen in out):
                out.append((label, names))
        return out[: self.max_candidates]

    def responses(self, row: dict) -> list[tuple[str, str]]:
        """[(variant label, response text)] for a row."""
        bench = row_benchmark(row)
        return [(label, render_response(bench, names)) for label, names in self.variants(row)]
