"""WebShop's side of the patch layer (envs.plugin.PatchSpec): the WebShop sections of the engineer
prompt and the vocabulary patch validation checks WebShop patches against."""
from __future__ import annotations

import re

from envs.plugin import PatchSpec

RETURN_CONTRACTS = """Return contracts (anything else, or None, means "no effect")
- on_init -> {"skills": [{"text": TEXT}, ...], "tool_hint": TEXT}: runs once after reset; up to 5 skills are added to the agent's tips and the tool hint is appended to every tool description of the episode.
- make_pre_hint -> {"message": TEXT}: runs before each agent turn; the message is shown to the agent as a user message.
- on_before_action -> {"kind": "block_and_prompt", "message": TEXT} | {"kind": "rewrite_action", "action": ACTION, "message": TEXT} | {"kind": "force_action", "action": ACTION, "message": TEXT}: runs after the agent picked a tool call and before it executes; block skips the action and shows the message, rewrite/force replace the action.
- on_post_step -> {"kind": "inject_hint", "message": TEXT} | {"kind": "force_action", "action": ACTION, "message": TEXT}: runs after each executed step; a forced action replaces the agent's next tool call.
- ACTION may be a raw value ("buy now", "gray") or a full "click[...]" / "search[...]" string; raw values are wrapped with the agent's current tool, post-step forces are wrapped as clicks."""

DESIGN_TARGET = """Design target (Life-Harness style)
Treat the patch as a small runtime program, not a one-step solver or planner. Keep a stage machine in nb and update it mainly in on_post_step; give soft guidance in make_pre_hint; intervene hard in on_before_action only under narrow conditions. Remember the last hint in nb["last_hint"] and do not repeat it; avoid broad hints that fire on every turn.
- Stages to track: search_query, inspect_results, inspect_product, select_options, budget_check, buy, recover_search_loop.
- Hard interventions are justified only for: Buy Now while a required option is unselected, Buy Now over budget, repeated identical clicks or searches, an action that is visibly invalid on the page.
- on_post_step may force an action only when the evidence makes it safe (for example a single Buy Now after options and budget are satisfied).
- Never force clicks on product ids or titles copied from the traces."""

VARIABLES = """Variables available to hooks (ctx is read-only; read it as a dict or with attributes)
- ctx["action"]: tool ("search_action" | "click_action"), value (raw), value_normalized (stripped, lower-case), final_action ("search[...]" | "click[...]").
- ctx["state"]: page_type ("home" | "search_results" | "product_detail" | "unknown"), has_search_bar, clickables (lower-case list), buy_now_available, back_to_search_count, duplicate_search_count, product_stall_turns, same_click_count, remaining_steps, current_price, price_max.
- ctx["task"]: task_type (apparel | beauty | food | tech | home | general), required_color, required_size, required_material (parsed from the instruction; may be None).
- ctx["predicates"]: required_options_unselected, product_price_over_budget, same_click_repeated, duplicate_search_repeated, search_loop_detected, product_page_stalled, buy_now_available, search_not_available, action_not_admissible.
- ctx["webshop"]: search_queries, asins_visited, current_asin, selected_attributes, attribute_options.
- also ctx["observation"], ctx["step"], ctx["max_step"], ctx["remaining_steps"].
Code hook notes: actions may be raw values ("buy now") or complete click[...] / search[...] strings; a post-step force should prefer complete click actions or raw clickable values. Aim for under 6000 characters per hook."""

RULES = """Rules
- No task indices, ASINs, exact product titles or answers from the traces.
- Intervene only where the evidence shows a recurring failure; when the baseline already succeeds often, prefer no change or a soft hint over broad forcing.
- Put all JSON inside <patch>; no markdown."""

PATCH = PatchSpec(
    task_words="web-shopping agent traces",
    min_hooks=1,
    hook_count_note="For WebShop a single, narrow on_before_action guard is an acceptable patch on its own.",
    return_contracts=RETURN_CONTRACTS,
    design_target=DESIGN_TARGET,
    variables=VARIABLES,
    rules=RULES,
    id_leak_patterns=(
        re.compile(r"\b[bB]0[0-9a-zA-Z]{8}\b"),             # ASIN-like product ids
        re.compile(r"\bwebshop[-_\s]*\d{1,5}\b", re.IGNORECASE),
    ),
    tools=("search_action", "click_action"),
    config_fields=(("price_tolerance", 0.0, 0.5),),
    condition_paths=frozenset(
        {"action." + k for k in ("tool", "value", "value_normalized", "final_action")}
        | {"state." + k for k in ("page_type", "has_search_bar", "clickables", "buy_now_available",
                                  "back_to_search_count", "duplicate_search_count", "product_stall_turns",
                                  "same_click_count", "remaining_steps", "current_price", "price_max")}
        | {"task." + k for k in ("task_type", "required_color", "required_size", "required_material")}),
    path_aliases=(("state.parsed_budget_constraint", "state.price_max"), ("state.budget", "state.price_max"),
                  ("state.budget_max", "state.price_max"), ("state.max_price", "state.price_max")),
    predicates=("required_options_unselected", "product_price_over_budget", "same_click_repeated",
                "duplicate_search_repeated", "search_loop_detected", "product_page_stalled",
                "buy_now_available", "search_not_available", "action_not_admissible"),
    recovery_triggers=("post_step", "budget_check"),
    recovery_effects=("inject_hint", "force_action"),
)
