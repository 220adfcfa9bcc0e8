"""A persistent pool of subprocess workers that run episode jobs.

A job is (benchmark, split, task ids, normalised patch or None, target spec, seed). Workers are
spawn-context processes with CPU-only JAX and accelerators hidden; each keeps its environments
between jobs (building a catalog or opening a DB server connection is the slow part). Every worker
talks to the parent over its own pipe (no shared queue lock a killed worker could leave held).

Per-task results stream back as they finish; results of tasks that end within
`rollout.result_flush_s` of the worker's last message travel in one message (a ~2 ms SQLite episode would otherwise cost the
parent one wake-up each, beside the workers). Each worker also records, in memory shared with the
parent, which task of which job message it is running and since when. A worker that dies (crash,
SIGKILL) or runs one task past the wall-clock budget (`job_timeout_s`, from that task's start) is
killed (SIGTERM, then SIGKILL) and replaced. The task it was running is retried up to `max_retries`
times; the job's other unreported tasks (never started, or finished but not yet sent) are requeued
under the job's attempt count so far. Episodes
that ended in an infra error are retried the same way. After that the remaining tasks come back
with status "infra_error" and reward None, so callers can exclude them — the pool never hangs and
never invents a score.

A worker whose memory has passed `rollout.worker_max_rss_mb` when one of its jobs ends takes no
new job; once its last one ends it is stopped as at close (its environments closed) and a fresh one
takes its slot. A leak in an environment or a library (TextWorld kept every game it opened) then
costs a worker's start now and then, not the host's memory.
"""
from __future__ import annotations

import collections
import dataclasses
import itertools
import json
import multiprocessing
import os
import pickle
import select
import signal
import socket
import threading
import time
import traceback

from envs.registry import pin_run_config
from hr1_jax.patch.guards import rss_bytes_of
from hr1_jax.utils.logging import log_event

