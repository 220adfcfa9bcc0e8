"""`benchmarks/bench_interpreters.py`: a benchmark script's figures under two interpreters, compared
per round; its summary, its errors, and one real round of each benchmark with this interpreter on
both sides."""
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_interpreters  # noqa: E402
from bench_interpreters import BENCHES, PATCH_FIGURES, run_bench, summarise  # noqa: E402


def _run(scale: float) -> dict:
    return {key: (target or 10.0) * scale for key, _, target in PATCH_FIGURES}


def test_summarise_pairs_rounds_and_counts_targets():
    baseline = [_run(1.1), _run(0.9), _run(1.3)]            # meets the targets in one round of three
    candidate = [_run(0.88), _run(0.99), _run(0.91)]        # same-round ratios 0.8, 1.1, 0.7
    rows = {row["figure"]: row for row in summarise(PATCH_FIGURES, baseline, candidate)}
    valid = rows["validation_max_ms"]
    assert valid["baseline"] == pytest.approx(5.5) and valid["candidate"] == pytest.approx(0.91 * 5)
    assert valid["ratio"] == pytest.approx(0.8)
    assert (valid["baseline_met"], valid["candidate_met"], valid["candidate_faster"]) == (1, 3, 2)
    assert rows["validation_median_ms"]["baseline_met"] is None    # no target: no count


def test_a_failing_interpreter_is_a_clear_error(tmp_path):
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho 'ModuleNotFoundError: No module named jax' >&2\nexit 1\n")
    broken.chmod(0o755)
    with pytest.raises(RuntimeError, match="exited 1 without figures:\n.*No module named jax"):
        run_bench("patch", str(broken), 10, 1)
    with pytest.raises(SystemExit):
        bench_interpreters.main(["--candidate", str(tmp_path / "missing")])


@pytest.mark.parametrize("bench", sorted(BENCHES))
def test_one_round_with_this_interpreter_on_both_sides(bench, capsys):
    assert bench_interpreters.main(["--bench", bench, "--candidate", sys.executable, "--rounds", "1",
                                    "--calls", "20", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    data = json.loads(out.splitlines()[-1][len("BENCH_INTERPRETERS "):])
    assert len(data["runs"]["baseline"]) == len(data["runs"]["candidate"]) == 1
    assert data["runs"]["candidate"][0]["executable"] == sys.executable
    assert [row["figure"] for row in data["rows"]] == [key for key, _, _ in BENCHES[bench][2]]
    assert all(row["baseline"] > 0 and row["candidate"] > 0 for row in data["rows"])
