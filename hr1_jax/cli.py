"""`hr1 <stage> [--config=NAME|FILE] --workdir=DIR [--config.a.b=value ...]`; `hr1 --help` lists the
stages, `hr1 <stage> --help` explains one.

Config stages get the ml_collections config (validated before the stage starts) and the workdir;
their modules may define extra absl flags at import time (only the chosen stage is imported).
Two tool stages (`hr1 patch check ...`, `hr1 probe-target ...`) take plain argv and no config.
Flags are snake_case everywhere (`--row_index`, `--base_url`); kebab spellings are accepted.
Bad input (a missing or broken file, an unknown key, a wrong type) is one line on stderr and
exit 2; `--debug` or HR1_DEBUG=1 shows the traceback instead.
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib
import inspect
import os
import sys

from envs.registry import names as benchmark_names
from hr1_jax.config import ConfigError
from hr1_jax.config_files import (check_overrides, load_config, resolve_config, shipped_config_names,
                                  split_config_flag)
from hr1_jax.errors import InputError
from hr1_jax.utils.argv import snake_case_flags

HELP_FLAGS = ("-h", "--help", "--helpshort", "--helpfull")


@dataclasses.dataclass(frozen=True)
class Stage:
    module: str
    function: str                    # config stages: fn(config, workdir); tool stages: fn(argv)
    summary: str                     # its line in `hr1 --help`
    example: str
    sections: tuple[str, ...] = ()   # config keys and sections it reads; () = a tool stage
    flags: tuple[str, ...] = ()      # its own absl flags (defined by its module)
    default_config: str = "default"  # the shipped config it runs without --config
    preflight: str = ""              # config stages: its module's fn(config, workdir), run before
                                     # DIR/config.<stage>.json is written (a refused run leaves it as it was)

    @property
    def takes_config(self) -> bool:
        return bool(self.sections)


# what the rollout workers and the paired-rerun reward read (with every benchmark's section)
ROLLOUT = ("target", "rollout", "runtime", "patch_protocol") + benchmark_names()
TASKS = ("seed", "benchmark", "split", "tasks")
ENGINEER = ("seed", "model", "mesh", "train", "compile_cache")

STAGES: dict[str, Stage] = {
    "patch": Stage("hr1_jax.patch.cli", "main", "validate patch files or raw engineer responses",
                   "hr1 patch check response.txt --benchmark=webshop"),
    "rollout": Stage("hr1_jax.rollout.cli", "rollout_stage",
                     "run the target on one batch of tasks (optionally patched) and print a table",
                     "hr1 rollout --workdir=runs/rollout --config.benchmark=webshop --config.tasks=0:5",
                     TASKS + ("patch",) + ROLLOUT),
    "baseline": Stage("hr1_jax.rollout.cli", "baseline_stage",
                      "run the target without a patch over a task range, in batches (resumable)",
                      "hr1 baseline --workdir=runs/base --config.benchmark=dbbench --config.split=dev "
                      "--config.tasks=0:30", TASKS + ROLLOUT),
    "build-rows": Stage("hr1_jax.rollout.cli", "build_rows_stage",
                        "stored baselines -> failure packets -> RL prompt rows",
                        "hr1 build-rows --workdir=runs/base", ("target", "rollout", "patch_protocol")),
    "reward": Stage("hr1_jax.rollout.cli", "reward_stage", "score one engineer response with a real paired rerun",
                    "hr1 reward --workdir=runs/base --row=runs/base/rows/rl_dbbench.jsonl --row_index=0 "
                    "--response=response.txt", ROLLOUT, flags=("row", "row_index", "response")),
    "probe-target": Stage("hr1_jax.agents.probe", "main",
                          "check that an OpenAI-compatible endpoint returns structured tool calls",
                          "hr1 probe-target --base_url=http://127.0.0.1:8000/v1 --model=Qwen3.5-9B"),
    "teacher": Stage("hr1_jax.train.cli", "teacher_stage",
                     "teacher patches for RL rows, rerun; the helpful ones become SFT rows",
                     "hr1 teacher --workdir=runs/base --config.train.teacher.kind=template",
                     ("seed", "train") + ROLLOUT),
    "sft": Stage("hr1_jax.train.cli", "sft_stage", "cold-start SFT of the engineer (orbax checkpoints, resumable)",
                 "hr1 sft --config=demo --workdir=runs/sft --config.train.sft_rows=runs/base/rows/sft_rows.jsonl",
                 ENGINEER),
    "grpo": Stage("hr1_jax.train.cli", "grpo_stage", "online GRPO of the engineer, rewarded by real reruns (resumable)",
                  "hr1 grpo --config=demo --workdir=runs/grpo --config.train.rows=runs/base/rows/rl_grouped.jsonl "
                  "--config.train.init_checkpoint=runs/sft", ENGINEER + ROLLOUT),
    "demo": Stage("hr1_jax.train.demo", "demo_stage",
                  "the embedded default end to end on CPU: baselines -> rows -> SFT -> GRPO -> held-out table",
                  "hr1 demo --workdir=runs/demo", ENGINEER + ROLLOUT, default_config="demo",
                  preflight="check_workdir_config"),
    "agent-sft": Stage("hr1_jax.train.agent_sft", "agent_sft_stage",
                       "SFT of the target on its own successful baselines (multi-turn, tool calls; resumable)",
                       "hr1 agent-sft --config=agent_sft_demo --workdir=runs/target "
                       "--config.train.agent_sft.baseline_dir=runs/base/baseline",
                       ENGINEER + ("rollout",) + benchmark_names(), default_config="agent_sft_demo"),
    "serve": Stage("hr1_jax.serve.cli", "main",
                   "serve a checkpoint (target or engineer) as an OpenAI-compatible endpoint (batched JAX decode)",
                   "hr1 serve --checkpoint=runs/target/final_params --port=8000"),
    "eval": Stage("hr1_jax.eval.cli", "eval_stage",
                  "fixed-batch run-patch-rerun evaluation with baselines, intervals and reports",
                  "hr1 eval --workdir=runs/eval --config.eval.engineer=teacher --config.eval.tasks=0:10",
                  ("eval",) + ENGINEER + ROLLOUT),
}

USAGE = "usage: hr1 <stage> [--config=NAME|FILE] --workdir=DIR [--config.a.b=value ...]   (hr1 <stage> --help)"


def overview() -> str:
    width = max(map(len, STAGES))
    lines = [USAGE, "", "stages:"]
    lines += [f"  {name:<{width}}  {stage.summary}" for name, stage in STAGES.items()]
    lines += ["", f"shipped configs (--config=NAME): {', '.join(shipped_config_names())}",
              "--debug (or HR1_DEBUG=1) shows the Python traceback of an error."]
    return "\n".join(lines)


def _display_path(path: str) -> str:
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def stage_help(name: str, stage: Stage, fn) -> str:
    from absl import flags

    default_path, _ = resolve_config(stage.default_config)
    lines = [f"hr1 {name}: {stage.summary}", "", inspect.getdoc(fn) or inspect.getdoc(sys.modules[stage.module]), "",
             f"usage: hr1 {name} [--config=NAME|FILE] --workdir=DIR [--config.a.b=value ...]"
             + "".join(f" [--{f}=...]" for f in stage.flags), "", "flags:",
             f"  --config=NAME|FILE  a config file or a shipped config's name; without it: "
             f"{stage.default_config} ({_display_path(default_path)})",
             f"                      shipped: {', '.join(shipped_config_names())}",
             "  --workdir=DIR       output directory, created if missing (required)",
             "  --config.a.b=VALUE  override one config value; an unknown key names the closest valid one",
             "  --debug             show the Python traceback of an error (or HR1_DEBUG=1)"]
    lines += [f"  --{f:<18}{flags.FLAGS[f].help}" for f in stage.flags]
    lines += ["", f"config sections read: {', '.join(stage.sections)}",
              f"(resolved config written to DIR/config.{name}.json)", "", "example:", f"  {stage.example}"]
    return "\n".join(lines)


def _parse_config_flags(name: str, stage: Stage, argv: list[str]):
    """(config, workdir, config path) from argv; bad input raises InputError or ConfigError."""
    from absl import flags
    from ml_collections import config_flags

    from hr1_jax.config import validate_config

    spec, rest = split_config_flag(argv)
    path, arg = resolve_config(spec or stage.default_config)
    config = load_config(path, arg)
    check_overrides(config, rest)
    prog = f"hr1 {name}"
    try:  # overrides are parsed against the loaded config; absl reports type errors as flags.Error
        config_flags.DEFINE_config_dict("config", config, "The experiment config.", lock_config=True,
                                        sys_argv=[prog] + rest)
        flags.DEFINE_string("workdir", None, "Output directory of this stage (created if missing).")
        flags.FLAGS([prog] + rest)
    except flags.Error as e:
        raise InputError(str(e)) from e
    if not flags.FLAGS.workdir:
        raise InputError("--workdir is required")
    validate_config(flags.FLAGS.config)
    source = "given" if spec else "this stage's default"
    print(f"{prog}: config {_display_path(path)} ({source})", file=sys.stderr, flush=True)
    return flags.FLAGS.config, flags.FLAGS.workdir, path


def _run_config_stage(name: str, stage: Stage, fn, argv: list[str]) -> int:
    from hr1_jax.utils.compile_cache import stage_cache
    from hr1_jax.utils.logging import log_event

    config, workdir, path = _parse_config_flags(name, stage, snake_case_flags(argv))
    os.makedirs(workdir, exist_ok=True)
    if stage.preflight:
        getattr(importlib.import_module(stage.module), stage.preflight)(config, workdir)
    with open(os.path.join(workdir, f"config.{name}.json"), "w") as f:
        f.write(config.to_json_best_effort(indent=2))
    compiles = "compile_cache" in stage.sections
    with stage_cache(config.compile_cache, workdir) if compiles else contextlib.nullcontext() as cache:
        log_event(name, "start", workdir=workdir, config=path, compile_cache=cache)
        rc = int(fn(config, workdir) or 0)
    log_event(name, "end", rc=rc)
    return rc


def run_stage(name: str, argv: list[str]) -> int:
    from hr1_jax.utils.host_env import configure_jax

    configure_jax()   # under the launch scripts' malloc tunables; before anything creates JAX's CPU client
    stage = STAGES[name]
    fn = getattr(importlib.import_module(stage.module), stage.function)
    if not stage.takes_config:
        return int(fn(argv) or 0)
    if any(a in HELP_FLAGS for a in argv):
        print(stage_help(name, stage, fn))
        return 0
    return _run_config_stage(name, stage, fn, argv)


def _debug_requested(argv: list[str]) -> bool:
    return "--debug" in argv or os.environ.get("HR1_DEBUG", "").lower() not in ("", "0", "false")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in HELP_FLAGS + ("help",):
        print(overview())
        return 0 if argv else 2
    name, rest = argv[0], [a for a in argv[1:] if a != "--debug"]
    if name not in STAGES:
        print(f"hr1: unknown stage {name!r}\n\n{overview()}", file=sys.stderr)
        return 2
    try:
        return run_stage(name, rest)
    except (InputError, ConfigError) as e:
        if _debug_requested(argv):
            raise
        prefix = "invalid config: " if isinstance(e, ConfigError) else ""
        print(f"hr1 {name}: {prefix}{e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
