"""Cold-start SFT of a Qwen3.5-9B engineer on a TPU v5p-64 slice (32 chips), reference §7.

Reference: full fine-tune, cutoff 32768, lr 1e-5, 2 epochs, cosine with 3% warm-up, bf16,
gradient checkpointing, effective batch 32 (1 per device x 4 accumulation x 8 GPUs).
Here: FSDP over all 32 chips (a 9B model's params + AdamW state are ~144 GB in fp32, 4.5 GB per
chip), one 32k-token sequence per chip per micro-batch, full remat, bf16 activations with fp32
master params. Global micro-batch 32 x 1 accumulation = the reference's 32 sequences per update.

  bash launch/tpu_pod.sh NAME ZONE sft configs/qwen3_5_9b_sft_tpu_v5p.py /mnt/shared/runs/sft \\
       --config.model.hf_checkpoint=/mnt/shared/Qwen3.5-9B --config.train.sft_rows=/mnt/shared/rows/sft_rows.jsonl
"""
from hr1_jax.config import base_config


def get_config():
    c = base_config()
    c.model.family = "qwen3_5_text"
    c.model.hf_checkpoint = ""            # required: local HF folder of Qwen3.5-9B (config + safetensors)
    c.model.param_dtype = "float32"
    c.model.dtype = "bfloat16"
    c.model.remat = True
    c.model.remat_policy = "full"         # keep only each block's input (32k-token sequences)
    c.model.scan_layers = True            # 8 scanned [3 x GDN, attention] groups: one group compiled
    c.mesh.data, c.mesh.fsdp, c.mesh.tensor = 1, -1, 1
    t = c.train
    t.seed = 42
    t.logprob_chunk_size = 2048           # 248K vocab: bound the fp32 logits block to 2048 positions
    t.peak_flops_per_device = 459e12      # v5p bf16 dense
    s = t.sft
    s.lr, s.epochs, s.warmup_ratio, s.weight_decay, s.grad_clip = 1e-5, 2, 0.03, 0.0, 1.0
    s.batch_size = 32                     # one sequence per chip
    s.grad_accum = 1
    s.max_seq_len = 32768
    s.buckets = (4096, 8192, 16384, 32768)
    s.save_every = 100
    t.checkpoint.max_to_keep = 2
    t.checkpoint.export_hf = True
    return c
