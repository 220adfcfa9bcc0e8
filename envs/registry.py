"""The one list of benchmark names: each maps to its folder's descriptor (`envs/<name>/plugin.py`,
an `envs.plugin.Benchmark`), in the order reports show them.

`make_env(benchmark, config)` builds a benchmark's Environment; `benchmark` is a registered name or
a "module:Class" import path (custom environments and test fixtures). `config` is the experiment
config (or its dict form); a registered environment gets its own section (`config[benchmark]`,
None when absent).
"""
from __future__ import annotations

import contextlib
import importlib
import os

from envs.base import Environment
from envs.plugin import Benchmark

_REGISTERED = {
    "alfworld": "envs.alfworld.plugin:BENCHMARK",
    "webshop": "envs.webshop.plugin:BENCHMARK",
    "dbbench": "envs.dbbench.plugin:BENCHMARK",
}
# Extra registrations for every process of a run, also rollout workers started later:
# "name=module:attr,..." (how tests plug in their toy benchmark; see `registered`).
EXTRA_ENV = "HR1_EXTRA_BENCHMARKS"


def import_object(path: str):
    module, _, attr = path.partition(":")
    if not module or not attr:
        raise ValueError(f"expected 'module:attribute', got {path!r}")
    return getattr(importlib.import_module(module), attr)


def _registry() -> dict[str, str]:
    extra = dict(item.split("=", 1) for item in os.environ.get(EXTRA_ENV, "").split(",") if "=" in item)
    return {**_REGISTERED, **extra}


def names() -> tuple[str, ...]:
    """The registered benchmarks, in report order."""
    return tuple(_registry())


def benchmark(name: str) -> Benchmark:
    """The descriptor of a registered benchmark."""
    registry = _registry()
    if name not in registry:
        raise KeyError(f"unknown benchmark {name!r}; known: {sorted(registry)}")
    found = import_object(registry[name])
    if not isinstance(found, Benchmark) or found.name != name:
        raise TypeError(f"{registry[name]} is not the envs.plugin.Benchmark named {name!r}")
    return found


@contextlib.contextmanager
def registered(name: str, descriptor: str):
    """Register `name` -> "module:attr" (a Benchmark) for this process and the workers it starts,
    until the block ends."""
    before = os.environ.get(EXTRA_ENV)
    os.environ[EXTRA_ENV] = ",".join(x for x in (before, f"{name}={descriptor}") if x)
    try:
        yield benchmark(name)
    finally:
        if before is None:
            os.environ.pop(EXTRA_ENV, None)
        else:
            os.environ[EXTRA_ENV] = before


def env_class(name: str) -> type[Environment]:
    if name in _registry():
        return import_object(benchmark(name).env)
    if ":" in name:
        return import_object(name)
    raise KeyError(f"unknown benchmark {name!r}; known: {sorted(_registry())} or 'module:Class'")


def make_env(name: str, config=None) -> Environment:
    cls = env_class(name)
    section = None
    if config is not None and name in _registry():
        try:
            section = config[name]
        except (KeyError, TypeError):
            section = None
    env = cls(section)
    if not isinstance(env, Environment):
        raise TypeError(f"{name!r} did not build an envs.base.Environment")
    return env


def pin_run_config(config_dict: dict) -> dict:
    """`config_dict` with every benchmark section's run-wide choices made concrete
    (`Environment.pin_run_section`); the rollout pool calls it once before starting workers."""
    out = dict(config_dict)
    for name in names():
        if isinstance(out.get(name), dict):
            out[name] = env_class(name).pin_run_section(out[name])
    return out


def training_order() -> tuple[str, ...]:
    """The registered benchmarks in training's order (descriptor `rank`; ties keep the registry's)."""
    return tuple(sorted(names(), key=lambda name: benchmark(name).rank))


@contextlib.contextmanager
def services(benchmarks, config, recorded):
    """Runs what the named benchmarks need (their descriptors' `services`) around the block:
    yields (config, {benchmark: how its backend was chosen}) for those that declare any, config as
    they adjusted it; `recorded(benchmark, key)` lists the values of final[key] the run's stored
    results recorded. Services end in reverse order when the block ends."""
    how = {}
    with contextlib.ExitStack() as stack:
        for name in benchmarks:
            path = benchmark(name).services
            if path:
                config, how[name] = stack.enter_context(
                    import_object(path)(config, lambda key, name=name: recorded(name, key)))
        yield config, how
