"""The same `hr1 rollout` (a patch whose hooks each do ~25 ms of C work) gives identical rewards,
actions and hook statuses on an idle machine and beside two CPU-bound processes: the budgets that
decide a hook's fate count work, not time (issue 10)."""
import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("bench_load", REPO / "benchmarks" / "bench_load_independence.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def test_rollout_rewards_and_hook_statuses_do_not_depend_on_load(tmp_path):
    patch = bench.make_work_patch(tmp_path / "work_patch.json", iters=12)
    idle = bench.run_rollout(tmp_path / "idle", patch, "0:3")
    with bench.cpu_burners(2):
        loaded = bench.run_rollout(tmp_path / "loaded", patch, "0:3")
    assert bench.outcome_view(idle) == bench.outcome_view(loaded)
    events = [e for r in idle for e in r["hook_events"]]
    assert events and all(e["status"] in ("ok", "none") for e in events)  # the work really ran
