"""DBBench's services around a run (`envs.dbbench.services.mariadb`, reached through
`envs.registry.services`): stored results pin their backend; otherwise the project's MariaDB is
started for the run when installed and silent, and stopped when the last run using it ends (server
start/stop faked; the users' records are real files)."""
import importlib
import json

import pytest

from envs import registry
from envs.dbbench import server, services
from hr1_jax.eval.provenance import recorded_values


class FakeServer:
    def __init__(self, running=False, starts=True):
        self.running, self.starts, self.calls = running, starts, []

    def install(self, monkeypatch, tmp_path):
        monkeypatch.setenv("HR1_MARIADB_DIR", str(tmp_path / "mariadb"))
        monkeypatch.setattr(server, "is_running", lambda port=0: self.running)
        monkeypatch.setattr(server, "start", self.start)
        monkeypatch.setattr(server, "stop", self.stop)

    def start(self, timeout_s=90, port=0, **_):
        self.calls.append(("start", port))
        self.running = self.starts
        return self.starts, "[mariadb] started" if self.starts else "[mariadb] ERROR: port taken"

    def stop(self, timeout_s=90, port=0, **_):
        self.calls.append(("stop", port))
        self.running = False
        return True, "[mariadb] stopped"


@pytest.fixture
def config():
    return importlib.import_module("configs.demo").get_config()


def run(config, root, benchmarks=("dbbench",)):
    """The services of a run whose stored results lie under `root`, as a runner calls them."""
    return registry.services(benchmarks, config, lambda bench, key: recorded_values(str(root), bench, key))


def test_installed_silent_mariadb_is_started_for_the_run_and_stopped(monkeypatch, tmp_path, config):
    fake = FakeServer()
    fake.install(monkeypatch, tmp_path)
    monkeypatch.setattr(services, "mariadb_installed", lambda: True)
    with run(config, tmp_path) as (cfg, how):
        assert fake.calls == [("start", 3307)] and cfg.dbbench.backend == "auto"
        assert how["dbbench"].startswith("MariaDB: started for this run")
    assert fake.calls[-1] == ("stop", 3307)


def test_a_shared_server_is_stopped_by_the_last_run_not_the_one_that_started_it(monkeypatch, tmp_path, config):
    fake = FakeServer()
    fake.install(monkeypatch, tmp_path)
    monkeypatch.setattr(services, "mariadb_installed", lambda: True)
    first = run(config, tmp_path / "run1")
    first.__enter__()
    with run(config, tmp_path / "run2") as (_, how):
        assert how == {"dbbench": services.ALREADY_RUNNING}
        first.__exit__(None, None, None)          # the starter ends while run 2 still uses the server
        assert fake.calls == [("start", 3307)]
    assert fake.calls == [("start", 3307), ("stop", 3307)]


def test_a_server_started_by_hand_is_never_stopped_and_dead_users_do_not_count(monkeypatch, tmp_path, config):
    fake = FakeServer(running=True)
    fake.install(monkeypatch, tmp_path)
    users = tmp_path / "mariadb" / "users"
    users.mkdir(parents=True)
    (users / "999999999-deadbeef").touch()          # a run killed without leaving (no such pid)
    with run(config, tmp_path):
        pass
    assert fake.calls == [] and [f.name for f in users.iterdir() if f.name[0].isdigit()] == []
    (users / "started_by_run").touch()               # ... and one a killed run had started
    with run(config, tmp_path):
        pass
    assert fake.calls == [("stop", 3307)]


@pytest.mark.parametrize("running, installed, starts, expected", [
    (True, True, True, "MariaDB: the project's server, already running"),
    (False, False, True, "SQLite: MariaDB is not installed"),
    (False, True, False, "SQLite: MariaDB did not start ([mariadb] ERROR: port taken)"),
])
def test_no_start_or_stop_when_running_missing_or_failing(monkeypatch, tmp_path, config, running, installed,
                                                          starts, expected):
    fake = FakeServer(running=running, starts=starts)
    fake.install(monkeypatch, tmp_path)
    monkeypatch.setattr(services, "mariadb_installed", lambda: installed)
    with run(config, tmp_path) as (cfg, how):
        assert how["dbbench"].startswith(expected), how
        # SQLite said is SQLite run: `auto` would take whatever server answers on the port
        assert cfg.dbbench.backend == ("sqlite" if expected.startswith("SQLite") else "auto")
    assert ("stop", 3307) not in fake.calls


def test_a_run_that_asked_for_mariadb_is_told_it_did_not_start(monkeypatch, tmp_path, config):
    fake = FakeServer(starts=False)
    fake.install(monkeypatch, tmp_path)
    monkeypatch.setattr(services, "mariadb_installed", lambda: True)
    config.dbbench.backend = "mariadb"
    with run(config, tmp_path) as (cfg, how):
        assert cfg.dbbench.backend == "mariadb"
        assert how["dbbench"].startswith("MariaDB did not start ([mariadb] ERROR: port taken)"), how


def test_stored_sqlite_baselines_pin_sqlite_and_start_nothing(monkeypatch, tmp_path, config):
    fake = FakeServer()
    fake.install(monkeypatch, tmp_path)
    monkeypatch.setattr(services, "mariadb_installed", lambda: True)
    batch = tmp_path / "baseline" / "heldout" / "dbbench" / "seed0_batch_000"
    batch.mkdir(parents=True)
    (batch / "results.jsonl").write_text(json.dumps({"final": {"backend": "sqlite"}}) + "\n")
    with run(config, tmp_path / "baseline") as (cfg, how):
        assert cfg.dbbench.backend == "sqlite" and how["dbbench"].startswith("SQLite")
        assert config.dbbench.backend == "auto"     # the caller's config is left as it was
    assert fake.calls == []


def test_benchmarks_without_services_pass_the_config_through(monkeypatch, tmp_path, config):
    fake = FakeServer()
    fake.install(monkeypatch, tmp_path)
    with run(config, tmp_path, benchmarks=("alfworld", "webshop")) as (cfg, how):
        assert cfg is config and how == {}
    with registry.registered("counter", "toy_benchmark:BENCHMARK"), run(config, tmp_path, ("counter",)) as (cfg, how):
        assert cfg is config and how == {}
    assert fake.calls == []
