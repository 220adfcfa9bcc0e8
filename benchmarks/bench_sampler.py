"""The top-p nucleus search: one bisection over the whole batch against the CPU's chunked search.

    .venv/bin/python benchmarks/bench_sampler.py [--points 8x32000,16x32000,8x151936,16x151936] [--repeats 7]

`hr1_jax.models.sampler.nucleus_threshold` finds each row's top-p threshold by 30 masked-sum passes.
Over the whole [B, V] batch at once (what accelerators run, and what CPU ran before), XLA:CPU
splits each pass's reduction across its thread pool once it covers more than ~32K entries; on CPU
the search now goes one chunk of at most `CPU_NUCLEUS_CHUNK` entries at a time (a group of rows, or
one row in pieces). Per point: ms per search (median of --repeats, both timed in turn each round),
ns per entry and pass, the chunked/batched time ratio (median of same-round ratios), and whether
the thresholds are bit-identical. Softmax of N(0, 0.5^2)/0.7 logits, top_p 0.95. The load average
is printed before and after, with the steal share of all CPU time over the run.
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

from hr1_jax.models import sampler  # noqa: E402
from machine_state import CpuWindow, load_text  # noqa: E402  (benchmarks/, the script's folder)
from timing import interleaved_samples, pairwise_median  # noqa: E402

TOP_P = 0.95
PASSES = sampler._ONE_BITS.bit_length()
CALLS = 20  # searches per timed sample


def sample_ms(fn, probs) -> callable:
    def sample():
        start = time.perf_counter()
        for _ in range(CALLS):
            out = fn(probs)
        out.block_until_ready()
        return (time.perf_counter() - start) / CALLS * 1e3
    return sample


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
          f"CPU_NUCLEUS_CHUNK {sampler.CPU_NUCLEUS_CHUNK}, {PASSES} passes a search")
    # the whole batch at once (the accelerator path): a chunk as large as the batch
    batched = jax.jit(lambda p: sampler.nucleus_threshold(p, TOP_P, chunk=p.size))
    chunked = jax.jit(lambda p: sampler.nucleus_threshold(p, TOP_P))
    print(f"| B x V | whole batch ms | chunked ms | whole batch ns/entry/pass | chunked ns/entry/pass "
          f"| chunked / whole batch (same-round) | thresholds |")
    print("|---|--:|--:|--:|--:|--:|---|")
    for b, v in points:
        probs = jax.nn.softmax(jax.random.normal(jax.random.key(b * 7 + v), (b, v)) * 0.5 / 0.7, axis=-1)
        same = bool((batched(probs) == chunked(probs)).all())  # also compiles both
        times = interleaved_samples({"batch": sample_ms(batched, probs), "chunk": sample_ms(chunked, probs)},
                                    args.repeats)
        per_entry = {k: statistics.median(t) * 1e6 / (PASSES * b * v) for k, t in times.items()}
        print(f"| {b} x {v} | {statistics.median(times['batch']):.3f} | {statistics.median(times['chunk']):.3f} "
              f"| {per_entry['batch']:.3f} | {per_entry['chunk']:.3f} "
              f"| {pairwise_median(times['chunk'], times['batch']):.2f} | {'identical' if same else 'DIFFER'} |",
              flush=True)
    print(f"load average after: {load_text()}; steal during the run: {window.steal_text()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
