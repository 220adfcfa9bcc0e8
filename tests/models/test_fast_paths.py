"""The fast paths against their plain references: sort-free top-k/top-p and the two-pass argmax
(identical masks and tokens), attention's own VJP (against autodiff through a plain softmax), RoPE's
own VJP (against autodiff through rotate-half, bit for bit), blocked causal attention and the
segmented cache's attention and writes (same values and gradients as one full softmax), and the fused
LM-head + CE (same loss and gradients as autodiff through `token_logprobs`)."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hr1_jax.models import attention, layers, sampler
from hr1_jax.models.cache import (SEGMENT_MIN, KVCache, key_block, keys_from_blocks, keys_to_blocks,
                                  segment_bounds, slots_read)
from hr1_jax.models.logprobs import fused_ce_sum, token_logprobs
from hr1_jax.models.sampler import categorical, fast_argmax, process_logits, token_logprob
from tests.models.numerics import reorder_tol

NEG = -1e30
_truncate = jax.jit(process_logits, static_argnums=(2, 4))


@functools.partial(jax.jit, static_argnums=(1, 2))
def _sorted_reference(out, top_k, top_p):
    """The sampler's former truncation: lax.top_k, then a full descending sort for top-p."""
    if top_k > 0:
        kth = jax.lax.top_k(out, top_k)[0][..., -1:]
        out = jnp.where(out < kth, NEG, out)
    if top_p < 1:
        desc = -jnp.sort(-out, axis=-1)
        probs = jax.nn.softmax(desc, axis=-1)
        keep = (jnp.cumsum(probs, axis=-1) - probs) < top_p
        threshold = jnp.min(jnp.where(keep, desc, jnp.inf), axis=-1, keepdims=True)
        out = jnp.where(out < threshold, NEG, out)
    return out


def _logits(seed, v, rows=6):
    x = jax.random.normal(jax.random.key(seed), (rows, v)) * 3
    x = x.at[:, :4].set(jnp.round(x[:, :4]))       # ties, including at the truncation boundary
    x = x.at[0, 4].set(-0.0).at[0, 5].set(0.0)     # signed zeros compare equal
    return jnp.where(jnp.arange(v) < v - 3, x, NEG)  # padded vocab rows


