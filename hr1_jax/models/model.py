"""The decoder LM shared by both families: embeddings -> blocks -> final norm -> LM head.

One graph serves training, log-prob scoring and sampling:
  model(input_ids, positions=None, cache=None, attention_mask=None) -> (logits fp32 [B,T,V], cache)
  model.hidden_states(...) -> (final normed hidden [B,T,E], cache)     # for chunked log-probs
  model.lm_head_weight() -> [E, V] (tied: embedding transposed); model.logits(h) = h @ W in fp32
  model.init_cache(batch, max_len, dtype) -> Cache
Parameter paths mirror the HF names (see hf_io.py's mapping table).

Two layer layouts (`cfg.scan_layers`), numerically the same model:
  * loop: `layers.{i}.*`, one Block per layer, applied by a Python loop (the graph grows with depth);
  * scan: `layer_groups.{j}.*`, the j-th layer of each repeat of the layer pattern (`cfg.scan_period`
    layers: 1 for Qwen3, [3 x GDN, full attention] for Qwen3.5), every param stacked over the
    `cfg.num_layer_groups` repeats on a leading `layers` logical axis and run by one `jax.lax.scan`,
    so XLA compiles one group whatever the depth. HF layer i is group i // period, position i % period
    (`stacked_location` / `loop_locations`). The cache's `layers` follow the same layout.
Remat (`cfg.remat`) wraps each block in both layouts, keeping what `cfg.remat_policy` names.
"""
from __future__ import annotations

import contextlib
import re

import jax
import jax.numpy as jnp
from flax import nnx

from hr1_jax.models import cache as cache_lib
from hr1_jax.models.attention import Attention
from hr1_jax.models.config import REMAT_POLICIES, ModelConfig
from hr1_jax.models.gated_deltanet import GatedDeltaNet
from hr1_jax.models.layers import DTYPE, MLP, RMSNorm, dense_init, rope_cos_sin


class Embed(nnx.Module):
    def __init__(self, vocab: int, dim: int, *, param_dtype, dtype, rngs: nnx.Rngs):
        init = nnx.with_partitioning(dense_init(), ("vocab", "embed"))
        self.embedding = nnx.Param(init(rngs.params(), (vocab, dim), param_dtype))
        self.dtype = dtype

    def __call__(self, ids: jax.Array) -> jax.Array:
        return jnp.take(self.embedding[...], ids, axis=0).astype(self.dtype)


class Block(nnx.Module):
    def __init__(self, cfg: ModelConfig, kind: str, *, rngs: nnx.Rngs):
        pdt = DTYPE[cfg.param_dtype]
        nkw = dict(zero_centred=cfg.zero_centred_norms, param_dtype=pdt)
        self.kind = kind
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, **nkw)
        if kind == "full_attention":
            self.self_attn = Attention(cfg, rngs=rngs)
        else:
            self.linear_attn = GatedDeltaNet(cfg, rngs=rngs)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, **nkw)
        self.mlp = MLP(cfg.hidden_size, cfg.intermediate_size, param_dtype=pdt, dtype=DTYPE[cfg.dtype], rngs=rngs)

    def __call__(self, x, cos, sin, tok_mask, kv_mask, layer_cache, index, group=None):
        """group: this layer's index into a `layer_cache` stacked over layer groups (scanned layers)."""
        h = self.input_layernorm(x)
        if self.kind == "full_attention":
            h, layer_cache = self.self_attn(h, cos, sin, kv_mask, layer_cache, index, group)
        elif group is None or layer_cache is None:
            h, layer_cache = self.linear_attn(h, tok_mask, layer_cache)
        else:  # conv + recurrent state are rewritten whole: read the slice, write it back in place
            h, own = self.linear_attn(h, tok_mask, jax.tree.map(lambda c: c[group], layer_cache))
            layer_cache = jax.tree.map(lambda c, new: jax.lax.dynamic_update_index_in_dim(c, new, group, 0),
                                       layer_cache, own)
        x = x + h
        x = x + self.mlp(self.post_attention_layernorm(x))
        return x, layer_cache


def _apply_block(graphdef, state, *args):
    return nnx.merge(graphdef, state)(*args)


def _block_runner(cfg: ModelConfig):
    """`run(graphdef, state, *block_args)`: one block as a pure function of its split state (plain
    jax transforms, so a model merged outside any enclosing jit/while_loop/scan can be called inside
    it), rematerialised when `cfg.remat` keeping what `cfg.remat_policy` names. Inside a scan the
    recomputation cannot be CSE'd into the forward pass, so it need not be prevented."""
    if not cfg.remat:
        return _apply_block
    policy = getattr(jax.checkpoint_policies, REMAT_POLICIES[cfg.remat_policy])
    return jax.checkpoint(_apply_block, policy=policy, prevent_cse=not cfg.scan_layers, static_argnums=(0,))


