"""Shared fixtures of the environment tests."""
import shutil
import socket

import pytest

from envs.dbbench import config as dbconfig
from envs.dbbench import server
from envs.dbbench.services import mariadb_installed


@pytest.fixture(scope="session")
def dbbench_section():
    """The `dbbench` config section for the project's server (started if needed; this session is
    one of its users, so a demo or another checkout's suite sharing it does not stop it under the
    tests), or the SQLite fallback when it cannot start."""
    cfg = dbconfig.defaults()
    with server.project_server(cfg.port) as (ok, message, _):
        if ok:
            cfg.backend = "mariadb"
        else:
            print(f"\n[dbbench tests] MariaDB could not start ({message}); FALLING BACK TO SQLITE")
            cfg.backend = "sqlite"
        yield cfg


class ThrowawayMariaDB:
    """A second MariaDB instance (own folder and port) that a test may stop and restart without
    disturbing the shared server other tests and engineers use."""

    def __init__(self, home: str, port: int):
        self.home, self.port = home, port

    def section(self, backend: str):
        cfg = dbconfig.defaults()
        cfg.backend, cfg.port, cfg.connect_timeout_s = backend, self.port, 2.0
        return cfg

    def start(self) -> None:
        ok, message = server.start(home=self.home, port=self.port)
        assert ok, message

    def stop(self) -> None:
        ok, message = server.stop(home=self.home, port=self.port)
        assert ok, message


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def throwaway_mariadb(tmp_path_factory):
    """A running `ThrowawayMariaDB` (skipped where MariaDB cannot start); stopped at the end."""
    db = ThrowawayMariaDB(str(tmp_path_factory.mktemp("mariadb")), _free_port())
    ok, message = server.start(home=db.home, port=db.port)
    if not ok:
        pytest.skip(f"no MariaDB server can start here: {message}")
    yield db
    db.stop()


@pytest.fixture
def shared_server_port(monkeypatch):
    """A free port for a project server in its default (machine-wide) folder, as another checkout
    would find it; the server is stopped and the folder removed at the end."""
    if not mariadb_installed():
        pytest.skip("MariaDB is not installed (launch/setup.sh installs it as root)")
    monkeypatch.delenv("HR1_MARIADB_DIR", raising=False)
    port = _free_port()
    yield port
    server.stop(port=port)
    shutil.rmtree(server.folder_of(port), ignore_errors=True)
