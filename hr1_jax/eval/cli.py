"""`hr1 eval --config=... --config.eval.engineer=CKPT_OR_ENDPOINT --workdir=W`.

Per target seed and benchmark: baseline batches (stored under W/baseline/seed<S>, reused on resume)
→ every method proposes one patch per failing batch → paired reruns → W/report.md, W/report.html,
W/report.json and W/eval_result.json, patches as TensorBoard text under W/tensorboard.
"""
from __future__ import annotations

import os

from hr1_jax.config import parse_tasks
from hr1_jax.eval.config import parse_ints
from hr1_jax.utils.logging import log_event


def _baselines(config, workdir: str, seeds: list[int], benches: list[str]) -> dict:
    """{(bench, seed): [Batch]} — runs `hr1 baseline` for what is not stored yet."""
    from hr1_jax.eval.evaluate import load_batches
    from hr1_jax.rollout.cli import baseline_stage

    out = {}
    for seed in seeds:
        root = os.path.join(workdir, "baseline", f"seed{seed}")
        for bench in benches:
            c = config.copy_and_resolve_references()
            c.benchmark, c.split, c.tasks, c.seed = bench, config.eval.split[bench], config.eval.tasks, seed
            c.rollout.baseline_dir = root
            if baseline_stage(c, workdir) != 0:
                log_event("eval", "baseline_incomplete", benchmark=bench, seed=seed)
            out[(bench, seed)] = load_batches(c, root, bench, seed)
    return out


def _engineers(config) -> list:
    from hr1_jax.eval.engineers import TeacherEngineer, make_engineer, self_refine_engineer

    e = config.eval
    engineers = []
    if e.engineer:
        eng = make_engineer(config, e.engineer)
        if e.engineer_name:
            eng.name = e.engineer_name
        engineers.append(eng)
    if e.compare_teacher and e.engineer != "teacher":
        engineers.append(TeacherEngineer())
    for spec in [s for s in e.fixed_editors.split(",") if s.strip()]:
        engineers.append(make_engineer(config, spec.strip()))
    if e.self_refine:
        engineers.append(self_refine_engineer(config.patch_protocol.response_protocol))
    return engineers


def run_eval(config, workdir: str) -> "EvalResult":
    from hr1_jax.eval.evaluate import best_of_n, evaluate_method, heldout_transfer, pipeline_episodes_per_task, propose
    from hr1_jax.eval.results import EvalResult
    from hr1_jax.rollout.reward import RewardContext

    e = config.eval
    seeds, benches = parse_ints(e.seeds, "eval.seeds"), [b for b in e.benchmarks.split(",") if b]
    n_tasks = len(parse_tasks(e.tasks))
    batches_by_key = _baselines(config, workdir, seeds, benches)
    batches = [b for key in sorted(batches_by_key) for b in batches_by_key[key]]
    engineers = _engineers(config)
    result = EvalResult(
        title="hr1-jax evaluation: fixed-batch run-patch-rerun",
        notes=[f"target: {config.target.kind} {config.target.name}; splits {e.split.to_dict()}, tasks {e.tasks} per benchmark "
               f"({n_tasks}), target seeds {seeds}",
               "invalid patch = no patch (delta 0, counted); infrastructure failures are reported separately",
               "ALFWorld test split: 432 of the 500 Harness-R1 test games are available",
               "WebShop is the project's self-contained substitute environment"],
        methods=[])
    with RewardContext(config, cache_dir=config.rollout.cache_dir or os.path.join(workdir, "reward_cache")) as ctx:
        for eng in engineers:
            slug = eng.name.lower().replace(" ", "_").replace("/", "_")
            proposals = propose(eng, batches, saved_dir=os.path.join(e.patch_source, slug) if e.patch_source else "",
                                save_dir=os.path.join(workdir, "responses", slug))
            if e.generate_only:
                continue
            method = evaluate_method(eng.name, batches, proposals, ctx)
            result.methods.append(method)
            log_event("eval", "method", name=eng.name, pairs=len(method.pairs), invalid=method.n_invalid,
                      eval_failed=method.n_eval_failed)
        if e.generate_only:
            print(f"generate-only: responses under {os.path.join(workdir, 'responses')}")
            return result
        if e.best_of_n and result.methods:
            n = max(1, round(pipeline_episodes_per_task(result.methods[0], batches)))
            result.methods.append(best_of_n(batches, ctx, n, temperature=e.best_of_n_temperature))
        if e.heldout_evidence > 0 and engineers:
            eng = engineers[0]
            for ev_seed in parse_ints(e.heldout_seeds, "eval.heldout_seeds"):
                for seed in seeds:
                    per_bench = {b: batches_by_key[(b, seed)] for b in benches if batches_by_key.get((b, seed))}
                    result.methods.append(heldout_transfer(
                        f"{eng.name} held-out (evidence seed {ev_seed})", eng, per_bench, ctx,
                        evidence_k=e.heldout_evidence, evidence_seed=ev_seed))
    return result


def eval_stage(config, workdir: str) -> int:
    from hr1_jax.eval.report import write_reports
    from hr1_jax.utils.tensorboard import TensorBoardWriter

    result = run_eval(config, workdir)
    if config.eval.generate_only:
        return 0
    with open(os.path.join(workdir, "eval_result.json"), "w") as f:
        f.write(result.to_json())
    paths = write_reports(result, workdir, n_boot=config.eval.bootstrap_samples, seed=config.seed)
    with TensorBoardWriter(os.path.join(workdir, "tensorboard")) as tb:
        for i, m in enumerate(result.methods):
            for p in m.patches:
                body = "\n\n".join(f"**{a['hook']}**\n\n```python\n{a['code']}\n```" for a in (p.patch or {}).get("actions", []))
                tb.text(i, f"eval/{m.name}/{p.benchmark}/{p.batch}/seed{p.seed}",
                        f"{'valid' if p.valid else 'invalid: ' + p.reason}\n\n{p.think}\n\n{body}")
    with open(paths["md"]) as f:
        print("".join(f.readlines()[:40]))
    print(f"reports: {paths['md']} {paths['html']}")
    return 1 if any(m.n_eval_failed for m in result.methods) else 0
