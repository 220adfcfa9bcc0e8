"""Reward evaluation wall time for one 32-response GRPO group on a 10-task batch, with 1, 2 and 4
rollout workers (scripted target), and what the content-addressed cache's dedupe saves.

  .venv/bin/python benchmarks/bench_reward.py [--benchmark dbbench] [--backend sqlite|mariadb|auto]
                                              [--workers 1,2,4] [--repeats 4] [--idle-s 0] [--pin]

The reward cache of each group is a fresh temporary folder (`TMPDIR` chooses where: its file
system's metadata speed is part of the parent's CPU per group).

The group holds 6 distinct valid patches (duplicated as GRPO groups are: 28 responses) and 4 invalid
responses. Per worker count: median wall time of `score_group` on a fresh cache ("cold"), of the
same group again ("warm", all cache hits), and of scoring every valid response separately with no
sharing ("no dedupe"). Prints medians; worker start-up is excluded and reported separately, and every
worker starts its hook process (which it keeps across groups) on patched episodes before the timing.
Every worker count's pool is started first and the repeats interleave them: in each repeat the cold
groups run back to back, in the given order on even repeats and reversed on odd ones (on a 2-vCPU VM
the group that ran right after another pool's was the slower one, whichever pool it was: a fixed
order would favour one worker count; an even `--repeats` balances the orders exactly, and the ratio
is also printed by order, and its spread over repeats), then the warm, no-dedupe and control runs. `speedup` is the
median over repeats of the first worker count's cold time over this row's in the same repeat. Where the
two orders' ratios fall apart, that median lands between them; the position-balanced speedup printed
under the table, the geometric mean of the two orders' medians, cancels a slowdown that hits
whichever pool runs second, and is the figure to read then (issue 17's target line, printed when
the worker counts start with 1 and include 2, judges it, or the median where only one order ran);
`ceiling` is what the machine allows at that moment: a pure-CPU control (the same Python work on as
many spawned processes, vs one) sampled in the same repeats, so a loaded box shows up as a low
ceiling, not as a slow pool. `--idle-s S` sleeps S seconds before each cold group, every process
idle, as a GRPO step's workers sit through sampling before its group is scored: on a 2-vCPU VM the
2-worker time rose after idle (benchmarks/README).
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from hr1_jax.config import base_config, validate_config  # noqa: E402
from hr1_jax.rollout.batches import baseline_metadata, run_batch  # noqa: E402
from hr1_jax.rollout.pool import JobSpec, WorkerPool, worker_shares  # noqa: E402
from hr1_jax.rollout.reward import RewardContext, prepare_patch, score_group, score_response  # noqa: E402
# machine_state, targets: benchmarks/, the script's folder
from machine_state import CpuWindow, interpreter_facts, load_text  # noqa: E402
from targets import rerun_line  # noqa: E402

HINTS = ["Probe the table schema with DESCRIBE before the final query.",
         "Quote identifiers with backticks; inspect columns first.",
         "Cast TEXT numbers before ranking or aggregating.",
         "After INSERT/UPDATE/DELETE an empty result means success; verify, then commit.",
         "If a query fails twice, change it instead of repeating it.",
         "Check the exact answer format before committing."]
PRE_HINT = """def hook(ctx, nb):
    if ctx["predicates"]["no_sql_yet"] and not nb.get("hinted"):
        nb["hinted"] = True
        return {"message": %s}
    return None
"""
BLOCK = """def hook(ctx, nb):
    if ctx["predicates"]["commit_before_sql"]:
        return {"kind": "block_and_prompt", "message": "Execute SQL against the table before committing."}
    return None
"""
POST_HINT = """def hook(ctx, nb):
    if ctx["predicates"]["last_result_error"]:
        return {"kind": "inject_hint", "message": %s}
    return None
