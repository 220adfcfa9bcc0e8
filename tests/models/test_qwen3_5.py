"""Qwen3.5 text parity ladder against transformers (torch CPU): GDN kernels (chunked vs recurrent vs
HF), the GDN layer, partial RoPE, gated attention, then the whole model, cached decode and left padding."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from hr1_jax.models import load_hf_checkpoint
from hr1_jax.models.gated_deltanet import chunk_gated_delta_rule, recurrent_gated_delta_rule
from hr1_jax.models.layers import apply_rope, rope_cos_sin
from tests.models import hf_fixtures as hf

torch = pytest.importorskip("torch")
hf.quiet_torch()
from transformers.models.qwen3_5 import modeling_qwen3_5 as hf_mod  # noqa: E402

B, T, PRE, MAX = 2, 12, 5, 16
forward = hf.jitted_forward()
# jitted once per shape: eager dispatch of the many small ops is slower than compiling on 2 cores
chunked = jax.jit(chunk_gated_delta_rule, static_argnames="chunk_size")
recurrent = jax.jit(recurrent_gated_delta_rule)


@pytest.fixture(scope="module")
def pair():
    torch_model, path = hf.cached_checkpoint("qwen3_5")
    # chunk 4: the 12-token sequences span several chunks (and PRE=5 a padded one)
    model, cfg = load_hf_checkpoint(path, gdn_chunk_size=4)
    ids = np.random.default_rng(0).integers(0, hf.VOCAB, (B, T)).astype(np.int32)
    full, _ = forward(model, jnp.asarray(ids), jnp.ones((B, T), jnp.int32))
    return torch_model, model, cfg, ids, np.asarray(full)


def _t(x):
    return torch.as_tensor(np.array(x))


def test_config_parsed(pair):
    _, _, cfg, _, _ = pair
    assert cfg.family == "qwen3_5_text"
    assert cfg.layer_types == ("linear_attention",) * 3 + ("full_attention",)
    assert cfg.rotary_dim == 4 and cfg.linear_num_value_heads == 4 and not cfg.tie_word_embeddings


# ---- sub-blocks ------------------------------------------------------------------------------------
def _gdn_inputs(seed, t=11, b=2, nk=2, nv=4, dk=8, dv=8):
    r = np.random.default_rng(seed)
    q, k = r.normal(size=(b, t, nk, dk)), r.normal(size=(b, t, nk, dk))
    v = r.normal(size=(b, t, nv, dv))
    g = -np.exp(r.normal(size=(b, t, nv)) - 1.0)          # log decay <= 0
    beta = 1 / (1 + np.exp(-r.normal(size=(b, t, nv))))
    s0 = r.normal(size=(b, nv, dk, dv))
    return [x.astype(np.float32) for x in (q, k, v, g, beta, s0)]


@pytest.mark.parametrize("chunk,t", [(4, 11), (64, 70)])  # several chunks, the last one padded
def test_gdn_chunked_recurrent_and_hf_agree(chunk, t):
    q, k, v, g, beta, s0 = _gdn_inputs(chunk, t=t)
    out_c, st_c = chunked(*map(jnp.asarray, (q, k, v, g, beta, s0)), chunk_size=chunk)
    out_r, st_r = recurrent(*map(jnp.asarray, (q, k, v, g, beta, s0)))
    ref_o, ref_s = hf_mod.torch_chunk_gated_delta_rule(
        *map(_t, (q, k, v, g, beta)), chunk_size=chunk, initial_state=_t(s0), output_final_state=True,
        use_qk_l2norm_in_kernel=True)
    rec_o, rec_s = hf_mod.torch_recurrent_gated_delta_rule(
        *map(_t, (q, k, v, g, beta)), initial_state=_t(s0), output_final_state=True, use_qk_l2norm_in_kernel=True)
    for ours, ref in [(out_c, ref_o), (out_r, rec_o), (out_c, out_r), (st_c, ref_s), (st_r, rec_s), (st_c, st_r)]:
        np.testing.assert_allclose(np.asarray(ours), np.asarray(ref), atol=2e-5, rtol=0)
    assert np.abs(np.asarray(st_c)).max() > 0.5


def test_gdn_chunked_continues_from_state():
    """Two chunked calls threading the state == one call (chunked prefill / cache continuation)."""
    q, k, v, g, beta, s0 = map(jnp.asarray, _gdn_inputs(7))
    whole, st = chunked(q, k, v, g, beta, s0, chunk_size=4)
    a, st_a = chunked(q[:, :6], k[:, :6], v[:, :6], g[:, :6], beta[:, :6], s0, chunk_size=4)
    b, st_b = chunked(q[:, 6:], k[:, 6:], v[:, 6:], g[:, 6:], beta[:, 6:], st_a, chunk_size=4)
    np.testing.assert_allclose(np.concatenate([a, b], 1), np.asarray(whole), atol=2e-5, rtol=0)
    np.testing.assert_allclose(np.asarray(st_b), np.asarray(st), atol=2e-5, rtol=0)


def test_gdn_gradients_are_finite():
    q, k, v, g, beta, _ = map(jnp.asarray, _gdn_inputs(3))
    g = g * 100.0  # strong decay: exp of the unmasked upper-triangle differences overflows fp32
    grads = jax.jit(jax.grad(lambda *a: chunk_gated_delta_rule(*a, chunk_size=4)[0].sum(),
                             argnums=(0, 1, 2, 3, 4)))(q, k, v, g, beta)
    assert all(bool(jnp.isfinite(x).all()) for x in grads)


def test_gdn_layer_matches_hf(pair):
    torch_model, model, _, _, _ = pair
    x = np.random.default_rng(1).normal(size=(B, T, 64)).astype(np.float32)
    with torch.no_grad():
        ref = torch_model.model.layers[0].linear_attn(_t(x)).numpy()
    ours, _ = nnx.jit(lambda m, x: m(x, jnp.ones((B, T), bool), None))(model.layers[0].linear_attn, jnp.asarray(x))
    np.testing.assert_allclose(np.asarray(ours), ref, atol=1e-4, rtol=0)


def test_partial_rope_matches_hf(pair):
    torch_model, _, cfg, _, _ = pair
    r = np.random.default_rng(2)
    q = r.normal(size=(B, T, cfg.num_heads, cfg.head_dim)).astype(np.float32)
    pos = (np.arange(T)[None] + np.array([[0], [37]])).astype(np.int32)
    cos_t, sin_t = torch_model.model.rotary_emb(_t(q), _t(pos).long())
    ref, _ = hf_mod.apply_rotary_pos_emb(_t(q).transpose(1, 2), _t(q).transpose(1, 2), cos_t, sin_t)
    cos, sin = rope_cos_sin(jnp.asarray(pos), cfg.rotary_dim, cfg.rope_theta)
    ours = apply_rope(jnp.asarray(q), cos, sin)
    np.testing.assert_allclose(np.asarray(ours), ref.transpose(1, 2).numpy(), atol=1e-5, rtol=0)
    np.testing.assert_array_equal(np.asarray(ours)[..., cfg.rotary_dim:], q[..., cfg.rotary_dim:])


def test_gated_attention_matches_hf(pair):
    torch_model, model, cfg, _, _ = pair
    x = np.random.default_rng(3).normal(size=(B, T, 64)).astype(np.float32)
    pos = np.broadcast_to(np.arange(T), (B, T))
    with torch.no_grad():
        pe = torch_model.model.rotary_emb(_t(x), _t(pos).long())
        ref, _ = torch_model.model.layers[3].self_attn(_t(x), position_embeddings=pe, attention_mask=None)
    cos, sin = rope_cos_sin(jnp.asarray(pos), cfg.rotary_dim, cfg.rope_theta)
    ours, _ = nnx.jit(lambda m, x: m(x, cos, sin, jnp.ones((B, T), bool), None, 0))(
        model.layers[3].self_attn, jnp.asarray(x))
    np.testing.assert_allclose(np.asarray(ours), ref.numpy(), atol=1e-4, rtol=0)


# ---- whole model -----------------------------------------------------------------------------------
def test_logits_match_transformers(pair):
    torch_model, _, _, ids, full = pair
    ref = hf.hf_logits(torch_model, ids)
    assert np.abs(ref).max() > 1.0
    np.testing.assert_allclose(full, ref, atol=1e-4, rtol=0)


def _decode(model, ids, mask):
    """Prefill PRE tokens, a 3-token chunk continuing from the cache, then one token at a time."""
    cache = model.init_cache(B, MAX, jnp.float32)
    cuts = [0, PRE, PRE + 3] + list(range(PRE + 4, ids.shape[1] + 1))
    steps = []
    for a, b in zip(cuts[:-1], cuts[1:]):
        out, cache = forward(model, jnp.asarray(ids[:, a:b]), jnp.asarray(mask[:, a:b]), cache)
        steps.append(np.asarray(out))
    return np.concatenate(steps, axis=1), cache


def test_cached_decode_equals_full_sequence(pair):
    _, model, _, ids, full = pair
    steps, cache = _decode(model, ids, np.ones_like(ids))
    np.testing.assert_allclose(steps, full, atol=1e-4, rtol=0)
    assert int(cache.index) == T


def _left_pad(ids, pad):
    padded, mask = ids.copy(), np.ones_like(ids)
    padded[1, pad:], padded[1, :pad], mask[1, :pad] = ids[1, :T - pad], 7, 0  # pad id 7: must not matter
    return padded, mask


def test_left_padded_batch_equals_unpadded_rows(pair):
    torch_model, model, _, ids, full = pair
    pad = 5
    padded, mask = _left_pad(ids, pad)
    out, _ = forward(model, jnp.asarray(padded), jnp.asarray(mask))
    out = np.asarray(out)
    np.testing.assert_allclose(out[0], full[0], atol=1e-4, rtol=0)
    np.testing.assert_allclose(out[1, pad:], full[1, :T - pad], atol=1e-4, rtol=0)
    pos = np.maximum(np.cumsum(mask, axis=1) - 1, 0)
    ref = hf.hf_logits(torch_model, padded, mask, pos)
    np.testing.assert_allclose(out[mask == 1], ref[mask == 1], atol=1e-4, rtol=0)


def test_left_padded_prefill_then_decode(pair):
    _, model, _, ids, full = pair
    pad = 3
    padded, mask = _left_pad(ids, pad)
    steps, cache = _decode(model, padded, mask)
    np.testing.assert_allclose(steps[0], full[0], atol=1e-4, rtol=0)
    np.testing.assert_allclose(steps[1, pad:], full[1, :T - pad], atol=1e-4, rtol=0)
    assert list(np.asarray(cache.next_pos)) == [T, T - pad]


@pytest.mark.slow  # two whole-model gradient compiles (~30-80 s cold on 2 busy cores)
def test_training_gradients_with_and_without_remat(pair):
    """Every parameter gets a finite, non-zero gradient; remat and blocked attention do not change it."""
    _, model, _, ids, _ = pair
    _, path = hf.cached_checkpoint("qwen3_5")
    # remat + blocked attention (5-query blocks) must give the plain model's gradients
    remat_model, remat_cfg = load_hf_checkpoint(path, gdn_chunk_size=4, remat=True, attn_chunk_size=5)
    assert remat_cfg.remat

    @nnx.jit
    def grads(m, ids):
        def loss(m):
            logits, _ = m(ids)
            logp = jax.nn.log_softmax(logits[:, :-1])
            return -jnp.take_along_axis(logp, ids[:, 1:, None], axis=-1).mean()
        return nnx.grad(loss)(m)

    g, g_remat = grads(model, jnp.asarray(ids)), grads(remat_model, jnp.asarray(ids))
    flat, flat_remat = dict(nnx.to_flat_state(g)), dict(nnx.to_flat_state(g_remat))
    assert flat.keys() == flat_remat.keys() and len(flat) > 40
    for path_, v in flat.items():
        a, b = np.asarray(v.get_value()), np.asarray(flat_remat[path_].get_value())
        assert np.isfinite(a).all() and np.abs(a).max() > 0, path_
        # different op order (remat, 5-query blocks): equal up to fp32 rounding
        np.testing.assert_allclose(a, b, atol=1e-4, rtol=1e-4, err_msg=str(path_))
