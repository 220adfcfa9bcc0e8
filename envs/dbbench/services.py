"""DBBench's services (descriptor `services`): the project's MariaDB around a run that uses DBBench.

A run's stored results pin the backend they recorded (reruns only pair with runs on the same
backend). Otherwise, when MariaDB is installed and the project's server (launch/mariadb.sh) does
not answer, it is started for the run; runs using the project's server (from any checkout on the
machine: `envs.dbbench.server.project_server`) record themselves as its users, and the last one to
end stops a server a run started (so concurrent runs do not lose it under each other), never one
started by hand. Where it cannot start, `auto` runs on SQLite and says so.
"""
from __future__ import annotations

import contextlib
import copy
import os
import shutil

from envs.dbbench import server

ALREADY_RUNNING = "MariaDB: the project's server, already running"
STARTED = "MariaDB: started for this run by launch/mariadb.sh, stopped when the last run using it ends"


def mariadb_installed() -> bool:
    return any(shutil.which(n) or os.path.exists(f"/usr/sbin/{n}") for n in ("mariadbd", "mysqld"))


def pin_recorded_backend(config, recorded):
    """`dbbench.backend=auto` pinned to the one backend the stored results recorded."""
    backends = recorded("backend")
    if config.dbbench.backend != "auto" or len(backends) != 1:
        return config
    config = copy.deepcopy(config)
    config.dbbench.backend = backends[0]
    return config


def no_server_start(db) -> str | None:
    """Why a run with the `dbbench` section `db` does not use the project's MariaDB (what DBBench
    uses instead), or None."""
    if db.backend == "sqlite":
        return "SQLite: dbbench.backend=sqlite, or this workdir's stored baselines ran on it"
    if db.socket or db.host not in ("127.0.0.1", "localhost"):
        return f"the MariaDB server at {db.socket or db.host}"
    if db.backend == "auto" and not mariadb_installed() and not server.is_running(int(db.port)):
        return "SQLite: MariaDB is not installed (launch/setup.sh installs it as root)"
    return None


@contextlib.contextmanager
def mariadb(config, recorded):
    """Yields (config, how DBBench's backend was chosen) around a run (see the module docstring);
    `recorded(key)` lists the values of final[key] the run's stored DBBench results recorded."""
    config = pin_recorded_backend(config, recorded)
    reason = no_server_start(config.dbbench)
    if reason is not None:
        yield (_on_sqlite(config) if reason.startswith("SQLite") else config), reason
        return
    with server.project_server(int(config.dbbench.port)) as (ok, message, started):
        if ok:
            yield config, (STARTED if started else ALREADY_RUNNING)
            return
        failure = message.splitlines()[-1] if message else "no output"
        if config.dbbench.backend == "mariadb":  # asked for MariaDB: its episodes fail to connect, counted
            yield config, f"MariaDB did not start ({failure}); dbbench.backend=mariadb, so DBBench episodes fail"
            return
        yield _on_sqlite(config), f"SQLite: MariaDB did not start ({failure})"


def _on_sqlite(config):
    """`config` with `auto` pinned to SQLite: `auto` would take any server that answers on the port,
    one this run is no user of, and its reason would then say SQLite."""
    if config.dbbench.backend != "auto":
        return config
    config = copy.deepcopy(config)
    config.dbbench.backend = "sqlite"
    return config
