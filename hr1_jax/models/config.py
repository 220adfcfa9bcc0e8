"""Config section `model` and the frozen `ModelConfig` the model graphs are built from.

`ModelConfig` is the single architecture description: built from the experiment section
(`from_section`), from a Hugging Face `config.json` (`from_hf_dict`) and written back for export
(`to_hf_dict`). Field names follow HF where they exist (`num_layers` = `num_hidden_layers`).
"""
from __future__ import annotations

import dataclasses
from typing import Any

import ml_collections

from hr1_jax.config import ConfigError, require
from hr1_jax.models.fused_attention import IMPLEMENTATIONS as ATTENTION_IMPLS

FAMILIES = ("qwen3", "qwen3_5_text")
DTYPES = ("float32", "bfloat16")
LAYER_TYPES = ("full_attention", "linear_attention")
# remat_policy -> the jax.checkpoint_policies entry saying what a rematerialised block keeps for the
# backward pass: "full" keeps only the block's input (recomputes everything), "dots" every matmul
# output, "dots_with_no_batch_dims" the weight projections but not the attention-score einsums.
REMAT_POLICIES = {"full": "nothing_saveable", "dots": "dots_saveable",
                  "dots_with_no_batch_dims": "dots_with_no_batch_dims_saveable"}
# scan_layers=None (auto) scans models of at least this many layers: from 8 layers a scanned 9B-shaped
# train step compiles faster, below it the loop compiles as fast and steps faster (benchmarks/README.md,
# "Loop vs scan").
SCAN_MIN_LAYERS = 8
# Qwen3.5 rotates only the first quarter of each head (HF default when the config omits it).
QWEN3_5_PARTIAL_ROTARY = 0.25


def defaults() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.family = "qwen3"
    c.hf_checkpoint = ""      # a local HF folder (config.json + safetensors); "" = random init
    c.tokenizer = ""          # "" = from hf_checkpoint, or the project-trained SentencePiece model
    c.param_dtype = "float32"
    c.dtype = "float32"       # activation dtype
    c.remat = False
    c.remat_policy = "full"   # what a remat'd block keeps: one of REMAT_POLICIES
    # Stack the decoder layers and run them under one scan (compiles one layer group, not every
    # layer); None = auto (on from SCAN_MIN_LAYERS layers).
    c.scan_layers = ml_collections.config_dict.placeholder(bool)
    # Architecture for random init (tiny Qwen3-style engineer by default).
    c.vocab_size = 2048
    c.hidden_size = 128
    c.intermediate_size = 384
    c.num_layers = 2
    c.num_heads = 4
    c.num_kv_heads = 2
    c.head_dim = 32
    c.rope_theta = 1_000_000.0
    c.partial_rotary_factor = -1.0   # -1 = family default (qwen3 1.0, qwen3_5_text 0.25)
    c.rms_norm_eps = 1e-6
    c.tie_word_embeddings = True
    # qwen3_5_text only: every `full_attention_interval`-th layer is full attention, the rest GDN.
    c.full_attention_interval = 4
    c.linear_conv_kernel_dim = 4
    c.linear_num_key_heads = 2
    c.linear_num_value_heads = 4
    c.linear_key_head_dim = 32
    c.linear_value_head_dim = 32
    c.gdn_chunk_size = 64
    c.attn_chunk_size = 1024  # queries per attention block: score memory O(T * this) for long sequences
    # The train step's attention (models/fused_attention.py): auto = cuDNN's fused kernel on a GPU
    # with bf16/fp16 activations, else the blocked XLA path; splash (TPU), cudnn, blocked, xla force one.
    c.attention_impl = "auto"
    return c