def _run_blocks(run, blocks, x, ctx, caches, group=None):
    """Apply `blocks` in order. ctx = (cos, sin, tok_mask, kv_mask, index); caches: one per block, or
    None without a cache; group: the blocks' index into caches stacked over layer groups. Returns
    (x, new caches as a tuple, or None)."""
    new_caches = []
    for i, block in enumerate(blocks):
        layer_cache = None if caches is None else caches[i]
        x, layer_cache = run(*nnx.split(block), x, *ctx[:4], layer_cache, ctx[4], group)
        new_caches.append(layer_cache)
    return x, None if caches is None else tuple(new_caches)


_STACKED = {nnx.PARTITION_NAME: "layers"}  # the stacked axis's logical name (mapped to no mesh axis)


def _stacked_layer_groups(cfg: ModelConfig, rngs: nnx.Rngs) -> nnx.List:
    """One group's blocks with every param stacked over the groups (leading `layers` axis)."""
    kinds = cfg.layer_types[:cfg.scan_period]

    @nnx.split_rngs(splits=cfg.num_layer_groups)
    @nnx.vmap(in_axes=0, out_axes=0, transform_metadata=_STACKED)
    def make(rngs):
        return nnx.List([Block(cfg, kind, rngs=rngs) for kind in kinds])

    return make(rngs)


def _scan_layer_groups(cfg: ModelConfig, groups: nnx.List, x, ctx, caches):
    """`_run_blocks` over each group in turn under `jax.lax.scan`, the groups' stacked params sliced
    per group. The stacked caches ride in the carry with x, each group writing its own slice in
    place (scanned over as inputs/outputs, every decode step would copy them whole)."""
    run = _block_runner(cfg)
    graphdef, stacked = nnx.split(groups)

    def body(carry, group_xs):
        x, caches = carry
        group_state, group = group_xs
        return _run_blocks(run, nnx.merge(graphdef, group_state), x, ctx, caches, group), None

    (x, caches), _ = jax.lax.scan(body, (x, caches), (stacked, jnp.arange(cfg.num_layer_groups)))
    return x, caches


_LOOP_PATH = re.compile(r"layers\.(\d+)\.(.+)")
_GROUP_PATH = re.compile(r"layer_groups\.(\d+)\.(.+)")


def stacked_location(cfg: ModelConfig, loop_path: str) -> tuple[str, int | None]:
    """Where the loop-layout param `loop_path` (e.g. "layers.5.mlp.up_proj.kernel") lives in `cfg`'s
    layout: (param path, group index into its leading axis), or (path, None) if not stacked."""
    m = _LOOP_PATH.fullmatch(loop_path)
    if not cfg.scan_layers or m is None:
        return loop_path, None
    group, position = divmod(int(m[1]), cfg.scan_period)
    return f"layer_groups.{position}.{m[2]}", group


def loop_locations(cfg: ModelConfig, path: str) -> list[tuple[str, int | None]]:
    """Inverse of `stacked_location`: the (loop path, group index) pairs a param of `cfg`'s layout
    holds - one per group for a stacked param, [(path, None)] otherwise."""
    m = _GROUP_PATH.fullmatch(path)
    if not cfg.scan_layers or m is None:
        return [(path, None)]
    period = cfg.scan_period
    return [(f"layers.{g * period + int(m[1])}.{m[2]}", g) for g in range(cfg.num_layer_groups)]


