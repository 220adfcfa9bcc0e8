"""Prompt styles an engineer checkpoint was trained with, so `hr1 eval` asks it in its own style.

`hr1-prompt-v1` is the reference prompt (`rollout.prompts.build_prompt`, what `hr1 build-rows`
writes); `hr1-demo-compact-v1` is the embedded demo's compact signal summary
(`train.compact`). A checkpoint records its style in `prompt_style.json` beside its params
(`train.engine`); `eval.prompt_style` overrides it."""
from __future__ import annotations

import copy
import glob
import json
import os

from hr1_jax.errors import InputError
from hr1_jax.train.engine import DEFAULT_PROMPT_STYLE, PARAMS_DIR, carried_prompt_style
from hr1_jax.utils.logging import log_event

COMPACT = "hr1-demo-compact-v1"
PROMPT_STYLES = (DEFAULT_PROMPT_STYLE, COMPACT)


def _compact(row: dict) -> dict:
    from hr1_jax.train.compact import SYSTEM, compact_user
    from hr1_jax.train.data import row_benchmark
    from hr1_jax.train.teacher.signals import detect

    meta = row["metadata"]
    bench = row_benchmark(row)
    user = compact_user(bench, detect(bench, row), int(meta["baseline_pass"]), len(meta["task_ids"]))
    out = copy.deepcopy(row)
    out["prompt"] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
    out["metadata"]["prompt_version"] = COMPACT
    return out


def restyle(row: dict, style: str) -> dict:
    """`row` (a reference-style RL row) with its prompt rendered in `style`."""
    if style == DEFAULT_PROMPT_STYLE or row["metadata"].get("prompt_version") == style:
        return row
    if style == COMPACT:
        return _compact(row)
    raise InputError(f"prompt style {style!r} is unknown; known: {', '.join(PROMPT_STYLES)}")


def _run_rows_style(checkpoint: str) -> str:
    """The prompt_version of the rows beside a checkpoint written before checkpoints carried their
    style: `rows/*.jsonl` in its stage folder or up to two folders above (`RUN/rows` of the demo,
    from `RUN/grpo/seed<N>/{final,best}_params`); "" if there are none or they differ."""
    from hr1_jax.eval.engineers import PARAMS_FOLDERS
    folder = os.path.normpath(os.path.abspath(checkpoint))
    if os.path.basename(folder) in PARAMS_FOLDERS:
        folder = os.path.dirname(folder)
    for _ in range(3):
        found = set()
        for path in glob.glob(os.path.join(folder, "rows", "*.jsonl")):
            with open(path, encoding="utf-8") as f:
                line = f.readline()
            if line.strip():
                found.add(str((json.loads(line).get("metadata") or {}).get("prompt_version") or DEFAULT_PROMPT_STYLE))
        if found:
            return found.pop() if len(found) == 1 else ""
        folder = os.path.dirname(folder)
    return ""


def checkpoint_prompt_style(checkpoint: str, override: str = "") -> str:
    """`override`, else the style the checkpoint carries, else its run's rows' style, else the
    reference style."""
    if override:
        if override not in PROMPT_STYLES:
            raise InputError(f"eval.prompt_style {override!r} is unknown; known: {', '.join(PROMPT_STYLES)}")
        return override
    folder = os.path.join(checkpoint, PARAMS_DIR) if os.path.isdir(os.path.join(checkpoint, PARAMS_DIR)) else checkpoint
    style = carried_prompt_style(folder)
    source = "checkpoint"
    if not style:
        style, source = _run_rows_style(folder), "run rows"
    if not style:
        style, source = DEFAULT_PROMPT_STYLE, "default"
    log_event("eval", "prompt_style", checkpoint=checkpoint, style=style, source=source)
    return style
