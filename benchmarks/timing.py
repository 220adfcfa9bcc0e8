"""Interleaved timing shared by the benchmark scripts: every way of running something is sampled once
per round, in turn, so a swing of the machine's speed (~2x within minutes on the shared 2-core VMs)
hits each alike, and ratios are taken within a round."""
from __future__ import annotations

import statistics


def interleaved_samples(samplers: dict, repeats: int) -> dict:
    """{name: [sample of each round]}: each sampler called once a round, in order, for `repeats` rounds."""
    samples = {name: [] for name in samplers}
    for _ in range(repeats):
        for name, sample in samplers.items():
            samples[name].append(sample())
    return samples


def pairwise_median(values, base) -> float:
    """Median over rounds of value / base in the same round."""
    return statistics.median(v / b for v, b in zip(values, base))
