"""Tiny random Hugging Face Qwen3 / Qwen3.5 models, created locally with transformers + torch (no hub).

Init is scaled up (embeddings std 1, kernels std 0.15, norm weights perturbed) so logits are O(1-10)
and a mapping or norm-convention bug shows up far above the 1e-4 parity tolerance.
"""
from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile

import numpy as np

VOCAB = 128


def qwen3_config(tie: bool):
    from transformers import Qwen3Config

    return Qwen3Config(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
                       tie_word_embeddings=tie, rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                       rms_norm_eps=1e-6)


def qwen3_5_config():
    from transformers import Qwen3_5TextConfig

    return Qwen3_5TextConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, max_position_embeddings=512, tie_word_embeddings=False,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
        layer_types=["linear_attention"] * 3 + ["full_attention"], linear_conv_kernel_dim=4,
        linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16,
        rms_norm_eps=1e-6)


def scale_init(model, seed: int = 0) -> None:
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen)
            if "embed_tokens" in name:
                p.copy_(noise)
            elif name.endswith(("A_log", "dt_bias")):
                p.add_(0.1 * noise)
            elif p.ndim >= 2:
                p.copy_(0.15 * noise if "conv1d" not in name else 0.4 * noise)
            else:  # norm weights: Qwen3 around 1, Qwen3.5 (1 + w) around 0
                p.add_(0.1 * noise)


def make_hf_model(kind: str, seed: int = 0):
    """kind: 'qwen3_tied' | 'qwen3_untied' | 'qwen3_5'. Returns an fp32 eval-mode torch model."""
    import torch
    from transformers import Qwen3_5ForCausalLM, Qwen3ForCausalLM

    torch.manual_seed(seed)
    if kind == "qwen3_5":
        model = Qwen3_5ForCausalLM(qwen3_5_config())
    else:
        model = Qwen3ForCausalLM(qwen3_config(tie=kind == "qwen3_tied"))
    scale_init(model, seed)
    return model.eval()


def save_hf_model(kind: str, path: str, seed: int = 0):
    model = make_hf_model(kind, seed)
    model.save_pretrained(path)
    return model


@functools.cache
def cached_checkpoint(kind: str):
    """(torch model, checkpoint folder) made once per test process and shared by the test modules."""
    path = tempfile.mkdtemp(prefix=f"hr1_{kind}_")
    atexit.register(shutil.rmtree, path, True)
    return save_hf_model(kind, path), path


def hf_logits(model, ids: np.ndarray, attention_mask: np.ndarray | None = None,
              position_ids: np.ndarray | None = None) -> np.ndarray:
    import torch

    kw = {}
    if attention_mask is not None:
        kw["attention_mask"] = torch.as_tensor(attention_mask)
    if position_ids is not None:
        kw["position_ids"] = torch.as_tensor(position_ids)
    with torch.no_grad():
        return model(torch.as_tensor(ids), **kw).logits.float().numpy()


def quiet_torch() -> None:
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    import torch

    torch.set_num_threads(1)


def jitted_forward():
    """One jitted forward for all model tests: each (shape, cache-or-not) pair compiles once."""
    from flax import nnx

    @nnx.jit
    def forward(model, ids, mask, cache=None):
        return model(ids, cache=cache, attention_mask=mask)

    return forward