def _boundary(x, top_k, top_p):
    """Entries whose exact (fp64) mass above lies within fp32 summation error of top_p: the sorted
    cumsum and a masked sum may round them to either side, so they are not compared."""
    x = np.asarray(_sorted_reference(x, top_k, 1.0), np.float64)
    p = np.exp(x - x.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    above = np.array([[p[i][x[i] > x[i, j]].sum() for j in range(x.shape[1])] for i in range(x.shape[0])])
    return np.abs(above - top_p) < x.shape[1] * 2.0 ** -23


@pytest.mark.parametrize("v", [5, 1024])
@pytest.mark.parametrize("top_k,top_p", [(0, 0.9), (0, 0.999), (4, 1.0), (1, 1.0), (20, 0.8)])
def test_truncation_and_tokens_match_the_sorted_reference(v, top_k, top_p):
    top_k = min(top_k, v)
    for seed in range(3):
        x = _logits(seed, v)
        ours = _truncate(x, 1.0, top_k, top_p, top_p < 1)[1]
        ref = _sorted_reference(x, top_k, top_p)
        same = (np.asarray(ours) == np.asarray(ref)) | (_boundary(x, top_k, top_p) if top_p < 1 else False)
        assert same.all()
        for step in range(4):  # the same key draws the same token
            key = jax.random.fold_in(jax.random.key(seed), step)
            np.testing.assert_array_equal(categorical(key, ours), jax.random.categorical(key, ref, axis=-1))


@pytest.mark.parametrize("v,chunk", [(1024, 2048), (1024, 1500), (1024, 100), (5, 16), (300, 64)],
                         ids=["row-pairs", "single-rows", "row-pieces", "row-triples", "row-pieces-ragged"])
def test_cpu_chunked_nucleus_matches_the_sorted_reference(v, chunk, monkeypatch):
    """The CPU's chunked top-p search (groups of rows with zero rows padding the last, one row at a
    time, or one row summed piece by piece, with a zero-padded last piece) keeps the sorted
    reference's nucleus, as the whole-batch search does."""
    if jax.default_backend() != "cpu":
        pytest.skip("the chunked nucleus search runs on CPU only")
    monkeypatch.setattr(sampler, "CPU_NUCLEUS_CHUNK", chunk)  # 6 rows of v entries: more than one chunk
    truncate = jax.jit(lambda x, top_p: process_logits(x, 1.0, 0, top_p, True)[1])  # a fresh trace
    for top_p in (0.5, 0.9, 0.999):
        for seed in range(3):
            x = _logits(seed, v)
            ours, ref = np.asarray(truncate(x, top_p)), np.asarray(_sorted_reference(x, 0, top_p))
            assert ((ours == ref) | _boundary(x, 0, top_p)).all()


@jax.jit
def _row_search_and_bisection(row, top_p):
    """(the bisection's bits, the row search's bits, its passes) for one row, with the same masses."""
    return (sampler._bisect_rows(row, top_p),) + sampler._row_nucleus(row, top_p)


def _softmax_np(z):
    return np.asarray(jax.nn.softmax(jnp.asarray(z, jnp.float32)))


_ROWS = {  # name -> a row of probabilities from a seeded generator
    "near-uniform": lambda r: _softmax_np(r.standard_normal(32000) * 0.5 / 0.7),  # bench_model's decode rows
    "zipf": lambda r: _softmax_np(-1.1 * np.log(np.arange(1, 4001)) + 0.01 * r.standard_normal(4000)),
    "peaked": lambda r: _softmax_np(np.concatenate([[12, 10, 9], r.standard_normal(3997)])),
    "ties": lambda r: _softmax_np(np.round(r.standard_normal(1000) * 2)),
    "two-equal": lambda r: _softmax_np(np.concatenate([[5.0, 5.0], r.standard_normal(998) - 20])),
    "one-hot": lambda r: _softmax_np(np.concatenate([[40.0], r.standard_normal(999)])),
    "padded-vocab": lambda r: _softmax_np(np.where(np.arange(1000) < 500, r.standard_normal(1000), NEG)),
    "uniform": lambda r: np.full(1000, 1e-3, np.float32),
}


@pytest.mark.parametrize("name", list(_ROWS))
def test_row_nucleus_search_is_the_bisection_bit_for_bit(name):
    """The CPU's row search (regula falsi within ITP's projection, snapping onto entries) ends on the
    bisection's threshold for every top_p, ties and padded zeros included, within a bisection's passes
    over [0, row max] + its slack and snaps."""
    rng = np.random.default_rng(0)
    for _ in range(3):
        row = jnp.asarray(_ROWS[name](rng))
        bound = int(np.asarray(row.max()).view(np.int32)).bit_length() + sampler._ITP_SLACK + 2 * sampler._MAX_SNAPS
        for top_p in (0.05, 0.5, 0.9, 0.95, 0.999):
            ref, got, passes = _row_search_and_bisection(row, top_p)
            assert int(got) == int(ref), (top_p, int(got), int(ref))
            assert int(passes) <= bound, (top_p, int(passes), bound)


@pytest.mark.parametrize("name", ["near-uniform", "ties", "two-equal", "uniform"])
def test_row_nucleus_search_without_snaps_is_bounded_by_itp(name, monkeypatch):
    """With its snaps off, the row search is ITP's alone: at most a bisection's passes over [0, row max]
    + `_ITP_SLACK` (ties and equal tops, where interpolation gains nothing, reach the bound), and still
    the bisection's threshold."""
    monkeypatch.setattr(sampler, "_MAX_SNAPS", 0)
    # traced here, without snaps (not the module's jitted helper, whose cached trace other tests share)
    search = jax.jit(lambda row, top_p: sampler._row_nucleus(row, top_p))
    bisect = jax.jit(sampler._bisect_rows)
    row = jnp.asarray(_ROWS[name](np.random.default_rng(2)))
    bound = int(np.asarray(row.max()).view(np.int32)).bit_length() + sampler._ITP_SLACK
    for top_p in (0.5, 0.9, 0.999):
        got, passes = search(row, top_p)
        assert int(got) == int(bisect(row, top_p))
        assert int(passes) <= bound, (top_p, int(passes), bound)


def test_row_nucleus_search_takes_about_half_the_bisection_passes_on_decode_rows(monkeypatch):
    """On near-uniform 32K rows (a random model's decode step, as bench_model samples) the search
    takes at most 20 passes at median, where the bisection takes 30: where its speed comes from. Its
    snaps do part of that: without them the same rows take more passes."""
    rng = np.random.default_rng(1)
    rows = [jnp.asarray(_ROWS["near-uniform"](rng)) for _ in range(5)]
    passes = [int(_row_search_and_bisection(row, top_p)[2]) for top_p in (0.9, 0.95) for row in rows]
    assert np.median(passes) <= 20, passes
    monkeypatch.setattr(sampler, "_MAX_SNAPS", 0)
    without_snaps = jax.jit(lambda row, top_p: sampler._row_nucleus(row, top_p)[1])  # traced here, without snaps
    passes_without = [int(without_snaps(row, top_p)) for top_p in (0.9, 0.95) for row in rows]
    assert sum(passes) < sum(passes_without), (passes, passes_without)


def test_top_p_keeps_the_top_token_and_ties():
    x = jnp.array([[5.0, 5.0, 1.0, 0.0], [9.0, 0.0, 0.0, 0.0]])
    out = process_logits(x, 1.0, 0, 0.1, True)[1]
    np.testing.assert_array_equal(np.asarray(out) > NEG, [[True, True, False, False], [True, False, False, False]])


def test_fast_argmax_is_the_first_max():
    x = jnp.array([[1.0, 3.0, 3.0, 0.0], [-1.0, -1.0, -2.0, -5.0], [0.0, -0.0, 0.0, NEG]])
    np.testing.assert_array_equal(fast_argmax(x), jnp.argmax(x, axis=-1))
    y = jax.random.normal(jax.random.key(0), (16, 3001))
    np.testing.assert_array_equal(fast_argmax(y), jnp.argmax(y, axis=-1))


def _qkv(b, t, h, kvh, d, seed=0):
    ks = jax.random.split(jax.random.key(seed), 3)
    return (jax.random.normal(ks[0], (b, t, h, d)), jax.random.normal(ks[1], (b, kvh, t, d)),
            jax.random.normal(ks[2], (b, kvh, t, d)))


@pytest.mark.parametrize("t,chunk", [(20, 1024), (130, 1024), (150, 64)])
def test_causal_attention_matches_one_full_softmax(t, chunk, monkeypatch):
    monkeypatch.setattr(attention, "CAUSAL_BLOCK", 32)  # several blocks (and a ragged last one) at small T
    monkeypatch.setattr(attention, "CAUSAL_MAX_BLOCKS", 4)
    b, h, kvh, d = 2, 4, 2, 8
    q, k, v = _qkv(b, t, h, kvh, d)
    valid = jnp.arange(t)[None] >= jnp.array([[0], [7]])  # row 1 left-padded
    cot = jax.random.normal(jax.random.key(1), q.shape)
    full = lambda q, k, v: jnp.sum(attention.dot_attention(q, k, v, jnp.arange(t), valid) * cot * valid[..., None, None])
    blocked = lambda q, k, v: jnp.sum(attention.causal_attention(q, k, v, valid, chunk) * cot * valid[..., None, None])
    ref_out = attention.dot_attention(q, k, v, jnp.arange(t), valid)
    out = jax.jit(attention.causal_attention, static_argnums=4)(q, k, v, valid, chunk)
    # Softmax over up to t terms of magnitude <= 1 per output, with |v| ~ N(0,1): terms sum <= max|v|.
    tol = reorder_tol(float(jnp.abs(v).max()), t)
    np.testing.assert_allclose(np.asarray(out)[1, 7:], np.asarray(ref_out)[1, 7:], atol=tol)
    np.testing.assert_allclose(np.asarray(out)[0], np.asarray(ref_out)[0], atol=tol)
    grads = [jax.jit(jax.grad(f, argnums=(0, 1, 2)))(q, k, v) for f in (full, blocked)]
    for g_ref, g in zip(*grads):
        scale = float(jnp.abs(g_ref).max()) * d
        np.testing.assert_allclose(np.asarray(g), np.asarray(g_ref), atol=reorder_tol(scale, t))


def _autodiff_softmax_attend(qr, k, v, mask):
    """The plain reference: autodiff through jax.nn.softmax, all fp32."""
    qr, k, v = (x.astype(jnp.float32) for x in (qr, k, v))
    scores = jnp.einsum("bkrd,bksd->bkrs", qr, k) * (qr.shape[-1] ** -0.5)
    return jnp.einsum("bkrs,bksd->bkrd", jax.nn.softmax(jnp.where(mask[:, None], scores, NEG), axis=-1), v)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_attention_vjp_matches_autodiff_through_the_softmax(dtype):
    """`_softmax_attend`'s own VJP (the softmax backward's row sums taken over dO * O) against
    autodiff through a plain softmax: values and all three gradients, with a fully masked row (a pad
    query: a uniform average forward, no gradient into its scores)."""
    b, kvh, r, s, d = 2, 2, 12, 40, 16
    ks = jax.random.split(jax.random.key(3), 5)
    qr, k, v = (jax.random.normal(key, shape).astype(dtype)
                for key, shape in zip(ks, [(b, kvh, r, d), (b, kvh, s, d), (b, kvh, s, d)]))
    mask = jax.random.bernoulli(ks[3], 0.6, (b, r, s)).at[1, 3].set(False)
    cot = jax.random.normal(ks[4], (b, kvh, r, d))
    loss = lambda fn: lambda *x: jnp.sum(fn(*x, mask).astype(jnp.float32) * cot)
    out, ref = attention._softmax_attend(qr, k, v, mask), _autodiff_softmax_attend(qr, k, v, mask)
    grads, ref_grads = (jax.jit(jax.grad(loss(fn), argnums=(0, 1, 2)))(qr, k, v)
                        for fn in (attention._softmax_attend, _autodiff_softmax_attend))
    assert out.dtype == dtype and all(g.dtype == dtype for g in grads)
    # fp32: the two differ only in the order of length-s sums (terms summing to <= max|v| for the
    # output, as in the test above; <= d x the largest gradient for the gradients). bf16: the
    # probabilities and dS enter the matmuls rounded to bf16 (relative 2^-8 each, 2^-7 a product)
    # and each result is rounded once more (2^-8): 3 x 2^-8 of the largest value.
    def tol(ref_max: float, fp32_terms: float) -> float:
        return reorder_tol(fp32_terms, s) if dtype == jnp.float32 else 3 * 2.0 ** -8 * ref_max
    np.testing.assert_allclose(np.asarray(out, np.float32), np.asarray(ref),
                               atol=tol(float(jnp.abs(ref).max()), float(jnp.abs(v).max())))
    for g, g_ref in zip(grads, ref_grads):
        g_max = float(jnp.abs(g_ref).max())
        np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(g_ref), atol=tol(g_max, g_max * d))
    assert float(jnp.abs(grads[0][1, :, 3]).max()) == 0.0   # the pad query's scores got no gradient


