"""Hook calls, patch validation or reward reruns under two Python interpreters: one benchmark script
run by each in turn, which one goes first alternating from round to round, its figures compared per
round.

    .venv/bin/python benchmarks/bench_interpreters.py --candidate /other/clone/.venv/bin/python
        [--bench patch|reward] [--baseline .venv/bin/python] [--rounds 6] [--repeats N] [--calls 2000]

`--bench patch` runs `bench_patch.py --calls C --repeats N` (N default 5), `--bench reward` runs
`bench_reward.py --workers 1,2 --repeats N` (N default 10). Both interpreters run this checkout's
code (the scripts put it first on sys.path); each needs the project's dependencies, e.g. a second
clone set up with `PYTHON=/usr/bin/python3.11 bash launch/setup.sh`. Per figure of the script's
json line: the median over rounds for each interpreter, how many rounds met the issue-17 target
where the figure has one, and the median of the same-round ratios candidate / baseline (the named
baseline: `--baseline`, by default the interpreter running this script), with how many rounds the
candidate was faster. Every figure is a time: lower is better. Alternating the order makes a slow
spell of the box cost both interpreters alike. The load average before and after and the steal
share of all CPU time are printed; the last line is `BENCH_INTERPRETERS {json}`.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Callable, NamedTuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from machine_state import CpuWindow, load_text  # noqa: E402  (benchmarks/, the script's folder)
from targets import HOOK_CALL_US, VALIDATION_MS  # noqa: E402
from timing import pairwise_median  # noqa: E402

HERE = Path(__file__).resolve().parent
# (BENCH_* key, label, target or None) per benchmark; every figure is a time: lower is better.
PATCH_FIGURES = (("webshop_first_wall_us", "WebShop demo hook, first wall (us)", HOOK_CALL_US["webshop"]),
                 ("alfworld_first_wall_us", "ALFWorld reference hook, first wall (us)", HOOK_CALL_US["alfworld"]),
                 ("validation_max_ms", "validation, slowest of the shipped patches (ms)", VALIDATION_MS),
                 ("validation_median_ms", "validation, median patch (ms)", None),
                 ("webshop_both_walls_us", "WebShop demo hook, both walls (us)", None),
                 ("alfworld_both_walls_us", "ALFWorld reference hook, both walls (us)", None))
REWARD_FIGURES = (("cold_s_1", "32-response group, cold, 1 worker (s)", None),
                  ("cold_s_2", "32-response group, cold, 2 workers (s)", None),
                  ("worker_cpu_ms_1", "workers' and hook processes' CPU a group, 1 worker (ms)", None),
                  ("parent_cpu_ms_1", "scoring process's CPU a group, 1 worker (ms)", None))


class Bench(NamedTuple):
    script: str                  # in benchmarks/
    prefix: str                  # of its json line
    figures: tuple
    default_repeats: int
    arguments: Callable          # (calls, repeats) -> the script's arguments


BENCHES = {
    "patch": Bench("bench_patch.py", "BENCH_PATCH ", PATCH_FIGURES, 5,
                   lambda calls, repeats: ["--calls", str(calls), "--repeats", str(repeats)]),
    "reward": Bench("bench_reward.py", "BENCH_REWARD ", REWARD_FIGURES, 10,
                    lambda calls, repeats: ["--workers", "1,2", "--repeats", str(repeats)]),
}


def run_bench(bench: str, python: str, calls: int, repeats: int, timeout_s: float = 900) -> dict:
    """One run of `bench`'s script by `python`: its json figures (RuntimeError with the tail of its
    output when it fails or prints none)."""
    b = BENCHES[bench]
    proc = subprocess.run([python, str(HERE / b.script), *b.arguments(calls, repeats)],
                          capture_output=True, text=True, timeout=timeout_s)
    lines = [line for line in proc.stdout.splitlines() if line.startswith(b.prefix)]
    if proc.returncode != 0 or not lines:
        tail = (proc.stdout + proc.stderr)[-1500:]
        raise RuntimeError(f"{b.script} under {python} exited {proc.returncode} without figures:\n{tail}")
    return json.loads(lines[-1][len(b.prefix):])


def summarise(figures: tuple, baseline: list[dict], candidate: list[dict]) -> list[dict]:
    """Per figure: both medians, rounds meeting the target, the median same-round ratio candidate /
    baseline and the rounds where the candidate was faster (rounds pair up by index)."""
    rows = []
    for key, label, target in figures:
        base, cand = [r[key] for r in baseline], [r[key] for r in candidate]
        rows.append({"figure": key, "label": label, "target": target,
                     "baseline": statistics.median(base), "candidate": statistics.median(cand),
                     "baseline_met": None if target is None else sum(v <= target for v in base),
                     "candidate_met": None if target is None else sum(v <= target for v in cand),
                     "ratio": pairwise_median(cand, base), "candidate_faster": sum(c < b for c, b in zip(cand, base)),
                     "rounds": len(base)})
    return rows


def _cell(value: float, met: int | None, rounds: int) -> str:
    return f"{value:.{3 if value < 1 else 2}f}" + ("" if met is None else f" (met {met} of {rounds})")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--candidate", required=True, help="the interpreter compared against the baseline")
    ap.add_argument("--bench", choices=sorted(BENCHES), default="patch")
    ap.add_argument("--baseline", default=sys.executable, help="the named baseline (default: this interpreter)")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--repeats", type=int, help="the script's --repeats (default: patch 5, reward 10)")
    args = ap.parse_args(argv)
    for name in ("baseline", "candidate"):
        path = getattr(args, name)
        if not os.access(path, os.X_OK):
            ap.error(f"--{name} {path!r} is not an executable interpreter")
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    bench = BENCHES[args.bench]
    repeats = args.repeats or bench.default_repeats

    print(f"load average before: {load_text()}", flush=True)
    window = CpuWindow()
    runs: dict[str, list[dict]] = {"baseline": [], "candidate": []}
    for r in range(args.rounds):
        order = ("baseline", "candidate") if r % 2 == 0 else ("candidate", "baseline")
        for name in order:
            runs[name].append(run_bench(args.bench, getattr(args, name), args.calls, repeats))
        print(f"  round {r + 1}/{args.rounds} done ({' first, '.join(order)} second)", flush=True)
    rows = summarise(bench.figures, runs["baseline"], runs["candidate"])
    print(f"{bench.script} by each interpreter, {args.rounds} rounds (order alternating), medians over rounds of "
          f"each run's medians ({repeats} repeats{f' x {args.calls} calls' if args.bench == 'patch' else ''}):")
    for name in ("baseline", "candidate"):
        first = runs[name][0]
        print(f"  {name:9s} python {first['python']} at {first['executable']}, {first['libpython']}")
    print("\n| figure | baseline | candidate | candidate / baseline (rounds faster) | target |\n|---|--:|--:|--:|--:|")
    for row in rows:
        target = "" if row["target"] is None else f"{row['target']:g}"
        print(f"| {row['label']} | {_cell(row['baseline'], row['baseline_met'], row['rounds'])} "
              f"| {_cell(row['candidate'], row['candidate_met'], row['rounds'])} "
              f"| {row['ratio']:.2f} ({row['candidate_faster']} of {row['rounds']}) | {target} |")
    print(f"\nload average after: {load_text()}; steal during the run: {window.steal_text()} of all CPU time")
    print("BENCH_INTERPRETERS " + json.dumps({"rows": rows, "runs": runs}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
