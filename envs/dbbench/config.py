"""Config section `dbbench` (reference spec §4.3, environments.md §3)."""
import os

import ml_collections

from hr1_jax.utils.config_errors import require

BACKENDS = ("auto", "mariadb", "sqlite")


def defaults() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.max_rounds = 20
    c.backend = "auto"       # auto = MariaDB when a server is reachable, else SQLite; decided once per process
    # The project's private server (launch/mariadb.sh: 127.0.0.1:3307, root, empty password).
    c.host = "127.0.0.1"
    c.port = 3307
    c.user = "root"
    c.password = ""
    c.socket = ""            # unix socket path; when set it is used instead of host/port
    c.connect_timeout_s = 5.0
    # DBBench task files in the reference's format (AgentBench dbbench JSONL: one task per line with
    # its inline table, question and gold): "split=path[,split=path]"; a name replaces or adds to
    # the shipped splits test (standard.jsonl, 300) and dev (dev.jsonl, 60), e.g.
    # "train=/data/dbbench/db_out_new.jsonl". Reports name the file a split came from.
    c.task_files = ""
    return c


def validate(c, config) -> None:
    require(c.max_rounds >= 1, "dbbench.max_rounds", "must be >= 1")
    require(c.backend in BACKENDS, "dbbench.backend", f"must be one of {BACKENDS}")
    require(1 <= int(c.port) <= 65535, "dbbench.port", "must be a TCP port")
    require(c.connect_timeout_s > 0, "dbbench.connect_timeout_s", "must be > 0")
    from envs.dbbench.tasks import parse_task_files
    for split, path in parse_task_files(c.task_files).items():
        require(os.path.isfile(path), "dbbench.task_files", f"split {split!r}: no such file {path}")
