"""`benchmarks/bench_envs_alfworld.py --compare` end to end at one task and one round: every engine
plays the same episodes, and what each process holds at the end is as its engine says (a library copy
per game opened, or one reused copy). `--memory` at three games: the baseline holds every game it
closed, the engine as it is at most the one TatSu's last parse error reaches. No timing is asserted."""
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("alfworld")
pytest.importorskip("textworld")

pytestmark = pytest.mark.alfworld
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_bench_envs_alfworld_compare_runs_and_reuse_keeps_one_library_copy():
    r = subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", "bench_envs_alfworld.py"), "--compare",
                        "--tasks", "1", "--rounds", "1"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "same episodes in every process and play: yes" in r.stdout
    line = next(x for x in r.stdout.splitlines() if x.startswith("BENCH_ALFWORLD_MEMO "))
    result = json.loads(line.split(" ", 1)[1])
    copies = {name: m["lib_copies"] for name, m in result["medians"].items()}
    assert copies == {"translation memo only, a library copy per game": 2,   # one game, played twice
                      "engine memos, no translation on disk": 1,
                      "engine memos, translations on disk, a library copy per game": 2,
                      "engine memos, translations on disk": 1}
    assert set(result["reuse_ratios"]) == {"first_s", "replay_s", "reset_ms", "step_ms"}


def test_bench_envs_alfworld_memory_runs_and_drops_closed_games():
    r = subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", "bench_envs_alfworld.py"), "--memory", "3",
                        "--rounds", "1"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "same episodes in every process: yes" in r.stdout
    line = next(x for x in r.stdout.splitlines() if x.startswith("BENCH_ALFWORLD_MEMORY "))
    kept, dropped = json.loads(line.split(" ", 1)[1])["medians"].values()
    assert (kept["games_held"], kept["registrations"]) == (3, 3)
    assert dropped["games_held"] <= 1 and dropped["registrations"] == 0   # TatSu's last error may hold one
    assert kept["facts_held"] == dropped["facts_held"] > 0               # 3 games stay under the bound
