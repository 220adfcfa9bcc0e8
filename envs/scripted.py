"""What every benchmark's scripted target shares: its settings from the `target.scripted` config
section and the skill-scaled failure rates.

Each benchmark folder's `scripted.py` defines `ScriptedAgent(task, seed, config)` implementing the
TargetAgent call (`chat(messages, tools) -> assistant message`). It plans from the task's
privileged `oracle` (gold SQL, walkthrough, target product) and from what the messages show, makes
the failure modes of small LLM agents at configurable rates, and follows harness hints/blocks with a
configurable probability. It never reads hidden answers through hook messages. Failure profiles are
documented in each module; its descriptor (`plugin.py`) names it for `hr1_jax.agents`.
"""
from __future__ import annotations

REFERENCE_SKILL = 0.6      # documented failure rates are the rates at this skill


def setting(config, key: str, default):
    """`config[key]` for a ConfigDict, dict or None; `default` when missing or None."""
    try:
        value = config[key]
    except (KeyError, TypeError, AttributeError):
        return default
    return default if value is None else value


def behaviour(config, base_rates: dict, overrides_key: str) -> tuple[dict, float, float]:
    """(failure rates, skill scale, hint-follow probability) from the `target.scripted` section.

    Each base rate (at REFERENCE_SKILL) is overridable under `config[overrides_key]` and scales with
    (1 - skill) / (1 - REFERENCE_SKILL), so skill 1.0 is a flawless agent."""
    skill = float(setting(config, "skill", REFERENCE_SKILL))
    scale = max(0.0, 1.0 - skill) / (1.0 - REFERENCE_SKILL)
    overrides = dict(setting(config, overrides_key, {}) or {})
    rates = {k: min(1.0, overrides.get(k, v) * scale) for k, v in base_rates.items()}
    return rates, scale, float(setting(config, "hint_follow_prob", 0.7))
