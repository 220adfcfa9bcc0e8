"""The training engine starting from a Hugging Face checkpoint folder."""
from configs.default import get_config
from fixtures.hf_engineer import save_engineer
from hr1_jax.train.engine import Engineer


def test_hf_checkpoint_keeps_architecture_and_takes_runtime_options_from_config(tmp_path):
    save_engineer(tmp_path, "qwen3")
    c = get_config()
    c.model.hf_checkpoint = str(tmp_path)
    c.model.remat, c.model.dtype = True, "bfloat16"
    c.model.hidden_size = 999  # architecture fields of the config are ignored for a checkpoint
    engineer = Engineer(c, stage="test")
    assert engineer.cfg.remat and engineer.cfg.dtype == "bfloat16"
    assert engineer.cfg.hidden_size != 999 and engineer.cfg.param_dtype == "float32"


def test_restored_params_keep_the_layout_they_were_saved_in(tmp_path):
    import jax
    import numpy as np

    save_engineer(tmp_path / "hf", "qwen3")
    c = get_config()
    c.model.hf_checkpoint, c.model.scan_layers = str(tmp_path / "hf"), True
    first = Engineer(c, stage="test")
    folder = first.export(first.init_params, str(tmp_path / "sft"))
    c2 = get_config()
    c2.train.init_checkpoint, c2.model.scan_layers = folder, False  # the saved layout wins
    second = Engineer(c2, stage="test")
    assert second.cfg.scan_layers
    a, b = (jax.tree.leaves(jax.device_get(e.init_params)) for e in (first, second))
    assert len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))
