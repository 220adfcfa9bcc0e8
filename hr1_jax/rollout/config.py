"""Config section `rollout`: worker pool, batches, packets and the paired rerun reward (spec §1, §5)."""
import ml_collections

from hr1_jax.config import require

METRICS = ("delta_average_reward", "delta_pass_rate")


def defaults() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.num_workers = 2
    c.job_timeout_s = 1800.0
    c.max_job_retries = 2
    c.batch_size = 10
    c.reward_threshold = 1.0
    c.reward_metric = "delta_average_reward"
    c.valid_bonus = 0.0
    c.cache_dir = ""                 # "" = <workdir>/reward_cache
    c.cache_lock_timeout_s = 7200.0
    return c


def validate(c, config) -> None:
    require(c.num_workers >= 1, "rollout.num_workers", "must be >= 1")
    require(c.batch_size >= 1, "rollout.batch_size", "must be >= 1")
    require(c.job_timeout_s > 0, "rollout.job_timeout_s", "must be > 0")
    require(c.max_job_retries >= 0, "rollout.max_job_retries", "must be >= 0")
    require(c.reward_metric in METRICS, "rollout.reward_metric", f"must be one of {METRICS}")
