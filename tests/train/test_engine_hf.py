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
