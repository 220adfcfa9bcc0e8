"""GRPO advantages and the clipped policy-gradient loss (reference spec §6).

Pure functions over arrays: no model, no optimiser. Every loss is returned as a numerator and a
denominator so that gradient accumulation, minibatching and multi-host means stay exact: the
trainer sums numerators and denominators over micro-batches and divides once.

Shapes: per-token arrays are `[B, T]` (response positions only; `mask` is 1 on real response
tokens), per-sample arrays are `[B]`.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

AGG_MODES = ("token-mean", "seq-mean-token-mean")
KL_ESTIMATORS = ("k1", "k2", "k3")
# exp() of a log-ratio above this overflows fp32 long before it means anything.
_LOG_RATIO_CLAMP = 20.0


def group_advantages(rewards, valid=None, *, std_normalize: bool = True, eps: float = 1e-6,
                     ddof: int = 1) -> np.ndarray:
    """Group-relative advantages for rewards shaped `[num_groups, G]`.

    `valid[g, i]` false (e.g. `eval_failed`: the reward is unknown, not 0) removes sample i from its
    group's mean/std and gives it advantage 0 (it is also masked out of the update by the caller).
    A group with fewer than two valid samples, or with zero spread, carries no signal: all 0.
    `ddof=1` matches torch's default unbiased std used by the reference trainer.
    """
    r = np.asarray(rewards, np.float64)
    if r.ndim != 2:
        raise ValueError(f"rewards must be [num_groups, G], got shape {r.shape}")
    v = np.ones_like(r, bool) if valid is None else np.asarray(valid, bool)
    if v.shape != r.shape:
        raise ValueError(f"valid shape {v.shape} != rewards shape {r.shape}")
    n = v.sum(axis=1, keepdims=True)
    safe_n = np.maximum(n, 1)
    mean = np.where(v, r, 0.0).sum(axis=1, keepdims=True) / safe_n
    centred = np.where(v, r - mean, 0.0)
    adv = centred
    var = (centred ** 2).sum(axis=1, keepdims=True) / np.maximum(n - ddof, 1)
    std = np.sqrt(var)
    if std_normalize:
        adv = centred / (std + eps)
    degenerate = (n < 2) | (std <= 1e-12)
    adv = np.where(degenerate | ~v, 0.0, adv)
    return adv.astype(np.float32)


def kl_estimate(logp, ref_logp, estimator: str = "k1"):
    """Per-token KL(pi || ref) estimators in fp32 (Schulman's k1/k2/k3) on sampled tokens."""
    if estimator not in KL_ESTIMATORS:
        raise ValueError(f"unknown KL estimator {estimator!r}; one of {KL_ESTIMATORS}")
    log_ratio = logp.astype(jnp.float32) - ref_logp.astype(jnp.float32)
    if estimator == "k1":
        return log_ratio
    if estimator == "k2":
        return 0.5 * jnp.square(log_ratio)
    neg = jnp.clip(-log_ratio, -_LOG_RATIO_CLAMP, _LOG_RATIO_CLAMP)
    return jnp.exp(neg) - 1.0 - neg  # k3 ("low_var_kl"): always >= 0


def aggregate(values, mask, mode: str):
    """(numerator, denominator) of a masked mean under an aggregation mode.

    token-mean: every response token weighs the same (sum / #tokens).
    seq-mean-token-mean: mean over tokens inside each sequence, then mean over sequences that
    have at least one token (the reference's default per-sample mean).
    """
    if mode not in AGG_MODES:
        raise ValueError(f"unknown aggregation mode {mode!r}; one of {AGG_MODES}")
    mask = mask.astype(jnp.float32)
    values = values.astype(jnp.float32) * mask
    if mode == "token-mean":
        return values.sum(), mask.sum()
    tokens = mask.sum(axis=-1)
    has = (tokens > 0).astype(jnp.float32)
    per_seq = values.sum(axis=-1) / jnp.maximum(tokens, 1.0)
    return (per_seq * has).sum(), has.sum()


class LossConfig(NamedTuple):
    eps_clip: float = 0.2
    eps_clip_high: float = 0.28
    tis_cap: float = 2.0          # <= 0 turns truncated importance sampling off
    kl_coef: float = 0.0
    kl_estimator: str = "k1"
    entropy_coef: float = 0.0
    agg_mode: str = "seq-mean-token-mean"


def policy_loss(logp, old_logp, advantages, mask, cfg: LossConfig, *, sampler_logp=None,
                ref_logp=None, entropy=None):
    """PPO-clip loss with asymmetric bounds, TIS against the sampler, optional KL and entropy.

    logp: current policy log-probs `[B, T]` (differentiated); old_logp: the policy that defines the
    trust region (trainer log-probs before the update); sampler_logp: log-probs the inference
    sampler reported for the same tokens; the TIS weight min(exp(old - sampler), cap) corrects the
    sampler/trainer mismatch and is not differentiated. advantages: `[B]` (broadcast over tokens).

    Returns (numerator, denominator, metrics); loss = numerator / denominator. Metric values are
    sums over this micro-batch with their own `*_den` entries so that they accumulate exactly too.
    """
    f32 = jnp.float32
    mask = mask.astype(f32)
    logp = logp.astype(f32)
    old_logp = jax.lax.stop_gradient(old_logp.astype(f32))
    adv = jnp.broadcast_to(advantages.astype(f32)[:, None], logp.shape)

    log_ratio = jnp.clip(logp - old_logp, -_LOG_RATIO_CLAMP, _LOG_RATIO_CLAMP)
    ratio = jnp.exp(log_ratio)
    clipped = jnp.clip(ratio, 1.0 - cfg.eps_clip, 1.0 + cfg.eps_clip_high)
    pg = jnp.maximum(-adv * ratio, -adv * clipped)

    if sampler_logp is not None and cfg.tis_cap > 0:
        is_log = jnp.clip(old_logp - sampler_logp.astype(f32), -_LOG_RATIO_CLAMP, _LOG_RATIO_CLAMP)
        is_ratio = jnp.exp(is_log)
        pg = pg * jax.lax.stop_gradient(jnp.minimum(is_ratio, cfg.tis_cap))
    else:
        is_ratio = jnp.ones_like(ratio)

    per_token = pg
    kl = None
    if ref_logp is not None:
        kl = kl_estimate(logp, ref_logp, cfg.kl_estimator)
        if cfg.kl_coef:
            per_token = per_token + cfg.kl_coef * kl
    if entropy is not None and cfg.entropy_coef:
        per_token = per_token - cfg.entropy_coef * entropy.astype(f32)

    num, den = aggregate(per_token, mask, cfg.agg_mode)

    n_tok = mask.sum()
    big = jnp.finfo(f32).max
    metrics = {
        "pg_loss": (pg * mask).sum(),
        "clipfrac_low": (((ratio < 1.0 - cfg.eps_clip) & (adv < 0)) * mask).sum(),
        "clipfrac_high": (((ratio > 1.0 + cfg.eps_clip_high) & (adv > 0)) * mask).sum(),
        "ppo_kl": (-log_ratio * mask).sum(),
        "is_ratio_mean": (is_ratio * mask).sum(),
        "tis_truncated_frac": (((is_ratio > cfg.tis_cap) if cfg.tis_cap > 0 else jnp.zeros_like(mask)) * mask).sum(),
        "tokens": n_tok,
    }
    if kl is not None:
        metrics["kl"] = (kl * mask).sum()
    if entropy is not None:
        metrics["entropy"] = (entropy.astype(f32) * mask).sum()
    # min/max are not sums: keep them separate (combined with min/max across micro-batches).
    extrema = {
        "is_ratio_max": jnp.where(mask > 0, is_ratio, -big).max(),
        "is_ratio_min": jnp.where(mask > 0, is_ratio, big).min(),
    }
    return num, den, {"sums": metrics, "extrema": extrema}


def finalize_metrics(sums: dict, extrema: dict | None = None) -> dict:
    """Turn accumulated metric sums (over any number of micro-batches) into per-token means."""
    sums = {k: float(v) for k, v in sums.items()}
    n = max(sums.get("tokens", 0.0), 1.0)
    out = {k: v / n for k, v in sums.items() if k != "tokens"}
    out["tokens"] = sums.get("tokens", 0.0)
    for k, v in (extrema or {}).items():
        out[k] = float(v)
    return out