class CausalLM(nnx.Module):
    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        pdt, dt = DTYPE[cfg.param_dtype], DTYPE[cfg.dtype]
        self.embed_tokens = Embed(cfg.vocab_size, cfg.hidden_size, param_dtype=pdt, dtype=dt, rngs=rngs)
        if cfg.scan_layers:
            self.layer_groups = _stacked_layer_groups(cfg, rngs)
        else:
            self.layers = nnx.List([Block(cfg, kind, rngs=rngs) for kind in cfg.layer_types])
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, zero_centred=cfg.zero_centred_norms, param_dtype=pdt)
        if not cfg.tie_word_embeddings:
            init = nnx.with_partitioning(dense_init(), ("embed", "vocab"))
            self.lm_head = nnx.Param(init(rngs.params(), (cfg.hidden_size, cfg.vocab_size), pdt))

    def init_cache(self, batch: int, max_len: int, dtype=jnp.bfloat16) -> cache_lib.Cache:
        """An empty cache; with scanned layers its `layers` hold one entry per position in the layer
        pattern, stacked over the groups like the params."""
        cache = cache_lib.init_cache(self.cfg, batch, max_len, dtype)
        if not self.cfg.scan_layers:
            return cache
        period = self.cfg.scan_period
        stacked = tuple(jax.tree.map(lambda *xs: jnp.stack(xs), *cache.layers[j::period]) for j in range(period))
        return cache.replace(layers=stacked)

    def lm_head_weight(self) -> jax.Array:
        """The output projection [hidden, vocab] in the activation dtype."""
        w = self.embed_tokens.embedding[...].T if self.cfg.tie_word_embeddings else self.lm_head[...]
        return w.astype(DTYPE[self.cfg.dtype])

    def logits(self, h: jax.Array) -> jax.Array:
        """fp32 logits for hidden states h [..., E] (call on slices to bound memory)."""
        w = self.lm_head_weight()
        flat = h.astype(DTYPE[self.cfg.dtype]).reshape(-1, w.shape[0])  # 2-D: XLA:CPU's fast GEMM path
        return jnp.dot(flat, w, preferred_element_type=jnp.float32).reshape(h.shape[:-1] + (w.shape[1],))

    def hidden_states(self, input_ids, positions=None, cache: cache_lib.Cache | None = None, attention_mask=None):
        """Final-norm hidden states [B,T,E] and the updated cache (None in, None out).

        attention_mask [B,T] (1 = real, 0 = pad) masks pad tokens out of attention and zeroes them at
        the GDN input (as HF does). Default positions count real tokens only (continuing from the
        cache), so a left-padded row is positioned like the same row unpadded."""
        if input_ids.ndim != 2:
            raise ValueError(f"input_ids must be [batch, seq], got shape {input_ids.shape}")
        b, t = input_ids.shape
        if attention_mask is not None and attention_mask.shape != (b, t):
            raise ValueError(f"attention_mask shape {attention_mask.shape} != input_ids shape {(b, t)}")
        if cache is not None and (cache.kv_mask.shape[0] != b or t > cache.max_len):
            raise ValueError(f"cache for batch {cache.kv_mask.shape[0]} x {cache.max_len} slots cannot take "
                             f"a [{b}, {t}] input")
        tok_mask = jnp.ones((b, t), bool) if attention_mask is None else attention_mask.astype(bool)
        offset = jnp.cumsum(tok_mask, axis=1, dtype=jnp.int32) - 1
        if cache is None:
            index, kv_mask = 0, tok_mask
            if positions is None:
                positions = jnp.maximum(offset, 0)
        else:
            index = cache.index
            kv_mask = jax.lax.dynamic_update_slice_in_dim(cache.kv_mask, tok_mask, index, axis=1)
            if positions is None:
                positions = jnp.maximum(cache.next_pos[:, None] + offset, 0)
        cos, sin = rope_cos_sin(positions, self.cfg.rotary_dim, self.cfg.rope_theta)
        x = self.embed_tokens(input_ids)
        ctx = (cos, sin, tok_mask, kv_mask, index)
        layer_caches = None if cache is None else cache.layers
        if self.cfg.scan_layers:
            x, layer_caches = _scan_layer_groups(self.cfg, self.layer_groups, x, ctx, layer_caches)
        else:
            x, layer_caches = _run_blocks(_block_runner(self.cfg), self.layers, x, ctx, layer_caches)
        x = self.norm(x)
        if cache is not None:
            cache = cache_lib.Cache(index=cache.index + t, kv_mask=kv_mask,
                                    next_pos=cache.next_pos + tok_mask.sum(axis=1, dtype=jnp.int32),
                                    layers=layer_caches)
        return x, cache

    def __call__(self, input_ids, positions=None, cache: cache_lib.Cache | None = None, attention_mask=None):
        h, cache = self.hidden_states(input_ids, positions, cache, attention_mask)
        return self.logits(h), cache


@contextlib.contextmanager
def sharding_context(mesh=None, rules=None):
    """Context for creating annotated params: with a mesh they are created already sharded
    (eager sharding under `rules`); without one, eager sharding is off so single-device code
    needs no mesh (flax 0.12 shards eagerly by default and would demand one)."""
    if mesh is None:
        with nnx.use_eager_sharding(False):
            yield
        return
    with jax.set_mesh(mesh), nnx.logical_axis_rules(tuple(rules or ())), nnx.use_eager_sharding(True):
        yield


def build_model(cfg: ModelConfig, rngs: nnx.Rngs | None = None, *, mesh=None, rules=None) -> CausalLM:
    """A randomly initialised model for `cfg` (both families share `CausalLM`; `cfg.family` and
    `cfg.layer_types` select the blocks)."""
    rngs = rngs if rngs is not None else nnx.Rngs(0)
    with sharding_context(mesh, rules):
        return CausalLM(cfg, rngs=rngs)


def abstract_model(cfg: ModelConfig):
    """(graphdef, abstract state) without allocating parameters (for loaders and sharding plans)."""
    with nnx.use_eager_sharding(False):
        model = nnx.eval_shape(lambda: CausalLM(cfg, rngs=nnx.Rngs(0)))
    return nnx.split(model)
