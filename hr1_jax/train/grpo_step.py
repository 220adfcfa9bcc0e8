"""The jitted, sharded GRPO update: micro-batch scan with exact gradient accumulation.

Batch layout (every array has leading dims `[A, M]`: A accumulation micro-batches of M samples):
  input_ids     int32 [A, M, L]    prompt + response, right-padded
  attention_mask int32 [A, M, L]   1 on real tokens
  loss_mask     f32   [A, M, L-1]  1 where the *target* token (input_ids[:, 1:]) is a response token
  old_logp      f32   [A, M, L-1]  trainer log-probs before this update (trust-region anchor)
  sampler_logp  f32   [A, M, L-1]  log-probs the sampler reported (for truncated IS)
  advantages    f32   [A, M]
  ref_logp      f32   [A, M, L-1]  only when a KL term is used
The loss denominator is summed over all micro-batches first, so `sum_a num_a / den` is exactly the
loss of the whole minibatch, whatever A is.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from hr1_jax.train.losses import LossConfig, aggregate, policy_loss
from hr1_jax.train.state import TrainState, global_norm, make_optimizer
from hr1_jax.train.step import response_logprobs


def _sum_trees(a, b):
    return jax.tree.map(jnp.add, a, b)


def make_grpo_step(graphdef, rest, tx, loss_cfg: LossConfig, *, with_entropy: bool = False,
                   chunk_size: int = 1024, temperature: float = 1.0, valid_vocab_size: int | None = None):
    """A pure `step(state, batch) -> (state, metrics)` (jit it with `step.jit_step`)."""

    def micro_loss(params, mb, den):
        logp, entropy = response_logprobs(graphdef, params, rest, mb["input_ids"], mb["attention_mask"],
                                          with_entropy=with_entropy, chunk_size=chunk_size,
                                          temperature=temperature, valid_vocab_size=valid_vocab_size)
        entropy = entropy if with_entropy else None
        num, _, metrics = policy_loss(logp, mb["old_logp"], mb["advantages"], mb["loss_mask"], loss_cfg,
                                      sampler_logp=mb.get("sampler_logp"), ref_logp=mb.get("ref_logp"),
                                      entropy=entropy)
        return num / den, (num, metrics)

    grad_fn = jax.value_and_grad(micro_loss, has_aux=True)

    def step(state: TrainState, batch):
        den = jax.vmap(lambda m: aggregate(m, m, loss_cfg.agg_mode)[1])(batch["loss_mask"]).sum()
        den = jnp.maximum(den, 1.0)
        mb0 = jax.tree.map(lambda x: x[0], batch)
        (_, (_, m0)), g_shape = jax.eval_shape(grad_fn, state.params, mb0, den)
        zeros = (jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), g_shape),
                 jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), m0["sums"]),
                 {k: jnp.full((), -jnp.inf if k.endswith("max") else jnp.inf, jnp.float32)
                  for k in m0["extrema"]},
                 jnp.zeros((), jnp.float32))

        def body(carry, mb):
            g_acc, sums, ext, loss = carry
            (l, (_, metrics)), g = grad_fn(state.params, mb, den)
            ext = {k: (jnp.maximum if k.endswith("max") else jnp.minimum)(ext[k], v)
                   for k, v in metrics["extrema"].items()}
            return (_sum_trees(g_acc, g), _sum_trees(sums, metrics["sums"]), ext, loss + l), None

        (grads, sums, ext, loss), _ = jax.lax.scan(body, zeros, batch)
        updates, new_opt = tx.update(grads, state.opt_state, state.params)
        # A minibatch of inert padding rows (fewer kept groups than slots) has a zero gradient,
        # but Adam would still take a momentum step: such a minibatch changes nothing.
        has_tokens = batch["loss_mask"].sum() > 0
        params = jax.tree.map(lambda p, u: jnp.where(has_tokens, p + u, p), state.params, updates)
        opt_state = jax.tree.map(lambda new, old: jnp.where(has_tokens, new, old), new_opt, state.opt_state)
        metrics = {"loss": loss, "grad_norm": global_norm(grads), "sums": sums, "extrema": ext}
        return TrainState(params, opt_state, state.step + 1), metrics

    return step


def grpo_optimizer(g):
    """Constant-lr AdamW of the reference RL run (β2 0.98, weight decay 0.1, clip 1.0)."""
    return make_optimizer(g.lr, weight_decay=g.weight_decay, b1=0.9, b2=g.beta2, grad_clip=g.grad_clip)

