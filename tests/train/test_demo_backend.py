"""How `hr1 demo` picks DBBench's backend: stored baselines pin theirs; otherwise the project's
MariaDB is started for the run when installed and silent, and stopped at the end (server faked)."""
import importlib
import json

import pytest

from envs.dbbench import server
from hr1_jax.train import demo


class FakeServer:
    def __init__(self, running=False, starts=True):
        self.running, self.starts, self.calls = running, starts, []

    def install(self, monkeypatch):
        monkeypatch.setattr(server, "is_running", lambda: self.running)
        monkeypatch.setattr(server, "start", self.start)
        monkeypatch.setattr(server, "stop", self.stop)

    def start(self, port=0, **_):
        self.calls.append(("start", port))
        return self.starts, "[mariadb] started" if self.starts else "[mariadb] ERROR: port taken"

    def stop(self, port=0, **_):
        self.calls.append(("stop", port))
        return True, "[mariadb] stopped"


@pytest.fixture
def config():
    return importlib.import_module("configs.demo").get_config()


def test_installed_silent_mariadb_is_started_for_the_run_and_stopped(monkeypatch, tmp_path, config):
    fake = FakeServer()
    fake.install(monkeypatch)
    monkeypatch.setattr(demo, "_mariadb_installed", lambda: True)
    with demo.dbbench_backend(config, str(tmp_path)) as (cfg, how):
        assert fake.calls == [("start", 3307)] and cfg.dbbench.backend == "auto"
        assert how.startswith("MariaDB: started for this run")
    assert fake.calls[-1] == ("stop", 3307)


@pytest.mark.parametrize("running, installed, starts, expected", [
    (True, True, True, "MariaDB: the project's server, already running"),
    (False, False, True, "SQLite: MariaDB is not installed"),
    (False, True, False, "SQLite: MariaDB did not start ([mariadb] ERROR: port taken)"),
])
def test_no_start_or_stop_when_running_missing_or_failing(monkeypatch, tmp_path, config, running, installed,
                                                          starts, expected):
    fake = FakeServer(running=running, starts=starts)
    fake.install(monkeypatch)
    monkeypatch.setattr(demo, "_mariadb_installed", lambda: installed)
    with demo.dbbench_backend(config, str(tmp_path)) as (_, how):
        assert how.startswith(expected), how
    assert ("stop", 3307) not in fake.calls


def test_stored_sqlite_baselines_pin_sqlite_and_start_nothing(monkeypatch, tmp_path, config):
    fake = FakeServer()
    fake.install(monkeypatch)
    monkeypatch.setattr(demo, "_mariadb_installed", lambda: True)
    batch = tmp_path / "baseline" / "heldout" / "dbbench" / "seed0_batch_000"
    batch.mkdir(parents=True)
    (batch / "results.jsonl").write_text(json.dumps({"final": {"backend": "sqlite"}}) + "\n")
    with demo.dbbench_backend(config, str(tmp_path)) as (cfg, how):
        assert cfg.dbbench.backend == "sqlite" and how.startswith("SQLite")
    assert fake.calls == []
