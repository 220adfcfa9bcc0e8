"""Config section `train`: SFT and GRPO (reference spec §6, §7)."""
import ml_collections

from hr1_jax.config import require


def defaults() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.sft = ml_collections.ConfigDict()
    c.sft.lr = 1e-5
    c.sft.epochs = 2
    c.sft.warmup_ratio = 0.03
    c.sft.batch_size = 4
    c.sft.grad_accum = 4
    c.sft.max_seq_len = 32768
    c.grpo = ml_collections.ConfigDict()
    c.grpo.prompts_per_step = 4
    c.grpo.samples_per_prompt = 8
    c.grpo.global_batch = 32
    c.grpo.iterations = 4
    c.grpo.temperature = 0.7
    c.grpo.top_p = 0.95
    c.grpo.lr = 1e-6
    c.grpo.eps_clip = 0.2
    c.grpo.eps_clip_high = 0.28
    c.grpo.max_prompt_tokens = 28672
    c.grpo.max_response_tokens = 12288
    return c


def validate(c, config) -> None:
    g = c.grpo
    require(g.global_batch % (g.iterations) == 0, "train.grpo.global_batch",
            "must be divisible by train.grpo.iterations")
    require(g.prompts_per_step * g.samples_per_prompt == g.global_batch, "train.grpo.global_batch",
            "must equal train.grpo.prompts_per_step * train.grpo.samples_per_prompt")
    require(0 < g.top_p <= 1, "train.grpo.top_p", "must be in (0, 1]")
