"""`rollout.backend=ray` on a local Ray cluster started here (2 CPUs): the pool's job contract
(streamed results, identities, per-task budgets, kill/retry accounting) and the paired reward with
its cache, against the local subprocess pool on the same jobs."""
import json
import os
import signal

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (the `ray` extra): rollout.backend=ray untested")

from hr1_jax.config import base_config, validate_config  # noqa: E402
from hr1_jax.errors import InputError  # noqa: E402
from hr1_jax.rollout.batches import baseline_metadata, run_batch  # noqa: E402
from hr1_jax.rollout.pool import JobSpec, WorkerPool  # noqa: E402
from hr1_jax.rollout.ray_backend import RayWorkerPool  # noqa: E402
from hr1_jax.rollout.reward import RewardContext, score_group  # noqa: E402

TOY = "toy_env:CounterEnv"
AGENT = {"factory": "toy_env:make_agent"}
SLEEP = "0.05"   # per agent call: a 10-task job lasts long enough to kill its actor mid-way


def spec(tasks, target=AGENT):
    return JobSpec(benchmark=TOY, split="test", task_ids=list(tasks), target=dict(target))


@pytest.fixture(scope="module")
def cluster():
    # Ray's worker processes inherit the environment of the node started here.
    saved = os.environ.get("HR1_TOY_AGENT_SLEEP")
    os.environ["HR1_TOY_AGENT_SLEEP"] = SLEEP
    for attempt in range(3):   # Ray gives its raylet a fixed 30 s to register: a loaded box may miss it
        try:
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=100 * 2**20)
            break
        except Exception:
            ray.shutdown()
            if attempt == 2:
                raise
    yield
    ray.shutdown()
    if saved is None:
        os.environ.pop("HR1_TOY_AGENT_SLEEP", None)
    else:
        os.environ["HR1_TOY_AGENT_SLEEP"] = saved


def outcome(results):
    return sorted((r["task_id"], r["status"], r["reward"], r["identity"]["sha256"], tuple(r["actions"]))
                  for r in results)


def test_ray_actors_run_the_same_jobs_as_the_local_pool(cluster):
    with RayWorkerPool(num_workers=2, job_timeout_s=60, max_retries=1) as pool:
        handles = [pool.submit(spec(range(i * 3, i * 3 + 3))) for i in range(3)]
        on_ray = [r for h in handles for r in h.collect(timeout_s=120)]
        seen = json.loads(pool.run(spec([0], {"factory": "toy_env:make_env_report_agent"}))[0]
                          ["trajectory"][2]["content"])
        assert pool.stats["workers_replaced"] == 0 and len(set(pool.worker_pids())) == 2
    with WorkerPool(num_workers=2, job_timeout_s=60, max_retries=1) as local:
        on_pool = local.run(spec(range(9)))
    assert outcome(on_ray) == outcome(on_pool) and all(r["status"] == "completed" for r in on_ray)
    assert seen["pid"] != os.getpid()
    assert (seen["JAX_PLATFORMS"], seen["CUDA_VISIBLE_DEVICES"], seen["TPU_VISIBLE_CHIPS"]) == ("cpu", "", "")


def test_an_actor_killed_mid_job_is_replaced_and_its_task_retried_and_counted(cluster):
    with RayWorkerPool(num_workers=2, job_timeout_s=60, max_retries=2) as pool:
        h = pool.submit(spec(range(10)))
        it = h.results(timeout_s=120)
        first = next(it)
        victims = pool.busy_worker_pids()
        assert victims
        os.kill(victims[0], signal.SIGKILL)
        results = [first] + list(it)
        assert sorted(r["task_id"] for r in results) == list(range(10))
        assert all(r["status"] == "completed" and r["reward"] == 1.0 for r in results)
        assert pool.stats["workers_replaced"] == 1 and pool.stats["job_retries"] == 1 and h.retries == 1
        assert pool.stats["jobs_failed"] == 0 and victims[0] not in pool.worker_pids()


