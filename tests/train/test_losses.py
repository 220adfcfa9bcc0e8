"""GRPO advantages and loss against an independent NumPy reference (per-token loops)."""
import math

import jax.numpy as jnp
import numpy as np
import pytest

from hr1_jax.train.losses import LossConfig, aggregate, finalize_metrics, group_advantages, kl_estimate, policy_loss


def test_advantages_match_hand_computation():
    r = np.array([[1.0, 0.0, 0.5, 0.5]])
    mean = 0.5
    std = math.sqrt(((0.5 ** 2) * 2) / 3)  # unbiased
    want = (r - mean) / (std + 1e-6)
    np.testing.assert_allclose(group_advantages(r), want, rtol=1e-6)
    np.testing.assert_allclose(group_advantages(r, std_normalize=False), r - mean, atol=1e-7)


def test_degenerate_groups_get_zero_advantage():
    r = np.array([[0.3, 0.3, 0.3], [1.0, 0.0, 7.0], [1.0, 0.0, 0.0]])
    valid = np.array([[True, True, True], [True, False, False], [True, True, True]])
    adv = group_advantages(r, valid)
    assert np.all(adv[0] == 0)          # zero spread
    assert np.all(adv[1] == 0)          # one valid sample only
    assert adv[2, 0] > 0 and adv[2, 1] < 0 and adv[2, 1] == adv[2, 2]


def test_eval_failed_excluded_from_group_stats():
    r = np.array([[1.0, 0.0, 100.0, 0.0]])
    valid = np.array([[True, True, False, True]])
    adv = group_advantages(r, valid, std_normalize=False)
    # the 100.0 reward of the failed evaluation must not move the mean (1/3)
    np.testing.assert_allclose(adv, [[2 / 3, -1 / 3, 0.0, -1 / 3]], atol=1e-6)


def _ref_loss(logp, old, sampler, adv, mask, ref, ent, cfg):
    B, T = logp.shape
    per = np.zeros((B, T))
    for b in range(B):
        for t in range(T):
            ratio = math.exp(logp[b, t] - old[b, t])
            a = adv[b]
            clipped = min(max(ratio, 1 - cfg.eps_clip), 1 + cfg.eps_clip_high)
            l = max(-a * ratio, -a * clipped)
            if sampler is not None and cfg.tis_cap > 0:
                l *= min(math.exp(old[b, t] - sampler[b, t]), cfg.tis_cap)
            if ref is not None and cfg.kl_coef:
                d = logp[b, t] - ref[b, t]
                k = {"k1": d, "k2": 0.5 * d * d, "k3": math.exp(-d) - 1 + d}[cfg.kl_estimator]
                l += cfg.kl_coef * k
            if ent is not None and cfg.entropy_coef:
                l -= cfg.entropy_coef * ent[b, t]
            per[b, t] = l
    if cfg.agg_mode == "token-mean":
        return (per * mask).sum(), mask.sum()
    num, den = 0.0, 0.0
    for b in range(B):
        if mask[b].sum() > 0:
            num += (per[b] * mask[b]).sum() / mask[b].sum()
            den += 1
    return num, den


