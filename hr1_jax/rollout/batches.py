"""Running a batch of tasks through the pool and recording it: results.jsonl + summary/status, and the
immutable baseline metadata (rewards + task identities) that RL rows and the reward rely on."""
from __future__ import annotations

import collections
import json
import os

from envs import registry
from hr1_jax.rollout.identity import batch_identity
from hr1_jax.rollout.pool import INFRA_ERROR, JobHandle, JobSpec, WorkerPool, worker_shares
from hr1_jax.runtime.episode import EpisodeResult
from hr1_jax.utils.jsonsafe import write_json, write_jsonl


def run_batch(pool: WorkerPool, benchmark: str, split: str, task_ids: list[int], *, target: dict,
              seed: int, patch: dict | None = None, on_result=None, fields=None) -> list[dict]:
    """One job per worker share of the tasks; results (only `fields` of each: JobSpec) sorted by task id."""
    return gather_batch(submit_batch(pool, benchmark, split, task_ids, target=target, seed=seed, patch=patch,
                                     fields=fields), on_result)


def submit_batch(pool: WorkerPool, benchmark: str, split: str, task_ids: list[int], *, target: dict,
                 seed: int, patch: dict | None = None, fields=None) -> list[JobHandle]:
    """`run_batch`'s jobs, submitted and not waited for (a caller can start several batches at once)."""
    return [pool.submit(JobSpec(benchmark, split, share, patch, target, seed, fields))
            for share in worker_shares(task_ids, pool.num_workers)]


def gather_batch(handles: list[JobHandle], on_result=None) -> list[dict]:
    """The results of `submit_batch`'s jobs, sorted by task id (streamed to `on_result` as they finish)."""
    out = []
    for h in handles:   # streamed only for on_result: collect() wakes this thread once per job
        for ep in (h.results() if on_result is not None else h.collect()):
            out.append(ep)
            if on_result is not None:
                on_result(ep)
    return sorted(out, key=lambda ep: ep["task_id"])


def summarize(benchmark: str, episodes: list[dict], threshold: float = 1.0) -> dict:
    scored = [ep for ep in episodes if ep["status"] != INFRA_ERROR]
    rewards = [float(ep["reward"]) for ep in scored]
    counts = [ep.get("counts") or {} for ep in episodes]
    summary = {
        "benchmark": benchmark, "n_tasks": len(episodes), "n_scored": len(scored),
        "infra_errors": len(episodes) - len(scored),
        "mean_reward": sum(rewards) / len(rewards) if rewards else None,
        "success_rate": sum(bool(ep["success"]) for ep in scored) / len(scored) if scored else None,
        "pass_count": sum(r >= threshold for r in rewards),
        "statuses": dict(collections.Counter(ep["status"] for ep in episodes)),
        "hook_calls": sum(c.get("hook_calls", 0) for c in counts),
        "hook_errors": sum(c.get("hook_errors", 0) for c in counts),
        "hook_timeouts": sum(c.get("hook_timeouts", 0) for c in counts),
        "repaired_tool_calls": sum((ep.get("agent") or {}).get("repaired_tool_calls", 0) for ep in episodes),
        "mean_turns": (sum(c.get("turns", 0) for c in counts) / len(counts)) if counts else 0.0,
        "mean_episode_s": (sum(ep.get("wall_s", 0.0) for ep in episodes) / len(episodes)) if episodes else 0.0,
    }
    summary["hook_error_rate"] = (summary["hook_errors"] + summary["hook_timeouts"]) / max(1, summary["hook_calls"])
    note = registry.benchmark(benchmark).summary_note if benchmark in registry.names() else ""
    if note:
        summary["note"] = note
    return summary


