"""Per-token log-probs (and entropy) without materialising full [B, T, V] fp32 logits.

With a 248K vocabulary, fp32 logits cost ~1 MB per token, so a 32K-token sequence would need 32 GB
for one copy (and the backward pass keeps another). We instead walk the sequence in chunks of
`chunk_size` positions (and optionally the vocabulary in chunks of `vocab_chunk_size` with an online
log-sum-exp), each chunk under `jax.checkpoint`, so forward *and* backward hold at most one
[B, chunk, V] (or [B, chunk, vocab_chunk]) logits block at a time; the backward recomputes it.

Numerics: logits are computed with fp32 accumulation (`preferred_element_type`), divided by
`temperature`, and reduced in fp32. `temperature` lets a trainer score tokens under the same
temperature-scaled policy the sampler drew from. `valid_vocab_size` restricts the softmax to the
tokenizer's ids, as the sampler does (`sampler.mask_padded_vocab`): padded head columns carry no mass.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

# Columns of the fused CE's logits gradient per block on CPU: an 8 MB [1024, 2048] fp32 block at the
# 20m bench config, whose step ran 2-3% faster than with the whole vocabulary at once, as fast as with
# 1024 columns and faster than with 4096-8192 (benchmarks/README.md, eighteenth session)
CPU_VOCAB_BLOCK = 2048
_NEG = -1e30  # finite "minus infinity": keeps exp()/gradients NaN-free for padded vocab columns


def _head_logits(h, w):
    """fp32 logits [..., V] of h [..., E] under the head w [E, V], as one 2-D matmul. On CPU with its
    own VJP: the head weight gradient by `_head_weight_grad`, the hidden-state gradient as g w^T, both
    from fp32 cotangents (autodiff took the slow path for both: benchmarks/bench_ce.py, its logprobs table)."""
    shape = h.shape
    h2 = h.reshape(-1, shape[-1])
    logits = _head_logits_2d(h2, w) if jax.default_backend() == "cpu" else \
        jnp.dot(h2, w, preferred_element_type=jnp.float32)
    return logits.reshape(shape[:-1] + (w.shape[-1],))


@jax.custom_vjp
def _head_logits_2d(h, w):
    return jnp.dot(h, w, preferred_element_type=jnp.float32)


def _head_logits_2d_fwd(h, w):
    return _head_logits_2d(h, w), (h, w)


def _head_logits_2d_bwd(res, g):
    h, w = res
    dh = jnp.einsum("nv,ev->ne", g, w.astype(g.dtype), preferred_element_type=jnp.float32)
    return dh.astype(h.dtype), _head_weight_grad(h.astype(g.dtype), g).astype(w.dtype)


_head_logits_2d.defvjp(_head_logits_2d_fwd, _head_logits_2d_bwd)


def _full_vocab(h, w, tgt, temperature, with_entropy, valid):
    logits = _head_logits(h, w) / temperature  # [B, c, V]
    if valid < logits.shape[-1]:
        logits = jnp.where(jnp.arange(logits.shape[-1]) < valid, logits, _NEG)
    lse = jax.nn.logsumexp(logits, axis=-1)
    logp = jnp.take_along_axis(logits, tgt[..., None], axis=-1)[..., 0] - lse
    if not with_entropy:
        return logp, jnp.zeros_like(logp)
    probs = jnp.exp(logits - lse[..., None])
    return logp, lse - jnp.sum(probs * logits, axis=-1)


def _chunked_vocab(h, w, tgt, temperature, with_entropy, vocab_chunk, v):
    """Online log-sum-exp over vocab chunks of the first `v` columns: carry (max m, sum
    s = Σe^(l-m), t = Σe^(l-m)·l, target logit); then lse = m + log s and entropy = lse - t/s."""
    n = -(-v // vocab_chunk)
    wp = jnp.pad(w[:, :v], ((0, 0), (0, n * vocab_chunk - v)))

    @jax.checkpoint
    def body(carry, j):
        m, s, t, tl = carry
        wj = jax.lax.dynamic_slice_in_dim(wp, j * vocab_chunk, vocab_chunk, axis=1)
        ids = j * vocab_chunk + jnp.arange(vocab_chunk)
        logits = _head_logits(h, wj) / temperature
        logits = jnp.where(ids < v, logits, _NEG)
        m_new = jnp.maximum(m, logits.max(axis=-1))
        scale = jnp.exp(m - m_new)
        e = jnp.exp(logits - m_new[..., None])
        s = s * scale + e.sum(axis=-1)
        if with_entropy:
            t = t * scale + jnp.sum(e * jnp.where(ids < v, logits, 0.0), axis=-1)
        local = tgt - j * vocab_chunk
        inside = (local >= 0) & (local < vocab_chunk)
        picked = jnp.take_along_axis(logits, jnp.clip(local, 0, vocab_chunk - 1)[..., None], axis=-1)[..., 0]
        tl = tl + jnp.where(inside, picked, 0.0)
        return (m_new, s, t, tl), None

    shape = tgt.shape
    init = (jnp.full(shape, _NEG, jnp.float32), jnp.zeros(shape, jnp.float32),
            jnp.zeros(shape, jnp.float32), jnp.zeros(shape, jnp.float32))
    (m, s, t, tl), _ = jax.lax.scan(body, init, jnp.arange(n))
    lse = m + jnp.log(s)
    ent = lse - t / s if with_entropy else jnp.zeros_like(lse)
    return tl - lse, ent


@functools.partial(jax.jit, static_argnames=("chunk_size", "vocab_chunk_size", "with_entropy",
                                             "valid_vocab_size"))
def token_logprobs(hidden: jax.Array, head_weight: jax.Array, targets: jax.Array, *,
                   chunk_size: int = 1024, vocab_chunk_size: int | None = None,
                   temperature: float | jax.Array = 1.0, with_entropy: bool = False,
                   valid_vocab_size: int | None = None):
    """log p(targets[b, t] | hidden[b, t]) under softmax(hidden @ head_weight / temperature).

    hidden [B, T, E] (final-norm hidden states, activation dtype), head_weight [E, V],
    targets int [B, T]; the softmax covers ids < valid_vocab_size (None: all V). Returns (logp fp32
    [B, T], entropy fp32 [B, T]; zeros unless `with_entropy`). Differentiable w.r.t. hidden and
    head_weight.
    """
    b, t, e = hidden.shape
    c = max(1, min(chunk_size, t))
    n = -(-t // c)
    pad = n * c - t
    h = jnp.pad(hidden, ((0, 0), (0, pad), (0, 0))).reshape(b, n, c, e).swapaxes(0, 1)
    tg = jnp.pad(targets, ((0, 0), (0, pad))).reshape(b, n, c).swapaxes(0, 1)
    w = head_weight.astype(hidden.dtype)
    temperature = jnp.asarray(temperature, jnp.float32)

    valid = min(w.shape[1], valid_vocab_size or w.shape[1])
    full_vocab = vocab_chunk_size is None or vocab_chunk_size >= w.shape[1]

    def one(args):
        hc, tc = args
        if full_vocab:
            return _full_vocab(hc, w, tc, temperature, with_entropy, valid)
        return _chunked_vocab(hc, w, tc, temperature, with_entropy, vocab_chunk_size, valid)

    if n == 1 and full_vocab:
        # One chunk holds the whole [B, T, V] block anyway: keep it for the backward instead of
        # recomputing the head matmul (remat would cost a 4th head pass for no memory gain).
        logp, ent = one((h[0], tg[0]))
        logp, ent = logp[None], ent[None]
    else:
        logp, ent = jax.lax.map(jax.checkpoint(one), (h, tg))
    unchunk = lambda x: x.swapaxes(0, 1).reshape(b, n * c)[:, :t]
    return unchunk(logp), unchunk(ent)


def sequence_logprobs(model, input_ids: jax.Array, attention_mask: jax.Array | None = None, *,
                      chunk_size: int = 1024, vocab_chunk_size: int | None = None,
                      temperature: float | jax.Array = 1.0, with_entropy: bool = False,
                      valid_vocab_size: int | None = None):
    """Log-probs of each next token: position t scores input_ids[:, t+1]. Returns ([B, T-1] x2).

    Uses the model's final hidden states and LM head (`model.hidden_states`, `model.lm_head_weight`),
    never its full logits. Positions whose target is padding are the caller's to mask.
    """
    hidden, _ = model.hidden_states(input_ids, attention_mask=attention_mask)
    return token_logprobs(hidden[:, :-1], model.lm_head_weight(), input_ids[:, 1:], chunk_size=chunk_size,
                          vocab_chunk_size=vocab_chunk_size, temperature=temperature,
                          with_entropy=with_entropy, valid_vocab_size=valid_vocab_size)


def _head_weight_grad(h, dlogits):
    """h^T dlogits [E, V] in fp32, for h [N, E] and dlogits [N, V]. On CPU h^T is made a copy first:
    as one contraction over both operands' leading axis, XLA:CPU runs it off its fast GEMM path
    (the 20m CE gradient took 1.2-1.4x as long: benchmarks/bench_ce.py); the copy is 1/V of the work."""
    if jax.default_backend() == "cpu":
        h_t = jax.lax.optimization_barrier(h.T)  # the barrier keeps XLA from folding it back into the dot
        return jnp.dot(h_t, dlogits.astype(h.dtype), preferred_element_type=jnp.float32)
    return jnp.einsum("ne,nv->ev", h, dlogits.astype(h.dtype), preferred_element_type=jnp.float32)


def _ce_chunk(h, w, tgt, wt, valid: int, vocab_block: int):
    """One chunk of `fused_ce_sum`: h [B,c,E], tgt/wt [B,c]. Returns (log-probs [B,c], d/dh
    [B,c,E], d/dw [E,V] fp32) of sum(-wt * logp), the gradients from the chunk's own softmax.
    The logits gradient is made and used a block of `vocab_block` columns at a time, so each block
    feeds both gradient matmuls while it is still in cache (written whole, the 20m chunk's [1024, V]
    block made three passes over main memory)."""
    shape = h.shape
    h = h.reshape(-1, shape[-1])  # 2-D matmuls: XLA:CPU's fast GEMM path (not so for [B,c,E] dots)
    tgt, wt = tgt.reshape(-1), wt.reshape(-1)
    v = w.shape[-1]
    logits = jnp.dot(h, w, preferred_element_type=jnp.float32)
    if valid < v:
        logits = jnp.where(jnp.arange(v) < valid, logits, _NEG)
    lse = jax.nn.logsumexp(logits, axis=-1, keepdims=True)
    # the target's logit by a gather, not a masked sum over the chunk: on XLA:CPU the mask was a
    # [c, V] pass written out for the library reduction after it (~7% of the 20m CE train step)
    logp = jnp.take_along_axis(logits, tgt[..., None], axis=-1)[..., 0] - lse[..., 0]
    dh, dws = 0.0, []
    for lo in range(0, v, vocab_block):
        hi = min(lo + vocab_block, v)
        ids = jnp.arange(lo, hi)
        dl = (jnp.exp(logits[:, lo:hi] - lse) - (ids == tgt[..., None])) * wt[..., None]  # d(-wt*logp)/dlogits
        if valid < hi:  # as autodiff through the mask: no gradient into padded columns
            dl = jnp.where(ids < valid, dl, 0.0)
        dh = dh + jnp.einsum("nv,ev->ne", dl.astype(w.dtype), w[:, lo:hi], preferred_element_type=jnp.float32)
        dws.append(_head_weight_grad(h, dl))
    return logp.reshape(shape[:-1]), dh.astype(h.dtype).reshape(shape), jnp.concatenate(dws, axis=1)


def _ce_forward(hidden, head_weight, targets, weights, chunk_tokens, valid, vocab_block):
    b, t, e = hidden.shape
    c = max(1, min(chunk_tokens // b, t))  # positions per chunk: ~chunk_tokens rows of logits
    n = -(-t // c)
    pad = n * c - t
    chunks = lambda x: jnp.pad(x, [(0, 0), (0, pad)] + [(0, 0)] * (x.ndim - 2)).reshape(
        (b, n, c) + x.shape[2:]).swapaxes(0, 1)
    w = head_weight.astype(hidden.dtype)

    def body(dw, xs):
        logp, dh, dw_c = _ce_chunk(*xs[:1], w, *xs[1:], valid, vocab_block)
        return dw + dw_c, (logp, dh)

    dw0 = jnp.zeros(w.shape, jnp.float32)
    dw, (logp, dh) = jax.lax.scan(body, dw0, (chunks(hidden), chunks(targets), chunks(weights)))
    unchunk = lambda x: x.swapaxes(0, 1).reshape((b, n * c) + x.shape[3:])[:, :t]
    logp = unchunk(logp)
    return -jnp.sum(logp * weights), (unchunk(dh), dw.astype(head_weight.dtype), logp)


@functools.partial(jax.custom_vjp, nondiff_argnums=(4, 5, 6))
def _fused_ce(hidden, head_weight, targets, weights, chunk_tokens, valid, vocab_block):
    return _ce_forward(hidden, head_weight, targets, weights, chunk_tokens, valid, vocab_block)[0]


def _fused_ce_bwd(chunk_tokens, valid, vocab_block, res, g):
    dh, dw, logp = res
    # g is the fp32 loss cotangent: scaling by it must keep each gradient in its primal's dtype (a bf16
    # head's fp32 gradient would turn AdamW's moments fp32 after the first step: a second compile)
    return (g * dh).astype(dh.dtype), (g * dw).astype(dw.dtype), None, -g * logp


_fused_ce.defvjp(_ce_forward, _fused_ce_bwd)


@functools.partial(jax.jit, static_argnames=("chunk_tokens", "valid_vocab_size", "vocab_block"))
def fused_ce_sum(hidden: jax.Array, head_weight: jax.Array, targets: jax.Array, weights: jax.Array, *,
                 chunk_tokens: int = 1024, valid_vocab_size: int | None = None,
                 vocab_block: int | None = None) -> jax.Array:
    """sum(weights * -log p(targets | hidden)) under softmax(hidden @ head_weight) over ids <
    valid_vocab_size: the LM head and cross-entropy fused, walking the sequence in chunks of about
    `chunk_tokens` tokens (whole rows of the batch: chunk_tokens // B positions; 1024 tokens were
    the fastest at the 20M bench config on XLA:CPU, a [1024, 32000] fp32 block). A loss linear in the log-probs has its logits gradient in closed form
    (weight * (softmax - onehot)), so each chunk computes its logits once and turns them straight
    into d/dhidden and a d/dhead_weight partial sum: no [B, T, V] logits are kept for the backward
    and the head matmul is not recomputed (3 head matmuls, as unfused autodiff). hidden [B,T,E],
    head_weight [E,V], targets int [B,T], weights fp32 [B,T] (their gradient is -logp). Returns an
    fp32 scalar. The logits gradient is taken `vocab_block` columns at a time (None: CPU_VOCAB_BLOCK
    on CPU, the whole vocabulary elsewhere)."""
    v = head_weight.shape[1]
    valid = min(v, valid_vocab_size or v)
    block = vocab_block or (CPU_VOCAB_BLOCK if jax.default_backend() == "cpu" else v)
    return _fused_ce(hidden, head_weight, targets, weights.astype(jnp.float32), chunk_tokens, valid, block)
