"""Held-out scoring of an engineer (or any response source) with the paired-rerun reward.

`engineer_responses` decodes greedily (temperature 0, the reference's eval setting) from the
current sampler, or samples at a given temperature (the sampled metric: what GRPO optimises);
`score_responses` reruns each held-out batch with the parsed patch and returns the
table entries: mean delta reward, delta pass rate, valid-patch rate and how many batches were
scored (eval_failed batches are reported as missing, never as 0).
"""
from __future__ import annotations

import jax
import numpy as np

from hr1_jax.rollout.reward import RewardContext, score_group
from hr1_jax.train.data import prompt_ids

STOP = ("</patch>",)


def engineer_responses(sampler, tokenizer, rows: list[dict], *, max_new_tokens: int, batch_size: int = 16,
                       seed: int = 0, temperature: float = 0.0, top_p: float = 1.0) -> list[str]:
    out: list[str] = []
    key = jax.random.key(seed)
    for start in range(0, len(rows), batch_size):
        chunk = rows[start:start + batch_size]
        res = sampler.generate([prompt_ids(tokenizer, r) for r in chunk], key=jax.random.fold_in(key, start),
                               max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, stop=STOP)
        out += [r.text for r in res]
    return out


def score_responses(rows: list[dict], responses: list[str], ctx: RewardContext) -> tuple[dict, list]:
    """Aggregate over held-out batches. Invalid patches count as delta 0 (no patch), like the reference."""
    results = score_group(rows, responses, ctx)
    scored = [r for r in results if not r.excluded]
    entry = {
        "mean_delta_reward": float(np.mean([r.delta_average_reward for r in scored])) if scored else 0.0,
        "delta_pass_rate": float(np.mean([r.delta_pass_rate for r in scored])) if scored else 0.0,
        "valid_rate": float(np.mean([bool(r.valid_patch) for r in results])) if results else 0.0,
        "n_batches": len(scored),
        "eval_failed": len(results) - len(scored),
    }
    return entry, results
