"""Qwen3 dense parity against transformers (torch CPU), cached decode and left padding."""
import functools

import jax.numpy as jnp
import numpy as np
import pytest

from hr1_jax.models import load_hf_checkpoint
from tests.models import hf_fixtures as hf

pytest.importorskip("torch")
hf.quiet_torch()

B, T, PRE, MAX = 2, 12, 5, 16
forward = hf.jitted_forward()


@functools.cache
def _loaded(kind):
    torch_model, path = hf.cached_checkpoint(kind)
    # attention in blocks of 5 queries: the 12-token tests run the blocked path (incl. a padded block)
    model, cfg = load_hf_checkpoint(path, attn_chunk_size=5)
    ids = np.random.default_rng(0).integers(0, hf.VOCAB, (B, T)).astype(np.int32)
    full, cache = forward(model, jnp.asarray(ids), jnp.ones((B, T), jnp.int32))
    assert cache is None
    return torch_model, model, cfg, ids, np.asarray(full)


@pytest.fixture(params=["qwen3_tied", "qwen3_untied"])
def pair(request):
    """Both head variants: parity tests."""
    return _loaded(request.param)


@pytest.fixture
def tied():
    """Cache and padding behaviour does not depend on the head; one variant keeps compiles down."""
    return _loaded("qwen3_tied")


def test_config_parsed(pair):
    torch_model, _, cfg, _, _ = pair
    assert cfg.family == "qwen3"
    assert cfg.tie_word_embeddings == torch_model.config.tie_word_embeddings
    assert cfg.rope_theta == 10000.0 and cfg.rotary_dim == cfg.head_dim


def test_logits_match_transformers(pair):
    torch_model, _, _, ids, full = pair
    ref = hf.hf_logits(torch_model, ids)
    assert np.abs(ref).max() > 1.0  # the scaled init gives real logits, not near-zero noise
    np.testing.assert_allclose(full, ref, atol=1e-4, rtol=0)


def _decode(model, ids, mask):
    """Prefill PRE tokens into a fresh cache, then decode the rest one token at a time."""
    cache = model.init_cache(B, MAX, jnp.float32)
    out, cache = forward(model, jnp.asarray(ids[:, :PRE]), jnp.asarray(mask[:, :PRE]), cache)
    steps = [np.asarray(out)]
    for t in range(PRE, ids.shape[1]):
        out, cache = forward(model, jnp.asarray(ids[:, t:t + 1]), jnp.asarray(mask[:, t:t + 1]), cache)
        steps.append(np.asarray(out))
    return np.concatenate(steps, axis=1), cache


def test_cached_decode_equals_full_sequence(tied):
    _, model, _, ids, full = tied
    steps, cache = _decode(model, ids, np.ones_like(ids))
    np.testing.assert_allclose(steps, full, atol=1e-4, rtol=0)
    assert int(cache.index) == T and list(np.asarray(cache.next_pos)) == [T, T]


def _left_pad(ids, pad):
    """Row 1 shifted right by `pad` slots (left padding); returns (ids, mask)."""
    padded, mask = ids.copy(), np.ones_like(ids)
    padded[1, pad:], padded[1, :pad], mask[1, :pad] = ids[1, :T - pad], 0, 0
    return padded, mask


def test_left_padded_batch_equals_unpadded_rows(tied):
    torch_model, model, _, ids, full = tied
    pad = 5
    padded, mask = _left_pad(ids, pad)
    out, _ = forward(model, jnp.asarray(padded), jnp.asarray(mask))
    out = np.asarray(out)
    np.testing.assert_allclose(out[0], full[0], atol=1e-4, rtol=0)
    # causal: the unpadded row's logits are a prefix of the full-sequence ones
    np.testing.assert_allclose(out[1, pad:], full[1, :T - pad], atol=1e-4, rtol=0)
    # ... and transformers agrees given the same mask and positions.
    pos = np.maximum(np.cumsum(mask, axis=1) - 1, 0)
    ref = hf.hf_logits(torch_model, padded, mask, pos)
    np.testing.assert_allclose(out[mask == 1], ref[mask == 1], atol=1e-4, rtol=0)


def test_left_padded_prefill_then_decode(tied):
    _, model, _, ids, full = tied
    pad = 3  # row 1's prompt is 3 tokens shorter and left-padded
    padded, mask = _left_pad(ids, pad)
    steps, cache = _decode(model, padded, mask)
    np.testing.assert_allclose(steps[0], full[0], atol=1e-4, rtol=0)
    np.testing.assert_allclose(steps[1, pad:], full[1, :T - pad], atol=1e-4, rtol=0)
    assert list(np.asarray(cache.next_pos)) == [T, T - pad]


def test_bad_inputs_raise(tied):
    _, model, _, ids, _ = tied
    with pytest.raises(ValueError, match="batch, seq"):
        model(jnp.asarray(ids[0]))
    with pytest.raises(ValueError, match="attention_mask shape"):
        model(jnp.asarray(ids), attention_mask=jnp.ones((B, T + 1), jnp.int32))
    with pytest.raises(ValueError, match="cannot take"):
        model(jnp.asarray(ids), cache=model.init_cache(B, T - 1, jnp.float32))
