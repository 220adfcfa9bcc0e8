"""Shared fixtures of the environment tests."""
import pytest

from envs.dbbench import config as dbconfig
from envs.dbbench import server


@pytest.fixture(scope="session")
def dbbench_section():
    """The `dbbench` config section for the real server (started if needed, stopped at the end if we
    started it), or the SQLite fallback when it cannot start."""
    was_running = server.is_running()
    ok, message = server.start()
    cfg = dbconfig.defaults()
    if ok:
        cfg.backend = "mariadb"
    else:
        print(f"\n[dbbench tests] MariaDB could not start ({message}); FALLING BACK TO SQLITE")
        cfg.backend = "sqlite"
    yield cfg
    if ok and not was_running:
        server.stop()
