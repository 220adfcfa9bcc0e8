"""Stages of the rollout service:

  hr1 rollout     one batch (config.benchmark / split / tasks, optional config.patch) -> results.jsonl,
                  summary.json and a printed table
  hr1 baseline    the target without patch over config.tasks in batches of rollout.batch_size ->
                  <baseline_dir>/<benchmark>/batch_NNN/{results.jsonl, summary.json, status.json}
  hr1 build-rows  baselines -> packets -> RL prompt rows (+ benchmark-pure grouped file) under <workdir>/rows
  hr1 reward      --row ROWS.jsonl [--row_index N] --response FILE -> the reward of one response
"""
from __future__ import annotations

import json
import os
import sys

from absl import flags

from hr1_jax.config import parse_tasks
from hr1_jax.errors import InputError, read_input_text
from hr1_jax.utils.jsonsafe import write_json
from hr1_jax.utils.logging import log_event

# `hr1 reward` only (absl flags are defined per module, so the other stages here accept them too)
flags.DEFINE_string("row", None, "JSONL file of RL rows (from hr1 build-rows: WORKDIR/rows/rl_*.jsonl)")
flags.DEFINE_integer("row_index", 0, "which row of --row (0-based)")
flags.DEFINE_string("response", None, "file holding the engineer's response text")
FLAGS = flags.FLAGS


def _target(config) -> dict:
    return config.target.to_dict()


def _patch_json(text: str, path: str):
    """The JSON value of a patch file, or None for a raw engineer response (text not opening a
    JSON object): a broken JSON object is reported as such, not parsed as a response."""
    if not text.lstrip().startswith("{"):
        return None
    try:
        return json.loads(text)
    except ValueError as e:
        raise InputError(f"patch file {path} is not valid JSON: {e}") from None


def load_patch(path: str, benchmark: str, config) -> dict:
    """A patch file: normalised-patch JSON, or a raw engineer response (parsed with the protocol).
    A missing file, broken JSON or an unusable patch is an InputError naming the file."""
    from hr1_jax.patch import PatchError, normalize_options, normalize_patch
    from hr1_jax.rollout.reward import prepare_patch
    text = read_input_text(path, "patch file")
    raw = _patch_json(text, path)
    if isinstance(raw, dict) and "actions" in raw:
        try:
            return normalize_patch(raw, benchmark, **normalize_options(config.patch_protocol))
        except PatchError as e:
            raise InputError(f"patch file {path}: {e.code}: {e.message}") from e
    patch, status, reason = prepare_patch(text, benchmark, config)
    if patch is None:
        raise InputError(f"patch file {path} holds no usable patch (neither patch JSON with \"actions\" "
                         f"nor a valid engineer response): {status}: {reason}")
    return patch


def rollout_stage(config, workdir: str) -> int:
    """One batch: the target runs config.benchmark / config.split / config.tasks (with the patch in
    config.patch if set: patch JSON or a raw engineer response) -> WORKDIR/results.jsonl,
    WORKDIR/summary.json and a printed table. Exit 1 if an episode hit an infrastructure error."""
    from hr1_jax.rollout.batches import format_table, run_batch, summarize, write_results
    from hr1_jax.rollout.ray_backend import make_pool
    from hr1_jax.utils.progress import progress

    bench, split, tasks = config.benchmark, config.split, parse_tasks(config.tasks)
    patch = load_patch(config.patch, bench, config) if config.patch else None
    bar = progress(total=len(tasks), desc=f"rollout {bench}")
    with make_pool(config) as pool:
        episodes = run_batch(pool, bench, split, tasks, target=_target(config), seed=config.seed, patch=patch,
                             on_result=lambda ep: bar.update(1))
        stats = dict(pool.stats)
    bar.close()
    summary = summarize(bench, episodes, config.rollout.reward_threshold)
    write_results(workdir, episodes, summary, {"split": split, "tasks": tasks, "patched": patch is not None,
                                               "target": config.target.name, "pool": stats})
    print(format_table(episodes, summary))
    log_event("rollout", "summary", **{k: v for k, v in summary.items() if k != "statuses"})
    return 1 if summary["infra_errors"] else 0


def baseline_root(config, workdir: str) -> str:
    return config.rollout.baseline_dir or os.path.join(workdir, "baseline")


