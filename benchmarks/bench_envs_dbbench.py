"""DBBench episode throughput with the scripted target, MariaDB vs SQLite (medians over repeats),
and optionally the success rate of patches against the baseline on the same tasks.

    .venv/bin/python benchmarks/bench_envs_dbbench.py [--split test] [--tasks 60] [--repeats 5]
        [--backends mariadb,sqlite] [--patches harness-r1]   # patches: a glob under the reference
                                                            # held-out folder, or JSON paths

Starts the project's MariaDB (launch/mariadb.sh) when it is not running and, unless another run still
uses it, stops it afterwards.
Episodes run one after another in this process through `hr1_jax.runtime.run_episode`.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import pathlib
import statistics
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from envs.dbbench import config as dbconfig  # noqa: E402
from envs.dbbench import server  # noqa: E402
from envs.dbbench.env import DBBenchEnv  # noqa: E402
from envs.dbbench.scripted import ScriptedAgent  # noqa: E402
from hr1_jax.runtime import run_episode  # noqa: E402

REFERENCE = REPO / "hr1_jax" / "patch" / "reference_patches" / "examples" / "heldout_generalization"
AGENT = {"skill": 0.6, "hint_follow_prob": 0.7}


def spread(n_total: int, n: int) -> list[int]:
    """n task ids spread evenly over the split (every task family is represented)."""
    n = min(n, n_total)
    return [i * n_total // n for i in range(n)]


def run_batch(env, tasks, patch=None, seed=0):
    return [run_episode(env, ScriptedAgent(t, seed, AGENT), t, patch, seed=seed) for t in tasks]


def throughput(backend: str, split: str, n: int, repeats: int) -> dict:
    cfg = dbconfig.defaults()
    cfg.backend = backend
    env = DBBenchEnv(cfg)
    try:
        all_tasks = env.tasks(split)
        tasks = [all_tasks[i] for i in spread(len(all_tasks), n)]
        run_batch(env, tasks[:5])  # warm-up (imports, connection, caches)
        rates, success = [], []
        for r in range(repeats):
            t0 = time.perf_counter()
            results = run_batch(env, tasks, seed=r)
            rates.append(len(tasks) / (time.perf_counter() - t0))
            success.append(sum(x.success for x in results) / len(results))
            assert all(x.status != "infra_error" for x in results), [x.error for x in results if x.error][:1]
    finally:
        env.close()
    return {"backend": backend, "episodes": len(tasks), "repeats": repeats,
            "median_eps_per_s": statistics.median(rates), "min": min(rates), "max": max(rates),
            "median_success": statistics.median(success)}


def patch_effects(pattern: str, split: str, n: int) -> list[dict]:
    from hr1_jax.patch import compile_patch
    paths = sorted(REFERENCE.glob(f"{pattern}/seed*/dbbench.json")) or [pathlib.Path(pattern)]
    cfg = dbconfig.defaults()
    cfg.backend = "mariadb"
    env = DBBenchEnv(cfg)
    rows = []
    try:
        all_tasks = env.tasks(split)
        tasks = [all_tasks[i] for i in spread(len(all_tasks), n)]
        base = run_batch(env, tasks)
        base_rate = sum(r.success for r in base) / len(base)
        for path in paths:
            compiled = compile_patch(json.loads(path.read_text()), "dbbench")
            res = run_batch(env, tasks, compiled)
            calls = sum(r.counts["hook_calls"] for r in res)
            errors = sum(r.counts["hook_errors"] + r.counts["hook_timeouts"] for r in res)
            rate = sum(r.success for r in res) / len(res)
            rows.append({"patch": str(path.relative_to(REFERENCE) if REFERENCE in path.parents else path),
                         "baseline": base_rate, "patched": rate, "delta": rate - base_rate,
                         "hook_calls": calls, "hook_exception_rate": errors / max(calls, 1)})
    finally:
        env.close()
    return rows


def report(args, backends: list) -> None:
    print(f"DBBench scripted-target throughput ({args.split}, {args.tasks} tasks, {args.repeats} repeats)")
    print(f"{'backend':<9} {'median ep/s':>12} {'min':>8} {'max':>8} {'success':>8}")
    for backend in backends:
        r = throughput(backend, args.split, args.tasks, args.repeats)
        print(f"{backend:<9} {r['median_eps_per_s']:>12.1f} {r['min']:>8.1f} {r['max']:>8.1f} "
              f"{r['median_success']:>8.3f}")
    if args.patches:
        print(f"\nPatch effects on the scripted target (MariaDB, {args.split}, {args.tasks} tasks, seed 0)")
        print(f"{'patch':<45} {'base':>6} {'patched':>8} {'delta':>7} {'hook calls':>11} {'exc %':>6}")
        for row in patch_effects(args.patches, args.split, args.tasks):
            print(f"{row['patch']:<45} {row['baseline']:>6.3f} {row['patched']:>8.3f} {row['delta']:>+7.3f} "
                  f"{row['hook_calls']:>11} {100 * row['hook_exception_rate']:>6.2f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", default="test")
    ap.add_argument("--tasks", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--backends", default="mariadb,sqlite")
    ap.add_argument("--patches", default="", help="reference patch folder glob (e.g. 'harness-r1', '*') or a JSON path")
    args = ap.parse_args(argv)
    backends = [b for b in args.backends.split(",") if b]
    with contextlib.ExitStack() as stack:
        if "mariadb" in backends or args.patches:
            ok, message, _ = stack.enter_context(server.project_server())
            if not ok:
                print(f"MariaDB could not start ({message}); skipping it")
                backends = [b for b in backends if b != "mariadb"]
        report(args, backends)
    return 0


if __name__ == "__main__":
    sys.exit(main())
