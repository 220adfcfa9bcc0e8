"""Shared settings of the paper-table configs (configs/eval_*.py): whole test splits, the frozen
target and the frontier editors from environment variables, so the configs hold no URLs or keys.

- HR1_TARGET_URL / HR1_TARGET_MODEL / HR1_TARGET_API_KEY_ENV: the frozen target (an
  OpenAI-compatible endpoint; the reference's is Qwen3.5-9B). Unset: the scripted target.
- HR1_EDITOR_<KEY>_URL (and optionally HR1_EDITOR_<KEY>_MODEL, HR1_EDITOR_<KEY>_API_KEY_ENV):
  one fixed frontier editor row per KEY of FRONTIER_EDITORS that has a URL.
"""
import os

from envs.registry import names
from hr1_jax.config import base_config

# key, display name, default model id, default API-key variable (the editors the paper names)
FRONTIER_EDITORS = (
    ("glm", "GLM-5.2", "glm-5.2", "GLM_API_KEY"),
    ("qwen", "Qwen3.5-397B", "Qwen/Qwen3.5-397B-A17B", "QWEN_API_KEY"),
    ("deepseek", "DeepSeek-V4-Pro", "deepseek-v4-pro", "DEEPSEEK_API_KEY"),
)


def _target_from_env(c) -> None:
    url = os.environ.get("HR1_TARGET_URL", "")
    if url:
        c.target.kind, c.target.base_url = "openai", url
        c.target.model = os.environ.get("HR1_TARGET_MODEL", "Qwen/Qwen3.5-9B")
        c.target.name = c.target.model
        c.target.api_key_env = os.environ.get("HR1_TARGET_API_KEY_ENV", c.target.api_key_env)


def add_frontier_editors(c) -> None:
    for key, name, model, key_env in FRONTIER_EDITORS:
        url = os.environ.get(f"HR1_EDITOR_{key.upper()}_URL", "")
        if url:
            c.eval.editors[key] = dict(spec=url, name=name,
                                       model=os.environ.get(f"HR1_EDITOR_{key.upper()}_MODEL", model),
                                       api_key_env=os.environ.get(f"HR1_EDITOR_{key.upper()}_API_KEY_ENV", key_env))


def table_config():
    """The reference's test splits in full (ALFWorld 432, WebShop 500, DBBench 300), one target seed,
    only the methods a table asks for (each config turns its own on)."""
    c = base_config()
    _target_from_env(c)
    e = c.eval
    e.benchmarks = ",".join(names())
    e.tasks.update("all")
    e.seeds = "0"
    e.compare_teacher = False
    e.fixed_editors = ""
    e.self_refine = False
    e.best_of_n = False
    e.heldout_evidence = 0
    return c
