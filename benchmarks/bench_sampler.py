"""The top-p nucleus search: one bisection over the whole batch against the CPU's chunked search, and
the chunked search against its former form.

    .venv/bin/python benchmarks/bench_sampler.py [--points 8x32000,16x32000,8x151936,16x151936] [--repeats 7]

`hr1_jax.models.sampler.nucleus_threshold` finds each row's top-p threshold. Over the whole [B, V]
batch at once (what accelerators run, and what CPU ran before c435417) it bisects in 30 masked-sum
passes, and XLA:CPU splits each pass's reduction across its thread pool once it covers more than
~32K entries. On CPU the search goes one chunk of at most `CPU_NUCLEUS_CHUNK` entries at a time: a
group of whole rows (still the bisection), or, for a row of more than half a chunk, one row at a
time by `_search_row_nucleus` (the bisection's threshold in fewer passes), whole or in pieces
(`whole_batch_threshold` is the accelerators' bisection, called directly). The
former chunked search (`former_chunked_threshold`, kept here as the baseline) bisected every row in
pieces under `lax.map`'s batch_size. Per point: ms per search (median of --repeats, the three timed
in turn each round, the order reversed every other round), the whole batch's ns per entry and pass,
the row search's passes on the point's rows (whole rows: min / median / max), the chunked / whole
batch and chunked / former time ratios (medians of same-round ratios), and whether the thresholds
are bit-identical. Softmax of N(0, 0.5^2)/0.7 logits, top_p 0.95. The load average is printed before
and after, with the steal share of all CPU time over the run.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from hr1_jax.models import sampler  # noqa: E402
from machine_state import CpuWindow, load_text  # noqa: E402  (benchmarks/, the script's folder)
from timing import interleaved_samples, pairwise_median  # noqa: E402

TOP_P = 0.95
PASSES = sampler._ONE_BITS.bit_length()  # the whole batch's bisection
CALLS = 20  # searches per timed sample


def sample_ms(fn, probs) -> callable:
    def sample():
        start = time.perf_counter()
        for _ in range(CALLS):
            out = fn(probs)
        out.block_until_ready()
        return (time.perf_counter() - start) / CALLS * 1e3
    return sample


def former_chunked_threshold(probs, top_p, chunk: int = sampler.CPU_NUCLEUS_CHUNK):
    """`nucleus_threshold`'s chunked search as it was until 2026-12-07: every chunked point as rows in
    pieces (a row that fits a chunk as one piece), under lax.map's batch_size."""
    b, v = probs.shape
    n = -(-v // chunk)
    size = -(-v // n)
    pieces = jnp.pad(probs, ((0, 0), (0, n * size - v))).reshape(b, n, size)

    def one_row(row):
        def mass_above(t):
            return jax.lax.fori_loop(0, n, lambda j, acc: acc + sampler._masked_mass(row[j], t), jnp.zeros_like(t))
        return sampler._bisect_nucleus((), top_p, mass_above)
    bits = jax.lax.map(one_row, pieces, batch_size=chunk // size)
    return jax.lax.bitcast_convert_type(bits, jnp.float32)[:, None]


def whole_batch_threshold(probs):
    """The accelerators' search: one bisection over the whole batch."""
    return sampler._float_of(sampler._bisect_rows(probs, TOP_P))[:, None]


@jax.jit
def row_passes(row):
    """The passes `_search_row_nucleus` makes on one whole row (the row max's pass not counted)."""
    return sampler._row_nucleus(row, TOP_P)[1]


def parse_points(text: str) -> list[tuple[int, int]]:
    points = []
    for item in text.split(","):
        b, _, v = item.partition("x")
        if not (b.isdigit() and v.isdigit()) or int(b) < 1 or int(v) < 2:
            raise SystemExit(f"--points: {item!r} is not BATCHxVOCAB (e.g. 8x32000)")
        points.append((int(b), int(v)))
    return points


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", default="8x32000,16x32000,8x151936,16x151936")
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    points = parse_points(args.points)
    window = CpuWindow()
    print(f"load average before: {load_text()}; backend {jax.default_backend()}, "
          f"CPU_NUCLEUS_CHUNK {sampler.CPU_NUCLEUS_CHUNK}, {PASSES} passes a whole-batch search")
    fns = {"batch": jax.jit(whole_batch_threshold),
           "chunk": jax.jit(lambda p: sampler.nucleus_threshold(p, TOP_P)),
           "former": jax.jit(lambda p: former_chunked_threshold(p, TOP_P))}
    print("| B x V | whole batch ms | chunked ms | former chunked ms | whole batch ns/entry/pass "
          "| row search passes (min / median / max) | chunked / whole batch (same-round) "
          "| chunked / former (same-round) | thresholds |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|---|")
    for b, v in points:
        probs = jax.nn.softmax(jax.random.normal(jax.random.key(b * 7 + v), (b, v)) * 0.5 / 0.7, axis=-1)
        out = {k: fn(probs) for k, fn in fns.items()}  # also compiles each
        same = all(bool((x == out["chunk"]).all()) for x in out.values())
        times = interleaved_samples({k: sample_ms(fn, probs) for k, fn in fns.items()}, args.repeats, balanced=True)
        ms = {k: statistics.median(t) for k, t in times.items()}
        passes = sorted(int(row_passes(row)) for row in probs)
        print(f"| {b} x {v} | {ms['batch']:.3f} | {ms['chunk']:.3f} | {ms['former']:.3f} "
              f"| {ms['batch'] * 1e6 / (PASSES * b * v):.3f} "
              f"| {passes[0]} / {statistics.median(passes):g} / {passes[-1]} "
              f"| {pairwise_median(times['chunk'], times['batch']):.2f} "
              f"| {pairwise_median(times['chunk'], times['former']):.2f} | {'identical' if same else 'DIFFER'} |",
              flush=True)
    print(f"load average after: {load_text()}; steal during the run: {window.steal_text()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
