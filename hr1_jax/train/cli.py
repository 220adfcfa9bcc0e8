"""`hr1 teacher`, `hr1 sft` and `hr1 grpo` stages (config stages: fn(config, workdir) -> exit code)."""
from __future__ import annotations

import json
import os

from hr1_jax.utils.logging import log_event


def sft_stage(config, workdir: str) -> int:
    """Cold-start SFT of the engineer (config.model; config.train.init_checkpoint to start from a
    checkpoint) on config.train.sft_rows (default WORKDIR/rows/sft_rows.jsonl, from `hr1 teacher`)
    with config.train.sft -> orbax checkpoints under WORKDIR (a rerun resumes), WORKDIR/sft_summary.json."""
    from hr1_jax.train.sft import run_sft

    summary = run_sft(config, workdir)
    with open(os.path.join(workdir, "sft_summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps(summary, indent=1))
    return 0


def grpo_stage(config, workdir: str) -> int:
    """Online GRPO (config.train.grpo) of the engineer from config.train.init_checkpoint (an SFT run
    dir or HF folder) on the grouped RL rows in config.train.rows (default WORKDIR/rows/rl_grouped.jsonl,
    from `hr1 build-rows`); each sampled patch is rewarded by a real paired rerun of its batch.
    Orbax checkpoints under WORKDIR (a killed run resumes with identical metrics), TensorBoard under
    WORKDIR/tensorboard, WORKDIR/grpo_summary.json."""
    from hr1_jax.train.grpo import GRPOTrainer

    trainer = GRPOTrainer(config, workdir)
    out = trainer.run()
    last = out["history"][-1] if out["history"] else {}
    summary = {"steps": out["steps"], "last": last}
    with open(os.path.join(workdir, "grpo_summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    log_event("grpo", "done", steps=out["steps"])
    print(json.dumps(summary, indent=1))
    return 0


def teacher_stage(config, workdir: str) -> int:
    """RL rows (config.train.rows, default WORKDIR/rows/rl_grouped.jsonl from `hr1 build-rows`) ->
    teacher responses (config.train.teacher: the template library or an OpenAI-compatible endpoint)
    -> paired reruns -> WORKDIR/rows/sft_rows.jsonl, keeping a response if its patch is valid, fully
    rerun and its delta >= train.teacher.min_delta; WORKDIR/teacher_stats.json. Exit 1 if none kept."""
    from hr1_jax.data.rows import read_jsonl, write_jsonl
    from hr1_jax.rollout.reward import RewardContext
    from hr1_jax.train.teacher import build_sft_rows, make_teacher

    rows_path = config.train.rows or os.path.join(workdir, "rows", "rl_grouped.jsonl")
    rows = read_jsonl(rows_path)
    cache = config.rollout.cache_dir or os.path.join(workdir, "reward_cache")
    with RewardContext(config, cache_dir=cache) as ctx:
        sft_rows, stats = build_sft_rows(rows, make_teacher(config.train.teacher), ctx,
                                         min_delta=config.train.teacher.min_delta, keep=config.train.teacher.keep)
    out = os.path.join(workdir, "rows", "sft_rows.jsonl")
    write_jsonl(out, sft_rows)
    with open(os.path.join(workdir, "teacher_stats.json"), "w") as f:
        json.dump(stats, f, indent=1)
    print(json.dumps(dict(stats, output=out), indent=1))
    return 0 if sft_rows else 1
