"""Process setup for compute-heavy jobs on a CPU host: how glibc malloc serves XLA:CPU's temporaries.

XLA:CPU allocates each execution's temporaries afresh, as one block (1.1 GB for the 20M bench
config's CE step), and frees it when the execution ends. glibc serves such a block with a new mapping
and unmaps it on free, so every step faulted its temporaries in again: 4 KiB at a time (~335k minor
faults and 0.5-0.8 s of kernel time per 20M step, measured), and, on a VM whose guest hands freed
memory back to its host, with the host backing the pages anew, slower still after a pause
(benchmarks/bench_host_env.py prints both). Three glibc tunables (`TUNABLES`, read when a process
starts) fix that:
  * `glibc.malloc.hugetlb=1` (glibc >= 2.35): mallocs on transparent huge pages (2 MiB faults);
  * `glibc.malloc.mmap_max=0` and a 1 TiB `glibc.malloc.trim_threshold`: large blocks come from
    the heap and freed memory stays there, so the next step reuses the same, already backed pages.
The second pair only reaches blocks allocated on the main thread: a worker thread's malloc arena
maps any block above its 64 MiB heaps whatever the tunables say. So a job under the tunables also
runs single-device XLA:CPU computations on the calling thread (`configure_jax`), where the
temporaries are then allocated. The launch scripts source launch/host_env.sh (the same tunables;
HR1_JOB_MALLOC=0 opts out) and `hr1` stages call `configure_jax`; the benchmarks re-exec
themselves. A process keeps its peak heap (the demo and 20M train steps' peak RSS was unchanged).
Older glibc and other libcs ignore the tunables.
"""
from __future__ import annotations

import os
import sys
from typing import Mapping

TUNABLES = ("glibc.malloc.hugetlb=1", "glibc.malloc.mmap_max=0", f"glibc.malloc.trim_threshold={1 << 40}")


def _keys(tunables: str) -> set[str]:
    return {t.split("=", 1)[0] for t in tunables.split(":") if t}


def with_job_malloc(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of `env` whose GLIBC_TUNABLES (colon-separated) also holds each of TUNABLES whose key
    it does not set already (a key it sets, to any value, is kept as it is)."""
    out = dict(env)
    current = out.get("GLIBC_TUNABLES", "")
    have = _keys(current)
    missing = [t for t in TUNABLES if _keys(t).isdisjoint(have)]
    if missing:
        out["GLIBC_TUNABLES"] = ":".join(([current] if current else []) + missing)
    return out


def job_malloc_requested(env: Mapping[str, str] | None = None) -> bool:
    """Whether `env` (default: this process's) sets every one of TUNABLES."""
    tunables = (os.environ if env is None else env).get("GLIBC_TUNABLES", "").split(":")
    return all(t in tunables for t in TUNABLES)


def reexec_with_job_malloc() -> None:
    """Replace this process with the same script and arguments under `with_job_malloc`, unless its
    environment already holds the tunables (then return). For scripts only, before heavy imports:
    the process image is replaced."""
    env = with_job_malloc(os.environ)
    if env.get("GLIBC_TUNABLES") == os.environ.get("GLIBC_TUNABLES"):
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *sys.argv], env)


def configure_jax() -> bool:
    """Where this process runs under the job malloc tunables (the launch scripts'): XLA:CPU runs
    single-device computations on the calling thread, so their temporaries come from the heap the
    tunables keep; True if it did. Call it before JAX creates its CPU client (JAX reads it then)."""
    if not job_malloc_requested():
        return False
    import jax
    jax.config.update("jax_cpu_enable_async_dispatch", False)
    return True
