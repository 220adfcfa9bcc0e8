"""Decode cache pytree: KV buffers for attention layers, conv + recurrent state for GDN layers.

An attention layer's K/V slots are held in segments (`segment_bounds`: 64, 64, 128, 256, ... slots,
each segment its own buffer), so a decode step attends only the segments holding written slots and
reads each in place: a slice of one long buffer is copied before every matmul on XLA:CPU, which
cost more than attending the whole buffer. Keys are stored d-major ([.., D, L]), so a step's scores
are [rows, D] x [D, L] matmuls reading the keys in place, as its value reads ([rows, L] x [L, D])
are; on CPU a segment with more keys than `CPU_KEY_BLOCK_BYTES` holds them in blocks of C slots
([.., L / C, D, C], `key_block`), its scores one [rows, D] x [D, C] matmul batched over the blocks.

All rows share one write index (`index` slots written so far); left padding is tracked per slot in
`kv_mask` so padded slots are never attended to, and `next_pos` holds each row's next RoPE position
(real tokens only), so a left-padded row is positioned exactly like the same row unpadded.
Writing past `max_len` slots is not checked inside jit (the sampler sizes the cache).
"""
from __future__ import annotations

import bisect

import jax
import jax.numpy as jnp
from flax import struct


SEGMENT_MIN = 64  # slots in the first segment; each later one holds as many as all before it
# Bytes of keys per d-major key block on XLA:CPU: in a profiled 20m decode step, the scores read
# 64-slot blocks of 64-dim fp32 keys (16 KiB each) faster per byte than one matmul over a 128- or
# 256-slot segment; a segment whose keys fit one block stays one block (no batching to pay for).
# Other backends keep a segment's keys in one block (minor dimension = the segment's slots, not a
# half-filled TPU lane).
CPU_KEY_BLOCK_BYTES = 16 * 1024


def key_block(slots: int, head_dim: int, itemsize: int) -> int:
    """Slots per key block of a `slots`-slot segment: on CPU the most slots, a power-of-two multiple
    of SEGMENT_MIN dividing `slots`, whose keys fit CPU_KEY_BLOCK_BYTES (SEGMENT_MIN at least);
    else, and where SEGMENT_MIN does not divide `slots`, all of them."""
    if jax.default_backend() != "cpu":
        return slots
    block = SEGMENT_MIN
    while block * 2 * head_dim * itemsize <= CPU_KEY_BLOCK_BYTES and slots % (block * 2) == 0:
        block *= 2
    return block if slots % block == 0 else slots


def keys_to_blocks(k, c: int):
    """A layer's d-major keys [B, KV, D, L] in blocks of c slots: [B, KV, L / c, D, c], or
    unchanged where c == L (a segment held in one block keeps its 4-D layout)."""
    n = k.shape[-1]
    if c == n:
        return k
    return jnp.swapaxes(k.reshape(k.shape[:-1] + (n // c, c)), -3, -2)


def keys_from_blocks(k):
    """Inverse of `keys_to_blocks` for one layer's segment: [B, KV, J, D, C] -> [B, KV, D, J * C]."""
    if k.ndim == 4:
        return k
    j, d, c = k.shape[-3:]
    return jnp.swapaxes(k, -3, -2).reshape(k.shape[:-3] + (d, j * c))


def segment_bounds(max_len: int) -> tuple[tuple[int, int], ...]:
    """[start, end) slots of each KV segment of a `max_len`-slot cache: at most ~2x the written
    slots are read per step, from log2(max_len / SEGMENT_MIN) + 1 segments at most."""
    bounds, lo = [], 0
    while lo < max_len:
        hi = min(max_len, lo + max(SEGMENT_MIN, lo))
        bounds.append((lo, hi))
        lo = hi
    return tuple(bounds)


def slots_read(max_len: int, filled: int) -> int:
    """Slots a one-token step reads per row and KV head with `filled` slots written: every segment up
    to the one holding slot `filled - 1` (`attention.cached_attention`'s rule), for byte rooflines."""
    ends = [hi for _, hi in segment_bounds(max_len)]
    return ends[min(bisect.bisect_left(ends, filled), len(ends) - 1)]


@struct.dataclass
class KVCache:
    k: tuple  # per segment [B, KV, D, L] d-major keys, or [B, KV, L / C, D, C] blocks of them (`keys_to_blocks`)
    v: tuple  # per segment [B, KV, L, D]


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
            kvh, d = cfg.num_kv_heads, cfg.head_dim
            sizes = [hi - lo for lo, hi in segment_bounds(max_len)]
            itemsize = jnp.dtype(dtype).itemsize
            layers.append(KVCache(k=tuple(keys_to_blocks(jnp.zeros((batch, kvh, d, n), dtype), key_block(n, d, itemsize))
                                        for n in sizes),
                                  v=tuple(jnp.zeros((batch, kvh, n, d), dtype) for n in sizes)))
        else:
            conv_dim = 2 * cfg.linear_num_key_heads * cfg.linear_key_head_dim \
                + cfg.linear_num_value_heads * cfg.linear_value_head_dim
            layers.append(GDNCache(
                conv=jnp.zeros((batch, cfg.linear_conv_kernel_dim - 1, conv_dim), jnp.float32),
                state=jnp.zeros((batch, cfg.linear_num_value_heads, cfg.linear_key_head_dim,
                                 cfg.linear_value_head_dim), jnp.float32)))
    return Cache(index=jnp.zeros((), jnp.int32), kv_mask=jnp.zeros((batch, max_len), bool),
                 next_pos=jnp.zeros((batch,), jnp.int32), layers=tuple(layers))
