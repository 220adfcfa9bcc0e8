"""`hr1 demo`'s held-out comparison: no patch / template teacher / SFT / GRPO on the same held-out
batches, greedy and sampled, with paired-bootstrap intervals clustered by task.

GRPO runs under several seeds; each seed's engineer (its validation-chosen `best_params`, or
`final_params` when there is no validation set) is evaluated, and the GRPO outcome of a task is the
mean over seeds, so the interval of `grpo_vs_sft` carries the seed-to-seed spread too. The sampled
metric is each engineer's expected reward at the GRPO sampling temperature, estimated from
`train.demo.eval_samples` samples per batch (what GRPO optimises; the greedy table reacts only
when an argmax flips).
"""
from __future__ import annotations

import json
import os

import numpy as np

from envs.registry import benchmark, training_order
from hr1_jax.data.rows import read_jsonl
from hr1_jax.utils.jsonsafe import write_json
from hr1_jax.utils.tensorboard import TensorBoardWriter

METHODS = ("no_patch", "teacher", "sft", "grpo")
# the demo benchmarks' own lines (descriptor `demo.notes`), then the method's
NOTES = (*(note for b in training_order() if benchmark(b).demo for note in benchmark(b).demo.notes),
         "Prompts are compact runtime-signal summaries of the failure packets (tiny CPU engineer); "
         "the tokenizer holds recurring program lines as single pieces.",
         "teacher = the template teacher's signal-chosen program (no rerun-based selection).",
         "mean_delta_reward and delta_pass_rate are means over held-out tasks, each paired with its own "
         "no-patch baseline; intervals: paired bootstrap over tasks.",
         "GRPO engineer seed k: the GRPO run under train seed k, its validation-chosen checkpoint.")
COMPARE = (("grpo", "sft"), ("sft", "no_patch"), ("teacher", "no_patch"), ("grpo", "no_patch"),
           ("grpo", "teacher"))


def heldout_batches(workdir: str, rows: list[dict]) -> list:
    """One eval Batch per held-out row: its stored baseline episodes and the row."""
    from hr1_jax.eval.evaluate import Batch
    from hr1_jax.rollout.batches import read_results

    out = []
    for row in rows:
        meta = row["metadata"]
        bench = meta["benchmark"]
        name = meta["batch_tag"].removeprefix(f"{bench}_heldout_")
        episodes = read_results(os.path.join(workdir, "baseline", "heldout", bench, name))
        out.append(Batch(bench, int(meta["seed"]), name, episodes, row))
    return out


def grpo_params(workdir: str, seed: int, which: str) -> tuple[str, int]:
    """(params folder, its step) of one GRPO seed: best_params when validation chose one."""
    run = os.path.join(workdir, "grpo", f"seed{seed}")
    best = os.path.join(run, "best.json")
    if which == "best" and os.path.exists(best):
        with open(best) as f:
            step = json.load(f)["step"]
        if step is not None:
            return os.path.join(run, "best_params"), int(step)
    return os.path.join(run, "final_params"), -1


def engineers(config, workdir: str, trained_steps: dict) -> dict[str, tuple[str, int]]:
    """{engineer key: (params folder, training step)}: sft and grpo_seed<k> for every GRPO seed."""
    out = {"sft": (os.path.join(workdir, "sft", "final_params"), int(trained_steps["sft"]))}
    for s in config.train.demo.grpo_seeds:
        folder, step = grpo_params(workdir, int(s), config.train.demo.grpo_params)
        out[f"grpo_seed{s}"] = (folder, step if step >= 0 else int(trained_steps["grpo"]))
    return out


def _texts(config, engs: dict, rows: list[dict]) -> tuple[dict, dict]:
    """({method: greedy texts}, {engineer: [sampled texts per sample index]})."""
    from hr1_jax.train.demo import _sub
    from hr1_jax.train.engine import Engineer
    from hr1_jax.train.evaluate import engineer_responses
    from hr1_jax.train.teacher.template import TemplateTeacher

    g = config.train.grpo
    greedy = {"teacher": [TemplateTeacher(max_candidates=1).responses(r)[0][1] for r in rows]}
    sampled = {}
    for key, (folder, _) in engs.items():
        eng = Engineer(_sub(config, **{"train.init_checkpoint": folder}), stage=f"eval_{key}")
        eng.sync_sampler(eng.init_params)
        kw = dict(max_new_tokens=g.max_response_tokens)
        greedy[key] = engineer_responses(eng.sampler, eng.tokenizer, rows, **kw)
        sampled[key] = [engineer_responses(eng.sampler, eng.tokenizer, rows, seed=1000 + k, temperature=g.temperature,
                                           top_p=g.top_p, **kw)
                        for k in range(int(config.train.demo.eval_samples))]
    return greedy, sampled


def method_name(key: str) -> str:
    if key.startswith("grpo_seed"):
        return f"GRPO engineer seed {key.removeprefix('grpo_seed')}"
    return {"teacher": "Template teacher", "sft": "SFT engineer"}[key]


