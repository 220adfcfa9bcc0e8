"""Row schemas (RL prompt rows, SFT rows), JSONL I/O, benchmark-pure grouping (spec §8), and a grain
source over JSONL.

RL row:  {"prompt": [system, user], "label": "", "metadata": {benchmark, split, seed, task_ids,
          baseline_rewards, baseline_pass, identity, reward_threshold, target_agent_name, prompt fields...}}
SFT row: {"messages": [system, user, assistant], "metadata": {...}} where the assistant text follows
          the response protocol (prefill: the continuation after the template's "<think>\\n").
"""
from __future__ import annotations

import json
import random

import grain

from hr1_jax.errors import InputError, read_input_text
from hr1_jax.utils.jsonsafe import dumps, safe_str, write_jsonl  # noqa: F401  (write_jsonl: the rows API)

RL_REQUIRED_METADATA = ("benchmark", "split", "seed", "task_ids", "baseline_rewards", "identity",
                        "reward_threshold", "target_agent_name")
# §8: per-benchmark shuffle offsets of the grouped mixer.
SHUFFLE_OFFSETS = {"alfworld": 101, "webshop": 211, "dbbench": 401}


def rl_row(system: str, user: str, metadata: dict) -> dict:
    missing = [k for k in RL_REQUIRED_METADATA if k not in metadata]
    if missing:
        raise ValueError(f"RL row metadata lacks {missing}")
    return {"prompt": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "label": "", "metadata": metadata}


def sft_assistant_text(think: str, patch: dict, protocol: str) -> str:
    """The assistant target of an SFT row under the response protocol (spec §1.7)."""
    body = f"<patch>\n{dumps(patch)}\n</patch>"
    think = safe_str(think).strip()  # teacher text may come from an endpoint
    if protocol == "prefill_think_patch":  # the template already opened "<think>\n"
        return f"{think}\n</think>\n\n{body}"
    if protocol == "full_think_patch":
        return f"<think>\n{think}\n</think>\n\n{body}"
    raise ValueError(f"unknown response protocol {protocol!r}")


def sft_row(rl: dict, think: str, patch: dict, protocol: str, extra_metadata: dict | None = None) -> dict:
    return {"messages": list(rl["prompt"]) + [{"role": "assistant",
                                              "content": sft_assistant_text(think, patch, protocol)}],
            "metadata": {**rl.get("metadata", {}), "response_protocol": protocol, **(extra_metadata or {})}}


def read_jsonl(path: str) -> list[dict]:
    """The rows of a JSONL file; a missing file or a broken line (a truncated file) is an InputError."""
    rows = []
    for number, line in enumerate(read_input_text(path, "rows file").split("\n"), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except ValueError as e:
            raise InputError(f"rows file {path} line {number} is not valid JSON (truncated file?): {e}") from None
    return rows


def parse_group_counts(spec: str) -> dict[str, int]:
    """`"webshop=130,dbbench=200"` -> {benchmark: target group count}."""
    out = {}
    for part in [p.strip() for p in str(spec or "").split(",") if p.strip()]:
        bench, eq, n = part.partition("=")
        if not eq or not n.strip().isdigit() or int(n) < 1:
            raise ValueError(f"group counts: expected 'benchmark=N' with N >= 1, got {part!r}")
        out[bench.strip()] = int(n)
    return out


def group_counts_problem(spec: str) -> str:
    """Why `spec` is not a group-count spec ("" when it is one)."""
    try:
        parse_group_counts(spec)
    except ValueError as e:
        return str(e)
    return ""


def _resize_groups(bench: str, groups: list[list[dict]], target: int, rng: random.Random) -> list[list[dict]]:
    """`target` groups of one benchmark (the reference's upsampled mix): extra groups drawn with
    replacement, flagged `mixed_upsampled_duplicate`; excess groups down-sampled (order kept)."""
    if not groups:
        raise ValueError(f"{bench}: no groups to resample to {target}")
    if target <= len(groups):
        keep = sorted(rng.sample(range(len(groups)), target))
        return [groups[i] for i in keep]
    extra = [[dict(r, metadata=dict(r["metadata"], mixed_upsampled_duplicate=True)) for r in rng.choice(groups)]
             for _ in range(target - len(groups))]
    return groups + extra


def group_rows(rows_by_benchmark: dict[str, list[dict]], group_size: int, seed: int,
               tail: str = "pad", group_counts: dict[str, int] | None = None) -> list[dict]:
    """Shuffle each benchmark's rows (seed + offset), cut them into groups of `group_size`, shuffle
    the groups, and write them contiguously, so a rollout group never mixes benchmarks.
    `group_counts` ({benchmark: N}) resizes a benchmark to exactly N groups (`_resize_groups`)."""
    if tail not in ("pad", "drop", "error"):
        raise ValueError("tail must be pad, drop or error")
    unknown = sorted(set(group_counts or {}) - set(rows_by_benchmark))
    if unknown:
        raise ValueError(f"group counts name benchmarks without rows: {unknown}")
    groups = []
    for bench, rows in sorted(rows_by_benchmark.items()):
        if any(r["metadata"]["benchmark"] != bench for r in rows):
            raise ValueError(f"rows filed under {bench} carry another benchmark")
        rng = random.Random(seed + SHUFFLE_OFFSETS.get(bench, 0))
        rows = list(rows)
        rng.shuffle(rows)
        cut = []
        for start in range(0, len(rows), group_size):
            group = [dict(r, metadata=dict(r["metadata"])) for r in rows[start:start + group_size]]
            if len(group) < group_size:
                if tail == "drop":
                    continue
                if tail == "error":
                    raise ValueError(f"{bench}: {len(rows)} rows do not fill groups of {group_size}")
                while len(group) < group_size:
                    pad = dict(rng.choice(rows))
                    pad["metadata"] = dict(pad["metadata"], mixed_padded_duplicate=True)
                    group.append(pad)
            cut.append(group)
        if group_counts and bench in group_counts:
            cut = _resize_groups(bench, cut, group_counts[bench], rng)
        groups += [(bench, g) for g in cut]
    random.Random(seed).shuffle(groups)
    out = []
    for gi, (bench, group) in enumerate(groups):
        for pos, row in enumerate(group):
            row["metadata"].update(mixed_index=len(out), mixed_group_index=gi, mixed_group_pos=pos,
                                   mixed_group_size=group_size, mixed_group_benchmark=bench)
            out.append(row)
    for gi in range(len(groups)):
        benches = {r["metadata"]["benchmark"] for r in out[gi * group_size:(gi + 1) * group_size]}
        if len(benches) != 1:
            raise AssertionError(f"group {gi} mixes benchmarks {benches}")
    return out


class JsonlSource(grain.sources.RandomAccessDataSource):
    """Random access over a JSONL file (line offsets indexed once); elements are dicts."""

    def __init__(self, path: str):
        self.path = path
        self._offsets = []
        with open(path, "rb") as f:
            pos = 0
            for line in f:
                if line.strip():
                    self._offsets.append(pos)
                pos += len(line)

    def __len__(self) -> int:
        return len(self._offsets)

    def __getitem__(self, index: int) -> dict:
        with open(self.path, "rb") as f:
            f.seek(self._offsets[index])
            return json.loads(f.readline())

    def __repr__(self) -> str:
        return f"JsonlSource({self.path!r}, n={len(self)})"


def rows_dataset(path: str) -> "grain.MapDataset":
    """A grain MapDataset of the rows of a JSONL file."""
    return grain.MapDataset.source(JsonlSource(path))
