"""A patch compiled into its hooks, ready for the agent runtime (reference spec §2.3-§2.4).

`compile_patch` normalises the patch and compiles every `add_code_hook` action; hooks keep patch
order, and several hooks with the same name all run. `CompiledPatch.call` runs them for one call
site and returns one `HookOutcome` per hook, so the runtime can log which hook did what, and
which failed or timed out. Per-episode caps on forced/rewritten actions belong to the runtime.
"""
from __future__ import annotations

from hr1_jax.patch.runner import HOOK_NAMES, HookOutcome, call_hook
from hr1_jax.patch.sandbox import compile_hook
from hr1_jax.patch.schema import normalize_patch


class CompiledPatch:
    def __init__(self, patch: dict, benchmark: str, hooks: dict, *, time_budget_s: float, line_budget: int):
        self.patch = patch
        self.benchmark = benchmark
        self.hooks: dict[str, list] = hooks
        self.time_budget_s = time_budget_s
        self.line_budget = line_budget

    @property
    def hook_names(self) -> list[str]:
        """Names in patch order, repeated when a hook appears several times."""
        return [a["hook"] for a in self.patch["actions"] if a["type"] == "add_code_hook"]

    def call(self, hook_name: str, ctx: dict, nb: dict) -> list[HookOutcome]:
        """Run every hook named `hook_name` in patch order; [] if the patch has none."""
        # Each hook gets its own read-only copy of ctx, so even a write that slips past the
        # read-only containers (e.g. through an alias of dict.update) cannot reach the next hook.
        return [call_hook(fn, ctx, nb, hook_name, time_budget_s=self.time_budget_s, line_budget=self.line_budget)
                for fn in self.hooks.get(hook_name) or ()]

    def effects(self, hook_name: str, ctx: dict, nb: dict) -> list[dict]:
        """Only the successful normalised effects of `call`, in order."""
        return [o.result for o in self.call(hook_name, ctx, nb) if o.result is not None]


def compile_patch(patch: dict, benchmark: str, *, time_budget_s: float = 0.05, line_budget: int = 2000,
                  **normalize_kwargs) -> CompiledPatch:
    """Normalise (raises PatchError) and compile a patch. `normalize_kwargs` as for
    `normalize_patch`; legacy DSL actions, if allowed through, carry no hooks and are ignored."""
    norm = normalize_patch(patch, benchmark, **normalize_kwargs)
    hooks: dict[str, list] = {name: [] for name in HOOK_NAMES}
    for action in norm["actions"]:
        if action["type"] == "add_code_hook":
            hooks[action["hook"]].append(compile_hook(action["code"], norm["benchmark"]))
    return CompiledPatch(norm, norm["benchmark"], {k: v for k, v in hooks.items() if v},
                         time_budget_s=time_budget_s, line_budget=line_budget)
