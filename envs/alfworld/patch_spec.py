"""ALFWorld's side of the patch layer (envs.plugin.PatchSpec): the ALFWorld sections of the engineer
prompt and the vocabulary patch validation checks ALFWorld patches against. Hooks may not
hard-code numbered object instances (INSTANCE_ACTION_RE)."""
from __future__ import annotations

import re

from envs.plugin import PatchSpec

# An action on a numbered object or location ("go to cabinet 3"): instances are numbered per game,
# so a patch must take them from ctx["admissible"] at run time.
INSTANCE_ACTION_RE = re.compile(
    r"\b(?:go to|take|pick up|put|open|close|toggle|clean|heat|cool|slice|examine|use)\b.*\b\d+\b",
    re.IGNORECASE,
)

RETURN_CONTRACTS = """Return contracts (anything else, or None, means "no effect")
- on_init -> {"skills": [{"text": TEXT}, ...], "tool_hint": TEXT}: runs once after reset; up to 5 skills are added to the agent's tips and the tool hint is appended to the take_action description.
- make_pre_hint -> {"message": TEXT}: runs before each agent turn; the message is shown to the agent as a user message.
- on_before_action -> {"kind": "block_and_prompt", "message": TEXT} | {"kind": "rewrite_action", "action": ACTION, "message": TEXT} | {"kind": "force_action", "action": ACTION, "message": TEXT}: runs after the agent chose an action and before it executes; block skips it and shows the message, rewrite/force replace it.
- on_post_step -> {"kind": "inject_hint", "message": TEXT} | {"kind": "force_action", "action": ACTION, "message": TEXT}: runs after each executed step; a forced action replaces the agent's next action.
- ACTION must be copied exactly from ctx["admissible"]; an action naming a numbered object that is not admissible is dropped."""

DESIGN_TARGET = """Design target (Life-Harness style)
Treat the patch as a small runtime program, not a one-step solver or planner. Keep a stage machine in nb and update it mainly in on_post_step from task, world, observation, action and admissible; give soft guidance in make_pre_hint; intervene hard in on_before_action only under narrow conditions. Remember the last hint in nb["last_hint"] and do not repeat it; avoid broad hints that fire on every turn.
- Stages to track: find_target, take_target, transform, go_destination, put_target, wrong_inventory.
- Exact actions may only come from ctx["admissible"].
- Hard interventions are justified only when: taking the exact target is admissible, the exact required transform (clean/heat/cool) is admissible, or putting the target at the exact destination is admissible while the traces show loops or the step budget is low.
- Never force a put at the destination while holding a non-target object.
- For two-object tasks use world placed_items, placed_locations and placed_count."""

VARIABLES = """Variables available to hooks (ctx is read-only; read it as a dict or with attributes)
- ctx["action"]: raw (the agent's output), normalized, final_action, in_admissible.
- ctx["state"]: nothing_happens_count, repeated_observation_count, repeated_action_count, invalid_action_count, remaining_steps.
- ctx["task"]: task_type, target_type, destination_type.
- ctx["predicates"]: action_not_admissible, nothing_happens_repeated, same_observation_repeated, same_action_repeated, remaining_steps_low.
- ctx["world"]: current_location, inventory, object_at, visited, unvisited, target_found, target_location, placed_count, placed_items, placed_locations, lamp_location (may be an empty dict).
- ctx["history"]: last_actions, last_observations.
- also ctx["observation"], ctx["admissible"] (exact admissible commands), ctx["output"], ctx["step"], ctx["max_step"], ctx["remaining_steps"].
Code hook notes: when world facts are enough, prefer a narrow force or rewrite chosen from ctx["admissible"] over a broad hint."""

RULES = """Rules
- No numbered object or location instances (like "cabinet 3") in code strings; take exact commands from ctx["admissible"] at run time.
- Intervene only where the evidence shows a recurring failure; when the baseline already succeeds often, prefer no change or a soft hint over broad forcing.
- Put all JSON inside <patch>; no markdown."""

PATCH = PatchSpec(
    task_words="household-agent traces",
    return_contracts=RETURN_CONTRACTS,
    design_target=DESIGN_TARGET,
    variables=VARIABLES,
    rules=RULES,
    id_leak_patterns=(re.compile(r"\balfworld[-_\s]*\d{1,5}\b", re.IGNORECASE),),
    instance_action_re=INSTANCE_ACTION_RE,
    tools=("take_action",),
    condition_paths=frozenset(
        {"action." + k for k in ("raw", "normalized", "final_action", "in_admissible")}
        | {"state." + k for k in ("nothing_happens_count", "repeated_observation_count",
                                  "repeated_action_count", "invalid_action_count", "remaining_steps")}
        | {"task." + k for k in ("task_type", "target_type", "destination_type")}),
    predicates=("action_not_admissible", "nothing_happens_repeated", "same_observation_repeated",
                "same_action_repeated", "remaining_steps_low"),
    recovery_effects=("inject_hint", "force_action"),
)
