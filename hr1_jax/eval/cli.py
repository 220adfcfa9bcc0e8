"""`hr1 eval --config=... --config.eval.engineer=CKPT_OR_ENDPOINT --workdir=W`.

Per target seed and benchmark: baseline batches (stored under W/baseline/seed<S>, reused on resume)
→ every method proposes one patch per failing batch → paired reruns (→ with `eval.ablation`, each
patch again once per lifecycle site disabled) → W/report.md, W/report.html, W/main_table.csv,
W/report.json and W/eval_result.json, patches as TensorBoard text under W/tensorboard.

`eval.targets` runs the whole evaluation once per target under W/targets/<key> and adds a
cross-target table to W/report.md; `eval.merge_from` merges finished runs (e.g. one per benchmark)
into one report without running anything.
"""
from __future__ import annotations

import os

from envs.registry import benchmark, names
from hr1_jax.eval.config import parse_ints
from hr1_jax.utils.logging import log_event


def _baselines(config, workdir: str, seeds: list[int], benches: list[str], tasks: dict[str, str]) -> dict:
    """{(bench, seed): [Batch]} — runs `hr1 baseline` for what is not stored yet."""
    from hr1_jax.eval.evaluate import load_batches
    from hr1_jax.rollout.cli import baseline_stage

    out = {}
    for seed in seeds:
        root = os.path.join(workdir, "baseline", f"seed{seed}")
        for bench in benches:
            c = config.copy_and_resolve_references()
            c.benchmark, c.split, c.tasks, c.seed = bench, config.eval.split[bench], tasks[bench], seed
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
        engineers.append(make_engineer(config, e.engineer, name=e.engineer_name))
    if e.compare_teacher and e.engineer != "teacher":
        engineers.append(TeacherEngineer())
    for spec in [s for s in e.fixed_editors.split(",") if s.strip()]:
        engineers.append(make_engineer(config, spec.strip()))
    for key, ed in sorted(e.editors.items()):
        engineers.append(make_engineer(config, ed.spec, name=ed.get("name") or key, model=ed.get("model", ""),
                                       api_key_env=ed.get("api_key_env") or "OPENAI_API_KEY"))
    names = [eng.name for eng in engineers]
    if len(set(names)) != len(names):
        from hr1_jax.errors import InputError
        raise InputError(f"two evaluated methods share a name ({names}): give them distinct names")
    if e.self_refine:
        engineers.append(self_refine_engineer(config.patch_protocol.response_protocol))
    return engineers


def _slug(name: str) -> str:
    return name.lower().replace(" ", "_").replace("/", "_")


