"""DBBench faults never become scores: a MariaDB connection killed (a real `KILL` from a second
connection) or a server stopped mid-episode ends the episode as "infra_error" with no reward, also
right before a mutation commit; the backend is decided once per process, recorded in the identity
and results, and never switched to SQLite."""
import json

import pytest

from envs.dbbench import backends as B
from envs.dbbench import env as dbenv
from envs.dbbench.env import DBBenchEnv
from hr1_jax.rollout import identity
from hr1_jax.runtime import run_episode

SELECT_TASK, MUTATION_TASK = 0, 100   # test split: a SELECT task and an INSERT task


class PlannedAgent:
    """A target that makes the planned tool calls, one per turn; `faults[turn]` runs before that
    turn's reply (a real fault injected while the episode is in flight)."""
    name = "planned"

    def __init__(self, calls: list[tuple[str, dict]], faults: dict | None = None):
        self.calls, self.faults, self.turn = calls, faults or {}, 0

    def chat(self, messages, tools):
        turn, self.turn = self.turn, self.turn + 1
        if turn in self.faults:
            self.faults[turn]()
        name, args = self.calls[turn]
        return {"role": "assistant", "content": "",
                "tool_calls": [{"id": f"call_{turn}", "type": "function",
                                "function": {"name": name, "arguments": json.dumps(args)}}]}


def _sql(query: str) -> tuple[str, dict]:
    return "execute_sql", {"query": query}


def _commit(answers: list[str]) -> tuple[str, dict]:
    return "commit_final_answer", {"answers": answers}


def _solve(task) -> list[tuple[str, dict]]:
    """The gold play: the gold mutation then a commit, or a commit of the label."""
    if task.task_id == MUTATION_TASK:
        return [_sql(task.oracle["label"][0]), _commit(["done"])]
    return [_sql("SELECT 1"), _commit(task.oracle["label"])]


def _kill_connection_of(env):
    """`KILL` the env's connection from a second connection: a real lost connection."""
    killer = env.backend.scratch()
    try:
        result = killer.execute(f"KILL {env.backend.conn.thread_id()}")
        assert result.error == "", result.error
    finally:
        killer.close()


def _assert_infra_error(r):
    assert r.status == "infra_error" and r.reward is None and not r.success
    assert "DBUnavailable" in r.error and "connection lost" in r.error


@pytest.fixture()
def mariadb_env(dbbench_section):
    if dbbench_section.backend != "mariadb":
        pytest.skip("needs the MariaDB server")
    env = DBBenchEnv(dbbench_section)
    yield env
    env.close()


@pytest.fixture()
def fresh_auto_choices(monkeypatch):
    """This process has not decided `auto` yet (each test decides it anew)."""
    monkeypatch.setattr(dbenv, "_AUTO_CHOICES", {})


def test_killed_connection_mid_episode_is_infra_error(mariadb_env):
    task = mariadb_env.tasks("test")[SELECT_TASK]
    agent = PlannedAgent([_sql("SELECT no_such_column"), _sql("SELECT 1"), _commit(task.oracle["label"])],
                         faults={1: lambda: _kill_connection_of(mariadb_env)})
    r = run_episode(mariadb_env, agent, task)
    assert r.trajectory[3]["content"].startswith("1054 (42S22)")   # the agent's own SQL error: an observation
    _assert_infra_error(r)
    assert r.identity["backend"] == "mariadb"
    again = run_episode(mariadb_env, PlannedAgent(_solve(task)), task)   # reconnects to the same server
    assert again.status == "completed" and again.reward == 1.0 and again.final["backend"] == "mariadb"


def test_killed_connection_before_mutation_commit_is_infra_error_not_zero(mariadb_env):
    task = mariadb_env.tasks("test")[MUTATION_TASK]
    solved = run_episode(mariadb_env, PlannedAgent(_solve(task)), task)
    assert solved.reward == 1.0   # the same play, unharmed, is a correct answer
    faulted = run_episode(mariadb_env, PlannedAgent(_solve(task), {1: lambda: _kill_connection_of(mariadb_env)}),
                          task)
    _assert_infra_error(faulted)
    assert "hashing the answer table" in faulted.error


