"""Shared building blocks: annotated dense kernels, RMSNorm, RoPE, SwiGLU MLP.

Every parameter carries logical axis names (`nnx.with_partitioning`) from `LOGICAL_AXES`; the mesh
rules table (hr1_jax/parallel) maps them to mesh axes. `None` entries are always replicated.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

# Every logical axis name a parameter of these models may carry (a rules table must cover all).
LOGICAL_AXES = (
    "vocab", "embed", "mlp", "heads", "kv_heads",     # attention / MLP / embeddings
    "conv", "linear_v", "linear_heads", "conv_kernel",  # Gated DeltaNet
    "layers",                                           # stacked layer groups (cfg.scan_layers)
)

DTYPE = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}


def dense_init(stddev: float = 0.02):
    return nnx.initializers.normal(stddev)


class Dense(nnx.Module):
    """y = x @ W with W [in, out] (HF stores [out, in]); no bias (none of these models use one)."""

    def __init__(self, din: int, dout: int, axes: tuple, *, param_dtype, dtype, rngs: nnx.Rngs):
        init = nnx.with_partitioning(dense_init(), axes)
        self.kernel = nnx.Param(init(rngs.params(), (din, dout), param_dtype))
        self.dtype = dtype

    def __call__(self, x: jax.Array) -> jax.Array:
        # As a 2-D matmul: XLA:CPU runs a [B,T,E] x [E,F] dot (and its weight gradient, contracting
        # B and T) off its fast GEMM path: up to ~2x slower for the demo MLP's forward + backward.
        w = self.kernel[...].astype(self.dtype)
        return jnp.dot(x.astype(self.dtype).reshape(-1, w.shape[0]), w).reshape(x.shape[:-1] + (w.shape[1],))


class RMSNorm(nnx.Module):
    """RMSNorm over the last axis, computed in fp32.

    zero_centred=False (Qwen3): `w * x_hat` with w initialised to 1, cast to the input dtype first.
    zero_centred=True (Qwen3.5): `x_hat * (1 + w)` in fp32 with w initialised to 0.
    """

    def __init__(self, dim: int, eps: float, *, zero_centred: bool, param_dtype):
        init = nnx.initializers.zeros if zero_centred else nnx.initializers.ones
        self.weight = nnx.Param(nnx.with_partitioning(init, (None,))(jax.random.key(0), (dim,), param_dtype))
        self.eps = eps
        self.zero_centred = zero_centred

    def __call__(self, x: jax.Array) -> jax.Array:
        xf = x.astype(jnp.float32)
        xf = xf * jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + self.eps)
        w = self.weight[...]
        if self.zero_centred:
            return (xf * (1.0 + w.astype(jnp.float32))).astype(x.dtype)
        return w.astype(x.dtype) * xf.astype(x.dtype)


def rope_cos_sin(positions: jax.Array, rotary_dim: int, theta: float) -> tuple[jax.Array, jax.Array]:
    """cos/sin [B, T, rotary_dim] in fp32 for integer positions [B, T] (HF rotate-half layout)."""
    inv_freq = 1.0 / (theta ** (jnp.arange(0, rotary_dim, 2, dtype=jnp.float32) / rotary_dim))
    freqs = positions.astype(jnp.float32)[..., None] * inv_freq
    emb = jnp.concatenate([freqs, freqs], axis=-1)
    return jnp.cos(emb), jnp.sin(emb)


def apply_rope(x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
    """Rotate the first `cos.shape[-1]` dims of each head of x [B, T, H, D]; the rest pass through."""
    rd = cos.shape[-1]
    cos, sin = cos[:, :, None, :].astype(x.dtype), sin[:, :, None, :].astype(x.dtype)
    out = _rotate(x[..., :rd], cos, sin)
    return out if rd == x.shape[-1] else jnp.concatenate([out, x[..., rd:]], axis=-1)


@jax.custom_vjp
def _rotate(x, cos, sin):
    """x * cos + rotate_half(x) * sin, rotate_half(x) = [-x2, x1] (HF layout). Differentiated, it is
    computed by halves and its VJP is the transposed map by halves: autodiff through the rotate-half
    concatenation padded each half's cotangent to the whole head and summed the pads, separate passes
    on XLA:CPU (bench_attention.py's rope table: the demo train step 1.03x, pairwise 1.04-1.05x). Not
    differentiated (decode, prefill, log-probs) it keeps this concatenated form: with the halves form
    bench_model.py's top-p decode at the tiny config ran slower (one-off runs). Both forms give the
    same values bit for bit: each element is the same two products and one sum. cos and sin come from
    integer positions and get no gradient."""
    h = x.shape[-1] // 2
    return x * cos + jnp.concatenate([-x[..., h:], x[..., :h]], axis=-1) * sin


def _by_halves(x, cos, sin, transpose: bool = False):
    """`_rotate` computed by halves; `transpose`: its transposed map, the VJP (the rotation back when
    the halves of cos and sin are equal, as rope_cos_sin makes them)."""
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    if not transpose:
        return jnp.concatenate([x1 * cos[..., :h] - x2 * sin[..., :h], x2 * cos[..., h:] + x1 * sin[..., h:]], axis=-1)
    return jnp.concatenate([x1 * cos[..., :h] + x2 * sin[..., h:], x2 * cos[..., h:] - x1 * sin[..., :h]], axis=-1)


def _rotate_fwd(x, cos, sin):
    return _by_halves(x, cos, sin), (cos, sin)


def _rotate_bwd(res, dy):
    cos, sin = res
    return _by_halves(dy, cos, sin, transpose=True), None, None


_rotate.defvjp(_rotate_fwd, _rotate_bwd)


class MLP(nnx.Module):
    """SwiGLU: down(silu(gate(x)) * up(x))."""

    def __init__(self, d: int, f: int, *, param_dtype, dtype, rngs: nnx.Rngs):
        kw = dict(param_dtype=param_dtype, dtype=dtype, rngs=rngs)
        self.gate_proj = Dense(d, f, ("embed", "mlp"), **kw)
        self.up_proj = Dense(d, f, ("embed", "mlp"), **kw)
        self.down_proj = Dense(f, d, ("mlp", "embed"), **kw)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.down_proj(jax.nn.silu(self.gate_proj(x)) * self.up_proj(x))
