"""Logical-axis sharding: rules tables -> NamedShardings for NNX states, batches and activations.

Parameters are annotated with logical names by the models (`nnx.with_partitioning(init, ("embed",
"mlp"))`, stored as Variable metadata `out_sharding`). We resolve those names ourselves instead of
relying on flax's rules context so that (a) a mesh axis is never used twice in one spec, (b) an axis
whose size does not divide the dimension is dropped (tiny test configs on an 8-device mesh) rather
than failing, and (c) size-1 mesh axes disappear from specs.
"""
from __future__ import annotations

import functools
import math

import jax
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from hr1_jax.parallel.config import rules_tuple
from hr1_jax.utils.logging import get_logger

_log = get_logger(__name__)
_warned: set[str] = set()


def logical_to_spec(names, rules, mesh: Mesh, shape=None) -> P:
    """Logical names (one per dim, None = unsharded) -> PartitionSpec on `mesh`."""
    table = dict(rules_tuple(rules))
    used: set[str] = set()
    out = []
    for dim, name in enumerate(names):
        axes = ()
        if name is not None:
            if name not in table:
                if name not in _warned:
                    _warned.add(name)
                    _log.warning("logical axis %r has no rule; replicating it", name)
            else:
                axes = tuple(a for a in (table[name] or ()) if a not in used and mesh.shape[a] > 1)
        if shape is not None:
            # Drop trailing mesh axes until the dimension divides evenly.
            while axes and shape[dim] % math.prod(mesh.shape[a] for a in axes):
                axes = axes[:-1]
        used.update(axes)
        out.append(None if not axes else axes[0] if len(axes) == 1 else axes)
    while out and out[-1] is None:
        out.pop()
    return P(*out)


def logical_to_sharding(names, rules, mesh: Mesh, shape=None) -> NamedSharding:
    return NamedSharding(mesh, logical_to_spec(names, rules, mesh, shape))


def _variable_names(v: nnx.Variable):
    meta = v.get_metadata()
    for key in ("out_sharding", "sharding_names", "sharding"):
        names = meta.get(key)
        if names:
            return tuple(names)
    return None


def state_shardings(state, mesh: Mesh, rules):
    """Same-structure tree of NamedShardings for an NNX State (Variables) or plain array pytree."""

    def one(x):
        if isinstance(x, nnx.Variable):
            names = _variable_names(x)
            shape = getattr(x, "shape", None)
            spec = logical_to_spec(names, rules, mesh, shape) if names else P()
            return x.replace(NamedSharding(mesh, spec))
        return NamedSharding(mesh, P())

    return jax.tree.map(one, state, is_leaf=lambda x: isinstance(x, nnx.Variable))


def shard_model(model: nnx.Module, mesh: Mesh, rules) -> nnx.Module:
    """Place every variable of `model` (in place) on `mesh` according to its logical names."""
    state = nnx.state(model)
    nnx.update(model, jax.device_put(state, state_shardings(state, mesh, rules)))
    return model


def build_sharded(init_fn, mesh: Mesh, rules):
    """Create a model directly in its sharded layout: `init_fn()` runs under jit with out_shardings,
    so no full copy of the parameters is ever materialised on one device or the host."""
    with nnx.use_eager_sharding(False):
        abstract = nnx.eval_shape(init_fn)
    graphdef, abs_state = nnx.split(abstract)
    shardings = state_shardings(abs_state, mesh, rules)

    @functools.partial(jax.jit, out_shardings=shardings)
    def init():
        with nnx.use_eager_sharding(False):
            return nnx.state(init_fn())

    return nnx.merge(graphdef, init())


def reshard_for_sampling(state, mesh: Mesh, sample_rules):
    """Move weights from the trainer layout to the sampler layout, device to device.

    `state` is an NNX State (e.g. `nnx.state(model, nnx.Param)`); `jax.device_put` to the sampling
    shardings lowers to on-device collectives (all-gathers of FSDP shards), never a host copy.
    `mesh` may be a different (e.g. disaggregated sampler) mesh. The trainer's copy is untouched.
    """
    return jax.device_put(state, state_shardings(state, mesh, sample_rules))


def batch_sharding(mesh: Mesh, rules, ndim: int = 2, shape=None) -> NamedSharding:
    """Sharding of a [batch, length, ...] array: batch over the `batch` rule, the rest replicated."""
    names = ("batch",) + (None,) * (ndim - 1)
    return logical_to_sharding(names, rules, mesh, shape)


def host_local_to_global(batch, mesh: Mesh, spec: P | None = None):
    """Assemble a global batch from each process's local rows (multi-host data loading).

    Every process passes its own slice (leading dim = global_batch / process_count); with one host
    this is an ordinary sharded device_put. `spec` defaults to batch over (data, fsdp).
    """
    spec = P(("data", "fsdp")) if spec is None else spec
    sharding = NamedSharding(mesh, spec)
    return jax.tree.map(lambda x: jax.make_array_from_process_local_data(sharding, x), batch)
