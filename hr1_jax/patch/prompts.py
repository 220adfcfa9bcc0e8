"""Engineer prompt texts for the code-hook protocol (reference spec §1.5-§1.6), in our own words.

A prompt row is `[system, user]` with
    system = system_prompt(benchmark, protocol)
    user   = user_prompt_prefix(benchmark, protocol, style) + "\\n\\n" + evidence_packet
The prefix ends with the marker line EVIDENCE_MARKER. SFT, RL and eval must use the same
protocol and style, or format validity collapses (reference README).

The benchmark's own sections (return contracts, design target, ctx variables, leakage rules, an
extra runtime-context section) come from its `envs.plugin.PatchSpec`; a section it leaves empty
gets the generic text here, so any registered benchmark has a prompt.
"""
from __future__ import annotations

from hr1_jax.patch import specs
from hr1_jax.patch.errors import PatchError
from hr1_jax.patch.parse import PROTOCOLS

EVIDENCE_MARKER = "Observed no-harness rollout evidence:"


def schema_style(benchmark: str) -> str:
    """The one schema style (prompt id) of a registered benchmark."""
    return _descriptor(benchmark).patch.schema_style or f"{benchmark}_life_multihook_v1"


def _descriptor(benchmark: str):
    try:
        return specs.descriptor(benchmark)
    except PatchError:
        raise PatchError("bad_benchmark", f"no engineer prompt for benchmark {benchmark!r}") from None


def _check(benchmark: str, protocol: str, style: str | None = None) -> str:
    own = schema_style(benchmark)
    if protocol not in PROTOCOLS:
        raise PatchError("bad_protocol", f"unsupported response protocol: {protocol!r}")
    style = style or own
    if style != own:
        raise PatchError("bad_style", f"schema style {style!r} is not available for {benchmark} (use {own!r})")
    return style


# --------------------------------------------------------------------------- system / prefix

def system_prompt(benchmark: str, protocol: str) -> str:
    _check(benchmark, protocol)
    bench = _descriptor(benchmark)
    name = bench.report.title
    head = (f"You are a Harness-R1 harness engineer. You receive failed {name} {bench.patch.task_words}, "
            f"work out which failures recur, and write one general {name} code-hook patch for the "
            "agent's runtime harness.")
    if protocol == "full_think_patch":
        return head + (" Answer with exactly two blocks in this order: <think>...</think> with your analysis, "
                       "then <patch>...</patch> holding one JSON object with a top-level \"actions\" array.")
    return head + (" After your reasoning, output the patch as one JSON object with a top-level \"actions\" "
                   "array inside a single <patch>...</patch> block.")


def _scope_sentence(benchmark: str) -> str:
    name = _descriptor(benchmark).report.title
    return (f"Change only the reusable {name} harness (the hooks that run around the agent), never the "
            "answers of particular tasks: the same patch will be applied to tasks you have not seen.")


_PREFILL_SENTENCE = (
    "The chat template has already opened your <think> block. Continue with short reasoning about the "
    "recurring failures, close it with </think>, then write exactly one <patch> block and stop.")


def user_prompt_prefix(benchmark: str, protocol: str, style: str | None = None) -> str:
    """Static part of the user message, ending with the evidence marker line."""
    style = _check(benchmark, protocol, style)
    parts = [_scope_sentence(benchmark)]
    if protocol == "prefill_think_patch":
        parts.append(_PREFILL_SENTENCE)
    parts.append(schema_prompt(benchmark, protocol, style))
    runtime_context = _descriptor(benchmark).patch.runtime_context
    if runtime_context:
        parts.append(runtime_context)
    parts.append(EVIDENCE_MARKER)
    return "\n\n".join(parts)


# --------------------------------------------------------------------------- schema prompt

def _output_contract(protocol: str) -> str:
    if protocol == "prefill_think_patch":
        body = ("When your reasoning is done, write exactly one <patch>...</patch> block that holds a single "
                "JSON object with the top-level keys benchmark, description and actions. Write nothing "
                "after </patch>.")
    else:
        body = ("Write exactly two XML-style blocks, in this order: <think>...</think> with a concise analysis "
                "of the recurring failures, then <patch>...</patch> with a single JSON object whose top-level "
                "keys are benchmark, description and actions.")
    return ("Output contract\n" + body + " The grammar below uses placeholder words in capitals; never copy "
            "those placeholders into your answer.")


def _top_level_contract(benchmark: str) -> str:
    return f"""Top-level contract
- The <patch> block contains one JSON object and nothing else (no markdown fences, no comments).
- "benchmark": exactly "{benchmark}".
- "description": one short, general sentence about what the harness now does.
- "actions": a non-empty array. The only active action type is "add_code_hook"; the old rule/skill/config actions (set_config, edit_tool_hint, add_or_edit_skill, add_guard_rule, add_recovery_rule) are rejected and must not appear."""


