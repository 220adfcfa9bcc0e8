"""Scripted target agents: seeded simulators of small LLM agents, one per benchmark.

Each benchmark module defines `ScriptedAgent(task, seed, config)` implementing the TargetAgent
call (`chat(messages, tools) -> assistant message`). It plans from the task's privileged `oracle`
(gold SQL, walkthrough, target product) and from what the messages show, makes the failure modes of
small LLM agents at configurable rates, and follows harness hints/blocks with a configurable
probability. It never reads hidden answers through hook messages. Failure profiles are documented
in each module.
"""
from __future__ import annotations

import importlib

from envs.base import Task


def make_scripted_agent(task: Task, seed: int, config) -> "object":
    """The scripted agent for `task.benchmark`; `config` is the `target.scripted` config section."""
    module = importlib.import_module(f"hr1_jax.agents.scripted.{task.benchmark}")
    return module.ScriptedAgent(task, seed, config)
