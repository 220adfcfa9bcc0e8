"""Engineer prompt texts for the code-hook protocol (reference spec §1.5-§1.6), in our own words.

A prompt row is `[system, user]` with
    system = system_prompt(benchmark, protocol)
    user   = user_prompt_prefix(benchmark, protocol, style) + "\\n\\n" + evidence_packet
The prefix ends with the marker line EVIDENCE_MARKER. SFT, RL and eval must use the same
protocol and style, or format validity collapses (reference README).
"""
from __future__ import annotations

from hr1_jax.patch.errors import PatchError
from hr1_jax.patch.parse import PROTOCOLS

EVIDENCE_MARKER = "Observed no-harness rollout evidence:"
SCHEMA_STYLES = {
    "webshop": "webshop_life_multihook_v1",
    "alfworld": "alfworld_life_multihook_v1",
    "dbbench": "dbbench_life_multihook_v1",
}
_NAMES = {"webshop": "WebShop", "alfworld": "ALFWorld", "dbbench": "DBBench"}
_TASK_WORDS = {
    "webshop": "web-shopping agent traces",
    "alfworld": "household-agent traces",
    "dbbench": "SQL-agent traces",
}


def _check(benchmark: str, protocol: str, style: str | None = None) -> str:
    if benchmark not in SCHEMA_STYLES:  # engineer prompt texts exist for these benchmarks only
        raise PatchError("bad_benchmark", f"no engineer prompt for benchmark {benchmark!r}")
    if protocol not in PROTOCOLS:
        raise PatchError("bad_protocol", f"unsupported response protocol: {protocol!r}")
    style = style or SCHEMA_STYLES[benchmark]
    if style != SCHEMA_STYLES[benchmark]:
        raise PatchError("bad_style", f"schema style {style!r} is not available for {benchmark} "
                                      f"(use {SCHEMA_STYLES[benchmark]!r})")
    return style


# --------------------------------------------------------------------------- system / prefix

def system_prompt(benchmark: str, protocol: str) -> str:
    _check(benchmark, protocol)
    name = _NAMES[benchmark]
    head = (f"You are a Harness-R1 harness engineer. You receive failed {name} {_TASK_WORDS[benchmark]}, "
            f"work out which failures recur, and write one general {name} code-hook patch for the "
            "agent's runtime harness.")
    if protocol == "full_think_patch":
        return head + (" Answer with exactly two blocks in this order: <think>...</think> with your analysis, "
                       "then <patch>...</patch> holding one JSON object with a top-level \"actions\" array.")
    return head + (" After your reasoning, output the patch as one JSON object with a top-level \"actions\" "
                   "array inside a single <patch>...</patch> block.")


def _scope_sentence(benchmark: str) -> str:
    name = _NAMES[benchmark]
    return (f"Change only the reusable {name} harness (the hooks that run around the agent), never the "
            "answers of particular tasks: the same patch will be applied to tasks you have not seen.")


_PREFILL_SENTENCE = (
    "The chat template has already opened your <think> block. Continue with short reasoning about the "
    "recurring failures, close it with </think>, then write exactly one <patch> block and stop.")

_DBBENCH_RUNTIME = """DBBench Runtime Context
- The agent has two tools: execute_sql(query) runs one MySQL statement; commit_final_answer(answers) submits the final answer list and ends the episode.
- Hooks read ctx["action"], ctx["state"], ctx["task"], ctx["dbbench"] and ctx["predicates"]. There is no ctx["world"] in DBBench.
- SELECT-style tasks are judged on the committed answer values. INSERT / UPDATE / DELETE tasks are judged on the final database state, not on the committed text.
- A successful INSERT / UPDATE / DELETE often returns an empty result; that is success, not an error, so do not treat it as a failed query."""


def user_prompt_prefix(benchmark: str, protocol: str, style: str | None = None) -> str:
    """Static part of the user message, ending with the evidence marker line."""
    style = _check(benchmark, protocol, style)
    parts = [_scope_sentence(benchmark)]
    if protocol == "prefill_think_patch":
        parts.append(_PREFILL_SENTENCE)
    parts.append(schema_prompt(benchmark, protocol, style))
    if benchmark == "dbbench":
        parts.append(_DBBENCH_RUNTIME)
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


