"""WebShop (substitute) throughput with the scripted target.

    .venv/bin/python benchmarks/bench_envs_webshop.py [--tasks 100] [--split test] [--repeats 3]
        [--skill 0.6] [--seed 0] [--reference-patches]

Prints the catalog build time (first use in a process), median episode time, env step time and
steps per episode, and episodes/s (one process; median over repeats), plus the baseline mean
reward and success. With --reference-patches it also runs every shipped reference WebShop patch
on the same tasks and prints reward/success next to the baseline and the hook exception rate.
All numbers are for the self-contained WebShop SUBSTITUTE, not the real WebShop.
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

from envs.webshop.env import DISPLAY_NAME, WebShopEnv  # noqa: E402
from envs.webshop.scripted import ScriptedAgent  # noqa: E402
from hr1_jax.runtime import run_episode  # noqa: E402

REF = REPO / "hr1_jax" / "patch" / "reference_patches"


class TimedEnv(WebShopEnv):
    """Records the wall time of every env step."""

    def __init__(self, config=None):
        super().__init__(config)
        self.step_s: list[float] = []

    def step(self, action):
        t0 = time.perf_counter()
        try:
            return super().step(action)
        finally:
            self.step_s.append(time.perf_counter() - t0)


def run_batch(env, tasks, cfg, seed, patch=None):
    out = []
    for task in tasks:
        t0 = time.perf_counter()
        r = run_episode(env, ScriptedAgent(task, seed, cfg), task, patch, seed=seed)
        out.append((r, time.perf_counter() - t0))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=100)
    ap.add_argument("--split", default="test")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skill", type=float, default=0.6)
    ap.add_argument("--hint-follow-prob", type=float, default=0.7)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reference-patches", action="store_true")
    args = ap.parse_args()
    cfg = {"skill": args.skill, "hint_follow_prob": args.hint_follow_prob}

    env = TimedEnv()
    t0 = time.perf_counter()
    tasks = env.tasks(args.split)[:args.tasks]
    build_s = time.perf_counter() - t0
    print(f"{DISPLAY_NAME}: catalog of {len(env.catalog)} products + {args.split} tasks built in {build_s:.2f} s")

    rates, ep_times = [], []
    results = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        batch = run_batch(env, tasks, cfg, args.seed)
        rates.append(len(batch) / (time.perf_counter() - t0))
        ep_times += [dt for _, dt in batch]
        results = [r for r, _ in batch]
    steps = [r.counts["env_steps"] for r in results]
    mean = statistics.mean(r.reward for r in results)
    succ = sum(r.success for r in results)
    print(f"episodes/s (median of {args.repeats}): {statistics.median(rates):.1f}")
    print(f"episode time median: {statistics.median(ep_times) * 1e3:.2f} ms; env step median: "
          f"{statistics.median(env.step_s) * 1e3:.3f} ms; steps/episode median: {statistics.median(steps)}")
    print(f"baseline ({args.split}[0:{len(tasks)}], scripted skill {args.skill}): mean reward {mean:.3f} "
          f"(score {100 * mean:.1f}), success {succ}/{len(tasks)}")

    if args.reference_patches:
        from hr1_jax.patch import compile_patch
        files = [REF / "examples" / "webshop_patch.json", REF / "demo" / "artifacts" / "patch.json"] + \
            sorted((REF / "examples" / "heldout_generalization").glob("*/seed*/webshop.json"))
        print(f"\n{'patch':<75} {'reward':>15} {'success':>11} {'hook calls':>10} {'exc.':>7}")
        for path in files:
            patch = compile_patch(json.loads(path.read_text()), "webshop")
            patched = [r for r, _ in run_batch(env, tasks, cfg, args.seed, patch)]
            calls = sum(r.counts["hook_calls"] for r in patched)
            exc = sum(r.counts["hook_errors"] + r.counts["hook_timeouts"] for r in patched)
            pm = statistics.mean(r.reward for r in patched)
            ps = sum(r.success for r in patched)
            print(f"{str(path.relative_to(REF)):<75} {mean:.3f}->{pm:.3f} {succ:>4}->{ps:<4} {calls:>10} "
                  f"{exc / max(calls, 1):>7.2%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
