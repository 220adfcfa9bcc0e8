"""glibc malloc tunables for job processes: the environment the launch scripts and benchmarks set,
that a process started under it really gets transparent huge pages for large mallocs and keeps a
freed block's pages for the next one, and that XLA:CPU's temporaries are then no longer faulted in
anew on every call."""
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from hr1_jax.utils.host_env import TUNABLES, job_malloc_requested, with_job_malloc

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


ALL = ":".join(TUNABLES)


def test_tunables_added_appended_or_kept():
    assert with_job_malloc({})["GLIBC_TUNABLES"] == ALL
    assert with_job_malloc({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"})["GLIBC_TUNABLES"] \
        == "glibc.malloc.arena_max=2:" + ALL
    # a key the environment sets keeps its value; the other tunables are still added
    own = {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=0", "X": "1"}
    assert with_job_malloc(own) == {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=0:" + ":".join(TUNABLES[1:]), "X": "1"}
    full = {"GLIBC_TUNABLES": "glibc.malloc.mmap_max=4:" + ALL}
    assert with_job_malloc(full) == full
    assert job_malloc_requested(with_job_malloc({}))
    assert not job_malloc_requested(with_job_malloc(own))


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
    assert huge_kb(with_job_malloc(plain)) >= 2048
    if _thp_mode() == "madvise":  # without the tunable nothing asks for huge pages
        assert huge_kb(plain) == 0


def test_reexec_sets_tunable_once(tmp_path):
    script = tmp_path / "job.py"
    script.write_text("import os, sys\nsys.path.insert(0, %r)\n"
                      "from hr1_jax.utils.host_env import reexec_with_job_malloc\n"
                      "print('start', flush=True)\nreexec_with_job_malloc()\n"
                      "print(os.environ['GLIBC_TUNABLES'], sys.argv[1:])\n" % str(REPO))
    env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    out = subprocess.run([sys.executable, str(script), "a", "b"], env=env, capture_output=True, text=True,
                         check=True, timeout=60).stdout.split("\n")
    assert out[:3] == ["start", "start", f"{ALL} ['a', 'b']"]  # re-ran once, same argv


@pytest.mark.parametrize("given, opt_out", [
    ("", ""), ("glibc.malloc.arena_max=2", ""), ("glibc.malloc.hugetlb=0", ""),
    ("glibc.malloc.mmap_max=4:glibc.malloc.arena_max=1", ""), ("", "0"), ("glibc.malloc.arena_max=2", "0"),
])
def test_launch_host_env_sh(given, opt_out):
    """launch/host_env.sh sets what `with_job_malloc` would (its own copy of TUNABLES), or nothing
    with HR1_JOB_MALLOC=0."""
    expected = given if opt_out == "0" else with_job_malloc({"GLIBC_TUNABLES": given})["GLIBC_TUNABLES"]
    env = {"PATH": os.environ["PATH"], "GLIBC_TUNABLES": given, "HR1_JOB_MALLOC": opt_out or "1"}
    if not given:
        del env["GLIBC_TUNABLES"]
    out = subprocess.run(["bash", "-c", f"source {REPO / 'launch/host_env.sh'}; printf %s \"${{GLIBC_TUNABLES:-}}\""],
                         env=env, capture_output=True, text=True, check=True, timeout=30)
    assert out.stdout == expected


# A child that mallocs, touches and frees a 64 MiB block on its main thread, twice, and reports the
# minor page faults of the second round.
_REUSE_CHILD = """
import ctypes, resource
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
n = 64 << 20
for round in range(2):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    p = libc.malloc(n)
    ctypes.memset(p, 1, n)
    libc.free(p)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""

# A child running one jitted computation with a 72 MiB temporary four times: whether `configure_jax`
# turned inline dispatch on, and (glibc's mallinfo2, MiB) how much its heap grew and what it holds free.
_XLA_CHILD = """
import ctypes, json
from hr1_jax.utils.host_env import configure_jax
inline = configure_jax()
import jax, jax.numpy as jnp
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                "fsmblks", "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = Info
x, w1, w2 = jnp.ones((4096, 512)), jnp.ones((512, 4608)) / 512, jnp.ones((4608, 8))
f = jax.jit(lambda x, w1, w2: jnp.sin(x @ w1) @ w2)
before = libc.mallinfo2().arena
for _ in range(4):
    jax.block_until_ready(f(x, w1, w2))
after = libc.mallinfo2()
print(json.dumps({"inline": inline, "grew": (after.arena - before) >> 20, "free": after.fordblks >> 20}))
"""

needs_glibc_tunables = pytest.mark.skipif(not _glibc_at_least(2, 26) or not Path("/proc/self").exists(),
                                          reason="needs Linux and glibc >= 2.26 (the malloc tunables)")


def _child(code: str, tunables: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    if tunables is not None:
        env["GLIBC_TUNABLES"] = tunables
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                          cwd=REPO, timeout=300).stdout.strip().splitlines()[-1]


@needs_glibc_tunables
def test_freed_block_keeps_its_pages_under_the_tunables():
    kept = int(_child(_REUSE_CHILD, ALL))
    mapped_anew = int(_child(_REUSE_CHILD, None))   # plain glibc maps a 64 MiB block and unmaps it on free
    assert kept <= 8, kept
    assert mapped_anew >= 32, mapped_anew            # 64 MiB is at least 32 faults, even in 2 MiB pages


@needs_glibc_tunables
@pytest.mark.skipif(not _glibc_at_least(2, 33), reason="needs glibc >= 2.33 (mallinfo2)")
def test_xla_cpu_temporaries_come_from_the_kept_heap_under_the_job_setup():
    job = json.loads(_child(_XLA_CHILD, ALL))
    huge_pages_only = json.loads(_child(_XLA_CHILD, TUNABLES[0]))
    assert job["inline"] and not huge_pages_only["inline"]
    # inline, the 72 MiB temporary is allocated on the main thread, from the heap, which keeps it
    # free for the next call (no new mapping, no faults: test above); with JAX's default dispatch it
    # is a worker thread's mapping, unmapped at the end of each call
    assert job["free"] >= 72 and job["grew"] >= 72, job
    assert huge_pages_only["grew"] < 72, huge_pages_only


def test_hr1_stages_configure_jax_under_the_tunables():
    code = ("from hr1_jax.cli import main\nimport contextlib, io\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n    main(['patch', '--help'])\n"
            "from jax._src import xla_bridge\nprint(xla_bridge._CPU_ENABLE_ASYNC_DISPATCH.value)")
    assert _child(code, ALL) == "False"
    assert _child(code, None) == "True"
