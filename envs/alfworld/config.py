"""Config section `alfworld` (reference spec §4.2, environments.md §1)."""
import ml_collections

from hr1_jax.config import require


def defaults() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.max_steps = 50
    c.data_dir = ""          # "" = the project's unpacked copy of the shipped games
    return c


def validate(c, config) -> None:
    require(c.max_steps >= 1, "alfworld.max_steps", "must be >= 1")