def baseline_metadata(benchmark: str, split: str, seed: int, episodes: list[dict], *, target_name: str,
                      threshold: float = 1.0) -> dict:
    """The immutable pairing metadata of a complete baseline batch (raises on infra failures)."""
    bad = [ep["task_id"] for ep in episodes if ep["status"] == INFRA_ERROR]
    if bad:
        raise RuntimeError(f"baseline batch has infra failures on tasks {bad}: not usable for pairing")
    rewards = {str(ep["task_id"]): float(ep["reward"]) for ep in episodes}
    n = len(rewards)
    passed = sum(r >= threshold for r in rewards.values())
    return {"benchmark": benchmark, "split": split, "seed": int(seed),
            "task_ids": [int(ep["task_id"]) for ep in episodes], "batch_size": n,
            "baseline_rewards": rewards, "baseline_pass": passed, "baseline_pass_rate": passed / max(1, n),
            "baseline_average_reward": sum(rewards.values()) / max(1, n), "reward_threshold": float(threshold),
            "target_agent_name": target_name,
            "identity": batch_identity(benchmark, split, seed, [ep["identity"] for ep in episodes])}


def store_baseline_batch(pool: WorkerPool, folder: str, benchmark: str, split: str, task_ids: list[int],
                         batch_id: int, *, target: dict, seed: int, threshold: float,
                         on_result=None) -> tuple[dict, dict]:
    """One no-patch batch run and stored in `folder` (results.jsonl, summary.json, status.json);
    returns (status, summary). A batch with infrastructure failures is stored with status "failed"
    (unusable for pairing)."""
    episodes = run_batch(pool, benchmark, split, task_ids, target=target, seed=seed, on_result=on_result)
    summary = summarize(benchmark, episodes, threshold)
    status = {"status": "ok", "batch_id": batch_id, "task_ids": task_ids, "target": target["name"]}
    try:
        status["metadata"] = baseline_metadata(benchmark, split, seed, episodes, target_name=target["name"],
                                               threshold=threshold)
    except RuntimeError as e:
        status.update(status="failed", error=str(e))
    write_results(folder, episodes, summary)
    write_json(os.path.join(folder, "status.json"), status)
    return status, summary


def write_results(folder: str, episodes: list[dict], summary: dict, extra: dict | None = None) -> None:
    """results.jsonl, then summary.json; episodes carry hook and endpoint text, so each row is
    sanitised on its own and the files are replaced atomically (never left partial or empty)."""
    write_jsonl(os.path.join(folder, "results.jsonl"), episodes)
    write_json(os.path.join(folder, "summary.json"), {**summary, **(extra or {})})


def read_results(folder: str) -> list[dict]:
    with open(os.path.join(folder, "results.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def read_episodes(folder: str) -> list[EpisodeResult]:
    """results.jsonl as typed episode records."""
    return [EpisodeResult.from_dict(row) for row in read_results(folder)]


def format_table(episodes: list[dict], summary: dict) -> str:
    lines = [f"{'task':>6} {'reward':>7} {'ok':>3} {'status':<22} {'turns':>5} {'hooks':>5} {'herr':>4}"]
    for ep in episodes:
        c = ep.get("counts") or {}
        r = "   n/a" if ep["reward"] is None else f"{ep['reward']:.3f}"
        lines.append(f"{ep['task_id']:>6} {r:>7} {'Y' if ep['success'] else '-':>3} {ep['status'][:22]:<22} "
                     f"{c.get('turns', 0):>5} {c.get('hook_calls', 0):>5} "
                     f"{c.get('hook_errors', 0) + c.get('hook_timeouts', 0):>4}")
    def fmt(value, spec):
        return "n/a" if value is None else format(value, spec)

    lines.append(f"{summary['benchmark']}: n={summary['n_tasks']} mean_reward={fmt(summary['mean_reward'], '.4f')} "
                 f"success_rate={fmt(summary['success_rate'], '.3f')} hook_calls={summary['hook_calls']} "
                 f"hook_errors={summary['hook_errors']} hook_timeouts={summary['hook_timeouts']} "
                 f"infra_errors={summary['infra_errors']}")
    if "note" in summary:
        lines.append(summary["note"])
    return "\n".join(lines)
