"""ALFWorld's failure modes in a packet's traces (the template teacher's evidence for its library):
from the actions taken, the goal sentence and the observations the engineer sees."""
from __future__ import annotations

import re

from envs.alfworld.tasks import parse_goal
from envs.plugin import TeacherSignals, call_args

_CALL = re.compile(r"^ASSISTANT_TOOL: take_action (.*)$", re.M)
_GOAL = re.compile(r"Your task is to: ([^\n\"\\]*)", re.I)


def detect(trace: str) -> set[str]:
    actions = [str(call_args(raw).get("action", "")).strip().lower() for raw in _CALL.findall(trace)]
    goal_m = _GOAL.search(trace)
    goal = goal_m.group(1).lower() if goal_m else ""
    obs = " ".join(re.findall(r"^OBSERVATION: (.*)$", trace, re.M)).lower()
    out = set()
    if re.search(r"nothing_happens_observations: [1-9]", trace) or "nothing happens" in obs:
        out.add("invalid_action")
    if re.search(r"repeated_action_values:|terminal_signal", trace):
        out.add("action_loop")
    verb = next((v for v in ("clean", "heat", "cool", "hot") if re.search(rf"\b{v}\b", goal)), "")
    if verb:
        verb = "heat" if verb == "hot" else verb
        first_put = next((i for i, a in enumerate(actions) if a.startswith("put ")), None)
        first_tf = next((i for i, a in enumerate(actions) if a.startswith(verb + " ")), None)
        if first_put is not None and (first_tf is None or first_tf > first_put):
            out.add("transform_first")
    if re.search(r"\btwo\b", goal):
        out.add("pick_two")
    if re.search(r"\b(look at|examine)\b", goal):
        out.add("look_at_hold")
    target = parse_goal(goal)["target_type"] if goal else ""
    took = any(a.startswith("take ") and target in a for a in actions)
    if target and re.search(rf"\b{re.escape(target)} \d", obs) and not took:
        out.add("take_target")
    return out


SIGNALS = TeacherSignals(trace_start=re.compile(r"^### Trace case", re.M), detect=detect)
