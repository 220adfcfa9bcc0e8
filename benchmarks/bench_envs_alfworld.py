"""ALFWorld episode throughput with the scripted target (real TextWorld engine).

    .venv/bin/python benchmarks/bench_envs_alfworld.py [--tasks 8] [--split harness_r1_test]
        [--skill 0.6] [--seed 0] [--reference-patches]

Prints the median reset time, step time, episode time and steps per episode, and episodes/s
(one process). With --reference-patches it also runs every shipped reference ALFWorld patch on
the same tasks and prints, per patch, success next to the unpatched baseline and the hook
exception rate (errors + time-outs over hook calls).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import ml_collections  # noqa: E402

from envs.alfworld import unpack  # noqa: E402
from envs.alfworld.config import defaults  # noqa: E402
from envs.alfworld.env import ALFWorldEnv  # noqa: E402
from envs.alfworld.tasks import balanced_sample  # noqa: E402
from envs.alfworld.scripted import ScriptedAgent  # noqa: E402
from hr1_jax.runtime import run_episode  # noqa: E402

PATCH_DIR = REPO / "hr1_jax" / "patch" / "reference_patches" / "examples" / "heldout_generalization"


class TimedEnv(ALFWorldEnv):
    """Records the wall time of every reset and step."""

    def __init__(self, config):
        super().__init__(config)
        self.reset_s: list[float] = []
        self.step_s: list[float] = []

    def reset(self, task):
        t0 = time.perf_counter()
        try:
            return super().reset(task)
        finally:
            self.reset_s.append(time.perf_counter() - t0)

    def step(self, action):
        t0 = time.perf_counter()
        try:
            return super().step(action)
        finally:
            self.step_s.append(time.perf_counter() - t0)


def run_batch(env, tasks, agent_cfg, seed, patch=None):
    results = []
    for task in tasks:
        results.append(run_episode(env, ScriptedAgent(task, seed, agent_cfg), task, patch, seed=seed))
    return results


def reference_patches(patch_dir: Path) -> list[Path]:
    return sorted(patch_dir.glob("*/seed*/alfworld.json"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--split", default="harness_r1_test")
    ap.add_argument("--skill", type=float, default=0.6)
    ap.add_argument("--hint-follow-prob", type=float, default=0.7)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reference-patches", action="store_true")
    ap.add_argument("--patch-dir", type=Path, default=PATCH_DIR)
    args = ap.parse_args(argv)

    unpack.unpack()
    env = TimedEnv(defaults())
    all_tasks = env.tasks(args.split)
    tasks = balanced_sample(all_tasks, args.tasks)
    agent_cfg = ml_collections.ConfigDict({"skill": args.skill, "hint_follow_prob": args.hint_follow_prob})
    print(f"alfworld split={args.split} ({len(all_tasks)} available tasks; harness_r1_test = 432 of 500), "
          f"{len(tasks)} tasks, skill={args.skill}, hint_follow_prob={args.hint_follow_prob}")

    t0 = time.perf_counter()
    base = run_batch(env, tasks, agent_cfg, args.seed)
    wall = time.perf_counter() - t0
    ep_s = [r.wall_s for r in base]
    steps = [r.counts["env_steps"] for r in base]
    print(f"reset_s median {statistics.median(env.reset_s):.3f}  step_s median {statistics.median(env.step_s):.4f}  "
          f"episode_s median {statistics.median(ep_s):.2f}  steps/episode median {statistics.median(steps):g}")
    print(f"episodes/s {len(base) / wall:.3f}  (batch of {len(base)} in {wall:.1f}s)  "
          f"baseline success {sum(r.success for r in base)}/{len(base)}  "
          f"statuses {json.dumps({s: sum(r.status == s for r in base) for s in sorted({r.status for r in base})})}")

    if args.reference_patches:
        from hr1_jax.patch import compile_patch
        base_ok = [r.success for r in base]
        print(f"{'patch':<44} {'success':>8} {'rescued':>8} {'broken':>7} {'hook_calls':>10} {'exc_rate':>9}")
        for path in reference_patches(args.patch_dir):
            patch = compile_patch(json.loads(path.read_text()), "alfworld")
            res = run_batch(env, tasks, agent_cfg, args.seed, patch)
            calls = sum(r.counts["hook_calls"] for r in res)
            exc = sum(r.counts["hook_errors"] + r.counts["hook_timeouts"] for r in res)
            ok = [r.success for r in res]
            name = str(path.relative_to(args.patch_dir))
            print(f"{name:<44} {sum(ok):>4}/{len(ok):<3} {sum(p and not b for p, b in zip(ok, base_ok)):>8} "
                  f"{sum(b and not p for p, b in zip(ok, base_ok)):>7} {calls:>10} {exc / max(1, calls):>9.4f}")
    env.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
