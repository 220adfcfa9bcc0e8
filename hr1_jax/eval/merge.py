"""Combining finished evaluations: per-benchmark runs into one report (`eval.merge_from`), and one
run per frozen target into the cross-target table (`eval.targets`)."""
from __future__ import annotations

import os

import numpy as np

from hr1_jax.errors import InputError, read_input_text
from hr1_jax.eval.results import EvalResult


def merge_results(workdirs: list[str]) -> EvalResult:
    """One result from the eval_result.json of several runs: methods of the same name are joined
    (pairs, patches, counts and costs added); the same (method, benchmark, seed, task) twice is an
    error, never counted twice."""
    if not workdirs:
        raise InputError("eval.merge_from: no workdirs given")
    merged: dict = {}
    notes, threshold = [], None
    for wd in workdirs:
        path = os.path.join(wd.strip(), "eval_result.json")
        part = EvalResult.from_json(read_input_text(path, "evaluation result"))
        if threshold is not None and part.threshold != threshold:
            raise InputError(f"{path}: reward threshold {part.threshold} differs from {threshold}")
        threshold = part.threshold
        notes += [f"[{os.path.basename(os.path.normpath(wd))}] {n}" for n in part.notes]
        for m in part.methods:
            if m.name not in merged:
                merged[m.name] = m
                continue
            into = merged[m.name]
            seen = {(p.benchmark, p.seed, p.task_id) for p in into.pairs}
            twice = [p for p in m.pairs if (p.benchmark, p.seed, p.task_id) in seen]
            if twice:
                p = twice[0]
                raise InputError(f"{path}: {m.name!r} already has {p.benchmark} seed {p.seed} task {p.task_id} "
                                 "from an earlier workdir (merge runs of disjoint benchmarks, seeds or tasks)")
            into.pairs += m.pairs
            into.patches += m.patches
            into.n_invalid += m.n_invalid
            into.n_eval_failed += m.n_eval_failed
            for k, v in m.cost.items():
                into.cost[k] = into.cost.get(k, 0) + v
    return EvalResult(title="hr1-jax evaluation: merged runs", methods=list(merged.values()),
                      threshold=threshold, notes=[f"merged from {', '.join(workdirs)}"] + notes)


def _avg_success(pairs, which: str, threshold: float) -> float:
    by_bench: dict[str, list] = {}
    for p in pairs:
        by_bench.setdefault(p.benchmark, []).append(getattr(p, which) >= threshold)
    return 100.0 * float(np.mean([np.mean(v) for v in by_bench.values()])) if by_bench else float("nan")


def cross_target_report(results: dict[str, EvalResult], workdir: str, *, threshold: float) -> str:
    """W/cross_target.md and .csv: per target the baseline Avg and each method's Δ Avg (pp), and
    the mean Δ over targets (the reference's cross-target study reports +7.06 pp over 20 targets)."""
    import csv
    methods = list(dict.fromkeys(m.name for r in results.values() for m in r.methods))
    rows = []
    for key, r in results.items():
        base = _avg_success(r.methods[0].pairs, "baseline_reward", threshold) if r.methods else float("nan")
        row = {"target": key, "baseline_avg": base}
        for m in r.methods:
            row[m.name] = _avg_success(m.pairs, "patched_reward", threshold) - base
        rows.append(row)
    mean = {m: float(np.nanmean([r.get(m, np.nan) for r in rows])) for m in methods}
    lines = ["# Cross-target evaluation (Δ Avg success pp against each target's own baseline)", "",
             "| Target | baseline Avg | " + " | ".join(methods) + " |", "|---" * (len(methods) + 2) + "|"]
    for r in rows:
        lines.append(f"| {r['target']} | {r['baseline_avg']:.1f} | "
                     + " | ".join(f"{r[m]:+.1f}" if m in r else "–" for m in methods) + " |")
    lines.append(f"| mean over {len(rows)} targets | | " + " | ".join(f"{mean[m]:+.1f}" for m in methods) + " |")
    lines += ["", "Per-target reports: " + ", ".join(f"targets/{k}/report.md" for k in results)]
    text = "\n".join(lines) + "\n"
    os.makedirs(workdir, exist_ok=True)
    with open(os.path.join(workdir, "cross_target.md"), "w", encoding="utf-8") as f:
        f.write(text)
    with open(os.path.join(workdir, "cross_target.csv"), "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["target", "baseline_avg"] + methods)
        for r in rows:
            w.writerow([r["target"], f"{r['baseline_avg']:.2f}"] + [f"{r[m]:.2f}" if m in r else "" for m in methods])
    return text
