"""End to end on CPU, every step a real `hr1` subprocess: scripted baselines -> `hr1 agent-sft` of a
tiny target -> `hr1 serve` it -> `hr1 baseline` with the served target (target.kind=openai) ->
`hr1 build-rows` -> `hr1 reward` of a template-teacher patch rerun against that neural target.

Contracts, not luck: the served target answers every turn of every episode (0 infra errors), rows
are built and the reward is computed (not eval_failed). Steps are few and the model tiny; the
success rate of such a target is measured by benchmarks/bench_serve.py, not asserted here."""
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from hr1_jax.data.rows import read_jsonl
from hr1_jax.train.teacher.template import TemplateTeacher

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HR1 = [sys.executable, "-m", "hr1_jax.cli"]
# few rounds, short replies, one worker and one prompt width: few decode programs to compile
COMMON = ["--config=agent_sft_demo", "--config.dbbench.backend=sqlite", "--config.dbbench.max_rounds=3",
          "--config.rollout.num_workers=1"]


def _env():
    env = dict(os.environ, HR1_PROGRESS="0", JAX_PLATFORMS="cpu")
    env["XLA_FLAGS"] = re.sub(r"--xla_force_host_platform_device_count=\d+", "", env.get("XLA_FLAGS", ""))
    return env   # one CPU device: the demo's batch of 4 needs no 8-way split


def _hr1(*args, timeout=600):
    proc = subprocess.run(HR1 + list(args), cwd=REPO, env=_env(), capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"hr1 {args[0]} rc={proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def served_target(tmp_path_factory):
    work = tmp_path_factory.mktemp("agent_sft")
    _hr1("baseline", f"--workdir={work}", *COMMON, "--config.split=dev", "--config.tasks=0:20")
    _hr1("agent-sft", f"--workdir={work}", *COMMON, "--config.train.sft.epochs=1",
         "--config.train.sft.buckets=(1536,)", "--config.train.agent_sft.train_tokenizer_vocab=512")
    proc = subprocess.Popen(HR1 + ["serve", f"--checkpoint={work}/final_params", "--port=0", "--max_batch=2",
                                   "--min_prompt_bucket=1024"],
                            cwd=REPO, env=_env(), stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    lines: list[str] = []
    ready = threading.Event()

    def read():
        for line in proc.stderr:
            lines.append(line)
            if line.startswith("hr1 serve:"):
                ready.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        assert ready.wait(300) and proc.poll() is None, "".join(lines)[-3000:]
        url = re.search(r"at (http://\S+)", next(l for l in lines if l.startswith("hr1 serve:"))).group(1)
        yield work, url
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_served_agent_sft_target_runs_baselines_and_a_teacher_patch_is_rewarded(served_target, tmp_path):
    work, url = served_target
    rows = read_jsonl(os.path.join(work, "rows", "agent_sft_rows.jsonl"))
    assert rows and all(r["metadata"]["success"] and r["tools"] for r in rows)
    assert os.path.isdir(os.path.join(work, "final_params", "params"))
    with urllib.request.urlopen(url + "/models", timeout=60) as resp:
        model = json.loads(resp.read())["data"][0]["id"]
    target = [*COMMON, "--config.target.kind=openai", f"--config.target.base_url={url}",
              f"--config.target.model={model}", "--config.target.name=agent-sft-demo",
              "--config.target.max_tokens=32", "--config.target.timeout_s=300"]
    _hr1("baseline", f"--workdir={tmp_path}", *target, "--config.split=test", "--config.tasks=0:3")
    batch = tmp_path / "baseline" / "dbbench" / "batch_000"
    summary = json.loads((batch / "summary.json").read_text())
    assert summary["n_tasks"] == 3 and summary["infra_errors"] == 0
    episodes = [json.loads(line) for line in (batch / "results.jsonl").read_text().splitlines()]
    assert all(ep["agent"]["model_calls"] >= 1 and ep["agent"]["usage"]["completion_tokens"] > 0 for ep in episodes)

    _hr1("build-rows", f"--workdir={tmp_path}", *target)
    rl_rows = read_jsonl(str(tmp_path / "rows" / "rl_dbbench.jsonl"))
    if not rl_rows:
        pytest.fail("the neural target passed every task: no failure packet to patch")
    response = TemplateTeacher(max_candidates=1).responses(rl_rows[0])[0][1]
    (tmp_path / "response.txt").write_text(response)
    _hr1("reward", f"--workdir={tmp_path}", *target, f"--row={tmp_path}/rows/rl_dbbench.jsonl", "--row_index=0",
         f"--response={tmp_path}/response.txt")
    reward = json.loads((tmp_path / "reward.json").read_text())
    assert reward["valid_patch"] and reward["eval_status"] != "eval_failed"
    assert set(reward["patched_rewards"]) == {str(t) for t in rl_rows[0]["metadata"]["task_ids"]}
