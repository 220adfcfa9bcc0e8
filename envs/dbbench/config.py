"""Config section `dbbench` (reference spec §4.3, environments.md §3)."""
import ml_collections

from hr1_jax.config import require

BACKENDS = ("auto", "mariadb", "sqlite")


def defaults() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.max_rounds = 20
    c.backend = "auto"       # auto = MariaDB when a server is reachable, else SQLite (logged)
    c.host = "127.0.0.1"
    c.port = 3306
    c.user = "root"
    c.password = ""
    c.socket = ""
    return c


def validate(c, config) -> None:
    require(c.max_rounds >= 1, "dbbench.max_rounds", "must be >= 1")
    require(c.backend in BACKENDS, "dbbench.backend", f"must be one of {BACKENDS}")
