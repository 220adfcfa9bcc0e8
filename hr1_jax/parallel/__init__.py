"""Meshes, logical-axis sharding rules (train vs sample layouts) and multi-host start-up."""
from hr1_jax.parallel.config import MESH_AXES, rules_tuple
from hr1_jax.parallel.distributed import maybe_initialize_distributed, multi_process_reason
from hr1_jax.parallel.mesh import make_mesh, mesh_shape
from hr1_jax.parallel.sharding import (
    batch_sharding,
    build_sharded,
    host_local_to_global,
    logical_to_sharding,
    logical_to_spec,
    reshard_for_sampling,
    shard_model,
    state_shardings,
)

__all__ = [
    "MESH_AXES", "rules_tuple", "maybe_initialize_distributed", "multi_process_reason", "make_mesh",
    "mesh_shape", "batch_sharding", "build_sharded", "host_local_to_global", "logical_to_sharding",
    "logical_to_spec", "reshard_for_sampling", "shard_model", "state_shardings",
]
