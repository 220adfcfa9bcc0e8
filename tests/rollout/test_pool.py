"""The subprocess worker pool on the toy counter env: streaming, crash/hang recovery, no hang."""
import json
import os
import signal
import time

import pytest

from hr1_jax.rollout.pool import JobSpec, WorkerPool, worker_shares

TOY = "toy_env:CounterEnv"
AGENT = {"factory": "toy_env:make_agent"}


def spec(tasks, **kw):
    return JobSpec(benchmark=TOY, split="test", task_ids=list(tasks), target=dict(AGENT, **kw.pop("target", {})), **kw)


def test_pool_runs_jobs_in_parallel_workers_and_streams_results():
    with WorkerPool(num_workers=2, job_timeout_s=60, max_retries=1) as pool:
        handles = [pool.submit(spec(range(i * 3, i * 3 + 3))) for i in range(3)]
        results = [r for h in handles for r in h.collect(timeout_s=60)]
        assert sorted(r["task_id"] for r in results) == list(range(9))
        assert all(r["success"] and r["reward"] == 1.0 for r in results)
        assert all(len(r["identity"]["sha256"]) == 64 for r in results)
        assert pool.stats["workers_replaced"] == 0


def test_worker_env_hides_accelerators_and_bad_agent_is_infra_error():
    with WorkerPool(num_workers=1, job_timeout_s=60, max_retries=0) as pool:
        ok = pool.run(JobSpec(benchmark=TOY, split="test", task_ids=[0],
                              target={"factory": "toy_env:make_env_report_agent"}))
        bad = pool.run(JobSpec(benchmark=TOY, split="test", task_ids=[0],
                               target={"factory": "os:getenv"}))  # getenv(task, seed, target) -> TypeError
    seen = json.loads(ok[0]["trajectory"][2]["content"])
    assert seen["pid"] != os.getpid()
    assert (seen["JAX_PLATFORMS"], seen["CUDA_VISIBLE_DEVICES"], seen["TPU_VISIBLE_CHIPS"]) == ("cpu", "", "")
    assert bad[0]["status"] == "infra_error" and bad[0]["reward"] is None


def test_sigkilled_worker_is_replaced_and_batch_completes(monkeypatch):
    monkeypatch.setenv("HR1_TOY_AGENT_SLEEP", "0.05")
    with WorkerPool(num_workers=2, job_timeout_s=60, max_retries=2) as pool:
        h = pool.submit(spec(range(10)))
        it = h.results(timeout_s=60)
        first = next(it)
        victims = pool.busy_worker_pids()
        assert victims
        os.kill(victims[0], signal.SIGKILL)
        rest = list(it)
        results = [first] + rest
        assert sorted(r["task_id"] for r in results) == list(range(10))
        assert all(r["status"] == "completed" for r in results)
        assert pool.stats["workers_replaced"] >= 1 and h.retries >= 1
        assert victims[0] not in pool.worker_pids()


def test_hung_worker_is_killed_at_budget_and_tasks_fail_as_infra_not_zero(monkeypatch):
    monkeypatch.setenv("HR1_TOY_AGENT_SLEEP", "30")
    t0 = time.monotonic()
    with WorkerPool(num_workers=1, job_timeout_s=1.5, max_retries=1) as pool:
        results = pool.run(spec([0, 1]))
        assert pool.stats["timeouts"] == 4   # each task is blamed alone: 1 run + 1 retry apiece
    assert time.monotonic() - t0 < 40
    assert [r["status"] for r in results] == ["infra_error", "infra_error"]
    assert all(r["reward"] is None and "budget" in r["error"] for r in results)


def test_unknown_task_is_fatal_without_retries():
    with WorkerPool(num_workers=1, job_timeout_s=60, max_retries=3) as pool:
        results = pool.run(spec([999]))
        assert pool.stats["job_retries"] == 0
    assert results[0]["status"] == "infra_error" and "no tasks [999]" in results[0]["error"]


def test_worker_shares_split_a_batch_contiguously_and_evenly():
    assert worker_shares(list(range(10)), 2) == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
    assert worker_shares([7, 3, 5], 2) == [[7, 3], [5]]
    assert worker_shares([4], 3) == [[4]]
    assert worker_shares([], 2) == []
    shares = worker_shares(list(range(11)), 4)
    assert [t for s in shares for t in s] == list(range(11)) and sorted(map(len, shares)) == [2, 3, 3, 3]


