"""Online GRPO of the Qwen3.5-9B engineer on one 8-GPU host (80 GB class), reference §6.

The reference split its 8 H800s into actor (TP 4), rollout engine (2), reference and actor-forward
(1 each). Here trainer and sampler share all 8 GPUs: mesh fsdp=2 x tensor=4 (the reference's TP 4
for the 40k-token sequences), sampling layout tensor-parallel with the batch over fsdp; weights
move between the layouts on device each step. Micro-batch 2 (one sequence per fsdp shard), so a
minibatch of 8 is 4 accumulation steps; full remat; bf16 activations, fp32 master weights.
Same algorithm settings as the TPU recipe.
"""
import importlib.util
import pathlib


def _tpu_recipe():
    # Loaded by path: config files are loaded by path too, so `configs` need not be importable.
    path = pathlib.Path(__file__).with_name("qwen3_5_9b_grpo_tpu_v5p.py")
    spec = importlib.util.spec_from_file_location("qwen3_5_9b_grpo_tpu_v5p", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.get_config()


def get_config():
    # The TPU recipe's algorithm settings; only the hardware layout differs.
    c = _tpu_recipe()
    c.mesh.data, c.mesh.fsdp, c.mesh.tensor = 1, 2, 4
    c.train.logprob_chunk_size = 1024
    c.train.peak_flops_per_device = 989e12       # H100/H800 bf16 dense
    c.train.grpo.micro_batch = 2
    return c
