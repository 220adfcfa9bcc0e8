"""`rollout.backend=ray`: the worker pool's job contract on Ray actors, so rerun workers can live on
machines other than the training hosts (launch/ray_cluster.sh starts such a cluster).

Each actor is one CPU-only rollout worker (the same `JobRunner` as a pool subprocess: warm
environments, compiled patches cached). The parent drives a job one task per actor call, so
results stream back per task and the per-task budget is the wait on that call. An actor that dies
(`RayActorError`) or overruns its budget (killed with `ray.kill`) is replaced and its job is retried,
blamed and counted exactly as `WorkerPool` does it: the dispatcher, retry and failure accounting
are the pool's own; only the transport differs.
"""
from __future__ import annotations

import dataclasses
import os
import select
import sys
import time
import traceback

from hr1_jax.errors import InputError
from hr1_jax.rollout.pool import WORKER_ENV, JobRunner, WorkerPool, _FatalJobError, _Job
from hr1_jax.utils.logging import log_event


def _ray():
    try:
        import ray
    except ImportError as e:
        raise InputError("rollout.backend=ray needs Ray: pip install 'hr1_jax[ray]'") from e
    return ray


class RolloutActor:
    """One rollout worker inside a Ray actor process (wrapped by `ray.remote` at pool start)."""

    def __init__(self, config_dict: dict, sys_path: list[str]):
        os.environ.update(WORKER_ENV)   # before anything imports JAX: never touch an accelerator
        # The driver's import paths that exist here too (a checkout at the same path on every node).
        sys.path[:0] = [p for p in sys_path if p not in sys.path and os.path.isdir(p)]
        self.runner = JobRunner(config_dict)

    def pid(self) -> int:
        return os.getpid()

    def run_task(self, job: dict, task_id: int) -> tuple[str, object]:
        """("result", episode) for one task of `job`, or ("fatal" | "error", detail)."""
        try:
            env, tasks, patch = self.runner.prepare(job)
            result, _ = self.runner.episode(job, env, tasks, patch, task_id)
            return "result", result
        except _FatalJobError as e:
            return "fatal", str(e)
        except Exception as e:
            return "error", f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=8)}"


@dataclasses.dataclass
class _Actor:
    actor: object
    pid_ref: object
    job: _Job | None = None
    deadline: float = 0.0
    retry_tasks: list[int] = dataclasses.field(default_factory=list)
    queued: _Job | None = None  # never used: one call in flight per actor (queue_behind False)
    ref: object = None          # the task call in flight
    job_ref: object = None      # the job message, put in the object store once per job
    progress: object = None     # none published: each call is one task, so blame is exact already
    retiring: bool = False      # never set: actors are not recycled by memory (recycles_by_memory)
    _pid: int | None = None

    @property
    def pid(self) -> int | None:
        if self._pid is None:
            try:
                self._pid = _ray().get(self.pid_ref, timeout=60)
            except Exception:
                return None
        return self._pid


