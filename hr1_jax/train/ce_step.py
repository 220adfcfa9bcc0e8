"""A plain sharded next-token cross-entropy train step (AdamW), jitted with explicit in/out
shardings and donation, on train/state.py's train state and shardings. Used by the sharded==unsharded
equality test and the model benchmarks (a learner's step without the harness rows around it).

batch = {"input_ids" int [B,T], "attention_mask" bool [B,T] (left padding = False),
         "loss_mask" bool [B,T] (which *target* tokens count; position 0 is never a target)}.
The loss is the mean CE over counted targets, from the fused chunked LM head + CE
(`logprobs.fused_ce_sum`: fp32, no full-vocabulary logits kept).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from hr1_jax.models.logprobs import fused_ce_sum
from hr1_jax.parallel import batch_sharding, state_shardings
from hr1_jax.train.state import TrainState, global_norm, init_state, split_model, state_sharding


def ce_loss(graphdef, params, rest, batch, chunk_size: int = 1024) -> jax.Array:
    """Mean CE over counted targets; chunk_size = tokens of logits per fused head+CE chunk."""
    model = nnx.merge(graphdef, params, rest)
    ids = batch["input_ids"]
    hidden, _ = model.hidden_states(ids, attention_mask=batch["attention_mask"])
    w = batch["loss_mask"][:, 1:].astype(jnp.float32)
    nll = fused_ce_sum(hidden[:, :-1], model.lm_head_weight(), ids[:, 1:], w, chunk_tokens=chunk_size)
    return nll / jnp.maximum(jnp.sum(w), 1.0)


def make_ce_step(graphdef, rest, tx: optax.GradientTransformation, chunk_size: int = 1024):
    """Pure `step(state, batch) -> (state, {"loss", "grad_norm"})`."""

    def step(state: TrainState, batch):
        loss, grads = jax.value_and_grad(lambda p: ce_loss(graphdef, p, rest, batch, chunk_size))(state.params)
        updates, opt_state = tx.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        return TrainState(params, opt_state, state.step + 1), {"loss": loss, "grad_norm": global_norm(grads)}

    return step


def batch_shardings(batch, mesh: Mesh, rules):
    return {k: batch_sharding(mesh, rules, v.ndim, v.shape) for k, v in batch.items()}


class ShardedTrainer:
    """Model + AdamW state laid out on `mesh` by `rules`, with a jitted, donated CE step and a
    jitted forward (both with explicit in/out shardings)."""

    def __init__(self, model: nnx.Module, tx: optax.GradientTransformation, mesh: Mesh, rules,
                 chunk_size: int = 1024):
        self.mesh, self.rules, self.tx = mesh, rules, tx
        self.graphdef, params, self.rest = split_model(model)
        self.state_sh = state_sharding(tx, params, mesh, rules)
        self.rest = jax.device_put(self.rest, state_shardings(self.rest, mesh, rules))
        self.state = init_state(tx, params, self.state_sh)
        self._step = make_ce_step(self.graphdef, self.rest, tx, chunk_size)
        self._jitted: dict = {}

    def _compiled(self, kind, batch):
        key = (kind, tuple((k, v.shape, str(v.dtype)) for k, v in sorted(batch.items())))
        if key not in self._jitted:
            bsh = batch_shardings(batch, self.mesh, self.rules)
            replicated = NamedSharding(self.mesh, P())
            if kind == "step":
                self._jitted[key] = jax.jit(self._step, in_shardings=(self.state_sh, bsh),
                                            out_shardings=(self.state_sh, replicated), donate_argnums=0)
            else:
                graphdef, rest = self.graphdef, self.rest

                def fwd(params, batch):
                    model = nnx.merge(graphdef, params, rest)
                    return model(batch["input_ids"], attention_mask=batch["attention_mask"])[0]

                out_sh = NamedSharding(self.mesh, bsh["input_ids"].spec)
                self._jitted[key] = jax.jit(fwd, in_shardings=(self.state_sh.params, bsh), out_shardings=out_sh)
        return self._jitted[key]

    def place(self, batch):
        """Host numpy batch -> global arrays in the batch sharding."""
        shardings = batch_shardings(batch, self.mesh, self.rules)
        return {k: jax.device_put(v, shardings[k]) for k, v in batch.items()}

    def step(self, batch):
        fn = self._compiled("step", batch)
        self.state, metrics = fn(self.state, self.place(batch))
        return metrics

    def forward(self, batch) -> jax.Array:
        fn = self._compiled("forward", batch)
        return fn(self.state.params, self.place(batch))
