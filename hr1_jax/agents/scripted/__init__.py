"""Scripted target agents: seeded simulators of small LLM agents, one per benchmark, each in its
benchmark's folder (`envs/<name>/scripted.py`, shared helpers in `envs/scripted.py`) and named by
the benchmark's descriptor."""
from __future__ import annotations

from envs.base import Task


def make_scripted_agent(task: Task, seed: int, config) -> "object":
    """The scripted agent for `task.benchmark`; `config` is the `target.scripted` config section."""
    from envs.registry import benchmark, import_object
    return import_object(benchmark(task.benchmark).scripted_agent)(task, seed, config)
