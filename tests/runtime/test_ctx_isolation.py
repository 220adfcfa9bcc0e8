"""`hook_context` returns views that share the env's own containers (no copy there): the hook
call's one copy (frozen inline, pickled to the hook process) must still keep every hook write
away from the env's state, under both isolations."""
import copy

import pytest

from envs.dbbench import config as dbconfig
from envs.dbbench.env import DBBenchEnv
from hr1_jax.patch import compile_patch

ATTEMPTS = [  # each hook tries one write through a container the ctx shares with the env
    """def hook(ctx, nb):
    for cols in ctx["dbbench"]["discovered_columns"].values():
        cols.append("injected")
    return None
""",
    """def hook(ctx, nb):
    ctx["dbbench"]["discovered_columns"]["injected"] = ["x"]
    return None
""",
    """def hook(ctx, nb):
    ctx["state"]["candidate_answer"].append("injected")
    return None
""",
    """def hook(ctx, nb):
    ctx["state"]["last_result"].clear()
    return None
""",
]


@pytest.fixture()
def env():
    cfg = dbconfig.defaults()
    cfg.backend = "sqlite"
    e = DBBenchEnv(cfg)
    yield e
    e.close()


@pytest.mark.parametrize("isolation", ["inline", "process"])
def test_no_hook_write_reaches_the_env_state(env, isolation):
    task = next(t for t in env.tasks("test") if t.payload["entry"].get("type", [""])[0] != "UPDATE")
    table = task.payload["entry"]["table"]["table_name"]
    env.reset(task)
    for query in (f"DESCRIBE `{table}`", f"SELECT * FROM `{table}` LIMIT 3"):
        env.step(env.action_from_tool_call("execute_sql", {"query": query}))
    view = env.hook_context("on_post_step", turn=2, action=env.last_action)
    name = next(iter(env.discovered))
    assert view["dbbench"]["discovered_columns"][name] is env.discovered[name]   # shared, not copied
    assert view["state"]["last_result"] is env.s["last_result"] and env.s["candidate_answer"]
    state, discovered = copy.deepcopy(env.s), copy.deepcopy(env.discovered)
    before = copy.deepcopy(env.hook_context("on_post_step", turn=2, action=env.last_action))
    patch = {"benchmark": "dbbench", "description": "writes through ctx",
             "actions": [{"type": "add_code_hook", "hook": "on_post_step", "code": code} for code in ATTEMPTS]}
    compiled = compile_patch(patch, "dbbench", isolation=isolation)
    outcomes = compiled.call("on_post_step", env.hook_context("on_post_step", turn=2, action=env.last_action), {})
    assert len(outcomes) == len(ATTEMPTS) and all(o.status == "error" for o in outcomes)
    assert env.s == state and env.discovered == discovered
    assert env.hook_context("on_post_step", turn=2, action=env.last_action) == before
