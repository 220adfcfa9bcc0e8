"""Config section `mesh`: device mesh shape and logical-axis rules."""
import ml_collections

from hr1_jax.config import require


def defaults() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    # -1 = fill with the remaining devices; size-1 axes are allowed.
    c.data = 1
    c.fsdp = -1
    c.tensor = 1
    return c


def validate(c, config) -> None:
    sizes = [c.data, c.fsdp, c.tensor]
    require(all(s == -1 or s >= 1 for s in sizes), "mesh", "axis sizes must be >= 1 or -1")
    require(sum(s == -1 for s in sizes) <= 1, "mesh", "at most one axis may be -1")
