"""Gated DeltaNet (Qwen3.5 linear-attention layers), matching HF `Qwen3_5GatedDeltaNet`.

Per token: qkv = causal depthwise conv1d(in_proj_qkv(x)) + SiLU; q, k L2-normalised (fp32), each
q/k head serving `nv // nk` consecutive value heads; beta = sigmoid(in_proj_b x);
g = -exp(A_log) * softplus(in_proj_a x + dt_bias) (log decay, fp32). State update
  S <- exp(g) S;  S <- S + k (beta (v - S^T k))^T;  o = S^T q / sqrt(dk)
computed chunk-parallel (WY form, one unit-triangular inverse per chunk, `lax.scan` across chunks) for
prefill/training and token by token for decode. Output: gated RMSNorm (w * norm(o) * silu(z), w
initialised to ONE, unlike the model's other (1 + w) norms), then out_proj.
Pad tokens are zeroed at the input (as HF does), so left padding leaves the state untouched.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from hr1_jax.models.cache import GDNCache
from hr1_jax.models.layers import DTYPE, Dense

_HI = jax.lax.Precision.HIGHEST


def _l2norm(x, eps=1e-6):
    return x * jax.lax.rsqrt(jnp.sum(x * x, axis=-1, keepdims=True) + eps)


def _prepare(q, k, v, g, beta):
    """HF's kernel prologue: repeat q/k heads to the value heads, fp32, L2-norm q/k, scale q."""
    rep = v.shape[2] // k.shape[2]
    q, k = jnp.repeat(q, rep, axis=2), jnp.repeat(k, rep, axis=2)
    f32 = lambda x: x.astype(jnp.float32)
    q, k, v, g, beta = map(f32, (q, k, v, g, beta))
    q, k = _l2norm(q), _l2norm(k)
    return q * (q.shape[-1] ** -0.5), k, v, g, beta


def _unit_lower_inverse(strict):
    """(I + L)^-1 for strictly lower-triangular (nilpotent) L [..., C, C], as the exact finite
    product (I - L)(I + L^2)(I + L^4)... : 2 log2(C) batched matmuls. XLA:CPU's batched
    triangular_solve took ~0.7 s for 64 solves of 64x64; this is matmul-only on every backend."""
    c = strict.shape[-1]
    inv = jnp.eye(c, dtype=strict.dtype) - strict   # terms of degree < 2
    power, covered = strict, 2
    while covered < c:
        power = jnp.matmul(power, power, precision=_HI)
        inv = inv + jnp.matmul(inv, power, precision=_HI)
        covered *= 2
    return inv