def test_a_crash_blames_only_the_task_in_flight_not_the_tasks_after_it(tmp_path, monkeypatch):
    crash = tmp_path / "crash_once"
    crash.write_text("x")
    monkeypatch.setenv("HR1_TOY_AGENT_CRASH_FILE", str(crash))
    with WorkerPool(num_workers=1, job_timeout_s=60, max_retries=0) as pool:
        results = sorted(pool.run(spec(range(6))), key=lambda r: r["task_id"])
        assert pool.stats["workers_replaced"] == 1 and pool.stats["jobs_failed"] == 1
    assert results[0]["status"] == "infra_error" and "worker died" in results[0]["error"]
    assert [r["status"] for r in results[1:]] == ["completed"] * 5   # never started: not blamed


def test_the_job_queued_behind_a_killed_workers_job_is_requeued_unblamed(monkeypatch):
    monkeypatch.setenv("HR1_TOY_AGENT_SLEEP", "0.05")
    with WorkerPool(num_workers=1, job_timeout_s=60, max_retries=1) as pool:
        first, second = pool.submit(spec([0, 1, 2])), pool.submit(spec([3, 4]))
        it = first.results(timeout_s=60)
        got = [next(it)]
        assert pool._workers[0].queued is not None   # the second job already sits with the worker
        os.kill(pool.busy_worker_pids()[0], signal.SIGKILL)
        got += list(it) + second.collect(timeout_s=60)
        assert sorted(r["task_id"] for r in got) == [0, 1, 2, 3, 4]
        assert all(r["status"] == "completed" for r in got)
        assert (first.retries, second.retries, pool.stats["job_retries"]) == (1, 0, 1)


def test_an_idle_worker_that_dies_is_replaced_and_the_pool_still_runs_jobs():
    with WorkerPool(num_workers=2, job_timeout_s=60, max_retries=0) as pool:
        assert len(pool.run(spec(range(4)))) == 4
        victim = pool.worker_pids()[0]
        os.kill(victim, signal.SIGKILL)   # no job in flight: only its closed pipe reports the death
        deadline = time.monotonic() + 60
        while victim in pool.worker_pids() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert victim not in pool.worker_pids() and pool.stats["workers_replaced"] == 1
        results = pool.run(spec(range(6)))
        assert sorted(r["task_id"] for r in results) == list(range(6))
        assert all(r["status"] == "completed" for r in results)


def test_job_runner_sends_quick_results_together_and_slow_ones_as_they_finish():
    from hr1_jax.rollout import pool as pool_mod
    sent, progress = [], [0.0, -1.0, -1.0, 0.0]
    runner = pool_mod.JobRunner({})
    runner.run({"job_id": 7, "seq": 3, "flush_s": 60.0, **spec([0, 1, 2]).__dict__}, sent.append, progress)
    runner.run({"job_id": 8, "flush_s": 60.0, **spec([]).__dict__}, sent.append)
    assert [(kind, job, [ep["task_id"] for ep in eps]) for kind, job, eps in sent] == \
        [("done", 7, [0, 1, 2]), ("done", 8, [])]   # toy episodes end well within flush_s
    assert pool_mod._read_progress(progress)[:2] == (3, 2) and progress[0] == 6   # the last task's; 3 writes
    assert 0 < pool_mod._read_progress(progress)[2] <= time.monotonic()
    progress[0] += 1   # a write that never ends (a worker killed in it): no record rather than a torn one
    assert pool_mod._read_progress(progress) is None
    sent.clear()
    runner.run({"job_id": 9, "flush_s": 0.0, **spec([0, 1, 2]).__dict__}, sent.append)   # each streams at once
    runner.close()
    assert [(kind, [ep["task_id"] for ep in eps]) for kind, _, eps in sent] == \
        [("results", [0]), ("results", [1]), ("done", [2])]


def test_a_progress_read_that_overlaps_a_write_is_repeated():
    from hr1_jax.rollout.pool import _read_progress

    class MidWrite(list):   # the worker finishes its write between the parent's first two looks
        versions = iter([1.0, 3.0, 4.0, 4.0])

        def __getitem__(self, i):
            return next(self.versions) if i == 0 else list.__getitem__(self, i)

    assert _read_progress(MidWrite([0.0, 5.0, 2.0, 12.5])) == (5, 2, 12.5)


