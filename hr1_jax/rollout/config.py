"""Config section `rollout`: worker pool, batches, packets and the paired rerun reward (spec §1, §5)."""
import ml_collections

from envs import registry
from hr1_jax.config import require

METRICS = ("delta_average_reward", "delta_pass_rate")


def defaults() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.backend = "local"              # local (subprocess pool) | ray (actors, possibly on other machines)
    c.ray_address = ""               # ray: "" = private local instance, "auto" / "ray://head:10001" = a cluster
    c.ray_resource = ""              # ray: custom resource every rollout actor needs ("" = any node)
    c.num_workers = 2
    # local: worker i and its hook process on CPU i (round-robin over this process's CPUs). A hook
    # call then costs about half (bench_patch), and 1 worker beside its parent reran a group faster,
    # but on 2 cores 2 pinned workers cannot step aside for the parent and were slower
    # (benchmarks/README.md, reruns); several pools on one host would share the first CPUs.
    c.pin_workers = False
    c.job_timeout_s = 1800.0
    # A finished episode waits at most this long after the worker's last message, so that quick ones
    # travel together (each message is a parent wake-up beside the workers); 0 = one message each.
    c.result_flush_s = 0.1
    c.max_job_retries = 2
    # local: a worker past this resident memory (MiB) when a job ends is replaced by a fresh one
    # once its queued job ends too (a leak in an environment or library then never costs the host's
    # memory; an ALFWorld worker holds ~250 MB after 150 games); 0 = never. Ray actors are not.
    c.worker_max_rss_mb = 4096.0
    c.batch_size = 10
    c.reward_threshold = 1.0
    c.reward_metric = "delta_average_reward"
    c.valid_bonus = 0.0
    c.cache_dir = ""                 # "" = <workdir>/reward_cache
    c.cache_lock_timeout_s = 7200.0
    c.baseline_dir = ""              # "" = <workdir>/baseline (hr1 baseline writes, hr1 build-rows reads)
    # Prompt rows (spec §1.2, §1.3, §1.5, §8).
    c.schema_style = ""              # "" = <benchmark>_life_multihook_v1
    c.min_failures = 1
    c.group_size = 4
    c.group_seed = 20260621
    c.group_tail = "pad"             # pad | drop | error
    c.group_counts = ""              # "webshop=130,dbbench=200": exactly N groups per named benchmark (upsampled mix)
    c.packet = ml_collections.ConfigDict()
    c.packet.strategy = "round_robin"
    c.packet.max_traces = 20
    # rollout.packet.<benchmark>: its packet builder's size limits (defaults: its descriptor's Packets.limits)
    for name in registry.names():
        c.packet[name] = ml_collections.ConfigDict(dict(registry.benchmark(name).packets.limits))
    return c


def validate(c, config) -> None:
    require(c.backend in ("local", "ray"), "rollout.backend", "must be local or ray")
    require(c.num_workers >= 1, "rollout.num_workers", "must be >= 1")
    require(isinstance(c.pin_workers, bool), "rollout.pin_workers", "must be true or false")
    require(c.batch_size >= 1, "rollout.batch_size", "must be >= 1")
    require(c.job_timeout_s > 0, "rollout.job_timeout_s", "must be > 0")
    require(0 <= c.result_flush_s <= 60, "rollout.result_flush_s", "must be between 0 and 60 (seconds)")
    require(c.max_job_retries >= 0, "rollout.max_job_retries", "must be >= 0")
    require(isinstance(c.worker_max_rss_mb, (int, float)) and c.worker_max_rss_mb >= 0, "rollout.worker_max_rss_mb",
            "must be a number of MiB >= 0 (0 = never replace a worker for its memory)")
    require(c.reward_metric in METRICS, "rollout.reward_metric", f"must be one of {METRICS}")
    require(c.group_size >= 1, "rollout.group_size", "must be >= 1")
    require(c.group_tail in ("pad", "drop", "error"), "rollout.group_tail", "must be pad, drop or error")
    from hr1_jax.data.rows import group_counts_problem
    require(not group_counts_problem(c.group_counts), "rollout.group_counts", group_counts_problem(c.group_counts))
    require(c.packet.strategy in ("round_robin", "lowest_reward"), "rollout.packet.strategy",
            "must be round_robin or lowest_reward")
    require(c.packet.max_traces >= 1, "rollout.packet.max_traces", "must be >= 1")