def chunk_gated_delta_rule(q, k, v, g, beta, initial_state=None, chunk_size: int = 64):
    """Chunk-parallel gated delta rule. q, k [B,T,Hk,Dk]; v [B,T,Hv,Dv]; g, beta [B,T,Hv];
    initial_state [B,Hv,Dk,Dv] or None. Returns (out [B,T,Hv,Dv] in v's dtype, final fp32 state)."""
    out_dtype = v.dtype
    q, k, v, g, beta = _prepare(q, k, v, g, beta)
    b, t, h, dk = k.shape
    dv = v.shape[-1]
    c = min(chunk_size, t)
    pad = (-t) % c
    n = (t + pad) // c

    def chunks(x):  # [B,T,H,...] -> [B,H,N,C,...], zero padded at the end (no-op tokens)
        x = jnp.pad(x, [(0, 0), (0, pad)] + [(0, 0)] * (x.ndim - 2))
        x = jnp.moveaxis(x, 2, 1)
        return x.reshape(b, h, n, c, *x.shape[3:])

    q, k, v, g, beta = map(chunks, (q, k, v, g, beta))
    k_beta, v_beta = k * beta[..., None], v * beta[..., None]
    cum = jnp.cumsum(g, axis=-1)                                    # [B,H,N,C] log decay from chunk start
    lower = jnp.tril(jnp.ones((c, c), bool))
    diff = cum[..., :, None] - cum[..., None, :]
    decay = jnp.where(lower, jnp.exp(jnp.where(lower, diff, 0.0)), 0.0)  # mask before exp: no inf grads
    ein = lambda spec, *xs: jnp.einsum(spec, *xs, precision=_HI)
    # Unit lower-triangular system (I + strict_lower(beta K K^T * decay)) -> WY factors.
    strict = jnp.where(jnp.tril(jnp.ones((c, c), bool), -1), ein("bhncd,bhnsd->bhncs", k_beta, k) * decay, 0.0)
    inv = _unit_lower_inverse(strict)
    new_values = ein("bhncs,bhnse->bhnce", inv, v_beta)
    k_cumdecay = ein("bhncs,bhnsd->bhncd", inv, k_beta * jnp.exp(cum)[..., None])
    intra = ein("bhncd,bhnsd->bhncs", q, k) * decay
    q_dec = q * jnp.exp(cum)[..., None]
    k_dec = k * jnp.exp(cum[..., -1:] - cum)[..., None]
    chunk_decay = jnp.exp(cum[..., -1])                             # [B,H,N]

    def step(state, xs):
        nv_i, kcd_i, q_i, k_i, intra_i, cd_i = xs
        v_new = nv_i - ein("bhcd,bhde->bhce", kcd_i, state)
        out = ein("bhcd,bhde->bhce", q_i, state) + ein("bhcs,bhse->bhce", intra_i, v_new)
        state = state * cd_i[..., None, None] + ein("bhcd,bhce->bhde", k_i, v_new)
        return state, out

    state0 = jnp.zeros((b, h, dk, dv), jnp.float32) if initial_state is None else initial_state.astype(jnp.float32)
    per_chunk = lambda x: jnp.moveaxis(x, 2, 0)
    xs = tuple(map(per_chunk, (new_values, k_cumdecay, q_dec, k_dec, intra))) + (jnp.moveaxis(chunk_decay, 2, 0),)
    state, out = jax.lax.scan(step, state0, xs)                     # out [N,B,H,C,Dv]
    out = jnp.moveaxis(out, 0, 2).reshape(b, h, n * c, dv)[:, :, :t]
    return jnp.moveaxis(out, 1, 2).astype(out_dtype), state


def recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=None):
    """Token-by-token gated delta rule (decode path); same arguments/results as the chunked form."""
    out_dtype = v.dtype
    q, k, v, g, beta = _prepare(q, k, v, g, beta)
    b, t, h, dk = k.shape
    state0 = jnp.zeros((b, h, dk, v.shape[-1]), jnp.float32) if initial_state is None \
        else initial_state.astype(jnp.float32)

    def step(state, xs):
        q_t, k_t, v_t, g_t, b_t = xs
        state = state * jnp.exp(g_t)[..., None, None]
        kv_mem = jnp.einsum("bhkv,bhk->bhv", state, k_t, precision=_HI)
        delta = (v_t - kv_mem) * b_t[..., None]
        state = state + k_t[..., :, None] * delta[..., None, :]
        return state, jnp.einsum("bhkv,bhk->bhv", state, q_t, precision=_HI)

    xs = tuple(jnp.moveaxis(x, 1, 0) for x in (q, k, v, g, beta))
    state, out = jax.lax.scan(step, state0, xs)                     # out [T,B,H,Dv]
    return jnp.moveaxis(out, 0, 1).astype(out_dtype), state


def causal_conv(x, weight, conv_state):
    """Depthwise causal conv. x [B,T,C]; weight [K,C]; conv_state [B,K-1,C] (previous inputs).
    Returns (out [B,T,C] before activation, new conv_state = last K-1 inputs)."""
    kern = weight.shape[0]
    full = jnp.concatenate([conv_state.astype(x.dtype), x], axis=1)  # [B, K-1+T, C]
    t = x.shape[1]
    out = sum(full[:, j:j + t] * weight[j].astype(x.dtype) for j in range(kern))
    return out, full[:, full.shape[1] - (kern - 1):]


class GatedRMSNorm(nnx.Module):
    """w * rmsnorm(x) * silu(gate); w initialised to ones (plain scale, not 1 + w)."""

    def __init__(self, dim: int, eps: float, *, param_dtype):
        self.weight = nnx.Param(nnx.with_partitioning(nnx.initializers.ones, (None,))(
            jax.random.key(0), (dim,), param_dtype))
        self.eps = eps

    def __call__(self, x, gate):
        xf = x.astype(jnp.float32)
        xf = xf * jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + self.eps)
        y = self.weight[...].astype(x.dtype) * xf.astype(x.dtype)
        return (y * jax.nn.silu(gate.astype(jnp.float32))).astype(x.dtype)


