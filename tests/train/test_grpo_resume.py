"""Resume: a GRPO run SIGKILLed after its step-2 checkpoint and restarted logs the same later
metrics as an uninterrupted run (real DBBench baseline rows, scripted target, fixed seeds).

The engineer is a random tiny model, so every patch is invalid and rewards are 0; a KL term (k3
against the frozen start) and an entropy bonus make the updates non-trivial, so the equality
covers params, optimiser state, RNG key and the grain iterator position after the restart.
"""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from fixtures.dbbench_rows import dbbench_rl_rows
from hr1_jax.data.rows import write_jsonl
from hr1_jax.utils.tensorboard import read_events

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = '''
from hr1_jax.config import base_config

def get_config():
    c = base_config()
    c.dbbench.backend = "sqlite"
    c.rollout.num_workers = 1
    c.model.update(dict(vocab_size=256, hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2,
                        num_kv_heads=1, head_dim=16))
    c.mesh.fsdp = 1
    c.train.rows = {rows!r}
    c.train.checkpoint.export_hf = False
    c.train.checkpoint.async_save = True
    c.train.logprob_chunk_size = 64
    g = c.train.grpo
    g.update(dict(prompts_per_step=1, samples_per_prompt=2, global_batch=2, iterations=1, micro_batch=2,
                  num_steps=4, save_every=1, lr=1e-3, kl_coef=0.5, kl_estimator="k3", entropy_coef=0.05,
                  max_prompt_tokens=4096, max_response_tokens=16, temperature=1.0, top_p=1.0))
    return c
'''
COMPARE = ("train/loss", "train/kl", "train/entropy", "train/grad_norm", "reward/mean",
           "perf/response_tokens_mean")


@pytest.fixture(scope="module")
def rows_file(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("resume")
    rows = dbbench_rl_rows("resume")
    path = str(tmp / "rows.jsonl")
    write_jsonl(path, rows)
    cfg = tmp / "cfg.py"
    cfg.write_text(CONFIG.format(rows=path))
    return str(cfg), tmp


def _cmd(cfg, workdir):
    return [sys.executable, "-m", "hr1_jax.cli", "grpo", f"--config={cfg}", f"--workdir={workdir}"]


def _env():
    env = dict(os.environ, PYTHONPATH=REPO, HR1_PROGRESS="0")
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=1"
    return env


def _last_by_step(logdir):
    out = {}
    for tag, items in read_events(logdir).items():
        for step, value in items:
            out.setdefault(tag, {})[step] = value   # a step logged twice (killed mid-step): keep the rerun
    return out


@pytest.mark.slow
def test_killed_grpo_run_resumes_to_identical_metrics(rows_file):
    cfg, tmp = rows_file
    full, killed = tmp / "full", tmp / "killed"
    subprocess.run(_cmd(cfg, full), cwd=REPO, env=_env(), check=True, capture_output=True, timeout=600)

    proc = subprocess.Popen(_cmd(cfg, killed), cwd=REPO, env=_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    marker = killed / "checkpoints" / "2"
    deadline = time.monotonic() + 600
    while not (marker / "commit_success.txt").exists() and not (marker / "_CHECKPOINT_METADATA").exists():
        assert proc.poll() is None, "run ended before its step-2 checkpoint"
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    resumed = subprocess.run(_cmd(cfg, killed), cwd=REPO, env=_env(), capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert '"event": "restored"' in resumed.stderr

    a, b = _last_by_step(full / "tensorboard"), _last_by_step(killed / "tensorboard")
    assert sorted(a["reward/mean"]) == [1, 2, 3, 4] and sorted(b["reward/mean"]) == [1, 2, 3, 4]
    assert a["train/kl"][4] > 0 and a["train/grad_norm"][3] > 0
    for tag in COMPARE:
        for step in (3, 4):
            assert b[tag][step] == pytest.approx(a[tag][step], rel=1e-5, abs=1e-7), (tag, step)
    summary = json.loads((killed / "grpo_summary.json").read_text())
    assert summary["steps"] == 4