def _hook_count_contract(benchmark: str) -> str:
    lo = 1 if benchmark == "webshop" else 2
    extra = ("\n- For WebShop a single, narrow on_before_action guard is an acceptable patch on its own."
             if benchmark == "webshop" else "")
    return f"""Hook-count contract
- Use between {lo} and 4 add_code_hook actions, and each hook name at most once.
- Order them on_init, on_post_step, make_pre_hint, on_before_action, and leave out any hook the evidence does not call for.
- Keep the code of all hooks together under 9000 characters.{extra}"""


_GRAMMAR = """Grammar
PATCH ::= {"benchmark": BENCHMARK, "description": TEXT, "actions": [ADD_CODE_HOOK, ...]}
ADD_CODE_HOOK ::= {
  "type": "add_code_hook",
  "hook": "on_init" | "on_post_step" | "make_pre_hint" | "on_before_action",
  "code": "def helper(...):\\n    ...\\n\\ndef hook(ctx, nb):\\n    ...\\n    return {...}"
}"""

_RETURN_CONTRACTS = {
    "webshop": """Return contracts (anything else, or None, means "no effect")
- on_init -> {"skills": [{"text": TEXT}, ...], "tool_hint": TEXT}: runs once after reset; up to 5 skills are added to the agent's tips and the tool hint is appended to every tool description of the episode.
- make_pre_hint -> {"message": TEXT}: runs before each agent turn; the message is shown to the agent as a user message.
- on_before_action -> {"kind": "block_and_prompt", "message": TEXT} | {"kind": "rewrite_action", "action": ACTION, "message": TEXT} | {"kind": "force_action", "action": ACTION, "message": TEXT}: runs after the agent picked a tool call and before it executes; block skips the action and shows the message, rewrite/force replace the action.
- on_post_step -> {"kind": "inject_hint", "message": TEXT} | {"kind": "force_action", "action": ACTION, "message": TEXT}: runs after each executed step; a forced action replaces the agent's next tool call.
- ACTION may be a raw value ("buy now", "gray") or a full "click[...]" / "search[...]" string; raw values are wrapped with the agent's current tool, post-step forces are wrapped as clicks.""",
    "alfworld": """Return contracts (anything else, or None, means "no effect")
- on_init -> {"skills": [{"text": TEXT}, ...], "tool_hint": TEXT}: runs once after reset; up to 5 skills are added to the agent's tips and the tool hint is appended to the take_action description.
- make_pre_hint -> {"message": TEXT}: runs before each agent turn; the message is shown to the agent as a user message.
- on_before_action -> {"kind": "block_and_prompt", "message": TEXT} | {"kind": "rewrite_action", "action": ACTION, "message": TEXT} | {"kind": "force_action", "action": ACTION, "message": TEXT}: runs after the agent chose an action and before it executes; block skips it and shows the message, rewrite/force replace it.
- on_post_step -> {"kind": "inject_hint", "message": TEXT} | {"kind": "force_action", "action": ACTION, "message": TEXT}: runs after each executed step; a forced action replaces the agent's next action.
- ACTION must be copied exactly from ctx["admissible"]; an action naming a numbered object that is not admissible is dropped.""",
    "dbbench": """Return contracts (anything else, or None, means "no effect")
- on_init -> {"skills": [{"text": TEXT}, ...], "tool_hint": TEXT}: runs once after reset; skills become tips in the system prompt and the tool hint is added to the system prompt.
- make_pre_hint -> {"message": TEXT}: runs before each agent turn; the message is shown to the agent as a user message.
- on_before_action -> {"kind": "block_and_prompt", "message": TEXT}: runs before each execute_sql or commit_final_answer call; block skips that call and returns the message as the tool result.
- on_post_step -> {"kind": "inject_hint", "message": TEXT}: runs after each executed SQL statement; the message is shown as a user message.
- rewrite_action and force_action are ignored in DBBench v1; do not return them.""",
}

