"""`hr1 demo`: the embedded default end to end on CPU, no downloads.

baseline rollouts (scripted targets; train and held-out task sets of every configured benchmark)
-> failure packets -> RL rows (compact prompts, see `compact.py`) -> SentencePiece tokenizer trained
on the project's own prompts/patches -> template-teacher SFT rows (every candidate that is valid,
fully rerun, delta >= 0: coverage) -> SFT of a tiny Qwen3-style engineer -> online GRPO with real
reruns under `train.demo.grpo_seeds`, each choosing its checkpoint on the validation rows ->
held-out evaluation of no_patch / teacher / sft / grpo on the same held-out batches (`demo_eval`).

Writes WORKDIR/summary.json (`methods` and `methods_sampled`, `comparisons` and
`comparisons_sampled` {"mean", "ci95", "n"} from a paired bootstrap clustered by task,
`<benchmark>_backend` / `<benchmark>_server` for each benchmark with services, `report`,
`wall_seconds`, per-stage details),
WORKDIR/report/report.html (+ .md, .json), TensorBoard events under WORKDIR/tensorboard/, and
prints the table with intervals, the report path, the TensorBoard command and each service's backend.
DBBench runs on MariaDB when it is installed (the project's server is started for the run if it
does not answer). Each finished stage leaves WORKDIR/stages/<stage>.json, so a rerun skips it (SFT
and GRPO also resume from their checkpoints). The first run records its config in
WORKDIR/stages/config.json; a rerun with a different config is refused (its finished stages and
checkpoints belong to the other config) and names the keys that differ.
"""
from __future__ import annotations

import copy
import functools
import json
import os
import time

from envs.registry import benchmark, names, services
from hr1_jax.data.rows import read_jsonl, rl_row, write_jsonl
from hr1_jax.errors import InputError
from hr1_jax.utils.jsonsafe import write_json
from hr1_jax.utils.logging import log_event
from hr1_jax.utils.progress import progress

from hr1_jax.train.demo_eval import METHODS, NOTES, _ci, format_table

PARTS = ("train", "val", "heldout")   # GRPO/SFT rows, GRPO's validation rows, the table's rows
# config sections and keys that cannot change a run's results: a rerun may change them
RESULT_NEUTRAL = ("compile_cache", "rollout.worker_max_rss_mb")


def check_workdir_config(config, workdir: str) -> dict:
    """The config as `hr1 demo` records it, once `_check_same_config` accepts it for `workdir`
    (the CLI runs this before it writes config.demo.json, so a refused rerun leaves that file alone)."""
    given = json.loads(config.to_json_best_effort())
    _check_same_config(os.path.abspath(workdir), given)
    return given


def _check_same_config(workdir: str, given: dict) -> None:
    """Record the config of the workdir's first run, or refuse a rerun under another one: skipped
    stages would report the old config's results, and SFT / GRPO would resume its checkpoints."""
    path = os.path.join(workdir, "stages", "config.json")
    if not os.path.exists(path):
        write_json(path, given)
        return
    with open(path) as f:
        recorded = json.load(f)
    keys = _differing_keys(_without(recorded, RESULT_NEUTRAL), _without(given, RESULT_NEUTRAL))   # sorted
    if keys:
        shown = ", ".join(keys[:8]) + (f" (+{len(keys) - 8} more)" if len(keys) > 8 else "")
        raise InputError(f"{workdir} holds a demo run with another config (differs in: {shown}); "
                         "rerun with its config, or give a new --workdir")


def _without(cfg: dict, dotted: tuple[str, ...]) -> dict:
    """`cfg` less the dotted keys (a copy where one is removed)."""
    out = dict(cfg)
    for key in dotted:
        head, _, rest = key.partition(".")
        if rest and isinstance(out.get(head), dict):
            out[head] = _without(out[head], (rest,))
        elif not rest:
            out.pop(head, None)
    return out


