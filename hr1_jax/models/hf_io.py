"""Hugging Face checkpoint import/export through one declarative key-mapping table.

Import streams tensors out of the (possibly sharded) safetensors files with numpy memory maps, so
at most one tensor is materialised on the host at a time; with a mesh each tensor goes straight
into its target `NamedSharding` (from the params' logical axes and `rules`), every device reading
only its own slice of the map. Qwen3.5 VLM checkpoints are handled by stripping
`model.language_model.` and skipping `model.visual.*` and `mtp.*` (multi-token prediction) tensors. Export writes the inverse: `config.json` +
`model.safetensors` (or size-bounded shards + index) that transformers loads directly.

The table speaks the loop layout (`layers.{i}.*`); with scanned layers each such path is one group's
slice of a stacked param (`model.stacked_location` / `model.loop_locations`), so a stacked param is
placed once all its groups' tensors are mapped, and exported one group slice per HF tensor.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import struct
from collections.abc import Callable, Iterator

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from flax import nnx

from hr1_jax.models.config import ModelConfig
from hr1_jax.models.model import CausalLM, abstract_model, loop_locations, stacked_location
from hr1_jax.models.tokenizer import TOKENIZER_FILES

# (to_ours, to_hf) array transforms.
_IDENT = (lambda x: x, lambda x: x)
_T = (lambda x: x.T, lambda x: x.T)                                  # torch Linear [out,in] <-> [in,out]
_CONV = (lambda x: x[:, 0, :].T, lambda x: x.T[:, None, :])          # Conv1d (C,1,K) <-> (K,C)

# Placeholders shared by both directions of the table.
_FIELDS = {
    "i": r"\d+",
    "ln": "input_layernorm|post_attention_layernorm",
    "attn_proj": "q_proj|k_proj|v_proj|o_proj",
    "qk_norm": "q_norm|k_norm",
    "mlp_proj": "gate_proj|up_proj|down_proj",
    "gdn_proj": "in_proj_qkv|in_proj_z|in_proj_a|in_proj_b|out_proj",
    "gdn_vec": "A_log|dt_bias",
}
# The one mapping table: HF key (text decoder, after prefix normalisation) <-> our param path.
KEY_MAP: list[tuple[str, str, tuple[Callable, Callable]]] = [
    ("model.embed_tokens.weight", "embed_tokens.embedding", _IDENT),
    ("model.norm.weight", "norm.weight", _IDENT),
    ("lm_head.weight", "lm_head", _T),
    ("model.layers.{i}.{ln}.weight", "layers.{i}.{ln}.weight", _IDENT),
    ("model.layers.{i}.self_attn.{attn_proj}.weight", "layers.{i}.self_attn.{attn_proj}.kernel", _T),
    ("model.layers.{i}.self_attn.{qk_norm}.weight", "layers.{i}.self_attn.{qk_norm}.weight", _IDENT),
    ("model.layers.{i}.mlp.{mlp_proj}.weight", "layers.{i}.mlp.{mlp_proj}.kernel", _T),
    ("model.layers.{i}.linear_attn.{gdn_proj}.weight", "layers.{i}.linear_attn.{gdn_proj}.kernel", _T),
    ("model.layers.{i}.linear_attn.conv1d.weight", "layers.{i}.linear_attn.conv1d", _CONV),
    ("model.layers.{i}.linear_attn.{gdn_vec}", "layers.{i}.linear_attn.{gdn_vec}", _IDENT),
    ("model.layers.{i}.linear_attn.norm.weight", "layers.{i}.linear_attn.norm.weight", _IDENT),
]
# Vision tower, multi-token-prediction head, and RoPE tables some older exports saved as buffers.
_SKIP = (re.compile(r"^model\.visual\."), re.compile(r"^mtp\."), re.compile(r"\.rotary_emb\.inv_freq$"))


def _regex(template: str) -> re.Pattern:
    parts = re.split(r"\{(\w+)\}", template)  # literal, field, literal, field, ...
    return re.compile("".join(re.escape(x) if i % 2 == 0 else f"(?P<{x}>{_FIELDS[x]})"
                              for i, x in enumerate(parts)))


_COMPILED = [(_regex(hf), hf, _regex(ours), ours, tf) for hf, ours, tf in KEY_MAP]

_ST_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16, "F64": np.float64,
              "I64": np.int64, "I32": np.int32}


class CheckpointError(ValueError):
    """The checkpoint folder is missing files/tensors or does not match its config."""


def _normalise_key(key: str) -> str | None:
    """HF key -> text-decoder key, or None for tensors the text model does not use."""
    if key.startswith("model.language_model."):
        key = "model." + key[len("model.language_model."):]
    if any(p.search(key) for p in _SKIP):
        return None
    return key


def hf_key_to_path(key: str) -> tuple[str, Callable] | None:
    """(our dotted param path, to_ours transform) for a HF key, None if skipped; raises if unknown."""
    key = _normalise_key(key)
    if key is None:
        return None
    for hf_re, _, _, ours, (to_ours, _) in _COMPILED:
        m = hf_re.fullmatch(key)
        if m:
            return ours.format(**m.groupdict()), to_ours
    raise CheckpointError(f"unrecognised checkpoint tensor {key!r}")


def path_to_hf_key(path: str) -> tuple[str, Callable]:
    """(HF key, to_hf transform) for one of our dotted param paths."""
    for _, hf, ours_re, _, (_, to_hf) in _COMPILED:
        m = ours_re.fullmatch(path)
        if m:
            return hf.format(**m.groupdict()), to_hf
    raise CheckpointError(f"no HF key for parameter {path!r}")


class _SafetensorsFile:
    """Lazy reader: header parsed once, each tensor a numpy view of a read-only memory map."""

    def __init__(self, path: str):
        self.path = path
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
        header.pop("__metadata__", None)
        self.header, self.offset = header, 8 + n
        self.mmap = np.memmap(path, dtype=np.uint8, mode="r")

    def keys(self):
        return self.header.keys()

    def get(self, key: str) -> np.ndarray:
        info = self.header[key]
        if info["dtype"] not in _ST_DTYPES:
            raise CheckpointError(f"{self.path}: tensor {key} has unsupported dtype {info['dtype']}")
        start, end = info["data_offsets"]
        raw = self.mmap[self.offset + start:self.offset + end]
        return raw.view(_ST_DTYPES[info["dtype"]]).reshape(info["shape"])


def _checkpoint_files(path: str) -> list[str]:
    index = os.path.join(path, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            names = sorted(set(json.load(f)["weight_map"].values()))
        return [os.path.join(path, n) for n in names]
    single = os.path.join(path, "model.safetensors")
    if os.path.exists(single):
        return [single]
    raise CheckpointError(f"{path}: no model.safetensors or model.safetensors.index.json")


def _iter_tensors(path: str) -> Iterator[tuple[str, np.ndarray]]:
    for file in _checkpoint_files(path):
        st = _SafetensorsFile(file)
        for key in st.keys():
            yield key, st.get(key)


def _flat_params(state) -> dict[str, nnx.Variable]:
    return {".".join(str(p) for p in path): var for path, var in nnx.to_flat_state(state)}


def _place(value: np.ndarray, dtype, sharding) -> jax.Array:
    """Device array from a (memory-mapped) host view. With a sharding, each device reads and casts
    only its own slice (also on multi-host meshes, where every host reads its local files)."""
    if sharding is None:
        return jnp.asarray(np.asarray(value, dtype=dtype))
    return jax.make_array_from_callback(value.shape, sharding, lambda idx: np.asarray(value[idx], dtype=dtype))


def _place_stacked(slices: list[np.ndarray], dtype, sharding) -> jax.Array:
    """`_place` for a param stacked over layer groups from its per-group host views: each device
    reads only the groups and the slice of each that it holds."""
    if sharding is None:
        return jnp.asarray(np.stack([np.asarray(x, dtype=dtype) for x in slices]))
    shape = (len(slices),) + slices[0].shape
    return jax.make_array_from_callback(shape, sharding, lambda idx: np.stack(
        [np.asarray(x[idx[1:]], dtype=dtype) for x in slices[idx[0]]]))


def load_hf_checkpoint(path: str, dtype: str = "float32", mesh=None, rules=None,
                       activation_dtype: str | None = None, **config_overrides) -> tuple[CausalLM, ModelConfig]:
    """Load a HF Qwen3 / Qwen3.5 checkpoint folder into a model with params in `dtype`.

    With `mesh` (+ logical `rules`) each tensor is placed directly into its NamedSharding.
    `config_overrides` set non-architecture ModelConfig fields (e.g. remat, scan_layers, gdn_chunk_size)."""
    cfg_path = os.path.join(path, "config.json")
    if not os.path.exists(cfg_path):
        raise CheckpointError(f"{path}: config.json not found")
    with open(cfg_path) as f:
        cfg = ModelConfig.from_hf_dict(json.load(f), param_dtype=dtype, dtype=activation_dtype or dtype,
                                       **config_overrides)
    graphdef, state = abstract_model(cfg)
    params = _flat_params(state)
    shardings: dict[str, jax.sharding.Sharding | None] = {p: None for p in params}
    if mesh is not None:
        with jax.set_mesh(mesh), nnx.logical_axis_rules(tuple(rules or ())):
            for p, var in params.items():
                shardings[p] = jax.sharding.NamedSharding(mesh, nnx.spmd.get_var_pspec(var) or jax.P())
    expected = {loop for p in params for loop, _ in loop_locations(cfg, p)}
    loaded: set[str] = set()
    pending: dict[str, dict[int, np.ndarray]] = {}  # stacked param -> its groups' views so far
    for key, arr in _iter_tensors(path):
        mapped = hf_key_to_path(key)
        if mapped is None:
            continue
        target, to_ours = mapped
        if target == "lm_head" and cfg.tie_word_embeddings:
            continue  # tied models reuse the embedding; some exports still carry a copy
        if target not in expected:
            raise CheckpointError(f"tensor {key} -> {target} has no place in a {cfg.family} model with this config")
        where, group = stacked_location(cfg, target)
        var = params[where]
        value = to_ours(arr)  # still a view of the memory map
        shape = var.shape if group is None else var.shape[1:]
        if value.shape != shape:
            raise CheckpointError(f"tensor {key}: shape {value.shape} does not match {target} {shape}")
        loaded.add(target)
        if group is None:
            var.set_value(_place(value, var.dtype, shardings[where]))
            continue
        groups = pending.setdefault(where, {})
        groups[group] = value
        if len(groups) == var.shape[0]:
            var.set_value(_place_stacked([groups[g] for g in range(len(groups))], var.dtype, shardings[where]))
            del pending[where]
    missing = sorted(expected - loaded)
    if missing:
        raise CheckpointError(f"{path}: checkpoint lacks {len(missing)} tensors, e.g. {missing[:5]}")
    return nnx.merge(graphdef, state), cfg


def _to_host(value: jax.Array) -> np.ndarray:
    if jax.process_count() > 1 and not value.is_fully_addressable:
        from jax.experimental import multihost_utils  # every process must join the gather

        return np.asarray(multihost_utils.process_allgather(value, tiled=True))
    return np.asarray(jax.device_get(value))


def _hf_tensor_sources(model: CausalLM) -> dict[str, tuple[nnx.Variable, int | None, Callable]]:
    """HF key -> (our param, group index into its stacked axis or None, to_hf transform), in the
    model's own layout (loop or scanned)."""
    sources = {}
    for p, var in _flat_params(nnx.state(model, nnx.Param)).items():
        for loop_path, group in loop_locations(model.cfg, p):
            key, to_hf = path_to_hf_key(loop_path)
            sources[key] = (var, group, to_hf)
    return sources


