"""Interleaved timing shared by the benchmark scripts: every way of running something is sampled once
per round, in turn, so a swing of the machine's speed (~2x within minutes on the shared 2-core VMs)
hits each alike, and ratios are taken within a round."""
from __future__ import annotations

import statistics
import time


def seconds_sampler(call):
    """A sampler for `interleaved_samples`: calls `call` (no arguments, returns once its work is done)
    and returns the seconds it took."""
    def sample():
        t = time.perf_counter()
        call()
        return time.perf_counter() - t
    return sample


def interleaved_samples(samplers: dict, repeats: int, *, balanced: bool = False) -> dict:
    """{name: [sample of each round]}: each sampler called once a round, in turn, for `repeats` rounds.
    `balanced`: odd rounds call them in reverse order, so each runs first and last equally often
    (whatever one leaves behind for the next, warm caches or busy threads, falls on both alike)."""
    samples = {name: [] for name in samplers}
    for r in range(repeats):
        names = list(samplers)
        for name in (reversed(names) if balanced and r % 2 else names):
            samples[name].append(samplers[name]())
    return samples


def pairwise_median(values, base) -> float:
    """Median over rounds of value / base in the same round."""
    return statistics.median(v / b for v, b in zip(values, base))


# Untimed rounds before the timed ones: the compile, then each way's first call after the other's
# first call, which can be several times its steady time (ours after torch's first train step in
# bench_model.py: ~0.8-1.0 s against ~0.17 s, 2026-12-06) and would land in one side's timed rounds only.
WARMUP_ROUNDS = 2
