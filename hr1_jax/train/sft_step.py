"""The jitted, sharded SFT step: masked next-token cross-entropy with exact gradient accumulation.

Batch (leading dims `[A, M]`, A accumulation micro-batches): `input_ids` int32 [A, M, L],
`attention_mask` int32 [A, M, L] (1 on real tokens) and
`loss_mask` f32 [A, M, L-1], 1 where the target token belongs to the assistant continuation after
the pre-filled `<think>\\n` (prefill protocol: the prompt, chat scaffolding and the opened think
block are never trained on). Loss = token mean over the whole minibatch.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from hr1_jax.train.state import TrainState, global_norm, make_optimizer, warmup_cosine
from hr1_jax.train.step import response_logprobs


def make_sft_step(graphdef, rest, tx, *, chunk_size: int = 1024, valid_vocab_size: int | None = None):
    """`step(state, batch) -> (state, metrics)`; the softmax covers the tokenizer's `valid_vocab_size`
    ids only (the sampler never draws padded vocabulary rows, so training gives them no mass)."""

    def micro_loss(params, mb, den):
        logp, _ = response_logprobs(graphdef, params, rest, mb["input_ids"], mb["attention_mask"],
                                    chunk_size=chunk_size, valid_vocab_size=valid_vocab_size)
        mask = mb["loss_mask"].astype(jnp.float32)
        nll = -(logp * mask).sum()
        correct = ((logp > jnp.log(0.5)) * mask).sum()   # argmax for sure when p > 0.5
        return nll / den, (nll, correct)

    grad_fn = jax.value_and_grad(micro_loss, has_aux=True)

    def step(state: TrainState, batch):
        den = jnp.maximum(batch["loss_mask"].astype(jnp.float32).sum(), 1.0)

        def body(carry, mb):
            g_acc, nll, correct = carry
            (_, (n, c)), g = grad_fn(state.params, mb, den)
            return (jax.tree.map(jnp.add, g_acc, g), nll + n, correct + c), None

        zeros = jax.tree.map(jnp.zeros_like, state.params)
        (grads, nll, correct), _ = jax.lax.scan(body, (zeros, jnp.zeros(()), jnp.zeros(())), batch)
        updates, opt_state = tx.update(grads, state.opt_state, state.params)
        params = jax.tree.map(lambda p, u: p + u, state.params, updates)
        metrics = {"loss": nll / den, "tokens": den, "confident_acc": correct / den,
                   "grad_norm": global_norm(grads)}
        return TrainState(params, opt_state, state.step + 1), metrics

    return step


def sft_optimizer(s, total_steps: int):
    """AdamW with linear warm-up + cosine decay (reference cold start: lr 1e-5, warm-up 3%)."""
    return make_optimizer(warmup_cosine(s.lr, total_steps, s.warmup_ratio), weight_decay=s.weight_decay,
                          grad_clip=s.grad_clip)
