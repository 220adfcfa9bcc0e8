"""Paired statistics for patched-vs-baseline comparisons.

Every comparison is paired per task: the same task identity run without and with a patch. Gains
are reported with paired bootstrap confidence intervals (resampling tasks, several seeds pooled as
separate pairs), and a gain whose interval crosses 0 is flagged as not significant.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Mapping

import numpy as np


@dataclasses.dataclass(frozen=True)
class PairedSummary:
    n: int
    mean_delta: float
    ci_low: float
    ci_high: float
    rescued: int      # baseline failed, patched succeeded
    regressed: int    # baseline succeeded, patched failed

    @property
    def significant(self) -> bool:
        return self.n > 0 and (self.ci_low > 0 or self.ci_high < 0)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["significant"] = self.significant
        return d


def paired_bootstrap_ci(deltas, *, n_boot: int = 2000, alpha: float = 0.05, seed: int = 0,
                        clusters=None) -> tuple[float, float, float]:
    """Mean of per-pair `deltas` with a percentile bootstrap interval.

    With `clusters` (e.g. task ids repeated over seeds), whole clusters are resampled so repeated
    runs of one task are not counted as independent evidence.
    """
    deltas = np.asarray(deltas, dtype=np.float64)
    if deltas.size == 0:
        return 0.0, 0.0, 0.0
    mean = float(deltas.mean())
    if deltas.size == 1:
        return mean, mean, mean
    rng = np.random.default_rng(seed)
    if clusters is None:
        idx = rng.integers(0, deltas.size, size=(n_boot, deltas.size))
        boots = deltas[idx].mean(axis=1)
    else:
        clusters = np.asarray(clusters)
        keys, inverse = np.unique(clusters, return_inverse=True)
        sums = np.bincount(inverse, weights=deltas, minlength=keys.size)
        counts = np.bincount(inverse, minlength=keys.size).astype(np.float64)
        pick = rng.integers(0, keys.size, size=(n_boot, keys.size))
        boots = sums[pick].sum(axis=1) / counts[pick].sum(axis=1)
    lo, hi = np.quantile(boots, [alpha / 2, 1 - alpha / 2])
    return mean, float(lo), float(hi)


def stratified_mean_ci(groups: Mapping[str, list], *, n_boot: int = 2000, alpha: float = 0.05,
                       seed: int = 0) -> tuple[float, float, float]:
    """The mean over groups of each group's mean (the main table's Avg over benchmarks), with a
    percentile interval from resampling within every group independently."""
    rng = np.random.default_rng(seed)
    values = [np.asarray(v, dtype=np.float64) for v in groups.values() if len(v)]
    if not values:
        return 0.0, 0.0, 0.0
    mean = float(np.mean([v.mean() for v in values]))
    boots = np.mean([v[rng.integers(0, v.size, size=(n_boot, v.size))].mean(axis=1) for v in values], axis=0)
    lo, hi = np.quantile(boots, [alpha / 2, 1 - alpha / 2])
    return mean, float(lo), float(hi)


def summarize_pairs(baseline_rewards, patched_rewards, *, threshold: float = 1.0, n_boot: int = 2000,
                    seed: int = 0, clusters=None) -> PairedSummary:
    base = np.asarray(baseline_rewards, dtype=np.float64)
    patched = np.asarray(patched_rewards, dtype=np.float64)
    if base.shape != patched.shape:
        raise ValueError(f"unpaired outcomes: {base.shape} baseline vs {patched.shape} patched")
    mean, lo, hi = paired_bootstrap_ci(patched - base, n_boot=n_boot, seed=seed, clusters=clusters)
    base_ok, patched_ok = base >= threshold, patched >= threshold
    return PairedSummary(n=int(base.size), mean_delta=mean, ci_low=lo, ci_high=hi,
                         rescued=int(np.sum(~base_ok & patched_ok)),
                         regressed=int(np.sum(base_ok & ~patched_ok)))


def paired_difference(treated: Mapping, control: Mapping, *, cluster_of: Callable = lambda key: key,
                      n_boot: int = 2000, seed: int = 0) -> dict:
    """Mean of treated[k] - control[k] over the keys both hold, with a 95% bootstrap interval that
    resamples whole clusters (`cluster_of(key)`, e.g. the task of a (benchmark, seed, task) key):
    {"mean": x, "ci95": [lo, hi], "n": number of pairs}."""
    keys = sorted(set(treated) & set(control))
    mean, lo, hi = paired_bootstrap_ci([treated[k] - control[k] for k in keys], n_boot=n_boot, seed=seed,
                                       clusters=[str(cluster_of(k)) for k in keys] if keys else None)
    return {"mean": mean, "ci95": [lo, hi], "n": len(keys)}
