"""Agent-SFT rows for the TARGET: its own successful, no-intervention baseline trajectories (spec §7).

Rules of the reference's `build_agent_sft_from_harness_split.py`: episodes of stored baseline batches
(`hr1 baseline` / `hr1 demo` layout: `<root>/.../results.jsonl`) that succeeded with no harness
intervention (no patch, no hook call) and finished (no infra error); one row per (benchmark, split,
task id) - the project's task ids are already canonical - keeping the highest reward, then success,
then the shortest trajectory. Thinking is off (no reasoning in the messages); each row carries its
benchmark's tool schema, so the conversation is rendered with the tools the target saw.
"""
from __future__ import annotations

import glob
import json
import os

from hr1_jax.rollout.pool import INFRA_ERROR

MESSAGE_KEYS = ("role", "content", "name", "tool_call_id", "tool_calls")


def _intervened(ep: dict) -> bool:
    counts = ep.get("counts") or {}
    return bool(ep.get("hook_events")) or any(counts.get(k, 0) for k in
                                              ("hook_calls", "blocked_actions", "rewritten_actions",
                                               "forced_actions", "hint_messages"))


def eligible(ep: dict, threshold: float) -> str | None:
    """Why an episode is not an agent-SFT trajectory (None when it is)."""
    if ep.get("status") == INFRA_ERROR or ep.get("reward") is None:
        return "infra_error"
    if not ep.get("success") or float(ep["reward"]) < threshold:
        return "not_successful"
    if _intervened(ep):
        return "harnessed"
    if not any(m.get("role") == "assistant" for m in ep.get("trajectory") or []):
        return "no_trajectory"
    return None


def _clean(messages: list[dict]) -> list[dict]:
    """OpenAI-format messages without reasoning (thinking off) or runtime extras."""
    return [{k: m[k] for k in MESSAGE_KEYS if m.get(k) is not None} for m in messages]


def _rank(ep: dict) -> tuple:
    """Higher is better: reward, then success, then fewer messages, then fewer characters."""
    traj = ep["trajectory"]
    return (float(ep["reward"]), bool(ep["success"]), -len(traj), -len(json.dumps(traj)))


def episode_files(root: str) -> list[str]:
    return sorted(glob.glob(os.path.join(root, "**", "results.jsonl"), recursive=True))


def build_agent_rows(root: str, tool_specs, *, threshold: float = 1.0, benchmarks=None,
                     splits=None) -> tuple[list[dict], dict]:
    """(rows, stats) from every baseline episode under `root`. `tool_specs(benchmark)` gives the
    benchmark's tool schema; `benchmarks` / `splits` (None = all) select the SFT split's batches."""
    best: dict[tuple, tuple[dict, str]] = {}
    stats = {"episodes": 0, "skipped": {}, "files": 0}
    for path in episode_files(root):
        stats["files"] += 1
        with open(path, encoding="utf-8") as f:
            episodes = [json.loads(line) for line in f if line.strip()]
        for ep in episodes:
            if (benchmarks and ep["benchmark"] not in benchmarks) or (splits and ep["split"] not in splits):
                continue
            stats["episodes"] += 1
            why = eligible(ep, threshold)
            if why:
                stats["skipped"][why] = stats["skipped"].get(why, 0) + 1
                continue
            key = (ep["benchmark"], ep["split"], int(ep["task_id"]))
            if key not in best or _rank(ep) > _rank(best[key][0]):
                best[key] = (ep, os.path.relpath(os.path.dirname(path), root))
    rows = []
    tools_of: dict[str, list[dict]] = {}
    for (bench, split, task_id), (ep, source) in sorted(best.items()):
        if bench not in tools_of:
            tools_of[bench] = tool_specs(bench)
        rows.append({"messages": _clean(ep["trajectory"]), "tools": tools_of[bench],
                     "metadata": {"benchmark": bench, "split": split, "task_id": task_id, "seed": ep.get("seed"),
                                  "reward": float(ep["reward"]), "success": bool(ep["success"]),
                                  "turns": (ep.get("counts") or {}).get("turns"), "source": source,
                                  "target_agent_name": (ep.get("agent") or {}).get("name"),
                                  "enable_thinking": False}})
    stats["duplicates"] = stats["episodes"] - sum(stats["skipped"].values()) - len(rows)
    stats["rows"] = len(rows)
    stats["per_benchmark"] = {b: sum(r["metadata"]["benchmark"] == b for r in rows) for b in sorted(tools_of)}
    return rows, stats
