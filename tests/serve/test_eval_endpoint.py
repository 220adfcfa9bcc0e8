"""`hr1 eval` (a real subprocess) with a model served by `ChatServer` as its endpoint engineer: the
evaluator asks the server once per failure batch, scores what comes back (a tiny random model's
text is an invalid patch, counted as such) and writes its reports."""
import json
import os
import re
import subprocess
import sys

from flax import nnx

from hr1_jax.models import ModelConfig, build_model
from hr1_jax.models.sampler import Sampler
from hr1_jax.models.tokenizer import load_tokenizer
from hr1_jax.serve.openai_api import ServeOptions
from hr1_jax.serve.server import ChatServer

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_hr1_eval_with_a_served_endpoint_engineer(tmp_path):
    tok = load_tokenizer()
    cfg = ModelConfig(vocab_size=tok.vocab_size, hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4,
                      num_kv_heads=2, head_dim=16)
    sampler = Sampler(build_model(cfg, nnx.Rngs(0)), tok)
    env = dict(os.environ, HR1_PROGRESS="0", JAX_PLATFORMS="cpu")
    env["XLA_FLAGS"] = re.sub(r"--xla_force_host_platform_device_count=\d+", "", env.get("XLA_FLAGS", ""))
    with ChatServer(sampler, tok, ServeOptions(model_id="engineer"), window_s=0.0, min_prompt_bucket=64) as srv:
        proc = subprocess.run(
            [sys.executable, "-m", "hr1_jax.cli", "eval", "--config=agent_sft_demo", f"--workdir={tmp_path}",
             f"--config.eval.engineer={srv.base_url}", "--config.eval.engineer_model=engineer",
             "--config.eval.engineer_name=served", "--config.eval.benchmarks=dbbench", "--config.eval.tasks=0:3",
             "--config.eval.seeds=0", "--config.eval.compare_teacher=False", "--config.eval.fixed_editors=",
             "--config.eval.self_refine=False", "--config.eval.best_of_n=False", "--config.eval.heldout_evidence=0",
             "--config.eval.max_new_tokens=8", "--config.rollout.num_workers=1"],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
        stats = dict(srv.batcher.stats)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert stats["requests"] == 1 and stats["errors"] == 0 and stats["completion_tokens"] >= 1
    methods = {m["name"]: m for m in json.loads((tmp_path / "eval_result.json").read_text())["methods"]}
    served = methods["served"]
    assert [(p["benchmark"], p["valid"]) for p in served["patches"]] == [("dbbench", False)]
    assert served["n_invalid"] == 1 and served["n_eval_failed"] == 0   # the random model's text, counted
    assert "| served |" in (tmp_path / "report.md").read_text()
