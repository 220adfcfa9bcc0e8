"""`benchmarks/bench_attention.py` runs end to end at a tiny size and its check holds: the model's
attention VJP and autodiff through jax.nn.softmax agree."""
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_bench_attention_runs_and_both_ways_agree():
    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_attention.py"), "--shapes", "tiny",
                          "--batch", "2", "--seq", "40", "--repeats", "1"],
                         capture_output=True, text=True, timeout=600, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    row = next(line for line in out.stdout.splitlines() if line.startswith("| tiny"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert all(float(c) > 0 for c in cells[1:3])            # both ways timed
    # fp32, sums of <= 40 terms: the two orders of summation differ by far less than 1e-3
    assert float(cells[4]) < 1e-3, row
    assert re.match(r"[\d.]+ \([\d.]+\)", cells[3]), row     # ratio (pairwise)
