"""What a rerun reports besides rewards: per-hook effect counts and target token usage."""
from hr1_jax.rollout.reward import hook_effects, target_tokens


def _episode(events, tokens=None):
    agent = {"usage": {"total_tokens": tokens}} if tokens is not None else {}
    return {"hook_events": events, "agent": agent}


def test_hook_effects_count_applied_effects_and_runner_statuses():
    eps = [_episode([{"hook": "on_before_action", "effect": "block_and_prompt", "status": "ok"},
                     {"hook": "on_before_action", "effect": None, "status": "none"},
                     {"hook": "make_pre_hint", "effect": None, "status": "timeout"}]),
           _episode([{"hook": "on_before_action", "effect": "block_and_prompt", "status": "ok"}])]
    assert hook_effects(eps) == {"on_before_action": {"block_and_prompt": 2, "none": 1},
                                 "make_pre_hint": {"timeout": 1}}


def test_target_tokens_sum_reported_usage_and_treat_missing_as_zero():
    assert target_tokens([_episode([], 120), _episode([], 30), _episode([])]) == 150
