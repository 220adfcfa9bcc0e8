"""Engineer model graphs (Qwen3 dense, Qwen3.5 text hybrid) and Hugging Face checkpoint I/O.

  cfg = ModelConfig.from_section(config.model)          # or ModelConfig.from_hf_dict(config_json)
  model = build_model(cfg, nnx.Rngs(0), mesh=None, rules=None)
  logits, cache = model(input_ids, positions=None, cache=None, attention_mask=None)
  model, cfg = load_hf_checkpoint(path, dtype="bfloat16", mesh=mesh, rules=rules)
  save_hf_checkpoint(model, cfg, path)
"""
from __future__ import annotations

from hr1_jax.models.cache import Cache, GDNCache, KVCache, init_cache
from hr1_jax.models.config import ModelConfig
from hr1_jax.models.layers import LOGICAL_AXES
from hr1_jax.models.hf_io import load_hf_checkpoint, save_hf_checkpoint
from hr1_jax.models.model import CausalLM, abstract_model, build_model, sharding_context

__all__ = [
    "Cache", "CausalLM", "GDNCache", "KVCache", "LOGICAL_AXES", "ModelConfig", "abstract_model",
    "build_model", "init_cache", "load_hf_checkpoint", "save_hf_checkpoint", "sharding_context",
]
