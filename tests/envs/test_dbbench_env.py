"""DBBench environment on the real MariaDB server (started here via launch/mariadb.sh; SQLite only
when the server cannot start, which the output says): table build and gold hashes, SQL output
format, judging, ctx fields and predicates, task identity, per-episode databases."""
import re

import pytest

from envs.dbbench import backends as B
from envs.dbbench import config as dbconfig
from envs.dbbench import judge, tasks
from envs.dbbench.env import DBBenchEnv, TIPS_HEADER, TOOL_HINT_HEADER

SPEC_ACTION = {"tool", "query", "answers", "h2_action", "h2_blocked_reason", "commit_gate_action",
               "commit_gate_reason"}
SPEC_STATE = {"sql_count", "last_sql", "last_result", "last_error_kind", "last_error_text",
              "last_result_was_error", "error_streak", "empty_streak", "text_only_streak", "loop_streak",
              "mutation_attempted", "candidate_answer", "candidate_answer_shape", "candidate_implausible",
              "remaining_rounds"}
SPEC_TASK = {"task_type", "answer_shape", "target_table", "description"}
SPEC_DBBENCH = {"sql_history", "sql_history_raw", "discovered_columns", "db_response", "round"}
SPEC_PREDICATES = {"execute_sql", "commit_final_answer", "no_sql_yet", "commit_before_sql",
                   "commit_empty_answer", "mutation_task", "mutation_not_attempted", "last_result_error",
                   "last_result_empty", "unknown_column_error", "syntax_error", "repeated_sql",
                   "candidate_answer_available", "remaining_rounds_low", "text_only_loop"}


@pytest.fixture()
def env(dbbench_section):
    e = DBBenchEnv(dbbench_section)
    yield e
    e.close()


def _task(env, split, task_id):
    return env.tasks(split)[task_id]


def _sql(env, query):
    return env.step(env.action_from_tool_call("execute_sql", {"query": query}))


def _commit(env, answers):
    return env.step(env.action_from_tool_call("commit_final_answer", {"answers": answers}))


def test_splits_identity_and_no_gold_in_payload(env):
    test, dev = env.tasks("test"), env.tasks("dev")
    assert len(test) == 300 and len(dev) == 60
    assert [t.task_id for t in test] == list(range(300))
    t = test[100]
    assert set(t.payload["entry"]) & {"label", "answer_md5", "sql"} == set()
    assert t.oracle["answer_md5"].startswith("[('") and t.oracle["label"][0].startswith("INSERT")
    again = DBBenchEnv(dbconfig.defaults(), backend=B.SQLiteBackend()).tasks("test")[100]
    assert again.payload == t.payload and len(t.payload["task_sha256"]) == 64
    m1 = env.task_manifest(t, seed=0)
    assert m1 == env.task_manifest(again, seed=0) and m1 != env.task_manifest(test[101], seed=0)
    assert m1["env_version"] == DBBenchEnv.env_version


def test_gold_answer_md5_reproduced_on_mutation_tasks(dbbench_section):
    """AgentBench's table hash after the gold SQL matches answer_md5: >=199/200 on MariaDB
    (task 225's gold data is inconsistent), >=195/200 on the SQLite fallback (dialect gaps)."""
    env = DBBenchEnv(dbbench_section)
    matched, misses, total = 0, [], 0
    try:
        for t in env.tasks("test"):
            if not tasks.is_mutation(t.payload["entry"]):
                continue
            total += 1
            env.reset(t)
            _sql(env, t.oracle["label"][0])
            if _commit(env, ["done"]).reward == 1.0:
                matched += 1
            else:
                misses.append(t.task_id)
    finally:
        env.close()
    print(f"\n[dbbench] gold answer_md5 on {env.backend.name}: {matched}/{total}, misses {misses}")
    assert total == 200
    assert matched >= (199 if env.backend.name == "mariadb" else 195)


def test_mutation_judged_by_table_hash_not_answer_text(env):
    t = _task(env, "test", 299)  # UPDATE `Team Information` SET Capacity = '45,000' ...
    env.reset(t)
    assert _commit(env, ["I updated it"]).reward == 0.0  # nothing executed: hash unchanged
    env.reset(t)
    _sql(env, t.oracle["label"][0])
    _sql(env, t.oracle["label"][0])  # an idempotent UPDATE twice is still right
    assert _commit(env, []).reward == 1.0
    insert = _task(env, "test", 100)
    env.reset(insert)
    _sql(env, insert.oracle["label"][0])
    _sql(env, insert.oracle["label"][0])  # a duplicate INSERT breaks the hash
    assert _commit(env, ["done"]).reward == 0.0
    assert env.final_result() == {**env.final_result(), "reward": 0.0, "success": False, "status": "completed"}