def validate(c, config) -> None:
    require(c.family in FAMILIES, "model.family", f"must be one of {FAMILIES}")
    require(c.param_dtype in DTYPES, "model.param_dtype", f"must be one of {DTYPES}")
    require(c.dtype in DTYPES, "model.dtype", f"must be one of {DTYPES}")
    require(c.num_heads % c.num_kv_heads == 0, "model.num_kv_heads", "must divide model.num_heads")
    require(c.linear_num_value_heads % c.linear_num_key_heads == 0, "model.linear_num_key_heads",
            "must divide model.linear_num_value_heads")
    require(c.full_attention_interval >= 1, "model.full_attention_interval", "must be >= 1")
    require(c.gdn_chunk_size >= 1, "model.gdn_chunk_size", "must be >= 1")
    require(c.attn_chunk_size >= 1, "model.attn_chunk_size", "must be >= 1")
    require(c.attention_impl in ATTENTION_IMPLS, "model.attention_impl", f"must be one of {ATTENTION_IMPLS}")
    require(c.remat_policy in REMAT_POLICIES, "model.remat_policy", f"must be one of {tuple(REMAT_POLICIES)}")


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    family: str = "qwen3"
    vocab_size: int = 2048
    hidden_size: int = 128
    intermediate_size: int = 384
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    head_dim: int = 32
    rope_theta: float = 1_000_000.0
    partial_rotary_factor: float = 1.0
    rms_norm_eps: float = 1e-6
    tie_word_embeddings: bool = True
    layer_types: tuple[str, ...] = ()          # one per layer; () = all full_attention
    linear_conv_kernel_dim: int = 4
    linear_num_key_heads: int = 16
    linear_num_value_heads: int = 32
    linear_key_head_dim: int = 128
    linear_value_head_dim: int = 128
    max_position_embeddings: int = 32768       # informational (RoPE has no table); kept for export
    bos_token_id: int | None = None
    eos_token_id: int | tuple[int, ...] | None = None
    pad_token_id: int | None = None
    param_dtype: str = "float32"
    dtype: str = "float32"
    remat: bool = False
    remat_policy: str = "full"
    scan_layers: bool | None = None             # None = auto: on from SCAN_MIN_LAYERS layers
    gdn_chunk_size: int = 64
    attn_chunk_size: int = 1024                # queries per attention block (bounds score memory)
    attention_impl: str = "auto"               # the no-cache attention (models/fused_attention.py)

    def __post_init__(self):
        if self.family not in FAMILIES:
            raise ConfigError("model.family", f"must be one of {FAMILIES}, got {self.family!r}")
        if not self.layer_types:
            object.__setattr__(self, "layer_types", ("full_attention",) * self.num_layers)
        object.__setattr__(self, "layer_types", tuple(self.layer_types))
        if self.scan_layers is None:
            object.__setattr__(self, "scan_layers", self.num_layers >= SCAN_MIN_LAYERS)
        if isinstance(self.eos_token_id, list):
            object.__setattr__(self, "eos_token_id", tuple(self.eos_token_id))
        checks = [
            (len(self.layer_types) == self.num_layers, "layer_types", "needs one entry per layer"),
            (all(t in LAYER_TYPES for t in self.layer_types), "layer_types", f"entries must be in {LAYER_TYPES}"),
            (self.family == "qwen3_5_text" or set(self.layer_types) == {"full_attention"}, "layer_types",
             "qwen3 has only full_attention layers"),
            (self.num_heads % self.num_kv_heads == 0, "num_kv_heads", "must divide num_heads"),
            (self.linear_num_value_heads % self.linear_num_key_heads == 0, "linear_num_key_heads",
             "must divide linear_num_value_heads"),
            (0.0 < self.partial_rotary_factor <= 1.0, "partial_rotary_factor", "must be in (0, 1]"),
            (self.rotary_dim % 2 == 0 and self.rotary_dim > 0, "partial_rotary_factor",
             "head_dim * factor must be a positive even number"),
            (self.param_dtype in DTYPES and self.dtype in DTYPES, "dtype", f"must be one of {DTYPES}"),
            (self.gdn_chunk_size >= 1 and self.attn_chunk_size >= 1, "gdn_chunk_size", "chunk sizes must be >= 1"),
            (self.remat_policy in REMAT_POLICIES, "remat_policy", f"must be one of {tuple(REMAT_POLICIES)}"),
            (self.attention_impl in ATTENTION_IMPLS, "attention_impl", f"must be one of {ATTENTION_IMPLS}"),
        ]
        for ok, key, msg in checks:
            if not ok:
                raise ConfigError(f"model.{key}", msg)

    @property
    def rotary_dim(self) -> int:
        return int(self.head_dim * self.partial_rotary_factor)

    @property
    def scan_period(self) -> int:
        """Layers per scanned group: the shortest prefix of `layer_types` that repeats to the whole
        stack (1 for Qwen3; 4 = [3 x GDN, full attention] for Qwen3.5's interval-4 pattern). A
        pattern that does not repeat is one group of every layer (scanned once, nothing saved)."""
        n = self.num_layers
        return next(p for p in range(1, n + 1)
                    if n % p == 0 and self.layer_types == self.layer_types[:p] * (n // p))

    @property
    def num_layer_groups(self) -> int:
        return self.num_layers // self.scan_period

    @property
    def gated_attention(self) -> bool:
        """Qwen3.5 full-attention layers: q_proj also emits a per-head sigmoid output gate."""
        return self.family == "qwen3_5_text"

    @property
    def zero_centred_norms(self) -> bool:
        """Qwen3.5 RMSNorms store w and scale by (1 + w); Qwen3 scales by w."""
        return self.family == "qwen3_5_text"

    def replace(self, **changes) -> "ModelConfig":
        return dataclasses.replace(self, **changes)

    # ---- experiment config section -------------------------------------------------------------
    @classmethod
    def from_section(cls, c) -> "ModelConfig":
        """Architecture from the `model` config section (random init; HF checkpoints carry their own)."""
        prf = c.partial_rotary_factor
        if prf < 0:
            prf = QWEN3_5_PARTIAL_ROTARY if c.family == "qwen3_5_text" else 1.0
        layer_types: tuple[str, ...] = ()
        if c.family == "qwen3_5_text":
            n = c.full_attention_interval
            layer_types = tuple("full_attention" if (i + 1) % n == 0 else "linear_attention"
                                for i in range(c.num_layers))
        return cls(
            family=c.family, vocab_size=c.vocab_size, hidden_size=c.hidden_size,
            intermediate_size=c.intermediate_size, num_layers=c.num_layers, num_heads=c.num_heads,
            num_kv_heads=c.num_kv_heads, head_dim=c.head_dim, rope_theta=float(c.rope_theta),
            partial_rotary_factor=float(prf), rms_norm_eps=c.rms_norm_eps,
            tie_word_embeddings=bool(c.tie_word_embeddings), layer_types=layer_types,
            linear_conv_kernel_dim=c.linear_conv_kernel_dim, linear_num_key_heads=c.linear_num_key_heads,
            linear_num_value_heads=c.linear_num_value_heads, linear_key_head_dim=c.linear_key_head_dim,
            linear_value_head_dim=c.linear_value_head_dim, param_dtype=c.param_dtype, dtype=c.dtype,
            gdn_chunk_size=c.gdn_chunk_size, attn_chunk_size=c.attn_chunk_size,
            **ModelConfig._layout_options(c),
        )

    @staticmethod
    def runtime_options(c) -> dict[str, Any]:
        """Non-architecture fields of the `model` section, to apply on top of a checkpoint's config:
        `load_hf_checkpoint(path, dtype=c.param_dtype, **ModelConfig.runtime_options(c))`."""
        return dict(activation_dtype=c.dtype, gdn_chunk_size=c.gdn_chunk_size,
                    attn_chunk_size=c.attn_chunk_size, **ModelConfig._layout_options(c))

    @staticmethod
    def _layout_options(c) -> dict[str, Any]:
        """How the layers are run and rematerialised (not part of the architecture)."""
        scan = None if c.scan_layers is None else bool(c.scan_layers)
        return dict(remat=bool(c.remat), remat_policy=c.remat_policy, scan_layers=scan,
                    attention_impl=c.attention_impl)

    # ---- Hugging Face config.json --------------------------------------------------------------
    @classmethod
    def from_hf_dict(cls, d: dict[str, Any], **overrides) -> "ModelConfig":
        """Parse a HF `config.json` dict (Qwen3, Qwen3.5 text, or the Qwen3.5 VLM wrapper)."""
        top = d
        model_type = d.get("model_type")
        if model_type in ("qwen3_5", "qwen3_5_text") or "text_config" in d:
            d = d.get("text_config", d)
            family = "qwen3_5_text"
        elif model_type == "qwen3":
            family = "qwen3"
        else:
            raise ConfigError("model.hf_checkpoint", f"unsupported model_type {model_type!r}; "
                              "expected qwen3, qwen3_5 or qwen3_5_text")
        rope = dict(d.get("rope_parameters") or d.get("rope_scaling") or {})
        rope_type = rope.get("rope_type", rope.get("type", "default"))
        if rope_type not in ("default", "mrope"):
            raise ConfigError("model.hf_checkpoint", f"rope_type {rope_type!r} is not supported (only default)")
        theta = rope.get("rope_theta", d.get("rope_theta"))
        if theta is None:
            raise ConfigError("model.hf_checkpoint", "config.json has no rope_theta (top level or rope_parameters)")
        default_prf = QWEN3_5_PARTIAL_ROTARY if family == "qwen3_5_text" else 1.0
        prf = rope.get("partial_rotary_factor", d.get("partial_rotary_factor", default_prf))
        if d.get("attention_bias", False):
            raise ConfigError("model.hf_checkpoint", "attention_bias=True is not supported")
        if d.get("hidden_act", "silu") != "silu":
            raise ConfigError("model.hf_checkpoint", f"hidden_act {d.get('hidden_act')!r} is not supported")
        n_layers = d["num_hidden_layers"]
        layer_types = d.get("layer_types")
        if family == "qwen3":
            if layer_types and set(layer_types) != {"full_attention"}:
                raise ConfigError("model.hf_checkpoint", "qwen3 sliding-window layers are not supported")
            layer_types = None
        elif not layer_types:
            n = d.get("full_attention_interval", 4)
            layer_types = ["full_attention" if (i + 1) % n == 0 else "linear_attention" for i in range(n_layers)]
        # The VLM wrapper's top-level flag is the one transformers applies to the LM head.
        tie = top.get("tie_word_embeddings", d.get("tie_word_embeddings", False))
        fields = dict(
            family=family, vocab_size=d["vocab_size"], hidden_size=d["hidden_size"],
            intermediate_size=d["intermediate_size"], num_layers=n_layers,
            num_heads=d["num_attention_heads"], num_kv_heads=d.get("num_key_value_heads", d["num_attention_heads"]),
            head_dim=d.get("head_dim") or d["hidden_size"] // d["num_attention_heads"],
            rope_theta=float(theta), partial_rotary_factor=float(prf),
            rms_norm_eps=d.get("rms_norm_eps", 1e-6), tie_word_embeddings=bool(tie),
            layer_types=tuple(layer_types or ()),
            max_position_embeddings=d.get("max_position_embeddings", 32768),
            bos_token_id=d.get("bos_token_id"), eos_token_id=d.get("eos_token_id"),
            pad_token_id=d.get("pad_token_id"),
        )
        if family == "qwen3_5_text":
            fields.update(
                linear_conv_kernel_dim=d.get("linear_conv_kernel_dim", 4),
                linear_num_key_heads=d["linear_num_key_heads"], linear_num_value_heads=d["linear_num_value_heads"],
                linear_key_head_dim=d["linear_key_head_dim"], linear_value_head_dim=d["linear_value_head_dim"],
            )
        fields.update(overrides)
        return cls(**fields)

    def to_hf_dict(self) -> dict[str, Any]:
        """A `config.json` dict that transformers 5 loads as Qwen3ForCausalLM / Qwen3_5ForCausalLM."""
        eos = list(self.eos_token_id) if isinstance(self.eos_token_id, tuple) else self.eos_token_id
        d: dict[str, Any] = {
            "vocab_size": self.vocab_size, "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size, "num_hidden_layers": self.num_layers,
            "num_attention_heads": self.num_heads, "num_key_value_heads": self.num_kv_heads,
            "head_dim": self.head_dim, "hidden_act": "silu", "rms_norm_eps": self.rms_norm_eps,
            "max_position_embeddings": self.max_position_embeddings,
            "tie_word_embeddings": self.tie_word_embeddings, "attention_bias": False,
            "attention_dropout": 0.0, "initializer_range": 0.02, "use_cache": True,
            "layer_types": list(self.layer_types),
            "bos_token_id": self.bos_token_id, "eos_token_id": eos, "pad_token_id": self.pad_token_id,
            "dtype": self.param_dtype,
        }
        rope = {"rope_type": "default", "rope_theta": self.rope_theta}
        if self.family == "qwen3":
            d.update(model_type="qwen3", architectures=["Qwen3ForCausalLM"], sliding_window=None,
                     use_sliding_window=False, max_window_layers=self.num_layers)
        else:
            rope["partial_rotary_factor"] = self.partial_rotary_factor
            d.update(model_type="qwen3_5_text", architectures=["Qwen3_5ForCausalLM"],
                     linear_conv_kernel_dim=self.linear_conv_kernel_dim,
                     linear_num_key_heads=self.linear_num_key_heads,
                     linear_num_value_heads=self.linear_num_value_heads,
                     linear_key_head_dim=self.linear_key_head_dim,
                     linear_value_head_dim=self.linear_value_head_dim)
        d["rope_parameters"] = rope
        return d
