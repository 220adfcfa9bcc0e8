"""Sharded == unsharded: forward logits and one AdamW cross-entropy step of Qwen3 and Qwen3.5 on
8 simulated CPU devices, meshes (data, fsdp, tensor) = (2,2,2) and (1,8,1), against one device."""
import jax
import numpy as np
import optax
import pytest
from flax import nnx

from hr1_jax import parallel
from hr1_jax.models import ModelConfig, build_model
from hr1_jax.train.ce_step import ShardedTrainer
from hr1_jax.parallel import config as pconfig

QWEN3 = ModelConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4,
                    num_kv_heads=2, head_dim=16, tie_word_embeddings=False)
# One GDN chunk per sequence keeps the batched triangular solves small: jaxlib 0.10.2's CPU trsm kernel
# deadlocks its thread pool on 2-core machines for larger batches (see the models report).
QWEN3_5 = ModelConfig(family="qwen3_5_text", vocab_size=256, hidden_size=64, intermediate_size=128, num_layers=2,
                      num_heads=4, num_kv_heads=2, head_dim=16, partial_rotary_factor=0.25,
                      layer_types=("linear_attention", "full_attention"), linear_num_key_heads=2,
                      linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16, gdn_chunk_size=32)


def _batch(vocab):
    rng = np.random.default_rng(0)
    ids = rng.integers(0, vocab, (8, 24)).astype(np.int32)
    mask = np.ones((8, 24), bool)
    for i in range(8):  # left padding of different lengths
        mask[i, :i] = False
    loss_mask = mask.copy()
    loss_mask[:, :8] = False  # only the "response" part is trained
    return {"input_ids": ids, "attention_mask": mask, "loss_mask": loss_mask}


def _run(cfg, shape, batch):
    sec = pconfig.defaults()
    sec.data, sec.fsdp, sec.tensor = shape
    devices = jax.devices()[:int(np.prod(shape))]
    mesh = parallel.make_mesh(sec, devices)
    model = build_model(cfg, nnx.Rngs(0))
    # Adam's first update is ~lr*sign(g): for g near 0 it amplifies fp32 reduction-order noise by 1/eps;
    # eps=1e-4 bounds that to ~1e-6 while the update still moves every weight by up to lr.
    trainer = ShardedTrainer(model, optax.adamw(1e-2, eps=1e-4), mesh, parallel.rules_tuple(sec.train_rules), chunk_size=16)
    if shape == (2, 2, 2):  # the layout is really sharded, not silently replicated
        spec = trainer.state.params["layers"][0]["mlp"]["gate_proj"]["kernel"][...].sharding.spec
        assert spec == jax.P("fsdp", "tensor")
    logits = np.asarray(trainer.forward(batch))
    metrics = jax.device_get(trainer.step(batch))
    params = jax.device_get(nnx.to_pure_dict(trainer.state.params))
    return logits, metrics, params


@pytest.mark.parametrize("cfg, shapes", [(QWEN3, [(2, 2, 2), (1, 8, 1)]), (QWEN3_5, [(2, 2, 2)])],
                         ids=["qwen3", "qwen3_5"])
def test_sharded_matches_single_device(cfg, shapes):
    batch = _batch(cfg.vocab_size)
    ref_logits, ref_metrics, ref_params = _run(cfg, (1, 1, 1), batch)
    assert np.isfinite(ref_metrics["loss"]) and ref_metrics["grad_norm"] > 0
    for shape in shapes:
        logits, metrics, params = _run(cfg, shape, batch)
        np.testing.assert_allclose(logits, ref_logits, atol=2e-5, rtol=1e-5)
        np.testing.assert_allclose(metrics["loss"], ref_metrics["loss"], rtol=1e-5)
        np.testing.assert_allclose(metrics["grad_norm"], ref_metrics["grad_norm"], rtol=1e-4)
        flat, ref_flat = jax.tree.leaves(params), jax.tree.leaves(ref_params)
        assert len(flat) == len(ref_flat)
        for a, b in zip(flat, ref_flat):
            np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-4)


def test_sampler_in_sampling_layout_matches_single_device():
    """Train layout -> reshard_for_sampling on (2,2,2) -> greedy sampler == single-device sampler."""
    from hr1_jax.models.sampler import Sampler
    from hr1_jax.models.tokenizer import load_tokenizer

    sec = pconfig.defaults()
    sec.data, sec.fsdp, sec.tensor = 2, 2, 2
    mesh = parallel.make_mesh(sec)
    cfg = QWEN3.replace(vocab_size=2048)
    tok = load_tokenizer()
    prompts = [list(range(10, 10 + n)) for n in (3, 7, 12, 5)]
    model = build_model(cfg, nnx.Rngs(0))
    ref = Sampler(model, tok, prompt_bucket=16).generate_ids(prompts, key=jax.random.key(0), max_new_tokens=6,
                                                            temperature=0)
    train_params = jax.device_put(nnx.state(model, nnx.Param),
                                  parallel.state_shardings(nnx.state(model, nnx.Param), mesh,
                                                           parallel.rules_tuple(sec.train_rules)))
    moved = parallel.reshard_for_sampling(train_params, mesh, parallel.rules_tuple(sec.sample_rules))
    assert moved["layers"][0]["mlp"]["gate_proj"]["kernel"][...].sharding.spec == jax.P(None, "tensor")
    sampler = Sampler(model, tok, prompt_bucket=16)
    sampler.update_params(moved)
    out = sampler.generate_ids(prompts, key=jax.random.key(0), max_new_tokens=6, temperature=0)
    np.testing.assert_array_equal(out["tokens"], ref["tokens"])
    np.testing.assert_allclose(out["logprobs"], ref["logprobs"], atol=2e-5)


@pytest.mark.parametrize("tie", [False, True], ids=["head", "tied"])
def test_bf16_step_keeps_its_state_dtypes_and_compiles_once(tie):
    """bf16 params and activations: the fused CE's gradients stay in their primals' dtypes, so AdamW's
    moments keep the params' dtypes and the second step reuses the first step's executable."""
    cfg = QWEN3.replace(dtype="bfloat16", param_dtype="bfloat16", tie_word_embeddings=tie)
    sec = pconfig.defaults()
    mesh = parallel.make_mesh(sec, jax.devices()[:1])
    trainer = ShardedTrainer(build_model(cfg, nnx.Rngs(0)), optax.adamw(1e-3), mesh,
                             parallel.rules_tuple(sec.train_rules), chunk_size=16)
    dtypes = lambda: [str(x.dtype) for x in jax.tree.leaves(trainer.state)]
    before = dtypes()
    assert "bfloat16" in before
    batch = _batch(cfg.vocab_size)
    for _ in range(2):
        trainer.step(batch)
    assert dtypes() == before
    (step,) = trainer._jitted.values()
    assert step._cache_size() == 1
