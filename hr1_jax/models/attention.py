"""Full (softmax) attention: Qwen3 GQA with q/k RMSNorm, and Qwen3.5 gated attention.

Qwen3.5 (`cfg.gated_attention`): q_proj emits, per head, [query | gate] (the split is inside each
head, matching HF's view(..., heads, 2*head_dim).chunk(2)); RoPE covers only the first
`rotary_dim` dims; the attention output is multiplied by sigmoid(gate) before o_proj.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from hr1_jax.models.cache import KVCache
from hr1_jax.models.layers import DTYPE, Dense, RMSNorm, apply_rope

# Finite mask value: a fully masked row (a pad query) gets a uniform softmax instead of NaN.
_MASKED = -1e30


def dot_attention(q, k, v, q_slots, kv_valid):
    """Causal GQA. q [B,T,H,D]; k, v [B,S,KV,D]; q_slots int [T] (slot of each query);
    kv_valid bool [B,S]. A query at slot i sees valid slots j <= i. Returns [B,T,H,D]."""
    b, t, h, d = q.shape
    s, kvh = k.shape[1], k.shape[2]
    q = q.reshape(b, t, kvh, h // kvh, d)
    scores = jnp.einsum("btkgd,bskd->bkgts", q, k, preferred_element_type=jnp.float32) * (d ** -0.5)
    mask = (jnp.arange(s)[None, :] <= q_slots[:, None])[None] & kv_valid[:, None, :]  # [B,T,S]
    scores = jnp.where(mask[:, None, None], scores, _MASKED)
    probs = jax.nn.softmax(scores, axis=-1).astype(v.dtype)
    out = jnp.einsum("bkgts,bskd->btkgd", probs, v)
    return out.reshape(b, t, h, d)


def chunked_dot_attention(q, k, v, q_slots, kv_valid, q_chunk: int):
    """`dot_attention` over blocks of `q_chunk` queries (exact: each block sees all keys), so the
    score matrix held at once is [q_chunk, S] instead of [T, S]; each block is rematerialised in
    the backward pass, keeping long-sequence training memory O(T * q_chunk)."""
    b, t, h, d = q.shape
    if t <= q_chunk:
        return dot_attention(q, k, v, q_slots, kv_valid)
    pad = (-t) % q_chunk
    n = (t + pad) // q_chunk
    qb = jnp.pad(q, [(0, 0), (0, pad), (0, 0), (0, 0)]).reshape(b, n, q_chunk, h, d)
    slots = jnp.pad(q_slots, (0, pad), mode="edge").reshape(n, q_chunk)
    block = jax.checkpoint(lambda xs: dot_attention(xs[0], k, v, xs[1], kv_valid))
    out = jax.lax.map(block, (jnp.moveaxis(qb, 1, 0), slots))       # [N,B,C,H,D]
    return jnp.moveaxis(out, 0, 1).reshape(b, n * q_chunk, h, d)[:, :t]


def write_kv(cache: KVCache, k, v, index, group=None) -> KVCache:
    """Write this call's keys/values [B,T,KV,D] at slot `index`; with `group`, into that layer's
    slice of a cache stacked over layer groups [G,B,S,KV,D]. Only the new slots are written, so a
    decode step updates the (carried) cache in place instead of copying a layer's whole buffer."""
    start = (0, index, 0, 0) if group is None else (group, 0, index, 0, 0)
    shape = k.shape if group is None else (1,) + k.shape
    write = lambda buf, new: jax.lax.dynamic_update_slice(buf, new.astype(buf.dtype).reshape(shape), start)
    return KVCache(k=write(cache.k, k), v=write(cache.v, v))


class Attention(nnx.Module):
    def __init__(self, cfg, *, rngs: nnx.Rngs):
        pdt, dt = DTYPE[cfg.param_dtype], DTYPE[cfg.dtype]
        kw = dict(param_dtype=pdt, dtype=dt, rngs=rngs)
        self.num_heads, self.num_kv_heads, self.head_dim = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        self.gated = cfg.gated_attention
        self.q_chunk = cfg.attn_chunk_size
        q_out = cfg.num_heads * cfg.head_dim * (2 if self.gated else 1)
        self.q_proj = Dense(cfg.hidden_size, q_out, ("embed", "heads"), **kw)
        self.k_proj = Dense(cfg.hidden_size, cfg.num_kv_heads * cfg.head_dim, ("embed", "kv_heads"), **kw)
        self.v_proj = Dense(cfg.hidden_size, cfg.num_kv_heads * cfg.head_dim, ("embed", "kv_heads"), **kw)
        self.o_proj = Dense(cfg.num_heads * cfg.head_dim, cfg.hidden_size, ("heads", "embed"), **kw)
        nkw = dict(zero_centred=cfg.zero_centred_norms, param_dtype=pdt)
        self.q_norm = RMSNorm(cfg.head_dim, cfg.rms_norm_eps, **nkw)
        self.k_norm = RMSNorm(cfg.head_dim, cfg.rms_norm_eps, **nkw)

    def __call__(self, x, cos, sin, mask, cache: KVCache | None, index, group=None):
        """x [B,T,E]; cos/sin [B,T,rotary_dim]; mask bool [B,T] (real tokens) without a cache, or
        the cache's updated kv_mask [B,S] with one; index = first slot written by this call;
        group = this layer's index into a cache stacked over layer groups (scanned layers)."""
        b, t, _ = x.shape
        q = self.q_proj(x).reshape(b, t, self.num_heads, -1)
        if self.gated:
            q, gate = q[..., :self.head_dim], q[..., self.head_dim:]
        k = self.k_proj(x).reshape(b, t, self.num_kv_heads, self.head_dim)
        v = self.v_proj(x).reshape(b, t, self.num_kv_heads, self.head_dim)
        q = apply_rope(self.q_norm(q), cos, sin)
        k = apply_rope(self.k_norm(k), cos, sin)
        if cache is not None:
            cache = write_kv(cache, k, v, index, group)
            k_all, v_all = (cache.k, cache.v) if group is None else (cache.k[group], cache.v[group])
            k, v = k_all.astype(q.dtype), v_all.astype(q.dtype)
        out = chunked_dot_attention(q, k, v, index + jnp.arange(t), mask, self.q_chunk)
        out = out.reshape(b, t, -1)
        if self.gated:
            out = out * jax.nn.sigmoid(gate.reshape(b, t, -1))
        return self.o_proj(out), cache
