"""Online GRPO of the Qwen3.5-9B engineer on one 8-GPU host (80 GB class), reference §6.

The reference split its 8 H800s into actor (TP 4), rollout engine (2), reference and actor-forward
(1 each). Here trainer and sampler share all 8 GPUs: mesh fsdp=2 x tensor=4 (the reference's TP 4
for the 40k-token sequences), sampling layout tensor-parallel with the batch over fsdp; weights
move between the layouts on device each step. Micro-batch 2 (one sequence per fsdp shard), so a
minibatch of 8 is 4 accumulation steps; full remat; bf16 activations, fp32 master weights.
Same algorithm settings as the TPU recipe.
"""
from hr1_jax.config import base_config


def get_config():
    c = base_config()
    c.model.family = "qwen3_5_text"
    c.model.param_dtype = "float32"
    c.model.dtype = "bfloat16"
    c.model.remat = True
    c.mesh.data, c.mesh.fsdp, c.mesh.tensor = 1, 2, 4
    c.target.kind = "openai"
    c.target.base_url = "http://127.0.0.1:8110/v1"
    c.target.model = "Qwen3.5-9B"
    c.target.name = "qwen35-9b-nothink"
    c.rollout.num_workers = 10
    t = c.train
    t.init_checkpoint = ""
    t.rows = ""
    t.logprob_chunk_size = 1024
    t.peak_flops_per_device = 989e12       # H100/H800 bf16 dense
    g = t.grpo
    g.prompts_per_step, g.samples_per_prompt, g.global_batch = 4, 8, 32
    g.iterations, g.buffer_epochs, g.micro_batch = 4, 1, 2
    g.num_steps = 174
    g.temperature, g.top_p = 0.7, 0.95
    g.lr, g.weight_decay, g.beta2, g.grad_clip = 1e-6, 0.1, 0.98, 1.0
    g.eps_clip, g.eps_clip_high, g.tis_cap = 0.2, 0.28, 2.0
    g.kl_coef, g.entropy_coef = 0.0, 0.0
    g.max_prompt_tokens, g.max_response_tokens = 28672, 12288
    g.save_every = 16
    return c
