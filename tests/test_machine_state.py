"""benchmarks/machine_state.py and timing.py: the steal share and load averages the benchmark scripts print beside
their figures (read from /proc/stat text, real kernels' line layouts, and from this machine), and
their interleaved rounds."""
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import machine_state as ms  # noqa: E402

# /proc/stat of a 2-vCPU KVM guest (aggregate line and per-CPU lines; the aggregate comes first).
STAT_A = """cpu  174561 0 14039 153812 939 0 219 21686 0 0
cpu0 87000 0 7000 77000 400 0 100 10800 0 0
cpu1 87561 0 7039 76812 539 0 119 10886 0 0
intr 1 2 3
"""
STAT_B = """cpu  256605 0 18985 197250 944 0 237 50275 0 0
cpu0 128000 0 9000 99000 400 0 110 25100 0 0
"""


def test_the_aggregate_cpu_line_is_parsed_field_by_field():
    ticks = ms.parse_cpu_ticks(STAT_A)
    assert ticks == {"user": 174561, "nice": 0, "system": 14039, "idle": 153812, "iowait": 939, "irq": 0,
                     "softirq": 219, "steal": 21686}


def test_steal_share_is_steal_ticks_over_all_ticks_between_readings():
    share = ms.steal_share(ms.parse_cpu_ticks(STAT_A), ms.parse_cpu_ticks(STAT_B))
    # deltas: user 82044, system 4946, idle 43438, iowait 5, softirq 18, steal 28589
    assert share == pytest.approx(28589 / (82044 + 4946 + 43438 + 5 + 18 + 28589))
    assert ms.format_share(share) == "18%"


def test_guest_time_is_not_counted_twice():
    # guest ticks are already inside user; a reading where only guest grew adds nothing to the total
    a = ms.parse_cpu_ticks("cpu  100 0 0 100 0 0 0 0 0 0\n")
    b = ms.parse_cpu_ticks("cpu  200 0 0 100 0 0 0 100 50 0\n")
    assert ms.steal_share(a, b) == pytest.approx(0.5)


def test_an_old_kernel_without_the_steal_field_reads_zero_steal():
    a = ms.parse_cpu_ticks("cpu  100 0 10 100 1 0 0\n")
    b = ms.parse_cpu_ticks("cpu  150 0 20 140 1 0 0\n")
    assert a["steal"] == 0 and ms.steal_share(a, b) == 0.0


def test_missing_readings_and_no_elapsed_ticks_read_n_a():
    a = ms.parse_cpu_ticks(STAT_A)
    assert ms.parse_cpu_ticks("intr 1 2\n") is None
    assert ms.steal_share(None, a) is None and ms.steal_share(a, None) is None
    assert ms.steal_share(a, a) is None
    assert ms.format_share(None) == "n/a"
    assert ms.read_cpu_ticks("/nonexistent/stat") is None
    assert ms.CpuWindow("/nonexistent/stat").steal_text() == "n/a"


def test_a_window_over_this_machines_proc_stat_reads_a_share_or_n_a():
    window = ms.CpuWindow()
    subprocess.run([sys.executable, "-c", "sum(range(10**6))"], check=True)  # let some ticks pass
    share = window.steal()
    if Path("/proc/stat").exists():
        assert share is None or 0.0 <= share <= 1.0
        assert ms.read_cpu_ticks() is not None
    else:
        assert share is None
    text = ms.load_text()
    assert text == "n/a" or len(text.split()) == 3


def test_bench_models_load_column_carries_the_steal_share():
    import bench_model

    assert bench_model.load_cell({"load_start": 1.07, "load_end": 1.56, "steal": 0.061}) == "1.1-1.6, steal 6%"
    assert bench_model.load_cell({"load_start": None, "load_end": None, "steal": None}) == "n/a, steal n/a"


def test_bench_models_own_peak_line_divides_each_frameworks_rate_by_its_own_peak():
    import bench_model

    rows = [{"config": "demo", "ours_train_gflops": 100.0, "torch_train_gflops": 120.0},
            {"config": "20m", "ours_train_gflops": 174.0, "torch_train_gflops": 194.0}]
    line = bench_model.own_peak_line(rows, {"jax": 290.0, "torch": 334.0})
    assert line == ("fp32 matmul peaks of this run: jax 290, torch 334 GFLOP/s (jax / torch 0.87); train GFLOP/s "
                    "over the framework's own peak, ours / torch: demo 34% / 36%, 20m 60% / 58%")
    assert bench_model.own_peak_line(rows, {"jax": 290.0}) is None              # no torch peak
    assert bench_model.own_peak_line(rows, None) is None                        # --peak-tflops: a table peak
    assert bench_model.own_peak_line([{"config": "demo", "ours_train_gflops": 1.0}],
                                     {"jax": 1.0, "torch": 1.0}) is None         # --no-torch


def test_interleaved_samples_take_one_sample_of_each_per_round_in_turn():
    import timing

    calls = []
    got = timing.interleaved_samples({"a": lambda: calls.append("a") or len(calls),
                                      "b": lambda: calls.append("b") or 10 * len(calls)}, 3)
    assert calls == ["a", "b"] * 3
    assert got == {"a": [1, 3, 5], "b": [20, 40, 60]}
    assert timing.pairwise_median(got["b"], got["a"]) == pytest.approx(40 / 3)


def test_balanced_rounds_alternate_the_order_and_keep_samples_by_round():
    import timing

    calls = []
    got = timing.interleaved_samples({"a": lambda: calls.append("a") or len(calls),
                                      "b": lambda: calls.append("b") or 10 * len(calls)}, 3, balanced=True)
    assert calls == ["a", "b", "b", "a", "a", "b"]
    assert got == {"a": [1, 4, 5], "b": [20, 30, 60]}


def test_bench_models_rounds_warm_up_twice_untimed_then_alternate_the_order():
    import bench_model

    calls = []
    out = bench_model.interleaved({"ours": lambda: calls.append("ours"), "torch": lambda: calls.append("torch")}, 3)
    import timing

    warm = ["ours", "torch"] * timing.WARMUP_ROUNDS
    assert calls == warm + ["ours", "torch", "torch", "ours", "ours", "torch"]
    assert {k: len(v) for k, v in out["warmup"].items()} == {"ours": 2, "torch": 2}
    assert set(out["pairwise"]) == {"ours", "torch"} and out["pairwise"]["ours"] == 1.0
