"""The config error every section's validation raises: a leaf, so benchmark sections (envs/*/config.py)
validate without importing the experiment config that assembles them (hr1_jax/config.py)."""
from __future__ import annotations


class ConfigError(ValueError):
    """A config value is invalid; `key` is its dotted path (e.g. `train.grpo.lr`)."""

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(f"config.{key}: {message}")


def require(condition: bool, key: str, message: str) -> None:
    if not condition:
        raise ConfigError(key, message)
