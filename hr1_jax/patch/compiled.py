"""A patch compiled into its hooks, ready for the agent runtime (reference spec §2.3-§2.4).

`compile_patch` normalises the patch and compiles every `add_code_hook` action; hooks keep patch
order, and several hooks with the same name all run. `CompiledPatch.call` runs them for one call
site and returns one `HookOutcome` per hook, so the runtime can log which hook did what, and
which failed or timed out. Per-episode caps on forced/rewritten actions belong to the runtime.

`isolation="process"` (the default, and what rollouts use) runs the hooks in this process's
hook process (`hook_process.py`: the second wall); `"inline"` runs them in the calling process
behind the sandbox alone (benchmarks of the first wall, hooks known to be benign).
"""
from __future__ import annotations

from hr1_jax.patch import hook_process
from hr1_jax.patch.runner import DEFAULT_LINE_BUDGET, DEFAULT_TIME_BUDGET_S, HOOK_NAMES, HookOutcome, call_hook
from hr1_jax.patch.sandbox import compile_hook
from hr1_jax.patch.schema import normalize_patch

ISOLATIONS = ("process", "inline")


class CompiledPatch:
    def __init__(self, patch: dict, benchmark: str, hooks: dict, *, time_budget_s: float, line_budget: int,
                 isolation: str = "process", cpu_budget_s: float = hook_process.DEFAULT_CPU_BUDGET_S,
                 memory_mb: int = hook_process.DEFAULT_MEMORY_MB):
        if isolation not in ISOLATIONS:
            raise ValueError(f"isolation must be one of {ISOLATIONS}, got {isolation!r}")
        self.patch = patch
        self.benchmark = benchmark
        self.hooks: dict[str, list] = hooks
        self.time_budget_s = time_budget_s
        self.line_budget = line_budget
        self.isolation = isolation
        self.limits = {"cpu_budget_s": cpu_budget_s, "memory_mb": memory_mb,
                       "wall_limit_s": max(hook_process.DEFAULT_WALL_LIMIT_S, 2 * time_budget_s)}
        self.sources = {name: [a["code"] for a in patch["actions"]
                               if a["type"] == "add_code_hook" and a["hook"] == name] for name in hooks}
        self.key = hook_process.patch_key(benchmark, self.sources)

    @property
    def hook_names(self) -> list[str]:
        """Names in patch order, repeated when a hook appears several times."""
        return [a["hook"] for a in self.patch["actions"] if a["type"] == "add_code_hook"]

    def call(self, hook_name: str, ctx: dict, nb: dict) -> list[HookOutcome]:
        """Run every hook named `hook_name` in patch order; [] if the patch has none."""
        # Each hook gets its own read-only copy of ctx, so even a write that slips past the
        # read-only containers (e.g. through an alias of dict.update) cannot reach the next hook.
        if hook_name not in self.hooks:
            return []
        if self.isolation == "process":
            host = hook_process.shared_hook_process(**self.limits)
            return host.call(self.key, self.sources, self.benchmark, hook_name, ctx, nb,
                             time_budget_s=self.time_budget_s, line_budget=self.line_budget)
        return [call_hook(fn, ctx, nb, hook_name, time_budget_s=self.time_budget_s, line_budget=self.line_budget)
                for fn in self.hooks[hook_name]]

    def effects(self, hook_name: str, ctx: dict, nb: dict) -> list[dict]:
        """Only the successful normalised effects of `call`, in order."""
        return [o.result for o in self.call(hook_name, ctx, nb) if o.result is not None]


def compile_patch(patch: dict, benchmark: str, *, time_budget_s: float = DEFAULT_TIME_BUDGET_S,
                  line_budget: int = DEFAULT_LINE_BUDGET, isolation: str = "process",
                  cpu_budget_s: float = hook_process.DEFAULT_CPU_BUDGET_S,
                  memory_mb: int = hook_process.DEFAULT_MEMORY_MB, **normalize_kwargs) -> CompiledPatch:
    """Normalise (raises PatchError) and compile a patch. `normalize_kwargs` as for
    `normalize_patch`; legacy DSL actions, if allowed through, carry no hooks and are ignored.
    Compiling here validates every hook (and runs none of its code: top-level defs only)."""
    norm = normalize_patch(patch, benchmark, **normalize_kwargs)
    hooks: dict[str, list] = {name: [] for name in HOOK_NAMES}
    for action in norm["actions"]:
        if action["type"] == "add_code_hook":
            hooks[action["hook"]].append(compile_hook(action["code"], norm["benchmark"]))
    return CompiledPatch(norm, norm["benchmark"], {k: v for k, v in hooks.items() if v},
                         time_budget_s=time_budget_s, line_budget=line_budget, isolation=isolation,
                         cpu_budget_s=cpu_budget_s, memory_mb=memory_mb)


def compile_patch_for_run(patch: dict, benchmark: str, section=None) -> CompiledPatch:
    """`compile_patch` with the budgets, isolation and validator options of a `patch_protocol`
    config section (a ConfigDict or a plain dict; missing keys take the section's defaults)."""
    from hr1_jax.patch.config import defaults
    from hr1_jax.patch.schema import normalize_options
    cfg = defaults()
    if section is not None:
        items = section.items() if hasattr(section, "items") else vars(section).items()
        cfg.update({k: v for k, v in items if k in cfg})
    return compile_patch(patch, benchmark, time_budget_s=float(cfg.time_budget_s), line_budget=int(cfg.line_budget),
                         isolation=cfg.isolation, cpu_budget_s=float(cfg.cpu_budget_s),
                         memory_mb=int(cfg.memory_mb), **normalize_options(cfg))
