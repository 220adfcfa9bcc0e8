"""glibc huge-page malloc for job processes: the environment the launch scripts and benchmarks set,
and that a process started under it really gets transparent huge pages for large mallocs."""
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from hr1_jax.utils.host_env import TUNABLE, hugepage_malloc_requested, with_hugepage_malloc

REPO = Path(__file__).resolve().parents[2]

# A child that mallocs and touches 64 MiB through libc, then reports its anonymous huge pages (kB).
_CHILD = """
import ctypes
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
n = 64 << 20
p = libc.malloc(n)
ctypes.memset(p, 1, n)
print([int(l.split()[1]) for l in open("/proc/self/smaps_rollup") if l.startswith("AnonHugePages")][0])
"""


def test_tunable_added_appended_or_kept():
    assert with_hugepage_malloc({})["GLIBC_TUNABLES"] == TUNABLE
    assert with_hugepage_malloc({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"})["GLIBC_TUNABLES"] \
        == "glibc.malloc.arena_max=2:" + TUNABLE
    kept = {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=0", "X": "1"}
    assert with_hugepage_malloc(kept) == kept
    assert hugepage_malloc_requested(with_hugepage_malloc({}))
    assert not hugepage_malloc_requested(kept)


def _thp_mode() -> str | None:
    try:
        text = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return None
    return text.split("[")[1].split("]")[0]


def _glibc_at_least(major: int, minor: int) -> bool:
    lib, version = platform.libc_ver()
    if lib != "glibc" or not version:
        return False
    return tuple(int(x) for x in version.split(".")[:2]) >= (major, minor)


@pytest.mark.skipif(_thp_mode() not in ("madvise", "always") or not Path("/proc/self/smaps_rollup").exists()
                    or not _glibc_at_least(2, 35),
                    reason="needs Linux transparent huge pages (madvise/always) and glibc >= 2.35")
def test_child_under_tunable_gets_huge_pages():
    def huge_kb(env):
        out = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True,
                             check=True, timeout=60)
        return int(out.stdout.strip())

    plain = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    assert huge_kb(with_hugepage_malloc(plain)) >= 2048
    if _thp_mode() == "madvise":  # without the tunable nothing asks for huge pages
        assert huge_kb(plain) == 0


def test_reexec_sets_tunable_once(tmp_path):
    script = tmp_path / "job.py"
    script.write_text("import os, sys\nsys.path.insert(0, %r)\n"
                      "from hr1_jax.utils.host_env import reexec_with_hugepage_malloc\n"
                      "print('start', flush=True)\nreexec_with_hugepage_malloc()\n"
                      "print(os.environ['GLIBC_TUNABLES'], sys.argv[1:])\n" % str(REPO))
    env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    out = subprocess.run([sys.executable, str(script), "a", "b"], env=env, capture_output=True, text=True,
                         check=True, timeout=60).stdout.split("\n")
    assert out[:3] == ["start", "start", f"{TUNABLE} ['a', 'b']"]  # re-ran once, same argv


@pytest.mark.parametrize("given, opt_out, expected", [
    ("", "", TUNABLE),
    ("glibc.malloc.arena_max=2", "", "glibc.malloc.arena_max=2:" + TUNABLE),
    ("glibc.malloc.hugetlb=0", "", "glibc.malloc.hugetlb=0"),
    ("", "0", ""),
])
def test_launch_host_env_sh(given, opt_out, expected):
    env = {"PATH": os.environ["PATH"], "GLIBC_TUNABLES": given, "HR1_HUGEPAGES": opt_out or "1"}
    if not given:
        del env["GLIBC_TUNABLES"]
    out = subprocess.run(["bash", "-c", f"source {REPO / 'launch/host_env.sh'}; printf %s \"${{GLIBC_TUNABLES:-}}\""],
                         env=env, capture_output=True, text=True, check=True, timeout=30)
    assert out.stdout == expected
