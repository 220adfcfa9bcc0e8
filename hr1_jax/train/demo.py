"""`hr1 demo`: the embedded default end to end on CPU, no downloads.

baseline rollouts (scripted targets; train and held-out task sets of every configured benchmark)
-> failure packets -> RL rows (compact prompts, see `compact.py`) -> SentencePiece tokenizer trained
on the project's own prompts/patches -> template-teacher SFT rows (kept only if valid, fully rerun,
delta >= 0) -> SFT of a tiny Qwen3-style engineer -> online GRPO with real reruns -> held-out
evaluation of no_patch / teacher / sft / grpo on the same held-out batches.

Writes WORKDIR/summary.json (`{"methods": {...}, "wall_seconds": ...}` plus per-stage details),
TensorBoard events under WORKDIR/tensorboard/, and prints the table. Each finished stage leaves
WORKDIR/stages/<stage>.json, so a rerun skips it (SFT and GRPO also resume from their checkpoints).
"""
from __future__ import annotations

import copy
import json
import os
import time

from hr1_jax.data.rows import read_jsonl, rl_row, write_jsonl
from hr1_jax.utils.jsonsafe import write_json
from hr1_jax.utils.logging import log_event
from hr1_jax.utils.tensorboard import TensorBoardWriter

METHODS = ("no_patch", "teacher", "sft", "grpo")


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
            for seed, batch_id, ids in jobs:
                folder = os.path.join(root, f"seed{seed}_batch_{batch_id:03d}")
                status_path = os.path.join(folder, "status.json")
                if os.path.exists(status_path):
                    continue
                episodes = run_batch(pool, bench, split, ids, target=target, seed=seed)
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


def _evaluate(config, workdir: str, ctx) -> dict:
    from hr1_jax.train.engine import Engineer
    from hr1_jax.train.evaluate import engineer_responses, score_responses
    from hr1_jax.train.teacher.template import TemplateTeacher

    rows = read_jsonl(os.path.join(workdir, "rows", "rl_heldout.jsonl"))
    methods: dict[str, dict] = {}
    samples: dict[str, list] = {}
    n = len(rows)
    methods["no_patch"] = {"mean_delta_reward": 0.0, "delta_pass_rate": 0.0, "valid_rate": 0.0, "n_batches": n,
                           "eval_failed": 0}
    # The template teacher as a method: its first (signal-chosen) program, no rerun-based selection.
    teacher = TemplateTeacher(max_candidates=1)
    texts = {"teacher": [teacher.responses(r)[0][1] for r in rows]}
    for method in ("sft", "grpo"):
        cfg = _sub(config, **{"train.init_checkpoint": os.path.join(workdir, method, "final_params")})
        eng = Engineer(cfg, stage=f"eval_{method}")
        eng.sync_sampler(eng.init_params)
        texts[method] = engineer_responses(eng.sampler, eng.tokenizer, rows,
                                           max_new_tokens=config.train.grpo.max_response_tokens)
    benches = [r["metadata"]["benchmark"] for r in rows]
    for method in ("teacher", "sft", "grpo"):
        entry, results = score_responses(rows, texts[method], ctx)
        entry["per_benchmark"] = {
            b: {"mean_delta_reward": sum(res.delta_average_reward for res, x in zip(results, benches) if x == b
                                         and not res.excluded) / max(1, benches.count(b)),
                "n_batches": benches.count(b)} for b in sorted(set(benches))}
        methods[method] = entry
        samples[method] = [{"batch_tag": r["metadata"]["batch_tag"], "status": res.eval_status,
                            "delta": res.delta_average_reward, "reason": res.reason[:200], "response": t[:3000]}
                           for r, res, t in zip(rows, results, texts[method])]
    write_json(os.path.join(workdir, "heldout_samples.json"), samples)  # responses: engineer output
    with TensorBoardWriter(os.path.join(workdir, "tensorboard", "eval")) as tb:
        for i, method in enumerate(METHODS):
            tb.scalars(i, {f"heldout/{k}": v for k, v in methods[method].items() if not isinstance(v, dict)})
            tb.text(i, "heldout/method", method)
    return methods


def format_table(methods: dict) -> str:
    lines = [f"{'method':10s} {'mean_delta_reward':>18s} {'delta_pass_rate':>16s} {'valid_rate':>11s} {'n_batches':>10s}"]
    for m in METHODS:
        e = methods[m]
        lines.append(f"{m:10s} {e['mean_delta_reward']:>+18.4f} {e['delta_pass_rate']:>+16.4f} "
                     f"{e['valid_rate']:>11.2f} {e['n_batches']:>10d}")
    return "\n".join(lines)


def demo_stage(config, workdir: str) -> int:
    from hr1_jax.rollout.reward import RewardContext

    t_start = time.monotonic()
    workdir = os.path.abspath(workdir)
    skipped_s = 0.0   # stages finished by an earlier (interrupted) invocation still count
    tok_path = os.path.join(workdir, "tokenizer", "engineer_spm.model")
    config = _sub(config, **{"model.tokenizer": tok_path,
                             "rollout.cache_dir": os.path.join(workdir, "reward_cache")})
    stages: dict[str, dict] = {}
    with RewardContext(config, cache_dir=os.path.join(workdir, "reward_cache")) as ctx:
        for name, fn in (("baseline", lambda: stage_baseline(config, workdir, ctx.pool)),
                         ("rows", lambda: stage_rows(config, workdir)),
                         ("tokenizer", lambda: stage_tokenizer(config, workdir)),
                         ("teacher", lambda: stage_teacher(config, workdir, ctx)),
                         ("sft", lambda: _sft(config, workdir)),
                         ("grpo", lambda: _grpo(config, workdir, ctx)),
                         ("eval", lambda: _evaluate(config, workdir, ctx))):
            done = _done(workdir, name)
            if done is not None:
                stages[name] = done
                skipped_s += float(done.get("seconds", 0.0))
                log_event("demo", "stage_skipped", name=name)
                continue
            t0 = time.monotonic()
            log_event("demo", "stage_start", name=name)
            stages[name] = _finish(workdir, name, fn(), t0)
    methods = {m: {k: stages["eval"][m][k] for k in ("mean_delta_reward", "delta_pass_rate", "valid_rate",
                                                      "n_batches")} for m in METHODS}
    wall = round(time.monotonic() - t_start + skipped_s, 1)
    summary = {"methods": methods, "wall_seconds": wall,
               "stage_seconds": {k: v.get("seconds") for k, v in stages.items()},
               "details": {"rows": stages["rows"], "teacher": stages["teacher"], "sft": stages["sft"],
                           "per_benchmark": {m: stages["eval"][m].get("per_benchmark") for m in METHODS[1:]},
                           "grpo": {k: v for k, v in stages["grpo"].items() if k != "history"},
                           "eval_failed": {m: stages["eval"][m].get("eval_failed", 0) for m in METHODS}},
               "notes": ["WebShop is the project's substitute environment, not the original WebShop.",
                         "Prompts are compact runtime-signal summaries of the failure packets (tiny CPU engineer); "
                         "the tokenizer holds recurring program lines as single pieces.",
                         "teacher = the template teacher's signal-chosen program (no rerun-based selection)."]}
    write_json(os.path.join(workdir, "summary.json"), summary)
    print(format_table(methods))
    print(f"wall: {wall:.0f} s; summary: {os.path.join(workdir, 'summary.json')}")
    return 0


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
