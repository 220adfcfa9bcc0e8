"""Orbax checkpoints of a training run: train state (params, optimiser, step), RNG key and the
data-iterator state, saved asynchronously; restore straight into the sharded layout.

Layout: `<workdir>/checkpoints/<step>/{state,meta}`; `meta` is JSON (step, RNG key data, grain
iterator state, anything small the loop wants back). A kill at any point leaves the last
committed step restorable (orbax writes to a temp dir and renames on commit).
"""
from __future__ import annotations

import os

import jax
import numpy as np
import orbax.checkpoint as ocp

from hr1_jax.utils.logging import log_event


class Checkpointer:
    def __init__(self, directory: str, *, max_to_keep: int = 2, async_save: bool = True):
        self.directory = os.path.abspath(directory)
        self.manager = ocp.CheckpointManager(
            self.directory,
            options=ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=True,
                                                 enable_async_checkpointing=async_save))

    def latest_step(self) -> int | None:
        return self.manager.latest_step()

    def save(self, step: int, state, meta: dict) -> None:
        self.manager.save(int(step), args=ocp.args.Composite(
            state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta)))

    def restore(self, abstract_state, step: int | None = None):
        """Restore into `abstract_state` (a pytree of jax.ShapeDtypeStruct carrying NamedShardings,
        e.g. from `abstract_like(state)`). Returns (state, meta), or None if nothing is saved."""
        step = self.latest_step() if step is None else step
        if step is None:
            return None
        out = self.manager.restore(step, args=ocp.args.Composite(
            state=ocp.args.StandardRestore(abstract_state), meta=ocp.args.JsonRestore()))
        log_event("checkpoint", "restored", step=step, directory=self.directory)
        return out["state"], out["meta"]

    def wait(self) -> None:
        self.manager.wait_until_finished()

    def close(self) -> None:
        self.manager.wait_until_finished()
        self.manager.close()


def abstract_like(tree):
    """ShapeDtypeStructs with the concrete shardings of a live (sharded) pytree: the restore target."""
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), tree)


def key_to_json(key) -> list[int]:
    return np.asarray(jax.random.key_data(key)).astype(np.uint32).tolist()


def key_from_json(data) -> jax.Array:
    return jax.random.wrap_key_data(np.asarray(data, np.uint32))