def test_a_job_that_breaks_off_keeps_the_episodes_it_finished():
    from hr1_jax.rollout.pool import JobRunner
    sent = []
    runner = JobRunner({})
    runner.episode = (lambda real: lambda job, env, tasks, patch, tid:
                      real(job, env, tasks, patch, tid) if tid < 2 else 1 / 0)(runner.episode)
    runner.run({"job_id": 1, "flush_s": 60.0, **spec([0, 1, 2]).__dict__}, sent.append)
    runner.close()
    assert [kind for kind, _, _ in sent] == ["results", "error"]
    assert [ep["task_id"] for ep in sent[0][2]] == [0, 1] and "ZeroDivisionError" in sent[1][2]


def _task_index(pool_mod, pool) -> int:
    at = pool_mod._read_progress(pool._workers[0].progress)
    return -1 if at is None else at[1]


def test_a_crash_after_unsent_results_blames_the_task_in_flight_and_reruns_the_finished_ones(tmp_path, monkeypatch):
    from hr1_jax.rollout import pool as pool_mod
    crash = tmp_path / "crash_once"
    monkeypatch.setenv("HR1_TOY_AGENT_CRASH_FILE", str(crash))
    monkeypatch.setenv("HR1_TOY_AGENT_SLEEP", "0.05")   # each task lasts 0.1-0.25 s
    # a job's results only ever travel with its end
    with WorkerPool(num_workers=1, job_timeout_s=60, max_retries=0, result_flush_s=60) as pool:
        h = pool.submit(spec(range(12)))
        deadline = time.monotonic() + 60
        while _task_index(pool_mod, pool) < 3 and time.monotonic() < deadline:   # tasks 0-2 done, unsent
            time.sleep(0.001)
        assert not h._arrived
        crash.write_text("x")   # the next agent call (task 3 or later) SIGKILLs the worker
        results = sorted(h.collect(timeout_s=60), key=lambda r: r["task_id"])
        assert pool.stats["workers_replaced"] == 1 and pool.stats["jobs_failed"] == 1
    failed = [r["task_id"] for r in results if r["status"] != "completed"]
    assert len(failed) == 1 and failed[0] >= 3 and "worker died" in results[failed[0]]["error"]
    assert [r["task_id"] for r in results] == list(range(12))   # 0-2 ran again, unblamed


def test_the_task_budget_runs_from_the_task_start_not_the_last_message(monkeypatch):
    monkeypatch.setenv("HR1_TOY_AGENT_SLEEP", "0.3")
    with WorkerPool(num_workers=1, job_timeout_s=3, max_retries=0, result_flush_s=60) as pool:   # one message
        results = pool.run(spec(range(4)))   # each task well inside its budget, the job far beyond it
        assert pool.stats["timeouts"] == 0
    assert [r["status"] for r in results] == ["completed"] * 4


def test_collect_waits_for_the_last_result_and_results_streams():
    import threading
    from hr1_jax.rollout.pool import JobHandle
    h = JobHandle(0, spec([0, 1]))
    h._put({"task_id": 0})
    try:
        h.collect(timeout_s=0.1)   # one of two results: nothing new arrives, so it gives up
        raise AssertionError("collect returned before the last result")
    except TimeoutError:
        pass
    threading.Timer(0.05, h._put, ({"task_id": 1},)).start()
    assert h.collect(timeout_s=30) == [{"task_id": 0}, {"task_id": 1}]
    streamed = JobHandle(1, spec([0, 1]))
    it = streamed.results(timeout_s=30)
    streamed._put({"task_id": 0})
    assert next(it) == {"task_id": 0}   # the first result, before the second exists
    threading.Timer(0.05, streamed._put, ({"task_id": 1},)).start()
    assert list(it) == [{"task_id": 1}]


def test_a_job_with_fields_gets_only_those_keys_and_the_pools():
    from hr1_jax.rollout.pool import POOL_FIELDS, JobRunner
    runner = JobRunner({})
    full, slim = [], []
    runner.run({"job_id": 0, **spec([0, 1]).__dict__}, full.append)
    runner.run({"job_id": 1, **spec([0, 1], fields=("reward", "identity")).__dict__}, slim.append)
    runner.close()
    episodes = [(a, b) for (_, _, fa), (_, _, fb) in zip(full, slim) for a, b in zip(fa, fb, strict=True)]
    assert len(episodes) == 2
    for a, b in episodes:
        assert set(b) == {*POOL_FIELDS, "reward", "identity"} and "trajectory" in a
        assert all(b[k] == a[k] for k in b)



