"""GRPO learns from its reward: the project's trainer (sampler, advantages, dynamic sampling, the
jitted GRPO step) with a synthetic reward raises that reward on a fixed probe set by a clear margin
in a few steps; the same run with permuted rewards (the null control) does not.

The start mirrors the demo: the project's SFT teaches a tiny engineer two programs per prompt
(coverage), so it writes either about equally often; the synthetic reward is 1 for one of them.
Only the reward says which to prefer. CPU, fixed seeds: deterministic.
"""
import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from hr1_jax.config import base_config
from hr1_jax.data.rows import rl_row, write_jsonl
from hr1_jax.train.data import prompt_ids
from hr1_jax.train.grpo import GRPOTrainer
from hr1_jax.train.sft import run_sft

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STEPS = 8
PROBE_SAMPLES = 8
MARGIN = 0.2           # real reward: probe gain >= MARGIN; permuted: < MARGIN / 2
PROGRAMS = ("<patch>alpha one</patch>", "<patch>omega two</patch>")


def _rows(tag: str, n: int) -> list[dict]:
    meta = lambda i: {"benchmark": "dbbench", "split": "dev", "seed": 0, "task_ids": [i], "batch_tag": f"{tag}{i}",
                      "baseline_rewards": [0.0], "identity": {}, "reward_threshold": 1.0,
                      "target_agent_name": "none"}
    return [rl_row("You write patches.", f"Batch {tag}{i}: write one.", meta(i)) for i in range(n)]


def _reward(text: str) -> float:
    return float("alpha" in text)


class SyntheticTrainer(GRPOTrainer):
    """The real trainer (its permuted-reward control included); only the rerun is replaced by
    `_reward` of the response text."""

    def _rerun(self, samples):
        for s in samples:
            s.valid, s.reward, s.result = True, _reward(s.text), _Result()


class _Result:
    valid_patch, delta_pass_rate, cache_hit, eval_status, reason = True, 0.0, False, "ok", ""


def _config():
    c = base_config()
    c.model.update(dict(vocab_size=256, hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2,
                        num_kv_heads=1, head_dim=16))
    c.mesh.fsdp = 1
    c.train.checkpoint.export_hf = False
    c.train.checkpoint.async_save = False
    c.train.logprob_chunk_size = 64
    c.train.sft.update(dict(lr=1e-2, epochs=40, warmup_ratio=0.0, batch_size=8, grad_accum=1, max_seq_len=64,
                            buckets=(64,), save_every=1000))
    c.train.grpo.update(dict(prompts_per_step=2, samples_per_prompt=8, global_batch=16, iterations=2, micro_batch=8,
                             num_steps=STEPS, save_every=STEPS, lr=3e-3, max_prompt_tokens=64,
                             max_response_tokens=12, temperature=1.0, top_p=1.0, dynamic_sampling=True))
    return c


def _sft_engineer(tmp: str) -> str:
    """Both programs for every train and probe prompt: the start policy writes either."""
    rows = [{"messages": r["prompt"] + [{"role": "assistant", "content": p}], "metadata": r["metadata"]}
            for r in _rows("train", 6) + _rows("probe", 4) for p in PROGRAMS]
    write_jsonl(os.path.join(tmp, "sft.jsonl"), rows)
    c = _config()
    c.train.sft_rows = os.path.join(tmp, "sft.jsonl")
    run_sft(c, os.path.join(tmp, "sft"))
    return os.path.join(tmp, "sft", "final_params")


def _probe(trainer, rows) -> float:
    """Mean synthetic reward of PROBE_SAMPLES samples per probe row at T=1, fixed key."""
    tok = trainer.eng.tokenizer
    prompts = [prompt_ids(tok, r) for r in rows for _ in range(PROBE_SAMPLES)]
    out = trainer.eng.sampler.generate(prompts, key=jax.random.key(123), max_new_tokens=12, temperature=1.0,
                                       stop=("</patch>",))
    return float(np.mean([_reward(o.text) for o in out]))


def _gain(init: str, workdir: str, permute: bool) -> list[float]:
    c = _config()
    c.train.init_checkpoint = init
    c.train.grpo.permute_rewards = permute
    trainer = SyntheticTrainer(c, workdir, rows=_rows("train", 6))
    probe_rows = _rows("probe", 4)
    trainer.eng.sync_sampler(trainer.state.params)
    before = _probe(trainer, probe_rows)
    trainer.run()
    return [before, _probe(trainer, probe_rows)]


def main(tmp: str) -> None:
    init = _sft_engineer(tmp)
    out = {str(p): _gain(init, os.path.join(tmp, f"grpo_{p}"), p) for p in (False, True)}
    with open(os.path.join(tmp, "gains.json"), "w") as f:
        json.dump(out, f)


@pytest.fixture(scope="module")
def gains(tmp_path_factory):
    """The experiment in a one-device process (the suite's 8 fake host devices would only add
    collectives to a model this small)."""
    tmp = str(tmp_path_factory.mktemp("learn"))
    env = dict(os.environ, PYTHONPATH=REPO, HR1_PROGRESS="0", XLA_FLAGS="--xla_force_host_platform_device_count=1")
    subprocess.run([sys.executable, __file__, tmp], cwd=REPO, env=env, check=True, capture_output=True, timeout=900)
    with open(os.path.join(tmp, "gains.json")) as f:
        got = json.load(f)
    return {p == "True": tuple(v) for p, v in got.items()}


def test_grpo_raises_a_synthetic_reward_on_a_fixed_probe_set(gains):
    before, after = gains[False]
    assert 0.2 <= before <= 0.8, before    # the start writes both programs
    assert after - before >= MARGIN, (before, after)


def test_permuted_rewards_do_not(gains):
    real_before, _ = gains[False]
    before, after = gains[True]
    assert before == real_before          # same start: the same engineer, seeds and probe
    assert after - before < MARGIN / 2, (before, after)


if __name__ == "__main__":
    main(sys.argv[1])
