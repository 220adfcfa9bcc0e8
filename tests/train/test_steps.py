"""GRPO/SFT steps: the sharded step on an 8-device mesh equals the single-device step; SFT learns."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from hr1_jax.config import base_config
from hr1_jax.models import ModelConfig, build_model
from hr1_jax.parallel import make_mesh
from hr1_jax.parallel.config import rules_tuple
from hr1_jax.train.grpo_step import grpo_optimizer, jit_step, logprobs_fn, make_grpo_step
from hr1_jax.train.losses import LossConfig
from hr1_jax.train.sft_step import make_sft_step, sft_optimizer
from hr1_jax.train.state import init_state, split_model, state_sharding

CFG = ModelConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_layers=2, num_heads=4,
                  num_kv_heads=2, head_dim=8)


def _grpo_batch(rng, A=2, M=8, L=12):
    ids = rng.integers(3, CFG.vocab_size, (A, M, L)).astype(np.int32)
    attn = np.ones((A, M, L), np.int32)
    lengths = rng.integers(6, L + 1, (A, M))
    for a in range(A):
        for m in range(M):
            attn[a, m, lengths[a, m]:] = 0
            ids[a, m, lengths[a, m]:] = 0
    mask = np.zeros((A, M, L - 1), np.float32)
    for a in range(A):
        for m in range(M):
            mask[a, m, 3:lengths[a, m] - 1] = 1.0
    return {"input_ids": ids, "attention_mask": attn, "loss_mask": mask,
            "advantages": rng.normal(size=(A, M)).astype(np.float32)}


def _setup(mesh, section):
    model = build_model(CFG, nnx.Rngs(0))
    graphdef, params, rest = split_model(model)
    rules = rules_tuple(section.train_rules)
    return graphdef, params, rest, rules


def _run_grpo(mesh, section, batch):
    graphdef, params, rest, rules = _setup(mesh, section)
    g = base_config().train.grpo
    tx = grpo_optimizer(g)
    sh = state_sharding(tx, params, mesh, rules)
    state = init_state(tx, params, sh)
    lp = logprobs_fn(graphdef, rest, temperature=0.7)
    flat = lambda x: x.reshape(-1, x.shape[-1])
    old = np.asarray(lp(state.params, flat(batch["input_ids"]), flat(batch["attention_mask"])))
    old = old.reshape(batch["loss_mask"].shape)
    full = dict(batch, old_logp=old, sampler_logp=old + 0.05)
    step = jit_step(make_grpo_step(graphdef, rest, tx, LossConfig(), temperature=0.7), sh, mesh)
    with jax.set_mesh(mesh):
        for _ in range(2):
            state, metrics = step(state, full)
    return state, metrics


def test_grpo_step_sharded_equals_single_device():
    assert jax.device_count() == 8
    section = base_config().mesh
    batch = _grpo_batch(np.random.default_rng(0))
    mesh8 = make_mesh(section)                       # fsdp=8
    section1 = base_config().mesh
    mesh1 = make_mesh(section1, devices=jax.devices()[:1])
    s8, m8 = _run_grpo(mesh8, section, batch)
    s1, m1 = _run_grpo(mesh1, section1, batch)
    assert float(m1["grad_norm"]) > 0
    np.testing.assert_allclose(float(m8["loss"]), float(m1["loss"]), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(float(m8["grad_norm"]), float(m1["grad_norm"]), rtol=1e-4)
    for a, b in zip(jax.tree.leaves(s8.params), jax.tree.leaves(s1.params)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-6)
    # the sharded params really are sharded
    emb = s8.params["embed_tokens"]["embedding"]
    assert len(emb.get_value().sharding.device_set) == 8


def test_grad_accumulation_is_exact():
    """A=2 micro-batches of 4 == A=1 micro-batch of 8 (numerator/denominator accumulation)."""
    section = base_config().mesh
    mesh1 = make_mesh(section, devices=jax.devices()[:1])
    b = _grpo_batch(np.random.default_rng(1), A=2, M=4)
    merged = {k: v.reshape((1, 8) + v.shape[2:]) for k, v in b.items()}
    s_a, m_a = _run_grpo(mesh1, section, b)
    s_b, m_b = _run_grpo(mesh1, section, merged)
    np.testing.assert_allclose(float(m_a["loss"]), float(m_b["loss"]), rtol=1e-5)
    for x, y in zip(jax.tree.leaves(s_a.params), jax.tree.leaves(s_b.params)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-4, atol=1e-6)


def test_sft_step_learns_only_masked_continuation():
    section = base_config().mesh
    mesh = make_mesh(section, devices=jax.devices()[:1])
    graphdef, params, rest, rules = _setup(mesh, section)
    s = base_config().train.sft
    s.lr = 1e-2
    tx = sft_optimizer(s, total_steps=30)
    sh = state_sharding(tx, params, mesh, rules)
    state = init_state(tx, params, sh)
    step = jit_step(make_sft_step(graphdef, rest, tx), sh, mesh)
    ids = np.tile(np.arange(3, 19, dtype=np.int32), (1, 4, 1))
    mask = np.zeros((1, 4, 15), np.float32)
    mask[..., 8:] = 1.0
    batch = {"input_ids": ids, "attention_mask": np.ones_like(ids), "loss_mask": mask}
    losses = []
    with jax.set_mesh(mesh):
        for _ in range(30):
            state, m = step(state, batch)
            losses.append(float(m["loss"]))
    assert losses[-1] < 0.2 * losses[0]
    # loss counts masked tokens only
    assert float(m["tokens"]) == 4 * 7