def test_a_worker_row_is_the_asdict_of_its_episode_and_a_snapshot_of_it(monkeypatch):
    import dataclasses
    from hr1_jax import runtime
    from hr1_jax.rollout.pool import JobRunner
    made = []

    def recorded(*args, **kw):
        made.append(real(*args, **kw))
        return made[-1]

    real = runtime.run_episode
    monkeypatch.setattr(runtime, "run_episode", recorded)
    runner = JobRunner({})
    sent = []
    runner.run({"job_id": 0, "flush_s": 60.0, **spec([0, 1]).__dict__}, sent.append)
    runner.close()
    rows = sent[0][2]
    assert len(made) == 2 and rows == [dataclasses.asdict(e) for e in made]
    expected = dataclasses.asdict(made[0])
    made[0].trajectory[0]["content"] = "changed after the episode"   # e.g. an env reusing its dicts
    made[0].final["extra"] = 1
    made[0].hook_events.append({"hook": "late"})
    assert rows[0] == expected

def test_submit_wakes_the_dispatcher_only_when_a_worker_has_a_free_slot(monkeypatch):
    monkeypatch.setenv("HR1_TOY_AGENT_SLEEP", "0.05")   # the first job lasts over a second
    with WorkerPool(num_workers=1, job_timeout_s=60, max_retries=0) as pool:
        wakes, real = [], pool._wake
        pool._wake = lambda: (wakes.append(1), real())
        first = [pool.submit(spec(range(8))), pool.submit(spec([8]))]
        deadline = time.monotonic() + 60
        while pool._workers[0].queued is None and time.monotonic() < deadline:  # job + one queued behind it
            time.sleep(0.01)
        assert wakes and pool._workers[0].queued is not None
        woken = len(wakes)
        rest = [pool.submit(spec([t])) for t in range(9, 12)]   # no free slot: no wake-up
        assert len(wakes) == woken
        results = [r for h in first + rest for r in h.collect(timeout_s=60)]
    assert sorted(r["task_id"] for r in results) == list(range(12)) and all(r["reward"] == 1.0 for r in results)


def _until(pool, done):
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with pool._lock:
            if done():
                return
        time.sleep(0.01)
    raise AssertionError("the pool never reached the expected assignment")


def test_idle_workers_get_jobs_first_and_the_last_jobs_are_not_queued_behind_one_worker(monkeypatch):
    monkeypatch.setenv("HR1_TOY_AGENT_SLEEP", "0.05")   # each job lasts over a second
    with WorkerPool(num_workers=2, job_timeout_s=60, max_retries=0) as pool:
        handles = [pool.submit(spec(range(i * 8, i * 8 + 8))) for i in range(3)]
        _until(pool, lambda: all(w.job is not None for w in pool._workers))
        with pool._lock:   # one job each; the third waits for whichever worker frees up first
            assert all(w.queued is None for w in pool._workers) and len(pool._pending) == 1
        handles.append(pool.submit(spec(range(24, 32))))   # one job per worker pending: one is queued
        _until(pool, lambda: len(pool._pending) == 1)
        with pool._lock:
            assert sum(w.queued is not None for w in pool._workers) == 1
        results = [r for h in handles for r in h.collect(timeout_s=120)]
    assert sorted(r["task_id"] for r in results) == list(range(32)) and all(r["reward"] == 1.0 for r in results)