def test_sql_output_format_errors_truncation_and_commit(env, dbbench_section):
    t = _task(env, "test", 0)
    table = t.payload["entry"]["table"]["table_name"]
    env.reset(t)
    r = _sql(env, f"SELECT Notes FROM `{table}` WHERE Method = 'decision'")
    assert r.observation == "[('Women +60kg Bronze',)]" and not r.done
    assert _sql(env, "   ").observation == "No response from database."
    err = _sql(env, f"SELECT nope FROM `{table}`").observation
    assert re.match(r"^1054 \(42S22\): ", err) and "nope" in err
    assert re.match(r"^1064 \(42000\): ", _sql(env, f"SELECT Notes FROM {table}").observation)
    big = _sql(env, f"SELECT * FROM `{table}`").observation
    assert len(big) == 800 + len("[TRUNCATED]") and big.endswith("[TRUNCATED]")
    assert _sql(env, f"INSERT INTO `{table}` (Result) VALUES ('zz')").observation == "[]"
    if env.backend.name == "mariadb":
        assert _sql(env, "SELECT 7/2").observation == "[(Decimal('3.5000'),)]"
        # committed after the statement: a second connection sees the row
        other = B.MariaDBBackend(port=dbbench_section.port)
        try:
            other.execute(f"USE `{env.backend.database}`")
            assert other.execute(f"SELECT count(*) FROM `{table}` WHERE Result='zz'").rows == [(1,)]
        finally:
            other.conn.close()


def test_judge_rules():
    m = judge.answers_match
    assert m(["167"], ["167.0"]) and m(["3.504"], ["3.5"]) and not m(["3.52"], ["3.5"])
    assert m(["45%"], ["45"]) and m(["1,234,567"], ["1234567.0"]) and m([""], ["0"]) and m(["None"], ["0"])
    assert m(["[('Women +60kg Bronze',)]"], ["Women +60kg Bronze"])
    assert m(["[(Decimal('12.0000'),)]"], ["12"])
    assert m(["[('a',), ('b',)]"], ["b", "a"]) and m(["b", "a"], ["a", "b"])
    assert m(["2", "1.0"], ["1", "2"]) and not m(["1", "1"], ["1", "2"])
    assert not m([], ["x"]) and not m(["The answer is x."], ["x"]) and not m(["X"], ["x"])
    assert not m(["a"], ["a", "b"])


def test_select_tasks_judged_against_label(env):
    selects = [t for t in env.tasks("test") if not tasks.is_mutation(t.payload["entry"])]
    assert len(selects) == 100
    for t in selects[:25]:
        env.reset(t)
        assert _commit(env, list(t.oracle["label"])).reward == 1.0
        env.reset(t)
        assert _commit(env, ["definitely wrong value"]).reward == 0.0
        assert env.final_result()["status"] == "completed"


def test_round_limit_status(env):
    env.reset(_task(env, "test", 0))
    _sql(env, "SELECT 1")
    res = env.final_result()
    assert res["status"] == "task_limit_reached" and res["reward"] == 0.0 and not res["success"]


