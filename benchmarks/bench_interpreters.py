"""Hook calls and patch validation under two Python interpreters: `bench_patch.py` run by each in
turn, which one goes first alternating from round to round, with its figures compared per round.

    .venv/bin/python benchmarks/bench_interpreters.py --candidate /other/clone/.venv/bin/python
        [--baseline .venv/bin/python] [--rounds 6] [--calls 2000] [--repeats 5]

Both interpreters run this checkout's code (`bench_patch.py` puts it first on sys.path); each needs
the project's dependencies, e.g. a second clone set up with `PYTHON=/usr/bin/python3.11 bash
launch/setup.sh`. Per figure of `bench_patch.py`'s `BENCH_PATCH` line: the median over rounds for each
interpreter, how many rounds met the issue-17 target, and the median of the same-round ratios
candidate / baseline (the named baseline: `--baseline`, by default the interpreter running this
script), with how many rounds the candidate was faster. Alternating the order makes a slow spell of
the box cost both interpreters alike. The load average before and after and the steal share of all
CPU time are printed; the last line is `BENCH_INTERPRETERS {json}`.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from machine_state import CpuWindow, load_text  # noqa: E402  (benchmarks/, the script's folder)
from targets import HOOK_CALL_US, VALIDATION_MS  # noqa: E402
from timing import pairwise_median  # noqa: E402

BENCH_PATCH = Path(__file__).resolve().parent / "bench_patch.py"
# (BENCH_PATCH key, label, target or None); every figure is a time: lower is better.
FIGURES = (("webshop_first_wall_us", "WebShop demo hook, first wall (us)", HOOK_CALL_US["webshop"]),
           ("alfworld_first_wall_us", "ALFWorld reference hook, first wall (us)", HOOK_CALL_US["alfworld"]),
           ("validation_max_ms", "validation, slowest of the shipped patches (ms)", VALIDATION_MS),
           ("validation_median_ms", "validation, median patch (ms)", None),
           ("webshop_both_walls_us", "WebShop demo hook, both walls (us)", None),
           ("alfworld_both_walls_us", "ALFWorld reference hook, both walls (us)", None))


def run_bench_patch(python: str, calls: int, repeats: int, timeout_s: float = 900) -> dict:
    """One `bench_patch.py` run by `python`: its BENCH_PATCH figures (RuntimeError with the tail of
    its output when it fails or prints none)."""
    proc = subprocess.run([python, str(BENCH_PATCH), "--calls", str(calls), "--repeats", str(repeats)],
                          capture_output=True, text=True, timeout=timeout_s)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("BENCH_PATCH ")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stdout + proc.stderr)[-1500:]
        raise RuntimeError(f"bench_patch.py under {python} exited {proc.returncode} without figures:\n{tail}")
    return json.loads(lines[-1][len("BENCH_PATCH "):])


def summarise(baseline: list[dict], candidate: list[dict]) -> list[dict]:
    """Per figure: both medians, rounds meeting the target, the median same-round ratio candidate /
    baseline and the rounds where the candidate was faster (rounds pair up by index)."""
    rows = []
    for key, label, target in FIGURES:
        base, cand = [r[key] for r in baseline], [r[key] for r in candidate]
        rows.append({"figure": key, "label": label, "target": target,
                     "baseline": statistics.median(base), "candidate": statistics.median(cand),
                     "baseline_met": None if target is None else sum(v <= target for v in base),
                     "candidate_met": None if target is None else sum(v <= target for v in cand),
                     "ratio": pairwise_median(cand, base), "candidate_faster": sum(c < b for c, b in zip(cand, base)),
                     "rounds": len(base)})
    return rows


def _cell(value: float, met: int | None, rounds: int) -> str:
    return f"{value:.2f}" + ("" if met is None else f" (met {met} of {rounds})")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--candidate", required=True, help="the interpreter compared against the baseline")
    ap.add_argument("--baseline", default=sys.executable, help="the named baseline (default: this interpreter)")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    for name in ("baseline", "candidate"):
        path = getattr(args, name)
        if not os.access(path, os.X_OK):
            ap.error(f"--{name} {path!r} is not an executable interpreter")
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")

    print(f"load average before: {load_text()}", flush=True)
    window = CpuWindow()
    runs: dict[str, list[dict]] = {"baseline": [], "candidate": []}
    for r in range(args.rounds):
        order = ("baseline", "candidate") if r % 2 == 0 else ("candidate", "baseline")
        for name in order:
            runs[name].append(run_bench_patch(getattr(args, name), args.calls, args.repeats))
        print(f"  round {r + 1}/{args.rounds} done ({' first, '.join(order)} second)", flush=True)
    rows = summarise(runs["baseline"], runs["candidate"])
    print(f"bench_patch.py by each interpreter, {args.rounds} rounds (order alternating), medians over rounds of "
          f"each run's medians ({args.repeats} x {args.calls} calls):")
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
