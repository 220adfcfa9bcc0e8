"""`hr1 demo`: the embedded default end to end on CPU, no downloads.

baseline rollouts (scripted targets; train and held-out task sets of every configured benchmark)
-> failure packets -> RL rows (compact prompts, see `compact.py`) -> SentencePiece tokenizer trained
on the project's own prompts/patches -> template-teacher SFT rows (kept only if valid, fully rerun,
delta >= 0) -> SFT of a tiny Qwen3-style engineer -> online GRPO with real reruns -> held-out
evaluation of no_patch / teacher / sft / grpo on the same held-out batches.

Writes WORKDIR/summary.json (`methods`, `comparisons` {"mean", "ci95", "n"} from a paired
bootstrap clustered by task, `dbbench_backend`, `report`, `wall_seconds`, per-stage details),
WORKDIR/report/report.html (+ .md, .json), TensorBoard events under WORKDIR/tensorboard/, and
prints the table with intervals, the report path, the TensorBoard command and the DBBench backend.
DBBench runs on MariaDB when it is installed (the project's server is started for the run if it
does not answer). Each finished stage leaves WORKDIR/stages/<stage>.json, so a rerun skips it (SFT
and GRPO also resume from their checkpoints).
"""
from __future__ import annotations

import contextlib
import copy
import json
import os
import shutil
import time

from hr1_jax.data.rows import read_jsonl, rl_row, write_jsonl
from hr1_jax.utils.jsonsafe import write_json
from hr1_jax.utils.logging import log_event
from hr1_jax.utils.progress import progress
from hr1_jax.utils.tensorboard import TensorBoardWriter

METHODS = ("no_patch", "teacher", "sft", "grpo")
NOTES = ("WebShop is the project's substitute environment, not the original WebShop.",
         "Prompts are compact runtime-signal summaries of the failure packets (tiny CPU engineer); "
         "the tokenizer holds recurring program lines as single pieces.",
         "teacher = the template teacher's signal-chosen program (no rerun-based selection).",
         "mean_delta_reward and delta_pass_rate are means over held-out tasks, each paired with its own "
         "no-patch baseline; intervals: paired bootstrap over tasks.")


def _done(workdir: str, stage: str) -> dict | None:
    path = os.path.join(workdir, "stages", f"{stage}.json")
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    return None


def _finish(workdir: str, stage: str, info: dict, t0: float) -> dict:
    info = dict(info, seconds=round(time.monotonic() - t0, 1))
    write_json(os.path.join(workdir, "stages", f"{stage}.json"), info)
    log_event("demo", "stage_done", name=stage, **{k: v for k, v in info.items() if not isinstance(v, (dict, list))})
    return info


def _sub(config, **changes):
    cfg = copy.deepcopy(config)
    with cfg.unlocked():
        for key, value in changes.items():
            node = cfg
            parts = key.split(".")
            for p in parts[:-1]:
                node = node[p]
            node[parts[-1]] = value
    return cfg


# ------------------------------------------------------------------------------------- stages

