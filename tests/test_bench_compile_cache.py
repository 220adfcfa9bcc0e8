"""`benchmarks/bench_compile_cache.py` end to end on the demo config, one round at one length, every
compile cached: the warm process loads the log-prob pass and the update from the cache the first
process filled, the one without a cache loads nothing, and the table and JSON line carry every
(length, part). No timing is asserted."""
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_bench_compile_cache_runs_and_the_warm_process_hits():
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    for name in ("JAX_COMPILATION_CACHE_DIR", "XLA_FLAGS"):   # one CPU device, as a user runs it
        env.pop(name, None)
    r = subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", "bench_compile_cache.py"),
                        "--repeats", "1", "--lengths", "128",
                        "--min-compile-seconds", "0"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "| 128 | update |" in r.stdout and "| 128 | logprobs |" in r.stdout
    assert "per off process 0" in r.stdout
    line = next(x for x in r.stdout.splitlines() if x.startswith("BENCH_COMPILE_CACHE "))
    result = json.loads(line.split(" ", 1)[1])
    assert [(row["length"], row["part"]) for row in result["rows"]] == [(128, "logprobs_s"), (128, "update_s")]
    assert result["warm_hits"][0] >= 2   # every compile is cached here: the log-prob pass and the update