def _hook_count_contract(spec) -> str:
    extra = f"\n- {spec.hook_count_note}" if spec.hook_count_note else ""
    return f"""Hook-count contract
- Use between {spec.min_hooks} and 4 add_code_hook actions, and each hook name at most once.
- Order them on_init, on_post_step, make_pre_hint, on_before_action, and leave out any hook the evidence does not call for.
- Keep the code of all hooks together under 9000 characters.{extra}"""


_GRAMMAR = """Grammar
PATCH ::= {"benchmark": BENCHMARK, "description": TEXT, "actions": [ADD_CODE_HOOK, ...]}
ADD_CODE_HOOK ::= {
  "type": "add_code_hook",
  "hook": "on_init" | "on_post_step" | "make_pre_hint" | "on_before_action",
  "code": "def helper(...):\\n    ...\\n\\ndef hook(ctx, nb):\\n    ...\\n    return {...}"
}"""

# The generic benchmark sections, for a benchmark whose PatchSpec leaves them empty.
_RETURN_CONTRACTS = """Return contracts (anything else, or None, means "no effect")
- on_init -> {"skills": [{"text": TEXT}, ...], "tool_hint": TEXT}: runs once after reset; up to 5 skills are added to the agent's tips and the tool hint is added to its tool descriptions.
- make_pre_hint -> {"message": TEXT}: runs before each agent turn; the message is shown to the agent as a user message.
- on_before_action -> {"kind": "block_and_prompt", "message": TEXT} | {"kind": "rewrite_action", "action": ACTION, "message": TEXT} | {"kind": "force_action", "action": ACTION, "message": TEXT}: runs after the agent chose an action and before it executes; block skips it and shows the message, rewrite/force replace it.
- on_post_step -> {"kind": "inject_hint", "message": TEXT} | {"kind": "force_action", "action": ACTION, "message": TEXT}: runs after each executed step; a forced action replaces the agent's next action."""

_DESIGN_TARGET = """Design target (Life-Harness style)
Treat the patch as a small runtime program, not a one-step solver or planner. Keep a stage machine in nb and update it mainly in on_post_step; give soft guidance in make_pre_hint; intervene hard in on_before_action only under narrow conditions. Remember the last hint in nb["last_hint"] and do not repeat it; avoid broad hints that fire on every turn."""

_VARIABLES = """Variables available to hooks (ctx is read-only; read it as a dict or with attributes)
- ctx["observation"], ctx["step"], ctx["max_step"], and the benchmark's own fields (such as ctx["action"], ctx["state"] and ctx["task"]) as the evidence shows them."""

_RULES = """Rules
- No task indices, identifiers or answers from the traces.
- Intervene only where the evidence shows a recurring failure; when the baseline already succeeds often, prefer no change or a soft hint over broad forcing.
- Put all JSON inside <patch>; no markdown."""


_THINK_CONTRACT = """Think contract
Inside <think>, write exactly 4 short bullets:
1. the recurring failure pattern across the traces;
2. the state you keep in nb;
3. which hook owns which piece of logic;
4. the regression you avoid on tasks that already succeed.
Say why the logic carries over to unseen tasks. Do not put JSON inside <think>."""


_CODE_RULES = """Code rules (checked before the patch runs; a violation rejects the whole patch)
- Each code string is at most 8000 characters: exactly one top-level def hook(ctx, nb) plus at most 5 top-level helper functions; nothing else at top level.
- No imports, no global state, no nested functions, no lambda, no classes, no while loops, no with, no raise, no names or attributes starting with "_".
- try/except is allowed only as "except Exception", without else or finally.
- No file access, no eval/exec/compile, no reflection (getattr, setattr, type, dir, vars, globals, locals).
- Available: basic Python builtins (len, str, int, float, bool, list, dict, set, tuple, range, sorted, min, max, sum, any, all, enumerate, zip, map, filter, reversed, round, abs, isinstance), the modules re and math, and SequenceMatcher. Every other name fails at run time.
- ctx is read-only evidence for the current step; nb is a dict that lives for one episode and is shared by all hooks. Helpers cannot see the hook's local variables: pass ctx and nb explicitly.
- Each call has a small time and line budget; a hook that fails or runs over simply has no effect."""


def schema_prompt(benchmark: str, protocol: str, style: str | None = None) -> str:
    """The patch-format section of the user prompt for the multihook style of `benchmark`."""
    _check(benchmark, protocol, style)
    spec = _descriptor(benchmark).patch
    return "\n\n".join([
        _output_contract(protocol),
        _top_level_contract(benchmark),
        _hook_count_contract(spec),
        _GRAMMAR,
        spec.return_contracts or _RETURN_CONTRACTS,
        spec.design_target or _DESIGN_TARGET,
        _THINK_CONTRACT,
        spec.variables or _VARIABLES,
        _CODE_RULES,
        spec.rules or _RULES,
    ])