_DESIGN_TARGET = {
    "webshop": """Design target (Life-Harness style)
Treat the patch as a small runtime program, not a one-step solver or planner. Keep a stage machine in nb and update it mainly in on_post_step; give soft guidance in make_pre_hint; intervene hard in on_before_action only under narrow conditions. Remember the last hint in nb["last_hint"] and do not repeat it; avoid broad hints that fire on every turn.
- Stages to track: search_query, inspect_results, inspect_product, select_options, budget_check, buy, recover_search_loop.
- Hard interventions are justified only for: Buy Now while a required option is unselected, Buy Now over budget, repeated identical clicks or searches, an action that is visibly invalid on the page.
- on_post_step may force an action only when the evidence makes it safe (for example a single Buy Now after options and budget are satisfied).
- Never force clicks on product ids or titles copied from the traces.""",
    "alfworld": """Design target (Life-Harness style)
Treat the patch as a small runtime program, not a one-step solver or planner. Keep a stage machine in nb and update it mainly in on_post_step from task, world, observation, action and admissible; give soft guidance in make_pre_hint; intervene hard in on_before_action only under narrow conditions. Remember the last hint in nb["last_hint"] and do not repeat it; avoid broad hints that fire on every turn.
- Stages to track: find_target, take_target, transform, go_destination, put_target, wrong_inventory.
- Exact actions may only come from ctx["admissible"].
- Hard interventions are justified only when: taking the exact target is admissible, the exact required transform (clean/heat/cool) is admissible, or putting the target at the exact destination is admissible while the traces show loops or the step budget is low.
- Never force a put at the destination while holding a non-target object.
- For two-object tasks use world placed_items, placed_locations and placed_count.""",
    "dbbench": """Design target (Life-Harness style)
Treat the patch as a small runtime program, not a one-step solver or planner. Keep a stage machine in nb and update it mainly in on_post_step; give soft guidance in make_pre_hint; intervene hard in on_before_action only under narrow conditions. Remember the last hint in nb["last_hint"] and do not repeat it; avoid broad hints that fire on every turn.
- Stages to track: need_schema_probe, fixing_unknown_column, fixing_empty_result, mutation_needs_execution, ready_to_commit_candidate, repeated_query_loop.
- Soft hints worth giving: DESCRIBE / SHOW TABLES after a schema error, look at sample rows after an empty SELECT, cast TEXT columns holding numbers before ranking or aggregating, check a mutation before committing.
- on_before_action may block only: a commit before any SQL ran, a commit with an empty answer list, a commit on a mutation task before any mutation was executed.
- Do not put exact SQL from the evidence into hooks, apart from generic schema probes.""",
}

_THINK_CONTRACT = """Think contract
Inside <think>, write exactly 4 short bullets:
1. the recurring failure pattern across the traces;
2. the state you keep in nb;
3. which hook owns which piece of logic;
4. the regression you avoid on tasks that already succeed.
Say why the logic carries over to unseen tasks. Do not put JSON inside <think>."""

_VARIABLES = {
    "webshop": """Variables available to hooks (ctx is read-only; read it as a dict or with attributes)
- ctx["action"]: tool ("search_action" | "click_action"), value (raw), value_normalized (stripped, lower-case), final_action ("search[...]" | "click[...]").
- ctx["state"]: page_type ("home" | "search_results" | "product_detail" | "unknown"), has_search_bar, clickables (lower-case list), buy_now_available, back_to_search_count, duplicate_search_count, product_stall_turns, same_click_count, remaining_steps, current_price, price_max.
- ctx["task"]: task_type (apparel | beauty | food | tech | home | general), required_color, required_size, required_material (parsed from the instruction; may be None).
- ctx["predicates"]: required_options_unselected, product_price_over_budget, same_click_repeated, duplicate_search_repeated, search_loop_detected, product_page_stalled, buy_now_available, search_not_available, action_not_admissible.
- ctx["webshop"]: search_queries, asins_visited, current_asin, selected_attributes, attribute_options.
- also ctx["observation"], ctx["step"], ctx["max_step"], ctx["remaining_steps"].
Code hook notes: actions may be raw values ("buy now") or complete click[...] / search[...] strings; a post-step force should prefer complete click actions or raw clickable values. Aim for under 6000 characters per hook.""",
    "alfworld": """Variables available to hooks (ctx is read-only; read it as a dict or with attributes)
- ctx["action"]: raw (the agent's output), normalized, final_action, in_admissible.
- ctx["state"]: nothing_happens_count, repeated_observation_count, repeated_action_count, invalid_action_count, remaining_steps.
- ctx["task"]: task_type, target_type, destination_type.
- ctx["predicates"]: action_not_admissible, nothing_happens_repeated, same_observation_repeated, same_action_repeated, remaining_steps_low.
- ctx["world"]: current_location, inventory, object_at, visited, unvisited, target_found, target_location, placed_count, placed_items, placed_locations, lamp_location (may be an empty dict).
- ctx["history"]: last_actions, last_observations.
- also ctx["observation"], ctx["admissible"] (exact admissible commands), ctx["output"], ctx["step"], ctx["max_step"], ctx["remaining_steps"].
Code hook notes: when world facts are enough, prefer a narrow force or rewrite chosen from ctx["admissible"] over a broad hint.""",
    "dbbench": """Variables available to hooks (ctx is read-only; read it as a dict or with attributes)
- ctx["action"]: tool ("execute_sql" | "commit_final_answer"), query, answers, h2_action, h2_blocked_reason, commit_gate_action, commit_gate_reason.
- ctx["state"]: sql_count, last_sql, last_result, last_error_kind ("unknown_col" | "syntax" | "empty" | "null_agg" | ""), last_error_text, last_result_was_error, error_streak, empty_streak, text_only_streak, loop_streak, mutation_attempted, candidate_answer, candidate_answer_shape, candidate_implausible, remaining_rounds.
- ctx["task"]: task_type (SELECT-like | INSERT | UPDATE | DELETE), answer_shape, target_table, description.
- ctx["dbbench"]: sql_history, sql_history_raw, discovered_columns (table -> columns), db_response, round.
- ctx["predicates"]: execute_sql, commit_final_answer, no_sql_yet, commit_before_sql, commit_empty_answer, mutation_task, mutation_not_attempted, last_result_error, last_result_empty, unknown_column_error, syntax_error, repeated_sql, candidate_answer_available, remaining_rounds_low, text_only_loop.
Code hook notes: last_error_kind "empty" is not a failure after a mutation; candidate_answer is a noisy guess. Aim for under 6000 characters per hook.""",
}

