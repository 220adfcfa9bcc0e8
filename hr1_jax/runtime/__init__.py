"""The benchmark-free agent runtime: `run_episode(env, agent, task, patch)` -> EpisodeResult."""
from hr1_jax.runtime.episode import INFRA_ERROR, EpisodeResult, HookEvent, run_episode

__all__ = ["INFRA_ERROR", "EpisodeResult", "HookEvent", "run_episode"]
