"""Chunked log-probs/entropy equal the naive full-logits computation (values and gradients), cover
only the tokenizer's ids when given `valid_vocab_size`, and use a bounded amount of memory (compiled
memory analysis)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from hr1_jax.models import ModelConfig, build_model
from hr1_jax.models.logprobs import sequence_logprobs, token_logprobs
from tests.models.numerics import reorder_tol

B, T, E, V = 2, 37, 16, 300  # T and V deliberately not multiples of the chunk sizes


def _naive(h, w, tg, temperature=1.0):
    logits = jnp.dot(h, w, precision="highest") / temperature
    logp_all = jax.nn.log_softmax(logits, -1)
    logp = jnp.take_along_axis(logp_all, tg[..., None], -1)[..., 0]
    ent = -jnp.sum(jnp.exp(logp_all) * logp_all, -1)
    return logp, ent


@pytest.fixture(scope="module")
def data():
    k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
    h = jax.random.normal(k1, (B, T, E))
    w = jax.random.normal(k2, (E, V)) * 0.7
    tg = jax.random.randint(k3, (B, T), 0, V)
    return h, w, tg


@pytest.mark.parametrize("chunk, vchunk, temp", [(8, None, 1.0), (5, 64, 0.7)])
def test_matches_naive_values_and_grads(data, chunk, vchunk, temp):
    h, w, tg = data
    weights = jnp.linspace(-1, 1, B * T).reshape(B, T)  # a non-trivial loss over both outputs

    @jax.jit
    def run(h, w):
        def chunked(h, w):
            lp, ent = token_logprobs(h, w, tg, chunk_size=chunk, vocab_chunk_size=vchunk, temperature=temp,
                                     with_entropy=True)
            return jnp.sum(weights * lp) + 0.1 * jnp.sum(ent), (lp, ent)

        def naive(h, w):
            lp, ent = _naive(h, w, tg, temp)
            return jnp.sum(weights * lp) + 0.1 * jnp.sum(ent), (lp, ent)

        return [jax.grad(f, argnums=(0, 1), has_aux=True)(h, w) for f in (chunked, naive)]

    (g, (lp, ent)), (rg, (ref_lp, ref_ent)) = run(h, w)
    assert lp.dtype == jnp.float32 and lp.shape == (B, T)
    np.testing.assert_allclose(lp, ref_lp, atol=2e-5, rtol=1e-5)
    np.testing.assert_allclose(ent, ref_ent, atol=2e-5, rtol=1e-5)
    for a, b in zip(g, rg):
        np.testing.assert_allclose(a, b, atol=1e-4, rtol=1e-4)


VALID = 257  # a tokenizer narrower than the head; not a multiple of the vocab chunk either


def _valid_tols(h, w, temperature):
    """(log-prob, entropy) tolerances: the kernel and the reference order their reductions
    differently. A logit is a length-E dot whose error is bounded via sum|h_i w_i| (which also bounds
    |logit|, `scale`); a log-prob takes two logits' errors plus logsumexp's length-VALID sum of
    positive terms (relative error); the entropy's sum p*logit carries every such error times
    |logit| plus its own length-VALID reordering."""
    scale = float(jnp.max(jnp.abs(h) @ jnp.abs(w[:, :VALID]))) / temperature
    lp_tol = 2 * reorder_tol(scale, E) + reorder_tol(1.0, VALID)
    return lp_tol, lp_tol * (1.0 + scale) + reorder_tol(scale, VALID)


@pytest.mark.parametrize("chunk, vchunk, temp", [(8, None, 1.0), (5, 64, 0.7)])
def test_valid_vocab_size_is_a_softmax_over_the_valid_ids(data, chunk, vchunk, temp):
    h, w, tg = data
    tg = tg % VALID
    kw = dict(chunk_size=chunk, vocab_chunk_size=vchunk, temperature=temp, with_entropy=True)
    lp, ent = token_logprobs(h, w, tg, valid_vocab_size=VALID, **kw)
    ref_lp, ref_ent = _naive(h, w[:, :VALID], tg, temp)
    lp_tol, ent_tol = _valid_tols(h, w, temp)
    np.testing.assert_allclose(lp, ref_lp, atol=lp_tol, rtol=0)
    np.testing.assert_allclose(ent, ref_ent, atol=ent_tol, rtol=0)
    # The padded columns' mass is far above the tolerance, so an unmasked softmax would fail above.
    assert np.all(np.abs(np.asarray(_naive(h, w, tg, temp)[0]) - np.asarray(ref_lp)) > lp_tol)
    # Padded columns get no gradient: training never moves rows the sampler cannot draw.
    g = jax.grad(lambda w: token_logprobs(h, w, tg, valid_vocab_size=VALID, **kw)[0].sum())(w)
    assert np.all(np.isfinite(g)) and not np.any(g[:, VALID:]) and np.any(g[:, :VALID])


@pytest.mark.parametrize("vchunk", [None, 64])
def test_valid_vocab_size_covering_the_head_changes_nothing(data, vchunk):
    h, w, tg = data
    kw = dict(chunk_size=8, vocab_chunk_size=vchunk, with_entropy=True)
    unmasked = token_logprobs(h, w, tg, **kw)
    for valid in (V, V + 7):
        for a, b in zip(token_logprobs(h, w, tg, valid_vocab_size=valid, **kw), unmasked):
            np.testing.assert_array_equal(a, b)


def test_memory_is_bounded_by_the_chunk():
    """Forward+backward temp memory: naive holds several [B,T,V] fp32 copies; chunked stays near one
    [B,chunk,V] (sequence chunks) or [B,chunk,vocab_chunk] block."""
    b, t, e, v = 2, 512, 32, 4096
    h = jax.ShapeDtypeStruct((b, t, e), jnp.float32)
    w = jax.ShapeDtypeStruct((e, v), jnp.float32)
    tg = jax.ShapeDtypeStruct((b, t), jnp.int32)
    full = b * t * v * 4

    def temp_bytes(fn):
        grad = jax.grad(lambda h, w, tg: fn(h, w, tg).sum(), argnums=(0, 1))
        return jax.jit(grad).lower(h, w, tg).compile().memory_analysis().temp_size_in_bytes

    naive = temp_bytes(lambda h, w, tg: _naive(h, w, tg)[0])
    seq = temp_bytes(lambda h, w, tg: token_logprobs(h, w, tg, chunk_size=32)[0])
    both = temp_bytes(lambda h, w, tg: token_logprobs(h, w, tg, chunk_size=32, vocab_chunk_size=512)[0])
    assert naive >= full                      # materialises the logits (and more for backward)
    assert seq < full / 4, (seq, full)        # block = full * 32/512 = full/16
    assert both < seq, (both, seq)


def test_sequence_logprobs_matches_model_logits():
    cfg = ModelConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2,
                      num_kv_heads=1, head_dim=16, tie_word_embeddings=False)
    model = build_model(cfg, nnx.Rngs(1))
    ids = jax.random.randint(jax.random.key(2), (2, 11), 0, cfg.vocab_size)
    mask = jnp.ones((2, 11), bool).at[1, :3].set(False)  # left-padded second row

    @nnx.jit
    def run(model, ids, mask):
        lp, ent = sequence_logprobs(model, ids, mask, chunk_size=4, vocab_chunk_size=32, with_entropy=True)
        return lp, ent, model(ids, attention_mask=mask)[0]

    lp, ent, logits = run(model, ids, mask)
    ref = jax.nn.log_softmax(logits[:, :-1], -1)
    np.testing.assert_allclose(lp, jnp.take_along_axis(ref, ids[:, 1:, None], -1)[..., 0], atol=1e-5)
    np.testing.assert_allclose(ent, -jnp.sum(jnp.exp(ref) * ref, -1), atol=1e-5)
