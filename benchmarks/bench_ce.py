"""The fused LM head + cross-entropy gradient of a train step (`logprobs.fused_ce_sum`): its head
weight gradient as a plain GEMM over a transposed copy of each chunk's hidden states (ours,
`logprobs._head_weight_grad`) against the one contraction over both operands' leading axis that XLA
folds the transpose into (the form it replaced), same inputs, in one process.

    .venv/bin/python benchmarks/bench_ce.py [--shapes demo,20m] [--batch 8] [--seq 512] [--repeats 9]

Per shape (hidden size and vocabulary of `bench_model.py`'s configs): `jax.value_and_grad` of
`fused_ce_sum` over the hidden states and the head, jitted, 1024-token chunks (the trainer's
default). Both ways are timed interleaved (`ab_compare.compare`: one call each per round, in
position-balanced rounds after two untimed ones), medians over `--repeats` rounds; the ratio is the baseline's median over
ours, with the median of the same-round ratios beside it. The max |difference| of the loss and
gradients is printed as a check. Load at start and end and the steal share of all CPU time while
timing are printed. Runs under the glibc malloc tunables and XLA:CPU dispatch the launch scripts run
jobs with (`hr1_jax.utils.host_env`).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hr1_jax.utils.host_env import configure_jax, job_malloc_requested, reexec_with_job_malloc  # noqa: E402

# glibc reads its tunables at process start: re-exec under them before anything allocates.
if __name__ == "__main__":
    reexec_with_job_malloc()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

configure_jax()

from ab_compare import compare, parse_shape_args, traced_with  # noqa: E402  (benchmarks/, the script's folder)
from hr1_jax.models import logprobs  # noqa: E402

# (hidden size, vocabulary) of bench_model.py's configs
SHAPES = {"tiny": (64, 256), "demo": (128, 1024), "20m": (256, 32000)}
CHUNK_TOKENS = 1024


def folded_weight_grad(h, dlogits):
    """The baseline: h^T dlogits as one contraction over N, the former `_ce_chunk` line."""
    return jnp.einsum("ne,nv->ev", h, dlogits.astype(h.dtype), preferred_element_type=jnp.float32)


def step_fn(weight_grad, targets, weights):
    """jit(value_and_grad) of fused_ce_sum over (hidden, head), traced with `weight_grad` as the
    chunk's head weight gradient."""
    def loss(hidden, head):
        # the unjitted body: a jitted fused_ce_sum would reuse its first trace for both ways
        return logprobs.fused_ce_sum.__wrapped__(hidden, head, targets, weights, chunk_tokens=CHUNK_TOKENS)

    return traced_with(logprobs, "_head_weight_grad", weight_grad, jax.jit(jax.value_and_grad(loss, argnums=(0, 1))))


def bench_shape(name: str, batch: int, seq: int, repeats: int) -> dict:
    hidden_size, vocab = SHAPES[name]
    ks = jax.random.split(jax.random.key(0), 3)
    hidden = jax.random.normal(ks[0], (batch, seq, hidden_size))
    head = jax.random.normal(ks[1], (hidden_size, vocab)) * hidden_size ** -0.5
    targets = jax.random.randint(ks[2], (batch, seq), 0, vocab)
    weights = jnp.ones((batch, seq), jnp.float32).at[0, : seq // 4].set(0.0)   # a masked prefix
    fns = {"folded": step_fn(folded_weight_grad, targets, weights),
           "ours": step_fn(logprobs._head_weight_grad, targets, weights)}
    return {"shape": name, "hidden_size": hidden_size, "vocab": vocab} \
        | compare(fns, (hidden, head), repeats, baseline="folded")


def main(argv=None) -> int:
    args = parse_shape_args(__doc__.splitlines()[0], SHAPES, argv)
    print(f"fused LM head + CE, value and gradient [{args.batch} x {args.seq}], {CHUNK_TOKENS}-token chunks, fp32, "
          f"{jax.devices()[0].platform}; medians of {args.repeats}, interleaved, position-balanced; job malloc "
          f"{'on' if job_malloc_requested() else 'off'}; baseline: the head weight gradient as one folded contraction")
    print("| shape (hidden / vocab) | folded ms | ours ms | folded / ours (pairwise) | max abs diff | load | steal |")
    print("|---|--:|--:|--:|--:|--|--|")
    rows = []
    for name in args.shapes:
        r = bench_shape(name, args.batch, args.seq, args.repeats)
        rows.append(r)
        print(f"| {name} ({r['hidden_size']} / {r['vocab']}) | {r['folded_ms']:.2f} | {r['ours_ms']:.2f} "
              f"| {r['ratio']:.2f} ({r['ratio_pairwise']:.2f}) | {r['max_abs_diff']:.1e} | {r['load']} | {r['steal']} |",
              flush=True)
    print("BENCH_CE " + json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