"""


def group_texts() -> list[str]:
    texts = []
    for i, hint in enumerate(HINTS):
        patch = {"benchmark": "dbbench", "description": "general schema and retry hints",
                 "actions": [{"type": "add_code_hook", "hook": "make_pre_hint", "code": PRE_HINT % json.dumps(hint)},
                             {"type": "add_code_hook", "hook": "on_post_step", "code": POST_HINT % json.dumps(hint)}]}
        if i % 2 == 0:  # half of the patches also block committing before any SQL
            patch["actions"].append({"type": "add_code_hook", "hook": "on_before_action", "code": BLOCK})
        text = f"- pattern {i}\n</think>\n<patch>{json.dumps(patch)}</patch>"
        texts += [text] * (6 if i < 4 else 2)          # 4*6 + 2*2 = 28 valid responses
    texts += ["I am not sure.", "<patch>{not json}</patch>", "</think><patch>{\"benchmark\": \"dbbench\"}</patch>",
              "</think>\n<patch>{\"benchmark\": \"dbbench\", \"actions\": [{\"type\": \"add_code_hook\", "
              "\"hook\": \"on_init\", \"code\": \"import os\"}]}</patch>"]
    return texts


def _burn(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


class CpuCeiling:
    """What `workers` processes can reach on this box right now: the same pure-Python work on
    `workers` spawned processes vs on one, sampled beside each repeat of the groups."""

    def __init__(self, worker_counts: list[int], n: int = 1_500_000):
        ctx = multiprocessing.get_context("spawn")
        self.n = n
        self.pools = {w: concurrent.futures.ProcessPoolExecutor(w, mp_context=ctx) for w in {1, *worker_counts}}
        for w, ex in self.pools.items():
            list(ex.map(_burn, [1] * w))   # start the processes

    def sample(self, workers: int) -> float:
        jobs = [self.n] * (2 * workers)
        t = time.perf_counter()
        list(self.pools[1].map(_burn, jobs))
        serial = time.perf_counter() - t
        t = time.perf_counter()
        list(self.pools[workers].map(_burn, jobs))
        return serial / (time.perf_counter() - t)

    def close(self) -> None:
        for ex in self.pools.values():
            ex.shutdown()


def _tree_cpu_s(pids: list[int]) -> float:
    """On-CPU seconds so far of these processes and their descendants (hook processes), all
    threads, from /proc/<pid>/task/*/schedstat (ns; 0 where /proc does not offer it)."""
    total, todo = 0.0, list(pids)
    while todo:
        pid = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0]) / 1e9
            except (OSError, ValueError, IndexError):
                pass
        todo += _children(pid)
    return total


def _children(pid: int) -> list[int]:
    """The child processes of `pid` (all its threads), from /proc; [] where it does not list them."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    kids = []
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids += [int(k) for k in f.read().split()]
        except (OSError, ValueError):
            pass
    return kids


def _start_hook_processes(pool, c, patch, tries: int = 5) -> None:
    """Run patched episodes until every worker has started its hook process (a rollout worker
    keeps it across groups; its ~0.1 s start would otherwise land in the first repeat's cold
    groups). Where /proc lists no children, the patched batch runs once."""
    for _ in range(tries):
        run_batch(pool, c.benchmark, c.split, list(range(2 * pool.num_workers)), target=c.target.to_dict(),
                  seed=0, patch=patch)
        if all(_children(pid) for pid in pool.worker_pids()) or not os.path.exists("/proc/self/task"):
            return
    print(f"warning: {sum(bool(_children(pid)) for pid in pool.worker_pids())} of {pool.num_workers} workers "
          "started a hook process before the timed groups")


def balanced_ratio(ran_after: list[float], ran_before: list[float]) -> float:
    """The speedup with the order's effect taken out: a cold group that runs right after another pool's
    is slower by some factor f whichever pool it is, so the same-repeat ratios are r / f where the
    faster pool ran second and r * f where it ran first; the geometric mean of the two orders'
    medians is r."""
    return (statistics.median(ran_after) * statistics.median(ran_before)) ** 0.5


def _cold_group(pool, c, rows, texts, folder, idle_s: float):
    ctx = RewardContext(c, pool=pool, cache_dir=folder)
    pids = pool.worker_pids()
    time.sleep(idle_s)
    t, cpu, wcpu = time.perf_counter(), time.process_time(), _tree_cpu_s(pids)
    results = score_group(rows, texts, ctx)
    cold, cpu, wcpu = time.perf_counter() - t, time.process_time() - cpu, _tree_cpu_s(pids) - wcpu
    t = time.perf_counter()
    score_group(rows, texts, ctx)
    warm = time.perf_counter() - t
    ctx.close()
    return cold, cpu, wcpu, warm, ctx.counters["evaluations"], [r.score for r in results if r.score is not None]


def _no_dedupe(pool, c, row, texts, folder, n):
    t = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(4 * n) as ex:
        list(ex.map(lambda i: score_response(row, texts[i], RewardContext(
            c, pool=pool, cache_dir=os.path.join(folder, f"own{i}"))), range(28)))
    return time.perf_counter() - t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--benchmark", default="dbbench")
    ap.add_argument("--backend", default="sqlite")
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--idle-s", type=float, default=0.0, help="sleep before each cold group (all idle)")
    ap.add_argument("--pin", action="store_true", help="rollout.pin_workers=true: each worker and its hook "
                                                      "process on one CPU")
    args = ap.parse_args(argv)
    if args.idle_s < 0:
        ap.error("--idle-s must be >= 0")
    c = base_config()
    c.benchmark, c.tasks = args.benchmark, "0:10"
    c.dbbench.backend = args.backend
    c.rollout.pin_workers = args.pin
    validate_config(c)
    texts = group_texts()
    with WorkerPool(c, num_workers=2) as pool:
        episodes = run_batch(pool, c.benchmark, c.split, list(range(10)), target=c.target.to_dict(), seed=0)
    row = {"prompt": [], "label": "", "metadata": baseline_metadata(c.benchmark, c.split, 0, episodes,
                                                                    target_name=c.target.name)}
    rows = [row] * len(texts)
    counts = [int(x) for x in args.workers.split(",")]
    print(f"{c.benchmark} ({args.backend}) 10-task batch, baseline mean reward "
          f"{row['metadata']['baseline_average_reward']:.2f}; group of {len(texts)} responses "
          f"({len(set(texts[:28]))} distinct valid patches, 28 valid, 4 invalid); cpu cores {os.cpu_count()}; "
          f"idle before each cold group {args.idle_s:g} s; workers pinned: {'yes' if args.pin else 'no'}; "
          f"load {load_text()}")
    window = CpuWindow()
    pools, startup = {}, {}
    warm_patch = prepare_patch(texts[0], c.benchmark, c)[0]
    for n in counts:
        t0 = time.perf_counter()
        pools[n] = WorkerPool(c, num_workers=n)
        pools[n].run(JobSpec(c.benchmark, c.split, [0], None, c.target.to_dict(), 0))  # warm every import path
        startup[n] = time.perf_counter() - t0
        _start_hook_processes(pools[n], c, warm_patch)
    ceiling = CpuCeiling(counts)
    rec = {n: collections.defaultdict(list) for n in counts}
    try:
        for r in range(args.repeats):   # interleaved: a load change hits every worker count alike
            # The cold groups run back to back, in the given order on even repeats and reversed on
            # odd ones: each worker count's cold group follows the other pools' work (or the last
            # repeat's control) as often as the others' do. Then the warm, no-dedupe and control runs.
            order = counts if r % 2 == 0 else counts[::-1]
            with tempfile.TemporaryDirectory() as d:
                for position, n in enumerate(order):
                    cold, cpu, wcpu, warm, evals, scores = _cold_group(pools[n], c, rows, texts,
                                                                       os.path.join(d, f"shared{n}"), args.idle_s)
                    rec[n]["cold"].append(cold)
                    rec[n]["position"].append(position)
                    rec[n]["parent_cpu"].append(cpu)
                    rec[n]["worker_cpu"].append(wcpu)
                    rec[n]["warm"].append(warm)
                    rec[n]["evals"], rec[n]["scores"] = evals, scores
                for n in counts:
                    rec[n]["nodedupe"].append(_no_dedupe(pools[n], c, row, texts, os.path.join(d, f"own{n}"), n))
                    rec[n]["ceiling"].append(ceiling.sample(n) if n > 1 else 1.0)
    finally:
        ceiling.close()
        for pool in pools.values():
            pool.close()
    med = statistics.median
    base = rec[counts[0]]["cold"]
    print(f"speedup: median over repeats of the {counts[0]}-worker cold group's time over this row's in the same "
          f"repeat; ceiling: the pure-CPU control's, sampled in the same repeats; parent_cpu_ms: this process's "
          f"CPU time (all threads) over the cold group, which competes with the workers for the cores")
    print(f"{'workers':>7} {'startup_s':>9} {'cold_s':>7} {'speedup':>7} {'ceiling':>7} {'parent_cpu_ms':>13} "
          f"{'warm_s':>7} {'no_dedupe_s':>11} {'evals':>5} {'dedupe_saving':>13} {'mean_score':>10}")
    for n in counts:
        r = rec[n]
        speedup = med([b / x for b, x in zip(base, r["cold"])])
        print(f"{n:>7} {startup[n]:>9.2f} {med(r['cold']):>7.3f} {speedup:>6.2f}x {med(r['ceiling']):>6.2f}x "
              f"{med(r['parent_cpu']) * 1000:>13.1f} {med(r['warm']):>7.3f} {med(r['nodedupe']):>11.2f} {r['evals']:>5} "
              f"{1 - med(r['cold']) / med(r['nodedupe']):>12.0%} {statistics.fmean(r['scores']):>10.3f}")
    verdict = None
    for n in counts[1:]:
        # how far the same-repeat ratios spread (the median alone hides the box's swings), and the
        # same ratios split by which of the two pools' cold groups ran first
        same = [b / x for b, x in zip(base, rec[n]["cold"])]
        balanced = None
        ratios = sorted(same)
        if len(ratios) >= 4:
            q1, _, q3 = statistics.quantiles(ratios, n=4)
            print(f"speedup of {n} workers over repeats: min {ratios[0]:.2f}x, quartiles {q1:.2f}x / {q3:.2f}x, "
                  f"max {ratios[-1]:.2f}x")
        pairs = [(q, pos > b_pos) for q, b_pos, pos in zip(same, rec[counts[0]]["position"], rec[n]["position"])]
        later = [q for q, ran_after in pairs if ran_after]
        earlier = [q for q, ran_after in pairs if not ran_after]
        if later and earlier:
            print(f"speedup of {n} workers by order: ran after {counts[0]} worker(s)' group {med(later):.2f}x "
                  f"({len(later)} repeats), before it {med(earlier):.2f}x ({len(earlier)} repeats)")
            balanced = balanced_ratio(later, earlier)
            print(f"position-balanced speedup of {n} workers: {balanced:.2f}x (geometric mean of the two orders' "
                  "medians)")
        if (counts[0], n) == (1, 2):
            verdict = rerun_line(balanced, med(same))
    per_group = {n: med(rec[n]["worker_cpu"]) * 1000 for n in counts}
    jobs = {n: max(1, rec[n]["evals"] * len(worker_shares(list(range(10)), n))) for n in counts}
    print("worker_cpu_ms: the workers' and their hook processes' CPU over the cold group (per job: over evals x "
          "worker shares): " + ", ".join(f"{n} worker{'s' * (n > 1)} {per_group[n]:.1f} ({per_group[n] / jobs[n]:.1f} "
                                         "per job)" for n in counts))
    if verdict:
        print(f"target (issue 17): {verdict}")
    print(f"load after: {load_text()}; steal during the run: {window.steal_text()} of all CPU time")
    figures = {f"{name}_{n}": value for n in counts for name, value in (
        ("cold_s", med(rec[n]["cold"])), ("parent_cpu_ms", med(rec[n]["parent_cpu"]) * 1000),
        ("worker_cpu_ms", per_group[n]))}
    print("BENCH_REWARD " + json.dumps({**interpreter_facts(), **figures}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
