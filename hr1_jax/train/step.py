"""Step plumbing both learners (sft_step.py, grpo_step.py) share: the chunked fp32 response
log-probs, and the `[A, M, ...]` batch layout's shardings, host-to-global assembly and jit.

A step batch has leading dims `[A, M]`: A accumulation micro-batches of M samples; M is split over
the batch mesh axes, everything else is replicated.
"""
from __future__ import annotations

import jax
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from hr1_jax.models.logprobs import sequence_logprobs
from hr1_jax.train.state import TrainState


def response_logprobs(graphdef, params, rest, input_ids, attention_mask, *, with_entropy: bool = False,
                      chunk_size: int = 1024, temperature: float = 1.0, valid_vocab_size: int | None = None):
    """fp32 log-probs of `input_ids[:, 1:]` (chunked: full logits never materialise) and, optionally,
    per-token entropy, under the temperature-scaled policy the sampler drew from: a softmax over the
    tokenizer's `valid_vocab_size` ids, as the sampler masks padded vocabulary rows."""
    model = nnx.merge(graphdef, params, rest)
    return sequence_logprobs(model, input_ids, attention_mask, chunk_size=chunk_size,
                             temperature=temperature, with_entropy=with_entropy,
                             valid_vocab_size=valid_vocab_size)


def logprobs_fn(graphdef, rest, *, chunk_size: int = 1024, temperature: float = 1.0,
                valid_vocab_size: int | None = None):
    """Jitted log-probs for a [B, L] batch: the trainer's pre-update anchor, or a frozen reference."""

    @jax.jit
    def fn(params, input_ids, attention_mask):
        logp, _ = response_logprobs(graphdef, params, rest, input_ids, attention_mask,
                                    chunk_size=chunk_size, temperature=temperature,
                                    valid_vocab_size=valid_vocab_size)
        return logp

    return fn


def batch_shardings(mesh: Mesh, batch_axes=("data", "fsdp")):
    """[A, M, ...] batch arrays: M over the batch mesh axes, everything else replicated."""
    axes = tuple(a for a in batch_axes if mesh.shape[a] > 1)
    return NamedSharding(mesh, P(None, axes if axes else None))


def to_global(local_batch: dict, mesh: Mesh) -> dict:
    """This host's rows `[A, M_local, ...]` -> global `[A, M, ...]` arrays in the step's input layout
    (multi-host data loading; on one host it is a plain sharded device_put)."""
    sh = batch_shardings(mesh)
    return {k: jax.make_array_from_process_local_data(sh, v) for k, v in local_batch.items()}


def jit_step(step_fn, state_sh: TrainState, mesh: Mesh):
    """jit with explicit in/out shardings and the state donated (no silent recompiles/reshards)."""
    data_sh = batch_shardings(mesh)
    return jax.jit(step_fn, in_shardings=(state_sh, data_sh), out_shardings=(state_sh, None),
                   donate_argnums=(0,))