def _run(name: str, batches: list, texts: list[str], ctx):
    from hr1_jax.eval.engineers import Proposal
    from hr1_jax.eval.evaluate import evaluate_method

    proposals = {(b.benchmark, b.seed, b.name): Proposal(t) for b, t in zip(batches, texts)}
    return evaluate_method(name, batches, proposals, ctx)


def task_key(pair) -> tuple:
    return (pair.benchmark, pair.seed, pair.task_id)


class Outcomes:
    """Per method: each held-out task's patched reward and pass, and the patch validity, averaged
    over the method's runs (GRPO seeds, samples)."""

    def __init__(self, tau: float, n_rows: int):
        self.tau, self.n_rows = tau, n_rows
        self.runs: dict[str, list] = {}

    def add(self, method: str, result) -> None:
        self.runs.setdefault(method, []).append(result)

    def reward(self, method: str) -> dict:
        if method == "no_patch":
            return {task_key(p): p.baseline_reward for runs in self.runs.values() for r in runs for p in r.pairs}
        return _mean_by_key([{task_key(p): p.patched_reward for p in r.pairs} for r in self.runs[method]])

    def entry(self, method: str) -> dict:
        """The table's numbers: means over held-out tasks, valid-patch rate over rows, batches
        scored in every run (eval_failed ones are missing)."""
        if method == "no_patch":
            return {"mean_delta_reward": 0.0, "delta_pass_rate": 0.0, "valid_rate": 0.0, "n_batches": self.n_rows}
        runs = self.runs[method]
        base = self.reward("no_patch")
        patched = self.reward(method)
        passes = _mean_by_key([{task_key(p): float(p.patched_reward >= self.tau) for p in r.pairs} for r in runs])
        # patched and passes come from _mean_by_key, in sorted key order: the sums do not depend on the process
        return {"mean_delta_reward": float(np.mean([patched[k] - base[k] for k in patched])) if patched else 0.0,
                "delta_pass_rate": float(np.mean([passes[k] - float(base[k] >= self.tau) for k in passes]))
                if passes else 0.0,
                "valid_rate": float(np.mean([sum(p.valid for p in r.patches) / max(1, self.n_rows) for r in runs])),
                "n_batches": self.n_rows - max(r.n_eval_failed for r in runs)}

    def comparisons(self, config, pairs=COMPARE) -> dict:
        """Paired bootstrap, resampling whole tasks (a task's seeds of the target move together)."""
        from hr1_jax.eval.stats import paired_difference

        kw = dict(cluster_of=lambda k: (k[0], k[2]), n_boot=int(config.eval.bootstrap_samples), seed=int(config.seed))
        return {f"{a}_vs_{b}": paired_difference(self.reward(a), self.reward(b), **kw)
                for a, b in pairs if (a == "no_patch" or a in self.runs) and (b == "no_patch" or b in self.runs)}


def _mean_by_key(maps: list[dict]) -> dict:
    """{key: mean over the maps holding it}, keys sorted: a set's order changes from process to
    process (string hashes), and the table's float sums must not."""
    keys = set().union(*maps) if maps else set()
    return {k: float(np.mean([m[k] for m in maps if k in m])) for k in sorted(keys)}


def evaluate(config, workdir: str, ctx, *, given_config: dict, trained_steps: dict) -> dict:
    """The held-out comparison, greedy and sampled; report.html and TensorBoard scalars at each
    engineer's training step; returns the summary's methods, comparisons and details."""
    rows = read_jsonl(os.path.join(workdir, "rows", "rl_heldout.jsonl"))
    batches = heldout_batches(workdir, rows)
    engs = engineers(config, workdir, trained_steps)
    greedy_texts, sampled_texts = _texts(config, engs, rows)
    tau = float(config.rollout.reward_threshold)
    greedy, sampled = Outcomes(tau, len(rows)), Outcomes(tau, len(rows))
    per_engineer = {}
    for key, texts in greedy_texts.items():
        res = _run(method_name(key), batches, texts, ctx)
        per_engineer[key] = res
        greedy.add("grpo" if key.startswith("grpo_seed") else key, res)
    for key, samples in sampled_texts.items():
        for k, texts in enumerate(samples):
            sampled.add("grpo" if key.startswith("grpo_seed") else key,
                        _run(f"{method_name(key)} sample {k}", batches, texts, ctx))
    steps = {method_name(k): (v[1] if k in engs else 0) for k, v in
             {"teacher": ("", 0), **engs}.items()}
    paths = _write_report(config, workdir, per_engineer, given_config, steps)
    _write_samples(workdir, batches, greedy_texts, per_engineer)
    methods = {m: greedy.entry(m) for m in METHODS}
    methods_sampled = {m: sampled.entry(m) for m in ("no_patch", "sft", "grpo")}
    _heldout_scalars(workdir, methods, {"teacher": 0, "sft": engs["sft"][1],
                                        "grpo": max(v[1] for k, v in engs.items() if k != "sft")})
    seeds = {}
    for key in engs:
        if key.startswith("grpo_seed"):
            one = Outcomes(tau, len(rows))
            one.add("grpo", per_engineer[key])
            one.runs["sft"] = greedy.runs["sft"]
            seeds[key.removeprefix("grpo_")] = {"params": os.path.relpath(engs[key][0], workdir),
                                                "step": engs[key][1],
                                                **one.comparisons(config, (("grpo", "sft"),))}
    return {"methods": methods, "comparisons": greedy.comparisons(config),
            "methods_sampled": methods_sampled,
            "comparisons_sampled": sampled.comparisons(config, (("grpo", "sft"), ("sft", "no_patch"),
                                                                ("grpo", "no_patch"))),
            "grpo_seeds": seeds, "report": paths["html"], "per_benchmark": _per_benchmark(paths["json"]),
            "tasks": len(greedy.reward("no_patch")), "eval_samples": int(config.train.demo.eval_samples),
            "eval_failed": {k: r.n_eval_failed for k, r in per_engineer.items()}}


