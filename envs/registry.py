"""`make_env(benchmark, config)`: the one place that maps a benchmark name to its Environment.

`benchmark` is a name from ENVIRONMENTS or a "module:Class" import path (custom environments and
test fixtures). `config` is the experiment config (or its dict form); the environment gets its own
section (`config[benchmark]`, absent for custom environments -> None).
"""
from __future__ import annotations

import importlib

from envs.base import Environment

ENVIRONMENTS = {
    "alfworld": "envs.alfworld.env:ALFWorldEnv",
    "dbbench": "envs.dbbench.env:DBBenchEnv",
    "webshop": "envs.webshop.env:WebShopEnv",
}


def import_object(path: str):
    module, _, attr = path.partition(":")
    if not module or not attr:
        raise ValueError(f"expected 'module:attribute', got {path!r}")
    return getattr(importlib.import_module(module), attr)


def env_class(benchmark: str) -> type[Environment]:
    if benchmark in ENVIRONMENTS:
        return import_object(ENVIRONMENTS[benchmark])
    if ":" in benchmark:
        return import_object(benchmark)
    raise KeyError(f"unknown benchmark {benchmark!r}; known: {sorted(ENVIRONMENTS)} or 'module:Class'")


def make_env(benchmark: str, config=None) -> Environment:
    cls = env_class(benchmark)
    section = None
    if config is not None and benchmark in ENVIRONMENTS:
        try:
            section = config[benchmark]
        except (KeyError, TypeError):
            section = None
    env = cls(section)
    if not isinstance(env, Environment):
        raise TypeError(f"{benchmark!r} did not build an envs.base.Environment")
    return env


def pin_run_config(config_dict: dict) -> dict:
    """`config_dict` with every benchmark section's run-wide choices made concrete
    (`Environment.pin_run_section`); the rollout pool calls it once before starting workers."""
    out = dict(config_dict)
    for benchmark in ENVIRONMENTS:
        if isinstance(out.get(benchmark), dict):
            out[benchmark] = env_class(benchmark).pin_run_section(out[benchmark])
    return out