class GatedDeltaNet(nnx.Module):
    def __init__(self, cfg, *, rngs: nnx.Rngs):
        pdt, dt = DTYPE[cfg.param_dtype], DTYPE[cfg.dtype]
        kw = dict(param_dtype=pdt, dtype=dt, rngs=rngs)
        self.nk, self.nv = cfg.linear_num_key_heads, cfg.linear_num_value_heads
        self.dk, self.dv = cfg.linear_key_head_dim, cfg.linear_value_head_dim
        self.chunk_size = cfg.gdn_chunk_size
        e, kern = cfg.hidden_size, cfg.linear_conv_kernel_dim
        conv_dim = 2 * self.nk * self.dk + self.nv * self.dv
        self.in_proj_qkv = Dense(e, conv_dim, ("embed", "conv"), **kw)
        self.in_proj_z = Dense(e, self.nv * self.dv, ("embed", "linear_v"), **kw)
        self.in_proj_b = Dense(e, self.nv, ("embed", "linear_heads"), **kw)
        self.in_proj_a = Dense(e, self.nv, ("embed", "linear_heads"), **kw)
        # torch Conv1d's default init bound for a depthwise kernel (fan_in = K).
        bound = kern ** -0.5
        conv_init = nnx.with_partitioning(lambda key, shape, dtype: jax.random.uniform(
            key, shape, dtype, -bound, bound), ("conv_kernel", "conv"))
        self.conv1d = nnx.Param(conv_init(rngs.params(), (kern, conv_dim), pdt))
        self.kern = kern
        # A ~ U[0.01, 16) as HF initialises it; kept in fp32 whatever the param dtype (decay precision).
        a_init = nnx.with_partitioning(lambda key, shape, dtype: jnp.log(jax.random.uniform(
            key, shape, dtype, 0.01, 16.0)), ("linear_heads",))
        self.A_log = nnx.Param(a_init(rngs.params(), (self.nv,), jnp.float32))
        self.dt_bias = nnx.Param(nnx.with_partitioning(nnx.initializers.ones, ("linear_heads",))(
            rngs.params(), (self.nv,), jnp.float32))
        self.norm = GatedRMSNorm(self.dv, cfg.rms_norm_eps, param_dtype=pdt)
        self.out_proj = Dense(self.nv * self.dv, e, ("linear_v", "embed"), **kw)

    def __call__(self, x, tok_mask, cache: GDNCache | None):
        """x [B,T,E]; tok_mask bool [B,T]; cache GDNCache or None -> (out [B,T,E], cache)."""
        b, t, _ = x.shape
        x = x * tok_mask[..., None].astype(x.dtype)
        qkv = self.in_proj_qkv(x)
        z = self.in_proj_z(x).reshape(b, t, self.nv, self.dv)
        beta = jax.nn.sigmoid(self.in_proj_b(x))
        g = -jnp.exp(self.A_log[...].astype(jnp.float32)) * jax.nn.softplus(
            self.in_proj_a(x).astype(jnp.float32) + self.dt_bias[...].astype(jnp.float32))
        conv_state = jnp.zeros((b, self.kern - 1, qkv.shape[-1]), jnp.float32) if cache is None \
            else cache.conv
        qkv, conv_state = causal_conv(qkv, self.conv1d[...], conv_state)
        qkv = jax.nn.silu(qkv)
        kd = self.nk * self.dk
        q = qkv[..., :kd].reshape(b, t, self.nk, self.dk)
        k = qkv[..., kd:2 * kd].reshape(b, t, self.nk, self.dk)
        v = qkv[..., 2 * kd:].reshape(b, t, self.nv, self.dv)
        state = None if cache is None else cache.state
        if cache is not None and t == 1:
            out, state = recurrent_gated_delta_rule(q, k, v, g, beta, state)
        else:
            out, state = chunk_gated_delta_rule(q, k, v, g, beta, state, self.chunk_size)
        out = self.norm(out, z).reshape(b, t, -1)
        if cache is not None:
            cache = GDNCache(conv=conv_state.astype(jnp.float32), state=state)
        return self.out_proj(out), cache
