"""Config section `webshop` (substitute environment; reference spec §4.1, environments.md §2c)."""
import ml_collections

from hr1_jax.config import require


def defaults() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.max_rounds = 20
    c.goal_seed = 233
    c.catalog_seed = 0
    return c


def validate(c, config) -> None:
    require(c.max_rounds >= 1, "webshop.max_rounds", "must be >= 1")