def save_hf_checkpoint(model: CausalLM, cfg: ModelConfig, path: str, max_shard_bytes: int = 5 << 30,
                       copy_tokenizer_from: str | None = None) -> None:
    """Write `config.json` + safetensors (sharded with an index above `max_shard_bytes`), and copy
    the tokenizer / generation files of `copy_tokenizer_from` (e.g. the source checkpoint) so the
    folder is directly usable by transformers or vLLM. Streams one file's tensors at a time to the
    host; on a multi-host mesh every process must call it and process 0 writes."""
    if cfg.layer_types != model.cfg.layer_types or cfg.vocab_size != model.cfg.vocab_size:
        raise CheckpointError("save_hf_checkpoint: cfg does not describe this model")
    from safetensors.numpy import save_file  # only export needs it

    writer = jax.process_index() == 0
    params = _hf_tensor_sources(model)
    shards: list[list[str]] = [[]]
    size = 0
    for key in sorted(params):  # plan files from shapes, before any transfer
        var, group, _ = params[key]
        shape = var.shape if group is None else var.shape[1:]
        nbytes = int(np.prod(shape)) * np.dtype(var.dtype).itemsize
        if shards[-1] and size + nbytes > max_shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append(key)
        size += nbytes
    names = ["model.safetensors"] if len(shards) == 1 else \
        [f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))]
    if writer:
        os.makedirs(path, exist_ok=True)
    total = 0
    for name, keys in zip(names, shards):
        tensors = {}
        for key in keys:
            var, group, to_hf = params[key]
            value = var.get_value() if group is None else var.get_value()[group]  # a group: sliced on device
            tensors[key] = np.ascontiguousarray(to_hf(_to_host(value)))
            total += tensors[key].nbytes
        if writer:
            save_file(tensors, os.path.join(path, name), metadata={"format": "pt"})
    if not writer:
        return
    if len(shards) > 1:
        weight_map = {k: name for name, keys in zip(names, shards) for k in keys}
        with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg.to_hf_dict(), f, indent=2)
    if copy_tokenizer_from:
        for name in TOKENIZER_FILES:
            src = os.path.join(copy_tokenizer_from, name)
            if os.path.exists(src):
                shutil.copyfile(src, os.path.join(path, name))
