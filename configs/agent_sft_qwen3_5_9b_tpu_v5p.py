"""Agent SFT of a Qwen3.5-9B TARGET on a TPU v5p-64 slice (32 chips), reference §7.

Reference (`qwen35_9b_agent_sft.example.yaml`): template qwen3_5_text_nothink (thinking off),
cutoff 24576, otherwise the engineer cold start's hyper-parameters (full fine-tune, lr 1e-5,
2 epochs, cosine with 3% warm-up, bf16, gradient checkpointing, 32 sequences per update) on the
2,515 successful no-intervention trajectories of the SFT-split baselines (901 WebShop / 774 ALFWorld
/ 840 DBBench). The checkpoint's own chat template renders the tool schema and tool calls.

  bash launch/tpu_pod.sh NAME ZONE agent-sft configs/agent_sft_qwen3_5_9b_tpu_v5p.py /mnt/shared/runs/agent_sft \\
       --config.model.hf_checkpoint=/mnt/shared/Qwen3.5-9B --config.train.agent_sft.baseline_dir=/mnt/shared/runs/base/baseline
then `hr1 serve --checkpoint=/mnt/shared/runs/agent_sft/final_params --port=8000` (or vLLM on hf_export/).
"""
from hr1_jax.config import base_config
from hr1_jax.train.agent_sft import agent_sft_defaults


def get_config():
    c = base_config()
    c.model.family = "qwen3_5_text"
    c.model.hf_checkpoint = ""            # required: local HF folder of Qwen3.5-9B (config + safetensors)
    c.model.param_dtype = "float32"
    c.model.dtype = "bfloat16"
    c.model.remat = True
    c.model.remat_policy = "full"
    c.model.scan_layers = True
    c.mesh.data, c.mesh.fsdp, c.mesh.tensor = 1, -1, 1
    t = c.train
    t.seed = 42
    t.logprob_chunk_size = 2048
    t.peak_flops_per_device = 459e12
    t.agent_sft = agent_sft_defaults()
    t.agent_sft.splits = ("train",)       # the SFT split's baseline batches
    s = t.sft
    s.lr, s.epochs, s.warmup_ratio, s.weight_decay, s.grad_clip = 1e-5, 2, 0.03, 0.0, 1.0
    s.batch_size = 32                     # one sequence per chip
    s.grad_accum = 1
    s.max_seq_len = 24576                 # reference cutoff
    s.buckets = (4096, 8192, 16384, 24576)
    s.save_every = 100
    t.checkpoint.max_to_keep = 2
    t.checkpoint.export_hf = True
    return c
