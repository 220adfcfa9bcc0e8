"""Engineer prompt texts (placeholder; full texts follow)."""
EVIDENCE_MARKER = "Observed no-harness rollout evidence:"
SCHEMA_STYLES = {"webshop": "webshop_life_multihook_v1", "alfworld": "alfworld_life_multihook_v1",
                 "dbbench": "dbbench_life_multihook_v1"}


def schema_prompt(benchmark, protocol, style=None):
    raise NotImplementedError


def system_prompt(benchmark, protocol):
    raise NotImplementedError


def user_prompt_prefix(benchmark, protocol, style=None):
    raise NotImplementedError