def stage_baseline(config, workdir: str, pool) -> dict:
    """No-patch rollouts of every configured task set, in batches, on one shared worker pool (the
    reward's: workers keep their environments warm). Same layout as `hr1 baseline`."""
    from hr1_jax.config import parse_tasks
    from hr1_jax.rollout.batches import baseline_metadata, run_batch, summarize, write_results

    info = {}
    target = config.target.to_dict()
    for part in ("train", "heldout"):
        for bench in config.train.demo.benchmarks:
            spec = config.train.demo[bench]
            split, tasks = spec[f"{part}_split"], parse_tasks(spec[f"{part}_tasks"])
            root = os.path.join(workdir, "baseline", part, bench)
            batches = [tasks[i:i + spec.batch_size] for i in range(0, len(tasks), spec.batch_size)]
            # train batches may be rolled out under several target seeds (different failures, same tasks)
            seeds = list(spec.train_seeds) if part == "train" else [config.seed]
            jobs = [(seed, b, ids) for seed in seeds for b, ids in enumerate(batches)]
            passed = total = 0
            bar = progress(total=sum(len(ids) for _, _, ids in jobs), desc=f"baseline {part}/{bench}", unit="task")
            for seed, batch_id, ids in jobs:
                folder = os.path.join(root, f"seed{seed}_batch_{batch_id:03d}")
                status_path = os.path.join(folder, "status.json")
                if os.path.exists(status_path):
                    bar.update(len(ids))
                    continue
                episodes = run_batch(pool, bench, split, ids, target=target, seed=seed,
                                     on_result=lambda ep: bar.update(1))
                summary = summarize(bench, episodes, config.rollout.reward_threshold)
                status = {"status": "ok", "batch_id": batch_id, "task_ids": ids, "target": config.target.name}
                try:
                    status["metadata"] = baseline_metadata(bench, split, seed, episodes,
                                                           target_name=config.target.name,
                                                           threshold=config.rollout.reward_threshold)
                except RuntimeError as e:   # infra failure: the batch is unusable for pairing, skip it
                    status.update(status="failed", error=str(e))
                write_results(folder, episodes, summary)
                write_json(status_path, status)
                passed += summary["pass_count"]
                total += len(ids)
            bar.close()
            info[f"{part}/{bench}"] = {"batches": len(jobs), "pass": passed, "tasks": total}
    return info


def _rows_for(config, root: str, bench: str) -> list[dict]:
    from hr1_jax.rollout.cli import batch_packets
    from hr1_jax.train.compact import SYSTEM, compact_user
    from hr1_jax.train.teacher.signals import detect

    rows = []
    for name, status, packet, n_fail in batch_packets(config, root, bench, "*batch_*"):
        if packet is None or n_fail < config.rollout.min_failures:
            continue
        meta = status["metadata"]
        signals = detect(bench, packet)
        user = compact_user(bench, signals, int(meta["baseline_pass"]), len(meta["task_ids"]))
        rows.append(rl_row(SYSTEM, user, dict(meta, batch_tag=f"{bench}_{os.path.basename(root)}_{name}",
                                               batch_id=status["batch_id"], packet_signals=signals,
                                               included_failures=n_fail, prompt_version="hr1-demo-compact-v1",
                                               response_protocol=config.patch_protocol.response_protocol)))
    return rows


def stage_rows(config, workdir: str) -> dict:
    info = {}
    for part in ("train", "heldout"):
        rows = []
        for bench in config.train.demo.benchmarks:
            got = _rows_for(config, os.path.join(workdir, "baseline", part), bench)
            info[f"{part}/{bench}"] = len(got)
            rows += got
        write_jsonl(os.path.join(workdir, "rows", f"rl_{part}.jsonl"), rows)
    return info


def stage_tokenizer(config, workdir: str) -> dict:
    from hr1_jax.models.tokenizer import format_chat, train_sentencepiece
    from hr1_jax.train.compact import code_chunks, program_symbols
    from hr1_jax.train.teacher.template import TemplateTeacher

    rows = read_jsonl(os.path.join(workdir, "rows", "rl_train.jsonl"))
    teacher = TemplateTeacher(max_candidates=config.train.teacher.candidates)
    responses = [text for row in rows for _, text in teacher.responses(row)]
    prompts = [format_chat(row["prompt"]) for row in rows]
    symbols = program_symbols()
    symbols += [c for c in code_chunks(responses) if c not in set(symbols)]
    prefix = os.path.join(workdir, "tokenizer", "engineer_spm")
    train_sentencepiece(prompts + responses, prefix, config.train.demo.vocab_size, extra_symbols=symbols)
    return {"path": prefix + ".model", "corpus_texts": len(prompts) + len(responses), "code_symbols": len(symbols)}


def stage_teacher(config, workdir: str, ctx) -> dict:
    from hr1_jax.train.teacher import build_sft_rows, make_teacher

    rows = read_jsonl(os.path.join(workdir, "rows", "rl_train.jsonl"))
    sft_rows, stats = build_sft_rows(rows, make_teacher(config.train.teacher), ctx,
                                     min_delta=config.train.teacher.min_delta)
    if not sft_rows:
        raise RuntimeError(f"the teacher kept no SFT rows ({stats})")
    write_jsonl(os.path.join(workdir, "rows", "sft_rows.jsonl"), sft_rows)
    return stats


