"""Scanned layers on the simulated 8-device mesh (data, fsdp, tensor) = (2, 2, 2): stacked params
shard like their per-layer form with the `layers` axis unsharded; the train step's loss and
gradients equal the loop's on the same mesh, and the sharded trainer's loss too; stacked HF tensors
go straight into their shardings and export back bit-exact; greedy sampling in the sampling layout
equals the single-device loop."""
import jax
import numpy as np
import optax
import pytest
from flax import nnx
from safetensors.numpy import load_file

from hr1_jax import parallel
from hr1_jax.models import load_hf_checkpoint, save_hf_checkpoint
from hr1_jax.models.sampler import Sampler
from hr1_jax.models.tokenizer import load_tokenizer
from hr1_jax.train.ce_step import ShardedTrainer
from hr1_jax.parallel import config as pconfig
from tests.models.test_scan import (T, assert_grads_match, assert_loss_matches, flat_params, loop_and_scan,
                                    loss_and_grads, make_batch, with_cfg)

ROWS = 8  # one row per device: the batch really splits over data x fsdp


def _mesh():
    sec = pconfig.defaults()
    sec.data, sec.fsdp, sec.tensor = 2, 2, 2
    return parallel.make_mesh(sec), parallel.rules_tuple(sec.train_rules), parallel.rules_tuple(sec.sample_rules)


@pytest.mark.parametrize("name", ["qwen3", "qwen3_5"])
def test_sharded_scan_matches_sharded_loop(name):
    """Same mesh, same weights, loop vs scan layout (sharded vs single device is
    test_sharded_equality's)."""
    loop, scan, cfg = loop_and_scan(name)
    mesh, train_rules, _ = _mesh()
    sharded = parallel.shard_model(with_cfg(scan, cfg), mesh, train_rules)
    kernel = sharded.layer_groups[0].mlp.gate_proj.kernel.get_value()
    assert kernel.sharding.spec == jax.P(None, "fsdp", "tensor")
    assert kernel.addressable_shards[0].data.shape == (cfg.num_layer_groups, 16, 32)
    batch = make_batch(ROWS)
    ref_loss, ref = loss_and_grads(parallel.shard_model(with_cfg(loop, loop.cfg), mesh, train_rules), batch)
    loss, grads = loss_and_grads(sharded, batch)
    assert_loss_matches(loss, ref_loss, cfg, ROWS * T)
    assert_grads_match(grads, ref, cfg, ROWS * T)
    trainer = ShardedTrainer(with_cfg(scan, cfg), optax.adamw(1e-3), mesh, train_rules, chunk_size=8)
    metrics = jax.device_get(trainer.step({k: np.asarray(v) for k, v in batch.items()}))
    assert_loss_matches(float(metrics["loss"]), ref_loss, cfg, ROWS * T)


def test_stacked_hf_tensors_load_sharded_and_export_bit_exact(tmp_path):
    loop, scan, cfg = loop_and_scan("qwen3_5")
    mesh, train_rules, _ = _mesh()
    save_hf_checkpoint(loop, loop.cfg, str(tmp_path / "loop"))
    model, _ = load_hf_checkpoint(str(tmp_path / "loop"), mesh=mesh, rules=train_rules, scan_layers=True,
                                  gdn_chunk_size=cfg.gdn_chunk_size)
    qkv = model.layer_groups[0].linear_attn.in_proj_qkv.kernel.get_value()
    assert qkv.sharding.spec == jax.P(None, "fsdp", "tensor") and qkv.addressable_shards[0].data.shape == (2, 16, 32)
    expected = flat_params(scan)
    for path, value in flat_params(model).items():
        np.testing.assert_array_equal(np.asarray(value), np.asarray(expected[path]), err_msg=path)
    save_hf_checkpoint(model, model.cfg, str(tmp_path / "sharded"))
    a, b = load_file(str(tmp_path / "loop" / "model.safetensors")), load_file(str(tmp_path / "sharded" / "model.safetensors"))
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_scan_sampler_in_sampling_layout_matches_single_device_loop():
    loop, scan, cfg = loop_and_scan("qwen3_5")
    mesh, train_rules, sample_rules = _mesh()
    tok = load_tokenizer()
    prompts = [list(range(10, 10 + n)) for n in (3, 7, 12, 5)]
    ref = Sampler(loop, tok, prompt_bucket=16).generate_ids(prompts, key=jax.random.key(0), max_new_tokens=6,
                                                           temperature=0)
    params = nnx.state(scan, nnx.Param)
    moved = parallel.reshard_for_sampling(jax.device_put(params, parallel.state_shardings(params, mesh, train_rules)),
                                          mesh, sample_rules)
    assert moved["layer_groups"][0]["mlp"]["gate_proj"]["kernel"][...].sharding.spec == jax.P(None, None, "tensor")
    sampler = Sampler(scan, tok, prompt_bucket=16)
    sampler.update_params(moved)
    out = sampler.generate_ids(prompts, key=jax.random.key(0), max_new_tokens=6, temperature=0)
    np.testing.assert_array_equal(out["tokens"], ref["tokens"])
    np.testing.assert_array_equal(out["lengths"], ref["lengths"])
