"""Causal self-attention of a whole sequence through a fused kernel: cuDNN's flash attention on a GPU
(`jax.nn.dot_product_attention`) or the Pallas splash kernel on a TPU. Neither holds the [T, T]
scores in memory, and both skip the masked triangle.

`model.attention_impl` picks the implementation of the no-cache (train step, log-prob) attention:
  auto     cuDNN on a GPU when activations are bf16 or fp16 (cuDNN's fused attention takes no fp32)
           and JAX accepts the shapes (else the blocked path, with a logged warning); `blocked` elsewhere;
  blocked  `attention.causal_attention`: XLA query blocks that skip the masked upper triangle (the
           CPU path; fp32 scores);
  cudnn    cuDNN, required (a clear error where it cannot run);
  splash   the splash kernel, required (a TPU). Opt-in: `auto` keeps TPUs on the blocked path until
           `benchmarks/accelerator_check.sh` has measured this one on a TPU;
  xla      the cuDNN call's library function on XLA's reference implementation. It materialises the
           [T, T] scores, so it is slower than `blocked` everywhere. It runs on every backend, so the
           tests check this module's masking and fallback on a CPU with it.
The decode and prefill attention over a KV cache is not affected.
"""
from __future__ import annotations

import functools
import logging
import math

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from hr1_jax.parallel.config import MESH_AXES

IMPLEMENTATIONS = ("auto", "blocked", "cudnn", "splash", "xla")
_CUDNN_DTYPES = (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16))
# Tests set this to run the splash kernel in Pallas's interpreter, which works on any backend.
SPLASH_INTERPRET = False
_SPLASH_LANES = 128                 # splash's sequence blocks are multiples of the TPU's 128 lanes
_SPLASH_BLOCKS = (512, 256, 128)    # the largest that divides the padded length is used
_BATCH_AXES, _HEAD_AXIS = MESH_AXES[:2], MESH_AXES[2]  # rows over data and fsdp, heads over tensor

_log = logging.getLogger(__name__)


def resolve(impl: str, dtype, backend: str | None = None) -> str:
    """The implementation `impl` means for activations of `dtype` on `backend` (default: JAX's);
    ValueError for an unknown name or a kernel that cannot run there."""
    if impl not in IMPLEMENTATIONS:
        raise ValueError(f"model.attention_impl must be one of {IMPLEMENTATIONS}, got {impl!r}")
    backend = backend or jax.default_backend()
    cudnn_ok = backend == "gpu" and jnp.dtype(dtype) in _CUDNN_DTYPES
    if impl == "auto":
        return "cudnn" if cudnn_ok else "blocked"
    if impl == "cudnn" and not cudnn_ok:
        raise ValueError(f"model.attention_impl=cudnn needs a GPU and bf16/fp16 activations (model.dtype); "
                         f"here: backend {backend!r}, activations {jnp.dtype(dtype).name}")
    if impl == "splash" and backend != "tpu" and not SPLASH_INTERPRET:
        raise ValueError(f"model.attention_impl=splash needs a TPU; here: backend {backend!r}")
    return impl


def causal_attention(q, k, v, kv_valid, impl: str, blocked, *, required: bool = True):
    """q [B,T,N,D], k/v [B,T,KV,D] (N a multiple of KV), kv_valid bool [B,T] -> [B,T,N,D] through
    `impl` ("cudnn", "splash" or "xla"); `blocked()` is the blocked path. A cuDNN call that JAX
    refuses for these shapes (`required=False`, as `auto` asks) runs `blocked()` instead."""
    if impl == "splash":
        return splash_causal_attention(q, k, v, kv_valid)
    try:
        return library_causal_attention(q, k, v, kv_valid, impl, blocked)
    except (NotImplementedError, ValueError, RuntimeError) as e:  # JAX's cuDNN checks, at trace time
        if required:
            raise
        _log.warning("cuDNN attention refused (%s: %s); using the blocked path", type(e).__name__, e)
        return blocked()


def library_causal_attention(q, k, v, kv_valid, implementation: str, fallback):
    """`jax.nn.dot_product_attention` for a batch whose rows are all right-padded (real tokens first:
    every batch the trainers collate), with the library's causal mask and per-row lengths. Any other
    mask (left padding, holes) runs `fallback()` instead, chosen at run time. Outputs at padded query
    positions are not those of `fallback` (nothing real reads them); they are finite, so a zero loss
    weight there keeps zero gradients."""
    t = q.shape[1]
    lengths = jnp.sum(kv_valid, axis=1, dtype=jnp.int32)
    right_padded = jnp.all(kv_valid == (jnp.arange(t)[None, :] < lengths[:, None]))
    # A row of padding only (collate's filler rows) attends its first slot: XLA's implementation
    # zeroes a length-0 row, but cuDNN documents no length-0 behaviour, and a NaN there would reach
    # the gradients through the zero loss weight.
    seq_lengths = jnp.maximum(lengths, 1)

    def fused():
        return jax.nn.dot_product_attention(q, k, v, is_causal=True, query_seq_lengths=seq_lengths,
                                            key_value_seq_lengths=seq_lengths, implementation=implementation)

    return jax.lax.cond(right_padded, fused, fallback)


