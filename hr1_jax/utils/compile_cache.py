"""Config section `compile_cache`: JAX's persistent compilation cache for the stages that compile.

Every GRPO seed of `hr1 demo` builds its own trainer, so each jits its step anew, and each new
length bucket compiles the step and the log-prob pass again: seconds each on a CPU, for every seed.
A large model's step can take minutes to compile on a pod, and a preempted job compiles it all
again when it resumes. With the cache, an executable XLA already built for the same program (same
HLO, compile options, jax/jaxlib and devices) is loaded from disk instead: a later seed, stage or
restart pays tracing and loading only. Executables are identical, so results are too.

Keys:
  * `dir`: "auto" (default) = `$JAX_COMPILATION_CACHE_DIR` where set, else `<workdir>/xla_cache`;
    "" = off; any other value = that folder (any path JAX's cache accepts: a shared file system lets
    every host of a pod and every later run reuse it). JAX trusts the cache's contents: keep it
    where only you can write.
  * `min_compile_seconds`: only compiles that took at least this long are written (JAX's
    `jax_persistent_cache_min_compile_time_secs`, whose own default is 1 s). The default 0 writes
    every one: the demo's log-prob passes compile in under a second, and load faster still
    (`benchmarks/bench_compile_cache.py`).

`stage_cache` applies the section around one stage and restores the process's previous setting after
it, so stages run one after another in a process (tests, notebooks) each use their own folder.
The section never changes results, so `hr1 demo` does not hold it against a workdir's earlier run.
"""
from __future__ import annotations

import contextlib
import os
from typing import Iterator

import ml_collections

from hr1_jax.utils.config_errors import ConfigError, require

AUTO = "auto"
DEFAULT_SUBDIR = "xla_cache"


def defaults() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.dir = AUTO
    c.min_compile_seconds = 0.0
    return c


def validate(c, config) -> None:
    require(isinstance(c.dir, str), "compile_cache.dir", f"must be a string (\"{AUTO}\", \"\" or a folder)")
    require(isinstance(c.min_compile_seconds, (int, float)) and c.min_compile_seconds >= 0,
            "compile_cache.min_compile_seconds", "must be a number >= 0")


def resolve_dir(c, workdir: str, current: str | None) -> str | None:
    """The folder the section asks for (None = off); `current` is JAX's setting before the stage
    (what `$JAX_COMPILATION_CACHE_DIR` set, if anything), which "auto" keeps."""
    if c.dir == AUTO:
        return current or os.path.join(os.path.abspath(workdir), DEFAULT_SUBDIR)
    return c.dir or None


@contextlib.contextmanager
def stage_cache(c, workdir: str) -> Iterator[str | None]:
    """Within the block, JAX's persistent cache is the section's folder (yielded; None = off)."""
    import jax
    from jax.experimental.compilation_cache import compilation_cache as cc

    before = (jax.config.jax_compilation_cache_dir, jax.config.jax_persistent_cache_min_compile_time_secs)
    path = resolve_dir(c, workdir, before[0])
    if path and "://" not in path:   # JAX would only warn at every compile: say it once, up front
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as e:
            raise ConfigError("compile_cache.dir", f"cannot create the cache folder {path!r}: {e.strerror}") from e

    def apply(folder, min_seconds):
        cc.reset_cache()   # JAX opens its cache once per process: make it open the new folder
        jax.config.update("jax_compilation_cache_dir", folder)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_seconds))

    apply(path, c.min_compile_seconds)
    try:
        yield path
    finally:
        apply(*before)
