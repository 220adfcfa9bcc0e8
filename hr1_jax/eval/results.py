"""The evaluation result model shared by the evaluator, the reports and TensorBoard."""
from __future__ import annotations

import dataclasses
import json

from hr1_jax.utils.jsonsafe import json_safe


@dataclasses.dataclass
class TaskPair:
    """One task run without and with a method's intervention (same identity, same target)."""
    benchmark: str
    task_id: int
    seed: int
    batch: str
    baseline_reward: float
    patched_reward: float
    family: str = ""            # the benchmark's task family (its descriptor's family_of); "" = none


@dataclasses.dataclass
class PatchRecord:
    """One patch as a reviewer sees it: why it was written, what it is, what it did."""
    method: str
    benchmark: str
    batch: str
    seed: int
    valid: bool
    reason: str = ""                       # why invalid / how evaluated
    think: str = ""
    patch: dict | None = None
    hook_stats: dict = dataclasses.field(default_factory=dict)   # hook -> {effect/status: count}
    rescued: list = dataclasses.field(default_factory=list)       # task ids
    regressed: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class MethodResult:
    name: str
    description: str = ""
    pairs: list[TaskPair] = dataclasses.field(default_factory=list)
    patches: list[PatchRecord] = dataclasses.field(default_factory=list)
    # target_episodes, target_tokens, engineer_tokens, wall_seconds
    cost: dict = dataclasses.field(default_factory=dict)
    n_invalid: int = 0
    n_eval_failed: int = 0
    upper_reference: bool = False          # e.g. best-of-N chosen by the environment's own signal
    ablation_of: str = ""                  # lifecycle ablation: the full method's name ...
    ablated_site: str = ""                 # ... and the hook site its patches run without


@dataclasses.dataclass
class EvalResult:
    title: str
    methods: list[MethodResult]
    threshold: float = 1.0
    notes: list[str] = dataclasses.field(default_factory=list)

    def to_json(self) -> str:
        # think and patch texts are endpoint output: sanitised so the file is always valid UTF-8 JSON
        return json.dumps(json_safe(dataclasses.asdict(self)), indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "EvalResult":
        raw = json.loads(text)
        methods = []
        for m in raw["methods"]:
            m["pairs"] = [TaskPair(**p) for p in m["pairs"]]
            m["patches"] = [PatchRecord(**p) for p in m["patches"]]
            methods.append(MethodResult(**m))
        raw["methods"] = methods
        return cls(**raw)
