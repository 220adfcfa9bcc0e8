"""The one builder of the engineer's rows: stored baseline episodes -> failure packet -> prompt -> RL
row, used by `hr1 build-rows`, the evaluation (`hr1_jax/eval`) and `hr1 demo`.

A baseline batch is a folder (`batch_NNN`, from `hr1 baseline`) holding status.json and
results.jsonl; its episodes come back as `EpisodeResult` records. The packet's shape is the
benchmark's (`envs.plugin.Packets`), its sizes `config.rollout.packet`; the row's prompt is the
engineer's reference prompt unless a caller brings its own (`make_row`, e.g. the demo's compact one).
"""
from __future__ import annotations

import dataclasses
import glob
import json
import os
from typing import Callable, Iterator

from hr1_jax.data.rows import rl_row
from hr1_jax.rollout.batches import read_episodes
from hr1_jax.rollout.packets import failure_packet
from hr1_jax.patch import schema_style
from hr1_jax.rollout.prompts import build_prompt
from hr1_jax.runtime.episode import EpisodeResult

PROMPT_VERSION = "hr1-prompt-v1"


@dataclasses.dataclass
class BatchPacket:
    """One stored baseline batch and its failure packet (None when the batch is not ok)."""
    name: str                 # its folder's name, e.g. "batch_000"
    status: dict              # its status.json
    packet: str | None
    n_failures: int           # failures the packet includes

    @property
    def metadata(self) -> dict:
        return self.status["metadata"]


def packet_for(config, benchmark: str, name: str, episodes: list[EpisodeResult], *, threshold: float,
               batch_id: int = 0, task_ids: list[int] | None = None,
               max_failures: int | None = None) -> tuple[str, int]:
    """The failure packet of one batch under the run's packet settings (`rollout.packet`)."""
    p = config.rollout.packet
    limits = p[benchmark].to_dict() if benchmark in p else None
    return failure_packet(benchmark, name, episodes, batch_id=batch_id, task_ids=task_ids, threshold=threshold,
                          strategy=p.strategy, max_traces=p.max_traces, max_failures=max_failures, limits=limits)


def batch_packets(config, root: str, benchmark: str, pattern: str = "batch_*") -> Iterator[BatchPacket]:
    """Every stored baseline batch of `benchmark` under `root` (folders matching `pattern`), in order."""
    for folder in sorted(glob.glob(os.path.join(root, benchmark, pattern))):
        with open(os.path.join(folder, "status.json"), encoding="utf-8") as f:
            status = json.load(f)
        name = os.path.basename(folder)
        if status.get("status") != "ok":
            yield BatchPacket(name, status, None, 0)
            continue
        meta = status["metadata"]
        packet, n_fail = packet_for(config, benchmark, name, read_episodes(folder), threshold=meta["reward_threshold"],
                                    batch_id=status["batch_id"], task_ids=meta["task_ids"])
        yield BatchPacket(name, status, packet, n_fail)


def engineer_row(config, benchmark: str, packet: str, meta: dict, **extra) -> dict:
    """The RL row of a packet under the engineer's reference prompt: `meta`, then the prompt's
    protocol and schema style, then `extra`."""
    protocol = config.patch_protocol.response_protocol
    style = config.rollout.schema_style or schema_style(benchmark)
    system, user = build_prompt(benchmark, packet, protocol=protocol, schema_style=style)
    return rl_row(system["content"], user["content"],
                  dict(meta, response_protocol=protocol, schema_style=style, **extra))


def reference_row(config, benchmark: str, batch: BatchPacket) -> dict:
    """`hr1 build-rows`' row of a stored batch."""
    meta = dict(batch.metadata, batch_tag=f"{benchmark}_{batch.name}", batch_id=batch.status["batch_id"])
    return engineer_row(config, benchmark, batch.packet, meta, target_model=config.target.model or config.target.name,
                        prompt_version=PROMPT_VERSION, included_failures=batch.n_failures)


def build_rows(config, root: str, benchmark: str, *, pattern: str = "batch_*",
               make_row: Callable[[object, str, BatchPacket], dict] = reference_row) -> tuple[list[dict], dict]:
    """Rows for every complete baseline batch of `benchmark` under `root` with at least
    `rollout.min_failures` failures, and how many batches were skipped (not ok, too few failures)."""
    rows, skipped = [], {"not_ok": 0, "too_few_failures": 0}
    for batch in batch_packets(config, root, benchmark, pattern):
        if batch.packet is None:
            skipped["not_ok"] += 1
        elif batch.n_failures < config.rollout.min_failures:
            skipped["too_few_failures"] += 1
        else:
            rows.append(make_row(config, benchmark, batch))
    return rows, skipped
