"""`benchmarks/bench_reward.py`'s position-balanced speedup: a slowdown that hits whichever pool's cold
group runs second cancels out of it."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from bench_reward import balanced_ratio  # noqa: E402


def test_balanced_ratio_takes_out_a_slowdown_of_whichever_pool_runs_second():
    speedup, slowdown = 1.8, 1.3
    ran_after = [speedup / slowdown * k for k in (0.98, 1.0, 1.03)]    # the faster pool ran second
    ran_before = [speedup * slowdown * k for k in (0.97, 1.0, 1.02)]   # the slower pool ran second
    assert balanced_ratio(ran_after, ran_before) == pytest.approx(speedup, rel=1e-12)
    assert balanced_ratio([1.5], [1.5]) == pytest.approx(1.5, rel=1e-12)   # no order effect: unchanged
