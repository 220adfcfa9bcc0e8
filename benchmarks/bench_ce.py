"""The LM head's gradient on CPU in the two losses that train the engineer, each against the form it
replaced, same inputs, in one process:

* `ce`: the fused LM head + cross-entropy of a train step (`logprobs.fused_ce_sum`), whose head
  weight gradient is a plain GEMM over a transposed copy of each chunk's hidden states (ours,
  `logprobs._head_weight_grad`), against the one contraction over both operands' leading axis that
  XLA folds the transpose into (the baseline, "folded");
* `logprobs`: the chunked log-probs and entropy a GRPO loss differentiates (`logprobs.token_logprobs`,
  loss sum(advantage * logp) + 0.01 * sum(entropy)), whose head matmul has its own VJP (ours,
  `logprobs._head_logits`), against autodiff through the former `jnp.dot(h, w)` over [B, c, E]
  (the baseline, "autodiff").

    .venv/bin/python benchmarks/bench_ce.py [--shapes demo,20m] [--batch 8] [--seq 512] [--repeats 9]

Per shape (hidden size and vocabulary of `bench_model.py`'s configs) and path: `jax.value_and_grad`
over the hidden states and the head, jitted, ~1024-token chunks (the trainer's default: 1024 //
batch positions for the log-probs). Both ways are timed interleaved (`ab_compare.compare`: one call
each per round, in position-balanced rounds after two untimed ones), medians over `--repeats`
rounds; the ratio is the baseline's median over ours, with the median of the same-round ratios
beside it. The max |difference| of the loss and gradients is printed as a check. Load at start and
end and the steal share of all CPU time while timing are printed. Runs under the glibc malloc
tunables and XLA:CPU dispatch the launch scripts run jobs with (`hr1_jax.utils.host_env`).
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

from ab_compare import compare, parse_shape_args, table_row, traced_with  # noqa: E402  (benchmarks/, the script's folder)
from hr1_jax.models import logprobs  # noqa: E402

# (hidden size, vocabulary) of bench_model.py's configs
SHAPES = {"tiny": (64, 256), "demo": (128, 1024), "20m": (256, 32000)}
CHUNK_TOKENS = 1024


def folded_weight_grad(h, dlogits):
    """The `ce` baseline: h^T dlogits as one contraction over N, the former `_ce_chunk` line."""
    return jnp.einsum("ne,nv->ev", h, dlogits.astype(h.dtype), preferred_element_type=jnp.float32)


def autodiff_head_logits(h, w):
    """The `logprobs` baseline: the former head matmul of `_full_vocab` and `_chunked_vocab`."""
    return jnp.dot(h, w, preferred_element_type=jnp.float32)


def ce_loss(targets, weights, batch):
    # the unjitted bodies: a jitted fused_ce_sum / token_logprobs would reuse one trace for both ways
    return lambda hidden, head: logprobs.fused_ce_sum.__wrapped__(hidden, head, targets, weights,
                                                                  chunk_tokens=CHUNK_TOKENS)


def logprobs_loss(targets, weights, batch):
    def loss(hidden, head):
        logp, entropy = logprobs.token_logprobs.__wrapped__(hidden, head, targets, chunk_size=CHUNK_TOKENS // batch,
                                                            with_entropy=True)
        return jnp.sum(weights * logp) + 0.01 * jnp.sum(entropy)
    return loss


# path -> (loss builder, the logprobs function the two ways swap, baseline name, baseline, what is compared)
PATHS = {"ce": (ce_loss, "_head_weight_grad", "folded", folded_weight_grad,
                "the head weight gradient as one folded contraction"),
         "logprobs": (logprobs_loss, "_head_logits", "autodiff", autodiff_head_logits,
                      "autodiff through the head matmul")}


def bench_shape(path: str, name: str, batch: int, seq: int, repeats: int) -> dict:
    make_loss, swapped, baseline, baseline_fn, _ = PATHS[path]
    hidden_size, vocab = SHAPES[name]
    ks = jax.random.split(jax.random.key(0), 4)
    hidden = jax.random.normal(ks[0], (batch, seq, hidden_size))
    head = jax.random.normal(ks[1], (hidden_size, vocab)) * hidden_size ** -0.5
    targets = jax.random.randint(ks[2], (batch, seq), 0, vocab)
    if path == "ce":
        weights = jnp.ones((batch, seq), jnp.float32).at[0, : seq // 4].set(0.0)   # a masked prefix
    else:
        weights = jax.random.normal(ks[3], (batch, seq))                           # advantages
    loss = make_loss(targets, weights, batch)
    step = lambda: jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
    fns = {baseline: traced_with(logprobs, swapped, baseline_fn, step()),
           "ours": traced_with(logprobs, swapped, getattr(logprobs, swapped), step())}
    return {"path": path, "shape": name, "hidden_size": hidden_size, "vocab": vocab, "baseline": baseline} \
        | compare(fns, (hidden, head), repeats, baseline=baseline)


def main(argv=None) -> int:
    args = parse_shape_args(__doc__.splitlines()[0], SHAPES, argv)
    print(f"LM head gradients, value and gradient [{args.batch} x {args.seq}], ~{CHUNK_TOKENS}-token chunks, fp32, "
          f"{jax.devices()[0].platform}; medians of {args.repeats}, interleaved, position-balanced; job malloc "
          f"{'on' if job_malloc_requested() else 'off'}")
    rows = []
    for path, (*_, baseline, _, what) in PATHS.items():
        print(f"\n{path}: baseline {baseline}, {what}")
        print(f"| shape (hidden / vocab) | {baseline} ms | ours ms | {baseline} / ours (pairwise) | max abs diff | load | steal |")
        print("|---|--:|--:|--:|--:|--|--|")
        for name in args.shapes:
            r = bench_shape(path, name, args.batch, args.seq, args.repeats)
            rows.append(r)
            print(table_row(f"{name} ({r['hidden_size']} / {r['vocab']})", r, baseline), flush=True)
    print("BENCH_CE " + json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
