"""The embedded default (`hr1 demo`): CPU, no downloads, <= 20 min on 2 cores.

Scripted targets on small batches of all three benchmarks (DBBench dev -> test, ALFWorld train ->
dev games, WebShop substitute train -> test goals), a tiny Qwen3-style engineer (2 layers, d=128)
with a SentencePiece tokenizer trained on the project's own prompts/patches, template-teacher SFT,
then 48 GRPO steps with real reruns. Deviations from the reference, all for the 20-minute 2-core
budget: batches of 3-5 tasks (reference 10); compact signal-summary prompts and a tokenizer that
holds the teacher library's code blocks as single pieces (hr1_jax/train/compact.py); SFT lr 5e-3
for 30 epochs and GRPO lr 1e-4 (a 0.5M-parameter model, not 9B); GRPO samples at T=1 with dynamic
sampling (see below). Everything else (loss, clip bounds, TIS, KL off, aggregation, grad clip)
is the reference's.
"""
from hr1_jax.config import base_config


def get_config():
    c = base_config()
    c.seed = 0
    # engineer: tiny Qwen3-style decoder; 1024 rows, grown to the trained tokenizer's size if that is
    # larger (a smaller SentencePiece leaves padded rows, masked out of sampling and log-probs)
    c.model.family = "qwen3"
    c.model.vocab_size = 1024
    c.model.hidden_size = 128
    c.model.intermediate_size = 384
    c.model.num_layers = 2
    c.model.num_heads = 4
    c.model.num_kv_heads = 2
    c.model.head_dim = 32
    c.model.tie_word_embeddings = True
    c.mesh.data, c.mesh.fsdp, c.mesh.tensor = 1, -1, 1

    c.rollout.num_workers = 2
    c.rollout.job_timeout_s = 600.0
    c.rollout.batch_size = 5

    t = c.train
    t.seed = 0
    t.logprob_chunk_size = 512
    t.demo.vocab_size = 1024
    t.teacher.kind = "template"
    t.teacher.candidates = 3
    t.checkpoint.export_hf = True
    t.checkpoint.max_to_keep = 1

    t.sft.lr = 5e-3
    t.sft.epochs = 30
    t.sft.warmup_ratio = 0.05
    t.sft.batch_size = 4
    t.sft.grad_accum = 1
    t.sft.max_seq_len = 512
    t.sft.buckets = (192, 256, 320, 384, 512)
    t.sft.save_every = 50

    g = t.grpo
    g.prompts_per_step = 2
    g.samples_per_prompt = 4
    g.global_batch = 8
    g.iterations = 2
    g.micro_batch = 4
    g.num_steps = 48
    g.lr = 1e-4
    # The SFT'd tiny engineer is so peaked that at the reference's T=0.7 / top-p 0.95 every sample of
    # a prompt is the same program (zero-variance groups, no gradient); sample at T=1 and keep only
    # groups with reward spread (dynamic sampling), refilling from the next prompts.
    g.temperature = 1.0
    g.top_p = 1.0
    g.dynamic_sampling = True
    g.max_resample_rounds = 3
    g.max_prompt_tokens = 256
    g.max_response_tokens = 256
    g.save_every = 2

    # Task sets: train rows (teacher SFT + GRPO) and held-out rows (the table), batches of 5 tasks
    # (ALFWorld 3: loading a TextWorld game costs seconds per episode).
    t.demo.dbbench.update(dict(train_split="dev", train_tasks="0:60", heldout_split="test", heldout_tasks="0:50",
                               batch_size=5, train_seeds=(0, 1, 2)))
    t.demo.webshop.update(dict(train_split="train", train_tasks="0:40", heldout_split="test", heldout_tasks="0:30",
                               batch_size=5, train_seeds=(0, 1)))
    t.demo.alfworld.update(dict(train_split="train", train_tasks="0:12", heldout_split="dev", heldout_tasks="0:9",
                                batch_size=3, train_seeds=(0,)))
    return c