METHOD_NAMES = {"teacher": "Template teacher", "sft": "SFT engineer", "grpo": "GRPO engineer"}


def _heldout_batches(workdir: str, rows: list[dict]) -> list:
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


def _heldout_texts(config, workdir: str, rows: list[dict]) -> dict[str, list[str]]:
    """Each method's response per held-out row: the template teacher's signal-chosen program (no
    rerun-based selection) and the SFT and GRPO engineers' greedy decodes."""
    from hr1_jax.train.engine import Engineer
    from hr1_jax.train.evaluate import engineer_responses
    from hr1_jax.train.teacher.template import TemplateTeacher

    teacher = TemplateTeacher(max_candidates=1)
    texts = {"teacher": [teacher.responses(r)[0][1] for r in rows]}
    for method in ("sft", "grpo"):
        cfg = _sub(config, **{"train.init_checkpoint": os.path.join(workdir, method, "final_params")})
        eng = Engineer(cfg, stage=f"eval_{method}")
        eng.sync_sampler(eng.init_params)
        texts[method] = engineer_responses(eng.sampler, eng.tokenizer, rows,
                                           max_new_tokens=config.train.grpo.max_response_tokens)
    return texts


def _task_key(pair) -> tuple:
    return (pair.benchmark, pair.seed, pair.task_id)


def _method_entry(method, n_rows: int, tau: float) -> dict:
    """The table's numbers for one method: means over held-out tasks (each paired with its own
    no-patch baseline), valid-patch rate over rows, batches scored (eval_failed ones are missing)."""
    deltas = [p.patched_reward - p.baseline_reward for p in method.pairs]
    passes = [(p.patched_reward >= tau) - (p.baseline_reward >= tau) for p in method.pairs]
    return {"mean_delta_reward": sum(deltas) / max(1, len(deltas)),
            "delta_pass_rate": sum(passes) / max(1, len(passes)),
            "valid_rate": sum(p.valid for p in method.patches) / max(1, n_rows),
            "n_batches": n_rows - method.n_eval_failed}


def _comparisons(result, config) -> dict:
    """Paired bootstrap (clustered by task) of each method against no patch, and GRPO against SFT."""
    from hr1_jax.eval.stats import paired_difference

    outcome = {m: {_task_key(p): p.patched_reward for p in res.pairs}
               for m, res in zip(METHOD_NAMES, result.methods)}
    outcome["no_patch"] = {_task_key(p): p.baseline_reward for res in result.methods for p in res.pairs}
    kw = dict(cluster_of=lambda k: (k[0], k[2]), n_boot=int(config.eval.bootstrap_samples), seed=int(config.seed))
    out = {f"{m}_vs_no_patch": paired_difference(outcome[m], outcome["no_patch"], **kw) for m in METHOD_NAMES}
    out["grpo_vs_sft"] = paired_difference(outcome["grpo"], outcome["sft"], **kw)
    return out


def _heldout_result(config, ctx, batches: list, texts: dict[str, list[str]]):
    """Every method's patches rerun on the held-out batches (`hr1 eval`'s run-patch-rerun)."""
    from hr1_jax.eval.engineers import Proposal
    from hr1_jax.eval.evaluate import evaluate_method
    from hr1_jax.eval.results import EvalResult

    result = EvalResult(title="hr1 demo: held-out comparison (embedded default)", methods=[],
                        threshold=float(config.rollout.reward_threshold), notes=list(NOTES))
    for method, name in METHOD_NAMES.items():
        proposals = {(b.benchmark, b.seed, b.name): Proposal(t) for b, t in zip(batches, texts[method])}
        result.methods.append(evaluate_method(name, batches, proposals, ctx))
    return result


def _write_samples(workdir: str, batches: list, texts: dict, result) -> None:
    samples = {m: [{"batch_tag": b.row["metadata"]["batch_tag"], "valid": p.valid, "reason": p.reason[:200],
                    "response": t[:3000]} for b, p, t in zip(batches, res.patches, texts[m])]
               for m, res in zip(METHOD_NAMES, result.methods)}
    write_json(os.path.join(workdir, "heldout_samples.json"), samples)   # responses: engineer output


