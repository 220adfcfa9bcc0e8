"""Decode cache pytree: KV buffers for attention layers, conv + recurrent state for GDN layers.

All rows share one write index (`index` slots written so far); left padding is tracked per slot in
`kv_mask` so padded slots are never attended to, and `next_pos` holds each row's next RoPE position
(real tokens only), so a left-padded row is positioned exactly like the same row unpadded.
Writing past `max_len` slots is not checked inside jit (the sampler sizes the cache).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct


@struct.dataclass
class KVCache:
    k: jax.Array  # [B, KV, S, D]: head-major, as the decode step's attention reads it
    v: jax.Array  # [B, KV, S, D]


@struct.dataclass
class GDNCache:
    conv: jax.Array   # [B, K-1, conv_dim] fp32: the last K-1 (masked) conv inputs
    state: jax.Array  # [B, Hv, Dk, Dv] fp32 recurrent state


@struct.dataclass
class Cache:
    index: jax.Array     # int32 []: slots written so far (same for every row)
    kv_mask: jax.Array   # bool [B, S]: slot holds a real (non-pad) token
    next_pos: jax.Array  # int32 [B]: RoPE position of each row's next real token
    layers: tuple        # per layer: KVCache (full_attention) or GDNCache (linear_attention)

    @property
    def max_len(self) -> int:
        return self.kv_mask.shape[1]


def init_cache(cfg, batch: int, max_len: int, dtype=jnp.bfloat16) -> Cache:
    """An empty cache for `cfg` (a ModelConfig): KV in `dtype`; GDN conv and recurrent state in fp32
    (small, and exact for any activation dtype)."""
    layers = []
    for kind in cfg.layer_types:
        if kind == "full_attention":
            shape = (batch, cfg.num_kv_heads, max_len, cfg.head_dim)
            layers.append(KVCache(k=jnp.zeros(shape, dtype), v=jnp.zeros(shape, dtype)))
        else:
            conv_dim = 2 * cfg.linear_num_key_heads * cfg.linear_key_head_dim \
                + cfg.linear_num_value_heads * cfg.linear_value_head_dim
            layers.append(GDNCache(
                conv=jnp.zeros((batch, cfg.linear_conv_kernel_dim - 1, conv_dim), jnp.float32),
                state=jnp.zeros((batch, cfg.linear_num_value_heads, cfg.linear_key_head_dim,
                                 cfg.linear_value_head_dim), jnp.float32)))
    return Cache(index=jnp.zeros((), jnp.int32), kv_mask=jnp.zeros((batch, max_len), bool),
                 next_pos=jnp.zeros((batch,), jnp.int32), layers=tuple(layers))
