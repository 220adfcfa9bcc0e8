"""The scripts that time a model change against the form it replaced (`benchmarks/bench_attention.py`:
the attention's own VJP against autodiff through jax.nn.softmax, our attention against torch's SDPA
(forward, and forward + backward), and the train step with the causal attention's query blocks split
against sliced, with RoPE's own VJP against autodiff and with the attention's mask an added bias
against a select;
`benchmarks/bench_ce.py`: the fused CE's head weight gradient against one folded contraction, and the
log-probs' head matmul against autodiff) run end to end at a tiny size, and their check holds: both
ways give the same values and gradients (the same first loss for the train step);
`benchmarks/bench_sampler.py` (the top-p search) keeps one threshold across its three searches."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


# bench_attention at 150 positions: three causal blocks of 64 queries and a ragged fourth, so the step
# table's two ways of cutting the query blocks differ
@pytest.mark.parametrize("script,seq", [("bench_attention.py", 150), ("bench_ce.py", 40)])
def test_script_runs_and_both_ways_agree(script, seq):
    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / script), "--shapes", "tiny",
                          "--batch", "2", "--seq", str(seq), "--repeats", "1"],
                         capture_output=True, text=True, timeout=600, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [line for line in out.stdout.splitlines() if line.startswith("| tiny")]
    # bench_attention: attention, torch's SDPA (two passes) and three train steps (query blocks, RoPE,
    # mask); bench_ce: ce and logprobs
    assert len(rows) == (6 if script == "bench_attention.py" else 2)
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        if cells[1] in ("forward", "forward + backward"):   # the SDPA table's pass column
            del cells[1]
        assert all(float(c) > 0 for c in cells[1:3])            # both ways timed
        # fp32 sums of <= 150 products of O(1) terms (a mean loss for the step): reordering them moves the
        # results by far less than 1e-3
        assert float(cells[4]) < 1e-3, row
        assert re.match(r"[\d.]+ \([\d.]+\)", cells[3]), row     # ratio (pairwise)


def test_bench_sampler_runs_and_every_search_keeps_the_same_thresholds():
    """bench_sampler at small points on each CPU path (a lone row, rows in pieces, a group of rows):
    the whole batch's bisection, the CPU search and its former form give bit-identical thresholds, and
    the row search's passes are printed."""
    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_sampler.py"),
                          "--points", "1x20000,2x40000,4x1000", "--repeats", "1"],
                         capture_output=True, text=True, timeout=600, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [line for line in out.stdout.splitlines() if re.match(r"\| \d+ x \d+ \|", line)]
    assert len(rows) == 3, out.stdout
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert all(float(c) > 0 for c in cells[1:4]), row          # the three searches timed
        assert re.fullmatch(r"\d+ / [\d.]+ / \d+", cells[5]), row  # row search passes: min / median / max
        assert cells[-1] == "identical", row