def _write_samples(workdir: str, batches: list, texts: dict, results: dict) -> None:
    samples = {k: [{"batch_tag": b.row["metadata"]["batch_tag"], "valid": p.valid, "reason": p.reason[:200],
                    "response": t[:3000]} for b, p, t in zip(batches, res.patches, texts[k])]
               for k, res in results.items()}
    write_json(os.path.join(workdir, "heldout_samples.json"), samples)   # responses: engineer output


def _write_report(config, workdir: str, results: dict, given_config: dict, steps: dict) -> dict:
    """report.md/html/json and eval_result.json under WORKDIR/report (greedy, one column per
    engineer, GRPO seeds apart); deltas to TensorBoard."""
    from hr1_jax.eval import provenance as prov
    from hr1_jax.eval.report import write_reports
    from hr1_jax.eval.results import EvalResult

    result = EvalResult(title="hr1 demo: held-out comparison (embedded default)", methods=list(results.values()),
                        threshold=float(config.rollout.reward_threshold), notes=list(NOTES))
    report_dir = os.path.join(workdir, "report")
    provenance = prov.collect(workdir, config.train.demo.benchmarks, config=given_config, config_label="demo config")
    paths = write_reports(result, report_dir, n_boot=int(config.eval.bootstrap_samples), seed=int(config.seed),
                          provenance=provenance, tb_dir=os.path.join(workdir, "tensorboard", "eval"), steps=steps)
    with open(os.path.join(report_dir, "eval_result.json"), "w", encoding="utf-8") as f:
        f.write(result.to_json())
    return paths


def _per_benchmark(report_json: str) -> dict:
    """{method name: {benchmark: Δ reward, its interval, tasks}} from the report's paired deltas."""
    with open(report_json, encoding="utf-8") as f:
        deltas = json.load(f)["deltas"]
    out: dict[str, dict] = {}
    for d in deltas:
        out.setdefault(d["method"], {})[d["benchmark"]] = {
            "mean_delta_reward": d["mean_delta"], "ci95": [d["ci_low"], d["ci_high"]], "n_tasks": d["n"]}
    return out


def _heldout_scalars(workdir: str, methods: dict, steps: dict) -> None:
    """Each method's held-out numbers as one point at its engineer's training step (not a curve)."""
    with TensorBoardWriter(os.path.join(workdir, "tensorboard", "eval")) as tb:
        for m, step in steps.items():
            tb.scalars(step, {f"heldout/{m}/{k}": v for k, v in methods[m].items()})


def _ci(c: dict) -> str:
    return f"{c['mean']:+.3f} [{c['ci95'][0]:+.3f}, {c['ci95'][1]:+.3f}]"


def format_table(methods: dict, comparisons: dict, methods_sampled: dict | None = None,
                 comparisons_sampled: dict | None = None) -> str:
    """Greedy columns (and sampled ones when given): Δ reward with its interval, Δ pass, valid, batches."""
    head = f"{'method':10s} {'greedy Δ reward [95% CI]':>28s} {'Δ pass':>7s} {'valid':>6s} {'batches':>8s}"
    if methods_sampled:
        head += f" {'sampled Δ reward [95% CI]':>28s} {'valid':>6s}"
    lines = [head]
    for m in METHODS:
        e = methods[m]
        cell = _ci(comparisons[f"{m}_vs_no_patch"]) if m != "no_patch" else f"{0:+.3f}"
        line = f"{m:10s} {cell:>28s} {e['delta_pass_rate']:>+7.3f} {e['valid_rate']:>6.2f} {e['n_batches']:>8d}"
        if methods_sampled:
            s = methods_sampled.get(m)
            key = f"{m}_vs_no_patch"
            scell = _ci(comparisons_sampled[key]) if key in (comparisons_sampled or {}) else \
                (f"{0:+.3f}" if m == "no_patch" else "-")
            valid = f"{s['valid_rate']:.2f}" if s and m != "no_patch" else "-"
            line += f" {scell:>28s} {valid:>6s}"
        lines.append(line)
    return "\n".join(lines)
