"""Process environment for compute-heavy jobs on a CPU host: glibc malloc on transparent huge pages.

XLA:CPU allocates each execution's temporaries afresh (1.1 GB for the 20M bench config's CE train
step), and glibc serves allocations above its mmap threshold (at most 32 MiB) with new mappings, so
every step faults its buffers in one 4 KiB page at a time: ~335k minor faults and 0.5-0.8 s of kernel
time per step, measured. glibc >= 2.35 reads the tunable `glibc.malloc.hugetlb=1` and madvises its
mappings for transparent huge pages (2 MiB faults: ~3.4k a step). Tunables are read when a process
starts, so this is set in the environment of a process about to start (the launch scripts source
launch/host_env.sh; the benchmarks re-exec themselves); older glibc and other libcs ignore it.
"""
from __future__ import annotations

import os
import sys
from typing import Mapping

TUNABLE = "glibc.malloc.hugetlb=1"
_KEY = "glibc.malloc.hugetlb="


def with_hugepage_malloc(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of `env` whose GLIBC_TUNABLES (colon-separated) also holds TUNABLE; one that already
    sets glibc.malloc.hugetlb (to any value) is kept as it is."""
    out = dict(env)
    current = out.get("GLIBC_TUNABLES", "")
    if _KEY not in current:
        out["GLIBC_TUNABLES"] = f"{current}:{TUNABLE}" if current else TUNABLE
    return out


def hugepage_malloc_requested(env: Mapping[str, str] | None = None) -> bool:
    """Whether `env` (default: this process's) asks glibc for huge-page malloc."""
    tunables = (os.environ if env is None else env).get("GLIBC_TUNABLES", "")
    return TUNABLE in tunables.split(":")


def reexec_with_hugepage_malloc() -> None:
    """Replace this process with the same script and arguments under `with_hugepage_malloc`, unless
    its environment already sets the tunable (then return). For scripts only, before heavy imports:
    the process image is replaced."""
    env = with_hugepage_malloc(os.environ)
    if env.get("GLIBC_TUNABLES") == os.environ.get("GLIBC_TUNABLES"):
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *sys.argv], env)
