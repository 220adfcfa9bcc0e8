"""Config section `runtime`: episode-loop settings shared by all benchmarks."""
import ml_collections


def defaults() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.record_trajectory = True
    return c


def validate(c, config) -> None:
    return None