_CODE_RULES = """Code rules (checked before the patch runs; a violation rejects the whole patch)
- Each code string is at most 8000 characters: exactly one top-level def hook(ctx, nb) plus at most 5 top-level helper functions; nothing else at top level.
- No imports, no global state, no nested functions, no lambda, no classes, no while loops, no with, no raise, no names or attributes starting with "_".
- try/except is allowed only as "except Exception", without else or finally.
- No file access, no eval/exec/compile, no reflection (getattr, setattr, type, dir, vars, globals, locals).
- Available: basic Python builtins (len, str, int, float, bool, list, dict, set, tuple, range, sorted, min, max, sum, any, all, enumerate, zip, map, filter, reversed, round, abs, isinstance), the modules re and math, and SequenceMatcher. Every other name fails at run time.
- ctx is read-only evidence for the current step; nb is a dict that lives for one episode and is shared by all hooks. Helpers cannot see the hook's local variables: pass ctx and nb explicitly.
- Each call has a small time and line budget; a hook that fails or runs over simply has no effect."""

_RULES = {
    "webshop": """Rules
- No task indices, ASINs, exact product titles or answers from the traces.
- Intervene only where the evidence shows a recurring failure; when the baseline already succeeds often, prefer no change or a soft hint over broad forcing.
- Put all JSON inside <patch>; no markdown.""",
    "alfworld": """Rules
- No numbered object or location instances (like "cabinet 3") in code strings; take exact commands from ctx["admissible"] at run time.
- Intervene only where the evidence shows a recurring failure; when the baseline already succeeds often, prefer no change or a soft hint over broad forcing.
- Put all JSON inside <patch>; no markdown.""",
    "dbbench": """Rules
- No cell values, final answers or ground-truth SQL from the traces.
- Intervene only where the evidence shows a recurring failure; when the baseline already succeeds often, prefer no change or a soft hint over broad forcing.
- Put all JSON inside <patch>; no markdown.""",
}


def schema_prompt(benchmark: str, protocol: str, style: str | None = None) -> str:
    """The patch-format section of the user prompt for the multihook style of `benchmark`."""
    _check(benchmark, protocol, style)
    return "\n\n".join([
        _output_contract(protocol),
        _top_level_contract(benchmark),
        _hook_count_contract(benchmark),
        _GRAMMAR,
        _RETURN_CONTRACTS[benchmark],
        _DESIGN_TARGET[benchmark],
        _THINK_CONTRACT,
        _VARIABLES[benchmark],
        _CODE_RULES,
        _RULES[benchmark],
    ])