def _autodiff_rope(x, cos, sin):
    """The former `layers.apply_rope`: x * cos + rotate_half(x) * sin with rotate_half a concatenation,
    differentiated by JAX."""
    rd = cos.shape[-1]
    cos, sin = cos[:, :, None, :].astype(x.dtype), sin[:, :, None, :].astype(x.dtype)
    x_rot, x_pass = x[..., :rd], x[..., rd:]
    rotated = jnp.concatenate([-x_rot[..., rd // 2:], x_rot[..., :rd // 2]], axis=-1)
    return jnp.concatenate([x_rot * cos + rotated * sin, x_pass], axis=-1)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
@pytest.mark.parametrize("head_dim,rotary_dim", [(32, 32), (16, 4)])
def test_rope_own_vjp_is_autodiff_through_rotate_half_bit_for_bit(dtype, head_dim, rotary_dim):
    """`apply_rope` differentiated computes the rotation by halves with its transpose as the VJP, and
    not differentiated the concatenated form: the same values (both ways) and input gradients as
    autodiff through the rotate-half concatenation, bit for bit (each element is the same two
    products and one sum or difference), at full and partial (Qwen3.5) rotary dims. The tables are
    random, not rope_cos_sin's, so the halves of cos and sin differ and a mixed-up half shows."""
    ks = jax.random.split(jax.random.key(7), 4)
    x = jax.random.normal(ks[0], (2, 9, 3, head_dim)).astype(dtype)
    cot = jax.random.normal(ks[1], x.shape).astype(dtype)
    cos, sin = (jax.random.normal(key, (2, 9, rotary_dim)) for key in ks[2:])

    @functools.partial(jax.jit, static_argnums=0)
    def value_and_input_grad(fn, x):
        out, vjp = jax.vjp(lambda x: fn(x, cos, sin), x)
        return out, vjp(cot)[0]

    ours, ref = value_and_input_grad(layers.apply_rope, x), value_and_input_grad(_autodiff_rope, x)
    undifferentiated = jax.jit(lambda x: layers.apply_rope(x, cos, sin))(x)
    for a, b in zip(ours + (undifferentiated,), ref + ref[:1]):
        assert a.dtype == dtype
        np.testing.assert_array_equal(np.asarray(a, np.float32), np.asarray(b, np.float32))


def test_segments_tile_the_cache_doubling():
    for s in (1, 9, 64, 65, 192, 577, 4096, 20480):
        bounds = segment_bounds(s)
        assert bounds[0][0] == 0 and bounds[-1][1] == s
        assert all(prev[1] == nxt[0] for prev, nxt in zip(bounds, bounds[1:]))
        assert all(hi - lo == max(SEGMENT_MIN, lo) for lo, hi in bounds[:-1])  # each as long as all before
        assert len(bounds) <= max(1, int(np.ceil(np.log2(s / SEGMENT_MIN))) + 1)


def _segmented(k, v, s):
    """k, v [B,KV,S,D] as `KVCache` segments (keys in d-major blocks)."""
    return KVCache(k=tuple(keys_to_blocks(k[:, :, lo:hi].swapaxes(2, 3), key_block(hi - lo, k.shape[-1], k.dtype.itemsize)) for lo, hi in segment_bounds(s)),
                   v=tuple(v[:, :, lo:hi] for lo, hi in segment_bounds(s)))


@pytest.mark.parametrize("t,d", [(1, 8), (5, 8), (1, 64), (5, 64)])  # d 64: the 128-slot segment's keys in 2 blocks
def test_segmented_cache_attention_equals_attention_over_the_whole_cache(t, d):
    b, s, h, kvh = 2, 300, 4, 2   # segments 64, 64, 128, 44
    q, k, v = _qkv(b, s, h, kvh, d, seed=2)
    cache = _segmented(k, v, s)
    kv_valid = jnp.arange(s)[None] >= jnp.array([[0], [3]])
    step = jax.jit(lambda slots, valid, f: attention.cached_attention(q[:, :t], cache.k, cache.v, slots, valid, f, 1024))
    for filled in (5, 12, 64, 65, 129, 256, 257, 299, 300):  # queries at the last written slots
        slots = jnp.arange(filled - t, filled)
        valid = kv_valid & (jnp.arange(s)[None] < filled)
        ref = attention.dot_attention(q[:, :t], k, v, slots, valid)
        # a query that sees no real key (row 1's pads) averages whatever it reads: not compared
        seen = np.asarray(jnp.any(valid[:, None, :] & (jnp.arange(s)[None, None] <= slots[None, :, None]), -1))
        np.testing.assert_allclose(np.asarray(step(slots, valid, filled))[seen], np.asarray(ref)[seen],
                                   atol=reorder_tol(float(jnp.abs(v).max()), s))


def test_a_decode_step_reads_exactly_slots_read_slots():
    """`slots_read` (the bandwidth floor's KV count) is what a one-token step really reads: a NaN
    value in the last slot it counts reaches the output (an unread slot's probability is 0, but
    0 * NaN is NaN), one in the first slot past it does not."""
    b, s, h, kvh, d = 1, 300, 2, 1, 4   # segments 64, 64, 128, 44
    q, k, v = _qkv(b, s, h, kvh, d, seed=6)
    step = jax.jit(lambda c, f: attention.cached_attention(q[:, :1], c.k, c.v, jnp.array([f - 1]),
                                                           jnp.arange(s)[None] < f, f, 1024))
    for filled in (1, 64, 65, 128, 129, 256, 257, 300):
        n = slots_read(s, filled)
        assert filled <= n <= s
        assert bool(jnp.isnan(step(_segmented(k, v.at[:, :, n - 1].set(jnp.nan), s), filled)).any())
        if n < s:
            assert bool(jnp.isfinite(step(_segmented(k, v.at[:, :, n].set(jnp.nan), s), filled)).all())


@pytest.mark.parametrize("d", [4, 64])  # d 64: the 128-slot segment's keys in 2 blocks
@pytest.mark.parametrize("t,index", [(1, 0), (1, 63), (1, 64), (1, 199), (1, 299), (7, 0), (7, 60), (7, 250), (300, 0)])
def test_write_kv_writes_exactly_its_slots_into_the_segments(t, index, d):
    b, s, kvh = 2, 300, 2
    _, k, v = _qkv(b, s, 2, kvh, d, seed=3)
    cache = _segmented(k, v, s)
    new_k, new_v = (jax.random.normal(jax.random.key(i), (b, t, kvh, d)) for i in (4, 5))
    out = jax.jit(attention.write_kv)(cache, new_k, new_v, jnp.int32(index))
    want_k = k.at[:, :, index:index + t].set(new_k.swapaxes(1, 2))
    want_v = v.at[:, :, index:index + t].set(new_v.swapaxes(1, 2))
    got_k = jnp.concatenate([keys_from_blocks(x) for x in out.k], axis=3).swapaxes(2, 3)
    np.testing.assert_array_equal(np.asarray(got_k), np.asarray(want_k))
    np.testing.assert_array_equal(np.asarray(jnp.concatenate(out.v, axis=2)), np.asarray(want_v))
    stacked = jax.tree.map(lambda x: jnp.stack([x, x + 1]), cache)  # scanned layers: one group's slice only
    out1 = jax.jit(attention.write_kv, static_argnums=())(stacked, new_k, new_v, jnp.int32(index), jnp.int32(1))
    np.testing.assert_array_equal(np.asarray(jnp.concatenate(out1.v, axis=3)[1]), np.asarray(want_v + 0)
                                  + np.asarray((jnp.arange(s) < index) | (jnp.arange(s) >= index + t))[:, None])
    np.testing.assert_array_equal(np.asarray(jnp.concatenate(out1.v, axis=3)[0]), np.asarray(v))
    got_k1 = jnp.stack([jnp.concatenate([keys_from_blocks(x[g]) for x in out1.k], axis=-1) for g in (0, 1)]).swapaxes(-1, -2)
    np.testing.assert_array_equal(np.asarray(got_k1[1]), np.asarray(want_k + 0)
                                  + np.asarray((jnp.arange(s) < index) | (jnp.arange(s) >= index + t))[:, None])
    np.testing.assert_array_equal(np.asarray(got_k1[0]), np.asarray(k))


def test_cpu_key_blocks_hold_at_most_16_kib_of_keys_and_round_trip():
    """On CPU a segment's keys are [B, KV, J, D, C] blocks: C the most slots (64 at least) whose keys
    fit 16 KiB; a segment that C does not divide is one block. The blocks round-trip exactly."""
    assert jax.default_backend() == "cpu"
    b, s, kvh = 2, 300, 2   # segments 64, 64, 128, 44
    for d, blocks in ((64, [1, 1, 2, 1]), (32, [1, 1, 1, 1]), (8, [1, 1, 1, 1])):
        _, k, v = _qkv(b, s, 2, kvh, d, seed=7)
        cache = _segmented(k, v, s)
        assert [1 if x.ndim == 4 else x.shape[2] for x in cache.k] == blocks
        assert all(x.ndim == (4 if n == 1 else 5) for x, n in zip(cache.k, blocks))
        whole = jnp.concatenate([keys_from_blocks(x) for x in cache.k], axis=3)
        np.testing.assert_array_equal(np.asarray(whole), np.asarray(k.swapaxes(2, 3)))
    assert key_block(4096, 64, 4) == 64 and key_block(4096, 32, 4) == 128 and key_block(4096, 128, 2) == 64


# vocab_block 16 of 50 columns: blocks 16, 16, 16, 2, the padded columns from 45 inside the third
@pytest.mark.parametrize("chunk_tokens,valid,vocab_block", [(4096, None, None), (24, None, None), (24, 45, None),
                                                            (7, 50, None), (24, 45, 16), (7, None, 16)])
def test_fused_ce_matches_autodiff_through_token_logprobs(chunk_tokens, valid, vocab_block):
    b, t, e, v = 3, 19, 16, 50
    ks = jax.random.split(jax.random.key(3), 4)
    h = jax.random.normal(ks[0], (b, t, e))
    w = jax.random.normal(ks[1], (e, v)) * 0.3
    tg = jax.random.randint(ks[2], (b, t), 0, valid or v)
    wt = (jax.random.uniform(ks[3], (b, t)) > 0.3).astype(jnp.float32) * 0.7

    def ref(h, w, wt):
        return -jnp.sum(token_logprobs(h, w, tg, chunk_size=t, valid_vocab_size=valid)[0] * wt)

    fused = lambda h, w, wt: fused_ce_sum(h, w, tg, wt, chunk_tokens=chunk_tokens, valid_vocab_size=valid,
                                          vocab_block=vocab_block)
    (l_ref, g_ref), (l, g) = (jax.value_and_grad(f, argnums=(0, 1, 2))(h, w, wt) for f in (ref, fused))
    logit_scale = float(jnp.abs(h).max() * jnp.abs(w).max()) * e
    np.testing.assert_allclose(float(l), float(l_ref), atol=reorder_tol(logit_scale * b * t, v + b * t))
    for a, r in zip(g, g_ref):  # dh, dw: sums of <= b*t*v terms bounded by the inputs' magnitudes
        scale = float(jnp.abs(h).max() + jnp.abs(w).max()) * b * t
        np.testing.assert_allclose(np.asarray(a), np.asarray(r), atol=reorder_tol(scale, v + b * t))


def test_head_weight_grad_is_the_same_product_on_every_backend(monkeypatch):
    from hr1_jax.models import logprobs

    ks = jax.random.split(jax.random.key(5), 2)
    h, dlogits = jax.random.normal(ks[0], (37, 16)), jax.random.normal(ks[1], (37, 50))
    ref = np.asarray(h, np.float64).T @ np.asarray(dlogits, np.float64)
    tol = reorder_tol(float(jnp.abs(h).max() * jnp.abs(dlogits).max()) * 37, 37)
    for backend in ("cpu", "tpu"):   # a transposed copy first on CPU, one contraction elsewhere
        monkeypatch.setattr(jax, "default_backend", lambda backend=backend: backend)
        got = jax.jit(logprobs._head_weight_grad)(h, dlogits)
        assert got.shape == (16, 50) and got.dtype == jnp.float32
        np.testing.assert_allclose(np.asarray(got), ref, atol=tol)


def test_head_logits_values_and_gradients_on_every_backend(monkeypatch):
    from hr1_jax.models import logprobs

    ks = jax.random.split(jax.random.key(6), 3)
    h, w, ct = jax.random.normal(ks[0], (3, 7, 16)), jax.random.normal(ks[1], (16, 50)), jax.random.normal(ks[2], (3, 7, 50))
    h64, w64, ct64 = (np.asarray(x, np.float64) for x in (h, w, ct))
    ref_dh, ref_dw = ct64 @ w64.T, np.einsum("bte,btv->ev", h64, ct64)
    hm, wm, cm = (float(jnp.abs(x).max()) for x in (h, w, ct))
    for backend in ("cpu", "tpu"):   # its own VJP on CPU, autodiff elsewhere
        monkeypatch.setattr(jax, "default_backend", lambda backend=backend: backend)
        logits, vjp = jax.vjp(jax.jit(lambda h, w: logprobs._head_logits(h, w)), h, w)
        dh, dw = vjp(ct)
        assert logits.dtype == jnp.float32 and dh.shape == h.shape and dw.shape == w.shape
        # sums of 16 (logits), 50 (dh) and 21 (dw) products bounded by the inputs' magnitudes
        np.testing.assert_allclose(np.asarray(logits), h64 @ w64, atol=reorder_tol(16 * hm * wm, 16))
        np.testing.assert_allclose(np.asarray(dh), ref_dh, atol=reorder_tol(50 * cm * wm, 50))
        np.testing.assert_allclose(np.asarray(dw), ref_dw, atol=reorder_tol(21 * hm * cm, 21))


def test_token_logprob_equals_the_gathered_log_softmax():
    x = jax.random.normal(jax.random.key(7), (5, 1000)) * 4
    x = x.at[1, 500:].set(NEG)   # masked ids, as the sampler's truncation leaves them
    tok = jnp.array([0, 499, 7, 999, 3])
    ref = jnp.take_along_axis(jax.nn.log_softmax(x, -1), tok[:, None], -1)[:, 0]
    # the max shift is exact; the two may order the length-V sum of exp(x - max) (>= 1) differently,
    # which moves its log by at most V * eps
    np.testing.assert_allclose(np.asarray(jax.jit(token_logprob)(x, tok)), np.asarray(ref), rtol=0,
                               atol=x.shape[-1] * float(np.finfo(np.float32).eps))
