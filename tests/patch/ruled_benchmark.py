"""The toy counter benchmark with patch rules of its own (envs.plugin.PatchSpec data, no name
checks in hr1_jax/patch): a numbered-slot instance pattern, a task-id pattern, recovery rules
limited to hints, legacy actions without runtime effect. Registered by the schema tests as "ruled"."""
import dataclasses
import re

from envs.plugin import PatchSpec
from toy_benchmark import BENCHMARK as COUNTER

BENCHMARK = dataclasses.replace(COUNTER, name="ruled", patch=PatchSpec(
    task_words="slot-game traces",
    runtime_context="Ruled Runtime Context\n- Slots are numbered per game.",
    id_leak_patterns=(re.compile(r"\bgame-\d+\b"),),
    instance_action_re=re.compile(r"\bpress\b.*\bslot \d+\b"),
    tools=("press",),
    recovery_effects=("inject_hint",),
    legacy_effective=False,
))
