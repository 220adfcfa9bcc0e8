"""Train state, optimiser and shardings shared by the SFT and GRPO steps.

The model is split once into `graphdef` (static structure), `params` (nnx.Param state, trained)
and `rest` (any other variables, frozen). Steps are pure functions of `TrainState` so they can be
jitted with explicit in/out shardings, donated, scanned over micro-batches and checkpointed as one
pytree.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from hr1_jax.parallel import state_shardings


class TrainState(NamedTuple):
    params: Any        # nnx.State of nnx.Param
    opt_state: Any
    step: jax.Array    # int32 scalar: optimiser updates applied so far


def make_optimizer(schedule, *, weight_decay: float, b1: float = 0.9, b2: float = 0.999,
                   grad_clip: float = 1.0) -> optax.GradientTransformation:
    """AdamW behind a global-norm clip (the reference's clip 1.0)."""
    parts = [optax.clip_by_global_norm(grad_clip)] if grad_clip > 0 else []
    return optax.chain(*parts, optax.adamw(schedule, b1=b1, b2=b2, weight_decay=weight_decay))


def warmup_cosine(lr: float, total_steps: int, warmup_ratio: float):
    """SFT schedule: linear warm-up for `warmup_ratio` of the steps, then cosine decay to 0."""
    total = max(1, int(total_steps))
    warmup = min(total - 1, max(1, round(total * warmup_ratio))) if total > 1 else 0
    if warmup == 0:
        return optax.cosine_decay_schedule(lr, total)
    return optax.warmup_cosine_decay_schedule(0.0, lr, warmup, total, end_value=0.0)


def split_model(model: nnx.Module):
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    return graphdef, params, rest


def state_sharding(tx, params, mesh: Mesh, rules) -> TrainState:
    """NamedShardings for a TrainState: optimiser moments follow their parameter, scalars replicate."""
    param_sh = state_shardings(params, mesh, rules)
    replicated = NamedSharding(mesh, P())
    abstract_opt = jax.eval_shape(tx.init, params)
    opt_sh = optax.tree_map_params(tx, lambda _, s: s, abstract_opt, param_sh,
                                   transform_non_params=lambda _: replicated,
                                   is_leaf=lambda x: isinstance(x, nnx.Variable))
    return TrainState(params=param_sh, opt_state=opt_sh, step=replicated)


def init_state(tx, params, shardings: TrainState) -> TrainState:
    """Optimiser state created under jit directly in its sharded layout (no stray device-0 scalars)."""
    params = jax.device_put(params, shardings.params)
    init = jax.jit(lambda p: TrainState(p, tx.init(p), jnp.zeros((), jnp.int32)), out_shardings=shardings)
    return init(params)


def global_norm(tree) -> jax.Array:
    return optax.global_norm(tree)