def test_agent_killing_its_own_connection_is_its_observation(mariadb_env):
    task = mariadb_env.tasks("test")[MUTATION_TASK]
    calls = [_sql("KILL CONNECTION_ID()")] + _solve(task)
    r = run_episode(mariadb_env, PlannedAgent(calls), task)
    assert r.trajectory[3]["content"].startswith("1927 ")   # "Connection was killed"
    assert r.status == "completed" and r.reward == 1.0      # same server, same database afterwards


def test_backend_is_part_of_identity_and_results(dbbench_section):
    sqlite_env = DBBenchEnv(dbbench_section, backend=B.SQLiteBackend())
    task = sqlite_env.tasks("test")[SELECT_TASK]
    r = run_episode(sqlite_env, PlannedAgent(_solve(task)), task)
    assert r.reward == 1.0 and r.final["backend"] == "sqlite" and r.identity["backend"] == "sqlite"
    if dbbench_section.backend != "mariadb":
        return
    baseline = identity.batch_identity("dbbench", "test", 0, [r.identity])
    maria_env = DBBenchEnv(dbbench_section)
    try:
        rerun = run_episode(maria_env, PlannedAgent(_solve(task)), task)
    finally:
        maria_env.close()
    assert rerun.identity["backend"] == "mariadb" and rerun.final["backend"] == "mariadb"
    with pytest.raises(identity.IdentityError):   # a SQLite baseline never pairs with a MariaDB rerun
        identity.assert_rerun_matches(baseline, [rerun.to_dict()])


def test_stopped_server_is_infra_error_and_never_falls_back_to_sqlite(throwaway_mariadb, fresh_auto_choices):
    cfg = throwaway_mariadb.section("auto")
    env = DBBenchEnv(cfg)
    assert env.backend.name == "mariadb"
    tasks = env.tasks("test")
    try:
        r = run_episode(env, PlannedAgent(_solve(tasks[MUTATION_TASK]), {1: throwaway_mariadb.stop}),
                        tasks[MUTATION_TASK])   # stopped between the gold INSERT and the commit
        _assert_infra_error(r)
        assert r.identity["backend"] == "mariadb"
        later = run_episode(env, PlannedAgent(_solve(tasks[SELECT_TASK])), tasks[SELECT_TASK])
        assert later.status == "infra_error" and "unreachable" in later.error
        with pytest.raises(B.DBUnavailable):   # an env rebuilt in this process (the pool does that)
            DBBenchEnv(cfg)
        throwaway_mariadb.start()
        back = run_episode(env, PlannedAgent(_solve(tasks[MUTATION_TASK])), tasks[MUTATION_TASK])
        assert back.reward == 1.0 and back.final["backend"] == "mariadb"
    finally:
        throwaway_mariadb.start()
        env.close()


def test_auto_is_decided_once_per_process(throwaway_mariadb, fresh_auto_choices):
    cfg = throwaway_mariadb.section("auto")
    throwaway_mariadb.stop()
    try:
        assert DBBenchEnv(cfg).backend.name == "sqlite"
        throwaway_mariadb.start()
        assert DBBenchEnv(cfg).backend.name == "sqlite"   # a server that appears later changes nothing
    finally:
        throwaway_mariadb.start()


def test_pool_pins_auto_once_in_the_parent_for_every_worker(throwaway_mariadb, fresh_auto_choices):
    from envs.registry import pin_run_config
    running = pin_run_config({"dbbench": throwaway_mariadb.section("auto").to_dict(), "other": 1})
    assert running["dbbench"]["backend"] == "mariadb" and running["other"] == 1
    assert pin_run_config({"dbbench": throwaway_mariadb.section("sqlite").to_dict()})["dbbench"]["backend"] == "sqlite"