def baseline_stage(config, workdir: str) -> int:
    """The target without a patch over config.tasks, in batches of config.rollout.batch_size ->
    <rollout.baseline_dir or WORKDIR/baseline>/<benchmark>/batch_NNN/{results.jsonl, summary.json,
    status.json}. Finished batches are skipped on a rerun."""
    from hr1_jax.rollout.batches import store_baseline_batch
    from hr1_jax.rollout.ray_backend import make_pool
    from hr1_jax.utils.progress import progress

    bench, split, tasks = config.benchmark, config.split, parse_tasks(config.tasks)
    size = config.rollout.batch_size
    batches = [tasks[i:i + size] for i in range(0, len(tasks), size)]
    root = os.path.join(baseline_root(config, workdir), bench)
    failed = 0
    bar = progress(total=len(tasks), desc=f"baseline {bench}")
    with make_pool(config) as pool:
        for batch_id, ids in enumerate(batches):
            folder = os.path.join(root, f"batch_{batch_id:03d}")
            status_path = os.path.join(folder, "status.json")
            if os.path.exists(status_path):
                with open(status_path, encoding="utf-8") as f:
                    old = json.load(f)
                if old.get("status") == "ok" and old.get("task_ids") == ids and old.get("target") == config.target.name:
                    bar.update(len(ids))
                    continue  # resume: this batch is done
            status, summary = store_baseline_batch(pool, folder, bench, split, ids, batch_id, target=_target(config),
                                                   seed=config.seed, threshold=config.rollout.reward_threshold,
                                                   on_result=lambda ep: bar.update(1))
            failed += status["status"] != "ok"
            log_event("baseline", "batch", batch=batch_id, status=status["status"],
                      mean_reward=summary["mean_reward"], pass_count=summary["pass_count"])
    bar.close()
    print(f"baseline {bench}: {len(batches)} batches under {root} ({failed} failed)")
    return 1 if failed else 0


def build_rows_stage(config, workdir: str) -> int:
    """Every stored baseline batch (rollout.baseline_dir or WORKDIR/baseline, from `hr1 baseline`)
    -> failure packet -> RL prompt row: WORKDIR/rows/rl_<benchmark>.jsonl, the benchmark-pure grouped
    file WORKDIR/rows/rl_grouped.jsonl (what `hr1 teacher` and `hr1 grpo` read) and stats.json."""
    from hr1_jax.data.rows import group_rows, parse_group_counts, write_jsonl
    from hr1_jax.rollout.rows import build_rows

    root = baseline_root(config, workdir)
    out_dir = os.path.join(workdir, "rows")
    if not os.path.isdir(root):
        raise InputError(f"no baselines under {root}: run `hr1 baseline` with this --workdir first "
                         "(or point config.rollout.baseline_dir at them)")
    by_bench, stats = {}, {}
    for bench in sorted(os.listdir(root)):
        rows, skipped = build_rows(config, root, bench)
        if rows:
            by_bench[bench] = rows
            write_jsonl(os.path.join(out_dir, f"rl_{bench}.jsonl"), rows)
        lengths = [len(r["prompt"][1]["content"]) for r in rows]
        stats[bench] = {"rows": len(rows), "skipped": skipped,
                        "prompt_chars_max": max(lengths, default=0),
                        "prompt_chars_mean": sum(lengths) / len(lengths) if lengths else 0}
    if not by_bench:
        print(f"hr1 build-rows: no usable baseline batches under {root}", file=sys.stderr)
        return 1
    r = config.rollout
    grouped = group_rows(by_bench, r.group_size, r.group_seed, r.group_tail, parse_group_counts(r.group_counts))
    write_jsonl(os.path.join(out_dir, "rl_grouped.jsonl"), grouped)
    stats["grouped"] = {"rows": len(grouped), "groups": len(grouped) // r.group_size,
                        "recommended_num_rollout": len(grouped) // r.group_size}
    write_json(os.path.join(out_dir, "stats.json"), stats)
    print(json.dumps(stats, indent=1))
    return 0


def reward_stage(config, workdir: str) -> int:
    """The reward of one engineer response to one RL row (--row FILE, --row_index N): the patch is
    parsed and installed, the row's tasks are rerun and compared with the row's baseline ->
    WORKDIR/reward.json, printed. Exit 1 if the rerun failed for infrastructure reasons."""
    from hr1_jax.data.rows import read_jsonl
    from hr1_jax.rollout.reward import RewardContext, score_response

    if not FLAGS.row or not FLAGS.response:
        raise InputError("--row ROWS.jsonl and --response FILE are required")
    rows = read_jsonl(FLAGS.row)
    if not 0 <= FLAGS.row_index < len(rows):
        raise InputError(f"--row_index {FLAGS.row_index} out of range (0..{len(rows) - 1})")
    response = read_input_text(FLAGS.response, "response file")
    cache_dir = config.rollout.cache_dir or os.path.join(workdir, "reward_cache")
    with RewardContext(config, cache_dir=cache_dir) as ctx:
        result = score_response(rows[FLAGS.row_index], response, ctx)
    write_json(os.path.join(workdir, "reward.json"), result.to_dict())
    print(json.dumps(result.to_dict(), indent=1))
    return 0 if result.eval_status != "eval_failed" else 1
