"""Multi-host start-up: call `jax.distributed.initialize()` only when this is one process of many.

On a single host (a laptop, CI, one GPU box, a single TPU VM) initialize() would block waiting for
a coordinator or fail, so we look at the launcher's environment first. Must run before anything
touches a JAX backend (jax.devices(), array creation).
"""
from __future__ import annotations

import os
from typing import Callable, Mapping

import jax

from hr1_jax.utils.logging import log_event


def _int(env: Mapping[str, str], key: str) -> int:
    try:
        return int(env.get(key, "") or 0)
    except ValueError:
        return 0


def multi_process_reason(env: Mapping[str, str] | None = None) -> str | None:
    """Name of the launcher signal saying we are one of several processes, or None."""
    env = os.environ if env is None else env
    forced = env.get("HR1_DISTRIBUTED", "").strip().lower()
    if forced in ("0", "false", "no"):
        return None
    if forced in ("1", "true", "yes"):
        return "HR1_DISTRIBUTED"
    if env.get("JAX_COORDINATOR_ADDRESS") and _int(env, "JAX_NUM_PROCESSES") > 1:
        return "JAX_COORDINATOR_ADDRESS"
    # Multi-host TPU VM slices list every worker; a single-host slice lists one (or none).
    if len([h for h in env.get("TPU_WORKER_HOSTNAMES", "").split(",") if h.strip()]) > 1:
        return "TPU_WORKER_HOSTNAMES"
    if env.get("MEGASCALE_COORDINATOR_ADDRESS"):
        return "MEGASCALE_COORDINATOR_ADDRESS"
    if env.get("SLURM_JOB_ID") and _int(env, "SLURM_NTASKS") > 1:
        return "SLURM_NTASKS"
    if _int(env, "OMPI_COMM_WORLD_SIZE") > 1:
        return "OMPI_COMM_WORLD_SIZE"
    return None


def maybe_initialize_distributed(env: Mapping[str, str] | None = None,
                                 initialize: Callable[..., None] | None = None) -> bool:
    """Initialise the JAX distributed runtime if the environment says multi-process.

    jax auto-detects coordinator/process ids for SLURM, Open MPI and Cloud TPU; an explicit
    JAX_COORDINATOR_ADDRESS / JAX_NUM_PROCESSES / JAX_PROCESS_ID triple is passed through.
    Returns True when the runtime is (now) initialised.
    """
    env = os.environ if env is None else env
    if jax.distributed.is_initialized():
        return True
    reason = multi_process_reason(env)
    if reason is None:
        return False
    kwargs = {}
    if env.get("JAX_COORDINATOR_ADDRESS"):
        kwargs = dict(coordinator_address=env["JAX_COORDINATOR_ADDRESS"],
                      num_processes=_int(env, "JAX_NUM_PROCESSES") or None,
                      process_id=_int(env, "JAX_PROCESS_ID") if "JAX_PROCESS_ID" in env else None)
    (initialize or jax.distributed.initialize)(**kwargs)
    log_event("parallel", "distributed_init", reason=reason, process_index=jax.process_index(),
              process_count=jax.process_count())
    return True