def _write_report(config, workdir: str, result, given_config: dict, steps: dict) -> dict:
    """report.md/html/json and eval_result.json under WORKDIR/report; deltas to TensorBoard."""
    from hr1_jax.eval import provenance as prov
    from hr1_jax.eval.report import write_reports

    report_dir = os.path.join(workdir, "report")
    provenance = prov.collect(workdir, config.train.demo.benchmarks, config=given_config, config_label="demo config")
    paths = write_reports(result, report_dir, n_boot=int(config.eval.bootstrap_samples), seed=int(config.seed),
                          provenance=provenance, tb_dir=os.path.join(workdir, "tensorboard", "eval"), steps=steps)
    with open(os.path.join(report_dir, "eval_result.json"), "w", encoding="utf-8") as f:
        f.write(result.to_json())
    return paths


def _evaluate(config, workdir: str, ctx, *, given_config: dict, trained_steps: dict[str, int]) -> dict:
    """Held-out comparison of the template teacher and the SFT and GRPO engineers on the same
    held-out batches, with report.html and TensorBoard scalars at each engineer's training step."""
    rows = read_jsonl(os.path.join(workdir, "rows", "rl_heldout.jsonl"))
    batches = _heldout_batches(workdir, rows)
    texts = _heldout_texts(config, workdir, rows)
    result = _heldout_result(config, ctx, batches, texts)
    _write_samples(workdir, batches, texts, result)
    steps = {name: trained_steps.get(m, 0) for m, name in METHOD_NAMES.items()}
    paths = _write_report(config, workdir, result, given_config, steps)
    methods = {"no_patch": {"mean_delta_reward": 0.0, "delta_pass_rate": 0.0, "valid_rate": 0.0,
                            "n_batches": len(rows)}}
    methods.update({m: _method_entry(res, len(rows), result.threshold) for m, res in zip(METHOD_NAMES, result.methods)})
    _heldout_scalars(workdir, methods, steps)
    return {"methods": methods, "comparisons": _comparisons(result, config), "report": paths["html"],
            "per_benchmark": _per_benchmark(paths["json"]),
            "tasks": len({_task_key(p) for res in result.methods for p in res.pairs}),
            "eval_failed": {m: res.n_eval_failed for m, res in zip(METHOD_NAMES, result.methods)}}


def _per_benchmark(report_json: str) -> dict:
    """{method: {benchmark: Δ reward, its interval, tasks}} from the report's paired deltas."""
    with open(report_json, encoding="utf-8") as f:
        deltas = json.load(f)["deltas"]
    key = {name: m for m, name in METHOD_NAMES.items()}
    out: dict[str, dict] = {}
    for d in deltas:
        out.setdefault(key[d["method"]], {})[d["benchmark"]] = {
            "mean_delta_reward": d["mean_delta"], "ci95": [d["ci_low"], d["ci_high"]], "n_tasks": d["n"]}
    return out


def _heldout_scalars(workdir: str, methods: dict, steps: dict) -> None:
    """Each method's held-out numbers as one point at its engineer's training step (not a curve)."""
    with TensorBoardWriter(os.path.join(workdir, "tensorboard", "eval")) as tb:
        for m, name in METHOD_NAMES.items():
            tb.scalars(steps[name], {f"heldout/{m}/{k}": v for k, v in methods[m].items()})


def _ci(c: dict) -> str:
    return f"{c['mean']:+.3f} [{c['ci95'][0]:+.3f}, {c['ci95'][1]:+.3f}]"


def format_table(methods: dict, comparisons: dict) -> str:
    lines = [f"{'method':10s} {'mean_delta_reward [95% CI]':>28s} {'delta_pass_rate':>16s} {'valid_rate':>11s} "
             f"{'n_batches':>10s}"]
    for m in METHODS:
        e = methods[m]
        cell = _ci(comparisons[f"{m}_vs_no_patch"]) if m != "no_patch" else f"{0:+.3f}"
        lines.append(f"{m:10s} {cell:>28s} {e['delta_pass_rate']:>+16.3f} {e['valid_rate']:>11.2f} "
                     f"{e['n_batches']:>10d}")
    return "\n".join(lines)


