"""What a benchmark provides beyond its Environment: one `Benchmark` descriptor per benchmark folder
(`envs/<name>/plugin.py` exports it as `BENCHMARK`), listed by name in `envs/registry.py`.

Code outside envs/ asks the descriptor (through the registry) instead of naming a benchmark: which
Environment and scripted target to build, which test split an evaluation uses, how its results are
reported (main-table columns, footnote, task families) and where its data comes from. The
descriptor is cheap to import: heavy parts (the environment, the scripted target) are "module:attr"
paths the registry imports on use. docs/adding-a-benchmark.md walks through a new one.
"""
from __future__ import annotations

import dataclasses
import json
import re
import zlib
from typing import Callable


def _no_family(episode: dict) -> str:
    return ""


def _no_note(source: str) -> str:
    return ""


@dataclasses.dataclass(frozen=True)
class ReportColumns:
    """How the evaluation report shows a benchmark. Main-table columns, in order: one per task
    family (`families`), a mean-reward column when `score` is set, then the success column."""
    title: str                                  # display name, e.g. "WebShop"
    success: str                                # main-table header of the success-rate column
    ablation: str                               # ablation-table header (success change)
    score: str = ""                             # header of a mean reward × 100 column; "" = none
    families: tuple[tuple[str, str], ...] = ()  # (family, main-table header) per task family
    mark: str = ""                              # footnote mark its headers carry
    # The main table's footnote for this benchmark, from its data-source line ("" = none).
    footnote: Callable[[str], str] = _no_note

    @property
    def label(self) -> str:
        """Its name in delta tables and plots (with its mark)."""
        return self.title + self.mark


@dataclasses.dataclass(frozen=True)
class PatchSpec:
    """What the patch layer (hr1_jax/patch) knows of a benchmark: the benchmark-specific sections of
    the engineer prompt and the vocabulary and rules of patch validation. Every default is the
    patch layer's generic choice, so a benchmark without special rules declares nothing. Prompt
    sections left "" get the patch layer's generic text (hr1_jax/patch/prompts.py)."""
    # --- engineer prompt (hr1_jax/patch/prompts.py)
    schema_style: str = ""          # its prompt id; "" = "<name>_life_multihook_v1"
    task_words: str = "agent traces"   # "You receive failed <title> <task_words>, ..."
    min_hooks: int = 2              # the hook-count contract's lower bound
    hook_count_note: str = ""       # an extra line of the hook-count contract ("" = none)
    return_contracts: str = ""      # "Return contracts" section: what each hook may return here
    design_target: str = ""         # "Design target" section: stages, when to intervene
    variables: str = ""             # "Variables available to hooks" section: its ctx fields
    rules: str = ""                 # "Rules" section: what counts as task leakage here
    runtime_context: str = ""       # a section after the schema prompt ("" = none)
    # --- validation (hr1_jax/patch/schema.py, sandbox.py, runner.py)
    # Patterns of its task identifiers: text in any patch (whatever its benchmark) matching one is leakage.
    id_leak_patterns: tuple[re.Pattern, ...] = ()
    # Its numbered-instance actions ("go to cabinet 3"): a hook string literal, or a legacy
    # force/rewrite action, of its patches that matches is rejected ("<name>_instance_leak"); a
    # hook-returned action matching it (any benchmark) is dropped unless ctx["admissible"] has it.
    # It names numbered instances, so it only matches text with a digit (returned actions without one
    # are not asked).
    instance_action_re: re.Pattern | None = None
    # Legacy DSL vocabulary (kept so old patches normalise; inert under code-hook-only).
    tools: tuple[str, ...] = ()                                 # edit_tool_hint targets
    config_fields: tuple[tuple[str, float, float], ...] = ()    # set_config (field, low, high)
    condition_paths: frozenset[str] = frozenset()               # readable "action.*"/"state.*"/"task.*" paths
    path_aliases: tuple[tuple[str, str], ...] = ()              # (alias, condition path)
    predicates: tuple[str, ...] = ()                            # names for {"pred": NAME}
    recovery_triggers: tuple[str, ...] = ("post_step",)
    recovery_effects: tuple[str, ...] = ("block_and_prompt", "inject_hint", "force_action", "rewrite_action")
    legacy_effective: bool = True   # whether legacy DSL actions change its runtime at all


