"""Config section `webshop` (substitute environment; reference spec §4.1, environments.md §2c)."""
import os

import ml_collections

from hr1_jax.utils.config_errors import require


def defaults() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.max_rounds = 20          # AgentBench/Harness-R1 `round: 20`
    c.goal_seed = 233          # upstream `random.seed(233); random.shuffle(goals)`; part of task identity
    c.catalog_seed = 0         # seed of the substitute's synthetic catalog; part of task identity
    # The real WebShop data, when you have it: a folder with items_shuffle.json (or
    # items_shuffle_1000.json), items_ins_v2.json (or _1000) and items_human_ins.json. "" = the
    # substitute. Reports name the data source either way.
    c.data_dir = ""
    return c


def validate(c, config) -> None:
    require(c.max_rounds >= 1, "webshop.max_rounds", "must be >= 1")
    require(isinstance(c.goal_seed, int), "webshop.goal_seed", "must be an int")
    require(isinstance(c.catalog_seed, int) and c.catalog_seed >= 0, "webshop.catalog_seed",
            "must be an int >= 0")
    if c.data_dir:
        from envs.webshop.real_data import ATTRIBUTE_FILES, HUMAN_FILE, PRODUCT_FILES
        for names in (PRODUCT_FILES, ATTRIBUTE_FILES, (HUMAN_FILE,)):
            require(any(os.path.isfile(os.path.join(c.data_dir, n)) for n in names), "webshop.data_dir",
                    f"{c.data_dir} has none of {', '.join(names)}")

