"""Full (softmax) attention: Qwen3 GQA with q/k RMSNorm, and Qwen3.5 gated attention.

Qwen3.5 (`cfg.gated_attention`): q_proj emits, per head, [query | gate] (the split is inside each
head, matching HF's view(..., heads, 2*head_dim).chunk(2)); RoPE covers only the first
`rotary_dim` dims; the attention output is multiplied by sigmoid(gate) before o_proj.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from hr1_jax.models import fused_attention
from hr1_jax.models.cache import KVCache, keys_from_blocks, keys_to_blocks, segment_bounds
from hr1_jax.models.layers import DTYPE, Dense, RMSNorm, apply_rope

# Finite mask value: a fully masked row (a pad query) gets a uniform softmax instead of NaN.
_MASKED = -1e30
# Causal blocks of queries: block i attends keys [0, end of block i) only, skipping the masked
# upper triangle (~half the score work at 4+ blocks). At least this many queries per block (64 was
# fastest at T=512 on XLA:CPU, 2x the unblocked fwd+bwd), and at most `CAUSAL_MAX_BLOCKS` blocks
# unless the attention chunk is smaller (the graph is unrolled per block).
CAUSAL_BLOCK = 64
CAUSAL_MAX_BLOCKS = 16


def _rows(q, kvh: int):
    """q [B,T,H,D] -> [B,KV,T*G,D]: the G query heads sharing a KV head become rows (row r is
    query r // G), so scores and outputs are plain batched matmuls over (B, KV) - no transposes of
    the keys/values or of the [.., T, S] scores."""
    b, t, h, d = q.shape
    return q.reshape(b, t, kvh, h // kvh, d).transpose(0, 2, 1, 3, 4).reshape(b, kvh, t * (h // kvh), d)


def _unrows(out, t: int):
    """Inverse of `_rows`: [B,KV,T*G,D] -> [B,T,H,D]."""
    b, kvh, _, d = out.shape
    return out.reshape(b, kvh, t, -1, d).transpose(0, 2, 1, 3, 4).reshape(b, t, -1, d)


def _attend(qr, k, v, row_slots, kv_valid):
    """qr [B,KV,R,D] query rows at slots row_slots [R]; k, v [B,KV,S,D]; kv_valid bool [B,S]."""
    s = k.shape[2]
    mask = (jnp.arange(s)[None, :] <= row_slots[:, None])[None] & kv_valid[:, None, :]  # [B,R,S]
    return _softmax_attend(qr, k, v, mask)


@jax.custom_vjp
def _softmax_attend(qr, k, v, mask):
    """softmax(qr k^T / sqrt(D), masked) v with fp32 scores. Its own VJP uses the identity
    rowsum(P * dP) = rowsum(dO * O): the softmax's backward needs one sum over D-wide rows instead
    of a pass over two [R, S] matrices, and the score gradient is masked once. On XLA:CPU the
    attention of a train step is bound by elementwise passes over its scores, not by its matmuls
    (benchmarks/bench_attention.py measures it against autodiff through jax.nn.softmax)."""
    return _softmax_attend_fwd(qr, k, v, mask)[0]


def _softmax_attend_fwd(qr, k, v, mask):
    # The mask enters as an added bias (0 or _MASKED: any score under ~1e22 in magnitude rounds
    # away beside it, so the masked entries are exactly a select's) and an fp32 q is scaled before
    # the matmul (one rounding, as scaling the scores): XLA:CPU then runs the scores matmul, mask,
    # row max and exponentials as one YNNPACK fusion, where a select stays a pass of its own (the
    # demo train step 2-3% faster: bench_attention.py, benchmarks/README.md). A bf16 q keeps its
    # scale in fp32, after the matmul.
    scale = qr.shape[-1] ** -0.5
    bias = jnp.where(mask, 0.0, _MASKED)[:, None]
    if qr.dtype == jnp.float32:
        scores = jnp.einsum("bkrd,bksd->bkrs", qr * scale, k, preferred_element_type=jnp.float32)
    else:
        scores = jnp.einsum("bkrd,bksd->bkrs", qr, k, preferred_element_type=jnp.float32) * scale
    probs = jax.nn.softmax(scores + bias, axis=-1)
    out = jnp.einsum("bkrs,bksd->bkrd", probs.astype(v.dtype), v)
    return out, (qr, k, v, mask, probs, out)


def _softmax_attend_bwd(res, d_out):
    """dV = P^T dO; dS = P * (dO V^T - rowsum(dO * O)), zero where masked; dQ = dS K / sqrt(D),
    dK = dS^T Q / sqrt(D)."""
    qr, k, v, mask, probs, out = res
    f32 = jnp.float32
    dv = jnp.einsum("bkrs,bkrd->bksd", probs.astype(v.dtype), d_out.astype(v.dtype), preferred_element_type=f32)
    dp = jnp.einsum("bkrd,bksd->bkrs", d_out.astype(v.dtype), v, preferred_element_type=f32)
    delta = jnp.sum(d_out.astype(f32) * out.astype(f32), axis=-1, keepdims=True)
    ds = jnp.where(mask[:, None], probs * (dp - delta), 0.0) * (qr.shape[-1] ** -0.5)
    dq = jnp.einsum("bkrs,bksd->bkrd", ds.astype(k.dtype), k, preferred_element_type=f32)
    dk = jnp.einsum("bkrs,bkrd->bksd", ds.astype(qr.dtype), qr, preferred_element_type=f32)
    return dq.astype(qr.dtype), dk.astype(k.dtype), dv.astype(v.dtype), None


_softmax_attend.defvjp(_softmax_attend_fwd, _softmax_attend_bwd)


def dot_attention(q, k, v, q_slots, kv_valid):
    """Causal GQA. q [B,T,H,D]; k, v head-major [B,KV,S,D]; q_slots int [T] (slot of each query);
    kv_valid bool [B,S]. A query at slot i sees valid slots j <= i. Returns [B,T,H,D]."""
    kvh, g = k.shape[1], q.shape[2] // k.shape[1]
    return _unrows(_attend(_rows(q, kvh), k, v, jnp.repeat(q_slots, g), kv_valid), q.shape[1])


def chunked_dot_attention(q, k, v, q_slots, kv_valid, q_chunk: int):
    """`dot_attention` over blocks of `q_chunk` queries (exact: each block sees all keys), so the
    score matrix held at once is [q_chunk, S] instead of [T, S]; each block is rematerialised in
    the backward pass, keeping long-prompt memory O(T * q_chunk)."""
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


def causal_attention(q, k, v, kv_valid, chunk: int):
    """Self-attention of a whole sequence (query i at slot i), k/v head-major [B,KV,T,D]: each
    block of queries sees only the keys up to its own end. Sequences longer than `chunk` (the
    model's attn_chunk_size) use blocks of at most `chunk` queries, each rematerialised in the
    backward pass (score memory O(T * chunk)). The query blocks are split off q before each is laid
    out as rows, and the outputs joined back along T: q's gradient is then a concatenation of the
    blocks' gradients, where rows sliced out of the whole q had each block's gradient padded to the
    whole sequence and summed (bench_attention.py's step table: the demo train step 1.03x as fast)."""
    t, kvh = q.shape[1], k.shape[1]
    g = q.shape[2] // kvh
    size = min(chunk, max(CAUSAL_BLOCK, -(-t // CAUSAL_MAX_BLOCKS)))
    if t <= size:
        return _unrows(_attend(_rows(q, kvh), k, v, jnp.repeat(jnp.arange(t), g), kv_valid), t)
    block = jax.checkpoint(_attend) if t > chunk else _attend
    outs = []
    for lo, q_block in zip(range(0, t, size), jnp.split(q, list(range(size, t, size)), axis=1)):
        hi = lo + q_block.shape[1]
        out = block(_rows(q_block, kvh), k[:, :, :hi], v[:, :, :hi], jnp.repeat(jnp.arange(lo, hi), g),
                    kv_valid[:, :hi])
        outs.append(_unrows(out, hi - lo))
    return jnp.concatenate(outs, axis=1)


def _attend_segments(qr, ks, vs, row_slots, kv_valid):
    """`_attend` over a cache held in segments (ks d-major [B,KV,D,L_i] or key blocks, vs
    [B,KV,L_i,D]), each read in place: one scores matmul (batched over its key blocks) and one value
    matmul per segment, one softmax over all."""
    d = qr.shape[-1]
    scores = jnp.concatenate([_block_scores(qr, k) for k in ks], axis=-1) * (d ** -0.5)
    mask = (jnp.arange(scores.shape[-1])[None, :] <= row_slots[:, None])[None] & kv_valid[:, None, :]
    probs = jax.nn.softmax(jnp.where(mask[:, None], scores, _MASKED), axis=-1).astype(vs[0].dtype)
    out, lo = None, 0
    for v in vs:
        part = jnp.einsum("bkrl,bkld->bkrd", probs[..., lo:lo + v.shape[2]], v)
        out, lo = part if out is None else out + part, lo + v.shape[2]
    return out


def _block_scores(qr, k):
    """qr [B,KV,R,D] x a segment's keys k ([B,KV,D,L], or blocks [B,KV,J,D,C]) -> scores
    [B,KV,R,L]: the blocks are a batch dimension, so each block's matmul reads its D x C keys in
    place."""
    if k.ndim == 4:
        return jnp.einsum("bkrd,bkdl->bkrl", qr, k, preferred_element_type=jnp.float32)
    b, kvh, r, d = qr.shape
    j, c = k.shape[2], k.shape[4]
    rows = jnp.broadcast_to(qr[:, :, None], (b, kvh, j, r, d))
    s = jnp.einsum("bkjrd,bkjdc->bkjrc", rows, k, preferred_element_type=jnp.float32)
    return s.transpose(0, 1, 3, 2, 4).reshape(b, kvh, r, j * c)


def cached_attention(q, ks, vs, q_slots, kv_valid, filled, q_chunk: int):
    """Attention of this call's queries over a segmented cache (`cache.segment_bounds`; ks, vs
    per segment as `KVCache` holds them), reading (and casting to q's dtype) only the segments
    that hold the `filled` (traced) written slots. A one-token step reads them in place; longer
    calls (prefill) attend their concatenation in query blocks of `q_chunk`."""
    ends = [hi for _, hi in segment_bounds(kv_valid.shape[1])]
    t, kvh = q.shape[1], vs[0].shape[1]

    def over(j):
        def attend():
            k_seg = [k.astype(q.dtype) for k in ks[:j + 1]]
            v_seg = [v.astype(q.dtype) for v in vs[:j + 1]]
            valid = kv_valid[:, :ends[j]]
            if t == 1:
                g = q.shape[2] // kvh
                return _unrows(_attend_segments(_rows(q, kvh), k_seg, v_seg, jnp.repeat(q_slots, g), valid), t)
            k = jnp.concatenate([keys_from_blocks(k) for k in k_seg], axis=3).swapaxes(2, 3)
            return chunked_dot_attention(q, k, jnp.concatenate(v_seg, axis=2), q_slots, valid, q_chunk)
        return attend

    if len(ends) == 1:
        return over(0)()
    which = jnp.searchsorted(jnp.asarray(ends), filled)
    return jax.lax.switch(jnp.minimum(which, len(ends) - 1), [over(j) for j in range(len(ends))])


def _put_layer(seg, layer, group):
    """`seg` with its layer's segment replaced by `layer` (seg itself without `group`)."""
    return layer if group is None else jax.lax.dynamic_update_index_in_dim(seg, layer, group, 0)


def _write_slot(seg, new, start: list, inside, group):
    """`seg` with `new` written in place at `start` of its layer's segment, or the old value written
    back where `inside` is false (a slot outside this segment)."""
    layer = seg if group is None else seg[group]
    val = jnp.where(inside, new, jax.lax.dynamic_slice(layer, start, new.shape))
    return jax.lax.dynamic_update_slice(seg, val if group is None else val[None], start if group is None else [group] + start)


def _write_segment(seg, new, at, axis: int, group):
    """`seg` (a segment [.., L, ..], `axis` = its slot axis; with `group`, stacked [G, ..]) with
    new [.., T, ..] written from its slot `at` (traced; the slots outside the segment dropped).
    One token writes one slot in place (the old value back where `at` is outside); longer calls
    rebuild the segment."""
    t, n = new.shape[axis], seg.shape[axis + (group is not None)]
    layer = seg if group is None else seg[group]
    if t == 1:
        start = [0] * layer.ndim
        start[axis] = jnp.clip(at, 0, n - 1)
        return _write_slot(seg, new, start, (at >= 0) & (at < n), group)
    src = jnp.arange(n) - at
    shape = [1] * layer.ndim
    shape[axis] = n
    keep = ((src < 0) | (src >= t)).reshape(shape)
    return _put_layer(seg, jnp.where(keep, layer, jnp.take(new, jnp.clip(src, 0, t - 1), axis=axis)), group)


def _write_key_blocks(seg, kt, at, group):
    """`_write_segment` for a key segment (kt [B,KV,D,T]) held in blocks (a layer's seg
    [B,KV,J,D,C]): one token writes its one slot in place; longer calls rebuild the segment in
    slot order. A segment held d-major ([B,KV,D,L]) is written by `_write_segment`."""
    layer = seg if group is None else seg[group]
    if layer.ndim == 4:
        return _write_segment(seg, kt, at, 3, group)
    j, c = layer.shape[2], layer.shape[4]
    if kt.shape[3] > 1:
        return _put_layer(seg, keys_to_blocks(_write_segment(keys_from_blocks(layer), kt, at, 3, None), c), group)
    pos = jnp.clip(at, 0, j * c - 1)
    return _write_slot(seg, kt[:, :, None], [0, 0, pos // c, 0, pos % c], (at >= 0) & (at < j * c), group)


def write_kv(cache: KVCache, k, v, index, group=None) -> KVCache:
    """Write this call's keys/values [B,T,KV,D] at slot `index` of the segmented cache; with
    `group`, into that layer's slice of segments stacked over layer groups [G, ..]. A decode step
    writes one slot per segment in place instead of copying a layer's buffers."""
    starts = [lo for lo, _ in segment_bounds(sum(v.shape[-2] for v in cache.v))]
    kt = k.astype(cache.k[0].dtype).transpose(0, 2, 3, 1)   # [B,KV,D,T]
    vt = v.astype(cache.v[0].dtype).swapaxes(1, 2)          # [B,KV,T,D]
    return KVCache(k=tuple(_write_key_blocks(s, kt, index - lo, group) for s, lo in zip(cache.k, starts)),
                   v=tuple(_write_segment(s, vt, index - lo, 2, group) for s, lo in zip(cache.v, starts)))


class Attention(nnx.Module):
    def __init__(self, cfg, *, rngs: nnx.Rngs):
        pdt, dt = DTYPE[cfg.param_dtype], DTYPE[cfg.dtype]
        kw = dict(param_dtype=pdt, dtype=dt, rngs=rngs)
        self.num_heads, self.num_kv_heads, self.head_dim = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        self.gated = cfg.gated_attention
        self.q_chunk = cfg.attn_chunk_size
        self.attention_impl = cfg.attention_impl
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
        if cache is None:
            blocked = lambda: causal_attention(q, k.swapaxes(1, 2), v.swapaxes(1, 2), mask, self.q_chunk)
            impl = fused_attention.resolve(self.attention_impl, q.dtype)
            out = blocked() if impl == "blocked" else fused_attention.causal_attention(
                q, k, v, mask, impl, blocked, required=self.attention_impl != "auto")
        else:
            cache = write_kv(cache, k, v, index, group)
            k_all, v_all = (cache.k, cache.v) if group is None else ([x[group] for x in cache.k], [x[group] for x in cache.v])
            out = cached_attention(q, k_all, v_all, index + jnp.arange(t), mask, index + t, self.q_chunk)
        out = out.reshape(b, t, -1)
        if self.gated:
            out = out * jax.nn.sigmoid(gate.reshape(b, t, -1))
        return self.o_proj(out), cache
