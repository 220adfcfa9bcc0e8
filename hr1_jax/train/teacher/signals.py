"""Runtime signals read from a failure packet: which of the library's failure modes the evidence shows.

The detectors look only at what the engineer sees (the packet text inside the prompt: tool calls,
observations / tool results, the task sentence), never at hidden task data. One detector per
library module (`programs.LIBRARY`); a module is "evidenced" when its detector fires on at least
one failure trace.
"""
from __future__ import annotations

import json
import re

from envs.alfworld.tasks import parse_goal
from hr1_jax.rollout.prompts import EVIDENCE_MARKER

_DB_TRACE = re.compile(r"^Trace index=", re.M)
_AW_TRACE = re.compile(r"^### Trace case", re.M)
_WS_TRACE = _AW_TRACE
_DB_CALL = re.compile(r"^ASSISTANT_TOOL (execute_sql|commit_final_answer): (.*)$", re.M)
_AW_CALL = re.compile(r"^ASSISTANT_TOOL: take_action (.*)$", re.M)
_WS_CALL = re.compile(r"^ASSISTANT_TOOL: (search_action|click_action) (.*)$", re.M)
_MUTATION_Q = re.compile(r"\b(insert|add|update|change|modify|set|delete|remove)\b", re.I)
_MUTATION_SQL = re.compile(r"^\W*(insert|update|delete|replace)\b", re.I)
_NUMERIC_Q = re.compile(r"\b(highest|lowest|largest|smallest|most|least|maximum|minimum|average|total|sum|"
                        r"greater|more than|less than|fewer|rank|top|bottom|first|last)\b", re.I)
_GOAL = re.compile(r"Your task is to: ([^\n\"\\]*)", re.I)


def evidence_text(row_or_prompt) -> str:
    """The packet part of a row's user prompt (after the evidence marker), or the text itself."""
    if isinstance(row_or_prompt, dict):
        text = row_or_prompt["prompt"][-1]["content"]
    else:
        text = str(row_or_prompt)
    return text.split(EVIDENCE_MARKER, 1)[-1]


def _split(text: str, pattern: re.Pattern) -> list[str]:
    starts = [m.start() for m in pattern.finditer(text)]
    return [text[a:b] for a, b in zip(starts, starts[1:] + [len(text)])]


def _args(raw: str) -> dict:
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _dbbench(trace: str) -> set[str]:
    calls = [(name, _args(raw)) for name, raw in _DB_CALL.findall(trace)]
    sqls = [str(a.get("query", "")).strip() for n, a in calls if n == "execute_sql"]
    commits = [a.get("answers") for n, a in calls if n == "commit_final_answer"]
    question = " ".join(re.findall(r"^USER: (.*)$", trace, re.M))
    results = " ".join(re.findall(r"^TOOL_RESULT: (.*)$", trace, re.M)).lower()
    mutation_q = bool(_MUTATION_Q.search(question)) and not question.lower().lstrip().startswith(("what", "which", "how"))
    out = set()
    if calls and calls[0][0] == "commit_final_answer":
        out.add("commit_before_sql")
    if any(isinstance(c, list) and not any(str(x).strip() for x in c) for c in commits) and not mutation_q:
        out.add("empty_commit")
    if any(isinstance(c, list) and any(len(str(x).split()) > 5 or "answer is" in str(x).lower() for x in c)
           for c in commits) and not mutation_q:
        out.add("answer_format")
    mutations = [q for q in sqls if _MUTATION_SQL.match(q)]
    if mutation_q and commits and not mutations:
        out.add("mutation_commit")
    if len(mutations) != len(set(mutations)):
        out.add("mutation_verify")
    if re.search(r"1054|unknown column|no such column|1064|syntax|1146|doesn't exist|no such table", results):
        out.add("schema_probe")
    if len(sqls) != len(set(sqls)):
        out.add("query_loop")
    if _NUMERIC_Q.search(question) and not mutation_q:
        out.add("text_numeric")
    return out


def _alfworld(trace: str) -> set[str]:
    actions = [str(_args(raw).get("action", "")).strip().lower() for raw in _AW_CALL.findall(trace)]
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


def _webshop(trace: str) -> set[str]:
    calls = []
    for name, raw in _WS_CALL.findall(trace):
        args = _args(raw)
        calls.append((name, str(next(iter(args.values()), "")).strip().lower() if args else ""))
    clicks = [v for n, v in calls if n == "click_action"]
    out = set()
    if "buy now" in clicks:
        out.add("options_before_buy")
        if re.search(r"final_reward: 0\.\d*[1-9]", trace):
            out.add("careful_pick")
    if re.search(r"\$\s?\d", trace) and re.search(r"price|budget|lower than", trace, re.I) and "buy now" in clicks:
        out.add("budget")
    if re.search(r"repeated_search_terms:", trace):
        out.add("search_loop")
    return out


_DETECTORS = {"dbbench": (_DB_TRACE, _dbbench), "alfworld": (_AW_TRACE, _alfworld),
              "webshop": (_WS_TRACE, _webshop)}


def detect(benchmark: str, row_or_prompt) -> dict[str, int]:
    """{module name: number of failure traces showing it} for the packet of a row."""
    pattern, fn = _DETECTORS[benchmark]
    counts: dict[str, int] = {}
    for trace in _split(evidence_text(row_or_prompt), pattern):
        for name in fn(trace):
            counts[name] = counts.get(name, 0) + 1
    return counts