def _mariadb_installed() -> bool:
    return any(shutil.which(n) or os.path.exists(f"/usr/sbin/{n}") for n in ("mariadbd", "mysqld"))


def _pin_recorded_backend(config, workdir: str):
    """`dbbench.backend=auto` pinned to the backend this workdir's stored baselines recorded:
    reruns only pair with runs on the same backend."""
    from hr1_jax.eval.provenance import dbbench_backends

    recorded = dbbench_backends(os.path.join(workdir, "baseline"))
    if config.dbbench.backend == "auto" and len(recorded) == 1:
        return _sub(config, **{"dbbench.backend": recorded[0]})
    return config


def _no_server_start(config) -> str | None:
    """Why this run does not start the project's MariaDB (what DBBench uses instead), or None."""
    from envs.dbbench import server

    db = config.dbbench
    if "dbbench" not in config.train.demo.benchmarks:
        return "not run"
    if db.backend == "sqlite":
        return "SQLite: dbbench.backend=sqlite, or this workdir's stored baselines ran on it"
    if db.socket or db.host not in ("127.0.0.1", "localhost"):
        return f"the MariaDB server at {db.socket or db.host}"
    if server.is_running():
        return "MariaDB: the project's server, already running"
    if not _mariadb_installed():
        return "SQLite: MariaDB is not installed (launch/setup.sh installs it as root)"
    return None


@contextlib.contextmanager
def dbbench_backend(config, workdir: str):
    """Yields (config, how DBBench's backend was chosen). When MariaDB is installed and the
    project's server (launch/mariadb.sh) does not answer, it is started for this run and stopped
    at the end, as the tests do."""
    from envs.dbbench import server

    config = _pin_recorded_backend(config, workdir)
    reason = _no_server_start(config)
    if reason is not None:
        yield config, reason
        return
    port = int(config.dbbench.port)
    ok, message = server.start(port=port)
    log_event("demo", "mariadb_start", ok=ok, message=message)
    if not ok:
        yield config, f"SQLite: MariaDB did not start ({message.splitlines()[-1] if message else 'no output'})"
        return
    try:
        yield config, "MariaDB: started for this run by launch/mariadb.sh, stopped at the end"
    finally:
        log_event("demo", "mariadb_stop", message=server.stop(port=port)[1])


def _run_stages(config, workdir: str, stages: dict, given_config: dict) -> float:
    """Run (or skip, when done by an earlier invocation) every stage; returns the seconds the
    skipped stages took then."""
    from hr1_jax.rollout.reward import RewardContext

    skipped_s = 0.0
    with RewardContext(config, cache_dir=os.path.join(workdir, "reward_cache")) as ctx:
        for name, fn in (("baseline", lambda: stage_baseline(config, workdir, ctx.pool)),
                         ("rows", lambda: stage_rows(config, workdir)),
                         ("tokenizer", lambda: stage_tokenizer(config, workdir)),
                         ("teacher", lambda: stage_teacher(config, workdir, ctx)),
                         ("sft", lambda: _sft(config, workdir)),
                         ("grpo", lambda: _grpo(config, workdir, ctx)),
                         ("eval", lambda: _evaluate(config, workdir, ctx, given_config=given_config,
                                                    trained_steps={m: stages[m]["steps"] for m in ("sft", "grpo")}))):
            done = _done(workdir, name)
            if done is not None:
                stages[name] = done
                skipped_s += float(done.get("seconds", 0.0))
                log_event("demo", "stage_skipped", name=name)
                continue
            t0 = time.monotonic()
            log_event("demo", "stage_start", name=name)
            stages[name] = _finish(workdir, name, fn(), t0)
    return skipped_s