@dataclasses.dataclass(frozen=True)
class TeacherSignals:
    """Which failure modes of the benchmark's teacher library a failure packet shows (the template
    teacher's evidence, hr1_jax/train/teacher/signals.py). Detectors read only the packet text
    the engineer sees, never hidden task data."""
    trace_start: re.Pattern         # the line that opens one failure trace in the packet
    detect: Callable[[str], set]    # one trace's text -> names of the library modules it evidences


def call_args(raw: str) -> dict:
    """A traced tool call's JSON arguments ({} when they are not a JSON object)."""
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


@dataclasses.dataclass(frozen=True)
class DemoTasks:
    """A benchmark's default part in `hr1 demo` (config `train.demo.<name>`, which users override
    key by key): the splits and task ranges ("a:b") of its train, held-out and validation rows."""
    train_split: str
    train_tasks: str
    heldout_split: str
    heldout_tasks: str
    val_split: str
    notes: tuple[str, ...] = ()     # lines the demo's report carries


# The generic trace packet's size limits (config `rollout.packet.<name>` overrides them key by key).
TRACE_LIMITS = (("max_obs_chars", 1200), ("max_assistant_chars", 600), ("max_approx_tokens", 18000))


@dataclasses.dataclass(frozen=True)
class Packets:
    """How the engineer's failure packet is built from a batch's baseline episodes
    (hr1_jax/rollout/packets.py). The defaults give the generic trace packet, so a benchmark
    without special rules declares nothing."""
    title: str = ""                   # the trace packet's display name ("" = the benchmark's name)
    also_forbid: str = ""             # what else the engineer must not encode ("" = nothing)
    # "module:function" (actions [(tool, first argument)], observations) -> its runtime-signal
    # lines of one trace ("" = the generic action/observation counts).
    signals: str = ""
    # "module:function" building its own packet instead of the trace packet:
    # (batch name, scored episodes, task_ids, *, threshold, max_failures (None = its own cap),
    # **limits) -> (markdown, failures included). "" = the trace packet.
    evidence: str = ""
    limits: tuple[tuple[str, int], ...] = TRACE_LIMITS   # its builder's size limits


@dataclasses.dataclass(frozen=True)
class Benchmark:
    """One benchmark's plug-in. `name` is its registry key, its config section and `Task.benchmark`."""
    name: str
    env: str                          # "module:Class" of its envs.base.Environment
    scripted_agent: str               # "module:Class" of its seeded scripted target (task, seed, config)
    test_split: str                   # the split evaluations use by default
    report: ReportColumns
    # (its config section as a dict, recorded(key) -> the values of final[key] its results
    # recorded) -> the report's line naming its data.
    data_source: Callable[[dict, Callable[[str], list[str]]], str]
    config_section: str = ""          # module with its config section's defaults() / validate(); "" = none
    family_of: Callable[[dict], str] = _no_family   # an episode's task family ("" = none)
    eval_notes: tuple[str, ...] = ()                # lines every evaluation report carries
    patch: PatchSpec = PatchSpec()                  # what the patch layer knows of it
    # Its place in training's benchmark order (the demo's rows and tokenizer corpus, the teacher
    # library); ties keep the registry's order. Reports use the registry's order.
    rank: int = 100
    teacher_signals: str = ""       # "module:attr" of its TeacherSignals ("" = no teacher evidence)
    demo: DemoTasks | None = None   # its default task sets in `hr1 demo` (None = not in the demo)
    # "module:function" of what a run using it needs started (e.g. a database server):
    # (config, recorded) -> a context manager around the run yielding (config, how its backend was
    # chosen); recorded(key) lists the values of final[key] the run's stored results recorded.
    # "" = none (envs.registry.services passes the config through).
    services: str = ""
    packets: Packets = Packets()    # how its failure packets are built (rollout)
    summary_note: str = ""          # a line every rollout summary of it carries ("" = none)
    # Its rows' shuffle stream where rows are grouped (hr1_jax/data/rows.group_rows seeds it with
    # seed + offset). None = derived from its name (`row_shuffle_offset`).
    shuffle_offset: int | None = None

    def row_shuffle_offset(self) -> int:
        """`shuffle_offset`, or for a benchmark that sets none a stable number from its name (crc32,
        not hash(), so every process agrees): each benchmark shuffles its rows its own way."""
        if self.shuffle_offset is not None:
            return self.shuffle_offset
        return zlib.crc32(self.name.encode()) % 1000
