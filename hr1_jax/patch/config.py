"""Config section `patch_protocol`: response protocol and validator limits (reference spec §1.7, §2.2, §3)."""
import ml_collections

from hr1_jax.config import require

PROTOCOLS = ("prefill_think_patch", "full_think_patch")


def defaults() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.response_protocol = "prefill_think_patch"
    c.require_code_hook_only = True
    c.reject_runtime_noop = True
    # Beyond the reference (which only asked for these in prompts); off = reference behaviour.
    c.enforce_hook_once = False
    c.max_total_code_chars = 0          # 0 = unlimited (reference); prompts ask for < 9000
    # Runner budgets (§3.2), load-independent (docs/hook-budgets.md): the statement count
    # `line_budget` and the guards' work budget decide a hook's fate; wall clock and the hook
    # process's CPU time are far safety nets only (the reference's 50 ms wall clock made
    # rewards depend on machine load).
    c.line_budget = 2000
    c.time_budget_s = 2.0               # wall-clock safety net per hook call
    # Second wall: hooks run in a per-process hook process ("inline": first wall only).
    c.isolation = "process"
    c.cpu_budget_s = 1.0                # the hook process is killed past this much CPU in one call
    c.memory_mb = 1024                  # address space the hook process may add to its start-up size
    c.max_forced_actions_per_episode = 0  # 0 = unlimited (reference)
    return c


def validate(c: ml_collections.ConfigDict, config) -> None:
    require(c.response_protocol in PROTOCOLS, "patch_protocol.response_protocol", f"must be one of {PROTOCOLS}")
    require(c.time_budget_s > 0, "patch_protocol.time_budget_s", "must be > 0")
    require(c.line_budget > 0, "patch_protocol.line_budget", "must be > 0")
    require(c.isolation in ("process", "inline"), "patch_protocol.isolation", "must be 'process' or 'inline'")
    require(c.cpu_budget_s > 0, "patch_protocol.cpu_budget_s", "must be > 0")
    require(c.memory_mb >= 64, "patch_protocol.memory_mb", "must be >= 64")
    require(c.max_total_code_chars >= 0, "patch_protocol.max_total_code_chars", "must be >= 0 (0 = unlimited)")
    require(c.max_forced_actions_per_episode >= 0, "patch_protocol.max_forced_actions_per_episode", "must be >= 0")