def _summary(stages: dict, wall: float, backend: str, server: str) -> dict:
    ev = stages["eval"]
    return {"methods": ev["methods"], "comparisons": ev["comparisons"], "wall_seconds": wall,
            "dbbench_backend": backend, "dbbench_server": server, "report": ev["report"],
            "stage_seconds": {k: v.get("seconds") for k, v in stages.items()},
            "details": {"rows": stages["rows"], "teacher": stages["teacher"], "sft": stages["sft"],
                        "heldout_tasks": ev["tasks"], "per_benchmark": ev["per_benchmark"],
                        "grpo": {k: v for k, v in stages["grpo"].items() if k != "history"},
                        "eval_failed": ev["eval_failed"]},
            "notes": list(NOTES)}


def demo_stage(config, workdir: str) -> int:
    from hr1_jax.eval import provenance as prov

    t_start = time.monotonic()
    workdir = os.path.abspath(workdir)
    given = json.loads(config.to_json_best_effort())   # as `hr1 demo` writes config.demo.json
    tok_path = os.path.join(workdir, "tokenizer", "engineer_spm.model")
    config = _sub(config, **{"model.tokenizer": tok_path,
                             "rollout.cache_dir": os.path.join(workdir, "reward_cache")})
    stages: dict[str, dict] = {}
    with dbbench_backend(config, workdir) as (config, server):
        log_event("demo", "dbbench_backend", how=server)
        skipped_s = _run_stages(config, workdir, stages, given)
    backend = " + ".join(prov.dbbench_backends(os.path.join(workdir, "baseline"))) or "not run"
    wall = round(time.monotonic() - t_start + skipped_s, 1)
    summary = _summary(stages, wall, backend, server)
    write_json(os.path.join(workdir, "summary.json"), summary)
    _print_ending(summary, workdir)
    return 0


def _print_ending(summary: dict, workdir: str) -> None:
    c = summary["comparisons"]
    print(format_table(summary["methods"], c))
    print(f"mean_delta_reward: mean over {summary['details']['heldout_tasks']} held-out tasks of patched minus "
          f"no-patch reward; 95% CI: paired bootstrap over tasks")
    print(f"grpo vs sft:      {_ci(c['grpo_vs_sft'])} (n={c['grpo_vs_sft']['n']} task pairs)")
    print(f"sft vs no patch:  {_ci(c['sft_vs_no_patch'])} (n={c['sft_vs_no_patch']['n']} task pairs)")
    print(f"report:      {summary['report']}")
    print(f"TensorBoard: tensorboard --logdir {os.path.join(workdir, 'tensorboard')}   "
          f"(or: bash launch/tensorboard.sh {os.path.join(workdir, 'tensorboard')})")
    print(f"DBBench backend: {summary['dbbench_backend']} ({summary['dbbench_server']})")
    print(f"wall: {summary['wall_seconds']:.0f} s; summary: {os.path.join(workdir, 'summary.json')}")


def _sft(config, workdir: str) -> dict:
    from hr1_jax.train.sft import run_sft

    cfg = _sub(config, **{"train.sft_rows": os.path.join(workdir, "rows", "sft_rows.jsonl")})
    return run_sft(cfg, os.path.join(workdir, "sft"), tb_dir=os.path.join(workdir, "tensorboard", "sft"))


def _grpo(config, workdir: str, ctx) -> dict:
    from hr1_jax.train.grpo import GRPOTrainer

    cfg = _sub(config, **{"train.init_checkpoint": os.path.join(workdir, "sft", "final_params")})
    rows = read_jsonl(os.path.join(workdir, "rows", "rl_train.jsonl"))
    trainer = GRPOTrainer(cfg, os.path.join(workdir, "grpo"), rows=rows,
                          tb_dir=os.path.join(workdir, "tensorboard", "grpo"), reward_ctx=ctx)
    out = trainer.run()
    hist = out["history"]
    first, last = (hist[0], hist[-1]) if hist else ({}, {})
    return {"steps": out["steps"], "first_reward_mean": first.get("reward/mean"),
            "last_reward_mean": last.get("reward/mean"),
            "reward_mean_by_step": [round(h["reward/mean"], 4) for h in hist],
            "valid_rate_by_step": [round(h["reward/valid_patch_rate"], 3) for h in hist]}
