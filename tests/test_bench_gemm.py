"""`benchmarks/bench_gemm.py` (the train step's projection GEMMs, jax against torch) runs end to end at
a tiny size: a row per projection and role, both frameworks timed, their products equal, and the
per-role step sums."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_bench_gemm_runs_and_both_frameworks_agree():
    pytest.importorskip("torch")
    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_gemm.py"), "--configs", "tiny",
                          "--tokens", "48", "--repeats", "1", "--blocks", "1"],
                         capture_output=True, text=True, timeout=600, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(next(line for line in out.stdout.splitlines() if line.startswith("BENCH_GEMM "))[11:])
    rows = result["rows"]
    assert [(r["projection"], r["role"]) for r in rows] == [
        (p, role) for p in ("q", "k", "v", "o", "gate", "up", "down")
        for role in ("forward", "input grad", "weight grad")]
    # tiny: hidden 64, 4 x 16 query and 2 x 16 KV head dims, MLP 128; the weight gradient contracts the tokens
    shapes = {(r["projection"], r["role"]): r["mkn"] for r in rows}
    assert shapes[("k", "forward")] == [48, 64, 32]
    assert shapes[("k", "input grad")] == [48, 32, 64]
    assert shapes[("down", "weight grad")] == [128, 48, 64]
    for r in rows:
        assert r["ours_gflops"] > 0 and r["torch_gflops"] > 0
        # fp32 dot products of <= 128 N(0,1)-scaled terms: the two libraries' sums differ by far less than 1e-4
        assert r["max_rel_diff"] < 1e-4, r
    totals = {t["role"]: t for t in result["totals"]}
    assert set(totals) == {"forward", "input grad", "weight grad", "all"}
    parts = sum(totals[role]["ours_ms"] for role in ("forward", "input grad", "weight grad"))
    assert totals["all"]["ours_ms"] == pytest.approx(parts)