def _differing_keys(a, b, prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two nested dicts (a key missing on one side counts)."""
    if not (isinstance(a, dict) and isinstance(b, dict)):
        return [] if a == b else [prefix or "(root)"]
    out = []
    for key in sorted(set(a) | set(b)):
        name = f"{prefix}.{key}" if prefix else str(key)
        out += _differing_keys(a.get(key), b.get(key), name) if key in a and key in b else [name]
    return out


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
    from hr1_jax.rollout.batches import store_baseline_batch

    info = {}
    target = config.target.to_dict()
    for part in PARTS:
        for bench in config.train.demo.benchmarks:
            spec = config.train.demo[bench]
            if not spec[f"{part}_tasks"]:
                continue
            split, tasks = spec[f"{part}_split"], parse_tasks(spec[f"{part}_tasks"])
            root = os.path.join(workdir, "baseline", part, bench)
            batches = [tasks[i:i + spec.batch_size] for i in range(0, len(tasks), spec.batch_size)]
            # batches may be rolled out under several target seeds (different failures, same tasks)
            seeds = list(spec[f"{part}_seeds"])
            jobs = [(seed, b, ids) for seed in seeds for b, ids in enumerate(batches)]
            passed = total = 0
            bar = progress(total=sum(len(ids) for _, _, ids in jobs), desc=f"baseline {part}/{bench}", unit="task")
            for seed, batch_id, ids in jobs:
                folder = os.path.join(root, f"seed{seed}_batch_{batch_id:03d}")
                status_path = os.path.join(folder, "status.json")
                if os.path.exists(status_path):
                    bar.update(len(ids))
                    continue
                # an infra failure leaves the batch "failed": unusable for pairing, the rows skip it
                _, summary = store_baseline_batch(pool, folder, bench, split, ids, batch_id, target=target, seed=seed,
                                                  threshold=config.rollout.reward_threshold,
                                                  on_result=lambda ep: bar.update(1))
                passed += summary["pass_count"]
                total += len(ids)
            bar.close()
            info[f"{part}/{bench}"] = {"batches": len(jobs), "pass": passed, "tasks": total}
    return info


def _compact_row(config, bench: str, batch, part: str) -> dict:
    """The demo's row of a stored batch of `part`: the compact prompt of its packet's teacher signals."""
    from hr1_jax.train.compact import SYSTEM, compact_user
    from hr1_jax.train.teacher.signals import detect

    meta = batch.metadata
    signals = detect(bench, batch.packet)
    user = compact_user(bench, signals, int(meta["baseline_pass"]), len(meta["task_ids"]))
    tag = f"{bench}_{part}_{batch.name}"
    return rl_row(SYSTEM, user, dict(meta, batch_tag=tag, batch_id=batch.status["batch_id"], packet_signals=signals,
                                     included_failures=batch.n_failures, prompt_version="hr1-demo-compact-v1",
                                     response_protocol=config.patch_protocol.response_protocol))


def stage_rows(config, workdir: str) -> dict:
    from hr1_jax.rollout.rows import build_rows

    info = {}
    for part in PARTS:
        rows = []
        for bench in config.train.demo.benchmarks:
            if not config.train.demo[bench][f"{part}_tasks"]:
                continue
            got, _ = build_rows(config, os.path.join(workdir, "baseline", part), bench, pattern="*batch_*",
                                make_row=functools.partial(_compact_row, part=part))
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
                                     min_delta=config.train.teacher.min_delta, keep=config.train.teacher.keep)
    if not sft_rows:
        raise RuntimeError(f"the teacher kept no SFT rows ({stats})")
    write_jsonl(os.path.join(workdir, "rows", "sft_rows.jsonl"), sft_rows)
    return stats


def _run_stages(config, workdir: str, stages: dict, given_config: dict) -> float:
    """Run (or skip, when done by an earlier invocation) every stage; returns the seconds the
    skipped stages took then."""
    from hr1_jax.rollout.reward import RewardContext
    from hr1_jax.train.demo_eval import evaluate

    skipped_s = 0.0
    with RewardContext(config, cache_dir=os.path.join(workdir, "reward_cache")) as ctx:
        for name, fn in (("baseline", lambda: stage_baseline(config, workdir, ctx.pool)),
                         ("rows", lambda: stage_rows(config, workdir)),
                         ("tokenizer", lambda: stage_tokenizer(config, workdir)),
                         ("teacher", lambda: stage_teacher(config, workdir, ctx)),
                         ("sft", lambda: _sft(config, workdir)),
                         ("grpo", lambda: _grpo(config, workdir, ctx)),
                         ("eval", lambda: evaluate(config, workdir, ctx, given_config=given_config,
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


def _summary(config, stages: dict, wall: float, backends: dict) -> dict:
    ev = stages["eval"]
    return {"methods": ev["methods"], "comparisons": ev["comparisons"], "methods_sampled": ev["methods_sampled"],
            "comparisons_sampled": ev["comparisons_sampled"], "wall_seconds": wall, **backends, "report": ev["report"],
            "stage_seconds": {k: v.get("seconds") for k, v in stages.items()},
            "details": {"rows": stages["rows"], "teacher": stages["teacher"], "sft": stages["sft"],
                        "heldout_tasks": ev["tasks"], "heldout_batches": ev["methods"]["no_patch"]["n_batches"],
                        "eval_samples": ev["eval_samples"], "per_benchmark": ev["per_benchmark"],
                        "grpo": stages["grpo"], "grpo_seeds": ev["grpo_seeds"],
                        "eval_failed": ev["eval_failed"]},
            "sampled_temperature": float(config.train.grpo.temperature), "notes": list(NOTES)}


def demo_stage(config, workdir: str) -> int:
    from hr1_jax.eval import provenance as prov

    t_start = time.monotonic()
    workdir = os.path.abspath(workdir)
    given = check_workdir_config(config, workdir)
    tok_path = os.path.join(workdir, "tokenizer", "engineer_spm.model")
    config = _sub(config, **{"model.tokenizer": tok_path,
                             "rollout.cache_dir": os.path.join(workdir, "reward_cache")})
    stages: dict[str, dict] = {}
    baseline = os.path.join(workdir, "baseline")

    def recorded(bench: str, key: str) -> list[str]:
        return prov.recorded_values(baseline, bench, key)

    # what the demo's benchmarks need started for the run (DBBench: the project's MariaDB)
    with services(config.train.demo.benchmarks, config, recorded) as (config, how):
        for bench, server in how.items():
            log_event("demo", f"{bench}_backend", how=server)
        skipped_s = _run_stages(config, workdir, stages, given)
    backends = {}
    for bench, server in how.items():
        backends.update({f"{bench}_backend": " + ".join(recorded(bench, "backend")) or "not run",
                         f"{bench}_server": server})
    wall = round(time.monotonic() - t_start + skipped_s, 1)
    summary = _summary(config, stages, wall, backends)
    write_json(os.path.join(workdir, "summary.json"), summary)
    _print_ending(summary, workdir)
    return 0


def _print_ending(summary: dict, workdir: str) -> None:
    c, cs, d = summary["comparisons"], summary["comparisons_sampled"], summary["details"]
    print(format_table(summary["methods"], c, summary["methods_sampled"], cs))
    print(f"Δ reward: mean over {d['heldout_tasks']} held-out tasks ({d['heldout_batches']} batches) of patched "
          f"minus no-patch reward; greedy decoding, and sampled (T={summary['sampled_temperature']}, "
          f"{d['eval_samples']} samples per batch); 95% CI: paired bootstrap over tasks; "
          f"grpo = mean over {len(d['grpo_seeds'])} GRPO seeds")
    for name in ("grpo_vs_sft", "sft_vs_no_patch"):
        label = name.replace("_vs_", " vs ").replace("no_patch", "no patch") + ":"
        print(f"{label:17s} greedy {_ci(c[name])}, sampled {_ci(cs[name])} (n={c[name]['n']} task pairs)")
    for seed, one in d["grpo_seeds"].items():
        print(f"  grpo {seed} ({one['params']}, step {one['step']}) vs sft, greedy: {_ci(one['grpo_vs_sft'])}")
    print(f"report:      {summary['report']}")
    print(f"TensorBoard: tensorboard --logdir {os.path.join(workdir, 'tensorboard')}   "
          f"(or: bash launch/tensorboard.sh {os.path.join(workdir, 'tensorboard')})")
    for bench in (b for b in names() if f"{b}_server" in summary):
        print(f"{benchmark(bench).report.title} backend: {summary[bench + '_backend']} ({summary[bench + '_server']})")
    print(f"wall: {summary['wall_seconds']:.0f} s; summary: {os.path.join(workdir, 'summary.json')}")


def _sft(config, workdir: str) -> dict:
    from hr1_jax.train.sft import run_sft

    cfg = _sub(config, **{"train.sft_rows": os.path.join(workdir, "rows", "sft_rows.jsonl")})
    return run_sft(cfg, os.path.join(workdir, "sft"), tb_dir=os.path.join(workdir, "tensorboard", "sft"))


def _grpo(config, workdir: str, ctx) -> dict:
    """One GRPO run per `train.demo.grpo_seeds` seed from the same SFT engineer, each in
    WORKDIR/grpo/seed<k> (resumable), validating on the fixed validation rows."""
    from hr1_jax.train.grpo import GRPOTrainer

    rows = read_jsonl(os.path.join(workdir, "rows", "rl_train.jsonl"))
    val_path = os.path.join(workdir, "rows", "rl_val.jsonl")
    val_rows = read_jsonl(val_path) if os.path.exists(val_path) else []
    out = {"steps": int(config.train.grpo.num_steps), "validation_rows": len(val_rows), "seeds": {}}
    for seed in config.train.demo.grpo_seeds:
        cfg = _sub(config, **{"train.init_checkpoint": os.path.join(workdir, "sft", "final_params"),
                              "train.seed": int(seed)})
        trainer = GRPOTrainer(cfg, os.path.join(workdir, "grpo", f"seed{seed}"), rows=rows, val_rows=val_rows,
                              tb_dir=os.path.join(workdir, "tensorboard", f"grpo_seed{seed}"), reward_ctx=ctx)
        res = trainer.run()
        out["steps"] = res["steps"]
        out["seeds"][str(seed)] = _grpo_curves(res)
    return out


def _grpo_curves(res: dict) -> dict:
    """What the summary keeps of one GRPO run: the best step and the per-step curves."""
    hist = res["history"]
    curve = lambda key, nd: [round(h[key], nd) for h in hist if key in h]
    return {"best": res["best"], "first_reward_mean": hist[0]["reward/mean"] if hist else None,
            "last_reward_mean": hist[-1]["reward/mean"] if hist else None,
            "reward_mean_by_step": curve("reward/mean", 4),
            "reward_vs_start_greedy_by_step": curve("reward/vs_start_greedy", 4),
            "kept_reward_by_step": curve("reward/kept_mean", 4),
            "valid_rate_by_step": curve("reward/valid_patch_rate", 3),
            "val_reward": {h["step"]: round(h["val/reward"], 4) for h in hist if "val/reward" in h}}
