"""hr1-jax: Harness-R1 (arXiv 2608.02276) in JAX.

Subpackages (dependencies run one way; see README):
  patch     response parsing, patch schema, AST sandbox, hook runner
  runtime   the benchmark-free episode loop with the four lifecycle call sites
  agents    target agents (OpenAI-compatible client, scripted simulators)
  rollout   subprocess worker pool, task identities, packets, rows, paired rerun reward
  models    Flax NNX decoders (Qwen3, Qwen3.5), HF import/export, sampler
  parallel  meshes, logical-axis rules, multi-host initialisation
  train     SFT and GRPO steps, losses, checkpoints
  data      grain sources and row schemas
  eval      fixed-batch run-patch-rerun evaluation and reports
"""
__version__ = "0.1.0"
