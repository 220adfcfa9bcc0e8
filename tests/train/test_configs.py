"""Training configs validate (derived values checked at start-up) and launch scripts parse."""
import importlib
import subprocess

import pytest

from hr1_jax.config import ConfigError, validate_config

RECIPES = ["demo", "qwen3_5_9b_sft_tpu_v5p", "qwen3_5_9b_grpo_tpu_v5p", "qwen3_5_9b_grpo_8xgpu"]
SCRIPTS = ["launch/tpu_pod.sh", "launch/slurm_gpu.sbatch", "launch/local.sh", "launch/tensorboard.sh"]


@pytest.mark.parametrize("name", RECIPES)
def test_recipe_validates(name):
    c = importlib.import_module(f"configs.{name}").get_config()
    validate_config(c)
    g = c.train.grpo
    assert g.prompts_per_step * g.samples_per_prompt == g.global_batch


def test_real_recipes_keep_reference_algorithm_settings():
    for name in RECIPES[2:]:
        g = importlib.import_module(f"configs.{name}").get_config().train.grpo
        assert (g.global_batch, g.iterations, g.temperature, g.top_p, g.lr) == (32, 4, 0.7, 0.95, 1e-6)
        assert (g.eps_clip, g.eps_clip_high, g.kl_coef) == (0.2, 0.28, 0.0)


def test_bad_grpo_batch_names_the_key():
    c = importlib.import_module("configs.demo").get_config()
    c.train.grpo.micro_batch = 3
    with pytest.raises(ConfigError, match="train.grpo.micro_batch"):
        validate_config(c)
    c = importlib.import_module("configs.demo").get_config()
    c.train.grpo.global_batch = 12
    with pytest.raises(ConfigError, match="train.grpo.global_batch"):
        validate_config(c)


@pytest.mark.parametrize("script", SCRIPTS)
def test_launch_script_parses_and_prints_usage(script):
    subprocess.run(["bash", "-n", script], check=True)
    if script.endswith(".sh") and "tensorboard" not in script:
        out = subprocess.run(["bash", script], capture_output=True, text=True)
        assert out.returncode == 2 and "Usage" in out.stdout