def _data(seed=0):
    rng = np.random.default_rng(seed)
    B, T = 4, 6
    old = rng.normal(-1.5, 0.3, (B, T))
    # push ratios well outside both clip bounds on some tokens
    logp = old + rng.choice([-0.6, -0.05, 0.0, 0.05, 0.6], size=(B, T))
    logp[0, 0] = old[0, 0] + 0.6   # A > 0, ratio above 1 + eps_high
    logp[1, 1] = old[1, 1] - 0.6   # A < 0, ratio below 1 - eps
    sampler = old + rng.normal(0, 0.5, (B, T))
    ref = old + rng.normal(0, 0.2, (B, T))
    ent = rng.uniform(0.1, 2.0, (B, T))
    adv = np.array([1.0, -1.0, 0.5, -0.7])
    mask = np.ones((B, T))
    mask[0, 4:] = 0
    mask[3, :] = 0   # a sample with no response tokens
    mask[2, 5] = 0
    return logp, old, sampler, adv, mask, ref, ent


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
@pytest.mark.parametrize("kl", ["k1", "k2", "k3"])
def test_policy_loss_matches_numpy(agg, kl):
    logp, old, sampler, adv, mask, ref, ent = _data()
    cfg = LossConfig(kl_coef=0.1, kl_estimator=kl, entropy_coef=0.01, agg_mode=agg, tis_cap=1.5)
    num, den, m = policy_loss(jnp.asarray(logp), jnp.asarray(old), jnp.asarray(adv), jnp.asarray(mask), cfg,
                              sampler_logp=jnp.asarray(sampler), ref_logp=jnp.asarray(ref), entropy=jnp.asarray(ent))
    rnum, rden = _ref_loss(logp, old, sampler, adv, mask, ref, ent, cfg)
    np.testing.assert_allclose(float(num), rnum, rtol=1e-5)
    assert float(den) == rden


def test_clip_both_sides_and_tis_counted():
    logp, old, sampler, adv, mask, ref, ent = _data()
    cfg = LossConfig(tis_cap=1.5)
    _, _, m = policy_loss(jnp.asarray(logp), jnp.asarray(old), jnp.asarray(adv), jnp.asarray(mask), cfg,
                          sampler_logp=jnp.asarray(sampler))
    ratio = np.exp(logp - old)
    a = np.broadcast_to(adv[:, None], ratio.shape)
    low = (((ratio < 0.8) & (a < 0)) * mask).sum()
    high = (((ratio > 1.28) & (a > 0)) * mask).sum()
    assert low > 0 and high > 0
    assert float(m["sums"]["clipfrac_low"]) == low
    assert float(m["sums"]["clipfrac_high"]) == high
    is_ratio = np.exp(old - sampler)
    assert float(m["sums"]["tis_truncated_frac"]) == ((is_ratio > 1.5) * mask).sum() > 0
    np.testing.assert_allclose(float(m["extrema"]["is_ratio_max"]), is_ratio[mask > 0].max(), rtol=1e-5)
    out = finalize_metrics(m["sums"], m["extrema"])
    np.testing.assert_allclose(out["clipfrac_high"], high / mask.sum(), rtol=1e-6)


def test_clipping_stops_gradient_outside_trust_region():
    import jax
    old = jnp.zeros((1, 2))
    logp = jnp.array([[0.5, -0.5]])  # ratio e^.5 > 1.28 (clipped for A>0); e^-.5 < 0.8 (not clipped for A>0)
    g = jax.grad(lambda lp: policy_loss(lp, old, jnp.array([1.0]), jnp.ones((1, 2)), LossConfig(agg_mode="token-mean"))[0])(logp)
    assert float(g[0, 0]) == 0.0 and float(g[0, 1]) != 0.0


def test_kl_estimators_hand_values():
    lp, rf = jnp.array([-1.0]), jnp.array([-1.5])
    assert float(kl_estimate(lp, rf, "k1")[0]) == pytest.approx(0.5)
    assert float(kl_estimate(lp, rf, "k2")[0]) == pytest.approx(0.125)
    assert float(kl_estimate(lp, rf, "k3")[0]) == pytest.approx(math.exp(-0.5) - 1 + 0.5, rel=1e-6)
    with pytest.raises(ValueError):
        kl_estimate(lp, rf, "k4")


def test_aggregate_splits_numerator_and_denominator_exactly():
    v = jnp.array([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]])
    m = jnp.array([[1, 1, 1], [1, 0, 0]])
    assert tuple(map(float, aggregate(v, m, "token-mean"))) == (10.0, 4.0)
    assert tuple(map(float, aggregate(v, m, "seq-mean-token-mean"))) == (6.0, 2.0)
    # two micro-batches summed == the whole batch
    a = aggregate(v[:1], m[:1], "seq-mean-token-mean")
    b = aggregate(v[1:], m[1:], "seq-mean-token-mean")
    assert float(a[0] + b[0]) / float(a[1] + b[1]) == 3.0
