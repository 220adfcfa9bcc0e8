"""hr1-jax: Harness-R1 (arXiv 2608.02276) in JAX.

Subpackages (dependencies run one way, checked by tests/test_layering.py; see README):
  patch     response parsing, patch schema, AST sandbox, hook runner
  runtime   the benchmark-free episode loop with the four lifecycle call sites
  agents    target agents (OpenAI-compatible client, scripted simulators)
  rollout   subprocess worker pool, task identities, packets, rows, paired rerun reward
  models    Flax NNX decoders (Qwen3, Qwen3.5), HF import/export, sampler
  parallel  meshes, logical-axis rules, multi-host initialisation
  train     SFT and GRPO steps, losses, checkpoints
  data      grain sources and row schemas
  eval      fixed-batch run-patch-rerun evaluation and reports

Benchmarks live in the top-level `envs/` behind `envs/base.py`; they import nothing of this
package but `utils` and `errors`. A comment's "§N" is a section of docs/reference.md (the
reference spec), "environments.md §N" one of docs/environments.md.
"""
__version__ = "0.1.0"
