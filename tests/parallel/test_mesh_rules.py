"""Mesh construction, logical-axis rules, layouts, multi-host guard and host-local batches (8 CPU devices)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.sharding import AxisType, PartitionSpec as P

from hr1_jax.config import ConfigError, base_config, validate_config
from hr1_jax import parallel
from hr1_jax.parallel import config as pconfig
from tests.models.numerics import reorder_tol


def _section(data, fsdp, tensor):
    s = pconfig.defaults()
    s.data, s.fsdp, s.tensor = data, fsdp, tensor
    return s


def test_make_mesh_fills_and_uses_auto_axes():
    assert jax.device_count() == 8
    mesh = parallel.make_mesh(_section(2, -1, 2))
    assert dict(mesh.shape) == {"data": 2, "fsdp": 2, "tensor": 2}
    assert all(t == AxisType.Auto for t in mesh.axis_types)
    assert dict(parallel.make_mesh(_section(1, -1, 1)).shape) == {"data": 1, "fsdp": 8, "tensor": 1}
    assert parallel.mesh_shape(_section(1, 1, 1), 1) == (1, 1, 1)
    with pytest.raises(ConfigError, match="cannot fill"):
        parallel.make_mesh(_section(3, -1, 1))
    with pytest.raises(ConfigError, match="!= 8 devices"):
        parallel.make_mesh(_section(2, 2, 1))


def test_rules_validation_names_the_bad_key():
    config = base_config()
    validate_config(config)
    config.mesh.train_rules.embed = "fsdp,model"
    with pytest.raises(ConfigError, match="mesh.train_rules.embed"):
        validate_config(config)
    config.mesh.train_rules.embed = "fsdp,fsdp"
    with pytest.raises(ConfigError, match="repeats"):
        validate_config(config)


def test_rules_cover_every_model_axis():
    from hr1_jax.models import LOGICAL_AXES

    for profile in ("train_rules", "sample_rules"):
        rules = pconfig.defaults()[profile]
        assert set(LOGICAL_AXES) <= set(rules.keys()), (profile, set(LOGICAL_AXES) - set(rules.keys()))
    assert pconfig.defaults().sample_rules.embed == ""  # sampling layout: no FSDP on weights


def test_logical_to_spec_profiles_dedup_and_divisibility():
    mesh = parallel.make_mesh(_section(2, 2, 2))
    train, sample = pconfig.defaults().train_rules, pconfig.defaults().sample_rules
    assert parallel.logical_to_spec(("embed", "mlp"), train, mesh, (64, 128)) == P("fsdp", "tensor")
    assert parallel.logical_to_spec(("embed", "mlp"), sample, mesh, (64, 128)) == P(None, "tensor")
    assert parallel.logical_to_spec(("batch", "length"), train, mesh, (8, 5)) == P(("data", "fsdp"))
    # 6 rows: data*fsdp=4 does not divide, so fall back to data only; 3 rows: replicated.
    assert parallel.logical_to_spec(("batch",), train, mesh, (6,)) == P("data")
    assert parallel.logical_to_spec(("batch",), train, mesh, (3,)) == P()
    # A mesh axis is used at most once per spec (heads and mlp both want tensor).
    assert parallel.logical_to_spec(("heads", "mlp"), train, mesh, (4, 4)) == P("tensor")
    # size-1 axes vanish from specs
    mesh18 = parallel.make_mesh(_section(1, 8, 1))
    assert parallel.logical_to_spec(("vocab", "embed"), train, mesh18, (64, 64)) == P(None, "fsdp")


class _Toy(nnx.Module):
    def __init__(self, rngs):
        init = nnx.initializers.normal(1.0)
        self.embed = nnx.Embed(64, 32, embedding_init=nnx.with_partitioning(init, ("vocab", "embed")), rngs=rngs)
        self.up = nnx.Linear(32, 64, kernel_init=nnx.with_partitioning(init, ("embed", "mlp")), rngs=rngs)

    def __call__(self, ids):
        return self.up(self.embed(ids))


def test_build_shard_and_reshard_keep_values():
    mesh = parallel.make_mesh(_section(2, 2, 2))
    rules = pconfig.defaults()
    sharded = parallel.build_sharded(lambda: _Toy(nnx.Rngs(0)), mesh, rules.train_rules)
    assert sharded.up.kernel[...].sharding.spec == P("fsdp", "tensor")
    assert sharded.embed.embedding[...].sharding.spec == P("tensor", "fsdp")
    with nnx.use_eager_sharding(False):
        plain = _Toy(nnx.Rngs(0))
    ids = jnp.arange(8).reshape(2, 4)
    ref = plain(ids)
    np.testing.assert_allclose(np.asarray(plain.up.kernel[...]), np.asarray(sharded.up.kernel[...]))
    # Sharding the contraction (embed over fsdp) only reorders each output's sum over the embedding
    # times the kernel, plus the bias add.
    kernel = np.asarray(plain.up.kernel[...])
    terms = np.abs(np.asarray(plain.embed(ids))) @ np.abs(kernel) + np.abs(np.asarray(plain.up.bias[...]))
    parallel.shard_model(plain, mesh, rules.train_rules)
    assert plain.up.kernel[...].sharding.spec == P("fsdp", "tensor")
    np.testing.assert_allclose(np.asarray(plain(ids)), np.asarray(ref), rtol=0,
                               atol=reorder_tol(terms.max(), kernel.shape[0] + 1))

    sample_state = parallel.reshard_for_sampling(nnx.state(sharded, nnx.Param), mesh, rules.sample_rules)
    assert sample_state["up"]["kernel"][...].sharding.spec == P(None, "tensor")
    assert sample_state["embed"]["embedding"][...].sharding.spec == P("tensor")
    # trainer copy untouched and values equal
    assert sharded.up.kernel[...].sharding.spec == P("fsdp", "tensor")
    np.testing.assert_array_equal(np.asarray(sample_state["up"]["kernel"][...]), np.asarray(sharded.up.kernel[...]))


def test_host_local_to_global_single_process():
    mesh = parallel.make_mesh(_section(2, 2, 2))
    local = {"ids": np.arange(32, dtype=np.int32).reshape(8, 4), "mask": np.ones((8, 4), bool)}
    g = parallel.host_local_to_global(local, mesh)
    assert g["ids"].shape == (8, 4) and g["ids"].sharding.spec == P(("data", "fsdp"))
    assert len(g["ids"].addressable_shards) == 8
    np.testing.assert_array_equal(np.asarray(g["ids"]), local["ids"])


@pytest.mark.parametrize("env, reason", [
    ({}, None),
    ({"SLURM_JOB_ID": "7", "SLURM_NTASKS": "1"}, None),
    ({"TPU_WORKER_HOSTNAMES": "localhost"}, None),
    ({"SLURM_JOB_ID": "7", "SLURM_NTASKS": "4"}, "SLURM_NTASKS"),
    ({"TPU_WORKER_HOSTNAMES": "w0,w1,w2,w3"}, "TPU_WORKER_HOSTNAMES"),
    ({"JAX_COORDINATOR_ADDRESS": "h:1234", "JAX_NUM_PROCESSES": "2"}, "JAX_COORDINATOR_ADDRESS"),
    ({"OMPI_COMM_WORLD_SIZE": "2"}, "OMPI_COMM_WORLD_SIZE"),
    ({"OMPI_COMM_WORLD_SIZE": "2", "HR1_DISTRIBUTED": "0"}, None),
])
def test_distributed_guard(env, reason):
    assert parallel.multi_process_reason(env) == reason
    calls = []
    initialised = parallel.maybe_initialize_distributed(env, initialize=lambda **kw: calls.append(kw))
    assert initialised == (reason is not None) and len(calls) == (reason is not None)
    if reason == "JAX_COORDINATOR_ADDRESS":
        assert calls[0] == {"coordinator_address": "h:1234", "num_processes": 2, "process_id": None}
