"""Are rewards and hook statuses independent of machine load?

    .venv/bin/python benchmarks/bench_load_independence.py [--tasks 0:4] [--work-iters 14]

Runs the same `hr1 rollout` (WebShop, scripted target, the demo patch with ~25 ms of C-level work
added to every hook call, plus a make_pre_hint hook doing the same) four times: with the
project's budgets (statement count decides, wall clock is a far net) idle and beside two
CPU-bound processes, and with a reference-style 50 ms wall-clock budget
(`patch_protocol.time_budget_s=0.05`) idle and loaded. Prints, per configuration, whether the
per-task rewards, statuses, actions and hook statuses are identical idle vs loaded, the hook
time-outs seen, and the median hook-call time.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEMO_PATCH = REPO / "hr1_jax" / "patch" / "reference_patches" / "demo" / "artifacts" / "patch.json"


def work_lines(iters: int) -> str:
    """Hook body lines that spend ~2 ms of C work per iteration (sum over a 100k range)."""
    return (f"    work = 0\n    for i in range({iters}):\n        work += sum(range(100000))\n"
            "    nb['work'] = work % 97\n")


def make_work_patch(path: Path, iters: int = 14) -> Path:
    patch = json.loads(DEMO_PATCH.read_text())
    for action in patch["actions"]:
        action["code"] = action["code"].replace("def hook(ctx, nb):\n", "def hook(ctx, nb):\n" + work_lines(iters), 1)
    patch["actions"].append({"type": "add_code_hook", "hook": "make_pre_hint", "code": (
        "def hook(ctx, nb):\n" + work_lines(iters)
        + "    if nb.get('hinted'):\n        return None\n    nb['hinted'] = 1\n"
        "    return {'message': 'Check every required option and the budget before Buy Now.'}")})
    path.write_text(json.dumps(patch))
    return path


@contextlib.contextmanager
def cpu_burners(n: int):
    """n CPU-bound processes beside the measured run (killed on exit)."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def run_rollout(workdir: Path, patch: Path, tasks: str, extra: list[str] = ()) -> list[dict]:
    cmd = [sys.executable, "-m", "hr1_jax.cli", "rollout", "--config=configs/demo.py", f"--workdir={workdir}",
           "--config.benchmark=webshop", f"--config.tasks={tasks}", f"--config.patch={patch}", *extra]
    subprocess.run(cmd, cwd=REPO, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=1800)
    return [json.loads(line) for line in (workdir / "results.jsonl").read_text().splitlines() if line.strip()]


def outcome_view(results: list[dict]) -> list[dict]:
    """What a reward depends on, without timings."""
    return [{"task": r["task_id"], "reward": r["reward"], "status": r["status"], "actions": r["actions"],
             "hooks": [(e["hook"], e["turn"], e["status"], e.get("effect")) for e in r["hook_events"]]}
            for r in sorted(results, key=lambda r: r["task_id"])]


def hook_stats(results: list[dict]) -> tuple[int, float]:
    events = [e for r in results for e in r["hook_events"]]
    timeouts = sum(e["status"] == "timeout" for e in events)
    return timeouts, 1000 * statistics.median(e["elapsed_s"] for e in events) if events else 0.0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", default="0:4")
    ap.add_argument("--work-iters", type=int, default=14)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        patch = make_work_patch(tmp / "work_patch.json", args.work_iters)
        configs = {"project budgets (line count decides)": [],
                   "reference-style 50 ms wall clock": ["--config.patch_protocol.time_budget_s=0.05"]}
        print(f"WebShop tasks {args.tasks}, demo patch + ~{2 * args.work_iters} ms of work per hook call; "
              "load = 2 CPU-bound processes on this machine")
        for name, extra in configs.items():
            idle = run_rollout(tmp / f"{len(extra)}_idle", patch, args.tasks, extra)
            with cpu_burners(2):
                loaded = run_rollout(tmp / f"{len(extra)}_loaded", patch, args.tasks, extra)
            same = outcome_view(idle) == outcome_view(loaded)
            (t_idle, ms_idle), (t_loaded, ms_loaded) = hook_stats(idle), hook_stats(loaded)
            print(f"{name:40s} identical={same}  timeouts idle/loaded={t_idle}/{t_loaded}  "
                  f"median hook call idle/loaded={ms_idle:.1f}/{ms_loaded:.1f} ms (x{ms_loaded / max(ms_idle, 1e-9):.2f})  "
                  f"mean reward idle/loaded={_mean(idle):.3f}/{_mean(loaded):.3f}")
    return 0


def _mean(results: list[dict]) -> float:
    rewards = [r["reward"] for r in results if r["reward"] is not None]
    return sum(rewards) / max(1, len(rewards))


if __name__ == "__main__":
    sys.exit(main())
