"""Build the target agent for one task from the `target` config section (dict or ConfigDict).

kind "scripted" -> the benchmark's seeded ScriptedAgent; kind "openai" -> an OpenAI-compatible
chat-completions client (one per process and endpoint, so its concurrency limit and usage totals
are shared). A `factory: "module:callable"` entry (callable(task, seed, target) -> agent) plugs in
custom agents, e.g. the toy agent of the tests.
"""
from __future__ import annotations

from envs.base import Task

_CLIENTS: dict = {}


def _get(target, key, default=None):
    try:
        value = target[key]
    except (KeyError, TypeError):
        return default
    return default if value is None else value


def openai_client(target):
    from hr1_jax.agents.openai_client import OpenAIChatClient
    key = (_get(target, "base_url"), _get(target, "model"), _get(target, "name"))
    if key not in _CLIENTS:
        _CLIENTS[key] = OpenAIChatClient.from_target_config(target)
    return _CLIENTS[key]


def build_agent(task: Task, seed: int, target):
    factory = _get(target, "factory", "")
    if factory:
        from envs.registry import import_object
        return import_object(factory)(task, seed, target)
    kind = _get(target, "kind", "scripted")
    if kind == "scripted":
        from hr1_jax.agents.scripted import make_scripted_agent
        return make_scripted_agent(task, seed, _get(target, "scripted", {}))
    if kind == "openai":
        return openai_client(target)
    raise ValueError(f"unknown target kind {kind!r}")
