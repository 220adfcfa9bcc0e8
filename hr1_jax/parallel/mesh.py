"""Device mesh with axes (data, fsdp, tensor) from the `mesh` config section."""
from __future__ import annotations

import math

import jax
from jax.sharding import AxisType, Mesh

from hr1_jax.config import ConfigError
from hr1_jax.parallel.config import MESH_AXES


def mesh_shape(section, num_devices: int) -> tuple[int, int, int]:
    """Resolve the -1 axis so the product equals `num_devices`; error names the bad key."""
    sizes = [int(section[a]) for a in MESH_AXES]
    fixed = math.prod(s for s in sizes if s != -1)
    if -1 in sizes:
        if num_devices % fixed:
            raise ConfigError("mesh", f"{dict(zip(MESH_AXES, sizes))} cannot fill {num_devices} devices")
        sizes[sizes.index(-1)] = num_devices // fixed
    if math.prod(sizes) != num_devices:
        raise ConfigError("mesh", f"product of {dict(zip(MESH_AXES, sizes))} != {num_devices} devices")
    return tuple(sizes)


def make_mesh(section, devices=None) -> Mesh:
    """Mesh over all (or the given) devices with *Auto* axis types.

    jax 0.10's `jax.make_mesh` defaults to Explicit axes, where sharding becomes part of the array
    type and `with_sharding_constraint`/logical rules behave differently; GSPMD with logical rules
    wants Auto axes. `jax.make_mesh` still picks a topology-aware device order on TPU/GPU.
    """
    devices = list(devices) if devices is not None else jax.devices()
    shape = mesh_shape(section, len(devices))
    return jax.make_mesh(shape, MESH_AXES, axis_types=(AxisType.Auto,) * len(MESH_AXES), devices=devices)