def test_ctx_fields_and_predicates(env):
    t = _task(env, "test", 299)
    table = t.payload["entry"]["table"]["table_name"]
    env.reset(t)
    ctx = env.hook_context("on_init", turn=0)
    assert set(ctx["action"]) == SPEC_ACTION and set(ctx["state"]) == SPEC_STATE
    assert set(ctx["task"]) == SPEC_TASK and set(ctx["dbbench"]) == SPEC_DBBENCH
    assert set(ctx["predicates"]) == SPEC_PREDICATES
    assert ctx["task"] == {"task_type": "UPDATE", "answer_shape": "none", "target_table": table,
                           "description": t.payload["entry"]["description"]}
    assert ctx["predicates"]["no_sql_yet"] and ctx["predicates"]["mutation_not_attempted"]
    assert ctx["state"]["remaining_rounds"] == 20

    commit = env.action_from_tool_call("commit_final_answer", {"answers": []})
    p = env.hook_context("on_before_action", turn=0, action=commit)["predicates"]
    assert p["commit_before_sql"] and p["commit_empty_answer"] and p["commit_final_answer"]

    _sql(env, f"SELECT Capacity FORM `{table}`")
    ctx = env.hook_context("on_post_step", turn=1, action=env.last_action)
    assert ctx["state"]["last_error_kind"] == "syntax" and ctx["predicates"]["syntax_error"]
    assert ctx["state"]["last_result_was_error"] and ctx["state"]["error_streak"] == 1
    assert ctx["state"]["remaining_rounds"] == 18 and ctx["dbbench"]["round"] == 2
    _sql(env, f"SELECT capacityy FROM `{table}`")
    ctx = env.hook_context("on_post_step", turn=2, action=env.last_action)
    assert ctx["predicates"]["unknown_column_error"] and ctx["state"]["error_streak"] == 2
    _sql(env, f"SELECT capacityy FROM `{table}`")
    ctx = env.hook_context("make_pre_hint", turn=3)
    assert ctx["state"]["loop_streak"] == 1 and ctx["predicates"]["repeated_sql"]
    assert ctx["action"]["tool"] == "execute_sql"  # the last action at make_pre_hint

    _sql(env, f"DESCRIBE `{table}`")
    _sql(env, f"SELECT Capacity FROM `{table}` WHERE Team = 'nobody'")
    ctx = env.hook_context("make_pre_hint", turn=5)
    assert ctx["dbbench"]["discovered_columns"] == {table: ["Team", "Location", "Stadium", "Capacity"]}
    assert ctx["predicates"]["last_result_empty"] and ctx["state"]["empty_streak"] == 1
    _sql(env, f"SELECT max(Team) FROM `{table}` WHERE Team = 'nobody'")
    assert env.hook_context("make_pre_hint", turn=6)["state"]["last_error_kind"] == "null_agg"
    _sql(env, f"SELECT Team, Capacity FROM `{table}` WHERE Team = 'Brown Bears'")
    s = env.hook_context("make_pre_hint", turn=7)["state"]
    assert s["candidate_answer"] == ["Brown Bears", "3,500"] and s["candidate_answer_shape"] == "row"
    assert not s["candidate_implausible"]

    env.on_no_tool_call()
    env.on_no_tool_call()
    ctx = env.hook_context("make_pre_hint", turn=17)
    assert ctx["predicates"]["text_only_loop"] and ctx["predicates"]["remaining_rounds_low"]
    _sql(env, t.oracle["label"][0])
    ctx = env.hook_context("on_post_step", turn=18, action=env.last_action)
    assert ctx["state"]["mutation_attempted"] and not ctx["predicates"]["mutation_not_attempted"]
    assert ctx["state"]["text_only_streak"] == 0 and ctx["state"]["last_error_kind"] == ""
    assert ctx["dbbench"]["sql_history_raw"][-1] == t.oracle["label"][0]
    assert ctx["dbbench"]["sql_history"][-1] == t.oracle["label"][0].lower()


def test_prompt_tips_and_tool_hint(env):
    tools = env.tool_specs()
    assert [x["function"]["name"] for x in tools] == ["execute_sql", "commit_final_answer"]
    assert env.apply_tool_hint(tools, "HINT") == tools  # DBBench: hint goes to the system prompt
    text = env.system_prompt(["tip one", "tip two"], "HINT")
    assert f"{TIPS_HEADER}\n- tip one\n- tip two" in text and text.endswith(f"{TOOL_HINT_HEADER}\nHINT")
    assert TIPS_HEADER not in env.system_prompt([], "") and "20 rounds" in env.system_prompt([], "")
    first = env.reset(_task(env, "test", 0))
    assert first.startswith("Additional table information about the question: The name of this table")
    assert first.endswith("Question: What are the Notes when the Method is decision?")
    assert env.action_from_tool_call("execute_sql", {"q": 1}) is None
    assert env.action_from_tool_call("nope", {}) is None
    assert env.action_from_tool_call("commit_final_answer", {"answers": "x"}).arguments == {"answers": ["x"]}


