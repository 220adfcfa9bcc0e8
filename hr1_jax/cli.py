"""`hr1 <stage> --config=configs/<name>.py --workdir=DIR [--config.a.b=value ...]`.

Config stages get the ml_collections config (validated before the stage starts) and the workdir;
their modules may define extra absl flags at import time (only the chosen stage is imported).
A few tool stages (`hr1 patch check ...`, `hr1 probe-target ...`) take plain argv.
"""
from __future__ import annotations

import importlib
import os
import sys

# stage -> (module, function, kind); kind "config": fn(config, workdir) -> int | None,
# kind "argv": fn(argv) -> int | None.
STAGES: dict[str, tuple[str, str, str]] = {
    "patch": ("hr1_jax.patch.cli", "main", "argv"),
    "rollout": ("hr1_jax.rollout.cli", "rollout_stage", "config"),
    "baseline": ("hr1_jax.rollout.cli", "baseline_stage", "config"),
    "build-rows": ("hr1_jax.rollout.cli", "build_rows_stage", "config"),
    "reward": ("hr1_jax.rollout.cli", "reward_stage", "config"),
    "probe-target": ("hr1_jax.agents.probe", "main", "argv"),
    "teacher": ("hr1_jax.train.cli", "teacher_stage", "config"),
    "sft": ("hr1_jax.train.cli", "sft_stage", "config"),
    "grpo": ("hr1_jax.train.cli", "grpo_stage", "config"),
    "demo": ("hr1_jax.train.demo", "demo_stage", "config"),
    "eval": ("hr1_jax.eval.cli", "eval_stage", "config"),
}

USAGE = "usage: hr1 <stage> --config=configs/<name>.py --workdir=DIR [--config.a.b=value ...]\nstages: "


def _run_config_stage(stage: str, fn, argv: list[str]) -> int:
    from absl import flags
    from ml_collections import config_flags

    from hr1_jax.config import ConfigError, validate_config
    from hr1_jax.utils.logging import log_event

    default_config = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                  "configs", "default.py")
    config_flags.DEFINE_config_file("config", default_config, "Path to an ml_collections config file.",
                                    lock_config=True)
    flags.DEFINE_string("workdir", None, "Output directory of this stage (created if missing).")
    try:
        flags.FLAGS([f"hr1 {stage}"] + argv)
    except flags.Error as e:
        print(f"hr1 {stage}: {e}", file=sys.stderr)
        return 2
    config, workdir = flags.FLAGS.config, flags.FLAGS.workdir
    if not workdir:
        print(f"hr1 {stage}: --workdir is required", file=sys.stderr)
        return 2
    try:
        validate_config(config)
    except ConfigError as e:
        print(f"hr1 {stage}: invalid config: {e}", file=sys.stderr)
        return 2
    os.makedirs(workdir, exist_ok=True)
    with open(os.path.join(workdir, f"config.{stage}.json"), "w") as f:
        f.write(config.to_json_best_effort(indent=2))
    log_event(stage, "start", workdir=workdir, config=flags.FLAGS["config"].config_filename)
    rc = fn(config, workdir)
    log_event(stage, "end", rc=int(rc or 0))
    return int(rc or 0)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE + ", ".join(STAGES))
        return 0 if argv else 2
    stage, rest = argv[0], argv[1:]
    if stage not in STAGES:
        print(f"hr1: unknown stage {stage!r}\n" + USAGE + ", ".join(STAGES), file=sys.stderr)
        return 2
    module_name, fn_name, kind = STAGES[stage]
    fn = getattr(importlib.import_module(module_name), fn_name)
    if kind == "argv":
        return int(fn(rest) or 0)
    return _run_config_stage(stage, fn, rest)


if __name__ == "__main__":
    sys.exit(main())
