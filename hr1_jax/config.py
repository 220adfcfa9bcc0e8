"""The experiment config: one ml_collections ConfigDict assembled from per-package sections.

Each package owns its section in a light module `<package>/config.py` exposing
`defaults() -> ConfigDict` and `validate(section, config) -> None`; config files under `configs/`
start from `base_config()` and override. `validate_config` runs at every stage start and raises
`ConfigError` naming the bad key, e.g. `config.train.grpo.global_batch: must be divisible by ...`.
"""
from __future__ import annotations

import importlib

import ml_collections

from envs.registry import benchmark, names

# the sections import these from here; defined in a leaf so envs/ sections need not import this module
from hr1_jax.utils.config_errors import ConfigError, require

# section name -> module owning its defaults and validation
SECTIONS: dict[str, str] = {
    "patch_protocol": "hr1_jax.patch.config",
    "runtime": "hr1_jax.runtime.config",
    "target": "hr1_jax.agents.config",
    "rollout": "hr1_jax.rollout.config",
    **{b: benchmark(b).config_section for b in names() if benchmark(b).config_section},   # each benchmark's own
    "model": "hr1_jax.models.config",
    "mesh": "hr1_jax.parallel.config",
    "train": "hr1_jax.train.config",
    "eval": "hr1_jax.eval.config",
    "compile_cache": "hr1_jax.utils.compile_cache",
}

BENCHMARKS = names()


def base_config() -> ml_collections.ConfigDict:
    config = ml_collections.ConfigDict()
    config.seed = 0
    # Benchmark and task selection for single-batch stages (`hr1 rollout`, `hr1 reward`).
    config.benchmark = "dbbench"
    config.split = "test"
    config.tasks = "0:10"          # "start:end" or comma-separated task ids
    config.patch = ""              # patch JSON or raw engineer response file; "" = no patch
    for name, module in SECTIONS.items():
        config[name] = importlib.import_module(module).defaults()
    return config


def parse_tasks(spec: str) -> list[int]:
    """`"0:10"` -> [0..9]; `"3,5,9"` -> [3,5,9]."""
    spec = str(spec).strip()
    try:
        if ":" in spec:
            start, end = (int(x) for x in spec.split(":", 1))
            if end <= start:
                raise ValueError
            return list(range(start, end))
        ids = [int(x) for x in spec.replace(" ", "").split(",") if x]
    except ValueError:
        raise ConfigError("tasks", f"expected 'start:end' with end > start or 'i,j,k', got {spec!r}") from None
    if not ids:
        raise ConfigError("tasks", "no task ids given")
    return ids


def validate_config(config: ml_collections.ConfigDict) -> None:
    require(config.benchmark in BENCHMARKS, "benchmark", f"must be one of {BENCHMARKS}, got {config.benchmark!r}")
    require(isinstance(config.seed, int), "seed", "must be an int")
    parse_tasks(config.tasks)
    for name, module in SECTIONS.items():
        require(name in config, name, "section is missing")
        importlib.import_module(module).validate(config[name], config)
