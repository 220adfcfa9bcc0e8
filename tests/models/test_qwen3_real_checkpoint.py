"""Real-weights parity, opt-in: HR1_REAL_CHECKPOINT=/path/to/hf/folder (Qwen3 or Qwen3.5, local).

Loads the folder with our loader and with transformers (fp32, CPU) and compares logits on a fixed
token sequence. Skipped when the variable is unset (CI has no real weights).
"""
import os

import jax.numpy as jnp
import numpy as np
import pytest

PATH = os.environ.get("HR1_REAL_CHECKPOINT", "")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not PATH, reason="HR1_REAL_CHECKPOINT not set")]


def test_real_checkpoint_logits_match_transformers():
    torch = pytest.importorskip("torch")
    from transformers import AutoModelForCausalLM

    from hr1_jax.models import load_hf_checkpoint

    model, cfg = load_hf_checkpoint(PATH, dtype="float32")
    ids = (np.arange(1, 33, dtype=np.int32)[None] * 997) % cfg.vocab_size
    ours, _ = model(jnp.asarray(ids))
    ref_model = AutoModelForCausalLM.from_pretrained(PATH, dtype=torch.float32).eval()
    with torch.no_grad():
        ref = ref_model(torch.as_tensor(ids).long()).logits.float().numpy()
    ours = np.asarray(ours)
    scale = np.abs(ref).max()
    assert np.abs(ours - ref).max() <= 1e-3 * scale, (np.abs(ours - ref).max(), scale)
    assert (ours.argmax(-1) == ref.argmax(-1)).mean() > 0.95
