"""The patch layer's view of the benchmarks: each one's `envs.plugin.PatchSpec`, asked of
`envs.registry` (the only list of names; read per call, so plug-ins registered later count)."""
from __future__ import annotations

import functools
import os

from envs import registry
from hr1_jax.patch.errors import PatchError


def descriptor(name: str):
    """The registered benchmark `name`'s descriptor; PatchError("bad_benchmark") when unknown."""
    if name not in registry.names():
        raise PatchError("bad_benchmark", f"unsupported benchmark: {name!r}")
    return registry.benchmark(name)


def spec(name: str | None):
    """The PatchSpec of a registered benchmark, None for any other name (no benchmark rules)."""
    return registry.benchmark(name).patch if name in registry.names() else None


def id_leak_patterns() -> tuple:
    """Every registered benchmark's task-id patterns: patch text matching one is leakage."""
    return _union(os.environ.get(registry.EXTRA_ENV, ""))[0]


def instance_patterns() -> tuple:
    """Every registered benchmark's numbered-instance action pattern (asked on every hook-returned
    action: the registry's extra registrations, its only varying part, are the cache key)."""
    return _union(os.environ.get(registry.EXTRA_ENV, ""))[1]


@functools.lru_cache(maxsize=8)
def _union(extra: str) -> tuple[tuple, tuple]:
    specs = [registry.benchmark(n).patch for n in registry.names()]
    return (tuple(p for s in specs for p in s.id_leak_patterns),
            tuple(s.instance_action_re for s in specs if s.instance_action_re is not None))