def test_one_database_per_episode_dropped(env):
    if env.backend.name != "mariadb":
        pytest.skip("per-episode server databases only exist on MariaDB")
    env.reset(_task(env, "test", 0))
    first = env.backend.database
    env.reset(_task(env, "test", 1))
    second = env.backend.database
    assert first != second and first.startswith("dbbench_")
    # The agent sees its own database as `dbbench`; a second connection sees the real names.
    assert "dbbench" in {r[0] for r in env.backend.execute("SHOW DATABASES").rows}
    probe = B.MariaDBBackend(port=env.cfg.port)
    try:
        names = {r[0] for r in probe.execute("SHOW DATABASES").rows}
        assert second in names and first not in names
        env.close()
        assert second not in {r[0] for r in probe.execute("SHOW DATABASES").rows}
    finally:
        probe.close()


def test_identifiers_sanitised_and_dev_empty_column_runs(env):
    assert B.sanitise_columns(["a", "A", " b\n", "", "a"]) == ["a", "A_1", "b", "column_4", "a_2"]
    dev5 = _task(env, "dev", 5)
    env.reset(dev5)
    out = _sql(env, f"SELECT * FROM `{env.table}` LIMIT 1").observation
    assert out.startswith("[(")


def test_sqlite_fallback_emulates_show_and_describe(caplog):
    env = DBBenchEnv(dbconfig.defaults(), backend=B.SQLiteBackend())
    try:
        t = env.tasks("test")[299]
        env.reset(t)
        assert _sql(env, "SHOW TABLES").observation == "[('Team Information',)]"
        assert _sql(env, "DESCRIBE `Team Information`").observation.startswith("[('Team', 'text', 'YES'")
        assert env.hook_context("make_pre_hint", turn=2)["dbbench"]["discovered_columns"]["Team Information"][0] == "Team"
        assert _sql(env, "SELECT CONCAT(Team, '!') FROM `Team Information` WHERE team='brown bears'").observation \
            == "[('Brown Bears!',)]"
        assert _sql(env, "SELECT nope FROM `Team Information`").observation.startswith("1054 (42S22)")
        _sql(env, t.oracle["label"][0])
        assert _commit(env, ["ok"]).reward == 1.0
    finally:
        env.close()


def test_auto_backend_falls_back_to_sqlite_when_no_server(capsys):
    cfg = dbconfig.defaults()
    cfg.backend, cfg.port, cfg.connect_timeout_s = "auto", 1, 1.0
    env = DBBenchEnv(cfg)
    assert env.backend.name == "sqlite"
    assert '"backend": "sqlite"' in capsys.readouterr().err
    cfg.backend = "mariadb"
    with pytest.raises(RuntimeError, match="launch/mariadb.sh start"):
        DBBenchEnv(cfg)


def test_session_settings_restored_each_episode(env):
    if env.backend.name != "mariadb":
        pytest.skip("MariaDB session state")
    env.reset(_task(env, "test", 0))
    _sql(env, "SET SESSION sql_mode='STRICT_ALL_TABLES'")
    env.reset(_task(env, "test", 1))
    assert _sql(env, "SELECT @@SESSION.sql_mode").observation == f"[('{B.SQL_MODE}',)]"
    _sql(env, "KILL CONNECTION_ID()")  # an agent that kills its own connection...
    env.reset(_task(env, "test", 2))   # ...does not break the next episode
    assert _sql(env, "SELECT 1").observation == "[(1,)]"


def test_sqlite_statement_timeout(monkeypatch):
    monkeypatch.setattr(B, "STATEMENT_TIMEOUT_S", 0.5)
    b = B.SQLiteBackend()
    b.create("t", ["a"], [["1"]])
    r = b.execute("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c")
    assert r.rows is None and r.error.startswith("1969 (70100): Query execution was interrupted")
    assert b.execute("SELECT a FROM t").rows == [("1",)]
    b.close()


def test_gold_hash_computed_when_answer_md5_missing(env):
    """Synthetic mutation tasks may lack answer_md5: the env runs the gold SQL on a scratch DB."""
    t = _task(env, "test", 299)
    entry = dict(t.payload["entry"], label=t.oracle["label"])
    synthetic = tasks.task_from_entry(entry, "synthetic", 0, env.env_version)
    assert synthetic.oracle["answer_md5"] == ""
    assert env.gold_hash(synthetic) in t.oracle["answer_md5"]
    env.reset(synthetic)
    _sql(env, synthetic.oracle["label"][0])
    assert _commit(env, ["done"]).reward == 1.0
    env.reset(synthetic)
    assert _commit(env, ["done"]).reward == 0.0
