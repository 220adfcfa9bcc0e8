"""A model change against the form it replaced, in one process: the two ways traced from the same code
with one module function swapped, checked against each other, and timed in interleaved rounds.
Shared by `bench_attention.py` and `bench_ce.py`."""
from __future__ import annotations

import argparse
import statistics

import jax
import jax.numpy as jnp

from machine_state import CpuWindow, load_text
from timing import WARMUP_ROUNDS, interleaved_samples, pairwise_median, seconds_sampler


def traced_with(module, name: str, impl, fn):
    """`fn` called with `module.<name>` set to `impl` while it runs, so a first (tracing) call of a
    jitted `fn` builds the variant that uses `impl`; the module's own function is restored after."""
    def call(*args):
        ours = getattr(module, name)
        setattr(module, name, impl)
        try:
            return fn(*args)
        finally:
            setattr(module, name, ours)
    return call


def compare(fns: dict, args: tuple, repeats: int, baseline: str) -> dict:
    """Run each of `fns` (name -> callable; one named `baseline`, one "ours") on `args`: max |difference|
    over the leaves of the two results, then `WARMUP_ROUNDS` untimed rounds and `repeats` timed ones in
    position-balanced order. Returns medians in ms (`<name>_ms`), the baseline's median over ours
    (`ratio`) and the median of the same-round ratios (`ratio_pairwise`), the load at start and end and
    the steal share while timing (`timed_rounds`)."""
    results = {n: jax.block_until_ready(f(*args)) for n, f in fns.items()}   # compile, and the check
    diff = max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(jax.tree.leaves(results[baseline]),
                                                                jax.tree.leaves(results["ours"])))
    return {"max_abs_diff": diff} | timed_rounds(
        {n: (lambda f=f: jax.block_until_ready(f(*args))) for n, f in fns.items()}, repeats, baseline)


def timed_rounds(calls: dict, repeats: int, baseline: str) -> dict:
    """Time each of `calls` (name -> callable of no arguments that returns once its work is done; one
    named `baseline`, one "ours"): `WARMUP_ROUNDS` untimed rounds, then `repeats` timed ones in
    position-balanced order. Returns medians in ms (`<name>_ms`), the baseline's median over ours
    (`ratio`), the median of the same-round ratios (`ratio_pairwise`), the load at start and end and
    the steal share while timing."""
    samplers = {n: seconds_sampler(call) for n, call in calls.items()}
    interleaved_samples(samplers, WARMUP_ROUNDS)
    window, load_start = CpuWindow(), load_text()   # after the untimed rounds: the timed ones' load
    samples = interleaved_samples(samplers, repeats, balanced=True)
    out = {f"{n}_ms": statistics.median(s) * 1e3 for n, s in samples.items()}
    return out | {"ratio": out[f"{baseline}_ms"] / out["ours_ms"],
                  "ratio_pairwise": pairwise_median(samples[baseline], samples["ours"]),
                  "load": f"{load_start} -> {load_text()}", "steal": window.steal_text()}


def table_row(label: str, result: dict, baseline: str) -> str:
    """A markdown row of a `compare` result: label, both medians, the ratio (pairwise), the check's max
    |difference|, load and steal."""
    r = result
    return (f"| {label} | {r[baseline + '_ms']:.2f} | {r['ours_ms']:.2f} | {r['ratio']:.2f} ({r['ratio_pairwise']:.2f}) "
            f"| {r['max_abs_diff']:.1e} | {r['load']} | {r['steal']} |")


def parse_shape_args(description: str, shapes: dict, argv=None) -> argparse.Namespace:
    """--shapes (comma-separated keys of `shapes`, checked) --batch --seq --repeats; `args.shapes` is a list."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--shapes", default="demo,20m", help=f"comma-separated, of {', '.join(shapes)}")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=9)
    args = ap.parse_args(argv)
    args.shapes = args.shapes.split(",")
    unknown = [s for s in args.shapes if s not in shapes]
    if unknown or args.batch < 1 or args.seq < 2 or args.repeats < 1:
        ap.error(f"bad arguments: unknown shapes {unknown}" if unknown else "batch >= 1, seq >= 2, repeats >= 1")
    return args