def _children(pid: int) -> list[int]:
    kids = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/children") as f:
            kids += [int(k) for k in f.read().split()]
    return kids


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="CPU affinity is Linux-only")
def test_pinned_worker_slots_keep_one_cpu_with_their_hook_processes_and_replacements():
    from hr1_jax.config import base_config, validate_config
    from hr1_jax.rollout.reward import prepare_patch
    c = base_config()
    c.benchmark, c.dbbench.backend = "dbbench", "sqlite"
    validate_config(c)
    hook = 'def hook(ctx, nb):\n    return {"message": "Inspect the schema first."}\n'
    patch, status, reason = prepare_patch("</think><patch>" + json.dumps(
        {"benchmark": "dbbench", "actions": [{"type": "add_code_hook", "hook": "make_pre_hint", "code": hook}]})
        + "</patch>", "dbbench", c)
    assert status == "ok", reason
    cpus = sorted(os.sched_getaffinity(0))
    slot_cpu = [{cpus[i % len(cpus)]} for i in range(3)]
    with WorkerPool(c, num_workers=3, pin_workers=True, job_timeout_s=120) as pool:
        assert [os.sched_getaffinity(p) for p in pool.worker_pids()] == slot_cpu
        handles = [pool.submit(JobSpec("dbbench", "test", [i], patch, c.target.to_dict(), 0)) for i in range(6)]
        assert all(r["status"] == "completed" for h in handles for r in h.collect(timeout_s=120))
        hook_processes = [(w, k) for w in pool.worker_pids() for k in _children(w)]
        assert hook_processes
        assert all(os.sched_getaffinity(k) == os.sched_getaffinity(w) for w, k in hook_processes)
        victim = pool.worker_pids()[1]
        os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while victim in pool.worker_pids() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [os.sched_getaffinity(p) for p in pool.worker_pids()] == slot_cpu
    with WorkerPool(c, num_workers=1, pin_workers=False) as pool:
        assert os.sched_getaffinity(pool.worker_pids()[0]) == set(cpus)


def test_result_flush_s_is_validated_and_reaches_the_job_messages():
    from hr1_jax.config import base_config, validate_config
    from hr1_jax.rollout.pool import _Job
    from hr1_jax.utils.config_errors import ConfigError
    c = base_config()
    c.rollout.result_flush_s = -1.0
    with pytest.raises(ConfigError, match="rollout.result_flush_s"):
        validate_config(c)
    c.rollout.result_flush_s = 0.25
    validate_config(c)
    with WorkerPool(c, num_workers=1) as pool:
        job = _Job(pool.submit(spec([])), [])
        assert pool._job_message(job)["flush_s"] == 0.25   # the message a worker gets


def test_a_worker_past_its_memory_limit_is_replaced_between_jobs_and_no_result_is_lost(monkeypatch):
    """1 MiB: every worker is past it when its first job ends. It finishes the job queued behind
    that one, takes no other, and is stopped; a fresh worker takes its slot. Nothing is retried."""
    monkeypatch.setenv("HR1_TOY_AGENT_SLEEP", "0.01")   # jobs wait in the queue while others run
    report = {"factory": "toy_env:make_env_report_agent"}
    with WorkerPool(num_workers=2, job_timeout_s=60, max_retries=0, worker_max_rss_mb=1) as pool:
        first = pool.worker_pids()
        handles = [pool.submit(spec(range(i * 3, i * 3 + 3), target=report)) for i in range(12)]
        results = [r for h in handles for r in h.collect(timeout_s=60)]
        # a job's last episode comes with its end, in the lock hold that recycles the worker: once
        # the lock is free again every worker that ran a job has been replaced
        last = pool.worker_pids()
        stats, retired = dict(pool.stats), list(pool._retired)
    assert sorted(r["task_id"] for r in results) == list(range(36))
    assert all(r["status"] == "completed" for r in results)
    jobs_by_pid: dict[int, set] = {}
    for r in results:
        jobs_by_pid.setdefault(json.loads(r["trajectory"][2]["content"])["pid"], set()).add(r["task_id"] // 3)
    assert max(len(jobs) for jobs in jobs_by_pid.values()) <= 2   # its job and the one queued behind
    assert len(jobs_by_pid) >= 6 and stats["workers_recycled"] == len(jobs_by_pid)
    assert (stats["workers_replaced"], stats["job_retries"], stats["jobs_failed"]) == (0, 0, 0)
    assert not set(first) & set(last)
    assert all(not proc.is_alive() and proc.exitcode == 0 for proc in retired)   # stopped, not killed


def test_workers_under_the_memory_limit_are_kept():
    with WorkerPool(num_workers=2, job_timeout_s=60, max_retries=0, worker_max_rss_mb=1 << 20) as pool:
        first = pool.worker_pids()
        handles = [pool.submit(spec(range(i * 3, i * 3 + 3))) for i in range(4)]
        assert all(r["status"] == "completed" for h in handles for r in h.collect(timeout_s=60))
        assert pool.worker_pids() == first and pool.stats["workers_recycled"] == 0
