"""Row schemas (RL prompt rows, SFT rows), JSONL I/O, benchmark-pure grouping (spec §8), and a grain
source over JSONL.

RL row:  {"prompt": [system, user], "label": "", "metadata": {benchmark, split, seed, task_ids,
          baseline_rewards, baseline_pass, identity, reward_threshold, target_agent_name, prompt fields...}}
SFT row: {"messages": [system, user, assistant], "metadata": {...}} where the assistant text follows
          the response protocol (prefill: the continuation after the template's "<think>\\n").
"""
from __future__ import annotations

import dataclasses
import json
import random
from typing import Callable, Sequence

import grain

from envs import registry
from hr1_jax.errors import InputError, read_input_text
from hr1_jax.utils.jsonsafe import dumps, safe_str, write_jsonl  # noqa: F401  (write_jsonl: the rows API)

RL_REQUIRED_METADATA = ("benchmark", "split", "seed", "task_ids", "baseline_rewards", "identity",
                        "reward_threshold", "target_agent_name")


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


@dataclasses.dataclass(frozen=True)
class Group:
    """One benchmark-pure group of item indices; `members[n_real:]` are padding duplicates of the
    same benchmark, and an `upsampled` group is a resampled copy of another (`group_counts`)."""
    benchmark: str
    members: tuple[int, ...]
    n_real: int
    upsampled: bool = False


def _cut(bench: str, idx: list[int], group_size: int, rng: random.Random, tail: str) -> list[Group]:
    """`idx` shuffled and cut into groups of `group_size`; a short tail padded with random
    duplicates ("pad"), dropped ("drop") or refused ("error")."""
    rng.shuffle(idx)
    cut = []
    for start in range(0, len(idx), group_size):
        members = idx[start:start + group_size]
        n_real = len(members)
        if n_real < group_size:
            if tail == "drop":
                continue
            if tail == "error":
                raise ValueError(f"{bench}: {len(idx)} rows do not fill groups of {group_size}")
            members += [rng.choice(idx) for _ in range(group_size - n_real)]
        cut.append(Group(bench, tuple(members), n_real))
    return cut


def _resize(bench: str, groups: list[Group], target: int, rng: random.Random) -> list[Group]:
    """`target` groups of one benchmark (the reference's upsampled mix): extra groups drawn with
    replacement (`upsampled`); excess groups down-sampled (order kept)."""
    if not groups:
        raise ValueError(f"{bench}: no groups to resample to {target}")
    if target <= len(groups):
        return [groups[i] for i in sorted(rng.sample(range(len(groups)), target))]
    return groups + [dataclasses.replace(rng.choice(groups), upsampled=True) for _ in range(target - len(groups))]


def benchmark_groups(benchmarks: Sequence[str], group_size: int, rng_of: Callable[[str, int], random.Random],
                     tail: str = "pad", group_counts: dict[str, int] | None = None) -> list[Group]:
    """The one grouping of rows (spec §8): `benchmarks[i]` is item i's benchmark; per benchmark, in
    sorted order (`rng_of(benchmark, its position)` its generator), its items are shuffled and cut
    into groups of `group_size` (`_cut`), so a group never mixes benchmarks; `group_counts`
    ({benchmark: N}) resizes a benchmark to exactly N groups (`_resize`)."""
    if tail not in ("pad", "drop", "error"):
        raise ValueError("tail must be pad, drop or error")
    by_bench: dict[str, list[int]] = {}
    for i, bench in enumerate(benchmarks):
        by_bench.setdefault(bench, []).append(i)
    unknown = sorted(set(group_counts or {}) - set(by_bench))
    if unknown:
        raise ValueError(f"group counts name benchmarks without rows: {unknown}")
    groups = []
    for position, bench in enumerate(sorted(by_bench)):
        rng = rng_of(bench, position)
        cut = _cut(bench, by_bench[bench], group_size, rng, tail)
        if group_counts and bench in group_counts:
            cut = _resize(bench, cut, group_counts[bench], rng)
        groups += cut
    return groups


def _group_row(row: dict, group: Group, pos: int) -> dict:
    meta = dict(row["metadata"])
    if pos >= group.n_real:
        meta["mixed_padded_duplicate"] = True
    if group.upsampled:
        meta["mixed_upsampled_duplicate"] = True
    return dict(row, metadata=meta)


def group_rows(rows_by_benchmark: dict[str, list[dict]], group_size: int, seed: int,
               tail: str = "pad", group_counts: dict[str, int] | None = None) -> list[dict]:
    """The grouped rows file: `benchmark_groups` (each benchmark's stream seeded with seed + its
    descriptor's shuffle offset), the groups shuffled and written contiguously, each row's metadata
    naming its place (mixed_index, mixed_group_*) and whether it is a padding/upsampled duplicate."""
    rows, benches = [], []
    for bench, filed in sorted(rows_by_benchmark.items()):
        if any(r["metadata"]["benchmark"] != bench for r in filed):
            raise ValueError(f"rows filed under {bench} carry another benchmark")
        rows += filed
        benches += [bench] * len(filed)
    groups = benchmark_groups(
        benches, group_size, lambda bench, _: random.Random(seed + registry.benchmark(bench).row_shuffle_offset()),
        tail, group_counts)
    random.Random(seed).shuffle(groups)
    out = []
    for gi, group in enumerate(groups):
        for pos, i in enumerate(group.members):
            row = _group_row(rows[i], group, pos)
            row["metadata"].update(mixed_index=len(out), mixed_group_index=gi, mixed_group_pos=pos,
                                   mixed_group_size=group_size, mixed_group_benchmark=group.benchmark)
            out.append(row)
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