def test_overrun_tasks_are_killed_at_budget_and_fail_as_infra_not_zero(cluster):
    # Each agent call sleeps 50 ms: a 20 ms budget is overrun by every task (after the actor is up).
    with RayWorkerPool(num_workers=1, job_timeout_s=60, max_retries=0) as pool:
        assert pool.run(spec([0]))[0]["status"] == "completed"   # actor started, env built
        pool.job_timeout_s = 0.02
        results = pool.run(spec([1, 2]))
        assert pool.stats["timeouts"] == 2 and pool.stats["workers_replaced"] == 2
    assert [r["status"] for r in results] == ["infra_error", "infra_error"]
    assert all(r["reward"] is None and "budget" in r["error"] for r in results)


def test_unknown_task_is_fatal_without_retries_on_ray(cluster):
    with RayWorkerPool(num_workers=1, job_timeout_s=60, max_retries=3) as pool:
        results = pool.run(spec([999]))
        assert pool.stats["job_retries"] == 0
    assert results[0]["status"] == "infra_error" and "no tasks [999]" in results[0]["error"]


def test_reward_on_the_ray_backend_equals_the_local_pool_and_is_cached(cluster, tmp_path):
    c = base_config()
    c.benchmark, c.tasks = "dbbench", "0:6"
    c.dbbench.backend = "sqlite"
    c.rollout.backend = "ray"
    validate_config(c)
    hint = ("def hook(ctx, nb):\n    if ctx['predicates']['no_sql_yet'] and not nb.get('hinted'):\n"
            "        nb['hinted'] = True\n        return {'message': 'Run DESCRIBE on the table first.'}\n"
            "    return None\n")
    patch = {"benchmark": "dbbench", "description": "schema hint",
             "actions": [{"type": "add_code_hook", "hook": "make_pre_hint", "code": hint}]}
    texts = [f"- guessed names\n</think>\n<patch>{json.dumps(patch)}</patch>"] * 3 + ["no patch here"]
    with WorkerPool(c) as local:
        episodes = run_batch(local, "dbbench", "test", list(range(6)), target=c.target.to_dict(), seed=0)
        row = {"prompt": [], "label": "", "metadata": baseline_metadata("dbbench", "test", 0, episodes,
                                                                        target_name=c.target.name)}
        want = score_group([row] * 4, texts, RewardContext(c, pool=local, cache_dir=str(tmp_path / "local")))
    with RewardContext(c, cache_dir=str(tmp_path / "ray")) as ctx:   # builds its pool from the config
        got = score_group([row] * 4, texts, ctx)
        assert isinstance(ctx.pool, RayWorkerPool) and ctx.counters["evaluations"] == 1
        again = score_group([row], texts[:1], ctx)[0]
    assert [r.eval_status for r in got] == ["ok", "ok", "ok", "invalid_patch"]
    assert [(r.score, r.patched_rewards) for r in got] == [(r.score, r.patched_rewards) for r in want]
    assert again.cache_hit and again.score == got[0].score


def test_a_resource_no_node_offers_is_a_clear_error_not_a_pending_fleet(cluster):
    c = base_config()
    c.rollout.backend, c.rollout.ray_resource = "ray", "hr1_rollout_missing"
    validate_config(c)
    with pytest.raises(InputError, match="hr1_rollout_missing"):
        RayWorkerPool(c)


def test_hr1_rollout_on_the_ray_backend_writes_what_the_local_pool_writes(cluster, tmp_path):
    from hr1_jax.rollout.batches import read_results
    from hr1_jax.rollout.cli import rollout_stage
    views = {}
    for backend in ("local", "ray"):
        c = base_config()
        c.benchmark, c.tasks, c.dbbench.backend, c.rollout.backend = "dbbench", "0:4", "sqlite", backend
        validate_config(c)
        assert rollout_stage(c, str(tmp_path / backend)) == 0
        views[backend] = [(ep["task_id"], ep["reward"], ep["identity"]["sha256"], ep["actions"])
                          for ep in read_results(str(tmp_path / backend))]
    assert views["ray"] == views["local"] and len(views["ray"]) == 4