class RayWorkerPool(WorkerPool):
    """`WorkerPool` on Ray actors. `config.rollout.ray_address`: "" starts a private local Ray
    instance (shut down on close), "auto" or "ray://head:10001" joins a running cluster;
    `rollout.ray_resource` names a custom resource each actor needs (to keep them on rollout nodes)."""
    queue_behind = False   # one task call in flight per actor: the next is sent on its reply
    recycles_by_memory = False   # an actor may live on another machine, out of this host's /proc

    def __init__(self, config=None, *, num_workers: int | None = None, job_timeout_s: float | None = None,
                 max_retries: int | None = None, address: str | None = None):
        ray = _ray()
        r = config.rollout if config is not None else None
        address = address if address is not None else (r.ray_address if r else "")
        self._own_ray = not ray.is_initialized()
        if self._own_ray:
            n = int(num_workers or (r.num_workers if r else 2))
            kw = dict(num_cpus=n, include_dashboard=False) if not address else {}
            ray.init(address=address or None, log_to_driver=False, **kw)
        resource = (r.ray_resource if r else "") or ""
        if resource and resource not in ray.cluster_resources():  # its actors would never be placed
            if self._own_ray:
                ray.shutdown()
            raise InputError(f"rollout.ray_resource={resource!r}: no node of the Ray cluster offers it "
                             "(launch/ray_cluster.sh head/worker start nodes with hr1_rollout)")
        options = dict(num_cpus=1, max_restarts=0, runtime_env={"env_vars": dict(WORKER_ENV)})
        if resource:
            options["resources"] = {resource: 1}
        self._actor_cls = ray.remote(RolloutActor).options(**options)
        super().__init__(config, num_workers=num_workers, job_timeout_s=job_timeout_s, max_retries=max_retries)

    def _start_worker(self, slot: int) -> _Actor:
        actor = self._actor_cls.remote(self._config_dict, list(sys.path))
        self.stats["workers_started"] += 1
        return _Actor(actor, actor.pid.remote())

    def worker_pids(self) -> list[int]:
        with self._lock:   # a pid is fetched from its actor: never while holding the dispatcher's lock
            actors = list(self._workers)
        return [w.pid for w in actors]

    def busy_worker_pids(self) -> list[int]:
        with self._lock:
            actors = [w for w in self._workers if w.job is not None]
        return [w.pid for w in actors]

    def _kill(self, w: _Actor) -> None:
        try:
            _ray().kill(w.actor, no_restart=True)
        except Exception:
            pass

    def _send(self, w: _Actor, job: _Job) -> None:
        w.job, w.retry_tasks = job, []
        w.job_ref = _ray().put(self._job_message(job))
        self._call_next(w)

    def _call_next(self, w: _Actor) -> None:
        w.deadline = time.monotonic() + self.job_timeout_s
        w.ref = w.actor.run_task.remote(w.job_ref, w.job.remaining[0])

    def _on_reply(self, w: _Actor) -> None:
        """Feed one task call's outcome into the pool's own message handling."""
        ray = _ray()
        job_id = w.job.handle.job_id
        try:
            kind, payload = ray.get(w.ref)
        except ray.exceptions.RayActorError as e:
            self._replace(w, f"worker died (ray actor: {type(e).__name__})")
            return
        except ray.exceptions.RayError as e:
            kind, payload = "error", f"{type(e).__name__}: {e}"[:2000]
        w.ref = None
        if kind != "result":
            self._on_message(w, (kind, job_id, payload))
            return
        self._on_message(w, ("results", job_id, [payload]))
        if w.job is not None and w.job.remaining:
            self._call_next(w)
        elif w.job is not None:
            self._on_message(w, ("done", job_id, []))

    def _dispatch_round(self) -> bool:
        ray = _ray()
        with self._lock:
            if not self._assign_idle((ray.exceptions.RayError,)):
                return False
            busy = {w.ref: w for w in self._workers if w.job is not None and w.ref is not None}
        if busy:
            ready, _ = ray.wait(list(busy), num_returns=1, timeout=0.05)
        else:  # nothing in flight: sleep until submit() or close() wakes us
            ready = []
            if select.select([self._wake_r], [], [], 0.2)[0]:
                self._drain_wake()
        with self._lock:
            for ref in ready:
                w = busy[ref]
                if w in self._workers and w.ref is ref:
                    self._on_reply(w)
            self._expire_overdue()
        return True

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._wake()
        self._thread.join(timeout=30)
        for w in self._workers:
            self._kill(w)
        self._wake_r.close()
        self._wake_w.close()
        if self._own_ray:
            _ray().shutdown()
        log_event("rollout", "ray_pool_closed", **self.stats)


def make_pool(config, **kw) -> WorkerPool:
    """The rollout pool `config.rollout.backend` names: "local" (subprocesses) or "ray"."""
    backend = config.rollout.backend if config is not None else "local"
    return RayWorkerPool(config, **kw) if backend == "ray" else WorkerPool(config, **kw)