# Workers run the agent runtime only: keep JAX (imported by anything downstream) on CPU and hide
# every accelerator so a worker can never grab a TPU/GPU the learner owns.
WORKER_ENV = {"JAX_PLATFORMS": "cpu", "CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": "",
              "TPU_VISIBLE_CHIPS": "", "TPU_VISIBLE_DEVICES": "", "TPU_SKIP_MDS_QUERY": "1",
              "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
INFRA_ERROR = "infra_error"
POOL_FIELDS = ("task_id", "status", "error")   # what the pool itself reads of every result
_ENV_LOCK = threading.Lock()


def worker_shares(task_ids: list[int], num_workers: int) -> list[list[int]]:
    """Contiguous, near-equal shares of a batch, one per worker: a ~1 ms SQLite episode costs about
    as much as one job's round trip, so one job per task would spend half the pool on messaging."""
    ids = [int(t) for t in task_ids]
    n = max(1, min(len(ids), int(num_workers)))
    size, extra = divmod(len(ids), n)
    bounds = [i * size + min(i, extra) for i in range(n + 1)]
    return [ids[bounds[i]:bounds[i + 1]] for i in range(n) if bounds[i + 1] > bounds[i]]


def failed_episode(benchmark: str, split: str, task_id: int, seed: int, error: str) -> dict:
    """The result row of a task the pool could not run (never scored)."""
    return {"benchmark": benchmark, "split": split, "task_id": int(task_id), "seed": int(seed),
            "reward": None, "success": False, "status": INFRA_ERROR, "trajectory": [], "actions": [],
            "hook_events": [], "counts": {}, "identity": {}, "agent": {}, "final": {}, "error": error,
            "wall_s": 0.0}


# --- worker side ------------------------------------------------------------------------------

class _FatalJobError(Exception):
    """A job that can never succeed (unknown task id, patch that does not compile): not retried."""


class JobRunner:
    """Runs a job's tasks in this process, keeping environments, task indexes and compiled patches
    between jobs (the subprocess worker and the Ray actor both drive one)."""

    def __init__(self, config_dict: dict):
        import ml_collections
        self.config = ml_collections.ConfigDict(config_dict) if config_dict else None
        self.envs: dict = {}
        self.task_index: dict = {}
        self.compiled: dict = {}

    def prepare(self, job: dict):
        """(env, tasks by id, compiled patch or None); _FatalJobError when no attempt can succeed."""
        from envs.registry import make_env
        try:
            key = job["benchmark"]
            if key not in self.envs:
                self.envs[key] = make_env(key, self.config)
            env = self.envs[key]
            tkey = (key, job["split"])
            if tkey not in self.task_index:
                self.task_index[tkey] = {t.task_id: t for t in env.tasks(job["split"])}
            missing = [t for t in job["task_ids"] if t not in self.task_index[tkey]]
            if missing:
                raise _FatalJobError(f"{key}/{job['split']} has no tasks {missing}")
            return env, self.task_index[tkey], self._patch(job, env)
        except _FatalJobError:
            raise
        except Exception as e:
            if isinstance(e, (KeyError, ValueError)) or type(e).__name__ == "PatchError":
                raise _FatalJobError(f"{type(e).__name__}: {e}") from e
            raise

    def _patch(self, job: dict, env):
        if not job.get("patch"):
            return None
        patch_key = (env.benchmark, json.dumps(job["patch"], sort_keys=True))
        patch = self.compiled.get(patch_key)
        if patch is None:  # one patch is rerun task by task: compile it once
            from hr1_jax.patch.compiled import compile_patch_for_run
            patch = compile_patch_for_run(job["patch"], env.benchmark,
                                          self.config.patch_protocol if self.config is not None else None)
            if len(self.compiled) >= 64:
                self.compiled.pop(next(iter(self.compiled)))
            self.compiled[patch_key] = patch
        return patch

    def episode(self, job: dict, env, tasks: dict, patch, tid: int) -> tuple[dict, object]:
        """One task's result dict, and the env to use next (rebuilt after an infra error)."""
        from envs.registry import make_env
        from hr1_jax.agents.factory import build_agent
        from hr1_jax.runtime import run_episode
        task = tasks[tid]
        agent = build_agent(task, job["seed"], job["target"])
        fields = job.get("fields")
        row = run_episode(env, agent, task, patch, config=self.config, seed=job["seed"]).to_dict(
            None if fields is None else (*POOL_FIELDS, *fields), copy_values=False)
        # A snapshot now (the row may wait up to flush_s for its message while the env runs on):
        # pickle's round trip copies it ~10x cheaper than `asdict`.
        result = pickle.loads(pickle.dumps(row, pickle.HIGHEST_PROTOCOL))
        key = job["benchmark"]
        if result["status"] == INFRA_ERROR and key in self.envs:  # rebuild a possibly broken env
            try:
                self.envs.pop(key).close()
            except Exception:
                pass
            env = self.envs[key] = make_env(key, self.config)
        return result, env

    def run(self, job: dict, emit, progress=None) -> None:
        """Every task of `job`. Finished episodes are emitted as ("results", job_id, [episode, ...])
        once the job's `flush_s` has passed since the last message, the rest with the end as ("done",
        job_id, [...]) (each message costs the parent a wake-up beside the workers); ("fatal" |
        "error", job_id, detail) when the job broke off, after the episodes it finished.
        `progress` (shared with the parent, `_publish_progress`): the task in flight."""
        job_id, batch = job["job_id"], []
        try:
            env, tasks, patch = self.prepare(job)
            ids, sent, flush_s = job["task_ids"], time.monotonic(), float(job.get("flush_s", 0.0))
            for n, tid in enumerate(ids):
                if progress is not None:
                    _publish_progress(progress, job.get("seq", -1), n)
                result, env = self.episode(job, env, tasks, patch, tid)
                batch.append(result)
                if n + 1 < len(ids) and time.monotonic() - sent >= flush_s:
                    emit(("results", job_id, batch))
                    batch, sent = [], time.monotonic()
            emit(("done", job_id, batch))
        except Exception as e:
            if batch:   # the episodes finished before the break are kept
                emit(("results", job_id, batch))
            emit(("fatal", job_id, str(e)) if isinstance(e, _FatalJobError) else
                 ("error", job_id, f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=8)}"))

    def close(self) -> None:
        for env in self.envs.values():
            try:
                env.close()
            except Exception:
                pass


def _publish_progress(progress, seq: int, index: int) -> None:
    """[version, job message seq, task index, task start] as a seqlock: the version is odd while the
    fields change, so the parent, reading at any moment, never pairs a task with another's start."""
    progress[0] += 1
    progress[1], progress[2], progress[3] = seq, index, time.monotonic()
    progress[0] += 1


def _read_progress(progress) -> tuple[int, int, float] | None:
    """(seq, index, start) as the worker last published them; None only if it died mid-write."""
    for _ in range(1000):   # a write takes microseconds: a read that overlapped one is repeated
        version = progress[0]
        seq, index, start = progress[1], progress[2], progress[3]
        if not version % 2 and progress[0] == version:
            return int(seq), int(index), start
    return None


def _worker_main(conn, config_dict: dict, progress) -> None:
    os.environ.update(WORKER_ENV)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent owns shutdown
    runner = JobRunner(config_dict)
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        if job is None:
            break
        runner.run(job, conn.send, progress)
    runner.close()


# --- parent side ------------------------------------------------------------------------------

@dataclasses.dataclass
class JobSpec:
    benchmark: str
    split: str
    task_ids: list[int]
    patch: dict | None = None
    target: dict | None = None
    seed: int = 0
    # The result keys the caller reads (None: the whole episode): a rerun scored and not stored
    # needs no trajectory, and every byte is pickled by a worker and unpickled beside them.
    fields: tuple[str, ...] | None = None


class JobHandle:
    """Results of one submitted job: stream them with `results()` or wait for all with `collect()`
    (both end after every task). Only a streaming caller is woken per result: a thread wake-up per
    episode is parent CPU beside the workers."""

    def __init__(self, job_id: int, spec: JobSpec):
        self.job_id, self.spec = job_id, spec
        self._items: collections.deque[dict] = collections.deque()
        self._cond = threading.Condition(threading.Lock())
        self._arrived = self._taken = self._streaming = 0
        self.retries = 0

    def _put(self, item: dict) -> None:
        with self._cond:
            self._items.append(item)
            self._arrived += 1
            if self._streaming or self._arrived >= len(self.spec.task_ids):
                self._cond.notify_all()

    def _wait(self, enough, timeout_s: float | None) -> None:
        """Until `enough()`; TimeoutError when no result arrived for `timeout_s` (condition held)."""
        while not enough():
            seen = self._arrived
            self._cond.wait(timeout_s)
            if timeout_s is not None and self._arrived == seen and not enough():
                raise TimeoutError(f"job {self.job_id}: no result within {timeout_s}s")

    def results(self, timeout_s: float | None = None):
        """Yield one episode dict per task as it finishes."""
        while self._taken < len(self.spec.task_ids):
            with self._cond:
                self._streaming += 1
                try:
                    self._wait(lambda: self._items, timeout_s)
                finally:
                    self._streaming -= 1
                self._taken += 1
                item = self._items.popleft()
            yield item

    def collect(self, timeout_s: float | None = None) -> list[dict]:
        """Every (remaining) result, woken once when the last one arrives."""
        with self._cond:
            self._wait(lambda: self._arrived >= len(self.spec.task_ids), timeout_s)
            items, self._taken = list(self._items), len(self.spec.task_ids)
            self._items.clear()
        return items


@dataclasses.dataclass
class _Job:
    handle: JobHandle
    remaining: list[int]
    attempts: int = 0
    last_error: str = ""
    seq: int = -1                                          # of the job message last sent
    sent: list[int] = dataclasses.field(default_factory=list)   # that message's task ids


@dataclasses.dataclass
class _Worker:
    proc: multiprocessing.Process
    conn: object
    fd: int = -1
    job: _Job | None = None
    deadline: float = 0.0
    retry_tasks: list[int] = dataclasses.field(default_factory=list)
    queued: _Job | None = None   # sent behind `job`: the worker starts it without a round trip
    progress: object = None      # shared with the worker: the task in flight (`_publish_progress`)
    retiring: bool = False       # past rollout.worker_max_rss_mb: no new job, replaced once idle

    @property
    def pid(self) -> int | None:
        return self.proc.pid


class WorkerPool:
    """`with WorkerPool(config) as pool: handle = pool.submit(JobSpec(...)); handle.collect()`.

    Thread-safe: several callers (e.g. reward evaluations of a GRPO group) may submit concurrently;
    a background dispatcher thread owns the workers. While jobs remain for every worker, each holds
    its job plus one queued behind it, so it never idles waiting for the dispatcher between short jobs.
    """
    queue_behind = True
    recycles_by_memory = True   # reads each worker's memory from /proc (Ray's actors may be elsewhere)

    def __init__(self, config=None, *, num_workers: int | None = None, job_timeout_s: float | None = None,
                 max_retries: int | None = None, pin_workers: bool | None = None,
                 result_flush_s: float | None = None, worker_max_rss_mb: float | None = None):
        r = config.rollout if config is not None else None
        self.num_workers = int(num_workers or (r.num_workers if r else 2))
        self.job_timeout_s = float(job_timeout_s or (r.job_timeout_s if r else 1800.0))
        self.max_retries = int(max_retries if max_retries is not None else (r.max_job_retries if r else 2))
        self.result_flush_s = float(result_flush_s if result_flush_s is not None else
                                    (r.result_flush_s if r else 0.1))
        self.worker_max_rss_mb = float(worker_max_rss_mb if worker_max_rss_mb is not None else
                                       (r.worker_max_rss_mb if r else 0.0))
        self._retired: list = []   # stopped workers' processes, reaped once they exit
        self._config_dict = pin_run_config(config.to_dict()) if config is not None else {}
        self._ctx = multiprocessing.get_context("spawn")
        self._lock = threading.Lock()
        self._pending: collections.deque[_Job] = collections.deque()
        self._ids = itertools.count()
        self._seqs = itertools.count()   # job messages: a retried job's next message is told apart
        self._closed = False
        self._wake_r, self._wake_w = socket.socketpair()  # submit() wakes the dispatcher at once
        self._wake_r.setblocking(False)
        # One poll set for the pool's life (wake socket + every worker's pipe): building a selector
        # per round (multiprocessing's wait, conn.poll) cost ~2/3 of the dispatcher's CPU, which
        # competes with the workers for the cores.
        self._poller = select.poll()
        self._poller.register(self._wake_r.fileno(), select.POLLIN)
        self._by_fd: dict[int, _Worker] = {}
        self.stats = {"workers_started": 0, "workers_replaced": 0, "workers_recycled": 0, "job_retries": 0,
                      "jobs_failed": 0, "timeouts": 0}
        pin = pin_workers if pin_workers is not None else bool(r.pin_workers if r else False)
        # Pinned, worker slot i runs on CPU i (round-robin over this process's CPUs) with its hook
        # process: a hook call is a strict ping-pong between the two, and on one CPU it needs no
        # cross-CPU wake-up (the trade-off: rollout.pin_workers in rollout/config.py).
        self._cpus = sorted(os.sched_getaffinity(0)) if pin and hasattr(os, "sched_getaffinity") else []
        self._workers = [self._start_worker(i) for i in range(self.num_workers)]
        self._thread = threading.Thread(target=self._dispatch_loop, name="hr1-pool", daemon=True)
        self._thread.start()

    # public API
    def submit(self, spec: JobSpec) -> JobHandle:
        handle = JobHandle(next(self._ids), spec)
        with self._lock:
            if self._closed:
                raise RuntimeError("pool is closed")
            self._pending.append(_Job(handle, list(spec.task_ids)))
            wake = self._has_free_slot()
        if wake:   # else the worker message that frees a slot starts the round that assigns it
            self._wake()
        return handle

    def _has_free_slot(self) -> bool:
        """Whether a worker could take a job now (lock held): only then is waking the dispatcher
        worth its CPU beside the workers."""
        return any(not w.retiring and (w.job is None or (self.queue_behind and w.queued is None))
                   for w in self._workers)

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except (BlockingIOError, OSError):
            pass

    def run(self, spec: JobSpec) -> list[dict]:
        return self.submit(spec).collect()

    def worker_pids(self) -> list[int]:
        with self._lock:
            return [w.pid for w in self._workers]

    def busy_worker_pids(self) -> list[int]:
        with self._lock:
            return [w.pid for w in self._workers if w.job is not None]

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._wake()
        self._thread.join(timeout=30)
        for w in self._workers:
            try:
                w.conn.send(None)
            except (OSError, ValueError):
                pass
        for w in self._workers:
            w.proc.join(timeout=5)
            if w.proc.is_alive():
                self._kill(w)
        for proc in self._retired:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=5)
        self._wake_r.close()
        self._wake_w.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # workers
    def _start_worker(self, slot: int) -> _Worker:
        parent, child = self._ctx.Pipe(duplex=True)
        progress = self._ctx.RawArray("d", [0.0, -1.0, -1.0, 0.0])
        proc = self._ctx.Process(target=_worker_main, args=(child, self._config_dict, progress),
                                 name="hr1-rollout-worker")
        with _ENV_LOCK:  # the spawned interpreter inherits os.environ at start: hide accelerators there
            saved = {k: os.environ.get(k) for k in WORKER_ENV}
            os.environ.update(WORKER_ENV)
            try:
                proc.start()
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
        child.close()
        if self._cpus:   # before it runs a job; its hook process, started later, inherits the pin
            try:
                os.sched_setaffinity(proc.pid, {self._cpus[slot % len(self._cpus)]})
            except OSError:   # a host that will not let us narrow the CPU set: it runs unpinned
                pass
        self.stats["workers_started"] += 1
        w = _Worker(proc, parent, fd=parent.fileno(), progress=progress)
        self._by_fd[w.fd] = w
        self._poller.register(w.fd, select.POLLIN)
        return w

    def _kill(self, w: _Worker) -> None:
        if self._by_fd.get(w.fd) is w:   # before the pipe closes: its fd number may be reused
            self._poller.unregister(w.fd)
            del self._by_fd[w.fd]
        if w.proc.is_alive():
            w.proc.terminate()
            w.proc.join(timeout=2)
        if w.proc.is_alive():
            w.proc.kill()
            w.proc.join(timeout=5)
        try:
            w.conn.close()
        except OSError:
            pass

    def _replace(self, w: _Worker, reason: str) -> None:
        job, queued = w.job, w.queued
        self._kill(w)
        idx = self._workers.index(w)
        w.job = w.queued = None
        if self._closed:  # shutting down: no new processes; the jobs fail instead of retrying
            for j, tasks in ((job, job.remaining + w.retry_tasks if job else []),
                             (queued, queued.remaining if queued else [])):
                if j is not None:
                    j.attempts = self.max_retries
                    self._retry_or_fail(j, tasks, f"pool closed; {reason}")
            return
        if queued is not None:  # it never started: back to the front of the queue, not blamed
            self._pending.appendleft(queued)
        self._workers[idx] = self._start_worker(idx)
        self.stats["workers_replaced"] += 1
        log_event("rollout", "worker_replaced", pid=w.pid, reason=reason,
                  job=job.handle.job_id if job else None)
        if job is not None:
            self._blame_in_flight(w, job, reason)

    # jobs
    @staticmethod
    def _progress(w, job: _Job | None) -> tuple[int, float] | None:
        """(task index, start) of the task `w` is running if it belongs to `job`'s last message."""
        at = _read_progress(w.progress) if w.progress is not None and job is not None else None
        if at is None:
            return None
        seq, index, start = at
        return (index, start) if seq == job.seq and 0 <= index < len(job.sent) else None

    def _blame_in_flight(self, w: _Worker, job: _Job, reason: str) -> None:
        """Only the task the dead or overrun worker `w` was running (its progress record; the job's
        first remaining task when that is unknown) and episodes that ended in infra errors use up a
        retry; the job's other unreported tasks never started or finished unsent, and are requeued
        unblamed."""
        at = self._progress(w, job)
        in_flight = job.sent[at[0]] if at is not None else None
        blamed = in_flight if in_flight in job.remaining else job.remaining[0]
        rest = list(job.remaining)
        rest.remove(blamed)
        if rest:
            self._pending.append(_Job(job.handle, rest, attempts=job.attempts, last_error=reason))
        self._retry_or_fail(job, [blamed] + w.retry_tasks, reason)

    def _retry_or_fail(self, job: _Job, tasks: list[int], reason: str) -> None:
        job.last_error = reason
        if not tasks:
            return
        if job.attempts < self.max_retries:
            job.attempts += 1
            job.handle.retries += 1
            self.stats["job_retries"] += 1
            job.remaining = list(tasks)
            self._pending.append(job)
            return
        self.stats["jobs_failed"] += 1
        spec = job.handle.spec
        for tid in tasks:
            job.handle._put(failed_episode(spec.benchmark, spec.split, tid, spec.seed,
                                                 f"failed after {job.attempts + 1} attempts: {reason}"))

    def _job_message(self, job: _Job) -> dict:
        spec = job.handle.spec
        job.seq, job.sent = next(self._seqs), list(job.remaining)
        return {"job_id": job.handle.job_id, "seq": job.seq, "benchmark": spec.benchmark, "split": spec.split,
                "task_ids": job.sent, "patch": spec.patch, "target": spec.target or {},
                "seed": spec.seed, "fields": spec.fields, "flush_s": self.result_flush_s}

    def _send(self, w: _Worker, job: _Job) -> None:
        w.job, w.retry_tasks = job, []
        w.deadline = time.monotonic() + self.job_timeout_s
        w.conn.send(self._job_message(job))

    def _send_queued(self, w: _Worker, job: _Job) -> None:
        w.queued = job
        w.conn.send(self._job_message(job))

    def _finish(self, w: _Worker) -> list[int]:
        """The in-flight job ended: the queued one (already with the worker) is in flight now.
        Returns the ended job's infra-error tasks."""
        retry = w.retry_tasks
        w.job, w.queued, w.retry_tasks = w.queued, None, []
        if w.job is not None:
            w.deadline = time.monotonic() + self.job_timeout_s
        return retry

    def _on_result(self, w: _Worker, job: _Job, payload: dict) -> None:
        tid = int(payload["task_id"])
        if tid in job.remaining:
            job.remaining.remove(tid)
        w.deadline = time.monotonic() + self.job_timeout_s  # the budget is per task
        if payload["status"] == INFRA_ERROR and job.attempts < self.max_retries:
            w.retry_tasks.append(tid)
            job.last_error = payload.get("error") or ""
        else:
            job.handle._put(payload)

    def _on_message(self, w: _Worker, msg) -> None:
        kind, job_id, payload = msg
        job = w.job
        if job is None or job.handle.job_id != job_id:
            return
        if kind in ("results", "done"):   # "done" carries the job's last episodes
            for episode in payload:
                self._on_result(w, job, episode)
            if kind == "results":
                return
        retry = self._finish(w)
        if kind == "done":
            self._retry_or_fail(job, retry, f"episode infra error: {job.last_error[:300]}")
        elif kind == "error":
            self._retry_or_fail(job, job.remaining + retry, payload[:500])
        else:  # fatal: retrying cannot help
            job.attempts = self.max_retries
            self._retry_or_fail(job, job.remaining + retry, payload[:500])
        self._recycle_if_over_memory(w)

    def _recycle_if_over_memory(self, w: _Worker) -> None:
        """At the end of a job: a worker past `worker_max_rss_mb` takes no new job, and once its
        queued one has ended too it is stopped and a fresh worker takes its slot (lock held)."""
        if not self.recycles_by_memory or self.worker_max_rss_mb <= 0 or self._closed:
            return
        if not w.retiring:
            rss = rss_bytes_of(w.pid)
            if rss is None or rss <= self.worker_max_rss_mb * 2**20:
                return
            w.retiring = True
            log_event("rollout", "worker_over_memory", pid=w.pid, rss_mb=round(rss / 2**20),
                      limit_mb=self.worker_max_rss_mb)
        if w.job is not None or w.queued is not None:
            return
        if self._by_fd.get(w.fd) is w:
            self._poller.unregister(w.fd)
            del self._by_fd[w.fd]
        try:
            w.conn.send(None)   # it closes its environments and exits, as at the pool's close
        except (OSError, ValueError):
            pass
        w.conn.close()
        self._reap_retired()
        self._retired.append(w.proc)
        idx = self._workers.index(w)
        self._workers[idx] = self._start_worker(idx)
        self.stats["workers_recycled"] += 1
        log_event("rollout", "worker_recycled", pid=w.pid, new_pid=self._workers[idx].pid)

    def _reap_retired(self) -> None:
        """Forget the stopped workers that have exited (is_alive() reaps an exited process)."""
        self._retired = [proc for proc in self._retired if proc.is_alive()]

    def _dispatch_loop(self) -> None:
        try:
            while self._dispatch_round():
                pass
        except Exception as e:  # never leave a caller waiting forever
            log_event("rollout", "dispatcher_crashed", error=repr(e))
            with self._lock:
                self._closed = True
                jobs = list(self._pending) + [j for w in self._workers for j in (w.job, w.queued) if j is not None]
                self._pending.clear()
                for job in jobs:
                    job.attempts = self.max_retries
                    self._retry_or_fail(job, job.remaining, f"pool dispatcher crashed: {e!r}")

    def _assign_idle(self, send_errors: tuple) -> bool:
        """Give pending jobs to idle workers, then queue jobs behind busy ones (lock held); False once
        closed and drained. A job is queued behind only while at least one job per worker is
        pending: the last jobs go to whichever worker frees up first (queued behind one worker, a
        job could leave the others idle for a whole job at the end of a batch)."""
        if self._closed and not self._pending and all(w.job is None for w in self._workers):
            return False
        if not self._pending:   # most rounds (one per worker message): skip the slot scans
            return True
        for slot in ("job", "queued") if self.queue_behind else ("job",):
            for w in list(self._workers):
                if slot == "queued" and len(self._pending) < len(self._workers):
                    return True
                if not self._pending:
                    return True
                if getattr(w, slot) is not None or (slot == "queued" and w.job is None) or w.retiring:
                    continue
                job = self._pending.popleft()
                try:
                    (self._send if slot == "job" else self._send_queued)(w, job)
                except send_errors:
                    setattr(w, slot, job)
                    self._replace(w, "worker unreachable")
        return True

    def _expire_overdue(self) -> None:
        now = time.monotonic()
        for w in list(self._workers):
            if w.job is not None and now > w.deadline:
                # results travel in batches: the budget runs from the start of the task in flight
                at = self._progress(w, w.job) or self._progress(w, w.queued)
                if at is not None and at[1] + self.job_timeout_s > now:
                    w.deadline = at[1] + self.job_timeout_s
                    continue
                self.stats["timeouts"] += 1
                self._replace(w, f"a task exceeded the {self.job_timeout_s:.0f}s budget")

    def _drain_wake(self) -> None:
        try:
            self._wake_r.recv(4096)
        except (BlockingIOError, OSError):
            pass

    def _handle_ready(self, fd: int) -> None:
        """One message from a ready pipe (lock held); a closed pipe means the worker died."""
        if fd == self._wake_r.fileno():
            self._drain_wake()
            return
        w = self._by_fd.get(fd)
        if w is None:   # replaced earlier in this round
            return
        try:
            self._on_message(w, w.conn.recv())
        except (EOFError, OSError):
            self._replace(w, f"worker died (exit code {w.proc.exitcode})")

    def _dispatch_round(self) -> bool:
        with self._lock:
            if not self._assign_idle((OSError, ValueError)):
                return False
        events = self._poller.poll(200)   # ms; a worker's pipe is readable on a message or on its death
        quiet = not events
        with self._lock:
            for _drain in range(32):   # what arrived meanwhile is handled in this lock hold (bounded)
                for fd, _ in events:
                    self._handle_ready(fd)
                events = self._poller.poll(0)
                if not events:
                    break
            self._expire_overdue()
            if quiet:   # catch a death the pipe did not report
                for w in list(self._workers):
                    if not w.proc.is_alive() and not w.conn.poll():
                        self._replace(w, f"worker died (exit code {w.proc.exitcode})")
                self._reap_retired()
        return True
