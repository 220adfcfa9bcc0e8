"""Agent SFT of a tiny target on CPU (`hr1 agent-sft`, a few minutes on 2 cores).

The scripted DBBench target's successful, no-intervention baseline trajectories (run
`hr1 baseline --config=agent_sft_demo --config.split=dev --config.tasks=0:60 --workdir=W` first)
train a tiny Qwen3-style target (2 layers, d=128) with a SentencePiece tokenizer trained on the
rendered rows (the system prompt and tool-schema lines as single pieces: a demo concession). Loss on
every assistant turn and its tool calls, thinking off; `hr1 serve --checkpoint=W/final_params`
then serves it as an OpenAI-compatible target. DBBench runs on SQLite here (no server needed).
"""
from hr1_jax.config import base_config
from hr1_jax.train.agent_sft import agent_sft_defaults


def get_config():
    c = base_config()
    c.seed = 0
    c.benchmark = "dbbench"
    c.split = "dev"
    c.tasks = "0:60"
    c.dbbench.backend = "sqlite"
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
    c.rollout.batch_size = 5

    t = c.train
    t.seed = 0
    t.logprob_chunk_size = 512
    t.agent_sft = agent_sft_defaults()
    t.agent_sft.benchmarks = ("dbbench",)
    t.agent_sft.train_tokenizer_vocab = 1024
    t.checkpoint.export_hf = False
    t.checkpoint.max_to_keep = 1
    s = t.sft
    s.lr = 3e-3
    s.epochs = 8
    s.warmup_ratio = 0.05
    s.batch_size = 4
    s.grad_accum = 1
    s.max_seq_len = 1536
    s.buckets = (512, 768, 1024, 1536)
    s.save_every = 50
    # the served target answers with short turns
    c.target.max_tokens = 160
    return c
