"""Config section `eval`: fixed-batch run-patch-rerun evaluation and reports."""
import ml_collections


def defaults() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.engineer = ""          # checkpoint dir, http(s):// endpoint, "teacher" or "reference_patches"
    c.seeds = 3
    c.bootstrap_samples = 2000
    return c


def validate(c, config) -> None:
    return None
