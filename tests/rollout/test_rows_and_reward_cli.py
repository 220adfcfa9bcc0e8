"""`hr1 baseline` -> `hr1 build-rows` -> `hr1 reward` on DBBench (SQLite) with the scripted target."""
import json
import os
import subprocess
import sys

from hr1_jax.config import base_config, validate_config
from hr1_jax.data.rows import read_jsonl
from hr1_jax.rollout.cli import baseline_stage, build_rows_stage
from hr1_jax.rollout.prompts import EVIDENCE_MARKER

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PATCH = {"benchmark": "dbbench", "description": "probe schema first",
         "actions": [{"type": "add_code_hook", "hook": "on_init",
                      "code": "def hook(ctx, nb):\n    return {\"skills\": [\"Run DESCRIBE on the table before querying.\"]}\n"},
                     {"type": "add_code_hook", "hook": "on_before_action",
                      "code": "def hook(ctx, nb):\n    if ctx[\"predicates\"][\"commit_before_sql\"]:\n"
                              "        return {\"kind\": \"block_and_prompt\", \"message\": \"Execute SQL before committing.\"}\n"
                              "    return None\n"}]}


def test_baseline_build_rows_and_reward_cli(tmp_path):
    c = base_config()
    c.benchmark, c.tasks = "dbbench", "0:10"
    c.dbbench.backend = "sqlite"
    validate_config(c)
    assert baseline_stage(c, str(tmp_path)) == 0
    assert build_rows_stage(c, str(tmp_path)) == 0
    rows = read_jsonl(str(tmp_path / "rows" / "rl_dbbench.jsonl"))
    assert len(rows) == 1
    row = rows[0]
    system, user = row["prompt"]
    assert system["role"] == "system" and user["role"] == "user"
    assert EVIDENCE_MARKER in user["content"] and "Trace index=" in user["content"]
    assert user["content"].index(EVIDENCE_MARKER) < user["content"].index("# DBBench batch evidence")
    meta = row["metadata"]
    assert meta["task_ids"] == list(range(10)) and meta["schema_style"] == "dbbench_life_multihook_v1"
    assert meta["identity"]["batch_sha256"] and meta["response_protocol"] == "prefill_think_patch"
    grouped = read_jsonl(str(tmp_path / "rows" / "rl_grouped.jsonl"))
    assert len(grouped) % c.rollout.group_size == 0
    assert {r["metadata"]["mixed_group_benchmark"] for r in grouped} == {"dbbench"}

    resp = tmp_path / "response.txt"
    resp.write_text(f"- commits before SQL\n</think>\n<patch>{json.dumps(PATCH)}</patch>")
    cmd = [sys.executable, "-m", "hr1_jax.cli", "reward", "--config.dbbench.backend=sqlite",
           f"--row={tmp_path / 'rows' / 'rl_dbbench.jsonl'}", "--row_index=0", f"--response={resp}",
           f"--workdir={tmp_path / 'rw'}"]
    runs = [subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300) for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs[0].stderr[-2000:]
    first, second = (json.loads(r.stdout) for r in runs)
    assert first["eval_status"] == "ok" and first["batch_size"] == 10 and not first["cache_hit"]
    assert second["cache_hit"] and second["score"] == first["score"]
    assert first["baseline_average_reward"] == meta["baseline_average_reward"]
