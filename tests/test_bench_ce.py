"""`benchmarks/bench_ce.py` runs end to end at a tiny size and its check holds: the fused CE's value
and gradients agree whichever way the head weight gradient is computed."""
import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_bench_ce_runs_and_both_ways_agree():
    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_ce.py"), "--shapes", "tiny",
                          "--batch", "2", "--seq", "40", "--repeats", "1"],
                         capture_output=True, text=True, timeout=600, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    row = next(line for line in out.stdout.splitlines() if line.startswith("| tiny"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert all(float(c) > 0 for c in cells[1:3])            # both ways timed
    assert re.match(r"[\d.]+ \([\d.]+\)", cells[3]), row     # ratio (pairwise)
    (result,) = json.loads(next(line for line in out.stdout.splitlines() if line.startswith("BENCH_CE "))[9:])
    # fp32 sums of <= 80 products of O(1) terms (x 0.125-scaled head): reordering moves them by < 1e-3
    assert result["max_abs_diff"] < 1e-3 and result["shape"] == "tiny"