def _splash_lib():
    """The splash kernel's module, imported on first use: a JAX without this experimental kernel still
    runs every other path."""
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel
    return splash_attention_kernel


@functools.lru_cache(maxsize=32)
def _splash_kernel(length: int, group: int, interpret: bool):
    """The splash kernel for one KV head and its `group` query heads over `length` slots (cached:
    building its block masks walks the [length, length] mask on the host). Its block-mask arrays
    are built as constants even when the first call comes while tracing a step: a cached kernel must
    not hold that trace's tracers."""
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as splash_mask
    splash = _splash_lib()
    block = next(b for b in _SPLASH_BLOCKS if length % b == 0)
    sizes = splash.BlockSizes(block_q=block, block_kv=block, block_kv_compute=block, block_q_dkv=block,
                              block_kv_dkv=block, block_kv_dkv_compute=block, block_q_dq=block, block_kv_dq=block)
    mask = splash_mask.MultiHeadMask([splash_mask.CausalMask((length, length))] * group)
    with jax.ensure_compile_time_eval():
        return splash.make_splash_mqa(mask, block_sizes=sizes, head_shards=1, q_seq_shards=1, interpret=interpret)


def _splash_local(q, k, v, kv_valid):
    """Splash on one device's rows and heads. Padding is a segment of its own (segment id 0), so a
    real query sees exactly the real keys up to it, as the blocked path's mask, whatever the layout
    (left, right, holes); a padded query sees the padding up to itself: finite, never read."""
    b, t, n, d = q.shape
    kvh = k.shape[2]
    length = -(-t // _SPLASH_LANES) * _SPLASH_LANES
    kernel = _splash_kernel(length, n // kvh, SPLASH_INTERPRET)
    pad = [(0, 0), (0, length - t), (0, 0), (0, 0)]
    segments = jnp.pad(kv_valid.astype(jnp.int32), [(0, 0), (0, length - t)])
    # splash does not scale the scores: q is scaled in its own dtype (one more rounding in bf16 than
    # the blocked path's fp32 scores; exact for power-of-two head dims)
    qh = jnp.pad(q * jnp.asarray(d ** -0.5, q.dtype), pad).reshape(b, length, kvh, n // kvh, d).transpose(0, 2, 3, 1, 4)
    kh, vh = (jnp.pad(x, pad).transpose(0, 2, 1, 3) for x in (k, v))              # [B,KV,L,D]

    def row(qr, kr, vr, seg):
        ids = _splash_lib().SegmentIds(q=seg, kv=seg)
        return jax.vmap(lambda qg, kg, vg: kernel(qg, kg, vg, segment_ids=ids))(qr, kr, vr)

    out = jax.vmap(row)(qh, kh, vh, segments)                                       # [B,KV,G,L,D]
    return out.transpose(0, 3, 1, 2, 4).reshape(b, length, n, d)[:, :t]


def splash_causal_attention(q, k, v, kv_valid):
    """q [B,T,N,D], k/v [B,T,KV,D], kv_valid bool [B,T] through the splash kernel. Under a mesh
    (`jax.set_mesh`, as the train steps run) the kernel runs per device in `shard_map`: rows split over
    the data/fsdp axes and KV heads over the tensor axis where they divide (a Pallas call has no
    partitioning rule: left to GSPMD every device would gather and compute the whole batch)."""
    mesh = jax.sharding.get_abstract_mesh()
    if mesh.empty or mesh.size == 1:
        return _splash_local(q, k, v, kv_valid)
    sizes = dict(zip(mesh.axis_names, mesh.axis_sizes))
    batch = tuple(a for a in _BATCH_AXES if sizes.get(a, 1) > 1)
    if q.shape[0] % math.prod(sizes[a] for a in batch):
        batch = ()
    heads = _HEAD_AXIS if sizes.get(_HEAD_AXIS, 1) > 1 and k.shape[2] % sizes[_HEAD_AXIS] == 0 else None
    rows = batch or None
    spec = P(rows, None, heads, None)
    return jax.shard_map(_splash_local, mesh=mesh, in_specs=(spec, spec, spec, P(rows, None)), out_specs=spec,
                         check_vma=False)(q, k, v, kv_valid)