def run_eval(config, workdir: str) -> "EvalResult":
    from hr1_jax.eval.engineers import FixedPatchEngineer
    from hr1_jax.eval.evaluate import (ablate_method, best_of_n, evaluate_method, heldout_transfer,
                                       pipeline_episodes_per_task, propose)
    from hr1_jax.eval.results import EvalResult
    from hr1_jax.eval.tasks import resolve_all
    from hr1_jax.patch.runner import HOOK_NAMES
    from hr1_jax.rollout.reward import RewardContext

    e = config.eval
    seeds, benches = parse_ints(e.seeds, "eval.seeds"), [b for b in e.benchmarks.split(",") if b]
    tasks = resolve_all(config, benches)   # out-of-range ids fail here, before any episode runs
    engineers = _engineers(config)
    batches_by_key = _baselines(config, workdir, seeds, benches, tasks)
    batches = [b for key in sorted(batches_by_key) for b in batches_by_key[key]]
    result = EvalResult(
        title="hr1-jax evaluation: fixed-batch run-patch-rerun",
        notes=[f"target: {config.target.kind} {config.target.name}; splits "
               f"{ {b: e.split[b] for b in benches} }, tasks {tasks}, target seeds {seeds}",
               "invalid patch = no patch (delta 0, counted); infrastructure failures are reported separately",
               *(note for b in names() for note in benchmark(b).eval_notes)],
        methods=[])
    with RewardContext(config, cache_dir=config.rollout.cache_dir or os.path.join(workdir, "reward_cache")) as ctx:
        for eng in engineers:
            proposals = propose(eng, batches, saved_dir=os.path.join(e.patch_source, _slug(eng.name)) if e.patch_source else "",
                                save_dir=os.path.join(workdir, "responses", _slug(eng.name)))
            if e.generate_only:
                continue
            method = evaluate_method(eng.name, batches, proposals, ctx)
            result.methods.append(method)
            log_event("eval", "method", name=eng.name, pairs=len(method.pairs), invalid=method.n_invalid,
                      eval_failed=method.n_eval_failed)
        if e.generate_only:
            print(f"generate-only: responses under {os.path.join(workdir, 'responses')}")
            return result
        if e.ablation:
            for full in [m for m in result.methods if m.patches]:
                for site in HOOK_NAMES:
                    result.methods.append(ablate_method(full, batches, ctx, site))
        if e.best_of_n and result.methods:
            n = max(1, round(pipeline_episodes_per_task(result.methods[0], batches)))
            result.methods.append(best_of_n(batches, ctx, n, temperature=e.best_of_n_temperature))
        if e.heldout_evidence > 0:
            # every engineer that writes a patch from evidence (a fixed patch reads none)
            for eng in [x for x in engineers if not isinstance(x, FixedPatchEngineer)]:
                for ev_seed in parse_ints(e.heldout_seeds, "eval.heldout_seeds"):
                    for seed in seeds:
                        per_bench = {b: batches_by_key[(b, seed)] for b in benches if batches_by_key.get((b, seed))}
                        result.methods.append(heldout_transfer(
                            f"{eng.name} held-out (evidence seed {ev_seed})", eng, per_bench, ctx,
                            evidence_k=e.heldout_evidence, evidence_seed=ev_seed))
    return result


def _write(result, config, workdir: str) -> dict:
    from hr1_jax.eval.report import write_reports
    from hr1_jax.utils.tensorboard import TensorBoardWriter

    os.makedirs(workdir, exist_ok=True)
    with open(os.path.join(workdir, "eval_result.json"), "w") as f:
        f.write(result.to_json())
    paths = write_reports(result, workdir, n_boot=config.eval.bootstrap_samples, seed=config.seed)
    with TensorBoardWriter(os.path.join(workdir, "tensorboard")) as tb:
        for i, m in enumerate(result.methods):
            for p in m.patches:
                body = "\n\n".join(f"**{a['hook']}**\n\n```python\n{a['code']}\n```" for a in (p.patch or {}).get("actions", []))
                tb.text(i, f"eval/{m.name}/{p.benchmark}/{p.batch}/seed{p.seed}",
                        f"{'valid' if p.valid else 'invalid: ' + p.reason}\n\n{p.think}\n\n{body}")
    return paths


def _print(paths: dict) -> None:
    with open(paths["md"]) as f:
        print("".join(f.readlines()[:40]))
    print(f"reports: {paths['md']} {paths['html']} {paths['csv']}")


def _target_config(config, key: str):
    c = config.copy_and_resolve_references()
    c.target.update(config.eval.targets[key].to_dict())
    return c


def eval_stage(config, workdir: str) -> int:
    from hr1_jax.eval.merge import cross_target_report, merge_results

    e = config.eval
    if e.merge_from:
        result = merge_results([d for d in e.merge_from.split(",") if d.strip()])
        _print(_write(result, config, workdir))
        return 0
    if len(e.targets):
        failed, results = 0, {}
        for key in sorted(e.targets.keys()):
            c = _target_config(config, key)
            sub = os.path.join(workdir, "targets", key)
            os.makedirs(sub, exist_ok=True)
            with open(os.path.join(sub, "config.eval.json"), "w") as f:   # this target's provenance
                f.write(c.to_json_best_effort(indent=2))
            results[key] = run_eval(c, sub)
            if not e.generate_only:
                _write(results[key], c, sub)
                failed += any(m.n_eval_failed for m in results[key].methods)
        if not e.generate_only:
            print(cross_target_report(results, workdir, threshold=results[next(iter(results))].threshold))
        return 1 if failed else 0
    result = run_eval(config, workdir)
    if e.generate_only:
        return 0
    _print(_write(result, config, workdir))
    return 1 if any(m.n_eval_failed for m in result.methods) else 0
