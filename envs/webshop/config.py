"""Config section `webshop` (substitute environment; reference spec §4.1, environments.md §2c)."""
import ml_collections

from hr1_jax.utils.config_errors import require


def defaults() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.max_rounds = 20          # AgentBench/Harness-R1 `round: 20`
    c.goal_seed = 233          # upstream `random.seed(233); random.shuffle(goals)`; part of task identity
    c.catalog_seed = 0         # seed of the substitute's synthetic catalog; part of task identity
    return c


def validate(c, config) -> None:
    require(c.max_rounds >= 1, "webshop.max_rounds", "must be >= 1")
    require(isinstance(c.goal_seed, int), "webshop.goal_seed", "must be an int")
    require(isinstance(c.catalog_seed, int) and c.catalog_seed >= 0, "webshop.catalog_seed",
            "must be an int >= 0")


def data_source(section) -> str:
    """The line reports print for WebShop's data (the substitute's catalog)."""
    from hr1_jax.rollout.batches import WEBSHOP_NOTE
    return WEBSHOP_NOTE
