"""Online GRPO of the SFT'd Qwen3.5-9B engineer on a TPU v5p-64 slice (32 chips), reference §6.

Reference: 4 prompts x 8 samples = global batch 32, 4 optimiser iterations per rollout batch
(minibatch 8 = one prompt group), temperature 0.7, top-p 0.95, lr 1e-6 constant, Adam beta2 0.98,
weight decay 0.1, PPO clip 0.2 / 0.28, TIS, KL off, max prompt 28672 + response 12288 tokens.
Here: mesh fsdp=8 x tensor=4 (heads/MLP/vocab tensor-parallel so a 40k-token sequence fits one
fsdp shard), micro-batch 8 = one sequence per fsdp shard, full remat; the sampler uses the
sampling layout (weights tensor-parallel only, batch over fsdp), moved from the trainer on device
each step. Rewards come from subprocess workers on the hosts' CPUs (rollout.num_workers per host)
talking to the frozen target endpoint.
"""
from hr1_jax.config import base_config


def get_config():
    c = base_config()
    c.model.family = "qwen3_5_text"
    c.model.param_dtype = "float32"
    c.model.dtype = "bfloat16"
    c.model.remat = True
    c.model.remat_policy = "full"         # keep only each block's input (40k-token sequences)
    c.model.scan_layers = True            # 8 scanned [3 x GDN, attention] groups: one group compiled
    c.mesh.data, c.mesh.fsdp, c.mesh.tensor = 1, 8, 4
    c.target.kind = "openai"
    c.target.base_url = "http://127.0.0.1:8110/v1"   # the frozen Qwen3.5-9B target (no thinking)
    c.target.model = "Qwen3.5-9B"
    c.target.name = "qwen35-9b-nothink"
    c.rollout.num_workers = 10
    t = c.train
    t.init_checkpoint = ""                 # required: <sft workdir>/final_params (or its hf_export)
    t.rows = ""                            # required: grouped RL rows (hr1 build-rows -> rows/rl_grouped.jsonl)
    t.logprob_chunk_size = 2048
    t.peak_flops_per_device = 459e12
    g = t.grpo
    g.prompts_per_step, g.samples_per_prompt, g.global_batch = 4, 8, 32
    g.iterations, g.buffer_epochs, g.micro_batch = 4, 1, 8
    g.num_steps = 174
    g.temperature, g.top_p = 0.7, 0.95
    g.lr, g.weight_decay, g.beta2, g.grad_clip = 1e-6, 0.1, 0.98, 1.0
    g.eps_clip, g.eps_clip_high, g.tis_cap = 0.2, 0.28, 2.0
    g.kl_coef, g.entropy_coef = 0.0, 0.0
    g.agg_mode = "seq-mean-token-mean"
    g.max_prompt_tokens, g.max_response_tokens = 28672, 12288
    g.save_every = 16
    return c
